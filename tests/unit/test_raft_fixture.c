/* raft/replica.c and raft/entry.c driven by libraft's deterministic fixture
 * (in-memory raft_io, simulated network and time): group commit, results,
 * elections, leader changes, partitions, now_ms monotonicity across
 * leaders with skewed clocks, snapshots and snapshot install with state
 * transfer. This checks the fsm glue, not raft/io.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <raft/fixture.h>

#include "raft/replica.h"
#include "tests/unit/testdb.h"
#include "tests/unit/testfsm.h"

#define N 3
#define GROUP 5
#define EPOCH 1700000000000ull

struct t;

struct srv {
	struct t *t;
	unsigned i;
	int64_t skew_ms;
	struct testfsm *fsm;
	struct replica *rp;
};

struct t {
	struct raft_fixture f;
	struct testdb db;
	struct srv s[N];
	char dirs[4][64];
	unsigned n_dirs;
	unsigned n; /* servers in use, at most N */
	/* Read confirmations in flight (setup_confirm): delivered one step
	 * later, dropped where the fixture drops raft messages. */
	bool confirm;
	struct confirm_msg {
		unsigned from, to;
		bool answer, ok;
		uint64_t term, round;
	} cq[256];
	unsigned n_cq;
};

struct prop {
	int status;
	uint64_t value;
	uint64_t index;
	bool done;
};

/* The fixture's virtual time, never set back. */
static uint64_t mono_cb(void *data)
{
	struct srv *s = data;
	return (uint64_t)raft_fixture_time(&s->t->f);
}

static uint64_t clock_cb(void *data)
{
	struct srv *s = data;
	return (uint64_t)((int64_t)(EPOCH + raft_fixture_time(&s->t->f)) +
	                  s->skew_ms);
}

/* State transfer for an installed snapshot: the current leader exports
 * its state into a fresh directory. */
static int fetch_cb(void *data, uint32_t group, uint64_t index, char *dir,
                    size_t size)
{
	struct srv *s = data;
	struct t *t = s->t;
	unsigned l = raft_fixture_leader_index(&t->f);
	uint64_t applied = 0;
	char *d;

	if (l >= N || t->n_dirs == 4) {
		return -1;
	}
	d = t->dirs[t->n_dirs++];
	snprintf(d, 64, "%s/xfer-XXXXXX", t->db.dir);
	if (mkdtemp(d) == NULL) {
		return -1;
	}
	if (t->s[l].fsm->fsm.export_state(&t->s[l].fsm->fsm, group, d,
	                                  &applied) != 0 ||
	    applied < index) {
		return -1;
	}
	snprintf(dir, size, "%s", d);
	return 0;
}

static void poll_all(struct t *t)
{
	unsigned i;
	for (i = 0; i < t->n; i++) {
		assert_int_equal(replica_poll(t->s[i].rp), 0);
	}
}

static void confirm_push(struct t *t, struct confirm_msg m)
{
	if (t->n_cq < sizeof t->cq / sizeof t->cq[0]) {
		t->cq[t->n_cq++] = m;
	}
}

static void confirm_cb(void *data, uint64_t peer, uint64_t term, uint64_t round)
{
	struct srv *s = data;
	confirm_push(s->t, (struct confirm_msg){.from = s->i,
	                                        .to = (unsigned)peer - 1,
	                                        .term = term,
	                                        .round = round});
}

static void confirm_deliver(struct t *t)
{
	struct confirm_msg now[256];
	unsigned n = t->n_cq;
	memcpy(now, t->cq, n * sizeof now[0]);
	t->n_cq = 0;
	for (unsigned i = 0; i < n; i++) {
		struct confirm_msg *m = &now[i];
		if (raft_fixture_saturated(&t->f, m->from, m->to) ||
		    !raft_fixture_alive(&t->f, m->to)) {
			continue;
		}
		if (!m->answer) {
			bool ok = replica_follows(t->s[m->to].rp, m->from + 1,
			                          m->term);
			confirm_push(t,
			             (struct confirm_msg){.from = m->to,
			                                  .to = m->from,
			                                  .answer = true,
			                                  .ok = ok,
			                                  .term = m->term,
			                                  .round = m->round});
		} else {
			replica_confirmed(t->s[m->to].rp, m->from + 1, m->term,
			                  m->round, m->ok);
		}
	}
}

