/* Unit tests for wire/fsnp_slot: known answers, hash tags, the slot
 * layout over shards, Flow auto-partition buckets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "wire/fsnp_slot.h"

static unsigned slot(const char *key)
{
	return fsnp_slot_of((const uint8_t *)key, strlen(key));
}

static void test_known_answers(void **state)
{
	(void)state;
	/* CRC-32 (IEEE) check value. */
	assert_int_equal(fsnp_slot_crc32("123456789", 9), 0xCBF43926u);
	assert_int_equal(fsnp_slot_crc32(NULL, 0), 0);
	/* reference/fsnp.md */
	assert_int_equal(slot("plain"), 719);
	assert_int_equal(slot("{user:42}:x"), 390);
	assert_int_equal(slot("fa:0"), 1);
	assert_int_equal(slot(""), 0);
}

/* The table-driven CRC agrees with zlib's for every length up to past
 * the point where it hands over to zlib, at every alignment. */
static void test_crc_matches_zlib(void **state)
{
	uint8_t buf[320];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (size_t i = 0; i < sizeof buf; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 8; off++) {
		for (size_t len = 0; len + off <= sizeof buf; len++) {
			uint32_t want = (uint32_t)crc32_z(0L, buf + off, len);
			assert_int_equal(fsnp_slot_crc32(buf + off, len), want);
		}
	}
}

static void test_hash_tags(void **state)
{
	(void)state;
	assert_int_equal(slot("{user:42}:x"), slot("user:42"));
	assert_int_equal(slot("{user:42}:y"), slot("{user:42}"));
	assert_int_equal(slot("a{b}c{d}"), slot("b")); /* first tag */
	assert_int_equal(slot("x{a}}"), slot("a"));
	/* Empty or unclosed tags hash the whole key. */
	struct fsnp_bytes in;
	const char *whole[] = {"{}x", "x{", "x{y", "}{", "{", "x}y{"};
	for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
		in = fsnp_slot_hash_input((const uint8_t *)whole[i],
		                          strlen(whole[i]));
		assert_int_equal(in.len, strlen(whole[i]));
	}
	/* "{}{a}": the first '{' is followed by '}' at once: whole key. */
	in = fsnp_slot_hash_input((const uint8_t *)"{}{a}", 5);
	assert_int_equal(in.len, 5);
	in = fsnp_slot_hash_input((const uint8_t *)"pre{{a}}", 8);
	assert_int_equal(in.len, 2);
	assert_memory_equal(in.ptr, "{a", 2);
	/* The SDK's MSET keys share a slot. */
	assert_int_equal(slot("{t}:a"), slot("{t}:b"));
}

static void test_layout(void **state)
{
	(void)state;
	const unsigned counts[] = {1, 2, 3, 7, 16, 100, 1000, 1023, 1024};
	for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
		unsigned n = counts[c];
		unsigned next = 0;
		for (unsigned s = 0; s < n; s++) {
			unsigned first, last;
			assert_int_equal(fsnp_slot_range(s, n, &first, &last),
			                 0);
			assert_int_equal(first, next);
			unsigned size = last - first + 1;
			unsigned want = 1024 / n + (s < 1024 % n ? 1 : 0);
			assert_int_equal(size, want);
			for (unsigned sl = first; sl <= last; sl++) {
				assert_int_equal(fsnp_slot_shard(sl, n), s);
			}
			next = last + 1;
		}
		assert_int_equal(next, 1024);
	}
	unsigned first, last;
	assert_int_equal(fsnp_slot_range(0, 3, &first, &last), 0);
	assert_int_equal(last, 341); /* 342 slots */
	assert_int_equal(fsnp_slot_range(3, 3, &first, &last), -1);
	/* More shards than slots: the first 1024 get one slot each. */
	assert_int_equal(fsnp_slot_shard(1023, 2000), 1023);
	assert_int_equal(fsnp_slot_range(1023, 2000, &first, &last), 0);
	assert_int_equal(fsnp_slot_range(1024, 2000, &first, &last), -1);
	assert_int_equal(fsnp_slot_shard(5, 0), 0);
}

static void test_flow_buckets(void **state)
{
	char key[8];
	(void)state;
	assert_int_equal(fsnp_slot_flow_bucket((const uint8_t *)"order-1", 7),
	                 239);
	assert_int_equal(fsnp_slot_flow_bucket_key(239, key), 6);
	assert_string_equal(key, "fa:239");
	assert_int_equal(fsnp_slot_flow_bucket_key(0, key), 4);
	assert_int_equal(slot(key), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_answers),
	    cmocka_unit_test(test_crc_matches_zlib),
	    cmocka_unit_test(test_hash_tags),
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_flow_buckets),
	};
	return cmocka_run_group_tests_name("fsnp_slot", tests, NULL, NULL);
}
