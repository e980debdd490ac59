/* QUIC engine on ngtcp2 + GnuTLS + libuv; see quic.h (owner API) and
 * quic_engine.h (what quic_server.c and quic_client.c build on).
 *
 * Data path: a datagram is demultiplexed by destination connection ID and
 * fed to ngtcp2, whose callbacks hand stream bytes to the owner. Anything
 * that may need packets sent (a read, an owner write, a timer) marks the
 * connection dirty; dirty connections are flushed from a prepare and a check
 * handle, so every loop turn ends with one write pass that coalesces ACKs and
 * stream data into batches sent with one sendmsg (UDP GSO) or sendmmsg.
 * While a connection is dirty an idle handle keeps the loop from blocking:
 * a write made after our prepare ran (by another module's prepare handle,
 * e.g. a reply written when a Raft commit is applied) would otherwise wait
 * in poll for the next timer or datagram before the check sends it.
 * Each flush of a connection writes at most its congestion controller's send
 * quantum; the rest waits for the expiry timer (pacing) or the next ACK.
 *
 * Receiving: our own socket on a uv_poll handle, read with recvmmsg. Where
 * the kernel has UDP GRO, a peer's GSO burst arrives as one buffer with its
 * segment size (a UDP_GRO cmsg) and is split here into its datagrams; on
 * loopback that saves the kernel segmenting the burst and queueing each
 * datagram, most of the per-datagram receive cost. */
#include "net/quic_engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#define container_of(p, type, member)                                          \
	((type *)(void *)((char *)(p)-offsetof(type, member)))

/* Receiving: recvmmsg into 20 slots of 64 KiB, each big enough for a UDP
 * GRO super-datagram (up to 64 coalesced datagrams of one flow). One poll
 * callback makes at most RX_CALLS calls and stops early once RX_BUDGET
 * datagrams were handled, so that a flood cannot starve the loop (libuv
 * bounds its own receive loop the same way). */
#define RX_SLOT 65536
#define RX_SLOTS 20
#define RX_CALLS 32
#define RX_BUDGET 1280
/* One send batch: at most 64 datagrams (the GSO segment limit) and 64000
 * bytes (a GSO super-datagram must fit an IP packet). */
#define TX_BATCH_PKTS 64
#define TX_BATCH_BYTES 64000
#define TX_BUF_LEN (TX_BATCH_BYTES + 2048)
/* Active connection IDs we accept from the peer. */
#define ACTIVE_CID_LIMIT 8
/* Vectors handed to ngtcp2 per stream write. */
#define STREAM_VECS 16

/* Intrusive doubly-linked list; an element linked to itself is in no
 * list. */
struct qlist {
	struct qlist *prev;
	struct qlist *next;
};

static void qlist_init(struct qlist *l)
{
	l->prev = l;
	l->next = l;
}

static bool qlist_empty(const struct qlist *l)
{
	return l->next == l;
}

static bool qlist_linked(const struct qlist *e)
{
	return e->next != e;
}

static void qlist_push(struct qlist *head, struct qlist *e)
{
	e->prev = head->prev;
	e->next = head;
	head->prev->next = e;
	head->prev = e;
}

static void qlist_remove(struct qlist *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	qlist_init(e);
}

static struct qlist *qlist_pop(struct qlist *head)
{
	struct qlist *e = head->next;
	if (e == head) {
		return NULL;
	}
	qlist_remove(e);
	return e;
}

/* Bytes written to a stream and not yet acknowledged. Either inline (a
 * copy) or a slice of a shared buffer. */
struct chunk {
	struct chunk *next;
	uint64_t end; /* stream offset just past these bytes */
	const uint8_t *base;
	size_t len;
	struct quic_sbuf *sbuf; /* referenced, or NULL: bytes follow inline */
	uint8_t inline_data[];
};

struct quic_stream {
	int64_t id;
	struct quic_stream *hnext; /* hash chain */
	struct qlist send_link;    /* in conn->sendable */
	struct qlist want_link;    /* in conn->want or conn->notify */
	struct chunk *head;        /* oldest unacknowledged */
	struct chunk *tail;
	struct chunk *cur; /* first chunk with unsent bytes, NULL: all sent */
	size_t cur_off;
	uint64_t acked;     /* stream offset acknowledged by the peer */
	uint64_t written;   /* stream offset after every accepted write */
	size_t blocked_len; /* length of the last refused write */
	bool want_writable;
	bool notify_pending;
	bool fin_queued;
	bool fin_sent;
	bool fc_blocked; /* peer's stream flow control window is full */
	bool wr_done;    /* our side was reset: nothing more is sent */
	bool manual_consume;
	void *data;
};

enum conn_state {
	CONN_HANDSHAKE = 0,
	CONN_OPEN,
	CONN_CLOSING,  /* we sent CONNECTION_CLOSE */
	CONN_DRAINING, /* the peer did */
	CONN_DEAD,     /* freed once its timer handle is closed */
};

struct quic_conn {
	struct quic_endpoint *ep;
	struct qlist link;       /* ep->conns */
	struct qlist dirty_link; /* ep->dirty */
	ngtcp2_conn *ng;
	gnutls_session_t tls;
	ngtcp2_crypto_conn_ref conn_ref;
	uv_timer_t timer;
	enum conn_state state;
	bool server;
	bool visible;  /* the owner knows this connection */
	bool notified; /* on_conn_close ran (or the owner never knew it) */
	bool close_requested;
	bool handshake_done;
	bool peer_reset; /* a stateless reset arrived */
	bool avail_bidi; /* on_streams_available pending */
	bool avail_uni;
	bool acked; /* acknowledgements freed memory since the last check */
	struct sockaddr_storage remote;
	socklen_t remote_len;
	ngtcp2_connection_close_error ccerr; /* what we send when closing */
	char ccerr_reason[QUIC_REASON_MAX];
	uint8_t *closebuf; /* our CONNECTION_CLOSE packet, resent in closing */
	size_t closelen;
	uint64_t close_rx;
	ngtcp2_cid *cids; /* every connection ID mapped to us */
	size_t ncids;
	size_t cids_cap;
	struct quic_stream **sbuckets;
	size_t nbuckets;
	size_t nstreams;
	struct qlist sendable;
	struct qlist want;
	struct qlist notify;
	size_t queued; /* unacknowledged bytes, all streams */
	char alpn[64];
	void *data;
};

struct cid_entry {
	struct cid_entry *next;
	ngtcp2_cid cid;
	struct quic_conn *c;
};

struct quic_endpoint {
	uv_loop_t *loop;
	/* Our own UDP socket `fd`, polled for reading always and for writing
	 * while `pend` waits; the poll handle's close callback closes it. */
	uv_poll_t poll;
	uv_prepare_t prepare;
	uv_check_t check;
	uv_idle_t wake; /* active while `dirty` holds a connection */
	struct quic_endpoint_config cfg;
	int fd;
	struct sockaddr_storage local;
	socklen_t local_len;
	uint8_t secret[QUIC_SECRET_LEN];
	uint64_t hash_key;
	struct cid_entry **cbuckets;
	size_t ncbuckets;
	size_t ncids;
	struct qlist conns;
	struct qlist dirty;
	size_t nconns;
	unsigned handles; /* open libuv handles, connection timers included */
	bool closing;     /* quic_endpoint_close() was called */
	bool sock_closed; /* no more sends */
	/* Inside ngtcp2 (packet processing, expiry): a close asked for by an
	 * owner callback from there waits for the next flush. */
	unsigned ng_depth;
	bool close_deferred;
	uint64_t close_code;
	char close_reason[QUIC_REASON_MAX];
	quic_endpoint_closed_fn closed_cb;
	void *closed_arg;
	uint8_t *rxbuf; /* RX_SLOTS slots of RX_SLOT bytes */
	struct mmsghdr rx_mm[RX_SLOTS];
	struct iovec rx_iov[RX_SLOTS];
	struct sockaddr_storage rx_from[RX_SLOTS];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} rx_ctl[RX_SLOTS];
	uint8_t *txbuf;
	bool gso;
	bool gro; /* the socket delivers coalesced datagrams (UDP_GRO) */
	bool polling_out;
	struct {
		uint8_t *buf; /* datagrams the socket refused, sent later */
		size_t len;
		size_t off;
		size_t seg;
		struct sockaddr_storage to;
		socklen_t tolen;
		bool active;
	} pend;
	struct quic_endpoint_stats stats;
};

static void conn_mark_dirty(struct quic_conn *c);
static void ep_wake_update(struct quic_endpoint *ep);
static void conn_flush(struct quic_conn *c);
static void conn_start_closing(struct quic_conn *c);
static void conn_destroy(struct quic_conn *c);
static void ep_flush(struct quic_endpoint *ep);
static void ep_handle_closed(struct quic_endpoint *ep);
static int ep_send_batch(struct quic_endpoint *ep, const struct sockaddr *to,
                         socklen_t tolen, const uint8_t *data, size_t len,
                         size_t seg, bool may_pend);

static ngtcp2_tstamp now_ns(void)
{
	return uv_hrtime();
}

static socklen_t sockaddr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                 : sizeof(struct sockaddr_in);
}

void quic_endpoint_log(const struct quic_endpoint *ep,
                       enum quic_log_level level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (ep->cfg.log == NULL) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	ep->cfg.log(ep->cfg.log_arg, level, msg);
}

const char *quic_strerror(int rv)
{
	switch (rv) {
	case 0:
		return "success";
	case QUIC_EAGAIN:
		return "send buffer full";
	case QUIC_ESTREAM:
		return "no such stream, or its sending side has ended";
	case QUIC_ELIMIT:
		return "stream limit reached";
	case QUIC_ECLOSED:
		return "connection closed";
	case QUIC_ENOMEM:
		return "out of memory";
	case QUIC_EINVAL:
		return "invalid argument";
	default:
		return "unknown error";
	}
}

/* ---- shared buffers ---- */

struct quic_sbuf *quic_sbuf_new(size_t len)
{
	struct quic_sbuf *b = malloc(sizeof *b + (len ? len : 1));
	if (b == NULL) {
		return NULL;
	}
	b->data = (uint8_t *)(b + 1);
	b->len = len;
	b->refs = 1;
	b->owns_data = false;
	return b;
}

struct quic_sbuf *quic_sbuf_take(uint8_t *data, size_t len)
{
	struct quic_sbuf *b = malloc(sizeof *b);
	if (b == NULL) {
		return NULL;
	}
	b->data = data;
	b->len = len;
	b->refs = 1;
	b->owns_data = true;
	return b;
}

struct quic_sbuf *quic_sbuf_copy(const void *data, size_t len)
{
	struct quic_sbuf *b = quic_sbuf_new(len);
	if (b != NULL && len > 0) {
		memcpy(b->data, data, len);
	}
	return b;
}

void quic_sbuf_ref(struct quic_sbuf *b)
{
	b->refs++;
}

void quic_sbuf_unref(struct quic_sbuf *b)
{
	if (b == NULL || --b->refs > 0) {
		return;
	}
	if (b->owns_data) {
		free(b->data);
	}
	free(b);
}

/* ---- limits ---- */

