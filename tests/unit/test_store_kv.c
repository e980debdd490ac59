/* FSNP KV on the store: strings with TTL, CAS, MSET/MGET, locks, rate
 * limits, fetch-or-compute, hashes, lists, sets, sorted sets, expiry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/buf.h"
#include "store/kvscan.h"
#include "tests/unit/store_test_util.h"

#define G 5

static struct store_cmd kcmd(uint8_t op, const char *key)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.key = S(key);
	return c;
}

static void expect_str(struct tres *x, const char *want)
{
	assert_int_equal(tres_status(x), STORE_OK);
	if (want == NULL) {
		assert_true(tres_is_nil(x));
	} else {
		assert_string_equal(tres_bytes(x, NULL), want);
	}
}

/* Applies (or reads) and checks an OK string/nil result. */
static void do_str(struct tdb *t, bool read, uint64_t now,
                   const struct store_cmd *c, const char *want)
{
	struct tres x;
	if (read) {
		tread(&x, t, G, now, c);
	} else {
		tapply(&x, t, G, now, c);
	}
	expect_str(&x, want);
	tres_free(&x);
}

static void do_int(struct tdb *t, bool read, uint64_t now,
                   const struct store_cmd *c, int64_t want)
{
	struct tres x;
	if (read) {
		tread(&x, t, G, now, c);
	} else {
		tapply(&x, t, G, now, c);
	}
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_i64(&x), want);
	tres_free(&x);
}

static void do_status(struct tdb *t, bool read, uint64_t now,
                      const struct store_cmd *c, uint8_t status,
                      const char *msg)
{
	struct tres x;
	if (read) {
		tread(&x, t, G, now, c);
	} else {
		tapply(&x, t, G, now, c);
	}
	assert_int_equal(tres_status(&x), status);
	if (msg != NULL) {
		assert_string_equal(tres_bytes(&x, NULL), msg);
	}
	tres_free(&x);
}

static void set(struct tdb *t, uint64_t now, const char *k, const char *v,
                uint8_t flags, uint8_t kind, uint64_t ttl, const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_SET, k);
	c.value = S(v);
	c.flags = flags;
	c.kind = kind;
	c.ttl_ms = ttl;
	do_str(t, false, now, &c, want);
}

static void get(struct tdb *t, uint64_t now, const char *k, const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_GET, k);
	uint8_t *v;
	size_t len;
	bool found;

	do_str(t, true, now, &c, want);
	assert_int_equal(store_kv_get(t->s, G, S(k), now, &v, &len, &found), 0);
	assert_int_equal(found, want != NULL);
	free(v);
}

#define WT "WRONGTYPE Operation against a key holding the wrong kind of value"

static void test_strings(void **state)
{
	struct tdb t;
	struct store_cmd c;

	tdb_open(&t);
	set(&t, 100, "k", "v1", 0, 0, 0, "OK");
	get(&t, 100, "k", "v1");
	/* NX on an existing key: nil, unchanged; XX on a missing key. */
	set(&t, 100, "k", "v2", STORE_SET_NX, 0, 0, NULL);
	set(&t, 100, "nokey", "v", STORE_SET_XX, 0, 0, NULL);
	get(&t, 100, "nokey", NULL);
	set(&t, 100, "k", "v2", STORE_SET_XX, 0, 0, "OK");
	/* GET returns the old value. */
	set(&t, 100, "k", "v3", STORE_SET_GET, 0, 0, "v2");
	set(&t, 100, "fresh", "v", STORE_SET_GET, 0, 0, NULL);
	set(&t, 100, "k", "v4", STORE_SET_GET | STORE_SET_NX, 0, 0, "v3");
	get(&t, 100, "k", "v3");
	/* TTL relative to the entry's time, and absolute. */
	set(&t, 100, "ttl", "x", 0, STORE_EXPIRE_TTL, 50, "OK");
	get(&t, 149, "ttl", "x");
	get(&t, 150, "ttl", NULL);
	set(&t, 100, "at", "x", 0, STORE_EXPIRE_AT, 130, "OK");
	get(&t, 129, "at", "x");
	get(&t, 130, "at", NULL);
	/* KEEPTTL keeps it; a plain SET clears it. */
	set(&t, 110, "ttl", "y", STORE_SET_KEEPTTL, 0, 0, "OK");
	get(&t, 149, "ttl", "y");
	get(&t, 150, "ttl", NULL);
	set(&t, 120, "ttl", "z", 0, STORE_EXPIRE_TTL, 10, "OK");
	set(&t, 125, "ttl", "z2", 0, 0, 0, "OK");
	get(&t, 10000, "ttl", "z2");
	/* A lapsed key is absent for NX at the entry's time. */
	set(&t, 200, "at", "again", STORE_SET_NX, 0, 0, "OK");
	get(&t, 200, "at", "again");
	/* Invalid combinations. */
	c = kcmd(STORE_OP_KV_SET, "k");
	c.flags = STORE_SET_NX | STORE_SET_XX;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	c.flags = STORE_SET_KEEPTTL;
	c.kind = STORE_EXPIRE_TTL;
	c.ttl_ms = 5;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	c.flags = 0;
	c.ttl_ms = 0;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND,
	          "ERR invalid expire time");
	tdb_close(&t);
}

static void test_multi_and_cas(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice pairs[4] = {S("a"), S("1"), S("b"), S("2")};
	struct store_slice keys[4] = {S("a"), S("x"), S("b"), S("h")};
	struct store_slice hf[2] = {S("f"), S("v")};
	struct tres x;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_MSET, "");
	c.items.n = 4;
	c.items.v = pairs;
	do_str(&t, false, 1, &c, "OK");
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 2;
	c.items.v = hf;
	do_int(&t, false, 1, &c, 1);
	/* MGET: nil for missing and non-string keys. */
	c = kcmd(STORE_OP_KV_MGET, "");
	c.items.n = 4;
	c.items.v = keys;
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), "1");
	assert_true(tres_is_nil(&x));
	assert_string_equal(tres_bytes(&x, NULL), "2");
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	/* GET on a hash: WRONGTYPE. */
	c = kcmd(STORE_OP_KV_GET, "h");
	do_status(&t, true, 1, &c, STORE_WRONGTYPE, WT);
	c = kcmd(STORE_OP_KV_SET, "h");
	c.value = S("x");
	c.flags = STORE_SET_GET;
	do_status(&t, false, 1, &c, STORE_WRONGTYPE, WT);
	/* (that SET GET was refused, the hash is intact) */
	c = kcmd(STORE_OP_KV_HGET, "h");
	c.arg = S("f");
	do_str(&t, true, 1, &c, "v");
	/* DEL counts keys of any type; a plain SET replaces a hash. */
	c = kcmd(STORE_OP_KV_DEL, "");
	c.items.n = 3;
	c.items.v = keys; /* a, x, b */
	do_int(&t, false, 1, &c, 2);
	set(&t, 1, "h", "str", 0, 0, 0, "OK");
	get(&t, 1, "h", "str");
	c = kcmd(STORE_OP_KV_HGET, "h");
	c.arg = S("f");
	do_status(&t, true, 1, &c, STORE_WRONGTYPE, WT);

	/* CAS: true on match (keeps the TTL), false on mismatch, nil. */
	set(&t, 10, "c", "old", 0, STORE_EXPIRE_TTL, 100, "OK");
	c = kcmd(STORE_OP_KV_CAS, "c");
	c.arg = S("nope");
	c.value = S("new");
	tapply(&x, &t, G, 20, &c);
	assert_false(tres_bool(&x));
	tres_free(&x);
	c.arg = S("old");
	tapply(&x, &t, G, 20, &c);
	assert_true(tres_bool(&x));
	tres_free(&x);
	get(&t, 109, "c", "new");
	get(&t, 110, "c", NULL);
	c = kcmd(STORE_OP_KV_CAS, "missing");
	c.arg = S("a");
	c.value = S("b");
	do_str(&t, false, 20, &c, NULL);
	c = kcmd(STORE_OP_KV_CAS, "c");
	c.arg = S("new");
	c.value = S("newer");
	c.kind = STORE_EXPIRE_TTL;
	c.ttl_ms = 1000;
	tapply(&x, &t, G, 30, &c);
	assert_true(tres_bool(&x));
	tres_free(&x);
	get(&t, 1029, "c", "newer");
	/* MSET needs pairs. */
	c = kcmd(STORE_OP_KV_MSET, "");
	c.items.n = 3;
	c.items.v = pairs;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	tdb_close(&t);
}

