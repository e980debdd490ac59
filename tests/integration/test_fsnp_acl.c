/* Integration: FSNP ACL users on real lodestone processes. Users made
 * with COMMAND_EXEC ACL SETUSER (replicated through the meta group) are
 * limited to their commands and key patterns on every path (typed
 * opcodes, COMMAND_EXEC, PIPELINE items; FLOW.QUERY's split between
 * FLOW.QUERY and FLOW.QUERY.EXPLAIN); passwords never show, in
 * replies or logs; a changed or deleted user's sessions get
 * AUTH_INVALIDATED and are closed, on every node of a cluster. Also the
 * auth deadline, a flood of unauthenticated oversized frames beside an
 * authenticated client, maxclients, lodectl acl, and the admin API's
 * bearer token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define ADMIN_PW "adm1n-Secret"
#define APP_PW "app-Secret-9"

static struct harness_cluster cluster;
static uint16_t port;

static int setup(void **state)
{
	(void)state;
	if (harness_cluster_start(&cluster, 1, NULL, true) != 0) {
		return -1;
	}
	port = cluster.nodes[0].fsnp;
	harness_secret(&cluster, APP_PW);
	harness_secret(&cluster, ADMIN_PW);
	return ftc_wait_ready(port, 20000);
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

static struct ftc_msg CALL(struct ftc *c, uint16_t op, const char *fmt, ...) {
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

static struct ftc_msg
EXEC(struct ftc *c, const char *cmd, const char **args, int n) {
	return CALL(c, FSNP_OP_COMMAND_EXEC, "command=s args=a", cmd, args, n);
}

static void
expect_error(struct ftc_msg m, uint16_t status, const char *text)
{
	char msg[512];
	if (m.status != status) {
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("status %u, not %u (%s)", m.status, status, msg);
	}
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

static void expect_ok(struct ftc_msg m)
{
	char msg[512];
	if (m.status != 0) {
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("status %u: %s", m.status, msg);
	}
	ftc_msg_free(&m);
}

static void login(struct ftc *c, uint16_t p, const char *user, const char *pw)
{
	assert_int_equal(ftc_connect(c, p), 0);
	expect_ok(CALL(c, FSNP_OP_AUTH, "username=s password=s", user, pw));
}

/* The administrator: the default user, which has no password here (the
 * requirepass-compatible default; the official SDK sends AUTH anyway). */
static void login_admin(struct ftc *c, uint16_t p)
{
	login(c, p, "default", ADMIN_PW);
}

/* AUTH as `user` until it works (users reach a node's copy within a
 * refresh of the meta group). */
static int login_eventually(struct ftc *c, uint16_t p, const char *user,
                            const char *pw)
{
	uint64_t end = harness_mono_ms() + 10000;
	for (;;) {
		struct ftc_msg m;
		assert_int_equal(ftc_connect(c, p), 0);
		m = CALL(c, FSNP_OP_AUTH, "username=s password=s", user, pw);
		if (m.status == 0) {
			ftc_msg_free(&m);
			return 0;
		}
		ftc_msg_free(&m);
		ftc_close(c);
		if (harness_mono_ms() > end) {
			return -1;
		}
		harness_nap(100);
	}
}

static void setuser(struct ftc *admin, const char *name, const char **rules,
                    int n)
{
	const char *args[16] = {"SETUSER", name};
	for (int i = 0; i < n; i++) {
		args[i + 2] = rules[i];
	}
	struct ftc_msg m = EXEC(admin, "ACL", args, n + 2);
	if (m.status != 0) {
		char msg[512];
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("ACL SETUSER: %s", msg);
	}
	assert_true(m.has_value && ftc_str_eq(&m.value, "OK"));
	ftc_msg_free(&m);
}

