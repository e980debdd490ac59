/* Integration: FSNP limits and options on a real lodestone started with
 * lowered limits — FERRICSTORE_NATIVE_* variables (and LODESTONE_* winning
 * over them), chunked requests and replies at a 4 KiB frame limit, zlib
 * in both directions, the in-flight window, lanes per connection,
 * maxclients, the idle timeout, the response size limit, and requirepass
 * with its smaller unauthenticated frame limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_chunk.h"
#include "wire/fsnp_compress.h"
#include "wire/fsnp_opcode.h"

#define FRAME 4096
#define MAXCLIENTS 24

static struct harness_cluster cluster;
static uint16_t port;

static int setup(void **state)
{
	static const char *const extra[] = {"--fsnp-max-frame-bytes",
	                                    "4096",
	                                    "--fsnp-compression",
	                                    "--fsnp-max-inflight-per-lane",
	                                    "2",
	                                    "--fsnp-max-lanes-per-connection",
	                                    "4",
	                                    "--maxclients",
	                                    "24",
	                                    "--fsnp-idle-timeout-ms",
	                                    "1500",
	                                    "--fsnp-max-response-bytes",
	                                    "65536",
	                                    NULL};
	(void)state;
	/* The seed's variables, and a LODESTONE_ one that wins. */
	setenv("FERRICSTORE_NATIVE_MAX_PIPELINE_COMMANDS", "33", 1);
	setenv("FERRICSTORE_NATIVE_LANE_MAX_QUEUE", "500", 1);
	setenv("LODESTONE_FSNP_LANE_MAX_QUEUE", "600", 1);
	setenv("FERRICSTORE_NATIVE_MAX_GLOBAL_BLOCKING_REQUESTS", "77", 1);
	int rv = ftc_start(&cluster, 1, extra, &port);
	unsetenv("FERRICSTORE_NATIVE_MAX_PIPELINE_COMMANDS");
	unsetenv("FERRICSTORE_NATIVE_LANE_MAX_QUEUE");
	unsetenv("LODESTONE_FSNP_LANE_MAX_QUEUE");
	unsetenv("FERRICSTORE_NATIVE_MAX_GLOBAL_BLOCKING_REQUESTS");
	return rv;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

