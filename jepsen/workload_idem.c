/* The idempotent workload: Felix idempotent producers that re-send what
 * got no answer, checked by oncecheck (a record acknowledged is received
 * exactly once; one whose sends were all indeterminate at most once; one
 * whose sends all failed never).
 *
 * Producers (1 per node by default) take a producer id (producer_init)
 * and publish one record `r<n>` at a time with publish_idempotent to a
 * chosen shard of the 2-shard stream t1/jepsen/i (topic `i<j>` = shard j),
 * numbering their batches per shard from 0. publish_idempotent is taken
 * by the shard's leader only (not_leader names it: the producer re-sends
 * there). A send that gets no answer, or publish_error, is `info`, and the
 * producer re-sends the same record under the same sequence, as the seed
 * prescribes, up to MAX_ATTEMPTS times; a publish_refused other than
 * not_leader is `fail` and ends the producer id (a new producer_init, new
 * sequences, a new record). After the operations, once every producer is
 * idle, one reader per shard publishes a sentinel record (an ordinary
 * acknowledged publish) and reads the shard from the earliest offset until
 * the sentinel arrives: that read's records are the `recv`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/oncecheck.h"
#include "jepsen/workload_felix.h"
#include "wire/buf.h"

#define ISTREAM "i"
#define ISHARDS 2
#define MAX_ATTEMPTS 8
#define THINK_MAX_MS 20
#define RETRY_MS 200

struct id;

enum id_state { P_INIT, P_SEND };

struct id_prod {
	struct id *g;
	unsigned pid;
	struct wl_follow lead;
	unsigned home;
	uv_timer_t timer;
	bool busy;    /* a send (history op) or producer_init in flight */
	bool waiting; /* for the connection */
	uint64_t seq;
	struct wl_ticket *ticket;
	enum id_state state;
	bool have_id;
	uint64_t producer;
	uint64_t next_seq[ISHARDS];
	bool has_rec; /* a record to (re-)send */
	uint64_t rec;
	unsigned shard;
	unsigned attempts;
};

enum r_stage { F_IDLE, F_SENTINEL, F_READ, F_DONE };

struct id_reader {
	struct id *g;
	unsigned shard;
	unsigned pid;
	struct wl_follow lead;
	uv_timer_t timer;
	enum r_stage stage;
	bool busy;
	bool waiting;
	uint64_t seq;
	struct wl_ticket *ticket;
	struct felix_sub *sub;
	uint64_t sentinel;
	bool seen;
	struct wbuf toks;
};

struct id {
	struct wl_ctx *x;
	unsigned nprod, nprocs;
	struct id_prod *prods;
	struct id_reader readers[ISHARDS];
	struct wl_tickets tickets;
	char keys[ISHARDS][16];
	unsigned hint[ISHARDS];
	uint64_t next_rec;
	unsigned busy_prods;
	unsigned done_readers;
	uint64_t acked, resent, inits;
	bool finals;
};

static void tkey(unsigned shard, char *out, size_t cap)
{
	snprintf(out, cap, "i%u", shard);
}

static void send_event(struct id *g, unsigned pid, enum wl_type t,
                       unsigned shard, uint64_t rec)
{
	char k[8], r[24];
	tkey(shard, k, sizeof k);
	snprintf(r, sizeof r, "r%" PRIu64, rec);
	wl_hist_event(&g->x->hist, pid, t, "send", k, r);
}

static void start_finals(struct id *g);

/* --- Producers -------------------------------------------------------------
 */

static void p_schedule(struct id_prod *p, uint64_t ms);
static void p_send(struct id_prod *p);

static void p_idle(struct id_prod *p, uint64_t pause)
{
	struct id *g = p->g;
	uv_timer_stop(&p->timer);
	wl_ticket_drop(&p->ticket);
	p->busy = false;
	p->waiting = false;
	g->busy_prods--;
	p_schedule(p, pause);
	if (g->x->ops_over && g->busy_prods == 0) {
		start_finals(g);
	}
}

/* The current send ended with t; what next. */
static void p_done(struct id_prod *p, enum wl_type t, bool resend, bool reinit)
{
	struct id *g = p->g;
	send_event(g, p->pid, t, p->shard, p->rec);
	if (t == WL_INFO) {
		p->pid += g->nprocs;
	}
	if (t == WL_OK) {
		g->acked++;
		p->next_seq[p->shard]++;
		g->hint[p->shard] = p->lead.node;
		p->has_rec = false;
	} else if (!resend || p->attempts >= MAX_ATTEMPTS || g->x->ops_over) {
		/* Given up: the sequence it held may be taken on the
		 * broker, so this producer id is done with. */
		p->has_rec = false;
		reinit = reinit || t != WL_FAIL || p->attempts > 1;
	} else {
		g->resent++;
	}
	if (reinit) {
		p->have_id = false;
	}
	p_idle(p, t == WL_OK ? wl_rand(g->x, 0, THINK_MAX_MS) : RETRY_MS / 4);
}

