/* Governance effects and circuits (reference/flow.md 6.3, 6.4;
 * docs/flow.md "Governance").
 *
 * Effects are stored beside their flow (same partition, same group), so
 * EFFECT.* checks the flow's lease token and fencing token and updates
 * the effect and the flow's ledger in one apply: a worker whose lease was
 * taken over (a later claim raised the fencing token) can neither reserve
 * nor settle an effect. A reservation naming a circuit (governance_scope)
 * is checked, and a half-open probe counted, in the same apply when that
 * circuit lives in the flow's group; otherwise the FSNP layer checks it
 * first (node/fsnp/fsnp_flow.c, docs/flow.md "Circuits, and the two-step
 * check"). A circuit is open, half-open once open_ms has passed, or
 * closed. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "store/ext.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)
#define BIG_MAX (256 * 1024)

/* --- circuits ------------------------------------------------------------ */

struct circuit {
	bool exists;
	struct fsnp_bytes scope, status;
	int64_t failure_threshold, open_ms, opened_at_ms, window_ms, min_calls,
	    failure_rate_pct, latency_threshold_ms, half_open_max_probes,
	    half_open_success_threshold, half_open_in_flight,
	    half_open_successes, half_open_started_at_ms, last_failure_ms,
	    last_success_ms, updated_at_ms, failures, failure_count,
	    event_count;
	bool has_opened, has_latency, has_window, has_started, has_lf, has_ls;
	struct fsnp_val error_classes;
	bool has_classes;
};

static void circuit_from(struct circuit *k, const struct fsnp_val *m)
{
	k->exists = true;
	k->scope = gov_mt(m, "scope");
	k->status = gov_mt(m, "status");
	k->failure_threshold = gov_mi(m, "failure_threshold", 5);
	k->open_ms = gov_mi(m, "open_ms", 30000);
	k->has_opened = gov_mhas(m, "opened_at_ms");
	k->opened_at_ms = gov_mi(m, "opened_at_ms", 0);
	k->has_window = gov_mhas(m, "window_ms");
	k->window_ms = gov_mi(m, "window_ms", 0);
	k->min_calls = gov_mi(m, "min_calls", 0);
	k->failure_rate_pct = gov_mi(m, "failure_rate_pct", 0);
	k->has_latency = gov_mhas(m, "latency_threshold_ms");
	k->latency_threshold_ms = gov_mi(m, "latency_threshold_ms", 0);
	k->has_classes = gov_mv(m, "error_classes", &k->error_classes);
	k->half_open_max_probes = gov_mi(m, "half_open_max_probes", 1);
	k->half_open_success_threshold =
	    gov_mi(m, "half_open_success_threshold", 1);
	k->half_open_in_flight = gov_mi(m, "half_open_in_flight", 0);
	k->half_open_successes = gov_mi(m, "half_open_successes", 0);
	k->has_started = gov_mhas(m, "half_open_started_at_ms");
	k->half_open_started_at_ms = gov_mi(m, "half_open_started_at_ms", 0);
	k->has_lf = gov_mhas(m, "last_failure_ms");
	k->last_failure_ms = gov_mi(m, "last_failure_ms", 0);
	k->has_ls = gov_mhas(m, "last_success_ms");
	k->last_success_ms = gov_mi(m, "last_success_ms", 0);
	k->updated_at_ms = gov_mi(m, "updated_at_ms", 0);
	k->failures = gov_mi(m, "failures", 0);
	k->failure_count = gov_mi(m, "failure_count", 0);
	k->event_count = gov_mi(m, "event_count", 0);
}

