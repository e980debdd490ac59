/* Unit: node/fsnp/fsnp_cmd — the FSNP command table, typed-body, COMMAND_EXEC
 * and compact parsing, and the store plans (routing, fan-out, CROSSSLOT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/fsnp/fsnp_cmd.h"
#include "store/command.h"
#include "store/kvscan.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

static const struct fsnp_cmd_ctx ctx = {8, 100000, "tok123", NULL};

/* A typed body built with the writer; `b` keeps the bytes. */
struct body {
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
};

static void body_begin(struct body *x)
{
	wbuf_init(&x->b);
	fsnp_w_init(&x->w, &x->b);
	fsnp_w_map_begin(&x->w);
}

static const struct fsnp_val *body_end(struct body *x)
{
	fsnp_w_map_end(&x->w);
	assert_int_equal(fsnp_w_finish(&x->w), 0);
	assert_int_equal(
	    fsnp_value_decode_body(x->b.data, x->b.len, NULL, &x->v), 0);
	return &x->v;
}

static void kv_str(struct body *x, const char *k, const char *v)
{
	fsnp_w_key(&x->w, k);
	fsnp_w_str(&x->w, v);
}

static void kv_int(struct body *x, const char *k, int64_t v)
{
	fsnp_w_key(&x->w, k);
	fsnp_w_i64(&x->w, v);
}

static void kv_bool(struct body *x, const char *k, bool v)
{
	fsnp_w_key(&x->w, k);
	fsnp_w_bool(&x->w, v);
}

static void kv_list(struct body *x, const char *k, const char **v, int n)
{
	fsnp_w_key(&x->w, k);
	fsnp_w_array_begin(&x->w);
	for (int i = 0; i < n; i++) {
		fsnp_w_str(&x->w, v[i]);
	}
	fsnp_w_array_end(&x->w);
}

static uint32_t group_of(const char *key)
{
	return 1 + fsnp_slot_shard(
	               fsnp_slot_of((const uint8_t *)key, strlen(key)), 8);
}

static void decode_part(const struct fsnp_plan *p, uint32_t i,
                        struct store_cmd *c)
{
	const char *err = NULL;
	assert_true(i < p->n_parts);
	assert_int_equal(
	    store_cmd_decode(p->parts[i].cmd, p->parts[i].len, c, &err), 0);
}

static bool slice_eq(struct store_slice s, const char *t)
{
	return s.len == strlen(t) && memcmp(s.p, t, s.len) == 0;
}

/* --- Table ---------------------------------------------------------------- */

static void test_table(void **state)
{
	const struct fsnp_cmd_info *i;
	(void)state;
	i = fsnp_cmd_by_name("get", 3);
	assert_non_null(i);
	assert_int_equal(i->opcode, FSNP_OP_GET);
	assert_int_equal(i->kind, FSNP_CMD_KV);
	assert_int_equal(i->store_op, STORE_OP_KV_GET);
	i = fsnp_cmd_by_name("RateLimit.Add", 13);
	assert_non_null(i);
	assert_int_equal(i->store_op, STORE_OP_KV_RATELIMIT);
	i = fsnp_cmd_by_name("HDEL", 4);
	assert_non_null(i);
	assert_int_equal(i->opcode, 0);
	assert_int_equal(i->store_op, STORE_OP_KV_HDEL);
	assert_int_equal(fsnp_cmd_by_name("FLOW.QUERY", 10)->kind,
	                 FSNP_CMD_FLOW);
	assert_int_equal(fsnp_cmd_by_name("flow.anything_new", 17)->kind,
	                 FSNP_CMD_FLOW);
	assert_int_equal(fsnp_cmd_by_name("CLUSTER.HEALTH", 14)->kind,
	                 FSNP_CMD_ADMIN);
	assert_int_equal(fsnp_cmd_by_name("PING", 4)->kind, FSNP_CMD_CONTROL);
	assert_null(fsnp_cmd_by_name("NOPE", 4));
	assert_null(fsnp_cmd_by_name("GETX", 4));
	assert_null(fsnp_cmd_by_name("GE", 2));
	assert_int_equal(fsnp_cmd_by_opcode(FSNP_OP_ZSCORE)->store_op,
	                 STORE_OP_KV_ZSCORE);
	assert_int_equal(fsnp_cmd_by_opcode(FSNP_OP_FLOW_CREATE)->kind,
	                 FSNP_CMD_FLOW);
	assert_null(fsnp_cmd_by_opcode(FSNP_OP_EVENT));
	assert_null(fsnp_cmd_by_opcode(0x0999));
	/* Every KV opcode of the spec is a command. */
	for (size_t k = 0; k < fsnp_opcode_count(); k++) {
		const struct fsnp_opcode_info *o = fsnp_opcode_at(k);
		if (o->group == FSNP_OPG_KV &&
		    o->code != FSNP_OP_COMMAND_EXEC &&
		    o->code != FSNP_OP_PIPELINE) {
			const struct fsnp_cmd_info *c =
			    fsnp_cmd_by_opcode(o->code);
			assert_non_null(c);
			assert_int_equal(c->kind, FSNP_CMD_KV);
			assert_string_equal(c->name, o->name);
		}
	}
}