static void test_locks(void **state)
{
	struct tdb t;
	struct store_cmd c;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_LOCK, "L");
	c.arg = S("w1");
	c.ttl_ms = 100;
	do_str(&t, false, 0, &c, "OK");
	do_str(&t, false, 10, &c, "OK"); /* same owner: idempotent */
	get(&t, 10, "L", "w1");
	c.arg = S("w2");
	do_status(&t, false, 20, &c, STORE_ERR,
	          "DISTLOCK lock is held by another owner");
	/* Expired at 110 (refreshed at 10): w2 takes it. */
	do_str(&t, false, 110, &c, "OK");
	c = kcmd(STORE_OP_KV_UNLOCK, "L");
	c.arg = S("w1");
	do_status(&t, false, 120, &c, STORE_ERR,
	          "DISTLOCK caller is not the lock owner");
	c = kcmd(STORE_OP_KV_EXTEND, "L");
	c.arg = S("w1");
	c.ttl_ms = 50;
	do_status(&t, false, 120, &c, STORE_ERR,
	          "DISTLOCK caller is not the lock owner");
	c.arg = S("w2");
	do_int(&t, false, 120, &c, 1);
	get(&t, 169, "L", "w2");
	get(&t, 170, "L", NULL);
	do_status(&t, false, 170, &c, STORE_ERR,
	          "DISTLOCK lock does not exist or has expired");
	c = kcmd(STORE_OP_KV_UNLOCK, "L");
	c.arg = S("w2");
	do_int(&t, false, 170, &c, 1); /* missing: 1 as well */
	c = kcmd(STORE_OP_KV_LOCK, "L");
	c.arg = S("w3");
	c.ttl_ms = 1000;
	do_str(&t, false, 200, &c, "OK");
	c = kcmd(STORE_OP_KV_UNLOCK, "L");
	c.arg = S("w3");
	do_int(&t, false, 210, &c, 1);
	get(&t, 210, "L", NULL);
	c = kcmd(STORE_OP_KV_LOCK, "L");
	c.arg = S("w3");
	c.ttl_ms = 0;
	do_status(&t, false, 210, &c, STORE_BAD_COMMAND, NULL);
	tdb_close(&t);
}

static void ratelimit(struct tdb *t, uint64_t now, uint64_t count,
                      const char *verdict, int64_t n, int64_t remaining,
                      int64_t reset)
{
	struct store_cmd c = kcmd(STORE_OP_KV_RATELIMIT, "rl");
	struct tres x;

	c.window_ms = 1000;
	c.max = 10;
	c.count = count;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), verdict);
	assert_int_equal(tres_i64(&x), n);
	assert_int_equal(tres_i64(&x), remaining);
	assert_int_equal(tres_i64(&x), reset);
	tres_free(&x);
}

static void test_ratelimit(void **state)
{
	struct tdb t;
	struct store_cmd c;

	tdb_open(&t);
	ratelimit(&t, 1000, 4, "allowed", 4, 6, 1000);
	ratelimit(&t, 1500, 6, "allowed", 10, 0, 500);
	ratelimit(&t, 1600, 1, "denied", 10, 0, 400);
	/* A new window starts at the first call past the old one (2250),
	 * with the previous count weighing fully at first: denied. */
	ratelimit(&t, 2250, 2, "denied", 10, 0, 1000);
	ratelimit(&t, 2250, 1, "denied", 10, 0, 1000);
	/* At 2500: round(10 * 750 / 1000) = round(7.5) = 8, + 2 = 10. */
	ratelimit(&t, 2500, 2, "allowed", 10, 0, 750);
	/* At 2600: round(6.5) = 7 + 2 = 9: one more fits. */
	ratelimit(&t, 2600, 1, "allowed", 10, 0, 650);
	ratelimit(&t, 2600, 1, "denied", 10, 0, 650);
	/* Two windows later: a clean start. */
	ratelimit(&t, 5000, 1, "allowed", 1, 9, 1000);
	/* Validation and type. */
	c = kcmd(STORE_OP_KV_RATELIMIT, "rl");
	c.window_ms = 0;
	c.max = 1;
	c.count = 1;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	c = kcmd(STORE_OP_KV_GET, "rl");
	do_status(&t, true, 5001, &c, STORE_WRONGTYPE, WT);
	set(&t, 1, "s", "x", 0, 0, 0, "OK");
	c = kcmd(STORE_OP_KV_RATELIMIT, "s");
	c.window_ms = 10;
	c.max = 1;
	c.count = 1;
	do_status(&t, false, 1, &c, STORE_WRONGTYPE, WT);
	tdb_close(&t);
}

static void test_fetch_or_compute(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_FOC, "page");
	c.ttl_ms = 60000;
	c.value = S("hint-1");
	c.arg = S("tok-A");
	tapply(&x, &t, G, 100, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_string_equal(tres_bytes(&x, NULL), "compute");
	assert_string_equal(tres_bytes(&x, NULL), "hint-1");
	assert_string_equal(tres_bytes(&x, NULL), "tok-A");
	tres_free(&x);
	/* A second caller waits on A's lease. */
	c.arg = S("tok-B");
	tapply(&x, &t, G, 200, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "wait");
	assert_string_equal(tres_bytes(&x, NULL), "tok-A");
	tres_free(&x);
	/* The lease is capped at 30 s: at 30100 B gets it. */
	tapply(&x, &t, G, 30100, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_string_equal(tres_bytes(&x, NULL), "compute");
	tres_free(&x);
	/* A's result is refused now; B's is stored. */
	c = kcmd(STORE_OP_KV_FOC_RESULT, "page");
	c.arg = S("tok-A");
	c.value = S("<html>");
	c.ttl_ms = 500;
	do_status(&t, false, 30200, &c, STORE_ERR, NULL);
	c.arg = S("tok-B");
	do_str(&t, false, 30200, &c, "OK");
	get(&t, 30200, "page", "<html>");
	c = kcmd(STORE_OP_KV_FOC, "page");
	c.ttl_ms = 60000;
	c.arg = S("tok-C");
	tapply(&x, &t, G, 30300, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "hit");
	assert_string_equal(tres_bytes(&x, NULL), "<html>");
	tres_free(&x);
	/* After the value lapses, C computes and fails. */
	tapply(&x, &t, G, 30700, &c);
	assert_string_equal((tres_array(&x), tres_bytes(&x, NULL)), "compute");
	tres_free(&x);
	c = kcmd(STORE_OP_KV_FOC_ERROR, "page");
	c.arg = S("tok-C");
	c.value = S("backend down");
	do_str(&t, false, 30800, &c, "OK");
	do_status(&t, false, 30800, &c, STORE_ERR, NULL);
	c = kcmd(STORE_OP_KV_FOC, "page");
	c.ttl_ms = 100;
	c.arg = S("tok-D");
	tapply(&x, &t, G, 30900, &c);
	assert_string_equal((tres_array(&x), tres_bytes(&x, NULL)), "compute");
	tres_free(&x);
	tdb_close(&t);
}

static void test_hashes(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice fv[6] = {S("f1"), S("a"),  S("f2"),
	                            S("b"),  S("f1"), S("c")};
	struct store_slice fields[3] = {S("f2"), S("zz"), S("f1")};
	struct tres x;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 6;
	c.items.v = fv; /* f1 twice: counted once, last value wins */
	do_int(&t, false, 1, &c, 2);
	c.items.n = 2;
	do_int(&t, false, 1, &c, 0);
	c = kcmd(STORE_OP_KV_HGET, "h");
	c.arg = S("f1");
	do_str(&t, true, 1, &c, "a");
	c.arg = S("none");
	do_str(&t, true, 1, &c, NULL);
	c = kcmd(STORE_OP_KV_HMGET, "h");
	c.items.n = 3;
	c.items.v = fields;
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_string_equal(tres_bytes(&x, NULL), "b");
	assert_true(tres_is_nil(&x));
	assert_string_equal(tres_bytes(&x, NULL), "a");
	tres_free(&x);
	c = kcmd(STORE_OP_KV_HGETALL, "h");
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_map(&x), 2);
	assert_string_equal(tres_map_key(&x), "f1");
	assert_string_equal(tres_bytes(&x, NULL), "a");
	assert_string_equal(tres_map_key(&x), "f2");
	assert_string_equal(tres_bytes(&x, NULL), "b");
	tres_free(&x);
	c = kcmd(STORE_OP_KV_HGETALL, "missing");
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_map(&x), 0);
	tres_free(&x);
	/* HDEL removes; the emptied hash disappears. */
	c = kcmd(STORE_OP_KV_HDEL, "h");
	c.items.n = 2;
	c.items.v = fields; /* f2, zz */
	do_int(&t, false, 1, &c, 1);
	c.items.n = 3;
	do_int(&t, false, 1, &c, 1);
	c = kcmd(STORE_OP_KV_DEL, "");
	c.items.n = 1;
	c.items.v = (struct store_slice[]){S("h")};
	do_int(&t, false, 1, &c, 0);
	/* HSET on a string: WRONGTYPE; bad arity refused. */
	set(&t, 1, "s", "x", 0, 0, 0, "OK");
	c = kcmd(STORE_OP_KV_HSET, "s");
	c.items.n = 2;
	c.items.v = fv;
	do_status(&t, false, 1, &c, STORE_WRONGTYPE, WT);
	c.items.n = 1;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	tdb_close(&t);
}

