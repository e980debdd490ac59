/* Integration: the FSNP server of a real lodestone — handshake and the
 * capability manifest, every control opcode, every KV opcode in its typed,
 * COMMAND_EXEC and compact forms, their errors, and bad input answered
 * with status 6 while the connection stays usable.
 *
 * The cluster size is a parameter (LS_FSNP_NODES, default 1) so the same
 * checks run against 3 nodes once the cluster layer routes between them. */
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
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

static struct harness_cluster cluster;
static uint16_t port;

static int setup(void **state)
{
	(void)state;
	return ftc_start(&cluster, ftc_env_nodes(), NULL, &port);
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

/* Sends a request and returns its reply (caller frees). */
static struct ftc_msg call(struct ftc *c, uint16_t op, const struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, 0, b, &m), 0);
	return m;
}

static struct ftc_msg callv(struct ftc *c, uint16_t op, struct wbuf *b)
{
	struct ftc_msg m = call(c, op, b);
	wbuf_free(b);
	return m;
}

/* call() with a body built by ftc_body(fmt, ...). */
static struct ftc_msg CALL(struct ftc *c, uint16_t op, const char *fmt, ...) {
	struct wbuf b;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	return callv(c, op, &b);
}

/* COMMAND_EXEC with string arguments. */
static struct ftc_msg
exec_cmd(struct ftc *c, const char *cmd, int argc, const char **argv)
{
	struct wbuf b;
	ftc_body(&b, "command=s args=a", cmd, argv, argc);
	return callv(c, FSNP_OP_COMMAND_EXEC, &b);
}

static void expect_ok_str(struct ftc_msg m, const char *s)
{
	assert_int_equal(m.status, FSNP_STATUS_OK);
	assert_true(m.has_value);
	assert_true(ftc_str_eq(&m.value, s));
	ftc_msg_free(&m);
}

static void expect_int(struct ftc_msg m, int64_t want)
{
	int64_t x;
	assert_int_equal(m.status, FSNP_STATUS_OK);
	assert_int_equal(fsnp_val_i64(&m.value, &x), 0);
	assert_int_equal(x, want);
	ftc_msg_free(&m);
}

static void expect_nil(struct ftc_msg m)
{
	assert_int_equal(m.status, FSNP_STATUS_OK);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
}

static void expect_error(struct ftc_msg m, uint16_t status, const char *text)
{
	char msg[512];
	assert_int_equal(m.status, status);
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

/* The list elements as "a,b,c" (nil as "~"). */
static void list_text(const struct fsnp_val *v, char *out, size_t cap)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	size_t n = 0;
	out[0] = '\0';
	fsnp_iter_init(&it, v);
	while (fsnp_iter_next(&it, NULL, &e) && n < cap) {
		n += (size_t)snprintf(
		    out + n, cap - n, "%s%.*s", n ? "," : "",
		    e.tag == FSNP_BIN ? (int)e.as.bin.len : 1,
		    e.tag == FSNP_BIN ? (const char *)e.as.bin.ptr : "~");
	}
}

static void expect_list(struct ftc_msg m, const char *want)
{
	char got[1024];
	assert_int_equal(m.status, FSNP_STATUS_OK);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	list_text(&m.value, got, sizeof got);
	assert_string_equal(got, want);
	ftc_msg_free(&m);
}

/* --- Handshake and control ---------------------------------------------- */

