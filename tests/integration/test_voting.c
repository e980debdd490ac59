/* Integration: demoting and promoting a node (docs/operations.md,
 * "Demote and promote a node").
 *
 * Four nodes bootstrapped with --peers, 4 shards, 3 replicas:
 *  - `lodectl cluster demote 4` exits 0 once node 4 votes in no group: every
 *    group's voters are 3 of nodes 1-3, node 4 keeps a standby replica of
 *    exactly the groups placement would give it (`standbys`), its record
 *    says `voter: false`, and it leads nothing; the configuration stays so
 *    (placement does not undo the demotion);
 *  - writes through node 4 are forwarded and read back; node 4's standby
 *    replicas hash like the voters';
 *  - FSNP CLUSTER.DEMOTE of node 3 is accepted (two voting nodes remain, a
 *    quorum of 3), of node 2 then refused, naming why; lodectl exits 1
 *    for it (and for draining node 2) with the same reason;
 *  - node 4 restarted is still demoted (its record says so);
 *  - CLUSTER.PROMOTE of node 3 and POST /v1/cluster/nodes/4/promote bring
 *    every group back to its 3 voters placed over the four nodes;
 *  - a node that is down cannot be demoted (lodectl exits 1, saying so).
 * Every wait is bounded. */
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

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define WAIT_MS 60000

static const char *const base_args[] = {"--shards", "4",
                                        "--election-timeout-ms", "500", NULL};

static json_t *view(struct harness_cluster *c, unsigned i, const char *path)
{
	static char body[65536];
	int st;
	if (c->nodes[i].pid <= 0 ||
	    harness_http(c->nodes[i].admin, "GET", path, NULL, &st, body,
	                 sizeof body) != 0 ||
	    st != 200) {
		return NULL;
	}
	return json_loads(body, 0, NULL);
}

static bool has_id(json_t *arr, uint64_t id)
{
	size_t k;
	json_t *x;
	json_array_foreach(arr, k, x)
	{
		if ((uint64_t)json_integer_value(x) == id) {
			return true;
		}
	}
	return false;
}

static int lodectl(struct harness_cluster *c, char *out, size_t cap,
                   const char *sub, const char *id)
{
	char addr[64];
	snprintf(addr, sizeof addr, "127.0.0.1:%u", c->nodes[0].admin);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--admin",
	                      addr,
	                      "cluster",
	                      sub,
	                      id,
	                      "--max-wait-s",
	                      "60",
	                      NULL};
	return harness_run(argv, out, cap);
}

/* Every group has a leader and 3 target voters among the nodes not in
 * `demoted` (a mask of ids), the demoted ones of its placement as
 * standbys; the leader's configuration is exactly that (voters voting,
 * standbys as standby) and no demoted node leads. */
static bool settled(struct harness_cluster *c, unsigned demoted, char *why,
                    size_t cap)
{
	json_t *v = view(c, 0, "/v1/cluster"), *g, *n;
	size_t k;
	bool ok = v != NULL;

	snprintf(why, cap, "no view");
	json_array_foreach(json_object_get(v, "nodes"), k, n)
	{
		uint64_t id =
		    (uint64_t)json_integer_value(json_object_get(n, "id"));
		bool voter = json_is_true(json_object_get(n, "voter"));
		if (ok && voter == ((demoted >> id) & 1)) {
			snprintf(why, cap, "node %" PRIu64 " voter: %d", id,
			         voter);
			ok = false;
		}
	}
	json_array_foreach(json_object_get(v, "groups"), k, g)
	{
		json_t *voters = json_object_get(g, "voters");
		json_t *standbys = json_object_get(g, "standbys");
		json_t *l = json_object_get(g, "leader"), *lv, *lg, *x;
		uint64_t gid =
		    (uint64_t)json_integer_value(json_object_get(g, "id"));
		size_t j, nv = 0, ns = 0;
		if (!ok) {
			break;
		}
		if (!json_is_integer(l) ||
		    ((demoted >> json_integer_value(l)) & 1)) {
			snprintf(why, cap, "group %" PRIu64 ": leader", gid);
			ok = false;
			break;
		}
		json_array_foreach(voters, j, x)
		{
			if ((demoted >> json_integer_value(x)) & 1) {
				ok = false;
			}
		}
		json_array_foreach(standbys, j, x)
		{
			if (!((demoted >> json_integer_value(x)) & 1)) {
				ok = false;
			}
		}
		/* 3 voters (the meta group's too, with 3 or 4 voting
		 * nodes), all of them below 3. */
		if (!ok || json_array_size(voters) !=
		               (4u - (unsigned)__builtin_popcount(demoted) < 3
		                    ? 4u - (unsigned)__builtin_popcount(demoted)
		                    : 3u)) {
			snprintf(why, cap, "group %" PRIu64 ": target", gid);
			ok = false;
			break;
		}
		lv =
		    view(c, (unsigned)json_integer_value(l) - 1, "/v1/cluster");
		lg = json_array_get(json_object_get(lv, "groups"), gid);
		json_array_foreach(json_object_get(lg, "config"), j, x)
		{
			uint64_t id = (uint64_t)json_integer_value(
			    json_object_get(x, "id"));
			const char *role =
			    json_string_value(json_object_get(x, "role"));
			if (strcmp(role, "voter") == 0 && has_id(voters, id)) {
				nv++;
			} else if (strcmp(role, "standby") == 0 &&
			           has_id(standbys, id)) {
				ns++;
			} else {
				ok = false;
			}
		}
		if (!ok || nv != json_array_size(voters) ||
		    ns != json_array_size(standbys)) {
			snprintf(why, cap,
			         "group %" PRIu64 ": configuration not the "
			         "target yet",
			         gid);
			ok = false;
		}
		json_decref(lv);
	}
	json_decref(v);
	return ok;
}

