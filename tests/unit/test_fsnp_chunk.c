/* Unit tests for wire/fsnp_chunk and wire/fsnp_compress: splitting, the
 * reassembler's bounds, zlib with a size cap, and compress -> split ->
 * reassemble -> decompress round trips with a lowered frame limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/fsnp_test_util.h"
#include "wire/fsnp_chunk.h"
#include "wire/fsnp_compress.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_opcode.h"

static const struct fsnp_chunk_limits default_limits = {
    1u << 20, /* max_message_bytes */
    4,        /* max_streams */
    1u << 20, /* max_pending_bytes */
    15000,    /* timeout_ms */
};

static struct fsnp_frame frame(uint32_t lane, uint64_t rid, uint8_t flags,
                               const void *body, uint32_t len)
{
	struct fsnp_frame f;
	f.h.dir = FSNP_DIR_REQUEST;
	f.h.flags = flags;
	f.h.lane_id = lane;
	f.h.opcode = FSNP_OP_SET;
	f.h.request_id = rid;
	f.h.body_len = len;
	f.body = body;
	return f;
}

static void random_fill(struct fsnp_rng *r, uint8_t *p, size_t n, bool text)
{
	for (size_t i = 0; i < n; i++) {
		/* Text-like data compresses, like real bodies. */
		p[i] = text ? (uint8_t)('a' + fsnp_rng_below(r, 4))
		            : (uint8_t)fsnp_rng_next(r);
	}
}

static void test_chunk_size(void **state)
{
	(void)state;
	assert_int_equal(fsnp_chunk_size(0, 1000), 1000);
	assert_int_equal(fsnp_chunk_size(100, 1000), 100);
	assert_int_equal(fsnp_chunk_size(5000, 1000), 1000);
	assert_int_equal(fsnp_chunk_size(0, 0), FSNP_MAX_FRAME_BYTES_LIMIT);
	assert_int_equal(fsnp_chunk_size(0, UINT32_MAX),
	                 FSNP_MAX_FRAME_BYTES_LIMIT);
	assert_int_equal(fsnp_chunk_frame_count(0, 4), 1);
	assert_int_equal(fsnp_chunk_frame_count(4, 4), 1);
	assert_int_equal(fsnp_chunk_frame_count(5, 4), 2);
	assert_int_equal(fsnp_chunk_frame_count(10, 0), 1);
}

/* Split flags: MORE_CHUNKS on every frame but the last, COMPRESSED only on
 * the last, other flags on all. */
