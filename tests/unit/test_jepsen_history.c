/* Unit tests for jepsen/history: the etcd-log, kv-edn and line parsers,
 * operation pairing, and their errors on bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jepsen/history.h"
#include "jepsen/intern.h"

static int parse(struct jepsen_history *h, enum jepsen_format fmt,
                 const char *text, char *err, size_t errlen)
{
	jepsen_history_init(h);
	return jepsen_history_parse(h, fmt, text, strlen(text), err, errlen);
}

/* Expects `text` to be rejected with a message containing `what`. */
static void expect_error(enum jepsen_format fmt, const char *text,
                         const char *what)
{
	struct jepsen_history h;
	char err[512] = "";
	int rc = parse(&h, fmt, text, err, sizeof err);
	if (rc == 0 || strstr(err, what) == NULL) {
		print_error("input %s\ngave rc %d, message '%s', want '%s'\n",
		            text, rc, err, what);
	}
	assert_int_equal(rc, -22);
	assert_non_null(strstr(err, what));
	jepsen_history_free(&h);
}

static const char *value(const struct jepsen_history *h, size_t op, size_t i)
{
	size_t n;
	const uint32_t *v = jepsen_history_op_values(h, &h->ops[op], &n);
	assert_true(i < n);
	return jepsen_history_str(h, v[i]);
}

static size_t nvalues(const struct jepsen_history *h, size_t op)
{
	size_t n;
	jepsen_history_op_values(h, &h->ops[op], &n);
	return n;
}

static void test_intern(void **state)
{
	struct jepsen_intern p;
	uint32_t a, b, c, d;
	size_t len;
	(void)state;
	jepsen_intern_init(&p);
	assert_int_equal(jepsen_intern_find(&p, "x", 1, &a), 0);
	assert_int_equal(jepsen_intern_put(&p, "x", 1, &a), 0);
	assert_int_equal(jepsen_intern_put(&p, "", 0, &b), 0);
	assert_int_equal(jepsen_intern_put(&p, "x", 1, &c), 0);
	assert_int_equal(a, c);
	assert_int_not_equal(a, JEPSEN_NIL);
	assert_int_not_equal(b, JEPSEN_NIL);
	assert_int_not_equal(a, b);
	assert_string_equal(jepsen_intern_str(&p, a, &len), "x");
	assert_int_equal(len, 1);
	assert_string_equal(jepsen_intern_str(&p, b, &len), "");
	assert_int_equal(len, 0);
	assert_string_equal(jepsen_intern_str(&p, JEPSEN_NIL, NULL), "");
	/* Many strings: the table and arena grow and stay consistent. */
	for (int i = 0; i < 5000; i++) {
		char buf[32];
		int n = snprintf(buf, sizeof buf, "value-%d", i);
		assert_int_equal(jepsen_intern_put(&p, buf, (size_t)n, &d), 0);
	}
	for (int i = 0; i < 5000; i += 97) {
		char buf[32];
		int n = snprintf(buf, sizeof buf, "value-%d", i);
		assert_int_equal(jepsen_intern_find(&p, buf, (size_t)n, &d), 1);
		assert_string_equal(jepsen_intern_str(&p, d, NULL), buf);
	}
	assert_int_equal(jepsen_intern_find(&p, "x", 1, &d), 1);
	assert_int_equal(d, a);
	jepsen_intern_free(&p);
}

