/* Integration: what a Felix broker tells clients about the cluster, on raw
 * frames over live connections.
 *  - A standalone node advertises neither FEATURE_TOPOLOGY nor
 *    FEATURE_REDIRECT nor the owner flag 0x0080, and answers a topology
 *    request it did not advertise with an error.
 *  - On three nodes: auth_ok carries 0x00FF and 0x03FF; topology lists
 *    the three brokers with their client addresses; a subscribe, a cache
 *    watch and the consumer-group calls sent to a node that does not lead
 *    the shard are answered not_leader{node_id, addr, generation} when the
 *    client offered FEATURE_REDIRECT and an error naming the leader when it
 *    did not; publish_idempotent is refused with not_leader in
 *    publish_refused either way; a forwarded acked binary publish is acked
 *    with the owner (0x0090) only to a client that offered 0x0080, and a
 *    publish on the leader never names one; after the leader is killed,
 *    a node that does not lead names the new leader with a higher
 *    generation.
 * Times only bound the waits. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/integration/felix_util.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"
#include "wire/felix_msg.h"

#define NODES 3
#define MAX_FRAMES 8
#define ALL_FLAGS 0x00FF
#define OLD_FLAGS 0x007F

/* The frames one raw stream received. */
struct rawx {
	bool ended;
	unsigned n;
	uint16_t flags[MAX_FRAMES];
	uint8_t *payload[MAX_FRAMES];
	uint32_t len[MAX_FRAMES];
};

static void rx_frame(void *data, struct felix_raw *raw, uint16_t flags,
                     const uint8_t *payload, uint32_t len)
{
	struct rawx *x = data;
	(void)raw;
	if (x->n >= MAX_FRAMES) {
		return;
	}
	x->flags[x->n] = flags;
	x->payload[x->n] = malloc(len + 1);
	assert_non_null(x->payload[x->n]);
	memcpy(x->payload[x->n], payload, len);
	x->payload[x->n][len] = '\0';
	x->len[x->n] = len;
	x->n++;
}

static void rx_end(void *data, struct felix_raw *raw, const char *why)
{
	struct rawx *x = data;
	(void)raw;
	(void)why;
	x->ended = true;
}

static void rawx_free(struct rawx *x)
{
	for (unsigned i = 0; i < x->n; i++) {
		free(x->payload[i]);
	}
	memset(x, 0, sizeof *x);
}

/* Sends `bytes` on a new authenticated stream of `f` and waits for `want`
 * frames (the auth answer first). */
static void raw_ask(struct fx *f, const uint8_t *bytes, size_t len,
                    unsigned want, struct rawx *x)
{
	struct felix_raw *raw;
	uint64_t t0 = harness_mono_ms();
	memset(x, 0, sizeof *x);
	assert_int_equal(
	    felix_client_raw_open(f->c, true, rx_frame, rx_end, x, &raw), 0);
	assert_int_equal(felix_raw_send(raw, bytes, len, true), 0);
	while (x->n < want && !x->ended) {
		fx_spin(f, 20);
		if (harness_mono_ms() - t0 > FX_WAIT_MS) {
			fail_msg("%u of %u frames", x->n, want);
		}
	}
	assert_true(x->n >= want);
}

/* A JSON request as a whole frame into buf. */
static size_t json_frame(uint8_t *buf, const char *json)
{
	size_t n = strlen(json);
	felix_frame_header_encode(0, (uint32_t)n, buf);
	memcpy(buf + FELIX_FRAME_HEADER_LEN, json, n);
	return FELIX_FRAME_HEADER_LEN + n;
}

/* The answer to one JSON request (frame 1, after auth_ok), decoded. */
static void ask_json(struct fx *f, const char *json, struct felix_msg *out)
{
	static uint8_t buf[4096];
	struct rawx x;
	char err[256];
	size_t len = json_frame(buf, json);
	raw_ask(f, buf, len, 2, &x);
	assert_int_equal(x.flags[1], 0);
	if (felix_msg_decode(x.payload[1], x.len[1], out, err, sizeof err) !=
	    0) {
		fail_msg("%s: %s", err, (char *)x.payload[1]);
	}
	rawx_free(&x);
}

