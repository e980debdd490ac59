/* Felix v1 client; see felix_client.h. */
#include "client/felix_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/quic_client.h"
#include "wire/felix_hash.h"

#define MAX_REQUEST_STREAMS 64

/* Request streams are pooled; a one-shot stream carries one request (a
 * long poll) and is finished once it is answered. */
enum cs_kind { CS_REQUEST = 0, CS_SUB, CS_RAW, CS_ONESHOT };

/* A request waiting for its answer on a request stream. */
struct pend {
	struct pend *next;
	bool ack; /* a publish: felix_client_ack_cb */
	bool has_id;
	uint64_t request_id;
	felix_client_ack_cb ack_cb;
	felix_client_reply_cb reply_cb;
	void *data;
};

/* A client-opened bidi stream. */
struct cstream {
	struct felix_client *c;
	struct cstream *next;
	int64_t id;
	enum cs_kind kind;
	bool authed;
	bool gone;
	struct wbuf rx;
	size_t rx_off;
	struct wbuf tx; /* bytes the transport refused for now */
	bool tx_fin;
	struct pend *head, *tail; /* CS_REQUEST */
	struct felix_sub *sub;    /* CS_SUB */
	struct felix_raw *raw;    /* CS_RAW */
};

/* A broker-opened uni stream (events). */
struct cuni {
	struct cuni *next;
	int64_t id;
	bool hello;
	uint64_t sub_id;
	struct felix_sub *sub;
	struct wbuf rx;
	size_t rx_off;
	size_t unconsumed;
	bool fin; /* the broker finished the stream */
};

struct felix_sub {
	struct felix_client *c;
	struct felix_sub *next;
	struct cstream *bidi;
	struct cuni *uni;
	struct felix_sub_handlers h;
	bool watch; /* a cache watch: wh.change / wh.lagged */
	struct felix_watch_handlers wh;
	void *data;
	uint64_t id;
	bool have_id;
	bool started;
	bool paused;
	bool ended;
};

struct felix_raw {
	struct cstream *cs;
	felix_raw_frame_cb frame;
	felix_raw_end_cb end;
	void *data;
	bool ended;
};

struct felix_client {
	uv_loop_t *loop;
	struct quic_client qc;
	struct quic_conn *conn;
	struct felix_client_config cfg;
	char host[256];
	char tenant[256];
	char token[4096];
	felix_client_ready_cb ready;
	felix_client_lost_cb lost;
	void *data;
	bool ready_done;
	bool open;
	bool closing;
	uint16_t server_flags;
	uint32_t server_features;
	unsigned authed;
	uint64_t next_request_id;
	struct cstream *req[MAX_REQUEST_STREAMS];
	struct cstream *streams; /* every client-opened stream */
	struct cuni *unis;
	struct felix_sub *subs;
};

void felix_client_config_init(struct felix_client_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->host = "127.0.0.1";
	cfg->port = 5000;
	cfg->offer_alpn = true;
	cfg->tenant = "t1";
	cfg->token = "dev";
	cfg->negotiate = true;
	cfg->client_flags = 0x007F;
	cfg->request_streams = 1;
}

uint16_t felix_client_server_flags(const struct felix_client *c)
{
	return c->server_flags;
}

uint32_t felix_client_server_features(const struct felix_client *c)
{
	return c->server_features;
}

bool felix_client_is_open(const struct felix_client *c)
{
	return c->open && !c->closing;
}

void felix_client_on_lost(struct felix_client *c, felix_client_lost_cb cb)
{
	c->lost = cb;
}

/* ---- streams ------------------------------------------------------------ */

static struct cstream *cs_open(struct felix_client *c, enum cs_kind kind)
{
	int64_t sid;
	if (!c->open || c->closing ||
	    quic_conn_open_bidi_stream(c->conn, &sid) != 0) {
		return NULL;
	}
	struct cstream *cs = calloc(1, sizeof *cs);
	if (cs == NULL) {
		quic_conn_stream_reset(c->conn, sid, 0);
		return NULL;
	}
	cs->c = c;
	cs->id = sid;
	cs->kind = kind;
	wbuf_init(&cs->rx);
	wbuf_init(&cs->tx);
	cs->next = c->streams;
	c->streams = cs;
	quic_conn_stream_set_data(c->conn, sid, cs);
	return cs;
}

static int cs_send(struct cstream *cs, const uint8_t *p, size_t len, bool fin)
{
	if (cs->gone || !cs->c->open) {
		return FELIX_CLIENT_ECLOSED;
	}
	if (cs->tx.len == 0) {
		int rv =
		    quic_conn_stream_write(cs->c->conn, cs->id, p, len, fin);
		if (rv == 0) {
			return 0;
		}
		if (rv != QUIC_EAGAIN) {
			return FELIX_CLIENT_ECLOSED;
		}
	}
	/* Kept until on_stream_writable: the caller paces itself with
	 * felix_client_backlog(). */
	if (len > 0 && wbuf_append(&cs->tx, p, len) != 0) {
		return FELIX_CLIENT_ENOMEM;
	}
	cs->tx_fin = cs->tx_fin || fin;
	return 0;
}

static void cs_flush(struct cstream *cs)
{
	if (cs->gone || cs->tx.len == 0 || !cs->c->open) {
		return;
	}
	int rv = quic_conn_stream_write(cs->c->conn, cs->id, cs->tx.data,
	                                cs->tx.len, cs->tx_fin);
	if (rv != QUIC_EAGAIN) {
		wbuf_free(&cs->tx);
	}
}

size_t felix_client_backlog(const struct felix_client *c)
{
	size_t n = 0;
	for (const struct cstream *cs = c->streams; cs != NULL; cs = cs->next) {
		n += cs->tx.len;
	}
	return n;
}

static int send_msg(struct cstream *cs, const struct felix_msg *m, bool fin)
{
	struct wbuf w;
	wbuf_init(&w);
	if (felix_msg_encode_frame(m, &w) != 0) {
		wbuf_free(&w);
		return FELIX_CLIENT_EINVAL;
	}
	int rv = cs_send(cs, w.data, w.len, fin);
	wbuf_free(&w);
	return rv;
}

static int send_auth(struct cstream *cs)
{
	struct felix_client *c = cs->c;
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_AUTH);
	m.u.auth.tenant_id = c->tenant;
	m.u.auth.token = c->token;
	m.u.auth.has_client_flags = c->cfg.negotiate;
	m.u.auth.client_flags = c->cfg.client_flags;
	m.u.auth.has_client_features = c->cfg.negotiate;
	m.u.auth.client_features = c->cfg.client_features;
	return send_msg(cs, &m, false);
}

static void pend_fail(struct pend *p, int status, const char *message)
{
	if (p->ack) {
		if (p->ack_cb != NULL) {
			p->ack_cb(p->data, status, message);
		}
	} else if (p->reply_cb != NULL) {
		p->reply_cb(p->data, status, NULL, message);
	}
	free(p);
}

