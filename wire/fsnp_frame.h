/* FSNP frames: the 24-byte header, an incremental decoder over a receive
 * buffer, the per-request header checks, and the header encoder.
 *
 *   magic "FSNP" | version (low 7 bits; 0x80 = response) | flags | lane_id
 *   u32 | opcode u16 | request_id u64 | body_len u32 | body
 *
 * Decoded frames are views: `body` points into the buffer given to the
 * decoder. A `struct fsnp_message` (a logical frame after chunk reassembly
 * or decompression) may instead own its body; see fsnp_message_free. */
#ifndef WIRE_FSNP_FRAME_H
#define WIRE_FSNP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_error.h"

#define FSNP_HEADER_SIZE 24u
#define FSNP_VERSION 1u
#define FSNP_VERSION_RESPONSE 0x80u

#define FSNP_FLAG_TRACE 0x01u
#define FSNP_FLAG_CUSTOM 0x02u /* custom payload (compact body) */
#define FSNP_FLAG_WARNING 0x04u
#define FSNP_FLAG_COMPRESSED 0x08u
#define FSNP_FLAG_NO_REPLY 0x10u
#define FSNP_FLAG_MORE_CHUNKS 0x20u
/* Request flags a server understands; warning (0x04), 0x40 and 0x80 are
 * refused. Custom payload is accepted: the official SDK sends compact
 * request bodies under it without negotiation. */
#define FSNP_REQUEST_FLAGS                                                     \
	(FSNP_FLAG_TRACE | FSNP_FLAG_CUSTOM | FSNP_FLAG_COMPRESSED |           \
	 FSNP_FLAG_NO_REPLY | FSNP_FLAG_MORE_CHUNKS)

/* The largest body any frame may have (128 MiB minus the header). */
#define FSNP_MAX_FRAME_BYTES_LIMIT (128u * 1024u * 1024u - FSNP_HEADER_SIZE)

enum fsnp_dir {
	FSNP_DIR_REQUEST = 0,  /* client to server */
	FSNP_DIR_RESPONSE = 1, /* server to client: responses and events */
};

struct fsnp_header {
	enum fsnp_dir dir;
	uint8_t flags;
	uint32_t lane_id;
	uint16_t opcode;
	uint64_t request_id;
	uint32_t body_len;
};

struct fsnp_frame {
	struct fsnp_header h;
	const uint8_t *body; /* h.body_len bytes inside the decoded buffer */
};

/* Decode the frame at the start of buf[0..len).
 *
 * Returns 0 and sets *frame_len to the frame's total size (header + body)
 * when a whole frame is there, filling `out`; returns 0 with *frame_len = 0
 * when more bytes are needed (a prefix that is already wrong is reported at
 * once, without waiting for the rest of the header). Otherwise returns a
 * fatal error: FSNP_ERR_BAD_MAGIC, FSNP_ERR_BAD_VERSION, the direction
 * error for `expect`, or FSNP_ERR_FRAME_TOO_LARGE when body_len exceeds
 * max_body (which is clamped to FSNP_MAX_FRAME_BYTES_LIMIT). */
int fsnp_frame_decode(const uint8_t *buf, size_t len, enum fsnp_dir expect,
                      uint32_t max_body, struct fsnp_frame *out,
                      size_t *frame_len);

/* What the connection has enabled, for fsnp_frame_check_request. */
struct fsnp_request_policy {
	bool trace_enabled;    /* the server enables native tracing */
	bool compression_zlib; /* zlib was negotiated by HELLO/STARTUP */
};

/* Per-request checks on a decoded request header, in the reference order:
 * FSNP_ERR_REQUEST_ID_ZERO, FSNP_ERR_TRACE_DISABLED,
 * FSNP_ERR_COMPRESSION_OFF, FSNP_ERR_UNKNOWN_FLAGS. None is fatal: answer
 * status 6 and keep reading. */
int fsnp_frame_check_request(const struct fsnp_header *h,
                             const struct fsnp_request_policy *policy);

/* Write the 24 header bytes for `h` (body_len as given). */
void fsnp_frame_encode_header(const struct fsnp_header *h,
                              uint8_t out[FSNP_HEADER_SIZE]);

/* Append one frame (header with body_len = len, then the body) to `out`.
 * FSNP_ERR_TOO_LONG when len does not fit a u32, FSNP_ERR_NOMEM. */
int fsnp_frame_append(struct wbuf *out, const struct fsnp_header *h,
                      const void *body, size_t len);

/* A logical frame: one unchunked frame, or chunks joined. `body` points
 * into `owned` when owned is non-NULL (the message then owns it, freed by
 * fsnp_message_free), else into the caller's receive buffer. */
struct fsnp_message {
	struct fsnp_header h; /* h.body_len == len */
	const uint8_t *body;
	size_t len;
	uint8_t *owned;
};

/* A message viewing a decoded frame (nothing owned). */
void fsnp_message_from_frame(struct fsnp_message *m,
                             const struct fsnp_frame *f);
void fsnp_message_free(struct fsnp_message *m);

#endif /* WIRE_FSNP_FRAME_H */
