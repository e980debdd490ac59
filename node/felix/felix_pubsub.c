/* Felix subscriptions and cache watches: one broker-opened uni stream each,
 * history from RocksDB joined to live delivery, shared event frames.
 *
 * A subscription reads one stream shard, a cache watch one cache shard
 * (filtered by a key or a key prefix); both hang off a "topic" (kind,
 * scope and shard) and are in one of two modes:
 *  - catching up: `next` < the shard's tail. The pump (a uv_idle handle)
 *    reads pages of records (or cache changes) from the store at `next`
 *    and writes them as frames of this subscriber; live changes are
 *    ignored meanwhile, since the pump will read them from the store.
 *    Pages stop while the subscriber's queue is half full (the stream's
 *    writable callback resumes them), so a slow reader never holds more
 *    than its queue.
 *  - live: the pump reached the tail. Every append or cache change the
 *    store applies (the store observer, in log order, on the reactor
 *    thread) is encoded once per variant and the same buffer (quic_sbuf)
 *    is written to every live subscriber it concerns. A full queue drops
 *    a stream batch (DropNew, a gap its offsets show); a cache watch
 *    cannot show a gap in its sparse offsets, so a full queue ends it
 *    instead: what is queued is delivered, then cache_watch_lagged naming
 *    the first missed change, then FIN.
 * A subscription's history pages are read on libuv's thread pool (one page
 * in flight per subscription), so disk reads never hold the reactor; the
 * page is sent, and the switch to live decided, back on the reactor thread,
 * which also applies entries: a page that comes back empty is checked
 * against the shard's tail there, and the subscription turns live only if
 * nothing was appended since, so history and live delivery join with no
 * gap and no duplicate. (Cache watch pages are still read on the reactor,
 * bounded per turn.) A watch's snapshot
 * (retained values, or current values when compaction collapsed the
 * history it asked for) is read in the same turn as its registration at
 * the tail T, so it joins live changes the same way, as long as it fits
 * the watch's queue bound. A larger one is streamed: the values read in
 * that turn (about the queue bound), a count of the rest, and then pages
 * resuming by key from the pump as the queue drains; a page sends only
 * keys last written before T (their value at T), and once the snapshot is
 * done the pump replays the log from T, which holds every later change.
 * A key written after T before its page was read is therefore missing
 * from the announced retained_count: the watch then ends with
 * cache_watch_lagged{resume_from: T}, and re-watching from T is gapless. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/felix/felix_internal.h"
#include "node/felix/scopes.h"
#include "node/shards.h"
#include "store/store.h"
#include "wire/felix_frame.h"
#include "wire/felix_hash.h"
#include "wire/felix_msg.h"
#include "wire/felix_utf8.h"

/* A catch-up page: records and bytes read at most per store read. */
#define PAGE_RECORDS 256
#define PAGE_BYTES (256u * 1024)
/* Pages per subscription per pump turn (keeps the reactor responsive). */
#define PUMP_PAGES 4

/* Topic kinds (first byte of a topic key): a stream and a cache may
 * share a name. */
#define TOPIC_STREAM 'S'
#define TOPIC_CACHE 'C'

struct ftopic {
	struct fsub *subs; /* list */
	uint8_t key[];
};

struct qitem {
	struct qitem *next;
	struct quic_sbuf *b;
	bool fin; /* the last frame: FIN after it */
};

struct fsub {
	struct felix_server *srv;
	struct fconn *conn;
	int64_t sid;
	uint64_t id;
	struct ftopic *topic;
	size_t topic_klen;
	struct fsub *tprev, *tnext; /* topic list */
	struct fsub *cprev, *cnext; /* connection list */
	struct fsub *pprev, *pnext; /* pump list */
	bool in_pump;
	bool offsets;
	bool live;
	uint32_t group;
	uint32_t shard;
	char *scope; /* owned "tenant/ns/name" */
	size_t scope_len;
	uint64_t next; /* next offset to send (catching up), or after the
	                  last change seen (live) */
	struct qitem *qhead, *qtail;
	size_t qbytes;
	uint64_t dropped;
	/* cache watch */
	bool watch;
	bool prefix; /* match is a key prefix (else the whole key) */
	char *match; /* owned */
	size_t match_len;
	bool ending; /* lagged: no more events; FIN after the queue */
	/* A snapshot streamed from the pump (`next` is T meanwhile). */
	bool snapping;
	uint64_t snap_left; /* announced values not sent yet */
	char *snap_after;   /* owned: the last key read (pages resume after) */
	size_t snap_after_len;
	uint32_t snap_page_keys; /* keys per page, so a page is ~PAGE_BYTES */
	struct hread *reading;   /* history page being read off the reactor */
};

/* One history page read on the thread pool for a subscription. Owned by
 * itself: freed when its completion runs on the reactor, whether or not
 * the subscription is still there (`sub` NULL once it ended). */
struct hread {
	uv_work_t req; /* req.data = this */
	struct felix_server *srv;
	struct fsub *sub;
	struct store *st;
	uint32_t group;
	uint32_t shard;
	uint8_t *scope; /* owned copy */
	size_t scope_len;
	uint64_t from;
	struct wbuf w; /* frame being built: header, [base], count, records */
	uint32_t n;
	struct store_stream_info info;
	int rv;
};

static void hread_forget(struct hread *r)
{
	r->sub = NULL;
}

/* ---- topics ------------------------------------------------------------ */

static size_t topic_key(uint8_t *key, size_t cap, uint8_t kind,
                        const uint8_t *scope, size_t len, uint32_t shard)
{
	if (len + 5 > cap) {
		len = cap - 5;
	}
	key[0] = kind;
	memcpy(key + 1, scope, len);
	wire_store_u32(key + 1 + len, shard);
	return len + 5;
}

void pubsub_init(struct felix_server *s)
{
	hmap_init(&s->topics);
}

void pubsub_free(struct felix_server *s)
{
	struct hmap_iter it;
	struct hmap_entry *e;
	hmap_iter_init(&s->topics, &it);
	while ((e = hmap_iter_next(&s->topics, &it)) != NULL) {
		free(e->value);
	}
	hmap_free(&s->topics);
}

/* ---- queue ------------------------------------------------------------- */

