/* A store on a fresh RocksDB for fuzz targets; see fuzz_store_db.h. */
#include "tests/fuzz/fuzz_store_db.h"

#include <stdio.h>
#include <stdlib.h>

void fuzz_store_db_open(struct fuzz_store_db *d, const char *prefix)
{
	const char *names[4] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cfo[4];
	const char *tmp = getenv("TMPDIR");
	char *err = NULL;

	snprintf(d->dir, sizeof d->dir, "%s/%s-XXXXXX", tmp ? tmp : "/tmp",
	         prefix);
	if (mkdtemp(d->dir) == NULL) {
		abort();
	}
	d->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(d->opts, 1);
	rocksdb_options_set_create_missing_column_families(d->opts, 1);
	for (int i = 0; i < 4; i++) {
		cfo[i] = d->opts;
	}
	d->db = rocksdb_open_column_families(d->opts, d->dir, 4, names, cfo,
	                                     d->cf, &err);
	if (err != NULL || store_open(d->db, d->cf[3], &d->s) != 0) {
		abort();
	}
}

void fuzz_store_db_close(struct fuzz_store_db *d)
{
	char cmd[600];

	store_close(d->s);
	for (int i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(d->cf[i]);
	}
	rocksdb_close(d->db);
	rocksdb_options_destroy(d->opts);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "could not remove %s\n", d->dir);
	}
}
