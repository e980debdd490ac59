/* The RESP listener (docs/resp.md): TCP and TLS listeners on the reactor's
 * loop, one connection per client, its query buffer parsed by
 * wire/resp_parse.h, its commands run (resp_cmd.c) and answered in the
 * order they came, the query and output buffers bounded (a client past
 * either limit is closed, as Redis closes it). */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/resp/resp_internal.h"
#include "wire/resp_reply.h"

#define READ_CHUNK 65536u

static void conn_process(struct resp_conn *c);
static void conn_close(struct resp_conn *c);

uint64_t resp_now_ms(const struct resp_server *s)
{
	return uv_now(s->loop);
}

static void on_listener_closed(uv_handle_t *h);

static void server_maybe_finish(struct resp_server *s)
{
	if (!s->closing) {
		return;
	}
	/* The flush handle sends closing connections' last replies: it
	 * goes with the last connection. */
	if (s->n_conns == 0 && s->flush.data == s &&
	    !uv_is_closing((uv_handle_t *)&s->flush)) {
		uv_close((uv_handle_t *)&s->flush, on_listener_closed);
		uv_close((uv_handle_t *)&s->wake, on_listener_closed);
	}
	if (s->handles > 0 || s->n_conns > 0) {
		return;
	}
	if (s->close_cb != NULL) {
		resp_server_close_cb cb = s->close_cb;
		s->close_cb = NULL;
		cb(s->close_data);
	}
	if (s->ops == 0) {
		while (s->req_pool != NULL) {
			struct resp_req *r = s->req_pool;
			s->req_pool = r->next;
			wbuf_free(&r->out);
			free(r);
		}
		wbuf_free(&s->out);
		tls_ctx_free(s->tls_ctx);
		free(s);
	}
}

static void conn_maybe_free(struct resp_conn *c)
{
	struct resp_server *s = c->srv;
	if (!c->handle_gone || c->head != NULL) {
		return;
	}
	resp_multi_conn_free(c);
	free(c->q);
	free(c->argv);
	free(c->scratch);
	tls_session_free(c->tls);
	free(c);
	s->n_conns--;
	server_maybe_finish(s);
}

static void on_conn_closed(uv_handle_t *h)
{
	struct resp_conn *c = h->data;
	struct resp_server *s = c->srv;
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		s->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	c->prev = c->next = NULL;
	c->handle_gone = true;
	conn_maybe_free(c);
}

