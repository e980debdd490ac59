/* The pure parts of membership changes: target placement from the
 * membership (raft/placement.h) and the next-move decision
 * (raft/rebalance.h), the latter exhaustively on five nodes: every
 * configuration (each node absent, spare, standby or voter), every target
 * of one to five nodes, every set of live nodes and every leader; each
 * state is driven move by move with the invariants checked at every step,
 * and must reach the target when the target's nodes are alive; the same
 * with a demoted node (a standby target of at most one node outside the
 * voters' target), which must end as a standby, never a voter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "raft/placement.h"
#include "raft/rebalance.h"

#define N 5
#define ABSENT (-1)

struct sim {
	int role[N + 1]; /* ABSENT or REBALANCE_SPARE/_STANDBY_ROLE/_VOTER */
	bool caught[N + 1];
	uint64_t leader;
};

/* The standby target of the runs (demoted nodes), none by default. */
static uint64_t standby_target[N];
static size_t n_standby_target;

static bool is_standby_target(int i)
{
	for (size_t k = 0; k < n_standby_target; k++) {
		if (standby_target[k] == (uint64_t)i) {
			return true;
		}
	}
	return false;
}

static size_t quorum(size_t n)
{
	return n / 2 + 1;
}

static void count(const struct sim *s, unsigned alive, size_t *nv, size_t *live)
{
	*nv = *live = 0;
	for (int i = 1; i <= N; i++) {
		if (s->role[i] == REBALANCE_VOTER) {
			(*nv)++;
			*live += (alive >> i) & 1;
		}
	}
}

static void next(const struct sim *s, const uint64_t *target, size_t nt,
                 unsigned alive, struct rebalance_move *m)
{
	struct rebalance_server sv[N];
	uint64_t al[N];
	size_t n = 0, na = 0;
	struct rebalance_group g;

	for (int i = 1; i <= N; i++) {
		if (s->role[i] != ABSENT) {
			sv[n].id = (uint64_t)i;
			sv[n].role = s->role[i];
			sv[n].caught_up = s->caught[i];
			n++;
		}
		if ((alive >> i) & 1) {
			al[na++] = (uint64_t)i;
		}
	}
	g.servers = sv;
	g.n_servers = n;
	g.leader = s->leader;
	g.target = target;
	g.n_target = nt;
	g.alive = al;
	g.n_alive = na;
	g.standby = n_standby_target > 0 ? standby_target : NULL;
	g.n_standby = n_standby_target;
	rebalance_next(&g, m);
}

/* The voters are the target; a standby target's node is a standby (a dead
 * one at least votes no more). */
static bool at_target(const struct sim *s, const uint64_t *target, size_t nt,
                      unsigned alive)
{
	for (int i = 1; i <= N; i++) {
		bool want = false;
		for (size_t k = 0; k < nt; k++) {
			want = want || target[k] == (uint64_t)i;
		}
		if (want != (s->role[i] == REBALANCE_VOTER)) {
			return false;
		}
		if (!want && is_standby_target(i)) {
			if ((alive >> i) & 1
			        ? s->role[i] != REBALANCE_STANDBY_ROLE
			        : s->role[i] == REBALANCE_VOTER) {
				return false;
			}
			continue;
		}
		if (!want && s->role[i] != ABSENT) {
			return false;
		}
	}
	return true;
}

static unsigned long moves_checked;