static void test_split_flags(void **state)
{
	struct fsnp_header h = {FSNP_DIR_RESPONSE,
	                        FSNP_FLAG_CUSTOM | FSNP_FLAG_COMPRESSED,
	                        3,
	                        FSNP_OP_FLOW_QUERY,
	                        48,
	                        0};
	struct wbuf b;
	const uint8_t body[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	(void)state;
	wbuf_init(&b);
	assert_int_equal(fsnp_chunk_split(&b, &h, body, sizeof body, 4), 0);
	size_t off = 0;
	const uint32_t sizes[3] = {4, 4, 2};
	for (int i = 0; i < 3; i++) {
		struct fsnp_frame f;
		size_t flen;
		assert_int_equal(fsnp_frame_decode(b.data + off, b.len - off,
		                                   FSNP_DIR_RESPONSE, 4, &f,
		                                   &flen),
		                 0);
		assert_int_equal(f.h.body_len, sizes[i]);
		assert_memory_equal(f.body, body + 4 * i, sizes[i]);
		assert_true(f.h.flags & FSNP_FLAG_CUSTOM);
		assert_int_equal(f.h.lane_id, 3);
		assert_int_equal(f.h.request_id, 48);
		if (i < 2) {
			assert_true(f.h.flags & FSNP_FLAG_MORE_CHUNKS);
			assert_false(f.h.flags & FSNP_FLAG_COMPRESSED);
		} else {
			assert_false(f.h.flags & FSNP_FLAG_MORE_CHUNKS);
			assert_true(f.h.flags & FSNP_FLAG_COMPRESSED);
		}
		off += flen;
	}
	assert_int_equal(off, b.len);

	/* An empty body is one empty frame; a fitting body one frame. */
	wbuf_reset(&b);
	h.flags = 0;
	assert_int_equal(fsnp_chunk_split(&b, &h, NULL, 0, 4), 0);
	assert_int_equal(b.len, FSNP_HEADER_SIZE);
	wbuf_reset(&b);
	assert_int_equal(fsnp_chunk_split(&b, &h, body, 4, 4), 0);
	assert_int_equal(b.len, FSNP_HEADER_SIZE + 4);
	assert_int_equal(b.data[5], 0);
	wbuf_free(&b);
}

/* Split with a lowered frame size, decode each frame, reassemble. */
static void test_reassemble_round_trip(void **state)
{
	struct fsnp_rng r;
	struct fsnp_chunk_asm a;
	struct wbuf b;
	uint8_t *body = malloc(10000);
	(void)state;
	assert_non_null(body);
	fsnp_rng_seed(&r, 42);
	random_fill(&r, body, 10000, false);
	fsnp_chunk_init(&a, &default_limits);
	wbuf_init(&b);
	struct fsnp_header h = {
	    FSNP_DIR_REQUEST, FSNP_FLAG_CUSTOM, 2, FSNP_OP_MSET, 9, 0};
	uint32_t chunk = fsnp_chunk_size(0, 333);
	assert_int_equal(fsnp_chunk_split(&b, &h, body, 10000, chunk), 0);

	size_t off = 0;
	size_t frames = 0;
	bool ready = false;
	struct fsnp_message m;
	while (off < b.len) {
		struct fsnp_frame f;
		size_t flen;
		assert_int_equal(fsnp_frame_decode(b.data + off, b.len - off,
		                                   FSNP_DIR_REQUEST, 333, &f,
		                                   &flen),
		                 0);
		assert_int_equal(fsnp_chunk_feed(&a, &f, 100, &m, &ready), 0);
		off += flen;
		frames++;
		if (!ready) {
			assert_int_equal(fsnp_chunk_pending_streams(&a), 1);
		}
	}
	assert_int_equal(frames, fsnp_chunk_frame_count(10000, 333));
	assert_true(ready);
	assert_non_null(m.owned);
	assert_int_equal(m.len, 10000);
	assert_int_equal(m.h.body_len, 10000);
	assert_memory_equal(m.body, body, 10000);
	assert_int_equal(m.h.flags, FSNP_FLAG_CUSTOM);
	assert_int_equal(m.h.opcode, FSNP_OP_MSET);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 0);
	assert_int_equal(fsnp_chunk_pending_bytes(&a), 0);
	fsnp_message_free(&m);
	fsnp_chunk_close(&a);
	wbuf_free(&b);
	free(body);
}

static void test_interleaved_and_passthrough(void **state)
{
	struct fsnp_chunk_asm a;
	struct fsnp_message m;
	bool ready;
	(void)state;
	fsnp_chunk_init(&a, &default_limits);

	struct fsnp_frame f = frame(1, 1, FSNP_FLAG_MORE_CHUNKS, "ab", 2);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	assert_false(ready);
	/* Same request id on another lane is another stream. */
	f = frame(2, 1, FSNP_FLAG_MORE_CHUNKS, "XY", 2);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	/* An unchunked frame passes through as a view. */
	f = frame(1, 2, 0, "solo", 4);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	assert_true(ready);
	assert_null(m.owned);
	assert_ptr_equal(m.body, f.body);
	assert_int_equal(m.len, 4);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 2);
	assert_int_equal(fsnp_chunk_pending_bytes(&a), 4);

	f = frame(2, 1, FSNP_FLAG_NO_REPLY, "Z", 1);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	assert_true(ready);
	assert_int_equal(m.len, 3);
	assert_memory_equal(m.body, "XYZ", 3);
	assert_int_equal(m.h.flags, FSNP_FLAG_NO_REPLY);
	assert_int_equal(m.h.lane_id, 2);
	fsnp_message_free(&m);

	/* An empty final chunk completes the stream. */
	f = frame(1, 1, 0, NULL, 0);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	assert_true(ready);
	assert_int_equal(m.len, 2);
	assert_memory_equal(m.body, "ab", 2);
	fsnp_message_free(&m);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 0);
	fsnp_chunk_close(&a);
}

