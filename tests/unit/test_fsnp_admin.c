/* Unit: node/fsnp/fsnp_admin_args — admin `args` bodies, ID@HOST:PORT and
 * numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "node/fsnp/fsnp_admin.h"
#include "wire/buf.h"

struct body {
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
};

static void body_begin(struct body *x)
{
	wbuf_init(&x->b);
	fsnp_w_init(&x->w, &x->b);
	fsnp_w_map_begin(&x->w);
}

static const struct fsnp_val *body_end(struct body *x)
{
	fsnp_w_map_end(&x->w);
	assert_int_equal(fsnp_w_finish(&x->w), 0);
	assert_int_equal(
	    fsnp_value_decode_body(x->b.data, x->b.len, NULL, &x->v), 0);
	return &x->v;
}

static bool arg_is(const struct fsnp_admin_args *a, uint32_t i, const char *s)
{
	return a->v[i].len == strlen(s) &&
	       memcmp(a->v[i].ptr, s, a->v[i].len) == 0;
}

static void test_args_body(void **state)
{
	struct body x;
	struct fsnp_admin_args a;
	char err[FSNP_ADMIN_ERR_MAX];
	(void)state;
	body_begin(&x);
	fsnp_w_key(&x.w, "args");
	fsnp_w_array_begin(&x.w);
	fsnp_w_str(&x.w, "0");
	fsnp_w_u64(&x.w, 42);
	fsnp_w_i64(&x.w, -3);
	fsnp_w_array_end(&x.w);
	assert_int_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_int_equal(a.n, 3);
	assert_true(arg_is(&a, 0, "0"));
	assert_true(arg_is(&a, 1, "42"));
	assert_true(arg_is(&a, 2, "-3"));
	wbuf_free(&x.b);

	/* absent and nil: no arguments */
	body_begin(&x);
	assert_int_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_int_equal(a.n, 0);
	wbuf_free(&x.b);
	body_begin(&x);
	fsnp_w_key(&x.w, "args");
	fsnp_w_nil(&x.w);
	assert_int_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_int_equal(a.n, 0);
	wbuf_free(&x.b);
}

static void test_args_bad(void **state)
{
	struct body x;
	struct fsnp_admin_args a;
	char err[FSNP_ADMIN_ERR_MAX];
	(void)state;
	body_begin(&x);
	fsnp_w_key(&x.w, "args");
	fsnp_w_str(&x.w, "GET");
	assert_int_not_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_non_null(strstr(err, "args must be a list"));
	wbuf_free(&x.b);

	body_begin(&x);
	fsnp_w_key(&x.w, "args");
	fsnp_w_array_begin(&x.w);
	fsnp_w_str(&x.w, "GET");
	fsnp_w_map_begin(&x.w);
	fsnp_w_map_end(&x.w);
	fsnp_w_array_end(&x.w);
	assert_int_not_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_non_null(strstr(err, "args[1]"));
	wbuf_free(&x.b);

	body_begin(&x);
	fsnp_w_key(&x.w, "args");
	fsnp_w_array_begin(&x.w);
	for (int i = 0; i < FSNP_ADMIN_ARGS_MAX + 1; i++) {
		fsnp_w_str(&x.w, "x");
	}
	fsnp_w_array_end(&x.w);
	assert_int_not_equal(
	    fsnp_admin_args_from_body(body_end(&x), &a, err, sizeof err), 0);
	assert_non_null(strstr(err, "args"));
	wbuf_free(&x.b);
}

static int node(const char *s, struct fsnp_admin_node *n, char *err)
{
	return fsnp_admin_parse_node(s, strlen(s), n, err, FSNP_ADMIN_ERR_MAX);
}

static void test_node(void **state)
{
	struct fsnp_admin_node n;
	char err[FSNP_ADMIN_ERR_MAX];
	(void)state;
	assert_int_equal(node("4@127.0.0.1:7004", &n, err), 0);
	assert_int_equal(n.id, 4);
	assert_string_equal(n.host, "127.0.0.1");
	assert_int_equal(n.port, 7004);
	assert_int_equal(node("12@[::1]:9000", &n, err), 0);
	assert_int_equal(n.id, 12);
	assert_string_equal(n.host, "::1");
	assert_int_equal(n.port, 9000);
	assert_int_equal(node("7@node-7.example:1", &n, err), 0);
	assert_string_equal(n.host, "node-7.example");

	assert_int_not_equal(node("127.0.0.1:7004", &n, err), 0);
	assert_non_null(strstr(err, "ID@HOST:PORT"));
	assert_int_not_equal(node("0@h:1", &n, err), 0);
	assert_int_not_equal(node("x@h:1", &n, err), 0);
	assert_int_not_equal(node("4@h", &n, err), 0);
	assert_int_not_equal(node("4@:1", &n, err), 0);
	assert_int_not_equal(node("4@h:0", &n, err), 0);
	assert_int_not_equal(node("4@h:65536", &n, err), 0);
	assert_int_not_equal(node("4@h:1x", &n, err), 0);
	assert_int_not_equal(node("4@::1:5", &n, err), 0);
	assert_int_not_equal(node("4@[::1]5", &n, err), 0);
	assert_int_not_equal(node("4@[::1]", &n, err), 0);
	assert_int_not_equal(node("99999999999999999999999@h:1", &n, err), 0);
}

static void test_u64_word(void **state)
{
	uint64_t v;
	struct fsnp_bytes b = {(const uint8_t *)"replace", 7};
	(void)state;
	assert_int_equal(fsnp_admin_parse_u64("0", 1, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(fsnp_admin_parse_u64("18446744073709551615", 20, &v),
	                 0);
	assert_true(v == UINT64_MAX);
	assert_int_not_equal(
	    fsnp_admin_parse_u64("18446744073709551616", 20, &v), 0);
	assert_int_not_equal(fsnp_admin_parse_u64("", 0, &v), 0);
	assert_int_not_equal(fsnp_admin_parse_u64("-1", 2, &v), 0);
	assert_true(fsnp_admin_word_eq(b, "REPLACE"));
	assert_false(fsnp_admin_word_eq(b, "REPLAC"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_args_body),
	    cmocka_unit_test(test_args_bad),
	    cmocka_unit_test(test_node),
	    cmocka_unit_test(test_u64_word),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
