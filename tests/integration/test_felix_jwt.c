/* Integration: Felix JWT auth on a real node started with
 * --felix-jwks-dir. Tenants ta and tb have keys of their own. A token for
 * ta cannot act on tb (auth as tb with it is refused; requests naming tb
 * on a ta session are refused one by one, and tb's stream, cache, counter
 * and consumer group are unchanged afterwards); a token limited to one
 * stream pattern can use only those streams; expired, not yet valid and
 * forged tokens are refused at auth; keys added to the directory are
 * taken on SIGHUP; the admin API creates and deletes scopes only for a
 * bearer token granting ns.manage (through lodectl and
 * $LODESTONE_ADMIN_TOKEN). On a three-node cluster the same isolation
 * holds on every node, leader or follower of tb's stream and cache: ta's
 * requests are refused by the node it is connected to, before anything is
 * forwarded, while tb's own work through forwarding. A connection whose
 * auths fail --auth-max-failures times is closed. No node logs a token
 * (the harness checks every test's logs for the tokens it used). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <unistd.h>

#include "client/felix_token.h"
#include "tests/integration/felix_util.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"
#include "wire/felix_msg.h"

static char dir[64];
static EVP_PKEY *key_a, *key_b, *key_c;

static void write_jwks(const char *tenant, EVP_PKEY *k, const char *kid)
{
	char path[128];
	char *jwk = felix_token_jwk(k, kid);
	assert_non_null(jwk);
	snprintf(path, sizeof path, "%s/%s.json", dir, tenant);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"keys\":[%s]}\n", jwk);
	fclose(f);
	free(jwk);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_felix_jwt.XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(felix_token_keygen(&key_a), 0);
	assert_int_equal(felix_token_keygen(&key_b), 0);
	assert_int_equal(felix_token_keygen(&key_c), 0);
	write_jwks("ta", key_a, "ka");
	write_jwks("tb", key_b, "kb");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	EVP_PKEY_free(key_a);
	EVP_PKEY_free(key_b);
	EVP_PKEY_free(key_c);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static char *token_with(EVP_PKEY *k, const char *kid, const char *tenant,
                        int64_t iat, int64_t exp, int64_t nbf,
                        const char *const *perms, size_t n)
{
	char err[256];
	struct felix_token_claims c = {
	    .tid = tenant,
	    .iat = iat,
	    .exp = exp,
	    .nbf = nbf,
	    .perms = perms,
	    .n_perms = n,
	};
	char *t = felix_token_mint(k, kid, &c, err, sizeof err);
	assert_non_null(t);
	return t;
}

static char *token(EVP_PKEY *k, const char *kid, const char *tenant,
                   const char *const *perms, size_t n)
{
	int64_t now = (int64_t)time(NULL);
	return token_with(k, kid, tenant, now, now + 600, 0, perms, n);
}

static const char *const admin[] = {"tenant.admin:tenant:*"};

static void start_n(struct harness_cluster *cl, unsigned n, const char *shards)
{
	const char *args[] = {"--dev", "--shards",
	                      shards,  "--felix-jwks-dir",
	                      dir,     "--auth-max-failures",
	                      "3",     NULL};
	assert_int_equal(harness_cluster_start(cl, n, args, true), 0);
}

static void start(struct harness_cluster *cl)
{
	start_n(cl, 1, "2");
}

/* ---- raw requests ---- */

struct answer {
	unsigned frames;
	bool got;   /* an answer after the auth reply */
	bool ended; /* the stream ended */
	bool binary_ack;
	uint8_t ack_status;
	enum felix_msg_type type;
	char message[512];
};

static void on_frame(void *data, struct felix_raw *raw, uint16_t flags,
                     const uint8_t *payload, uint32_t len)
{
	struct answer *a = data;
	char err[256];
	(void)raw;
	if (a->frames++ == 0) {
		return; /* auth_ok */
	}
	a->got = true;
	if (flags & FELIX_FLAG_PUBLISH_ACK) {
		struct felix_publish_ack ack;
		assert_int_equal(felix_publish_ack_decode(flags, payload, len,
		                                          &ack, err,
		                                          sizeof err),
		                 0);
		a->binary_ack = true;
		a->ack_status = ack.status;
		snprintf(a->message, sizeof a->message, "%.*s",
		         (int)ack.message.len, (const char *)ack.message.data);
		return;
	}
	struct felix_msg m;
	assert_int_equal(felix_msg_decode(payload, len, &m, err, sizeof err),
	                 0);
	a->type = m.type;
	if (m.type == FELIX_MSG_ERROR) {
		snprintf(a->message, sizeof a->message, "%s",
		         m.u.error.message);
	} else if (m.type == FELIX_MSG_PUBLISH_ERROR) {
		snprintf(a->message, sizeof a->message, "%s",
		         m.u.publish_error.message);
	}
	felix_msg_free(&m);
}

