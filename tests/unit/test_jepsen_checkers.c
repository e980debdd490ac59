/* Unit tests for the workload checkers (set, stream, counter, queue,
 * exactly-once, flow): each passes a correct history and reports every anomaly
 * kind it knows on a history made to show it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jepsen/anomaly.h"
#include "jepsen/countercheck.h"
#include "jepsen/flowcheck.h"
#include "jepsen/history.h"
#include "jepsen/oncecheck.h"
#include "jepsen/queuecheck.h"
#include "jepsen/setcheck.h"
#include "jepsen/streamcheck.h"
#include "tests/unit/jepsen_test_util.h"

/* Runs `fn` over `text` (jepsen_test_check). */
static int run(jepsen_test_check_fn fn, const char *text, const char *kind,
               const char *what)
{
	return jepsen_test_check(fn, text, kind, what);
}

static void test_anomalies(void **state)
{
	struct jepsen_anomalies a;
	(void)state;
	jepsen_anomalies_init(&a);
	for (int i = 0; i < JEPSEN_ANOMALY_MAX + 5; i++) {
		assert_int_equal(
		    jepsen_anomalies_add(&a, "lost", (uint32_t)i, "n%d", i), 0);
	}
	assert_int_equal(a.n, JEPSEN_ANOMALY_MAX);
	assert_int_equal(a.dropped, 5);
	assert_int_equal(jepsen_anomalies_count(&a), JEPSEN_ANOMALY_MAX + 5);
	assert_int_equal(jepsen_anomalies_count_kind(&a, "lost"),
	                 JEPSEN_ANOMALY_MAX);
	assert_string_equal(a.items[7].msg, "n7");
	jepsen_anomalies_free(&a);
}

static void test_set(void **state)
{
	jepsen_test_check_fn f = jepsen_setcheck_run;
	(void)state;
	const char *good = "0 1 invoke add s a\n"
	                   "1 1 ok add s a\n"
	                   "2 2 invoke add s b\n"
	                   "3 2 info add s b\n"
	                   "4 1 invoke add s c\n"
	                   "5 1 fail add s c\n"
	                   "6 3 invoke add s d\n"
	                   "7 1 invoke read s\n"
	                   "8 3 ok add s d\n"
	                   "9 1 ok read s a\n";
	/* b was indeterminate and d concurrent with the read: both may be
	 * missing. */
	assert_int_equal(run(f, good, NULL, NULL), 0);
	assert_int_equal(run(f,
	                     "0 1 invoke add s a\n"
	                     "1 1 ok add s a\n"
	                     "2 1 invoke read s\n"
	                     "3 1 ok read s\n",
	                     "lost", "record a, acknowledged at line 2"),
	                 1);
	/* Seen, then gone. */
	assert_int_equal(run(f,
	                     "0 1 invoke add s a\n"
	                     "1 1 info add s a\n"
	                     "2 2 invoke read s\n"
	                     "3 2 ok read s a\n"
	                     "4 2 invoke read s\n"
	                     "5 2 ok read s\n",
	                     "lost", "record a, read at line 4"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke add s a\n"
	                     "1 1 ok add s a\n"
	                     "2 1 invoke read s\n"
	                     "3 1 ok read s a a\n",
	                     "duplicate", "record a twice"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke add s a\n"
	                     "1 1 fail add s a\n"
	                     "2 1 invoke read s\n"
	                     "3 1 ok read s a z\n",
	                     "unexpected", "whose add failed (line 2)"),
	                 2);
	assert_int_equal(run(f,
	                     "0 1 invoke read s\n"
	                     "1 1 ok read s a\n"
	                     "2 1 invoke add s a\n"
	                     "3 1 ok add s a\n"
	                     "4 1 invoke read s\n"
	                     "5 1 ok read s a\n",
	                     "unexpected", "before any add of it began"),
	                 1);
	assert_int_equal(run(f, "0 1 invoke add s a\n1 1 ok add s a\n",
	                     "unread", "no read completed"),
	                 1);
	/* Keys are separate sets. */
	assert_int_equal(run(f,
	                     "0 1 invoke add s a\n"
	                     "1 1 ok add s a\n"
	                     "2 1 invoke read t\n"
	                     "3 1 ok read t a\n"
	                     "4 1 invoke read s\n"
	                     "5 1 ok read s a\n",
	                     "unexpected", "set t"),
	                 1);
	/* Bad input. */
	assert_int_equal(run(f, "0 1 invoke add s\n1 1 ok add s\n", NULL, NULL),
	                 -1);
	assert_int_equal(run(f, "0 1 invoke cas s 1 2\n", NULL, NULL), -1);
}

