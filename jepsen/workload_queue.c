/* The queue workload: a Felix consumer group as an at-least-once queue,
 * checked by queuecheck (every acknowledged publish delivered and
 * acknowledged; no redelivery of a confirmed ack without a reason; nothing
 * delivered that was not published).
 *
 * Publishers (1 per node by default) publish one record `r<n>` at a time
 * with ack per_batch to a chosen shard of the 2-shard stream t1/jepsen/q
 * (queue `q<j>` = shard j), through their own node. Consumers (2 per
 * shard) poll the group `g` of their shard at its leader (group requests
 * are served there only: a refusal moves the consumer to the next node),
 * with a short long-poll wait, and acknowledge every record they get, one
 * group_ack each (an ack without a definite answer is sent again until
 * one comes, or the deadline), before polling again. The nodes claim a polled
 * record for 3 s (--felix-group-visibility-ms), so a record whose poll or ack
 * was lost comes back soon; dead-lettering is pushed out of reach
 * (--felix-group-max-attempts). After the operations the consumers go on
 * until every acknowledged publish has been acknowledged by a consumer, or
 * the deadline.
 *
 * Outcomes: a poll is a proposed command (it claims records), so a poll
 * that gets no answer is `info`; one refused is `fail`. Acks likewise. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/queuecheck.h"
#include "jepsen/workload_felix.h"

#define QSTREAM "q"
#define QSHARDS 2
#define GROUP "g"
#define CONSUMERS_PER_SHARD 2
#define MAX_RECORDS 16
#define WAIT_MS 300
#define THINK_MAX_MS 20
#define IDLE_MS 50
/* An ack without a definite answer is sent again (acking twice is fine),
 * every RETRY_MS, so that an ack that did happen is not taken for a
 * missing one; a bound keeps a broken broker from holding a consumer
 * forever (the deadline ends the drain first). */
#define ACK_TRIES 1000
#define RETRY_MS 200

enum q_f { Q_PUBLISH, Q_CONSUME, Q_ACK };

struct q;

struct q_item {
	uint64_t off;
	uint64_t rec; /* UINT64_MAX: not one of ours */
	char tok[64];
};

struct q_proc {
	struct q *g;
	unsigned pid;
	bool consumer;
	unsigned shard;        /* consumers: theirs; publishers: the op's */
	struct wl_follow lead; /* node of the op in flight */
	unsigned home;         /* publishers' node at the start */
	unsigned idx;          /* its index, for its node now */
	uv_timer_t timer;
	bool busy;
	bool waiting;
	uint64_t seq;
	struct wl_ticket *ticket;
	enum q_f f;
	uint64_t rec; /* publish */
	struct q_item items[MAX_RECORDS];
	unsigned n_items, next_item; /* delivered, acked up to */
	unsigned ack_tries;          /* sends of the current ack */
	bool refused;                /* the broker refused the op */
};

struct q {
	struct wl_ctx *x;
	unsigned npub, nprocs;
	struct q_proc *procs;
	struct wl_tickets tickets;
	char keys[QSHARDS][16];
	unsigned hint[QSHARDS]; /* node that last served the shard */
	unsigned pubs_busy;
	uint64_t next_rec;
	uint8_t *st; /* by record: ST_* bits */
	size_t st_cap;
	uint64_t outstanding; /* published ok, not yet acked ok */
	uint64_t published, acked;
	bool draining;
};

enum { ST_PUB_OK = 1, ST_ACKED = 2 };

static void qkey(unsigned shard, char *out, size_t cap)
{
	snprintf(out, cap, "q%u", shard);
}

static int new_rec(struct q *g, uint64_t *rec)
{
	if (g->next_rec >= g->st_cap) {
		size_t cap = g->st_cap ? g->st_cap * 2 : 4096;
		uint8_t *p = realloc(g->st, cap);
		if (p == NULL) {
			return -ENOMEM;
		}
		memset(p + g->st_cap, 0, cap - g->st_cap);
		g->st = p;
		g->st_cap = cap;
	}
	*rec = g->next_rec++;
	return 0;
}

/* Sets a state bit of rec; `outstanding` counts the records published
 * (ok) and not yet acknowledged (ok) by a consumer, whichever came first. */
