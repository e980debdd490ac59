/* The stream workload: Felix acknowledged publishes to the 4-shard stream
 * t1/jepsen/s, and subscribers reading it back; checked by streamcheck (no
 * acknowledged record lost, none duplicated, per-shard order, contiguous
 * offsets) and, for acknowledged records that no read saw, by setcheck.
 *
 * Writers (2 per node by default) publish one record `r<n>` at a time
 * with ack per_batch, keyed so that it lands on a chosen shard, through
 * their own node (which forwards to the shard's leader). One reader per
 * shard reads in a loop: it subscribes at the shard's leader (it tries
 * the nodes in turn: subscribes are not forwarded) from the earliest
 * offset first, then from a little before what it last saw, collects what
 * arrives until the subscription goes quiet, and closes it. After the
 * operations, once every writer's last publish has completed, each reader
 * publishes a sentinel record to its shard and, once that is acknowledged,
 * reads the shard from the earliest offset until the sentinel arrives:
 * that final read holds every record acknowledged before it.
 *
 * Felix acks carry no offset, but the stream history needs one on every
 * acknowledged append: it is filled in from the reads (the offset a read
 * saw the record at). An acknowledged record that no read saw has no
 * offset to give, so it is written as `info` in history.txt, and the set
 * projection history-set.txt (every append as an add, the final reads as
 * reads) is checked too: there that record is `lost`. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/setcheck.h"
#include "jepsen/streamcheck.h"
#include "jepsen/workload_felix.h"
#include "wire/buf.h"

#define STREAM "s"
#define SHARDS 4
#define THINK_MAX_MS 20
#define READ_QUIET_MS 300
#define READ_MAX_MS 1500
#define READ_MAX_RECORDS 1000
#define READ_BACK 50
#define READ_PAUSE_MS 200
#define RETRY_MS 200
/* A final read that gets nothing for this long starts again elsewhere. */
#define FINAL_STALL_MS 5000
#define NO_OFFSET INT64_MIN
#define FOREIGN UINT64_MAX

struct st;

struct st_writer {
	struct st *g;
	unsigned pid;
	struct wl_fx fx;
	uv_timer_t timer;
	bool busy;
	bool waiting;
	uint64_t seq;
	struct wl_ticket *ticket;
	unsigned shard;
	uint64_t rec;
};

enum st_stage { R_READS, R_SENTINEL, R_FINAL, R_DONE };

struct st_reader {
	struct st *g;
	unsigned shard;
	unsigned pid;
	struct wl_follow lead;
	uv_timer_t timer; /* pause, op deadline */
	uv_timer_t quiet;
	enum st_stage stage;
	bool busy;     /* an op (read or sentinel append) is in flight */
	bool awaiting; /* waiting for fx[node - 1] to come up */
	uint64_t seq;
	unsigned hint; /* node that served the last read */
	struct felix_sub *sub;
	struct wl_ticket *ticket;
	bool started;
	/* read in progress */
	uint64_t from;          /* 0: earliest */
	struct wbuf tokens;     /* "O:R O:R ..." */
	struct wbuf set_tokens; /* "R R ..." (final read) */
	uint64_t *offs;
	uint64_t *recs; /* record numbers; FOREIGN for others */
	size_t n, cap;
	bool bad; /* events without offsets */
	uint64_t next_from;
	/* sentinel */
	uint64_t sentinel;
	bool sentinel_ok;
	bool sentinel_seen;
};

/* An acknowledged append whose offset is filled in at the end. */
struct st_fix {
	size_t line;
	uint64_t rec;
};

struct st {
	struct wl_ctx *x;
	struct wl_hist set_hist;
	unsigned nwriters;
	unsigned nprocs; /* writers + readers: the pid step after info */
	struct st_writer *writers;
	struct st_reader readers[SHARDS];
	char keys[SHARDS][16];
	struct wl_tickets tickets;
	unsigned writers_busy;
	uint64_t next_rec;
	int64_t *rec_off; /* by record number: first offset read at */
	size_t rec_cap;
	struct st_fix *fixes;
	size_t n_fixes, cap_fixes;
	uint64_t acked;
	unsigned done_readers;
};

static void key_of(unsigned shard, char *out, size_t cap)
{
	snprintf(out, cap, "p%u", shard);
}

