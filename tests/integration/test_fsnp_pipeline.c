/* Integration: FSNP pipelining and lanes on a real lodestone — 10 000
 * requests pipelined on one connection matched by request_id, per-lane
 * reply order while another lane runs ahead, and the PIPELINE opcode in
 * its typed and compact forms with its atomicity policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

static struct harness_cluster cluster;
static uint16_t port;

static int setup(void **state)
{
	static const char *const extra[] = {
	    "--fsnp-max-inflight-per-connection",
	    "20000",
	    "--fsnp-max-inflight-per-lane",
	    "20000",
	    "--fsnp-lane-max-queue",
	    "20000",
	    "--fsnp-max-pipeline-commands",
	    "64",
	    NULL};
	(void)state;
	return ftc_start(&cluster, ftc_env_nodes(), extra, &port);
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

static struct ftc_msg CALL(struct ftc *c, uint16_t op, const char *fmt, ...) {
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

/* Deterministic PRNG (xorshift). */
static uint64_t prng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
	prng ^= prng << 13;
	prng ^= prng >> 7;
	prng ^= prng << 17;
	return prng;
}

#define N_PIPE 10000

static void test_10k_pipelined(void **state)
{
	struct ftc c;
	struct wbuf out;
	static uint8_t seen[N_PIPE + 1];
	static uint32_t lane_of[N_PIPE + 1];
	static uint16_t op_of[N_PIPE + 1];
	static uint32_t key_of[N_PIPE + 1];
	uint64_t last_rid[9] = {0};
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	wbuf_init(&out);
	/* Each key lives on one lane: SET then GET of it, in order. Lanes
	 * are random, so replies interleave across lanes. */
	for (uint64_t rid = 1; rid <= N_PIPE; rid++) {
		uint32_t key = (uint32_t)((rid - 1) / 2);
		char k[32], v[32];
		struct wbuf b;
		snprintf(k, sizeof k, "pipe:%u", key);
		snprintf(v, sizeof v, "v%u", key);
		if (rid % 2 == 1) {
			lane_of[rid] = 1 + (uint32_t)(rnd() % 8);
			op_of[rid] = FSNP_OP_SET;
			ftc_body(&b, "key=s value=s", k, v);
		} else {
			lane_of[rid] = lane_of[rid - 1];
			op_of[rid] = FSNP_OP_GET;
			ftc_body(&b, "key=s", k);
		}
		key_of[rid] = key;
		struct fsnp_header h = {FSNP_DIR_REQUEST, 0,   lane_of[rid],
		                        op_of[rid],       rid, (uint32_t)b.len};
		assert_int_equal(fsnp_frame_append(&out, &h, b.data, b.len), 0);
		wbuf_free(&b);
	}
	/* One write of all 10 000 frames. */
	assert_int_equal(ftc_send_raw(&c, out.data, out.len), 0);
	wbuf_free(&out);
	for (int i = 0; i < N_PIPE; i++) {
		struct ftc_msg m;
		uint64_t rid;
		assert_int_equal(ftc_recv(&c, &m, 20000), 0);
		rid = m.h.request_id;
		assert_true(rid >= 1 && rid <= N_PIPE);
		assert_int_equal(seen[rid], 0);
		seen[rid] = 1;
		assert_int_equal(m.h.lane_id, lane_of[rid]);
		assert_int_equal(m.h.opcode, op_of[rid]);
		assert_int_equal(m.status, 0);
		/* Replies leave each lane in arrival order. */
		assert_true(rid > last_rid[m.h.lane_id]);
		last_rid[m.h.lane_id] = rid;
		if (op_of[rid] == FSNP_OP_GET) {
			char v[32];
			snprintf(v, sizeof v, "v%u", key_of[rid]);
			assert_true(ftc_str_eq(&m.value, v));
		}
		ftc_msg_free(&m);
	}
	ftc_close(&c);
}

/* Lane 1 is held behind a request that waits (a fetch-or-compute whose
 * lease another client holds) while lane 2 runs ahead; lane 1's replies
 * then leave in arrival order. */