static void queue_clear(struct fsub *sub)
{
	struct qitem *q = sub->qhead;
	while (q != NULL) {
		struct qitem *n = q->next;
		sub->srv->queue_bytes -= q->b->len;
		quic_sbuf_unref(q->b);
		free(q);
		q = n;
	}
	sub->qhead = sub->qtail = NULL;
	sub->qbytes = 0;
	metric_set(sub->srv->m.queue_bytes, (int64_t)sub->srv->queue_bytes);
}

static void pump_remove(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	if (!sub->in_pump) {
		return;
	}
	if (sub->pprev != NULL) {
		sub->pprev->pnext = sub->pnext;
	} else {
		s->pump_head = sub->pnext;
	}
	if (sub->pnext != NULL) {
		sub->pnext->pprev = sub->pprev;
	}
	sub->pprev = sub->pnext = NULL;
	sub->in_pump = false;
}

static void on_pump(uv_idle_t *h);

static void pump_add(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	if (sub->in_pump || sub->live || sub->reading != NULL) {
		return;
	}
	sub->pprev = NULL;
	sub->pnext = s->pump_head;
	if (s->pump_head != NULL) {
		s->pump_head->pprev = sub;
	}
	s->pump_head = sub;
	sub->in_pump = true;
	if (!s->pumping && !s->closing) {
		uv_idle_start(&s->pump, on_pump);
		s->pumping = true;
	}
}

/* Takes the subscription off its topic: no live change reaches it. */
static void topic_leave(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	struct ftopic *t = sub->topic;
	if (t == NULL) {
		return;
	}
	if (sub->tprev != NULL) {
		sub->tprev->tnext = sub->tnext;
	} else {
		t->subs = sub->tnext;
	}
	if (sub->tnext != NULL) {
		sub->tnext->tprev = sub->tprev;
	}
	if (t->subs == NULL) {
		hmap_del(&s->topics, t->key, sub->topic_klen);
		free(t);
	}
	sub->topic = NULL;
	sub->tprev = sub->tnext = NULL;
}

/* Ends the subscription and frees it. */
static void sub_free(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	if (sub->reading != NULL) {
		hread_forget(sub->reading); /* it frees itself when done */
		sub->reading = NULL;
	}
	pump_remove(sub);
	topic_leave(sub);
	if (sub->cprev != NULL) {
		sub->cprev->cnext = sub->cnext;
	} else {
		sub->conn->subs = sub->cnext;
	}
	if (sub->cnext != NULL) {
		sub->cnext->cprev = sub->cprev;
	}
	queue_clear(sub);
	/* No dangling pointer for a later callback about the stream. */
	quic_conn_stream_set_data(sub->conn->qc, sub->sid, NULL);
	metric_add(sub->watch ? s->m.watches : s->m.subscriptions, -1);
	log_debug(s->log, "felix",
	          "%s %" PRIu64 " on %s/%u ended (dropped %" PRIu64 ")",
	          sub->watch ? "watch" : "subscription", sub->id, sub->scope,
	          (unsigned)sub->shard, sub->dropped);
	free(sub->scope);
	free(sub->match);
	free(sub->snap_after);
	free(sub);
}

/* Writes the queue out; false when the stream is gone (sub freed). */
static bool queue_drain(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	while (sub->qhead != NULL) {
		struct qitem *q = sub->qhead;
		int rv = quic_conn_stream_write_sbuf(
		    sub->conn->qc, sub->sid, q->b, 0, q->b->len, q->fin);
		if (rv == QUIC_EAGAIN) {
			return true;
		}
		if (rv != 0) {
			sub_free(sub);
			return false;
		}
		sub->qhead = q->next;
		if (sub->qhead == NULL) {
			sub->qtail = NULL;
		}
		sub->qbytes -= q->b->len;
		s->queue_bytes -= q->b->len;
		quic_sbuf_unref(q->b);
		free(q);
	}
	metric_set(s->m.queue_bytes, (int64_t)s->queue_bytes);
	return true;
}

/* Sends (or queues) one frame buffer of `n` events; with `fin` it is the
 * last. `force` queues past the cap (catch-up pages, which stop
 * themselves; snapshots; the lag notice). Returns 0 sent or queued, 1
 * dropped, -1 when the stream is gone (sub freed). */
static int sub_send_ex(struct fsub *sub, struct quic_sbuf *b, uint32_t n,
                       bool force, bool fin)
{
	struct felix_server *s = sub->srv;
	struct metric *sent = sub->watch ? s->m.watch_events : s->m.events_sent;
	if (sub->qhead == NULL) {
		int rv = quic_conn_stream_write_sbuf(sub->conn->qc, sub->sid, b,
		                                     0, b->len, fin);
		if (rv == 0) {
			metric_add(sent, n);
			return 0;
		}
		if (rv != QUIC_EAGAIN) {
			sub_free(sub);
			return -1;
		}
	}
	if (!force && sub->qbytes + b->len > s->cfg.sub_queue_bytes) {
		sub->dropped++;
		metric_add(s->m.events_dropped, n);
		return 1;
	}
	struct qitem *q = malloc(sizeof *q);
	if (q == NULL) {
		sub->dropped++;
		metric_add(s->m.events_dropped, n);
		return 1;
	}
	quic_sbuf_ref(b);
	q->b = b;
	q->fin = fin;
	q->next = NULL;
	if (sub->qtail != NULL) {
		sub->qtail->next = q;
	} else {
		sub->qhead = q;
	}
	sub->qtail = q;
	sub->qbytes += b->len;
	s->queue_bytes += b->len;
	metric_set(s->m.queue_bytes, (int64_t)s->queue_bytes);
	metric_add(sent, n);
	return 0;
}

static int sub_send(struct fsub *sub, struct quic_sbuf *b, uint32_t n,
                    bool force)
{
	return sub_send_ex(sub, b, n, force, false);
}

/* ---- encoding ---------------------------------------------------------- */