static void mark(struct q *g, uint64_t rec, uint8_t bit)
{
	if (rec >= g->next_rec) {
		return;
	}
	bool was = g->st[rec] == ST_PUB_OK;
	g->st[rec] |= bit;
	bool is = g->st[rec] == ST_PUB_OK;
	if (is && !was) {
		g->outstanding++;
	} else if (was && !is) {
		g->outstanding--;
	}
}

static void schedule(struct q_proc *p, uint64_t ms);
static void send_op(struct q_proc *p);

static void maybe_finish(struct q *g)
{
	if (!g->x->ops_over || g->pubs_busy > 0 || g->outstanding > 0) {
		return;
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		if (g->procs[i].busy) {
			return;
		}
	}
	wl_ctx_done(g->x);
}

/* Records the op's invocation or completion. */
static void record(struct q_proc *p, enum wl_type t, const char *vals)
{
	struct wl_hist *h = &p->g->x->hist;
	char k[8], r[24];
	qkey(p->shard, k, sizeof k);
	switch (p->f) {
	case Q_PUBLISH:
		snprintf(r, sizeof r, "r%" PRIu64, p->rec);
		wl_hist_event(h, p->pid, t, "publish", k, r);
		break;
	case Q_CONSUME:
		wl_hist_event(h, p->pid, t, "consume", k, vals);
		break;
	case Q_ACK:
		wl_hist_event(h, p->pid, t, "ack", k,
		              p->items[p->next_item].tok);
		break;
	}
}

static void complete(struct q_proc *p, enum wl_type t, const char *vals)
{
	struct q *g = p->g;
	uv_timer_stop(&p->timer);
	wl_ticket_drop(&p->ticket);
	record(p, t, vals);
	if (t == WL_INFO) {
		p->pid += g->nprocs;
	}
	switch (p->f) {
	case Q_PUBLISH:
		g->pubs_busy--;
		if (t == WL_OK) {
			g->published++;
			mark(g, p->rec, ST_PUB_OK);
		}
		break;
	case Q_CONSUME:
		if (t != WL_OK) {
			/* What it claimed, if anything, comes back after the
			 * visibility timeout. */
			p->n_items = p->next_item = 0;
		}
		break;
	case Q_ACK:
		if (t == WL_OK) {
			g->acked++;
			mark(g, p->items[p->next_item].rec, ST_ACKED);
		}
		/* An ack without a definite answer (no answer, an
		 * indeterminate error, or not sent at all) is sent again;
		 * one the broker refused for good is not (the record
		 * comes back after the visibility timeout). */
		if (t != WL_OK && !(p->refused && t == WL_FAIL) &&
		    ++p->ack_tries < ACK_TRIES && !g->x->deadline) {
			break;
		}
		p->ack_tries = 0;
		p->next_item++;
		break;
	}
	p->busy = false;
	p->waiting = false;
	uint64_t pause = 0;
	if (p->f == Q_CONSUME && t == WL_OK && p->n_items == 0) {
		pause = IDLE_MS;
	} else if (p->consumer && t != WL_OK) {
		/* No leader, or no answer: do not spin. */
		pause = RETRY_MS;
	} else if (!p->consumer) {
		pause = wl_rand(g->x, 0, THINK_MAX_MS);
	}
	schedule(p, pause);
	maybe_finish(g);
}

