/* lodebench: load generators. lodebench.c dispatches to a benchmark
 * family (a table, one line per family); each family lives in its own file
 * (lodebench_felix.c, ...). */
#ifndef LS_CLIENT_LODEBENCH_H
#define LS_CLIENT_LODEBENCH_H

/* Runs a family: argv[0] is the family name. Returns the exit code. */
typedef int (*lodebench_family_fn)(int argc, char **argv);

int lodebench_felix_main(int argc, char **argv);
int lodebench_kv_main(int argc, char **argv);
int lodebench_flow_main(int argc, char **argv);
int lodebench_flow_query_main(int argc, char **argv);

#endif