static void conn_close(struct resp_conn *c)
{
	if (c->closed) {
		return;
	}
	c->closed = true;
	c->reading = false;
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void resp_conn_kill(struct resp_conn *c, const char *why)
{
	log_info(c->srv->log, "resp", "closing client id=%llu addr=%s: %s",
	         (unsigned long long)c->id, c->peer, why);
	conn_close(c);
}

/* A write libuv finishes later: the bytes the socket did not take at
 * once, copied. */
struct wreq {
	uv_write_t w;
	struct resp_conn *c;
	size_t len;
	uint8_t data[];
};

static void on_written(uv_write_t *w, int status)
{
	struct wreq *q = w->data;
	struct resp_conn *c = q->c;
	c->out_bytes -= q->len;
	free(q);
	if (status < 0) {
		conn_close(c);
		return;
	}
	if (c->quit && c->head == NULL && c->out_bytes == 0) {
		conn_close(c);
	}
}

/* Writes `data` (borrowed) to the socket. */
static void raw_write(struct resp_conn *c, const uint8_t *data, size_t len)
{
	struct wreq *q;
	uv_buf_t b;
	if (len == 0) {
		return;
	}
	/* Replies usually fit the socket buffer: written now, without a
	 * write request (libuv's uv_write of a reply that goes out at once
	 * still costs the loop a completion pass). Only with nothing queued
	 * before it, so that order holds. */
	if (c->out_bytes == 0) {
		b = uv_buf_init((char *)data, (unsigned)len);
		int tw = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
		if (tw > 0 && (size_t)tw == len) {
			if (c->quit && c->head == NULL) {
				conn_close(c);
			}
			return;
		}
		if (tw > 0) {
			data += tw;
			len -= (size_t)tw;
		}
		/* Otherwise (EAGAIN, or an error uv_write reports) all of
		 * it goes the usual way. */
	}
	q = malloc(sizeof *q + len);
	if (q == NULL) {
		resp_conn_kill(c, "out of memory");
		return;
	}
	q->c = c;
	q->len = len;
	q->w.data = q;
	memcpy(q->data, data, len);
	b = uv_buf_init((char *)q->data, (unsigned)len);
	c->out_bytes += len;
	if (uv_write(&q->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
		c->out_bytes -= len;
		free(q);
		conn_close(c);
	}
}

static void tls_flush(struct resp_conn *c)
{
	uint8_t *data = NULL;
	size_t len = 0;
	if (tls_pending(c->tls) == 0) {
		return;
	}
	if (tls_take(c->tls, &data, &len) != 0) {
		resp_conn_kill(c, "out of memory");
		return;
	}
	raw_write(c, data, len);
	free(data);
}

/* Plaintext out: through the TLS session when there is one. */
static void conn_send(struct resp_conn *c, struct wbuf *b)
{
	if (b->len == 0 || c->closed) {
		return;
	}
	if (c->tls != NULL) {
		if (tls_write(c->tls, b->data, b->len) != 0) {
			resp_conn_kill(c, "TLS write failed");
			return;
		}
		tls_flush(c);
		return;
	}
	raw_write(c, b->data, b->len);
}

static void conn_update_reading(struct resp_conn *c);

/* Sends the replies of the finished commands at the head, in order. */
static void conn_flush(struct resp_conn *c)
{
	struct wbuf *out = &c->srv->out;
	bool resume = c->inflight >= RESP_MAX_INFLIGHT;
	wbuf_reset(out);
	while (c->head != NULL && c->head->done) {
		struct resp_req *r = c->head;
		c->head = r->next;
		if (c->head == NULL) {
			c->tail = NULL;
		}
		if (!c->closed) {
			wbuf_append(out, r->out.data, r->out.len);
		}
		c->inflight--;
		resp_req_release(r);
	}
	if (out->oom) {
		wbuf_free(out);
		resp_conn_kill(c, "out of memory");
	} else {
		conn_send(c, out);
	}
	if (out->cap > RESP_KEEP_BYTES) {
		wbuf_free(out); /* a large reply's storage is not kept */
	}
	if (c->closed) {
		conn_maybe_free(c);
		return;
	}
	if (c->out_bytes > c->srv->cfg.max_output_bytes) {
		c->srv->output_kills++;
		resp_conn_kill(c, "output buffer over resp-max-output-bytes "
		                  "(a slow reader)");
		return;
	}
	if (c->quit && c->head == NULL && c->out_bytes == 0) {
		conn_close(c);
		return;
	}
	if (resume && c->inflight < RESP_MAX_INFLIGHT) {
		conn_process(c);
		conn_update_reading(c);
	}
}

static void on_wake(uv_idle_t *h)
{
	(void)h; /* only keeps the loop from blocking before the flush */
}

void resp_req_done(struct resp_req *r)
{
	struct resp_conn *c = r->c;
	r->done = true;
	/* While dirty the head is a finished request, so the connection is
	 * not freed before the flush. */
	if (c->head == r && !c->dirty) {
		c->dirty = true;
		c->dnext = c->srv->dirty;
		c->srv->dirty = c;
		if (!uv_is_active((uv_handle_t *)&c->srv->wake) &&
		    !uv_is_closing((uv_handle_t *)&c->srv->wake)) {
			uv_idle_start(&c->srv->wake, on_wake);
		}
	}
}

static void on_flush(uv_check_t *h)
{
	struct resp_server *s = h->data;
	while (s->dirty != NULL) {
		struct resp_conn *c = s->dirty;
		s->dirty = c->dnext;
		c->dirty = false;
		c->dnext = NULL;
		conn_flush(c);
	}
	uv_idle_stop(&s->wake);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct resp_conn *c = h->data;
	(void)suggested;
	if (c->tls != NULL) {
		*buf = uv_buf_init((char *)tls_ctx_read_buf(c->srv->tls_ctx),
		                   TLS_READ_BUF);
		return;
	}
	if (c->qcap - c->qlen < READ_CHUNK) {
		size_t cap = c->qcap ? c->qcap : READ_CHUNK;
		while (cap - c->qlen < READ_CHUNK) {
			cap *= 2;
		}
		uint8_t *q = realloc(c->q, cap);
		if (q == NULL) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		c->q = q;
		c->qcap = cap;
	}
	*buf =
	    uv_buf_init((char *)c->q + c->qlen, (unsigned)(c->qcap - c->qlen));
}

/* Decrypts what the session holds into the query buffer. */
static int tls_receive(struct resp_conn *c, const uint8_t *p, size_t n)
{
	char err[160];
	if (tls_feed(c->tls, p, n, err, sizeof err) != 0) {
		tls_flush(c);
		log_info(c->srv->log, "resp", "TLS from %s refused: %s",
		         c->peer, err);
		return -1;
	}
	for (;;) {
		size_t got = 0;
		int rv;
		if (c->qcap - c->qlen < 16384) {
			size_t cap = c->qcap ? c->qcap * 2 : READ_CHUNK;
			uint8_t *q = realloc(c->q, cap);
			if (q == NULL) {
				return -1;
			}
			c->q = q;
			c->qcap = cap;
		}
		rv = tls_read(c->tls, c->q + c->qlen, c->qcap - c->qlen, &got,
		              err, sizeof err);
		if (rv != 0) {
			return -1;
		}
		if (got == 0) {
			break;
		}
		c->qlen += got;
	}
	tls_flush(c);
	return 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct resp_conn *c = st->data;
	if (nread < 0) {
		conn_close(c);
		return;
	}
	if (nread == 0) {
		return;
	}
	if (c->tls != NULL) {
		if (tls_receive(c, (const uint8_t *)buf->base, (size_t)nread) !=
		    0) {
			conn_close(c);
			return;
		}
	} else {
		c->qlen += (size_t)nread;
	}
	c->last_ms = resp_now_ms(c->srv);
	conn_process(c);
	if (!c->closed && c->qlen > c->srv->cfg.max_query_bytes) {
		c->srv->query_kills++;
		resp_conn_kill(c, "query buffer over resp-max-query-bytes");
		return;
	}
	conn_update_reading(c);
}

static void conn_update_reading(struct resp_conn *c)
{
	bool want = !c->closed && !c->quit && !c->held &&
	            c->inflight < RESP_MAX_INFLIGHT;
	if (want == c->reading) {
		return;
	}
	if (want) {
		c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc,
		                           on_read) == 0;
	} else {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
}

void resp_conn_unhold(struct resp_conn *c)
{
	c->held = false;
	if (!c->closed) {
		conn_process(c);
		conn_update_reading(c);
	}
}

void resp_req_recycle(struct resp_req *r)
{
	struct resp_server *s = r->c->srv;
	if (s->n_req_pool >= RESP_MAX_POOL || r->out.cap > RESP_KEEP_BYTES) {
		wbuf_free(&r->out);
		free(r);
		return;
	}
	r->next = s->req_pool;
	s->req_pool = r;
	s->n_req_pool++;
}

static struct resp_req *req_new(struct resp_conn *c)
{
	struct resp_server *s = c->srv;
	struct resp_req *r = s->req_pool;
	if (r != NULL) {
		/* Reused: cleared as calloc would, but for the reply
		 * buffer's storage. */
		struct wbuf out = r->out;
		s->req_pool = r->next;
		s->n_req_pool--;
		memset(r, 0, sizeof *r);
		r->out = out;
		wbuf_reset(&r->out);
	} else {
		r = calloc(1, sizeof *r);
		if (r == NULL) {
			return NULL;
		}
		wbuf_init(&r->out);
	}
	r->c = c;
	r->proto = c->proto;
	if (c->tail != NULL) {
		c->tail->next = r;
	} else {
		c->head = r;
	}
	c->tail = r;
	c->inflight++;
	return r;
}

static const char denied_text[] =
    "DENIED Lodestone is running in protected mode because protected mode "
    "is enabled and no password is set for the default user. In this mode "
    "connections are only accepted from the loopback interface. To connect "
    "from outside, set a password (--requirepass, or ACL SETUSER with a "
    "password from a loopback client) or disable protected mode with "
    "--protected-mode no.";

/* Parses and starts every complete command in the query buffer. */
static void conn_process(struct resp_conn *c)
{
	struct resp_server *s = c->srv;
	struct resp_limits lim = {RESP_MAX_INLINE, UINT32_MAX,
	                          s->cfg.max_query_bytes};
	size_t off = 0;
	char err[RESP_ERR_MAX];

	if (c->processing) {
		return;
	}
	c->processing = true;
	if (lim.max_args > s->cfg.max_items + 1) {
		lim.max_args = (uint32_t)(s->cfg.max_items + 1);
	}
	while (!c->closed && !c->quit && !c->held &&
	       c->inflight < RESP_MAX_INFLIGHT && off < c->qlen) {
		struct resp_cmd cmd = {
		    .argv = c->argv,
		    .argv_cap = c->argv_cap,
		    .scratch = c->scratch,
		    .scratch_cap = c->scratch != NULL ? RESP_MAX_INLINE : 0,
		};
		struct resp_req *r;
		int rc;
		if (c->q[off] != '*' && c->scratch == NULL) {
			c->scratch = malloc(RESP_MAX_INLINE);
			if (c->scratch == NULL) {
				resp_conn_kill(c, "out of memory");
				break;
			}
			continue;
		}
		rc = resp_parse(c->q + off, c->qlen - off, &lim, &cmd, err,
		                sizeof err);
		if (rc == RESP_PARSE_MORE) {
			break;
		}
		if (rc == RESP_PARSE_GROW) {
			uint32_t cap = c->argv_cap ? c->argv_cap : 16;
			while (cap < cmd.need_args) {
				cap *= 2;
			}
			struct resp_arg *a = realloc(c->argv, cap * sizeof *a);
			if (a == NULL) {
				resp_conn_kill(c, "out of memory");
				break;
			}
			c->argv = a;
			c->argv_cap = cap;
			continue;
		}
		if (rc == RESP_PARSE_ERR) {
			/* As Redis: answer, then close. */
			r = req_new(c);
			if (r != NULL) {
				resp_w_error(&r->out, err);
				c->quit = true;
				resp_req_done(r);
			}
			log_info(s->log, "resp", "client %s: %s", c->peer, err);
			off = c->qlen;
			break;
		}
		off += cmd.consumed;
		if (cmd.argc == 0) {
			continue;
		}
		r = req_new(c);
		if (r == NULL) {
			resp_conn_kill(c, "out of memory");
			break;
		}
		s->commands++;
		if (c->denied) {
			resp_w_error(&r->out, denied_text);
			c->quit = true;
			resp_req_done(r);
			break;
		}
		resp_cmd_run(r, cmd.argv, cmd.argc);
	}
	c->processing = false;
	if (c->closed) {
		return;
	}
	if (off > 0) {
		memmove(c->q, c->q + off, c->qlen - off);
		c->qlen -= off;
	}
}

static bool loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
		                                   0, 0, 0, 0, 0xff, 0xff};
		if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) {
			return true;
		}
		return memcmp(a->sin6_addr.s6_addr, mapped, 12) == 0 &&
		       a->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	char host[64] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		uv_ip4_name(a, host, sizeof host);
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		uv_ip6_name(a, host, sizeof host);
		port = ntohs(a->sin6_port);
	}
	snprintf(out, cap, "%s:%d", host, port);
}

