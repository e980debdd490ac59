/* The node transport; see transport.h. */
#include "raft/transport.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"
#include "raft/msg_codec.h"

#define DEFAULT_QUEUE (64u << 20)
#define DEFAULT_RECONNECT_MIN 50
#define DEFAULT_RECONNECT_MAX 2000
#define DEFAULT_HANDSHAKE 3000
#define DEFAULT_PING 500
#define DEFAULT_DEAD 5000
#define TICK_MS 50
#define READ_CHUNK (64u << 10)
/* Buffers above this are released when empty. (16 MiB, to keep a busy
 * connection's buffer, made test_raft_cluster leak a 16-byte libraft
 * allocation under ASan in about one run of three: back to 4 MiB until
 * that is understood.) */
#define KEEP_BUF (4u << 20)
/* An AppendEntries frame at least this large that fills the read buffer
 * alone is decoded in place: the buffer becomes the entries' batch and
 * the connection reads on into a new one (no copy of the payloads). */
#define TAKE_MIN (16u << 10)
#define REFUSALS 16 /* refused nodes remembered for log throttling */
#define REFUSAL_LOG_MS 60000
/* Refusal status of a failed TLS handshake, for log throttling only. */
#define REFUSED_TLS 200
#define REFUSED_LOST 201 /* a dialed peer hung up before WELCOME */

enum {
	C_CONNECTING = 1, /* dialing */
	C_HS_SENT,        /* dialer: HELLO sent, waiting for WELCOME */
	C_HS_WAIT,        /* acceptor: waiting for HELLO */
	C_ACTIVE,         /* handshake done */
	C_REFUSING,       /* refusal queued; closes once written */
	C_CLOSING
};

struct buf {
	uint8_t *p;
	size_t len;
	size_t cap;
};

/* An AppendEntries payload sent from libraft's memory: it goes into the
 * stream at offset `at` of the buffer its frame head was queued in. The
 * last one of a message carries the send to complete once written. */
struct ref {
	const uint8_t *p;
	size_t len;
	size_t at;
	struct rio_sent *sent;
};

struct refs {
	struct ref *v;
	size_t n;
	size_t cap;
	size_t bytes;
};

struct peer;

struct conn {
	struct transport *t;
	uv_tcp_t tcp; /* tcp.data = this */
	uv_connect_t connect;
	uv_write_t wreq;
	struct peer *peer; /* dialer: from the start; acceptor: on HELLO */
	struct tls_session *tls; /* NULL without internal TLS */
	uint64_t cert_id;        /* the node the peer's certificate names */
	bool outbound;
	int state;
	uint64_t gen;
	char remote[80];
	struct buf rbuf;
	size_t take_hint;      /* size of the last frame decoded in place */
	struct buf fill;       /* frames queued this turn */
	struct buf out;        /* frames being written */
	struct refs fill_refs; /* payloads sent from elsewhere, in fill */
	struct refs out_refs;  /* ... in out */
	uv_buf_t *iov;         /* the write's pieces */
	size_t iov_cap;
	bool writing;
	bool dirty;
	struct conn *dirty_next;
	uint64_t opened_ms;
	uint64_t last_read_ms;
	uint64_t last_queued_ms;
	struct conn *prev;
	struct conn *next;
};

struct peer {
	struct transport *t;
	uint64_t id;
	char host[256];
	uint16_t port;
	char address[300];
	struct conn *active;
	struct conn *dialing;
	bool resolving;
	uint64_t next_dial_ms;
	unsigned backoff_ms;
	int last_refusal;  /* -1 none; else the last MSG_HS_* logged */
	uint64_t last_tls; /* with REFUSED_TLS: which reason (its hash) */
	bool was_up;
	struct transport_peer_info st;
};

struct refusal {
	uint64_t from;
	uint8_t status;
	uint64_t ms;
};

struct resolve {
	uv_getaddrinfo_t req;
	struct peer *peer;
};

struct transport {
	uv_loop_t *loop;
	struct transport_options o;
	char cluster[MSG_CLUSTER_MAX + 1];
	uv_tcp_t listener;
	bool listener_init;
	uint16_t port;
	uv_timer_t timer;
	uv_check_t check;
	uv_prepare_t prepare;
	uv_idle_t idle;
	bool idle_on;
	struct peer **peers; /* sorted by id */
	size_t n_peers;
	size_t cap_peers;
	struct conn *conns;
	struct conn *dirty_head;
	struct rio_store *store;
	uint64_t next_gen;
	bool started;
	bool closing;
	unsigned open_handles;
	transport_close_cb close_cb;
	void *close_data;
	struct refusal refusals[REFUSALS];
};

