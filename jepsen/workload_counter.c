/* The counter workload: Felix counter_add / counter_get on a few counters
 * of the cache t1/jepsen/c, checked by countercheck (every read between
 * the least and the most the counter could hold; the final reads at least
 * the sum of acknowledged deltas and at most the sum of attempted ones).
 *
 * Processes (2 per node by default) each keep one Felix connection to
 * their node (which forwards to the counter's shard leader) and run one
 * operation at a time: mostly adds of 1..5, some reads. An add that gets
 * no answer within the op timeout is `info` (the connection is dropped
 * and reopened); one the broker refuses before proposing is `fail`. After
 * the operations every counter is read on the healed cluster until a read
 * succeeds or the deadline passes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/countercheck.h"
#include "jepsen/workload_felix.h"

#define CACHE "c"
#define N_KEYS 4
#define THINK_MAX_MS 20
#define READ_PERCENT 25

enum ct_f { CT_ADD, CT_READ };

struct ct;

struct ct_proc {
	struct ct *g;
	unsigned idx;
	unsigned pid;
	struct wl_follow lead; /* node of the op in flight; tried: nodes a
	                          read was refused by */
	unsigned home;         /* node of its adds */
	uv_timer_t timer;      /* think, or the op's timeout */
	bool busy;
	bool waiting; /* an op is chosen, waiting for the connection */
	bool final;
	uint64_t seq;
	struct wl_ticket *ticket;
	enum ct_f f;
	unsigned key;
	int64_t delta;
};

struct ct {
	struct wl_ctx *x;
	unsigned nprocs;
	struct ct_proc *procs;
	struct wl_tickets tickets;
	unsigned busy;
	bool finals;
	bool key_read[N_KEYS];      /* final read done */
	bool key_taken[N_KEYS];     /* final read in flight */
	unsigned read_hint[N_KEYS]; /* node that last served a read */
	uint64_t adds_ok;
};

static const char *key_name(unsigned k)
{
	static const char *const names[N_KEYS] = {"c0", "c1", "c2", "c3"};
	return names[k];
}

static void schedule(struct ct_proc *p, uint64_t ms);
static void go(struct ct_proc *p);
static void send_op(struct ct_proc *p);

static void record(struct ct_proc *p, enum wl_type t, const char *extra)
{
	struct wl_hist *h = &p->g->x->hist;
	if (p->f == CT_ADD) {
		wl_hist_eventf(h, p->pid, t, "add", key_name(p->key),
		               "%" PRId64, p->delta);
	} else {
		wl_hist_event(h, p->pid, t, "read", key_name(p->key), extra);
	}
}

static bool finals_left(struct ct *g)
{
	for (unsigned k = 0; k < N_KEYS; k++) {
		if (!g->key_read[k]) {
			return true;
		}
	}
	return false;
}

static void maybe_finish(struct ct *g)
{
	if (g->finals && g->busy == 0 && !finals_left(g)) {
		wl_ctx_done(g->x);
	}
}

static void complete(struct ct_proc *p, enum wl_type t, const char *extra)
{
	struct ct *g = p->g;
	uv_timer_stop(&p->timer);
	wl_ticket_drop(&p->ticket);
	record(p, t, extra);
	if (t == WL_INFO) {
		p->pid += g->nprocs;
	}
	if (p->f == CT_ADD && t == WL_OK) {
		g->adds_ok++;
	}
	if (p->final) {
		g->key_taken[p->key] = false;
		if (t == WL_OK) {
			g->key_read[p->key] = true;
		}
	}
	p->busy = false;
	p->waiting = false;
	g->busy--;
	schedule(p, g->x->ops_over ? 10 : wl_rand(g->x, 0, THINK_MAX_MS));
	maybe_finish(g);
}