/* Drives one state to the end, checking every move. */
static void drive(struct sim s, const uint64_t *target, size_t nt,
                  unsigned alive)
{
	bool all_alive = true;
	for (size_t k = 0; k < nt; k++) {
		all_alive = all_alive && ((alive >> target[k]) & 1);
	}
	for (int step = 0; step < 40; step++) {
		struct rebalance_move m;
		size_t nv, live, nv2, live2;
		int *r;

		count(&s, alive, &nv, &live);
		next(&s, target, nt, alive, &m);
		moves_checked++;
		if (m.kind == REBALANCE_NONE) {
			assert_true(at_target(&s, target, nt, alive));
			return;
		}
		if (m.kind == REBALANCE_WAIT) {
			/* A standby catches up while the leader waits; other
			 * waits are final in this model. */
			if (m.node != 0 &&
			    s.role[m.node] == REBALANCE_STANDBY_ROLE &&
			    !s.caught[m.node] && ((alive >> m.node) & 1)) {
				s.caught[m.node] = true;
				continue;
			}
			if (all_alive) {
				for (int i = 1; i <= N; i++) {
					print_message("node %d role %d\n", i,
					              s.role[i]);
				}
				print_message("leader %d target",
				              (int)s.leader);
				for (size_t k = 0; k < nt; k++) {
					print_message(" %d", (int)target[k]);
				}
				print_message(" alive %x wait %d\n", alive,
				              (int)m.node);
				fail();
			}
			return;
		}
		assert_true(m.node >= 1 && m.node <= N);
		r = &s.role[m.node];
		switch (m.kind) {
		case REBALANCE_ADD:
			assert_int_equal(*r, ABSENT);
			assert_true((alive >> m.node) & 1);
			*r = REBALANCE_SPARE;
			s.caught[m.node] = false;
			break;
		case REBALANCE_STANDBY:
			assert_int_equal(*r, REBALANCE_SPARE);
			*r = REBALANCE_STANDBY_ROLE;
			break;
		case REBALANCE_PROMOTE:
			assert_int_equal(*r, REBALANCE_STANDBY_ROLE);
			assert_true(s.caught[m.node]);
			assert_false(is_standby_target((int)m.node));
			*r = REBALANCE_VOTER;
			break;
		case REBALANCE_DEMOTE:
			assert_int_equal(*r, REBALANCE_VOTER);
			assert_int_not_equal(m.node, s.leader);
			assert_true(is_standby_target((int)m.node));
			*r = REBALANCE_STANDBY_ROLE;
			break;
		case REBALANCE_REMOVE:
			assert_int_not_equal(*r, ABSENT);
			assert_int_not_equal(m.node, s.leader);
			assert_false(is_standby_target((int)m.node));
			*r = ABSENT;
			break;
		case REBALANCE_TRANSFER:
			assert_int_equal(*r, REBALANCE_VOTER);
			assert_int_not_equal(m.node, s.leader);
			assert_true((alive >> m.node) & 1);
			s.leader = m.node;
			break;
		default:
			fail();
		}
		count(&s, alive, &nv2, &live2);
		/* Never without a live majority, never below the target's
		 * quorum once reached. */
		assert_true(nv2 >= 1);
		assert_true(live2 >= quorum(nv2));
		if (live >= quorum(nt)) {
			assert_true(live2 >= quorum(nt));
		}
		assert_int_equal(s.role[s.leader], REBALANCE_VOTER);
	}
	fail_msg("no end after 40 moves");
}

/* Every configuration, target, live set and leader; with `demoted`,
 * also every single node outside the target as its standby target. */
static unsigned long exhaustive(bool demoted)
{
	unsigned long states = 0;

	for (unsigned code = 0; code < 1024; code++) { /* 4^5 configs */
		struct sim s;
		unsigned c = code;
		memset(&s, 0, sizeof s);
		for (int i = 1; i <= N; i++) {
			int v = (int)(c & 3);
			c >>= 2;
			s.role[i] = v == 3 ? ABSENT : v;
			s.caught[i] = false;
		}
		for (unsigned tm = 1; tm < 32; tm++) {
			uint64_t target[N];
			size_t nt = 0;
			for (int i = 1; i <= N; i++) {
				if ((tm >> (i - 1)) & 1) {
					target[nt++] = (uint64_t)i;
				}
			}
			for (int d = demoted ? 1 : 0; d <= (demoted ? N : 0);
			     d++) {
				if (d != 0 && ((tm >> (d - 1)) & 1)) {
					continue; /* a voter of the target */
				}
				n_standby_target = d != 0;
				standby_target[0] = (uint64_t)d;
				for (unsigned am = 0; am < 32; am++) {
					unsigned alive = am << 1;
					for (int l = 1; l <= N; l++) {
						size_t nv, live;
						if (s.role[l] !=
						        REBALANCE_VOTER ||
						    !((alive >> l) & 1)) {
							continue;
						}
						s.leader = (uint64_t)l;
						count(&s, alive, &nv, &live);
						if (live < quorum(nv)) {
							continue;
						}
						drive(s, target, nt, alive);
						states++;
					}
				}
			}
		}
	}
	n_standby_target = 0;
	return states;
}