static void on_end(void *data, struct felix_raw *raw, const char *why)
{
	struct answer *a = data;
	(void)raw;
	(void)why;
	a->ended = true;
}

/* Sends one frame on a new authenticated stream of f and waits for the
 * answer; it must be a refusal starting "unauthorized:". */
static void expect_refused_frame(struct fx *f, struct wbuf *frame,
                                 const char *what)
{
	struct answer a;
	struct felix_raw *raw;
	memset(&a, 0, sizeof a);
	assert_false(frame->oom);
	assert_int_equal(
	    felix_client_raw_open(f->c, true, on_frame, on_end, &a, &raw), 0);
	assert_int_equal(felix_raw_send(raw, frame->data, frame->len, false),
	                 0);
	assert_int_equal(felix_client_run(f->loop, &a.got, FX_WAIT_MS), 0);
	if (a.binary_ack) {
		assert_int_equal(a.ack_status, FELIX_ACK_STATUS_ERROR);
	} else if (a.type != FELIX_MSG_ERROR &&
	           a.type != FELIX_MSG_PUBLISH_ERROR) {
		fail_msg("%s: answered %s, not a refusal", what,
		         felix_msg_type_name(a.type));
	}
	if (strncmp(a.message, "unauthorized:", 13) != 0) {
		fail_msg("%s: refused with '%s'", what, a.message);
	}
	wbuf_free(frame);
}

static void msg_frame(struct wbuf *w, const struct felix_msg *m)
{
	wbuf_init(w);
	assert_int_equal(felix_msg_encode_frame(m, w), 0);
}

