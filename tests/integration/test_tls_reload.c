/* Integration: internal mutual TLS certificates rotated without a restart
 * (docs/operations.md "Internal TLS", SIGHUP).
 *
 * Three nodes with internal TLS from CA 1. The CA is replaced the way the
 * documentation says, each step followed by SIGHUP to every node (no
 * restart): the CA file trusts CA 1 and CA 2, the node certificates are
 * replaced by CA 2's, the CA file trusts CA 2 alone. Each node logs the
 * reload. A SIGHUP while a key file is broken keeps the previous
 * certificate (logged). Then node 3 is restarted: its new connections
 * succeed only if nodes 1 and 2 now present CA 2's certificates and trust
 * CA 2 (node 3 trusts nothing else), so the three nodes connect again,
 * every group has a leader, and writes go through every node. Every wait
 * is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define NODES 3
#define WAIT_MS 30000

static int lodectl(const char *const args[])
{
	const char *argv[16];
	char out[4096];
	unsigned a = 0;
	argv[a++] = LS_ABS_BUILDDIR "/lodectl";
	for (unsigned k = 0; args[k] != NULL && a < 15; k++) {
		argv[a++] = args[k];
	}
	argv[a] = NULL;
	return harness_run(argv, out, sizeof out);
}

/* Concatenates files `a` and `b` (NULL: none) into `out`, replaced
 * atomically. */
static void write_cat(const char *out, const char *a, const char *b)
{
	char tmp[600], buf[8192];
	const char *in[2] = {a, b};
	FILE *o;
	snprintf(tmp, sizeof tmp, "%s.tmp", out);
	o = fopen(tmp, "w");
	assert_non_null(o);
	for (int k = 0; k < 2; k++) {
		FILE *i;
		size_t n;
		if (in[k] == NULL) {
			continue;
		}
		i = fopen(in[k], "r");
		assert_non_null(i);
		while ((n = fread(buf, 1, sizeof buf, i)) > 0) {
			assert_int_equal(fwrite(buf, 1, n, o), n);
		}
		fclose(i);
	}
	assert_int_equal(fclose(o), 0);
	assert_int_equal(rename(tmp, out), 0);
}

static bool log_count(struct harness_cluster *c, unsigned i, const char *what,
                      unsigned want)
{
	static char buf[1 << 20];
	FILE *f = fopen(c->nodes[i].log_path, "r");
	unsigned n = 0;
	size_t len;
	const char *p;
	if (f == NULL) {
		return false;
	}
	len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, what)) != NULL; p++) {
		n++;
	}
	return n >= want;
}

static void wait_log(struct harness_cluster *c, unsigned i, const char *what,
                     unsigned want)
{
	uint64_t end = harness_mono_ms() + WAIT_MS;
	while (!log_count(c, i, what, want)) {
		if (harness_mono_ms() > end) {
			harness_node_dump_log(c, i);
			fail_msg("node %u never logged '%s' %u times", i + 1,
			         what, want);
		}
		harness_nap(100);
	}
}

/* SIGHUP to every node; each logs its `round`-th reload. */
static void reload_all(struct harness_cluster *c, unsigned round)
{
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(harness_node_signal(c, i, SIGHUP, NULL), 0);
	}
	for (unsigned i = 0; i < NODES; i++) {
		wait_log(c, i, "SIGHUP: internal TLS reloaded", round);
	}
}

/* Every node sees the two others connected and every group led. */
static bool formed(struct harness_cluster *c)
{
	static char body[65536];
	for (unsigned i = 0; i < NODES; i++) {
		json_t *v, *x;
		size_t k;
		int st;
		unsigned up = 0;
		bool led = true;
		if (harness_http(c->nodes[i].admin, "GET", "/v1/cluster", NULL,
		                 &st, body, sizeof body) != 0 ||
		    st != 200 || (v = json_loads(body, 0, NULL)) == NULL) {
			return false;
		}
		json_array_foreach(json_object_get(v, "peers"), k, x)
		{
			up += json_is_true(json_object_get(x, "connected")) &&
			      !json_is_true(json_object_get(x, "self"));
		}
		json_array_foreach(json_object_get(v, "groups"), k, x)
		{
			led = led &&
			      json_is_integer(json_object_get(x, "leader"));
		}
		json_decref(v);
		if (up != NODES - 1 || !led) {
			return false;
		}
	}
	return true;
}

static void wait_formed(struct harness_cluster *c)
{
	uint64_t end = harness_mono_ms() + WAIT_MS;
	while (!formed(c)) {
		if (harness_mono_ms() > end) {
			for (unsigned i = 0; i < NODES; i++) {
				harness_node_dump_log(c, i);
			}
			fail_msg("the cluster did not form again");
		}
		harness_nap(200);
	}
}

