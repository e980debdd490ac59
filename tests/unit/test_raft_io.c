/* raft/io.c against the raft_io contract, driven directly (no libraft):
 * callback order and timing, restart, truncate, snapshots, term/vote,
 * the sizes of the newest entries and the snapshot index,
 * group commit across groups, held sends, and a real crash (SIGKILL of a
 * child process) between append and callback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "raft/io.h"
#include "tests/unit/testdb.h"

#define MAX_GROUPS 16

struct fx {
	uv_loop_t loop;
	struct testdb db;
	struct rio_store *s;
	struct raft_io io[MAX_GROUPS];
	bool open[MAX_GROUPS];
	int sync_calls[MAX_GROUPS];
	int ticks;
	int sends; /* hook calls */
	uint32_t sent_group;
	bool store_closed;
	int closed;
	uint64_t wal_segment_bytes; /* for the next store_open; 0 = default */
};

static int sync_hook(void *data)
{
	int *n = data;
	(*n)++;
	return 0;
}

static void store_open(struct fx *f)
{
	char err[RAFT_ERRMSG_BUF_SIZE];
	struct rio_store_options o = {0};
	char waldir[300];
	o.seed = 42;
	o.tick_ms = 10;
	snprintf(waldir, sizeof waldir, "%s/raftwal", f->db.dir);
	o.wal_dir = waldir;
	o.wal_segment_bytes = f->wal_segment_bytes;
	assert_int_equal(rio_store_init(&f->s, &f->loop, f->db.db, f->db.log,
	                                f->db.state, &o, err),
	                 0);
}

static void io_open(struct fx *f, unsigned i, uint32_t group)
{
	struct rio_hooks h = {0};
	h.data = &f->sync_calls[i];
	h.sync = sync_hook;
	f->io[i].data = f;
	assert_int_equal(rio_init(&f->io[i], f->s, group, &h), 0);
	assert_int_equal(f->io[i].init(&f->io[i], 1, "1"), 0);
	f->open[i] = true;
}

static void run_until(struct fx *f, const int *counter, int target)
{
	int guard = 0;
	while (*counter < target) {
		uv_run(&f->loop, UV_RUN_ONCE);
		assert_true(++guard < 1000000);
	}
}

static void io_closed(struct raft_io *io)
{
	struct fx *f = io->data;
	f->closed++;
	rio_release(io);
}

static void store_closed(struct rio_store *s, void *data)
{
	struct fx *f = data;
	(void)s;
	f->store_closed = true;
}