static void on_answer(void *data, int status, const struct felix_msg *reply,
                      const char *message)
{
	struct wl_ticket *k = data;
	struct q_proc *p = k->owner;
	char tok[64];
	if (p == NULL || !p->busy || p->seq != k->seq) {
		return;
	}
	struct q *g = p->g;
	bool elsewhere = status == FELIX_CLIENT_EREFUSED && message != NULL &&
	                 strstr(message, "not leader") != NULL;
	p->refused = status == FELIX_CLIENT_EREFUSED && !elsewhere;
	if (status != 0) {
		if (elsewhere && p->consumer &&
		    wl_follow_retry(&p->lead, g->x)) {
			/* Group requests are served by the leader only. */
			wl_ticket_drop(&p->ticket);
			p->waiting = true;
			if (wl_follow_connect(&p->lead)) {
				send_op(p);
			}
			return;
		}
		enum wl_type t = wl_fx_write_outcome(status, message);
		if (elsewhere) {
			t = WL_FAIL;
		}
		if (status == FELIX_CLIENT_EREFUSED && message != NULL &&
		    !elsewhere) {
			wl_hist_comment(&g->x->hist,
			                "process %u: refused: %.200s", p->pid,
			                message);
		}
		struct wl_fx *fx = wl_follow_fx(&p->lead);
		complete(p, t, NULL);
		if (status == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
		return;
	}
	if (p->consumer) {
		g->hint[p->shard] = p->lead.node;
	}
	if (p->f != Q_CONSUME) {
		complete(p, WL_OK, NULL);
		return;
	}
	if (reply == NULL || reply->type != FELIX_MSG_GROUP_RECORDS) {
		complete(p, WL_INFO, NULL);
		return;
	}
	const struct felix_group_record_list *l =
	    &reply->u.group_records.records;
	char vals[MAX_RECORDS * 66 + 1];
	size_t vl = 0;
	vals[0] = '\0';
	p->n_items = p->next_item = 0;
	for (size_t i = 0; i < l->count; i++) {
		const struct felix_group_record *gr = &l->items[i];
		wl_token_of(gr->payload.data, gr->payload.len, tok, sizeof tok);
		vl += (size_t)snprintf(vals + vl, sizeof vals - vl, "%s%s",
		                       vl > 0 ? " " : "", tok);
		if (p->n_items < MAX_RECORDS) {
			struct q_item *it = &p->items[p->n_items++];
			char *end;
			it->off = gr->offset;
			it->rec = UINT64_MAX;
			snprintf(it->tok, sizeof it->tok, "%s", tok);
			if (tok[0] == 'r') {
				unsigned long long v =
				    strtoull(tok + 1, &end, 10);
				if (*end == '\0' && tok[1] != '\0') {
					it->rec = v;
				}
			}
		}
	}
	complete(p, WL_OK, vals);
}

static void on_ack(void *data, int status, const char *message)
{
	on_answer(data, status, NULL, message);
}

static void send_op(struct q_proc *p)
{
	struct q *g = p->g;
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	int rv;
	p->waiting = false;
	p->ticket = wl_ticket_new(&g->tickets, p, p->seq, fx);
	if (p->ticket == NULL) {
		complete(p, WL_FAIL, NULL);
		return;
	}
	switch (p->f) {
	case Q_PUBLISH:
		rv = wl_fx_publish_rec(fx, QSTREAM, g->keys[p->shard], p->rec,
		                       on_ack, p->ticket);
		break;
	case Q_CONSUME:
		rv = felix_client_group_poll(fx->c, WL_FX_NS, QSTREAM, p->shard,
		                             GROUP, MAX_RECORDS, WAIT_MS,
		                             on_answer, p->ticket);
		break;
	default:
		rv = felix_client_group_settle(
		    fx->c, FELIX_MSG_GROUP_ACK, WL_FX_NS, QSTREAM, p->shard,
		    GROUP, p->items[p->next_item].off, on_answer, p->ticket);
		break;
	}
	if (rv != 0) {
		complete(p, WL_FAIL, NULL);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
	}
}

static void on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct q_proc *p = data;
	if (p->busy && p->waiting && up && fx == wl_follow_fx(&p->lead)) {
		send_op(p);
	}
}

static void on_timer(uv_timer_t *t);

static void invoke(struct q_proc *p)
{
	struct q *g = p->g;
	p->busy = true;
	p->waiting = true;
	p->seq++;
	p->refused = false;
	if (p->f == Q_PUBLISH) {
		g->pubs_busy++;
	}
	wl_follow_start(&p->lead, p->f == Q_PUBLISH ? wl_ctx_home(g->x, p->idx)
	                                            : g->hint[p->shard]);
	record(p, WL_INVOKE, NULL);
	uv_timer_start(&p->timer, on_timer,
	               wl_ctx_timeout(g->x) + (p->f == Q_CONSUME ? WAIT_MS : 0),
	               0);
	if (wl_follow_connect(&p->lead)) {
		send_op(p);
	}
}

