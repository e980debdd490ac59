/* Fuzz target: compact bodies. The first byte picks the decoder: compact
 * requests for MSET, MGET, PIPELINE, FLOW.VALUE.MGET or a fuzzed opcode
 * (0x94 modes 1/2, 0x9D), or the responses 0x81, 0x82, 0x83, 0xA0 and
 * (first bytes 224, 233: 0x84; 242, 251: 0x85) the Flow records. What
 * decodes must iterate cleanly and re-encode to exactly the input (a
 * record whose id-0 key has a field id re-encodes to the same entries). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fsnp_compact.h"
#include "wire/fsnp_fqr.h"
#include "wire/fsnp_opcode.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

#define MAX_ITEMS 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const struct wbuf *b, const uint8_t *p, size_t n)
{
	CHECK(!b->oom && b->len == n && (n == 0 || memcmp(b->data, p, n) == 0));
}

static void request(uint16_t opcode, const uint8_t *p, size_t n)
{
	struct fsnp_compact_req r;
	struct fsnp_compact_iter it;
	int rv = fsnp_compact_req_decode(opcode, p, n, MAX_ITEMS, &r);
	if (rv != 0) {
		CHECK(!fsnp_err_is_fatal(rv));
		return;
	}
	CHECK(r.count <= MAX_ITEMS);
	struct fsnp_bytes *keys = calloc(r.count + 1, sizeof *keys);
	struct fsnp_bytes *vals = calloc(r.count + 1, sizeof *vals);
	CHECK(keys != NULL && vals != NULL);
	uint32_t got = 0;
	fsnp_compact_iter_init(&it, &r);
	while (fsnp_compact_iter_next(&it, &keys[got], &vals[got])) {
		CHECK(keys[got].ptr >= p &&
		      keys[got].ptr + keys[got].len <= p + n);
		got++;
		CHECK(got <= r.count);
	}
	CHECK(got == r.count);
	struct wbuf b;
	wbuf_init(&b);
	if (r.kind == FSNP_COMPACT_VALUE_MGET) {
		CHECK(fsnp_compact_req_encode_value_mget(&b, r.has_max_bytes,
		                                         r.max_bytes, keys,
		                                         r.count) == 0);
	} else {
		CHECK(fsnp_compact_req_encode_kv(
		          &b, p[1], keys, r.pairs ? vals : NULL, r.count) == 0);
	}
	same(&b, p, n);
	wbuf_free(&b);
	free(keys);
	free(vals);
}

static void ok_list(const uint8_t *p, size_t n)
{
	uint32_t count;
	if (fsnp_compact_ok_list_decode(p, n, &count) != 0) {
		return;
	}
	struct wbuf b;
	wbuf_init(&b);
	CHECK(fsnp_compact_ok_list_encode(&b, count) == 0);
	same(&b, p, n);
	wbuf_free(&b);
}

static void kv_get(const uint8_t *p, size_t n)
{
	bool present;
	struct fsnp_bytes v;
	if (fsnp_compact_kv_get_decode(p, n, &present, &v) != 0) {
		return;
	}
	struct wbuf b;
	wbuf_init(&b);
	CHECK(fsnp_compact_kv_get_encode(&b, present ? &v : NULL) == 0);
	same(&b, p, n);
	wbuf_free(&b);
}

static void kv_mget(const uint8_t *p, size_t n)
{
	struct fsnp_compact_list l;
	bool present;
	struct fsnp_bytes v;
	if (fsnp_compact_kv_mget_decode(p, n, MAX_ITEMS, &l) != 0) {
		return;
	}
	struct wbuf b;
	wbuf_init(&b);
	CHECK(fsnp_compact_kv_mget_begin(&b, l.count) == 0);
	uint32_t got = 0;
	while (fsnp_compact_list_next(&l, &present, &v)) {
		CHECK(fsnp_compact_kv_mget_item(&b, present ? &v : NULL) == 0);
		got++;
	}
	CHECK(got == l.count);
	same(&b, p, n);
	wbuf_free(&b);
}

static void fqr(const uint8_t *p, size_t n, uint8_t ctl)
{
	struct fsnp_fqr r;
	struct fsnp_fqr_limits lim = {ctl & 1 ? 3u : 100u, {1000u, 8u}};
	if (fsnp_fqr_decode(p, n, &lim, &r) != 0) {
		return;
	}
	CHECK(fsnp_fqr_check_usage(&r) == 0);
	CHECK(r.usage[FSNP_FQR_RESPONSE_BYTES] == n);
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_fqr_writer fw;
	struct fsnp_fqr_iter it;
	struct fsnp_fqr_record rec;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	CHECK(fsnp_fqr_w_begin(&fw, &w, &r, lim.max_records) == 0);
	fsnp_fqr_iter_init(&it, &r);
	uint32_t got = 0;
	while (fsnp_fqr_iter_next(&it, &rec)) {
		CHECK(rec.bitmap < (1u << FSNP_FQR_FIELDS));
		CHECK(fsnp_fqr_w_record_begin(&fw) == 0);
		for (unsigned bit = 0; bit < FSNP_FQR_FIELDS; bit++) {
			if (rec.bitmap & (1u << bit)) {
				CHECK(fsnp_fqr_w_field(&fw, bit) == 0);
				fsnp_w_val(&w, &rec.field[bit]);
			}
		}
		CHECK(fsnp_fqr_w_record_end(&fw) == 0);
		got++;
	}
	CHECK(got == (r.kind == FSNP_FQR_RECORDS ? r.record_count : 0));
	CHECK(fsnp_fqr_w_end(&fw) == 0);
	CHECK(fsnp_w_finish(&w) == 0);
	same(&b, p, n);
	wbuf_free(&b);
}

/* Re-encodes a decoded record through a typed map; checks the entries
 * come back the same. Appends the compact form to `out`. */
