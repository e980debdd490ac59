/* The flow workload: FerricFlow workers over FSNP (client/flow_client.h)
 * under faults, checked by jepsen/flowcheck.
 *
 * Processes (3 per node by default) each hold one FSNP connection to
 * their node, without topology (the node forwards to the shard's leader),
 * and run one operation at a time with a short random pause between
 * operations. Flows live in NPARTS partitions ("jp0".."jp7"), so every
 * call is routed by its partition. A process without a lease creates a
 * flow (idempotent creates, so a lost connection replays them) or claims
 * due flows of a random partition (lease LEASE_MS, CLAIM_LIMIT at a time,
 * worked on one after the other); with a lease it heartbeats
 * (EXTEND_LEASE), completes or retries, each after up to WORK_MAX_MS of
 * work. One claim in ZOMBIE_PCT is held past its lease before completing,
 * so that other workers reclaim the flow first and the late complete
 * carries a stale lease and fencing token, which the server must refuse. After
 * the operations, every flow ever created (acknowledged or not) is read once on
 * the healed cluster (FLOW.GET).
 *
 * Schedules: one more process creates, at the start, three interval
 * schedules with short periods and a one-shot (FLOW.SCHEDULE.CREATE),
 * whose targets (type SCHED_TYPE, partition SCHED_PK) nobody works on; the
 * nodes' built-in schedulers fire them under the faults. After the
 * operations it pauses the intervals (FLOW.SCHEDULE.PAUSE), reads every
 * schedule (FLOW.SCHEDULE.GET: fire and coalesced counts, next run; a
 * one-shot is read until it has fired, or a bounded while), then drains
 * the targets' partition with FLOW.CLAIM_DUE until it has found as many
 * targets as the schedules counted fires (and the partition answers
 * empty), or it stayed empty for a bounded while. Each target found is
 * `target SID TID` (the target id names its due time and fire count), each
 * final schedule read `schedule SID KIND STATE EVERY START FIRES COALESCED
 * NEXT END_REASON` (jepsen/flowcheck.h).
 *
 * Outcomes: an answer is `ok`; an error the server gives before or
 * instead of executing (busy, a reroute it marks safe to retry, a refused
 * argument, a Flow state-machine refusal such as "ERR stale flow lease")
 * is `fail`; a timeout, a lost connection or any other error is `info`.
 * A claim is recorded only when it answers with a flow (as `claim ID
 * FENCE`, invocation and completion together): a claim that failed or
 * returned nothing changed nothing the checker judges, and one whose
 * answer was lost only raised a fencing token. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/flow_client.h"
#include "jepsen/flowcheck.h"
#include "jepsen/workload_impl.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_value.h"

#define NPARTS 8
#define LEASE_MS 1500
/* Claims take up to two flows: with a limit above one the server takes an
 * expired lease first (reclaim_ratio), so flows held past their lease are
 * reclaimed while new work is due. */
#define CLAIM_LIMIT 2
#define ZOMBIE_PCT 25
#define ZOMBIE_EXTRA_MS 700
#define WORK_MAX_MS 400
#define THINK_MAX_MS 20
#define ID_LEN 24
#define PK_LEN 8
#define TOKEN_LEN 160
#define FLOW_TYPE "jflow"

/* The schedule phase. */
#define NSCHED 4
#define SCHED_PK "js"
#define SCHED_TYPE "jsched"
#define SCHED_START_MS 500    /* first due time after the create */
#define SCHED_ONCE_MS 3000    /* the one-shot's due time after its create */
#define SCHED_RETRY_MS 250    /* pause before a refused or lost call again */
#define SCHED_ONCE_WAIT 40    /* final reads of an unfired one-shot */
#define SCHED_DRAIN_LIMIT 100 /* targets per claim */
#define SCHED_DRAIN_LEASE_MS 2000
#define SCHED_DRAIN_EMPTY 16    /* empty claims before the drain gives up */
#define SCHED_PID_BASE 1000000u /* its logical processes */

static const struct {
	const char *id;
	const char *kind;
	int64_t every;
} sched_defs[NSCHED] = {
    {"js-a", "interval", 300},
    {"js-b", "interval", 700},
    {"js-c", "interval", 1100},
    {"js-once", "one_shot", 0},
};

enum sp_stage {
	SP_CREATE,
	SP_IDLE,
	SP_PAUSE,
	SP_READ,
	SP_DRAIN,
	SP_DONE,
	SP_FINISHED,
};

struct fl_sched {
	int64_t start; /* first due time (one-shot: at_ms), fixed at start */
	bool acked;    /* a create answered ok */
	bool read;     /* the final read answered */
	bool found;
	unsigned reads;
	char state[16], end_reason[24];
	int64_t fires, coalesced, next;
};

