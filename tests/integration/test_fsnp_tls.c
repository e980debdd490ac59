/* Integration: FSNP over TLS (net/tls.c). A dev-mode node serves the
 * TLS listener with its generated certificate: round trips, pipelined
 * requests, a large response split into chunks, the trace flag, a
 * plaintext client on the TLS port (answered in plaintext, closed, the
 * listener keeps serving) and GOAWAY over TLS on SIGTERM. A second node
 * requires TLS (plaintext refused with a clear error) and, with --tls-ca,
 * client certificates signed by that CA. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

static struct harness_cluster dev;
static char dev_cert[600];

static struct ftc_msg call(struct ftc *c, uint16_t op, uint8_t flags,
                           const char *fmt, ...)
{
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, flags, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void connect_dev(struct ftc *c)
{
	if (ftc_connect_tls(c, dev.nodes[0].fsnp_tls, dev_cert, NULL, NULL) !=
	    0) {
		fprintf(stderr, "TLS connect: %s\n", c->tls_err);
		fail();
	}
}

static int setup(void **state)
{
	static const char *const extra[] = {"--dev",
	                                    "--shards",
	                                    "2",
	                                    "--fsnp-trace",
	                                    "--fsnp-response-chunk-bytes",
	                                    "65536",
	                                    NULL};
	uint16_t port;
	(void)state;
	if (ftc_start(&dev, 1, extra, &port) != 0) {
		return -1;
	}
	snprintf(dev_cert, sizeof dev_cert, "%s/tls/dev-cert.pem",
	         dev.nodes[0].data_dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&dev);
	return 0;
}

static void test_round_trip(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	(void)state;
	connect_dev(&c);
	m = call(&c, FSNP_OP_STARTUP, 0, "client_name=s", "tls-test");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_SET, 0, "key=s value=s", "tls:a", "over tls");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_GET, 0, "key=s", "tls:a");
	assert_int_equal(m.status, 0);
	assert_true(ftc_str_eq(&m.value, "over tls"));
	ftc_msg_free(&m);

	/* OPTIONS tells the truth about the TLS listener. */
	m = call(&c, FSNP_OP_OPTIONS, 0, "");
	assert_int_equal(m.status, 0);
	struct fsnp_val caps = m.value, feat, set;
	assert_int_equal(fsnp_map_get(&caps, "features", &feat), 0);
	assert_int_equal(fsnp_map_get(&feat, "tls", &set), 0);
	assert_int_equal(set.tag, FSNP_TRUE);
	assert_int_equal(fsnp_map_get(&caps, "settings", &set), 0);
	assert_int_equal(ftc_map_int(&set, "FERRICSTORE_NATIVE_TLS_PORT"),
	                 dev.nodes[0].fsnp_tls);
	ftc_msg_free(&m);
	/* STARTUP's route names the TLS port too. */
	m = call(&c, FSNP_OP_STARTUP, 0, "");
	assert_int_equal(fsnp_map_get(&m.value, "route", &set), 0);
	assert_int_equal(ftc_map_int(&set, "native_tls_port"),
	                 dev.nodes[0].fsnp_tls);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_pipelined(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	uint64_t first = 0;
	(void)state;
	connect_dev(&c);
	for (int i = 0; i < 300; i++) {
		char k[32], v[32];
		snprintf(k, sizeof k, "tls:p%d", i);
		snprintf(v, sizeof v, "v%d", i);
		ftc_body(&b, "key=s value=s", k, v);
		uint64_t rid =
		    ftc_send(&c, 1 + (uint32_t)(i % 3), FSNP_OP_SET, 0, &b);
		wbuf_free(&b);
		if (first == 0) {
			first = rid;
		}
	}
	for (int i = 0; i < 300; i++) {
		assert_int_equal(ftc_recv(&c, &m, 10000), 0);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	for (int i = 0; i < 300; i++) {
		char k[32];
		snprintf(k, sizeof k, "tls:p%d", i);
		ftc_body(&b, "key=s", k);
		ftc_send(&c, 1, FSNP_OP_GET, 0, &b);
		wbuf_free(&b);
	}
	/* One lane: replies in order. */
	for (int i = 0; i < 300; i++) {
		char v[32];
		snprintf(v, sizeof v, "v%d", i);
		assert_int_equal(ftc_recv(&c, &m, 10000), 0);
		assert_int_equal(m.status, 0);
		assert_true(ftc_str_eq(&m.value, v));
		ftc_msg_free(&m);
	}
	ftc_close(&c);
}

static void test_large_chunked(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_writer w;
	size_t n = 3u << 20;
	uint8_t *big = malloc(n);
	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < n; i++) {
		big[i] = (uint8_t)(i * 7 + i / 4096);
	}
	connect_dev(&c);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "tls:big");
	fsnp_w_key(&w, "value");
	fsnp_w_bin(&w, big, n);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(ftc_call(&c, 1, FSNP_OP_SET, 0, &b, &m), 0);
	wbuf_free(&b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_GET, 0, "key=s", "tls:big");
	assert_int_equal(m.status, 0);
	assert_true(m.frames > 40); /* 64 KiB chunks */
	assert_true(m.max_frame_body <= 65536);
	assert_int_equal(m.value.tag, FSNP_BIN);
	assert_int_equal(m.value.as.bin.len, n);
	assert_memory_equal(m.value.as.bin.ptr, big, n);
	ftc_msg_free(&m);
	ftc_close(&c);
	free(big);
}

