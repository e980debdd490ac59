/* store/command and store/result codecs: round trips for every op, every
 * truncation rejected, limits, and the typed result reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "store/buf.h"
#include "store/command.h"
#include "store/result.h"

static void fill(struct store_cmd *c, uint8_t op,
                 const struct store_slice *items, uint32_t n)
{
	memset(c, 0, sizeof *c);
	c->op = op;
	c->kind = 2;
	c->flags = 0x0F;
	c->durability = 3;
	c->shard = 7;
	c->shards = 9;
	c->attempts = 4;
	c->scope = (struct store_slice){(const uint8_t *)"t/ns/s", 6};
	c->tenant = (struct store_slice){(const uint8_t *)"t", 1};
	c->ns = (struct store_slice){(const uint8_t *)"ns", 2};
	c->name = (struct store_slice){(const uint8_t *)"name", 4};
	c->group = (struct store_slice){(const uint8_t *)"g1", 2};
	c->key = (struct store_slice){(const uint8_t *)"key", 3};
	c->value = (struct store_slice){(const uint8_t *)"value", 5};
	c->arg = (struct store_slice){(const uint8_t *)"arg", 3};
	c->offset = 0x0102030405060708ULL;
	c->producer = 11;
	c->seq = 12;
	c->ttl_ms = 13;
	c->max = 14;
	c->max_bytes = 15;
	c->visibility_ms = 16;
	c->retention_bytes = 17;
	c->retention_ms = 18;
	c->window_ms = 19;
	c->count = 20;
	c->delta = -21;
	c->start = -22;
	c->stop = 23;
	c->items.n = n;
	c->items.v = items;
}

static void test_roundtrip_every_op(void **state)
{
	struct store_slice items[3] = {{(const uint8_t *)"a", 1},
	                               {(const uint8_t *)"", 0},
	                               {(const uint8_t *)"ccc", 3}};
	static const uint8_t get_k[] = {
	    STORE_CMD_VERSION, STORE_OP_KV_GET, 0, 0, 0, 1, 'k'};
	const struct store_slice multi_item = {get_k, sizeof get_k};
	int ops = 0;

	for (int op = 0; op < 256; op++) {
		struct store_cmd c, d;
		uint8_t *enc, *enc2;
		size_t len, len2;
		const char *err = NULL;

		if (store_op_name((uint8_t)op) == NULL) {
			fill(&c, (uint8_t)op, items, 3);
			assert_int_equal(store_cmd_encode(&c, &enc, &len, &err),
			                 -1);
			assert_non_null(err);
			continue;
		}
		ops++;
		fill(&c, (uint8_t)op, items, 3);
		if (op == STORE_OP_KV_MULTI) {
			/* A transaction's items are whole KV commands. */
			c.count = 0;
			c.items.n = 1;
			c.items.v = &multi_item;
		}
		assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), 0);
		assert_int_equal(enc[0], STORE_CMD_VERSION);
		assert_int_equal(enc[1], op);
		assert_int_equal(store_cmd_decode(enc, len, &d, &err), 0);
		assert_int_equal(d.op, op);
		/* Decode then encode gives the same bytes. */
		assert_int_equal(store_cmd_encode(&d, &enc2, &len2, &err), 0);
		assert_int_equal(len, len2);
		assert_memory_equal(enc, enc2, len);
		/* So does encoding into the caller's buffer, from the list
		 * as slices and as decoded (already encoded) bytes. */
		{
			uint8_t *to;
			size_t n;
			assert_int_equal(store_cmd_size(&c, &n, &err), 0);
			assert_int_equal(n, len);
			/* Exactly n bytes: ASan sees any overrun. */
			to = malloc(n);
			store_cmd_encode_to(&c, to, n);
			assert_memory_equal(to, enc, len);
			assert_int_equal(store_cmd_size(&d, &n, &err), 0);
			assert_int_equal(n, len);
			memset(to, 0, n);
			store_cmd_encode_to(&d, to, n);
			assert_memory_equal(to, enc, len);
			free(to);
		}
		/* Every strict prefix is refused. */
		for (size_t cut = 0; cut < len; cut++) {
			assert_int_equal(store_cmd_decode(enc, cut, &d, &err),
			                 -1);
		}
		/* So is a trailing byte. */
		enc = realloc(enc, len + 1);
		enc[len] = 0;
		assert_int_equal(store_cmd_decode(enc, len + 1, &d, &err), -1);
		assert_string_equal(err, "store command has trailing bytes");
		free(enc);
		free(enc2);
	}
	assert_true(ops >= 60);
}

