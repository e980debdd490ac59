/* Integration: FerricFlow over FSNP on real processes. On one node (four
 * shards) and on three nodes (two shards, driven through every node, so
 * through followers that forward): the lifecycle create -> claim ->
 * complete, stale fencing refused, retry with a backoff, transition,
 * cancel, history order, signal, values, the compact claim-jobs and batch
 * requests, *_MANY batches that span shards, claims without a partition
 * fanning out over every shard in priority then due order, compact
 * flow_claim_jobs_v1, flow_record_v1 and flow_record_list_v1 replies, a
 * block_ms claim woken by a create (also on a follower), a flow failed by
 * the max_active_ms sweep, and
 * bad bodies answered status 6 naming the field on a connection that
 * keeps working, the SDK's COMMAND_EXEC forms, and ROUTE by flow id. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"

static struct harness_cluster cl;
static unsigned n_nodes;
static char prefix[32];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ftc_msg callb(struct ftc *c, uint16_t op, uint8_t flags,
                            struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, flags, b, &m), 0);
	wbuf_free(b);
	return m;
}

static struct ftc_msg call(struct ftc *c, uint16_t op, const char *fmt, ...)
{
	struct wbuf b;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	return callb(c, op, 0, &b);
}

static void ok_str(struct ftc_msg m, const char *s)
{
	if (m.status != 0) {
		char msg[512];
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("status %u: %s", m.status, msg);
	}
	if (!ftc_str_eq(&m.value, s)) {
		fail_msg("expected '%s'", s);
	}
	ftc_msg_free(&m);
}

/* Fails with the error text unless m is status 0. */
static void ok(const struct ftc_msg *m)
{
	if (m->status != 0) {
		char msg[512];
		ftc_error_text(m, msg, sizeof msg);
		fail_msg("status %u: %s", m->status, msg);
	}
}

static void err_has(struct ftc_msg m, unsigned status, const char *text)
{
	char msg[512];
	assert_int_equal(m.status, status);
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

static void name(char *out, size_t cap, const char *what)
{
	snprintf(out, cap, "%s-%s", prefix, what);
}

static void create(struct ftc *c, const char *id, const char *type,
                   const char *state)
{
	ok_str(call(c, FSNP_OP_FLOW_CREATE, "id=s type=s state=s now_ms=i", id,
	            type, state, (int64_t)now_ms()),
	       "OK");
}

/* The claimed record's lease token and fencing token. */
struct lease {
	char id[64];
	char token[128];
	int64_t fencing;
};

static void record_lease(const struct fsnp_val *rec, struct lease *l)
{
	struct fsnp_bytes b;
	assert_int_equal(rec->tag, FSNP_MAP);
	assert_int_equal(fsnp_map_bin(rec, "lease_token", &b), 0);
	assert_true(b.len < sizeof l->token);
	memcpy(l->token, b.ptr, b.len);
	l->token[b.len] = '\0';
	assert_int_equal(fsnp_map_bin(rec, "id", &b), 0);
	assert_true(b.len < sizeof l->id);
	memcpy(l->id, b.ptr, b.len);
	l->id[b.len] = '\0';
	l->fencing = ftc_map_int(rec, "fencing_token");
}

/* Claims one flow of `type` (in `state`); false when nothing was due. */
static bool claim1(struct ftc *c, const char *type, const char *state,
                   struct lease *l)
{
	struct ftc_msg m =
	    call(c, FSNP_OP_FLOW_CLAIM_DUE,
	         "type=s state=s worker=s lease_ms=i limit=i now_ms=i", type,
	         state, "w1", (int64_t)30000, (int64_t)1, (int64_t)now_ms());
	struct fsnp_iter it;
	struct fsnp_val rec;
	bool got = false;
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	fsnp_iter_init(&it, &m.value);
	if (fsnp_iter_next(&it, NULL, &rec)) {
		record_lease(&rec, l);
		got = true;
	}
	ftc_msg_free(&m);
	return got;
}

static void complete(struct ftc *c, const struct lease *l)
{
	ok_str(call(c, FSNP_OP_FLOW_COMPLETE,
	            "id=s lease_token=s fencing_token=i now_ms=i result=s",
	            l->id, l->token, l->fencing, (int64_t)now_ms(), "done"),
	       "OK");
}

static void expect_state(struct ftc *c, const char *id, const char *state)
{
	struct ftc_msg m = call(c, FSNP_OP_FLOW_GET, "id=s", id);
	assert_int_equal(m.status, 0);
	if (!ftc_map_str(&m.value, "state", state)) {
		fail_msg("flow %s is not %s", id, state);
	}
	ftc_msg_free(&m);
}

/* Every test runs through each node in turn (one on a single node). */
#define EACH_NODE(c)                                                           \
	for (unsigned node_ = 0; node_ < n_nodes; node_++)                     \
		for (int once_ =                                               \
		         (assert_int_equal(                                    \
		              ftc_connect(&c, cl.nodes[node_].fsnp), 0),       \
		          1);                                                  \
		     once_; once_ = 0, ftc_close(&c))

static void test_lifecycle(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], type[64];
		struct lease l;
		snprintf(id, sizeof id, "%s-life-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-life-t%u", prefix, node_);
		create(&c, id, type, "queued");
		expect_state(&c, id, "queued");
		assert_true(claim1(&c, type, "queued", &l));
		assert_string_equal(l.id, id);
		expect_state(&c, id, "running");
		/* A stale fencing token is refused, the flow stays leased. */
		err_has(call(&c, FSNP_OP_FLOW_COMPLETE,
		             "id=s lease_token=s fencing_token=i now_ms=i",
		             l.id, l.token, l.fencing + 1, (int64_t)now_ms()),
		        1, "stale flow lease");
		complete(&c, &l);
		expect_state(&c, id, "completed");
		/* History in order: created, claimed, completed. */
		struct ftc_msg m = call(&c, FSNP_OP_FLOW_HISTORY, "id=s", id);
		static const char *const want[] = {"created", "claimed",
		                                   "completed"};
		struct fsnp_iter it;
		struct fsnp_val ev;
		unsigned k = 0;
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &ev) && k < 3) {
			struct fsnp_iter e2, f2;
			struct fsnp_val eid, fields, key, val;
			fsnp_iter_init(&e2, &ev);
			assert_true(fsnp_iter_next(&e2, NULL, &eid));
			assert_true(fsnp_iter_next(&e2, NULL, &fields));
			fsnp_iter_init(&f2, &fields);
			assert_true(fsnp_iter_next(&f2, NULL, &key));
			assert_true(fsnp_iter_next(&f2, NULL, &val));
			assert_true(ftc_str_eq(&val, want[k]));
			k++;
		}
		assert_int_equal(k, 3);
		ftc_msg_free(&m);
	}
}

