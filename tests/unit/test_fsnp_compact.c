/* Unit tests for wire/fsnp_compact and wire/fsnp_fqr: the SDK's compact
 * requests (0x94 modes 1 and 2, 0x9D), the KV response codecs 0x81-0x83,
 * and the 0xA0 flow query result against the golden vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_fqr.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_opcode.h"

/* The body of an SDK frame (the caller frees *frame). */
static const uint8_t *sdk_body(const char *name, uint8_t **frame, size_t *len)
{
	size_t flen;
	*frame = fsnp_test_sdk_frame(name, &flen);
	assert_non_null(*frame);
	assert_true(flen >= FSNP_HEADER_SIZE);
	*len = flen - FSNP_HEADER_SIZE;
	return *frame + FSNP_HEADER_SIZE;
}

static struct fsnp_bytes str(const char *s)
{
	struct fsnp_bytes b = {(const uint8_t *)s, strlen(s)};
	return b;
}

static void test_mset_request(void **state)
{
	uint8_t *frame;
	size_t len;
	const uint8_t *body = sdk_body("mset_req", &frame, &len);
	struct fsnp_compact_req r;
	struct fsnp_compact_iter it;
	struct fsnp_bytes k, v;
	(void)state;

	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, body, len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 0);
	assert_int_equal(r.kind, FSNP_COMPACT_MSET);
	assert_true(r.pairs);
	assert_int_equal(r.count, 2);
	fsnp_compact_iter_init(&it, &r);
	assert_true(fsnp_compact_iter_next(&it, &k, &v));
	assert_true(fsnp_bytes_eq(k, "{t}:a"));
	assert_true(fsnp_bytes_eq(v, "1"));
	assert_true(fsnp_compact_iter_next(&it, &k, &v));
	assert_true(fsnp_bytes_eq(k, "{t}:b"));
	assert_true(fsnp_bytes_eq(v, "2"));
	assert_false(fsnp_compact_iter_next(&it, &k, &v));

	/* The encoder writes the SDK's bytes. */
	struct wbuf b;
	struct fsnp_bytes keys[2] = {str("{t}:a"), str("{t}:b")};
	struct fsnp_bytes vals[2] = {str("1"), str("2")};
	wbuf_init(&b);
	assert_int_equal(fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_SET,
	                                            keys, vals, 2),
	                 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, body, len);
	assert_int_equal(fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_SET,
	                                            keys, NULL, 2),
	                 FSNP_ERR_WRITER);

	/* Limits and malformed bodies. */
	assert_int_equal(
	    fsnp_compact_req_decode(FSNP_OP_MSET, body, len, 1, &r),
	    FSNP_ERR_COMPACT_ITEMS);
	for (size_t k2 = 6; k2 < len; k2++) {
		assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, body, k2,
		                                         FSNP_MAX_ITEMS_DEFAULT,
		                                         &r),
		                 FSNP_ERR_COMPACT_MSET);
	}
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, body, 5,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_MSET);
	wbuf_reset(&b);
	wbuf_append(&b, body, len);
	wbuf_put_u8(&b, 0);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_MSET);
	/* Mode 2 is MGET's, not MSET's; and MSET's body on GET. */
	b.data[1] = FSNP_COMPACT_MODE_GET;
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_GET, body, len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, body, 0,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	assert_string_equal(fsnp_strerror(FSNP_ERR_COMPACT_MSET),
	                    "ERR native compact MSET payload is invalid");
	wbuf_free(&b);
	free(frame);
}

static void test_mget_request(void **state)
{
	uint8_t *frame;
	size_t len;
	const uint8_t *body = sdk_body("mget_req", &frame, &len);
	struct fsnp_compact_req r;
	struct fsnp_compact_iter it;
	struct fsnp_bytes k, v = {NULL, 1};
	const char *want[3] = {"{t}:a", "{t}:b", "{t}:x"};
	(void)state;

	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MGET, body, len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 0);
	assert_int_equal(r.kind, FSNP_COMPACT_MGET);
	assert_false(r.pairs);
	assert_int_equal(r.count, 3);
	fsnp_compact_iter_init(&it, &r);
	for (int i = 0; i < 3; i++) {
		assert_true(fsnp_compact_iter_next(&it, &k, &v));
		assert_true(fsnp_bytes_eq(k, want[i]));
		assert_int_equal(v.len, 0);
	}
	assert_false(fsnp_compact_iter_next(&it, &k, NULL));

	struct wbuf b;
	struct fsnp_bytes keys[3] = {str(want[0]), str(want[1]), str(want[2])};
	wbuf_init(&b);
	assert_int_equal(fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET,
	                                            keys, NULL, 3),
	                 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, body, len);

	/* An empty MGET is valid; truncations are not. */
	wbuf_reset(&b);
	assert_int_equal(fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET,
	                                            NULL, NULL, 0),
	                 0);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MGET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 0);
	assert_int_equal(r.count, 0);
	for (size_t k2 = 2; k2 < len; k2++) {
		assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MGET, body, k2,
		                                         FSNP_MAX_ITEMS_DEFAULT,
		                                         &r),
		                 FSNP_ERR_COMPACT_MGET);
	}
	/* A count far above the bytes present. */
	wbuf_reset(&b);
	wbuf_append(&b, body, len);
	wire_store_u32(b.data + 2, 1000);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MGET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_MGET);
	wbuf_free(&b);
	free(frame);
}

