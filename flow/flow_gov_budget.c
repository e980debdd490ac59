/* Governance budgets (reference/flow.md 6.3, 6.4).
 *
 * A budget is one record per scope with a fixed window; its reservations
 * are records beside it. RESERVE counts the amount at once and is refused
 * when used + amount would pass the limit, so a budget is never overspent
 * by reservations: every check and update of `used` happens in one apply
 * of the scope's group. When the window has passed, the next command
 * starts a new one (used 0, settled reservations dropped); reservations
 * of an old window no longer count and settling them leaves the new
 * window's `used` alone. As in the reference, the 128 most recently
 * settled reservations are kept for replay (an index in settle order
 * finds the oldest to drop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "store/ext.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)
#define BUDGET_MAX_OPEN 4096
#define BUDGET_MAX_SETTLED 128
#define RES_ID_MAX 256

struct budget {
	bool exists;
	struct fsnp_bytes scope;
	int64_t limit, window_ms, window_start_ms, used, open, updated_at_ms;
	int64_t settled, settle_seq; /* kept settled reservations; last seq */
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
	b->settled = gov_mi(m, "settled_count", 0);
	b->settle_seq = gov_mi(m, "settle_seq", 0);
	b->open = gov_mi(m, "open_count", -1);
	if (b->open < 0) {
		b->open = gov_mi(m, "reservations_count", 0);
	}
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
	/* as the reference counts: open and kept settled ones */
	gov_wi(w, "reservations_count", b->open + b->settled);
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
	gov_wi(&w, "open_count", b->open);
	gov_wi(&w, "settled_count", b->settled);
	gov_wi(&w, "settle_seq", b->settle_seq);
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

/* Deletes the settle-order index of `scope`. */
static int settled_index_clear(struct gctx *g, struct fsnp_bytes scope)
{
	struct store_tx_iter *it;
	struct sbuf prefix, keys;
	size_t n = 0, off = 0;
	int rv;

	gov_key(g, GK_BUDGET_SETTLED, &scope, 1);
	sbuf_init(&prefix);
	sbuf_init(&keys);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t kl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		sbuf_lbytes(&keys, k, kl);
		n++;
	}
	rv = store_tx_iter_close(it);
	for (size_t i = 0; rv == 0 && i < n; i++) {
		uint32_t kl = be_get32(keys.p + off);
		store_tx_del(g->c->tx, keys.p + off + 4, kl);
		off += 4 + kl;
	}
	sbuf_free(&keys);
	sbuf_free(&prefix);
	return rv;
}

/* A reservation was settled: it joins the settle order, and past
 * BUDGET_MAX_SETTLED the oldest settled one is forgotten (index entry and
 * record), as the reference trims its settled reservations. */
static int settled_push(struct gctx *g, struct budget *b, struct fsnp_bytes rid)
{
	struct fsnp_bytes parts[2];
	struct store_tx_iter *it;
	struct sbuf prefix, first, fid;
	uint8_t seq[8];
	int rv;

	b->settle_seq++;
	be_put64(seq, (uint64_t)b->settle_seq);
	parts[0] = b->scope;
	parts[1].ptr = seq;
	parts[1].len = sizeof seq;
	gov_key(g, GK_BUDGET_SETTLED, parts, 2);
	store_tx_put(g->c->tx, g->c->key.p, g->c->key.len, rid.ptr, rid.len);
	if (++b->settled <= BUDGET_MAX_SETTLED) {
		return 0;
	}
	gov_key(g, GK_BUDGET_SETTLED, &b->scope, 1);
	sbuf_init(&prefix);
	sbuf_init(&first);
	sbuf_init(&fid);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	if (store_tx_iter_seek(it, NULL, 0)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		sbuf_add(&first, k, kl);
		sbuf_add(&fid, v, vl);
	}
	rv = store_tx_iter_close(it);
	if (rv == 0 && first.len > 0) {
		struct fsnp_bytes old = {fid.p, fid.len};
		store_tx_del(g->c->tx, first.p, first.len);
		parts[1] = old;
		gov_key(g, GK_BUDGET_RES, parts, 2);
		store_tx_del(g->c->tx, g->c->key.p, g->c->key.len);
		b->settled--;
	}
	sbuf_free(&fid);
	sbuf_free(&first);
	sbuf_free(&prefix);
	return rv;
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
	b->settled = 0;
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
	if (rv == 0) {
		rv = settled_index_clear(g, b->scope);
	}
	return rv;
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
	if (gov_time(g, b.updated_at_ms, "budget", "updated_at_ms", &now,
	             err) != 0) {
		return GOV_ERR;
	}
	/* A passed window first: its settled reservations are gone. */
	if (budget_roll(g, &b, now) != 0) {
		return -1;
	}
	if (resv_load(g, scope, rid, &r) < 0) {
		return -1;
	}
	if (!r.exists) {
		return E1("ERR flow budget reservation not found");
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
	resv_save(g, scope, &r);
	if (settled_push(g, &b, rid) != 0) {
		return -1;
	}
	budget_save(g, &b);
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

static bool budget_item(struct gctx *g, const struct fsnp_val *m,
                        struct fsnp_writer *w)
{
	struct budget b;

	budget_from(&b, m);
	if (!gov_scope_match(g->q, b.scope)) {
		return false;
	}
	if ((int64_t)g->c->now - b.window_start_ms >= b.window_ms) {
		b.used = 0;
		b.settled = 0;
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
	if (gov_scan(g, GK_BUDGET, budget_item, w, limit) != 0) {
		return -1;
	}
	fsnp_w_array_end(w);
	return 0;
}