static void test_etcd_log(void **state)
{
	struct jepsen_history h;
	char err[256];
	(void)state;
	const char *text = "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
	                   "INFO  jepsen.core - Worker 3 starting\n"
	                   "\n"
	                   "INFO  jepsen.util - 1   :invoke :cas    [1 2]\r\n"
	                   "INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n"
	                   "INFO  jepsen.util - 0\t:ok\t:read\t3\n"
	                   "INFO  jepsen.util - 12\t:invoke\t:write\t4\n"
	                   "INFO  jepsen.util - 1   :fail   :cas    [1 2]\n"
	                   "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"
	                   "INFO  jepsen.util - 0\t:fail\t:read\t:timed-out\n"
	                   "WARN  jepsen.util - 12\t:info\t:write\t:timed-out\n"
	                   "INFO  jepsen.util - 2\t:invoke\t:write\t-7\n";
	assert_int_equal(
	    parse(&h, JEPSEN_FORMAT_ETCD_LOG, text, err, sizeof err), 0);
	assert_int_equal(h.n_events, 9);
	assert_int_equal(h.n_ops, 5);
	/* read nil -> ok 3 */
	assert_int_equal(h.ops[0].process, 0);
	assert_int_equal(h.ops[0].f, JEPSEN_F_READ);
	assert_int_equal(h.ops[0].type, JEPSEN_OK);
	assert_string_equal(value(&h, 0, 0), "3");
	assert_int_equal(jepsen_history_invoke_line(&h, &h.ops[0]), 1);
	assert_int_equal(jepsen_history_complete_line(&h, &h.ops[0]), 6);
	/* cas [1 2] failed */
	assert_int_equal(h.ops[1].f, JEPSEN_F_CAS);
	assert_int_equal(h.ops[1].type, JEPSEN_FAIL);
	assert_int_equal(nvalues(&h, 1), 2);
	assert_string_equal(value(&h, 1, 0), "1");
	assert_string_equal(value(&h, 1, 1), "2");
	/* write 4 by process 12: info, judged by the invocation's value */
	assert_int_equal(h.ops[2].process, 12);
	assert_int_equal(h.ops[2].type, JEPSEN_INFO);
	assert_string_equal(value(&h, 2, 0), "4");
	/* A fail that timed out is indeterminate. */
	assert_int_equal(h.ops[3].type, JEPSEN_INFO);
	/* never completed: info */
	assert_int_equal(h.ops[4].type, JEPSEN_INFO);
	assert_int_equal(h.ops[4].complete, JEPSEN_NONE);
	assert_string_equal(value(&h, 4, 0), "-7");
	char desc[256];
	jepsen_history_describe(&h, &h.ops[1], desc, sizeof desc);
	assert_string_equal(desc, "process 1 cas 1 2 fail (lines 4-8)");
	jepsen_history_describe(&h, &h.ops[4], desc, sizeof desc);
	assert_string_equal(desc, "process 2 write -7 never completed "
	                          "(line 12)");
	jepsen_history_free(&h);
}

static void test_etcd_log_errors(void **state)
{
	(void)state;
	expect_error(JEPSEN_FORMAT_ETCD_LOG, "hello world\n", "line 1");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :read nil\n"
	             "INFO  jepsen.util - x :ok :read 1\n",
	             "line 2: process");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :begin :read nil\n", "type");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :frob nil\n",
	             "unknown operation");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :cas [1 2\n", "line 1");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :write 1 2\n",
	             "after the value");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :ok :read 1\n", "never invoked");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :read nil\n"
	             "INFO  jepsen.util - 0 :invoke :read nil\n",
	             "pending");
	expect_error(JEPSEN_FORMAT_ETCD_LOG,
	             "INFO  jepsen.util - 0 :invoke :read nil\n"
	             "INFO  jepsen.util - 0 :ok :write 1\n",
	             "does not match");
	expect_error(
	    JEPSEN_FORMAT_ETCD_LOG,
	    "INFO  jepsen.util - 0 :invoke :write 99999999999999999999\n",
	    "number");
	expect_error(JEPSEN_FORMAT_ETCD_LOG, "INFO  jepsen.util\n", "'-'");
	struct jepsen_history h;
	char err[256];
	jepsen_history_init(&h);
	assert_int_equal(jepsen_history_parse(&h, JEPSEN_FORMAT_ETCD_LOG,
	                                      "INFO\0x", 6, err, sizeof err),
	                 -22);
	assert_non_null(strstr(err, "NUL"));
	jepsen_history_free(&h);
}

