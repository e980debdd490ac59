/* FerricFlow governance (flow_gov.h): the apply entry point and dispatch,
 * routing, the record helpers of flow_gov_internal.h, the decision ledger
 * (appended in each decision's apply, read by GOVERNANCE.LEDGER), the
 * overview and the merge of listings asked of every group. The objects
 * are in flow_gov_effect.c (effects, circuits), flow_gov_approval.c and
 * flow_gov_budget.c and flow_gov_limit.c. */
#include "flow/flow_gov.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "store/ext.h"
#include "store/keys.h"
#include "store/result.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)

/* --- helpers ------------------------------------------------------------ */

void gov_key(struct gctx *g, uint8_t kind, const struct fsnp_bytes *parts,
             size_t n)
{
	struct sbuf *k = &g->c->key;

	sbuf_reset(k);
	sbuf_u32(k, g->c->group);
	sbuf_u8(k, K_FLOW_GOV);
	sbuf_u8(k, kind);
	for (size_t i = 0; i < n; i++) {
		sbuf_lbytes(k, parts[i].ptr, parts[i].len);
	}
}

int gov_load(struct gctx *g, struct fsnp_val *m)
{
	struct sbuf v;
	const uint8_t *p;
	int rv;

	sbuf_init(&v);
	rv = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &v);
	if (rv != 1) {
		sbuf_free(&v);
		return rv;
	}
	p = fctx_dup(g->c, v.p, v.len);
	rv = fsnp_value_decode(p, v.len, NULL, m, NULL) == 0 &&
	             m->tag == FSNP_MAP
	         ? 1
	         : 0; /* an unreadable record reads as absent */
	sbuf_free(&v);
	return rv;
}

void gov_store(struct gctx *g, struct wbuf *b)
{
	store_tx_put(g->c->tx, g->c->key.p, g->c->key.len, b->data, b->len);
	wbuf_free(b);
}

int64_t gov_mi(const struct fsnp_val *m, const char *k, int64_t dflt)
{
	int64_t v;

	return fsnp_map_i64(m, k, &v) == 0 ? v : dflt;
}

bool gov_mhas(const struct fsnp_val *m, const char *k)
{
	struct fsnp_val v;

	return fsnp_map_get(m, k, &v) == 0 && v.tag != FSNP_NIL;
}

struct fsnp_bytes gov_mt(const struct fsnp_val *m, const char *k)
{
	struct fsnp_bytes b = {NULL, 0};

	if (fsnp_map_bin(m, k, &b) != 0) {
		b.ptr = NULL;
		b.len = 0;
	}
	return b;
}

bool gov_mv(const struct fsnp_val *m, const char *k, struct fsnp_val *v)
{
	return fsnp_map_get(m, k, v) == 0 && v->tag != FSNP_NIL;
}

void gov_wt(struct fsnp_writer *w, const char *k, struct fsnp_bytes t)
{
	fsnp_w_key(w, k);
	if (t.ptr == NULL) {
		fsnp_w_nil(w);
	} else {
		fsnp_w_bin(w, t.ptr, t.len);
	}
}

void gov_wi(struct fsnp_writer *w, const char *k, int64_t v)
{
	fsnp_w_key(w, k);
	fsnp_w_i64(w, v);
}

void gov_wv(struct fsnp_writer *w, const char *k, const struct fsnp_val *v)
{
	fsnp_w_key(w, k);
	if (v == NULL) {
		fsnp_w_nil(w);
	} else {
		fsnp_w_val(w, v);
	}
}

void gov_wi_opt(struct fsnp_writer *w, const char *k, bool set, int64_t v)
{
	fsnp_w_key(w, k);
	if (set) {
		fsnp_w_i64(w, v);
	} else {
		fsnp_w_nil(w);
	}
}

