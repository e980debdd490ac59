/* FSNP client on libuv; see fsnp_client.h. */
#include "client/fsnp_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"
#include "wire/fsnp_chunk.h"
#include "wire/fsnp_compress.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

#define TICK_MS 20u
#define RBUF_MIN 65536u
#define MAX_REPLY_BYTES (64u << 20)

enum {
	ST_CONNECTING = 0,
	ST_TLS, /* TCP up, TLS handshake running */
	ST_HANDSHAKE,
	ST_READY,
	ST_DOWN, /* waiting to reconnect */
};

struct cconn;

/* The fields a reply reads come first, together: the request is usually
 * out of the cache by the time its reply comes. */
struct creq {
	fsnp_reply_cb cb;
	void *data;
	struct fsnp_client *cl;
	uint32_t lane;
	uint16_t opcode;
	bool internal; /* handshake traffic: never replayed */
	bool lane_fixed;
	unsigned flags;
	unsigned attempts;
	size_t cap; /* bytes[] allocated; CREQ_POOLED: may be pooled */
	struct creq *next;
	uint64_t rid;
	uint64_t deadline;   /* loop ms */
	uint64_t not_before; /* delayed retry */
	bool has_key;        /* routed by the key at bytes + len */
	size_t len;          /* body: bytes[0 .. len) */
	size_t klen;         /* key: bytes[len .. len + klen) */
	/* The request's own copies of its body and key, in the same
	 * allocation: one malloc per request instead of three. */
	uint8_t bytes[];
};

/* Requests whose body and key fit in CREQ_POOLED bytes share one size, so
 * a freed one is kept for the next (the common small KV request costs no
 * malloc at all); up to CREQ_POOL_MAX per client. */
#define CREQ_POOLED 256u
#define CREQ_POOL_MAX 256u

/* A pending request under its rid. The rid is kept here so that finding a
 * reply's request, and shifting entries on removal, read only this array
 * and not the (cold) requests. */
struct pend {
	uint64_t rid;
	struct creq *r; /* NULL: empty */
};

struct cconn {
	struct fsnp_client *cl;
	size_t index;
	uv_tcp_t tcp; /* tcp.data = this */
	uv_connect_t connect;
	uv_getaddrinfo_t gai;
	uv_write_t wreq;
	char host[256];
	uint16_t port;
	int state;
	bool tcp_open;    /* tcp initialised, not closed */
	bool tcp_closing; /* uv_close issued, callback not yet run */
	bool resolving;   /* uv_getaddrinfo outstanding */
	bool draining;    /* GOAWAY received */
	bool writing;
	uint64_t next_rid;
	struct pend *tab; /* pending by rid: open addressing */
	size_t tab_cap, n_pending;
	struct creq *qhead, *qtail; /* waiting to be sent */
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct wbuf out, wout;
	struct fsnp_chunk_asm chunks;
	uint32_t rr;
	uint32_t max_frame;
	bool zlib;
	unsigned fails;
	uint64_t retry_at;    /* reconnect at (loop ms); 0 none */
	struct tls_session *tls; /* TLS connections: the session, owned */
	uint8_t *tls_in;      /* TLS: socket reads land here (ciphertext) */
	bool flush_due;       /* in cl->flush_list */
	struct cconn *flush_next;
};

struct fsnp_client {
	uv_loop_t *loop;
	struct fsnp_client_options o;
	char *host, *username, *password, *client_name, *codecs; /* owned */
	struct cconn **conns;
	size_t n_conns;
	struct {
		uint16_t conn;
		uint32_t lane;
	} slots[FSNP_SLOTS];
	bool have_topology;
	unsigned shard_count;
	uint64_t client_id;
	bool auth_required;
	struct tls_ctx *tls_ctx; /* owned; NULL without TLS */
	char last_error[256];         /* why the last connection failed */
	bool fatal;       /* cannot connect at all: last_error says why */
	uv_timer_t timer; /* timer.data = this */
	/* Requests framed during a loop turn go out in one write, before the
	 * loop polls again (flush.data = this; unreferenced). A pipelined
	 * batch sent as 1 + 15 writes reached the server in two turns. */
	uv_prepare_t flush;
	struct cconn *flush_list;
	struct creq *delayed;
	struct creq *pool; /* freed small requests, linked by next */
	unsigned n_pool;
	fsnp_client_ready_cb ready_cb;
	void *ready_data;
	bool ready_fired;
	bool refreshing;
	uint64_t opened_at;
	bool closing;
	int handles;
	fsnp_client_close_cb close_cb;
	void *close_data;
	uint64_t rng;
};

static void conn_connect(struct cconn *k);
static void conn_lost(struct cconn *k, const char *why);
static void conn_pump(struct cconn *k);
static void route_and_send(struct fsnp_client *cl, struct creq *r);

const char *fsnp_client_strerror(int error)
{
	switch (error) {
	case FSNP_CLIENT_OK:
		return "ok";
	case FSNP_CLIENT_ETIMEDOUT:
		return "request timed out";
	case FSNP_CLIENT_ELOST:
		return "connection lost (the request may have executed)";
	case FSNP_CLIENT_ECLOSED:
		return "client closed";
	case FSNP_CLIENT_EPROTO:
		return "malformed reply";
	case FSNP_CLIENT_ENOMEM:
		return "out of memory";
	default:
		return "invalid argument";
	}
}

static uint64_t now(const struct fsnp_client *cl)
{
	return uv_now(cl->loop);
}

static uint64_t rnd(struct fsnp_client *cl)
{
	/* xorshift64*: jitter only. */
	uint64_t x = cl->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	cl->rng = x;
	return x * 2685821657736338717ull;
}