static void test_retry_transition_cancel(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], type[64];
		struct lease l;
		uint64_t t0, run_at;

		/* Retry with a backoff: due again only after run_at_ms; a
		 * blocking claim picks it up then. */
		snprintf(id, sizeof id, "%s-retry-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-retry-t%u", prefix, node_);
		create(&c, id, type, "queued");
		assert_true(claim1(&c, type, "queued", &l));
		run_at = now_ms() + 600;
		ok_str(call(&c, FSNP_OP_FLOW_RETRY,
		            "id=s lease_token=s fencing_token=i now_ms=i "
		            "error=s run_at_ms=i",
		            l.id, l.token, l.fencing, (int64_t)now_ms(), "oops",
		            (int64_t)run_at),
		       "OK");
		if (now_ms() + 100 < run_at) {
			/* Still well before it is due (not so on a slow
			 * run): nothing to claim. */
			assert_false(claim1(&c, type, "queued", &l));
		}
		t0 = now_ms();
		struct ftc_msg m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
		                        "type=s worker=s limit=i block_ms=i",
		                        type, "w2", (int64_t)1, (int64_t)5000);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 1);
		/* Claimed no earlier than due, by the same wall clock the
		 * node stamps its entries with, and well within block_ms. */
		assert_true(now_ms() >= run_at);
		assert_true(now_ms() - t0 < 4000);
		ftc_msg_free(&m);

		/* Transition (while leased: from running). */
		snprintf(id, sizeof id, "%s-tr-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-tr-t%u", prefix, node_);
		create(&c, id, type, "s1");
		assert_true(claim1(&c, type, "s1", &l));
		ok_str(call(&c, FSNP_OP_FLOW_TRANSITION,
		            "id=s from_state=s to_state=s lease_token=s "
		            "fencing_token=i now_ms=i",
		            l.id, "running", "s2", l.token, l.fencing,
		            (int64_t)now_ms()),
		       "OK");
		expect_state(&c, id, "s2");
		err_has(call(&c, FSNP_OP_FLOW_TRANSITION,
		             "id=s from_state=s to_state=s fencing_token=i "
		             "now_ms=i",
		             id, "s1", "s3", l.fencing + 1, (int64_t)now_ms()),
		        1, "ERR");

		/* Cancel with the current fencing token. */
		struct ftc_msg g = call(&c, FSNP_OP_FLOW_GET, "id=s", id);
		int64_t fencing = ftc_map_int(&g.value, "fencing_token");
		ftc_msg_free(&g);
		ok_str(call(&c, FSNP_OP_FLOW_CANCEL,
		            "id=s fencing_token=i now_ms=i reason=s", id,
		            fencing, (int64_t)now_ms(), "no longer needed"),
		       "OK");
		expect_state(&c, id, "cancelled");
	}
}

static void test_signal_values(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], type[64];
		struct fsnp_bytes ref;
		snprintf(id, sizeof id, "%s-sig-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-sig-t%u", prefix, node_);
		create(&c, id, type, "waiting");
		struct ftc_msg m =
		    call(&c, FSNP_OP_FLOW_SIGNAL,
		         "id=s signal=s if_state=s transition_to=s now_ms=i",
		         id, "go", "waiting", "ready", (int64_t)now_ms());
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
		expect_state(&c, id, "ready");
		err_has(
		    call(&c, FSNP_OP_FLOW_SIGNAL,
		         "id=s signal=s if_state=s transition_to=s now_ms=i",
		         id, "go", "waiting", "other", (int64_t)now_ms()),
		    1, "flow state mismatch");

		/* Values: put, then read back by ref (an unrouted MGET). */
		m = call(&c, FSNP_OP_FLOW_VALUE_PUT, "value=s now_ms=i",
		         "hello value", (int64_t)now_ms());
		assert_int_equal(m.status, 0);
		assert_int_equal(fsnp_map_bin(&m.value, "ref", &ref), 0);
		char refs[256];
		assert_true(ref.len < sizeof refs);
		memcpy(refs, ref.ptr, ref.len);
		refs[ref.len] = '\0';
		ftc_msg_free(&m);
		const char *rl[] = {refs, "fv:missing"};
		m = call(&c, FSNP_OP_FLOW_VALUE_MGET, "refs=a", rl, 2);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 2);
		struct fsnp_iter it;
		struct fsnp_val v;
		fsnp_iter_init(&it, &m.value);
		assert_true(fsnp_iter_next(&it, NULL, &v));
		assert_true(ftc_str_eq(&v, "hello value"));
		assert_true(fsnp_iter_next(&it, NULL, &v));
		assert_true(fsnp_val_is_nil(&v));
		ftc_msg_free(&m);
	}
}

