/* Unit tests for wire/fsnp_frame: header codec, incremental decoding,
 * fatal and per-request errors, and the SDK's captured frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_value.h"

static uint8_t *sdk_frame(const char *name, size_t *len)
{
	uint8_t *p = fsnp_test_sdk_frame(name, len);
	assert_non_null(p);
	return p;
}

static void test_header_round_trip(void **state)
{
	struct fsnp_header h = {FSNP_DIR_RESPONSE,   0x22, 0x01020304, 0x0231,
	                        0x1122334455667788u, 3};
	uint8_t out[FSNP_HEADER_SIZE + 3];
	struct fsnp_frame f;
	size_t flen;
	(void)state;
	fsnp_frame_encode_header(&h, out);
	memcpy(out + FSNP_HEADER_SIZE, "abc", 3);
	static const uint8_t want[FSNP_HEADER_SIZE] = {
	    'F',  'S',  'N',  'P',  0x81, 0x22, 1,    2,    3, 4, 0x02, 0x31,
	    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0,    3};
	assert_memory_equal(out, want, sizeof want);
	assert_int_equal(fsnp_frame_decode(out, sizeof out, FSNP_DIR_RESPONSE,
	                                   1024, &f, &flen),
	                 0);
	assert_int_equal(flen, sizeof out);
	assert_int_equal(f.h.dir, FSNP_DIR_RESPONSE);
	assert_int_equal(f.h.flags, 0x22);
	assert_int_equal(f.h.lane_id, 0x01020304);
	assert_int_equal(f.h.opcode, 0x0231);
	assert_true(f.h.request_id == 0x1122334455667788u);
	assert_int_equal(f.h.body_len, 3);
	assert_ptr_equal(f.body, out + FSNP_HEADER_SIZE);

	/* fsnp_frame_append sets body_len from the body. */
	struct wbuf b;
	wbuf_init(&b);
	h.dir = FSNP_DIR_REQUEST;
	h.body_len = 999;
	assert_int_equal(fsnp_frame_append(&b, &h, "xy", 2), 0);
	assert_int_equal(b.len, FSNP_HEADER_SIZE + 2);
	assert_int_equal(b.data[4], 0x01);
	assert_int_equal(
	    fsnp_frame_decode(b.data, b.len, FSNP_DIR_REQUEST, 1024, &f, &flen),
	    0);
	assert_int_equal(f.h.body_len, 2);
	wbuf_free(&b);
}

/* Every prefix of a frame asks for more; the whole frame decodes. */
static void test_incremental(void **state)
{
	size_t len, flen;
	struct fsnp_frame f;
	uint8_t *p = sdk_frame("startup_req", &len);
	(void)state;
	for (size_t k = 0; k < len; k++) {
		assert_int_equal(
		    fsnp_frame_decode(p, k, FSNP_DIR_REQUEST, 65536, &f, &flen),
		    0);
		assert_int_equal(flen, 0);
	}
	assert_int_equal(
	    fsnp_frame_decode(p, len, FSNP_DIR_REQUEST, 65536, &f, &flen), 0);
	assert_int_equal(flen, len);
	assert_int_equal(f.h.opcode, FSNP_OP_STARTUP);
	assert_int_equal(f.h.lane_id, 0);
	assert_int_equal(f.h.request_id, 1);
	assert_int_equal(f.h.body_len, 0xc5);
	free(p);
}

/* Pipelined frames in one buffer come out one by one. */
static void test_pipelined(void **state)
{
	const char *names[] = {"set_req", "mset_req", "mget_req",
	                       "value_mget_req"};
	struct wbuf b;
	(void)state;
	wbuf_init(&b);
	for (size_t i = 0; i < 4; i++) {
		size_t len;
		uint8_t *p = sdk_frame(names[i], &len);
		wbuf_append(&b, p, len);
		free(p);
	}
	size_t off = 0;
	uint16_t ops[4];
	for (size_t i = 0; i < 4; i++) {
		struct fsnp_frame f;
		size_t flen;
		assert_int_equal(fsnp_frame_decode(b.data + off, b.len - off,
		                                   FSNP_DIR_REQUEST, 65536, &f,
		                                   &flen),
		                 0);
		assert_true(flen > 0);
		ops[i] = f.h.opcode;
		off += flen;
	}
	assert_int_equal(off, b.len);
	assert_int_equal(ops[0], FSNP_OP_SET);
	assert_int_equal(ops[1], FSNP_OP_MSET);
	assert_int_equal(ops[2], FSNP_OP_MGET);
	assert_int_equal(ops[3], FSNP_OP_FLOW_VALUE_MGET);
	wbuf_free(&b);
}

