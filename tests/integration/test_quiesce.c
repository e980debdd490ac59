/* Integration: quiescent Raft groups (docs/cluster.md "Quiescence") on
 * three real nodes with 512 data groups:
 *  - once idle, every data group is quiescent on every node
 *    (lodestone_raft_groups_quiescent counts all 512; the meta group,
 *    read every second, stays awake);
 *  - writes to quiescent groups are served and read back;
 *  - after kill -9 of a node that leads about a third of the groups, all
 *    quiescent, the two survivors lead every group between them, serve
 *    writes to all of them, and quiesce again with the dead node left out.
 * Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define GROUPS 512
#define WAIT_MS 40000
#define KEYS 64

static const char *const args[] = {"--shards", "512", NULL};

/* The value of an unlabelled metric (or one with `labels`), -1 if none. */
static long long metric(struct harness_cluster *c, unsigned i, const char *name)
{
	static char body[1 << 20];
	int st;
	char *p;
	size_t n = strlen(name);
	if (harness_http(c->nodes[i].admin, "GET", "/metrics", NULL, &st, body,
	                 sizeof body) != 0 ||
	    st != 200) {
		return -1;
	}
	for (p = body; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
		if (*p == '\n') {
			p++;
		}
		if (strncmp(p, name, n) == 0 && p[n] == ' ') {
			return strtoll(p + n + 1, NULL, 10);
		}
	}
	return -1;
}

static long long quiescent(struct harness_cluster *c, unsigned i)
{
	return metric(c, i, "lodestone_raft_groups_quiescent");
}

static long long leading(struct harness_cluster *c, unsigned i)
{
	return metric(c, i, "lodestone_raft_groups{role=\"leader\"}");
}

/* Waits until every listed node counts all data groups quiescent. */
static bool all_quiescent(struct harness_cluster *c, const unsigned *nodes,
                          unsigned n)
{
	uint64_t t0 = harness_mono_ms();
	while (harness_mono_ms() - t0 < WAIT_MS) {
		unsigned ok = 0;
		for (unsigned k = 0; k < n; k++) {
			ok += quiescent(c, nodes[k]) >= GROUPS;
		}
		if (ok == n) {
			return true;
		}
		harness_nap(200);
	}
	for (unsigned k = 0; k < n; k++) {
		fprintf(stderr, "node %u: %lld of %d groups quiescent\n",
		        nodes[k] + 1, quiescent(c, nodes[k]), GROUPS);
	}
	return false;
}

static void set_get(struct ftc *f, const char *round)
{
	for (unsigned k = 0; k < KEYS; k++) {
		char key[32], val[32];
		struct wbuf b;
		struct ftc_msg m;
		snprintf(key, sizeof key, "q%u", k);
		snprintf(val, sizeof val, "%s-%u", round, k);
		ftc_body(&b, "key=s value=s", key, val);
		assert_int_equal(ftc_call(f, 1, FSNP_OP_SET, 0, &b, &m), 0);
		wbuf_free(&b);
		if (m.status != 0 || !ftc_str_eq(&m.value, "OK")) {
			char e[256];
			ftc_error_text(&m, e, sizeof e);
			fail_msg("SET %s: status %d %s", key, m.status, e);
		}
		ftc_msg_free(&m);
		ftc_body(&b, "key=s", key);
		assert_int_equal(ftc_call(f, 1, FSNP_OP_GET, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		if (!ftc_str_eq(&m.value, val)) {
			fail_msg("GET %s: not %s", key, val);
		}
		ftc_msg_free(&m);
	}
}

static void test_quiesce(void **state)
{
	struct harness_cluster cl;
	struct ftc f;
	uint16_t port;
	const unsigned all[] = {0, 1, 2}, survivors[] = {0, 2};
	uint64_t t0;
	long long led;
	(void)state;

	assert_int_equal(ftc_start(&cl, 3, args, &port), 0);
	for (unsigned i = 1; i < 3; i++) {
		assert_int_equal(harness_node_wait_healthy(&cl, i, WAIT_MS), 0);
	}
	assert_true(all_quiescent(&cl, all, 3));

	/* Writes and reads wake the groups they reach, on every node. */
	assert_int_equal(ftc_connect(&f, cl.nodes[0].fsnp), 0);
	set_get(&f, "one");
	ftc_close(&f);
	assert_true(all_quiescent(&cl, all, 3));

	/* Kill the node leading the groups, all quiescent: the survivors'
	 * followers wake on its connection dropping and elect. */
	led = leading(&cl, 1);
	assert_true(led > 0);
	assert_int_equal(harness_node_signal(&cl, 1, SIGKILL, NULL), 0);
	t0 = harness_mono_ms();
	for (;;) {
		long long a = leading(&cl, 0), b = leading(&cl, 2);
		if (a >= 0 && b >= 0 && a + b == GROUPS + 1) {
			break;
		}
		if (harness_mono_ms() - t0 > WAIT_MS) {
			fail_msg(
			    "after the kill: nodes 1 and 3 lead %lld + %lld "
			    "of %d groups",
			    a, b, GROUPS + 1);
		}
		harness_nap(100);
	}
	fprintf(stderr,
	        "every group led again %llu ms after the kill (%lld "
	        "were led by the dead node)\n",
	        (unsigned long long)(harness_mono_ms() - t0), led);
	assert_int_equal(ftc_connect(&f, cl.nodes[0].fsnp), 0);
	set_get(&f, "two");
	ftc_close(&f);
	/* Quiescent again, without the dead follower. */
	assert_true(all_quiescent(&cl, survivors, 2));
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quiesce),
	};
	return cmocka_run_group_tests_name("quiesce", tests, NULL, NULL);
}
