/* FSNP KV: the keyspace record, strings with TTL (SET NX/XX/GET/KEEPTTL,
 * GET, DEL, MSET, MGET, CAS), locks, sliding-window rate limits and
 * fetch-or-compute leases. Results are FSNP typed values; error texts are
 * the reference server's. Expiry: a key past its deadline is invisible
 * (entry time on writes, the leader's clock on reads) and is reclaimed by
 * a write that meets it or by EXPIRE. */
#include <string.h>

#include "store/kv.h"

void kv_key(struct sbuf *k, uint32_t group, struct store_slice key)
{
	key_start(k, group, K_KV);
	sbuf_add(k, key.p, key.len);
}

/* Points `b` at the caller's `stack` bytes when `need` fits (nothing may
 * then grow it past `cap`), else at an empty heap buffer: the SET path
 * allocated its key and value on every command. buf_done releases. */
static void buf_on(struct sbuf *b, uint8_t *stack, size_t cap, size_t need)
{
	if (need <= cap) {
		b->p = stack;
		b->len = 0;
		b->cap = cap;
	} else {
		sbuf_init(b);
	}
}

static void buf_done(struct sbuf *b, const uint8_t *stack)
{
	if (b->p != stack) {
		sbuf_free(b);
	}
}

void kv_sub_prefix(struct sbuf *k, uint32_t group, uint8_t type,
                   struct store_slice key)
{
	key_start(k, group, type);
	key_sub(k, key);
}

static void what_key(struct sbuf *w, struct store_slice key)
{
	sbuf_reset(w);
	sbuf_add(w, key.p, key.len);
}

int kv_load(struct tx *tx, struct store_slice key, struct kv_obj *o)
{
	uint8_t kb[128];
	struct sbuf k;
	int found;

	memset(o, 0, sizeof *o);
	buf_on(&k, kb, sizeof kb, 5 + key.len);
	kv_key(&k, tx->group, key);
	found = tx_get(tx, &k, &o->raw);
	buf_done(&k, kb);
	if (found <= 0) {
		return found < 0 ? -1 : 0;
	}
	if (o->raw.len < 9 || o->raw.p[0] < T_STRING ||
	    o->raw.p[0] > T_RATELIMIT) {
		return tx_fail(tx, "corrupt KV record", NULL);
	}
	o->type = (uint8_t)o->raw.p[0];
	o->expires = be_get64((const uint8_t *)o->raw.p + 1);
	o->body.p = (const uint8_t *)o->raw.p + 9;
	o->body.len = o->raw.len - 9;
	o->state =
	    o->expires != 0 && o->expires <= tx->now_ms ? KV_LAPSED : KV_LIVE;
	return 0;
}

void kv_obj_free(struct kv_obj *o)
{
	val_free(&o->raw);
	o->state = KV_ABSENT;
}

/* The group's key counts (K_KVCOUNT): keys and keys with an expiry
 * moved by dk and de, saturating at 0 (keys written before the row was
 * kept are not counted). A write-back record, so the commands of one
 * entry update it in memory; deleted when both reach 0. */
static void kv_count_add(struct tx *tx, int dk, int de)
{
	uint8_t kb[8], body[16];
	struct sbuf k = {kb, 0, sizeof kb}, cur;
	uint64_t keys = 0, exp = 0;
	int found;

	if (dk == 0 && de == 0) {
		return;
	}
	key_start(&k, tx->group, K_KVCOUNT);
	sbuf_init(&cur);
	found = tx_get_rec(tx, &k, &cur);
	if (found > 0 && cur.len == 16) {
		keys = be_get64(cur.p);
		exp = be_get64(cur.p + 8);
	}
	sbuf_free(&cur);
	if (found < 0) {
		return;
	}
	keys = dk < 0 ? (keys > 0 ? keys - 1 : 0) : keys + (uint64_t)dk;
	exp = de < 0 ? (exp > 0 ? exp - 1 : 0) : exp + (uint64_t)de;
	be_put64(body, keys);
	be_put64(body + 8, exp);
	if (keys == 0 && exp == 0) {
		tx_del_rec(tx, &k); /* an empty group keeps no row */
	} else {
		tx_put_rec(tx, &k, body, sizeof body);
	}
}

