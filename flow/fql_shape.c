/* FQL1 shape summary and classifier (flow/fql_shape.h). */
#include "flow/fql_shape.h"

#include <string.h>

#include "wire/fsnp_fqr.h"

static const char *const names[FQL_SHAPES] = {
    [FQL_SHAPE_RUN_ID_RECORD] = "runs_by_run_id_record",
    [FQL_SHAPE_PARTITION_RUN_ID_RECORD] = "runs_by_partition_and_run_id_record",
    [FQL_SHAPE_PREDICATES_ORDERED] =
        "runs_by_partition_predicates_ordered_records",
    [FQL_SHAPE_TYPE_STATE_ORDERED] =
        "runs_by_partition_type_state_ordered_records",
    [FQL_SHAPE_TYPE_TERMINALS_ORDERED] =
        "runs_by_partition_type_terminals_ordered_records",
    [FQL_SHAPE_METADATA_ORDERED] = "runs_by_partition_metadata_ordered_records",
    [FQL_SHAPE_TYPE_RUNNING_LEASE_DEADLINE_ORDERED] =
        "runs_by_partition_type_running_lease_deadline_ordered_records",
    [FQL_SHAPE_PARENT_ORDERED] = "runs_by_partition_parent_ordered_records",
    [FQL_SHAPE_ROOT_ORDERED] = "runs_by_partition_root_ordered_records",
    [FQL_SHAPE_CORRELATION_ORDERED] =
        "runs_by_partition_correlation_ordered_records",
    [FQL_SHAPE_PREDICATES_COUNT] = "runs_by_partition_predicates_count",
    [FQL_SHAPE_EVENTS_ORDERED] = "events_by_run_id_ordered_records",
};

const char *fql_shape_name(unsigned id)
{
	return id < FQL_SHAPES ? names[id] : NULL;
}

static int field_cmp(const struct fql_field *a, const struct fql_field *b)
{
	if (a->id != b->id) {
		return a->id < b->id ? -1 : 1;
	}
	uint32_t n = a->alen < b->alen ? a->alen : b->alen;
	int c = n ? memcmp(a->a, b->a, n) : 0;
	if (c != 0 || a->alen != b->alen) {
		return c ? c : (a->alen < b->alen ? -1 : 1);
	}
	n = a->blen < b->blen ? a->blen : b->blen;
	c = n ? memcmp(a->b, b->b, n) : 0;
	if (c != 0 || a->blen != b->blen) {
		return c ? c : (a->blen < b->blen ? -1 : 1);
	}
	return 0;
}

void fql_shape(const struct fql_query *q, struct fql_shape *s)
{
	memset(s, 0, sizeof *s);
	s->mode = q->mode;
	s->source = q->source;
	s->kind = q->kind;
	s->ret = q->ret;
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_PARTITION_KEY &&
		    pr->op == FQL_OP_EQ) {
			s->partition = &pr->v[0];
		} else if (pr->field.id == FQL_F_RUN_ID &&
		           pr->op == FQL_OP_EQ && q->kind != FQL_K_COLLECTION &&
		           q->kind != FQL_K_COUNT) {
			s->run_id = &pr->v[0];
		} else if (pr->op == FQL_OP_EQ || pr->op == FQL_OP_IN) {
			/* insertion sort by field */
			uint32_t j = s->neq++;
			while (j > 0 && field_cmp(&s->eq[j - 1]->field,
			                          &pr->field) > 0) {
				s->eq[j] = s->eq[j - 1];
				j--;
			}
			s->eq[j] = pr;
		} else if (pr->op == FQL_OP_BETWEEN ||
		           pr->op == FQL_OP_WINDOW) {
			if (s->nranges++ == 0) {
				s->range = pr;
			} else {
				s->range = NULL;
			}
		} else {
			s->null[s->nnull++] = pr;
		}
	}
	s->norder = q->norder;
	s->order = q->order;
	s->nproj = q->nproj;
	s->proj = q->proj;
	if (q->has_projection) {
		for (uint32_t i = 0; i < q->nproj; i++) {
			s->proj_bits |= 1u << fql_field_fqr_bit(q->proj[i].id);
		}
	} else if (q->ret != FQL_RET_COUNT) {
		s->proj_bits = q->source == FQL_EVENTS
		                   ? (1u << FSNP_FQR_F_EVENT_ID) |
		                         (1u << FSNP_FQR_F_FIELDS)
		                   : (1u << (FSNP_FQR_F_STATE_META + 1)) - 1;
	}
	s->has_limit = q->has_limit;
	s->limit = q->limit;
	s->has_cursor = q->has_cursor;
}

