/* raft/quiesce.c: when an idle leader quiesces, when a follower follows
 * it, which messages and connection events wake a quiet replica; and a
 * seeded model of three replicas checking that a quiet group is never
 * left without a replica that ticks once its leader's node is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "raft/quiesce.h"

#define IDLE 500

/* A leader of 3 voters at term 5, log ending at 40, all of it committed,
 * applied and matched. */
static struct quiesce_leader_view idle_view(void)
{
	struct quiesce_leader_view v;
	memset(&v, 0, sizeof v);
	v.term = 5;
	v.last_index = v.commit_index = v.applied_index = 40;
	v.n_voters = 3;
	v.n = 2;
	for (unsigned i = 0; i < 2; i++) {
		v.servers[i].id = 2 + i;
		v.servers[i].voter = true;
		v.servers[i].live = true;
		v.servers[i].match_index = 40;
	}
	return v;
}

static void test_leader_waits_idle_ms(void **state)
{
	struct quiesce q = {0};
	struct quiesce_leader_view v = idle_view();
	(void)state;

	assert_int_equal(quiesce_leader_poll(&q, &v, 1000, IDLE), QUIESCE_STAY);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + IDLE - 1, IDLE),
	                 QUIESCE_STAY);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + IDLE, IDLE),
	                 QUIESCE_NOW);
	/* Once quiet, never again. */
	q.quiet = true;
	assert_int_equal(quiesce_leader_poll(&q, &v, 99999, IDLE),
	                 QUIESCE_STAY);
}

static void test_leader_streak_restarts(void **state)
{
	struct quiesce q = {0};
	struct quiesce_leader_view v = idle_view();
	(void)state;

	assert_int_equal(quiesce_leader_poll(&q, &v, 1000, IDLE), QUIESCE_STAY);
	/* A new entry (committed everywhere by the next poll) restarts the
	 * streak: the followers have not heard its commit yet. */
	v.last_index = v.commit_index = v.applied_index = 41;
	v.servers[0].match_index = v.servers[1].match_index = 41;
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + IDLE, IDLE),
	                 QUIESCE_STAY);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + 2 * IDLE, IDLE),
	                 QUIESCE_NOW);
	/* So does a new term. */
	memset(&q, 0, sizeof q);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000, IDLE), QUIESCE_STAY);
	v.term = 6;
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + IDLE, IDLE),
	                 QUIESCE_STAY);
	/* And a busy poll in between. */
	memset(&q, 0, sizeof q);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000, IDLE), QUIESCE_STAY);
	v.busy = true;
	assert_int_equal(quiesce_leader_poll(&q, &v, 1100, IDLE), QUIESCE_STAY);
	v.busy = false;
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + IDLE, IDLE),
	                 QUIESCE_STAY);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1100 + IDLE, IDLE),
	                 QUIESCE_STAY);
	assert_int_equal(quiesce_leader_poll(&q, &v, 1000 + 2 * IDLE, IDLE),
	                 QUIESCE_NOW);
}

/* Polls twice IDLE apart from a fresh state. */
static int settled(struct quiesce_leader_view v)
{
	struct quiesce q = {0};
	quiesce_leader_poll(&q, &v, 1000, IDLE);
	return quiesce_leader_poll(&q, &v, 1000 + IDLE, IDLE);
}