int kv_count_get(struct tx *tx, uint64_t *keys, uint64_t *expires)
{
	uint8_t kb[8];
	struct sbuf k = {kb, 0, sizeof kb};
	struct val v;
	int found;

	*keys = 0;
	*expires = 0;
	key_start(&k, tx->group, K_KVCOUNT);
	found = tx_get(tx, &k, &v);
	if (found > 0 && v.len == 16) {
		*keys = be_get64((const uint8_t *)v.p);
		*expires = be_get64((const uint8_t *)v.p + 8);
	}
	val_free(&v);
	return found < 0 ? -1 : 0;
}

int kv_clear(struct tx *tx, struct store_slice key, struct kv_obj *o)
{
	static const uint8_t subs[][2] = {
	    [T_HASH] = {K_HASH, 0},
	    [T_LIST] = {K_LIST, 0},
	    [T_SET] = {K_SET, 0},
	    [T_ZSET] = {K_ZMEMBER, K_ZSCORE},
	};
	struct sbuf k;
	uint64_t budget = UINT64_MAX, deleted = 0;

	if (o->state == KV_ABSENT) {
		return 0;
	}
	sbuf_init(&k);
	kv_key(&k, tx->group, key);
	tx_del(tx, &k);
	kv_count_add(tx, -1, o->expires != 0 ? -1 : 0);
	what_key(&k, key);
	expiry_index_del(tx, o->expires, EXP_KV, &k);
	if (o->type < sizeof subs / sizeof subs[0]) {
		for (int i = 0; i < 2 && subs[o->type][i] != 0; i++) {
			kv_sub_prefix(&k, tx->group, subs[o->type][i], key);
			if (tx_del_prefix(tx, &k, &budget, &deleted) < 0) {
				sbuf_free(&k);
				return -1;
			}
		}
	}
	sbuf_free(&k);
	kv_obj_free(o);
	return 0;
}

int kv_load_w(struct tx *tx, struct store_slice key, struct kv_obj *o)
{
	if (kv_load(tx, key, o) != 0) {
		return -1;
	}
	if (o->state == KV_LAPSED) {
		return kv_clear(tx, key, o);
	}
	return 0;
}

void kv_store(struct tx *tx, struct store_slice key, uint8_t type,
              uint64_t expires, const void *body, size_t blen,
              const struct kv_obj *o)
{
	uint8_t kb[128], vb[128];
	struct sbuf k, v;
	uint64_t old = o->state == KV_ABSENT ? 0 : o->expires;

	buf_on(&k, kb, sizeof kb, 5 + key.len);
	buf_on(&v, vb, sizeof vb, 9 + blen);
	kv_key(&k, tx->group, key);
	sbuf_u8(&v, type);
	sbuf_u64(&v, expires);
	sbuf_add(&v, body, blen);
	tx_put(tx, &k, v.p, v.len);
	kv_count_add(tx, o->state == KV_ABSENT ? 1 : 0,
	             (expires != 0) - (old != 0));
	if (old != expires) {
		what_key(&k, key);
		expiry_index_del(tx, old, EXP_KV, &k);
		expiry_index_put(tx, expires, EXP_KV, &k);
	}
	buf_done(&k, kb);
	buf_done(&v, vb);
}

/* The expiry a SET / CAS asks for; false (with an error result) when
 * invalid. */
static bool want_expiry(struct tx *tx, const struct store_cmd *c,
                        struct sbuf *res, uint64_t *expires)
{
	switch (c->kind) {
	case STORE_EXPIRE_NONE:
		*expires = 0;
		return true;
	case STORE_EXPIRE_TTL:
		if (c->ttl_ms == 0) {
			break;
		}
		*expires = deadline_after(tx->now_ms, c->ttl_ms);
		return true;
	case STORE_EXPIRE_AT:
		if (c->ttl_ms == 0) {
			break;
		}
		*expires = c->ttl_ms;
		return true;
	default:
		break;
	}
	res_error(res, STORE_BAD_COMMAND, "ERR invalid expire time");
	return false;
}

/* Replaces whatever the key holds by a string. */
static int put_string(struct tx *tx, struct store_slice key,
                      struct store_slice value, uint64_t expires,
                      struct kv_obj *o)
{
	if (o->state == KV_LIVE && o->type != T_STRING &&
	    kv_clear(tx, key, o) != 0) {
		return -1;
	}
	kv_store(tx, key, T_STRING, expires, value.p, value.len, o);
	return 0;
}

