/* Governance budgets and limits (reference/flow.md 6.3, 6.4).
 *
 * A budget is one record per scope with a fixed window; its reservations
 * are records beside it. RESERVE counts the amount at once and is refused
 * when used + amount would pass the limit, so a budget is never overspent
 * by reservations: every check and update of `used` happens in one apply
 * of the scope's group. When the window has passed, the next command
 * starts a new one (used 0, settled reservations dropped); reservations
 * of an old window no longer count and settling them leaves the new
 * window's `used` alone.
 *
 * A limit is an owner record per scope holding `free` credits and one
 * lease per shard id: LEASE moves credits from free to the lease's
 * `available`, SPEND from available to `in_use` (one reservation id per
 * credit, generated from the command's seed), RELEASE back to free. A
 * lease past its expires_at_ms is dropped, with its credits, by the next
 * command (reads show the owner as it would be). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "store/ext.h"
#include "wire/fsnp_opcode.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)
#define BUDGET_MAX_OPEN 4096
#define RES_ID_MAX 256
#define LIMIT_LEASES_MAX 1024

/* --- budgets -------------------------------------------------------------- */

struct budget {
	bool exists;
	struct fsnp_bytes scope;
	int64_t limit, window_ms, window_start_ms, used, open, updated_at_ms;
};

struct resv {
	bool exists;
	struct fsnp_bytes id, status;
	int64_t reserved, actual, overage, window_start_ms, reserved_at_ms,
	    settled_at_ms;
	bool has_actual, has_settled, has_usage;
	struct fsnp_val usage;
};

static void budget_from(struct budget *b, const struct fsnp_val *m)
{
	b->exists = true;
	b->scope = gov_mt(m, "scope");
	b->limit = gov_mi(m, "limit", 0);
	b->window_ms = gov_mi(m, "window_ms", 1);
	b->window_start_ms = gov_mi(m, "window_start_ms", 0);
	b->used = gov_mi(m, "used", 0);
	b->open = gov_mi(m, "reservations_count", 0);
	b->updated_at_ms = gov_mi(m, "updated_at_ms", 0);
}

static void budget_fields(struct fsnp_writer *w, const struct budget *b)
{
	gov_wt(w, "scope", b->scope);
	gov_wi(w, "limit", b->limit);
	gov_wi(w, "window_ms", b->window_ms);
	gov_wi(w, "window_start_ms", b->window_start_ms);
	gov_wi(w, "used", b->used);
	gov_wi(w, "remaining", b->limit > b->used ? b->limit - b->used : 0);
	fsnp_w_key(w, "over_budget");
	fsnp_w_bool(w, b->used > b->limit);
	gov_wi(w, "reservations_count", b->open);
	gov_wi(w, "updated_at_ms", b->updated_at_ms);
}

static void resv_from(struct resv *r, const struct fsnp_val *m)
{
	r->exists = true;
	r->id = gov_mt(m, "reservation_id");
	r->status = gov_mt(m, "status");
	r->reserved = gov_mi(m, "reserved_amount", 0);
	r->has_actual = gov_mhas(m, "actual_amount");
	r->actual = gov_mi(m, "actual_amount", 0);
	r->overage = gov_mi(m, "overage_amount", 0);
	r->window_start_ms = gov_mi(m, "window_start_ms", 0);
	r->reserved_at_ms = gov_mi(m, "reserved_at_ms", 0);
	r->has_settled = gov_mhas(m, "settled_at_ms");
	r->settled_at_ms = gov_mi(m, "settled_at_ms", 0);
	r->has_usage = gov_mv(m, "usage", &r->usage);
}

static void resv_fields(struct fsnp_writer *w, const struct resv *r,
                        bool internal)
{
	gov_wt(w, "reservation_id", r->id);
	gov_wi(w, "reserved_amount", r->reserved);
	fsnp_w_key(w, "actual_amount");
	if (r->has_actual) {
		fsnp_w_i64(w, r->actual);
	} else {
		fsnp_w_nil(w);
	}
	gov_wt(w, "status", r->status);
	gov_wv(w, "usage", r->has_usage ? &r->usage : NULL);
	gov_wi(w, "overage_amount", r->overage);
	gov_wi(w, "reserved_at_ms", r->reserved_at_ms);
	fsnp_w_key(w, "settled_at_ms");
	if (r->has_settled) {
		fsnp_w_i64(w, r->settled_at_ms);
	} else {
		fsnp_w_nil(w);
	}
	if (internal) {
		gov_wi(w, "window_start_ms", r->window_start_ms);
	}
}