static void put_bin(struct wbuf *b, const char *s)
{
	wbuf_put_u32(b, (uint32_t)strlen(s));
	wbuf_append_str(b, s);
}

/* Compact CREATE_MANY (0x90) of n auto-partitioned flows, independent. */
static void compact_create(struct ftc *c, const char *type, const char *base,
                           unsigned n)
{
	struct wbuf b;
	struct ftc_msg m;
	char id[64];
	wbuf_init(&b);
	wbuf_put_u8(&b, 0x90);
	put_bin(&b, type);
	put_bin(&b, "queued");
	wbuf_put_u64(&b, now_ms());
	wbuf_put_u64(&b, now_ms());
	wbuf_put_u8(&b, 2); /* independent */
	wbuf_put_u8(&b, 1); /* ok_on_success */
	wbuf_put_u32(&b, n);
	for (unsigned i = 0; i < n; i++) {
		snprintf(id, sizeof id, "%s-%u", base, i);
		put_bin(&b, id);
		put_bin(&b, "payload");
	}
	m = callb(c, FSNP_OP_FLOW_CREATE_MANY, FSNP_FLAG_CUSTOM, &b);
	ok_str(m, "OK");
}

/* Compact CLAIM_DUE (0x91), return JOBS_COMPACT. */
static struct ftc_msg compact_claim(struct ftc *c, const char *type,
                                    int64_t limit)
{
	struct wbuf b;
	wbuf_init(&b);
	wbuf_put_u8(&b, 0x91);
	put_bin(&b, type);
	wbuf_put_u32(&b, UINT32_MAX); /* no state */
	put_bin(&b, "wc");
	wbuf_put_u64(&b, 30000);
	wbuf_put_u64(&b, (uint64_t)limit);
	wbuf_put_u64(&b, (uint64_t)INT64_MIN); /* no block */
	wbuf_put_u8(&b, 1);
	wbuf_put_u64(&b, 25);
	wbuf_put_u64(&b, (uint64_t)INT64_MIN); /* no priority */
	wbuf_put_u8(&b, 1);                    /* JOBS_COMPACT */
	wbuf_put_u8(&b, 0);                    /* no partition */
	return callb(c, FSNP_OP_FLOW_CLAIM_DUE, FSNP_FLAG_CUSTOM, &b);
}

/* m (consumed) is an OK compact Flow reply: flow_record_v1 (or, list,
 * flow_record_list_v1 of one record) of flow `id` in `state`. */
static void compact_record_is(struct ftc_msg *m, bool list, const char *id,
                              const char *state)
{
	struct fsnp_compact_record rec;
	struct fsnp_compact_list l;
	struct fsnp_bytes k;
	struct fsnp_val v;
	bool id_ok = false, state_ok = false;
	assert_int_equal(m->status, 0);
	assert_true(m->flags & FSNP_FLAG_CUSTOM);
	assert_true(m->len > 2);
	if (list) {
		assert_int_equal(m->body[2], FSNP_COMPACT_FLOW_RECORD_LIST);
		assert_int_equal(fsnp_compact_flow_record_list_decode(
		                     m->body + 2, m->len - 2, 1000, &l),
		                 0);
		assert_int_equal(l.count, 1);
		assert_true(fsnp_compact_record_list_next(&l, &rec));
	} else {
		assert_int_equal(m->body[2], FSNP_COMPACT_FLOW_RECORD);
		assert_int_equal(fsnp_compact_flow_record_decode(
		                     m->body + 2, m->len - 2, 1000, &rec, NULL),
		                 0);
	}
	while (fsnp_compact_record_next(&rec, &k, &v)) {
		if (fsnp_bytes_eq(k, "id")) {
			id_ok =
			    v.tag == FSNP_BIN && fsnp_bytes_eq(v.as.bin, id);
		} else if (fsnp_bytes_eq(k, "state")) {
			state_ok =
			    v.tag == FSNP_BIN && fsnp_bytes_eq(v.as.bin, state);
		}
	}
	assert_true(id_ok);
	assert_true(state_ok);
	ftc_msg_free(m);
}

