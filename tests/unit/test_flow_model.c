/* flow/ against a simple in-memory model: thousands of seeded random
 * commands (creates, claims with reclaims of expired leases, completes,
 * fails, retries, transitions, cancels, lease extensions, signals), with
 * stale lease tokens and fencing tokens mixed in. Two stores apply the same
 * entries and must answer byte for byte alike (determinism); replaying an
 * applied entry changes nothing; an exported group imports into a fresh
 * store with every flow intact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "tests/unit/flow_test_util.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define G 1
#define NIDS 40
#define STEPS 5000
#define RETRIES 2
#define BACKOFF 100

struct mflow {
	bool exists;
	char id[16];
	char part[32];
	char state[16];
	char run_state[16];                             /* "" = nil */
	char token[64];                                 /* "" = not leased */
	int64_t fencing, version, attempts, prio, next; /* next -1 = nil */
	int64_t retry_fencing;
};

struct issued {
	int id;
	char token[64];
	int64_t fencing;
};

struct model {
	struct mflow f[NIDS];
	struct issued iss[STEPS * 5];
	size_t niss;
	uint64_t now;
	uint64_t rng;
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static unsigned pick(struct model *m, unsigned n)
{
	return (unsigned)(rnd(m) % n);
}

static bool terminal(const char *s)
{
	return !strcmp(s, "completed") || !strcmp(s, "failed") ||
	       !strcmp(s, "cancelled");
}

/* Both stores, the model, and the last applied entry (for replays). */
struct world {
	struct tdb a, b;
	struct model m;
	uint8_t *last_cmd;
	size_t last_len;
	uint64_t last_index;
	uint64_t last_now;
	unsigned checked_claims;
	unsigned stale_rejected;
};

/* Runs a request on both stores; they must agree. Reply from a. */
static void both(struct world *w, uint16_t op, struct fbody *b,
                 struct freply *r)
{
	struct freply r2;
	uint64_t seed = rnd(&w->m);

	fb_end(b);
	fl_run(&w->a, G, w->m.now, op, b, seed, r);
	fl_run(&w->b, G, w->m.now, op, b, seed, &r2);
	assert_int_equal(r->len, r2.len);
	assert_memory_equal(r->buf, r2.buf, r->len);
	freply_free(&r2);
	if (!flow_opcode_is_read(op)) {
		struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, seed};
		struct flow_err err;
		free(w->last_cmd);
		w->last_cmd = NULL;
		if (flow_cmd_encode(op, b->b.data, b->b.len, &meta,
		                    &w->last_cmd, &w->last_len, &err) == 0) {
			w->last_index = w->a.next_index[G] - 1;
			w->last_now = w->m.now;
		}
	}
	fb_free(b);
}

static void expect(const struct freply *r, const char *err)
{
	if (err == NULL) {
		fr_ok(r);
	} else {
		fr_err(r, 1, err);
	}
}

static void m_create(struct world *w)
{
	struct model *m = &w->m;
	unsigned i = pick(m, NIDS);
	struct mflow *f = &m->f[i];
	int64_t prio = pick(m, 3), delay = pick(m, 4) == 0 ? pick(m, 500) : 0;
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "type", "job");
	fb_int(&b, "priority", prio);
	fb_int(&b, "run_at_ms", (int64_t)m->now + delay);
	both(w, FSNP_OP_FLOW_CREATE, &b, &r);
	if (f->exists) {
		expect(&r, "ERR flow already exists");
	} else {
		expect(&r, NULL);
		f->exists = true;
		strcpy(f->state, "queued");
		f->run_state[0] = '\0';
		f->token[0] = '\0';
		f->fencing = 0;
		f->version = 1;
		f->attempts = 0;
		f->prio = prio;
		f->next = (int64_t)m->now + delay;
		f->retry_fencing = -1;
	}
	freply_free(&r);
}

struct mc {
	int i;
	int64_t prio, next;
};

static int mc_cmp(const void *pa, const void *pb, void *arg)
{
	const struct mc *a = pa, *b = pb;
	struct model *m = arg;
	int c;

	if (a->prio != b->prio) {
		return a->prio > b->prio ? -1 : 1;
	}
	if (a->next != b->next) {
		return a->next < b->next ? -1 : 1;
	}
	c = strcmp(m->f[a->i].part, m->f[b->i].part);
	return c != 0 ? c : strcmp(m->f[a->i].id, m->f[b->i].id);
}

