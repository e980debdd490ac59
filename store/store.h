/* store/: the replicated shard state machine on RocksDB.
 *
 * One `struct store` serves every group of a node: it owns no RocksDB, it
 * is handed the node's DB and its "data" column family. It implements
 * raft/'s `struct fsm` (store_fsm_init): apply turns a committed entry into
 * one WriteBatch that also records the group's applied index; export and
 * import move a group's key range as SST files.
 *
 * Commands are encoded with store/command.h, results with store/result.h.
 * Reads run on the leader after a barrier, on the reactor thread, either
 * with an encoded read command (store_read) or the typed helpers below;
 * they take the leader's clock for TTL visibility.
 *
 * Threads: everything runs on the reactor thread except store_export,
 * store_sync and store_stream_read, which may run on other threads
 * concurrently with the rest (they only use RocksDB's thread-safe calls;
 * the first two have their own error buffers, and a failed
 * store_stream_read off the reactor leaves its message in the shared one,
 * where it may be overwritten).
 */
#ifndef LS_STORE_STORE_H
#define LS_STORE_STORE_H

#include <rocksdb/c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft/fsm.h"
#include "store/command.h"
#include "store/result.h"
#include "store/rowcache.h"

/* Consumer group defaults (reference broker). */
#define STORE_CG_VISIBILITY_MS 30000
#define STORE_CG_MAX_ATTEMPTS 5
/* Records scanned per poll at most, so one poll stays bounded. */
#define STORE_CG_SCAN_LIMIT 100000

/* Idempotent producers: outcomes remembered per producer, producers per
 * stream shard (the coldest is evicted beyond it). */
#define STORE_PRODUCER_WINDOW 64
#define STORE_PRODUCERS_MAX 4096

/* Fetch-or-compute lease cap. */
#define STORE_FOC_LEASE_MAX_MS 30000

/* Largest scope or consumer group name (they sit in keys). */
#define STORE_NAME_MAX 4096

struct store;

/* Creates a store over `db` and its data column family `cf` (both stay
 * owned by the caller and must outlive the store). */
int store_open(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
               struct store **out);
void store_close(struct store *s);

/* The message of the last failure (I/O or corrupt data), or "": of the
 * reactor's calls (apply, import, reads), of store_export, and of
 * store_sync, which may run on other threads. */
const char *store_last_error(const struct store *s);
const char *store_export_error(const struct store *s);
const char *store_sync_error(const struct store *s);

/* Rows read by point lookups (KV keys, counters, shard metadata) are
 * cached in memory in front of RocksDB, up to this many bytes (keys,
 * values and ~80 bytes per row). 0 turns the cache off. */
#define STORE_ROW_CACHE_DEFAULT (256u << 20)
void store_set_row_cache(struct store *s, size_t max_bytes);

/* Zeroes when the store has no cache. */
void store_row_cache_stats(const struct store *s, struct rowcache_stats *st);

/* Checks that every cached row equals what RocksDB holds (tests). 0, or
 * -1 with the first difference described in `msg`. */
int store_row_cache_verify(struct store *s, char *msg, size_t len);

/* Fills `fsm` with this store's implementation. */
void store_fsm_init(struct fsm *fsm, struct store *s);

/* The fsm operations, callable directly (tests, tools). */
int store_apply(struct store *s, const struct fsm_entry *e,
                struct fsm_result *results);
int store_applied_index(struct store *s, uint32_t group, uint64_t *index);
int store_sync(struct store *s);

/* Apply hands each entry's batch to a writer thread (store/dwrite.h) and
 * keeps KV rows in a write-back table until a checkpoint; store/ drains
 * the writer before reading RocksDB itself. Whoever else reads the data
 * column family directly (tests, tools) calls this first: it checkpoints
 * the KV rows and waits until RocksDB holds every entry applied so far
 * (any thread). 0, or -1 when a write failed (store_writer_error says
 * why). */
int store_drain(struct store *s);
/* Why the data writer failed ("" while it has not); any thread. */
const char *store_writer_error(struct store *s);

/* The data writer's counters: batches written, drains that waited,
 * submits that waited for room. */
struct dwrite_stats;
void store_writer_stats(struct store *s, struct dwrite_stats *st);
int store_export(struct store *s, uint32_t group, const char *dir,
                 uint64_t *applied_index);
