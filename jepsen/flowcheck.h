/* FerricFlow checker (the flow workload, jepsen/workload_flow.c). Per key
 * (a flow id), ops are
 *   create ID                  FLOW.CREATE
 *   claim ID FENCE             a claim that returned the flow with that
 *                              fencing token (recorded when the claim
 *                              answered: invocation and ok together)
 *   complete ID FENCE          FLOW.COMPLETE with the claim's tokens
 *   retry ID FENCE             FLOW.RETRY
 *   extend ID FENCE            FLOW.EXTEND_LEASE
 *   read ID STATE FENCE NEXT_RUN LEASE_DEADLINE NOW
 *                              the final FLOW.GET after healing: state,
 *                              fencing token, next_run_at_ms and
 *                              lease_deadline_ms (nil when absent or 0),
 *                              and the reader's clock (Unix ms); a flow
 *                              that does not exist reads `read ID nil`
 * Anomalies:
 *   double-complete  two acknowledged completes with different fencing
 *                    tokens (a replay with the same token is a no-op)
 *   stale-fence      an acknowledged complete, retry or extend invoked
 *                    after a claim with a greater fencing token had
 *                    answered, or after its own lease had ended (an
 *                    acknowledged complete or retry of that token, other
 *                    than a replay of the same operation)
 *   lost             an acknowledged create whose flow the final read
 *                    did not find
 *   lost-complete    an acknowledged complete whose flow the final read
 *                    found in another state
 *   stuck            a final read of a flow neither terminal (completed,
 *                    failed, cancelled) nor claimable: running without
 *                    a lease deadline, waiting without a next run, or
 *                    either more than FLOWCHECK_HORIZON_MS past the read
 * A flow without a final read (cut short by the deadline) is not judged
 * by the last three. */
#ifndef JEPSEN_FLOWCHECK_H
#define JEPSEN_FLOWCHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* How far past the final read a lease deadline or next run may lie: the
 * workload's leases and retry backoffs are seconds. */
#define FLOWCHECK_HORIZON_MS 600000

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the vocabulary or with bad values, or
 * -ENOMEM. */
int jepsen_flowcheck_run(const struct jepsen_history *h,
                         struct jepsen_anomalies *out, char *err,
                         size_t errlen);

#endif
