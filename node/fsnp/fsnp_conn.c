/* One FSNP connection: the receive loop (frames, chunk reassembly,
 * decompression), lanes whose replies leave in arrival order, and writes
 * coalesced per loop turn into one uv_write of iovecs. See
 * fsnp_internal.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/fsnp/fsnp_internal.h"
#include "wire/fsnp_compress.h"
#include "wire/fsnp_opcode.h"

/* Receive buffers keep this much room free for each read. */
#define RBUF_READ 65536u
/* Small frames are copied into segments of this size; the first of a
 * loop turn is smaller (a turn's replies to one connection are often a
 * few hundred bytes), so that many busy connections hold little. */
#define SEG_SIZE FSNP_SEG_SIZE
#define SEG_FIRST FSNP_SEG_SMALL
/* A TLS flush encrypts queued segments up to about this much at a time, so
 * plaintext and ciphertext copies of a large backlog do not coexist. */
#define TLS_FLUSH_BATCH (256u << 10)

static const struct config_native *lim(const struct fsnp_conn *c)
{
	return &c->srv->lim;
}

struct fsnp_conn *fsnp_conn_new(struct fsnp_server *s, struct tls_ctx *tls)
{
	struct fsnp_conn *c = calloc(1, sizeof *c);
	if (c == NULL) {
		return NULL;
	}
	if (tls != NULL) {
		c->tls = tls_session_new(tls);
		if (c->tls == NULL) {
			free(c);
			return NULL;
		}
	}
	c->srv = s;
	c->id = ++s->next_client_id;
	c->created_ms = fsnp_now_ms(s);
	c->last_rx_ms = uv_now(s->loop);
	c->opened_ms = c->last_rx_ms;
	c->authenticated = fsnp_acl_default_open(s);
	if (c->authenticated) {
		snprintf(c->user, sizeof c->user, "default");
	}
	c->max_frame =
	    (uint32_t)(c->authenticated ? s->lim.max_frame_bytes
	                                : s->lim.unauth_max_frame_bytes);
	c->max_inflight_conn = s->lim.max_inflight_per_connection;
	c->max_inflight_lane = s->lim.max_inflight_per_lane;
	struct fsnp_chunk_limits cl = {
	    .max_message_bytes = c->max_frame,
	    .max_streams = (uint32_t)s->lim.max_pending_chunks,
	    .max_pending_bytes = s->lim.max_pending_chunk_bytes,
	    .timeout_ms = s->lim.frame_assembly_timeout_ms,
	};
	fsnp_chunk_init(&c->chunks, &cl);
	uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	c->wreq.data = c;
	c->next = s->conns;
	if (s->conns != NULL) {
		s->conns->prev = c;
	}
	s->conns = c;
	s->n_conns++;
	metric_set(s->m_conns, (int64_t)s->n_conns);
	return c;
}

/* --- Lanes -----------------------------------------------------------------
 */

static uint32_t lane_hash(uint32_t id)
{
	return id * 2654435761u;
}

static int lanes_grow(struct fsnp_conn *c)
{
	uint32_t cap = c->lane_cap ? c->lane_cap * 2 : 16;
	struct fsnp_lane **t = calloc(cap, sizeof *t);
	if (t == NULL) {
		return -1;
	}
	for (uint32_t i = 0; i < c->lane_cap; i++) {
		struct fsnp_lane *l = c->lanes[i];
		if (l == NULL) {
			continue;
		}
		uint32_t j = lane_hash(l->id) & (cap - 1);
		while (t[j] != NULL) {
			j = (j + 1) & (cap - 1);
		}
		t[j] = l;
	}
	free(c->lanes);
	c->lanes = t;
	c->lane_cap = cap;
	return 0;
}

struct fsnp_lane *fsnp_conn_lane(struct fsnp_conn *c, uint32_t id, bool create)
{
	struct fsnp_server *s = c->srv;
	if (c->lane_cap > 0) {
		uint32_t j = lane_hash(id) & (c->lane_cap - 1);
		while (c->lanes[j] != NULL) {
			if (c->lanes[j]->id == id) {
				return c->lanes[j];
			}
			j = (j + 1) & (c->lane_cap - 1);
		}
	}
	if (!create || c->n_lanes >= lim(c)->max_lanes_per_connection ||
	    s->lanes >= lim(c)->max_global_lanes) {
		return NULL;
	}
	if ((c->n_lanes + 1) * 2 > c->lane_cap && lanes_grow(c) != 0) {
		return NULL;
	}
	struct fsnp_lane *l = calloc(1, sizeof *l);
	if (l == NULL) {
		return NULL;
	}
	l->id = id;
	uint32_t j = lane_hash(id) & (c->lane_cap - 1);
	while (c->lanes[j] != NULL) {
		j = (j + 1) & (c->lane_cap - 1);
	}
	c->lanes[j] = l;
	c->n_lanes++;
	s->lanes++;
	return l;
}

/* --- Output ------------------------------------------------------------ */