/* Every kind of request on tenant `t`'s data, each refused. */
static void refuse_all(struct fx *f, char *t)
{
	struct felix_msg m;
	struct wbuf w;
	static uint8_t payload[] = "stolen";
	char ns[] = "default", orders[] = "orders", c1[] = "c1", k[] = "k";
	char g[] = "g";

	felix_msg_init(&m, FELIX_MSG_PUBLISH);
	m.u.publish.tenant_id = t;
	m.u.publish.namespace = ns;
	m.u.publish.stream = orders;
	m.u.publish.payload.data = payload;
	m.u.publish.payload.len = 6;
	m.u.publish.has_request_id = true;
	m.u.publish.request_id = 7;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "publish");

	struct felix_publish_batch b;
	struct felix_view v = {payload, 6};
	memset(&b, 0, sizeof b);
	b.acked = true;
	b.request_id = 9;
	b.ack_mode = FELIX_ACK_PER_BATCH;
	b.tenant_id = (struct felix_view){(const uint8_t *)t, strlen(t)};
	b.namespace = (struct felix_view){(const uint8_t *)ns, strlen(ns)};
	b.stream = (struct felix_view){(const uint8_t *)orders, 6};
	wbuf_init(&w);
	assert_int_equal(felix_publish_batch_encode(&w, &b, &v, 1), 0);
	expect_refused_frame(f, &w, "binary publish");

	felix_msg_init(&m, FELIX_MSG_SUBSCRIBE);
	m.u.subscribe.tenant_id = t;
	m.u.subscribe.namespace = ns;
	m.u.subscribe.stream = orders;
	m.u.subscribe.has_start = true;
	m.u.subscribe.start.kind = FELIX_START_EARLIEST;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "subscribe");

	felix_msg_init(&m, FELIX_MSG_CACHE_PUT);
	m.u.cache_put.tenant_id = t;
	m.u.cache_put.namespace = ns;
	m.u.cache_put.cache = c1;
	m.u.cache_put.key = k;
	m.u.cache_put.value.data = payload;
	m.u.cache_put.value.len = 6;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "cache_put");

	felix_msg_init(&m, FELIX_MSG_CACHE_GET);
	m.u.cache_get.tenant_id = t;
	m.u.cache_get.namespace = ns;
	m.u.cache_get.cache = c1;
	m.u.cache_get.key = k;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "cache_get");

	felix_msg_init(&m, FELIX_MSG_CACHE_DELETE);
	m.u.cache_delete.tenant_id = t;
	m.u.cache_delete.namespace = ns;
	m.u.cache_delete.cache = c1;
	m.u.cache_delete.key = k;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "cache_delete");

	felix_msg_init(&m, FELIX_MSG_COUNTER_ADD);
	m.u.counter_add.tenant_id = t;
	m.u.counter_add.namespace = ns;
	m.u.counter_add.cache = c1;
	m.u.counter_add.key = k;
	m.u.counter_add.delta = 100;
	m.u.counter_add.request_id = 3;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "counter_add");

	felix_msg_init(&m, FELIX_MSG_COUNTER_GET);
	m.u.counter_get.tenant_id = t;
	m.u.counter_get.namespace = ns;
	m.u.counter_get.cache = c1;
	m.u.counter_get.key = k;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "counter_get");

	felix_msg_init(&m, FELIX_MSG_CACHE_WATCH);
	m.u.cache_watch.tenant_id = t;
	m.u.cache_watch.namespace = ns;
	m.u.cache_watch.cache = c1;
	m.u.cache_watch.key = k;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "cache_watch");

	felix_msg_init(&m, FELIX_MSG_GROUP_POLL);
	m.u.group_poll.tenant_id = t;
	m.u.group_poll.namespace = ns;
	m.u.group_poll.stream = orders;
	m.u.group_poll.group = g;
	m.u.group_poll.max_records = 10;
	m.u.group_poll.has_wait_ms = true;
	m.u.group_poll.wait_ms = 0;
	m.u.group_poll.request_id = 4;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "group_poll");

	felix_msg_init(&m, FELIX_MSG_GROUP_ACK);
	m.u.group_settle.tenant_id = t;
	m.u.group_settle.namespace = ns;
	m.u.group_settle.stream = orders;
	m.u.group_settle.group = g;
	m.u.group_settle.offset = 0;
	m.u.group_settle.request_id = 5;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "group_ack");

	felix_msg_init(&m, FELIX_MSG_GROUP_DEAD_LETTERS);
	m.u.group_dead_letters.tenant_id = t;
	m.u.group_dead_letters.namespace = ns;
	m.u.group_dead_letters.stream = orders;
	m.u.group_dead_letters.group = g;
	m.u.group_dead_letters.request_id = 6;
	msg_frame(&w, &m);
	expect_refused_frame(f, &w, "group_dead_letters");
}

/* tb's data as tb left it: one record, k = bv, n = 5, the record not
 * claimed by anyone in group g. */
static void expect_untouched(struct fx *fb)
{
	struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	char buf[64];
	bool found;
	int64_t n;
	memset(&s, 0, sizeof s);
	assert_int_equal(
	    fx_subscribe(fb, &s, "default", "orders", 0, &earliest), 0);
	assert_int_equal(fx_sub_wait(&s, 1), 0);
	fx_spin(fb, 300);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.payloads[0], "b1");
	fx_sub_close(&s);
	fx_sub_free(&s);
	assert_int_equal(fx_cache_get(fb, "c1", "k", buf, sizeof buf, &found),
	                 0);
	assert_true(found);
	assert_string_equal(buf, "bv");
	assert_int_equal(fx_counter_get(fb, "c1", "k2", &n, &found), 0);
	assert_true(found);
	assert_int_equal(n, 5);
	struct fx_rec recs[4];
	size_t nr = 0;
	assert_int_equal(
	    fx_group_poll(fb, "default", "orders", 0, "g", 4, 0, recs, 4, &nr),
	    0);
	assert_int_equal(nr, 1);
	assert_int_equal(recs[0].offset, 0);
	assert_int_equal(recs[0].attempts, 1);
}