/* The schedule process. */
struct fl_sp {
	struct flw *g;
	struct fsnp_client *c;
	uv_timer_t t;
	unsigned pid;
	enum sp_stage stage;
	unsigned i; /* the schedule in hand */
	bool busy;
	struct fl_sched s[NSCHED];
	char (*seen)[ID_LEN * 2]; /* target ids found */
	size_t n_seen, cap_seen;
	unsigned empty;
	struct flow_record *claimed;
};

enum fl_f { F_CREATE, F_CLAIM, F_COMPLETE, F_RETRY, F_EXTEND, F_READ };
static const char *const f_names[] = {
    [F_CREATE] = "create", [F_CLAIM] = "claim",   [F_COMPLETE] = "complete",
    [F_RETRY] = "retry",   [F_EXTEND] = "extend", [F_READ] = "read",
};

struct fl_flow {
	char id[ID_LEN];
	char pk[PK_LEN];
};

/* A claimed flow waiting for its worker. */
struct fl_lease {
	char id[ID_LEN];
	char token[TOKEN_LEN];
	int64_t fence;
};

struct flw;

struct fl_proc {
	struct flw *g;
	unsigned idx;
	unsigned node; /* its FSNP connection's node */
	unsigned pid;  /* logical process; +nprocs after an info */
	struct fsnp_client *c;
	uv_timer_t think;
	bool busy;
	bool final; /* the op in flight is a final read */
	enum fl_f f;
	bool recorded; /* the reply handler wrote the op's events */
	char id[ID_LEN];
	char pk[PK_LEN];
	/* The lease worked on, if any. */
	bool holding;
	bool zombie;
	unsigned extends;
	char token[TOKEN_LEN];
	int64_t fence;
	/* The other flows of its claim, worked on next. */
	struct fl_lease next[CLAIM_LIMIT - 1];
	unsigned n_next;
};

struct flw {
	struct wl_ctx *x;
	unsigned nprocs;
	struct fl_proc *procs;
	struct fl_flow *flows; /* every flow a create was invoked for */
	size_t n_flows, cap_flows;
	size_t next_final;
	unsigned busy;
	bool finals;
	uint64_t claims, stale_refused, zombies;
	struct fl_sp sp;
};

static int64_t wall_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void schedule(struct fl_proc *p, uint64_t ms);
static void maybe_finish(struct flw *g);

static void record(struct fl_proc *p, enum wl_type t)
{
	struct wl_hist *hi = &p->g->x->hist;
	if (p->f == F_CREATE || p->f == F_READ) {
		wl_hist_event(hi, p->pid, t, f_names[p->f], p->id, NULL);
	} else {
		wl_hist_eventf(hi, p->pid, t, f_names[p->f], p->id, "%" PRId64,
		               p->fence);
	}
}

/* Ends the op in flight with outcome t. */
static void complete(struct fl_proc *p, enum wl_type t)
{
	struct flw *g = p->g;
	uint64_t wait;

	if (p->f != F_CLAIM && p->f != F_READ && !p->recorded) {
		record(p, t);
	}
	if (t == WL_INFO && !p->recorded) {
		p->pid += g->nprocs;
	}
	if (p->f == F_COMPLETE || p->f == F_RETRY ||
	    (p->f == F_EXTEND && t != WL_OK)) {
		p->holding = false;
		if (p->n_next > 0 && !g->x->ops_over) {
			/* The next flow of the claim. */
			const struct fl_lease *l = &p->next[--p->n_next];
			snprintf(p->id, ID_LEN, "%s", l->id);
			snprintf(p->token, TOKEN_LEN, "%s", l->token);
			p->fence = l->fence;
			p->holding = true;
			p->zombie = false;
			p->extends = 0;
		}
	}
	p->busy = false;
	g->busy--;
	if (p->final && t != WL_OK && !g->x->deadline) {
		/* A final read must succeed: read the flow again. */
		g->next_final--;
		snprintf(g->flows[g->next_final].id, ID_LEN, "%s", p->id);
		snprintf(g->flows[g->next_final].pk, PK_LEN, "%s", p->pk);
	}
	wait = g->x->ops_over ? 0 : wl_rand(g->x, 0, THINK_MAX_MS);
	if (p->holding && !g->x->ops_over) {
		/* Work on the flow for a while; a zombie past its lease. */
		wait = p->zombie ? LEASE_MS + ZOMBIE_EXTRA_MS
		                 : wl_rand(g->x, 0, WORK_MAX_MS);
	}
	schedule(p, wait);
}