static void msort(struct mc *v, size_t n, struct model *m)
{
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0 && mc_cmp(&v[j - 1], &v[j], m) > 0;
		     j--) {
			struct mc t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	}
}

static void m_claim(struct world *w)
{
	struct model *m = &w->m;
	int64_t limit = 1 + pick(m, 5), lease_ms = 100 + pick(m, 900);
	char worker[8];
	struct mc norm[NIDS], rec[NIDS], order[NIDS];
	size_t nn = 0, nr = 0, no = 0, pn = 0, pr = 0, quota = 0;
	struct fbody b;
	struct freply r;
	struct fsnp_iter it;
	struct fsnp_val e;

	snprintf(worker, sizeof worker, "w%u", pick(m, 4));
	for (int i = 0; i < NIDS; i++) {
		struct mflow *f = &m->f[i];
		if (!f->exists || terminal(f->state) || f->next < 0 ||
		    f->next > (int64_t)m->now) {
			continue;
		}
		struct mc c = {i, f->prio, f->next};
		if (!strcmp(f->state, "running")) {
			rec[nr++] = c;
		} else {
			norm[nn++] = c;
		}
	}
	msort(norm, nn, m);
	msort(rec, nr, m);
	if (limit > 1) {
		quota = ((size_t)limit * 25 + 99) / 100;
	}
	while (no < quota && pr < nr) {
		order[no++] = rec[pr++];
	}
	while (no < (size_t)limit && pn < nn) {
		order[no++] = norm[pn++];
	}
	while (no < (size_t)limit && pr < nr) {
		order[no++] = rec[pr++];
	}
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", worker);
	fb_int(&b, "limit", limit);
	fb_int(&b, "lease_ms", lease_ms);
	fb_str(&b, "return", "jobs_compact");
	both(w, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_ARRAY);
	if (r.v.as.count != no) {
		fprintf(stderr, "claim: got %u, model %zu\n", r.v.as.count, no);
	}
	assert_int_equal(r.v.as.count, no);
	fsnp_iter_init(&it, &r.v);
	for (size_t k = 0; k < no; k++) {
		struct mflow *f = &m->f[order[k].i];
		struct fsnp_iter jt;
		struct fsnp_val id, pk, tok, fen;
		int64_t fe;

		assert_true(fsnp_iter_next(&it, NULL, &e));
		fsnp_iter_init(&jt, &e);
		assert_true(fsnp_iter_next(&jt, NULL, &id));
		assert_true(fsnp_iter_next(&jt, NULL, &pk));
		assert_true(fsnp_iter_next(&jt, NULL, &tok));
		assert_true(fsnp_iter_next(&jt, NULL, &fen));
		if (!fsnp_bytes_eq(id.as.bin, f->id)) {
			fprintf(stderr, "claim %zu: got %.*s, model %s\n", k,
			        (int)id.as.bin.len, (const char *)id.as.bin.ptr,
			        f->id);
		}
		assert_true(fsnp_bytes_eq(id.as.bin, f->id));
		assert_true(fsnp_bytes_eq(pk.as.bin, f->part));
		if (!strcmp(f->state, "running")) {
			if (f->run_state[0] == '\0') {
				strcpy(f->run_state, "queued");
			}
		} else {
			strcpy(f->run_state, f->state);
		}
		strcpy(f->state, "running");
		f->fencing++;
		f->version++;
		f->next = (int64_t)m->now + lease_ms;
		snprintf(f->token, sizeof f->token, "%s:%llu:%lld", worker,
		         (unsigned long long)m->now, (long long)f->fencing);
		assert_int_equal(fsnp_val_i64(&fen, &fe), 0);
		assert_int_equal(fe, f->fencing);
		assert_true(fsnp_bytes_eq(tok.as.bin, f->token));
		m->iss[m->niss].id = order[k].i;
		strcpy(m->iss[m->niss].token, f->token);
		m->iss[m->niss].fencing = f->fencing;
		m->niss++;
		w->checked_claims++;
	}
	freply_free(&r);
}

/* A lease to present for flow i: mostly the current one, else an old
 * one (stale) or a made-up one. */
