/* Big-endian integers in byte buffers: the byte order of every format
 * raft/ writes (entries, log keys, the WAL's records, manifests). The
 * caller owns the buffer and has checked its length. */
#ifndef LS_RAFT_BYTES_H
#define LS_RAFT_BYTES_H

#include <stdint.h>

static inline void bytes_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void bytes_put64(uint8_t *p, uint64_t v)
{
	bytes_put32(p, (uint32_t)(v >> 32));
	bytes_put32(p + 4, (uint32_t)v);
}

static inline uint32_t bytes_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t bytes_get64(const uint8_t *p)
{
	return (uint64_t)bytes_get32(p) << 32 | bytes_get32(p + 4);
}

#endif
