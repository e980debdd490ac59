/* Integration: liblodestone's FSNP client and lodectl against a real
 * lodestone — 10 000 requests pipelined through the libuv client with
 * SHARDS routing, bodies and keys of every size class (plain and
 * zlib), reconnection across a node restart, busy replies retried by the
 * client, and lodectl's output and exit codes. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/fsnp_client.h"
#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

static struct harness_cluster cluster;
static uint16_t port;

static int setup(void **state)
{
	/* Compression on for test_body_sizes (a client negotiates it only
	 * when asked). */
	static const char *const extra[] = {"--fsnp-compression", NULL};
	(void)state;
	return ftc_start(&cluster, ftc_env_nodes(), extra, &port);
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

static void body_kv(struct wbuf *b, const char *k, const char *v)
{
	if (v != NULL) {
		ftc_body(b, "key=s value=s", k, v);
	} else {
		ftc_body(b, "key=s", k);
	}
}

/* --- Async client: 10 000 pipelined, routed by slot ------------------------
 */

#define N 10000

struct run {
	bool ready;
	int ready_status;
	unsigned done, ok, errors;
	unsigned values_ok;
};

struct one {
	struct run *run;
	unsigned i;
	bool get;
	unsigned attempts;
};

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err)
{
	struct run *r = data;
	(void)c;
	r->ready = true;
	r->ready_status = status;
	if (status != 0) {
		print_message("not ready: %s\n", err);
	}
}

static void on_reply(void *data, const struct fsnp_reply *rep)
{
	struct one *o = data;
	struct run *r = o->run;
	o->attempts = rep->attempts;
	r->done++;
	if (rep->error == 0 && rep->status == FSNP_STATUS_OK) {
		r->ok++;
		if (o->get) {
			char want[32];
			snprintf(want, sizeof want, "v%u", o->i);
			r->values_ok += ftc_str_eq(&rep->value, want);
		}
	} else {
		r->errors++;
	}
}

/* Opens a client on `loop` routed by topology and runs the loop until it
 * is ready. */
static struct fsnp_client *open_ready(uv_loop_t *loop, bool zlib, struct run *r)
{
	struct fsnp_client_options o;
	struct fsnp_client *c;

	memset(&o, 0, sizeof o);
	o.host = "127.0.0.1";
	o.port = port;
	o.topology = true;
	o.zlib = zlib;
	o.client_name = "test";
	assert_int_equal(fsnp_client_open(loop, &o, on_ready, r, &c), 0);
	while (!r->ready) {
		uv_run(loop, UV_RUN_ONCE);
	}
	assert_int_equal(r->ready_status, 0);
	return c;
}