/* A segment's storage: a pooled one when it has a standard size. */
static uint8_t *seg_alloc(struct fsnp_server *s, size_t cap)
{
	if (cap == SEG_FIRST && s->n_seg_small_pool > 0) {
		return s->seg_small_pool[--s->n_seg_small_pool];
	}
	if (cap == SEG_SIZE && s->n_seg_pool > 0) {
		return s->seg_pool[--s->n_seg_pool];
	}
	return malloc(cap);
}

/* Frees a written segment's storage, or keeps it for the next one (only
 * a block of a standard size, which is at least that large). */
static void seg_release(struct fsnp_server *s, uint8_t *data, size_t cap)
{
	if (FSNP_POOLING && data != NULL) {
		if (cap == SEG_FIRST &&
		    s->n_seg_small_pool < FSNP_SEG_SMALL_POOL_MAX) {
			s->seg_small_pool[s->n_seg_small_pool++] = data;
			return;
		}
		if (cap == SEG_SIZE && s->n_seg_pool < FSNP_SEG_POOL_MAX) {
			s->seg_pool[s->n_seg_pool++] = data;
			return;
		}
	}
	free(data);
}

static struct fsnp_seg *seg_push(struct fsnp_conn *c)
{
	if (c->n_pend == c->cap_pend) {
		size_t cap = c->cap_pend ? c->cap_pend * 2 : 8;
		struct fsnp_seg *v = realloc(c->pend, cap * sizeof *v);
		if (v == NULL) {
			return NULL;
		}
		c->pend = v;
		c->cap_pend = cap;
	}
	struct fsnp_seg *g = &c->pend[c->n_pend++];
	memset(g, 0, sizeof *g);
	return g;
}

static void account_out(struct fsnp_conn *c, size_t n)
{
	c->out_bytes += n;
	c->srv->outbound_bytes += n;
	fsnp_server_mark_dirty(c->srv, c);
}

/* Copies header + body into the tail segment (or a new one). */
static int out_copy(struct fsnp_conn *c, const uint8_t *hdr, size_t hlen,
                    const uint8_t *body, size_t blen)
{
	size_t n = hlen + blen;
	struct fsnp_seg *g = c->n_pend > 0 ? &c->pend[c->n_pend - 1] : NULL;
	if (g == NULL || g->cap - g->len < n) {
		g = seg_push(c);
		if (g == NULL) {
			return -1;
		}
		size_t want = c->n_pend == 1 ? SEG_FIRST : SEG_SIZE;
		g->cap = n > want ? n : want;
		g->data = seg_alloc(c->srv, g->cap);
		if (g->data == NULL) {
			c->n_pend--;
			return -1;
		}
	}
	memcpy(g->data + g->len, hdr, hlen);
	if (blen > 0) {
		memcpy(g->data + g->len + hlen, body, blen);
	}
	g->len += n;
	account_out(c, n);
	return 0;
}

/* Takes a wbuf's storage as a segment of its own. */
static int out_take(struct fsnp_conn *c, struct wbuf *w)
{
	struct fsnp_seg *g = seg_push(c);
	if (g == NULL) {
		return -1;
	}
	g->data = w->data;
	g->len = w->len;
	g->cap = w->cap;
	account_out(c, w->len);
	wbuf_init(w);
	return 0;
}

void fsnp_conn_send(struct fsnp_conn *c, uint32_t lane, uint16_t opcode,
                    uint64_t request_id, uint8_t flags, const uint8_t *body,
                    size_t len)
{
	struct fsnp_server *s = c->srv;
	bool custom = (flags & FSNP_FLAG_CUSTOM) != 0;
	struct fsnp_header h = {
	    .dir = FSNP_DIR_RESPONSE,
	    .flags = (uint8_t)(flags & (FSNP_FLAG_CUSTOM | FSNP_FLAG_TRACE)),
	    .lane_id = lane,
	    .opcode = opcode,
	    .request_id = request_id,
	    .body_len = (uint32_t)len,
	};
	uint32_t chunk = fsnp_chunk_size((uint32_t)lim(c)->response_chunk_bytes,
	                                 (uint32_t)lim(c)->max_frame_bytes);
	bool zlib = c->zlib && !custom && len >= FSNP_COMPRESS_MIN;
	int rv;

	if (c->closing) {
		return;
	}
	if (!zlib && len <= chunk) {
		uint8_t hdr[FSNP_HEADER_SIZE];
		fsnp_frame_encode_header(&h, hdr);
		rv = out_copy(c, hdr, sizeof hdr, body, len);
	} else {
		struct wbuf w;
		wbuf_init(&w);
		rv = fsnp_compress_frames(&w, &h, body, len, zlib, chunk);
		if (rv == 0) {
			rv = out_take(c, &w);
		}
		wbuf_free(&w);
	}
	if (rv != 0) {
		log_warn(s->log, "fsnp",
		         "client %" PRIu64 ": cannot queue a reply (out of "
		         "memory): closing",
		         c->id);
		fsnp_conn_close(c);
	}
}