static void close_all(struct fx *f)
{
	int want = 0;
	unsigned i;
	f->closed = 0;
	for (i = 0; i < MAX_GROUPS; i++) {
		if (f->open[i]) {
			f->io[i].close(&f->io[i], io_closed);
			f->open[i] = false;
			want++;
		}
	}
	run_until(f, &f->closed, want);
	f->store_closed = false;
	rio_store_close(f->s, store_closed, f);
	while (!f->store_closed) {
		uv_run(&f->loop, UV_RUN_ONCE);
	}
	rio_store_free(f->s);
	f->s = NULL;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	uv_loop_init(&f->loop);
	testdb_create(&f->db);
	store_open(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (f->s != NULL) {
		close_all(f);
	}
	assert_int_equal(uv_loop_close(&f->loop), 0);
	testdb_destroy(&f->db);
	free(f);
	return 0;
}

/* Reopens the database and the store (a clean restart). */
static void restart(struct fx *f)
{
	close_all(f);
	testdb_reopen(&f->db);
	store_open(f);
}

struct loaded {
	raft_term term;
	raft_id vote;
	struct raft_snapshot *snap;
	raft_index start;
	struct raft_entry *entries;
	size_t n;
};

static void load(struct fx *f, unsigned i, struct loaded *l)
{
	assert_int_equal(f->io[i].load(&f->io[i], &l->term, &l->vote, &l->snap,
	                               &l->start, &l->entries, &l->n),
	                 0);
}

static void loaded_free(struct loaded *l)
{
	if (l->entries != NULL) {
		raft_free(l->entries[0].batch);
		raft_free(l->entries);
	}
	if (l->snap != NULL) {
		unsigned j;
		raft_configuration_close(&l->snap->configuration);
		for (j = 0; j < l->snap->n_bufs; j++) {
			raft_free(l->snap->bufs[j].base);
		}
		raft_free(l->snap->bufs);
		raft_free(l->snap);
	}
	memset(l, 0, sizeof *l);
}

/* Payload of entry `index` in the tests: deterministic bytes. */
static void make_entry(struct raft_entry *e, raft_term term, uint64_t index,
                       size_t len)
{
	uint8_t *p = raft_malloc(len);
	size_t i;
	for (i = 0; i < len; i++) {
		p[i] = (uint8_t)(index * 31 + i);
	}
	e->term = term;
	e->type = RAFT_COMMAND;
	e->buf.base = p;
	e->buf.len = len;
	e->batch = NULL;
}

static bool entry_ok(const struct raft_entry *e, raft_term term, uint64_t index,
                     size_t len)
{
	const uint8_t *p = e->buf.base;
	size_t i;
	if (e->term != term || e->type != RAFT_COMMAND || e->buf.len != len) {
		return false;
	}
	for (i = 0; i < len; i++) {
		if (p[i] != (uint8_t)(index * 31 + i)) {
			return false;
		}
	}
	return true;
}

struct append_req {
	struct raft_io_append req;
	struct raft_entry e[4];
	unsigned n;
	int status;
	int *order;   /* where to record completion order */
	int *counter; /* completions so far */
	int id;
};

static void append_cb(struct raft_io_append *req, int status)
{
	struct append_req *a = req->data;
	unsigned i;
	a->status = status;
	a->order[(*a->counter)++] = a->id;
	for (i = 0; i < a->n; i++) {
		raft_free(a->e[i].buf.base);
	}
}

static void submit_append(struct fx *f, unsigned i, struct append_req *a,
                          raft_term term, uint64_t first, unsigned n,
                          size_t len)
{
	unsigned j;
	a->n = n;
	a->req.data = a;
	for (j = 0; j < n; j++) {
		make_entry(&a->e[j], term, first + j, len);
	}
	assert_int_equal(
	    f->io[i].append(&f->io[i], &a->req, a->e, n, append_cb), 0);
}

/* Appends `n` entries of `len` bytes from `first` on instance `i` and runs
 * the loop until the append succeeded. */
static void append_sync(struct fx *f, unsigned i, raft_term term,
                        uint64_t first, unsigned n, size_t len)
{
	struct append_req a;
	int order[1], done = 0;

	a.order = order;
	a.counter = &done;
	a.id = 0;
	submit_append(f, i, &a, term, first, n, len);
	run_until(f, &done, 1);
	assert_int_equal(a.status, 0);
}

static int init_with(struct fx *f, struct testdb *db, const char *waldir,
                     char *err)
{
	struct rio_store_options o = {0};
	o.wal_dir = waldir;
	return rio_store_init(&f->s, &f->loop, db->db, db->log, db->state, &o,
	                      err);
}

/* Appends complete in order, only after a sync, all in one batch. */
static void test_append_order(void **state)
{
	struct fx *f = *state;
	struct append_req a[3];
	struct loaded l = {0};
	struct rio_stats st;
	int order[3], done = 0;
	int k;

	io_open(f, 0, 7);
	load(f, 0, &l);
	assert_int_equal(l.start, 1);
	assert_int_equal(l.n, 0);
	assert_null(l.snap);
	for (k = 0; k < 3; k++) {
		a[k].order = order;
		a[k].counter = &done;
		a[k].id = k;
		a[k].status = -1;
		submit_append(f, 0, &a[k], 1, 1 + 2 * (uint64_t)k, 2, 100);
	}
	/* Nothing completes inside append. */
	assert_int_equal(done, 0);
	run_until(f, &done, 3);
	for (k = 0; k < 3; k++) {
		assert_int_equal(order[k], k);
		assert_int_equal(a[k].status, 0);
	}
	rio_store_stats(f->s, &st);
	assert_int_equal(st.syncs, 1);
	assert_int_equal(st.entries, 6);
	assert_int_equal(st.appends, 3);

	restart(f);
	io_open(f, 0, 7);
	load(f, 0, &l);
	assert_int_equal(l.start, 1);
	assert_int_equal(l.n, 6);
	for (k = 0; k < 6; k++) {
		assert_true(entry_ok(&l.entries[k], 1, 1 + (uint64_t)k, 100));
	}
	loaded_free(&l);
}

/* The WAL moves to new segments as it grows; older ones are dropped once
 * a flush put what they wrote in SST files; a restart loads everything. */
static void test_wal_rotation(void **state)
{
	struct fx *f = *state;
	struct loaded l = {0};
	struct rio_stats st;
	int guard = 0;
	uint64_t index = 1;

	f->wal_segment_bytes = 16 << 10;
	restart(f);
	io_open(f, 0, 9);
	load(f, 0, &l);
	for (int k = 0; k < 100; k++) {
		append_sync(f, 0, 1, index, 2, 1000);
		index += 2;
	}
	rio_store_stats(f->s, &st);
	assert_true(st.wal_rotations >= 10);
	/* The last rotation's release may still be running on the thread
	 * pool (bounded in time, not in loop passes: a loaded machine). */
	while (st.wal_segments > 2 && ++guard < 30000) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		usleep(1000);
		rio_store_stats(f->s, &st);
	}
	assert_true(st.wal_releases >= 1);
	assert_int_equal(st.wal_release_errors, 0);
	assert_true(st.wal_segments <= 2);

	restart(f);
	rio_store_stats(f->s, &st);
	assert_int_equal(st.wal_segments, 1); /* replayed, flushed, dropped */
	io_open(f, 0, 9);
	load(f, 0, &l);
	assert_int_equal(l.start, 1);
	assert_int_equal(l.n, 200);
	for (uint64_t k = 0; k < 200; k++) {
		assert_true(entry_ok(&l.entries[k], 1, 1 + k, 1000));
	}
	loaded_free(&l);
}

/* Damage in an older WAL segment (not a torn tail) refuses the store, with
 * the segment named; nothing is half-opened. */
static void test_wal_corrupt_refused(void **state)
{
	struct fx *f = *state;
	char path[400], err[RAFT_ERRMSG_BUF_SIZE];
	uint8_t b;
	int fd;

	io_open(f, 0, 3);
	append_sync(f, 0, 1, 1, 1, 500);
	close_all(f); /* segment 1 holds the append */
	testdb_reopen(&f->db);

	/* Segment 1 is an older one once a second exists. */
	snprintf(path, sizeof path, "%s/raftwal/%020d.seg", f->db.dir, 2);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "LSWAL001", 8), 8);
	close(fd);
	snprintf(path, sizeof path, "%s/raftwal/%020d.seg", f->db.dir, 1);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, 100), 1);
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, 100), 1);
	close(fd);

	snprintf(path, sizeof path, "%s/raftwal", f->db.dir);
	assert_int_equal(init_with(f, &f->db, path, err), RAFT_IOERR);
	assert_null(f->s);
	assert_non_null(strstr(err, "corrupt"));
	assert_non_null(strstr(err, "00000000000000000001.seg"));
}

/* A database and a WAL directory that do not belong together refuse to
 * start: records of one log replayed into another node's state, or a
 * database whose WAL is gone. */
static void test_wal_mark(void **state)
{
	struct fx *f = *state;
	struct testdb other;
	struct loaded l = {0};
	char wal1[300], wal2[300], err[RAFT_ERRMSG_BUF_SIZE], cmd[400];

	io_open(f, 0, 5);
	append_sync(f, 0, 1, 1, 1, 300);
	close_all(f); /* the append's record stays in the WAL */
	snprintf(wal1, sizeof wal1, "%s/raftwal", f->db.dir);

	/* db/ replaced by a fresh one: the WAL's records are not its. */
	testdb_create(&other);
	assert_int_equal(init_with(f, &other, wal1, err), RAFT_IOERR);
	assert_null(f->s);
	assert_non_null(strstr(err, "no mark of it"));

	/* Another node's marked database with this WAL. */
	snprintf(wal2, sizeof wal2, "%s/raftwal", other.dir);
	assert_int_equal(init_with(f, &other, wal2, err), 0);
	close_all(f);
	assert_int_equal(init_with(f, &other, wal1, err), RAFT_IOERR);
	assert_non_null(strstr(err, "belongs to another database"));
	testdb_destroy(&other);

	/* The right pair still opens and has the entry. */
	testdb_reopen(&f->db);
	store_open(f);
	io_open(f, 0, 5);
	load(f, 0, &l);
	assert_int_equal(l.n, 1);
	assert_true(entry_ok(&l.entries[0], 1, 1, 300));
	loaded_free(&l);
	close_all(f);

	/* The WAL directory removed: refused, not silently empty. */
	snprintf(cmd, sizeof cmd, "rm -rf %s", wal1);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(init_with(f, &f->db, wal1, err), RAFT_IOERR);
	assert_non_null(strstr(err, "has no mark"));
}

