/* Integration: liblodestone's FerricFlow calls (client/flow_client.h),
 * lodectl flow and lodebench flow against a real lodestone. The client
 * routes by SHARDS (topology mode), so every id call must reach the
 * flow's shard: a flow in an auto bucket and one with a partition key go
 * through create, get, claim, extend, a stale complete (refused), complete
 * and history; then retry, fail, transition and cancel; then lodectl's
 * output and exit codes, and a short lodebench run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/flow_client.h"
#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

static struct harness_cluster cluster;
static uint16_t port;
static struct fsnp_sync *sync_client;

static int setup(void **state)
{
	struct fsnp_client_options o;
	char err[256];

	(void)state;
	if (ftc_start(&cluster, ftc_env_nodes(), NULL, &port) != 0) {
		return -1;
	}
	memset(&o, 0, sizeof o);
	o.host = "127.0.0.1";
	o.port = port;
	o.topology = true;
	o.timeout_ms = 10000;
	if (fsnp_sync_open(&sync_client, &o, err, sizeof err) != 0) {
		print_message("cannot connect: %s\n", err);
		harness_cluster_stop(&cluster);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fsnp_sync_close(sync_client);
	harness_cluster_stop(&cluster);
	return 0;
}

/* Calls; returns the status; the reply value into *v (views into out). */
static uint16_t call(uint16_t op, const struct flow_args *a, struct wbuf *out,
                     struct fsnp_val *v)
{
	uint16_t status = 0xffff;
	wbuf_reset(out);
	assert_int_equal(flow_client_sync(sync_client, op, a, &status, out), 0);
	assert_int_equal(flow_client_decode(out->data, out->len, v), 0);
	return status;
}

static void assert_ok(uint16_t op, const struct flow_args *a)
{
	struct wbuf out;
	struct fsnp_val v;
	wbuf_init(&out);
	assert_int_equal(call(op, a, &out, &v), FSNP_STATUS_OK);
	assert_true(flow_client_is_ok(&v));
	wbuf_free(&out);
}