/* The outcome of an error reply. */
static enum wl_type error_outcome(const struct fl_proc *p,
                                  const struct fsnp_reply *rep)
{
	bool safe = false;
	const char *m = rep->message ? rep->message : "";

	if (rep->error != FSNP_CLIENT_OK) {
		return p->f == F_READ || rep->error == FSNP_CLIENT_ENOMEM ||
		               rep->error == FSNP_CLIENT_EINVAL
		           ? WL_FAIL
		           : WL_INFO;
	}
	switch (rep->status) {
	case FSNP_STATUS_BUSY:
	case FSNP_STATUS_AUTH:
	case FSNP_STATUS_NOPERM:
	case FSNP_STATUS_BAD_REQUEST:
		return WL_FAIL;
	case FSNP_STATUS_REROUTE:
		if (rep->value.tag == FSNP_MAP) {
			fsnp_map_bool(&rep->value, "safe_to_retry", &safe);
		}
		return p->f == F_READ || safe ? WL_FAIL : WL_INFO;
	default:
		/* The state machine's refusals: it applied the command and
		 * changed nothing; but the refusal of a replay (sent again
		 * after a lost connection) may answer for an earlier send
		 * that took effect. */
		if (p->f == F_READ) {
			return WL_FAIL;
		}
		return rep->attempts <= 1 &&
		               (strncmp(m, "ERR stale flow lease", 20) == 0 ||
		                strncmp(m, "ERR flow ", 9) == 0)
		           ? WL_FAIL
		           : WL_INFO;
	}
}

static void on_claim(struct fl_proc *p, const struct fsnp_reply *rep)
{
	struct flw *g = p->g;
	struct flow_record r[CLAIM_LIMIT];
	char id[ID_LEN];
	size_t n = 0;

	if (flow_client_parse_claims(&rep->value, r, CLAIM_LIMIT, &n) != 0 ||
	    n == 0) {
		complete(p, WL_FAIL);
		return;
	}
	/* Every flow claimed is leased: record them all, work on the
	 * first (a reclaimed one when there was any), then the others. */
	p->n_next = 0;
	for (size_t i = n; i-- > 0;) {
		snprintf(id, ID_LEN, "%.*s", (int)r[i].id.len,
		         (const char *)r[i].id.ptr);
		wl_hist_eventf(&g->x->hist, p->pid, WL_INVOKE, "claim", id,
		               "%" PRId64, r[i].fencing_token);
		wl_hist_eventf(&g->x->hist, p->pid, WL_OK, "claim", id,
		               "%" PRId64, r[i].fencing_token);
		g->claims++;
		if (i > 0) {
			struct fl_lease *l = &p->next[p->n_next++];
			snprintf(l->id, ID_LEN, "%s", id);
			snprintf(l->token, TOKEN_LEN, "%.*s",
			         (int)r[i].lease_token.len,
			         (const char *)r[i].lease_token.ptr);
			l->fence = r[i].fencing_token;
		}
	}
	snprintf(p->id, ID_LEN, "%s", id);
	snprintf(p->token, TOKEN_LEN, "%.*s", (int)r[0].lease_token.len,
	         (const char *)r[0].lease_token.ptr);
	p->fence = r[0].fencing_token;
	p->holding = true;
	p->extends = 0;
	p->zombie = wl_rand(g->x, 0, 99) < ZOMBIE_PCT;
	g->zombies += p->zombie;
	p->recorded = true;
	complete(p, WL_OK);
}

static void on_read(struct fl_proc *p, const struct fsnp_reply *rep)
{
	struct flow_record r;
	char v[256];
	int rv = flow_client_parse_record(&rep->value, &r);

	if (rv == FLOW_CLIENT_ENOTFOUND) {
		wl_hist_event(&p->g->x->hist, p->pid, WL_INVOKE, "read", p->id,
		              NULL);
		wl_hist_event(&p->g->x->hist, p->pid, WL_OK, "read", p->id,
		              "nil");
	} else if (rv != 0 || r.state.len == 0 ||
	           !wl_token_ok((const char *)r.state.ptr, r.state.len)) {
		complete(p, WL_FAIL);
		return;
	} else {
		char next[24] = "nil", dl[24] = "nil";
		if (r.has_next_run_at_ms) {
			snprintf(next, sizeof next, "%" PRId64,
			         r.next_run_at_ms);
		}
		if (r.has_lease_deadline_ms && r.lease_deadline_ms != 0) {
			snprintf(dl, sizeof dl, "%" PRId64,
			         r.lease_deadline_ms);
		}
		snprintf(v, sizeof v, "%.*s %" PRId64 " %s %s %" PRId64,
		         (int)r.state.len, (const char *)r.state.ptr,
		         r.fencing_token, next, dl, wall_ms());
		wl_hist_event(&p->g->x->hist, p->pid, WL_INVOKE, "read", p->id,
		              NULL);
		wl_hist_event(&p->g->x->hist, p->pid, WL_OK, "read", p->id, v);
	}
	p->recorded = true; /* above, with its values */
	complete(p, WL_OK);
}

static void on_reply(void *data, const struct fsnp_reply *rep)
{
	struct fl_proc *p = data;

	if (!p->busy) {
		return;
	}
	if (rep->error != FSNP_CLIENT_OK || rep->status != FSNP_STATUS_OK ||
	    rep->custom) {
		enum wl_type t = rep->custom && rep->error == FSNP_CLIENT_OK &&
		                         rep->status == FSNP_STATUS_OK
		                     ? WL_INFO
		                     : error_outcome(p, rep);
		if (p->f != F_CLAIM && p->f != F_READ && t == WL_FAIL &&
		    rep->message != NULL &&
		    strncmp(rep->message, "ERR stale flow lease", 20) == 0) {
			p->g->stale_refused++;
		}
		complete(p, t);
		return;
	}
	switch (p->f) {
	case F_CLAIM:
		on_claim(p, rep);
		return;
	case F_READ:
		on_read(p, rep);
		return;
	default:
		complete(p, WL_OK);
		return;
	}
}

