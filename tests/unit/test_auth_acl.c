/* node/auth/acl_rule.c and acl.c: every rule token kind and bad ones,
 * Redis globs, checks per category, command and key, passwords, the
 * table and the NOPERM messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/auth/acl.h"

static void user(struct acl_user *u, const char *rules)
{
	char err[256];
	assert_int_equal(acl_user_init(u, "alice", 5, err, sizeof err), 0);
	if (acl_rules_apply_text(u, rules, strlen(rules), err, sizeof err) !=
	    0) {
		fail_msg("'%s' refused: %s", rules, err);
	}
}

static bool cmd(const struct acl_user *u, const char *c, uint32_t cats)
{
	return acl_user_allows_cmd(u, c, strlen(c), cats);
}

static bool key(const struct acl_user *u, const char *k, uint8_t need)
{
	return acl_user_allows_key(u, (const uint8_t *)k, strlen(k), need);
}

static bool glob(const char *p, const char *s)
{
	return acl_glob_match(p, strlen(p), s, strlen(s));
}

static bool pass(const struct acl_user *u, const char *p)
{
	return acl_user_password_ok(u, (const uint8_t *)p, strlen(p));
}

static void test_glob(void **state)
{
	(void)state;
	assert_true(glob("*", ""));
	assert_true(glob("*", "anything"));
	assert_true(glob("app:*", "app:1"));
	assert_true(glob("app:*", "app:"));
	assert_false(glob("app:*", "ap"));
	assert_false(glob("app:*", "xapp:1"));
	assert_true(glob("a?c", "abc"));
	assert_false(glob("a?c", "ac"));
	assert_true(glob("a*b*c", "a-b-c"));
	assert_true(glob("a*b*c", "abbbc"));
	assert_false(glob("a*b*c", "abx"));
	assert_true(glob("[abc]x", "bx"));
	assert_false(glob("[abc]x", "dx"));
	assert_true(glob("[^abc]x", "dx"));
	assert_false(glob("[^abc]x", "ax"));
	assert_true(glob("[a-c]*", "c9"));
	assert_true(glob("[c-a]*", "b"));
	assert_false(glob("[a-c]*", "d"));
	assert_true(glob("a\\*", "a*"));
	assert_false(glob("a\\*", "ab"));
	assert_true(glob("**x", "x"));
	assert_false(glob("", "x"));
	assert_true(glob("", ""));
	/* Pathological patterns stay polynomial. */
	assert_false(glob("*a*a*a*a*a*a*a*a*b",
	                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static void test_new_user_has_nothing(void **state)
{
	struct acl_user u;
	(void)state;
	user(&u, "");
	assert_false(u.on);
	assert_false(cmd(&u, "get", ACL_CAT_READ));
	assert_false(key(&u, "k", ACL_KEY_READ));
	assert_false(pass(&u, ""));
	acl_user_free(&u);
}

static void test_passwords(void **state)
{
	struct acl_user u;
	char err[256];
	(void)state;
	user(&u, "on >secret >other");
	assert_true(pass(&u, "secret"));
	assert_true(pass(&u, "other"));
	assert_false(pass(&u, "secre"));
	assert_true(acl_user_has_password(&u));
	assert_int_equal(acl_rule_apply(&u, "<other", 6, err, sizeof err), 0);
	assert_false(pass(&u, "other"));
	/* Removing an absent password is an error and changes nothing. */
	assert_int_equal(acl_rule_apply(&u, "<other", 6, err, sizeof err), -1);
	assert_null(strstr(err, "other"));
	assert_true(pass(&u, "secret"));
	/* off refuses every password. */
	assert_int_equal(acl_rule_apply(&u, "off", 3, err, sizeof err), 0);
	assert_false(pass(&u, "secret"));
	acl_user_free(&u);

	user(&u, "on nopass");
	assert_true(pass(&u, "whatever"));
	assert_false(acl_user_has_password(&u));
	assert_int_equal(acl_rule_apply(&u, "resetpass", 9, err, sizeof err),
	                 0);
	assert_false(pass(&u, "whatever"));
	acl_user_free(&u);

	/* SHA-256("password") */
	user(&u, "on #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef7"
	         "21d1542d8");
	assert_true(pass(&u, "password"));
	assert_int_equal(
	    acl_rule_apply(&u,
	                   "!5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a"
	                   "11ef721d1542d8",
	                   65, err, sizeof err),
	    0);
	assert_false(pass(&u, "password"));
	acl_user_free(&u);
}

static void test_categories_and_commands(void **state)
{
	struct acl_user u;
	(void)state;
	user(&u, "on +@read");
	assert_true(cmd(&u, "get", ACL_CAT_READ | ACL_CAT_STRING));
	assert_false(cmd(&u, "set", ACL_CAT_WRITE | ACL_CAT_STRING));
	assert_false(cmd(&u, "flow.create", ACL_CAT_FLOW | ACL_CAT_WRITE));
	acl_user_free(&u);

	user(&u, "+@all -@write +set");
	assert_true(cmd(&u, "get", ACL_CAT_READ));
	assert_true(cmd(&u, "SET", ACL_CAT_WRITE));
	assert_false(cmd(&u, "del", ACL_CAT_WRITE | ACL_CAT_KEYSPACE));
	assert_true(cmd(&u, "acl", ACL_CAT_ADMIN));
	acl_user_free(&u);

	/* The last matching rule decides. */
	user(&u, "+set -@write");
	assert_false(cmd(&u, "set", ACL_CAT_WRITE));
	acl_user_free(&u);

	user(&u, "allcommands -@admin");
	assert_false(cmd(&u, "acl", ACL_CAT_ADMIN));
	assert_true(cmd(&u, "flow.get", ACL_CAT_FLOW | ACL_CAT_READ));
	acl_user_free(&u);

	user(&u, "allcommands nocommands +@flow");
	assert_true(cmd(&u, "flow.get", ACL_CAT_FLOW | ACL_CAT_READ));
	assert_false(cmd(&u, "get", ACL_CAT_READ));
	acl_user_free(&u);

	user(&u, "+@all -get");
	assert_false(cmd(&u, "GET", ACL_CAT_READ));
	assert_true(cmd(&u, "mget", ACL_CAT_READ));
	acl_user_free(&u);
}

/* Runs acl_check_flow_query; the message into msg. */
static int fq(const struct acl_user *u, const char *pk, bool explain,
              bool analyze, char *msg, size_t cap)
{
	msg[0] = '\0';
	return acl_check_flow_query(u, "u", (const uint8_t *)pk,
	                            pk != NULL ? strlen(pk) : 0, explain,
	                            analyze, msg, cap);
}

/* FLOW.QUERY is @flow @read; FLOW.QUERY.EXPLAIN is in no category but
 * @all; EXPLAIN ANALYZE needs both; each needs read access to the
 * partition (every key when the query spans partitions). */
static void test_flow_query(void **state)
{
	struct acl_user u;
	char msg[256];
	(void)state;

	user(&u, "on +@read allkeys");
	assert_int_equal(fq(&u, "p1", false, false, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, NULL, false, false, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, "p1", true, false, msg, sizeof msg), -1);
	assert_string_equal(msg, "NOPERM User u has no permissions to run "
	                         "the 'flow.query.explain' command");
	assert_int_equal(fq(&u, "p1", true, true, msg, sizeof msg), -1);
	assert_non_null(strstr(msg, "'flow.query.explain'"));
	/* analyze alone is a plain query. */
	assert_int_equal(fq(&u, "p1", false, true, msg, sizeof msg), 0);
	acl_user_free(&u);

	user(&u, "on +@flow allkeys");
	assert_int_equal(fq(&u, "p1", false, false, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, "p1", true, false, msg, sizeof msg), -1);
	acl_user_free(&u);

	/* Explain by name: plans, but not rows; ANALYZE runs the query. */
	user(&u, "on +flow.query.explain allkeys");
	assert_int_equal(fq(&u, "p1", true, false, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, "p1", false, false, msg, sizeof msg), -1);
	assert_string_equal(msg, "NOPERM User u has no permissions to run "
	                         "the 'flow.query' command");
	assert_int_equal(fq(&u, "p1", true, true, msg, sizeof msg), -1);
	assert_non_null(strstr(msg, "'flow.query' command"));
	acl_user_free(&u);

	user(&u, "on +@read +flow.query.explain allkeys");
	assert_int_equal(fq(&u, "p1", true, true, msg, sizeof msg), 0);
	acl_user_free(&u);

	/* +@all grants both; a -flow.query.explain after it takes it
	 * back, and categories never do. */
	user(&u, "on +@all allkeys");
	assert_int_equal(fq(&u, "p1", true, true, msg, sizeof msg), 0);
	acl_user_free(&u);
	user(&u, "on +@all -flow.query.explain allkeys");
	assert_int_equal(fq(&u, "p1", true, false, msg, sizeof msg), -1);
	assert_int_equal(fq(&u, "p1", false, false, msg, sizeof msg), 0);
	acl_user_free(&u);
	user(&u, "on +@all -@read -@flow allkeys");
	assert_int_equal(fq(&u, "p1", true, false, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, "p1", false, false, msg, sizeof msg), -1);
	acl_user_free(&u);
	user(&u, "on +flow.query +flow.query.explain allkeys -flow.query");
	assert_int_equal(fq(&u, "p1", true, true, msg, sizeof msg), -1);
	acl_user_free(&u);

	/* The partition: read access, and every key without one. */
	user(&u, "on +@all %R~tenant-a* %W~w:*");
	assert_int_equal(fq(&u, "tenant-a1", true, true, msg, sizeof msg), 0);
	assert_int_equal(fq(&u, "tenant-b", false, false, msg, sizeof msg), -1);
	assert_string_equal(msg, "NOPERM User u has no permissions to access "
	                         "the 'tenant-b' key");
	assert_int_equal(fq(&u, "tenant-b", true, false, msg, sizeof msg), -1);
	assert_int_equal(fq(&u, "w:1", false, false, msg, sizeof msg), -1);
	assert_int_equal(fq(&u, NULL, false, false, msg, sizeof msg), -1);
	assert_non_null(strstr(msg, "'*' key"));
	acl_user_free(&u);

	/* The catalogue's categories. */
	assert_true((ACL_CATS_FLOW_QUERY & ACL_CAT_FLOW) != 0);
	assert_true((ACL_CATS_FLOW_QUERY & ACL_CAT_READ) != 0);
	assert_int_equal(
	    ACL_CATS_FLOW_QUERY_EXPLAIN & (ACL_CAT_FLOW | ACL_CAT_READ), 0);
}

/* What ACL_APPLY runs: tokens on top of the stored rules; the hashed
 * form of a password token is the same rule. */
static void test_merge(void **state)
{
	char out[1024], err[256], h[ACL_TOKEN_MAX + 1];
	struct acl_token t[3];
	struct acl_user u;
	(void)state;

	t[0] = (struct acl_token){"on", 2};
	t[1] = (struct acl_token){"+@read", 6};
	assert_int_equal(acl_rules_merge("app", 3, NULL, 0, t, 2, out,
	                                 sizeof out, err, sizeof err),
	                 (int)strlen("on +@read"));
	assert_string_equal(out, "on +@read");
	t[0] = (struct acl_token){"~k:*", 4};
	const char *cur = "on +@read";
	assert_true(acl_rules_merge("app", 3, cur, strlen(cur), t, 1, out,
	                            sizeof out, err, sizeof err) > 0);
	assert_string_equal(out, "on ~k:* +@read");
	/* A token that does not apply: -1, its message, never the token. */
	t[0] = (struct acl_token){"+@nonsense", 10};
	assert_int_equal(acl_rules_merge("app", 3, cur, strlen(cur), t, 1, out,
	                                 sizeof out, err, sizeof err),
	                 -1);
	assert_non_null(strstr(err, "category"));
	t[0] = (struct acl_token){"hunter2", 7};
	assert_int_equal(acl_rules_merge("app", 3, cur, strlen(cur), t, 1, out,
	                                 sizeof out, err, sizeof err),
	                 -1);
	assert_null(strstr(err, "hunter2"));
	assert_int_equal(acl_rules_merge("", 0, NULL, 0, t, 0, out, sizeof out,
	                                 err, sizeof err),
	                 -1);
	/* At most ACL_SETUSER_TOKENS_MAX tokens. */
	{
		static struct acl_token many[ACL_SETUSER_TOKENS_MAX + 1];
		for (size_t i = 0; i <= ACL_SETUSER_TOKENS_MAX; i++) {
			many[i] = (struct acl_token){"on", 2};
		}
		assert_true(acl_rules_merge("app", 3, NULL, 0, many,
		                            ACL_SETUSER_TOKENS_MAX, out,
		                            sizeof out, err, sizeof err) > 0);
		assert_int_equal(acl_rules_merge("app", 3, NULL, 0, many,
		                                 ACL_SETUSER_TOKENS_MAX + 1,
		                                 out, sizeof out, err,
		                                 sizeof err),
		                 -1);
		assert_non_null(strstr(err, "at most"));
	}
	/* Too long for out. */
	t[0] = (struct acl_token){"on", 2};
	assert_int_equal(acl_rules_merge("app", 3, cur, strlen(cur), t, 1, out,
	                                 4, err, sizeof err),
	                 -1);

	/* Hashed tokens. */
	assert_int_equal(acl_token_hashed(">password", 9, h, sizeof h), 65);
	assert_string_equal(h, "#5e884898da28047151d0e56f8dc6292773603d0d6aabb"
	                       "dd62a11ef721d1542d8");
	assert_int_equal(acl_token_hashed("<password", 9, h, sizeof h), 65);
	assert_int_equal(h[0], '!');
	assert_int_equal(acl_token_hashed("~a:*", 4, h, sizeof h), 4);
	assert_string_equal(h, "~a:*");
	assert_int_equal(acl_token_hashed("~a:*", 4, h, 4), -1);
	user(&u, "on >password");
	t[0] = (struct acl_token){h, 0};
	assert_int_equal(acl_token_hashed("<password", 9, h, sizeof h), 65);
	t[0].len = 65;
	assert_true(acl_rules_merge("app", 3,
	                            "on #5e884898da28047151d0e56f8dc6"
	                            "292773603d0d6aabbdd62a11ef721d15"
	                            "42d8",
	                            68, t, 1, out, sizeof out, err,
	                            sizeof err) > 0);
	assert_string_equal(out, "on -@all");
	assert_true(pass(&u, "password"));
	acl_user_free(&u);
}

static void test_keys(void **state)
{
	struct acl_user u;
	(void)state;
	user(&u, "~app:* %R~ro:* %W~wo:*");
	assert_true(key(&u, "app:1", ACL_KEY_READ | ACL_KEY_WRITE));
	assert_true(key(&u, "ro:1", ACL_KEY_READ));
	assert_false(key(&u, "ro:1", ACL_KEY_WRITE));
	assert_true(key(&u, "wo:1", ACL_KEY_WRITE));
	assert_false(key(&u, "wo:1", ACL_KEY_READ));
	assert_false(key(&u, "other", ACL_KEY_READ));
	acl_user_free(&u);

	user(&u, "%R~k %W~k");
	assert_true(key(&u, "k", ACL_KEY_READ | ACL_KEY_WRITE));
	acl_user_free(&u);

	user(&u, "%RW~x* allkeys resetkeys ~y");
	assert_false(key(&u, "x1", ACL_KEY_READ));
	assert_true(key(&u, "y", ACL_KEY_READ));
	acl_user_free(&u);

	user(&u, "allkeys");
	assert_true(key(&u, "", ACL_KEY_WRITE));
	assert_true(key(&u, "\xff\x00", ACL_KEY_WRITE));
	acl_user_free(&u);
}

static void test_reset(void **state)
{
	struct acl_user u;
	(void)state;
	user(&u, "on >p allkeys allcommands reset");
	assert_false(u.on);
	assert_false(pass(&u, "p"));
	assert_false(key(&u, "k", ACL_KEY_READ));
	assert_false(cmd(&u, "get", ACL_CAT_READ));
	acl_user_free(&u);
}

static void test_bad_tokens(void **state)
{
	static const char *bad[] = {
	    "bogus",
	    "+@nope",
	    "-@",
	    "%~k",
	    "%X~k",
	    "%R",
	    "%Rk",
	    "~",
	    "%R~",
	    "#abc",
	    "#zz5e884898da28047151d0e56f8dc629277"
	    "3603d0d6aabbdd62a11ef721d1542d8",
	    "+",
	    "-",
	    "+a|b",
	    "~a b",
	    "on\x01",
	};
	struct acl_user u;
	char err[256], before[1024], after[1024];
	(void)state;
	user(&u, "on >keep ~k +get");
	assert_true(acl_user_describe(&u, before, sizeof before) > 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (acl_rule_apply(&u, bad[i], strlen(bad[i]), err,
		                   sizeof err) == 0) {
			fail_msg("'%s' accepted", bad[i]);
		}
		assert_true(strncmp(err, "ERR ", 4) == 0);
	}
	/* A bare word that may be a password is never echoed. */
	assert_int_equal(acl_rule_apply(&u, "hunter2", 7, err, sizeof err), -1);
	assert_null(strstr(err, "hunter2"));
	char big[ACL_TOKEN_MAX + 2];
	memset(big, 'a', sizeof big);
	big[0] = '~';
	assert_int_equal(acl_rule_apply(&u, big, sizeof big, err, sizeof err),
	                 -1);
	assert_true(acl_user_describe(&u, after, sizeof after) > 0);
	assert_string_equal(before, after);
	acl_user_free(&u);

	assert_int_equal(acl_user_init(&u, "", 0, err, sizeof err), -1);
	assert_int_equal(acl_user_init(&u, "a b", 3, err, sizeof err), -1);
	memset(big, 'a', sizeof big);
	assert_int_equal(
	    acl_user_init(&u, big, ACL_NAME_MAX + 1, err, sizeof err), -1);
}

static void test_limits(void **state)
{
	struct acl_user u;
	char err[256], tok[32];
	int rv = 0;
	(void)state;
	user(&u, "");
	for (int i = 0; i <= ACL_PATTERNS_MAX && rv == 0; i++) {
		snprintf(tok, sizeof tok, "~p%d", i);
		rv = acl_rule_apply(&u, tok, strlen(tok), err, sizeof err);
	}
	assert_int_equal(rv, -1);
	assert_int_equal(u.n_pat, ACL_PATTERNS_MAX);
	rv = 0;
	for (int i = 0; i <= ACL_PASSWORDS_MAX && rv == 0; i++) {
		snprintf(tok, sizeof tok, ">p%d", i);
		rv = acl_rule_apply(&u, tok, strlen(tok), err, sizeof err);
	}
	assert_int_equal(rv, -1);
	assert_int_equal(u.n_pass, ACL_PASSWORDS_MAX);
	acl_user_free(&u);
}

static void test_describe_round_trip(void **state)
{
	struct acl_user u, v;
	char a[2048], b[2048], err[256];
	(void)state;
	user(&u, "on >secret ~app:* %R~ro:* %W~wo:* +@read -get +SET");
	assert_true(acl_user_describe(&u, a, sizeof a) > 0);
	assert_null(strstr(a, "secret"));
	assert_non_null(strstr(a, "#2bb80d537b1da3e38bd30361aa855686bde0eacd"
	                          "7162fef6a25fe97bf527a25b"));
	assert_non_null(strstr(a, "%R~ro:*"));
	assert_non_null(strstr(a, "+set"));
	assert_int_equal(acl_user_init(&v, "alice", 5, err, sizeof err), 0);
	assert_int_equal(
	    acl_rules_apply_text(&v, a, strlen(a), err, sizeof err), 0);
	assert_int_equal(acl_user_describe(&v, b, sizeof b), (int)strlen(a));
	assert_string_equal(a, b);
	assert_true(pass(&v, "secret"));
	assert_int_equal(acl_user_describe(&u, a, 8), -1);
	acl_user_free(&u);
	acl_user_free(&v);
}

static void test_table(void **state)
{
	struct acl_table t;
	char err[256];
	const char *names[] = {"bob", "alice", "carol", "alice"};
	(void)state;
	acl_table_init(&t);
	for (size_t i = 0; i < 4; i++) {
		struct acl_user *u = malloc(sizeof *u);
		assert_non_null(u);
		assert_int_equal(acl_user_init(u, names[i], strlen(names[i]),
		                               err, sizeof err),
		                 0);
		if (i == 3) {
			assert_int_equal(acl_rules_apply_text(u, "on >pw", 6,
			                                      err, sizeof err),
			                 0);
		}
		assert_int_equal(acl_table_put(&t, u), 0);
	}
	assert_int_equal(t.n, 3);
	assert_string_equal(t.u[0]->name, "alice");
	assert_string_equal(t.u[2]->name, "carol");
	assert_non_null(acl_table_find(&t, "bob", 3));
	assert_null(acl_table_find(&t, "bo", 2));
	assert_true(acl_table_has_password(&t));
	assert_int_equal(acl_table_del(&t, "alice", 5), 1);
	assert_int_equal(acl_table_del(&t, "alice", 5), 0);
	assert_false(acl_table_has_password(&t));
	acl_table_free(&t);
}

static void test_noperm(void **state)
{
	char buf[256];
	(void)state;
	acl_noperm_cmd(buf, sizeof buf, "alice", "SET", 3);
	assert_string_equal(
	    buf, "NOPERM User alice has no permissions to run the 'set' "
	         "command");
	acl_noperm_key(buf, sizeof buf, "alice", (const uint8_t *)"k\n1", 3);
	assert_string_equal(
	    buf, "NOPERM User alice has no permissions to access the "
	         "'k\\x0a1' key");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_glob),
	    cmocka_unit_test(test_new_user_has_nothing),
	    cmocka_unit_test(test_passwords),
	    cmocka_unit_test(test_categories_and_commands),
	    cmocka_unit_test(test_flow_query),
	    cmocka_unit_test(test_merge),
	    cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_reset),
	    cmocka_unit_test(test_bad_tokens),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_describe_round_trip),
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_noperm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