static void test_stream(void **state)
{
	jepsen_test_check_fn f = jepsen_streamcheck_run;
	(void)state;
	const char *good = "0 1 invoke append p0 a\n"
	                   "1 1 ok append p0 a 0\n"
	                   "2 2 invoke append p0 b\n"
	                   "3 3 invoke append p0 c\n"
	                   "4 3 ok append p0 c 1\n"
	                   "5 2 ok append p0 b 2\n"
	                   "6 1 invoke append p0 d\n"
	                   "7 1 info append p0 d\n"
	                   "8 4 invoke read p0\n"
	                   "9 4 ok read p0 0:a 1:c 2:b\n"
	                   "10 1 invoke append p1 e\n"
	                   "11 1 ok append p1 e 0\n"
	                   "12 4 invoke read p1\n"
	                   "13 4 ok read p1 0:e\n";
	assert_int_equal(run(f, good, NULL, NULL), 0);
	/* Retention: a final read starting at offset 1 does not make the
	 * record at 0 lost. */
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 1\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 1:b\n",
	                     NULL, NULL),
	                 0);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 1\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 0:a\n",
	                     "lost", "record b, acknowledged at line 4"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 2 invoke read p\n"
	                     "3 2 ok read p 0:a 1:a\n",
	                     "duplicate", "record a is at offset 1"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 1\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 0:a 1:b\n"
	                     "6 2 invoke read p\n"
	                     "7 2 ok read p 0:b 1:a\n",
	                     "divergent", "offset 0 holds record b"),
	                 4);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 3\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 0:a 3:b\n",
	                     "gap", "skips offsets 1..2"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 1\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 0\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 0:b 1:a\n",
	                     "reorder",
	                     "record b got offset 0 though it was appended "
	                     "after record a"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a 0\n"
	                     "2 1 invoke append p b\n"
	                     "3 1 ok append p b 1\n"
	                     "4 2 invoke read p\n"
	                     "5 2 ok read p 1:b 0:a\n",
	                     "reorder", "from offset 1 back to offset 0"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 fail append p a\n"
	                     "2 2 invoke read p\n"
	                     "3 2 ok read p 0:a 1:zz\n",
	                     "unexpected", "whose append failed"),
	                 2);
	assert_int_equal(run(f, "0 1 invoke append p a\n1 1 ok append p a 0\n",
	                     "unread", "no read completed"),
	                 1);
	/* Bad input. */
	assert_int_equal(
	    run(f, "0 1 invoke append p a\n1 1 ok append p a\n", NULL, NULL),
	    -1);
	assert_int_equal(
	    run(f, "0 1 invoke read p\n1 1 ok read p a\n", NULL, NULL), -1);
	assert_int_equal(run(f,
	                     "0 1 invoke append p a\n"
	                     "1 1 ok append p a -3\n",
	                     NULL, NULL),
	                 -1);
}

