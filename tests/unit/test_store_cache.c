/* Caches (change log, index, TTL, compaction, watches' reads) and
 * counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

#define G 2
#define SCOPE "acme/prod/sessions"

static struct store_cmd ccmd(uint8_t op, const char *key)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.scope = S(SCOPE);
	c.key = S(key);
	return c;
}

static uint64_t put(struct tdb *t, uint64_t now, const char *k, const char *v,
                    uint64_t ttl)
{
	struct store_cmd c = ccmd(STORE_OP_CACHE_PUT, k);
	struct tres x;
	uint64_t off;

	c.value = S(v);
	c.ttl_ms = ttl;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	off = tres_u64(&x);
	assert_int_equal(tres_u64(&x), ttl ? now + ttl : 0);
	tres_free(&x);
	return off;
}

/* Checks a GET (read at `now`): value or NULL for a miss. */
static void get_expect(struct tdb *t, uint64_t now, const char *k,
                       const char *want)
{
	struct store_cmd c = ccmd(STORE_OP_CACHE_GET, k);
	struct tres x;
	uint8_t *v;
	size_t len;
	uint64_t exp, off;
	bool found;

	tread(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	if (want == NULL) {
		assert_true(tres_is_nil(&x));
	} else {
		assert_int_equal(tres_array(&x), 3);
		assert_string_equal(tres_bytes(&x, NULL), want);
	}
	tres_free(&x);
	assert_int_equal(store_cache_get(t->s, G, S(SCOPE), 0, S(k), now, &v,
	                                 &len, &exp, &off, &found),
	                 0);
	assert_int_equal(found, want != NULL);
	if (found) {
		assert_int_equal(len, strlen(want));
		assert_memory_equal(v, want, len);
	}
	free(v);
}

static void test_put_get_delete(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;

	tdb_open(&t);
	assert_int_equal(put(&t, 100, "k1", "v1", 0), 0);
	assert_int_equal(put(&t, 100, "k2", "v2", 50), 1);
	assert_int_equal(put(&t, 110, "k1", "v1b", 0), 2);
	get_expect(&t, 120, "k1", "v1b");
	get_expect(&t, 149, "k2", "v2");
	/* TTL: invisible from its deadline on (leader's clock on reads). */
	get_expect(&t, 150, "k2", NULL);
	get_expect(&t, 120, "nope", NULL);
	/* An empty value is a value. */
	put(&t, 120, "empty", "", 0);
	get_expect(&t, 121, "empty", "");

	/* Delete returns what it removed and the change's offset. */
	c = ccmd(STORE_OP_CACHE_DELETE, "k1");
	tapply(&x, &t, G, 130, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "v1b");
	assert_int_equal(tres_u64(&x), 4);
	tres_free(&x);
	get_expect(&t, 131, "k1", NULL);
	/* Deleting a missing key is an answer, and records no change. */
	tapply(&x, &t, G, 131, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_true(tres_is_nil(&x));
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	/* So is deleting a lapsed key (entry time decides). */
	c = ccmd(STORE_OP_CACHE_DELETE, "k2");
	tapply(&x, &t, G, 151, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	/* The log: 0 put k1, 1 put k2, 2 put k1, 3 put empty, 4 del k1. */
	c = ccmd(STORE_OP_CACHE_INFO, "");
	tread(&x, &t, G, 200, &c);
	assert_int_equal(tres_array(&x), 4);
	assert_int_equal(tres_u64(&x), 5); /* tail */
	assert_int_equal(tres_u64(&x), 0); /* compacted below */
	assert_int_equal(tres_u64(&x), 5); /* records */
	assert_int_equal(tres_u64(&x), 1); /* live: empty */
	tres_free(&x);
	tdb_close(&t);
}

struct changes {
	int n;
	uint64_t off[64];
	char key[64][16];
	char val[64][16]; /* "-" for deletes */
};

static int change_cb(void *arg, uint64_t offset, const uint8_t *key,
                     size_t klen, const uint8_t *value, size_t vlen,
                     uint64_t expires_at)
{
	struct changes *c = arg;
	c->off[c->n] = offset;
	snprintf(c->key[c->n], 16, "%.*s", (int)klen, (const char *)key);
	if (value != NULL) {
		snprintf(c->val[c->n], 16, "%.*s", (int)vlen,
		         (const char *)value);
	} else {
		snprintf(c->val[c->n], 16, "-");
	}
	c->n++;
	return 0;
}

static void test_log_and_compaction(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	struct changes ch;
	struct store_cache_info info;

	tdb_open(&t);
	put(&t, 10, "a", "1", 0);  /* 0 */
	put(&t, 10, "b", "1", 0);  /* 1 */
	put(&t, 10, "a", "2", 0);  /* 2 */
	put(&t, 10, "c", "1", 20); /* 3, lapses at 30 */
	c = ccmd(STORE_OP_CACHE_DELETE, "b");
	tapply(&x, &t, G, 10, &c); /* 4 */
	tres_free(&x);
	put(&t, 10, "d", "1", 0); /* 5 */

	/* Replay [2, tail). */
	memset(&ch, 0, sizeof ch);
	assert_int_equal(store_cache_log_read(t.s, G, S(SCOPE), 0, 2, 0,
	                                      change_cb, &ch, &info),
	                 0);
	assert_int_equal(ch.n, 4);
	assert_int_equal(ch.off[0], 2);
	assert_string_equal(ch.key[2], "b");
	assert_string_equal(ch.val[2], "-");
	assert_int_equal(info.tail, 6);
	/* The same through the read command, limited to 2. */
	c = ccmd(STORE_OP_CACHE_LOG_READ, "");
	c.offset = 3;
	c.max = 2;
	tread(&x, &t, G, 11, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 5);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 4);
	assert_int_equal(tres_u64(&x), 3);
	assert_string_equal(tres_bytes(&x, NULL), "c");
	assert_string_equal(tres_bytes(&x, NULL), "1");
	assert_int_equal(tres_u64(&x), 30);
	assert_int_equal(tres_array(&x), 4);
	assert_int_equal(tres_u64(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), "b");
	assert_true(tres_is_nil(&x));
	assert_int_equal(tres_u64(&x), 0);
	tres_free(&x);
	/* Past the tail. */
	c.offset = 7;
	tread(&x, &t, G, 11, &c);
	assert_int_equal(tres_status(&x), STORE_IN_FUTURE);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 7);
	assert_int_equal(tres_u64(&x), 6);
	tres_free(&x);

	/* Compact below 4 at time 40 (c lapsed): keeps 2 (a) only;
	 * 0, 1 superseded/deleted, 3 lapsed. */
	c = ccmd(STORE_OP_CACHE_COMPACT, "");
	c.offset = 4;
	tapply(&x, &t, G, 40, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 4);
	assert_int_equal(tres_u64(&x), 3);
	assert_false(tres_bool(&x));
	tres_free(&x);
	assert_int_equal(store_cache_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.compacted_below, 4);
	assert_int_equal(info.records, 3); /* 2, 4, 5 */
	assert_int_equal(info.live, 2);    /* a, d */
	/* History before 4 is collapsed: resnapshot. */
	memset(&ch, 0, sizeof ch);
	assert_int_equal(store_cache_log_read(t.s, G, S(SCOPE), 0, 1, 0,
	                                      change_cb, &ch, &info),
	                 STORE_RESNAPSHOT);
	c = ccmd(STORE_OP_CACHE_LOG_READ, "");
	c.offset = 3;
	tread(&x, &t, G, 41, &c);
	assert_int_equal(tres_status(&x), STORE_RESNAPSHOT);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 3);
	assert_int_equal(tres_u64(&x), 4);
	tres_free(&x);
	/* Offsets are kept: a's value is still the write at 2. */
	memset(&ch, 0, sizeof ch);
	assert_int_equal(
	    store_cache_scan(t.s, G, S(SCOPE), 0, S(""), 41, change_cb, &ch),
	    0);
	assert_int_equal(ch.n, 2);
	assert_string_equal(ch.key[0], "a");
	assert_int_equal(ch.off[0], 2);
	assert_string_equal(ch.val[0], "2");
	assert_string_equal(ch.key[1], "d");
	assert_int_equal(ch.off[1], 5);
	/* Overwriting a compacted key drops its old record at once. */
	put(&t, 50, "a", "3", 0); /* 6 */
	assert_int_equal(store_cache_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.records, 3); /* 4, 5, 6 */
	/* Compact everything with a budget of 2 records per command. */
	c = ccmd(STORE_OP_CACHE_COMPACT, "");
	c.max = 2;
	tapply(&x, &t, G, 60, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 6);
	assert_int_equal(tres_u64(&x), 1); /* the delete at 4 */
	assert_true(tres_bool(&x));
	tres_free(&x);
	tapply(&x, &t, G, 60, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 7);
	assert_int_equal(tres_u64(&x), 0);
	assert_false(tres_bool(&x));
	tres_free(&x);
	get_expect(&t, 61, "a", "3");
	get_expect(&t, 61, "d", "1");
	get_expect(&t, 61, "b", NULL);
	tdb_close(&t);
}

