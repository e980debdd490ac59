/* Integration: cluster administration over FSNP (docs/fsnp.md "Cluster
 * administration") on real processes.
 *
 * Three nodes bootstrapped with --peers, 3 shards:
 *  - CLUSTER.HEALTH, STATUS, SLOTS, KEYSLOT, ROLE, STATS and
 *    FERRICSTORE.KEY_INFO, CONFIG GET, METRICS, HOTNESS, BLOBGC answer,
 *    checked against GET /v1/cluster and ROUTE; CONFIG SET is refused,
 *    PROMOTE of a voter starts an operation, DEMOTE of a stranger is
 *    refused; bad args get status 6 naming the field; the
 *    COMMAND_EXEC form answers as the opcode does, and PIPELINE items
 *    answer each on its own;
 *  - CLUSTER.FAILOVER on a group's leader moves its leadership;
 *  - CLUSTER.JOIN of node 4 is refused before it asks to join, then node 4
 *    starts with --join, becomes active and JOIN confirms it; SHARDS
 *    follows /v1/cluster and a subscribed connection sees
 *    TOPOLOGY_CHANGED; CLUSTER.LEAVE drains and removes node 4 (it exits
 *    0), SLOTS and SHARDS no longer name it, TOPOLOGY_CHANGED again.
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
#include <unistd.h>
#include <sys/wait.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define WAIT_MS 90000

static const char *const base_args[] = {"--shards", "3",
                                        "--election-timeout-ms", "500", NULL};

static json_t *view(struct harness_cluster *c, unsigned i)
{
	static char body[131072];
	int st;
	if (c->nodes[i].pid <= 0 ||
	    harness_http(c->nodes[i].admin, "GET", "/v1/cluster", NULL, &st,
	                 body, sizeof body) != 0 ||
	    st != 200) {
		return NULL;
	}
	return json_loads(body, 0, NULL);
}

static uint64_t jint(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

/* An admin request with {"args": [...]} (and "key" when given). */
static struct ftc_msg admin(struct ftc *c, uint16_t op, const char *key,
                            const char **args, int n)
{
	struct wbuf b;
	struct ftc_msg m;
	if (key != NULL) {
		ftc_body(&b, "key=s args=a", key, args, n);
	} else {
		ftc_body(&b, "args=a", args, n);
	}
	assert_int_equal(ftc_call(c, 0x10, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void expect_error(struct ftc_msg m, uint16_t status, const char *text)
{
	char msg[512];
	ftc_error_text(&m, msg, sizeof msg);
	if (m.status != status || strstr(msg, text) == NULL) {
		fail_msg("expected status %u with '%s', got %u '%s'", status,
		         text, m.status, msg);
	}
	ftc_msg_free(&m);
}

static bool bin_eq(const struct fsnp_val *v, const char *s)
{
	return v->tag == FSNP_BIN && v->as.bin.len == strlen(s) &&
	       memcmp(v->as.bin.ptr, s, v->as.bin.len) == 0;
}

/* The id in a string field ("3"), 0 when nil or absent. */
static uint64_t map_id(const struct fsnp_val *m, const char *key)
{
	struct fsnp_bytes b;
	char t[24];
	if (fsnp_map_bin(m, key, &b) != 0 || b.len == 0 || b.len >= sizeof t) {
		return 0;
	}
	memcpy(t, b.ptr, b.len);
	t[b.len] = '\0';
	return strtoull(t, NULL, 10);
}

static int index_of(struct harness_cluster *c, uint64_t id)
{
	for (unsigned i = 0; i < c->n; i++) {
		if (c->nodes[i].id == id && c->nodes[i].pid > 0) {
			return (int)i;
		}
	}
	return -1;
}

/* Group g's leader and voters as node i's /v1/cluster gives them. */
static uint64_t group_leader(struct harness_cluster *c, unsigned i, uint32_t g,
                             uint64_t *voters, size_t *n_voters)
{
	json_t *v = view(c, i), *grp, *x;
	uint64_t l = 0;
	size_t k;
	if (n_voters != NULL) {
		*n_voters = 0;
	}
	grp = json_array_get(json_object_get(v, "groups"), g);
	if (grp != NULL) {
		l = jint(grp, "leader");
		json_array_foreach(json_object_get(grp, "voters"), k, x)
		{
			if (n_voters != NULL && *n_voters < 8) {
				voters[(*n_voters)++] =
				    (uint64_t)json_integer_value(x);
			}
		}
	}
	json_decref(v);
	return l;
}

/* Node `id`'s state in node i's view ("" when unknown). */
static void member_state(struct harness_cluster *c, unsigned i, uint64_t id,
                         char *out, size_t cap)
{
	json_t *v = view(c, i), *n;
	size_t k;
	out[0] = '\0';
	json_array_foreach(json_object_get(v, "nodes"), k, n)
	{
		if (jint(n, "id") == id) {
			snprintf(
			    out, cap, "%s",
			    json_string_value(json_object_get(n, "state")));
		}
	}
	json_decref(v);
}

/* SHARDS names, for every range, the leader /v1/cluster gives (through
 * node i): true once it does. */
static bool shards_follow_view(struct harness_cluster *c, unsigned i,
                               struct ftc *conn, uint64_t *epoch,
                               uint64_t not_node)
{
	struct wbuf b;
	struct ftc_msg m;
	struct fsnp_val ranges, r;
	struct fsnp_iter it;
	bool ok = true;
	ftc_body(&b, "");
	assert_int_equal(ftc_call(conn, 0, FSNP_OP_SHARDS, 0, &b, &m), 0);
	wbuf_free(&b);
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_u64(&m.value, "route_epoch", epoch), 0);
	assert_int_equal(fsnp_map_array(&m.value, "ranges", &ranges), 0);
	fsnp_iter_init(&it, &ranges);
	while (fsnp_iter_next(&it, NULL, &r)) {
		uint64_t shard = (uint64_t)ftc_map_int(&r, "shard");
		uint64_t l =
		    group_leader(c, i, (uint32_t)shard + 1, NULL, NULL);
		uint64_t named = map_id(&r, "leader_node");
		ok = ok && l != 0 && named == l && named != not_node;
	}
	ftc_msg_free(&m);
	/* ROUTE of a key names its group's leader too. */
	ftc_body(&b, "key=s", "route:key");
	assert_int_equal(ftc_call(conn, 0, FSNP_OP_ROUTE, 0, &b, &m), 0);
	wbuf_free(&b);
	assert_int_equal(m.status, 0);
	{
		uint64_t g = (uint64_t)ftc_map_int(&m.value, "shard") + 1;
		uint64_t l = group_leader(c, i, (uint32_t)g, NULL, NULL);
		uint64_t named = map_id(&m.value, "leader_node");
		ok = ok && l != 0 && named == l && named != not_node;
	}
	ftc_msg_free(&m);
	return ok;
}

static void wait_shards_follow(struct harness_cluster *c, unsigned i,
                               struct ftc *conn, uint64_t *epoch,
                               uint64_t not_node)
{
	uint64_t end = harness_mono_ms() + WAIT_MS;
	while (!shards_follow_view(c, i, conn, epoch, not_node)) {
		if (harness_mono_ms() > end) {
			fail_msg("SHARDS does not follow /v1/cluster");
		}
		harness_nap(250);
	}
}

/* TOPOLOGY_CHANGED events read from `sub` within ms. */
static unsigned topology_events(struct ftc *sub, int ms)
{
	uint64_t end = harness_mono_ms() + (uint64_t)ms;
	unsigned n = 0;
	struct ftc_msg m;
	while (harness_mono_ms() < end) {
		if (ftc_recv(sub, &m, 200) != 0) {
			continue;
		}
		if (m.h.opcode == FSNP_OP_EVENT && m.has_value &&
		    ftc_map_str(&m.value, "event", "TOPOLOGY_CHANGED")) {
			n++;
		}
		ftc_msg_free(&m);
	}
	return n;
}

static void subscribe(struct ftc *sub, uint16_t port)
{
	const char *ev[] = {"TOPOLOGY_CHANGED"};
	struct wbuf b;
	struct ftc_msg m;
	assert_int_equal(ftc_connect(sub, port), 0);
	ftc_body(&b, "events=a", ev, 1);
	assert_int_equal(ftc_call(sub, 0, FSNP_OP_SUBSCRIBE_EVENTS, 0, &b, &m),
	                 0);
	wbuf_free(&b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
}

/* Every SLOTS range: its group, the voters /v1/cluster gives, never
 * node `absent`; the ranges cover the 1024 slots. Returns how many
 * ranges have node `present` among their voters. */
static unsigned check_slots(struct harness_cluster *c, struct ftc *conn,
                            uint64_t absent, uint64_t present)
{
	unsigned with = 0;
	struct ftc_msg m = admin(conn, FSNP_OP_CLUSTER_SLOTS, NULL, NULL, 0);
	struct fsnp_iter it, vi;
	struct fsnp_val r, voters, x;
	unsigned n = 0;
	int64_t last = -1;
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	fsnp_iter_init(&it, &m.value);
	while (fsnp_iter_next(&it, NULL, &r)) {
		uint64_t g = (uint64_t)ftc_map_int(&r, "group");
		uint64_t vv[8];
		size_t nv;
		group_leader(c, 0, (uint32_t)g, vv, &nv);
		assert_int_equal(g, n + 1);
		assert_int_equal(fsnp_map_array(&r, "voters", &voters), 0);
		assert_int_equal(voters.as.count, nv);
		fsnp_iter_init(&vi, &voters);
		while (fsnp_iter_next(&vi, NULL, &x)) {
			char t[24], p[24];
			snprintf(t, sizeof t, "%" PRIu64, absent);
			snprintf(p, sizeof p, "%" PRIu64, present);
			assert_false(bin_eq(&x, t));
			with += bin_eq(&x, p);
		}
		last = ftc_map_int(&r, "last_slot");
		n++;
	}
	assert_int_equal(n, 3);
	assert_int_equal(last, 1023);
	ftc_msg_free(&m);
	return with;
}

/* A PIPELINE of admin items {opcode, body: {args: [arg]}} (no arg: {})
 * and a SET. */
static struct ftc_msg admin_pipeline(struct ftc *c, const uint16_t *ops,
                                     const char *const *args, int n)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct ftc_msg m;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "commands");
	fsnp_w_array_begin(&w);
	for (int i = 0; i < n; i++) {
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, ops[i]);
		fsnp_w_key(&w, "body");
		fsnp_w_map_begin(&w);
		if (args[i] != NULL) {
			fsnp_w_key(&w, "args");
			fsnp_w_array_begin(&w);
			fsnp_w_str(&w, args[i]);
			fsnp_w_array_end(&w);
		}
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
	}
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "opcode");
	fsnp_w_i64(&w, FSNP_OP_SET);
	fsnp_w_key(&w, "body");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, "pl:k");
	fsnp_w_key(&w, "value");
	fsnp_w_str(&w, "v");
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(ftc_call(c, 1, FSNP_OP_PIPELINE, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static void test_admin(void **state)
{
	static struct harness_cluster cl;
	struct harness_cluster *c = &cl;
	struct ftc a, sub;
	struct ftc_msg m;
	struct fsnp_val v, x;
	struct fsnp_iter it;
	char nodearg[64], st[32];
	uint64_t epoch0, epoch1, end;
	uint16_t port;
	(void)state;

	assert_int_equal(harness_cluster_start(c, 3, base_args, true), 0);
	port = c->nodes[0].fsnp;
	assert_int_equal(ftc_wait_ready(port, 30000), 0);
	assert_int_equal(ftc_connect(&a, port), 0);

	/* HEALTH: ok once every group has a leader. */
	end = harness_mono_ms() + WAIT_MS;
	for (;;) {
		m = admin(&a, FSNP_OP_CLUSTER_HEALTH, NULL, NULL, 0);
		assert_int_equal(m.status, 0);
		if (ftc_map_str(&m.value, "status", "ok")) {
			break;
		}
		assert_true(harness_mono_ms() < end);
		ftc_msg_free(&m);
		harness_nap(200);
	}
	assert_int_equal(ftc_map_int(&m.value, "groups"), 4);
	assert_int_equal(ftc_map_int(&m.value, "nodes"), 3);
	assert_true(ftc_map_str(&m.value, "node", "1"));
	ftc_msg_free(&m);

	/* STATUS is the /v1/cluster view. */
	m = admin(&a, FSNP_OP_CLUSTER_STATUS, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_array(&m.value, "groups", &v), 0);
	assert_int_equal(v.as.count, 4);
	assert_int_equal(fsnp_map_array(&m.value, "nodes", &v), 0);
	assert_int_equal(v.as.count, 3);
	assert_int_equal(ftc_map_int(&m.value, "replicas"), 3);
	ftc_msg_free(&m);

	/* STATS */
	m = admin(&a, FSNP_OP_CLUSTER_STATS, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_map_map(&m.value, "fsnp", &v), 0);
	assert_true(ftc_map_int(&v, "requests") > 0);
	assert_int_equal(fsnp_map_map(&m.value, "raft_io", &v), 0);
	ftc_msg_free(&m);

	/* SLOTS: 3 ranges over 1024 slots, voters as /v1/cluster. */
	assert_int_equal(check_slots(c, &a, 99, 1), 3);

	/* KEYSLOT agrees with ROUTE; the COMMAND_EXEC form too. */
	{
		const char *k[] = {"{user:7}:name"};
		struct wbuf b;
		struct ftc_msg r;
		int64_t slot;
		m = admin(&a, FSNP_OP_CLUSTER_KEYSLOT, k[0], k, 1);
		assert_int_equal(m.status, 0);
		assert_int_equal(fsnp_val_i64(&m.value, &slot), 0);
		ftc_msg_free(&m);
		ftc_body(&b, "key=s", k[0]);
		assert_int_equal(ftc_call(&a, 0, FSNP_OP_ROUTE, 0, &b, &r), 0);
		wbuf_free(&b);
		assert_int_equal(ftc_map_int(&r.value, "slot"), slot);
		ftc_msg_free(&r);
		ftc_body(&b, "command=s args=a", "CLUSTER.KEYSLOT", k, 1);
		assert_int_equal(
		    ftc_call(&a, 1, FSNP_OP_COMMAND_EXEC, 0, &b, &r), 0);
		wbuf_free(&b);
		assert_int_equal(r.status, 0);
		int64_t s2;
		assert_int_equal(fsnp_val_i64(&r.value, &s2), 0);
		assert_int_equal(s2, slot);
		ftc_msg_free(&r);
		/* inside a PIPELINE, each item answered on its own */
		{
			const uint16_t ops[] = {FSNP_OP_CLUSTER_KEYSLOT,
			                        FSNP_OP_CLUSTER_ROLE,
			                        FSNP_OP_CLUSTER_JOIN};
			const char *const pa[] = {k[0], NULL, "bad"};
			struct fsnp_iter pi;
			struct fsnp_val e;
			r = admin_pipeline(&a, ops, pa, 3);
			assert_int_equal(r.status, 0);
			assert_int_equal(r.value.as.count, 4);
			fsnp_iter_init(&pi, &r.value);
			fsnp_iter_next(&pi, NULL, &e);
			assert_true(ftc_map_str(&e, "status", "ok"));
			assert_int_equal(ftc_map_int(&e, "value"), slot);
			fsnp_iter_next(&pi, NULL, &e);
			assert_true(ftc_map_str(&e, "status", "ok"));
			fsnp_iter_next(&pi, NULL, &e);
			assert_true(ftc_map_str(&e, "status", "bad_request"));
			fsnp_iter_next(&pi, NULL, &e);
			assert_true(ftc_map_str(&e, "status", "ok"));
			ftc_msg_free(&r);
		}
		/* key in the body only */
		m = admin(&a, FSNP_OP_CLUSTER_KEYSLOT, k[0], NULL, 0);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}

	/* ROLE: the groups this node leads, as /v1/cluster says. */
	m = admin(&a, FSNP_OP_CLUSTER_ROLE, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "node", "1"));
	assert_true(ftc_map_str(&m.value, "state", "active"));
	assert_int_equal(fsnp_map_array(&m.value, "groups", &v), 0);
	assert_int_equal(v.as.count, 4); /* 3 nodes: every group here */
	assert_int_equal(fsnp_map_array(&m.value, "leader_of", &v), 0);
	fsnp_iter_init(&it, &v);
	while (fsnp_iter_next(&it, NULL, &x)) {
		uint64_t g;
		assert_int_equal(fsnp_val_u64(&x, &g), 0);
		assert_int_equal(group_leader(c, 0, (uint32_t)g, NULL, NULL),
		                 1);
	}
	ftc_msg_free(&m);

	/* KEY_INFO of a string with a TTL. */
	{
		const char *k[] = {"info:key"};
		struct wbuf b;
		struct ftc_msg r;
		ftc_body(&b, "key=s value=s ttl=i", k[0], "v", (int64_t)60000);
		assert_int_equal(ftc_call(&a, 1, FSNP_OP_SET, 0, &b, &r), 0);
		wbuf_free(&b);
		assert_int_equal(r.status, 0);
		ftc_msg_free(&r);
		m = admin(&a, FSNP_OP_FERRICSTORE_KEY_INFO, k[0], k, 1);
		assert_int_equal(m.status, 0);
		int64_t g = ftc_map_int(&m.value, "group");
		assert_true(g >= 1 && g <= 3);
		assert_int_equal(map_id(&m.value, "leader"),
		                 group_leader(c, 0, (uint32_t)g, NULL, NULL));
		/* 3 nodes: a replica here; the write may still be applying
		 * on a follower. */
		end = harness_mono_ms() + 10000;
		while (!ftc_map_str(&m.value, "type", "string")) {
			assert_true(harness_mono_ms() < end);
			ftc_msg_free(&m);
			harness_nap(100);
			m = admin(&a, FSNP_OP_FERRICSTORE_KEY_INFO, k[0], k, 1);
		}
		int64_t ttl = ftc_map_int(&m.value, "ttl_ms");
		assert_true(ttl > 0 && ttl <= 60000);
		ftc_msg_free(&m);
		const char *none[] = {"info:none"};
		m = admin(&a, FSNP_OP_FERRICSTORE_KEY_INFO, none[0], none, 1);
		assert_true(ftc_map_str(&m.value, "type", "none"));
		assert_int_equal(ftc_map_int(&m.value, "ttl_ms"), -2);
		ftc_msg_free(&m);
	}

	/* CONFIG GET (prefix and glob), SET refused. */
	{
		const char *g1[] = {"GET", "FERRICSTORE_NATIVE_PORT"};
		const char *g2[] = {"get", "*MAX_FRAME*"};
		const char *s1[] = {"SET", "maxclients", "5"};
		m = admin(&a, FSNP_OP_FERRICSTORE_CONFIG, NULL, g1, 2);
		assert_int_equal(m.status, 0);
		assert_int_equal(
		    ftc_map_int(&m.value, "FERRICSTORE_NATIVE_PORT"), port);
		ftc_msg_free(&m);
		m = admin(&a, FSNP_OP_FERRICSTORE_CONFIG, NULL, g2, 2);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.tag, FSNP_MAP);
		assert_int_equal(m.value.as.count, 2);
		ftc_msg_free(&m);
		expect_error(admin(&a, FSNP_OP_FERRICSTORE_CONFIG, NULL, s1, 3),
		             1, "SET is not supported");
	}

	/* METRICS, HOTNESS, BLOBGC */
	m = admin(&a, FSNP_OP_FERRICSTORE_METRICS, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_int(&m.value, "lodestone_fsnp_requests_total") > 0);
	ftc_msg_free(&m);
	m = admin(&a, FSNP_OP_FERRICSTORE_HOTNESS, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "measure", "store_bytes"));
	assert_int_equal(fsnp_map_array(&m.value, "groups", &v), 0);
	assert_int_equal(v.as.count, 3);
	ftc_msg_free(&m);
	m = admin(&a, FSNP_OP_FERRICSTORE_BLOBGC, NULL, NULL, 0);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "status", "scheduled"));
	ftc_msg_free(&m);

	/* Refusals and bad args. */
	{
		const char *bad_node[] = {"nope"};
		const char *bad_group[] = {"x"};
		const char *two[] = {"a", "b"};
		const char *bogus[] = {"BOGUS"};
		const char *p1[] = {"2@127.0.0.1:1"};
		const char *nine[] = {"9"};
		const char *two_nodes[] = {"2", "3"};
		expect_error(admin(&a, FSNP_OP_CLUSTER_KEYSLOT, NULL, NULL, 0),
		             6, "key");
		expect_error(admin(&a, FSNP_OP_CLUSTER_JOIN, NULL, bad_node, 1),
		             6, "args[0]");
		expect_error(admin(&a, FSNP_OP_CLUSTER_JOIN, NULL, NULL, 0), 6,
		             "args[0]");
		expect_error(
		    admin(&a, FSNP_OP_CLUSTER_FAILOVER, NULL, bad_group, 1), 6,
		    "args[0]");
		expect_error(
		    admin(&a, FSNP_OP_CLUSTER_LEAVE, NULL, bad_node, 1), 6,
		    "args[0]");
		expect_error(admin(&a, FSNP_OP_CLUSTER_HEALTH, NULL, two, 2), 6,
		             "args");
		expect_error(
		    admin(&a, FSNP_OP_FERRICSTORE_CONFIG, NULL, bogus, 1), 6,
		    "args[0]");
		expect_error(
		    admin(&a, FSNP_OP_FERRICSTORE_CONFIG, NULL, NULL, 0), 6,
		    "args[0]");
		/* PROMOTE of a voter starts (and soon ends) an operation;
		 * DEMOTE of a node that is not a member is refused. */
		/* Refused while node 2's connection is being re-established
		 * or an earlier operation on it still runs: ask again. */
		for (int i = 0;; i++) {
			char msg[512];
			m = admin(&a, FSNP_OP_CLUSTER_PROMOTE, NULL, p1, 1);
			if (m.status == 0) {
				break;
			}
			ftc_error_text(&m, msg, sizeof msg);
			if (i >= 100 ||
			    (strstr(msg, "is not connected") == NULL &&
			     strstr(msg, "is running") == NULL)) {
				fail_msg("PROMOTE: status %u: %s", m.status,
				         msg);
			}
			ftc_msg_free(&m);
			usleep(100 * 1000);
		}
		assert_true(ftc_map_str(&m.value, "kind", "promote"));
		ftc_msg_free(&m);
		expect_error(admin(&a, FSNP_OP_CLUSTER_DEMOTE, NULL, nine, 1),
		             1, "no node 9");
		expect_error(
		    admin(&a, FSNP_OP_CLUSTER_DEMOTE, NULL, two_nodes, 2), 6,
		    "takes one node");
		struct wbuf b;
		ftc_body(&b, "args=s", "GET");
		assert_int_equal(
		    ftc_call(&a, 0x10, FSNP_OP_FERRICSTORE_CONFIG, 0, &b, &m),
		    0);
		wbuf_free(&b);
		expect_error(m, 6, "args must be a list");
	}

	/* FAILOVER of group 1 on its leader, to another voter. */
	{
		uint64_t voters[8], l, to = 0;
		size_t nv;
		struct ftc lc;
		char g[] = "1";
		l = group_leader(c, 0, 1, voters, &nv);
		assert_true(l != 0);
		for (size_t i = 0; i < nv; i++) {
			if (voters[i] != l) {
				to = voters[i];
			}
		}
		assert_true(to != 0);
		snprintf(nodearg, sizeof nodearg, "%" PRIu64 "@127.0.0.1:%u",
		         to, c->nodes[index_of(c, to)].internal);
		const char *fa[] = {g, nodearg};
		/* not on the leader: refused, naming it */
		int other = index_of(c, l == 1 ? 2 : 1);
		struct ftc oc;
		assert_int_equal(ftc_connect(&oc, c->nodes[other].fsnp), 0);
		if (c->nodes[other].id != l) {
			expect_error(
			    admin(&oc, FSNP_OP_CLUSTER_FAILOVER, NULL, fa, 2),
			    1, "does not lead");
		}
		ftc_close(&oc);
		assert_int_equal(
		    ftc_connect(&lc, c->nodes[index_of(c, l)].fsnp), 0);
		m = admin(&lc, FSNP_OP_CLUSTER_FAILOVER, NULL, fa, 2);
		if (m.status != 0) {
			char msg[256];
			ftc_error_text(&m, msg, sizeof msg);
			fail_msg("FAILOVER: %s", msg);
		}
		assert_true(ftc_map_int(&m.value, "op") > 0);
		ftc_msg_free(&m);
		ftc_close(&lc);
		end = harness_mono_ms() + WAIT_MS;
		while (group_leader(c, 0, 1, NULL, NULL) != to) {
			assert_true(harness_mono_ms() < end);
			harness_nap(200);
		}
		print_message("group 1: leadership moved %" PRIu64
		              " -> %" PRIu64 "\n",
		              l, to);
	}

	/* JOIN of node 4: refused before it asks, then it joins. */
	wait_shards_follow(c, 0, &a, &epoch0, 0);
	subscribe(&sub, port);
	{
		uint16_t internal4 = harness_free_port();
		snprintf(nodearg, sizeof nodearg, "4@127.0.0.1:%u", internal4);
		const char *ja[] = {nodearg};
		expect_error(admin(&a, FSNP_OP_CLUSTER_JOIN, NULL, ja, 1), 1,
		             "has not asked to join");
	}
	assert_int_equal(harness_node_join(c, 0), 3);
	assert_int_equal(harness_node_wait_healthy(c, 3, 20000), 0);
	end = harness_mono_ms() + WAIT_MS;
	for (;;) {
		member_state(c, 0, 4, st, sizeof st);
		if (strcmp(st, "active") == 0) {
			break;
		}
		assert_true(harness_mono_ms() < end);
		harness_nap(200);
	}
	snprintf(nodearg, sizeof nodearg, "4@127.0.0.1:%u",
	         c->nodes[3].internal);
	{
		const char *ja[] = {nodearg};
		m = admin(&a, FSNP_OP_CLUSTER_JOIN, NULL, ja, 1);
		assert_int_equal(m.status, 0);
		assert_true(ftc_map_str(&m.value, "state", "active"));
		ftc_msg_free(&m);
		const char *wrong[] = {"4@127.0.0.1:1"};
		expect_error(admin(&a, FSNP_OP_CLUSTER_JOIN, NULL, wrong, 1), 1,
		             "is a member at");
	}
	m = admin(&a, FSNP_OP_CLUSTER_HEALTH, NULL, NULL, 0);
	assert_int_equal(ftc_map_int(&m.value, "nodes"), 4);
	ftc_msg_free(&m);
	/* The new member changes routing: an event, and SHARDS follows. */
	assert_true(topology_events(&sub, 3000) > 0);
	wait_shards_follow(c, 0, &a, &epoch1, 0);
	assert_true(epoch1 != epoch0);
	/* Placement now gives node 4 some groups (ids 1..4 and groups 1..3
	 * rank it first in at least one: rendezvous hashing is fixed). */
	print_message("node 4 votes in %u of 3 data groups\n",
	              check_slots(c, &a, 99, 4));
	assert_true(check_slots(c, &a, 99, 4) > 0);

	/* LEAVE: node 4 drained, removed, exits 0. */
	{
		const char *la[] = {nodearg};
		pid_t pid = c->nodes[3].pid;
		int wst = 0;
		m = admin(&a, FSNP_OP_CLUSTER_LEAVE, NULL, la, 1);
		if (m.status != 0) {
			char msg[256];
			ftc_error_text(&m, msg, sizeof msg);
			fail_msg("LEAVE: %s", msg);
		}
		assert_true(ftc_map_str(&m.value, "kind", "remove"));
		ftc_msg_free(&m);
		end = harness_mono_ms() + WAIT_MS;
		while (waitpid(pid, &wst, WNOHANG) == 0) {
			if (harness_mono_ms() > end) {
				harness_node_dump_log(c, 3);
				fail_msg("node 4 did not exit after LEAVE");
			}
			harness_nap(200);
		}
		c->nodes[3].pid = 0;
		assert_true(WIFEXITED(wst));
		assert_int_equal(WEXITSTATUS(wst), 0);
	}
	end = harness_mono_ms() + WAIT_MS;
	for (;;) {
		member_state(c, 0, 4, st, sizeof st);
		if (strcmp(st, "removed") == 0 || st[0] == '\0') {
			break;
		}
		assert_true(harness_mono_ms() < end);
		harness_nap(200);
	}
	assert_true(topology_events(&sub, 3000) > 0);
	wait_shards_follow(c, 0, &a, &epoch0, 4);
	check_slots(c, &a, 4, 0);
	m = admin(&a, FSNP_OP_CLUSTER_HEALTH, NULL, NULL, 0);
	assert_true(ftc_map_str(&m.value, "status", "ok"));
	ftc_msg_free(&m);

	ftc_close(&sub);
	ftc_close(&a);
	harness_cluster_stop(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_admin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
