/* Test helper: a RocksDB in a fresh temporary directory with the column
 * families the node creates ("raft_log", "raft_state", "data"). */
#ifndef LS_TESTS_TESTDB_H
#define LS_TESTS_TESTDB_H

#include <rocksdb/c.h>

struct testdb {
	char dir[256];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[4]; /* default, log, state, data */
	rocksdb_column_family_handle_t *log;
	rocksdb_column_family_handle_t *state;
	rocksdb_column_family_handle_t *data;
};

/* Creates a new directory and opens the database in it; aborts on error. */
void testdb_create(struct testdb *t);

/* Closes and opens again the same directory (a restart). */
void testdb_close(struct testdb *t);
void testdb_reopen(struct testdb *t);

/* Closes and deletes the directory. */
void testdb_destroy(struct testdb *t);

#endif
