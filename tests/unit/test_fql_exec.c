/* FLOW.QUERY planner and executor (flow/fql_plan.h, flow/fql_exec.h)
 * against a brute-force filter over the records: seeded random creates,
 * claims and mutations, then random queries of the advertised shapes
 * (type/state, terminal IN lists, lineage (a root's range holds the
 * root itself, which has no index entry), attributes, partition-wide
 * with residual predicates, updated_at_ms ranges, counts, point reads)
 * executed as the Flow store read and paged to the end through fqc1_
 * cursors; the concatenated pages must equal the filter's records in
 * index order. A second pass keeps writing other records between pages
 * and checks no record is returned twice and none whose sort key did not
 * change is skipped. Also: usage stays O(LIMIT) for plans without
 * residual predicates, no-plan refusals carry no values, EXPLAIN plans
 * are deterministic and redacted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_cursor.h"
#include "flow/flow_record.h"
#include "flow/fql_exec.h"
#include "flow/fql_plan.h"
#include "flow/fql_print.h"
#include "store/ext.h"
#include "store/internal.h"
#include "store/keys.h"
#include "tests/unit/flow_test_util.h"
#include "wire/fsnp_opcode.h"

#define G 1
#define NIDS 60
#define MAXR (NIDS * 2)

static const char *const parts[] = {"p0", "p1", ""};
static const char *const types[] = {"a", "b"};
static const char *const regions[] = {"eu", "us", "ap"};
static const uint8_t ckey[FLOW_CURSOR_KEY_BYTES] = {7, 7, 7};

struct w {
	struct tdb t;
	uint64_t now;
	uint64_t rng;
	int part[NIDS];
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

static void s_create(struct w *w)
{
	int i = (int)pick(w, NIDS);
	char id[16];
	struct fbody b;
	struct freply r;
	int p = (int)pick(w, 3);

	if (w->part[i] >= 0) {
		return;
	}
	idstr(i, id);
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", types[pick(w, 2)]);
	if (parts[p][0] != '\0') {
		fb_str(&b, "partition_key", parts[p]);
	}
	if (pick(w, 4)) {
		fb_key(&b, "attributes");
		fsnp_w_map_begin(&b.w);
		fsnp_w_key(&b.w, "region");
		fsnp_w_str(&b.w, regions[pick(w, 3)]);
		fsnp_w_map_end(&b.w);
	}
	if (pick(w, 3) == 0) {
		fb_str(&b, "correlation_id", pick(w, 2) ? "c1" : "c2");
	}
	if (pick(w, 3) == 0) {
		fb_str(&b, "parent_flow_id", "parent-1");
	}
	if (pick(w, 4) == 0) {
		fb_str(&b, "root_flow_id", pick(w, 2) ? "f01" : "f02");
	}
	fb_int(&b, "priority", pick(w, 3));
	if (pick(w, 2)) {
		fb_int(&b, "run_at_ms", (int64_t)(w->now + pick(w, 50)));
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
	fb_int(&b, "lease_ms", 100000);
	fb_str(&b, "partition_key", parts[pick(w, 2)]);
	run(w, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	freply_free(&r);
}

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
	run(w, ops[k], &b, &r);
	freply_free(&r);
}

static void step(struct w *w)
{
	unsigned k = pick(w, 100);
	w->now += 1 + pick(w, 3); /* frequent ties in updated_at_ms */
	if (k < 40) {
		s_create(w);
	} else if (k < 65) {
		s_claim(w);
	} else {
		s_mutate(w);
	}
}

/* --- The model: the records, decoded --------------------------------- */

struct mrec {
	char id[16], part[8], type[8], state[16], corr[8], region[8];
	char root[16];
	bool has_corr, has_region, has_parent;
	int64_t upd, version, next, lease;
	bool has_next, has_lease;
};

static void copy(char *out, size_t cap, struct fsnp_bytes b)
{
	size_t n = b.len < cap - 1 ? b.len : cap - 1;
	memcpy(out, b.ptr, n);
	out[n] = '\0';
}

