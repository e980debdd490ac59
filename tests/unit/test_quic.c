/* Tests of the QUIC transport: node/felix/quic_server and client/quic_client on
 * one libuv loop over loopback, with a generated dev certificate. Every wait
 * is for an event, bounded by a generous deadline that only fails a broken
 * build; no assertion depends on timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "net/quic.h"
#include "client/quic_client.h"
#include "net/quic_engine.h"
#include "node/devcert.h"
#include "node/log.h"
#include "node/felix/quic_server.h"

#define DEADLINE_MS 20000

#define container_of(p, type, member)                                          \
	((type *)(void *)((char *)(p)-offsetof(type, member)))

/* When nonzero, every g_eagain_every-th send of the transport fails with
 * EAGAIN, as a full socket buffer would (see node/quic.mk: the test is
 * linked with --wrap=sendmsg,sendmmsg). */
static unsigned g_eagain_every;
static unsigned g_send_calls;

ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);
int __real_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags);
int __wrap_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags);

ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags)
{
	if (g_eagain_every != 0 && ++g_send_calls % g_eagain_every == 0) {
		errno = EAGAIN;
		return -1;
	}
	return __real_sendmsg(fd, m, flags);
}

int __wrap_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	if (g_eagain_every != 0 && ++g_send_calls % g_eagain_every == 0) {
		errno = EAGAIN;
		return -1;
	}
	return __real_sendmmsg(fd, v, n, flags);
}

/* Paths of the certificates made once for the whole run. */
static char g_dir[256];
static char g_cert[300], g_key[300];
static char g_wrong_cert[300], g_wrong_key[300];

enum srv_mode {
	SRV_ECHO = 0,      /* echo every bidi stream back, FIN for FIN */
	SRV_FANOUT,        /* open a uni stream per connection, send `fan` */
	SRV_CLOSE_ON_DATA, /* close the connection on the first bytes */
	SRV_STOP_ON_DATA   /* shut the whole server down from the callback */
};

struct side {
	int opens;
	int closes;
	int stream_opens;
	int stream_closes;
	int stream_resets;
	uint64_t last_reset_code;
	uint64_t last_stream_close_code;
	enum quic_close_origin last_origin;
	bool last_app;
	uint64_t last_code;
	char last_reason[QUIC_REASON_MAX];
	char last_msg[400];
	char alpn[64];
	bool had_alpn;
	size_t max_stream_queued;
	size_t max_pending;
	struct quic_conn *conn;
};

/* One direction of an echo stream as the client sees it. */
struct cstream {
	int64_t id;
	uint32_t seed;
	size_t total;
	size_t sent;
	size_t recvd;
	bool fin_sent;
	bool done;
	bool bad;
};

/* What the echo server holds for a stream: bytes read, not yet queued. */
struct echo {
	uint8_t *buf;
	size_t len;
	size_t cap;
	bool fin_seen;
	bool fin_sent;
};

struct env {
	uv_loop_t loop;
	uv_timer_t tick;
	struct log log;
	struct quic_server srv;
	struct quic_client cli;
	bool srv_up;
	bool cli_up;
	bool srv_closed;
	bool cli_closed;
	struct side s;
	struct side c;
	enum srv_mode mode;
	struct quic_limits srv_limits;
	bool cli_no_gro; /* the client receives without UDP GRO */
	/* client workload */
	int streams_per_conn;
	size_t bytes_per_stream;
	size_t chunk;
	struct cstream *cs;
	int ncs;
	int streams_done;
	/* fan-out */
	struct quic_sbuf *fan;
	unsigned fan_max_refs;
	int uni_done;
	int uni_bad;
	size_t uni_recvd;
	bool stop_uni; /* the client stops reading uni streams at once */
};

static uint8_t pattern(uint32_t seed, size_t off)
{
	uint32_t x = (uint32_t)off * 2654435761u ^ seed * 40503u;
	return (uint8_t)(x >> 13);
}

static void on_srv_closed(struct quic_server *s);

/* ---- server owner ---- */

static void echo_flush(struct quic_conn *c, int64_t sid, struct echo *e)
{
	struct env *env = quic_conn_owner(c);
	while (e->len > 0) {
		size_t n = e->len < 65536 ? e->len : 65536;
		bool fin = e->fin_seen && n == e->len;
		int rv = quic_conn_stream_write(c, sid, e->buf, n, fin);
		if (rv == QUIC_EAGAIN) {
			return;
		}
		assert_int_equal(rv, 0);
		size_t q = quic_conn_stream_queued(c, sid);
		if (q > env->s.max_stream_queued) {
			env->s.max_stream_queued = q;
		}
		memmove(e->buf, e->buf + n, e->len - n);
		e->len -= n;
		e->fin_sent = fin;
		quic_conn_stream_consume(c, sid, n);
	}
	if (e->fin_seen && !e->fin_sent) {
		assert_int_equal(quic_conn_stream_shutdown(c, sid), 0);
		e->fin_sent = true;
	}
}

static void srv_conn_open(struct quic_conn *c)
{
	struct env *env = quic_conn_owner(c);
	const char *alpn = quic_conn_alpn(c);
	env->s.opens++;
	env->s.conn = c;
	env->s.had_alpn = alpn != NULL;
	snprintf(env->s.alpn, sizeof env->s.alpn, "%s", alpn ? alpn : "");
	quic_conn_set_data(c, env);
	if (env->mode == SRV_FANOUT) {
		int64_t sid;
		assert_int_equal(quic_conn_open_uni_stream(c, &sid), 0);
		assert_int_equal(quic_conn_stream_write_sbuf(
		                     c, sid, env->fan, 0, env->fan->len, true),
		                 0);
		if (env->fan->refs > env->fan_max_refs) {
			env->fan_max_refs = env->fan->refs;
		}
	}
}

static void srv_stream_open(struct quic_conn *c, int64_t sid, bool bidi)
{
	struct env *env = quic_conn_owner(c);
	env->s.stream_opens++;
	if (bidi && env->mode == SRV_ECHO) {
		struct echo *e = calloc(1, sizeof *e);
		assert_non_null(e);
		quic_conn_stream_set_data(c, sid, e);
		assert_int_equal(
		    quic_conn_stream_set_manual_consume(c, sid, true), 0);
	}
}