static void logf_(struct transport *t, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(struct transport *t, int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (t->o.log == NULL) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	t->o.log(t->o.data, level, msg);
}

const char *transport_strerror(int status)
{
	switch (status) {
	case TRANSPORT_OK:
		return "ok";
	case TRANSPORT_ENOPEER:
		return "not a configured peer";
	case TRANSPORT_ENOCONN:
		return "no connection to the peer";
	case TRANSPORT_EFULL:
		return "send queue to the peer is full";
	case TRANSPORT_ETOOBIG:
		return "frame too large";
	case TRANSPORT_ENOMEM:
		return "out of memory";
	case TRANSPORT_ESHUTDOWN:
		return "transport closing";
	default:
		return "invalid argument";
	}
}

static uint64_t now_ms(const struct transport *t)
{
	return uv_now(t->loop);
}

/* ---- buffers ---- */

static int buf_reserve(struct buf *b, size_t extra)
{
	size_t need = b->len + extra, cap;
	uint8_t *p;
	if (need <= b->cap) {
		return 0;
	}
	cap = b->cap == 0 ? 4096 : b->cap;
	while (cap < need) {
		cap *= 2;
	}
	p = raft_realloc(b->p, cap);
	if (p == NULL) {
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Grows `b` to exactly `cap` bytes (a read buffer that is to become a
 * frame's own block). */
static int buf_reserve_exact(struct buf *b, size_t cap)
{
	uint8_t *p;
	if (cap <= b->cap) {
		return 0;
	}
	p = raft_realloc(b->p, cap);
	if (p == NULL) {
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

static void buf_release_if_big(struct buf *b)
{
	if (b->len == 0 && b->cap > KEEP_BUF) {
		raft_free(b->p);
		b->p = NULL;
		b->cap = 0;
	}
}

static void buf_free(struct buf *b)
{
	raft_free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

static int refs_reserve(struct refs *r, size_t extra)
{
	size_t cap = r->cap == 0 ? 16 : r->cap;
	struct ref *v;
	if (r->n + extra <= r->cap) {
		return 0;
	}
	while (cap < r->n + extra) {
		cap *= 2;
	}
	v = realloc(r->v, cap * sizeof *v);
	if (v == NULL) {
		return -1;
	}
	r->v = v;
	r->cap = cap;
	return 0;
}

/* Completes the sends whose payloads `r` referenced: they are written
 * (status 0) or will never be. */
static void refs_release(struct refs *r, int status)
{
	for (size_t i = 0; i < r->n; i++) {
		if (r->v[i].sent != NULL) {
			rio_sent_done(r->v[i].sent, status);
		}
	}
	r->n = 0;
	r->bytes = 0;
}

/* ---- peers ---- */

static struct peer *find_peer(const struct transport *t, uint64_t id)
{
	size_t lo = 0, hi = t->n_peers;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->peers[mid]->id < id) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo < t->n_peers && t->peers[lo]->id == id ? t->peers[lo] : NULL;
}

int transport_add_peer(struct transport *t, uint64_t id, const char *host,
                       uint16_t port)
{
	struct peer *p;
	size_t i;

	if (id == 0 || id == t->o.node_id || find_peer(t, id) != NULL ||
	    strlen(host) >= sizeof p->host || port == 0) {
		return TRANSPORT_EINVAL;
	}
	if (t->n_peers == t->cap_peers) {
		size_t cap = t->cap_peers == 0 ? 8 : t->cap_peers * 2;
		struct peer **v = realloc(t->peers, cap * sizeof *v);
		if (v == NULL) {
			return TRANSPORT_ENOMEM;
		}
		t->peers = v;
		t->cap_peers = cap;
	}
	p = calloc(1, sizeof *p);
	if (p == NULL) {
		return TRANSPORT_ENOMEM;
	}
	p->t = t;
	p->id = id;
	snprintf(p->host, sizeof p->host, "%s", host);
	p->port = port;
	snprintf(p->address, sizeof p->address,
	         strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host,
	         (unsigned)port);
	p->backoff_ms = t->o.reconnect_min_ms;
	p->last_refusal = -1;
	p->st.id = id;
	snprintf(p->st.address, sizeof p->st.address, "%s", p->address);
	for (i = t->n_peers; i > 0 && t->peers[i - 1]->id > id; i--) {
		t->peers[i] = t->peers[i - 1];
	}
	t->peers[i] = p;
	t->n_peers++;
	return 0;
}

/* ---- connections ---- */

static void maybe_finish_close(struct transport *t);
static void flush_all(struct transport *t);

static void idle_cb(uv_idle_t *h)
{
	(void)h; /* keeps the loop from sleeping while writes are queued */
}

static void mark_dirty(struct conn *c)
{
	struct transport *t = c->t;
	if (c->dirty) {
		return;
	}
	c->dirty = true;
	c->dirty_next = t->dirty_head;
	t->dirty_head = c;
	if (!t->idle_on && !t->closing) {
		t->idle_on = true;
		uv_idle_start(&t->idle, idle_cb);
	}
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	struct transport *t = c->t;
	struct conn **pp;

	/* Unlink from the dirty list (rarely there: closing clears it). */
	for (pp = &t->dirty_head; *pp != NULL; pp = &(*pp)->dirty_next) {
		if (*pp == c) {
			*pp = c->dirty_next;
			break;
		}
	}
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		t->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	buf_free(&c->rbuf);
	buf_free(&c->fill);
	buf_free(&c->out);
	free(c->fill_refs.v);
	free(c->out_refs.v);
	free(c->iov);
	tls_session_free(c->tls);
	free(c);
	t->open_handles--;
	maybe_finish_close(t);
}

static void schedule_redial(struct peer *p, bool grow)
{
	struct transport *t = p->t;
	p->next_dial_ms = now_ms(t) + p->backoff_ms;
	if (grow) {
		unsigned b = p->backoff_ms * 2;
		p->backoff_ms =
		    b > t->o.reconnect_max_ms ? t->o.reconnect_max_ms : b;
	}
}

static void conn_close(struct conn *c, int level, const char *why)
{
	struct transport *t = c->t;
	struct peer *p = c->peer;

	if (c->state == C_CLOSING) {
		return;
	}
	if (p != NULL && p->active == c) {
		p->active = NULL;
		p->st.connected = false;
		p->st.gen = 0;
		logf_(t, level, "connection to node %llu (%s) closed: %s",
		      (unsigned long long)p->id, p->address, why);
		if (!t->closing) {
			schedule_redial(p, false);
			if (t->o.on_peer != NULL) {
				c->state = C_CLOSING;
				t->o.on_peer(t->o.data, p->id, false, c->gen);
			}
		}
	} else if (p != NULL && p->dialing == c) {
		p->dialing = NULL;
		logf_(t, TRANSPORT_DEBUG, "dial of node %llu (%s) failed: %s",
		      (unsigned long long)p->id, p->address, why);
		if (!t->closing) {
			schedule_redial(p, true);
		}
	} else {
		logf_(t, TRANSPORT_DEBUG, "connection %s closed: %s", c->remote,
		      why);
	}
	c->state = C_CLOSING;
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	/* Nothing writes from the payloads any more. */
	refs_release(&c->out_refs, RAFT_NOCONNECTION);
	refs_release(&c->fill_refs, RAFT_NOCONNECTION);
}

static struct conn *conn_new(struct transport *t)
{
	struct conn *c = calloc(1, sizeof *c);
	if (c == NULL) {
		return NULL;
	}
	c->t = t;
	if (uv_tcp_init(t->loop, &c->tcp) != 0) {
		free(c);
		return NULL;
	}
	c->tcp.data = c;
	c->opened_ms = c->last_read_ms = c->last_queued_ms = now_ms(t);
	snprintf(c->remote, sizeof c->remote, "?");
	c->next = t->conns;
	if (t->conns != NULL) {
		t->conns->prev = c;
	}
	t->conns = c;
	t->open_handles++;
	return c;
}

/* Room for one frame of `len` payload bytes in the connection's queue,
 * of which the last `away` are not stored in it (payloads referenced). */
static uint8_t *queue_frame_away(struct conn *c, uint8_t kind, size_t len,
                                 size_t away, int *status)
{
	struct transport *t = c->t;
	size_t queued =
	    c->fill.len + c->out.len + c->fill_refs.bytes + c->out_refs.bytes;
	uint8_t *p;

	if (len > MSG_MAX_PAYLOAD) {
		*status = TRANSPORT_ETOOBIG;
		return NULL;
	}
	if (queued > 0 &&
	    queued + MSG_FRAME_HEADER + len > t->o.max_queue_bytes) {
		*status = TRANSPORT_EFULL;
		return NULL;
	}
	if (buf_reserve(&c->fill, MSG_FRAME_HEADER + len - away) != 0) {
		*status = TRANSPORT_ENOMEM;
		return NULL;
	}
	p = c->fill.p + c->fill.len;
	msg_frame_header(p, kind, (uint32_t)len);
	c->fill.len += MSG_FRAME_HEADER + len - away;
	c->last_queued_ms = now_ms(t);
	mark_dirty(c);
	*status = 0;
	return p + MSG_FRAME_HEADER;
}

static uint8_t *queue_frame(struct conn *c, uint8_t kind, size_t len,
                            int *status)
{
	return queue_frame_away(c, kind, len, 0, status);
}

static void start_write(struct conn *c);

static void write_cb(uv_write_t *w, int status)
{
	struct conn *c = w->data;

	c->writing = false;
	if (c->state == C_CLOSING) {
		return;
	}
	if (status < 0) {
		conn_close(c, TRANSPORT_INFO, uv_strerror(status));
		return;
	}
	if (c->peer != NULL) {
		c->peer->st.bytes_sent += c->out.len + c->out_refs.bytes;
	}
	refs_release(&c->out_refs, 0);
	c->out.len = 0;
	buf_release_if_big(&c->out);
	if (c->state == C_REFUSING) {
		conn_close(c, TRANSPORT_DEBUG, "refused");
		return;
	}
	if (c->fill.len > 0 || (c->tls != NULL && tls_pending(c->tls) > 0)) {
		start_write(c);
	}
}

/* Encrypts what the turn queued (one TLS write for all of it) and moves
 * the session's ciphertext into the output buffer. 0, or -1 when the
 * connection was closed. */
static int seal(struct conn *c)
{
	size_t n, got = 0;

	if (c->fill.len > 0 && tls_established(c->tls)) {
		if (tls_write(c->tls, c->fill.p, c->fill.len) != 0) {
			conn_close(c, TRANSPORT_WARN, "TLS write failed");
			return -1;
		}
		c->fill.len = 0;
		buf_release_if_big(&c->fill);
	}
	c->out.len = 0;
	n = tls_pending(c->tls);
	if (n == 0) {
		return 0;
	}
	if (buf_reserve(&c->out, n) != 0 ||
	    tls_drain(c->tls, c->out.p, n, &got) != 0) {
		conn_close(c, TRANSPORT_WARN, "out of memory");
		return -1;
	}
	c->out.len = got;
	return 0;
}

/* The pieces of `out`: its bytes with the referenced payloads between
 * them. The number of pieces, or 0 when out of memory. */
static unsigned out_pieces(struct conn *c)
{
	const struct refs *r = &c->out_refs;
	size_t need = 2 * r->n + 1, pos = 0, n = 0;

	if (need > c->iov_cap) {
		uv_buf_t *v = realloc(c->iov, need * sizeof *v);
		if (v == NULL) {
			return 0;
		}
		c->iov = v;
		c->iov_cap = need;
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct ref *f = &r->v[i];
		if (f->at > pos) {
			c->iov[n++] = uv_buf_init((char *)c->out.p + pos,
			                          (unsigned)(f->at - pos));
			pos = f->at;
		}
		c->iov[n++] = uv_buf_init((char *)f->p, (unsigned)f->len);
	}
	if (c->out.len > pos) {
		c->iov[n++] = uv_buf_init((char *)c->out.p + pos,
		                          (unsigned)(c->out.len - pos));
	}
	return (unsigned)n;
}

static void start_write(struct conn *c)
{
	struct buf tmp;
	struct refs rtmp;
	uv_buf_t b, *bufs = &b;
	unsigned nbufs = 1;
	int rv;

	if (c->writing || c->state == C_CLOSING || c->state == C_CONNECTING) {
		return;
	}
	if (c->tls != NULL) {
		if (seal(c) != 0 || c->out.len == 0) {
			return;
		}
	} else {
		if (c->fill.len == 0 && c->fill_refs.n == 0) {
			return;
		}
		tmp = c->out;
		c->out = c->fill;
		c->fill = tmp;
		c->fill.len = 0;
		rtmp = c->out_refs; /* empty: released by write_cb */
		c->out_refs = c->fill_refs;
		c->fill_refs = rtmp;
	}
	b = uv_buf_init((char *)c->out.p, (unsigned)c->out.len);
	if (c->out_refs.n > 0) {
		nbufs = out_pieces(c);
		bufs = c->iov;
		if (nbufs == 0) {
			conn_close(c, TRANSPORT_WARN, "out of memory");
			return;
		}
	}
	c->wreq.data = c;
	rv = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, nbufs, write_cb);
	if (rv != 0) {
		conn_close(c, TRANSPORT_INFO, uv_strerror(rv));
		return;
	}
	c->writing = true;
}

static void flush_all(struct transport *t)
{
	struct conn *c;
	while ((c = t->dirty_head) != NULL) {
		t->dirty_head = c->dirty_next;
		c->dirty = false;
		c->dirty_next = NULL;
		start_write(c);
	}
	if (t->idle_on) {
		uv_idle_stop(&t->idle);
		t->idle_on = false;
	}
}

static void check_cb(uv_check_t *h)
{
	flush_all(h->data);
}

static void prepare_cb(uv_prepare_t *h)
{
	flush_all(h->data);
}

/* ---- handshake ---- */

static bool dialed_by_lower(const struct conn *c)
{
	uint64_t me = c->t->o.node_id, peer = c->peer->id;
	return c->outbound ? me < peer : peer < me;
}

static void activate(struct conn *c)
{
	struct transport *t = c->t;
	struct peer *p = c->peer;

	c->state = C_ACTIVE;
	c->gen = ++t->next_gen;
	c->last_read_ms = now_ms(t);
	p->active = c;
	p->backoff_ms = t->o.reconnect_min_ms;
	p->last_refusal = -1;
	p->st.connected = true;
	p->st.gen = c->gen;
	p->st.connects++;
	logf_(t, TRANSPORT_INFO, "connected to node %llu (%s, %s%s%s)",
	      (unsigned long long)p->id, p->address,
	      c->outbound ? "dialed" : "accepted", c->tls != NULL ? ", " : "",
	      c->tls != NULL ? tls_version(c->tls) : "");
	p->was_up = true;
	if (p->dialing != NULL && p->dialing != c && dialed_by_lower(c)) {
		/* Ours cannot win any more. */
		conn_close(p->dialing, TRANSPORT_DEBUG,
		           "superseded by the peer's connection");
	}
	if (t->o.on_peer != NULL) {
		t->o.on_peer(t->o.data, p->id, true, c->gen);
	}
}

static void send_welcome(struct conn *c, uint8_t status, const char *reason)
{
	struct transport *t = c->t;
	struct msg_welcome w = {0};
	uint8_t *p;
	int rv;

	w.version = MSG_VERSION;
	w.status = status;
	w.from = t->o.node_id;
	w.reason = reason;
	w.reason_len = strlen(reason);
	if (w.reason_len > MSG_REASON_MAX) {
		w.reason_len = MSG_REASON_MAX;
	}
	p = queue_frame(c, MSG_WELCOME, msg_welcome_size(&w), &rv);
	if (p != NULL) {
		msg_welcome_write(p, &w);
	}
}

/* Whether a refusal of node `from` for `status` is news: a misconfigured
 * node redials every few seconds, and once a minute is enough to say so. */
static bool refusal_news(struct transport *t, uint64_t from, uint8_t status)
{
	uint64_t now = now_ms(t);
	struct refusal *oldest = &t->refusals[0];
	for (size_t i = 0; i < REFUSALS; i++) {
		struct refusal *r = &t->refusals[i];
		if (r->from == from && r->status == status) {
			if (now - r->ms < REFUSAL_LOG_MS) {
				return false;
			}
			r->ms = now;
			return true;
		}
		if (r->ms < oldest->ms) {
			oldest = r;
		}
	}
	oldest->from = from;
	oldest->status = status;
	oldest->ms = now;
	return true;
}

static void refuse(struct conn *c, uint8_t status, uint64_t from,
                   const char *reason)
{
	struct transport *t = c->t;
	int level = status == MSG_HS_DUPLICATE      ? TRANSPORT_DEBUG
	            : refusal_news(t, from, status) ? TRANSPORT_WARN
	                                            : TRANSPORT_DEBUG;
	logf_(t, level, "refused connection from %s: %s", c->remote, reason);
	send_welcome(c, status, reason);
	c->state = C_REFUSING;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

static void on_hello(struct conn *c, const uint8_t *b, size_t len)
{
	struct transport *t = c->t;
	struct msg_hello h;
	struct peer *p;
	char why[300];
	int rv;

	rv = msg_hello_decode(b, len, &h);
	if (rv == MSG_EVERSION) {
		snprintf(why, sizeof why,
		         "protocol version %u is not supported (this node "
		         "speaks %u)",
		         (unsigned)h.version, (unsigned)MSG_VERSION);
		refuse(c, MSG_HS_VERSION, h.from, why);
		return;
	}
	if (rv != 0) {
		logf_(t, TRANSPORT_WARN,
		      "refused connection from %s: malformed handshake",
		      c->remote);
		conn_close(c, TRANSPORT_DEBUG, "malformed handshake");
		return;
	}
	if (c->tls != NULL && h.from != c->cert_id) {
		snprintf(why, sizeof why,
		         "the peer claims to be node %llu but its certificate "
		         "names node %llu",
		         (unsigned long long)h.from,
		         (unsigned long long)c->cert_id);
		refuse(c, MSG_HS_IDENTITY, h.from, why);
		return;
	}
	if (h.cluster_len != strlen(t->cluster) ||
	    memcmp(h.cluster, t->cluster, h.cluster_len) != 0) {
		snprintf(why, sizeof why,
		         "node %llu is in cluster '%.*s', not '%s'",
		         (unsigned long long)h.from, (int)h.cluster_len,
		         h.cluster, t->cluster);
		refuse(c, MSG_HS_CLUSTER, h.from, why);
		return;
	}
	p = find_peer(t, h.from);
	if (p == NULL) {
		snprintf(why, sizeof why,
		         "node %llu is not a member of cluster '%s'",
		         (unsigned long long)h.from, t->cluster);
		refuse(c, MSG_HS_STRANGER, h.from, why);
		return;
	}
	if (h.to != 0 && h.to != t->o.node_id) {
		snprintf(why, sizeof why, "this is node %llu, not node %llu",
		         (unsigned long long)t->o.node_id,
		         (unsigned long long)h.to);
		refuse(c, MSG_HS_WRONG_ID, h.from, why);
		return;
	}
	c->peer = p;
	if (p->active != NULL) {
		if (!dialed_by_lower(c) && dialed_by_lower(p->active)) {
			c->peer = NULL;
			refuse(c, MSG_HS_DUPLICATE, h.from,
			       "a connection dialed by the lower node id "
			       "exists");
			return;
		}
		conn_close(p->active, TRANSPORT_DEBUG,
		           "replaced by a new connection");
	}
	send_welcome(c, MSG_HS_OK, "");
	activate(c);
}

static void on_welcome(struct conn *c, const uint8_t *b, size_t len)
{
	struct transport *t = c->t;
	struct peer *p = c->peer;
	struct msg_welcome w;

	if (p->dialing == c) {
		p->dialing = NULL;
	}
	if (msg_welcome_decode(b, len, &w) != 0) {
		logf_(t, TRANSPORT_WARN,
		      "node %llu (%s) answered the handshake with garbage",
		      (unsigned long long)p->id, p->address);
		schedule_redial(p, true);
		conn_close(c, TRANSPORT_DEBUG, "malformed handshake answer");
		return;
	}
	if (w.status != MSG_HS_OK) {
		int level = w.status == MSG_HS_DUPLICATE ? TRANSPORT_DEBUG
		                                         : TRANSPORT_WARN;
		if (p->last_refusal == w.status) {
			level = TRANSPORT_DEBUG; /* said already */
		}
		p->last_refusal = w.status;
		logf_(t, level, "node %llu (%s) refused our connection: %.*s",
		      (unsigned long long)p->id, p->address, (int)w.reason_len,
		      w.reason);
		schedule_redial(p, w.status != MSG_HS_DUPLICATE);
		conn_close(c, TRANSPORT_DEBUG, "refused");
		return;
	}
	if (w.from != p->id) {
		logf_(t, TRANSPORT_WARN,
		      "expected node %llu at %s but node %llu answered",
		      (unsigned long long)p->id, p->address,
		      (unsigned long long)w.from);
		schedule_redial(p, true);
		conn_close(c, TRANSPORT_DEBUG, "wrong node");
		return;
	}
	if (p->active != NULL) {
		if (!dialed_by_lower(c) && dialed_by_lower(p->active)) {
			conn_close(c, TRANSPORT_DEBUG, "duplicate connection");
			return;
		}
		conn_close(p->active, TRANSPORT_DEBUG,
		           "replaced by a new connection");
	}
	activate(c);
}

/* ---- reading ---- */

/* With `owner` (the raft_malloc'd block holding the frame, now ours to
 * free), AppendEntries are decoded in place and their batch is `owner`. */
static void deliver_raft(struct conn *c, const uint8_t *b, size_t len,
                         void *owner)
{
	struct transport *t = c->t;
	struct raft_message m;
	uint32_t group;
	bool taken = false;
	int rv = owner != NULL
	             ? msg_raft_decode_take(owner, b, len, &group, &m, &taken)
	             : msg_raft_decode(b, len, &group, &m);

	if (owner != NULL && !taken) {
		raft_free(owner);
	}
	if (rv != 0) {
		logf_(t, TRANSPORT_WARN,
		      "node %llu sent a malformed raft message",
		      (unsigned long long)c->peer->id);
		conn_close(c, TRANSPORT_WARN, "malformed raft message");
		return;
	}
	m.server_id = c->peer->id;
	m.server_address = c->peer->address;
	if (t->store == NULL || rio_store_deliver(t->store, group, &m) != 0) {
		int type = m.type;
		msg_raft_free(&m);
		if (t->store != NULL && t->o.on_unknown != NULL) {
			t->o.on_unknown(t->o.data, c->peer->id, group, type);
		}
	}
}

/* MSG_JOIN on an accepted connection: the owner admits the node (or not);
 * the answer is the only frame sent back before the connection closes. */
static void on_join(struct conn *c, const uint8_t *b, size_t len)
{
	struct transport *t = c->t;
	struct msg_join j;
	struct msg_join_resp r = {0};
	char reply[MSG_JOIN_TEXT_MAX];
	char record[MSG_JOIN_TEXT_MAX + 1];
	uint8_t *p;
	int rv;

	reply[0] = '\0';
	rv = msg_join_decode(b, len, &j);
	if (rv != 0) {
		r.status =
		    rv == MSG_EVERSION ? MSG_HS_VERSION : MSG_HS_STRANGER;
		snprintf(reply, sizeof reply, "%s",
		         rv == MSG_EVERSION ? "protocol version not supported"
		                            : "malformed join request");
	} else if (c->tls != NULL && j.from != c->cert_id) {
		r.status = MSG_HS_IDENTITY;
		snprintf(reply, sizeof reply,
		         "the joining node claims to be node %llu but its "
		         "certificate names node %llu",
		         (unsigned long long)j.from,
		         (unsigned long long)c->cert_id);
	} else if (j.cluster_len != strlen(t->cluster) ||
	           memcmp(j.cluster, t->cluster, j.cluster_len) != 0) {
		r.status = MSG_HS_CLUSTER;
		snprintf(reply, sizeof reply, "this is cluster '%s'",
		         t->cluster);
	} else if (t->o.on_join == NULL) {
		r.status = MSG_HS_STRANGER;
		snprintf(reply, sizeof reply, "this node takes no joins");
	} else {
		memcpy(record, j.record, j.record_len);
		record[j.record_len] = '\0';
		r.status =
		    (uint8_t)t->o.on_join(t->o.data, j.from, record,
		                          j.record_len, reply, sizeof reply);
	}
	if (r.status != MSG_HS_OK) {
		logf_(t, TRANSPORT_WARN,
		      "refused the join of node %llu from %s: %s",
		      (unsigned long long)j.from, c->remote, reply);
	}
	r.text = reply;
	r.text_len = strlen(reply);
	p = queue_frame(c, MSG_JOIN_RESP, msg_join_resp_size(&r), &rv);
	if (p != NULL) {
		msg_join_resp_write(p, &r);
	}
	c->state = C_REFUSING;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

/* `owner`: see deliver_raft; only for MSG_RAFT on an active connection. */
static void handle_frame(struct conn *c, uint8_t kind, const uint8_t *b,
                         size_t len, void *owner)
{
	struct transport *t = c->t;

	switch (c->state) {
	case C_HS_WAIT:
		if (kind == MSG_JOIN) {
			on_join(c, b, len);
			return;
		}
		if (kind != MSG_HELLO) {
			logf_(t, TRANSPORT_WARN,
			      "refused connection from %s: no handshake",
			      c->remote);
			conn_close(c, TRANSPORT_DEBUG, "no handshake");
			return;
		}
		on_hello(c, b, len);
		return;
	case C_HS_SENT:
		if (kind != MSG_WELCOME) {
			conn_close(c, TRANSPORT_WARN,
			           "peer did not answer the handshake");
			return;
		}
		on_welcome(c, b, len);
		return;
	case C_ACTIVE:
		break;
	default:
		return;
	}
	c->peer->st.frames_received++;
	switch (kind) {
	case MSG_RAFT:
		deliver_raft(c, b, len, owner);
		break;
	case MSG_PING:
		break;
	case MSG_HELLO:
	case MSG_WELCOME:
		conn_close(c, TRANSPORT_WARN,
		           "handshake frame after handshake");
		break;
	default:
		if (t->o.on_frame != NULL) {
			t->o.on_frame(t->o.data, c->peer->id, kind, b, len);
		}
		break;
	}
}

/* Whether a frame of `kind` and `flen` bytes (header included) is one to
 * decode in place: a large raft message (AppendEntries in practice) on
 * an active plain-TCP connection (TLS decrypts into the buffer anyway). */
static bool takeable(const struct conn *c, uint8_t kind, size_t flen)
{
	return c->tls == NULL && c->state == C_ACTIVE && kind == MSG_RAFT &&
	       flen >= MSG_FRAME_HEADER + (size_t)TAKE_MIN;
}

/* Hands the read buffer, which starts with a complete takeable frame of
 * `plen` payload bytes, to deliver_raft as the frame's block; what
 * follows the frame moves to a new read buffer. 0, or -1 when out of
 * memory (nothing moved). */
static int take_frame(struct conn *c, uint32_t plen)
{
	size_t flen = MSG_FRAME_HEADER + (size_t)plen;
	struct buf rest = {0};
	uint8_t *block = c->rbuf.p;

	if (c->rbuf.len > flen) {
		if (buf_reserve(&rest, c->rbuf.len - flen) != 0) {
			return -1;
		}
		memcpy(rest.p, block + flen, c->rbuf.len - flen);
		rest.len = c->rbuf.len - flen;
	}
	c->rbuf = rest;
	c->take_hint = flen;
	handle_frame(c, MSG_RAFT, block + MSG_FRAME_HEADER, plen, block);
	return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
	struct conn *c = h->data;
	size_t want = READ_CHUNK;

	(void)suggested;
	if (c->tls != NULL) {
		/* Ciphertext lands in the shared buffer and is consumed at
		 * once (read_cb). */
		*out = uv_buf_init((char *)tls_ctx_read_buf(c->t->o.tls_server),
		                   TLS_READ_BUF);
		return;
	}
	if (c->rbuf.len >= MSG_FRAME_HEADER) {
		/* Room for the whole frame under way. */
		const uint8_t *p = c->rbuf.p;
		size_t flen = MSG_FRAME_HEADER + ((size_t)p[0] << 24 |
		                                  (size_t)p[1] << 16 |
		                                  (size_t)p[2] << 8 | p[3]);
		if (flen <= MSG_FRAME_HEADER + (size_t)MSG_MAX_PAYLOAD &&
		    flen > c->rbuf.len && takeable(c, p[4], flen)) {
			/* Exactly the rest of the frame, so that it ends the
			 * buffer and can be decoded in place. */
			if (buf_reserve_exact(&c->rbuf, flen) != 0) {
				*out = uv_buf_init(NULL, 0);
				return;
			}
			*out = uv_buf_init((char *)c->rbuf.p + c->rbuf.len,
			                   (unsigned)(flen - c->rbuf.len));
			return;
		}
		if (flen <= MSG_FRAME_HEADER + (size_t)MSG_MAX_PAYLOAD &&
		    flen > c->rbuf.len + want) {
			want = flen - c->rbuf.len;
		}
	} else if (c->rbuf.cap == 0 && c->take_hint > want) {
		/* A new buffer after a frame decoded in place: sized like
		 * that frame, the next one like it arrives in it whole. */
		if (buf_reserve_exact(&c->rbuf, c->take_hint) != 0) {
			*out = uv_buf_init(NULL, 0);
			return;
		}
	}
	if (buf_reserve(&c->rbuf, want) != 0) {
		*out = uv_buf_init(NULL, 0);
		return;
	}
	*out = uv_buf_init((char *)c->rbuf.p + c->rbuf.len,
	                   (unsigned)(c->rbuf.cap - c->rbuf.len));
}

static void send_hello(struct conn *c);

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s != '\0'; s++) {
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	}
	return h;
}

/* The TLS session failed (or the peer closed before it was up): logs the
 * reason (throttled) and closes, after sending the alert if any. */
static void tls_fail(struct conn *c, const char *reason)
{
	struct transport *t = c->t;
	struct peer *p = c->peer;
	int level;

	if (c->state == C_ACTIVE) {
		conn_close(c, TRANSPORT_WARN, reason);
		return;
	}
	if (c->outbound) {
		uint64_t h = fnv1a(reason);
		level = p->last_refusal == REFUSED_TLS && p->last_tls == h
		            ? TRANSPORT_DEBUG
		            : TRANSPORT_WARN;
		p->last_refusal = REFUSED_TLS;
		p->last_tls = h;
		logf_(t, level, "TLS with node %llu (%s) refused: %s",
		      (unsigned long long)p->id, p->address, reason);
	} else {
		level = refusal_news(t, fnv1a(reason), REFUSED_TLS)
		            ? TRANSPORT_WARN
		            : TRANSPORT_DEBUG;
		logf_(t, level, "refused connection from %s: %s", c->remote,
		      reason);
	}
	if (tls_pending(c->tls) == 0) {
		conn_close(c, TRANSPORT_DEBUG, "TLS refused");
		return;
	}
	c->fill.len = 0;
	c->state = C_REFUSING;
	uv_read_stop((uv_stream_t *)&c->tcp);
	mark_dirty(c);
}

/* The TLS handshake completed: the certificate must name a node, and the
 * one we dialed. 0, or -1 when the connection was refused. */
static int tls_up(struct conn *c)
{
	struct transport *t = c->t;
	char cn[128], why[300];
	uint64_t id;

	if (tls_peer_cn(c->tls, cn, sizeof cn) != 0 ||
	    msg_node_cn_parse(cn, &id) != 0) {
		tls_fail(c, "the peer's certificate does not name a node "
		            "(CN=node-<id>)");
		return -1;
	}
	c->cert_id = id;
	logf_(t, TRANSPORT_DEBUG, "TLS with %s up (%s, %s, %s)", c->remote,
	      tls_version(c->tls), tls_cipher(c->tls), cn);
	if (!c->outbound) {
		return 0;
	}
	if (id != c->peer->id) {
		snprintf(
		    why, sizeof why,
		    "the peer's certificate names node %llu, not node %llu",
		    (unsigned long long)id, (unsigned long long)c->peer->id);
		tls_fail(c, why);
		return -1;
	}
	send_hello(c);
	return c->state == C_CLOSING ? -1 : 0;
}

/* Ciphertext read: feeds the session and decrypts everything it holds
 * into the read buffer. 0, or -1 when the connection was closed. */
static int tls_in(struct conn *c, const uint8_t *p, size_t n)
{
	bool was_up = tls_established(c->tls);
	char err[300];
	size_t got;
	int rv;

	if (tls_feed(c->tls, p, n, err, sizeof err) != 0) {
		tls_fail(c, err);
		return -1;
	}
	if (tls_pending(c->tls) > 0) {
		mark_dirty(c);
	}
	if (!tls_established(c->tls)) {
		return 0;
	}
	if (!was_up && tls_up(c) != 0) {
		return -1;
	}
	for (;;) {
		if (buf_reserve(&c->rbuf, READ_CHUNK) != 0) {
			conn_close(c, TRANSPORT_WARN, "out of memory");
			return -1;
		}
		rv = tls_read(c->tls, c->rbuf.p + c->rbuf.len,
		              c->rbuf.cap - c->rbuf.len, &got, err, sizeof err);
		if (rv == 1) {
			conn_close(c, TRANSPORT_INFO, "closed by the peer");
			return -1;
		}
		if (rv < 0) {
			tls_fail(c, err);
			return -1;
		}
		if (got == 0) {
			break;
		}
		c->rbuf.len += got;
	}
	if (tls_pending(c->tls) > 0) {
		mark_dirty(c);
	}
	return 0;
}

/* A peer we dialed went away or answered garbage before WELCOME: said at
 * warn once per peer until a handshake succeeds (a node whose internal
 * TLS setting differs from ours does this at every dial). */
static void hs_lost(struct conn *c, const char *what)
{
	struct peer *p = c->peer;
	int level =
	    p->last_refusal == REFUSED_LOST ? TRANSPORT_DEBUG : TRANSPORT_WARN;
	p->last_refusal = REFUSED_LOST;
	logf_(c->t, level, "node %llu (%s) %s%s", (unsigned long long)p->id,
	      p->address, what,
	      c->tls == NULL ? " (does it run internal TLS?)" : "");
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct conn *c = s->data;
	struct transport *t = c->t;
	size_t off = 0;

	if (c->state == C_CLOSING) {
		return;
	}
	if (n < 0) {
		if (c->tls != NULL && c->state != C_ACTIVE &&
		    c->state != C_REFUSING) {
			tls_fail(c, n == UV_EOF ? "closed by the peer during "
			                          "the TLS handshake"
			                        : uv_strerror((int)n));
			return;
		}
		if (c->state == C_HS_SENT) {
			hs_lost(c,
			        "closed the connection during the handshake");
		}
		conn_close(c, TRANSPORT_INFO,
		           n == UV_EOF ? "closed by the peer"
		                       : uv_strerror((int)n));
		return;
	}
	if (n == 0) {
		return;
	}
	c->last_read_ms = now_ms(t);
	if (c->tls != NULL) {
		if (tls_in(c, (const uint8_t *)b->base, (size_t)n) != 0) {
			return;
		}
	} else {
		c->rbuf.len += (size_t)n;
	}
	if (c->peer != NULL && c->state == C_ACTIVE) {
		c->peer->st.bytes_received += (size_t)n;
	}
	while (c->rbuf.len - off >= MSG_FRAME_HEADER) {
		uint8_t kind;
		uint32_t plen;
		uint32_t max = c->state == C_ACTIVE ? MSG_MAX_PAYLOAD
		               : c->state == C_HS_WAIT
		                   ? MSG_HELLO_MAX + MSG_JOIN_TEXT_MAX
		                   : MSG_HELLO_MAX;
		if (msg_frame_parse(c->rbuf.p + off, max, &kind, &plen) != 0) {
			if (c->state == C_HS_WAIT) {
				logf_(t, TRANSPORT_WARN,
				      "refused connection from %s: not a "
				      "lodestone node handshake",
				      c->remote);
			}
			if (c->state == C_HS_SENT) {
				hs_lost(c, "answered with something else than "
				           "a lodestone node handshake");
			}
			conn_close(c, TRANSPORT_WARN, "malformed frame");
			return;
		}
		if (c->rbuf.len - off - MSG_FRAME_HEADER < plen) {
			break;
		}
		if (off == 0 &&
		    takeable(c, kind, MSG_FRAME_HEADER + (size_t)plen) &&
		    take_frame(c, plen) == 0) {
			/* The buffer is new: go on from its start. */
			if (c->state == C_CLOSING || c->state == C_REFUSING) {
				return;
			}
			continue;
		}
		handle_frame(c, kind, c->rbuf.p + off + MSG_FRAME_HEADER, plen,
		             NULL);
		off += MSG_FRAME_HEADER + plen;
		if (c->state == C_CLOSING || c->state == C_REFUSING) {
			return;
		}
	}
	if (off > 0) {
		memmove(c->rbuf.p, c->rbuf.p + off, c->rbuf.len - off);
		c->rbuf.len -= off;
	}
	buf_release_if_big(&c->rbuf);
}

/* ---- dialing ---- */

static void on_connect(uv_connect_t *req, int status)
{
	struct conn *c = req->data;
	struct transport *t = c->t;
	char why[300];
	int rv;

	if (c->state == C_CLOSING) {
		return;
	}
	if (status < 0) {
		conn_close(c, TRANSPORT_DEBUG, uv_strerror(status));
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	rv = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
	if (rv != 0) {
		conn_close(c, TRANSPORT_INFO, uv_strerror(rv));
		return;
	}
	c->state = C_HS_SENT;
	c->opened_ms = now_ms(t);
	if (t->o.tls_client == NULL) {
		send_hello(c);
		return;
	}
	/* The server's certificate is checked against the cluster CA by the
	 * session and against the peer's id once it is up (tls_up). */
	c->tls = tls_session_new_client(t->o.tls_client, NULL);
	if (c->tls == NULL || tls_feed(c->tls, NULL, 0, why, sizeof why) != 0) {
		conn_close(c, TRANSPORT_WARN, "cannot start TLS");
		return;
	}
	mark_dirty(c);
}

static void send_hello(struct conn *c)
{
	struct transport *t = c->t;
	struct peer *p = c->peer;
	struct msg_hello h = {0};
	uint8_t *b;
	int rv;

	h.version = MSG_VERSION;
	h.from = t->o.node_id;
	h.to = p->id;
	h.cluster = t->cluster;
	h.cluster_len = strlen(t->cluster);
	b = queue_frame(c, MSG_HELLO, msg_hello_size(&h), &rv);
	if (b == NULL) {
		conn_close(c, TRANSPORT_WARN, "out of memory");
		return;
	}
	msg_hello_write(b, &h);
}

static void connect_to(struct peer *p, const struct sockaddr *sa)
{
	struct transport *t = p->t;
	struct conn *c = conn_new(t);
	int rv;

	if (c == NULL) {
		schedule_redial(p, true);
		return;
	}
	c->outbound = true;
	c->peer = p;
	c->state = C_CONNECTING;
	snprintf(c->remote, sizeof c->remote, "%s", p->address);
	c->connect.data = c;
	p->dialing = c;
	rv = uv_tcp_connect(&c->connect, &c->tcp, sa, on_connect);
	if (rv != 0) {
		conn_close(c, TRANSPORT_DEBUG, uv_strerror(rv));
	}
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct resolve *r = req->data;
	struct peer *p = r->peer;
	struct transport *t = p->t;

	t->open_handles--;
	p->resolving = false;
	if (t->closing) {
		uv_freeaddrinfo(res);
		free(r);
		maybe_finish_close(t);
		return;
	}
	if (status < 0 || res == NULL) {
		logf_(t, TRANSPORT_DEBUG, "cannot resolve %s: %s", p->host,
		      uv_strerror(status));
		schedule_redial(p, true);
	} else {
		connect_to(p, res->ai_addr);
	}
	uv_freeaddrinfo(res);
	free(r);
}

static int parse_ip(const char *host, uint16_t port,
                    struct sockaddr_storage *ss)
{
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0) {
		return 0;
	}
	if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0) {
		return 0;
	}
	return -1;
}

static void dial(struct peer *p)
{
	struct transport *t = p->t;
	struct sockaddr_storage ss;
	struct addrinfo hints;
	struct resolve *r;
	char port[8];

	if (parse_ip(p->host, p->port, &ss) == 0) {
		connect_to(p, (const struct sockaddr *)&ss);
		return;
	}
	r = calloc(1, sizeof *r);
	if (r == NULL) {
		schedule_redial(p, true);
		return;
	}
	r->peer = p;
	r->req.data = r;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof port, "%u", (unsigned)p->port);
	if (uv_getaddrinfo(t->loop, &r->req, on_resolved, p->host, port,
	                   &hints) != 0) {
		free(r);
		schedule_redial(p, true);
		return;
	}
	p->resolving = true;
	t->open_handles++;
}

/* ---- accepting ---- */

static void on_accept(uv_stream_t *server, int status)
{
	struct transport *t = server->data;
	struct sockaddr_storage ss;
	int len = sizeof ss;
	struct conn *c;

	if (status < 0 || t->closing) {
		return;
	}
	c = conn_new(t);
	if (c == NULL) {
		return;
	}
	c->state = C_HS_WAIT;
	if (t->o.tls_server != NULL) {
		c->tls = tls_session_new(t->o.tls_server);
		if (c->tls == NULL) {
			conn_close(c, TRANSPORT_WARN, "cannot start TLS");
			return;
		}
	}
	if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c, TRANSPORT_DEBUG, "accept failed");
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
		char ip[64] = "?";
		if (ss.ss_family == AF_INET6) {
			uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
			snprintf(c->remote, sizeof c->remote, "[%s]:%u", ip,
			         (unsigned)ntohs(
			             ((struct sockaddr_in6 *)&ss)->sin6_port));
		} else {
			uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
			snprintf(c->remote, sizeof c->remote, "%s:%u", ip,
			         (unsigned)ntohs(
			             ((struct sockaddr_in *)&ss)->sin_port));
		}
	}
	if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0) {
		conn_close(c, TRANSPORT_DEBUG, "read failed");
	}
}