static size_t model(struct w *w, struct mrec *out)
{
	uint8_t pfx[5] = {0, 0, 0, G, K_FLOW};
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;
	size_t n = 0;

	assert_int_equal(store_drain(w->t.s), 0);
	it = rocksdb_create_iterator_cf(w->t.db, ro, w->t.cf[3]);
	for (rocksdb_iter_seek(it, (const char *)pfx, 5);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
		struct frec r;
		struct fsnp_val reg;
		struct mrec *m = &out[n];
		if (kl < 5 || memcmp(k, pfx, 5) != 0) {
			break;
		}
		assert_true(n < MAXR);
		assert_int_equal(frec_decode(v, vl, &r), 0);
		memset(m, 0, sizeof *m);
		copy(m->id, sizeof m->id, r.s[RS_ID]);
		if (r.s_set[RS_PARTITION_KEY]) {
			copy(m->part, sizeof m->part, r.s[RS_PARTITION_KEY]);
		}
		copy(m->type, sizeof m->type, r.s[RS_TYPE]);
		copy(m->state, sizeof m->state, r.s[RS_STATE]);
		if ((m->has_corr = r.s_set[RS_CORRELATION_ID])) {
			copy(m->corr, sizeof m->corr, r.s[RS_CORRELATION_ID]);
		}
		m->has_parent = r.s_set[RS_PARENT_FLOW_ID];
		copy(m->root, sizeof m->root, r.s[RS_ROOT_FLOW_ID]);
		if (r.v_set[RV_ATTRIBUTES] &&
		    fsnp_map_get(&r.v[RV_ATTRIBUTES], "region", &reg) == 0 &&
		    reg.tag == FSNP_BIN) {
			m->has_region = true;
			copy(m->region, sizeof m->region, reg.as.bin);
		}
		m->upd = r.i[RI_UPDATED_AT_MS];
		m->has_next = r.i_set[RI_NEXT_RUN_AT_MS];
		m->next = r.i[RI_NEXT_RUN_AT_MS];
		m->has_lease = r.i_set[RI_LEASE_DEADLINE_MS];
		m->lease = r.i[RI_LEASE_DEADLINE_MS];
		m->version = r.i[RI_VERSION];
		n++;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return n;
}

/* --- Queries ------------------------------------------------------------ */

enum qk {
	Q_TYPE_STATE,
	Q_TERMINALS,
	Q_CORR,
	Q_REGION,
	Q_PART_RESIDUAL,
	Q_PART_RANGE,
	Q_DUE,
	Q_ROOT,
	Q_KINDS
};

struct spec {
	enum qk kind;
	const char *part, *type, *corr, *region, *root;
	const char *states[3];
	int nstates;
	int64_t lo, hi;
	bool desc;
	unsigned limit;
	char text[512];
};

static const char *const states[] = {"queued", "running",   "completed",
                                     "failed", "cancelled", "review"};

static void gen(struct w *w, struct spec *s, int64_t tmin, int64_t tmax)
{
	char where[256] = "";
	memset(s, 0, sizeof *s);
	s->kind = (enum qk)pick(w, Q_KINDS);
	s->part = parts[pick(w, 2)];
	s->type = types[pick(w, 2)];
	s->desc = pick(w, 2);
	s->limit = 1 + pick(w, 7);
	switch (s->kind) {
	case Q_TYPE_STATE:
		s->states[0] = states[pick(w, 6)];
		s->nstates = 1;
		snprintf(where, sizeof where, "type = '%s' AND state = '%s'",
		         s->type, s->states[0]);
		break;
	case Q_TERMINALS:
		s->states[0] = "completed";
		s->states[1] = "failed";
		s->states[2] = "cancelled";
		s->nstates = 3;
		snprintf(where, sizeof where,
		         "type = '%s' AND state IN ('completed', 'failed', "
		         "'cancelled')",
		         s->type);
		break;
	case Q_CORR:
		s->corr = pick(w, 2) ? "c1" : "c2";
		snprintf(where, sizeof where, "correlation_id = '%s'", s->corr);
		break;
	case Q_ROOT:
		/* f01 and f02 are roots of other flows (and their own);
		 * f03 only its own */
		s->root = (const char *[]){"f01", "f02", "f03"}[pick(w, 3)];
		snprintf(where, sizeof where, "root_flow_id = '%s'", s->root);
		break;
	case Q_REGION:
		s->region = regions[pick(w, 3)];
		snprintf(where, sizeof where, "attribute.region = '%s'",
		         s->region);
		break;
	case Q_PART_RESIDUAL:
		snprintf(where, sizeof where, "type = '%s'", s->type);
		break;
	case Q_DUE:
		/* the due index: running by lease deadline, queued by
		 * next run */
		s->states[0] = pick(w, 2) ? "running" : "queued";
		s->nstates = 1;
		snprintf(where, sizeof where, "type = '%s' AND state = '%s'",
		         s->type, s->states[0]);
		break;
	case Q_PART_RANGE:
		s->lo = tmin + (int64_t)pick(w, (unsigned)(tmax - tmin + 1));
		s->hi = s->lo + (int64_t)pick(w, 200);
		snprintf(where, sizeof where,
		         "updated_at_ms BETWEEN %lld AND %lld",
		         (long long)s->lo, (long long)s->hi);
		break;
	default:
		break;
	}
	snprintf(s->text, sizeof s->text,
	         "FROM runs WHERE partition_key = '%s' AND %s ORDER BY "
	         "%s %s LIMIT %u RETURN RECORDS",
	         s->part, where,
	         s->kind != Q_DUE                       ? "updated_at_ms"
	         : strcmp(s->states[0], "running") == 0 ? "lease_deadline_ms"
	                                                : "next_run_at_ms",
	         s->desc ? "DESC" : "ASC", s->limit);
}

static bool matches(const struct spec *s, const struct mrec *m)
{
	if (strcmp(m->part, s->part) != 0) {
		return false;
	}
	switch (s->kind) {
	case Q_DUE:
	case Q_TYPE_STATE:
	case Q_TERMINALS:
		if (strcmp(m->type, s->type) != 0) {
			return false;
		}
		for (int i = 0; i < s->nstates; i++) {
			if (strcmp(m->state, s->states[i]) == 0) {
				return true;
			}
		}
		return false;
	case Q_CORR:
		return m->has_corr && strcmp(m->corr, s->corr) == 0;
	case Q_REGION:
		return m->has_region && strcmp(m->region, s->region) == 0;
	case Q_ROOT:
		return strcmp(m->root, s->root) == 0;
	case Q_PART_RESIDUAL:
		return strcmp(m->type, s->type) == 0;
	case Q_PART_RANGE:
		return m->upd >= s->lo && m->upd <= s->hi;
	default:
		return false;
	}
}

/* Index order: the order field (updated_at_ms, or the due index's
 * next_run_at_ms, which is a running flow's lease deadline), then the id
 * as the index key orders it (length first, then bytes). */
static bool desc_sort, due_sort;
static int64_t okey(const struct mrec *m)
{
	return due_sort ? m->next : m->upd;
}
static int mcmp(const void *x, const void *y)
{
	const struct mrec *a = x, *b = y;
	size_t la = strlen(a->id), lb = strlen(b->id);
	int c = okey(a) != okey(b) ? (okey(a) < okey(b) ? -1 : 1)
	        : la != lb         ? (la < lb ? -1 : 1)
	                           : strcmp(a->id, b->id);
	return desc_sort ? -c : c;
}

static size_t expected(const struct spec *s, const struct mrec *all, size_t n,
                       struct mrec *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (matches(s, &all[i])) {
			out[k++] = all[i];
		}
	}
	desc_sort = s->desc;
	due_sort = s->kind == Q_DUE;
	qsort(out, k, sizeof *out, mcmp);
	for (size_t i = 0; due_sort && i < k; i++) {
		/* running flows: the due order is the lease deadline */
		assert_true(out[i].has_next);
		if (strcmp(s->states[0], "running") == 0) {
			assert_true(out[i].has_lease &&
			            out[i].lease == out[i].next);
		}
	}
	return k;
}