/* Appends of many groups in one loop turn share one synced write. */
static void test_group_commit(void **state)
{
	struct fx *f = *state;
	struct append_req a[MAX_GROUPS];
	struct loaded l = {0};
	struct rio_stats st0, st;
	int order[MAX_GROUPS], done = 0;
	unsigned i;

	for (i = 0; i < MAX_GROUPS; i++) {
		io_open(f, i, 100 + i);
		load(f, i, &l);
		loaded_free(&l);
	}
	rio_store_stats(f->s, &st0);
	for (i = 0; i < MAX_GROUPS; i++) {
		a[i].order = order;
		a[i].counter = &done;
		a[i].id = (int)i;
		submit_append(f, i, &a[i], 1, 1, 3, 64);
	}
	run_until(f, &done, MAX_GROUPS);
	rio_store_stats(f->s, &st);
	assert_int_equal(st.syncs - st0.syncs, 1);
	assert_int_equal(st.max_groups, MAX_GROUPS);
	assert_int_equal(st.entries - st0.entries, 3 * MAX_GROUPS);

	/* A second wave while the first is being written accumulates: at
	 * most one more sync per wave, never one per group. */
	done = 0;
	for (i = 0; i < MAX_GROUPS; i++) {
		submit_append(f, i, &a[i], 1, 4, 1, 64);
	}
	run_until(f, &done, MAX_GROUPS);
	rio_store_stats(f->s, &st);
	assert_int_equal(st.syncs - st0.syncs, 2);

	restart(f);
	for (i = 0; i < MAX_GROUPS; i++) {
		unsigned k;
		io_open(f, i, 100 + i);
		load(f, i, &l);
		assert_int_equal(l.n, 4);
		for (k = 0; k < 4; k++) {
			assert_true(entry_ok(&l.entries[k], 1, 1 + k, 64));
		}
		loaded_free(&l);
	}
}

/* Submits n appends on instance 0, one loop turn each (so that each is
 * handed to the writer while earlier ones are still being written):
 * append k holds `per` entries from first + k * per, of len + k * step
 * bytes. */
static void submit_turns(struct fx *f, struct append_req *a, unsigned n,
                         int *order, int *done, uint64_t first, unsigned per,
                         size_t len, size_t step)
{
	for (unsigned k = 0; k < n; k++) {
		a[k].order = order;
		a[k].counter = done;
		a[k].id = (int)k;
		submit_append(f, 0, &a[k], 1, first + k * per, per,
		              len + k * step);
		uv_run(&f->loop, UV_RUN_NOWAIT); /* hands it to the writer */
	}
}

/* Appends handed over one loop turn at a time, while earlier ones are
 * still being written and synced, queue up behind them: they complete in
 * order, none is lost, and a restart finds every entry. */
static void test_queued_batches(void **state)
{
	struct fx *f = *state;
	enum { N = 32 };
	struct append_req a[N];
	struct loaded l = {0};
	struct rio_stats st0, st;
	int order[N], done = 0;
	unsigned i;

	io_open(f, 0, 7);
	load(f, 0, &l);
	loaded_free(&l);
	rio_store_stats(f->s, &st0);
	submit_turns(f, a, N, order, &done, 1, 2, 100, 1);
	run_until(f, &done, N);
	for (i = 0; i < N; i++) {
		assert_int_equal(order[i], (int)i);
		assert_int_equal(a[i].status, 0);
	}
	rio_store_stats(f->s, &st);
	assert_int_equal(st.appends - st0.appends, N);
	assert_int_equal(st.entries - st0.entries, 2 * N);
	assert_true(st.syncs - st0.syncs >= 1 && st.syncs - st0.syncs <= N);

	restart(f);
	io_open(f, 0, 7);
	load(f, 0, &l);
	assert_int_equal(l.n, 2 * N);
	for (i = 0; i < 2 * N; i++) {
		assert_true(entry_ok(&l.entries[i], 1, 1 + i, 100 + i / 2));
	}
	loaded_free(&l);
}

/* The size of the biggest WAL segment in `dir`. */
static off_t wal_bytes(const char *dir)
{
	char cmd[400];
	long long n = 0;
	FILE *p;

	snprintf(cmd, sizeof cmd,
	         "find %s/raftwal -name '*.seg' -printf '%%s\\n' | sort -n | "
	         "tail -1",
	         dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%lld", &n), 1);
	pclose(p);
	return (off_t)n;
}

/* A write failing in the middle of queued batches (the file size limit
 * cuts the WAL): the appends that succeeded are a prefix of the
 * submissions, every later one fails with the log's error, and a restart
 * finds every append that succeeded. */
static void test_queued_write_failure(void **state)
{
	struct fx *f = *state;
	enum { N = 12 };
	struct append_req a[N];
	struct loaded l = {0};
	struct rlimit old, lim;
	int order[N], done = 0, ok = 0;
	unsigned i;

	io_open(f, 0, 9);
	load(f, 0, &l);
	loaded_free(&l);
	append_sync(f, 0, 1, 1, 1, 100);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_IGN);
	lim = old;
	lim.rlim_cur = (rlim_t)wal_bytes(f->db.dir) + 4 * 1100;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	submit_turns(f, a, N, order, &done, 2, 1, 1000, 0);
	run_until(f, &done, N);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	for (i = 0; i < N; i++) {
		assert_int_equal(order[i], (int)i);
		if (a[i].status == 0) {
			assert_int_equal(ok, (int)i); /* a prefix */
			ok++;
		} else {
			assert_int_equal(a[i].status, RAFT_IOERR);
		}
	}
	assert_true(ok < N);
	assert_non_null(strstr(f->io[0].errmsg, "raft log"));

	restart(f);
	io_open(f, 0, 9);
	load(f, 0, &l);
	assert_true(l.n >= 1 + (size_t)ok);
	assert_true(entry_ok(&l.entries[0], 1, 1, 100));
	for (i = 0; i < (unsigned)ok; i++) {
		assert_true(entry_ok(&l.entries[1 + i], 1, 2 + i, 1000));
	}
	loaded_free(&l);
}