static void test_batches_and_fanout(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char type[64], base[64];
		struct ftc_msg m;
		struct fsnp_iter it;
		struct fsnp_val job;
		const unsigned n = 12;
		snprintf(type, sizeof type, "%s-many-t%u", prefix, node_);
		snprintf(base, sizeof base, "%s-many-%u", prefix, node_);
		/* Twelve auto-partitioned ids land on several shards: the
		 * batch is split per shard, the claim asks every shard. */
		compact_create(&c, type, base, n);
		/* A claim stops at a shard that cannot answer (an election
		 * on a loaded machine) and hands out what it got: the rest is
		 * claimed by the next one. */
		struct ftc_msg claims[8];
		unsigned n_claims = 0, got = 0;
		while (got < n && n_claims < 8) {
			if (n_claims > 0) {
				usleep(250000);
			}
			claims[n_claims] = compact_claim(&c, type, 100);
			if (claims[n_claims].status != 0) {
				ftc_msg_free(&claims[n_claims]);
				continue;
			}
			assert_int_equal(claims[n_claims].value.tag,
			                 FSNP_ARRAY);
			got += claims[n_claims].value.as.count;
			n_claims++;
		}
		assert_int_equal(got, n);

		/* With compact_flow_responses the same claim is answered
		 * flow_claim_jobs_v1 (0x80) and the typed reply's content. */
		{
			struct ftc cc;
			struct ftc_msg s2, m2;
			char cid[80];
			struct wbuf cb;
			assert_int_equal(ftc_connect(&cc, cl.nodes[node_].fsnp),
			                 0);
			s2 = call(&cc, FSNP_OP_STARTUP,
			          "compact_flow_responses=b", 1);
			ok(&s2);
			ftc_msg_free(&s2);
			snprintf(cid, sizeof cid, "%s-cj", base);
			wbuf_init(&cb);
			wbuf_put_u8(&cb, 0x90);
			put_bin(&cb, type);
			put_bin(&cb, "queued");
			wbuf_put_u64(&cb, now_ms());
			wbuf_put_u64(&cb, now_ms());
			wbuf_put_u8(&cb, 0);
			wbuf_put_u8(&cb, 0);
			wbuf_put_u32(&cb, 1);
			put_bin(&cb, cid);
			put_bin(&cb, "p");
			m2 = callb(&cc, FSNP_OP_FLOW_CREATE_MANY,
			           FSNP_FLAG_CUSTOM, &cb);
			ok(&m2);
			ftc_msg_free(&m2);
			m2 = compact_claim(&cc, type, 5);
			assert_int_equal(m2.status, 0);
			assert_true(m2.flags & FSNP_FLAG_CUSTOM);
			assert_true(m2.len >= 2 + 5);
			assert_int_equal(m2.body[2], 0x80);
			assert_int_equal(m2.body[6], 1); /* one job */
			assert_int_equal(m2.body[10], strlen(cid));
			assert_memory_equal(m2.body + 11, cid, strlen(cid));
			ftc_msg_free(&m2);
			/* GET answers flow_record_v1 (0x84) ... */
			m2 = call(&cc, FSNP_OP_FLOW_GET, "id=s", cid);
			compact_record_is(&m2, false, cid, "running");
			/* ... and a claim of records flow_record_list_v1. */
			snprintf(cid, sizeof cid, "%s-cr", base);
			create(&cc, cid, type, "queued");
			m2 = call(&cc, FSNP_OP_FLOW_CLAIM_DUE,
			          "type=s worker=s limit=i", type, "wr",
			          (int64_t)5);
			compact_record_is(&m2, true, cid, "running");
			ftc_close(&cc);
		}

		/* COMPLETE_MANY (typed, independent) of the claimed jobs:
		 * [id, partition, lease_token, fencing]. */
		struct wbuf b;
		struct fsnp_writer w;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "independent");
		fsnp_w_bool(&w, true);
		fsnp_w_key(&w, "now_ms");
		fsnp_w_i64(&w, (int64_t)now_ms());
		fsnp_w_key(&w, "items");
		fsnp_w_array_begin(&w);
		for (unsigned q = 0; q < n_claims; q++) {
			fsnp_iter_init(&it, &claims[q].value);
			while (fsnp_iter_next(&it, NULL, &job)) {
				struct fsnp_iter f;
				struct fsnp_val id, pk, tok, fen;
				fsnp_iter_init(&f, &job);
				assert_true(fsnp_iter_next(&f, NULL, &id));
				assert_true(fsnp_iter_next(&f, NULL, &pk));
				assert_true(fsnp_iter_next(&f, NULL, &tok));
				assert_true(fsnp_iter_next(&f, NULL, &fen));
				fsnp_w_map_begin(&w);
				fsnp_w_key(&w, "id");
				fsnp_w_val(&w, &id);
				fsnp_w_key(&w, "lease_token");
				fsnp_w_val(&w, &tok);
				fsnp_w_key(&w, "fencing_token");
				fsnp_w_val(&w, &fen);
				fsnp_w_map_end(&w);
			}
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		for (unsigned q = 0; q < n_claims; q++) {
			ftc_msg_free(&claims[q]);
		}
		m = callb(&c, FSNP_OP_FLOW_COMPLETE_MANY, 0, &b);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		assert_int_equal(m.value.as.count, n);
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &job)) {
			assert_true(ftc_str_eq(&job, "OK"));
		}
		ftc_msg_free(&m);
		for (unsigned i = 0; i < n; i++) {
			char id[80];
			snprintf(id, sizeof id, "%s-%u", base, i);
			expect_state(&c, id, "completed");
		}

		/* Not independent, across shards: refused as a whole. */
		const char *ids[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "type");
		fsnp_w_str(&w, type);
		fsnp_w_key(&w, "items");
		fsnp_w_array_begin(&w);
		for (unsigned i = 0; i < 8; i++) {
			char id[80];
			snprintf(id, sizeof id, "%s-x-%s", base, ids[i]);
			fsnp_w_array_begin(&w);
			fsnp_w_str(&w, id);
			fsnp_w_str(&w, "p");
			fsnp_w_array_end(&w);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		err_has(callb(&c, FSNP_OP_FLOW_CREATE_MANY, 0, &b), 1,
		        "ERR flow batch crosses shards");
	}
}

