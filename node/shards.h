/* The node's replicated core: the raft_io store, the Raft groups (meta
 * group 0 and data groups 1..S) and the shard state machine (store/),
 * wired together on the reactor loop; with peers, also the node transport,
 * the forwarding RPC, snapshot state transfer and the routing snapshot
 * (docs/cluster.md). The protocol servers talk only to this module: they
 * encode a store command (store/command.h), propose it to a group or run a
 * read on it, and decode the result (store/result.h).
 *
 * Placement (DESIGN.md "Sharding and routing"):
 *  - FSNP: slot = crc32(hash tag or key) & 0x3FF, slots spread contiguously
 *    over the S data groups (shards_group_of_slot).
 *  - Felix: stream shard j of scope X lives in data group
 *    1 + ((h(X) + j) mod S), h = the 64-bit Felix routing hash of the
 *    scope name "tenant/namespace/stream" (shards_group_of_scope).
 *  - Replicas: from the membership kept in the meta group (node records
 *    with a state: joining, active, draining, removed). The meta group's
 *    voters are the 3 (3-4 nodes) or 5 lowest placement slots of the
 *    joining and active nodes, data group g's the R of them ranked first
 *    by rendezvous hashing (raft/placement.h); R is recorded in the meta
 *    group when the cluster is bootstrapped. Each group's leader moves
 *    its replicas towards that target one configuration change at a time
 *    (raft/rebalance.h); a node starts a group when its leader adds it and
 *    deletes its replica once it has been removed (docs/cluster.md
 *    "Membership").
 *
 * Forwarding. shards_propose() and shards_read_cmd() run on the group's
 * leader wherever it is: on a node that is not the leader (or does not
 * replicate the group) they are forwarded over the internal RPC and the
 * callback gets the leader's answer. No leader within the forward timeout
 * gives SHARDS_EUNAVAILABLE. shards_read() (a bare barrier, for typed
 * reads of the local state) cannot be forwarded: it is leader-only and
 * answers SHARDS_ENOTLEADER elsewhere; servers use shards_read_cmd() when
 * they may not be on the leader.
 *
 * Status codes are SHARDS_*; shards_strerror() names them for users. */
#ifndef LS_NODE_SHARDS_H
#define LS_NODE_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "store/db.h"
#include "node/log.h"

struct store;
struct store_cmd;
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

#define SHARDS_ADDR_MAX 300

/* One member of a static cluster: its internal (raft) address. */
struct shards_peer {
	uint64_t id;
	const char *host;
	uint16_t port;
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

	/* A cluster bootstrapped with every member including this node
	 * (n_peers = 0 and no join: a single node, no transport). */
	const struct shards_peer *peers;
	unsigned n_peers;
	/* Or a node joining the cluster of the member at this internal
	 * address ("HOST:PORT"; NULL = not joining). */
	const char *join;
	unsigned replicas;              /* R recorded at bootstrap; 0 = 3 */
	unsigned rebalance_concurrency; /* moves led at once; 0 = 2 */
	const char *cluster_id;         /* handshake; NULL = "lodestone" */
	const char *listen_host;        /* internal listener (numeric) */
	uint16_t listen_port;
	const char *data_dir;        /* state transfer work files go in
	                                DATA_DIR/xfer */
	unsigned forward_timeout_ms; /* 0 = 5000 */
	bool no_quiesce;             /* idle groups keep ticking */
	bool read_barriers;          /* reads append a barrier entry instead of
	                                confirming leadership (raft/replica.c) */
	size_t row_cache_bytes;      /* store_set_row_cache() */
	/* Mutual TLS between nodes (docs/cluster.md): all three PEM files,
	 * or NULL. */
	const char *internal_tls_cert;
	const char *internal_tls_key;
	const char *internal_tls_ca;

	/* This node's client addresses, published to the others through the
	 * meta group (ports 0 = not served). */
	const char *advertise_host;
	uint16_t felix_port;
	uint16_t fsnp_port;
	uint16_t fsnp_tls_port;
	uint16_t admin_port;
	uint16_t resp_port;

