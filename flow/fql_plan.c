/* FQL1 planner (flow/fql_plan.h). */
#include "flow/fql_plan.h"

#include <stdio.h>
#include <string.h>

#include "flow/fql_print.h"
#include "wire/fsnp_fqr.h"

static bool single_eq(const struct fql_pred *pr)
{
	return pr->op == FQL_OP_EQ;
}

static bool eq_or_in(const struct fql_pred *pr)
{
	return pr->op == FQL_OP_EQ || pr->op == FQL_OP_IN;
}

/* The first EQ/IN predicate on field `id` (and, for IN, only when
 * `in_ok`), or NULL. */
static const struct fql_pred *find(const struct fql_query *q, enum fql_fid id,
                                   bool in_ok)
{
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == id &&
		    (in_ok ? eq_or_in(pr) : single_eq(pr))) {
			return pr;
		}
	}
	return NULL;
}

static bool used(const struct fql_plan *p, const struct fql_pred *pr)
{
	if (pr == p->range || pr == p->type || pr == p->state ||
	    pr == p->attr) {
		return true;
	}
	for (uint32_t i = 0; i < p->neq; i++) {
		if (p->eq[i] == pr) {
			return true;
		}
	}
	return false;
}

static void none(struct fql_plan *p, const char *reason, const char *fields,
                 const char *order)
{
	p->access = FQL_ACCESS_NONE;
	p->index = "";
	p->source = "not_applicable";
	p->requires_hydration = false;
	p->reason = reason;
	snprintf(p->suggest_fields, sizeof p->suggest_fields, "%s", fields);
	snprintf(p->suggest_order, sizeof p->suggest_order, "%s", order);
}

static void plan_count(const struct fql_query *q, struct fql_plan *p)
{
	p->type = find(q, FQL_F_TYPE, false);
	p->state = find(q, FQL_F_STATE, true);
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_ATTRIBUTE && single_eq(pr) &&
		    p->attr == NULL) {
			p->attr = pr;
		}
	}
	p->access = FQL_ACCESS_COUNTER;
	p->source = "transactional_counter";
	p->index = p->attr != NULL
	               ? "flow_runs_type_partition_state_attribute_count"
	               : "flow_runs_type_partition_state_count";
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_PARTITION_KEY || used(p, pr)) {
			continue;
		}
		none(p, "count predicates are not all counter components",
		     "type,partition_key,state,attribute", "");
		return;
	}
	if (p->type == NULL) {
		none(p, "an exact count needs a type equality",
		     "type,partition_key,state", "");
	} else if (p->attr != NULL && p->state == NULL) {
		none(p, "an attribute count needs a state predicate",
		     "type,partition_key,state,attribute", "");
	}
}

/* Whether the due index holds every flow of these states in this order:
 * it keeps non-terminal flows by next_run_at_ms, which for running flows
 * is their lease deadline. */
static bool due_states(const struct fql_pred *state, const struct fql_order *o)
{
	for (uint32_t i = 0; i < state->nvals; i++) {
		struct fsnp_bytes st = {state->v[i].bp, state->v[i].blen};
		if (fsnp_bytes_eq(st, "completed") ||
		    fsnp_bytes_eq(st, "failed") ||
		    fsnp_bytes_eq(st, "cancelled")) {
			return false;
		}
		if (o->field.id == FQL_F_LEASE_DEADLINE_MS &&
		    !fsnp_bytes_eq(st, "running")) {
			return false;
		}
	}
	return true;
}

/* Bits a covering entry answers: the identity, the version (the entry's
 * value; the due index has none, but its key names the priority), the
 * order field and the equality components. */
static uint32_t covered_bits(const struct fql_plan *p, enum fql_fid order)
{
	uint32_t b =
	    1u << FSNP_FQR_F_ID | 1u << FSNP_FQR_F_PARTITION_KEY |
	    1u << (unsigned)order |
	    (p->due ? 1u << FSNP_FQR_F_PRIORITY : 1u << FSNP_FQR_F_VERSION);
	for (uint32_t i = 0; i < p->neq; i++) {
		enum fql_fid id = p->eq[i]->field.id;
		if (id != FQL_F_ATTRIBUTE && id != FQL_F_STATE_META_KEY) {
			b |= 1u << fql_field_fqr_bit(id);
		}
	}
	return b;
}

