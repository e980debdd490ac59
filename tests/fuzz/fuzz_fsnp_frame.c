/* Fuzz target: the incremental FSNP frame decoder.
 *
 * Input: a control byte (bit 0: direction; the rest: max body), a seed
 * byte for the split points, then a byte stream. The stream is decoded
 * once whole and once as it would arrive from a socket, in random pieces,
 * from an exactly-sized copy of the unconsumed bytes (so any read past the
 * available data is an ASan report). Both must yield the same frames and
 * end the same way; every frame's header must re-encode to its bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fsnp_frame.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

#define MAX_FRAMES 4096

struct result {
	size_t frames;
	size_t offsets[MAX_FRAMES];
	int err; /* 0: ended needing more bytes (or at the end) */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const uint8_t *at, const struct fsnp_frame *f,
                        size_t flen, uint32_t max_body)
{
	uint8_t hdr[FSNP_HEADER_SIZE];
	struct fsnp_request_policy policy = {false, true};
	CHECK(flen == FSNP_HEADER_SIZE + (size_t)f->h.body_len);
	CHECK(f->h.body_len <= max_body);
	CHECK(f->body == at + FSNP_HEADER_SIZE);
	fsnp_frame_encode_header(&f->h, hdr);
	CHECK(memcmp(hdr, at, FSNP_HEADER_SIZE) == 0);
	if (f->h.dir == FSNP_DIR_REQUEST) {
		int rv = fsnp_frame_check_request(&f->h, &policy);
		CHECK(!fsnp_err_is_fatal(rv));
		CHECK(rv != 0 || (f->h.request_id != 0 &&
		                  !(f->h.flags & ~FSNP_REQUEST_FLAGS)));
	}
}

static void whole(const uint8_t *s, size_t n, enum fsnp_dir dir,
                  uint32_t max_body, struct result *r)
{
	size_t off = 0;
	r->frames = 0;
	r->err = 0;
	while (off < n && r->frames < MAX_FRAMES) {
		struct fsnp_frame f;
		size_t flen;
		int rv = fsnp_frame_decode(s + off, n - off, dir, max_body, &f,
		                           &flen);
		if (rv != 0) {
			CHECK(fsnp_err_is_fatal(rv));
			r->err = rv;
			return;
		}
		if (flen == 0) {
			return;
		}
		check_frame(s + off, &f, flen, max_body);
		r->offsets[r->frames++] = off;
		off += flen;
	}
}

static uint32_t next_rand(uint32_t *x)
{
	*x = *x * 1103515245u + 12345u;
	return *x >> 16;
}

static void pieces(const uint8_t *s, size_t n, enum fsnp_dir dir,
                   uint32_t max_body, uint8_t seed, const struct result *want)
{
	uint32_t rng = seed;
	size_t avail = 0;
	size_t consumed = 0;
	size_t frames = 0;
	while (avail < n) {
		avail += 1 + next_rand(&rng) % 29;
		if (avail > n) {
			avail = n;
		}
		for (;;) {
			size_t have = avail - consumed;
			uint8_t *copy = calloc(have ? have : 1, 1);
			struct fsnp_frame f;
			size_t flen;
			CHECK(copy != NULL);
			if (have > 0) {
				memcpy(copy, s + consumed, have);
			}
			int rv = fsnp_frame_decode(copy, have, dir, max_body,
			                           &f, &flen);
			free(copy);
			if (rv != 0) {
				/* The same error, for the frame the whole
				 * decode stopped at. */
				CHECK(rv == want->err);
				CHECK(frames == want->frames);
				return;
			}
			if (flen == 0) {
				break;
			}
			CHECK(frames < want->frames);
			CHECK(want->offsets[frames] == consumed);
			consumed += flen;
			frames++;
			if (frames == MAX_FRAMES) {
				return;
			}
		}
	}
	CHECK(want->err == 0);
	CHECK(frames == want->frames);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result *want;
	if (size < 2) {
		return 0;
	}
	want = malloc(sizeof *want);
	CHECK(want != NULL);
	enum fsnp_dir dir =
	    (data[0] & 1) ? FSNP_DIR_RESPONSE : FSNP_DIR_REQUEST;
	uint32_t max_body =
	    (data[0] >> 1) == 0x7f ? UINT32_MAX : (uint32_t)(data[0] >> 1) * 8u;
	const uint8_t *s = data + 2;
	size_t n = size - 2;
	whole(s, n, dir,
	      max_body < FSNP_MAX_FRAME_BYTES_LIMIT
	          ? max_body
	          : FSNP_MAX_FRAME_BYTES_LIMIT,
	      want);
	pieces(s, n, dir, max_body, data[1], want);
	free(want);
	return 0;
}