static void test_counter(void **state)
{
	jepsen_test_check_fn f = jepsen_countercheck_run;
	(void)state;
	const char *good = "0 1 invoke add c 5\n"
	                   "1 1 ok add c 5\n"
	                   "2 2 invoke add c 3\n"
	                   "3 3 invoke read c\n"
	                   "4 3 ok read c 8\n"
	                   "5 2 info add c 3\n"
	                   "6 1 invoke add c 10\n"
	                   "7 1 fail add c 10\n"
	                   "8 1 invoke add c -2\n"
	                   "9 1 ok add c -2\n"
	                   "10 3 invoke read c\n"
	                   "11 3 ok read c 3\n";
	/* 3 = 5 - 2 (the info add never applied). */
	assert_int_equal(run(f, good, NULL, NULL), 0);
	/* Final value below the acknowledged sum. */
	assert_int_equal(run(f,
	                     "0 1 invoke add c 5\n"
	                     "1 1 ok add c 5\n"
	                     "2 1 invoke add c 1\n"
	                     "3 1 ok add c 1\n"
	                     "4 2 invoke read c\n"
	                     "5 2 ok read c 5\n",
	                     "out-of-bounds", "could only hold 6..6"),
	                 1);
	/* Above what was attempted (the failed add must not count). */
	assert_int_equal(run(f,
	                     "0 1 invoke add c 5\n"
	                     "1 1 fail add c 5\n"
	                     "2 1 invoke add c 1\n"
	                     "3 1 info add c 1\n"
	                     "4 2 invoke read c\n"
	                     "5 2 ok read c 6\n",
	                     "out-of-bounds", "could only hold 0..1"),
	                 1);
	/* A read concurrent with an add may see it or not, but not more. */
	assert_int_equal(run(f,
	                     "0 1 invoke add c 4\n"
	                     "1 2 invoke read c\n"
	                     "2 2 ok read c 4\n"
	                     "3 1 ok add c 4\n",
	                     NULL, NULL),
	                 0);
	assert_int_equal(run(f,
	                     "0 1 invoke add c 4\n"
	                     "1 2 invoke read c\n"
	                     "2 2 ok read c 5\n"
	                     "3 1 ok add c 4\n",
	                     "out-of-bounds", "0..4"),
	                 1);
	/* A read before the add began cannot see it. */
	assert_int_equal(run(f,
	                     "0 2 invoke read c\n"
	                     "1 2 ok read c 4\n"
	                     "2 1 invoke add c 4\n"
	                     "3 1 ok add c 4\n",
	                     "out-of-bounds", "0..0"),
	                 1);
	assert_int_equal(run(f, "0 1 invoke add c 1\n1 1 ok add c 1\n",
	                     "unread", "no read completed"),
	                 1);
	/* Bad input. */
	assert_int_equal(
	    run(f, "0 1 invoke add c x\n1 1 ok add c x\n", NULL, NULL), -1);
	assert_int_equal(run(f,
	                     "0 1 invoke add c 9223372036854775807\n"
	                     "1 1 ok add c 9223372036854775807\n"
	                     "2 1 invoke add c 1\n"
	                     "3 1 ok add c 1\n",
	                     NULL, NULL),
	                 -1);
}