static void plan_collection(const struct fql_query *q, struct fql_plan *p)
{
	const struct fql_order *o = &q->order[0];
	const struct fql_pred *type = find(q, FQL_F_TYPE, false);
	const struct fql_pred *state = find(q, FQL_F_STATE, true);
	const struct fql_pred *lin = NULL, *attr = NULL, *meta = NULL;
	enum flow_ix_kind lk = FLOW_IX_PARENT;
	const char *lix = "";

	if (q->norder != 1) {
		none(p, "no index orders by two fields",
		     "partition_key,type,state", "updated_at_ms");
		return;
	}
	for (uint32_t i = 0; i < q->npreds && lin == NULL; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (!single_eq(pr)) {
			continue;
		}
		if (pr->field.id == FQL_F_PARENT_FLOW_ID) {
			lin = pr, lk = FLOW_IX_PARENT,
			lix = "flow_runs_partition_parent_updated";
		} else if (pr->field.id == FQL_F_ROOT_FLOW_ID) {
			lin = pr, lk = FLOW_IX_ROOT,
			lix = "flow_runs_partition_root_updated";
		} else if (pr->field.id == FQL_F_CORRELATION_ID) {
			lin = pr, lk = FLOW_IX_CORRELATION,
			lix = "flow_runs_partition_correlation_updated";
		}
	}
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_ATTRIBUTE && eq_or_in(pr) &&
		    attr == NULL) {
			attr = pr;
		}
		if (pr->field.id == FQL_F_STATE_META_KEY && eq_or_in(pr) &&
		    meta == NULL) {
			meta = pr;
		}
	}
	p->access = FQL_ACCESS_RANGE;
	p->desc = o->desc;
	if (o->field.id == FQL_F_UPDATED_AT_MS) {
		if (type != NULL && state != NULL) {
			p->ix = FLOW_IX_UPDATED;
			p->index = "flow_runs_partition_type_state_updated";
			p->eq[0] = type;
			p->eq[1] = state;
			p->neq = 2;
			if (state->op == FQL_OP_IN) {
				p->multi = state;
				p->multi_slot = 1;
			}
		} else if (lin != NULL) {
			p->ix = lk;
			p->index = lix;
			p->eq[0] = lin;
			p->neq = 1;
		} else if (attr != NULL) {
			p->ix = FLOW_IX_ATTR;
			p->index = "flow_runs_partition_attribute_updated";
			p->eq[0] = attr;
			p->neq = 1;
			if (attr->op == FQL_OP_IN) {
				p->multi = attr;
			}
		} else if (meta != NULL) {
			p->ix = FLOW_IX_META;
			p->index = "flow_runs_partition_state_meta_updated";
			p->eq[0] = meta;
			p->neq = 1;
			if (meta->op == FQL_OP_IN) {
				p->multi = meta;
			}
		} else {
			p->ix = FLOW_IX_PART_UPDATED;
			p->index = "flow_runs_partition_updated";
		}
	} else if ((o->field.id == FQL_F_NEXT_RUN_AT_MS ||
	            o->field.id == FQL_F_LEASE_DEADLINE_MS) &&
	           type != NULL && state != NULL && due_states(state, o)) {
		p->due = true;
		p->index = "flow_runs_partition_type_state_due";
		p->eq[0] = type;
		p->eq[1] = state;
		p->neq = 2;
		if (state->op == FQL_OP_IN) {
			p->multi = state;
			p->multi_slot = 1;
		}
	} else if (o->field.id == FQL_F_CREATED_AT_MS && type != NULL &&
	           state != NULL) {
		p->ix = FLOW_IX_CREATED;
		p->index = "flow_runs_partition_type_state_created";
		p->eq[0] = type;
		p->eq[1] = state;
		p->neq = 2;
		if (state->op == FQL_OP_IN) {
			p->multi = state;
			p->multi_slot = 1;
		}
	} else {
		char order[64];
		snprintf(order, sizeof order, "%s",
		         fql_field_name(o->field.id) != NULL
		             ? fql_field_name(o->field.id)
		             : "?");
		none(p, "no advertised index orders by this field",
		     "partition_key,type,state", order);
		return;
	}
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if ((pr->op == FQL_OP_BETWEEN || pr->op == FQL_OP_WINDOW) &&
		    fql_field_equal(&pr->field, &o->field) &&
		    p->range == NULL) {
			p->range = pr;
		}
	}
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_PARTITION_KEY || used(p, pr)) {
			continue;
		}
		p->residual[p->nresidual++] = pr;
	}
	p->covered = covered_bits(p, o->field.id);
	if (p->nresidual == 0 && (p->proj_bits & ~p->covered) == 0) {
		p->source = "covering_index";
		p->requires_hydration = false;
	} else {
		p->source = "query_row";
		p->requires_hydration = true;
	}
}