static void srv_stream_data(struct quic_conn *c, int64_t sid,
                            const uint8_t *data, size_t len, bool fin)
{
	struct env *env = quic_conn_owner(c);
	struct echo *e = quic_conn_stream_get_data(c, sid);
	assert_ptr_equal(quic_conn_get_data(c), env);
	if (env->mode == SRV_CLOSE_ON_DATA) {
		quic_conn_close(c, 7, "server says bye");
		return;
	}
	if (env->mode == SRV_STOP_ON_DATA) {
		/* From inside packet processing: takes effect right after. */
		quic_server_close(&env->srv, 5, "going away", on_srv_closed);
		return;
	}
	if (e == NULL) {
		return;
	}
	if (e->len + len > e->cap) {
		size_t cap = e->cap ? e->cap : 65536;
		while (cap < e->len + len) {
			cap *= 2;
		}
		e->buf = realloc(e->buf, cap);
		assert_non_null(e->buf);
		e->cap = cap;
	}
	memcpy(e->buf + e->len, data, len);
	e->len += len;
	if (e->len > env->s.max_pending) {
		env->s.max_pending = e->len;
	}
	e->fin_seen |= fin;
	echo_flush(c, sid, e);
}

static void srv_stream_writable(struct quic_conn *c, int64_t sid)
{
	struct echo *e = quic_conn_stream_get_data(c, sid);
	if (e != NULL) {
		echo_flush(c, sid, e);
	}
}

static void srv_stream_reset(struct quic_conn *c, int64_t sid, uint64_t code)
{
	struct env *env = quic_conn_owner(c);
	env->s.stream_resets++;
	env->s.last_reset_code = code;
}

static void srv_stream_close(struct quic_conn *c, int64_t sid, uint64_t code)
{
	struct env *env = quic_conn_owner(c);
	struct echo *e = quic_conn_stream_get_data(c, sid);
	env->s.stream_closes++;
	env->s.last_stream_close_code = code;
	if (e != NULL) {
		free(e->buf);
		free(e);
		quic_conn_stream_set_data(c, sid, NULL);
	}
}

static void record_close(struct side *sd, const struct quic_close_info *info)
{
	sd->closes++;
	sd->last_origin = info->origin;
	sd->last_app = info->app;
	sd->last_code = info->error_code;
	snprintf(sd->last_reason, sizeof sd->last_reason, "%s", info->reason);
	snprintf(sd->last_msg, sizeof sd->last_msg, "%s", info->message);
}

static void srv_conn_close(struct quic_conn *c,
                           const struct quic_close_info *info)
{
	struct env *env = quic_conn_owner(c);
	record_close(&env->s, info);
	if (env->s.conn == c) {
		env->s.conn = NULL;
	}
}

/* ---- client owner ---- */

static struct cstream *cs_find(struct env *env, struct quic_conn *c,
                               int64_t sid)
{
	return quic_conn_stream_get_data(c, sid);
}

static void client_pump(struct quic_conn *c, struct cstream *s)
{
	struct env *env = quic_conn_owner(c);
	uint8_t buf[65536];
	while (!s->fin_sent) {
		size_t n = s->total - s->sent;
		if (n > env->chunk) {
			n = env->chunk;
		}
		for (size_t i = 0; i < n; i++) {
			buf[i] = pattern(s->seed, s->sent + i);
		}
		bool fin = s->sent + n == s->total;
		int rv = quic_conn_stream_write(c, s->id, buf, n, fin);
		if (rv == QUIC_EAGAIN) {
			return;
		}
		assert_int_equal(rv, 0);
		size_t q = quic_conn_stream_queued(c, s->id);
		if (q > env->c.max_stream_queued) {
			env->c.max_stream_queued = q;
		}
		s->sent += n;
		s->fin_sent = fin;
	}
}

static void cli_conn_open(struct quic_conn *c)
{
	struct env *env = quic_conn_owner(c);
	const char *alpn = quic_conn_alpn(c);
	env->c.opens++;
	env->c.had_alpn = alpn != NULL;
	snprintf(env->c.alpn, sizeof env->c.alpn, "%s", alpn ? alpn : "");
	for (int i = 0; i < env->streams_per_conn; i++) {
		struct cstream *s = &env->cs[env->ncs];
		int64_t sid;
		assert_int_equal(quic_conn_open_bidi_stream(c, &sid), 0);
		s->id = sid;
		s->seed = (uint32_t)env->ncs * 7919u + 1;
		s->total = env->bytes_per_stream;
		env->ncs++;
		quic_conn_stream_set_data(c, sid, s);
		client_pump(c, s);
	}
}

static void cli_stream_open(struct quic_conn *c, int64_t sid, bool bidi)
{
	struct env *env = quic_conn_owner(c);
	env->c.stream_opens++;
	assert_false(bidi);
	assert_true(sid & 0x3); /* server-initiated uni: id % 4 == 3 */
	/* Only the server sends on its uni streams. */
	assert_int_equal(
	    quic_conn_stream_write(c, sid, (const uint8_t *)"x", 1, false),
	    QUIC_EINVAL);
}

static void cli_stream_data(struct quic_conn *c, int64_t sid,
                            const uint8_t *data, size_t len, bool fin)
{
	struct env *env = quic_conn_owner(c);
	if ((sid & 0x3) == 0x3) {
		/* fan-out uni stream: compare with the shared buffer */
		size_t *off = quic_conn_stream_get_data(c, sid);
		if (off == NULL) {
			off = calloc(1, sizeof *off);
			assert_non_null(off);
			quic_conn_stream_set_data(c, sid, off);
		}
		if (env->stop_uni) {
			/* STOP_SENDING, as a Felix client dropping a
			 * subscription does. */
			quic_conn_stream_reset(c, sid, 77);
			return;
		}
		if (*off + len > env->fan->len ||
		    memcmp(env->fan->data + *off, data, len) != 0) {
			env->uni_bad++;
		}
		*off += len;
		env->uni_recvd += len;
		if (fin) {
			if (*off == env->fan->len) {
				env->uni_done++;
			} else {
				env->uni_bad++;
			}
		}
		return;
	}
	struct cstream *s = cs_find(env, c, sid);
	assert_non_null(s);
	for (size_t i = 0; i < len; i++) {
		if (data[i] != pattern(s->seed, s->recvd + i)) {
			s->bad = true;
			break;
		}
	}
	s->recvd += len;
	if (fin) {
		assert_int_equal(s->recvd, s->total);
		assert_false(s->bad);
		s->done = true;
		env->streams_done++;
	}
}