static void test_startup_manifest(void **state)
{
	struct ftc c;
	struct fsnp_val caps, v, fq, sch, lim;
	const char *codecs[] = {"flow_query_result_v1"};
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	struct ftc_msg m = CALL(&c, FSNP_OP_STARTUP,
	                        "client_name=s driver_name=s "
	                        "compact_flow_responses=b "
	                        "compact_response_codecs=a compression=s",
	                        "t", "t", 1, codecs, 1, "none");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "protocol", "ferricstore-native"));
	assert_int_equal(fsnp_map_get(&m.value, "auth_required", &v), 0);
	assert_int_equal(v.tag, FSNP_FALSE);
	assert_int_equal(fsnp_map_map(&m.value, "capabilities", &caps), 0);
	/* What the official SDK refuses to connect without. */
	assert_int_equal(fsnp_map_map(&caps, "schemas", &sch), 0);
	assert_int_equal(fsnp_map_map(&sch, "FLOW.QUERY", &v), 0);
	assert_int_equal(fsnp_map_map(&caps, "flow_query", &fq), 0);
	assert_true(ftc_map_str(&fq, "request_contract",
	                        "ferric.flow.query.request/v1"));
	assert_int_equal(fsnp_map_array(&fq, "shapes", &v), 0);
	assert_int_equal(v.as.count, 12);
	/* Limits at the top level too (where the SDK looks). */
	assert_int_equal(fsnp_map_map(&m.value, "limits", &lim), 0);
	assert_true(ftc_map_int(&lim, "max_frame_bytes") > 0);
	ftc_msg_free(&m);

	m = CALL(&c, FSNP_OP_HELLO, "compact_response_codecs=a", codecs, 1);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "protocol", "ferricstore-native"));
	ftc_msg_free(&m);

	/* Unknown codec, unknown compression (zlib is off): bad_request. */
	const char *bad_codec[] = {"no_such_codec"};
	expect_error(CALL(&c, FSNP_OP_STARTUP, "compact_response_codecs=a",
	                  bad_codec, 1),
	             6, "unsupported compact response codec");
	expect_error(CALL(&c, FSNP_OP_STARTUP, "compression=s", "zlib"), 6,
	             "zlib is not enabled");

	/* The server's series are in /metrics. */
	{
		char body[65536];
		int st;
		assert_int_equal(harness_http(cluster.nodes[0].admin, "GET",
		                              "/metrics", NULL, &st, body,
		                              sizeof body),
		                 0);
		assert_int_equal(st, 200);
		assert_non_null(strstr(body, "lodestone_fsnp_requests_total"));
		assert_non_null(strstr(body, "lodestone_fsnp_connections "));
	}

	m = CALL(&c, FSNP_OP_OPTIONS, "");
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_map(&m.value, "settings", &v), 0);
	assert_true(ftc_map_int(&v, "FERRICSTORE_NATIVE_MAX_FRAME_BYTES") > 0);
	assert_true(ftc_map_int(&v, "FERRICSTORE_NATIVE_IDLE_TIMEOUT_MS") > 0);
	assert_int_equal(fsnp_map_array(&m.value, "opcodes", &v), 0);
	assert_true(v.as.count > 40);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_control_opcodes(void **state)
{
	struct ftc c;
	struct fsnp_val v, ranges, r;
	struct fsnp_iter it;
	unsigned covered = 0;
	int64_t next = 0;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	expect_ok_str(CALL(&c, FSNP_OP_PING, ""), "PONG");
	expect_ok_str(CALL(&c, FSNP_OP_PING, "message=s", "hi"), "hi");
	expect_ok_str(CALL(&c, FSNP_OP_CLIENT_SETNAME, "name=s", "tester"),
	              "OK");
	struct ftc_msg m = CALL(&c, FSNP_OP_CLIENT_INFO, "");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "client_name", "tester"));
	ftc_msg_free(&m);
	expect_error(CALL(&c, FSNP_OP_CLIENT_SETNAME, ""), 6, "name");

	/* SHARDS: ranges cover all 1024 slots in order, lane = shard + 1. */
	m = CALL(&c, FSNP_OP_SHARDS, "");
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "slots"), 1024);
	assert_int_equal(fsnp_map_array(&m.value, "ranges", &ranges), 0);
	fsnp_iter_init(&it, &ranges);
	while (fsnp_iter_next(&it, NULL, &r)) {
		assert_int_equal(ftc_map_int(&r, "first_slot"), next);
		next = ftc_map_int(&r, "last_slot") + 1;
		assert_int_equal(ftc_map_int(&r, "lane_id"),
		                 ftc_map_int(&r, "shard") + 1);
		/* The shard's leader: some node of the cluster. */
		bool known = false;
		for (unsigned i = 0; i < cluster.n; i++) {
			known = known || ftc_map_int(&r, "native_port") ==
			                     cluster.nodes[i].fsnp;
		}
		assert_true(known);
		assert_false(ftc_map_str(&r, "hint", "leader_unknown"));
		covered++;
	}
	assert_int_equal(next, 1024);
	assert_int_equal(covered, ftc_map_int(&m.value, "shard_count"));
	ftc_msg_free(&m);

	/* ROUTE agrees with the slot hash and the ranges. */
	m = CALL(&c, FSNP_OP_ROUTE, "key=s", "{user:42}:x");
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "slot"), 390);
	assert_int_equal(ftc_map_int(&m.value, "lane_id"),
	                 ftc_map_int(&m.value, "shard") + 1);
	ftc_msg_free(&m);
	const char *keys[] = {"plain", "fa:0"};
	m = CALL(&c, FSNP_OP_ROUTE_BATCH, "keys=a", keys, 2);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 2);
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(ftc_map_int(&v, "slot"), 719);
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(ftc_map_int(&v, "slot"), 1);
	ftc_msg_free(&m);
	expect_error(CALL(&c, FSNP_OP_ROUTE, ""), 6, "key");

	m = CALL(&c, FSNP_OP_BACKPRESSURE, "");
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_get(&m.value, "reject_writes", &v), 0);
	ftc_msg_free(&m);

	/* WINDOW_UPDATE clamps to the configured maxima. */
	m = CALL(&c, FSNP_OP_WINDOW_UPDATE,
	         "max_inflight_per_connection=i max_inflight_per_lane=i",
	         (int64_t)100000000, (int64_t)7);
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_map(&m.value, "limits", &v), 0);
	assert_int_equal(ftc_map_int(&v, "max_inflight_per_connection"), 4096);
	assert_int_equal(ftc_map_int(&v, "max_inflight_per_lane"), 7);
	ftc_msg_free(&m);
	expect_error(CALL(&c, FSNP_OP_WINDOW_UPDATE, "max_inflight_per_lane=i",
	                  (int64_t)0),
	             6, "positive");

	const char *ev[] = {"TOPOLOGY_CHANGED", "BACKPRESSURE_CHANGED"};
	m = CALL(&c, FSNP_OP_SUBSCRIBE_EVENTS, "events=a", ev, 2);
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_array(&m.value, "subscribed", &v), 0);
	assert_int_equal(v.as.count, 2);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_UNSUBSCRIBE_EVENTS, "events=a", ev, 1);
	assert_int_equal(fsnp_map_array(&m.value, "subscribed", &v), 0);
	assert_int_equal(v.as.count, 1);
	ftc_msg_free(&m);
	const char *bad_ev[] = {"NOPE"};
	expect_error(CALL(&c, FSNP_OP_SUBSCRIBE_EVENTS, "events=a", bad_ev, 1),
	             6, "known event");

	/* EVENT and GOAWAY are the server's. */
	expect_error(CALL(&c, FSNP_OP_EVENT, ""), 6, "server-initiated");

	/* QUIT answers OK and closes. */
	expect_ok_str(CALL(&c, FSNP_OP_QUIT, ""), "OK");
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
}

