/* Asking a member to admit this node; see join.h. */
#include "raft/join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"

#define CIPHER_BUF 16384

struct join {
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_write_t write;
	uv_timer_t timer;
	uint8_t *out;
	size_t out_len;
	struct tls_session *tls; /* NULL: plaintext */
	bool sent;               /* TLS: the request was written */
	uint8_t cin[CIPHER_BUF]; /* TLS: ciphertext read */
	uint8_t *in;
	size_t in_len;
	size_t in_cap;
	join_cb cb; /* NULL once called */
	void *data;
	unsigned open;
};

/* One write of ciphertext; frees itself. */
struct join_write {
	uv_write_t req; /* req.data = this */
	struct join *j;
	uint8_t *p;
};

static void closed(uv_handle_t *h)
{
	struct join *j = h->data;
	if (--j->open == 0) {
		free(j->out);
		free(j->in);
		tls_session_free(j->tls);
		free(j);
	}
}

/* Calls back once and closes everything. */
static void finish(struct join *j, int status, const char *text)
{
	join_cb cb = j->cb;
	if (cb == NULL) {
		return;
	}
	j->cb = NULL;
	uv_timer_stop(&j->timer);
	if (!uv_is_closing((uv_handle_t *)&j->tcp)) {
		uv_close((uv_handle_t *)&j->tcp, closed);
	}
	if (!uv_is_closing((uv_handle_t *)&j->timer)) {
		uv_close((uv_handle_t *)&j->timer, closed);
	}
	cb(j->data, status, text);
}

static void on_timeout(uv_timer_t *t)
{
	finish(t->data, JOIN_EFAILED, "no answer in time");
}

/* Room for 4 KiB more in the plaintext buffer. 0 or -1. */
static int in_reserve(struct join *j)
{
	if (j->in_cap - j->in_len < 4096) {
		size_t cap = j->in_cap == 0 ? 8192 : j->in_cap * 2;
		uint8_t *p = realloc(j->in, cap);
		if (p == NULL) {
			return -1;
		}
		j->in = p;
		j->in_cap = cap;
	}
	return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	struct join *j = h->data;
	(void)suggested;
	if (j->tls != NULL) {
		*b = uv_buf_init((char *)j->cin, sizeof j->cin);
		return;
	}
	if (j->in_cap - j->in_len < 4096) {
		size_t cap = j->in_cap == 0 ? 8192 : j->in_cap * 2;
		uint8_t *p = realloc(j->in, cap);
		if (p == NULL) {
			*b = uv_buf_init(NULL, 0);
			return;
		}
		j->in = p;
		j->in_cap = cap;
	}
	*b = uv_buf_init((char *)j->in + j->in_len,
	                 (unsigned)(j->in_cap - j->in_len));
}

static void on_tls_written(uv_write_t *w, int status)
{
	struct join_write *jw = w->data;
	struct join *j = jw->j;
	free(jw->p);
	free(jw);
	if (status < 0 && status != UV_ECANCELED) {
		finish(j, JOIN_EFAILED, uv_strerror(status));
	}
}

/* Writes the session's pending ciphertext. 0, or -1 (finished). */
static int tls_flush(struct join *j)
{
	struct join_write *jw;
	uint8_t *p;
	size_t len;
	uv_buf_t b;

	if (tls_take(j->tls, &p, &len) != 0) {
		finish(j, JOIN_EFAILED, "out of memory");
		return -1;
	}
	if (len == 0) {
		return 0;
	}
	jw = calloc(1, sizeof *jw);
	if (jw == NULL) {
		free(p);
		finish(j, JOIN_EFAILED, "out of memory");
		return -1;
	}
	jw->j = j;
	jw->p = p;
	jw->req.data = jw;
	b = uv_buf_init((char *)p, (unsigned)len);
	if (uv_write(&jw->req, (uv_stream_t *)&j->tcp, &b, 1, on_tls_written) !=
	    0) {
		free(p);
		free(jw);
		finish(j, JOIN_EFAILED, "write failed");
		return -1;
	}
	return 0;
}

/* Ciphertext read: once TLS is up (and the member's certificate names a
 * node) sends the request, and decrypts the answer. 0, or -1 (finished). */