static void test_limits(void **state)
{
	struct fsnp_chunk_limits lim = {10, 2, 12, 1000};
	struct fsnp_chunk_asm a;
	struct fsnp_message m;
	bool ready;
	uint64_t deadline;
	struct fsnp_frame f;
	(void)state;
	fsnp_chunk_init(&a, &lim);
	assert_false(fsnp_chunk_deadline(&a, &deadline));

	/* A first chunk above the message limit. */
	f = frame(1, 1, FSNP_FLAG_MORE_CHUNKS, "01234567890", 11);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready),
	                 FSNP_ERR_CHUNK_TOO_LARGE);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 0);

	/* Two streams are allowed, a third is not. */
	f = frame(1, 1, FSNP_FLAG_MORE_CHUNKS, "aaaa", 4);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 5, &m, &ready), 0);
	f = frame(1, 2, FSNP_FLAG_MORE_CHUNKS, "bbbb", 4);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 7, &m, &ready), 0);
	assert_true(fsnp_chunk_deadline(&a, &deadline));
	assert_int_equal(deadline, 1005);
	f = frame(1, 3, FSNP_FLAG_MORE_CHUNKS, "c", 1);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready),
	                 FSNP_ERR_CHUNK_STREAMS);
	assert_false(fsnp_err_is_fatal(FSNP_ERR_CHUNK_STREAMS));

	/* Pending bytes: 8 held, 12 allowed; 5 more is too many, and the
	 * offending stream is dropped. */
	f = frame(1, 1, FSNP_FLAG_MORE_CHUNKS, "aaaaa", 5);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready),
	                 FSNP_ERR_CHUNK_BYTES);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 1);
	assert_int_equal(fsnp_chunk_pending_bytes(&a), 4);
	assert_true(fsnp_chunk_deadline(&a, &deadline));
	assert_int_equal(deadline, 1007);

	/* The message limit applies to the joined body, final chunk too. */
	f = frame(1, 2, 0, "bbbbbbb", 7);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready),
	                 FSNP_ERR_CHUNK_TOO_LARGE);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 0);
	assert_int_equal(fsnp_chunk_pending_bytes(&a), 0);

	/* After an error the same key starts afresh. */
	f = frame(1, 2, FSNP_FLAG_MORE_CHUNKS, "x", 1);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	f = frame(1, 2, 0, "y", 1);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	assert_true(ready);
	assert_memory_equal(m.body, "xy", 2);
	fsnp_message_free(&m);

	/* A stream left open is freed by close. */
	f = frame(9, 9, FSNP_FLAG_MORE_CHUNKS, "zz", 2);
	assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	fsnp_chunk_close(&a);
	assert_int_equal(fsnp_chunk_pending_streams(&a), 0);
}

static void test_deflate_inflate(void **state)
{
	struct fsnp_rng r;
	struct wbuf z, out;
	uint8_t *body = malloc(50000);
	(void)state;
	assert_non_null(body);
	fsnp_rng_seed(&r, 7);
	wbuf_init(&z);
	wbuf_init(&out);
	for (size_t len = 0; len <= 50000; len = len * 3 + 1) {
		random_fill(&r, body, len, len % 2 == 0);
		wbuf_reset(&z);
		wbuf_reset(&out);
		assert_int_equal(fsnp_compress_deflate(body, len, &z), 0);
		assert_int_equal(
		    fsnp_compress_inflate(z.data, z.len, len, &out), 0);
		assert_int_equal(out.len, len);
		if (len > 0) {
			assert_memory_equal(out.data, body, len);
			/* One byte under the cap is refused. */
			wbuf_reset(&out);
			assert_int_equal(
			    fsnp_compress_inflate(z.data, z.len, len - 1, &out),
			    FSNP_ERR_INFLATE_TOO_LARGE);
			assert_int_equal(out.len, 0);
		}
	}
	free(body);
	wbuf_free(&z);
	wbuf_free(&out);
}

