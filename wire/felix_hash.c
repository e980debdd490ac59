/* Felix routing hash; see felix_hash.h. */
#include "wire/felix_hash.h"

uint64_t felix_hash64(const uint8_t *key, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;
	for (i = 0; i < len; i++) {
		h ^= key[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

uint32_t felix_hash_shard(uint32_t shards, bool keyed, const uint8_t *key,
                          size_t len)
{
	if (shards <= 1 || !keyed) {
		return 0;
	}
	return (uint32_t)(felix_hash64(key, len) % shards);
}
