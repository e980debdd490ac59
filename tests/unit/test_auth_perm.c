/* node/auth/perm.c: permission parsing, keyMatch2-style patterns and the
 * inheritance of tenant.admin and ns.manage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "node/auth/perm.h"

static void add_ok(struct auth_perms *p, const char *s)
{
	char err[256];
	if (auth_perms_add(p, s, err, sizeof err) != 0) {
		fail_msg("'%s' refused: %s", s, err);
	}
}

static void test_patterns(void **state)
{
	(void)state;
	assert_true(auth_pattern_match("*", ""));
	assert_true(auth_pattern_match("*", "orders"));
	assert_true(auth_pattern_match("orders", "orders"));
	assert_false(auth_pattern_match("orders", "orders2"));
	assert_false(auth_pattern_match("orders", "order"));
	assert_true(auth_pattern_match("orders-*", "orders-eu"));
	assert_true(auth_pattern_match("orders-*", "orders-"));
	assert_false(auth_pattern_match("orders-*", "orders"));
	assert_false(auth_pattern_match("orders-*", "xorders-eu"));
	assert_true(auth_pattern_match("*-eu", "orders-eu"));
	assert_true(auth_pattern_match("a*b*c", "a-b-c"));
	assert_true(auth_pattern_match("a*b*c", "abbbc"));
	assert_false(auth_pattern_match("a*b*c", "abx"));
	assert_true(auth_pattern_match("**", "x"));
	/* A named segment: one non-empty value. */
	assert_true(auth_pattern_match(":name", "x"));
	assert_false(auth_pattern_match(":name", ""));
	assert_false(auth_pattern_match(":name", "a/b"));
}

static void test_parse_errors(void **state)
{
	(void)state;
	static const char *bad[] = {
	    "",
	    "stream.publish",
	    "stream.publish:",
	    "stream.delete:stream:a/b",
	    "stream.publish:cache:a/b",
	    "cache.read:stream:a/b",
	    "stream.publish:stream:a",
	    "stream.publish:stream:/b",
	    "stream.publish:stream:a/",
	    "stream.publish:stream:a/b/c",
	    "stream.publish:stream:a b/c",
	    "ns.manage:ns:",
	    "ns.manage:ns:a/b",
	    "ns.manage:stream:a/b",
	    "tenant.admin:tenant:t1",
	    "tenant.admin:ns:*",
	    "tenant.observe:tenant:",
	    "Stream.publish:stream:a/b",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct auth_perms p;
		char err[256] = "";
		auth_perms_init(&p);
		if (auth_perms_add(&p, bad[i], err, sizeof err) == 0) {
			fail_msg("'%s' was accepted", bad[i]);
		}
		assert_true(strlen(err) > 0);
		assert_int_equal(p.n, 0);
		auth_perms_free(&p);
	}
}

static void test_too_many(void **state)
{
	struct auth_perms p;
	char err[256], s[64];
	(void)state;
	auth_perms_init(&p);
	for (int i = 0; i < AUTH_PERMS_MAX; i++) {
		snprintf(s, sizeof s, "stream.publish:stream:ns/s%d", i);
		add_ok(&p, s);
	}
	assert_int_not_equal(
	    auth_perms_add(&p, "stream.publish:stream:ns/x", err, sizeof err),
	    0);
	auth_perms_free(&p);
	char big[AUTH_PERM_LEN_MAX + 64];
	memset(big, 'a', sizeof big);
	memcpy(big, "cache.read:cache:n/", 19);
	big[sizeof big - 1] = '\0';
	assert_int_not_equal(auth_perms_add(&p, big, err, sizeof err), 0);
	auth_perms_free(&p);
}