static void invoke(struct fl_proc *p)
{
	static const uint16_t ops[] = {
	    [F_CREATE] = FSNP_OP_FLOW_CREATE,
	    [F_CLAIM] = FSNP_OP_FLOW_CLAIM_DUE,
	    [F_COMPLETE] = FSNP_OP_FLOW_COMPLETE,
	    [F_RETRY] = FSNP_OP_FLOW_RETRY,
	    [F_EXTEND] = FSNP_OP_FLOW_EXTEND_LEASE,
	    [F_READ] = FSNP_OP_FLOW_GET,
	};
	struct flw *g = p->g;
	struct flow_args a;
	char worker[16];

	flow_args_init(&a);
	a.partition_key = p->pk;
	a.type = FLOW_TYPE;
	switch (p->f) {
	case F_CREATE:
		a.id = p->id;
		a.idempotent = true;
		a.data = "p";
		a.data_len = 1;
		break;
	case F_CLAIM:
		snprintf(worker, sizeof worker, "w%u", p->idx);
		a.worker = worker;
		a.lease_ms = LEASE_MS;
		a.limit = CLAIM_LIMIT;
		a.ret = "jobs";
		break;
	case F_READ:
		a.id = p->id;
		break;
	default:
		a.id = p->id;
		a.lease_token = p->token;
		a.fencing_token = p->fence;
		if (p->f == F_EXTEND) {
			a.lease_ms = LEASE_MS;
		}
		break;
	}
	p->busy = true;
	p->recorded = false;
	g->busy++;
	if (p->f != F_CLAIM && p->f != F_READ) {
		record(p, WL_INVOKE);
	}
	if (p->c == NULL ||
	    flow_client_call(p->c, ops[p->f], &a, 0, on_reply, p) != 0) {
		/* Never sent. */
		complete(p, WL_FAIL);
	}
}

static int remember(struct flw *g, const char *id, const char *pk)
{
	if (g->n_flows == g->cap_flows) {
		size_t cap = g->cap_flows ? g->cap_flows * 2 : 256;
		void *q = realloc(g->flows, cap * sizeof *g->flows);
		if (q == NULL) {
			return -ENOMEM;
		}
		g->flows = q;
		g->cap_flows = cap;
	}
	snprintf(g->flows[g->n_flows].id, ID_LEN, "%s", id);
	snprintf(g->flows[g->n_flows].pk, PK_LEN, "%s", pk);
	g->n_flows++;
	return 0;
}

static void next_op(struct fl_proc *p)
{
	struct flw *g = p->g;
	uint64_t r = wl_rand(g->x, 0, 99);

	p->final = false;
	if (p->holding) {
		if (p->zombie || (p->extends == 0 && r < 30)) {
			p->f = p->zombie ? F_COMPLETE : F_EXTEND;
			p->extends++;
		} else {
			p->f = r < 75 ? F_COMPLETE : F_RETRY;
		}
		invoke(p);
		return;
	}
	if (g->n_flows == 0 || r < 35) {
		p->f = F_CREATE;
		snprintf(p->id, ID_LEN, "f%zu", g->n_flows);
		snprintf(p->pk, PK_LEN, "jp%u",
		         (unsigned)wl_rand(g->x, 0, NPARTS - 1));
		if (remember(g, p->id, p->pk) != 0) {
			return;
		}
	} else {
		p->f = F_CLAIM;
		p->id[0] = '\0';
		snprintf(p->pk, PK_LEN, "jp%u",
		         (unsigned)wl_rand(g->x, 0, NPARTS - 1));
	}
	invoke(p);
}

static void final_op(struct fl_proc *p)
{
	struct flw *g = p->g;
	if (g->next_final >= g->n_flows) {
		maybe_finish(g);
		return;
	}
	p->final = true;
	p->f = F_READ;
	snprintf(p->id, ID_LEN, "%s", g->flows[g->next_final].id);
	snprintf(p->pk, PK_LEN, "%s", g->flows[g->next_final].pk);
	g->next_final++;
	invoke(p);
}

/* --- The schedule phase --------------------------------------------------- */

static void sp_step(struct fl_sp *sp);

static void sp_on_timer(uv_timer_t *t)
{
	sp_step(t->data);
}

static void sp_later(struct fl_sp *sp, uint64_t ms)
{
	if (!sp->g->x->done) {
		uv_timer_start(&sp->t, sp_on_timer, ms, 0);
	}
}