/* ---- the tick: dials, pings, timeouts ---- */

static void timer_cb(uv_timer_t *h)
{
	struct transport *t = h->data;
	uint64_t now = now_ms(t);
	struct conn *c, *next;
	size_t i;

	for (c = t->conns; c != NULL; c = next) {
		next = c->next;
		switch (c->state) {
		case C_CONNECTING:
		case C_HS_SENT:
		case C_HS_WAIT:
		case C_REFUSING:
			if (now - c->opened_ms >= t->o.handshake_timeout_ms) {
				conn_close(c, TRANSPORT_DEBUG,
				           "handshake timed out");
			}
			break;
		case C_ACTIVE:
			if (now - c->last_read_ms >= t->o.dead_ms) {
				char why[96];
				snprintf(why, sizeof why,
				         "nothing heard for %llu ms",
				         (unsigned long long)(now -
				                              c->last_read_ms));
				conn_close(c, TRANSPORT_WARN, why);
			} else if (now - c->last_queued_ms >= t->o.ping_ms) {
				int rv;
				queue_frame(c, MSG_PING, 0, &rv);
			}
			break;
		default:
			break;
		}
	}
	for (i = 0; i < t->n_peers; i++) {
		struct peer *p = t->peers[i];
		if (p->active == NULL && p->dialing == NULL && !p->resolving &&
		    now >= p->next_dial_ms) {
			dial(p);
		}
	}
}

