/* Felix frame envelope: flag validation over all 65536 values, the
 * incremental decoder on every prefix, early errors, limits, the encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "wire/felix_frame.h"

/* The layouts the seed defines, spelled out rather than derived. */
static const struct {
	uint16_t flags;
	enum felix_frame_kind kind;
} valid_flags[] = {
    {0x0000, FELIX_FRAME_JSON},
    {0x0001, FELIX_FRAME_PUBLISH_BATCH},
    {0x0009, FELIX_FRAME_PUBLISH_BATCH},
    {0x0041, FELIX_FRAME_PUBLISH_BATCH},
    {0x0049, FELIX_FRAME_PUBLISH_BATCH},
    {0x0002, FELIX_FRAME_EVENT_BATCH},
    {0x0022, FELIX_FRAME_EVENT_BATCH},
    {0x0004, FELIX_FRAME_EVENT_BATCH_SHARED},
    {0x0024, FELIX_FRAME_EVENT_BATCH_SHARED},
    {0x0010, FELIX_FRAME_PUBLISH_ACK},
    {0x0090, FELIX_FRAME_PUBLISH_ACK},
};

static void test_flags_all_values(void **state)
{
	unsigned f;
	size_t nvalid = 0;
	for (f = 0; f <= 0xFFFF; f++) {
		enum felix_frame_kind kind = FELIX_FRAME_JSON;
		char err[200] = "";
		int rc = felix_frame_flags_check((uint16_t)f, &kind, err,
		                                 sizeof err);
		bool want = false;
		size_t i;
		for (i = 0; i < sizeof valid_flags / sizeof valid_flags[0];
		     i++) {
			if (valid_flags[i].flags == f) {
				want = true;
				assert_int_equal(kind, valid_flags[i].kind);
			}
		}
		if (want) {
			assert_int_equal(rc, 0);
			nvalid++;
		} else {
			if (rc != -1) {
				fail_msg("flags 0x%04x accepted", f);
			}
			assert_true(strlen(err) > 0);
		}
	}
	assert_int_equal(nvalid, 11);
}

static void expect_flags_error(uint16_t flags, const char *msg)
{
	char err[200] = "";
	assert_int_equal(felix_frame_flags_check(flags, NULL, err, sizeof err),
	                 -1);
	assert_string_equal(err, msg);
}

static void test_flags_messages(void **state)
{
	expect_flags_error(0x0100, "frame flags 0x0100 carry unknown bits "
	                           "0x0100");
	expect_flags_error(0x8001, "frame flags 0x8001 carry unknown bits "
	                           "0x8000");
	expect_flags_error(0x0008, "frame flags 0x0008: 0x0008 (publish "
	                           "acked) without 0x0001 (publish batch)");
	expect_flags_error(0x0040, "frame flags 0x0040: 0x0040 (publish "
	                           "keyed) without 0x0001 (publish batch)");
	expect_flags_error(0x0080, "frame flags 0x0080: 0x0080 (ack owner) "
	                           "without 0x0010 (publish ack)");
	expect_flags_error(0x0081, "frame flags 0x0081: 0x0080 (ack owner) "
	                           "without 0x0010 (publish ack)");
	expect_flags_error(0x0020, "frame flags 0x0020: 0x0020 (event "
	                           "offsets) without 0x0002 or 0x0004 (event "
	                           "batch)");
	expect_flags_error(0x0021, "frame flags 0x0021: 0x0020 (event "
	                           "offsets) without 0x0002 or 0x0004 (event "
	                           "batch)");
	expect_flags_error(0x0006, "frame flags 0x0006 combine more than one "
	                           "payload layout");
	expect_flags_error(0x0011, "frame flags 0x0011 combine more than one "
	                           "payload layout");
	expect_flags_error(0x0018, "frame flags 0x0018: 0x0008 (publish "
	                           "acked) without 0x0001 (publish batch)");
}

/* The official client's keyed publish (reference/felix-client.md). */
static const uint8_t keyed[] = {
    0x46, 0x4c, 0x58, 0x31, 0x00, 0x01, 0x00, 0x49, 0x00, 0x00, 0x00,
    0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x00,
    0x02, 0x6b, 0x31, 0x00, 0x02, 0x74, 0x31, 0x00, 0x07, 0x64, 0x65,
    0x66, 0x61, 0x75, 0x6c, 0x74, 0x00, 0x02, 0x73, 0x31, 0x00, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x0b, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
    0x2d, 0x6b, 0x65, 0x79, 0x65, 0x64};

