/* Fuzz target for apply: the first input byte picks the group (0-2) and
 * advances the entry time; the rest is one command, applied twice in one
 * entry and then served as a read. Apply must succeed whatever the command
 * (errors are results), every result must be well formed, and replaying
 * the entry must answer nothing. One database lives for the whole run (in
 * $TMPDIR, removed at exit). */
#include <rocksdb/c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_db {
	char dir[512];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[4];
	struct store *s;
	uint64_t index[3];
	uint64_t now;
};

/* libFuzzer calls the entry point without context: the database is
 * process state. */
static struct fuzz_db *fdb;

static void fuzz_db_close(void)
{
	char cmd[600];

	store_close(fdb->s);
	for (int i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(fdb->cf[i]);
	}
	rocksdb_close(fdb->db);
	rocksdb_options_destroy(fdb->opts);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", fdb->dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "could not remove %s\n", fdb->dir);
	}
	free(fdb);
}

static void fuzz_db_open(void)
{
	const char *names[4] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cfo[4];
	const char *tmp = getenv("TMPDIR");
	char *err = NULL;

	fdb = calloc(1, sizeof *fdb);
	if (fdb == NULL) {
		abort();
	}
	snprintf(fdb->dir, sizeof fdb->dir, "%s/fuzz-store-XXXXXX",
	         tmp ? tmp : "/tmp");
	if (mkdtemp(fdb->dir) == NULL) {
		abort();
	}
	fdb->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(fdb->opts, 1);
	rocksdb_options_set_create_missing_column_families(fdb->opts, 1);
	for (int i = 0; i < 4; i++) {
		cfo[i] = fdb->opts;
	}
	fdb->db = rocksdb_open_column_families(fdb->opts, fdb->dir, 4, names,
	                                       cfo, fdb->cf, &err);
	if (err != NULL || store_open(fdb->db, fdb->cf[3], &fdb->s) != 0) {
		abort();
	}
	fdb->now = 1000;
	atexit(fuzz_db_close);
}

static void check_result(const struct fsm_result *r)
{
	struct store_result res;
	if (store_result_open(r->data, r->len, &res) != 0) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsm_cmd cmds[2];
	struct fsm_result res[2];
	struct fsm_entry e;
	uint32_t group;

	if (size < 1) {
		return 0;
	}
	if (fdb == NULL) {
		fuzz_db_open();
	}
	group = data[0] % 3;
	fdb->now += data[0] >> 2;
	cmds[0].data = data + 1;
	cmds[0].len = size - 1;
	cmds[1] = cmds[0];
	e.group = group;
	e.index = ++fdb->index[group];
	e.term = 1;
	e.now_ms = fdb->now;
	e.n_cmds = 2;
	e.cmds = cmds;
	memset(res, 0, sizeof res);
	if (store_apply(fdb->s, &e, res) != 0) {
		abort();
	}
	for (int i = 0; i < 2; i++) {
		check_result(&res[i]);
		free(res[i].data);
	}
	/* Replay: nothing. */
	memset(res, 0, sizeof res);
	if (store_apply(fdb->s, &e, res) != 0 || res[0].data != NULL ||
	    res[1].data != NULL) {
		abort();
	}
	if (store_read(fdb->s, group, fdb->now, data + 1, size - 1, &res[0]) !=
	    0) {
		abort();
	}
	check_result(&res[0]);
	free(res[0].data);
	return 0;
}
