/* raft/group.c on a real libuv loop with raft/io.c on a temporary RocksDB,
 * single node: bootstrap, self-election, many proposals across groups
 * applied exactly once with their results, group commit, linearizable
 * reads, restart without re-applying, snapshots and log compaction (by
 * entries, by bytes, trailing entries bounded by bytes), stop
 * and failure paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/entry.h"
#include "raft/group.h"
#include "tests/unit/testdb.h"
#include "tests/unit/testfsm.h"

#define NODE 1
#define ADDR "127.0.0.1:7000"
#define MAX_G 9 /* meta group 0 + 8 data groups */

struct node {
	uv_loop_t loop;
	struct testdb db;
	struct testfsm *fsm;
	struct rio_store *store;
	struct group_mgr *m;
	bool closed;
	int failures;
	uint32_t failed_group;
};

static void on_failed(void *data, uint32_t group, const char *msg)
{
	struct node *n = data;
	(void)msg;
	n->failures++;
	n->failed_group = group;
}

static void node_open(struct node *n, const struct group_params *dflt)
{
	char err[RAFT_ERRMSG_BUF_SIZE];
	struct rio_store_options so = {0};
	char waldir[300];
	struct group_options o = {0};

	so.seed = 7;
	so.tick_ms = 20;
	snprintf(waldir, sizeof waldir, "%s/raftwal", n->db.dir);
	so.wal_dir = waldir;
	assert_int_equal(rio_store_init(&n->store, &n->loop, n->db.db,
	                                n->db.log, n->db.state, &so, err),
	                 0);
	o.node_id = NODE;
	o.address = ADDR;
	if (dflt != NULL) {
		o.defaults = *dflt;
	}
	o.on_failed = on_failed;
	o.on_failed_data = n;
	assert_int_equal(group_mgr_init(&n->m, &n->loop, n->store, &o), 0);
}

/* Creates, bootstraps (unless already bootstrapped) and starts groups
 * 0..count-1 with `p`. */
static void groups_up(struct node *n, unsigned count,
                      const struct group_params *p)
{
	struct group_member me = {NODE, ADDR};
	unsigned g;
	for (g = 0; g < count; g++) {
		int rv;
		assert_int_equal(group_create(n->m, g, &n->fsm->fsm, p), 0);
		rv = group_bootstrap(n->m, g, &me, 1);
		assert_true(rv == 0 || rv == REPLICA_EEXIST);
		assert_int_equal(group_start(n->m, g), 0);
	}
}

static bool all_ready(struct node *n, unsigned count)
{
	unsigned g;
	for (g = 0; g < count; g++) {
		struct group_status st;
		assert_int_equal(group_status(n->m, g, &st), 0);
		if (!st.ready) {
			return false;
		}
	}
	return true;
}

static void run_until_ready(struct node *n, unsigned count)
{
	int guard = 0;
	while (!all_ready(n, count)) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
}

static void mgr_closed(struct group_mgr *m, void *data)
{
	struct node *n = data;
	(void)m;
	n->closed = true;
}

static void store_closed(struct rio_store *s, void *data)
{
	struct node *n = data;
	(void)s;
	n->closed = true;
}

static void node_close(struct node *n)
{
	n->closed = false;
	group_mgr_close(n->m, mgr_closed, n);
	while (!n->closed) {
		uv_run(&n->loop, UV_RUN_ONCE);
	}
	group_mgr_free(n->m);
	n->m = NULL;
	n->closed = false;
	rio_store_close(n->store, store_closed, n);
	while (!n->closed) {
		uv_run(&n->loop, UV_RUN_ONCE);
	}
	rio_store_free(n->store);
	n->store = NULL;
}

static void node_restart(struct node *n, const struct group_params *dflt)
{
	node_close(n);
	testdb_reopen(&n->db);
	testfsm_reset(n->fsm, n->db.db, n->db.data);
	node_open(n, dflt);
}

static int setup(void **state)
{
	struct node *n = calloc(1, sizeof *n);
	uv_loop_init(&n->loop);
	testdb_create(&n->db);
	n->fsm = calloc(1, sizeof *n->fsm);
	testfsm_init(n->fsm, n->db.db, n->db.data, 1);
	node_open(n, NULL);
	*state = n;
	return 0;
}