static void test_next_move_exhaustive(void **state)
{
	unsigned long states;
	(void)state;

	states = exhaustive(false);
	assert_true(states > 100000);
	print_message("%lu states, %lu decisions\n", states, moves_checked);
}

static void test_next_move_exhaustive_demoted(void **state)
{
	unsigned long states;
	(void)state;

	moves_checked = 0;
	states = exhaustive(true);
	assert_true(states > 100000);
	print_message("%lu states with a demoted node, %lu decisions\n", states,
	              moves_checked);
}

/* Growing, shrinking and replacing with every node alive: the target is
 * reached and each step is the documented one. */
static void test_next_move_sequences(void **state)
{
	struct sim s;
	struct rebalance_move m;
	uint64_t t[3] = {1, 2, 4};
	unsigned alive = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4);
	(void)state;

	memset(&s, 0, sizeof s);
	for (int i = 1; i <= N; i++) {
		s.role[i] = ABSENT;
	}
	s.role[1] = s.role[2] = s.role[3] = REBALANCE_VOTER;
	s.leader = 3;
	/* 3 leaves for 4: leadership off 3 first, then add, standby, (catch
	 * up), promote, remove. */
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_TRANSFER);
	assert_int_equal(m.node, 1);
	s.leader = 1;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_ADD);
	assert_int_equal(m.node, 4);
	s.role[4] = REBALANCE_SPARE;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_STANDBY);
	s.role[4] = REBALANCE_STANDBY_ROLE;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_WAIT);
	s.caught[4] = true;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_PROMOTE);
	s.role[4] = REBALANCE_VOTER;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_REMOVE);
	assert_int_equal(m.node, 3);
	s.role[3] = ABSENT;
	next(&s, t, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_NONE);

	/* Replacing dead 2 by 5: the dead voter goes first (a live
	 * majority remains), then 5 comes in. */
	{
		uint64_t t2[3] = {1, 4, 5};
		unsigned al2 = (1u << 1) | (1u << 4) | (1u << 5);
		next(&s, t2, 3, al2, &m);
		assert_int_equal(m.kind, REBALANCE_REMOVE);
		assert_int_equal(m.node, 2);
		s.role[2] = ABSENT;
		next(&s, t2, 3, al2, &m);
		assert_int_equal(m.kind, REBALANCE_ADD);
		assert_int_equal(m.node, 5);
	}
	/* Two of three voters dead: no move at all. */
	{
		uint64_t t3[3] = {1, 4, 5};
		memset(&s, 0, sizeof s);
		for (int i = 1; i <= N; i++) {
			s.role[i] = ABSENT;
		}
		s.role[1] = s.role[2] = s.role[3] = REBALANCE_VOTER;
		s.leader = 1;
		next(&s, t3, 3, (1u << 1) | (1u << 4) | (1u << 5), &m);
		assert_true(m.kind == REBALANCE_ADD ||
		            m.kind == REBALANCE_WAIT);
	}
}

/* Demoting node 3 of three voters: its leadership goes first, then it
 * becomes a standby (never removed); promoting it back makes it a voter
 * again once caught up. */