static void test_inflate_errors(void **state)
{
	struct wbuf z, out;
	const char *text = "hello hello hello hello";
	(void)state;
	wbuf_init(&z);
	wbuf_init(&out);
	assert_int_equal(
	    fsnp_compress_deflate((const uint8_t *)text, strlen(text), &z), 0);

	assert_int_equal(fsnp_compress_inflate(NULL, 0, 100, &out),
	                 FSNP_ERR_INFLATE_INVALID);
	/* Truncated at every length. */
	for (size_t k = 0; k < z.len; k++) {
		assert_int_equal(fsnp_compress_inflate(z.data, k, 100, &out),
		                 FSNP_ERR_INFLATE_INVALID);
		assert_int_equal(out.len, 0);
	}
	/* Garbage after the stream. */
	wbuf_put_u8(&z, 0);
	assert_int_equal(fsnp_compress_inflate(z.data, z.len, 100, &out),
	                 FSNP_ERR_INFLATE_INVALID);
	/* Not zlib at all, and a corrupt checksum. */
	assert_int_equal(
	    fsnp_compress_inflate((const uint8_t *)text, 10, 100, &out),
	    FSNP_ERR_INFLATE_INVALID);
	z.len--;
	z.data[z.len - 1] ^= 0xff;
	assert_int_equal(fsnp_compress_inflate(z.data, z.len, 100, &out),
	                 FSNP_ERR_INFLATE_INVALID);
	/* Raw deflate (no zlib header) is not accepted. */
	static const uint8_t raw[] = {0x03, 0x00};
	assert_int_equal(fsnp_compress_inflate(raw, sizeof raw, 100, &out),
	                 FSNP_ERR_INFLATE_INVALID);
	assert_int_equal(out.len, 0);
	wbuf_free(&z);
	wbuf_free(&out);
}

/* 16 MiB of zeros compress to a few KiB; with a 64 KiB cap the inflate
 * stops early and never holds much more than the cap. */
static void test_inflate_bomb(void **state)
{
	struct wbuf z, out;
	size_t big = 16u << 20;
	uint8_t *zeros = calloc(1, big);
	(void)state;
	assert_non_null(zeros);
	wbuf_init(&z);
	wbuf_init(&out);
	assert_int_equal(fsnp_compress_deflate(zeros, big, &z), 0);
	free(zeros);
	assert_true(z.len < 64 * 1024);
	assert_int_equal(fsnp_compress_inflate(z.data, z.len, 64 * 1024, &out),
	                 FSNP_ERR_INFLATE_TOO_LARGE);
	assert_int_equal(out.len, 0);
	assert_true(out.cap <= 4 * 64 * 1024);
	wbuf_free(&z);
	wbuf_free(&out);
}