/* A new record number (and room for its offset). */
static int new_rec(struct st *g, uint64_t *rec)
{
	if (g->next_rec >= g->rec_cap) {
		size_t cap = g->rec_cap ? g->rec_cap * 2 : 4096;
		int64_t *p = realloc(g->rec_off, cap * sizeof *p);
		if (p == NULL) {
			return -ENOMEM;
		}
		for (size_t i = g->rec_cap; i < cap; i++) {
			p[i] = NO_OFFSET;
		}
		g->rec_off = p;
		g->rec_cap = cap;
	}
	*rec = g->next_rec++;
	return 0;
}

/* An append event, in both histories. */
static void app_event(struct st *g, unsigned pid, enum wl_type t,
                      unsigned shard, uint64_t rec)
{
	char k[8], r[24];
	key_of(shard, k, sizeof k);
	snprintf(r, sizeof r, "r%" PRIu64, rec);
	size_t line = wl_hist_event(&g->x->hist, pid, t, "append", k, r);
	wl_hist_event(&g->set_hist, pid, t, "add", k, r);
	if (t == WL_OK && line != SIZE_MAX) {
		if (g->n_fixes == g->cap_fixes) {
			size_t cap = g->cap_fixes ? g->cap_fixes * 2 : 1024;
			void *p = realloc(g->fixes, cap * sizeof *g->fixes);
			if (p == NULL) {
				g->x->hist.oom = true;
				return;
			}
			g->fixes = p;
			g->cap_fixes = cap;
		}
		g->fixes[g->n_fixes++] = (struct st_fix){line, rec};
		g->acked++;
	}
}

/* --- Writers ----------------------------------------------------------------
 */

static void w_schedule(struct st_writer *w, uint64_t ms);
static void readers_kick(struct st *g);

static void w_complete(struct st_writer *w, enum wl_type t)
{
	struct st *g = w->g;
	uv_timer_stop(&w->timer);
	wl_ticket_drop(&w->ticket);
	app_event(g, w->pid, t, w->shard, w->rec);
	if (t == WL_INFO) {
		w->pid += g->nprocs;
	}
	w->busy = false;
	w->waiting = false;
	g->writers_busy--;
	if (g->x->ops_over) {
		readers_kick(g);
	} else {
		w_schedule(w, wl_rand(g->x, 0, THINK_MAX_MS));
	}
}

static void w_on_ack(void *data, int status, const char *message)
{
	struct wl_ticket *k = data;
	struct st_writer *w = k->owner;
	if (w == NULL || !w->busy || w->seq != k->seq) {
		return;
	}
	w_complete(w,
	           status == 0 ? WL_OK : wl_fx_write_outcome(status, message));
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_fx_reset(&w->fx);
	}
}

static void w_send(struct st_writer *w)
{
	struct st *g = w->g;
	w->waiting = false;
	w->ticket = wl_ticket_new(&g->tickets, w, w->seq, &w->fx);
	if (w->ticket == NULL) {
		w_complete(w, WL_FAIL);
		return;
	}
	int rv = wl_fx_publish_rec(&w->fx, STREAM, g->keys[w->shard], w->rec,
	                           w_on_ack, w->ticket);
	if (rv != 0) {
		w_complete(w, WL_FAIL);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(&w->fx);
		}
	}
}

static void w_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct st_writer *w = data;
	(void)fx;
	if (w->busy && w->waiting && up) {
		w_send(w);
	}
}

static void w_on_timer(uv_timer_t *t);

static void w_invoke(struct st_writer *w)
{
	struct st *g = w->g;
	if (new_rec(g, &w->rec) != 0) {
		return;
	}
	w->shard = (unsigned)wl_rand(g->x, 0, SHARDS - 1);
	w->busy = true;
	w->waiting = true;
	w->seq++;
	g->writers_busy++;
	char k[8], r[24];
	key_of(w->shard, k, sizeof k);
	snprintf(r, sizeof r, "r%" PRIu64, w->rec);
	wl_hist_event(&g->x->hist, w->pid, WL_INVOKE, "append", k, r);
	wl_hist_event(&g->set_hist, w->pid, WL_INVOKE, "add", k, r);
	uv_timer_start(&w->timer, w_on_timer, wl_ctx_timeout(g->x), 0);
	if (wl_fx_connect(&w->fx)) {
		w_send(w);
	}
}