static void test_users_and_rules(void **state)
{
	struct ftc admin, app;
	struct ftc_msg m;
	(void)state;
	login_admin(&admin, port);
	const char *rules[] = {"on",      ">" APP_PW, "~app:*",
	                       "%R~ro:*", "+@read",   "+set"};
	setuser(&admin, "app", rules, 6);
	expect_ok(CALL(&admin, FSNP_OP_SET, "key=s value=s", "ro:1", "x"));

	/* Bad rules and wrong passwords. */
	const char *bad[] = {"SETUSER", "app", "+@nonsense"};
	expect_error(EXEC(&admin, "ACL", bad, 3), 1,
	             "Unknown command category");
	const char *bare[] = {"SETUSER", "app", "hunter2-bare"};
	harness_secret(&cluster, "hunter2-bare");
	m = EXEC(&admin, "ACL", bare, 3);
	char msg[512];
	ftc_error_text(&m, msg, sizeof msg);
	assert_null(strstr(msg, "hunter2"));
	ftc_msg_free(&m);

	assert_int_equal(ftc_connect(&app, port), 0);
	expect_error(
	    CALL(&app, FSNP_OP_AUTH, "username=s password=s", "app", "wrong"),
	    2, "WRONGPASS");
	expect_error(
	    CALL(&app, FSNP_OP_AUTH, "username=s password=s", "nobody", APP_PW),
	    2, "WRONGPASS");
	expect_ok(
	    CALL(&app, FSNP_OP_AUTH, "username=s password=s", "app", APP_PW));

	/* Commands and keys, by opcode. */
	expect_ok(CALL(&app, FSNP_OP_SET, "key=s value=s", "app:1", "v"));
	expect_ok(CALL(&app, FSNP_OP_GET, "key=s", "app:1"));
	expect_ok(CALL(&app, FSNP_OP_GET, "key=s", "ro:1"));
	expect_error(CALL(&app, FSNP_OP_SET, "key=s value=s", "ro:1", "v"), 3,
	             "NOPERM User app has no permissions to access the 'ro:1' "
	             "key");
	expect_error(CALL(&app, FSNP_OP_GET, "key=s", "other"), 3,
	             "NOPERM User app has no permissions to access the "
	             "'other' key");
	const char *dk[] = {"app:1"};
	expect_error(CALL(&app, FSNP_OP_DEL, "keys=a", dk, 1), 3,
	             "NOPERM User app has no permissions to run the 'del' "
	             "command");
	const char *mk[] = {"app:1", "other"};
	expect_error(CALL(&app, FSNP_OP_MGET, "keys=a", mk, 2), 3,
	             "'other' key");

	/* The same through COMMAND_EXEC. */
	const char *setx[] = {"other", "v"};
	expect_error(EXEC(&app, "SET", setx, 2), 3, "'other' key");
	const char *hs[] = {"app:h", "f", "v"};
	expect_error(EXEC(&app, "HSET", hs, 3), 3, "'hset' command");
	const char *ls[] = {"LIST"};
	expect_error(EXEC(&app, "ACL", ls, 1), 3, "'acl' command");
	const char *up[] = {"SETUSER", "app", "+@all", "allkeys"};
	expect_error(EXEC(&app, "ACL", up, 4), 3, "'acl' command");
	const char *who[] = {"WHOAMI"};
	m = EXEC(&app, "ACL", who, 1);
	assert_int_equal(m.status, 0);
	assert_true(ftc_str_eq(&m.value, "app"));
	ftc_msg_free(&m);

	/* A PIPELINE cannot smuggle a denied command or key. */
	{
		struct wbuf b;
		struct fsnp_writer w;
		struct wbuf items[4];
		const char *del_args[] = {"app:1"};
		const char *esc_args[] = {"SETUSER", "app", "+@all", "allkeys"};
		ftc_body(&items[0], "key=s", "app:1");
		ftc_body(&items[1], "command=s args=a", "DEL", del_args, 1);
		ftc_body(&items[2], "key=s value=s", "other", "v");
		/* An escalation of its own rules through a member. */
		ftc_body(&items[3], "command=s args=a", "ACL", esc_args, 4);
		uint16_t ops[4] = {FSNP_OP_GET, FSNP_OP_COMMAND_EXEC,
		                   FSNP_OP_SET, FSNP_OP_COMMAND_EXEC};
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "commands");
		fsnp_w_array_begin(&w);
		for (int i = 0; i < 4; i++) {
			struct fsnp_val v;
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "opcode");
			fsnp_w_i64(&w, ops[i]);
			fsnp_w_key(&w, "body");
			assert_int_equal(fsnp_value_decode(items[i].data,
			                                   items[i].len, NULL,
			                                   &v, NULL),
			                 0);
			fsnp_w_val(&w, &v);
			fsnp_w_map_end(&w);
			wbuf_free(&items[i]);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(ftc_call(&app, 1, FSNP_OP_PIPELINE, 0, &b, &m),
		                 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		char text[4096];
		size_t n = m.len < sizeof text - 1 ? m.len : sizeof text - 1;
		for (size_t i = 0; i < n; i++) {
			text[i] = m.body[i] ? (char)m.body[i] : ' ';
		}
		text[n] = '\0';
		assert_non_null(strstr(text, "'del' command"));
		assert_non_null(strstr(text, "'other' key"));
		assert_non_null(strstr(text, "'acl' command"));
		ftc_msg_free(&m);
	}
	/* Nothing of the pipeline's denied items ran. */
	expect_ok(CALL(&admin, FSNP_OP_GET, "key=s", "app:1"));
	m = CALL(&admin, FSNP_OP_GET, "key=s", "other");
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);

	/* The administrator's view: hashes, never passwords (and app's
	 * rules as it was given them: the pipeline's ACL member did
	 * nothing). */
	m = EXEC(&admin, "ACL", ls, 1);
	assert_int_equal(m.status, 0);
	assert_true(memmem(m.body, m.len, "user app on #", 13) != NULL);
	assert_null(memmem(m.body, m.len, APP_PW, strlen(APP_PW)));
	assert_null(memmem(m.body, m.len, ADMIN_PW, strlen(ADMIN_PW)));
	assert_non_null(memmem(m.body, m.len, "user default on", 15));
	ftc_msg_free(&m);
	const char *gu[] = {"GETUSER", "app"};
	m = EXEC(&admin, "ACL", gu, 2);
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "keys", "~app:* %R~ro:*"));
	assert_true(ftc_map_str(&m.value, "commands", "+@read +set"));
	ftc_msg_free(&m);
	const char *gn[] = {"GETUSER", "nobody"};
	m = EXEC(&admin, "ACL", gn, 2);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_NIL);
	ftc_msg_free(&m);
	/* A user granted the acl command by name (not @admin) manages
	 * users; GET stays denied to it. */
	const char *ops_rules[] = {"on", ">" APP_PW, "+acl"};
	setuser(&admin, "aclop", ops_rules, 3);
	{
		struct ftc op;
		login(&op, port, "aclop", APP_PW);
		const char *us[] = {"USERS"};
		expect_ok(EXEC(&op, "ACL", us, 1));
		expect_error(CALL(&op, FSNP_OP_GET, "key=s", "app:1"), 3,
		             "'get' command");
		ftc_close(&op);
	}
	const char *dd[] = {"DELUSER", "default"};
	expect_error(EXEC(&admin, "ACL", dd, 2), 1, "cannot be removed");

	ftc_close(&app);
	ftc_close(&admin);
}