static void lrange(struct tdb *t, int64_t start, int64_t stop, const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_LRANGE, "l");
	struct tres x;
	char got[256] = "";
	uint32_t n;

	c.start = start;
	c.stop = stop;
	tread(&x, t, G, 1, &c);
	n = tres_array(&x);
	for (uint32_t i = 0; i < n; i++) {
		strcat(got, tres_bytes(&x, NULL));
		strcat(got, i + 1 < n ? "," : "");
	}
	assert_string_equal(got, want);
	tres_free(&x);
}

static void test_lists(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice abc[3] = {S("a"), S("b"), S("c")};
	struct store_slice xy[2] = {S("x"), S("y")};
	struct tres x;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_RPUSH, "l");
	c.items.n = 3;
	c.items.v = abc;
	do_int(&t, false, 1, &c, 3);
	c = kcmd(STORE_OP_KV_LPUSH, "l");
	c.items.n = 2;
	c.items.v = xy;
	do_int(&t, false, 1, &c, 5);
	lrange(&t, 0, -1, "y,x,a,b,c");
	lrange(&t, 1, 2, "x,a");
	lrange(&t, -2, -1, "b,c");
	lrange(&t, -100, 1, "y,x");
	lrange(&t, 3, 100, "b,c");
	lrange(&t, 4, 3, "");
	lrange(&t, 5, 9, "");
	lrange(&t, 0, -6, "");
	c = kcmd(STORE_OP_KV_LPOP, "l");
	do_str(&t, false, 1, &c, "y");
	c = kcmd(STORE_OP_KV_RPOP, "l");
	c.count = 2;
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "c");
	assert_string_equal(tres_bytes(&x, NULL), "b");
	tres_free(&x);
	lrange(&t, 0, -1, "x,a");
	c.count = 10;
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 2);
	tres_free(&x);
	/* Empty lists vanish; pops of a missing list are nil. */
	do_str(&t, false, 1, &c, NULL);
	c = kcmd(STORE_OP_KV_LPOP, "l");
	do_str(&t, false, 1, &c, NULL);
	lrange(&t, 0, -1, "");
	c = kcmd(STORE_OP_KV_RPUSH, "l");
	c.items.n = 0;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND, NULL);
	tdb_close(&t);
}

static void test_sets(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice m[4] = {S("b"), S("a"), S("b"), S("c")};
	struct tres x;

	tdb_open(&t);
	c = kcmd(STORE_OP_KV_SADD, "s");
	c.items.n = 4;
	c.items.v = m;
	do_int(&t, false, 1, &c, 3);
	do_int(&t, false, 1, &c, 0);
	c = kcmd(STORE_OP_KV_SMEMBERS, "s");
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_string_equal(tres_bytes(&x, NULL), "a");
	assert_string_equal(tres_bytes(&x, NULL), "b");
	assert_string_equal(tres_bytes(&x, NULL), "c");
	tres_free(&x);
	c = kcmd(STORE_OP_KV_SISMEMBER, "s");
	c.arg = S("a");
	do_int(&t, true, 1, &c, 1);
	c.arg = S("z");
	do_int(&t, true, 1, &c, 0);
	c = kcmd(STORE_OP_KV_SREM, "s");
	c.items.n = 2;
	c.items.v = m + 1; /* a, b */
	do_int(&t, false, 1, &c, 2);
	c.items.n = 3;
	c.items.v = m + 1; /* a, b, c */
	do_int(&t, false, 1, &c, 1);
	c = kcmd(STORE_OP_KV_SMEMBERS, "s");
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	tdb_close(&t);
}

static struct store_slice score(uint8_t *buf, double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	be_put64(buf, u);
	return (struct store_slice){buf, 8};
}

static void zrange(struct tdb *t, int64_t start, int64_t stop, bool scores,
                   const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_ZRANGE, "z");
	struct tres x;
	char got[256] = "";
	uint32_t n;

	c.start = start;
	c.stop = stop;
	c.flags = scores ? STORE_ZRANGE_WITHSCORES : 0;
	tread(&x, t, G, 1, &c);
	n = tres_array(&x);
	for (uint32_t i = 0; i < n; i++) {
		strcat(got, tres_bytes(&x, NULL));
		strcat(got, i + 1 < n ? "," : "");
	}
	assert_string_equal(got, want);
	tres_free(&x);
}

static uint64_t bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

static void zrange_f(struct tdb *t, int64_t start, int64_t stop, uint8_t flags,
                     const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_ZRANGE, "z");
	struct tres x;
	char got[256] = "";
	uint32_t n;

	c.start = start;
	c.stop = stop;
	c.flags = flags;
	tread(&x, t, G, 1, &c);
	n = tres_array(&x);
	for (uint32_t i = 0; i < n; i++) {
		strcat(got, tres_bytes(&x, NULL));
		strcat(got, i + 1 < n ? "," : "");
	}
	assert_string_equal(got, want);
	tres_free(&x);
}