int store_import(struct store *s, uint32_t group, const char *dir,
                 uint64_t *applied_index);
/* Deletes the group's whole key range (its state and applied index), as
 * an import of nothing: for a group this node no longer replicates. */
int store_drop(struct store *s, uint32_t group);
/* The approximate on-disk size of the group's key range (SST and blob
 * files). */
int store_group_size(struct store *s, uint32_t group, uint64_t *bytes);
/* Marks every file of the data CF for compaction: RocksDB's background
 * threads then rewrite them, down to the bottommost level, running the
 * blob garbage collection the CF is configured with (store/db.c). Returns
 * at once (0, or -1 with store_last_error()). */
int store_request_compaction(struct store *s);

/* Serves a read command (store_op_is_read) against the group's current
 * state. `out->data` is malloc'd (owned by the caller). Returns 0 (the
 * result may carry an error status) or -1 on an I/O failure. */
int store_read(struct store *s, uint32_t group, uint64_t now_ms,
               const uint8_t *cmd, size_t len, struct fsm_result *out);

/* --- Typed reads (hot paths) ---------------------------------------------- */

struct store_stream_info {
	uint64_t head;  /* oldest retained offset */
	uint64_t tail;  /* next offset to be written */
	uint64_t bytes; /* payload bytes retained */
	uint32_t producers;
};

/* Called per record; a non-zero return stops the read (and is returned). */
typedef int (*store_record_cb)(void *arg, uint64_t offset,
                               uint64_t timestamp_ms, const uint8_t *payload,
                               size_t len);

int store_stream_info(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, struct store_stream_info *info);

/* Reads records [from, ...) up to `max_records` and about `max_bytes` (at
 * least one record when any; 0 = no limit). Returns 0, STORE_TOO_OLD
 * (from < head), STORE_IN_FUTURE (from > tail), the callback's non-zero
 * value, or -1 on I/O failure. `info` (may be NULL) gets the bounds. */
int store_stream_read(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, uint64_t from, uint64_t max_records,
                      uint64_t max_bytes, store_record_cb cb, void *arg,
                      struct store_stream_info *info);

/* Cache get with the leader's clock. `*value` is malloc'd (caller frees)
 * when `*found`. */
int store_cache_get(struct store *s, uint32_t group, struct store_slice scope,
                    uint32_t shard, struct store_slice key, uint64_t now_ms,
                    uint8_t **value, size_t *len, uint64_t *expires_at,
                    uint64_t *offset, bool *found);

struct store_cache_info {
	uint64_t tail;            /* next change offset */
	uint64_t compacted_below; /* history below it is collapsed */
	uint64_t records;         /* records in the log */
	uint64_t live;            /* keys with a current value */
};

/* One cache change; `value` NULL means a delete. */
typedef int (*store_change_cb)(void *arg, uint64_t offset, const uint8_t *key,
                               size_t klen, const uint8_t *value, size_t vlen,
                               uint64_t expires_at);

int store_cache_info(struct store *s, uint32_t group, struct store_slice scope,
                     uint32_t shard, struct store_cache_info *info);

/* Replays the change log [from, ...) up to `max` changes. Returns 0,
 * STORE_RESNAPSHOT (from < compacted_below: read current values instead),
 * STORE_IN_FUTURE (from > tail), the callback's value, or -1. */
int store_cache_log_read(struct store *s, uint32_t group,
                         struct store_slice scope, uint32_t shard,
                         uint64_t from, uint64_t max, store_change_cb cb,
                         void *arg, struct store_cache_info *info);

/* Current (unexpired at now_ms) values of keys starting with `prefix`, in
 * key order, each with the offset of the write that produced it. */
int store_cache_scan(struct store *s, uint32_t group, struct store_slice scope,
                     uint32_t shard, struct store_slice prefix, uint64_t now_ms,
                     store_change_cb cb, void *arg);

int store_counter_get(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, struct store_slice key, int64_t *value,
                      bool *found);

/* KV string GET. Returns 0, STORE_WRONGTYPE, or -1. */
int store_kv_get(struct store *s, uint32_t group, struct store_slice key,
                 uint64_t now_ms, uint8_t **value, size_t *len, bool *found);