void quic_limits_server_default(struct quic_limits *l)
{
	l->initial_max_data = 8u << 20;
	l->initial_max_stream_data = 1u << 20;
	l->max_window = 32u << 20;
	l->max_stream_window = 8u << 20;
	l->max_streams_bidi = 256;
	l->max_streams_uni = 16;
	l->idle_timeout_ms = 30000;
	l->keepalive_ms = 10000;
	l->handshake_timeout_ms = 10000;
	l->stream_send_buf_max = 1u << 20;
	l->conn_send_buf_max = 16u << 20;
	l->no_udp_gro = false;
}

void quic_limits_client_default(struct quic_limits *l)
{
	quic_limits_server_default(l);
	l->max_streams_bidi = 16;
	l->max_streams_uni = 1024;
	l->keepalive_ms = 0;
}

/* ---- connection ID table (endpoint-wide) ---- */

static uint64_t cid_hash(const struct quic_endpoint *ep, const uint8_t *d,
                         size_t n)
{
	/* Keyed so that a peer choosing its Initial DCIDs cannot aim at one
	 * bucket. */
	uint64_t h = ep->hash_key ^ (uint64_t)n;
	for (size_t i = 0; i < n; i++) {
		h ^= d[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static struct quic_conn *cid_lookup(const struct quic_endpoint *ep,
                                    const uint8_t *d, size_t n)
{
	size_t b = cid_hash(ep, d, n) & (ep->ncbuckets - 1);
	for (struct cid_entry *e = ep->cbuckets[b]; e != NULL; e = e->next) {
		if (e->cid.datalen == n && memcmp(e->cid.data, d, n) == 0) {
			return e->c;
		}
	}
	return NULL;
}

static int cid_table_grow(struct quic_endpoint *ep)
{
	size_t n = ep->ncbuckets * 2;
	struct cid_entry **nb = calloc(n, sizeof *nb);
	if (nb == NULL) {
		return -1;
	}
	for (size_t i = 0; i < ep->ncbuckets; i++) {
		struct cid_entry *e = ep->cbuckets[i];
		while (e != NULL) {
			struct cid_entry *next = e->next;
			size_t b =
			    cid_hash(ep, e->cid.data, e->cid.datalen) & (n - 1);
			e->next = nb[b];
			nb[b] = e;
			e = next;
		}
	}
	free(ep->cbuckets);
	ep->cbuckets = nb;
	ep->ncbuckets = n;
	return 0;
}

static void cid_unmap_one(struct quic_endpoint *ep, const ngtcp2_cid *cid)
{
	size_t b = cid_hash(ep, cid->data, cid->datalen) & (ep->ncbuckets - 1);
	for (struct cid_entry **pp = &ep->cbuckets[b]; *pp != NULL;
	     pp = &(*pp)->next) {
		struct cid_entry *e = *pp;
		if (ngtcp2_cid_eq(&e->cid, cid)) {
			*pp = e->next;
			free(e);
			ep->ncids--;
			return;
		}
	}
}

/* Maps `cid` to `c`, remembering it in the connection's list. */
static int conn_map_cid(struct quic_conn *c, const ngtcp2_cid *cid)
{
	struct quic_endpoint *ep = c->ep;
	if (cid_lookup(ep, cid->data, cid->datalen) != NULL) {
		return 0;
	}
	if (c->ncids == c->cids_cap) {
		size_t cap = c->cids_cap ? c->cids_cap * 2 : 4;
		ngtcp2_cid *n = realloc(c->cids, cap * sizeof *n);
		if (n == NULL) {
			return -1;
		}
		c->cids = n;
		c->cids_cap = cap;
	}
	if (ep->ncids >= ep->ncbuckets && cid_table_grow(ep) != 0) {
		return -1;
	}
	struct cid_entry *e = malloc(sizeof *e);
	if (e == NULL) {
		return -1;
	}
	e->cid = *cid;
	e->c = c;
	size_t b = cid_hash(ep, cid->data, cid->datalen) & (ep->ncbuckets - 1);
	e->next = ep->cbuckets[b];
	ep->cbuckets[b] = e;
	ep->ncids++;
	c->cids[c->ncids++] = *cid;
	return 0;
}

static void conn_unmap_cid(struct quic_conn *c, const ngtcp2_cid *cid)
{
	for (size_t i = 0; i < c->ncids; i++) {
		if (ngtcp2_cid_eq(&c->cids[i], cid)) {
			cid_unmap_one(c->ep, cid);
			c->cids[i] = c->cids[--c->ncids];
			return;
		}
	}
}

/* ---- streams ---- */

static size_t stream_bucket(const struct quic_conn *c, int64_t id)
{
	return (size_t)(((uint64_t)id * 0x9E3779B97F4A7C15ULL) >> 32) &
	       (c->nbuckets - 1);
}

static struct quic_stream *stream_find(const struct quic_conn *c, int64_t id)
{
	if (c->sbuckets == NULL) {
		return NULL;
	}
	for (struct quic_stream *s = c->sbuckets[stream_bucket(c, id)];
	     s != NULL; s = s->hnext) {
		if (s->id == id) {
			return s;
		}
	}
	return NULL;
}

static int stream_table_grow(struct quic_conn *c)
{
	size_t old = c->nbuckets;
	struct quic_stream **ob = c->sbuckets;
	size_t n = old ? old * 2 : 16;
	struct quic_stream **nb = calloc(n, sizeof *nb);
	if (nb == NULL) {
		return -1;
	}
	c->sbuckets = nb;
	c->nbuckets = n;
	for (size_t i = 0; i < old; i++) {
		struct quic_stream *s = ob[i];
		while (s != NULL) {
			struct quic_stream *next = s->hnext;
			size_t b = stream_bucket(c, s->id);
			s->hnext = nb[b];
			nb[b] = s;
			s = next;
		}
	}
	free(ob);
	return 0;
}

static struct quic_stream *stream_new(struct quic_conn *c)
{
	if (c->nstreams >= c->nbuckets && stream_table_grow(c) != 0) {
		return NULL;
	}
	struct quic_stream *s = calloc(1, sizeof *s);
	if (s == NULL) {
		return NULL;
	}
	s->id = -1;
	qlist_init(&s->send_link);
	qlist_init(&s->want_link);
	return s;
}

static void stream_insert(struct quic_conn *c, struct quic_stream *s,
                          int64_t id)
{
	size_t b;
	s->id = id;
	b = stream_bucket(c, id);
	s->hnext = c->sbuckets[b];
	c->sbuckets[b] = s;
	c->nstreams++;
}

static void chunk_free(struct chunk *k)
{
	quic_sbuf_unref(k->sbuf);
	free(k);
}

/* Unlinks `s` from every list and frees it with its unacknowledged data. */
static void stream_destroy(struct quic_conn *c, struct quic_stream *s)
{
	struct quic_stream **pp = &c->sbuckets[stream_bucket(c, s->id)];
	while (*pp != NULL && *pp != s) {
		pp = &(*pp)->hnext;
	}
	if (*pp == s) {
		*pp = s->hnext;
		c->nstreams--;
	}
	qlist_remove(&s->send_link);
	qlist_remove(&s->want_link);
	if (s->written != s->acked) {
		/* Freed connection budget may let a refused write go. */
		c->queued -= (size_t)(s->written - s->acked);
		c->acked = true;
	}
	while (s->head != NULL) {
		struct chunk *k = s->head;
		s->head = k->next;
		chunk_free(k);
	}
	free(s);
}

static bool stream_has_unsent(const struct quic_stream *s)
{
	if (s->wr_done) {
		return false;
	}
	return s->cur != NULL || (s->fin_queued && !s->fin_sent);
}

static void stream_update_sendable(struct quic_conn *c, struct quic_stream *s)
{
	bool want = stream_has_unsent(s) && !s->fc_blocked;
	if (want && !qlist_linked(&s->send_link)) {
		qlist_push(&c->sendable, &s->send_link);
	} else if (!want && qlist_linked(&s->send_link)) {
		qlist_remove(&s->send_link);
	}
}

/* Fills `vec` from the first unsent byte; *all says it reaches the end of
 * what was written. */
static size_t stream_vecs(const struct quic_stream *s, ngtcp2_vec *vec,
                          size_t max, bool *all)
{
	size_t n = 0;
	const struct chunk *k = s->cur;
	size_t off = s->cur_off;
	while (k != NULL && n < max) {
		vec[n].base = (uint8_t *)k->base + off;
		vec[n].len = k->len - off;
		n++;
		off = 0;
		k = k->next;
	}
	*all = (k == NULL);
	return n;
}

static void stream_advance(struct quic_conn *c, struct quic_stream *s, size_t n,
                           bool fin_given)
{
	while (n > 0 && s->cur != NULL) {
		size_t avail = s->cur->len - s->cur_off;
		size_t take = n < avail ? n : avail;
		s->cur_off += take;
		n -= take;
		if (s->cur_off == s->cur->len) {
			s->cur = s->cur->next;
			s->cur_off = 0;
		}
	}
	if (fin_given && s->cur == NULL) {
		s->fin_sent = true;
	}
	stream_update_sendable(c, s);
}

static bool stream_fits(const struct quic_conn *c, const struct quic_stream *s,
                        size_t len)
{
	const struct quic_limits *l = &c->ep->cfg.limits;
	size_t sq = (size_t)(s->written - s->acked);
	if (sq != 0 && sq + len > l->stream_send_buf_max) {
		return false;
	}
	if (c->queued != 0 && c->queued + len > l->conn_send_buf_max) {
		return false;
	}
	return true;
}

/* Moves streams whose refused write now fits to the notify list. */
static void conn_check_writable(struct quic_conn *c)
{
	struct qlist *e = c->want.next;
	c->acked = false;
	while (e != &c->want) {
		struct qlist *next = e->next;
		struct quic_stream *s =
		    container_of(e, struct quic_stream, want_link);
		if (stream_fits(c, s, s->blocked_len)) {
			qlist_remove(e);
			s->want_writable = false;
			s->notify_pending = true;
			qlist_push(&c->notify, e);
		}
		e = next;
	}
}

/* Delivers deferred notifications: writable streams and stream credit. */
static void conn_dispatch(struct quic_conn *c)
{
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	struct qlist *e;
	if (c->state != CONN_OPEN || c->notified) {
		return;
	}
	if (c->acked) {
		conn_check_writable(c);
	}
	/* Pop before calling: the callback may free any stream. */
	while (c->state == CONN_OPEN && (e = qlist_pop(&c->notify)) != NULL) {
		struct quic_stream *s =
		    container_of(e, struct quic_stream, want_link);
		s->notify_pending = false;
		if (cb->on_stream_writable != NULL) {
			cb->on_stream_writable(c, s->id);
		}
	}
	if (c->avail_bidi && c->state == CONN_OPEN) {
		c->avail_bidi = false;
		if (cb->on_streams_available != NULL) {
			cb->on_streams_available(c, true);
		}
	}
	if (c->avail_uni && c->state == CONN_OPEN) {
		c->avail_uni = false;
		if (cb->on_streams_available != NULL) {
			cb->on_streams_available(c, false);
		}
	}
}

/* ---- close notification ---- */

static const char *transport_error_name(uint64_t code)
{
	switch (code) {
	case 0x0:
		return "NO_ERROR";
	case 0x1:
		return "INTERNAL_ERROR";
	case 0x2:
		return "CONNECTION_REFUSED";
	case 0x3:
		return "FLOW_CONTROL_ERROR";
	case 0x4:
		return "STREAM_LIMIT_ERROR";
	case 0x5:
		return "STREAM_STATE_ERROR";
	case 0x6:
		return "FINAL_SIZE_ERROR";
	case 0x7:
		return "FRAME_ENCODING_ERROR";
	case 0x8:
		return "TRANSPORT_PARAMETER_ERROR";
	case 0x9:
		return "CONNECTION_ID_LIMIT_ERROR";
	case 0xa:
		return "PROTOCOL_VIOLATION";
	case 0xb:
		return "INVALID_TOKEN";
	case 0xc:
		return "APPLICATION_ERROR";
	case 0xd:
		return "CRYPTO_BUFFER_EXCEEDED";
	case 0xe:
		return "KEY_UPDATE_ERROR";
	case 0xf:
		return "AEAD_LIMIT_REACHED";
	case 0x10:
		return "NO_VIABLE_PATH";
	default:
		return NULL;
	}
}

/* "application error 7" / "transport error 0x2 CONNECTION_REFUSED" /
 * "TLS alert 120 no_application_protocol". */
static void describe_error(char *buf, size_t len, bool app, uint64_t code)
{
	if (app) {
		snprintf(buf, len, "application error %llu",
		         (unsigned long long)code);
		return;
	}
	if (code >= 0x100 && code <= 0x1ff) {
		/* GnuTLS names it GNUTLS_A_BAD_CERTIFICATE; RFC 8446 says
		 * bad_certificate. */
		const char *alert = gnutls_alert_get_strname(
		    (gnutls_alert_description_t)(code - 0x100));
		char name[64] = "";
		size_t i = 0;
		if (alert != NULL && strncmp(alert, "GNUTLS_A_", 9) == 0) {
			alert += 9;
		}
		for (; alert != NULL && alert[i] && i < sizeof name - 1; i++) {
			name[i] = (char)(alert[i] >= 'A' && alert[i] <= 'Z'
			                     ? alert[i] - 'A' + 'a'
			                     : alert[i]);
		}
		name[i] = '\0';
		snprintf(buf, len, "TLS alert %u %s", (unsigned)(code - 0x100),
		         name);
		return;
	}
	const char *name = transport_error_name(code);
	snprintf(buf, len, "transport error 0x%llx%s%s",
	         (unsigned long long)code, name ? " " : "", name ? name : "");
}

/* Tells the owner (once) that the connection is over: on_stream_close for
 * every stream, then on_conn_close. */
static void conn_notify_close(struct quic_conn *c, enum quic_close_origin o,
                              bool app, uint64_t code, const char *reason,
                              size_t reasonlen, const char *detail)
{
	struct quic_endpoint *ep = c->ep;
	const struct quic_callbacks *cb = &ep->cfg.callbacks;
	char rbuf[QUIC_REASON_MAX];
	char ebuf[96];
	char msg[384];
	struct quic_close_info info;

	if (c->notified) {
		return;
	}
	c->notified = true;
	if (!c->handshake_done) {
		ep->stats.handshakes_failed++;
	}
	if (reasonlen >= sizeof rbuf) {
		reasonlen = sizeof rbuf - 1;
	}
	if (reasonlen > 0) {
		memcpy(rbuf, reason, reasonlen);
	}
	rbuf[reasonlen] = '\0';
	describe_error(ebuf, sizeof ebuf, app, code);
	switch (o) {
	case QUIC_CLOSE_LOCAL:
		snprintf(msg, sizeof msg, "closed locally: %s%s%s",
		         detail ? detail : ebuf, reasonlen ? ": " : "", rbuf);
		break;
	case QUIC_CLOSE_PEER:
		snprintf(msg, sizeof msg, "peer closed: %s%s%s", ebuf,
		         reasonlen ? ": " : "", rbuf);
		break;
	case QUIC_CLOSE_IDLE:
		snprintf(msg, sizeof msg, "idle timeout");
		break;
	case QUIC_CLOSE_HANDSHAKE_TIMEOUT:
		snprintf(msg, sizeof msg,
		         "handshake timed out (no answer from the peer)");
		break;
	case QUIC_CLOSE_RESET:
		snprintf(msg, sizeof msg,
		         "peer sent a stateless reset (it lost the "
		         "connection)");
		break;
	}
	if (!c->visible) {
		quic_endpoint_log(ep, QUIC_LOG_DEBUG,
		                  "handshake with a peer failed: %s", msg);
		return;
	}
	for (size_t i = 0; i < c->nbuckets; i++) {
		for (struct quic_stream *s = c->sbuckets[i]; s != NULL;
		     s = s->hnext) {
			if (cb->on_stream_close != NULL) {
				cb->on_stream_close(c, s->id,
				                    QUIC_STREAM_CONN_CLOSED);
			}
		}
	}
	info.origin = o;
	info.app = app;
	info.error_code = code;
	info.reason = rbuf;
	info.message = msg;
	info.handshake_done = c->handshake_done;
	if (cb->on_conn_close != NULL) {
		cb->on_conn_close(c, &info);
	}
}

/* ---- ngtcp2 callbacks ---- */

static ngtcp2_conn *conn_ref_get(ngtcp2_crypto_conn_ref *ref)
{
	struct quic_conn *c = ref->user_data;
	return c->ng;
}

static int cb_handshake_completed(ngtcp2_conn *ng, void *user_data)
{
	struct quic_conn *c = user_data;
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	gnutls_datum_t p;

	c->handshake_done = true;
	c->state = CONN_OPEN;
	c->ep->stats.handshakes_done++;
	if (gnutls_alpn_get_selected_protocol(c->tls, &p) == 0 &&
	    p.size < sizeof c->alpn) {
		memcpy(c->alpn, p.data, p.size);
		c->alpn[p.size] = '\0';
	}
	if (c->ep->cfg.limits.keepalive_ms > 0) {
		ngtcp2_conn_set_keep_alive_timeout(
		    ng, c->ep->cfg.limits.keepalive_ms * NGTCP2_MILLISECONDS);
	}
	c->visible = true;
	if (cb->on_conn_open != NULL) {
		cb->on_conn_open(c);
	}
	return 0;
}

static int cb_recv_stream_data(ngtcp2_conn *ng, uint32_t flags,
                               int64_t stream_id, uint64_t offset,
                               const uint8_t *data, size_t datalen,
                               void *user_data, void *stream_user_data)
{
	struct quic_conn *c = user_data;
	struct quic_stream *s = stream_user_data;
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	bool fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
	/* Read before the callback, which may close the stream. */
	bool manual = s != NULL && s->manual_consume;

	if (s != NULL && !c->notified && c->state == CONN_OPEN &&
	    cb->on_stream_data != NULL) {
		cb->on_stream_data(c, stream_id, data, datalen, fin);
	} else {
		manual = false;
	}
	if (!manual && datalen > 0) {
		ngtcp2_conn_extend_max_stream_offset(ng, stream_id, datalen);
		ngtcp2_conn_extend_max_offset(ng, datalen);
	}
	return 0;
}

static int cb_acked_stream_data_offset(ngtcp2_conn *ng, int64_t stream_id,
                                       uint64_t offset, uint64_t datalen,
                                       void *user_data, void *stream_user_data)
{
	struct quic_conn *c = user_data;
	struct quic_stream *s = stream_user_data;
	uint64_t end = offset + datalen;
	if (s == NULL || end <= s->acked) {
		return 0;
	}
	if (end > s->written) {
		end = s->written;
	}
	c->queued -= (size_t)(end - s->acked);
	s->acked = end;
	while (s->head != NULL && s->head->end <= s->acked &&
	       s->head != s->cur) {
		struct chunk *k = s->head;
		s->head = k->next;
		if (s->tail == k) {
			s->tail = NULL;
		}
		chunk_free(k);
	}
	c->acked = true;
	return 0;
}

static int cb_stream_open(ngtcp2_conn *ng, int64_t stream_id, void *user_data)
{
	struct quic_conn *c = user_data;
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	struct quic_stream *s = stream_new(c);
	if (s == NULL) {
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	stream_insert(c, s, stream_id);
	ngtcp2_conn_set_stream_user_data(ng, stream_id, s);
	if (!c->notified && cb->on_stream_open != NULL) {
		cb->on_stream_open(c, stream_id,
		                   ngtcp2_is_bidi_stream(stream_id) != 0);
	}
	return 0;
}

static int cb_stream_close(ngtcp2_conn *ng, uint32_t flags, int64_t stream_id,
                           uint64_t app_error_code, void *user_data,
                           void *stream_user_data)
{
	struct quic_conn *c = user_data;
	struct quic_stream *s = stream_user_data;
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	uint64_t code = (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)
	                    ? app_error_code
	                    : 0;
	if (s != NULL) {
		if (!c->notified && cb->on_stream_close != NULL) {
			cb->on_stream_close(c, stream_id, code);
		}
		stream_destroy(c, s);
	}
	/* Let the peer open another one in its place. */
	if (!ngtcp2_conn_is_local_stream(ng, stream_id)) {
		if (ngtcp2_is_bidi_stream(stream_id)) {
			ngtcp2_conn_extend_max_streams_bidi(ng, 1);
		} else {
			ngtcp2_conn_extend_max_streams_uni(ng, 1);
		}
	}
	return 0;
}

static int cb_stream_reset(ngtcp2_conn *ng, int64_t stream_id,
                           uint64_t final_size, uint64_t app_error_code,
                           void *user_data, void *stream_user_data)
{
	struct quic_conn *c = user_data;
	const struct quic_callbacks *cb = &c->ep->cfg.callbacks;
	if (stream_user_data != NULL && !c->notified &&
	    cb->on_stream_reset != NULL) {
		cb->on_stream_reset(c, stream_id, app_error_code);
	}
	return 0;
}

static int cb_extend_max_stream_data(ngtcp2_conn *ng, int64_t stream_id,
                                     uint64_t max_data, void *user_data,
                                     void *stream_user_data)
{
	struct quic_conn *c = user_data;
	struct quic_stream *s = stream_user_data;
	if (s != NULL && s->fc_blocked) {
		s->fc_blocked = false;
		stream_update_sendable(c, s);
		conn_mark_dirty(c);
	}
	return 0;
}

static int cb_extend_max_local_streams_bidi(ngtcp2_conn *ng,
                                            uint64_t max_streams,
                                            void *user_data)
{
	struct quic_conn *c = user_data;
	if (c->handshake_done) {
		c->avail_bidi = true;
	}
	return 0;
}

static int cb_extend_max_local_streams_uni(ngtcp2_conn *ng,
                                           uint64_t max_streams,
                                           void *user_data)
{
	struct quic_conn *c = user_data;
	if (c->handshake_done) {
		c->avail_uni = true;
	}
	return 0;
}

static void cb_rand(uint8_t *dest, size_t destlen,
                    const ngtcp2_rand_ctx *rand_ctx)
{
	(void)rand_ctx;
	(void)gnutls_rnd(GNUTLS_RND_NONCE, dest, destlen);
}

static int cb_get_new_connection_id(ngtcp2_conn *ng, ngtcp2_cid *cid,
                                    uint8_t *token, size_t cidlen,
                                    void *user_data)
{
	struct quic_conn *c = user_data;
	if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0) {
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	cid->datalen = cidlen;
	if (ngtcp2_crypto_generate_stateless_reset_token(
	        token, c->ep->secret, sizeof c->ep->secret, cid) != 0) {
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	if (conn_map_cid(c, cid) != 0) {
		return NGTCP2_ERR_CALLBACK_FAILURE;
	}
	return 0;
}

static int cb_remove_connection_id(ngtcp2_conn *ng, const ngtcp2_cid *cid,
                                   void *user_data)
{
	conn_unmap_cid(user_data, cid);
	return 0;
}

static int cb_recv_stateless_reset(ngtcp2_conn *ng,
                                   const ngtcp2_pkt_stateless_reset *sr,
                                   void *user_data)
{
	struct quic_conn *c = user_data;
	c->peer_reset = true;
	return 0;
}

static void conn_callbacks(ngtcp2_callbacks *cb, bool server)
{
	memset(cb, 0, sizeof *cb);
	if (server) {
		cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
	} else {
		cb->client_initial = ngtcp2_crypto_client_initial_cb;
		cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
	}
	cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
	cb->handshake_completed = cb_handshake_completed;
	cb->encrypt = ngtcp2_crypto_encrypt_cb;
	cb->decrypt = ngtcp2_crypto_decrypt_cb;
	cb->hp_mask = ngtcp2_crypto_hp_mask_cb;
	cb->recv_stream_data = cb_recv_stream_data;
	cb->acked_stream_data_offset = cb_acked_stream_data_offset;
	cb->stream_open = cb_stream_open;
	cb->stream_close = cb_stream_close;
	cb->recv_stateless_reset = cb_recv_stateless_reset;
	cb->extend_max_local_streams_bidi = cb_extend_max_local_streams_bidi;
	cb->extend_max_local_streams_uni = cb_extend_max_local_streams_uni;
	cb->rand = cb_rand;
	cb->get_new_connection_id = cb_get_new_connection_id;
	cb->remove_connection_id = cb_remove_connection_id;
	cb->update_key = ngtcp2_crypto_update_key_cb;
	cb->stream_reset = cb_stream_reset;
	cb->extend_max_stream_data = cb_extend_max_stream_data;
	cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
	cb->delete_crypto_cipher_ctx =
	    ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
	cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
	cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
}

static void conn_settings(const struct quic_endpoint *ep, ngtcp2_settings *st,
                          ngtcp2_transport_params *p)
{
	const struct quic_limits *l = &ep->cfg.limits;
	ngtcp2_settings_default(st);
	st->initial_ts = now_ns();
	st->max_window = l->max_window;
	st->max_stream_window = l->max_stream_window;
	st->handshake_timeout =
	    l->handshake_timeout_ms > 0
	        ? l->handshake_timeout_ms * NGTCP2_MILLISECONDS
	        : UINT64_MAX;
	ngtcp2_transport_params_default(p);
	p->initial_max_data = l->initial_max_data;
	p->initial_max_stream_data_bidi_local = l->initial_max_stream_data;
	p->initial_max_stream_data_bidi_remote = l->initial_max_stream_data;
	p->initial_max_stream_data_uni = l->initial_max_stream_data;
	p->initial_max_streams_bidi = l->max_streams_bidi;
	p->initial_max_streams_uni = l->max_streams_uni;
	p->max_idle_timeout = l->idle_timeout_ms * NGTCP2_MILLISECONDS;
	p->active_connection_id_limit = ACTIVE_CID_LIMIT;
}

/* ---- connection lifecycle ---- */

static void on_conn_timer_closed(uv_handle_t *h)
{
	struct quic_conn *c = h->data;
	struct quic_endpoint *ep = c->ep;
	free(c);
	ep_handle_closed(ep);
}

static struct quic_conn *conn_alloc(struct quic_endpoint *ep,
                                    const struct sockaddr *remote,
                                    gnutls_session_t tls, bool server)
{
	struct quic_conn *c = calloc(1, sizeof *c);
	if (c == NULL) {
		return NULL;
	}
	c->ep = ep;
	c->server = server;
	c->tls = tls;
	qlist_init(&c->link);
	qlist_init(&c->dirty_link);
	qlist_init(&c->sendable);
	qlist_init(&c->want);
	qlist_init(&c->notify);
	c->remote_len = sockaddr_len(remote);
	memcpy(&c->remote, remote, c->remote_len);
	c->conn_ref.get_conn = conn_ref_get;
	c->conn_ref.user_data = c;
	ngtcp2_connection_close_error_default(&c->ccerr);
	if (stream_table_grow(c) != 0) {
		free(c);
		return NULL;
	}
	uv_timer_init(ep->loop, &c->timer);
	c->timer.data = c;
	ep->handles++;
	gnutls_session_set_ptr(tls, &c->conn_ref);
	qlist_push(&ep->conns, &c->link);
	ep->nconns++;
	ep->stats.conns_created++;
	return c;
}

static void conn_mark_dirty(struct quic_conn *c)
{
	if (c->state >= CONN_CLOSING && !c->close_requested) {
		return;
	}
	if (!qlist_linked(&c->dirty_link)) {
		qlist_push(&c->ep->dirty, &c->dirty_link);
	}
	ep_wake_update(c->ep);
}

static void on_conn_timer(uv_timer_t *t);

static void conn_arm_timer(struct quic_conn *c)
{
	ngtcp2_tstamp expiry = ngtcp2_conn_get_expiry(c->ng);
	ngtcp2_tstamp now = now_ns();
	uint64_t ms;
	if (expiry == UINT64_MAX) {
		uv_timer_stop(&c->timer);
		return;
	}
	/* ngtcp2 allows sending up to 1 ms ahead of its pacing time, so a
	 * sub-millisecond expiry runs on the next loop turn. */
	ms = expiry <= now ? 0 : (expiry - now) / NGTCP2_MILLISECONDS;
	uv_timer_start(&c->timer, on_conn_timer, ms, 0);
}

static void conn_arm_close_timer(struct quic_conn *c)
{
	uint64_t ms = 3 * ngtcp2_conn_get_pto(c->ng) / NGTCP2_MILLISECONDS;
	uv_timer_start(&c->timer, on_conn_timer, ms ? ms : 1, 0);
}

/* Unmaps, frees everything but the struct (freed when the timer handle is
 * closed), and tells the owner if it still has not been told. */
static void conn_destroy(struct quic_conn *c)
{
	struct quic_endpoint *ep = c->ep;
	if (c->state == CONN_DEAD) {
		return;
	}
	/* Dead and unlinked before the owner hears of it, so that whatever
	 * it does from on_conn_close cannot reach this connection again. */
	c->state = CONN_DEAD;
	qlist_remove(&c->link);
	qlist_remove(&c->dirty_link);
	ep->nconns--;
	if (!c->notified) {
		conn_notify_close(c, QUIC_CLOSE_LOCAL, false,
		                  NGTCP2_INTERNAL_ERROR, NULL, 0,
		                  "connection dropped");
	}
	for (size_t i = 0; i < c->ncids; i++) {
		cid_unmap_one(ep, &c->cids[i]);
	}
	free(c->cids);
	c->cids = NULL;
	c->ncids = 0;
	if (c->ng != NULL) {
		ngtcp2_conn_del(c->ng);
		c->ng = NULL;
	}
	gnutls_deinit(c->tls);
	for (size_t i = 0; i < c->nbuckets; i++) {
		while (c->sbuckets[i] != NULL) {
			stream_destroy(c, c->sbuckets[i]);
		}
	}
	free(c->sbuckets);
	c->sbuckets = NULL;
	c->nbuckets = 0;
	free(c->closebuf);
	c->closebuf = NULL;
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, on_conn_timer_closed);
}

/* The peer closed (or reset) the connection: stay quiet for 3 PTO. */
static void conn_enter_draining(struct quic_conn *c)
{
	ngtcp2_connection_close_error e;
	bool app;
	c->state = CONN_DRAINING;
	qlist_remove(&c->dirty_link);
	conn_arm_close_timer(c);
	/* Last: the owner may close the whole endpoint from here. */
	if (c->peer_reset) {
		conn_notify_close(c, QUIC_CLOSE_RESET, false, 0, NULL, 0, NULL);
	} else {
		ngtcp2_conn_get_connection_close_error(c->ng, &e);
		app = e.type ==
		      NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION;
		conn_notify_close(c, QUIC_CLOSE_PEER, app, e.error_code,
		                  (const char *)e.reason, e.reasonlen, NULL);
	}
}

/* A short message for a TLS failure on our side. */
static void tls_failure_detail(struct quic_conn *c, char *buf, size_t len)
{
	unsigned status = gnutls_session_get_verify_cert_status(c->tls);
	gnutls_datum_t out;
	if (!c->server && status != 0 &&
	    gnutls_certificate_verification_status_print(
	        status, GNUTLS_CRT_X509, &out, 0) == 0) {
		snprintf(buf, len, "certificate verification failed: %.*s",
		         (int)out.size, (const char *)out.data);
		gnutls_free(out.data);
		return;
	}
	describe_error(buf, len, false, c->ccerr.error_code);
}

/* Sends CONNECTION_CLOSE with c->ccerr and enters the closing period. */
static void conn_start_closing(struct quic_conn *c)
{
	struct quic_endpoint *ep = c->ep;
	ngtcp2_path_storage ps;
	ngtcp2_pkt_info pi;
	ngtcp2_ssize n;
	char detail[320];
	bool app = c->ccerr.type ==
	           NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION;
	size_t cap = ngtcp2_conn_get_max_tx_udp_payload_size(c->ng);

	c->close_requested = false;
	if (c->state >= CONN_CLOSING) {
		return;
	}
	qlist_remove(&c->dirty_link);
	ngtcp2_path_storage_zero(&ps);
	c->closebuf = malloc(cap);
	n = c->closebuf == NULL
	        ? NGTCP2_ERR_NOMEM
	        : ngtcp2_conn_write_connection_close(c->ng, &ps.path, &pi,
	                                             c->closebuf, cap,
	                                             &c->ccerr, now_ns());
	c->state = CONN_CLOSING;
	if (n > 0) {
		c->closelen = (size_t)n;
		ep_send_batch(ep, (const struct sockaddr *)&c->remote,
		              c->remote_len, c->closebuf, c->closelen,
		              c->closelen, true);
		conn_arm_close_timer(c);
	}
	detail[0] = '\0';
	if (!app && c->ccerr.error_code >= 0x100 &&
	    c->ccerr.error_code <= 0x1ff) {
		tls_failure_detail(c, detail, sizeof detail);
	}
	/* Last: the owner may close the whole endpoint from here. */
	conn_notify_close(c, QUIC_CLOSE_LOCAL, app, c->ccerr.error_code,
	                  (const char *)c->ccerr.reason, c->ccerr.reasonlen,
	                  detail[0] ? detail : NULL);
	if (n <= 0) {
		conn_destroy(c);
	}
}

static void conn_fail(struct quic_conn *c, int liberr)
{
	if (liberr == NGTCP2_ERR_CRYPTO) {
		ngtcp2_connection_close_error_set_transport_error_tls_alert(
		    &c->ccerr, ngtcp2_conn_get_tls_alert(c->ng), NULL, 0);
	} else {
		ngtcp2_connection_close_error_set_transport_error_liberr(
		    &c->ccerr, liberr, NULL, 0);
	}
	conn_start_closing(c);
}

/* Feeds one datagram to the connection. Returns NGTCP2_ERR_RETRY (server,
 * first packet only: the caller must send a Retry), else 0. */
static int conn_read(struct quic_conn *c, const struct sockaddr *from,
                     const uint8_t *pkt, size_t len)
{
	struct quic_endpoint *ep = c->ep;
	ngtcp2_path path;
	ngtcp2_pkt_info pi;
	int rv;

	if (c->state == CONN_CLOSING) {
		/* Answer a peer that keeps talking, backing off
		 * exponentially. */
		c->close_rx++;
		if ((c->close_rx & (c->close_rx - 1)) == 0 &&
		    c->closebuf != NULL) {
			ep_send_batch(ep, from, sockaddr_len(from), c->closebuf,
			              c->closelen, c->closelen, false);
		}
		return 0;
	}
	if (c->state >= CONN_DRAINING) {
		return 0;
	}
	memset(&pi, 0, sizeof pi);
	path.local.addr = (struct sockaddr *)&ep->local;
	path.local.addrlen = ep->local_len;
	path.remote.addr = (struct sockaddr *)from;
	path.remote.addrlen = sockaddr_len(from);
	path.user_data = NULL;
	ep->ng_depth++;
	rv = ngtcp2_conn_read_pkt(c->ng, &path, &pi, pkt, len, now_ns());
	ep->ng_depth--;
	if (rv == 0) {
		/* Keep the latest peer address (NAT rebinding, migration). */
		const ngtcp2_path *cur = ngtcp2_conn_get_path(c->ng);
		if (cur->remote.addrlen <= sizeof c->remote) {
			memcpy(&c->remote, cur->remote.addr,
			       cur->remote.addrlen);
			c->remote_len = cur->remote.addrlen;
		}
		conn_mark_dirty(c);
		conn_dispatch(c);
		return 0;
	}
	switch (rv) {
	case NGTCP2_ERR_DRAINING:
		conn_enter_draining(c);
		break;
	case NGTCP2_ERR_RETRY:
		c->notified = true; /* never seen by the owner */
		conn_destroy(c);
		return NGTCP2_ERR_RETRY;
	case NGTCP2_ERR_DROP_CONN:
		conn_destroy(c);
		break;
	default:
		quic_endpoint_log(ep, QUIC_LOG_DEBUG, "packet refused: %s",
		                  ngtcp2_strerror(rv));
		conn_fail(c, rv);
		break;
	}
	return 0;
}

/* Writes packets: at most one send quantum, coalescing stream data of
 * several streams round-robin. Returns 0 or a fatal ngtcp2 error. */
static int conn_write(struct quic_conn *c)
{
	struct quic_endpoint *ep = c->ep;
	ngtcp2_path_storage ps, bp;
	ngtcp2_pkt_info pi;
	ngtcp2_tstamp ts = now_ns();
	size_t maxpkt = ngtcp2_conn_get_max_tx_udp_payload_size(c->ng);
	size_t pathmax = ngtcp2_conn_get_path_max_tx_udp_payload_size(c->ng);
	size_t quantum = ngtcp2_conn_get_send_quantum(c->ng);
	size_t budget = quantum / maxpkt;
	uint8_t *buf = ep->txbuf;
	size_t used = 0, seg = 0, nbatch = 0, nsent = 0;
	unsigned guard = 0;
	int rv = 0;

	if (budget < 2) {
		budget = 2;
	}
	if (maxpkt > TX_BATCH_BYTES) {
		maxpkt = TX_BATCH_BYTES;
	}
	ngtcp2_path_storage_zero(&ps);
	ngtcp2_path_storage_zero(&bp);
	for (;;) {
		ngtcp2_vec vec[STREAM_VECS];
		size_t nvec = 0;
		int64_t sid = -1;
		struct quic_stream *s = NULL;
		uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
		ngtcp2_ssize ndatalen = -1;
		ngtcp2_ssize nwrite;
		bool all = false;

		if (!qlist_empty(&c->sendable) && guard < 4096) {
			s = container_of(c->sendable.next, struct quic_stream,
			                 send_link);
			nvec = stream_vecs(s, vec, STREAM_VECS, &all);
			if (nvec > 0 &&
			    ngtcp2_conn_get_max_data_left(c->ng) == 0) {
				/* Connection window full: only a bare FIN
				 * could go, and none is pending here. */
				s = NULL;
				nvec = 0;
			} else {
				sid = s->id;
				if (all && s->fin_queued) {
					flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
				}
			}
		}
		nwrite = ngtcp2_conn_writev_stream(
		    c->ng, &ps.path, &pi, buf + used, maxpkt, &ndatalen, flags,
		    sid, vec, nvec, ts);
		if (nwrite < 0) {
			guard++;
			switch (nwrite) {
			case NGTCP2_ERR_STREAM_DATA_BLOCKED:
				s->fc_blocked = true;
				stream_update_sendable(c, s);
				continue;
			case NGTCP2_ERR_STREAM_SHUT_WR:
			case NGTCP2_ERR_STREAM_NOT_FOUND:
				s->wr_done = true;
				stream_update_sendable(c, s);
				continue;
			case NGTCP2_ERR_WRITE_MORE:
				stream_advance(
				    c, s, (size_t)ndatalen,
				    (flags & NGTCP2_WRITE_STREAM_FLAG_FIN) !=
				        0);
				/* Next stream's turn. */
				if (qlist_linked(&s->send_link)) {
					qlist_remove(&s->send_link);
					qlist_push(&c->sendable, &s->send_link);
				}
				continue;
			default:
				rv = (int)nwrite;
				goto out;
			}
		}
		guard = 0;
		if (s != NULL && ndatalen >= 0) {
			stream_advance(c, s, (size_t)ndatalen,
			               (flags & NGTCP2_WRITE_STREAM_FLAG_FIN) !=
			                   0);
			if (qlist_linked(&s->send_link)) {
				qlist_remove(&s->send_link);
				qlist_push(&c->sendable, &s->send_link);
			}
		}
		if (nwrite == 0) {
			break; /* nothing to send, or congestion limited */
		}
		/* A datagram joins the batch if it goes the same way and is
		 * no larger than the first (GSO segments are equal but the
		 * last); a path MTU probe goes alone. */
		if (nbatch > 0 && (!ngtcp2_path_eq(&bp.path, &ps.path) ||
		                   (size_t)nwrite > seg || seg > pathmax)) {
			int b = ep_send_batch(ep, bp.path.remote.addr,
			                      bp.path.remote.addrlen, buf, used,
			                      seg, true);
			memmove(buf, buf + used, (size_t)nwrite);
			used = 0;
			nbatch = 0;
			if (b != 0) {
				/* Socket busy: this datagram is dropped and
				 * recovered as a loss. */
				break;
			}
		}
		if (nbatch == 0) {
			ngtcp2_path_copy(&bp.path, &ps.path);
			seg = (size_t)nwrite;
		}
		used += (size_t)nwrite;
		nbatch++;
		nsent++;
		if ((size_t)nwrite < seg || nbatch == TX_BATCH_PKTS ||
		    used + maxpkt > TX_BATCH_BYTES || nsent >= budget) {
			int b = ep_send_batch(ep, bp.path.remote.addr,
			                      bp.path.remote.addrlen, buf, used,
			                      seg, true);
			used = 0;
			nbatch = 0;
			if (b != 0 || nsent >= budget) {
				break;
			}
		}
	}
	if (nbatch > 0) {
		ep_send_batch(ep, bp.path.remote.addr, bp.path.remote.addrlen,
		              buf, used, seg, true);
	}
out:
	ngtcp2_conn_update_pkt_tx_time(c->ng, ts);
	return rv;
}

/* Writes what is pending, then re-arms the timer. */
static void conn_flush(struct quic_conn *c)
{
	int rv;
	qlist_remove(&c->dirty_link);
	if (c->close_requested) {
		conn_start_closing(c);
		return;
	}
	if (c->state >= CONN_CLOSING) {
		return;
	}
	if (c->ep->pend.active) {
		/* The socket is busy; retried once it drains. */
		qlist_push(&c->ep->dirty, &c->dirty_link);
		return;
	}
	rv = conn_write(c);
	if (rv != 0) {
		quic_endpoint_log(c->ep, QUIC_LOG_DEBUG, "write failed: %s",
		                  ngtcp2_strerror(rv));
		conn_fail(c, rv);
		return;
	}
	conn_arm_timer(c);
}

static void on_conn_timer(uv_timer_t *t)
{
	struct quic_conn *c = t->data;
	int rv;

	switch (c->state) {
	case CONN_CLOSING:
	case CONN_DRAINING:
		conn_destroy(c);
		return;
	case CONN_DEAD:
		return;
	default:
		break;
	}
	c->ep->ng_depth++;
	rv = ngtcp2_conn_handle_expiry(c->ng, now_ns());
	c->ep->ng_depth--;
	switch (rv) {
	case 0:
		break;
	case NGTCP2_ERR_IDLE_CLOSE:
		conn_notify_close(c, QUIC_CLOSE_IDLE, false, 0, NULL, 0, NULL);
		conn_destroy(c);
		return;
	case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
		conn_notify_close(c, QUIC_CLOSE_HANDSHAKE_TIMEOUT, false, 0,
		                  NULL, 0, NULL);
		conn_destroy(c);
		return;
	default:
		conn_fail(c, rv);
		return;
	}
	conn_flush(c);
}

int quic_conn_accept(struct quic_endpoint *ep, const ngtcp2_pkt_hd *hd,
                     const ngtcp2_cid *ocid, const struct sockaddr *from,
                     socklen_t fromlen, gnutls_session_t tls,
                     const uint8_t *pkt, size_t len)
{
	ngtcp2_callbacks cb;
	ngtcp2_settings st;
	ngtcp2_transport_params p;
	ngtcp2_cid scid;
	ngtcp2_path path;
	struct quic_conn *c;
	int rv;

	if (ep->closing) {
		gnutls_deinit(tls);
		return QUIC_ECLOSED;
	}
	c = conn_alloc(ep, from, tls, true);
	if (c == NULL) {
		gnutls_deinit(tls);
		return QUIC_ENOMEM;
	}
	c->notified = true; /* the owner meets it at on_conn_open */
	scid.datalen = QUIC_SCID_LEN;
	gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
	conn_callbacks(&cb, true);
	conn_settings(ep, &st, &p);
	if (ocid != NULL) {
		p.original_dcid = *ocid;
		p.retry_scid = hd->dcid;
		p.retry_scid_present = 1;
		st.token = hd->token;
	} else {
		p.original_dcid = hd->dcid;
	}
	p.stateless_reset_token_present = 1;
	ngtcp2_crypto_generate_stateless_reset_token(
	    p.stateless_reset_token, ep->secret, sizeof ep->secret, &scid);
	path.local.addr = (struct sockaddr *)&ep->local;
	path.local.addrlen = ep->local_len;
	path.remote.addr = (struct sockaddr *)from;
	path.remote.addrlen = fromlen;
	path.user_data = NULL;
	rv = ngtcp2_conn_server_new(&c->ng, &hd->scid, &scid, &path,
	                            hd->version, &cb, &st, &p, NULL, c);
	if (rv != 0) {
		quic_endpoint_log(ep, QUIC_LOG_WARN,
		                  "cannot create a QUIC connection: %s",
		                  ngtcp2_strerror(rv));
		conn_destroy(c);
		return QUIC_ENOMEM;
	}
	ngtcp2_conn_set_tls_native_handle(c->ng, tls);
	if (conn_map_cid(c, &scid) != 0 || conn_map_cid(c, &hd->dcid) != 0) {
		conn_destroy(c);
		return QUIC_ENOMEM;
	}
	c->notified = false;
	rv = conn_read(c, from, pkt, len);
	if (rv == NGTCP2_ERR_RETRY) {
		return 1;
	}
	return 0;
}

int quic_conn_connect(struct quic_endpoint *ep, const struct sockaddr *to,
                      socklen_t tolen, gnutls_session_t tls,
                      struct quic_conn **out)
{
	ngtcp2_callbacks cb;
	ngtcp2_settings st;
	ngtcp2_transport_params p;
	ngtcp2_cid scid, dcid;
	ngtcp2_path path;
	struct quic_conn *c;
	int rv;

	if (ep->closing) {
		gnutls_deinit(tls);
		return QUIC_ECLOSED;
	}
	c = conn_alloc(ep, to, tls, false);
	if (c == NULL) {
		gnutls_deinit(tls);
		return QUIC_ENOMEM;
	}
	c->notified = true; /* silent until returned to the owner */
	scid.datalen = QUIC_SCID_LEN;
	dcid.datalen = QUIC_SCID_LEN;
	gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
	gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
	conn_callbacks(&cb, false);
	conn_settings(ep, &st, &p);
	path.local.addr = (struct sockaddr *)&ep->local;
	path.local.addrlen = ep->local_len;
	path.remote.addr = (struct sockaddr *)to;
	path.remote.addrlen = tolen;
	path.user_data = NULL;
	rv = ngtcp2_conn_client_new(&c->ng, &dcid, &scid, &path,
	                            NGTCP2_PROTO_VER_V1, &cb, &st, &p, NULL, c);
	if (rv != 0) {
		conn_destroy(c);
		return QUIC_ENOMEM;
	}
	ngtcp2_conn_set_tls_native_handle(c->ng, tls);
	if (conn_map_cid(c, &scid) != 0) {
		conn_destroy(c);
		return QUIC_ENOMEM;
	}
	c->notified = false;
	c->visible = true;
	conn_mark_dirty(c);
	*out = c;
	return 0;
}

/* ---- owner API ---- */

void quic_conn_set_data(struct quic_conn *c, void *data)
{
	c->data = data;
}

void *quic_conn_get_data(const struct quic_conn *c)
{
	return c->data;
}

void *quic_conn_owner(const struct quic_conn *c)
{
	return c->ep->cfg.owner;
}

bool quic_conn_is_server(const struct quic_conn *c)
{
	return c->server;
}

const char *quic_conn_alpn(const struct quic_conn *c)
{
	return c->alpn[0] ? c->alpn : NULL;
}

const struct sockaddr *quic_conn_peer_addr(const struct quic_conn *c)
{
	return (const struct sockaddr *)&c->remote;
}

static int conn_open_stream(struct quic_conn *c, int64_t *stream_id, bool bidi)
{
	struct quic_stream *s;
	int64_t id;
	int rv;
	if (c->state != CONN_OPEN || c->close_requested) {
		return c->state >= CONN_CLOSING || c->close_requested
		           ? QUIC_ECLOSED
		           : QUIC_ELIMIT;
	}
	s = stream_new(c);
	if (s == NULL) {
		return QUIC_ENOMEM;
	}
	rv = bidi ? ngtcp2_conn_open_bidi_stream(c->ng, &id, s)
	          : ngtcp2_conn_open_uni_stream(c->ng, &id, s);
	if (rv != 0) {
		free(s);
		return rv == NGTCP2_ERR_STREAM_ID_BLOCKED ? QUIC_ELIMIT
		                                          : QUIC_ENOMEM;
	}
	stream_insert(c, s, id);
	*stream_id = id;
	return 0;
}

int quic_conn_open_bidi_stream(struct quic_conn *c, int64_t *stream_id)
{
	return conn_open_stream(c, stream_id, true);
}

int quic_conn_open_uni_stream(struct quic_conn *c, int64_t *stream_id)
{
	return conn_open_stream(c, stream_id, false);
}

/* The stream for a write, or an error code in *rv. */
static struct quic_stream *writable_stream(struct quic_conn *c,
                                           int64_t stream_id, int *rv)
{
	struct quic_stream *s;
	if (c->state != CONN_OPEN || c->close_requested) {
		*rv = QUIC_ECLOSED;
		return NULL;
	}
	s = stream_find(c, stream_id);
	if (s == NULL) {
		*rv = QUIC_ESTREAM;
		return NULL;
	}
	if (!ngtcp2_is_bidi_stream(stream_id) &&
	    !ngtcp2_conn_is_local_stream(c->ng, stream_id)) {
		*rv = QUIC_EINVAL;
		return NULL;
	}
	if (s->fin_queued || s->wr_done) {
		*rv = QUIC_ESTREAM;
		return NULL;
	}
	return s;
}

static void stream_append(struct quic_conn *c, struct quic_stream *s,
                          struct chunk *k, size_t len, bool fin)
{
	if (k != NULL) {
		k->next = NULL;
		k->len = len;
		s->written += len;
		k->end = s->written;
		c->queued += len;
		if (s->tail != NULL) {
			s->tail->next = k;
		} else {
			s->head = k;
		}
		s->tail = k;
		if (s->cur == NULL) {
			s->cur = k;
			s->cur_off = 0;
		}
	}
	if (fin) {
		s->fin_queued = true;
	}
	if (s->want_writable) {
		s->want_writable = false;
		qlist_remove(&s->want_link);
	}
	stream_update_sendable(c, s);
	conn_mark_dirty(c);
}

/* Refuses a write that does not fit, arming on_stream_writable. */
static int stream_refuse(struct quic_conn *c, struct quic_stream *s, size_t len)
{
	s->blocked_len = len;
	if (!s->want_writable && !s->notify_pending) {
		s->want_writable = true;
		qlist_push(&c->want, &s->want_link);
	}
	return QUIC_EAGAIN;
}

int quic_conn_stream_write(struct quic_conn *c, int64_t stream_id,
                           const uint8_t *data, size_t len, bool fin)
{
	int rv = 0;
	struct chunk *k = NULL;
	struct quic_stream *s = writable_stream(c, stream_id, &rv);
	if (s == NULL) {
		return rv;
	}
	if (len > 0) {
		if (!stream_fits(c, s, len)) {
			return stream_refuse(c, s, len);
		}
		k = malloc(sizeof *k + len);
		if (k == NULL) {
			return QUIC_ENOMEM;
		}
		memcpy(k->inline_data, data, len);
		k->base = k->inline_data;
		k->sbuf = NULL;
	}
	stream_append(c, s, k, len, fin);
	return 0;
}

int quic_conn_stream_write_sbuf(struct quic_conn *c, int64_t stream_id,
                                struct quic_sbuf *b, size_t off, size_t len,
                                bool fin)
{
	int rv = 0;
	struct chunk *k = NULL;
	struct quic_stream *s;
	if (b == NULL || off > b->len || len > b->len - off) {
		return QUIC_EINVAL;
	}
	s = writable_stream(c, stream_id, &rv);
	if (s == NULL) {
		return rv;
	}
	if (len > 0) {
		if (!stream_fits(c, s, len)) {
			return stream_refuse(c, s, len);
		}
		k = malloc(sizeof *k);
		if (k == NULL) {
			return QUIC_ENOMEM;
		}
		quic_sbuf_ref(b);
		k->sbuf = b;
		k->base = b->data + off;
	}
	stream_append(c, s, k, len, fin);
	return 0;
}

bool quic_conn_stream_writable(const struct quic_conn *c, int64_t stream_id,
                               size_t len)
{
	const struct quic_stream *s = stream_find(c, stream_id);
	if (s == NULL || c->state != CONN_OPEN || s->fin_queued || s->wr_done) {
		return false;
	}
	return stream_fits(c, s, len);
}

size_t quic_conn_stream_queued(const struct quic_conn *c, int64_t stream_id)
{
	const struct quic_stream *s = stream_find(c, stream_id);
	return s == NULL ? 0 : (size_t)(s->written - s->acked);
}

size_t quic_conn_queued(const struct quic_conn *c)
{
	return c->queued;
}

int quic_conn_stream_shutdown(struct quic_conn *c, int64_t stream_id)
{
	return quic_conn_stream_write(c, stream_id, NULL, 0, true);
}

int quic_conn_stream_reset(struct quic_conn *c, int64_t stream_id,
                           uint64_t app_error)
{
	struct quic_stream *s;
	if (c->state != CONN_OPEN || c->close_requested) {
		return QUIC_ECLOSED;
	}
	s = stream_find(c, stream_id);
	if (s == NULL) {
		return QUIC_ESTREAM;
	}
	if (ngtcp2_conn_shutdown_stream(c->ng, stream_id, app_error) != 0) {
		return QUIC_ENOMEM;
	}
	/* ngtcp2 may have closed and freed the stream already. */
	s = stream_find(c, stream_id);
	if (s != NULL) {
		s->wr_done = true;
		s->want_writable = false;
		s->notify_pending = false;
		qlist_remove(&s->want_link);
		stream_update_sendable(c, s);
	}
	conn_mark_dirty(c);
	return 0;
}

int quic_conn_stream_set_manual_consume(struct quic_conn *c, int64_t stream_id,
                                        bool manual)
{
	struct quic_stream *s = stream_find(c, stream_id);
	if (s == NULL) {
		return QUIC_ESTREAM;
	}
	s->manual_consume = manual;
	return 0;
}

int quic_conn_stream_consume(struct quic_conn *c, int64_t stream_id, size_t n)
{
	if (c->state >= CONN_CLOSING || n == 0) {
		return c->state >= CONN_CLOSING ? QUIC_ECLOSED : 0;
	}
	/* The connection window is re-opened even when the stream is gone,
	 * or it would leak. */
	ngtcp2_conn_extend_max_stream_offset(c->ng, stream_id, n);
	ngtcp2_conn_extend_max_offset(c->ng, n);
	conn_mark_dirty(c);
	return 0;
}

void quic_conn_stream_set_data(struct quic_conn *c, int64_t stream_id,
                               void *data)
{
	struct quic_stream *s = stream_find(c, stream_id);
	if (s != NULL) {
		s->data = data;
	}
}

void *quic_conn_stream_get_data(const struct quic_conn *c, int64_t stream_id)
{
	const struct quic_stream *s = stream_find(c, stream_id);
	return s == NULL ? NULL : s->data;
}

void quic_conn_close(struct quic_conn *c, uint64_t app_error,
                     const char *reason)
{
	size_t n = reason ? strlen(reason) : 0;
	if (c->state >= CONN_CLOSING || c->close_requested) {
		return;
	}
	if (n >= sizeof c->ccerr_reason) {
		n = sizeof c->ccerr_reason - 1;
	}
	if (n > 0) {
		memcpy(c->ccerr_reason, reason, n);
	}
	ngtcp2_connection_close_error_set_application_error(
	    &c->ccerr, app_error, (const uint8_t *)c->ccerr_reason, n);
	c->close_requested = true;
	conn_mark_dirty(c);
}

void quic_conn_get_stats(const struct quic_conn *c, struct quic_conn_stats *out)
{
	ngtcp2_conn_stat cs;
	memset(out, 0, sizeof *out);
	if (c->ng == NULL) {
		return;
	}
	ngtcp2_conn_get_conn_stat(c->ng, &cs);
	out->smoothed_rtt_us = cs.smoothed_rtt / NGTCP2_MICROSECONDS;
	out->cwnd = cs.cwnd;
	out->bytes_in_flight = cs.bytes_in_flight;
	out->streams_open = c->nstreams;
	out->cids = c->ncids;
}

/* ---- endpoint: sending ---- */

/* Sends whole datagrams from [data, len) (each `seg` bytes, the last may be
 * shorter). Returns the bytes the kernel took, or -1 with errno. */
static ssize_t ep_sendmsg(struct quic_endpoint *ep, const struct sockaddr *to,
                          socklen_t tolen, const uint8_t *data, size_t len,
                          size_t seg)
{
	if (ep->gso && len > seg) {
		struct iovec iov = {(void *)data, len};
		union {
			char buf[CMSG_SPACE(sizeof(uint16_t))];
			struct cmsghdr align;
		} u;
		struct msghdr mh;
		struct cmsghdr *cm;
		uint16_t s16 = (uint16_t)seg;
		memset(&mh, 0, sizeof mh);
		memset(&u, 0, sizeof u);
		mh.msg_name = (void *)to;
		mh.msg_namelen = tolen;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(cm), &s16, sizeof s16);
		ssize_t n;
		do {
			n = sendmsg(ep->fd, &mh, 0);
		} while (n < 0 && errno == EINTR);
		if (n >= 0) {
			ep->stats.datagrams_out += (len + seg - 1) / seg;
			return (ssize_t)len;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == ENOBUFS) {
			return -1;
		}
		if (errno != EIO && errno != EINVAL && errno != ENOPROTOOPT &&
		    errno != EOPNOTSUPP) {
			/* Unreachable and the like: the batch is lost and
			 * QUIC recovers it. */
			quic_endpoint_log(ep, QUIC_LOG_DEBUG, "sendmsg: %s",
			                  strerror(errno));
			return (ssize_t)len;
		}
		/* No GSO on this path: send datagrams one by one from now
		 * on. */
		ep->gso = false;
		quic_endpoint_log(ep, QUIC_LOG_INFO,
		                  "UDP GSO unavailable (%s), using sendmmsg",
		                  strerror(errno));
	}
	struct mmsghdr mm[TX_BATCH_PKTS];
	struct iovec iov[TX_BATCH_PKTS];
	size_t n = 0, off = 0;
	while (off < len && n < TX_BATCH_PKTS) {
		size_t l = len - off < seg ? len - off : seg;
		iov[n].iov_base = (void *)(data + off);
		iov[n].iov_len = l;
		memset(&mm[n], 0, sizeof mm[n]);
		mm[n].msg_hdr.msg_name = (void *)to;
		mm[n].msg_hdr.msg_namelen = tolen;
		mm[n].msg_hdr.msg_iov = &iov[n];
		mm[n].msg_hdr.msg_iovlen = 1;
		off += l;
		n++;
	}
	int k;
	do {
		k = sendmmsg(ep->fd, mm, (unsigned)n, 0);
	} while (k < 0 && errno == EINTR);
	if (k < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == ENOBUFS) {
			return -1;
		}
		/* This datagram cannot go (e.g. EMSGSIZE for a path MTU
		 * probe): drop it, QUIC recovers it as a loss. */
		quic_endpoint_log(ep, QUIC_LOG_DEBUG, "sendmmsg: %s",
		                  strerror(errno));
		return (ssize_t)iov[0].iov_len;
	}
	size_t sent = 0;
	for (int i = 0; i < k; i++) {
		sent += iov[i].iov_len;
	}
	ep->stats.datagrams_out += (uint64_t)k;
	return (ssize_t)sent;
}

static void on_poll(uv_poll_t *h, int status, int events);

/* Waits for the socket to drain: the poll callback sends the rest of
 * `pend` once it is writable. */
static void ep_pend_kick(struct quic_endpoint *ep)
{
	int rv;
	ep->stats.send_blocked++;
	if (ep->polling_out) {
		return;
	}
	rv = uv_poll_start(&ep->poll, UV_READABLE | UV_WRITABLE, on_poll);
	if (rv != 0) {
		/* Cannot wait: drop the rest, QUIC recovers it as lost. */
		quic_endpoint_log(ep, QUIC_LOG_DEBUG, "udp poll: %s",
		                  uv_strerror(rv));
		ep->pend.active = false;
		return;
	}
	ep->polling_out = true;
}

/* The socket is writable: sends what `pend` holds, then lets the dirty
 * connections write again. */
static void ep_pend_drain(struct quic_endpoint *ep)
{
	while (ep->pend.active && ep->pend.off < ep->pend.len) {
		ssize_t n =
		    ep_sendmsg(ep, (struct sockaddr *)&ep->pend.to,
		               ep->pend.tolen, ep->pend.buf + ep->pend.off,
		               ep->pend.len - ep->pend.off, ep->pend.seg);
		if (n < 0) {
			ep->stats.send_blocked++;
			return; /* still full: keep polling */
		}
		ep->pend.off += (size_t)n;
	}
	ep->pend.active = false;
	ep->polling_out = false;
	if (uv_poll_start(&ep->poll, UV_READABLE, on_poll) != 0) {
		quic_endpoint_log(ep, QUIC_LOG_WARN,
		                  "udp poll: cannot stop polling for writes");
	}
	ep_flush(ep);
}

/* Sends a batch. When the socket is full and `may_pend`, the rest is copied
 * and sent once it drains (returns 1; writers then wait); without
 * `may_pend` it is dropped. Returns 0 when everything went. */
static int ep_send_batch(struct quic_endpoint *ep, const struct sockaddr *to,
                         socklen_t tolen, const uint8_t *data, size_t len,
                         size_t seg, bool may_pend)
{
	size_t off = 0;
	if (ep->pend.active || ep->sock_closed) {
		return 1;
	}
	while (off < len) {
		ssize_t n =
		    ep_sendmsg(ep, to, tolen, data + off, len - off, seg);
		if (n < 0) {
			if (!may_pend) {
				return 1;
			}
			if (ep->pend.buf == NULL) {
				ep->pend.buf = malloc(TX_BUF_LEN);
				if (ep->pend.buf == NULL) {
					return 1;
				}
			}
			memcpy(ep->pend.buf, data + off, len - off);
			ep->pend.len = len - off;
			ep->pend.off = 0;
			ep->pend.seg = seg;
			memcpy(&ep->pend.to, to, tolen);
			ep->pend.tolen = tolen;
			ep->pend.active = true;
			ep_pend_kick(ep);
			return 1;
		}
		off += (size_t)n;
	}
	return 0;
}

void quic_endpoint_send_raw(struct quic_endpoint *ep, const struct sockaddr *to,
                            socklen_t tolen, const uint8_t *pkt, size_t len)
{
	ep_send_batch(ep, to, tolen, pkt, len, len, false);
}

/* ---- endpoint: receiving and flushing ---- */

static void ep_close_now(struct quic_endpoint *ep);

static void ep_flush(struct quic_endpoint *ep)
{
	struct qlist *e;
	if (ep->close_deferred) {
		ep_close_now(ep);
		return;
	}
	if (ep->closing) {
		return;
	}
	while (!ep->pend.active && (e = qlist_pop(&ep->dirty)) != NULL) {
		conn_flush(container_of(e, struct quic_conn, dirty_link));
	}
	ep_wake_update(ep);
}

static void on_wake(uv_idle_t *h)
{
	(void)h; /* only keeps the loop from blocking before the flush */
}

/* The loop must not block in poll while a connection waits to be flushed,
 * unless the socket is full: then the writable event wakes it. */
static void ep_wake_update(struct quic_endpoint *ep)
{
	bool want =
	    !ep->closing && !ep->pend.active && !qlist_empty(&ep->dirty);
	if (want) {
		uv_idle_start(&ep->wake, on_wake); /* no-op when active */
	} else {
		uv_idle_stop(&ep->wake);
	}
}

static void on_prepare(uv_prepare_t *h)
{
	ep_flush(h->data);
}

static void on_check(uv_check_t *h)
{
	ep_flush(h->data);
}

static void ep_datagram(struct quic_endpoint *ep, const uint8_t *pkt,
                        size_t len, const struct sockaddr *from)
{
	ngtcp2_version_cid vc;
	struct quic_conn *c = NULL;
	int rv;

	ep->stats.datagrams_in++;
	rv = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, QUIC_SCID_LEN);
	if (rv != 0 && rv != NGTCP2_ERR_VERSION_NEGOTIATION) {
		return;
	}
	if (rv == 0) {
		c = cid_lookup(ep, vc.dcid, vc.dcidlen);
	}
	if (c != NULL) {
		conn_read(c, from, pkt, len);
		return;
	}
	if (ep->cfg.on_unknown != NULL) {
		ep->cfg.on_unknown(ep, ep->cfg.unknown_arg, pkt, len, &vc, rv,
		                   from, sockaddr_len(from));
	}
}

/* Feeds one receive slot to ep_datagram(): a single datagram, or with
 * UDP_GRO a run of datagrams of `gso_size` bytes each (the last may be
 * shorter) that the kernel coalesced. Returns the datagrams handled. */
static size_t ep_rx_slot(struct quic_endpoint *ep, size_t i)
{
	struct msghdr *mh = &ep->rx_mm[i].msg_hdr;
	const uint8_t *buf = ep->rxbuf + i * RX_SLOT;
	size_t len = ep->rx_mm[i].msg_len, seg = len, off, n = 0;
	struct cmsghdr *cm;

	if (len == 0 || mh->msg_namelen == 0 || (mh->msg_flags & MSG_TRUNC)) {
		return 0;
	}
	if (ep->gro) {
		for (cm = CMSG_FIRSTHDR(mh); cm != NULL;
		     cm = CMSG_NXTHDR(mh, cm)) {
			int gs;
			if (cm->cmsg_level != SOL_UDP ||
			    cm->cmsg_type != UDP_GRO ||
			    cm->cmsg_len < CMSG_LEN(sizeof gs)) {
				continue;
			}
			memcpy(&gs, CMSG_DATA(cm), sizeof gs);
			if (gs > 0 && (size_t)gs < len) {
				seg = (size_t)gs;
			}
		}
	}
	for (off = 0; off < len && !ep->closing; off += seg) {
		size_t l = len - off < seg ? len - off : seg;
		ep_datagram(ep, buf + off, l,
		            (const struct sockaddr *)&ep->rx_from[i]);
		n++;
	}
	if (n > 1) {
		ep->stats.gro_buffers++;
		ep->stats.datagrams_coalesced += n;
	}
	return n;
}

/* Reads what the socket holds, within the per-callback budget. */
static void ep_read(struct quic_endpoint *ep)
{
	size_t done = 0;
	for (unsigned call = 0;
	     call < RX_CALLS && done < RX_BUDGET && !ep->closing; call++) {
		int n;
		for (size_t i = 0; i < RX_SLOTS; i++) {
			struct msghdr *mh = &ep->rx_mm[i].msg_hdr;
			ep->rx_iov[i].iov_base = ep->rxbuf + i * RX_SLOT;
			ep->rx_iov[i].iov_len = RX_SLOT;
			mh->msg_name = &ep->rx_from[i];
			mh->msg_namelen = sizeof ep->rx_from[i];
			mh->msg_iov = &ep->rx_iov[i];
			mh->msg_iovlen = 1;
			mh->msg_control = ep->gro ? ep->rx_ctl[i].buf : NULL;
			mh->msg_controllen =
			    ep->gro ? sizeof ep->rx_ctl[i].buf : 0;
			mh->msg_flags = 0;
		}
		do {
			n = recvmmsg(ep->fd, ep->rx_mm, RX_SLOTS, 0, NULL);
		} while (n < 0 && errno == EINTR);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* E.g. ECONNREFUSED from an ICMP error: the
				 * socket goes on. */
				quic_endpoint_log(ep, QUIC_LOG_DEBUG,
				                  "udp receive: %s",
				                  strerror(errno));
				continue;
			}
			return;
		}
		for (int i = 0; i < n && !ep->closing; i++) {
			done += ep_rx_slot(ep, (size_t)i);
		}
		if (n < RX_SLOTS) {
			return; /* the socket is empty */
		}
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct quic_endpoint *ep = h->data;
	if (status < 0) {
		quic_endpoint_log(ep, QUIC_LOG_DEBUG, "udp poll: %s",
		                  uv_strerror(status));
		return;
	}
	if (ep->closing) {
		return;
	}
	if ((events & UV_WRITABLE) && ep->pend.active) {
		ep_pend_drain(ep);
	}
	if ((events & UV_READABLE) && !ep->closing) {
		ep_read(ep);
	}
}

