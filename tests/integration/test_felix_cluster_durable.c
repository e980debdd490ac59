/* Integration: Felix consumer groups and cache watches on a three-node
 * lodestone --dev cluster (every shard on the three nodes):
 *  - a queue: records published through a node that does not lead the
 *    stream shard, three consumers on the leader get every record exactly
 *    once; a nack redelivers at once and the fifth failure dead-letters;
 *    a claim whose visibility lapsed is redelivered with attempts + 1
 *    (also to a parked long poll, as soon as it lapses); redrive brings a
 *    dead letter back with a fresh count; every group request on another
 *    node is refused with an error naming the leader, never answered with
 *    an empty batch; after the leader is killed the new leader hands out
 *    the unacknowledged claim again (attempts + 1) and nothing acked, and
 *    still lists the dead letters;
 *  - a cache watch: changes written through a follower replay on the
 *    leader from every offset; a watch on the leader reads, the leader is
 *    killed while writes go on, and a re-watch on the new leader from the
 *    last offset seen + 1 is gapless up to a live sentinel, with every
 *    acknowledged write in it; the history replays from every offset on
 *    the new leader too.
 * Times only bound the waits (and check that a lapse wakes a long poll
 * well before its wait ends). */
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

#define NODES 3
#define JOBS 30

/* ---- consumer groups ------------------------------------------------------
 */

static void publish_one(struct fx *f, const char *p)
{
	const char *v[1] = {p};
	int rv = fx_publish(f, "default", "q", NULL, v, 1);
	if (rv != 0) {
		fail_msg("publish: %d %s", rv, f->message);
	}
}

static void poll_one(struct fx *f, uint64_t offset, uint32_t attempts)
{
	struct fx_rec r[4];
	size_t n = 0;
	int rv = fx_group_poll(f, "default", "q", 0, "w", 4, 0, r, 4, &n);
	if (rv != 0) {
		fail_msg("poll: %d %s", rv, f->message);
	}
	assert_int_equal(n, 1);
	assert_int_equal(r[0].offset, offset);
	assert_int_equal(r[0].attempts, attempts);
}

static void settle(struct fx *f, enum felix_msg_type type, uint64_t offset)
{
	int rv = fx_group_settle(f, type, "default", "q", 0, "w", offset);
	if (rv != 0) {
		fail_msg("settle %d of %llu: %d %s", (int)type,
		         (unsigned long long)offset, rv, f->message);
	}
}

/* Every group request through f is refused: not leader, naming leader L
 * once the node knows it (it may learn of a new one a moment late). */
static void refused_elsewhere(struct fx *f, unsigned L)
{
	struct fx_rec r[4];
	uint64_t d[4];
	size_t n = 99;
	char want[32];
	snprintf(want, sizeof want, "led by node %u", L);
	uint64_t t0 = harness_mono_ms();
	while (fx_group_poll(f, "default", "q", 0, "w", 4, 0, r, 4, &n) != 0 &&
	       strstr(f->message, want) == NULL) {
		assert_non_null(strstr(f->message, "not leader"));
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(f, 100);
	}
	/* A long poll too: an error at once, not a wait, not a batch. */
	for (int k = 0; k < 2; k++) {
		n = 99;
		assert_int_not_equal(fx_group_poll(f, "default", "q", 0, "w", 4,
		                                   k ? 5000 : 0, r, 4, &n),
		                     0);
		assert_int_equal(n, 0); /* no batch */
		assert_non_null(strstr(f->message, "not leader"));
		assert_non_null(strstr(f->message, want));
	}
	static const enum felix_msg_type settles[] = {
	    FELIX_MSG_GROUP_ACK, FELIX_MSG_GROUP_NACK, FELIX_MSG_GROUP_DISCARD,
	    FELIX_MSG_GROUP_REDRIVE};
	for (size_t k = 0; k < sizeof settles / sizeof *settles; k++) {
		assert_int_not_equal(
		    fx_group_settle(f, settles[k], "default", "q", 0, "w", 0),
		    0);
		assert_non_null(strstr(f->message, "not leader"));
	}
	n = 99;
	assert_int_not_equal(fx_group_dead(f, "default", "q", 0, "w", d, 4, &n),
	                     0);
	assert_non_null(strstr(f->message, "not leader"));
}

