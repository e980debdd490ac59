/* FSNP key routing: the 1024-slot hash, the contiguous slot-to-shard
 * layout, and the Flow auto-partition buckets.
 *
 *   slot = crc32(hash_input) & 0x3FF
 *
 * with zlib's CRC-32 (IEEE, reflected, as :erlang.crc32 and the official
 * SDKs). hash_input is the text between the first '{' and the next '}'
 * when that is not empty (Redis hash tags), else the whole key. Known
 * answers: "plain" 719, "{user:42}:x" 390, "fa:0" 1. */
#ifndef WIRE_FSNP_SLOT_H
#define WIRE_FSNP_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "wire/fsnp_value.h"

#define FSNP_SLOTS 1024u
#define FSNP_FLOW_BUCKETS 256u

/* CRC-32 of p[0..len). */
uint32_t fsnp_slot_crc32(const void *p, size_t len);

/* The part of key[0..len) that is hashed (a view into the key). */
struct fsnp_bytes fsnp_slot_hash_input(const uint8_t *key, size_t len);

/* The slot of a key, 0..1023. */
unsigned fsnp_slot_of(const uint8_t *key, size_t len);

/* Slots are spread contiguously over shard_count shards: each shard gets
 * 1024 / n slots and the first 1024 % n shards one more. The shard owning
 * `slot` (shard_count 0 is treated as 1): */
unsigned fsnp_slot_shard(unsigned slot, unsigned shard_count);
/* The slot range of `shard`, first..last inclusive; returns 0, or -1 when
 * the shard owns no slot (shard >= 1024 or >= shard_count). */
int fsnp_slot_range(unsigned shard, unsigned shard_count, unsigned *first,
                    unsigned *last);

/* A flow without a partition key lives in auto-partition
 * crc32(id) % 256, whose routing key is "fa:<bucket>" (e.g. "order-1" is
 * in bucket 239). fsnp_slot_flow_bucket_key writes that key with a NUL to
 * out (at least 8 bytes) and returns its length. */
unsigned fsnp_slot_flow_bucket(const uint8_t *id, size_t len);
size_t fsnp_slot_flow_bucket_key(unsigned bucket, char *out);

#endif /* WIRE_FSNP_SLOT_H */