static void test_sorted_sets(void **state)
{
	struct tdb t;
	struct store_cmd c;
	uint8_t b[6][8];
	struct store_slice items[10];

	tdb_open(&t);
	items[0] = score(b[0], 2.5);
	items[1] = S("b");
	items[2] = score(b[1], -1);
	items[3] = S("neg");
	items[4] = score(b[2], 10);
	items[5] = S("c");
	items[6] = score(b[3], 0.1);
	items[7] = S("a");
	c = kcmd(STORE_OP_KV_ZADD, "z");
	c.items.n = 8;
	c.items.v = items;
	do_int(&t, false, 1, &c, 4);
	zrange(&t, 0, -1, false, "neg,a,b,c");
	zrange(&t, 0, 1, true, "neg,-1,a,0.1");
	zrange(&t, -1, -1, true, "c,10");
	/* Updating a score moves the member. */
	items[0] = score(b[4], 100);
	items[1] = S("neg");
	c.items.n = 2;
	do_int(&t, false, 1, &c, 0);
	zrange(&t, 0, -1, false, "a,b,c,neg");
	c = kcmd(STORE_OP_KV_ZSCORE, "z");
	c.arg = S("b");
	do_str(&t, true, 1, &c, "2.5");
	c.arg = S("neg");
	do_str(&t, true, 1, &c, "100");
	c.arg = S("none");
	do_str(&t, true, 1, &c, NULL);
	c = kcmd(STORE_OP_KV_ZREM, "z");
	c.items.n = 2;
	c.items.v = (struct store_slice[]){S("a"), S("zz")};
	do_int(&t, false, 1, &c, 1);
	zrange(&t, 0, -1, false, "b,c,neg");
	/* REV by index; BYSCORE (bounds as IEEE bits), both directions */
	zrange_f(&t, 0, 1, STORE_ZRANGE_REV, "neg,c");
	zrange_f(&t, 0, -1, STORE_ZRANGE_REV | STORE_ZRANGE_WITHSCORES,
	         "neg,100,c,10,b,2.5");
	zrange_f(&t, (int64_t)bits(2.5), (int64_t)bits(10),
	         STORE_ZRANGE_BYSCORE, "b,c");
	zrange_f(&t, (int64_t)bits(2.5), (int64_t)bits(10),
	         STORE_ZRANGE_BYSCORE | STORE_ZRANGE_MIN_EXCL, "c");
	zrange_f(&t, (int64_t)bits(-1), (int64_t)bits(1000),
	         STORE_ZRANGE_BYSCORE | STORE_ZRANGE_REV |
	             STORE_ZRANGE_MAX_EXCL,
	         "neg,c,b");
	zrange_f(&t, (int64_t)bits(11), (int64_t)bits(99), STORE_ZRANGE_BYSCORE,
	         "");
	/* ZRANK / ZREVRANK (kind 1) */
	c = kcmd(STORE_OP_KV_ZRANK, "z");
	c.arg = S("b");
	do_int(&t, true, 1, &c, 0);
	c.arg = S("neg");
	do_int(&t, true, 1, &c, 2);
	c.kind = 1;
	do_int(&t, true, 1, &c, 0);
	c.arg = S("b");
	do_int(&t, true, 1, &c, 2);
	c.arg = S("none");
	do_str(&t, true, 1, &c, NULL);
	c.key = S("nokey");
	do_str(&t, true, 1, &c, NULL);
	/* NaN is refused. */
	items[0] = score(b[5], 0.0 / 0.0);
	items[1] = S("n");
	c = kcmd(STORE_OP_KV_ZADD, "z");
	c.items.n = 2;
	c.items.v = items;
	do_status(&t, false, 1, &c, STORE_BAD_COMMAND,
	          "ERR value is not a valid float");
	tdb_close(&t);
}

/* One KV_ZADD_OPT of one (score, member) pair, or two when m2 is set. */
static void zadd_opt(struct tres *x, struct tdb *t, const char *key,
                     uint8_t flags, double s1, const char *m1, double s2,
                     const char *m2)
{
	uint8_t b[2][8];
	struct store_slice items[4] = {score(b[0], s1), S(m1), score(b[1], s2),
	                               S(m2 != NULL ? m2 : "")};
	struct store_cmd c = kcmd(STORE_OP_KV_ZADD_OPT, key);

	c.flags = flags;
	c.items.n = m2 != NULL ? 4 : 2;
	c.items.v = items;
	tapply(x, t, G, 1, &c);
}

static void zadd_opt_int(struct tdb *t, uint8_t flags, double s1,
                         const char *m1, double s2, const char *m2,
                         int64_t want)
{
	struct tres x;
	zadd_opt(&x, t, "z", flags, s1, m1, s2, m2);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_i64(&x), want);
	tres_free(&x);
}

static void zadd_opt_str(struct tdb *t, uint8_t flags, double s1,
                         const char *m1, const char *want)
{
	struct tres x;
	zadd_opt(&x, t, "z", flags, s1, m1, 0, NULL);
	expect_str(&x, want);
	tres_free(&x);
}

static void zadd_opt_err(struct tdb *t, const char *key, uint8_t flags,
                         double s1, const char *m1, double s2, const char *m2,
                         uint8_t status, const char *msg)
{
	struct tres x;
	zadd_opt(&x, t, key, flags, s1, m1, s2, m2);
	assert_int_equal(tres_status(&x), status);
	assert_string_equal(tres_bytes(&x, NULL), msg);
	tres_free(&x);
}

/* KV_ZADD_OPT: Redis's NX, XX, GT, LT, CH and INCR, pair by pair. */
static void zadd_options_on(struct tdb *t)
{
	struct store_cmd c;

	/* XX on an absent key creates nothing. */
	zadd_opt_int(t, STORE_ZADD_XX, 1, "a", 2, "b", 0);
	c = kcmd(STORE_OP_KV_EXISTS, "");
	c.items.n = 1;
	c.items.v = (struct store_slice[]){S("z")};
	do_int(t, true, 1, &c, 0);
	zadd_opt_str(t, STORE_ZADD_XX | STORE_ZADD_INCR, 1, "a", NULL);
	/* NX adds the new members only; CH counts changes too. */
	zadd_opt_int(t, STORE_ZADD_NX, 1, "a", 2, "b", 2);
	zadd_opt_int(t, STORE_ZADD_NX, 5, "a", 3, "c", 1);
	zrange(t, 0, -1, true, "a,1,b,2,c,3");
	zadd_opt_int(t, STORE_ZADD_XX, 5, "a", 4, "d", 0);
	zrange(t, 0, -1, true, "b,2,c,3,a,5");
	zadd_opt_int(t, STORE_ZADD_XX | STORE_ZADD_CH, 6, "a", 3, "c", 1);
	zadd_opt_int(t, STORE_ZADD_CH, 7, "a", 1, "e", 2);
	/* GT / LT update only upward / downward, but still add. */
	zadd_opt_int(t, STORE_ZADD_GT | STORE_ZADD_CH, 0, "b", 9, "c", 1);
	zadd_opt_int(t, STORE_ZADD_LT | STORE_ZADD_CH, 8, "a", 4, "f", 1);
	zadd_opt_int(t, STORE_ZADD_LT | STORE_ZADD_XX, 0, "c", 0, "g", 0);
	zrange(t, 0, -1, true, "c,0,e,1,b,2,f,4,a,7");
	/* ZADD CH with the same score changes nothing. */
	zadd_opt_int(t, STORE_ZADD_CH, 7, "a", 4, "f", 0);
	/* INCR: the new score; nil when the options stop it. */
	zadd_opt_str(t, STORE_ZADD_INCR, 2.5, "a", "9.5");
	zadd_opt_str(t, STORE_ZADD_INCR, 3, "new", "3");
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_NX, 1, "a", NULL);
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_XX, 1, "zz", NULL);
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_GT, -1, "a", NULL);
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_LT, -1, "a", "8.5");
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_GT, 0, "a", NULL);
	zadd_opt_str(t, STORE_ZADD_INCR, 0, "a", "8.5");
	zadd_opt_str(t, STORE_ZADD_INCR | STORE_ZADD_NX, 1, "nx", "1");
	zrange(t, 0, -1, true, "c,0,e,1,nx,1,b,2,new,3,f,4,a,8.5");
	/* INCR to NaN: refused, the score kept. */
	zadd_opt_str(t, STORE_ZADD_INCR, 1.0 / 0.0, "b", "inf");
	zadd_opt_err(t, "z", STORE_ZADD_INCR, -1.0 / 0.0, "b", 0, NULL,
	             STORE_ERR, "ERR resulting score is not a number (NaN)");
	c = kcmd(STORE_OP_KV_ZSCORE, "z");
	c.arg = S("b");
	do_str(t, true, 1, &c, "inf");
	/* A member twice in one command, on a new key. */
	{
		struct tres x;
		zadd_opt(&x, t, "z2", STORE_ZADD_CH, 1, "m", 2, "m");
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_i64(&x), 2);
		tres_free(&x);
		c = kcmd(STORE_OP_KV_LEN, "z2");
		c.kind = 5;
		do_int(t, true, 1, &c, 1);
	}
	/* Flags Redis refuses together, and wrong types. */
	zadd_opt_err(t, "z", STORE_ZADD_NX | STORE_ZADD_XX, 1, "a", 0, NULL,
	             STORE_BAD_COMMAND,
	             "ERR XX and NX options at the same time are not "
	             "compatible");
	zadd_opt_err(t, "z", STORE_ZADD_GT | STORE_ZADD_LT, 1, "a", 0, NULL,
	             STORE_BAD_COMMAND,
	             "ERR GT, LT, and/or NX options at the same time are not "
	             "compatible");
	zadd_opt_err(t, "z", STORE_ZADD_NX | STORE_ZADD_GT, 1, "a", 0, NULL,
	             STORE_BAD_COMMAND,
	             "ERR GT, LT, and/or NX options at the same time are not "
	             "compatible");
	zadd_opt_err(t, "z", STORE_ZADD_INCR, 1, "a", 2, "b", STORE_BAD_COMMAND,
	             "ERR INCR option supports a single increment-element "
	             "pair");
	zadd_opt_err(t, "z", 0x40, 1, "a", 0, NULL, STORE_BAD_COMMAND,
	             "ERR syntax error");
	set(t, 1, "str", "v", 0, 0, 0, "OK");
	zadd_opt_err(t, "str", STORE_ZADD_NX, 1, "a", 0, NULL, STORE_WRONGTYPE,
	             WT);
	zrange(t, 0, -1, true, "c,0,e,1,nx,1,new,3,f,4,a,8.5,b,inf");
}