/* The reply's error text, or "" (a client-side failure has none). */
static const char *sp_msg(const struct fsnp_reply *rep)
{
	return rep->error == FSNP_CLIENT_OK && rep->message != NULL
	           ? rep->message
	           : "";
}

static bool sp_failed(const struct fsnp_reply *rep)
{
	return rep->error != FSNP_CLIENT_OK || rep->status != FSNP_STATUS_OK ||
	       rep->custom;
}

/* Records a call's invocation and outcome together: only final reads and
 * creates are judged, and both are written when they answer. */
static void sp_record(struct fl_sp *sp, enum wl_type t, const char *f,
                      const char *key, const char *vals)
{
	struct wl_hist *hi = &sp->g->x->hist;
	wl_hist_event(hi, sp->pid, WL_INVOKE, f, key, NULL);
	wl_hist_event(hi, sp->pid, t, f, key, vals);
	if (t == WL_INFO) {
		sp->pid++;
	}
}

static void sp_on_create(void *data, const struct fsnp_reply *rep)
{
	struct fl_sp *sp = data;
	const char *id = sched_defs[sp->i].id;
	const char *m = sp_msg(rep);

	sp->busy = false;
	if (!sp_failed(rep)) {
		sp->s[sp->i].acked = true;
		sp_record(sp, WL_OK, "create", id, NULL);
		sp->i++;
	} else if (strncmp(m, "ERR flow already exists", 23) == 0) {
		/* An earlier send took effect. */
		sp_record(sp, WL_FAIL, "create", id, NULL);
		sp->i++;
	} else {
		bool refused = rep->error == FSNP_CLIENT_OK &&
		               (rep->status == FSNP_STATUS_BUSY ||
		                rep->status == FSNP_STATUS_BAD_REQUEST);
		sp_record(sp, refused ? WL_FAIL : WL_INFO, "create", id, NULL);
		sp_later(sp, SCHED_RETRY_MS);
		return;
	}
	if (sp->i == NSCHED) {
		sp->stage = SP_IDLE;
	}
	sp_step(sp);
}

static int sp_create(struct fl_sp *sp)
{
	struct fl_sched *s = &sp->s[sp->i];
	struct wbuf body;
	struct fsnp_writer w;
	int rv;

	wbuf_init(&body);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_str(&w, sched_defs[sp->i].id);
	fsnp_w_key(&w, "kind");
	fsnp_w_str(&w, sched_defs[sp->i].kind);
	if (sched_defs[sp->i].every > 0) {
		fsnp_w_key(&w, "every_ms");
		fsnp_w_i64(&w, sched_defs[sp->i].every);
		fsnp_w_key(&w, "start_at_ms");
	} else {
		fsnp_w_key(&w, "at_ms");
	}
	fsnp_w_i64(&w, s->start);
	fsnp_w_key(&w, "target");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "type");
	fsnp_w_str(&w, SCHED_TYPE);
	fsnp_w_key(&w, "partition_key");
	fsnp_w_str(&w, SCHED_PK);
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	rv = fsnp_w_finish(&w) != 0 || body.oom
	         ? -ENOMEM
	         : fsnp_client_send(sp->c, FSNP_OP_FLOW_SCHEDULE_CREATE, NULL,
	                            0, body.data, body.len, FSNP_REQ_IDEMPOTENT,
	                            sp_on_create, sp);
	wbuf_free(&body);
	return rv;
}

/* A body with the schedule's id only (PAUSE, GET). */
static int sp_send_id(struct fl_sp *sp, uint16_t opcode, fsnp_reply_cb cb)
{
	struct wbuf body;
	struct fsnp_writer w;
	int rv;

	wbuf_init(&body);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_str(&w, sched_defs[sp->i].id);
	fsnp_w_map_end(&w);
	rv = fsnp_w_finish(&w) != 0 || body.oom
	         ? -ENOMEM
	         : fsnp_client_send(sp->c, opcode, NULL, 0, body.data, body.len,
	                            FSNP_REQ_IDEMPOTENT, cb, sp);
	wbuf_free(&body);
	return rv;
}

static void sp_on_pause(void *data, const struct fsnp_reply *rep)
{
	struct fl_sp *sp = data;
	const char *m = sp_msg(rep);

	sp->busy = false;
	if (sp_failed(rep) && strstr(m, "not active") == NULL &&
	    strstr(m, "not found") == NULL) {
		sp_later(sp, SCHED_RETRY_MS);
		return;
	}
	sp->i++;
	sp_step(sp);
}

static void sp_str(char *buf, size_t cap, const struct fsnp_val *rec,
                   const char *k)
{
	struct fsnp_bytes b;
	if (fsnp_map_bin(rec, k, &b) == 0 && b.len > 0 &&
	    wl_token_ok((const char *)b.ptr, b.len)) {
		snprintf(buf, cap, "%.*s", (int)b.len, (const char *)b.ptr);
	} else {
		snprintf(buf, cap, "nil");
	}
}

