/* Integration: FLOW.QUERY on three real nodes (two shards). Flows of one
 * partition are paged LIMIT 4 at a time: the first page through the
 * partition's leader with COMMAND_EXEC (textual parameters typed by their
 * fields: the LIMIT-sized page and an integer range bound), then the
 * leader is killed and the cursor it issued resumes on another node under
 * the new leader (0x0231), to the end: every flow once, in updated_at_ms
 * order. Also: a count and a point read through a follower, EXPLAIN
 * answered on any node without storage, a forged cursor refused with
 * query_cursor_invalid, a past deadline with query_deadline_exceeded. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define NODES 3
#define NFLOWS 9

static struct harness_cluster cl;
static bool alive[NODES];
static char type[48];
static const char *const PART = "tq-tenant";

static void connect_node(struct ftc *c, unsigned i)
{
	assert_true(alive[i]);
	assert_int_equal(ftc_connect(c, cl.nodes[i].fsnp), 0);
}

static struct ftc_msg callb(struct ftc *c, uint16_t op, struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, 0, b, &m), 0);
	wbuf_free(b);
	return m;
}

static void ok(const struct ftc_msg *m)
{
	if (m->status != 0) {
		char msg[512];
		ftc_error_text(m, msg, sizeof msg);
		fail_msg("status %u: %s", m->status, msg);
	}
}

/* The node leading the partition's shard (ROUTE of its tag). */
static int leader_of_partition(void)
{
	char tag[FLOW_TAG_MAX], key[FLOW_TAG_MAX + 3];
	flow_route_tag((const uint8_t *)PART, strlen(PART), tag);
	snprintf(key, sizeof key, "{%s}", tag);
	for (int tries = 0; tries < 200; tries++) {
		for (unsigned i = 0; i < NODES; i++) {
			struct ftc c;
			struct ftc_msg m;
			struct wbuf b;
			int found = -1;
			if (!alive[i] ||
			    ftc_connect(&c, cl.nodes[i].fsnp) != 0) {
				continue;
			}
			ftc_body(&b, "key=s", key);
			m = callb(&c, FSNP_OP_ROUTE, &b);
			if (m.status == 0 &&
			    !ftc_map_str(&m.value, "hint", "local_fallback")) {
				int64_t port =
				    ftc_map_int(&m.value, "native_port");
				for (unsigned k = 0; k < NODES; k++) {
					if (cl.nodes[k].fsnp == port &&
					    alive[k]) {
						found = (int)k;
					}
				}
			}
			ftc_msg_free(&m);
			ftc_close(&c);
			if (found >= 0) {
				return found;
			}
		}
		harness_nap(100);
	}
	return -1;
}

/* Waits until node i holds the cluster's cursor key. */
static void wait_cursor_key(unsigned i)
{
	for (int tries = 0; tries < 200; tries++) {
		char body[65536];
		int st = 0;
		const char *p;
		assert_int_equal(harness_http(cl.nodes[i].admin, "GET",
		                              "/v1/cluster", NULL, &st, body,
		                              sizeof body),
		                 0);
		p = strstr(body, "\"flow_cursor_key\"");
		if (st == 200 && p != NULL && strstr(p, "\"ready\"") != NULL &&
		    strstr(p, "\"ready\"") < p + 24) {
			return;
		}
		harness_nap(100);
	}
	fail_msg("node %u has no Flow cursor key", i);
}

static int setup(void **state)
{
	const char *extra[] = {"--shards", "2", NULL};
	struct ftc c;
	(void)state;
	snprintf(type, sizeof type, "fq-%ld", (long)getpid());
	if (harness_cluster_start(&cl, NODES, extra, true) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < NODES; i++) {
		alive[i] = true;
		if (ftc_wait_ready(cl.nodes[i].fsnp, 30000) != 0) {
			return -1;
		}
	}
	if (ftc_connect(&c, cl.nodes[0].fsnp) != 0) {
		return -1;
	}
	for (int i = 0; i < NFLOWS; i++) {
		char id[32];
		struct wbuf b;
		struct ftc_msg m;
		snprintf(id, sizeof id, "fq-%02d", i);
		ftc_body(&b, "id=s type=s partition_key=s", id, type, PART);
		m = callb(&c, FSNP_OP_FLOW_CREATE, &b);
		ok(&m);
		ftc_msg_free(&m);
		usleep(2000); /* distinct updated_at_ms, mostly */
	}
	ftc_close(&c);
	for (unsigned i = 0; i < NODES; i++) {
		wait_cursor_key(i);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cl);
	return 0;
}