static void test_cluster_queue(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "4", "--felix-group-visibility-ms",
	    "1000",  NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[NODES], c[3];
	char buf[64];
	(void)state;
	fx_start_cluster(&cl, NODES, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "q", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	unsigned L = fx_wait_scope_leader(&cl, 0, "streams", "q", 0);
	assert_true(L != 0);
	unsigned li = L - 1, other = (li + 1) % NODES;
	for (int k = 0; k < 3; k++) {
		fx_connect_ok(&c[k], &loop, &cl, li);
	}

	/* Published through a follower (forwarded), consumed on the
	 * leader by three consumers: every record exactly once. */
	char jobs[JOBS][16];
	const char *pj[JOBS];
	for (int i = 0; i < JOBS; i++) {
		snprintf(jobs[i], sizeof jobs[i], "job-%d", i);
		pj[i] = jobs[i];
	}
	assert_int_equal(fx_publish(&f[other], "default", "q", NULL, pj, JOBS),
	                 0);
	int delivered[JOBS] = {0}, acked = 0;
	for (int it = 0; acked < JOBS; it++) {
		struct fx_rec r[8];
		size_t n = 0;
		struct fx *ck = &c[it % 3];
		assert_true(it < 300);
		int rv =
		    fx_group_poll(ck, "default", "q", 0, "w", 4, 0, r, 8, &n);
		if (rv != 0) {
			fail_msg("poll: %d %s", rv, ck->message);
		}
		for (size_t i = 0; i < n; i++) {
			assert_true(r[i].offset < JOBS);
			assert_int_equal(r[i].attempts, 1);
			snprintf(buf, sizeof buf, "job-%llu",
			         (unsigned long long)r[i].offset);
			assert_string_equal(r[i].payload, buf);
			assert_int_equal(++delivered[r[i].offset], 1);
			settle(ck, FELIX_MSG_GROUP_ACK, r[i].offset);
			acked++;
		}
	}
	/* The other nodes refuse, naming the leader. */
	refused_elsewhere(&f[other], L);
	refused_elsewhere(&f[(li + 2) % NODES], L);

	/* Nacks redeliver at once; the fifth failure dead-letters. */
	publish_one(&f[other], "poison"); /* JOBS */
	for (uint32_t att = 1; att <= 5; att++) {
		poll_one(&c[att % 3], JOBS, att);
		settle(&c[att % 3], FELIX_MSG_GROUP_NACK, JOBS);
	}
	uint64_t d[8];
	size_t nd = 0;
	assert_int_equal(
	    fx_group_dead(&c[0], "default", "q", 0, "w", d, 8, &nd), 0);
	assert_int_equal(nd, 1);
	assert_int_equal(d[0], JOBS);

	/* A lapsed claim comes back with attempts + 1; a parked long poll
	 * gets it when it lapses, not at the end of its wait. */
	publish_one(&f[other], "slow"); /* JOBS + 1 */
	poll_one(&c[0], JOBS + 1, 1);
	fx_spin(&c[0], 1100);
	poll_one(&c[1], JOBS + 1, 2);
	struct fx_apoll a;
	memset(&a, 0, sizeof a);
	uint64_t t0 = harness_mono_ms();
	assert_int_equal(felix_client_group_poll(c[2].c, "default", "q", 0, "w",
	                                         4, 20000, fx_apoll_cb, &a),
	                 0);
	assert_int_equal(felix_client_run(&loop, &a.done, 25000), 0);
	assert_int_equal(a.status, 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.rec[0].offset, JOBS + 1);
	assert_int_equal(a.rec[0].attempts, 3);
	assert_true(harness_mono_ms() - t0 < 10000);

	/* Redrive: the dead letter back with a fresh count. */
	settle(&c[1], FELIX_MSG_GROUP_REDRIVE, JOBS);
	poll_one(&c[1], JOBS, 1);
	settle(&c[1], FELIX_MSG_GROUP_ACK, JOBS);
	/* A second dead letter for the failover to keep. */
	publish_one(&f[other], "junk"); /* JOBS + 2 */
	for (uint32_t att = 1; att <= 5; att++) {
		poll_one(&c[0], JOBS + 2, att);
		settle(&c[0], FELIX_MSG_GROUP_NACK, JOBS + 2);
	}

	/* The leader dies with JOBS + 1 claimed (attempt 3) and not acked. */
	for (int k = 0; k < 3; k++) {
		fx_close(&c[k]);
	}
	fx_close(&f[li]);
	assert_int_equal(harness_node_signal(&cl, li, SIGKILL, NULL), 0);
	unsigned L2 = fx_wait_scope_leader(&cl, other, "streams", "q", L);
	assert_true(L2 != 0);
	unsigned l2 = L2 - 1;
	refused_elsewhere(&f[3 - li - l2], L2);
	/* Only the unacknowledged claim, after its lapse, attempts + 1. */
	struct fx_rec r[8];
	size_t n = 0;
	t0 = harness_mono_ms();
	for (;;) {
		n = 0;
		int rv = fx_group_poll(&f[l2], "default", "q", 0, "w", 8, 0, r,
		                       8, &n);
		if (rv == 0 && n > 0) {
			break;
		}
		/* Leadership may still be settling, or the claim has not
		 * lapsed yet. */
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&f[l2], 200);
	}
	assert_int_equal(n, 1);
	assert_int_equal(r[0].offset, JOBS + 1);
	assert_int_equal(r[0].attempts, 4);
	settle(&f[l2], FELIX_MSG_GROUP_ACK, JOBS + 1);
	nd = 0;
	assert_int_equal(
	    fx_group_dead(&f[l2], "default", "q", 0, "w", d, 8, &nd), 0);
	assert_int_equal(nd, 1);
	assert_int_equal(d[0], JOBS + 2);
	n = 9;
	assert_int_equal(
	    fx_group_poll(&f[l2], "default", "q", 0, "w", 8, 0, r, 8, &n), 0);
	assert_int_equal(n, 0);

	for (unsigned i = 0; i < NODES; i++) {
		if (i != li) {
			fx_close(&f[i]);
		}
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* ---- cache watches --------------------------------------------------------
 */

#define HMAX 128

/* The changes of the cache shard in offset order (every write is a put). */
struct history {
	unsigned n;
	char key[HMAX][16];
	char value[HMAX][16];
};

static struct history hist;

/* A put that must be acknowledged (retried through start-up). */
static void put_acked(struct fx *f, const char *key, const char *value)
{
	int rv = fx_cache_put(f, "wc", key, value, false, 0);
	if (rv != 0) {
		fail_msg("cache_put: %d %s", rv, f->message);
	}
	assert_true(hist.n < HMAX);
	snprintf(hist.key[hist.n], sizeof hist.key[0], "%s", key);
	snprintf(hist.value[hist.n], sizeof hist.value[0], "%s", value);
	hist.n++;
}

/* A watch of every key from `from` yields exactly hist[from..]. */
static void replay_from(struct fx *f, uint64_t from)
{
	static struct fx_watch w;
	struct felix_watch_request req;
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = from;
	int rv = fx_watch(f, &w, "wc", &req);
	if (rv != 0) {
		fail_msg("watch from %llu: %d %s", (unsigned long long)from, rv,
		         w.message);
	}
	assert_int_equal(w.info.resume_offset, hist.n);
	assert_int_equal(fx_watch_wait(&w, hist.n - from), 0);
	fx_spin(f, 50);
	assert_int_equal(w.n, hist.n - from);
	for (uint64_t i = 0; i < w.n; i++) {
		assert_int_equal(w.offsets[i], from + i);
		assert_string_equal(w.keys[i], hist.key[from + i]);
		assert_string_equal(w.values[i], hist.value[from + i]);
	}
	fx_watch_free(&w);
}

static void test_cluster_watch(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[NODES];
	static struct fx_watch w, w2;
	struct felix_watch_request req;
	char k[16], v[16];
	(void)state;
	memset(&hist, 0, sizeof hist);
	fx_start_cluster(&cl, NODES, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "wc", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	unsigned L = fx_wait_scope_leader(&cl, 0, "caches", "wc", 0);
	assert_true(L != 0);
	unsigned li = L - 1, other = (li + 1) % NODES;

	/* Written through a follower; replayed on the leader from every
	 * offset. */
	for (int i = 0; i < 20; i++) {
		snprintf(k, sizeof k, "k%d", i % 4);
		snprintf(v, sizeof v, "v%d", i);
		put_acked(&f[other], k, v);
	}
	for (uint64_t from = 0; from <= hist.n; from++) {
		replay_from(&f[li], from);
	}

	/* A live watch on the leader; the leader dies mid-stream. */
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = 0;
	assert_int_equal(fx_watch(&f[li], &w, "wc", &req), 0);
	for (int i = 20; i < 30; i++) {
		snprintf(k, sizeof k, "k%d", i % 4);
		snprintf(v, sizeof v, "v%d", i);
		put_acked(&f[other], k, v);
	}
	assert_int_equal(fx_watch_wait(&w, hist.n), 0);
	uint64_t seen = w.n;
	assert_int_equal(w.offsets[seen - 1], seen - 1);
	assert_int_equal(harness_node_signal(&cl, li, SIGKILL, NULL), 0);
	fx_watch_free(&w);
	fx_close(&f[li]);
	/* Writes go on through a survivor; an unanswered one may or may not
	 * have happened, so it is re-sent under a new value: the history
	 * read back decides. */
	unsigned acked_from = hist.n;
	char acked[10][16];
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof k, "k%d", i % 4);
		uint64_t t0 = harness_mono_ms();
		for (int attempt = 0;; attempt++) {
			snprintf(v, sizeof v, "a%d.%d", i, attempt);
			if (fx_cache_put(&f[other], "wc", k, v, false, 0) ==
			    0) {
				break;
			}
			assert_true(harness_mono_ms() - t0 < 30000);
			fx_spin(&f[other], 200);
		}
		snprintf(acked[i], sizeof acked[i], "%s", v);
	}
	unsigned L2 = fx_wait_scope_leader(&cl, other, "caches", "wc", L);
	assert_true(L2 != 0);
	unsigned l2 = L2 - 1;
	/* Re-watch on the new leader from the last offset seen + 1. */
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = seen;
	uint64_t t0 = harness_mono_ms();
	while (fx_watch(&f[l2], &w2, "wc", &req) != 0) {
		/* Leadership may still be settling. */
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_watch_free(&w2);
		fx_spin(&f[l2], 200);
	}
	uint64_t tail = w2.info.resume_offset;
	assert_true(tail >= seen + 10);
	put_acked(&f[other], "sentinel", "end"); /* offset tail */
	assert_int_equal(fx_watch_wait(&w2, tail - seen + 1), 0);
	fx_spin(&f[l2], 50);
	assert_int_equal(w2.n, tail - seen + 1);
	for (uint64_t i = 0; i < w2.n; i++) {
		assert_int_equal(w2.offsets[i], seen + i); /* gapless */
	}
	assert_string_equal(w2.keys[w2.n - 1], "sentinel");
	/* Every acknowledged write is there, in order. */
	unsigned j = 0;
	for (uint64_t i = 0; i + 1 < w2.n && j < 10; i++) {
		if (strcmp(w2.values[i], acked[j]) == 0) {
			j++;
		}
	}
	assert_int_equal(j, 10);
	/* The history as the new leader has it (the unsure writes too). */
	hist.n = acked_from;
	for (uint64_t i = 0; i + 1 < w2.n; i++) {
		assert_true(hist.n < HMAX);
		snprintf(hist.key[hist.n], sizeof hist.key[0], "%s",
		         w2.keys[i]);
		snprintf(hist.value[hist.n], sizeof hist.value[0], "%s",
		         w2.values[i]);
		hist.n++;
	}
	snprintf(hist.key[hist.n], sizeof hist.key[0], "sentinel");
	snprintf(hist.value[hist.n], sizeof hist.value[0], "end");
	hist.n++;
	fx_watch_free(&w2);
	for (uint64_t from = 0; from <= hist.n; from += 3) {
		replay_from(&f[l2], from);
	}
	replay_from(&f[l2], hist.n);

	for (unsigned i = 0; i < NODES; i++) {
		if (i != li) {
			fx_close(&f[i]);
		}
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* A leader paused long enough that the others compact their logs past it
 * comes back through a snapshot import: its live watch ends lagged at the
 * last change it delivered (re-watching from there is gapless) and its
 * live subscription catches up from the store; neither skips the changes
 * the import brought (found by the jepsen watch workload). */
static void test_cluster_import_live(void **state)
{
	static const char *const args[] = {"--dev", "--shards",
	                                   "4",     "--snapshot-threshold",
	                                   "8",     "--snapshot-trailing",
	                                   "2",     NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[NODES];
	static struct fx_watch w;
	static struct fx_sub sub;
	struct felix_watch_request req;
	char k[16], v[16];
	(void)state;
	fx_start_cluster(&cl, NODES, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "wi", "{\"shards\":1}"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "si", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	unsigned li = fx_wait_scope_leader(&cl, 0, "caches", "wi", 0) - 1;
	unsigned si = fx_wait_scope_leader(&cl, 0, "streams", "si", 0) - 1;
	assert_true(li < NODES && si < NODES);
	/* A node that leads neither writes throughout. */
	unsigned wi = 0;
	while (wi == li || wi == si) {
		wi++;
	}

	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = 0;
	assert_int_equal(fx_watch(&f[li], &w, "wi", &req), 0);
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	assert_int_equal(
	    fx_subscribe(&f[si], &sub, "default", "si", 0, &earliest), 0);
	int acked = 0;
	for (int i = 0; i < 60; i++) {
		if (i == 5) {
			assert_int_equal(fx_watch_wait(&w, 5), 0);
			/* Pause both leaders: the others elect, write and
			 * compact their logs past them. */
			assert_int_equal(
			    harness_node_signal(&cl, li, SIGSTOP, NULL), 0);
			if (si != li) {
				assert_int_equal(
				    harness_node_signal(&cl, si, SIGSTOP, NULL),
				    0);
			}
		}
		snprintf(k, sizeof k, "k%d", i % 3);
		snprintf(v, sizeof v, "v%d", i);
		uint64_t t0 = harness_mono_ms();
		while (fx_cache_put(&f[wi], "wi", k, v, false, 0) != 0) {
			assert_true(harness_mono_ms() - t0 < 30000);
			fx_spin(&f[wi], 200);
		}
		const char *p1[1] = {v};
		t0 = harness_mono_ms();
		while (fx_publish(&f[wi], "default", "si", NULL, p1, 1) != 0) {
			assert_true(harness_mono_ms() - t0 < 30000);
			fx_spin(&f[wi], 200);
		}
		acked++;
	}
	assert_int_equal(harness_node_signal(&cl, li, SIGCONT, NULL), 0);
	if (si != li) {
		assert_int_equal(harness_node_signal(&cl, si, SIGCONT, NULL),
		                 0);
	}

	/* The watch: gapless from 0, then either every change or a lagged
	 * end exactly where it stopped. */
	uint64_t t0 = harness_mono_ms();
	while (!w.lagged && !w.ended && w.n < (uint64_t)acked) {
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&f[li], 100);
	}
	for (uint64_t i = 0; i < w.n; i++) {
		assert_int_equal(w.offsets[i], i);
	}
	if (w.lagged) {
		assert_int_equal(w.resume_from, w.n);
	} else {
		assert_true(w.n >= (uint64_t)acked);
	}
	/* The subscription: offsets contiguous, at least every record
	 * (a retried publish may have landed twice). */
	t0 = harness_mono_ms();
	while (sub.n < (uint64_t)acked && !sub.ended) {
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&f[si], 100);
	}
	assert_true(sub.n >= (uint64_t)acked);
	for (uint64_t i = 0; i < sub.n; i++) {
		assert_int_equal(sub.offsets[i], i);
	}
	print_message("import: watch %s after %llu changes; subscription "
	              "%llu records\n",
	              w.lagged ? "ended lagged" : "stayed live",
	              (unsigned long long)w.n, (unsigned long long)sub.n);
	fx_watch_free(&w);
	fx_sub_free(&sub);
	for (unsigned i = 0; i < NODES; i++) {
		fx_close(&f[i]);
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cluster_queue),
	    cmocka_unit_test(test_cluster_watch),
	    cmocka_unit_test(test_cluster_import_live),
	};
	fx_test_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