static void test_tenant_isolation(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx fa, fb, fx;
	int64_t sum;
	(void)state;
	start(&cl);
	uv_loop_init(&loop);
	char *ta = token(key_a, "ka", "ta", admin, 1);
	char *tb = token(key_b, "kb", "tb", admin, 1);
	harness_secret(&cl, ta);
	harness_secret(&cl, tb);

	/* tb's data. */
	assert_int_equal(fx_connect(&fb, &loop, &cl, 0, "tb", tb, 1), 0);
	assert_int_equal(fx_publish_ready(&fb, "default", "orders"), 0);
	const char *b1[] = {"b1"};
	assert_int_equal(fx_publish(&fb, "default", "orders", NULL, b1, 1), 0);
	assert_int_equal(fx_cache_put(&fb, "c1", "k", "bv", false, 0), 0);
	assert_int_equal(fx_counter_add(&fb, "c1", "k2", 5, &sum), 0);

	/* ta's token does not open a tb session, nor tb's a ta one. */
	assert_int_not_equal(fx_connect(&fx, &loop, &cl, 0, "tb", ta, 1), 0);
	assert_non_null(strstr(fx.message, "unauthorized"));
	fx_close(&fx);
	assert_int_not_equal(fx_connect(&fx, &loop, &cl, 0, "ta", tb, 1), 0);
	assert_non_null(strstr(fx.message, "unauthorized"));
	fx_close(&fx);

	/* A ta session naming tb in every kind of request: all refused. */
	assert_int_equal(fx_connect(&fa, &loop, &cl, 0, "ta", ta, 1), 0);
	refuse_all(&fa, "tb");
	fx_close(&fa);

	/* A ta session whose token grants nothing on its own tenant's
	 * default namespace: refused by permission, on ta's own data. */
	const char *const other[] = {"stream.publish:stream:elsewhere/*"};
	char *tn = token(key_a, "ka", "ta", other, 1);
	harness_secret(&cl, tn);
	assert_int_equal(fx_connect(&fa, &loop, &cl, 0, "ta", tn, 1), 0);
	refuse_all(&fa, "ta");
	fx_close(&fa);

	expect_untouched(&fb);
	fx_close(&fb);
	free(ta);
	free(tb);
	free(tn);
	harness_cluster_stop(&cl);
	uv_loop_close(&loop);
}

static void test_stream_pattern(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx fa, fadm;
	struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	struct fx_rec recs[4];
	size_t nr;
	(void)state;
	start(&cl);
	uv_loop_init(&loop);
	char *adm = token(key_a, "ka", "ta", admin, 1);
	const char *const perms[] = {
	    "stream.publish:stream:default/orders-*",
	    "stream.subscribe:stream:default/orders-*",
	};
	char *lim = token(key_a, "ka", "ta", perms, 2);
	harness_secret(&cl, adm);
	harness_secret(&cl, lim);
	assert_int_equal(fx_connect(&fadm, &loop, &cl, 0, "ta", adm, 1), 0);
	assert_int_equal(fx_publish_ready(&fadm, "default", "payments"), 0);
	assert_int_equal(fx_publish_ready(&fadm, "default", "orders-eu"), 0);

	assert_int_equal(fx_connect(&fa, &loop, &cl, 0, "ta", lim, 1), 0);
	const char *one[] = {"x"};
	assert_int_equal(fx_publish(&fa, "default", "orders-eu", NULL, one, 1),
	                 0);
	assert_int_equal(
	    fx_publish_json(&fa, "default", "orders-eu", NULL, one, 1), 0);
	/* Outside the pattern: binary and JSON publishes refused. */
	assert_int_not_equal(
	    fx_publish(&fa, "default", "payments", NULL, one, 1), 0);
	assert_non_null(strstr(fa.message, "unauthorized"));
	assert_int_not_equal(
	    fx_publish_json(&fa, "default", "payments", NULL, one, 1), 0);
	assert_non_null(strstr(fa.message, "unauthorized"));
	memset(&s, 0, sizeof s);
	assert_int_not_equal(
	    fx_subscribe(&fa, &s, "default", "payments", 0, &earliest), 0);
	assert_non_null(strstr(s.message, "unauthorized"));
	fx_sub_free(&s);
	assert_int_not_equal(fx_group_poll(&fa, "default", "payments", 0, "g",
	                                   4, 0, recs, 4, &nr),
	                     0);
	assert_int_not_equal(fx_cache_put(&fa, "c1", "k", "v", false, 0), 0);
	/* Inside it: subscribe and a consumer group work. */
	memset(&s, 0, sizeof s);
	assert_int_equal(
	    fx_subscribe(&fa, &s, "default", "orders-eu", 0, &earliest), 0);
	assert_int_equal(fx_sub_wait(&s, 2), 0);
	fx_sub_close(&s);
	fx_sub_free(&s);
	assert_int_equal(fx_group_poll(&fa, "default", "orders-eu", 0, "g", 4,
	                               0, recs, 4, &nr),
	                 0);
	assert_int_equal(nr, 2);
	fx_close(&fa);

	/* Nothing reached payments. */
	memset(&s, 0, sizeof s);
	assert_int_equal(
	    fx_subscribe(&fadm, &s, "default", "payments", 0, &earliest), 0);
	fx_spin(&fadm, 300);
	assert_int_equal(s.n, 0);
	fx_sub_close(&s);
	fx_sub_free(&s);
	fx_close(&fadm);
	free(adm);
	free(lim);
	harness_cluster_stop(&cl);
	uv_loop_close(&loop);
}

