/* Integration: consumer groups, counters and idempotent producers of the
 * Felix broker over real QUIC against one lodestone --dev node (cache
 * watches: test_felix_watch.c; three nodes: test_felix_cluster.c):
 *  - consumer groups: a queue shared by three consumers delivers every
 *    record exactly once; a long poll is woken by a publish; nacks
 *    redeliver at once with attempts + 1; claims whose visibility lapsed
 *    are redelivered with attempts + 1 (to a parked long poll as soon as
 *    they lapse); the fifth failure dead-letters a
 *    record, redrive brings it back with a fresh count, discard drops it;
 *    settles of the wrong records are refused;
 *  - counters: after a SIGKILL and restart every sum equals the sum of the
 *    acknowledged adds;
 *  - idempotent producers: every batch sent twice, across a SIGKILL and
 *    restart, lands exactly once; sequence_gap, unknown_producer and
 *    sequence_expired refusals;
 * Times only bound the waits. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/integration/felix_util.h"
#include "wire/felix_hash.h"

#define NODES 1
#define JOBS 60
#define POISON (JOBS + 1) /* offsets of the records after the jobs */
#define JUNK (JOBS + 2)

static void start(struct harness_cluster *cl, const char *const *args)
{
	assert_int_equal(harness_cluster_start(cl, NODES, args, true), 0);
}

static void connect_ok(struct fx *f, uv_loop_t *loop,
                       struct harness_cluster *cl)
{
	fx_connect_ok(f, loop, cl, 0);
	assert_int_equal(felix_client_server_features(f->c), 0x03FC);
}

static void publish_one(struct fx *f, const char *stream, const char *p)
{
	const char *v[1] = {p};
	int rv = fx_publish(f, "default", stream, NULL, v, 1);
	if (rv != 0) {
		fail_msg("publish: %d %s", rv, f->message);
	}
}

static void restart(struct harness_cluster *cl, int sig)
{
	assert_int_equal(harness_node_signal(cl, 0, sig, NULL), 0);
	assert_int_equal(harness_node_start(cl, 0), 0);
	assert_int_equal(harness_node_wait_healthy(cl, 0, 15000), 0);
}

/* ---- consumer groups ------------------------------------------------------
 */

static const char *const queue_args[] = {
    "--dev", "--shards", "2", "--felix-group-max-wait-ms", "20000", NULL};

static void poll_one(struct fx *f, const char *stream, const char *group,
                     uint64_t offset, uint32_t attempts)
{
	struct fx_rec r[4];
	size_t n = 0;
	int rv = fx_group_poll(f, "default", stream, 0, group, 4, 0, r, 4, &n);
	if (rv != 0) {
		fail_msg("poll: %d %s", rv, f->message);
	}
	assert_int_equal(n, 1);
	assert_int_equal(r[0].offset, offset);
	assert_int_equal(r[0].attempts, attempts);
}

static void poll_none(struct fx *f, const char *stream, const char *group)
{
	struct fx_rec r[4];
	size_t n = 9;
	assert_int_equal(
	    fx_group_poll(f, "default", stream, 0, group, 4, 0, r, 4, &n), 0);
	assert_int_equal(n, 0);
}

static void dead_letters_are(struct fx *f, const char *stream,
                             const char *group, const uint64_t *want,
                             size_t nwant)
{
	uint64_t d[16];
	size_t n = 99;
	assert_int_equal(
	    fx_group_dead(f, "default", stream, 0, group, d, 16, &n), 0);
	assert_int_equal(n, nwant);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(d[i], want[i]);
	}
}

static void settle(struct fx *f, enum felix_msg_type type, const char *stream,
                   const char *group, uint64_t offset)
{
	int rv = fx_group_settle(f, type, "default", stream, 0, group, offset);
	if (rv != 0) {
		fail_msg("settle %d of %llu: %d %s", (int)type,
		         (unsigned long long)offset, rv, f->message);
	}
}

