/* Flow secondary indexes, exact counters and their bounded reads
 * (flow_index.h). */
#include "flow/flow_index.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/ext.h"
#include "store/keys.h"

/* --- Key material --------------------------------------------------------- */

static void kstart(struct sbuf *k, uint32_t group, uint8_t type)
{
	sbuf_reset(k);
	sbuf_u32(k, group);
	sbuf_u8(k, type);
}

static void kpart(struct sbuf *k, struct fsnp_bytes b)
{
	sbuf_lbytes(k, b.ptr, b.len);
}

int flow_ix_value_key(const struct fsnp_val *v, struct sbuf *out)
{
	uint64_t bits;

	sbuf_reset(out);
	switch (v->tag) {
	case FSNP_BIN:
		sbuf_u8(out, FSNP_BIN);
		sbuf_add(out, v->as.bin.ptr, v->as.bin.len);
		return 0;
	case FSNP_I64:
		sbuf_u8(out, FSNP_I64);
		sbuf_u64(out, (uint64_t)v->as.i ^ 0x8000000000000000ull);
		return 0;
	case FSNP_U64:
		sbuf_u8(out, FSNP_U64);
		sbuf_u64(out, v->as.u);
		return 0;
	case FSNP_F64: {
		double d = v->as.f;
		if (!isfinite(d)) {
			return -1;
		}
		if (d == 0) {
			d = 0; /* -0 and 0 are one value */
		}
		memcpy(&bits, &d, 8);
		bits = (bits >> 63) ? ~bits : bits | 0x8000000000000000ull;
		sbuf_u8(out, FSNP_F64);
		sbuf_u64(out, bits);
		return 0;
	}
	case FSNP_TRUE:
	case FSNP_FALSE:
		sbuf_u8(out, (uint8_t)v->tag);
		return 0;
	default:
		return -1;
	}
}

int flow_ix_value_write(struct fsnp_writer *w, struct fsnp_bytes key)
{
	uint64_t bits;
	double d;

	if (key.len < 1) {
		return -1;
	}
	switch (key.ptr[0]) {
	case FSNP_BIN:
		fsnp_w_bin(w, key.ptr + 1, key.len - 1);
		return 0;
	case FSNP_TRUE:
	case FSNP_FALSE:
		if (key.len != 1) {
			return -1;
		}
		fsnp_w_bool(w, key.ptr[0] == FSNP_TRUE);
		return 0;
	case FSNP_I64:
	case FSNP_U64:
	case FSNP_F64:
		if (key.len != 9) {
			return -1;
		}
		bits = be_get64(key.ptr + 1);
		if (key.ptr[0] == FSNP_I64) {
			fsnp_w_i64(w, (int64_t)(bits ^ 0x8000000000000000ull));
		} else if (key.ptr[0] == FSNP_U64) {
			fsnp_w_u64(w, bits);
		} else {
			bits = (bits >> 63) ? bits & ~0x8000000000000000ull
			                    : ~bits;
			memcpy(&d, &bits, 8);
			fsnp_w_f64(w, d);
		}
		return 0;
	default:
		return -1;
	}
}

void flow_ix_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                    enum flow_ix_kind kind, const struct fsnp_bytes *eq,
                    size_t neq)
{
	kstart(k, group, K_FLOW_IX);
	kpart(k, part);
	sbuf_u8(k, (uint8_t)kind);
	for (size_t i = 0; i < neq; i++) {
		kpart(k, eq[i]);
	}
}

void flow_ix_due_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                        struct fsnp_bytes type, struct fsnp_bytes state,
                        int priority)
{
	kstart(k, group, K_FLOW_DUE);
	kpart(k, part);
	kpart(k, type);
	kpart(k, state);
	sbuf_u8(k, (uint8_t)(255 - priority));
}

/* --- The keys of one record ----------------------------------------------- */

struct kgen {
	uint32_t group;
	const struct frec *r;
	struct sbuf *ix, *cnt;
	struct sbuf k, v;
	uint64_t updated;
};

static void emit(struct sbuf *to, const struct sbuf *k)
{
	sbuf_lbytes(to, k->p, k->len);
}

static void ix_tail(struct kgen *g, uint64_t order)
{
	sbuf_u64(&g->k, order);
	kpart(&g->k, g->r->s[RS_ID]);
	emit(g->ix, &g->k);
}

static void acount_base(struct kgen *g, struct fsnp_bytes name)
{
	const struct frec *r = g->r;
	kstart(&g->k, g->group, K_FLOW_ACOUNT);
	kpart(&g->k, r->s[RS_TYPE]);
	kpart(&g->k, r->s[RS_PARTITION_KEY]);
	kpart(&g->k, r->s[RS_STATE]);
	kpart(&g->k, name);
}

/* One indexable value (a scalar, or each element of a list) of attribute
 * `name`. Returns how many were indexed. */
static int attr_value(struct kgen *g, struct fsnp_bytes name,
                      const struct fsnp_val *v)
{
	const struct frec *r = g->r;
	struct fsnp_bytes vk;

	if (flow_ix_value_key(v, &g->v) != 0) {
		return 0;
	}
	vk.ptr = g->v.p;
	vk.len = g->v.len;
	flow_ix_prefix(&g->k, g->group, r->s[RS_PARTITION_KEY], FLOW_IX_ATTR,
	               &name, 1);
	kpart(&g->k, vk);
	ix_tail(g, g->updated);
	acount_base(g, name);
	sbuf_u8(&g->k, 1);
	kpart(&g->k, vk);
	emit(g->cnt, &g->k);
	return 1;
}

