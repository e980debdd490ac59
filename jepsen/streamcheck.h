/* Stream checker. Per key (a shard, or a stream partition), ops are
 *   append K R            invoke; its ok completion is "append K R O"
 *                         with O the offset the server assigned
 *   read K O:R O:R ...    (ok) records with their offsets, in the order
 *                         the server returned them
 * and the final read of a key is its ok read that completed last; it is
 * expected to start at the first retained offset.
 * Anomalies:
 *   lost        an acknowledged record (or one an earlier read saw) is
 *               missing from the final read, though its offset is not
 *               below the final read's first offset
 *   duplicate   one record at two offsets
 *   divergent   one offset holding two records (across reads and acks)
 *   gap         a read skips offsets (O then O+k, k > 1)
 *   reorder     a read goes back (O then O' <= O), or an append that
 *               began after another was acknowledged got a lower offset
 *   unexpected  a record never appended (or whose appends all failed)
 *   unread      the key has appends but no ok read */
#ifndef JEPSEN_STREAMCHECK_H
#define JEPSEN_STREAMCHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the stream vocabulary or with bad values, or
 * -ENOMEM. */
int jepsen_streamcheck_run(const struct jepsen_history *h,
                           struct jepsen_anomalies *out, char *err,
                           size_t errlen);

#endif
