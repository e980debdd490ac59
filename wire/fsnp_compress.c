/* FSNP zlib body compression; see fsnp_compress.h. */
#define ZLIB_CONST
#include "wire/fsnp_compress.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "wire/fsnp_chunk.h"

/* Output is produced in steps of at most this many bytes, so an inflate
 * never allocates far beyond its cap. */
#define STEP_BYTES (256u * 1024u)

/* Move the next slice of the input (zlib counts in uInt) into the stream. */
static void refill(z_stream *zs, const uint8_t **in, size_t *left)
{
	if (zs->avail_in == 0 && *left > 0) {
		size_t n = *left < UINT_MAX ? *left : UINT_MAX;
		zs->next_in = *in;
		zs->avail_in = (uInt)n;
		*in += n;
		*left -= n;
	}
}

int fsnp_compress_deflate(const uint8_t *in, size_t len, struct wbuf *out)
{
	z_stream zs;
	size_t start = out->len;
	size_t left = len;
	int rv = 0;

	memset(&zs, 0, sizeof zs);
	int zr = deflateInit(&zs, Z_DEFAULT_COMPRESSION);
	if (zr != Z_OK) {
		return zr == Z_MEM_ERROR ? FSNP_ERR_NOMEM : FSNP_ERR_DEFLATE;
	}
	for (;;) {
		refill(&zs, &in, &left);
		if (wbuf_reserve(out, STEP_BYTES) != 0) {
			rv = FSNP_ERR_NOMEM;
			goto err_end;
		}
		zs.next_out = out->data + out->len;
		zs.avail_out = STEP_BYTES;
		zr = deflate(&zs, left == 0 ? Z_FINISH : Z_NO_FLUSH);
		out->len += STEP_BYTES - zs.avail_out;
		if (zr == Z_STREAM_END) {
			break;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			rv = FSNP_ERR_DEFLATE;
			goto err_end;
		}
	}
	deflateEnd(&zs);
	return 0;

err_end:
	deflateEnd(&zs);
	out->len = start;
	return rv;
}

int fsnp_compress_inflate(const uint8_t *in, size_t len, size_t max_out,
                          struct wbuf *out)
{
	z_stream zs;
	size_t start = out->len;
	size_t produced = 0;
	size_t left = len;
	int rv = 0;

	memset(&zs, 0, sizeof zs);
	int zr = inflateInit(&zs);
	if (zr != Z_OK) {
		return zr == Z_MEM_ERROR ? FSNP_ERR_NOMEM
		                         : FSNP_ERR_INFLATE_INVALID;
	}
	for (;;) {
		refill(&zs, &in, &left);
		/* Room for one byte past the cap, to see it being crossed. */
		size_t room = max_out - produced;
		room = room < STEP_BYTES - 1 ? room + 1 : STEP_BYTES;
		if (wbuf_reserve(out, room) != 0) {
			rv = FSNP_ERR_NOMEM;
			goto err_end;
		}
		zs.next_out = out->data + out->len;
		zs.avail_out = (uInt)room;
		zr = inflate(&zs, Z_NO_FLUSH);
		size_t got = room - zs.avail_out;
		out->len += got;
		produced += got;
		if (produced > max_out) {
			rv = FSNP_ERR_INFLATE_TOO_LARGE;
			goto err_end;
		}
		if (zr == Z_STREAM_END) {
			if (zs.avail_in != 0 || left != 0) {
				rv = FSNP_ERR_INFLATE_INVALID;
				goto err_end;
			}
			break;
		}
		if (zr == Z_MEM_ERROR) {
			rv = FSNP_ERR_NOMEM;
			goto err_end;
		}
		if (zr == Z_BUF_ERROR && zs.avail_in == 0 && left == 0) {
			/* The input ended before the stream did. */
			rv = FSNP_ERR_INFLATE_INVALID;
			goto err_end;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			/* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR. */
			rv = FSNP_ERR_INFLATE_INVALID;
			goto err_end;
		}
	}
	inflateEnd(&zs);
	return 0;

err_end:
	inflateEnd(&zs);
	out->len = start;
	return rv;
}

int fsnp_compress_frames(struct wbuf *out, const struct fsnp_header *h,
                         const uint8_t *body, size_t len, bool zlib,
                         uint32_t chunk)
{
	if (!zlib || len == 0) {
		return fsnp_chunk_split(out, h, body, len, chunk);
	}
	struct wbuf z;
	struct fsnp_header zh = *h;
	wbuf_init(&z);
	int rv = fsnp_compress_deflate(body, len, &z);
	if (rv == 0) {
		zh.flags |= FSNP_FLAG_COMPRESSED;
		rv = fsnp_chunk_split(out, &zh, z.data, z.len, chunk);
	}
	wbuf_free(&z);
	return rv;
}

int fsnp_compress_inflate_message(struct fsnp_message *m, size_t max_out)
{
	if (!(m->h.flags & FSNP_FLAG_COMPRESSED)) {
		return 0;
	}
	if (max_out > UINT32_MAX) {
		max_out = UINT32_MAX;
	}
	struct wbuf z;
	wbuf_init(&z);
	int rv = fsnp_compress_inflate(m->body, m->len, max_out, &z);
	if (rv != 0) {
		wbuf_free(&z);
		return rv;
	}
	free(m->owned);
	m->owned = z.data;
	m->body = z.data;
	m->len = z.len;
	m->h.body_len = (uint32_t)z.len;
	m->h.flags = (uint8_t)(m->h.flags & ~FSNP_FLAG_COMPRESSED);
	return 0;
}