static void pick_lease(struct model *m, int i, char *tok, int64_t *fen)
{
	struct mflow *f = &m->f[i];
	unsigned k = pick(m, 10);

	if (k < 6 && f->token[0] != '\0') {
		strcpy(tok, f->token);
		*fen = f->fencing;
		return;
	}
	for (size_t j = m->niss; k < 9 && j > 0; j--) {
		if (m->iss[j - 1].id == i && pick(m, 2) == 0) {
			strcpy(tok, m->iss[j - 1].token);
			*fen = m->iss[j - 1].fencing;
			return;
		}
	}
	snprintf(tok, 64, "w9:%u:%lld", pick(m, 5000), (long long)f->fencing);
	*fen = f->fencing;
}

static bool lease_ok(const struct mflow *f, const char *tok, int64_t fen)
{
	return !strcmp(f->state, "running") && f->token[0] != '\0' &&
	       !strcmp(f->token, tok) && f->fencing == fen;
}

static void clear_lease(struct mflow *f)
{
	f->token[0] = '\0';
}

static void m_finish(struct world *w, bool complete)
{
	struct model *m = &w->m;
	int i = (int)pick(m, NIDS);
	struct mflow *f = &m->f[i];
	const char *to = complete ? "completed" : "failed";
	char tok[64];
	int64_t fen;
	struct fbody b;
	struct freply r;
	const char *want = NULL;

	pick_lease(m, i, tok, &fen);
	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "lease_token", tok);
	fb_int(&b, "fencing_token", fen);
	both(w, complete ? FSNP_OP_FLOW_COMPLETE : FSNP_OP_FLOW_FAIL, &b, &r);
	if (!f->exists) {
		want = "ERR flow not found";
	} else if (!strcmp(f->state, to) && f->fencing == fen) {
		want = NULL;
	} else if (!lease_ok(f, tok, fen)) {
		want = "ERR stale flow lease";
		w->stale_rejected++;
	} else {
		strcpy(f->state, to);
		f->version++;
		clear_lease(f);
		f->next = -1;
	}
	expect(&r, want);
	freply_free(&r);
}

static void m_retry(struct world *w)
{
	struct model *m = &w->m;
	int i = (int)pick(m, NIDS);
	struct mflow *f = &m->f[i];
	char tok[64];
	int64_t fen;
	struct fbody b;
	struct freply r;
	const char *want = NULL;

	pick_lease(m, i, tok, &fen);
	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "lease_token", tok);
	fb_int(&b, "fencing_token", fen);
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "max_retries");
	fsnp_w_i64(&b.w, RETRIES);
	fsnp_w_key(&b.w, "backoff");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "kind");
	fsnp_w_str(&b.w, "fixed");
	fsnp_w_key(&b.w, "base_ms");
	fsnp_w_i64(&b.w, BACKOFF);
	fsnp_w_key(&b.w, "jitter_pct");
	fsnp_w_i64(&b.w, 0);
	fsnp_w_map_end(&b.w);
	fsnp_w_map_end(&b.w);
	both(w, FSNP_OP_FLOW_RETRY, &b, &r);
	if (!f->exists) {
		want = "ERR flow not found";
	} else if (strcmp(f->state, "running") != 0 && f->fencing == fen &&
	           f->retry_fencing == fen) {
		want = NULL;
	} else if (!lease_ok(f, tok, fen)) {
		want = "ERR stale flow lease";
		w->stale_rejected++;
	} else {
		bool sched = ++f->attempts <= RETRIES;
		if (sched) {
			strcpy(f->state,
			       f->run_state[0] ? f->run_state : "queued");
			f->next = (int64_t)m->now + BACKOFF;
		} else {
			strcpy(f->state, "failed");
			f->next = -1;
		}
		f->version++;
		clear_lease(f);
		f->run_state[0] = '\0';
		f->retry_fencing = f->fencing;
	}
	expect(&r, want);
	freply_free(&r);
}