static int teardown(void **state)
{
	struct node *n = *state;
	if (n->m != NULL) {
		node_close(n);
	}
	assert_int_equal(uv_loop_close(&n->loop), 0);
	testfsm_close(n->fsm);
	free(n->fsm);
	testdb_destroy(&n->db);
	free(n);
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

/* Closed-loop load: `window` commands in flight per group. */
struct load {
	struct node *n;
	unsigned groups;
	unsigned window;
	uint64_t total; /* commands to propose in all */
	uint64_t proposed;
	uint64_t completed;
	uint64_t ok;
	uint64_t count[MAX_G]; /* OK results per group */
	uint64_t last_idx[MAX_G];
	uint64_t bad; /* out-of-order or wrong results */
};

struct op {
	struct load *l;
	uint32_t group;
};

static void load_cb(void *data, int status, uint8_t *result, size_t len);

static void load_propose(struct load *l, uint32_t group)
{
	uint8_t cmd[32];
	size_t n = testfsm_cmd_add(cmd, "c", 1);
	struct op *op;
	uint64_t lid;

	if (l->proposed >= l->total) {
		return;
	}
	op = malloc(sizeof *op);
	op->l = l;
	op->group = group;
	assert_int_equal(
	    group_propose(l->n->m, group, cmd, n, load_cb, op, &lid), 0);
	l->proposed++;
}

static void load_cb(void *data, int status, uint8_t *result, size_t len)
{
	struct op *op = data;
	struct load *l = op->l;
	uint32_t g = op->group;

	l->completed++;
	if (status == REPLICA_OK && len == 16) {
		uint64_t value = get64(result), index = get64(result + 8);
		l->ok++;
		l->count[g]++;
		/* Results arrive in proposal order: the counter climbs by one
		 * and the entry index never goes back. */
		if (value != l->count[g] || index < l->last_idx[g]) {
			l->bad++;
		}
		l->last_idx[g] = index;
	} else {
		l->bad++;
	}
	free(result);
	free(op);
	load_propose(l, g);
}

static void run_load(struct node *n, struct load *l)
{
	unsigned g, w;
	int guard = 0;
	l->n = n;
	for (w = 0; w < l->window; w++) {
		for (g = 0; g < l->groups; g++) {
			load_propose(l, g);
		}
	}
	while (l->completed < l->total) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 10000000);
	}
}

struct rd {
	struct node *n;
	uint32_t group;
	uint64_t expect;
	int status;
	bool done;
	bool saw;
};

static void read_cb(void *data, int status)
{
	struct rd *r = data;
	r->done = true;
	r->status = status;
	/* Served after the barrier: local state has every earlier write. */
	r->saw = testfsm_counter(r->n->fsm, r->group, "c") >= r->expect;
}