/* --- KV ----------------------------------------------------------------------
 */

static void test_strings(void **state)
{
	struct ftc c;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s", "s1", "v1"), "OK");
	expect_ok_str(CALL(&c, FSNP_OP_GET, "key=s", "s1"), "v1");
	expect_nil(CALL(&c, FSNP_OP_GET, "key=s", "s:none"));
	expect_nil(CALL(&c, FSNP_OP_SET, "key=s value=s nx=b", "s1", "x", 1));
	expect_nil(CALL(&c, FSNP_OP_SET, "key=s value=s xx=b", "s:n", "x", 1));
	expect_ok_str(
	    CALL(&c, FSNP_OP_SET, "key=s value=s get=b", "s1", "v2", 1), "v1");
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s ttl=i", "s:t", "t",
	                   (int64_t)100),
	              "OK");
	expect_ok_str(
	    CALL(&c, FSNP_OP_SET, "key=s value=s keepttl=b", "s:t", "t2", 1),
	    "OK");
	usleep(300000);
	expect_nil(CALL(&c, FSNP_OP_GET, "key=s", "s:t"));
	/* Integers and floats are stored as their text. */
	expect_ok_str(
	    CALL(&c, FSNP_OP_SET, "key=s value=i", "s:i", (int64_t)42), "OK");
	expect_ok_str(CALL(&c, FSNP_OP_GET, "key=s", "s:i"), "42");
	expect_error(
	    CALL(&c, FSNP_OP_SET, "key=s value=s nx=b xx=b", "a", "b", 1, 1), 6,
	    "NX");
	expect_error(CALL(&c, FSNP_OP_SET, "key=s value=s ttl=i pxat=i", "a",
	                  "b", (int64_t)5, (int64_t)5),
	             6, "syntax");
	expect_error(CALL(&c, FSNP_OP_SET, "key=s", "a"), 6, "value");
	expect_error(CALL(&c, FSNP_OP_GET, ""), 1, "key must be binary");

	/* DEL and MGET span shards; MSET must stay in one slot. */
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s", "d1", "1"), "OK");
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s", "d2", "2"), "OK");
	const char *mk[] = {"d2", "nope", "d1", "s1"};
	expect_list(CALL(&c, FSNP_OP_MGET, "keys=a", mk, 4), "2,~,1,v2");
	const char *dk[] = {"d1", "d2", "d3"};
	expect_int(CALL(&c, FSNP_OP_DEL, "keys=a", dk, 3), 2);
	expect_int(CALL(&c, FSNP_OP_DEL, "keys=a", dk, 0), 0);
	expect_list(CALL(&c, FSNP_OP_MGET, "keys=a", mk, 0), "");

	/* MSET typed forms: [{key,value}] and [[k,v]]. */
	{
		struct wbuf b;
		struct fsnp_writer w;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "pairs");
		fsnp_w_array_begin(&w);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "key");
		fsnp_w_str(&w, "{m}a");
		fsnp_w_key(&w, "value");
		fsnp_w_str(&w, "A");
		fsnp_w_map_end(&w);
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, "{m}b");
		fsnp_w_str(&w, "B");
		fsnp_w_array_end(&w);
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		expect_ok_str(callv(&c, FSNP_OP_MSET, &b), "OK");
	}
	const char *mb[] = {"{m}a", "{m}b"};
	expect_list(CALL(&c, FSNP_OP_MGET, "keys=a", mb, 2), "A,B");
	/* Cross-slot MSET: refused, nothing written. */
	{
		struct wbuf b;
		struct fsnp_writer w;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "pairs");
		fsnp_w_array_begin(&w);
		const char *kv[] = {"xs:1", "1", "xs:2", "2", "xs:3", "3"};
		for (int i = 0; i < 6; i += 2) {
			fsnp_w_array_begin(&w);
			fsnp_w_str(&w, kv[i]);
			fsnp_w_str(&w, kv[i + 1]);
			fsnp_w_array_end(&w);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		fsnp_w_finish(&w);
		expect_error(callv(&c, FSNP_OP_MSET, &b), 1, "CROSSSLOT");
		expect_nil(CALL(&c, FSNP_OP_GET, "key=s", "xs:1"));
	}

	/* CAS: true / false / nil. */
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s", "cas", "a"), "OK");
	struct ftc_msg m =
	    CALL(&c, FSNP_OP_CAS, "key=s expected=s value=s", "cas", "a", "b");
	assert_int_equal(m.value.tag, FSNP_TRUE);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_CAS, "key=s expected=s value=s", "cas", "a", "c");
	assert_int_equal(m.value.tag, FSNP_FALSE);
	ftc_msg_free(&m);
	expect_nil(CALL(&c, FSNP_OP_CAS, "key=s expected=s value=s", "cas:no",
	                "a", "c"));
	ftc_close(&c);
}

