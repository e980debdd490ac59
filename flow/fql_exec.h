/* FQL1 executor: runs a planned query (flow/fql_plan.h) as a read on the
 * group that holds its partition (the Flow store extension's read op,
 * opcode FLOW.QUERY), measuring what it reads.
 *
 * The command body is {query, params?, resume?, deadline_ms?} where
 * `resume` is the index tail (u64 order, u32 id length, id), or a history
 * event's u64 version, after which a page continues (the FSNP layer takes
 * it out of a verified cursor), and `deadline_ms` the request's wall-clock
 * deadline (a page past it stops with query_deadline_exceeded). The group
 * parses and binds the same text again (pure, so the same prepared query),
 * plans it and answers one internal map:
 *
 *   {kind: "records", records: [record maps], has_more, resume: bin|nil,
 *    usage: {...}}
 *   {kind: "count", count, usage: {...}}
 *   {error: code}     (an FQL failure found at execution, value-free)
 *
 * usage carries the counters of ferric.flow.query.result/v1 except
 * response_bytes (range_seeks, range_pages, scanned_entries,
 * scanned_bytes, hydrated_records, residual_checks, duplicate_entries,
 * result_records, memory_high_water_bytes, wall_time_us), each measured
 * as the read happens. Records are the result allowlist projected to the
 * query's fields. */
#ifndef FLOW_FQL_EXEC_H
#define FLOW_FQL_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "flow/fql_parse.h"
#include "store/buf.h"
#include "wire/buf.h"

struct tx;

/* The store extension's entry for opcode FLOW.QUERY: the internal map
 * (STORE_OK) or a store error. Always 0. */
int fql_exec_apply(struct tx *tx, const uint8_t *body, size_t len,
                   struct sbuf *res);

/* The query's cursor fingerprint input: its canonical text and every
 * bound value (type and bytes), the cursor left out, so a cursor resumes
 * only the query (and values) it was issued for. */
int fql_exec_canonical(const struct fql_query *q, struct wbuf *out);

/* Resume tails: the tail after `prefix_len` bytes of an index key is
 * what a cursor carries. True when `t` is a well-formed tail. */
bool fql_exec_tail_ok(const uint8_t *t, size_t len);

#endif /* FLOW_FQL_EXEC_H */