static void test_scan_prefix(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	struct changes ch;

	tdb_open(&t);
	put(&t, 1, "user:1", "a", 0);
	put(&t, 1, "user:2", "b", 5);
	put(&t, 1, "user:3", "c", 0);
	put(&t, 1, "zone:1", "d", 0);
	memset(&ch, 0, sizeof ch);
	assert_int_equal(store_cache_scan(t.s, G, S(SCOPE), 0, S("user:"), 10,
	                                  change_cb, &ch),
	                 0);
	assert_int_equal(ch.n, 2); /* user:2 lapsed at 6 */
	assert_string_equal(ch.key[1], "user:3");
	/* Paging through the read command. */
	c = ccmd(STORE_OP_CACHE_SCAN, "user:");
	c.max = 1;
	tread(&x, &t, G, 2, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 1);
	assert_int_equal(tres_array(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), "user:1");
	assert_string_equal(tres_bytes(&x, NULL), "a");
	assert_int_equal(tres_u64(&x), 0);
	assert_int_equal(tres_u64(&x), 0);
	assert_string_equal(tres_bytes(&x, NULL), "user:1");
	tres_free(&x);
	c.arg = S("user:1");
	c.max = 10;
	tread(&x, &t, G, 2, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), "user:2");
	tres_bytes(&x, NULL);
	tres_u64(&x);
	assert_int_equal(tres_u64(&x), 6);
	assert_int_equal(tres_array(&x), 4);
	assert_string_equal(tres_bytes(&x, NULL), "user:3");
	tres_bytes(&x, NULL);
	tres_u64(&x);
	tres_u64(&x);
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	/* Shards of one cache are separate. */
	c = ccmd(STORE_OP_CACHE_SCAN, "");
	c.shard = 1;
	tread(&x, &t, G, 2, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	tdb_close(&t);
}

