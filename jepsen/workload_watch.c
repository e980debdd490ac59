/* The watch workload: Felix cache_put of unique values to a few keys of the
 * 2-shard cache t1/jepsen/w, and cache watches that must deliver every
 * change; checked by watchcheck (no acknowledged put lost, no phantom, no
 * duplicate or skipped offset in a watcher's resumed chain, per-key order).
 *
 * Writers (2 per node by default) each keep one Felix connection to their
 * node (which forwards to the key's shard leader) and put `p<pid>-<n>` (n
 * counts every put of the run) to a random key, one at a time: an answer
 * `cache_ok` is `ok`, a refusal before anything was proposed `fail`, no
 * answer within the op timeout or anything else `info`.
 *
 * Watchers (2 per shard) watch the prefix "w" of their shard at the
 * shard's leader (watches are served there only: a refusal that names
 * the leader moves the watcher there, any other to the next node),
 * starting from offset 0. Every watch that stays open records windows of
 * what it delivered (`recv`, about every 250 ms); when it ends (a lost
 * connection, a refusal, the broker's end, cache_watch_lagged) or stalls
 * (nothing for 2 s while an acknowledged put of its shard is missing),
 * the watcher watches again from the last offset it saw plus one, or from
 * resume_from after cache_watch_lagged. After the operations the watchers
 * drain until each has seen every acknowledged put of its shard, or the
 * deadline passes.
 *
 * History (jepsen/watchcheck.h): `put s<j> KEY VALUE`; a watcher's
 * `recv s<j> FROM` invocations and `ok recv s<j> OFF:KEY:VALUE...`
 * completions (`fail` when the watch was refused or never answered). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/watchcheck.h"
#include "jepsen/workload_felix.h"
#include "wire/buf.h"

#define CACHE "w"
#define PREFIX "w"
#define SHARDS 2
#define KEYS_PER_SHARD 3
#define WATCHERS_PER_SHARD 2
#define N_WATCHERS (SHARDS * WATCHERS_PER_SHARD)
#define THINK_MAX_MS 20
#define FLUSH_MS 250
#define RETRY_MS 200
#define REDIRECT_MS 20
#define STALL_MS 2000
#define DRAIN_CHECK_MS 100

/* The Felix workloads' scopes, and this workload's cache. */
static const char scopes[] = WL_FX_SCOPES "cache t1/jepsen/w shards=2\n";

struct wt;

struct wt_put {
	uint8_t shard;
	bool acked;
	int64_t acked_ms;
	uint32_t seen; /* bit per watcher */
};

struct wt_writer {
	struct wt *g;
	unsigned idx;
	unsigned pid;
	struct wl_fx fx;  /* to its node */
	uv_timer_t timer; /* think, or the put's timeout */
	bool busy;
	bool waiting; /* invoked, waiting for the connection */
	uint64_t seq;
	struct wl_ticket *ticket;
	unsigned shard;
	unsigned key;
	uint64_t put; /* index into g->puts */
};

enum wt_state {
	W_IDLE,       /* between watches */
	W_CONNECTING, /* waiting for the connection to the node */
	W_ASKED,      /* cache_watch sent, no answer yet */
	W_LIVE,       /* started: changes arrive */
};

struct wt_watcher {
	struct wt *g;
	unsigned idx; /* bit in wt_put.seen */
	unsigned shard;
	unsigned pid;
	struct wl_follow lead; /* tried: since the last watch started */
	enum wt_state state;
	struct felix_sub *sub;
	struct wl_ticket *ticket;
	uint64_t seq;
	uv_timer_t timer; /* the answer's timeout, or the retry */
	uv_timer_t flush; /* windows and stall checks while live */
	bool open;        /* a recv is pending in the history */
	struct wbuf tokens;
	unsigned n_tokens;
	uint64_t next;       /* offset the next watch asks from */
	uint64_t snap_below; /* resnapshot: snapshot values below it */
	int64_t last_ms;     /* last change (or start) */
	uint64_t delivered;
	unsigned watches;
	unsigned lagged;
};