/* ---- public ---- */

int transport_init(struct transport **out, uv_loop_t *loop,
                   const struct transport_options *o)
{
	struct transport *t;

	*out = NULL;
	if (o == NULL || o->node_id == 0 || o->cluster_id == NULL ||
	    strlen(o->cluster_id) > MSG_CLUSTER_MAX ||
	    (o->tls_server == NULL) != (o->tls_client == NULL)) {
		return TRANSPORT_EINVAL;
	}
	t = calloc(1, sizeof *t);
	if (t == NULL) {
		return TRANSPORT_ENOMEM;
	}
	t->loop = loop;
	t->o = *o;
	snprintf(t->cluster, sizeof t->cluster, "%s", o->cluster_id);
	t->o.cluster_id = t->cluster;
	if (t->o.max_queue_bytes == 0) {
		t->o.max_queue_bytes = DEFAULT_QUEUE;
	}
	if (t->o.reconnect_min_ms == 0) {
		t->o.reconnect_min_ms = DEFAULT_RECONNECT_MIN;
	}
	if (t->o.reconnect_max_ms < t->o.reconnect_min_ms) {
		t->o.reconnect_max_ms = DEFAULT_RECONNECT_MAX;
	}
	if (t->o.handshake_timeout_ms == 0) {
		t->o.handshake_timeout_ms = DEFAULT_HANDSHAKE;
	}
	if (t->o.ping_ms == 0) {
		t->o.ping_ms = DEFAULT_PING;
	}
	if (t->o.dead_ms == 0) {
		t->o.dead_ms = DEFAULT_DEAD;
	}
	uv_timer_init(loop, &t->timer);
	t->timer.data = t;
	uv_check_init(loop, &t->check);
	t->check.data = t;
	uv_prepare_init(loop, &t->prepare);
	t->prepare.data = t;
	uv_idle_init(loop, &t->idle);
	t->idle.data = t;
	t->open_handles = 4;
	*out = t;
	return 0;
}

