/* Exactly-once checker (idempotent producers, transactional consumers).
 * Per key (a topic), ops are
 *   send K R          (or publish K R) produce record R; a client may
 *                     retry R after an indeterminate send
 *   recv K [R...]     (or consume) the records a consumer processed
 * Every record must be received exactly once if any send of it was
 * acknowledged, at most once if its sends were indeterminate, never if
 * they all failed.
 * Anomalies:
 *   lost        an acknowledged record never received
 *   duplicate   a record received more than once
 *   unexpected  a record received that was never sent, or whose sends
 *               all failed */
#ifndef JEPSEN_ONCECHECK_H
#define JEPSEN_ONCECHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the vocabulary or with bad values, or
 * -ENOMEM. */
int jepsen_oncecheck_run(const struct jepsen_history *h,
                         struct jepsen_anomalies *out, char *err,
                         size_t errlen);

#endif
