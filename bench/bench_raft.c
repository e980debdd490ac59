/* bench_raft: single-node throughput and commit latency of raft/ (group
 * manager + RocksDB raft_io) for several group counts and command sizes.
 *
 * Each row runs on a fresh RocksDB in a temporary directory: G groups are
 * bootstrapped as single voters, then a closed loop keeps a fixed number of
 * commands in flight for a few seconds: `-w` in all, spread evenly over the
 * groups (equal load whatever the group count), or `-p` per group (load
 * grows with the groups).
 * Latency is from propose to the result callback (commit + apply).
 *
 * The state machine either writes every command into RocksDB's "data"
 * column family (fsm "rocks", as the store will) or nothing at all (fsm
 * "null": the cost of raft/ alone).
 *
 * By default the database has the node's own options (store/db.c: a vector
 * memtable for raft_log, bloom filters for data) and the log its own WAL
 * (raft/wal.c); -m skiplist opens it instead with plain options, the
 * default skiplist memtable and RocksDB's WAL, for comparison.
 *
 * usage: bench_raft [-s seconds] [-w window | -p per-group window]
 *                   [-g 1,64,1000] [-b 64,16384] [-f rocks,null]
 *                   [-m vector,skiplist] [-d dir] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftw.h>
#include <rocksdb/c.h>
#include <uv.h>

#include "store/db.h"
#include "bench/bench_fsm.h"
#include "raft/group.h"

#define NODE 1
#define ADDR "127.0.0.1:7000"

struct bench {
	uv_loop_t loop;
	char dir[512];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_options_t *log_opts;
	rocksdb_column_family_handle_t *cf[4];
	struct db ndb; /* -m vector: the node's database (store/db.c) */
	struct bench_fsm fsm;
	struct rio_store *store;
	struct group_mgr *m;
	unsigned groups;
	size_t size;
	uint8_t *payload;
	unsigned per_group;
	bool measuring;
	bool stopping;
	uint64_t t_start;
	uint64_t done_cmds;
	uint64_t done_bytes;
	uint64_t errors;
	uint32_t *lat_us;
	size_t n_lat;
	size_t cap_lat;
	unsigned inflight;
	bool closed;
};

struct op {
	struct bench *b;
	uint32_t group;
	uint64_t t0;
};

static void propose(struct bench *b, struct op *op);

static void done_cb(void *data, int status, uint8_t *result, size_t len)
{
	struct op *op = data;
	struct bench *b = op->b;
	(void)len;
	free(result);
	b->inflight--;
	if (status != REPLICA_OK) {
		b->errors++;
	} else if (b->measuring) {
		uint64_t us = (uv_hrtime() - op->t0) / 1000;
		b->done_cmds++;
		b->done_bytes += b->size;
		if (b->n_lat == b->cap_lat) {
			b->cap_lat = b->cap_lat == 0 ? 1 << 16 : b->cap_lat * 2;
			b->lat_us =
			    realloc(b->lat_us, b->cap_lat * sizeof *b->lat_us);
		}
		b->lat_us[b->n_lat++] =
		    us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	}
	if (b->stopping) {
		free(op);
		return;
	}
	propose(b, op);
}

static void propose(struct bench *b, struct op *op)
{
	int rv;
	op->t0 = uv_hrtime();
	rv = group_propose(b->m, op->group, b->payload, b->size, done_cb, op,
	                   NULL);
	if (rv != 0) {
		fprintf(stderr, "bench_raft: propose: %s\n",
		        replica_strerror(rv));
		exit(1);
	}
	b->inflight++;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_raft: %s: %s\n", what, why);
	exit(1);
}

static void open_db(struct bench *b, const char *base, bool vector)
{
	const char *names[] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cf_opts[4];
	char *err = NULL;
	int i;

	snprintf(b->dir, sizeof b->dir, "%s/bench-raft-XXXXXX", base);
	if (mkdtemp(b->dir) == NULL) {
		die("mkdtemp", b->dir);
	}
	if (vector) {
		char msg[512];
		/* The node's own options (store/db.c). */
		if (db_open(&b->ndb, b->dir, msg, sizeof msg) != 0) {
			die("open", msg);
		}
		b->db = b->ndb.db;
		b->cf[0] = b->ndb.dflt;
		b->cf[1] = b->ndb.raft_log;
		b->cf[2] = b->ndb.raft_state;
		b->cf[3] = b->ndb.data;
		return;
	}
	b->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(b->opts, 1);
	rocksdb_options_set_create_missing_column_families(b->opts, 1);
	rocksdb_options_increase_parallelism(b->opts, 2);
	rocksdb_options_set_max_background_jobs(b->opts, 2);
	rocksdb_options_set_bytes_per_sync(b->opts, 1 << 20);
	for (i = 0; i < 4; i++) {
		cf_opts[i] = b->opts;
	}
	if (vector) {
		/* raft_log is written in batches and read only at start: an
		 * append-only vector memtable skips the skiplist inserts. */
		b->log_opts = rocksdb_options_create_copy(b->opts);
		rocksdb_options_set_memtable_vector_rep(b->log_opts);
		rocksdb_options_set_allow_concurrent_memtable_write(b->opts, 0);
		rocksdb_options_set_allow_concurrent_memtable_write(b->log_opts,
		                                                    0);
		cf_opts[1] = b->log_opts;
	}
	b->db = rocksdb_open_column_families(b->opts, b->dir, 4, names, cf_opts,
	                                     b->cf, &err);
	if (err != NULL) {
		die("open", err);
	}
}

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void mgr_closed(struct group_mgr *m, void *data)
{
	struct bench *b = data;
	(void)m;
	b->closed = true;
}