int transport_start(struct transport *t, const char *host, uint16_t port,
                    char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_storage bound;
	int len = sizeof bound;
	int rv;

	if (t->started || t->closing) {
		snprintf(err, errlen, "transport already started");
		return TRANSPORT_EINVAL;
	}
	if (parse_ip(host, port, &ss) != 0) {
		snprintf(err, errlen,
		         "internal listener: '%s' is not a numeric address",
		         host);
		return TRANSPORT_EINVAL;
	}
	uv_tcp_init(t->loop, &t->listener);
	t->listener.data = t;
	t->listener_init = true;
	t->open_handles++;
	rv = uv_tcp_bind(&t->listener, (const struct sockaddr *)&ss, 0);
	if (rv == 0) {
		rv = uv_listen((uv_stream_t *)&t->listener, 128, on_accept);
	}
	if (rv != 0) {
		snprintf(err, errlen, "internal listener on %s:%u: %s", host,
		         (unsigned)port, uv_strerror(rv));
		return TRANSPORT_EINVAL;
	}
	if (uv_tcp_getsockname(&t->listener, (struct sockaddr *)&bound, &len) ==
	    0) {
		t->port = ntohs(bound.ss_family == AF_INET6
		                    ? ((struct sockaddr_in6 *)&bound)->sin6_port
		                    : ((struct sockaddr_in *)&bound)->sin_port);
	}
	uv_check_start(&t->check, check_cb);
	uv_unref((uv_handle_t *)&t->check);
	uv_prepare_start(&t->prepare, prepare_cb);
	uv_unref((uv_handle_t *)&t->prepare);
	uv_timer_start(&t->timer, timer_cb, 0, TICK_MS);
	t->started = true;
	return 0;
}

