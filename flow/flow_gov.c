/* FerricFlow governance (flow_gov.h): the apply entry point, routing,
 * record helpers, the ledger, effects, approvals, circuits, the overview
 * and the merge of fanned-out listings. Budgets and limits are in
 * flow_gov_budget.c.
 *
 * Effects are stored beside their flow (same partition, same group), so
 * EFFECT.* checks the flow's lease token and fencing token and updates
 * the effect and the flow's ledger in one apply: a worker whose lease was
 * taken over (a later claim raised the fencing token) can neither reserve
 * nor settle an effect. A reservation naming a circuit (governance_scope)
 * is checked, and a half-open probe counted, in the same apply when that
 * circuit lives in the flow's group; docs/flow.md "Governance" says what
 * happens otherwise. */
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
#define BIG_MAX (256 * 1024)

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

static void wi_opt(struct fsnp_writer *w, const char *k, bool set, int64_t v)
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
static struct fsnp_bytes flow_part(struct gctx *g, struct fsnp_bytes id)
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

static struct fsnp_bytes auto_part(struct gctx *g, struct fsnp_bytes id)
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
	struct fsnp_bytes parts[2] = {flow_part(g, id), id};
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
	wi_opt(w, "opened_at_ms", k->has_opened, k->opened_at_ms);
	wi_opt(w, "window_ms", k->has_window, k->window_ms);
	gov_wi(w, "min_calls", k->min_calls);
	gov_wi(w, "failure_rate_pct", k->failure_rate_pct);
	wi_opt(w, "latency_threshold_ms", k->has_latency,
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
	wi_opt(w, "half_open_started_at_ms", k->has_started,
	       k->half_open_started_at_ms);
	wi_opt(w, "last_failure_ms", k->has_lf, k->last_failure_ms);
	wi_opt(w, "last_success_ms", k->has_ls, k->last_success_ms);
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

static int op_circuit(struct gctx *g, bool open, struct flow_err *err)
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

static int op_circuit_get(struct gctx *g, struct flow_err *err)
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
	    digest, idem, external_id, circuit;
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
	wi_opt(w, "latency_ms", x->has_latency, x->latency_ms);
	gov_wt(w, "circuit_scope", x->circuit);
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

static int op_effect_reserve(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct fsnp_bytes part = flow_part(g, id);
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

/* A settled effect's outcome, counted by its circuit (same group). */
static int circuit_outcome(struct gctx *g, const struct effect *x, bool ok)
{
	struct circuit k;
	uint64_t now = g->c->now;
	bool was_open;

	if (x->circuit.ptr == NULL) {
		return 0;
	}
	if (circuit_load(g, x->circuit, &k) < 0) {
		return -1;
	}
	if (!k.exists) {
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
		return circuit_event(
		    g, &k, was_open ? "circuit_closed" : "circuit_opened");
	}
	return 0;
}

static int op_effect_settle(struct gctx *g, const char *to,
                            struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct fsnp_bytes part = flow_part(g, id);
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

static int op_effect_get(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes id = GO(g, GF_ID)->t;
	struct effect x;

	(void)err;
	if (effect_load(g, flow_part(g, id), id, GO(g, GF_EFFECT_KEY)->t, &x) <
	    0) {
		return -1;
	}
	if (!x.exists) {
		fsnp_w_nil(g->w);
	} else {
		effect_write(g->w, &x, NULL);
	}
	return 0;
}

/* --- approvals ----------------------------------------------------------- */

struct approval {
	bool exists;
	struct fsnp_bytes id, flow_id, scope, requested_by, policy_hash, status,
	    decided_by;
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
	wi_opt(w, "expires_at_ms", a->has_expires, a->expires_at_ms);
	gov_wt(w, "status", a->status);
	gov_wt(w, "decided_by", a->decided_by);
	wi_opt(w, "decided_at_ms", a->has_decided, a->decided_at_ms);
	gov_wv(w, "decision_reason",
	       a->has_dreason ? &a->decision_reason : NULL);
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
	return gov_ledger(g, auto_part(g, a->id), a->id, &e);
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
	gov_deny_end(g);
	return GOV_ERR;
}

static int op_approval_request(struct gctx *g, struct flow_err *err)
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

static int op_approval_decide(struct gctx *g, bool approve,
                              struct flow_err *err)
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
	approval_write(g->w, &a);
	return 0;
}

static int op_approval_get(struct gctx *g, struct flow_err *err)
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

/* Per-group listing of records of one kind (budgets and limits have
 * theirs in flow_gov_budget.c). */
struct lister {
	struct gctx *g;
	int64_t limit, n, total, extra;
};

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

/* Walks every record of `kind` in the group, calling fn. */
static int walk(struct gctx *g, uint8_t kind,
                void (*fn)(struct lister *, const struct fsnp_val *,
                           struct fsnp_writer *),
                struct lister *l, struct fsnp_writer *w)
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

static void approval_item(struct lister *l, const struct fsnp_val *m,
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

static int check_status(struct gctx *g, struct flow_err *err)
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

static int op_approval_list(struct gctx *g, struct flow_err *err)
{
	struct lister l = {g, gov_list_limit(g->q), 0, 0, 0};

	if (check_status(g, err) != 0) {
		return GOV_ERR;
	}
	fsnp_w_array_begin(g->w);
	if (walk(g, GK_APPROVAL, approval_item, &l, g->w) != 0) {
		return -1;
	}
	fsnp_w_array_end(g->w);
	return 0;
}

static void circuit_item(struct lister *l, const struct fsnp_val *m,
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

static void count_item(struct lister *l, const struct fsnp_val *m,
                       struct fsnp_writer *w)
{
	(void)m;
	(void)w;
	l->total++;
}

static int op_overview(struct gctx *g, struct flow_err *err)
{
	int64_t limit = gov_list_limit(g->q);
	struct lister ap = {g, limit, 0, 0, 0}, ci = {g, limit, 0, 0, 0};
	struct lister bu = {g, 0, 0, 0, 0}, li = {g, 0, 0, 0, 0};

	if (check_status(g, err) != 0) {
		return GOV_ERR;
	}
	fsnp_w_map_begin(g->w);
	fsnp_w_key(g->w, "approvals");
	fsnp_w_array_begin(g->w);
	if (walk(g, GK_APPROVAL, approval_item, &ap, g->w) != 0) {
		return -1;
	}
	fsnp_w_array_end(g->w);
	fsnp_w_key(g->w, "budgets");
	if (gov_budget_list(g, g->w, limit, err) != 0 ||
	    walk(g, GK_BUDGET, count_item, &bu, NULL) != 0) {
		return -1;
	}
	fsnp_w_key(g->w, "limits");
	if (gov_limit_list(g, g->w, limit, err) != 0 ||
	    walk(g, GK_LIMIT, count_item, &li, NULL) != 0) {
		return -1;
	}
	fsnp_w_key(g->w, "circuits");
	fsnp_w_array_begin(g->w);
	if (walk(g, GK_CIRCUIT, circuit_item, &ci, g->w) != 0) {
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
		return op_effect_reserve(g, err);
	case FSNP_OP_FLOW_EFFECT_CONFIRM:
		return op_effect_settle(g, "confirmed", err);
	case FSNP_OP_FLOW_EFFECT_FAIL:
		return op_effect_settle(g, "failed", err);
	case FSNP_OP_FLOW_EFFECT_COMPENSATE:
		return op_effect_settle(g, "compensated", err);
	case FSNP_OP_FLOW_EFFECT_GET:
		return op_effect_get(g, err);
	case FSNP_OP_FLOW_GOVERNANCE_LEDGER:
		return op_ledger(g, err);
	case FSNP_OP_FLOW_APPROVAL_REQUEST:
		return op_approval_request(g, err);
	case FSNP_OP_FLOW_APPROVAL_APPROVE:
		return op_approval_decide(g, true, err);
	case FSNP_OP_FLOW_APPROVAL_REJECT:
		return op_approval_decide(g, false, err);
	case FSNP_OP_FLOW_APPROVAL_GET:
		return op_approval_get(g, err);
	case FSNP_OP_FLOW_APPROVAL_LIST:
		return op_approval_list(g, err);
	case FSNP_OP_FLOW_GOVERNANCE_OVERVIEW:
		return op_overview(g, err);
	case FSNP_OP_FLOW_CIRCUIT_OPEN:
		return op_circuit(g, true, err);
	case FSNP_OP_FLOW_CIRCUIT_CLOSE:
		return op_circuit(g, false, err);
	case FSNP_OP_FLOW_CIRCUIT_GET:
		return op_circuit_get(g, err);
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
