/* Unit tests for node/admin/history: the sample ring (order, wrap-around,
 * bounds) and the rate and mean arithmetic of counters. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/admin/history.h"

static struct history_sample sample(uint64_t t)
{
	struct history_sample s;
	memset(&s, 0, sizeof s);
	s.t_ms = t;
	s.v[0] = (double)t;
	return s;
}

static void test_ring_fills_in_order(void **state)
{
	struct history_ring r;
	(void)state;
	assert_int_equal(history_ring_init(&r, 4), 0);
	assert_int_equal(history_ring_len(&r), 0);
	assert_null(history_ring_at(&r, 0));
	for (uint64_t t = 1; t <= 3; t++) {
		struct history_sample s = sample(t);
		history_ring_push(&r, &s);
	}
	assert_int_equal(history_ring_len(&r), 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(history_ring_at(&r, i)->t_ms, i + 1);
	}
	assert_null(history_ring_at(&r, 3));
	history_ring_free(&r);
}

static void test_ring_wraps_oldest_first(void **state)
{
	struct history_ring r;
	(void)state;
	assert_int_equal(history_ring_init(&r, 4), 0);
	for (uint64_t t = 1; t <= 11; t++) {
		struct history_sample s = sample(t);
		history_ring_push(&r, &s);
		size_t n = t < 4 ? t : 4;
		assert_int_equal(history_ring_len(&r), n);
		/* Oldest first, newest last, whatever the wrap. */
		assert_int_equal(history_ring_at(&r, 0)->t_ms, t - n + 1);
		assert_int_equal(history_ring_at(&r, n - 1)->t_ms, t);
		assert_true(history_ring_at(&r, n - 1)->v[0] == (double)t);
	}
	assert_null(history_ring_at(&r, 4));
	history_ring_free(&r);
	assert_int_equal(history_ring_len(&r), 0);
}

static void test_ring_of_one_and_none(void **state)
{
	struct history_ring r;
	struct history_sample a = sample(7), b = sample(8);
	(void)state;
	assert_int_equal(history_ring_init(&r, 0), -1);
	assert_int_equal(history_ring_init(&r, 1), 0);
	history_ring_push(&r, &a);
	history_ring_push(&r, &b);
	assert_int_equal(history_ring_len(&r), 1);
	assert_int_equal(history_ring_at(&r, 0)->t_ms, 8);
	history_ring_free(&r);
}

static void test_rates_and_means(void **state)
{
	(void)state;
	assert_true(history_rate(100, 150, 1000) == 50.0);
	assert_true(history_rate(0, 30, 500) == 60.0);
	assert_true(history_rate(7, 7, 1000) == 0.0);
	/* No time passed, or the counter went back (a restart). */
	assert_true(isnan(history_rate(1, 2, 0)));
	assert_true(isnan(history_rate(10, 2, 1000)));
	/* 3000 us over 3 requests: 1 ms. */
	assert_true(history_mean(1000, 4000, 10, 13, 0.001) == 1.0);
	/* Nothing counted in the interval. */
	assert_true(isnan(history_mean(1000, 1000, 10, 10, 0.001)));
	assert_true(isnan(history_mean(5000, 4000, 10, 12, 0.001)));
}

static void test_series_names(void **state)
{
	(void)state;
	for (int s = 0; s < HISTORY_N_SERIES; s++) {
		const char *n = history_series_name(s);
		assert_true(strlen(n) > 0);
		for (int k = 0; k < s; k++) {
			assert_string_not_equal(n, history_series_name(k));
		}
	}
	assert_string_equal(history_series_name(HISTORY_N_SERIES), "");
	assert_string_equal(history_series_name(HISTORY_RAFT_COMMITS),
	                    "raft.commits_per_s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_fills_in_order),
	    cmocka_unit_test(test_ring_wraps_oldest_first),
	    cmocka_unit_test(test_ring_of_one_and_none),
	    cmocka_unit_test(test_rates_and_means),
	    cmocka_unit_test(test_series_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
