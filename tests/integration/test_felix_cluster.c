/* Integration: the Felix broker's durable features on a three-node
 * lodestone --dev cluster (every shard on the three nodes):
 *  - consumer groups are served by the shard's leader only: a poll or an
 *    ack on another node is refused with an error naming the leader, never
 *    answered with an empty batch (subscriptions and cache watches alike);
 *  - publish_idempotent on a node that does not lead the shard is refused
 *    with not_leader naming the leader's node id and client address;
 *  - the leader is killed (SIGKILL): a batch re-sent to the new leader is
 *    answered as a duplicate and appended once (producer state is
 *    replicated); the group's acknowledgements survive the failover;
 *    counters and caches answer from any node (forwarded);
 *  - the node comes back, then the counters' own shard leader is killed:
 *    every sum equals the acknowledged adds.
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

#define NODES 3

/* The leader every node names for the first shard of kind/name, stable
 * over three looks 200 ms apart: on a loaded machine an election or a
 * leadership move can follow the first answer. */
static unsigned wait_agreed_leader(struct harness_cluster *cl, const char *kind,
                                   const char *name)
{
	uint64_t t0 = harness_mono_ms();
	unsigned same = 0, last = 0;
	while (same < 3) {
		unsigned l = fx_scope_leader(cl, 0, kind, name);
		bool agreed = l != 0;
		for (unsigned i = 1; i < NODES && agreed; i++) {
			agreed = fx_scope_leader(cl, i, kind, name) == l;
		}
		same = agreed && l == last ? same + 1 : agreed ? 1 : 0;
		last = agreed ? l : 0;
		if (harness_mono_ms() - t0 > 30000) {
			fail_msg("no agreed leader for %s %s", kind, name);
		}
		harness_nap(200);
	}
	return last;
}

static void idem(struct fx *f, uint64_t pid, int b, uint64_t seq)
{
	char p[32];
	const char *pl[1] = {p};
	struct fx_refusal why;
	snprintf(p, sizeof p, "b%d", b);
	int rv =
	    fx_publish_idem(f, "default", "cq", NULL, pl, 1, pid, seq, &why);
	if (rv != 0) {
		fail_msg("publish_idempotent b%d: %d %s", b, rv, f->message);
	}
}