/* ---- subscriptions ------------------------------------------------------- */

static void sub_unlink(struct felix_sub *sub)
{
	struct felix_sub **pp = &sub->c->subs;
	while (*pp != NULL && *pp != sub) {
		pp = &(*pp)->next;
	}
	if (*pp == sub) {
		*pp = sub->next;
	}
}

static void sub_end(struct felix_sub *sub, const char *why)
{
	if (sub->ended) {
		return;
	}
	sub->ended = true;
	if (sub->bidi != NULL) {
		sub->bidi->sub = NULL;
	}
	if (sub->uni != NULL) {
		sub->uni->sub = NULL;
	}
	sub_unlink(sub);
	if (sub->started && sub->h.ended != NULL) {
		sub->h.ended(sub->data, sub, why);
	}
	free(sub);
}

/* Refuses a subscription that never started. */
static void sub_refuse(struct felix_sub *sub, int status,
                       const struct felix_msg *answer, const char *message)
{
	if (sub->ended) {
		return;
	}
	if (sub->h.started != NULL) {
		sub->h.started(sub->data, sub, status, answer, message);
	}
	sub_end(sub, message);
}

/* A cache watch's frames: cache_event and cache_watch_lagged (JSON). */
static void watch_deliver(struct felix_sub *sub, uint16_t flags,
                          const uint8_t *p, uint32_t len)
{
	struct felix_msg m;
	char err[128];
	if (flags != 0 || felix_msg_decode(p, len, &m, err, sizeof err) != 0) {
		return;
	}
	if (m.type == FELIX_MSG_CACHE_EVENT && sub->wh.change != NULL) {
		const struct felix_msg_cache_event *e = &m.u.cache_event;
		sub->wh.change(
		    sub->data, sub, e->key,
		    e->has_value ? (e->value.data != NULL ? e->value.data
		                                          : (const uint8_t *)"")
		                 : NULL,
		    e->value.len, e->offset,
		    e->has_expires_at_millis ? e->expires_at_millis : 0);
	} else if (m.type == FELIX_MSG_CACHE_WATCH_LAGGED &&
	           sub->wh.lagged != NULL) {
		sub->wh.lagged(sub->data, sub,
		               m.u.cache_watch_lagged.resume_from);
	}
	felix_msg_free(&m);
}

static void uni_deliver(struct cuni *u, uint16_t flags, const uint8_t *p,
                        uint32_t len)
{
	struct felix_sub *sub = u->sub;
	if (sub->watch) {
		watch_deliver(sub, flags, p, len);
		return;
	}
	struct felix_view small[64];
	struct felix_view *v = small;
	uint32_t n = 0;
	bool has_offset = false;
	uint64_t base = 0;
	char err[128];
	if (flags == 0) {
		struct felix_msg m;
		if (felix_msg_decode(p, len, &m, err, sizeof err) != 0) {
			return;
		}
		if (m.type == FELIX_MSG_EVENT) {
			struct felix_view one = {m.u.event.payload.data,
			                         m.u.event.payload.len};
			if (sub->h.events != NULL) {
				sub->h.events(sub->data, sub,
				              m.u.event.has_offset,
				              m.u.event.offset, &one, 1);
			}
		} else if (m.type == FELIX_MSG_EVENT_BATCH) {
			size_t cnt = m.u.event_batch.payloads.count;
			if (cnt > 64) {
				v = malloc(cnt * sizeof *v);
			}
			if (v != NULL) {
				for (size_t i = 0; i < cnt; i++) {
					v[i].data =
					    m.u.event_batch.payloads.items[i]
					        .data;
					v[i].len =
					    m.u.event_batch.payloads.items[i]
					        .len;
				}
				if (sub->h.events != NULL) {
					sub->h.events(
					    sub->data, sub,
					    m.u.event_batch.has_base_offset,
					    m.u.event_batch.base_offset, v,
					    (uint32_t)cnt);
				}
				if (v != small) {
					free(v);
				}
			}
		}
		felix_msg_free(&m);
		return;
	}
	struct felix_event_batch e;
	if (felix_event_batch_decode(flags, p, len, NULL, &e, err,
	                             sizeof err) != 0) {
		return;
	}
	has_offset = e.has_base_offset;
	base = e.base_offset;
	if (e.records.count > 64) {
		v = malloc(e.records.count * sizeof *v);
		if (v == NULL) {
			return;
		}
	}
	struct felix_records_iter it;
	felix_records_iter_init(&it, &e.records);
	while (felix_records_next(&it, &v[n])) {
		n++;
	}
	if (sub->h.events != NULL) {
		sub->h.events(sub->data, sub, has_offset, base, v, n);
	}
	if (v != small) {
		free(v);
	}
}

/* Decodes the frames buffered on a uni stream. */
static void uni_process(struct felix_client *c, struct cuni *u)
{
	while (u->rx_off < u->rx.len) {
		struct felix_frame fr;
		char err[128];
		size_t need;
		if (u->hello && u->sub == NULL) {
			return; /* wait for the subscription to be known */
		}
		enum felix_frame_result r = felix_frame_decode(
		    u->rx.data + u->rx_off, u->rx.len - u->rx_off,
		    FELIX_FRAME_DEFAULT_MAX_PAYLOAD + 1024, &fr, &need, err,
		    sizeof err);
		if (r != FELIX_FRAME_COMPLETE) {
			break;
		}
		u->rx_off += fr.frame_len;
		if (!u->hello) {
			struct felix_msg m;
			if (fr.kind != FELIX_FRAME_JSON ||
			    felix_msg_decode(fr.payload, fr.header.length, &m,
			                     err, sizeof err) != 0) {
				continue;
			}
			if (m.type == FELIX_MSG_EVENT_STREAM_HELLO) {
				u->hello = true;
				u->sub_id = m.u.hello.subscription_id;
				for (struct felix_sub *s = c->subs; s != NULL;
				     s = s->next) {
					if (s->have_id && s->id == u->sub_id &&
					    s->uni == NULL) {
						s->uni = u;
						u->sub = s;
						break;
					}
				}
			}
			felix_msg_free(&m);
			continue;
		}
		uni_deliver(u, fr.header.flags, fr.payload, fr.header.length);
		if (u->sub == NULL) {
			/* The subscription was closed by its callback. */
			break;
		}
	}
	if (u->rx_off == u->rx.len) {
		wbuf_reset(&u->rx);
		u->rx_off = 0;
	} else if (u->rx_off > (256u << 10)) {
		memmove(u->rx.data, u->rx.data + u->rx_off,
		        u->rx.len - u->rx_off);
		u->rx.len -= u->rx_off;
		u->rx_off = 0;
	}
	bool hold = u->sub != NULL ? u->sub->paused : u->hello;
	if (!hold && u->unconsumed > 0 && c->open) {
		quic_conn_stream_consume(c->conn, u->id, u->unconsumed);
		u->unconsumed = 0;
	}
	/* Finished and fully read: the subscription is over (the stream
	 * itself goes when the transport lets go of it). */
	if (u->fin && u->rx_off == u->rx.len && u->sub != NULL) {
		struct felix_sub *sub = u->sub;
		u->sub = NULL;
		sub->uni = NULL;
		sub_end(sub, "event stream finished");
	}
}

