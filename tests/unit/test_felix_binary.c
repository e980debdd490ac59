/* Felix binary payloads: bounds checks on every truncation, trailing bytes,
 * limits, bad fields, and random round trips (encode -> decode -> encode
 * gives the same bytes and fields). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/felix_test_util.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"

#define V(s) ((struct felix_view){(const uint8_t *)(s), sizeof(s) - 1})

/* Decode payload p[0..len) with the decoder its flags select. */
static int decode_any(uint16_t flags, const uint8_t *p, size_t len,
                      const struct felix_binary_limits *lim, char *err,
                      size_t errlen)
{
	enum felix_frame_kind kind;
	struct felix_publish_batch pb;
	struct felix_publish_ack a;
	struct felix_event_batch e;
	if (felix_frame_flags_check(flags, &kind, err, errlen) != 0) {
		return -1;
	}
	switch (kind) {
	case FELIX_FRAME_PUBLISH_BATCH:
		return felix_publish_batch_decode(flags, p, len, lim, &pb, err,
		                                  errlen);
	case FELIX_FRAME_PUBLISH_ACK:
		return felix_publish_ack_decode(flags, p, len, &a, err, errlen);
	case FELIX_FRAME_EVENT_BATCH:
	case FELIX_FRAME_EVENT_BATCH_SHARED:
		return felix_event_batch_decode(flags, p, len, lim, &e, err,
		                                errlen);
	default:
		return -1;
	}
}

/* Encode a few frames of each layout for the truncation tests. */
static void sample_frames(struct wbuf *out, size_t *ends, size_t *n)
{
	struct felix_view recs[3] = {V("a"), V(""), V("hello")};
	struct felix_publish_batch pb;
	struct felix_publish_ack a;
	struct felix_event_batch e;
	*n = 0;
	memset(&pb, 0, sizeof pb);
	pb.tenant_id = V("t1");
	pb.namespace = V("default");
	pb.stream = V("s1");
	for (int mode = 0; mode < 4; mode++) {
		pb.acked = mode & 1;
		pb.request_id = 77;
		pb.ack_mode = FELIX_ACK_PER_BATCH;
		pb.keyed = mode & 2;
		pb.key = V("k1");
		assert_int_equal(felix_publish_batch_encode(out, &pb, recs, 3),
		                 0);
		ends[(*n)++] = out->len;
	}
	memset(&a, 0, sizeof a);
	a.status = FELIX_ACK_STATUS_ERROR;
	a.request_id = 5;
	a.message = V("boom");
	assert_int_equal(felix_publish_ack_encode(out, &a), 0);
	ends[(*n)++] = out->len;
	a.has_owner = true;
	a.owner_node_id = V("b");
	a.has_owner_addr = true;
	a.owner_addr = V("h:1");
	a.owner_generation = 9;
	assert_int_equal(felix_publish_ack_encode(out, &a), 0);
	ends[(*n)++] = out->len;
	memset(&e, 0, sizeof e);
	for (int mode = 0; mode < 4; mode++) {
		e.shared = mode & 1;
		e.subscription_id = 3;
		e.has_base_offset = mode & 2;
		e.base_offset = 100;
		assert_int_equal(felix_event_batch_encode(out, &e, recs, 3), 0);
		ends[(*n)++] = out->len;
	}
}

static void test_every_truncation_fails(void **state)
{
	struct wbuf b;
	size_t ends[16], n, i, start = 0;
	wbuf_init(&b);
	sample_frames(&b, ends, &n);
	for (i = 0; i < n; start = ends[i++]) {
		const uint8_t *fr = b.data + start;
		uint16_t flags = wire_load_u16(fr + 6);
		const uint8_t *p = fr + 12;
		size_t len = ends[i] - start - 12, cut;
		char err[200];
		uint8_t *longer;
		assert_int_equal(
		    decode_any(flags, p, len, NULL, err, sizeof err), 0);
		for (cut = 0; cut < len; cut++) {
			err[0] = '\0';
			if (decode_any(flags, p, cut, NULL, err, sizeof err) !=
			    -1) {
				fail_msg("flags 0x%04x: %zu of %zu bytes "
				         "accepted",
				         flags, cut, len);
			}
			/* A cut inside the records may already show as
			 * a count the rest cannot hold. */
			if (strstr(err, "truncated") == NULL &&
			    strstr(err, "cannot fit") == NULL) {
				fail_msg("flags 0x%04x cut at %zu: %s", flags,
				         cut, err);
			}
		}
		/* One byte too many is an error too. */
		longer = malloc(len + 1);
		memcpy(longer, p, len);
		longer[len] = 0;
		assert_int_equal(
		    decode_any(flags, longer, len + 1, NULL, err, sizeof err),
		    -1);
		assert_non_null(strstr(err, "1 trailing bytes"));
		free(longer);
	}
	wbuf_free(&b);
}