void fql_plan(const struct fql_query *q, struct fql_plan *p)
{
	struct fql_shape s;

	memset(p, 0, sizeof *p);
	fql_shape(q, &s);
	p->shape = fql_shape_classify(q);
	p->proj_bits = s.proj_bits;
	p->index = "";
	p->source = "not_applicable";
	switch (q->kind) {
	case FQL_K_POINT:
		p->access = FQL_ACCESS_POINT;
		p->index = "flow_runs_primary";
		p->source = "authoritative_log";
		p->requires_hydration = true;
		return;
	case FQL_K_COUNT:
		plan_count(q, p);
		return;
	case FQL_K_COLLECTION:
		plan_collection(q, p);
		return;
	case FQL_K_HISTORY:
	default:
		p->access = FQL_ACCESS_HISTORY;
		p->index = "flow_events_by_run";
		p->source = "authoritative_log";
		p->requires_hydration = true;
		p->desc = q->norder > 0 && q->order[0].desc;
		return;
	}
}

void fql_plan_diag(const struct fql_plan *p, struct fql_diag *d)
{
	(void)p;
	fql_diag_set(d, FQL_QUERY_NO_BOUNDED_PLAN, p->reason,
	             "add an index on the suggested fields and order, or "
	             "query an advertised shape");
}

static const char *access_name(enum fql_access a)
{
	switch (a) {
	case FQL_ACCESS_POINT:
		return "point_read";
	case FQL_ACCESS_RANGE:
		return "index_range";
	case FQL_ACCESS_COUNTER:
		return "counter_read";
	case FQL_ACCESS_HISTORY:
		return "history_range";
	default:
		return "none";
	}
}

static const char *op_name(enum fql_op op)
{
	static const char *const n[] = {"eq",      "in",      "between",
	                                "from_to", "is_null", "is_missing"};
	return n[op];
}

static void w_field(struct fsnp_writer *w, const struct fql_field *f)
{
	struct wbuf b;
	wbuf_init(&b);
	fql_print_field(f, &b);
	fsnp_w_bin(w, b.data, b.len);
	wbuf_free(&b);
}

static void w_list(struct fsnp_writer *w, const char *csv)
{
	fsnp_w_array_begin(w);
	while (*csv != '\0') {
		size_t l = strcspn(csv, ",");
		fsnp_w_bin(w, csv, l);
		csv += l + (csv[l] == ',');
	}
	fsnp_w_array_end(w);
}

void fql_plan_write(const struct fql_query *q, const struct fql_plan *p,
                    struct fsnp_writer *w)
{
	struct wbuf b;
	uint32_t ranges = 0;

