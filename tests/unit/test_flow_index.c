/* Flow secondary indexes and exact counters (flow/flow_index.h) against a
 * brute-force recomputation from the records: seeded random creates,
 * claims, completions, failures, transitions, cancels and retention
 * cleanups (which delete records), checked every few steps and after a
 * snapshot export/import; bounded index scans with resume keys against
 * the records' order; FLOW.STATS / ATTRIBUTES / ATTRIBUTE_VALUES against
 * counts taken from the records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_index.h"
#include "flow/flow_record.h"
#include "flow/flow_stats.h"
#include "flow/fql_shape.h"
#include "store/ext.h"
#include "store/internal.h"
#include "store/keys.h"
#include "tests/unit/flow_test_util.h"
#include "wire/fsnp_opcode.h"

#define G 1
#define NIDS 30
#define STEPS 1500

static const char *const parts[] = {"p0", "p1", ""};
static const char *const types[] = {"a", "b"};
static const char *const regions[] = {"eu", "us", "ap"};

struct w {
	struct tdb t;
	uint64_t now;
	uint64_t rng;
	int part[NIDS]; /* index into parts, -1 never created */
};

static uint64_t rnd(struct w *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

static unsigned pick(struct w *w, unsigned n)
{
	return (unsigned)(rnd(w) % n);
}

static void run(struct w *w, uint16_t op, struct fbody *b, struct freply *r)
{
	fb_end(b);
	fl_run(&w->t, G, w->now, op, b, rnd(w), r);
	fb_free(b);
}

static void idstr(int i, char *buf)
{
	snprintf(buf, 16, "f%02d", i);
}

static void with_part(struct w *w, struct fbody *b, int i)
{
	if (w->part[i] >= 0 && parts[w->part[i]][0] != '\0') {
		fb_str(b, "partition_key", parts[w->part[i]]);
	}
}

static void attrs(struct w *w, struct fbody *b, const char *key)
{
	fb_key(b, key);
	fsnp_w_map_begin(&b->w);
	fsnp_w_key(&b->w, "region");
	fsnp_w_str(&b->w, regions[pick(w, 3)]);
	if (pick(w, 2)) {
		fsnp_w_key(&b->w, "tier");
		fsnp_w_i64(&b->w, 1 + pick(w, 3));
	}
	if (pick(w, 2)) {
		fsnp_w_key(&b->w, "tags");
		fsnp_w_array_begin(&b->w);
		fsnp_w_str(&b->w, "x");
		if (pick(w, 2)) {
			fsnp_w_str(&b->w, "y");
		}
		fsnp_w_array_end(&b->w);
	}
	fsnp_w_map_end(&b->w);
}

static void s_create(struct w *w)
{
	int i = (int)pick(w, NIDS);
	char id[16];
	struct fbody b;
	struct freply r;
	int p = (int)pick(w, 3);

	if (w->part[i] >= 0) {
		p = w->part[i]; /* the same flow again: refused */
	}
	idstr(i, id);
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", types[pick(w, 2)]);
	if (parts[p][0] != '\0') {
		fb_str(&b, "partition_key", parts[p]);
	}
	if (pick(w, 4)) {
		attrs(w, &b, "attributes");
	}
	if (pick(w, 3) == 0) {
		fb_key(&b, "state_meta");
		fsnp_w_map_begin(&b.w);
		fsnp_w_key(&b.w, "risk");
		fsnp_w_str(&b.w, pick(w, 2) ? "low" : "high");
		fsnp_w_map_end(&b.w);
	}
	if (pick(w, 3) == 0) {
		fb_str(&b, "parent_flow_id", "parent-1");
	}
	if (pick(w, 3) == 0) {
		fb_str(&b, "correlation_id", pick(w, 2) ? "c1" : "c2");
	}
	if (pick(w, 2)) {
		fb_int(&b, "retention_ttl_ms", 50 + pick(w, 400));
	}
	run(w, FSNP_OP_FLOW_CREATE, &b, &r);
	if (r.status == 0) {
		w->part[i] = p;
	}
	freply_free(&r);
}

static void s_claim(struct w *w)
{
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "type", types[pick(w, 2)]);
	fb_str(&b, "worker", "w1");
	fb_int(&b, "limit", 1 + pick(w, 4));
	fb_int(&b, "lease_ms", 100 + pick(w, 300));
	run(w, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	freply_free(&r);
}

/* FLOW.GET of flow i: its lease token and fencing token. */
static bool get_tokens(struct w *w, int i, char *lease, int64_t *fencing)
{
	char id[16], buf[256];
	struct fbody b;
	struct freply r;
	bool ok;

	idstr(i, id);
	fb_begin(&b);
	fb_str(&b, "id", id);
	with_part(w, &b, i);
	run(w, FSNP_OP_FLOW_GET, &b, &r);
	ok = r.status == 0 && r.v.tag == FSNP_MAP;
	if (ok) {
		lease[0] = '\0';
		if (!fr_is_nil(&r.v, "lease_token")) {
			strcpy(lease, fr_str(&r.v, "lease_token", buf));
		}
		*fencing = fr_int(&r.v, "fencing_token");
	}
	freply_free(&r);
	return ok;
}

static void s_mutate(struct w *w)
{
	int i = (int)pick(w, NIDS), k = (int)pick(w, 4);
	static const uint16_t ops[] = {FSNP_OP_FLOW_COMPLETE, FSNP_OP_FLOW_FAIL,
	                               FSNP_OP_FLOW_TRANSITION,
	                               FSNP_OP_FLOW_CANCEL};
	char id[16], lease[256];
	int64_t fencing;
	struct fbody b;
	struct freply r;

	if (w->part[i] < 0 || !get_tokens(w, i, lease, &fencing)) {
		return;
	}
	idstr(i, id);
	fb_begin(&b);
	fb_str(&b, "id", id);
	with_part(w, &b, i);
	fb_int(&b, "fencing_token", fencing);
	if (k < 2) {
		fb_str(&b, "lease_token", lease[0] ? lease : "none");
	} else if (k == 2) {
		fb_str(&b, "from_state", "running");
		fb_str(&b, "to_state", pick(w, 2) ? "review" : "queued");
	}
	if (k != 3 && pick(w, 2)) {
		attrs(w, &b, "attributes_merge");
	}
	if (k != 3 && pick(w, 3) == 0) {
		fb_key(&b, "state_meta");
		fsnp_w_map_begin(&b.w);
		fsnp_w_key(&b.w, "risk");
		fsnp_w_i64(&b.w, pick(w, 5));
		fsnp_w_map_end(&b.w);
	}
	run(w, ops[k], &b, &r);
	freply_free(&r);
}

static void s_cleanup(struct w *w)
{
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_int(&b, "limit", 1 + pick(w, 5));
	run(w, FSNP_OP_FLOW_RETENTION_CLEANUP, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	/* A cleaned flow's id may be created again. */
	for (int i = 0; i < NIDS; i++) {
		char lease[256];
		int64_t f;
		if (w->part[i] >= 0 && !get_tokens(w, i, lease, &f)) {
			w->part[i] = -1;
		}
	}
}

/* --- Brute force ---------------------------------------------------------- */

struct kv {
	uint8_t *k;
	size_t kl;
	uint64_t v;
};

static int kv_cmp(const void *x, const void *y)
{
	const struct kv *a = x, *b = y;
	size_t n = a->kl < b->kl ? a->kl : b->kl;
	int c = memcmp(a->k, b->k, n);
	return c != 0 ? c : (a->kl < b->kl ? -1 : a->kl > b->kl);
}

struct kvs {
	struct kv *v;
	size_t n, cap;
};

static void kvs_add(struct kvs *s, const uint8_t *k, size_t kl, uint64_t v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n].k = malloc(kl);
	memcpy(s->v[s->n].k, k, kl);
	s->v[s->n].kl = kl;
	s->v[s->n].v = v;
	s->n++;
}

static void kvs_free(struct kvs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].k);
	}
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* Every key of type `kt` in the group with its u64 value. */
static void scan_type(struct tdb *t, uint8_t kt, struct kvs *out)
{
	uint8_t pfx[5] = {0, 0, 0, G, kt};
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;

	assert_int_equal(store_drain(t->s), 0);
	it = rocksdb_create_iterator_cf(t->db, ro, t->cf[3]);
	for (rocksdb_iter_seek(it, (const char *)pfx, 5);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *v = rocksdb_iter_value(it, &vl);
		if (kl < 5 || memcmp(k, pfx, 5) != 0) {
			break;
		}
		if (kt == K_FLOW_COUNT) {
			/* a (type, part) row of state counts: one
			 * (type, part, state) counter key each, as
			 * flow_index_keys names them */
			size_t off = 0;
			struct fsnp_bytes st;
			uint64_t n;
			struct sbuf ck;
			sbuf_init(&ck);
			assert_true(vl > 0);
			while (flow_count_row_next((const uint8_t *)v, vl, &off,
			                           &st, &n)) {
				assert_true(n > 0);
				sbuf_reset(&ck);
				sbuf_add(&ck, k, kl);
				sbuf_lbytes(&ck, st.ptr, st.len);
				kvs_add(out, ck.p, ck.len, n);
			}
			assert_int_equal(off, vl);
			sbuf_free(&ck);
			continue;
		}
		assert_int_equal(vl, 8);
		kvs_add(out, (const uint8_t *)k, kl,
		        be_get64((const uint8_t *)v));
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
}

/* The records of the group, decoded (their bytes kept in `keep`). */
static size_t records(struct tdb *t, struct frec *out, size_t max,
                      struct kvs *keep)
{
	uint8_t pfx[5] = {0, 0, 0, G, K_FLOW};
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;
	size_t n = 0;

	assert_int_equal(store_drain(t->s), 0);
	it = rocksdb_create_iterator_cf(t->db, ro, t->cf[3]);
	for (rocksdb_iter_seek(it, (const char *)pfx, 5);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const char *v = rocksdb_iter_value(it, &vl);
		if (kl < 5 || memcmp(k, pfx, 5) != 0) {
			break;
		}
		assert_true(n < max);
		kvs_add(keep, (const uint8_t *)v, vl, 0);
		assert_int_equal(
		    frec_decode(keep->v[keep->n - 1].k, vl, &out[n]), 0);
		n++;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return n;
}

static void from_list(const struct sbuf *b, struct kvs *out, uint64_t v,
                      bool dedup_into_count)
{
	size_t off = 0;
	struct kvs one = {0};
	while (off + 4 <= b->len) {
		uint32_t kl = be_get32(b->p + off);
		kvs_add(&one, b->p + off + 4, kl, v);
		off += 4 + kl;
	}
	qsort(one.v, one.n, sizeof *one.v, kv_cmp);
	for (size_t i = 0; i < one.n; i++) {
		if (i > 0 && kv_cmp(&one.v[i - 1], &one.v[i]) == 0) {
			continue; /* a list value named twice */
		}
		if (dedup_into_count) {
			size_t j;
			for (j = 0; j < out->n; j++) {
				if (kv_cmp(&out->v[j], &one.v[i]) == 0) {
					out->v[j].v++;
					break;
				}
			}
			if (j < out->n) {
				continue;
			}
		}
		kvs_add(out, one.v[i].k, one.v[i].kl, v);
	}
	kvs_free(&one);
}

static void assert_same(struct kvs *a, struct kvs *b)
{
	if (a->n > 1) {
		qsort(a->v, a->n, sizeof *a->v, kv_cmp);
	}
	if (b->n > 1) {
		qsort(b->v, b->n, sizeof *b->v, kv_cmp);
	}
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		assert_int_equal(a->v[i].kl, b->v[i].kl);
		assert_memory_equal(a->v[i].k, b->v[i].k, a->v[i].kl);
		assert_int_equal(a->v[i].v, b->v[i].v);
	}
}

/* Indexes and counters equal what the records say. Returns the number
 * of records. */
static size_t check(struct tdb *t)
{
	static struct frec recs[NIDS * 2];
	struct kvs keep = {0}, want_ix = {0}, want_cnt = {0}, got_ix = {0},
	           got_cnt = {0};
	size_t n = records(t, recs, NIDS * 2, &keep);

	for (size_t i = 0; i < n; i++) {
		struct sbuf ix, cnt;
		sbuf_init(&ix);
		sbuf_init(&cnt);
		flow_index_keys(G, &recs[i], &ix, &cnt);
		from_list(&ix, &want_ix, (uint64_t)recs[i].i[RI_VERSION],
		          false);
		from_list(&cnt, &want_cnt, 1, true);
		sbuf_free(&ix);
		sbuf_free(&cnt);
	}
	/* Counters are cached rows: the cache agrees with RocksDB. */
	{
		char msg[256];
		if (store_row_cache_verify(t->s, msg, sizeof msg) != 0) {
			fail_msg("row cache: %s", msg);
		}
	}
	scan_type(t, K_FLOW_IX, &got_ix);
	scan_type(t, K_FLOW_COUNT, &got_cnt);
	scan_type(t, K_FLOW_ACOUNT, &got_cnt);
	assert_same(&want_ix, &got_ix);
	assert_same(&want_cnt, &got_cnt);
	kvs_free(&keep);
	kvs_free(&want_ix);
	kvs_free(&want_cnt);
	kvs_free(&got_ix);
	kvs_free(&got_cnt);
	return n;
}

/* --- Reads over the indexes ----------------------------------------------- */

static int64_t stats(struct w *w, const char *type, const char *state,
                     const char *part, const char *region, int64_t tier)
{
	struct fbody b;
	struct freply r;
	struct flow_req q;
	struct flow_err err;
	struct wbuf out;
	struct fsnp_writer wr;
	struct fsnp_val v;
	int64_t n;

	fb_begin(&b);
	fb_str(&b, "type", type);
	fb_str(&b, "state", state);
	if (part != NULL) {
		fb_str(&b, "partition_key", part);
	}
	if (region != NULL || tier > 0) {
		fb_key(&b, "attributes");
		fsnp_w_map_begin(&b.w);
		if (region != NULL) {
			fsnp_w_key(&b.w, "region");
			fsnp_w_str(&b.w, region);
		}
		if (tier > 0) {
			fsnp_w_key(&b.w, "tier");
			fsnp_w_i64(&b.w, tier);
		}
		fsnp_w_map_end(&b.w);
	}
	fb_end(&b);
	fl_run(&w->t, G, w->now, FSNP_OP_FLOW_STATS, &b, 1, &r);
	assert_int_equal(r.status, 0);
	/* The merge of one group's answer is that answer. */
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_STATS, b.b.data,
	                                        b.b.len, &q, &err),
	                 0);
	wbuf_init(&out);
	fsnp_w_init(&wr, &out);
	assert_int_equal(flow_stats_merge(&q, &r.v, 1, &wr, &err), 0);
	assert_int_equal(fsnp_w_finish(&wr), 0);
	assert_int_equal(fsnp_value_decode_body(out.data, out.len, NULL, &v),
	                 0);
	n = fr_int(&v, "count");
	assert_int_equal(n, fr_int(&r.v, "count"));
	wbuf_free(&out);
	fb_free(&b);
	freply_free(&r);
	return n;
}