static void test_refused_at_auth(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	int64_t now = (int64_t)time(NULL);
	(void)state;
	start(&cl);
	uv_loop_init(&loop);
	struct {
		const char *tenant;
		char *token;
		const char *why;
	} cases[] = {
	    {"ta",
	     token_with(key_a, "ka", "ta", now - 7200, now - 3600, 0, admin, 1),
	     "expired"},
	    {"ta",
	     token_with(key_a, "ka", "ta", now, now + 7200, now + 3600, admin,
	                1),
	     "not yet valid"},
	    {"ta", token(key_c, "ka", "ta", admin, 1), "signature"},
	    {"ta", token(key_a, "k-unknown", "ta", admin, 1), "kid"},
	    {"tc", token(key_c, "kc", "tc", admin, 1), "no keys"},
	    {"ta", strdup("not-a-jwt"), "malformed"},
	    {"../ta", token(key_a, "ka", "../ta", admin, 1), "tenant_id"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		harness_secret(&cl, cases[i].token);
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_not_equal(fx_connect(&f, &loop, &cl, 0,
		                                cases[i].tenant, cases[i].token,
		                                1),
		                     0);
		if (strstr(f.message, "unauthorized") == NULL ||
		    strstr(f.message, cases[i].why) == NULL) {
			fail_msg("case %zu: refused with '%s'", i, f.message);
		}
		fx_close(&f);
	}
	/* tc's keys arrive: taken on SIGHUP, refused until then. */
	write_jwks("tc", key_c, "kc");
	assert_int_not_equal(
	    fx_connect(&f, &loop, &cl, 0, "tc", cases[4].token, 1), 0);
	fx_close(&f);
	assert_int_equal(harness_node_signal(&cl, 0, SIGHUP, NULL), 0);
	int rc = -1;
	for (int i = 0; i < 50 && rc != 0; i++) {
		harness_nap(100);
		rc = fx_connect(&f, &loop, &cl, 0, "tc", cases[4].token, 1);
		fx_close(&f);
	}
	assert_int_equal(rc, 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		free(cases[i].token);
	}
	/* Tokens are never logged. */
	char log[1 << 16];
	FILE *lf = fopen(cl.nodes[0].log_path, "r");
	assert_non_null(lf);
	size_t n = fread(log, 1, sizeof log - 1, lf);
	fclose(lf);
	log[n] = '\0';
	assert_null(strstr(log, "eyJ"));
	harness_cluster_stop(&cl);
	uv_loop_close(&loop);
}

/* Runs `lodectl --admin 127.0.0.1:PORT ARGS...` with `token` in
 * $LODESTONE_ADMIN_TOKEN (none when NULL); its exit status, output in out. */
static int lodectl(struct harness_cluster *cl, const char *token, char *out,
                   size_t cap, const char *a1, const char *a2, const char *a3)
{
	char bin[1024], addr[64];
	snprintf(bin, sizeof bin, "%s", harness_binary());
	char *slash = strrchr(bin, '/');
	assert_non_null(slash);
	snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "lodectl");
	snprintf(addr, sizeof addr, "127.0.0.1:%u", cl->nodes[0].admin);
	if (token != NULL) {
		setenv("LODESTONE_ADMIN_TOKEN", token, 1);
	} else {
		unsetenv("LODESTONE_ADMIN_TOKEN");
	}
	const char *argv[] = {bin, "--admin", addr, a1, a2, a3, NULL};
	int rc = harness_run(argv, out, cap);
	unsetenv("LODESTONE_ADMIN_TOKEN");
	return rc;
}