static void go(struct q_proc *p)
{
	struct q *g = p->g;
	if (g->x->done || g->x->deadline || p->busy) {
		return;
	}
	if (!p->consumer) {
		if (g->x->ops_over) {
			maybe_finish(g);
			return;
		}
		if (new_rec(g, &p->rec) != 0) {
			return;
		}
		p->f = Q_PUBLISH;
		p->shard = (unsigned)wl_rand(g->x, 0, QSHARDS - 1);
		invoke(p);
		return;
	}
	if (g->x->ops_over && g->pubs_busy == 0 && g->outstanding == 0) {
		maybe_finish(g);
		return;
	}
	p->f = p->next_item < p->n_items ? Q_ACK : Q_CONSUME;
	invoke(p);
}

static void on_timer(uv_timer_t *t)
{
	struct q_proc *p = t->data;
	if (!p->busy) {
		go(p);
		return;
	}
	/* Never sent (no connection), or no answer in time. */
	bool sent = !p->waiting;
	complete(p, sent ? WL_INFO : WL_FAIL, NULL);
	if (sent) {
		wl_follow_reset(&p->lead);
	}
}

static void schedule(struct q_proc *p, uint64_t ms)
{
	if (!p->g->x->done) {
		uv_timer_start(&p->timer, on_timer, ms, 0);
	}
}

static int q_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct q *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->npub = cfg->procs ? cfg->procs : cfg->n_nodes;
	g->nprocs = g->npub + QSHARDS * CONSUMERS_PER_SHARD;
	g->procs = calloc(g->nprocs, sizeof *g->procs);
	if (g->procs == NULL) {
		return -ENOMEM;
	}
	for (unsigned j = 0; j < QSHARDS; j++) {
		wl_fx_key_for_shard("k", j, QSHARDS, g->keys[j],
		                    sizeof g->keys[j]);
		g->hint[j] = wl_ctx_home(x, j);
	}
	wl_hist_comment(&x->hist,
	                "lodestone queue workload: %u publishers, %u "
	                "consumers per shard, Felix stream %s/%s/%s (%u "
	                "shards, queue q<j> = shard j), consumer group %s",
	                g->npub, CONSUMERS_PER_SHARD, WL_FX_TENANT, WL_FX_NS,
	                QSTREAM, QSHARDS, GROUP);
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct q_proc *p = &g->procs[i];
		p->g = g;
		p->pid = i;
		p->consumer = i >= g->npub;
		p->shard = p->consumer ? (i - g->npub) % QSHARDS : 0;
		p->home = wl_ctx_home(x, i);
		p->idx = i;
		uv_timer_init(x->loop, &p->timer);
		p->timer.data = p;
		wl_follow_init(&p->lead, x, p->home, on_conn, p);
		schedule(p, wl_rand(x, 0, THINK_MAX_MS));
	}
	return 0;
}

static void q_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct q *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	wl_hist_comment(&x->hist, "operations over: consumers drain the "
	                          "queues");
	g->draining = true;
	maybe_finish(g);
}

static int q_write(struct wl_ctx *x)
{
	struct q *g = x->impl;
	if (g != NULL) {
		snprintf(
		    x->note, sizeof x->note,
		    "%u publishers and %u consumers on %u nodes, %" PRIu64
		    " publishes and %" PRIu64 " acks acknowledged, %" PRIu64
		    " published records not acknowledged by a consumer "
		    "at the end",
		    g->npub, QSHARDS * CONSUMERS_PER_SHARD, x->cfg->n_nodes,
		    g->published, g->acked, g->outstanding);
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void q_close(struct wl_ctx *x)
{
	struct q *g = x->impl;
	if (g == NULL || g->procs == NULL) {
		return;
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct q_proc *p = &g->procs[i];
		if (p->g == NULL) {
			continue;
		}
		wl_close_timer(&p->timer);
		wl_follow_close(&p->lead, x);
	}
}

static void q_destroy(struct wl_ctx *x)
{
	struct q *g = x->impl;
	if (g == NULL) {
		return;
	}
	wl_tickets_free(&g->tickets);
	free(g->procs);
	free(g->st);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_queue = {
    .name = "queue",
    .scopes = WL_FX_SCOPES,
    .args = wl_fx_args,
    .checker = "queue",
    .checks = {{"history.txt", "queue", jepsen_queuecheck_run}},
    .start = q_start,
    .phase = q_phase,
    .write = q_write,
    .close = q_close,
    .destroy = q_destroy,
};