static void test_trace(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	(void)state;
	connect_dev(&c);
	m = call(&c, FSNP_OP_SET, FSNP_FLAG_TRACE, "key=s value=s", "tls:t",
	         "x");
	assert_int_equal(m.status, 0);
	assert_true(m.flags & FSNP_FLAG_TRACE);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_GET, 0, "key=s", "tls:t");
	assert_int_equal(m.status, 0);
	assert_false(m.flags & FSNP_FLAG_TRACE);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static void test_plaintext_on_tls_port(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	char text[256];
	(void)state;
	assert_int_equal(ftc_connect(&c, dev.nodes[0].fsnp_tls), 0);
	ftc_body(&b, "");
	uint64_t rid = ftc_send(&c, 0, FSNP_OP_STARTUP, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.h.request_id, rid);
	assert_int_equal(m.status, FSNP_STATUS_BAD_REQUEST);
	ftc_error_text(&m, text, sizeof text);
	assert_non_null(strstr(text, "TLS"));
	ftc_msg_free(&m);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
	/* Garbage that is neither TLS nor FSNP: closed too. */
	assert_int_equal(ftc_connect(&c, dev.nodes[0].fsnp_tls), 0);
	assert_int_equal(ftc_send_raw(&c, "GET / HTTP/1.0\r\n\r\n", 18), 0);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);
	/* The listener still serves. */
	connect_dev(&c);
	m = call(&c, FSNP_OP_PING, 0, "");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
}

/* Runs last: SIGTERM drains the dev node. A fetch-or-compute waiter is in
 * flight (another connection holds the lease): it is answered "reroute",
 * GOAWAY arrives, then the session ends with close_notify. */
