/* Unit tests for node/scan_cursors: a kept key found again through the
 * cursor naming it, misses on a changed tag, another group or other first
 * bits, least recently made entries replaced first (resumed ones before
 * any), the key and size bounds, and KV_SCAN results rewritten into the
 * page clients get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/scan_cursors.h"
#include "store/result.h"

#define GROUPS 8

static struct scan_cursors *table(unsigned n)
{
	struct scan_cursors *t;
	char err[256];
	assert_int_equal(scan_cursors_new(&t, n, GROUPS, err, sizeof err), 0);
	return t;
}

static void decode(uint64_t cur, struct kvscan_cursor *c)
{
	char text[24];
	snprintf(text, sizeof text, "%llu", (unsigned long long)cur);
	assert_int_equal(kvscan_cursor_decode((const uint8_t *)text,
	                                      strlen(text), GROUPS, c),
	                 0);
}

/* Whether the cursor finds `key` again. */
static bool finds(struct scan_cursors *t, uint64_t cur, const char *key)
{
	struct kvscan_cursor c;
	const uint8_t *k;
	size_t len;
	decode(cur, &c);
	k = scan_cursors_lookup(t, &c, &len);
	return k != NULL && len == strlen(key) && memcmp(k, key, len) == 0;
}

static uint64_t put(struct scan_cursors *t, uint32_t group, const char *key)
{
	uint64_t cur;
	assert_int_equal(
	    scan_cursors_put(t, group, (const uint8_t *)key, strlen(key), &cur),
	    0);
	assert_true(cur > 0 && cur < (UINT64_C(1) << 63));
	return cur;
}

static void test_round_trip(void **state)
{
	static const char *const k = "session:0123456789abcdef0123456789abcdef";
	struct scan_cursors *t = table(16);
	struct kvscan_cursor c;
	struct scan_cursors_stats st;
	(void)state;
	uint64_t cur = put(t, 3, k);
	decode(cur, &c);
	assert_true(c.ref);
	assert_int_equal(c.group, 3);
	/* without the table the cursor seeks at or before the key */
	assert_true(memcmp(c.seek, k, c.seek_len) <= 0);
	assert_true(finds(t, cur, k));
	/* a repeated cursor still finds its key until it is replaced */
	assert_true(finds(t, cur, k));
	scan_cursors_get_stats(t, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.used, 1);
	assert_int_equal(st.key_bytes, strlen(k));
	scan_cursors_free(t);
}

static void test_mismatch_falls_back(void **state)
{
	struct scan_cursors *t = table(16);
	struct kvscan_cursor c, other;
	struct scan_cursors_stats st;
	const uint8_t *k;
	size_t len;
	unsigned p = kvscan_ref_prefix_bits(GROUPS);
	(void)state;
	uint64_t cur = put(t, 2, "user:1000:profile:aaaa");
	decode(cur, &c);

	/* another tag */
	decode(cur ^ (UINT64_C(1) << p), &other);
	assert_true(other.ref);
	assert_null(scan_cursors_lookup(t, &other, &len));
	/* another group, the same slot and tag */
	other = c;
	other.group = 5;
	assert_null(scan_cursors_lookup(t, &other, &len));
	/* other first bits */
	other = c;
	other.seek[0] ^= 0x01;
	assert_null(scan_cursors_lookup(t, &other, &len));
	/* a slot past the table */
	other = c;
	other.slot = 16;
	assert_null(scan_cursors_lookup(t, &other, &len));
	/* a plain cursor is no reference */
	other = c;
	other.ref = false;
	assert_null(scan_cursors_lookup(t, &other, &len));
	scan_cursors_get_stats(t, &st);
	assert_int_equal(st.misses, 4);
	k = scan_cursors_lookup(t, &c, &len);
	assert_non_null(k);
	assert_memory_equal(k, "user:1000:profile:aaaa", len);
	scan_cursors_free(t);
}

static void test_eviction(void **state)
{
	struct scan_cursors *t = table(2);
	struct scan_cursors_stats st;
	(void)state;
	uint64_t a = put(t, 1, "key:000000000001");
	uint64_t b = put(t, 1, "key:000000000002");
	uint64_t c = put(t, 1, "key:000000000003");
	/* the least recently made one went */
	assert_false(finds(t, a, "key:000000000001"));
	assert_true(finds(t, c, "key:000000000003"));
	/* b resumed (c before it): b goes first, then c */
	assert_true(finds(t, b, "key:000000000002"));
	uint64_t d = put(t, 1, "key:000000000004");
	assert_false(finds(t, b, "key:000000000002"));
	assert_true(finds(t, c, "key:000000000003"));
	assert_true(finds(t, d, "key:000000000004"));
	/* a slot reused gives a new tag: the old cursor misses */
	uint64_t e = put(t, 2, "key:000000000005");
	uint64_t f = put(t, 2, "key:000000000006");
	assert_false(finds(t, c, "key:000000000003"));
	assert_false(finds(t, d, "key:000000000004"));
	assert_true(finds(t, e, "key:000000000005"));
	assert_true(finds(t, f, "key:000000000006"));
	scan_cursors_get_stats(t, &st);
	assert_int_equal(st.used, 2);
	assert_int_equal(st.evictions, 1); /* a; the rest had resumed */
	scan_cursors_free(t);
}