static void w_on_timer(uv_timer_t *t)
{
	struct st_writer *w = t->data;
	struct st *g = w->g;
	if (w->busy) {
		/* Never sent (no connection) or no answer in time. */
		bool sent = !w->waiting;
		w_complete(w, sent ? WL_INFO : WL_FAIL);
		if (sent) {
			wl_fx_reset(&w->fx);
		}
		return;
	}
	if (!g->x->ops_over && !g->x->done) {
		w_invoke(w);
	}
}

static void w_schedule(struct st_writer *w, uint64_t ms)
{
	if (!w->g->x->done) {
		uv_timer_start(&w->timer, w_on_timer, ms, 0);
	}
}

/* --- Readers ----------------------------------------------------------------
 */

static void r_schedule(struct st_reader *r, uint64_t ms);
static void r_try(struct st_reader *r);

static void r_reset_read(struct st_reader *r)
{
	wbuf_reset(&r->tokens);
	wbuf_reset(&r->set_tokens);
	r->n = 0;
	r->bad = false;
	r->started = false;
	r->sentinel_seen = false;
}

/* Stops the current subscription attempt (its callbacks go stale). */
static void r_drop_sub(struct st_reader *r)
{
	uv_timer_stop(&r->quiet);
	wl_ticket_drop(&r->ticket);
	if (r->sub != NULL) {
		felix_sub_close(r->sub);
		r->sub = NULL;
	}
	r->awaiting = false;
}

static void r_event(struct st_reader *r, enum wl_type t, const char *vals,
                    bool set_too)
{
	struct st *g = r->g;
	char k[8];
	key_of(r->shard, k, sizeof k);
	wl_hist_event(&g->x->hist, r->pid, t, "read", k, vals);
	if (set_too) {
		wl_hist_event(&g->set_hist, r->pid, t, "read", k,
		              t == WL_OK ? (const char *)r->set_tokens.data
		                         : NULL);
	}
}

static void r_after(struct st_reader *r)
{
	struct st *g = r->g;
	r->busy = false;
	uv_timer_stop(&r->timer);
	if (r->stage == R_DONE) {
		g->done_readers++;
		if (g->done_readers == SHARDS) {
			wl_ctx_done(g->x);
		}
		return;
	}
	r_schedule(r, r->stage == R_READS ? READ_PAUSE_MS : RETRY_MS);
}

static void r_read_ok(struct st_reader *r)
{
	struct st *g = r->g;
	bool final = r->stage == R_FINAL;
	r_drop_sub(r);
	wbuf_put_u8(&r->tokens, 0);
	wbuf_put_u8(&r->set_tokens, 0);
	if (r->tokens.oom || r->set_tokens.oom) {
		r_event(r, WL_FAIL, NULL, final);
		r_after(r);
		return;
	}
	r_event(r, WL_OK, (const char *)r->tokens.data, final);
	for (size_t i = 0; i < r->n; i++) {
		if (r->recs[i] != FOREIGN && r->recs[i] < g->next_rec &&
		    g->rec_off[r->recs[i]] == NO_OFFSET) {
			g->rec_off[r->recs[i]] = (int64_t)r->offs[i];
		}
	}
	if (r->n > 0) {
		uint64_t last = r->offs[r->n - 1] + 1;
		r->next_from = last > READ_BACK ? last - READ_BACK : 0;
	}
	r->hint = r->lead.node;
	if (final) {
		r->stage = R_DONE;
	}
	r_after(r);
}

static void r_read_fail(struct st_reader *r)
{
	r_drop_sub(r);
	r_event(r, WL_FAIL, NULL, r->stage == R_FINAL);
	r_after(r);
}

static void r_on_retry(uv_timer_t *t)
{
	r_try(t->data);
}

static void r_next_node(struct st_reader *r)
{
	struct st *g = r->g;
	r_drop_sub(r);
	if (!wl_follow_retry(&r->lead, g->x)) {
		if (r->stage == R_FINAL && !g->x->deadline) {
			/* The final read keeps trying until the deadline;
			 * what it collected from a failed attempt is
			 * dropped. */
			r->lead.tried = 0;
			r_reset_read(r);
			uv_timer_start(&r->quiet, r_on_retry, RETRY_MS, 0);
			return;
		}
		r_read_fail(r);
		return;
	}
	r_reset_read(r);
	r_try(r);
}