static void attrs(struct kgen *g)
{
	struct fsnp_iter it, li;
	struct fsnp_bytes name, none;
	struct fsnp_val v, e;

	if (!g->r->v_set[RV_ATTRIBUTES] ||
	    g->r->v[RV_ATTRIBUTES].tag != FSNP_MAP) {
		return;
	}
	fsnp_iter_init(&it, &g->r->v[RV_ATTRIBUTES]);
	while (fsnp_iter_next(&it, &name, &v)) {
		int n = 0;
		if (v.tag == FSNP_ARRAY) {
			fsnp_iter_init(&li, &v);
			while (fsnp_iter_next(&li, &none, &e)) {
				n += attr_value(g, name, &e);
			}
		} else {
			n = attr_value(g, name, &v);
		}
		if (n > 0) {
			acount_base(g, name);
			sbuf_u8(&g->k, 0);
			emit(g->cnt, &g->k);
		}
	}
}

static void meta_value(struct kgen *g, struct fsnp_bytes state,
                       struct fsnp_bytes key, const struct fsnp_val *v)
{
	struct fsnp_bytes eq[3];

	if (flow_ix_value_key(v, &g->v) != 0) {
		return;
	}
	eq[0] = state;
	eq[1] = key;
	eq[2].ptr = g->v.p;
	eq[2].len = g->v.len;
	flow_ix_prefix(&g->k, g->group, g->r->s[RS_PARTITION_KEY], FLOW_IX_META,
	               eq, 3);
	ix_tail(g, g->updated);
}

static void state_meta(struct kgen *g)
{
	struct fsnp_iter si, ki, li;
	struct fsnp_bytes state, key, none;
	struct fsnp_val m, v, e;

	if (!g->r->v_set[RV_STATE_META] ||
	    g->r->v[RV_STATE_META].tag != FSNP_MAP) {
		return;
	}
	fsnp_iter_init(&si, &g->r->v[RV_STATE_META]);
	while (fsnp_iter_next(&si, &state, &m)) {
		if (m.tag != FSNP_MAP) {
			continue;
		}
		fsnp_iter_init(&ki, &m);
		while (fsnp_iter_next(&ki, &key, &v)) {
			if (v.tag == FSNP_ARRAY) {
				fsnp_iter_init(&li, &v);
				while (fsnp_iter_next(&li, &none, &e)) {
					meta_value(g, state, key, &e);
				}
			} else {
				meta_value(g, state, key, &v);
			}
		}
	}
}

bool flow_ix_self_root(const struct frec *r)
{
	return frec_eq(r, RS_ROOT_FLOW_ID, r->s[RS_ID]);
}

void flow_index_keys(uint32_t group, const struct frec *r, struct sbuf *ix,
                     struct sbuf *cnt)
{
	static const struct {
		enum rec_str f;
		enum flow_ix_kind kind;
	} lineage[] = {
	    {RS_PARENT_FLOW_ID, FLOW_IX_PARENT},
	    {RS_ROOT_FLOW_ID, FLOW_IX_ROOT},
	    {RS_CORRELATION_ID, FLOW_IX_CORRELATION},
	};
	struct kgen g = {.group = group, .r = r, .ix = ix, .cnt = cnt};
	struct fsnp_bytes eq[2] = {r->s[RS_TYPE], r->s[RS_STATE]};
	struct fsnp_bytes part = r->s[RS_PARTITION_KEY];

	sbuf_init(&g.k);
	sbuf_init(&g.v);
	g.updated =
	    r->i_set[RI_UPDATED_AT_MS] ? (uint64_t)r->i[RI_UPDATED_AT_MS] : 0;

	flow_ix_prefix(&g.k, group, part, FLOW_IX_UPDATED, eq, 2);
	ix_tail(&g, g.updated);
	flow_ix_prefix(&g.k, group, part, FLOW_IX_CREATED, eq, 2);
	ix_tail(&g, r->i_set[RI_CREATED_AT_MS]
	                ? (uint64_t)r->i[RI_CREATED_AT_MS]
	                : 0);
	flow_ix_prefix(&g.k, group, part, FLOW_IX_PART_UPDATED, NULL, 0);
	ix_tail(&g, g.updated);
	for (size_t i = 0; i < sizeof lineage / sizeof lineage[0]; i++) {
		/* A flow that is its own root (every flow created without a
		 * root_flow_id) has no root entry: its range gets it from the
		 * record (fql_exec.c), two rows fewer per write. */
		if (lineage[i].kind == FLOW_IX_ROOT && flow_ix_self_root(r)) {
			continue;
		}
		if (r->s_set[lineage[i].f]) {
			flow_ix_prefix(&g.k, group, part, lineage[i].kind,
			               &r->s[lineage[i].f], 1);
			ix_tail(&g, g.updated);
		}
	}
	attrs(&g);
	state_meta(&g);

	kstart(&g.k, group, K_FLOW_COUNT);
	kpart(&g.k, r->s[RS_TYPE]);
	kpart(&g.k, part);
	kpart(&g.k, r->s[RS_STATE]);
	emit(cnt, &g.k);

	sbuf_free(&g.k);
	sbuf_free(&g.v);
}

/* --- Maintenance ---------------------------------------------------------- */

struct kref {
	const uint8_t *p;
	uint32_t len;
};

