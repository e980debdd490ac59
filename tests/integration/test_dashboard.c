/* Integration: the dashboard on one real node: GET / answers the page as
 * text/html, GET /v1/dashboard valid JSON with every key the page reads,
 * the node up, every group led and the history's series growing; the Flow
 * views the page polls: GET /v1/flow/stats (flows by type and state over
 * every group, the failed flow, the stuck one whose lease ran out) and
 * GET /v1/flow/governance (an open circuit, a pending approval, a budget
 * near its limit), their refusals, and the admin token guarding them; on
 * three nodes, the same cluster-wide counts from every node, and, once two
 * nodes are gone, an answer that names the groups that did not answer;
 * what the Membership operations panel reads while node 4 of four is
 * drained. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

/* GET `path` (with the bearer `token` unless NULL): the whole response,
 * headers included, in `out`. */
static int get_auth(uint16_t port, const char *path, const char *token,
                    char *out, size_t cap)
{
	struct sockaddr_in sa = {0};
	struct timeval tv = {5, 0};
	char req[512];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	int n = snprintf(req, sizeof req,
	                 "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s%s%s\r\n",
	                 path, token ? "Authorization: Bearer " : "",
	                 token ? token : "", token ? "\r\n" : "");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r = read(fd, out + got, cap - 1 - got);
		if (r <= 0 || (got += (size_t)r) == cap - 1) {
			break;
		}
	}
	close(fd);
	out[got] = '\0';
	return 0;
}

static int get_raw(uint16_t port, const char *path, char *out, size_t cap)
{
	return get_auth(port, path, NULL, out, cap);
}

static char resp[1 << 20];

static void test_page_and_document(void **state)
{
	struct harness_cluster c;
	(void)state;
	assert_int_equal(harness_cluster_start(&c, 1, NULL, true), 0);
	uint16_t port = c.nodes[0].admin;

	assert_int_equal(get_raw(port, "/", resp, sizeof resp), 0);
	assert_true(strncmp(resp, "HTTP/1.1 200", 12) == 0 ||
	            strncmp(resp, "HTTP/1.0 200", 12) == 0);
	char *type = strcasestr(resp, "\r\nContent-Type:");
	assert_non_null(type);
	assert_non_null(strstr(type, "text/html"));
	assert_true(strstr(type, "text/html") < strstr(resp, "\r\n\r\n"));
	assert_non_null(strstr(resp, "<title>Lodestone dashboard</title>"));
	assert_non_null(strstr(resp, "/v1/dashboard"));

	/* Until the history holds a few samples and the groups are led. */
	json_t *d = NULL;
	uint64_t deadline = harness_mono_ms() + 20000;
	for (;;) {
		json_decref(d);
		d = NULL;
		assert_int_equal(
		    get_raw(port, "/v1/dashboard", resp, sizeof resp), 0);
		const char *body = strstr(resp, "\r\n\r\n");
		assert_non_null(body);
		assert_non_null(strcasestr(resp, "application/json"));
		d = json_loads(body + 4, 0, NULL);
		assert_non_null(d);
		json_t *t = json_object_get(json_object_get(d, "series"), "t");
		if (json_array_size(t) >= 3 &&
		    json_array_size(json_object_get(d, "problems")) == 0) {
			break;
		}
		assert_true(harness_mono_ms() < deadline);
		harness_nap(200);
	}
	static const char *keys[] = {"node_id", "cluster_id", "nodes",
	                             "groups",  "series",     "streams",
	                             "caches",  "problems"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		assert_non_null(json_object_get(d, keys[i]));
	}
	assert_int_equal(json_integer_value(json_object_get(d, "node_id")), 1);
	json_t *nodes = json_object_get(d, "nodes");
	assert_int_equal(json_array_size(nodes), 1);
	json_t *n0 = json_array_get(nodes, 0);
	assert_int_equal(json_integer_value(json_object_get(n0, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(n0, "status")),
	                    "up");
	json_t *groups = json_object_get(d, "groups"), *g;
	size_t i;
	assert_true(json_array_size(groups) >= 2);
	json_array_foreach(groups, i, g)
	{
		assert_int_equal(
		    json_integer_value(json_object_get(g, "leader")), 1);
		assert_true(json_is_array(json_object_get(g, "voters")));
		assert_true(json_is_integer(json_object_get(g, "lag")));
		assert_string_equal(
		    json_string_value(json_object_get(g, "health")), "ok");
	}
	json_t *series = json_object_get(d, "series");
	size_t n = json_array_size(json_object_get(series, "t"));
	static const char *names[] = {"fsnp.requests_per_s",
	                              "felix.requests_per_s",
	                              "admin.requests_per_s",
	                              "admin.latency_ms",
	                              "raft.commits_per_s",
	                              "raft.sync_ms",
	                              "nodes.up"};
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(
		    json_array_size(json_object_get(series, names[i])), n);
	}
	json_t *up = json_object_get(series, "nodes.up");
	assert_true(json_number_value(json_array_get(up, n - 1)) == 1.0);
	assert_int_equal(json_array_size(json_object_get(
	                     json_object_get(series, "node_up"), "1")),
	                 n);
	/* The admin requests this test made were counted and timed. */
	json_t *lat = json_object_get(series, "admin.latency_ms");
	bool timed = false;
	for (i = 0; i < n; i++) {
		timed = timed || json_is_number(json_array_get(lat, i));
	}
	assert_true(timed);
	json_decref(d);
	harness_cluster_stop(&c);
}