uint16_t transport_port(const struct transport *t)
{
	return t->port;
}

void transport_attach(struct transport *t, struct rio_store *s)
{
	if (t->store != NULL && s != t->store) {
		rio_store_set_send(t->store, NULL, NULL);
		rio_store_set_send_ref(t->store, NULL);
	}
	t->store = s;
	if (s != NULL) {
		rio_store_set_send(s, transport_send_raft, t);
		rio_store_set_send_ref(s, transport_send_raft_ref);
	}
}

static struct conn *active_conn(const struct transport *t, uint64_t peer,
                                int *status)
{
	struct peer *p;
	if (t->closing) {
		*status = TRANSPORT_ESHUTDOWN;
		return NULL;
	}
	p = find_peer(t, peer);
	if (p == NULL) {
		*status = TRANSPORT_ENOPEER;
		return NULL;
	}
	if (p->active == NULL) {
		p->st.dropped++;
		*status = TRANSPORT_ENOCONN;
		return NULL;
	}
	return p->active;
}

uint8_t *transport_reserve(struct transport *t, uint64_t peer, uint8_t kind,
                           size_t len, int *status)
{
	struct conn *c = active_conn(t, peer, status);
	uint8_t *p;
	if (c == NULL) {
		return NULL;
	}
	p = queue_frame(c, kind, len, status);
	if (p == NULL) {
		c->peer->st.dropped++;
	} else {
		c->peer->st.frames_sent++;
	}
	return p;
}