static void expect_publish_error(uint16_t flags, const uint8_t *p, size_t len,
                                 const struct felix_binary_limits *lim,
                                 const char *msg)
{
	struct felix_publish_batch pb;
	char err[200] = "";
	assert_int_equal(felix_publish_batch_decode(flags, p, len, lim, &pb,
	                                            err, sizeof err),
	                 -1);
	assert_string_equal(err, msg);
}

static void test_publish_errors(void **state)
{
	/* acked: request_id 1, ack_mode 3 */
	static const uint8_t bad_mode[] = {0, 0, 0, 0, 0, 0, 0, 1, 3};
	static const uint8_t zero_mode[] = {0, 0, 0, 0, 0, 0, 0, 1, 0};
	/* tenant "\xff" */
	static const uint8_t bad_utf8[] = {0, 1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0};
	/* key "\xff" (keys are bytes), tenant "", ns "", stream "", 0 recs */
	static const uint8_t binary_key[] = {0, 1, 0xff, 0, 0, 0, 0,
	                                     0, 0, 0,    0, 0, 0};
	/* 3 records claimed, one present */
	static const uint8_t many[] = {0, 0, 0, 0, 0, 0,   0, 0, 0,
	                               3, 0, 0, 0, 1, 'x', 0, 0};
	/* 2 records of 3 bytes */
	static const uint8_t two[] = {0,   0, 0, 0, 0, 0,   0,   0,
	                              0,   2, 0, 0, 0, 3,   'a', 'b',
	                              'c', 0, 0, 0, 3, 'd', 'e', 'f'};
	struct felix_binary_limits lim = {1, 3};
	struct felix_publish_batch pb;
	uint64_t rid = 0;

	expect_publish_error(0x0009, bad_mode, sizeof bad_mode, NULL,
	                     "publish batch: ack_mode 3 is neither 1 "
	                     "(per_message) nor 2 (per_batch)");
	expect_publish_error(0x0009, zero_mode, sizeof zero_mode, NULL,
	                     "publish batch: ack_mode 0 is neither 1 "
	                     "(per_message) nor 2 (per_batch)");
	expect_publish_error(0x0001, bad_utf8, sizeof bad_utf8, NULL,
	                     "publish batch: tenant_id is not valid UTF-8");
	assert_int_equal(felix_publish_batch_decode(0x0041, binary_key,
	                                            sizeof binary_key, NULL,
	                                            &pb, NULL, 0),
	                 0);
	assert_true(pb.keyed);
	assert_int_equal(pb.key.len, 1);
	assert_int_equal(pb.key.data[0], 0xff);
	expect_publish_error(0x0001, many, sizeof many, NULL,
	                     "publish batch: 3 records cannot fit in the 7 "
	                     "bytes left");
	expect_publish_error(0x0001, two, sizeof two, &lim,
	                     "publish batch: 2 records exceed the limit of 1");
	lim.max_records = 2;
	lim.max_record_len = 2;
	expect_publish_error(0x0001, two, sizeof two, &lim,
	                     "publish batch: record 0 is 3 bytes, above the "
	                     "limit of 2");
	lim.max_record_len = 3;
	assert_int_equal(felix_publish_batch_decode(0x0001, two, sizeof two,
	                                            &lim, &pb, NULL, 0),
	                 0);
	assert_int_equal(pb.records.count, 2);
	/* Wrong layout for this decoder. */
	expect_publish_error(0x0010, two, sizeof two, NULL,
	                     "publish batch: frame flags 0x0010 are not this "
	                     "layout");
	expect_publish_error(0x0008, two, sizeof two, NULL,
	                     "frame flags 0x0008: 0x0008 (publish acked) "
	                     "without 0x0001 (publish batch)");
	/* Peeking needs the acked prefix. */
	assert_int_equal(felix_publish_batch_peek_request_id(
	                     0x0009, bad_mode, sizeof bad_mode, &rid),
	                 0);
	assert_int_equal(rid, 1);
	assert_int_equal(
	    felix_publish_batch_peek_request_id(0x0001, two, sizeof two, &rid),
	    -1);
	assert_int_equal(
	    felix_publish_batch_peek_request_id(0x0009, bad_mode, 7, &rid), -1);
}

