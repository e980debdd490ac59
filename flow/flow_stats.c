/* FLOW.STATS / ATTRIBUTES / ATTRIBUTE_VALUES (flow_stats.h). */
#include "flow/flow_stats.h"

#include <stdlib.h>
#include <string.h>

#include "flow/flow_index.h"
#include "flow/flow_ops.h"
#include "store/ext.h"
#include "wire/fsnp_opcode.h"

#define E1(...) flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__)

static bool beq(struct fsnp_bytes a, struct fsnp_bytes b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static int bcmp_(struct fsnp_bytes a, struct fsnp_bytes b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
	return c != 0 ? c : (a.len < b.len ? -1 : a.len > b.len);
}

static const struct flow_opt *opt(const struct flow_req *q, enum flow_field f)
{
	return q->f[f].set ? &q->f[f] : NULL;
}

/* The request's `count` (default 100, 1..1000). */
static int list_count(const struct flow_req *q, int64_t *n,
                      struct flow_err *err)
{
	const struct flow_opt *o = opt(q, FF_COUNT);
	*n = 100;
	if (o != NULL) {
		if (o->i < 1 || o->i > 1000) {
			return E1("ERR flow count must be between 1 and 1000");
		}
		*n = o->i;
	}
	return 0;
}

/* The type's indexed_attributes (policy), each u32 len + name in
 * `names`. */
static int indexed_names(struct fctx *c, struct fsnp_bytes type,
                         struct sbuf *names)
{
	struct sbuf v;
	struct fsnp_val m, l, e;
	struct fsnp_iter it;
	int rv;

	sbuf_reset(names);
	sbuf_init(&v);
	fkey_policy(&c->key, c->group, type);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, &v);
	if (rv == 1 && fsnp_value_decode_body(v.p, v.len, NULL, &m) == 0 &&
	    m.tag == FSNP_MAP &&
	    fsnp_map_get(&m, "indexed_attributes", &l) == 0 &&
	    l.tag == FSNP_ARRAY) {
		fsnp_iter_init(&it, &l);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (e.tag == FSNP_BIN && e.as.bin.len > 0) {
				sbuf_lbytes(names, e.as.bin.ptr, e.as.bin.len);
			}
		}
	}
	sbuf_free(&v);
	return rv < 0 ? -1 : 0;
}

/* The i-th entry of a u32 len + bytes list; false past its end. */
static bool list_at(const struct sbuf *l, size_t *off, struct fsnp_bytes *out)
{
	if (*off + 4 > l->len) {
		return false;
	}
	out->len = be_get32(l->p + *off);
	out->ptr = l->p + *off + 4;
	*off += 4 + out->len;
	return true;
}

/* --- FLOW.STATS ----------------------------------------------------------- */

struct stats_sum {
	struct fsnp_bytes state; /* len 0: any */
	bool any;
	struct fsnp_bytes name, value; /* one attribute (name.len > 0) */
	uint64_t n;
	/* (part, state) pairs with flows that match, u32 len + bytes each */
	struct sbuf parts;
};

static int sum_count(void *arg, struct fsnp_bytes part, struct fsnp_bytes state,
                     uint64_t n)
{
	struct stats_sum *s = arg;
	if (s->any || beq(state, s->state)) {
		s->n += n;
		sbuf_lbytes(&s->parts, part.ptr, part.len);
		sbuf_lbytes(&s->parts, state.ptr, state.len);
	}
	return 0;
}

/* Whether the record's attribute `name` equals or contains value key
 * `vk`. */
static bool attr_has(const struct frec *r, struct fsnp_bytes name,
                     struct fsnp_bytes vk, struct sbuf *tmp)
{
	struct fsnp_val v, e;
	struct fsnp_iter it;

	if (!r->v_set[RV_ATTRIBUTES] || r->v[RV_ATTRIBUTES].tag != FSNP_MAP ||
	    fsnp_map_get_n(&r->v[RV_ATTRIBUTES], name.ptr, name.len, &v) != 0) {
		return false;
	}
	if (v.tag != FSNP_ARRAY) {
		return flow_ix_value_key(&v, tmp) == 0 &&
		       beq((struct fsnp_bytes){tmp->p, tmp->len}, vk);
	}
	fsnp_iter_init(&it, &v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (flow_ix_value_key(&e, tmp) == 0 &&
		    beq((struct fsnp_bytes){tmp->p, tmp->len}, vk)) {
			return true;
		}
	}
	return false;
}

/* Several attributes: walk the first one's index in every partition of
 * the type and check each record (bounded by FLOW_STATS_MAX_SCAN). */
