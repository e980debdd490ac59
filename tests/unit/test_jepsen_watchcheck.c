/* Unit tests for the cache-watch checker (jepsen/watchcheck.h): a correct
 * history passes, resumed chains and a resnapshot are understood, and
 * each anomaly kind is reported on a history made to show it. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"
#include "jepsen/watchcheck.h"
#include "tests/unit/jepsen_test_util.h"

/* Runs the checker over `text` (jepsen_test_check). */
static int run(const char *text, const char *kind, const char *what)
{
	return jepsen_test_check(jepsen_watchcheck_run, text, kind, what);
}

/* Two puts to k1, one to k2 (an info one seen, a failed one not), two
 * watchers of s0: watcher 10 sees everything in one window, watcher 11
 * in two windows across a re-watch. Offset 1 belongs to another key of
 * the shard (sparse offsets are fine). */
static const char *const good =
    "0 1 invoke put s0 k1 p1-1\n"
    "1 10 invoke recv s0 0\n"
    "2 11 invoke recv s0 0\n"
    "3 1 ok put s0 k1 p1-1\n"
    "4 2 invoke put s0 k2 p2-2\n"
    "5 1 invoke put s0 k1 p1-3\n"
    "6 2 info put s0 k2 p2-2\n"
    "7 1 ok put s0 k1 p1-3\n"
    "8 3 invoke put s0 k2 p3-4\n"
    "9 3 fail put s0 k2 p3-4\n"
    "10 11 ok recv s0 0:k1:p1-1 2:k2:p2-2\n"
    "11 11 invoke recv s0 3\n"
    "12 11 ok recv s0 3:k1:p1-3\n"
    "13 10 ok recv s0 0:k1:p1-1 2:k2:p2-2 3:k1:p1-3\n";

static void test_valid(void **state)
{
	(void)state;
	assert_int_equal(run(good, NULL, NULL), 0);
	/* A failed watch attempt, a window with no events, and a chain
	 * that resumes from a later offset after a resnapshot. */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 fail recv s0\n"
	                     "4 10 invoke recv s0 0\n"
	                     "5 10 ok recv s0\n"
	                     "6 10 invoke recv s0 0\n"
	                     "7 10 ok recv s0 4:k1:p1-1\n"
	                     "8 1 invoke put s0 k1 p1-2\n"
	                     "9 1 ok put s0 k1 p1-2\n"
	                     "10 1 invoke put s0 k1 p1-3\n"
	                     "11 1 ok put s0 k1 p1-3\n"
	                     "12 11 invoke recv s0 0\n"
	                     "13 11 ok recv s0 4:k1:p1-1 5:k1:p1-2 "
	                     "6:k1:p1-3\n"
	                     "14 10 invoke recv s0 5\n"
	                     "15 10 ok recv s0 resnapshot:6 6:k1:p1-3\n",
	                     NULL, NULL),
	                 0);
	/* Concurrent puts to one key may land in either order. */
	assert_int_equal(run("0 1 invoke put s0 k p1-1\n"
	                     "1 2 invoke put s0 k p2-2\n"
	                     "2 1 ok put s0 k p1-1\n"
	                     "3 2 ok put s0 k p2-2\n"
	                     "4 10 invoke recv s0 0\n"
	                     "5 10 ok recv s0 0:k:p2-2 1:k:p1-1\n",
	                     NULL, NULL),
	                 0);
}

static void test_lost(void **state)
{
	(void)state;
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 1 invoke put s0 k1 p1-2\n"
	                     "3 1 ok put s0 k1 p1-2\n"
	                     "4 10 invoke recv s0 0\n"
	                     "5 10 ok recv s0 0:k1:p1-1\n",
	                     "lost", "k1=p1-2 acknowledged"),
	                 1);
	/* A put only an info one: may be missing. */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 info put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0\n",
	                     NULL, NULL),
	                 0);
}

static void test_duplicate(void **state)
{
	(void)state;
	/* The same offset delivered twice to one watcher (a re-watch that
	 * replayed what it had already delivered). */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k1:p1-1\n"
	                     "4 10 invoke recv s0 1\n"
	                     "5 10 ok recv s0 0:k1:p1-1\n",
	                     "duplicate",
	                     "offset 0 (k1=p1-1) delivered after "
	                     "offset 0"),
	                 1);
	/* One put applied twice. */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k1:p1-1 1:k1:p1-1\n",
	                     "duplicate", "applied twice"),
	                 1);
}