struct wt {
	struct wl_ctx *x;
	unsigned nwriters;
	unsigned nprocs; /* writers + watchers: pid stride */
	struct wt_writer *writers;
	struct wt_watcher watchers[N_WATCHERS];
	struct wl_tickets tickets;
	char keys[SHARDS][KEYS_PER_SHARD][32];
	unsigned hint[SHARDS]; /* node that last served a watch */
	struct wt_put *puts;
	size_t n_puts;
	size_t cap_puts;
	unsigned busy_writers;
	uv_timer_t drain;
	bool drain_init;
	uint64_t puts_ok;
	bool all_seen;
};

static void shard_tok(unsigned shard, char *out, size_t cap)
{
	snprintf(out, cap, "s%u", shard);
}

/* --- Writers ---------------------------------------------------------------
 */

static void w_schedule(struct wt_writer *w, uint64_t ms);

static void w_record(struct wt_writer *w, enum wl_type t)
{
	char s[8];
	shard_tok(w->shard, s, sizeof s);
	wl_hist_eventf(&w->g->x->hist, w->pid, t, "put", s, "%s p%u-%" PRIu64,
	               w->g->keys[w->shard][w->key], w->pid, w->put);
}

static void w_complete(struct wt_writer *w, enum wl_type t)
{
	struct wt *g = w->g;
	uv_timer_stop(&w->timer);
	wl_ticket_drop(&w->ticket);
	w_record(w, t);
	if (t == WL_OK) {
		g->puts[w->put].acked = true;
		g->puts[w->put].acked_ms = wl_ctx_ms(g->x);
		g->puts_ok++;
	} else if (t == WL_INFO) {
		w->pid += g->nprocs;
	}
	w->busy = false;
	w->waiting = false;
	g->busy_writers--;
	w_schedule(w, wl_rand(g->x, 0, THINK_MAX_MS));
}

static void w_on_answer(void *data, int status, const struct felix_msg *reply,
                        const char *message)
{
	struct wl_ticket *k = data;
	struct wt_writer *w = k->owner;
	if (w == NULL || !w->busy || w->seq != k->seq) {
		return;
	}
	if (status == 0 && reply != NULL && reply->type == FELIX_MSG_CACHE_OK) {
		w_complete(w, WL_OK);
		return;
	}
	w_complete(w, status == 0 ? WL_INFO
	                          : wl_fx_write_outcome(status, message));
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_fx_reset(&w->fx);
	}
}

static void w_send(struct wt_writer *w)
{
	struct wt *g = w->g;
	char v[48];
	w->waiting = false;
	w->ticket = wl_ticket_new(&g->tickets, w, w->seq, &w->fx);
	if (w->ticket == NULL) {
		w_complete(w, WL_FAIL);
		return;
	}
	snprintf(v, sizeof v, "p%u-%" PRIu64, w->pid, w->put);
	int rv = felix_client_cache_put(
	    w->fx.c, WL_FX_NS, CACHE, g->keys[w->shard][w->key],
	    (const uint8_t *)v, strlen(v), false, 0, w_on_answer, w->ticket);
	if (rv != 0) {
		/* Not sent. */
		w_complete(w, WL_FAIL);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(&w->fx);
		}
	}
}

static void w_on_timeout(uv_timer_t *t);

static void w_invoke(struct wt_writer *w)
{
	struct wt *g = w->g;
	if (g->n_puts == g->cap_puts) {
		size_t cap = g->cap_puts ? g->cap_puts * 2 : 4096;
		struct wt_put *np = realloc(g->puts, cap * sizeof *np);
		if (np == NULL) {
			w_schedule(w, RETRY_MS);
			return;
		}
		g->puts = np;
		g->cap_puts = cap;
	}
	w->shard = (unsigned)wl_rand(g->x, 0, SHARDS - 1);
	w->key = (unsigned)wl_rand(g->x, 0, KEYS_PER_SHARD - 1);
	w->put = g->n_puts++;
	memset(&g->puts[w->put], 0, sizeof g->puts[w->put]);
	g->puts[w->put].shard = (uint8_t)w->shard;
	w->busy = true;
	g->busy_writers++;
	w->seq++;
	w_record(w, WL_INVOKE);
	w->waiting = true;
	uv_timer_start(&w->timer, w_on_timeout, wl_ctx_timeout(g->x), 0);
	if (wl_fx_connect(&w->fx)) {
		w_send(w);
	}
}

