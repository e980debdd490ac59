/* Temporary RocksDB for tests; see testdb.h. */
#include "tests/unit/testdb.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void open_db(struct testdb *t)
{
	const char *names[] = {"default", "raft_log", "raft_state", "data"};
	const rocksdb_options_t *cf_opts[4];
	char *err = NULL;
	int i;

	t->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(t->opts, 1);
	rocksdb_options_set_create_missing_column_families(t->opts, 1);
	rocksdb_options_set_max_background_jobs(t->opts, 2);
	for (i = 0; i < 4; i++) {
		cf_opts[i] = t->opts;
	}
	t->db = rocksdb_open_column_families(t->opts, t->dir, 4, names, cf_opts,
	                                     t->cf, &err);
	if (err != NULL) {
		fprintf(stderr, "testdb: open %s: %s\n", t->dir, err);
		abort();
	}
	t->log = t->cf[1];
	t->state = t->cf[2];
	t->data = t->cf[3];
}

void testdb_create(struct testdb *t)
{
	const char *base = getenv("TMPDIR");
	memset(t, 0, sizeof *t);
	snprintf(t->dir, sizeof t->dir, "%s/lsraft-XXXXXX",
	         base != NULL ? base : "/tmp");
	if (mkdtemp(t->dir) == NULL) {
		perror("testdb: mkdtemp");
		abort();
	}
	open_db(t);
}

void testdb_close(struct testdb *t)
{
	int i;
	if (t->db == NULL) {
		return;
	}
	for (i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(t->cf[i]);
	}
	rocksdb_close(t->db);
	rocksdb_options_destroy(t->opts);
	t->db = NULL;
	t->opts = NULL;
}

void testdb_reopen(struct testdb *t)
{
	testdb_close(t);
	open_db(t);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void testdb_destroy(struct testdb *t)
{
	testdb_close(t);
	nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