/* A shared event batch frame (0x0004 [+0x0020]) from a store list. */
static struct quic_sbuf *encode_list(const struct store_list *records,
                                     bool offsets, uint64_t base)
{
	struct store_list_iter it;
	struct store_slice r;
	size_t len = 4 + (offsets ? 8 : 0);
	if (records->v == NULL) {
		len += records->enc_len;
	} else {
		store_list_iter_init(&it, records);
		while (store_list_next(&it, &r)) {
			len += 4 + r.len;
		}
	}
	if (len > UINT32_MAX) {
		return NULL;
	}
	struct quic_sbuf *b = quic_sbuf_new(FELIX_FRAME_HEADER_LEN + len);
	if (b == NULL) {
		return NULL;
	}
	uint16_t flags = FELIX_FLAG_EVENT_BATCH_SHARED |
	                 (offsets ? FELIX_FLAG_EVENT_BATCH_OFFSETS : 0);
	felix_frame_header_encode(flags, (uint32_t)len, b->data);
	uint8_t *p = b->data + FELIX_FRAME_HEADER_LEN;
	if (offsets) {
		wire_store_u64(p, base);
		p += 8;
	}
	wire_store_u32(p, records->n);
	p += 4;
	if (records->v == NULL) {
		/* Decoded from a command: already u32 length + bytes each. */
		memcpy(p, records->enc, records->enc_len);
		return b;
	}
	store_list_iter_init(&it, records);
	while (store_list_next(&it, &r)) {
		wire_store_u32(p, (uint32_t)r.len);
		memcpy(p + 4, r.p, r.len);
		p += 4 + r.len;
	}
	return b;
}

void pubsub_on_append(struct felix_server *s, struct store_slice scope,
                      uint32_t shard, uint64_t base,
                      const struct store_list *records)
{
	uint8_t key[8192];
	if (s->topics.count == 0 || scope.len + 5 > sizeof key) {
		return;
	}
	size_t klen =
	    topic_key(key, sizeof key, TOPIC_STREAM, scope.p, scope.len, shard);
	struct ftopic *t = hmap_get(&s->topics, key, klen);
	if (t == NULL) {
		return;
	}
	/* Encoded once per variant, shared by every live subscriber. */
	struct quic_sbuf *v[2] = {NULL, NULL};
	struct fsub *sub = t->subs;
	while (sub != NULL) {
		struct fsub *next = sub->tnext; /* sub_send may free sub */
		if (sub->live) {
			int i = sub->offsets ? 1 : 0;
			sub->next = base + records->n; /* dropped or not */
			if (v[i] == NULL) {
				v[i] = encode_list(records, sub->offsets, base);
			}
			if (v[i] != NULL) {
				sub_send(sub, v[i], records->n, false);
			}
		}
		sub = next;
	}
	for (int i = 0; i < 2; i++) {
		if (v[i] != NULL) {
			quic_sbuf_unref(v[i]);
		}
	}
}

/* ---- catch-up ---------------------------------------------------------- */

static int hread_record(void *arg, uint64_t offset, uint64_t ts,
                        const uint8_t *payload, size_t len)
{
	struct hread *r = arg;
	(void)offset;
	(void)ts;
	if (wbuf_put_u32(&r->w, (uint32_t)len) != 0 ||
	    wbuf_append(&r->w, payload, len) != 0) {
		return -1;
	}
	r->n++;
	return 0;
}

/* Thread pool: only the store's thread-safe read. */
static void hread_work(uv_work_t *req)
{
	struct hread *r = req->data;
	struct store_slice scope = {r->scope, r->scope_len};
	r->rv = store_stream_read(r->st, r->group, scope, r->shard, r->from,
	                          PAGE_RECORDS, PAGE_BYTES, hread_record, r,
	                          &r->info);
}

static void hread_free(struct hread *r)
{
	wbuf_free(&r->w);
	free(r->scope);
	free(r);
}

/* Sends the page read for `sub` (reactor). Returns -1 when the sub was
 * freed, 1 when it went live or waits for its queue, 0 when more pages
 * are due. */
static int hread_deliver(struct fsub *sub, struct hread *r)
{
	struct felix_server *s = sub->srv;
	struct store *st = shards_store(s->shards);
	int rv = r->rv;

	if (rv == STORE_TOO_OLD) {
		/* Retention passed the reader: skip to the head; the
		 * offsets show the gap. */
		sub->next = r->info.head;
		return 0;
	}
	if (rv == STORE_IN_FUTURE) {
		sub->next = r->info.tail;
		r->n = 0;
	} else if (rv != 0 || r->w.oom) {
		log_warn(s->log, "felix",
		         "subscription %" PRIu64 ": history read failed: %s",
		         sub->id,
		         r->w.oom ? "out of memory" : store_last_error(st));
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		return -1;
	}
	if (r->n == 0) {
		/* The page ended at the tail the worker saw; entries may
		 * have been applied since. Here, on the thread that applies
		 * them, the tail is current: live only if it is still ours. */
		struct store_slice scope = {(const uint8_t *)sub->scope,
		                            sub->scope_len};
		struct store_stream_info now;
		if (store_stream_info(st, sub->group, scope, sub->shard,
		                      &now) == 0 &&
		    now.tail > sub->next) {
			return 0;
		}
		sub->live = true;
		return 1;
	}
	uint16_t flags = FELIX_FLAG_EVENT_BATCH_SHARED |
	                 (sub->offsets ? FELIX_FLAG_EVENT_BATCH_OFFSETS : 0);
	uint8_t *p = r->w.data;
	felix_frame_header_encode(
	    flags, (uint32_t)(r->w.len - FELIX_FRAME_HEADER_LEN), p);
	p += FELIX_FRAME_HEADER_LEN;
	if (sub->offsets) {
		wire_store_u64(p, sub->next);
		p += 8;
	}
	wire_store_u32(p, r->n);
	struct quic_sbuf *b = quic_sbuf_take(r->w.data, r->w.len);
	if (b == NULL) {
		return 0; /* tried again from the pump */
	}
	wbuf_init(&r->w); /* the sbuf owns the bytes now */
	sub->next += r->n;
	rv = sub_send(sub, b, r->n, true);
	quic_sbuf_unref(b);
	return rv < 0 ? -1 : 0;
}

static void hread_done(uv_work_t *req, int status)
{
	struct hread *r = req->data;
	struct felix_server *s = r->srv;
	struct fsub *sub = r->sub;

	s->hreads--;
	if (sub == NULL || status != 0 || s->closing) {
		hread_free(r);
		if (sub != NULL) {
			sub->reading = NULL;
		}
		felix_server_maybe_closed(s);
		return;
	}
	sub->reading = NULL;
	if (hread_deliver(sub, r) == 0) {
		pump_add(sub);
	}
	hread_free(r);
}