static void test_zadd_options(void **state)
{
	struct tdb t, u;

	(void)state;
	tdb_open(&t);
	zadd_options_on(&t);
	/* The same commands leave a second replica byte for byte the
	 * same. */
	tdb_open(&u);
	zadd_options_on(&u);
	assert_int_equal(tdb_hash_group(&t, G), tdb_hash_group(&u, G));
	tdb_close(&u);
	tdb_close(&t);
}

/* KV_POP: LPOP/RPOP key 0 answer [] for a list, nil for no key. */
static void test_pop_count_zero(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice abc[3] = {S("a"), S("b"), S("c")};
	struct tres x;

	(void)state;
	tdb_open(&t);
	c = kcmd(STORE_OP_KV_RPUSH, "l");
	c.items.n = 3;
	c.items.v = abc;
	do_int(&t, false, 1, &c, 3);
	c = kcmd(STORE_OP_KV_POP, "l");
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	lrange(&t, 0, -1, "a,b,c");
	c.kind = 1;
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	/* With a count it pops as LPOP/RPOP do, from either end. */
	c.count = 2;
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "c");
	assert_string_equal(tres_bytes(&x, NULL), "b");
	tres_free(&x);
	c.kind = 0;
	c.count = 5;
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_array(&x), 1);
	assert_string_equal(tres_bytes(&x, NULL), "a");
	tres_free(&x);
	c.count = 0;
	do_str(&t, false, 1, &c, NULL);
	set(&t, 1, "s", "v", 0, 0, 0, "OK");
	c.key = S("s");
	do_status(&t, false, 1, &c, STORE_WRONGTYPE, WT);
	tdb_close(&t);
}

static void test_expire(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice fv[2] = {S("f"), S("v")};
	uint8_t *cmd;
	size_t len;
	struct fsm_cmd fc;
	struct fsm_entry e;
	struct fsm_result r;
	struct tres x;
	uint64_t before;

	tdb_open(&t);
	before = tdb_hash_group_x(&t, G, true);
	set(&t, 100, "a", "1", 0, STORE_EXPIRE_TTL, 10, "OK");
	set(&t, 100, "b", "1", 0, STORE_EXPIRE_TTL, 10, "OK");
	set(&t, 100, "keep", "1", 0, STORE_EXPIRE_TTL, 1000, "OK");
	/* b is rewritten without a TTL: its index entry goes. */
	set(&t, 105, "b", "2", 0, 0, 0, "OK");
	c = kcmd(STORE_OP_KV_LOCK, "lock");
	c.arg = S("o");
	c.ttl_ms = 5;
	do_str(&t, false, 100, &c, "OK");
	c = kcmd(STORE_OP_KV_FOC, "foc");
	c.ttl_ms = 5;
	c.arg = S("tok");
	tapply(&x, &t, G, 100, &c);
	tres_free(&x);
	assert_int_equal(store_expire_scan(t.s, G, 200, 1, &cmd, &len), 0);
	assert_non_null(cmd);
	free(cmd);
	assert_int_equal(store_expire_scan(t.s, G, 200, 100, &cmd, &len), 0);
	fc.data = cmd;
	fc.len = len;
	e = (struct fsm_entry){G, t.next_index[G]++, 1, 200, 1, &fc};
	memset(&r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, &r), 0);
	free(cmd);
	tres_init(&x, r.data, r.len);
	assert_int_equal(tres_i64(&x), 3); /* a, lock, foc lease */
	tres_free(&x);
	get(&t, 200, "b", "2");
	get(&t, 200, "keep", "1");
	assert_int_equal(store_expire_scan(t.s, G, 200, 100, &cmd, &len), 0);
	assert_null(cmd);
	/* Collections are reclaimed with their elements when lapsed:
	 * a hash written over a lapsed string gets a clean slate. */
	set(&t, 300, "h", "x", 0, STORE_EXPIRE_TTL, 5, "OK");
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 2;
	c.items.v = fv;
	do_int(&t, false, 310, &c, 1);
	/* Delete everything: only the applied index remains. */
	c = kcmd(STORE_OP_KV_DEL, "");
	c.items.n = 4;
	c.items.v = (struct store_slice[]){S("b"), S("keep"), S("h"), S("x")};
	do_int(&t, false, 400, &c, 3);
	assert_int_equal(tdb_hash_group_x(&t, G, true), before);
	tdb_close(&t);
}

/* The keyspace commands (store/kvkey.c): INCRBY, EXISTS, KEYINFO, LEN,
 * EXPIRE_SET, APPEND, STRLEN, GETDEL, with expiry from the entry's time
 * and the expiry index left clean. */