static void test_pipeline_request(void **state)
{
	struct wbuf b;
	struct fsnp_compact_req r;
	struct fsnp_compact_iter it;
	struct fsnp_bytes keys[2] = {str("a"), str("b")};
	struct fsnp_bytes vals[2] = {str("1"), str("")};
	struct fsnp_bytes k, v;
	(void)state;
	wbuf_init(&b);
	assert_int_equal(
	    fsnp_compact_req_encode_kv(
	        &b, FSNP_COMPACT_MODE_SET | FSNP_COMPACT_MODE_VALUES_ONLY, keys,
	        vals, 2),
	    0);
	assert_int_equal(b.data[1], 0x81);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_PIPELINE, b.data,
	                                         b.len, FSNP_MAX_ITEMS_DEFAULT,
	                                         &r),
	                 0);
	assert_int_equal(r.kind, FSNP_COMPACT_PIPELINE_SET);
	assert_true(r.values_only);
	fsnp_compact_iter_init(&it, &r);
	assert_true(fsnp_compact_iter_next(&it, &k, &v));
	assert_true(fsnp_compact_iter_next(&it, &k, &v));
	assert_true(fsnp_bytes_eq(k, "b"));
	assert_int_equal(v.len, 0);
	/* PIPELINE's 0x81 mode is not MSET's. */
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MSET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);

	wbuf_reset(&b);
	assert_int_equal(fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET,
	                                            keys, NULL, 2),
	                 0);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_PIPELINE, b.data,
	                                         b.len, FSNP_MAX_ITEMS_DEFAULT,
	                                         &r),
	                 0);
	assert_int_equal(r.kind, FSNP_COMPACT_PIPELINE_GET);
	assert_false(r.values_only);
	b.len--;
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_PIPELINE, b.data,
	                                         b.len, FSNP_MAX_ITEMS_DEFAULT,
	                                         &r),
	                 FSNP_ERR_COMPACT_PIPELINE);
	/* Other PIPELINE modes are not decoded here. */
	b.data[1] = 18;
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_PIPELINE, b.data,
	                                         b.len, FSNP_MAX_ITEMS_DEFAULT,
	                                         &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	wbuf_free(&b);
}

static void test_value_mget_request(void **state)
{
	uint8_t *frame;
	size_t len;
	const uint8_t *body = sdk_body("value_mget_req", &frame, &len);
	struct fsnp_compact_req r;
	struct fsnp_compact_iter it;
	struct fsnp_bytes k;
	(void)state;

	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_FLOW_VALUE_MGET, body,
	                                         len, FSNP_MAX_ITEMS_DEFAULT,
	                                         &r),
	                 0);
	assert_int_equal(r.kind, FSNP_COMPACT_VALUE_MGET);
	assert_false(r.has_max_bytes);
	assert_int_equal(r.count, 1);
	fsnp_compact_iter_init(&it, &r);
	assert_true(fsnp_compact_iter_next(&it, &k, NULL));
	assert_true(fsnp_bytes_eq(k, "fv1_abc"));

	struct wbuf b;
	struct fsnp_bytes refs[2] = {str("fv1_abc"), str("fv1_def")};
	wbuf_init(&b);
	assert_int_equal(
	    fsnp_compact_req_encode_value_mget(&b, false, 0, refs, 1), 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, body, len);

	wbuf_reset(&b);
	assert_int_equal(
	    fsnp_compact_req_encode_value_mget(&b, true, 65536, refs, 2), 0);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_FLOW_VALUE_MGET,
	                                         b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 0);
	assert_true(r.has_max_bytes);
	assert_int_equal(r.max_bytes, 65536);
	assert_int_equal(r.count, 2);
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_FLOW_VALUE_MGET,
	                                         b.data, b.len, 1, &r),
	                 FSNP_ERR_COMPACT_ITEMS);
	for (size_t k2 = 1; k2 < b.len; k2++) {
		assert_int_equal(
		    fsnp_compact_req_decode(FSNP_OP_FLOW_VALUE_MGET, b.data, k2,
		                            FSNP_MAX_ITEMS_DEFAULT, &r),
		    FSNP_ERR_COMPACT_VALUE_MGET);
	}
	/* 0x9D belongs to FLOW.VALUE.MGET only; other Flow tags are not
	 * decoded yet. */
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_MGET, b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	b.data[0] = 0x90;
	assert_int_equal(fsnp_compact_req_decode(FSNP_OP_FLOW_CREATE_MANY,
	                                         b.data, b.len,
	                                         FSNP_MAX_ITEMS_DEFAULT, &r),
	                 FSNP_ERR_COMPACT_UNSUPPORTED);
	wbuf_free(&b);
	free(frame);
}

/* The response payload (after the status) of an SDK frame. */
static const uint8_t *sdk_payload(const char *name, uint8_t **frame,
                                  size_t *len)
{
	const uint8_t *body = sdk_body(name, frame, len);
	assert_true(*len >= 2);
	assert_int_equal(wire_load_u16(body), 0);
	*len -= 2;
	return body + 2;
}