static void test_leader_conditions(void **state)
{
	struct quiesce_leader_view v;
	(void)state;

	v = idle_view();
	assert_int_equal(settled(v), QUIESCE_NOW);
	v = idle_view();
	v.busy = true;
	assert_int_equal(settled(v), QUIESCE_STAY);
	v = idle_view();
	v.commit_index = 39; /* an entry not committed */
	assert_int_equal(settled(v), QUIESCE_STAY);
	v = idle_view();
	v.applied_index = 39; /* not applied */
	assert_int_equal(settled(v), QUIESCE_STAY);
	v = idle_view();
	v.servers[1].match_index = 39; /* a live follower behind */
	assert_int_equal(settled(v), QUIESCE_STAY);
	/* A non-voter behind keeps it awake too (it is being caught up). */
	v = idle_view();
	v.n = 3;
	v.servers[2].id = 4;
	v.servers[2].live = true;
	v.servers[2].match_index = 10;
	assert_int_equal(settled(v), QUIESCE_STAY);
	/* A follower whose node is down is left out... */
	v = idle_view();
	v.servers[1].live = false;
	v.servers[1].match_index = 12;
	assert_int_equal(settled(v), QUIESCE_NOW);
	/* ...but not a majority of voters. */
	v = idle_view();
	v.servers[0].live = v.servers[1].live = false;
	assert_int_equal(settled(v), QUIESCE_STAY);
	/* 5 voters: 3 live are enough, 2 are not. */
	v = idle_view();
	v.n_voters = 5;
	v.n = 4;
	for (unsigned i = 2; i < 4; i++) {
		v.servers[i] = v.servers[0];
		v.servers[i].id = 4 + i;
		v.servers[i].live = false;
	}
	assert_int_equal(settled(v), QUIESCE_NOW);
	v.servers[1].live = false;
	assert_int_equal(settled(v), QUIESCE_STAY);
	/* A single voter with nobody else quiesces. */
	v = idle_view();
	v.n = 0;
	v.n_voters = 1;
	assert_int_equal(settled(v), QUIESCE_NOW);
	/* More servers than the view holds: never. */
	v = idle_view();
	v.n = QUIESCE_MAX_SERVERS + 1;
	assert_int_equal(settled(v), QUIESCE_STAY);
}

static void test_follower_accept(void **state)
{
	struct quiesce_follower_view f = {.follower = true,
	                                  .leader_id = 1,
	                                  .term = 5,
	                                  .last_index = 40,
	                                  .commit_index = 40};
	struct quiesce_follower_view x;
	(void)state;

	assert_true(quiesce_follower_accept(&f, 1, 5, 40));
	assert_false(
	    quiesce_follower_accept(&f, 2, 5, 40)); /* not its leader */
	assert_false(quiesce_follower_accept(&f, 0, 5, 40));
	assert_false(quiesce_follower_accept(&f, 1, 6, 40)); /* other term */
	assert_false(quiesce_follower_accept(&f, 1, 5, 41)); /* log behind */
	assert_false(quiesce_follower_accept(&f, 1, 5, 39)); /* log ahead */
	x = f;
	x.commit_index = 39; /* has not heard the last commit */
	assert_false(quiesce_follower_accept(&x, 1, 5, 40));
	x = f;
	x.follower = false; /* a candidate */
	assert_false(quiesce_follower_accept(&x, 1, 5, 40));
	x = f;
	x.busy = true; /* installing a snapshot */
	assert_false(quiesce_follower_accept(&x, 1, 5, 40));
	x = f;
	x.leader_id = 0; /* forgot its leader (expedited election) */
	assert_false(quiesce_follower_accept(&x, 1, 5, 40));
}

static void test_wake_on_peer(void **state)
{
	(void)state;
	/* A follower wakes when its leader's node drops, not otherwise. */
	assert_true(quiesce_wake_on_peer(QUIESCE_FOLLOWER, 1, true, 1, false));
	assert_false(quiesce_wake_on_peer(QUIESCE_FOLLOWER, 1, true, 2, false));
	assert_false(quiesce_wake_on_peer(QUIESCE_FOLLOWER, 1, true, 1, true));
	/* A leader wakes when a member's node comes back. */
	assert_true(quiesce_wake_on_peer(QUIESCE_LEADER, 0, true, 3, true));
	assert_false(quiesce_wake_on_peer(QUIESCE_LEADER, 0, false, 3, true));
	assert_false(quiesce_wake_on_peer(QUIESCE_LEADER, 0, true, 3, false));
	assert_false(quiesce_wake_on_peer(0, 0, true, 3, true));
}

