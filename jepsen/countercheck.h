/* Counter checker. Per key (a counter starting at 0), ops are
 *   add K D      add the integer D (negative allowed)
 *   read K V     (ok) the counter's value
 * A read can only return a value between the least and the most the
 * counter could hold while it ran: at least every acknowledged positive
 * add that completed before the read began plus every negative add that
 * had begun (and did not fail) before it ended, at most the reverse. For a
 * final read after all adds this is "at least the sum of acknowledged
 * deltas, at most the sum of attempted ones".
 * Anomalies:
 *   out-of-bounds  a read outside those bounds
 *   unread         the key has adds but no ok read */
#ifndef JEPSEN_COUNTERCHECK_H
#define JEPSEN_COUNTERCHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the counter vocabulary, a value that is not
 * an integer or sums that overflow 64 bits, or -ENOMEM. */
int jepsen_countercheck_run(const struct jepsen_history *h,
                            struct jepsen_anomalies *out, char *err,
                            size_t errlen);

#endif
