/* lodebench: load generators. lodebench.c dispatches to a benchmark
 * family (a table, one line per family); each family lives in its own file
 * (lodebench_felix.c, ...). */
#ifndef LS_CLIENT_LODEBENCH_H
#define LS_CLIENT_LODEBENCH_H

#include <stddef.h>
#include <stdint.h>

/* Runs a family: argv[0] is the family name. Returns the exit code. */
typedef int (*lodebench_family_fn)(int argc, char **argv);

/* Splits "HOST:PORT" (the last colon) into host (NUL-terminated, at most
 * cap - 1 bytes) and port 1..65535. 0, or -1 when v has no colon, the
 * host does not fit or the port is not a number in range. */
int lodebench_split_hostport(const char *v, char *host, size_t cap,
                             uint16_t *port);

int lodebench_felix_main(int argc, char **argv);
int lodebench_kv_main(int argc, char **argv);
int lodebench_flow_main(int argc, char **argv);
int lodebench_flow_query_main(int argc, char **argv);

#endif