/* A hint that `key` of `group` will soon be read: starts loading its row
 * cache slot into the CPU cache (no effect on any result). Reactor only. */
void store_kv_prefetch(struct store *s, uint32_t group, struct store_slice key);
/* A key's type ("string", "hash", "list", "set", "zset", "ratelimit";
 * "none" when absent) and remaining TTL in ms (-1 none, -2 absent) as
 * this replica holds it at now_ms. Returns 0 or -1. */
int store_kv_info(struct store *s, uint32_t group, struct store_slice key,
                  uint64_t now_ms, const char **type, int64_t *ttl_ms,
                  bool *found);

/* --- Maintenance (leader) ------------------------------------------------- */

/* Builds an EXPIRE command for up to `max` TTL'd entries of `group` whose
 * deadline is at or before `now_ms` (KV keys, cache entries, fetch-or-
 * compute leases). `*cmd` is malloc'd; *len = 0 (and *cmd NULL) when
 * there is nothing to reclaim. Apply re-checks each entry at its time. */
int store_expire_scan(struct store *s, uint32_t group, uint64_t now_ms,
                      uint32_t max, uint8_t **cmd, size_t *len);

/* Every stream (kind STORE_SCOPE_STREAM) and cache shard with state in
 * `group`, so the leader can plan STREAM_TRIM and CACHE_COMPACT. */
typedef int (*store_shard_cb)(void *arg, uint8_t kind, struct store_slice scope,
                              uint32_t shard);
int store_list_shards(struct store *s, uint32_t group, store_shard_cb cb,
                      void *arg);

/* --- Apply observer ------------------------------------------------------- */

/* Called after an entry's WriteBatch is written, once per stream append
 * that added records (plain or idempotent, not a duplicate), in log order.
 * `records` is the command's payload list (walk it with store_list_next);
 * record i sits at base_offset + i. Everything is borrowed for the call. */
typedef void (*store_stream_append_cb)(void *data, uint32_t group,
                                       struct store_slice scope, uint32_t shard,
                                       uint64_t base_offset,
                                       const struct store_list *records);

/* Called the same way once per cache change that appended to the change
 * log: a put (`value` non-NULL) or a delete that removed a key (`value`
 * NULL). TTL expiry and compaction are not changes. */
typedef void (*store_cache_change_cb)(void *data, uint32_t group,
                                      struct store_slice scope, uint32_t shard,
                                      uint64_t offset, struct store_slice key,
                                      const struct store_slice *value,
                                      uint64_t expires_at);

/* A group's state was replaced by an imported snapshot: changes it
 * covers were never reported one by one. */
typedef void (*store_imported_cb)(void *data, uint32_t group);

struct store_observer {
	store_stream_append_cb stream_append; /* may be NULL */
	store_cache_change_cb cache_change;   /* may be NULL */
	void *data;
	store_imported_cb imported; /* may be NULL */
};

/* Installs (copies) the observer, or removes it with NULL. Callbacks run on
 * the reactor thread from inside store_apply(); they may read the store but
 * must not apply. Replayed entries notify nothing. */
void store_set_observer(struct store *s, const struct store_observer *o);

/* A second observer, of its own, for the meta group's FSNP ACL users:
 * called the same way once per ACL_SETUSER (`rules` its value) or
 * ACL_DELUSER that removed a user (`rules` NULL) that applied. Installed
 * or removed (NULL) independently of store_set_observer's. */
typedef void (*store_acl_change_cb)(void *data, struct store_slice name,
                                    const struct store_slice *rules);
void store_set_acl_observer(struct store *s, store_acl_change_cb cb,
                            void *data);

/* What ACL_APPLY runs inside the apply: the user `name`'s rules (`rules`
 * NULL for a new user) with `tokens` applied in order, as text into out
 * (at most cap bytes). Returns the length, or -1 with a message in err
 * (never a token: it may be a password). Must be deterministic: every
 * replica runs it on the same input. Set once per store, before any
 * apply; without it ACL_APPLY fails on every replica alike. */
typedef int (*store_acl_rules_fn)(void *data, struct store_slice name,
                                  const struct store_slice *rules,
                                  const struct store_list *tokens, char *out,
                                  size_t cap, char *err, size_t errlen);
void store_set_acl_rules(struct store *s, store_acl_rules_fn fn, void *data);

#endif