static void test_group_queue(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx p, c[3];
	(void)state;
	start(&cl, queue_args);
	uv_loop_init(&loop);
	connect_ok(&p, &loop, &cl);
	assert_int_equal(fx_publish_ready(&p, "default", "warm"), 0);
	for (int k = 0; k < 3; k++) {
		connect_ok(&c[k], &loop, &cl);
	}
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "jobs", "{\"shards\":1}"), 0);
	char buf[64];
	char jobs[JOBS][16];
	const char *pj[10];
	for (int i = 0; i < JOBS; i++) {
		snprintf(jobs[i], sizeof jobs[i], "job-%d", i);
		pj[i % 10] = jobs[i];
		if (i % 10 == 9) {
			assert_int_equal(
			    fx_publish(&p, "default", "jobs", NULL, pj, 10), 0);
		}
	}

	/* Three consumers share the group: every record exactly once. */
	int delivered[JOBS] = {0};
	int acked = 0;
	for (int it = 0; acked < JOBS; it++) {
		struct fx_rec r[16];
		size_t n = 0;
		struct fx *ck = &c[it % 3];
		assert_true(it < 1000);
		int rv = fx_group_poll(ck, "default", "jobs", 0, "workers", 7,
		                       0, r, 16, &n);
		if (rv != 0) {
			fail_msg("poll: %d %s", rv, ck->message);
		}
		assert_true(n <= 7);
		for (size_t i = 0; i < n; i++) {
			assert_true(r[i].offset < JOBS);
			assert_int_equal(r[i].attempts, 1);
			snprintf(buf, sizeof buf, "job-%llu",
			         (unsigned long long)r[i].offset);
			assert_string_equal(r[i].payload, buf);
			assert_int_equal(++delivered[r[i].offset], 1);
			settle(ck, FELIX_MSG_GROUP_ACK, "jobs", "workers",
			       r[i].offset);
			acked++;
		}
	}
	poll_none(&c[0], "jobs", "workers");
	/* Another group reads the same stream from the start. */
	struct fx_rec r[4];
	size_t n = 9;
	assert_int_equal(
	    fx_group_poll(&c[1], "default", "jobs", 0, "audit", 1, 0, r, 4, &n),
	    0);
	assert_int_equal(n, 1);
	assert_int_equal(r[0].offset, 0);
	assert_int_equal(r[0].attempts, 1);

	/* A long poll is woken by the publish it waits for. */
	struct fx_apoll a;
	memset(&a, 0, sizeof a);
	uint64_t t0 = harness_mono_ms();
	assert_int_equal(felix_client_group_poll(c[0].c, "default", "jobs", 0,
	                                         "workers", 4, 15000,
	                                         fx_apoll_cb, &a),
	                 0);
	fx_spin(&c[0], 100);
	assert_false(a.done);
	publish_one(&p, "jobs", "job-late"); /* offset JOBS */
	assert_int_equal(felix_client_run(&loop, &a.done, FX_WAIT_MS), 0);
	assert_int_equal(a.status, 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.rec[0].offset, JOBS);
	/* Woken, not answered at the end of the 15 s wait. */
	assert_true(harness_mono_ms() - t0 < 10000);
	settle(&c[0], FELIX_MSG_GROUP_ACK, "jobs", "workers", JOBS);
	/* A long poll that finds nothing answers empty after its wait. */
	n = 9;
	t0 = harness_mono_ms();
	assert_int_equal(fx_group_poll(&c[1], "default", "jobs", 0, "workers",
	                               4, 300, r, 4, &n),
	                 0);
	assert_int_equal(n, 0);
	assert_true(harness_mono_ms() - t0 >= 200);

	/* A nack redelivers at once (the visibility timeout is 30 s) with
	 * attempts + 1; the fifth failure dead-letters the record. */
	publish_one(&p, "jobs", "poison"); /* offset JOBS + 1 */
	for (uint32_t att = 1; att <= 5; att++) {
		poll_one(&c[att % 3], "jobs", "workers", POISON, att);
		settle(&c[att % 3], FELIX_MSG_GROUP_NACK, "jobs", "workers",
		       POISON);
	}
	poll_none(&c[0], "jobs", "workers");
	uint64_t dead_poison[] = {POISON};
	dead_letters_are(&c[0], "jobs", "workers", dead_poison, 1);
	assert_int_not_equal(fx_group_settle(&c[0], FELIX_MSG_GROUP_ACK,
	                                     "default", "jobs", 0, "workers",
	                                     POISON),
	                     0);
	assert_non_null(strstr(c[0].message, "dead-lettered"));
	/* Redrive: back with a fresh count. */
	settle(&c[1], FELIX_MSG_GROUP_REDRIVE, "jobs", "workers", POISON);
	dead_letters_are(&c[0], "jobs", "workers", NULL, 0);
	poll_one(&c[2], "jobs", "workers", POISON, 1);
	settle(&c[2], FELIX_MSG_GROUP_ACK, "jobs", "workers", POISON);

	/* Discard drops a dead letter for good. */
	publish_one(&p, "jobs", "junk"); /* offset JOBS + 2 */
	for (uint32_t att = 1; att <= 5; att++) {
		poll_one(&c[0], "jobs", "workers", JUNK, att);
		settle(&c[0], FELIX_MSG_GROUP_NACK, "jobs", "workers", JUNK);
	}
	uint64_t dead_junk[] = {JUNK};
	dead_letters_are(&c[0], "jobs", "workers", dead_junk, 1);
	settle(&c[0], FELIX_MSG_GROUP_DISCARD, "jobs", "workers", JUNK);
	dead_letters_are(&c[0], "jobs", "workers", NULL, 0);
	poll_none(&c[0], "jobs", "workers");
	assert_int_not_equal(fx_group_settle(&c[0], FELIX_MSG_GROUP_REDRIVE,
	                                     "default", "jobs", 0, "workers",
	                                     JUNK),
	                     0);
	assert_non_null(strstr(c[0].message, "not dead-lettered"));

	/* Refusals: past the end, nack after ack, shard out of range. */
	assert_int_not_equal(fx_group_settle(&c[0], FELIX_MSG_GROUP_ACK,
	                                     "default", "jobs", 0, "workers",
	                                     5000),
	                     0);
	assert_non_null(strstr(c[0].message, "past the end"));
	assert_int_not_equal(fx_group_settle(&c[0], FELIX_MSG_GROUP_NACK,
	                                     "default", "jobs", 0, "workers",
	                                     3),
	                     0);
	assert_non_null(strstr(c[0].message, "already acknowledged"));
	assert_int_not_equal(fx_group_poll(&c[0], "default", "jobs", 1,
	                                   "workers", 4, 0, r, 4, &n),
	                     0);
	assert_non_null(strstr(c[0].message, "out of range"));

	/* A long poll whose connection goes away is dropped by the
	 * broker; the group goes on. */
	memset(&a, 0, sizeof a);
	assert_int_equal(felix_client_group_poll(c[2].c, "default", "jobs", 0,
	                                         "workers", 4, 15000,
	                                         fx_apoll_cb, &a),
	                 0);
	fx_spin(&c[2], 100);
	fx_close(&c[2]);
	fx_spin(&c[0], 200);
	publish_one(&p, "jobs", "after"); /* offset JOBS + 3 */
	poll_one(&c[0], "jobs", "workers", JOBS + 3, 1);
	assert_int_equal(
	    fx_metric(&cl, 0, "lodestone_felix_group_parked_polls"), 0);

	fx_close(&c[0]);
	fx_close(&c[1]);
	fx_close(&p);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