static int budget_load(struct gctx *g, struct fsnp_bytes scope,
                       struct budget *b)
{
	struct fsnp_val m;
	int rv;

	memset(b, 0, sizeof *b);
	gov_key(g, GK_BUDGET, &scope, 1);
	rv = gov_load(g, &m);
	if (rv == 1) {
		budget_from(b, &m);
	}
	return rv;
}

static void budget_save(struct gctx *g, const struct budget *b)
{
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	fsnp_w_map_begin(&w);
	budget_fields(&w, b);
	fsnp_w_map_end(&w);
	gov_key(g, GK_BUDGET, &b->scope, 1);
	fsnp_w_finish(&w);
	gov_store(g, &buf);
}

static int resv_load(struct gctx *g, struct fsnp_bytes scope,
                     struct fsnp_bytes id, struct resv *r)
{
	struct fsnp_bytes parts[2] = {scope, id};
	struct fsnp_val m;
	int rv;

	memset(r, 0, sizeof *r);
	gov_key(g, GK_BUDGET_RES, parts, 2);
	rv = gov_load(g, &m);
	if (rv == 1) {
		resv_from(r, &m);
	}
	return rv;
}

static void resv_save(struct gctx *g, struct fsnp_bytes scope,
                      const struct resv *r)
{
	struct fsnp_bytes parts[2] = {scope, r->id};
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	fsnp_w_map_begin(&w);
	resv_fields(&w, r, true);
	fsnp_w_map_end(&w);
	gov_key(g, GK_BUDGET_RES, parts, 2);
	fsnp_w_finish(&w);
	gov_store(g, &buf);
}

/* Starts a new window when the current one has passed; returns whether
 * it did. Settled reservations of the old window are dropped. */
static int budget_roll(struct gctx *g, struct budget *b, uint64_t now)
{
	struct store_tx_iter *it;
	struct sbuf prefix, *dead = NULL;
	size_t ndead = 0, cap = 0;
	int rv = 0;

	if ((int64_t)now - b->window_start_ms < b->window_ms) {
		return 0;
	}
	b->used = 0;
	b->window_start_ms = (int64_t)now;
	if (!g->c->write) {
		return 0;
	}
	gov_key(g, GK_BUDGET_RES, &b->scope, 1);
	sbuf_init(&prefix);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val m;
		if (fsnp_value_decode(v, vl, NULL, &m, NULL) != 0 ||
		    fsnp_bytes_eq(gov_mt(&m, "status"), "reserved")) {
			continue;
		}
		if (ndead == cap) {
			cap = cap ? cap * 2 : 16;
			dead = realloc(dead, cap * sizeof *dead);
			if (dead == NULL) {
				abort();
			}
		}
		sbuf_init(&dead[ndead]);
		sbuf_add(&dead[ndead++], k, kl);
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -1;
	}
	for (size_t i = 0; i < ndead; i++) {
		if (rv == 0) {
			store_tx_del(g->c->tx, dead[i].p, dead[i].len);
		}
		sbuf_free(&dead[i]);
	}
	free(dead);
	sbuf_free(&prefix);
	return rv;
}

/* The command's time for a record last updated at `updated`: a client
 * now_ms older than that is refused; the server's own clock is never
 * taken backwards. */
static int gov_time(struct gctx *g, int64_t updated, const char *what,
                    const char *field, uint64_t *now, struct flow_err *err)
{
	*now = g->c->now;
	if ((int64_t)*now >= updated) {
		return 0;
	}
	if (GO(g, GF_NOW_MS) != NULL) {
		return E1("ERR flow %s now_ms cannot precede %s", what, field);
	}
	*now = (uint64_t)updated;
	return 0;
}

static void budget_reply(struct gctx *g, const struct budget *b,
                         const struct resv *r)
{
	fsnp_w_map_begin(g->w);
	budget_fields(g->w, b);
	if (r != NULL) {
		resv_fields(g->w, r, false);
	}
	fsnp_w_map_end(g->w);
}

static int budget_event(struct gctx *g, const struct budget *b,
                        const char *kind, struct fsnp_bytes res_id,
                        int64_t amount, const char *code)
{
	struct gov_event e = {
	    .kind = kind,
	    .flow_id = b->scope,
	    .subject = res_id,
	    .amount = amount,
	    .has_amount = true,
	    .policy = fb("budget"),
	};
	if (code != NULL) {
		e.code = fb(code);
	}
	return gov_ledger(g, b->scope, b->scope, &e);
}