static void test_many_groups(void **state)
{
	struct node *n = *state;
	struct load l = {0};
	struct rio_stats rs;
	uint64_t entries = 0, before[MAX_G];
	struct rd r[MAX_G];
	unsigned g;
	int guard;

	groups_up(n, MAX_G, NULL);
	run_until_ready(n, MAX_G);
	for (g = 0; g < MAX_G; g++) {
		assert_int_equal(n->fsm->g[g].leader_up, 1);
	}
	l.groups = MAX_G;
	l.window = 64;
	l.total = 20000;
	run_load(n, &l);
	assert_int_equal(l.ok, 20000);
	assert_int_equal(l.bad, 0);
	for (g = 0; g < MAX_G; g++) {
		struct group_status st;
		assert_int_equal(testfsm_counter(n->fsm, g, "c"), l.count[g]);
		assert_int_equal(group_status(n->m, g, &st), 0);
		assert_int_equal(st.role, GROUP_ROLE_LEADER);
		assert_int_equal(st.leader_id, NODE);
		assert_string_equal(st.leader_address, ADDR);
		assert_int_equal(st.n_voters, 1);
		assert_int_equal(st.voters[0], NODE);
		assert_int_equal(st.term, 1);
		assert_true(st.applied_index >= n->fsm->g[g].applied);
		assert_int_equal(st.stats.cmds_applied, l.count[g]);
		entries += st.stats.entries_proposed;
	}
	/* Group commit: far fewer entries than commands, few fsyncs. */
	rio_store_stats(n->store, &rs);
	assert_true(entries * 4 < l.total);
	assert_true(rs.syncs * 4 < l.total);
	assert_true(rs.max_groups > 1);
	assert_int_equal(n->fsm->violations, 0);

	/* A read queued in the same turn as a write sees it. */
	for (g = 0; g < MAX_G; g++) {
		uint8_t cmd[32];
		size_t len = testfsm_cmd_add(cmd, "c", 1);
		struct op *op = malloc(sizeof *op);
		op->l = &l;
		op->group = g;
		l.total++;
		l.proposed++;
		assert_int_equal(
		    group_propose(n->m, g, cmd, len, load_cb, op, NULL), 0);
		r[g].n = n;
		r[g].group = g;
		r[g].expect = l.count[g] + 1;
		r[g].done = false;
		assert_int_equal(group_read(n->m, g, read_cb, &r[g], NULL), 0);
	}
	guard = 0;
	for (g = 0; g < MAX_G; g++) {
		while (!r[g].done) {
			uv_run(&n->loop, UV_RUN_ONCE);
			assert_true(++guard < 100000);
		}
		assert_int_equal(r[g].status, REPLICA_OK);
		assert_true(r[g].saw);
	}
	while (l.completed < l.total) {
		uv_run(&n->loop, UV_RUN_ONCE);
	}
	assert_int_equal(l.bad, 0);

	/* Restart: state and applied indexes survive, nothing is applied
	 * twice. */
	for (g = 0; g < MAX_G; g++) {
		before[g] = testfsm_stored_applied(n->fsm, g);
		assert_true(before[g] > 0);
	}
	node_restart(n, NULL);
	n->fsm->apply_calls = 0;
	groups_up(n, MAX_G, NULL);
	run_until_ready(n, MAX_G);
	assert_int_equal(n->fsm->apply_calls, 0);
	for (g = 0; g < MAX_G; g++) {
		struct group_status st;
		assert_int_equal(testfsm_counter(n->fsm, g, "c"), l.count[g]);
		assert_int_equal(testfsm_stored_applied(n->fsm, g), before[g]);
		assert_int_equal(group_status(n->m, g, &st), 0);
		assert_true(st.applied_index >= before[g]);
		assert_true(st.stats.entries_skipped > 0);
	}
	/* And the groups go on from there. */
	memset(&l, 0, sizeof l);
	for (g = 0; g < MAX_G; g++) {
		l.count[g] = testfsm_counter(n->fsm, g, "c");
	}
	l.groups = MAX_G;
	l.window = 4;
	l.total = 100;
	run_load(n, &l);
	assert_int_equal(l.bad, 0);
	assert_int_equal(n->fsm->violations, 0);
}

static uint64_t count_log_keys(struct node *n, uint32_t group)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it =
	    rocksdb_create_iterator_cf(n->db.db, ro, n->db.log);
	uint8_t k[4] = {(uint8_t)(group >> 24), (uint8_t)(group >> 16),
	                (uint8_t)(group >> 8), (uint8_t)group};
	uint64_t count = 0;
	for (rocksdb_iter_seek(it, (const char *)k, 4); rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t len;
		const char *key = rocksdb_iter_key(it, &len);
		if (len < 4 || memcmp(key, k, 4) != 0) {
			break;
		}
		count++;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return count;
}