/* Waits for an AUTH_INVALIDATED event, then for the close. */
/* Flow is @flow with @read or @write and checked against the flow's
 * partition key (or its id's auto partition "fa:<n>"); a request that spans
 * partitions needs every key. Cluster administration is @admin. */
/* FLOW.QUERY through COMMAND_EXEC and PIPELINE: plain execution needs
 * FLOW.QUERY, static EXPLAIN FLOW.QUERY.EXPLAIN, EXPLAIN ANALYZE both;
 * the bound partition (or a point read's auto partition) is the key. */
static void test_flow_query_acl(void **state)
{
	static const char *const count = "FROM runs WHERE partition_key = "
	                                 "'tq:1' AND type = 't' RETURN COUNT";
	static const char *const explain =
	    "EXPLAIN FROM runs WHERE partition_key = 'tq:1' AND type = 't' "
	    "RETURN COUNT";
	static const char *const analyze =
	    "EXPLAIN ANALYZE FROM runs WHERE partition_key = 'tq:1' AND type = "
	    "'t' RETURN COUNT";
	static const char *const other =
	    "FROM runs WHERE partition_key = 'other' AND type = 't' RETURN "
	    "COUNT";
	static const char *const point =
	    "FROM runs WHERE run_id = 'r1' RETURN RECORD";
	struct ftc admin, qr, qe, qb;
	(void)state;
	login_admin(&admin, port);
	const char *r1[] = {"on", ">" APP_PW, "+flow.query", "~tq:*"};
	const char *r2[] = {"on", ">" APP_PW, "+flow.query.explain", "~tq:*"};
	const char *r3[] = {"on", ">" APP_PW, "+flow.query",
	                    "+flow.query.explain", "~tq:*"};
	setuser(&admin, "fqr", r1, 4);
	setuser(&admin, "fqe", r2, 4);
	setuser(&admin, "fqb", r3, 5);
	assert_int_equal(login_eventually(&qr, port, "fqr", APP_PW), 0);
	assert_int_equal(login_eventually(&qe, port, "fqe", APP_PW), 0);
	assert_int_equal(login_eventually(&qb, port, "fqb", APP_PW), 0);

	const char *a_count[] = {"FQL1", count};
	const char *a_explain[] = {"FQL1", explain};
	const char *a_analyze[] = {"FQL1", analyze};
	const char *a_other[] = {"FQL1", other};
	const char *a_point[] = {"FQL1", point};
	expect_ok(EXEC(&qr, "FLOW.QUERY", a_count, 2));
	expect_error(EXEC(&qr, "FLOW.QUERY", a_explain, 2), 3,
	             "flow.query.explain");
	expect_error(EXEC(&qr, "FLOW.QUERY", a_analyze, 2), 3,
	             "flow.query.explain");
	expect_error(EXEC(&qr, "FLOW.QUERY", a_other, 2), 3, "'other' key");
	/* A point read without a partition: its auto partition. */
	expect_error(EXEC(&qr, "FLOW.QUERY", a_point, 2), 3, "'fa:");
	expect_ok(EXEC(&qe, "FLOW.QUERY", a_explain, 2));
	expect_error(EXEC(&qe, "FLOW.QUERY", a_count, 2), 3, "flow.query");
	expect_error(EXEC(&qe, "FLOW.QUERY", a_analyze, 2), 3, "flow.query");
	expect_ok(EXEC(&qb, "FLOW.QUERY", a_analyze, 2));
	/* FLOW.QUERY.EXPLAIN is not in @read nor @flow. */
	const char *r4[] = {"on", ">" APP_PW, "+@read", "+@flow", "~tq:*"};
	setuser(&admin, "fqr", r4, 5);
	ftc_close(&qr);
	assert_int_equal(login_eventually(&qr, port, "fqr", APP_PW), 0);
	expect_ok(EXEC(&qr, "FLOW.QUERY", a_count, 2));
	expect_error(EXEC(&qr, "FLOW.QUERY", a_explain, 2), 3,
	             "flow.query.explain");

	/* PIPELINE items of opcode 0x0231 take the same checks. */
	{
		struct wbuf b, items[2];
		struct fsnp_writer w;
		struct ftc_msg m;
		char text[4096];
		size_t n;
		ftc_body(&items[0], "version=s query=s", "FQL1", count);
		ftc_body(&items[1], "version=s query=s", "FQL1", explain);
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "commands");
		fsnp_w_array_begin(&w);
		for (int i = 0; i < 2; i++) {
			struct fsnp_val v;
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "opcode");
			fsnp_w_i64(&w, FSNP_OP_FLOW_QUERY);
			fsnp_w_key(&w, "body");
			assert_int_equal(fsnp_value_decode(items[i].data,
			                                   items[i].len, NULL,
			                                   &v, NULL),
			                 0);
			fsnp_w_val(&w, &v);
			fsnp_w_map_end(&w);
			wbuf_free(&items[i]);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(ftc_call(&qr, 1, FSNP_OP_PIPELINE, 0, &b, &m),
		                 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		n = m.len < sizeof text - 1 ? m.len : sizeof text - 1;
		for (size_t i = 0; i < n; i++) {
			text[i] = m.body[i] ? (char)m.body[i] : ' ';
		}
		text[n] = '\0';
		assert_non_null(strstr(text, "ferric.flow.query.result/v1"));
		assert_non_null(strstr(text, "'flow.query.explain' command"));
		ftc_msg_free(&m);
	}
	ftc_close(&qr);
	ftc_close(&qe);
	ftc_close(&qb);
	ftc_close(&admin);
}

