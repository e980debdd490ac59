/* flow/cron.c and flow/tz.c: cron parsing, next occurrences across DST
 * transitions (America/New_York, Europe/Berlin, beyond the zone files'
 * transition tables through their POSIX rules), Feb 29, steps, ranges,
 * lists, names, and every parse error. The expected instants were
 * computed independently (a minute-by-minute search over Python's
 * zoneinfo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "flow/cron.h"
#include "flow/tz.h"

struct next_case {
	const char *expr;
	const char *zone;
	int64_t after;
	int64_t want;
};

static const struct next_case next_cases[] = {
/* The table rows: expression, zone, after (ms), expected (ms). */
#include "tests/unit/flow_cron_table.h"
};

static void test_next_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof next_cases / sizeof next_cases[0]; i++) {
		const struct next_case *c = &next_cases[i];
		struct cron cr;
		struct tz z;
		char err[200];
		int64_t got = 0;
		assert_int_equal(
		    cron_parse(&cr, c->expr, strlen(c->expr), err, sizeof err),
		    0);
		assert_int_equal(tz_load(&z, NULL, c->zone, strlen(c->zone),
		                         err, sizeof err),
		                 0);
		if (cron_next(&cr, &z, c->after, &got, err, sizeof err) != 0 ||
		    got != c->want) {
			fail_msg("case %zu (%s in %s after %lld): got %lld, "
			         "want %lld (%s)",
			         i, c->expr, c->zone, (long long)c->after,
			         (long long)got, (long long)c->want, err);
		}
		tz_free(&z);
	}
}

