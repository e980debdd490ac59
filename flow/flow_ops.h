/* The Flow state machine's operations: one decoded request against the
 * group's state in an apply (or read) context. */
#ifndef LS_FLOW_FLOW_OPS_H
#define LS_FLOW_FLOW_OPS_H

#include "flow/flow_body.h"
#include "flow/flow_record.h"
#include "wire/fsnp_value.h"

/* Runs `req`: 0 with the reply value written to `w`; FLOW_OP_ERROR with
 * `err` (a Flow error: nothing written to the store); FLOW_OP_ERROR_KEEP
 * with `err` and writes that stand (COMPLETE past max_active_ms fails the
 * flow); -1 on an I/O failure (the transaction recorded it). */
#define FLOW_OP_ERROR 1
#define FLOW_OP_ERROR_KEEP 2

int flow_op_run(struct fctx *c, const struct flow_req *req,
                struct fsnp_writer *w, struct flow_err *err);

/* The max_active_ms sweep's apply for one flow: fails (partition, id)
 * when it is still non-terminal and past created_at_ms + max_active_ms
 * at c->now (*failed); anything else (gone, ended, not yet due) is left
 * as it is. 0, or -1 on an I/O failure. */
int flow_op_active_timeout(struct fctx *c, struct fsnp_bytes part,
                           struct fsnp_bytes id, bool *failed);

/* The earliest time a claim request `q` (CLAIM_DUE or RECLAIM) could
 * find work in this group, from the due floors (a lower bound: every due
 * entry it would take is at or after it); UINT64_MAX when nothing of its
 * type, states and partitions is waiting. 0, or -1 on a read failure. */
int flow_op_next_due(struct fctx *c, const struct flow_req *q, uint64_t *at);

#ifdef LS_FAULT_HOOKS
/* lodestone-faulty: reads LODESTONE_FAULT and reports an active flow
 * hook on stderr (flow_register calls it at start). */
void flow_op_fault_init(void);
#endif

#endif