static void test_flow_and_admin(void **state)
{
	struct ftc admin, fl;
	(void)state;
	login_admin(&admin, port);
	const char *rules[] = {"on", ">" APP_PW, "+@flow", "~tenant-a*"};
	setuser(&admin, "flowapp", rules, 4);
	assert_int_equal(login_eventually(&fl, port, "flowapp", APP_PW), 0);

	expect_ok(CALL(&fl, FSNP_OP_FLOW_CREATE,
	               "id=s type=s state=s partition_key=s", "acl-f1", "t",
	               "queued", "tenant-a1"));
	expect_ok(CALL(&fl, FSNP_OP_FLOW_GET, "id=s partition_key=s", "acl-f1",
	               "tenant-a1"));
	expect_error(CALL(&fl, FSNP_OP_FLOW_CREATE,
	                  "id=s type=s state=s partition_key=s", "acl-f2", "t",
	                  "queued", "tenant-b"),
	             3, "'tenant-b' key");
	/* No partition key: the id's auto partition is the key. */
	expect_error(CALL(&fl, FSNP_OP_FLOW_CREATE, "id=s type=s state=s",
	                  "acl-f3", "t", "queued"),
	             3, "'fa:");
	/* A claim across partitions needs every key. */
	expect_error(CALL(&fl, FSNP_OP_FLOW_CLAIM_DUE,
	                  "type=s worker=s limit=i", "t", "w", (int64_t)1),
	             3, "'*' key");
	expect_ok(CALL(&fl, FSNP_OP_FLOW_CLAIM_DUE,
	               "type=s worker=s limit=i partition_key=s", "t", "w",
	               (int64_t)1, "tenant-a1"));
	/* Batch items are checked one by one: one item outside the
	 * patterns refuses the batch. */
	{
		struct wbuf b;
		struct fsnp_writer w;
		struct ftc_msg m;
		const char *pks[] = {"tenant-a2", "tenant-b"};
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "type");
		fsnp_w_str(&w, "t");
		fsnp_w_key(&w, "items");
		fsnp_w_array_begin(&w);
		for (unsigned i = 0; i < 2; i++) {
			char id[32];
			snprintf(id, sizeof id, "acl-m%u", i);
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "id");
			fsnp_w_str(&w, id);
			fsnp_w_key(&w, "partition_key");
			fsnp_w_str(&w, pks[i]);
			fsnp_w_map_end(&w);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		assert_int_equal(
		    ftc_call(&fl, 1, FSNP_OP_FLOW_CREATE_MANY, 0, &b, &m), 0);
		wbuf_free(&b);
		expect_error(m, 3, "'tenant-b' key");
	}
	/* Not @admin: no cluster administration; the admin has it. */
	expect_error(CALL(&fl, FSNP_OP_CLUSTER_HEALTH, ""), 3,
	             "'cluster.health' command");
	expect_ok(CALL(&admin, FSNP_OP_CLUSTER_HEALTH, ""));
	/* A user of single KV commands has no Flow (a read Flow command is
	 * @read too, as in Redis: +@read would allow it). */
	const char *kvonly[] = {"on", ">" APP_PW, "+get", "+set", "allkeys"};
	setuser(&admin, "kvapp", kvonly, 5);
	struct ftc kv;
	assert_int_equal(login_eventually(&kv, port, "kvapp", APP_PW), 0);
	expect_error(CALL(&kv, FSNP_OP_FLOW_GET, "id=s partition_key=s",
	                  "acl-f1", "tenant-a1"),
	             3, "command");
	ftc_close(&kv);
	ftc_close(&fl);
	ftc_close(&admin);
}