/* Starts reading the next history page off the reactor. Returns 1: the
 * pump is done with this sub until the page comes back or its queue
 * drains (-1 if the sub was freed). */
static int catch_up(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	struct hread *r;

	pump_remove(sub);
	if (sub->reading != NULL || s->closing) {
		return 1;
	}
	if (sub->qbytes >= s->cfg.sub_queue_bytes / 2) {
		return 1; /* writable resumes it */
	}
	r = calloc(1, sizeof *r);
	if (r == NULL) {
		pump_add(sub);
		return 1;
	}
	r->req.data = r;
	r->srv = s;
	r->sub = sub;
	r->st = shards_store(s->shards);
	r->group = sub->group;
	r->shard = sub->shard;
	r->from = sub->next;
	r->scope_len = sub->scope_len;
	r->scope = malloc(sub->scope_len + 1);
	wbuf_init(&r->w);
	/* header, [base], count: filled in when the page is sent */
	wbuf_extend(&r->w, FELIX_FRAME_HEADER_LEN + (sub->offsets ? 8 : 0) + 4);
	if (r->scope != NULL) {
		memcpy(r->scope, sub->scope, sub->scope_len);
		r->scope[sub->scope_len] = '\0';
	}
	if (r->scope == NULL || r->w.oom ||
	    uv_queue_work(s->loop, &r->req, hread_work, hread_done) != 0) {
		hread_free(r);
		pump_add(sub);
		return 1;
	}
	sub->reading = r;
	s->hreads++;
	return 1;
}

static int watch_catch_up(struct fsub *sub);

static void on_pump(uv_idle_t *h)
{
	struct felix_server *s = h->data;
	struct fsub *sub = s->pump_head;
	while (sub != NULL) {
		struct fsub *next = sub->pnext;
		if (sub->watch) {
			watch_catch_up(sub);
		} else {
			catch_up(sub);
		}
		sub = next;
	}
	if (s->pump_head == NULL && s->pumping) {
		uv_idle_stop(&s->pump);
		s->pumping = false;
	}
}

/* ---- subscriptions ----------------------------------------------------- */

/* Opens the uni stream, writes event_stream_hello and registers on the
 * topic (kind, scope, shard). The subscription is neither live nor in the
 * pump yet. NULL with a message for the client on failure. */
