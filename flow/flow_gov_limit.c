/* Governance limits (reference/flow.md 6.3, 6.4).
 *
 * A limit is an owner record per scope holding `free` credits and one
 * lease per shard id: LEASE moves credits from free to the lease's
 * `available`, SPEND from available to `in_use` (one reservation id per
 * credit, generated from the command's seed, kept as a credit record
 * naming the lease's epoch), RELEASE back to the lease's available, as
 * the reference's CreditLease does. A lease past its expires_at_ms is
 * dropped, with its credits, by the next command (reads show the owner as
 * it would be); a credit of a dropped lease no longer counts. After every
 * change `free` is the limit less what the leases hold; a limit lowered
 * below that drains the leases' available credits in shard order. A
 * LEASE refused for want of free credits marks up to the amount asked as
 * `pending_reclaim` on the other shards' leases (in shard order); credits
 * granted to a lease lower its own mark. `drain_rate` is 0.0, as the
 * reference never sets it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov_internal.h"
#include "store/ext.h"
#include "wire/flow_route.h"

#define E1(...) ((void)flow_fail(err, FLOW_STATUS_ERROR, __VA_ARGS__), GOV_ERR)
#define LIMIT_LEASES_MAX 1024

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

static int lease_cmp(const void *a, const void *b)
{
	const struct lease *x = a, *y = b;

	return (x->shard_id > y->shard_id) - (x->shard_id < y->shard_id);
}

/* free = limit - what the leases hold; past the limit, available credits
 * are drained in shard order and marks kept within what is available. */
static void owner_rebalance(struct owner *o)
{
	int64_t held = 0, excess;

	for (size_t i = 0; i < o->n; i++) {
		held += o->leases[i].available + o->leases[i].in_use;
	}
	if (held <= o->limit) {
		o->free = o->limit - held;
		return;
	}
	excess = held - o->limit;
	for (size_t i = 0; i < o->n && excess > 0; i++) {
		struct lease *x = &o->leases[i];
		int64_t d = x->available < excess ? x->available : excess;
		x->available -= d;
		held -= d;
		excess -= d;
		if (x->pending_reclaim > x->available) {
			x->pending_reclaim = x->available;
		}
	}
	o->free = held < o->limit ? o->limit - held : 0;
}

/* A LEASE of `amount` refused: mark credits to reclaim on the other
 * shards' leases, in shard order, up to the amount. */