static void expect_invalidated(struct ftc *c)
{
	struct ftc_msg m;
	bool event = false;
	uint64_t end = harness_mono_ms() + 10000;
	while (!event && harness_mono_ms() < end) {
		if (ftc_recv(c, &m, 500) != 0) {
			continue;
		}
		event = m.h.opcode == FSNP_OP_EVENT &&
		        memmem(m.body, m.len, "AUTH_INVALIDATED", 16) != NULL;
		ftc_msg_free(&m);
	}
	assert_true(event);
	assert_true(ftc_wait_closed(c, 5000));
}

static void test_invalidated_on_change(void **state)
{
	struct ftc admin, app, quiet;
	const char *ev[] = {"AUTH_INVALIDATED"};
	(void)state;
	login_admin(&admin, port);
	const char *rules[] = {"reset", "on", ">" APP_PW, "~inv:*", "+@all"};
	setuser(&admin, "app", rules, 5);
	login(&app, port, "app", APP_PW);
	expect_ok(CALL(&app, FSNP_OP_STARTUP, "events=a", ev, 1));
	login(&quiet, port, "app", APP_PW);
	expect_ok(CALL(&app, FSNP_OP_SET, "key=s value=s", "inv:1", "v"));
	const char *less[] = {"-set"};
	setuser(&admin, "app", less, 1);
	expect_invalidated(&app);
	/* Without the subscription: closed all the same. */
	assert_true(ftc_wait_closed(&quiet, 5000));
	ftc_close(&app);
	ftc_close(&quiet);
	/* The changed user authenticates again and has its new rules. */
	login(&app, port, "app", APP_PW);
	expect_error(CALL(&app, FSNP_OP_SET, "key=s value=s", "inv:1", "v"), 3,
	             "'set' command");
	expect_ok(CALL(&app, FSNP_OP_GET, "key=s", "inv:1"));
	/* Deleted: closed, and AUTH fails. */
	const char *del[] = {"DELUSER", "app"};
	struct ftc_msg m = EXEC(&admin, "ACL", del, 2);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_I64);
	assert_int_equal(m.value.as.i, 1);
	ftc_msg_free(&m);
	assert_true(ftc_wait_closed(&app, 5000));
	ftc_close(&app);
	assert_int_equal(ftc_connect(&app, port), 0);
	expect_error(
	    CALL(&app, FSNP_OP_AUTH, "username=s password=s", "app", APP_PW), 2,
	    "WRONGPASS");
	ftc_close(&app);
	ftc_close(&admin);
}

/* Sends ACL SETUSER NAME RULE on a lane of c without waiting. */
static void send_setuser(struct ftc *c, uint32_t lane, const char *name,
                         const char *rule)
{
	struct wbuf b;
	const char *args[] = {"SETUSER", name, rule};
	ftc_body(&b, "command=s args=a", "ACL", args, 3);
	ftc_send(c, lane, FSNP_OP_COMMAND_EXEC, 0, &b);
	wbuf_free(&b);
}

/* Waits for n replies on c, each OK. */
static void expect_n_ok(struct ftc *c, int n)
{
	uint64_t end = harness_mono_ms() + 30000;
	for (int got = 0; got < n;) {
		struct ftc_msg m;
		if (harness_mono_ms() > end) {
			fail_msg("%d of %d SETUSER replies", got, n);
		}
		if (ftc_recv(c, &m, 1000) != 0) {
			continue;
		}
		if (m.h.opcode == FSNP_OP_COMMAND_EXEC) {
			expect_ok(m);
			got++;
		} else {
			ftc_msg_free(&m);
		}
	}
}

/* Two administrators on two nodes change one user at once, pipelined on
 * several lanes, each SETUSER adding one rule: every rule lands (each is
 * applied to the user as the log left it, never to a node's stale copy),
 * and every node's copy ends with them all. */