static void test_queue(void **state)
{
	jepsen_test_check_fn f = jepsen_queuecheck_run;
	(void)state;
	const char *good = "0 1 invoke publish q a\n"
	                   "1 1 ok publish q a\n"
	                   "2 1 invoke publish q b\n"
	                   "3 1 ok publish q b\n"
	                   "4 1 invoke publish q c\n"
	                   "5 1 info publish q c\n"
	                   "6 2 invoke consume q\n"
	                   "7 2 ok consume q a b\n"
	                   "8 2 invoke ack q a\n"
	                   "9 2 ok ack q a\n"
	                   /* b's ack is lost in flight: redelivered. */
	                   "10 2 invoke ack q b\n"
	                   "11 2 info ack q b\n"
	                   "12 3 invoke consume q\n"
	                   "13 3 ok consume q b\n"
	                   "14 3 invoke ack q b\n"
	                   "15 3 ok ack q b\n"
	                   "16 3 invoke nack q z\n"
	                   "17 3 ok nack q z\n"
	                   "18 3 invoke consume q\n"
	                   "19 3 ok consume q\n";
	assert_int_equal(run(f, good, NULL, NULL), 0);
	/* An ack confirmed, then a later ack after an in-flight race is
	 * still fine: the redelivery began before the first ack returned. */
	assert_int_equal(run(f,
	                     "0 1 invoke publish q a\n"
	                     "1 1 ok publish q a\n"
	                     "2 2 invoke consume q\n"
	                     "3 2 ok consume q a\n"
	                     "4 2 invoke ack q a\n"
	                     "5 3 invoke consume q\n"
	                     "6 3 ok consume q a\n"
	                     "7 2 ok ack q a\n"
	                     "8 3 invoke ack q a\n"
	                     "9 3 ok ack q a\n",
	                     NULL, NULL),
	                 0);
	assert_int_equal(run(f,
	                     "0 1 invoke publish q a\n"
	                     "1 1 ok publish q a\n"
	                     "2 2 invoke consume q\n"
	                     "3 2 ok consume q a\n"
	                     "4 2 invoke ack q a\n"
	                     "5 2 ok ack q a\n"
	                     "6 3 invoke consume q\n"
	                     "7 3 ok consume q a\n"
	                     "8 3 invoke ack q a\n"
	                     "9 3 ok ack q a\n",
	                     "double-ack", "acknowledged at line 6"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke publish q a\n"
	                     "1 1 ok publish q a\n"
	                     "2 2 invoke consume q\n"
	                     "3 2 ok consume q\n",
	                     "lost", "never delivered"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke publish q a\n"
	                     "1 1 ok publish q a\n"
	                     "2 2 invoke consume q\n"
	                     "3 2 ok consume q a\n"
	                     "4 2 invoke ack q a\n"
	                     "5 2 fail ack q a\n",
	                     "unacked", "no ack of it succeeded"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke publish q a\n"
	                     "1 1 fail publish q a\n"
	                     "2 2 invoke consume q\n"
	                     "3 2 ok consume q a x\n",
	                     "unexpected", "its publish failed"),
	                 2);
	assert_int_equal(run(f,
	                     "0 2 invoke ack q a\n"
	                     "1 2 ok ack q a\n",
	                     "unexpected", "before any delivery"),
	                 1);
	/* Bad input. */
	assert_int_equal(run(f, "0 1 invoke publish q\n", NULL, NULL), -1);
	assert_int_equal(run(f, "0 1 invoke add q 1\n", NULL, NULL), -1);
}

static void test_exactly_once(void **state)
{
	jepsen_test_check_fn f = jepsen_oncecheck_run;
	(void)state;
	const char *good = "0 1 invoke send t a\n"
	                   "1 1 info send t a\n"
	                   /* retried after the indeterminate send */
	                   "2 1 invoke send t a\n"
	                   "3 1 ok send t a\n"
	                   "4 1 invoke send t b\n"
	                   "5 1 info send t b\n"
	                   "6 1 invoke send t c\n"
	                   "7 1 fail send t c\n"
	                   "8 2 invoke recv t\n"
	                   "9 2 ok recv t a\n"
	                   "10 2 invoke recv t\n"
	                   "11 2 info recv t\n";
	assert_int_equal(run(f, good, NULL, NULL), 0);
	assert_int_equal(run(f,
	                     "0 1 invoke send t a\n"
	                     "1 1 ok send t a\n"
	                     "2 2 invoke recv t\n"
	                     "3 2 ok recv t a\n"
	                     "4 2 invoke recv t\n"
	                     "5 2 ok recv t a\n",
	                     "duplicate", "received again (first at line 4)"),
	                 1);
	/* Indeterminate sends may arrive once, not twice. */
	assert_int_equal(run(f,
	                     "0 1 invoke publish t a\n"
	                     "1 1 info publish t a\n"
	                     "2 2 invoke consume t\n"
	                     "3 2 ok consume t a a\n",
	                     "duplicate", "record a"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke send t a\n"
	                     "1 1 ok send t a\n",
	                     "lost", "never received"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke send t a\n"
	                     "1 1 fail send t a\n"
	                     "2 2 invoke recv t\n"
	                     "3 2 ok recv t a b\n",
	                     "unexpected", "its send failed"),
	                 2);
	assert_int_equal(run(f, "0 1 invoke send t a b\n", NULL, NULL), -1);
	assert_int_equal(run(f, "0 1 invoke ack t a\n", NULL, NULL), -1);
}

