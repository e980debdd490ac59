/* Fuzz target: the FSNP typed value decoder.
 *
 * Input: a control byte (limits), then a value. Whatever decodes must
 * rebuild (iterators + builder) to exactly its own encoding, which must
 * decode again the same way; every map key must be found by lookup, and
 * the typed views must agree with the tags. The body and response
 * decoders run on the same bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_value.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void views(const struct fsnp_val *v)
{
	bool b;
	int64_t i;
	uint64_t u;
	double f;
	struct fsnp_bytes bin;
	CHECK((fsnp_val_bool(v, &b) == 0) ==
	      (v->tag == FSNP_TRUE || v->tag == FSNP_FALSE));
	CHECK((fsnp_val_bin(v, &bin) == 0) == (v->tag == FSNP_BIN));
	CHECK((fsnp_val_f64(v, &f) == 0) ==
	      (v->tag == FSNP_F64 || v->tag == FSNP_I64 || v->tag == FSNP_U64));
	if (fsnp_val_i64(v, &i) == 0 && fsnp_val_u64(v, &u) == 0) {
		CHECK(i >= 0 && (uint64_t)i == u);
	}
	if (v->tag == FSNP_BIN) {
		CHECK(bin.ptr == v->enc + 5 && v->enc_len == 5 + bin.len);
	}
}

/* Walk the whole value; check lookups on every map. */
static void walk(const struct fsnp_val *v, unsigned depth)
{
	struct fsnp_iter it;
	struct fsnp_bytes key;
	struct fsnp_val child, found;
	uint32_t n = 0;
	views(v);
	if (depth > FSNP_MAX_DEPTH_HARD) {
		abort();
	}
	fsnp_iter_init(&it, v);
	while (fsnp_iter_next(&it, &key, &child)) {
		CHECK(child.enc >= v->enc &&
		      child.enc + child.enc_len <= v->enc + v->enc_len);
		if (v->tag == FSNP_MAP) {
			CHECK(fsnp_map_get_n(v, key.ptr, key.len, &found) == 0);
			/* The last entry with this key wins. */
			CHECK(found.enc >= child.enc);
		}
		walk(&child, depth + 1);
		n++;
	}
	if (v->tag == FSNP_ARRAY || v->tag == FSNP_MAP) {
		CHECK(n == v->as.count);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fsnp_limits small;
	const struct fsnp_limits *lim = NULL;
	struct fsnp_val v, v2;
	struct wbuf b;
	struct fsnp_writer w;
	size_t used, used2;
	uint16_t status;
	if (size < 1) {
		return 0;
	}
	if (data[0] & 1) {
		small.max_items = (data[0] >> 1) & 0x0f;
		small.max_depth = data[0] >> 5;
		lim = &small;
	}
	size_t n = size - 1;
	uint8_t *p = calloc(n ? n : 1, 1);
	CHECK(p != NULL);
	if (n > 0) {
		memcpy(p, data + 1, n);
	}
	int rv = fsnp_value_decode(p, n, lim, &v, &used);
	int body = fsnp_value_decode_body(p, n, lim, &v2);
	if (n == 0) {
		CHECK(body == 0 && v2.tag == FSNP_MAP);
	} else {
		CHECK((body == 0) == (rv == 0 && used == n));
	}
	(void)fsnp_value_decode_response(p, n, lim, &status, &v2);
	if (rv == 0) {
		CHECK(v.enc == p && v.enc_len == used && used <= n);
		walk(&v, 0);
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_test_reencode(&w, &v);
		CHECK(fsnp_w_finish(&w) == 0);
		CHECK(b.len == used && memcmp(b.data, p, used) == 0);
		CHECK(fsnp_value_decode(b.data, b.len, lim, &v2, &used2) == 0);
		CHECK(used2 == used && v2.tag == v.tag);
		wbuf_free(&b);
	}
	free(p);
	return 0;
}
