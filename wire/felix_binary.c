/* Felix v1 binary payloads; see felix_binary.h. */
#include "wire/felix_binary.h"

#include <stdarg.h>
#include <stdio.h>

#include "wire/felix_frame.h"
#include "wire/felix_utf8.h"

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

/* A bounds-checked cursor over a payload. Reads fail (returning -1) instead
 * of running past the end; `what` names the field in the error. */
struct rd {
	const uint8_t *p;
	size_t left;
	const char *frame; /* frame name, for messages */
	char *err;
	size_t errlen;
};

static int rd_short(struct rd *r, const char *what, size_t need)
{
	seterr(r->err, r->errlen,
	       "%s: truncated at %s (need %zu bytes, %zu left)", r->frame, what,
	       need, r->left);
	return -1;
}

static int rd_u8(struct rd *r, const char *what, uint8_t *v)
{
	if (r->left < 1) {
		return rd_short(r, what, 1);
	}
	*v = r->p[0];
	r->p++;
	r->left--;
	return 0;
}

static int rd_u16(struct rd *r, const char *what, uint16_t *v)
{
	if (r->left < 2) {
		return rd_short(r, what, 2);
	}
	*v = wire_load_u16(r->p);
	r->p += 2;
	r->left -= 2;
	return 0;
}

static int rd_u32(struct rd *r, const char *what, uint32_t *v)
{
	if (r->left < 4) {
		return rd_short(r, what, 4);
	}
	*v = wire_load_u32(r->p);
	r->p += 4;
	r->left -= 4;
	return 0;
}

static int rd_u64(struct rd *r, const char *what, uint64_t *v)
{
	if (r->left < 8) {
		return rd_short(r, what, 8);
	}
	*v = wire_load_u64(r->p);
	r->p += 8;
	r->left -= 8;
	return 0;
}

static int rd_bytes(struct rd *r, const char *what, size_t n,
                    struct felix_view *v)
{
	if (r->left < n) {
		return rd_short(r, what, n);
	}
	v->data = r->p;
	v->len = n;
	r->p += n;
	r->left -= n;
	return 0;
}

/* u16 length + bytes. */
static int rd_str16(struct rd *r, const char *what, bool utf8,
                    struct felix_view *v)
{
	uint16_t n;
	if (rd_u16(r, what, &n) != 0 || rd_bytes(r, what, n, v) != 0) {
		return -1;
	}
	if (utf8 && !felix_utf8_valid(v->data, v->len)) {
		seterr(r->err, r->errlen, "%s: %s is not valid UTF-8", r->frame,
		       what);
		return -1;
	}
	return 0;
}

static int rd_end(struct rd *r)
{
	if (r->left != 0) {
		seterr(r->err, r->errlen,
		       "%s: %zu trailing bytes after the body", r->frame,
		       r->left);
		return -1;
	}
	return 0;
}

/* u32 count, then count records of u32 length + bytes, to the end. */
static int rd_records(struct rd *r, const struct felix_binary_limits *limits,
                      struct felix_records *out)
{
	uint32_t max_records = FELIX_BINARY_DEFAULT_MAX_RECORDS;
	uint32_t max_len = FELIX_BINARY_DEFAULT_MAX_RECORD_LEN;
	uint32_t count, i;
	if (limits != NULL) {
		max_records = limits->max_records;
		max_len = limits->max_record_len;
	}
	if (rd_u32(r, "record count", &count) != 0) {
		return -1;
	}
	if (count > max_records) {
		seterr(r->err, r->errlen,
		       "%s: %u records exceed the limit of %u", r->frame, count,
		       max_records);
		return -1;
	}
	/* Each record needs at least its length field. */
	if (count > r->left / 4) {
		seterr(r->err, r->errlen,
		       "%s: %u records cannot fit in the %zu bytes left",
		       r->frame, count, r->left);
		return -1;
	}
	out->data = r->p;
	out->count = count;
	for (i = 0; i < count; i++) {
		uint32_t n;
		struct felix_view v;
		if (rd_u32(r, "record length", &n) != 0) {
			return -1;
		}
		if (n > max_len) {
			seterr(r->err, r->errlen,
			       "%s: record %u is %u bytes, above the limit of "
			       "%u",
			       r->frame, i, n, max_len);
			return -1;
		}
		if (rd_bytes(r, "record", n, &v) != 0) {
			return -1;
		}
	}
	out->len = (size_t)(r->p - out->data);
	return rd_end(r);
}