/* --- Typed bodies -----------------------------------------------------------
 */

static void test_get_set(void **state)
{
	struct body x;
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	(void)state;
	body_begin(&x);
	kv_str(&x, "key", "plain");
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_GET, body_end(&x), &ctx, &p, &e), 0);
	assert_int_equal(p.n_parts, 1);
	assert_int_equal(p.merge, FSNP_MERGE_ONE);
	assert_int_equal(p.slot, 719);
	assert_int_equal(p.parts[0].group, group_of("plain"));
	assert_true(p.parts[0].read);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_GET);
	assert_true(slice_eq(c.key, "plain"));
	fsnp_plan_free(&p);
	wbuf_free(&x.b);

	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_str(&x, "value", "v");
	kv_int(&x, "ttl", 1500);
	kv_bool(&x, "nx", true);
	kv_bool(&x, "get", true);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_SET, body_end(&x), &ctx, &p, &e), 0);
	assert_false(p.parts[0].read);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_SET);
	assert_true(slice_eq(c.value, "v"));
	assert_int_equal(c.flags, STORE_SET_NX | STORE_SET_GET);
	assert_int_equal(c.kind, STORE_EXPIRE_TTL);
	assert_int_equal(c.ttl_ms, 1500);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);

	/* exat is seconds, stored as an absolute ms time. */
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_int(&x, "value", 7); /* numbers are stored as their text */
	kv_int(&x, "exat", 2000000000);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_SET, body_end(&x), &ctx, &p, &e), 0);
	decode_part(&p, 0, &c);
	assert_true(slice_eq(c.value, "7"));
	assert_int_equal(c.kind, STORE_EXPIRE_AT);
	assert_int_equal(c.ttl_ms, 2000000000000ull);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
}

static void expect_body_error(uint16_t op, struct body *x, uint16_t status,
                              const char *text)
{
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	assert_int_equal(fsnp_cmd_parse_body(op, body_end(x), &ctx, &p, &e),
	                 -1);
	assert_int_equal(e.status, status);
	if (strstr(e.message, text) == NULL) {
		fail_msg("'%s' lacks '%s'", e.message, text);
	}
	assert_int_equal(p.n_parts, 0);
	wbuf_free(&x->b);
}

/* GET's raw-body fast path plans exactly what the general parser plans,
 * and declines every other body (extra fields, another field name, a key
 * that is not binary, trailing or missing bytes). */
static void test_get_fast(void **state)
{
	static const char *keys[] = {"a", "", "user:{42}:x",
	                             "key:000000012345"};
	struct fsnp_plan fast, slow;
	struct fsnp_cmd_err e;
	struct body x;

	(void)state;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		body_begin(&x);
		fsnp_w_key(&x.w, "key");
		fsnp_w_bin(&x.w, keys[i], strlen(keys[i]));
		const struct fsnp_val *v = body_end(&x);
		assert_int_equal(
		    fsnp_cmd_parse_get_fast(x.b.data, x.b.len, &ctx, &fast, &e),
		    0);
		assert_int_equal(
		    fsnp_cmd_parse_body(FSNP_OP_GET, v, &ctx, &slow, &e), 0);
		assert_int_equal(fast.opcode, slow.opcode);
		assert_int_equal(fast.op, slow.op);
		assert_int_equal(fast.merge, slow.merge);
		assert_int_equal(fast.slot, slow.slot);
		assert_int_equal(fast.n_parts, 1);
		assert_int_equal(slow.n_parts, 1);
		assert_int_equal(fast.parts[0].group, slow.parts[0].group);
		assert_int_equal(fast.parts[0].read, slow.parts[0].read);
		assert_int_equal(fast.parts[0].len, slow.parts[0].len);
		assert_memory_equal(fast.parts[0].cmd, slow.parts[0].cmd,
		                    slow.parts[0].len);
		assert_int_equal(fast.key_len, strlen(keys[i]));
		/* one byte short, one byte more: declined */
		assert_int_equal(fsnp_cmd_parse_get_fast(x.b.data, x.b.len - 1,
		                                         &ctx, &fast, &e),
		                 1);
		wbuf_put_u8(&x.b, 0);
		assert_int_equal(
		    fsnp_cmd_parse_get_fast(x.b.data, x.b.len, &ctx, &fast, &e),
		    1);
		fsnp_plan_free(&fast);
		fsnp_plan_free(&slow);
		wbuf_free(&x.b);
	}

	/* other shapes go to the general parser */
	body_begin(&x);
	fsnp_w_key(&x.w, "key");
	fsnp_w_bin(&x.w, "a", 1);
	kv_int(&x, "deadline_ms", 5);
	body_end(&x);
	assert_int_equal(
	    fsnp_cmd_parse_get_fast(x.b.data, x.b.len, &ctx, &fast, &e), 1);
	wbuf_free(&x.b);

	body_begin(&x);
	fsnp_w_key(&x.w, "kex");
	fsnp_w_bin(&x.w, "a", 1);
	body_end(&x);
	assert_int_equal(
	    fsnp_cmd_parse_get_fast(x.b.data, x.b.len, &ctx, &fast, &e), 1);
	wbuf_free(&x.b);

	body_begin(&x);
	kv_int(&x, "key", 7);
	body_end(&x);
	assert_int_equal(
	    fsnp_cmd_parse_get_fast(x.b.data, x.b.len, &ctx, &fast, &e), 1);
	wbuf_free(&x.b);

	assert_int_equal(fsnp_cmd_parse_get_fast(NULL, 0, &ctx, &fast, &e), 1);
}