static int stats_scan(struct fctx *c, const struct flow_req *q,
                      const struct sbuf *vkeys, size_t nattr,
                      struct stats_sum *s, struct flow_err *err)
{
	const struct fsnp_val *am = &q->f[FF_ATTRIBUTES].v;
	struct fsnp_bytes names[16], vks[16], eq[2], last = {NULL, 0};
	struct fsnp_bytes part, pstate;
	struct flow_ix_usage u = {0};
	struct flow_ix_page pg;
	struct sbuf pfx, tmp, resume, recbuf;
	struct fsnp_iter it;
	struct fsnp_val v;
	size_t off = 0, i = 0, poff = 0;
	int rv = 0;

	fsnp_iter_init(&it, am);
	while (i < nattr && fsnp_iter_next(&it, &names[i], &v)) {
		vks[i].len = be_get32(vkeys->p + off);
		vks[i].ptr = vkeys->p + off + 4;
		off += 4 + vks[i].len;
		i++;
	}
	flow_ix_page_init(&pg);
	sbuf_init(&pfx);
	sbuf_init(&tmp);
	sbuf_init(&resume);
	sbuf_init(&recbuf);
	s->n = 0;
	while (rv == 0 && list_at(&s->parts, &poff, &part) &&
	       list_at(&s->parts, &poff, &pstate)) {
		struct flow_ix_range r = {0};
		if (last.ptr != NULL && beq(part, last)) {
			continue; /* the same partition, another state */
		}
		last = part;
		eq[0] = names[0];
		eq[1] = vks[0];
		flow_ix_prefix(&pfx, c->group, part, FLOW_IX_ATTR, eq, 2);
		r.prefix = pfx.p;
		r.prefix_len = pfx.len;
		r.lo = 0;
		r.hi = UINT64_MAX;
		r.page = 256;
		sbuf_reset(&resume);
		for (;;) {
			const char *msg;
			if (u.entries > FLOW_STATS_MAX_SCAN) {
				E1("ERR flow stats scan limit exceeded; "
				   "narrow the query with partition_key or "
				   "state");
				rv = 1;
				break;
			}
			r.resume = resume.len ? resume.p : NULL;
			r.resume_len = resume.len;
			if (flow_ix_scan(c->tx, &r, &pg, &u, &msg) != 0) {
				rv = -1;
				break;
			}
			for (size_t h = 0; h < pg.n; h++) {
				struct frec rec;
				bool ok;
				/* Read into one reused buffer: frec_load
				 * would keep every record until the end. */
				int lr;
				fkey_rec(&c->key, c->group, part,
				         pg.hits[h].id);
				lr = store_tx_get(c->tx, c->key.p, c->key.len,
				                  &recbuf);
				if (lr < 0) {
					rv = -1;
					break;
				}
				ok = lr == 1 &&
				     frec_decode(recbuf.p, recbuf.len, &rec) ==
				         0 &&
				     frec_eq(&rec, RS_TYPE, q->f[FF_TYPE].t) &&
				     (s->any ||
				      frec_eq(&rec, RS_STATE, s->state));
				for (size_t a = 1; ok && a < nattr; a++) {
					ok = attr_has(&rec, names[a], vks[a],
					              &tmp);
				}
				s->n += ok;
			}
			if (rv != 0 || !pg.more || pg.n == 0) {
				break;
			}
			sbuf_reset(&resume);
			sbuf_add(&resume, pg.hits[pg.n - 1].key.ptr,
			         pg.hits[pg.n - 1].key.len);
		}
	}
	flow_ix_page_free(&pg);
	sbuf_free(&pfx);
	sbuf_free(&tmp);
	sbuf_free(&resume);
	sbuf_free(&recbuf);
	return rv;
}

static int op_stats(struct fctx *c, const struct flow_req *q,
                    struct fsnp_writer *w, struct flow_err *err)
{
	const struct flow_opt *st = opt(q, FF_STATE);
	const struct flow_opt *pk = opt(q, FF_PARTITION_KEY);
	const struct flow_opt *am = opt(q, FF_ATTRIBUTES);
	struct fsnp_bytes type = q->f[FF_TYPE].t;
	struct stats_sum s = {0};
	struct flow_ix_usage u = {0};
	struct sbuf vkeys, tmp;
	struct fsnp_iter it;
	struct fsnp_bytes name;
	struct fsnp_val v;
	size_t nattr = 0;
	int rv = 0;