static void test_block_woken_by_create(void **state)
{
	struct ftc a, b;
	(void)state;
	for (unsigned node = 0; node < n_nodes; node++) {
		char id[64], type[64];
		struct wbuf body;
		struct ftc_msg m;
		uint64_t rid, t0;
		snprintf(id, sizeof id, "%s-block-%u", prefix, node);
		snprintf(type, sizeof type, "%s-block-t%u", prefix, node);
		assert_int_equal(ftc_connect(&a, cl.nodes[node].fsnp), 0);
		assert_int_equal(
		    ftc_connect(&b, cl.nodes[(node + 1) % n_nodes].fsnp), 0);
		ftc_body(&body, "type=s worker=s limit=i block_ms=i", type,
		         "wb", (int64_t)1, (int64_t)8000);
		rid = ftc_send(&a, 1, FSNP_OP_FLOW_CLAIM_DUE, 0, &body);
		wbuf_free(&body);
		assert_true(rid > 0);
		/* Nothing due yet: no reply within 300 ms. */
		assert_int_not_equal(ftc_recv(&a, &m, 300), 0);
		t0 = now_ms();
		create(&b, id, type, "queued");
		assert_int_equal(ftc_recv(&a, &m, 5000), 0);
		assert_int_equal(m.h.request_id, rid);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 1);
		assert_true(now_ms() - t0 < 2000);
		ftc_msg_free(&m);
		/* And a block that times out answers []. */
		m = call(&a, FSNP_OP_FLOW_CLAIM_DUE,
		         "type=s worker=s limit=i block_ms=i", type, "wb",
		         (int64_t)1, (int64_t)300);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 0);
		ftc_msg_free(&m);
		ftc_close(&a);
		ftc_close(&b);
	}
}

/* A flow past max_active_ms is failed by its shard's leader without any
 * client call (reason max_active_ms in its history); one without a
 * deadline stays as it was. */
/* Three nodes: a block_ms claim parked on a follower of its partition's
 * group is woken by a create sent to another node (the follower applies
 * the create and asks the leader again) and returns that flow before
 * block_ms expires. */
static void test_block_on_follower(void **state)
{
	struct ftc a, b;
	char pk[64], type[64], id[64];
	int follower = -1;
	struct wbuf body;
	struct ftc_msg m;
	struct fsnp_iter it;
	struct fsnp_val rec;
	uint64_t rid, t0;
	(void)state;
	if (n_nodes < 3) {
		return;
	}
	snprintf(pk, sizeof pk, "%s-fol-pk", prefix);
	snprintf(type, sizeof type, "%s-fol-t", prefix);
	snprintf(id, sizeof id, "%s-fol-1", prefix);
	for (unsigned i = 0; i < n_nodes && follower < 0; i++) {
		assert_int_equal(ftc_connect(&a, cl.nodes[i].fsnp), 0);
		m = call(&a, FSNP_OP_ROUTE, "flow_id=s partition_key=s", id,
		         pk);
		ok(&m);
		if (!ftc_map_str(&m.value, "hint", "leader")) {
			follower = (int)i;
		}
		ftc_msg_free(&m);
		ftc_close(&a);
	}
	assert_true(follower >= 0);
	assert_int_equal(ftc_connect(&a, cl.nodes[follower].fsnp), 0);
	assert_int_equal(
	    ftc_connect(&b, cl.nodes[(follower + 1) % n_nodes].fsnp), 0);
	ftc_body(&body, "type=s worker=s limit=i block_ms=i partition_key=s",
	         type, "wf", (int64_t)1, (int64_t)5000, pk);
	t0 = now_ms();
	rid = ftc_send(&a, 1, FSNP_OP_FLOW_CLAIM_DUE, 0, &body);
	wbuf_free(&body);
	assert_true(rid > 0);
	assert_int_not_equal(ftc_recv(&a, &m, 300), 0);
	ok_str(call(&b, FSNP_OP_FLOW_CREATE,
	            "id=s type=s partition_key=s now_ms=i", id, type, pk,
	            (int64_t)now_ms()),
	       "OK");
	assert_int_equal(ftc_recv(&a, &m, 6000), 0);
	assert_int_equal(m.h.request_id, rid);
	ok(&m);
	assert_int_equal(m.value.as.count, 1);
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &rec));
	assert_true(ftc_map_str(&rec, "id", id));
	assert_true(now_ms() - t0 < 5000);
	ftc_msg_free(&m);
	ftc_close(&a);
	ftc_close(&b);
}