static void test_keyspace(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice fv[4] = {S("f"), S("v"), S("g"), S("w")};
	struct tres x;
	uint64_t before;

	(void)state;
	tdb_open(&t);
	before = tdb_hash_group_x(&t, G, true);
	c = kcmd(STORE_OP_KV_INCRBY, "n");
	c.delta = 5;
	do_int(&t, false, 100, &c, 5);
	c.delta = -7;
	do_int(&t, false, 100, &c, -2);
	get(&t, 100, "n", "-2");
	set(&t, 100, "s", "abc", 0, STORE_EXPIRE_TTL, 1000, "OK");
	c = kcmd(STORE_OP_KV_INCRBY, "s");
	c.delta = 1;
	do_status(&t, false, 100, &c, STORE_ERR,
	          "ERR value is not an integer or out of range");
	set(&t, 100, "m", "9223372036854775807", 0, 0, 0, "OK");
	c = kcmd(STORE_OP_KV_INCRBY, "m");
	c.delta = 1;
	do_status(&t, false, 100, &c, STORE_ERR,
	          "ERR increment or decrement would overflow");
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 4;
	c.items.v = fv;
	do_int(&t, false, 100, &c, 2);
	c = kcmd(STORE_OP_KV_INCRBY, "h");
	c.delta = 1;
	do_status(&t, false, 100, &c, STORE_WRONGTYPE, WT);
	/* EXISTS counts repeats */
	c = kcmd(STORE_OP_KV_EXISTS, "");
	c.items.n = 4;
	c.items.v = (struct store_slice[]){S("n"), S("none"), S("n"), S("h")};
	do_int(&t, true, 100, &c, 3);
	/* TYPE, TTL, PTTL */
	c = kcmd(STORE_OP_KV_KEYINFO, "h");
	c.kind = STORE_KEYINFO_TYPE;
	do_str(&t, true, 100, &c, "hash");
	c.key = S("none");
	do_str(&t, true, 100, &c, "none");
	c.key = S("s");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 400, &c, 700);
	c.kind = STORE_KEYINFO_TTL;
	do_int(&t, true, 400, &c, 1);
	c.key = S("n");
	do_int(&t, true, 400, &c, -1);
	c.key = S("none");
	do_int(&t, true, 400, &c, -2);
	/* LEN of the asked type */
	c = kcmd(STORE_OP_KV_LEN, "h");
	c.kind = 2;
	do_int(&t, true, 100, &c, 2);
	c.kind = 3;
	do_status(&t, true, 100, &c, STORE_WRONGTYPE, WT);
	c.key = S("none");
	do_int(&t, true, 100, &c, 0);
	/* EXPIRE from the entry's time; PERSIST; a past deadline deletes */
	c = kcmd(STORE_OP_KV_EXPIRE_SET, "n");
	c.kind = STORE_EXPIRE_TTL;
	c.delta = 50;
	do_int(&t, false, 200, &c, 1);
	c = kcmd(STORE_OP_KV_KEYINFO, "n");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 210, &c, 40);
	c = kcmd(STORE_OP_KV_EXPIRE_SET, "n");
	c.kind = STORE_EXPIRE_NONE;
	do_int(&t, false, 220, &c, 1);
	do_int(&t, false, 220, &c, 0);
	c = kcmd(STORE_OP_KV_EXPIRE_SET, "none");
	c.kind = STORE_EXPIRE_TTL;
	c.delta = 10;
	do_int(&t, false, 220, &c, 0);
	c = kcmd(STORE_OP_KV_EXPIRE_SET, "h");
	c.kind = STORE_EXPIRE_TTL;
	c.delta = 0;
	do_int(&t, false, 220, &c, 1);
	c = kcmd(STORE_OP_KV_LEN, "h");
	c.kind = 2;
	do_int(&t, true, 220, &c, 0);
	/* APPEND keeps the expiry; STRLEN; GETDEL */
	c = kcmd(STORE_OP_KV_APPEND, "s");
	c.value = S("de");
	do_int(&t, false, 300, &c, 5);
	get(&t, 300, "s", "abcde");
	c = kcmd(STORE_OP_KV_STRLEN, "s");
	do_int(&t, true, 300, &c, 5);
	c = kcmd(STORE_OP_KV_KEYINFO, "s");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, 800);
	c = kcmd(STORE_OP_KV_GETDEL, "s");
	do_str(&t, false, 300, &c, "abcde");
	do_str(&t, false, 300, &c, NULL);
	c = kcmd(STORE_OP_KV_APPEND, "a");
	c.value = S("x");
	do_int(&t, false, 300, &c, 1);
	/* INCRBYFLOAT: Redis's long double text, the key keeps its TTL */
	set(&t, 300, "f", "10.50", 0, STORE_EXPIRE_TTL, 1000, "OK");
	c = kcmd(STORE_OP_KV_INCRBYFLOAT, "f");
	c.value = S("0.1");
	do_str(&t, false, 300, &c, "10.6");
	c.value = S("-5.6");
	do_str(&t, false, 300, &c, "5");
	c.value = S("5.0e3");
	do_str(&t, false, 300, &c, "5005");
	c = kcmd(STORE_OP_KV_KEYINFO, "f");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, 1000);
	c = kcmd(STORE_OP_KV_INCRBYFLOAT, "f");
	c.value = S("x");
	do_status(&t, false, 300, &c, STORE_ERR,
	          "ERR value is not a valid float");
	c.value = S(" 1");
	do_status(&t, false, 300, &c, STORE_ERR,
	          "ERR value is not a valid float");
	c.value = S("inf");
	do_status(&t, false, 300, &c, STORE_ERR,
	          "ERR increment would produce NaN or Infinity");
	c.key = S("nf");
	c.value = S("-0");
	do_str(&t, false, 300, &c, "0");
	c = kcmd(STORE_OP_KV_HSET, "fh");
	c.items.n = 2;
	c.items.v = fv;
	do_int(&t, false, 300, &c, 1);
	c = kcmd(STORE_OP_KV_INCRBYFLOAT, "fh");
	c.value = S("1");
	do_status(&t, false, 300, &c, STORE_WRONGTYPE, WT);
	c = kcmd(STORE_OP_KV_DEL, "");
	c.items.n = 3;
	c.items.v = (struct store_slice[]){S("f"), S("nf"), S("fh")};
	do_int(&t, false, 300, &c, 3);
	/* SETRANGE pads with zeros and keeps the TTL; GETEX */
	c = kcmd(STORE_OP_KV_SETRANGE, "sr");
	c.start = 2;
	c.value = S("xy");
	do_int(&t, false, 300, &c, 4);
	c.start = 0;
	c.value = S("ab");
	do_int(&t, false, 300, &c, 4);
	{
		struct store_cmd g = kcmd(STORE_OP_KV_GET, "sr");
		tread(&x, &t, G, 300, &g);
		assert_int_equal(tres_status(&x), STORE_OK);
		size_t gl = 0;
		const char *gp = tres_bytes(&x, &gl);
		assert_int_equal(gl, 4);
		assert_memory_equal(gp, "abxy", 4);
		tres_free(&x);
	}
	c.value = S("");
	c.start = 1000;
	do_int(&t, false, 300, &c, 4);
	c.start = -1;
	c.value = S("z");
	do_status(&t, false, 300, &c, STORE_ERR, "ERR offset is out of range");
	c.start = 64 << 20;
	do_status(&t, false, 300, &c, STORE_ERR,
	          "ERR string exceeds maximum allowed size "
	          "(proto-max-bulk-len)");
	c = kcmd(STORE_OP_KV_GETEX, "sr");
	c.kind = STORE_GETEX_TTL;
	c.delta = 500;
	do_str(&t, false, 300, &c, "abxy");
	c = kcmd(STORE_OP_KV_KEYINFO, "sr");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, 500);
	c = kcmd(STORE_OP_KV_SETRANGE, "sr");
	c.start = 4;
	c.value = S("!");
	do_int(&t, false, 300, &c, 5);
	c = kcmd(STORE_OP_KV_KEYINFO, "sr");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, 500);
	c = kcmd(STORE_OP_KV_GETEX, "sr");
	c.kind = STORE_GETEX_PERSIST;
	do_str(&t, false, 300, &c, "abxy!");
	c = kcmd(STORE_OP_KV_KEYINFO, "sr");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, -1);
	c = kcmd(STORE_OP_KV_GETEX, "sr");
	c.kind = STORE_GETEX_AT;
	c.delta = 1000;
	do_str(&t, false, 300, &c, "abxy!");
	c = kcmd(STORE_OP_KV_KEYINFO, "sr");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 300, &c, 700);
	c = kcmd(STORE_OP_KV_GETEX, "sr");
	c.kind = STORE_GETEX_AT;
	c.delta = 200; /* past: deleted after the answer */
	do_str(&t, false, 300, &c, "abxy!");
	do_str(&t, false, 300, &c, NULL);
	/* Delete the rest: only the applied index remains (no stray
	 * expiry entries). */
	c = kcmd(STORE_OP_KV_DEL, "");
	c.items.n = 3;
	c.items.v = (struct store_slice[]){S("n"), S("m"), S("a")};
	do_int(&t, false, 400, &c, 3);
	tapply(&x, &t, G, 400, &c);
	tres_free(&x);
	assert_int_equal(tdb_hash_group_x(&t, G, true), before);
	tdb_close(&t);
}

/* KV_KEYCOUNT's [keys, with an expiry]. */
static void keycount(struct tdb *t, uint64_t now, uint64_t keys, uint64_t exp)
{
	struct store_cmd c = kcmd(STORE_OP_KV_KEYCOUNT, "");
	struct tres x;
	c.kind = 1;
	tread(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), keys);
	assert_int_equal(tres_u64(&x), exp);
	tres_free(&x);
}

