/* Felix v1 frame envelope: the 12-byte header (magic "FLX1", version 1,
 * flags, payload length, all big-endian) and an incremental decoder that
 * works on whatever prefix of the stream has arrived.
 *
 * Flag bits select the payload layout, so an unknown bit, or a modifier
 * without the bit it modifies, is an error and is never masked off.
 *
 * Nothing here allocates: a decoded frame's payload is a view into the
 * caller's buffer, valid as long as that buffer is. */
#ifndef WIRE_FELIX_FRAME_H
#define WIRE_FELIX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

#define FELIX_FRAME_MAGIC 0x464C5831u /* "FLX1" */
#define FELIX_FRAME_VERSION 1
#define FELIX_FRAME_HEADER_LEN 12
/* The reference broker's frame cap, and its cap before auth. */
#define FELIX_FRAME_DEFAULT_MAX_PAYLOAD (4u * 1024 * 1024)
#define FELIX_FRAME_PREAUTH_MAX_PAYLOAD (64u * 1024)

/* Flag bits (seed "Frame Envelope"). */
#define FELIX_FLAG_PUBLISH_BATCH 0x0001u
#define FELIX_FLAG_EVENT_BATCH 0x0002u
#define FELIX_FLAG_EVENT_BATCH_SHARED 0x0004u
#define FELIX_FLAG_PUBLISH_ACKED 0x0008u
#define FELIX_FLAG_PUBLISH_ACK 0x0010u
#define FELIX_FLAG_EVENT_BATCH_OFFSETS 0x0020u
#define FELIX_FLAG_PUBLISH_KEYED 0x0040u
#define FELIX_FLAG_PUBLISH_ACK_OWNER 0x0080u
/* Every bit this version understands. */
#define FELIX_FLAGS_KNOWN 0x00FFu
/* What a peer that did not negotiate is assumed to support (frozen). */
#define FELIX_FLAGS_ORIGINAL_V1 0x0007u

/* What a frame's payload is, as its flags say. */
enum felix_frame_kind {
	FELIX_FRAME_JSON = 0,           /* flags 0: a JSON message */
	FELIX_FRAME_PUBLISH_BATCH,      /* 0x0001 [+0x0008] [+0x0040] */
	FELIX_FRAME_EVENT_BATCH,        /* 0x0002 [+0x0020] */
	FELIX_FRAME_EVENT_BATCH_SHARED, /* 0x0004 [+0x0020] */
	FELIX_FRAME_PUBLISH_ACK,        /* 0x0010 [+0x0080] */
};

struct felix_frame_header {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t length; /* payload bytes after the header */
};

/* A decoded frame. `payload` points into the buffer given to
 * felix_frame_decode(); nothing is copied. */
struct felix_frame {
	struct felix_frame_header header;
	enum felix_frame_kind kind;
	const uint8_t *payload;
	size_t frame_len; /* header + payload: bytes to consume */
};

/* Results of felix_frame_decode(). */
enum felix_frame_result {
	FELIX_FRAME_ERROR = -1,    /* not a valid frame; `err` says why */
	FELIX_FRAME_COMPLETE = 0,  /* a whole frame is at the start of buf */
	FELIX_FRAME_NEED_MORE = 1, /* valid so far; *need bytes are required */
};

/* Check a flags field: 0 if it is a layout this version defines (and sets
 * *kind), -1 with a message in err otherwise. `kind` may be NULL. */
int felix_frame_flags_check(uint16_t flags, enum felix_frame_kind *kind,
                            char *err, size_t errlen);

/* Decode the frame at the start of buf[0..len). Every byte that has arrived
 * is checked as soon as it arrives: a wrong magic byte, a wrong version, bad
 * flags or a length above max_payload are errors before the rest of the
 * frame is in. On FELIX_FRAME_NEED_MORE, *need (if not NULL) is the total
 * number of bytes the frame needs from buf[0] (12 while the header is
 * incomplete). `out` is written only on FELIX_FRAME_COMPLETE. */
enum felix_frame_result felix_frame_decode(const uint8_t *buf, size_t len,
                                           uint32_t max_payload,
                                           struct felix_frame *out,
                                           size_t *need, char *err,
                                           size_t errlen);

/* Write a header with the current magic and version. */
void felix_frame_header_encode(uint16_t flags, uint32_t length,
                               uint8_t out[FELIX_FRAME_HEADER_LEN]);

/* Append header + payload to out. -1 if the payload does not fit the u32
 * length field, the flags are invalid, or memory ran out. */
int felix_frame_encode(struct wbuf *out, uint16_t flags, const uint8_t *payload,
                       size_t len);

/* Append a header whose length is filled in later by felix_frame_finish(),
 * for encoders that write the payload straight after it. Returns the
 * header's position in out. */
size_t felix_frame_begin(struct wbuf *out, uint16_t flags);
/* Set the length of the header begun at `at` to everything written since.
 * -1 if that exceeds the u32 length field or memory ran out earlier. */
int felix_frame_finish(struct wbuf *out, size_t at);

#endif /* WIRE_FELIX_FRAME_H */
