/* Membership operations of a fault-testing run, done the way an operator
 * does them (docs/operations.md): through a member's admin API, from the
 * client namespace, on the hosts' spare nodes.
 *
 *   add           start a spare with --join through a member; done when
 *                 the members see it `active`
 *   drain-remove  POST /v1/cluster/nodes/ID/drain, then DELETE
 *                 /v1/cluster/nodes/ID on a member other than ID; done
 *                 when the node exited 0 after logging its removal
 *   replace       kill -9 a member, start a spare with --join, then POST
 *                 /v1/cluster/nodes/DEAD/replace {"with": NEW}; done when
 *                 the operation finished and NEW is `active`
 *
 * Each runs until a deadline at the latest and says how it ended: a
 * refusal of the cluster (4xx) or a failed operation is an outcome, not
 * an error. The clients' endpoints (struct hosts endpoints) follow: a
 * node leaves them before it is drained or killed, a new node enters them
 * once active. A refused replace starts the killed node again.
 *
 * Blocks (bounded by the deadline); use it from the harness's main
 * thread, as the nemesis's membership callback. */
#ifndef LS_JEPSEN_WORKLOAD_MEMBER_H
#define LS_JEPSEN_WORKLOAD_MEMBER_H

#include <stdint.h>

#include "jepsen/hosts.h"
#include "jepsen/nemesis.h"

/* A nemesis_member_cb; arg is the struct hosts. */
void wl_member_run(void *arg, enum nemesis_member_op op, unsigned pick,
                   int64_t deadline_ns, struct nemesis_member_result *res);

#endif
