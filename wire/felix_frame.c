/* Felix v1 frame envelope; see felix_frame.h. */
#include "wire/felix_frame.h"

#include <stdarg.h>
#include <stdio.h>

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int felix_frame_flags_check(uint16_t flags, enum felix_frame_kind *kind,
                            char *err, size_t errlen)
{
	enum felix_frame_kind k;
	unsigned base =
	    flags & (FELIX_FLAG_PUBLISH_BATCH | FELIX_FLAG_EVENT_BATCH |
	             FELIX_FLAG_EVENT_BATCH_SHARED | FELIX_FLAG_PUBLISH_ACK);
	if (flags & ~FELIX_FLAGS_KNOWN) {
		seterr(err, errlen,
		       "frame flags 0x%04x carry unknown bits 0x%04x", flags,
		       flags & ~FELIX_FLAGS_KNOWN);
		return -1;
	}
	/* Each modifier belongs to one layout; alone it would make the
	 * payload mean something else. */
	if ((flags & FELIX_FLAG_PUBLISH_ACKED) &&
	    !(flags & FELIX_FLAG_PUBLISH_BATCH)) {
		seterr(err, errlen,
		       "frame flags 0x%04x: 0x0008 (publish acked) without "
		       "0x0001 (publish batch)",
		       flags);
		return -1;
	}
	if ((flags & FELIX_FLAG_PUBLISH_KEYED) &&
	    !(flags & FELIX_FLAG_PUBLISH_BATCH)) {
		seterr(err, errlen,
		       "frame flags 0x%04x: 0x0040 (publish keyed) without "
		       "0x0001 (publish batch)",
		       flags);
		return -1;
	}
	if ((flags & FELIX_FLAG_PUBLISH_ACK_OWNER) &&
	    !(flags & FELIX_FLAG_PUBLISH_ACK)) {
		seterr(err, errlen,
		       "frame flags 0x%04x: 0x0080 (ack owner) without 0x0010 "
		       "(publish ack)",
		       flags);
		return -1;
	}
	if ((flags & FELIX_FLAG_EVENT_BATCH_OFFSETS) &&
	    !(flags &
	      (FELIX_FLAG_EVENT_BATCH | FELIX_FLAG_EVENT_BATCH_SHARED))) {
		seterr(err, errlen,
		       "frame flags 0x%04x: 0x0020 (event offsets) without "
		       "0x0002 or 0x0004 (event batch)",
		       flags);
		return -1;
	}
	switch (base) {
	case 0:
		k = FELIX_FRAME_JSON;
		break;
	case FELIX_FLAG_PUBLISH_BATCH:
		k = FELIX_FRAME_PUBLISH_BATCH;
		break;
	case FELIX_FLAG_EVENT_BATCH:
		k = FELIX_FRAME_EVENT_BATCH;
		break;
	case FELIX_FLAG_EVENT_BATCH_SHARED:
		k = FELIX_FRAME_EVENT_BATCH_SHARED;
		break;
	case FELIX_FLAG_PUBLISH_ACK:
		k = FELIX_FRAME_PUBLISH_ACK;
		break;
	default:
		seterr(err, errlen,
		       "frame flags 0x%04x combine more than one payload "
		       "layout",
		       flags);
		return -1;
	}
	if (kind != NULL) {
		*kind = k;
	}
	return 0;
}

enum felix_frame_result felix_frame_decode(const uint8_t *buf, size_t len,
                                           uint32_t max_payload,
                                           struct felix_frame *out,
                                           size_t *need, char *err,
                                           size_t errlen)
{
	static const uint8_t magic[4] = {'F', 'L', 'X', '1'};
	enum felix_frame_kind kind = FELIX_FRAME_JSON;
	size_t i;

	/* Check what has arrived of the header before waiting for more, so
	 * a stream that is not Felix fails on its first bytes. */
	for (i = 0; i < 4 && i < len; i++) {
		if (buf[i] != magic[i]) {
			seterr(err, errlen,
			       "bad frame magic: byte %zu is 0x%02x, expected "
			       "0x%02x (\"FLX1\")",
			       i, buf[i], magic[i]);
			return FELIX_FRAME_ERROR;
		}
	}
	if (len >= 6 && wire_load_u16(buf + 4) != FELIX_FRAME_VERSION) {
		seterr(err, errlen, "unsupported frame version %u (expected 1)",
		       wire_load_u16(buf + 4));
		return FELIX_FRAME_ERROR;
	}
	if (len >= 8 && felix_frame_flags_check(wire_load_u16(buf + 6), &kind,
	                                        err, errlen) != 0) {
		return FELIX_FRAME_ERROR;
	}
	if (len < FELIX_FRAME_HEADER_LEN) {
		if (need != NULL) {
			*need = FELIX_FRAME_HEADER_LEN;
		}
		return FELIX_FRAME_NEED_MORE;
	}
	uint32_t length = wire_load_u32(buf + 8);
	if (length > max_payload) {
		seterr(err, errlen,
		       "frame payload of %u bytes exceeds the limit of %u",
		       length, max_payload);
		return FELIX_FRAME_ERROR;
	}
	size_t total = (size_t)FELIX_FRAME_HEADER_LEN + length;
	if (len < total) {
		if (need != NULL) {
			*need = total;
		}
		return FELIX_FRAME_NEED_MORE;
	}
	out->header.magic = FELIX_FRAME_MAGIC;
	out->header.version = FELIX_FRAME_VERSION;
	out->header.flags = wire_load_u16(buf + 6);
	out->header.length = length;
	out->kind = kind;
	out->payload = buf + FELIX_FRAME_HEADER_LEN;
	out->frame_len = total;
	return FELIX_FRAME_COMPLETE;
}

void felix_frame_header_encode(uint16_t flags, uint32_t length,
                               uint8_t out[FELIX_FRAME_HEADER_LEN])
{
	wire_store_u32(out, FELIX_FRAME_MAGIC);
	wire_store_u16(out + 4, FELIX_FRAME_VERSION);
	wire_store_u16(out + 6, flags);
	wire_store_u32(out + 8, length);
}

int felix_frame_encode(struct wbuf *out, uint16_t flags, const uint8_t *payload,
                       size_t len)
{
	if (len > UINT32_MAX ||
	    felix_frame_flags_check(flags, NULL, NULL, 0) != 0) {
		return -1;
	}
	uint8_t *h = wbuf_extend(out, FELIX_FRAME_HEADER_LEN);
	if (h == NULL) {
		return -1;
	}
	felix_frame_header_encode(flags, (uint32_t)len, h);
	return wbuf_append(out, payload, len);
}

size_t felix_frame_begin(struct wbuf *out, uint16_t flags)
{
	size_t at = out->len;
	uint8_t *h = wbuf_extend(out, FELIX_FRAME_HEADER_LEN);
	if (h != NULL) {
		felix_frame_header_encode(flags, 0, h);
	}
	return at;
}

int felix_frame_finish(struct wbuf *out, size_t at)
{
	if (out->oom || at + FELIX_FRAME_HEADER_LEN > out->len) {
		return -1;
	}
	size_t len = out->len - at - FELIX_FRAME_HEADER_LEN;
	if (len > UINT32_MAX) {
		return -1;
	}
	wbuf_patch_u32(out, at + 8, (uint32_t)len);
	return 0;
}