static void test_parse_errors(void **state)
{
	static const struct {
		const char *expr;
		const char *err;
	} bad[] = {
	    {"* * * *", "ERR flow schedule cron must have 5 fields"},
	    {"* * * * * *", "ERR flow schedule cron must have 5 fields"},
	    {"", "ERR flow schedule cron must have 5 fields"},
	    {"60 * * * *", "ERR flow schedule cron value out of range"},
	    {"* 24 * * *", "ERR flow schedule cron value out of range"},
	    {"* * 0 * *", "ERR flow schedule cron value out of range"},
	    {"* * * 13 *", "ERR flow schedule cron value out of range"},
	    {"* * * * 8", "ERR flow schedule cron value out of range"},
	    {"5-1 * * * *", "ERR flow schedule cron range is invalid"},
	    {"*/0 * * * *", "ERR flow schedule cron step must be positive"},
	    {"*/x * * * *", "ERR flow schedule cron step must be positive"},
	    {"a * * * *", "ERR flow schedule cron field is invalid"},
	    {"1,,2 * * * *", "ERR flow schedule cron field is invalid"},
	    {"1, * * * *", "ERR flow schedule cron field is invalid"},
	    {"-1 * * * *", "ERR flow schedule cron field is invalid"},
	    {"* * * MON *", "ERR flow schedule cron field is invalid"},
	    {"0 0 30 2 *",
	     "ERR flow schedule cron day cannot occur in the selected months"},
	    {"0 0 31 4,6,9,11 *",
	     "ERR flow schedule cron day cannot occur in the selected months"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct cron c;
		char err[200] = "";
		assert_int_equal(cron_parse(&c, bad[i].expr,
		                            strlen(bad[i].expr), err,
		                            sizeof err),
		                 -1);
		assert_string_equal(err, bad[i].err);
	}
}

static void test_parse_sets(void **state)
{
	struct cron c;
	char err[200];
	(void)state;
	assert_int_equal(
	    cron_parse(&c, "*/20 1-3,5 ? jan-MAR 7", 22, err, sizeof err), 0);
	assert_true(c.minutes == ((UINT64_C(1) << 0) | (UINT64_C(1) << 20) |
	                          (UINT64_C(1) << 40)));
	assert_int_equal(c.hours,
	                 (1u << 1) | (1u << 2) | (1u << 3) | (1u << 5));
	assert_true(c.day_any);
	assert_false(c.weekday_any);
	assert_int_equal(c.months, (1u << 1) | (1u << 2) | (1u << 3));
	assert_int_equal(c.weekdays, 1u);
	/* A single value with a step is that value (as the reference). */
	assert_int_equal(cron_parse(&c, "5/10 * * * *", 12, err, sizeof err),
	                 0);
	assert_true(c.minutes == (UINT64_C(1) << 5));
	/* 29 Feb alone is possible. */
	assert_int_equal(cron_parse(&c, "0 0 29 2 *", 10, err, sizeof err), 0);
	/* A restricted weekday makes any day possible. */
	assert_int_equal(cron_parse(&c, "0 0 30 2 1", 10, err, sizeof err), 0);
}

static void test_zones(void **state)
{
	struct tz z;
	char err[200];
	int64_t out[2];
	(void)state;
	assert_int_equal(tz_load(&z, NULL, "Mars/Olympus", 12, err, sizeof err),
	                 -1);
	assert_string_equal(err, "unknown time zone Mars/Olympus");
	assert_int_equal(
	    tz_load(&z, NULL, "../etc/passwd", 13, err, sizeof err), -1);
	assert_int_equal(tz_load(&z, NULL, "/etc/passwd", 11, err, sizeof err),
	                 -1);
	assert_false(tz_name_valid("a//b", 4));
	assert_false(tz_name_valid("a/./b", 5));
	assert_true(tz_name_valid("America/Argentina/Buenos_Aires", 30));
	assert_true(tz_name_valid("Etc/GMT+5", 9));
	/* UTC is Etc/UTC. */
	assert_int_equal(tz_load(&z, NULL, "UTC", 3, err, sizeof err), 0);
	assert_string_equal(z.name, "Etc/UTC");
	assert_int_equal(tz_offset_at(&z, 1800000000), 0);
	tz_free(&z);
	assert_int_equal(
	    tz_load(&z, NULL, "America/New_York", 16, err, sizeof err), 0);
	/* 2026-03-08 02:30 local does not exist; 2026-11-01 01:30 twice. */
	assert_int_equal(
	    tz_local_to_utc(&z, tz_days_from_civil(2026, 3, 8) * 86400 + 9000,
	                    out),
	    0);
	assert_int_equal(
	    tz_local_to_utc(&z, tz_days_from_civil(2026, 11, 1) * 86400 + 5400,
	                    out),
	    2);
	assert_int_equal(out[1] - out[0], 3600);
	/* Far past the transition table (its POSIX rule). */
	assert_int_equal(tz_offset_at(&z, 4102444800 + 200 * 86400), -4 * 3600);
	assert_int_equal(tz_offset_at(&z, 4102444800), -5 * 3600);
	tz_free(&z);
}

static void test_calendar(void **state)
{
	int64_t y;
	unsigned m, d;
	(void)state;
	assert_int_equal(tz_days_from_civil(1970, 1, 1), 0);
	assert_int_equal(tz_weekday(0), 4); /* Thursday */
	assert_int_equal(tz_weekday(-1), 3);
	tz_civil_from_days(tz_days_from_civil(2100, 3, 1) - 1, &y, &m, &d);
	assert_true(y == 2100 && m == 2 && d == 28);
	tz_civil_from_days(tz_days_from_civil(2000, 3, 1) - 1, &y, &m, &d);
	assert_true(y == 2000 && m == 2 && d == 29);
	assert_int_equal(tz_days_in_month(2028, 2), 29);
	assert_int_equal(tz_days_in_month(2100, 2), 28);
}

static void test_limits(void **state)
{
	struct cron c;
	struct tz z;
	char err[200];
	int64_t out;
	(void)state;
	assert_int_equal(tz_load(&z, NULL, "Etc/UTC", 7, err, sizeof err), 0);
	assert_int_equal(cron_parse(&c, "0 0 1 1 *", 9, err, sizeof err), 0);
	/* Past year 9999. */
	assert_int_equal(
	    cron_next(&c, &z, INT64_C(253402300799000), &out, err, sizeof err),
	    -1);
	assert_string_equal(
	    err, "ERR flow schedule timestamp is outside supported calendar "
	         "range");
	assert_int_equal(cron_next(&c, &z, -5, &out, err, sizeof err), -1);
	/* From -1: the epoch's first minute itself. */
	assert_int_equal(cron_parse(&c, "* * * * *", 9, err, sizeof err), 0);
	assert_int_equal(cron_next(&c, &z, -1, &out, err, sizeof err), 0);
	assert_int_equal(out, 0);
	/* Day 29 or any Monday: found at once (either matches). */
	assert_int_equal(cron_parse(&c, "0 0 29 2 1", 10, err, sizeof err), 0);
	assert_int_equal(cron_next(&c, &z, 0, &out, err, sizeof err), 0);
	tz_free(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_next_table),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_parse_sets),
	    cmocka_unit_test(test_zones),
	    cmocka_unit_test(test_calendar),
	    cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
