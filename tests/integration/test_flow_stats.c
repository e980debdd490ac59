/* Integration: FLOW.STATS, FLOW.ATTRIBUTES and FLOW.ATTRIBUTE_VALUES over
 * FSNP on real processes, on one node (four shards) and on three nodes
 * (two shards, asked through every node): counts by type and state with
 * and without a partition (one group, or every group merged), by one and
 * by two attributes, attribute names and values of the policy's indexed
 * attributes ordered by count and cut to `count`, the refusals; the SDK's
 * COMMAND_EXEC forms and FLOW.QUERY.INDEXES; the query manifest lists the
 * index catalog; every node holds the shared cursor key from the meta
 * group. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

static struct harness_cluster cl;
static unsigned n_nodes;
static char type[48];

/* Flows created by setup (in every run): id, partition ("" auto),
 * region, tier (0 none). Four of them are claimed (running). */
static const struct {
	const char *id;
	const char *part;
	const char *region;
	int tier;
} flows[] = {
    {"s1", "tenant-a", "eu", 1}, {"s2", "tenant-a", "eu", 2},
    {"s3", "tenant-a", "us", 2}, {"s4", "tenant-b", "eu", 2},
    {"s5", "tenant-b", "us", 0}, {"s6", "", "eu", 2},
    {"s7", "", "us", 1},         {"s8", "", "ap", 0},
    {"s9", "", "eu", 0},         {"s10", "tenant-c", "eu", 3},
};
#define N_FLOWS (sizeof flows / sizeof flows[0])

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void ok(const struct ftc_msg *m)
{
	if (m->status != 0) {
		char msg[512];
		ftc_error_text(m, msg, sizeof msg);
		fail_msg("status %u: %s", m->status, msg);
	}
}

static struct ftc_msg callb(struct ftc *c, uint16_t op, struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, 0, b, &m), 0);
	wbuf_free(b);
	return m;
}

static struct ftc_msg call(struct ftc *c, uint16_t op, const char *fmt, ...)
{
	struct wbuf b;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	return callb(c, op, &b);
}

/* Writes an attributes map: region (NULL none) and tier (0 none). */
static void w_attrs(struct fsnp_writer *w, const char *region, int tier)
{
	fsnp_w_map_begin(w);
	if (region != NULL) {
		fsnp_w_key(w, "region");
		fsnp_w_str(w, region);
	}
	if (tier > 0) {
		fsnp_w_key(w, "tier");
		fsnp_w_i64(w, tier);
	}
	fsnp_w_map_end(w);
}

static int64_t stats(struct ftc *c, const char *state, const char *part,
                     const char *region, int tier)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct ftc_msg m;
	int64_t n;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "type");
	fsnp_w_str(&w, type);
	fsnp_w_key(&w, "state");
	fsnp_w_str(&w, state);
	if (part != NULL) {
		fsnp_w_key(&w, "partition_key");
		fsnp_w_str(&w, part);
	}
	if (region != NULL || tier > 0) {
		fsnp_w_key(&w, "attributes");
		w_attrs(&w, region, tier);
	}
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	m = callb(c, FSNP_OP_FLOW_STATS, &b);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "type", type));
	assert_true(ftc_map_str(&m.value, "state", state));
	n = ftc_map_int(&m.value, "count");
	ftc_msg_free(&m);
	return n;
}

/* What the flows above say, `running` of them claimed. */
static int64_t want(const char *state, const char *part, const char *region,
                    int tier, const bool *running)
{
	int64_t n = 0;
	for (size_t i = 0; i < N_FLOWS; i++) {
		const char *st = running[i] ? "running" : "queued";
		if ((strcmp(state, "any") != 0 && strcmp(state, st) != 0) ||
		    (part != NULL && strcmp(part, flows[i].part) != 0) ||
		    (region != NULL && strcmp(region, flows[i].region) != 0) ||
		    (tier > 0 && tier != flows[i].tier)) {
			continue;
		}
		n++;
	}
	return n;
}