static void on_init(void *data, int status, const struct felix_msg *reply,
                    const char *message)
{
	struct wl_ticket *k = data;
	struct id_prod *p = k->owner;
	(void)message;
	if (p == NULL || !p->busy || p->seq != k->seq || p->state != P_INIT) {
		return;
	}
	if (status == 0 && reply != NULL &&
	    reply->type == FELIX_MSG_PRODUCER_INIT_OK) {
		p->producer = reply->u.producer_init_ok.producer_id;
		p->have_id = true;
		memset(p->next_seq, 0, sizeof p->next_seq);
		p->g->inits++;
	}
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	p_idle(p, p->have_id ? 0 : RETRY_MS);
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_fx_reset(fx);
	}
}

static unsigned node_named(struct id *g, const char *id)
{
	char *end;
	unsigned long v = id != NULL ? strtoul(id, &end, 10) : 0;
	if (id == NULL || *end != '\0' || v < 1 || v > wl_ctx_slots(g->x)) {
		return 0;
	}
	return (unsigned)v;
}

static void on_sent(void *data, int status, const struct felix_msg *reply,
                    const char *message)
{
	struct wl_ticket *k = data;
	struct id_prod *p = k->owner;
	(void)message;
	if (p == NULL || !p->busy || p->seq != k->seq || p->state != P_SEND) {
		return;
	}
	struct id *g = p->g;
	if (status == 0) {
		p_done(p, WL_OK, false, false);
		return;
	}
	if (status == FELIX_CLIENT_EREFUSED && reply != NULL &&
	    reply->type == FELIX_MSG_PUBLISH_REFUSED) {
		const struct felix_refusal *why =
		    &reply->u.publish_refused.reason;
		if (why->kind == FELIX_REFUSAL_NOT_LEADER) {
			/* Not taken here: send it to the leader. */
			unsigned n = node_named(g, why->node_id);
			if (n != 0) {
				p->lead.node = n;
			} else {
				wl_follow_next(&p->lead, g->x);
			}
			g->hint[p->shard] = p->lead.node;
			p_done(p, WL_FAIL, true, false);
			return;
		}
		/* sequence_gap, sequence_expired, unknown_producer: this
		 * send appended nothing, and the producer stops. */
		p_done(p, WL_FAIL, false, true);
		return;
	}
	/* publish_error, a lost connection, an unknown answer: it may have
	 * been appended; re-send under the same sequence. */
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	p_done(p,
	       status == FELIX_CLIENT_EUNSUPPORTED ||
	               status == FELIX_CLIENT_EINVAL
	           ? WL_FAIL
	           : WL_INFO,
	       true, false);
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_fx_reset(fx);
	}
}

static void p_send(struct id_prod *p)
{
	struct id *g = p->g;
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	int rv;
	p->waiting = false;
	p->ticket = wl_ticket_new(&g->tickets, p, p->seq, fx);
	if (p->ticket == NULL) {
		if (p->state == P_SEND) {
			p_done(p, WL_FAIL, false, false);
		} else {
			p_idle(p, RETRY_MS);
		}
		return;
	}
	if (p->state == P_INIT) {
		rv = felix_client_producer_init(fx->c, on_init, p->ticket);
	} else {
		char r[24];
		snprintf(r, sizeof r, "r%" PRIu64, p->rec);
		struct felix_view v = {(const uint8_t *)r, strlen(r)};
		const char *key = g->keys[p->shard];
		rv = felix_client_publish_idempotent(
		    fx->c, WL_FX_NS, ISTREAM, true, (const uint8_t *)key,
		    strlen(key), &v, 1, p->producer, p->next_seq[p->shard],
		    on_sent, p->ticket);
	}
	if (rv != 0) {
		if (p->state == P_SEND) {
			/* Not sent: nothing appended; try again. */
			p_done(p, WL_FAIL, true, false);
		} else {
			p_idle(p, RETRY_MS);
		}
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
	}
}

static void p_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct id_prod *p = data;
	if (p->busy && p->waiting && up && fx == wl_follow_fx(&p->lead)) {
		p_send(p);
	}
}