	/* This node was removed from the cluster (called once): the owner
	 * stops the node, which exits 0. */
	void (*on_removed)(void *data);
	void *on_removed_data;
};

struct shards;

typedef void (*shards_propose_cb)(void *data, int status, const uint8_t *result,
                                  size_t len);
typedef void (*shards_read_cb)(void *data, int status);
typedef void (*shards_close_cb)(void *data);

/* Opens the raft store, the state machine and every group this node
 * replicates, bootstrapping them on first start, starts them and (with
 * peers) the transport. */
int shards_open(struct shards **out, uv_loop_t *loop, struct db *db,
                const struct shards_config *cfg, const struct log *log,
                char *err, size_t errlen);

/* Proposes an encoded store command (copied) to `group`, on its leader
 * wherever it is. `cb` runs exactly once when 0 is returned, with the
 * result bytes (borrowed: valid during the call). A non-zero return means
 * `cb` will not run. */
int shards_propose(struct shards *s, uint32_t group, const void *cmd,
                   size_t len, shards_propose_cb cb, void *data);
/* As shards_propose with `cmd` (malloc'd) handed over instead of copied:
 * freed when the call ends, and at once on a non-zero return. */
int shards_propose_owned(struct shards *s, uint32_t group, uint8_t *cmd,
                         size_t len, shards_propose_cb cb, void *data);

/* As shards_propose for a store command not yet encoded, `len` being its
 * store_cmd_size(): where this node would propose it, it is encoded
 * straight into the Raft entry being filled (no copy of its own); else
 * encoded and forwarded. */
int shards_propose_cmd(struct shards *s, uint32_t group,
                       const struct store_cmd *c, size_t len,
                       shards_propose_cb cb, void *data);

/* Queues a linearizable read of `group` on this node, which must lead it:
 * `cb` runs after a barrier; the caller then reads with shards_store() at
 * shards_now_ms(). Not forwarded: SHARDS_ENOTLEADER elsewhere. */
int shards_read(struct shards *s, uint32_t group, shards_read_cb cb,
                void *data);

/* Serves an encoded read command after a barrier on the leader, wherever
 * it is: proposes nothing, calls `cb` with the store's result. */
int shards_read_cmd(struct shards *s, uint32_t group, const void *cmd,
                    size_t len, shards_propose_cb cb, void *data);

struct store *shards_store(struct shards *s);

/* The leader's wall clock in ms, for TTL visibility on reads. Read once
 * per loop millisecond, so it may be up to about a millisecond behind the
 * time stamped on an entry proposed since. */
uint64_t shards_now_ms(struct shards *s);
/* The wall clock read now (and kept for shards_now_ms): for a decision
 * that must see every entry proposed before it as past. */
uint64_t shards_now_fresh_ms(struct shards *s);

/* The local replica's applied index of `group` (0: none here), as of the
 * core's last look (at most ~100 ms old); it moves with every entry the
 * group applies. */
uint64_t shards_group_applied(struct shards *s, uint32_t group);

unsigned shards_data_groups(const struct shards *s);
uint32_t shards_group_of_slot(const struct shards *s, unsigned slot);
/* The FLOW.QUERY cursor key (flow/flow_cursor.h), kept in the meta group
 * and shared by every node: 0, or -1 while it is not known yet. */
int shards_flow_cursor_key(const struct shards *s, uint8_t key[32]);
uint32_t shards_group_of_scope(const struct shards *s, const char *scope,
                               size_t len, uint32_t shard);

/* Leader of `group` known to this node (0 = none) and whether it is us.
 * Cheap: reads the routing snapshot. */
uint64_t shards_leader(struct shards *s, uint32_t group, bool *is_self);

/* The routing snapshot's answer for one group. Addresses are "" when the
 * leader or its record is unknown. */