/* ---- classifier ---- */

/* Integers a client can carry exactly in a double (2^53 - 1): the fixed
 * paths' time bounds stay within them. */
#define MAX_EXACT_INTEGER 9007199254740991LL

static bool str_value(const struct fql_value *v)
{
	return v->btype == FQL_B_STR && v->blen > 0;
}

static bool value_is(const struct fql_value *v, const char *s)
{
	size_t n = strlen(s);
	return v->btype == FQL_B_STR && v->blen == n &&
	       memcmp(v->bp, s, n) == 0;
}

static bool terminal(const struct fql_value *v)
{
	return value_is(v, "completed") || value_is(v, "failed") ||
	       value_is(v, "cancelled");
}

/* What the fixed index paths need to know of a collection. */
struct fixed {
	const struct fql_pred *partition, *type, *states, *lineage;
	const struct fql_pred *updated, *lease;
	uint32_t attributes, state_meta;
};

static bool all_terminal(const struct fql_pred *states)
{
	for (uint32_t k = 0; k < states->nvals; k++) {
		if (!terminal(&states->v[k])) {
			return false;
		}
	}
	return states->nvals > 0;
}

/* nil, one state, or only terminal states */
static bool bounded_states(const struct fql_pred *states)
{
	return states == NULL || states->nvals == 1 || all_terminal(states);
}

static bool put_once(const struct fql_pred **slot, const struct fql_pred *pr)
{
	if (*slot != NULL) {
		return false;
	}
	*slot = pr;
	return true;
}

static bool time_range(const struct fql_pred *pr)
{
	const struct fql_value *lo = &pr->v[0], *hi = &pr->v[1];
	if (lo->btype != FQL_B_INT || hi->btype != FQL_B_INT) {
		return false;
	}
	int64_t upper = hi->bi;
	if (pr->op == FQL_OP_WINDOW) {
		if (upper == INT64_MIN) {
			return false;
		}
		upper--;
	}
	return lo->bi >= 0 && lo->bi <= upper && upper <= MAX_EXACT_INTEGER;
}

static bool put_pred(const struct fql_query *q, struct fixed *f, uint32_t i)
{
	const struct fql_pred *pr = &q->preds[i];
	enum fql_fid id = pr->field.id;
	if (pr->op == FQL_OP_EQ || pr->op == FQL_OP_IN) {
		for (uint32_t k = 0; k < pr->nvals; k++) {
			if ((id != FQL_F_ATTRIBUTE &&
			     id != FQL_F_STATE_META_KEY) &&
			    !str_value(&pr->v[k])) {
				return false;
			}
		}
	}
	if (pr->op == FQL_OP_EQ) {
		switch (id) {
		case FQL_F_PARTITION_KEY:
			return put_once(&f->partition, pr);
		case FQL_F_TYPE:
			return put_once(&f->type, pr);
		case FQL_F_STATE:
			return put_once(&f->states, pr);
		case FQL_F_PARENT_FLOW_ID:
		case FQL_F_ROOT_FLOW_ID:
		case FQL_F_CORRELATION_ID:
			return put_once(&f->lineage, pr);
		case FQL_F_ATTRIBUTE:
		case FQL_F_STATE_META_KEY:
			/* one equality per metadata key */
			for (uint32_t j = 0; j < i; j++) {
				if (q->preds[j].op == FQL_OP_EQ &&
				    fql_field_equal(&q->preds[j].field,
				                    &pr->field)) {
					return false;
				}
			}
			if (id == FQL_F_ATTRIBUTE) {
				f->attributes++;
			} else {
				f->state_meta++;
			}
			return true;
		default:
			return false;
		}
	}
	if (pr->op == FQL_OP_IN) {
		return id == FQL_F_STATE && put_once(&f->states, pr);
	}
	if (pr->op == FQL_OP_BETWEEN || pr->op == FQL_OP_WINDOW) {
		if (id == FQL_F_UPDATED_AT_MS) {
			return time_range(pr) && put_once(&f->updated, pr);
		}
		if (id == FQL_F_LEASE_DEADLINE_MS && pr->op == FQL_OP_BETWEEN) {
			return time_range(pr) && put_once(&f->lease, pr);
		}
	}
	return false;
}