static void test_expiry_reclaim(void **state)
{
	struct tdb t;
	uint8_t *cmd;
	size_t len;
	struct fsm_cmd fc;
	struct fsm_entry e;
	struct fsm_result r;
	struct tres x;
	struct store_cache_info info;

	tdb_open(&t);
	put(&t, 100, "a", "1", 10);  /* lapses at 110 */
	put(&t, 100, "b", "1", 100); /* lapses at 200 */
	put(&t, 100, "c", "1", 0);
	assert_int_equal(store_expire_scan(t.s, G, 105, 100, &cmd, &len), 0);
	assert_null(cmd);
	assert_int_equal(len, 0);
	assert_int_equal(store_expire_scan(t.s, G, 150, 100, &cmd, &len), 0);
	assert_non_null(cmd);
	/* Applied at an entry time before the deadline: nothing happens. */
	fc.data = cmd;
	fc.len = len;
	e = (struct fsm_entry){G, t.next_index[G]++, 1, 109, 1, &fc};
	memset(&r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, &r), 0);
	tres_init(&x, r.data, r.len);
	assert_int_equal(tres_i64(&x), 0);
	tres_free(&x);
	assert_int_equal(store_cache_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.live, 3);
	/* The index entry stayed; at 150 the same command reclaims. */
	free(cmd);
	assert_int_equal(store_expire_scan(t.s, G, 150, 100, &cmd, &len), 0);
	assert_non_null(cmd);
	fc.data = cmd;
	fc.len = len;
	e = (struct fsm_entry){G, t.next_index[G]++, 1, 150, 1, &fc};
	memset(&r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, &r), 0);
	tres_init(&x, r.data, r.len);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);
	free(cmd);
	assert_int_equal(store_cache_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.live, 2);
	/* The change log keeps the put (it is history, not compacted). */
	assert_int_equal(info.records, 3);
	assert_int_equal(store_expire_scan(t.s, G, 150, 100, &cmd, &len), 0);
	assert_null(cmd);
	/* A re-put with a new TTL moves its index entry. */
	put(&t, 160, "b", "2", 0);
	assert_int_equal(store_expire_scan(t.s, G, 1000, 100, &cmd, &len), 0);
	assert_null(cmd);
	get_expect(&t, 1000, "b", "2");
	tdb_close(&t);
}

