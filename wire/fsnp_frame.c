/* FSNP frame header codec; see fsnp_frame.h. */
#include "wire/fsnp_frame.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t magic[4] = {'F', 'S', 'N', 'P'};

int fsnp_frame_decode(const uint8_t *buf, size_t len, enum fsnp_dir expect,
                      uint32_t max_body, struct fsnp_frame *out,
                      size_t *frame_len)
{
	*frame_len = 0;
	/* Reject a wrong prefix as soon as it is visible: a peer speaking
	 * another protocol should not hold the connection for 24 bytes. */
	size_t n = len < sizeof magic ? len : sizeof magic;
	if (n > 0 && memcmp(buf, magic, n) != 0) {
		return FSNP_ERR_BAD_MAGIC;
	}
	if (len < 5) {
		return 0;
	}
	uint8_t version = buf[4];
	if ((version & 0x7fu) != FSNP_VERSION) {
		return FSNP_ERR_BAD_VERSION;
	}
	bool response = (version & FSNP_VERSION_RESPONSE) != 0;
	if (expect == FSNP_DIR_REQUEST && response) {
		return FSNP_ERR_REQUEST_DIRECTION;
	}
	if (expect == FSNP_DIR_RESPONSE && !response) {
		return FSNP_ERR_RESPONSE_DIRECTION;
	}
	if (len < FSNP_HEADER_SIZE) {
		return 0;
	}
	if (max_body > FSNP_MAX_FRAME_BYTES_LIMIT) {
		max_body = FSNP_MAX_FRAME_BYTES_LIMIT;
	}
	uint32_t body_len = wire_load_u32(buf + 20);
	if (body_len > max_body) {
		return FSNP_ERR_FRAME_TOO_LARGE;
	}
	if (len - FSNP_HEADER_SIZE < body_len) {
		return 0;
	}
	out->h.dir = response ? FSNP_DIR_RESPONSE : FSNP_DIR_REQUEST;
	out->h.flags = buf[5];
	out->h.lane_id = wire_load_u32(buf + 6);
	out->h.opcode = wire_load_u16(buf + 10);
	out->h.request_id = wire_load_u64(buf + 12);
	out->h.body_len = body_len;
	out->body = buf + FSNP_HEADER_SIZE;
	*frame_len = FSNP_HEADER_SIZE + (size_t)body_len;
	return 0;
}

int fsnp_frame_check_request(const struct fsnp_header *h,
                             const struct fsnp_request_policy *policy)
{
	if (h->request_id == 0) {
		return FSNP_ERR_REQUEST_ID_ZERO;
	}
	if ((h->flags & FSNP_FLAG_TRACE) && !policy->trace_enabled) {
		return FSNP_ERR_TRACE_DISABLED;
	}
	if ((h->flags & FSNP_FLAG_COMPRESSED) && !policy->compression_zlib) {
		return FSNP_ERR_COMPRESSION_OFF;
	}
	if (h->flags & ~FSNP_REQUEST_FLAGS) {
		return FSNP_ERR_UNKNOWN_FLAGS;
	}
	return 0;
}

void fsnp_frame_encode_header(const struct fsnp_header *h,
                              uint8_t out[FSNP_HEADER_SIZE])
{
	memcpy(out, magic, sizeof magic);
	out[4] = (uint8_t)(FSNP_VERSION |
	                   (h->dir == FSNP_DIR_RESPONSE ? FSNP_VERSION_RESPONSE
	                                                : 0u));
	out[5] = h->flags;
	wire_store_u32(out + 6, h->lane_id);
	wire_store_u16(out + 10, h->opcode);
	wire_store_u64(out + 12, h->request_id);
	wire_store_u32(out + 20, h->body_len);
}

int fsnp_frame_append(struct wbuf *out, const struct fsnp_header *h,
                      const void *body, size_t len)
{
	if (len > UINT32_MAX) {
		return FSNP_ERR_TOO_LONG;
	}
	struct fsnp_header hh = *h;
	hh.body_len = (uint32_t)len;
	uint8_t *p = wbuf_extend(out, FSNP_HEADER_SIZE + len);
	if (p == NULL) {
		return FSNP_ERR_NOMEM;
	}
	fsnp_frame_encode_header(&hh, p);
	if (len > 0) {
		memcpy(p + FSNP_HEADER_SIZE, body, len);
	}
	return 0;
}

void fsnp_message_from_frame(struct fsnp_message *m, const struct fsnp_frame *f)
{
	m->h = f->h;
	m->body = f->body;
	m->len = f->h.body_len;
	m->owned = NULL;
}

void fsnp_message_free(struct fsnp_message *m)
{
	free(m->owned);
	m->owned = NULL;
	m->body = NULL;
	m->len = 0;
}
