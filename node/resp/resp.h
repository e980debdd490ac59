/* The RESP room's public face: the Redis protocol listener (RESP2 and
 * RESP3, over TCP and TLS through net/tls.h) serving the KV surface from
 * the node's Raft groups (node/shards.h) through the FSNP command layer
 * (node/fsnp/fsnp_cmd.h), with the FSNP listener's ACL users. docs/resp.md
 * lists what is served.
 *
 * The server owns its listening sockets, its connections and every command
 * in flight; the caller owns the shards (and the FSNP server lending its
 * users) and keeps them open until the close callback has run. */
#ifndef LS_NODE_RESP_RESP_H
#define LS_NODE_RESP_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/log.h"
#include "node/shards.h"
#include "node/fsnp/fsnp.h"

struct resp_server_config {
	bool tcp;         /* serve plaintext (--resp) */
	const char *host; /* numeric bind address */
	uint16_t port;    /* 0 picks a free port */
	bool tls;         /* serve TLS (--resp-tls) */
	const char *tls_host;
	uint16_t tls_port;
	const char *tls_cert_file;
	const char *tls_key_file;
	const char *tls_ca_file; /* "" or NULL: no client certificates */
	uint64_t node_id;
	unsigned maxclients;
	bool protected_mode;
	uint64_t max_query_bytes;  /* a client's unparsed input */
	uint64_t max_output_bytes; /* a client's unsent replies */
	uint64_t max_items;        /* keys/values in one command */
	/* The FSNP server whose ACL users and requirepass apply (NULL: every
	 * client is the default user without a password). */
	const struct fsnp_server *users;
	/* The node's SCAN resume keys (borrowed; may be NULL). */
	struct scan_cursors *scan_cursors;
};

struct resp_server;
typedef void (*resp_server_close_cb)(void *data);

/* Binds and starts serving. Returns 0, or -1 with the reason in `err`. */
int resp_server_start(struct resp_server **out, uv_loop_t *loop,
                      struct shards *shards,
                      const struct resp_server_config *cfg,
                      const struct log *log, char *err, size_t errlen);

uint16_t resp_server_port(const struct resp_server *s);
uint16_t resp_server_tls_port(const struct resp_server *s);

/* Stops accepting and closes every connection; `cb` runs once they are
 * closed. The server frees itself when its last store operation has
 * called back (shards_close guarantees it). */
void resp_server_close(struct resp_server *s, resp_server_close_cb cb,
                       void *data);

#endif