static void fingerprint(const char *text, uint8_t fp[FLOW_CURSOR_FP_BYTES])
{
	struct fql_query *q = malloc(sizeof *q);
	struct fql_diag d;
	struct wbuf b;
	assert_int_equal(fql_parse(text, strlen(text), q, &d), 0);
	assert_int_equal(fql_bind(q, NULL, &d), 0);
	wbuf_init(&b);
	assert_int_equal(fql_exec_canonical(q, &b), 0);
	flow_cursor_fingerprint(b.data, b.len, fp);
	wbuf_free(&b);
	free(q);
}

/* One page: the ids appended to ids[*n]; the next resume tail in
 * resume (len 0: the end). Returns scanned_entries. */
static int64_t page(struct w *w, const char *text, uint8_t *resume,
                    size_t *rlen, char (*ids)[16], size_t *n, size_t cap,
                    int64_t *residual)
{
	struct fbody b;
	struct freply r;
	struct fsnp_val recs, rec, idv, hm, rs, usage;
	struct fsnp_iter it;
	int64_t scanned;

	fb_begin(&b);
	fb_str(&b, "query", text);
	if (*rlen > 0) {
		fb_key(&b, "resume");
		fsnp_w_bin(&b.w, resume, *rlen);
	}
	run(w, FSNP_OP_FLOW_QUERY, &b, &r);
	assert_int_equal(r.status, 0);
	if (fsnp_map_get(&r.v, "error", &rec) == 0) {
		fail_msg("query failed: %s", text);
	}
	recs = fr_get(&r.v, "records");
	fsnp_iter_init(&it, &recs);
	while (fsnp_iter_next(&it, NULL, &rec)) {
		assert_true(*n < cap);
		idv = fr_get(&rec, "id");
		copy(ids[(*n)++], 16, idv.as.bin);
	}
	usage = fr_get(&r.v, "usage");
	scanned = fr_int(&usage, "scanned_entries");
	*residual = fr_int(&usage, "residual_checks");
	assert_true(fr_int(&usage, "hydrated_records") <= scanned);
	assert_true(fr_int(&usage, "result_records") <= scanned ||
	            recs.as.count == 0);
	hm = fr_get(&r.v, "has_more");
	*rlen = 0;
	if (hm.tag == FSNP_TRUE) {
		/* Through a cursor: sealed, then opened again. */
		uint8_t fp[FLOW_CURSOR_FP_BYTES], nonce[12] = {1};
		struct wbuf tok;
		rs = fr_get(&r.v, "resume");
		fingerprint(text, fp);
		wbuf_init(&tok);
		assert_int_equal(flow_cursor_encode(ckey, nonce, fp, w->now,
		                                    60000, rs.as.bin.ptr,
		                                    rs.as.bin.len, &tok),
		                 0);
		assert_int_equal(
		    flow_cursor_decode(ckey, (const char *)tok.data, tok.len,
		                       fp, w->now + 1, resume, rlen),
		    FLOW_CURSOR_OK);
		assert_true(*rlen > 0);
		wbuf_free(&tok);
	}
	freply_free(&r);
	return scanned;
}