static void test_group_visibility(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "2", "--felix-group-visibility-ms",
	    "300",   NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "vis", "{\"shards\":1}"), 0);
	publish_one(&f, "vis", "slow");
	/* Never acked: each lapse hands it out again with attempts + 1. */
	for (uint32_t att = 1; att <= 5; att++) {
		poll_one(&f, "vis", "g", 0, att);
		fx_spin(&f, 400);
	}
	/* The fifth lapse dead-letters it (decided by the next poll). */
	poll_none(&f, "vis", "g");
	uint64_t dead0[] = {0};
	dead_letters_are(&f, "vis", "g", dead0, 1);
	settle(&f, FELIX_MSG_GROUP_REDRIVE, "vis", "g", 0);
	poll_one(&f, "vis", "g", 0, 1);
	settle(&f, FELIX_MSG_GROUP_ACK, "vis", "g", 0);
	fx_spin(&f, 400);
	poll_none(&f, "vis", "g");
	/* Groups survive a restart: the acked record stays acked, a
	 * claimed one comes back after its lapse. */
	publish_one(&f, "vis", "two"); /* offset 1 */
	poll_one(&f, "vis", "g", 1, 1);
	fx_close(&f);
	restart(&cl, SIGKILL);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	fx_spin(&f, 400);
	poll_one(&f, "vis", "g", 1, 2);
	settle(&f, FELIX_MSG_GROUP_ACK, "vis", "g", 1);
	/* A parked long poll gets a claim that lapses while it waits: it is
	 * woken at the claim's deadline, not at the end of its wait. */
	publish_one(&f, "vis", "three"); /* offset 2 */
	poll_one(&f, "vis", "g", 2, 1);
	struct fx_apoll a;
	memset(&a, 0, sizeof a);
	uint64_t t0 = harness_mono_ms();
	assert_int_equal(felix_client_group_poll(f.c, "default", "vis", 0, "g",
	                                         4, 20000, fx_apoll_cb, &a),
	                 0);
	assert_int_equal(felix_client_run(&loop, &a.done, 25000), 0);
	assert_int_equal(a.status, 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.rec[0].offset, 2);
	assert_int_equal(a.rec[0].attempts, 2);
	assert_true(harness_mono_ms() - t0 < 10000);
	settle(&f, FELIX_MSG_GROUP_ACK, "vis", "g", 2);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* ---- counters -------------------------------------------------------------
 */