/* Batches are reused from turn to turn (a written batch keeps its buffer):
 * a large batch followed by small ones must write exactly the new entries,
 * nothing left over from the earlier turn, and count them right. */
static void test_batch_reuse(void **state)
{
	struct fx *f = *state;
	static const size_t sizes[] = {200000, 10, 70000, 1, 300, 150000, 5};
	const unsigned turns = sizeof sizes / sizeof sizes[0];
	struct append_req a[2];
	struct loaded l = {0};
	struct rio_stats st0, st;
	int order[2], done;
	uint64_t index = 1;
	unsigned t, k;

	io_open(f, 0, 3);
	io_open(f, 1, 4);
	load(f, 0, &l);
	loaded_free(&l);
	load(f, 1, &l);
	loaded_free(&l);
	rio_store_stats(f->s, &st0);
	for (t = 0; t < turns; t++) {
		done = 0;
		for (k = 0; k < 2; k++) {
			a[k].order = order;
			a[k].counter = &done;
			a[k].id = (int)k;
			a[k].status = -1;
			/* Group 1 appends only on even turns: its batch
			 * membership changes from turn to turn. */
			if (k == 1 && t % 2 == 1) {
				continue;
			}
			submit_append(f, k, &a[k], 1, index, 2, sizes[t]);
		}
		run_until(f, &done, t % 2 == 1 ? 1 : 2);
		assert_int_equal(a[0].status, 0);
		if (t % 2 == 0) {
			assert_int_equal(a[1].status, 0);
		}
		rio_store_stats(f->s, &st);
		assert_int_equal(st.syncs - st0.syncs, t + 1);
		index += 2;
	}
	rio_store_stats(f->s, &st);
	assert_int_equal(st.entries - st0.entries, 2 * turns + 2 * 4);
	assert_int_equal(st.max_groups, 2);

	restart(f);
	io_open(f, 0, 3);
	load(f, 0, &l);
	assert_int_equal(l.start, 1);
	assert_int_equal(l.n, 2 * turns);
	for (t = 0; t < turns; t++) {
		for (k = 0; k < 2; k++) {
			uint64_t i = 1 + 2 * (uint64_t)t + k;
			assert_true(
			    entry_ok(&l.entries[i - 1], 1, i, sizes[t]));
		}
	}
	loaded_free(&l);
	/* Group 1's log runs on from 1 whatever payloads it was given. */
	io_open(f, 1, 4);
	load(f, 1, &l);
	assert_int_equal(l.n, 8);
	for (k = 0; k < 8; k++) {
		t = 2 * (k / 2);
		assert_true(entry_ok(&l.entries[k], 1,
		                     1 + 2 * (uint64_t)t + k % 2, sizes[t]));
	}
	loaded_free(&l);
}

static void test_term_vote(void **state)
{
	struct fx *f = *state;
	struct loaded l = {0};
	struct append_req a;
	int order[1], done = 0;

	io_open(f, 0, 3);
	load(f, 0, &l);
	assert_int_equal(l.term, 0);
	assert_int_equal(f->io[0].set_term(&f->io[0], 5), 0);
	assert_int_equal(f->io[0].set_vote(&f->io[0], 9), 0);
	a.order = order;
	a.counter = &done;
	a.id = 0;
	submit_append(f, 0, &a, 5, 1, 1, 10);
	run_until(f, &done, 1);
	restart(f);
	io_open(f, 0, 3);
	load(f, 0, &l);
	assert_int_equal(l.term, 5);
	assert_int_equal(l.vote, 9);
	loaded_free(&l);
	/* A new term clears the vote. */
	assert_int_equal(f->io[0].set_term(&f->io[0], 6), 0);
	restart(f);
	io_open(f, 0, 3);
	load(f, 0, &l);
	assert_int_equal(l.term, 6);
	assert_int_equal(l.vote, 0);
	loaded_free(&l);
}

static void test_truncate(void **state)
{
	struct fx *f = *state;
	struct append_req a[3];
	struct loaded l = {0};
	int order[3], done = 0;
	int k;

	io_open(f, 0, 1);
	load(f, 0, &l);
	for (k = 0; k < 3; k++) {
		a[k].order = order;
		a[k].counter = &done;
		a[k].id = k;
	}
	submit_append(f, 0, &a[0], 1, 1, 4, 20);
	run_until(f, &done, 1);
	/* Truncate 3.. and append new entries at 3 in the same turn as a
	 * later append: order within the batch must hold. */
	submit_append(f, 0, &a[1], 1, 5, 1, 20);
	assert_int_equal(f->io[0].truncate(&f->io[0], 3), 0);
	submit_append(f, 0, &a[2], 2, 3, 2, 30);
	run_until(f, &done, 3);
	restart(f);
	io_open(f, 0, 1);
	load(f, 0, &l);
	assert_int_equal(l.n, 4);
	assert_true(entry_ok(&l.entries[0], 1, 1, 20));
	assert_true(entry_ok(&l.entries[1], 1, 2, 20));
	assert_true(entry_ok(&l.entries[2], 2, 3, 30));
	assert_true(entry_ok(&l.entries[3], 2, 4, 30));
	loaded_free(&l);
}

struct put_req {
	struct raft_io_snapshot_put req;
	int status;
	int *done;
};

static void put_cb(struct raft_io_snapshot_put *req, int status)
{
	struct put_req *p = req->data;
	p->status = status;
	(*p->done)++;
}

struct get_req {
	struct raft_io_snapshot_get req;
	struct raft_snapshot *snap;
	int status;
	int *done;
};

static void get_cb(struct raft_io_snapshot_get *req, struct raft_snapshot *snap,
                   int status)
{
	struct get_req *g = req->data;
	g->snap = snap;
	g->status = status;
	(*g->done)++;
}

