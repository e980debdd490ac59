/* Unit tests for node/config: precedence, parsing and error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/config.h"

static int load(struct node_config *c, const char *const *argv,
                const char *const *env, char *err)
{
	int argc = 0;
	enum config_action action;
	while (argv[argc] != NULL) {
		argc++;
	}
	return config_load(c, argc, (char *const *)argv, (char *const *)env,
	                   &action, err, 512);
}

static void test_defaults(void **state)
{
	struct node_config c;
	char err[512];
	const char *argv[] = {"lodestone", NULL};
	const char *env[] = {NULL};
	(void)state;
	assert_int_equal(load(&c, argv, env, err), 0);
	assert_int_equal(c.felix.port, 5000);
	assert_int_equal(c.fsnp.port, 6388);
	assert_int_equal(c.fsnp_tls.port, 6389);
	assert_int_equal(c.internal.port, 7000);
	assert_int_equal(c.admin.port, 8080);
	assert_string_equal(c.data_dir, "/var/lib/lodestone");
	assert_string_equal(c.cluster_id, "lodestone");
	assert_int_equal(c.shards, 8);
	assert_int_equal(c.replicas, 3);
	assert_int_equal(c.rebalance_concurrency, 2);
	assert_int_equal(c.join.port, 0);
	assert_int_equal(c.node_id, 1);
}

static void test_dev_defaults(void **state)
{
	struct node_config c;
	char err[512];
	const char *argv[] = {"lodestone", "--dev", NULL};
	const char *env[] = {NULL};
	(void)state;
	assert_int_equal(load(&c, argv, env, err), 0);
	assert_true(c.dev);
	assert_string_equal(c.data_dir, "./var/dev");
	assert_string_equal(c.felix.host, "127.0.0.1");
	assert_string_equal(c.advertise_host, "127.0.0.1");
}

/* The security options: protected mode (on, off under --dev unless
 * given; `--flag yes|no` as Redis spells it), the auth deadline, the
 * admin token file. */
static void test_security_options(void **state)
{
	struct node_config c;
	char err[512];
	const char *env[] = {NULL};
	(void)state;
	const char *plain[] = {"lodestone", NULL};
	assert_int_equal(load(&c, plain, env, err), 0);
	assert_true(c.native.protected_mode);
	assert_int_equal(c.native.auth_timeout_ms, 10000);
	assert_int_equal(c.native.auth_max_failures, 10);
	assert_string_equal(c.admin_token_file, "");
	const char *dev[] = {"lodestone", "--dev", NULL};
	assert_int_equal(load(&c, dev, env, err), 0);
	assert_false(c.native.protected_mode);
	const char *dev_on[] = {"lodestone", "--dev", "--protected-mode", "yes",
	                        NULL};
	assert_int_equal(load(&c, dev_on, env, err), 0);
	assert_true(c.native.protected_mode);
	const char *off[] = {"lodestone", "--protected-mode",
	                     "no",        "--fsnp-auth-timeout-ms",
	                     "250",       "--admin-token-file",
	                     "/etc/t",    NULL};
	assert_int_equal(load(&c, off, env, err), 0);
	assert_false(c.native.protected_mode);
	assert_int_equal(c.native.auth_timeout_ms, 250);
	assert_string_equal(c.admin_token_file, "/etc/t");
	const char *eq[] = {"lodestone", "--protected-mode=off", NULL};
	assert_int_equal(load(&c, eq, env, err), 0);
	assert_false(c.native.protected_mode);
	const char *envs[] = {"LODESTONE_PROTECTED_MODE=false",
	                      "LODESTONE_FSNP_AUTH_TIMEOUT_MS=0", NULL};
	assert_int_equal(load(&c, plain, envs, err), 0);
	assert_false(c.native.protected_mode);
	assert_int_equal(c.native.auth_timeout_ms, 0);
	const char *bad[] = {"lodestone", "--fsnp-auth-timeout-ms", "-1", NULL};
	assert_int_not_equal(load(&c, bad, env, err), 0);
	const char *fails[] = {"lodestone", "--auth-max-failures", "3", NULL};
	assert_int_equal(load(&c, fails, env, err), 0);
	assert_int_equal(c.native.auth_max_failures, 3);
	const char *unlimited[] = {"lodestone", "--auth-max-failures=0", NULL};
	assert_int_equal(load(&c, unlimited, env, err), 0);
	assert_int_equal(c.native.auth_max_failures, 0);
	const char *badf[] = {"lodestone", "--auth-max-failures", "x", NULL};
	assert_int_not_equal(load(&c, badf, env, err), 0);
}