static void uni_free(struct felix_client *c, struct cuni *u)
{
	struct cuni **pp = &c->unis;
	while (*pp != NULL && *pp != u) {
		pp = &(*pp)->next;
	}
	if (*pp == u) {
		*pp = u->next;
	}
	if (u->unconsumed > 0 && c->conn != NULL) {
		quic_conn_stream_consume(c->conn, u->id, u->unconsumed);
	}
	wbuf_free(&u->rx);
	free(u);
}

uint64_t felix_sub_id(const struct felix_sub *sub)
{
	return sub->id;
}

void felix_sub_set_paused(struct felix_sub *sub, bool paused)
{
	sub->paused = paused;
	if (!paused && sub->uni != NULL) {
		uni_process(sub->c, sub->uni);
	}
}

void felix_sub_close(struct felix_sub *sub)
{
	struct felix_client *c = sub->c;
	if (sub->uni != NULL && c->open) {
		quic_conn_stream_reset(c->conn, sub->uni->id, 0);
	}
	sub_end(sub, "closed by the client");
}

/* ---- answers ------------------------------------------------------------- */

/* The request an answer belongs to: by request_id, else the oldest. */
static struct pend *take_pend(struct cstream *cs, bool has_id, uint64_t id)
{
	struct pend **pp = &cs->head, *prev = NULL;
	while (*pp != NULL) {
		struct pend *p = *pp;
		if (!has_id || (p->has_id && p->request_id == id)) {
			*pp = p->next;
			if (cs->tail == p) {
				cs->tail = prev;
			}
			return p;
		}
		prev = p;
		pp = &p->next;
	}
	return NULL;
}

static void ready_once(struct felix_client *c, int status, const char *msg)
{
	if (c->ready_done) {
		return;
	}
	c->ready_done = true;
	if (c->ready != NULL) {
		c->ready(c->data, c, status, msg);
	}
}

static void on_auth_answer(struct cstream *cs, const struct felix_msg *m)
{
	struct felix_client *c = cs->c;
	if (m->type == FELIX_MSG_AUTH_OK) {
		c->server_flags = m->u.auth_ok.server_flags;
		c->server_features = m->u.auth_ok.has_server_features
		                         ? m->u.auth_ok.server_features
		                         : 0;
	} else if (m->type == FELIX_MSG_OK) {
		c->server_flags = FELIX_FLAGS_ORIGINAL_V1;
		c->server_features = 0;
	} else {
		const char *msg = m->type == FELIX_MSG_ERROR
		                      ? m->u.error.message
		                      : "unexpected answer to auth";
		if (cs->kind == CS_REQUEST) {
			ready_once(c, FELIX_CLIENT_EREFUSED, msg);
			if (c->conn != NULL) {
				quic_conn_close(c->conn, 0, "auth refused");
			}
		} else if (cs->kind == CS_SUB && cs->sub != NULL) {
			sub_refuse(cs->sub, FELIX_CLIENT_EREFUSED, m, msg);
		} else if (cs->kind == CS_ONESHOT) {
			struct pend *p = cs->head;
			cs->head = cs->tail = NULL;
			while (p != NULL) {
				struct pend *n = p->next;
				pend_fail(p, FELIX_CLIENT_EREFUSED, msg);
				p = n;
			}
		}
		return;
	}
	cs->authed = true;
	if (cs->kind == CS_REQUEST && ++c->authed == c->cfg.request_streams) {
		ready_once(c, 0, "ready");
	}
}

static void on_request_answer(struct cstream *cs, const struct felix_msg *m)
{
	bool has_id = false;
	uint64_t id = 0;
	int status = 0;
	const char *message = NULL;
	switch (m->type) {
	case FELIX_MSG_PUBLISH_OK:
		has_id = true;
		id = m->u.publish_ok.request_id;
		break;
	case FELIX_MSG_PUBLISH_ERROR:
		has_id = true;
		id = m->u.publish_error.request_id;
		status = FELIX_CLIENT_EREFUSED;
		message = m->u.publish_error.message;
		break;
	case FELIX_MSG_CACHE_OK:
		has_id = true;
		id = m->u.cache_ok.request_id;
		break;
	case FELIX_MSG_CACHE_VALUE:
		has_id = m->u.cache_value.has_request_id;
		id = m->u.cache_value.request_id;
		break;
	case FELIX_MSG_COUNTER_VALUE:
		has_id = true;
		id = m->u.counter_value.request_id;
		break;
	case FELIX_MSG_STREAM_SHARDS_VIEW:
		has_id = true;
		id = m->u.stream_shards_view.request_id;
		break;
	case FELIX_MSG_PUBLISH_REFUSED:
		has_id = true;
		id = m->u.publish_refused.request_id;
		status = FELIX_CLIENT_EREFUSED;
		message = m->u.publish_refused.message;
		break;
	case FELIX_MSG_PRODUCER_INIT_OK:
		has_id = true;
		id = m->u.producer_init_ok.request_id;
		break;
	case FELIX_MSG_GROUP_RECORDS:
		has_id = true;
		id = m->u.group_records.request_id;
		break;
	case FELIX_MSG_GROUP_DEAD_LETTER_LIST:
		has_id = true;
		id = m->u.group_dead_letter_list.request_id;
		break;
	case FELIX_MSG_ERROR:
		status = FELIX_CLIENT_EREFUSED;
		message = m->u.error.message;
		break;
	case FELIX_MSG_OK:
		break;
	default:
		status = FELIX_CLIENT_EPROTO;
		message = "unexpected message";
		break;
	}
	struct pend *p = take_pend(cs, has_id, id);
	if (p == NULL) {
		return;
	}
	if (p->ack) {
		if (p->ack_cb != NULL) {
			p->ack_cb(p->data, status, message);
		}
	} else if (p->reply_cb != NULL) {
		/* A refusal with a reason is handed over too. */
		bool give = status == 0 || m->type == FELIX_MSG_PUBLISH_REFUSED;
		p->reply_cb(p->data, status, give ? m : NULL,
		            message ? message : "ok");
	}
	free(p);
	if (cs->kind == CS_ONESHOT && cs->head == NULL) {
		cs_send(cs, NULL, 0, true); /* answered: our side is done */
	}
}