static bool rec_attr_is(const struct frec *r, const char *name,
                        const struct fsnp_val *want)
{
	struct fsnp_val v, e;
	struct fsnp_iter it;
	if (!r->v_set[RV_ATTRIBUTES] ||
	    fsnp_map_get(&r->v[RV_ATTRIBUTES], name, &v) != 0) {
		return false;
	}
	if (v.tag != FSNP_ARRAY) {
		return v.enc_len == want->enc_len &&
		       memcmp(v.enc, want->enc, v.enc_len) == 0;
	}
	fsnp_iter_init(&it, &v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (e.enc_len == want->enc_len &&
		    memcmp(e.enc, want->enc, e.enc_len) == 0) {
			return true;
		}
	}
	return false;
}

static void check_stats(struct w *w)
{
	static struct frec recs[NIDS * 2];
	static const char *const states[] = {"queued", "running", "completed",
	                                     "failed", "review",  "cancelled"};
	struct kvs keep = {0};
	size_t n = records(&w->t, recs, NIDS * 2, &keep);
	uint8_t eu[7] = {FSNP_BIN, 0, 0, 0, 2, 'e', 'u'};
	uint8_t t2[9] = {FSNP_I64, 0, 0, 0, 0, 0, 0, 0, 2};
	struct fsnp_val veu, vt2;

	assert_int_equal(fsnp_value_decode(eu, 7, NULL, &veu, NULL), 0);
	assert_int_equal(fsnp_value_decode(t2, 9, NULL, &vt2, NULL), 0);
	for (size_t ti = 0; ti < 2; ti++) {
		for (size_t si = 0; si < 6; si++) {
			int64_t all = 0, p0 = 0, a1 = 0, a2 = 0;
			for (size_t i = 0; i < n; i++) {
				const struct frec *r = &recs[i];
				if (!frec_is(r, RS_TYPE, types[ti]) ||
				    !frec_is(r, RS_STATE, states[si])) {
					continue;
				}
				all++;
				p0 += frec_is(r, RS_PARTITION_KEY, "p0");
				if (rec_attr_is(r, "region", &veu)) {
					a1++;
					a2 += rec_attr_is(r, "tier", &vt2);
				}
			}
			assert_int_equal(
			    stats(w, types[ti], states[si], NULL, NULL, 0),
			    all);
			assert_int_equal(
			    stats(w, types[ti], states[si], "p0", NULL, 0), p0);
			assert_int_equal(
			    stats(w, types[ti], states[si], NULL, "eu", 0), a1);
			assert_int_equal(
			    stats(w, types[ti], states[si], NULL, "eu", 2), a2);
		}
	}
	kvs_free(&keep);
}

