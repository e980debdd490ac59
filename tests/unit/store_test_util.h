/* Helpers for the store/ unit tests: a RocksDB in a temporary directory
 * with the node's column families, entry building, and result access. */
#ifndef LS_TESTS_STORE_TEST_UTIL_H
#define LS_TESTS_STORE_TEST_UTIL_H

#include <rocksdb/c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/command.h"
#include "store/result.h"
#include "store/store.h"

#define TDB_GROUPS 64

struct tdb {
	char dir[512];
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_column_family_handle_t *cf[4]; /* default, raft_log,
	                                          raft_state, data */
	struct store *s;
	uint64_t next_index[TDB_GROUPS];
};

/* Opens a fresh store (aborts the test on failure). */
void tdb_open(struct tdb *t);
/* A clean restart: closes the store and RocksDB and opens them again over
 * the same directory (entry indexes carry on; extensions must be
 * registered again). */
void tdb_reopen(struct tdb *t);
void tdb_close(struct tdb *t);

/* Applies one entry with the commands (next index of `group`). Returns
 * the results (caller frees each with free() and the array). */
struct fsm_result *tdb_apply_entry(struct tdb *t, uint32_t group,
                                   uint64_t now_ms,
                                   const struct store_cmd *cmds, unsigned n);
/* Applies a single command; returns its malloc'd result. */
uint8_t *tdb_apply(struct tdb *t, uint32_t group, uint64_t now_ms,
                   const struct store_cmd *c, size_t *len);
/* Serves a read through store_read(); returns the malloc'd result. */
uint8_t *tdb_read(struct tdb *t, uint32_t group, uint64_t now_ms,
                  const struct store_cmd *c, size_t *len);

/* Encodes a command (asserts success); malloc'd. */
uint8_t *tcmd_encode(const struct store_cmd *c, size_t *len);

/* FNV-1a 64 over the ordered key range of `group` (keys and values). */
uint64_t tdb_hash_group(struct tdb *t, uint32_t group);
/* The same, optionally without the group state (applied index) key. */
uint64_t tdb_hash_group_x(struct tdb *t, uint32_t group, bool skip_state);

/* --- Result access: a cursor that asserts on shape. --------------------- */

struct tres {
	uint8_t *buf; /* owned */
	size_t len;
	struct store_result r;
	char *scratch; /* last bytes value, NUL-terminated */
};

/* Takes ownership of `buf`; asserts it is a well-formed result. */
void tres_init(struct tres *x, uint8_t *buf, size_t len);
void tres_free(struct tres *x);
uint8_t tres_status(const struct tres *x);
/* Next value must have the tag; returns it. */
uint64_t tres_u64(struct tres *x);
int64_t tres_i64(struct tres *x);
uint32_t tres_array(struct tres *x);
uint32_t tres_map(struct tres *x);
/* Next value must be bytes; returns a NUL-terminated copy in a buffer
 * owned by `x` (valid until the next call). */
const char *tres_bytes(struct tres *x, size_t *len);
bool tres_bool(struct tres *x);
/* Next value is nil (returns true) or not (value is left unread). */
bool tres_is_nil(struct tres *x);
const char *tres_map_key(struct tres *x);

/* Convenience: apply/read one command and wrap its result. */
void tapply(struct tres *x, struct tdb *t, uint32_t group, uint64_t now,
            const struct store_cmd *c);
void tread(struct tres *x, struct tdb *t, uint32_t group, uint64_t now,
           const struct store_cmd *c);

/* Slices from C strings. */
struct store_slice S(const char *s);

#endif