static void test_decode_every_prefix(void **state)
{
	struct felix_frame f;
	size_t len, need;
	char err[200];
	for (len = 0; len < sizeof keyed; len++) {
		need = 0;
		assert_int_equal(
		    felix_frame_decode(keyed, len,
		                       FELIX_FRAME_DEFAULT_MAX_PAYLOAD, &f,
		                       &need, err, sizeof err),
		    FELIX_FRAME_NEED_MORE);
		assert_int_equal(need, len < 12 ? 12 : sizeof keyed);
	}
	assert_int_equal(felix_frame_decode(keyed, sizeof keyed,
	                                    FELIX_FRAME_DEFAULT_MAX_PAYLOAD, &f,
	                                    NULL, err, sizeof err),
	                 FELIX_FRAME_COMPLETE);
	assert_int_equal(f.header.magic, FELIX_FRAME_MAGIC);
	assert_int_equal(f.header.version, 1);
	assert_int_equal(f.header.flags, 0x0049);
	assert_int_equal(f.header.length, 0x31);
	assert_int_equal(f.kind, FELIX_FRAME_PUBLISH_BATCH);
	assert_ptr_equal(f.payload, keyed + 12);
	assert_int_equal(f.frame_len, sizeof keyed);
}

static void test_decode_back_to_back(void **state)
{
	uint8_t two[2 * sizeof keyed + 5];
	struct felix_frame f;
	size_t off = 0, n = 0;
	memcpy(two, keyed, sizeof keyed);
	memcpy(two + sizeof keyed, keyed, sizeof keyed);
	memcpy(two + 2 * sizeof keyed, "FLX1\x00", 5);
	while (felix_frame_decode(two + off, sizeof two - off, 1024, &f, NULL,
	                          NULL, 0) == FELIX_FRAME_COMPLETE) {
		off += f.frame_len;
		n++;
	}
	assert_int_equal(n, 2);
	assert_int_equal(off, 2 * sizeof keyed);
}

static void expect_decode_error(const uint8_t *buf, size_t len, uint32_t max,
                                const char *msg)
{
	struct felix_frame f;
	char err[200] = "";
	assert_int_equal(
	    felix_frame_decode(buf, len, max, &f, NULL, err, sizeof err),
	    FELIX_FRAME_ERROR);
	assert_string_equal(err, msg);
}

static void test_decode_early_errors(void **state)
{
	/* Each error is reported as soon as the offending byte arrives. */
	expect_decode_error((const uint8_t *)"G", 1, 100,
	                    "bad frame magic: byte 0 is 0x47, expected 0x46 "
	                    "(\"FLX1\")");
	expect_decode_error((const uint8_t *)"FLX2", 4, 100,
	                    "bad frame magic: byte 3 is 0x32, expected 0x31 "
	                    "(\"FLX1\")");
	expect_decode_error((const uint8_t *)"GET / HTTP/1.1\r\n", 16, 100,
	                    "bad frame magic: byte 0 is 0x47, expected 0x46 "
	                    "(\"FLX1\")");
	expect_decode_error((const uint8_t *)"FLX1\x00\x02", 6, 100,
	                    "unsupported frame version 2 (expected 1)");
	expect_decode_error((const uint8_t *)"FLX1\x00\x00", 6, 100,
	                    "unsupported frame version 0 (expected 1)");
	expect_decode_error((const uint8_t *)"FLX1\x00\x01\x01\x00", 8, 100,
	                    "frame flags 0x0100 carry unknown bits 0x0100");
	expect_decode_error((const uint8_t *)"FLX1\x00\x01\x00\x08", 8, 100,
	                    "frame flags 0x0008: 0x0008 (publish acked) "
	                    "without 0x0001 (publish batch)");
	expect_decode_error((const uint8_t *)"FLX1\x00\x01\x00\x00\x00\x00\x00"
	                                     "\x65",
	                    12, 100,
	                    "frame payload of 101 bytes exceeds the limit of "
	                    "100");
	expect_decode_error((const uint8_t *)"FLX1\x00\x01\x00\x00\xff\xff\xff"
	                                     "\xff",
	                    12, FELIX_FRAME_DEFAULT_MAX_PAYLOAD,
	                    "frame payload of 4294967295 bytes exceeds the "
	                    "limit of 4194304");
}