/* SET and GET through node i (followers forward). */
static void write_through(struct harness_cluster *c, unsigned i, unsigned n)
{
	struct ftc conn;
	assert_int_equal(ftc_connect(&conn, c->nodes[i].fsnp), 0);
	for (unsigned k = 0; k < n; k++) {
		char key[32], val[32];
		struct wbuf b;
		struct ftc_msg m;
		snprintf(key, sizeof key, "t%u:%u", i, k);
		snprintf(val, sizeof val, "v%u", k);
		ftc_body(&b, "key=s value=s", key, val);
		assert_int_equal(ftc_call(&conn, 1, FSNP_OP_SET, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
		ftc_body(&b, "key=s", key);
		assert_int_equal(ftc_call(&conn, 1, FSNP_OP_GET, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		assert_true(ftc_str_eq(&m.value, val));
		ftc_msg_free(&m);
	}
	ftc_close(&conn);
}

static void test_rotate(void **state)
{
	static char dir[256], ca1[300], ca2[300], new2[300], live[300];
	static char cert[400], key[400], cafile[400];
	static struct harness_cluster c;
	const char *tmp = getenv("TMPDIR");
	char a[400], b[400];
	(void)state;

	snprintf(dir, sizeof dir, "%s/lodestone-tlsreload-XXXXXX",
	         tmp != NULL ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(ca1, sizeof ca1, "%s/ca1", dir);
	snprintf(ca2, sizeof ca2, "%s/ca2", dir);
	snprintf(new2, sizeof new2, "%s/new2", dir);
	snprintf(live, sizeof live, "%s/live", dir);
	assert_int_equal(mkdir(ca1, 0700), 0);
	assert_int_equal(mkdir(ca2, 0700), 0);
	assert_int_equal(mkdir(new2, 0700), 0);
	assert_int_equal(mkdir(live, 0700), 0);
	assert_int_equal(
	    lodectl((const char *[]){"cert", "ca", "--out-dir", ca1, NULL}), 0);
	assert_int_equal(
	    lodectl((const char *[]){"cert", "ca", "--out-dir", ca2, NULL}), 0);
	for (unsigned id = 1; id <= NODES; id++) {
		char n[8];
		snprintf(n, sizeof n, "%u", id);
		assert_int_equal(
		    lodectl((const char *[]){"cert", "node", n, "--ca-dir", ca1,
		                             "--out-dir", live, "--host",
		                             "127.0.0.1", NULL}),
		    0);
		assert_int_equal(
		    lodectl((const char *[]){"cert", "node", n, "--ca-dir", ca2,
		                             "--out-dir", new2, "--host",
		                             "127.0.0.1", NULL}),
		    0);
	}
	snprintf(cert, sizeof cert, "%s/node-{id}.crt", live);
	snprintf(key, sizeof key, "%s/node-{id}.key", live);
	snprintf(cafile, sizeof cafile, "%s/ca.crt", live);
	snprintf(a, sizeof a, "%s/ca.crt", ca1);
	write_cat(cafile, a, NULL);
	{
		const char *args[] = {"--shards",
		                      "4",
		                      "--internal-tls-cert",
		                      cert,
		                      "--internal-tls-key",
		                      key,
		                      "--internal-tls-ca",
		                      cafile,
		                      NULL};
		assert_int_equal(harness_cluster_start(&c, NODES, args, true),
		                 0);
	}
	wait_formed(&c);
	write_through(&c, 0, 20);

	/* 1. Trust both CAs. */
	snprintf(b, sizeof b, "%s/ca.crt", ca2);
	write_cat(cafile, a, b);
	reload_all(&c, 1);
	/* 2. New certificates from CA 2. */
	for (unsigned id = 1; id <= NODES; id++) {
		char from[400], to[400];
		snprintf(from, sizeof from, "%s/node-%u.key", new2, id);
		snprintf(to, sizeof to, "%s/node-%u.key", live, id);
		write_cat(to, from, NULL);
		snprintf(from, sizeof from, "%s/node-%u.crt", new2, id);
		snprintf(to, sizeof to, "%s/node-%u.crt", live, id);
		write_cat(to, from, NULL);
	}
	reload_all(&c, 2);
	/* 3. CA 2 alone. */
	write_cat(cafile, b, NULL);
	reload_all(&c, 3);
	wait_formed(&c);
	write_through(&c, 1, 20);

	/* A broken key: node 1 keeps what it has, and says why. */
	{
		char k1[400], saved[400];
		snprintf(k1, sizeof k1, "%s/node-1.key", live);
		snprintf(saved, sizeof saved, "%s/node-1.key.good", dir);
		write_cat(saved, k1, NULL);
		FILE *f = fopen(k1, "w");
		assert_non_null(f);
		fputs("not a key\n", f);
		fclose(f);
		assert_int_equal(harness_node_signal(&c, 0, SIGHUP, NULL), 0);
		wait_log(&c, 0, "internal TLS not reloaded", 1);
		write_cat(k1, saved, NULL);
	}

	/* New connections: node 3 restarts trusting CA 2 only; nodes 1 and
	 * 2 must present CA 2's certificates and accept its. */
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&c, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 2, 15000), 0);
	wait_formed(&c);
	for (unsigned i = 0; i < NODES; i++) {
		write_through(&c, i, 20);
	}
	harness_cluster_stop(&c);
	{
		char rm[400];
		snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
		assert_int_equal(system(rm), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rotate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