/* Pages of (p0, a, <state>) by updated_at descending equal the records
 * sorted so, with every entry scanned once. */
static void check_scan(struct w *w, const char *state)
{
	static struct frec recs[NIDS * 2];
	struct kvs keep = {0};
	size_t n = records(&w->t, recs, NIDS * 2, &keep), want = 0, got = 0;
	struct fsnp_bytes eq[2] = {fb("a"), fb(state)};
	struct flow_ix_usage u = {0};
	struct flow_ix_page pg;
	struct sbuf pfx, resume;
	struct tx txs, *tx = &txs;
	int64_t prev_upd = INT64_MAX;

	for (size_t i = 0; i < n; i++) {
		want += frec_is(&recs[i], RS_PARTITION_KEY, "p0") &&
		        frec_is(&recs[i], RS_TYPE, "a") &&
		        frec_is(&recs[i], RS_STATE, state);
	}
	tx_init(tx, w->t.s, G, 0, w->now, false);
	flow_ix_page_init(&pg);
	sbuf_init(&pfx);
	sbuf_init(&resume);
	flow_ix_prefix(&pfx, G, fb("p0"), FLOW_IX_UPDATED, eq, 2);
	for (int pages = 0; pages < 100; pages++) {
		struct flow_ix_range r = {pfx.p,      pfx.len, 0,
		                          UINT64_MAX, true,    resume.p,
		                          resume.len, 2,       0};
		const char *msg;
		assert_int_equal(flow_ix_scan(tx, &r, &pg, &u, &msg), 0);
		for (size_t h = 0; h < pg.n; h++) {
			assert_true((int64_t)pg.hits[h].order <= prev_upd);
			prev_upd = (int64_t)pg.hits[h].order;
			got++;
		}
		if (!pg.more) {
			break;
		}
		sbuf_reset(&resume);
		sbuf_add(&resume, pg.hits[pg.n - 1].key.ptr,
		         pg.hits[pg.n - 1].key.len);
	}
	assert_int_equal(got, want);
	/* Each returned entry read once, plus one look-ahead per full page. */
	assert_true(u.entries >= got && u.entries <= got + got / 2 + 1);
	flow_ix_page_free(&pg);
	tx_fini(tx);
	sbuf_free(&pfx);
	sbuf_free(&resume);
	kvs_free(&keep);
}