struct fsnp_writer *gov_deny(struct gctx *g, const char *code,
                             const char *reason, const char *message)
{
	wbuf_reset(&g->deny);
	fsnp_w_init(&g->dw, &g->deny);
	fsnp_w_map_begin(&g->dw);
	fsnp_w_key(&g->dw, "code");
	fsnp_w_str(&g->dw, code);
	fsnp_w_key(&g->dw, "message");
	fsnp_w_str(&g->dw, message);
	fsnp_w_key(&g->dw, "reason");
	fsnp_w_str(&g->dw, reason);
	fsnp_w_key(&g->dw, "retryable");
	fsnp_w_bool(&g->dw, false);
	fsnp_w_key(&g->dw, "safe_to_retry");
	fsnp_w_bool(&g->dw, false);
	g->denied = true;
	return &g->dw;
}

void gov_deny_end(struct gctx *g)
{
	fsnp_w_map_end(&g->dw);
	fsnp_w_finish(&g->dw);
}

static uint64_t mix(uint64_t x)
{
	x += UINT64_C(0x9E3779B97F4A7C15);
	x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
	return x ^ (x >> 31);
}

void gov_gen_id(struct gctx *g, uint64_t n, char out[23])
{
	static const char al[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                         "abcdefghijklmnopqrstuvwxyz";
	uint64_t a = mix(g->c->seed ^ mix(n));
	uint64_t b = mix(a ^ n ^ store_tx_index(g->c->tx));

	for (int i = 0; i < 22; i++) {
		uint64_t *s = i < 11 ? &a : &b;
		out[i] = al[*s % 62];
		*s /= 62;
	}
	out[22] = '\0';
}

int64_t gov_list_limit(const struct gov_req *q)
{
	int64_t l = q->f[GF_LIMIT].set ? q->f[GF_LIMIT].i : GOV_LIST_DEFAULT;

	if (l <= 0) {
		l = GOV_LIST_DEFAULT;
	}
	return l > GOV_LIST_MAX ? GOV_LIST_MAX : l;
}

/* The command's time for a record last updated at `updated`: a client
 * now_ms older than that is refused; the server's own clock is never
 * taken backwards. */
int gov_time(struct gctx *g, int64_t updated, const char *what,
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

/* Scans the records of `kind` in this group: fn(m) per record, until it
 * returns false or `limit` were written. */
int gov_scan(struct gctx *g, uint8_t kind, gov_scan_fn fn,
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
bool gov_scope_match(const struct gov_req *q, struct fsnp_bytes scope)
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

/* --- ledger -------------------------------------------------------------- */

int gov_ledger(struct gctx *g, struct fsnp_bytes part, struct fsnp_bytes id,
               const struct gov_event *e)
{
	struct fsnp_bytes parts[2] = {part, id};
	struct sbuf meta, ek;
	struct wbuf buf;
	struct fsnp_writer w;
	uint64_t seq = 0, count = 0, at = g->c->now;
	char eid[48];
	int rv;

	if (!g->c->write) {
		return 0;
	}
	sbuf_init(&meta);
	sbuf_init(&ek);
	gov_key(g, GK_LEDGER_META, parts, 2);
	rv = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &meta);
	if (rv < 0) {
		goto out;
	}
	if (rv == 1 && meta.len == 16) {
		seq = be_get64(meta.p);
		count = be_get64(meta.p + 8);
	}
	seq++;
	count++;
	snprintf(eid, sizeof eid, "%llu-%llu", (unsigned long long)at,
	         (unsigned long long)seq);
	wbuf_init(&buf);
	fsnp_w_init(&w, &buf);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_str(&w, eid);
	gov_wt(&w, "flow_id", e->flow_id.ptr ? e->flow_id : id);
	gov_wt(&w, "partition_key", part);
	fsnp_w_key(&w, "kind");
	fsnp_w_str(&w, e->kind);
	gov_wi(&w, "at_ms", (int64_t)at);
	gov_wt(&w, "effect_key", e->effect_key);
	gov_wt(&w, "effect_type", e->effect_type);
	gov_wt(&w, "status", e->status);
	gov_wt(&w, "policy_hash", (struct fsnp_bytes){NULL, 0});
	gov_wt(&w, "policy_version", (struct fsnp_bytes){NULL, 0});
	gov_wt(&w, "code", e->code);
	gov_wt(&w, "message", e->message);
	gov_wt(&w, "policy", e->policy);
	if (e->subject.ptr != NULL) {
		gov_wt(&w, "subject", e->subject);
	}
	if (e->has_amount) {
		gov_wi(&w, "amount", e->amount);
	}
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
	gov_key(g, GK_LEDGER, parts, 2);
	sbuf_u64(&g->c->key, at);
	sbuf_u64(&g->c->key, seq);
	store_tx_put(g->c->tx, g->c->key.p, g->c->key.len, buf.data, buf.len);
	wbuf_free(&buf);
	if (count > GOV_LEDGER_MAX) {
		/* Drop the oldest. */
		struct store_tx_iter *it;
		struct sbuf prefix;
		gov_key(g, GK_LEDGER, parts, 2);
		sbuf_init(&prefix);
		sbuf_add(&prefix, g->c->key.p, g->c->key.len);
		it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
		if (store_tx_iter_seek(it, NULL, 0)) {
			size_t kl;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			sbuf_add(&ek, k, kl);
		}
		rv = store_tx_iter_close(it);
		sbuf_free(&prefix);
		if (rv != 0) {
			rv = -1;
			goto out;
		}
		if (ek.len > 0) {
			store_tx_del(g->c->tx, ek.p, ek.len);
			count--;
		}
	}
	{
		uint8_t v[16];
		be_put64(v, seq);
		be_put64(v + 8, count);
		gov_key(g, GK_LEDGER_META, parts, 2);
		store_tx_put(g->c->tx, g->c->key.p, g->c->key.len, v, 16);
	}
	g->seq++;
	rv = 0;
out:
	sbuf_free(&meta);
	sbuf_free(&ek);
	return rv < 0 ? -1 : 0;
}

/* The partition of a flow id (its partition_key, or its auto bucket). */
struct fsnp_bytes gov_flow_part(struct gctx *g, struct fsnp_bytes id)
{
	const struct gov_opt *pk = GO(g, GF_PARTITION_KEY);
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *p;
	size_t n;
	struct fsnp_bytes out;

	flow_route_partition(id.ptr, id.len, pk ? pk->t.ptr : NULL,
	                     pk ? pk->t.len : 0, buf, &p, &n);
	out.ptr = pk ? p : fctx_dup(g->c, p, n);
	out.len = n;
	return out;
}

bool flow_gov_flow_prefix(struct sbuf *k, uint32_t group, unsigned i,
                          struct fsnp_bytes part, struct fsnp_bytes id)
{
	static const uint8_t kinds[] = {GK_EFFECT, GK_LEDGER, GK_LEDGER_META};

	if (i >= sizeof kinds) {
		return false;
	}
	sbuf_reset(k);
	sbuf_u32(k, group);
	sbuf_u8(k, K_FLOW_GOV);
	sbuf_u8(k, kinds[i]);
	sbuf_lbytes(k, part.ptr, part.len);
	sbuf_lbytes(k, id.ptr, id.len);
	return true;
}

struct fsnp_bytes gov_auto_part(struct gctx *g, struct fsnp_bytes id)
{
	char buf[FLOW_AUTO_PARTITION_MAX];
	size_t n =
	    flow_route_auto_partition(flow_route_bucket(id.ptr, id.len), buf);
	struct fsnp_bytes out = {fctx_dup(g->c, buf, n), n};

	return out;
}

static int op_ledger(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct fsnp_bytes parts[2] = {gov_flow_part(g, id), id};
	const struct gov_opt *from = GO(g, GF_FROM_MS), *to = GO(g, GF_TO_MS);
	bool rev = GO(g, GF_REV) != NULL && GO(g, GF_REV)->b;
	int64_t limit = GO(g, GF_LIMIT) != NULL && GO(g, GF_LIMIT)->i > 0
	                    ? GO(g, GF_LIMIT)->i
	                    : GOV_LIST_DEFAULT;
	struct store_tx_iter *it;
	struct sbuf prefix;
	struct fsnp_val *ev = NULL;
	size_t n = 0, cap = 0;
	int rv;

	(void)err;
	gov_key(g, GK_LEDGER, parts, 2);
	sbuf_init(&prefix);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t kl, vl;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		int64_t at;
		if (kl < prefix.len + 16) {
			continue;
		}
		at = (int64_t)be_get64(k + prefix.len);
		if ((from != NULL && at < from->i) ||
		    (to != NULL && at > to->i)) {
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			ev = realloc(ev, cap * sizeof *ev);
			if (ev == NULL) {
				abort();
			}
		}
		v = fctx_dup(g->c, v, vl);
		if (fsnp_value_decode(v, vl, NULL, &ev[n], NULL) == 0) {
			n++;
		}
	}
	rv = store_tx_iter_close(it);
	sbuf_free(&prefix);
	if (rv == 0) {
		size_t take = n < (size_t)limit ? n : (size_t)limit;
		fsnp_w_array_begin(g->w);
		for (size_t i = 0; i < take; i++) {
			fsnp_w_val(g->w, &ev[rev ? n - 1 - i : i]);
		}
		fsnp_w_array_end(g->w);
	}
	free(ev);
	return rv != 0 ? -1 : 0;
}

/* Walks every record of `kind` in the group, calling fn. */
int gov_walk(struct gctx *g, uint8_t kind,
             void (*fn)(struct gov_lister *, const struct fsnp_val *,
                        struct fsnp_writer *),
             struct gov_lister *l, struct fsnp_writer *w)
{
	struct store_tx_iter *it;
	struct sbuf prefix;
	int rv;

	gov_key(g, kind, NULL, 0);
	sbuf_init(&prefix);
	sbuf_add(&prefix, g->c->key.p, g->c->key.len);
	it = store_tx_iter_open(g->c->tx, prefix.p, prefix.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t vl;
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_val m;
		v = fctx_dup(g->c, v, vl);
		if (fsnp_value_decode(v, vl, NULL, &m, NULL) == 0 &&
		    m.tag == FSNP_MAP) {
			fn(l, &m, w);
		}
	}
	rv = store_tx_iter_close(it);
	sbuf_free(&prefix);
	return rv;
}

static void count_item(struct gov_lister *l, const struct fsnp_val *m,
                       struct fsnp_writer *w)
{
	(void)m;
	(void)w;
	l->total++;
}

static int op_overview(struct gctx *g, struct flow_err *err)
{
	int64_t limit = gov_list_limit(g->q);
	struct gov_lister ap = {g, limit, 0, 0, 0}, ci = {g, limit, 0, 0, 0};
	struct gov_lister bu = {g, 0, 0, 0, 0}, li = {g, 0, 0, 0, 0};

	if (gov_check_status(g, err) != 0) {
		return GOV_ERR;
	}
	fsnp_w_map_begin(g->w);
	fsnp_w_key(g->w, "approvals");
	fsnp_w_array_begin(g->w);
	if (gov_walk(g, GK_APPROVAL, gov_approval_item, &ap, g->w) != 0) {
		return -1;
	}
	fsnp_w_array_end(g->w);
	fsnp_w_key(g->w, "budgets");
	if (gov_budget_list(g, g->w, limit, err) != 0 ||
	    gov_walk(g, GK_BUDGET, count_item, &bu, NULL) != 0) {
		return -1;
	}
	fsnp_w_key(g->w, "limits");
	if (gov_limit_list(g, g->w, limit, err) != 0 ||
	    gov_walk(g, GK_LIMIT, count_item, &li, NULL) != 0) {
		return -1;
	}
	fsnp_w_key(g->w, "circuits");
	fsnp_w_array_begin(g->w);
	if (gov_walk(g, GK_CIRCUIT, gov_circuit_item, &ci, g->w) != 0) {
		return -1;
	}
	fsnp_w_array_end(g->w);
	fsnp_w_key(g->w, "counts");
	fsnp_w_map_begin(g->w);
	gov_wi(g->w, "approvals", ap.total);
	gov_wi(g->w, "pending_approvals", ap.extra);
	gov_wi(g->w, "budgets", bu.total);
	gov_wi(g->w, "limits", li.total);
	gov_wi(g->w, "circuits", ci.total);
	gov_wi(g->w, "open_circuits", ci.extra & 0xffffffff);
	gov_wi(g->w, "half_open_circuits", ci.extra >> 32);
	fsnp_w_map_end(g->w);
	fsnp_w_map_end(g->w);
	return 0;
}

/* --- dispatch ------------------------------------------------------------ */

bool flow_gov_is_read(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_EFFECT_GET:
	case FSNP_OP_FLOW_GOVERNANCE_LEDGER:
	case FSNP_OP_FLOW_APPROVAL_GET:
	case FSNP_OP_FLOW_APPROVAL_LIST:
	case FSNP_OP_FLOW_GOVERNANCE_OVERVIEW:
	case FSNP_OP_FLOW_CIRCUIT_GET:
	case FSNP_OP_FLOW_BUDGET_GET:
	case FSNP_OP_FLOW_BUDGET_LIST:
	case FSNP_OP_FLOW_LIMIT_GET:
	case FSNP_OP_FLOW_LIMIT_LIST:
		return true;
	default:
		return false;
	}
}