static char *dup_str(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* --- Requests ------------------------------------------------------------ */

/* A request with room for `len` body and `klen` key bytes, its fields
 * zeroed (the bytes are not). NULL when out of memory. */
static struct creq *creq_new(struct fsnp_client *cl, size_t len, size_t klen)
{
	struct creq *r;
	size_t cap;
	if (len > SIZE_MAX / 4 || klen > SIZE_MAX / 4) {
		return NULL;
	}
	cap = len + klen <= CREQ_POOLED ? CREQ_POOLED : len + klen;
	if (cap == CREQ_POOLED && cl->pool != NULL) {
		r = cl->pool;
		cl->pool = r->next;
		cl->n_pool--;
	} else {
		r = malloc(sizeof *r + cap);
		if (r == NULL) {
			return NULL;
		}
	}
	memset(r, 0, sizeof *r);
	r->cl = cl;
	r->cap = cap;
	return r;
}

static void creq_free(struct creq *r)
{
	struct fsnp_client *cl = r->cl;
	if (r->cap == CREQ_POOLED && cl->n_pool < CREQ_POOL_MAX) {
		r->next = cl->pool;
		cl->pool = r;
		cl->n_pool++;
		return;
	}
	free(r);
}

/* Calls back once and frees. */
static void deliver(struct creq *r, const struct fsnp_reply *rep)
{
	if (r->cb != NULL) {
		r->cb(r->data, rep);
	}
	creq_free(r);
}

static void deliver_error(struct creq *r, int error)
{
	struct fsnp_reply rep;
	memset(&rep, 0, sizeof rep);
	rep.error = error;
	rep.message = fsnp_client_strerror(error);
	rep.attempts = r->attempts;
	deliver(r, &rep);
}

/* --- Pending table (rid -> request), linear probing ------------------------
 */

static size_t slot_of(const struct cconn *k, uint64_t rid)
{
	return (size_t)(rid * 11400714819323198485ull) & (k->tab_cap - 1);
}

static int tab_put(struct cconn *k, struct creq *r)
{
	if ((k->n_pending + 1) * 2 > k->tab_cap) {
		size_t cap = k->tab_cap ? k->tab_cap * 2 : 64;
		struct pend *t = calloc(cap, sizeof *t);
		struct pend *old = k->tab;
		size_t ocap = k->tab_cap;
		if (t == NULL) {
			return -1;
		}
		k->tab = t;
		k->tab_cap = cap;
		for (size_t i = 0; i < ocap; i++) {
			if (old[i].r != NULL) {
				size_t j = slot_of(k, old[i].rid);
				while (t[j].r != NULL) {
					j = (j + 1) & (cap - 1);
				}
				t[j] = old[i];
			}
		}
		free(old);
	}
	size_t j = slot_of(k, r->rid);
	while (k->tab[j].r != NULL) {
		j = (j + 1) & (k->tab_cap - 1);
	}
	k->tab[j].rid = r->rid;
	k->tab[j].r = r;
	k->n_pending++;
	return 0;
}

static void tab_del_at(struct cconn *k, size_t i)
{
	size_t mask = k->tab_cap - 1;
	k->tab[i].r = NULL;
	k->n_pending--;
	/* Backward shift so probing never meets a hole too early. */
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (k->tab[j].r == NULL) {
			return;
		}
		size_t h = slot_of(k, k->tab[j].rid);
		if ((j > i && (h <= i || h > j)) ||
		    (j < i && h <= i && h > j)) {
			k->tab[i] = k->tab[j];
			k->tab[j].r = NULL;
			i = j;
		}
	}
}

static struct creq *tab_take(struct cconn *k, uint64_t rid)
{
	if (k->tab_cap == 0) {
		return NULL;
	}
	size_t j = slot_of(k, rid);
	while (k->tab[j].r != NULL) {
		if (k->tab[j].rid == rid) {
			struct creq *r = k->tab[j].r;
			tab_del_at(k, j);
			return r;
		}
		j = (j + 1) & (k->tab_cap - 1);
	}
	return NULL;
}

/* --- Writing ----------------------------------------------------------- */

static void on_write(uv_write_t *w, int status)
{
	struct cconn *k = w->data;
	k->writing = false;
	wbuf_reset(&k->wout);
	if (status < 0) {
		conn_lost(k, uv_strerror(status));
		return;
	}
	conn_pump(k);
}

/* TLS: encrypts what `out` holds (once the session is up) and moves all
 * pending ciphertext (handshake included) into `wout`. */
static int tls_seal(struct cconn *k)
{
	uint8_t *p = NULL;
	size_t n = 0;
	int rv = 0;

	if (tls_established(k->tls) && k->out.len > 0) {
		rv = tls_write(k->tls, k->out.data, k->out.len);
		wbuf_reset(&k->out);
	}
	if (rv == 0) {
		rv = tls_take(k->tls, &p, &n);
	}
	if (rv == 0 && n > 0) {
		rv = wbuf_append(&k->wout, p, n);
	}
	free(p);
	return rv;
}

static void kick(struct cconn *k)
{
	if (k->writing || k->state == ST_DOWN || k->state == ST_CONNECTING) {
		return;
	}
	if (k->tls != NULL) {
		if (tls_seal(k) != 0) {
			wbuf_reset(&k->wout);
			conn_lost(k, "TLS: cannot encrypt");
			return;
		}
		if (k->wout.len == 0) {
			return;
		}
	} else {
		if (k->out.len == 0) {
			return;
		}
		struct wbuf t = k->wout;
		k->wout = k->out;
		k->out = t;
	}
	uv_buf_t b = uv_buf_init((char *)k->wout.data, (unsigned)k->wout.len);
	k->wreq.data = k;
	if (uv_write(&k->wreq, (uv_stream_t *)&k->tcp, &b, 1, on_write) != 0) {
		wbuf_reset(&k->wout);
		conn_lost(k, "write failed");
		return;
	}
	k->writing = true;
}

/* Frames r onto k (chunked at the server's limit, compressed on zlib
 * connections) and registers it as pending. */
static int conn_emit(struct cconn *k, struct creq *r)
{
	struct fsnp_header h = {
	    .dir = FSNP_DIR_REQUEST,
	    .flags =
	        (uint8_t)(((r->flags & FSNP_REQ_NO_REPLY) ? FSNP_FLAG_NO_REPLY
	                                                  : 0) |
	                  ((r->flags & FSNP_REQ_COMPACT) ? FSNP_FLAG_CUSTOM
	                                                 : 0)),
	    .lane_id = r->lane,
	    .opcode = r->opcode,
	    .request_id = r->rid,
	    .body_len = (uint32_t)r->len,
	};
	uint32_t chunk = k->max_frame ? k->max_frame : 65536;
	bool zlib = k->zlib && !(r->flags & FSNP_REQ_COMPACT) && r->len >= 256;
	/* A body that fits one frame skips the chunker's general loop: the
	 * frame is the same. */
	int rv = !zlib && r->len <= chunk
	             ? fsnp_frame_append(&k->out, &h, r->bytes, r->len)
	             : fsnp_compress_frames(&k->out, &h, r->bytes, r->len, zlib,
	                                    chunk);
	if (rv != 0) {
		return -1;
	}
	r->attempts++;
	if (r->flags & FSNP_REQ_NO_REPLY) {
		struct fsnp_reply rep;
		memset(&rep, 0, sizeof rep);
		rep.attempts = r->attempts;
		deliver(r, &rep);
		return 0;
	}
	if (tab_put(k, r) != 0) {
		return -1;
	}
	return 0;
}

