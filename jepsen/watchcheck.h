/* Cache-watch checker. Per key (a cache shard, e.g. "s0"), ops are
 *   put S K V            cache_put of value V (unique) to key K of shard S
 *   recv S [FROM]        a watcher's delivery window on shard S: the
 *                        invocation carries the offset the watch was
 *                        asked from (0 when absent); an ok completion
 *                        lists the changes delivered, in order, each
 *                        `OFFSET:K:V` (`OFFSET:K` for a deletion), after
 *                        an optional `resnapshot:T` (the watch began from
 *                        a snapshot: its history below T is not replayed)
 * A watcher is one process on one shard: its recv ops form a chain that
 * re-watches from the last offset it saw plus one (or the broker's
 * resume_from), so it must hold every change of the shard from its first
 * FROM on. Anomalies:
 *   duplicate   a watcher's offsets do not strictly increase; or a value
 *               delivered at two offsets (the put was applied twice)
 *   phantom     a delivered value no put attempted, whose puts all
 *               failed, that was put to another key, that was delivered
 *               before its put began, or a deletion no client asked for
 *   lost        an acknowledged put that no watcher ever delivered
 *   skipped     a watcher's chain passed over an offset another watcher
 *               of the shard delivered
 *   incomplete  a watcher ended below acknowledged puts of its shard that
 *               other watchers delivered (it never caught up)
 *   divergent   one offset of a shard delivered with two different
 *               changes, or a value delivered on a shard other than the
 *               one its put named
 *   reorder     two puts to one key, the second begun after the first
 *               was acknowledged, delivered with the second at the lower
 *               offset */
#ifndef JEPSEN_WATCHCHECK_H
#define JEPSEN_WATCHCHECK_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

/* Appends the anomalies of `h` to `out`. Returns 0, or -EINVAL (message
 * in err) for an op outside the watch vocabulary or with bad values, or
 * -ENOMEM. */
int jepsen_watchcheck_run(const struct jepsen_history *h,
                          struct jepsen_anomalies *out, char *err,
                          size_t errlen);

#endif