static void m_transition(struct world *w)
{
	struct model *m = &w->m;
	int i = (int)pick(m, NIDS);
	struct mflow *f = &m->f[i];
	static const char *const states[] = {"queued", "ready", "running"};
	const char *to = pick(m, 2) ? "queued" : "ready";
	const char *from = pick(m, 5) ? f->state : states[pick(m, 3)];
	char tok[64];
	bool with_tok = f->token[0] != '\0' ? pick(m, 8) != 0 : pick(m, 8) == 0;
	int64_t fen;
	struct fbody b;
	struct freply r;
	const char *want = NULL;

	if (!f->exists) {
		from = "queued";
	}
	pick_lease(m, i, tok, &fen);
	if (pick(m, 6) == 0) {
		fen = f->fencing + 1;
	}
	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "from_state", from);
	fb_str(&b, "to_state", to);
	if (with_tok) {
		fb_str(&b, "lease_token", tok);
	}
	fb_int(&b, "fencing_token", fen);
	both(w, FSNP_OP_FLOW_TRANSITION, &b, &r);
	if (!f->exists) {
		want = "ERR flow not found";
	} else if (!strcmp(f->state, to) && f->token[0] == '\0' &&
	           f->fencing == fen) {
		want = NULL;
	} else if (strcmp(f->state, from) != 0) {
		want = "ERR flow wrong state";
	} else if (terminal(f->state)) {
		want = "ERR flow is terminal; use FLOW.REWIND";
	} else if (f->fencing != fen ||
	           (f->token[0] ? !with_tok || strcmp(tok, f->token) != 0
	                        : with_tok)) {
		want = "ERR stale flow lease";
		w->stale_rejected++;
	} else {
		strcpy(f->state, to);
		f->version++;
		clear_lease(f);
		f->next = (int64_t)m->now;
	}
	expect(&r, want);
	freply_free(&r);
}

static void m_cancel(struct world *w)
{
	struct model *m = &w->m;
	int i = (int)pick(m, NIDS);
	struct mflow *f = &m->f[i];
	char tok[64];
	bool with_tok = f->token[0] != '\0' ? pick(m, 8) != 0 : pick(m, 8) == 0;
	int64_t fen;
	struct fbody b;
	struct freply r;
	const char *want = NULL;

	pick_lease(m, i, tok, &fen);
	fb_begin(&b);
	fb_str(&b, "id", f->id);
	if (with_tok) {
		fb_str(&b, "lease_token", tok);
	}
	fb_int(&b, "fencing_token", fen);
	both(w, FSNP_OP_FLOW_CANCEL, &b, &r);
	if (!f->exists) {
		want = "ERR flow not found";
	} else if (f->fencing != fen) {
		want = "ERR stale flow lease";
	} else if (terminal(f->state)) {
		want = "ERR flow is terminal; use FLOW.REWIND";
	} else if (f->token[0] ? !with_tok || strcmp(tok, f->token) != 0
	                       : with_tok) {
		want = "ERR stale flow lease";
	} else {
		strcpy(f->state, "cancelled");
		f->version++;
		clear_lease(f);
		f->next = -1;
	}
	expect(&r, want);
	freply_free(&r);
}

static void m_extend(struct world *w)
{
	struct model *m = &w->m;
	int i = (int)pick(m, NIDS);
	struct mflow *f = &m->f[i];
	char tok[64];
	int64_t fen, lease_ms = 100 + pick(m, 900);
	struct fbody b;
	struct freply r;

	pick_lease(m, i, tok, &fen);
	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "lease_token", tok);
	fb_int(&b, "fencing_token", fen);
	fb_int(&b, "lease_ms", lease_ms);
	fb_str(&b, "return", "ok_on_success");
	both(w, FSNP_OP_FLOW_EXTEND_LEASE, &b, &r);
	if (!f->exists) {
		expect(&r, "ERR flow not found");
	} else if (!lease_ok(f, tok, fen)) {
		expect(&r, "ERR stale flow lease");
		w->stale_rejected++;
	} else {
		expect(&r, NULL);
		f->version++;
		f->next = (int64_t)m->now + lease_ms;
	}
	freply_free(&r);
}

static void m_signal(struct world *w)
{
	struct model *m = &w->m;
	struct mflow *f = &m->f[pick(m, NIDS)];
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "id", f->id);
	fb_str(&b, "signal", "tick");
	both(w, FSNP_OP_FLOW_SIGNAL, &b, &r);
	if (!f->exists) {
		expect(&r, "ERR flow not found");
	} else {
		expect(&r, NULL);
		f->version++;
	}
	freply_free(&r);
}