static bool running[N_FLOWS];

static void test_stats(void **state)
{
	(void)state;
	for (unsigned node = 0; node < n_nodes; node++) {
		struct ftc c;
		static const char *const parts[] = {NULL, "tenant-a",
		                                    "tenant-b", ""};
		assert_int_equal(ftc_connect(&c, cl.nodes[node].fsnp), 0);
		for (size_t p = 0; p < 3; p++) {
			assert_int_equal(
			    stats(&c, "queued", parts[p], NULL, 0),
			    want("queued", parts[p], NULL, 0, running));
			assert_int_equal(
			    stats(&c, "running", parts[p], NULL, 0),
			    want("running", parts[p], NULL, 0, running));
			assert_int_equal(
			    stats(&c, "any", parts[p], "eu", 0),
			    want("any", parts[p], "eu", 0, running));
			assert_int_equal(
			    stats(&c, "queued", parts[p], "eu", 2),
			    want("queued", parts[p], "eu", 2, running));
			assert_int_equal(
			    stats(&c, "any", parts[p], "eu", 2),
			    want("any", parts[p], "eu", 2, running));
		}
		/* The default state is queued. */
		{
			struct ftc_msg m =
			    call(&c, FSNP_OP_FLOW_STATS, "type=s", type);
			ok(&m);
			assert_true(ftc_map_str(&m.value, "state", "queued"));
			assert_int_equal(
			    ftc_map_int(&m.value, "count"),
			    want("queued", NULL, NULL, 0, running));
			ftc_msg_free(&m);
		}
		/* Refusals keep the connection. */
		{
			char msg[256];
			struct ftc_msg m = call(&c, FSNP_OP_FLOW_STATS,
			                        "type=s state=s", type, "any");
			assert_int_equal(m.status, 1);
			ftc_error_text(&m, msg, sizeof msg);
			assert_non_null(strstr(
			    msg, "ERR flow state any requires attributes"));
			ftc_msg_free(&m);
			m = call(&c, FSNP_OP_FLOW_STATS, "state=s", "queued");
			assert_int_equal(m.status, 6);
			ftc_msg_free(&m);
			m = call(&c, FSNP_OP_FLOW_ATTRIBUTES, "type=s count=i",
			         type, (int64_t)5000);
			assert_int_equal(m.status, 1);
			ftc_msg_free(&m);
		}
		ftc_close(&c);
	}
}

/* The value or name of list entry i, and its count. */
static void entry(const struct fsnp_val *list, uint32_t i, const char *key,
                  char *text, int64_t *count)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	struct fsnp_bytes b;
	uint32_t k = 0;
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (k++ == i) {
			assert_int_equal(fsnp_map_bin(&e, key, &b), 0);
			memcpy(text, b.ptr, b.len);
			text[b.len] = '\0';
			*count = ftc_map_int(&e, "count");
			return;
		}
	}
	fail_msg("no entry %u", i);
}