static void test_admin_scope_changes(void **state)
{
	struct harness_cluster cl;
	char out[4096];
	(void)state;
	start(&cl);
	const char *const nsm[] = {"ns.manage:ns:prod"};
	const char *const pub[] = {"stream.publish:stream:prod/*"};
	char *manage = token(key_a, "ka", "ta", nsm, 1);
	char *publish = token(key_a, "ka", "ta", pub, 1);
	char *other = token(key_b, "kb", "tb", admin, 1);
	harness_secret(&cl, manage);
	harness_secret(&cl, publish);
	harness_secret(&cl, other);

	assert_int_not_equal(lodectl(&cl, NULL, out, sizeof out, "stream",
	                             "create", "ta/prod/orders"),
	                     0);
	assert_non_null(strstr(out, "unauthorized"));
	assert_int_not_equal(lodectl(&cl, publish, out, sizeof out, "stream",
	                             "create", "ta/prod/orders"),
	                     0);
	assert_non_null(strstr(out, "ns.manage"));
	/* tb's admin token is not ta's. */
	assert_int_not_equal(lodectl(&cl, other, out, sizeof out, "stream",
	                             "create", "ta/prod/orders"),
	                     0);
	assert_non_null(strstr(out, "unauthorized"));
	/* ns.manage on prod, not on another namespace. */
	assert_int_not_equal(lodectl(&cl, manage, out, sizeof out, "cache",
	                             "create", "ta/staging/c1"),
	                     0);
	assert_non_null(strstr(out, "ns.manage"));
	/* Nothing was created. */
	assert_int_equal(
	    lodectl(&cl, NULL, out, sizeof out, "stream", "list", NULL), 0);
	assert_null(strstr(out, "orders"));

	if (lodectl(&cl, manage, out, sizeof out, "stream", "create",
	            "ta/prod/orders") != 0) {
		fail_msg("create with ns.manage: %s", out);
	}
	assert_int_equal(lodectl(&cl, NULL, out, sizeof out, "stream",
	                         "describe", "ta/prod/orders"),
	                 0);
	assert_int_not_equal(lodectl(&cl, NULL, out, sizeof out, "stream",
	                             "delete", "ta/prod/orders"),
	                     0);
	if (lodectl(&cl, manage, out, sizeof out, "stream", "delete",
	            "ta/prod/orders") != 0) {
		fail_msg("delete with ns.manage: %s", out);
	}
	free(manage);
	free(publish);
	free(other);
	harness_cluster_stop(&cl);
}

/* The leader (0-based index) every node names for shard 0 of tb's scope,
 * the same over three looks 200 ms apart. */
static unsigned tb_leader(struct harness_cluster *cl, const char *kind,
                          const char *name)
{
	uint64_t t0 = harness_mono_ms();
	unsigned same = 0, last = 0;
	while (same < 3) {
		unsigned l = fx_tenant_scope_leader(cl, 0, "tb", kind, name);
		bool agreed = l != 0;
		for (unsigned i = 1; i < cl->n && agreed; i++) {
			agreed = fx_tenant_scope_leader(cl, i, "tb", kind,
			                                name) == l;
		}
		same = agreed && l == last ? same + 1 : agreed ? 1 : 0;
		last = agreed ? l : 0;
		if (harness_mono_ms() - t0 > 30000) {
			fail_msg("no agreed leader for tb's %s %s", kind, name);
		}
		harness_nap(200);
	}
	return last - 1;
}

/* A request through f until the cluster answers it (a cache's first use
 * waits for its shard's election). */
static void cache_put_ready(struct fx *f, const char *cache, const char *key,
                            const char *value)
{
	uint64_t t0 = harness_mono_ms();
	while (fx_cache_put(f, cache, key, value, false, 0) != 0) {
		if (harness_mono_ms() - t0 > 30000) {
			fail_msg("cache_put never answered: %s", f->message);
		}
		harness_nap(200);
	}
}

