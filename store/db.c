/* RocksDB setup; see db.h. */
#include "store/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values from this size up are stored in blob files (stream runs); KV
 * rows, indexes and metadata stay inline in the SST blocks. */
#define DB_MIN_BLOB_SIZE 4096
#define DB_BLOB_FILE_SIZE (64u << 20)
#define DB_LOG_MEMTABLE (128u << 20)
/* The data column family's memtable limit, well above the size at which
 * the data writer asks for a flush (DWRITE_FLUSH_BYTES): RocksDB must
 * never switch it by itself, since only a switch right after a KV
 * checkpoint leaves a consistent state on disk (docs/storage.md). */
#define DB_DATA_MEMTABLE_LIMIT (512u << 20)
#define DB_DATA_ARENA_BLOCK (8u << 20)

static void db_free_options(struct db *d)
{
	if (d->table_opts != NULL) {
		/* The table options own the filter policy. */
		rocksdb_block_based_options_destroy(d->table_opts);
	}
	if (d->data_opts != NULL) {
		rocksdb_options_destroy(d->data_opts);
	}
	if (d->log_opts != NULL) {
		rocksdb_options_destroy(d->log_opts);
	}
	if (d->opts != NULL) {
		rocksdb_options_destroy(d->opts);
	}
	d->table_opts = NULL;
	d->bloom = NULL;
	d->data_opts = d->log_opts = d->opts = NULL;
}

int db_open(struct db *d, const char *dir, char *err, size_t errlen)
{
	const char *names[] = {"default", "raft_log", "raft_state", "data"};
	rocksdb_options_t *cf_opts[4];
	rocksdb_column_family_handle_t *handles[4];
	char *rerr = NULL;

	memset(d, 0, sizeof *d);
	d->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(d->opts, 1);
	rocksdb_options_set_create_missing_column_families(d->opts, 1);
	/* Two cores: keep background work modest. */
	rocksdb_options_increase_parallelism(d->opts, 2);
	rocksdb_options_set_max_background_jobs(d->opts, 2);
	rocksdb_options_set_bytes_per_sync(d->opts, 1 << 20);
	rocksdb_options_set_compression(d->opts, rocksdb_lz4_compression);
	for (int i = 0; i < 4; i++) {
		cf_opts[i] = d->opts;
	}
	/* raft_log takes appends in index order and is read back only when a
	 * group loads: a vector memtable inserts far cheaper than the skiplist
	 * (bench/bench_raft: 1000 groups, 82k -> 169k entries/s). */
	d->log_opts = rocksdb_options_create_copy(d->opts);
	rocksdb_options_set_memtable_vector_rep(d->log_opts);
	/* The raft WAL (raft/wal.c) flushes this CF each time it moves to a
	 * new 64 MiB segment, so it can drop the older ones: a memtable twice
	 * that size is never flushed for being full in between (which would
	 * write the live entries out twice per segment). */
	rocksdb_options_set_write_buffer_size(d->log_opts, DB_LOG_MEMTABLE);
	cf_opts[1] = d->log_opts;
	/* Every data write does point lookups (type checks, indexes): bloom
	 * filters keep misses off the disk. */
	d->data_opts = rocksdb_options_create_copy(d->opts);
	d->table_opts = rocksdb_block_based_options_create();
	d->bloom = rocksdb_filterpolicy_create_bloom_full(10);
	rocksdb_block_based_options_set_filter_policy(d->table_opts, d->bloom);
	rocksdb_options_set_block_based_table_factory(d->data_opts,
	                                              d->table_opts);
	/* Stream runs (up to 256 KiB) go to blob files when flushed: the
	 * LSM then holds keys and small rows only, and compactions stop
	 * rewriting payloads (they were ~3x the published bytes, 10x with
	 * no subscriber). A blob file holds runs of every stream flushed
	 * together: without GC one long-retention stream would pin the
	 * trimmed runs of all others. GC relocates what is still live in
	 * the oldest quarter of the files (a cutoff of 0.05 let such disk
	 * use grow). */
	rocksdb_options_set_enable_blob_files(d->data_opts, 1);
	rocksdb_options_set_min_blob_size(d->data_opts, DB_MIN_BLOB_SIZE);
	rocksdb_options_set_blob_file_size(d->data_opts, DB_BLOB_FILE_SIZE);
	rocksdb_options_set_blob_compression_type(d->data_opts,
	                                          rocksdb_lz4_compression);
	rocksdb_options_set_enable_blob_gc(d->data_opts, 1);
	rocksdb_options_set_blob_gc_age_cutoff(d->data_opts, 0.25);
	rocksdb_options_set_blob_gc_force_threshold(d->data_opts, 0.5);
	rocksdb_options_set_write_buffer_size(d->data_opts,
	                                      DB_DATA_MEMTABLE_LIMIT);
	rocksdb_options_set_arena_block_size(d->data_opts, DB_DATA_ARENA_BLOCK);
	cf_opts[3] = d->data_opts;
	/* The vector memtable does not support concurrent inserts. */
	rocksdb_options_set_allow_concurrent_memtable_write(d->opts, 0);
	d->db = rocksdb_open_column_families(
	    d->opts, dir, 4, names, (const rocksdb_options_t **)cf_opts,
	    handles, &rerr);
	if (rerr != NULL) {
		snprintf(err, errlen, "cannot open RocksDB in '%s': %s", dir,
		         rerr);
		free(rerr);
		db_free_options(d);
		return -1;
	}
	d->dflt = handles[0];
	d->raft_log = handles[1];
	d->raft_state = handles[2];
	d->data = handles[3];
	return 0;
}

void db_close(struct db *d)
{
	if (d->db == NULL) {
		return;
	}
	rocksdb_column_family_handle_t *hs[] = {d->dflt, d->raft_log,
	                                        d->raft_state, d->data};
	for (int i = 0; i < 4; i++) {
		rocksdb_column_family_handle_destroy(hs[i]);
	}
	rocksdb_close(d->db);
	db_free_options(d);
	memset(d, 0, sizeof *d);
}