int gov_budget_reserve(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	int64_t amount = GO(g, GF_AMOUNT)->i;
	struct budget b;
	struct resv r;
	char gen[23];
	struct fsnp_bytes rid;
	uint64_t now;
	int rv;

	if ((rv = budget_load(g, scope, &b)) < 0) {
		return -1;
	}
	if (!b.exists) {
		const struct gov_opt *l = GO(g, GF_LIMIT);
		const struct gov_opt *wm = GO(g, GF_WINDOW_MS);
		if (l == NULL) {
			return E1("ERR flow budget limit is required");
		}
		if (l->i <= 0) {
			return E1("ERR flow budget limit must be a positive "
			          "integer");
		}
		if (wm == NULL) {
			return E1("ERR flow budget window_ms is required");
		}
		if (wm->i <= 0) {
			return E1(
			    "ERR flow budget window_ms must be a positive "
			    "integer");
		}
		b.exists = true;
		b.scope = scope;
		b.limit = l->i;
		b.window_ms = wm->i;
		b.window_start_ms = (int64_t)g->c->now;
		b.updated_at_ms = (int64_t)g->c->now;
	}
	if (gov_time(g, b.updated_at_ms, "budget", "updated_at_ms", &now,
	             err) != 0) {
		return GOV_ERR;
	}
	if (budget_roll(g, &b, now) != 0) {
		return -1;
	}
	if (GO(g, GF_RESERVATION_ID) != NULL) {
		rid = GO(g, GF_RESERVATION_ID)->t;
		if (rid.len > RES_ID_MAX) {
			return E1("ERR flow budget reservation_id too large "
			          "(max %d bytes)",
			          RES_ID_MAX);
		}
	} else {
		gov_gen_id(g, 0, gen);
		rid.ptr = fctx_dup(g->c, gen, 22);
		rid.len = 22;
	}
	if ((rv = resv_load(g, scope, rid, &r)) < 0) {
		return -1;
	}
	if (r.exists) {
		if (r.reserved == amount &&
		    fsnp_bytes_eq(r.status, "reserved")) {
			budget_reply(g, &b, &r);
			return 0;
		}
		return E1("ERR flow budget reservation id already exists");
	}
	if (b.open >= BUDGET_MAX_OPEN) {
		return E1("ERR flow budget has too many active reservations");
	}
	if (b.used + amount > b.limit) {
		struct fsnp_writer *d;
		char msg[160];
		int64_t left = b.window_start_ms + b.window_ms - (int64_t)now;
		snprintf(
		    msg, sizeof msg,
		    "budget exhausted for scope: requested %lld, used %lld "
		    "of %lld",
		    (long long)amount, (long long)b.used, (long long)b.limit);
		d = gov_deny(g, "GOVERNANCE_BUDGET_EXHAUSTED",
		             "budget_exhausted", msg);
		gov_wt(d, "scope", scope);
		gov_wi(d, "requested", amount);
		gov_wi(d, "used", b.used);
		gov_wi(d, "limit", b.limit);
		gov_wi(d, "window_ms", b.window_ms);
		gov_wi(d, "retry_after_ms", left > 0 ? left : 0);
		fsnp_w_key(d, "policy");
		fsnp_w_str(d, "budget");
		gov_deny_end(g);
		/* The window may have rolled: keep that, and the event. */
		b.updated_at_ms = (int64_t)now;
		budget_save(g, &b);
		if (budget_event(g, &b, "budget_exhausted", rid, amount,
		                 "GOVERNANCE_BUDGET_EXHAUSTED") != 0) {
			return -1;
		}
		return GOV_KEEP;
	}
	b.used += amount;
	b.open++;
	b.updated_at_ms = (int64_t)now;
	memset(&r, 0, sizeof r);
	r.exists = true;
	r.id = rid;
	r.status = fb("reserved");
	r.reserved = amount;
	r.window_start_ms = b.window_start_ms;
	r.reserved_at_ms = (int64_t)now;
	budget_save(g, &b);
	resv_save(g, scope, &r);
	if (budget_event(g, &b, "budget_reserved", rid, amount, NULL) != 0) {
		return -1;
	}
	budget_reply(g, &b, &r);
	return 0;
}