/* The HTTP status of `resp` and its JSON body (NULL when not JSON). */
static json_t *parse(int *status)
{
	const char *body = strstr(resp, "\r\n\r\n");
	*status = 0;
	if (strncmp(resp, "HTTP/1.", 7) == 0) {
		*status = atoi(resp + 9);
	}
	return body != NULL ? json_loads(body + 4, 0, NULL) : NULL;
}

static json_t *get_json(uint16_t port, const char *path, const char *token,
                        int want)
{
	int st;
	json_t *d;
	assert_int_equal(get_auth(port, path, token, resp, sizeof resp), 0);
	d = parse(&st);
	if (st != want) {
		fail_msg("GET %s: status %d, want %d: %s", path, st, want,
		         resp);
	}
	assert_non_null(d);
	return d;
}

static void ok(struct ftc_msg m)
{
	if (m.status != 0) {
		char msg[512];
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("status %u: %s", m.status, msg);
	}
	ftc_msg_free(&m);
}

static struct ftc_msg call(struct ftc *c, uint16_t op, const char *fmt, ...)
{
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static int64_t wall_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Claims the one queued flow of `type`: its lease and fencing tokens. */
static void claim(struct ftc *c, const char *type, int64_t lease_ms,
                  char *token, size_t cap, int64_t *fencing)
{
	struct ftc_msg m =
	    call(c, FSNP_OP_FLOW_CLAIM_DUE,
	         "type=s worker=s lease_ms=i limit=i now_ms=i", type,
	         "dash-worker", lease_ms, (int64_t)1, wall_ms());
	struct fsnp_iter it;
	struct fsnp_val rec;
	struct fsnp_bytes b;
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &rec));
	assert_int_equal(fsnp_map_bin(&rec, "lease_token", &b), 0);
	assert_true(b.len < cap);
	memcpy(token, b.ptr, b.len);
	token[b.len] = '\0';
	*fencing = ftc_map_int(&rec, "fencing_token");
	ftc_msg_free(&m);
}

/* The entry of `arr` whose `key` is `value`, or NULL. */
static json_t *find(json_t *arr, const char *key, const char *value)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		const char *s = json_string_value(json_object_get(v, key));
		if (s != NULL && strcmp(s, value) == 0) {
			return v;
		}
	}
	return NULL;
}

static json_int_t state_count(json_t *type, const char *state)
{
	return json_integer_value(
	    json_object_get(json_object_get(type, "states"), state));
}