static void test_ack_errors(void **state)
{
	static const uint8_t bad_status[] = {2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
	/* owner with empty addr */
	static const uint8_t owner[] = {0, 0,   0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
	                                1, 'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
	static const uint8_t bad_msg[] = {1, 0, 0, 0, 0, 0,
	                                  0, 0, 1, 0, 1, 0xc0};
	struct felix_publish_ack a;
	struct wbuf b;
	char err[200] = "";
	assert_int_equal(felix_publish_ack_decode(0x0010, bad_status,
	                                          sizeof bad_status, &a, err,
	                                          sizeof err),
	                 -1);
	assert_string_equal(err, "publish ack: status 2 is neither 0 (ok) nor "
	                         "1 (error)");
	assert_int_equal(felix_publish_ack_decode(0x0010, bad_msg,
	                                          sizeof bad_msg, &a, err,
	                                          sizeof err),
	                 -1);
	assert_string_equal(err, "publish ack: message is not valid UTF-8");
	/* Without 0x0080 the owner is trailing garbage. */
	assert_int_equal(felix_publish_ack_decode(0x0010, owner, sizeof owner,
	                                          &a, err, sizeof err),
	                 -1);
	assert_string_equal(err, "publish ack: 13 trailing bytes after the "
	                         "body");
	assert_int_equal(felix_publish_ack_decode(0x0090, owner, sizeof owner,
	                                          &a, err, sizeof err),
	                 0);
	assert_true(a.has_owner);
	assert_false(a.has_owner_addr);
	assert_int_equal(a.owner_generation, 7);
	/* A present-but-empty address encodes as absent. */
	a.has_owner_addr = true;
	wbuf_init(&b);
	assert_int_equal(felix_publish_ack_encode(&b, &a), 0);
	assert_int_equal(b.len, 12 + sizeof owner);
	assert_memory_equal(b.data + 12, owner, sizeof owner);
	a.status = 5;
	assert_int_equal(felix_publish_ack_encode(&b, &a), -1);
	assert_int_equal(b.len, 12 + sizeof owner);
	wbuf_free(&b);
}

static void test_event_errors(void **state)
{
	static const uint8_t shared[] = {0, 0, 0, 1, 0, 0, 0, 1, 'x'};
	struct felix_event_batch e;
	char err[200] = "";
	assert_int_equal(felix_event_batch_decode(0x0004, shared, sizeof shared,
	                                          NULL, &e, err, sizeof err),
	                 0);
	assert_true(e.shared);
	assert_false(e.has_base_offset);
	/* The same bytes as a legacy batch lack a subscription id. */
	assert_int_equal(felix_event_batch_decode(0x0002, shared, sizeof shared,
	                                          NULL, &e, err, sizeof err),
	                 -1);
	assert_string_equal(err, "event batch: truncated at record count "
	                         "(need 4 bytes, 1 left)");
	assert_int_equal(felix_event_batch_decode(0x0001, shared, sizeof shared,
	                                          NULL, &e, err, sizeof err),
	                 -1);
	assert_string_equal(err, "event batch: frame flags 0x0001 are not "
	                         "this layout");
}

static void test_encode_limits(void **state)
{
	struct felix_publish_batch pb;
	struct wbuf b;
	uint8_t *big = calloc(70000, 1);
	struct felix_view rec = V("x");
	memset(&pb, 0, sizeof pb);
	pb.tenant_id.data = big;
	pb.tenant_id.len = 65536;
	wbuf_init(&b);
	wbuf_append(&b, "abc", 3);
	assert_int_equal(felix_publish_batch_encode(&b, &pb, &rec, 1), -1);
	assert_int_equal(b.len, 3);
	pb.tenant_id.len = 65535;
	assert_int_equal(felix_publish_batch_encode(&b, &pb, &rec, 1), 0);
	pb.acked = true;
	pb.ack_mode = FELIX_ACK_NONE;
	assert_int_equal(felix_publish_batch_encode(&b, &pb, &rec, 1), -1);
	wbuf_free(&b);
	free(big);
}

/* ---- random round trips ---- */

static struct felix_view rand_view(struct ftu_rng *r, uint8_t *pool, size_t max,
                                   bool utf8)
{
	struct felix_view v;
	size_t i;
	v.len = (size_t)ftu_below(r, max + 1);
	for (i = 0; i < v.len; i++) {
		pool[i] = utf8 ? (uint8_t)('a' + ftu_below(r, 26))
		               : (uint8_t)ftu_next(r);
	}
	v.data = pool;
	return v;
}

static bool view_eq(struct felix_view a, struct felix_view b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

static void check_records(const struct felix_records *r,
                          const struct felix_view *want, uint32_t n)
{
	struct felix_records_iter it;
	struct felix_view v;
	uint32_t i = 0;
	assert_int_equal(r->count, n);
	felix_records_iter_init(&it, r);
	while (felix_records_next(&it, &v)) {
		assert_true(view_eq(v, want[i]));
		i++;
	}
	assert_int_equal(i, n);
}

/* Decode the frame at b[0..len) and check it re-encodes identically. */
static void roundtrip_frame(const uint8_t *fr, size_t len, struct wbuf *tmp,
                            const struct felix_view *recs, uint32_t nrecs,
                            const void *want)
{
	struct felix_frame f;
	char err[200] = "";
	assert_int_equal(
	    felix_frame_decode(fr, len, UINT32_MAX, &f, NULL, err, sizeof err),
	    FELIX_FRAME_COMPLETE);
	assert_int_equal(f.frame_len, len);
	wbuf_reset(tmp);
	switch (f.kind) {
	case FELIX_FRAME_PUBLISH_BATCH: {
		const struct felix_publish_batch *w = want;
		struct felix_publish_batch pb;
		if (felix_publish_batch_decode(f.header.flags, f.payload,
		                               f.header.length, NULL, &pb, err,
		                               sizeof err) != 0) {
			fail_msg("%s", err);
		}
		assert_int_equal(pb.acked, w->acked);
		if (w->acked) {
			assert_true(pb.request_id == w->request_id);
			assert_int_equal(pb.ack_mode, w->ack_mode);
		}
		assert_int_equal(pb.keyed, w->keyed);
		if (w->keyed) {
			assert_true(view_eq(pb.key, w->key));
		}
		assert_true(view_eq(pb.tenant_id, w->tenant_id));
		assert_true(view_eq(pb.namespace, w->namespace));
		assert_true(view_eq(pb.stream, w->stream));
		check_records(&pb.records, recs, nrecs);
		assert_int_equal(
		    felix_publish_batch_encode(tmp, &pb, recs, nrecs), 0);
		break;
	}
	case FELIX_FRAME_PUBLISH_ACK: {
		const struct felix_publish_ack *w = want;
		struct felix_publish_ack a;
		if (felix_publish_ack_decode(f.header.flags, f.payload,
		                             f.header.length, &a, err,
		                             sizeof err) != 0) {
			fail_msg("%s", err);
		}
		assert_int_equal(a.status, w->status);
		assert_true(a.request_id == w->request_id);
		assert_true(view_eq(a.message, w->message));
		assert_int_equal(a.has_owner, w->has_owner);
		if (w->has_owner) {
			bool addr = w->has_owner_addr && w->owner_addr.len > 0;
			assert_true(view_eq(a.owner_node_id, w->owner_node_id));
			assert_int_equal(a.has_owner_addr, addr);
			if (addr) {
				assert_true(
				    view_eq(a.owner_addr, w->owner_addr));
			}
			assert_true(a.owner_generation == w->owner_generation);
		}
		assert_int_equal(felix_publish_ack_encode(tmp, &a), 0);
		break;
	}
	default: {
		const struct felix_event_batch *w = want;
		struct felix_event_batch e;
		if (felix_event_batch_decode(f.header.flags, f.payload,
		                             f.header.length, NULL, &e, err,
		                             sizeof err) != 0) {
			fail_msg("%s", err);
		}
		assert_int_equal(e.shared, w->shared);
		if (!w->shared) {
			assert_true(e.subscription_id == w->subscription_id);
		}
		assert_int_equal(e.has_base_offset, w->has_base_offset);
		if (w->has_base_offset) {
			assert_true(e.base_offset == w->base_offset);
		}
		check_records(&e.records, recs, nrecs);
		assert_int_equal(felix_event_batch_encode(tmp, &e, recs, nrecs),
		                 0);
		break;
	}
	}
	assert_int_equal(tmp->len, len);
	assert_memory_equal(tmp->data, fr, len);
}

static void test_random_roundtrip(void **state)
{
	struct ftu_rng r = {20240601};
	static uint8_t pools[8][300];
	static uint8_t recpool[16][64];
	struct felix_view recs[16];
	struct wbuf b, tmp;
	int iter;
	wbuf_init(&b);
	wbuf_init(&tmp);
	for (iter = 0; iter < 3000; iter++) {
		uint32_t nrecs = (uint32_t)ftu_below(&r, 17), i;
		for (i = 0; i < nrecs; i++) {
			recs[i] = rand_view(&r, recpool[i], 64, false);
		}
		wbuf_reset(&b);
		switch (ftu_below(&r, 3)) {
		case 0: {
			struct felix_publish_batch pb;
			memset(&pb, 0, sizeof pb);
			pb.acked = ftu_below(&r, 2);
			pb.request_id = ftu_u64(&r);
			pb.ack_mode = ftu_below(&r, 2) ? FELIX_ACK_PER_MESSAGE
			                               : FELIX_ACK_PER_BATCH;
			pb.keyed = ftu_below(&r, 2);
			pb.key = rand_view(&r, pools[0], 40, false);
			pb.tenant_id = rand_view(&r, pools[1], 20, true);
			pb.namespace = rand_view(&r, pools[2], 20, true);
			pb.stream = rand_view(&r, pools[3], 20, true);
			assert_int_equal(
			    felix_publish_batch_encode(&b, &pb, recs, nrecs),
			    0);
			roundtrip_frame(b.data, b.len, &tmp, recs, nrecs, &pb);
			break;
		}
		case 1: {
			struct felix_publish_ack a;
			memset(&a, 0, sizeof a);
			a.status = (uint8_t)ftu_below(&r, 2);
			a.request_id = ftu_u64(&r);
			a.message = rand_view(&r, pools[0], 80, true);
			a.has_owner = ftu_below(&r, 2);
			a.owner_node_id = rand_view(&r, pools[1], 20, true);
			a.has_owner_addr = ftu_below(&r, 2);
			a.owner_addr = rand_view(&r, pools[2], 20, true);
			a.owner_generation = ftu_u64(&r);
			assert_int_equal(felix_publish_ack_encode(&b, &a), 0);
			roundtrip_frame(b.data, b.len, &tmp, NULL, 0, &a);
			break;
		}
		default: {
			struct felix_event_batch e;
			memset(&e, 0, sizeof e);
			e.shared = ftu_below(&r, 2);
			e.subscription_id = ftu_u64(&r);
			e.has_base_offset = ftu_below(&r, 2);
			e.base_offset = ftu_u64(&r);
			assert_int_equal(
			    felix_event_batch_encode(&b, &e, recs, nrecs), 0);
			roundtrip_frame(b.data, b.len, &tmp, recs, nrecs, &e);
			break;
		}
		}
	}
	wbuf_free(&b);
	wbuf_free(&tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_truncation_fails),
	    cmocka_unit_test(test_publish_errors),
	    cmocka_unit_test(test_ack_errors),
	    cmocka_unit_test(test_event_errors),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_random_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