void fsnp_conn_event(struct fsnp_conn *c, const char *name,
                     const struct wbuf *payload)
{
	struct wbuf b;
	struct fsnp_writer w;
	static const uint8_t empty_map[] = {FSNP_MAP, 0, 0, 0, 0};
	struct fsnp_val v;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "event");
	fsnp_w_str(&w, name);
	fsnp_w_key(&w, "payload");
	if (payload != NULL && payload->len > 0 &&
	    fsnp_value_decode(payload->data, payload->len, NULL, &v, NULL) ==
	        0) {
		fsnp_w_val(&w, &v);
	} else {
		fsnp_value_decode(empty_map, sizeof empty_map, NULL, &v, NULL);
		fsnp_w_val(&w, &v);
	}
	fsnp_w_key(&w, "at_ms");
	fsnp_w_u64(&w, fsnp_now_ms(c->srv));
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0) {
		fsnp_conn_send(c, 0, FSNP_OP_EVENT, 0, 0, b.data, b.len);
	}
	wbuf_free(&b);
}

static void maybe_finish(struct fsnp_conn *c);

/* The flight segments left: frees them and settles the accounting. */
static void flight_sent(struct fsnp_conn *c)
{
	struct fsnp_server *s = c->srv;
	size_t n = c->flight_acct;

	for (size_t i = 0; i < c->n_flight; i++) {
		seg_release(s, c->flight[i].data, c->flight[i].cap);
	}
	c->n_flight = 0;
	c->flight_acct = 0;
	c->out_bytes -= n;
	s->outbound_bytes -= n;
	s->stats.bytes_out += n;
	metric_add(s->m_bytes_out, (int64_t)n);
}

static void on_write(uv_write_t *req, int status)
{
	struct fsnp_conn *c = req->data;
	struct fsnp_server *s = c->srv;

	flight_sent(c);
	c->writing = false;
	if (c->closing) {
		return;
	}
	if (status < 0) {
		log_debug(s->log, "fsnp", "client %" PRIu64 ": write: %s",
		          c->id, uv_strerror(status));
		fsnp_conn_close(c);
		return;
	}
	fsnp_conn_flush(c);
	maybe_finish(c);
	if (!c->closing) {
		fsnp_conn_update_reading(c);
	}
}

/* TLS: encrypts a batch of queued segments and makes the ciphertext
 * (with whatever else the session has to send) the one flight segment.
 * Returns 0 (n_flight 0 when there is nothing to send) or -1. */
static int tls_stage(struct fsnp_conn *c)
{
	size_t k = 0, acct = 0;
	if (tls_established(c->tls) && !c->tls_bye) {
		while (k < c->n_pend &&
		       (k == 0 || acct + c->pend[k].len <= TLS_FLUSH_BATCH)) {
			if (tls_write(c->tls, c->pend[k].data,
			              c->pend[k].len) != 0) {
				return -1;
			}
			acct += c->pend[k].len;
			seg_release(c->srv, c->pend[k].data, c->pend[k].cap);
			k++;
		}
		if (k > 0) {
			memmove(c->pend, c->pend + k,
			        (c->n_pend - k) * sizeof *c->pend);
			c->n_pend -= k;
		}
	}
	uint8_t *data;
	size_t len;
	if (tls_take(c->tls, &data, &len) != 0) {
		return -1;
	}
	c->flight_acct = acct;
	if (len == 0) {
		/* Nothing left to send, yet plaintext was consumed. */
		c->out_bytes -= acct;
		c->srv->outbound_bytes -= acct;
		c->flight_acct = 0;
		return 0;
	}
	if (c->cap_flight == 0) {
		c->flight = malloc(4 * sizeof *c->flight);
		if (c->flight == NULL) {
			free(data);
			return -1;
		}
		c->cap_flight = 4;
	}
	c->flight[0] = (struct fsnp_seg){data, len, len};
	c->n_flight = 1;
	return 0;
}