/* Three nodes, one shard per scope: ta's token is refused tb's data on
 * every node, the leaders of tb's stream and cache and the followers
 * (which would forward a publish, a cache or a counter request, and
 * name the leader for a subscription, a watch or a consumer group): the
 * refusal is "unauthorized:" from the node ta is connected to, never a
 * forward's or a redirect's answer, and tb's data is unchanged after.
 * tb's own requests work from every node. */
static void test_tenant_isolation_cluster(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx fb[3], fa;
	struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	struct fx_rec recs[8];
	char buf[64];
	bool found;
	int64_t sum, n;
	size_t nr;
	(void)state;
	start_n(&cl, 3, "1");
	uv_loop_init(&loop);
	char *ta = token(key_a, "ka", "ta", admin, 1);
	char *tb = token(key_b, "kb", "tb", admin, 1);
	harness_secret(&cl, ta);
	harness_secret(&cl, tb);

	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(fx_connect(&fb[i], &loop, &cl, i, "tb", tb, 1),
		                 0);
	}
	assert_int_equal(fx_publish_ready(&fb[0], "default", "orders"), 0);
	const char *b1[] = {"b1"};
	assert_int_equal(fx_publish(&fb[0], "default", "orders", NULL, b1, 1),
	                 0);
	cache_put_ready(&fb[0], "c1", "k", "bv");
	assert_int_equal(fx_counter_add(&fb[0], "c1", "k2", 5, &sum), 0);
	/* Leaderships move to their preferred replicas after a start:
	 * pick the leaders once they have. */
	fx_wait_settled(&cl, 0);
	unsigned ls = tb_leader(&cl, "streams", "orders");
	unsigned lc = tb_leader(&cl, "caches", "c1");

	/* ta on every node, leader and followers alike: all refused by
	 * the node itself. */
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(fx_connect(&fa, &loop, &cl, i, "ta", ta, 1),
		                 0);
		refuse_all(&fa, "tb");
		fx_close(&fa);
		/* ta's token does not open a tb session on any node. */
		assert_int_not_equal(
		    fx_connect(&fa, &loop, &cl, i, "tb", ta, 1), 0);
		assert_non_null(strstr(fa.message, "unauthorized"));
		fx_close(&fa);
	}
	/* Nothing reached tb's data, as its leaders see it (and a
	 * follower's forwarded reads). */
	expect_untouched(&fb[ls]);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(
		    fx_cache_get(&fb[i], "c1", "k", buf, sizeof buf, &found),
		    0);
		assert_true(found);
		assert_string_equal(buf, "bv");
		assert_int_equal(fx_counter_get(&fb[i], "c1", "k2", &n, &found),
		                 0);
		assert_int_equal(n, 5);
	}

	/* tb's requests from the followers work through forwarding:
	 * binary and JSON publishes, cache writes, counters. */
	unsigned f1 = (ls + 1) % 3, f2 = (ls + 2) % 3;
	const char *b2[] = {"b2"}, *b3[] = {"b3"};
	assert_int_equal(fx_publish(&fb[f1], "default", "orders", NULL, b2, 1),
	                 0);
	assert_int_equal(
	    fx_publish_json(&fb[f2], "default", "orders", NULL, b3, 1), 0);
	unsigned cf = (lc + 1) % 3;
	assert_int_equal(fx_cache_put(&fb[cf], "c1", "k3", "v3", false, 0), 0);
	assert_int_equal(fx_counter_add(&fb[cf], "c1", "k2", 2, &sum), 0);
	assert_int_equal(sum, 7);
	assert_int_equal(fx_cache_get(&fb[(lc + 2) % 3], "c1", "k3", buf,
	                              sizeof buf, &found),
	                 0);
	assert_true(found);
	assert_string_equal(buf, "v3");
	/* Subscriptions and consumer groups on the stream's leader. */
	memset(&s, 0, sizeof s);
	assert_int_equal(
	    fx_subscribe(&fb[ls], &s, "default", "orders", 0, &earliest), 0);
	assert_int_equal(fx_sub_wait(&s, 3), 0);
	assert_string_equal(s.payloads[0], "b1");
	fx_sub_close(&s);
	fx_sub_free(&s);
	assert_int_equal(fx_group_poll(&fb[ls], "default", "orders", 0, "g2", 8,
	                               0, recs, 8, &nr),
	                 0);
	assert_int_equal(nr, 3);
	/* A watch on the cache's leader sees a follower's forwarded
	 * write. */
	static struct fx_watch w;
	struct felix_watch_request wr;
	memset(&w, 0, sizeof w);
	memset(&wr, 0, sizeof wr);
	wr.key = "k4";
	assert_int_equal(fx_watch(&fb[lc], &w, "c1", &wr), 0);
	assert_int_equal(fx_cache_put(&fb[cf], "c1", "k4", "v4", false, 0), 0);
	assert_int_equal(fx_watch_wait(&w, 1), 0);
	assert_string_equal(w.keys[0], "k4");
	fx_watch_free(&w);

	for (unsigned i = 0; i < 3; i++) {
		fx_close(&fb[i]);
	}
	free(ta);
	free(tb);
	harness_cluster_stop(&cl);
	uv_loop_close(&loop);
}