static void test_lane_order(void **state)
{
	struct ftc owner, c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_iter it;
	struct fsnp_val v;
	char token[64];
	uint64_t r1[3], r2[2];
	(void)state;
	assert_int_equal(ftc_connect(&owner, port), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i", "lo",
	         (int64_t)20000);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "compute"));
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	snprintf(token, sizeof token, "%.*s", (int)v.as.bin.len,
	         (const char *)v.as.bin.ptr);
	ftc_msg_free(&m);

	ftc_body(&b, "key=s ttl_ms=i", "lo", (int64_t)20000);
	r1[0] = ftc_send(&c, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	ftc_body(&b, "key=s value=s", "lo:a", "A");
	r1[1] = ftc_send(&c, 1, FSNP_OP_SET, 0, &b);
	wbuf_free(&b);
	ftc_body(&b, "key=s", "lo:a");
	r1[2] = ftc_send(&c, 1, FSNP_OP_GET, 0, &b);
	wbuf_free(&b);
	ftc_body(&b, "key=s value=s", "lo:b", "B");
	r2[0] = ftc_send(&c, 2, FSNP_OP_SET, 0, &b);
	wbuf_free(&b);
	ftc_body(&b, "key=s", "lo:b");
	r2[1] = ftc_send(&c, 2, FSNP_OP_GET, 0, &b);
	wbuf_free(&b);

	/* Lane 2 answers; lane 1 holds everything behind the waiter. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ftc_recv(&c, &m, 5000), 0);
		assert_int_equal(m.h.lane_id, 2);
		assert_int_equal(m.h.request_id, r2[i]);
		ftc_msg_free(&m);
	}
	assert_int_equal(ftc_recv(&c, &m, 500), -1);

	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE_RESULT,
	         "key=s token=s value=s ttl_ms=i", "lo", token, "done",
	         (int64_t)20000);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ftc_recv(&c, &m, 5000), 0);
		assert_int_equal(m.h.lane_id, 1);
		assert_int_equal(m.h.request_id, r1[i]);
		assert_int_equal(m.status, 0);
		if (i == 2) {
			assert_true(ftc_str_eq(&m.value, "A"));
		}
		ftc_msg_free(&m);
	}
	ftc_close(&c);
	ftc_close(&owner);
}

/* A typed PIPELINE body. cmds: opcode + a body built by ftc_body. */
struct item {
	uint16_t opcode;
	struct wbuf body;
};

static struct ftc_msg pipeline(struct ftc *c, const char *atomicity,
                               const char *ret, struct item *items, int n)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct ftc_msg m;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	if (atomicity != NULL) {
		fsnp_w_key(&w, "atomicity");
		fsnp_w_str(&w, atomicity);
	}
	if (ret != NULL) {
		fsnp_w_key(&w, "return");
		fsnp_w_str(&w, ret);
	}
	fsnp_w_key(&w, "commands");
	fsnp_w_array_begin(&w);
	for (int i = 0; i < n; i++) {
		struct fsnp_val v;
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, items[i].opcode);
		fsnp_w_key(&w, "body");
		assert_int_equal(fsnp_value_decode(items[i].body.data,
		                                   items[i].body.len, NULL, &v,
		                                   NULL),
		                 0);
		fsnp_w_val(&w, &v);
		fsnp_w_map_end(&w);
		wbuf_free(&items[i].body);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(ftc_call(c, 1, FSNP_OP_PIPELINE, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void expect_error(struct ftc_msg m, uint16_t status, const char *text)
{
	char msg[512];
	assert_int_equal(m.status, status);
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

static void test_pipeline_typed(void **state)
{
	struct ftc c;
	struct item it[4];
	struct ftc_msg m;
	struct fsnp_iter iter;
	struct fsnp_val e, st, v;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);

	/* Default format: maps {opcode, request_id, lane_id, status,
	 * value}; an item's error stays its own. */
	it[0].opcode = FSNP_OP_SET;
	ftc_body(&it[0].body, "key=s value=s", "pl:a", "1");
	it[1].opcode = FSNP_OP_GET;
	ftc_body(&it[1].body, "key=s", "pl:a");
	it[2].opcode = FSNP_OP_LPUSH;
	const char *vals[] = {"x"};
	ftc_body(&it[2].body, "key=s values=a", "pl:a", vals, 1);
	it[3].opcode = FSNP_OP_COMMAND_EXEC;
	const char *args[] = {"pl:l", "y"};
	ftc_body(&it[3].body, "command=s args=a", "RPUSH", args, 2);
	m = pipeline(&c, NULL, NULL, it, 4);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 4);
	fsnp_iter_init(&iter, &m.value);
	fsnp_iter_next(&iter, NULL, &e);
	assert_int_equal(ftc_map_int(&e, "opcode"), FSNP_OP_SET);
	assert_int_equal(ftc_map_int(&e, "request_id"), 1);
	assert_true(ftc_map_str(&e, "status", "ok"));
	fsnp_iter_next(&iter, NULL, &e);
	assert_true(ftc_map_str(&e, "value", "1"));
	fsnp_iter_next(&iter, NULL, &e);
	assert_true(ftc_map_str(&e, "status", "error"));
	fsnp_iter_next(&iter, NULL, &e);
	assert_int_equal(ftc_map_int(&e, "value"), 1);
	ftc_msg_free(&m);

	/* pairs (and "compact", which falls back to pairs). */
	it[0].opcode = FSNP_OP_GET;
	ftc_body(&it[0].body, "key=s", "pl:a");
	it[1].opcode = FSNP_OP_GET;
	ftc_body(&it[1].body, "key=s", "pl:none");
	m = pipeline(&c, "per_shard", "compact", it, 2);
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&iter, &m.value);
	fsnp_iter_next(&iter, NULL, &e);
	struct fsnp_iter pi;
	fsnp_iter_init(&pi, &e);
	fsnp_iter_next(&pi, NULL, &st);
	fsnp_iter_next(&pi, NULL, &v);
	assert_true(ftc_str_eq(&st, "ok"));
	assert_true(ftc_str_eq(&v, "1"));
	ftc_msg_free(&m);

	/* same_shard: one slot is fine, several shards are refused before
	 * anything runs. */
	it[0].opcode = FSNP_OP_SET;
	ftc_body(&it[0].body, "key=s value=s", "{ss}a", "1");
	it[1].opcode = FSNP_OP_SET;
	ftc_body(&it[1].body, "key=s value=s", "{ss}b", "2");
	m = pipeline(&c, "same_shard", "pairs", it, 2);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	/* Find two keys on different shards. */
	char k1[32] = "xs:0", k2[32];
	unsigned s1 = fsnp_slot_shard(fsnp_slot_of((const uint8_t *)k1, 4), 8);
	for (int i = 1;; i++) {
		snprintf(k2, sizeof k2, "xs:%d", i);
		if (fsnp_slot_shard(
		        fsnp_slot_of((const uint8_t *)k2, strlen(k2)), 8) !=
		    s1) {
			break;
		}
	}
	it[0].opcode = FSNP_OP_SET;
	ftc_body(&it[0].body, "key=s value=s", k1, "1");
	it[1].opcode = FSNP_OP_SET;
	ftc_body(&it[1].body, "key=s value=s", k2, "2");
	expect_error(pipeline(&c, "same_shard", NULL, it, 2), 6,
	             "multiple shards");
	m = CALL(&c, FSNP_OP_GET, "key=s", k1);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);

	/* Global atomicity is refused, not faked. */
	it[0].opcode = FSNP_OP_SET;
	ftc_body(&it[0].body, "key=s value=s", k1, "1");
	expect_error(pipeline(&c, "global", NULL, it, 1), 6,
	             "unsupported pipeline atomicity global");
	/* Control opcodes cannot be pipelined. */
	it[0].opcode = FSNP_OP_PING;
	ftc_body(&it[0].body, "");
	expect_error(pipeline(&c, NULL, NULL, it, 1), 6, "control commands");
	/* More than fsnp-max-pipeline-commands (64). */
	static struct item many[65];
	for (int i = 0; i < 65; i++) {
		many[i].opcode = FSNP_OP_GET;
		ftc_body(&many[i].body, "key=s", "pl:a");
	}
	expect_error(pipeline(&c, NULL, NULL, many, 65), 6, "max commands");
	/* A cross-slot MSET inside a pipeline fails alone. */
	{
		struct wbuf b;
		struct fsnp_writer w;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "pairs");
		fsnp_w_array_begin(&w);
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, k1);
		fsnp_w_str(&w, "1");
		fsnp_w_array_end(&w);
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, k2);
		fsnp_w_str(&w, "2");
		fsnp_w_array_end(&w);
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		fsnp_w_finish(&w);
		it[0].opcode = FSNP_OP_MSET;
		it[0].body = b;
	}
	it[1].opcode = FSNP_OP_GET;
	ftc_body(&it[1].body, "key=s", "pl:a");
	m = pipeline(&c, "none", "pairs", it, 2);
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&iter, &m.value);
	fsnp_iter_next(&iter, NULL, &e);
	fsnp_iter_init(&pi, &e);
	fsnp_iter_next(&pi, NULL, &st);
	assert_true(ftc_str_eq(&st, "error"));
	fsnp_iter_next(&iter, NULL, &e);
	fsnp_iter_init(&pi, &e);
	fsnp_iter_next(&pi, NULL, &st);
	assert_true(ftc_str_eq(&st, "ok"));
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_GET, "key=s", k1);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_pipeline_compact(void **state)
{
	struct ftc c;
	struct wbuf b;
	struct ftc_msg m;
	struct fsnp_bytes keys[3] = {{(const uint8_t *)"pc:1", 4},
	                             {(const uint8_t *)"pc:2", 4},
	                             {(const uint8_t *)"pc:3", 4}};
	struct fsnp_bytes vals[2] = {{(const uint8_t *)"a", 1},
	                             {(const uint8_t *)"b", 1}};
	struct fsnp_iter it;
	struct fsnp_val v;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	/* 94 81: all-SET, values only. */
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(
	    &b, FSNP_COMPACT_MODE_SET | FSNP_COMPACT_MODE_VALUES_ONLY, keys,
	    vals, 2);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_PIPELINE, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 2);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "OK"));
	ftc_msg_free(&m);
	/* 94 82: all-GET, values only. */
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(
	    &b, FSNP_COMPACT_MODE_GET | FSNP_COMPACT_MODE_VALUES_ONLY, keys,
	    NULL, 3);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_PIPELINE, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	assert_int_equal(m.value.as.count, 3);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "a"));
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "b"));
	fsnp_iter_next(&it, NULL, &v);
	assert_int_equal(v.tag, FSNP_NIL);
	ftc_msg_free(&m);
	/* 94 02 (not values-only): maps. */
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET, keys, NULL, 1);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_PIPELINE, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_map_str(&v, "status", "ok"));
	ftc_msg_free(&m);
	/* A values-only batch with an error item falls back to pairs. */
	m = CALL(&c, FSNP_OP_LPUSH, "key=s values=a", "pc:l",
	         (const char *[]){"x"}, 1);
	ftc_msg_free(&m);
	struct fsnp_bytes k2[2] = {{(const uint8_t *)"pc:1", 4},
	                           {(const uint8_t *)"pc:l", 4}};
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(
	    &b, FSNP_COMPACT_MODE_GET | FSNP_COMPACT_MODE_VALUES_ONLY, k2, NULL,
	    2);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_PIPELINE, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_int_equal(v.tag, FSNP_ARRAY);
	fsnp_iter_next(&it, NULL, &v);
	struct fsnp_iter pi;
	struct fsnp_val st;
	fsnp_iter_init(&pi, &v);
	fsnp_iter_next(&pi, NULL, &st);
	assert_true(ftc_str_eq(&st, "error"));
	ftc_msg_free(&m);
	ftc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_10k_pipelined),
	    cmocka_unit_test(test_lane_order),
	    cmocka_unit_test(test_pipeline_typed),
	    cmocka_unit_test(test_pipeline_compact),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