static int64_t sp_int(const struct fsnp_val *rec, const char *k)
{
	int64_t v;
	return fsnp_map_i64(rec, k, &v) == 0 && v >= 0 ? v : -1;
}

static void sp_on_read(void *data, const struct fsnp_reply *rep)
{
	struct fl_sp *sp = data;
	struct fl_sched *s = &sp->s[sp->i];
	bool once = sched_defs[sp->i].every == 0;

	sp->busy = false;
	if (sp_failed(rep)) {
		sp_later(sp, SCHED_RETRY_MS);
		return;
	}
	s->reads++;
	if (rep->value.tag == FSNP_NIL) {
		s->read = true;
		s->found = false;
	} else if (rep->value.tag != FSNP_MAP) {
		sp_later(sp, SCHED_RETRY_MS);
		return;
	} else {
		s->read = true;
		s->found = true;
		sp_str(s->state, sizeof s->state, &rep->value, "state");
		sp_str(s->end_reason, sizeof s->end_reason, &rep->value,
		       "end_reason");
		s->fires = sp_int(&rep->value, "fire_count");
		s->coalesced = sp_int(&rep->value, "coalesced_count");
		s->next = sp_int(&rep->value, "next_run_at_ms");
		if (strcmp(s->state, "active") == 0) {
			if (!once && s->reads < SCHED_ONCE_WAIT) {
				/* A pause lost to a replay: pause again. */
				sp->stage = SP_PAUSE;
				sp_step(sp);
				return;
			}
			if (once && s->reads < SCHED_ONCE_WAIT) {
				/* Not fired yet: it is due, wait for it. */
				sp_later(sp, SCHED_RETRY_MS);
				return;
			}
		}
	}
	sp->i++;
	sp_step(sp);
}

static bool sp_seen(struct fl_sp *sp, const char *id)
{
	for (size_t i = 0; i < sp->n_seen; i++) {
		if (strcmp(sp->seen[i], id) == 0) {
			return true;
		}
	}
	return false;
}

static int sp_remember(struct fl_sp *sp, const char *id)
{
	if (sp->n_seen == sp->cap_seen) {
		size_t cap = sp->cap_seen ? sp->cap_seen * 2 : 256;
		void *q = realloc(sp->seen, cap * sizeof *sp->seen);
		if (q == NULL) {
			return -ENOMEM;
		}
		sp->seen = q;
		sp->cap_seen = cap;
	}
	snprintf(sp->seen[sp->n_seen++], sizeof sp->seen[0], "%s", id);
	return 0;
}

static int64_t sp_fires(const struct fl_sp *sp)
{
	int64_t n = 0;
	for (unsigned i = 0; i < NSCHED; i++) {
		n += sp->s[i].found && sp->s[i].fires > 0 ? sp->s[i].fires : 0;
	}
	return n;
}

static void sp_on_drain(void *data, const struct fsnp_reply *rep)
{
	struct fl_sp *sp = data;
	size_t n = 0;

	sp->busy = false;
	if (sp_failed(rep) ||
	    flow_client_parse_claims(&rep->value, sp->claimed,
	                             SCHED_DRAIN_LIMIT, &n) != 0) {
		/* Lost answers leave targets leased: they come back when
		 * the lease ends. */
		sp->empty++;
		sp_later(sp, SCHED_RETRY_MS);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char tid[ID_LEN * 2], sid[ID_LEN];
		const char *colon;
		snprintf(tid, sizeof tid, "%.*s", (int)sp->claimed[i].id.len,
		         (const char *)sp->claimed[i].id.ptr);
		if (!wl_token_ok(tid, strlen(tid)) || sp_seen(sp, tid) ||
		    sp_remember(sp, tid) != 0) {
			continue;
		}
		colon = strchr(tid, ':');
		snprintf(sid, sizeof sid, "%.*s",
		         (int)(colon != NULL ? colon - tid : 0), tid);
		sp_record(sp, WL_OK, "target", colon != NULL ? sid : tid, tid);
	}
	if (n > 0) {
		sp->empty = 0;
		sp_step(sp);
		return;
	}
	if ((int64_t)sp->n_seen >= sp_fires(sp) ||
	    ++sp->empty >= SCHED_DRAIN_EMPTY) {
		sp->stage = SP_DONE;
	}
	sp_later(sp, sp->stage == SP_DONE ? 0 : SCHED_RETRY_MS);
}

static int sp_drain(struct fl_sp *sp)
{
	struct flow_args a;

	flow_args_init(&a);
	a.partition_key = SCHED_PK;
	a.type = SCHED_TYPE;
	a.worker = "jsdrain";
	a.lease_ms = SCHED_DRAIN_LEASE_MS;
	a.limit = SCHED_DRAIN_LIMIT;
	return flow_client_call(sp->c, FSNP_OP_FLOW_CLAIM_DUE, &a, 0,
	                        sp_on_drain, sp);
}