static struct ftc_msg CALL(struct ftc *c, uint16_t op, const char *fmt, ...) {
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void
expect_error(struct ftc_msg m, uint16_t status, const char *text)
{
	char msg[512];
	assert_int_equal(m.status, status);
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

static void test_settings_from_env(void **state)
{
	struct ftc c;
	struct fsnp_val s;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	struct ftc_msg m = CALL(&c, FSNP_OP_OPTIONS, "");
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_map(&m.value, "settings", &s), 0);
	assert_int_equal(
	    ftc_map_int(&s, "FERRICSTORE_NATIVE_MAX_PIPELINE_COMMANDS"), 33);
	assert_int_equal(ftc_map_int(&s, "FERRICSTORE_NATIVE_LANE_MAX_QUEUE"),
	                 600);
	assert_int_equal(ftc_map_int(&s, "FERRICSTORE_NATIVE_MAX_GLOBAL_"
	                                 "BLOCKING_REQUESTS"),
	                 77);
	assert_int_equal(ftc_map_int(&s, "FERRICSTORE_NATIVE_MAX_FRAME_BYTES"),
	                 FRAME);
	assert_int_equal(ftc_map_int(&s, "FERRICSTORE_NATIVE_IDLE_TIMEOUT_MS"),
	                 1500);
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* A value of n bytes, compressible but not trivially. */
static char *make_value(size_t n)
{
	char *v = malloc(n + 1);
	for (size_t i = 0; i < n; i++) {
		v[i] = (char)('a' + (i * 7 + i / 13) % 26);
	}
	v[n] = '\0';
	return v;
}

/* RPUSHes n values of `size` bytes (each request below the frame limit);
 * returns the value (owned). */
static char *fill_list(struct ftc *c, const char *key, int n, size_t size)
{
	char *v = make_value(size);
	const char *vals[] = {v};
	for (int i = 0; i < n; i++) {
		struct ftc_msg m =
		    CALL(c, FSNP_OP_RPUSH, "key=s values=a", key, vals, 1);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	return v;
}

static void test_chunked(void **state)
{
	struct ftc c;
	struct wbuf body, out;
	struct ftc_msg m;
	struct fsnp_iter it;
	struct fsnp_val e;
	char *v = make_value(3500);
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	c.next_rid = 1000; /* explicit request ids below */
	/* A 3.5 kB SET sent in 1 KiB chunks. */
	ftc_body(&body, "key=s value=s", "big", v);
	struct fsnp_header h = {FSNP_DIR_REQUEST, 0, 1,
	                        FSNP_OP_SET,      1, (uint32_t)body.len};
	wbuf_init(&out);
	assert_int_equal(fsnp_chunk_split(&out, &h, body.data, body.len, 1024),
	                 0);
	assert_int_equal(ftc_send_raw(&c, out.data, out.len), 0);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, 1);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	wbuf_free(&out);
	wbuf_free(&body);
	m = CALL(&c, FSNP_OP_GET, "key=s", "big");
	assert_int_equal(m.value.as.bin.len, 3500);
	assert_memory_equal(m.value.as.bin.ptr, v, 3500);
	ftc_msg_free(&m);
	free(v);
	/* Joined chunks may not exceed max_frame_bytes either. */
	v = make_value(6000);
	ftc_body(&body, "key=s value=s", "big", v);
	h.request_id = 2;
	h.body_len = (uint32_t)body.len;
	wbuf_init(&out);
	fsnp_chunk_split(&out, &h, body.data, body.len, 1024);
	ftc_send_raw(&c, out.data, out.len);
	wbuf_free(&out);
	wbuf_free(&body);
	free(v);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, 2);
	expect_error(m, 6, "max_frame_bytes");
	/* The refused stream's later chunks are dropped quietly: the next
	 * reply is PING's. */
	m = CALL(&c, FSNP_OP_PING, "");
	assert_true(ftc_str_eq(&m.value, "PONG"));
	ftc_msg_free(&m);
	/* A reply larger than the frame limit is chunked at it. */
	v = fill_list(&c, "bigl", 6, 3000);
	m = CALL(&c, FSNP_OP_LRANGE, "key=s start=i stop=i", "bigl", (int64_t)0,
	         (int64_t)-1);
	assert_int_equal(m.status, 0);
	assert_true(m.frames >= 5);
	assert_true(m.max_frame_body <= FRAME);
	assert_int_equal(m.value.as.count, 6);
	fsnp_iter_init(&it, &m.value);
	while (fsnp_iter_next(&it, NULL, &e)) {
		assert_int_equal(e.as.bin.len, 3000);
		assert_memory_equal(e.as.bin.ptr, v, 3000);
	}
	ftc_msg_free(&m);
	free(v);
	/* An unchunked frame above the limit closes the connection. */
	v = make_value(5000);
	ftc_body(&body, "key=s value=s", "big2", v);
	ftc_send_frame(&c, 1, FSNP_OP_SET, 0, 3, body.data, body.len);
	wbuf_free(&body);
	free(v);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
}

static void test_zlib(void **state)
{
	struct ftc c;
	struct wbuf body, out;
	struct ftc_msg m;
	struct fsnp_iter it;
	struct fsnp_val e;
	char *v = make_value(3500);
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	c.next_rid = 1000; /* explicit request ids below */
	m = CALL(&c, FSNP_OP_STARTUP, "compression=s", "zlib");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "compression", "zlib"));
	ftc_msg_free(&m);
	/* Compressed and chunked request: the whole body is compressed,
	 * then split. */
	ftc_body(&body, "key=s value=s", "z", v);
	struct fsnp_header h = {FSNP_DIR_REQUEST, 0, 1,
	                        FSNP_OP_SET,      7, (uint32_t)body.len};
	wbuf_init(&out);
	assert_int_equal(
	    fsnp_compress_frames(&out, &h, body.data, body.len, true, 512), 0);
	assert_int_equal(ftc_send_raw(&c, out.data, out.len), 0);
	wbuf_free(&out);
	wbuf_free(&body);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, 7);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_GET, "key=s", "z");
	assert_int_equal(m.status, 0);
	assert_true(m.flags & FSNP_FLAG_COMPRESSED);
	assert_int_equal(m.value.as.bin.len, 3500);
	assert_memory_equal(m.value.as.bin.ptr, v, 3500);
	ftc_msg_free(&m);
	free(v);
	/* A large reply: compressed as a whole, then chunked. */
	v = fill_list(&c, "zl", 8, 3000);
	m = CALL(&c, FSNP_OP_LRANGE, "key=s start=i stop=i", "zl", (int64_t)0,
	         (int64_t)-1);
	assert_int_equal(m.status, 0);
	assert_true(m.flags & FSNP_FLAG_COMPRESSED);
	assert_true(m.max_frame_body <= FRAME);
	assert_int_equal(m.value.as.count, 8);
	fsnp_iter_init(&it, &m.value);
	while (fsnp_iter_next(&it, NULL, &e)) {
		assert_memory_equal(e.as.bin.ptr, v, 3000);
	}
	ftc_msg_free(&m);
	free(v);
	/* Inflating past max_frame_bytes is refused. */
	v = make_value(9000);
	ftc_body(&body, "key=s value=s", "z2", v);
	wbuf_init(&out);
	h.request_id = 8;
	h.body_len = (uint32_t)body.len;
	fsnp_compress_frames(&out, &h, body.data, body.len, true, FRAME);
	ftc_send_raw(&c, out.data, out.len);
	wbuf_free(&out);
	wbuf_free(&body);
	free(v);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, 8);
	assert_int_equal(m.status, 6);
	ftc_msg_free(&m);
	/* A corrupt compressed body: bad_request, connection usable. */
	uint8_t junk[] = {1, 2, 3, 4, 5};
	ftc_send_frame(&c, 1, FSNP_OP_GET, FSNP_FLAG_COMPRESSED, 9, junk,
	               sizeof junk);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.status, 6);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_PING, "");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_windows_and_lanes(void **state)
{
	struct ftc owner, c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_iter it;
	struct fsnp_val v;
	char token[64];
	(void)state;
	assert_int_equal(ftc_connect(&owner, port), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i", "w",
	         (int64_t)20000);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	snprintf(token, sizeof token, "%.*s", (int)v.as.bin.len,
	         (const char *)v.as.bin.ptr);
	ftc_msg_free(&m);
	/* Two waiters fill lane 1's window of 2; the third is busy. */
	ftc_body(&b, "key=s ttl_ms=i", "w", (int64_t)20000);
	uint64_t w1 = ftc_send(&c, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	uint64_t w2 = ftc_send(&c, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	uint64_t w3 = ftc_send(&c, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	/* Another lane is not affected. */
	ftc_body(&b, "key=s", "w:other");
	uint64_t o = ftc_send(&c, 2, FSNP_OP_GET, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, o);
	ftc_msg_free(&m);
	/* Lanes per connection: 0, 1, 2 and 3 exist; lane 4 is refused. */
	ftc_body(&b, "key=s", "w:other");
	uint64_t l3 = ftc_send(&c, 3, FSNP_OP_GET, 0, &b);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, l3);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	uint64_t l4 = ftc_send(&c, 4, FSNP_OP_GET, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, l4);
	expect_error(m, 4, "lane limit");

	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE_RESULT,
	         "key=s token=s value=s ttl_ms=i", "w", token, "W",
	         (int64_t)20000);
	ftc_msg_free(&m);
	/* Lane 1 then answers in order: hit, hit, busy. */
	uint64_t want[] = {w1, w2, w3};
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ftc_recv(&c, &m, 5000), 0);
		assert_int_equal(m.h.request_id, want[i]);
		if (i < 2) {
			assert_int_equal(m.status, 0);
			ftc_msg_free(&m);
		} else {
			assert_true(ftc_map_str(
			    &m.value, "code", "flow_control_window_exhausted"));
			assert_true(ftc_map_int(&m.value, "retry_after_ms") >
			            0);
			expect_error(m, 4, "inflight window");
		}
	}
	ftc_close(&c);
	ftc_close(&owner);
}

