/* Byte buffers and big-endian integer access for store/.
 *
 * `struct sbuf` is a growable heap buffer used for keys, stored values and
 * encoded results. Allocation failure aborts the process (like Redis'
 * zmalloc): a half-applied entry is worse than a crash, and the Raft log
 * replays it on restart.
 *
 * `struct rd` is a bounds-checked reader over borrowed bytes: a read past
 * the end sets `bad` and yields zeros, so decoders check once at the end.
 */
#ifndef LS_STORE_BUF_H
#define LS_STORE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sbuf {
	uint8_t *p; /* owned, malloc'd */
	size_t len;
	size_t cap;
};

void sbuf_init(struct sbuf *b);
void sbuf_free(struct sbuf *b);
/* Makes room for `n` more bytes. */
void sbuf_reserve(struct sbuf *b, size_t n);
/* Hands the bytes to the caller (malloc'd; NULL when empty) and resets. */
uint8_t *sbuf_take(struct sbuf *b, size_t *len);
void *store_xmalloc(size_t n);
void *store_xrealloc(void *p, size_t n);

static inline void sbuf_reset(struct sbuf *b)
{
	b->len = 0;
}

static inline void sbuf_add(struct sbuf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n) {
		sbuf_reserve(b, n);
	}
	if (n > 0) {
		memcpy(b->p + b->len, p, n);
	}
	b->len += n;
}

static inline void be_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void be_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void be_put64(uint8_t *p, uint64_t v)
{
	be_put32(p, (uint32_t)(v >> 32));
	be_put32(p + 4, (uint32_t)v);
}

static inline uint16_t be_get16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t be_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t be_get64(const uint8_t *p)
{
	return (uint64_t)be_get32(p) << 32 | be_get32(p + 4);
}

static inline void sbuf_u8(struct sbuf *b, uint8_t v)
{
	sbuf_add(b, &v, 1);
}

static inline void sbuf_u16(struct sbuf *b, uint16_t v)
{
	uint8_t t[2];
	be_put16(t, v);
	sbuf_add(b, t, 2);
}

static inline void sbuf_u32(struct sbuf *b, uint32_t v)
{
	uint8_t t[4];
	be_put32(t, v);
	sbuf_add(b, t, 4);
}

static inline void sbuf_u64(struct sbuf *b, uint64_t v)
{
	uint8_t t[8];
	be_put64(t, v);
	sbuf_add(b, t, 8);
}

/* u32 length + bytes */
static inline void sbuf_lbytes(struct sbuf *b, const void *p, size_t n)
{
	sbuf_u32(b, (uint32_t)n);
	sbuf_add(b, p, n);
}

struct rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	bool bad;
};

static inline void rd_init(struct rd *r, const void *p, size_t len)
{
	r->p = p;
	r->len = len;
	r->off = 0;
	r->bad = false;
}

static inline size_t rd_left(const struct rd *r)
{
	return r->len - r->off;
}

static inline const uint8_t *rd_take(struct rd *r, size_t n)
{
	if (r->bad || rd_left(r) < n) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p + r->off;
	r->off += n;
	return p;
}

static inline uint8_t rd_u8(struct rd *r)
{
	const uint8_t *p = rd_take(r, 1);
	return p ? p[0] : 0;
}

static inline uint16_t rd_u16(struct rd *r)
{
	const uint8_t *p = rd_take(r, 2);
	return p ? be_get16(p) : 0;
}

static inline uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);
	return p ? be_get32(p) : 0;
}

static inline uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_take(r, 8);
	return p ? be_get64(p) : 0;
}

/* u32 length + bytes; returns the bytes (borrowed) or NULL when bad. */
static inline const uint8_t *rd_lbytes(struct rd *r, size_t *n)
{
	uint32_t l = rd_u32(r);
	const uint8_t *p = rd_take(r, l);
	*n = p ? l : 0;
	return p;
}

/* The rest of the input. */
static inline const uint8_t *rd_rest(struct rd *r, size_t *n)
{
	*n = r->bad ? 0 : rd_left(r);
	const uint8_t *p = r->bad ? NULL : r->p + r->off;
	if (!r->bad) {
		r->off = r->len;
	}
	return p;
}

static inline bool rd_done(const struct rd *r)
{
	return !r->bad && r->off == r->len;
}

#endif
