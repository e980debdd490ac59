/* Fuzz target: zlib inflate with a decompressed-size cap.
 *
 * Input: a control byte (mode and cap), then data. Mode 0 inflates the data
 * as a compressed body: success must respect the cap and survive a
 * deflate/inflate round trip; failure must leave the output untouched.
 * Mode 1 deflates the data and checks that it inflates back exactly, and
 * that a cap one byte short is refused. Both paths also go through
 * fsnp_compress_inflate_message. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fsnp_compress.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inflate_message(const uint8_t *p, size_t n, size_t cap, int want,
                            const struct wbuf *want_out)
{
	struct fsnp_message m;
	m.h.dir = FSNP_DIR_REQUEST;
	m.h.flags = FSNP_FLAG_COMPRESSED | FSNP_FLAG_CUSTOM;
	m.h.lane_id = 1;
	m.h.opcode = 0x0102;
	m.h.request_id = 1;
	m.h.body_len = (uint32_t)n;
	m.body = p;
	m.len = n;
	m.owned = NULL;
	int rv = fsnp_compress_inflate_message(&m, cap);
	CHECK(rv == want);
	if (rv == 0) {
		CHECK(m.h.flags == FSNP_FLAG_CUSTOM);
		CHECK(m.len == want_out->len && m.h.body_len == m.len);
		CHECK(m.len == 0 || memcmp(m.body, want_out->data, m.len) == 0);
	} else {
		CHECK(m.body == p && m.owned == NULL);
		CHECK(m.h.flags & FSNP_FLAG_COMPRESSED);
	}
	fsnp_message_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wbuf out, z, back;
	if (size < 1) {
		return 0;
	}
	size_t n = size - 1;
	size_t cap = ((size_t)(data[0] >> 1) + 1) * 512u;
	uint8_t *p = calloc(n ? n : 1, 1);
	CHECK(p != NULL);
	if (n > 0) {
		memcpy(p, data + 1, n);
	}
	wbuf_init(&out);
	wbuf_init(&z);
	wbuf_init(&back);
	if ((data[0] & 1) == 0) {
		int rv = fsnp_compress_inflate(p, n, cap, &out);
		CHECK(rv == 0 || rv == FSNP_ERR_INFLATE_INVALID ||
		      rv == FSNP_ERR_INFLATE_TOO_LARGE);
		if (rv == 0) {
			CHECK(out.len <= cap);
			CHECK(fsnp_compress_deflate(out.data, out.len, &z) ==
			      0);
			CHECK(fsnp_compress_inflate(z.data, z.len, out.len,
			                            &back) == 0);
			CHECK(back.len == out.len &&
			      (out.len == 0 ||
			       memcmp(back.data, out.data, out.len) == 0));
		} else {
			CHECK(out.len == 0);
		}
		inflate_message(p, n, cap, rv, &out);
	} else {
		CHECK(fsnp_compress_deflate(p, n, &z) == 0);
		CHECK(fsnp_compress_inflate(z.data, z.len, n, &out) == 0);
		CHECK(out.len == n && (n == 0 || memcmp(out.data, p, n) == 0));
		if (n > 0) {
			CHECK(fsnp_compress_inflate(z.data, z.len, n - 1,
			                            &back) ==
			      FSNP_ERR_INFLATE_TOO_LARGE);
			CHECK(back.len == 0);
		}
		inflate_message(z.data, z.len, n, 0, &out);
	}
	wbuf_free(&out);
	wbuf_free(&z);
	wbuf_free(&back);
	free(p);
	return 0;
}
