/* Unit: the metrics registry's exposition (node/admin/metrics.c): families
 * contiguous under one HELP and TYPE whatever the registration order,
 * histograms cumulative with +Inf, _sum and _count, collectors run after
 * the series and removed on request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/admin/metrics.h"

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
		n++;
	}
	return n;
}

static void test_families_grouped(void **state)
{
	struct metrics m;
	char *out;
	size_t len;
	(void)state;
	metrics_init(&m);
	struct metric *a =
	    metrics_counter(&m, "lodestone_x_total", "X", "kind=\"a\"");
	metrics_gauge(&m, "lodestone_y", "Y", NULL);
	struct metric *b =
	    metrics_counter(&m, "lodestone_x_total", "X", "kind=\"b\"");
	assert_ptr_equal(
	    metrics_counter(&m, "lodestone_x_total", "X", "kind=\"a\""), a);
	metric_add(a, 2);
	metric_add(b, 5);
	assert_int_equal(metrics_render(&m, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	assert_string_equal(out, "# HELP lodestone_x_total X\n"
	                         "# TYPE lodestone_x_total counter\n"
	                         "lodestone_x_total{kind=\"a\"} 2\n"
	                         "lodestone_x_total{kind=\"b\"} 5\n"
	                         "# HELP lodestone_y Y\n"
	                         "# TYPE lodestone_y gauge\n"
	                         "lodestone_y 0\n");
	free(out);
	metrics_free(&m);
}

struct hist_fixture {
	struct metric_hist h;
	unsigned runs;
};

static void collect(void *data, struct metrics_out *o)
{
	struct hist_fixture *f = data;
	f->runs++;
	metrics_out_family(o, "lodestone_d_seconds", METRIC_HISTOGRAM, "D");
	metrics_out_hist(o, "lodestone_d_seconds", "op=\"get\"",
	                 metric_hist_bounds_ns, f->h.bucket, METRIC_HIST_BOUNDS,
	                 f->h.count, f->h.sum_ns);
}

static void test_histogram_collector(void **state)
{
	struct metrics m;
	struct hist_fixture f;
	char *out;
	size_t len;
	(void)state;
	memset(&f, 0, sizeof f);
	metrics_init(&m);
	metrics_gauge(&m, "lodestone_first", "F", NULL);
	metric_hist_observe(&f.h, 50000);          /* 50 us: first bucket */
	metric_hist_observe(&f.h, 100000);         /* exactly 100 us */
	metric_hist_observe(&f.h, 3000000);        /* 3 ms: le 5 ms */
	metric_hist_observe(&f.h, 20000000000ull); /* 20 s: +Inf only */
	assert_int_equal(metrics_add_collector(&m, collect, &f), 0);
	assert_int_equal(metrics_render(&m, &out, &len), 0);
	assert_int_equal(f.runs, 1);
	/* The series first, then the collector's family. */
	assert_true(strstr(out, "lodestone_first 0") <
	            strstr(out, "# TYPE lodestone_d_seconds histogram"));
	assert_non_null(strstr(
	    out, "lodestone_d_seconds_bucket{op=\"get\",le=\"0.0001\"} 2\n"));
	assert_non_null(strstr(
	    out, "lodestone_d_seconds_bucket{op=\"get\",le=\"0.0025\"} 2\n"));
	assert_non_null(strstr(
	    out, "lodestone_d_seconds_bucket{op=\"get\",le=\"0.005\"} 3\n"));
	assert_non_null(strstr(
	    out, "lodestone_d_seconds_bucket{op=\"get\",le=\"10\"} 3\n"));
	assert_non_null(strstr(
	    out, "lodestone_d_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"));
	assert_non_null(
	    strstr(out, "lodestone_d_seconds_count{op=\"get\"} 4\n"));
	assert_non_null(
	    strstr(out, "lodestone_d_seconds_sum{op=\"get\"} 20.00315\n"));
	assert_int_equal(count(out, "_bucket{"), METRIC_HIST_BOUNDS + 1);
	free(out);

	metrics_remove_collector(&m, collect, &f);
	assert_int_equal(metrics_render(&m, &out, &len), 0);
	assert_int_equal(f.runs, 1);
	assert_null(strstr(out, "lodestone_d_seconds"));
	free(out);
	metrics_free(&m);
}

/* A large output grows its buffer. */
static void big(void *data, struct metrics_out *o)
{
	(void)data;
	metrics_out_family(o, "lodestone_big", METRIC_GAUGE, "B");
	for (unsigned i = 0; i < 20000; i++) {
		char labels[32];
		snprintf(labels, sizeof labels, "i=\"%u\"", i);
		metrics_out_uint(o, "lodestone_big", labels, i);
	}
}

static void test_large(void **state)
{
	struct metrics m;
	char *out;
	size_t len;
	(void)state;
	metrics_init(&m);
	assert_int_equal(metrics_add_collector(&m, big, NULL), 0);
	assert_int_equal(metrics_render(&m, &out, &len), 0);
	assert_int_equal(count(out, "\nlodestone_big{"), 20000);
	assert_non_null(strstr(out, "lodestone_big{i=\"19999\"} 19999\n"));
	free(out);
	metrics_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_families_grouped),
	    cmocka_unit_test(test_histogram_collector),
	    cmocka_unit_test(test_large),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