static void test_collections(void **state)
{
	struct ftc c;
	struct fsnp_writer w;
	struct wbuf b;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	/* Hashes */
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "h");
	fsnp_w_key(&w, "fields");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "f1");
	fsnp_w_str(&w, "v1");
	fsnp_w_key(&w, "f2");
	fsnp_w_str(&w, "v2");
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
	expect_int(callv(&c, FSNP_OP_HSET, &b), 2);
	expect_ok_str(CALL(&c, FSNP_OP_HGET, "key=s field=s", "h", "f1"), "v1");
	const char *hf[] = {"f2", "zz", "f1"};
	expect_list(CALL(&c, FSNP_OP_HMGET, "key=s fields=a", "h", hf, 3),
	            "v2,~,v1");
	struct ftc_msg m = CALL(&c, FSNP_OP_HGETALL, "key=s", "h");
	assert_int_equal(m.value.tag, FSNP_MAP);
	assert_true(ftc_map_str(&m.value, "f2", "v2"));
	ftc_msg_free(&m);
	const char *hd[] = {"h", "f1", "nope"};
	expect_int(exec_cmd(&c, "HDEL", 3, hd), 1);
	/* Lists */
	const char *lv[] = {"a", "b", "c"};
	expect_int(CALL(&c, FSNP_OP_RPUSH, "key=s values=a", "l", lv, 3), 3);
	expect_int(CALL(&c, FSNP_OP_LPUSH, "key=s values=a", "l", lv, 1), 4);
	expect_list(CALL(&c, FSNP_OP_LRANGE, "key=s start=i stop=i", "l",
	                 (int64_t)0, (int64_t)-1),
	            "a,a,b,c");
	expect_ok_str(CALL(&c, FSNP_OP_LPOP, "key=s", "l"), "a");
	expect_ok_str(CALL(&c, FSNP_OP_RPOP, "key=s", "l"), "c");
	expect_list(CALL(&c, FSNP_OP_LPOP, "key=s count=i", "l", (int64_t)5),
	            "a,b");
	expect_nil(CALL(&c, FSNP_OP_RPOP, "key=s", "l"));
	expect_error(CALL(&c, FSNP_OP_LPUSH, "key=s values=a", "l", lv, 0), 6,
	             "must not be empty");
	/* Sets */
	expect_int(CALL(&c, FSNP_OP_SADD, "key=s members=a", "st", lv, 3), 3);
	expect_int(CALL(&c, FSNP_OP_SREM, "key=s members=a", "st", lv, 1), 1);
	m = CALL(&c, FSNP_OP_SMEMBERS, "key=s", "st");
	assert_int_equal(m.value.as.count, 2);
	ftc_msg_free(&m);
	expect_int(CALL(&c, FSNP_OP_SISMEMBER, "key=s member=s", "st", "b"), 1);
	expect_int(CALL(&c, FSNP_OP_SISMEMBER, "key=s member=s", "st", "a"), 0);
	/* Sorted sets: integer and float scores; scores answered as text. */
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "z");
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	fsnp_w_array_begin(&w);
	fsnp_w_i64(&w, 3);
	fsnp_w_str(&w, "c");
	fsnp_w_array_end(&w);
	fsnp_w_array_begin(&w);
	fsnp_w_f64(&w, 1.5);
	fsnp_w_str(&w, "a");
	fsnp_w_array_end(&w);
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
	expect_int(callv(&c, FSNP_OP_ZADD, &b), 2);
	expect_ok_str(CALL(&c, FSNP_OP_ZSCORE, "key=s member=s", "z", "a"),
	              "1.5");
	expect_ok_str(CALL(&c, FSNP_OP_ZSCORE, "key=s member=s", "z", "c"),
	              "3");
	expect_list(CALL(&c, FSNP_OP_ZRANGE,
	                 "key=s start=i stop=i withscores=b", "z", (int64_t)0,
	                 (int64_t)-1, 1),
	            "a,1.5,c,3");
	const char *zr[] = {"a"};
	expect_int(CALL(&c, FSNP_OP_ZREM, "key=s members=a", "z", zr, 1), 1);
	const char *za[] = {"z2", "2.5", "x", "1", "y"};
	expect_int(exec_cmd(&c, "ZADD", 5, za), 2);
	const char *zg[] = {"z2", "0", "-1", "WITHSCORES"};
	expect_list(exec_cmd(&c, "ZRANGE", 4, zg), "y,1,x,2.5");
	/* WRONGTYPE with the reference text. */
	expect_error(CALL(&c, FSNP_OP_GET, "key=s", "z"), 1,
	             "WRONGTYPE Operation against a key holding the wrong kind "
	             "of value");
	expect_error(CALL(&c, FSNP_OP_LPUSH, "key=s values=a", "h", lv, 1), 1,
	             "WRONGTYPE");
	ftc_close(&c);
}