static void test_flow_views(void **state)
{
	static const char token[] = "dash-tok-5c1e9a";
	struct harness_cluster c;
	char path[256], lease[128];
	const char *const extra[] = {"--admin-token-file", path, NULL};
	int64_t fencing;
	struct ftc f;
	json_t *d, *t, *v;
	(void)state;

	snprintf(path, sizeof path, "/tmp/ls-dash-token-%d", (int)getpid());
	FILE *tf = fopen(path, "w");
	assert_non_null(tf);
	fprintf(tf, "%s\n", token);
	fclose(tf);
	assert_int_equal(harness_cluster_start(&c, 1, extra, true), 0);
	harness_secret(&c, token);
	uint16_t port = c.nodes[0].admin;
	assert_int_equal(ftc_wait_ready(c.nodes[0].fsnp, 20000), 0);

	/* The token guards both views. */
	json_decref(get_json(port, "/v1/flow/stats", NULL, 401));
	json_decref(get_json(port, "/v1/flow/governance", NULL, 401));
	json_decref(get_json(port, "/v1/flow/stats", "wrong", 401));

	/* Nothing yet: every group answered, no types. */
	d = get_json(port, "/v1/flow/stats", token, 200);
	assert_true(json_integer_value(json_object_get(d, "groups")) >= 1);
	assert_int_equal(
	    json_integer_value(json_object_get(d, "groups_answered")),
	    json_integer_value(json_object_get(d, "groups")));
	assert_int_equal(json_array_size(json_object_get(d, "types")), 0);
	assert_int_equal(json_array_size(json_object_get(d, "errors")), 0);
	json_decref(d);
	json_decref(get_json(port, "/v1/flow/stats?limit=0", token, 400));
	json_decref(get_json(port, "/v1/flow/stats?limit=101", token, 400));
	json_decref(get_json(port, "/v1/flow/stats?limit=x", token, 400));

	/* dash-ok: two queued. dash-bad: one failed, one stuck (its lease
	 * runs out and nobody reclaims it), one queued. */
	assert_int_equal(ftc_connect(&f, c.nodes[0].fsnp), 0);
	ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", "ok-1", "dash-ok"));
	ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", "ok-2", "dash-ok"));
	ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", "bad-1", "dash-bad"));
	claim(&f, "dash-bad", 30000, lease, sizeof lease, &fencing);
	ok(call(&f, FSNP_OP_FLOW_FAIL,
	        "id=s lease_token=s fencing_token=i error=s", "bad-1", lease,
	        fencing, "card declined"));
	ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", "bad-2", "dash-bad"));
	claim(&f, "dash-bad", 200, lease, sizeof lease, &fencing);
	ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", "bad-3", "dash-bad"));

	/* Until the lease of bad-2 has run out (a bounded wait). */
	d = NULL;
	for (int i = 0;; i++) {
		json_decref(d);
		d = get_json(port, "/v1/flow/stats?limit=5", token, 200);
		if (json_array_size(json_object_get(d, "stuck")) > 0) {
			break;
		}
		assert_true(i < 100);
		harness_nap(100);
	}
	assert_int_equal(json_array_size(json_object_get(d, "errors")), 0);
	t = json_object_get(d, "types");
	assert_int_equal(json_array_size(t), 2);
	/* The failing type first. */
	v = json_array_get(t, 0);
	assert_string_equal(json_string_value(json_object_get(v, "type")),
	                    "dash-bad");
	assert_int_equal(state_count(v, "failed"), 1);
	assert_int_equal(state_count(v, "running"), 1);
	assert_int_equal(state_count(v, "queued"), 1);
	assert_int_equal(json_integer_value(json_object_get(v, "total")), 3);
	assert_int_equal(json_integer_value(json_object_get(v, "failed")), 1);
	assert_int_equal(json_integer_value(json_object_get(v, "stuck")), 1);
	v = json_array_get(t, 1);
	assert_string_equal(json_string_value(json_object_get(v, "type")),
	                    "dash-ok");
	assert_int_equal(state_count(v, "queued"), 2);
	assert_int_equal(json_integer_value(json_object_get(d, "failed_total")),
	                 1);
	assert_int_equal(json_integer_value(json_object_get(d, "stuck_total")),
	                 1);
	v = find(json_object_get(d, "failed"), "id", "bad-1");
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "type")),
	                    "dash-bad");
	assert_string_equal(json_string_value(json_object_get(v, "error")),
	                    "card declined");
	v = find(json_object_get(d, "stuck"), "id", "bad-2");
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "reason")),
	                    "lease_expired");
	assert_string_equal(json_string_value(json_object_get(v, "state")),
	                    "running");
	assert_string_equal(
	    json_string_value(json_object_get(v, "lease_owner")),
	    "dash-worker");
	assert_true(json_integer_value(json_object_get(v, "since_ms")) > 0);
	json_decref(d);

	/* Governance: an open circuit, a pending approval, a budget at 90%
	 * and one at 10%. */
	ok(call(&f, FSNP_OP_FLOW_CIRCUIT_OPEN, "scope=s open_ms=i",
	        "dash-payments", (int64_t)600000));
	ok(call(&f, FSNP_OP_FLOW_APPROVAL_REQUEST,
	        "id=s flow_id=s scope=s reason=s requested_by=s timeout_ms=i",
	        "dash-refund-1", "bad-3", "refunds", "large refund", "bot",
	        (int64_t)600000));
	ok(call(&f, FSNP_OP_FLOW_BUDGET_RESERVE,
	        "scope=s amount=i limit=i window_ms=i reservation_id=s",
	        "dash-llm", (int64_t)90, (int64_t)100, (int64_t)3600000, "r1"));
	ok(call(&f, FSNP_OP_FLOW_BUDGET_RESERVE,
	        "scope=s amount=i limit=i window_ms=i reservation_id=s",
	        "dash-cheap", (int64_t)10, (int64_t)100, (int64_t)3600000,
	        "r2"));
	d = get_json(port, "/v1/flow/governance", token, 200);
	assert_int_equal(json_array_size(json_object_get(d, "errors")), 0);
	v = find(json_object_get(d, "open_circuits"), "scope", "dash-payments");
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "status")),
	                    "open");
	v = find(json_object_get(d, "pending_approvals"), "id",
	         "dash-refund-1");
	assert_non_null(v);
	v = find(json_object_get(d, "budgets_near_limit"), "scope", "dash-llm");
	assert_non_null(v);
	assert_true(json_real_value(json_object_get(v, "ratio")) > 0.89);
	assert_null(find(json_object_get(d, "budgets_near_limit"), "scope",
	                 "dash-cheap"));
	assert_non_null(
	    find(json_object_get(d, "budgets"), "scope", "dash-cheap"));
	json_t *counts = json_object_get(d, "counts");
	assert_int_equal(
	    json_integer_value(json_object_get(counts, "open_circuits")), 1);
	assert_int_equal(
	    json_integer_value(json_object_get(counts, "pending_approvals")),
	    1);
	json_decref(d);

	ftc_close(&f);
	harness_cluster_stop(&c);
	unlink(path);
}

