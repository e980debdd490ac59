/* The meta group's FSNP ACL users (ACL_SETUSER / ACL_DELUSER / ACL_LIST):
 * set, replace, delete, list in name order, validation, meta-group only,
 * codec round trip, the ACL observer. The rules are opaque to the store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

static struct store_cmd acl_cmd(uint8_t op, const char *name, const char *rules)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	if (name != NULL) {
		c.key.p = (const uint8_t *)name;
		c.key.len = strlen(name);
	}
	if (rules != NULL) {
		c.value.p = (const uint8_t *)rules;
		c.value.len = strlen(rules);
	}
	return c;
}

static void expect_i64(struct tdb *t, uint32_t group, struct store_cmd *c,
                       int64_t want)
{
	struct tres x;
	tapply(&x, t, group, 100, c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_i64(&x), want);
	tres_free(&x);
}

static void test_set_replace_delete_list(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c;
	(void)state;

	tdb_open(&t);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "carol", "on nopass");
	expect_i64(&t, 0, &c, 1);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "alice", "off");
	expect_i64(&t, 0, &c, 1);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "alice", "on ~a:* +@read");
	expect_i64(&t, 0, &c, 0); /* replaced */
	c = acl_cmd(STORE_OP_ACL_SETUSER, "bob", "");
	expect_i64(&t, 0, &c, 1);
	c = acl_cmd(STORE_OP_ACL_DELUSER, "bob", NULL);
	expect_i64(&t, 0, &c, 1);
	c = acl_cmd(STORE_OP_ACL_DELUSER, "bob", NULL);
	expect_i64(&t, 0, &c, 0);

	c = acl_cmd(STORE_OP_ACL_LIST, NULL, NULL);
	tread(&x, &t, 0, 200, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "alice");
	assert_string_equal(tres_bytes(&x, NULL), "on ~a:* +@read");
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "carol");
	assert_string_equal(tres_bytes(&x, NULL), "on nopass");
	tres_free(&x);
	tdb_close(&t);
}

static void test_validation(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c;
	char name[80];
	(void)state;

	tdb_open(&t);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "", "on");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	c = acl_cmd(STORE_OP_ACL_SETUSER, name, "on");
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	/* Users belong to the meta group only. */
	c = acl_cmd(STORE_OP_ACL_SETUSER, "alice", "on");
	tapply(&x, &t, 1, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	tdb_close(&t);
}

static void test_codec(void **state)
{
	struct store_cmd c, d;
	uint8_t *buf;
	size_t len;
	const char *err = NULL;
	(void)state;

	assert_true(store_op_is_meta(STORE_OP_ACL_SETUSER));
	assert_true(store_op_is_meta(STORE_OP_ACL_DELUSER));
	assert_true(store_op_is_meta(STORE_OP_ACL_LIST));
	assert_false(store_op_is_read(STORE_OP_ACL_SETUSER));
	assert_false(store_op_is_read(STORE_OP_ACL_DELUSER));
	assert_true(store_op_is_read(STORE_OP_ACL_LIST));
	assert_string_equal(store_op_name(STORE_OP_ACL_SETUSER), "ACL_SETUSER");
	c = acl_cmd(STORE_OP_ACL_SETUSER, "alice", "on #00");
	buf = tcmd_encode(&c, &len);
	assert_int_equal(store_cmd_decode(buf, len, &d, &err), 0);
	assert_int_equal(d.op, STORE_OP_ACL_SETUSER);
	assert_int_equal(d.key.len, 5);
	assert_memory_equal(d.key.p, "alice", 5);
	assert_int_equal(d.value.len, 6);
	free(buf);
}

struct seen {
	int n;
	char name[16];
	char rules[64];
	bool deleted;
};

static void on_acl(void *data, struct store_slice name,
                   const struct store_slice *rules)
{
	struct seen *x = data;
	x->n++;
	snprintf(x->name, sizeof x->name, "%.*s", (int)name.len,
	         (const char *)name.p);
	x->deleted = rules == NULL;
	snprintf(x->rules, sizeof x->rules, "%.*s", rules ? (int)rules->len : 0,
	         rules ? (const char *)rules->p : "");
}

static void test_observer(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct seen x = {0};
	(void)state;

	tdb_open(&t);
	store_set_acl_observer(t.s, on_acl, &x);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "alice", "on nopass");
	expect_i64(&t, 0, &c, 1);
	assert_int_equal(x.n, 1);
	assert_string_equal(x.name, "alice");
	assert_string_equal(x.rules, "on nopass");
	assert_false(x.deleted);
	/* Deleting nobody is no change. */
	c = acl_cmd(STORE_OP_ACL_DELUSER, "bob", NULL);
	expect_i64(&t, 0, &c, 0);
	assert_int_equal(x.n, 1);
	c = acl_cmd(STORE_OP_ACL_DELUSER, "alice", NULL);
	expect_i64(&t, 0, &c, 1);
	assert_int_equal(x.n, 2);
	assert_true(x.deleted);
	/* Refused commands are no change either. */
	c = acl_cmd(STORE_OP_ACL_SETUSER, "", "on");
	struct tres r;
	tapply(&r, &t, 0, 100, &c);
	tres_free(&r);
	assert_int_equal(x.n, 2);
	store_set_acl_observer(t.s, NULL, NULL);
	c = acl_cmd(STORE_OP_ACL_SETUSER, "carol", "on");
	expect_i64(&t, 0, &c, 1);
	assert_int_equal(x.n, 2);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_set_replace_delete_list),
	    cmocka_unit_test(test_validation),
	    cmocka_unit_test(test_codec),
	    cmocka_unit_test(test_observer),
	};
	return cmocka_run_group_tests_name("store_acl", tests, NULL, NULL);
}
