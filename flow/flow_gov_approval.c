/* Governance approvals (reference/flow.md 6.3, 6.4): pending until one
 * decision; a decision at or after expires_at_ms stores `expired` and is
 * refused. Listing filters by status, scope, partition key and flow id.
 * An approval may name how its flow waits (`wait_state`, and the states a
 * decision moves it to); the record keeps them and the FSNP layer wakes
 * the flow after the decision (docs/flow.md "Approvals"). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "flow/flow_ops.h"
#include "flow/flow_record.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"
#include "store/ext.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)

/* --- approvals ----------------------------------------------------------- */

struct approval {
	bool exists;
	struct fsnp_bytes id, flow_id, scope, requested_by, policy_hash, status,
	    decided_by;
	/* the flow's wake: absent (empty) unless the request named them */
	struct fsnp_bytes flow_pk, wait_state, transition_to, exhaust_to;
	int64_t requested_at_ms, expires_at_ms, decided_at_ms;
	bool has_expires, has_decided, has_reason, has_dreason, has_assignees,
	    has_pv;
	struct fsnp_val reason, decision_reason, assignees, policy_version;
};

static void approval_from(struct approval *a, const struct fsnp_val *m)
{
	a->exists = true;
	a->id = gov_mt(m, "id");
	a->flow_id = gov_mt(m, "flow_id");
	a->scope = gov_mt(m, "scope");
	a->requested_by = gov_mt(m, "requested_by");
	a->policy_hash = gov_mt(m, "policy_hash");
	a->status = gov_mt(m, "status");
	a->decided_by = gov_mt(m, "decided_by");
	a->requested_at_ms = gov_mi(m, "requested_at_ms", 0);
	a->has_expires = gov_mhas(m, "expires_at_ms");
	a->expires_at_ms = gov_mi(m, "expires_at_ms", 0);
	a->has_decided = gov_mhas(m, "decided_at_ms");
	a->decided_at_ms = gov_mi(m, "decided_at_ms", 0);
	a->has_reason = gov_mv(m, "reason", &a->reason);
	a->has_dreason = gov_mv(m, "decision_reason", &a->decision_reason);
	a->has_assignees = gov_mv(m, "assignees", &a->assignees);
	a->has_pv = gov_mv(m, "policy_version", &a->policy_version);
	a->flow_pk = gov_mt(m, "partition_key");
	a->wait_state = gov_mt(m, "wait_state");
	a->transition_to = gov_mt(m, "transition_to");
	a->exhaust_to = gov_mt(m, "exhaust_to");
}

/* The wake keys, written only when set so that an approval requested as
 * the reference does reads exactly as the reference's. */
static void approval_write_wake(struct fsnp_writer *w, const struct approval *a,
                                bool flow_id)
{
	if (a->wait_state.len == 0) {
		return;
	}
	if (flow_id) {
		gov_wt(w, "flow_id", a->flow_id);
	}
	if (a->flow_pk.len > 0) {
		gov_wt(w, "partition_key", a->flow_pk);
	}
	gov_wt(w, "wait_state", a->wait_state);
	if (a->transition_to.len > 0) {
		gov_wt(w, "transition_to", a->transition_to);
	}
	if (a->exhaust_to.len > 0) {
		gov_wt(w, "exhaust_to", a->exhaust_to);
	}
}

