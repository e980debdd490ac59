/* The Felix v1 broker: Felix wire protocol over QUIC
 * (node/felix/quic_server.h), served from the replicated store through
 * node/shards.h, with scopes from node/felix/scopes.h.
 *
 * It owns the QUIC listener, every client connection and stream, the
 * request state of each stream, the subscriptions and their fan-out, and
 * the store observer that feeds live delivery. See docs/felix.md for the
 * request flow, limits and what is advertised.
 *
 * What is served and advertised (auth_ok, to clients that offered
 * client_flags): server_flags FELIX_SERVER_FLAGS (0x007F: every frame
 * layout but the forwarded-ack owner suffix) and server_features
 * FELIX_SERVER_FEATURES (0x03FC: cache_delete, consumer groups with dead
 * letters, stream_shards, cache watches with retained delivery, counters,
 * idempotent producers). A node with peers adds what describes a cluster:
 * the owner suffix on forwarded publish acks (0x00FF) and topology and
 * not_leader redirects (0x03FF).
 *
 * Lifetime: felix_server_close() closes the listener and every connection
 * (listeners close first when the node drains); requests still waiting on
 * the Raft groups are answered to nobody, so the server's memory is freed
 * with felix_server_free() once the groups are closed. */
#ifndef LS_NODE_FELIX_SERVER_H
#define LS_NODE_FELIX_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "wire/felix_features.h"
#include "node/log.h"

struct shards;
struct scopes;
struct metrics;
struct felix_server;

#define FELIX_SERVER_FLAGS 0x007Fu
#define FELIX_SERVER_FEATURES                                                  \
	(FELIX_FEATURE_CACHE_DELETE | FELIX_FEATURE_CONSUMER_GROUP |           \
	 FELIX_FEATURE_GROUP_DEAD_LETTERS | FELIX_FEATURE_STREAM_SHARDS |      \
	 FELIX_FEATURE_CACHE_WATCH | FELIX_FEATURE_CACHE_WATCH_RETAINED |      \
	 FELIX_FEATURE_COUNTERS | FELIX_FEATURE_IDEMPOTENT_PRODUCER)
#define FELIX_SERVER_CLUSTER_FLAGS 0x00FFu
#define FELIX_SERVER_CLUSTER_FEATURES                                          \
	(FELIX_SERVER_FEATURES | FELIX_FEATURE_TOPOLOGY |                      \
	 FELIX_FEATURE_REDIRECT)

/* QUIC application error codes the broker closes connections with. */
#define FELIX_APP_NO_ERROR 0x0
#define FELIX_APP_PROTOCOL_ERROR 0x1 /* unknown message type */
#define FELIX_APP_SHUTDOWN 0x2       /* the node is draining */
#define FELIX_APP_AUTH_FAILURES 0x3  /* too many refused auths */

/* Defaults. */
#define FELIX_AUTH_DEADLINE_MS 10000
#define FELIX_SUB_QUEUE_DEFAULT (1u << 20)
#define FELIX_STREAM_INFLIGHT_MAX 4096     /* requests per stream */
#define FELIX_GROUP_MAX_WAIT_DEFAULT 30000 /* long-poll cap, ms */
#define FELIX_GROUP_VISIBILITY_DEFAULT 30000
#define FELIX_GROUP_MAX_ATTEMPTS_DEFAULT 5
#define FELIX_GROUP_MAX_RECORDS 1000 /* per poll, whatever is asked */

struct felix_server_config {
	const char *host; /* numeric bind address */
	uint16_t port;    /* 0 picks a free one */
	const char *cert_file;
	const char *key_file;
	bool dev;                /* auth `none` unless tokens_file */
	const char *tokens_file; /* NULL: none */
	size_t sub_queue_bytes;  /* per subscriber or watch; 0 = default */
	uint32_t max_frame;      /* payload bytes; 0 = 4 MiB */
	/* Consumer groups (0 = the default): the cap on a poll's wait_ms,
	 * how long a claim stays invisible, deliveries before a record is
	 * dead-lettered. */
	uint64_t group_max_wait_ms;
	uint64_t group_visibility_ms;
	uint32_t group_max_attempts;
	/* JWT auth (felix_auth.h), enforced whenever jwks_dir is given. */
	const char *jwks_dir;     /* NULL: off */
	const char *jwt_issuer;   /* NULL: felix-auth */
	const char *jwt_audience; /* NULL: felix-broker */
	unsigned jwt_skew_s;
	/* Refused auths one connection may make before it is closed;
	 * 0 no limit. */
	unsigned auth_max_failures;
};

typedef void (*felix_server_close_cb)(void *data);

int felix_server_start(struct felix_server **out, uv_loop_t *loop,
                       struct shards *shards, struct scopes *scopes,
                       struct metrics *metrics, const struct log *log,
                       const struct felix_server_config *cfg, char *err,
                       size_t errlen);

uint16_t felix_server_port(const struct felix_server *s);

/* The auth mode in words, for the endpoints banner. */
const char *felix_server_auth_mode(const struct felix_server *s);

/* Closes the listener and every connection; `cb` (may be NULL) runs once
 * the listener's handles are closed. */
void felix_server_close(struct felix_server *s, felix_server_close_cb cb,
                        void *data);

/* Frees the server; call after the shards are closed. NULL is fine. */
void felix_server_free(struct felix_server *s);

#endif