static void test_kv_edn(void **state)
{
	struct jepsen_history h;
	char err[256];
	(void)state;
	const char *text =
	    "{:process 0, :type :invoke, :f :append, :key \"0\", :value \"x 0 "
	    "0 "
	    "y\"}\n"
	    "{:process 1 :type :invoke :f :get :key \"0\" :value nil :time "
	    "12345 :index 3}\n"
	    "{:process 0, :type :ok, :f :append, :key \"0\", :value \"x 0 0 "
	    "y\"}\n"
	    "; a comment\n"
	    "{:process 1, :type :ok, :f :get, :key \"0\", :value "
	    "\"q\\\"uo\\\\te\\n\", :error {:why [1 2 {:deep (3)}]}}\n"
	    "{:process 2, :type :invoke, :f :cas, :key 7, :value [1 nil]}\n"
	    "{:process 2, :type :info, :f :cas, :key 7, :value [1 nil]}\n"
	    "{:process 3, :type :invoke, :f :put, :key :k, :value -5}\n";
	assert_int_equal(parse(&h, JEPSEN_FORMAT_KV_EDN, text, err, sizeof err),
	                 0);
	assert_int_equal(h.n_ops, 4);
	assert_int_equal(h.ops[0].f, JEPSEN_F_APPEND);
	assert_string_equal(jepsen_history_str(&h, h.ops[0].key), "0");
	assert_string_equal(value(&h, 0, 0), "x 0 0 y");
	assert_int_equal(h.ops[1].f, JEPSEN_F_GET);
	assert_string_equal(value(&h, 1, 0), "q\"uo\\te\n");
	assert_int_equal(h.events[h.ops[1].invoke].time, 12345);
	assert_int_equal(h.events[h.ops[1].invoke].line, 2);
	assert_int_equal(h.ops[2].f, JEPSEN_F_CAS);
	assert_string_equal(jepsen_history_str(&h, h.ops[2].key), "7");
	assert_int_equal(h.ops[2].type, JEPSEN_INFO);
	assert_string_equal(value(&h, 2, 0), "1");
	assert_string_equal(value(&h, 2, 1), "nil");
	assert_int_equal(h.ops[3].f, JEPSEN_F_WRITE);
	assert_string_equal(jepsen_history_str(&h, h.ops[3].key), ":k");
	assert_string_equal(value(&h, 3, 0), "-5");
	jepsen_history_free(&h);

	/* :fail with a timeout error is indeterminate; other fails stay. */
	assert_int_equal(
	    parse(&h, JEPSEN_FORMAT_KV_EDN,
	          "{:process 0, :type :invoke, :f :write, :value 1}\n"
	          "{:process 0, :type :fail, :f :write, :value 1, "
	          ":error :timeout}\n"
	          "{:process 1, :type :invoke, :f :write, :value 2}\n"
	          "{:process 1, :type :fail, :f :write, :value 2, "
	          ":error [:not-found \"x\"]}\n",
	          err, sizeof err),
	    0);
	assert_int_equal(h.ops[0].type, JEPSEN_INFO);
	assert_int_equal(h.ops[1].type, JEPSEN_FAIL);
	jepsen_history_free(&h);

	/* Nemesis events and a history wrapped in a vector. */
	assert_int_equal(
	    parse(&h, JEPSEN_FORMAT_KV_EDN,
	          "[{:process :nemesis, :type :info, :f :start, :value "
	          "{:a [1 2]}}\n"
	          " {:process 0, :type :invoke, :f :read, :value nil}\n"
	          " {:process 0, :type :ok, :f :read, :value 3}]\n",
	          err, sizeof err),
	    0);
	assert_int_equal(h.n_events, 2);
	assert_int_equal(h.n_ops, 1);
	assert_int_equal(h.ops[0].key, JEPSEN_NIL);
	assert_string_equal(value(&h, 0, 0), "3");
	jepsen_history_free(&h);
}

static void test_kv_edn_errors(void **state)
{
	(void)state;
	expect_error(JEPSEN_FORMAT_KV_EDN, "{:process 0, :type :invoke}",
	             "needs :process, :type and :f");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :start, :f :read}", ":type");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :frob}", "unknown :f");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :value \"abc",
	             "unterminated string");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :value [1 2}",
	             "line 1");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :x #{1}}",
	             "unsupported EDN");
	expect_error(JEPSEN_FORMAT_KV_EDN, "{:process 0, :type}", "no value");
	expect_error(JEPSEN_FORMAT_KV_EDN, "{\"process\" 0}", "keyword");
	expect_error(JEPSEN_FORMAT_KV_EDN, "42", "expected an event map");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "[{:process 0, :type :invoke, :f :read, :value nil}",
	             "missing ']'");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :value nil}\n\n"
	             "{:process 0, :type :invoke, :f :read, :value nil}\n",
	             "line 3: process 0 invokes");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :value [[1]]}",
	             "only scalars and vectors");
	expect_error(JEPSEN_FORMAT_KV_EDN,
	             "{:process 0, :type :invoke, :f :read, :value \"\\q\"}",
	             "escape");
	/* Deep nesting in an ignored value is bounded. */
	char deep[400];
	int n = snprintf(deep, sizeof deep, "{:process 0, :x ");
	for (int i = 0; i < 100; i++) {
		deep[n++] = '[';
	}
	deep[n] = '\0';
	expect_error(JEPSEN_FORMAT_KV_EDN, deep, "nested too deeply");
}