int gov_budget_settle(struct gctx *g, bool commit, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	struct fsnp_bytes rid = GO(g, GF_RESERVATION_ID)->t;
	const char *want = commit ? "committed" : "released";
	struct budget b;
	struct resv r;
	uint64_t now;

	if (budget_load(g, scope, &b) < 0) {
		return -1;
	}
	if (!b.exists) {
		return E1("ERR flow budget not found");
	}
	if (resv_load(g, scope, rid, &r) < 0) {
		return -1;
	}
	if (!r.exists) {
		return E1("ERR flow budget reservation not found");
	}
	if (gov_time(g, b.updated_at_ms, "budget", "updated_at_ms", &now,
	             err) != 0) {
		return GOV_ERR;
	}
	if (!fsnp_bytes_eq(r.status, "reserved")) {
		/* Replaying the same settlement answers it again. */
		if (fsnp_bytes_eq(r.status, want) &&
		    (!commit || r.actual == GO(g, GF_ACTUAL_AMOUNT)->i)) {
			budget_reply(g, &b, &r);
			return 0;
		}
		return E1("ERR flow budget reservation already %.*s",
		          (int)r.status.len, (const char *)r.status.ptr);
	}
	if (budget_roll(g, &b, now) != 0) {
		return -1;
	}
	if (r.window_start_ms == b.window_start_ms) {
		int64_t delta = commit ? GO(g, GF_ACTUAL_AMOUNT)->i - r.reserved
		                       : -r.reserved;
		b.used += delta;
		if (b.used < 0) {
			b.used = 0;
		}
	}
	if (b.open > 0) {
		b.open--;
	}
	b.updated_at_ms = (int64_t)now;
	r.status = fb(want);
	r.has_settled = true;
	r.settled_at_ms = (int64_t)now;
	if (commit) {
		r.has_actual = true;
		r.actual = GO(g, GF_ACTUAL_AMOUNT)->i;
		r.overage = b.used > b.limit ? b.used - b.limit : 0;
		if (GO(g, GF_USAGE) != NULL) {
			if (GO(g, GF_USAGE)->v.enc_len > 256 * 1024) {
				return E1(
				    "ERR flow budget usage too large (max "
				    "262144 bytes)");
			}
			r.has_usage = true;
			r.usage = GO(g, GF_USAGE)->v;
		}
	}
	budget_save(g, &b);
	resv_save(g, scope, &r);
	if (budget_event(g, &b, commit ? "budget_committed" : "budget_released",
	                 rid, commit ? r.actual : r.reserved, NULL) != 0) {
		return -1;
	}
	budget_reply(g, &b, &r);
	return 0;
}

int gov_budget_get(struct gctx *g, struct flow_err *err)
{
	struct budget b;

	(void)err;
	if (budget_load(g, GO(g, GF_SCOPE)->t, &b) < 0) {
		return -1;
	}
	if (!b.exists) {
		fsnp_w_nil(g->w);
		return 0;
	}
	if (budget_roll(g, &b, g->c->now) != 0) {
		return -1;
	}
	budget_reply(g, &b, NULL);
	return 0;
}

/* Scans the records of `kind` in this group: fn(m) per record, until it
 * returns false or `limit` were written. */
static int scan(struct gctx *g, uint8_t kind,
                bool (*fn)(struct gctx *, const struct fsnp_val *,
                           struct fsnp_writer *),
                struct fsnp_writer *w, int64_t limit)
{
	struct store_tx_iter *it;
	struct sbuf prefix;
	int64_t n = 0;
	int rv;

	gov_key(g, kind, NULL, 0);
	sbuf_init(&prefix);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok && n < limit;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t vl;
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val m;
		const uint8_t *copy = fctx_dup(g->c, v, vl);
		if (fsnp_value_decode(copy, vl, NULL, &m, NULL) != 0) {
			continue;
		}
		if (fn(g, &m, w)) {
			n++;
		}
	}
	rv = store_tx_iter_close(it);
	sbuf_free(&prefix);
	return rv;
}

/* Whether a record of `scope` matches a listing's scope / partition_key
 * filter ("pk" or "partition:pk"). */
static bool scope_match(const struct gov_req *q, struct fsnp_bytes scope)
{
	if (q->f[GF_SCOPE].set &&
	    !(q->f[GF_SCOPE].t.len == scope.len &&
	      memcmp(q->f[GF_SCOPE].t.ptr, scope.ptr, scope.len) == 0)) {
		return false;
	}
	if (q->f[GF_PARTITION_KEY].set) {
		struct fsnp_bytes pk = q->f[GF_PARTITION_KEY].t;
		bool eq = pk.len == scope.len &&
		          memcmp(pk.ptr, scope.ptr, pk.len) == 0;
		bool pre = scope.len == pk.len + 10 &&
		           memcmp(scope.ptr, "partition:", 10) == 0 &&
		           memcmp(scope.ptr + 10, pk.ptr, pk.len) == 0;
		return eq || pre;
	}
	return true;
}