static void set_policy(struct w *w)
{
	struct fbody b;
	struct freply r;
	static const char *const names[] = {"region", "tags"};

	fb_begin(&b);
	fb_str(&b, "type", "a");
	fb_strs(&b, "indexed_attributes", names, 2);
	run(w, FSNP_OP_FLOW_POLICY_SET, &b, &r);
	if (r.status != 0) {
		fail_msg("POLICY.SET: %s", r.text);
	}
	freply_free(&r);
}

static void check_attributes(struct w *w)
{
	static struct frec recs[NIDS * 2];
	struct kvs keep = {0};
	size_t n = records(&w->t, recs, NIDS * 2, &keep);
	int64_t with_region = 0, per[3] = {0};
	struct fbody b;
	struct freply r;
	struct fsnp_iter it;
	struct fsnp_val e;
	char buf[256];
	bool saw_region = false;

	for (size_t i = 0; i < n; i++) {
		struct fsnp_val v;
		if (!frec_is(&recs[i], RS_TYPE, "a") ||
		    !recs[i].v_set[RV_ATTRIBUTES] ||
		    fsnp_map_get(&recs[i].v[RV_ATTRIBUTES], "region", &v) !=
		        0) {
			continue;
		}
		with_region++;
		for (int k = 0; k < 3; k++) {
			per[k] += fsnp_bytes_eq(v.as.bin, regions[k]);
		}
	}
	fb_begin(&b);
	fb_str(&b, "type", "a");
	run(w, FSNP_OP_FLOW_ATTRIBUTES, &b, &r);
	assert_int_equal(r.status, 0);
	fsnp_iter_init(&it, &r.v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		const char *nm = fr_str(&e, "name", buf);
		/* Only indexed names: tier is not. */
		assert_true(!strcmp(nm, "region") || !strcmp(nm, "tags"));
		if (!strcmp(nm, "region")) {
			saw_region = true;
			assert_int_equal(fr_int(&e, "count"), with_region);
		}
	}
	assert_int_equal(saw_region, with_region > 0);
	freply_free(&r);

	fb_begin(&b);
	fb_str(&b, "type", "a");
	fb_str(&b, "attribute", "region");
	run(w, FSNP_OP_FLOW_ATTRIBUTE_VALUES, &b, &r);
	assert_int_equal(r.status, 0);
	fsnp_iter_init(&it, &r.v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		const char *val = fr_str(&e, "value", buf);
		for (int k = 0; k < 3; k++) {
			if (!strcmp(val, regions[k])) {
				assert_int_equal(fr_int(&e, "count"), per[k]);
				per[k] = 0;
			}
		}
	}
	for (int k = 0; k < 3; k++) {
		assert_int_equal(per[k], 0); /* every value listed */
	}
	freply_free(&r);

	/* Not indexed: an empty list. */
	fb_begin(&b);
	fb_str(&b, "type", "a");
	fb_str(&b, "attribute", "tier");
	run(w, FSNP_OP_FLOW_ATTRIBUTE_VALUES, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_ARRAY);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	kvs_free(&keep);
}