bool flow_gov_fans_out(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_APPROVAL_LIST:
	case FSNP_OP_FLOW_GOVERNANCE_OVERVIEW:
	case FSNP_OP_FLOW_BUDGET_LIST:
	case FSNP_OP_FLOW_LIMIT_LIST:
		return true;
	default:
		return false;
	}
}

void flow_gov_partition(const struct flow_req *req, char *buf,
                        const uint8_t **part, size_t *len)
{
	const struct flow_opt *id = &req->f[FF_ID];
	const struct flow_opt *pk = &req->f[FF_PARTITION_KEY];
	const struct flow_opt *scope = &req->f[FF_SCOPE];

	*part = NULL;
	*len = 0;
	switch (req->opcode) {
	case FSNP_OP_FLOW_EFFECT_RESERVE:
	case FSNP_OP_FLOW_EFFECT_CONFIRM:
	case FSNP_OP_FLOW_EFFECT_FAIL:
	case FSNP_OP_FLOW_EFFECT_COMPENSATE:
	case FSNP_OP_FLOW_EFFECT_GET:
	case FSNP_OP_FLOW_GOVERNANCE_LEDGER:
		if (id->set && id->t.len > 0) {
			flow_route_partition(
			    id->t.ptr, id->t.len, pk->set ? pk->t.ptr : NULL,
			    pk->set ? pk->t.len : 0, buf, part, len);
		}
		return;
	case FSNP_OP_FLOW_APPROVAL_REQUEST:
	case FSNP_OP_FLOW_APPROVAL_APPROVE:
	case FSNP_OP_FLOW_APPROVAL_REJECT:
	case FSNP_OP_FLOW_APPROVAL_GET:
		if (id->set && id->t.len > 0) {
			flow_route_partition(id->t.ptr, id->t.len, NULL, 0, buf,
			                     part, len);
		}
		return;
	case FSNP_OP_FLOW_APPROVAL_LIST:
	case FSNP_OP_FLOW_GOVERNANCE_OVERVIEW:
		return;
	default:
		if (scope->set && scope->t.len > 0) {
			*part = scope->t.ptr;
			*len = scope->t.len;
		}
		return;
	}
}