static int kv_set(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	uint64_t expires;
	bool live;
	int rv = 0;

	if ((c->flags & STORE_SET_NX) && (c->flags & STORE_SET_XX)) {
		res_error(res, STORE_BAD_COMMAND, "ERR syntax error");
		return 0;
	}
	if (!want_expiry(tx, c, res, &expires)) {
		return 0;
	}
	if ((c->flags & STORE_SET_KEEPTTL) && c->kind != STORE_EXPIRE_NONE) {
		res_error(res, STORE_BAD_COMMAND, "ERR syntax error");
		return 0;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	live = o.state == KV_LIVE;
	if ((c->flags & STORE_SET_GET) && live && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	res_begin(res, STORE_OK);
	if (c->flags & STORE_SET_GET) {
		if (live) {
			res_bytes(res, o.body.p, o.body.len);
		} else {
			res_nil(res);
		}
	}
	if (((c->flags & STORE_SET_NX) && live) ||
	    ((c->flags & STORE_SET_XX) && !live)) {
		if (!(c->flags & STORE_SET_GET)) {
			res_nil(res);
		}
		goto out;
	}
	if ((c->flags & STORE_SET_KEEPTTL) && live) {
		expires = o.expires;
	}
	if (!(c->flags & STORE_SET_GET)) {
		res_str(res, "OK");
	}
	rv = put_string(tx, c->key, c->value, expires, &o);
out:
	kv_obj_free(&o);
	return rv;
}

/* GET is the hot read: the record key is built on the stack when it fits
 * and the record is read in place from the row cache (tx_get_view), so a
 * cached GET allocates nothing here but its result. Same checks as
 * kv_load. */
static int kv_get(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	uint8_t kb[128];
	struct sbuf k;
	struct store_slice rec;
	struct val hold;
	int found;

	buf_on(&k, kb, sizeof kb, 5 + c->key.len);
	kv_key(&k, tx->group, c->key);
	found = tx_get_view(tx, &k, &rec, &hold);
	buf_done(&k, kb);
	if (found < 0) {
		return -1;
	}
	if (found > 0 &&
	    (rec.len < 9 || rec.p[0] < T_STRING || rec.p[0] > T_RATELIMIT)) {
		val_free(&hold);
		return tx_fail(tx, "corrupt KV record", NULL);
	}
	if (found > 0) {
		uint64_t expires = be_get64(rec.p + 1);
		if (expires != 0 && expires <= tx->now_ms) {
			found = 0; /* lapsed: invisible */
		}
	}
	if (found > 0 && rec.p[0] != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
	} else {
		res_begin(res, STORE_OK);
		if (found > 0) {
			res_bytes(res, rec.p + 9, rec.len - 9);
		} else {
			res_nil(res);
		}
	}
	val_free(&hold);
	return 0;
}

static int kv_del(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key;
	int64_t n = 0;

	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key)) {
		struct kv_obj o;
		if (kv_load(tx, key, &o) != 0) {
			return -1;
		}
		n += o.state == KV_LIVE;
		if (kv_clear(tx, key, &o) != 0) {
			kv_obj_free(&o);
			return -1;
		}
	}
	res_begin(res, STORE_OK);
	res_i64(res, n);
	return 0;
}

static int kv_mget(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key;

	res_begin(res, STORE_OK);
	res_array(res, c->items.n);
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key)) {
		struct kv_obj o;
		if (kv_load(tx, key, &o) != 0) {
			return -1;
		}
		if (o.state == KV_LIVE && o.type == T_STRING) {
			res_bytes(res, o.body.p, o.body.len);
		} else {
			res_nil(res);
		}
		kv_obj_free(&o);
	}
	return 0;
}

static int kv_mset(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key, value;

	if (c->items.n == 0 || c->items.n % 2 != 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR wrong number of arguments for 'mset' command");
		return 0;
	}
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key) && store_list_next(&it, &value)) {
		struct kv_obj o;
		int rv;
		if (kv_load_w(tx, key, &o) != 0) {
			return -1;
		}
		rv = put_string(tx, key, value, 0, &o);
		kv_obj_free(&o);
		if (rv != 0) {
			return -1;
		}
	}
	res_begin(res, STORE_OK);
	res_str(res, "OK");
	return 0;
}

static int kv_cas(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	uint64_t expires;
	int rv = 0;

	if (!want_expiry(tx, c, res, &expires)) {
		return 0;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state != KV_LIVE) {
		res_begin(res, STORE_OK);
		res_nil(res);
	} else if (o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
	} else if (o.body.len != c->arg.len ||
	           (c->arg.len > 0 &&
	            memcmp(o.body.p, c->arg.p, c->arg.len) != 0)) {
		res_begin(res, STORE_OK);
		res_bool(res, false);
	} else {
		if (c->kind == STORE_EXPIRE_NONE) {
			expires = o.expires; /* the old TTL is kept */
		}
		rv = put_string(tx, c->key, c->value, expires, &o);
		res_begin(res, STORE_OK);
		res_bool(res, true);
	}
	kv_obj_free(&o);
	return rv;
}