static void run_seed(uint64_t seed)
{
	struct w *w = calloc(1, sizeof *w);
	char dir[600];
	uint64_t idx, idx2;
	struct tdb c;
	size_t max_seen = 0;

	ftdb_open(&w->t);
	w->now = 1000000;
	w->rng = seed * 0x9E3779B97F4A7C15ull + 1;
	for (int i = 0; i < NIDS; i++) {
		w->part[i] = -1;
	}
	set_policy(w);
	for (int s = 0; s < STEPS; s++) {
		unsigned k = pick(w, 100);
		w->now += 1 + pick(w, 40);
		if (k < 30) {
			s_create(w);
		} else if (k < 55) {
			s_claim(w);
		} else if (k < 90) {
			s_mutate(w);
		} else if (k < 96) {
			s_cleanup(w);
		} else {
			size_t n = check(&w->t);
			max_seen = n > max_seen ? n : max_seen;
		}
	}
	max_seen = check(&w->t) > max_seen ? check(&w->t) : max_seen;
	assert_true(max_seen > 5);
	check_stats(w);
	check_scan(w, "queued");
	check_scan(w, "completed");
	check_attributes(w);

	snprintf(dir, sizeof dir, "%s/export", w->t.dir);
	{
		char cmd[700];
		snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(store_export(w->t.s, G, dir, &idx), 0);
	ftdb_open(&c);
	assert_int_equal(store_import(c.s, G, dir, &idx2), 0);
	assert_int_equal(idx, idx2);
	c.next_index[G] = idx2 + 1;
	check(&c);
	assert_int_equal(tdb_hash_group(&c, G), tdb_hash_group(&w->t, G));
	tdb_close(&c);
	tdb_close(&w->t);
	free(w);
}

static void test_index_seed_1(void **state)
{
	(void)state;
	run_seed(1);
}

static void test_index_seed_2(void **state)
{
	(void)state;
	run_seed(2);
}

/* "any" needs attributes; count out of range. */
static void test_stats_errors(void **state)
{
	struct w w = {0};
	struct fbody b;
	struct freply r;
	(void)state;

	ftdb_open(&w.t);
	w.now = 1000;
	w.rng = 7;
	fb_begin(&b);
	fb_str(&b, "type", "a");
	fb_str(&b, "state", "any");
	run(&w, FSNP_OP_FLOW_STATS, &b, &r);
	fr_err(&r, 1, "ERR flow state any requires attributes");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "a");
	fb_int(&b, "count", 1001);
	run(&w, FSNP_OP_FLOW_ATTRIBUTES, &b, &r);
	fr_err(&r, 1, "ERR flow count must be between 1 and 1000");
	freply_free(&r);
	tdb_close(&w.t);
}