static int run(struct gctx *g, struct flow_err *err)
{
	switch (g->q->opcode) {
	case FSNP_OP_FLOW_EFFECT_RESERVE:
		return gov_effect_reserve(g, err);
	case FSNP_OP_FLOW_EFFECT_CONFIRM:
		return gov_effect_settle(g, "confirmed", err);
	case FSNP_OP_FLOW_EFFECT_FAIL:
		return gov_effect_settle(g, "failed", err);
	case FSNP_OP_FLOW_EFFECT_COMPENSATE:
		return gov_effect_settle(g, "compensated", err);
	case FSNP_OP_FLOW_EFFECT_GET:
		return gov_effect_get(g, err);
	case FSNP_OP_FLOW_GOVERNANCE_LEDGER:
		return op_ledger(g, err);
	case FSNP_OP_FLOW_APPROVAL_REQUEST:
		return gov_approval_request(g, err);
	case FSNP_OP_FLOW_APPROVAL_APPROVE:
		return gov_approval_decide(g, true, err);
	case FSNP_OP_FLOW_APPROVAL_REJECT:
		return gov_approval_decide(g, false, err);
	case FSNP_OP_FLOW_APPROVAL_GET:
		return gov_approval_get(g, err);
	case FSNP_OP_FLOW_APPROVAL_LIST:
		return gov_approval_list(g, err);
	case FSNP_OP_FLOW_GOVERNANCE_OVERVIEW:
		return op_overview(g, err);
	case FSNP_OP_FLOW_CIRCUIT_OPEN:
		return gov_circuit_set(g, true, err);
	case FSNP_OP_FLOW_CIRCUIT_CLOSE:
		return gov_circuit_set(g, false, err);
	case FSNP_OP_FLOW_CIRCUIT_GET:
		return gov_circuit_get(g, err);
	case FLOW_GOV_OP_CIRCUIT_COUNT:
		return gov_circuit_count(g, err);
	case FLOW_GOV_OP_LIMIT_CLAIM:
		return gov_limit_claim(g, err);
	case FLOW_GOV_OP_LIMIT_RETURN:
		return gov_limit_return(g, err);
	case FLOW_GOV_OP_LIMIT_RENEW:
		return gov_limit_renew(g, err);
	case FSNP_OP_FLOW_BUDGET_RESERVE:
		return gov_budget_reserve(g, err);
	case FSNP_OP_FLOW_BUDGET_COMMIT:
		return gov_budget_settle(g, true, err);
	case FSNP_OP_FLOW_BUDGET_RELEASE:
		return gov_budget_settle(g, false, err);
	case FSNP_OP_FLOW_BUDGET_GET:
		return gov_budget_get(g, err);
	case FSNP_OP_FLOW_BUDGET_LIST:
		return gov_budget_list(g, g->w, gov_list_limit(g->q), err);
	case FSNP_OP_FLOW_LIMIT_LEASE:
		return gov_limit_lease(g, err);
	case FSNP_OP_FLOW_LIMIT_SPEND:
		return gov_limit_spend(g, err);
	case FSNP_OP_FLOW_LIMIT_RELEASE:
		return gov_limit_release(g, err);
	case FSNP_OP_FLOW_LIMIT_GET:
		return gov_limit_get(g, err);
	case FSNP_OP_FLOW_LIMIT_LIST:
		return gov_limit_list(g, g->w, gov_list_limit(g->q), err);
	default:
		return E1("ERR native unsupported flow opcode 0x%04x",
		          g->q->opcode);
	}
}