/* The key counts follow every write, expiry and rename; RENAME moves a
 * collection's elements and the expiry; SCAN walks the group in pages
 * that each make progress even when the keys share long prefixes, and
 * return every key; the count row goes with the last key. */
static void test_keyspace_walk(void **state)
{
	enum { NK = 60 };
	struct tdb t;
	struct store_cmd c;
	struct store_slice fv[4] = {S("f"), S("v"), S("g"), S("w")};
	bool seen[NK] = {false};
	char cursor[24] = "0", name[32];
	uint64_t before, end = kvscan_cursor_after(G, 8);
	unsigned pages = 0, other = 0;

	(void)state;
	tdb_open(&t);
	before = tdb_hash_group_x(&t, G, true);
	keycount(&t, 100, 0, 0);
	for (unsigned i = 0; i < NK; i++) {
		snprintf(name, sizeof name, "user:session:%03u", i);
		set(&t, 100, name, "v", 0, i % 10 == 0 ? STORE_EXPIRE_TTL : 0,
		    i % 10 == 0 ? 1000 : 0, "OK");
	}
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 4;
	c.items.v = fv;
	do_int(&t, false, 100, &c, 2);
	keycount(&t, 100, NK + 1, NK / 10);
	/* a key lapsed is still counted until reclaimed, as Redis */
	keycount(&t, 5000, NK + 1, NK / 10);
	set(&t, 200, "user:session:001", "v2", 0, STORE_EXPIRE_TTL, 50, "OK");
	keycount(&t, 200, NK + 1, NK / 10 + 1);

	/* RENAME a hash with its fields and an expiry */
	c = kcmd(STORE_OP_KV_EXPIRE_OPT, "h");
	c.kind = STORE_EXPIRE_TTL;
	c.delta = 3000;
	c.flags = STORE_EXPIRE_F_NX;
	c.arg = S("expire");
	do_int(&t, false, 200, &c, 1);
	do_int(&t, false, 200, &c, 0); /* NX: it has one now */
	c = kcmd(STORE_OP_KV_RENAME, "h");
	c.arg = S("h2");
	do_str(&t, false, 210, &c, "OK");
	do_status(&t, false, 210, &c, STORE_ERR, "ERR no such key");
	c = kcmd(STORE_OP_KV_HGETALL, "h2");
	{
		struct tres x;
		tread(&x, &t, G, 220, &c);
		assert_int_equal(tres_map(&x), 2);
		tres_free(&x);
	}
	c = kcmd(STORE_OP_KV_KEYINFO, "h2");
	c.kind = STORE_KEYINFO_PTTL;
	do_int(&t, true, 220, &c, 2980);
	keycount(&t, 220, NK + 1, NK / 10 + 2);
	/* RENAMENX onto a live key changes nothing; RENAME replaces it */
	c = kcmd(STORE_OP_KV_RENAME, "h2");
	c.arg = S("user:session:002");
	c.kind = 1;
	do_int(&t, false, 230, &c, 0);
	c.kind = 0;
	do_str(&t, false, 230, &c, "OK");
	keycount(&t, 230, NK, NK / 10 + 2);

	/* SCAN from the group's start, 3 keys a page */
	for (pages = 0; pages < 100; pages++) {
		struct tres x;
		uint32_t n;
		size_t cl;
		const char *cp;
		uint8_t seek[KVSCAN_SEEK_MAX];
		size_t sl = 0;
		uint32_t grp = G;
		c = kcmd(STORE_OP_KV_SCAN, "");
		c.count = 3;
		c.shards = 8;
		if (strcmp(cursor, "0") != 0) {
			assert_int_equal(
			    kvscan_cursor_parse((const uint8_t *)cursor,
			                        strlen(cursor), 8, &grp, seek,
			                        &sl),
			    0);
			assert_int_equal(grp, G);
		}
		c.arg.p = seek;
		c.arg.len = sl;
		tread(&x, &t, G, 240, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_array(&x), 2);
		cp = tres_bytes(&x, &cl);
		assert_true(cl < sizeof cursor);
		memcpy(cursor, cp, cl);
		cursor[cl] = '\0';
		n = tres_array(&x);
		for (uint32_t i = 0; i < n; i++) {
			size_t kl;
			const char *k = tres_bytes(&x, &kl);
			unsigned idx;
			if (kl == 16 && memcmp(k, "user:session:", 13) == 0) {
				memcpy(name, k, kl);
				name[kl] = '\0';
				idx = (unsigned)atoi(name + 13);
				assert_true(idx < NK);
				seen[idx] = true;
			} else {
				other++;
			}
		}
		tres_free(&x);
		if (strtoull(cursor, NULL, 10) == end) {
			break;
		}
	}
	/* the keys share 13 bytes, more than a cursor holds: pages still
	 * move on (a few may be long), and every key comes back */
	assert_true(pages < 100);
	for (unsigned i = 0; i < NK; i++) {
		assert_true(seen[i]);
	}
	assert_int_equal(other, 0);
	/* KEYS: the whole range, a pattern, lapsed keys skipped */
	c = kcmd(STORE_OP_KV_SCAN, "");
	c.flags = STORE_SCAN_ALL | STORE_SCAN_MATCH;
	c.value = S("user:session:0[0-1]?");
	c.shards = 8;
	{
		struct tres x;
		tread(&x, &t, G, 240, &c);
		assert_int_equal(tres_array(&x), 20);
		tres_free(&x);
		/* at 1200 the keys with a 1000 ms TTL (every tenth) lapsed,
		 * and 001 (its own TTL) too */
		tread(&x, &t, G, 1200, &c);
		assert_int_equal(tres_array(&x), 17);
		tres_free(&x);
	}
	/* delete everything: only the applied index remains */
	c = kcmd(STORE_OP_KV_DEL, "");
	{
		struct store_slice ks[NK];
		char names[NK][32];
		for (unsigned i = 0; i < NK; i++) {
			snprintf(names[i], sizeof names[i], "user:session:%03u",
			         i);
			ks[i] = S(names[i]);
		}
		c.items.n = NK;
		c.items.v = ks;
		/* 001 lapsed at 250: not counted, but cleared */
		do_int(&t, false, 300, &c, NK - 1);
	}
	keycount(&t, 300, 0, 0);
	assert_int_equal(tdb_hash_group_x(&t, G, true), before);
	tdb_close(&t);
}

/* SCAN with the node's resume keys (STORE_SCAN_RESUME): from a kept key
 * (STORE_SCAN_EXACT) a page stops after COUNT keys whatever they share,
 * past a key too long to keep; from a seek point the next key is named
 * only when its reference seek point moves past it. */