static void test_goaway_over_tls(void **state)
{
	struct ftc c, owner;
	struct ftc_msg m;
	struct wbuf b;
	int status = -1;
	bool goaway = false, rerouted = false;
	(void)state;
	connect_dev(&c);
	connect_dev(&owner);
	for (int i = 0; i < 50; i++) {
		char k[32];
		snprintf(k, sizeof k, "tls:g%d", i);
		ftc_body(&b, "key=s value=s", k, "v");
		ftc_send(&c, 1 + (uint32_t)(i % 2), FSNP_OP_SET, 0, &b);
		wbuf_free(&b);
	}
	for (int i = 0; i < 50; i++) {
		assert_int_equal(ftc_recv(&c, &m, 10000), 0);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	m = call(&owner, FSNP_OP_FETCH_OR_COMPUTE, 0, "key=s ttl_ms=i",
	         "tls:foc", (int64_t)20000);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_body(&b, "key=s ttl_ms=i", "tls:foc", (int64_t)20000);
	uint64_t waiter = ftc_send(&c, 3, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 300), -1);

	assert_int_equal(harness_node_signal(&dev, 0, SIGTERM, &status), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	while (ftc_recv(&c, &m, 2000) == 0) {
		if (m.h.request_id == 0 && m.h.opcode == FSNP_OP_GOAWAY) {
			assert_true(
			    ftc_map_str(&m.value, "reason", "server_shutdown"));
			goaway = true;
		} else {
			assert_int_equal(m.h.request_id, waiter);
			assert_int_equal(m.status, FSNP_STATUS_REROUTE);
			rerouted = true;
		}
		ftc_msg_free(&m);
	}
	assert_true(goaway);
	assert_true(rerouted);
	ftc_close(&c);
	ftc_close(&owner);
}

/* --- require_tls and client certificates --------------------------------
 */

static int openssl_selfsigned(const char *dir, const char *name)
{
	char key[600], crt[600], subj[100], out[4096];
	snprintf(key, sizeof key, "%s/%s-key.pem", dir, name);
	snprintf(crt, sizeof crt, "%s/%s-cert.pem", dir, name);
	snprintf(subj, sizeof subj, "/CN=%s", name);
	const char *argv[] = {"openssl",
	                      "req",
	                      "-x509",
	                      "-newkey",
	                      "ec",
	                      "-pkeyopt",
	                      "ec_paramgen_curve:P-256",
	                      "-nodes",
	                      "-days",
	                      "2",
	                      "-subj",
	                      subj,
	                      "-keyout",
	                      key,
	                      "-out",
	                      crt,
	                      NULL};
	return harness_run(argv, out, sizeof out);
}

static void test_require_tls_and_client_certs(void **state)
{
	struct harness_cluster cl;
	char dir[] = "/tmp/ls-fsnp-tls-XXXXXX";
	char ca[600], cert[600], key[600], ocert[600], okey[600], srv[600];
	char text[256];
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	(void)state;
	assert_non_null(mkdtemp(dir));
	if (openssl_selfsigned(dir, "client") != 0 ||
	    openssl_selfsigned(dir, "other") != 0) {
		skip();
	}
	snprintf(ca, sizeof ca, "%s/client-cert.pem", dir);
	snprintf(cert, sizeof cert, "%s/client-cert.pem", dir);
	snprintf(key, sizeof key, "%s/client-key.pem", dir);
	snprintf(ocert, sizeof ocert, "%s/other-cert.pem", dir);
	snprintf(okey, sizeof okey, "%s/other-key.pem", dir);
	const char *extra[] = {
	    "--dev",    "--shards", "1", "--fsnp-require-tls",
	    "--tls-ca", ca,         NULL};
	assert_int_equal(harness_cluster_start(&cl, 1, extra, true), 0);
	snprintf(srv, sizeof srv, "%s/tls/dev-cert.pem", cl.nodes[0].data_dir);

	/* Plaintext: the first request is answered NOPERM tls_required,
	 * then the connection closes. */
	assert_int_equal(ftc_connect(&c, cl.nodes[0].fsnp), 0);
	ftc_body(&b, "");
	ftc_send(&c, 0, FSNP_OP_STARTUP, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 5000), 0);
	assert_int_equal(m.status, FSNP_STATUS_NOPERM);
	assert_true(ftc_map_str(&m.value, "code", "tls_required"));
	ftc_error_text(&m, text, sizeof text);
	assert_non_null(strstr(text, "require_tls"));
	ftc_msg_free(&m);
	assert_true(ftc_wait_closed(&c, 5000));
	ftc_close(&c);

	/* No client certificate, or one the CA did not sign: refused
	 * (with TLS 1.3 the client may finish its side of the handshake
	 * first; the server's alert then ends the connection). */
	const char *certs[2] = {NULL, ocert};
	const char *keys[2] = {NULL, okey};
	for (int i = 0; i < 2; i++) {
		if (ftc_connect_tls(&c, cl.nodes[0].fsnp_tls, srv, certs[i],
		                    keys[i]) == 0) {
			ftc_body(&b, "");
			assert_int_not_equal(
			    ftc_call(&c, 0, FSNP_OP_PING, 0, &b, &m), 0);
			wbuf_free(&b);
			ftc_close(&c);
		}
	}

	/* The signed client gets in, and the node still serves. */
	if (ftc_connect_tls(&c, cl.nodes[0].fsnp_tls, srv, cert, key) != 0) {
		fprintf(stderr, "TLS connect: %s\n", c.tls_err);
		fail();
	}
	m = call(&c, FSNP_OP_SET, 0, "key=s value=s", "mtls:a", "b");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = call(&c, FSNP_OP_GET, 0, "key=s", "mtls:a");
	assert_true(ftc_str_eq(&m.value, "b"));
	ftc_msg_free(&m);
	ftc_close(&c);
	/* lodectl presents the client certificate. */
	{
		char addr[64], out2[4096];
		snprintf(addr, sizeof addr, "127.0.0.1:%u",
		         cl.nodes[0].fsnp_tls);
		const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
		                      "--fsnp",
		                      addr,
		                      "--fsnp-tls",
		                      "--tls-ca",
		                      srv,
		                      "--tls-cert",
		                      cert,
		                      "--tls-key",
		                      key,
		                      "kv",
		                      "get",
		                      "mtls:a",
		                      NULL};
		assert_int_equal(harness_run(argv, out2, sizeof out2), 0);
		assert_non_null(strstr(out2, "b"));
	}
	harness_cluster_stop(&cl);

	char rm[700], out[256];
	snprintf(rm, sizeof rm, "%s", dir);
	const char *argv[] = {"rm", "-rf", rm, NULL};
	harness_run(argv, out, sizeof out);
}

