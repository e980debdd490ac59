/* FSNP chunk reassembly and splitting; see fsnp_chunk.h. */
#include "wire/fsnp_chunk.h"

#include <stdlib.h>
#include <string.h>

void fsnp_chunk_init(struct fsnp_chunk_asm *a,
                     const struct fsnp_chunk_limits *lim)
{
	a->lim = *lim;
	a->streams = NULL;
	a->n = 0;
	a->cap = 0;
	a->pending_bytes = 0;
}

void fsnp_chunk_close(struct fsnp_chunk_asm *a)
{
	for (size_t i = 0; i < a->n; i++) {
		wbuf_free(&a->streams[i].body);
	}
	free(a->streams);
	a->streams = NULL;
	a->n = 0;
	a->cap = 0;
	a->pending_bytes = 0;
}

/* used + add <= max, without overflow (limits may have been lowered). */
static bool fits(uint64_t used, uint64_t add, uint64_t max)
{
	return used <= max && add <= max - used;
}

static struct fsnp_chunk_stream *find(struct fsnp_chunk_asm *a,
                                      const struct fsnp_header *h)
{
	for (size_t i = 0; i < a->n; i++) {
		struct fsnp_chunk_stream *s = &a->streams[i];
		if (s->lane_id == h->lane_id && s->opcode == h->opcode &&
		    s->request_id == h->request_id) {
			return s;
		}
	}
	return NULL;
}

/* Forget stream s; with keep_body its buffer now belongs to the caller. */
static void drop(struct fsnp_chunk_asm *a, struct fsnp_chunk_stream *s,
                 bool keep_body)
{
	a->pending_bytes -= s->body.len;
	if (!keep_body) {
		wbuf_free(&s->body);
	}
	size_t i = (size_t)(s - a->streams);
	a->streams[i] = a->streams[a->n - 1];
	a->n--;
}

static int start(struct fsnp_chunk_asm *a, const struct fsnp_frame *f,
                 uint64_t now_ms)
{
	size_t len = f->h.body_len;
	if (!fits(0, len, a->lim.max_message_bytes)) {
		return FSNP_ERR_CHUNK_TOO_LARGE;
	}
	if (a->n >= a->lim.max_streams) {
		return FSNP_ERR_CHUNK_STREAMS;
	}
	if (!fits(a->pending_bytes, len, a->lim.max_pending_bytes)) {
		return FSNP_ERR_CHUNK_BYTES;
	}
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 4;
		struct fsnp_chunk_stream *p =
		    realloc(a->streams, cap * sizeof *p);
		if (p == NULL) {
			return FSNP_ERR_NOMEM;
		}
		a->streams = p;
		a->cap = cap;
	}
	struct fsnp_chunk_stream *s = &a->streams[a->n];
	s->lane_id = f->h.lane_id;
	s->opcode = f->h.opcode;
	s->request_id = f->h.request_id;
	s->flags = f->h.flags;
	s->started_ms = now_ms;
	wbuf_init(&s->body);
	if (wbuf_append(&s->body, f->body, len) != 0) {
		wbuf_free(&s->body);
		return FSNP_ERR_NOMEM;
	}
	a->n++;
	a->pending_bytes += len;
	return 0;
}

int fsnp_chunk_feed(struct fsnp_chunk_asm *a, const struct fsnp_frame *f,
                    uint64_t now_ms, struct fsnp_message *out, bool *ready)
{
	bool more = (f->h.flags & FSNP_FLAG_MORE_CHUNKS) != 0;
	struct fsnp_chunk_stream *s = find(a, &f->h);
	size_t len = f->h.body_len;
	int rv;

	*ready = false;
	if (s == NULL) {
		if (more) {
			return start(a, f, now_ms);
		}
		fsnp_message_from_frame(out, f);
		*ready = true;
		return 0;
	}
	if (!fits(s->body.len, len, a->lim.max_message_bytes)) {
		rv = FSNP_ERR_CHUNK_TOO_LARGE;
		goto err_drop;
	}
	/* The final chunk is bounded by max_message_bytes alone: it leaves
	 * the pending set at once. */
	if (more && !fits(a->pending_bytes, len, a->lim.max_pending_bytes)) {
		rv = FSNP_ERR_CHUNK_BYTES;
		goto err_drop;
	}
	if (wbuf_append(&s->body, f->body, len) != 0) {
		rv = FSNP_ERR_NOMEM;
		goto err_drop;
	}
	a->pending_bytes += len;
	if (more) {
		return 0;
	}
	out->h = f->h;
	out->h.flags =
	    (uint8_t)((s->flags | f->h.flags) & ~FSNP_FLAG_MORE_CHUNKS);
	out->h.body_len = (uint32_t)s->body.len;
	out->len = s->body.len;
	out->owned = s->body.data;
	out->body = out->owned;
	drop(a, s, true);
	*ready = true;
	return 0;

err_drop:
	drop(a, s, false);
	return rv;
}

