/* FSNP chunking (flag 0x20): per-connection reassembly of chunked requests
 * (or responses, on a client) and splitting of large bodies into frames.
 *
 * A chunk stream is keyed by (lane_id, opcode, request_id); every chunk but
 * the last carries FSNP_FLAG_MORE_CHUNKS. Chunks are joined before anything
 * else happens to the body: a compressed logical body is compressed as a
 * whole, then split, and COMPRESSED is set on the final chunk only.
 *
 * The assembler owns the bodies of incomplete streams; a completed message
 * it hands out owns its body (fsnp_message_free). Memory held is bounded by
 * the limits: at most max_streams incomplete streams holding at most
 * max_pending_bytes body bytes in all (storage grows geometrically, so the
 * allocation can reach twice that). */
#ifndef WIRE_FSNP_CHUNK_H
#define WIRE_FSNP_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_frame.h"

struct fsnp_chunk_limits {
	uint32_t max_message_bytes; /* a whole joined body: max_frame_bytes */
	uint32_t max_streams;       /* MAX_PENDING_CHUNKS */
	uint64_t max_pending_bytes; /* MAX_PENDING_CHUNK_BYTES */
	uint64_t timeout_ms;        /* stream assembly deadline; 0: none */
};

/* One incomplete stream (internal to the assembler). */
struct fsnp_chunk_stream {
	uint32_t lane_id;
	uint16_t opcode;
	uint64_t request_id;
	uint8_t flags; /* of the first chunk */
	uint64_t started_ms;
	struct wbuf body;
};

struct fsnp_chunk_asm {
	struct fsnp_chunk_limits lim;
	struct fsnp_chunk_stream *streams; /* owned array */
	size_t n;
	size_t cap;
	uint64_t pending_bytes;
};

void fsnp_chunk_init(struct fsnp_chunk_asm *a,
                     const struct fsnp_chunk_limits *lim);
/* Free every incomplete stream. */
void fsnp_chunk_close(struct fsnp_chunk_asm *a);

/* Feed one decoded frame; now_ms is any monotonic clock, used only for
 * fsnp_chunk_deadline.
 *
 * Returns 0 with *ready false when the frame was a non-final chunk (kept),
 * or with *ready true and `out` filled when a logical message is complete:
 * an unchunked frame (out views f->body, nothing owned) or a final chunk
 * (out owns the joined body; flags are the first chunk's or'ed with the
 * last's, MORE_CHUNKS cleared). On FSNP_ERR_CHUNK_TOO_LARGE (joined body
 * above max_message_bytes), FSNP_ERR_CHUNK_STREAMS, FSNP_ERR_CHUNK_BYTES or
 * FSNP_ERR_NOMEM the stream is dropped; the error concerns that request
 * only (status 6). */
int fsnp_chunk_feed(struct fsnp_chunk_asm *a, const struct fsnp_frame *f,
                    uint64_t now_ms, struct fsnp_message *out, bool *ready);

size_t fsnp_chunk_pending_streams(const struct fsnp_chunk_asm *a);
uint64_t fsnp_chunk_pending_bytes(const struct fsnp_chunk_asm *a);

/* The earliest assembly deadline (started_ms + timeout_ms) of the pending
 * streams; false when there is none. The reference server closes the
 * connection when it passes. */
bool fsnp_chunk_deadline(const struct fsnp_chunk_asm *a, uint64_t *deadline);

/* The chunk size to send with: `configured` clamped to max_frame_bytes,
 * and 0 selecting max_frame_bytes (which is itself clamped to the protocol
 * limit; 0 selects that limit). */
uint32_t fsnp_chunk_size(uint32_t configured, uint32_t max_frame_bytes);

/* Number of frames a body of `len` bytes takes with chunks of `chunk`
 * bytes (at least 1: an empty body is one empty frame). */
size_t fsnp_chunk_frame_count(size_t len, uint32_t chunk);

/* Zero-copy splitting: the header of frame `index` (of
 * fsnp_chunk_frame_count) of a body of `len` bytes, and the part of the
 * body it carries, body[*offset .. *offset + *part_len). */
void fsnp_chunk_frame_header(const struct fsnp_header *h, size_t len,
                             uint32_t chunk, size_t index,
                             uint8_t header[FSNP_HEADER_SIZE], size_t *offset,
                             size_t *part_len);

/* Append all frames of `body` to `out` (copying). */
int fsnp_chunk_split(struct wbuf *out, const struct fsnp_header *h,
                     const uint8_t *body, size_t len, uint32_t chunk);

#endif /* WIRE_FSNP_CHUNK_H */