static const char *const LIST =
    "FROM runs WHERE partition_key = @pk AND type = @type AND state = "
    "'queued' AND updated_at_ms BETWEEN @from AND @to ORDER BY "
    "updated_at_ms ASC LIMIT 4 RETURN RECORDS (run_id, updated_at_ms)";
static const char *const LIST_CURSOR =
    "FROM runs WHERE partition_key = @pk AND type = @type AND state = "
    "'queued' AND updated_at_ms BETWEEN @from AND @to ORDER BY "
    "updated_at_ms ASC LIMIT 4 CURSOR @cursor RETURN RECORDS (run_id, "
    "updated_at_ms)";

/* Appends a page's ids; returns its cursor (malloc'd) or NULL. */
static char *take_page(const struct ftc_msg *m, char (*ids)[32], size_t *n)
{
	struct fsnp_val recs, rec, page, cur, idv, ver;
	struct fsnp_iter it;
	int64_t prev = -1;
	char *out = NULL;
	assert_int_equal(fsnp_map_get(&m->value, "version", &ver), 0);
	assert_true(ftc_str_eq(&ver, "ferric.flow.query.result/v1"));
	assert_int_equal(fsnp_map_get(&m->value, "records", &recs), 0);
	fsnp_iter_init(&it, &recs);
	while (fsnp_iter_next(&it, NULL, &rec)) {
		int64_t u = ftc_map_int(&rec, "updated_at_ms");
		assert_true(u >= prev);
		prev = u;
		assert_int_equal(fsnp_map_get(&rec, "id", &idv), 0);
		assert_true(*n < NFLOWS + 4);
		snprintf(ids[*n], 32, "%.*s", (int)idv.as.bin.len,
		         (const char *)idv.as.bin.ptr);
		(*n)++;
	}
	assert_int_equal(fsnp_map_get(&m->value, "page", &page), 0);
	if (fsnp_map_get(&page, "cursor", &cur) == 0 && cur.tag == FSNP_BIN) {
		out = strndup((const char *)cur.as.bin.ptr, cur.as.bin.len);
		assert_int_equal(strncmp(out, "fqc1_", 5), 0);
	}
	return out;
}

static struct ftc_msg query_op(struct ftc *c, const char *text,
                               const char *cursor)
{
	struct wbuf b, pb;
	struct fsnp_writer w;
	wbuf_init(&pb);
	fsnp_w_init(&w, &pb);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "pk");
	fsnp_w_str(&w, PART);
	fsnp_w_key(&w, "type");
	fsnp_w_str(&w, type);
	fsnp_w_key(&w, "from");
	fsnp_w_i64(&w, 0);
	fsnp_w_key(&w, "to");
	fsnp_w_i64(&w, INT64_MAX / 2);
	if (cursor != NULL) {
		fsnp_w_key(&w, "cursor");
		fsnp_w_str(&w, cursor);
	}
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	ftc_body(&b, "version=s query=s params=m", "FQL1", text, pb.data,
	         pb.len);
	wbuf_free(&pb);
	return callb(c, FSNP_OP_FLOW_QUERY, &b);
}