static void test_attributes(void **state)
{
	(void)state;
	for (unsigned node = 0; node < n_nodes; node++) {
		struct ftc c;
		struct ftc_msg m;
		char text[64];
		int64_t n;
		int64_t with_tier = 0;
		for (size_t i = 0; i < N_FLOWS; i++) {
			with_tier += flows[i].tier > 0;
		}
		assert_int_equal(ftc_connect(&c, cl.nodes[node].fsnp), 0);
		/* Indexed names with their flows, most first. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTES, "type=s", type);
		ok(&m);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		assert_int_equal(m.value.as.count, 2);
		entry(&m.value, 0, "name", text, &n);
		assert_string_equal(text, "region");
		assert_int_equal(n, (int64_t)N_FLOWS);
		entry(&m.value, 1, "name", text, &n);
		assert_string_equal(text, "tier");
		assert_int_equal(n, with_tier);
		ftc_msg_free(&m);
		/* One partition, one state. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTES,
		         "type=s partition_key=s state=s", type, "tenant-a",
		         "queued");
		ok(&m);
		entry(&m.value, 0, "name", text, &n);
		assert_string_equal(text, "region");
		assert_int_equal(n,
		                 want("queued", "tenant-a", NULL, 0, running));
		ftc_msg_free(&m);
		/* Values: eu 6, us 3, ap 1. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTE_VALUES,
		         "type=s attribute=s", type, "region");
		ok(&m);
		assert_int_equal(m.value.as.count, 3);
		entry(&m.value, 0, "value", text, &n);
		assert_string_equal(text, "eu");
		assert_int_equal(n, want("any", NULL, "eu", 0, running));
		entry(&m.value, 1, "value", text, &n);
		assert_string_equal(text, "us");
		assert_int_equal(n, 3);
		entry(&m.value, 2, "value", text, &n);
		assert_string_equal(text, "ap");
		assert_int_equal(n, 1);
		ftc_msg_free(&m);
		/* count cuts the list after ordering. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTE_VALUES,
		         "type=s attribute=s count=i", type, "region",
		         (int64_t)1);
		ok(&m);
		assert_int_equal(m.value.as.count, 1);
		entry(&m.value, 0, "value", text, &n);
		assert_string_equal(text, "eu");
		ftc_msg_free(&m);
		/* Integer values come back as integers. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTE_VALUES,
		         "type=s attribute=s", type, "tier");
		ok(&m);
		{
			struct fsnp_iter it;
			struct fsnp_val e, v;
			int64_t sum = 0;
			fsnp_iter_init(&it, &m.value);
			while (fsnp_iter_next(&it, NULL, &e)) {
				assert_int_equal(fsnp_map_get(&e, "value", &v),
				                 0);
				assert_int_equal(v.tag, FSNP_I64);
				sum += ftc_map_int(&e, "count");
			}
			assert_int_equal(sum, with_tier);
		}
		ftc_msg_free(&m);
		/* Not indexed: nothing. */
		m = call(&c, FSNP_OP_FLOW_ATTRIBUTE_VALUES,
		         "type=s attribute=s", type, "colour");
		ok(&m);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		assert_int_equal(m.value.as.count, 0);
		ftc_msg_free(&m);
		ftc_close(&c);
	}
}

/* STARTUP's flow_query lists the index catalog; /v1/cluster says every
 * node holds the shared cursor key. */
static void test_manifest_and_cursor_key(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct fsnp_val caps, fq, ix, list;
	(void)state;

	assert_int_equal(ftc_connect(&c, cl.nodes[0].fsnp), 0);
	m = call(&c, FSNP_OP_STARTUP, "client_name=s", "t");
	ok(&m);
	assert_int_equal(fsnp_map_map(&m.value, "capabilities", &caps), 0);
	assert_int_equal(fsnp_map_map(&caps, "flow_query", &fq), 0);
	assert_int_equal(fsnp_map_map(&fq, "indexes", &ix), 0);
	assert_true(ftc_map_int(&ix, "catalog_version") > 0);
	assert_int_equal(fsnp_map_array(&ix, "indexes", &list), 0);
	assert_true(list.as.count >= 10);
	assert_int_equal(fsnp_map_array(&fq, "shapes", &list), 0);
	assert_int_equal(list.as.count, 12);
	ftc_msg_free(&m);
	ftc_close(&c);

	char first_id[17] = "";
	for (unsigned node = 0; node < n_nodes; node++) {
		char body[65536];
		int st = 0;
		bool ready = false;
		for (int tries = 0; tries < 100 && !ready; tries++) {
			const char *p;
			assert_int_equal(harness_http(cl.nodes[node].admin,
			                              "GET", "/v1/cluster",
			                              NULL, &st, body,
			                              sizeof body),
			                 0);
			p = strstr(body, "\"flow_cursor_key\"");
			ready = st == 200 && p != NULL &&
			        strncmp(p + 17, ": \"ready\"", 9) == 0;
			if (!ready && p != NULL) {
				ready = strncmp(p + 17, ":\"ready\"", 8) == 0;
			}
			if (!ready) {
				harness_nap(100);
			}
		}
		assert_true(ready);
		/* One key for the whole cluster: the same id everywhere. */
		{
			const char *p = strstr(body, "\"flow_cursor_key_id\"");
			char id[17];
			assert_non_null(p);
			p = strchr(p + 20, '"');
			assert_non_null(p);
			memcpy(id, p + 1, 16);
			id[16] = '\0';
			if (node == 0) {
				strcpy(first_id, id);
			}
			assert_string_equal(id, first_id);
		}
	}
}

