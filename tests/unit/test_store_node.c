/* The meta group's node records (NODE_SET / NODE_LIST / NODE_JOIN /
 * NODE_STATE / NODE_VOTER) and settings (CONF_INIT / CONF_GET): set, replace,
 * list in id order, membership states, validation, meta-group only, codec round
 * trip. */
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
	/* Format 2: version, state (active), the addresses. */
	assert_memory_equal(tres_bytes(&x, &len),
	                    "\x02\x01\0\0\0\0\0\0\0\x01"
	                    "felix=h1:2",
	                    20);
	assert_int_equal(tres_array(&x), 2);
	assert_memory_equal(tres_bytes(&x, &len), k2, 8);
	assert_memory_equal(tres_bytes(&x, &len), "\x02\x01\0\0\0\0\0\0\0\x02",
	                    10);
	assert_int_equal(len, 10);
	assert_int_equal(tres_array(&x), 2);
	assert_memory_equal(tres_bytes(&x, &len), k3, 8);
	assert_memory_equal(tres_bytes(&x, &len),
	                    "\x02\x01\0\0\0\0\0\0\x01\x2c"
	                    "felix=h3:1",
	                    20);
	tres_free(&x);
	tdb_close(&t);
}

/* The record of node 1 as NODE_LIST returns it (one node listed). */
static void expect_record(struct tdb *t, const char *rec, size_t rlen)
{
	struct tres x;
	struct store_cmd c;
	size_t len;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_LIST;
	tread(&x, t, 0, 200, &c);
	assert_int_equal(tres_array(&x), 1);
	assert_int_equal(tres_array(&x), 2);
	tres_bytes(&x, &len);
	assert_memory_equal(tres_bytes(&x, &len), rec, rlen);
	assert_int_equal(len, rlen);
	tres_free(&x);
}

static void apply_status(struct tdb *t, struct store_cmd *c, uint8_t status,
                         int64_t v)
{
	struct tres x;
	tapply(&x, t, 0, 100, c);
	assert_int_equal(tres_status(&x), status);
	if (status == STORE_OK) {
		assert_int_equal(tres_i64(&x), v);
	}
	tres_free(&x);
}

/* Membership: a joining record, its states, the addresses kept apart
 * from the state, a removed id refused. */
static void test_membership(void **state)
{
	struct tdb t;
	struct store_cmd c;
	uint8_t k1[8];
	(void)state;

	tdb_open(&t);
	node_key(k1, 1);
	c = node_set(k1, "internal=a:1");
	c.op = STORE_OP_NODE_JOIN;
	c.kind = STORE_NODE_JOINING;
	apply_status(&t, &c, STORE_OK, 1);
	expect_record(&t, "\x02\x00\0\0\0\0\0\0\0\x01internal=a:1", 22);
	apply_status(&t, &c, STORE_OK, 0); /* again: unchanged */
	/* The node's own record changes the addresses, not the state. */
	c = node_set(k1, "internal=a:1 fsnp=a:2");
	apply_status(&t, &c, STORE_OK, 0);
	expect_record(&t, "\x02\x00\0\0\0\0\0\0\0\x01internal=a:1 fsnp=a:2",
	              31);
	/* joining -> active -> draining; draining may not become active
	 * unless the mask lets it. */
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	c.key.p = k1;
	c.key.len = 8;
	c.kind = STORE_NODE_ACTIVE;
	c.max = 1u << STORE_NODE_JOINING;
	apply_status(&t, &c, STORE_OK, 1);
	apply_status(&t, &c, STORE_OK, 0);
	c.kind = STORE_NODE_DRAINING;
	c.max = 1u << STORE_NODE_ACTIVE;
	apply_status(&t, &c, STORE_OK, 1);
	c.kind = STORE_NODE_ACTIVE;
	c.max = 1u << STORE_NODE_JOINING;
	apply_status(&t, &c, STORE_ERR, 0);
	expect_record(&t, "\x02\x02\0\0\0\0\0\0\0\x01internal=a:1 fsnp=a:2",
	              31);
	/* A new placement slot (a replacement takes the dead node's). */
	c.kind = STORE_NODE_DRAINING;
	c.offset = 7;
	apply_status(&t, &c, STORE_OK, 1);
	apply_status(&t, &c, STORE_OK, 0);
	expect_record(&t, "\x02\x02\0\0\0\0\0\0\0\x07internal=a:1 fsnp=a:2",
	              31);
	c.offset = 0;
	c.kind = STORE_NODE_REMOVED;
	c.max = 1u << STORE_NODE_DRAINING;
	apply_status(&t, &c, STORE_OK, 1);
	/* A removed id cannot join again. */
	c = node_set(k1, "internal=a:1");
	c.op = STORE_OP_NODE_JOIN;
	apply_status(&t, &c, STORE_EXISTS, 0);
	/* Unknown node. */
	node_key(k1, 9);
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	c.key.p = k1;
	c.key.len = 8;
	c.kind = STORE_NODE_ACTIVE;
	c.max = 0xF;
	apply_status(&t, &c, STORE_NOT_FOUND, 0);
	tdb_close(&t);
}

