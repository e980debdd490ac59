/* Fuzz target: FSNP chunk reassembly against a model, and split round
 * trips.
 *
 * Input: three bytes of limits, then operations of two bytes (key, flags
 * and length) plus a body, each fed to the assembler as a frame. A model
 * of the pending streams predicts every outcome: which limit is hit, the
 * joined body, the merged flags, and the pending totals. The rest of the
 * input is then split at a fuzzed chunk size, decoded frame by frame, and
 * reassembled to the same body. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fsnp_chunk.h"
#include "wire/fsnp_frame.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

#define KEYS 8
#define MODEL_MAX 512

struct model {
	bool active;
	uint8_t flags;
	size_t len;
	uint8_t buf[MODEL_MAX];
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_totals(const struct fsnp_chunk_asm *a, const struct model *m,
                         const struct fsnp_chunk_limits *lim)
{
	size_t streams = 0;
	uint64_t bytes = 0;
	for (int k = 0; k < KEYS; k++) {
		if (m[k].active) {
			streams++;
			bytes += m[k].len;
		}
	}
	CHECK(fsnp_chunk_pending_streams(a) == streams);
	CHECK(fsnp_chunk_pending_bytes(a) == bytes);
	CHECK(streams <= lim->max_streams);
	CHECK(bytes <= lim->max_pending_bytes);
}

static void run_ops(const uint8_t **pp, const uint8_t *end,
                    const struct fsnp_chunk_limits *lim, unsigned nops)
{
	struct fsnp_chunk_asm a;
	struct model *m = calloc(KEYS, sizeof *m);
	const uint8_t *p = *pp;
	CHECK(m != NULL);
	fsnp_chunk_init(&a, lim);
	for (unsigned op = 0; op < nops && end - p >= 2; op++) {
		unsigned k = p[0] & 7u;
		uint8_t flags =
		    (uint8_t)(((p[0] & 0x08) ? FSNP_FLAG_MORE_CHUNKS : 0) |
		              ((p[0] & 0x10) ? FSNP_FLAG_CUSTOM : 0) |
		              ((p[0] & 0x20) ? FSNP_FLAG_COMPRESSED : 0));
		size_t len = p[1] % 64u;
		p += 2;
		if (len > (size_t)(end - p)) {
			len = (size_t)(end - p);
		}
		/* An exactly-sized copy, so reads past the body are seen. */
		uint8_t *body = calloc(len ? len : 1, 1);
		CHECK(body != NULL);
		if (len > 0) {
			memcpy(body, p, len);
		}
		p += len;

		struct fsnp_frame f;
		f.h.dir = FSNP_DIR_REQUEST;
		f.h.flags = flags;
		f.h.lane_id = k >> 1;
		f.h.opcode = 0x0102;
		f.h.request_id = (k & 1) + 1;
		f.h.body_len = (uint32_t)len;
		f.body = body;

		size_t active = 0;
		uint64_t pending = 0;
		for (int i = 0; i < KEYS; i++) {
			if (m[i].active) {
				active++;
				pending += m[i].len;
			}
		}
		bool more = flags & FSNP_FLAG_MORE_CHUNKS;
		struct model *s = &m[k];
		/* What the assembler must do. */
		int want = 0;
		if (!s->active && more) {
			if (len > lim->max_message_bytes) {
				want = FSNP_ERR_CHUNK_TOO_LARGE;
			} else if (active >= lim->max_streams) {
				want = FSNP_ERR_CHUNK_STREAMS;
			} else if (pending + len > lim->max_pending_bytes) {
				want = FSNP_ERR_CHUNK_BYTES;
			}
		} else if (s->active) {
			if (s->len + len > lim->max_message_bytes) {
				want = FSNP_ERR_CHUNK_TOO_LARGE;
			} else if (more &&
			           pending + len > lim->max_pending_bytes) {
				want = FSNP_ERR_CHUNK_BYTES;
			}
		}

		struct fsnp_message msg;
		bool ready = true;
		int rv = fsnp_chunk_feed(&a, &f, op, &msg, &ready);
		CHECK(rv == want);
		if (rv != 0) {
			CHECK(!ready);
			s->active = false;
			s->len = 0;
		} else if (!ready) {
			CHECK(more);
			if (!s->active) {
				s->active = true;
				s->flags = flags;
				s->len = 0;
			}
			CHECK(s->len + len <= MODEL_MAX);
			if (len > 0) {
				memcpy(s->buf + s->len, body, len);
			}
			s->len += len;
		} else if (s->active) {
			CHECK(!more);
			CHECK(msg.owned != NULL || s->len + len == 0);
			CHECK(msg.len == s->len + len);
			CHECK(msg.h.body_len == msg.len);
			CHECK(s->len == 0 ||
			      memcmp(msg.body, s->buf, s->len) == 0);
			CHECK(len == 0 ||
			      memcmp(msg.body + s->len, body, len) == 0);
			CHECK(msg.h.flags ==
			      ((s->flags | flags) & ~FSNP_FLAG_MORE_CHUNKS));
			fsnp_message_free(&msg);
			s->active = false;
			s->len = 0;
		} else {
			CHECK(!more);
			CHECK(msg.owned == NULL && msg.body == body);
			CHECK(msg.len == len && msg.h.flags == flags);
		}
		free(body);
		check_totals(&a, m, lim);
		uint64_t deadline;
		CHECK(fsnp_chunk_deadline(&a, &deadline) ==
		      (fsnp_chunk_pending_streams(&a) > 0 &&
		       lim->timeout_ms > 0));
	}
	fsnp_chunk_close(&a);
	free(m);
	*pp = p;
}