static void test_fields_survive(void **state)
{
	struct store_slice items[2] = {{(const uint8_t *)"p1", 2},
	                               {(const uint8_t *)"payload-2", 9}};
	struct store_cmd c, d;
	struct store_list_iter it;
	struct store_slice s;
	uint8_t *enc;
	size_t len;
	const char *err;

	fill(&c, STORE_OP_STREAM_APPEND_IDEM, items, 2);
	assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), 0);
	assert_int_equal(store_cmd_decode(enc, len, &d, &err), 0);
	assert_int_equal(d.shard, 7);
	assert_int_equal(d.producer, 11);
	assert_int_equal(d.seq, 12);
	assert_int_equal(d.scope.len, 6);
	assert_memory_equal(d.scope.p, "t/ns/s", 6);
	/* Fields outside the op's schema are not carried. */
	assert_int_equal(d.ttl_ms, 0);
	assert_int_equal(d.key.len, 0);
	assert_int_equal(d.items.n, 2);
	store_list_iter_init(&it, &d.items);
	assert_true(store_list_next(&it, &s));
	assert_int_equal(s.len, 2);
	assert_memory_equal(s.p, "p1", 2);
	assert_true(store_list_next(&it, &s));
	assert_int_equal(s.len, 9);
	assert_memory_equal(s.p, "payload-2", 9);
	assert_false(store_list_next(&it, &s));
	free(enc);

	fill(&c, STORE_OP_COUNTER_ADD, NULL, 0);
	c.delta = INT64_MIN;
	assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), 0);
	assert_int_equal(store_cmd_decode(enc, len, &d, &err), 0);
	assert_true(d.delta == INT64_MIN);
	free(enc);
}

/* ZADD's options travel in KV_ZADD_OPT: a KV_ZADD entry written before
 * them (these bytes) decodes as it did, and KV_ZADD_OPT carries its
 * flags between the key and the pairs. */
static void test_zadd_encodings(void **state)
{
	/* version 1, op 0x78, key "z", items [1.0 as BE double, "a"] */
	static const uint8_t old[] = "\x01\x78"
	                             "\0\0\0\x01"
	                             "z"
	                             "\0\0\0\x02"
	                             "\0\0\0\x08\x3F\xF0\0\0\0\0\0\0"
	                             "\0\0\0\x01"
	                             "a";
	/* op 0x8B, then the flags byte (XX | CH) after the key */
	static const uint8_t opt[] = "\x01\x8B"
	                             "\0\0\0\x01"
	                             "z"
	                             "\x12"
	                             "\0\0\0\x02"
	                             "\0\0\0\x08\x3F\xF0\0\0\0\0\0\0"
	                             "\0\0\0\x01"
	                             "a";
	struct store_slice items[2] = {
	    {(const uint8_t *)"\x3F\xF0\0\0\0\0\0\0", 8},
	    {(const uint8_t *)"a", 1}};
	struct store_cmd c;
	struct store_list_iter it;
	struct store_slice sl;
	uint8_t *enc;
	size_t len;
	const char *err = NULL;

	(void)state;
	assert_int_equal(store_cmd_decode(old, sizeof old - 1, &c, &err), 0);
	assert_int_equal(c.op, STORE_OP_KV_ZADD);
	assert_int_equal(c.key.len, 1);
	assert_int_equal(c.items.n, 2);
	store_list_iter_init(&it, &c.items);
	assert_true(store_list_next(&it, &sl));
	assert_int_equal(sl.len, 8);
	assert_true(store_list_next(&it, &sl));
	assert_memory_equal(sl.p, "a", 1);
	assert_string_equal(store_op_name(STORE_OP_KV_ZADD_OPT), "ZADD_OPT");
	assert_true(store_op_in_multi(STORE_OP_KV_ZADD_OPT));
	assert_true(store_op_in_multi(STORE_OP_KV_POP));
	assert_false(store_op_is_read(STORE_OP_KV_POP));
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_ZADD_OPT;
	c.key.p = (const uint8_t *)"z";
	c.key.len = 1;
	c.flags = STORE_ZADD_XX | STORE_ZADD_CH;
	c.items.n = 2;
	c.items.v = items;
	assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), 0);
	assert_int_equal(len, sizeof opt - 1);
	assert_memory_equal(enc, opt, len);
	free(enc);
}