/* The shard (ROUTE) an auto-partitioned flow id lives in. */
static int64_t shard_of(struct ftc *c, const char *id)
{
	struct ftc_msg m = call(c, FSNP_OP_ROUTE, "flow_id=s", id);
	int64_t g;
	ok(&m);
	g = ftc_map_int(&m.value, "shard");
	ftc_msg_free(&m);
	return g;
}

/* An id of the form <base>-<k> on shard `want` (or, want < 0, on any
 * shard other than `not`). */
static void id_on(struct ftc *c, const char *base, int64_t want, int64_t not,
                  char *out, size_t cap)
{
	for (int k = 0; k < 200; k++) {
		int64_t g;
		snprintf(out, cap, "%s-%d", base, k);
		g = shard_of(c, out);
		if ((want >= 0 && g == want) || (want < 0 && g != not )) {
			return;
		}
	}
	fail_msg("no id of %s on the shard wanted", base);
}

static void claimed_ids(struct ftc_msg *m, char ids[][64], unsigned max,
                        unsigned *n)
{
	struct fsnp_iter it;
	struct fsnp_val rec;
	struct fsnp_bytes b;
	ok(m);
	assert_int_equal(m->value.tag, FSNP_ARRAY);
	*n = 0;
	fsnp_iter_init(&it, &m->value);
	while (fsnp_iter_next(&it, NULL, &rec) && *n < max) {
		assert_int_equal(fsnp_map_bin(&rec, "id", &b), 0);
		snprintf(ids[*n], 64, "%.*s", (int)b.len, (const char *)b.ptr);
		(*n)++;
	}
}

/* A claim without a partition takes across shards in the reference's
 * order, priority first and then due time: the high-priority flow of one
 * shard before the older low-priority one of another, and the limit
 * split so nothing more is claimed than returned. */
static void test_claim_fanout_order(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char type[64], base[64], lo[64], hi[64], mid[64], ids[4][64];
		int64_t t = (int64_t)now_ms(), g_lo;
		unsigned n;
		struct ftc_msg m;
		snprintf(type, sizeof type, "%s-fan-t%u", prefix, node_);
		snprintf(base, sizeof base, "%s-fan-%u", prefix, node_);
		id_on(&c, base, -1, -1, lo, sizeof lo);
		g_lo = shard_of(&c, lo);
		id_on(&c, base, -1, g_lo, hi, sizeof hi);
		snprintf(base, sizeof base, "%s-fanm-%u", prefix, node_);
		id_on(&c, base, g_lo, -1, mid, sizeof mid);
		/* lo: priority 0, due first; mid: priority 1 on lo's shard;
		 * hi: priority 2 on another shard, due last. */
		ok_str(call(&c, FSNP_OP_FLOW_CREATE,
		            "id=s type=s priority=i run_at_ms=i now_ms=i", lo,
		            type, (int64_t)0, t - 3000, t),
		       "OK");
		ok_str(call(&c, FSNP_OP_FLOW_CREATE,
		            "id=s type=s priority=i run_at_ms=i now_ms=i", mid,
		            type, (int64_t)1, t - 2000, t),
		       "OK");
		ok_str(call(&c, FSNP_OP_FLOW_CREATE,
		            "id=s type=s priority=i run_at_ms=i now_ms=i", hi,
		            type, (int64_t)2, t - 1000, t),
		       "OK");
		m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
		         "type=s worker=s limit=i now_ms=i", type, "wf",
		         (int64_t)1, (int64_t)now_ms());
		claimed_ids(&m, ids, 4, &n);
		ftc_msg_free(&m);
		assert_int_equal(n, 1);
		assert_string_equal(ids[0], hi);
		m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
		         "type=s worker=s limit=i now_ms=i", type, "wf",
		         (int64_t)5, (int64_t)now_ms());
		claimed_ids(&m, ids, 4, &n);
		ftc_msg_free(&m);
		assert_int_equal(n, 2);
		assert_string_equal(ids[0], mid);
		assert_string_equal(ids[1], lo);
		/* Nothing else was leased behind the reply. */
		expect_state(&c, lo, "running");
		m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
		         "type=s worker=s limit=i now_ms=i", type, "wf",
		         (int64_t)5, (int64_t)now_ms());
		claimed_ids(&m, ids, 4, &n);
		ftc_msg_free(&m);
		assert_int_equal(n, 0);
	}
}

static void test_max_active_sweep(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], other[64], type[64];
		struct lease l;
		struct ftc_msg m;
		bool failed = false;
		snprintf(id, sizeof id, "%s-act-%u", prefix, node_);
		snprintf(other, sizeof other, "%s-act-free-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-act-t%u", prefix, node_);
		ok_str(call(&c, FSNP_OP_FLOW_CREATE,
		            "id=s type=s max_active_ms=i now_ms=i", id, type,
		            (int64_t)300, (int64_t)now_ms()),
		       "OK");
		create(&c, other, type, "queued");
		assert_true(claim1(&c, type, "queued", &l));
		/* The maintenance sweep runs every second: bounded wait. */
		for (int i = 0; i < 80 && !failed; i++) {
			m = call(&c, FSNP_OP_FLOW_GET, "id=s", id);
			ok(&m);
			failed = ftc_map_str(&m.value, "state", "failed");
			ftc_msg_free(&m);
			if (!failed) {
				usleep(100 * 1000);
			}
		}
		assert_true(failed);
		m = call(&c, FSNP_OP_FLOW_HISTORY, "id=s event=s", id,
		         "failed");
		ok(&m);
		assert_int_equal(m.value.as.count, 1);
		ftc_msg_free(&m);
		m = call(&c, FSNP_OP_FLOW_GET, "id=s", other);
		ok(&m);
		assert_false(ftc_map_str(&m.value, "state", "failed"));
		ftc_msg_free(&m);
	}
}