static void test_kv_responses(void **state)
{
	uint8_t *frame;
	size_t len;
	const uint8_t *p;
	struct wbuf b;
	bool present;
	struct fsnp_bytes v;
	uint32_t count;
	(void)state;
	wbuf_init(&b);

	p = sdk_payload("set_rsp_compact", &frame, &len);
	assert_int_equal(fsnp_compact_ok_list_decode(p, len, &count), 0);
	assert_int_equal(count, 1);
	assert_int_equal(fsnp_compact_ok_list_encode(&b, 1), 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, p, len);
	assert_int_equal(fsnp_compact_ok_list_decode(p, len - 1, &count),
	                 FSNP_ERR_COMPACT_RESPONSE);
	free(frame);

	p = sdk_payload("get_rsp_compact", &frame, &len);
	assert_int_equal(fsnp_compact_kv_get_decode(p, len, &present, &v), 0);
	assert_true(present);
	assert_true(fsnp_bytes_eq(v, "v"));
	wbuf_reset(&b);
	struct fsnp_bytes vv = str("v");
	assert_int_equal(fsnp_compact_kv_get_encode(&b, &vv), 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, p, len);
	for (size_t k = 0; k < len; k++) {
		assert_int_equal(fsnp_compact_kv_get_decode(p, k, &present, &v),
		                 FSNP_ERR_COMPACT_RESPONSE);
	}
	free(frame);

	p = sdk_payload("get_nil_compact", &frame, &len);
	assert_int_equal(fsnp_compact_kv_get_decode(p, len, &present, &v), 0);
	assert_false(present);
	wbuf_reset(&b);
	assert_int_equal(fsnp_compact_kv_get_encode(&b, NULL), 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, p, len);
	wbuf_put_u8(&b, 0);
	assert_int_equal(
	    fsnp_compact_kv_get_decode(b.data, b.len, &present, &v),
	    FSNP_ERR_TRAILING_BYTES);
	b.data[1] = 2; /* presence is 0 or 1 */
	assert_int_equal(fsnp_compact_kv_get_decode(b.data, 2, &present, &v),
	                 FSNP_ERR_COMPACT_RESPONSE);
	free(frame);

	p = sdk_payload("mget_rsp_compact", &frame, &len);
	struct fsnp_compact_list l;
	assert_int_equal(fsnp_compact_kv_mget_decode(p, len, 100, &l), 0);
	assert_int_equal(l.count, 3);
	assert_true(fsnp_compact_list_next(&l, &present, &v));
	assert_true(present && fsnp_bytes_eq(v, "1"));
	assert_true(fsnp_compact_list_next(&l, &present, &v));
	assert_true(present && fsnp_bytes_eq(v, "2"));
	assert_true(fsnp_compact_list_next(&l, &present, &v));
	assert_false(present);
	assert_false(fsnp_compact_list_next(&l, &present, &v));
	wbuf_reset(&b);
	struct fsnp_bytes one = str("1"), two = str("2");
	assert_int_equal(fsnp_compact_kv_mget_begin(&b, 3), 0);
	assert_int_equal(fsnp_compact_kv_mget_item(&b, &one), 0);
	assert_int_equal(fsnp_compact_kv_mget_item(&b, &two), 0);
	assert_int_equal(fsnp_compact_kv_mget_item(&b, NULL), 0);
	assert_int_equal(b.len, len);
	assert_memory_equal(b.data, p, len);
	assert_int_equal(fsnp_compact_kv_mget_decode(p, len, 2, &l),
	                 FSNP_ERR_COMPACT_ITEMS);
	for (size_t k = 0; k < len; k++) {
		assert_int_equal(fsnp_compact_kv_mget_decode(p, k, 100, &l),
		                 FSNP_ERR_COMPACT_RESPONSE);
	}
	wbuf_put_u8(&b, 0);
	assert_int_equal(fsnp_compact_kv_mget_decode(b.data, b.len, 100, &l),
	                 FSNP_ERR_TRAILING_BYTES);
	/* Tags are not interchangeable. */
	assert_int_equal(fsnp_compact_ok_list_decode(p, len, &count),
	                 FSNP_ERR_COMPACT_RESPONSE);
	free(frame);
	wbuf_free(&b);
}

/* JSON -> typed value, the way the vector's records are written. */
static void json_value(struct fsnp_writer *w, json_t *j)
{
	const char *key;
	json_t *item;
	size_t i;
	switch (json_typeof(j)) {
	case JSON_NULL:
		fsnp_w_nil(w);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		fsnp_w_bool(w, json_is_true(j));
		break;
	case JSON_INTEGER:
		fsnp_w_i64(w, (int64_t)json_integer_value(j));
		break;
	case JSON_REAL:
		fsnp_w_f64(w, json_real_value(j));
		break;
	case JSON_STRING:
		fsnp_w_bin(w, json_string_value(j), json_string_length(j));
		break;
	case JSON_ARRAY:
		fsnp_w_array_begin(w);
		json_array_foreach(j, i, item)
		{
			json_value(w, item);
		}
		fsnp_w_array_end(w);
		break;
	case JSON_OBJECT:
		fsnp_w_map_begin(w);
		json_object_foreach(j, key, item)
		{
			fsnp_w_key(w, key);
			json_value(w, item);
		}
		fsnp_w_map_end(w);
		break;
	}
}