static void cli_stream_writable(struct quic_conn *c, int64_t sid)
{
	struct cstream *s = quic_conn_stream_get_data(c, sid);
	if (s != NULL && (sid & 0x3) == 0) {
		client_pump(c, s);
	}
}

static void cli_stream_close(struct quic_conn *c, int64_t sid, uint64_t code)
{
	struct env *env = quic_conn_owner(c);
	env->c.stream_closes++;
	if ((sid & 0x3) == 0x3) {
		free(quic_conn_stream_get_data(c, sid));
	}
}

static void cli_conn_close(struct quic_conn *c,
                           const struct quic_close_info *info)
{
	struct env *env = quic_conn_owner(c);
	record_close(&env->c, info);
	if (env->c.conn == c) {
		env->c.conn = NULL;
	}
}

/* ---- environment ---- */

static void on_tick(uv_timer_t *t)
{
	(void)t;
}

static void env_init(struct env *env)
{
	memset(env, 0, sizeof *env);
	assert_int_equal(uv_loop_init(&env->loop), 0);
	uv_timer_init(&env->loop, &env->tick);
	uv_timer_start(&env->tick, on_tick, 20, 20);
	log_init(&env->log, LOG_ERROR, LOG_FORMAT_TEXT);
	quic_limits_server_default(&env->srv_limits);
	env->chunk = 16384;
}

static void server_config(struct env *env, struct quic_server_config *cfg)
{
	static const struct quic_callbacks cb = {
	    .on_conn_open = srv_conn_open,
	    .on_stream_open = srv_stream_open,
	    .on_stream_data = srv_stream_data,
	    .on_stream_writable = srv_stream_writable,
	    .on_stream_reset = srv_stream_reset,
	    .on_stream_close = srv_stream_close,
	    .on_conn_close = srv_conn_close,
	};
	quic_server_config_init(cfg);
	cfg->port = 0;
	cfg->cert_file = g_cert;
	cfg->key_file = g_key;
	cfg->limits = env->srv_limits;
	cfg->callbacks = cb;
	cfg->owner = env;
}

static void server_start_cfg(struct env *env, struct quic_server_config *cfg)
{
	char err[256];
	int rv = quic_server_start(&env->srv, &env->loop, cfg, &env->log, err,
	                           sizeof err);
	if (rv != 0) {
		fail_msg("server start: %s", err);
	}
	env->srv_up = true;
}

static void server_start(struct env *env)
{
	struct quic_server_config cfg;
	server_config(env, &cfg);
	server_start_cfg(env, &cfg);
}

static void client_config(struct env *env, struct quic_client_config *cfg)
{
	static const struct quic_callbacks cb = {
	    .on_conn_open = cli_conn_open,
	    .on_stream_open = cli_stream_open,
	    .on_stream_data = cli_stream_data,
	    .on_stream_writable = cli_stream_writable,
	    .on_stream_close = cli_stream_close,
	    .on_conn_close = cli_conn_close,
	};
	quic_client_config_init(cfg);
	cfg->ca_file = g_cert;
	cfg->server_name = "localhost";
	cfg->limits.no_udp_gro = env->cli_no_gro;
	cfg->callbacks = cb;
	cfg->owner = env;
}

static void client_start_cfg(struct env *env, struct quic_client_config *cfg)
{
	char err[256];
	if (quic_client_init(&env->cli, &env->loop, cfg, err, sizeof err) !=
	    0) {
		fail_msg("client init: %s", err);
	}
	env->cli_up = true;
}

static void client_start(struct env *env)
{
	struct quic_client_config cfg;
	client_config(env, &cfg);
	client_start_cfg(env, &cfg);
}

static struct quic_conn *connect_to(struct env *env, const char *host)
{
	struct quic_conn *c = NULL;
	char err[256];
	if (quic_client_connect(&env->cli, host, quic_server_port(&env->srv),
	                        &c, err, sizeof err) != 0) {
		fail_msg("connect: %s", err);
	}
	env->c.conn = c;
	return c;
}

typedef bool (*pred_fn)(struct env *env);

static void run_until(struct env *env, pred_fn pred)
{
	uv_update_time(&env->loop);
	uint64_t deadline = uv_now(&env->loop) + DEADLINE_MS;
	while (!pred(env)) {
		uv_update_time(&env->loop);
		if (uv_now(&env->loop) > deadline) {
			fail_msg("timed out waiting (server opens %d closes "
			         "%d, client opens %d closes %d: %s)",
			         env->s.opens, env->s.closes, env->c.opens,
			         env->c.closes, env->c.last_msg);
		}
		uv_run(&env->loop, UV_RUN_ONCE);
	}
}

/* Runs the loop for `ms` milliseconds (for "nothing happens" checks). */
static void run_for(struct env *env, uint64_t ms)
{
	uv_update_time(&env->loop);
	uint64_t end = uv_now(&env->loop) + ms;
	while (uv_now(&env->loop) < end) {
		uv_run(&env->loop, UV_RUN_ONCE);
		uv_update_time(&env->loop);
	}
}

static void on_srv_closed(struct quic_server *s)
{
	struct env *env = container_of(s, struct env, srv);
	env->srv_closed = true;
}

static void on_cli_closed(struct quic_client *cl)
{
	struct env *env = container_of(cl, struct env, cli);
	env->cli_closed = true;
}

static bool both_closed(struct env *env)
{
	return (!env->srv_up || env->srv_closed) &&
	       (!env->cli_up || env->cli_closed);
}

static void env_close(struct env *env)
{
	if (env->cli_up) {
		quic_client_close(&env->cli, on_cli_closed);
	}
	if (env->srv_up) {
		quic_server_close(&env->srv, 0, "test over", on_srv_closed);
	}
	run_until(env, both_closed);
	uv_close((uv_handle_t *)&env->tick, NULL);
	uv_run(&env->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&env->loop), 0);
	free(env->cs);
	quic_sbuf_unref(env->fan);
}

/* ---- predicates ---- */

static bool client_open(struct env *env)
{
	return env->c.opens > 0 && env->s.opens > 0;
}

static bool client_closed(struct env *env)
{
	return env->c.closes > 0;
}

static bool both_sides_closed(struct env *env)
{
	return env->c.closes > 0 && env->s.closes > 0;
}

static bool all_streams_done(struct env *env)
{
	return env->ncs > 0 && env->streams_done == env->ncs;
}

/* ---- tests ---- */