void fsnp_conn_flush(struct fsnp_conn *c)
{
	uv_buf_t small[16];
	uv_buf_t *bufs = small;
	if (c->writing || c->closing) {
		return;
	}
	if (c->tls != NULL) {
		if (c->n_pend == 0 && tls_pending(c->tls) == 0) {
			return;
		}
		if (tls_stage(c) != 0) {
			log_warn(c->srv->log, "fsnp",
			         "client %" PRIu64 ": cannot encrypt a reply "
			         "(out of memory): closing",
			         c->id);
			fsnp_conn_close(c);
			return;
		}
		if (c->n_flight == 0) {
			return;
		}
	} else {
		if (c->n_pend == 0) {
			return;
		}
		/* pend becomes flight; the old flight array is reused as
		 * pend. */
		struct fsnp_seg *t = c->flight;
		size_t tcap = c->cap_flight;
		c->flight = c->pend;
		c->cap_flight = c->cap_pend;
		c->n_flight = c->n_pend;
		c->pend = t;
		c->cap_pend = tcap;
		c->n_pend = 0;
		c->flight_acct = 0;
		for (size_t i = 0; i < c->n_flight; i++) {
			c->flight_acct += c->flight[i].len;
		}
	}
	if (c->n_flight > sizeof small / sizeof small[0]) {
		bufs = malloc(c->n_flight * sizeof *bufs);
		if (bufs == NULL) {
			fsnp_conn_close(c);
			return;
		}
	}
	size_t nb = c->n_flight, total = 0;
	for (size_t i = 0; i < nb; i++) {
		bufs[i] = uv_buf_init((char *)c->flight[i].data,
		                      (unsigned)c->flight[i].len);
		total += c->flight[i].len;
	}
	/* Replies usually fit the socket buffer: write them now. (A
	 * uv_write that completes at once still costs an epoll_ctl per
	 * write when libuv drains the stream.) */
	int tw = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)nb);
	if (tw > 0 && (size_t)tw == total) {
		if (bufs != small) {
			free(bufs);
		}
		flight_sent(c);
		maybe_finish(c);
		if (!c->closing) {
			fsnp_conn_update_reading(c);
		}
		return;
	}
	uv_buf_t *rest = bufs;
	if (tw > 0) {
		size_t done = (size_t)tw;
		while (done >= rest->len) {
			done -= rest->len;
			rest++;
			nb--;
		}
		rest->base += done;
		rest->len -= done;
	}
	/* uv_write copies the buffer descriptors, not the bytes. */
	int rv = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, rest, (unsigned)nb,
	                  on_write);
	if (bufs != small) {
		free(bufs);
	}
	if (rv != 0) {
		/* The bytes were not taken: drop them for the close. */
		for (size_t i = 0; i < c->n_flight; i++) {
			free(c->flight[i].data);
		}
		c->out_bytes -= c->flight_acct;
		c->srv->outbound_bytes -= c->flight_acct;
		c->flight_acct = 0;
		c->n_flight = 0;
		fsnp_conn_close(c);
		return;
	}
	c->writing = true;
	c->write_started_ms = uv_now(c->srv->loop);
}

/* --- Lane replies ------------------------------------------------------- */

/* One line per traced request: where it came from, what it was, how it
 * ended and how long it took from its last frame to its reply. */
static void trace_log(struct fsnp_conn *c, const struct fsnp_req *r)
{
	const char *name = fsnp_opcode_name(r->opcode);
	uint64_t us = (uv_hrtime() - r->t0_ns) / 1000;
	uint16_t status =
	    r->reply.len >= 2
	        ? (uint16_t)((r->reply.data[0] << 8) | r->reply.data[1])
	        : 0;
	log_info(c->srv->log, "fsnp",
	         "trace client=%" PRIu64 " peer=%s%s lane=%" PRIu32
	         " request_id=%" PRIu64 " opcode=0x%04x (%s) status=%u "
	         "bytes=%zu%s elapsed_us=%" PRIu64,
	         c->id, c->peer, c->tls != NULL ? " tls" : "", r->lane_id,
	         r->request_id, r->opcode, name != NULL ? name : "?", status,
	         r->reply.len, r->no_reply ? " no_reply" : "", us);
}

void fsnp_conn_lane_flush(struct fsnp_conn *c, struct fsnp_lane *l)
{
	bool was_full = l->queued >= lim(c)->lane_max_queue;
	while (l->head != NULL && l->head->done) {
		struct fsnp_req *r = l->head;
		l->head = r->next;
		if (l->head == NULL) {
			l->tail = NULL;
		}
		l->queued--;
		c->queued--;
		if (r->trace) {
			trace_log(c, r);
		}
		if (!r->no_reply && !c->closing) {
			uint8_t flags =
			    (uint8_t)((r->custom ? FSNP_FLAG_CUSTOM : 0) |
			              (r->trace ? FSNP_FLAG_TRACE : 0));
			fsnp_conn_send(c, r->lane_id, r->opcode, r->request_id,
			               flags, r->reply.data, r->reply.len);
		}
		if (r->close_after) {
			c->quit = true;
		}
		fsnp_req_free(r);
	}
	if (c->closing) {
		return;
	}
	if (was_full && l->queued < lim(c)->lane_max_queue && c->stalled) {
		/* Frames were left unread for this lane: process them at the
		 * end of this loop turn. */
		c->stalled = false;
		fsnp_server_mark_dirty(c->srv, c);
	}
	maybe_finish(c);
}

/* --- Receive ------------------------------------------------------------- */

/* Makes RBUF_READ bytes free at the end of rbuf. Returns 0, or -1 when
 * the global inbound budget or memory refuses. */