static void on_sub_answer(struct cstream *cs, const struct felix_msg *m)
{
	struct felix_client *c = cs->c;
	struct felix_sub *sub = cs->sub;
	if (sub == NULL) {
		return;
	}
	enum felix_msg_type ok =
	    sub->watch ? FELIX_MSG_CACHE_WATCH_STARTED : FELIX_MSG_SUBSCRIBED;
	if (m->type != ok) {
		const char *msg = m->type == FELIX_MSG_ERROR
		                      ? m->u.error.message
		                  : m->type == FELIX_MSG_SUBSCRIBE_CURSOR_ERROR
		                      ? "subscribe_cursor_error"
		                      : "unexpected answer to subscribe";
		sub_refuse(sub, FELIX_CLIENT_EREFUSED, m, msg);
		return;
	}
	sub->id = sub->watch ? m->u.cache_watch_started.subscription_id
	                     : m->u.subscribed.subscription_id;
	sub->have_id = true;
	sub->started = true;
	/* Our side of the request stream is done; the subscription lives
	 * on the broker's uni stream. */
	cs_send(cs, NULL, 0, true);
	for (struct cuni *u = c->unis; u != NULL; u = u->next) {
		if (u->hello && u->sub == NULL && u->sub_id == sub->id) {
			u->sub = sub;
			sub->uni = u;
			break;
		}
	}
	if (sub->h.started != NULL) {
		sub->h.started(sub->data, sub, 0, m, "subscribed");
	}
	/* The callback may have closed it. */
	for (struct felix_sub *s = c->subs; s != NULL; s = s->next) {
		if (s == sub && sub->uni != NULL) {
			uni_process(c, sub->uni);
			break;
		}
	}
}

static void cs_frame(struct cstream *cs, const struct felix_frame *fr)
{
	struct felix_client *c = cs->c;
	if (cs->kind == CS_RAW) {
		struct felix_raw *raw = cs->raw;
		if (raw != NULL && raw->frame != NULL) {
			raw->frame(raw->data, raw, fr->header.flags,
			           fr->payload, fr->header.length);
		}
		return;
	}
	if (fr->kind == FELIX_FRAME_PUBLISH_ACK && cs->kind == CS_REQUEST) {
		struct felix_publish_ack a;
		char err[128];
		if (felix_publish_ack_decode(fr->header.flags, fr->payload,
		                             fr->header.length, &a, err,
		                             sizeof err) != 0) {
			return;
		}
		struct pend *p = take_pend(cs, true, a.request_id);
		if (p == NULL) {
			return;
		}
		char msg[512];
		snprintf(msg, sizeof msg, "%.*s", (int)a.message.len,
		         (const char *)a.message.data);
		if (p->ack_cb != NULL) {
			p->ack_cb(p->data,
			          a.status == FELIX_ACK_STATUS_OK
			              ? 0
			              : FELIX_CLIENT_EREFUSED,
			          a.status == FELIX_ACK_STATUS_OK ? "ok" : msg);
		}
		free(p);
		return;
	}
	if (fr->kind != FELIX_FRAME_JSON) {
		return;
	}
	struct felix_msg m;
	char err[256];
	if (felix_msg_decode(fr->payload, fr->header.length, &m, err,
	                     sizeof err) != 0) {
		return;
	}
	if (!cs->authed) {
		on_auth_answer(cs, &m);
	} else if (cs->kind == CS_REQUEST || cs->kind == CS_ONESHOT) {
		on_request_answer(cs, &m);
	} else {
		on_sub_answer(cs, &m);
	}
	felix_msg_free(&m);
	(void)c;
}

static void cs_process(struct cstream *cs)
{
	while (!cs->gone && cs->rx_off < cs->rx.len) {
		struct felix_frame fr;
		char err[128];
		size_t need;
		enum felix_frame_result r = felix_frame_decode(
		    cs->rx.data + cs->rx_off, cs->rx.len - cs->rx_off,
		    FELIX_FRAME_DEFAULT_MAX_PAYLOAD + 1024, &fr, &need, err,
		    sizeof err);
		if (r != FELIX_FRAME_COMPLETE) {
			break;
		}
		cs->rx_off += fr.frame_len;
		cs_frame(cs, &fr);
	}
	if (cs->rx_off == cs->rx.len) {
		wbuf_reset(&cs->rx);
		cs->rx_off = 0;
	}
}

/* The stream is gone: fail what waits on it. */
static void cs_gone(struct cstream *cs, const char *why)
{
	struct felix_client *c = cs->c;
	if (cs->gone) {
		return;
	}
	cs->gone = true;
	struct pend *p = cs->head;
	cs->head = cs->tail = NULL;
	while (p != NULL) {
		struct pend *n = p->next;
		pend_fail(p, FELIX_CLIENT_ECLOSED, why);
		p = n;
	}
	if (cs->kind == CS_SUB && cs->sub != NULL && !cs->sub->started) {
		sub_refuse(cs->sub, FELIX_CLIENT_ECLOSED, NULL, why);
	}
	if (cs->kind == CS_SUB && cs->sub != NULL) {
		cs->sub->bidi = NULL;
		cs->sub = NULL;
	}
	if (cs->kind == CS_RAW && cs->raw != NULL) {
		struct felix_raw *raw = cs->raw;
		cs->raw = NULL;
		if (!raw->ended && raw->end != NULL) {
			raw->ended = true;
			raw->end(raw->data, raw, why);
		}
		free(raw);
	}
	for (unsigned i = 0; i < MAX_REQUEST_STREAMS; i++) {
		if (c->req[i] == cs) {
			c->req[i] = NULL;
		}
	}
}

static void cs_free(struct felix_client *c, struct cstream *cs)
{
	struct cstream **pp = &c->streams;
	while (*pp != NULL && *pp != cs) {
		pp = &(*pp)->next;
	}
	if (*pp == cs) {
		*pp = cs->next;
	}
	wbuf_free(&cs->rx);
	wbuf_free(&cs->tx);
	free(cs);
}

/* ---- QUIC callbacks ------------------------------------------------------ */

static void on_conn_open(struct quic_conn *qc)
{
	struct felix_client *c = quic_conn_owner(qc);
	c->open = true;
	for (unsigned i = 0; i < c->cfg.request_streams; i++) {
		struct cstream *cs = cs_open(c, CS_REQUEST);
		if (cs == NULL || send_auth(cs) != 0) {
			ready_once(c, FELIX_CLIENT_ECLOSED,
			           "cannot open a request stream");
			quic_conn_close(qc, 0, "cannot open a request stream");
			return;
		}
		c->req[i] = cs;
	}
}

static void on_stream_open(struct quic_conn *qc, int64_t sid, bool bidi)
{
	struct felix_client *c = quic_conn_owner(qc);
	if (bidi) {
		return;
	}
	struct cuni *u = calloc(1, sizeof *u);
	if (u == NULL) {
		quic_conn_stream_reset(qc, sid, 0);
		return;
	}
	u->id = sid;
	wbuf_init(&u->rx);
	u->next = c->unis;
	c->unis = u;
	quic_conn_stream_set_data(qc, sid, u);
	quic_conn_stream_set_manual_consume(qc, sid, true);
}