/* A COMMAND_EXEC of `name` with text arguments. */
static struct ftc_msg exec(struct ftc *c, const char *name,
                           const char *const *args, size_t n)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "command");
	fsnp_w_str(&w, name);
	fsnp_w_key(&w, "args");
	fsnp_w_array_begin(&w);
	for (size_t i = 0; i < n; i++) {
		fsnp_w_str(&w, args[i]);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	return callb(c, FSNP_OP_COMMAND_EXEC, &b);
}

/* The SDK's COMMAND_EXEC forms: FLOW.STATS with STATE and ATTRIBUTE
 * pairs, FLOW.ATTRIBUTE_VALUES with its attribute positional, PARTITION
 * and COUNT, and FLOW.QUERY.INDEXES (the ferric.flow.query.indexes/v1
 * status, every index active on every shard; one by id; an unknown id
 * refused). */
static void test_command_exec(void **state)
{
	(void)state;
	for (unsigned node = 0; node < n_nodes; node++) {
		struct ftc c;
		struct ftc_msg m;
		struct fsnp_val list, e, cov, v;
		struct fsnp_iter it;
		char text[64];
		int64_t n;
		assert_int_equal(ftc_connect(&c, cl.nodes[node].fsnp), 0);
		{
			const char *a[] = {type,        "STATE",  "any",
			                   "ATTRIBUTE", "region", "eu",
			                   "ATTRIBUTE", "tier",   "2"};
			m = exec(&c, "FLOW.STATS", a, 6);
			ok(&m);
			assert_int_equal(ftc_map_int(&m.value, "count"),
			                 want("any", NULL, "eu", 0, running));
			ftc_msg_free(&m);
			/* CE values are text: "2" is not the integer 2. */
			m = exec(&c, "FLOW.STATS", a, 9);
			ok(&m);
			assert_int_equal(ftc_map_int(&m.value, "count"), 0);
			ftc_msg_free(&m);
		}
		{
			const char *a[] = {type,       "region", "PARTITION",
			                   "tenant-a", "COUNT",  "1"};
			m = exec(&c, "FLOW.ATTRIBUTE_VALUES", a, 6);
			ok(&m);
			assert_int_equal(m.value.as.count, 1);
			entry(&m.value, 0, "value", text, &n);
			assert_string_equal(text, "eu");
			assert_int_equal(n, 2);
			ftc_msg_free(&m);
		}
		m = exec(&c, "FLOW.QUERY.INDEXES", NULL, 0);
		ok(&m);
		assert_true(ftc_map_str(&m.value, "contract_version",
		                        "ferric.flow.query.indexes/v1"));
		assert_int_equal(fsnp_map_array(&m.value, "indexes", &list), 0);
		assert_true(list.as.count >= 8);
		fsnp_iter_init(&it, &list);
		while (fsnp_iter_next(&it, NULL, &e)) {
			assert_true(ftc_map_str(&e, "state", "active"));
			assert_int_equal(fsnp_map_get(&e, "queryable", &v), 0);
			assert_int_equal(v.tag, FSNP_TRUE);
			assert_int_equal(fsnp_map_map(&e, "coverage", &cov), 0);
			assert_int_equal(ftc_map_int(&cov, "total_shards"),
			                 n_nodes == 1 ? 4 : 2);
		}
		ftc_msg_free(&m);
		{
			const char *a[] = {"flow_runs_primary"};
			m = exec(&c, "FLOW.QUERY.INDEXES", a, 1);
			ok(&m);
			assert_int_equal(
			    fsnp_map_array(&m.value, "indexes", &list), 0);
			assert_int_equal(list.as.count, 1);
			ftc_msg_free(&m);
			a[0] = "no_such_index";
			m = exec(&c, "FLOW.QUERY.INDEXES", a, 1);
			assert_int_equal(m.status, 1);
			ftc_msg_free(&m);
		}
		ftc_close(&c);
	}
}

