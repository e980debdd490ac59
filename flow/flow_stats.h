/* FLOW.STATS, FLOW.ATTRIBUTES and FLOW.ATTRIBUTE_VALUES (reference/flow.md
 * 0x022D-0x022F) over the exact counters and indexes of flow_index.h.
 *
 * A group answers for the flows it holds (one partition's, or all of its
 * own); flow_stats_merge combines the answers of the groups a request was
 * sent to (one for a partition, every data group without one) into the
 * reply: counts summed, lists combined per name or value, ordered by count
 * (descending, then name or value) and cut to the request's `count`. */
#ifndef LS_FLOW_FLOW_STATS_H
#define LS_FLOW_FLOW_STATS_H

#include <stddef.h>

#include "flow/flow_body.h"
#include "flow/flow_record.h"
#include "wire/fsnp_value.h"

/* At most this many distinct attribute values are counted per group. */
#define FLOW_STATS_MAX_VALUES 10000
/* A multi-attribute FLOW.STATS reads at most this many index entries. */
#define FLOW_STATS_MAX_SCAN 100000

/* The group's answer (reads only). 0, or FLOW_OP_ERROR with `err`, or -1
 * (the store failed). */
int flow_stats_run(struct fctx *c, const struct flow_req *q,
                   struct fsnp_writer *w, struct flow_err *err);

/* The reply value from the groups' answers (`n` OK values). 0, or -1 with
 * `err` when an answer is malformed. */
int flow_stats_merge(const struct flow_req *q, const struct fsnp_val *parts,
                     size_t n, struct fsnp_writer *w, struct flow_err *err);

#endif