static void step(struct t *t, unsigned n)
{
	while (n-- > 0) {
		raft_fixture_step(&t->f);
		poll_all(t);
		if (t->confirm) {
			confirm_deliver(t);
			poll_all(t);
		}
	}
}

static bool step_until_ready(struct t *t, unsigned i, unsigned max)
{
	while (max-- > 0) {
		if (replica_is_ready(t->s[i].rp)) {
			return true;
		}
		step(t, 1);
	}
	return replica_is_ready(t->s[i].rp);
}

static bool step_until_done(struct t *t, struct prop *p, unsigned n,
                            unsigned max)
{
	while (max-- > 0) {
		unsigned k, done = 0;
		for (k = 0; k < n; k++) {
			done += p[k].done;
		}
		if (done == n) {
			return true;
		}
		step(t, 1);
	}
	return false;
}

static unsigned leader(struct t *t)
{
	unsigned i;
	for (i = 0; i < N; i++) {
		if (replica_is_ready(t->s[i].rp) &&
		    raft_state(raft_fixture_get(&t->f, i)) == RAFT_LEADER) {
			return i;
		}
	}
	return N;
}

static int setup_n(void **state, unsigned n, bool confirm)
{
	struct t *t = calloc(1, sizeof *t);
	struct raft_configuration conf;
	unsigned i;

	t->n = n;
	t->confirm = confirm;
	testdb_create(&t->db);
	assert_int_equal(raft_fixture_initialize(&t->f), 0);
	for (i = 0; i < t->n; i++) {
		struct srv *s = &t->s[i];
		struct replica_hooks h = {0};
		struct replica_params p = {0};
		s->t = t;
		s->i = i;
		s->fsm = calloc(1, sizeof *s->fsm);
		testfsm_init(s->fsm, t->db.db, t->db.data, i + 1);
		h.clock = clock_cb;
		h.clock_data = s;
		h.mono = mono_cb;
		h.mono_data = s;
		h.fetch = fetch_cb;
		h.fetch_data = s;
		if (confirm) {
			h.confirm = confirm_cb;
			h.confirm_data = s;
		}
		p.max_entry_bytes = 4096;
		assert_int_equal(
		    replica_new(&s->rp, GROUP, &s->fsm->fsm, &p, &h), 0);
		assert_int_equal(
		    raft_fixture_grow(&t->f, replica_raft_fsm(s->rp)), 0);
	}
	/* Server 1's clock is 100 s behind, server 2's 5 s ahead. */
	if (n == N) {
		t->s[1].skew_ms = -100000;
		t->s[2].skew_ms = 5000;
	}
	assert_int_equal(raft_fixture_configuration(&t->f, t->n, &conf), 0);
	assert_int_equal(raft_fixture_bootstrap(&t->f, &conf), 0);
	raft_configuration_close(&conf);
	for (i = 0; i < t->n; i++) {
		assert_int_equal(
		    replica_bind(t->s[i].rp, raft_fixture_get(&t->f, i)), 0);
	}
	assert_int_equal(raft_fixture_start(&t->f), 0);
	*state = t;
	return 0;
}

static int setup(void **state)
{
	return setup_n(state, N, false);
}

static int setup1(void **state)
{
	return setup_n(state, 1, false);
}

static int setup_confirm(void **state)
{
	return setup_n(state, N, true);
}