static void test_snapshots(void **state)
{
	struct node *n = *state;
	struct group_params p = {0};
	struct group_status st;
	struct load l = {0};
	uint64_t before;

	p.snapshot_threshold = 16;
	p.snapshot_trailing = 4;
	groups_up(n, 2, &p);
	run_until_ready(n, 2);
	l.groups = 2;
	l.window = 1; /* one command per entry: many entries */
	l.total = 600;
	run_load(n, &l);
	assert_int_equal(l.bad, 0);
	assert_int_equal(group_status(n->m, 1, &st), 0);
	assert_true(st.stats.snapshots >= 10);
	assert_true(st.snapshot_index > 200);
	/* The state was synced before compaction dropped log entries. */
	assert_true(atomic_load(&n->fsm->syncs) >= 10);
	/* Compaction bounds the log on disk. */
	assert_true(count_log_keys(n, 1) <= 16 + 4 + 8);
	before = testfsm_stored_applied(n->fsm, 1);

	node_restart(n, NULL);
	n->fsm->apply_calls = 0;
	groups_up(n, 2, &p);
	run_until_ready(n, 2);
	assert_int_equal(n->fsm->apply_calls, 0);
	assert_int_equal(testfsm_counter(n->fsm, 1, "c"), l.count[1]);
	assert_int_equal(testfsm_stored_applied(n->fsm, 1), before);
	assert_int_equal(group_status(n->m, 1, &st), 0);
	assert_true(st.snapshot_index > 200);
	assert_int_equal(st.stats.restores, 1);
	assert_true(st.applied_index >= before);
	/* Continue after the restored snapshot. */
	memset(&l, 0, sizeof l);
	l.count[0] = testfsm_counter(n->fsm, 0, "c");
	l.count[1] = testfsm_counter(n->fsm, 1, "c");
	l.groups = 2;
	l.window = 2;
	l.total = 50;
	run_load(n, &l);
	assert_int_equal(l.bad, 0);
}

/* libraft snapshots by entry count; raft/ also forces one by bytes. */
static void test_snapshot_bytes(void **state)
{
	struct node *n = *state;
	struct group_params p = {0};
	struct group_status st;
	struct load l = {0};

	p.snapshot_threshold = 100000;
	p.snapshot_bytes = 2000;
	groups_up(n, 1, &p);
	run_until_ready(n, 1);
	l.groups = 1;
	l.window = 1;
	l.total = 300; /* ~40 bytes per entry: a snapshot every ~50 */
	run_load(n, &l);
	assert_int_equal(group_status(n->m, 0, &st), 0);
	assert_true(st.stats.snapshots >= 3);
}

/* With large entries the trailing count shrinks to keep about
 * snapshot_trailing_bytes after a snapshot (down to 16 entries), so that
 * compacted entries die in the raft_log memtable; never above the
 * configured count. Group 2's target holds exactly 32 of the load's
 * entries (all of one size), so its count lands on 32. */
static void test_snapshot_trailing_bytes(void **state)
{
	struct node *n = *state;
	struct group_member me = {NODE, ADDR};
	struct group_params p[3] = {{0}, {0}, {0}};
	struct group_status st;
	struct load l = {0};
	uint8_t cmd[32];
	uint64_t since, keys, entry_bytes;
	unsigned g;

	entry_bytes = ENTRY_HEADER_SIZE + 4 + testfsm_cmd_add(cmd, "c", 1);
	for (g = 0; g < 3; g++) {
		p[g].snapshot_threshold = 64;
		p[g].snapshot_trailing = 48;
	}
	p[0].snapshot_trailing_bytes = 1; /* any entry is "large" */
	p[1].snapshot_trailing_bytes = 1 << 20;
	p[2].snapshot_trailing_bytes = 32 * entry_bytes;
	for (g = 0; g < 3; g++) {
		assert_int_equal(group_create(n->m, g, &n->fsm->fsm, &p[g]), 0);
		assert_int_equal(group_bootstrap(n->m, g, &me, 1), 0);
		assert_int_equal(group_start(n->m, g), 0);
	}
	run_until_ready(n, 3);
	l.groups = 3;
	l.window = 1; /* one command per entry */
	l.total = 1200;
	run_load(n, &l);
	assert_int_equal(l.bad, 0);
	for (g = 0; g < 3; g++) {
		assert_int_equal(group_status(n->m, g, &st), 0);
		assert_true(st.stats.snapshots >= 3);
		since = st.last_index - st.snapshot_index;
		keys = count_log_keys(n, g);
		if (g == 0) {
			assert_true(keys <= since + 16 + 1);
		} else if (g == 1) {
			assert_true(keys + 1 >= since + 48);
		} else {
			assert_true(keys + 1 >= since + 32);
			assert_true(keys <= since + 32 + 1);
		}
	}
}