static struct fsub *sub_open(struct felix_server *s, struct fconn *conn,
                             uint8_t kind, uint32_t group, const char *scope,
                             size_t scope_len, uint32_t shard, char *err,
                             size_t errlen)
{
	uint8_t key[8192];
	int64_t sid;
	if (scope_len + 5 > sizeof key) {
		snprintf(err, errlen, "scope name too long");
		return NULL;
	}
	int rv = quic_conn_open_uni_stream(conn->qc, &sid);
	if (rv != 0) {
		snprintf(err, errlen,
		         "cannot open an event stream: %s (too many "
		         "subscriptions on this connection?)",
		         quic_strerror(rv));
		return NULL;
	}
	struct fsub *sub = calloc(1, sizeof *sub);
	char *sc = malloc(scope_len + 1);
	if (sub == NULL || sc == NULL) {
		free(sub);
		free(sc);
		quic_conn_stream_reset(conn->qc, sid, 1);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(sc, scope, scope_len);
	sc[scope_len] = '\0';
	sub->srv = s;
	sub->conn = conn;
	sub->sid = sid;
	sub->id = ++s->next_sub_id;
	sub->group = group;
	sub->shard = shard;
	sub->scope = sc;
	sub->scope_len = scope_len;
	sub->watch = kind == TOPIC_CACHE;

	/* The hello first: it names the subscription on this stream. */
	struct felix_msg hello;
	struct wbuf w;
	felix_msg_init(&hello, FELIX_MSG_EVENT_STREAM_HELLO);
	hello.u.hello.subscription_id = sub->id;
	wbuf_init(&w);
	if (felix_msg_encode_frame(&hello, &w) != 0 ||
	    quic_conn_stream_write(conn->qc, sid, w.data, w.len, false) != 0) {
		wbuf_free(&w);
		free(sc);
		free(sub);
		quic_conn_stream_reset(conn->qc, sid, 1);
		snprintf(err, errlen, "cannot write event_stream_hello");
		return NULL;
	}
	wbuf_free(&w);

	size_t klen = topic_key(key, sizeof key, kind, (const uint8_t *)scope,
	                        scope_len, shard);
	struct ftopic *t = hmap_get(&s->topics, key, klen);
	if (t == NULL) {
		t = malloc(sizeof *t + klen);
		if (t == NULL || hmap_put(&s->topics, key, klen, t) != 0) {
			free(t);
			free(sc);
			free(sub);
			quic_conn_stream_reset(conn->qc, sid, 1);
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		t->subs = NULL;
		memcpy(t->key, key, klen);
	}
	sub->topic = t;
	sub->topic_klen = klen;
	sub->tnext = t->subs;
	if (t->subs != NULL) {
		t->subs->tprev = sub;
	}
	t->subs = sub;
	sub->cnext = conn->subs;
	if (conn->subs != NULL) {
		conn->subs->cprev = sub;
	}
	conn->subs = sub;
	quic_conn_stream_set_data(conn->qc, sid, sub);
	metric_add(sub->watch ? s->m.watches : s->m.subscriptions, 1);
	return sub;
}

int pubsub_subscribe(struct felix_server *s, struct fconn *conn, uint32_t group,
                     const char *scope, size_t scope_len, uint32_t shard,
                     uint64_t next, uint64_t tail, bool offsets, uint64_t *id,
                     char *err, size_t errlen)
{
	struct fsub *sub = sub_open(s, conn, TOPIC_STREAM, group, scope,
	                            scope_len, shard, err, errlen);
	if (sub == NULL) {
		return -1;
	}
	sub->offsets = offsets;
	sub->next = next;
	sub->live = next >= tail;
	if (!sub->live) {
		pump_add(sub);
	}
	*id = sub->id;
	return 0;
}

/* ---- cache watches ------------------------------------------------------ */

static bool watch_match(const struct fsub *sub, const uint8_t *key, size_t klen)
{
	if (sub->prefix) {
		return klen >= sub->match_len &&
		       memcmp(key, sub->match, sub->match_len) == 0;
	}
	return klen == sub->match_len && memcmp(key, sub->match, klen) == 0;
}

/* Appends one cache_event frame. 0, or -1 when the key cannot be sent as
 * a JSON string (not UTF-8: such a key cannot have been written through
 * Felix) or memory ran out. */
static int encode_change(struct wbuf *w, uint64_t offset, const uint8_t *key,
                         size_t klen, const uint8_t *value, size_t vlen,
                         uint64_t expires_at)
{
	char small[256];
	char *k = klen < sizeof small ? small : malloc(klen + 1);
	struct felix_msg m;
	int rv;
	if (k == NULL) {
		return -1;
	}
	memcpy(k, key, klen);
	k[klen] = '\0';
	felix_msg_init(&m, FELIX_MSG_CACHE_EVENT);
	m.u.cache_event.key = k;
	m.u.cache_event.has_value = value != NULL;
	m.u.cache_event.value.data = (uint8_t *)value;
	m.u.cache_event.value.len = vlen;
	m.u.cache_event.offset = offset;
	m.u.cache_event.has_expires_at_millis = expires_at != 0;
	m.u.cache_event.expires_at_millis = expires_at;
	/* A key holding NUL cannot be a JSON string either. */
	rv = klen > 0 && memchr(key, 0, klen) != NULL
	         ? -1
	         : felix_msg_encode_frame(&m, w);
	if (k != small) {
		free(k);
	}
	return rv == 0 && !w->oom ? 0 : -1;
}

/* Ends a watch that fell behind: everything queued, then
 * cache_watch_lagged{resume_from}, then FIN. */
static void watch_lag(struct fsub *sub, uint64_t resume_from)
{
	struct felix_server *s = sub->srv;
	struct felix_msg m;
	struct wbuf w;
	sub->ending = true;
	sub->live = true; /* keeps it out of the pump */
	pump_remove(sub);
	topic_leave(sub);
	metric_add(s->m.watch_lagged, 1);
	felix_msg_init(&m, FELIX_MSG_CACHE_WATCH_LAGGED);
	m.u.cache_watch_lagged.resume_from = resume_from;
	wbuf_init(&w);
	if (felix_msg_encode_frame(&m, &w) != 0 || w.oom) {
		wbuf_free(&w);
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		return;
	}
	size_t len = w.len;
	struct quic_sbuf *b = quic_sbuf_take(w.data, len);
	if (b == NULL) {
		wbuf_free(&w);
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		return;
	}
	log_debug(s->log, "felix",
	          "watch %" PRIu64 " lagged: resume from %" PRIu64, sub->id,
	          resume_from);
	sub_send_ex(sub, b, 0, true, true);
	quic_sbuf_unref(b);
}

void pubsub_on_cache_change(struct felix_server *s, struct store_slice scope,
                            uint32_t shard, uint64_t offset,
                            struct store_slice key,
                            const struct store_slice *value,
                            uint64_t expires_at)
{
	uint8_t tkey[8192];
	if (s->topics.count == 0 || scope.len + 5 > sizeof tkey) {
		return;
	}
	size_t klen = topic_key(tkey, sizeof tkey, TOPIC_CACHE, scope.p,
	                        scope.len, shard);
	struct ftopic *t = hmap_get(&s->topics, tkey, klen);
	if (t == NULL) {
		return;
	}
	/* Encoded once, shared by every live watch it matches. */
	struct quic_sbuf *b = NULL;
	bool unsendable = false;
	struct fsub *sub = t->subs;
	while (sub != NULL) {
		struct fsub *next = sub->tnext; /* may leave the topic */
		if (sub->live && !sub->ending) {
			sub->next = offset + 1;
		}
		if (!sub->live || sub->ending ||
		    !watch_match(sub, key.p, key.len)) {
			sub = next;
			continue;
		}
		if (b == NULL && !unsendable) {
			struct wbuf w;
			wbuf_init(&w);
			if (encode_change(&w, offset, key.p, key.len,
			                  value ? value->p : NULL,
			                  value ? value->len : 0,
			                  expires_at) != 0 ||
			    (b = quic_sbuf_take(w.data, w.len)) == NULL) {
				wbuf_free(&w);
				unsendable = true;
			}
		}
		if (b != NULL && sub_send(sub, b, 1, false) == 1) {
			/* Dropped: loud, since sparse offsets would hide
			 * it. Re-watching from here is gapless. */
			watch_lag(sub, offset);
		}
		sub = next;
	}
	if (b != NULL) {
		quic_sbuf_unref(b);
	}
}

/* A snapshot import replaced a group's state without reporting its changes
 * one by one (a replica that fell behind, e.g. a paused leader): live
 * subscriptions go back to catching up from the store where they stood,
 * live watches end lagged at their position, so neither shows a gap. */
void pubsub_on_imported(struct felix_server *s, uint32_t group)
{
	struct fsub **v = NULL;
	size_t n = 0, cap = 0;
	struct hmap_iter it;
	struct hmap_entry *e;

	hmap_iter_init(&s->topics, &it);
	while ((e = hmap_iter_next(&s->topics, &it)) != NULL) {
		struct ftopic *t = e->value;
		for (struct fsub *sub = t->subs; sub != NULL;
		     sub = sub->tnext) {
			if (sub->group != group || !sub->live || sub->ending) {
				continue;
			}
			if (n == cap) {
				size_t nc = cap == 0 ? 16 : cap * 2;
				struct fsub **nv = realloc(v, nc * sizeof *v);
				if (nv == NULL) {
					break;
				}
				v = nv;
				cap = nc;
			}
			v[n++] = sub;
		}
	}
	/* Acted on after the walk: a lagged watch leaves its topic. */
	for (size_t i = 0; i < n; i++) {
		struct fsub *sub = v[i];
		log_info(s->log, "felix",
		         "%s %" PRIu64 ": state of group %u imported; %s "
		         "from offset %" PRIu64,
		         sub->watch ? "watch" : "subscription", sub->id,
		         (unsigned)group,
		         sub->watch ? "ends lagged, resume" : "catches up",
		         sub->next);
		if (sub->watch) {
			watch_lag(sub, sub->next);
		} else {
			sub->live = false;
			pump_add(sub);
		}
	}
	free(v);
}

/* A page of replayed changes: the frames of those that match. */
struct wpage {
	struct fsub *sub;
	struct wbuf w;
	uint32_t n;    /* matching changes encoded */
	uint64_t seen; /* changes read */
	uint64_t last; /* offset of the last change read */
	bool failed;
};

static int wpage_change(void *arg, uint64_t offset, const uint8_t *key,
                        size_t klen, const uint8_t *value, size_t vlen,
                        uint64_t expires_at)
{
	struct wpage *pg = arg;
	pg->seen++;
	pg->last = offset;
	if (watch_match(pg->sub, key, klen)) {
		size_t before = pg->w.len;
		if (encode_change(&pg->w, offset, key, klen, value, vlen,
		                  expires_at) == 0) {
			pg->n++;
		} else if (pg->w.oom) {
			pg->failed = true;
			return -1;
		} else {
			pg->w.len = before; /* unsendable key: skipped */
		}
	}
	return pg->w.len >= PAGE_BYTES ? 1 : 0;
}

/* The replay pump of a watch: like catch_up(), over the cache log. */
static int watch_snap_step(struct fsub *sub);

static int watch_catch_up(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	struct store *st = shards_store(s->shards);
	struct store_slice scope = {(const uint8_t *)sub->scope,
	                            sub->scope_len};
	for (int i = 0; i < PUMP_PAGES; i++) {
		struct wpage pg;
		struct store_cache_info info;
		if (sub->qbytes >= s->cfg.sub_queue_bytes / 2) {
			pump_remove(sub); /* writable resumes it */
			return 1;
		}
		if (sub->snapping) {
			if (watch_snap_step(sub) != 0) {
				return -1;
			}
			continue;
		}
		memset(&pg, 0, sizeof pg);
		pg.sub = sub;
		wbuf_init(&pg.w);
		int rv = store_cache_log_read(st, sub->group, scope, sub->shard,
		                              sub->next, PAGE_RECORDS,
		                              wpage_change, &pg, &info);
		if (rv == STORE_RESNAPSHOT) {
			/* Compaction passed the replay: the client re-watches
			 * from here and gets a snapshot. */
			wbuf_free(&pg.w);
			watch_lag(sub, sub->next);
			return -1;
		}
		if (rv == STORE_IN_FUTURE) {
			pg.seen = 0;
		} else if ((rv != 0 && rv != 1) || pg.failed) {
			wbuf_free(&pg.w);
			log_warn(s->log, "felix",
			         "watch %" PRIu64 ": history read failed: %s",
			         sub->id, store_last_error(st));
			quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
			sub_free(sub);
			return -1;
		}
		if (pg.seen == 0) {
			wbuf_free(&pg.w);
			sub->live = true;
			pump_remove(sub);
			return 1;
		}
		sub->next = pg.last + 1;
		if (pg.n == 0) {
			wbuf_free(&pg.w);
			continue;
		}
		size_t len = pg.w.len;
		struct quic_sbuf *b = quic_sbuf_take(pg.w.data, len);
		if (b == NULL) {
			wbuf_free(&pg.w);
			return 1;
		}
		rv = sub_send(sub, b, pg.n, true);
		quic_sbuf_unref(b);
		if (rv < 0) {
			return -1;
		}
	}
	return 0;
}

/* The snapshot of a watch: current values of the matching keys, each at
 * the offset of the write that produced it. */
struct snap {
	struct fsub *sub;
	struct wbuf w;
	uint64_t n;     /* values encoded */
	uint64_t total; /* values announced (retained_count) */
};

static int snap_change(void *arg, uint64_t offset, const uint8_t *key,
                       size_t klen, const uint8_t *value, size_t vlen,
                       uint64_t expires_at)
{
	struct snap *x = arg;
	size_t before = x->w.len;
	if (!watch_match(x->sub, key, klen)) {
		return 0;
	}
	if (encode_change(&x->w, offset, key, klen, value, vlen, expires_at) ==
	    0) {
		x->n++;
	} else if (x->w.oom) {
		return -1;
	} else {
		x->w.len = before;
	}
	return 0;
}

static int snap_count(void *arg, uint64_t offset, const uint8_t *key,
                      size_t klen, const uint8_t *value, size_t vlen,
                      uint64_t expires_at)
{
	struct snap *x = arg;
	(void)offset;
	(void)value;
	(void)vlen;
	(void)expires_at;
	/* As snap_change decides, without keeping anything. */
	if (watch_match(x->sub, key, klen) &&
	    (klen == 0 || memchr(key, 0, klen) == NULL) &&
	    felix_utf8_valid(key, klen)) {
		x->total++;
	}
	return 0;
}

/* Reads one page of a prefix watch's snapshot after sub->snap_after into
 * x: the keys last written before T (sub->next). Sets *done when the scan
 * is over. 0 or -1 (storage failure). */
static int snap_page(struct felix_server *s, struct fsub *sub, struct snap *x,
                     bool *done)
{
	struct store *st = shards_store(s->shards);
	struct store_cmd c;
	struct store_result sr;
	struct store_value v, key, val, off, exp;
	struct fsm_result out = {NULL, 0};
	uint8_t *cmd = NULL;
	size_t clen;
	const char *e;
	int rv = -1;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_CACHE_SCAN;
	c.scope.p = (const uint8_t *)sub->scope;
	c.scope.len = sub->scope_len;
	c.shard = sub->shard;
	c.key.p = (const uint8_t *)sub->match;
	c.key.len = sub->match_len;
	c.arg.p = (const uint8_t *)sub->snap_after;
	c.arg.len = sub->snap_after_len;
	/* The first page reads one key; later ones as many as fill about
	 * PAGE_BYTES at the sizes seen so far. */
	c.max = sub->snap_page_keys ? sub->snap_page_keys : 1;
	if (store_cmd_encode(&c, &cmd, &clen, &e) != 0 ||
	    store_read(st, sub->group, shards_now_ms(s->shards), cmd, clen,
	               &out) != 0 ||
	    store_result_open(out.data, out.len, &sr) != 0 ||
	    sr.status != STORE_OK || !store_result_next(&sr, &v) ||
	    v.tag != STORE_T_ARRAY || v.n != 2 || !store_result_next(&sr, &v) ||
	    v.tag != STORE_T_ARRAY) {
		goto out;
	}
	uint32_t n = v.n;
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!store_result_next(&sr, &v) || v.tag != STORE_T_ARRAY ||
		    v.n != 4 || !store_result_next(&sr, &key) ||
		    key.tag != STORE_T_BYTES || !store_result_next(&sr, &val) ||
		    val.tag != STORE_T_BYTES || !store_result_next(&sr, &off) ||
		    off.tag != STORE_T_U64 || !store_result_next(&sr, &exp) ||
		    exp.tag != STORE_T_U64) {
			goto out;
		}
		bytes += key.len + val.len;
		if (off.u < sub->next &&
		    snap_change(x, off.u, key.p, key.len, val.p, val.len,
		                exp.u) != 0) {
			goto out;
		}
		if (i + 1 == n) {
			char *a = malloc(key.len ? key.len : 1);
			if (a == NULL) {
				goto out;
			}
			memcpy(a, key.p, key.len);
			free(sub->snap_after);
			sub->snap_after = a;
			sub->snap_after_len = key.len;
		}
	}
	if (!store_result_next(&sr, &v)) {
		goto out;
	}
	*done = v.tag == STORE_T_NIL || n == 0;
	if (n > 0) {
		/* base64 and JSON: about 4/3 of the bytes plus ~100. */
		uint64_t per = bytes / n * 4 / 3 + 100;
		uint64_t keys = PAGE_BYTES / per;
		sub->snap_page_keys = keys < 1              ? 1
		                      : keys > PAGE_RECORDS ? PAGE_RECORDS
		                                            : (uint32_t)keys;
	}
	rv = 0;
out:
	free(cmd);
	free(out.data);
	return rv;
}