static void queue_push(struct cconn *k, struct creq *r)
{
	r->next = NULL;
	if (k->qtail == NULL) {
		k->qhead = r;
	} else {
		k->qtail->next = r;
	}
	k->qtail = r;
}

/* Sends what the queue holds while the connection can take it. */
static void conn_pump(struct cconn *k)
{
	struct fsnp_client *cl = k->cl;
	uint32_t window = cl->o.max_inflight ? cl->o.max_inflight : 4096;
	if (k->state == ST_READY && k->draining && k->n_pending == 0 &&
	    k->tcp_open) {
		/* GOAWAY: everything answered; reconnect for the queue. */
		conn_lost(k, "server sent GOAWAY");
		return;
	}
	while (k->qhead != NULL && !k->draining) {
		struct creq *r = k->qhead;
		bool handshake = r->internal;
		if (k->state != ST_READY &&
		    !(k->state == ST_HANDSHAKE && handshake)) {
			break;
		}
		if (!handshake && k->n_pending >= window) {
			break;
		}
		k->qhead = r->next;
		if (k->qhead == NULL) {
			k->qtail = NULL;
		}
		r->next = NULL;
		r->rid = k->next_rid++;
		if (k->next_rid == 0) {
			k->next_rid = 1;
		}
		if (conn_emit(k, r) != 0) {
			deliver_error(r, FSNP_CLIENT_ENOMEM);
		}
	}
	if (!k->flush_due) {
		k->flush_due = true;
		k->flush_next = cl->flush_list;
		cl->flush_list = k;
	}
}

static void on_flush(uv_prepare_t *h)
{
	struct fsnp_client *cl = h->data;

	while (cl->flush_list != NULL) {
		struct cconn *k = cl->flush_list;
		cl->flush_list = k->flush_next;
		k->flush_due = false;
		kick(k);
	}
}

/* --- Routing ---------------------------------------------------------------
 */

static uint32_t data_lanes(const struct fsnp_client *cl)
{
	return cl->o.lanes ? cl->o.lanes : 8;
}

static void route_and_send(struct fsnp_client *cl, struct creq *r)
{
	struct cconn *k = cl->conns[0];
	if (!r->lane_fixed) {
		if (fsnp_opcode_is_control(r->opcode) &&
		    r->opcode != FSNP_OP_PIPELINE) {
			r->lane = 0;
		} else if (r->has_key) {
			unsigned slot =
			    fsnp_slot_of(r->bytes + r->len, r->klen);
			if (cl->have_topology) {
				k = cl->conns[cl->slots[slot].conn];
				r->lane = cl->slots[slot].lane;
			} else {
				/* Key affinity keeps one key's requests in
				 * order on one lane. */
				r->lane = 1 + slot % data_lanes(cl);
			}
		} else {
			k->rr = k->rr % data_lanes(cl) + 1;
			r->lane = k->rr;
		}
	}
	queue_push(k, r);
	conn_pump(k);
}

/* --- Handshake --------------------------------------------------------------
 */

static int submit(struct fsnp_client *cl, struct cconn *k, uint32_t lane,
                  bool lane_fixed, bool internal, uint16_t opcode,
                  const void *key, size_t klen, const uint8_t *body, size_t len,
                  unsigned flags, fsnp_reply_cb cb, void *data);

static void ready(struct fsnp_client *cl, int status, const char *err)
{
	if (cl->ready_fired) {
		return;
	}
	cl->ready_fired = true;
	if (cl->ready_cb != NULL) {
		cl->ready_cb(cl->ready_data, cl, status, err);
	}
}

static bool map_u64(const struct fsnp_val *m, const char *key, uint64_t *out)
{
	return fsnp_map_u64(m, key, out) == 0;
}

static void on_shards(void *data, const struct fsnp_reply *rep);

static void refresh_topology(struct fsnp_client *cl)
{
	static const uint8_t empty[] = {FSNP_MAP, 0, 0, 0, 0};
	if (cl->refreshing || cl->closing) {
		return;
	}
	cl->refreshing = true;
	submit(cl, cl->conns[0], 0, true, true, FSNP_OP_SHARDS, NULL, 0, empty,
	       sizeof empty, 0, on_shards, cl);
}

static void conn_ready(struct cconn *k)
{
	struct fsnp_client *cl = k->cl;
	k->state = ST_READY;
	k->fails = 0;
	if (k->index == 0 && !cl->ready_fired) {
		if (cl->o.topology) {
			refresh_topology(cl);
		} else {
			ready(cl, 0, NULL);
		}
	}
	conn_pump(k);
}

static void on_auth(void *data, const struct fsnp_reply *rep)
{
	struct cconn *k = data;
	if (rep->error == FSNP_CLIENT_OK && rep->status == FSNP_STATUS_OK) {
		conn_ready(k);
		return;
	}
	if (k->index == 0) {
		ready(k->cl, -1,
		      rep->error
		          ? fsnp_client_strerror(rep->error)
		          : (rep->message ? rep->message : "AUTH failed"));
	}
}

static void send_auth(struct cconn *k)
{
	struct fsnp_client *cl = k->cl;
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "username");
	fsnp_w_str(&w, cl->username ? cl->username : "default");
	fsnp_w_key(&w, "password");
	fsnp_w_str(&w, cl->password);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0) {
		submit(cl, k, 0, true, true, FSNP_OP_AUTH, NULL, 0, b.data,
		       b.len, 0, on_auth, k);
	}
	wbuf_free(&b);
}

static void on_startup(void *data, const struct fsnp_reply *rep)
{
	struct cconn *k = data;
	struct fsnp_client *cl = k->cl;
	struct fsnp_val lim, v;
	uint64_t x;

	if (rep->error != FSNP_CLIENT_OK || rep->status != FSNP_STATUS_OK ||
	    rep->value.tag != FSNP_MAP) {
		if (k->index == 0) {
			ready(cl, -1,
			      rep->error     ? fsnp_client_strerror(rep->error)
			      : rep->message ? rep->message
			                     : "STARTUP refused");
		}
		return;
	}
	if (fsnp_map_map(&rep->value, "limits", &lim) == 0 &&
	    map_u64(&lim, "max_frame_bytes", &x) && x > 0) {
		k->max_frame = (uint32_t)(x < FSNP_MAX_FRAME_BYTES_LIMIT
		                              ? x
		                              : FSNP_MAX_FRAME_BYTES_LIMIT);
	}
	if (map_u64(&rep->value, "client_id", &x) && k->index == 0) {
		cl->client_id = x;
	}
	if (fsnp_map_map(&rep->value, "route", &v) == 0 &&
	    map_u64(&v, "shard_count", &x)) {
		cl->shard_count = (unsigned)x;
	}
	bool auth = false;
	if (fsnp_map_bool(&rep->value, "auth_required", &auth) != 0) {
		auth = false;
	}
	struct fsnp_bytes comp;
	k->zlib = fsnp_map_bin(&rep->value, "compression", &comp) == 0 &&
	          fsnp_bytes_eq(comp, "zlib");
	if (k->index == 0) {
		cl->auth_required = auth;
	}
	if (cl->password != NULL) {
		send_auth(k);
	} else if (auth) {
		if (k->index == 0) {
			ready(cl, -1,
			      "the server requires authentication but no "
			      "password was given");
		}
	} else {
		conn_ready(k);
	}
}