static void test_fatal_errors(void **state)
{
	size_t len, flen;
	struct fsnp_frame f;
	uint8_t *p = sdk_frame("set_req", &len);
	(void)state;

	/* A wrong magic is seen from its first byte. */
	p[0] = 'X';
	assert_int_equal(
	    fsnp_frame_decode(p, 1, FSNP_DIR_REQUEST, 65536, &f, &flen),
	    FSNP_ERR_BAD_MAGIC);
	p[0] = 'F';
	p[2] = 'X';
	assert_int_equal(
	    fsnp_frame_decode(p, 2, FSNP_DIR_REQUEST, 65536, &f, &flen), 0);
	assert_int_equal(
	    fsnp_frame_decode(p, 3, FSNP_DIR_REQUEST, 65536, &f, &flen),
	    FSNP_ERR_BAD_MAGIC);
	p[2] = 'N';

	const uint8_t bad_versions[] = {0x00, 0x02, 0x7f, 0x82};
	for (size_t i = 0; i < sizeof bad_versions; i++) {
		p[4] = bad_versions[i];
		assert_int_equal(
		    fsnp_frame_decode(p, 5, FSNP_DIR_REQUEST, 65536, &f, &flen),
		    FSNP_ERR_BAD_VERSION);
	}
	p[4] = 0x81;
	assert_int_equal(
	    fsnp_frame_decode(p, 5, FSNP_DIR_REQUEST, 65536, &f, &flen),
	    FSNP_ERR_REQUEST_DIRECTION);
	p[4] = 0x01;
	assert_int_equal(
	    fsnp_frame_decode(p, len, FSNP_DIR_RESPONSE, 65536, &f, &flen),
	    FSNP_ERR_RESPONSE_DIRECTION);

	/* body_len above the limit is refused from the header alone. */
	assert_int_equal(fsnp_frame_decode(p, FSNP_HEADER_SIZE,
	                                   FSNP_DIR_REQUEST, 0x20, &f, &flen),
	                 FSNP_ERR_FRAME_TOO_LARGE);
	assert_int_equal(
	    fsnp_frame_decode(p, len, FSNP_DIR_REQUEST, 0x21, &f, &flen), 0);
	assert_int_equal(flen, len);
	/* The limit is clamped to 128 MiB - 24. */
	wire_store_u32(p + 20, FSNP_MAX_FRAME_BYTES_LIMIT + 1);
	assert_int_equal(fsnp_frame_decode(p, FSNP_HEADER_SIZE,
	                                   FSNP_DIR_REQUEST, UINT32_MAX, &f,
	                                   &flen),
	                 FSNP_ERR_FRAME_TOO_LARGE);
	wire_store_u32(p + 20, FSNP_MAX_FRAME_BYTES_LIMIT);
	assert_int_equal(fsnp_frame_decode(p, FSNP_HEADER_SIZE,
	                                   FSNP_DIR_REQUEST, UINT32_MAX, &f,
	                                   &flen),
	                 0);
	assert_int_equal(flen, 0);

	assert_true(fsnp_err_is_fatal(FSNP_ERR_BAD_MAGIC));
	assert_true(fsnp_err_is_fatal(FSNP_ERR_BAD_VERSION));
	assert_true(fsnp_err_is_fatal(FSNP_ERR_REQUEST_DIRECTION));
	assert_true(fsnp_err_is_fatal(FSNP_ERR_FRAME_TOO_LARGE));
	assert_string_equal(fsnp_strerror(FSNP_ERR_BAD_MAGIC),
	                    "ERR native invalid frame magic");
	free(p);
}

