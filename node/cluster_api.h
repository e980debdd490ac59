/* The admin API of the cluster control plane (docs/operations.md):
 *
 *   POST   /v1/cluster/nodes/{id}/drain      move every replica off a node
 *   DELETE /v1/cluster/nodes/{id}            drain (when alive), then remove
 *   POST   /v1/cluster/nodes/{id}/replace    {"with": NEW_ID} or {}: a dead
 *                                            node's replicas onto NEW_ID (or
 *                                            the others), then removed
 *   POST   /v1/cluster/groups/{id}/transfer  {"to": ID} or {}: leadership
 *   GET    /v1/cluster/ops/{id}              {state, done, total, error}
 *
 * Long operations answer 202 {"op": ID}; refusals are 4xx {"error": ...}.
 * GET /v1/cluster itself is node.c's (shards_status_json). */
#ifndef LS_NODE_CLUSTER_API_H
#define LS_NODE_CLUSTER_API_H

#include "node/admin/admin.h"
#include "node/membership.h"
#include "node/shards.h"

/* Registers the routes; `s` must outlive the admin server's requests. */
void cluster_api_register(struct admin_http *a, struct shards *s);

#endif