static bool budget_item(struct gctx *g, const struct fsnp_val *m,
                        struct fsnp_writer *w)
{
	struct budget b;

	budget_from(&b, m);
	if (!scope_match(g->q, b.scope)) {
		return false;
	}
	if ((int64_t)g->c->now - b.window_start_ms >= b.window_ms) {
		b.used = 0;
		b.window_start_ms = (int64_t)g->c->now;
	}
	fsnp_w_map_begin(w);
	budget_fields(w, &b);
	fsnp_w_map_end(w);
	return true;
}

int gov_budget_list(struct gctx *g, struct fsnp_writer *w, int64_t limit,
                    struct flow_err *err)
{
	(void)err;
	fsnp_w_array_begin(w);
	if (scan(g, GK_BUDGET, budget_item, w, limit) != 0) {
		return -1;
	}
	fsnp_w_array_end(w);
	return 0;
}

/* --- limits --------------------------------------------------------------- */

struct lease {
	int64_t shard_id, epoch, expires_at_ms, available, in_use,
	    pending_reclaim, last_spend_at_ms;
};

struct owner {
	bool exists;
	struct fsnp_bytes scope;
	int64_t limit, free, config_version, epoch, updated_at_ms;
	bool has_config;
	struct lease *leases;
	size_t n;
};

static void owner_free(struct owner *o)
{
	free(o->leases);
	o->leases = NULL;
	o->n = 0;
}

static int owner_load(struct gctx *g, struct fsnp_bytes scope, struct owner *o)
{
	struct fsnp_val m, ls, l;
	struct fsnp_iter it;
	int rv;

	memset(o, 0, sizeof *o);
	gov_key(g, GK_LIMIT, &scope, 1);
	rv = gov_load(g, &m);
	if (rv != 1) {
		return rv;
	}
	o->exists = true;
	o->scope = gov_mt(&m, "scope");
	o->limit = gov_mi(&m, "limit", 0);
	o->free = gov_mi(&m, "free", 0);
	o->has_config = gov_mhas(&m, "config_version");
	o->config_version = gov_mi(&m, "config_version", 0);
	o->epoch = gov_mi(&m, "epoch", 0);
	o->updated_at_ms = gov_mi(&m, "updated_at_ms", 0);
	if (fsnp_map_get(&m, "leases", &ls) == 0 && ls.tag == FSNP_MAP &&
	    ls.as.count > 0) {
		o->leases = calloc(ls.as.count, sizeof *o->leases);
		if (o->leases == NULL) {
			abort();
		}
		fsnp_iter_init(&it, &ls);
		while (fsnp_iter_next(&it, NULL, &l) && o->n < ls.as.count) {
			struct lease *x = &o->leases[o->n++];
			x->shard_id = gov_mi(&l, "shard_id", 0);
			x->epoch = gov_mi(&l, "epoch", 0);
			x->expires_at_ms = gov_mi(&l, "expires_at_ms", 0);
			x->available = gov_mi(&l, "available", 0);
			x->in_use = gov_mi(&l, "in_use", 0);
			x->pending_reclaim = gov_mi(&l, "pending_reclaim", 0);
			x->last_spend_at_ms = gov_mi(&l, "last_spend_at_ms", 0);
		}
	}
	return 1;
}

static void lease_write(struct fsnp_writer *w, const struct lease *x)
{
	fsnp_w_map_begin(w);
	gov_wi(w, "shard_id", x->shard_id);
	gov_wi(w, "epoch", x->epoch);
	gov_wi(w, "expires_at_ms", x->expires_at_ms);
	gov_wi(w, "available", x->available);
	gov_wi(w, "in_use", x->in_use);
	gov_wi(w, "pending_reclaim", x->pending_reclaim);
	fsnp_w_key(w, "drain_rate");
	fsnp_w_f64(w, 0.0);
	gov_wi(w, "last_spend_at_ms", x->last_spend_at_ms);
	fsnp_w_map_end(w);
}