/* Reads the snapshot of `sub` into x in the registration turn: all of it
 * when it fits the queue bound; otherwise about the bound, a count of the
 * rest, and the watch is left snapping for the pump. 0 or -1 (storage
 * failure). */
static int snapshot_read(struct felix_server *s, struct fsub *sub,
                         struct snap *x)
{
	struct store *st = shards_store(s->shards);
	struct store_slice scope = {(const uint8_t *)sub->scope,
	                            sub->scope_len};
	uint64_t now = shards_now_ms(s->shards);
	x->sub = sub;
	if (sub->prefix) {
		bool done = false;
		while (!done && x->w.len < s->cfg.sub_queue_bytes) {
			if (snap_page(s, sub, x, &done) != 0) {
				return -1;
			}
		}
		x->total = x->n;
		if (done) {
			return 0;
		}
		/* Too large to hold: count what is left, stream it later. */
		struct store_slice prefix = {(const uint8_t *)sub->match,
		                             sub->match_len};
		struct snap cnt;
		memset(&cnt, 0, sizeof cnt);
		cnt.sub = sub;
		if (store_cache_scan(st, sub->group, scope, sub->shard, prefix,
		                     now, snap_count, &cnt) != 0) {
			return -1;
		}
		if (cnt.total > x->n) {
			x->total = cnt.total;
			sub->snapping = true;
			sub->snap_left = cnt.total - x->n;
		}
		return 0;
	}
	struct store_slice key = {(const uint8_t *)sub->match, sub->match_len};
	uint8_t *value = NULL;
	size_t len = 0;
	uint64_t exp = 0, off = 0;
	bool found = false;
	if (store_cache_get(st, sub->group, scope, sub->shard, key, now, &value,
	                    &len, &exp, &off, &found) != 0) {
		return -1;
	}
	int rv = 0;
	if (found) {
		rv = snap_change(x, off, key.p, key.len, value, len, exp);
	}
	free(value);
	x->total = x->n;
	return rv == 0 ? 0 : -1;
}

