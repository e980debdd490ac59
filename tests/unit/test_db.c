/* store/db.c: the data column family keeps large values (stream runs) in
 * blob files and small ones inline; deleted large values free their blob
 * files once compacted; everything survives a reopen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/db.h"

#define N_RUNS 48
#define RUN_SIZE (64 * 1024)

struct fixture {
	char dir[256];
	struct db db;
};

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void open_db(struct fixture *f)
{
	char err[256];
	assert_int_equal(db_open(&f->db, f->dir, err, sizeof err), 0);
}

static int setup(void **state)
{
	const char *base = getenv("TMPDIR");
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "%s/lsdb-XXXXXX",
	         base != NULL ? base : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	open_db(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	db_close(&f->db);
	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static unsigned count_blob_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;
	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t len = strlen(e->d_name);
		if (len > 5 && strcmp(e->d_name + len - 5, ".blob") == 0) {
			n++;
		}
	}
	closedir(d);
	return n;
}

/* Run i: seeded pseudo-random bytes, so compression cannot hide it. */
static void fill_run(uint8_t *buf, size_t len, unsigned i)
{
	uint32_t x = 2463534242u + i;
	size_t k;
	for (k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[k] = (uint8_t)x;
	}
}

static void run_key(char *key, unsigned i)
{
	snprintf(key, 16, "run%08u", i);
}

static void flush_data(struct db *d)
{
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	char *err = NULL;
	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush_cf(d->db, fo, d->data, &err);
	rocksdb_flushoptions_destroy(fo);
	assert_null(err);
}

static void check_get(struct db *d, const char *key, const void *want,
                      size_t want_len)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	char *err = NULL;
	size_t len = 0;
	char *v =
	    rocksdb_get_cf(d->db, ro, d->data, key, strlen(key), &len, &err);
	rocksdb_readoptions_destroy(ro);
	assert_null(err);
	if (want == NULL) {
		assert_null(v);
		return;
	}
	assert_non_null(v);
	assert_int_equal(len, want_len);
	assert_memory_equal(v, want, want_len);
	rocksdb_free(v);
}

static void test_blobs(void **state)
{
	struct fixture *f = *state;
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	uint8_t *run = malloc(RUN_SIZE);
	const char small[] = "a small row stays inline";
	char key[16], *err = NULL;
	unsigned i;

	assert_non_null(run);
	for (i = 0; i < N_RUNS; i++) {
		fill_run(run, RUN_SIZE, i);
		run_key(key, i);
		rocksdb_put_cf(f->db.db, wo, f->db.data, key, strlen(key),
		               (const char *)run, RUN_SIZE, &err);
		assert_null(err);
	}
	rocksdb_put_cf(f->db.db, wo, f->db.data, "meta", 4, small, sizeof small,
	               &err);
	assert_null(err);
	flush_data(&f->db);
	assert_true(count_blob_files(f->dir) >= 1);

	/* Reopen: blob-backed and inline values read back. */
	db_close(&f->db);
	open_db(f);
	for (i = 0; i < N_RUNS; i++) {
		fill_run(run, RUN_SIZE, i);
		run_key(key, i);
		check_get(&f->db, key, run, RUN_SIZE);
	}
	check_get(&f->db, "meta", small, sizeof small);

	/* Trimmed: once compacted, the blob files go. */
	for (i = 0; i < N_RUNS; i++) {
		run_key(key, i);
		rocksdb_delete_cf(f->db.db, wo, f->db.data, key, strlen(key),
		                  &err);
		assert_null(err);
	}
	flush_data(&f->db);
	rocksdb_compact_range_cf(f->db.db, f->db.data, NULL, 0, NULL, 0);
	assert_int_equal(count_blob_files(f->dir), 0);
	run_key(key, 0);
	check_get(&f->db, key, NULL, 0);
	check_get(&f->db, "meta", small, sizeof small);

	rocksdb_writeoptions_destroy(wo);
	free(run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_blobs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