static void handshake(const char *const *alpn, size_t nalpn,
                      const char *want_alpn)
{
	struct env env;
	struct quic_client_config cfg;
	env_init(&env);
	server_start(&env);
	client_config(&env, &cfg);
	cfg.alpn = alpn;
	cfg.alpn_count = nalpn;
	client_start_cfg(&env, &cfg);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	if (want_alpn != NULL) {
		assert_true(env.s.had_alpn);
		assert_string_equal(env.s.alpn, want_alpn);
		assert_string_equal(env.c.alpn, want_alpn);
	} else {
		assert_false(env.s.had_alpn);
		assert_false(env.c.had_alpn);
	}
	assert_int_equal(env.c.closes, 0);
	env_close(&env);
	/* Closing the client closed its connection on both sides. */
	assert_int_equal(env.c.closes, 1);
	assert_int_equal(env.s.closes, 1);
}

static void test_handshake_alpn(void **state)
{
	static const char *const alpn[] = {"felix/1"};
	(void)state;
	handshake(alpn, 1, "felix/1");
}

static void test_handshake_alpn_among_others(void **state)
{
	static const char *const alpn[] = {"h3", "felix/1"};
	(void)state;
	handshake(alpn, 2, "felix/1");
}

static void test_handshake_no_alpn(void **state)
{
	(void)state;
	/* The official Felix 0.5.0 client offers no ALPN at all. */
	handshake(NULL, 0, NULL);
}

static void test_wrong_alpn_refused(void **state)
{
	static const char *const alpn[] = {"h3"};
	struct env env;
	struct quic_client_config cfg;
	struct quic_server_stats st;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_config(&env, &cfg);
	cfg.alpn = alpn;
	cfg.alpn_count = 1;
	client_start_cfg(&env, &cfg);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_closed);
	assert_int_equal(env.c.opens, 0);
	assert_int_equal(env.s.opens, 0);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_PEER);
	assert_false(env.c.last_app);
	/* CRYPTO_ERROR carrying TLS alert 120 no_application_protocol */
	assert_int_equal(env.c.last_code, 0x100 + 120);
	if (strstr(env.c.last_msg, "no_application_protocol") == NULL) {
		fail_msg("message: %s", env.c.last_msg);
	}
	quic_server_get_stats(&env.srv, &st);
	assert_int_equal(st.handshakes_done, 0);
	env_close(&env);
	/* The server never showed the connection to its owner. */
	assert_int_equal(env.s.closes, 0);
}

static void expect_verify_failure(const char *ca, const char *name,
                                  const char *host)
{
	struct env env;
	struct quic_client_config cfg;
	env_init(&env);
	server_start(&env);
	client_config(&env, &cfg);
	cfg.ca_file = ca;
	cfg.server_name = name;
	client_start_cfg(&env, &cfg);
	connect_to(&env, host);
	run_until(&env, client_closed);
	assert_int_equal(env.c.opens, 0);
	assert_int_equal(env.s.opens, 0);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_LOCAL);
	assert_non_null(strstr(env.c.last_msg, "certificate"));
	env_close(&env);
}

static void test_wrong_ca_refused(void **state)
{
	(void)state;
	expect_verify_failure(g_wrong_cert, "localhost", "127.0.0.1");
}

static void test_wrong_name_refused(void **state)
{
	(void)state;
	expect_verify_failure(g_cert, "example.com", "127.0.0.1");
}

static void verify_ok(const char *name, const char *host)
{
	struct env env;
	struct quic_client_config cfg;
	env_init(&env);
	server_start(&env);
	client_config(&env, &cfg);
	cfg.server_name = name;
	client_start_cfg(&env, &cfg);
	connect_to(&env, host);
	run_until(&env, client_open);
	env_close(&env);
}

static void test_verify_sni_localhost(void **state)
{
	(void)state;
	verify_ok("localhost", "127.0.0.1");
	verify_ok(NULL, "localhost");
}

static void test_ipv6(void **state)
{
	struct env env;
	struct quic_server_config cfg;
	struct quic_client_config ccfg;
	char err[256];
	(void)state;
	env_init(&env);
	server_config(&env, &cfg);
	cfg.host = "::1";
	if (quic_server_start(&env.srv, &env.loop, &cfg, &env.log, err,
	                      sizeof err) != 0) {
		env_close(&env);
		skip(); /* no IPv6 loopback here */
	}
	env.srv_up = true;
	client_config(&env, &ccfg);
	ccfg.bind_host = "::";
	client_start_cfg(&env, &ccfg);
	connect_to(&env, "::1");
	run_until(&env, client_open);
	env_close(&env);
}

static void test_verify_ip_literal(void **state)
{
	(void)state;
	/* No SNI; the IP SAN 127.0.0.1 is checked. */
	verify_ok(NULL, "127.0.0.1");
}

/* Echo `streams` bidi streams of `bytes` each over `conns` connections. */
static void echo_run(int conns, int streams, size_t bytes, size_t chunk,
                     struct env *env)
{
	client_start(env);
	env->streams_per_conn = streams;
	env->bytes_per_stream = bytes;
	env->chunk = chunk;
	env->cs = calloc((size_t)(conns * streams), sizeof *env->cs);
	assert_non_null(env->cs);
	for (int i = 0; i < conns; i++) {
		connect_to(env, "127.0.0.1");
	}
	run_until(env, all_streams_done);
	assert_int_equal(env->c.opens, conns);
	assert_int_equal(env->s.opens, conns);
	for (int i = 0; i < env->ncs; i++) {
		assert_true(env->cs[i].done);
		assert_false(env->cs[i].bad);
		assert_int_equal(env->cs[i].recvd, bytes);
	}
	assert_int_equal(env->c.closes, 0);
}

static void test_echo_40_streams(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	server_start(&env);
	echo_run(5, 40, 20000, 4096, &env);
	assert_int_equal(env.s.stream_opens, 200);
	/* The server handed out more connection IDs than the first one (the
	 * client accepts 8), each routed to the connection. */
	struct quic_conn_stats st;
	quic_conn_get_stats(env.s.conn, &st);
	assert_true(st.cids >= 3);
	assert_true(st.smoothed_rtt_us > 0);
	env_close(&env);
	/* Finished streams closed, others closed with their connection. */
	assert_int_equal(env.s.stream_closes, 200);
}