static void test_exact_actions(void **state)
{
	struct auth_perms p;
	(void)state;
	auth_perms_init(&p);
	add_ok(&p, "stream.publish:stream:orders/eu-*");
	add_ok(&p, "cache.read:cache:sessions/:name");
	assert_true(
	    auth_perms_allow(&p, AUTH_STREAM_PUBLISH, "orders", "eu-1"));
	assert_false(
	    auth_perms_allow(&p, AUTH_STREAM_PUBLISH, "orders", "us-1"));
	assert_false(
	    auth_perms_allow(&p, AUTH_STREAM_PUBLISH, "orders2", "eu-1"));
	/* Publishing implies nothing about subscribing. */
	assert_false(
	    auth_perms_allow(&p, AUTH_STREAM_SUBSCRIBE, "orders", "eu-1"));
	assert_true(auth_perms_allow(&p, AUTH_CACHE_READ, "sessions", "c1"));
	assert_false(auth_perms_allow(&p, AUTH_CACHE_WRITE, "sessions", "c1"));
	assert_false(auth_perms_allow(&p, AUTH_CACHE_READ, "orders", "eu-1"));
	/* A stream grant is not a cache grant of the same name. */
	assert_false(auth_perms_allow(&p, AUTH_CACHE_READ, "orders", "eu-1"));
	assert_false(auth_perms_allow(&p, AUTH_NS_MANAGE, "orders", NULL));
	assert_false(auth_perms_allow(&p, AUTH_TENANT_OBSERVE, NULL, NULL));
	assert_true(auth_perms_allow_any(&p, AUTH_STREAM_PUBLISH));
	assert_false(auth_perms_allow_any(&p, AUTH_STREAM_SUBSCRIBE));
	auth_perms_free(&p);
}

static void test_ns_manage_inherits(void **state)
{
	struct auth_perms p;
	static const enum auth_action data[] = {
	    AUTH_STREAM_PUBLISH, AUTH_STREAM_SUBSCRIBE, AUTH_CACHE_READ,
	    AUTH_CACHE_WRITE};
	(void)state;
	auth_perms_init(&p);
	add_ok(&p, "ns.manage:ns:billing");
	for (size_t i = 0; i < 4; i++) {
		assert_true(auth_perms_allow(&p, data[i], "billing", "x"));
		assert_false(auth_perms_allow(&p, data[i], "orders", "x"));
		assert_true(auth_perms_allow_any(&p, data[i]));
	}
	assert_true(auth_perms_allow(&p, AUTH_NS_MANAGE, "billing", NULL));
	assert_false(auth_perms_allow(&p, AUTH_NS_MANAGE, "orders", NULL));
	assert_false(auth_perms_allow(&p, AUTH_TENANT_ADMIN, NULL, NULL));
	assert_false(auth_perms_allow(&p, AUTH_TENANT_OBSERVE, NULL, NULL));
	auth_perms_free(&p);
	auth_perms_init(&p);
	add_ok(&p, "ns.manage:ns:team-*");
	assert_true(auth_perms_allow(&p, AUTH_CACHE_WRITE, "team-a", "c"));
	assert_false(auth_perms_allow(&p, AUTH_CACHE_WRITE, "teams", "c"));
	auth_perms_free(&p);
}

static void test_tenant_admin_inherits(void **state)
{
	struct auth_perms p;
	(void)state;
	auth_perms_init(&p);
	add_ok(&p, "tenant.admin:tenant:*");
	for (int a = AUTH_STREAM_PUBLISH; a <= AUTH_TENANT_OBSERVE; a++) {
		assert_true(
		    auth_perms_allow(&p, (enum auth_action)a, "any", "thing"));
		assert_true(auth_perms_allow_any(&p, (enum auth_action)a));
	}
	auth_perms_free(&p);
	auth_perms_init(&p);
	add_ok(&p, "tenant.observe:tenant:*");
	assert_true(auth_perms_allow(&p, AUTH_TENANT_OBSERVE, NULL, NULL));
	assert_false(auth_perms_allow(&p, AUTH_STREAM_SUBSCRIBE, "a", "b"));
	assert_false(auth_perms_allow(&p, AUTH_CACHE_READ, "a", "b"));
	auth_perms_free(&p);
}

static void test_empty_allows_nothing(void **state)
{
	struct auth_perms p;
	(void)state;
	auth_perms_init(&p);
	assert_false(auth_perms_allow(&p, AUTH_STREAM_PUBLISH, "a", "b"));
	assert_false(auth_perms_allow_any(&p, AUTH_CACHE_READ));
	auth_perms_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_patterns),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_too_many),
	    cmocka_unit_test(test_exact_actions),
	    cmocka_unit_test(test_ns_manage_inherits),
	    cmocka_unit_test(test_tenant_admin_inherits),
	    cmocka_unit_test(test_empty_allows_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
