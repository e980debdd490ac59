/* Unit tests for store/kvscan: Redis's glob matching (stringmatchlen's
 * cases, escapes, classes, ranges, an unterminated class, deep stars) and
 * the SCAN cursor (group and seek point round trips, the start and end
 * cursors, bad cursors, and that a cursor never seeks past its key) and
 * the reference cursors naming a node's kept keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/kvscan.h"

static bool m(const char *pat, const char *s)
{
	return kvscan_glob_match((const uint8_t *)pat, strlen(pat),
	                         (const uint8_t *)s, strlen(s));
}

static void test_glob_basic(void **state)
{
	(void)state;
	assert_true(m("", ""));
	assert_false(m("", "a"));
	assert_true(m("abc", "abc"));
	assert_false(m("abc", "abd"));
	assert_false(m("abc", "ab"));
	assert_true(m("a*", "a"));
	assert_true(m("a*", "abc"));
	assert_true(m("*c", "abc"));
	assert_true(m("a*c", "abbbc"));
	assert_false(m("a*c", "abbbd"));
	assert_true(m("*", "x"));
	/* stringmatchlen itself: "*" does not match "" (KEYS and SCAN treat
	 * a lone "*" as no pattern) */
	assert_false(m("*", ""));
	assert_true(m("a**b", "ab"));
	assert_true(m("h?llo", "hello"));
	assert_false(m("h?llo", "hllo"));
	assert_true(m("user:*:name", "user:42:name"));
	assert_false(m("user:*:name", "user:42:mail"));
}

static void test_glob_classes(void **state)
{
	(void)state;
	assert_true(m("h[ae]llo", "hello"));
	assert_true(m("h[ae]llo", "hallo"));
	assert_false(m("h[ae]llo", "hillo"));
	assert_true(m("h[^e]llo", "hallo"));
	assert_false(m("h[^e]llo", "hello"));
	assert_true(m("h[a-b]llo", "hbllo"));
	assert_false(m("h[a-b]llo", "hcllo"));
	/* a reversed range is swapped, as Redis */
	assert_true(m("h[b-a]llo", "hallo"));
	/* escapes inside and outside a class */
	assert_true(m("a\\*b", "a*b"));
	assert_false(m("a\\*b", "axb"));
	assert_true(m("[\\]]", "]"));
	assert_true(m("a\\", "a\\"));
	/* an unterminated class matches what it lists so far */
	assert_true(m("[ab", "a"));
	assert_false(m("[ab", "c"));
	assert_false(m("[", "a"));
	assert_true(m("[^", "a"));
	/* bytes above 0x7f compare as signed chars in ranges */
	assert_true(m("[\x80-a]", "\x90"));
	assert_true(m("[\x80-a]", "Z"));
}

static void test_glob_deep(void **state)
{
	char pat[4000], s[3000];
	(void)state;
	for (size_t i = 0; i + 1 < sizeof pat; i += 2) {
		pat[i] = 'a';
		pat[i + 1] = '*';
	}
	pat[sizeof pat - 1] = '\0';
	memset(s, 'a', sizeof s - 1);
	s[sizeof s - 1] = '\0';
	/* more than the nesting bound of stars: no match, no stack blow */
	assert_false(m(pat, "b"));
	assert_false(m("*a*a*a*a*a*a*a*a*a*a*a*b", s));
}

static void test_cursor_start_end(void **state)
{
	uint8_t seek[KVSCAN_SEEK_MAX];
	size_t sl = 99;
	uint32_t g = 0;
	(void)state;
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"0", 1, 4, &g, seek, &sl), 0);
	assert_int_equal(g, 1);
	assert_int_equal(sl, 0);
	assert_int_equal(kvscan_cursor_after(4, 4), 0);
	assert_int_not_equal(kvscan_cursor_after(1, 4), 0);
	char text[24];
	snprintf(text, sizeof text, "%llu",
	         (unsigned long long)kvscan_cursor_after(2, 4));
	assert_int_equal(kvscan_cursor_parse((const uint8_t *)text,
	                                     strlen(text), 4, &g, seek, &sl),
	                 0);
	assert_int_equal(g, 3);
	assert_int_equal(sl, 0);
}

static void test_cursor_bad(void **state)
{
	uint8_t seek[KVSCAN_SEEK_MAX];
	size_t sl;
	uint32_t g;
	(void)state;
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"x", 1, 4, &g, seek, &sl), -1);
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"", 0, 4, &g, seek, &sl), -1);
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"-1", 2, 4, &g, seek, &sl),
	    -1);
	/* past 2^64 */
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"18446744073709551616", 20, 4,
	                        &g, seek, &sl),
	    -1);
	/* a group above the count: 7 << 60 with 4 groups (3 bits) */
	char text[24];
	snprintf(text, sizeof text, "%llu", 7ULL << 60);
	assert_int_equal(kvscan_cursor_parse((const uint8_t *)text,
	                                     strlen(text), 4, &g, seek, &sl),
	                 -1);
	/* small numbers name group 0: not a cursor we gave out */
	assert_int_equal(
	    kvscan_cursor_parse((const uint8_t *)"5", 1, 4, &g, seek, &sl), -1);
}

/* The seek point never passes the key, and the cursor round trips to it,
 * for several group counts. */