static void on_stream_data(struct quic_conn *qc, int64_t sid,
                           const uint8_t *data, size_t len, bool fin)
{
	struct felix_client *c = quic_conn_owner(qc);
	void *p = quic_conn_stream_get_data(qc, sid);
	(void)fin;
	if (p == NULL) {
		if ((sid & 0x2) != 0) {
			quic_conn_stream_consume(qc, sid, len);
		}
		return;
	}
	if ((sid & 0x2) != 0) {
		struct cuni *u = p;
		u->fin = u->fin || fin;
		wbuf_append(&u->rx, data, len);
		u->unconsumed += len;
		uni_process(c, u);
		return;
	}
	struct cstream *cs = p;
	wbuf_append(&cs->rx, data, len);
	cs_process(cs);
}

static void on_stream_close(struct quic_conn *qc, int64_t sid,
                            uint64_t app_error)
{
	struct felix_client *c = quic_conn_owner(qc);
	void *p = quic_conn_stream_get_data(qc, sid);
	(void)app_error;
	if (p == NULL) {
		return;
	}
	quic_conn_stream_set_data(qc, sid, NULL);
	if ((sid & 0x2) != 0) {
		struct cuni *u = p;
		if (u->sub != NULL) {
			struct felix_sub *sub = u->sub;
			u->sub = NULL;
			sub->uni = NULL;
			sub_end(sub, "event stream ended");
		}
		uni_free(c, u);
		return;
	}
	struct cstream *cs = p;
	cs_gone(cs, "stream closed");
	cs_free(c, cs);
}

static void on_stream_writable(struct quic_conn *qc, int64_t sid)
{
	void *p = quic_conn_stream_get_data(qc, sid);
	if (p != NULL && (sid & 0x2) == 0) {
		cs_flush(p);
	}
}

static void on_stream_reset(struct quic_conn *qc, int64_t sid,
                            uint64_t app_error)
{
	(void)app_error;
	struct felix_client *c = quic_conn_owner(qc);
	void *p = quic_conn_stream_get_data(qc, sid);
	if (p == NULL || (sid & 0x2) == 0) {
		return;
	}
	struct cuni *u = p;
	if (u->sub != NULL) {
		struct felix_sub *sub = u->sub;
		u->sub = NULL;
		sub->uni = NULL;
		sub_end(sub, "event stream reset by the broker");
	}
	(void)c;
}

static void on_conn_close(struct quic_conn *qc,
                          const struct quic_close_info *info)
{
	struct felix_client *c = quic_conn_owner(qc);
	bool was_ready = c->ready_done;
	c->open = false;
	/* Streams were closed (on_stream_close) before this. */
	while (c->subs != NULL) {
		sub_end(c->subs, info->message);
	}
	ready_once(c, FELIX_CLIENT_ECLOSED, info->message);
	if (was_ready && c->lost != NULL && !c->closing) {
		c->lost(c->data, c, info->message);
	}
	c->conn = NULL;
}

static void on_closed(struct quic_client *qcl)
{
	struct felix_client *c = qcl->data;
	while (c->streams != NULL) {
		struct cstream *cs = c->streams;
		cs_gone(cs, "client closed");
		cs_free(c, cs);
	}
	while (c->unis != NULL) {
		uni_free(c, c->unis);
	}
	memset(c->token, 0, sizeof c->token);
	free(c);
}

/* ---- lifecycle ------------------------------------------------------------
 */

int felix_client_open(struct felix_client **out, uv_loop_t *loop,
                      const struct felix_client_config *cfg,
                      felix_client_ready_cb ready, void *data, char *err,
                      size_t errlen)
{
	if (cfg->request_streams == 0 ||
	    cfg->request_streams > MAX_REQUEST_STREAMS ||
	    strlen(cfg->tenant) >= 256 || strlen(cfg->token) >= 4096 ||
	    strlen(cfg->host) >= 256) {
		snprintf(err, errlen, "invalid client configuration");
		return -1;
	}
	struct felix_client *c = calloc(1, sizeof *c);
	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->loop = loop;
	c->cfg = *cfg;
	strcpy(c->host, cfg->host);
	strcpy(c->tenant, cfg->tenant);
	strcpy(c->token, cfg->token);
	c->cfg.host = c->host;
	c->cfg.tenant = c->tenant;
	c->cfg.token = c->token;
	c->ready = ready;
	c->data = data;
	c->server_flags = FELIX_FLAGS_ORIGINAL_V1;

	struct quic_client_config qcfg;
	static const char *alpn[] = {"felix/1"};
	quic_client_config_init(&qcfg);
	qcfg.ca_file = cfg->ca_file;
	qcfg.server_name = cfg->server_name;
	qcfg.alpn = alpn;
	qcfg.alpn_count = cfg->offer_alpn ? 1 : 0;
	qcfg.limits.initial_max_data = 64u << 20;
	qcfg.limits.initial_max_stream_data = 16u << 20;
	qcfg.limits.max_window = 256u << 20;
	qcfg.limits.max_stream_window = 64u << 20;
	qcfg.limits.stream_send_buf_max = 8u << 20;
	qcfg.limits.conn_send_buf_max = 64u << 20;
	qcfg.limits.idle_timeout_ms = 30000;
	qcfg.limits.keepalive_ms = 10000;
	qcfg.callbacks.on_conn_open = on_conn_open;
	qcfg.callbacks.on_stream_open = on_stream_open;
	qcfg.callbacks.on_stream_data = on_stream_data;
	qcfg.callbacks.on_stream_reset = on_stream_reset;
	qcfg.callbacks.on_stream_writable = on_stream_writable;
	qcfg.callbacks.on_stream_close = on_stream_close;
	qcfg.callbacks.on_conn_close = on_conn_close;
	qcfg.owner = c;
	if (quic_client_init(&c->qc, loop, &qcfg, err, errlen) != 0) {
		free(c);
		return -1;
	}
	c->qc.data = c;
	if (quic_client_connect(&c->qc, c->host, cfg->port, &c->conn, err,
	                        errlen) != 0) {
		c->closing = true;
		quic_client_close(&c->qc, on_closed);
		return -1;
	}
	*out = c;
	return 0;
}

void felix_client_close(struct felix_client *c)
{
	if (c->closing) {
		return;
	}
	c->closing = true;
	quic_client_close(&c->qc, on_closed);
}

static void on_run_timer(uv_timer_t *t)
{
	*(bool *)t->data = true;
}

static void on_timer_closed(uv_handle_t *h)
{
	(void)h;
}

int felix_client_run(uv_loop_t *loop, const bool *done, unsigned timeout_ms)
{
	uv_timer_t t;
	bool expired = false;
	if (timeout_ms > 0) {
		uv_timer_init(loop, &t);
		t.data = &expired;
		uv_timer_start(&t, on_run_timer, timeout_ms, 0);
	}
	while (!*done && !expired) {
		if (uv_run(loop, UV_RUN_ONCE) == 0 && !*done) {
			break; /* nothing left that could set it */
		}
	}
	if (timeout_ms > 0) {
		uv_timer_stop(&t);
		uv_close((uv_handle_t *)&t, on_timer_closed);
		uv_run(loop, UV_RUN_NOWAIT);
	}
	return *done ? 0 : -1;
}