struct shards_route {
	uint64_t leader_id;          /* 0 = unknown */
	bool is_self;                /* this node leads it */
	bool replicated;             /* this node holds a replica */
	uint64_t generation;         /* of the routing snapshot */
	uint64_t group_generation;   /* of this group's ownership */
	char felix[SHARDS_ADDR_MAX]; /* the leader's client addresses */
	char fsnp[SHARDS_ADDR_MAX];
	char admin[SHARDS_ADDR_MAX];
};

int shards_route(struct shards *s, uint32_t group, struct shards_route *out);

/* Whether this node holds a replica of `group` (cheap: no addresses). */
bool shards_replicated(struct shards *s, uint32_t group);

/* The leader's Felix and FSNP addresses (either pointer may be NULL).
 * SHARDS_EUNAVAILABLE when no leader or no address is known. */
int shards_leader_addr(struct shards *s, uint32_t group, char *felix,
                       size_t felix_len, char *fsnp, size_t fsnp_len);

/* Bumped whenever a group's leader or generation or a node's addresses
 * change. */
uint64_t shards_generation(const struct shards *s);

/* A group's ownership generation (the Felix seed's "generation" of
 * not_leader and of forwarded publish acks): the Raft term of the newest
 * leader this node knows for the group. It grows with every leader change,
 * never goes back, and is the same on every node that knows the same
 * leader. A placement change that keeps the leader leaves it as is (who
 * serves the group did not change); one that moves the leader raises the
 * term. 0 before any leader is known. */
uint64_t shards_group_generation(const struct shards *s, uint32_t group);

/* The cluster's members as this node sees them: id, whether it is this
 * node, whether it is reachable (this node, or a peer connected over the
 * node transport) and its Felix client address ("" when not published). */
struct shards_node {
	uint64_t id;
	bool self;
	bool connected;
	char felix[SHARDS_ADDR_MAX];
	char resp[SHARDS_ADDR_MAX]; /* RESP listener ("" not served) */
	int state;                  /* STORE_NODE_* */
};
/* Fills up to `max` members in ascending id order; returns how many (1,
 * itself, for a node without peers). */
size_t shards_nodes(struct shards *s, struct shards_node *out, size_t max);

/* The leader of `group` known here and its admin address ("" unknown). */
uint64_t shards_leader_admin(struct shards *s, uint32_t group, char *admin,
                             size_t len);

int shards_status(struct shards *s, uint32_t group, struct group_status *st);

/* Renders the admin view as JSON (malloc'd, owned by the caller):
 * {"peers":[{id, address, connected, felix, fsnp, admin}...],
 *  "generation":G, "groups":[every group: id, leader, voters (the
 *  target), replicated here, and the local replica's Raft state and
 *  configuration], "nodes":[membership], "ops":[operations run here],
 *  "raft_io":{..}, "forward":{..}, "transfer":{..}}. */
int shards_status_json(struct shards *s, char **out, size_t *len);

/* The same view with "groups" empty, plus "commit_total" (the local
 * replicas' commit indexes summed) and "quiescent_groups": for samplers,
 * whose cost must not grow with the groups' JSON. */
int shards_summary_json(struct shards *s, char **out, size_t *len);

/* Writes the core's metric families at scrape time (shards_metrics.c):
 * per-group Raft series while the node replicates at most `max_groups`
 * groups, aggregates always, the Raft log writer, RocksDB, the row cache,
 * forwarding and the node transport's peers. */
struct metrics_out;
void shards_metrics(struct shards *s, struct metrics_out *o,
                    unsigned max_groups);

/* FNV-1a 64 over the group's data range in key order (keys and values),
 * without the group-state record; a local read for comparing replicas. */
struct shards_group_hash {
	uint64_t hash;
	uint64_t keys;
	uint64_t applied_index;
};
int shards_group_hash(struct shards *s, uint32_t group,
                      struct shards_group_hash *out);

const char *shards_strerror(int status);

/* Stops every group and closes the store; `cb` runs once all is closed. */
void shards_close(struct shards *s, shards_close_cb cb, void *data);

#endif