static void test_phantom(void **state)
{
	(void)state;
	assert_int_equal(run("0 10 invoke recv s0 0\n"
	                     "1 10 ok recv s0 0:k1:zz\n",
	                     "phantom", "k1=zz was never put"),
	                 1);
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 fail put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k1:p1-1\n",
	                     "phantom", "its put failed"),
	                 1);
	assert_int_equal(run("0 10 invoke recv s0 0\n"
	                     "1 10 ok recv s0 0:k1:p1-1\n"
	                     "2 1 invoke put s0 k1 p1-1\n"
	                     "3 1 ok put s0 k1 p1-1\n",
	                     "phantom", "before its put began"),
	                 2); /* and the put is lost */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k2:p1-1\n",
	                     "phantom", "put to k1"),
	                 2); /* and the put is lost */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k1:p1-1 1:k1\n",
	                     "phantom", "a deletion of k1"),
	                 1);
}

static void test_skipped_incomplete(void **state)
{
	(void)state;
	const char *puts = "0 1 invoke put s0 k1 p1-1\n"
	                   "1 1 ok put s0 k1 p1-1\n"
	                   "2 1 invoke put s0 k1 p1-2\n"
	                   "3 1 ok put s0 k1 p1-2\n"
	                   "4 1 invoke put s0 k1 p1-3\n"
	                   "5 1 ok put s0 k1 p1-3\n";
	char buf[1024];
	/* Watcher 11 resumed past offset 1 that watcher 10 saw. */
	snprintf(buf, sizeof buf,
	         "%s"
	         "6 10 invoke recv s0 0\n"
	         "7 10 ok recv s0 0:k1:p1-1 1:k1:p1-2 2:k1:p1-3\n"
	         "8 11 invoke recv s0 0\n"
	         "9 11 ok recv s0 0:k1:p1-1\n"
	         "10 11 invoke recv s0 2\n"
	         "11 11 ok recv s0 2:k1:p1-3\n",
	         puts);
	assert_int_equal(run(buf, "skipped", "passed over offset 1"), 1);
	/* Watcher 11 stopped at offset 0. */
	snprintf(buf, sizeof buf,
	         "%s"
	         "6 10 invoke recv s0 0\n"
	         "7 10 ok recv s0 0:k1:p1-1 1:k1:p1-2 2:k1:p1-3\n"
	         "8 11 invoke recv s0 0\n"
	         "9 11 ok recv s0 0:k1:p1-1\n",
	         puts);
	assert_int_equal(
	    run(buf, "incomplete", "ended at offset 0 without 2 acknowledged"),
	    1);
	/* A watcher that never got a window. */
	snprintf(buf, sizeof buf,
	         "%s"
	         "6 10 invoke recv s0 0\n"
	         "7 10 ok recv s0 0:k1:p1-1 1:k1:p1-2 2:k1:p1-3\n"
	         "8 11 invoke recv s0 0\n"
	         "9 11 fail recv s0\n",
	         puts);
	assert_int_equal(run(buf, "incomplete", "ended at offset -1"), 1);
}

static void test_divergent_reorder(void **state)
{
	(void)state;
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 1 invoke put s0 k1 p1-2\n"
	                     "3 1 ok put s0 k1 p1-2\n"
	                     "4 10 invoke recv s0 0\n"
	                     "5 10 ok recv s0 0:k1:p1-1 1:k1:p1-2\n"
	                     "6 11 invoke recv s0 0\n"
	                     "7 11 ok recv s0 0:k1:p1-2 1:k1:p1-1\n",
	                     "divergent", "s0 offset 0 delivered as k1=p1-2"),
	                 4);
	assert_int_equal(run("0 1 invoke put s1 k1 p1-1\n"
	                     "1 1 ok put s1 k1 p1-1\n"
	                     "2 10 invoke recv s0 0\n"
	                     "3 10 ok recv s0 0:k1:p1-1\n",
	                     "divergent", "delivered on s0 but put to s1"),
	                 2);
	/* p1-2 began after p1-1 was acknowledged, yet sits below it. */
	assert_int_equal(run("0 1 invoke put s0 k1 p1-1\n"
	                     "1 1 ok put s0 k1 p1-1\n"
	                     "2 1 invoke put s0 k1 p1-2\n"
	                     "3 1 ok put s0 k1 p1-2\n"
	                     "4 10 invoke recv s0 0\n"
	                     "5 10 ok recv s0 0:k1:p1-2 1:k1:p1-1\n",
	                     "reorder",
	                     "p1-2 (put began at line 3) is at "
	                     "offset 0, below p1-1"),
	                 1);
}