static void test_body_errors(void **state)
{
	struct body x;
	(void)state;
	body_begin(&x);
	expect_body_error(FSNP_OP_GET, &x, 1, "key must be binary");
	body_begin(&x);
	kv_int(&x, "key", 5);
	expect_body_error(FSNP_OP_SET, &x, 6, "key must be binary");
	body_begin(&x);
	kv_str(&x, "key", "k");
	expect_body_error(FSNP_OP_SET, &x, 6, "value");
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_str(&x, "value", "v");
	kv_bool(&x, "nx", true);
	kv_bool(&x, "xx", true);
	expect_body_error(FSNP_OP_SET, &x, 6, "XX and NX");
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_str(&x, "value", "v");
	kv_int(&x, "ttl", 10);
	kv_bool(&x, "keepttl", true);
	expect_body_error(FSNP_OP_SET, &x, 6, "syntax");
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_str(&x, "value", "v");
	kv_str(&x, "nx", "yes");
	expect_body_error(FSNP_OP_SET, &x, 6, "boolean");
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_str(&x, "owner", "o");
	kv_int(&x, "ttl_ms", 0);
	expect_body_error(FSNP_OP_LOCK, &x, 6, "positive");
	body_begin(&x);
	kv_str(&x, "key", "k");
	kv_int(&x, "start", 0);
	expect_body_error(FSNP_OP_LRANGE, &x, 6, "stop");
	body_begin(&x);
	kv_str(&x, "key", "k");
	const char *none[1];
	kv_list(&x, "members", none, 0);
	expect_body_error(FSNP_OP_SADD, &x, 6, "must not be empty");
	body_begin(&x);
	kv_str(&x, "key", "z");
	fsnp_w_key(&x.w, "items");
	fsnp_w_array_begin(&x.w);
	fsnp_w_array_begin(&x.w);
	fsnp_w_str(&x.w, "abc");
	fsnp_w_str(&x.w, "m");
	fsnp_w_array_end(&x.w);
	fsnp_w_array_end(&x.w);
	expect_body_error(FSNP_OP_ZADD, &x, 6, "valid float");
	/* Not a KV opcode. */
	body_begin(&x);
	expect_body_error(FSNP_OP_PING, &x, 6, "unknown opcode");
}

static void test_fanout(void **state)
{
	struct body x;
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	const char *keys[16];
	char names[16][16];
	uint32_t groups_seen = 0;
	(void)state;
	for (int i = 0; i < 16; i++) {
		snprintf(names[i], sizeof names[i], "fan:%d", i);
		keys[i] = names[i];
	}
	body_begin(&x);
	kv_list(&x, "keys", keys, 16);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_MGET, body_end(&x), &ctx, &p, &e), 0);
	assert_int_equal(p.merge, FSNP_MERGE_ORDER);
	assert_int_equal(p.n_items, 16);
	assert_true(p.n_parts > 1);
	uint32_t total = 0;
	for (uint32_t i = 0; i < p.n_parts; i++) {
		struct store_list_iter it;
		struct store_slice s;
		uint32_t k = 0;
		assert_true(p.parts[i].read);
		assert_false(groups_seen & (1u << p.parts[i].group));
		groups_seen |= 1u << p.parts[i].group;
		decode_part(&p, i, &c);
		assert_int_equal(c.items.n, p.parts[i].n);
		store_list_iter_init(&it, &c.items);
		while (store_list_next(&it, &s)) {
			uint32_t pos = p.parts[i].pos[k++];
			assert_true(slice_eq(s, keys[pos]));
			assert_int_equal(group_of(keys[pos]), p.parts[i].group);
			if (k > 1) {
				assert_true(pos > p.parts[i].pos[k - 2]);
			}
		}
		total += p.parts[i].n;
	}
	assert_int_equal(total, 16);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);

	body_begin(&x);
	kv_list(&x, "keys", keys, 16);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_DEL, body_end(&x), &ctx, &p, &e), 0);
	assert_int_equal(p.merge, FSNP_MERGE_SUM);
	assert_false(p.parts[0].read);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);

	/* No keys: nothing to run. */
	body_begin(&x);
	kv_list(&x, "keys", keys, 0);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_DEL, body_end(&x), &ctx, &p, &e), 0);
	assert_int_equal(p.n_parts, 0);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
}

