/* bench_store: apply throughput of the shard state machine on a real
 * RocksDB (default options, unsynced apply as on a node).
 *
 *   bench/bench_store [--dir DIR] [--entries N] [--only stream|cache|kv]
 *                     [--keep]
 *
 * Workloads, each N entries of 64 commands or records:
 *   stream  one STREAM_APPEND of 64 x 1 KiB records per entry
 *   cache   64 CACHE_PUT (16-byte keys out of 100 000, 256-byte values)
 *   kv      64 SET (16-byte keys out of 100 000, 100-byte values)
 * Commands are encoded before the clock starts; the time is apply only.
 * records/cpu-s divides by the process CPU time (RocksDB's background
 * threads included), which is steadier than wall time on a shared host. */
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define PER_ENTRY 64

struct bench_db {
	char dir[512];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[4];
	struct store *s;
};

static int bench_open(struct bench_db *b, const char *parent)
{
	const char *names[4] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cfo[4];
	char *err = NULL;

	snprintf(b->dir, sizeof b->dir, "%s/bench-store-XXXXXX", parent);
	if (mkdtemp(b->dir) == NULL) {
		perror("mkdtemp");
		return -1;
	}
	b->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(b->opts, 1);
	rocksdb_options_set_create_missing_column_families(b->opts, 1);
	for (int i = 0; i < 4; i++) {
		cfo[i] = b->opts;
	}
	b->db = rocksdb_open_column_families(b->opts, b->dir, 4, names, cfo,
	                                     b->cf, &err);
	if (err != NULL) {
		fprintf(stderr, "rocksdb: %s\n", err);
		rocksdb_free(err);
		return -1;
	}
	return store_open(b->db, b->cf[3], &b->s);
}

static void bench_close(struct bench_db *b, int keep)
{
	char cmd[600];

	store_close(b->s);
	for (int i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(b->cf[i]);
	}
	rocksdb_close(b->db);
	rocksdb_options_destroy(b->opts);
	if (!keep) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->dir);
		if (system(cmd) != 0) {
			fprintf(stderr, "could not remove %s\n", b->dir);
		}
	}
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

enum workload { W_STREAM, W_CACHE, W_KV };

/* Encodes the commands of one entry. */
static unsigned build_entry(enum workload w, uint64_t *rng, uint8_t *payload,
                            struct fsm_cmd *cmds)
{
	struct store_cmd c;
	struct store_slice items[PER_ENTRY];
	char keys[PER_ENTRY][17];
	const char *err;
	unsigned n = w == W_STREAM ? 1 : PER_ENTRY;

	for (unsigned i = 0; i < n; i++) {
		uint8_t *enc;
		size_t len;

		memset(&c, 0, sizeof c);
		snprintf(keys[i], sizeof keys[i], "key-%011llu",
		         (unsigned long long)(xorshift(rng) % 100000));
		switch (w) {
		case W_STREAM:
			for (int j = 0; j < PER_ENTRY; j++) {
				items[j].p = payload;
				items[j].len = 1024;
			}
			c.op = STORE_OP_STREAM_APPEND;
			c.scope.p = (const uint8_t *)"bench/default/events";
			c.scope.len = strlen("bench/default/events");
			c.items.n = PER_ENTRY;
			c.items.v = items;
			break;
		case W_CACHE:
			c.op = STORE_OP_CACHE_PUT;
			c.scope.p = (const uint8_t *)"bench/default/cache";
			c.scope.len = strlen("bench/default/cache");
			c.key.p = (const uint8_t *)keys[i];
			c.key.len = 16;
			c.value.p = payload;
			c.value.len = 256;
			break;
		case W_KV:
			c.op = STORE_OP_KV_SET;
			c.key.p = (const uint8_t *)keys[i];
			c.key.len = 16;
			c.value.p = payload;
			c.value.len = 100;
			break;
		}
		if (store_cmd_encode(&c, &enc, &len, &err) != 0) {
			fprintf(stderr, "encode: %s\n", err);
			exit(1);
		}
		cmds[i].data = enc;
		cmds[i].len = len;
	}
	return n;
}

static int run(const char *name, enum workload w, const char *parent,
               unsigned entries, int keep)
{
	struct bench_db b;
	struct fsm_cmd *cmds =
	    calloc((size_t)entries * PER_ENTRY, sizeof *cmds);
	unsigned *ncmds = calloc(entries, sizeof *ncmds);
	struct fsm_result res[PER_ENTRY];
	uint8_t payload[1024];
	uint64_t rng = 0x9E3779B97F4A7C15ULL, bytes = 0, records;
	double t0, c0, dt, dc;

	if (cmds == NULL || ncmds == NULL || bench_open(&b, parent) != 0) {
		return -1;
	}
	for (size_t i = 0; i < sizeof payload; i++) {
		payload[i] = (uint8_t)(i * 131);
	}
	for (unsigned e = 0; e < entries; e++) {
		ncmds[e] =
		    build_entry(w, &rng, payload, cmds + (size_t)e * PER_ENTRY);
	}
	t0 = clock_s(CLOCK_MONOTONIC);
	c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned e = 0; e < entries; e++) {
		struct fsm_entry fe = {1,        e + 1,
		                       1,        1700000000000ULL + e,
		                       ncmds[e], cmds + (size_t)e * PER_ENTRY};
		memset(res, 0, sizeof res);
		if (store_apply(b.s, &fe, res) != 0) {
			fprintf(stderr, "apply: %s\n", store_last_error(b.s));
			return -1;
		}
		for (unsigned i = 0; i < ncmds[e]; i++) {
			free(res[i].data);
		}
	}
	/* Until RocksDB holds it all: the data writer's time counts. */
	if (store_drain(b.s) != 0) {
		fprintf(stderr, "write: %s\n", store_writer_error(b.s));
		return -1;
	}
	dt = clock_s(CLOCK_MONOTONIC) - t0;
	dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	records = (uint64_t)entries * PER_ENTRY;
	bytes = records * (w == W_STREAM ? 1024 : w == W_CACHE ? 256 : 100);
	printf("| %-6s | %8u | %9llu | %10.0f | %12.0f | %8.1f | %8.2f | "
	       "%12.0f |\n",
	       name, entries, (unsigned long long)records, entries / dt,
	       records / dt, bytes / dt / 1e6, dt * 1e6 / entries,
	       records / dc);
	for (size_t i = 0; i < (size_t)entries * PER_ENTRY; i++) {
		free((void *)cmds[i].data);
	}
	free(cmds);
	free(ncmds);
	bench_close(&b, keep);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	unsigned entries = 2000;
	int keep = 0;
	const char *only = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--entries") == 0 && i + 1 < argc) {
			entries = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else if (strcmp(argv[i], "--keep") == 0) {
			keep = 1;
		} else {
			fprintf(stderr,
			        "usage: %s [--dir DIR] [--entries N] "
			        "[--only stream|cache|kv] [--keep]\n",
			        argv[0]);
			return 2;
		}
	}
	if (entries == 0) {
		entries = 1;
	}
	printf("| work   |  entries |   records |  entries/s |    records/s "
	       "|     MB/s | us/entry | records/cpu-s |\n");
	printf("|--------|---------:|----------:|-----------:|-------------:"
	       "|---------:|---------:|--------------:|\n");
	static const char *const names[] = {"stream", "cache", "kv"};
	for (int w = W_STREAM; w <= W_KV; w++) {
		if (only != NULL && strcmp(only, names[w]) != 0) {
			continue;
		}
		if (run(names[w], (enum workload)w, dir, entries, keep) != 0) {
			return 1;
		}
	}
	return 0;
}