static void test_bad_input(void **state)
{
	(void)state;
	assert_int_equal(run("0 1 invoke put s0 k1\n", NULL, NULL), -1);
	assert_int_equal(run("0 1 invoke add s0 1\n", NULL, NULL), -1);
	assert_int_equal(run("0 10 invoke recv s0 0\n"
	                     "1 10 ok recv s0 x:k1:v\n",
	                     NULL, NULL),
	                 -1);
	assert_int_equal(run("0 10 invoke recv s0 zero\n", NULL, NULL), -1);
	assert_int_equal(run("0 1 invoke put s0 k1 v\n"
	                     "1 2 invoke put s0 k2 v\n",
	                     NULL, NULL),
	                 -1);
}

/* Random valid histories (one shard, puts by 3 writers, 2 watchers that
 * each see every change in order) must pass; dropping one change from
 * one watcher must be reported. Seeded, deterministic. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void test_random(void **state)
{
	(void)state;
	uint64_t seed = 4101;
	enum { PUTS = 40 };
	size_t cap = 64 * 1024;
	char *buf = malloc(cap);
	char *w10 = malloc(cap);
	char *w11 = malloc(cap);
	assert_non_null(buf);
	assert_non_null(w10);
	assert_non_null(w11);
	for (int round = 0; round < 200; round++) {
		size_t o = 0, o10 = 0, o11 = 0;
		int64_t t = 0;
		unsigned drop = (unsigned)(rng_next(&seed) % PUTS);
		bool dropping = round % 2 == 1;
		w10[0] = w11[0] = '\0';
		/* Sequential puts by rotating writers: each acknowledged
		 * before the next begins, so offsets follow put order. */
		for (unsigned i = 0; i < PUTS; i++) {
			unsigned wr = 1 + (unsigned)(rng_next(&seed) % 3);
			unsigned k = (unsigned)(rng_next(&seed) % 4);
			o += (size_t)snprintf(buf + o, cap - o,
			                      "%" PRId64 " %u invoke put s0 "
			                      "k%u p%u-%u\n"
			                      "%" PRId64 " %u ok put s0 k%u "
			                      "p%u-%u\n",
			                      t, wr, k, wr, i, t + 1, wr, k, wr,
			                      i);
			t += 2;
			o10 +=
			    (size_t)snprintf(w10 + o10, cap - o10,
			                     " %u:k%u:p%u-%u", i * 2, k, wr, i);
			if (!(dropping && i == drop)) {
				o11 += (size_t)snprintf(w11 + o11, cap - o11,
				                        " %u:k%u:p%u-%u", i * 2,
				                        k, wr, i);
			}
		}
		o += (size_t)snprintf(buf + o, cap - o,
		                      "%" PRId64 " 10 invoke recv s0 0\n"
		                      "%" PRId64 " 10 ok recv s0%s\n"
		                      "%" PRId64 " 11 invoke recv s0 0\n"
		                      "%" PRId64 " 11 ok recv s0%s\n",
		                      t, t + 1, w10, t + 2, t + 3, w11);
		assert_true(o < cap);
		int n = run(buf, NULL, NULL);
		if (!dropping) {
			assert_int_equal(n, 0);
		} else if (drop == PUTS - 1) {
			assert_int_equal(run(buf, "incomplete", "watcher 11"),
			                 1);
		} else {
			assert_int_equal(run(buf, "skipped", "watcher 11"), 1);
		}
	}
	free(buf);
	free(w10);
	free(w11);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_lost),
	    cmocka_unit_test(test_duplicate),
	    cmocka_unit_test(test_phantom),
	    cmocka_unit_test(test_skipped_incomplete),
	    cmocka_unit_test(test_divergent_reorder),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
