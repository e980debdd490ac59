/* FQL1 executor (flow/fql_exec.h). */
#include "flow/fql_exec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flow/flow_index.h"
#include "flow/flow_record.h"
#include "flow/fql_plan.h"
#include "flow/fql_print.h"
#include "store/ext.h"
#include "store/result.h"
#include "wire/flow_route.h"
#include "wire/fsnp_fqr.h"

enum {
	U_SEEKS,
	U_PAGES,
	U_ENTRIES,
	U_BYTES,
	U_HYDRATED,
	U_RESIDUAL,
	U_DUPLICATE,
	U_RESULTS,
	U_MEMORY,
	U_WALL,
	U_N
};

static const char *const usage_names[U_N] = {
    "range_seeks",       "range_pages",      "scanned_entries",
    "scanned_bytes",     "hydrated_records", "residual_checks",
    "duplicate_entries", "result_records",   "memory_high_water_bytes",
    "wall_time_us"};

struct run {
	struct fctx *c;
	const struct fql_query *q;
	const struct fql_plan *p;
	struct fsnp_bytes part;
	uint64_t u[U_N];
	struct fql_diag *d;
	uint64_t deadline_ms; /* wall clock; 0: none */
};

/* Checked every 64 entries a page reads: past the request's deadline_ms
 * the query stops with query_deadline_exceeded. */