struct once {
	int calls;
	int status;
};

static void once_cb(void *data, int status, uint8_t *result, size_t len)
{
	struct once *o = data;
	(void)len;
	o->calls++;
	o->status = status;
	free(result);
}

static void test_errors_and_stop(void **state)
{
	struct node *n = *state;
	struct group_params p = {0};
	struct once o[4] = {{0}};
	uint8_t big[300];
	uint64_t lid = 99;
	int guard = 0;

	p.max_entry_bytes = 256;
	groups_up(n, 2, &p);
	/* Proposals before the first barrier are queued, not refused. */
	assert_int_equal(group_propose(n->m, 1, "N", 1, once_cb, &o[0], &lid),
	                 0);
	assert_int_equal(group_propose(n->m, 7, "N", 1, once_cb, &o[1], &lid),
	                 REPLICA_ENOGROUP);
	assert_int_equal(lid, 0);
	memset(big, 'N', sizeof big);
	assert_int_equal(
	    group_propose(n->m, 1, big, sizeof big, once_cb, &o[1], &lid),
	    REPLICA_ETOOBIG);
	assert_int_equal(group_create(n->m, 1, &n->fsm->fsm, NULL),
	                 REPLICA_EEXIST);
	while (o[0].calls == 0) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	assert_int_equal(o[0].status, REPLICA_OK);

	/* Stopping a group with work queued and in flight: every callback
	 * runs once. */
	assert_int_equal(group_propose(n->m, 1, "N", 1, once_cb, &o[1], &lid),
	                 0);
	uv_run(&n->loop, UV_RUN_NOWAIT);
	assert_int_equal(group_propose(n->m, 1, "N", 1, once_cb, &o[2], &lid),
	                 0);
	assert_int_equal(group_stop(n->m, 1), 0);
	assert_int_equal(group_propose(n->m, 1, "N", 1, once_cb, &o[3], &lid),
	                 REPLICA_ESHUTDOWN);
	guard = 0;
	while (o[1].calls == 0 || o[2].calls == 0) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	while (group_ids(n->m, NULL, 0) != 1) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	assert_int_equal(o[1].calls, 1);
	assert_int_equal(o[2].calls, 1);
	assert_int_equal(o[3].calls, 0);
	assert_true(o[2].status == REPLICA_ESHUTDOWN ||
	            o[2].status == REPLICA_ELEADERSHIPLOST ||
	            o[2].status == REPLICA_OK);
	{
		uint32_t ids[4];
		assert_int_equal(group_ids(n->m, ids, 4), 1);
		assert_int_equal(ids[0], 0);
	}
}

static void test_apply_failure(void **state)
{
	struct node *n = *state;
	struct once o[3] = {{0}};
	struct group_status st;
	uint64_t lid;
	int guard = 0;

	groups_up(n, 1, NULL);
	run_until_ready(n, 1);
	/* Entries: 1 configuration, 2 the first barrier, 3 the command. */
	n->fsm->fail_apply_at = 4;
	assert_int_equal(group_propose(n->m, 0, "N", 1, once_cb, &o[0], &lid),
	                 0);
	while (o[0].calls == 0) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	assert_int_equal(o[0].status, REPLICA_OK);
	assert_int_equal(group_propose(n->m, 0, "N", 1, once_cb, &o[1], &lid),
	                 0);
	while (o[1].calls == 0) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	assert_int_not_equal(o[1].status, REPLICA_OK);
	while (n->failures == 0) {
		uv_run(&n->loop, UV_RUN_ONCE);
		assert_true(++guard < 100000);
	}
	assert_int_equal(n->failed_group, 0);
	assert_int_equal(group_status(n->m, 0, &st), 0);
	assert_true(st.failed);
	assert_int_equal(st.role, GROUP_ROLE_UNAVAILABLE);
	assert_non_null(strstr(st.message, "failed to apply"));
	assert_int_equal(group_propose(n->m, 0, "N", 1, once_cb, &o[2], &lid),
	                 REPLICA_ESHUTDOWN);
	n->fsm->fail_apply_at = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_many_groups, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshots, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_bytes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_trailing_bytes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_errors_and_stop, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_apply_failure, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