static void p_on_timer(uv_timer_t *t);

static void p_go(struct id_prod *p)
{
	struct id *g = p->g;
	if (g->x->done || g->x->deadline || p->busy) {
		return;
	}
	if (g->x->ops_over && !p->has_rec) {
		if (g->busy_prods == 0) {
			start_finals(g);
		}
		return;
	}
	p->busy = true;
	p->waiting = true;
	p->seq++;
	g->busy_prods++;
	if (!p->have_id) {
		p->state = P_INIT;
		p->lead.node = p->home;
	} else {
		p->state = P_SEND;
		if (!p->has_rec) {
			p->rec = g->next_rec++;
			p->shard = (unsigned)wl_rand(g->x, 0, ISHARDS - 1);
			p->has_rec = true;
			p->attempts = 0;
			p->lead.node = g->hint[p->shard];
		}
		p->attempts++;
		send_event(g, p->pid, WL_INVOKE, p->shard, p->rec);
	}
	uv_timer_start(&p->timer, p_on_timer, wl_ctx_timeout(g->x), 0);
	if (wl_follow_connect(&p->lead)) {
		p_send(p);
	}
}

static void p_on_timer(uv_timer_t *t)
{
	struct id_prod *p = t->data;
	if (!p->busy) {
		p_go(p);
		return;
	}
	/* The op ends (its ticket goes stale) before the connection is
	 * dropped: dropping it fails what is pending on it at once. */
	bool sent = !p->waiting;
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	if (p->state == P_INIT) {
		wl_follow_next(&p->lead, p->g->x);
		p_idle(p, RETRY_MS);
	} else {
		/* No answer in time: maybe appended. Re-send (same
		 * sequence). */
		p_done(p, sent ? WL_INFO : WL_FAIL, true, false);
	}
	if (sent) {
		wl_fx_reset(fx);
	}
}

static void p_schedule(struct id_prod *p, uint64_t ms)
{
	if (!p->g->x->done) {
		uv_timer_start(&p->timer, p_on_timer, ms, 0);
	}
}

/* --- Final readers -----------------------------------------------------------
 */

static void f_step(struct id_reader *r);
static void f_on_timer(uv_timer_t *t);

static void f_drop(struct id_reader *r)
{
	wl_ticket_drop(&r->ticket);
	if (r->sub != NULL) {
		felix_sub_close(r->sub);
		r->sub = NULL;
	}
}

static void f_retry(struct id_reader *r)
{
	f_drop(r);
	r->busy = false;
	r->waiting = false;
	wl_follow_next(&r->lead, r->g->x);
	if (!r->g->x->done) {
		uv_timer_start(&r->timer, f_on_timer, RETRY_MS, 0);
	}
}

static void recv_event(struct id_reader *r, enum wl_type t, const char *v)
{
	char k[8];
	tkey(r->shard, k, sizeof k);
	wl_hist_event(&r->g->x->hist, r->pid, t, "recv", k, v);
}

static void f_on_ack(void *data, int status, const char *message)
{
	struct wl_ticket *k = data;
	struct id_reader *r = k->owner;
	if (r == NULL || !r->busy || r->seq != k->seq ||
	    r->stage != F_SENTINEL) {
		return;
	}
	struct id *g = r->g;
	enum wl_type t =
	    status == 0 ? WL_OK : wl_fx_write_outcome(status, message);
	wl_ticket_drop(&r->ticket);
	send_event(g, r->pid, t, r->shard, r->sentinel);
	if (t == WL_INFO) {
		r->pid += g->nprocs;
	}
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_follow_reset(&r->lead);
	}
	if (t == WL_OK) {
		r->stage = F_READ;
		f_drop(r);
		uv_timer_stop(&r->timer);
		r->busy = false;
		f_step(r);
		return;
	}
	f_retry(r);
}

static void f_started(void *data, struct felix_sub *sub, int status,
                      const struct felix_msg *answer, const char *message)
{
	struct wl_ticket *k = data;
	struct id_reader *r = k->owner;
	(void)sub;
	(void)answer;
	(void)message;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	if (status != 0) {
		r->sub = NULL;
		recv_event(r, WL_FAIL, NULL);
		f_retry(r);
	}
}