static json_t *load_vectors(void)
{
	char path[1024];
	json_error_t err;
	snprintf(path, sizeof path, "%s/vectors/fsnp/flow_query_result_v1.json",
	         fsnp_test_shared_dir());
	json_t *root = json_load_file(path, 0, &err);
	if (root == NULL) {
		fail_msg("cannot load %s: %s", path, err.text);
	}
	return root;
}

/* Fill meta's fixed part from a JSON vector. */
static void vector_meta(json_t *vec, struct fsnp_fqr *meta)
{
	memset(meta, 0, sizeof *meta);
	const char *kind = json_string_value(json_object_get(vec, "kind"));
	meta->kind =
	    strcmp(kind, "count") == 0 ? FSNP_FQR_COUNT : FSNP_FQR_RECORDS;
	json_t *q = json_object_get(vec, "quality");
	for (unsigned i = 0; i < FSNP_FQR_QUALITIES; i++) {
		json_t *s = json_object_get(q, fsnp_fqr_quality_field(i));
		int code = fsnp_fqr_quality_code(i, json_string_value(s),
		                                 json_string_length(s));
		assert_true(code >= 0);
		meta->quality[i] = (uint8_t)code;
	}
	json_t *u = json_object_get(vec, "usage");
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		json_t *n = json_object_get(u, fsnp_fqr_usage_name(i));
		assert_non_null(n);
		meta->usage[i] = (uint64_t)json_integer_value(n);
	}
	if (meta->kind == FSNP_FQR_COUNT) {
		meta->count = strtoull(
		    json_string_value(json_object_get(vec, "count_decimal")),
		    NULL, 10);
	} else {
		json_t *page = json_object_get(vec, "page");
		meta->has_more =
		    json_is_true(json_object_get(page, "has_more"));
		json_t *c = json_object_get(page, "cursor");
		if (json_is_string(c)) {
			meta->cursor.ptr =
			    (const uint8_t *)json_string_value(c);
			meta->cursor.len = json_string_length(c);
		}
	}
}

/* Decode each golden vector and compare every field with the JSON. */
static void test_fqr_vectors_decode(void **state)
{
	json_t *root = load_vectors();
	json_t *vectors = json_object_get(root, "vectors");
	json_t *vec;
	size_t vi;
	struct wbuf b;
	(void)state;
	assert_int_equal(json_integer_value(json_object_get(root, "tag")),
	                 FSNP_FQR_TAG);
	/* The vector's field list is the bitmap order. */
	json_t *fields = json_object_get(root, "record_fields");
	assert_int_equal(json_array_size(fields), FSNP_FQR_FIELDS);
	for (unsigned i = 0; i < FSNP_FQR_FIELDS; i++) {
		assert_string_equal(
		    json_string_value(json_array_get(fields, i)),
		    fsnp_fqr_field_name(i));
	}
	json_t *usage_fields = json_object_get(root, "usage_fields");
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		assert_string_equal(
		    json_string_value(json_array_get(usage_fields, i)),
		    fsnp_fqr_usage_name(i));
	}
	wbuf_init(&b);
	assert_true(json_array_size(vectors) >= 2);
	json_array_foreach(vectors, vi, vec)
	{
		size_t len;
		uint8_t *p = fsnp_test_unhex(
		    json_string_value(json_object_get(vec, "payload_hex")),
		    &len);
		struct fsnp_fqr r, meta;
		assert_non_null(p);
		assert_int_equal(fsnp_fqr_decode(p, len, NULL, &r), 0);
		vector_meta(vec, &meta);
		assert_int_equal(r.kind, meta.kind);
		assert_memory_equal(r.quality, meta.quality, sizeof r.quality);
		assert_memory_equal(r.usage, meta.usage, sizeof r.usage);
		assert_int_equal(r.usage[FSNP_FQR_RESPONSE_BYTES], len);
		if (r.kind == FSNP_FQR_COUNT) {
			assert_true(r.count == meta.count);
			assert_true(r.count == (uint64_t)INT64_MAX);
			free(p);
			continue;
		}
		assert_int_equal(r.has_more, meta.has_more);
		assert_true((r.cursor.ptr == NULL) ==
		            (meta.cursor.ptr == NULL));
		json_t *records = json_object_get(vec, "records");
		assert_int_equal(r.record_count, json_array_size(records));
		struct fsnp_fqr_iter it;
		struct fsnp_fqr_record rec;
		fsnp_fqr_iter_init(&it, &r);
		for (size_t ri = 0; ri < json_array_size(records); ri++) {
			json_t *jr = json_array_get(records, ri);
			const char *key;
			json_t *jv;
			unsigned fields_seen = 0;
			assert_true(fsnp_fqr_iter_next(&it, &rec));
			json_object_foreach(jr, key, jv)
			{
				int bit = fsnp_fqr_field_bit(key, strlen(key));
				struct fsnp_writer w;
				assert_true(bit >= 0);
				assert_true(rec.bitmap & (1u << bit));
				wbuf_reset(&b);
				fsnp_w_init(&w, &b);
				json_value(&w, jv);
				assert_int_equal(fsnp_w_finish(&w), 0);
				assert_int_equal(rec.field[bit].enc_len, b.len);
				assert_memory_equal(rec.field[bit].enc, b.data,
				                    b.len);
				fields_seen++;
			}
			unsigned bits = 0;
			for (uint32_t x = rec.bitmap; x; x &= x - 1) {
				bits++;
			}
			assert_int_equal(bits, fields_seen);
		}
		assert_false(fsnp_fqr_iter_next(&it, &rec));
		free(p);
	}
	wbuf_free(&b);
	json_decref(root);
}