static int start(unsigned n, const char *shards)
{
	const char *extra[] = {"--shards", shards, NULL};
	static const char *const indexed[] = {"region", "tier"};
	struct ftc c;
	struct ftc_msg m;
	int64_t now = (int64_t)now_ms();

	n_nodes = n;
	snprintf(type, sizeof type, "stats-%u-%ld", n, (long)getpid());
	if (harness_cluster_start(&cl, n, extra, true) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (ftc_wait_ready(cl.nodes[i].fsnp, 30000) != 0) {
			return -1;
		}
	}
	if (ftc_connect(&c, cl.nodes[n - 1].fsnp) != 0) {
		return -1;
	}
	m = call(&c, FSNP_OP_FLOW_POLICY_SET, "type=s indexed_attributes=a",
	         type, indexed, 2);
	ok(&m);
	ftc_msg_free(&m);
	for (size_t i = 0; i < N_FLOWS; i++) {
		struct wbuf b;
		struct fsnp_writer w;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, flows[i].id);
		fsnp_w_key(&w, "type");
		fsnp_w_str(&w, type);
		fsnp_w_key(&w, "now_ms");
		fsnp_w_i64(&w, now);
		if (flows[i].part[0] != '\0') {
			fsnp_w_key(&w, "partition_key");
			fsnp_w_str(&w, flows[i].part);
		}
		fsnp_w_key(&w, "attributes");
		w_attrs(&w, flows[i].region, flows[i].tier);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		m = callb(&c, FSNP_OP_FLOW_CREATE, &b);
		ok(&m);
		ftc_msg_free(&m);
		running[i] = false;
	}
	/* Claim tenant-a's two oldest by priority/due order: any two. */
	m = call(&c, FSNP_OP_FLOW_CLAIM_DUE,
	         "type=s worker=s partition_key=s limit=i lease_ms=i now_ms=i",
	         type, "w", "tenant-a", (int64_t)2, (int64_t)600000, now);
	ok(&m);
	{
		struct fsnp_iter it;
		struct fsnp_val e;
		struct fsnp_bytes id;
		fsnp_iter_init(&it, &m.value);
		while (fsnp_iter_next(&it, NULL, &e)) {
			assert_int_equal(fsnp_map_bin(&e, "id", &id), 0);
			for (size_t i = 0; i < N_FLOWS; i++) {
				if (strlen(flows[i].id) == id.len &&
				    memcmp(flows[i].id, id.ptr, id.len) == 0) {
					running[i] = true;
				}
			}
		}
	}
	ftc_msg_free(&m);
	ftc_close(&c);
	return 0;
}

static int setup1(void **state)
{
	(void)state;
	return start(1, "4");
}

static int setup3(void **state)
{
	(void)state;
	return start(3, "2");
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cl);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stats),
	    cmocka_unit_test(test_attributes),
	    cmocka_unit_test(test_manifest_and_cursor_key),
	    cmocka_unit_test(test_command_exec),
	};
	int rv = cmocka_run_group_tests_name("flow stats, 1 node", tests,
	                                     setup1, teardown);
	rv |= cmocka_run_group_tests_name("flow stats, 3 nodes", tests, setup3,
	                                  teardown);
	return rv;
}