void felix_records_iter_init(struct felix_records_iter *it,
                             const struct felix_records *r)
{
	it->p = r->data;
	it->end = r->data + r->len;
	it->left = r->count;
}

bool felix_records_next(struct felix_records_iter *it, struct felix_view *out)
{
	uint32_t n;
	/* The decoder checked the area; the guards only keep a hand-built
	 * felix_records from reading out of bounds. */
	if (it->left == 0 || it->end - it->p < 4) {
		return false;
	}
	n = wire_load_u32(it->p);
	if ((size_t)(it->end - it->p - 4) < n) {
		return false;
	}
	out->data = it->p + 4;
	out->len = n;
	it->p += 4 + (size_t)n;
	it->left--;
	return true;
}

static int expect_kind(uint16_t flags, enum felix_frame_kind want,
                       const char *frame, char *err, size_t errlen)
{
	enum felix_frame_kind kind;
	if (felix_frame_flags_check(flags, &kind, err, errlen) != 0) {
		return -1;
	}
	if (kind != want) {
		seterr(err, errlen,
		       "%s: frame flags 0x%04x are not this layout", frame,
		       flags);
		return -1;
	}
	return 0;
}

int felix_publish_batch_decode(uint16_t flags, const uint8_t *payload,
                               size_t len,
                               const struct felix_binary_limits *limits,
                               struct felix_publish_batch *out, char *err,
                               size_t errlen)
{
	struct rd r = {payload, len, "publish batch", err, errlen};
	if (expect_kind(flags, FELIX_FRAME_PUBLISH_BATCH, r.frame, err,
	                errlen) != 0) {
		return -1;
	}
	out->acked = (flags & FELIX_FLAG_PUBLISH_ACKED) != 0;
	out->request_id = 0;
	out->ack_mode = FELIX_ACK_NONE;
	out->keyed = (flags & FELIX_FLAG_PUBLISH_KEYED) != 0;
	out->key.data = NULL;
	out->key.len = 0;
	/* Seed order: the correlation prefix first, so request_id stays at
	 * offset 0, then the key prefix, then the body. */
	if (out->acked) {
		uint8_t mode;
		if (rd_u64(&r, "request_id", &out->request_id) != 0 ||
		    rd_u8(&r, "ack_mode", &mode) != 0) {
			return -1;
		}
		if (mode != FELIX_ACK_PER_MESSAGE &&
		    mode != FELIX_ACK_PER_BATCH) {
			seterr(err, errlen,
			       "publish batch: ack_mode %u is neither 1 "
			       "(per_message) nor 2 (per_batch)",
			       mode);
			return -1;
		}
		out->ack_mode = (enum felix_ack_mode)mode;
	}
	if (out->keyed && rd_str16(&r, "key", false, &out->key) != 0) {
		return -1;
	}
	if (rd_str16(&r, "tenant_id", true, &out->tenant_id) != 0 ||
	    rd_str16(&r, "namespace", true, &out->namespace) != 0 ||
	    rd_str16(&r, "stream", true, &out->stream) != 0) {
		return -1;
	}
	return rd_records(&r, limits, &out->records);
}