static void r_on_quiet(uv_timer_t *t)
{
	struct st_reader *r = t->data;
	if (!r->busy || !r->started) {
		return;
	}
	if (r->stage == R_READS) {
		r_read_ok(r);
	} else if (r->stage == R_FINAL) {
		r_next_node(r);
	}
}

static void r_started(void *data, struct felix_sub *sub, int status,
                      const struct felix_msg *answer, const char *message)
{
	struct wl_ticket *k = data;
	struct st_reader *r = k->owner;
	(void)answer;
	(void)message;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	if (status != 0) {
		r->sub = NULL; /* dead once this returns */
		r_next_node(r);
		return;
	}
	(void)sub;
	r->started = true;
	uv_timer_start(&r->quiet, r_on_quiet,
	               r->stage == R_READS ? READ_QUIET_MS : FINAL_STALL_MS, 0);
}

static void r_events(void *data, struct felix_sub *sub, bool has_offset,
                     uint64_t base, const struct felix_view *payloads,
                     uint32_t count)
{
	struct wl_ticket *k = data;
	struct st_reader *r = k->owner;
	char tok[160], item[200];
	(void)sub;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	if (!has_offset) {
		r->bad = true;
		r_read_fail(r);
		return;
	}
	if (r->n + count > r->cap) {
		size_t cap = r->cap ? r->cap : 1024;
		while (cap < r->n + count) {
			cap *= 2;
		}
		uint64_t *o = realloc(r->offs, cap * sizeof *o);
		if (o != NULL) {
			r->offs = o;
		}
		uint64_t *q = realloc(r->recs, cap * sizeof *q);
		if (q != NULL) {
			r->recs = q;
		}
		if (o == NULL || q == NULL) {
			r_read_fail(r);
			return;
		}
		r->cap = cap;
	}
	for (uint32_t i = 0; i < count; i++) {
		const struct felix_view *p = &payloads[i];
		uint64_t rec = FOREIGN;
		wl_token_of(p->data, p->len, tok, sizeof tok);
		if (tok[0] == 'r' && tok[1] != '\0') {
			char *end;
			unsigned long long v = strtoull(tok + 1, &end, 10);
			if (*end == '\0') {
				rec = v;
			}
		}
		r->offs[r->n] = base + i;
		r->recs[r->n] = rec;
		r->n++;
		snprintf(item, sizeof item, "%s%" PRIu64 ":%s",
		         r->tokens.len > 0 ? " " : "", base + i, tok);
		wbuf_append_str(&r->tokens, item);
		if (r->stage == R_FINAL) {
			snprintf(item, sizeof item, "%s%s",
			         r->set_tokens.len > 0 ? " " : "", tok);
			wbuf_append_str(&r->set_tokens, item);
			if (rec == r->sentinel) {
				r->sentinel_seen = true;
			}
		}
	}
	if (r->stage == R_FINAL) {
		if (r->sentinel_seen) {
			r_read_ok(r);
		} else {
			uv_timer_start(&r->quiet, r_on_quiet, FINAL_STALL_MS,
			               0);
		}
		return;
	}
	if (r->n >= READ_MAX_RECORDS) {
		r_read_ok(r);
		return;
	}
	uv_timer_start(&r->quiet, r_on_quiet, READ_QUIET_MS, 0);
}

static void r_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct wl_ticket *k = data;
	struct st_reader *r = k->owner;
	(void)sub;
	(void)why;
	if (r == NULL || r->seq != k->seq || !r->busy) {
		return;
	}
	r->sub = NULL; /* dead once this returns */
	if (r->stage == R_READS && r->started) {
		/* What arrived is a valid prefix of the shard. */
		r_read_ok(r);
		return;
	}
	r_next_node(r);
}

static const struct felix_sub_handlers sub_handlers = {
    r_started,
    r_events,
    r_ended,
};

static void r_subscribe(struct st_reader *r)
{
	struct st *g = r->g;
	struct wl_fx *fx = wl_follow_fx(&r->lead);
	struct felix_start start;
	memset(&start, 0, sizeof start);
	if (r->from == 0) {
		start.kind = FELIX_START_EARLIEST;
	} else {
		start.kind = FELIX_START_OFFSET;
		start.offset = r->from;
	}
	r->awaiting = false;
	r->ticket = wl_ticket_new(&g->tickets, r, r->seq, fx);
	if (r->ticket == NULL) {
		r_read_fail(r);
		return;
	}
	r->sub = NULL;
	if (felix_client_subscribe(fx->c, WL_FX_NS, STREAM, r->shard, &start,
	                           &sub_handlers, r->ticket, &r->sub) != 0) {
		r->sub = NULL;
		r_next_node(r);
	}
}

