/* The admin API's Flow views (docs/operations.md "Flow on the admin API"):
 * the node asks every data group's leader, wherever it is, and answers
 * with the cluster-wide view, so the dashboard polls only the node that
 * served it.
 *
 *   GET /v1/flow/stats[?limit=N]       flows by type and state (the exact
 *                                      counters FLOW.STATS sums), the
 *                                      newest failed flows and the stuck
 *                                      ones (lease expired, not reclaimed;
 *                                      past max_active_ms), N per list
 *                                      (default 20, 1..100)
 *   GET /v1/flow/governance[?limit=N]  GOVERNANCE.OVERVIEW over every
 *                                      group, with the open circuits,
 *                                      pending approvals and budgets at
 *                                      80% or more of their limit picked
 *                                      out
 *
 * A group that does not answer is listed in `errors` and the rest is
 * shown: a dashboard must keep working while a group has no leader. */
#ifndef LS_NODE_FLOW_ADMIN_H
#define LS_NODE_FLOW_ADMIN_H

#include "node/admin/admin.h"
#include "node/shards.h"

/* A budget at or above this share of its limit is "near its limit". */
#define FLOW_ADMIN_BUDGET_NEAR 0.8

/* Registers the routes; `s` must outlive the admin server's requests. */
int flow_admin_register(struct admin_http *a, struct shards *s);

#endif