static int kref_cmp(const void *a, const void *b)
{
	const struct kref *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, n);
	if (c != 0) {
		return c;
	}
	return x->len < y->len ? -1 : x->len > y->len;
}

/* The keys of a u32-len list, sorted and without duplicates. */
static struct kref *klist(const struct sbuf *b, size_t *n)
{
	size_t cap = 0, off = 0, m = 0;
	struct kref *v;

	while (off + 4 <= b->len) {
		off += 4 + be_get32(b->p + off);
		cap++;
	}
	v = calloc(cap ? cap : 1, sizeof *v);
	if (v == NULL) {
		abort();
	}
	for (off = 0; off + 4 <= b->len; m++) {
		v[m].len = be_get32(b->p + off);
		v[m].p = b->p + off + 4;
		off += 4 + v[m].len;
	}
	if (m > 1) {
		qsort(v, m, sizeof *v, kref_cmp);
	}
	*n = 0;
	for (size_t i = 0; i < m; i++) {
		if (*n == 0 || kref_cmp(&v[*n - 1], &v[i]) != 0) {
			v[(*n)++] = v[i];
		}
	}
	return v;
}

/* --- State counters -------------------------------------------------------
 * One K_FLOW_COUNT row per (type, part) holds the counts of all its states
 * (flow_index.h), so a state change moves two counts in one write. The
 * counter keys of flow_index_keys name (type, part, state); they are split
 * here into the row key and the state. */

static int state_cmp(struct fsnp_bytes a, struct fsnp_bytes b)
{
	if (a.len != b.len) {
		return a.len < b.len ? -1 : 1;
	}
	return a.len == 0 ? 0 : memcmp(a.ptr, b.ptr, a.len);
}

bool flow_count_row_next(const uint8_t *p, size_t len, size_t *off,
                         struct fsnp_bytes *state, uint64_t *n)
{
	if (!fkey_part(p, len, off, state) || len - *off < 8) {
		return false;
	}
	*n = be_get64(p + *off);
	*off += 8;
	return true;
}

/* The row key length of a (type, part, state) counter key, and its state;
 * 0 when malformed. */
static size_t count_split(const struct kref *k, struct fsnp_bytes *state)
{
	struct fsnp_bytes t, pt;
	size_t off = 5, row;

	if (!fkey_part(k->p, k->len, &off, &t) ||
	    !fkey_part(k->p, k->len, &off, &pt)) {
		return 0;
	}
	row = off;
	if (!fkey_part(k->p, k->len, &off, state) || off != k->len) {
		return 0;
	}
	return row;
}

struct sdelta {
	const struct kref *k;
	size_t row; /* row key length */
	struct fsnp_bytes state;
	int d;
	bool done;
};

struct scount {
	struct fsnp_bytes state;
	uint64_t n;
};

/* Moves the counts of every delta sharing the row of ds[at]: one read
 * and one write (or delete, when no state has flows left) of the row. */
static void count_row_apply(struct fctx *c, struct sdelta *ds, size_t nd,
                            size_t at)
{
	const uint8_t *rk = ds[at].k->p;
	size_t rl = ds[at].row, n = 0, cap = nd, off = 0;
	struct scount *v;
	struct fsnp_bytes st;
	struct sbuf cur, out;
	uint64_t cnt;

	sbuf_init(&cur);
	sbuf_init(&out);
	if (store_tx_get(c->tx, rk, rl, &cur) == 1) {
		while (flow_count_row_next(cur.p, cur.len, &off, &st, &cnt)) {
			cap++;
		}
	}
	v = calloc(cap ? cap : 1, sizeof *v);
	if (v == NULL) {
		abort();
	}
	off = 0;
	while (flow_count_row_next(cur.p, cur.len, &off, &st, &cnt)) {
		v[n].state = st;
		v[n++].n = cnt;
	}
	for (size_t i = at; i < nd; i++) {
		struct sdelta *d = &ds[i];
		size_t j = 0;
		if (d->done || d->row != rl || memcmp(d->k->p, rk, rl) != 0) {
			continue;
		}
		d->done = true;
		while (j < n && state_cmp(v[j].state, d->state) < 0) {
			j++;
		}
		if (j == n || state_cmp(v[j].state, d->state) != 0) {
			memmove(&v[j + 1], &v[j], (n - j) * sizeof *v);
			v[j].state = d->state;
			v[j].n = 0;
			n++;
		}
		v[j].n = d->d > 0 ? v[j].n + 1 : (v[j].n > 0 ? v[j].n - 1 : 0);
	}
	for (size_t j = 0; j < n; j++) {
		if (v[j].n > 0) {
			sbuf_lbytes(&out, v[j].state.ptr, v[j].state.len);
			sbuf_u64(&out, v[j].n);
		}
	}
	if (out.len == 0) {
		store_tx_del(c->tx, rk, rl);
	} else {
		store_tx_put(c->tx, rk, rl, out.p, out.len);
	}
	free(v);
	sbuf_free(&cur);
	sbuf_free(&out);
}

static void count_add(struct fctx *c, const struct kref *k, int d)
{
	struct sbuf v;
	uint64_t n = 0;
	uint8_t b[8];

	sbuf_init(&v);
	if (store_tx_get(c->tx, k->p, k->len, &v) == 1 && v.len == 8) {
		n = be_get64(v.p);
	}
	sbuf_free(&v);
	n = d > 0 ? n + 1 : (n > 0 ? n - 1 : 0);
	if (n == 0) {
		store_tx_del(c->tx, k->p, k->len);
	} else {
		be_put64(b, n);
		store_tx_put(c->tx, k->p, k->len, b, 8);
	}
}

