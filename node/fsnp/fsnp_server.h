/* The FSNP listener: FerricStore's native binary protocol over TCP (and
 * TLS, net/tls.h, when fsnp-tls is given) on the
 * reactor's libuv loop, serving the KV data types from the node's Raft
 * groups (node/shards.h). docs/fsnp.md describes a request's path, the
 * limits and what is served.
 *
 * The server owns its listening socket, its connections and every request
 * in flight; the caller owns the shards and must keep them open until the
 * close callback has run (requests still executing are answered from
 * them). */
#ifndef LS_NODE_FSNP_SERVER_H
#define LS_NODE_FSNP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/config.h"
#include "node/log.h"
#include "node/admin/admin.h"
#include "node/shards.h"

struct fsnp_server_config {
	const char *host;            /* numeric bind address */
	uint16_t port;               /* 0 picks a free port */
	const char *advertise_host;  /* told to clients (ROUTE, SHARDS) */
	uint16_t advertise_port;     /* 0: the bound port */
	uint16_t advertise_tls_port; /* 0: none advertised */
	/* TLS listener (limits.tls_enabled): its certificate and key (may be
	 * NULL or "": then it is not served) */
	const char *tls_cert_file;
	const char *tls_key_file;
	uint64_t node_id;
	struct config_native limits; /* copied */
	/* The node's SCAN resume keys (borrowed; may be NULL). */
	struct scan_cursors *scan_cursors;
};

struct fsnp_server_stats {
	uint64_t conns_accepted;
	uint64_t conns_refused; /* over maxclients */
	uint64_t requests;
	uint64_t busy;         /* status 4 replies */
	uint64_t bad_requests; /* status 6 replies */
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t flow_requests;         /* FerricFlow requests */
	uint64_t flow_compact_requests; /* of them, compact (flag 0x02) */
	uint64_t flow_compact_replies;  /* flow_claim_jobs_v1, flow_record_v1
	                                   and flow_record_list_v1 replies */
	uint64_t flow_query_compact;    /* flow_query_result_v1 replies */
};

struct fsnp_server;
typedef void (*fsnp_server_close_cb)(void *data);

/* Binds and starts serving. Returns 0, or -1 with the reason in `err`.
 * `metrics` (may be NULL) gets the server's series. */
int fsnp_server_start(struct fsnp_server **out, uv_loop_t *loop,
                      struct shards *shards,
                      const struct fsnp_server_config *cfg,
                      const struct log *log, struct metrics *metrics, char *err,
                      size_t errlen);

uint16_t fsnp_server_port(const struct fsnp_server *s);
/* The bound TLS port, 0 when the TLS listener is not served. */
uint16_t fsnp_server_tls_port(const struct fsnp_server *s);
size_t fsnp_server_conn_count(const struct fsnp_server *s);
void fsnp_server_get_stats(const struct fsnp_server *s,
                           struct fsnp_server_stats *out);

/* A FerricFlow write succeeded on this node (a target may have ended):
 * `cb` runs after each, until set again (NULL: none). The built-in
 * schedule runner uses it to release occurrences held behind a target. */
typedef void (*fsnp_server_flow_write_cb)(void *data);
void fsnp_server_on_flow_write(struct fsnp_server *s,
                               fsnp_server_flow_write_cb cb, void *data);

/* Graceful drain: stops accepting, sends GOAWAY on every connection and
 * closes each once its requests are answered, forcing the rest closed
 * after `grace_ms`. `cb` runs once every connection is closed; the server
 * frees itself when its last store operation has called back (which
 * shards_close guarantees). Later calls do nothing. */
void fsnp_server_close(struct fsnp_server *s, uint64_t grace_ms,
                       fsnp_server_close_cb cb, void *data);

/* ACL users for the node's other Redis-style listener (node/resp/): this
 * server's copy of the meta group's users and --requirepass, checked as
 * FSNP checks them (fsnp_acl.c). `user` is the name a session
 * authenticated as, "" before AUTH (the default user). */
struct fsnp_plan;
/* A new session is the default user without a password. */
bool fsnp_server_acl_open(const struct fsnp_server *s);
/* Some user (or --requirepass) has a password: protected mode is off. */
bool fsnp_server_acl_has_password(const struct fsnp_server *s);
bool fsnp_server_acl_auth(const struct fsnp_server *s, const uint8_t *user,
                          size_t ulen, const uint8_t *pass, size_t plen);
/* 0 allowed, or -1 with Redis's NOPERM text in `msg`. `cats`: ACL_CAT_*
 * (node/auth/acl.h). */
int fsnp_server_acl_check_cmd(const struct fsnp_server *s, const char *user,
                              const char *name, size_t len, uint32_t cats,
                              char *msg, size_t cap);
/* A planned KV command (fsnp_cmd.h): its name, then every key. */
int fsnp_server_acl_check_plan(const struct fsnp_server *s, const char *user,
                               const struct fsnp_plan *pl, char *msg,
                               size_t cap);

#endif
