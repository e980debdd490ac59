/* wbuf: growable byte buffer; see buf.h. */
#include "wire/buf.h"

#include <stdlib.h>
#include <string.h>

void wbuf_init(struct wbuf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = false;
}

void wbuf_free(struct wbuf *b)
{
	free(b->data);
	wbuf_init(b);
}

void wbuf_reset(struct wbuf *b)
{
	b->len = 0;
	b->oom = false;
}

int wbuf_reserve(struct wbuf *b, size_t extra)
{
	if (b->oom) {
		return -1;
	}
	if (extra <= b->cap - b->len) {
		return 0;
	}
	if (extra > SIZE_MAX / 2 - b->len) {
		b->oom = true;
		return -1;
	}
	size_t want = b->len + extra;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < want) {
		cap *= 2;
	}
	uint8_t *p = realloc(b->data, cap);
	if (p == NULL) {
		b->oom = true;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

uint8_t *wbuf_extend(struct wbuf *b, size_t len)
{
	/* Reserve at least one byte so that even a zero-length extension
	 * returns a real pointer: NULL means only failure. */
	if (wbuf_reserve(b, len > 0 ? len : 1) != 0) {
		return NULL;
	}
	uint8_t *p = b->data + b->len;
	b->len += len;
	return p;
}

int wbuf_append(struct wbuf *b, const void *p, size_t len)
{
	if (wbuf_reserve(b, len) != 0) {
		return -1;
	}
	if (len > 0) {
		memcpy(b->data + b->len, p, len);
		b->len += len;
	}
	return 0;
}

int wbuf_append_str(struct wbuf *b, const char *s)
{
	return wbuf_append(b, s, strlen(s));
}

int wbuf_put_u8(struct wbuf *b, uint8_t v)
{
	return wbuf_append(b, &v, 1);
}

int wbuf_put_u16(struct wbuf *b, uint16_t v)
{
	uint8_t *p = wbuf_extend(b, 2);
	if (p == NULL) {
		return -1;
	}
	wire_store_u16(p, v);
	return 0;
}

int wbuf_put_u32(struct wbuf *b, uint32_t v)
{
	uint8_t *p = wbuf_extend(b, 4);
	if (p == NULL) {
		return -1;
	}
	wire_store_u32(p, v);
	return 0;
}

int wbuf_put_u64(struct wbuf *b, uint64_t v)
{
	uint8_t *p = wbuf_extend(b, 8);
	if (p == NULL) {
		return -1;
	}
	wire_store_u64(p, v);
	return 0;
}

void wbuf_patch_u32(struct wbuf *b, size_t at, uint32_t v)
{
	if (!b->oom && at + 4 <= b->len) {
		wire_store_u32(b->data + at, v);
	}
}