/* One page of a streamed snapshot (the pump). 0, or -1 when the watch
 * ended (lagged, or its stream went away). */
static int watch_snap_step(struct fsub *sub)
{
	struct felix_server *s = sub->srv;
	struct snap x;
	bool done = false;
	memset(&x, 0, sizeof x);
	x.sub = sub;
	wbuf_init(&x.w);
	if (snap_page(s, sub, &x, &done) != 0) {
		wbuf_free(&x.w);
		log_warn(s->log, "felix",
		         "watch %" PRIu64 ": snapshot read failed: %s", sub->id,
		         store_last_error(shards_store(s->shards)));
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		return -1;
	}
	if (x.n > sub->snap_left) {
		x.n = sub->snap_left; /* cannot happen: counted at T */
	}
	sub->snap_left -= x.n;
	if (x.n > 0) {
		size_t len = x.w.len;
		struct quic_sbuf *b = quic_sbuf_take(x.w.data, len);
		if (b == NULL) {
			wbuf_free(&x.w);
			quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
			sub_free(sub);
			return -1;
		}
		int rv = sub_send(sub, b, (uint32_t)x.n, true);
		quic_sbuf_unref(b);
		if (rv < 0) {
			return -1;
		}
	} else {
		wbuf_free(&x.w);
	}
	if (done || sub->snap_left == 0) {
		sub->snapping = false;
		free(sub->snap_after);
		sub->snap_after = NULL;
		sub->snap_after_len = 0;
		if (sub->snap_left > 0) {
			/* Keys written since T are missing from the announced
			 * values: the replay from T would carry them, but not
			 * within retained_count. Loud, and gapless from T. */
			watch_lag(sub, sub->next);
			return -1;
		}
	}
	return 0;
}

static void reply_cursor_error(struct freq *r, uint64_t requested,
                               uint64_t tail)
{
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
	m.u.cursor_error.reason = FELIX_CURSOR_IN_FUTURE;
	m.u.cursor_error.requested = requested;
	m.u.cursor_error.available = tail;
	freq_reply_msg(r, &m);
}

/* After the read barrier on the cache shard's leader: registration at the
 * tail, snapshot or replay start, and the answer, all in this turn. */