static void test_flow_scheduler(void **state)
{
	struct node_config c;
	char err[512];
	const char *env[] = {NULL};
	(void)state;
	const char *plain[] = {"lodestone", NULL};
	assert_int_equal(load(&c, plain, env, err), 0);
	assert_true(c.flow_scheduler);
	const char *off[] = {"lodestone", "--flow-scheduler", "off", NULL};
	assert_int_equal(load(&c, off, env, err), 0);
	assert_false(c.flow_scheduler);
	const char *on[] = {"lodestone", "--flow-scheduler", "on", NULL};
	assert_int_equal(load(&c, on, env, err), 0);
	assert_true(c.flow_scheduler);
	const char *envs[] = {"LODESTONE_FLOW_SCHEDULER=off", NULL};
	assert_int_equal(load(&c, plain, envs, err), 0);
	assert_false(c.flow_scheduler);
	const char *bad[] = {"lodestone", "--flow-scheduler=sometimes", NULL};
	assert_int_not_equal(load(&c, bad, env, err), 0);
}

static void test_precedence(void **state)
{
	struct node_config c;
	char err[512];
	char path[] = "/tmp/lodestone-config-XXXXXX";
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	const char *text = "# comment\nshards = 16\nnode_id = 4\n"
	                   "cluster-id = \"from file\"   # trailing\n"
	                   "log-level = debug\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	const char *argv[] = {"lodestone", "--config", path, "--node-id=7",
	                      NULL};
	const char *env[] = {"LODESTONE_NODE_ID=5", "LODESTONE_SHARDS=32",
	                     "PATH=/bin", NULL};
	assert_int_equal(load(&c, argv, env, err), 0);
	assert_int_equal(c.node_id, 7); /* flag beats env and file */
	assert_int_equal(c.shards, 32); /* env beats file */
	assert_string_equal(c.cluster_id, "from file");
	assert_int_equal(c.log_level, LOG_DEBUG);

	const char *env2[] = {"LODESTONE_CONFIG=/nonexistent/x.conf", NULL};
	const char *argv2[] = {"lodestone", NULL};
	assert_int_equal(load(&c, argv2, env2, err), -1);
	assert_non_null(strstr(err, "/nonexistent/x.conf"));
	unlink(path);
}

static void test_bad_values(void **state)
{
	struct node_config c;
	char err[512];
	const char *env[] = {NULL};
	(void)state;
	const char *a1[] = {"lodestone", "--shards", "0", NULL};
	assert_int_equal(load(&c, a1, env, err), -1);
	assert_non_null(strstr(err, "'shards'"));
	assert_non_null(strstr(err, "--shards"));

	/* Up to one group per FSNP hash slot. */
	const char *a1b[] = {"lodestone", "--shards", "16385", NULL};
	assert_int_equal(load(&c, a1b, env, err), -1);
	assert_non_null(strstr(err, "'shards'"));
	const char *a1c[] = {"lodestone", "--shards", "16384", "--no-quiesce",
	                     NULL};
	assert_int_equal(load(&c, a1c, env, err), 0);
	assert_int_equal(c.shards, 16384);
	assert_true(c.no_quiesce);

	const char *a2[] = {"lodestone", "--felix", "localhost", NULL};
	assert_int_equal(load(&c, a2, env, err), -1);
	assert_non_null(strstr(err, "'felix'"));

	const char *a3[] = {"lodestone", "--bogus", NULL};
	assert_int_equal(load(&c, a3, env, err), -1);
	assert_non_null(strstr(err, "--bogus"));

	const char *a4[] = {"lodestone", "--join", "10.0.0.1:7000", NULL};
	assert_int_equal(load(&c, a4, env, err), -1);
	assert_non_null(strstr(err, "--node-id"));

	const char *a4b[] = {"lodestone", "--join", "10.0.0.1:7000",
	                     "--node-id", "4",      "--peers",
	                     "4=a:7000",  NULL};
	assert_int_equal(load(&c, a4b, env, err), -1);
	assert_non_null(strstr(err, "'join'"));

	const char *a5[] = {"lodestone", "--peers", "1=a:1,1=b:2", NULL};
	assert_int_equal(load(&c, a5, env, err), -1);
	assert_non_null(strstr(err, "listed twice"));

	const char *env6[] = {"LODESTONE_LOG_LEVEL=loud", NULL};
	const char *a6[] = {"lodestone", NULL};
	assert_int_equal(load(&c, a6, env6, err), -1);
	assert_non_null(strstr(err, "LODESTONE_LOG_LEVEL"));

	const char *a7[] = {"lodestone", "--node-id", NULL};
	assert_int_equal(load(&c, a7, env, err), -1);
	assert_non_null(strstr(err, "needs a value"));
}