static void on_answer(void *data, int status, const struct felix_msg *reply,
                      const char *message)
{
	struct wl_ticket *k = data;
	struct ct_proc *p = k->owner;
	struct ct *g;
	char v[32];
	if (p == NULL || !p->busy || p->seq != k->seq) {
		return;
	}
	g = p->g;
	if (status != 0 || reply == NULL ||
	    reply->type != FELIX_MSG_COUNTER_VALUE) {
		if (p->f == CT_READ && status == FELIX_CLIENT_EREFUSED &&
		    message != NULL &&
		    strncmp(message, "not leader", 10) == 0 &&
		    wl_follow_retry(&p->lead, g->x)) {
			/* Reads are served by the leader only: next node. */
			wl_ticket_drop(&p->ticket);
			p->waiting = true;
			if (wl_follow_connect(&p->lead)) {
				send_op(p);
			}
			return;
		}
		if (p->f == CT_READ) {
			complete(p, WL_FAIL, NULL);
		} else {
			complete(p,
			         status == 0
			             ? WL_INFO
			             : wl_fx_write_outcome(status, message),
			         NULL);
		}
		if (status == FELIX_CLIENT_ECLOSED) {
			wl_follow_reset(&p->lead);
		}
		return;
	}
	if (p->f == CT_READ) {
		const struct felix_msg_counter_value *cv =
		    &reply->u.counter_value;
		g->read_hint[p->key] = p->lead.node;
		snprintf(v, sizeof v, "%" PRId64,
		         cv->has_value ? cv->value : 0);
		complete(p, WL_OK, v);
	} else {
		complete(p, WL_OK, NULL);
	}
}

static void on_timeout(uv_timer_t *t)
{
	struct ct_proc *p = t->data;
	if (!p->busy) {
		go(p);
		return;
	}
	/* Never sent (no connection in time), or no answer in time: then
	 * it may still happen, and the connection is dropped so that a
	 * stuck one is not reused. */
	bool sent = !p->waiting;
	complete(p, p->f == CT_READ || !sent ? WL_FAIL : WL_INFO, NULL);
	if (sent) {
		wl_follow_reset(&p->lead);
	}
}

/* Sends the chosen op on the (up) connection. */
static void send_op(struct ct_proc *p)
{
	struct ct *g = p->g;
	int rv;
	p->waiting = false;
	struct wl_fx *fx = wl_follow_fx(&p->lead);
	p->ticket = wl_ticket_new(&g->tickets, p, p->seq, fx);
	if (p->ticket == NULL) {
		complete(p, WL_FAIL, NULL);
		return;
	}
	if (p->f == CT_ADD) {
		rv = felix_client_counter_add(fx->c, WL_FX_NS, CACHE,
		                              key_name(p->key), p->delta,
		                              on_answer, p->ticket);
	} else {
		rv = felix_client_counter_get(fx->c, WL_FX_NS, CACHE,
		                              key_name(p->key), on_answer,
		                              p->ticket);
	}
	if (rv != 0) {
		/* Not sent. */
		complete(p, WL_FAIL, NULL);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
	}
}

static void on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct ct_proc *p = data;
	if (!p->busy || !p->waiting || fx != wl_follow_fx(&p->lead)) {
		return;
	}
	if (up) {
		send_op(p);
	}
	/* Down: the op's timer ends it (as a failure: nothing was sent). */
}

/* Invokes the chosen op: recorded now, sent once connected. */
static void invoke(struct ct_proc *p)
{
	struct ct *g = p->g;
	p->busy = true;
	g->busy++;
	p->seq++;
	record(p, WL_INVOKE, NULL);
	p->waiting = true;
	wl_follow_start(&p->lead,
	                p->f == CT_READ ? g->read_hint[p->key] : p->home);
	uv_timer_start(&p->timer, on_timeout, wl_ctx_timeout(g->x), 0);
	if (wl_follow_connect(&p->lead)) {
		send_op(p);
	}
}