static void test_mset(void **state)
{
	struct body x;
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	(void)state;
	/* [{key, value}] and [[k, v]] in one slot. */
	body_begin(&x);
	fsnp_w_key(&x.w, "pairs");
	fsnp_w_array_begin(&x.w);
	fsnp_w_map_begin(&x.w);
	fsnp_w_key(&x.w, "key");
	fsnp_w_str(&x.w, "{t}a");
	fsnp_w_key(&x.w, "value");
	fsnp_w_str(&x.w, "1");
	fsnp_w_map_end(&x.w);
	fsnp_w_array_begin(&x.w);
	fsnp_w_str(&x.w, "{t}b");
	fsnp_w_str(&x.w, "2");
	fsnp_w_array_end(&x.w);
	fsnp_w_array_end(&x.w);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_MSET, body_end(&x), &ctx, &p, &e), 0);
	assert_int_equal(p.n_parts, 1);
	decode_part(&p, 0, &c);
	assert_int_equal(c.items.n, 4);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	/* Across slots: CROSSSLOT, nothing planned. */
	body_begin(&x);
	fsnp_w_key(&x.w, "pairs");
	fsnp_w_array_begin(&x.w);
	for (int i = 0; i < 2; i++) {
		fsnp_w_array_begin(&x.w);
		fsnp_w_str(&x.w, i ? "b" : "a");
		fsnp_w_str(&x.w, "v");
		fsnp_w_array_end(&x.w);
	}
	fsnp_w_array_end(&x.w);
	expect_body_error(FSNP_OP_MSET, &x, 1, "CROSSSLOT");
	body_begin(&x);
	fsnp_w_key(&x.w, "pairs");
	fsnp_w_array_begin(&x.w);
	fsnp_w_i64(&x.w, 5);
	fsnp_w_array_end(&x.w);
	expect_body_error(FSNP_OP_MSET, &x, 6, "pairs must be maps");
}

static void test_collections_typed(void **state)
{
	struct body x;
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	struct store_list_iter it;
	struct store_slice s;
	(void)state;
	body_begin(&x);
	kv_str(&x, "key", "h");
	fsnp_w_key(&x.w, "fields");
	fsnp_w_map_begin(&x.w);
	fsnp_w_key(&x.w, "f");
	fsnp_w_str(&x.w, "v");
	fsnp_w_map_end(&x.w);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_HSET, body_end(&x), &ctx, &p, &e), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_HSET);
	assert_int_equal(c.items.n, 2);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	/* ZADD: integer and float scores become 8-byte BE doubles. */
	body_begin(&x);
	kv_str(&x, "key", "z");
	fsnp_w_key(&x.w, "items");
	fsnp_w_array_begin(&x.w);
	fsnp_w_array_begin(&x.w);
	fsnp_w_i64(&x.w, 2);
	fsnp_w_str(&x.w, "a");
	fsnp_w_array_end(&x.w);
	fsnp_w_array_begin(&x.w);
	fsnp_w_f64(&x.w, -0.5);
	fsnp_w_str(&x.w, "b");
	fsnp_w_array_end(&x.w);
	fsnp_w_array_end(&x.w);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_ZADD, body_end(&x), &ctx, &p, &e), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.items.n, 4);
	store_list_iter_init(&it, &c.items);
	double want[] = {2.0, -0.5};
	for (int i = 0; i < 2; i++) {
		uint64_t u = 0;
		double d;
		assert_true(store_list_next(&it, &s));
		assert_int_equal(s.len, 8);
		for (int k = 0; k < 8; k++) {
			u = u << 8 | s.p[k];
		}
		memcpy(&d, &u, sizeof d);
		assert_true(d == want[i]);
		assert_true(store_list_next(&it, &s));
	}
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	/* LPOP count, ZRANGE withscores, FETCH_OR_COMPUTE token. */
	body_begin(&x);
	kv_str(&x, "key", "l");
	kv_int(&x, "count", 3);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_LPOP, body_end(&x), &ctx, &p, &e), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.count, 3);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	body_begin(&x);
	kv_str(&x, "key", "z");
	kv_int(&x, "start", 0);
	kv_int(&x, "stop", -1);
	kv_bool(&x, "withscores", true);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_ZRANGE, body_end(&x), &ctx, &p, &e), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.flags, STORE_ZRANGE_WITHSCORES);
	assert_int_equal(c.stop, -1);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	body_begin(&x);
	kv_str(&x, "key", "f");
	kv_int(&x, "ttl_ms", 5000);
	assert_int_equal(fsnp_cmd_parse_body(FSNP_OP_FETCH_OR_COMPUTE,
	                                     body_end(&x), &ctx, &p, &e),
	                 0);
	decode_part(&p, 0, &c);
	assert_true(slice_eq(c.arg, "tok123"));
	assert_int_equal(c.ttl_ms, 5000);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
	/* RATELIMIT.ADD count defaults to 1. */
	body_begin(&x);
	kv_str(&x, "key", "r");
	kv_int(&x, "window_ms", 1000);
	kv_int(&x, "max", 5);
	assert_int_equal(fsnp_cmd_parse_body(FSNP_OP_RATELIMIT_ADD,
	                                     body_end(&x), &ctx, &p, &e),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.count, 1);
	assert_int_equal(c.window_ms, 1000);
	fsnp_plan_free(&p);
	wbuf_free(&x.b);
}

