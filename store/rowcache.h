/* rowcache: an in-memory cache of rows of the data column family that are
 * only ever read by point lookups (KV keys, counters, shard metadata), in
 * front of RocksDB.
 *
 * Why: a point lookup in RocksDB walks the memtable's skiplist and then
 * the SST index, and it was most of the reactor's time for FSNP GET and
 * SET (docs/benchmarks.md). The cache is write-through: store/tx.c fills
 * it from RocksDB on a miss and updates it after a batch is written, so it
 * holds exactly what RocksDB would answer (a row, or "absent").
 *
 * The cache owns copies of keys and values. Memory is bounded by
 * `max_bytes` (keys, values and per-row overhead); the least recently
 * used rows are evicted (CLOCK). Not thread-safe: the reactor only. */
#ifndef LS_STORE_ROWCACHE_H
#define LS_STORE_ROWCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rowcache;

struct rowcache_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t evictions;
	uint64_t rows;
	uint64_t bytes;
	uint64_t max_bytes;
};

/* max_bytes 0 makes a cache that holds nothing. */
int rowcache_create(size_t max_bytes, struct rowcache **out);
void rowcache_destroy(struct rowcache *c);

/* Changes the bound, evicting as needed (0 empties it). */
void rowcache_resize(struct rowcache *c, size_t max_bytes);

/* 1: the row is cached and present (`*val`, `*vlen` borrowed until the
 * next call that changes the cache); 0: cached as absent; -1: unknown. */
int rowcache_get(struct rowcache *c, const uint8_t *key, size_t klen,
                 const uint8_t **val, size_t *vlen);
/* The same with the key's rowcache_hash, for callers that have it. */
int rowcache_get_h(struct rowcache *c, uint64_t hash, const uint8_t *key,
                   size_t klen, const uint8_t **val, size_t *vlen);

/* Records the row's current value (`present` false: absent; `val` is
 * then ignored). A row too large to be worth caching is dropped. */
void rowcache_put(struct rowcache *c, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen, bool present);
void rowcache_put_h(struct rowcache *c, uint64_t hash, const uint8_t *key,
                    size_t klen, const uint8_t *val, size_t vlen, bool present);

void rowcache_drop(struct rowcache *c, const uint8_t *key, size_t klen);

/* Starts loading the key's first probe slot into the CPU cache: a GET
 * planned now and served after its read barrier then finds it there. */
void rowcache_prefetch(const struct rowcache *c, const uint8_t *key,
                       size_t klen);

/* Drops every row with begin <= key < end (bytewise). O(rows). */
void rowcache_drop_range(struct rowcache *c, const uint8_t *begin, size_t blen,
                         const uint8_t *end, size_t elen);

void rowcache_clear(struct rowcache *c);

/* Calls `cb` for every row (in no order) until it returns non-zero,
 * which is returned. The cache must not change during the walk. */
typedef int (*rowcache_walk_cb)(void *arg, const uint8_t *key, size_t klen,
                                const uint8_t *val, size_t vlen, bool present);
int rowcache_walk(const struct rowcache *c, rowcache_walk_cb cb, void *arg);

/* The hash the cache uses (for callers' own tables of the same keys). */
uint64_t rowcache_hash(const uint8_t *key, size_t klen);

void rowcache_stats(const struct rowcache *c, struct rowcache_stats *st);

#endif
