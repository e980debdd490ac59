/* KV transactions on the store (store/kvmulti.c): STORE_OP_KV_MULTI runs
 * its commands in one apply, in order, reads seeing the earlier writes,
 * an error being that command's result alone; watched stamps (the
 * STORE_OP_KV_WATCH read) that no longer hold apply nothing; the decoder
 * refuses nested transactions, non-KV ops and malformed watch lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

#define G 7
#define MAXQ 16

static struct store_cmd kcmd(uint8_t op, const char *key)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.key = S(key);
	return c;
}

/* A transaction being built: watched (key, stamp) pairs, then commands,
 * each encoded (owned). */
struct txb {
	struct store_slice items[2 * MAXQ];
	uint8_t *owned[2 * MAXQ];
	uint8_t stamps[MAXQ][STORE_WATCH_STAMP_LEN];
	uint32_t n, nowned;
	uint64_t watches;
};

static void txb_init(struct txb *b)
{
	memset(b, 0, sizeof *b);
}

static void txb_watch(struct txb *b, const char *key,
                      const uint8_t stamp[STORE_WATCH_STAMP_LEN])
{
	assert_int_equal(b->n, 2 * b->watches); /* watches come first */
	memcpy(b->stamps[b->watches], stamp, STORE_WATCH_STAMP_LEN);
	b->items[b->n++] = S(key);
	b->items[b->n++] =
	    (struct store_slice){b->stamps[b->watches], STORE_WATCH_STAMP_LEN};
	b->watches++;
}

static void txb_add(struct txb *b, const struct store_cmd *c)
{
	size_t len;
	uint8_t *enc = tcmd_encode(c, &len);
	b->owned[b->nowned++] = enc;
	b->items[b->n++] = (struct store_slice){enc, len};
}

static struct store_cmd txb_cmd(struct txb *b)
{
	struct store_cmd c = kcmd(STORE_OP_KV_MULTI, "");
	c.count = b->watches;
	c.items.n = b->n;
	c.items.v = b->items;
	return c;
}

static void txb_free(struct txb *b)
{
	for (uint32_t i = 0; i < b->nowned; i++) {
		free(b->owned[i]);
	}
}

/* The next element of a transaction's answer: one command's result. */
static void next_result(struct tres *outer, struct tres *one)
{
	size_t len;
	const char *p = tres_bytes(outer, &len);
	uint8_t *copy = malloc(len);
	assert_non_null(copy);
	memcpy(copy, p, len);
	tres_init(one, copy, len);
}

static void expect_bytes(struct tres *outer, const char *want)
{
	struct tres one;
	next_result(outer, &one);
	assert_int_equal(tres_status(&one), STORE_OK);
	if (want == NULL) {
		assert_true(tres_is_nil(&one));
	} else {
		assert_string_equal(tres_bytes(&one, NULL), want);
	}
	tres_free(&one);
}

static void expect_int(struct tres *outer, int64_t want)
{
	struct tres one;
	next_result(outer, &one);
	assert_int_equal(tres_status(&one), STORE_OK);
	assert_int_equal(tres_i64(&one), want);
	tres_free(&one);
}

static void expect_status(struct tres *outer, uint8_t status)
{
	struct tres one;
	next_result(outer, &one);
	assert_int_equal(tres_status(&one), status);
	tres_free(&one);
}

static void get(struct tdb *t, uint64_t now, const char *k, const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_GET, k);
	struct tres x;
	tread(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	if (want == NULL) {
		assert_true(tres_is_nil(&x));
	} else {
		assert_string_equal(tres_bytes(&x, NULL), want);
	}
	tres_free(&x);
}

static void set(struct tdb *t, uint64_t now, const char *k, const char *v,
                uint64_t ttl)
{
	struct store_cmd c = kcmd(STORE_OP_KV_SET, k);
	struct tres x;
	c.value = S(v);
	c.kind = ttl ? STORE_EXPIRE_TTL : STORE_EXPIRE_NONE;
	c.ttl_ms = ttl;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
}

/* The stamp the watch read gives for `key` at `now`. */
static void stamp_of(struct tdb *t, uint64_t now, const char *key,
                     uint8_t out[STORE_WATCH_STAMP_LEN])
{
	struct store_slice k = S(key);
	struct store_cmd c = kcmd(STORE_OP_KV_WATCH, "");
	struct tres x;
	size_t len;
	const char *p;

	c.items.n = 1;
	c.items.v = &k;
	tread(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 1);
	p = tres_bytes(&x, &len);
	assert_int_equal(len, STORE_WATCH_STAMP_LEN);
	memcpy(out, p, len);
	tres_free(&x);
}