static uint8_t store_status(const struct flow_err *err)
{
	return err->status == FLOW_STATUS_BAD_REQUEST ? STORE_BAD_COMMAND
	                                              : STORE_ERR;
}

int flow_gov_apply(struct tx *tx, uint16_t opcode, const uint8_t *body,
                   size_t len, uint64_t skew, uint64_t seed, struct sbuf *res)
{
	struct flow_req freq;
	struct gov_req q;
	struct flow_err err = {0, ""};
	struct fsnp_val v;
	struct fctx c;
	struct gctx g;
	struct wbuf b;
	struct fsnp_writer w;
	int rv;

	/* The shared checks (allow-list) and then the governance fields. */
	if (flow_body_decode_bytes(opcode, body, len, &freq, &err) != 0) {
		res_error(res, store_status(&err), err.msg);
		return 0;
	}
	if (fsnp_value_decode_body(body, len, NULL, &v) != 0 ||
	    flow_gov_body_decode(opcode, &v, &q, &err) != 0) {
		res_error(res, store_status(&err), err.msg);
		return 0;
	}
	fctx_init(&c, tx, skew, seed);
	if (q.f[GF_NOW_MS].set) {
		/* A client clock within the allowed skew of the entry's. */
		uint64_t lo = c.entry_now > skew ? c.entry_now - skew : 0;
		uint64_t hi = c.entry_now + skew;
		uint64_t t = (uint64_t)q.f[GF_NOW_MS].i;
		c.now = t < lo ? lo : t > hi ? hi : t;
	}
	memset(&g, 0, sizeof g);
	g.c = &c;
	g.q = &q;
	wbuf_init(&g.deny);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	g.w = &w;
	rv = run(&g, &err);
	if (rv == 0) {
		if (fsnp_w_finish(&w) == 0 && !b.oom) {
			res_begin(res, STORE_OK);
			sbuf_add(res, b.data, b.len);
		} else {
			res_error(res, STORE_ERR,
			          "ERR flow reply could not be built");
		}
	} else if (rv > 0 && g.denied) {
		res_begin(res, STORE_ERR);
		sbuf_add(res, g.deny.data, g.deny.len);
	} else if (rv > 0) {
		res_error(res, store_status(&err), err.msg);
	}
	wbuf_free(&b);
	wbuf_free(&g.deny);
	fctx_fini(&c);
	if (rv < 0) {
		return -1;
	}
	return rv == GOV_KEEP ? STORE_EXT_KEEP : 0;
}

