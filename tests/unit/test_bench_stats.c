/* lodebench's pure parts: the latency histogram (client/bench_hist.c)
 * against sorting every sample, the open-loop schedule arithmetic
 * (client/bench_sched.c) against its definition, and the Zipf key choice
 * (client/bench_zipf.c) against the distribution's probabilities. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <math.h>

#include "client/bench_hist.h"
#include "client/bench_sched.h"
#include "client/bench_zipf.h"

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_hist_empty(void **state)
{
	struct bench_hist h;
	(void)state;
	assert_int_equal(bench_hist_init(&h), 0);
	assert_int_equal(bench_hist_quantile(&h, BENCH_P50), 0);
	assert_int_equal(bench_hist_quantile(&h, 1000000), 0);
	assert_int_equal(bench_hist_at(&h, 0), 0);
	bench_hist_free(&h);
}

/* Below the exact range every quantile is the sorted array's element. */
static void test_hist_exact_matches_sort(void **state)
{
	enum { N = 10007 };
	static uint64_t v[N];
	static const uint32_t qs[] = {
	    0, BENCH_P50, BENCH_P90, BENCH_P99, BENCH_P999, 999999, 1000000};
	struct bench_hist h;
	uint64_t seed = 88172645463325252ull;
	(void)state;
	assert_int_equal(bench_hist_init(&h), 0);
	for (size_t i = 0; i < N; i++) {
		/* Mostly small, a few up to ~1 s: a latency's shape. */
		v[i] = rnd(&seed) % (i % 100 == 0 ? BENCH_HIST_EXACT_US : 5000);
		bench_hist_add(&h, v[i]);
	}
	qsort(v, N, sizeof *v, cmp_u64);
	assert_int_equal(h.count, N);
	assert_int_equal(h.max_us, v[N - 1]);
	for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
		uint64_t rank = (uint64_t)N * qs[i] / 1000000u;
		if (rank >= N) {
			rank = N - 1;
		}
		assert_int_equal(bench_hist_quantile(&h, qs[i]), v[rank]);
	}
	for (uint64_t r = 0; r < N; r += 97) {
		assert_int_equal(bench_hist_at(&h, r), v[r]);
	}
	bench_hist_free(&h);
}

/* Above the exact range: within 0.1 % below the true value; max exact. */
static void test_hist_tail(void **state)
{
	struct bench_hist h;
	const uint64_t big[] = {BENCH_HIST_EXACT_US, 3000000, 12345678,
	                        987654321, 60000000000ull};
	(void)state;
	assert_int_equal(bench_hist_init(&h), 0);
	for (size_t i = 0; i < 5; i++) {
		bench_hist_add(&h, big[i]);
	}
	for (uint64_t r = 0; r < 4; r++) {
		uint64_t got = bench_hist_at(&h, r);
		assert_true(got <= big[r]);
		assert_true(big[r] - got <= big[r] / 1000);
	}
	assert_int_equal(bench_hist_at(&h, 4), 60000000000ull);
	assert_int_equal(bench_hist_quantile(&h, 1000000), 60000000000ull);
	assert_int_equal(h.max_us, 60000000000ull);
	bench_hist_free(&h);
}

static void test_hist_merge(void **state)
{
	struct bench_hist a, b;
	(void)state;
	assert_int_equal(bench_hist_init(&a), 0);
	assert_int_equal(bench_hist_init(&b), 0);
	for (uint64_t i = 0; i < 100; i++) {
		bench_hist_add(i < 50 ? &a : &b, i);
	}
	bench_hist_add(&b, 5000000);
	bench_hist_merge(&a, &b);
	assert_int_equal(a.count, 101);
	assert_int_equal(a.max_us, 5000000);
	assert_int_equal(bench_hist_quantile(&a, BENCH_P50), 50);
	assert_int_equal(bench_hist_quantile(&a, BENCH_P90), 90);
	assert_int_equal(a.sum_us, 4950 + 5000000);
	bench_hist_free(&a);
	bench_hist_free(&b);
}

static void test_sched_times(void **state)
{
	struct bench_sched s;
	(void)state;
	assert_int_equal(bench_sched_init(&s, 0, 0, 10), -1);
	/* 3 per second: 0, 333333333, 666666666, 1000000000 ns. */
	assert_int_equal(bench_sched_init(&s, 3, 1000, UINT64_MAX), 0);
	assert_int_equal(bench_sched_time(&s, 0), 1000);
	assert_int_equal(bench_sched_time(&s, 1), 1000 + 333333333);
	assert_int_equal(bench_sched_time(&s, 2), 1000 + 666666666);
	assert_int_equal(bench_sched_time(&s, 3), 1000 + 1000000000);
	assert_int_equal(bench_sched_due(&s, 999), 0);
	assert_int_equal(bench_sched_due(&s, 1000), 1);
	assert_int_equal(bench_sched_due(&s, 1000 + 333333332), 1);
	assert_int_equal(bench_sched_due(&s, 1000 + 333333333), 2);
	assert_int_equal(bench_sched_due(&s, 1000 + 999999999), 3);
	assert_int_equal(bench_sched_due(&s, 1000 + 1000000000), 4);
	assert_int_equal(bench_sched_wait(&s, 1, 1000), 333333333);
	assert_int_equal(bench_sched_wait(&s, 1, 1000 + 400000000), 0);
	/* Latency runs from the due time, not from when it was sent. */
	assert_int_equal(
	    bench_sched_latency_us(&s, 1, 1000 + 333333333 + 2500000), 2500);
	assert_int_equal(bench_sched_latency_us(&s, 1, 1000), 0);
	/* Far out: no overflow at 10^7/s after a day. */
	assert_int_equal(bench_sched_init(&s, 10000000, 0, UINT64_MAX), 0);
	assert_int_equal(bench_sched_time(&s, 864000000000ull),
	                 86400000000000ull);
	assert_int_equal(bench_sched_due(&s, 86400000000000ull),
	                 864000000001ull);
}