static void test_locks_ratelimit_foc(void **state)
{
	struct ftc c, d;
	struct ftc_msg m;
	struct fsnp_val v;
	struct fsnp_iter it;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	assert_int_equal(ftc_connect(&d, port), 0);
	expect_ok_str(CALL(&c, FSNP_OP_LOCK, "key=s owner=s ttl_ms=i", "lk",
	                   "o1", (int64_t)5000),
	              "OK");
	expect_error(CALL(&c, FSNP_OP_LOCK, "key=s owner=s ttl_ms=i", "lk",
	                  "o2", (int64_t)5000),
	             1, "DISTLOCK lock is held by another owner");
	expect_int(CALL(&c, FSNP_OP_EXTEND, "key=s owner=s ttl_ms=i", "lk",
	                "o1", (int64_t)5000),
	           1);
	expect_error(CALL(&c, FSNP_OP_UNLOCK, "key=s owner=s", "lk", "o2"), 1,
	             "not the lock owner");
	expect_int(CALL(&c, FSNP_OP_UNLOCK, "key=s owner=s", "lk", "o1"), 1);
	expect_error(CALL(&c, FSNP_OP_EXTEND, "key=s owner=s ttl_ms=i", "lk",
	                  "o1", (int64_t)5000),
	             1, "does not exist or has expired");
	expect_error(CALL(&c, FSNP_OP_LOCK, "key=s owner=s", "lk", "o1"), 6,
	             "ttl_ms");

	/* RATELIMIT.ADD: exactly [status, count, remaining, reset]. */
	for (int i = 0; i < 3; i++) {
		m = CALL(&c, FSNP_OP_RATELIMIT_ADD,
		         "key=s window_ms=i max=i count=i", "rl",
		         (int64_t)60000, (int64_t)2, (int64_t)1);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 4);
		fsnp_iter_init(&it, &m.value);
		fsnp_iter_next(&it, NULL, &v);
		assert_true(ftc_str_eq(&v, i < 2 ? "allowed" : "denied"));
		ftc_msg_free(&m);
	}

	/* FETCH_OR_COMPUTE: the first caller computes, a second waits on
	 * the server until the owner's RESULT; ERROR reaches waiters. */
	m = CALL(&c, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i hint=s", "foc",
	         (int64_t)10000, "h");
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "compute"));
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "h"));
	fsnp_iter_next(&it, NULL, &v);
	char token[64];
	snprintf(token, sizeof token, "%.*s", (int)v.as.bin.len,
	         (const char *)v.as.bin.ptr);
	ftc_msg_free(&m);
	struct wbuf b;
	ftc_body(&b, "key=s ttl_ms=i", "foc", (int64_t)10000);
	uint64_t wrid = ftc_send(&d, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&d, &m, 300), -1); /* still waiting */
	expect_error(CALL(&c, FSNP_OP_FETCH_OR_COMPUTE_RESULT,
	                  "key=s token=s value=s ttl_ms=i", "foc", "wrong", "x",
	                  (int64_t)1000),
	             1, "not held by this token");
	expect_ok_str(CALL(&c, FSNP_OP_FETCH_OR_COMPUTE_RESULT,
	                   "key=s token=s value=s ttl_ms=i", "foc", token,
	                   "computed", (int64_t)10000),
	              "OK");
	assert_int_equal(ftc_recv(&d, &m, 5000), 0);
	assert_int_equal(m.h.request_id, wrid);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "hit"));
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_str_eq(&v, "computed"));
	ftc_msg_free(&m);

	m = CALL(&c, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i", "foc2",
	         (int64_t)10000);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	snprintf(token, sizeof token, "%.*s", (int)v.as.bin.len,
	         (const char *)v.as.bin.ptr);
	ftc_msg_free(&m);
	ftc_body(&b, "key=s ttl_ms=i", "foc2", (int64_t)10000);
	wrid = ftc_send(&d, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	usleep(100000);
	expect_ok_str(CALL(&c, FSNP_OP_FETCH_OR_COMPUTE_ERROR,
	                   "key=s token=s message=s", "foc2", token,
	                   "upstream failed"),
	              "OK");
	assert_int_equal(ftc_recv(&d, &m, 5000), 0);
	assert_int_equal(m.h.request_id, wrid);
	expect_error(m, 1, "upstream failed");
	ftc_close(&c);
	ftc_close(&d);
}