static void race_setuser(struct harness_cluster *cc, struct ftc *admin)
{
	enum { RACE = 24 };
	struct ftc other, racer;
	struct ftc_msg m;
	char rule[32];
	const char *base[] = {"on", ">" APP_PW, "+set"};
	setuser(admin, "racer", base, 3);
	login_admin(&other, cc->nodes[1].fsnp);
	for (int i = 0; i < RACE; i++) {
		snprintf(rule, sizeof rule, "+rc%02dx", i);
		send_setuser(admin, 1 + (uint32_t)(i % 4), "racer", rule);
		snprintf(rule, sizeof rule, "~kb%02d:*", i);
		send_setuser(&other, 1 + (uint32_t)(i % 4), "racer", rule);
	}
	expect_n_ok(admin, RACE);
	expect_n_ok(&other, RACE);
	for (unsigned n = 0; n < 2; n++) {
		const char *gu[] = {"GETUSER", "racer"};
		m = EXEC(n == 0 ? admin : &other, "ACL", gu, 2);
		assert_int_equal(m.status, 0);
		for (int i = 0; i < RACE; i++) {
			snprintf(rule, sizeof rule, "+rc%02dx", i);
			if (memmem(m.body, m.len, rule, strlen(rule)) == NULL) {
				fail_msg("rule %s lost", rule);
			}
			snprintf(rule, sizeof rule, "~kb%02d:*", i);
			if (memmem(m.body, m.len, rule, strlen(rule)) == NULL) {
				fail_msg("rule %s lost", rule);
			}
		}
		assert_non_null(memmem(m.body, m.len, "+set", 4));
		ftc_msg_free(&m);
	}
	/* The third node's copy has them all: the last pattern of the
	 * race works there (eventually: copies follow the log). */
	uint64_t end = harness_mono_ms() + 10000;
	for (;;) {
		assert_int_equal(login_eventually(&racer, cc->nodes[2].fsnp,
		                                  "racer", APP_PW),
		                 0);
		snprintf(rule, sizeof rule, "kb%02d:1", RACE - 1);
		m = CALL(&racer, FSNP_OP_SET, "key=s value=s", rule, "v");
		uint16_t st = m.status;
		ftc_msg_free(&m);
		ftc_close(&racer);
		if (st == 0) {
			break;
		}
		assert_true(harness_mono_ms() < end);
		harness_nap(100);
	}
	ftc_close(&other);
}

/* Users replicate: made on one node, they authenticate on another, and
 * deleting them there closes the sessions everywhere. */
static void test_cluster(void **state)
{
	struct harness_cluster cc;
	struct ftc admin, far;
	(void)state;
	assert_int_equal(harness_cluster_start(&cc, 3, NULL, true), 0);
	harness_secret(&cc, APP_PW);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(ftc_wait_ready(cc.nodes[i].fsnp, 20000), 0);
	}
	login_admin(&admin, cc.nodes[0].fsnp);
	race_setuser(&cc, &admin);
	const char *rules[] = {"on", ">" APP_PW, "~c:*", "+@all"};
	setuser(&admin, "app", rules, 4);
	assert_int_equal(
	    login_eventually(&far, cc.nodes[2].fsnp, "app", APP_PW), 0);
	expect_ok(CALL(&far, FSNP_OP_SET, "key=s value=s", "c:1", "v"));
	expect_error(CALL(&far, FSNP_OP_SET, "key=s value=s", "d:1", "v"), 3,
	             "'d:1' key");
	const char *del[] = {"DELUSER", "app"};
	expect_ok(EXEC(&admin, "ACL", del, 2));
	assert_true(ftc_wait_closed(&far, 10000));
	ftc_close(&far);
	ftc_close(&admin);
	harness_cluster_stop(&cc);
}

/* A restarted node has its users from its first connection on. */
static void test_restart_keeps_users(void **state)
{
	struct ftc admin, app;
	(void)state;
	login_admin(&admin, port);
	const char *rules[] = {"reset", "on", ">" APP_PW, "~r:*", "+@all"};
	setuser(&admin, "keeper", rules, 5);
	ftc_close(&admin);
	assert_int_equal(harness_node_signal(&cluster, 0, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&cluster, 0), 0);
	login(&app, port, "keeper", APP_PW);
	expect_error(CALL(&app, FSNP_OP_SET, "key=s value=s", "x:1", "v"), 3,
	             "'x:1' key");
	ftc_close(&app);
	assert_int_equal(ftc_wait_ready(port, 20000), 0);
}

static int lodectl(char *out, size_t cap, const char *const args[])
{
	const char *argv[24] = {LS_ABS_BUILDDIR "/lodectl"};
	int n = 1;
	for (; args[n - 1] != NULL && n < 23; n++) {
		argv[n] = args[n - 1];
	}
	argv[n] = NULL;
	return harness_run(argv, out, cap);
}

/* lodectl acl: each rule its own argument, the user's password from the
 * options. */