static void w_on_timeout(uv_timer_t *t)
{
	struct wt_writer *w = t->data;
	struct wt *g = w->g;
	if (!w->busy) {
		/* The think time is over. */
		if (!g->x->ops_over && !g->x->done) {
			w_invoke(w);
		}
		return;
	}
	/* Never sent (no connection in time): it did not happen. No answer
	 * in time: it may still happen; the connection is dropped so that
	 * a stuck one is not reused. */
	bool sent = !w->waiting;
	w_complete(w, sent ? WL_INFO : WL_FAIL);
	if (sent) {
		wl_fx_reset(&w->fx);
	}
}

static void w_schedule(struct wt_writer *w, uint64_t ms)
{
	if (!w->g->x->done && !w->g->x->ops_over) {
		uv_timer_start(&w->timer, w_on_timeout, ms, 0);
	}
}

static void w_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct wt_writer *w = data;
	(void)fx;
	if (w->busy && w->waiting && up) {
		w_send(w);
	}
	/* Down: the put's timer ends it (nothing was sent). */
}

/* --- Watchers --------------------------------------------------------------
 */

static void r_start(struct wt_watcher *r);
static void r_schedule(struct wt_watcher *r, uint64_t ms);

static void r_invoke(struct wt_watcher *r)
{
	char s[8];
	shard_tok(r->shard, s, sizeof s);
	wl_hist_eventf(&r->g->x->hist, r->pid, WL_INVOKE, "recv", s, "%" PRIu64,
	               r->next);
	wbuf_reset(&r->tokens);
	r->n_tokens = 0;
	r->open = true;
}

/* Completes the pending recv: ok with what it delivered, or fail (the
 * watch never started). */
static void r_complete(struct wt_watcher *r, bool ok)
{
	char s[8];
	if (!r->open) {
		return;
	}
	shard_tok(r->shard, s, sizeof s);
	wbuf_put_u8(&r->tokens, 0);
	if (r->tokens.oom) {
		/* Dropped deliveries would read as skipped: say so. */
		wl_hist_comment(&r->g->x->hist,
		                "watcher %u: out of memory, window lost",
		                r->pid);
		ok = false;
	}
	wl_hist_event(&r->g->x->hist, r->pid, ok ? WL_OK : WL_FAIL, "recv", s,
	              ok ? (const char *)r->tokens.data : NULL);
	r->open = false;
	wbuf_reset(&r->tokens);
	r->n_tokens = 0;
}

/* Forgets the current watch (its callbacks go stale). */
static void r_drop(struct wt_watcher *r)
{
	uv_timer_stop(&r->timer);
	uv_timer_stop(&r->flush);
	wl_ticket_drop(&r->ticket);
	if (r->sub != NULL) {
		felix_sub_close(r->sub);
		r->sub = NULL;
	}
	r->state = W_IDLE;
}

static void r_on_retry(uv_timer_t *t)
{
	r_start(t->data);
}

static void r_schedule(struct wt_watcher *r, uint64_t ms)
{
	struct wt *g = r->g;
	if (g->x->done || g->x->deadline) {
		return;
	}
	uv_timer_start(&r->timer, r_on_retry, ms, 0);
}

/* The node being tried did not serve the watch: the next one. */
static void r_next_node(struct wt_watcher *r)
{
	struct wt *g = r->g;
	if (wl_follow_retry(&r->lead, g->x)) {
		r_schedule(r, 0);
		return;
	}
	/* Every node was tried: again from the next, after a pause. */
	wl_follow_next(&r->lead, g->x);
	r->lead.tried = 0;
	r_schedule(r, RETRY_MS);
}