/* The sentinel append on the node being tried. */
static void r_sentinel_send(struct st_reader *r);

static void r_on_conn(void *data, struct wl_fx *fx, bool up)
{
	struct st_reader *r = data;
	if (!r->busy || !r->awaiting || fx != wl_follow_fx(&r->lead)) {
		return;
	}
	r->awaiting = false;
	if (!up) {
		if (r->stage == R_SENTINEL) {
			wl_follow_next(&r->lead, r->g->x);
			r_sentinel_send(r);
		} else {
			r_next_node(r);
		}
		return;
	}
	if (r->stage == R_SENTINEL) {
		r_sentinel_send(r);
	} else {
		r_subscribe(r);
	}
}

/* Tries the current node for the read in progress. */
static void r_try(struct st_reader *r)
{
	if (!r->busy || r->g->x->done) {
		return;
	}
	r->awaiting = true;
	if (wl_follow_connect(&r->lead)) {
		r_subscribe(r);
	}
}

static void r_on_deadline(uv_timer_t *t)
{
	struct st_reader *r = t->data;
	if (!r->busy) {
		return;
	}
	if (r->stage == R_SENTINEL) {
		/* No answer in time: it may still happen; another one. */
		struct st *g = r->g;
		wl_ticket_drop(&r->ticket);
		bool sent = !r->awaiting;
		r->awaiting = false;
		app_event(g, r->pid, sent ? WL_INFO : WL_FAIL, r->shard,
		          r->sentinel);
		if (sent) {
			r->pid += g->nprocs;
			wl_follow_reset(&r->lead);
		}
		wl_follow_next(&r->lead, g->x);
		r_after(r);
		return;
	}
	if (r->started && r->stage == R_READS) {
		r_read_ok(r);
	} else {
		r_read_fail(r);
	}
}

static void r_read_invoke(struct st_reader *r)
{
	r->busy = true;
	r->seq++;
	wl_follow_start(&r->lead, r->hint);
	r->from = r->stage == R_FINAL ? 0 : r->next_from;
	r_reset_read(r);
	r_event(r, WL_INVOKE, NULL, r->stage == R_FINAL);
	if (r->stage == R_READS) {
		uv_timer_start(&r->timer, r_on_deadline, READ_MAX_MS, 0);
	}
	r_try(r);
}

static void r_on_ack(void *data, int status, const char *message)
{
	struct wl_ticket *k = data;
	struct st_reader *r = k->owner;
	if (r == NULL || r->seq != k->seq || !r->busy ||
	    r->stage != R_SENTINEL) {
		return;
	}
	struct st *g = r->g;
	wl_ticket_drop(&r->ticket);
	enum wl_type t =
	    status == 0 ? WL_OK : wl_fx_write_outcome(status, message);
	app_event(g, r->pid, t, r->shard, r->sentinel);
	if (t == WL_INFO) {
		r->pid += g->nprocs;
	}
	if (status == FELIX_CLIENT_ECLOSED) {
		wl_follow_reset(&r->lead);
	}
	if (t == WL_OK) {
		r->sentinel_ok = true;
		r->stage = R_FINAL;
	} else {
		wl_follow_next(&r->lead, g->x);
	}
	r_after(r);
}

static void r_sentinel_send(struct st_reader *r)
{
	struct st *g = r->g;
	if (!wl_follow_connect(&r->lead)) {
		r->awaiting = true;
		return;
	}
	struct wl_fx *fx = wl_follow_fx(&r->lead);
	r->awaiting = false;
	r->ticket = wl_ticket_new(&g->tickets, r, r->seq, fx);
	if (r->ticket == NULL) {
		return;
	}
	int rv = wl_fx_publish_rec(fx, STREAM, g->keys[r->shard], r->sentinel,
	                           r_on_ack, r->ticket);
	if (rv != 0) {
		wl_ticket_drop(&r->ticket);
		app_event(g, r->pid, WL_FAIL, r->shard, r->sentinel);
		if (rv == FELIX_CLIENT_ECLOSED) {
			wl_fx_reset(fx);
		}
		wl_follow_next(&r->lead, g->x);
		r_after(r);
	}
}