static void owner_mark_reclaim(struct owner *o, int64_t shard, int64_t amount)
{
	for (size_t i = 0; i < o->n && amount > 0; i++) {
		struct lease *x = &o->leases[i];
		int64_t can = x->available - x->pending_reclaim;
		int64_t r;
		if (x->shard_id == shard || can <= 0) {
			continue;
		}
		r = can < amount ? can : amount;
		x->pending_reclaim += r;
		amount -= r;
	}
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
		qsort(o->leases, o->n, sizeof *o->leases, lease_cmp);
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
	owner_rebalance(o);
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
	} else if (cv != NULL && lim == NULL) {
		rv = E1("ERR flow limit limit is required with configuration "
		        "version");
		goto out;
	} else if (lim != NULL && cv == NULL) {
		if (lim->i != o.limit) {
			rv = E1("ERR flow limit config_version is required to "
			        "change limit");
			goto out;
		}
	} else if (lim != NULL && cv->i == o.config_version) {
		if (lim->i != o.limit) {
			rv = E1("ERR flow limit config_version conflict");
			goto out;
		}
		o.has_config = true;
	} else if (lim != NULL && cv->i > o.config_version) {
		/* A newer configuration re-sizes the owner (an older one
		 * is ignored, as in the reference). */
		o.limit = lim->i;
		o.has_config = true;
		o.config_version = cv->i;
		owner_rebalance(&o);
	}
	if (gov_time(g, o.updated_at_ms, "limit", "updated_at_ms", &now, err) !=
	    0) {
		goto out;
	}
	owner_expire(&o, now);
	o.updated_at_ms = (int64_t)now;
	if (o.free <= 0) {
		owner_mark_reclaim(&o, shard, amount);
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
	x->pending_reclaim =
	    x->pending_reclaim > grant ? x->pending_reclaim - grant : 0;
	if (x->expires_at_ms < (int64_t)now + GO(g, GF_TTL_MS)->i) {
		x->expires_at_ms = (int64_t)now + GO(g, GF_TTL_MS)->i;
	}
	o.free -= grant;
	shard = x->shard_id;
	if (o.n > 1) {
		qsort(o.leases, o.n, sizeof *o.leases, lease_cmp);
	}
	x = owner_lease(&o, shard);
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
	if (GO(g, GF_TTL_MS) != NULL && GO(g, GF_TTL_MS)->i > 0 &&
	    x->expires_at_ms < (int64_t)now + GO(g, GF_TTL_MS)->i) {
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

/* Gives credit `rid` of lease `shard` back to that lease (in_use to
 * available) and forgets it. 1 when it counted, 0 when it did not (an
 * unknown id, or a credit of a lease since dropped), -1 on I/O failure. */
static int credit_release(struct gctx *g, struct owner *o, int64_t shard,
                          struct fsnp_bytes rid)
{
	struct fsnp_bytes parts[2] = {o->scope, rid};
	struct sbuf v;
	int got, back = 0;

	sbuf_init(&v);
	gov_key(g, GK_LIMIT_RES, parts, 2);
	got = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &v);
	if (got < 0) {
		sbuf_free(&v);
		return -1;
	}
	if (got == 1) {
		struct lease *x = NULL;
		/* A credit counts only while its lease lives on. */
		if (v.len == 16 && (int64_t)be_get64(v.p) == shard) {
			x = owner_lease(o, shard);
		}
		if (x != NULL && x->epoch == (int64_t)be_get64(v.p + 8) &&
		    x->in_use > 0) {
			x->in_use--;
			x->available++;
			back = 1;
		}
		store_tx_del(g->c->tx, g->c->key.p, g->c->key.len);
	}
	sbuf_free(&v);
	return back;
}

/* The record of the credit a claimed flow holds: FLOW_CREDIT_V1, the
 * lease's shard id and the claim's fencing token (8 bytes each, big
 * endian), then the credit's reservation id. A record written before the
 * fencing token was kept is the shard id and the reservation id (its first
 * byte is 0: shard ids are below LIMIT_LEASES_MAX). */
#define FLOW_CREDIT_V1 0x01

struct flow_credit {
	int64_t shard, fencing;
	bool has_fencing;
	struct fsnp_bytes rid;
};

static bool flow_credit_parse(const struct sbuf *v, struct flow_credit *fc)
{
	memset(fc, 0, sizeof *fc);
	if (v->len >= 17 && v->p[0] == FLOW_CREDIT_V1) {
		fc->shard = (int64_t)be_get64(v->p + 1);
		fc->fencing = (int64_t)be_get64(v->p + 9);
		fc->has_fencing = true;
		fc->rid = (struct fsnp_bytes){v->p + 17, v->len - 17};
		return true;
	}
	if (v->len >= 8 && v->p[0] == 0) {
		fc->shard = (int64_t)be_get64(v->p);
		fc->rid = (struct fsnp_bytes){v->p + 8, v->len - 8};
		return true;
	}
	return false;
}

/* The key of the credit a claimed flow (id, partition) holds. */
static void flow_credit_key(struct gctx *g, struct fsnp_bytes scope,
                            struct fsnp_bytes id, const struct fsnp_bytes *pk)
{
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *p;
	size_t n;
	struct fsnp_bytes parts[3];

	flow_route_partition(id.ptr, id.len, pk != NULL ? pk->ptr : NULL,
	                     pk != NULL ? pk->len : 0, buf, &p, &n);
	parts[0] = scope;
	parts[1].ptr = fctx_dup(g->c, p, n);
	parts[1].len = n;
	parts[2] = id;
	gov_key(g, GK_LIMIT_FLOW, parts, 3);
}

/* The internal LIMIT.CLAIM after a claim admitted by the limit (the
 * FSNP layer spent the credits first): each claimed flow (`items`: {id,
 * partition_key, reservation_id}) keeps its credit until it is settled,
 * and the credits nobody got (`reservation_ids`) go back to the lease. */
int gov_limit_claim(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	int64_t shard = GO(g, GF_SHARD_ID)->i;
	const struct gov_opt *items = GO(g, GF_ITEMS);
	const struct gov_opt *ids = GO(g, GF_RESERVATION_IDS);
	struct fsnp_iter it;
	struct fsnp_val e;
	struct owner o;
	int64_t back = 0;
	int rv = 0;

	(void)err;
	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	if (!o.exists) {
		fsnp_w_nil(g->w);
		goto out;
	}
	owner_expire(&o, g->c->now);
	if (items != NULL) {
		fsnp_iter_init(&it, &items->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			struct fsnp_bytes id, pk, rid;
			struct fsnp_val fv;
			int64_t fen = 0;
			uint8_t v[1 + 16];
			bool has_pk =
			    fsnp_map_bin(&e, "partition_key", &pk) == 0;
			if (e.tag != FSNP_MAP ||
			    fsnp_map_bin(&e, "id", &id) != 0 ||
			    fsnp_map_bin(&e, "reservation_id", &rid) != 0) {
				continue;
			}
			if (fsnp_map_get(&e, "fencing_token", &fv) == 0) {
				(void)fsnp_val_i64(&fv, &fen);
			}
			flow_credit_key(g, scope, id, has_pk ? &pk : NULL);
			v[0] = FLOW_CREDIT_V1;
			be_put64(v + 1, (uint64_t)shard);
			be_put64(v + 9, (uint64_t)fen);
			{
				struct wbuf b;
				wbuf_init(&b);
				wbuf_append(&b, v, sizeof v);
				wbuf_append(&b, rid.ptr, rid.len);
				gov_store(g, &b);
			}
		}
	}
	if (ids != NULL) {
		fsnp_iter_init(&it, &ids->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			int got;
			if (e.tag != FSNP_BIN) {
				continue;
			}
			if ((got = credit_release(g, &o, shard, e.as.bin)) <
			    0) {
				rv = -1;
				goto out;
			}
			back += got;
		}
	}
	owner_rebalance(&o);
	o.updated_at_ms = o.updated_at_ms > (int64_t)g->c->now
	                      ? o.updated_at_ms
	                      : (int64_t)g->c->now;
	owner_save(g, &o);
	if (back > 0 && limit_event(g, &o, "limit_released", back, NULL) != 0) {
		rv = -1;
		goto out;
	}
	owner_write(g->w, &o);
out:
	owner_free(&o);
	return rv;
}

/* Gives back the credit flow (id, pk) holds, if any: 1 when it counted,
 * 0 when not, -1 on I/O failure. */
static int flow_credit_return(struct gctx *g, struct owner *o,
                              struct fsnp_bytes scope, struct fsnp_bytes id,
                              const struct fsnp_bytes *pk)
{
	struct flow_credit fc;
	struct sbuf v;
	int got;

	sbuf_init(&v);
	flow_credit_key(g, scope, id, pk);
	got = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &v);
	if (got != 1) {
		sbuf_free(&v);
		return got < 0 ? -1 : 0;
	}
	store_tx_del(g->c->tx, g->c->key.p, g->c->key.len);
	got = flow_credit_parse(&v, &fc) && o->exists
	          ? credit_release(g, o, fc.shard, fc.rid)
	          : 0;
	sbuf_free(&v);
	return got;
}

