/* RocksDB setup; see db.h. */
#include "node/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	d->db = rocksdb_open_column_families(
	    d->opts, dir, 4, names, (const rocksdb_options_t **)cf_opts,
	    handles, &rerr);
	if (rerr != NULL) {
		snprintf(err, errlen, "cannot open RocksDB in '%s': %s", dir,
		         rerr);
		free(rerr);
		rocksdb_options_destroy(d->opts);
		d->opts = NULL;
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
	rocksdb_options_destroy(d->opts);
	memset(d, 0, sizeof *d);
}