static void test_internal_tls(void **state)
{
	struct node_config c;
	char err[512];
	const char *env[] = {NULL};
	(void)state;
	const char *a1[] = {"lodestone", "--internal-tls-cert",
	                    "n.crt",     "--internal-tls-key",
	                    "n.key",     NULL};
	assert_int_equal(load(&c, a1, env, err), -1);
	assert_non_null(strstr(err, "'internal-tls-ca'"));
	assert_non_null(strstr(err, "together"));

	const char *a2[] = {"lodestone", "--internal-tls-ca", "ca.crt", NULL};
	assert_int_equal(load(&c, a2, env, err), -1);
	assert_non_null(strstr(err, "'internal-tls-cert'"));

	const char *env3[] = {"LODESTONE_INTERNAL_TLS_KEY=n.key", NULL};
	const char *a3[] = {"lodestone", "--internal-tls-cert",
	                    "n.crt",     "--internal-tls-ca",
	                    "ca.crt",    NULL};
	assert_int_equal(load(&c, a3, env3, err), 0);
	assert_string_equal(c.internal_tls_key, "n.key");
	assert_string_equal(c.internal_tls_cert, "n.crt");
	assert_string_equal(c.internal_tls_ca, "ca.crt");

	/* --dev does not turn it on. */
	const char *a4[] = {"lodestone", "--dev", NULL};
	assert_int_equal(load(&c, a4, env, err), 0);
	assert_string_equal(c.internal_tls_cert, "");
	assert_string_equal(c.internal_tls_ca, "");
}

static void test_peers(void **state)
{
	struct node_config c;
	char err[512];
	const char *env[] = {NULL};
	(void)state;
	const char *a[] = {"lodestone",
	                   "--node-id",
	                   "2",
	                   "--internal",
	                   "127.0.0.1:7002",
	                   "--peers",
	                   "1=127.0.0.1:7001,2=127.0.0.1:7002,3=[::1]:7003",
	                   NULL};
	assert_int_equal(load(&c, a, env, err), 0);
	assert_int_equal(c.n_peers, 3);
	assert_int_equal(config_node_count(&c), 3);
	assert_int_equal(c.replicas, 3);
	assert_string_equal(c.peers[2].addr.host, "::1");
	assert_int_equal(c.peers[2].addr.port, 7003);

	const char *b[] = {"lodestone",
	                   "--node-id",
	                   "4",
	                   "--join",
	                   "127.0.0.1:7001",
	                   "--rebalance-concurrency",
	                   "3",
	                   NULL};
	assert_int_equal(load(&c, b, env, err), 0);
	assert_string_equal(c.join.host, "127.0.0.1");
	assert_int_equal(c.join.port, 7001);
	assert_int_equal(c.rebalance_concurrency, 3);
	assert_int_equal(c.replicas, 3);
}

static void test_addr(void **state)
{
	struct config_addr a;
	(void)state;
	memset(&a, 0, sizeof a);
	assert_int_equal(config_parse_addr("10.0.0.1:99", &a), 0);
	assert_string_equal(a.host, "10.0.0.1");
	assert_int_equal(a.port, 99);
	assert_int_equal(config_parse_addr("[fe80::1]:5", &a), 0);
	assert_string_equal(a.host, "fe80::1");
	assert_int_equal(config_parse_addr("fe80::1:5", &a), -1);
	assert_int_equal(config_parse_addr("h:0", &a), -1);
	assert_int_equal(config_parse_addr("h:65536", &a), -1);
	assert_int_equal(config_parse_addr("h:12x", &a), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_dev_defaults),
	    cmocka_unit_test(test_security_options),
	    cmocka_unit_test(test_flow_scheduler),
	    cmocka_unit_test(test_precedence),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_peers),
	    cmocka_unit_test(test_internal_tls),
	    cmocka_unit_test(test_addr),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