static void test_lodectl_acl(void **state)
{
	char fsnp[64], out[4096];
	(void)state;
	snprintf(fsnp, sizeof fsnp, "127.0.0.1:%u", port);
	const char *set[] = {"--fsnp", fsnp,       "acl",    "setuser", "ctl",
	                     "on",     ">" APP_PW, "~ctl:*", "+@read",  NULL};
	assert_int_equal(lodectl(out, sizeof out, set), 0);
	const char *who[] = {"--fsnp", fsnp,  "--user", "ctl", "--password",
	                     APP_PW,   "acl", "whoami", NULL};
	assert_int_equal(lodectl(out, sizeof out, who), 0);
	assert_non_null(strstr(out, "ctl"));
	const char *get[] = {"--fsnp",     fsnp,   "--user", "ctl",
	                     "--password", APP_PW, "kv",     "set",
	                     "ctl:1",      "v",    NULL};
	assert_int_not_equal(lodectl(out, sizeof out, get), 0);
	assert_non_null(strstr(out, "NOPERM"));
	const char *list[] = {"--fsnp", fsnp, "acl", "list", NULL};
	assert_int_equal(lodectl(out, sizeof out, list), 0);
	assert_non_null(strstr(out, "user ctl on #"));
	assert_null(strstr(out, APP_PW));
	const char *del[] = {"--fsnp", fsnp, "acl", "deluser", "ctl", NULL};
	assert_int_equal(lodectl(out, sizeof out, del), 0);
}

/* With a password required: unauthenticated connections are closed at
 * the auth deadline, a flood of them sending frames above the
 * unauthenticated limit is cut off while an authenticated client keeps
 * being served, and maxclients bounds them all. */
static void test_unauthenticated_limits(void **state)
{
	static const char *const extra[] = {
	    "--requirepass",
	    ADMIN_PW,
	    "--fsnp-auth-timeout-ms",
	    "800",
	    "--fsnp-unauthenticated-max-frame-bytes",
	    "2048",
	    "--maxclients",
	    "40",
	    "--fsnp-trusted-request-context-users",
	    "svc-a,svc-b",
	    "--auth-max-failures",
	    "3",
	    NULL};
	enum { FLOOD = 30 };
	struct harness_cluster pc;
	struct ftc ok, idle, flood[FLOOD], extra_c[20];
	(void)state;
	assert_int_equal(harness_cluster_start(&pc, 1, extra, true), 0);
	harness_secret(&pc, ADMIN_PW);
	uint16_t p = pc.nodes[0].fsnp;
	login(&ok, p, "default", ADMIN_PW);
	expect_ok(CALL(&ok, FSNP_OP_SET, "key=s value=s", "k", "v"));
	/* The options as the server reports them: the trusted users, never
	 * the password. */
	{
		struct fsnp_val st;
		struct ftc_msg m = CALL(&ok, FSNP_OP_OPTIONS, "");
		assert_int_equal(m.status, 0);
		assert_int_equal(fsnp_map_map(&m.value, "settings", &st), 0);
		assert_true(ftc_map_str(
		    &st, "FERRICSTORE_NATIVE_TRUSTED_REQUEST_CONTEXT_USERS",
		    "svc-a,svc-b"));
		assert_int_equal(
		    ftc_map_int(
		        &st,
		        "FERRICSTORE_NATIVE_UNAUTHENTICATED_MAX_FRAME_BYTES"),
		    2048);
		assert_null(memmem(m.body, m.len, ADMIN_PW, strlen(ADMIN_PW)));
		ftc_msg_free(&m);
	}

	/* Guessing: the third failed AUTH on a connection (by opcode or
	 * COMMAND_EXEC) is answered, then the connection closes; a good
	 * AUTH in between does not reset the count; other connections are
	 * served. */
	{
		struct ftc g;
		const char *guess[] = {"default", "guess-2"};
		login(&g, p, "default", ADMIN_PW);
		expect_error(CALL(&g, FSNP_OP_AUTH, "username=s password=s",
		                  "default", "guess-1"),
		             2, "WRONGPASS");
		expect_error(EXEC(&g, "AUTH", guess, 2), 2, "WRONGPASS");
		expect_ok(CALL(&g, FSNP_OP_AUTH, "username=s password=s",
		               "default", ADMIN_PW));
		expect_ok(CALL(&g, FSNP_OP_GET, "key=s", "k"));
		expect_error(CALL(&g, FSNP_OP_AUTH, "username=s password=s",
		                  "default", "guess-3"),
		             2, "WRONGPASS");
		assert_true(ftc_wait_closed(&g, 5000));
		ftc_close(&g);
		expect_ok(CALL(&ok, FSNP_OP_GET, "key=s", "k"));
	}

	/* The deadline: closed unless authenticated. */
	assert_int_equal(ftc_connect(&idle, p), 0);
	uint64_t t0 = harness_mono_ms();
	assert_true(ftc_wait_closed(&idle, 5000));
	assert_true(harness_mono_ms() - t0 >= 500);
	ftc_close(&idle);

	/* The flood: every oversized unauthenticated frame closes its
	 * connection; the authenticated client is served meanwhile. */
	char *big = malloc(8192);
	assert_non_null(big);
	memset(big, 'x', 8191);
	big[8191] = '\0';
	for (int i = 0; i < FLOOD; i++) {
		struct wbuf b;
		assert_int_equal(ftc_connect(&flood[i], p), 0);
		ftc_body(&b, "key=s value=s", "k", big);
		ftc_send_frame(&flood[i], 1, FSNP_OP_SET, 0, 1, b.data, b.len);
		wbuf_free(&b);
		if (i % 5 == 0) {
			expect_ok(CALL(&ok, FSNP_OP_GET, "key=s", "k"));
		}
	}
	for (int i = 0; i < FLOOD; i++) {
		assert_true(ftc_wait_closed(&flood[i], 5000));
		ftc_close(&flood[i]);
	}
	free(big);
	expect_ok(CALL(&ok, FSNP_OP_GET, "key=s", "k"));

	/* maxclients (40, `ok` included): the 41st connection is closed
	 * at once, the others wait for their deadline. */
	int refused = 0;
	for (int i = 0; i < 20; i++) {
		assert_int_equal(ftc_connect(&extra_c[i], p), 0);
	}
	struct ftc more[25];
	for (int i = 0; i < 25; i++) {
		assert_int_equal(ftc_connect(&more[i], p), 0);
	}
	for (int i = 0; i < 25; i++) {
		if (ftc_wait_closed(&more[i], 300)) {
			refused++;
		}
		ftc_close(&more[i]);
	}
	/* 1 + 20 + 25 = 46 attempts against 40: at least 6 refused (the
	 * deadline may close a few more). */
	assert_true(refused >= 6);
	for (int i = 0; i < 20; i++) {
		ftc_close(&extra_c[i]);
	}
	expect_ok(CALL(&ok, FSNP_OP_GET, "key=s", "k"));
	ftc_close(&ok);
	harness_cluster_stop(&pc);
}