/* --- COMMAND_EXEC arguments ------------------------------------------------
 */

static int exec_args(const char *name, struct fsnp_plan *p,
                     struct fsnp_cmd_err *e, int n, ...)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	va_list ap;
	int rv;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		const char *a = va_arg(ap, const char *);
		if (a[0] == '#') {
			fsnp_w_i64(&w, strtoll(a + 1, NULL, 10));
		} else {
			fsnp_w_str(&w, a);
		}
	}
	va_end(ap);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode(b.data, b.len, NULL, &v, NULL), 0);
	rv = fsnp_cmd_parse_args(fsnp_cmd_by_name(name, strlen(name)), &v, &ctx,
	                         p, e);
	wbuf_free(&b);
	return rv;
}

static void test_exec_args(void **state)
{
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	(void)state;
	assert_int_equal(
	    exec_args("SET", &p, &e, 5, "k", "v", "EX", "#10", "XX"), 0);
	assert_int_equal(p.opcode, FSNP_OP_COMMAND_EXEC);
	decode_part(&p, 0, &c);
	assert_int_equal(c.kind, STORE_EXPIRE_TTL);
	assert_int_equal(c.ttl_ms, 10000);
	assert_int_equal(c.flags, STORE_SET_XX);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("set", &p, &e, 4, "k", "v", "pxat", "123"),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.kind, STORE_EXPIRE_AT);
	assert_int_equal(c.ttl_ms, 123);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("SET", &p, &e, 4, "k", "v", "EX", "x"), -1);
	assert_non_null(strstr(e.message, "invalid expire"));
	assert_int_equal(exec_args("SET", &p, &e, 4, "k", "v", "NX", "XX"), -1);
	assert_non_null(strstr(e.message, "syntax"));
	assert_int_equal(exec_args("GET", &p, &e, 0), -1);
	assert_int_equal(e.status, 1);
	assert_non_null(strstr(e.message, "wrong number of arguments for "
	                                  "'get'"));
	assert_int_equal(exec_args("HSET", &p, &e, 2, "h", "f"), -1);
	assert_int_equal(exec_args("HSET", &p, &e, 5, "h", "f", "v", "g", "w"),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.items.n, 4);
	fsnp_plan_free(&p);
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 5, "z", "#1", "a", "2.5", "b"), 0);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("ZADD", &p, &e, 3, "z", "nan", "a"), -1);
	assert_int_equal(
	    exec_args("ZRANGE", &p, &e, 4, "z", "0", "-1", "WITHSCORES"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.flags, STORE_ZRANGE_WITHSCORES);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("LRANGE", &p, &e, 3, "l", "a", "1"), -1);
	assert_non_null(strstr(e.message, "not an integer"));
	assert_int_equal(exec_args("CAS", &p, &e, 5, "k", "a", "b", "EX", "#2"),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.ttl_ms, 2000);
	fsnp_plan_free(&p);
	assert_int_equal(
	    exec_args("RATELIMIT.ADD", &p, &e, 4, "r", "#1000", "#10", "#3"),
	    0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.count, 3);
	fsnp_plan_free(&p);
	/* LPOP/RPOP key 0: KV_POP (KV_LPOP's count 0 means one value) */
	assert_int_equal(exec_args("LPOP", &p, &e, 2, "l", "#0"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_POP);
	assert_int_equal(c.kind, 0);
	assert_int_equal(c.count, 0);
	assert_false(p.parts[0].read);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("RPOP", &p, &e, 2, "l", "0"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_POP);
	assert_int_equal(c.kind, 1);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("RPOP", &p, &e, 2, "l", "#3"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_RPOP);
	assert_int_equal(c.count, 3);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("LPOP", &p, &e, 2, "l", "#-1"), -1);
	assert_string_equal(e.message,
	                    "ERR value is out of range, must be positive");
	assert_int_equal(exec_args("LPOP", &p, &e, 2, "l", "x"), -1);
	assert_string_equal(e.message,
	                    "ERR value is out of range, must be positive");
	assert_int_equal(exec_args("DEL", &p, &e, 3, "a", "b", "c"), 0);
	assert_int_equal(p.merge, FSNP_MERGE_SUM);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("MSET", &p, &e, 3, "a", "b", "c"), -1);
}

/* ZADD's options: KV_ZADD_OPT with their flags (KV_ZADD without), and
 * Redis's errors in Redis's order. */
