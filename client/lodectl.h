/* lodectl: the operator's command-line tool.
 *
 *     lodectl [GLOBAL OPTIONS] FAMILY SUBCOMMAND ARGS...
 *
 * client/lodectl.c parses the global options and dispatches on FAMILY
 * through a table, one line per family; each family lives in a file of its
 * own (client/lodectl_<family>.c) and is handed argv from the family name
 * on (argv[0] = "kv", argv[1] = the subcommand). Exit status: 0 success,
 * 1 the server refused or failed, 2 bad usage, 3 the server could not be
 * reached. */
#ifndef LS_CLIENT_LODECTL_H
#define LS_CLIENT_LODECTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client/fsnp_client.h"
#include "wire/buf.h"
#include "wire/fsnp_value.h"

#define LODECTL_EXIT_OK 0
#define LODECTL_EXIT_REFUSED 1
#define LODECTL_EXIT_USAGE 2
#define LODECTL_EXIT_UNREACHABLE 3

/* Global options, parsed before the family name. */
struct lodectl_global {
	char admin[300];     /* --admin HOST:PORT (default 127.0.0.1:8080) */
	char fsnp_host[256]; /* --fsnp HOST:PORT (default 127.0.0.1:6388) */
	uint16_t fsnp_port;
	const char *username; /* --user (default "default") */
	const char *password; /* --password, or $LODESTONE_PASSWORD */
	uint64_t timeout_ms;  /* --timeout-ms (default 10000) */
	bool json;            /* --json: machine-readable output */
	bool topology;        /* --topology: route keys by SHARDS */
	bool fsnp_tls;        /* --fsnp-tls: TLS to the FSNP listener */
	const char *tls_ca;   /* --tls-ca FILE (default: system CAs) */
	const char *tls_cert; /* --tls-cert FILE: a client certificate */
	const char *tls_key;  /* --tls-key FILE (default: --tls-cert) */
};

/* A family's entry point; argv[0] is the family name. */
typedef int (*lodectl_family_fn)(const struct lodectl_global *g, int argc,
                                 char **argv);

/* Families, each in its own file. */
int lodectl_kv_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_acl_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_ping_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_flow_main(const struct lodectl_global *g, int argc, char **argv);
/* `lodectl flow schedule ...` (client/lodectl_flow_sched.c). */
int lodectl_flow_schedule_main(const struct lodectl_global *g, int argc,
                               char **argv);
void lodectl_flow_schedule_usage(FILE *f);
/* `lodectl flow governance ...` (client/lodectl_flow_gov.c). */
int lodectl_flow_governance_main(const struct lodectl_global *g, int argc,
                                 char **argv);
void lodectl_flow_governance_usage(FILE *f);
/* `lodectl flow query` (client/lodectl_flow_query.c); argv[0] is
 * "query". */
int lodectl_flow_query_main(const struct lodectl_global *g, int argc,
                            char **argv);
void lodectl_flow_query_usage(FILE *f);
int lodectl_felix_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_stream_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_cache_main(const struct lodectl_global *g, int argc, char **argv);
int lodectl_cluster_main(const struct lodectl_global *g, int argc, char **argv);
/* `lodectl cert ca|node` (client/lodectl_cert.c), offline. */
int lodectl_cert_main(const struct lodectl_global *g, int argc, char **argv);
/* The subjectAltName value for `hosts` ("DNS:a,IP:127.0.0.1"; "" for
 * none). Returns 0, or -1 for a host that is neither a DNS name nor an IP
 * address, or when `cap` is too small. */
int lodectl_cert_san(const char *const *hosts, size_t n, char *out, size_t cap);
/* `lodectl felix keygen|token` (client/lodectl_token.c), offline; argv[0]
 * is the subcommand, `tenant` the one given before it (or NULL). */
int lodectl_felix_token_main(int argc, char **argv, const char *tenant);

/* --- Helpers (client/lodectl.c) ------------------------------------------ */

/* A plain HTTP/1.0 request to the admin listener `admin` (HOST:PORT),
 * with `Authorization: Bearer $LODESTONE_ADMIN_TOKEN` when that is set.
 * Returns 0 with the response status in *status and its body
 * (NUL-terminated, truncated to cap) in `out`, or -1 with a message in
 * `out`. */
int lodectl_http(const char *admin, const char *method, const char *path,
                 const char *body, int *status, char *out, size_t cap);

/* Connects to the FSNP listener of `g`; prints why not on stderr. */
int lodectl_fsnp_connect(const struct lodectl_global *g,
                         struct fsnp_sync **out);
/* Prints a typed value: redis-cli-like text, or JSON with g->json. */
void lodectl_print_value(const struct lodectl_global *g, FILE *f,
                         const struct fsnp_val *v);
/* Prints a reply payload (the bytes after the status): the value on stdout
 * when status is 0, else the error on stderr. Returns the exit status. */
int lodectl_print_reply(const struct lodectl_global *g, uint16_t status,
                        const struct wbuf *payload);

#endif