/* compress -> split -> decode -> reassemble -> decompress. */
static void test_compressed_chunk_round_trip(void **state)
{
	struct fsnp_rng r;
	struct fsnp_chunk_asm a;
	struct wbuf frames;
	size_t len = 20000;
	uint8_t *body = malloc(len);
	uint32_t max_frame = 64;
	(void)state;
	assert_non_null(body);
	fsnp_rng_seed(&r, 99);
	random_fill(&r, body, len, true);
	wbuf_init(&frames);
	struct fsnp_header h = {
	    FSNP_DIR_RESPONSE, FSNP_FLAG_CUSTOM, 3, FSNP_OP_FLOW_QUERY, 49, 0};
	assert_int_equal(fsnp_compress_frames(&frames, &h, body, len, true,
	                                      fsnp_chunk_size(0, max_frame)),
	                 0);
	struct fsnp_chunk_limits lim = {(uint32_t)len, 1, len, 0};
	fsnp_chunk_init(&a, &lim);
	size_t off = 0;
	size_t count = 0;
	bool ready = false;
	struct fsnp_message m;
	while (off < frames.len) {
		struct fsnp_frame f;
		size_t flen;
		assert_int_equal(
		    fsnp_frame_decode(frames.data + off, frames.len - off,
		                      FSNP_DIR_RESPONSE, max_frame, &f, &flen),
		    0);
		assert_true(flen > 0);
		off += flen;
		count++;
		assert_int_equal((f.h.flags & FSNP_FLAG_COMPRESSED) != 0,
		                 off == frames.len);
		assert_int_equal(fsnp_chunk_feed(&a, &f, 0, &m, &ready), 0);
	}
	assert_true(count > 1);
	assert_true(ready);
	assert_true(m.h.flags & FSNP_FLAG_COMPRESSED);
	/* A cap below the body refuses it and leaves the message alone. */
	assert_int_equal(fsnp_compress_inflate_message(&m, len - 1),
	                 FSNP_ERR_INFLATE_TOO_LARGE);
	assert_true(m.h.flags & FSNP_FLAG_COMPRESSED);
	assert_int_equal(fsnp_compress_inflate_message(&m, len), 0);
	assert_int_equal(m.h.flags, FSNP_FLAG_CUSTOM);
	assert_int_equal(m.len, len);
	assert_int_equal(m.h.body_len, len);
	assert_memory_equal(m.body, body, len);
	/* Inflating an uncompressed message changes nothing. */
	assert_int_equal(fsnp_compress_inflate_message(&m, len), 0);
	assert_int_equal(m.len, len);
	fsnp_message_free(&m);
	fsnp_chunk_close(&a);

	/* Without zlib, or with an empty body, nothing is compressed. */
	wbuf_reset(&frames);
	assert_int_equal(fsnp_compress_frames(&frames, &h, body, 10, false, 0),
	                 0);
	assert_int_equal(frames.len, FSNP_HEADER_SIZE + 10);
	wbuf_reset(&frames);
	assert_int_equal(fsnp_compress_frames(&frames, &h, NULL, 0, true, 0),
	                 0);
	assert_int_equal(frames.len, FSNP_HEADER_SIZE);
	assert_false(frames.data[5] & FSNP_FLAG_COMPRESSED);
	wbuf_free(&frames);
	free(body);
}

/* An unchunked compressed frame inflates into an owned body. */
static void test_inflate_single_frame(void **state)
{
	struct wbuf z;
	struct fsnp_message m;
	const char *text = "{compressible compressible compressible}";
	(void)state;
	wbuf_init(&z);
	assert_int_equal(
	    fsnp_compress_deflate((const uint8_t *)text, strlen(text), &z), 0);
	struct fsnp_frame f =
	    frame(1, 1, FSNP_FLAG_COMPRESSED, z.data, (uint32_t)z.len);
	fsnp_message_from_frame(&m, &f);
	assert_null(m.owned);
	assert_int_equal(fsnp_compress_inflate_message(&m, 1000), 0);
	assert_non_null(m.owned);
	assert_int_equal(m.len, strlen(text));
	assert_memory_equal(m.body, text, m.len);
	fsnp_message_free(&m);
	/* Corrupt input: an error, the message untouched. */
	z.data[z.len / 2] ^= 0x55;
	fsnp_message_from_frame(&m, &f);
	int rv = fsnp_compress_inflate_message(&m, 1000);
	assert_true(rv == FSNP_ERR_INFLATE_INVALID ||
	            rv == FSNP_ERR_INFLATE_TOO_LARGE);
	assert_ptr_equal(m.body, z.data);
	wbuf_free(&z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunk_size),
	    cmocka_unit_test(test_split_flags),
	    cmocka_unit_test(test_reassemble_round_trip),
	    cmocka_unit_test(test_interleaved_and_passthrough),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_deflate_inflate),
	    cmocka_unit_test(test_inflate_errors),
	    cmocka_unit_test(test_inflate_bomb),
	    cmocka_unit_test(test_compressed_chunk_round_trip),
	    cmocka_unit_test(test_inflate_single_frame),
	};
	return cmocka_run_group_tests_name("fsnp_chunk", tests, NULL, NULL);
}