static void test_large_transfer_backpressure(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	/* Small caps and windows so backpressure and flow control engage. */
	env.srv_limits.stream_send_buf_max = 256 * 1024;
	env.srv_limits.conn_send_buf_max = 1024 * 1024;
	env.srv_limits.initial_max_stream_data = 256 * 1024;
	env.srv_limits.max_stream_window = 512 * 1024;
	server_start(&env);
	/* 8 streams x 4 MiB up and the same echoed down: 64 MiB in all. */
	echo_run(1, 8, 4u << 20, 65536, &env);
	/* The server never held more unacknowledged data than its cap... */
	assert_true(env.s.max_stream_queued <= 256 * 1024);
	assert_true(env.s.max_stream_queued > 0);
	/* ...nor more unechoed input than the receive window it granted. */
	assert_true(env.s.max_pending <= 512 * 1024);
	/* The client's writes were held to its 1 MiB default cap. */
	assert_true(env.c.max_stream_queued <= 1u << 20);
	env_close(&env);
}

static void test_socket_busy(void **state)
{
	struct env env;
	struct quic_server_stats st;
	(void)state;
	env_init(&env);
	server_start(&env);
	/* A third of the sends find the socket full: the datagrams wait for
	 * it to drain (libuv polls for writability) and every transfer
	 * completes intact. */
	g_eagain_every = 3;
	g_send_calls = 0;
	echo_run(2, 4, 1u << 20, 65536, &env);
	g_eagain_every = 0;
	quic_server_get_stats(&env.srv, &st);
	assert_true(st.send_blocked > 0);
	env_close(&env);
}

/* Whether this kernel lets a UDP socket receive coalesced datagrams. */
static bool kernel_has_udp_gro(void)
{
	int one = 1, fd = socket(AF_INET, SOCK_DGRAM, 0);
	bool ok;
	assert_true(fd >= 0);
	ok = setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0;
	close(fd);
	return ok;
}

static void test_gro_receive(void **state)
{
	struct env env;
	struct quic_endpoint_stats ss, cs;
	(void)state;
	env_init(&env);
	server_start(&env);
	/* 4 streams x 2 MiB each way in 64 KiB writes: both sides send
	 * with UDP GSO, and with UDP GRO each receiver gets a sender's burst
	 * as one buffer that it splits into the datagrams (the last of a
	 * burst often shorter). echo_run checks every byte. */
	echo_run(1, 4, 2u << 20, 65536, &env);
	quic_endpoint_get_stats(env.srv.ep, &ss);
	quic_endpoint_get_stats(env.cli.ep, &cs);
	assert_true(ss.datagrams_coalesced <= ss.datagrams_in);
	assert_true(cs.datagrams_coalesced <= cs.datagrams_in);
	if (kernel_has_udp_gro()) {
		assert_true(ss.gro_buffers > 0);
		assert_true(ss.datagrams_coalesced > ss.gro_buffers);
		assert_true(cs.gro_buffers > 0);
		assert_true(cs.datagrams_coalesced > cs.gro_buffers);
	} else {
		assert_int_equal(ss.gro_buffers, 0);
		assert_int_equal(cs.gro_buffers, 0);
	}
	env_close(&env);
}

static void test_gro_fallback(void **state)
{
	struct env env;
	struct quic_endpoint_stats ss, cs;
	(void)state;
	env_init(&env);
	/* Both sides receive datagrams one by one (as where the kernel has
	 * no UDP_GRO): the same transfer completes intact. */
	env.srv_limits.no_udp_gro = true;
	env.cli_no_gro = true;
	server_start(&env);
	echo_run(1, 4, 2u << 20, 65536, &env);
	quic_endpoint_get_stats(env.srv.ep, &ss);
	quic_endpoint_get_stats(env.cli.ep, &cs);
	assert_int_equal(ss.gro_buffers, 0);
	assert_int_equal(ss.datagrams_coalesced, 0);
	assert_int_equal(cs.gro_buffers, 0);
	assert_true(ss.datagrams_in > 1000);
	assert_true(cs.datagrams_in > 1000);
	env_close(&env);
}

static void test_gro_one_side(void **state)
{
	struct env env;
	struct quic_endpoint_stats ss, cs;
	(void)state;
	env_init(&env);
	/* Only the server coalesces; the socket busy a third of the time,
	 * so bursts also leave in pieces from the pending buffer. */
	env.cli_no_gro = true;
	server_start(&env);
	g_eagain_every = 3;
	g_send_calls = 0;
	echo_run(2, 2, 1u << 20, 65536, &env);
	g_eagain_every = 0;
	quic_endpoint_get_stats(env.srv.ep, &ss);
	quic_endpoint_get_stats(env.cli.ep, &cs);
	assert_int_equal(cs.gro_buffers, 0);
	assert_true(ss.send_blocked > 0);
	if (kernel_has_udp_gro()) {
		assert_true(ss.gro_buffers > 0);
	}
	env_close(&env);
}

static bool fanout_done(struct env *env)
{
	return env->uni_done == 10 && env->fan->refs == 1;
}

/* A write made in a prepare callback that runs after the transport's own
 * prepare (as a reply written when a Raft commit is applied): the loop must
 * not block in poll with it unsent, waiting for a timer or a datagram. */
struct late_write {
	uv_prepare_t h; /* h.data = this */
	struct env *env;
	bool armed;
	int poll_timeout;
};

static void on_late_prepare(uv_prepare_t *h)
{
	struct late_write *lw = h->data;
	struct env *env = lw->env;
	struct cstream *s = &env->cs[0];
	int64_t sid;
	if (!lw->armed) {
		return;
	}
	lw->armed = false;
	assert_int_equal(quic_conn_open_bidi_stream(env->c.conn, &sid), 0);
	s->id = sid;
	s->seed = 4242;
	s->total = 100;
	env->ncs = 1;
	quic_conn_stream_set_data(env->c.conn, sid, s);
	client_pump(env->c.conn, s);
	/* What the loop is about to block for: 0 means it polls without
	 * waiting and the check handle sends the bytes this turn. */
	lw->poll_timeout = uv_backend_timeout(h->loop);
}