/* Claims one flow of `type` in pk; its tokens into token/fence. */
static void claim_one(const char *type, const char *pk, const char *want_id,
                      char *token, size_t cap, int64_t *fence)
{
	struct flow_args a;
	struct flow_record r[4];
	struct wbuf out;
	struct fsnp_val v;
	size_t n;

	flow_args_init(&a);
	a.type = type;
	a.worker = "itest";
	a.partition_key = pk;
	a.lease_ms = 30000;
	a.limit = 4;
	wbuf_init(&out);
	assert_int_equal(call(FSNP_OP_FLOW_CLAIM_DUE, &a, &out, &v),
	                 FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_claims(&v, r, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_true(fsnp_bytes_eq(r[0].id, want_id));
	assert_true(fsnp_bytes_eq(r[0].state, "running"));
	snprintf(token, cap, "%.*s", (int)r[0].lease_token.len,
	         (const char *)r[0].lease_token.ptr);
	*fence = r[0].fencing_token;
	wbuf_free(&out);
}

static void lifecycle(const char *id, const char *type, const char *pk)
{
	struct flow_args a;
	struct flow_record r;
	struct flow_event e;
	struct wbuf out;
	struct fsnp_val v;
	char token[160];
	int64_t fence;
	size_t n;

	wbuf_init(&out);
	flow_args_init(&a);
	a.id = id;
	a.type = type;
	a.partition_key = pk;
	a.data = "payload-1";
	a.data_len = 9;
	assert_ok(FSNP_OP_FLOW_CREATE, &a);

	flow_args_init(&a);
	a.id = id;
	a.partition_key = pk;
	a.payload = true;
	assert_int_equal(call(FSNP_OP_FLOW_GET, &a, &out, &v), FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_record(&v, &r), 0);
	assert_true(fsnp_bytes_eq(r.state, "queued"));
	assert_true(fsnp_bytes_eq(r.type, type));
	assert_int_equal(r.fencing_token, 0);
	assert_true(r.has_payload);

	claim_one(type, pk, id, token, sizeof token, &fence);
	assert_int_equal(fence, 1);

	flow_args_init(&a);
	a.id = id;
	a.partition_key = pk;
	a.lease_token = token;
	a.fencing_token = fence;
	a.lease_ms = 60000;
	assert_int_equal(call(FSNP_OP_FLOW_EXTEND_LEASE, &a, &out, &v),
	                 FSNP_STATUS_OK);

	/* A stale fencing token is refused. */
	a.fencing_token = fence + 1;
	assert_int_equal(call(FSNP_OP_FLOW_COMPLETE, &a, &out, &v),
	                 FSNP_STATUS_ERROR);
	a.fencing_token = fence;
	a.data = "done";
	a.data_len = 4;
	assert_ok(FSNP_OP_FLOW_COMPLETE, &a);
	/* Replaying it is a no-op. */
	assert_ok(FSNP_OP_FLOW_COMPLETE, &a);

	flow_args_init(&a);
	a.id = id;
	a.partition_key = pk;
	assert_int_equal(call(FSNP_OP_FLOW_HISTORY, &a, &out, &v),
	                 FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_event(&v, 0, &e, &n), 0);
	assert_int_equal(n, 4); /* created, claimed, extended, completed */
	assert_true(fsnp_bytes_eq(e.event, "created"));
	assert_int_equal(flow_client_parse_event(&v, 3, &e, NULL), 0);
	assert_true(fsnp_bytes_eq(e.event, "completed"));
	assert_int_equal(e.fencing_token, 1);
	wbuf_free(&out);
}

static void test_lifecycle(void **state)
{
	(void)state;
	lifecycle("order-1", "itest-auto", NULL);
	lifecycle("order-2", "itest-pk", "tenant-a");
}

static void test_retry_fail_transition_cancel(void **state)
{
	struct flow_args a;
	struct flow_record r;
	struct wbuf out;
	struct fsnp_val v;
	char token[160];
	int64_t fence;

	(void)state;
	wbuf_init(&out);
	flow_args_init(&a);
	a.id = "job-1";
	a.type = "itest-retry";
	a.partition_key = "p1";
	assert_ok(FSNP_OP_FLOW_CREATE, &a);
	claim_one("itest-retry", "p1", "job-1", token, sizeof token, &fence);
	flow_args_init(&a);
	a.id = "job-1";
	a.partition_key = "p1";
	a.lease_token = token;
	a.fencing_token = fence;
	a.run_at_ms = 0; /* due at once */
	assert_ok(FSNP_OP_FLOW_RETRY, &a);
	flow_args_init(&a);
	a.id = "job-1";
	a.partition_key = "p1";
	assert_int_equal(call(FSNP_OP_FLOW_GET, &a, &out, &v), FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_record(&v, &r), 0);
	assert_true(fsnp_bytes_eq(r.state, "queued"));
	assert_int_equal(r.attempts, 1);
	claim_one("itest-retry", "p1", "job-1", token, sizeof token, &fence);
	assert_int_equal(fence, 2);
	flow_args_init(&a);
	a.id = "job-1";
	a.partition_key = "p1";
	a.lease_token = token;
	a.fencing_token = fence;
	a.data = "boom";
	a.data_len = 4;
	assert_ok(FSNP_OP_FLOW_FAIL, &a);

	flow_args_init(&a);
	a.id = "job-2";
	a.type = "itest-retry";
	a.partition_key = "p1";
	assert_ok(FSNP_OP_FLOW_CREATE, &a);
	flow_args_init(&a);
	a.id = "job-2";
	a.partition_key = "p1";
	a.from_state = "queued";
	a.to_state = "waiting";
	a.fencing_token = 0;
	assert_ok(FSNP_OP_FLOW_TRANSITION, &a);
	flow_args_init(&a);
	a.id = "job-2";
	a.partition_key = "p1";
	a.fencing_token = 0;
	a.data = "no longer needed";
	a.data_len = 16;
	assert_ok(FSNP_OP_FLOW_CANCEL, &a);
	a.data = NULL;
	assert_int_equal(call(FSNP_OP_FLOW_GET, &a, &out, &v), FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_record(&v, &r), 0);
	assert_true(fsnp_bytes_eq(r.state, "cancelled"));
	/* Unknown flow: nil. */
	a.id = "nope";
	assert_int_equal(call(FSNP_OP_FLOW_GET, &a, &out, &v), FSNP_STATUS_OK);
	assert_int_equal(flow_client_parse_record(&v, &r),
	                 FLOW_CLIENT_ENOTFOUND);
	wbuf_free(&out);
}

static int run_tool(char *out, size_t cap, const char *tool,
                    const char *const args[])
{
	char addr[32];
	const char *argv[16];
	size_t n = 0;

	snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
	argv[n++] = tool;
	if (strstr(tool, "lodectl") != NULL) {
		argv[n++] = "--fsnp";
		argv[n++] = addr;
		argv[n++] = "flow";
	} else {
		argv[n++] = "flow";
		argv[n++] = "--fsnp";
		argv[n++] = addr;
	}
	for (size_t i = 0; args[i] != NULL && n + 1 < 16; i++) {
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return harness_run(argv, out, cap);
}

static int lodectl(char *out, const char *const args[])
{
	return run_tool(out, 8192, LS_ABS_BUILDDIR "/lodectl", args);
}

/* lodectl flow query: a table of records, a page resumed with the
 * printed cursor, a count, a refusal. */
static void test_lodectl_query(char *out)
{
	static const char *const q =
	    "FROM runs WHERE partition_key = @pk AND type = 'itest-q' AND "
	    "state = 'queued' ORDER BY updated_at_ms ASC LIMIT 2 RETURN "
	    "RECORDS (run_id, state)";
	static const char *const qc =
	    "FROM runs WHERE partition_key = @pk AND type = 'itest-q' AND "
	    "state = 'queued' ORDER BY updated_at_ms ASC LIMIT 2 CURSOR "
	    "@cursor RETURN RECORDS (run_id, state)";
	char cursor[4200];
	const char *p;
	int rv = -1;
	for (int i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof id, "lq-%d", i);
		assert_int_equal(
		    lodectl(out, (const char *[]){"create", id, "itest-q",
		                                  "--pk", "tq", NULL}),
		    0);
	}
	/* The cluster's cursor key arrives from the meta group shortly
	 * after start: until then a page with more is refused, retryable. */
	for (int tries = 0; tries < 100 && rv != 0; tries++) {
		rv = lodectl(out, (const char *[]){"query", q, "--param",
		                                   "pk=tq", NULL});
		if (rv != 0) {
			harness_nap(100);
		}
	}
	assert_int_equal(rv, 0);
	assert_non_null(strstr(out, "id"));
	assert_non_null(strstr(out, "lq-0"));
	assert_non_null(strstr(out, "lq-1"));
	assert_null(strstr(out, "lq-2"));
	p = strstr(out, "--cursor ");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "--cursor %4100[^)]", cursor), 1);
	assert_int_equal(
	    lodectl(out, (const char *[]){"query", qc, "--param", "pk=tq",
	                                  "--cursor", cursor, NULL}),
	    0);
	assert_non_null(strstr(out, "lq-2"));
	assert_non_null(strstr(out, "(1 record)"));
	assert_int_equal(
	    lodectl(out,
	            (const char *[]){"query",
	                             "FROM runs WHERE partition_key = 'tq' "
	                             "AND type = 'itest-q' RETURN COUNT",
	                             NULL}),
	    0);
	assert_int_equal(atoi(out), 3);
	assert_int_equal(
	    lodectl(out,
	            (const char *[]){"query",
	                             "FROM runs WHERE partition_key = 'tq' "
	                             "ORDER BY priority LIMIT 5 RETURN RECORDS",
	                             NULL}),
	    1);
	assert_non_null(strstr(out, "no bounded execution plan"));
}