struct auth_try {
	bool done; /* refused: the error arrived, or the stream ended */
	unsigned frames;
};

static void on_try_frame(void *data, struct felix_raw *raw, uint16_t flags,
                         const uint8_t *payload, uint32_t len)
{
	struct auth_try *t = data;
	(void)raw;
	(void)flags;
	(void)payload;
	(void)len;
	t->frames++;
	t->done = true;
}

static void on_try_end(void *data, struct felix_raw *raw, const char *why)
{
	struct auth_try *t = data;
	(void)raw;
	(void)why;
	t->done = true;
}

/* One auth with a forged token on a new stream of f's connection; waits
 * for its refusal. */
static void bad_auth(struct fx *f, const char *forged)
{
	struct auth_try t;
	struct felix_raw *raw;
	struct felix_msg m;
	struct wbuf w;
	char tenant[] = "ta";
	memset(&t, 0, sizeof t);
	felix_msg_init(&m, FELIX_MSG_AUTH);
	m.u.auth.tenant_id = tenant;
	m.u.auth.token = (char *)forged;
	msg_frame(&w, &m);
	assert_int_equal(felix_client_raw_open(f->c, false, on_try_frame,
	                                       on_try_end, &t, &raw),
	                 0);
	assert_int_equal(felix_raw_send(raw, w.data, w.len, true), 0);
	wbuf_free(&w);
	assert_int_equal(felix_client_run(f->loop, &t.done, FX_WAIT_MS), 0);
}

/* --auth-max-failures 3: two refused auths on a connection leave it
 * serving its authenticated stream; the third closes it. Another
 * connection is not affected. */
static void test_auth_failures_close(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f, g;
	(void)state;
	start(&cl);
	uv_loop_init(&loop);
	char *good = token(key_a, "ka", "ta", admin, 1);
	char *forged = token(key_c, "ka", "ta", admin, 1);
	harness_secret(&cl, good);
	harness_secret(&cl, forged);
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "ta", good, 1), 0);
	assert_int_equal(fx_connect(&g, &loop, &cl, 0, "ta", good, 1), 0);
	cache_put_ready(&f, "c1", "k", "v");
	bad_auth(&f, forged);
	bad_auth(&f, forged);
	assert_true(felix_client_is_open(f.c));
	assert_int_equal(fx_cache_put(&f, "c1", "k", "v2", false, 0), 0);
	bad_auth(&f, forged);
	uint64_t t0 = harness_mono_ms();
	while (felix_client_is_open(f.c) && harness_mono_ms() - t0 < 10000) {
		fx_spin(&f, 50);
	}
	assert_false(felix_client_is_open(f.c));
	assert_int_not_equal(fx_cache_put(&f, "c1", "k", "v3", false, 0), 0);
	fx_close(&f);
	/* The other connection, and a new one, are served. */
	assert_int_equal(fx_cache_put(&g, "c1", "k", "v4", false, 0), 0);
	fx_close(&g);
	assert_int_equal(fx_connect(&f, &loop, &cl, 0, "ta", good, 1), 0);
	fx_close(&f);
	free(good);
	free(forged);
	harness_cluster_stop(&cl);
	uv_loop_close(&loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tenant_isolation),
	    cmocka_unit_test(test_stream_pattern),
	    cmocka_unit_test(test_refused_at_auth),
	    cmocka_unit_test(test_admin_scope_changes),
	    cmocka_unit_test(test_tenant_isolation_cluster),
	    cmocka_unit_test(test_auth_failures_close),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