static void test_write_after_prepare_not_delayed(void **state)
{
	struct env env;
	struct late_write lw = {.poll_timeout = -2};
	(void)state;
	env_init(&env);
	/* Started before the endpoints' prepare handles, so libuv runs it
	 * after them (it runs the last started first). */
	lw.env = &env;
	lw.h.data = &lw;
	uv_prepare_init(&env.loop, &lw.h);
	uv_prepare_start(&lw.h, on_late_prepare);
	uv_unref((uv_handle_t *)&lw.h);
	env.cs = calloc(1, sizeof *env.cs);
	assert_non_null(env.cs);
	server_start(&env);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	lw.armed = true;
	run_until(&env, all_streams_done);
	assert_int_equal(lw.poll_timeout, 0);
	assert_true(env.cs[0].done);
	assert_false(env.cs[0].bad);
	uv_close((uv_handle_t *)&lw.h, NULL);
	env_close(&env);
}

static void test_uni_fanout_shared_buffer(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	env.mode = SRV_FANOUT;
	env.fan = quic_sbuf_new(300000);
	assert_non_null(env.fan);
	for (size_t i = 0; i < env.fan->len; i++) {
		env.fan->data[i] = pattern(99, i);
	}
	server_start(&env);
	client_start(&env);
	for (int i = 0; i < 10; i++) {
		connect_to(&env, "127.0.0.1");
	}
	/* Every connection got the bytes, and every reference taken for them
	 * was dropped once acknowledged: the buffer was never copied. */
	run_until(&env, fanout_done);
	assert_int_equal(env.uni_bad, 0);
	assert_int_equal(env.c.stream_opens, 10);
	assert_int_equal(env.uni_recvd, 10 * env.fan->len);
	assert_true(env.fan_max_refs >= 2);
	env_close(&env);
}

static bool uni_stopped(struct env *env)
{
	return env->s.stream_closes > 0 && env->fan->refs == 1;
}

static void test_uni_stop_sending(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	env.mode = SRV_FANOUT;
	env.stop_uni = true;
	env.fan = quic_sbuf_new(4u << 20);
	assert_non_null(env.fan);
	memset(env.fan->data, 1, env.fan->len);
	server_start(&env);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	/* The server learns that the stream is gone, with the reader's
	 * code, and drops what it still held of the buffer. */
	run_until(&env, uni_stopped);
	assert_int_equal(env.s.last_stream_close_code, 77);
	assert_int_equal(env.s.closes, 0);
	assert_int_equal(quic_conn_queued(env.s.conn), 0);
	env_close(&env);
}

static void test_idle_timeout(void **state)
{
	struct env env;
	struct quic_client_config cfg;
	(void)state;
	env_init(&env);
	env.srv_limits.idle_timeout_ms = 300;
	env.srv_limits.keepalive_ms = 0;
	server_start(&env);
	client_config(&env, &cfg);
	cfg.limits.idle_timeout_ms = 300;
	client_start_cfg(&env, &cfg);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	run_until(&env, both_sides_closed);
	assert_int_equal(env.s.last_origin, QUIC_CLOSE_IDLE);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_IDLE);
	assert_int_equal(quic_server_conn_count(&env.srv), 0);
	env_close(&env);
}

static void test_keepalive_keeps_open(void **state)
{
	struct env env;
	struct quic_client_config cfg;
	(void)state;
	env_init(&env);
	env.srv_limits.idle_timeout_ms = 1500;
	env.srv_limits.keepalive_ms = 100;
	server_start(&env);
	client_config(&env, &cfg);
	cfg.limits.idle_timeout_ms = 1500;
	client_start_cfg(&env, &cfg);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	/* Twice the idle timeout without a word from the client: the
	 * server's PINGs (and their ACKs) keep both sides alive. The margin
	 * (PING every 100 ms, idle 1.5 s) only fails on a stalled machine. */
	run_for(&env, 3000);
	assert_int_equal(env.c.closes, 0);
	assert_int_equal(env.s.closes, 0);
	env_close(&env);
}

static void test_close_with_reason_client(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_start(&env);
	struct quic_conn *c = connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	quic_conn_close(c, 42, "bye");
	run_until(&env, both_sides_closed);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_LOCAL);
	assert_int_equal(env.s.last_origin, QUIC_CLOSE_PEER);
	assert_true(env.s.last_app);
	assert_int_equal(env.s.last_code, 42);
	assert_string_equal(env.s.last_reason, "bye");
	env_close(&env);
}

static void test_close_with_reason_server(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	env.mode = SRV_CLOSE_ON_DATA;
	server_start(&env);
	env.streams_per_conn = 1;
	env.bytes_per_stream = 10;
	env.cs = calloc(1, sizeof *env.cs);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	run_until(&env, both_sides_closed);
	assert_int_equal(env.s.last_origin, QUIC_CLOSE_LOCAL);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_PEER);
	assert_true(env.c.last_app);
	assert_int_equal(env.c.last_code, 7);
	assert_string_equal(env.c.last_reason, "server says bye");
	/* The client's stream was closed with its connection. */
	assert_int_equal(env.c.stream_closes, 1);
	env_close(&env);
}

static bool server_gone(struct env *env)
{
	return env->srv_closed && env->c.closes > 0;
}

static void test_server_shutdown_from_callback(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	env.mode = SRV_STOP_ON_DATA;
	server_start(&env);
	env.streams_per_conn = 1;
	env.bytes_per_stream = 10;
	env.cs = calloc(1, sizeof *env.cs);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	run_until(&env, server_gone);
	assert_int_equal(env.s.closes, 1);
	assert_int_equal(env.s.last_origin, QUIC_CLOSE_LOCAL);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_PEER);
	assert_int_equal(env.c.last_code, 5);
	assert_string_equal(env.c.last_reason, "going away");
	env_close(&env);
}

static void test_server_shutdown_closes_clients(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	quic_server_close(&env.srv, 3, "shutting down", on_srv_closed);
	run_until(&env, client_closed);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_PEER);
	assert_int_equal(env.c.last_code, 3);
	assert_string_equal(env.c.last_reason, "shutting down");
	assert_int_equal(env.s.closes, 1);
	env_close(&env);
}

static bool fifty_done(struct env *env)
{
	return env->streams_done == 50;
}

static void test_many_connections(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_start(&env);
	env.streams_per_conn = 1;
	env.bytes_per_stream = 3000;
	env.cs = calloc(50, sizeof *env.cs);
	for (int i = 0; i < 50; i++) {
		connect_to(&env, "127.0.0.1");
	}
	run_until(&env, fifty_done);
	assert_int_equal(env.s.opens, 50);
	assert_int_equal(quic_server_conn_count(&env.srv), 50);
	env_close(&env);
	assert_int_equal(env.s.closes, 50);
	assert_int_equal(env.c.closes, 50);
}