static void make_snapshot(struct raft_snapshot *s, raft_index index,
                          raft_term term, const char *data)
{
	memset(s, 0, sizeof *s);
	s->index = index;
	s->term = term;
	raft_configuration_init(&s->configuration);
	assert_int_equal(raft_configuration_add(&s->configuration, 1,
	                                        "node-1:7000", RAFT_VOTER),
	                 0);
	assert_int_equal(raft_configuration_add(&s->configuration, 2,
	                                        "node-2:7000", RAFT_VOTER),
	                 0);
	s->configuration_index = 1;
	s->bufs = raft_malloc(sizeof *s->bufs);
	s->bufs[0].len = strlen(data);
	s->bufs[0].base = raft_malloc(s->bufs[0].len);
	memcpy(s->bufs[0].base, data, s->bufs[0].len);
	s->n_bufs = 1;
}

static void snapshot_free(struct raft_snapshot *s)
{
	raft_configuration_close(&s->configuration);
	raft_free(s->bufs[0].base);
	raft_free(s->bufs);
}

static void check_snapshot(const struct raft_snapshot *s, raft_index index,
                           const char *data)
{
	assert_int_equal(s->index, index);
	assert_int_equal(s->term, 1);
	assert_int_equal(s->configuration_index, 1);
	assert_int_equal(s->configuration.n, 2);
	assert_int_equal(s->configuration.servers[1].id, 2);
	assert_string_equal(s->configuration.servers[1].address, "node-2:7000");
	assert_int_equal(s->n_bufs, 1);
	assert_int_equal(s->bufs[0].len, strlen(data));
	assert_memory_equal(s->bufs[0].base, data, strlen(data));
}

static void test_snapshot(void **state)
{
	struct fx *f = *state;
	struct append_req a[2];
	struct put_req p = {0};
	struct get_req g = {0};
	struct raft_snapshot snap;
	struct loaded l = {0};
	int order[2], done = 0, pdone = 0, gdone = 0;
	unsigned k;

	io_open(f, 0, 4);
	load(f, 0, &l);
	for (k = 0; k < 2; k++) {
		a[k].order = order;
		a[k].counter = &done;
		a[k].id = (int)k;
	}
	submit_append(f, 0, &a[0], 1, 1, 4, 16);
	submit_append(f, 0, &a[1], 1, 5, 4, 16);
	/* Snapshot at 8 keeping 3 trailing entries: 6..8 stay. */
	make_snapshot(&snap, 8, 1, "manifest-8");
	p.done = &pdone;
	p.req.data = &p;
	assert_int_equal(
	    f->io[0].snapshot_put(&f->io[0], 3, &p.req, &snap, put_cb), 0);
	run_until(f, &pdone, 1);
	assert_int_equal(p.status, 0);
	assert_int_equal(done, 2); /* earlier appends completed first */
	assert_int_equal(f->sync_calls[0], 1);
	snapshot_free(&snap);

	g.done = &gdone;
	g.req.data = &g;
	assert_int_equal(f->io[0].snapshot_get(&f->io[0], &g.req, get_cb), 0);
	assert_int_equal(gdone, 0);
	run_until(f, &gdone, 1);
	assert_int_equal(g.status, 0);
	check_snapshot(g.snap, 8, "manifest-8");
	snapshot_free(g.snap);
	raft_free(g.snap);

	restart(f);
	io_open(f, 0, 4);
	load(f, 0, &l);
	assert_non_null(l.snap);
	check_snapshot(l.snap, 8, "manifest-8");
	assert_int_equal(l.start, 6);
	assert_int_equal(l.n, 3);
	for (k = 0; k < 3; k++) {
		assert_true(entry_ok(&l.entries[k], 1, 6 + k, 16));
	}
	loaded_free(&l);

	/* Installing a snapshot (trailing 0) replaces the whole log; the
	 * next append follows the snapshot. */
	make_snapshot(&snap, 20, 1, "manifest-20");
	pdone = 0;
	assert_int_equal(
	    f->io[0].snapshot_put(&f->io[0], 0, &p.req, &snap, put_cb), 0);
	done = 0;
	submit_append(f, 0, &a[0], 2, 21, 1, 16);
	run_until(f, &done, 1);
	assert_int_equal(pdone, 1);
	snapshot_free(&snap);
	restart(f);
	io_open(f, 0, 4);
	load(f, 0, &l);
	check_snapshot(l.snap, 20, "manifest-20");
	assert_int_equal(l.start, 21);
	assert_int_equal(l.n, 1);
	assert_true(entry_ok(&l.entries[0], 2, 21, 16));
	loaded_free(&l);
}

static void check_recent(struct fx *f, unsigned i, unsigned n, uint64_t bytes)
{
	unsigned got_n = 99;
	uint64_t got_bytes = 99;
	rio_recent_entry_bytes(&f->io[i], &got_n, &got_bytes);
	assert_int_equal(got_n, n);
	assert_int_equal(got_bytes, bytes);
}

/* Appends entries first..last, one per request, entry i of i * mul bytes. */
static void append_each(struct fx *f, unsigned i, struct append_req *a,
                        int *order, int *done, raft_term term, uint64_t first,
                        uint64_t last, size_t mul)
{
	uint64_t k;
	for (k = first; k <= last; k++) {
		struct append_req *x = &a[k - first];
		x->order = order;
		x->counter = done;
		x->id = (int)(k - first);
		submit_append(f, i, x, term, k, 1, (size_t)k * mul);
	}
}

/* The sizes of the newest entries (rio_recent_entry_bytes) follow the log
 * through appends, truncations, compaction, installs and restarts; the
 * snapshot index follows the stored snapshots. */