static void approval_write(struct fsnp_writer *w, const struct approval *a)
{
	fsnp_w_map_begin(w);
	gov_wt(w, "id", a->id);
	gov_wt(w, "flow_id", a->flow_id);
	gov_wt(w, "scope", a->scope);
	gov_wv(w, "reason", a->has_reason ? &a->reason : NULL);
	gov_wt(w, "requested_by", a->requested_by);
	gov_wi(w, "requested_at_ms", a->requested_at_ms);
	fsnp_w_key(w, "assignees");
	if (a->has_assignees) {
		fsnp_w_val(w, &a->assignees);
	} else {
		fsnp_w_array_begin(w);
		fsnp_w_array_end(w);
	}
	gov_wt(w, "policy_hash", a->policy_hash);
	gov_wv(w, "policy_version", a->has_pv ? &a->policy_version : NULL);
	gov_wi_opt(w, "expires_at_ms", a->has_expires, a->expires_at_ms);
	gov_wt(w, "status", a->status);
	gov_wt(w, "decided_by", a->decided_by);
	gov_wi_opt(w, "decided_at_ms", a->has_decided, a->decided_at_ms);
	gov_wv(w, "decision_reason",
	       a->has_dreason ? &a->decision_reason : NULL);
	approval_write_wake(w, a, false);
	fsnp_w_map_end(w);
}

static int approval_load(struct gctx *g, struct fsnp_bytes id,
                         struct approval *a)
{
	struct fsnp_val m;
	int rv;

	memset(a, 0, sizeof *a);
	gov_key(g, GK_APPROVAL, &id, 1);
	rv = gov_load(g, &m);
	if (rv == 1) {
		approval_from(a, &m);
	}
	return rv;
}

static void approval_save(struct gctx *g, const struct approval *a)
{
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	approval_write(&w, a);
	fsnp_w_finish(&w);
	gov_key(g, GK_APPROVAL, &a->id, 1);
	gov_store(g, &buf);
}

/* A pending approval past its expiry reads as expired. */
static void approval_age(struct approval *a, uint64_t now)
{
	if (fsnp_bytes_eq(a->status, "pending") && a->has_expires &&
	    (int64_t)now >= a->expires_at_ms) {
		a->status = fb("expired");
	}
}

static int approval_event(struct gctx *g, const struct approval *a,
                          const char *kind, const char *code)
{
	struct gov_event e = {.kind = kind,
	                      .flow_id = a->flow_id,
	                      .status = a->status,
	                      .subject = a->scope,
	                      .policy = fb("approval")};

	if (code != NULL) {
		e.code = fb(code);
	}
	return gov_ledger(g, gov_auto_part(g, a->id), a->id, &e);
}

static int approval_conflict(struct gctx *g, const struct approval *a,
                             const char *message)
{
	struct fsnp_writer *d =
	    gov_deny(g, "GOVERNANCE_CONFLICT", "governance_conflict", message);

	gov_wt(d, "id", a->id);
	gov_wt(d, "scope", a->scope);
	gov_wt(d, "status", a->status);
	fsnp_w_key(d, "policy");
	fsnp_w_str(d, "approval");
	/* a repeated decision wakes the flow again (its first wake may
	 * have been lost) */
	approval_write_wake(d, a, true);
	gov_deny_end(g);
	return GOV_ERR;
}

/* A target state of a wake: SIGNAL moves a flow to neither running nor a
 * terminal state. */
static int wake_target(const struct gov_opt *o, const char *name,
                       struct flow_err *err)
{
	if (o != NULL &&
	    (fsnp_bytes_eq(o->t, "running") || frec_terminal_state(o->t))) {
		return E1("ERR flow approval %s cannot be running or a "
		          "terminal state",
		          name);
	}
	return 0;
}

/* `wait_state` names the state the flow waits in; `transition_to` (where
 * APPROVE moves it) comes with it; `exhaust_to` (where REJECT moves it)
 * may. */
static int wake_check(struct gctx *g, struct flow_err *err)
{
	const struct gov_opt *ws = GO(g, GF_WAIT_STATE);
	const struct gov_opt *tt = GO(g, GF_TRANSITION_TO);
	const struct gov_opt *ex = GO(g, GF_EXHAUST_TO);

	if (ws == NULL) {
		if (tt != NULL || ex != NULL) {
			return E1("ERR flow approval transition_to and "
			          "exhaust_to require wait_state");
		}
		return 0;
	}
	if (tt == NULL) {
		return E1("ERR flow approval wait_state requires "
		          "transition_to");
	}
	if (fsnp_bytes_eq(ws->t, "running") || frec_terminal_state(ws->t)) {
		return E1("ERR flow approval wait_state cannot be running or "
		          "a terminal state");
	}
	if (wake_target(tt, "transition_to", err) != 0 ||
	    wake_target(ex, "exhaust_to", err) != 0) {
		return GOV_ERR;
	}
	return 0;
}