void flow_index_update(struct fctx *c, const struct frec *old,
                       const struct frec *r)
{
	struct sbuf oix, ocnt, nix, ncnt;
	struct kref *oi, *oc, *ni, *nc;
	struct sdelta *sd;
	size_t noi, noc, nni, nnc, i, j, nsd = 0;
	uint8_t ver[8];

	sbuf_init(&oix);
	sbuf_init(&ocnt);
	sbuf_init(&nix);
	sbuf_init(&ncnt);
	if (old != NULL) {
		flow_index_keys(c->group, old, &oix, &ocnt);
	}
	if (r != NULL) {
		flow_index_keys(c->group, r, &nix, &ncnt);
	}
	oi = klist(&oix, &noi);
	oc = klist(&ocnt, &noc);
	ni = klist(&nix, &nni);
	nc = klist(&ncnt, &nnc);

	/* Index entries, both lists in key order: drop what the new record
	 * no longer has, rewrite what both have with its version, and write
	 * the new ones as new (the flow's entries are those its record
	 * names, so a key the old record did not have is not in the index). */
	be_put64(ver, r != NULL && r->i_set[RI_VERSION]
	                  ? (uint64_t)r->i[RI_VERSION]
	                  : 0);
	for (i = 0, j = 0; i < noi || j < nni;) {
		int cmp = i >= noi   ? 1
		          : j >= nni ? -1
		                     : kref_cmp(&oi[i], &ni[j]);
		if (cmp < 0) {
			store_tx_del(c->tx, oi[i].p, oi[i].len);
			i++;
		} else if (cmp == 0) {
			store_tx_put(c->tx, ni[j].p, ni[j].len, ver, 8);
			i++;
			j++;
		} else {
			store_tx_put_new(c->tx, ni[j].p, ni[j].len, ver, 8);
			j++;
		}
	}
	/* Counters: only the keys that differ move; the state counts of a
	 * (type, part) row move together. */
	sd = calloc(noc + nnc ? noc + nnc : 1, sizeof *sd);
	if (sd == NULL) {
		abort();
	}
	for (i = 0, j = 0; i < noc || j < nnc;) {
		int cmp = i >= noc   ? 1
		          : j >= nnc ? -1
		                     : kref_cmp(&oc[i], &nc[j]);
		const struct kref *k = cmp < 0 ? &oc[i] : &nc[j];
		if (cmp == 0) {
			i++;
			j++;
			continue;
		}
		if (cmp < 0) {
			i++;
		} else {
			j++;
		}
		if (k->len > 4 && k->p[4] == K_FLOW_COUNT) {
			struct sdelta *d = &sd[nsd];
			if ((d->row = count_split(k, &d->state)) > 0) {
				d->k = k;
				d->d = cmp < 0 ? -1 : +1;
				nsd++;
			}
		} else {
			count_add(c, k, cmp < 0 ? -1 : +1);
		}
	}
	for (i = 0; i < nsd; i++) {
		if (!sd[i].done) {
			count_row_apply(c, sd, nsd, i);
		}
	}
	free(sd);
	free(oi);
	free(oc);
	free(ni);
	free(nc);
	sbuf_free(&oix);
	sbuf_free(&ocnt);
	sbuf_free(&nix);
	sbuf_free(&ncnt);
}

int flow_index_check_names(const struct fsnp_val *list, struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	unsigned n = 0;

	if (list->tag != FSNP_ARRAY) {
		return flow_fail(err, FLOW_STATUS_ERROR,
		                 "ERR flow indexed_attributes must be a list");
	}
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (++n > 3) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow indexed_attributes supports "
			                 "at most 3 keys");
		}
		if (e.tag != FSNP_BIN || e.as.bin.len == 0 ||
		    e.as.bin.len > 64) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow indexed_attributes entries "
			                 "must be attribute names of 1 to 64 "
			                 "bytes");
		}
	}
	return 0;
}

/* --- Scans ---------------------------------------------------------------- */

void flow_ix_page_init(struct flow_ix_page *p)
{
	memset(p, 0, sizeof *p);
	sbuf_init(&p->store);
}

void flow_ix_page_free(struct flow_ix_page *p)
{
	free(p->hits);
	sbuf_free(&p->store);
	memset(p, 0, sizeof *p);
}

/* The order and id of an index key under `plen` bytes of prefix. */
static bool parse_tail(const uint8_t *k, size_t kl, size_t plen,
                       uint64_t *order, struct fsnp_bytes *id)
{
	size_t off = plen + 8;
	if (kl < off) {
		return false;
	}
	*order = be_get64(k + plen);
	return fkey_part(k, kl, &off, id) && off == kl;
}