static void circuit_write(struct fsnp_writer *w, const struct circuit *k)
{
	fsnp_w_map_begin(w);
	gov_wt(w, "scope", k->scope);
	gov_wt(w, "status", k->status);
	gov_wi(w, "failure_threshold", k->failure_threshold);
	gov_wi(w, "open_ms", k->open_ms);
	gov_wi_opt(w, "opened_at_ms", k->has_opened, k->opened_at_ms);
	gov_wi_opt(w, "window_ms", k->has_window, k->window_ms);
	gov_wi(w, "min_calls", k->min_calls);
	gov_wi(w, "failure_rate_pct", k->failure_rate_pct);
	gov_wi_opt(w, "latency_threshold_ms", k->has_latency,
	           k->latency_threshold_ms);
	fsnp_w_key(w, "error_classes");
	if (k->has_classes) {
		fsnp_w_val(w, &k->error_classes);
	} else {
		fsnp_w_array_begin(w);
		fsnp_w_array_end(w);
	}
	gov_wi(w, "half_open_max_probes", k->half_open_max_probes);
	gov_wi(w, "half_open_success_threshold",
	       k->half_open_success_threshold);
	gov_wi(w, "half_open_in_flight", k->half_open_in_flight);
	gov_wi(w, "half_open_successes", k->half_open_successes);
	gov_wi_opt(w, "half_open_started_at_ms", k->has_started,
	           k->half_open_started_at_ms);
	gov_wi_opt(w, "last_failure_ms", k->has_lf, k->last_failure_ms);
	gov_wi_opt(w, "last_success_ms", k->has_ls, k->last_success_ms);
	gov_wi(w, "updated_at_ms", k->updated_at_ms);
	fsnp_w_key(w, "events");
	fsnp_w_array_begin(w);
	fsnp_w_array_end(w);
	gov_wi(w, "failures", k->failures);
	gov_wi(w, "failure_count", k->failure_count);
	gov_wi(w, "event_count", k->event_count);
	fsnp_w_map_end(w);
}

static int circuit_load(struct gctx *g, struct fsnp_bytes scope,
                        struct circuit *k)
{
	struct fsnp_val m;
	int rv;

	memset(k, 0, sizeof *k);
	gov_key(g, GK_CIRCUIT, &scope, 1);
	rv = gov_load(g, &m);
	if (rv == 1) {
		circuit_from(k, &m);
	}
	return rv;
}

static void circuit_new(struct circuit *k, struct fsnp_bytes scope,
                        uint64_t now)
{
	memset(k, 0, sizeof *k);
	k->exists = true;
	k->scope = scope;
	k->status = fb("closed");
	k->failure_threshold = 5;
	k->open_ms = 30000;
	k->half_open_max_probes = 1;
	k->half_open_success_threshold = 1;
	k->updated_at_ms = (int64_t)now;
}

static void circuit_save(struct gctx *g, const struct circuit *k)
{
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	circuit_write(&w, k);
	fsnp_w_finish(&w);
	gov_key(g, GK_CIRCUIT, &k->scope, 1);
	gov_store(g, &buf);
}

/* An open circuit whose open_ms has passed is half-open. */
static void circuit_age(struct circuit *k, uint64_t now)
{
	if (fsnp_bytes_eq(k->status, "open") && k->has_opened &&
	    (int64_t)now >= k->opened_at_ms + k->open_ms) {
		k->status = fb("half_open");
		k->half_open_in_flight = 0;
		k->half_open_successes = 0;
		k->has_started = true;
		k->half_open_started_at_ms = (int64_t)now;
	}
}

static void circuit_open_at(struct circuit *k, uint64_t now)
{
	k->status = fb("open");
	k->has_opened = true;
	k->opened_at_ms = (int64_t)now;
	k->half_open_in_flight = 0;
	k->half_open_successes = 0;
	k->has_started = false;
}

static int circuit_event(struct gctx *g, const struct circuit *k,
                         const char *kind)
{
	struct gov_event e = {.kind = kind,
	                      .flow_id = k->scope,
	                      .status = k->status,
	                      .policy = fb("circuit")};

	return gov_ledger(g, k->scope, k->scope, &e);
}