static void test_keyspace_resume(void **state)
{
	enum { NK = 40 };
	static char longkey[KVSCAN_RESUME_MAX + 32];
	struct tdb t;
	struct store_cmd c;
	bool seen[NK + 1] = {false};
	char name[32], start[KVSCAN_RESUME_MAX + 32];
	size_t start_len = 0;
	unsigned pages = 0;
	bool exact = false;

	(void)state;
	tdb_open(&t);
	for (unsigned i = 0; i < NK; i++) {
		snprintf(name, sizeof name, "user:session:%03u", i);
		set(&t, 100, name, "v", 0, 0, 0, "OK");
	}
	/* a key too long to keep, between 020 and 021 */
	snprintf(longkey, sizeof longkey, "user:session:020");
	memset(longkey + 16, 'x', KVSCAN_RESUME_MAX);
	longkey[16 + KVSCAN_RESUME_MAX] = '\0';
	set(&t, 100, longkey, "v", 0, 0, 0, "OK");

	for (pages = 0; pages < 100; pages++) {
		struct tres x;
		uint32_t n;
		size_t kl;
		c = kcmd(STORE_OP_KV_SCAN, "");
		c.count = 3;
		c.shards = 8;
		c.flags = STORE_SCAN_RESUME | (exact ? STORE_SCAN_EXACT : 0);
		c.arg.p = (const uint8_t *)start;
		c.arg.len = start_len;
		tread(&x, &t, G, 200, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_array(&x), 3);
		(void)tres_bytes(&x, NULL);
		n = tres_array(&x);
		/* COUNT keys, one more past the long one */
		assert_true(n <= 4);
		for (uint32_t i = 0; i < n; i++) {
			const char *k = tres_bytes(&x, &kl);
			if (kl > 16) {
				seen[NK] = true;
			} else {
				seen[atoi(k + 13)] = true;
			}
		}
		if (tres_is_nil(&x)) {
			tres_free(&x);
			break;
		}
		const char *k = tres_bytes(&x, &kl);
		assert_true(kl <= KVSCAN_RESUME_MAX);
		memcpy(start, k, kl);
		start_len = kl;
		exact = true;
		tres_free(&x);
	}
	assert_true(pages < 100);
	assert_true(pages >= NK / 4);
	for (unsigned i = 0; i <= NK; i++) {
		assert_true(seen[i]);
	}

	/* from the plain seek point of 010: no reference can move past it,
	 * so no next key is named, and the page walks every key sharing
	 * the seek point (all of them) */
	{
		uint8_t seek[KVSCAN_SEEK_MAX];
		struct tres x;
		size_t sl = kvscan_seek_of(
		    8, (const uint8_t *)"user:session:010", 16, seek);
		c = kcmd(STORE_OP_KV_SCAN, "");
		c.count = 3;
		c.shards = 8;
		c.flags = STORE_SCAN_RESUME;
		c.arg.p = seek;
		c.arg.len = sl;
		tread(&x, &t, G, 200, &c);
		assert_int_equal(tres_array(&x), 3);
		(void)tres_bytes(&x, NULL);
		assert_int_equal(tres_array(&x), NK + 1);
		for (uint32_t i = 0; i < NK + 1; i++) {
			(void)tres_bytes(&x, NULL);
		}
		assert_true(tres_is_nil(&x));
		tres_free(&x);
	}
	tdb_close(&t);
}

static void getrange(struct tdb *t, const char *key, int64_t start,
                     int64_t stop, const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_GETRANGE, key);
	c.start = start;
	c.stop = stop;
	do_str(t, true, 100, &c, want);
}

static void lindex(struct tdb *t, const char *key, int64_t index,
                   const char *want)
{
	struct store_cmd c = kcmd(STORE_OP_KV_LINDEX, key);
	c.start = index;
	do_str(t, true, 100, &c, want);
}

/* GETRANGE with Redis's clamping; LINDEX from either end; LTRIM. */
static void test_getrange_lindex(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice abc[3] = {S("a"), S("b"), S("c")};

	(void)state;
	tdb_open(&t);
	set(&t, 100, "s", "Hello", 0, 0, 0, "OK");
	getrange(&t, "s", 0, 3, "Hell");
	getrange(&t, "s", -3, -1, "llo");
	getrange(&t, "s", 0, -1, "Hello");
	getrange(&t, "s", 10, 100, "");
	getrange(&t, "s", -100, 1, "He");
	getrange(&t, "s", 3, 1, "");
	getrange(&t, "s", -1, -3, "");
	getrange(&t, "s", 0, INT64_MAX, "Hello");
	getrange(&t, "s", INT64_MIN, INT64_MIN, "H");
	getrange(&t, "none", 0, -1, "");
	c = kcmd(STORE_OP_KV_LPUSH, "l");
	c.items.n = 3;
	c.items.v = abc;
	do_int(&t, false, 100, &c, 3); /* c b a */
	lindex(&t, "l", 0, "c");
	lindex(&t, "l", 2, "a");
	lindex(&t, "l", -1, "a");
	lindex(&t, "l", -3, "c");
	lindex(&t, "l", 3, NULL);
	lindex(&t, "l", -4, NULL);
	lindex(&t, "l", INT64_MIN, NULL);
	lindex(&t, "none", 0, NULL);
	c = kcmd(STORE_OP_KV_LINDEX, "s");
	do_status(&t, true, 100, &c, STORE_WRONGTYPE, WT);
	c = kcmd(STORE_OP_KV_GETRANGE, "l");
	do_status(&t, true, 100, &c, STORE_WRONGTYPE, WT);
	/* LTRIM keeps start..stop; an empty range deletes the key */
	c = kcmd(STORE_OP_KV_RPUSH, "l");
	c.items.n = 3;
	c.items.v = abc;
	do_int(&t, false, 100, &c, 6); /* c b a a b c */
	c = kcmd(STORE_OP_KV_LTRIM, "l");
	c.start = 1;
	c.stop = -2;
	do_str(&t, false, 100, &c, "OK");
	lrange(&t, 0, -1, "b,a,a,b");
	lindex(&t, "l", 0, "b");
	c.start = -1;
	c.stop = 100;
	do_str(&t, false, 100, &c, "OK");
	lrange(&t, 0, -1, "b");
	c = kcmd(STORE_OP_KV_RPUSH, "l");
	c.items.n = 1;
	c.items.v = abc;
	do_int(&t, false, 100, &c, 2);
	lrange(&t, 0, -1, "b,a");
	c = kcmd(STORE_OP_KV_LTRIM, "l");
	c.start = 2;
	c.stop = 5;
	do_str(&t, false, 100, &c, "OK");
	c = kcmd(STORE_OP_KV_EXISTS, "");
	c.items.n = 1;
	c.items.v = (struct store_slice[]){S("l")};
	do_int(&t, true, 100, &c, 0);
	c = kcmd(STORE_OP_KV_LTRIM, "none");
	do_str(&t, false, 100, &c, "OK");
	c = kcmd(STORE_OP_KV_LTRIM, "s");
	do_status(&t, false, 100, &c, STORE_WRONGTYPE, WT);
	tdb_close(&t);
}

/* A key's type and TTL (FERRICSTORE.KEY_INFO), the group's size and a
 * compaction request. */
static void test_key_info(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct store_slice fv[2] = {S("f"), S("v")};
	const char *type;
	int64_t ttl;
	bool found;
	uint64_t bytes = 1;

	(void)state;
	tdb_open(&t);
	set(&t, 100, "s", "1", 0, STORE_EXPIRE_TTL, 1000, "OK");
	c = kcmd(STORE_OP_KV_HSET, "h");
	c.items.n = 2;
	c.items.v = fv;
	do_int(&t, false, 100, &c, 1);
	assert_int_equal(
	    store_kv_info(t.s, G, S("s"), 200, &type, &ttl, &found), 0);
	assert_true(found);
	assert_string_equal(type, "string");
	assert_int_equal(ttl, 900);
	assert_int_equal(
	    store_kv_info(t.s, G, S("h"), 200, &type, &ttl, &found), 0);
	assert_string_equal(type, "hash");
	assert_int_equal(ttl, -1);
	assert_int_equal(
	    store_kv_info(t.s, G, S("none"), 200, &type, &ttl, &found), 0);
	assert_false(found);
	assert_string_equal(type, "none");
	assert_int_equal(ttl, -2);
	/* lapsed: gone */
	assert_int_equal(
	    store_kv_info(t.s, G, S("s"), 5000, &type, &ttl, &found), 0);
	assert_false(found);
	assert_int_equal(ttl, -2);
	assert_int_equal(store_group_size(t.s, G, &bytes), 0);
	assert_int_equal(store_request_compaction(t.s), 0);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_multi_and_cas),
	    cmocka_unit_test(test_locks),
	    cmocka_unit_test(test_ratelimit),
	    cmocka_unit_test(test_fetch_or_compute),
	    cmocka_unit_test(test_hashes),
	    cmocka_unit_test(test_lists),
	    cmocka_unit_test(test_getrange_lindex),
	    cmocka_unit_test(test_sets),
	    cmocka_unit_test(test_sorted_sets),
	    cmocka_unit_test(test_zadd_options),
	    cmocka_unit_test(test_pop_count_zero),
	    cmocka_unit_test(test_expire),
	    cmocka_unit_test(test_key_info),
	    cmocka_unit_test(test_keyspace),
	    cmocka_unit_test(test_keyspace_walk),
	    cmocka_unit_test(test_keyspace_resume),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