/* ---- requests -------------------------------------------------------------
 */

static struct cstream *request_stream(struct felix_client *c, const char *by)
{
	unsigned n = c->cfg.request_streams;
	unsigned i =
	    by != NULL
	        ? (unsigned)(felix_hash64((const uint8_t *)by, strlen(by)) % n)
	        : (unsigned)(c->next_request_id % n);
	struct cstream *cs = c->req[i];
	if (cs == NULL || cs->gone || !cs->authed) {
		return NULL;
	}
	return cs;
}

static struct pend *pend_add(struct cstream *cs, bool ack, bool has_id,
                             uint64_t id)
{
	struct pend *p = calloc(1, sizeof *p);
	if (p == NULL) {
		return NULL;
	}
	p->ack = ack;
	p->has_id = has_id;
	p->request_id = id;
	p->next = NULL;
	if (cs->tail != NULL) {
		cs->tail->next = p;
	} else {
		cs->head = p;
	}
	cs->tail = p;
	return p;
}

static void pend_drop_last(struct cstream *cs, struct pend *p)
{
	struct pend **pp = &cs->head, *prev = NULL;
	while (*pp != NULL && *pp != p) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (*pp == p) {
		*pp = p->next;
		if (cs->tail == p) {
			cs->tail = prev;
		}
	}
	free(p);
}

static int publish(struct felix_client *c, bool json, const char *ns,
                   const char *stream, bool keyed, const uint8_t *key,
                   size_t klen, const struct felix_view *payloads,
                   uint32_t count, enum felix_ack_mode ack,
                   felix_client_ack_cb cb, void *data)
{
	struct cstream *cs = request_stream(c, stream);
	if (cs == NULL) {
		return FELIX_CLIENT_ECLOSED;
	}
	uint64_t id = ++c->next_request_id;
	bool binary = !json && (c->server_flags & FELIX_FLAG_PUBLISH_BATCH) &&
	              (ack == FELIX_ACK_NONE ||
	               (c->server_flags & FELIX_FLAG_PUBLISH_ACKED)) &&
	              (!keyed || (c->server_flags & FELIX_FLAG_PUBLISH_KEYED));
	struct wbuf w;
	wbuf_init(&w);
	int rv;
	if (binary) {
		struct felix_publish_batch b;
		memset(&b, 0, sizeof b);
		b.acked = ack != FELIX_ACK_NONE;
		b.request_id = id;
		b.ack_mode = ack;
		b.keyed = keyed;
		b.key.data = key;
		b.key.len = klen;
		b.tenant_id.data = (const uint8_t *)c->tenant;
		b.tenant_id.len = strlen(c->tenant);
		b.namespace.data = (const uint8_t *)ns;
		b.namespace.len = strlen(ns);
		b.stream.data = (const uint8_t *)stream;
		b.stream.len = strlen(stream);
		rv = felix_publish_batch_encode(&w, &b, payloads, count);
	} else {
		struct felix_msg m;
		struct felix_bytes *items =
		    calloc(count ? count : 1, sizeof *items);
		if (items == NULL) {
			return FELIX_CLIENT_ENOMEM;
		}
		for (uint32_t i = 0; i < count; i++) {
			items[i].data = (uint8_t *)payloads[i].data;
			items[i].len = payloads[i].len;
		}
		felix_msg_init(&m, FELIX_MSG_PUBLISH_BATCH);
		m.u.publish_batch.tenant_id = c->tenant;
		m.u.publish_batch.namespace = (char *)ns;
		m.u.publish_batch.stream = (char *)stream;
		m.u.publish_batch.payloads.items = items;
		m.u.publish_batch.payloads.count = count;
		m.u.publish_batch.has_key = keyed;
		m.u.publish_batch.key.data = (uint8_t *)key;
		m.u.publish_batch.key.len = klen;
		m.u.publish_batch.has_request_id = true;
		m.u.publish_batch.request_id = id;
		m.u.publish_batch.has_ack = true;
		m.u.publish_batch.ack = ack;
		rv = felix_msg_encode_frame(&m, &w);
		free(items);
	}
	if (rv != 0) {
		wbuf_free(&w);
		return FELIX_CLIENT_EINVAL;
	}
	struct pend *p = NULL;
	if (ack != FELIX_ACK_NONE) {
		p = pend_add(cs, true, true, id);
		if (p == NULL) {
			wbuf_free(&w);
			return FELIX_CLIENT_ENOMEM;
		}
		p->ack_cb = cb;
		p->data = data;
	}
	rv = cs_send(cs, w.data, w.len, false);
	wbuf_free(&w);
	if (rv != 0 && p != NULL && !cs->gone) {
		pend_drop_last(cs, p);
	}
	return rv;
}

int felix_client_publish(struct felix_client *c, const char *ns,
                         const char *stream, bool keyed, const uint8_t *key,
                         size_t klen, const struct felix_view *payloads,
                         uint32_t count, enum felix_ack_mode ack,
                         felix_client_ack_cb cb, void *data)
{
	return publish(c, false, ns, stream, keyed, key, klen, payloads, count,
	               ack, cb, data);
}

int felix_client_publish_json(struct felix_client *c, const char *ns,
                              const char *stream, bool keyed,
                              const uint8_t *key, size_t klen,
                              const struct felix_view *payloads, uint32_t count,
                              enum felix_ack_mode ack, felix_client_ack_cb cb,
                              void *data)
{
	return publish(c, true, ns, stream, keyed, key, klen, payloads, count,
	               ack, cb, data);
}

/* Sends a JSON request that carries `id` and waits for its answer. */
static int request(struct felix_client *c, struct felix_msg *m, uint64_t id,
                   felix_client_reply_cb cb, void *data)
{
	struct cstream *cs = request_stream(c, NULL);
	if (cs == NULL) {
		return FELIX_CLIENT_ECLOSED;
	}
	struct pend *p = pend_add(cs, false, true, id);
	if (p == NULL) {
		return FELIX_CLIENT_ENOMEM;
	}
	p->reply_cb = cb;
	p->data = data;
	int rv = send_msg(cs, m, false);
	if (rv != 0 && !cs->gone) {
		pend_drop_last(cs, p);
	}
	return rv;
}

