/* FQL1 planner: a bound prepared query (flow/fql_parse.h) mapped to one
 * bounded access path of the Flow indexes (flow/flow_index.h): a point
 * read of the primary record, an exact counter read for RETURN COUNT, or
 * one ordered index range (a few ranges merged in index order for an IN
 * list), with the predicates no range component covers kept as residual
 * checks on the hydrated record. Never an unbounded record scan: a query
 * no index can order fails with query_no_bounded_plan and a suggested
 * index layout (value-free).
 *
 * The plan is pure (no storage), so static EXPLAIN is answered from it
 * on any node, and the executor (flow/fql_exec.h) reads the same plan on
 * the partition's leader. docs/flow-query.md "Planner". */
#ifndef FLOW_FQL_PLAN_H
#define FLOW_FQL_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "flow/flow_index.h"
#include "flow/fql_parse.h"
#include "flow/fql_shape.h"
#include "wire/fsnp_value.h"

/* Scan budget of one page: index entries read before a page is cut short
 * (it then ends early with has_more and a cursor after the last entry
 * read, so a selective residual never turns into a long scan). */
#define FQL_PLAN_SCAN_BUDGET 10000u
/* At most this many ranges merged: an IN list on the range's key, times
 * the three priorities of the due index. */
#define FQL_PLAN_DUE_PRIORITIES 3
#define FQL_PLAN_MAX_RANGES (FQL_MAX_IN_VALUES * FQL_PLAN_DUE_PRIORITIES)

enum fql_access {
	FQL_ACCESS_POINT,   /* primary record by (partition, run id) */
	FQL_ACCESS_RANGE,   /* ordered index range(s) */
	FQL_ACCESS_COUNTER, /* exact counters */
	FQL_ACCESS_HISTORY, /* a run's history events, by event id */
	FQL_ACCESS_NONE,    /* no bounded plan */
};

struct fql_plan {
	enum fql_access access;
	enum fql_shape_id shape;
	const char *index;  /* catalog id (flow_index.c), "" for none */
	const char *source; /* EXPLAIN source: covering_index, query_row,
	                     * authoritative_log, transactional_counter,
	                     * not_applicable */
	bool requires_hydration;
	/* FQL_ACCESS_RANGE: the index kind, its equality components
	 * (predicates whose values fill them, in key order; `multi` is the
	 * one IN predicate whose values make one range each, or NULL). */
	enum flow_ix_kind ix;
	/* The range is the due index (partition, type, state, priority;
	 * next_run_at_ms, which is the lease deadline of running flows):
	 * one range per state and priority. */
	bool due;
	/* 0xA0 bits an index entry answers (a covering plan's fields). */
	uint32_t covered;
	uint32_t neq;
	const struct fql_pred *eq[3];
	const struct fql_pred *multi;
	uint32_t multi_slot;          /* which eq component the IN fills */
	const struct fql_pred *range; /* bounds the order, or NULL */
	bool desc;
	/* FQL_ACCESS_COUNTER: type and the optional state (IN: summed)
	 * and attribute equality. */
	const struct fql_pred *type, *state, *attr;
	/* Predicates checked on the hydrated record (not the partition,
	 * nor anything an index component covers). */
	uint32_t nresidual;
	const struct fql_pred *residual[FQL_MAX_PREDICATES];
	/* The 0xA0 bits the result carries. */
	uint32_t proj_bits;
	/* FQL_ACCESS_NONE: why (a static text) and the suggested index
	 * layout (fields and order, value-free). */
	const char *reason;
	char suggest_fields[160];
	char suggest_order[64];
};

/* Plans a bound query. Always fills p; p->access FQL_ACCESS_NONE when no
 * advertised access path serves it. */
void fql_plan(const struct fql_query *q, struct fql_plan *p);

/* The no-plan diagnostic of p (query_no_bounded_plan with a detail and
 * the suggestion as hint). */
void fql_plan_diag(const struct fql_plan *p, struct fql_diag *d);

/* Writes the no-plan error map: the fixed query_no_bounded_plan code,
 * message, retry flags, detail and hint, and a context of only redacted
 * predicate shapes ({field, op}, metadata names as placeholders), the
 * ordering and the suggested index layout ({fields, order}). */
void fql_plan_error_write(const struct fql_query *q, const struct fql_plan *p,
                          struct fsnp_writer *w);

/* Writes the EXPLAIN plan map (`plan` of ferric.flow.explain/v1): shape,
 * access, index, source, requires_hydration, ranges, residual predicate
 * shapes, order, limit, projection, redacted query; value-free and
 * deterministic. */
void fql_plan_write(const struct fql_query *q, const struct fql_plan *p,
                    struct fsnp_writer *w);

#endif /* FLOW_FQL_PLAN_H */