/* Encode each vector from its JSON description: byte-exact. */
static void test_fqr_vectors_encode(void **state)
{
	json_t *root = load_vectors();
	json_t *vectors = json_object_get(root, "vectors");
	json_t *vec;
	size_t vi;
	struct wbuf b;
	(void)state;
	wbuf_init(&b);
	json_array_foreach(vectors, vi, vec)
	{
		size_t len;
		uint8_t *p = fsnp_test_unhex(
		    json_string_value(json_object_get(vec, "payload_hex")),
		    &len);
		struct fsnp_fqr meta;
		struct fsnp_writer w;
		struct fsnp_fqr_writer fw;
		vector_meta(vec, &meta);
		meta.usage[FSNP_FQR_RESPONSE_BYTES] = 0; /* computed */
		wbuf_reset(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_status(&w, FSNP_STATUS_OK);
		assert_int_equal(fsnp_fqr_w_begin(&fw, &w, &meta, 100), 0);
		json_t *records = json_object_get(vec, "records");
		for (size_t ri = 0; ri < json_array_size(records); ri++) {
			json_t *jr = json_array_get(records, ri);
			assert_int_equal(fsnp_fqr_w_record_begin(&fw), 0);
			for (unsigned bit = 0; bit < FSNP_FQR_FIELDS; bit++) {
				json_t *jv = json_object_get(
				    jr, fsnp_fqr_field_name(bit));
				if (jv == NULL) {
					continue;
				}
				assert_int_equal(fsnp_fqr_w_field(&fw, bit), 0);
				json_value(&w, jv);
			}
			assert_int_equal(fsnp_fqr_w_record_end(&fw), 0);
		}
		assert_int_equal(fsnp_fqr_w_end(&fw), 0);
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(b.len, 2 + len);
		assert_int_equal(wire_load_u16(b.data), 0);
		assert_memory_equal(b.data + 2, p, len);
		free(p);
	}
	wbuf_free(&b);
	json_decref(root);
}

static uint8_t *vector_payload(size_t index, size_t *len)
{
	json_t *root = load_vectors();
	json_t *vec = json_array_get(json_object_get(root, "vectors"), index);
	uint8_t *p = fsnp_test_unhex(
	    json_string_value(json_object_get(vec, "payload_hex")), len);
	json_decref(root);
	assert_non_null(p);
	return p;
}

/* Change one byte of a copy of payload p and decode it. */
static int decode_patched(const uint8_t *p, size_t len, size_t at,
                          uint8_t value)
{
	struct fsnp_fqr r;
	uint8_t *q = malloc(len);
	assert_non_null(q);
	memcpy(q, p, len);
	q[at] = value;
	int rv = fsnp_fqr_decode(q, len, NULL, &r);
	free(q);
	return rv;
}

#define USAGE_OFF(i) (6u + 8u * (i))

static void test_fqr_rejections(void **state)
{
	size_t len, clen;
	uint8_t *p = vector_payload(0, &len);  /* records page */
	uint8_t *c = vector_payload(1, &clen); /* count */
	struct fsnp_fqr r;
	(void)state;

	assert_int_equal(decode_patched(p, len, 0, 0xA1),
	                 FSNP_ERR_COMPACT_RESPONSE);
	assert_int_equal(decode_patched(p, len, 1, 2), FSNP_ERR_FQR_KIND);
	assert_int_equal(decode_patched(p, len, 2, 4), FSNP_ERR_FQR_CODE);
	assert_int_equal(decode_patched(p, len, 3, 3), FSNP_ERR_FQR_CODE);
	assert_int_equal(decode_patched(p, len, 4, 2), FSNP_ERR_FQR_CODE);
	assert_int_equal(decode_patched(p, len, 5, 4), FSNP_ERR_FQR_CODE);
	/* Usage: inconsistent counters and a wrong response_bytes. */
	assert_int_equal(
	    decode_patched(p, len, USAGE_OFF(FSNP_FQR_HYDRATED_RECORDS) + 7, 2),
	    FSNP_ERR_FQR_USAGE);
	assert_int_equal(
	    decode_patched(p, len, USAGE_OFF(FSNP_FQR_RESULT_RECORDS) + 7, 0),
	    FSNP_ERR_FQR_USAGE);
	assert_int_equal(decode_patched(p, len,
	                                USAGE_OFF(FSNP_FQR_RESPONSE_BYTES) + 7,
	                                (uint8_t)(len + 1)),
	                 FSNP_ERR_FQR_USAGE);
	assert_int_equal(
	    decode_patched(p, len, USAGE_OFF(FSNP_FQR_WALL_TIME_US), 0x80),
	    FSNP_ERR_FQR_USAGE);
	assert_int_equal(
	    decode_patched(p, len, USAGE_OFF(FSNP_FQR_RESIDUAL_CHECKS) + 7, 13),
	    FSNP_ERR_FQR_USAGE);
	assert_int_equal(
	    decode_patched(p, len, USAGE_OFF(FSNP_FQR_RESIDUAL_CHECKS) + 7, 12),
	    0);
	/* Page metadata: has_more is 0 or 1 and goes with a cursor. */
	size_t page = 6 + 8 * FSNP_FQR_USAGES;
	assert_int_equal(decode_patched(p, len, page, 2), FSNP_ERR_FQR_PAGE);
	assert_int_equal(decode_patched(p, len, page, 1), FSNP_ERR_FQR_PAGE);
	/* Bitmap bits above 19 (bitmap at page + 9). */
	assert_int_equal(decode_patched(p, len, page + 9 + 1, 0x18),
	                 FSNP_ERR_FQR_BITMAP);
	assert_int_equal(decode_patched(p, len, page + 9, 0x80),
	                 FSNP_ERR_FQR_BITMAP);
	/* The record count limit. */
	struct fsnp_fqr_limits lim = {0, {100, 64}};
	assert_int_equal(fsnp_fqr_decode(p, len, &lim, &r), FSNP_ERR_FQR_COUNT);
	/* Every truncation, and a trailing byte. */
	for (size_t k = 0; k < len; k++) {
		assert_int_not_equal(fsnp_fqr_decode(p, k, NULL, &r), 0);
	}
	for (size_t k = 0; k < clen; k++) {
		assert_int_not_equal(fsnp_fqr_decode(c, k, NULL, &r), 0);
	}
	uint8_t *longer = malloc(len + 1);
	assert_non_null(longer);
	memcpy(longer, p, len);
	longer[len] = 0;
	assert_int_equal(fsnp_fqr_decode(longer, len + 1, NULL, &r),
	                 FSNP_ERR_TRAILING_BYTES);
	free(longer);
	/* Count above INT64_MAX; count results need result_records 1. */
	assert_int_equal(decode_patched(c, clen, clen - 8, 0x80),
	                 FSNP_ERR_FQR_COUNT);
	assert_int_equal(
	    decode_patched(c, clen, USAGE_OFF(FSNP_FQR_RESULT_RECORDS) + 7, 2),
	    FSNP_ERR_FQR_USAGE);
	free(p);
	free(c);
}

/* Encode a page with a cursor; the writer refuses what a client must
 * reject. */
static void test_fqr_writer(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_fqr_writer fw;
	struct fsnp_fqr meta, r;
	const char *cursor = "fqc1_AAAAAAAAAAAAAAAAAAAA";
	(void)state;
	wbuf_init(&b);
	memset(&meta, 0, sizeof meta);
	meta.kind = FSNP_FQR_RECORDS;
	meta.quality[FSNP_FQR_PAGINATION] = 3;
	meta.usage[FSNP_FQR_SCANNED_ENTRIES] = 5;
	meta.usage[FSNP_FQR_RESULT_RECORDS] = 2;
	meta.has_more = true;
	meta.cursor = str(cursor);

	fsnp_w_init(&w, &b);
	assert_int_equal(fsnp_fqr_w_begin(&fw, &w, &meta, 100), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(fsnp_fqr_w_record_begin(&fw), 0);
		assert_int_equal(fsnp_fqr_w_field(&fw, FSNP_FQR_F_ID), 0);
		fsnp_w_str(&w, i ? "run-2" : "run-1");
		assert_int_equal(fsnp_fqr_w_field(&fw, FSNP_FQR_F_VERSION), 0);
		fsnp_w_i64(&w, i + 1);
		assert_int_equal(fsnp_fqr_w_field(&fw, FSNP_FQR_F_ATTRIBUTES),
		                 0);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "tenant");
		fsnp_w_str(&w, "acme");
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_fqr_w_field(&fw, FSNP_FQR_F_FIELDS), 0);
		fsnp_w_nil(&w); /* present with nil */
		assert_int_equal(fsnp_fqr_w_record_end(&fw), 0);
	}
	assert_int_equal(fsnp_fqr_w_end(&fw), 0);
	assert_int_equal(fsnp_fqr_decode(b.data, b.len, NULL, &r), 0);
	assert_true(r.has_more);
	assert_true(fsnp_bytes_eq(r.cursor, cursor));
	assert_int_equal(r.record_count, 2);
	assert_int_equal(r.usage[FSNP_FQR_RESPONSE_BYTES], b.len);
	struct fsnp_fqr_iter it;
	struct fsnp_fqr_record rec;
	fsnp_fqr_iter_init(&it, &r);
	assert_true(fsnp_fqr_iter_next(&it, &rec));
	assert_true(fsnp_fqr_iter_next(&it, &rec));
	assert_int_equal(rec.bitmap, (1u << FSNP_FQR_F_ID) |
	                                 (1u << FSNP_FQR_F_VERSION) |
	                                 (1u << FSNP_FQR_F_ATTRIBUTES) |
	                                 (1u << FSNP_FQR_F_FIELDS));
	assert_true(fsnp_bytes_eq(rec.field[FSNP_FQR_F_ID].as.bin, "run-2"));
	assert_true(fsnp_val_is_nil(&rec.field[FSNP_FQR_F_FIELDS]));
	struct fsnp_bytes tenant;
	assert_int_equal(
	    fsnp_map_bin(&rec.field[FSNP_FQR_F_ATTRIBUTES], "tenant", &tenant),
	    0);
	assert_true(fsnp_bytes_eq(tenant, "acme"));
	assert_false(fsnp_fqr_iter_next(&it, &rec));

	/* More records than usage says. */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	meta.usage[FSNP_FQR_RESULT_RECORDS] = 1;
	assert_int_equal(fsnp_fqr_w_begin(&fw, &w, &meta, 100), 0);
	assert_int_equal(fsnp_fqr_w_end(&fw), FSNP_ERR_FQR_USAGE);

	/* Fields out of order, a field without a value, two values. */
	meta.usage[FSNP_FQR_RESULT_RECORDS] = 0;
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_fqr_w_begin(&fw, &w, &meta, 100);
	fsnp_fqr_w_record_begin(&fw);
	fsnp_fqr_w_field(&fw, FSNP_FQR_F_STATE);
	fsnp_w_str(&w, "x");
	assert_int_equal(fsnp_fqr_w_field(&fw, FSNP_FQR_F_ID),
	                 FSNP_ERR_FQR_BITMAP);
	assert_int_equal(fsnp_fqr_w_end(&fw), FSNP_ERR_FQR_BITMAP);
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_fqr_w_begin(&fw, &w, &meta, 100);
	fsnp_fqr_w_record_begin(&fw);
	fsnp_fqr_w_field(&fw, FSNP_FQR_F_ID);
	assert_int_equal(fsnp_fqr_w_record_end(&fw), FSNP_ERR_WRITER);
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_fqr_w_begin(&fw, &w, &meta, 100);
	fsnp_fqr_w_record_begin(&fw);
	fsnp_fqr_w_field(&fw, FSNP_FQR_F_ID);
	fsnp_w_str(&w, "a");
	fsnp_w_str(&w, "b");
	assert_int_equal(fsnp_fqr_w_record_end(&fw), FSNP_ERR_WRITER);
	assert_int_equal(fsnp_fqr_w_field(&fw, 20), FSNP_ERR_WRITER);

	/* Bad cursors: too short, wrong prefix. */
	meta.cursor = str("fqc1_short");
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_fqr_w_begin(&fw, &w, &meta, 100);
	assert_int_equal(fsnp_fqr_w_end(&fw), FSNP_ERR_FQR_PAGE);
	meta.cursor = str("xxxx_AAAAAAAAAAAAAAAAAAAA");
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_fqr_w_begin(&fw, &w, &meta, 100);
	assert_int_equal(fsnp_fqr_w_end(&fw), FSNP_ERR_FQR_PAGE);
	/* Records on a count result. */
	meta.kind = FSNP_FQR_COUNT;
	meta.usage[FSNP_FQR_RESULT_RECORDS] = 1;
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	assert_int_equal(fsnp_fqr_w_begin(&fw, &w, &meta, 100), 0);
	assert_int_equal(fsnp_fqr_w_record_begin(&fw), FSNP_ERR_WRITER);
	wbuf_free(&b);
}