static void test_response_limit(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	/* 25 x 3 kB: an LRANGE of 75 kB > 64 KiB is refused. */
	free(fill_list(&c, "rl", 25, 3000));
	expect_error(CALL(&c, FSNP_OP_LRANGE, "key=s start=i stop=i", "rl",
	                  (int64_t)0, (int64_t)-1),
	             6, "response byte limit exceeded");
	m = CALL(&c, FSNP_OP_LRANGE, "key=s start=i stop=i", "rl", (int64_t)0,
	         (int64_t)0);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_idle_timeout(void **state)
{
	struct ftc idle, busy;
	(void)state;
	assert_int_equal(ftc_connect(&idle, port), 0);
	assert_int_equal(ftc_connect(&busy, port), 0);
	/* Any frame resets the timer: PING every 300 ms keeps `busy`. */
	for (int i = 0; i < 10; i++) {
		struct ftc_msg m = CALL(&busy, FSNP_OP_PING, "");
		ftc_msg_free(&m);
		usleep(300000);
	}
	assert_true(ftc_wait_closed(&idle, 3000));
	struct ftc_msg m = CALL(&busy, FSNP_OP_PING, "");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&idle);
	ftc_close(&busy);
}

static void test_maxclients(void **state)
{
	static struct ftc c[MAXCLIENTS + 1];
	(void)state;
	/* Let connections of earlier tests finish closing. */
	usleep(300000);
	for (int i = 0; i < MAXCLIENTS; i++) {
		assert_int_equal(ftc_connect(&c[i], port), 0);
		struct ftc_msg m = CALL(&c[i], FSNP_OP_PING, "");
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	assert_int_equal(ftc_connect(&c[MAXCLIENTS], port), 0);
	assert_true(ftc_wait_closed(&c[MAXCLIENTS], 3000));
	ftc_close(&c[MAXCLIENTS]);
	for (int i = 0; i < MAXCLIENTS; i++) {
		ftc_close(&c[i]);
	}
}

static void test_requirepass(void **state)
{
	static const char *const extra[] = {
	    "--requirepass", "s3cret", "--fsnp-unauthenticated-max-frame-bytes",
	    "2048", NULL};
	struct harness_cluster pc;
	struct ftc c;
	struct ftc_msg m;
	struct fsnp_val v;
	(void)state;
	assert_int_equal(harness_cluster_start(&pc, 1, extra, true), 0);
	harness_secret(&pc, "s3cret");
	uint16_t p = pc.nodes[0].fsnp;
	assert_int_equal(ftc_connect(&c, p), 0);
	m = CALL(&c, FSNP_OP_STARTUP, "client_name=s", "t");
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_get(&m.value, "auth_required", &v), 0);
	assert_int_equal(v.tag, FSNP_TRUE);
	ftc_msg_free(&m);
	expect_error(CALL(&c, FSNP_OP_GET, "key=s", "k"), 2, "NOAUTH");
	const char *ev[] = {"TOPOLOGY_CHANGED"};
	expect_error(CALL(&c, FSNP_OP_STARTUP, "events=a", ev, 1), 2, "NOAUTH");
	expect_error(
	    CALL(&c, FSNP_OP_AUTH, "username=s password=s", "default", "nope"),
	    2, "WRONGPASS");
	expect_error(CALL(&c, FSNP_OP_AUTH, "password=s", "s3cre"), 2,
	             "WRONGPASS");
	m = CALL(&c, FSNP_OP_AUTH, "password=s", "s3cret");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_SET, "key=s value=s", "k", "v");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
	/* Before AUTH frames are capped lower. */
	assert_int_equal(ftc_connect(&c, p), 0);
	char *v3 = make_value(3000);
	struct wbuf b;
	ftc_body(&b, "key=s value=s", "k", v3);
	ftc_send_frame(&c, 1, FSNP_OP_SET, 0, 1, b.data, b.len);
	wbuf_free(&b);
	free(v3);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
	harness_cluster_stop(&pc);
}