static void on_watch_read(void *data, int status)
{
	struct freq *r = data;
	struct felix_server *s = r->srv;
	struct felix_msg_cache_watch *q = &r->msg.u.cache_watch;
	struct store_cache_info info;
	struct snap x;
	char err[512];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status == SHARDS_ENOTLEADER) {
		char what[SCOPES_FULL_MAX + 64];
		struct wbuf w;
		snprintf(what, sizeof what, "shard %u of cache %s",
		         (unsigned)r->shard, r->scope);
		wbuf_init(&w);
		if (felix_leader_answer(r->st, r->group, what, &w) == 0) {
			wbuf_free(&w);
			freq_error(r, felix_shards_message(status));
			return;
		}
		freq_complete(r, &w);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	struct store_slice scope = {(const uint8_t *)r->scope, r->scope_len};
	if (store_cache_info(shards_store(s->shards), r->group, scope, r->shard,
	                     &info) != 0) {
		freq_error(r, "storage failure on this node");
		return;
	}
	bool replay = false, resnapshot = false;
	bool retained = q->has_retained && q->retained;
	if (q->has_from_offset) {
		if (q->from_offset > info.tail) {
			reply_cursor_error(r, q->from_offset, info.tail);
			return;
		}
		if (q->from_offset < info.compacted_below) {
			resnapshot = true;
		} else {
			replay = q->from_offset < info.tail;
		}
	}
	struct fsub *sub =
	    sub_open(s, r->st->conn, TOPIC_CACHE, r->group, r->scope,
	             r->scope_len, r->shard, err, sizeof err);
	if (sub == NULL) {
		freq_error(r, err);
		return;
	}
	bool is_prefix = q->prefix != NULL;
	const char *match = is_prefix ? q->prefix : q->key;
	sub->prefix = is_prefix;
	sub->match_len = strlen(match);
	sub->match = malloc(sub->match_len + 1);
	if (sub->match == NULL) {
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		freq_error(r, "out of memory");
		return;
	}
	memcpy(sub->match, match, sub->match_len + 1);
	sub->next = replay ? q->from_offset : info.tail;
	sub->live = !replay;
	memset(&x, 0, sizeof x);
	wbuf_init(&x.w);
	if ((retained || resnapshot) && snapshot_read(s, sub, &x) != 0) {
		wbuf_free(&x.w);
		quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
		sub_free(sub);
		freq_error(r, "storage failure on this node");
		return;
	}
	uint64_t id = sub->id;
	if (x.n > 0) {
		size_t len = x.w.len;
		struct quic_sbuf *b = quic_sbuf_take(x.w.data, len);
		if (b == NULL) {
			wbuf_free(&x.w);
			quic_conn_stream_reset(sub->conn->qc, sub->sid, 1);
			sub_free(sub);
			freq_error(r, "out of memory");
			return;
		}
		int rv = sub_send(sub, b, (uint32_t)x.n, true);
		quic_sbuf_unref(b);
		if (rv < 0) {
			freq_error(r, "the event stream went away");
			return;
		}
	} else {
		wbuf_free(&x.w);
	}
	if (sub->snapping) {
		/* The rest of the snapshot, then the log from T. */
		sub->live = false;
		pump_add(sub);
	} else if (replay) {
		pump_add(sub);
	}
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_CACHE_WATCH_STARTED);
	m.u.cache_watch_started.subscription_id = id;
	m.u.cache_watch_started.resume_offset = info.tail;
	m.u.cache_watch_started.has_resnapshot = resnapshot;
	m.u.cache_watch_started.resnapshot = resnapshot;
	m.u.cache_watch_started.has_retained_count = retained;
	m.u.cache_watch_started.retained_count = x.total;
	freq_reply_msg(r, &m);
}

bool pubsub_handle_watch(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	struct felix_msg_cache_watch *q = &m->u.cache_watch;
	struct scope_info info;
	char err[512];
	if ((q->key == NULL) == (q->prefix == NULL)) {
		fstream_reply_error(st, "cache_watch needs exactly one of key "
		                        "and prefix");
		return true;
	}
	if (q->has_retained && q->retained && q->has_from_offset) {
		fstream_reply_error(st,
		                    "cache_watch: retained and from_offset "
		                    "cannot be combined (the replay already "
		                    "rebuilds the state)");
		return true;
	}
	if (!fstream_tenant_ok(st, q->tenant_id, err, sizeof err)) {
		fstream_reply_error(st, err);
		return true;
	}
	int res =
	    fstream_resolve(st, STORE_SCOPE_CACHE, q->tenant_id, q->namespace,
	                    q->cache, &info, err, sizeof err);
	if (res == RES_BLOCKED) {
		return false;
	}
	if (res != RES_FOUND) {
		fstream_reply_error(st, err);
		return true;
	}
	uint32_t shard;
	if (q->key != NULL) {
		/* Resolved as a cache_get of the key would be. */
		shard = felix_hash_shard(
		    info.shards, true, (const uint8_t *)q->key, strlen(q->key));
	} else {
		shard = q->has_shard ? q->shard : 0;
		if (shard >= info.shards) {
			snprintf(err, sizeof err,
			         "shard %u out of range: the cache has %u "
			         "shards",
			         (unsigned)shard, (unsigned)info.shards);
			fstream_reply_error(st, err);
			return true;
		}
	}
	struct freq *r = freq_new(st, REQ_WATCH);
	if (r == NULL || freq_set_scope(r, &info) != 0) {
		free(r);
		fstream_reply_error(st, "out of memory");
		return true;
	}
	r->shard = shard;
	r->group =
	    shards_group_of_scope(s->shards, info.full, info.full_len, shard);
	r->msg = *m;
	felix_msg_init(m, FELIX_MSG_NONE); /* taken */
	freq_enqueue(st, r);
	metric_add(s->m.requests, 1);
	int rv = shards_read(s->shards, r->group, on_watch_read, r);
	if (rv != SHARDS_OK) {
		on_watch_read(r, rv);
	}
	return true;
}

/* Server-opened uni streams carry subscriptions and watches: their user
 * data is the subscription. */
static struct fsub *find_sub(struct fconn *conn, int64_t sid)
{
	if ((sid & 0x3) != 0x3) {
		return NULL;
	}
	return quic_conn_stream_get_data(conn->qc, sid);
}

bool pubsub_stream_writable(struct felix_server *s, struct fconn *conn,
                            int64_t sid)
{
	(void)s;
	struct fsub *sub = find_sub(conn, sid);
	if (sub == NULL) {
		return false;
	}
	if (queue_drain(sub) && !sub->live && !sub->ending) {
		pump_add(sub);
	}
	return true;
}

bool pubsub_stream_close(struct felix_server *s, struct fconn *conn,
                         int64_t sid)
{
	(void)s;
	struct fsub *sub = find_sub(conn, sid);
	if (sub == NULL) {
		return false;
	}
	sub_free(sub);
	return true;
}

void pubsub_conn_closed(struct felix_server *s, struct fconn *conn)
{
	(void)s;
	while (conn->subs != NULL) {
		sub_free(conn->subs);
	}
}