/* The final schedule reads, once the drain is over. */
static void sp_write_reads(struct fl_sp *sp)
{
	wl_hist_comment(&sp->g->x->hist,
	                "final schedule reads: %zu targets found, %" PRId64
	                " fires counted",
	                sp->n_seen, sp_fires(sp));
	for (unsigned i = 0; i < NSCHED; i++) {
		const struct fl_sched *s = &sp->s[i];
		char v[256], every[24] = "nil", next[24] = "nil";
		if (!s->read) {
			continue;
		}
		if (!s->found) {
			sp_record(sp, WL_OK, "schedule", sched_defs[i].id,
			          "nil");
			continue;
		}
		if (sched_defs[i].every > 0) {
			snprintf(every, sizeof every, "%" PRId64,
			         sched_defs[i].every);
		}
		if (s->next >= 0) {
			snprintf(next, sizeof next, "%" PRId64, s->next);
		}
		snprintf(v, sizeof v,
		         "%s %s %s %" PRId64 " %" PRId64 " %" PRId64 " %s %s",
		         sched_defs[i].kind, s->state, every, s->start,
		         s->fires < 0 ? 0 : s->fires,
		         s->coalesced < 0 ? 0 : s->coalesced, next,
		         s->end_reason);
		sp_record(sp, WL_OK, "schedule", sched_defs[i].id, v);
	}
}

static void sp_step(struct fl_sp *sp)
{
	struct flw *g = sp->g;
	int rv = 0;

	if (g->x->done || sp->busy || g->x->deadline) {
		return;
	}
	if (sp->stage == SP_CREATE && g->x->ops_over) {
		/* The schedules not created yet are read as they are. */
		sp->stage = SP_IDLE;
	}
	if (sp->stage == SP_IDLE) {
		if (!g->finals) {
			return;
		}
		sp->stage = SP_PAUSE;
		sp->i = 0;
	}
	if (sp->stage == SP_PAUSE) {
		while (sp->i < NSCHED && sched_defs[sp->i].every == 0) {
			sp->i++;
		}
		if (sp->i == NSCHED) {
			sp->stage = SP_READ;
			sp->i = 0;
		}
	}
	if (sp->stage == SP_READ && sp->i == NSCHED) {
		sp->stage = SP_DRAIN;
		sp->empty = 0;
	}
	if (sp->stage == SP_DONE) {
		sp_write_reads(sp);
		sp->stage = SP_FINISHED;
		maybe_finish(g);
		return;
	}
	if (sp->stage == SP_FINISHED) {
		return;
	}
	sp->busy = true;
	switch (sp->stage) {
	case SP_CREATE:
		rv = sp_create(sp);
		break;
	case SP_PAUSE:
		rv = sp_send_id(sp, FSNP_OP_FLOW_SCHEDULE_PAUSE, sp_on_pause);
		break;
	case SP_READ:
		rv = sp_send_id(sp, FSNP_OP_FLOW_SCHEDULE_GET, sp_on_read);
		break;
	default:
		rv = sp_drain(sp);
		break;
	}
	if (rv != 0) {
		/* Never sent. */
		sp->busy = false;
		sp_later(sp, SCHED_RETRY_MS);
	}
}

static void maybe_finish(struct flw *g)
{
	if (g->busy == 0 && g->finals && g->next_final >= g->n_flows &&
	    g->sp.stage == SP_FINISHED) {
		wl_ctx_done(g->x);
	}
}

static void start_finals(struct flw *g)
{
	if (g->finals || g->busy > 0 || g->x->done) {
		return;
	}
	g->finals = true;
	wl_hist_comment(&g->x->hist, "final reads of the %zu flows created",
	                g->n_flows);
	for (unsigned i = 0; i < g->nprocs; i++) {
		if (!g->procs[i].busy) {
			final_op(&g->procs[i]);
		}
	}
	sp_step(&g->sp);
	maybe_finish(g);
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err);
static void on_client_closed(void *data);

/* Opens p's connection to node id. */
static int connect_to(struct fl_proc *p, unsigned id)
{
	p->node = id;
	return wl_ctx_fsnp_open(p->g->x, id, "jepsen-flow", on_ready, p, &p->c);
}

/* Between operations: follows membership to the node p should use now
 * (wl_ctx_home), as the register workload does. */
static void rehome(struct fl_proc *p)
{
	unsigned want = wl_ctx_home(p->g->x, p->idx);
	if (want == p->node && p->c != NULL) {
		return;
	}
	if (p->c != NULL) {
		fsnp_client_close(p->c, on_client_closed, NULL);
		p->c = NULL;
	}
	connect_to(p, want);
}

static void on_think(uv_timer_t *t)
{
	struct fl_proc *p = t->data;
	struct flw *g = p->g;
	if (g->x->done || p->busy || g->x->deadline) {
		return;
	}
	rehome(p);
	if (p->c == NULL) {
		schedule(p, THINK_MAX_MS);
		return;
	}
	if (g->x->ops_over) {
		p->holding = false;
		p->n_next = 0;
		if (g->finals) {
			final_op(p);
		} else {
			start_finals(g);
		}
		return;
	}
	next_op(p);
}