static void test_zadd_options_args(void **state)
{
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	struct store_list_iter it;
	struct store_slice s;
	(void)state;
	assert_int_equal(exec_args("ZADD", &p, &e, 3, "z", "1", "a"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_ZADD);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("ZADD", &p, &e, 8, "z", "xx", "GT", "ch",
	                           "1", "a", "#2", "b"),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_ZADD_OPT);
	assert_int_equal(c.flags,
	                 STORE_ZADD_XX | STORE_ZADD_GT | STORE_ZADD_CH);
	assert_int_equal(c.items.n, 4);
	assert_false(p.parts[0].read);
	assert_int_equal(p.parts[0].group, group_of("z"));
	store_list_iter_init(&it, &c.items);
	assert_true(store_list_next(&it, &s));
	assert_int_equal(s.len, 8);
	assert_true(store_list_next(&it, &s));
	assert_true(slice_eq(s, "a"));
	fsnp_plan_free(&p);
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 5, "z", "NX", "INCR", "2.5", "m"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_ZADD_OPT);
	assert_int_equal(c.flags, STORE_ZADD_NX | STORE_ZADD_INCR);
	fsnp_plan_free(&p);
	/* An option word after the first score is a score. */
	assert_int_equal(exec_args("ZADD", &p, &e, 5, "z", "1", "a", "NX", "b"),
	                 -1);
	assert_string_equal(e.message, "ERR value is not a valid float");
	assert_int_equal(exec_args("ZADD", &p, &e, 4, "z", "1", "a", "2"), -1);
	assert_string_equal(e.message, "ERR syntax error");
	assert_int_equal(exec_args("ZADD", &p, &e, 3, "z", "NX", "XX"), -1);
	assert_string_equal(e.message, "ERR syntax error");
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 5, "z", "NX", "XX", "1", "a"), -1);
	assert_string_equal(e.message, "ERR XX and NX options at the same "
	                               "time are not compatible");
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 5, "z", "GT", "LT", "1", "a"), -1);
	assert_string_equal(e.message, "ERR GT, LT, and/or NX options at the "
	                               "same time are not compatible");
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 5, "z", "NX", "LT", "1", "a"), -1);
	assert_string_equal(e.message, "ERR GT, LT, and/or NX options at the "
	                               "same time are not compatible");
	assert_int_equal(
	    exec_args("ZADD", &p, &e, 6, "z", "INCR", "1", "a", "2", "b"), -1);
	assert_string_equal(e.message, "ERR INCR option supports a single "
	                               "increment-element pair");
	assert_int_equal(exec_args("ZADD", &p, &e, 4, "z", "INCR", "x", "a"),
	                 -1);
	assert_string_equal(e.message, "ERR value is not a valid float");
	assert_int_equal(exec_args("ZADD", &p, &e, 2, "z", "NX"), -1);
	assert_string_equal(e.message,
	                    "ERR wrong number of arguments for 'zadd' command");
}

/* The keyspace commands: EXPIRE's options and their errors, RENAME's
 * slot check, SCAN's cursor naming the group, DBSIZE and KEYS on every
 * group, ZRANGE LIMIT and ZCOUNT. */