/* Value keys: order-preserving and reversible. */
static void test_value_keys(void **state)
{
	int64_t ints[] = {INT64_MIN, -5, 0, 7, INT64_MAX};
	struct sbuf a, b;
	(void)state;

	sbuf_init(&a);
	sbuf_init(&b);
	for (size_t i = 0; i + 1 < sizeof ints / sizeof ints[0]; i++) {
		struct fsnp_val x = {.tag = FSNP_I64}, y = {.tag = FSNP_I64};
		x.as.i = ints[i];
		y.as.i = ints[i + 1];
		assert_int_equal(flow_ix_value_key(&x, &a), 0);
		assert_int_equal(flow_ix_value_key(&y, &b), 0);
		assert_true(memcmp(a.p, b.p, 9) < 0);
	}
	{
		double ds[] = {-1e9, -0.5, 0.0, 0.25, 3e10};
		for (size_t i = 0; i + 1 < 5; i++) {
			struct fsnp_val x = {.tag = FSNP_F64},
			                y = {.tag = FSNP_F64};
			struct wbuf o;
			struct fsnp_writer w;
			struct fsnp_val back;
			x.as.f = ds[i];
			y.as.f = ds[i + 1];
			assert_int_equal(flow_ix_value_key(&x, &a), 0);
			assert_int_equal(flow_ix_value_key(&y, &b), 0);
			assert_true(memcmp(a.p, b.p, 9) < 0);
			wbuf_init(&o);
			fsnp_w_init(&w, &o);
			assert_int_equal(
			    flow_ix_value_write(
			        &w, (struct fsnp_bytes){a.p, a.len}),
			    0);
			assert_int_equal(fsnp_w_finish(&w), 0);
			assert_int_equal(
			    fsnp_value_decode(o.data, o.len, NULL, &back, NULL),
			    0);
			assert_true(back.tag == FSNP_F64 && back.as.f == ds[i]);
			wbuf_free(&o);
		}
	}
	{
		struct fsnp_val m = {.tag = FSNP_MAP};
		assert_int_equal(flow_ix_value_key(&m, &a), -1);
	}
	sbuf_free(&a);
	sbuf_free(&b);
}

