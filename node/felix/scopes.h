/* Registered scopes: the streams and caches of every tenant, kept in the
 * meta group (group 0, STORE_OP_SCOPE_*), and this node's cache of them.
 *
 * The module owns:
 *  - an in-memory scope cache (kind, tenant, namespace, name -> shard
 *    count, retention), filled from the meta group after a barrier: a full
 *    listing at start and every refresh period, a single describe on a
 *    miss, and updated at once by changes made through this node. Misses
 *    are remembered for a second (negative entries) so an unknown name
 *    does not cost a meta read per request;
 *  - dev-mode auto-creation of unknown scopes on first use;
 *  - the scopes file (config `scopes-file`), registered at start;
 *  - retention: on a timer, the leader of each data group proposes
 *    STREAM_TRIM for the stream shards it leads whose retention is
 *    exceeded, and CACHE_COMPACT for the cache shards it leads whose
 *    change log holds more than `cache_history` changes past its
 *    compaction point;
 *  - the admin HTTP API /v1/streams and /v1/caches.
 *
 * Scope names: tenant and namespace are 1..255 bytes without '/', the name
 * 1..1024 bytes; none may hold control characters. The store-level scope
 * of a stream or cache shard is "tenant/namespace/name".
 *
 * Everything runs on the reactor loop. */
#ifndef LS_NODE_SCOPES_H
#define LS_NODE_SCOPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/admin/admin.h"
#include "node/log.h"

struct shards;
struct scopes;

#define SCOPES_TENANT_MAX 255
#define SCOPES_NS_MAX 255
#define SCOPES_NAME_MAX 1024
/* "tenant/namespace/name" with its NUL. */
#define SCOPES_FULL_MAX                                                        \
	(SCOPES_TENANT_MAX + SCOPES_NS_MAX + SCOPES_NAME_MAX + 3)

struct scope_info {
	uint8_t kind; /* STORE_SCOPE_STREAM or STORE_SCOPE_CACHE */
	uint32_t shards;
	uint64_t retention_bytes; /* 0 = unlimited */
	uint64_t retention_ms;    /* 0 = unlimited */
	uint8_t durability;
	uint64_t created_ms;
	char full[SCOPES_FULL_MAX]; /* "tenant/namespace/name" */
	size_t full_len;
};

struct scopes_config {
	bool auto_create;            /* dev mode: create unknown scopes */
	unsigned auto_create_shards; /* their shard count */
	const char *scopes_file;     /* NULL: none */
	unsigned refresh_ms;         /* full re-listing period; 0 = 5000 */
	unsigned retention_ms;       /* retention sweep period; 0 = 1000 */
	/* Cache changes kept replayable per cache shard before the leader
	 * compacts older ones (in the same sweep); 0 = never compact. */
	uint64_t cache_history;
};

/* Result of scopes_find(). */
enum {
	SCOPES_FOUND = 0,
	SCOPES_ABSENT,  /* known not to exist (negative entry) */
	SCOPES_UNKNOWN, /* not cached: call scopes_lookup() */
};

/* Status given to scopes_lookup_cb. */
enum {
	SCOPES_OK = 0,
	SCOPES_ENOTFOUND,    /* no such scope (and not auto-created) */
	SCOPES_EUNAVAILABLE, /* the meta group did not answer */
	SCOPES_EINVAL,       /* bad name */
};

typedef void (*scopes_lookup_cb)(void *data, int status);
typedef void (*scopes_close_cb)(void *data);

/* Reads the scopes file (errors name its line), starts the timers. */
int scopes_open(struct scopes **out, uv_loop_t *loop, struct shards *shards,
                const struct log *log, const struct scopes_config *cfg,
                char *err, size_t errlen);

/* Adds the /v1/streams and /v1/caches routes. */
void scopes_register_admin(struct scopes *s, struct admin_http *a);

/* Felix auth for the routes' changes (NULL: none). In JWT mode creating
 * or deleting a scope needs a bearer token of its tenant granting
 * ns.manage on its namespace (felix_auth_admin). */
struct felix_auth;
void scopes_set_auth(struct scopes *s, const struct felix_auth *auth);

/* Checks names; 0, or -1 with a message naming the bad part. */
int scopes_check_names(const char *tenant, const char *ns, const char *name,
                       char *err, size_t errlen);

/* The cached scope, if any: SCOPES_FOUND fills *out (may be NULL). */
int scopes_find(struct scopes *s, uint8_t kind, const char *tenant,
                const char *ns, const char *name, struct scope_info *out);

/* Resolves a scope the cache does not hold: reads it from the meta group
 * (auto-creating it in dev mode when `create`). `cb` runs exactly once,
 * later, when 0 is returned; scopes_find() then answers from the cache.
 * Concurrent lookups of one name share one meta read. */
int scopes_lookup(struct scopes *s, uint8_t kind, const char *tenant,
                  const char *ns, const char *name, bool create,
                  scopes_lookup_cb cb, void *data);

/* Whether unknown scopes are auto-created (dev mode). */
bool scopes_auto_create(const struct scopes *s);

/* Stops the timers; pending lookups are answered SCOPES_EUNAVAILABLE by
 * the groups closing. `cb` runs once the handles are closed; the module
 * is freed after the shards close (scopes_free). */
void scopes_close(struct scopes *s, scopes_close_cb cb, void *data);
void scopes_free(struct scopes *s);

#endif