static void connect_node(struct fx *f, uv_loop_t *loop,
                         struct harness_cluster *cl, unsigned i, uint16_t flags,
                         uint32_t features)
{
	int rv = fx_connect_with(f, loop, cl, i, flags, features);
	if (rv != 0) {
		fprintf(stderr, "connect to node %u: %d %s\n", i + 1, rv,
		        f->message);
		harness_node_dump_log(cl, i);
	}
	assert_int_equal(rv, 0);
}

static void wait_ready(struct fx *f)
{
	for (int k = 0; k < 300; k++) {
		if (fx_cache_put(f, "ready", "k", "v", false, 0) == 0) {
			return;
		}
		fx_spin(f, 100);
	}
	fail_msg("the cluster never answered: %s", f->message);
}

static void test_standalone(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "2", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	struct felix_msg m;
	(void)state;
	assert_int_equal(harness_cluster_start(&cl, 1, args, true), 0);
	uv_loop_init(&loop);
	connect_node(&f, &loop, &cl, 0, ALL_FLAGS, FELIX_FEATURES_ALL);
	assert_int_equal(felix_client_server_flags(f.c), 0x007F);
	assert_int_equal(felix_client_server_features(f.c), 0x03FC);
	ask_json(&f, "{\"type\":\"topology\"}", &m);
	assert_int_equal(m.type, FELIX_MSG_ERROR);
	assert_non_null(strstr(m.u.error.message, "not served"));
	felix_msg_free(&m);
	/* The session goes on. */
	wait_ready(&f);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* The generation node i names for shard 0's group of t1/default/NAME
 * (/v1/streams or /v1/caches, then /v1/cluster). */
static uint64_t scope_generation(struct harness_cluster *cl, unsigned i,
                                 const char *kind, const char *name)
{
	static char out[1 << 18];
	char path[256];
	int st = 0;
	json_t *o, *g;
	size_t k;
	uint64_t group = 0, gen = 0;
	/* The scope as node 0, which created it, knows it. */
	snprintf(path, sizeof path, "/v1/%s/t1/default/%s", kind, name);
	assert_int_equal(harness_http(cl->nodes[0].admin, "GET", path, NULL,
	                              &st, out, sizeof out),
	                 0);
	assert_int_equal(st, 200);
	o = json_loads(out, 0, NULL);
	group = (uint64_t)json_integer_value(json_object_get(
	    json_array_get(json_object_get(o, "shard_state"), 0), "group"));
	json_decref(o);
	assert_true(group > 0);
	assert_int_equal(harness_http(cl->nodes[i].admin, "GET", "/v1/cluster",
	                              NULL, &st, out, sizeof out),
	                 0);
	o = json_loads(out, 0, NULL);
	json_array_foreach(json_object_get(o, "groups"), k, g)
	{
		if ((uint64_t)json_integer_value(json_object_get(g, "id")) ==
		    group) {
			gen = (uint64_t)json_integer_value(
			    json_object_get(g, "generation"));
		}
	}
	json_decref(o);
	return gen;
}

/* The request is answered not_leader naming node `leader` at `addr` with
 * generation `gen` (redirect) or an error naming it (no redirect). */
static void expect_redirect(struct fx *f, const char *json, bool redirect,
                            unsigned leader, const char *addr, uint64_t gen)
{
	struct felix_msg m;
	char id[16], want[32];
	snprintf(id, sizeof id, "%u", leader);
	ask_json(f, json, &m);
	if (redirect) {
		if (m.type != FELIX_MSG_NOT_LEADER) {
			fail_msg("%s: answered %s", json,
			         felix_msg_type_name(m.type));
		}
		assert_string_equal(m.u.not_leader.node_id, id);
		assert_non_null(m.u.not_leader.addr);
		assert_string_equal(m.u.not_leader.addr, addr);
		assert_true(m.u.not_leader.generation == gen);
	} else {
		if (m.type != FELIX_MSG_ERROR) {
			fail_msg("%s: answered %s", json,
			         felix_msg_type_name(m.type));
		}
		snprintf(want, sizeof want, "led by node %u", leader);
		assert_non_null(strstr(m.u.error.message, "not leader"));
		assert_non_null(strstr(m.u.error.message, want));
		assert_non_null(strstr(m.u.error.message, addr));
	}
	felix_msg_free(&m);
}

/* One acked binary publish to t1/default/NAME; returns its ack frame's
 * flags and decodes it into *a (views into x). */
static uint16_t publish_acked(struct fx *f, const char *name, struct rawx *x,
                              struct felix_publish_ack *a)
{
	struct felix_publish_batch b;
	struct felix_view p = {(const uint8_t *)"rec", 3};
	struct wbuf w;
	char err[256];
	memset(&b, 0, sizeof b);
	b.acked = true;
	b.request_id = 77;
	b.ack_mode = FELIX_ACK_PER_BATCH;
	b.tenant_id.data = (const uint8_t *)"t1";
	b.tenant_id.len = 2;
	b.namespace.data = (const uint8_t *)"default";
	b.namespace.len = 7;
	b.stream.data = (const uint8_t *)name;
	b.stream.len = strlen(name);
	wbuf_init(&w);
	assert_int_equal(felix_publish_batch_encode(&w, &b, &p, 1), 0);
	raw_ask(f, w.data, w.len, 2, x);
	wbuf_free(&w);
	assert_int_equal(x->flags[1] & FELIX_FLAG_PUBLISH_ACK,
	                 FELIX_FLAG_PUBLISH_ACK);
	if (felix_publish_ack_decode(x->flags[1], x->payload[1], x->len[1], a,
	                             err, sizeof err) != 0) {
		fail_msg("ack: %s", err);
	}
	assert_int_equal(a->status, FELIX_ACK_STATUS_OK);
	assert_true(a->request_id == 77);
	return x->flags[1];
}

static void test_cluster(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[NODES], redir[NODES], plain[NODES];
	struct felix_msg m;
	char json[1024], addr[64], caddr[64];
	(void)state;
	assert_int_equal(harness_cluster_start(&cl, NODES, args, true), 0);
	uv_loop_init(&loop);
	for (unsigned i = 0; i < NODES; i++) {
		connect_node(&f[i], &loop, &cl, i, OLD_FLAGS, 0);
		wait_ready(&f[i]);
	}
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "rs", "{\"shards\":1}"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "rc", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	unsigned L = fx_wait_scope_leader(&cl, 0, "streams", "rs", 0);
	unsigned Lc = fx_wait_scope_leader(&cl, 0, "caches", "rc", 0);
	assert_true(L != 0 && Lc != 0);
	unsigned li = L - 1, o = L % NODES, oc = Lc % NODES;
	snprintf(addr, sizeof addr, "127.0.0.1:%u", cl.nodes[li].felix);
	snprintf(caddr, sizeof caddr, "127.0.0.1:%u", cl.nodes[Lc - 1].felix);
	uint64_t gen = 0;
	uint64_t cgen = scope_generation(&cl, Lc - 1, "caches", "rc");
	/* Every node names the same generation for the same leader, once
	 * each has refreshed its view of the group (bounded wait). */
	for (int tries = 0; tries < 200; tries++) {
		unsigned same = 0;
		gen = scope_generation(&cl, li, "streams", "rs");
		for (unsigned i = 0; i < NODES; i++) {
			same +=
			    scope_generation(&cl, i, "streams", "rs") == gen;
		}
		if (same == NODES) {
			break;
		}
		uv_sleep(100);
	}
	assert_true(gen > 0 && cgen > 0);
	for (unsigned i = 0; i < NODES; i++) {
		assert_true(scope_generation(&cl, i, "streams", "rs") == gen);
	}
	for (unsigned i = 0; i < NODES; i++) {
		connect_node(&redir[i], &loop, &cl, i, ALL_FLAGS,
		             FELIX_FEATURES_ALL);
		connect_node(&plain[i], &loop, &cl, i, ALL_FLAGS,
		             FELIX_FEATURES_ALL & ~FELIX_FEATURE_REDIRECT);
	}

	/* A cluster advertises topology, redirects and owner acks. */
	assert_int_equal(felix_client_server_flags(redir[o].c), 0x00FF);
	assert_int_equal(felix_client_server_features(redir[o].c), 0x03FF);

	/* topology: the three brokers (records reach every node within a
	 * second or so of the start; wait for them). */
	uint64_t t0 = harness_mono_ms();
	for (;;) {
		ask_json(&redir[o], "{\"type\":\"topology\"}", &m);
		assert_int_equal(m.type, FELIX_MSG_TOPOLOGY_VIEW);
		if (m.u.topology_view.brokers.count == NODES) {
			break;
		}
		felix_msg_free(&m);
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&redir[o], 200);
	}
	for (unsigned i = 0; i < NODES; i++) {
		const struct felix_broker_endpoint *e =
		    &m.u.topology_view.brokers.items[i];
		char id[16], a[64];
		snprintf(id, sizeof id, "%u", i + 1);
		snprintf(a, sizeof a, "127.0.0.1:%u", cl.nodes[i].felix);
		assert_string_equal(e->node_id, id);
		assert_string_equal(e->addr, a);
	}
	felix_msg_free(&m);

	/* A subscribe, a cache watch and every consumer-group call on a
	 * node that does not lead the shard. */
	static const char *const stream_reqs[] = {
	    "{\"type\":\"subscribe\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"start\":\"latest\"}",
	    "{\"type\":\"group_poll\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"shard\":0,\"group\":\"g\","
	    "\"max_records\":4,\"wait_ms\":0,\"request_id\":1}",
	    "{\"type\":\"group_ack\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"shard\":0,\"group\":\"g\","
	    "\"offset\":0,\"request_id\":2}",
	    "{\"type\":\"group_nack\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"shard\":0,\"group\":\"g\","
	    "\"offset\":0,\"request_id\":3}",
	    "{\"type\":\"group_dead_letters\",\"tenant_id\":\"t1\","
	    "\"namespace\":\"default\",\"stream\":\"rs\",\"shard\":0,"
	    "\"group\":\"g\",\"request_id\":4}",
	    "{\"type\":\"group_discard\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"shard\":0,\"group\":\"g\","
	    "\"offset\":0,\"request_id\":5}",
	    "{\"type\":\"group_redrive\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"stream\":\"rs\",\"shard\":0,\"group\":\"g\","
	    "\"offset\":0,\"request_id\":6}",
	};
	for (size_t k = 0; k < sizeof stream_reqs / sizeof *stream_reqs; k++) {
		expect_redirect(&redir[o], stream_reqs[k], true, L, addr, gen);
		expect_redirect(&plain[o], stream_reqs[k], false, L, addr, gen);
	}
	static const char *const watch_reqs[] = {
	    "{\"type\":\"cache_watch\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"cache\":\"rc\",\"prefix\":\"\"}",
	    "{\"type\":\"cache_watch\",\"tenant_id\":\"t1\",\"namespace\":"
	    "\"default\",\"cache\":\"rc\",\"key\":\"k\",\"retained\":true}",
	};
	for (size_t k = 0; k < sizeof watch_reqs / sizeof *watch_reqs; k++) {
		expect_redirect(&redir[oc], watch_reqs[k], true, Lc, caddr,
		                cgen);
		expect_redirect(&plain[oc], watch_reqs[k], false, Lc, caddr,
		                cgen);
	}
	/* The leader serves them. */
	ask_json(&redir[li], stream_reqs[0], &m);
	assert_int_equal(m.type, FELIX_MSG_SUBSCRIBED);
	felix_msg_free(&m);
	ask_json(&redir[li], stream_reqs[1], &m);
	assert_int_equal(m.type, FELIX_MSG_GROUP_RECORDS);
	felix_msg_free(&m);
	ask_json(&redir[Lc - 1], watch_reqs[0], &m);
	assert_true(m.type == FELIX_MSG_CACHE_WATCH_STARTED ||
	            m.type == FELIX_MSG_EVENT_STREAM_HELLO);
	felix_msg_free(&m);

	/* publish_idempotent: publish_refused naming the leader, to every
	 * client (it answers refusals that way by FEATURE_IDEMPOTENT). */
	for (int k = 0; k < 2; k++) {
		snprintf(json, sizeof json,
		         "{\"type\":\"publish_idempotent\",\"tenant_id\":"
		         "\"t1\",\"namespace\":\"default\",\"stream\":\"rs\","
		         "\"payloads\":[\"eA==\"],\"request_id\":9,"
		         "\"producer_id\":5,\"sequence\":0}");
		ask_json(k ? &plain[o] : &redir[o], json, &m);
		assert_int_equal(m.type, FELIX_MSG_PUBLISH_REFUSED);
		assert_int_equal(m.u.publish_refused.reason.kind,
		                 FELIX_REFUSAL_NOT_LEADER);
		char id[16];
		snprintf(id, sizeof id, "%u", L);
		assert_string_equal(m.u.publish_refused.reason.node_id, id);
		assert_string_equal(m.u.publish_refused.reason.addr, addr);
		felix_msg_free(&m);
	}

	/* Forwarded publishes: the owner in the ack only with 0x0080. */
	struct rawx x;
	struct felix_publish_ack a;
	char id[16];
	snprintf(id, sizeof id, "%u", L);
	uint16_t fl = publish_acked(&redir[o], "rs", &x, &a);
	assert_int_equal(fl,
	                 FELIX_FLAG_PUBLISH_ACK | FELIX_FLAG_PUBLISH_ACK_OWNER);
	assert_true(a.has_owner && a.has_owner_addr);
	assert_int_equal(a.owner_node_id.len, strlen(id));
	assert_memory_equal(a.owner_node_id.data, id, strlen(id));
	assert_int_equal(a.owner_addr.len, strlen(addr));
	assert_memory_equal(a.owner_addr.data, addr, strlen(addr));
	assert_true(a.owner_generation == gen);
	/* The whole frame, byte for byte: status, request_id, empty
	 * message, node id, address, generation. */
	assert_int_equal(x.len[1],
	                 1 + 8 + 2 + 2 + strlen(id) + 2 + strlen(addr) + 8);
	rawx_free(&x);
	fl = publish_acked(&f[o], "rs", &x, &a);
	assert_int_equal(fl, FELIX_FLAG_PUBLISH_ACK);
	assert_false(a.has_owner);
	assert_int_equal(x.len[1], 1 + 8 + 2);
	rawx_free(&x);
	/* On the leader nothing was forwarded. */
	fl = publish_acked(&redir[li], "rs", &x, &a);
	assert_int_equal(fl, FELIX_FLAG_PUBLISH_ACK);
	assert_false(a.has_owner);
	rawx_free(&x);
	assert_true(fx_metric(&cl, o, "lodestone_felix_owner_acks_total") >= 1);
	assert_true(fx_metric(&cl, o, "lodestone_felix_redirects_total") >= 7);

	/* Plain requests keep being forwarded. */
	char buf[16];
	bool found = false;
	assert_int_equal(fx_cache_put(&plain[oc], "rc", "k", "v", false, 0), 0);
	assert_int_equal(
	    fx_cache_get(&plain[oc], "rc", "k", buf, sizeof buf, &found), 0);
	assert_true(found);

	/* The stream shard's leader dies: a survivor that does not lead
	 * names the new leader with a higher generation. */
	fx_close(&f[li]);
	fx_close(&redir[li]);
	fx_close(&plain[li]);
	assert_int_equal(harness_node_signal(&cl, li, SIGKILL, NULL), 0);
	t0 = harness_mono_ms();
	for (;;) {
		unsigned L2 = fx_wait_scope_leader(&cl, o, "streams", "rs", L);
		assert_true(L2 != 0);
		/* The survivor that does not lead (leadership may still
		 * move between them: ask again then). */
		unsigned ask = 0;
		while (ask == li || ask == L2 - 1) {
			ask++;
		}
		ask_json(&redir[ask], stream_reqs[0], &m);
		if (m.type == FELIX_MSG_NOT_LEADER &&
		    strcmp(m.u.not_leader.node_id, id) != 0) {
			char want[16];
			snprintf(want, sizeof want, "%u", L2);
			assert_string_equal(m.u.not_leader.node_id, want);
			assert_true(m.u.not_leader.generation > gen);
			felix_msg_free(&m);
			break;
		}
		felix_msg_free(&m);
		assert_true(harness_mono_ms() - t0 < 30000);
		fx_spin(&redir[ask], 200);
	}

	for (unsigned i = 0; i < NODES; i++) {
		fx_close(&f[i]);
		fx_close(&redir[i]);
		fx_close(&plain[i]);
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_standalone),
	    cmocka_unit_test(test_cluster),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