static void test_cursor_across_leader_change(void **state)
{
	static char ids[NFLOWS + 4][32];
	size_t n = 0;
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_writer w;
	char *cursor;
	int leader, other = -1, status;
	(void)state;

	leader = leader_of_partition();
	assert_true(leader >= 0);
	/* Page 1 on the leader, through COMMAND_EXEC: every parameter is
	 * text; the integer bounds are typed by their field. */
	connect_node(&c, (unsigned)leader);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "command");
	fsnp_w_str(&w, "FLOW.QUERY");
	fsnp_w_key(&w, "args");
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, "FQL1");
	fsnp_w_str(&w, LIST);
	fsnp_w_str(&w, "pk");
	fsnp_w_str(&w, PART);
	fsnp_w_str(&w, "type");
	fsnp_w_str(&w, type);
	fsnp_w_str(&w, "from");
	fsnp_w_str(&w, "0");
	fsnp_w_str(&w, "to");
	fsnp_w_str(&w, "4611686018427387903");
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	m = callb(&c, FSNP_OP_COMMAND_EXEC, &b);
	ok(&m);
	cursor = take_page(&m, ids, &n);
	ftc_msg_free(&m);
	ftc_close(&c);
	assert_int_equal(n, 4);
	assert_non_null(cursor);

	/* The leader goes away; the cursor resumes elsewhere. */
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)leader, SIGKILL, &status), 0);
	alive[leader] = false;
	for (unsigned i = 0; i < NODES; i++) {
		if (alive[i]) {
			other = (int)i;
		}
	}
	for (int pg = 0; cursor != NULL && pg < 10; pg++) {
		char *next = NULL;
		uint64_t until = harness_mono_ms() + 30000;
		for (;;) {
			connect_node(&c, (unsigned)other);
			m = query_op(&c, LIST_CURSOR, cursor);
			ftc_close(&c);
			if (m.status == 0 || harness_mono_ms() > until) {
				break;
			}
			ftc_msg_free(&m); /* a new leader is being elected */
			harness_nap(200);
		}
		ok(&m);
		next = take_page(&m, ids, &n);
		ftc_msg_free(&m);
		free(cursor);
		cursor = next;
	}
	assert_null(cursor);
	assert_int_equal(n, NFLOWS);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			assert_string_not_equal(ids[i], ids[j]);
		}
	}

	/* A count and a point read through the surviving node. */
	connect_node(&c, (unsigned)other);
	ftc_body(&b, "version=s query=s", "FQL1",
	         "FROM runs WHERE partition_key = 'tq-tenant' AND "
	         "run_id = 'fq-03' RETURN RECORD (run_id, state)");
	m = callb(&c, FSNP_OP_FLOW_QUERY, &b);
	ok(&m);
	{
		struct fsnp_val recs;
		assert_int_equal(fsnp_map_get(&m.value, "records", &recs), 0);
		assert_int_equal(recs.as.count, 1);
	}
	ftc_msg_free(&m);

	/* A deadline already past. */
	ftc_body(&b, "version=s query=s deadline_ms=i", "FQL1",
	         "FROM runs WHERE partition_key = 'tq-tenant' AND run_id = "
	         "'fq-03' RETURN RECORD",
	         (int64_t)1);
	m = callb(&c, FSNP_OP_FLOW_QUERY, &b);
	assert_int_equal(m.status, 6);
	assert_true(ftc_map_str(&m.value, "code", "query_deadline_exceeded"));
	ftc_msg_free(&m);

	/* A forged cursor. */
	m = query_op(&c, LIST_CURSOR,
	             "fqc1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
	assert_int_equal(m.status, 6);
	assert_true(ftc_map_str(&m.value, "code", "query_cursor_invalid"));
	ftc_msg_free(&m);

	/* EXPLAIN on any node: planned, values redacted. */
	m = query_op(&c,
	             "EXPLAIN FROM runs WHERE partition_key = @pk AND "
	             "type = @type AND updated_at_ms BETWEEN @from AND "
	             "@to RETURN COUNT",
	             NULL);
	ok(&m);
	assert_true(ftc_map_str(&m.value, "version", "ferric.flow.explain/v1"));
	assert_true(ftc_map_str(&m.value, "status", "rejected"));
	ftc_msg_free(&m);
	ftc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cursor_across_leader_change),
	};
	return cmocka_run_group_tests_name("flow query, 3 nodes", tests, setup,
	                                   teardown);
}