/* due(t) is exactly the number of k with time(k) <= t, for rates that
 * divide 10^9 and rates that do not, and it stops at the limit. */
static void test_sched_due_definition(void **state)
{
	static const uint64_t rates[] = {1,      7,          1000,         3333,
	                                 999983, 1000000000, 3000000000ull};
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	(void)state;
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
		struct bench_sched s;
		assert_int_equal(
		    bench_sched_init(&s, rates[i], 5000, UINT64_MAX), 0);
		for (int j = 0; j < 2000; j++) {
			uint64_t t = 5000 + rnd(&seed) % 3000000000ull;
			uint64_t n = bench_sched_due(&s, t);
			assert_true(n >= 1);
			assert_true(bench_sched_time(&s, n - 1) <= t);
			assert_true(bench_sched_time(&s, n) > t);
		}
		s.limit = 5;
		assert_true(bench_sched_due(&s, 5000 + 4000000000ull) <= 5);
	}
}

static uint64_t zipf_rnd(void *data)
{
	return rnd(data);
}

static void test_zipf_bad_args(void **state)
{
	struct bench_zipf z;
	(void)state;
	assert_int_equal(bench_zipf_init(&z, 0, 1.0), -1);
	assert_int_equal(bench_zipf_init(&z, 10, 0.0), -1);
	assert_int_equal(bench_zipf_init(&z, 10, -1.0), -1);
	assert_int_equal(bench_zipf_init(&z, 10, NAN), -1);
	assert_int_equal(bench_zipf_init(&z, 10, INFINITY), -1);
	assert_int_equal(bench_zipf_init(&z, 1, 0.99), 0);
	uint64_t seed = 7;
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(bench_zipf_next(&z, zipf_rnd, &seed), 0);
	}
}

/* Each rank's share of 400 000 draws is its probability k^-s / H(n, s)
 * to within 0.005 (the binomial standard deviation is at most 0.0008). */
static void test_zipf_frequencies(void **state)
{
	static const double exps[] = {0.5, 0.99, 1.0, 1.2, 2.0};
	enum { N = 10, DRAWS = 400000 };
	(void)state;
	for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++) {
		struct bench_zipf z;
		uint64_t count[N] = {0};
		uint64_t seed = 0x9e3779b97f4a7c15ull;
		double norm = 0;
		assert_int_equal(bench_zipf_init(&z, N, exps[e]), 0);
		for (int k = 1; k <= N; k++) {
			norm += pow(k, -exps[e]);
		}
		for (int i = 0; i < DRAWS; i++) {
			uint64_t r = bench_zipf_next(&z, zipf_rnd, &seed);
			assert_true(r < N);
			count[r]++;
		}
		for (int k = 1; k <= N; k++) {
			double want = pow(k, -exps[e]) / norm;
			double got = (double)count[k - 1] / DRAWS;
			assert_true(fabs(got - want) < 0.005);
		}
	}
}

/* A keyspace of 10^9: every rank in range, and the head as heavy as the
 * distribution says (rank 0 about 1 / H(10^9, 0.99) = 4.2 %). */
static void test_zipf_large(void **state)
{
	struct bench_zipf z;
	uint64_t seed = 12345, zero = 0;
	enum { DRAWS = 200000 };
	(void)state;
	assert_int_equal(bench_zipf_init(&z, 1000000000ull, 0.99), 0);
	for (int i = 0; i < DRAWS; i++) {
		uint64_t r = bench_zipf_next(&z, zipf_rnd, &seed);
		assert_true(r < 1000000000ull);
		zero += r == 0;
	}
	assert_true(zero > DRAWS * 0.039 && zero < DRAWS * 0.046);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hist_empty),
	    cmocka_unit_test(test_hist_exact_matches_sort),
	    cmocka_unit_test(test_hist_tail),
	    cmocka_unit_test(test_hist_merge),
	    cmocka_unit_test(test_sched_times),
	    cmocka_unit_test(test_sched_due_definition),
	    cmocka_unit_test(test_zipf_bad_args),
	    cmocka_unit_test(test_zipf_frequencies),
	    cmocka_unit_test(test_zipf_large),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