static void test_keyspace_args(void **state)
{
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct store_cmd c;
	char cur[24];
	(void)state;
	assert_int_equal(exec_args("EXPIRE", &p, &e, 4, "k", "10", "nx", "LT"),
	                 -1);
	assert_string_equal(e.message, "ERR NX and XX, GT or LT options at "
	                               "the same time are not compatible");
	assert_int_equal(exec_args("PEXPIRE", &p, &e, 4, "k", "10", "GT", "LT"),
	                 -1);
	assert_string_equal(e.message, "ERR GT and LT options at the same "
	                               "time are not compatible");
	assert_int_equal(exec_args("EXPIRE", &p, &e, 3, "k", "10", "ZZ"), -1);
	assert_string_equal(e.message, "ERR Unsupported option ZZ");
	assert_int_equal(
	    exec_args("EXPIREAT", &p, &e, 2, "k", "9223372036854776"), -1);
	assert_string_equal(e.message,
	                    "ERR invalid expire time in 'expireat' command");
	assert_int_equal(
	    exec_args("PEXPIREAT", &p, &e, 4, "k", "#5", "XX", "GT"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_EXPIRE_OPT);
	assert_int_equal(c.kind, STORE_EXPIRE_AT);
	assert_int_equal(c.delta, 5);
	assert_int_equal(c.flags, STORE_EXPIRE_F_XX | STORE_EXPIRE_F_GT);
	assert_true(slice_eq(c.arg, "pexpireat"));
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("RENAME", &p, &e, 2, "{t}a", "{t}b"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_RENAME);
	assert_int_equal(p.parts[0].group, group_of("{t}a"));
	assert_true(slice_eq(c.arg, "{t}b"));
	fsnp_plan_free(&p);
	assert_true(fsnp_slot_of((const uint8_t *)"{t}a", 4) !=
	            fsnp_slot_of((const uint8_t *)"{u}a", 4));
	assert_int_equal(exec_args("RENAMENX", &p, &e, 2, "{t}a", "{u}a"), -1);
	assert_non_null(strstr(e.message, "CROSSSLOT"));
	/* DBSIZE and KEYS: one part per data group (8 here) */
	assert_int_equal(exec_args("DBSIZE", &p, &e, 0), 0);
	assert_int_equal(p.n_parts, 8);
	assert_int_equal(p.merge, FSNP_MERGE_SUM);
	assert_int_equal(p.parts[7].group, 8);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("KEYS", &p, &e, 1, "a*"), 0);
	assert_int_equal(p.n_parts, 8);
	assert_int_equal(p.merge, FSNP_MERGE_CONCAT);
	decode_part(&p, 3, &c);
	assert_int_equal(c.flags, STORE_SCAN_ALL | STORE_SCAN_MATCH);
	assert_true(slice_eq(c.value, "a*"));
	fsnp_plan_free(&p);
	/* SCAN: cursor 0 is group 1; a cursor of group 5 at "key" goes to
	 * group 5 and seeks at most to "key" */
	assert_int_equal(exec_args("SCAN", &p, &e, 1, "0"), 0);
	assert_int_equal(p.parts[0].group, 1);
	decode_part(&p, 0, &c);
	assert_int_equal(c.count, 10);
	assert_int_equal(c.shards, 8);
	assert_int_equal(c.arg.len, 0);
	fsnp_plan_free(&p);
	snprintf(cur, sizeof cur, "%llu",
	         (unsigned long long)kvscan_cursor_at(
	             5, 8, (const uint8_t *)"key", 3));
	assert_int_equal(exec_args("SCAN", &p, &e, 7, cur, "MATCH", "k*",
	                           "COUNT", "3", "TYPE", "ZSET"),
	                 0);
	assert_int_equal(p.parts[0].group, 5);
	decode_part(&p, 0, &c);
	assert_true(slice_eq(c.arg, "key"));
	assert_int_equal(c.count, 3);
	assert_int_equal(c.kind, 5);
	assert_int_equal(c.flags, STORE_SCAN_MATCH);
	fsnp_plan_free(&p);
	assert_int_equal(exec_args("SCAN", &p, &e, 1, "abc"), -1);
	assert_string_equal(e.message, "ERR invalid cursor");
	assert_int_equal(exec_args("SCAN", &p, &e, 3, "0", "COUNT", "0"), -1);
	assert_string_equal(e.message, "ERR syntax error");
	/* ZRANGEBYSCORE LIMIT: the _EX read; ZRANGE by rank refuses it */
	assert_int_equal(exec_args("ZRANGEBYSCORE", &p, &e, 6, "z", "1", "2",
	                           "LIMIT", "-1", "3"),
	                 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.op, STORE_OP_KV_ZRANGE_EX);
	assert_true(c.offset == UINT64_MAX);
	assert_int_equal(c.count, 3);
	fsnp_plan_free(&p);
	assert_int_equal(
	    exec_args("ZRANGE", &p, &e, 6, "z", "0", "1", "LIMIT", "0", "2"),
	    -1);
	assert_non_null(strstr(e.message, "LIMIT is only supported"));
	assert_int_equal(exec_args("ZCOUNT", &p, &e, 3, "z", "(1", "+inf"), 0);
	decode_part(&p, 0, &c);
	assert_int_equal(c.flags, STORE_ZRANGE_BYSCORE | STORE_ZRANGE_COUNT |
	                              STORE_ZRANGE_MIN_EXCL);
	fsnp_plan_free(&p);
}

/* SET key value and GET key from byte strings: the plan
 * fsnp_cmd_parse_args makes; every other shape declined. */
static void test_exec_args_fast(void **state)
{
	static const char *keys[] = {"a", "", "user:{42}:x",
	                             "key:000000012345"};
	const struct fsnp_cmd_info *set = fsnp_cmd_by_name("set", 3);
	const struct fsnp_cmd_info *get = fsnp_cmd_by_name("GET", 3);
	const struct fsnp_cmd_info *del = fsnp_cmd_by_name("DEL", 3);
	struct fsnp_cmd_ctx one = ctx;
	struct fsnp_plan fast, slow;
	struct fsnp_cmd_err e;
	struct fsnp_bytes a[2];

	(void)state;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		for (int w = 0; w < 2; w++) {
			a[0].ptr = (const uint8_t *)keys[i];
			a[0].len = strlen(keys[i]);
			a[1].ptr = (const uint8_t *)"xxx";
			a[1].len = 3;
			assert_int_equal(
			    fsnp_cmd_parse_args_fast(
			        w ? set : get, a, w ? 2 : 1, &ctx, &fast, &e),
			    0);
			assert_int_equal(
			    w ? exec_args("SET", &slow, &e, 2, keys[i], "xxx")
			      : exec_args("GET", &slow, &e, 1, keys[i]),
			    0);
			assert_int_equal(fast.opcode, slow.opcode);
			assert_int_equal(fast.opcode, FSNP_OP_COMMAND_EXEC);
			assert_int_equal(fast.op, slow.op);
			assert_int_equal(fast.merge, slow.merge);
			assert_int_equal(fast.slot, slow.slot);
			assert_string_equal(fast.name, slow.name);
			assert_int_equal(fast.n_parts, 1);
			assert_int_equal(slow.n_parts, 1);
			assert_int_equal(fast.parts[0].group,
			                 slow.parts[0].group);
			assert_int_equal(fast.parts[0].read,
			                 slow.parts[0].read);
			assert_int_equal(fast.parts[0].len, slow.parts[0].len);
			assert_memory_equal(fast.parts[0].cmd,
			                    slow.parts[0].cmd,
			                    slow.parts[0].len);
			fsnp_plan_free(&fast);
			fsnp_plan_free(&slow);
		}
	}
	/* other commands, counts or limits go to the general parser */
	assert_int_equal(fsnp_cmd_parse_args_fast(set, a, 1, &ctx, &fast, &e),
	                 1);
	assert_int_equal(fsnp_cmd_parse_args_fast(get, a, 2, &ctx, &fast, &e),
	                 1);
	assert_int_equal(fsnp_cmd_parse_args_fast(del, a, 1, &ctx, &fast, &e),
	                 1);
	assert_int_equal(fsnp_cmd_parse_args_fast(NULL, a, 1, &ctx, &fast, &e),
	                 1);
	one.max_items = 1;
	assert_int_equal(fsnp_cmd_parse_args_fast(set, a, 2, &one, &fast, &e),
	                 1);
}