/* BACKPRESSURE_CHANGED reaches subscribers when the node nears a budget
 * (here 4 blocked fetch-or-compute waiters), and again when it clears; a
 * fifth waiter meanwhile is answered busy, while other work (the owner's
 * RESULT) still runs. */
static void test_backpressure_event(void **state)
{
	static const char *const extra[] = {
	    "--fsnp-max-global-blocking-requests", "4", NULL};
	struct harness_cluster pc;
	struct ftc sub, owner, w[4];
	struct ftc_msg m;
	struct fsnp_val v, p;
	struct fsnp_iter it;
	char token[64];
	(void)state;
	uint16_t pt;
	assert_int_equal(ftc_start(&pc, 1, extra, &pt), 0);
	assert_int_equal(ftc_connect(&sub, pt), 0);
	assert_int_equal(ftc_connect(&owner, pt), 0);
	const char *ev[] = {"BACKPRESSURE_CHANGED"};
	m = CALL(&sub, FSNP_OP_SUBSCRIBE_EVENTS, "events=a", ev, 1);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i", "bp",
	         (int64_t)20000);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	snprintf(token, sizeof token, "%.*s", (int)v.as.bin.len,
	         (const char *)v.as.bin.ptr);
	ftc_msg_free(&m);
	for (int i = 0; i < 4; i++) {
		struct wbuf b;
		assert_int_equal(ftc_connect(&w[i], pt), 0);
		ftc_body(&b, "key=s ttl_ms=i", "bp", (int64_t)20000);
		ftc_send(&w[i], 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
		wbuf_free(&b);
	}
	/* The event arrives within a sweep (at most a second). */
	assert_int_equal(ftc_recv(&sub, &m, 3000), 0);
	assert_int_equal(m.h.request_id, 0);
	assert_int_equal(m.h.opcode, FSNP_OP_EVENT);
	assert_true(ftc_map_str(&m.value, "event", "BACKPRESSURE_CHANGED"));
	assert_int_equal(fsnp_map_map(&m.value, "payload", &p), 0);
	assert_int_equal(fsnp_map_get(&p, "reject_writes", &v), 0);
	assert_int_equal(v.tag, FSNP_TRUE);
	ftc_msg_free(&m);
	expect_error(CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i",
	                  "bp", (int64_t)20000),
	             4, "waiting on fetch-or-compute");
	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE_RESULT,
	         "key=s token=s value=s ttl_ms=i", "bp", token, "v",
	         (int64_t)20000);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	assert_int_equal(ftc_recv(&sub, &m, 3000), 0);
	assert_true(ftc_map_str(&m.value, "event", "BACKPRESSURE_CHANGED"));
	assert_int_equal(fsnp_map_map(&m.value, "payload", &p), 0);
	assert_int_equal(fsnp_map_get(&p, "reject_writes", &v), 0);
	assert_int_equal(v.tag, FSNP_FALSE);
	ftc_msg_free(&m);
	for (int i = 0; i < 4; i++) {
		ftc_close(&w[i]);
	}
	ftc_close(&sub);
	ftc_close(&owner);
	harness_cluster_stop(&pc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_settings_from_env),
	    cmocka_unit_test(test_chunked),
	    cmocka_unit_test(test_zlib),
	    cmocka_unit_test(test_windows_and_lanes),
	    cmocka_unit_test(test_response_limit),
	    cmocka_unit_test(test_idle_timeout),
	    cmocka_unit_test(test_maxclients),
	    cmocka_unit_test(test_requirepass),
	    cmocka_unit_test(test_backpressure_event),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
