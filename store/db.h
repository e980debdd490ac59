/* The node's one RocksDB: DATA/db with the column families every layer
 * shares — "raft_log" (entries), "raft_state" (term, vote, snapshot
 * metadata) and "data" (shard state, keys prefixed by group id).
 * The node owns the handle; raft/ and store/ borrow it. */
#ifndef LS_STORE_DB_H
#define LS_STORE_DB_H

#include <stddef.h>

#include <rocksdb/c.h>

struct db {
	rocksdb_t *db;
	rocksdb_options_t *opts;      /* DB and default/raft_state CFs */
	rocksdb_options_t *log_opts;  /* raft_log CF */
	rocksdb_options_t *data_opts; /* data CF */
	rocksdb_block_based_table_options_t *table_opts; /* data CF tables */
	rocksdb_filterpolicy_t *bloom; /* owned by table_opts */
	rocksdb_column_family_handle_t *raft_log;
	rocksdb_column_family_handle_t *raft_state;
	rocksdb_column_family_handle_t *data;
	rocksdb_column_family_handle_t *dflt; /* unused but always present */
};

/* Opens (creating if missing) the database in `dir`. */
int db_open(struct db *d, const char *dir, char *err, size_t errlen);
void db_close(struct db *d);

#endif