int gov_circuit_set(struct gctx *g, bool open, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	struct circuit k;
	uint64_t now = g->c->now;
	static const struct {
		enum gov_field f;
		size_t off;
	} ints[] = {
	    {GF_OPEN_MS, offsetof(struct circuit, open_ms)},
	    {GF_FAILURE_THRESHOLD, offsetof(struct circuit, failure_threshold)},
	    {GF_MIN_CALLS, offsetof(struct circuit, min_calls)},
	    {GF_FAILURE_RATE_PCT, offsetof(struct circuit, failure_rate_pct)},
	    {GF_HALF_OPEN_MAX_PROBES,
	     offsetof(struct circuit, half_open_max_probes)},
	    {GF_HALF_OPEN_SUCCESS_THRESHOLD,
	     offsetof(struct circuit, half_open_success_threshold)},
	};

	if (circuit_load(g, scope, &k) < 0) {
		return -1;
	}
	if (!k.exists) {
		circuit_new(&k, scope, now);
	}
	if ((int64_t)now < k.updated_at_ms) {
		if (GO(g, GF_NOW_MS) != NULL) {
			return E1("ERR flow circuit now_ms cannot precede "
			          "updated_at_ms");
		}
		now = (uint64_t)k.updated_at_ms;
	}
	if (open) {
		if (GO(g, GF_MIN_CALLS) != NULL &&
		    GO(g, GF_MIN_CALLS)->i > 64) {
			return E1("ERR flow circuit min_calls must be <= 64");
		}
		if (GO(g, GF_FAILURE_RATE_PCT) != NULL &&
		    (GO(g, GF_FAILURE_RATE_PCT)->i < 1 ||
		     GO(g, GF_FAILURE_RATE_PCT)->i > 100)) {
			return E1("ERR flow circuit failure_rate_pct must be "
			          "between 1 and 100");
		}
		for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
			if (GO(g, ints[i].f) != NULL) {
				*(int64_t *)((char *)&k + ints[i].off) =
				    GO(g, ints[i].f)->i;
			}
		}
		if (GO(g, GF_WINDOW_MS) != NULL) {
			k.has_window = true;
			k.window_ms = GO(g, GF_WINDOW_MS)->i;
		}
		if (GO(g, GF_LATENCY_THRESHOLD_MS) != NULL) {
			k.has_latency = true;
			k.latency_threshold_ms =
			    GO(g, GF_LATENCY_THRESHOLD_MS)->i;
		}
		if (GO(g, GF_ERROR_CLASSES) != NULL) {
			k.has_classes = true;
			k.error_classes = GO(g, GF_ERROR_CLASSES)->v;
		}
		circuit_open_at(&k, now);
	} else {
		k.status = fb("closed");
		k.failure_count = 0;
		k.half_open_in_flight = 0;
		k.half_open_successes = 0;
		k.has_started = false;
	}
	k.updated_at_ms = (int64_t)now;
	circuit_save(g, &k);
	if (circuit_event(g, &k, open ? "circuit_opened" : "circuit_closed") !=
	    0) {
		return -1;
	}
	circuit_write(g->w, &k);
	return 0;
}

int gov_circuit_get(struct gctx *g, struct flow_err *err)
{
	struct circuit k;

	(void)err;
	if (circuit_load(g, GO(g, GF_SCOPE)->t, &k) < 0) {
		return -1;
	}
	if (!k.exists) {
		fsnp_w_nil(g->w);
		return 0;
	}
	circuit_age(&k, g->c->now);
	circuit_write(g->w, &k);
	return 0;
}

/* --- effects ------------------------------------------------------------- */

struct effect {
	bool exists;
	struct fsnp_bytes flow_id, part, type, state, key, etype, status,
	    digest, idem, external_id, circuit, gscope;
	int64_t created_at_ms, updated_at_ms, latency_ms;
	bool has_latency, has_error, has_reason;
	struct fsnp_val error, reason;
};

static void effect_from(struct effect *x, const struct fsnp_val *m)
{
	x->exists = true;
	x->flow_id = gov_mt(m, "flow_id");
	x->part = gov_mt(m, "partition_key");
	x->type = gov_mt(m, "type");
	x->state = gov_mt(m, "state");
	x->key = gov_mt(m, "effect_key");
	x->etype = gov_mt(m, "effect_type");
	x->status = gov_mt(m, "status");
	x->digest = gov_mt(m, "operation_digest");
	x->idem = gov_mt(m, "idempotency_key");
	x->external_id = gov_mt(m, "external_id");
	x->circuit = gov_mt(m, "circuit_scope");
	x->gscope = gov_mt(m, "governance_scope");
	x->created_at_ms = gov_mi(m, "created_at_ms", 0);
	x->updated_at_ms = gov_mi(m, "updated_at_ms", 0);
	x->has_latency = gov_mhas(m, "latency_ms");
	x->latency_ms = gov_mi(m, "latency_ms", 0);
	x->has_error = gov_mv(m, "error", &x->error);
	x->has_reason = gov_mv(m, "reason", &x->reason);
}