/* --- merging fanned-out listings ---------------------------------------- */

static void concat(const struct fsnp_val *lists, size_t n, int64_t limit,
                   struct fsnp_writer *w)
{
	int64_t k = 0;

	fsnp_w_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		struct fsnp_iter it;
		struct fsnp_val e;
		if (lists[i].tag != FSNP_ARRAY) {
			continue;
		}
		fsnp_iter_init(&it, &lists[i]);
		while (k < limit && fsnp_iter_next(&it, NULL, &e)) {
			fsnp_w_val(w, &e);
			k++;
		}
	}
	fsnp_w_array_end(w);
}

int flow_gov_merge(uint16_t opcode, const struct gov_req *req,
                   const struct fsnp_val *values, size_t n,
                   struct fsnp_writer *w)
{
	static const char *const lists[] = {"approvals", "budgets", "limits",
	                                    "circuits"};
	static const char *const counts[] = {
	    "approvals", "pending_approvals", "budgets",           "limits",
	    "circuits",  "open_circuits",     "half_open_circuits"};
	int64_t limit = gov_list_limit(req);
	struct fsnp_val *sub;

	for (size_t i = 0; i < n; i++) {
		if (values[i].tag != (opcode == FSNP_OP_FLOW_GOVERNANCE_OVERVIEW
		                          ? FSNP_MAP
		                          : FSNP_ARRAY)) {
			return -1;
		}
	}
	if (opcode != FSNP_OP_FLOW_GOVERNANCE_OVERVIEW) {
		concat(values, n, limit, w);
		return 0;
	}
	sub = calloc(n > 0 ? n : 1, sizeof *sub);
	if (sub == NULL) {
		return -1;
	}
	fsnp_w_map_begin(w);
	for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
		for (size_t i = 0; i < n; i++) {
			if (fsnp_map_get(&values[i], lists[l], &sub[i]) != 0) {
				sub[i].tag = FSNP_NIL;
			}
		}
		fsnp_w_key(w, lists[l]);
		concat(sub, n, limit, w);
	}
	fsnp_w_key(w, "counts");
	fsnp_w_map_begin(w);
	for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
		int64_t sum = 0;
		for (size_t i = 0; i < n; i++) {
			struct fsnp_val m;
			if (fsnp_map_get(&values[i], "counts", &m) == 0) {
				sum += gov_mi(&m, counts[c], 0);
			}
		}
		gov_wi(w, counts[c], sum);
	}
	fsnp_w_map_end(w);
	fsnp_w_map_end(w);
	free(sub);
	return 0;
}