static void test_bad_bodies(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64];
		err_has(call(&c, FSNP_OP_FLOW_CREATE, "type=s", "t"), 6,
		        "field id");
		err_has(call(&c, FSNP_OP_FLOW_CREATE, "id=i type=s", (int64_t)5,
		             "t"),
		        6, "field id");
		err_has(call(&c, FSNP_OP_FLOW_CREATE, "id=s type=s bogus=i",
		             "x", "t", (int64_t)1),
		        6, "unknown flow option bogus");
		err_has(call(&c, FSNP_OP_FLOW_COMPLETE, "id=s fencing_token=i",
		             "x", (int64_t)1),
		        6, "lease_token");
		struct wbuf b;
		wbuf_init(&b);
		wbuf_put_u8(&b, 0x91);
		wbuf_put_u32(&b, 99);
		err_has(callb(&c, FSNP_OP_FLOW_CLAIM_DUE, FSNP_FLAG_CUSTOM, &b),
		        6, "compact");
		/* The connection still works. */
		name(id, sizeof id, "bad-after");
		snprintf(id + strlen(id), sizeof id - strlen(id), "-%u", node_);
		create(&c, id, "t-bad", "queued");
		expect_state(&c, id, "queued");
	}
}

static void test_command_exec(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], type[64], fen[24], now[24];
		struct lease l;
		struct wbuf b;
		struct fsnp_writer w;
		struct ftc_msg m;
		struct fsnp_iter it;
		struct fsnp_val rec;
		snprintf(id, sizeof id, "%s-ce-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-ce-t%u", prefix, node_);
		create(&c, id, type, "queued");
		/* The SDK's claimDue(): CE FLOW.CLAIM_DUE. */
		snprintf(now, sizeof now, "%llu", (unsigned long long)now_ms());
		const char *args[] = {type,     "STATE",    "queued", "WORKER",
		                      "w9",     "LEASE_MS", "30000",  "LIMIT",
		                      "5",      "NOW",      now,      "RETURN",
		                      "RECORDS"};
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "command");
		fsnp_w_str(&w, "FLOW.CLAIM_DUE");
		fsnp_w_key(&w, "args");
		fsnp_w_array_begin(&w);
		for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
			fsnp_w_str(&w, args[i]);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		m = callb(&c, FSNP_OP_COMMAND_EXEC, 0, &b);
		ok(&m);
		assert_int_equal(m.value.as.count, 1);
		fsnp_iter_init(&it, &m.value);
		assert_true(fsnp_iter_next(&it, NULL, &rec));
		record_lease(&rec, &l);
		ftc_msg_free(&m);
		/* The SDK's cancel(): CE FLOW.CANCEL. */
		snprintf(fen, sizeof fen, "%lld", (long long)l.fencing);
		const char *cargs[] = {id,      "FENCING", fen,
		                       "NOW",   now,       "LEASE_TOKEN",
		                       l.token, "REASON",  "stop"};
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "command");
		fsnp_w_str(&w, "FLOW.CANCEL");
		fsnp_w_key(&w, "args");
		fsnp_w_array_begin(&w);
		for (size_t i = 0; i < sizeof cargs / sizeof cargs[0]; i++) {
			fsnp_w_str(&w, cargs[i]);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		ok_str(callb(&c, FSNP_OP_COMMAND_EXEC, 0, &b), "OK");
		expect_state(&c, id, "cancelled");
	}
}

/* Flow commands inside a PIPELINE (typed and COMMAND_EXEC), next to a KV
 * command: each answered in its place. */
static void test_pipeline(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		char id[64], type[64];
		struct wbuf b;
		struct fsnp_writer w;
		struct ftc_msg m;
		struct fsnp_iter it;
		struct fsnp_val item;
		static const char *const want[] = {"ok", "ok", "ok"};
		unsigned k = 0;
		snprintf(id, sizeof id, "%s-pipe-%u", prefix, node_);
		snprintf(type, sizeof type, "%s-pipe-t%u", prefix, node_);
		create(&c, id, type, "queued");
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "return");
		fsnp_w_str(&w, "pairs");
		fsnp_w_key(&w, "commands");
		fsnp_w_array_begin(&w);
		/* FLOW.GET, typed */
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, FSNP_OP_FLOW_GET);
		fsnp_w_key(&w, "body");
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, id);
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
		/* FLOW.CLAIM_DUE through COMMAND_EXEC */
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, FSNP_OP_COMMAND_EXEC);
		fsnp_w_key(&w, "body");
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "command");
		fsnp_w_str(&w, "FLOW.CLAIM_DUE");
		fsnp_w_key(&w, "args");
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, type);
		fsnp_w_str(&w, "WORKER");
		fsnp_w_str(&w, "wp");
		fsnp_w_str(&w, "LIMIT");
		fsnp_w_i64(&w, 5);
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
		/* SET */
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, FSNP_OP_SET);
		fsnp_w_key(&w, "body");
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "key");
		fsnp_w_str(&w, id);
		fsnp_w_key(&w, "value");
		fsnp_w_str(&w, "v");
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		m = callb(&c, FSNP_OP_PIPELINE, 0, &b);
		ok(&m);
		assert_int_equal(m.value.as.count, 3);
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &item)) {
			struct fsnp_iter f;
			struct fsnp_val st, v;
			fsnp_iter_init(&f, &item);
			assert_true(fsnp_iter_next(&f, NULL, &st));
			assert_true(fsnp_iter_next(&f, NULL, &v));
			assert_true(ftc_str_eq(&st, want[k]));
			if (k == 0) {
				/* The claim beside it may come first. */
				assert_true(
				    ftc_map_str(&v, "state", "queued") ||
				    ftc_map_str(&v, "state", "running"));
			} else if (k == 1) {
				assert_int_equal(v.as.count, 1);
			}
			k++;
		}
		ftc_msg_free(&m);
		expect_state(&c, id, "running");
	}
}

