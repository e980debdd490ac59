/* Fuzz target: the FLOW.QUERY cursor decoder (flow/flow_cursor.h).
 *
 * Input: the cursor text. Whatever it is, decoding ends in one of the
 * statuses without reading out of bounds; an accepted cursor (possible
 * only for tokens the encoder made with this key, e.g. seeds built from
 * the corpus) yields a resume key within FLOW_CURSOR_RESUME_MAX that
 * encodes back into a cursor the decoder accepts again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_cursor.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[FLOW_CURSOR_KEY_BYTES] = {7};
	static const uint8_t nonce[FLOW_CURSOR_NONCE_BYTES] = {1};
	uint8_t fp[FLOW_CURSOR_FP_BYTES], resume[FLOW_CURSOR_RESUME_MAX];
	size_t rl = 0;
	enum flow_cursor_status st;

	flow_cursor_fingerprint("fuzz", 4, fp);
	st = flow_cursor_decode(key, (const char *)data, size, fp, 1000, resume,
	                        &rl);
	CHECK(st >= FLOW_CURSOR_OK && st <= FLOW_CURSOR_EXPIRED);
	CHECK(flow_cursor_code(st) != NULL && flow_cursor_detail(st) != NULL);
	if (st != FLOW_CURSOR_OK) {
		CHECK(rl == 0);
		return 0;
	}
	CHECK(rl <= FLOW_CURSOR_RESUME_MAX);
	{
		struct wbuf t;
		uint8_t again[FLOW_CURSOR_RESUME_MAX];
		size_t al;
		wbuf_init(&t);
		CHECK(flow_cursor_encode(key, nonce, fp, 1000, 1, resume, rl,
		                         &t) == 0);
		CHECK(flow_cursor_decode(key, (const char *)t.data, t.len, fp,
		                         1000, again, &al) == FLOW_CURSOR_OK);
		CHECK(al == rl && memcmp(again, resume, rl) == 0);
		wbuf_free(&t);
	}
	return 0;
}