static void test_cursor_round_trip(void **state)
{
	static const char *const keys[] = {
	    "a",
	    "ab",
	    "user:00001",
	    "user:00002",
	    "\xff\xff\xff",
	    "\x00\x00\x01",
	    "zzzzzzzzzzzz",
	    "k",
	    "",
	};
	static const unsigned groups[] = {1, 2, 3, 8, 64, 1000, 65535};
	(void)state;
	for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
		unsigned G = groups[gi];
		for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++) {
			const uint8_t *k = (const uint8_t *)keys[ki];
			size_t kl = ki == 5 ? 3 : strlen(keys[ki]);
			uint8_t s1[KVSCAN_SEEK_MAX], s2[KVSCAN_SEEK_MAX];
			size_t l1, l2;
			uint32_t g;
			char text[24];
			uint32_t grp = G;
			uint64_t cur = kvscan_cursor_at(grp, G, k, kl);
			assert_true(cur > 0 && cur < (1ULL << 63));
			snprintf(text, sizeof text, "%llu",
			         (unsigned long long)cur);
			assert_int_equal(
			    kvscan_cursor_parse((const uint8_t *)text,
			                        strlen(text), G, &g, s1, &l1),
			    0);
			assert_int_equal(g, grp);
			l2 = kvscan_seek_of(G, k, kl, s2);
			assert_int_equal(l1, l2);
			assert_memory_equal(s1, s2, l1);
			/* seek point <= key in byte order */
			int d = memcmp(s1, k, l1 < kl ? l1 : kl);
			assert_true(d < 0 || (d == 0 && l1 <= kl));
		}
	}
}

/* Reference cursors: below 2^63, decoded back to their group, slot, tag
 * and a seek point not past the key, never taken for plain cursors (nor
 * plain ones for them), for every group count they fit beside. */
static void test_cursor_ref(void **state)
{
	static const char *const keys[] = {
	    "a", "session:0123456789abcdef", "\xff\xff\xff\xff",
	    "",  "user:1000:profile",
	};
	static const unsigned groups[] = {1, 2, 3, 8, 64, 1000, 16384, 65535};
	(void)state;
	for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
		unsigned G = groups[gi];
		unsigned tb = kvscan_tag_bits(G);
		assert_true(kvscan_ref_usable(G));
		assert_true(tb >= 16 && tb <= 20);
		for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++) {
			const uint8_t *k = (const uint8_t *)keys[ki];
			size_t kl = strlen(keys[ki]);
			uint32_t slot =
			    (uint32_t)(ki * 4099) % KVSCAN_SLOTS_MAX;
			uint32_t tag = 0xABCDEu + (uint32_t)ki;
			uint32_t grp = 1 + (uint32_t)ki % G;
			struct kvscan_cursor c;
			char text[24];
			uint64_t cur =
			    kvscan_cursor_ref(grp, G, slot, tag, k, kl);
			assert_true(cur > 0 && cur < (1ULL << 63));
			snprintf(text, sizeof text, "%llu",
			         (unsigned long long)cur);
			assert_int_equal(
			    kvscan_cursor_decode((const uint8_t *)text,
			                         strlen(text), G, &c),
			    0);
			assert_true(c.ref);
			assert_int_equal(c.group, grp);
			assert_int_equal(c.slot, slot);
			assert_int_equal(c.tag, tag & ((1u << tb) - 1));
			assert_true(kvscan_ref_matches(&c, G, k, kl));
			int d = memcmp(c.seek, k,
			               c.seek_len < kl ? c.seek_len : kl);
			assert_true(d < 0 || (d == 0 && c.seek_len <= kl));
			/* the plain cursor of the same key is no reference */
			cur = kvscan_cursor_at(grp, G, k, kl);
			snprintf(text, sizeof text, "%llu",
			         (unsigned long long)cur);
			assert_int_equal(
			    kvscan_cursor_decode((const uint8_t *)text,
			                         strlen(text), G, &c),
			    0);
			assert_false(c.ref);
		}
	}
	/* no room for a tag beside 2^16 groups and more */
	assert_false(kvscan_ref_usable(65536));
	assert_false(kvscan_ref_usable(0));
}

static void test_cursor_ref_bad(void **state)
{
	struct kvscan_cursor c;
	char text[24];
	(void)state;
	/* 8 groups (4 bits): a reference naming group 0 or group 9 */
	snprintf(text, sizeof text, "%llu", 1ULL << 50);
	assert_int_equal(
	    kvscan_cursor_decode((const uint8_t *)text, strlen(text), 8, &c),
	    -1);
	snprintf(text, sizeof text, "%llu", 9ULL << 55);
	assert_int_equal(
	    kvscan_cursor_decode((const uint8_t *)text, strlen(text), 8, &c),
	    -1);
	snprintf(text, sizeof text, "%llu", 8ULL << 55);
	assert_int_equal(
	    kvscan_cursor_decode((const uint8_t *)text, strlen(text), 8, &c),
	    0);
	assert_true(c.ref);
	assert_int_equal(c.group, 8);
}

/* A page that started from a seek point answers a reference only past
 * it: the reference's own seek point must move on. */
static void test_ref_advances(void **state)
{
	const uint8_t *k = (const uint8_t *)"session:aaaa";
	uint8_t seek[KVSCAN_SEEK_MAX];
	(void)state;
	assert_true(kvscan_ref_advances(8, k, 12, NULL, 0));
	/* the plain seek point of the key itself is wider: not past it */
	size_t sl = kvscan_seek_of(8, k, 12, seek);
	assert_false(kvscan_ref_advances(8, k, 12, seek, sl));
	assert_false(kvscan_ref_advances(8, k, 12, (const uint8_t *)"set", 3));
	assert_true(kvscan_ref_advances(8, k, 12, (const uint8_t *)"sea", 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_glob_basic),
	    cmocka_unit_test(test_glob_classes),
	    cmocka_unit_test(test_glob_deep),
	    cmocka_unit_test(test_cursor_start_end),
	    cmocka_unit_test(test_cursor_bad),
	    cmocka_unit_test(test_cursor_round_trip),
	    cmocka_unit_test(test_cursor_ref),
	    cmocka_unit_test(test_cursor_ref_bad),
	    cmocka_unit_test(test_ref_advances),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