int flow_ix_scan(struct tx *tx, const struct flow_ix_range *r,
                 struct flow_ix_page *out, struct flow_ix_usage *u,
                 const char **msg)
{
	static const uint8_t ff[5] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	struct store_tx_iter *it;
	struct sbuf start;
	size_t cap = r->page < FLOW_IX_PAGE_MAX ? r->page : FLOW_IX_PAGE_MAX;
	size_t bytes = 0, *offs = NULL;
	bool valid;
	int rv = 0;

	sbuf_reset(&out->store);
	out->n = 0;
	out->more = false;
	free(out->hits);
	out->hits = calloc(cap ? cap : 1, sizeof *out->hits);
	offs = calloc(cap ? cap : 1, sizeof *offs);
	if (out->hits == NULL || offs == NULL) {
		abort();
	}
	*msg = NULL;
	sbuf_init(&start);
	it = store_tx_iter_open(tx, r->prefix, r->prefix_len);
	if (r->resume_len > 0) {
		sbuf_add(&start, r->resume, r->resume_len);
	} else {
		sbuf_add(&start, r->prefix, r->prefix_len);
		sbuf_u64(&start, r->desc ? r->hi : r->lo);
		if (r->desc) {
			sbuf_add(&start, ff, sizeof ff);
		}
	}
	valid = r->desc ? store_tx_iter_seek_prev(it, start.p, start.len)
	                : store_tx_iter_seek(it, start.p, start.len);
	u->seeks++;
	if (valid && r->resume_len > 0) {
		size_t kl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		if (kl == r->resume_len && memcmp(k, r->resume, kl) == 0) {
			if (r->desc) {
				store_tx_iter_prev(it);
			} else {
				store_tx_iter_next(it);
			}
			valid = store_tx_iter_valid(it);
		}
	}
	for (; valid; valid = store_tx_iter_valid(it)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct flow_ix_hit *h;
		struct fsnp_bytes id;
		uint64_t order;

		if (!parse_tail(k, kl, r->prefix_len, &order, &id)) {
			*msg = "malformed flow index entry";
			rv = -1;
			break;
		}
		if (order < r->lo || order > r->hi) {
			break;
		}
		u->entries++;
		u->bytes += kl + vl;
		if (out->n == cap ||
		    (r->max_bytes > 0 && bytes + kl + vl > r->max_bytes &&
		     out->n > 0)) {
			out->more = true; /* the look-ahead entry */
			break;
		}
		bytes += kl + vl;
		h = &out->hits[out->n];
		h->order = order;
		h->version = vl == 8 ? be_get64(v) : UINT64_MAX;
		h->id.len = id.len;
		h->key.len = kl;
		offs[out->n] = out->store.len;
		sbuf_add(&out->store, k, kl);
		out->n++;
		if (r->desc) {
			store_tx_iter_prev(it);
		} else {
			store_tx_iter_next(it);
		}
	}
	if (out->n > 0) {
		u->pages++;
	}
	if (store_tx_iter_close(it) != 0 && rv == 0) {
		*msg = "flow index read failed";
		rv = -1;
	}
	for (size_t i = 0; i < out->n; i++) {
		struct flow_ix_hit *h = &out->hits[i];
		h->key.ptr = out->store.p + offs[i];
		h->id.ptr = h->key.ptr + h->key.len - h->id.len;
	}
	free(offs);
	sbuf_free(&start);
	return rv;
}

/* --- Counters ------------------------------------------------------------- */

static int get_u64(struct tx *tx, const struct sbuf *k, uint64_t *n)
{
	struct sbuf v;
	int rv;

	sbuf_init(&v);
	rv = store_tx_get(tx, k->p, k->len, &v);
	*n = rv == 1 && v.len == 8 ? be_get64(v.p) : 0;
	sbuf_free(&v);
	return rv < 0 ? -1 : 0;
}

int flow_count_get(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                   struct fsnp_bytes part, struct fsnp_bytes state, uint64_t *n)
{
	struct sbuf k, v;
	struct fsnp_bytes st;
	uint64_t cnt;
	size_t off = 0;
	int rv;

	sbuf_init(&k);
	sbuf_init(&v);
	kstart(&k, group, K_FLOW_COUNT);
	kpart(&k, type);
	kpart(&k, part);
	rv = store_tx_get(tx, k.p, k.len, &v);
	*n = 0;
	while (rv == 1 && flow_count_row_next(v.p, v.len, &off, &st, &cnt)) {
		if (state_cmp(st, state) == 0) {
			*n = cnt;
			break;
		}
	}
	sbuf_free(&v);
	sbuf_free(&k);
	return rv < 0 ? -1 : 0;
}

int flow_acount_get(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                    struct fsnp_bytes part, struct fsnp_bytes state,
                    struct fsnp_bytes name, const struct fsnp_bytes *value,
                    uint64_t *n)
{
	struct sbuf k;
	int rv;

	sbuf_init(&k);
	kstart(&k, group, K_FLOW_ACOUNT);
	kpart(&k, type);
	kpart(&k, part);
	kpart(&k, state);
	kpart(&k, name);
	sbuf_u8(&k, value != NULL);
	if (value != NULL) {
		kpart(&k, *value);
	}
	rv = get_u64(tx, &k, n);
	sbuf_free(&k);
	return rv;
}

int flow_count_each(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                    const struct fsnp_bytes *part, flow_count_fn fn, void *arg,
                    struct flow_ix_usage *u)
{
	struct store_tx_iter *it;
	struct sbuf p;
	bool valid;
	int rv;