static void test_cluster_groups_producers_counters(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[NODES];
	(void)state;
	fx_start_cluster(&cl, NODES, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "cq", "{\"shards\":1}"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "cc", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	unsigned L = wait_agreed_leader(&cl, "streams", "cq");
	unsigned li = L - 1, other = (li + 1) % NODES;

	/* Groups: the leader only. */
	const char *p3[3] = {"g0", "g1", "g2"};
	assert_int_equal(fx_publish(&f[other], "default", "cq", NULL, p3, 3),
	                 0); /* forwarded */
	struct fx_rec r[8];
	size_t n = 0;
	char want[64];
	snprintf(want, sizeof want, "node %u", L);
	assert_int_not_equal(
	    fx_group_poll(&f[other], "default", "cq", 0, "g", 8, 0, r, 8, &n),
	    0);
	assert_non_null(strstr(f[other].message, "not leader"));
	assert_non_null(strstr(f[other].message, want));
	assert_int_equal(
	    fx_group_poll(&f[li], "default", "cq", 0, "g", 8, 0, r, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_int_not_equal(fx_group_settle(&f[other], FELIX_MSG_GROUP_ACK,
	                                     "default", "cq", 0, "g", 0),
	                     0);
	assert_non_null(strstr(f[other].message, "not leader"));
	for (uint64_t o = 0; o < 3; o++) {
		assert_int_equal(fx_group_settle(&f[li], FELIX_MSG_GROUP_ACK,
		                                 "default", "cq", 0, "g", o),
		                 0);
	}

	/* Subscriptions and watches are served by the leader too. */
	static struct fx_sub sub;
	assert_int_not_equal(
	    fx_subscribe(&f[other], &sub, "default", "cq", 0, NULL), 0);
	assert_non_null(strstr(sub.message, "not leader"));
	assert_non_null(strstr(sub.message, want));
	unsigned Lc = fx_wait_scope_leader(&cl, 0, "caches", "cc", 0);
	assert_true(Lc != 0);
	static struct fx_watch wt;
	struct felix_watch_request req;
	memset(&req, 0, sizeof req);
	req.prefix = "";
	assert_int_not_equal(fx_watch(&f[Lc % NODES], &wt, "cc", &req), 0);
	assert_non_null(strstr(wt.message, "not leader"));
	assert_int_equal(fx_watch(&f[Lc - 1], &wt, "cc", &req), 0);
	fx_watch_free(&wt);

	/* Idempotent producers: not_leader elsewhere, naming the leader. */
	uint64_t pid = 0;
	assert_int_equal(fx_producer_init(&f[other], &pid), 0);
	struct fx_refusal why;
	const char *one[1] = {"x"};
	assert_int_equal(fx_publish_idem(&f[other], "default", "cq", NULL, one,
	                                 1, pid, 0, &why),
	                 FELIX_CLIENT_EREFUSED);
	assert_true(why.refused);
	assert_int_equal(why.kind, FELIX_REFUSAL_NOT_LEADER);
	char id[16], addr[64];
	snprintf(id, sizeof id, "%u", L);
	snprintf(addr, sizeof addr, "127.0.0.1:%u", cl.nodes[li].felix);
	assert_string_equal(why.node_id, id);
	assert_string_equal(why.addr, addr);
	for (int b = 0; b < 10; b++) {
		idem(&f[li], pid, b, (uint64_t)b);
		idem(&f[li], pid, b, (uint64_t)b);
	}

	/* Counters through a node that may not lead their shard. */
	int64_t sums[4] = {0};
	char key[16];
	for (int i = 0; i < 40; i++) {
		int64_t sum = 0;
		snprintf(key, sizeof key, "n%d", i % 4);
		assert_int_equal(
		    fx_counter_add(&f[i % NODES], "cc", key, i + 1, &sum), 0);
		sums[i % 4] += i + 1;
		assert_int_equal(sum, sums[i % 4]);
	}
	assert_int_equal(fx_cache_put(&f[other], "cc", "k", "v", false, 0), 0);

	/* Fail over: the stream shard's leader dies. */
	fx_close(&f[li]);
	assert_int_equal(harness_node_signal(&cl, li, SIGKILL, NULL), 0);
	unsigned L2 = fx_wait_scope_leader(&cl, other, "streams", "cq", L);
	assert_true(L2 != 0);
	unsigned l2 = L2 - 1;
	/* The last batch again (its answer "lost"): a duplicate. */
	int64_t dup0 =
	    fx_metric(&cl, l2, "lodestone_felix_idempotent_duplicates_total");
	uint64_t t0 = harness_mono_ms();
	for (;;) {
		struct fx_refusal w2;
		char p[8] = "b9";
		const char *pl[1] = {p};
		int rv = fx_publish_idem(&f[l2], "default", "cq", NULL, pl, 1,
		                         pid, 9, &w2);
		if (rv == 0) {
			break;
		}
		/* Leadership may still be settling: the re-send is safe. */
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&f[l2], 200);
	}
	for (int b = 10; b < 15; b++) {
		idem(&f[l2], pid, b, (uint64_t)b);
		idem(&f[l2], pid, b, (uint64_t)b);
	}
	/* b9 and the second copies (more when a re-send met a leader that
	 * had applied it without answering). */
	assert_true(
	    fx_metric(&cl, l2, "lodestone_felix_idempotent_duplicates_total") -
	        dup0 >=
	    6);

	/* Each record once: g0..g2, then b0..b14. */
	static struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	assert_int_equal(
	    fx_subscribe(&f[l2], &s, "default", "cq", 0, &earliest), 0);
	assert_int_equal(fx_sub_wait(&s, 18), 0);
	const char *sentinel[1] = {"end"};
	assert_int_equal(fx_publish(&f[l2], "default", "cq", NULL, sentinel, 1),
	                 0);
	assert_int_equal(fx_sub_wait(&s, 19), 0);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(s.payloads[i], p3[i]);
	}
	for (int b = 0; b < 15; b++) {
		char p[8];
		snprintf(p, sizeof p, "b%d", b);
		assert_string_equal(s.payloads[3 + b], p);
	}
	assert_string_equal(s.payloads[18], "end");
	fx_sub_free(&s);

	/* The group's acknowledgements survived: only the new record. */
	n = 9;
	assert_int_equal(
	    fx_group_poll(&f[l2], "default", "cq", 0, "g", 32, 0, r, 8, &n), 0);
	assert_true(n >= 1);
	assert_int_equal(r[0].offset, 3);
	assert_int_equal(r[0].attempts, 1);

	/* Counters and the cache from both survivors. */
	for (unsigned i = 0; i < NODES; i++) {
		if (i == li) {
			continue;
		}
		for (int k = 0; k < 4; k++) {
			int64_t v = 0;
			bool found = false;
			int rv;
			snprintf(key, sizeof key, "n%d", k);
			t0 = harness_mono_ms();
			while ((rv = fx_counter_get(&f[i], "cc", key, &v,
			                            &found)) != 0) {
				assert_true(harness_mono_ms() - t0 < 30000);
				fx_spin(&f[i], 200);
			}
			assert_true(found);
			assert_int_equal(v, sums[k]);
		}
		char buf[16];
		bool found = false;
		assert_int_equal(
		    fx_cache_get(&f[i], "cc", "k", buf, sizeof buf, &found), 0);
		assert_true(found);
		assert_string_equal(buf, "v");
	}
	int64_t sum = 0;
	assert_int_equal(fx_counter_add(&f[other], "cc", "n0", 1, &sum), 0);
	sums[0]++;
	assert_int_equal(sum, sums[0]);

	/* The killed node comes back; then the counters' own shard leader
	 * dies: the sums are still there. */
	assert_int_equal(harness_node_start(&cl, li), 0);
	assert_int_equal(harness_node_wait_healthy(&cl, li, 15000), 0);
	fx_connect_ok(&f[li], &loop, &cl, li);
	fx_wait_ready(&f[li]);
	fx_wait_settled(&cl, other);
	unsigned Lc2 = fx_wait_scope_leader(&cl, other, "caches", "cc", 0);
	assert_true(Lc2 != 0);
	unsigned lc = Lc2 - 1, alive = (lc + 1) % NODES;
	fx_close(&f[lc]);
	assert_int_equal(harness_node_signal(&cl, lc, SIGKILL, NULL), 0);
	assert_true(fx_wait_scope_leader(&cl, alive, "caches", "cc", Lc2) != 0);
	for (unsigned i = 0; i < NODES; i++) {
		if (i == lc) {
			continue;
		}
		for (int k = 0; k < 4; k++) {
			int64_t v = 0;
			bool found = false;
			snprintf(key, sizeof key, "n%d", k);
			t0 = harness_mono_ms();
			while (fx_counter_get(&f[i], "cc", key, &v, &found) !=
			       0) {
				assert_true(harness_mono_ms() - t0 < 30000);
				fx_spin(&f[i], 200);
			}
			assert_true(found);
			assert_int_equal(v, sums[k]);
		}
	}
	t0 = harness_mono_ms();
	int64_t unsure = 0;
	while (fx_counter_add(&f[alive], "cc", "n1", 10, &sum) != 0) {
		/* An add that failed may or may not have counted. */
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&f[alive], 200);
		unsure += 10;
	}
	assert_true(sum >= sums[1] + 10 && sum <= sums[1] + 10 + unsure);

	for (unsigned i = 0; i < NODES; i++) {
		fx_close(&f[i]);
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cluster_groups_producers_counters),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