static void record_again(struct fsnp_compact_record rec, struct wbuf *out)
{
	struct fsnp_compact_record a = rec, back;
	struct fsnp_bytes k, k2;
	struct fsnp_val v, v2, map;
	struct wbuf tb, cb;
	struct fsnp_writer w;
	wbuf_init(&tb);
	fsnp_w_init(&w, &tb);
	fsnp_w_map_begin(&w);
	while (fsnp_compact_record_next(&a, &k, &v)) {
		fsnp_w_key_bin(&w, k.ptr, k.len);
		fsnp_w_val(&w, &v);
	}
	CHECK(a.left == 0);
	fsnp_w_map_end(&w);
	CHECK(fsnp_w_finish(&w) == 0);
	CHECK(fsnp_value_decode(tb.data, tb.len, NULL, &map, NULL) == 0);
	wbuf_init(&cb);
	CHECK(fsnp_compact_flow_record_encode(&cb, &map) == 0);
	CHECK(fsnp_compact_flow_record_decode(cb.data, cb.len, UINT32_MAX,
	                                      &back, NULL) == 0);
	CHECK(back.count == rec.count);
	a = rec;
	while (fsnp_compact_record_next(&a, &k, &v)) {
		CHECK(fsnp_compact_record_next(&back, &k2, &v2));
		CHECK(k.len == k2.len && memcmp(k.ptr, k2.ptr, k.len) == 0);
		CHECK(v.enc_len == v2.enc_len &&
		      memcmp(v.enc, v2.enc, v.enc_len) == 0);
	}
	CHECK(wbuf_append(out, cb.data, cb.len) == 0);
	wbuf_free(&cb);
	wbuf_free(&tb);
}

/* Whether every id-0 key of the record is one without a field id. */
static bool canonical(struct fsnp_compact_record rec)
{
	struct fsnp_bytes k;
	struct fsnp_val v;
	while (rec.left > 0) {
		bool named = *rec.p == 0;
		CHECK(fsnp_compact_record_next(&rec, &k, &v));
		if (named && fsnp_compact_flow_field_id(k.ptr, k.len) != 0) {
			return false;
		}
	}
	return true;
}

static void flow_record(const uint8_t *p, size_t n)
{
	struct fsnp_compact_record rec;
	struct wbuf b;
	if (fsnp_compact_flow_record_decode(p, n, MAX_ITEMS, &rec, NULL) != 0) {
		return;
	}
	wbuf_init(&b);
	record_again(rec, &b);
	if (canonical(rec)) {
		same(&b, p, n);
	}
	wbuf_free(&b);
}

static void flow_record_list(const uint8_t *p, size_t n)
{
	struct fsnp_compact_list l;
	struct fsnp_compact_record rec;
	struct wbuf b;
	bool canon = true;
	uint32_t got = 0;
	if (fsnp_compact_flow_record_list_decode(p, n, MAX_ITEMS, &l) != 0) {
		return;
	}
	wbuf_init(&b);
	CHECK(wbuf_put_u8(&b, FSNP_COMPACT_FLOW_RECORD_LIST) == 0);
	CHECK(wbuf_put_u32(&b, l.count) == 0);
	while (fsnp_compact_record_list_next(&l, &rec)) {
		canon = canon && canonical(rec);
		record_again(rec, &b);
		got++;
	}
	CHECK(got == l.count);
	if (canon) {
		same(&b, p, n);
	}
	wbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t opcodes[] = {FSNP_OP_MSET, FSNP_OP_MGET,
	                                   FSNP_OP_PIPELINE,
	                                   FSNP_OP_FLOW_VALUE_MGET};
	if (size < 1) {
		return 0;
	}
	size_t n = size - 1;
	uint8_t *p = calloc(n ? n : 1, 1);
	CHECK(p != NULL);
	if (n > 0) {
		memcpy(p, data + 1, n);
	}
	switch (data[0] % 9) {
	case 0:
	case 1:
	case 2:
	case 3:
		request(opcodes[data[0] % 9], p, n);
		break;
	case 4:
		/* Any opcode: only the four above may succeed. */
		if (n >= 2) {
			uint16_t op = (uint16_t)(p[0] << 8 | p[1]);
			struct fsnp_compact_req r;
			int rv = fsnp_compact_req_decode(op, p + 2, n - 2,
			                                 MAX_ITEMS, &r);
			CHECK(rv != 0 || op == FSNP_OP_MSET ||
			      op == FSNP_OP_MGET || op == FSNP_OP_PIPELINE ||
			      op == FSNP_OP_FLOW_VALUE_MGET);
		}
		break;
	case 5:
		ok_list(p, n);
		break;
	case 6:
		kv_get(p, n);
		break;
	case 7:
		kv_mget(p, n);
		break;
	default:
		if (data[0] == 224 || data[0] == 233) {
			flow_record(p, n);
		} else if (data[0] == 242 || data[0] == 251) {
			flow_record_list(p, n);
		} else {
			fqr(p, n, data[0] >> 4);
		}
		break;
	}
	free(p);
	return 0;
}