static int rbuf_reserve(struct fsnp_conn *c)
{
	struct fsnp_server *s = c->srv;
	if (c->rcap - c->rlen < RBUF_READ) {
		size_t want = c->rlen + RBUF_READ;
		size_t cap = c->rcap ? c->rcap : RBUF_READ;
		while (cap < want) {
			cap *= 2;
		}
		/* Growth beyond one read's room is charged to the global
		 * inbound budget. */
		uint64_t extra = cap > RBUF_READ ? cap - RBUF_READ : 0;
		uint64_t had = c->rcap > RBUF_READ ? c->rcap - RBUF_READ : 0;
		if (extra > had && s->inbound_bytes + (extra - had) >
		                       s->lim.max_global_inbound_buffer_bytes) {
			log_warn(s->log, "fsnp",
			         "client %" PRIu64 ": global inbound buffer "
			         "budget exhausted: closing",
			         c->id);
			return -1;
		}
		uint8_t *p = realloc(c->rbuf, cap);
		if (p == NULL) {
			return -1;
		}
		s->inbound_bytes += extra - had;
		c->rbuf = p;
		c->rcap = cap;
	}
	return 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct fsnp_conn *c = h->data;
	(void)suggested;
	if (c->tls != NULL) {
		/* Ciphertext: fed to the session before the next read. */
		*buf = uv_buf_init((char *)tls_ctx_read_buf(c->srv->tls_ctx),
		                   TLS_READ_BUF);
		return;
	}
	if (rbuf_reserve(c) != 0) {
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	*buf = uv_buf_init((char *)c->rbuf + c->rlen,
	                   (unsigned)(c->rcap - c->rlen));
}

static uint64_t now_loop(const struct fsnp_conn *c)
{
	return uv_now(c->srv->loop);
}

/* Whether f belongs to a chunk stream already refused; its final chunk
 * ends the stream. */
static bool poisoned(struct fsnp_conn *c, const struct fsnp_header *h)
{
	for (size_t i = 0; i < c->n_poisoned; i++) {
		struct fsnp_poisoned *p = &c->poisoned[i];
		if (p->lane == h->lane_id && p->opcode == h->opcode &&
		    p->request_id == h->request_id) {
			if (!(h->flags & FSNP_FLAG_MORE_CHUNKS)) {
				c->poisoned[i] = c->poisoned[--c->n_poisoned];
			}
			return true;
		}
	}
	return false;
}

static void poison(struct fsnp_conn *c, const struct fsnp_header *h)
{
	if (!(h->flags & FSNP_FLAG_MORE_CHUNKS) ||
	    c->n_poisoned >= lim(c)->max_pending_chunks) {
		return;
	}
	if (c->n_poisoned == c->cap_poisoned) {
		size_t cap = c->cap_poisoned ? c->cap_poisoned * 2 : 4;
		struct fsnp_poisoned *p = realloc(c->poisoned, cap * sizeof *p);
		if (p == NULL) {
			return;
		}
		c->poisoned = p;
		c->cap_poisoned = cap;
	}
	c->poisoned[c->n_poisoned++] =
	    (struct fsnp_poisoned){h->lane_id, h->opcode, h->request_id};
}

/* require_tls: the first request on a plaintext connection is answered
 * with why, then the connection closes. */
static void refuse_plaintext(struct fsnp_conn *c, const struct fsnp_header *h)
{
	struct fsnp_server *s = c->srv;
	char msg[256];
	uint64_t now = now_loop(c);
	if (now - s->refusal_logged_ms >= 1000) {
		s->refusal_logged_ms = now;
		log_warn(s->log, "fsnp",
		         "refusing plaintext FSNP from %s: fsnp-require-tls is "
		         "on",
		         c->peer);
	}
	snprintf(msg, sizeof msg,
	         "NOPERM plaintext native connections are refused "
	         "(require_tls): connect with TLS to port %u",
	         s->advertise_tls_port);
	fsnp_exec_reject(c, h, FSNP_STATUS_NOPERM, "tls_required", msg);
	c->quit = true;
	maybe_finish(c);
}

/* Protected mode: a client from another host, while no user has a
 * password, is answered with why, then the connection closes. */
static void refuse_protected(struct fsnp_conn *c, const struct fsnp_header *h)
{
	struct fsnp_server *s = c->srv;
	uint64_t now = now_loop(c);
	if (now - s->refusal_logged_ms >= 1000) {
		s->refusal_logged_ms = now;
		log_warn(s->log, "fsnp",
		         "refusing FSNP from %s: protected mode, and no user "
		         "has a password",
		         c->peer);
	}
	fsnp_exec_reject(
	    c, h, FSNP_STATUS_NOPERM, "protected_mode",
	    "DENIED Lodestone is running in protected mode because protected "
	    "mode is enabled and no password is set for the default user. In "
	    "this mode connections are only accepted from the loopback "
	    "interface. To connect from outside, set a password "
	    "(--requirepass, or ACL SETUSER with a password from a loopback "
	    "client) or disable protected mode with --protected-mode no.");
	c->quit = true;
	maybe_finish(c);
}

static void handle_frame(struct fsnp_conn *c, const struct fsnp_frame *f)
{
	struct fsnp_server *s = c->srv;
	struct fsnp_request_policy pol = {.trace_enabled = s->lim.trace,
	                                  .compression_zlib = c->zlib};
	struct fsnp_message m;
	bool ready = false;
	uint64_t before;
	int e;

	c->last_rx_ms = now_loop(c);
	if (c->n_poisoned > 0 && poisoned(c, &f->h)) {
		return;
	}
	if (c->tls == NULL && s->lim.require_tls) {
		refuse_plaintext(c, &f->h);
		return;
	}
	if (c->remote && s->lim.protected_mode && !fsnp_acl_has_password(s)) {
		refuse_protected(c, &f->h);
		return;
	}
	e = fsnp_frame_check_request(&f->h, &pol);
	if (e != 0) {
		fsnp_exec_reject(c, &f->h, FSNP_STATUS_BAD_REQUEST,
		                 "bad_request",
		                 e == FSNP_ERR_TRACE_DISABLED
		                     ? "ERR native trace flag is disabled (the "
		                       "server runs without fsnp-trace)"
		                     : fsnp_strerror(e));
		poison(c, &f->h);
		return;
	}
	before = fsnp_chunk_pending_bytes(&c->chunks);
	e = fsnp_chunk_feed(&c->chunks, f, now_loop(c), &m, &ready);
	s->inbound_bytes -= before;
	s->inbound_bytes += fsnp_chunk_pending_bytes(&c->chunks);
	if (e != 0) {
		fsnp_exec_reject(c, &f->h, FSNP_STATUS_BAD_REQUEST,
		                 "bad_request", fsnp_strerror(e));
		poison(c, &f->h);
		return;
	}
	if (!ready) {
		return;
	}
	if (m.h.flags & FSNP_FLAG_COMPRESSED) {
		e = fsnp_compress_inflate_message(&m, c->max_frame);
		if (e != 0) {
			fsnp_exec_reject(c, &m.h, FSNP_STATUS_BAD_REQUEST,
			                 "bad_request", fsnp_strerror(e));
			fsnp_message_free(&m);
			return;
		}
	}
	fsnp_exec_message(c, &m);
	fsnp_message_free(&m);
}

/* Decodes and executes every whole frame received, unless a full lane
 * makes it stop (the rest waits in the buffer, reading paused). */
static void conn_process(struct fsnp_conn *c)
{
	struct fsnp_server *s = c->srv;
	if (c->in_process || c->closing) {
		return;
	}
	c->in_process = true;
	while (!c->closing && !c->draining && !c->quit) {
		struct fsnp_frame f;
		size_t flen = 0;
		int e = fsnp_frame_decode(c->rbuf + c->roff, c->rlen - c->roff,
		                          FSNP_DIR_REQUEST, c->max_frame, &f,
		                          &flen);
		if (e != 0) {
			log_debug(s->log, "fsnp",
			          "client %" PRIu64 ": %s: closing", c->id,
			          fsnp_strerror(e));
			fsnp_conn_close(c);
			break;
		}
		if (flen == 0) {
			break;
		}
		struct fsnp_lane *l = fsnp_conn_lane(c, f.h.lane_id, false);
		if (l != NULL && l->queued >= lim(c)->lane_max_queue) {
			c->stalled = true;
			break;
		}
		c->roff += flen;
		s->stats.bytes_in += flen;
		metric_add(s->m_bytes_in, (int64_t)flen);
		handle_frame(c, &f);
	}
	if (!c->closing) {
		if (c->roff == c->rlen) {
			c->roff = c->rlen = 0;
		} else if (c->roff > 0) {
			memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
			c->rlen -= c->roff;
			c->roff = 0;
		}
		/* Give back a buffer a large frame grew. */
		if (c->rlen == 0 && c->rcap > 4 * RBUF_READ) {
			s->inbound_bytes -= c->rcap - RBUF_READ;
			free(c->rbuf);
			c->rbuf = NULL;
			c->rcap = 0;
		}
	}
	c->in_process = false;
	if (!c->closing) {
		fsnp_conn_update_reading(c);
	}
}

/* A plaintext FSNP frame on the TLS listener: answered in plaintext with
 * why (best effort: one try_write), then closed. */
static void tls_refuse_plaintext(struct fsnp_conn *c, const uint8_t *p,
                                 size_t n)
{
	struct fsnp_server *s = c->srv;
	struct fsnp_header h = {.dir = FSNP_DIR_RESPONSE};
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t hdr[FSNP_HEADER_SIZE];
	char msg[200];

	log_info(s->log, "fsnp",
	         "client %" PRIu64 " (%s): plaintext FSNP on the TLS "
	         "listener: closing",
	         c->id, c->peer);
	if (n >= FSNP_HEADER_SIZE) {
		/* Header fields sit at fixed offsets: lane 6, opcode 10,
		 * request id 12. */
		h.lane_id = (uint32_t)p[6] << 24 | (uint32_t)p[7] << 16 |
		            (uint32_t)p[8] << 8 | p[9];
		h.opcode = (uint16_t)(p[10] << 8 | p[11]);
		for (int i = 0; i < 8; i++) {
			h.request_id = h.request_id << 8 | p[12 + i];
		}
	}
	snprintf(msg, sizeof msg,
	         "ERR this is the FSNP TLS port: start a TLS session (the "
	         "plaintext port is %u)",
	         s->port);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_write_error(&w, FSNP_STATUS_BAD_REQUEST, "tls_required", msg,
	                 false, 0);
	if (fsnp_w_finish(&w) == 0) {
		h.body_len = (uint32_t)b.len;
		fsnp_frame_encode_header(&h, hdr);
		uv_buf_t bufs[2] = {
		    uv_buf_init((char *)hdr, sizeof hdr),
		    uv_buf_init((char *)b.data, (unsigned)b.len)};
		(void)uv_try_write((uv_stream_t *)&c->tcp, bufs, 2);
	}
	wbuf_free(&b);
	fsnp_conn_close(c);
}

/* TLS: ciphertext in, plaintext appended to rbuf (at most what one read
 * brought, so rbuf grows as for a plaintext read). */
static int tls_receive(struct fsnp_conn *c, const uint8_t *p, size_t n)
{
	struct fsnp_server *s = c->srv;
	char err[300];
	bool was = tls_established(c->tls);
	if (!was && c->rlen == 0 && n >= 4 && memcmp(p, "FSNP", 4) == 0) {
		tls_refuse_plaintext(c, p, n);
		return -1;
	}
	if (tls_feed(c->tls, p, n, err, sizeof err) != 0) {
		log_info(s->log, "fsnp", "client %" PRIu64 " (%s): %s: closing",
		         c->id, c->peer, err);
		/* The alert goes out best effort before the close. */
		uint8_t *a;
		size_t alen;
		if (tls_take(c->tls, &a, &alen) == 0 && alen > 0) {
			uv_buf_t ab = uv_buf_init((char *)a, (unsigned)alen);
			(void)uv_try_write((uv_stream_t *)&c->tcp, &ab, 1);
		}
		free(a);
		fsnp_conn_close(c);
		return -1;
	}
	if (!was && tls_established(c->tls)) {
		log_debug(s->log, "fsnp", "client %" PRIu64 " (%s): %s %s",
		          c->id, c->peer, tls_version(c->tls),
		          tls_cipher(c->tls));
	}
	for (;;) {
		size_t got = 0;
		int rv;
		if (rbuf_reserve(c) != 0) {
			fsnp_conn_close(c);
			return -1;
		}
		rv = tls_read(c->tls, c->rbuf + c->rlen, c->rcap - c->rlen,
		              &got, err, sizeof err);
		if (rv != 0) {
			if (rv < 0) {
				log_info(s->log, "fsnp",
				         "client %" PRIu64 " (%s): %s: closing",
				         c->id, c->peer, err);
			}
			fsnp_conn_close(c);
			return -1;
		}
		if (got == 0) {
			break;
		}
		c->rlen += got;
	}
	if (tls_pending(c->tls) > 0) {
		fsnp_server_mark_dirty(s, c); /* handshake or tickets */
	}
	return 0;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct fsnp_conn *c = st->data;
	(void)buf;
	if (nread < 0) {
		if (nread != UV_EOF) {
			log_debug(c->srv->log, "fsnp",
			          "client %" PRIu64 ": read: %s", c->id,
			          uv_strerror((int)nread));
		}
		fsnp_conn_close(c);
		return;
	}
	if (nread == 0) {
		if (buf->base == NULL && buf->len == 0) {
			fsnp_conn_close(c); /* allocation refused */
		}
		return;
	}
	if (c->tls != NULL) {
		if (tls_receive(c, (const uint8_t *)buf->base, (size_t)nread) !=
		    0) {
			return;
		}
	} else {
		c->rlen += (size_t)nread;
	}
	conn_process(c);
}

void fsnp_conn_update_reading(struct fsnp_conn *c)
{
	struct fsnp_server *s = c->srv;
	if (c->closing) {
		return;
	}
	bool want = !c->draining && !c->quit && !c->stalled &&
	            c->out_bytes < lim(c)->max_outbound_bytes_per_connection &&
	            s->outbound_bytes < lim(c)->max_global_outbound_bytes;
	if (want == c->reading) {
		return;
	}
	if (want) {
		if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) ==
		    0) {
			c->reading = true;
		}
	} else {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
}