	sbuf_init(&p);
	kstart(&p, group, K_FLOW_COUNT);
	kpart(&p, type);
	if (part != NULL) {
		kpart(&p, *part);
	}
	it = store_tx_iter_open(tx, p.p, p.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	u->seeks++;
	for (bool stop = false; valid && !stop;
	     store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5, voff = 0;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes t, pt, st;
		uint64_t n;
		u->bytes += kl + vl;
		if (!fkey_part(k, kl, &off, &t) ||
		    !fkey_part(k, kl, &off, &pt) || off != kl) {
			continue;
		}
		/* a row holds every state of (type, part): each is an
		 * entry, as a counter row of its own was */
		while (!stop && flow_count_row_next(v, vl, &voff, &st, &n)) {
			u->entries++;
			stop = fn(arg, pt, st, n) != 0;
		}
	}
	rv = store_tx_iter_close(it);
	sbuf_free(&p);
	return rv;
}

int flow_acount_values(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                       struct fsnp_bytes part, struct fsnp_bytes state,
                       struct fsnp_bytes name, flow_value_fn fn, void *arg,
                       struct flow_ix_usage *u)
{
	struct store_tx_iter *it;
	struct sbuf p;
	bool valid;
	int rv;

	sbuf_init(&p);
	kstart(&p, group, K_FLOW_ACOUNT);
	kpart(&p, type);
	kpart(&p, part);
	kpart(&p, state);
	kpart(&p, name);
	sbuf_u8(&p, 1);
	it = store_tx_iter_open(tx, p.p, p.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	u->seeks++;
	for (; valid; store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = p.len;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes val;
		u->entries++;
		u->bytes += kl + vl;
		if (!fkey_part(k, kl, &off, &val) || off != kl || vl != 8) {
			continue;
		}
		if (fn(arg, val, be_get64(v)) != 0) {
			break;
		}
	}
	rv = store_tx_iter_close(it);
	sbuf_free(&p);
	return rv;
}

/* --- Catalog -------------------------------------------------------------- */

#define SH_RUN_ID "runs_by_run_id_record"
#define SH_PART_RUN_ID "runs_by_partition_and_run_id_record"
#define SH_PREDICATES "runs_by_partition_predicates_ordered_records"
#define SH_TYPE_STATE "runs_by_partition_type_state_ordered_records"
#define SH_TERMINALS "runs_by_partition_type_terminals_ordered_records"
#define SH_METADATA "runs_by_partition_metadata_ordered_records"
#define SH_LEASE "runs_by_partition_type_running_lease_deadline_ordered_records"
#define SH_PARENT "runs_by_partition_parent_ordered_records"
#define SH_ROOT "runs_by_partition_root_ordered_records"
#define SH_CORRELATION "runs_by_partition_correlation_ordered_records"
#define SH_COUNT "runs_by_partition_predicates_count"
#define SH_EVENTS "events_by_run_id_ordered_records"

static const char *const shapes[] = {
    SH_RUN_ID,    SH_PART_RUN_ID, SH_PREDICATES, SH_TYPE_STATE,
    SH_TERMINALS, SH_METADATA,    SH_LEASE,      SH_PARENT,
    SH_ROOT,      SH_CORRELATION, SH_COUNT,      SH_EVENTS,
};

const char *const *flow_index_shapes(size_t *n)
{
	*n = sizeof shapes / sizeof shapes[0];
	return shapes;
}

struct ixdef {
	const char *id;
	const char *kind;   /* primary, ordered, counter, history */
	const char *fields; /* equality fields, comma-separated */
	const char *order;  /* the ordered field ("" none) */
	const char *source; /* the EXPLAIN source it answers as */
	const char *shapes; /* comma-separated */
};

static const struct ixdef catalog[] = {
    {"flow_runs_primary", "primary", "partition_key,run_id", "",
     "authoritative_log", SH_RUN_ID "," SH_PART_RUN_ID},
    {"flow_runs_partition_updated", "ordered", "partition_key", "updated_at_ms",
     "query_row", SH_PREDICATES},
    {"flow_runs_partition_type_state_updated", "ordered",
     "partition_key,type,state", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_TYPE_STATE "," SH_TERMINALS},
    {"flow_runs_partition_type_state_created", "ordered",
     "partition_key,type,state", "created_at_ms", "query_row",
     SH_PREDICATES "," SH_TYPE_STATE "," SH_TERMINALS},
    {"flow_runs_partition_type_state_due", "ordered",
     "partition_key,type,state,priority", "next_run_at_ms,lease_deadline_ms",
     "query_row", SH_PREDICATES "," SH_TYPE_STATE "," SH_LEASE},
    {"flow_runs_partition_attribute_updated", "ordered",
     "partition_key,attribute", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_METADATA},
    {"flow_runs_partition_state_meta_updated", "ordered",
     "partition_key,state_meta", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_METADATA},
    {"flow_runs_partition_parent_updated", "ordered",
     "partition_key,parent_flow_id", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_PARENT},
    {"flow_runs_partition_root_updated", "ordered",
     "partition_key,root_flow_id", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_ROOT},
    {"flow_runs_partition_correlation_updated", "ordered",
     "partition_key,correlation_id", "updated_at_ms", "query_row",
     SH_PREDICATES "," SH_CORRELATION},
    {"flow_runs_type_partition_state_count", "counter",
     "type,partition_key,state", "", "transactional_counter", SH_COUNT},
    {"flow_runs_type_partition_state_attribute_count", "counter",
     "type,partition_key,state,attribute", "", "transactional_counter",
     SH_COUNT},
    {"flow_events_by_run", "history", "partition_key,run_id", "version",
     "authoritative_log", SH_EVENTS},
};

/* A comma-separated list as an array of texts. */
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

void flow_index_catalog_write(struct fsnp_writer *w)
{
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "catalog_version");
	fsnp_w_i64(w, STORE_FORMAT_VERSION);
	fsnp_w_key(w, "indexes");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < sizeof catalog / sizeof catalog[0]; i++) {
		const struct ixdef *d = &catalog[i];
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "id");
		fsnp_w_str(w, d->id);
		fsnp_w_key(w, "kind");
		fsnp_w_str(w, d->kind);
		fsnp_w_key(w, "fields");
		w_list(w, d->fields);
		fsnp_w_key(w, "order");
		w_list(w, d->order);
		fsnp_w_key(w, "source");
		fsnp_w_str(w, d->source);
		fsnp_w_key(w, "phase");
		fsnp_w_str(w, "active");
		fsnp_w_key(w, "queryable");
		fsnp_w_bool(w, true);
		fsnp_w_key(w, "shapes");
		w_list(w, d->shapes);
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_map_end(w);
}