static void test_command_exec(void **state)
{
	struct ftc c;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	const char *set[] = {"ce", "v", "PX", "60000", "NX"};
	expect_ok_str(exec_cmd(&c, "SET", 5, set), "OK");
	const char *get[] = {"ce"};
	expect_ok_str(exec_cmd(&c, "get", 1, get), "v");
	const char *rl[] = {"ce:rl", "1000", "5"};
	struct ftc_msg m = exec_cmd(&c, "RATELIMIT.ADD", 3, rl);
	assert_int_equal(m.value.as.count, 4);
	ftc_msg_free(&m);
	expect_ok_str(exec_cmd(&c, "PING", 0, NULL), "PONG");
	const char *echo[] = {"x"};
	expect_ok_str(exec_cmd(&c, "ECHO", 1, echo), "x");
	const char *cli[] = {"SETNAME", "n1"};
	expect_ok_str(exec_cmd(&c, "CLIENT", 2, cli), "OK");
	const char *cli2[] = {"GETNAME"};
	expect_ok_str(exec_cmd(&c, "CLIENT", 1, cli2), "n1");
	expect_error(exec_cmd(&c, "NO_SUCH_COMMAND", 1, get), 1,
	             "unknown command");
	expect_error(exec_cmd(&c, "GET", 0, NULL), 1,
	             "wrong number of arguments");
	const char *badset[] = {"k", "v", "EX", "x"};
	expect_error(exec_cmd(&c, "SET", 4, badset), 1, "invalid expire");
	/* Flow is served (tests/integration/test_flow.c): a claim without
	 * a worker names the field; an incomplete FLOW.QUERY is refused by
	 * the FQL1 parser with its fixed message. */
	expect_error(exec_cmd(&c, "FLOW.CLAIM_DUE", 1, get), 6, "worker");
	expect_error(CALL(&c, FSNP_OP_FLOW_QUERY, "version=s query=s", "FQL1",
	                  "FROM runs"),
	             6, "ERR FQL1 invalid syntax");
	/* Admin: served (test_fsnp_admin covers them on three nodes). */
	struct ftc_msg hm = CALL(&c, FSNP_OP_CLUSTER_HEALTH, "");
	assert_int_equal(hm.status, 0);
	assert_true(ftc_map_str(&hm.value, "status", "ok"));
	ftc_msg_free(&hm);
	const char *ks[] = {"k"};
	hm = exec_cmd(&c, "CLUSTER.KEYSLOT", 1, ks);
	assert_int_equal(hm.status, 0);
	int64_t slot = -1;
	assert_int_equal(fsnp_val_i64(&hm.value, &slot), 0);
	assert_true(slot >= 0 && slot < 1024);
	ftc_msg_free(&hm);
	const char *two[] = {"2"};
	expect_error(exec_cmd(&c, "CLUSTER.PROMOTE", 1, two), 1,
	             "a single node");
	expect_error(exec_cmd(&c, "CLUSTER.KEYSLOT", 0, ks), 6, "key");

	/* The keyspace commands RESP serves, as store commands (docs/resp.md):
	 * RENAME within one slot, ZINCRBY, EXPIRE NX. */
	const char *rn[] = {"{ce}a", "{ce}b"};
	expect_error(exec_cmd(&c, "RENAME", 2, rn), 1, "ERR no such key");
	const char *seta[] = {"{ce}a", "1", "PX", "600000"};
	expect_ok_str(exec_cmd(&c, "SET", 4, seta), "OK");
	expect_ok_str(exec_cmd(&c, "RENAME", 2, rn), "OK");
	const char *geta[] = {"{ce}a"}, *getb[] = {"{ce}b"};
	expect_nil(exec_cmd(&c, "GET", 1, geta));
	expect_ok_str(exec_cmd(&c, "GET", 1, getb), "1");
	struct ftc_msg tm = exec_cmd(&c, "PTTL", 1, getb);
	int64_t pttl = 0;
	assert_int_equal(fsnp_val_i64(&tm.value, &pttl), 0);
	assert_true(pttl > 0 && pttl <= 600000); /* the TTL moved along */
	ftc_msg_free(&tm);
	const char *rnx[] = {"{ce}b", "{ce}a"};
	expect_int(exec_cmd(&c, "RENAMENX", 2, rnx), 1);
	const char *cross[] = {"{ce}a", "{other}a"};
	expect_error(exec_cmd(&c, "RENAME", 2, cross), 1, "CROSSSLOT");
	const char *zi[] = {"ce:z", "2.5", "m"};
	expect_ok_str(exec_cmd(&c, "ZINCRBY", 3, zi), "2.5");
	expect_ok_str(exec_cmd(&c, "ZINCRBY", 3, zi), "5");
	const char *zbad[] = {"ce:z", "x", "m"};
	expect_error(exec_cmd(&c, "ZINCRBY", 3, zbad), 1, "not a valid float");
	const char *setp[] = {"ce:e", "v"};
	expect_ok_str(exec_cmd(&c, "SET", 2, setp), "OK");
	const char *enx[] = {"ce:e", "100", "NX"};
	expect_int(exec_cmd(&c, "EXPIRE", 3, enx), 1);
	expect_int(exec_cmd(&c, "EXPIRE", 3, enx), 0);
	const char *enxx[] = {"ce:e", "100", "NX", "XX"};
	expect_error(exec_cmd(&c, "EXPIRE", 4, enxx), 1,
	             "ERR NX and XX, GT or LT options at the same time are "
	             "not compatible");
	ftc_close(&c);
}