void fsnp_conn_resume(struct fsnp_conn *c)
{
	if (!c->closing && !c->stalled && c->rlen > c->roff) {
		conn_process(c);
	}
}

/* 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8. */
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

int fsnp_conn_start(struct fsnp_conn *c)
{
	struct sockaddr_storage ss;
	int len = sizeof ss;
	char host[64] = "?";
	int port = 0;

	uv_tcp_nodelay(&c->tcp, 1);
	uv_tcp_keepalive(&c->tcp, 1, 30);
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			uv_ip4_name(a, host, sizeof host);
			port = ntohs(a->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			uv_ip6_name(a, host, sizeof host);
			port = ntohs(a->sin6_port);
		}
	}
	snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
	c->remote = !loopback(&ss);
	if (fsnp_conn_lane(c, 0, true) == NULL) {
		return -1;
	}
	fsnp_conn_update_reading(c);
	return c->reading ? 0 : -1;
}

/* --- Closing ------------------------------------------------------------ */

static void on_closed(uv_handle_t *h)
{
	struct fsnp_conn *c = h->data;
	struct fsnp_server *s = c->srv;

	for (uint32_t i = 0; i < c->lane_cap; i++) {
		struct fsnp_lane *l = c->lanes[i];
		if (l == NULL) {
			continue;
		}
		while (l->head != NULL) {
			struct fsnp_req *r = l->head;
			l->head = r->next;
			r->next = NULL;
			if (r->done) {
				fsnp_req_free(r);
			} else {
				r->conn = NULL;
				r->lane = NULL;
				fsnp_req_release(r);
			}
		}
		free(l);
		s->lanes--;
	}
	free(c->lanes);
	free(c->poisoned);
	for (size_t i = 0; i < c->n_pend; i++) {
		free(c->pend[i].data);
	}
	s->outbound_bytes -= c->out_bytes;
	free(c->pend);
	free(c->flight);
	s->inbound_bytes -= fsnp_chunk_pending_bytes(&c->chunks);
	fsnp_chunk_close(&c->chunks);
	if (c->rcap > RBUF_READ) {
		s->inbound_bytes -= c->rcap - RBUF_READ;
	}
	free(c->rbuf);
	tls_session_free(c->tls);
	fsnp_server_conn_gone(s, c);
	free(c);
}