int gov_approval_request(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	const struct gov_opt *as = GO(g, GF_ASSIGNEES);
	const struct gov_opt *to = GO(g, GF_TIMEOUT_MS);
	const struct gov_opt *ex = GO(g, GF_EXPIRES_AT_MS);
	struct approval a;
	uint64_t now = g->c->now;

	if (approval_load(g, id, &a) < 0) {
		return -1;
	}
	if (a.exists) {
		return approval_conflict(g, &a, "Approval already exists");
	}
	if (to != NULL && to->i <= 0) {
		return E1("ERR flow approval timeout_ms must be a positive "
		          "integer");
	}
	if (ex != NULL && ex->i <= (int64_t)now) {
		return E1("ERR flow approval expires_at_ms must be greater "
		          "than now_ms");
	}
	if (wake_check(g, err) != 0) {
		return GOV_ERR;
	}
	if (as != NULL) {
		struct fsnp_iter it, it2;
		struct fsnp_val e, e2;
		uint32_t i = 0;
		if (as->v.as.count > 1000) {
			return E1(
			    "ERR flow approval assignees must have at most "
			    "1000 entries");
		}
		fsnp_iter_init(&it, &as->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			uint32_t j = 0;
			if (e.tag != FSNP_BIN || e.as.bin.len == 0) {
				return E1("ERR flow approval assignees must be "
				          "non-empty strings");
			}
			fsnp_iter_init(&it2, &as->v);
			while (j++ < i && fsnp_iter_next(&it2, NULL, &e2)) {
				if (e2.as.bin.len == e.as.bin.len &&
				    memcmp(e2.as.bin.ptr, e.as.bin.ptr,
				           e.as.bin.len) == 0) {
					return E1("ERR flow approval assignees "
					          "must be unique");
				}
			}
			i++;
		}
	}
	memset(&a, 0, sizeof a);
	a.exists = true;
	a.id = id;
	a.flow_id = GO(g, GF_FLOW_ID)->t;
	a.scope = GO(g, GF_SCOPE)->t;
	a.status = fb("pending");
	a.requested_at_ms = (int64_t)now;
	if (GO(g, GF_REQUESTED_BY) != NULL) {
		a.requested_by = GO(g, GF_REQUESTED_BY)->t;
	}
	if (GO(g, GF_POLICY_HASH) != NULL) {
		a.policy_hash = GO(g, GF_POLICY_HASH)->t;
	}
	if (GO(g, GF_POLICY_VERSION) != NULL) {
		a.has_pv = true;
		a.policy_version = GO(g, GF_POLICY_VERSION)->v;
	}
	if (GO(g, GF_REASON) != NULL) {
		a.has_reason = true;
		a.reason = GO(g, GF_REASON)->v;
	}
	if (as != NULL) {
		a.has_assignees = true;
		a.assignees = as->v;
	}
	if (GO(g, GF_WAIT_STATE) != NULL) {
		a.wait_state = GO(g, GF_WAIT_STATE)->t;
		a.transition_to = GO(g, GF_TRANSITION_TO)->t;
		if (GO(g, GF_PARTITION_KEY) != NULL) {
			a.flow_pk = GO(g, GF_PARTITION_KEY)->t;
		}
		if (GO(g, GF_EXHAUST_TO) != NULL) {
			a.exhaust_to = GO(g, GF_EXHAUST_TO)->t;
		}
	}
	if (to != NULL) {
		a.has_expires = true;
		a.expires_at_ms = (int64_t)now + to->i;
	} else if (ex != NULL) {
		a.has_expires = true;
		a.expires_at_ms = ex->i;
	}
	approval_save(g, &a);
	if (approval_event(g, &a, "approval_required", NULL) != 0) {
		return -1;
	}
	approval_write(g->w, &a);
	return 0;
}