static void owner_write(struct fsnp_writer *w, const struct owner *o)
{
	fsnp_w_map_begin(w);
	gov_wt(w, "scope", o->scope);
	gov_wi(w, "limit", o->limit);
	gov_wi(w, "free", o->free);
	fsnp_w_key(w, "config_version");
	if (o->has_config) {
		fsnp_w_i64(w, o->config_version);
	} else {
		fsnp_w_nil(w);
	}
	gov_wi(w, "epoch", o->epoch);
	fsnp_w_key(w, "leases");
	fsnp_w_map_begin(w);
	for (size_t i = 0; i < o->n; i++) {
		char k[24];
		snprintf(k, sizeof k, "%lld", (long long)o->leases[i].shard_id);
		fsnp_w_key(w, k);
		lease_write(w, &o->leases[i]);
	}
	fsnp_w_map_end(w);
	fsnp_w_key(w, "policy_version_hash");
	fsnp_w_nil(w);
	gov_wi(w, "updated_at_ms", o->updated_at_ms);
	fsnp_w_map_end(w);
}

static void owner_save(struct gctx *g, const struct owner *o)
{
	struct wbuf buf;
	struct fsnp_writer w;

	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	owner_write(&w, o);
	gov_key(g, GK_LIMIT, &o->scope, 1);
	fsnp_w_finish(&w);
	gov_store(g, &buf);
}

/* Drops leases with expires_at_ms <= now; their credits go back. */
static void owner_expire(struct owner *o, uint64_t now)
{
	size_t j = 0;

	for (size_t i = 0; i < o->n; i++) {
		struct lease *x = &o->leases[i];
		if (x->expires_at_ms <= (int64_t)now) {
			o->free += x->available + x->in_use;
			continue;
		}
		o->leases[j++] = *x;
	}
	o->n = j;
	if (o->free > o->limit) {
		o->free = o->limit;
	}
}

static struct lease *owner_lease(struct owner *o, int64_t shard)
{
	for (size_t i = 0; i < o->n; i++) {
		if (o->leases[i].shard_id == shard) {
			return &o->leases[i];
		}
	}
	return NULL;
}

static int limit_event(struct gctx *g, const struct owner *o, const char *kind,
                       int64_t amount, const char *code)
{
	struct gov_event e = {
	    .kind = kind,
	    .flow_id = o->scope,
	    .amount = amount,
	    .has_amount = true,
	    .policy = fb("limit"),
	};
	if (code != NULL) {
		e.code = fb(code);
	}
	return gov_ledger(g, o->scope, o->scope, &e);
}