/* --- Compact forms ----------------------------------------------------------
 */

static void test_compact(void **state)
{
	struct ftc c;
	struct wbuf b;
	struct fsnp_bytes keys[3] = {{(const uint8_t *)"{c}a", 4},
	                             {(const uint8_t *)"{c}b", 4},
	                             {(const uint8_t *)"{c}x", 4}};
	struct fsnp_bytes vals[2] = {{(const uint8_t *)"1", 1},
	                             {(const uint8_t *)"2", 1}};
	struct ftc_msg m;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	/* The SDK's compact MSET/MGET requests (flag 0x02), typed replies. */
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_SET, keys, vals, 2);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_MSET, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	expect_ok_str(m, "OK");
	wbuf_init(&b);
	fsnp_compact_req_encode_kv(&b, FSNP_COMPACT_MODE_GET, keys, NULL, 3);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_MGET, FSNP_FLAG_CUSTOM, &b, &m), 0);
	expect_list(m, "1,2,~");

	/* Compact replies once negotiated (and advertised). */
	const char *codecs[] = {"kv_get_v1", "kv_mget_v1", "ok_list_v1"};
	m = CALL(&c, FSNP_OP_STARTUP, "compact_response_codecs=a", codecs, 3);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	assert_int_equal(
	    ftc_call(&c, 1, FSNP_OP_MGET, FSNP_FLAG_CUSTOM, &b, &m), 0);
	wbuf_free(&b);
	assert_true(m.h.flags & FSNP_FLAG_CUSTOM);
	struct fsnp_compact_list l;
	assert_int_equal(
	    fsnp_compact_kv_mget_decode(m.body + 2, m.len - 2, 100, &l), 0);
	assert_int_equal(l.count, 3);
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_GET, "key=s", "{c}a");
	assert_true(m.h.flags & FSNP_FLAG_CUSTOM);
	bool present;
	struct fsnp_bytes v;
	assert_int_equal(
	    fsnp_compact_kv_get_decode(m.body + 2, m.len - 2, &present, &v), 0);
	assert_true(present && v.len == 1 && v.ptr[0] == '1');
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_SET, "key=s value=s", "{c}a", "9");
	assert_true(m.h.flags & FSNP_FLAG_CUSTOM);
	uint32_t cnt;
	assert_int_equal(
	    fsnp_compact_ok_list_decode(m.body + 2, m.len - 2, &cnt), 0);
	assert_int_equal(cnt, 1);
	ftc_msg_free(&m);
	/* Never on errors. */
	m = CALL(&c, FSNP_OP_GET, "key=s", "z");
	assert_false(m.h.flags & FSNP_FLAG_CUSTOM);
	ftc_msg_free(&m);
	/* A compact body an opcode has no codec for: bad_request. */
	uint8_t junk[] = {0x94, 0x07, 0, 0, 0, 0};
	assert_int_equal(ftc_send_frame(&c, 1, FSNP_OP_GET, FSNP_FLAG_CUSTOM,
	                                999, junk, sizeof junk),
	                 0);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.status, 6);
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* --- Bad input: status 6, connection still usable ----------------------------
 */

