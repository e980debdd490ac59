/* A store on a fresh RocksDB in $TMPDIR for the fuzz targets that apply
 * commands (fuzz_store_apply, fuzz_flow_apply): the column families the
 * node has, the store on "data". Failures abort: a fuzz target has no one
 * to report to. */
#ifndef LS_TESTS_FUZZ_STORE_DB_H
#define LS_TESTS_FUZZ_STORE_DB_H

#include <rocksdb/c.h>

#include "store/store.h"

struct fuzz_store_db {
	char dir[512];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[4];
	struct store *s;
};

/* Opens it in a new directory $TMPDIR/<prefix>-XXXXXX. */
void fuzz_store_db_open(struct fuzz_store_db *d, const char *prefix);
/* Closes it and removes the directory. */
void fuzz_store_db_close(struct fuzz_store_db *d);

#endif