static void test_async_pipelined(void **state)
{
	uv_loop_t loop;
	struct fsnp_client *c;
	struct fsnp_client_info info;
	struct run r = {0};
	static struct one ones[2 * N];
	(void)state;
	uv_loop_init(&loop);
	c = open_ready(&loop, false, &r);
	fsnp_client_get_info(c, &info);
	assert_int_equal(info.shard_count, 8);
	/* All SETs then all GETs, without waiting in between: each key's
	 * two requests share a lane (its shard's), so the GET sees the SET. */
	for (unsigned i = 0; i < 2 * N; i++) {
		unsigned k = i % N;
		char key[32], val[32];
		struct wbuf b;
		snprintf(key, sizeof key, "ac:%u", k);
		snprintf(val, sizeof val, "v%u", k);
		ones[i] = (struct one){&r, k, i >= N, 0};
		body_kv(&b, key, i < N ? val : NULL);
		assert_int_equal(
		    fsnp_client_send(c, i < N ? FSNP_OP_SET : FSNP_OP_GET, key,
		                     strlen(key), b.data, b.len,
		                     FSNP_REQ_IDEMPOTENT, on_reply, &ones[i]),
		    0);
		wbuf_free(&b);
	}
	while (r.done < 2 * N) {
		uv_run(&loop, UV_RUN_ONCE);
	}
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.ok, 2 * N);
	assert_int_equal(r.values_ok, N);
	fsnp_client_get_info(c, &info);
	print_message("%zu connection(s) for %u node(s)\n", info.connections,
	              cluster.n);
	assert_true(info.connections >= 1 && info.connections <= cluster.n);
	fsnp_client_close(c, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- Bodies and keys of every size class -----------------------------------
 *
 * The client keeps a request's body and key in one allocation and reuses
 * small ones: values around that size limit (and keys past it), sent
 * pipelined, then read back through requests that reuse the freed ones.
 * Once plain, once with zlib (bodies of 256 bytes and more are
 * compressed). Routing by the copied key shows on several nodes
 * (LS_FSNP_NODES=3), in test_async_pipelined. */

static const size_t value_sizes[] = {0,   1,   150, 200, 220,  230,  240,
                                     250, 256, 257, 300, 1000, 4096, 70000};
#define N_SIZES (sizeof value_sizes / sizeof value_sizes[0])
#define VALUE_MAX 70000
#define KEY_MAX 400

struct sized {
	struct run *run;
	const uint8_t *want; /* GET: the value set */
	size_t want_len;
	bool value_ok;
};

static void on_sized(void *data, const struct fsnp_reply *rep)
{
	struct sized *o = data;
	o->run->done++;
	if (rep->error != 0 || rep->status != FSNP_STATUS_OK) {
		o->run->errors++;
		return;
	}
	o->run->ok++;
	if (o->want != NULL) {
		o->value_ok =
		    rep->value.tag == FSNP_BIN &&
		    rep->value.as.bin.len == o->want_len &&
		    (o->want_len == 0 ||
		     memcmp(rep->value.as.bin.ptr, o->want, o->want_len) == 0);
	}
}

static void sized_key(char *key, unsigned i, bool zlib)
{
	/* Every third key is long: key and body then exceed the reused
	 * size whatever the value. */
	size_t n = (size_t)snprintf(key, KEY_MAX, "bs:%d:%u:", zlib, i);
	size_t len = i % 3 == 0 ? KEY_MAX - 1 : n;
	for (size_t j = n; j < len; j++) {
		key[j] = (char)('a' + (i + j) % 26);
	}
	key[len] = '\0';
}

static void body_sizes(bool zlib)
{
	uv_loop_t loop;
	struct fsnp_client *c;
	struct fsnp_client_info info;
	struct run r = {0};
	static uint8_t values[N_SIZES][VALUE_MAX];
	struct sized ones[2 * N_SIZES];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	char key[KEY_MAX];
	uv_loop_init(&loop);
	c = open_ready(&loop, zlib, &r);
	fsnp_client_get_info(c, &info);
	assert_int_equal(info.zlib, zlib);
	for (unsigned i = 0; i < N_SIZES; i++) {
		/* Text that compresses, then a seeded random tail. */
		for (size_t j = 0; j < value_sizes[i]; j++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			values[i][j] = j < value_sizes[i] / 2
			                   ? (uint8_t)('a' + j % 7)
			                   : (uint8_t)rng;
		}
	}
	for (unsigned pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < N_SIZES; i++) {
			struct sized *one = &ones[pass * N_SIZES + i];
			struct wbuf b;
			struct fsnp_writer w;
			sized_key(key, i, zlib);
			*one = (struct sized){&r, pass ? values[i] : NULL,
			                      value_sizes[i], false};
			wbuf_init(&b);
			fsnp_w_init(&w, &b);
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "key");
			fsnp_w_str(&w, key);
			if (pass == 0) {
				fsnp_w_key(&w, "value");
				fsnp_w_bin(&w, values[i], value_sizes[i]);
			}
			fsnp_w_map_end(&w);
			assert_int_equal(fsnp_w_finish(&w), 0);
			assert_int_equal(
			    fsnp_client_send(
			        c, pass ? FSNP_OP_GET : FSNP_OP_SET, key,
			        strlen(key), b.data, b.len, FSNP_REQ_IDEMPOTENT,
			        on_sized, one),
			    0);
			wbuf_free(&b);
		}
		/* Every SET is answered (its request freed) before the GETs
		 * are made. */
		while (r.done < (pass + 1) * N_SIZES) {
			uv_run(&loop, UV_RUN_ONCE);
		}
	}
	assert_int_equal(r.errors, 0);
	for (unsigned i = 0; i < N_SIZES; i++) {
		if (!ones[N_SIZES + i].value_ok) {
			fail_msg(
			    "a value of %zu bytes read back wrong (zlib %d)",
			    value_sizes[i], zlib);
		}
	}
	fsnp_client_close(c, NULL, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_body_sizes(void **state)
{
	(void)state;
	body_sizes(false);
	body_sizes(true);
}

/* --- Sync client across a restart -------------------------------------------
 */

static void test_reconnect(void **state)
{
	struct fsnp_sync *s;
	struct fsnp_client_options o;
	struct wbuf b, out;
	uint16_t st;
	char err[256];
	(void)state;
	memset(&o, 0, sizeof o);
	o.host = "127.0.0.1";
	o.port = port;
	o.timeout_ms = 30000;
	assert_int_equal(fsnp_sync_open(&s, &o, err, sizeof err), 0);
	wbuf_init(&out);
	body_kv(&b, "rc:k", "before");
	assert_int_equal(fsnp_sync_call(s, FSNP_OP_SET, "rc:k", 4, b.data,
	                                b.len, 0, &st, &out),
	                 0);
	wbuf_free(&b);
	assert_int_equal(st, 0);
	/* Restart the node: the client sees GOAWAY, reconnects with jitter
	 * and sends the next request once the node is back. */
	assert_int_equal(harness_node_signal(&cluster, 0, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&cluster, 0), 0);
	body_kv(&b, "rc:k", NULL);
	assert_int_equal(fsnp_sync_call(s, FSNP_OP_GET, "rc:k", 4, b.data,
	                                b.len, FSNP_REQ_IDEMPOTENT, &st, &out),
	                 0);
	wbuf_free(&b);
	assert_int_equal(st, 0);
	struct fsnp_val v;
	assert_int_equal(fsnp_value_decode(out.data, out.len, NULL, &v, NULL),
	                 0);
	assert_true(ftc_str_eq(&v, "before"));
	wbuf_free(&out);
	fsnp_sync_close(s);
	assert_int_equal(ftc_wait_ready(port, 20000), 0);
}

/* --- Busy replies are retried by the client ------------------------------- */

static void test_busy_retried(void **state)
{
	struct fsnp_sync *s;
	struct fsnp_client_options o;
	struct wbuf b;
	uint16_t st;
	char err[256];
	struct ftc owner;
	(void)state;
	/* A window of 1 on lane 3: one waiter fills it; the client's
	 * request on that lane is answered busy until the waiter is done,
	 * and is retried after retry_after_ms. */
	memset(&o, 0, sizeof o);
	o.host = "127.0.0.1";
	o.port = port;
	o.max_attempts = 100;
	assert_int_equal(fsnp_sync_open(&s, &o, err, sizeof err), 0);
	ftc_body(&b, "max_inflight_per_lane=i", (int64_t)1);
	assert_int_equal(fsnp_sync_call(s, FSNP_OP_WINDOW_UPDATE, NULL, 0,
	                                b.data, b.len, 0, &st, NULL),
	                 0);
	wbuf_free(&b);
	assert_int_equal(st, 0);
	assert_int_equal(ftc_connect(&owner, port), 0);
	struct ftc_msg m;
	ftc_body(&b, "key=s ttl_ms=i", "busy:foc", (int64_t)600);
	assert_int_equal(
	    ftc_call(&owner, 1, FSNP_OP_FETCH_OR_COMPUTE, 0, &b, &m), 0);
	ftc_msg_free(&m);
	/* The waiter: its lease expires after 600 ms, then it computes. */
	struct run r = {0};
	struct one w = {&r, 0, false, 0};
	assert_int_equal(fsnp_client_send_lane(fsnp_sync_client(s), 3,
	                                       FSNP_OP_FETCH_OR_COMPUTE, b.data,
	                                       b.len, 0, on_reply, &w),
	                 0);
	wbuf_free(&b);
	body_kv(&b, "busy:k", "v");
	struct one x = {&r, 0, false, 0};
	assert_int_equal(fsnp_client_send_lane(fsnp_sync_client(s), 3,
	                                       FSNP_OP_SET, b.data, b.len, 0,
	                                       on_reply, &x),
	                 0);
	wbuf_free(&b);
	while (r.done < 2) {
		uv_run(fsnp_sync_loop(s), UV_RUN_ONCE);
	}
	assert_int_equal(r.ok, 2);
	assert_true(x.attempts > 1); /* it was answered busy first */
	ftc_close(&owner);
	fsnp_sync_close(s);
}

/* --- lodectl
 * ------------------------------------------------------------------ */

static int lodectl(char *out, size_t cap, const char *a1, const char *a2,
                   const char *a3, const char *a4, const char *a5)
{
	char addr[32];
	snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--fsnp",
	                      addr,
	                      a1,
	                      a2,
	                      a3,
	                      a4,
	                      a5,
	                      NULL};
	return harness_run(argv, out, cap);
}

