/* bench_cluster: replicated throughput and commit latency of raft/ over the
 * node transport, N processes on one machine (loopback TCP), against the
 * same load on one node.
 *
 * Each row forks N processes ("nodes"), each with its own RocksDB in a
 * temporary directory, raft store, group manager and transport. Every
 * group is replicated on every node; leaderships are spread round robin
 * (group g led by node g mod N, moved there with raft_transfer). Then each
 * node keeps a closed loop of commands in flight on the groups it leads:
 * `-w` in all over the cluster, split evenly over the groups. Latency is
 * from propose to the result callback on the leader (commit on a quorum,
 * fsync included, then apply). The state machine writes every command into
 * the "data" column family, as the store does. Each node's database is
 * opened with the node's own options (store/db.c).
 *
 * Besides throughput and latency, a row shows what bounds it: "CPUs" is the
 * CPU time of all nodes over the measured time (user + system, so 2.0 =
 * both cores of a 2-vCPU machine busy), "CPU us/cmd" that CPU time per
 * committed command (all nodes together), "write ms" and "sync ms" the log
 * writer's mean time per synced batch in the write (RocksDB write queue and
 * memtable inserts) and in the WAL sync.
 *
 * usage: bench_cluster [-n 1,3] [-g 1,64] [-b 64,16384] [-w window]
 *                      [-s seconds] [-d dir] */
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/c.h>
#include <uv.h>

#include "store/db.h"
#include "bench/bench_fsm.h"
#include "raft/group.h"
#include "raft/transport.h"

#define MAX_NODES 5
#define BUCKETS 1024
#define GROWTH 1.02

/* ---- one node (a child process) ---- */

struct report {
	uint64_t cmds;
	uint64_t bytes;
	uint64_t entries;
	uint64_t syncs;
	uint64_t errors;
	uint64_t nanos;
	uint64_t cpu_ns;   /* user + system CPU of the node while measuring */
	uint64_t write_ns; /* log writer: time in writes, in syncs */
	uint64_t sync_ns;
	uint64_t hist[BUCKETS];
};

struct node {
	uv_loop_t loop;
	unsigned id;
	unsigned n;
	unsigned groups;
	size_t size;
	unsigned per_group;
	char dir[600];
	struct db db;
	struct bench_fsm fsm;
	struct rio_store *store;
	struct group_mgr *m;
	struct transport *t;
	char addr[MAX_NODES][32];
	uint16_t ports[MAX_NODES];
	uint8_t *payload;
	bool measuring;
	bool stopping;
	unsigned inflight;
	struct report r;
};

struct op {
	struct node *nd;
	uint32_t group;
	uint64_t t0;
};

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench_cluster: %s: %s\n", what, why);
	exit(1);
}

static unsigned bucket(uint64_t ns)
{
	double us = (double)ns / 1000.0;
	unsigned b;
	if (us < 1) {
		return 0;
	}
	b = (unsigned)(log(us) / log(GROWTH)) + 1;
	return b < BUCKETS ? b : BUCKETS - 1;
}

static double bucket_ms(unsigned b)
{
	return b == 0 ? 0 : pow(GROWTH, (double)b - 0.5) / 1000.0;
}

static void propose(struct node *nd, struct op *op);

static void done_cb(void *data, int status, uint8_t *result, size_t len)
{
	struct op *op = data;
	struct node *nd = op->nd;
	(void)len;
	free(result);
	nd->inflight--;
	if (status != REPLICA_OK) {
		nd->r.errors++;
	} else if (nd->measuring) {
		nd->r.cmds++;
		nd->r.bytes += nd->size;
		nd->r.hist[bucket(uv_hrtime() - op->t0)]++;
	}
	if (nd->stopping) {
		free(op);
		return;
	}
	propose(nd, op);
}

static void propose(struct node *nd, struct op *op)
{
	op->t0 = uv_hrtime();
	if (group_propose(nd->m, op->group, nd->payload, nd->size, done_cb, op,
	                  NULL) != 0) {
		nd->r.errors++;
		free(op);
		return;
	}
	nd->inflight++;
}

static void open_db(struct node *nd, const char *base)
{
	char err[512];

	/* The node's own options (store/db.c). */
	snprintf(nd->dir, sizeof nd->dir, "%s/node%u", base, nd->id);
	if (db_open(&nd->db, nd->dir, err, sizeof err) != 0) {
		die("open", err);
	}
}