static void test_msg_wakes(void **state)
{
	struct quiesce_msg_view l = {.role = QUIESCE_LEADER,
	                             .term = 5,
	                             .last_index = 40,
	                             .commit_index = 40,
	                             .kind = QUIESCE_MSG_APPEND_RESULT,
	                             .from = 2,
	                             .msg_term = 5,
	                             .msg_index = 40};
	struct quiesce_msg_view f = {.role = QUIESCE_FOLLOWER,
	                             .term = 5,
	                             .last_index = 40,
	                             .commit_index = 40,
	                             .leader_id = 1,
	                             .kind = QUIESCE_MSG_APPEND,
	                             .from = 1,
	                             .msg_term = 5,
	                             .msg_index = 40,
	                             .msg_commit = 40};
	struct quiesce_msg_view x;
	(void)state;

	/* The answer to the last heartbeat, and the heartbeat itself. */
	assert_false(quiesce_msg_wakes(&l));
	assert_false(quiesce_msg_wakes(&f));
	x = l;
	x.msg_rejected = true;
	assert_true(quiesce_msg_wakes(&x));
	x = l;
	x.msg_index = 39; /* a follower behind */
	assert_true(quiesce_msg_wakes(&x));
	x = l;
	x.msg_term = 6; /* a higher term */
	assert_true(quiesce_msg_wakes(&x));
	x = l;
	x.kind = QUIESCE_MSG_OTHER; /* a vote request, say */
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.msg_entries = 1; /* a proposal */
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.from = 3; /* another leader */
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.msg_term = 6;
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.msg_commit = 41; /* a commit it has not seen */
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.msg_index = 39; /* a truncation or a retry */
	assert_true(quiesce_msg_wakes(&x));
	/* Results at a follower, appends at a leader: always. */
	x = f;
	x.kind = QUIESCE_MSG_APPEND_RESULT;
	assert_true(quiesce_msg_wakes(&x));
	x = l;
	x.kind = QUIESCE_MSG_APPEND;
	assert_true(quiesce_msg_wakes(&x));
	x = f;
	x.role = 0; /* a candidate */
	assert_true(quiesce_msg_wakes(&x));
}

/* A model of one group on nodes 1..3, leader on node 1: random
 * quiescence rounds, node-down events and restarts. Whenever node 1 is
 * down, every quiet follower must have been woken by the down event
 * (quiesce_wake_on_peer), so some live replica ticks and can elect. */
static void test_model_leader_loss(void **state)
{
	unsigned seed = 12345;
	(void)state;
	for (unsigned round = 0; round < 2000; round++) {
		bool quiet[4] = {false, false, false, false};
		bool up[4] = {false, true, true, true};
		unsigned steps = 1 + (unsigned)(rand_r(&seed) % 8);
		for (unsigned s = 0; s < steps; s++) {
			unsigned ev = (unsigned)(rand_r(&seed) % 3);
			if (ev == 0 && up[1]) {
				/* The leader quiesces; live followers that
				 * match accept. */
				struct quiesce_follower_view f = {
				    .follower = true,
				    .leader_id = 1,
				    .term = 5,
				    .last_index = 40,
				    .commit_index = 40};
				quiet[1] = true;
				for (unsigned n = 2; n <= 3; n++) {
					if (up[n] && quiesce_follower_accept(
					                 &f, 1, 5, 40)) {
						quiet[n] = true;
					}
				}
			} else if (ev == 1 && up[1]) {
				/* The leader's node dies: the others see its
				 * connection drop. */
				up[1] = false;
				for (unsigned n = 2; n <= 3; n++) {
					if (quiet[n] && quiesce_wake_on_peer(
					                    QUIESCE_FOLLOWER, 1,
					                    true, 1, false)) {
						quiet[n] = false;
					}
				}
			} else if (ev == 2) {
				/* A follower restarts: it starts ticking; a
				 * quiet leader wakes on its connection. */
				unsigned n = 2 + (unsigned)(rand_r(&seed) % 2);
				quiet[n] = false;
				if (up[1] && quiet[1] &&
				    quiesce_wake_on_peer(QUIESCE_LEADER, 0,
				                         true, n, true)) {
					quiet[1] = false;
				}
			}
			if (!up[1]) {
				assert_false(quiet[2]);
				assert_false(quiet[3]);
			}
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_leader_waits_idle_ms),
	    cmocka_unit_test(test_leader_streak_restarts),
	    cmocka_unit_test(test_leader_conditions),
	    cmocka_unit_test(test_follower_accept),
	    cmocka_unit_test(test_wake_on_peer),
	    cmocka_unit_test(test_msg_wakes),
	    cmocka_unit_test(test_model_leader_loss),
	};
	return cmocka_run_group_tests_name("raft_quiesce", tests, NULL, NULL);
}