static int limit_deny(struct gctx *g, const struct owner *o, int64_t amount,
                      int64_t free_now)
{
	struct fsnp_writer *d;
	char msg[160];

	snprintf(msg, sizeof msg,
	         "limit exhausted for scope: requested %lld, free %lld of %lld",
	         (long long)amount, (long long)free_now, (long long)o->limit);
	d = gov_deny(g, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted", msg);
	gov_wt(d, "scope", o->scope);
	gov_wi(d, "requested", amount);
	gov_wi(d, "free", free_now);
	gov_wi(d, "limit", o->limit);
	fsnp_w_key(d, "policy");
	fsnp_w_str(d, "limit");
	gov_deny_end(g);
	owner_save(g, o);
	if (limit_event(g, o, "limit_exceeded", amount,
	                "GOVERNANCE_LIMIT_EXCEEDED") != 0) {
		return -1;
	}
	return GOV_KEEP;
}

static int check_amount(struct gctx *g, struct flow_err *err)
{
	if (GO(g, GF_AMOUNT)->i > 1000) {
		return E1("ERR flow limit amount must be between 1 and 1000");
	}
	return 0;
}

int gov_limit_lease(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	int64_t shard = GO(g, GF_SHARD_ID)->i;
	int64_t amount = GO(g, GF_AMOUNT)->i;
	const struct gov_opt *lim = GO(g, GF_LIMIT);
	const struct gov_opt *cv = GO(g, GF_CONFIG_VERSION);
	struct owner o;
	struct lease *x;
	uint64_t now;
	int64_t grant;
	int rv = GOV_ERR;

	if (check_amount(g, err) != 0) {
		return GOV_ERR;
	}
	if (shard >= LIMIT_LEASES_MAX) {
		return E1("ERR flow limit shard_id must be below %d",
		          LIMIT_LEASES_MAX);
	}
	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	if (!o.exists) {
		if (lim == NULL) {
			rv = E1("ERR flow limit limit is required");
			goto out;
		}
		o.exists = true;
		o.scope = scope;
		o.limit = lim->i;
		o.free = lim->i;
		o.has_config = cv != NULL;
		o.config_version = cv != NULL ? cv->i : 0;
		o.updated_at_ms = (int64_t)g->c->now;
	} else if (cv != NULL && (!o.has_config || cv->i != o.config_version)) {
		/* A new configuration version re-sizes the owner. */
		if (o.has_config && cv->i < o.config_version) {
			rv = E1("ERR flow limit config_version conflict");
			goto out;
		}
		if (lim == NULL) {
			rv = E1("ERR flow limit limit is required with "
			        "configuration version");
			goto out;
		}
		o.free += lim->i - o.limit;
		if (o.free < 0) {
			o.free = 0;
		}
		o.limit = lim->i;
		o.has_config = true;
		o.config_version = cv->i;
	}
	if (gov_time(g, o.updated_at_ms, "limit", "updated_at_ms", &now, err) !=
	    0) {
		goto out;
	}
	owner_expire(&o, now);
	o.updated_at_ms = (int64_t)now;
	if (o.free <= 0) {
		rv = limit_deny(g, &o, amount, 0);
		goto out;
	}
	grant = amount < o.free ? amount : o.free;
	x = owner_lease(&o, shard);
	if (x == NULL) {
		struct lease *nl = realloc(o.leases, (o.n + 1) * sizeof *nl);
		if (nl == NULL) {
			abort();
		}
		o.leases = nl;
		x = &o.leases[o.n++];
		memset(x, 0, sizeof *x);
		x->shard_id = shard;
		x->epoch = ++o.epoch;
	}
	x->available += grant;
	x->expires_at_ms = (int64_t)now + GO(g, GF_TTL_MS)->i;
	o.free -= grant;
	owner_save(g, &o);
	if (limit_event(g, &o, "limit_leased", grant, NULL) != 0) {
		rv = -1;
		goto out;
	}
	fsnp_w_map_begin(g->w);
	fsnp_w_key(g->w, "owner");
	owner_write(g->w, &o);
	fsnp_w_key(g->w, "lease");
	lease_write(g->w, x);
	fsnp_w_map_end(g->w);
	rv = 0;
out:
	owner_free(&o);
	return rv;
}

int gov_limit_spend(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	int64_t shard = GO(g, GF_SHARD_ID)->i;
	int64_t amount = GO(g, GF_AMOUNT)->i;
	struct owner o;
	struct lease *x;
	uint64_t now;
	int rv = GOV_ERR;

	if (GO(g, GF_RESERVATION_IDS) != NULL) {
		return E1(
		    "ERR flow limit reservation_ids cannot be supplied for "
		    "spend");
	}
	if (check_amount(g, err) != 0) {
		return GOV_ERR;
	}
	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	if (!o.exists) {
		rv = E1("ERR flow limit not found");
		goto out;
	}
	if (gov_time(g, o.updated_at_ms, "limit", "updated_at_ms", &now, err) !=
	    0) {
		goto out;
	}
	owner_expire(&o, now);
	o.updated_at_ms = (int64_t)now;
	x = owner_lease(&o, shard);
	if (x != NULL && (int64_t)now < x->last_spend_at_ms) {
		rv =
		    E1("ERR flow limit now_ms cannot precede last_spend_at_ms");
		goto out;
	}
	if (x == NULL || x->available < amount) {
		rv = limit_deny(g, &o, amount, x != NULL ? x->available : 0);
		goto out;
	}
	x->available -= amount;
	x->in_use += amount;
	x->last_spend_at_ms = (int64_t)now;
	if (GO(g, GF_TTL_MS) != NULL && GO(g, GF_TTL_MS)->i > 0) {
		x->expires_at_ms = (int64_t)now + GO(g, GF_TTL_MS)->i;
	}
	owner_save(g, &o);
	fsnp_w_map_begin(g->w);
	fsnp_w_key(g->w, "owner");
	owner_write(g->w, &o);
	fsnp_w_key(g->w, "lease");
	lease_write(g->w, x);
	fsnp_w_key(g->w, "reservation_ids");
	fsnp_w_array_begin(g->w);
	for (int64_t i = 0; i < amount; i++) {
		char id[23];
		uint8_t v[16];
		struct fsnp_bytes parts[2];
		gov_gen_id(g, (uint64_t)i + 1, id);
		parts[0] = scope;
		parts[1] = (struct fsnp_bytes){(const uint8_t *)id, 22};
		gov_key(g, GK_LIMIT_RES, parts, 2);
		be_put64(v, (uint64_t)shard);
		be_put64(v + 8, (uint64_t)x->epoch);
		store_tx_put(g->c->tx, g->c->key.p, g->c->key.len, v, 16);
		fsnp_w_bin(g->w, id, 22);
	}
	fsnp_w_array_end(g->w);
	fsnp_w_map_end(g->w);
	if (limit_event(g, &o, "limit_spent", amount, NULL) != 0) {
		rv = -1;
		goto out;
	}
	rv = 0;
out:
	owner_free(&o);
	return rv;
}

int gov_limit_release(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	int64_t shard = GO(g, GF_SHARD_ID)->i;
	const struct fsnp_val *ids = &GO(g, GF_RESERVATION_IDS)->v;
	struct owner o;
	struct fsnp_iter it, it2;
	struct fsnp_val e, e2;
	uint64_t now;
	int64_t back = 0;
	uint32_t i = 0;
	int rv = GOV_ERR;

	/* One unique, non-empty text id per credit. */
	if (ids->as.count == 0 ||
	    (GO(g, GF_AMOUNT) != NULL &&
	     GO(g, GF_AMOUNT)->i != (int64_t)ids->as.count)) {
		return E1("ERR flow limit reservation_ids must contain one "
		          "unique id per credit");
	}
	fsnp_iter_init(&it, ids);
	while (fsnp_iter_next(&it, NULL, &e)) {
		uint32_t j = 0;
		if (e.tag != FSNP_BIN || e.as.bin.len == 0) {
			return E1("ERR flow limit reservation_ids must contain "
			          "one unique id per credit");
		}
		fsnp_iter_init(&it2, ids);
		while (j < i && fsnp_iter_next(&it2, NULL, &e2)) {
			if (e2.tag == FSNP_BIN &&
			    e2.as.bin.len == e.as.bin.len &&
			    memcmp(e2.as.bin.ptr, e.as.bin.ptr, e.as.bin.len) ==
			        0) {
				return E1("ERR flow limit reservation_ids must "
				          "contain one unique id per credit");
			}
			j++;
		}
		i++;
	}
	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	if (!o.exists) {
		rv = E1("ERR flow limit not found");
		goto out;
	}
	if (gov_time(g, o.updated_at_ms, "limit", "updated_at_ms", &now, err) !=
	    0) {
		goto out;
	}
	owner_expire(&o, now);
	o.updated_at_ms = (int64_t)now;
	fsnp_iter_init(&it, ids);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct fsnp_bytes parts[2] = {scope, e.as.bin};
		struct sbuf v;
		int got;
		sbuf_init(&v);
		gov_key(g, GK_LIMIT_RES, parts, 2);
		got = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &v);
		if (got < 0) {
			sbuf_free(&v);
			rv = -1;
			goto out;
		}
		if (got == 1) {
			struct lease *x = NULL;
			/* A credit counts only while its lease lives on. */
			if (v.len == 16 && (int64_t)be_get64(v.p) == shard) {
				x = owner_lease(&o, shard);
			}
			if (x != NULL &&
			    x->epoch == (int64_t)be_get64(v.p + 8) &&
			    x->in_use > 0) {
				x->in_use--;
				o.free++;
				back++;
			}
			store_tx_del(g->c->tx, g->c->key.p, g->c->key.len);
		}
		sbuf_free(&v);
	}
	owner_save(g, &o);
	if (limit_event(g, &o, "limit_released", back, NULL) != 0) {
		rv = -1;
		goto out;
	}
	owner_write(g->w, &o);
	rv = 0;
out:
	owner_free(&o);
	return rv;
}

int gov_limit_get(struct gctx *g, struct flow_err *err)
{
	struct owner o;

	(void)err;
	if (owner_load(g, GO(g, GF_SCOPE)->t, &o) < 0) {
		return -1;
	}
	if (!o.exists) {
		fsnp_w_nil(g->w);
		return 0;
	}
	owner_expire(&o, g->c->now);
	owner_write(g->w, &o);
	owner_free(&o);
	return 0;
}

static bool limit_item(struct gctx *g, const struct fsnp_val *m,
                       struct fsnp_writer *w)
{
	struct owner o;
	struct fsnp_bytes scope = gov_mt(m, "scope");

	if (!scope_match(g->q, scope) || owner_load(g, scope, &o) != 1) {
		return false;
	}
	owner_expire(&o, g->c->now);
	owner_write(w, &o);
	owner_free(&o);
	return true;
}

int gov_limit_list(struct gctx *g, struct fsnp_writer *w, int64_t limit,
                   struct flow_err *err)
{
	(void)err;
	fsnp_w_array_begin(w);
	if (scan(g, GK_LIMIT, limit_item, w, limit) != 0) {
		return -1;
	}
	fsnp_w_array_end(w);
	return 0;
}
