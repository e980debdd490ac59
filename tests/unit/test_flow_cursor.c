/* The FLOW.QUERY cursor codec (flow/flow_cursor.h): round trip, and a
 * distinct status for every way a cursor can be wrong: not a cursor,
 * too large, forged (another key), altered (any byte flipped), issued
 * for another query, expired. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "flow/flow_cursor.h"
#include "wire/base64url.h"

static const uint8_t key[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t nonce[12] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};

static void make(const uint8_t *fp, const char *resume, uint64_t now,
                 struct wbuf *out)
{
	wbuf_init(out);
	assert_int_equal(flow_cursor_encode(key, nonce, fp, now, 300000,
	                                    (const uint8_t *)resume,
	                                    strlen(resume), out),
	                 0);
}

static enum flow_cursor_status dec(const uint8_t *k, const struct wbuf *t,
                                   const uint8_t *fp, uint64_t now,
                                   char *resume)
{
	uint8_t r[FLOW_CURSOR_RESUME_MAX + 1];
	size_t rl;
	enum flow_cursor_status st = flow_cursor_decode(
	    k, (const char *)t->data, t->len, fp, now, r, &rl);
	if (resume != NULL) {
		memcpy(resume, r, rl);
		resume[rl] = '\0';
	}
	return st;
}

static void test_round_trip(void **state)
{
	uint8_t fp[32];
	struct wbuf t;
	char resume[FLOW_CURSOR_RESUME_MAX + 1];
	(void)state;

	flow_cursor_fingerprint("FROM runs WHERE ...", 19, fp);
	make(fp, "G\x48resume-key\xff", 1000, &t);
	assert_true(t.len >= FLOW_CURSOR_MIN_BYTES &&
	            t.len <= FLOW_CURSOR_MAX_BYTES);
	assert_memory_equal(t.data, "fqc1_", 5);
	assert_int_equal(dec(key, &t, fp, 1001, resume), FLOW_CURSOR_OK);
	assert_string_equal(resume, "G\x48resume-key\xff");
	/* The largest resume key still fits the token limit. */
	{
		char big[FLOW_CURSOR_RESUME_MAX + 1];
		struct wbuf b;
		memset(big, 'k', FLOW_CURSOR_RESUME_MAX);
		big[FLOW_CURSOR_RESUME_MAX] = '\0';
		make(fp, big, 1000, &b);
		assert_true(b.len <= FLOW_CURSOR_MAX_BYTES);
		assert_int_equal(dec(key, &b, fp, 1001, NULL), FLOW_CURSOR_OK);
		wbuf_free(&b);
		wbuf_init(&b);
		assert_int_equal(flow_cursor_encode(
		                     key, nonce, fp, 0, 1, (const uint8_t *)big,
		                     FLOW_CURSOR_RESUME_MAX + 1, &b),
		                 -1);
		wbuf_free(&b);
	}
	wbuf_free(&t);
}