int felix_publish_batch_peek_request_id(uint16_t flags, const uint8_t *payload,
                                        size_t len, uint64_t *request_id)
{
	if (!(flags & FELIX_FLAG_PUBLISH_BATCH) ||
	    !(flags & FELIX_FLAG_PUBLISH_ACKED) || len < 8) {
		return -1;
	}
	*request_id = wire_load_u64(payload);
	return 0;
}

static int put_str16(struct wbuf *out, struct felix_view v)
{
	if (v.len > UINT16_MAX) {
		return -1;
	}
	if (wbuf_put_u16(out, (uint16_t)v.len) != 0) {
		return -1;
	}
	return wbuf_append(out, v.data, v.len);
}

static int put_records(struct wbuf *out, const struct felix_view *payloads,
                       uint32_t count)
{
	uint32_t i;
	if (wbuf_put_u32(out, count) != 0) {
		return -1;
	}
	for (i = 0; i < count; i++) {
		if (payloads[i].len > UINT32_MAX ||
		    wbuf_put_u32(out, (uint32_t)payloads[i].len) != 0 ||
		    wbuf_append(out, payloads[i].data, payloads[i].len) != 0) {
			return -1;
		}
	}
	return 0;
}

int felix_publish_batch_encode(struct wbuf *out,
                               const struct felix_publish_batch *b,
                               const struct felix_view *payloads,
                               uint32_t count)
{
	uint16_t flags = FELIX_FLAG_PUBLISH_BATCH;
	size_t start = out->len, at;
	if (b->acked) {
		flags |= FELIX_FLAG_PUBLISH_ACKED;
		if (b->ack_mode != FELIX_ACK_PER_MESSAGE &&
		    b->ack_mode != FELIX_ACK_PER_BATCH) {
			return -1;
		}
	}
	if (b->keyed) {
		flags |= FELIX_FLAG_PUBLISH_KEYED;
	}
	at = felix_frame_begin(out, flags);
	if (b->acked && (wbuf_put_u64(out, b->request_id) != 0 ||
	                 wbuf_put_u8(out, (uint8_t)b->ack_mode) != 0)) {
		goto err;
	}
	if (b->keyed && put_str16(out, b->key) != 0) {
		goto err;
	}
	if (put_str16(out, b->tenant_id) != 0 ||
	    put_str16(out, b->namespace) != 0 ||
	    put_str16(out, b->stream) != 0 ||
	    put_records(out, payloads, count) != 0 ||
	    felix_frame_finish(out, at) != 0) {
		goto err;
	}
	return 0;
err:
	/* Leave the buffer as it was, unless memory ran out. */
	if (!out->oom) {
		out->len = start;
	}
	return -1;
}

int felix_publish_ack_decode(uint16_t flags, const uint8_t *payload, size_t len,
                             struct felix_publish_ack *out, char *err,
                             size_t errlen)
{
	struct rd r = {payload, len, "publish ack", err, errlen};
	if (expect_kind(flags, FELIX_FRAME_PUBLISH_ACK, r.frame, err, errlen) !=
	    0) {
		return -1;
	}
	if (rd_u8(&r, "status", &out->status) != 0) {
		return -1;
	}
	if (out->status != FELIX_ACK_STATUS_OK &&
	    out->status != FELIX_ACK_STATUS_ERROR) {
		seterr(err, errlen,
		       "publish ack: status %u is neither 0 (ok) nor 1 (error)",
		       out->status);
		return -1;
	}
	if (rd_u64(&r, "request_id", &out->request_id) != 0 ||
	    rd_str16(&r, "message", true, &out->message) != 0) {
		return -1;
	}
	out->has_owner = (flags & FELIX_FLAG_PUBLISH_ACK_OWNER) != 0;
	out->has_owner_addr = false;
	out->owner_node_id.data = NULL;
	out->owner_node_id.len = 0;
	out->owner_addr = out->owner_node_id;
	out->owner_generation = 0;
	if (out->has_owner) {
		if (rd_str16(&r, "owner node_id", true, &out->owner_node_id) !=
		        0 ||
		    rd_str16(&r, "owner addr", true, &out->owner_addr) != 0 ||
		    rd_u64(&r, "owner generation", &out->owner_generation) !=
		        0) {
			return -1;
		}
		out->has_owner_addr = out->owner_addr.len > 0;
	}
	return rd_end(&r);
}