static int teardown(void **state)
{
	struct t *t = *state;
	unsigned i;

	raft_fixture_close(&t->f);
	for (i = 0; i < t->n; i++) {
		replica_free(t->s[i].rp);
		testfsm_close(t->s[i].fsm);
		free(t->s[i].fsm);
	}
	testdb_destroy(&t->db);
	free(t);
	return 0;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;
	for (i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static void prop_cb(void *data, int status, uint8_t *result, size_t len)
{
	struct prop *p = data;
	assert_false(p->done);
	p->done = true;
	p->status = status;
	if (status == REPLICA_OK) {
		assert_int_equal(len, 16);
		p->value = get64(result);
		p->index = get64(result + 8);
	} else {
		assert_null(result);
	}
	free(result);
}

static int propose_add(struct t *t, unsigned i, const char *key, struct prop *p,
                       uint64_t *leader_id)
{
	uint8_t cmd[64];
	size_t n = testfsm_cmd_add(cmd, key, 1);
	memset(p, 0, sizeof *p);
	return replica_propose(t->s[i].rp, cmd, n, prop_cb, p, leader_id);
}

/* Commands of one turn become one entry; results come back in order. */
static void test_batch(void **state)
{
	struct t *t = *state;
	struct prop p[10];
	struct replica_stats st;
	uint64_t lid;
	unsigned i, l;

	assert_true(raft_fixture_step_until_has_leader(&t->f, 10000));
	l = raft_fixture_leader_index(&t->f);
	/* Before its first barrier the leader queues instead of failing. */
	assert_int_equal(propose_add(t, l, "c", &p[0], &lid), 0);
	assert_true(step_until_ready(t, l, 1000));
	assert_int_equal(t->s[l].fsm->g[GROUP].leader_up, 1);
	for (i = 1; i < 10; i++) {
		assert_int_equal(propose_add(t, l, "c", &p[i], &lid), 0);
	}
	assert_true(step_until_done(t, p, 10, 2000));
	for (i = 0; i < 10; i++) {
		assert_int_equal(p[i].status, REPLICA_OK);
		assert_int_equal(p[i].value, i + 1);
	}
	/* p[0] was queued before ready, the rest in one later turn: at most
	 * two entries for ten commands. */
	assert_true(p[1].index == p[9].index);
	replica_stats(t->s[l].rp, &st);
	assert_true(st.entries_proposed <= 2);
	assert_int_equal(st.proposals, 10);

	/* A follower refuses and names the leader. */
	i = (l + 1) % N;
	assert_int_equal(propose_add(t, i, "c", &p[0], &lid),
	                 REPLICA_ENOTLEADER);
	assert_int_equal(lid, l + 1);
	assert_false(p[0].done);

	/* Every replica applies the same state. */
	assert_true(
	    raft_fixture_step_until_applied(&t->f, N, p[9].index, 2000));
	for (i = 0; i < N; i++) {
		assert_int_equal(testfsm_counter(t->s[i].fsm, GROUP, "c"), 10);
		assert_int_equal(t->s[i].fsm->violations, 0);
	}
	/* Commands beyond the entry size limit are refused. */
	{
		static uint8_t big[5000];
		assert_int_equal(replica_propose(t->s[l].rp, big, sizeof big,
		                                 prop_cb, &p[0], &lid),
		                 REPLICA_ETOOBIG);
	}
}

static void read_cb(void *data, int status)
{
	int *r = data;
	*r = status == REPLICA_OK ? 1 : -1;
}

/* One barrier serves every read of a turn; a read sees prior writes. */
static void test_reads(void **state)
{
	struct t *t = *state;
	struct replica_stats st0, st;
	struct prop p;
	int r[5] = {0};
	uint64_t lid;
	unsigned i, l;

	raft_fixture_elect(&t->f, 0);
	l = 0;
	assert_true(step_until_ready(t, l, 1000));
	assert_int_equal(propose_add(t, l, "k", &p, &lid), 0);
	for (i = 0; i < 5; i++) {
		assert_int_equal(replica_read(t->s[l].rp, read_cb, &r[i], &lid),
		                 0);
	}
	replica_stats(t->s[l].rp, &st0);
	assert_true(step_until_done(t, &p, 1, 2000));
	for (i = 0; i < 2000 && r[4] == 0; i++) {
		step(t, 1);
	}
	for (i = 0; i < 5; i++) {
		assert_int_equal(r[i], 1);
	}
	replica_stats(t->s[l].rp, &st);
	assert_int_equal(st.read_barriers, 1);
	assert_int_equal(testfsm_counter(t->s[l].fsm, GROUP, "k"), 1);
	assert_int_equal(replica_read(t->s[1].rp, read_cb, &r[0], &lid),
	                 REPLICA_ENOTLEADER);
	assert_int_equal(lid, 1);
	(void)st0;
}

/* A sole voter cannot be deposed, so its reads need no barrier: no entry,
 * no fsync, and they still see every write answered before them. */
static void test_reads_sole_voter(void **state)
{
	struct t *t = *state;
	struct replica_stats st;
	struct prop p;
	int r = 0;
	uint64_t lid;
	unsigned i;

	/* A single voter elects itself. */
	assert_true(step_until_ready(t, 0, 1000));
	assert_int_equal(propose_add(t, 0, "k", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 2000));
	assert_int_equal(replica_read(t->s[0].rp, read_cb, &r, &lid), 0);
	for (i = 0; i < 100 && r == 0; i++) {
		step(t, 1);
	}
	assert_int_equal(r, 1);
	assert_int_equal(testfsm_counter(t->s[0].fsm, GROUP, "k"), 1);
	replica_stats(t->s[0].rp, &st);
	assert_int_equal(st.read_barriers, 0);
	assert_int_equal(st.reads_local, 1);
}

struct seen {
	struct testfsm *fsm;
	int status;
	uint64_t value; /* counter "k" when the read was served */
};

static void seen_cb(void *data, int status)
{
	struct seen *sn = data;
	sn->status = status == REPLICA_OK ? 1 : -1;
	sn->value = testfsm_counter(sn->fsm, GROUP, "k");
}

/* Reads confirmed by the voters instead of a barrier: no entry; and a
 * leader cut off from the voters never serves its stale state, even when
 * a new leader has written meanwhile. */
static void test_reads_confirmed(void **state)
{
	struct t *t = *state;
	struct replica_stats st;
	struct prop p;
	int r[3] = {0};
	uint64_t lid, last;
	unsigned i, l;

	raft_fixture_elect(&t->f, 0);
	assert_true(step_until_ready(t, 0, 1000));
	assert_int_equal(propose_add(t, 0, "k", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 2000));
	replica_stats(t->s[0].rp, &st);
	last = raft_last_index(raft_fixture_get(&t->f, 0));
	assert_int_equal(replica_read(t->s[0].rp, read_cb, &r[0], &lid), 0);
	assert_int_equal(replica_read(t->s[0].rp, read_cb, &r[1], &lid), 0);
	for (i = 0; i < 200 && r[1] == 0; i++) {
		step(t, 1);
	}
	assert_int_equal(r[0], 1);
	assert_int_equal(r[1], 1);
	replica_stats(t->s[0].rp, &st);
	assert_int_equal(st.read_barriers, 0);
	assert_true(st.read_confirms >= 1);
	/* No entry was appended for the reads (heartbeats append none). */
	assert_int_equal(raft_last_index(raft_fixture_get(&t->f, 0)), last);

	/* A read queued right after a write sees it when it is served. */
	{
		struct seen sn = {.fsm = t->s[0].fsm};
		assert_int_equal(propose_add(t, 0, "k", &p, &lid), 0);
		assert_int_equal(replica_read(t->s[0].rp, seen_cb, &sn, &lid),
		                 0);
		for (i = 0; i < 2000 && sn.status == 0; i++) {
			step(t, 1);
		}
		assert_int_equal(sn.status, 1);
		assert_int_equal(sn.value, 2);
		assert_true(p.done);
	}

	/* Cut server 0 off; the others elect a leader that writes. */
	for (i = 1; i < N; i++) {
		raft_fixture_saturate(&t->f, 0, i);
		raft_fixture_saturate(&t->f, i, 0);
	}
	assert_int_equal(replica_read(t->s[0].rp, read_cb, &r[2], &lid), 0);
	for (i = 0, l = N; i < 20000 && l == N; i++) {
		step(t, 1);
		l = leader(t);
		if (l == 0) {
			l = N; /* the old one, until it steps down */
		}
	}
	assert_true(l < N && l != 0);
	assert_int_equal(propose_add(t, l, "k", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 5000));
	assert_int_equal(p.status, REPLICA_OK);
	for (i = 0; i < 20000 && r[2] == 0; i++) {
		step(t, 1);
	}
	/* Refused (not leader), never served from the stale state. */
	assert_int_equal(r[2], -1);
	assert_int_equal(testfsm_counter(t->s[0].fsm, GROUP, "k"), 2);
}

/* Leaders come and go under partitions: committed commands are applied
 * exactly once everywhere, lost ones are reported as such, time never runs
 * backwards although the clocks disagree. */
static void test_leader_changes(void **state)
{
	struct t *t = *state;
	enum { ROUNDS = 6, PER = 5 };
	struct prop p[ROUNDS * PER];
	uint64_t ok = 0, lost = 0, lid, final;
	unsigned r, k, i, n = 0;

	raft_fixture_elect(&t->f, 0);
	for (r = 0; r < ROUNDS; r++) {
		unsigned l;
		/* Wait for a ready leader. */
		for (k = 0; k < 20000 && (l = leader(t)) == N; k++) {
			step(t, 1);
		}
		assert_true(l < N);
		for (k = 0; k < PER; k++) {
			assert_int_equal(propose_add(t, l, "x", &p[n], &lid),
			                 0);
			n++;
		}
		step(t, r % 2 == 0 ? 300 : 1 + r);
		/* Cut the leader off: its pending commands may be lost. */
		for (i = 0; i < N; i++) {
			if (i != l) {
				raft_fixture_disconnect(&t->f, l, i);
				raft_fixture_disconnect(&t->f, i, l);
			}
		}
		for (k = 0; k < 30000; k++) {
			unsigned nl = leader(t);
			if (nl != N && nl != l) {
				break;
			}
			step(t, 1);
		}
		for (i = 0; i < N; i++) {
			if (i != l) {
				raft_fixture_reconnect(&t->f, l, i);
				raft_fixture_reconnect(&t->f, i, l);
			}
		}
	}
	for (k = 0; k < 50000; k++) {
		unsigned done = 0;
		for (i = 0; i < n; i++) {
			done += p[i].done;
		}
		if (done == n && leader(t) != N) {
			break;
		}
		step(t, 1);
	}
	for (i = 0; i < n; i++) {
		assert_true(p[i].done);
		if (p[i].status == REPLICA_OK) {
			ok++;
		} else {
			assert_int_equal(p[i].status, REPLICA_ELEADERSHIPLOST);
			lost++;
		}
	}
	assert_true(ok > 0);
	/* One more committed command so every replica catches up. */
	{
		struct prop last;
		unsigned l = leader(t);
		assert_true(l < N);
		assert_int_equal(propose_add(t, l, "x", &last, &lid), 0);
		assert_true(step_until_done(t, &last, 1, 5000));
		assert_int_equal(last.status, REPLICA_OK);
		ok++;
		assert_true(raft_fixture_step_until_applied(&t->f, N,
		                                            last.index, 5000));
		final = last.value;
	}
	/* Results of successful commands are distinct counter values. */
	for (i = 0; i < n; i++) {
		for (k = i + 1; k < n; k++) {
			if (p[i].status == REPLICA_OK &&
			    p[k].status == REPLICA_OK) {
				assert_true(p[i].value != p[k].value);
			}
		}
	}
	assert_true(final >= ok && final <= ok + lost);
	{
		uint64_t ups = 0;
		for (i = 0; i < N; i++) {
			ups += t->s[i].fsm->g[GROUP].leader_up;
		}
		assert_true(ups >= ROUNDS);
	}
	for (i = 0; i < N; i++) {
		struct testfsm *f = t->s[i].fsm;
		assert_int_equal(testfsm_counter(f, GROUP, "x"), final);
		assert_int_equal(f->violations, 0);
		/* Leadership was announced and withdrawn in pairs. */
		assert_true(f->g[GROUP].leader_up >= f->g[GROUP].leader_down);
		assert_true(f->g[GROUP].leader_up - f->g[GROUP].leader_down <=
		            1);
	}
}

struct rprop {
	struct prop p;
	uint8_t cmd[64]; /* the bytes handed back when refused */
	size_t cmd_len;
};

static void reserved_cb(void *data, int status, uint8_t *result, size_t len,
                        const uint8_t *cmd, size_t cmd_len)
{
	struct rprop *r = data;
	prop_cb(&r->p, status, result, len);
	if (status == REPLICA_ENOTLEADER) {
		assert_non_null(cmd);
		assert_true(cmd_len <= sizeof r->cmd);
		memcpy(r->cmd, cmd, cmd_len);
		r->cmd_len = cmd_len;
	} else {
		assert_null(cmd);
		assert_int_equal(cmd_len, 0);
	}
}

/* Writes an "add 1 to key" command in place. */
static int reserve_add(struct t *t, unsigned i, const char *key,
                       struct rprop *r, uint64_t *leader_id)
{
	uint8_t tmp[64], *dst;
	size_t n = testfsm_cmd_add(tmp, key, 1);
	int rv;
	memset(r, 0, sizeof *r);
	rv = replica_propose_reserve(t->s[i].rp, n, reserved_cb, r, leader_id,
	                             &dst);
	if (rv == 0) {
		memcpy(dst, tmp, n);
	}
	return rv;
}

/* Commands written in place join the turn's entry with copied ones, in
 * order; refused before libraft took them (the leader stepped down), they
 * come back with their bytes. */
static void test_reserve(void **state)
{
	struct t *t = *state;
	struct prop p[4];
	struct rprop r[4];
	struct replica_stats st;
	uint8_t want[64];
	uint64_t lid;
	unsigned i, l, f;

	raft_fixture_elect(&t->f, 0);
	l = 0;
	assert_true(step_until_ready(t, l, 1000));
	/* Mixed: copied, reserved, copied, reserved... one entry. */
	for (i = 0; i < 4; i++) {
		assert_int_equal(propose_add(t, l, "m", &p[i], &lid), 0);
		assert_int_equal(reserve_add(t, l, "m", &r[i], &lid), 0);
	}
	for (i = 0; i < 2000 && !r[3].p.done; i++) {
		step(t, 1);
	}
	for (i = 0; i < 4; i++) {
		assert_true(p[i].done);
		assert_true(r[i].p.done);
		assert_int_equal(p[i].status, REPLICA_OK);
		assert_int_equal(r[i].p.status, REPLICA_OK);
		assert_int_equal(p[i].value, 2 * i + 1);
		assert_int_equal(r[i].p.value, 2 * i + 2);
		assert_int_equal(r[i].p.index, p[0].index);
	}
	/* Enough to spill into three entries (4096 bytes each, 15 per
	 * command): filled in place across buffer growth and new batches,
	 * every one applied once, in order. */
	{
		enum { MANY = 600 };
		struct rprop *m = calloc(MANY, sizeof *m);
		struct replica_stats st0;
		assert_non_null(m);
		replica_stats(t->s[l].rp, &st0);
		for (i = 0; i < MANY; i++) {
			assert_int_equal(reserve_add(t, l, "n", &m[i], &lid),
			                 0);
		}
		for (i = 0; i < 2000 && !m[MANY - 1].p.done; i++) {
			step(t, 1);
		}
		for (i = 0; i < MANY; i++) {
			assert_int_equal(m[i].p.status, REPLICA_OK);
			assert_int_equal(m[i].p.value, i + 1);
		}
		replica_stats(t->s[l].rp, &st);
		assert_int_equal(st.proposals, 8 + MANY);
		assert_int_equal(st.entries_proposed - st0.entries_proposed, 3);
		free(m);
	}

	/* A follower refuses at once and names the leader. */
	f = 1;
	assert_int_equal(reserve_add(t, f, "m", &r[0], &lid),
	                 REPLICA_ENOTLEADER);
	assert_int_equal(lid, l + 1);
	assert_false(r[0].p.done);

	/* Queued on the leader, which steps down before its next turn: the
	 * callback gets "not leader" and the command's bytes. */
	assert_int_equal(reserve_add(t, l, "q", &r[0], &lid), 0);
	assert_int_equal(reserve_add(t, l, "q", &r[1], &lid), 0);
	raft_fixture_depose(&t->f);
	poll_all(t);
	for (i = 0; i < 2; i++) {
		assert_true(r[i].p.done);
		assert_int_equal(r[i].p.status, REPLICA_ENOTLEADER);
		assert_int_equal(r[i].cmd_len, testfsm_cmd_add(want, "q", 1));
		assert_memory_equal(r[i].cmd, want, r[i].cmd_len);
	}
	for (i = 0; i < N; i++) {
		assert_int_equal(testfsm_counter(t->s[i].fsm, GROUP, "q"), 0);
	}
}

/* A new leader whose clock is 100 s behind stamps its entries with the
 * previous entries' time, never earlier. */
static void test_clock_skew(void **state)
{
	struct t *t = *state;
	struct prop p;
	uint64_t lid, before;
	unsigned i;

	raft_fixture_elect(&t->f, 2); /* clock 5 s ahead */
	assert_true(step_until_ready(t, 2, 1000));
	assert_int_equal(propose_add(t, 2, "t", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 2000));
	assert_true(raft_fixture_step_until_applied(&t->f, N, p.index, 2000));
	before = t->s[1].fsm->g[GROUP].last_now_ms;
	assert_true(before >= EPOCH + 5000);
	raft_fixture_depose(&t->f);
	assert_true(raft_fixture_step_until_has_no_leader(&t->f, 10000));
	poll_all(t);
	raft_fixture_elect(&t->f, 1); /* clock 100 s behind */
	assert_true(step_until_ready(t, 1, 1000));
	assert_int_equal(propose_add(t, 1, "t", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 2000));
	assert_int_equal(p.status, REPLICA_OK);
	assert_true(raft_fixture_step_until_applied(&t->f, N, p.index, 2000));
	for (i = 0; i < N; i++) {
		assert_int_equal(t->s[i].fsm->violations, 0);
		assert_true(t->s[i].fsm->g[GROUP].last_now_ms >= before);
	}
	/* The group's time is ahead of the new leader's clock: it still
	 * flows (at half speed), it does not stand still. */
	before = t->s[1].fsm->g[GROUP].last_now_ms;
	raft_fixture_step_until_elapsed(&t->f, 4000);
	poll_all(t);
	assert_int_equal(propose_add(t, 1, "t", &p, &lid), 0);
	assert_true(step_until_done(t, &p, 1, 2000));
	assert_int_equal(p.status, REPLICA_OK);
	assert_true(t->s[1].fsm->g[GROUP].last_now_ms >= before + 1500);
	assert_true(t->s[1].fsm->g[GROUP].last_now_ms <
	            EPOCH + 5000 + raft_fixture_time(&t->f));
	assert_int_equal(t->s[2].fsm->g[GROUP].leader_down, 1);
	assert_int_equal(t->s[1].fsm->g[GROUP].leader_up, 1);
}

/* Snapshots are manifests; a follower that missed compacted entries gets
 * the snapshot, fetches the state, imports it and catches up. */
static void test_snapshot_install(void **state)
{
	struct t *t = *state;
	struct replica_stats st;
	struct prop p;
	uint64_t lid;
	unsigned i, k;

	for (i = 0; i < N; i++) {
		raft_set_snapshot_threshold(raft_fixture_get(&t->f, i), 8);
		raft_set_snapshot_trailing(raft_fixture_get(&t->f, i), 2);
	}
	raft_fixture_elect(&t->f, 0);
	assert_true(step_until_ready(t, 0, 1000));
	raft_fixture_kill(&t->f, 2);
	for (k = 0; k < 40; k++) {
		assert_int_equal(propose_add(t, 0, "s", &p, &lid), 0);
		assert_true(step_until_done(t, &p, 1, 2000));
		assert_int_equal(p.status, REPLICA_OK);
	}
	replica_stats(t->s[0].rp, &st);
	assert_true(st.snapshots >= 3);
	assert_true(raft_fixture_get(&t->f, 0)->log.snapshot.last_index > 8);
	raft_fixture_revive(&t->f, 2);
	/* The revived server may force an election: retry until one more
	 * command commits (a lost one may still have been applied). */
	for (k = 0; k < 10; k++) {
		unsigned l, j;
		for (j = 0; j < 20000 && (l = leader(t)) == N; j++) {
			step(t, 1);
		}
		assert_true(l < N);
		assert_int_equal(propose_add(t, l, "s", &p, &lid), 0);
		assert_true(step_until_done(t, &p, 1, 5000));
		if (p.status == REPLICA_OK) {
			break;
		}
		assert_int_equal(p.status, REPLICA_ELEADERSHIPLOST);
	}
	assert_int_equal(p.status, REPLICA_OK);
	assert_true(raft_fixture_step_until_applied(&t->f, N, p.index, 20000));
	replica_stats(t->s[2].rp, &st);
	assert_int_equal(st.imports, 1);
	assert_true(st.restores >= 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(testfsm_counter(t->s[i].fsm, GROUP, "s"),
		                 p.value);
		assert_int_equal(t->s[i].fsm->violations, 0);
	}
	assert_int_equal(t->s[2].fsm->imports, 1);
	assert_true(p.value >= 41);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reads_sole_voter, setup1,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_reads_confirmed, setup_confirm,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_leader_changes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_clock_skew, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reserve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_install, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