static void f_events(void *data, struct felix_sub *sub, bool has_offset,
                     uint64_t base, const struct felix_view *payloads,
                     uint32_t count)
{
	struct wl_ticket *k = data;
	struct id_reader *r = k->owner;
	char tok[160], want[24];
	(void)sub;
	(void)has_offset;
	(void)base;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	snprintf(want, sizeof want, "r%" PRIu64, r->sentinel);
	for (uint32_t i = 0; i < count; i++) {
		wl_token_of(payloads[i].data, payloads[i].len, tok, sizeof tok);
		if (r->toks.len > 0) {
			wbuf_append_str(&r->toks, " ");
		}
		wbuf_append_str(&r->toks, tok);
		r->seen = r->seen || strcmp(tok, want) == 0;
	}
	if (!r->seen) {
		return;
	}
	wbuf_put_u8(&r->toks, 0);
	f_drop(r);
	if (r->toks.oom) {
		recv_event(r, WL_FAIL, NULL);
		r->busy = false;
		f_step(r);
		return;
	}
	recv_event(r, WL_OK, (const char *)r->toks.data);
	r->busy = false;
	r->stage = F_DONE;
	struct id *g = r->g;
	if (++g->done_readers == ISHARDS) {
		wl_ctx_done(g->x);
	}
}

static void f_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct wl_ticket *k = data;
	struct id_reader *r = k->owner;
	(void)sub;
	(void)why;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	r->sub = NULL;
	recv_event(r, WL_FAIL, NULL);
	f_retry(r);
}

static const struct felix_sub_handlers f_handlers = {f_started, f_events,
                                                     f_ended};

static void f_send(struct id_reader *r)
{
	struct id *g = r->g;
	struct wl_fx *fx = wl_follow_fx(&r->lead);
	int rv;
	r->waiting = false;
	r->ticket = wl_ticket_new(&g->tickets, r, r->seq, fx);
	if (r->ticket == NULL) {
		return;
	}
	if (r->stage == F_SENTINEL) {
		rv = wl_fx_publish_rec(fx, ISTREAM, g->keys[r->shard],
		                       r->sentinel, f_on_ack, r->ticket);
		if (rv != 0) {
			send_event(g, r->pid, WL_FAIL, r->shard, r->sentinel);
			f_retry(r);
		}
		return;
	}
	struct felix_start start = {FELIX_START_EARLIEST, 0};
	wbuf_reset(&r->toks);
	r->seen = false;
	if (felix_client_subscribe(fx->c, WL_FX_NS, ISTREAM, r->shard, &start,
	                           &f_handlers, r->ticket, &r->sub) != 0) {
		r->sub = NULL;
		recv_event(r, WL_FAIL, NULL);
		f_retry(r);
	}
}

static void f_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct id_reader *r = data;
	if (!r->busy || !r->waiting || fx != wl_follow_fx(&r->lead)) {
		return;
	}
	if (up) {
		f_send(r);
		return;
	}
	if (r->stage == F_SENTINEL) {
		send_event(r->g, r->pid, WL_FAIL, r->shard, r->sentinel);
	} else {
		recv_event(r, WL_FAIL, NULL);
	}
	f_retry(r);
}

static void f_on_timer(uv_timer_t *t)
{
	struct id_reader *r = t->data;
	if (!r->busy) {
		f_step(r);
		return;
	}
	if (r->stage != F_SENTINEL) {
		return;
	}
	/* The sentinel got no answer: maybe appended; another one. */
	bool sent = !r->waiting;
	wl_ticket_drop(&r->ticket);
	send_event(r->g, r->pid, sent ? WL_INFO : WL_FAIL, r->shard,
	           r->sentinel);
	if (sent) {
		r->pid += r->g->nprocs;
		wl_follow_reset(&r->lead);
	}
	f_retry(r);
}

/* Starts the reader's next op (sentinel append or final read). */
static void f_step(struct id_reader *r)
{
	struct id *g = r->g;
	if (r->busy || g->x->done || g->x->deadline || r->stage == F_DONE) {
		return;
	}
	r->busy = true;
	r->waiting = true;
	r->seq++;
	if (r->stage == F_SENTINEL) {
		r->sentinel = g->next_rec++;
		send_event(g, r->pid, WL_INVOKE, r->shard, r->sentinel);
		uv_timer_start(&r->timer, f_on_timer, wl_ctx_timeout(g->x), 0);
	} else {
		recv_event(r, WL_INVOKE, NULL);
	}
	if (wl_follow_connect(&r->lead)) {
		f_send(r);
	}
}