static void test_recent_entry_bytes(void **state)
{
	struct fx *f = *state;
	struct append_req a[24];
	struct put_req p = {0};
	struct raft_snapshot snap;
	struct loaded l = {0};
	int order[64], done = 0, pdone = 0;

	io_open(f, 0, 9);
	load(f, 0, &l);
	check_recent(f, 0, 0, 0);
	assert_int_equal(rio_snapshot_index(&f->io[0]), 0);

	/* 1..24 of 10 * i bytes: the newest 16 (9..24) count as soon as
	 * they are appended. */
	append_each(f, 0, a, order, &done, 1, 1, 24, 10);
	check_recent(f, 0, 16, 10 * (9 + 24) * 16 / 2);
	run_until(f, &done, 24);
	check_recent(f, 0, 16, 10 * (9 + 24) * 16 / 2);

	/* A follower truncation drops what it cut: 9..19 remain. */
	assert_int_equal(f->io[0].truncate(&f->io[0], 20), 0);
	check_recent(f, 0, 11, 10 * (9 + 19) * 11 / 2);
	done = 0;
	submit_append(f, 0, &a[0], 2, 20, 2, 7);
	check_recent(f, 0, 13, 10 * (9 + 19) * 11 / 2 + 2 * 7);
	/* Below every entry it knew: empty, then only what follows. */
	assert_int_equal(f->io[0].truncate(&f->io[0], 5), 0);
	check_recent(f, 0, 0, 0);
	submit_append(f, 0, &a[1], 3, 5, 1, 3);
	check_recent(f, 0, 1, 3);
	run_until(f, &done, 2);
	assert_int_equal(a[0].status, 0);
	assert_int_equal(a[1].status, 0);

	/* A restart takes the sizes from the loaded log: 1..4 and 5. */
	restart(f);
	io_open(f, 0, 9);
	load(f, 0, &l);
	assert_int_equal(l.n, 5);
	loaded_free(&l);
	check_recent(f, 0, 5, 10 + 20 + 30 + 40 + 3);

	/* 6..25 of i bytes: the newest 16 are 10..25. */
	done = 0;
	append_each(f, 0, a, order, &done, 3, 6, 25, 1);
	check_recent(f, 0, 16, (10 + 25) * 16 / 2);

	/* Compaction at 24 keeping 3 trailing drops all before 22. */
	make_snapshot(&snap, 24, 1, "manifest-24");
	p.done = &pdone;
	p.req.data = &p;
	assert_int_equal(
	    f->io[0].snapshot_put(&f->io[0], 3, &p.req, &snap, put_cb), 0);
	assert_int_equal(rio_snapshot_index(&f->io[0]), 0); /* not yet */
	run_until(f, &pdone, 1);
	assert_int_equal(p.status, 0);
	snapshot_free(&snap);
	assert_int_equal(rio_snapshot_index(&f->io[0]), 24);
	check_recent(f, 0, 4, 22 + 23 + 24 + 25);
	run_until(f, &done, 20);

	/* An installed snapshot replaces the log. */
	make_snapshot(&snap, 40, 1, "manifest-40");
	pdone = 0;
	assert_int_equal(
	    f->io[0].snapshot_put(&f->io[0], 0, &p.req, &snap, put_cb), 0);
	check_recent(f, 0, 0, 0);
	done = 0;
	submit_append(f, 0, &a[0], 4, 41, 1, 9);
	check_recent(f, 0, 1, 9);
	run_until(f, &done, 1);
	run_until(f, &pdone, 1);
	assert_int_equal(p.status, 0);
	snapshot_free(&snap);
	assert_int_equal(rio_snapshot_index(&f->io[0]), 40);

	restart(f);
	io_open(f, 0, 9);
	load(f, 0, &l);
	loaded_free(&l);
	assert_int_equal(rio_snapshot_index(&f->io[0]), 40);
	check_recent(f, 0, 1, 9);
}

/* A snapshot's state sync runs off the log writer: while one group's sync
 * is held, another group's appends still complete; the snapshot itself
 * waits for its sync. */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool entered;
	bool open;
	int calls;
};