static void effect_write(struct fsnp_writer *w, const struct effect *x,
                         const char *decision)
{
	fsnp_w_map_begin(w);
	gov_wt(w, "flow_id", x->flow_id);
	gov_wt(w, "partition_key", x->part);
	gov_wt(w, "type", x->type);
	gov_wt(w, "state", x->state);
	gov_wt(w, "effect_key", x->key);
	gov_wt(w, "effect_type", x->etype);
	gov_wt(w, "status", x->status);
	gov_wt(w, "operation_digest", x->digest);
	gov_wt(w, "idempotency_key", x->idem);
	gov_wt(w, "policy_hash", (struct fsnp_bytes){NULL, 0});
	gov_wt(w, "policy_version", (struct fsnp_bytes){NULL, 0});
	gov_wi(w, "created_at_ms", x->created_at_ms);
	gov_wi(w, "updated_at_ms", x->updated_at_ms);
	gov_wt(w, "external_id", x->external_id);
	gov_wv(w, "error", x->has_error ? &x->error : NULL);
	gov_wv(w, "reason", x->has_reason ? &x->reason : NULL);
	gov_wi_opt(w, "latency_ms", x->has_latency, x->latency_ms);
	gov_wt(w, "circuit_scope", x->circuit);
	if (x->gscope.len > 0) {
		/* the circuit named, wherever it lives: the FSNP layer
		 * feeds a settled outcome to one in another group */
		gov_wt(w, "governance_scope", x->gscope);
	}
	if (decision != NULL) {
		fsnp_w_key(w, "decision");
		fsnp_w_str(w, decision);
	}
	fsnp_w_map_end(w);
}

static void effect_key(struct gctx *g, struct fsnp_bytes part,
                       struct fsnp_bytes id, struct fsnp_bytes key)
{
	struct fsnp_bytes parts[3] = {part, id, key};

	gov_key(g, GK_EFFECT, parts, 3);
}

static int effect_load(struct gctx *g, struct fsnp_bytes part,
                       struct fsnp_bytes id, struct fsnp_bytes key,
                       struct effect *x)
{
	struct fsnp_val m;
	int rv;

	memset(x, 0, sizeof *x);
	effect_key(g, part, id, key);
	rv = gov_load(g, &m);
	if (rv == 1) {
		effect_from(x, &m);
	}
	return rv;
}

static void effect_save(struct gctx *g, const struct effect *x)
{
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	effect_write(&w, x, NULL);
	fsnp_w_finish(&w);
	effect_key(g, x->part, x->flow_id, x->key);
	gov_store(g, &buf);
}

/* The fence: the flow exists and the caller holds its current lease. */
static int fence(struct gctx *g, struct fsnp_bytes part, struct fsnp_bytes id,
                 struct frec *rec, struct flow_err *err)
{
	struct fsnp_bytes lt = GO(g, GF_LEASE_TOKEN)->t;
	int rv = frec_load(g->c, part, id, rec);

	if (rv < 0) {
		return -1;
	}
	if (rv == 0) {
		return E1("ERR flow not found");
	}
	if (!rec->i_set[RI_FENCING_TOKEN] ||
	    rec->i[RI_FENCING_TOKEN] != GO(g, GF_FENCING_TOKEN)->i) {
		return E1("ERR flow fencing token mismatch");
	}
	if (!rec->s_set[RS_LEASE_TOKEN] || !frec_eq(rec, RS_LEASE_TOKEN, lt)) {
		return E1("ERR flow lease token mismatch");
	}
	return 0;
}

static int effect_event(struct gctx *g, const struct effect *x,
                        const char *kind, const char *code, const char *message)
{
	struct gov_event e = {
	    .kind = kind,
	    .flow_id = x->flow_id,
	    .effect_key = x->key,
	    .effect_type = x->etype,
	    .status = x->status,
	    .policy = fb("effect"),
	};
	if (code != NULL) {
		e.code = fb(code);
		e.message = fb(message);
	}
	return gov_ledger(g, x->part, x->flow_id, &e);
}

