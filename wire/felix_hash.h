/* Felix routing hash (frozen): FNV-1a 64 over the key bytes, then the
 * splitmix64 finalizer. It maps a publish key or a cache key to a shard, and
 * (DESIGN.md) a scope name to its placement. Pure functions, no state. */
#ifndef WIRE_FELIX_HASH_H
#define WIRE_FELIX_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The 64-bit hash of key[0..len), before any modulo. */
uint64_t felix_hash64(const uint8_t *key, size_t len);

/* The shard a key routes to among `shards`: 0 when unkeyed or when there is
 * at most one shard; otherwise felix_hash64() % shards. An empty key is a
 * key (keyed = true, len = 0) and hashes like any other. */
uint32_t felix_hash_shard(uint32_t shards, bool keyed, const uint8_t *key,
                          size_t len);

#endif /* WIRE_FELIX_HASH_H */
