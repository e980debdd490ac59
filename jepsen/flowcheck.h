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
 * by the last three.
 *
 * Schedules (a key is a schedule id when it has schedule or target ops):
 *   create SID                 FLOW.SCHEDULE.CREATE
 *   target SID TID             a target flow found after the run; TID is
 *                              SID:<due_at_ms>:<fire_count>
 *   schedule SID KIND STATE EVERY START FIRES COALESCED NEXT END_REASON
 *                              the final FLOW.SCHEDULE.GET (EVERY nil but
 *                              for intervals; START the first due time,
 *                              a one-shot's at_ms; NEXT nil when
 *                              terminal); `schedule SID nil`: not found
 * Anomalies, for a schedule with a final read:
 *   double-fire        one occurrence (due time) with two targets, or one
 *                      fire count with two due times
 *   lost-fire          fire_count N but a target of 1..N not found
 *   extra-fire         a target whose fire count is above fire_count
 *   out-of-order       a later fire due before an earlier one
 *   bad-target         a target id not of the schedule's form
 *   bad-due            an interval's first target not due at the start, or
 *                      a one-shot's not at its at_ms
 *   early-fire         an interval target (or the next run) less than one
 *                      period after the one before
 *   coalesce-mismatch  the whole periods the gaps between an interval's
 *                      targets (and its next run) skip differ from its
 *                      coalesced_count (a fire k >= 1 periods late
 *                      coalesces k and runs next one period after the
 *                      fire, so its gap spans k + 1 periods)
 *   one-shot           a one-shot not completed (one_shot_fired) with
 *                      exactly one fire
 *   lost               an acknowledged create the final read did not find
 */
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