static void check_queries(struct w *w, int nq)
{
	static struct mrec all[MAXR], exp[MAXR];
	static char ids[MAXR * 2][16];
	uint8_t resume[FLOW_CURSOR_RESUME_MAX];
	int64_t tmin = INT64_MAX, tmax = 0;
	size_t n = model(w, all), total = 0, multi_page = 0;

	for (size_t i = 0; i < n; i++) {
		tmin = all[i].upd < tmin ? all[i].upd : tmin;
		tmax = all[i].upd > tmax ? all[i].upd : tmax;
	}
	for (int k = 0; k < nq; k++) {
		struct spec s;
		size_t got = 0, rlen = 0, ne;
		gen(w, &s, tmin, tmax);
		ne = expected(&s, all, n, exp);
		for (int pg = 0; pg < 200; pg++) {
			int64_t residual = 0;
			size_t before = got;
			int64_t scanned = page(w, s.text, resume, &rlen, ids,
			                       &got, MAXR * 2, &residual);
			(void)before;
			if (residual == 0) {
				/* O(LIMIT): each range reads at most one page
				 * of limit + 1 entries (a root's range, and
				 * the root itself). */
				assert_true(
				    scanned <=
				    (int64_t)(s.nstates ? s.nstates : 1) *
				            (s.kind == Q_DUE ? 3 : 1) *
				            (s.limit + 1) +
				        (s.kind == Q_ROOT));
			}
			if (rlen == 0) {
				break;
			}
		}
		if (got != ne) {
			fail_msg("%s: %zu records, expected %zu", s.text, got,
			         ne);
		}
		total += ne;
		multi_page += ne > s.limit;
		for (size_t i = 0; i < ne; i++) {
			if (strcmp(ids[i], exp[i].id) != 0) {
				fail_msg("%s: record %zu is %s, expected %s",
				         s.text, i, ids[i], exp[i].id);
			}
		}
	}
	/* The queries were not trivially empty, and many needed cursors. */
	assert_true(n > 30);
	assert_true(total > (size_t)nq);
	assert_true(multi_page > (size_t)nq / 4);
}