static void test_commands_in_order(void **state)
{
	struct tdb t;
	struct txb b;
	struct store_cmd c, m;
	struct store_slice hf[2] = {S("f"), S("v")};
	struct tres x;
	(void)state;

	tdb_open(&t);
	txb_init(&b);
	c = kcmd(STORE_OP_KV_SET, "{t}a");
	c.value = S("1");
	txb_add(&b, &c);
	c = kcmd(STORE_OP_KV_INCRBY, "{t}a");
	c.delta = 1;
	txb_add(&b, &c);
	txb_add(&b,
	        &(struct store_cmd){.op = STORE_OP_KV_GET, .key = S("{t}a")});
	c = kcmd(STORE_OP_KV_HSET, "{t}a");
	c.items.n = 2;
	c.items.v = hf;
	txb_add(&b, &c);
	c = kcmd(STORE_OP_KV_RPUSH, "{t}l");
	c.items.n = 2;
	c.items.v = hf;
	txb_add(&b, &c);
	c = kcmd(STORE_OP_KV_LRANGE, "{t}l");
	c.start = 0;
	c.stop = -1;
	txb_add(&b, &c);
	m = txb_cmd(&b);
	tapply(&x, &t, G, 10, &m);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 6);
	expect_bytes(&x, "OK");
	expect_int(&x, 2);
	expect_bytes(&x, "2"); /* the read sees the writes before it */
	expect_status(&x, STORE_WRONGTYPE);
	expect_int(&x, 2);
	{
		struct tres one;
		next_result(&x, &one);
		assert_int_equal(tres_array(&one), 2);
		assert_string_equal(tres_bytes(&one, NULL), "f");
		assert_string_equal(tres_bytes(&one, NULL), "v");
		tres_free(&one);
	}
	tres_free(&x);
	/* The refused HSET left nothing; the others stand. */
	get(&t, 11, "{t}a", "2");
	txb_free(&b);

	/* A transaction is not a read. */
	m = kcmd(STORE_OP_KV_MULTI, "");
	tread(&x, &t, G, 12, &m);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	/* An empty one answers an empty array. */
	tapply(&x, &t, G, 12, &m);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	tdb_close(&t);
}