/* The counts of `type` in the stats answer of node `port`. */
static void type_counts(uint16_t port, const char *type, json_int_t *total,
                        json_int_t *failed)
{
	json_t *d = get_json(port, "/v1/flow/stats", NULL, 200), *t;
	assert_int_equal(json_array_size(json_object_get(d, "errors")), 0);
	t = find(json_object_get(d, "types"), "type", type);
	assert_non_null(t);
	*total = json_integer_value(json_object_get(t, "total"));
	*failed = json_integer_value(json_object_get(t, "failed"));
	json_decref(d);
}

static void test_flow_views_cluster(void **state)
{
	struct harness_cluster c;
	const char *const extra[] = {"--forward-timeout-ms", "1000", NULL};
	char lease[128];
	int64_t fencing;
	struct ftc f;
	json_t *d;
	(void)state;

	assert_int_equal(harness_cluster_start(&c, 3, extra, true), 0);
	assert_int_equal(ftc_wait_ready(c.nodes[0].fsnp, 20000), 0);
	assert_int_equal(ftc_connect(&f, c.nodes[0].fsnp), 0);
	/* Ids spread over the auto partitions, so over every group; one
	 * claimed. */
	for (int i = 0; i < 8; i++) {
		char id[16];
		snprintf(id, sizeof id, "job-%d", i);
		ok(call(&f, FSNP_OP_FLOW_CREATE, "id=s type=s", id, "spread"));
	}
	claim(&f, "spread", 30000, lease, sizeof lease, &fencing);
	ftc_close(&f);

	/* Every node answers with the whole cluster's counts, whichever
	 * node leads which group. */
	for (unsigned n = 0; n < 3; n++) {
		json_int_t total, failed;
		type_counts(c.nodes[n].admin, "spread", &total, &failed);
		assert_int_equal(total, 8);
		assert_int_equal(failed, 0);
		d = get_json(c.nodes[n].admin, "/v1/flow/stats", NULL, 200);
		json_t *t = find(json_object_get(d, "types"), "type", "spread");
		assert_int_equal(state_count(t, "running"), 1);
		assert_int_equal(state_count(t, "queued"), 7);
		json_decref(d);
	}

	/* Two of three nodes gone: no group has a quorum. Node 1 still
	 * answers, naming the groups that did not (bounded wait: a leader
	 * may serve until it notices). */
	assert_int_equal(harness_node_signal(&c, 1, SIGKILL, NULL), 0);
	assert_int_equal(harness_node_signal(&c, 2, SIGKILL, NULL), 0);
	d = NULL;
	for (int i = 0;; i++) {
		json_decref(d);
		d = get_json(c.nodes[0].admin, "/v1/flow/stats", NULL, 200);
		if (json_array_size(json_object_get(d, "errors")) > 0) {
			break;
		}
		assert_true(i < 60);
		harness_nap(250);
	}
	json_t *e = json_array_get(json_object_get(d, "errors"), 0);
	assert_true(json_integer_value(json_object_get(e, "group")) >= 1);
	assert_non_null(json_string_value(json_object_get(e, "error")));
	assert_true(json_integer_value(json_object_get(d, "groups_answered")) <
	            json_integer_value(json_object_get(d, "groups")));
	json_decref(d);
	d = get_json(c.nodes[0].admin, "/v1/flow/governance", NULL, 200);
	assert_true(json_array_size(json_object_get(d, "errors")) > 0);
	assert_true(json_is_array(json_object_get(d, "open_circuits")));
	json_decref(d);
	harness_cluster_stop(&c);
}