static void xread(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0) {
			exit(1);
		}
		got += (size_t)r;
	}
}

static void xwrite(int fd, const void *p, size_t n)
{
	size_t off = 0;
	while (off < n) {
		ssize_t r = write(fd, (const char *)p + off, n - off);
		if (r <= 0) {
			exit(1);
		}
		off += (size_t)r;
	}
}

/* Runs the loop until `fd` is readable (the parent's next word). */
static void run_until_readable(struct node *nd, int fd)
{
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		uv_run(&nd->loop, UV_RUN_NOWAIT);
		if (poll(&p, 1, 1) > 0) {
			return;
		}
	}
}

static uint64_t cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
	           1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
	           1000ull;
}

static unsigned leader_of(struct node *nd, uint32_t g, bool *ready)
{
	struct group_status st;
	group_status(nd->m, g, &st);
	*ready = st.role == GROUP_ROLE_LEADER && st.ready;
	return (unsigned)st.leader_id;
}

static void child(unsigned id, unsigned n, unsigned groups, size_t size,
                  unsigned window, const char *base, int in, int out)
{
	struct node *nd = calloc(1, sizeof *nd);
	char err[RAFT_ERRMSG_BUF_SIZE], errb[256];
	struct rio_store_options so = {0};
	struct transport_options to = {0};
	struct group_options o = {0};
	struct group_member members[MAX_NODES];
	struct rio_stats s0, s1;
	uint64_t e0 = 0, e1 = 0, t_end, t0;
	unsigned g, k;
	char word;

	nd->id = id;
	nd->n = n;
	nd->groups = groups;
	nd->size = size;
	uv_loop_init(&nd->loop);
	open_db(nd, base);
	nd->payload = malloc(size);
	memset(nd->payload, 'x', size);
	if (bench_fsm_init(&nd->fsm, nd->db.db, nd->db.data, groups, false,
	                   "bench_cluster") != 0) {
		die("fsm", "out of memory");
	}
	so.seed = id;
	if (rio_store_init(&nd->store, &nd->loop, nd->db.db, nd->db.raft_log,
	                   nd->db.raft_state, &so, err) != 0) {
		die("store", err);
	}
	/* Transport: bind, tell the parent our port, learn the others'. */
	if (n > 1) {
		to.node_id = id;
		to.cluster_id = "bench";
		if (transport_init(&nd->t, &nd->loop, &to) != 0 ||
		    transport_start(nd->t, "127.0.0.1", 0, errb, sizeof errb) !=
		        0) {
			die("transport", errb);
		}
		nd->ports[id - 1] = transport_port(nd->t);
	}
	xwrite(out, &nd->ports[id - 1], sizeof nd->ports[0]);
	xread(in, nd->ports, sizeof nd->ports[0] * n);
	for (k = 0; k < n; k++) {
		snprintf(nd->addr[k], sizeof nd->addr[k], "127.0.0.1:%u",
		         nd->ports[k]);
		members[k].id = k + 1;
		members[k].address = nd->addr[k];
		if (n > 1 && k + 1 != id) {
			transport_add_peer(nd->t, k + 1, "127.0.0.1",
			                   nd->ports[k]);
		}
	}
	if (nd->t != NULL) {
		transport_attach(nd->t, nd->store);
	}
	o.node_id = id;
	o.address = nd->addr[id - 1];
	o.defaults.max_pending_bytes = (size_t)256 << 20;
	if (group_mgr_init(&nd->m, &nd->loop, nd->store, &o) != 0) {
		die("groups", "init");
	}
	for (g = 0; g < groups; g++) {
		if (group_create(nd->m, g, &nd->fsm.fsm, NULL) != 0 ||
		    group_bootstrap(nd->m, g, members, n) != 0 ||
		    group_start(nd->m, g) != 0) {
			die("group", group_mgr_errmsg(nd->m));
		}
	}
	/* Spread leadership: group g is led by node (g mod n) + 1. */
	t0 = uv_hrtime();
	for (;;) {
		unsigned placed = 0;
		for (g = 0; g < groups; g++) {
			bool ready;
			unsigned want = g % n + 1, l = leader_of(nd, g, &ready);
			if (l == want) {
				placed++;
			} else if (ready && uv_hrtime() - t0 > 300000000ull) {
				group_transfer(nd->m, g, want);
			}
		}
		if (placed == groups) {
			break;
		}
		uv_run(&nd->loop, UV_RUN_ONCE);
	}
	/* Wait for our own groups to be ready leaders. */
	for (;;) {
		unsigned ok = 0, mine = 0;
		for (g = 0; g < groups; g++) {
			bool ready;
			if (g % n + 1 == id) {
				mine++;
				leader_of(nd, g, &ready);
				ok += ready;
			}
		}
		if (ok == mine) {
			break;
		}
		uv_run(&nd->loop, UV_RUN_ONCE);
	}
	xwrite(out, "r", 1);
	run_until_readable(nd, in);
	xread(in, &word, 1); /* go */

	nd->per_group = window / groups > 0 ? window / groups : 1;
	for (g = 0; g < groups; g++) {
		if (g % n + 1 != id) {
			continue;
		}
		for (k = 0; k < nd->per_group; k++) {
			struct op *op = malloc(sizeof *op);
			op->nd = nd;
			op->group = g;
			propose(nd, op);
		}
	}
	t_end = uv_hrtime() + 500000000ull; /* warm up */
	while (uv_hrtime() < t_end) {
		uv_run(&nd->loop, UV_RUN_ONCE);
	}
	rio_store_stats(nd->store, &s0);
	for (g = 0; g < groups; g++) {
		struct group_status st;
		group_status(nd->m, g, &st);
		if (g % n + 1 == id) {
			e0 += st.stats.entries_proposed;
		}
	}
	nd->measuring = true;
	nd->r.cpu_ns = cpu_now();
	t0 = uv_hrtime();
	xread(in, &word, 1); /* the length of the run, in deciseconds */
	t_end = t0 + (uint64_t)(unsigned char)word * 100000000ull;
	while (uv_hrtime() < t_end) {
		uv_run(&nd->loop, UV_RUN_ONCE);
	}
	nd->r.nanos = uv_hrtime() - t0;
	nd->r.cpu_ns = cpu_now() - nd->r.cpu_ns;
	nd->measuring = false;
	rio_store_stats(nd->store, &s1);
	for (g = 0; g < groups; g++) {
		struct group_status st;
		group_status(nd->m, g, &st);
		if (g % n + 1 == id) {
			e1 += st.stats.entries_proposed;
		}
	}
	nd->r.entries = e1 - e0;
	nd->r.syncs = s1.syncs - s0.syncs;
	nd->r.write_ns = s1.write_ns - s0.write_ns;
	nd->r.sync_ns = s1.sync_ns - s0.sync_ns;
	nd->stopping = true;
	xwrite(out, &nd->r, sizeof nd->r);
	/* Keep serving the others until the parent says stop. */
	run_until_readable(nd, in);
	_exit(0);
}