static void send_startup(struct cconn *k)
{
	struct fsnp_client *cl = k->cl;
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "client_name");
	fsnp_w_str(&w, cl->client_name ? cl->client_name : "liblodestone");
	fsnp_w_key(&w, "driver_name");
	fsnp_w_str(&w, "liblodestone");
	fsnp_w_key(&w, "compression");
	fsnp_w_str(&w, cl->o.zlib ? "zlib" : "none");
	if (cl->codecs != NULL && cl->codecs[0] != '\0') {
		const char *p = cl->codecs;
		fsnp_w_key(&w, "compact_response_codecs");
		fsnp_w_array_begin(&w);
		while (*p != '\0') {
			const char *e = strchr(p, ',');
			size_t n = e ? (size_t)(e - p) : strlen(p);
			fsnp_w_bin(&w, p, n);
			p += n + (e != NULL);
		}
		fsnp_w_array_end(&w);
	}
	if (cl->o.topology && k->index == 0) {
		fsnp_w_key(&w, "events");
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, "TOPOLOGY_CHANGED");
		fsnp_w_array_end(&w);
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0) {
		submit(cl, k, 0, true, true, FSNP_OP_STARTUP, NULL, 0, b.data,
		       b.len, 0, on_startup, k);
	}
	wbuf_free(&b);
}

/* --- Topology ------------------------------------------------------------ */

static struct cconn *conn_new(struct fsnp_client *cl, const char *host,
                              uint16_t port);

static size_t conn_for(struct fsnp_client *cl, const char *host, uint16_t port)
{
	for (size_t i = 0; i < cl->n_conns; i++) {
		if (cl->conns[i]->port == port &&
		    strcmp(cl->conns[i]->host, host) == 0) {
			return i;
		}
	}
	/* The seed answered under whatever name it was reached by: a range
	 * naming the seed's port on a loopback name is the seed. */
	if (port == cl->conns[0]->port &&
	    (strcmp(host, "127.0.0.1") == 0 ||
	     strcmp(host, "localhost") == 0) &&
	    (strcmp(cl->conns[0]->host, "127.0.0.1") == 0 ||
	     strcmp(cl->conns[0]->host, "localhost") == 0)) {
		return 0;
	}
	struct cconn *k = conn_new(cl, host, port);
	if (k == NULL) {
		return 0;
	}
	conn_connect(k);
	return k->index;
}

static void on_shards(void *data, const struct fsnp_reply *rep)
{
	struct fsnp_client *cl = data;
	struct fsnp_val ranges, item;
	struct fsnp_iter it;
	bool covered[FSNP_SLOTS] = {false};
	unsigned n = 0;

	cl->refreshing = false;
	if (rep->error != FSNP_CLIENT_OK || rep->status != FSNP_STATUS_OK ||
	    fsnp_map_array(&rep->value, "ranges", &ranges) != 0) {
		ready(cl, -1, "SHARDS failed");
		return;
	}
	fsnp_iter_init(&it, &ranges);
	while (fsnp_iter_next(&it, NULL, &item)) {
		uint64_t first, last, lane, port;
		struct fsnp_bytes host;
		char h[256];
		struct fsnp_val ep;
		if (!map_u64(&item, "first_slot", &first) ||
		    !map_u64(&item, "last_slot", &last) ||
		    !map_u64(&item, "lane_id", &lane) || last >= FSNP_SLOTS ||
		    first > last) {
			continue;
		}
		if (fsnp_map_map(&item, "endpoint", &ep) != 0) {
			ep = item;
		}
		if ((fsnp_map_bin(&ep, "native_host", &host) != 0 &&
		     fsnp_map_bin(&ep, "host", &host) != 0) ||
		    !map_u64(&ep, "native_port", &port) || host.len == 0 ||
		    host.len >= sizeof h) {
			continue;
		}
		memcpy(h, host.ptr, host.len);
		h[host.len] = '\0';
		size_t ci = conn_for(cl, h, (uint16_t)port);
		for (uint64_t s = first; s <= last; s++) {
			cl->slots[s].conn = (uint16_t)ci;
			cl->slots[s].lane = (uint32_t)lane;
			if (!covered[s]) {
				covered[s] = true;
				n++;
			}
		}
	}
	if (n != FSNP_SLOTS) {
		ready(cl, -1, "SHARDS does not cover every slot");
		return;
	}
	cl->have_topology = true;
	ready(cl, 0, NULL);
}

/* --- Reading ------------------------------------------------------------ */

static void retry_later(struct fsnp_client *cl, struct creq *r, uint64_t ms)
{
	r->not_before = now(cl) + (ms ? ms : 1);
	r->next = cl->delayed;
	cl->delayed = r;
}