/* The decision's wake when the flow lives in this group too: the same
 * FLOW.SIGNAL {id, partition_key, signal, if_state: wait_state,
 * transition_to} the FSNP layer sends otherwise, run in this apply. A
 * flow not here, or not in wait_state, is left alone. 0, or -1 on an I/O
 * failure. */
static int wake_here(struct gctx *g, const struct approval *a, bool approve)
{
	struct fsnp_bytes to = approve ? a->transition_to : a->exhaust_to;
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *p;
	size_t n;
	struct fsnp_bytes part;
	struct frec rec;
	struct flow_req req;
	struct flow_err ferr;
	struct fsnp_writer w;
	struct wbuf body, out;
	int rv;

	if (a->wait_state.len == 0 || to.len == 0 || !g->c->write) {
		return 0;
	}
	flow_route_partition(a->flow_id.ptr, a->flow_id.len,
	                     a->flow_pk.len > 0 ? a->flow_pk.ptr : NULL,
	                     a->flow_pk.len, buf, &p, &n);
	part.ptr = fctx_dup(g->c, p, n);
	part.len = n;
	if ((rv = frec_load(g->c, part, a->flow_id, &rec)) != 1) {
		return rv < 0 ? -1 : 0;
	}
	wbuf_init(&body);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	gov_wt(&w, "id", a->flow_id);
	if (a->flow_pk.len > 0) {
		gov_wt(&w, "partition_key", a->flow_pk);
	}
	fsnp_w_key(&w, "signal");
	fsnp_w_str(&w, approve ? "approval_approved" : "approval_rejected");
	gov_wt(&w, "if_state", a->wait_state);
	gov_wt(&w, "transition_to", to);
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
	rv = 0;
	if (!body.oom && flow_body_decode_bytes(FSNP_OP_FLOW_SIGNAL, body.data,
	                                        body.len, &req, &ferr) == 0) {
		wbuf_init(&out);
		fsnp_w_init(&w, &out);
		/* a refusal (not waiting any more) writes nothing */
		rv = flow_op_run(g->c, &req, &w, &ferr) < 0 ? -1 : 0;
		wbuf_free(&out);
	}
	wbuf_free(&body);
	return rv;
}

int gov_approval_decide(struct gctx *g, bool approve, struct flow_err *err)
{
	struct approval a;
	uint64_t now = g->c->now;

	if (approval_load(g, GO(g, GF_ID)->t, &a) < 0) {
		return -1;
	}
	if (!a.exists) {
		return E1("ERR flow approval not found");
	}
	if ((int64_t)now < a.requested_at_ms) {
		if (GO(g, GF_NOW_MS) != NULL) {
			return E1("ERR flow approval now_ms cannot precede "
			          "requested_at_ms");
		}
		now = (uint64_t)a.requested_at_ms;
	}
	if (!fsnp_bytes_eq(a.status, "pending")) {
		return approval_conflict(g, &a, "Approval is already decided");
	}
	if (a.has_expires && (int64_t)now >= a.expires_at_ms) {
		a.status = fb("expired");
		a.has_decided = true;
		a.decided_at_ms = (int64_t)now;
		approval_save(g, &a);
		if (approval_event(g, &a, "approval_expired",
		                   "GOVERNANCE_CONFLICT") != 0) {
			return -1;
		}
		approval_conflict(g, &a, "Approval has expired");
		return GOV_KEEP;
	}
	a.status = fb(approve ? "approved" : "rejected");
	a.decided_by = GO(g, GF_APPROVER)->t;
	a.has_decided = true;
	a.decided_at_ms = (int64_t)now;
	if (GO(g, GF_REASON) != NULL) {
		a.has_dreason = true;
		a.decision_reason = GO(g, GF_REASON)->v;
	}
	approval_save(g, &a);
	if (approval_event(g, &a,
	                   approve ? "approval_approved" : "approval_rejected",
	                   NULL) != 0) {
		return -1;
	}
	if (wake_here(g, &a, approve) != 0) {
		return -1;
	}
	approval_write(g->w, &a);
	return 0;
}

