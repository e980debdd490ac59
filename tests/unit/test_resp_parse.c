/* Unit tests for wire/resp_parse and wire/resp_reply: multibulk and inline
 * commands, pipelines, partial input, Redis's quoting rules, the bounds
 * and their error texts, and the RESP2/RESP3 reply encodings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/resp_parse.h"
#include "wire/resp_reply.h"

static struct resp_limits lim = {64, 8, 1024};
static struct resp_arg argv[8];
static uint8_t scratch[64];
static char err[RESP_ERR_MAX];

static int parse(const char *in, size_t len, struct resp_cmd *c)
{
	memset(c, 0, sizeof *c);
	c->argv = argv;
	c->argv_cap = 8;
	c->scratch = scratch;
	c->scratch_cap = sizeof scratch;
	err[0] = '\0';
	return resp_parse((const uint8_t *)in, len, &lim, c, err, sizeof err);
}

static void assert_arg(const struct resp_cmd *c, uint32_t i, const char *s,
                       size_t n)
{
	assert_true(i < c->argc);
	assert_int_equal(c->argv[i].len, n);
	assert_memory_equal(c->argv[i].p, s, n);
}

static void test_multibulk(void **state)
{
	struct resp_cmd c;
	const char in[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\nb\0\r\n";
	(void)state;
	assert_int_equal(parse(in, sizeof in - 1, &c), RESP_PARSE_OK);
	assert_int_equal(c.argc, 3);
	assert_int_equal(c.consumed, sizeof in - 1);
	assert_arg(&c, 0, "SET", 3);
	assert_arg(&c, 2, "a\r\nb\0", 5);
	assert_int_equal(c.inline_cmd, 0);
	/* Every proper prefix needs more. */
	for (size_t n = 0; n + 1 < sizeof in - 1; n++) {
		assert_int_equal(parse(in, n, &c), RESP_PARSE_MORE);
	}
}

static void test_pipeline(void **state)
{
	struct resp_cmd c;
	const char in[] = "*1\r\n$4\r\nPING\r\nPING\r\n*0\r\n";
	size_t off = 0;
	(void)state;
	assert_int_equal(parse(in, sizeof in - 1, &c), RESP_PARSE_OK);
	assert_arg(&c, 0, "PING", 4);
	off += c.consumed;
	assert_int_equal(parse(in + off, sizeof in - 1 - off, &c),
	                 RESP_PARSE_OK);
	assert_int_equal(c.inline_cmd, 1);
	assert_arg(&c, 0, "PING", 4);
	off += c.consumed;
	assert_int_equal(parse(in + off, sizeof in - 1 - off, &c),
	                 RESP_PARSE_OK);
	assert_int_equal(c.argc, 0);
	off += c.consumed;
	assert_int_equal(off, sizeof in - 1);
}

static void test_inline_quotes(void **state)
{
	struct resp_cmd c;
	const char *in = "set  \"a b\\x41\\n\" 'it\\'s'\r\n";
	(void)state;
	assert_int_equal(parse(in, strlen(in), &c), RESP_PARSE_OK);
	assert_int_equal(c.argc, 3);
	assert_arg(&c, 0, "set", 3);
	assert_arg(&c, 1, "a bA\n", 5);
	assert_arg(&c, 2, "it's", 4);
	assert_int_equal(parse("get \"k\"x\n", 9, &c), RESP_PARSE_ERR);
	assert_string_equal(err,
	                    "ERR Protocol error: unbalanced quotes in request");
	assert_int_equal(parse("get \"k\n", 7, &c), RESP_PARSE_ERR);
	/* Blank lines are commands of no arguments. */
	assert_int_equal(parse("  \r\n", 4, &c), RESP_PARSE_OK);
	assert_int_equal(c.argc, 0);
	assert_int_equal(c.consumed, 4);
}