static int gate_sync(void *data)
{
	struct gate *g = data;
	pthread_mutex_lock(&g->mu);
	g->entered = true;
	g->calls++;
	while (!g->open) {
		pthread_cond_wait(&g->cv, &g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static bool gate_entered(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	bool e = g->entered;
	pthread_mutex_unlock(&g->mu);
	return e;
}

/* Runs the loop without blocking until *counter reaches target, for at
 * most about 10 s (a writer held by the sync would never finish). */
static bool spin_until(struct fx *f, const int *counter, int target)
{
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 10000 && *counter < target; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		if (*counter < target) {
			nanosleep(&ms, NULL);
		}
	}
	return *counter >= target;
}

static void test_sync_off_writer(void **state)
{
	struct fx *f = *state;
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	                 false, false, 0};
	struct rio_hooks h = {0};
	struct append_req a[2], b;
	struct put_req p = {0};
	struct raft_snapshot snap;
	int done = 0, bdone = 0, pdone = 0;

	h.data = &g;
	h.sync = gate_sync;
	f->io[0].data = f;
	assert_int_equal(rio_init(&f->io[0], f->s, 40, &h), 0);
	assert_int_equal(f->io[0].init(&f->io[0], 1, "1"), 0);
	f->open[0] = true;
	io_open(f, 1, 41);

	int order[3];
	a[0].order = a[1].order = b.order = order;
	a[0].counter = a[1].counter = &done;
	a[0].id = 0;
	a[1].id = 1;
	submit_append(f, 0, &a[0], 1, 1, 4, 16);
	submit_append(f, 0, &a[1], 1, 5, 4, 16);
	run_until(f, &done, 2);
	make_snapshot(&snap, 8, 1, "manifest-8");
	p.done = &pdone;
	p.req.data = &p;
	assert_int_equal(
	    f->io[0].snapshot_put(&f->io[0], 3, &p.req, &snap, put_cb), 0);
	for (int i = 0; i < 10000 && !gate_entered(&g); i++) {
		struct timespec ms = {0, 1000000};
		uv_run(&f->loop, UV_RUN_NOWAIT);
		nanosleep(&ms, NULL);
	}
	assert_true(gate_entered(&g));

	/* Group 41 writes while group 40's sync is held. */
	b.counter = &bdone;
	b.id = 0;
	submit_append(f, 1, &b, 1, 1, 4, 16);
	/* Checked after the gate opens: a failure must not leave the
	 * writer held (teardown would wait for it forever). */
	bool wrote = spin_until(f, &bdone, 1);
	int snapped = pdone;

	pthread_mutex_lock(&g.mu);
	g.open = true;
	pthread_cond_signal(&g.cv);
	pthread_mutex_unlock(&g.mu);
	assert_true(wrote);
	assert_int_equal(snapped, 0);
	run_until(f, &pdone, 1);
	assert_int_equal(p.status, 0);
	assert_int_equal(g.calls, 1);
	snapshot_free(&snap);
}

/* An install libraft discards (cancelled by a close, or failed): libraft
 * frees the snapshot's buffer and configuration; before 0.17.1 it forgot
 * the array holding the buffer, which the io then frees. The callback does
 * what the linked libraft does, so ASan sees a leak or a double free if
 * the io gets it wrong either way. */
struct discard_req {
	struct raft_io_snapshot_put req;
	struct raft_snapshot *snap;
	int status;
	int done;
};

static void discard_cb(struct raft_io_snapshot_put *req, int status)
{
	struct discard_req *d = req->data;
	d->status = status;
	d->done++;
	raft_free(d->snap->bufs[0].base);
	if (dlsym(RTLD_DEFAULT, "raft_version_number") != NULL) {
		raft_free(d->snap->bufs); /* a fixed libraft frees it itself */
	}
	raft_configuration_close(&d->snap->configuration);
}

static void hold_install(void *data, uint64_t from,
                         const struct raft_snapshot *snap,
                         struct rio_install *req)
{
	struct rio_install **held = data;
	(void)from;
	(void)snap;
	*held = req;
}

static void test_install_discarded(void **state)
{
	struct fx *f = *state;
	struct rio_hooks h = {0};
	struct rio_install *held = NULL;
	struct raft_snapshot snap;
	struct discard_req d = {0};
	unsigned i;

	/* 0: cancelled while the owner transfers state; 1: its batch is
	 * written but the instance closed meanwhile. */
	for (i = 0; i < 2; i++) {
		memset(&d, 0, sizeof d);
		d.snap = &snap;
		d.req.data = &d;
		h.data = &held;
		h.install = i == 0 ? hold_install : NULL;
		f->io[0].data = f;
		assert_int_equal(rio_init(&f->io[0], f->s, 30 + i, &h), 0);
		assert_int_equal(f->io[0].init(&f->io[0], 1, "1"), 0);
		make_snapshot(&snap, 20, 1, "manifest-20");
		assert_int_equal(f->io[0].snapshot_put(&f->io[0], 0, &d.req,
		                                       &snap, discard_cb),
		                 0);
		assert_true(i == 1 || held != NULL);
		f->closed = 0;
		f->io[0].close(&f->io[0], io_closed);
		run_until(f, &f->closed, 1);
		assert_int_equal(d.done, 1);
		if (i == 0) {
			assert_int_equal(d.status, RAFT_CANCELED);
			rio_install_done(held, 0); /* only frees it now */
			held = NULL;
		}
	}
}

static void test_bootstrap(void **state)
{
	struct fx *f = *state;
	struct raft_configuration conf;
	struct loaded l = {0};

	io_open(f, 0, 2);
	raft_configuration_init(&conf);
	assert_int_equal(raft_configuration_add(&conf, 1, "a", RAFT_VOTER), 0);
	assert_int_equal(f->io[0].bootstrap(&f->io[0], &conf), 0);
	assert_int_equal(f->io[0].bootstrap(&f->io[0], &conf),
	                 RAFT_CANTBOOTSTRAP);
	load(f, 0, &l);
	assert_int_equal(l.term, 1);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.entries[0].type, RAFT_CHANGE);
	assert_int_equal(l.entries[0].term, 1);
	loaded_free(&l);
	/* recover appends a new configuration after the log. */
	assert_int_equal(f->io[0].recover(&f->io[0], &conf), 0);
	raft_configuration_close(&conf);
	load(f, 0, &l);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.entries[1].type, RAFT_CHANGE);
	loaded_free(&l);
	/* erase needs the instance gone. */
	{
		char err[RAFT_ERRMSG_BUF_SIZE];
		assert_int_equal(rio_store_erase(f->s, 2, err), RAFT_BUSY);
	}
}

struct send_req {
	struct raft_io_send req;
	int status;
	int *done;
};

static void send_cb(struct raft_io_send *req, int status)
{
	struct send_req *s = req->data;
	s->status = status;
	(*s->done)++;
}

static int send_hook(void *data, uint32_t group, const struct raft_message *m)
{
	struct fx *f = data;
	assert_int_equal(m->type, RAFT_IO_REQUEST_VOTE);
	assert_string_equal(m->server_address, "peer");
	f->sends++;
	f->sent_group = group;
	return 0;
}

static void test_send(void **state)
{
	struct fx *f = *state;
	struct raft_message m;
	struct send_req s = {0};
	struct loaded l = {0};
	struct rio_stats st;
	int done = 0;
	char peer[8];

	io_open(f, 0, 11);
	load(f, 0, &l);
	memset(&m, 0, sizeof m);
	m.type = RAFT_IO_REQUEST_VOTE;
	m.server_id = 2;
	strcpy(peer, "peer");
	m.server_address = peer;
	s.done = &done;
	s.req.data = &s;

	/* No transport: the request fails, later, without a crash. */
	assert_int_equal(f->io[0].send(&f->io[0], &s.req, &m, send_cb), 0);
	assert_int_equal(done, 0);
	run_until(f, &done, 1);
	assert_int_equal(s.status, RAFT_NOCONNECTION);

	/* With a transport and an unsynced vote, the message waits for the
	 * sync; the address is copied. */
	rio_store_set_send(f->s, send_hook, f);
	assert_int_equal(f->io[0].set_term(&f->io[0], 2), 0);
	assert_int_equal(f->io[0].set_vote(&f->io[0], 1), 0);
	assert_int_equal(f->io[0].send(&f->io[0], &s.req, &m, send_cb), 0);
	strcpy(peer, "xxxx");
	assert_int_equal(f->sends, 0);
	run_until(f, &done, 2);
	assert_int_equal(f->sends, 1);
	assert_int_equal(f->sent_group, 11);
	assert_int_equal(s.status, 0);
	rio_store_stats(f->s, &st);
	assert_int_equal(st.held_sends, 1);
	/* Once synced, sends go straight out. */
	strcpy(peer, "peer");
	assert_int_equal(f->io[0].send(&f->io[0], &s.req, &m, send_cb), 0);
	assert_int_equal(f->sends, 2);
	run_until(f, &done, 3);
	rio_store_stats(f->s, &st);
	assert_int_equal(st.held_sends, 1);
}