static void test_decode_errors(void **state)
{
	struct store_cmd d;
	const char *err;
	uint8_t bad_version[] = {2, STORE_OP_KV_GET, 0, 0, 0, 0};
	uint8_t bad_op[] = {1, 0xFF};
	/* DEL with a count of 2 but one item. */
	uint8_t short_list[] = {1,  STORE_OP_KV_DEL, 0, 0, 0, 2, 0, 0, 0, 1,
	                        'a'};
	/* DEL claiming more items than allowed. */
	uint8_t huge_list[] = {1, STORE_OP_KV_DEL, 0xFF, 0xFF, 0xFF, 0xFF};
	/* GET whose key length runs past the end. */
	uint8_t long_key[] = {1, STORE_OP_KV_GET, 0, 0, 1, 0, 'k'};
	uint8_t ok[] = {1, STORE_OP_KV_GET, 0, 0, 0, 1, 'k'};

	assert_int_equal(store_cmd_decode(NULL, 0, &d, &err), -1);
	assert_int_equal(store_cmd_decode(bad_op, 1, &d, &err), -1);
	assert_int_equal(
	    store_cmd_decode(bad_version, sizeof bad_version, &d, &err), -1);
	assert_string_equal(err, "unknown store command version");
	assert_int_equal(store_cmd_decode(bad_op, sizeof bad_op, &d, &err), -1);
	assert_string_equal(err, "unknown store op");
	assert_int_equal(
	    store_cmd_decode(short_list, sizeof short_list, &d, &err), -1);
	assert_int_equal(
	    store_cmd_decode(huge_list, sizeof huge_list, &d, &err), -1);
	assert_string_equal(err, "too many items in a store command");
	assert_int_equal(store_cmd_decode(long_key, sizeof long_key, &d, &err),
	                 -1);
	assert_int_equal(store_cmd_decode(ok, sizeof ok, &d, &err), 0);
	assert_int_equal(d.key.len, 1);
	assert_true(store_op_is_read(STORE_OP_KV_GET));
	assert_false(store_op_is_read(STORE_OP_KV_SET));
	assert_true(store_op_is_meta(STORE_OP_SCOPE_LIST));
	assert_false(store_op_is_meta(STORE_OP_STREAM_APPEND));
	assert_string_equal(store_op_name(STORE_OP_KV_RATELIMIT),
	                    "RATELIMIT.ADD");
}

static void test_encode_limits(void **state)
{
	struct store_cmd c;
	uint8_t *enc;
	size_t len;
	const char *err;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_DEL;
	c.items.n = STORE_CMD_MAX_ITEMS + 1;
	assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), -1);
	err = NULL;
	assert_int_equal(store_cmd_size(&c, &len, &err), -1);
	assert_string_equal(err, "too many items in a store command");
	c.op = 0xFF;
	c.items.n = 0;
	assert_int_equal(store_cmd_size(&c, &len, &err), -1);
	assert_string_equal(err, "unknown store op");
	c.op = STORE_OP_KV_DEL;
	/* An empty list encodes and decodes. */
	c.items.n = 0;
	assert_int_equal(store_cmd_encode(&c, &enc, &len, &err), 0);
	assert_int_equal(len, 6);
	assert_int_equal(store_cmd_decode(enc, len, &c, &err), 0);
	assert_int_equal(c.items.n, 0);
	free(enc);
}