static void wait_settled(struct harness_cluster *c, unsigned demoted)
{
	uint64_t end = harness_mono_ms() + WAIT_MS;
	char why[256];
	while (!settled(c, demoted, why, sizeof why)) {
		if (harness_mono_ms() > end) {
			for (unsigned i = 0; i < c->n; i++) {
				harness_node_dump_log(c, i);
			}
			fail_msg("not settled: %s", why);
		}
		harness_nap(200);
	}
}

/* Groups with node `id` as a standby (target). */
static unsigned standby_groups(struct harness_cluster *c, uint64_t id)
{
	json_t *v = view(c, 0, "/v1/cluster"), *g;
	size_t k;
	unsigned n = 0;
	json_array_foreach(json_object_get(v, "groups"), k, g)
	{
		n += has_id(json_object_get(g, "standbys"), id);
	}
	json_decref(v);
	return n;
}

/* Every replica of every group, standbys included, hashes the same. */
static void check_hashes(struct harness_cluster *c)
{
	json_t *v = view(c, 0, "/v1/cluster"), *g;
	size_t k;
	assert_non_null(v);
	json_array_foreach(json_object_get(v, "groups"), k, g)
	{
		uint64_t gid =
		    (uint64_t)json_integer_value(json_object_get(g, "id"));
		uint64_t end = harness_mono_ms() + 20000;
		char path[64];
		snprintf(path, sizeof path, "/v1/debug/group/%" PRIu64 "/hash",
		         gid);
		for (;;) {
			char first[64] = "";
			bool same = true;
			unsigned seen = 0;
			for (unsigned i = 0; i < c->n; i++) {
				json_t *h;
				char cur[64];
				if (!has_id(json_object_get(g, "voters"),
				            c->nodes[i].id) &&
				    !has_id(json_object_get(g, "standbys"),
				            c->nodes[i].id)) {
					continue;
				}
				h = view(c, i, path);
				snprintf(
				    cur, sizeof cur, "%s/%" JSON_INTEGER_FORMAT,
				    h != NULL ? json_string_value(
				                    json_object_get(h, "hash"))
				              : "?",
				    json_integer_value(
				        json_object_get(h, "keys")));
				if (seen++ == 0) {
					snprintf(first, sizeof first, "%s",
					         cur);
				}
				same = same && h != NULL &&
				       strcmp(first, cur) == 0;
				json_decref(h);
			}
			if (same) {
				break;
			}
			if (harness_mono_ms() > end) {
				fail_msg("group %" PRIu64 ": replicas differ",
				         gid);
			}
			harness_nap(250);
		}
	}
	json_decref(v);
}