static void test_drop(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	struct store_cache_info info;

	tdb_open(&t);
	put(&t, 1, "a", "1", 0);
	put(&t, 1, "b", "1", 0);
	c = ccmd(STORE_OP_COUNTER_ADD, "n");
	c.delta = 4;
	tapply(&x, &t, G, 1, &c);
	tres_free(&x);
	c = ccmd(STORE_OP_CACHE_DROP, "");
	tapply(&x, &t, G, 2, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 5); /* 2 index, 1 counter, 2 log */
	assert_false(tres_bool(&x));
	tres_free(&x);
	get_expect(&t, 3, "a", NULL);
	assert_int_equal(store_cache_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.tail, 2);
	assert_int_equal(info.compacted_below, 2);
	assert_int_equal(put(&t, 4, "a", "2", 0), 2);
	tdb_close(&t);
}

static void counter_add(struct tdb *t, const char *k, int64_t delta,
                        uint8_t status, int64_t want)
{
	struct store_cmd c = ccmd(STORE_OP_COUNTER_ADD, k);
	struct tres x;
	c.delta = delta;
	tapply(&x, t, G, 1, &c);
	assert_int_equal(tres_status(&x), status);
	if (status == STORE_OK) {
		assert_int_equal(tres_i64(&x), want);
	}
	tres_free(&x);
}

static void test_counters(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	int64_t v;
	bool found;

	tdb_open(&t);
	/* Never written is not zero. */
	c = ccmd(STORE_OP_COUNTER_GET, "hits");
	tread(&x, &t, G, 1, &c);
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	assert_int_equal(
	    store_counter_get(t.s, G, S(SCOPE), 0, S("hits"), &v, &found), 0);
	assert_false(found);
	counter_add(&t, "hits", 5, STORE_OK, 5);
	counter_add(&t, "hits", -5, STORE_OK, 0);
	tread(&x, &t, G, 1, &c);
	assert_int_equal(tres_i64(&x), 0);
	tres_free(&x);
	assert_int_equal(
	    store_counter_get(t.s, G, S(SCOPE), 0, S("hits"), &v, &found), 0);
	assert_true(found);
	assert_int_equal(v, 0);
	/* Overflow is refused and leaves the sum alone. */
	counter_add(&t, "big", INT64_MAX, STORE_OK, INT64_MAX);
	counter_add(&t, "big", 1, STORE_ERR, 0);
	counter_add(&t, "big", -1, STORE_OK, INT64_MAX - 1);
	counter_add(&t, "small", INT64_MIN, STORE_OK, INT64_MIN);
	counter_add(&t, "small", -1, STORE_ERR, 0);
	/* A counter and a cache value may share a key, and compaction
	 * leaves counters alone. */
	put(&t, 1, "hits", "x", 0);
	put(&t, 1, "hits", "y", 0);
	c = ccmd(STORE_OP_CACHE_COMPACT, "");
	tapply(&x, &t, G, 2, &c);
	tres_free(&x);
	counter_add(&t, "hits", 2, STORE_OK, 2);
	get_expect(&t, 3, "hits", "y");
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_delete),
	    cmocka_unit_test(test_log_and_compaction),
	    cmocka_unit_test(test_scan_prefix),
	    cmocka_unit_test(test_expiry_reclaim),
	    cmocka_unit_test(test_drop),
	    cmocka_unit_test(test_counters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