/* The internal LIMIT.RETURN after COMPLETE, FAIL, CANCEL or RETRY (or
 * their *_MANY batches: `items` [{id, partition_key}], the items that
 * settled) with the admission options: the credit each flow holds goes
 * back to its lease (once: the flow's record of it is deleted). Answers
 * the owner, or nil when no flow held a credit. */
int gov_limit_return(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	const struct gov_opt *id = GO(g, GF_ID);
	const struct gov_opt *pk = GO(g, GF_PARTITION_KEY);
	const struct gov_opt *items = GO(g, GF_ITEMS);
	struct owner o;
	int64_t back = 0;
	int got, rv = 0;

	if (id == NULL && items == NULL) {
		return E1("ERR flow limit return needs id or items");
	}
	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	if (o.exists) {
		owner_expire(&o, g->c->now);
	}
	if (id != NULL) {
		got = flow_credit_return(g, &o, scope, id->t,
		                         pk != NULL ? &pk->t : NULL);
		if (got < 0) {
			rv = -1;
			goto out;
		}
		back += got;
	}
	if (items != NULL) {
		struct fsnp_iter it;
		struct fsnp_val e;
		fsnp_iter_init(&it, &items->v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			struct fsnp_bytes iid, ipk;
			bool has_pk;
			if (e.tag != FSNP_MAP ||
			    fsnp_map_bin(&e, "id", &iid) != 0) {
				continue;
			}
			has_pk = fsnp_map_bin(&e, "partition_key", &ipk) == 0;
			got = flow_credit_return(g, &o, scope, iid,
			                         has_pk ? &ipk : NULL);
			if (got < 0) {
				rv = -1;
				goto out;
			}
			back += got;
		}
	}
	if (!o.exists || back == 0) {
		fsnp_w_nil(g->w); /* nothing held */
		goto out;
	}
	owner_rebalance(&o);
	if (o.updated_at_ms < (int64_t)g->c->now) {
		o.updated_at_ms = (int64_t)g->c->now;
	}
	owner_save(g, &o);
	if (limit_event(g, &o, "limit_released", back, NULL) != 0) {
		rv = -1;
		goto out;
	}
	owner_write(g->w, &o);
out:
	owner_free(&o);
	return rv;
}