/* liblodestone's FSNP client over TLS, through lodectl: the server's
 * certificate must verify and name the host dialled. */
static int lodectl_tls(char *out, size_t cap, const char *host, const char *ca,
                       const char *a1, const char *a2, const char *a3,
                       const char *a4)
{
	char addr[300];
	snprintf(addr, sizeof addr, "%s:%u", host, dev.nodes[0].fsnp_tls);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--timeout-ms",
	                      "5000",
	                      "--fsnp",
	                      addr,
	                      "--fsnp-tls",
	                      ca != NULL ? "--tls-ca" : a1,
	                      ca != NULL ? ca : a2,
	                      ca != NULL ? a1 : a3,
	                      ca != NULL ? a2 : a4,
	                      ca != NULL ? a3 : NULL,
	                      ca != NULL ? a4 : NULL,
	                      NULL};
	return harness_run(argv, out, cap);
}

static void test_lodectl_tls(void **state)
{
	char out[4096];
	(void)state;
	if (lodectl_tls(out, sizeof out, "127.0.0.1", dev_cert, "kv", "set",
	                "ltls:a", "hello") != 0) {
		fail_msg("lodectl over TLS: %s", out);
	}
	assert_non_null(strstr(out, "OK"));
	/* The dev certificate names localhost too (SNI + DNS SAN). */
	assert_int_equal(lodectl_tls(out, sizeof out, "localhost", dev_cert,
	                             "kv", "get", "ltls:a", NULL),
	                 0);
	assert_non_null(strstr(out, "hello"));
	/* Not signed by a CA the client trusts: refused at once, with the
	 * reason, exit 3 (unreachable). */
	assert_int_equal(lodectl_tls(out, sizeof out, "127.0.0.1", NULL, "kv",
	                             "get", "ltls:a", NULL),
	                 3);
	assert_non_null(strstr(out, "certificate not verified"));
	/* TLS to the plaintext port: the server hangs up; the client says
	 * so when it gives up. */
	{
		char addr[64];
		snprintf(addr, sizeof addr, "127.0.0.1:%u", dev.nodes[0].fsnp);
		const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
		                      "--timeout-ms",
		                      "1000",
		                      "--fsnp",
		                      addr,
		                      "--fsnp-tls",
		                      "--tls-ca",
		                      dev_cert,
		                      "ping",
		                      NULL};
		assert_int_equal(harness_run(argv, out, sizeof out), 3);
		assert_non_null(strstr(out, "closed by the server"));
	}
	/* Not with topology routing. */
	{
		const char *argv[] = {LS_ABS_BUILDDIR "/lodectl", "--fsnp-tls",
		                      "--topology", "ping", NULL};
		assert_int_equal(harness_run(argv, out, sizeof out), 2);
	}
}