static void on_connection(uv_stream_t *l, int status)
{
	struct resp_server *s = l->data;
	struct sockaddr_storage ss;
	int len = sizeof ss;
	struct resp_conn *c;

	if (status < 0 || s->closing) {
		return;
	}
	c = calloc(1, sizeof *c);
	if (c == NULL) {
		return;
	}
	c->srv = s;
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	c->next = s->conns;
	if (s->conns != NULL) {
		s->conns->prev = c;
	}
	s->conns = c;
	s->n_conns++;
	if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c);
		return;
	}
	c->id = ++s->next_id;
	c->proto = 2;
	c->created_ms = c->last_ms = resp_now_ms(s);
	memset(&ss, 0, sizeof ss);
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
		addr_text(&ss, c->peer, sizeof c->peer);
		c->remote = !loopback(&ss);
	}
	len = sizeof ss;
	if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
		addr_text(&ss, c->laddr, sizeof c->laddr);
	}
	uv_tcp_nodelay(&c->tcp, 1);
	s->conns_total++;
	if (s->n_conns > s->cfg.maxclients) {
		static const char full[] =
		    "-ERR max number of clients reached\r\n";
		struct wbuf b;
		s->conns_rejected++;
		wbuf_init(&b);
		wbuf_append(&b, full, sizeof full - 1);
		c->quit = true;
		if (l == (uv_stream_t *)&s->tls_listener) {
			conn_close(c);
		} else {
			conn_send(c, &b);
		}
		wbuf_free(&b);
		return;
	}
	if (l == (uv_stream_t *)&s->tls_listener) {
		c->tls = tls_session_new(s->tls_ctx);
		if (c->tls == NULL) {
			conn_close(c);
			return;
		}
	}
	c->denied = c->remote && s->cfg.protected_mode &&
	            (s->cfg.users == NULL ||
	             !fsnp_server_acl_has_password(s->cfg.users));
	c->authed = s->cfg.users == NULL || fsnp_server_acl_open(s->cfg.users);
	conn_update_reading(c);
	if (!c->reading) {
		conn_close(c);
	}
}