int felix_client_cache_put(struct felix_client *c, const char *ns,
                           const char *cache, const char *key,
                           const uint8_t *value, size_t len, bool has_ttl,
                           uint64_t ttl_ms, felix_client_reply_cb cb,
                           void *data)
{
	struct felix_msg m;
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_CACHE_PUT);
	m.u.cache_put.tenant_id = c->tenant;
	m.u.cache_put.namespace = (char *)ns;
	m.u.cache_put.cache = (char *)cache;
	m.u.cache_put.key = (char *)key;
	m.u.cache_put.value.data = (uint8_t *)value;
	m.u.cache_put.value.len = len;
	m.u.cache_put.has_request_id = true;
	m.u.cache_put.request_id = id;
	m.u.cache_put.has_ttl_ms = has_ttl;
	m.u.cache_put.ttl_ms = ttl_ms;
	return request(c, &m, id, cb, data);
}

int felix_client_cache_get(struct felix_client *c, const char *ns,
                           const char *cache, const char *key,
                           felix_client_reply_cb cb, void *data)
{
	struct felix_msg m;
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_CACHE_GET);
	m.u.cache_get.tenant_id = c->tenant;
	m.u.cache_get.namespace = (char *)ns;
	m.u.cache_get.cache = (char *)cache;
	m.u.cache_get.key = (char *)key;
	m.u.cache_get.has_request_id = true;
	m.u.cache_get.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_cache_delete(struct felix_client *c, const char *ns,
                              const char *cache, const char *key,
                              felix_client_reply_cb cb, void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_CACHE_DELETE)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_CACHE_DELETE);
	m.u.cache_delete.tenant_id = c->tenant;
	m.u.cache_delete.namespace = (char *)ns;
	m.u.cache_delete.cache = (char *)cache;
	m.u.cache_delete.key = (char *)key;
	m.u.cache_delete.has_request_id = true;
	m.u.cache_delete.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_counter_add(struct felix_client *c, const char *ns,
                             const char *cache, const char *key, int64_t delta,
                             felix_client_reply_cb cb, void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_COUNTERS)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_COUNTER_ADD);
	m.u.counter_add.tenant_id = c->tenant;
	m.u.counter_add.namespace = (char *)ns;
	m.u.counter_add.cache = (char *)cache;
	m.u.counter_add.key = (char *)key;
	m.u.counter_add.delta = delta;
	m.u.counter_add.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_counter_get(struct felix_client *c, const char *ns,
                             const char *cache, const char *key,
                             felix_client_reply_cb cb, void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_COUNTERS)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_COUNTER_GET);
	m.u.counter_get.tenant_id = c->tenant;
	m.u.counter_get.namespace = (char *)ns;
	m.u.counter_get.cache = (char *)cache;
	m.u.counter_get.key = (char *)key;
	m.u.counter_get.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_stream_shards(struct felix_client *c, const char *ns,
                               const char *stream, felix_client_reply_cb cb,
                               void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_STREAM_SHARDS)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_STREAM_SHARDS);
	m.u.stream_shards.tenant_id = c->tenant;
	m.u.stream_shards.namespace = (char *)ns;
	m.u.stream_shards.stream = (char *)stream;
	m.u.stream_shards.request_id = id;
	return request(c, &m, id, cb, data);
}

/* Sends a request on a stream of its own (auth, request; finished once
 * answered), so a long wait holds no other answer back. */
static int request_oneshot(struct felix_client *c, struct felix_msg *m,
                           uint64_t id, felix_client_reply_cb cb, void *data)
{
	struct cstream *cs = cs_open(c, CS_ONESHOT);
	if (cs == NULL) {
		return FELIX_CLIENT_ECLOSED;
	}
	struct pend *p = pend_add(cs, false, true, id);
	if (p == NULL) {
		quic_conn_stream_reset(c->conn, cs->id, 0);
		return FELIX_CLIENT_ENOMEM;
	}
	p->reply_cb = cb;
	p->data = data;
	int rv = send_auth(cs);
	if (rv == 0) {
		rv = send_msg(cs, m, false);
	}
	if (rv != 0) {
		pend_drop_last(cs, p);
		quic_conn_stream_reset(c->conn, cs->id, 0);
	}
	return rv;
}

int felix_client_group_poll(struct felix_client *c, const char *ns,
                            const char *stream, uint32_t shard,
                            const char *group, uint32_t max_records,
                            uint64_t wait_ms, felix_client_reply_cb cb,
                            void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_CONSUMER_GROUP)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_GROUP_POLL);
	m.u.group_poll.tenant_id = c->tenant;
	m.u.group_poll.namespace = (char *)ns;
	m.u.group_poll.stream = (char *)stream;
	m.u.group_poll.shard = shard;
	m.u.group_poll.group = (char *)group;
	m.u.group_poll.max_records = max_records;
	m.u.group_poll.has_wait_ms = true;
	m.u.group_poll.wait_ms = wait_ms;
	m.u.group_poll.request_id = id;
	if (wait_ms > 0) {
		return request_oneshot(c, &m, id, cb, data);
	}
	return request(c, &m, id, cb, data);
}

int felix_client_group_settle(struct felix_client *c, enum felix_msg_type type,
                              const char *ns, const char *stream,
                              uint32_t shard, const char *group,
                              uint64_t offset, felix_client_reply_cb cb,
                              void *data)
{
	struct felix_msg m;
	uint32_t need =
	    type == FELIX_MSG_GROUP_ACK || type == FELIX_MSG_GROUP_NACK
	        ? FELIX_FEATURE_CONSUMER_GROUP
	        : FELIX_FEATURE_GROUP_DEAD_LETTERS;
	if (type != FELIX_MSG_GROUP_ACK && type != FELIX_MSG_GROUP_NACK &&
	    type != FELIX_MSG_GROUP_DISCARD &&
	    type != FELIX_MSG_GROUP_REDRIVE) {
		return FELIX_CLIENT_EINVAL;
	}
	if (!(c->server_features & need)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, type);
	m.u.group_settle.tenant_id = c->tenant;
	m.u.group_settle.namespace = (char *)ns;
	m.u.group_settle.stream = (char *)stream;
	m.u.group_settle.shard = shard;
	m.u.group_settle.group = (char *)group;
	m.u.group_settle.offset = offset;
	m.u.group_settle.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_group_dead_letters(struct felix_client *c, const char *ns,
                                    const char *stream, uint32_t shard,
                                    const char *group, felix_client_reply_cb cb,
                                    void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_GROUP_DEAD_LETTERS)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_GROUP_DEAD_LETTERS);
	m.u.group_dead_letters.tenant_id = c->tenant;
	m.u.group_dead_letters.namespace = (char *)ns;
	m.u.group_dead_letters.stream = (char *)stream;
	m.u.group_dead_letters.shard = shard;
	m.u.group_dead_letters.group = (char *)group;
	m.u.group_dead_letters.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_producer_init(struct felix_client *c, felix_client_reply_cb cb,
                               void *data)
{
	struct felix_msg m;
	if (!(c->server_features & FELIX_FEATURE_IDEMPOTENT_PRODUCER)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	uint64_t id = ++c->next_request_id;
	felix_msg_init(&m, FELIX_MSG_PRODUCER_INIT);
	m.u.producer_init.request_id = id;
	return request(c, &m, id, cb, data);
}

int felix_client_publish_idempotent(struct felix_client *c, const char *ns,
                                    const char *stream, bool keyed,
                                    const uint8_t *key, size_t klen,
                                    const struct felix_view *payloads,
                                    uint32_t count, uint64_t producer_id,
                                    uint64_t sequence, felix_client_reply_cb cb,
                                    void *data)
{
	if (!(c->server_features & FELIX_FEATURE_IDEMPOTENT_PRODUCER)) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	/* The stream's request stream, as for plain publishes: batches of
	 * one stream reach the broker in the order they were sent. */
	struct cstream *cs = request_stream(c, stream);
	if (cs == NULL) {
		return FELIX_CLIENT_ECLOSED;
	}
	struct felix_bytes *items = calloc(count ? count : 1, sizeof *items);
	if (items == NULL) {
		return FELIX_CLIENT_ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		items[i].data = (uint8_t *)payloads[i].data;
		items[i].len = payloads[i].len;
	}
	uint64_t id = ++c->next_request_id;
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_PUBLISH_IDEMPOTENT);
	m.u.publish_idempotent.tenant_id = c->tenant;
	m.u.publish_idempotent.namespace = (char *)ns;
	m.u.publish_idempotent.stream = (char *)stream;
	m.u.publish_idempotent.payloads.items = items;
	m.u.publish_idempotent.payloads.count = count;
	m.u.publish_idempotent.has_key = keyed;
	m.u.publish_idempotent.key.data = (uint8_t *)key;
	m.u.publish_idempotent.key.len = klen;
	m.u.publish_idempotent.request_id = id;
	m.u.publish_idempotent.producer_id = producer_id;
	m.u.publish_idempotent.sequence = sequence;
	struct pend *p = pend_add(cs, false, true, id);
	if (p == NULL) {
		free(items);
		return FELIX_CLIENT_ENOMEM;
	}
	p->reply_cb = cb;
	p->data = data;
	int rv = send_msg(cs, &m, false);
	free(items);
	if (rv != 0 && !cs->gone) {
		pend_drop_last(cs, p);
	}
	return rv;
}