/* Paging while other records change: no duplicates, and every record
 * that matched at the start and did not change is returned. */
static void check_live(struct w *w, int nq)
{
	static struct mrec start[MAXR], end[MAXR], exp[MAXR];
	static char ids[MAXR * 4][16];
	uint8_t resume[FLOW_CURSOR_RESUME_MAX];

	for (int k = 0; k < nq; k++) {
		struct spec s;
		size_t n0 = model(w, start), got = 0, rlen = 0, ne, n1;
		gen(w, &s, 0, 0);
		if (s.kind == Q_PART_RANGE) {
			s.kind = Q_PART_RESIDUAL;
			gen(w, &s, 0, 0);
			if (s.kind == Q_PART_RANGE) {
				continue;
			}
		}
		ne = expected(&s, start, n0, exp);
		for (int pg = 0; pg < 400; pg++) {
			int64_t residual;
			page(w, s.text, resume, &rlen, ids, &got, MAXR * 4,
			     &residual);
			if (rlen == 0) {
				break;
			}
			step(w);
			step(w);
		}
		for (size_t i = 0; i < got; i++) {
			for (size_t j = i + 1; j < got; j++) {
				if (strcmp(ids[i], ids[j]) == 0) {
					fail_msg("%s: %s returned twice",
					         s.text, ids[i]);
				}
			}
		}
		n1 = model(w, end);
		for (size_t i = 0; i < ne; i++) {
			bool unchanged = false, seen = false;
			for (size_t j = 0; j < n1; j++) {
				if (strcmp(end[j].id, exp[i].id) == 0 &&
				    end[j].version == exp[i].version) {
					unchanged = true;
				}
			}
			for (size_t j = 0; j < got && !seen; j++) {
				seen = strcmp(ids[j], exp[i].id) == 0;
			}
			if (unchanged && !seen) {
				fail_msg("%s: unchanged %s was skipped", s.text,
				         exp[i].id);
			}
		}
	}
}

static int64_t query_count(struct w *w, const char *text)
{
	struct fbody b;
	struct freply r;
	int64_t n;
	fb_begin(&b);
	fb_str(&b, "query", text);
	run(w, FSNP_OP_FLOW_QUERY, &b, &r);
	assert_int_equal(r.status, 0);
	n = fr_int(&r.v, "count");
	freply_free(&r);
	return n;
}

