/* The meta group's FSNP ACL users (ACL_SETUSER / ACL_DELUSER / ACL_LIST):
 * set, replace, delete, list in name order, validation, meta-group only,
 * codec round trip, the ACL observer. The rules are opaque to the store;
 * ACL_APPLY hands them and its tokens to the registered rules function
 * (here one that appends each token, refusing "bad") inside the apply. */
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

/* Appends the tokens to the rules, space-separated; "bad" fails. */
static int append_rules(void *data, struct store_slice name,
                        const struct store_slice *rules,
                        const struct store_list *tokens, char *out, size_t cap,
                        char *err, size_t errlen)
{
	struct store_list_iter it;
	struct store_slice t;
	size_t n = 0;
	int *calls = data;
	(void)name;
	(*calls)++;
	if (rules != NULL) {
		if (rules->len >= cap) {
			return -1;
		}
		memcpy(out, rules->p, rules->len);
		n = rules->len;
	}
	store_list_iter_init(&it, tokens);
	while (store_list_next(&it, &t)) {
		if (t.len == 3 && memcmp(t.p, "bad", 3) == 0) {
			snprintf(err, errlen, "ERR a bad rule");
			return -1;
		}
		if (n + 1 + t.len >= cap) {
			return -1;
		}
		if (n > 0) {
			out[n++] = ' ';
		}
		memcpy(out + n, t.p, t.len);
		n += t.len;
	}
	return (int)n;
}

static struct store_cmd apply_cmd(const char *name, struct store_slice *v,
                                  const char *const *toks, uint32_t n)
{
	struct store_cmd c = acl_cmd(STORE_OP_ACL_APPLY, name, NULL);
	for (uint32_t i = 0; i < n; i++) {
		v[i] = S(toks[i]);
	}
	c.items.n = n;
	c.items.v = v;
	return c;
}

static void expect_rules(struct tdb *t, struct store_cmd *c, int64_t created,
                         const char *rules)
{
	struct tres x;
	tapply(&x, t, 0, 100, c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_i64(&x), created);
	assert_string_equal(tres_bytes(&x, NULL), rules);
	tres_free(&x);
}

static void expect_listed(struct tdb *t, const char *rules)
{
	struct tres x;
	struct store_cmd c = acl_cmd(STORE_OP_ACL_LIST, NULL, NULL);
	tread(&x, t, 0, 200, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 1);
	assert_int_equal(tres_array(&x), 2);
	assert_string_equal(tres_bytes(&x, NULL), "alice");
	assert_string_equal(tres_bytes(&x, NULL), rules);
	tres_free(&x);
}

/* ACL_APPLY: the tokens go on top of the stored rules inside the apply,
 * so two changes of one user in one entry (or in any two entries) both
 * land, in log order; a failing token changes nothing; without a rules
 * function every replica refuses alike. */
static void test_apply(void **state)
{
	struct tdb t;
	struct tres x;
	struct store_cmd c, two[2];
	struct store_slice v[4], w[4];
	struct seen seen = {0};
	int calls = 0;
	(void)state;

	tdb_open(&t);
	const char *on[] = {"on"};
	c = apply_cmd("alice", v, on, 1);
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	c = acl_cmd(STORE_OP_ACL_LIST, NULL, NULL);
	tread(&x, &t, 0, 200, &c);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);

	store_set_acl_rules(t.s, append_rules, &calls);
	store_set_acl_observer(t.s, on_acl, &seen);
	c = apply_cmd("alice", v, on, 1);
	expect_rules(&t, &c, 1, "on");
	assert_string_equal(seen.rules, "on");
	const char *read[] = {"+@read", "~a:*"};
	c = apply_cmd("alice", v, read, 2);
	expect_rules(&t, &c, 0, "on +@read ~a:*");
	assert_int_equal(seen.n, 2);
	assert_string_equal(seen.rules, "on +@read ~a:*");

	/* Two changes in one entry, each made without seeing the other:
	 * both land, in order. */
	const char *set[] = {"+set"};
	const char *keys[] = {"~b:*"};
	two[0] = apply_cmd("alice", v, set, 1);
	two[1] = apply_cmd("alice", w, keys, 1);
	struct fsm_result *res = tdb_apply_entry(&t, 0, 100, two, 2);
	for (int i = 0; i < 2; i++) {
		tres_init(&x, (uint8_t *)res[i].data, res[i].len);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
	}
	free(res);
	expect_listed(&t, "on +@read ~a:* +set ~b:*");
	assert_int_equal(seen.n, 4);
	assert_string_equal(seen.rules, "on +@read ~a:* +set ~b:*");

	/* A failing token: nothing changes, nobody is told. */
	const char *bad[] = {"+del", "bad"};
	c = apply_cmd("alice", v, bad, 2);
	tapply(&x, &t, 0, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	expect_listed(&t, "on +@read ~a:* +set ~b:*");
	assert_int_equal(seen.n, 4);
	/* Meta group only. */
	c = apply_cmd("alice", v, on, 1);
	tapply(&x, &t, 1, 100, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);

	/* The codec. */
	uint8_t *buf;
	size_t len;
	const char *err = NULL;
	struct store_cmd d;
	assert_true(store_op_is_meta(STORE_OP_ACL_APPLY));
	assert_false(store_op_is_read(STORE_OP_ACL_APPLY));
	assert_string_equal(store_op_name(STORE_OP_ACL_APPLY), "ACL_APPLY");
	c = apply_cmd("alice", v, read, 2);
	buf = tcmd_encode(&c, &len);
	assert_int_equal(store_cmd_decode(buf, len, &d, &err), 0);
	assert_int_equal(d.op, STORE_OP_ACL_APPLY);
	assert_int_equal(d.items.n, 2);
	free(buf);
	store_set_acl_observer(t.s, NULL, NULL);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_set_replace_delete_list),
	    cmocka_unit_test(test_validation),
	    cmocka_unit_test(test_codec),
	    cmocka_unit_test(test_observer),
	    cmocka_unit_test(test_apply),
	};
	return cmocka_run_group_tests_name("store_acl", tests, NULL, NULL);
}