static bool two_open_one_closed(struct env *env)
{
	return env->c.opens == 2 && env->c.closes == 1;
}

static void test_max_connections(void **state)
{
	struct env env;
	struct quic_server_config cfg;
	struct quic_server_stats st;
	(void)state;
	env_init(&env);
	server_config(&env, &cfg);
	cfg.max_connections = 2;
	server_start_cfg(&env, &cfg);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	connect_to(&env, "127.0.0.1");
	run_until(&env, two_open_one_closed);
	assert_int_equal(env.c.last_origin, QUIC_CLOSE_PEER);
	assert_int_equal(env.c.last_code, 0x2); /* CONNECTION_REFUSED */
	quic_server_get_stats(&env.srv, &st);
	assert_true(st.conns_refused >= 1);
	env_close(&env);
}

static void test_retry(void **state)
{
	struct env env;
	struct quic_server_config cfg;
	struct quic_server_stats st;
	(void)state;
	env_init(&env);
	server_config(&env, &cfg);
	cfg.retry = true;
	server_start_cfg(&env, &cfg);
	env.streams_per_conn = 2;
	env.bytes_per_stream = 5000;
	env.cs = calloc(2, sizeof *env.cs);
	client_start(&env);
	connect_to(&env, "127.0.0.1");
	run_until(&env, all_streams_done);
	quic_server_get_stats(&env.srv, &st);
	assert_int_equal(st.retries_sent, 1);
	assert_int_equal(st.conns_accepted, 1);
	env_close(&env);
}

static bool server_saw_stream(struct env *env)
{
	return env->s.stream_opens > 0;
}

static bool reset_seen(struct env *env)
{
	return env->s.stream_resets > 0 && env->s.stream_closes > 0;
}

static void test_stream_reset(void **state)
{
	struct env env;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_start(&env);
	struct quic_conn *c = connect_to(&env, "127.0.0.1");
	run_until(&env, client_open);
	int64_t sid;
	assert_int_equal(quic_conn_open_bidi_stream(c, &sid), 0);
	assert_int_equal(
	    quic_conn_stream_write(c, sid, (const uint8_t *)"abc", 3, false),
	    0);
	run_until(&env, server_saw_stream);
	assert_int_equal(quic_conn_stream_reset(c, sid, 9), 0);
	run_until(&env, reset_seen);
	assert_int_equal(env.s.last_reset_code, 9);
	/* Writes after a reset are refused. */
	assert_int_equal(
	    quic_conn_stream_write(c, sid, (const uint8_t *)"x", 1, false),
	    QUIC_ESTREAM);
	env_close(&env);
}

static void test_api_errors(void **state)
{
	struct env env;
	int64_t sid;
	(void)state;
	env_init(&env);
	server_start(&env);
	client_start(&env);
	struct quic_conn *c = connect_to(&env, "127.0.0.1");
	/* No streams before the handshake is done. */
	assert_int_equal(quic_conn_open_bidi_stream(c, &sid), QUIC_ELIMIT);
	run_until(&env, client_open);
	assert_int_equal(
	    quic_conn_stream_write(c, 1000, (const uint8_t *)"a", 1, false),
	    QUIC_ESTREAM);
	assert_int_equal(quic_conn_open_bidi_stream(c, &sid), 0);
	assert_true(quic_conn_stream_writable(c, sid, 100));
	assert_int_equal(
	    quic_conn_stream_write(c, sid, (const uint8_t *)"a", 1, true), 0);
	/* Finished: nothing more goes on it. */
	assert_false(quic_conn_stream_writable(c, sid, 1));
	assert_int_equal(
	    quic_conn_stream_write(c, sid, (const uint8_t *)"b", 1, false),
	    QUIC_ESTREAM);
	assert_int_equal(quic_conn_stream_write_sbuf(c, sid, NULL, 0, 1, false),
	                 QUIC_EINVAL);
	assert_int_equal(quic_conn_queued(c), 1);
	assert_true(quic_conn_is_server(c) == false);
	assert_non_null(quic_conn_peer_addr(c));
	quic_conn_close(c, 1, "first");
	quic_conn_close(c, 2, "second"); /* ignored */
	/* Closing: writes refused at once. */
	assert_int_equal(quic_conn_open_bidi_stream(c, &sid), QUIC_ECLOSED);
	run_until(&env, both_sides_closed);
	assert_int_equal(env.s.last_code, 1);
	assert_string_equal(env.s.last_reason, "first");
	assert_string_equal(quic_strerror(QUIC_EAGAIN), "send buffer full");
	env_close(&env);
}

/* A raw UDP socket talking to the server outside QUIC. */
struct raw {
	int fd;
	struct sockaddr_in to;
	uint8_t reply[2048];
	ssize_t got;
};

static struct raw *g_raw;

static bool raw_reply(struct env *env)
{
	(void)env;
	g_raw->got =
	    recv(g_raw->fd, g_raw->reply, sizeof g_raw->reply, MSG_DONTWAIT);
	return g_raw->got > 0;
}

static void raw_exchange(struct env *env, struct raw *r, const uint8_t *pkt,
                         size_t len)
{
	r->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(r->fd >= 0);
	memset(&r->to, 0, sizeof r->to);
	r->to.sin_family = AF_INET;
	r->to.sin_port = htons(quic_server_port(&env->srv));
	r->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(
	    sendto(r->fd, pkt, len, 0, (struct sockaddr *)&r->to, sizeof r->to),
	    (ssize_t)len);
	g_raw = r;
	run_until(env, raw_reply);
	close(r->fd);
}

static void test_version_negotiation(void **state)
{
	struct env env;
	struct raw r;
	uint8_t pkt[1200];
	(void)state;
	env_init(&env);
	server_start(&env);
	memset(pkt, 0, sizeof pkt);
	pkt[0] = 0xc0; /* long header, Initial */
	pkt[1] = 0x1a; /* version 0x1a2a3a4a: unknown */
	pkt[2] = 0x2a;
	pkt[3] = 0x3a;
	pkt[4] = 0x4a;
	pkt[5] = 8; /* DCID */
	memset(pkt + 6, 0x11, 8);
	pkt[14] = 8; /* SCID */
	memset(pkt + 15, 0x22, 8);
	raw_exchange(&env, &r, pkt, sizeof pkt);
	/* Version Negotiation: long header, version 0, CIDs swapped, QUIC v1
	 * among the versions. */
	assert_true(r.got >= 7 + 8 + 8 + 8);
	assert_true(r.reply[0] & 0x80);
	assert_memory_equal(r.reply + 1, "\0\0\0\0", 4);
	assert_int_equal(r.reply[5], 8);
	assert_memory_equal(r.reply + 6, pkt + 15, 8);
	bool v1 = false;
	for (ssize_t i = 23; i + 4 <= r.got; i += 4) {
		v1 |= memcmp(r.reply + i, "\0\0\0\1", 4) == 0;
	}
	assert_true(v1);
	env_close(&env);
}