static void test_demote_promote(void **state)
{
	struct sim s;
	struct rebalance_move m;
	uint64_t voters[2] = {1, 2}, all[3] = {1, 2, 3};
	unsigned alive = (1u << 1) | (1u << 2) | (1u << 3);
	(void)state;

	memset(&s, 0, sizeof s);
	for (int i = 1; i <= N; i++) {
		s.role[i] = ABSENT;
	}
	s.role[1] = s.role[2] = s.role[3] = REBALANCE_VOTER;
	s.leader = 3;
	standby_target[0] = 3;
	n_standby_target = 1;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_TRANSFER);
	assert_int_equal(m.node, 1);
	s.leader = 1;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_DEMOTE);
	assert_int_equal(m.node, 3);
	s.role[3] = REBALANCE_STANDBY_ROLE;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_NONE);

	/* Promoted: a voter again once it has caught up. */
	n_standby_target = 0;
	next(&s, all, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_WAIT);
	s.caught[3] = true;
	next(&s, all, 3, alive, &m);
	assert_int_equal(m.kind, REBALANCE_PROMOTE);
	assert_int_equal(m.node, 3);

	/* A demoted node missing from a group is added and made a standby
	 * once the voters are in place. */
	memset(&s, 0, sizeof s);
	for (int i = 1; i <= N; i++) {
		s.role[i] = ABSENT;
	}
	s.role[1] = s.role[2] = REBALANCE_VOTER;
	s.leader = 2;
	standby_target[0] = 3;
	n_standby_target = 1;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_ADD);
	assert_int_equal(m.node, 3);
	s.role[3] = REBALANCE_SPARE;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_STANDBY);
	s.role[3] = REBALANCE_STANDBY_ROLE;
	next(&s, voters, 2, alive, &m);
	assert_int_equal(m.kind, REBALANCE_NONE);
	n_standby_target = 0;
}

static void test_meta_voters(void **state)
{
	uint64_t nodes[7] = {7, 3, 5, 1, 6, 2, 4}, out[7];
	(void)state;
	assert_int_equal(placement_meta_voters(1), 1);
	assert_int_equal(placement_meta_voters(2), 2);
	assert_int_equal(placement_meta_voters(3), 3);
	assert_int_equal(placement_meta_voters(4), 3);
	assert_int_equal(placement_meta_voters(5), 5);
	assert_int_equal(placement_meta_voters(9), 5);
	assert_int_equal(placement_replicas(nodes, 4, 0, 3, out), 3);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 3);
	assert_int_equal(out[2], 5);
	assert_int_equal(placement_replicas(nodes, 7, 0, 3, out), 5);
	assert_int_equal(out[4], 5);
}

/* A node joining moves only groups onto it; one leaving moves only its
 * own groups, each to one other node. */
static void test_target_moves(void **state)
{
	uint64_t four[4] = {1, 2, 3, 4}, five[5] = {1, 2, 3, 4, 5};
	uint64_t a[5], b[5];
	(void)state;
	for (uint32_t g = 1; g <= 500; g++) {
		size_t ka = placement_replicas(four, 4, g, 3, a);
		size_t kb = placement_replicas(five, 5, g, 3, b);
		size_t changed = 0;
		assert_int_equal(ka, 3);
		assert_int_equal(kb, 3);
		for (size_t i = 0; i < 3; i++) {
			bool in = false;
			for (size_t j = 0; j < 3; j++) {
				in = in || b[i] == a[j];
			}
			if (!in) {
				assert_int_equal(b[i], 5);
				changed++;
			}
		}
		assert_true(changed <= 1);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_meta_voters),
	    cmocka_unit_test(test_target_moves),
	    cmocka_unit_test(test_next_move_sequences),
	    cmocka_unit_test(test_next_move_exhaustive),
	    cmocka_unit_test(test_next_move_exhaustive_demoted),
	    cmocka_unit_test(test_demote_promote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