/* The op `id` of the dashboard document, or NULL. */
static json_t *find_op(json_t *d, json_int_t id)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(d, "ops"), i, v)
	{
		if (json_integer_value(json_object_get(v, "id")) == id) {
			return v;
		}
	}
	return NULL;
}

/* What the Membership operations panel reads: a drain of node 4 of four
 * followed in ops[] to its end, node 4 draining, every member's voter
 * flag. */
static void test_membership_document(void **state)
{
	struct harness_cluster c;
	const char *const extra[] = {"--shards", "2", NULL};
	char out[4096];
	int st;
	json_t *d = NULL, *op = NULL, *n4 = NULL, *v;
	size_t i;
	(void)state;

	assert_int_equal(harness_cluster_start(&c, 4, extra, true), 0);
	uint16_t port = c.nodes[0].admin;
	/* Until node 1 has read the membership records (bounded). */
	for (int k = 0;; k++) {
		assert_int_equal(harness_http(port, "POST",
		                              "/v1/cluster/nodes/4/drain", NULL,
		                              &st, out, sizeof out),
		                 0);
		if (st == 202) {
			break;
		}
		if (k == 80) {
			fail_msg("drain: status %d: %s", st, out);
		}
		harness_nap(250);
	}
	json_t *started = json_loads(out, 0, NULL);
	json_int_t id = json_integer_value(json_object_get(started, "op"));
	json_decref(started);
	assert_true(id > 0);
	for (int k = 0;; k++) {
		json_decref(d);
		d = get_json(port, "/v1/dashboard", NULL, 200);
		op = find_op(d, id);
		n4 = find(json_object_get(d, "nodes"), "state", "draining");
		if (op != NULL && n4 != NULL &&
		    strcmp(json_string_value(json_object_get(op, "state")),
		           "done") == 0) {
			break;
		}
		assert_true(k < 120);
		harness_nap(250);
	}
	assert_string_equal(json_string_value(json_object_get(op, "kind")),
	                    "drain");
	assert_int_equal(json_integer_value(json_object_get(op, "node")), 4);
	assert_int_equal(json_integer_value(json_object_get(op, "done")),
	                 json_integer_value(json_object_get(op, "total")));
	assert_int_equal(json_integer_value(json_object_get(n4, "id")), 4);
	assert_int_equal(json_array_size(json_object_get(d, "nodes")), 4);
	json_array_foreach(json_object_get(d, "nodes"), i, v)
	{
		assert_true(json_is_true(json_object_get(v, "voter")));
		if (json_integer_value(json_object_get(v, "id")) != 4) {
			assert_string_equal(
			    json_string_value(json_object_get(v, "state")),
			    "active");
		}
	}
	json_decref(d);
	harness_cluster_stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_page_and_document),
	    cmocka_unit_test(test_flow_views),
	    cmocka_unit_test(test_flow_views_cluster),
	    cmocka_unit_test(test_membership_document),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