static void r_sentinel_invoke(struct st_reader *r)
{
	struct st *g = r->g;
	char k[8], rec[24];
	if (new_rec(g, &r->sentinel) != 0) {
		return;
	}
	r->busy = true;
	r->seq++;
	key_of(r->shard, k, sizeof k);
	snprintf(rec, sizeof rec, "r%" PRIu64, r->sentinel);
	wl_hist_event(&g->x->hist, r->pid, WL_INVOKE, "append", k, rec);
	wl_hist_event(&g->set_hist, r->pid, WL_INVOKE, "add", k, rec);
	uv_timer_start(&r->timer, r_on_deadline, wl_ctx_timeout(g->x), 0);
	r->awaiting = true;
	r_sentinel_send(r);
}

static void r_go(uv_timer_t *t)
{
	struct st_reader *r = t->data;
	struct st *g = r->g;
	if (r->busy || g->x->done || g->x->deadline) {
		return;
	}
	if (r->stage == R_READS && g->x->ops_over) {
		if (g->writers_busy > 0) {
			return; /* kicked again when the writers are done */
		}
		wl_hist_comment(&g->x->hist, "final stage of shard p%u",
		                r->shard);
		r->stage = R_SENTINEL;
	}
	switch (r->stage) {
	case R_READS:
	case R_FINAL:
		r_read_invoke(r);
		break;
	case R_SENTINEL:
		r_sentinel_invoke(r);
		break;
	case R_DONE:
		break;
	}
}

static void r_schedule(struct st_reader *r, uint64_t ms)
{
	if (!r->g->x->done) {
		uv_timer_start(&r->timer, r_go, ms, 0);
	}
}

static void readers_kick(struct st *g)
{
	if (g->writers_busy > 0) {
		return;
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		if (!g->readers[j].busy) {
			r_schedule(&g->readers[j], 0);
		}
	}
}

/* --- The workload ------------------------------------------------------------
 */

static int st_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct st *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	wl_hist_init(&g->set_hist, cfg->t0_ns);
	g->nwriters = cfg->procs ? cfg->procs : 2 * cfg->n_nodes;
	g->nprocs = g->nwriters + SHARDS;
	g->writers = calloc(g->nwriters, sizeof *g->writers);
	if (g->writers == NULL) {
		return -ENOMEM;
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		wl_fx_key_for_shard("k", j, SHARDS, g->keys[j],
		                    sizeof g->keys[j]);
	}
	wl_hist_comment(&x->hist,
	                "lodestone stream workload: %u writers on %u nodes, "
	                "one reader per shard, Felix stream %s/%s/%s with "
	                "%u shards (key p<j> = shard j)",
	                g->nwriters, cfg->n_nodes, WL_FX_TENANT, WL_FX_NS,
	                STREAM, SHARDS);
	wl_hist_comment(&x->hist,
	                "ok appends carry the offset a read saw the record "
	                "at (Felix acks carry none)");
	wl_hist_comment(&g->set_hist,
	                "set projection of the stream workload: appends as "
	                "adds, the final read of each shard as its read");
	for (unsigned i = 0; i < g->nwriters; i++) {
		struct st_writer *w = &g->writers[i];
		w->g = g;
		w->pid = i;
		uv_timer_init(x->loop, &w->timer);
		w->timer.data = w;
		wl_fx_init_home(&w->fx, x, i, w_on_conn, w);
		wl_fx_connect(&w->fx);
		w_schedule(w, wl_rand(x, 0, THINK_MAX_MS));
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		struct st_reader *r = &g->readers[j];
		r->g = g;
		r->shard = j;
		r->pid = g->nwriters + j;
		r->hint = wl_ctx_home(x, j);
		uv_timer_init(x->loop, &r->timer);
		uv_timer_init(x->loop, &r->quiet);
		r->timer.data = r;
		r->quiet.data = r;
		wbuf_init(&r->tokens);
		wbuf_init(&r->set_tokens);
		wl_follow_init(&r->lead, x, r->hint, r_on_conn, r);
		r_schedule(r, 500 + 100 * j);
	}
	return 0;
}