/* "... is led by node N ..." in a refusal: N, or 0. */
static unsigned named_leader(const struct wt *g, const char *message)
{
	const char *p =
	    message != NULL ? strstr(message, "led by node ") : NULL;
	if (p == NULL) {
		return 0;
	}
	unsigned long n = strtoul(p + strlen("led by node "), NULL, 10);
	return n >= 1 && n <= wl_ctx_slots(g->x) ? (unsigned)n : 0;
}

static void r_started(void *data, struct felix_sub *sub, int status,
                      const struct felix_msg *answer, const char *message)
{
	struct wl_ticket *k = data;
	struct wt_watcher *r = k->owner;
	struct wt *g;
	(void)sub;
	if (r == NULL || r->seq != k->seq || r->state != W_ASKED) {
		return;
	}
	g = r->g;
	uv_timer_stop(&r->timer);
	if (status != 0) {
		uv_timer_stop(&r->flush);
		unsigned leader = status == FELIX_CLIENT_EREFUSED
		                      ? named_leader(g, message)
		                      : 0;
		r->sub = NULL; /* dead once this returns */
		wl_ticket_drop(&r->ticket);
		r->state = W_IDLE;
		r_complete(r, false);
		if (status == FELIX_CLIENT_ECLOSED) {
			wl_follow_reset(&r->lead);
		}
		if (leader != 0 && leader != r->lead.node &&
		    ++r->lead.tried < wl_ctx_n_endpoints(g->x)) {
			r->lead.node = leader;
			r_schedule(r, REDIRECT_MS);
		} else {
			r_next_node(r);
		}
		return;
	}
	r->state = W_LIVE;
	r->lead.tried = 0;
	r->watches++;
	g->hint[r->shard] = r->lead.node;
	r->last_ms = wl_ctx_ms(g->x);
	if (answer != NULL && answer->type == FELIX_MSG_CACHE_WATCH_STARTED &&
	    answer->u.cache_watch_started.has_resnapshot &&
	    answer->u.cache_watch_started.resnapshot) {
		/* The history asked for is compacted: current values below
		 * resume_offset, then live changes. The values are not
		 * changes; the chain restarts at resume_offset. */
		char t[40];
		r->snap_below = answer->u.cache_watch_started.resume_offset;
		wl_hist_comment(&g->x->hist,
		                "watcher %u: resnapshot from %" PRIu64
		                ", asked from %" PRIu64,
		                r->pid, r->snap_below, r->next);
		snprintf(t, sizeof t, "%sresnapshot:%" PRIu64,
		         r->n_tokens > 0 ? " " : "", r->snap_below);
		wbuf_append_str(&r->tokens, t);
		r->n_tokens++;
	} else {
		r->snap_below = 0;
	}
}

static void mark_seen(struct wt_watcher *r, const char *v)
{
	struct wt *g = r->g;
	const char *dash = v[0] == 'p' ? strchr(v, '-') : NULL;
	if (dash == NULL) {
		return;
	}
	char *end;
	unsigned long long n = strtoull(dash + 1, &end, 10);
	if (*end == '\0' && n < g->n_puts) {
		g->puts[n].seen |= 1u << r->idx;
	}
}

static void r_change(void *data, struct felix_sub *sub, const char *key,
                     const uint8_t *value, size_t len, uint64_t offset,
                     uint64_t expires_at_millis)
{
	struct wl_ticket *k = data;
	struct wt_watcher *r = k->owner;
	char kt[96], vt[96], item[224];
	(void)sub;
	(void)expires_at_millis;
	if (r == NULL || r->seq != k->seq || r->state != W_LIVE) {
		return;
	}
	r->last_ms = wl_ctx_ms(r->g->x);
	if (r->snap_below > 0 && offset < r->snap_below) {
		return; /* a snapshot value, not a change */
	}
	wl_token_of((const uint8_t *)key, strlen(key), kt, sizeof kt);
	if (value != NULL) {
		wl_token_of(value, len, vt, sizeof vt);
		snprintf(item, sizeof item, "%s%" PRIu64 ":%s:%s",
		         r->n_tokens > 0 ? " " : "", offset, kt, vt);
		mark_seen(r, vt);
	} else {
		snprintf(item, sizeof item, "%s%" PRIu64 ":%s",
		         r->n_tokens > 0 ? " " : "", offset, kt);
	}
	wbuf_append_str(&r->tokens, item);
	r->n_tokens++;
	r->delivered++;
	if (offset + 1 > r->next) {
		r->next = offset + 1;
	}
}