static bool same(struct store_slice a, struct store_slice b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static int kv_lock(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	int rv = 0;

	if (c->op != STORE_OP_KV_UNLOCK && c->ttl_ms == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR ttl_ms must be a positive integer");
		return 0;
	}
	if (c->arg.len == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR owner must not be empty");
		return 0;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	if (o.state == KV_LIVE && !same(o.body, c->arg)) {
		res_error(res, STORE_ERR,
		          c->op == STORE_OP_KV_LOCK
		              ? "DISTLOCK lock is held by another owner"
		              : "DISTLOCK caller is not the lock owner");
		goto out;
	}
	switch (c->op) {
	case STORE_OP_KV_LOCK:
		rv = put_string(tx, c->key, c->arg,
		                deadline_after(tx->now_ms, c->ttl_ms), &o);
		res_begin(res, STORE_OK);
		res_str(res, "OK");
		break;
	case STORE_OP_KV_UNLOCK:
		rv = kv_clear(tx, c->key, &o);
		res_begin(res, STORE_OK);
		res_i64(res, 1);
		break;
	default:
		if (o.state != KV_LIVE) {
			res_error(
			    res, STORE_ERR,
			    "DISTLOCK lock does not exist or has expired");
			break;
		}
		rv = put_string(tx, c->key, c->arg,
		                deadline_after(tx->now_ms, c->ttl_ms), &o);
		res_begin(res, STORE_OK);
		res_i64(res, 1);
		break;
	}
out:
	kv_obj_free(&o);
	return rv;
}

/* round(prev * (window - elapsed) / window), halves away from zero. */
static uint64_t weighted(uint64_t prev, uint64_t window, uint64_t elapsed)
{
	unsigned __int128 num;

	if (elapsed >= window) {
		return 0;
	}
	num = (unsigned __int128)prev * (window - elapsed);
	/* num / window rounded half up, without overflowing 2 * num. */
	return (uint64_t)(num / window) + (num % window >= (window + 1) / 2);
}

static int64_t clamp_i64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int kv_ratelimit(struct tx *tx, const struct store_cmd *c,
                        struct sbuf *res)
{
	struct kv_obj o;
	uint64_t cur = 0, start = tx->now_ms, prev = 0, now = tx->now_ms;
	uint64_t w = c->window_ms, elapsed, eff, reset;
	uint8_t body[24];
	bool allowed;

	if (c->window_ms == 0 || c->max == 0 || c->count == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR window_ms, max and count must be positive "
		          "integers");
		return 0;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_RATELIMIT) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		kv_obj_free(&o);
		return 0;
	}
	if (o.state == KV_LIVE) {
		if (o.body.len != 24) {
			kv_obj_free(&o);
			return tx_fail(tx, "corrupt rate limit", NULL);
		}
		cur = be_get64(o.body.p);
		start = be_get64(o.body.p + 8);
		prev = be_get64(o.body.p + 16);
	}
	elapsed = now > start ? now - start : 0;
	if (elapsed / 2 >= w) {
		cur = 0;
		prev = 0;
		start = now;
	} else if (elapsed >= w) {
		prev = cur;
		cur = 0;
		start = now;
	}
	elapsed = now > start ? now - start : 0;
	eff = weighted(prev, w, elapsed);
	eff = eff > UINT64_MAX - cur ? UINT64_MAX : eff + cur;
	allowed = !(eff > c->max || c->count > c->max - eff);
	if (allowed) {
		cur += c->count;
		eff += c->count;
	}
	be_put64(body, cur);
	be_put64(body + 8, start);
	be_put64(body + 16, prev);
	kv_store(tx, c->key, T_RATELIMIT,
	         deadline_after(start, w > UINT64_MAX / 2 ? UINT64_MAX : 2 * w),
	         body, sizeof body, &o);
	reset = deadline_after(start, w);
	reset = reset > now ? reset - now : 0;
	res_begin(res, STORE_OK);
	res_array(res, 4);
	res_str(res, allowed ? "allowed" : "denied");
	res_i64(res, clamp_i64(eff));
	res_i64(res, clamp_i64(eff >= c->max ? 0 : c->max - eff));
	res_i64(res, clamp_i64(reset));
	kv_obj_free(&o);
	return 0;
}

