/* The node's replicated core: the raft_io store, the Raft groups (meta
 * group 0 and data groups 1..S) and the shard state machine (store/), wired
 * together on the reactor loop. The protocol servers talk only to this
 * module: they encode a store command (store/command.h), propose it to a
 * group or queue a linearizable read on it, and decode the result
 * (store/result.h).
 *
 * Placement (DESIGN.md "Sharding and routing"):
 *  - FSNP: slot = crc32(hash tag or key) & 0x3FF, slots spread contiguously
 *    over the S data groups (shards_group_of_slot).
 *  - Felix: stream shard j of scope X lives in data group
 *    1 + ((h(X) + j) mod S), h = the 64-bit Felix routing hash of the
 *    scope name "tenant/namespace/stream" (shards_group_of_scope).
 *
 * Status codes are SHARDS_*; shards_strerror() names them for users. */
#ifndef LS_NODE_SHARDS_H
#define LS_NODE_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/db.h"
#include "node/log.h"

struct store;
struct group_status;

enum {
	SHARDS_OK = 0,
	SHARDS_ENOTLEADER,   /* this node does not lead the group */
	SHARDS_EUNAVAILABLE, /* no leader known / leadership lost: the
	                        command may or may not have been applied */
	SHARDS_EBUSY,        /* too much queued for the group; retry */
	SHARDS_ETOOBIG,      /* command larger than an entry may be */
	SHARDS_ESHUTDOWN,    /* the node is stopping */
	SHARDS_ENOGROUP,     /* no such group */
	SHARDS_EIO,          /* storage failure */
	SHARDS_EINVAL,
};

struct shards_config {
	uint64_t node_id;
	const char *internal_addr;    /* HOST:PORT, this node's raft address */
	unsigned data_groups;         /* S */
	unsigned election_timeout_ms; /* 0 = default */
	unsigned heartbeat_ms;        /* 0 = default */
	unsigned snapshot_threshold;  /* 0 = default */
	unsigned snapshot_trailing;   /* 0 = default */
	size_t max_entry_bytes;       /* 0 = default */
	unsigned maintenance_ms; /* expiry/retention sweep period; 0 = 1000 */
};

struct shards;

typedef void (*shards_propose_cb)(void *data, int status, const uint8_t *result,
                                  size_t len);
typedef void (*shards_read_cb)(void *data, int status);
typedef void (*shards_close_cb)(void *data);

/* Opens the raft store, the state machine and every group, bootstrapping
 * them on first start, and starts them. */
int shards_open(struct shards **out, uv_loop_t *loop, struct db *db,
                const struct shards_config *cfg, const struct log *log,
                char *err, size_t errlen);

/* Proposes an encoded store command (copied) to `group`. `cb` runs exactly
 * once when 0 is returned, with the result bytes (borrowed: valid during
 * the call). A non-zero return means `cb` will not run. */
int shards_propose(struct shards *s, uint32_t group, const void *cmd,
                   size_t len, shards_propose_cb cb, void *data);

/* Queues a linearizable read of `group`: `cb` runs after a barrier on the
 * leader; the caller then reads with shards_store() at shards_now_ms(). */
int shards_read(struct shards *s, uint32_t group, shards_read_cb cb,
                void *data);

/* Serves an encoded read command after a barrier: proposes nothing, calls
 * `cb` with the store's result. */
int shards_read_cmd(struct shards *s, uint32_t group, const void *cmd,
                    size_t len, shards_propose_cb cb, void *data);

struct store *shards_store(struct shards *s);

/* The leader's wall clock in ms, for TTL visibility on reads. */
uint64_t shards_now_ms(const struct shards *s);

unsigned shards_data_groups(const struct shards *s);
uint32_t shards_group_of_slot(const struct shards *s, unsigned slot);
uint32_t shards_group_of_scope(const struct shards *s, const char *scope,
                               size_t len, uint32_t shard);

/* Leader of `group` known to this node (0 = none) and whether it is us. */
uint64_t shards_leader(struct shards *s, uint32_t group, bool *is_self);

int shards_status(struct shards *s, uint32_t group, struct group_status *st);

/* Renders the admin view of every group as JSON (malloc'd, owned by the
 * caller). */
int shards_status_json(struct shards *s, char **out, size_t *len);

const char *shards_strerror(int status);

/* Stops every group and closes the store; `cb` runs once all is closed. */
void shards_close(struct shards *s, shards_close_cb cb, void *data);

#endif