static void r_lagged(void *data, struct felix_sub *sub, uint64_t resume_from)
{
	struct wl_ticket *k = data;
	struct wt_watcher *r = k->owner;
	(void)sub;
	if (r == NULL || r->seq != k->seq || r->state != W_LIVE) {
		return;
	}
	wl_hist_comment(&r->g->x->hist,
	                "watcher %u: cache_watch_lagged resume_from %" PRIu64
	                " (next was %" PRIu64 ")",
	                r->pid, resume_from, r->next);
	r->next = resume_from;
	r->lagged++;
}

static void r_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct wl_ticket *k = data;
	struct wt_watcher *r = k->owner;
	(void)sub;
	(void)why;
	if (r == NULL || r->seq != k->seq) {
		return;
	}
	r->sub = NULL; /* dead once this returns */
	bool live = r->state == W_LIVE;
	r_drop(r);
	r_complete(r, live);
	if (live) {
		/* Again at the same node: it says where the leader is if
		 * that changed. */
		r_schedule(r, REDIRECT_MS);
	} else {
		r_next_node(r);
	}
}

static const struct felix_watch_handlers watch_handlers = {
    r_started,
    r_change,
    r_lagged,
    r_ended,
};

static void r_on_answer_timeout(uv_timer_t *t)
{
	struct wt_watcher *r = t->data;
	if (r->state != W_ASKED && r->state != W_CONNECTING) {
		return;
	}
	bool asked = r->state == W_ASKED;
	r_drop(r);
	r_complete(r, false);
	if (asked) {
		wl_follow_reset(&r->lead);
	}
	r_next_node(r);
}

/* Whether an acknowledged put of r's shard, acknowledged before `by_ms`,
 * is missing from what r saw. */
static bool r_missing(const struct wt_watcher *r, int64_t by_ms)
{
	const struct wt *g = r->g;
	for (size_t i = 0; i < g->n_puts; i++) {
		const struct wt_put *p = &g->puts[i];
		if (p->acked && p->shard == r->shard && p->acked_ms <= by_ms &&
		    !(p->seen & (1u << r->idx))) {
			return true;
		}
	}
	return false;
}

static void r_on_flush(uv_timer_t *t)
{
	struct wt_watcher *r = t->data;
	struct wt *g = r->g;
	if (r->state != W_LIVE || g->x->done) {
		return;
	}
	int64_t now = wl_ctx_ms(g->x);
	if (now - r->last_ms >= STALL_MS && r_missing(r, now - STALL_MS)) {
		/* Open but silent while changes it lacks were acknowledged
		 * (a deposed or cut-off node): watch again. */
		wl_hist_comment(&g->x->hist,
		                "watcher %u: no change for %" PRId64
		                " ms at n%u while acknowledged puts are "
		                "missing: watching again",
		                r->pid, now - r->last_ms, r->lead.node);
		r_drop(r);
		r_complete(r, true);
		r_next_node(r);
		return;
	}
	if (r->n_tokens > 0) {
		r_complete(r, true);
		r_invoke(r);
	}
}