size_t fsnp_chunk_pending_streams(const struct fsnp_chunk_asm *a)
{
	return a->n;
}

uint64_t fsnp_chunk_pending_bytes(const struct fsnp_chunk_asm *a)
{
	return a->pending_bytes;
}

bool fsnp_chunk_deadline(const struct fsnp_chunk_asm *a, uint64_t *deadline)
{
	if (a->lim.timeout_ms == 0 || a->n == 0) {
		return false;
	}
	uint64_t first = UINT64_MAX;
	for (size_t i = 0; i < a->n; i++) {
		uint64_t d = a->streams[i].started_ms + a->lim.timeout_ms;
		if (d < a->streams[i].started_ms) {
			d = UINT64_MAX;
		}
		if (d < first) {
			first = d;
		}
	}
	*deadline = first;
	return true;
}

uint32_t fsnp_chunk_size(uint32_t configured, uint32_t max_frame_bytes)
{
	if (max_frame_bytes == 0 ||
	    max_frame_bytes > FSNP_MAX_FRAME_BYTES_LIMIT) {
		max_frame_bytes = FSNP_MAX_FRAME_BYTES_LIMIT;
	}
	if (configured == 0 || configured > max_frame_bytes) {
		return max_frame_bytes;
	}
	return configured;
}

size_t fsnp_chunk_frame_count(size_t len, uint32_t chunk)
{
	if (chunk == 0) {
		chunk = FSNP_MAX_FRAME_BYTES_LIMIT;
	}
	if (len == 0) {
		return 1;
	}
	return len / chunk + (len % chunk != 0);
}

void fsnp_chunk_frame_header(const struct fsnp_header *h, size_t len,
                             uint32_t chunk, size_t index,
                             uint8_t header[FSNP_HEADER_SIZE], size_t *offset,
                             size_t *part_len)
{
	if (chunk == 0) {
		chunk = FSNP_MAX_FRAME_BYTES_LIMIT;
	}
	size_t count = fsnp_chunk_frame_count(len, chunk);
	struct fsnp_header fh = *h;
	size_t off = index * (size_t)chunk;
	size_t part = off < len ? len - off : 0;
	if (part > chunk) {
		part = chunk;
	}
	if (index + 1 < count) {
		fh.flags = (uint8_t)((h->flags & ~FSNP_FLAG_COMPRESSED) |
		                     FSNP_FLAG_MORE_CHUNKS);
	} else {
		fh.flags = (uint8_t)(h->flags & ~FSNP_FLAG_MORE_CHUNKS);
	}
	fh.body_len = (uint32_t)part;
	fsnp_frame_encode_header(&fh, header);
	*offset = off < len ? off : len;
	*part_len = part;
}

int fsnp_chunk_split(struct wbuf *out, const struct fsnp_header *h,
                     const uint8_t *body, size_t len, uint32_t chunk)
{
	size_t count = fsnp_chunk_frame_count(len, chunk);
	for (size_t i = 0; i < count; i++) {
		size_t off, part;
		uint8_t *p;
		uint8_t header[FSNP_HEADER_SIZE];
		fsnp_chunk_frame_header(h, len, chunk, i, header, &off, &part);
		p = wbuf_extend(out, FSNP_HEADER_SIZE + part);
		if (p == NULL) {
			return FSNP_ERR_NOMEM;
		}
		memcpy(p, header, FSNP_HEADER_SIZE);
		if (part > 0) {
			memcpy(p + FSNP_HEADER_SIZE, body + off, part);
		}
	}
	return 0;
}