static void test_result_roundtrip(void **state)
{
	struct sbuf b;
	struct store_result r;
	struct store_value v;
	size_t mark;

	sbuf_init(&b);
	res_begin(&b, STORE_OK);
	res_array(&b, 9);
	res_nil(&b);
	res_bool(&b, true);
	res_bool(&b, false);
	res_i64(&b, -5);
	res_u64(&b, UINT64_MAX);
	res_f64(&b, 2.5);
	res_str(&b, "hello");
	mark = res_array_open(&b);
	res_u64(&b, 1);
	res_u64(&b, 2);
	res_array_close(&b, mark, 2);
	res_map(&b, 1);
	res_map_key(&b, "f", 1);
	res_bytes(&b, "v", 1);

	assert_int_equal(store_result_open(b.p, b.len, &r), 0);
	assert_int_equal(r.status, STORE_OK);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_ARRAY);
	assert_int_equal(v.n, 9);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_NIL);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_TRUE);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_FALSE);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.i, -5);
	assert_true(store_result_next(&r, &v));
	assert_true(v.u == UINT64_MAX);
	assert_true(store_result_next(&r, &v));
	assert_true(v.f == 2.5);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.len, 5);
	assert_memory_equal(v.p, "hello", 5);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.n, 2);
	store_result_skip(&r, &v);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_MAP);
	assert_true(store_result_next_key(&r, &v));
	assert_memory_equal(v.p, "f", 1);
	assert_true(store_result_next(&r, &v));
	assert_memory_equal(v.p, "v", 1);
	assert_false(store_result_next(&r, &v));

	/* Every truncation and a trailing byte are refused. */
	for (size_t cut = 0; cut < b.len; cut++) {
		assert_int_equal(store_result_open(b.p, cut, &r), -1);
	}
	sbuf_u8(&b, 0);
	assert_int_equal(store_result_open(b.p, b.len, &r), -1);
	sbuf_free(&b);
}

static void test_result_malformed(void **state)
{
	struct sbuf b;
	struct store_result r;
	uint8_t unknown_tag[] = {1, 0, 9};
	uint8_t bad_version[] = {2, 0, 0};
	uint8_t huge_array[] = {1, 0, 5, 0xFF, 0xFF, 0xFF, 0xFF, 0};

	assert_int_equal(store_result_open(unknown_tag, 3, &r), -1);
	assert_int_equal(store_result_open(bad_version, 3, &r), -1);
	assert_int_equal(store_result_open(huge_array, sizeof huge_array, &r),
	                 -1);
	/* Nesting deeper than the limit. */
	sbuf_init(&b);
	res_begin(&b, STORE_OK);
	for (int i = 0; i <= STORE_RESULT_MAX_DEPTH + 1; i++) {
		res_array(&b, 1);
	}
	res_nil(&b);
	assert_int_equal(store_result_open(b.p, b.len, &r), -1);
	sbuf_free(&b);
	/* Error results with a message and with a pair. */
	sbuf_init(&b);
	res_error(&b, STORE_WRONGTYPE, "WRONGTYPE x");
	assert_int_equal(store_result_open(b.p, b.len, &r), 0);
	assert_int_equal(r.status, STORE_WRONGTYPE);
	sbuf_reset(&b);
	res_error_pair(&b, STORE_TOO_OLD, 3, 10);
	assert_int_equal(store_result_open(b.p, b.len, &r), 0);
	assert_int_equal(r.status, STORE_TOO_OLD);
	sbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_every_op),
	    cmocka_unit_test(test_fields_survive),
	    cmocka_unit_test(test_zadd_encodings),
	    cmocka_unit_test(test_decode_errors),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_result_roundtrip),
	    cmocka_unit_test(test_result_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