/* Every flow as the store has it equals the model. */
static void check_all(struct tdb *t, struct model *m)
{
	char buf[256];

	for (int i = 0; i < NIDS; i++) {
		struct mflow *f = &m->f[i];
		struct fbody b;
		struct freply r;

		fb_begin(&b);
		fb_str(&b, "id", f->id);
		fb_end(&b);
		fl_run(t, G, m->now, FSNP_OP_FLOW_GET, &b, 0, &r);
		fb_free(&b);
		if (!f->exists) {
			assert_int_equal(r.v.tag, FSNP_NIL);
			freply_free(&r);
			continue;
		}
		assert_string_equal(fr_str(&r.v, "state", buf), f->state);
		assert_int_equal(fr_int(&r.v, "version"), f->version);
		assert_int_equal(fr_int(&r.v, "fencing_token"), f->fencing);
		assert_int_equal(fr_int(&r.v, "attempts"), f->attempts);
		if (f->next < 0) {
			assert_true(fr_is_nil(&r.v, "next_run_at_ms"));
		} else {
			assert_int_equal(fr_int(&r.v, "next_run_at_ms"),
			                 f->next);
		}
		if (f->token[0]) {
			assert_string_equal(fr_str(&r.v, "lease_token", buf),
			                    f->token);
		} else {
			assert_true(fr_is_nil(&r.v, "lease_token"));
		}
		freply_free(&r);
	}
}

/* Applying the last entry again (same index) is a no-op. */
static void replay_last(struct world *w)
{
	struct fsm_cmd fc = {w->last_cmd, w->last_len};
	struct fsm_result res = {NULL, 0};
	struct fsm_entry e = {G, w->last_index, 1, w->last_now, 1, &fc};
	uint64_t h = tdb_hash_group(&w->a, G);

	if (w->last_cmd == NULL) {
		return;
	}
	assert_int_equal(store_apply(w->a.s, &e, &res), 0);
	assert_int_equal(res.len, 0);
	assert_int_equal(tdb_hash_group(&w->a, G), h);
}

static void run_model(uint64_t seed)
{
	struct world *w = calloc(1, sizeof *w);
	char dir[600];
	uint64_t idx = 0, idx2 = 0;
	struct tdb c;

	ftdb_open(&w->a);
	ftdb_open(&w->b);
	w->m.rng = seed * 2654435761u + 1;
	w->m.now = 1000000;
	for (int i = 0; i < NIDS; i++) {
		struct mflow *f = &w->m.f[i];
		snprintf(f->id, sizeof f->id, "f%d", i);
		snprintf(
		    f->part, sizeof f->part, "__flow_auto__:%u",
		    flow_route_bucket((const uint8_t *)f->id, strlen(f->id)));
	}
	for (int step = 0; step < STEPS; step++) {
		unsigned k = pick(&w->m, 100);
		w->m.now += pick(&w->m, 4) == 0 ? pick(&w->m, 1200) : 0;
		if (k < 18) {
			m_create(w);
		} else if (k < 40) {
			m_claim(w);
		} else if (k < 50) {
			m_finish(w, true);
		} else if (k < 55) {
			m_finish(w, false);
		} else if (k < 67) {
			m_retry(w);
		} else if (k < 79) {
			m_transition(w);
		} else if (k < 84) {
			m_cancel(w);
		} else if (k < 93) {
			m_extend(w);
		} else if (k < 97) {
			m_signal(w);
		} else {
			check_all(&w->a, &w->m);
			replay_last(w);
		}
	}
	check_all(&w->a, &w->m);
	check_all(&w->b, &w->m);
	assert_true(w->checked_claims > 100);
	assert_true(w->stale_rejected > 50);
	assert_int_equal(tdb_hash_group(&w->a, G), tdb_hash_group(&w->b, G));

	/* Export / import: a fresh store has every flow. */
	snprintf(dir, sizeof dir, "%s/export", w->a.dir);
	{
		char cmd[700];
		snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(store_export(w->a.s, G, dir, &idx), 0);
	ftdb_open(&c);
	assert_int_equal(store_import(c.s, G, dir, &idx2), 0);
	assert_int_equal(idx, idx2);
	c.next_index[G] = idx2 + 1;
	check_all(&c, &w->m);
	assert_int_equal(tdb_hash_group(&c, G), tdb_hash_group(&w->a, G));
	tdb_close(&c);

	free(w->last_cmd);
	tdb_close(&w->a);
	tdb_close(&w->b);
	free(w);
}

static void test_model_seed_1(void **state)
{
	(void)state;
	run_model(1);
}

static void test_model_seed_2(void **state)
{
	(void)state;
	run_model(2);
}

static void test_model_seed_3(void **state)
{
	(void)state;
	run_model(77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model_seed_1),
	    cmocka_unit_test(test_model_seed_2),
	    cmocka_unit_test(test_model_seed_3),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