static void test_bounds(void **state)
{
	struct scan_cursors *t;
	char err[256];
	uint8_t big[KVSCAN_RESUME_MAX + 1];
	uint64_t cur;
	(void)state;
	assert_int_equal(scan_cursors_new(&t, 0, GROUPS, err, sizeof err), -1);
	assert_non_null(strstr(err, "out of range"));
	assert_int_equal(
	    scan_cursors_new(&t, KVSCAN_SLOTS_MAX + 1, GROUPS, err, sizeof err),
	    -1);
	assert_int_equal(scan_cursors_new(&t, 4, 1u << 17, err, sizeof err),
	                 -1);
	assert_non_null(strstr(err, "data groups"));
	assert_int_equal(
	    scan_cursors_new(&t, KVSCAN_SLOTS_MAX, 16384, err, sizeof err), 0);
	scan_cursors_free(t);

	t = table(4);
	memset(big, 'k', sizeof big);
	assert_int_equal(scan_cursors_put(t, 1, big, sizeof big, &cur), -1);
	assert_int_equal(scan_cursors_put(t, 1, big, KVSCAN_RESUME_MAX, &cur),
	                 0);
	struct kvscan_cursor c;
	size_t len;
	decode(cur, &c);
	assert_non_null(scan_cursors_lookup(t, &c, &len));
	assert_int_equal(len, KVSCAN_RESUME_MAX);
	scan_cursors_free(t);
}

/* [cursor text, [keys], next | nil] as the store answers it, or without
 * its third item (`items` 2). */
static void scan_result(struct sbuf *b, const char *text, uint32_t items,
                        const char *next)
{
	sbuf_init(b);
	res_begin(b, STORE_OK);
	res_array(b, items);
	res_str(b, text);
	res_array(b, 2);
	res_str(b, "a");
	res_str(b, "bb");
	if (items == 2) {
		return;
	}
	if (next != NULL) {
		res_str(b, next);
	} else {
		res_nil(b);
	}
}

static void check_page(const uint8_t *p, size_t len, char *cursor)
{
	struct store_result r;
	struct store_value v;
	assert_int_equal(store_result_open(p, len, &r), 0);
	assert_int_equal(r.status, STORE_OK);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_ARRAY);
	assert_int_equal(v.n, 2);
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_BYTES);
	memcpy(cursor, v.p, v.len);
	cursor[v.len] = '\0';
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.n, 2);
	assert_true(store_result_next(&r, &v));
	assert_memory_equal(v.p, "a", 1);
	assert_true(store_result_next(&r, &v));
	assert_memory_equal(v.p, "bb", 2);
	assert_false(store_result_next(&r, &v));
}

static void test_result(void **state)
{
	struct scan_cursors *t = table(4);
	struct sbuf b;
	uint8_t *out;
	size_t olen;
	char cursor[32];
	struct kvscan_cursor c;
	(void)state;

	/* a next key: kept, its reference cursor answered */
	scan_result(&b, "12345", 3, "session:0000000000000000000042");
	assert_int_equal(scan_cursors_result(t, 4, b.p, b.len, &out, &olen), 0);
	assert_non_null(out);
	check_page(out, olen, cursor);
	assert_int_equal(kvscan_cursor_decode((const uint8_t *)cursor,
	                                      strlen(cursor), GROUPS, &c),
	                 0);
	assert_true(c.ref);
	assert_int_equal(c.group, 4);
	assert_true(finds(t, strtoull(cursor, NULL, 10),
	                  "session:0000000000000000000042"));
	free(out);
	sbuf_free(&b);

	/* nil: the store's cursor text as it is */
	scan_result(&b, "0", 3, NULL);
	assert_int_equal(scan_cursors_result(t, 4, b.p, b.len, &out, &olen), 0);
	assert_non_null(out);
	check_page(out, olen, cursor);
	assert_string_equal(cursor, "0");
	free(out);
	sbuf_free(&b);

	/* a key too long to keep: the store's cursor text */
	char big[KVSCAN_RESUME_MAX + 2];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	scan_result(&b, "777", 3, big);
	assert_int_equal(scan_cursors_result(t, 4, b.p, b.len, &out, &olen), 0);
	check_page(out, olen, cursor);
	assert_string_equal(cursor, "777");
	free(out);
	sbuf_free(&b);

	/* already a page (two items), and an error: left alone */
	scan_result(&b, "9", 2, NULL);
	assert_int_equal(scan_cursors_result(t, 4, b.p, b.len, &out, &olen), 0);
	assert_null(out);
	sbuf_free(&b);
	sbuf_init(&b);
	res_error(&b, STORE_ERR, "ERR no");
	assert_int_equal(scan_cursors_result(t, 4, b.p, b.len, &out, &olen), 0);
	assert_null(out);
	sbuf_free(&b);
	scan_cursors_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_mismatch_falls_back),
	    cmocka_unit_test(test_eviction),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_result),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