static void st_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct st *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	for (unsigned i = 0; i < g->nwriters; i++) {
		if (!g->writers[i].busy) {
			uv_timer_stop(&g->writers[i].timer);
		}
	}
	readers_kick(g);
}

/* Fills in the offsets of acknowledged appends (see the header comment). */
static void fix_offsets(struct st *g)
{
	struct wl_hist *h = &g->x->hist;
	for (size_t i = 0; i < g->n_fixes; i++) {
		const struct st_fix *f = &g->fixes[i];
		const char *old = f->line < h->n ? h->lines[f->line] : NULL;
		char *line = NULL;
		if (old == NULL) {
			continue;
		}
		int64_t off =
		    f->rec < g->next_rec ? g->rec_off[f->rec] : NO_OFFSET;
		if (off != NO_OFFSET) {
			if (asprintf(&line, "%s %" PRId64, old, off) < 0) {
				line = NULL;
			}
		} else {
			/* "<time> <pid> ok append ..." -> info, since no
			 * offset is known. */
			const char *ok = strstr(old, " ok append ");
			if (ok != NULL &&
			    asprintf(&line,
			             "# r%" PRIu64 " was acknowledged but no "
			             "read saw it: no offset to check here; "
			             "history-set.txt checks it\n%.*s info%s",
			             f->rec, (int)(ok - old), old,
			             ok + 3) < 0) {
				line = NULL;
			}
		}
		if (line != NULL) {
			wl_hist_replace(h, f->line, line);
		}
	}
}

static int st_write(struct wl_ctx *x)
{
	struct st *g = x->impl;
	int rc;
	if (g == NULL) {
		rc = wl_ctx_write(x, &x->hist, "history.txt");
		return rc != 0 ? rc
		               : wl_ctx_write(x, &x->hist, "history-set.txt");
	}
	unsigned finals = 0;
	for (unsigned j = 0; j < SHARDS; j++) {
		finals += g->readers[j].stage == R_DONE;
	}
	snprintf(x->note, sizeof x->note,
	         "%u writers and %u readers on %u nodes, %" PRIu64
	         " records acknowledged, %u/%u shards read to their "
	         "sentinel",
	         g->nwriters, SHARDS, x->cfg->n_nodes, g->acked, finals,
	         SHARDS);
	fix_offsets(g);
	rc = wl_ctx_write(x, &x->hist, "history.txt");
	int rc2 = wl_ctx_write(x, &g->set_hist, "history-set.txt");
	g->set_hist.frozen = true;
	return rc != 0 ? rc : rc2;
}

static void st_close(struct wl_ctx *x)
{
	struct st *g = x->impl;
	if (g == NULL) {
		return;
	}
	for (unsigned i = 0; g->writers != NULL && i < g->nwriters; i++) {
		struct st_writer *w = &g->writers[i];
		if (w->g == NULL) {
			continue;
		}
		wl_close_timer(&w->timer);
		wl_fx_close(&w->fx);
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		struct st_reader *r = &g->readers[j];
		if (r->g == NULL) {
			continue;
		}
		wl_ticket_drop(&r->ticket);
		r->sub = NULL; /* closed with its connection */
		wl_close_timer(&r->timer);
		wl_close_timer(&r->quiet);
		wl_follow_close(&r->lead, x);
	}
}

static void st_destroy(struct wl_ctx *x)
{
	struct st *g = x->impl;
	if (g == NULL) {
		return;
	}
	for (unsigned j = 0; j < SHARDS; j++) {
		struct st_reader *r = &g->readers[j];
		wbuf_free(&r->tokens);
		wbuf_free(&r->set_tokens);
		free(r->offs);
		free(r->recs);
	}
	wl_tickets_free(&g->tickets);
	wl_hist_free(&g->set_hist);
	free(g->writers);
	free(g->rec_off);
	free(g->fixes);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_stream = {
    .name = "stream",
    .scopes = WL_FX_SCOPES,
    .args = wl_fx_args,
    .checker = "stream + set",
    .checks = {{"history.txt", "stream", jepsen_streamcheck_run},
               {"history-set.txt", "set", jepsen_setcheck_run}},
    .start = st_start,
    .phase = st_phase,
    .write = st_write,
    .close = st_close,
    .destroy = st_destroy,
};