static void test_stateless_reset(void **state)
{
	struct env env;
	struct raw r;
	uint8_t pkt[100];
	struct quic_server_stats st;
	(void)state;
	env_init(&env);
	server_start(&env);
	/* A short-header packet for a connection the server never had. */
	for (size_t i = 0; i < sizeof pkt; i++) {
		pkt[i] = (uint8_t)(i * 37 + 5);
	}
	pkt[0] = 0x41;
	raw_exchange(&env, &r, pkt, sizeof pkt);
	/* A stateless reset looks like a short header packet and is smaller
	 * than what triggered it. */
	assert_true(r.got < (ssize_t)sizeof pkt);
	assert_true(r.got >= 21);
	assert_int_equal(r.reply[0] & 0xc0, 0x40);
	quic_server_get_stats(&env.srv, &st);
	assert_int_equal(st.stateless_resets, 1);
	env_close(&env);
}

static void test_sbuf(void **state)
{
	(void)state;
	uint8_t *p = malloc(5);
	memcpy(p, "hello", 5);
	struct quic_sbuf *b = quic_sbuf_take(p, 5);
	assert_non_null(b);
	quic_sbuf_ref(b);
	assert_int_equal(b->refs, 2);
	quic_sbuf_unref(b);
	quic_sbuf_unref(b);
	b = quic_sbuf_copy("abc", 3);
	assert_memory_equal(b->data, "abc", 3);
	quic_sbuf_unref(b);
}

static void test_bad_config(void **state)
{
	struct env env;
	struct quic_server_config cfg;
	struct quic_client_config ccfg;
	char err[256];
	(void)state;
	env_init(&env);
	server_config(&env, &cfg);
	cfg.cert_file = "/nonexistent/cert.pem";
	assert_int_equal(
	    quic_server_start(&env.srv, &env.loop, &cfg, NULL, err, sizeof err),
	    -1);
	assert_non_null(strstr(err, "/nonexistent/cert.pem"));
	server_config(&env, &cfg);
	cfg.host = "not-an-address";
	assert_int_equal(
	    quic_server_start(&env.srv, &env.loop, &cfg, NULL, err, sizeof err),
	    -1);
	assert_non_null(strstr(err, "not-an-address"));
	/* A port already taken. */
	server_start(&env);
	struct quic_server other;
	server_config(&env, &cfg);
	cfg.port = quic_server_port(&env.srv);
	assert_int_equal(
	    quic_server_start(&other, &env.loop, &cfg, NULL, err, sizeof err),
	    -1);
	assert_non_null(strstr(err, "cannot bind"));
	client_config(&env, &ccfg);
	ccfg.ca_file = "/nonexistent/ca.pem";
	assert_int_equal(
	    quic_client_init(&env.cli, &env.loop, &ccfg, err, sizeof err), -1);
	assert_non_null(strstr(err, "/nonexistent/ca.pem"));
	env_close(&env);
}

static int group_setup(void **state)
{
	char err[256];
	const char *tmp = getenv("TMPDIR");
	(void)state;
	snprintf(g_dir, sizeof g_dir, "%s/test_quic.XXXXXX",
	         tmp ? tmp : "/tmp");
	if (mkdtemp(g_dir) == NULL) {
		return -1;
	}
	snprintf(g_cert, sizeof g_cert, "%s/cert.pem", g_dir);
	snprintf(g_key, sizeof g_key, "%s/key.pem", g_dir);
	snprintf(g_wrong_cert, sizeof g_wrong_cert, "%s/other.pem", g_dir);
	snprintf(g_wrong_key, sizeof g_wrong_key, "%s/other.key", g_dir);
	if (devcert_ensure(g_cert, g_key, err, sizeof err) != 0 ||
	    devcert_ensure(g_wrong_cert, g_wrong_key, err, sizeof err) != 0) {
		fprintf(stderr, "devcert: %s\n", err);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	unlink(g_cert);
	unlink(g_key);
	unlink(g_wrong_cert);
	unlink(g_wrong_key);
	rmdir(g_dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sbuf),
	    cmocka_unit_test(test_bad_config),
	    cmocka_unit_test(test_handshake_alpn),
	    cmocka_unit_test(test_handshake_alpn_among_others),
	    cmocka_unit_test(test_handshake_no_alpn),
	    cmocka_unit_test(test_wrong_alpn_refused),
	    cmocka_unit_test(test_wrong_ca_refused),
	    cmocka_unit_test(test_wrong_name_refused),
	    cmocka_unit_test(test_verify_sni_localhost),
	    cmocka_unit_test(test_verify_ip_literal),
	    cmocka_unit_test(test_ipv6),
	    cmocka_unit_test(test_echo_40_streams),
	    cmocka_unit_test(test_large_transfer_backpressure),
	    cmocka_unit_test(test_socket_busy),
	    cmocka_unit_test(test_gro_receive),
	    cmocka_unit_test(test_gro_fallback),
	    cmocka_unit_test(test_gro_one_side),
	    cmocka_unit_test(test_write_after_prepare_not_delayed),
	    cmocka_unit_test(test_uni_fanout_shared_buffer),
	    cmocka_unit_test(test_uni_stop_sending),
	    cmocka_unit_test(test_idle_timeout),
	    cmocka_unit_test(test_keepalive_keeps_open),
	    cmocka_unit_test(test_close_with_reason_client),
	    cmocka_unit_test(test_close_with_reason_server),
	    cmocka_unit_test(test_server_shutdown_closes_clients),
	    cmocka_unit_test(test_server_shutdown_from_callback),
	    cmocka_unit_test(test_many_connections),
	    cmocka_unit_test(test_max_connections),
	    cmocka_unit_test(test_retry),
	    cmocka_unit_test(test_stream_reset),
	    cmocka_unit_test(test_api_errors),
	    cmocka_unit_test(test_version_negotiation),
	    cmocka_unit_test(test_stateless_reset),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