int gov_effect_reserve(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct fsnp_bytes part = gov_flow_part(g, id);
	struct fsnp_bytes key = GO(g, GF_EFFECT_KEY)->t;
	struct fsnp_bytes digest = GO(g, GF_OPERATION_DIGEST)->t;
	const struct gov_opt *scope = GO(g, GF_GOVERNANCE_SCOPE);
	struct frec rec;
	struct effect x;
	struct circuit k;
	int rv;

	if (digest.len > BIG_MAX) {
		return E1("ERR flow operation_digest too large (max %d bytes)",
		          BIG_MAX);
	}
	if ((rv = fence(g, part, id, &rec, err)) != 0) {
		return rv;
	}
	if (effect_load(g, part, id, key, &x) < 0) {
		return -1;
	}
	if (x.exists) {
		if (x.digest.len != digest.len ||
		    memcmp(x.digest.ptr, digest.ptr, digest.len) != 0) {
			struct fsnp_writer *d = gov_deny(
			    g, "GOVERNANCE_CONFLICT", "governance_conflict",
			    "effect already reserved with a different "
			    "operation_digest");
			gov_wt(d, "effect_key", key);
			gov_wt(d, "status", x.status);
			gov_deny_end(g);
			return GOV_ERR;
		}
		effect_write(g->w, &x,
		             fsnp_bytes_eq(x.status, "reserved")
		                 ? "already_reserved"
		                 : "already_applied");
		return 0;
	}
	memset(&x, 0, sizeof x);
	x.exists = true;
	x.flow_id = id;
	x.part = part;
	x.type = rec.s[RS_TYPE];
	x.state =
	    rec.s_set[RS_RUN_STATE] ? rec.s[RS_RUN_STATE] : rec.s[RS_STATE];
	x.key = key;
	x.etype = GO(g, GF_EFFECT_TYPE)->t;
	x.status = fb("reserved");
	x.digest = digest;
	if (GO(g, GF_IDEMPOTENCY_KEY) != NULL) {
		x.idem = GO(g, GF_IDEMPOTENCY_KEY)->t;
	}
	x.created_at_ms = x.updated_at_ms = (int64_t)g->c->now;
	if (scope != NULL) {
		x.gscope = scope->t;
		if (circuit_load(g, scope->t, &k) < 0) {
			return -1;
		}
		if (k.exists) {
			circuit_age(&k, g->c->now);
			if (fsnp_bytes_eq(k.status, "open") ||
			    (fsnp_bytes_eq(k.status, "half_open") &&
			     k.half_open_in_flight >= k.half_open_max_probes)) {
				struct fsnp_writer *d;
				int64_t left = k.opened_at_ms + k.open_ms -
				               (int64_t)g->c->now;
				d = gov_deny(g, "GOVERNANCE_CIRCUIT_OPEN",
				             "circuit_open",
				             "circuit is open for scope");
				gov_wt(d, "scope", scope->t);
				gov_wt(d, "effect_type", x.etype);
				gov_wi(d, "retry_after_ms",
				       left > 0 ? left : 0);
				fsnp_w_key(d, "policy");
				fsnp_w_str(d, "circuit");
				gov_deny_end(g);
				x.status = fb("denied");
				if (effect_event(g, &x, "circuit_open",
				                 "GOVERNANCE_CIRCUIT_OPEN",
				                 "circuit is open for scope") !=
				    0) {
					return -1;
				}
				return GOV_KEEP;
			}
			if (fsnp_bytes_eq(k.status, "half_open")) {
				k.half_open_in_flight++;
				k.updated_at_ms = (int64_t)g->c->now;
				circuit_save(g, &k);
			}
			x.circuit = scope->t;
		}
	}
	effect_save(g, &x);
	if (effect_event(g, &x, "effect_reserved", NULL, NULL) != 0) {
		return -1;
	}
	effect_write(g->w, &x, "reserved");
	return 0;
}

/* A settled effect's outcome, counted by circuit `scope` of this group;
 * writes the circuit (when it exists) to `w` when not NULL. */
static int circuit_outcome_of(struct gctx *g, struct fsnp_bytes scope, bool ok,
                              struct fsnp_writer *w)
{
	struct circuit k;
	uint64_t now = g->c->now;
	bool was_open;
	int rv = 0;