static void handle_reply(struct cconn *k, const struct fsnp_message *m)
{
	struct fsnp_client *cl = k->cl;
	struct creq *r = tab_take(k, m->h.request_id);
	struct fsnp_reply rep;
	char msg[512];
	unsigned max = cl->o.max_attempts ? cl->o.max_attempts : 4;

	if (r == NULL) {
		return; /* timed out already */
	}
	memset(&rep, 0, sizeof rep);
	rep.attempts = r->attempts;
	if (m->h.opcode != r->opcode || m->h.lane_id != r->lane || m->len < 2) {
		rep.error = FSNP_CLIENT_EPROTO;
		rep.message = "reply does not match its request";
		deliver(r, &rep);
		return;
	}
	rep.status = wire_load_u16(m->body);
	rep.payload = m->body + 2;
	rep.payload_len = m->len - 2;
	rep.custom = (m->h.flags & FSNP_FLAG_CUSTOM) != 0;
	if (!rep.custom &&
	    fsnp_value_decode_response(m->body, m->len, NULL, &rep.status,
	                               &rep.value) != 0) {
		rep.error = FSNP_CLIENT_EPROTO;
		rep.message = "malformed reply body";
		deliver(r, &rep);
		return;
	}
	bool safe = false;
	if (rep.status != FSNP_STATUS_OK && !rep.custom) {
		struct fsnp_bytes b;
		msg[0] = '\0';
		if (rep.value.tag == FSNP_BIN) {
			b = rep.value.as.bin;
		} else if (fsnp_map_bin(&rep.value, "message", &b) != 0) {
			b.ptr = (const uint8_t *)"";
			b.len = 0;
		}
		size_t n = b.len < sizeof msg - 1 ? b.len : sizeof msg - 1;
		memcpy(msg, b.ptr, n);
		msg[n] = '\0';
		rep.message = msg;
		if (rep.value.tag == FSNP_MAP) {
			fsnp_map_u64(&rep.value, "retry_after_ms",
			             &rep.retry_after_ms);
			fsnp_map_bool(&rep.value, "safe_to_retry", &safe);
		}
	}
	if (!r->internal && r->attempts < max && !cl->closing) {
		if (rep.status == FSNP_STATUS_BUSY) {
			/* Not executed: come back after retry_after_ms. */
			retry_later(cl, r, rep.retry_after_ms);
			return;
		}
		if (rep.status == FSNP_STATUS_REROUTE &&
		    (safe || (r->flags & FSNP_REQ_IDEMPOTENT))) {
			if (cl->o.topology) {
				refresh_topology(cl);
			}
			retry_later(cl, r,
			            rep.retry_after_ms ? rep.retry_after_ms
			                               : 50);
			return;
		}
	}
	deliver(r, &rep);
}

static void handle_event(struct cconn *k, const struct fsnp_message *m)
{
	struct fsnp_client *cl = k->cl;
	struct fsnp_val v, name;
	uint16_t status;
	char ev[64] = "";
	if (fsnp_value_decode_response(m->body, m->len, NULL, &status, &v) !=
	    0) {
		return;
	}
	if (m->h.opcode == FSNP_OP_GOAWAY) {
		k->draining = true;
		snprintf(ev, sizeof ev, "GOAWAY");
	} else if (fsnp_map_get(&v, "event", &name) == 0 &&
	           name.tag == FSNP_BIN && name.as.bin.len < sizeof ev) {
		memcpy(ev, name.as.bin.ptr, name.as.bin.len);
		ev[name.as.bin.len] = '\0';
		if (strcmp(ev, "TOPOLOGY_CHANGED") == 0 && cl->o.topology) {
			refresh_topology(cl);
		}
	}
	if (cl->o.on_event != NULL) {
		cl->o.on_event(cl->o.event_data, m->h.opcode, ev, &v);
	}
	conn_pump(k);
}

/* Makes room for at least RBUF_MIN more plaintext bytes in rbuf. */
static int rbuf_room(struct cconn *k)
{
	if (k->rcap - k->rlen < RBUF_MIN) {
		size_t cap = k->rcap ? k->rcap : RBUF_MIN;
		while (cap - k->rlen < RBUF_MIN) {
			cap *= 2;
		}
		uint8_t *p = realloc(k->rbuf, cap);
		if (p == NULL) {
			return -1;
		}
		k->rbuf = p;
		k->rcap = cap;
	}
	return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct cconn *k = h->data;
	(void)suggested;
	if (k->tls != NULL) {
		*buf = uv_buf_init((char *)k->tls_in, TLS_READ_BUF);
		return;
	}
	if (rbuf_room(k) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)k->rbuf + k->rlen,
	                   (unsigned)(k->rcap - k->rlen));
}

static void send_startup(struct cconn *k);

/* A TLS failure: a certificate the client cannot accept will not change
 * on a retry, so a client still connecting gives up with the reason. */
static void tls_failed(struct cconn *k, const char *why)
{
	struct fsnp_client *cl = k->cl;
	snprintf(cl->last_error, sizeof cl->last_error, "%s", why);
	if (!cl->ready_fired && k->index == 0) {
		ready(cl, -1, cl->last_error);
	}
	conn_lost(k, why);
}

/* TLS: feeds `n` ciphertext bytes from tls_in, starts STARTUP once the
 * handshake completes and decrypts what came into rbuf. -1 when the
 * connection was lost. */
static int tls_input(struct cconn *k, size_t n)
{
	char err[256];
	bool was = tls_established(k->tls);

	if (tls_feed(k->tls, k->tls_in, n, err, sizeof err) != 0) {
		tls_failed(k, err);
		return -1;
	}
	if (!was && tls_established(k->tls)) {
		k->state = ST_HANDSHAKE;
		send_startup(k);
	}
	for (;;) {
		size_t got = 0;
		int rv;
		if (rbuf_room(k) != 0) {
			conn_lost(k, "out of memory");
			return -1;
		}
		rv = tls_read(k->tls, k->rbuf + k->rlen, k->rcap - k->rlen,
		                   &got, err, sizeof err);
		if (rv < 0) {
			tls_failed(k, err);
			return -1;
		}
		if (rv == 1) {
			conn_lost(k, "the server closed the TLS session");
			return -1;
		}
		if (got == 0) {
			break;
		}
		k->rlen += got;
	}
	kick(k); /* handshake messages, tickets */
	return k->state == ST_DOWN ? -1 : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct cconn *k = s->data;
	size_t off = 0;
	(void)buf;
	if (nread < 0) {
		conn_lost(k, nread == UV_EOF ? "connection closed by the server"
		                             : uv_strerror((int)nread));
		return;
	}
	if (k->tls != NULL) {
		if (tls_input(k, (size_t)nread) != 0) {
			return;
		}
	} else {
		k->rlen += (size_t)nread;
	}
	while (k->tcp_open && k->state != ST_DOWN) {
		struct fsnp_frame f;
		size_t flen = 0;
		struct fsnp_message m;
		bool ready_msg = false;
		int e = fsnp_frame_decode(
		    k->rbuf + off, k->rlen - off, FSNP_DIR_RESPONSE,
		    FSNP_MAX_FRAME_BYTES_LIMIT, &f, &flen);
		if (e != 0) {
			conn_lost(k, fsnp_strerror(e));
			return;
		}
		if (flen == 0) {
			break;
		}
		off += flen;
		if (fsnp_chunk_feed(&k->chunks, &f, 0, &m, &ready_msg) != 0) {
			conn_lost(k, "bad chunked reply");
			return;
		}
		if (!ready_msg) {
			continue;
		}
		if (fsnp_compress_inflate_message(&m, MAX_REPLY_BYTES) != 0) {
			fsnp_message_free(&m);
			conn_lost(k, "bad compressed reply");
			return;
		}
		if (m.h.request_id == 0) {
			handle_event(k, &m);
		} else {
			handle_reply(k, &m);
		}
		fsnp_message_free(&m);
	}
	if (!k->tcp_open) {
		return;
	}
	if (off > 0) {
		memmove(k->rbuf, k->rbuf + off, k->rlen - off);
		k->rlen -= off;
	}
	conn_pump(k);
}