static bool past_deadline(struct run *x, uint64_t n)
{
	struct timespec ts;
	if (x->deadline_ms == 0 || n % 64 != 63) {
		return false;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	if ((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u <
	    x->deadline_ms) {
		return false;
	}
	fql_diag_set(x->d, FQL_QUERY_DEADLINE_EXCEEDED, NULL, NULL);
	return true;
}

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void high_water(struct run *x, uint64_t bytes)
{
	if (bytes > x->u[U_MEMORY]) {
		x->u[U_MEMORY] = bytes;
	}
}

/* A bound value as a typed value (views into the query or params). */
static void bound_val(const struct fql_value *v, struct fsnp_val *out)
{
	memset(out, 0, sizeof *out);
	switch (v->btype) {
	case FQL_B_STR:
		out->tag = FSNP_BIN;
		out->as.bin.ptr = v->bp;
		out->as.bin.len = v->blen;
		break;
	case FQL_B_INT:
		out->tag = FSNP_I64;
		out->as.i = v->bi;
		break;
	case FQL_B_BOOL:
		out->tag = v->bb ? FSNP_TRUE : FSNP_FALSE;
		break;
	case FQL_B_FLOAT:
		out->tag = FSNP_F64;
		out->as.f = v->bf;
		break;
	}
}

static struct fsnp_bytes bound_bytes(const struct fql_value *v)
{
	struct fsnp_bytes b = {v->bp, v->blen};
	return b;
}

/* --- Record fields ------------------------------------------------------ */

static const struct {
	int kind; /* 0 str, 1 int, 2 val */
	int f;
} bitmap_src[FSNP_FQR_F_EVENT_ID] = {
    [FSNP_FQR_F_ID] = {0, RS_ID},
    [FSNP_FQR_F_TYPE] = {0, RS_TYPE},
    [FSNP_FQR_F_STATE] = {0, RS_STATE},
    [FSNP_FQR_F_VERSION] = {1, RI_VERSION},
    [FSNP_FQR_F_PRIORITY] = {1, RI_PRIORITY},
    [FSNP_FQR_F_PARTITION_KEY] = {0, RS_PARTITION_KEY},
    [FSNP_FQR_F_CREATED_AT_MS] = {1, RI_CREATED_AT_MS},
    [FSNP_FQR_F_UPDATED_AT_MS] = {1, RI_UPDATED_AT_MS},
    [FSNP_FQR_F_NEXT_RUN_AT_MS] = {1, RI_NEXT_RUN_AT_MS},
    [FSNP_FQR_F_LEASE_DEADLINE_MS] = {1, RI_LEASE_DEADLINE_MS},
    [FSNP_FQR_F_ATTEMPTS] = {1, RI_ATTEMPTS},
    [FSNP_FQR_F_RUN_STATE] = {0, RS_RUN_STATE},
    [FSNP_FQR_F_MAX_ACTIVE_MS] = {1, RI_MAX_ACTIVE_MS},
    [FSNP_FQR_F_PARENT_FLOW_ID] = {0, RS_PARENT_FLOW_ID},
    [FSNP_FQR_F_ROOT_FLOW_ID] = {0, RS_ROOT_FLOW_ID},
    [FSNP_FQR_F_CORRELATION_ID] = {0, RS_CORRELATION_ID},
    [FSNP_FQR_F_ATTRIBUTES] = {2, RV_ATTRIBUTES},
    [FSNP_FQR_F_STATE_META] = {2, RV_STATE_META},
};

static bool bin_eq(struct fsnp_bytes a, const char *p, uint32_t n)
{
	return a.len == n && (n == 0 || memcmp(a.ptr, p, n) == 0);
}

/* The whole map is projected (no projection, or the map field named). */
static bool whole(const struct fql_query *q, enum fql_fid id)
{
	if (!q->has_projection) {
		return true;
	}
	for (uint32_t i = 0; i < q->nproj; i++) {
		if (q->proj[i].id == id) {
			return true;
		}
	}
	return false;
}

/* attributes (or state_meta) restricted to the keyed selectors. */
static void write_keyed(struct fsnp_writer *w, const struct fql_query *q,
                        const struct fsnp_val *map, bool meta)
{
	struct fsnp_iter it, jt;
	struct fsnp_bytes k, k2;
	struct fsnp_val v, v2;
	fsnp_w_map_begin(w);
	fsnp_iter_init(&it, map);
	while (fsnp_iter_next(&it, &k, &v)) {
		bool any = false;
		for (uint32_t i = 0; i < q->nproj && !any; i++) {
			const struct fql_field *f = &q->proj[i];
			any = f->id == (meta ? FQL_F_STATE_META_KEY
			                     : FQL_F_ATTRIBUTE) &&
			      bin_eq(k, f->a, f->alen);
		}
		if (!any) {
			continue;
		}
		fsnp_w_key_bin(w, k.ptr, k.len);
		if (!meta) {
			fsnp_w_val(w, &v);
			continue;
		}
		if (v.tag != FSNP_MAP) {
			fsnp_w_map_begin(w);
			fsnp_w_map_end(w);
			continue;
		}
		fsnp_w_map_begin(w);
		fsnp_iter_init(&jt, &v);
		while (fsnp_iter_next(&jt, &k2, &v2)) {
			for (uint32_t i = 0; i < q->nproj; i++) {
				const struct fql_field *f = &q->proj[i];
				if (f->id == FQL_F_STATE_META_KEY &&
				    bin_eq(k, f->a, f->alen) &&
				    bin_eq(k2, f->b, f->blen)) {
					fsnp_w_key_bin(w, k2.ptr, k2.len);
					fsnp_w_val(w, &v2);
					break;
				}
			}
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
}

/* The result allowlist of a hydrated record, projected. */
static void write_record(struct fsnp_writer *w, const struct fql_query *q,
                         uint32_t bits, const struct frec *r)
{
	fsnp_w_map_begin(w);
	for (unsigned b = 0; b < FSNP_FQR_F_EVENT_ID; b++) {
		int f = bitmap_src[b].f;
		if (!(bits & (1u << b))) {
			continue;
		}
		switch (bitmap_src[b].kind) {
		case 0:
			if (r->s_set[f]) {
				fsnp_w_key(w, fsnp_fqr_field_name(b));
				fsnp_w_bin(w, r->s[f].ptr, r->s[f].len);
			}
			break;
		case 1:
			if (r->i_set[f]) {
				fsnp_w_key(w, fsnp_fqr_field_name(b));
				fsnp_w_i64(w, r->i[f]);
			}
			break;
		default:
			if (!r->v_set[f]) {
				break;
			}
			fsnp_w_key(w, fsnp_fqr_field_name(b));
			if (r->v[f].tag != FSNP_MAP ||
			    whole(q, b == FSNP_FQR_F_ATTRIBUTES
			                 ? FQL_F_ATTRIBUTES
			                 : FQL_F_STATE_META)) {
				fsnp_w_val(w, &r->v[f]);
			} else {
				write_keyed(w, q, &r->v[f],
				            b == FSNP_FQR_F_STATE_META);
			}
			break;
		}
	}
	fsnp_w_map_end(w);
}

/* --- Residual predicates ------------------------------------------------ */

static bool map_get_n(const struct fsnp_val *m, const char *k, uint32_t n,
                      struct fsnp_val *out)
{
	return m->tag == FSNP_MAP && fsnp_map_get_n(m, k, n, out) == 0;
}

/* The record's value of field f: 0 absent, 1 present (in *v). */
static int field_value(const struct frec *r, const struct fql_field *f,
                       struct fsnp_val *v)
{
	struct fsnp_val m;
	unsigned b;
	memset(v, 0, sizeof *v);
	switch (f->id) {
	case FQL_F_ATTRIBUTE:
		return r->v_set[RV_ATTRIBUTES] &&
		       map_get_n(&r->v[RV_ATTRIBUTES], f->a, f->alen, v);
	case FQL_F_STATE_META_KEY:
		return r->v_set[RV_STATE_META] &&
		       map_get_n(&r->v[RV_STATE_META], f->a, f->alen, &m) &&
		       map_get_n(&m, f->b, f->blen, v);
	default:
		break;
	}
	b = fql_field_fqr_bit(f->id);
	if (b >= FSNP_FQR_F_EVENT_ID) {
		return 0;
	}
	switch (bitmap_src[b].kind) {
	case 0:
		if (!r->s_set[bitmap_src[b].f]) {
			return 0;
		}
		v->tag = FSNP_BIN;
		v->as.bin = r->s[bitmap_src[b].f];
		return 1;
	case 1:
		if (!r->i_set[bitmap_src[b].f]) {
			return 0;
		}
		v->tag = FSNP_I64;
		v->as.i = r->i[bitmap_src[b].f];
		return 1;
	default:
		if (!r->v_set[bitmap_src[b].f]) {
			return 0;
		}
		*v = r->v[bitmap_src[b].f];
		return 1;
	}
}

/* Compares a scalar with a bound value in index-key order: -2 when they
 * are not comparable (different kinds), else -1, 0, 1. */
static int cmp_scalar(const struct fsnp_val *a, const struct fql_value *bv)
{
	struct fsnp_val b;
	struct sbuf ka, kb;
	int c;
	bound_val(bv, &b);
	sbuf_init(&ka);
	sbuf_init(&kb);
	if (flow_ix_value_key(a, &ka) != 0 || flow_ix_value_key(&b, &kb) != 0 ||
	    ka.len == 0 || kb.len == 0 || ka.p[0] != kb.p[0]) {
		c = -2;
	} else {
		size_t n = ka.len < kb.len ? ka.len : kb.len;
		c = memcmp(ka.p, kb.p, n);
		c = c != 0 ? (c < 0 ? -1 : 1)
		           : (ka.len == kb.len  ? 0
		              : ka.len < kb.len ? -1
		                                : 1);
	}
	sbuf_free(&ka);
	sbuf_free(&kb);
	return c;
}

static bool scalar_matches(const struct fsnp_val *v, const struct fql_pred *pr)
{
	int lo, hi;
	switch (pr->op) {
	case FQL_OP_EQ:
	case FQL_OP_IN:
		for (uint32_t i = 0; i < pr->nvals; i++) {
			if (cmp_scalar(v, &pr->v[i]) == 0) {
				return true;
			}
		}
		return false;
	case FQL_OP_BETWEEN:
		lo = cmp_scalar(v, &pr->v[0]);
		hi = cmp_scalar(v, &pr->v[1]);
		return lo != -2 && hi != -2 && lo >= 0 && hi <= 0;
	case FQL_OP_WINDOW:
		lo = cmp_scalar(v, &pr->v[0]);
		hi = cmp_scalar(v, &pr->v[1]);
		return lo != -2 && hi != -2 && lo >= 0 && hi < 0;
	default:
		return false;
	}
}

static bool pred_matches(const struct frec *r, const struct fql_pred *pr)
{
	struct fsnp_val v, e;
	struct fsnp_iter it;
	int have = field_value(r, &pr->field, &v);
	if (pr->op == FQL_OP_IS_MISSING) {
		return !have;
	}
	if (pr->op == FQL_OP_IS_NULL) {
		return !have || v.tag == FSNP_NIL;
	}
	if (!have) {
		return false;
	}
	if (v.tag == FSNP_ARRAY &&
	    (pr->op == FQL_OP_EQ || pr->op == FQL_OP_IN)) {
		/* a list attribute matches when it contains the value, as its
		 * index entries do */
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (scalar_matches(&e, pr)) {
				return true;
			}
		}
		return false;
	}
	return scalar_matches(&v, pr);
}

/* --- Point read --------------------------------------------------------- */

static int load(struct run *x, struct fsnp_bytes id, struct sbuf *val,
                struct frec *r)
{
	struct sbuf k;
	int rv;
	sbuf_init(&k);
	fkey_rec(&k, x->c->group, x->part, id);
	rv = store_tx_get(x->c->tx, k.p, k.len, val);
	sbuf_free(&k);
	if (rv < 0) {
		fql_diag_set(x->d, FQL_QUERY_STORAGE_UNAVAILABLE, NULL, NULL);
		return -1;
	}
	if (rv == 0) {
		return 0;
	}
	x->u[U_BYTES] += val->len;
	if (frec_decode(val->p, val->len, r) != 0 || !r->s_set[RS_ID] ||
	    r->s[RS_ID].len != id.len ||
	    memcmp(r->s[RS_ID].ptr, id.ptr, id.len) != 0) {
		fql_diag_set(x->d, FQL_QUERY_STORAGE_INCONSISTENT,
		             "the stored record does not match its key", NULL);
		return -1;
	}
	x->u[U_HYDRATED]++;
	return 1;
}

static int run_point(struct run *x, struct fsnp_writer *w)
{
	const struct fql_value *id = NULL;
	struct sbuf val;
	struct frec r;
	int rv;
	for (uint32_t i = 0; i < x->q->npreds; i++) {
		if (x->q->preds[i].field.id == FQL_F_RUN_ID) {
			id = &x->q->preds[i].v[0];
		}
	}
	sbuf_init(&val);
	x->u[U_SEEKS] = 1;
	x->u[U_ENTRIES] = 1;
	rv = load(x, bound_bytes(id), &val, &r);
	if (rv < 0) {
		sbuf_free(&val);
		return -1;
	}
	x->u[U_PAGES] = 1;
	fsnp_w_key(w, "records");
	fsnp_w_array_begin(w);
	if (rv == 1) {
		write_record(w, x->q, x->p->proj_bits, &r);
		x->u[U_RESULTS] = 1;
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "has_more");
	fsnp_w_bool(w, false);
	high_water(x, val.cap);
	sbuf_free(&val);
	return 0;
}

/* --- Counters ----------------------------------------------------------- */

struct sum {
	uint64_t n;
	uint64_t entries;
};

static int add_count(void *arg, struct fsnp_bytes part, struct fsnp_bytes state,
                     uint64_t n)
{
	(void)part;
	(void)state;
	((struct sum *)arg)->n += n;
	((struct sum *)arg)->entries++;
	return 0;
}

static int run_count(struct run *x, struct fsnp_writer *w)
{
	const struct fql_plan *p = x->p;
	struct fsnp_bytes type = bound_bytes(&p->type->v[0]);
	uint64_t total = 0, n;
	struct sbuf vk;
	int rv = 0;

	sbuf_init(&vk);
	if (p->state == NULL) {
		struct sum s = {0, 0};
		struct flow_ix_usage u = {0};
		rv = flow_count_each(x->c->tx, x->c->group, type, &x->part,
		                     add_count, &s, &u);
		total = s.n;
		x->u[U_SEEKS] += u.seeks ? u.seeks : 1;
		x->u[U_ENTRIES] += u.entries ? u.entries : s.entries;
		x->u[U_BYTES] += u.bytes;
	} else {
		for (uint32_t i = 0; i < p->state->nvals && rv == 0; i++) {
			struct fsnp_bytes st = bound_bytes(&p->state->v[i]);
			n = 0;
			if (p->attr != NULL) {
				struct fsnp_val av;
				struct fsnp_bytes name = {
				    (const uint8_t *)p->attr->field.a,
				    p->attr->field.alen};
				bound_val(&p->attr->v[0], &av);
				if (flow_ix_value_key(&av, &vk) != 0) {
					break;
				}
				struct fsnp_bytes key = {vk.p, vk.len};
				rv = flow_acount_get(x->c->tx, x->c->group,
				                     type, x->part, st, name,
				                     &key, &n);
			} else {
				rv = flow_count_get(x->c->tx, x->c->group, type,
				                    x->part, st, &n);
			}
			x->u[U_SEEKS]++;
			x->u[U_ENTRIES]++;
			x->u[U_BYTES] += 8;
			total += n;
		}
	}
	sbuf_free(&vk);
	if (rv < 0) {
		fql_diag_set(x->d, FQL_QUERY_STORAGE_UNAVAILABLE, NULL, NULL);
		return -1;
	}
	if (x->u[U_ENTRIES] == 0) {
		x->u[U_ENTRIES] = 1; /* the counter read that found none */
	}
	x->u[U_PAGES] = 1;
	x->u[U_RESULTS] = 1;
	fsnp_w_key(w, "count");
	fsnp_w_i64(w, (int64_t)total);
	return 0;
}

/* --- Ranges ------------------------------------------------------------- */

struct rng {
	struct sbuf prefix;
	struct flow_ix_page page;
	size_t pos;
	bool more;               /* the index has entries after the page */
	bool started;            /* scanned once */
	struct sbuf last;        /* the key to continue after */
	struct fsnp_bytes state; /* covering: the state component */
	int priority;            /* the due index's priority, or -1 */
};

static int cmp_tail(const struct rng *a, const struct rng *b, bool desc)
{
	const struct flow_ix_hit *ha = &a->page.hits[a->pos];
	const struct flow_ix_hit *hb = &b->page.hits[b->pos];
	const uint8_t *ta = ha->key.ptr + a->prefix.len;
	const uint8_t *tb = hb->key.ptr + b->prefix.len;
	size_t la = ha->key.len - a->prefix.len,
	       lb = hb->key.len - b->prefix.len;
	size_t n = la < lb ? la : lb;
	int c = memcmp(ta, tb, n);
	if (c == 0) {
		c = la == lb ? 0 : la < lb ? -1 : 1;
	}
	return desc ? -c : c;
}

bool fql_exec_tail_ok(const uint8_t *t, size_t len)
{
	/* an index tail (order, id), or a history event's version */
	return len == 8 || (len >= 12 && be_get32(t + 8) == len - 12);
}

/* The equality components of range i. */
static void components(struct run *x, uint32_t i, struct fsnp_bytes *eq,
                       size_t *neq, struct sbuf *vk, struct rng *g)
{
	const struct fql_plan *p = x->p;
	const struct fql_pred *pr;
	struct fsnp_val v;
	*neq = 0;
	g->priority = -1;
	if (p->due) {
		/* one range per state and priority (the key stores 255 -
		 * priority, so higher priorities come first; the merge
		 * orders them by the tail alone) */
		uint32_t si = i / FQL_PLAN_DUE_PRIORITIES;
		eq[0] = bound_bytes(&p->eq[0]->v[0]);
		eq[1] = bound_bytes(&p->eq[1]->v[p->multi != NULL ? si : 0]);
		g->state = eq[1];
		g->priority = (int)(i % FQL_PLAN_DUE_PRIORITIES);
		*neq = 2;
		return;
	}
	switch (p->ix) {
	case FLOW_IX_UPDATED:
	case FLOW_IX_CREATED:
		eq[0] = bound_bytes(&p->eq[0]->v[0]);
		eq[1] = bound_bytes(&p->eq[1]->v[p->multi != NULL ? i : 0]);
		g->state = eq[1];
		*neq = 2;
		return;
	case FLOW_IX_PARENT:
	case FLOW_IX_ROOT:
	case FLOW_IX_CORRELATION:
		eq[0] = bound_bytes(&p->eq[0]->v[0]);
		*neq = 1;
		return;
	case FLOW_IX_ATTR:
	case FLOW_IX_META:
		pr = p->eq[0];
		bound_val(&pr->v[p->multi != NULL ? i : 0], &v);
		if (flow_ix_value_key(&v, vk) != 0) {
			sbuf_reset(vk);
		}
		eq[0].ptr = (const uint8_t *)pr->field.a;
		eq[0].len = pr->field.alen;
		if (p->ix == FLOW_IX_META) {
			eq[1].ptr = (const uint8_t *)pr->field.b;
			eq[1].len = pr->field.blen;
			eq[2].ptr = vk->p;
			eq[2].len = vk->len;
			*neq = 3;
		} else {
			eq[1].ptr = vk->p;
			eq[1].len = vk->len;
			*neq = 2;
		}
		return;
	default:
		return;
	}
}

/* Fills range g's page when it is used up. */
static int refill(struct run *x, struct rng *g, uint64_t lo, uint64_t hi,
                  size_t page)
{
	struct flow_ix_range r = {
	    .prefix = g->prefix.p,
	    .prefix_len = g->prefix.len,
	    .lo = lo,
	    .hi = hi,
	    .desc = x->p->desc,
	    .resume = g->last.len > 0 ? g->last.p : NULL,
	    .resume_len = g->last.len,
	    .page = page,
	};
	struct flow_ix_usage u = {0};
	const char *msg = NULL;
	if (g->pos < g->page.n || (g->started && !g->more)) {
		return 0;
	}
	if (flow_ix_scan(x->c->tx, &r, &g->page, &u, &msg) != 0) {
		fql_diag_set(x->d,
		             msg != NULL ? FQL_QUERY_STORAGE_INCONSISTENT
		                         : FQL_QUERY_STORAGE_UNAVAILABLE,
		             NULL, NULL);
		return -1;
	}
	g->started = true;
	g->pos = 0;
	g->more = g->page.more;
	x->u[U_SEEKS] += u.seeks;
	x->u[U_PAGES] += u.pages;
	x->u[U_ENTRIES] += u.entries;
	x->u[U_BYTES] += u.bytes;
	return 0;
}

/* The covering record of a hit: identity, version, order and the
 * equality components. */
static void write_covering(struct run *x, struct fsnp_writer *w,
                           const struct rng *g, const struct flow_ix_hit *h)
{
	const struct fql_plan *p = x->p;
	uint32_t bits = p->proj_bits;
	enum fql_fid of = x->q->order[0].field.id;
	fsnp_w_map_begin(w);
	for (unsigned b = 0; b < FSNP_FQR_F_EVENT_ID; b++) {
		if (!(bits & (1u << b))) {
			continue;
		}
		fsnp_w_key(w, fsnp_fqr_field_name(b));
		if (b == FSNP_FQR_F_ID) {
			fsnp_w_bin(w, h->id.ptr, h->id.len);
		} else if (b == FSNP_FQR_F_VERSION) {
			fsnp_w_i64(w, (int64_t)h->version);
		} else if (b == FSNP_FQR_F_PRIORITY && g->priority >= 0) {
			fsnp_w_i64(w, g->priority);
		} else if (b == FSNP_FQR_F_PARTITION_KEY) {
			fsnp_w_bin(w, x->part.ptr, x->part.len);
		} else if (b == (unsigned)of) {
			fsnp_w_i64(w, (int64_t)h->order);
		} else if (b == FSNP_FQR_F_STATE && g->state.ptr != NULL) {
			fsnp_w_bin(w, g->state.ptr, g->state.len);
		} else {
			/* type or a lineage id: its single equality */
			for (uint32_t i = 0; i < p->neq; i++) {
				if (fql_field_fqr_bit(p->eq[i]->field.id) ==
				    b) {
					struct fsnp_bytes v =
					    bound_bytes(&p->eq[i]->v[0]);
					fsnp_w_bin(w, v.ptr, v.len);
				}
			}
		}
	}
	fsnp_w_map_end(w);
}

/* The range of root `root` holds no entry for the root itself when it is
 * its own root (flow_ix_self_root): range g (prefix and resume key set
 * like the index range's) gets a page of at most that one hit, in the
 * entry's key form, from the record of `root` in the partition. */
static int self_root(struct run *x, struct rng *g, struct fsnp_bytes root,
                     uint64_t lo, uint64_t hi)
{
	struct flow_ix_hit *h;
	struct sbuf k, val;
	struct frec r;
	uint64_t order;
	int rv, c;

	g->started = true;
	g->more = false;
	g->pos = 0;
	g->page.n = 0;
	sbuf_init(&k);
	sbuf_init(&val);
	fkey_rec(&k, x->c->group, x->part, root);
	rv = store_tx_get(x->c->tx, k.p, k.len, &val);
	x->u[U_SEEKS]++;
	if (rv < 0) {
		fql_diag_set(x->d, FQL_QUERY_STORAGE_UNAVAILABLE, NULL, NULL);
		goto out;
	}
	rv = 0;
	if (val.len == 0 || frec_decode(val.p, val.len, &r) != 0 ||
	    !frec_eq(&r, RS_ID, root) || !flow_ix_self_root(&r)) {
		goto out; /* absent, or not its own root */
	}
	order = r.i_set[RI_UPDATED_AT_MS] ? (uint64_t)r.i[RI_UPDATED_AT_MS] : 0;
	if (order < lo || order > hi) {
		goto out;
	}
	sbuf_reset(&k);
	sbuf_add(&k, g->prefix.p, g->prefix.len);
	sbuf_u64(&k, order);
	sbuf_lbytes(&k, root.ptr, root.len);
	if (g->last.len > 0) {
		size_t n = k.len < g->last.len ? k.len : g->last.len;
		c = memcmp(k.p, g->last.p, n);
		if (c == 0) {
			c = k.len == g->last.len  ? 0
			    : k.len < g->last.len ? -1
			                          : 1;
		}
		if (x->p->desc ? c >= 0 : c <= 0) {
			goto out; /* at or before the resume point */
		}
	}
	x->u[U_ENTRIES]++;
	x->u[U_BYTES] += k.len;
	free(g->page.hits);
	g->page.hits = calloc(1, sizeof *g->page.hits);
	if (g->page.hits == NULL) {
		abort();
	}
	sbuf_reset(&g->page.store);
	sbuf_add(&g->page.store, k.p, k.len);
	h = &g->page.hits[0];
	h->order = order;
	h->version = r.i_set[RI_VERSION] ? (uint64_t)r.i[RI_VERSION] : 0;
	h->key.ptr = g->page.store.p;
	h->key.len = k.len;
	h->id.ptr = h->key.ptr + k.len - root.len;
	h->id.len = root.len;
	g->page.n = 1;
out:
	sbuf_free(&k);
	sbuf_free(&val);
	return rv;
}

static int run_range(struct run *x, const uint8_t *resume, size_t rlen,
                     struct fsnp_writer *w)
{
	const struct fql_plan *p = x->p;
	uint32_t nr = (p->multi != NULL ? p->multi->nvals : 1) *
	              (p->due ? FQL_PLAN_DUE_PRIORITIES : 1);
	/* root ranges: one more, the root's own record (self_root) */
	bool self = !p->due && p->ix == FLOW_IX_ROOT;
	struct rng g[FQL_PLAN_MAX_RANGES + 1];
	struct sbuf vk, val, last_tail;
	uint64_t lo = 0, hi = UINT64_MAX, consumed = 0;
	uint32_t limit = x->q->limit;
	size_t page = p->nresidual > 0 ? 128 : (size_t)limit;
	bool empty = false, has_more = false;
	int rv = 0;

	if (p->range != NULL) {
		int64_t a = p->range->v[0].bi, b = p->range->v[1].bi;
		if (p->range->op == FQL_OP_WINDOW) {
			b = b == INT64_MIN ? b : b - 1;
		}
		if (b < 0 || a > b) {
			empty = true;
		}
		lo = a < 0 ? 0 : (uint64_t)a;
		hi = b < 0 ? 0 : (uint64_t)b;
	}
	sbuf_init(&vk);
	sbuf_init(&val);
	sbuf_init(&last_tail);
	memset(g, 0, sizeof g);
	for (uint32_t i = 0; i < nr; i++) {
		struct fsnp_bytes eq[3];
		size_t neq;
		sbuf_init(&g[i].prefix);
		sbuf_init(&g[i].last);
		flow_ix_page_init(&g[i].page);
		components(x, i, eq, &neq, &vk, &g[i]);
		if (p->due) {
			flow_ix_due_prefix(&g[i].prefix, x->c->group, x->part,
			                   eq[0], eq[1], g[i].priority);
		} else {
			flow_ix_prefix(&g[i].prefix, x->c->group, x->part,
			               p->ix, eq, neq);
		}
		if (rlen > 0) {
			sbuf_add(&g[i].last, g[i].prefix.p, g[i].prefix.len);
			sbuf_add(&g[i].last, resume, rlen);
		}
	}
	if (self) {
		struct rng *s = &g[nr];
		sbuf_init(&s->prefix);
		sbuf_init(&s->last);
		flow_ix_page_init(&s->page);
		s->priority = -1;
		sbuf_add(&s->prefix, g[0].prefix.p, g[0].prefix.len);
		sbuf_add(&s->last, g[0].last.p, g[0].last.len);
		s->started = true;
		nr++;
		if (!empty && self_root(x, s, bound_bytes(&p->eq[0]->v[0]), lo,
		                        hi) != 0) {
			rv = -1;
			goto out;
		}
	}
	fsnp_w_key(w, "records");
	fsnp_w_array_begin(w);
	while (!empty && x->u[U_RESULTS] < limit) {
		struct rng *best = NULL;
		const struct flow_ix_hit *h;
		uint64_t mem = 0;
		if (consumed >= FQL_PLAN_SCAN_BUDGET) {
			has_more = true;
			break;
		}
		if (past_deadline(x, consumed)) {
			rv = -1;
			goto out;
		}
		for (uint32_t i = 0; i < nr; i++) {
			if (refill(x, &g[i], lo, hi, page) != 0) {
				rv = -1;
				goto out;
			}
			mem += g[i].page.store.cap;
			if (g[i].pos < g[i].page.n &&
			    (best == NULL ||
			     cmp_tail(&g[i], best, p->desc) < 0)) {
				best = &g[i];
			}
		}
		high_water(x, mem + w->buf->cap + val.cap);
		if (best == NULL) {
			break;
		}
		h = &best->page.hits[best->pos++];
		consumed++;
		sbuf_reset(&best->last);
		sbuf_add(&best->last, h->key.ptr, h->key.len);
		sbuf_reset(&last_tail);
		sbuf_add(&last_tail, h->key.ptr + best->prefix.len,
		         h->key.len - best->prefix.len);
		if (!p->requires_hydration) {
			write_covering(x, w, best, h);
			x->u[U_RESULTS]++;
			continue;
		}
		struct frec r;
		int lr = load(x, h->id, &val, &r);
		if (lr < 0) {
			rv = -1;
			goto out;
		}
		if (lr == 0 || (h->version != UINT64_MAX &&
		                (!r.i_set[RI_VERSION] ||
		                 (uint64_t)r.i[RI_VERSION] != h->version))) {
			fql_diag_set(x->d, FQL_QUERY_STORAGE_INCONSISTENT,
			             "an index entry does not match its record",
			             NULL);
			rv = -1;
			goto out;
		}
		bool ok = true;
		for (uint32_t i = 0; i < p->nresidual && ok; i++) {
			x->u[U_RESIDUAL]++;
			ok = pred_matches(&r, p->residual[i]);
		}
		if (ok) {
			write_record(w, x->q, p->proj_bits, &r);
			x->u[U_RESULTS]++;
		}
	}
	if (!has_more && !empty) {
		for (uint32_t i = 0; i < nr; i++) {
			if (g[i].pos < g[i].page.n ||
			    (g[i].started && g[i].more) || !g[i].started) {
				has_more = true;
			}
		}
		if (x->u[U_RESULTS] < limit) {
			has_more = false; /* every range ran out */
		}
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "has_more");
	fsnp_w_bool(w, has_more);
	if (has_more) {
		fsnp_w_key(w, "resume");
		fsnp_w_bin(w, last_tail.p, last_tail.len);
	}
out:
	for (uint32_t i = 0; i < nr; i++) {
		sbuf_free(&g[i].prefix);
		sbuf_free(&g[i].last);
		flow_ix_page_free(&g[i].page);
	}
	sbuf_free(&vk);
	sbuf_free(&val);
	sbuf_free(&last_tail);
	return rv;
}

/* --- History ----------------------------------------------------------- */

/* A history event ([event_id, [name, value, ...]]) as a row: event_id
 * and fields (the whole map, or the projected names). */
static int write_event(struct fsnp_writer *w, const struct fql_query *q,
                       uint32_t bits, const struct fsnp_val *ev)
{
	struct fsnp_iter it, jt;
	struct fsnp_val id, list, k, v;
	fsnp_iter_init(&it, ev);
	if (ev->tag != FSNP_ARRAY || !fsnp_iter_next(&it, NULL, &id) ||
	    !fsnp_iter_next(&it, NULL, &list) || list.tag != FSNP_ARRAY) {
		return -1;
	}
	fsnp_w_map_begin(w);
	if (bits & (1u << FSNP_FQR_F_EVENT_ID)) {
		fsnp_w_key(w, "event_id");
		fsnp_w_val(w, &id);
	}
	if (bits & (1u << FSNP_FQR_F_FIELDS)) {
		bool all = whole(q, FQL_F_FIELDS);
		fsnp_w_key(w, "fields");
		fsnp_w_map_begin(w);
		fsnp_iter_init(&jt, &list);
		while (fsnp_iter_next(&jt, NULL, &k) &&
		       fsnp_iter_next(&jt, NULL, &v)) {
			bool want = all;
			if (k.tag != FSNP_BIN) {
				continue;
			}
			for (uint32_t i = 0; i < q->nproj && !want; i++) {
				want = q->proj[i].id == FQL_F_FIELD &&
				       bin_eq(k.as.bin, q->proj[i].a,
				              q->proj[i].alen);
			}
			if (want) {
				fsnp_w_key_bin(w, k.as.bin.ptr, k.as.bin.len);
				fsnp_w_val(w, &v);
			}
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
	return 0;
}

static int run_history(struct run *x, const uint8_t *resume, size_t rlen,
                       struct fsnp_writer *w)
{
	const struct fql_value *id = NULL;
	struct store_tx_iter *it;
	struct sbuf pfx, start;
	uint64_t last = 0;
	bool valid, has_more = false, desc = x->p->desc;
	int rv = 0;

	for (uint32_t i = 0; i < x->q->npreds; i++) {
		if (x->q->preds[i].field.id == FQL_F_RUN_ID) {
			id = &x->q->preds[i].v[0];
		}
	}
	if (rlen != 0 && rlen != 8) {
		fql_diag_set(x->d, FQL_QUERY_CURSOR_INVALID,
		             "the cursor's position is malformed", NULL);
		return -1;
	}
	sbuf_init(&pfx);
	sbuf_init(&start);
	fkey_hist_prefix(&pfx, x->c->group, x->part, bound_bytes(id));
	sbuf_add(&start, pfx.p, pfx.len);
	if (rlen == 8) {
		sbuf_add(&start, resume, 8);
	} else if (desc) {
		sbuf_u64(&start, UINT64_MAX);
	}
	it = store_tx_iter_open(x->c->tx, pfx.p, pfx.len);
	valid = desc ? store_tx_iter_seek_prev(it, start.p, start.len)
	             : store_tx_iter_seek(it, start.p, start.len);
	x->u[U_SEEKS] = 1;
	fsnp_w_key(w, "records");
	fsnp_w_array_begin(w);
	for (; valid; valid = store_tx_iter_valid(it)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val ev;
		uint64_t ver;
		if (kl != pfx.len + 8) {
			goto next; /* not an event key */
		}
		ver = be_get64(k + pfx.len);
		if (rlen == 8 && ver == be_get64(resume)) {
			goto next; /* the page before ended here */
		}
		x->u[U_ENTRIES]++;
		x->u[U_BYTES] += kl + vl;
		if (past_deadline(x, x->u[U_ENTRIES])) {
			rv = -1;
			break;
		}
		if (x->u[U_RESULTS] == (x->q->has_limit ? x->q->limit : 1)) {
			has_more = true; /* the look-ahead event */
			break;
		}
		if (fsnp_value_decode_body(v, vl, NULL, &ev) != 0 ||
		    write_event(w, x->q, x->p->proj_bits, &ev) != 0) {
			fql_diag_set(x->d, FQL_QUERY_STORAGE_INCONSISTENT,
			             "a history event is malformed", NULL);
			rv = -1;
			break;
		}
		x->u[U_HYDRATED]++;
		x->u[U_RESULTS]++;
		last = ver;
		high_water(x, w->buf->cap + vl);
	next:
		if (desc) {
			store_tx_iter_prev(it);
		} else {
			store_tx_iter_next(it);
		}
	}
	if (x->u[U_ENTRIES] > 0) {
		x->u[U_PAGES] = 1;
	}
	if (store_tx_iter_close(it) != 0 && rv == 0) {
		fql_diag_set(x->d, FQL_QUERY_STORAGE_UNAVAILABLE, NULL, NULL);
		rv = -1;
	}
	sbuf_free(&pfx);
	sbuf_free(&start);
	if (rv != 0) {
		return rv;
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "has_more");
	fsnp_w_bool(w, has_more);
	if (has_more) {
		uint8_t t[8];
		be_put64(t, last);
		fsnp_w_key(w, "resume");
		fsnp_w_bin(w, t, 8);
	}
	return 0;
}

/* --- Entry -------------------------------------------------------------- */

static void write_usage(struct fsnp_writer *w, const uint64_t *u)
{
	fsnp_w_key(w, "usage");
	fsnp_w_map_begin(w);
	for (int i = 0; i < U_N; i++) {
		fsnp_w_key(w, usage_names[i]);
		fsnp_w_i64(w, (int64_t)u[i]);
	}
	fsnp_w_map_end(w);
}

static void error_result(struct sbuf *res, const struct fql_diag *d)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "error");
	fql_diag_write(d, &w);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0 && !b.oom) {
		res_begin(res, STORE_OK);
		sbuf_add(res, b.data, b.len);
	} else {
		res_error(res, STORE_ERR, "ERR Flow query engine failed");
	}
	wbuf_free(&b);
}

int fql_exec_apply(struct tx *tx, const uint8_t *body, size_t len,
                   struct sbuf *res)
{
	struct fsnp_val map, qv, params = {.tag = FSNP_NIL}, rs;
	struct fql_query *q = malloc(sizeof *q);
	struct fql_plan plan;
	struct fql_diag d;
	struct fctx c;
	struct run x;
	struct wbuf b;
	struct fsnp_writer w;
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *part;
	size_t plen;
	uint64_t t0 = mono_us();
	const uint8_t *resume = NULL;
	size_t rlen = 0;
	int64_t deadline = 0;
	int rv;

	memset(&d, 0, sizeof d);
	if (q == NULL) {
		res_error(res, STORE_ERR, "OOM flow query");
		return 0;
	}
	if (fsnp_value_decode_body(body, len, NULL, &map) != 0 ||
	    fsnp_map_get(&map, "query", &qv) != 0 || qv.tag != FSNP_BIN) {
		free(q);
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow query body invalid");
		return 0;
	}
	(void)fsnp_map_get(&map, "params", &params);
	if (fsnp_map_get(&map, "deadline_ms", &rs) == 0) {
		(void)fsnp_val_i64(&rs, &deadline);
	}
	if (fsnp_map_get(&map, "resume", &rs) == 0 && rs.tag == FSNP_BIN) {
		if (!fql_exec_tail_ok(rs.as.bin.ptr, rs.as.bin.len)) {
			fql_diag_set(&d, FQL_QUERY_CURSOR_INVALID,
			             "the cursor's position is malformed",
			             NULL);
			error_result(res, &d);
			free(q);
			return 0;
		}
		resume = rs.as.bin.ptr;
		rlen = rs.as.bin.len;
	}
	if (fql_parse((const char *)qv.as.bin.ptr, qv.as.bin.len, q, &d) != 0 ||
	    fql_bind(q, &params, &d) != 0) {
		error_result(res, &d);
		free(q);
		return 0;
	}
	fql_plan(q, &plan);
	if (plan.access == FQL_ACCESS_NONE) {
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "error");
		fql_plan_error_write(q, &plan, &w);
		fsnp_w_map_end(&w);
		if (fsnp_w_finish(&w) == 0 && !b.oom) {
			res_begin(res, STORE_OK);
			sbuf_add(res, b.data, b.len);
		} else {
			res_error(res, STORE_ERR,
			          "ERR Flow query engine failed");
		}
		wbuf_free(&b);
		free(q);
		return 0;
	}
	fctx_init(&c, tx, 0, 0);
	memset(&x, 0, sizeof x);
	x.c = &c;
	x.q = q;
	x.p = &plan;
	x.d = &d;
	x.deadline_ms = deadline > 0 ? (uint64_t)deadline : 0;
	{
		struct fsnp_bytes id = {0}, pk = {0};
		for (uint32_t i = 0; i < q->npreds; i++) {
			const struct fql_pred *pr = &q->preds[i];
			if (pr->op != FQL_OP_EQ) {
				continue;
			}
			if (pr->field.id == FQL_F_PARTITION_KEY) {
				pk = bound_bytes(&pr->v[0]);
			} else if (pr->field.id == FQL_F_RUN_ID) {
				id = bound_bytes(&pr->v[0]);
			}
		}
		flow_route_partition(id.ptr, id.len, pk.ptr, pk.len, buf, &part,
		                     &plen);
		x.part.ptr = pk.ptr != NULL ? pk.ptr : part;
		x.part.len = pk.ptr != NULL ? pk.len : plen;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "kind");
	fsnp_w_str(&w, plan.access == FQL_ACCESS_COUNTER ? "count" : "records");
	switch (plan.access) {
	case FQL_ACCESS_POINT:
		rv = run_point(&x, &w);
		break;
	case FQL_ACCESS_COUNTER:
		rv = run_count(&x, &w);
		break;
	case FQL_ACCESS_HISTORY:
		rv = run_history(&x, resume, rlen, &w);
		break;
	default:
		rv = run_range(&x, resume, rlen, &w);
		break;
	}
	high_water(&x, b.cap);
	x.u[U_WALL] = mono_us() - t0;
	write_usage(&w, x.u);
	fsnp_w_map_end(&w);
	if (rv != 0) {
		error_result(res, &d);
	} else if (fsnp_w_finish(&w) == 0 && !b.oom) {
		res_begin(res, STORE_OK);
		sbuf_add(res, b.data, b.len);
	} else {
		res_error(res, STORE_ERR, "ERR Flow query engine failed");
	}
	wbuf_free(&b);
	fctx_fini(&c);
	free(q);
	return 0;
}

/* --- Fingerprint input -------------------------------------------------- */

int fql_exec_canonical(const struct fql_query *q, struct wbuf *out)
{
	size_t start = out->len;
	if (fql_print(q, out) != 0) {
		return -1;
	}
	if (q->has_cursor) {
		/* Leave out " CURSOR @name": the page that issued the cursor
		 * had none. It is the last such text (literals only come
		 * earlier, in WHERE), followed by " RETURN". */
		static const char kw[] = " CURSOR @";
		size_t n = out->len - start, at = SIZE_MAX;
		const char *t = (const char *)out->data + start;
		for (size_t i = 0; i + sizeof kw - 1 <= n; i++) {
			if (memcmp(t + i, kw, sizeof kw - 1) == 0) {
				at = i;
			}
		}
		if (at != SIZE_MAX) {
			size_t end = at + sizeof kw - 1;
			while (end < n && t[end] != ' ') {
				end++;
			}
			memmove(out->data + start + at, out->data + start + end,
			        n - end);
			out->len -= end - at;
		}
	}
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		for (uint32_t k = 0; k < pr->nvals; k++) {
			const struct fql_value *v = &pr->v[k];
			wbuf_put_u8(out, 0);
			wbuf_put_u8(out, (uint8_t)v->btype);
			switch (v->btype) {
			case FQL_B_STR:
				wbuf_put_u32(out, (uint32_t)v->blen);
				wbuf_append(out, v->bp, v->blen);
				break;
			case FQL_B_INT:
				wbuf_put_u64(out, (uint64_t)v->bi);
				break;
			case FQL_B_BOOL:
				wbuf_put_u8(out, v->bb);
				break;
			case FQL_B_FLOAT: {
				uint64_t bits;
				memcpy(&bits, &v->bf, 8);
				wbuf_put_u64(out, bits);
				break;
			}
			}
		}
	}
	return out->oom ? -1 : 0;
}