static void test_lodectl(void **state)
{
	char out[8192];
	(void)state;
	assert_int_equal(
	    lodectl(out, sizeof out, "ping", NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "PONG"));
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "set", "lc:a", "hello", NULL), 0);
	assert_non_null(strstr(out, "OK"));
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "get", "lc:a", NULL, NULL), 0);
	assert_non_null(strstr(out, "hello"));
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "rpush", "lc:l", "x", "y"), 0);
	assert_non_null(strstr(out, "(integer) 2"));
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "lrange", "lc:l", "0", "-1"), 0);
	assert_non_null(strstr(out, "1) x"));
	assert_non_null(strstr(out, "2) y"));
	/* A server error exits 1 with its text. */
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "get", "lc:l", NULL, NULL), 1);
	assert_non_null(strstr(out, "WRONGTYPE"));
	/* `FAMILY help` lists the subcommands, without a server. */
	assert_int_equal(
	    lodectl(out, sizeof out, "stream", "help", NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "stream create"));
	assert_int_equal(
	    lodectl(out, sizeof out, "felix", "help", NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "publish"));
	/* Bad usage exits 2; an unreachable server 3. */
	assert_int_equal(
	    lodectl(out, sizeof out, "kv", "nosuch", NULL, NULL, NULL), 2);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--fsnp",
	                      "127.0.0.1:1",
	                      "--timeout-ms",
	                      "1000",
	                      "ping",
	                      NULL};
	assert_int_equal(harness_run(argv, out, sizeof out), 3);
	const char *j[] = {LS_ABS_BUILDDIR "/lodectl",
	                   "--json",
	                   "--fsnp",
	                   NULL,
	                   "kv",
	                   "mget",
	                   "lc:a",
	                   "nope",
	                   NULL};
	char addr[32];
	snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
	j[3] = addr;
	assert_int_equal(harness_run(j, out, sizeof out), 0);
	assert_non_null(strstr(out, "[\"hello\",null]"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_async_pipelined),
	    cmocka_unit_test(test_body_sizes),
	    cmocka_unit_test(test_reconnect),
	    cmocka_unit_test(test_busy_retried),
	    cmocka_unit_test(test_lodectl),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