static void test_flow(void **state)
{
	jepsen_test_check_fn f = jepsen_flowcheck_run;
	(void)state;
	/* Created, claimed, heartbeat, retried, claimed again by another
	 * worker after the lease lapsed; the first worker's late complete
	 * was refused; completed once, replayed with the same token. */
	const char *good = "0 1 invoke create a\n"
	                   "1 1 ok create a\n"
	                   "2 2 invoke claim a 1\n"
	                   "3 2 ok claim a 1\n"
	                   "4 2 invoke extend a 1\n"
	                   "5 2 ok extend a 1\n"
	                   "6 2 invoke retry a 1\n"
	                   "7 2 ok retry a 1\n"
	                   "8 2 invoke retry a 1\n"
	                   "9 2 ok retry a 1\n"
	                   "10 3 invoke claim a 2\n"
	                   "11 3 ok claim a 2\n"
	                   "12 4 invoke claim a 3\n"
	                   "13 4 ok claim a 3\n"
	                   "14 3 invoke complete a 2\n"
	                   "15 3 fail complete a 2\n"
	                   "16 4 invoke complete a 3\n"
	                   "17 4 ok complete a 3\n"
	                   "18 4 invoke complete a 3\n"
	                   "19 4 ok complete a 3\n"
	                   /* an indeterminate create, never found */
	                   "20 5 invoke create b\n"
	                   "21 5 info create b\n"
	                   /* waiting for a retry's backoff: claimable */
	                   "22 6 invoke create c\n"
	                   "23 6 ok create c\n"
	                   "30 9 invoke read a\n"
	                   "31 9 ok read a completed 3 nil nil 1000\n"
	                   "32 9 invoke read b\n"
	                   "33 9 ok read b nil\n"
	                   "34 9 invoke read c\n"
	                   "35 9 ok read c queued 0 3000 nil 1000\n";
	assert_int_equal(run(f, good, NULL, NULL), 0);
	/* A stale complete accepted after a newer claim answered: both a
	 * stale fence and a second complete. */
	const char *stale = "0 1 invoke create a\n"
	                    "1 1 ok create a\n"
	                    "2 2 invoke claim a 1\n"
	                    "3 2 ok claim a 1\n"
	                    "4 3 invoke claim a 2\n"
	                    "5 3 ok claim a 2\n"
	                    "6 2 invoke complete a 1\n"
	                    "7 2 ok complete a 1\n"
	                    "8 3 invoke complete a 2\n"
	                    "9 3 ok complete a 2\n";
	assert_int_equal(run(f, stale, "stale-fence",
	                     "after a claim with "
	                     "token 2 answered"),
	                 2);
	assert_int_equal(run(f, stale, "double-complete",
	                     "fencing token 2, and again with 1"),
	                 2);
	/* Concurrent with the claim: not ordered, so not stale. */
	assert_int_equal(run(f,
	                     "2 2 invoke claim a 1\n"
	                     "3 2 ok claim a 1\n"
	                     "4 2 invoke extend a 1\n"
	                     "5 3 invoke claim a 2\n"
	                     "6 3 ok claim a 2\n"
	                     "7 2 ok extend a 1\n",
	                     NULL, NULL),
	                 0);
	/* A mutation after its own lease ended. */
	assert_int_equal(run(f,
	                     "2 2 invoke claim a 1\n"
	                     "3 2 ok claim a 1\n"
	                     "4 2 invoke retry a 1\n"
	                     "5 2 ok retry a 1\n"
	                     "6 2 invoke extend a 1\n"
	                     "7 2 ok extend a 1\n",
	                     "stale-fence", "after a retry ended that lease"),
	                 1);
	/* Lost create, lost complete, stuck flows. */
	assert_int_equal(run(f,
	                     "0 1 invoke create a\n"
	                     "1 1 ok create a\n"
	                     "2 9 invoke read a\n"
	                     "3 9 ok read a nil\n",
	                     "lost", "did not find it"),
	                 1);
	assert_int_equal(run(f,
	                     "2 2 invoke claim a 1\n"
	                     "3 2 ok claim a 1\n"
	                     "4 2 invoke complete a 1\n"
	                     "5 2 ok complete a 1\n"
	                     "6 9 invoke read a\n"
	                     "7 9 ok read a failed 1 nil nil 1000\n",
	                     "lost-complete", "found it failed"),
	                 1);
	assert_int_equal(run(f,
	                     "0 9 invoke read a\n"
	                     "1 9 ok read a running 1 nil nil 1000\n",
	                     "stuck", "running without a lease deadline"),
	                 1);
	assert_int_equal(run(f,
	                     "0 9 invoke read a\n"
	                     "1 9 ok read a queued 1 nil nil 1000\n",
	                     "stuck", "waiting without a next run"),
	                 1);
	assert_int_equal(run(f,
	                     "0 9 invoke read a\n"
	                     "1 9 ok read a running 1 5000 999999999 1000\n",
	                     "stuck", "beyond the horizon"),
	                 1);
	assert_int_equal(run(f,
	                     "0 9 invoke read a\n"
	                     "1 9 ok read a running 1 5000 5000 1000\n",
	                     NULL, NULL),
	                 0);
	/* Input errors. */
	assert_int_equal(
	    run(f, "0 1 invoke claim a\n1 1 ok claim a\n", NULL, NULL), -1);
	assert_int_equal(run(f, "0 1 invoke complete a x\n", NULL, NULL), -1);
	assert_int_equal(
	    run(f, "0 9 invoke read a\n1 9 ok read a queued\n", NULL, NULL),
	    -1);
	assert_int_equal(run(f, "0 1 invoke add a 1\n", NULL, NULL), -1);
}