/* ---- the parent ---- */

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void run_row(const char *base, unsigned n, unsigned groups, size_t size,
                    unsigned window, double seconds)
{
	int to[MAX_NODES][2], from[MAX_NODES][2];
	pid_t pids[MAX_NODES];
	uint16_t ports[MAX_NODES];
	struct report total, r;
	char dir[600], word;
	unsigned i, b;
	uint64_t count = 0, seen = 0, nanos = 0;
	double p50 = 0, p99 = 0, secs;

	snprintf(dir, sizeof dir, "%s/bench-cluster-XXXXXX", base);
	if (mkdtemp(dir) == NULL) {
		die("mkdtemp", dir);
	}
	for (i = 0; i < n; i++) {
		if (pipe(to[i]) != 0 || pipe(from[i]) != 0) {
			die("pipe", "failed");
		}
		pids[i] = fork();
		if (pids[i] == 0) {
			child(i + 1, n, groups, size, window, dir, to[i][0],
			      from[i][1]);
		}
	}
	for (i = 0; i < n; i++) {
		xread(from[i][0], &ports[i], sizeof ports[i]);
	}
	for (i = 0; i < n; i++) {
		xwrite(to[i][1], ports, sizeof ports[0] * n);
	}
	for (i = 0; i < n; i++) {
		xread(from[i][0], &word, 1); /* ready */
	}
	for (i = 0; i < n; i++) {
		xwrite(to[i][1], "g", 1);
	}
	word = (char)(unsigned char)(seconds * 10);
	for (i = 0; i < n; i++) {
		xwrite(to[i][1], &word, 1);
	}
	memset(&total, 0, sizeof total);
	for (i = 0; i < n; i++) {
		xread(from[i][0], &r, sizeof r);
		total.cmds += r.cmds;
		total.bytes += r.bytes;
		total.entries += r.entries;
		total.syncs += r.syncs;
		total.errors += r.errors;
		total.cpu_ns += r.cpu_ns;
		total.write_ns += r.write_ns;
		total.sync_ns += r.sync_ns;
		nanos = r.nanos > nanos ? r.nanos : nanos;
		for (b = 0; b < BUCKETS; b++) {
			total.hist[b] += r.hist[b];
		}
	}
	for (i = 0; i < n; i++) {
		xwrite(to[i][1], "s", 1);
		waitpid(pids[i], NULL, 0);
		close(to[i][1]);
		close(from[i][0]);
		close(to[i][0]);
		close(from[i][1]);
	}
	for (b = 0; b < BUCKETS; b++) {
		count += total.hist[b];
	}
	for (b = 0; b < BUCKETS; b++) {
		seen += total.hist[b];
		if (p50 == 0 && seen * 2 >= count) {
			p50 = bucket_ms(b);
		}
		if (p99 == 0 && seen * 100 >= count * 99) {
			p99 = bucket_ms(b);
		}
	}
	secs = (double)nanos / 1e9;
	printf(
	    "| %5u | %6u | %6zu | %6u | %10.0f | %8.1f | %10.0f | %8.0f | "
	    "%7.2f | %7.2f | %6.2f | %8.2f | %6.2f | %6.2f |\n",
	    n, groups, size, window, (double)total.cmds / secs,
	    (double)total.bytes / secs / 1e6, (double)total.entries / secs,
	    (double)total.syncs / secs / n, p50, p99,
	    (double)total.cpu_ns / (double)nanos,
	    total.cmds > 0 ? (double)total.cpu_ns / 1e3 / (double)total.cmds
	                   : 0.0,
	    total.syncs > 0 ? (double)total.write_ns / 1e6 / (double)total.syncs
	                    : 0.0,
	    total.syncs > 0 ? (double)total.sync_ns / 1e6 / (double)total.syncs
	                    : 0.0);
	fflush(stdout);
	if (total.errors > 0) {
		fprintf(stderr, "bench_cluster: %llu failed proposals\n",
		        (unsigned long long)total.errors);
	}
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
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
	unsigned long nodes[4] = {1, 3}, groups[8] = {1, 64}, sizes[8] = {64};
	unsigned n_nodes = 2, n_groups = 2, n_sizes = 1, i, j, k;
	unsigned window = 1024;
	double seconds = 3;
	const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
	int c;

	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt(argc, argv, "n:g:b:w:s:d:")) != -1) {
		switch (c) {
		case 'n':
			n_nodes = parse_list(optarg, nodes, 4);
			break;
		case 'g':
			n_groups = parse_list(optarg, groups, 8);
			break;
		case 'b':
			n_sizes = parse_list(optarg, sizes, 8);
			break;
		case 'w':
			window = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'd':
			dir = optarg;
			break;
		default:
			fprintf(stderr,
			        "usage: bench_cluster [-n 1,3] [-g 1,64] "
			        "[-b 64,16384] [-w window] [-s seconds] "
			        "[-d dir]\n");
			return 2;
		}
	}
	if (seconds <= 0 || seconds > 25) {
		fprintf(stderr, "bench_cluster: -s must be in (0, 25]\n");
		return 2;
	}
	printf("| nodes | groups | cmd B  | window |     cmds/s |     MB/s "
	       "|  entries/s | fsyncs/s/node | p50 ms  | p99 ms  | CPUs   "
	       "| CPU us/cmd | write ms | sync ms |\n");
	printf("|------:|-------:|-------:|-------:|-----------:|---------:"
	       "|-----------:|---------:|--------:|--------:|-------:"
	       "|---------:|-------:|-------:|\n");
	for (k = 0; k < n_sizes; k++) {
		for (j = 0; j < n_groups; j++) {
			for (i = 0; i < n_nodes; i++) {
				if (nodes[i] < 1 || nodes[i] > MAX_NODES) {
					continue;
				}
				run_row(dir, (unsigned)nodes[i],
				        (unsigned)groups[j], sizes[k], window,
				        seconds);
			}
		}
	}
	return 0;
}