static enum fql_shape_id classify_collection(const struct fql_query *q)
{
	if (q->norder != 1) {
		return FQL_SHAPE_PREDICATES_ORDERED;
	}
	enum fql_fid order = q->order[0].field.id;
	struct fixed f;
	memset(&f, 0, sizeof f);
	for (uint32_t i = 0; i < q->npreds; i++) {
		if (!put_pred(q, &f, i)) {
			return FQL_SHAPE_PREDICATES_ORDERED;
		}
	}
	if (f.partition == NULL) {
		return FQL_SHAPE_PREDICATES_ORDERED;
	}
	bool metadata = f.attributes > 0 || f.state_meta > 0;
	if (f.lineage != NULL) {
		if (q->npreds == 2 && order == FQL_F_UPDATED_AT_MS) {
			switch (f.lineage->field.id) {
			case FQL_F_PARENT_FLOW_ID:
				return FQL_SHAPE_PARENT_ORDERED;
			case FQL_F_ROOT_FLOW_ID:
				return FQL_SHAPE_ROOT_ORDERED;
			default:
				return FQL_SHAPE_CORRELATION_ORDERED;
			}
		}
		return FQL_SHAPE_PREDICATES_ORDERED;
	}
	if (f.lease != NULL) {
		bool stuck = order == FQL_F_LEASE_DEADLINE_MS &&
		             f.type != NULL && f.states != NULL &&
		             f.states->nvals == 1 &&
		             value_is(&f.states->v[0], "running") &&
		             f.updated == NULL && !metadata;
		return stuck ? FQL_SHAPE_TYPE_RUNNING_LEASE_DEADLINE_ORDERED
		             : FQL_SHAPE_PREDICATES_ORDERED;
	}
	/* state metadata is indexed per type */
	if (order != FQL_F_UPDATED_AT_MS || (f.type == NULL && !metadata) ||
	    (f.type == NULL && f.state_meta > 0)) {
		return FQL_SHAPE_PREDICATES_ORDERED;
	}
	if (metadata) {
		return bounded_states(f.states) ? FQL_SHAPE_METADATA_ORDERED
		                                : FQL_SHAPE_PREDICATES_ORDERED;
	}
	if (f.states == NULL) {
		return FQL_SHAPE_PREDICATES_ORDERED;
	}
	if (f.states->nvals > 1 && all_terminal(f.states)) {
		return FQL_SHAPE_TYPE_TERMINALS_ORDERED;
	}
	return f.states->nvals == 1 ? FQL_SHAPE_TYPE_STATE_ORDERED
	                            : FQL_SHAPE_PREDICATES_ORDERED;
}

enum fql_shape_id fql_shape_classify(const struct fql_query *q)
{
	bool partition = false;
	for (uint32_t i = 0; i < q->npreds; i++) {
		partition |= q->preds[i].field.id == FQL_F_PARTITION_KEY;
	}
	switch (q->kind) {
	case FQL_K_POINT:
		return partition ? FQL_SHAPE_PARTITION_RUN_ID_RECORD
		                 : FQL_SHAPE_RUN_ID_RECORD;
	case FQL_K_HISTORY:
		return FQL_SHAPE_EVENTS_ORDERED;
	case FQL_K_COUNT:
		return FQL_SHAPE_PREDICATES_COUNT;
	default:
		return classify_collection(q);
	}
}