/* The voter flag: a demoted node's record carries it (format 3, a flags
 * byte after the slot) through address and state changes; promoted, the
 * record is format 2 again; a removed or unknown node is refused. */
static void test_voter_flag(void **state)
{
	struct tdb t;
	struct store_cmd c, v;
	uint8_t k1[8];
	(void)state;

	tdb_open(&t);
	node_key(k1, 1);
	c = node_set(k1, "internal=a:1");
	c.op = STORE_OP_NODE_JOIN;
	c.kind = STORE_NODE_ACTIVE;
	apply_status(&t, &c, STORE_OK, 1);
	memset(&v, 0, sizeof v);
	v.op = STORE_OP_NODE_VOTER;
	v.key.p = k1;
	v.key.len = 8;
	v.kind = 0;
	apply_status(&t, &v, STORE_OK, 1);
	apply_status(&t, &v, STORE_OK, 0); /* already so */
	expect_record(&t, "\x03\x01\0\0\0\0\0\0\0\x01\x01internal=a:1", 23);
	/* The node republishing its addresses keeps the flag. */
	c = node_set(k1, "internal=a:1 fsnp=a:2");
	apply_status(&t, &c, STORE_OK, 0);
	expect_record(&t, "\x03\x01\0\0\0\0\0\0\0\x01\x01internal=a:1 fsnp=a:2",
	              32);
	/* So does a state change. */
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	c.key.p = k1;
	c.key.len = 8;
	c.kind = STORE_NODE_DRAINING;
	c.max = 1u << STORE_NODE_ACTIVE;
	apply_status(&t, &c, STORE_OK, 1);
	expect_record(&t, "\x03\x02\0\0\0\0\0\0\0\x01\x01internal=a:1 fsnp=a:2",
	              32);
	v.kind = 1;
	apply_status(&t, &v, STORE_OK, 1);
	apply_status(&t, &v, STORE_OK, 0);
	expect_record(&t, "\x02\x02\0\0\0\0\0\0\0\x01internal=a:1 fsnp=a:2",
	              31);
	v.kind = 2;
	apply_status(&t, &v, STORE_BAD_COMMAND, 0);
	c.kind = STORE_NODE_REMOVED;
	c.max = 1u << STORE_NODE_DRAINING;
	apply_status(&t, &c, STORE_OK, 1);
	v.kind = 0;
	apply_status(&t, &v, STORE_ERR, 0);
	node_key(k1, 9);
	apply_status(&t, &v, STORE_NOT_FOUND, 0);
	assert_true(store_op_is_meta(STORE_OP_NODE_VOTER));
	assert_false(store_op_is_read(STORE_OP_NODE_VOTER));
	tdb_close(&t);
}

/* Settings: set once, read back; the second set changes nothing. */
static void test_conf(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c;
	size_t len;
	(void)state;

	tdb_open(&t);
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_CONF_GET;
	c.key.p = (const uint8_t *)"replicas";
	c.key.len = 8;
	tread(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_true(tres_is_nil(&x));
	tres_free(&x);
	c.op = STORE_OP_CONF_INIT;
	c.value.p = (const uint8_t *)"3";
	c.value.len = 1;
	apply_status(&t, &c, STORE_OK, 1);
	c.value.p = (const uint8_t *)"5";
	apply_status(&t, &c, STORE_OK, 0);
	c.op = STORE_OP_CONF_GET;
	tread(&x, &t, 0, 100, &c);
	assert_memory_equal(tres_bytes(&x, &len), "3", 1);
	assert_int_equal(len, 1);
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
	    cmocka_unit_test(test_membership),
	    cmocka_unit_test(test_voter_flag),
	    cmocka_unit_test(test_conf),
	    cmocka_unit_test(test_codec),
	};
	return cmocka_run_group_tests_name("store_node", tests, NULL, NULL);
}