static int tls_in(struct join *j, size_t n)
{
	char err[300], cn[128];
	uint64_t id;
	size_t got;
	int rv;

	if (tls_feed(j->tls, j->cin, n, err, sizeof err) != 0) {
		tls_flush(j);
		finish(j, JOIN_EFAILED, err);
		return -1;
	}
	if (!tls_established(j->tls)) {
		return tls_flush(j);
	}
	if (!j->sent) {
		if (tls_peer_cn(j->tls, cn, sizeof cn) != 0 ||
		    msg_node_cn_parse(cn, &id) != 0) {
			finish(j, JOIN_EFAILED,
			       "the member's certificate does not name a node");
			return -1;
		}
		if (tls_write(j->tls, j->out, j->out_len) != 0) {
			finish(j, JOIN_EFAILED, "TLS write failed");
			return -1;
		}
		j->sent = true;
	}
	for (;;) {
		if (in_reserve(j) != 0) {
			finish(j, JOIN_EFAILED, "out of memory");
			return -1;
		}
		rv = tls_read(j->tls, j->in + j->in_len, j->in_cap - j->in_len,
		              &got, err, sizeof err);
		if (rv != 0) {
			finish(j, JOIN_EFAILED,
			       rv == 1 ? "the member closed the connection"
			               : err);
			return -1;
		}
		if (got == 0) {
			break;
		}
		j->in_len += got;
	}
	return tls_flush(j);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct join *j = s->data;
	struct msg_join_resp r;
	uint8_t kind;
	uint32_t plen;
	char text[MSG_JOIN_TEXT_MAX + 1];

	(void)b;
	if (j->cb == NULL) {
		return;
	}
	if (n < 0) {
		finish(j, JOIN_EFAILED,
		       n == UV_EOF ? "the member closed the connection"
		                   : uv_strerror((int)n));
		return;
	}
	if (j->tls != NULL) {
		if (tls_in(j, (size_t)n) != 0) {
			return;
		}
	} else {
		j->in_len += (size_t)n;
	}
	if (j->in_len < MSG_FRAME_HEADER) {
		return;
	}
	if (msg_frame_parse(j->in, MSG_JOIN_TEXT_MAX + 64, &kind, &plen) != 0 ||
	    kind != MSG_JOIN_RESP) {
		finish(j, JOIN_EFAILED, "not an answer to a join");
		return;
	}
	if (j->in_len < MSG_FRAME_HEADER + (size_t)plen) {
		return;
	}
	if (msg_join_resp_decode(j->in + MSG_FRAME_HEADER, plen, &r) != 0) {
		finish(j, JOIN_EFAILED, "malformed answer to a join");
		return;
	}
	memcpy(text, r.text, r.text_len);
	text[r.text_len] = '\0';
	finish(j, r.status, text);
}

static void on_written(uv_write_t *w, int status)
{
	struct join *j = w->data;
	if (status < 0) {
		finish(j, JOIN_EFAILED, uv_strerror(status));
	}
}

static void on_connect(uv_connect_t *c, int status)
{
	struct join *j = c->data;
	uv_buf_t b;
	size_t len;
	int rv;

	if (j->cb == NULL) {
		return;
	}
	if (status < 0) {
		finish(j, JOIN_EFAILED, uv_strerror(status));
		return;
	}
	if (j->tls != NULL) {
		char err[300];
		if (tls_feed(j->tls, NULL, 0, err, sizeof err) != 0) {
			finish(j, JOIN_EFAILED, err);
			return;
		}
		if (tls_flush(j) != 0) {
			return;
		}
		rv = uv_read_start((uv_stream_t *)&j->tcp, on_alloc, on_read);
		if (rv != 0) {
			finish(j, JOIN_EFAILED, uv_strerror(rv));
		}
		return;
	}
	len = MSG_FRAME_HEADER + ((size_t)j->out[0] << 24 |
	                          (size_t)j->out[1] << 16 |
	                          (size_t)j->out[2] << 8 | j->out[3]);
	b = uv_buf_init((char *)j->out, (unsigned)len);
	j->write.data = j;
	rv = uv_write(&j->write, (uv_stream_t *)&j->tcp, &b, 1, on_written);
	if (rv == 0) {
		rv = uv_read_start((uv_stream_t *)&j->tcp, on_alloc, on_read);
	}
	if (rv != 0) {
		finish(j, JOIN_EFAILED, uv_strerror(rv));
	}
}

int join_start(struct join **out, uv_loop_t *loop, const struct sockaddr *addr,
               const struct msg_join *req, struct tls_ctx *tls,
               unsigned timeout_ms, join_cb cb, void *data)
{
	struct join *j = calloc(1, sizeof *j);
	size_t len;
	int rv;

	if (j == NULL) {
		return -1;
	}
	len = msg_join_size(req);
	j->out = malloc(MSG_FRAME_HEADER + len);
	if (j->out == NULL) {
		free(j);
		return -1;
	}
	msg_frame_header(j->out, MSG_JOIN, (uint32_t)len);
	msg_join_write(j->out + MSG_FRAME_HEADER, req);
	j->out_len = MSG_FRAME_HEADER + len;
	if (tls != NULL) {
		j->tls = tls_session_new_client(tls, NULL);
		if (j->tls == NULL) {
			free(j->out);
			free(j);
			return -1;
		}
	}
	j->cb = cb;
	j->data = data;
	uv_tcp_init(loop, &j->tcp);
	uv_timer_init(loop, &j->timer);
	j->tcp.data = j;
	j->timer.data = j;
	j->open = 2;
	j->connect.data = j;
	uv_timer_start(&j->timer, on_timeout, timeout_ms, 0);
	rv = uv_tcp_connect(&j->connect, &j->tcp, addr, on_connect);
	if (rv != 0) {
		/* Not started: `cb` will not run. */
		j->cb = NULL;
		uv_close((uv_handle_t *)&j->tcp, closed);
		uv_close((uv_handle_t *)&j->timer, closed);
		return -1;
	}
	*out = j;
	return 0;
}

void join_cancel(struct join *j)
{
	finish(j, JOIN_ECANCELED, "canceled");
}