static void r_send(struct wt_watcher *r)
{
	struct wt *g = r->g;
	struct wl_fx *fx = wl_follow_fx(&r->lead);
	struct felix_watch_request q;
	memset(&q, 0, sizeof q);
	q.prefix = PREFIX;
	q.has_shard = true;
	q.shard = r->shard;
	q.has_from_offset = true;
	q.from_offset = r->next;
	r->seq++;
	r->ticket = wl_ticket_new(&g->tickets, r, r->seq, fx);
	if (r->ticket == NULL) {
		r->state = W_IDLE;
		r_schedule(r, RETRY_MS);
		return;
	}
	r_invoke(r);
	r->state = W_ASKED;
	r->snap_below = 0;
	uv_timer_start(&r->timer, r_on_answer_timeout, wl_ctx_timeout(g->x), 0);
	uv_timer_start(&r->flush, r_on_flush, FLUSH_MS, FLUSH_MS);
	r->sub = NULL;
	int rv = felix_client_watch(fx->c, WL_FX_NS, CACHE, &q, &watch_handlers,
	                            r->ticket, &r->sub);
	if (rv != 0) {
		r->sub = NULL;
		r_drop(r);
		r_complete(r, false);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
		r_next_node(r);
	}
}

static void r_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct wt_watcher *r = data;
	if (r->state != W_CONNECTING || fx != wl_follow_fx(&r->lead)) {
		return;
	}
	if (up) {
		uv_timer_stop(&r->timer);
		r_send(r);
		return;
	}
	r->state = W_IDLE;
	uv_timer_stop(&r->timer);
	r_next_node(r);
}

static void r_start(struct wt_watcher *r)
{
	struct wt *g = r->g;
	if (g->x->done || g->x->deadline || r->state != W_IDLE) {
		return;
	}
	r->state = W_CONNECTING;
	/* A connection that never comes up is given up with the op
	 * timeout, as a request would be. */
	uv_timer_start(&r->timer, r_on_answer_timeout, wl_ctx_timeout(g->x), 0);
	if (wl_follow_connect(&r->lead)) {
		uv_timer_stop(&r->timer);
		r_send(r);
	}
}

/* --- The run ---------------------------------------------------------------
 */

static bool all_seen(const struct wt *g)
{
	for (size_t i = 0; i < g->n_puts; i++) {
		const struct wt_put *p = &g->puts[i];
		uint32_t want = ((1u << WATCHERS_PER_SHARD) - 1)
		                << (p->shard * WATCHERS_PER_SHARD);
		if (p->acked && (p->seen & want) != want) {
			return false;
		}
	}
	return true;
}

static void on_drain(uv_timer_t *t)
{
	struct wt *g = t->data;
	if (g->x->done || g->busy_writers > 0) {
		return;
	}
	if (all_seen(g)) {
		g->all_seen = true;
		wl_ctx_done(g->x);
	}
}

static int wt_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct wt *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->nwriters = cfg->procs ? cfg->procs : 2 * cfg->n_nodes;
	g->nprocs = g->nwriters + N_WATCHERS;
	g->writers = calloc(g->nwriters, sizeof *g->writers);
	if (g->writers == NULL) {
		return -ENOMEM;
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		for (unsigned i = 0; i < KEYS_PER_SHARD; i++) {
			char prefix[16];
			snprintf(prefix, sizeof prefix, PREFIX "%u_%u_", j, i);
			wl_fx_key_for_shard(prefix, j, SHARDS, g->keys[j][i],
			                    sizeof g->keys[j][i]);
		}
		g->hint[j] = wl_ctx_home(x, j);
	}
	uv_timer_init(x->loop, &g->drain);
	g->drain.data = g;
	g->drain_init = true;
	wl_hist_comment(&x->hist,
	                "lodestone watch workload: %u writers and %u watchers "
	                "on %u nodes, Felix cache %s/%s/%s (%u shards, keys "
	                "%s %s %s | %s %s %s), watches of prefix \"%s\"",
	                g->nwriters, N_WATCHERS, cfg->n_nodes, WL_FX_TENANT,
	                WL_FX_NS, CACHE, SHARDS, g->keys[0][0], g->keys[0][1],
	                g->keys[0][2], g->keys[1][0], g->keys[1][1],
	                g->keys[1][2], PREFIX);
	for (unsigned i = 0; i < g->nwriters; i++) {
		struct wt_writer *w = &g->writers[i];
		w->g = g;
		w->idx = i;
		w->pid = i;
		uv_timer_init(x->loop, &w->timer);
		w->timer.data = w;
		wl_fx_init_home(&w->fx, x, i, w_on_conn, w);
		wl_fx_connect(&w->fx);
		w_schedule(w, wl_rand(x, 0, THINK_MAX_MS));
	}
	for (unsigned i = 0; i < N_WATCHERS; i++) {
		struct wt_watcher *r = &g->watchers[i];
		r->g = g;
		r->idx = i;
		r->shard = i / WATCHERS_PER_SHARD;
		r->pid = g->nwriters + i;
		wbuf_init(&r->tokens);
		uv_timer_init(x->loop, &r->timer);
		uv_timer_init(x->loop, &r->flush);
		r->timer.data = r;
		r->flush.data = r;
		wl_follow_init(&r->lead, x, wl_ctx_home(x, r->shard + i),
		               r_on_conn, r);
		r_start(r);
	}
	return 0;
}

