/* wbuf: a growable byte buffer that encoders append to.
 *
 * The buffer owns `data` (malloc'd); wbuf_free() releases it. Appends grow
 * the buffer geometrically. An allocation failure makes the append return -1
 * and also sets the sticky `oom` flag, after which every further append is a
 * no-op returning -1: an encoder may append many pieces and check once at the
 * end. Integers are written big-endian (network order). */
#ifndef WIRE_BUF_H
#define WIRE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wbuf {
	uint8_t *data; /* owned; NULL until the first append */
	size_t len;    /* bytes written */
	size_t cap;    /* bytes allocated */
	bool oom;      /* an append failed; contents are incomplete */
};

/* An empty buffer; allocates nothing. */
void wbuf_init(struct wbuf *b);
/* Release the storage and return to the empty state. */
void wbuf_free(struct wbuf *b);
/* Forget the contents (and the oom flag) but keep the storage. */
void wbuf_reset(struct wbuf *b);
/* Make room for `extra` more bytes. 0, or -1 when out of memory. */
int wbuf_reserve(struct wbuf *b, size_t extra);
/* Append `len` bytes; `p` may be NULL when `len` is 0. */
int wbuf_append(struct wbuf *b, const void *p, size_t len);
int wbuf_append_str(struct wbuf *b, const char *s);
int wbuf_put_u8(struct wbuf *b, uint8_t v);
int wbuf_put_u16(struct wbuf *b, uint16_t v);
int wbuf_put_u32(struct wbuf *b, uint32_t v);
int wbuf_put_u64(struct wbuf *b, uint64_t v);
/* Append `len` uninitialised bytes and return a pointer to them (valid until
 * the next append), or NULL when out of memory. */
uint8_t *wbuf_extend(struct wbuf *b, size_t len);
/* Overwrite bytes already written at `at` (must be within len). */
void wbuf_patch_u32(struct wbuf *b, size_t at, uint32_t v);

/* Big-endian loads and stores on raw memory. */
static inline uint16_t wire_load_u16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t wire_load_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t wire_load_u64(const uint8_t *p)
{
	return (uint64_t)wire_load_u32(p) << 32 | wire_load_u32(p + 4);
}

static inline void wire_store_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wire_store_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void wire_store_u64(uint8_t *p, uint64_t v)
{
	wire_store_u32(p, (uint32_t)(v >> 32));
	wire_store_u32(p + 4, (uint32_t)v);
}

#endif /* WIRE_BUF_H */