static void test_bounds(void **state)
{
	struct resp_cmd c;
	char big[128];
	(void)state;
	memset(big, 'a', sizeof big);
	assert_int_equal(parse(big, sizeof big, &c), RESP_PARSE_ERR);
	assert_string_equal(err, "ERR Protocol error: too big inline request");
	assert_int_equal(parse(big, 10, &c), RESP_PARSE_MORE);
	assert_int_equal(parse("*9\r\n", 4, &c), RESP_PARSE_ERR);
	assert_string_equal(err,
	                    "ERR Protocol error: invalid multibulk length");
	assert_int_equal(parse("*x\r\n", 4, &c), RESP_PARSE_ERR);
	assert_int_equal(parse("*1\r\n$1025\r\n", 11, &c), RESP_PARSE_ERR);
	assert_string_equal(err, "ERR Protocol error: invalid bulk length");
	assert_int_equal(parse("*1\r\n$-1\r\n", 9, &c), RESP_PARSE_ERR);
	assert_int_equal(parse("*1\r\n+a\r\n", 8, &c), RESP_PARSE_ERR);
	assert_string_equal(err, "ERR Protocol error: expected '$', got '+'");
	assert_int_equal(parse("*1\r\n$01\r\na\r\n", 12, &c), RESP_PARSE_ERR);
	/* a count line with no CR past the inline bound */
	big[0] = '*';
	assert_int_equal(parse(big, sizeof big, &c), RESP_PARSE_ERR);
	assert_string_equal(err,
	                    "ERR Protocol error: too big mbulk count string");
}

static void test_grow(void **state)
{
	struct resp_cmd c;
	struct resp_arg small[1];
	(void)state;
	memset(&c, 0, sizeof c);
	c.argv = small;
	c.argv_cap = 1;
	c.scratch = scratch;
	c.scratch_cap = sizeof scratch;
	assert_int_equal(
	    resp_parse((const uint8_t *)"*2\r\n", 4, &lim, &c, err, sizeof err),
	    RESP_PARSE_GROW);
	assert_int_equal(c.need_args, 2);
	assert_int_equal(resp_parse((const uint8_t *)"a b c\n", 6, &lim, &c,
	                            err, sizeof err),
	                 RESP_PARSE_GROW);
	assert_int_equal(c.need_args, 3);
}

static void expect(struct wbuf *b, const char *s)
{
	assert_int_equal(b->len, strlen(s));
	assert_memory_equal(b->data, s, b->len);
	wbuf_reset(b);
}

static void test_replies(void **state)
{
	struct wbuf b;
	(void)state;
	wbuf_init(&b);
	resp_w_simple(&b, "OK");
	expect(&b, "+OK\r\n");
	resp_w_error(&b, "ERR a\r\nb");
	expect(&b, "-ERR a  b\r\n");
	resp_w_int(&b, -5);
	expect(&b, ":-5\r\n");
	resp_w_bulk(&b, "ab", 2);
	expect(&b, "$2\r\nab\r\n");
	resp_w_null(&b, 2);
	expect(&b, "$-1\r\n");
	resp_w_null(&b, 3);
	expect(&b, "_\r\n");
	resp_w_null_array(&b, 2);
	expect(&b, "*-1\r\n");
	resp_w_map(&b, 2, 2);
	expect(&b, "*4\r\n");
	resp_w_map(&b, 2, 3);
	expect(&b, "%2\r\n");
	resp_w_set(&b, 1, 3);
	expect(&b, "~1\r\n");
	resp_w_double(&b, 1.5, 3);
	expect(&b, ",1.5\r\n");
	resp_w_double(&b, 2, 2);
	expect(&b, "$1\r\n2\r\n");
	resp_w_double(&b, 1.0 / 0.0, 3);
	expect(&b, ",inf\r\n");
	resp_w_verbatim(&b, "x", 1, 3);
	expect(&b, "=5\r\ntxt:x\r\n");
	wbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_multibulk),
	    cmocka_unit_test(test_pipeline),
	    cmocka_unit_test(test_inline_quotes),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_grow),
	    cmocka_unit_test(test_replies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