static void test_request_checks(void **state)
{
	struct fsnp_header h = {FSNP_DIR_REQUEST, 0, 1, FSNP_OP_GET, 7, 0};
	struct fsnp_request_policy off = {false, false};
	struct fsnp_request_policy on = {true, true};
	(void)state;

	assert_int_equal(fsnp_frame_check_request(&h, &off), 0);
	/* Custom payload, no-reply and more-chunks are always accepted. */
	h.flags = FSNP_FLAG_CUSTOM | FSNP_FLAG_NO_REPLY | FSNP_FLAG_MORE_CHUNKS;
	assert_int_equal(fsnp_frame_check_request(&h, &off), 0);
	h.flags = FSNP_FLAG_TRACE;
	assert_int_equal(fsnp_frame_check_request(&h, &off),
	                 FSNP_ERR_TRACE_DISABLED);
	assert_int_equal(fsnp_frame_check_request(&h, &on), 0);
	h.flags = FSNP_FLAG_COMPRESSED;
	assert_int_equal(fsnp_frame_check_request(&h, &off),
	                 FSNP_ERR_COMPRESSION_OFF);
	assert_int_equal(fsnp_frame_check_request(&h, &on), 0);
	const uint8_t unknown[] = {FSNP_FLAG_WARNING, 0x40, 0x80, 0xff};
	for (size_t i = 0; i < sizeof unknown; i++) {
		h.flags = unknown[i];
		int rv = fsnp_frame_check_request(&h, &on);
		assert_int_equal(rv, FSNP_ERR_UNKNOWN_FLAGS);
		assert_false(fsnp_err_is_fatal(rv));
	}
	/* request_id 0 is checked first. */
	h.request_id = 0;
	assert_int_equal(fsnp_frame_check_request(&h, &on),
	                 FSNP_ERR_REQUEST_ID_ZERO);
	h.flags = 0;
	assert_int_equal(fsnp_frame_check_request(&h, &on),
	                 FSNP_ERR_REQUEST_ID_ZERO);
	assert_false(fsnp_err_is_fatal(FSNP_ERR_REQUEST_ID_ZERO));
	assert_string_equal(
	    fsnp_strerror(FSNP_ERR_REQUEST_ID_ZERO),
	    "ERR native request_id 0 is reserved for server events");
	assert_string_equal(fsnp_strerror(FSNP_ERR_UNKNOWN_FLAGS),
	                    "ERR native request uses unsupported flags");
}

/* The SDK's frames: decode, re-encode the header, and rebuild typed
 * bodies structurally; all byte-exact. */