int gov_approval_get(struct gctx *g, struct flow_err *err)
{
	struct approval a;

	(void)err;
	if (approval_load(g, GO(g, GF_ID)->t, &a) < 0) {
		return -1;
	}
	if (!a.exists) {
		fsnp_w_nil(g->w);
		return 0;
	}
	approval_age(&a, g->c->now);
	approval_write(g->w, &a);
	return 0;
}

static bool approval_match(const struct gov_req *q, const struct approval *a)
{
	if (q->f[GF_STATUS].set &&
	    !(q->f[GF_STATUS].t.len == a->status.len &&
	      memcmp(q->f[GF_STATUS].t.ptr, a->status.ptr, a->status.len) ==
	          0)) {
		return false;
	}
	if (q->f[GF_FLOW_ID].set &&
	    !(q->f[GF_FLOW_ID].t.len == a->flow_id.len &&
	      memcmp(q->f[GF_FLOW_ID].t.ptr, a->flow_id.ptr, a->flow_id.len) ==
	          0)) {
		return false;
	}
	if (q->f[GF_SCOPE].set &&
	    !(q->f[GF_SCOPE].t.len == a->scope.len &&
	      memcmp(q->f[GF_SCOPE].t.ptr, a->scope.ptr, a->scope.len) == 0)) {
		return false;
	}
	if (q->f[GF_PARTITION_KEY].set) {
		struct fsnp_bytes pk = q->f[GF_PARTITION_KEY].t;
		bool eq = pk.len == a->scope.len &&
		          memcmp(pk.ptr, a->scope.ptr, pk.len) == 0;
		bool pre = a->scope.len == pk.len + 10 &&
		           memcmp(a->scope.ptr, "partition:", 10) == 0 &&
		           memcmp(a->scope.ptr + 10, pk.ptr, pk.len) == 0;
		if (!eq && !pre) {
			return false;
		}
	}
	return true;
}

void gov_approval_item(struct gov_lister *l, const struct fsnp_val *m,
                       struct fsnp_writer *w)
{
	struct approval a;

	approval_from(&a, m);
	approval_age(&a, l->g->c->now);
	if (!approval_match(l->g->q, &a)) {
		return;
	}
	l->total++;
	if (fsnp_bytes_eq(a.status, "pending")) {
		l->extra++;
	}
	if (w != NULL && l->n < l->limit) {
		approval_write(w, &a);
		l->n++;
	}
}

int gov_check_status(struct gctx *g, struct flow_err *err)
{
	const struct gov_opt *s = GO(g, GF_STATUS);

	if (s != NULL && !fsnp_bytes_eq(s->t, "pending") &&
	    !fsnp_bytes_eq(s->t, "approved") &&
	    !fsnp_bytes_eq(s->t, "rejected") &&
	    !fsnp_bytes_eq(s->t, "expired")) {
		return E1("ERR flow approval status must be pending, approved, "
		          "rejected, or expired");
	}
	return 0;
}

int gov_approval_list(struct gctx *g, struct flow_err *err)
{
	struct gov_lister l = {g, gov_list_limit(g->q), 0, 0, 0};

	if (gov_check_status(g, err) != 0) {
		return GOV_ERR;
	}
	fsnp_w_array_begin(g->w);
	if (gov_walk(g, GK_APPROVAL, gov_approval_item, &l, g->w) != 0) {
		return -1;
	}
	fsnp_w_array_end(g->w);
	return 0;
}