/* --- Fetch-or-compute --------------------------------------------------- */

struct lease {
	bool present;
	uint64_t deadline;
	struct store_slice token;
	struct store_slice hint;
	struct val raw;
};

static void lease_key(struct sbuf *k, uint32_t group, struct store_slice key)
{
	key_start(k, group, K_FOC);
	sbuf_add(k, key.p, key.len);
}

static int lease_load(struct tx *tx, struct store_slice key, struct lease *l)
{
	struct sbuf k;
	int found;

	memset(l, 0, sizeof *l);
	sbuf_init(&k);
	lease_key(&k, tx->group, key);
	found = tx_get(tx, &k, &l->raw);
	sbuf_free(&k);
	if (found > 0) {
		struct rd r;
		rd_init(&r, l->raw.p, l->raw.len);
		l->deadline = rd_u64(&r);
		l->token.p = rd_lbytes(&r, &l->token.len);
		l->hint.p = rd_rest(&r, &l->hint.len);
		if (r.bad) {
			val_free(&l->raw);
			return tx_fail(tx, "corrupt fetch-or-compute lease",
			               NULL);
		}
		l->present = true;
	}
	return found < 0 ? -1 : 0;
}

static void lease_drop(struct tx *tx, struct store_slice key,
                       const struct lease *l)
{
	struct sbuf k;

	sbuf_init(&k);
	lease_key(&k, tx->group, key);
	tx_del(tx, &k);
	what_key(&k, key);
	expiry_index_del(tx, l->deadline, EXP_FOC, &k);
	sbuf_free(&k);
}

static int kv_foc(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	struct lease l;
	struct sbuf k, v;
	uint64_t ttl;

	if (c->ttl_ms == 0 || c->arg.len == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR ttl_ms must be positive and the token set");
		return 0;
	}
	if (kv_load(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE) {
		if (o.type != T_STRING) {
			res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		} else {
			res_begin(res, STORE_OK);
			res_array(res, 2);
			res_str(res, "hit");
			res_bytes(res, o.body.p, o.body.len);
		}
		kv_obj_free(&o);
		return 0;
	}
	kv_obj_free(&o);
	if (lease_load(tx, c->key, &l) != 0) {
		return -1;
	}
	if (l.present && l.deadline > tx->now_ms) {
		res_begin(res, STORE_OK);
		res_array(res, 2);
		res_str(res, "wait");
		res_bytes(res, l.token.p, l.token.len);
		val_free(&l.raw);
		return 0;
	}
	if (l.present) {
		lease_drop(tx, c->key, &l);
	}
	val_free(&l.raw);
	ttl = c->ttl_ms < STORE_FOC_LEASE_MAX_MS ? c->ttl_ms
	                                         : STORE_FOC_LEASE_MAX_MS;
	sbuf_init(&k);
	sbuf_init(&v);
	lease_key(&k, tx->group, c->key);
	sbuf_u64(&v, deadline_after(tx->now_ms, ttl));
	sbuf_lbytes(&v, c->arg.p, c->arg.len);
	sbuf_add(&v, c->value.p, c->value.len);
	tx_put(tx, &k, v.p, v.len);
	what_key(&k, c->key);
	expiry_index_put(tx, deadline_after(tx->now_ms, ttl), EXP_FOC, &k);
	sbuf_free(&k);
	sbuf_free(&v);
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_str(res, "compute");
	res_bytes(res, c->value.p, c->value.len);
	res_bytes(res, c->arg.p, c->arg.len);
	return 0;
}

static int kv_foc_finish(struct tx *tx, const struct store_cmd *c,
                         struct sbuf *res)
{
	struct lease l;
	int rv = 0;

	if (c->op == STORE_OP_KV_FOC_RESULT && c->ttl_ms == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR ttl_ms must be a positive integer");
		return 0;
	}
	if (lease_load(tx, c->key, &l) != 0) {
		return -1;
	}
	if (!l.present || l.deadline <= tx->now_ms || !same(l.token, c->arg)) {
		res_error(res, STORE_ERR,
		          "ERR fetch_or_compute lease is not held by this "
		          "token");
		val_free(&l.raw);
		return 0;
	}
	lease_drop(tx, c->key, &l);
	val_free(&l.raw);
	if (c->op == STORE_OP_KV_FOC_RESULT) {
		struct kv_obj o;
		if (kv_load_w(tx, c->key, &o) != 0) {
			return -1;
		}
		rv = put_string(tx, c->key, c->value,
		                deadline_after(tx->now_ms, c->ttl_ms), &o);
		kv_obj_free(&o);
	}
	res_begin(res, STORE_OK);
	res_str(res, "OK");
	return rv;
}

int kv_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	switch (c->op) {
	case STORE_OP_KV_GET:
		return kv_get(tx, c, res);
	case STORE_OP_KV_SET:
		return kv_set(tx, c, res);
	case STORE_OP_KV_DEL:
		return kv_del(tx, c, res);
	case STORE_OP_KV_MGET:
		return kv_mget(tx, c, res);
	case STORE_OP_KV_MSET:
		return kv_mset(tx, c, res);
	case STORE_OP_KV_CAS:
		return kv_cas(tx, c, res);
	case STORE_OP_KV_LOCK:
	case STORE_OP_KV_UNLOCK:
	case STORE_OP_KV_EXTEND:
		return kv_lock(tx, c, res);
	case STORE_OP_KV_RATELIMIT:
		return kv_ratelimit(tx, c, res);
	case STORE_OP_KV_FOC:
		return kv_foc(tx, c, res);
	default:
		return kv_foc_finish(tx, c, res);
	}
}