static void schedule(struct fl_proc *p, uint64_t ms)
{
	if (!p->g->x->done) {
		uv_timer_start(&p->think, on_think, ms, 0);
	}
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err)
{
	(void)data;
	(void)c;
	(void)status;
	(void)err;
	/* Requests queue before the handshake and the client reconnects by
	 * itself: the outcomes of the operations tell the rest. */
}

static int sp_start(struct flw *g)
{
	struct wl_ctx *x = g->x;
	struct fl_sp *sp = &g->sp;
	int64_t now = wall_ms();
	int rc;

	sp->g = g;
	sp->pid = SCHED_PID_BASE;
	uv_timer_init(x->loop, &sp->t);
	sp->t.data = sp;
	sp->claimed = calloc(SCHED_DRAIN_LIMIT, sizeof *sp->claimed);
	if (sp->claimed == NULL) {
		return -ENOMEM;
	}
	for (unsigned i = 0; i < NSCHED; i++) {
		sp->s[i].start =
		    now +
		    (sched_defs[i].every > 0 ? SCHED_START_MS : SCHED_ONCE_MS);
	}
	rc = wl_ctx_fsnp_open(x, wl_ctx_home(x, g->nprocs),
	                      "jepsen-flow-schedules", on_ready, sp, &sp->c);
	if (rc != 0) {
		return rc;
	}
	wl_hist_comment(&x->hist,
	                "schedules: intervals js-a, js-b, js-c every 300, "
	                "700, 1100 ms from %" PRId64
	                ", one-shot js-once at %" PRId64
	                "; targets of type %s in partition %s",
	                sp->s[0].start, sp->s[3].start, SCHED_TYPE, SCHED_PK);
	sp_step(sp);
	return 0;
}

static int flw_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct flw *g = calloc(1, sizeof *g);
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->nprocs = cfg->procs ? cfg->procs : 3 * cfg->n_nodes;
	g->procs = calloc(g->nprocs, sizeof *g->procs);
	if (g->procs == NULL) {
		return -ENOMEM;
	}
	wl_hist_comment(&x->hist,
	                "lodestone flow workload: %u processes on %u nodes, "
	                "%u partitions, lease %u ms, FLOW.CREATE/CLAIM_DUE/"
	                "EXTEND_LEASE/COMPLETE/RETRY, final FLOW.GET",
	                g->nprocs, cfg->n_nodes, NPARTS, LEASE_MS);
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct fl_proc *p = &g->procs[i];
		p->g = g;
		p->idx = i;
		p->pid = i;
		uv_timer_init(x->loop, &p->think);
		p->think.data = p;
		if (connect_to(p, wl_ctx_home(x, i)) != 0) {
			return -EIO;
		}
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		schedule(&g->procs[i], wl_rand(x, 0, THINK_MAX_MS));
	}
	return sp_start(g);
}

static void flw_phase(struct wl_ctx *x, enum wl_phase ph)
{
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	start_finals(x->impl);
}

static int flw_write(struct wl_ctx *x)
{
	struct flw *g = x->impl;
	if (g != NULL) {
		snprintf(x->note, sizeof x->note,
		         "%u processes on %u nodes, %zu flows, %" PRIu64
		         " claims (%" PRIu64 " held past the lease), %" PRIu64
		         " stale mutations refused, %zu schedule targets%s",
		         g->nprocs, x->cfg->n_nodes, g->n_flows, g->claims,
		         g->zombies, g->stale_refused, g->sp.n_seen,
		         x->deadline && !x->stopped
		             ? "; final reads cut short by the deadline"
		             : "");
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void on_client_closed(void *data)
{
	(void)data;
}

static void flw_close(struct wl_ctx *x)
{
	struct flw *g = x->impl;
	if (g == NULL || g->procs == NULL) {
		return;
	}
	if (g->sp.g != NULL) {
		wl_close_timer(&g->sp.t);
		if (g->sp.c != NULL) {
			fsnp_client_close(g->sp.c, on_client_closed, NULL);
			g->sp.c = NULL;
		}
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct fl_proc *p = &g->procs[i];
		if (p->g == NULL) {
			continue;
		}
		wl_close_timer(&p->think);
		if (p->c != NULL) {
			fsnp_client_close(p->c, on_client_closed, NULL);
			p->c = NULL;
		}
	}
}

static void flw_destroy(struct wl_ctx *x)
{
	struct flw *g = x->impl;
	if (g == NULL) {
		return;
	}
	free(g->procs);
	free(g->flows);
	free(g->sp.seen);
	free(g->sp.claimed);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_flow = {
    .name = "flow",
    .checker = "flow",
    .checks = {{"history.txt", "flow", jepsen_flowcheck_run}},
    .start = flw_start,
    .phase = flw_phase,
    .write = flw_write,
    .close = flw_close,
    .destroy = flw_destroy,
};
