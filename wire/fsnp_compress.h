/* FSNP body compression (flag 0x08, "zlib" as negotiated by HELLO or
 * STARTUP): zlib-format deflate of a whole logical body, and inflate with a
 * cap on the decompressed size so a small frame cannot expand without
 * bound.
 *
 * Order: a sender compresses the whole body, then splits it into chunks
 * (fsnp_compress_frames); a receiver joins the chunks, then inflates
 * (fsnp_compress_inflate_message). Output buffers belong to the caller. */
#ifndef WIRE_FSNP_COMPRESS_H
#define WIRE_FSNP_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_frame.h"

/* Append the zlib-format compression of in[0..len) to `out`.
 * 0, FSNP_ERR_NOMEM or FSNP_ERR_DEFLATE. */
int fsnp_compress_deflate(const uint8_t *in, size_t len, struct wbuf *out);

/* Append the decompression of the zlib stream in[0..len) to `out`, which
 * must come to at most max_out bytes. The input must be exactly one
 * complete stream. 0, FSNP_ERR_INFLATE_TOO_LARGE, FSNP_ERR_INFLATE_INVALID
 * (corrupt, truncated, preset dictionary, bytes after the stream) or
 * FSNP_ERR_NOMEM; on error `out` keeps its previous length. */
int fsnp_compress_inflate(const uint8_t *in, size_t len, size_t max_out,
                          struct wbuf *out);

/* Append the frames of a response (or event) body to `out`: when `zlib` and
 * the body is not empty it is compressed and COMPRESSED set, then it is
 * split at `chunk` bytes (see fsnp_chunk_size). */
int fsnp_compress_frames(struct wbuf *out, const struct fsnp_header *h,
                         const uint8_t *body, size_t len, bool zlib,
                         uint32_t chunk);

/* When m carries COMPRESSED, replace its body with the inflated one (now
 * owned by m; the previous owned body is freed) and clear the flag. The
 * limit is max_frame_bytes. A message without the flag is left alone. */
int fsnp_compress_inflate_message(struct fsnp_message *m, size_t max_out);

#endif /* WIRE_FSNP_COMPRESS_H */