/* The internal LIMIT.RENEW before EXTEND_LEASE with the admission
 * options: when the flow holds a credit of the claim whose fencing token
 * the body carries, that credit's lease lives at least ttl_ms more (as
 * the reference renews the lease of a governed flow before extending
 * it); a lease already dropped is `ERR flow limit lease expired`. A flow
 * holding no credit (ungoverned, settled, or claimed again since) renews
 * nothing and answers nil. */
int gov_limit_renew(struct gctx *g, struct flow_err *err)
{
	struct fsnp_bytes scope = GO(g, GF_SCOPE)->t;
	const struct gov_opt *pk = GO(g, GF_PARTITION_KEY);
	const struct gov_opt *fen = GO(g, GF_FENCING_TOKEN);
	struct flow_credit fc;
	struct owner o;
	struct lease *x;
	struct sbuf v;
	int got, rv = GOV_ERR;

	if (owner_load(g, scope, &o) < 0) {
		return -1;
	}
	sbuf_init(&v);
	flow_credit_key(g, scope, GO(g, GF_ID)->t, pk != NULL ? &pk->t : NULL);
	got = store_tx_get(g->c->tx, g->c->key.p, g->c->key.len, &v);
	if (got < 0) {
		rv = -1;
		goto out;
	}
	if (got != 1 || !o.exists || !flow_credit_parse(&v, &fc) ||
	    (fc.has_fencing && fen != NULL && fc.fencing != fen->i)) {
		fsnp_w_nil(g->w);
		rv = 0;
		goto out;
	}
	owner_expire(&o, g->c->now);
	x = owner_lease(&o, fc.shard);
	if (x == NULL) {
		rv = E1("ERR flow limit lease expired");
		goto out;
	}
	if (x->expires_at_ms < (int64_t)g->c->now + GO(g, GF_TTL_MS)->i) {
		x->expires_at_ms = (int64_t)g->c->now + GO(g, GF_TTL_MS)->i;
	}
	if (o.updated_at_ms < (int64_t)g->c->now) {
		o.updated_at_ms = (int64_t)g->c->now;
	}
	owner_save(g, &o);
	fsnp_w_map_begin(g->w);
	fsnp_w_key(g->w, "owner");
	owner_write(g->w, &o);
	fsnp_w_key(g->w, "lease");
	lease_write(g->w, x);
	fsnp_w_map_end(g->w);
	rv = 0;
out:
	sbuf_free(&v);
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
		int got = credit_release(g, &o, shard, e.as.bin);
		if (got < 0) {
			rv = -1;
			goto out;
		}
		back += got;
	}
	owner_rebalance(&o);
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

	if (!gov_scope_match(g->q, scope) || owner_load(g, scope, &o) != 1) {
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
	if (gov_scan(g, GK_LIMIT, limit_item, w, limit) != 0) {
		return -1;
	}
	fsnp_w_array_end(w);
	return 0;
}