static void test_fqr_names(void **state)
{
	(void)state;
	assert_string_equal(fsnp_fqr_field_name(FSNP_FQR_F_FIELDS), "fields");
	assert_null(fsnp_fqr_field_name(20));
	assert_int_equal(fsnp_fqr_field_bit("event_id", 8),
	                 FSNP_FQR_F_EVENT_ID);
	assert_int_equal(fsnp_fqr_field_bit("payload", 7), -1);
	assert_string_equal(fsnp_fqr_quality_name(FSNP_FQR_PAGINATION, 3),
	                    "live_seek");
	assert_null(fsnp_fqr_quality_name(FSNP_FQR_COVERAGE, 2));
	assert_null(fsnp_fqr_quality_name(4, 0));
	assert_int_equal(
	    fsnp_fqr_quality_code(FSNP_FQR_FRESHNESS, "not_applicable", 14), 2);
	assert_int_equal(fsnp_fqr_quality_code(FSNP_FQR_COVERAGE, "none", 4),
	                 -1);
	assert_string_equal(fsnp_fqr_usage_name(FSNP_FQR_WALL_TIME_US),
	                    "wall_time_us");
	assert_null(fsnp_fqr_usage_name(FSNP_FQR_USAGES));
}

/* flow_record_v1 / flow_record_list_v1: the SDK's field ids (1 "id" ...
 * 41 "attributes"), other keys by name, values as their typed encoding;
 * the decoders refuse what the SDK would not read. */