/* --- Connections -----------------------------------------------------------
 */

static void client_free(struct fsnp_client *cl)
{
	fsnp_client_close_cb cb = cl->close_cb;
	void *data = cl->close_data;
	for (size_t i = 0; i < cl->n_conns; i++) {
		struct cconn *c = cl->conns[i];
		free(c->tab);
		free(c->rbuf);
		wbuf_free(&c->out);
		wbuf_free(&c->wout);
		fsnp_chunk_close(&c->chunks);
		tls_session_free(c->tls);
		free(c->tls_in);
		free(c);
	}
	free(cl->conns);
	while (cl->pool != NULL) {
		struct creq *r = cl->pool;
		cl->pool = r->next;
		free(r);
	}
	tls_ctx_free(cl->tls_ctx);
	free(cl->host);
	free(cl->username);
	free(cl->password);
	free(cl->client_name);
	free(cl->codecs);
	free(cl);
	if (cb != NULL) {
		cb(data);
	}
}

/* One handle or request of the client's finished; the client is freed
 * after the last once closing. */
static void handle_done(struct fsnp_client *cl)
{
	if (--cl->handles == 0 && cl->closing) {
		client_free(cl);
	}
}

static void on_tcp_closed(uv_handle_t *h)
{
	struct cconn *k = h->data;
	k->tcp_closing = false;
	handle_done(k->cl);
}

static void close_tcp(struct cconn *k)
{
	if (k->tcp_open) {
		k->tcp_open = false;
		k->tcp_closing = true;
		uv_close((uv_handle_t *)&k->tcp, on_tcp_closed);
	}
}

/* Fails or requeues everything in flight and reconnects with jitter. */
static void conn_lost(struct cconn *k, const char *why)
{
	struct fsnp_client *cl = k->cl;
	unsigned max = cl->o.max_attempts ? cl->o.max_attempts : 4;
	if (k->state == ST_DOWN) {
		return;
	}
	if (why != NULL && cl->last_error[0] == '\0') {
		snprintf(cl->last_error, sizeof cl->last_error, "%s", why);
	}
	tls_session_free(k->tls);
	k->tls = NULL;
	k->state = ST_DOWN;
	k->draining = false;
	k->writing = false;
	close_tcp(k);
	wbuf_reset(&k->out);
	k->rlen = 0;
	fsnp_chunk_close(&k->chunks);
	struct fsnp_chunk_limits lim = {MAX_REPLY_BYTES, 1024, 256u << 20, 0};
	fsnp_chunk_init(&k->chunks, &lim);
	/* Handshake traffic still queued is dropped: it is resent on
	 * reconnect. */
	struct creq **pp = &k->qhead;
	k->qtail = NULL;
	while (*pp != NULL) {
		struct creq *r = *pp;
		if (r->internal) {
			*pp = r->next;
			creq_free(r);
		} else {
			k->qtail = r;
			pp = &r->next;
		}
	}
	for (size_t i = 0; i < k->tab_cap; i++) {
		struct creq *r = k->tab[i].r;
		if (r == NULL) {
			continue;
		}
		k->tab[i].r = NULL;
		k->n_pending--;
		if (r->internal) {
			creq_free(r);
		} else if ((r->flags & FSNP_REQ_IDEMPOTENT) &&
		           r->attempts < max && !cl->closing) {
			/* Replayed first, in its original order is not
			 * promised. */
			r->next = k->qhead;
			k->qhead = r;
			if (k->qtail == NULL) {
				k->qtail = r;
			}
		} else {
			deliver_error(r, cl->closing ? FSNP_CLIENT_ECLOSED
			                             : FSNP_CLIENT_ELOST);
		}
	}
	if (cl->closing) {
		return;
	}
	uint64_t backoff = 50ull << (k->fails < 5 ? k->fails : 5);
	k->fails++;
	k->retry_at = now(cl) + backoff + rnd(cl) % (backoff / 2 + 1);
}

static void on_connect(uv_connect_t *c, int status)
{
	struct cconn *k = c->data;
	if (k->cl->closing) {
		return;
	}
	if (status != 0) {
		conn_lost(k, uv_strerror(status));
		return;
	}
	uv_tcp_nodelay(&k->tcp, 1);
	k->cl->last_error[0] = '\0';
	if (k->cl->tls_ctx != NULL) {
		char err[256];
		if (k->tls_in == NULL) {
			k->tls_in = malloc(TLS_READ_BUF);
		}
		k->tls = k->tls_in == NULL
		             ? NULL
		             : tls_session_new_client(k->cl->tls_ctx, k->host);
		if (k->tls == NULL ||
		    tls_feed(k->tls, NULL, 0, err, sizeof err) != 0) {
			tls_failed(k, k->tls == NULL
			                  ? "TLS: cannot start a session"
			                  : err);
			return;
		}
	}
	if (uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read) != 0) {
		conn_lost(k, "read failed");
		return;
	}
	k->next_rid = 1;
	if (k->tls != NULL) {
		k->state = ST_TLS;
		kick(k); /* the ClientHello */
		return;
	}
	k->state = ST_HANDSHAKE;
	send_startup(k);
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
	struct cconn *k = g->data;
	struct fsnp_client *cl = k->cl;
	k->resolving = false;
	if (cl->closing || status != 0 || res == NULL) {
		if (!cl->closing) {
			conn_lost(k, uv_strerror(status));
		}
		if (res != NULL) {
			uv_freeaddrinfo(res);
		}
		handle_done(cl);
		return;
	}
	uv_tcp_init(cl->loop, &k->tcp);
	k->tcp.data = k;
	k->tcp_open = true;
	cl->handles++;
	k->connect.data = k;
	if (uv_tcp_connect(&k->connect, &k->tcp, res->ai_addr, on_connect) !=
	    0) {
		conn_lost(k, "connect failed");
	}
	uv_freeaddrinfo(res);
	handle_done(cl);
}

