/* Felix routing hash: the known answers of reference/felix.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/felix_hash.h"

static uint32_t shard(const char *key, uint32_t shards)
{
	return felix_hash_shard(shards, true, (const uint8_t *)key,
	                        strlen(key));
}

static void test_known_answers(void **state)
{
	assert_int_equal(shard("customer-0", 8), 0);
	assert_int_equal(shard("customer-4", 8), 2);
	assert_int_equal(shard("customer-1", 8), 3);
	assert_int_equal(shard("customer-6", 8), 4);
	assert_int_equal(shard("customer-2", 8), 6);
	assert_int_equal(shard("k0", 12), 6);
	assert_int_equal(shard("k1", 12), 10);
	assert_int_equal(shard("", 4), 3);
}

static void test_hash64(void **state)
{
	/* Full 64-bit values, computed independently from the spec. */
	assert_true(felix_hash64((const uint8_t *)"customer-0", 10) ==
	            0xe0ef692b167733d8ull);
	assert_true(felix_hash64((const uint8_t *)"k1", 2) ==
	            0x1f015d6af2b2eec6ull);
	assert_true(felix_hash64(NULL, 0) == 0xf52a15e9a9b5e89bull);
}

static void test_shard_zero_cases(void **state)
{
	/* Unkeyed, or one shard or none: always shard 0. */
	assert_int_equal(felix_hash_shard(8, false, NULL, 0), 0);
	assert_int_equal(felix_hash_shard(8, false, (const uint8_t *)"k", 1),
	                 0);
	assert_int_equal(shard("customer-4", 1), 0);
	assert_int_equal(shard("customer-4", 0), 0);
	/* An empty key is a key: not the unkeyed shard 0. */
	assert_int_equal(felix_hash_shard(4, true, NULL, 0), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_answers),
	    cmocka_unit_test(test_hash64),
	    cmocka_unit_test(test_shard_zero_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
