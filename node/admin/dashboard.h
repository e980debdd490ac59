/* The cluster dashboard on the admin listener:
 *  - GET /             the page (node/admin/dashboard.html, embedded in
 *                      the binary at build time), which polls
 *  - GET /v1/dashboard this node's view of the cluster as one JSON
 *                      document: nodes, groups (leader, voters, lag),
 *                      the history's series, streams and caches with
 *                      their retained records, and the problems found,
 *                      the worst first.
 * The routes borrow the history (history.h), which must outlive them:
 * close it after the admin listener. */
#ifndef LS_NODE_ADMIN_DASHBOARD_H
#define LS_NODE_ADMIN_DASHBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "node/admin/admin_http.h"
#include "node/admin/history.h"

/* A local replica whose applied index trails its commit index by more
 * than this many entries is reported lagging. */
#define DASHBOARD_LAG_ENTRIES 1000
/* At most this many streams and caches are described with their shards'
 * state. */
#define DASHBOARD_MAX_SCOPES 64

struct dashboard {
	struct admin_http *admin; /* for the scope routes, called in-process */
	struct history *history;
	uint64_t node_id;
	char cluster_id[128];
};

/* Adds GET / and GET /v1/dashboard; `d` must outlive the routes. */
int dashboard_register(struct dashboard *d, struct admin_http *a,
                       struct history *h, uint64_t node_id,
                       const char *cluster_id);

/* Builds the /v1/dashboard document (malloc'd, NUL-terminated, owned by
 * the caller). Returns 0, or -1 when the groups are not running or out of
 * memory. */
int dashboard_json(struct dashboard *d, char **out, size_t *len);

/* The embedded page (generated from dashboard.html). */
extern const unsigned char dashboard_page[];
extern const unsigned long dashboard_page_len;

#endif