static void conn_connect(struct cconn *k)
{
	struct fsnp_client *cl = k->cl;
	struct addrinfo hints;
	char port[8];
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof port, "%u", k->port);
	k->state = ST_CONNECTING;
	k->retry_at = 0;
	k->gai.data = k;
	cl->handles++;
	k->resolving = true;
	if (uv_getaddrinfo(cl->loop, &k->gai, on_resolved, k->host, port,
	                   &hints) != 0) {
		k->resolving = false;
		cl->handles--;
		k->state = ST_CONNECTING; /* so conn_lost acts */
		conn_lost(k, "cannot resolve");
	}
}

static struct cconn *conn_new(struct fsnp_client *cl, const char *host,
                              uint16_t port)
{
	struct cconn **v = realloc(cl->conns, (cl->n_conns + 1) * sizeof *v);
	struct cconn *k = calloc(1, sizeof *k);
	if (v == NULL || k == NULL) {
		free(k);
		if (v != NULL) {
			cl->conns = v;
		}
		return NULL;
	}
	cl->conns = v;
	k->cl = cl;
	k->index = cl->n_conns;
	snprintf(k->host, sizeof k->host, "%s", host);
	k->port = port;
	k->next_rid = 1;
	k->max_frame = 65536; /* until STARTUP tells */
	wbuf_init(&k->out);
	wbuf_init(&k->wout);
	struct fsnp_chunk_limits lim = {MAX_REPLY_BYTES, 1024, 256u << 20, 0};
	fsnp_chunk_init(&k->chunks, &lim);
	cl->conns[cl->n_conns++] = k;
	return k;
}

/* --- Timer: timeouts, delayed retries, reconnects --------------------------
 */

static void expire_queue(struct fsnp_client *cl, struct cconn *k, uint64_t t)
{
	struct creq **pp = &k->qhead;
	k->qtail = NULL;
	while (*pp != NULL) {
		struct creq *r = *pp;
		if (r->deadline <= t) {
			*pp = r->next;
			deliver_error(r, FSNP_CLIENT_ETIMEDOUT);
		} else {
			k->qtail = r;
			pp = &r->next;
		}
	}
	(void)cl;
}

static void on_timer(uv_timer_t *tm)
{
	struct fsnp_client *cl = tm->data;
	uint64_t t = now(cl);
	uint64_t timeout = cl->o.timeout_ms ? cl->o.timeout_ms : 30000;

	if (!cl->ready_fired && cl->fatal) {
		ready(cl, -1, cl->last_error);
	}
	if (!cl->ready_fired && t - cl->opened_at >= timeout) {
		char msg[320];
		if (cl->last_error[0] != '\0') {
			snprintf(msg, sizeof msg,
			         "cannot reach the server in time (last: %s)",
			         cl->last_error);
		} else {
			snprintf(msg, sizeof msg,
			         "cannot reach the server in time");
		}
		ready(cl, -1, msg);
	}
	/* Delayed retries whose time has come. */
	struct creq *due = NULL, **pp = &cl->delayed;
	while (*pp != NULL) {
		struct creq *r = *pp;
		if (r->not_before <= t) {
			*pp = r->next;
			r->next = due;
			due = r;
		} else {
			pp = &r->next;
		}
	}
	while (due != NULL) {
		struct creq *r = due;
		due = r->next;
		r->next = NULL;
		if (r->deadline <= t) {
			deliver_error(r, FSNP_CLIENT_ETIMEDOUT);
		} else {
			route_and_send(cl, r);
		}
	}
	for (size_t i = 0; i < cl->n_conns; i++) {
		struct cconn *k = cl->conns[i];
		for (size_t j = 0; j < k->tab_cap; j++) {
			struct creq *r = k->tab[j].r;
			if (r != NULL && r->deadline <= t) {
				tab_del_at(k, j);
				deliver_error(r, FSNP_CLIENT_ETIMEDOUT);
				j--; /* a shifted entry may now sit at j */
			}
		}
		expire_queue(cl, k, t);
		if (k->state == ST_DOWN && k->retry_at != 0 &&
		    t >= k->retry_at && !k->tcp_open && !k->tcp_closing) {
			conn_connect(k);
		}
	}
}

/* --- Public API
 * ---------------------------------------------------------------- */

static int submit(struct fsnp_client *cl, struct cconn *k, uint32_t lane,
                  bool lane_fixed, bool internal, uint16_t opcode,
                  const void *key, size_t klen, const uint8_t *body, size_t len,
                  unsigned flags, fsnp_reply_cb cb, void *data)
{
	struct creq *r;
	if (cl->closing) {
		return FSNP_CLIENT_ECLOSED;
	}
	r = creq_new(cl, len, key != NULL ? klen : 0);
	if (r == NULL) {
		return FSNP_CLIENT_ENOMEM;
	}
	r->lane = lane;
	r->lane_fixed = lane_fixed;
	r->internal = internal;
	r->opcode = opcode;
	r->flags = flags;
	r->cb = cb;
	r->data = data;
	r->deadline = now(cl) + (cl->o.timeout_ms ? cl->o.timeout_ms : 30000);
	if (len > 0) {
		memcpy(r->bytes, body, len);
		r->len = len;
	}
	if (key != NULL) {
		if (klen > 0) {
			memcpy(r->bytes + len, key, klen);
		}
		r->klen = klen;
		r->has_key = true;
	}
	if (k != NULL) {
		/* Handshake traffic jumps the queue of its connection. */
		r->next = k->qhead;
		k->qhead = r;
		if (k->qtail == NULL) {
			k->qtail = r;
		}
		conn_pump(k);
	} else {
		route_and_send(cl, r);
	}
	return 0;
}

int fsnp_client_send(struct fsnp_client *c, uint16_t opcode, const void *key,
                     size_t klen, const uint8_t *body, size_t len,
                     unsigned flags, fsnp_reply_cb cb, void *data)
{
	return submit(c, NULL, 0, false, false, opcode, key, klen, body, len,
	              flags, cb, data);
}

int fsnp_client_send_lane(struct fsnp_client *c, uint32_t lane, uint16_t opcode,
                          const uint8_t *body, size_t len, unsigned flags,
                          fsnp_reply_cb cb, void *data)
{
	return submit(c, NULL, lane, true, false, opcode, NULL, 0, body, len,
	              flags, cb, data);
}