static void test_watch(void **state)
{
	struct tdb t;
	struct txb b;
	struct store_cmd c, m;
	struct store_slice hf[2] = {S("f"), S("v")}, hf2[2] = {S("f"), S("w")};
	uint8_t s_absent[STORE_WATCH_STAMP_LEN], s1[STORE_WATCH_STAMP_LEN],
	    s2[STORE_WATCH_STAMP_LEN];
	struct tres x;
	(void)state;

	tdb_open(&t);
	stamp_of(&t, 1, "w", s_absent);
	set(&t, 2, "w", "v", 0);
	stamp_of(&t, 3, "w", s1);
	assert_memory_not_equal(s_absent, s1, sizeof s1);
	/* The stamp read at the watch still holds: applied. */
	txb_init(&b);
	txb_watch(&b, "w", s1);
	c = kcmd(STORE_OP_KV_SET, "w");
	c.value = S("mine");
	txb_add(&b, &c);
	m = txb_cmd(&b);
	tapply(&x, &t, G, 4, &m);
	assert_int_equal(tres_array(&x), 1);
	expect_bytes(&x, "OK");
	tres_free(&x);
	get(&t, 5, "w", "mine");
	/* The same stamp again: the key changed since, nothing applies. */
	c.value = S("again");
	txb_free(&b);
	txb_init(&b);
	txb_watch(&b, "w", s1);
	txb_add(&b, &c);
	m = txb_cmd(&b);
	tapply(&x, &t, G, 6, &m);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	get(&t, 7, "w", "mine");
	txb_free(&b);

	/* A hash field rewritten (same count) changes the stamp. */
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 2;
	c.items.v = hf;
	tapply(&x, &t, G, 8, &c);
	tres_free(&x);
	stamp_of(&t, 9, "h", s1);
	c.items.v = hf2;
	tapply(&x, &t, G, 10, &c);
	tres_free(&x);
	stamp_of(&t, 11, "h", s2);
	assert_memory_not_equal(s1, s2, sizeof s1);
	/* ... and back: the stamp is the old one (a digest). */
	c.items.v = hf;
	tapply(&x, &t, G, 12, &c);
	tres_free(&x);
	stamp_of(&t, 13, "h", s2);
	assert_memory_equal(s1, s2, sizeof s1);

	/* A sorted set member's new score (same count) is a change. */
	{
		uint8_t b1[8], b2[8];
		uint64_t bits1 = 0x3FF0000000000000ULL; /* 1.0 */
		uint64_t bits2 = 0x4000000000000000ULL; /* 2.0 */
		struct store_slice zs[2];
		for (int i = 0; i < 8; i++) {
			b1[i] = (uint8_t)(bits1 >> (56 - 8 * i));
			b2[i] = (uint8_t)(bits2 >> (56 - 8 * i));
		}
		c = kcmd(STORE_OP_KV_ZADD, "z");
		zs[0] = (struct store_slice){b1, 8};
		zs[1] = S("m");
		c.items.n = 2;
		c.items.v = zs;
		tapply(&x, &t, G, 14, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
		stamp_of(&t, 15, "z", s1);
		zs[0] = (struct store_slice){b2, 8};
		tapply(&x, &t, G, 16, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
		stamp_of(&t, 17, "z", s2);
		assert_memory_not_equal(s1, s2, sizeof s1);
	}

	/* Expiry is a change: the key lapses between watch and apply. */
	set(&t, 100, "e", "v", 50);
	stamp_of(&t, 120, "e", s1);
	txb_init(&b);
	txb_watch(&b, "e", s1);
	txb_add(&b, &(struct store_cmd){.op = STORE_OP_KV_GET, .key = S("e")});
	m = txb_cmd(&b);
	tapply(&x, &t, G, 149, &m); /* still live */
	assert_int_equal(tres_array(&x), 1);
	expect_bytes(&x, "v");
	tres_free(&x);
	tapply(&x, &t, G, 150, &m); /* lapsed */
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	/* A key absent at the watch and still absent holds. */
	txb_free(&b);
	txb_init(&b);
	txb_watch(&b, "none", s_absent);
	txb_add(&b,
	        &(struct store_cmd){.op = STORE_OP_KV_GET, .key = S("none")});
	m = txb_cmd(&b);
	tapply(&x, &t, G, 151, &m);
	assert_int_equal(tres_array(&x), 1);
	expect_bytes(&x, NULL);
	tres_free(&x);
	txb_free(&b);
	tdb_close(&t);
}

static void expect_refused(const struct store_cmd *m, const char *why)
{
	const char *err = NULL;
	struct store_cmd d;
	size_t len;
	uint8_t *enc = tcmd_encode(m, &len);
	assert_int_equal(store_cmd_decode(enc, len, &d, &err), -1);
	assert_non_null(strstr(err, why));
	free(enc);
}

static void test_decode(void **state)
{
	struct txb b, inner;
	struct store_cmd c, m, in;
	uint8_t stamp[STORE_WATCH_STAMP_LEN] = {0};
	struct store_slice short_stamp[2] = {S("k"), S("short")};
	struct store_slice junk[1] = {S("\x01")};
	(void)state;

	/* Nested transaction. */
	txb_init(&inner);
	txb_add(&inner,
	        &(struct store_cmd){.op = STORE_OP_KV_GET, .key = S("k")});
	in = txb_cmd(&inner);
	txb_init(&b);
	txb_add(&b, &in);
	m = txb_cmd(&b);
	expect_refused(&m, "not a KV command");
	txb_free(&b);
	txb_free(&inner);
	/* Non-KV ops: a cache put, the expiry maintenance op. */
	txb_init(&b);
	c = kcmd(STORE_OP_CACHE_PUT, "k");
	c.scope = S("t/n/c");
	txb_add(&b, &c);
	m = txb_cmd(&b);
	expect_refused(&m, "not a KV command");
	txb_free(&b);
	txb_init(&b);
	txb_add(&b, &(struct store_cmd){.op = STORE_OP_EXPIRE});
	m = txb_cmd(&b);
	expect_refused(&m, "not a KV command");
	txb_free(&b);
	/* A command that does not decode. */
	m = kcmd(STORE_OP_KV_MULTI, "");
	m.items.n = 1;
	m.items.v = junk;
	expect_refused(&m, "not a KV command");
	/* Watch pairs: more than listed, a stamp of the wrong length. */
	txb_init(&b);
	txb_watch(&b, "k", stamp);
	m = txb_cmd(&b);
	m.count = 2;
	expect_refused(&m, "watches more keys");
	m = kcmd(STORE_OP_KV_MULTI, "");
	m.count = 1;
	m.items.n = 2;
	m.items.v = short_stamp;
	expect_refused(&m, "wrong length");
	txb_free(&b);
	assert_true(store_op_in_multi(STORE_OP_KV_SET));
	assert_false(store_op_in_multi(STORE_OP_KV_MULTI));
	assert_false(store_op_in_multi(STORE_OP_KV_WATCH));
	assert_false(store_op_in_multi(STORE_OP_EXPIRE));
	assert_false(store_op_in_multi(STORE_OP_STREAM_APPEND));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_commands_in_order),
	    cmocka_unit_test(test_watch),
	    cmocka_unit_test(test_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