/* FLOW_WAKE events reach the connections subscribed on the node the
 * write went through. */
static void test_flow_wake_event(void **state)
{
	struct ftc sub, c;
	(void)state;
	for (unsigned node = 0; node < n_nodes; node++) {
		char id[64];
		const char *ev[] = {"FLOW_WAKE"};
		struct ftc_msg m;
		struct fsnp_val payload;
		bool seen = false;
		snprintf(id, sizeof id, "%s-wake-%u", prefix, node);
		assert_int_equal(ftc_connect(&sub, cl.nodes[node].fsnp), 0);
		assert_int_equal(ftc_connect(&c, cl.nodes[node].fsnp), 0);
		m = call(&sub, FSNP_OP_SUBSCRIBE_EVENTS, "events=a", ev, 1);
		ok(&m);
		ftc_msg_free(&m);
		create(&c, id, "t-wake", "queued");
		for (int i = 0; i < 20 && !seen; i++) {
			if (ftc_recv(&sub, &m, 250) != 0) {
				continue;
			}
			if (m.h.opcode == FSNP_OP_EVENT && m.has_value &&
			    ftc_map_str(&m.value, "event", "FLOW_WAKE") &&
			    fsnp_map_map(&m.value, "payload", &payload) == 0 &&
			    ftc_map_str(&payload, "id", id)) {
				assert_true(ftc_map_str(&payload, "opcode",
				                        "FLOW.CREATE"));
				seen = true;
			}
			ftc_msg_free(&m);
		}
		assert_true(seen);
		ftc_close(&sub);
		ftc_close(&c);
	}
}

/* ROUTE answers a flow id or partition key by the flow's hash tag:
 * the reference's known answers. */
static void test_route(void **state)
{
	struct ftc c;
	(void)state;
	EACH_NODE(c)
	{
		struct ftc_msg m =
		    call(&c, FSNP_OP_ROUTE, "flow_id=s", "order-1");
		ok(&m);
		assert_int_equal(ftc_map_int(&m.value, "slot"), 794);
		assert_true(ftc_map_str(&m.value, "key", "{fa:239}"));
		ftc_msg_free(&m);
		m = call(&c, FSNP_OP_ROUTE, "flow_id=s partition_key=s", "x",
		         "tenant-a");
		ok(&m);
		assert_int_equal(ftc_map_int(&m.value, "slot"), 914);
		ftc_msg_free(&m);
		m = call(&c, FSNP_OP_ROUTE, "key=s", "{fa:239}");
		ok(&m);
		assert_int_equal(ftc_map_int(&m.value, "slot"), 794);
		ftc_msg_free(&m);
	}
}

static int start(unsigned n, const char *shards)
{
	const char *extra[] = {"--shards", shards, NULL};
	n_nodes = n;
	snprintf(prefix, sizeof prefix, "f%u-%ld", n, (long)getpid());
	if (harness_cluster_start(&cl, n, extra, true) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (ftc_wait_ready(cl.nodes[i].fsnp, 30000) != 0) {
			return -1;
		}
	}
	return 0;
}

static int setup1(void **state)
{
	(void)state;
	return start(1, "4");
}

static int setup3(void **state)
{
	(void)state;
	return start(3, "2");
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cl);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lifecycle),
	    cmocka_unit_test(test_retry_transition_cancel),
	    cmocka_unit_test(test_signal_values),
	    cmocka_unit_test(test_batches_and_fanout),
	    cmocka_unit_test(test_block_woken_by_create),
	    cmocka_unit_test(test_max_active_sweep),
	    cmocka_unit_test(test_claim_fanout_order),
	    cmocka_unit_test(test_block_on_follower),
	    cmocka_unit_test(test_bad_bodies),
	    cmocka_unit_test(test_command_exec),
	    cmocka_unit_test(test_route),
	    cmocka_unit_test(test_flow_wake_event),
	    cmocka_unit_test(test_pipeline),
	};
	int rv = cmocka_run_group_tests_name("flow, 1 node", tests, setup1,
	                                     teardown);
	rv |= cmocka_run_group_tests_name("flow, 3 nodes", tests, setup3,
	                                  teardown);
	return rv;
}