void fsnp_conn_close(struct fsnp_conn *c)
{
	if (c->closing) {
		return;
	}
	c->closing = true;
	if (c->reading) {
		uv_read_stop((uv_stream_t *)&c->tcp);
		c->reading = false;
	}
	uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void maybe_finish(struct fsnp_conn *c)
{
	if (c->closing || !(c->draining || c->quit)) {
		return;
	}
	if (c->queued != 0 || c->n_pend != 0 || c->writing) {
		return;
	}
	if (c->tls != NULL && tls_established(c->tls) && !c->tls_bye) {
		/* Say goodbye in TLS first; close once it is written. */
		c->tls_bye = true;
		tls_shutdown(c->tls);
		fsnp_conn_flush(c);
		if (c->writing || c->closing) {
			return;
		}
	}
	fsnp_conn_close(c);
}

void fsnp_conn_quit(struct fsnp_conn *c)
{
	if (c->closing) {
		return;
	}
	c->quit = true;
	fsnp_conn_update_reading(c);
	fsnp_server_mark_dirty(c->srv, c);
	maybe_finish(c);
}

void fsnp_conn_drain(struct fsnp_conn *c, uint64_t grace_ms)
{
	struct wbuf b;
	struct fsnp_writer w;
	if (c->closing || c->draining) {
		return;
	}
	if (c->tls != NULL && !tls_established(c->tls)) {
		fsnp_conn_close(c); /* no session to say GOAWAY in yet */
		return;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "reason");
	fsnp_w_str(&w, "server_shutdown");
	fsnp_w_key(&w, "grace_ms");
	fsnp_w_u64(&w, grace_ms);
	fsnp_w_key(&w, "reconnect");
	fsnp_w_bool(&w, true);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0) {
		fsnp_conn_send(c, 0, FSNP_OP_GOAWAY, 0, 0, b.data, b.len);
	}
	wbuf_free(&b);
	c->draining = true;
	fsnp_conn_update_reading(c);
	maybe_finish(c);
}

void fsnp_conn_check_timeouts(struct fsnp_conn *c, uint64_t now)
{
	const struct config_native *l = lim(c);
	uint64_t deadline;
	const char *why = NULL;

	if (c->closing) {
		return;
	}
	if (l->idle_timeout_ms > 0 &&
	    now - c->last_rx_ms >= l->idle_timeout_ms) {
		why = "idle timeout";
	} else if (c->writing &&
	           now - c->write_started_ms >= l->send_timeout_ms) {
		why = "send timeout";
	} else if (fsnp_chunk_deadline(&c->chunks, &deadline) &&
	           now >= deadline) {
		why = "chunked request not completed in time";
	} else if (!c->authenticated && !c->quit && l->auth_timeout_ms > 0 &&
	           now - c->opened_ms >= l->auth_timeout_ms) {
		why = "not authenticated in time";
	}
	if (why != NULL) {
		log_debug(c->srv->log, "fsnp",
		          "client %" PRIu64 ": %s: closing", c->id, why);
		fsnp_conn_close(c);
	}
}
