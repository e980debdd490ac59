/* FQL1 shapes: what a planner reads of a prepared query. The summary
 * (struct fql_shape) says where the partition, run id, equality, range and
 * null predicates, order, projection, limit and cursor are, without their
 * values, so plans can be matched against index shapes. The classifier
 * names a bound query's advertised shape (the OPTIONS flow_query.shapes
 * list): point reads, history, counts, lineage, the fixed-index
 * collections (type/state, type/terminal states, metadata, running
 * leases) and the general ordered collection. */
#ifndef FLOW_FQL_SHAPE_H
#define FLOW_FQL_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "flow/fql_parse.h"

/* What a planner matches against index shapes: no values, only where they
 * are. Pointers refer into the query. */
struct fql_shape {
	enum fql_mode mode;
	enum fql_source source;
	enum fql_kind kind;
	enum fql_return ret;
	const struct fql_value *partition; /* NULL when not given */
	const struct fql_value *run_id;    /* point reads and history */
	/* equality (= and IN) predicates other than partition_key and run_id,
	 * sorted by field (id, then names) */
	uint32_t neq;
	const struct fql_pred *eq[FQL_MAX_PREDICATES];
	/* the range (BETWEEN or FROM..TO) predicate, if exactly one */
	const struct fql_pred *range;
	uint32_t nranges;
	/* IS NULL / IS MISSING predicates */
	uint32_t nnull;
	const struct fql_pred *null[FQL_MAX_PREDICATES];
	uint32_t norder;
	const struct fql_order *order;
	uint32_t nproj;
	const struct fql_field *proj;
	uint32_t proj_bits; /* 0xA0 bitmap bits the projection fills; all
	                     * run (0..17) or event (18, 19) bits without one */
	bool has_limit;
	uint32_t limit;
	bool has_cursor;
};

void fql_shape(const struct fql_query *q, struct fql_shape *s);

/* The advertised query shapes, in the order OPTIONS lists them. */
enum fql_shape_id {
	FQL_SHAPE_RUN_ID_RECORD,
	FQL_SHAPE_PARTITION_RUN_ID_RECORD,
	FQL_SHAPE_PREDICATES_ORDERED,
	FQL_SHAPE_TYPE_STATE_ORDERED,
	FQL_SHAPE_TYPE_TERMINALS_ORDERED,
	FQL_SHAPE_METADATA_ORDERED,
	FQL_SHAPE_TYPE_RUNNING_LEASE_DEADLINE_ORDERED,
	FQL_SHAPE_PARENT_ORDERED,
	FQL_SHAPE_ROOT_ORDERED,
	FQL_SHAPE_CORRELATION_ORDERED,
	FQL_SHAPE_PREDICATES_COUNT,
	FQL_SHAPE_EVENTS_ORDERED,
	FQL_SHAPES /* number of shapes */
};

/* "runs_by_run_id_record", ...; NULL out of range. */
const char *fql_shape_name(unsigned id);

/* The shape of a bound query (fql_bind succeeded). A collection that fits
 * none of the fixed paths is the general
 * runs_by_partition_predicates_ordered_records; whether an index can
 * bound it is the planner's question. */
enum fql_shape_id fql_shape_classify(const struct fql_query *q);

#endif /* FLOW_FQL_SHAPE_H */