static void tick_cb(struct raft_io *io)
{
	struct fx *f = io->data;
	f->ticks++;
}

static void recv_cb(struct raft_io *io, struct raft_message *m)
{
	(void)io;
	(void)m;
}

static void test_tick_and_misc(void **state)
{
	struct fx *f = *state;
	struct loaded l = {0};
	struct raft_message m;
	int i, seen[10] = {0};

	io_open(f, 0, 5);
	io_open(f, 1, 6);
	load(f, 0, &l);
	load(f, 1, &l);
	assert_int_equal(f->io[0].start(&f->io[0], 100, tick_cb, recv_cb), 0);
	assert_int_equal(f->io[1].start(&f->io[1], 100, tick_cb, recv_cb), 0);
	/* One timer ticks both. */
	run_until(f, &f->ticks, 6);
	for (i = 0; i < 1000; i++) {
		int r = f->io[0].random(&f->io[0], 10, 20);
		assert_true(r >= 10 && r < 20);
		seen[r - 10] = 1;
	}
	for (i = 0; i < 10; i++) {
		assert_true(seen[i]);
	}
	assert_int_equal(f->io[0].time(&f->io[0]), uv_now(&f->loop));
	memset(&m, 0, sizeof m);
	assert_int_equal(rio_store_deliver(f->s, 99, &m), RAFT_NOTFOUND);
	assert_int_equal(rio_store_deliver(f->s, 5, &m), 0);
	/* A second instance for one group is refused. */
	{
		struct raft_io dup;
		dup.data = NULL;
		assert_int_equal(rio_init(&dup, f->s, 5, NULL),
		                 RAFT_DUPLICATEID);
	}
}

/* The child appends as fast as it can and reports every acknowledged
 * index (and the term that became durable with it) on a pipe, until the
 * parent kills it with SIGKILL. */
struct child {
	struct fx *f;
	int fd;
	uint64_t next;
	raft_term term;
	int inflight;
};

struct crash_req {
	struct raft_io_append req;
	struct raft_entry e[3];
	unsigned n;
	uint64_t last;
	raft_term term;
	struct child *c;
};

static void child_submit(struct child *c);

static void crash_cb(struct raft_io_append *req, int status)
{
	struct crash_req *r = req->data;
	uint64_t rec[2];
	unsigned i;
	if (status != 0) {
		_exit(3);
	}
	rec[0] = r->last;
	rec[1] = r->term;
	if (write(r->c->fd, rec, sizeof rec) != (ssize_t)sizeof rec) {
		_exit(4);
	}
	for (i = 0; i < r->n; i++) {
		raft_free(r->e[i].buf.base);
	}
	r->c->inflight--;
	free(r);
}

static void child_submit(struct child *c)
{
	struct fx *f = c->f;
	while (c->inflight < 8) {
		struct crash_req *r = calloc(1, sizeof *r);
		unsigned j;
		if (c->next % 50 == 0) {
			c->term++;
			if (f->io[0].set_term(&f->io[0], c->term) != 0) {
				_exit(5);
			}
		}
		r->c = c;
		r->n = 1 + (unsigned)(c->next % 3);
		r->term = c->term;
		for (j = 0; j < r->n; j++) {
			make_entry(&r->e[j], c->term, c->next + j,
			           1 + (c->next + j) % 300);
		}
		r->last = c->next + r->n - 1;
		r->req.data = r;
		if (f->io[0].append(&f->io[0], &r->req, r->e, r->n, crash_cb) !=
		    0) {
			_exit(6);
		}
		c->next += r->n;
		c->inflight++;
	}
}

static void child_main(struct fx *f, int fd)
{
	struct child c = {0};
	struct loaded l = {0};
	c.f = f;
	c.fd = fd;
	c.next = 1;
	c.term = 1;
	io_open(f, 0, 77);
	load(f, 0, &l);
	if (f->io[0].set_term(&f->io[0], 1) != 0) {
		_exit(2);
	}
	for (;;) {
		child_submit(&c);
		uv_run(&f->loop, UV_RUN_ONCE);
	}
}

static void test_crash(void **state)
{
	struct fx *f = *state;
	uint64_t acked = 0, acked_term = 0, rec[2];
	struct loaded l = {0};
	struct rio_stats st;
	int fds[2], wstatus;
	pid_t pid;
	size_t k;

	/* The child gets its own store on a fresh handle of the same DB,
	 * its WAL moving to a new segment (and flushing and dropping older
	 * ones) every ~100 entries, so the kill can land anywhere in that. */
	f->wal_segment_bytes = 32 << 10;
	close_all(f);
	testdb_close(&f->db);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		uv_loop_init(&f->loop);
		testdb_reopen(&f->db);
		store_open(f);
		child_main(f, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	while (acked < 3000) {
		ssize_t n = read(fds[0], rec, sizeof rec);
		assert_int_equal(n, (ssize_t)sizeof rec);
		assert_true(rec[0] > acked);
		acked = rec[0];
		acked_term = rec[1];
	}
	kill(pid, SIGKILL);
	waitpid(pid, &wstatus, 0);
	assert_true(WIFSIGNALED(wstatus));
	close(fds[0]);

	testdb_reopen(&f->db);
	store_open(f);
	rio_store_stats(f->s, &st);
	assert_true(st.wal_replayed > 0); /* what the kill left unflushed */
	io_open(f, 0, 77);
	load(f, 0, &l);
	/* Everything acknowledged is there, intact, without holes. */
	assert_int_equal(l.start, 1);
	assert_true(l.n >= acked);
	assert_true(l.term >= acked_term);
	for (k = 0; k < l.n; k++) {
		uint64_t index = 1 + k;
		assert_true(entry_ok(&l.entries[k], l.entries[k].term, index,
		                     1 + index % 300));
		if (k > 0) {
			assert_true(l.entries[k].term >= l.entries[k - 1].term);
		}
	}
	loaded_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_append_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wal_rotation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wal_corrupt_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_wal_mark, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_queued_batches, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_queued_write_failure, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_batch_reuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_term_vote, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_recent_entry_bytes, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_sync_off_writer, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_install_discarded, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_bootstrap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_send, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tick_and_misc, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