	if (p->access == FQL_ACCESS_RANGE) {
		ranges = (p->multi != NULL ? p->multi->nvals : 1) *
		         (p->due ? FQL_PLAN_DUE_PRIORITIES : 1);
	} else if (p->access == FQL_ACCESS_COUNTER) {
		ranges = p->state != NULL ? p->state->nvals : 1;
	} else if (p->access == FQL_ACCESS_POINT ||
	           p->access == FQL_ACCESS_HISTORY) {
		ranges = 1;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "shape");
	fsnp_w_str(w, fql_shape_name(p->shape));
	fsnp_w_key(w, "kind");
	fsnp_w_str(w, q->kind == FQL_K_POINT        ? "point"
	              : q->kind == FQL_K_COUNT      ? "count"
	              : q->kind == FQL_K_COLLECTION ? "collection"
	                                            : "history");
	fsnp_w_key(w, "access");
	fsnp_w_str(w, access_name(p->access));
	fsnp_w_key(w, "index");
	if (p->index[0] != '\0') {
		fsnp_w_str(w, p->index);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "source");
	fsnp_w_str(w, p->source);
	fsnp_w_key(w, "requires_hydration");
	fsnp_w_bool(w, p->requires_hydration);
	fsnp_w_key(w, "bounded");
	fsnp_w_bool(w, p->access != FQL_ACCESS_NONE);
	fsnp_w_key(w, "ranges");
	fsnp_w_i64(w, ranges);
	fsnp_w_key(w, "range_predicate");
	if (p->range != NULL) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "field");
		w_field(w, &p->range->field);
		fsnp_w_key(w, "op");
		fsnp_w_str(w, op_name(p->range->op));
		fsnp_w_map_end(w);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "residual");
	fsnp_w_array_begin(w);
	for (uint32_t i = 0; i < p->nresidual; i++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "field");
		w_field(w, &p->residual[i]->field);
		fsnp_w_key(w, "op");
		fsnp_w_str(w, op_name(p->residual[i]->op));
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "order");
	fsnp_w_array_begin(w);
	for (uint32_t i = 0; i < q->norder; i++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "field");
		w_field(w, &q->order[i].field);
		fsnp_w_key(w, "direction");
		fsnp_w_str(w, q->order[i].desc ? "desc" : "asc");
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "limit");
	if (q->has_limit) {
		fsnp_w_i64(w, q->limit);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "scan_budget");
	fsnp_w_i64(w, p->access == FQL_ACCESS_RANGE ? FQL_PLAN_SCAN_BUDGET : 0);
	fsnp_w_key(w, "projection");
	fsnp_w_array_begin(w);
	if (q->has_projection) {
		for (uint32_t i = 0; i < q->nproj; i++) {
			w_field(w, &q->proj[i]);
		}
	} else {
		for (unsigned bit = 0; bit < FSNP_FQR_FIELDS; bit++) {
			if (p->proj_bits & (1u << bit)) {
				fsnp_w_str(w, fsnp_fqr_field_name(bit));
			}
		}
	}
	fsnp_w_array_end(w);
	if (p->access == FQL_ACCESS_NONE) {
		fsnp_w_key(w, "suggested_index");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "fields");
		w_list(w, p->suggest_fields);
		fsnp_w_key(w, "order");
		w_list(w, p->suggest_order);
		fsnp_w_map_end(w);
	}
	fsnp_w_key(w, "query");
	wbuf_init(&b);
	fql_print_redacted(q, &b);
	fsnp_w_bin(w, b.data, b.len);
	wbuf_free(&b);
	fsnp_w_map_end(w);
}

/* A field's name with metadata names as placeholders (they may be
 * tenant data). */
static const char *field_shape(const struct fql_field *f)
{
	switch (f->id) {
	case FQL_F_ATTRIBUTE:
		return "attribute.<name>";
	case FQL_F_STATE_META_KEY:
		return "state_meta.<state>.<name>";
	case FQL_F_FIELD:
		return "fields.<name>";
	default:
		return fql_field_name(f->id);
	}
}

void fql_plan_error_write(const struct fql_query *q, const struct fql_plan *p,
                          struct fsnp_writer *w)
{
	struct fql_diag d;
	fql_plan_diag(p, &d);
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "code");
	fsnp_w_str(w, fql_code_name(d.code));
	fsnp_w_key(w, "message");
	fsnp_w_str(w, fql_code_message(d.code));
	fsnp_w_key(w, "retryable");
	fsnp_w_bool(w, false);
	fsnp_w_key(w, "safe_to_retry");
	fsnp_w_bool(w, false);
	fsnp_w_key(w, "retry_after_ms");
	fsnp_w_i64(w, 0);
	if (d.detail != NULL) {
		fsnp_w_key(w, "detail");
		fsnp_w_str(w, d.detail);
	}
	fsnp_w_key(w, "hint");
	fsnp_w_str(w, d.hint);
	fsnp_w_key(w, "context");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "predicates");
	fsnp_w_array_begin(w);
	for (uint32_t i = 0; i < q->npreds; i++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "field");
		fsnp_w_str(w, field_shape(&q->preds[i].field));
		fsnp_w_key(w, "op");
		fsnp_w_str(w, op_name(q->preds[i].op));
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "order");
	fsnp_w_array_begin(w);
	for (uint32_t i = 0; i < q->norder; i++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "field");
		fsnp_w_str(w, field_shape(&q->order[i].field));
		fsnp_w_key(w, "direction");
		fsnp_w_str(w, q->order[i].desc ? "desc" : "asc");
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "suggested_index");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "fields");
	w_list(w, p->suggest_fields);
	fsnp_w_key(w, "order");
	w_list(w, p->suggest_order);
	fsnp_w_map_end(w);
	fsnp_w_map_end(w);
	fsnp_w_map_end(w);
}