/* FLOW.QUERY.INDEXES: indexes sorted by id, each covering every shard;
 * one by id; an unknown id writes nothing. The manifest's shapes are the
 * FQL1 classifier's. */
static void test_index_status(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val m, list, e, cov;
	struct fsnp_iter it;
	char prev[128] = "", id[128];
	size_t n_shapes;
	const char *const *shapes = flow_index_shapes(&n_shapes);
	(void)state;

	/* Exactly the FQL1 classifier's shapes, in its order. */
	assert_int_equal(n_shapes, FQL_SHAPES);
	for (unsigned i = 0; i < FQL_SHAPES; i++) {
		assert_string_equal(shapes[i], fql_shape_name(i));
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	assert_int_equal(flow_index_status_v1(&w, 1234, 3, NULL, 0), 0);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode_body(b.data, b.len, NULL, &m), 0);
	assert_int_equal(fsnp_map_get(&m, "indexes", &list), 0);
	assert_true(list.as.count >= 8);
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		fr_str(&e, "id", id);
		assert_true(strcmp(prev, id) < 0);
		strcpy(prev, id);
		cov = fr_get(&e, "coverage");
		assert_int_equal(fr_int(&cov, "total_shards"), 3);
		assert_int_equal(fr_int(&cov, "complete_shards"), 3);
	}
	wbuf_free(&b);

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	assert_int_equal(
	    flow_index_status_v1(&w, 1, 1, (const uint8_t *)"flow_runs_primary",
	                         17),
	    0);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode_body(b.data, b.len, NULL, &m), 0);
	assert_int_equal(fsnp_map_get(&m, "indexes", &list), 0);
	assert_int_equal(list.as.count, 1);
	wbuf_free(&b);

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	assert_int_equal(
	    flow_index_status_v1(&w, 1, 1, (const uint8_t *)"nope", 4), -1);
	assert_int_equal(b.len, 0);
	wbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_value_keys),
	    cmocka_unit_test(test_stats_errors),
	    cmocka_unit_test(test_index_status),
	    cmocka_unit_test(test_index_seed_1),
	    cmocka_unit_test(test_index_seed_2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