static void test_decode_limits(void **state)
{
	uint8_t buf[12 + 100];
	struct felix_frame f;
	size_t need = 0;
	felix_frame_header_encode(0, 100, buf);
	memset(buf + 12, 'x', 100);
	assert_int_equal(
	    felix_frame_decode(buf, sizeof buf, 100, &f, NULL, NULL, 0),
	    FELIX_FRAME_COMPLETE);
	assert_int_equal(
	    felix_frame_decode(buf, sizeof buf, 99, &f, NULL, NULL, 0),
	    FELIX_FRAME_ERROR);
	/* A full-size frame announces its whole size at once. */
	felix_frame_header_encode(0, UINT32_MAX, buf);
	assert_int_equal(
	    felix_frame_decode(buf, 12, UINT32_MAX, &f, &need, NULL, 0),
	    FELIX_FRAME_NEED_MORE);
	assert_int_equal(need, (size_t)12 + UINT32_MAX);
	/* An empty payload is a whole frame. */
	felix_frame_header_encode(FELIX_FLAG_PUBLISH_ACK, 0, buf);
	assert_int_equal(felix_frame_decode(buf, 12, 0, &f, NULL, NULL, 0),
	                 FELIX_FRAME_COMPLETE);
	assert_int_equal(f.frame_len, 12);
	assert_int_equal(f.kind, FELIX_FRAME_PUBLISH_ACK);
}

static void test_encode(void **state)
{
	uint8_t h[12];
	struct wbuf b;
	size_t at;
	felix_frame_header_encode(0x0049, 0x31, h);
	assert_memory_equal(h, keyed, 12);

	wbuf_init(&b);
	assert_int_equal(
	    felix_frame_encode(&b, 0x0049, keyed + 12, sizeof keyed - 12), 0);
	assert_int_equal(b.len, sizeof keyed);
	assert_memory_equal(b.data, keyed, sizeof keyed);
	/* Invalid flags are refused and nothing is written. */
	assert_int_equal(felix_frame_encode(&b, 0x0008, NULL, 0), -1);
	assert_int_equal(felix_frame_encode(&b, 0x0100, NULL, 0), -1);
	assert_int_equal(b.len, sizeof keyed);

	wbuf_reset(&b);
	at = felix_frame_begin(&b, 0x0049);
	wbuf_append(&b, keyed + 12, sizeof keyed - 12);
	assert_int_equal(felix_frame_finish(&b, at), 0);
	assert_int_equal(b.len, sizeof keyed);
	assert_memory_equal(b.data, keyed, sizeof keyed);
	wbuf_free(&b);
}

static void test_wbuf(void **state)
{
	struct wbuf b;
	uint8_t *p;
	int i;
	wbuf_init(&b);
	assert_int_equal(wbuf_append(&b, NULL, 0), 0);
	for (i = 0; i < 10000; i++) {
		assert_int_equal(wbuf_put_u8(&b, (uint8_t)i), 0);
	}
	assert_int_equal(b.len, 10000);
	assert_int_equal(b.data[9999], (uint8_t)9999);
	wbuf_reset(&b);
	assert_int_equal(wbuf_put_u16(&b, 0x0102), 0);
	assert_int_equal(wbuf_put_u32(&b, 0x03040506), 0);
	assert_int_equal(wbuf_put_u64(&b, 0x0708090a0b0c0d0eull), 0);
	assert_int_equal(b.len, 14);
	assert_int_equal(wire_load_u16(b.data), 0x0102);
	assert_int_equal(wire_load_u32(b.data + 2), 0x03040506);
	assert_true(wire_load_u64(b.data + 6) == 0x0708090a0b0c0d0eull);
	p = wbuf_extend(&b, 2);
	assert_non_null(p);
	assert_int_equal(b.len, 16);
	/* An impossible reservation fails and sticks. */
	assert_int_equal(wbuf_reserve(&b, SIZE_MAX), -1);
	assert_true(b.oom);
	assert_int_equal(wbuf_put_u8(&b, 1), -1);
	wbuf_free(&b);
	assert_null(b.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flags_all_values),
	    cmocka_unit_test(test_flags_messages),
	    cmocka_unit_test(test_decode_every_prefix),
	    cmocka_unit_test(test_decode_back_to_back),
	    cmocka_unit_test(test_decode_early_errors),
	    cmocka_unit_test(test_decode_limits),
	    cmocka_unit_test(test_encode),
	    cmocka_unit_test(test_wbuf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