static void check_counts_and_points(struct w *w)
{
	static struct mrec all[MAXR];
	size_t n = model(w, all);
	char text[256];
	for (int p = 0; p < 2; p++) {
		for (int t = 0; t < 2; t++) {
			int64_t total = 0;
			for (int s = 0; s < 6; s++) {
				int64_t want = 0;
				for (size_t i = 0; i < n; i++) {
					want += strcmp(all[i].part, parts[p]) ==
					            0 &&
					        strcmp(all[i].type, types[t]) ==
					            0 &&
					        strcmp(all[i].state,
					               states[s]) == 0;
				}
				snprintf(text, sizeof text,
				         "FROM runs WHERE partition_key = '%s' "
				         "AND type = '%s' AND state = '%s' "
				         "RETURN COUNT",
				         parts[p], types[t], states[s]);
				assert_int_equal(query_count(w, text), want);
				total += want;
			}
			snprintf(
			    text, sizeof text,
			    "FROM runs WHERE partition_key = '%s' AND type "
			    "= '%s' RETURN COUNT",
			    parts[p], types[t]);
			assert_int_equal(query_count(w, text), total);
		}
	}
	/* Point reads, partitioned and auto-partitioned. */
	for (int i = 0; i < NIDS; i++) {
		char id[16];
		struct fbody b;
		struct freply r;
		struct fsnp_val recs;
		idstr(i, id);
		if (w->part[i] < 0) {
			continue;
		}
		if (parts[w->part[i]][0] != '\0') {
			snprintf(text, sizeof text,
			         "FROM runs WHERE run_id = '%s' AND "
			         "partition_key = '%s' RETURN RECORD (run_id, "
			         "state)",
			         id, parts[w->part[i]]);
		} else {
			snprintf(text, sizeof text,
			         "FROM runs WHERE run_id = '%s' RETURN RECORD",
			         id);
		}
		fb_begin(&b);
		fb_str(&b, "query", text);
		run(w, FSNP_OP_FLOW_QUERY, &b, &r);
		assert_int_equal(r.status, 0);
		if (fsnp_map_get(&r.v, "error", &recs) == 0) {
			struct fsnp_val code = fr_get(&recs, "code");
			fail_msg("%s: %.*s", text, (int)code.as.bin.len,
			         (const char *)code.as.bin.ptr);
		}
		recs = fr_get(&r.v, "records");
		assert_int_equal(recs.as.count, 1);
		freply_free(&r);
	}
}

/* Event history pages (both directions, LIMIT 2, resumed) against
 * FLOW.HISTORY's events. */
static void check_history(struct w *w)
{
	for (int i = 0; i < NIDS; i += 3) {
		char id[16], text[256], want[64][48], got[64][48];
		size_t nw = 0;
		struct fbody b;
		struct freply r;
		struct fsnp_iter it;
		struct fsnp_val ev, eid;
		const char *pk;
		if (w->part[i] < 0) {
			continue;
		}
		idstr(i, id);
		pk = parts[w->part[i]];
		fb_begin(&b);
		fb_str(&b, "id", id);
		with_part(w, &b, i);
		run(w, FSNP_OP_FLOW_HISTORY, &b, &r);
		assert_int_equal(r.status, 0);
		fsnp_iter_init(&it, &r.v);
		while (fsnp_iter_next(&it, NULL, &ev) && nw < 64) {
			struct fsnp_iter jt;
			fsnp_iter_init(&jt, &ev);
			assert_true(fsnp_iter_next(&jt, NULL, &eid));
			copy(want[nw++], 48, eid.as.bin);
		}
		freply_free(&r);
		assert_true(nw >= 1);
		for (int desc = 0; desc < 2; desc++) {
			uint8_t resume[16];
			size_t rlen = 0, ng = 0;
			snprintf(
			    text, sizeof text,
			    "FROM events WHERE run_id = '%s'%s%s%s ORDER BY "
			    "event_id %s LIMIT 2 RETURN RECORDS",
			    id, pk[0] ? " AND partition_key = '" : "", pk,
			    pk[0] ? "'" : "", desc ? "DESC" : "ASC");
			for (int pg = 0; pg < 64; pg++) {
				struct fsnp_val recs, rec, hm, rs, f;
				fb_begin(&b);
				fb_str(&b, "query", text);
				if (rlen > 0) {
					fb_key(&b, "resume");
					fsnp_w_bin(&b.w, resume, rlen);
				}
				run(w, FSNP_OP_FLOW_QUERY, &b, &r);
				assert_int_equal(r.status, 0);
				recs = fr_get(&r.v, "records");
				fsnp_iter_init(&it, &recs);
				while (fsnp_iter_next(&it, NULL, &rec)) {
					assert_true(ng < 64);
					eid = fr_get(&rec, "event_id");
					copy(got[ng++], 48, eid.as.bin);
					f = fr_get(&rec, "fields");
					assert_int_equal(f.tag, FSNP_MAP);
				}
				hm = fr_get(&r.v, "has_more");
				rlen = 0;
				if (hm.tag == FSNP_TRUE) {
					rs = fr_get(&r.v, "resume");
					assert_int_equal(rs.as.bin.len, 8);
					memcpy(resume, rs.as.bin.ptr, 8);
					rlen = 8;
				}
				freply_free(&r);
				if (rlen == 0) {
					break;
				}
			}
			assert_int_equal(ng, nw);
			for (size_t k = 0; k < nw; k++) {
				assert_string_equal(
				    got[k], want[desc ? nw - 1 - k : k]);
			}
		}
	}
}