/* --- ferric.flow.query.indexes/v1 ----------------------------------------- */

/* An index as the status contract names it: fields "name:direction:
 * encoding" (equality components are "hashed", the contract's name for
 * them; ordered ones integers), the exact-counter prefix (0 none). Sorted
 * by id. */
struct ixstatus {
	const char *id;
	const char *fields; /* comma-separated name:dir:enc */
	unsigned count_prefix;
	const char *workloads; /* comma-separated shapes */
	const char *key;       /* format.key */
	const char *entry;     /* format.entry */
	const char *counter;   /* format.counter, NULL none */
};

static const struct ixstatus status_ix[] = {
    {"flow_runs_partition_correlation_updated",
     "partition_key:asc:hashed,correlation_id:asc:hashed,"
     "updated_at_ms:asc:ordered",
     0, SH_PREDICATES "," SH_CORRELATION,
     "0x4C kind 7: partition, correlation_id, updated_at_ms, run_id",
     "u64 record version", NULL},
    {"flow_runs_partition_parent_updated",
     "partition_key:asc:hashed,parent_flow_id:asc:hashed,"
     "updated_at_ms:asc:ordered",
     0, SH_PREDICATES "," SH_PARENT,
     "0x4C kind 5: partition, parent_flow_id, updated_at_ms, run_id",
     "u64 record version", NULL},
    {"flow_runs_partition_root_updated",
     "partition_key:asc:hashed,root_flow_id:asc:hashed,"
     "updated_at_ms:asc:ordered",
     0, SH_PREDICATES "," SH_ROOT,
     "0x4C kind 6: partition, root_flow_id, updated_at_ms, run_id",
     "u64 record version", NULL},
    {"flow_runs_partition_type_state_created",
     "partition_key:asc:hashed,type:asc:hashed,state:asc:hashed,"
     "created_at_ms:asc:ordered",
     0, SH_PREDICATES "," SH_TYPE_STATE "," SH_TERMINALS,
     "0x4C kind 2: partition, type, state, created_at_ms, run_id",
     "u64 record version", NULL},
    {"flow_runs_partition_type_state_due",
     "partition_key:asc:hashed,type:asc:hashed,state:asc:hashed,"
     "priority:desc:ordered,next_run_at_ms:asc:ordered",
     0, SH_PREDICATES "," SH_TYPE_STATE "," SH_LEASE,
     "0x41: partition, type, state, 255 - priority, next_run_at_ms, run_id",
     "empty", NULL},
    {"flow_runs_partition_type_state_updated",
     "partition_key:asc:hashed,type:asc:hashed,state:asc:hashed,"
     "updated_at_ms:asc:ordered",
     3, SH_PREDICATES "," SH_TYPE_STATE "," SH_TERMINALS "," SH_COUNT,
     "0x4C kind 1: partition, type, state, updated_at_ms, run_id",
     "u64 record version", "0x4D: type, partition: u64 flows per state"},
    {"flow_runs_partition_updated",
     "partition_key:asc:hashed,updated_at_ms:asc:ordered", 0, SH_PREDICATES,
     "0x4C kind 8: partition, updated_at_ms, run_id", "u64 record version",
     NULL},
    {"flow_runs_primary", "partition_key:asc:hashed,run_id:asc:hashed", 0,
     SH_RUN_ID "," SH_PART_RUN_ID, "0x40: partition, run_id",
     "the record (typed map)", NULL},
};

/* Shard progress of a finished phase list: every shard done. */
static void w_progress(struct fsnp_writer *w, uint32_t shards)
{
	fsnp_w_key(w, "scope");
	fsnp_w_str(w, "catalog_build");
	fsnp_w_key(w, "phase_counts");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "done");
	fsnp_w_i64(w, shards);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "current_phases");
	w_list(w, "done");
	fsnp_w_key(w, "completed_shards");
	fsnp_w_i64(w, shards);
	fsnp_w_key(w, "total_shards");
	fsnp_w_i64(w, shards);
}

static void w_kv_i64(struct fsnp_writer *w, const char *k, int64_t v)
{
	fsnp_w_key(w, k);
	fsnp_w_i64(w, v);
}

