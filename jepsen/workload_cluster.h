/* What a fault-testing run learns of its cluster from the nodes' admin
 * API (GET /v1/cluster, see node/shards.h shards_status_json): which node
 * leads each Raft group. It answers the nemesis's leader oracle (isolate
 * the leader of a shard) and tells when a fresh cluster is ready for
 * clients (every group led by a ready leader).
 *
 * Every call asks over HTTP from the client namespace and blocks (bounded
 * by its timeout); use it from the harness's main thread. */
#ifndef LS_JEPSEN_WORKLOAD_CLUSTER_H
#define LS_JEPSEN_WORKLOAD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jepsen/hosts.h"

#define WL_MAX_GROUPS 1025 /* meta group + up to 1024 data groups */

/* One group as one node sees it. */
struct wl_group_view {
	uint64_t leader;  /* 0: unknown */
	uint64_t term;    /* of this node's replica, 0 without one */
	bool here_leader; /* this node's replica leads it and is ready */
};

#define WL_MAX_MEMBERS 64 /* members over a cluster's life */

/* One member as one node sees it (nodes[] of /v1/cluster). */
struct wl_member_view {
	uint64_t id;
	char state[16]; /* joining, active, draining, removed */
	bool connected;
};

/* One node's /v1/cluster. */
struct wl_cluster_view {
	uint64_t node_id;
	unsigned n_groups; /* groups[0 .. n_groups) by id */
	struct wl_group_view groups[WL_MAX_GROUPS];
	unsigned n_members;
	struct wl_member_view members[WL_MAX_MEMBERS];
};

/* Member `id` in v, or NULL when v does not know it. */
const struct wl_member_view *wl_cluster_member(const struct wl_cluster_view *v,
                                               uint64_t id);

/* Fetches and parses node `id`'s view from namespace `ns`. 0, or -errno
 * with why in err. */
int wl_cluster_fetch(struct hosts *h, const char *ns, unsigned id,
                     unsigned timeout_ms, struct wl_cluster_view *v, char *err,
                     size_t cap);

/* The node leading `group` now: among the running members that answer,
 * the one that says it leads the group with the highest term. 0 and
 * *node, or -ENOENT when no node claims it. */
int wl_cluster_leader(struct hosts *h, uint32_t group, unsigned *node);

/* Waits until every running member answers and every group
 * 0..groups-1 is led by a ready leader that each of them knows. 0, or
 * -ETIMEDOUT with why in err. */
int wl_cluster_wait_ready(struct hosts *h, unsigned groups, unsigned timeout_ms,
                          char *err, size_t cap);

#endif