/* --- Compact bodies, deadlines, limits --------------------------------------
 */

static void test_compact_and_deadline(void **state)
{
	struct wbuf b;
	struct fsnp_compact_req cr;
	struct fsnp_plan p;
	struct fsnp_cmd_err e;
	struct fsnp_bytes keys[2] = {{(const uint8_t *)"{x}1", 4},
	                             {(const uint8_t *)"{x}2", 4}};
	struct fsnp_bytes vals[2] = {{(const uint8_t *)"a", 1},
	                             {(const uint8_t *)"b", 1}};
	struct body x;
	uint64_t dl;
	(void)state;
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_SET, keys, vals, 2);
	assert_int_equal(
	    fsnp_compact_req_decode(FSNP_OP_MSET, b.data, b.len, 100, &cr), 0);
	assert_int_equal(fsnp_cmd_parse_compact(&cr, &ctx, &p, &e), 0);
	assert_int_equal(p.op, STORE_OP_KV_MSET);
	assert_int_equal(p.n_parts, 1);
	fsnp_plan_free(&p);
	wbuf_reset(&b);
	fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET, keys, NULL, 2);
	assert_int_equal(
	    fsnp_compact_req_decode(FSNP_OP_MGET, b.data, b.len, 100, &cr), 0);
	assert_int_equal(fsnp_cmd_parse_compact(&cr, &ctx, &p, &e), 0);
	assert_int_equal(p.merge, FSNP_MERGE_ORDER);
	assert_int_equal(p.n_items, 2);
	fsnp_plan_free(&p);
	wbuf_free(&b);

	body_begin(&x);
	assert_int_equal(fsnp_cmd_deadline(body_end(&x), &dl, &e), 0);
	assert_int_equal(dl, 0);
	wbuf_free(&x.b);
	body_begin(&x);
	kv_int(&x, "deadline_ms", 12345);
	assert_int_equal(fsnp_cmd_deadline(body_end(&x), &dl, &e), 0);
	assert_int_equal(dl, 12345);
	wbuf_free(&x.b);
	body_begin(&x);
	kv_int(&x, "deadline_ms", -1);
	assert_int_equal(fsnp_cmd_deadline(body_end(&x), &dl, &e), -1);
	assert_int_equal(e.status, 6);
	assert_string_equal(e.code, "invalid_deadline");
	wbuf_free(&x.b);
	body_begin(&x);
	kv_str(&x, "deadline_ms", "soon");
	assert_int_equal(fsnp_cmd_deadline(body_end(&x), &dl, &e), -1);
	wbuf_free(&x.b);

	/* max_items bounds every list. */
	struct fsnp_cmd_ctx small = {8, 3, "t", NULL};
	const char *k4[] = {"a", "b", "c", "d"};
	body_begin(&x);
	kv_list(&x, "keys", k4, 4);
	assert_int_equal(
	    fsnp_cmd_parse_body(FSNP_OP_DEL, body_end(&x), &small, &p, &e), -1);
	assert_int_equal(e.status, 6);
	wbuf_free(&x.b);
	/* A body that is not a map counts as {}. */
	uint8_t arr[] = {FSNP_ARRAY, 0, 0, 0, 0};
	struct fsnp_val v;
	assert_int_equal(fsnp_value_decode(arr, sizeof arr, NULL, &v, NULL), 0);
	assert_int_equal(fsnp_cmd_parse_body(FSNP_OP_GET, &v, &ctx, &p, &e),
	                 -1);
	assert_non_null(strstr(e.message, "key must be binary"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_get_set),
	    cmocka_unit_test(test_get_fast),
	    cmocka_unit_test(test_body_errors),
	    cmocka_unit_test(test_fanout),
	    cmocka_unit_test(test_mset),
	    cmocka_unit_test(test_collections_typed),
	    cmocka_unit_test(test_exec_args),
	    cmocka_unit_test(test_zadd_options_args),
	    cmocka_unit_test(test_keyspace_args),
	    cmocka_unit_test(test_exec_args_fast),
	    cmocka_unit_test(test_compact_and_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