static void w_status_index(struct fsnp_writer *w, const struct ixstatus *x,
                           uint64_t now_ms, uint32_t shards)
{
	const char *f = x->fields;
	char build[64];

	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_str(w, x->id);
	w_kv_i64(w, "version", 1);
	/* Built by the format's apply, not by a build job. */
	snprintf(build, sizeof build, "storage-format-%d",
	         STORE_FORMAT_VERSION);
	fsnp_w_key(w, "build_id");
	fsnp_w_str(w, build);
	fsnp_w_key(w, "source");
	fsnp_w_str(w, "runs");
	fsnp_w_key(w, "state");
	fsnp_w_str(w, "active");
	fsnp_w_key(w, "queryable");
	fsnp_w_bool(w, true);
	fsnp_w_key(w, "fields");
	fsnp_w_array_begin(w);
	while (*f != '\0') {
		size_t l = strcspn(f, ","), a = strcspn(f, ":");
		size_t b = a + 1 + strcspn(f + a + 1, ":");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "name");
		fsnp_w_bin(w, f, a);
		fsnp_w_key(w, "direction");
		fsnp_w_bin(w, f + a + 1, b - a - 1);
		fsnp_w_key(w, "encoding");
		fsnp_w_bin(w, f + b + 1, l - b - 1);
		fsnp_w_map_end(w);
		f += l + (f[l] == ',');
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "workloads");
	w_list(w, x->workloads);
	fsnp_w_key(w, "count_prefixes");
	fsnp_w_array_begin(w);
	if (x->count_prefix > 0) {
		fsnp_w_i64(w, x->count_prefix);
	}
	fsnp_w_array_end(w);
	/* The entries carry the version only, not the record's fields. */
	fsnp_w_key(w, "covering_fields");
	fsnp_w_array_begin(w);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "format");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "query_row");
	fsnp_w_str(w, "0x40 flow record: partition, run_id");
	fsnp_w_key(w, "key");
	fsnp_w_str(w, x->key);
	fsnp_w_key(w, "entry");
	fsnp_w_str(w, x->entry);
	fsnp_w_key(w, "reverse");
	fsnp_w_str(w, "none: the keys derive from the record");
	fsnp_w_key(w, "counter");
	if (x->counter != NULL) {
		fsnp_w_str(w, x->counter);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_map_end(w);
	fsnp_w_key(w, "coverage");
	fsnp_w_map_begin(w);
	w_kv_i64(w, "complete_shards", shards);
	w_kv_i64(w, "total_shards", shards);
	fsnp_w_key(w, "validation");
	fsnp_w_str(w, "passed");
	fsnp_w_map_end(w);
	fsnp_w_key(w, "build");
	fsnp_w_map_begin(w);
	w_progress(w, shards);
	w_kv_i64(w, "scanned_records", 0);
	w_kv_i64(w, "written_entries", 0);
	w_kv_i64(w, "written_bytes", 0);
	fsnp_w_map_end(w);
	/* Written in the record's apply batch: valid whenever observed. */
	fsnp_w_key(w, "validation");
	fsnp_w_map_begin(w);
	w_progress(w, shards);
	fsnp_w_key(w, "status");
	fsnp_w_str(w, "passed");
	w_kv_i64(w, "checked_records", 0);
	w_kv_i64(w, "checked_entries", 0);
	w_kv_i64(w, "mismatches", 0);
	fsnp_w_key(w, "failure_reason");
	fsnp_w_nil(w);
	w_kv_i64(w, "validated_at_ms", (int64_t)now_ms);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "retirement");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "status");
	fsnp_w_str(w, "not_applicable");
	fsnp_w_map_end(w);
	/* No statistics are kept (plans use exact counters). */
	fsnp_w_key(w, "statistics");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "status");
	fsnp_w_str(w, "unavailable");
	w_kv_i64(w, "samples", 0);
	w_kv_i64(w, "fresh_samples", 0);
	w_kv_i64(w, "stale_samples", 0);
	w_kv_i64(w, "future_samples", 0);
	fsnp_w_key(w, "oldest_collected_at_ms");
	fsnp_w_nil(w);
	fsnp_w_key(w, "newest_collected_at_ms");
	fsnp_w_nil(w);
	fsnp_w_key(w, "oldest_age_ms");
	fsnp_w_nil(w);
	fsnp_w_key(w, "newest_age_ms");
	fsnp_w_nil(w);
	fsnp_w_map_end(w);
	fsnp_w_map_end(w);
}

int flow_index_status_v1(struct fsnp_writer *w, uint64_t now_ms,
                         uint32_t shards, const uint8_t *id, size_t id_len)
{
	size_t n = sizeof status_ix / sizeof status_ix[0], found = n;

	if (id_len > 0) {
		for (size_t i = 0; i < n; i++) {
			if (strlen(status_ix[i].id) == id_len &&
			    memcmp(status_ix[i].id, id, id_len) == 0) {
				found = i;
			}
		}
		if (found == n) {
			return -1;
		}
	}
	if (shards == 0) {
		shards = 1;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "contract_version");
	fsnp_w_str(w, "ferric.flow.query.indexes/v1");
	w_kv_i64(w, "observed_at_ms", (int64_t)now_ms);
	w_kv_i64(w, "statistics_max_age_ms", 0);
	fsnp_w_key(w, "registry");
	fsnp_w_map_begin(w);
	w_kv_i64(w, "epoch", 0);
	w_kv_i64(w, "catalog_version", STORE_FORMAT_VERSION);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "services");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "registry");
	fsnp_w_str(w, "ready");
	fsnp_w_key(w, "lifecycle_worker");
	fsnp_w_str(w, "ready");
	fsnp_w_key(w, "statistics_store");
	fsnp_w_str(w, "unavailable");
	fsnp_w_key(w, "statistics_worker");
	fsnp_w_str(w, "unavailable");
	fsnp_w_map_end(w);
	fsnp_w_key(w, "indexes");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		if (id_len == 0 || i == found) {
			w_status_index(w, &status_ix[i], now_ms, shards);
		}
	}
	fsnp_w_array_end(w);
	fsnp_w_map_end(w);
	return 0;
}