/* ---- subscribe and raw ----------------------------------------------------
 */

int felix_client_subscribe(struct felix_client *c, const char *ns,
                           const char *stream, uint32_t shard,
                           const struct felix_start *start,
                           const struct felix_sub_handlers *h, void *data,
                           struct felix_sub **out)
{
	struct felix_sub *sub = calloc(1, sizeof *sub);
	if (sub == NULL) {
		return FELIX_CLIENT_ENOMEM;
	}
	struct cstream *cs = cs_open(c, CS_SUB);
	if (cs == NULL) {
		free(sub);
		return FELIX_CLIENT_ECLOSED;
	}
	sub->c = c;
	sub->bidi = cs;
	sub->h = *h;
	sub->data = data;
	cs->sub = sub;
	sub->next = c->subs;
	c->subs = sub;
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_SUBSCRIBE);
	m.u.subscribe.tenant_id = c->tenant;
	m.u.subscribe.namespace = (char *)ns;
	m.u.subscribe.stream = (char *)stream;
	m.u.subscribe.has_start = start != NULL;
	if (start != NULL) {
		m.u.subscribe.start = *start;
	}
	m.u.subscribe.has_shard = shard > 0;
	m.u.subscribe.shard = shard;
	/* Auth and subscribe back to back: the broker reads them in
	 * order. */
	int rv = send_auth(cs);
	if (rv == 0) {
		rv = send_msg(cs, &m, false);
	}
	if (rv != 0) {
		cs->sub = NULL;
		sub_unlink(sub);
		free(sub);
		quic_conn_stream_reset(c->conn, cs->id, 0);
		return rv;
	}
	*out = sub;
	return 0;
}

int felix_client_watch(struct felix_client *c, const char *ns,
                       const char *cache, const struct felix_watch_request *w,
                       const struct felix_watch_handlers *h, void *data,
                       struct felix_sub **out)
{
	if (!(c->server_features & FELIX_FEATURE_CACHE_WATCH) ||
	    (w->retained &&
	     !(c->server_features & FELIX_FEATURE_CACHE_WATCH_RETAINED))) {
		return FELIX_CLIENT_EUNSUPPORTED;
	}
	struct felix_sub *sub = calloc(1, sizeof *sub);
	if (sub == NULL) {
		return FELIX_CLIENT_ENOMEM;
	}
	struct cstream *cs = cs_open(c, CS_SUB);
	if (cs == NULL) {
		free(sub);
		return FELIX_CLIENT_ECLOSED;
	}
	sub->c = c;
	sub->bidi = cs;
	sub->watch = true;
	sub->wh = *h;
	sub->h.started = h->started;
	sub->h.ended = h->ended;
	sub->data = data;
	cs->sub = sub;
	sub->next = c->subs;
	c->subs = sub;
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_CACHE_WATCH);
	m.u.cache_watch.tenant_id = c->tenant;
	m.u.cache_watch.namespace = (char *)ns;
	m.u.cache_watch.cache = (char *)cache;
	m.u.cache_watch.key = (char *)w->key;
	m.u.cache_watch.prefix = (char *)w->prefix;
	m.u.cache_watch.has_shard = w->has_shard;
	m.u.cache_watch.shard = w->shard;
	m.u.cache_watch.has_from_offset = w->has_from_offset;
	m.u.cache_watch.from_offset = w->from_offset;
	m.u.cache_watch.has_retained = w->retained;
	m.u.cache_watch.retained = w->retained;
	int rv = send_auth(cs);
	if (rv == 0) {
		rv = send_msg(cs, &m, false);
	}
	if (rv != 0) {
		cs->sub = NULL;
		sub_unlink(sub);
		free(sub);
		quic_conn_stream_reset(c->conn, cs->id, 0);
		return rv;
	}
	*out = sub;
	return 0;
}

int felix_client_raw_open(struct felix_client *c, bool auth,
                          felix_raw_frame_cb frame, felix_raw_end_cb end,
                          void *data, struct felix_raw **out)
{
	struct felix_raw *raw = calloc(1, sizeof *raw);
	if (raw == NULL) {
		return FELIX_CLIENT_ENOMEM;
	}
	struct cstream *cs = cs_open(c, CS_RAW);
	if (cs == NULL) {
		free(raw);
		return FELIX_CLIENT_ECLOSED;
	}
	cs->raw = raw;
	cs->authed = true; /* every frame goes to the raw callback */
	raw->cs = cs;
	raw->frame = frame;
	raw->end = end;
	raw->data = data;
	if (auth && send_auth(cs) != 0) {
		quic_conn_stream_reset(c->conn, cs->id, 0);
		return FELIX_CLIENT_ECLOSED;
	}
	*out = raw;
	return 0;
}

int felix_raw_send(struct felix_raw *raw, const void *bytes, size_t len,
                   bool fin)
{
	return cs_send(raw->cs, bytes, len, fin);
}
