/* The cluster's membership as this node runs it (docs/cluster.md
 * "Membership", docs/operations.md): the node records of the meta group
 * (reading them, publishing this node's, recording R at bootstrap),
 * joining through a member, the target of every group from the records
 * (raft/placement.h), the moves of the groups this node leads
 * (raft/rebalance.h), starting the replicas a leader adds here and
 * deleting those removed, DATA/cluster, and the cluster operations the
 * admin API starts. Part of the shards object (node/shards_internal.h);
 * everything runs on the reactor. */
#ifndef LS_NODE_MEMBERSHIP_H
#define LS_NODE_MEMBERSHIP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shards;

/* ---- the cluster operations (node/cluster_api.c) ---- */

enum {
	MEMBERSHIP_OP_DRAIN = 1, /* node: draining until it holds nothing */
	MEMBERSHIP_OP_REMOVE,    /* node: drained first when alive, then
	                            removed */
	MEMBERSHIP_OP_REPLACE,   /* dead node: removed, its replicas onto
	                            `with` (0 = the others by rendezvous) */
	MEMBERSHIP_OP_TRANSFER,  /* group leadership to `with` (0 = any) */
	MEMBERSHIP_OP_PROMOTE,   /* node: votes again in the groups placement
	                            gives it */
	MEMBERSHIP_OP_DEMOTE,    /* node: standbys only (its preference is
	                            kept in its record, honoured by
	                            placement) */
};

/* Starts an operation on `node` (a group id for MEMBERSHIP_OP_TRANSFER):
 * 0 with its id in *op, or an HTTP status (4xx; 421 when this node does
 * not lead the group) with the reason in `err`. */
int membership_op_start(struct shards *s, int kind, uint64_t node,
                        uint64_t with, uint64_t *op, char *err, size_t errlen);

/* The operation as JSON {"id", "kind", "node" (or "group"), "state":
 * "running" | "done" | "failed", "done", "total", "error"} (malloc'd);
 * -1 when unknown. */
int membership_op_json(struct shards *s, uint64_t op, char **out, size_t *len);

/* Whether a group that a removed or replaced node held is rebuilt, for
 * the progress of its operation: `have` other holders reach the k nodes
 * of the group's `target`, and for a replace (`with` != 0) the new node
 * holds the group if the target gives it the group. A dead node's last
 * published groups may list one it had already left; the new node, in its
 * slot, is then not due there and the group counts as rebuilt without it.
 * Pure. */
bool membership_group_rebuilt(const uint64_t *target, size_t k, size_t have,
                              uint64_t with, bool with_holds);

/* ---- for node/shards.c ---- */

/* Every group's target from the membership; a changed target bumps the
 * group's generation. */
void membership_recompute(struct shards *s);
/* R: as recorded in the meta group, else as configured. */
unsigned membership_replicas(const struct shards *s);
bool membership_has(const uint64_t *v, size_t n, uint64_t id);
/* "HOST:PORT" or "[V6]:PORT". */
int membership_split_hostport(const char *a, char *host, size_t cap,
                              uint16_t *port);
/* --join's address, resolved once at start. */
int membership_resolve_join(struct shards *s, char *err, size_t errlen);
/* Reads DATA/cluster: members into the shards object, `groups[g]` true
 * for the groups held here. 1 read, 0 absent, -1 not such a file. */
int membership_load(struct shards *s, bool *groups);
/* Creates and starts group g (bootstrapped with `boot` when n > 0). */
int membership_start_group(struct shards *s, uint32_t g, const uint64_t *boot,
                           size_t n, char *err, size_t errlen);
/* This node's record (addresses and the groups it votes in). */
void membership_make_record(struct shards *s);
/* Publishes this node's record when needed, reads the records and R. */
void membership_refresh(struct shards *s);
/* Joining, replica start and deletion, moves, own state, operations,
 * DATA/cluster: every RECONCILE period. */
void membership_tick(struct shards *s);
/* The transport's hooks (transport_join_fn, transport_unknown_fn). */
int membership_on_join(void *data, uint64_t id, const char *record, size_t len,
                       char *reply, size_t cap);
void membership_on_unknown(void *data, uint64_t peer, uint32_t group, int type);
/* Adds "nodes", "ops" and "members_known" to the /v1/cluster view. */
void membership_status_json(struct shards *s, json_t *root);

#endif