	s.state = st != NULL ? st->t : fb("queued");
	s.any = fsnp_bytes_eq(s.state, "any");
	if (s.any && (am == NULL || am->v.as.count == 0)) {
		flow_fail(err, FLOW_STATUS_ERROR,
		          "ERR flow state any requires attributes");
		return FLOW_OP_ERROR;
	}
	sbuf_init(&vkeys);
	sbuf_init(&tmp);
	sbuf_init(&s.parts);
	if (am != NULL) {
		fsnp_iter_init(&it, &am->v);
		while (fsnp_iter_next(&it, &name, &v)) {
			if (nattr == 16 || flow_ix_value_key(&v, &tmp) != 0) {
				flow_fail(
				    err, FLOW_STATUS_ERROR,
				    "ERR flow stats attributes must be at "
				    "most 16 scalar values");
				rv = FLOW_OP_ERROR;
				goto out;
			}
			sbuf_lbytes(&vkeys, tmp.p, tmp.len);
			if (nattr == 0) {
				s.name = name;
			}
			nattr++;
		}
	}
	if (nattr == 0) {
		rv = flow_count_each(c->tx, c->group, type, pk ? &pk->t : NULL,
		                     sum_count, &s, &u);
	} else if (nattr == 1) {
		/* Per (part, state) with flows: one value counter. */
		struct fsnp_bytes part, pstate;
		size_t off = 0;
		s.value.len = be_get32(vkeys.p);
		s.value.ptr = vkeys.p + 4;
		rv = flow_count_each(c->tx, c->group, type, pk ? &pk->t : NULL,
		                     sum_count, &s, &u);
		s.n = 0;
		while (rv == 0 && list_at(&s.parts, &off, &part) &&
		       list_at(&s.parts, &off, &pstate)) {
			uint64_t n;
			rv = flow_acount_get(c->tx, c->group, type, part,
			                     pstate, s.name, &s.value, &n);
			s.n += n;
		}
	} else {
		/* The partitions holding flows of the type (and state). */
		rv = flow_count_each(c->tx, c->group, type, pk ? &pk->t : NULL,
		                     sum_count, &s, &u);
		if (rv == 0) {
			rv = stats_scan(c, q, &vkeys, nattr, &s, err);
			if (rv > 0) {
				rv = FLOW_OP_ERROR;
			}
		}
	}
	if (rv != 0) {
		goto out;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "type");
	fsnp_w_bin(w, type.ptr, type.len);
	fsnp_w_key(w, "state");
	fsnp_w_bin(w, s.state.ptr, s.state.len);
	fsnp_w_key(w, "attributes");
	if (am != NULL) {
		fsnp_w_val(w, &am->v);
	} else {
		fsnp_w_map_begin(w);
		fsnp_w_map_end(w);
	}
	fsnp_w_key(w, "count");
	fsnp_w_i64(w, (int64_t)s.n);
	fsnp_w_map_end(w);
out:
	sbuf_free(&vkeys);
	sbuf_free(&tmp);
	sbuf_free(&s.parts);
	return rv;
}

/* --- FLOW.ATTRIBUTES / ATTRIBUTE_VALUES ----------------------------------- */

struct agg_item {
	struct fsnp_bytes key; /* a name, or a value key */
	uint64_t n;
};

struct agg {
	struct fsnp_bytes state; /* len 0 with all: every state */
	bool all;
	struct agg_item *v;
	size_t n, cap;
	bool capped;
	struct sbuf keep;  /* copies of the keys */
	struct sbuf pairs; /* (part, state) with flows, u32 len + bytes */
};

static void agg_add(struct agg *a, struct fsnp_bytes key, uint64_t n)
{
	for (size_t i = 0; i < a->n; i++) {
		struct fsnp_bytes k = {a->keep.p + (uintptr_t)a->v[i].key.ptr,
		                       a->v[i].key.len};
		if (beq(k, key)) {
			a->v[i].n += n;
			return;
		}
	}
	if (a->n == FLOW_STATS_MAX_VALUES) {
		a->capped = true;
		return;
	}
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = realloc(a->v, a->cap * sizeof *a->v);
		if (a->v == NULL) {
			abort();
		}
	}
	/* Offsets now, pointers once `keep` stops growing. */
	a->v[a->n].key.ptr = (const uint8_t *)(uintptr_t)a->keep.len;
	a->v[a->n].key.len = key.len;
	a->v[a->n].n = n;
	sbuf_add(&a->keep, key.ptr, key.len);
	a->n++;
}

static int agg_value(void *arg, struct fsnp_bytes value, uint64_t n)
{
	agg_add(arg, value, n);
	return 0;
}