static void still_usable(struct ftc *c)
{
	expect_ok_str(CALL(c, FSNP_OP_PING, ""), "PONG");
}

static void expect_bad(struct ftc *c, uint64_t rid, const char *text)
{
	struct ftc_msg m;
	assert_int_equal(ftc_recv(c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, rid);
	expect_error(m, 6, text);
	still_usable(c);
}

static void test_bad_input(void **state)
{
	struct ftc c;
	struct wbuf b;
	(void)state;
	assert_int_equal(ftc_connect(&c, port), 0);
	ftc_body(&b, "key=s", "k");
	/* Data opcode on lane 0. */
	ftc_send_frame(&c, 0, FSNP_OP_GET, 0, 77, b.data, b.len);
	expect_bad(&c, 77, "lane 0");
	/* Unknown flags (0x40), warning flag (0x04), trace (0x01, off). */
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0x40, 78, b.data, b.len);
	expect_bad(&c, 78, "flags");
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0x04, 79, b.data, b.len);
	expect_bad(&c, 79, "flags");
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0x01, 80, b.data, b.len);
	expect_bad(&c, 80, "trac");
	/* Compressed without zlib negotiated. */
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0x08, 81, b.data, b.len);
	expect_bad(&c, 81, "compress");
	/* request_id 0. */
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0, 0, b.data, b.len);
	expect_bad(&c, 0, "request_id");
	/* Unknown opcode. */
	ftc_send_frame(&c, 1, 0x0999, 0, 82, b.data, b.len);
	expect_bad(&c, 82, "opcode");
	/* Truncated typed value, unknown tag, trailing bytes. */
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0, 83, b.data, b.len - 1);
	expect_bad(&c, 83, "truncated");
	uint8_t tag[] = {0x09};
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0, 84, tag, 1);
	expect_bad(&c, 84, "tag");
	uint8_t trail[] = {FSNP_MAP, 0, 0, 0, 0, 0};
	ftc_send_frame(&c, 1, FSNP_OP_GET, 0, 85, trail, sizeof trail);
	expect_bad(&c, 85, "trailing");
	/* deadline_ms: invalid (6) and expired (1, not executed). */
	wbuf_free(&b);
	ftc_body(&b, "key=s value=s deadline_ms=i", "dl", "x", (int64_t)-5);
	ftc_send_frame(&c, 1, FSNP_OP_SET, 0, 86, b.data, b.len);
	expect_bad(&c, 86, "deadline");
	wbuf_free(&b);
	expect_error(CALL(&c, FSNP_OP_SET, "key=s value=s deadline_ms=i", "dl",
	                  "x", (int64_t)1000),
	             1, "deadline exceeded");
	expect_nil(CALL(&c, FSNP_OP_GET, "key=s", "dl"));
	/* A far deadline runs normally. */
	expect_ok_str(CALL(&c, FSNP_OP_SET, "key=s value=s deadline_ms=i", "dl",
	                   "y", (int64_t)4102444800000),
	              "OK");
	/* A body that is not a map counts as {}. */
	uint8_t arr[] = {FSNP_ARRAY, 0, 0, 0, 0};
	ftc_send_frame(&c, 1, FSNP_OP_PING, 0, 87, arr, sizeof arr);
	struct ftc_msg m;
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	expect_ok_str(m, "PONG");
	/* No-reply: executes, answers nothing. */
	ftc_body(&b, "key=s value=s", "nr", "1");
	ftc_send_frame(&c, 1, FSNP_OP_SET, FSNP_FLAG_NO_REPLY, 88, b.data,
	               b.len);
	wbuf_free(&b);
	expect_ok_str(CALL(&c, FSNP_OP_GET, "key=s", "nr"), "1");
	ftc_close(&c);

	/* Fatal framing errors close the connection. */
	assert_int_equal(ftc_connect(&c, port), 0);
	ftc_send_raw(&c, "NOPE", 4);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
	assert_int_equal(ftc_connect(&c, port), 0);
	uint8_t hdr[FSNP_HEADER_SIZE];
	struct fsnp_header h = {FSNP_DIR_RESPONSE, 0, 1, FSNP_OP_GET, 5, 0};
	fsnp_frame_encode_header(&h, hdr);
	ftc_send_raw(&c, hdr, sizeof hdr);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_startup_manifest),
	    cmocka_unit_test(test_control_opcodes),
	    cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_collections),
	    cmocka_unit_test(test_locks_ratelimit_foc),
	    cmocka_unit_test(test_command_exec),
	    cmocka_unit_test(test_compact),
	    cmocka_unit_test(test_bad_input),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