static void test_flow_record(void **state)
{
	struct wbuf tb, lb, out;
	struct fsnp_writer w;
	struct fsnp_val rec, list;
	struct fsnp_compact_record r;
	struct fsnp_compact_list l;
	struct fsnp_bytes k;
	struct fsnp_val v;
	size_t used;
	(void)state;
	assert_string_equal(fsnp_compact_flow_field_name(1), "id");
	assert_string_equal(fsnp_compact_flow_field_name(41), "attributes");
	assert_null(fsnp_compact_flow_field_name(0));
	assert_null(fsnp_compact_flow_field_name(42));
	assert_int_equal(
	    fsnp_compact_flow_field_id((const uint8_t *)"state", 5), 3);
	assert_int_equal(fsnp_compact_flow_field_id((const uint8_t *)"x", 1),
	                 0);

	wbuf_init(&tb);
	fsnp_w_init(&w, &tb);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_str(&w, "f1");
	fsnp_w_key(&w, "version");
	fsnp_w_i64(&w, 7);
	fsnp_w_key(&w, "state_meta"); /* no field id */
	fsnp_w_map_begin(&w);
	fsnp_w_map_end(&w);
	fsnp_w_key(&w, "lease_token");
	fsnp_w_nil(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode(tb.data, tb.len, NULL, &rec, NULL),
	                 0);

	wbuf_init(&out);
	assert_int_equal(fsnp_compact_flow_record_encode(&out, &rec), 0);
	{
		static const uint8_t
		    want[] = {0x84, 0,   0,   0,   4,   1,   4,
		              0,    0,   0,   2,   'f', '1', /* id: bin "f1" */
		              4,    3,   0,   0,   0,   0,   0,
		              0,    0,   7, /* version: i64 7 */
		              0,    0,   0,   0,   10,  's', 't',
		              'a',  't', 'e', '_', 'm', 'e', 't',
		              'a',  6,   0,   0,   0,   0, /* state_meta: {} */
		              18,   0}; /* lease_token: nil */
		assert_int_equal(out.len, sizeof want);
		assert_memory_equal(out.data, want, sizeof want);
	}
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 100, &r, NULL),
	    0);
	assert_int_equal(r.count, 4);
	assert_true(fsnp_compact_record_next(&r, &k, &v));
	assert_true(fsnp_bytes_eq(k, "id") && v.tag == FSNP_BIN);
	assert_true(fsnp_compact_record_next(&r, &k, &v));
	assert_true(fsnp_bytes_eq(k, "version") && v.as.i == 7);
	assert_true(fsnp_compact_record_next(&r, &k, &v));
	assert_true(fsnp_bytes_eq(k, "state_meta") && v.tag == FSNP_MAP);
	assert_true(fsnp_compact_record_next(&r, &k, &v));
	assert_true(fsnp_bytes_eq(k, "lease_token") && v.tag == FSNP_NIL);
	assert_false(fsnp_compact_record_next(&r, &k, &v));

	/* Refusals: a trailing byte, a count above the limit, an unknown
	 * field id, a truncated value, a wrong tag. */
	assert_int_equal(wbuf_put_u8(&out, 0), 0);
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 100, &r, NULL),
	    FSNP_ERR_TRAILING_BYTES);
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 100, &r, &used),
	    0);
	assert_int_equal(used, out.len - 1);
	out.len--;
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 3, &r, NULL),
	    FSNP_ERR_COMPACT_ITEMS);
	out.data[5] = 42;
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 100, &r, NULL),
	    FSNP_ERR_COMPACT_RESPONSE);
	out.data[5] = 1;
	assert_int_equal(fsnp_compact_flow_record_decode(out.data, out.len - 1,
	                                                 100, &r, NULL),
	                 FSNP_ERR_COMPACT_RESPONSE);
	out.data[0] = 0x85;
	assert_int_equal(
	    fsnp_compact_flow_record_decode(out.data, out.len, 100, &r, NULL),
	    FSNP_ERR_COMPACT_RESPONSE);
	assert_int_equal(fsnp_compact_flow_record_encode(&out, &v),
	                 FSNP_ERR_TYPE);

	/* A list of two records. */
	wbuf_init(&lb);
	fsnp_w_init(&w, &lb);
	fsnp_w_array_begin(&w);
	fsnp_w_val(&w, &rec);
	fsnp_w_val(&w, &rec);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode(lb.data, lb.len, NULL, &list, NULL),
	                 0);
	wbuf_reset(&out);
	assert_int_equal(fsnp_compact_flow_record_list_encode(&out, &list), 0);
	assert_int_equal(out.data[0], 0x85);
	assert_int_equal(wire_load_u32(out.data + 1), 2);
	assert_int_equal(out.data[5], 0x84);
	assert_int_equal(
	    fsnp_compact_flow_record_list_decode(out.data, out.len, 100, &l),
	    0);
	assert_int_equal(l.count, 2);
	for (int i = 0; i < 2; i++) {
		assert_true(fsnp_compact_record_list_next(&l, &r));
		assert_int_equal(r.count, 4);
	}
	assert_false(fsnp_compact_record_list_next(&l, &r));
	/* Entries count against the limit across records. */
	assert_int_equal(
	    fsnp_compact_flow_record_list_decode(out.data, out.len, 6, &l),
	    FSNP_ERR_COMPACT_ITEMS);
	/* Not every element a map. */
	assert_int_equal(fsnp_compact_flow_record_list_encode(&out, &rec),
	                 FSNP_ERR_TYPE);
	wbuf_free(&out);
	wbuf_free(&tb);
	wbuf_free(&lb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mset_request),
	    cmocka_unit_test(test_mget_request),
	    cmocka_unit_test(test_pipeline_request),
	    cmocka_unit_test(test_value_mget_request),
	    cmocka_unit_test(test_kv_responses),
	    cmocka_unit_test(test_fqr_vectors_decode),
	    cmocka_unit_test(test_fqr_vectors_encode),
	    cmocka_unit_test(test_fqr_rejections),
	    cmocka_unit_test(test_fqr_writer),
	    cmocka_unit_test(test_fqr_names),
	    cmocka_unit_test(test_flow_record),
	};
	return cmocka_run_group_tests_name("fsnp_compact", tests, NULL, NULL);
}