static void run_seed(uint64_t seed)
{
	struct w *w = calloc(1, sizeof *w);
	ftdb_open(&w->t);
	w->now = 1000000;
	w->rng = seed * 0x9E3779B97F4A7C15ull + 1;
	for (int i = 0; i < NIDS; i++) {
		w->part[i] = -1;
	}
	for (int s = 0; s < 600; s++) {
		step(w);
	}
	check_queries(w, 120);
	check_counts_and_points(w);
	check_history(w);
	check_live(w, 25);
	tdb_close(&w->t);
	free(w);
}

static void test_model_seed_1(void **state)
{
	(void)state;
	run_seed(1);
}

static void test_model_seed_2(void **state)
{
	(void)state;
	run_seed(2);
}

/* Plans: which index, covering or hydrating, refusals and EXPLAIN. */
static void plan_of(const char *text, struct fql_query *q, struct fql_plan *p)
{
	struct fql_diag d;
	if (fql_parse(text, strlen(text), q, &d) != 0) {
		fail_msg("%s: %s", text, fql_code_name(d.code));
	}
	assert_int_equal(fql_bind(q, NULL, &d), 0);
	fql_plan(q, p);
}

static void test_plans(void **state)
{
	struct fql_query *q = malloc(sizeof *q), *q2 = malloc(sizeof *q2);
	struct fql_plan p, p2;
	struct fql_diag d;
	struct wbuf a, b;
	struct fsnp_writer wa, wb;
	(void)state;

	plan_of(
	    "FROM runs WHERE partition_key = 'p' AND type = 't' AND state "
	    "= 'queued' ORDER BY updated_at_ms DESC LIMIT 10 RETURN RECORDS "
	    "(run_id, version, updated_at_ms, state)",
	    q, &p);
	assert_int_equal(p.access, FQL_ACCESS_RANGE);
	assert_string_equal(p.index, "flow_runs_partition_type_state_updated");
	assert_string_equal(p.source, "covering_index");
	assert_false(p.requires_hydration);

	plan_of("FROM runs WHERE partition_key = 'p' AND type = 't' AND state "
	        "= 'queued' ORDER BY updated_at_ms LIMIT 10 RETURN RECORDS",
	        q, &p);
	assert_string_equal(p.source, "query_row");
	assert_true(p.requires_hydration);

	plan_of("FROM runs WHERE partition_key = 'p' AND priority = 3 ORDER BY "
	        "updated_at_ms LIMIT 10 RETURN RECORDS",
	        q, &p);
	assert_string_equal(p.index, "flow_runs_partition_updated");
	assert_int_equal(p.nresidual, 1);

	/* No index orders by priority: refused, value-free. */
	plan_of("FROM runs WHERE partition_key = 'secret-tenant' AND type = "
	        "'t' ORDER BY priority LIMIT 10 RETURN RECORDS",
	        q, &p);
	assert_int_equal(p.access, FQL_ACCESS_NONE);
	assert_string_equal(p.suggest_order, "priority");
	fql_plan_diag(&p, &d);
	assert_int_equal(d.code, FQL_QUERY_NO_BOUNDED_PLAN);
	wbuf_init(&a);
	fsnp_w_init(&wa, &a);
	fql_plan_write(q, &p, &wa);
	fql_diag_write(&d, &wa);
	fql_plan_error_write(q, &p, &wa);
	assert_int_equal(fsnp_w_finish(&wa), 0);
	assert_null(memmem(a.data, a.len, "secret-tenant", 13));
	assert_non_null(memmem(a.data, a.len, "suggested_index", 15));
	wbuf_free(&a);
	/* The error's context names metadata fields only by placeholder. */
	plan_of("FROM runs WHERE partition_key = 'p' AND attribute.secret_name "
	        "= 'v' ORDER BY priority LIMIT 5 RETURN RECORDS",
	        q, &p);
	wbuf_init(&a);
	fsnp_w_init(&wa, &a);
	fql_plan_error_write(q, &p, &wa);
	assert_int_equal(fsnp_w_finish(&wa), 0);
	assert_null(memmem(a.data, a.len, "secret_name", 11));
	assert_non_null(memmem(a.data, a.len, "attribute.<name>", 16));
	wbuf_free(&a);

	/* Counting needs a type. */
	plan_of("FROM runs WHERE partition_key = 'p' AND state = 'queued' "
	        "RETURN COUNT",
	        q, &p);
	assert_int_equal(p.access, FQL_ACCESS_NONE);

	/* EXPLAIN is deterministic and the same for other values. */
	plan_of("EXPLAIN FROM runs WHERE partition_key = 'p1' AND "
	        "attribute.region = 'eu' ORDER BY updated_at_ms LIMIT 5 RETURN "
	        "RECORDS",
	        q, &p);
	plan_of("EXPLAIN FROM runs WHERE partition_key = 'p2' AND "
	        "attribute.region = 'us' ORDER BY updated_at_ms LIMIT 5 RETURN "
	        "RECORDS",
	        q2, &p2);
	assert_string_equal(p.index, "flow_runs_partition_attribute_updated");
	wbuf_init(&a);
	wbuf_init(&b);
	fsnp_w_init(&wa, &a);
	fsnp_w_init(&wb, &b);
	fql_plan_write(q, &p, &wa);
	fql_plan_write(q2, &p2, &wb);
	assert_int_equal(fsnp_w_finish(&wa), 0);
	assert_int_equal(fsnp_w_finish(&wb), 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_null(memmem(a.data, a.len, "'eu'", 4));
	wbuf_free(&a);
	wbuf_free(&b);

	/* A cursor resumes the query that issued it: the cursor clause is
	 * not part of the fingerprint input, the values are. */
	{
		static const char *const t1 =
		    "FROM runs WHERE partition_key = 'p' AND type = 't' AND "
		    "state = 'queued' ORDER BY updated_at_ms LIMIT 3 RETURN "
		    "RECORDS";
		static const char *const t2 =
		    "FROM runs WHERE partition_key = 'p' AND type = 't' AND "
		    "state = 'queued' ORDER BY updated_at_ms LIMIT 3 CURSOR @c "
		    "RETURN RECORDS";
		struct fbody pb;
		struct fsnp_val params;
		struct wbuf c1, c2;
		fb_begin(&pb);
		fb_str(&pb, "c", "fqc1_AAAAAAAAAAAAAAAAAAAA");
		fb_end(&pb);
		assert_int_equal(
		    fsnp_value_decode_body(pb.b.data, pb.b.len, NULL, &params),
		    0);
		assert_int_equal(fql_parse(t1, strlen(t1), q, &d), 0);
		assert_int_equal(fql_bind(q, NULL, &d), 0);
		assert_int_equal(fql_parse(t2, strlen(t2), q2, &d), 0);
		assert_int_equal(fql_bind(q2, &params, &d), 0);
		wbuf_init(&c1);
		wbuf_init(&c2);
		assert_int_equal(fql_exec_canonical(q, &c1), 0);
		assert_int_equal(fql_exec_canonical(q2, &c2), 0);
		assert_int_equal(c1.len, c2.len);
		assert_memory_equal(c1.data, c2.data, c1.len);
		wbuf_free(&c1);
		wbuf_free(&c2);
		fb_free(&pb);
	}
	free(q);
	free(q2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plans),
	    cmocka_unit_test(test_model_seed_1),
	    cmocka_unit_test(test_model_seed_2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