static void split_round_trip(const uint8_t *body, size_t len, uint32_t chunk,
                             uint8_t flags)
{
	struct wbuf frames;
	struct fsnp_header h = {FSNP_DIR_RESPONSE, flags, 5, 0x0231, 77, 0};
	struct fsnp_chunk_limits lim = {(uint32_t)len, 1, len, 0};
	struct fsnp_chunk_asm a;
	struct fsnp_message m;
	bool ready = false;
	size_t off = 0;
	size_t count = 0;
	wbuf_init(&frames);
	CHECK(fsnp_chunk_split(&frames, &h, body, len, chunk) == 0);
	fsnp_chunk_init(&a, &lim);
	while (off < frames.len) {
		struct fsnp_frame f;
		size_t flen;
		CHECK(!ready);
		CHECK(fsnp_frame_decode(frames.data + off, frames.len - off,
		                        FSNP_DIR_RESPONSE, chunk, &f,
		                        &flen) == 0);
		CHECK(flen > 0);
		off += flen;
		count++;
		CHECK(fsnp_chunk_feed(&a, &f, 0, &m, &ready) == 0);
	}
	CHECK(ready);
	CHECK(count == fsnp_chunk_frame_count(len, chunk));
	CHECK(m.len == len && (len == 0 || memcmp(m.body, body, len) == 0));
	CHECK(m.h.flags == (flags & ~FSNP_FLAG_MORE_CHUNKS));
	fsnp_message_free(&m);
	fsnp_chunk_close(&a);
	wbuf_free(&frames);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4) {
		return 0;
	}
	struct fsnp_chunk_limits lim;
	lim.max_message_bytes = 16u + (data[0] & 0x3fu) * 4u;
	lim.max_streams = 1u + (data[0] >> 6);
	lim.max_pending_bytes = 8u + data[1];
	lim.timeout_ms = data[2] & 1 ? 1000 : 0;
	const uint8_t *p = data + 4;
	const uint8_t *end = data + size;
	run_ops(&p, end, &lim, data[3]);
	uint32_t chunk = 1u + data[2] % 40u;
	split_round_trip(
	    p, (size_t)(end - p), chunk,
	    (uint8_t)(data[1] & (FSNP_FLAG_CUSTOM | FSNP_FLAG_COMPRESSED |
	                         FSNP_FLAG_TRACE)));
	return 0;
}