	if (circuit_load(g, scope, &k) < 0) {
		return -1;
	}
	if (!k.exists) {
		if (w != NULL) {
			fsnp_w_nil(w);
		}
		return 0;
	}
	circuit_age(&k, now);
	was_open = !fsnp_bytes_eq(k.status, "closed");
	k.event_count++;
	if (ok) {
		k.has_ls = true;
		k.last_success_ms = (int64_t)now;
		if (fsnp_bytes_eq(k.status, "half_open")) {
			if (k.half_open_in_flight > 0) {
				k.half_open_in_flight--;
			}
			if (++k.half_open_successes >=
			    k.half_open_success_threshold) {
				k.status = fb("closed");
				k.failure_count = 0;
				k.half_open_successes = 0;
				k.has_started = false;
			}
		}
	} else {
		k.has_lf = true;
		k.last_failure_ms = (int64_t)now;
		k.failures++;
		k.failure_count++;
		if (fsnp_bytes_eq(k.status, "half_open") ||
		    (fsnp_bytes_eq(k.status, "closed") &&
		     k.failure_count >= k.failure_threshold)) {
			circuit_open_at(&k, now);
		}
	}
	k.updated_at_ms = (int64_t)now;
	circuit_save(g, &k);
	if (was_open != !fsnp_bytes_eq(k.status, "closed")) {
		rv = circuit_event(
		    g, &k, was_open ? "circuit_closed" : "circuit_opened");
	}
	if (w != NULL) {
		circuit_write(w, &k);
	}
	return rv;
}

/* A settled effect's outcome, counted by its circuit (same group). */
static int circuit_outcome(struct gctx *g, const struct effect *x, bool ok)
{
	if (x->circuit.ptr == NULL) {
		return 0;
	}
	return circuit_outcome_of(g, x->circuit, ok, NULL);
}

int gov_circuit_count(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	struct fsnp_bytes kind = GO(g, GF_KIND)->t;
	struct circuit k;
	uint64_t now = g->c->now;

	if (fsnp_bytes_eq(kind, "success") || fsnp_bytes_eq(kind, "failure")) {
		return circuit_outcome_of(g, scope,
		                          fsnp_bytes_eq(kind, "success"), g->w);
	}
	if (!fsnp_bytes_eq(kind, "admit") && !fsnp_bytes_eq(kind, "unadmit")) {
		return E1("ERR flow circuit count kind must be admit, unadmit, "
		          "success or failure");
	}
	if (circuit_load(g, scope, &k) < 0) {
		return -1;
	}
	if (!k.exists) {
		fsnp_w_nil(g->w);
		return 0;
	}
	circuit_age(&k, now);
	if (fsnp_bytes_eq(kind, "unadmit")) {
		if (fsnp_bytes_eq(k.status, "half_open") &&
		    k.half_open_in_flight > 0) {
			k.half_open_in_flight--;
			k.updated_at_ms = (int64_t)now;
			circuit_save(g, &k);
		}
		circuit_write(g->w, &k);
		return 0;
	}
	if (fsnp_bytes_eq(k.status, "open") ||
	    (fsnp_bytes_eq(k.status, "half_open") &&
	     k.half_open_in_flight >= k.half_open_max_probes)) {
		/* Refused; nothing written (the flow's ledger is in the
		 * other group). */
		struct fsnp_writer *d;
		int64_t left = k.opened_at_ms + k.open_ms - (int64_t)now;
		d = gov_deny(g, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open",
		             "circuit is open for scope");
		gov_wt(d, "scope", scope);
		if (GO(g, GF_EFFECT_TYPE) != NULL) {
			gov_wt(d, "effect_type", GO(g, GF_EFFECT_TYPE)->t);
		}
		gov_wi(d, "retry_after_ms", left > 0 ? left : 0);
		fsnp_w_key(d, "policy");
		fsnp_w_str(d, "circuit");
		gov_deny_end(g);
		return GOV_ERR;
	}
	if (fsnp_bytes_eq(k.status, "half_open")) {
		k.half_open_in_flight++;
		k.updated_at_ms = (int64_t)now;
		circuit_save(g, &k);
	}
	circuit_write(g->w, &k);
	return 0;
}

