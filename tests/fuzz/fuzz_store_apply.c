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
#include "tests/fuzz/fuzz_store_db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_db {
	struct fuzz_store_db base;
	uint64_t index[3];
	uint64_t now;
};

/* libFuzzer calls the entry point without context: the database is
 * process state. */
static struct fuzz_db *fdb;

static void fuzz_db_close(void)
{
	fuzz_store_db_close(&fdb->base);
	free(fdb);
}

static void fuzz_db_open(void)
{
	fdb = calloc(1, sizeof *fdb);
	if (fdb == NULL) {
		abort();
	}
	fuzz_store_db_open(&fdb->base, "fuzz-store");
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
	if (store_apply(fdb->base.s, &e, res) != 0) {
		abort();
	}
	for (int i = 0; i < 2; i++) {
		check_result(&res[i]);
		free(res[i].data);
	}
	/* Replay: nothing. */
	memset(res, 0, sizeof res);
	if (store_apply(fdb->base.s, &e, res) != 0 || res[0].data != NULL ||
	    res[1].data != NULL) {
		abort();
	}
	if (store_read(fdb->base.s, group, fdb->now, data + 1, size - 1,
	               &res[0]) != 0) {
		abort();
	}
	check_result(&res[0]);
	free(res[0].data);
	return 0;
}
