/* Unit tests for wire/fsnp_value: every tag, limits, truncation, lookups,
 * the builder, and random round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_value.h"

/* Decode hex; the caller frees. */
static uint8_t *hex(const char *h, size_t *len)
{
	uint8_t *p = fsnp_test_unhex(h, len);
	assert_non_null(p);
	return p;
}

/* Decode the hex value and expect error `err` (0: success, whole input). */
static void expect_decode(const char *h, const struct fsnp_limits *lim, int err)
{
	size_t len, used = 0;
	struct fsnp_val v;
	uint8_t *p = hex(h, &len);
	int rv = fsnp_value_decode(p, len, lim, &v, &used);
	assert_int_equal(rv, err);
	if (err == 0) {
		assert_int_equal(used, len);
	}
	free(p);
}

/* Build with the writer, compare to hex. */
static void expect_bytes(struct wbuf *b, const char *h)
{
	size_t len;
	uint8_t *p = hex(h, &len);
	assert_int_equal(b->len, len);
	assert_memory_equal(b->data, p, len);
	free(p);
}

static void test_scalar_tags(void **state)
{
	size_t len;
	struct fsnp_val v;
	uint8_t *p;
	(void)state;

	p = hex("00", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_NIL);
	assert_true(fsnp_val_is_nil(&v));
	assert_int_equal(v.enc_len, 1);
	free(p);

	bool b = false;
	p = hex("01", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(fsnp_val_bool(&v, &b), 0);
	assert_true(b);
	free(p);
	p = hex("02", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(fsnp_val_bool(&v, &b), 0);
	assert_false(b);
	free(p);

	int64_t i;
	p = hex("03 8000000000000000", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_I64);
	assert_int_equal(fsnp_val_i64(&v, &i), 0);
	assert_true(i == INT64_MIN);
	uint64_t u;
	assert_int_equal(fsnp_val_u64(&v, &u), FSNP_ERR_TYPE);
	free(p);
	p = hex("03 ffffffffffffffff", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.as.i, -1);
	free(p);

	p = hex("08 ffffffffffffffff", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_U64);
	assert_int_equal(fsnp_val_u64(&v, &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(fsnp_val_i64(&v, &i), FSNP_ERR_TYPE);
	free(p);

	double f;
	p = hex("07 3ff8000000000000", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_F64);
	assert_int_equal(fsnp_val_f64(&v, &f), 0);
	assert_true(f == 1.5);
	assert_int_equal(fsnp_val_i64(&v, &i), FSNP_ERR_TYPE);
	free(p);

	struct fsnp_bytes bin;
	p = hex("04 00000003 616263", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(fsnp_val_bin(&v, &bin), 0);
	assert_true(fsnp_bytes_eq(bin, "abc"));
	assert_ptr_equal(bin.ptr, p + 5); /* a view, not a copy */
	free(p);
	p = hex("04 00000000", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.as.bin.len, 0);
	free(p);
}

static void test_container_tags(void **state)
{
	size_t len;
	struct fsnp_val v, e;
	struct fsnp_iter it;
	struct fsnp_bytes k;
	int64_t i;
	(void)state;

	uint8_t *p =
	    hex("05 00000003 00 03 0000000000000007 04 00000001 78", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_ARRAY);
	assert_int_equal(v.as.count, 3);
	fsnp_iter_init(&it, &v);
	assert_true(fsnp_iter_next(&it, &k, &e));
	assert_null(k.ptr);
	assert_int_equal(e.tag, FSNP_NIL);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(fsnp_val_i64(&e, &i), 0);
	assert_int_equal(i, 7);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(e.tag, FSNP_BIN);
	assert_false(fsnp_iter_next(&it, NULL, &e));
	free(p);

	p = hex("06 00000002 00000001 61 01 00000000 05 00000000", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	assert_int_equal(v.tag, FSNP_MAP);
	fsnp_iter_init(&it, &v);
	assert_true(fsnp_iter_next(&it, &k, &e));
	assert_true(fsnp_bytes_eq(k, "a"));
	assert_int_equal(e.tag, FSNP_TRUE);
	assert_true(fsnp_iter_next(&it, &k, &e));
	assert_int_equal(k.len, 0);
	assert_int_equal(e.tag, FSNP_ARRAY);
	assert_false(fsnp_iter_next(&it, &k, &e));
	free(p);

	/* A scalar iterates as nothing. */
	p = hex("00", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	fsnp_iter_init(&it, &v);
	assert_false(fsnp_iter_next(&it, &k, &e));
	free(p);
}

static void test_truncation(void **state)
{
	(void)state;
	expect_decode("", NULL, FSNP_ERR_VALUE_EMPTY);
	expect_decode("09", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("ff", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("03 00000000000000", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("07 00", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("08", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("04 000000", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("04 00000003 6162", NULL, FSNP_ERR_VALUE_BIN_TRUNCATED);
	expect_decode("04 ffffffff 00", NULL, FSNP_ERR_VALUE_BIN_TRUNCATED);
	expect_decode("05 000000", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("05 00000002 00", NULL, FSNP_ERR_VALUE_EMPTY);
	expect_decode("05 00000001 09", NULL, FSNP_ERR_VALUE_TAG);
	expect_decode("06 00000001 0000", NULL, FSNP_ERR_VALUE_MAP_TRUNCATED);
	expect_decode("06 00000001 00000002 61", NULL,
	              FSNP_ERR_VALUE_BIN_TRUNCATED);
	expect_decode("06 00000001 00000001 61", NULL, FSNP_ERR_VALUE_EMPTY);
	expect_decode("06 00000000", NULL, 0);
}

/* Append n nested arrays around an empty one, as raw bytes. */
static void nested(struct wbuf *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		wbuf_put_u8(b, FSNP_ARRAY);
		wbuf_put_u32(b, 1);
	}
	wbuf_put_u8(b, FSNP_ARRAY);
	wbuf_put_u32(b, 0);
}

static void test_depth_limit(void **state)
{
	struct wbuf b;
	struct fsnp_val v;
	(void)state;
	wbuf_init(&b);
	/* 64 containers (depths 0..63) pass the default limit of 64. */
	nested(&b, 63);
	assert_int_equal(fsnp_value_decode(b.data, b.len, NULL, &v, NULL), 0);
	wbuf_reset(&b);
	nested(&b, 64);
	assert_int_equal(fsnp_value_decode(b.data, b.len, NULL, &v, NULL),
	                 FSNP_ERR_VALUE_DEPTH);
	struct fsnp_limits lim = {FSNP_MAX_ITEMS_DEFAULT, 2};
	wbuf_reset(&b);
	nested(&b, 1);
	assert_int_equal(fsnp_value_decode(b.data, b.len, &lim, &v, NULL), 0);
	wbuf_reset(&b);
	nested(&b, 2);
	assert_int_equal(fsnp_value_decode(b.data, b.len, &lim, &v, NULL),
	                 FSNP_ERR_VALUE_DEPTH);
	/* Depth 0 admits scalars only. */
	lim.max_depth = 0;
	expect_decode("05 00000000", &lim, FSNP_ERR_VALUE_DEPTH);
	expect_decode("04 00000000", &lim, 0);
	/* A huge limit is clamped: deep input cannot exhaust the stack. */
	lim.max_depth = UINT32_MAX;
	wbuf_reset(&b);
	nested(&b, FSNP_MAX_DEPTH_HARD);
	assert_int_equal(fsnp_value_decode(b.data, b.len, &lim, &v, NULL),
	                 FSNP_ERR_VALUE_DEPTH);
	wbuf_free(&b);
}

static void test_item_limits(void **state)
{
	struct fsnp_limits lim = {3, 64};
	struct wbuf b;
	struct fsnp_val v;
	(void)state;
	/* One container above max_items is refused before its elements. */
	expect_decode("05 00000004", &lim, FSNP_ERR_VALUE_CONTAINER_ITEMS);
	expect_decode("05 00000003 00 00 00", &lim, 0);
	/* The total over all containers: 2 + 1 + 1 = 4 > 3. */
	expect_decode("05 00000002 05 00000001 00 05 00000001 00", &lim,
	              FSNP_ERR_VALUE_TOTAL_ITEMS);
	expect_decode("05 00000002 05 00000001 00 05 00000000", &lim, 0);
	/* Maps count entries. */
	expect_decode("06 00000004", &lim, FSNP_ERR_VALUE_CONTAINER_ITEMS);

	/* Default: 100000 items pass, 100001 do not. */
	wbuf_init(&b);
	wbuf_put_u8(&b, FSNP_MAP);
	wbuf_put_u32(&b, FSNP_MAX_ITEMS_DEFAULT);
	for (unsigned i = 0; i < FSNP_MAX_ITEMS_DEFAULT; i++) {
		wbuf_put_u32(&b, 0);
		wbuf_put_u8(&b, FSNP_NIL);
	}
	assert_false(b.oom);
	assert_int_equal(fsnp_value_decode(b.data, b.len, NULL, &v, NULL), 0);
	assert_int_equal(v.as.count, FSNP_MAX_ITEMS_DEFAULT);
	wire_store_u32(b.data + 1, FSNP_MAX_ITEMS_DEFAULT + 1);
	assert_int_equal(fsnp_value_decode(b.data, b.len, NULL, &v, NULL),
	                 FSNP_ERR_VALUE_CONTAINER_ITEMS);
	wbuf_free(&b);
}

static void test_body_and_response(void **state)
{
	size_t len;
	struct fsnp_val v;
	uint16_t status = 99;
	uint8_t *p;
	(void)state;

	/* An empty body is {}. */
	assert_int_equal(fsnp_value_decode_body(NULL, 0, NULL, &v), 0);
	assert_int_equal(v.tag, FSNP_MAP);
	assert_int_equal(v.as.count, 0);
	p = hex("00 00", &len);
	assert_int_equal(fsnp_value_decode_body(p, len, NULL, &v),
	                 FSNP_ERR_TRAILING_BYTES);
	assert_int_equal(fsnp_value_decode_body(p, 1, NULL, &v), 0);
	free(p);

	p = hex("0000 04 00000002 4f4b", &len); /* "OK" */
	assert_int_equal(fsnp_value_decode_response(p, len, NULL, &status, &v),
	                 0);
	assert_int_equal(status, FSNP_STATUS_OK);
	assert_true(fsnp_bytes_eq(v.as.bin, "OK"));
	assert_int_equal(fsnp_value_decode_response(p, 1, NULL, &status, &v),
	                 FSNP_ERR_STATUS);
	assert_int_equal(fsnp_value_decode_response(p, 2, NULL, &status, &v),
	                 FSNP_ERR_VALUE_EMPTY);
	free(p);
	p = hex("0006 00 00", &len);
	assert_int_equal(fsnp_value_decode_response(p, len, NULL, &status, &v),
	                 FSNP_ERR_TRAILING_BYTES);
	free(p);
	p = hex("0007 00", &len);
	assert_int_equal(fsnp_value_decode_response(p, len, NULL, &status, &v),
	                 FSNP_ERR_STATUS);
	free(p);
	assert_string_equal(fsnp_status_name(FSNP_STATUS_BAD_REQUEST),
	                    "bad_request");
	assert_null(fsnp_status_name(7));
}

static void test_lookups(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val body, v;
	struct fsnp_bytes bin;
	int64_t i;
	uint64_t u;
	double f;
	bool flag;
	(void)state;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "k");
	fsnp_w_key(&w, "ttl");
	fsnp_w_i64(&w, 1000);
	fsnp_w_key(&w, "flag");
	fsnp_w_bool(&w, true);
	fsnp_w_key(&w, "score");
	fsnp_w_f64(&w, 2.5);
	fsnp_w_key(&w, "big");
	fsnp_w_u64(&w, UINT64_MAX);
	fsnp_w_key(&w, "nested");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "list");
	fsnp_w_array_begin(&w);
	fsnp_w_i64(&w, 1);
	fsnp_w_i64(&w, 2);
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	fsnp_w_key(&w, "dup");
	fsnp_w_i64(&w, 1);
	fsnp_w_key(&w, "dup");
	fsnp_w_i64(&w, 2);
	fsnp_w_key(&w, "none");
	fsnp_w_nil(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode_body(b.data, b.len, NULL, &body), 0);
	assert_int_equal(body.as.count, 9);

	assert_int_equal(fsnp_map_bin(&body, "key", &bin), 0);
	assert_true(fsnp_bytes_eq(bin, "k"));
	assert_int_equal(fsnp_map_i64(&body, "ttl", &i), 0);
	assert_int_equal(i, 1000);
	assert_int_equal(fsnp_map_u64(&body, "ttl", &u), 0);
	assert_int_equal(fsnp_map_f64(&body, "ttl", &f), 0);
	assert_true(f == 1000.0);
	assert_int_equal(fsnp_map_bool(&body, "flag", &flag), 0);
	assert_true(flag);
	assert_int_equal(fsnp_map_f64(&body, "score", &f), 0);
	assert_true(f == 2.5);
	assert_int_equal(fsnp_map_u64(&body, "big", &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(fsnp_map_i64(&body, "big", &i), FSNP_ERR_TYPE);
	assert_int_equal(fsnp_map_i64(&body, "dup", &i), 0);
	assert_int_equal(i, 2); /* the last duplicate wins */
	assert_int_equal(fsnp_map_get(&body, "none", &v), 0);
	assert_true(fsnp_val_is_nil(&v));
	assert_int_equal(fsnp_map_bin(&body, "none", &bin), FSNP_ERR_TYPE);
	assert_int_equal(fsnp_map_i64(&body, "key", &i), FSNP_ERR_TYPE);
	assert_int_equal(fsnp_map_bool(&body, "missing", &flag),
	                 FSNP_ERR_NOT_FOUND);
	assert_int_equal(fsnp_map_get_n(&body, "keyx", 3, &v), 0);

	struct fsnp_val nested, list, e;
	assert_int_equal(fsnp_map_map(&body, "nested", &nested), 0);
	assert_int_equal(fsnp_map_array(&body, "nested", &list), FSNP_ERR_TYPE);
	assert_int_equal(fsnp_map_array(&nested, "list", &list), 0);
	assert_int_equal(list.as.count, 2);
	assert_int_equal(fsnp_map_get(&list, "x", &e), FSNP_ERR_TYPE);
	struct fsnp_iter it;
	fsnp_iter_init(&it, &list);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(e.as.i, 1);
	wbuf_free(&b);
}

static void test_writer_encodings(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	(void)state;
	wbuf_init(&b);

	fsnp_w_init(&w, &b);
	fsnp_w_nil(&w);
	fsnp_w_bool(&w, true);
	fsnp_w_bool(&w, false);
	fsnp_w_i64(&w, -2);
	fsnp_w_u64(&w, (uint64_t)INT64_MAX);
	fsnp_w_u64(&w, (uint64_t)INT64_MAX + 1);
	fsnp_w_f64(&w, -0.0);
	fsnp_w_str(&w, "");
	assert_int_equal(fsnp_w_finish(&w), 0);
	expect_bytes(&b, "00 01 02 03 fffffffffffffffe 03 7fffffffffffffff "
	                 "08 8000000000000000 07 8000000000000000 04 00000000");

	/* The SDK's SET body {key:"k",value:"v"} (client-sdk.md section 10). */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "k");
	fsnp_w_key(&w, "value");
	fsnp_w_str(&w, "v");
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	expect_bytes(&b, "06 00000002 00000003 6b6579 04 00000001 6b "
	                 "00000005 76616c7565 04 00000001 76");

	/* A response: status, then one value; fsnp_w_val copies. */
	struct fsnp_val v;
	size_t len;
	uint8_t *p = hex("05 00000001 04 00000001 31", &len);
	assert_int_equal(fsnp_value_decode(p, len, NULL, &v, NULL), 0);
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_status(&w, FSNP_STATUS_ERROR);
	fsnp_w_array_begin(&w);
	fsnp_w_val(&w, &v);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	expect_bytes(&b, "0001 05 00000001 05 00000001 04 00000001 31");
	free(p);
	wbuf_free(&b);
}

static void test_writer_misuse(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	(void)state;
	wbuf_init(&b);

	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_i64(&w, 1); /* no key */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_key(&w, "k"); /* not in a map */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "a");
	fsnp_w_key(&w, "b"); /* two keys */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "a");
	fsnp_w_map_end(&w); /* key without value */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_map_end(&w); /* mismatched end */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_array_end(&w); /* nothing open */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w); /* left open */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_status(&w, 0); /* status inside a container */
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	/* Nesting beyond the writer's depth. */
	fsnp_w_init(&w, &b);
	for (unsigned i = 0; i <= FSNP_WRITER_MAX_DEPTH; i++) {
		fsnp_w_array_begin(&w);
	}
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	/* Errors are sticky. */
	fsnp_w_init(&w, &b);
	fsnp_w_key(&w, "k");
	fsnp_w_i64(&w, 1);
	assert_int_equal(w.err, FSNP_ERR_WRITER);
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_WRITER);

	/* A buffer that failed to grow reports NOMEM. */
	fsnp_w_init(&w, &b);
	b.oom = true;
	fsnp_w_nil(&w);
	assert_int_equal(fsnp_w_finish(&w), FSNP_ERR_NOMEM);
	wbuf_free(&b);
}

/* Random values: build, decode, rebuild structurally; the bytes must be
 * identical, and every strict prefix must fail to decode. */
static void test_random_round_trips(void **state)
{
	struct fsnp_rng r;
	struct wbuf a, b;
	struct fsnp_writer w;
	(void)state;
	fsnp_rng_seed(&r, 0x5eed0f5e);
	wbuf_init(&a);
	wbuf_init(&b);
	for (int n = 0; n < 3000; n++) {
		struct fsnp_val v, v2;
		size_t used;
		wbuf_reset(&a);
		fsnp_w_init(&w, &a);
		fsnp_test_random_value(&r, &w, (unsigned)(n % 5));
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(
		    fsnp_value_decode(a.data, a.len, NULL, &v, &used), 0);
		assert_int_equal(used, a.len);
		wbuf_reset(&b);
		fsnp_w_init(&w, &b);
		fsnp_test_reencode(&w, &v);
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(b.len, a.len);
		assert_memory_equal(b.data, a.data, a.len);
		assert_int_equal(
		    fsnp_value_decode_body(b.data, b.len, NULL, &v2), 0);
		if (n % 10 == 0) {
			for (size_t k = 0; k < a.len; k++) {
				assert_int_not_equal(
				    fsnp_value_decode(a.data, k, NULL, &v2,
				                      &used),
				    0);
			}
		}
	}
	wbuf_free(&a);
	wbuf_free(&b);
}

static void test_error_texts(void **state)
{
	(void)state;
	assert_string_equal(fsnp_strerror(FSNP_ERR_VALUE_TAG),
	                    "ERR native value has unknown or truncated tag");
	assert_string_equal(fsnp_strerror(FSNP_ERR_TRAILING_BYTES),
	                    "ERR native frame body has trailing bytes");
	for (int e = 0; e < FSNP_ERR_COUNT_; e++) {
		assert_non_null(fsnp_strerror(e));
		assert_true(strncmp(fsnp_strerror(e), "ERR ", 4) == 0 ||
		            e == FSNP_OK);
	}
	assert_string_equal(fsnp_strerror(-1), "ERR native unknown error");
	assert_string_equal(fsnp_strerror(FSNP_ERR_COUNT_),
	                    "ERR native unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scalar_tags),
	    cmocka_unit_test(test_container_tags),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_item_limits),
	    cmocka_unit_test(test_body_and_response),
	    cmocka_unit_test(test_lookups),
	    cmocka_unit_test(test_writer_encodings),
	    cmocka_unit_test(test_writer_misuse),
	    cmocka_unit_test(test_random_round_trips),
	    cmocka_unit_test(test_error_texts),
	};
	return cmocka_run_group_tests_name("fsnp_value", tests, NULL, NULL);
}