static void on_listener_closed(uv_handle_t *h)
{
	struct resp_server *s = h->data;
	s->handles--;
	server_maybe_finish(s);
}

static int bind_listener(struct resp_server *s, uv_tcp_t *t, const char *what,
                         const char *host, uint16_t port, uint16_t *bound,
                         char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int rv, len = sizeof ss;
	uv_tcp_init(s->loop, t);
	t->data = s;
	s->handles++;
	if (strchr(host, ':') != NULL) {
		rv = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
	} else {
		rv = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s: '%s' is not a numeric address", what,
		         host);
		return -1;
	}
	rv = uv_tcp_bind(t, (const struct sockaddr *)&ss, 0);
	if (rv == 0) {
		rv = uv_listen((uv_stream_t *)t, 511, on_connection);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s: cannot listen on %s:%u: %s", what,
		         host, port, uv_strerror(rv));
		return -1;
	}
	uv_tcp_getsockname(t, (struct sockaddr *)&ss, &len);
	*bound = ntohs(ss.ss_family == AF_INET6
	                   ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                   : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

int resp_server_start(struct resp_server **out, uv_loop_t *loop,
                      struct shards *shards,
                      const struct resp_server_config *cfg,
                      const struct log *log, char *err, size_t errlen)
{
	struct resp_server *s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "RESP: out of memory");
		return -1;
	}
	s->loop = loop;
	s->shards = shards;
	s->log = log;
	s->cfg = *cfg;
	snprintf(s->host, sizeof s->host, "%s", cfg->host ? cfg->host : "");
	snprintf(s->tls_host, sizeof s->tls_host, "%s",
	         cfg->tls_host ? cfg->tls_host : "");
	s->cfg.host = s->host;
	s->cfg.tls_host = s->tls_host;
	s->started_ms = resp_now_ms(s);
	uv_check_init(loop, &s->flush);
	s->flush.data = s;
	s->handles++;
	uv_check_start(&s->flush, on_flush);
	uv_idle_init(loop, &s->wake);
	s->wake.data = s;
	s->handles++;
	if (cfg->tcp && bind_listener(s, &s->listener, "RESP", s->host,
	                              cfg->port, &s->port, err, errlen) != 0) {
		goto err_close;
	}
	s->listening = cfg->tcp;
	if (cfg->tls) {
		if (cfg->tls_cert_file == NULL ||
		    cfg->tls_cert_file[0] == '\0' ||
		    cfg->tls_key_file == NULL || cfg->tls_key_file[0] == '\0') {
			snprintf(err, errlen,
			         "RESP TLS: the listener needs 'tls-cert' and "
			         "'tls-key' (or --dev for a generated "
			         "certificate)");
			goto err_close;
		}
		if (tls_ctx_new(&s->tls_ctx, cfg->tls_cert_file,
		                cfg->tls_key_file, cfg->tls_ca_file, err,
		                errlen) != 0) {
			goto err_close;
		}
		if (bind_listener(s, &s->tls_listener, "RESP TLS", s->tls_host,
		                  cfg->tls_port, &s->tls_port, err,
		                  errlen) != 0) {
			goto err_close;
		}
		s->tls_listening = true;
	}
	if (s->listening) {
		log_info(log, "resp", "RESP on %s:%u", s->host, s->port);
	}
	if (s->tls_listening) {
		log_info(log, "resp", "RESP TLS on %s:%u", s->tls_host,
		         s->tls_port);
	}
	*out = s;
	return 0;