static void go(struct ct_proc *p)
{
	struct ct *g = p->g;
	if (g->x->done || g->x->deadline || p->busy) {
		return;
	}
	if (g->x->ops_over) {
		if (g->busy > 0 && !g->finals) {
			return; /* the last ops finish first */
		}
		g->finals = true;
		for (unsigned k = 0; k < N_KEYS; k++) {
			if (!g->key_read[k] && !g->key_taken[k]) {
				g->key_taken[k] = true;
				p->final = true;
				p->f = CT_READ;
				p->key = k;
				invoke(p);
				return;
			}
		}
		maybe_finish(g);
		return;
	}
	p->final = false;
	p->key = (unsigned)wl_rand(g->x, 0, N_KEYS - 1);
	if (wl_rand(g->x, 0, 99) < READ_PERCENT) {
		p->f = CT_READ;
	} else {
		p->f = CT_ADD;
		p->delta = (int64_t)wl_rand(g->x, 1, 5);
	}
	invoke(p);
}

static void on_think(uv_timer_t *t)
{
	struct ct_proc *p = t->data;
	go(p);
	/* A process that stays idle in the final phase keeps looking for a
	 * counter still unread. */
	if (!p->busy && p->g->x->ops_over && !p->g->x->done &&
	    !p->g->x->deadline) {
		schedule(p, 50);
	}
}

static void schedule(struct ct_proc *p, uint64_t ms)
{
	if (!p->g->x->done) {
		uv_timer_start(&p->timer, on_think, ms, 0);
	}
}

static int ct_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct ct *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->nprocs = cfg->procs ? cfg->procs : 2 * cfg->n_nodes;
	g->procs = calloc(g->nprocs, sizeof *g->procs);
	if (g->procs == NULL) {
		return -ENOMEM;
	}
	for (unsigned k = 0; k < N_KEYS; k++) {
		g->read_hint[k] = wl_ctx_home(x, k);
	}
	wl_hist_comment(&x->hist,
	                "lodestone counter workload: %u processes on %u "
	                "nodes, Felix counters %s/%s/%s c0..c%u",
	                g->nprocs, cfg->n_nodes, WL_FX_TENANT, WL_FX_NS, CACHE,
	                N_KEYS - 1);
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct ct_proc *p = &g->procs[i];
		p->g = g;
		p->idx = i;
		p->pid = i;
		uv_timer_init(x->loop, &p->timer);
		p->timer.data = p;
		p->home = wl_ctx_home(x, i);
		wl_follow_init(&p->lead, x, p->home, on_conn, p);
		wl_fx_connect(&p->lead.fx[p->home - 1]);
		schedule(p, wl_rand(x, 0, THINK_MAX_MS));
	}
	return 0;
}

static void ct_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct ct *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		if (!g->procs[i].busy) {
			schedule(&g->procs[i], 0);
		}
	}
}

static int ct_write(struct wl_ctx *x)
{
	struct ct *g = x->impl;
	if (g != NULL) {
		unsigned unread = 0;
		for (unsigned k = 0; k < N_KEYS; k++) {
			unread += !g->key_read[k];
		}
		snprintf(x->note, sizeof x->note,
		         "%u processes on %u nodes, %u counters, %" PRIu64
		         " adds acknowledged%s",
		         g->nprocs, x->cfg->n_nodes, N_KEYS, g->adds_ok,
		         unread > 0 ? "; some final reads did not succeed"
		                    : "");
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void ct_close(struct wl_ctx *x)
{
	struct ct *g = x->impl;
	if (g == NULL || g->procs == NULL) {
		return;
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct ct_proc *p = &g->procs[i];
		if (p->g == NULL) {
			continue;
		}
		wl_close_timer(&p->timer);
		wl_follow_close(&p->lead, x);
	}
}

static void ct_destroy(struct wl_ctx *x)
{
	struct ct *g = x->impl;
	if (g == NULL) {
		return;
	}
	wl_tickets_free(&g->tickets);
	free(g->procs);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_counter = {
    .name = "counter",
    .scopes = WL_FX_SCOPES,
    .args = wl_fx_args,
    .checker = "counter",
    .checks = {{"history.txt", "counter", jepsen_countercheck_run}},
    .start = ct_start,
    .phase = ct_phase,
    .write = ct_write,
    .close = ct_close,
    .destroy = ct_destroy,
};