static void test_sdk_frames(void **state)
{
	static const struct {
		const char *name;
		enum fsnp_dir dir;
		uint16_t opcode;
		bool typed;
	} frames[] = {
	    {"startup_req", FSNP_DIR_REQUEST, FSNP_OP_STARTUP, true},
	    {"set_req", FSNP_DIR_REQUEST, FSNP_OP_SET, true},
	    {"set_rsp_typed", FSNP_DIR_RESPONSE, FSNP_OP_SET, true},
	    {"set_rsp_compact", FSNP_DIR_RESPONSE, FSNP_OP_SET, false},
	    {"get_rsp_typed", FSNP_DIR_RESPONSE, FSNP_OP_GET, true},
	    {"get_nil_typed", FSNP_DIR_RESPONSE, FSNP_OP_GET, true},
	    {"get_rsp_compact", FSNP_DIR_RESPONSE, FSNP_OP_GET, false},
	    {"get_nil_compact", FSNP_DIR_RESPONSE, FSNP_OP_GET, false},
	    {"mset_req", FSNP_DIR_REQUEST, FSNP_OP_MSET, false},
	    {"mget_req", FSNP_DIR_REQUEST, FSNP_OP_MGET, false},
	    {"mget_rsp_typed", FSNP_DIR_RESPONSE, FSNP_OP_MGET, true},
	    {"mget_rsp_compact", FSNP_DIR_RESPONSE, FSNP_OP_MGET, false},
	    {"error_rsp", FSNP_DIR_RESPONSE, FSNP_OP_LPUSH, true},
	    {"bad_request_rsp", FSNP_DIR_RESPONSE, FSNP_OP_GET, true},
	    {"claim_command_exec_req", FSNP_DIR_REQUEST, FSNP_OP_COMMAND_EXEC,
	     true},
	    {"claim_command_exec_rsp", FSNP_DIR_RESPONSE, FSNP_OP_COMMAND_EXEC,
	     true},
	    {"value_mget_req", FSNP_DIR_REQUEST, FSNP_OP_FLOW_VALUE_MGET,
	     false},
	};
	struct fsnp_request_policy policy = {false, false};
	struct wbuf b;
	(void)state;
	wbuf_init(&b);
	for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
		size_t len, flen;
		struct fsnp_frame f;
		uint8_t hdr[FSNP_HEADER_SIZE];
		uint8_t *p = sdk_frame(frames[i].name, &len);
		assert_int_equal(
		    fsnp_frame_decode(p, len, frames[i].dir, 65536, &f, &flen),
		    0);
		assert_int_equal(flen, len);
		assert_int_equal(f.h.opcode, frames[i].opcode);
		assert_int_equal((f.h.flags & FSNP_FLAG_CUSTOM) != 0,
		                 !frames[i].typed);
		fsnp_frame_encode_header(&f.h, hdr);
		assert_memory_equal(hdr, p, FSNP_HEADER_SIZE);
		if (frames[i].dir == FSNP_DIR_REQUEST) {
			assert_int_equal(
			    fsnp_frame_check_request(&f.h, &policy), 0);
		}
		if (frames[i].typed) {
			struct fsnp_val v;
			struct fsnp_writer w;
			uint16_t status = 0;
			wbuf_reset(&b);
			fsnp_w_init(&w, &b);
			if (frames[i].dir == FSNP_DIR_REQUEST) {
				assert_int_equal(
				    fsnp_value_decode_body(f.body, f.h.body_len,
				                           NULL, &v),
				    0);
			} else {
				assert_int_equal(fsnp_value_decode_response(
				                     f.body, f.h.body_len, NULL,
				                     &status, &v),
				                 0);
				fsnp_w_status(&w, status);
			}
			fsnp_test_reencode(&w, &v);
			assert_int_equal(fsnp_w_finish(&w), 0);
			assert_int_equal(b.len, f.h.body_len);
			assert_memory_equal(b.data, f.body, b.len);
		}
		free(p);
	}
	wbuf_free(&b);
}

/* The STARTUP body read through the lookup API. */
static void test_sdk_startup_body(void **state)
{
	size_t len, flen;
	struct fsnp_frame f;
	struct fsnp_val body, codecs, first;
	struct fsnp_bytes s;
	bool compact = false;
	uint8_t *p = sdk_frame("startup_req", &len);
	(void)state;
	assert_int_equal(
	    fsnp_frame_decode(p, len, FSNP_DIR_REQUEST, 65536, &f, &flen), 0);
	assert_int_equal(
	    fsnp_value_decode_body(f.body, f.h.body_len, NULL, &body), 0);
	assert_int_equal(fsnp_map_bin(&body, "client_name", &s), 0);
	assert_true(fsnp_bytes_eq(s, "ferricstore-typescript"));
	assert_int_equal(
	    fsnp_map_bool(&body, "compact_flow_responses", &compact), 0);
	assert_true(compact);
	assert_int_equal(
	    fsnp_map_array(&body, "compact_response_codecs", &codecs), 0);
	struct fsnp_iter it;
	fsnp_iter_init(&it, &codecs);
	assert_true(fsnp_iter_next(&it, NULL, &first));
	assert_int_equal(fsnp_val_bin(&first, &s), 0);
	assert_true(fsnp_bytes_eq(s, "flow_query_result_v1"));
	assert_int_equal(fsnp_map_bin(&body, "compression", &s), 0);
	assert_true(fsnp_bytes_eq(s, "none"));
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_round_trip),
	    cmocka_unit_test(test_incremental),
	    cmocka_unit_test(test_pipelined),
	    cmocka_unit_test(test_fatal_errors),
	    cmocka_unit_test(test_request_checks),
	    cmocka_unit_test(test_sdk_frames),
	    cmocka_unit_test(test_sdk_startup_body),
	};
	return cmocka_run_group_tests_name("fsnp_frame", tests, NULL, NULL);
}