int fsnp_client_open(uv_loop_t *loop, const struct fsnp_client_options *o,
                     fsnp_client_ready_cb cb, void *data,
                     struct fsnp_client **out)
{
	struct fsnp_client *cl;
	if (o->host == NULL || o->port == 0 || (o->tls && o->topology)) {
		return FSNP_CLIENT_EINVAL;
	}
	cl = calloc(1, sizeof *cl);
	if (cl == NULL) {
		return FSNP_CLIENT_ENOMEM;
	}
	/* A TLS setup failure (a CA file that does not load, ...) reaches
	 * the ready callback with its reason at the first tick. */
	if (o->tls && tls_ctx_new_client(&cl->tls_ctx, o->tls_ca_file,
	                                      o->tls_cert_file, o->tls_key_file,
	                                      cl->last_error,
	                                      sizeof cl->last_error) != 0) {
		cl->tls_ctx = NULL;
		cl->fatal = true;
	}
	cl->loop = loop;
	cl->o = *o;
	cl->host = dup_str(o->host);
	cl->username = dup_str(o->username);
	cl->password = dup_str(o->password);
	cl->client_name = dup_str(o->client_name);
	cl->codecs = dup_str(o->codecs);
	cl->o.host = cl->host;
	cl->ready_cb = cb;
	cl->ready_data = data;
	cl->rng = uv_hrtime() | 1;
	cl->opened_at = uv_now(loop);
	if (conn_new(cl, o->host, o->port) == NULL) {
		tls_ctx_free(cl->tls_ctx);
		free(cl->host);
		free(cl->username);
		free(cl->password);
		free(cl->client_name);
		free(cl->codecs);
		free(cl);
		return FSNP_CLIENT_ENOMEM;
	}
	uv_timer_init(loop, &cl->timer);
	cl->timer.data = cl;
	uv_prepare_init(loop, &cl->flush);
	cl->flush.data = cl;
	uv_prepare_start(&cl->flush, on_flush);
	uv_unref((uv_handle_t *)&cl->flush);
	cl->handles = 2;
	uv_timer_start(&cl->timer, on_timer, TICK_MS, TICK_MS);
	if (!cl->fatal) {
		conn_connect(cl->conns[0]);
	}
	*out = cl;
	return 0;
}

void fsnp_client_get_info(const struct fsnp_client *c,
                          struct fsnp_client_info *out)
{
	memset(out, 0, sizeof *out);
	out->client_id = c->client_id;
	out->max_frame_bytes = c->conns[0]->max_frame;
	out->shard_count = c->shard_count;
	out->auth_required = c->auth_required;
	out->zlib = c->conns[0]->zlib;
	out->connections = c->n_conns;
	for (size_t i = 0; i < c->n_conns; i++) {
		out->inflight += c->conns[i]->n_pending;
	}
}

static void on_own_handle_closed(uv_handle_t *h)
{
	handle_done(h->data);
}

void fsnp_client_close(struct fsnp_client *c, fsnp_client_close_cb cb,
                       void *data)
{
	if (c->closing) {
		return;
	}
	c->closing = true;
	c->close_cb = cb;
	c->close_data = data;
	ready(c, -1, "client closed");
	while (c->delayed != NULL) {
		struct creq *r = c->delayed;
		c->delayed = r->next;
		deliver_error(r, FSNP_CLIENT_ECLOSED);
	}
	for (size_t i = 0; i < c->n_conns; i++) {
		struct cconn *k = c->conns[i];
		for (size_t j = 0; j < k->tab_cap; j++) {
			if (k->tab[j].r != NULL) {
				struct creq *r = k->tab[j].r;
				k->tab[j].r = NULL;
				deliver_error(r, FSNP_CLIENT_ECLOSED);
			}
		}
		k->n_pending = 0;
		while (k->qhead != NULL) {
			struct creq *r = k->qhead;
			k->qhead = r->next;
			deliver_error(r, FSNP_CLIENT_ECLOSED);
		}
		k->qtail = NULL;
		if (k->resolving) {
			uv_cancel((uv_req_t *)&k->gai);
		}
		k->state = ST_DOWN;
		close_tcp(k);
	}
	/* handles counts the timer, the flush, sockets and pending
	 * resolutions. */
	c->flush_list = NULL;
	uv_close((uv_handle_t *)&c->flush, on_own_handle_closed);
	uv_close((uv_handle_t *)&c->timer, on_own_handle_closed);
}

/* --- Blocking convenience ------------------------------------------------- */

struct fsnp_sync {
	uv_loop_t loop;
	struct fsnp_client *c;
	bool done;
	int status;
	char err[256];
};

static void sync_ready(void *data, struct fsnp_client *c, int status,
                       const char *err)
{
	struct fsnp_sync *s = data;
	(void)c;
	s->done = true;
	s->status = status;
	snprintf(s->err, sizeof s->err, "%s", err ? err : "");
}

int fsnp_sync_open(struct fsnp_sync **out, const struct fsnp_client_options *o,
                   char *err, size_t errlen)
{
	struct fsnp_sync *s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	uv_loop_init(&s->loop);
	if (fsnp_client_open(&s->loop, o, sync_ready, s, &s->c) != 0) {
		snprintf(err, errlen, "invalid options");
		uv_loop_close(&s->loop);
		free(s);
		return -1;
	}
	while (!s->done) {
		uv_run(&s->loop, UV_RUN_ONCE);
	}
	if (s->status != 0) {
		snprintf(err, errlen, "%s", s->err);
		fsnp_sync_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

struct sync_call {
	bool done;
	int error;
	uint16_t status;
	struct wbuf *out;
};

static void sync_reply(void *data, const struct fsnp_reply *rep)
{
	struct sync_call *sc = data;
	sc->done = true;
	sc->error = rep->error;
	sc->status = rep->status;
	if (sc->out != NULL && rep->error == 0) {
		wbuf_reset(sc->out);
		wbuf_append(sc->out, rep->payload, rep->payload_len);
	}
}

int fsnp_sync_call(struct fsnp_sync *s, uint16_t opcode, const void *key,
                   size_t klen, const uint8_t *body, size_t len, unsigned flags,
                   uint16_t *status, struct wbuf *out)
{
	struct sync_call sc = {false, 0, 0, out};
	int rv = fsnp_client_send(s->c, opcode, key, klen, body, len, flags,
	                          sync_reply, &sc);
	if (rv != 0) {
		return rv;
	}
	while (!sc.done) {
		uv_run(&s->loop, UV_RUN_ONCE);
	}
	if (status != NULL) {
		*status = sc.status;
	}
	return sc.error;
}

struct fsnp_client *fsnp_sync_client(struct fsnp_sync *s)
{
	return s->c;
}

uv_loop_t *fsnp_sync_loop(struct fsnp_sync *s)
{
	return &s->loop;
}

void fsnp_sync_close(struct fsnp_sync *s)
{
	fsnp_client_close(s->c, NULL, NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	uv_loop_close(&s->loop);
	free(s);
}