int gov_effect_settle(struct gctx *g, const char *to, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct fsnp_bytes part = gov_flow_part(g, id);
	struct fsnp_bytes key = GO(g, GF_EFFECT_KEY)->t;
	const struct gov_opt *reason = GO(g, GF_REASON);
	const struct gov_opt *error = GO(g, GF_ERROR);
	struct frec rec;
	struct effect x;
	char kind[32];
	int rv;

	if ((reason != NULL && reason->v.enc_len > BIG_MAX) ||
	    (error != NULL && error->v.enc_len > BIG_MAX)) {
		return E1("ERR flow effect %s too large (max %d bytes)",
		          reason != NULL && reason->v.enc_len > BIG_MAX
		              ? "reason"
		              : "error",
		          BIG_MAX);
	}
	if ((rv = fence(g, part, id, &rec, err)) != 0) {
		return rv;
	}
	if (effect_load(g, part, id, key, &x) < 0) {
		return -1;
	}
	if (!x.exists) {
		return E1("ERR flow effect not found");
	}
	if ((int64_t)g->c->now < x.updated_at_ms) {
		if (GO(g, GF_NOW_MS) != NULL) {
			return E1("ERR flow effect now_ms cannot precede "
			          "updated_at_ms");
		}
		g->c->now = (uint64_t)x.updated_at_ms;
	}
	if (!fsnp_bytes_eq(x.status, "reserved")) {
		struct fsnp_writer *d;
		if (fsnp_bytes_eq(x.status, to)) {
			effect_write(g->w, &x, "already_applied");
			return 0;
		}
		d = gov_deny(g, "GOVERNANCE_CONFLICT", "governance_conflict",
		             "effect is already terminal");
		gov_wt(d, "effect_key", key);
		gov_wt(d, "status", x.status);
		fsnp_w_key(d, "requested");
		fsnp_w_str(d, to);
		gov_deny_end(g);
		return GOV_ERR;
	}
	x.status = fb(to);
	x.updated_at_ms = (int64_t)g->c->now;
	if (GO(g, GF_EXTERNAL_ID) != NULL) {
		x.external_id = GO(g, GF_EXTERNAL_ID)->t;
	}
	if (error != NULL) {
		x.has_error = true;
		x.error = error->v;
	}
	if (reason != NULL) {
		x.has_reason = true;
		x.reason = reason->v;
	}
	if (GO(g, GF_LATENCY_MS) != NULL) {
		x.has_latency = true;
		x.latency_ms = GO(g, GF_LATENCY_MS)->i;
	}
	effect_save(g, &x);
	snprintf(kind, sizeof kind, "effect_%s", to);
	if (effect_event(g, &x, kind, NULL, NULL) != 0) {
		return -1;
	}
	if (strcmp(to, "compensated") != 0 &&
	    circuit_outcome(g, &x, strcmp(to, "confirmed") == 0) != 0) {
		return -1;
	}
	effect_write(g->w, &x, to);
	return 0;
}

int gov_effect_get(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct effect x;

	(void)err;
	if (effect_load(g, gov_flow_part(g, id), id, GO(g, GF_EFFECT_KEY)->t,
	                &x) < 0) {
		return -1;
	}
	if (!x.exists) {
		fsnp_w_nil(g->w);
	} else {
		effect_write(g->w, &x, NULL);
	}
	return 0;
}

void gov_circuit_item(struct gov_lister *l, const struct fsnp_val *m,
                      struct fsnp_writer *w)
{
	struct circuit k;
	const struct gov_req *q = l->g->q;

	circuit_from(&k, m);
	circuit_age(&k, l->g->c->now);
	if (q->f[GF_SCOPE].set &&
	    !(q->f[GF_SCOPE].t.len == k.scope.len &&
	      memcmp(q->f[GF_SCOPE].t.ptr, k.scope.ptr, k.scope.len) == 0)) {
		return;
	}
	l->total++;
	if (fsnp_bytes_eq(k.status, "open")) {
		l->extra++;
	} else if (fsnp_bytes_eq(k.status, "half_open")) {
		l->extra += INT64_C(1) << 32;
	}
	if (w != NULL && l->n < l->limit) {
		circuit_write(w, &k);
		l->n++;
	}
}