/* The schedule part of the flow checker: targets found at the end against
 * the schedules' final reads. */
static void test_flow_schedule(void **state)
{
	jepsen_test_check_fn f = jepsen_flowcheck_run;
	(void)state;
	/* Every 100 ms from 1000: on time twice, then the fire due at 1200
	 * 150 ms late (one period coalesced, the next run at 1350 + 100),
	 * on time again; paused with the next run at 1550. The one-shot
	 * fired once. */
	const char *good = "0 1 invoke create s\n"
	                   "1 1 ok create s\n"
	                   "2 1 invoke create o\n"
	                   "3 1 info create o\n"
	                   "4 2 invoke target s\n"
	                   "5 2 ok target s s:1000:1\n"
	                   "6 2 invoke target s\n"
	                   "7 2 ok target s s:1100:2\n"
	                   "8 2 invoke target s\n"
	                   "9 2 ok target s s:1450:4\n"
	                   "10 2 invoke target s\n"
	                   "11 2 ok target s s:1200:3\n"
	                   "12 2 invoke target o\n"
	                   "13 2 ok target o o:5000:1\n"
	                   "14 2 invoke schedule s\n"
	                   "15 2 ok schedule s interval paused 100 1000 4 1 "
	                   "1550 nil\n"
	                   "16 2 invoke schedule o\n"
	                   "17 2 ok schedule o one_shot completed nil 5000 1 "
	                   "0 nil one_shot_fired\n";
	assert_int_equal(run(f, good, NULL, NULL), 0);
	/* The occurrence due at 1100 fired twice. */
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1100:2\n"
	                     "4 2 invoke target s\n"
	                     "5 2 ok target s s:1100:3\n"
	                     "6 2 invoke schedule s\n"
	                     "7 2 ok schedule s interval paused 100 1000 3 0 "
	                     "1200 nil\n",
	                     "double-fire", "due at 1100 fired twice"),
	                 1);
	/* One fire count for two due times. */
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1100:1\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 1 0 "
	                     "1200 nil\n",
	                     "double-fire", "fire 1 created two targets"),
	                 1);
	/* A counted fire without its target; a target beyond the count. */
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1200:3\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 3 0 "
	                     "1300 nil\n",
	                     "lost-fire", "no target of fire 2"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke schedule s\n"
	                     "3 2 ok schedule s interval paused 100 1000 2 0 "
	                     "1200 nil\n",
	                     "lost-fire", "only 1 targets"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1100:2\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 1 0 "
	                     "1100 nil\n",
	                     "extra-fire", "beyond its fire_count 1"),
	                 1);
	/* Skipped periods not reported as coalesced; a fire too early; a
	 * late first fire; fires out of order. */
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1300:2\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 2 1 "
	                     "1400 nil\n",
	                     "coalesce-mismatch", "skip 2 periods"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1000:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1050:2\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 2 0 "
	                     "1150 nil\n",
	                     "early-fire", "less than its period 100"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1100:1\n"
	                     "2 2 invoke schedule s\n"
	                     "3 2 ok schedule s interval paused 100 1000 1 0 "
	                     "1200 nil\n",
	                     "bad-due", "not at the start 1000"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s s:1100:1\n"
	                     "2 2 invoke target s\n"
	                     "3 2 ok target s s:1000:2\n"
	                     "4 2 invoke schedule s\n"
	                     "5 2 ok schedule s interval paused 100 1000 2 0 "
	                     "1200 nil\n",
	                     "out-of-order", "before fire 1"),
	                 1);
	/* A one-shot that never fired, one that fired twice; a lost
	 * schedule; a target id that is not the schedule's. */
	assert_int_equal(run(f,
	                     "0 2 invoke schedule o\n"
	                     "1 2 ok schedule o one_shot active nil 5000 0 0 "
	                     "5000 nil\n",
	                     "one-shot", "should have fired exactly once"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target o\n"
	                     "1 2 ok target o o:5000:1\n"
	                     "2 2 invoke target o\n"
	                     "3 2 ok target o o:5000:2\n"
	                     "4 2 invoke schedule o\n"
	                     "5 2 ok schedule o one_shot completed nil 5000 2 "
	                     "0 nil one_shot_fired\n",
	                     "double-fire", "due at 5000 fired twice"),
	                 1);
	assert_int_equal(run(f,
	                     "0 1 invoke create s\n"
	                     "1 1 ok create s\n"
	                     "2 2 invoke schedule s\n"
	                     "3 2 ok schedule s nil\n",
	                     "lost", "did not find it"),
	                 1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n"
	                     "1 2 ok target s t:1000:1\n"
	                     "2 2 invoke schedule s\n"
	                     "3 2 ok schedule s interval paused 100 1000 0 0 "
	                     "1000 nil\n",
	                     "bad-target", "is not s:<due_at_ms>"),
	                 1);
	/* Input errors. */
	assert_int_equal(
	    run(f, "0 2 invoke schedule s\n1 2 ok schedule s x\n", NULL, NULL),
	    -1);
	assert_int_equal(run(f,
	                     "0 2 invoke target s\n1 2 ok target s\n"
	                     "2 2 invoke schedule s\n3 2 ok schedule s nil\n",
	                     NULL, NULL),
	                 -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_anomalies),
	    cmocka_unit_test(test_set),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_counter),
	    cmocka_unit_test(test_queue),
	    cmocka_unit_test(test_exactly_once),
	    cmocka_unit_test(test_flow),
	    cmocka_unit_test(test_flow_schedule),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