static void test_counters_restart(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	int64_t sums[10] = {0};
	char key[16];
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	for (int i = 0; i < 120; i++) {
		int64_t d = (int64_t)((i * 7) % 13) - 3, sum = 0;
		snprintf(key, sizeof key, "n%d", i % 10);
		int rv = fx_counter_add(&f, "ctr", key, d, &sum);
		if (rv != 0) {
			fail_msg("counter_add: %d %s", rv, f.message);
		}
		sums[i % 10] += d;
		assert_int_equal(sum, sums[i % 10]);
	}
	fx_close(&f);
	/* Killed, not stopped: acknowledged adds are on disk. */
	restart(&cl, SIGKILL);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	for (int k = 0; k < 10; k++) {
		int64_t v = 0;
		bool found = false;
		snprintf(key, sizeof key, "n%d", k);
		assert_int_equal(fx_counter_get(&f, "ctr", key, &v, &found), 0);
		assert_true(found);
		assert_int_equal(v, sums[k]);
		assert_int_equal(fx_counter_add(&f, "ctr", key, 1, &v), 0);
		assert_int_equal(v, sums[k] + 1);
	}
	int64_t v = 0;
	bool found = true;
	assert_int_equal(fx_counter_get(&f, "ctr", "never", &v, &found), 0);
	assert_false(found);
	fx_close(&f);
	/* And a clean stop. */
	restart(&cl, SIGTERM);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(fx_counter_get(&f, "ctr", "n3", &v, &found), 0);
	assert_int_equal(v, sums[3] + 1);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* ---- idempotent producers ------------------------------------------------ */

#define IDEM_BATCHES 60

static void idem_send(struct fx *f, uint64_t pid, int b, uint64_t seq)
{
	static const char *const keys[] = {"ka", "kb", "kc", "kd"};
	char p0[32], p1[32];
	const char *pl[2] = {p0, p1};
	struct fx_refusal why;
	snprintf(p0, sizeof p0, "p%d-0", b);
	snprintf(p1, sizeof p1, "p%d-1", b);
	int rv = fx_publish_idem(f, "default", "ledger", keys[b % 4], pl, 2,
	                         pid, seq, &why);
	if (rv != 0) {
		fail_msg("publish_idempotent batch %d seq %llu: %d %s", b,
		         (unsigned long long)seq, rv, f->message);
	}
}

static uint32_t idem_shard(int b)
{
	static const char *const keys[] = {"ka", "kb", "kc", "kd"};
	return felix_hash_shard(3, true, (const uint8_t *)keys[b % 4], 2);
}

static void test_idempotent(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	struct fx_refusal why;
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "ledger", "{\"shards\":3}"), 0);
	uint64_t pid = 0, pid2 = 0;
	assert_int_equal(fx_producer_init(&f, &pid), 0);
	assert_int_equal(fx_producer_init(&f, &pid2), 0);
	assert_true(pid != 0 && pid2 != 0 && pid != pid2);

	/* Every batch twice (the re-send of an unanswered batch); half way
	 * the node is killed and the last batch is re-sent once more. */
	uint64_t seq[3] = {0, 0, 0};
	for (int b = 0; b < IDEM_BATCHES; b++) {
		uint32_t sh = idem_shard(b);
		idem_send(&f, pid, b, seq[sh]);
		idem_send(&f, pid, b, seq[sh]);
		seq[sh]++;
		if (b == IDEM_BATCHES / 2) {
			fx_close(&f);
			restart(&cl, SIGKILL);
			connect_ok(&f, &loop, &cl);
			assert_int_equal(
			    fx_publish_ready(&f, "default", "warm"), 0);
			idem_send(&f, pid, b, seq[sh] - 1);
		}
	}
	int64_t dups =
	    fx_metric(&cl, 0, "lodestone_felix_idempotent_duplicates_total");
	/* Counted since the restart: the re-send of the batch in flight, then
	 * the second copy of every later batch. */
	assert_int_equal(dups, IDEM_BATCHES - IDEM_BATCHES / 2);

	/* Refusals. */
	uint32_t sh0 = idem_shard(0);
	const char *one[1] = {"x"};
	assert_int_equal(fx_publish_idem(&f, "default", "ledger", "ka", one, 1,
	                                 pid, seq[sh0] + 1, &why),
	                 FELIX_CLIENT_EREFUSED);
	assert_true(why.refused);
	assert_int_equal(why.kind, FELIX_REFUSAL_SEQUENCE_GAP);
	assert_int_equal(why.expected, seq[sh0]);
	assert_int_equal(fx_publish_idem(&f, "default", "ledger", "ka", one, 1,
	                                 12345, 3, &why),
	                 FELIX_CLIENT_EREFUSED);
	assert_true(why.refused);
	assert_int_equal(why.kind, FELIX_REFUSAL_UNKNOWN_PRODUCER);
	/* 66 unkeyed batches of a second producer on shard 0: the first two
	 * fall out of the 64 remembered. */
	for (int j = 0; j < 66; j++) {
		char e[16];
		const char *pe[1] = {e};
		snprintf(e, sizeof e, "e%d", j);
		assert_int_equal(fx_publish_idem(&f, "default", "ledger", NULL,
		                                 pe, 1, pid2, (uint64_t)j,
		                                 &why),
		                 0);
	}
	const char *e0[1] = {"e0"};
	assert_int_equal(fx_publish_idem(&f, "default", "ledger", NULL, e0, 1,
	                                 pid2, 0, &why),
	                 FELIX_CLIENT_EREFUSED);
	assert_int_equal(why.kind, FELIX_REFUSAL_SEQUENCE_EXPIRED);
	const char *e2[1] = {"e2"};
	assert_int_equal(fx_publish_idem(&f, "default", "ledger", NULL, e2, 1,
	                                 pid2, 2, &why),
	                 0);

	/* Each record exactly once, in batch order per shard. */
	uint64_t want[3] = {0, 0, 0};
	for (int b = 0; b < IDEM_BATCHES; b++) {
		want[idem_shard(b)] += 2;
	}
	want[0] += 66;
	static struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	int seen[IDEM_BATCHES][2];
	int seen_e[66];
	memset(seen, 0, sizeof seen);
	memset(seen_e, 0, sizeof seen_e);
	for (uint32_t sh = 0; sh < 3; sh++) {
		assert_int_equal(
		    fx_subscribe(&f, &s, "default", "ledger", sh, &earliest),
		    0);
		assert_int_equal(fx_sub_wait(&s, want[sh]), 0);
		/* A sentinel: nothing more arrives before it. */
		publish_one(&f, "ledger", "end");
		if (sh == 0) {
			assert_int_equal(fx_sub_wait(&s, want[sh] + 1), 0);
			assert_string_equal(s.payloads[want[sh]], "end");
		} else {
			fx_spin(&f, 100);
			assert_int_equal(s.n, want[sh]);
		}
		int last = -1;
		for (uint64_t i = 0; i < want[sh]; i++) {
			int b, k;
			assert_int_equal(s.offsets[i], i);
			if (sscanf(s.payloads[i], "p%d-%d", &b, &k) == 2) {
				assert_int_equal(idem_shard(b), sh);
				assert_int_equal(++seen[b][k], 1);
				assert_true(b >= last);
				last = b;
			} else {
				assert_int_equal(
				    sscanf(s.payloads[i], "e%d", &b), 1);
				assert_int_equal(sh, 0);
				assert_int_equal(++seen_e[b], 1);
			}
		}
		fx_sub_free(&s);
	}
	for (int b = 0; b < IDEM_BATCHES; b++) {
		assert_int_equal(seen[b][0] + seen[b][1], 2);
	}
	for (int j = 0; j < 66; j++) {
		assert_int_equal(seen_e[j], 1);
	}
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_group_queue),
	    cmocka_unit_test(test_group_visibility),
	    cmocka_unit_test(test_counters_restart),
	    cmocka_unit_test(test_idempotent),
	};
	fx_test_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