int transport_send(struct transport *t, uint64_t peer, uint8_t kind,
                   const void *p, size_t len)
{
	int status;
	uint8_t *b = transport_reserve(t, peer, kind, len, &status);
	if (b == NULL) {
		return status;
	}
	if (len > 0) {
		memcpy(b, p, len);
	}
	return 0;
}

int transport_send_raft(void *data, uint32_t group,
                        const struct raft_message *m)
{
	struct transport *t = data;
	size_t len = msg_raft_size(m);
	uint8_t *b;
	int status;

	if (len == 0) {
		return RAFT_MALFORMED;
	}
	b = transport_reserve(t, m->server_id, MSG_RAFT, len, &status);
	if (b == NULL) {
		return status == TRANSPORT_ENOMEM ? RAFT_NOMEM
		                                  : RAFT_NOCONNECTION;
	}
	msg_raft_write(b, group, m);
	return 0;
}

int transport_send_raft_ref(void *data, uint32_t group,
                            const struct raft_message *m, struct rio_sent *sent)
{
	struct transport *t = data;
	const struct raft_append_entries *a = &m->append_entries;
	size_t len = msg_raft_size(m), payload = 0, at;
	struct conn *c;
	uint8_t *b;
	int status;

	if (m->type != RAFT_IO_APPEND_ENTRIES || len == 0) {
		return transport_send_raft(data, group, m);
	}
	for (unsigned i = 0; i < a->n_entries; i++) {
		payload += a->entries[i].buf.len;
	}
	c = active_conn(t, m->server_id, &status);
	if (c == NULL) {
		return RAFT_NOCONNECTION;
	}
	/* Small payloads are cheaper copied; TLS copies them anyway. */
	if (c->tls != NULL || payload < TAKE_MIN) {
		return transport_send_raft(data, group, m);
	}
	if (refs_reserve(&c->fill_refs, a->n_entries) != 0) {
		return RAFT_NOMEM;
	}
	b = queue_frame_away(c, MSG_RAFT, len, payload, &status);
	if (b == NULL) {
		c->peer->st.dropped++;
		return status == TRANSPORT_ENOMEM ? RAFT_NOMEM
		                                  : RAFT_NOCONNECTION;
	}
	c->peer->st.frames_sent++;
	msg_raft_write_head(b, group, m);
	at = c->fill.len;
	for (unsigned i = 0; i < a->n_entries; i++) {
		if (a->entries[i].buf.len > 0) {
			c->fill_refs.v[c->fill_refs.n++] =
			    (struct ref){.p = a->entries[i].buf.base,
			                 .len = a->entries[i].buf.len,
			                 .at = at};
		}
	}
	c->fill_refs.v[c->fill_refs.n - 1].sent = sent;
	c->fill_refs.bytes += payload;
	return RIO_SEND_LATER;
}