int felix_publish_ack_encode(struct wbuf *out,
                             const struct felix_publish_ack *a)
{
	uint16_t flags = FELIX_FLAG_PUBLISH_ACK;
	size_t start = out->len, at;
	if (a->status != FELIX_ACK_STATUS_OK &&
	    a->status != FELIX_ACK_STATUS_ERROR) {
		return -1;
	}
	if (a->has_owner) {
		flags |= FELIX_FLAG_PUBLISH_ACK_OWNER;
	}
	at = felix_frame_begin(out, flags);
	if (wbuf_put_u8(out, a->status) != 0 ||
	    wbuf_put_u64(out, a->request_id) != 0 ||
	    put_str16(out, a->message) != 0) {
		goto err;
	}
	if (a->has_owner) {
		struct felix_view addr = {NULL, 0};
		if (a->has_owner_addr) {
			addr = a->owner_addr;
		}
		if (put_str16(out, a->owner_node_id) != 0 ||
		    put_str16(out, addr) != 0 ||
		    wbuf_put_u64(out, a->owner_generation) != 0) {
			goto err;
		}
	}
	if (felix_frame_finish(out, at) != 0) {
		goto err;
	}
	return 0;
err:
	if (!out->oom) {
		out->len = start;
	}
	return -1;
}

int felix_event_batch_decode(uint16_t flags, const uint8_t *payload, size_t len,
                             const struct felix_binary_limits *limits,
                             struct felix_event_batch *out, char *err,
                             size_t errlen)
{
	struct rd r = {payload, len, "event batch", err, errlen};
	enum felix_frame_kind kind;
	if (felix_frame_flags_check(flags, &kind, err, errlen) != 0) {
		return -1;
	}
	if (kind != FELIX_FRAME_EVENT_BATCH &&
	    kind != FELIX_FRAME_EVENT_BATCH_SHARED) {
		seterr(err, errlen,
		       "event batch: frame flags 0x%04x are not this layout",
		       flags);
		return -1;
	}
	out->shared = kind == FELIX_FRAME_EVENT_BATCH_SHARED;
	out->subscription_id = 0;
	out->has_base_offset = (flags & FELIX_FLAG_EVENT_BATCH_OFFSETS) != 0;
	out->base_offset = 0;
	if (!out->shared &&
	    rd_u64(&r, "subscription_id", &out->subscription_id) != 0) {
		return -1;
	}
	if (out->has_base_offset &&
	    rd_u64(&r, "base_offset", &out->base_offset) != 0) {
		return -1;
	}
	return rd_records(&r, limits, &out->records);
}

int felix_event_batch_encode(struct wbuf *out,
                             const struct felix_event_batch *e,
                             const struct felix_view *payloads, uint32_t count)
{
	uint16_t flags =
	    e->shared ? FELIX_FLAG_EVENT_BATCH_SHARED : FELIX_FLAG_EVENT_BATCH;
	size_t start = out->len, at;
	if (e->has_base_offset) {
		flags |= FELIX_FLAG_EVENT_BATCH_OFFSETS;
	}
	at = felix_frame_begin(out, flags);
	if (!e->shared && wbuf_put_u64(out, e->subscription_id) != 0) {
		goto err;
	}
	if (e->has_base_offset && wbuf_put_u64(out, e->base_offset) != 0) {
		goto err;
	}
	if (put_records(out, payloads, count) != 0 ||
	    felix_frame_finish(out, at) != 0) {
		goto err;
	}
	return 0;
err:
	if (!out->oom) {
		out->len = start;
	}
	return -1;
}