err_close:
	/* Closing callbacks free it on the loop's next turn. */
	resp_server_close(s, NULL, NULL);
	return -1;
}

uint16_t resp_server_port(const struct resp_server *s)
{
	return s->listening ? s->port : 0;
}

uint16_t resp_server_tls_port(const struct resp_server *s)
{
	return s->tls_listening ? s->tls_port : 0;
}

void resp_server_close(struct resp_server *s, resp_server_close_cb cb,
                       void *data)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	if (s->listener.data == s) {
		uv_close((uv_handle_t *)&s->listener, on_listener_closed);
	}
	if (s->tls_listener.data == s) {
		uv_close((uv_handle_t *)&s->tls_listener, on_listener_closed);
	}
	for (struct resp_conn *c = s->conns; c != NULL; c = c->next) {
		conn_close(c);
	}
	server_maybe_finish(s);
}

void resp_conn_describe(const struct resp_conn *c, struct wbuf *out)
{
	char line[512];
	uint64_t now = resp_now_ms(c->srv);
	int n = snprintf(
	    line, sizeof line,
	    "id=%llu addr=%s laddr=%s fd=-1 name=%s age=%llu idle=%llu "
	    "flags=%s db=0 sub=0 psub=0 ssub=0 multi=%ld qbuf=%zu "
	    "qbuf-free=%zu argv-mem=0 multi-mem=0 obl=0 oll=0 omem=%zu "
	    "tot-mem=%zu events=r cmd=%s user=%s redir=-1 resp=%d\n",
	    (unsigned long long)c->id, c->peer, c->laddr, c->name,
	    (unsigned long long)((now - c->created_ms) / 1000),
	    (unsigned long long)((now - c->last_ms) / 1000),
	    c->multi != NULL ? "x" : "N", resp_multi_queued(c), c->qlen,
	    c->qcap - c->qlen, c->out_bytes, c->qcap + c->out_bytes,
	    c->last_cmd[0] ? c->last_cmd : "NULL",
	    c->user[0] ? c->user : "default", c->proto);
	wbuf_append(out, line, (size_t)n);
}