static struct ftc_msg admin_op(struct ftc *conn, uint16_t op, const char *arg)
{
	struct wbuf b;
	struct ftc_msg m;
	const char *args[] = {arg};
	ftc_body(&b, "args=a", args, 1);
	assert_int_equal(ftc_call(conn, 0x10, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

/* Waits until GET /v1/cluster/ops/ID on node i (the one that answered)
 * says done. */
static void wait_op(struct harness_cluster *c, unsigned i,
                    const struct ftc_msg *m)
{
	uint64_t end = harness_mono_ms() + WAIT_MS;
	int64_t op = ftc_map_int(&m->value, "op");
	char path[64], body[4096];
	int st;
	snprintf(path, sizeof path, "/v1/cluster/ops/%" PRId64, op);
	for (;;) {
		json_t *o;
		assert_int_equal(harness_http(c->nodes[i].admin, "GET", path,
		                              NULL, &st, body, sizeof body),
		                 0);
		assert_int_equal(st, 200);
		o = json_loads(body, 0, NULL);
		if (strcmp(json_string_value(json_object_get(o, "state")),
		           "done") == 0) {
			json_decref(o);
			return;
		}
		assert_string_not_equal(
		    json_string_value(json_object_get(o, "state")), "failed");
		json_decref(o);
		assert_true(harness_mono_ms() < end);
		harness_nap(200);
	}
}

static void put_get(struct harness_cluster *c, unsigned via, unsigned n)
{
	struct ftc conn;
	assert_int_equal(ftc_connect(&conn, c->nodes[via].fsnp), 0);
	for (unsigned k = 0; k < n; k++) {
		char key[32], val[32];
		struct wbuf b;
		struct ftc_msg m;
		snprintf(key, sizeof key, "d%u:%u", via, k);
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

static void test_demote_promote(void **state)
{
	static struct harness_cluster cl;
	struct harness_cluster *c = &cl;
	char out[8192], msg[512], why[256];
	struct ftc a;
	struct ftc_msg m;
	int rc;
	(void)state;

	assert_int_equal(harness_cluster_start(c, 4, base_args, true), 0);
	wait_settled(c, 0);
	put_get(c, 0, 50);

	/* Demote node 4: standbys only, and it stays so. */
	rc = lodectl(c, out, sizeof out, "demote", "4");
	if (rc != 0) {
		fail_msg("lodectl cluster demote 4: %d: %s", rc, out);
	}
	wait_settled(c, 1u << 4);
	assert_true(standby_groups(c, 4) > 0);
	harness_nap(3000);
	assert_true(settled(c, 1u << 4, why, sizeof why));
	rc = lodectl(c, out, sizeof out, "status", NULL);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "standby 4"));

	/* CLUSTER.ROLE on node 4 says it does not vote. */
	{
		struct ftc r4;
		struct wbuf b;
		assert_int_equal(ftc_connect(&r4, c->nodes[3].fsnp), 0);
		ftc_body(&b, "");
		assert_int_equal(
		    ftc_call(&r4, 0x10, FSNP_OP_CLUSTER_ROLE, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		{
			bool voter = true;
			assert_int_equal(
			    fsnp_map_bool(&m.value, "voter", &voter), 0);
			assert_false(voter);
		}
		ftc_msg_free(&m);
		ftc_close(&r4);
	}

	/* Writes through the demoted node are forwarded; its standbys follow
	 * the log. */
	put_get(c, 3, 50);
	check_hashes(c);

	/* Node 3 may go too (nodes 1 and 2 still make a quorum of 3), not
	 * node 2 after it. */
	assert_int_equal(ftc_connect(&a, c->nodes[1].fsnp), 0);
	m = admin_op(&a, FSNP_OP_CLUSTER_DEMOTE, "3");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "kind", "demote"));
	wait_op(c, 1, &m);
	ftc_msg_free(&m);
	wait_settled(c, (1u << 4) | (1u << 3));
	m = admin_op(&a, FSNP_OP_CLUSTER_DEMOTE, "2@127.0.0.1:1");
	ftc_error_text(&m, msg, sizeof msg);
	if (m.status == 0 || strstr(msg, "fewer than a quorum") == NULL) {
		fail_msg("DEMOTE 2 answered %u '%s'", m.status, msg);
	}
	ftc_msg_free(&m);
	rc = lodectl(c, out, sizeof out, "demote", "2");
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "fewer than a quorum"));
	/* Draining a voting node is refused for the same reason. */
	rc = lodectl(c, out, sizeof out, "drain", "2");
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "fewer than a quorum"));
	put_get(c, 2, 20);

	/* The demotion is in node 4's record: a restart keeps it. */
	assert_int_equal(harness_node_signal(c, 3, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(c, 3), 0);
	assert_int_equal(harness_node_wait_healthy(c, 3, 15000), 0);
	harness_nap(3000);
	wait_settled(c, (1u << 4) | (1u << 3));

	/* Promote both back. */
	m = admin_op(&a, FSNP_OP_CLUSTER_PROMOTE, "3");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "kind", "promote"));
	wait_op(c, 1, &m);
	ftc_msg_free(&m);
	ftc_close(&a);
	{
		int st;
		assert_int_equal(harness_http(c->nodes[0].admin, "POST",
		                              "/v1/cluster/nodes/4/promote",
		                              "{}", &st, out, sizeof out),
		                 0);
		assert_int_equal(st, 202);
	}
	wait_settled(c, 0);
	assert_int_equal(standby_groups(c, 4), 0);
	check_hashes(c);

	/* A node that is down is neither demoted nor promoted. */
	assert_int_equal(harness_node_signal(c, 3, SIGKILL, NULL), 0);
	rc = lodectl(c, out, sizeof out, "demote", "4");
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "not connected"));
	harness_cluster_stop(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_demote_promote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