static void ep_free(struct quic_endpoint *ep)
{
	free(ep->cbuckets);
	free(ep->rxbuf);
	free(ep->txbuf);
	free(ep->pend.buf);
	free(ep);
}

static void on_poll_closed_early(uv_handle_t *h)
{
	struct quic_endpoint *ep = h->data;
	close(ep->fd);
	ep_free(ep);
}

/* Opens the UDP socket. */
static int ep_socket(struct quic_endpoint *ep, const struct sockaddr *addr,
                     const char *host, int port, char *err, size_t errlen)
{
	int family = addr->sa_family;
	int size, one = 1;

	ep->fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ep->fd < 0) {
		snprintf(err, errlen, "udp socket: %s", strerror(errno));
		return -1;
	}
	if (bind(ep->fd, addr, sockaddr_len(addr)) != 0) {
		snprintf(err, errlen, "cannot bind UDP %s port %d: %s", host,
		         port, uv_strerror(uv_translate_sys_error(errno)));
		close(ep->fd);
		return -1;
	}
	/* Larger socket buffers absorb bursts of a send quantum per
	 * connection; the kernel caps them at rmem_max/wmem_max. */
	size = 4 << 20;
	setsockopt(ep->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
	size = 4 << 20;
	setsockopt(ep->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
	/* Never fragment: path MTU discovery relies on it. */
	if (family == AF_INET) {
		int v = IP_PMTUDISC_DO;
		setsockopt(ep->fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof v);
	} else {
		int v = IPV6_PMTUDISC_DO;
		setsockopt(ep->fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v,
		           sizeof v);
	}
	ep->gso = true;
	/* A GSO sender's burst then arrives as one buffer instead of being
	 * split into single datagrams by the kernel (a large share of the
	 * receive cost on loopback). */
	if (!ep->cfg.limits.no_udp_gro) {
		if (setsockopt(ep->fd, SOL_UDP, UDP_GRO, &one, sizeof one) ==
		    0) {
			ep->gro = true;
		} else {
			quic_endpoint_log(ep, QUIC_LOG_DEBUG,
			                  "UDP GRO unavailable (%s), receiving "
			                  "datagrams one by one",
			                  strerror(errno));
		}
	}
	ep->local_len = sizeof ep->local;
	if (getsockname(ep->fd, (struct sockaddr *)&ep->local,
	                &ep->local_len) != 0) {
		snprintf(err, errlen, "udp socket: %s", strerror(errno));
		close(ep->fd);
		return -1;
	}
	return 0;
}

int quic_endpoint_open(uv_loop_t *loop, const struct quic_endpoint_config *cfg,
                       const struct sockaddr *bind_addr,
                       struct quic_endpoint **out, char *err, size_t errlen)
{
	struct quic_endpoint *ep;
	char host[INET6_ADDRSTRLEN] = "?";
	int rv;
	int family = bind_addr->sa_family;
	int port =
	    family == AF_INET6
	        ? ntohs(((const struct sockaddr_in6 *)bind_addr)->sin6_port)
	        : ntohs(((const struct sockaddr_in *)bind_addr)->sin_port);

	ep = calloc(1, sizeof *ep);
	if (ep == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ep->loop = loop;
	ep->cfg = *cfg;
	qlist_init(&ep->conns);
	qlist_init(&ep->dirty);
	ep->ncbuckets = 64;
	ep->cbuckets = calloc(ep->ncbuckets, sizeof *ep->cbuckets);
	ep->rxbuf = malloc((size_t)RX_SLOT * RX_SLOTS);
	ep->txbuf = malloc(TX_BUF_LEN);
	if (ep->cbuckets == NULL || ep->rxbuf == NULL || ep->txbuf == NULL) {
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	if (cfg->secret != NULL) {
		memcpy(ep->secret, cfg->secret, sizeof ep->secret);
	} else if (gnutls_rnd(GNUTLS_RND_RANDOM, ep->secret,
	                      sizeof ep->secret) != 0) {
		snprintf(err, errlen, "no randomness for QUIC secrets");
		goto err_free;
	}
	if (gnutls_rnd(GNUTLS_RND_RANDOM, &ep->hash_key, sizeof ep->hash_key) !=
	    0) {
		snprintf(err, errlen, "no randomness for QUIC secrets");
		goto err_free;
	}
	uv_ip_name(bind_addr, host, sizeof host);
	if (ep_socket(ep, bind_addr, host, port, err, errlen) != 0) {
		goto err_free;
	}
	rv = uv_poll_init_socket(loop, &ep->poll, ep->fd);
	if (rv != 0) {
		snprintf(err, errlen, "udp poll: %s", uv_strerror(rv));
		close(ep->fd);
		goto err_free;
	}
	ep->poll.data = ep;
	ep->handles = 1;
	rv = uv_poll_start(&ep->poll, UV_READABLE, on_poll);
	if (rv != 0) {
		snprintf(err, errlen, "udp poll: %s", uv_strerror(rv));
		goto err_close;
	}
	uv_prepare_init(loop, &ep->prepare);
	ep->prepare.data = ep;
	uv_prepare_start(&ep->prepare, on_prepare);
	uv_unref((uv_handle_t *)&ep->prepare);
	uv_check_init(loop, &ep->check);
	ep->check.data = ep;
	uv_check_start(&ep->check, on_check);
	uv_unref((uv_handle_t *)&ep->check);
	uv_idle_init(loop, &ep->wake);
	ep->wake.data = ep;
	uv_unref((uv_handle_t *)&ep->wake);
	ep->handles = 4;
	*out = ep;
	return 0;

err_close:
	/* The handle lives in `ep`: free it from the close callback. */
	uv_close((uv_handle_t *)&ep->poll, on_poll_closed_early);
	return -1;
err_free:
	ep_free(ep);
	return -1;
}

/* ---- endpoint: closing and queries ---- */

static void ep_handle_closed(struct quic_endpoint *ep)
{
	ep->handles--;
	if (!ep->closing || ep->handles > 0) {
		return;
	}
	if (ep->closed_cb != NULL) {
		ep->closed_cb(ep->closed_arg);
	}
	ep_free(ep);
}

static void on_ep_handle_closed(uv_handle_t *h)
{
	ep_handle_closed(h->data);
}

static void on_poll_closed(uv_handle_t *h)
{
	struct quic_endpoint *ep = h->data;
	close(ep->fd);
	ep_handle_closed(ep);
}

static void ep_close_now(struct quic_endpoint *ep)
{
	struct qlist *e;
	ep->close_deferred = false;
	/* Say goodbye to every open connection while the socket still
	 * works, then drop them all: nobody waits for a closing period. */
	while ((e = qlist_pop(&ep->conns)) != NULL) {
		struct quic_conn *c = container_of(e, struct quic_conn, link);
		qlist_push(&ep->conns, e); /* conn_destroy unlinks it */
		if (c->state < CONN_CLOSING) {
			if (!c->close_requested) {
				quic_conn_close(c, ep->close_code,
				                ep->close_reason);
			}
			conn_start_closing(c);
		}
		conn_destroy(c);
	}
	ep->sock_closed = true;
	uv_close((uv_handle_t *)&ep->poll, on_poll_closed);
	uv_close((uv_handle_t *)&ep->prepare, on_ep_handle_closed);
	uv_close((uv_handle_t *)&ep->check, on_ep_handle_closed);
	uv_close((uv_handle_t *)&ep->wake, on_ep_handle_closed);
}

void quic_endpoint_close(struct quic_endpoint *ep, uint64_t app_error,
                         const char *reason, quic_endpoint_closed_fn cb,
                         void *arg)
{
	if (ep->closing) {
		return;
	}
	ep->closing = true;
	ep->closed_cb = cb;
	ep->closed_arg = arg;
	ep->close_code = app_error;
	snprintf(ep->close_reason, sizeof ep->close_reason, "%s",
	         reason ? reason : "");
	if (ep->ng_depth > 0) {
		ep->close_deferred = true;
		return;
	}
	ep_close_now(ep);
}

const struct sockaddr *quic_endpoint_local_addr(const struct quic_endpoint *ep)
{
	return (const struct sockaddr *)&ep->local;
}

size_t quic_endpoint_conn_count(const struct quic_endpoint *ep)
{
	return ep->nconns;
}

const uint8_t *quic_endpoint_secret(const struct quic_endpoint *ep)
{
	return ep->secret;
}

void quic_endpoint_get_stats(const struct quic_endpoint *ep,
                             struct quic_endpoint_stats *out)
{
	*out = ep->stats;
}