static void test_errors(void **state)
{
	uint8_t fp[32], other_fp[32], other_key[32];
	struct wbuf t, x;
	(void)state;

	flow_cursor_fingerprint("q1", 2, fp);
	flow_cursor_fingerprint("q2", 2, other_fp);
	memcpy(other_key, key, 32);
	other_key[0] ^= 1;
	make(fp, "k", 1000, &t);

	/* Expired at exactly issue + ttl. */
	assert_int_equal(dec(key, &t, fp, 1000 + 299999, NULL), FLOW_CURSOR_OK);
	assert_int_equal(dec(key, &t, fp, 1000 + 300000, NULL),
	                 FLOW_CURSOR_EXPIRED);
	/* Another query's parameters. */
	assert_int_equal(dec(key, &t, other_fp, 1001, NULL),
	                 FLOW_CURSOR_MISMATCH);
	/* Another instance's key: forged. */
	assert_int_equal(dec(other_key, &t, fp, 1001, NULL),
	                 FLOW_CURSOR_FORGED);
	/* Every altered byte of the payload fails authentication (or is
	 * no longer a cursor). */
	{
		uint8_t raw[FLOW_CURSOR_MAX_BYTES];
		size_t rl;
		assert_int_equal(base64url_decode((const char *)t.data + 5,
		                                  t.len - 5, raw, &rl),
		                 0);
		for (size_t i = 0; i < rl; i++) {
			enum flow_cursor_status st;
			raw[i] ^= 0x20;
			wbuf_init(&x);
			wbuf_append(&x, "fqc1_", 5);
			base64url_encode(&x, raw, rl);
			st = dec(key, &x, fp, 1001, NULL);
			assert_true(i == 0 ? st == FLOW_CURSOR_MALFORMED
			                   : st == FLOW_CURSOR_FORGED);
			wbuf_free(&x);
			raw[i] ^= 0x20;
		}
		/* Truncated. */
		wbuf_init(&x);
		wbuf_append(&x, "fqc1_", 5);
		base64url_encode(&x, raw, rl - 1);
		assert_int_equal(dec(key, &x, fp, 1001, NULL),
		                 FLOW_CURSOR_FORGED);
		wbuf_free(&x);
	}
	/* Not cursors. */
	{
		static const char *const bad[] = {
		    "", "fqc1_", "fqc1_AAAA", "fqc2_AAAAAAAAAAAAAAAAAAAAAAAA",
		    "fqc1_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			uint8_t r[8];
			size_t rl;
			assert_int_equal(flow_cursor_decode(key, bad[i],
			                                    strlen(bad[i]), fp,
			                                    0, r, &rl),
			                 FLOW_CURSOR_MALFORMED);
		}
	}
	/* Too large. */
	{
		static char big[FLOW_CURSOR_MAX_BYTES + 2];
		uint8_t r[8];
		size_t rl;
		memset(big, 'A', sizeof big - 1);
		memcpy(big, "fqc1_", 5);
		assert_int_equal(
		    flow_cursor_decode(key, big, sizeof big - 1, fp, 0, r, &rl),
		    FLOW_CURSOR_TOO_LARGE);
	}
	/* Distinct, fixed texts. */
	assert_string_equal(flow_cursor_code(FLOW_CURSOR_EXPIRED),
	                    "query_cursor_expired");
	assert_string_equal(flow_cursor_code(FLOW_CURSOR_FORGED),
	                    "query_cursor_invalid");
	assert_string_equal(flow_cursor_code(FLOW_CURSOR_TOO_LARGE),
	                    "query_cursor_too_large");
	for (int a = FLOW_CURSOR_MALFORMED; a <= FLOW_CURSOR_EXPIRED; a++) {
		for (int b = a + 1; b <= FLOW_CURSOR_EXPIRED; b++) {
			assert_string_not_equal(flow_cursor_detail(a),
			                        flow_cursor_detail(b));
		}
	}
	wbuf_free(&t);
}

/* A token made by another AES-256-GCM implementation (Python's
 * cryptography package) from the format in flow_cursor.h. */
static void test_vector(void **state)
{
	static const char tok[] =
	    "fqc1_AQEAAAAAAAAAAAAAABPQvwt_kMEcikUK7AkEUED_"
	    "aUlpAMc2ienPLUpaFLQVzuDhoK7vrWwzJoNEHjsWFbi5XCnUGjNJUQ7gp0TmRP0r4X"
	    "bfSXgvexPXSCs27Gc";
	uint8_t k[32] = {7}, fp[32], r[FLOW_CURSOR_RESUME_MAX];
	size_t rl;
	(void)state;

	flow_cursor_fingerprint("fuzz", 4, fp);
	assert_int_equal(
	    flow_cursor_decode(k, tok, strlen(tok), fp, 1000, r, &rl),
	    FLOW_CURSOR_OK);
	assert_int_equal(rl, 11);
	assert_memory_equal(r, "\x00\x00\x00\x01\x48resume", 11);
}

/* The key id: stable, 16 hex characters, different for another key. */
static void test_key_id(void **state)
{
	uint8_t other[32];
	char a[17], b[17], c[17];
	(void)state;

	memcpy(other, key, 32);
	other[31] ^= 0x80;
	flow_cursor_key_id(key, a);
	flow_cursor_key_id(key, b);
	flow_cursor_key_id(other, c);
	assert_int_equal(strlen(a), 16);
	assert_int_equal(strspn(a, "0123456789abcdef"), 16);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_vector),
	    cmocka_unit_test(test_key_id),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