bool transport_connected(const struct transport *t, uint64_t peer)
{
	struct peer *p = find_peer(t, peer);
	return p != NULL && p->active != NULL;
}

uint64_t transport_conn_gen(const struct transport *t, uint64_t peer)
{
	struct peer *p = find_peer(t, peer);
	return p != NULL && p->active != NULL ? p->active->gen : 0;
}

size_t transport_queued(const struct transport *t, uint64_t peer)
{
	struct peer *p = find_peer(t, peer);
	if (p == NULL || p->active == NULL) {
		return 0;
	}
	return p->active->fill.len + p->active->out.len;
}

size_t transport_peers(const struct transport *t,
                       struct transport_peer_info *out, size_t max)
{
	size_t i;
	for (i = 0; i < t->n_peers && i < max; i++) {
		out[i] = t->peers[i]->st;
		out[i].queued = transport_queued(t, t->peers[i]->id);
	}
	return t->n_peers;
}

static void handle_closed(uv_handle_t *h)
{
	struct transport *t = h->data;
	t->open_handles--;
	maybe_finish_close(t);
}

static void maybe_finish_close(struct transport *t)
{
	if (t->closing && t->open_handles == 0 && t->close_cb != NULL) {
		transport_close_cb cb = t->close_cb;
		t->close_cb = NULL;
		cb(t, t->close_data);
	}
}

void transport_close(struct transport *t, transport_close_cb cb, void *data)
{
	struct conn *c, *next;

	if (t->closing) {
		return;
	}
	t->closing = true;
	t->close_cb = cb;
	t->close_data = data;
	if (t->store != NULL) {
		rio_store_set_send(t->store, NULL, NULL);
		rio_store_set_send_ref(t->store, NULL);
		t->store = NULL;
	}
	for (c = t->conns; c != NULL; c = next) {
		next = c->next;
		conn_close(c, TRANSPORT_DEBUG, "node stopping");
	}
	if (t->listener_init) {
		uv_close((uv_handle_t *)&t->listener, handle_closed);
	}
	uv_close((uv_handle_t *)&t->timer, handle_closed);
	uv_close((uv_handle_t *)&t->check, handle_closed);
	uv_close((uv_handle_t *)&t->prepare, handle_closed);
	uv_close((uv_handle_t *)&t->idle, handle_closed);
	t->idle_on = false;
}

void transport_free(struct transport *t)
{
	size_t i;
	if (t == NULL) {
		return;
	}
	for (i = 0; i < t->n_peers; i++) {
		free(t->peers[i]);
	}
	free(t->peers);
	free(t);
}
