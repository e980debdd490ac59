/* The meta group's node records (NODE_SET / NODE_LIST): set, replace,
 * list in id order, validation, meta-group only, codec round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

static void node_key(uint8_t *k, uint64_t id)
{
	for (int i = 0; i < 8; i++) {
		k[i] = (uint8_t)(id >> (56 - 8 * i));
	}
}

static struct store_cmd node_set(const uint8_t *key, const char *rec)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_SET;
	c.key.p = key;
	c.key.len = 8;
	c.value.p = (const uint8_t *)rec;
	c.value.len = strlen(rec);
	return c;
}

static void test_set_replace_list(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c;
	uint8_t k1[8], k2[8], k3[8];
	size_t len;
	(void)state;

	tdb_open(&t);
	node_key(k1, 1);
	node_key(k2, 2);
	node_key(k3, 300);
	c = node_set(k3, "felix=h3:1");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);
	c = node_set(k1, "felix=h1:1");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);
	c = node_set(k1, "felix=h1:2");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_i64(&x), 0); /* replaced */
	tres_free(&x);
	c = node_set(k2, "");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_LIST;
	tread(&x, &t, 0, 200, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_array(&x), 2);
	assert_memory_equal(tres_bytes(&x, &len), k1, 8);
	assert_string_equal(tres_bytes(&x, NULL), "felix=h1:2");
	assert_int_equal(tres_array(&x), 2);
	assert_memory_equal(tres_bytes(&x, &len), k2, 8);
	assert_string_equal(tres_bytes(&x, &len), "");
	assert_int_equal(len, 0);
	assert_int_equal(tres_array(&x), 2);
	assert_memory_equal(tres_bytes(&x, &len), k3, 8);
	assert_string_equal(tres_bytes(&x, NULL), "felix=h3:1");
	tres_free(&x);
	tdb_close(&t);
}

static void test_validation(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c;
	uint8_t k[8] = {0};
	char big[5000];
	(void)state;

	tdb_open(&t);
	c = node_set(k, "x");
	c.key.len = 4;
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	c = node_set(k, big);
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	/* Node records belong to the meta group only. */
	c = node_set(k, "x");
	tapply(&x, &t, 1, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	tdb_close(&t);
}

static void test_codec(void **state)
{
	struct store_cmd c, d;
	uint8_t k[8] = {0, 0, 0, 0, 0, 0, 0, 7};
	uint8_t *buf;
	size_t len;
	const char *err = NULL;
	(void)state;

	assert_true(store_op_is_meta(STORE_OP_NODE_SET));
	assert_true(store_op_is_meta(STORE_OP_NODE_LIST));
	assert_false(store_op_is_read(STORE_OP_NODE_SET));
	assert_true(store_op_is_read(STORE_OP_NODE_LIST));
	assert_string_equal(store_op_name(STORE_OP_NODE_SET), "NODE_SET");
	c = node_set(k, "rec");
	buf = tcmd_encode(&c, &len);
	assert_int_equal(store_cmd_decode(buf, len, &d, &err), 0);
	assert_int_equal(d.op, STORE_OP_NODE_SET);
	assert_int_equal(d.key.len, 8);
	assert_memory_equal(d.key.p, k, 8);
	assert_int_equal(d.value.len, 3);
	free(buf);
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_LIST;
	buf = tcmd_encode(&c, &len);
	assert_int_equal(len, 2);
	assert_int_equal(store_cmd_decode(buf, len, &d, &err), 0);
	/* A truncated command is an error. */
	assert_int_not_equal(store_cmd_decode(buf, len - 1, &d, &err), 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_set_replace_list),
	    cmocka_unit_test(test_validation),
	    cmocka_unit_test(test_codec),
	};
	return cmocka_run_group_tests_name("store_node", tests, NULL, NULL);
}