static void test_lines(void **state)
{
	struct jepsen_history h;
	char err[256];
	(void)state;
	const char *text = "# a comment\n"
	                   "\n"
	                   "100 1 invoke write x 5\n"
	                   "  # another\n"
	                   "100 2 invoke read x\n"
	                   "150 2 ok read x nil\n"
	                   "160 1 ok write x 5\n"
	                   "170 3 invoke append s1 r1\n"
	                   "180 3 ok append s1 r1 0\n"
	                   "190 4 invoke read s1\n"
	                   "200 4 ok read s1 0:r1 1:r2\n";
	assert_int_equal(parse(&h, JEPSEN_FORMAT_LINES, text, err, sizeof err),
	                 0);
	assert_int_equal(h.n_ops, 4);
	assert_int_equal(h.ops[0].f, JEPSEN_F_WRITE);
	assert_int_equal(h.events[h.ops[0].invoke].time, 100);
	assert_int_equal(h.events[h.ops[0].invoke].line, 3);
	assert_string_equal(value(&h, 1, 0), "nil");
	assert_int_equal(nvalues(&h, 2), 2);
	assert_string_equal(value(&h, 2, 1), "0");
	assert_int_equal(nvalues(&h, 3), 2);
	assert_string_equal(value(&h, 3, 1), "1:r2");
	uint32_t *order;
	assert_int_equal(jepsen_history_ops_by_key(&h, &order), 0);
	/* x was interned before s1: x's ops first, each key in invocation
	 * order. */
	assert_int_equal(order[0], 0);
	assert_int_equal(order[1], 1);
	assert_int_equal(order[2], 2);
	assert_int_equal(order[3], 3);
	free(order);
	jepsen_history_free(&h);
}

static void test_lines_errors(void **state)
{
	(void)state;
	expect_error(JEPSEN_FORMAT_LINES, "x 1 invoke read k\n", "time");
	expect_error(JEPSEN_FORMAT_LINES, "-1 1 invoke read k\n", "time");
	expect_error(JEPSEN_FORMAT_LINES,
	             "5 1 invoke read k\n4 1 ok read k 1\n",
	             "line 2: time 4 is before");
	expect_error(JEPSEN_FORMAT_LINES, "1 p invoke read k\n", "process");
	expect_error(JEPSEN_FORMAT_LINES, "1 1 begin read k\n", "type");
	expect_error(JEPSEN_FORMAT_LINES, "1 1 invoke frob k\n",
	             "unknown operation");
	expect_error(JEPSEN_FORMAT_LINES, "1 1 invoke read\n", "no key");
	expect_error(JEPSEN_FORMAT_LINES,
	             "1 1 invoke read a\n2 1 ok read b 1\n", "does not match");
	expect_error(JEPSEN_FORMAT_LINES, "1 1 ok read a 1\n", "never invoked");
}

static void test_load(void **state)
{
	struct jepsen_history h;
	char err[512];
	enum jepsen_format fmt;
	(void)state;
	jepsen_history_init(&h);
	assert_int_equal(jepsen_history_load(&h, JEPSEN_FORMAT_LINES,
	                                     "/nonexistent/history", err,
	                                     sizeof err),
	                 -2);
	assert_non_null(strstr(err, "/nonexistent/history"));
	jepsen_history_free(&h);
	assert_int_equal(jepsen_history_format_parse("etcd-log", &fmt), 0);
	assert_int_equal(fmt, JEPSEN_FORMAT_ETCD_LOG);
	assert_int_equal(jepsen_history_format_parse("kv-edn", &fmt), 0);
	assert_int_equal(fmt, JEPSEN_FORMAT_KV_EDN);
	assert_int_equal(jepsen_history_format_parse("lines", &fmt), 0);
	assert_int_equal(fmt, JEPSEN_FORMAT_LINES);
	assert_int_equal(jepsen_history_format_parse("json", &fmt), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_intern),
	    cmocka_unit_test(test_etcd_log),
	    cmocka_unit_test(test_etcd_log_errors),
	    cmocka_unit_test(test_kv_edn),
	    cmocka_unit_test(test_kv_edn_errors),
	    cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_lines_errors),
	    cmocka_unit_test(test_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