static void test_lodectl(void **state)
{
	char out[8192], token[160];
	const char *p;

	(void)state;
	assert_int_equal(
	    lodectl(out, (const char *[]){"create", "lc-1", "itest-ctl",
	                                  "--payload", "hello", NULL}),
	    0);
	assert_non_null(strstr(out, "OK"));
	assert_int_equal(
	    lodectl(out, (const char *[]){"get", "lc-1", "--payload", NULL}),
	    0);
	assert_non_null(strstr(out, "state:"));
	assert_non_null(strstr(out, "queued"));
	assert_non_null(strstr(out, "hello"));
	assert_int_equal(
	    lodectl(out, (const char *[]){"claim", "itest-ctl", "w1",
	                                  "--lease-ms", "20000", NULL}),
	    0);
	p = strstr(out, "lease_token:");
	assert_non_null(p);
	assert_int_equal(sscanf(p, "lease_token: %159s", token), 1);
	/* Stale token: refused, exit 1. */
	assert_int_equal(lodectl(out, (const char *[]){"complete", "lc-1",
	                                               token, "7", NULL}),
	                 1);
	assert_int_equal(lodectl(out, (const char *[]){"complete", "lc-1",
	                                               token, "1", NULL}),
	                 0);
	assert_int_equal(
	    lodectl(out, (const char *[]){"history", "lc-1", NULL}), 0);
	assert_non_null(strstr(out, "completed"));
	assert_int_equal(lodectl(out, (const char *[]){"get", "nope", NULL}),
	                 1);
	assert_non_null(strstr(out, "not found"));
	/* Usage errors: exit 2. */
	assert_int_equal(
	    lodectl(out, (const char *[]){"complete", "lc-1", NULL}), 2);
	assert_int_equal(lodectl(out, (const char *[]){"frobnicate", NULL}), 2);
	test_lodectl_query(out);
}

static void test_lodebench(void **state)
{
	char out[8192];

	(void)state;
	assert_int_equal(
	    run_tool(out, sizeof out, LS_ABS_BUILDDIR "/lodebench",
	             (const char *[]){"-c", "4", "-n", "200", NULL}),
	    0);
	assert_non_null(strstr(out, "flows=200 "));
	assert_non_null(strstr(out, "errors=0"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lifecycle),
	    cmocka_unit_test(test_retry_fail_transition_cancel),
	    cmocka_unit_test(test_lodectl),
	    cmocka_unit_test(test_lodebench),
	};
	return cmocka_run_group_tests_name("flow_client", tests, setup,
	                                   teardown);
}
