/* Set checker. Per key (a set), ops are
 *   add K R          add record R
 *   read K R...      (ok) the whole set as read
 * and the final read of a key is its ok read that completed last.
 * Anomalies:
 *   lost        R was acknowledged (or seen by a read) before the final
 *               read began, but the final read lacks it
 *   duplicate   one read lists R twice
 *   unexpected  a read lists R that was never added, or whose adds all
 *               failed, or before any add of it began
 *   unread      the key has adds but no ok read, so nothing was checked
 * Indeterminate adds may or may not show up; failed ones must not. */
#ifndef JEPSEN_SETCHECK_H
#define JEPSEN_SETCHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the set vocabulary or with the wrong values,
 * or -ENOMEM. */
int jepsen_setcheck_run(const struct jepsen_history *h,
                        struct jepsen_anomalies *out, char *err, size_t errlen);

#endif
