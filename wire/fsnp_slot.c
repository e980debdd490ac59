/* FSNP slot hashing and slot layout; see fsnp_slot.h. */
#include "wire/fsnp_slot.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

uint32_t fsnp_slot_crc32(const void *p, size_t len)
{
	uLong crc = crc32(0L, Z_NULL, 0);
	if (len > 0) {
		crc = crc32_z(crc, p, len);
	}
	return (uint32_t)crc;
}

struct fsnp_bytes fsnp_slot_hash_input(const uint8_t *key, size_t len)
{
	struct fsnp_bytes in = {key, len};
	const uint8_t *open = len > 0 ? memchr(key, '{', len) : NULL;
	if (open == NULL) {
		return in;
	}
	size_t after = (size_t)(open - key) + 1;
	const uint8_t *close = memchr(open + 1, '}', len - after);
	if (close == NULL || close == open + 1) {
		return in;
	}
	in.ptr = open + 1;
	in.len = (size_t)(close - open - 1);
	return in;
}

unsigned fsnp_slot_of(const uint8_t *key, size_t len)
{
	struct fsnp_bytes in = fsnp_slot_hash_input(key, len);
	return fsnp_slot_crc32(in.ptr, in.len) & (FSNP_SLOTS - 1);
}

unsigned fsnp_slot_shard(unsigned slot, unsigned shard_count)
{
	if (shard_count == 0) {
		shard_count = 1;
	}
	unsigned base = FSNP_SLOTS / shard_count;
	unsigned extra = FSNP_SLOTS % shard_count;
	unsigned big = extra * (base + 1); /* slots held by the larger shards */
	slot &= FSNP_SLOTS - 1;
	if (slot < big) {
		return slot / (base + 1);
	}
	return extra + (slot - big) / base;
}

int fsnp_slot_range(unsigned shard, unsigned shard_count, unsigned *first,
                    unsigned *last)
{
	if (shard_count == 0) {
		shard_count = 1;
	}
	if (shard >= shard_count || shard >= FSNP_SLOTS) {
		return -1;
	}
	unsigned base = FSNP_SLOTS / shard_count;
	unsigned extra = FSNP_SLOTS % shard_count;
	if (shard < extra) {
		*first = shard * (base + 1);
		*last = *first + base;
		return 0;
	}
	if (base == 0) {
		return -1;
	}
	*first = extra * (base + 1) + (shard - extra) * base;
	*last = *first + base - 1;
	return 0;
}

unsigned fsnp_slot_flow_bucket(const uint8_t *id, size_t len)
{
	return fsnp_slot_crc32(id, len) % FSNP_FLOW_BUCKETS;
}

size_t fsnp_slot_flow_bucket_key(unsigned bucket, char *out)
{
	int n = snprintf(out, 8, "fa:%u", bucket % FSNP_FLOW_BUCKETS);
	return n > 0 ? (size_t)n : 0;
}