static void store_closed(struct rio_store *s, void *data)
{
	struct bench *b = data;
	(void)s;
	b->closed = true;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void run_row(const char *base, unsigned groups, size_t size,
                    unsigned window, unsigned per_group, double seconds,
                    bool null, bool vector)
{
	struct bench *b = calloc(1, sizeof *b);
	char err[RAFT_ERRMSG_BUF_SIZE];
	struct rio_store_options so = {0};
	char waldir[1100];
	struct group_options o = {0};
	struct group_member me = {NODE, ADDR};
	struct rio_stats s0, s1;
	uint64_t entries0 = 0, entries1 = 0, t_end, elapsed;
	double secs;
	unsigned g, k;

	uv_loop_init(&b->loop);
	open_db(b, base, vector);
	b->groups = groups;
	b->size = size;
	b->payload = malloc(size);
	memset(b->payload, 'x', size);
	if (bench_fsm_init(&b->fsm, b->db, b->cf[3], groups, null,
	                   "bench_raft") != 0) {
		fprintf(stderr, "bench_raft: out of memory\n");
		exit(1);
	}

	so.seed = 1;
	if (vector) {
		/* The node's storage: the log's own WAL too. */
		snprintf(waldir, sizeof waldir, "%s/raftwal", b->dir);
		so.wal_dir = waldir;
	}
	if (rio_store_init(&b->store, &b->loop, b->db, b->cf[1], b->cf[2], &so,
	                   err) != 0) {
		die("store", err);
	}
	o.node_id = NODE;
	o.address = ADDR;
	o.defaults.max_pending_bytes = (size_t)256 << 20;
	if (group_mgr_init(&b->m, &b->loop, b->store, &o) != 0) {
		die("groups", "init");
	}
	for (g = 0; g < groups; g++) {
		if (group_create(b->m, g, &b->fsm.fsm, NULL) != 0 ||
		    group_bootstrap(b->m, g, &me, 1) != 0 ||
		    group_start(b->m, g) != 0) {
			die("group", group_mgr_errmsg(b->m));
		}
	}
	for (;;) {
		unsigned ready = 0;
		for (g = 0; g < groups; g++) {
			struct group_status st;
			group_status(b->m, g, &st);
			ready += st.ready;
		}
		if (ready == groups) {
			break;
		}
		uv_run(&b->loop, UV_RUN_ONCE);
	}

	if (per_group > 0) {
		b->per_group = per_group;
	} else {
		b->per_group = window / groups > 0 ? window / groups : 1;
	}
	for (k = 0; k < b->per_group; k++) {
		for (g = 0; g < groups; g++) {
			struct op *op = malloc(sizeof *op);
			op->b = b;
			op->group = g;
			propose(b, op);
		}
	}
	/* Warm up, then measure. */
	t_end = uv_hrtime() + 300000000ull;
	while (uv_hrtime() < t_end) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	rio_store_stats(b->store, &s0);
	for (g = 0; g < groups; g++) {
		struct group_status st;
		group_status(b->m, g, &st);
		entries0 += st.stats.entries_applied;
	}
	b->measuring = true;
	b->t_start = uv_hrtime();
	t_end = b->t_start + (uint64_t)(seconds * 1e9);
	while (uv_hrtime() < t_end) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	elapsed = uv_hrtime() - b->t_start;
	b->measuring = false;
	rio_store_stats(b->store, &s1);
	for (g = 0; g < groups; g++) {
		struct group_status st;
		group_status(b->m, g, &st);
		entries1 += st.stats.entries_applied;
	}
	b->stopping = true;
	while (b->inflight > 0) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}

	secs = (double)elapsed / 1e9;
	qsort(b->lat_us, b->n_lat, sizeof *b->lat_us, cmp_u32);
	{
		uint64_t syncs = s1.syncs - s0.syncs;
		uint64_t entries = entries1 - entries0;
		double p50 = b->n_lat ? b->lat_us[b->n_lat / 2] / 1000.0 : 0;
		double p99 =
		    b->n_lat ? b->lat_us[(b->n_lat * 99) / 100] / 1000.0 : 0;
		printf("| %-5s | %-4s | %6u | %6zu | %6u | %10.0f | %8.1f | "
		       "%10.0f | %8.1f | %8.0f | %7.1f | %7.2f | %7.2f |\n",
		       null ? "null" : "rocks", vector ? "vec" : "skip", groups,
		       size, b->per_group * groups, (double)b->done_cmds / secs,
		       (double)b->done_bytes / secs / 1e6,
		       (double)entries / secs,
		       entries ? (double)b->done_cmds / (double)entries : 0,
		       (double)syncs / secs,
		       syncs ? (double)(s1.group_writes - s0.group_writes) /
		                   (double)syncs
		             : 0,
		       p50, p99);
		fflush(stdout);
	}
	if (b->errors > 0) {
		fprintf(stderr, "bench_raft: %llu failed proposals\n",
		        (unsigned long long)b->errors);
	}

	b->closed = false;
	group_mgr_close(b->m, mgr_closed, b);
	while (!b->closed) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	group_mgr_free(b->m);
	b->closed = false;
	rio_store_close(b->store, store_closed, b);
	while (!b->closed) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	rio_store_free(b->store);
	uv_loop_close(&b->loop);
	if (b->ndb.db != NULL) {
		db_close(&b->ndb);
	} else {
		for (k = 0; k < 4; k++) {
			rocksdb_column_family_handle_destroy(b->cf[k]);
		}
		rocksdb_close(b->db);
		rocksdb_options_destroy(b->opts);
		if (b->log_opts != NULL) {
			rocksdb_options_destroy(b->log_opts);
		}
	}
	bench_fsm_close(&b->fsm);
	nftw(b->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(b->lat_us);
	free(b->payload);
	free(b);
}

static unsigned parse_list(const char *s, unsigned long *out, unsigned max)
{
	unsigned n = 0;
	char *end;
	while (*s != '\0' && n < max) {
		out[n++] = strtoul(s, &end, 10);
		if (*end != ',') {
			break;
		}
		s = end + 1;
	}
	return n;
}

int main(int argc, char **argv)
{
	unsigned long groups[8] = {1, 64, 1000}, sizes[8] = {64, 16384};
	unsigned n_groups = 3, n_sizes = 2, i, j;
	unsigned window = 1024, per_group = 0;
	bool fsms[2] = {true, true};  /* rocks, null */
	bool mems[2] = {true, false}; /* vector, skiplist */
	unsigned f, mt;
	double seconds = 3;
	const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
	int c;

	while ((c = getopt(argc, argv, "s:w:p:g:b:d:f:m:")) != -1) {
		switch (c) {
		case 's':
			seconds = atof(optarg);
			break;
		case 'w':
			window = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			per_group = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'g':
			n_groups = parse_list(optarg, groups, 8);
			break;
		case 'b':
			n_sizes = parse_list(optarg, sizes, 8);
			break;
		case 'd':
			dir = optarg;
			break;
		case 'f':
			fsms[0] = strstr(optarg, "rocks") != NULL;
			fsms[1] = strstr(optarg, "null") != NULL;
			break;
		case 'm':
			mems[0] = strstr(optarg, "vector") != NULL;
			mems[1] = strstr(optarg, "skiplist") != NULL;
			break;
		default:
			fprintf(
			    stderr,
			    "usage: bench_raft [-s seconds] [-w window | -p "
			    "per-group window] [-g 1,64,1000] [-b 64,16384] "
			    "[-f rocks,null] [-m vector,skiplist] [-d dir]\n");
			return 2;
		}
	}
	printf("| fsm   | log  | groups | cmd B  | window |     cmds/s "
	       "|     MB/s |  entries/s | cmds/ent | fsyncs/s | grp/fsy "
	       "| p50 ms  | p99 ms  |\n");
	printf("|-------|------|-------:|-------:|-------:|-----------:"
	       "|---------:|-----------:|---------:|---------:|--------:"
	       "|--------:|--------:|\n");
	for (mt = 0; mt < 2; mt++) {
		for (f = 0; f < 2; f++) {
			if (!mems[mt] || !fsms[f]) {
				continue;
			}
			for (j = 0; j < n_sizes; j++) {
				for (i = 0; i < n_groups; i++) {
					run_row(dir, (unsigned)groups[i],
					        sizes[j], window, per_group,
					        seconds, f == 1, mt == 0);
				}
			}
		}
	}
	return 0;
}