static void start_finals(struct id *g)
{
	if (g->finals || g->x->done || g->x->deadline) {
		return;
	}
	g->finals = true;
	wl_hist_comment(&g->x->hist, "producers idle: sentinels and final "
	                             "reads");
	for (unsigned j = 0; j < ISHARDS; j++) {
		struct id_reader *r = &g->readers[j];
		r->stage = F_SENTINEL;
		r->lead.node = g->hint[j];
		f_step(r);
	}
}

/* --- The workload ------------------------------------------------------------
 */

static int id_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct id *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->nprod = cfg->procs ? cfg->procs : cfg->n_nodes;
	g->nprocs = g->nprod + ISHARDS;
	g->prods = calloc(g->nprod, sizeof *g->prods);
	if (g->prods == NULL) {
		return -ENOMEM;
	}
	for (unsigned j = 0; j < ISHARDS; j++) {
		wl_fx_key_for_shard("k", j, ISHARDS, g->keys[j],
		                    sizeof g->keys[j]);
		g->hint[j] = wl_ctx_home(x, j);
	}
	wl_hist_comment(&x->hist,
	                "lodestone idempotent workload: %u producers on %u "
	                "nodes, Felix stream %s/%s/%s (%u shards, topic i<j> "
	                "= shard j), publish_idempotent with re-sends",
	                g->nprod, cfg->n_nodes, WL_FX_TENANT, WL_FX_NS, ISTREAM,
	                ISHARDS);
	for (unsigned i = 0; i < g->nprod; i++) {
		struct id_prod *p = &g->prods[i];
		p->g = g;
		p->pid = i;
		p->home = wl_ctx_home(x, i);
		uv_timer_init(x->loop, &p->timer);
		p->timer.data = p;
		wl_follow_init(&p->lead, x, p->home, p_on_conn, p);
		p_schedule(p, wl_rand(x, 0, THINK_MAX_MS));
	}
	for (unsigned j = 0; j < ISHARDS; j++) {
		struct id_reader *r = &g->readers[j];
		r->g = g;
		r->shard = j;
		r->pid = g->nprod + j;
		uv_timer_init(x->loop, &r->timer);
		r->timer.data = r;
		wbuf_init(&r->toks);
		wl_follow_init(&r->lead, x, g->hint[j], f_on_conn, r);
	}
	return 0;
}

static void id_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct id *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	wl_hist_comment(&x->hist, "operations over: %u producers busy",
	                g->busy_prods);
	for (unsigned i = 0; i < g->nprod; i++) {
		struct id_prod *p = &g->prods[i];
		if (!p->busy && !p->has_rec) {
			uv_timer_stop(&p->timer);
		}
	}
	if (g->busy_prods == 0) {
		start_finals(g);
	}
}

static int id_write(struct wl_ctx *x)
{
	struct id *g = x->impl;
	if (g != NULL) {
		snprintf(x->note, sizeof x->note,
		         "%u producers on %u nodes, %" PRIu64
		         " records acknowledged, %" PRIu64 " re-sends, %" PRIu64
		         " producer ids, %u/%u shards read to their sentinel",
		         g->nprod, x->cfg->n_nodes, g->acked, g->resent,
		         g->inits, g->done_readers, ISHARDS);
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void id_close(struct wl_ctx *x)
{
	struct id *g = x->impl;
	if (g == NULL) {
		return;
	}
	for (unsigned i = 0; g->prods != NULL && i < g->nprod; i++) {
		struct id_prod *p = &g->prods[i];
		if (p->g == NULL) {
			continue;
		}
		wl_close_timer(&p->timer);
		wl_follow_close(&p->lead, x);
	}
	for (unsigned j = 0; j < ISHARDS; j++) {
		struct id_reader *r = &g->readers[j];
		if (r->g == NULL) {
			continue;
		}
		wl_ticket_drop(&r->ticket);
		r->sub = NULL; /* closed with its connection */
		wl_close_timer(&r->timer);
		wl_follow_close(&r->lead, x);
	}
}

static void id_destroy(struct wl_ctx *x)
{
	struct id *g = x->impl;
	if (g == NULL) {
		return;
	}
	for (unsigned j = 0; j < ISHARDS; j++) {
		wbuf_free(&g->readers[j].toks);
	}
	wl_tickets_free(&g->tickets);
	free(g->prods);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_idempotent = {
    .name = "idempotent",
    .scopes = WL_FX_SCOPES,
    .args = wl_fx_args,
    .checker = "exactly-once",
    .checks = {{"history.txt", "exactly-once", jepsen_oncecheck_run}},
    .start = id_start,
    .phase = id_phase,
    .write = id_write,
    .close = id_close,
    .destroy = id_destroy,
};