/* --maxclients counts the TCP and TLS listeners' connections together. */
static void test_maxclients_both_listeners(void **state)
{
	static const char *const extra[] = {"--dev", "--maxclients", "6", NULL};
	struct harness_cluster mc;
	struct ftc tcp[4], tls[3], over;
	char cert[600];
	(void)state;
	assert_int_equal(harness_cluster_start(&mc, 1, extra, true), 0);
	snprintf(cert, sizeof cert, "%s/tls/dev-cert.pem",
	         mc.nodes[0].data_dir);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ftc_connect(&tcp[i], mc.nodes[0].fsnp), 0);
		struct ftc_msg m = call(&tcp[i], FSNP_OP_PING, 0, "");
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
		assert_int_equal(ftc_connect_tls(&tls[i], mc.nodes[0].fsnp_tls,
		                                 cert, NULL, NULL),
		                 0);
		m = call(&tls[i], FSNP_OP_PING, 0, "");
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	/* Six in all: a seventh is closed, on either listener. */
	assert_int_equal(ftc_connect(&tcp[3], mc.nodes[0].fsnp), 0);
	assert_true(ftc_wait_closed(&tcp[3], 3000));
	ftc_close(&tcp[3]);
	assert_int_not_equal(
	    ftc_connect_tls(&over, mc.nodes[0].fsnp_tls, cert, NULL, NULL), 0);
	ftc_close(&over);
	/* One closes: one more fits. */
	ftc_close(&tls[2]);
	harness_nap(300);
	assert_int_equal(
	    ftc_connect_tls(&tls[2], mc.nodes[0].fsnp_tls, cert, NULL, NULL),
	    0);
	struct ftc_msg m = call(&tls[2], FSNP_OP_PING, 0, "");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	for (int i = 0; i < 3; i++) {
		ftc_close(&tcp[i]);
		ftc_close(&tls[i]);
	}
	harness_cluster_stop(&mc);
}

int main(void)
{
	const struct CMUnitTest dev_tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_pipelined),
	    cmocka_unit_test(test_large_chunked),
	    cmocka_unit_test(test_trace),
	    cmocka_unit_test(test_plaintext_on_tls_port),
	    cmocka_unit_test(test_lodectl_tls),
	    cmocka_unit_test(test_goaway_over_tls), /* the node drains */
	};
	const struct CMUnitTest ca_tests[] = {
	    cmocka_unit_test(test_require_tls_and_client_certs),
	    cmocka_unit_test(test_maxclients_both_listeners),
	};
	int rv = cmocka_run_group_tests_name("dev", dev_tests, setup, teardown);
	return rv | cmocka_run_group_tests_name("mtls", ca_tests, NULL, NULL);
}