/* Collects the (part, state) pairs of the type that match the filter. */
static int agg_pair(void *arg, struct fsnp_bytes part, struct fsnp_bytes state,
                    uint64_t n)
{
	struct agg *a = arg;
	(void)n;
	if (a->all || beq(state, a->state)) {
		sbuf_lbytes(&a->pairs, part.ptr, part.len);
		sbuf_lbytes(&a->pairs, state.ptr, state.len);
	}
	return 0;
}

/* agg_add keeps offsets into `keep` (it grows); pointers once done. */
static void agg_resolve(struct agg *a)
{
	for (size_t i = 0; i < a->n; i++) {
		a->v[i].key.ptr = a->keep.p + (uintptr_t)a->v[i].key.ptr;
	}
}

/* Reads only the counters of the partitions and states holding flows of
 * the type: per pair, one counter per indexed name (ATTRIBUTES) or the
 * value counters of one name (ATTRIBUTE_VALUES). */
static int op_attributes(struct fctx *c, const struct flow_req *q,
                         struct fsnp_writer *w, struct flow_err *err,
                         bool values)
{
	const struct flow_opt *st = opt(q, FF_STATE);
	const struct flow_opt *pk = opt(q, FF_PARTITION_KEY);
	struct fsnp_bytes type = q->f[FF_TYPE].t, part, state, name;
	struct flow_ix_usage u = {0};
	struct agg a = {0};
	struct sbuf names;
	size_t off = 0;
	int64_t limit;
	int rv;

	if (list_count(q, &limit, err) != 0) {
		return FLOW_OP_ERROR;
	}
	a.all = st == NULL;
	if (st != NULL) {
		a.state = st->t;
	}
	sbuf_init(&a.keep);
	sbuf_init(&a.pairs);
	sbuf_init(&names);
	rv = indexed_names(c, type, &names);
	if (rv == 0 && values) {
		/* Only an indexed attribute's values are reported. */
		size_t no = 0;
		bool yes = false;
		while (list_at(&names, &no, &name)) {
			yes = yes || beq(name, q->f[FF_ATTRIBUTE].t);
		}
		sbuf_reset(&names);
		if (yes) {
			name = q->f[FF_ATTRIBUTE].t;
			sbuf_lbytes(&names, name.ptr, name.len);
		}
	}
	if (rv == 0 && names.len > 0) {
		rv = flow_count_each(c->tx, c->group, type, pk ? &pk->t : NULL,
		                     agg_pair, &a, &u);
	}
	while (rv == 0 && list_at(&a.pairs, &off, &part) &&
	       list_at(&a.pairs, &off, &state)) {
		size_t no = 0;
		while (rv == 0 && list_at(&names, &no, &name)) {
			uint64_t n;
			if (values) {
				rv = flow_acount_values(c->tx, c->group, type,
				                        part, state, name,
				                        agg_value, &a, &u);
			} else if ((rv = flow_acount_get(c->tx, c->group, type,
			                                 part, state, name,
			                                 NULL, &n)) == 0 &&
			           n > 0) {
				agg_add(&a, name, n);
			}
		}
	}
	if (rv != 0) {
		rv = -1;
		goto out;
	}
	agg_resolve(&a);
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < a.n; i++) {
		fsnp_w_map_begin(w);
		if (values) {
			fsnp_w_key(w, "value");
			if (flow_ix_value_write(w, a.v[i].key) != 0) {
				fsnp_w_nil(w);
			}
		} else {
			fsnp_w_key(w, "name");
			fsnp_w_bin(w, a.v[i].key.ptr, a.v[i].key.len);
		}
		fsnp_w_key(w, "count");
		fsnp_w_i64(w, (int64_t)a.v[i].n);
		if (a.capped) {
			fsnp_w_key(w, "approximate");
			fsnp_w_bool(w, true);
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
out:
	free(a.v);
	sbuf_free(&a.keep);
	sbuf_free(&a.pairs);
	sbuf_free(&names);
	return rv;
}

int flow_stats_run(struct fctx *c, const struct flow_req *q,
                   struct fsnp_writer *w, struct flow_err *err)
{
	if (q->f[FF_TYPE].t.len == 0) {
		flow_fail(err, FLOW_STATUS_ERROR,
		          "ERR flow type must be a non-empty string");
		return FLOW_OP_ERROR;
	}
	switch (q->opcode) {
	case FSNP_OP_FLOW_STATS:
		return op_stats(c, q, w, err);
	case FSNP_OP_FLOW_ATTRIBUTES:
		return op_attributes(c, q, w, err, false);
	default:
		if (q->f[FF_ATTRIBUTE].t.len == 0) {
			flow_fail(err, FLOW_STATUS_ERROR,
			          "ERR flow attribute must be a non-empty "
			          "string");
			return FLOW_OP_ERROR;
		}
		return op_attributes(c, q, w, err, true);
	}
}

/* --- Merge ---------------------------------------------------------------- */

struct mitem {
	struct fsnp_val key; /* name (bin) or value */
	uint64_t n;
	bool approximate;
};

static int mitem_cmp(const void *x, const void *y)
{
	const struct mitem *a = x, *b = y;
	if (a->n != b->n) {
		return a->n > b->n ? -1 : 1;
	}
	/* Ties: names and text values in byte order, others by encoding. */
	if (a->key.tag == FSNP_BIN && b->key.tag == FSNP_BIN) {
		return bcmp_(a->key.as.bin, b->key.as.bin);
	}
	return bcmp_((struct fsnp_bytes){a->key.enc, a->key.enc_len},
	             (struct fsnp_bytes){b->key.enc, b->key.enc_len});
}

int flow_stats_merge(const struct flow_req *q, const struct fsnp_val *parts,
                     size_t n, struct fsnp_writer *w, struct flow_err *err)
{
	const char *kname =
	    q->opcode == FSNP_OP_FLOW_ATTRIBUTES ? "name" : "value";
	struct mitem *items = NULL;
	size_t ni = 0, cap = 0;
	int64_t limit = 100;

	if (q->opcode == FSNP_OP_FLOW_STATS) {
		int64_t sum = 0;
		struct fsnp_val v;
		for (size_t i = 0; i < n; i++) {
			if (parts[i].tag != FSNP_MAP ||
			    fsnp_map_get(&parts[i], "count", &v) != 0 ||
			    v.tag != FSNP_I64) {
				return flow_fail(
				    err, FLOW_STATUS_ERROR,
				    "ERR malformed flow stats answer");
			}
			sum += v.as.i;
		}
		fsnp_w_map_begin(w);
		if (n > 0) {
			struct fsnp_iter it;
			struct fsnp_bytes k;
			fsnp_iter_init(&it, &parts[0]);
			while (fsnp_iter_next(&it, &k, &v)) {
				if (!fsnp_bytes_eq(k, "count")) {
					fsnp_w_key_bin(w, k.ptr, k.len);
					fsnp_w_val(w, &v);
				}
			}
		}
		fsnp_w_key(w, "count");
		fsnp_w_i64(w, sum);
		fsnp_w_map_end(w);
		return 0;
	}
	if (q->f[FF_COUNT].set) {
		limit = q->f[FF_COUNT].i;
	}
	for (size_t i = 0; i < n; i++) {
		struct fsnp_iter it;
		struct fsnp_val e, k, c, ap;
		if (parts[i].tag != FSNP_ARRAY) {
			free(items);
			return flow_fail(
			    err, FLOW_STATUS_ERROR,
			    "ERR malformed flow attributes answer");
		}
		fsnp_iter_init(&it, &parts[i]);
		while (fsnp_iter_next(&it, NULL, &e)) {
			size_t j;
			if (e.tag != FSNP_MAP ||
			    fsnp_map_get(&e, kname, &k) != 0 ||
			    fsnp_map_get(&e, "count", &c) != 0 ||
			    c.tag != FSNP_I64 || c.as.i < 0) {
				free(items);
				return flow_fail(
				    err, FLOW_STATUS_ERROR,
				    "ERR malformed flow attributes "
				    "answer");
			}
			for (j = 0; j < ni; j++) {
				if (items[j].key.enc_len == k.enc_len &&
				    memcmp(items[j].key.enc, k.enc,
				           k.enc_len) == 0) {
					break;
				}
			}
			if (j == ni) {
				if (ni == cap) {
					cap = cap ? cap * 2 : 16;
					items =
					    realloc(items, cap * sizeof *items);
					if (items == NULL) {
						abort();
					}
				}
				items[ni].key = k;
				items[ni].n = 0;
				items[ni].approximate = false;
				ni++;
			}
			items[j].n += (uint64_t)c.as.i;
			if (fsnp_map_get(&e, "approximate", &ap) == 0 &&
			    ap.tag == FSNP_TRUE) {
				items[j].approximate = true;
			}
		}
	}
	if (ni > 1) {
		qsort(items, ni, sizeof *items, mitem_cmp);
	}
	fsnp_w_array_begin(w);
	for (size_t j = 0; j < ni && (int64_t)j < limit; j++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, kname);
		fsnp_w_val(w, &items[j].key);
		fsnp_w_key(w, "count");
		fsnp_w_i64(w, (int64_t)items[j].n);
		if (items[j].approximate) {
			fsnp_w_key(w, "approximate");
			fsnp_w_bool(w, true);
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	free(items);
	return 0;
}