static void wt_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct wt *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	/* Writers stop after what is in flight; watchers drain. */
	for (unsigned i = 0; i < g->nwriters; i++) {
		if (!g->writers[i].busy) {
			uv_timer_stop(&g->writers[i].timer);
		}
	}
	uv_timer_start(&g->drain, on_drain, 0, DRAIN_CHECK_MS);
}

static int wt_write(struct wl_ctx *x)
{
	struct wt *g = x->impl;
	if (g != NULL) {
		uint64_t delivered = 0;
		unsigned watches = 0, lagged = 0;
		for (unsigned i = 0; i < N_WATCHERS; i++) {
			struct wt_watcher *r = &g->watchers[i];
			r_complete(r, r->state == W_LIVE);
			delivered += r->delivered;
			watches += r->watches;
			lagged += r->lagged;
		}
		snprintf(
		    x->note, sizeof x->note,
		    "%u writers, %u watchers on %u nodes, %zu puts (%" PRIu64
		    " acknowledged), %" PRIu64
		    " changes delivered, %u watches started, %u lagged%s",
		    g->nwriters, N_WATCHERS, x->cfg->n_nodes, g->n_puts,
		    g->puts_ok, delivered, watches, lagged,
		    g->all_seen ? ""
		                : "; the drain ended before every "
		                  "watcher saw every acknowledged put");
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void wt_close(struct wl_ctx *x)
{
	struct wt *g = x->impl;
	if (g == NULL) {
		return;
	}
	if (g->drain_init) {
		wl_close_timer(&g->drain);
	}
	for (unsigned i = 0; g->writers != NULL && i < g->nwriters; i++) {
		struct wt_writer *w = &g->writers[i];
		if (w->g == NULL) {
			continue;
		}
		wl_ticket_drop(&w->ticket);
		wl_close_timer(&w->timer);
		wl_fx_close(&w->fx);
	}
	for (unsigned i = 0; i < N_WATCHERS; i++) {
		struct wt_watcher *r = &g->watchers[i];
		if (r->g == NULL) {
			continue;
		}
		wl_ticket_drop(&r->ticket);
		r->sub = NULL; /* closed with its client */
		wl_close_timer(&r->timer);
		wl_close_timer(&r->flush);
		wl_follow_close(&r->lead, x);
	}
}

static void wt_destroy(struct wl_ctx *x)
{
	struct wt *g = x->impl;
	if (g == NULL) {
		return;
	}
	for (unsigned i = 0; i < N_WATCHERS; i++) {
		wbuf_free(&g->watchers[i].tokens);
	}
	wl_tickets_free(&g->tickets);
	free(g->writers);
	free(g->puts);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_watch = {
    .name = "watch",
    .scopes = scopes,
    .args = wl_fx_args,
    .checker = "watch",
    .checks = {{"history.txt", "watch", jepsen_watchcheck_run}},
    .start = wt_start,
    .phase = wt_phase,
    .write = wt_write,
    .close = wt_close,
    .destroy = wt_destroy,
};
