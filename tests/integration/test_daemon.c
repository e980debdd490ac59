/* Integration: the lodestone daemon as a real process — CLI errors, the
 * data-dir lock, /healthz and a graceful SIGTERM drain. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/integration/harness.h"

static void test_version_and_help(void **state)
{
	char out[8192];
	(void)state;
	const char *v[] = {harness_binary(), "--version", NULL};
	assert_int_equal(harness_run(v, out, sizeof out), 0);
	assert_non_null(strstr(out, "lodestone "));
	const char *h[] = {harness_binary(), "--help", NULL};
	assert_int_equal(harness_run(h, out, sizeof out), 0);
	assert_non_null(strstr(out, "--peers"));
	assert_non_null(strstr(out, "LODESTONE_"));
}

static void test_bad_flags_exit_2(void **state)
{
	char out[8192];
	(void)state;
	const char *a[] = {harness_binary(), "--shards", "zero", NULL};
	assert_int_equal(harness_run(a, out, sizeof out), 2);
	assert_non_null(strstr(out, "'shards'"));
	const char *b[] = {harness_binary(), "--no-such-flag", NULL};
	assert_int_equal(harness_run(b, out, sizeof out), 2);
	assert_non_null(strstr(out, "--no-such-flag"));
}

static void test_healthz_lock_and_drain(void **state)
{
	struct harness_cluster c;
	char body[1024], out[8192];
	int st;
	(void)state;
	assert_int_equal(harness_cluster_start(&c, 1, NULL, true), 0);
	assert_int_equal(harness_http(c.nodes[0].admin, "GET", "/healthz", NULL,
	                              &st, body, sizeof body),
	                 0);
	assert_int_equal(st, 200);
	assert_non_null(strstr(body, "\"status\":\"ok\""));
	assert_int_equal(harness_http(c.nodes[0].admin, "GET", "/nope", NULL,
	                              &st, body, sizeof body),
	                 0);
	assert_int_equal(st, 404);
	assert_int_equal(harness_http(c.nodes[0].admin, "GET", "/metrics",
				      NULL, &st, body, sizeof body),
			 0);
	assert_int_equal(st, 200);
	assert_non_null(strstr(body, "# TYPE lodestone_uptime_seconds gauge"));
	assert_int_equal(harness_http(c.nodes[0].admin, "POST", "/healthz",
				      "x", &st, body, sizeof body),
			 0);
	assert_int_equal(st, 405);

	/* A second process on the same data dir refuses to run. */
	char admin[32];
	snprintf(admin, sizeof admin, "127.0.0.1:%u", harness_free_port());
	const char *second[] = {harness_binary(), "--data", c.nodes[0].data_dir,
	                        "--admin",        admin,    NULL};
	int rc = harness_run(second, out, sizeof out);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(out, "in use by another lodestone process"));

	/* SIGTERM drains and exits 0. */
	assert_int_equal(harness_node_signal(&c, 0, SIGTERM, &st), 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* The lock is released: the node restarts on the same dir. */
	assert_int_equal(harness_node_start(&c, 0), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 0, 15000), 0);
	harness_cluster_stop(&c);
}

static void test_dev_certificate(void **state)
{
	struct harness_cluster c;
	char path[600], out[8192];
	(void)state;
	const char *extra[] = {"--dev", NULL};
	assert_int_equal(harness_cluster_start(&c, 1, extra, true), 0);
	snprintf(path, sizeof path, "%s/tls/dev-cert.pem", c.nodes[0].data_dir);
	const char *x509[] = {"openssl", "x509",  "-in", path,
	                      "-noout",  "-text", NULL};
	int rc = harness_run(x509, out, sizeof out);
	if (rc == 127) {
		harness_cluster_stop(&c);
		fail_msg("the openssl command is needed to inspect the cert");
	}
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "CA:FALSE"));
	assert_non_null(strstr(out, "DNS:localhost"));
	assert_non_null(strstr(out, "IP Address:127.0.0.1"));
	harness_cluster_stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_version_and_help),
	    cmocka_unit_test(test_bad_flags_exit_2),
	    cmocka_unit_test(test_healthz_lock_and_drain),
	    cmocka_unit_test(test_dev_certificate),
	};
	return cmocka_run_group_tests_name("daemon", tests, NULL, NULL);
}