int kv_expire_key(struct tx *tx, const uint8_t *key, size_t len)
{
	struct store_slice k = {key, len};
	struct kv_obj o;

	if (kv_load(tx, k, &o) != 0) {
		return -1;
	}
	if (o.state != KV_LAPSED) {
		kv_obj_free(&o);
		return 0;
	}
	return kv_clear(tx, k, &o) == 0 ? 1 : -1;
}

int kv_expire_lease(struct tx *tx, const uint8_t *key, size_t len)
{
	struct store_slice k = {key, len};
	struct lease l;
	int rv = 0;

	if (lease_load(tx, k, &l) != 0) {
		return -1;
	}
	if (l.present && l.deadline <= tx->now_ms) {
		lease_drop(tx, k, &l);
		rv = 1;
	}
	val_free(&l.raw);
	return rv;
}

void store_kv_prefetch(struct store *s, uint32_t group, struct store_slice key)
{
	uint8_t kb[128];
	struct sbuf k = {kb, 0, sizeof kb}; /* never grown: checked below */

	if (s == NULL || s->rows == NULL || 5 + key.len > sizeof kb) {
		return;
	}
	kv_key(&k, group, key);
	rowcache_prefetch(s->rows, k.p, k.len);
}

int store_kv_get(struct store *s, uint32_t group, struct store_slice key,
                 uint64_t now_ms, uint8_t **value, size_t *len, bool *found)
{
	struct tx tx;
	struct kv_obj o;
	int rv = 0;

	*value = NULL;
	*len = 0;
	*found = false;
	tx_init(&tx, s, group, 0, now_ms, false);
	if (kv_load(&tx, key, &o) != 0) {
		rv = -1;
	} else if (o.state == KV_LIVE && o.type != T_STRING) {
		rv = STORE_WRONGTYPE;
	} else if (o.state == KV_LIVE) {
		*value = store_xmalloc(o.body.len);
		if (o.body.len > 0) {
			memcpy(*value, o.body.p, o.body.len);
		}
		*len = o.body.len;
		*found = true;
	}
	kv_obj_free(&o);
	tx_fini(&tx);
	return rv;
}

int store_kv_info(struct store *s, uint32_t group, struct store_slice key,
                  uint64_t now_ms, const char **type, int64_t *ttl_ms,
                  bool *found)
{
	static const char *const names[] = {
	    "none", "string", "hash", "list", "set", "zset", "ratelimit"};
	struct tx tx;
	struct kv_obj o;
	int rv = 0;

	*type = "none";
	*ttl_ms = -2;
	*found = false;
	tx_init(&tx, s, group, 0, now_ms, false);
	if (kv_load(&tx, key, &o) != 0) {
		rv = -1;
	} else if (o.state == KV_LIVE) {
		*found = true;
		*type = o.type < sizeof names / sizeof names[0] ? names[o.type]
		                                                : "unknown";
		*ttl_ms = o.expires == 0       ? -1
		          : o.expires > now_ms ? (int64_t)(o.expires - now_ms)
		                               : 0;
	}
	kv_obj_free(&o);
	tx_fini(&tx);
	return rv;
}