/* --admin-token-file: every /v1/... request needs the bearer token;
 * /healthz and /metrics stay open; lodectl sends it. */
static void test_admin_token(void **state)
{
	static const char token[] = "tok-3f9a1c0d5e7b";
	char path[256], extra_path[300], out[8192], addr[64];
	int st;
	struct harness_cluster ac;
	(void)state;
	snprintf(path, sizeof path, "/tmp/ls-admin-token-%d", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", token);
	fclose(f);
	snprintf(extra_path, sizeof extra_path, "%s", path);
	const char *const extra[] = {"--admin-token-file", extra_path, NULL};
	assert_int_equal(harness_cluster_start(&ac, 1, extra, true), 0);
	harness_secret(&ac, token);
	uint16_t ap = ac.nodes[0].admin;
	assert_int_equal(
	    harness_http(ap, "GET", "/v1/cluster", NULL, &st, out, sizeof out),
	    0);
	assert_int_equal(st, 401);
	assert_null(strstr(out, token));
	assert_int_equal(
	    harness_http(ap, "POST", "/v1/streams", "{}", &st, out, sizeof out),
	    0);
	assert_int_equal(st, 401);
	assert_int_equal(
	    harness_http(ap, "GET", "/healthz", NULL, &st, out, sizeof out), 0);
	assert_int_equal(st, 200);
	assert_int_equal(
	    harness_http(ap, "GET", "/metrics", NULL, &st, out, sizeof out), 0);
	assert_int_equal(st, 200);
	snprintf(addr, sizeof addr, "127.0.0.1:%u", ap);
	const char *with[] = {"--admin", addr,     "--admin-token-file",
	                      path,      "stream", "list",
	                      NULL};
	assert_int_equal(lodectl(out, sizeof out, with), 0);
	const char *without[] = {"--admin", addr, "stream", "list", NULL};
	assert_int_not_equal(lodectl(out, sizeof out, without), 0);
	setenv("LODESTONE_ADMIN_TOKEN", token, 1);
	assert_int_equal(lodectl(out, sizeof out, without), 0);
	setenv("LODESTONE_ADMIN_TOKEN", "wrong-token", 1);
	assert_int_not_equal(lodectl(out, sizeof out, without), 0);
	unsetenv("LODESTONE_ADMIN_TOKEN");
	harness_cluster_stop(&ac);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_users_and_rules),
	    cmocka_unit_test(test_flow_and_admin),
	    cmocka_unit_test(test_flow_query_acl),
	    cmocka_unit_test(test_invalidated_on_change),
	    cmocka_unit_test(test_lodectl_acl),
	    cmocka_unit_test(test_restart_keeps_users),
	    cmocka_unit_test(test_cluster),
	    cmocka_unit_test(test_unauthenticated_limits),
	    cmocka_unit_test(test_admin_token),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
