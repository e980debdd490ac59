/* FSNP KV collections: hashes, lists, sets and sorted sets. The key's
 * record holds the element count (and a list's first position); each
 * element is its own RocksDB key under the collection's prefix, so an
 * operation touches only the elements it names. A collection that
 * becomes empty is deleted. Scores are answered as text (shortest form
 * that reads back to the same double), as the FSNP SDK expects. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/kv.h"

/* Lists grow both ways from here. */
#define LIST_ORIGIN (UINT64_C(1) << 63)

struct coll {
	struct kv_obj o;
	bool live;
	uint64_t count;
	uint64_t head; /* lists */
};

static uint8_t coll_type(uint8_t op)
{
	switch (op) {
	case STORE_OP_KV_HSET:
	case STORE_OP_KV_HGET:
	case STORE_OP_KV_HMGET:
	case STORE_OP_KV_HGETALL:
	case STORE_OP_KV_HDEL:
	case STORE_OP_KV_HINCRBY:
	case STORE_OP_KV_HINCRBYFLOAT:
	case STORE_OP_KV_HEXISTS:
	case STORE_OP_KV_HKEYS:
		return T_HASH;
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
	case STORE_OP_KV_LPOP:
	case STORE_OP_KV_RPOP:
	case STORE_OP_KV_POP:
	case STORE_OP_KV_LRANGE:
	case STORE_OP_KV_LINDEX:
	case STORE_OP_KV_LTRIM:
		return T_LIST;
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM:
	case STORE_OP_KV_SMEMBERS:
	case STORE_OP_KV_SISMEMBER:
		return T_SET;
	default:
		return T_ZSET;
	}
}

/* Loads the collection; 1 usable, 0 wrong type (result written), -1. */
static int coll_load(struct tx *tx, const struct store_cmd *c, uint8_t type,
                     bool write, struct coll *cl, struct sbuf *res)
{
	memset(cl, 0, sizeof *cl);
	if ((write ? kv_load_w(tx, c->key, &cl->o)
	           : kv_load(tx, c->key, &cl->o)) != 0) {
		return -1;
	}
	cl->live = cl->o.state == KV_LIVE;
	if (cl->live && cl->o.type != type) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		kv_obj_free(&cl->o);
		return 0;
	}
	if (cl->live) {
		struct rd r;
		rd_init(&r, cl->o.body.p, cl->o.body.len);
		cl->count = rd_u64(&r);
		if (type == T_LIST) {
			cl->head = rd_u64(&r);
		}
		if (!rd_done(&r)) {
			kv_obj_free(&cl->o);
			return tx_fail(tx, "corrupt collection record", NULL);
		}
	} else {
		cl->head = LIST_ORIGIN;
	}
	return 1;
}

/* Writes the count back, or deletes the emptied collection. */
static int coll_store(struct tx *tx, const struct store_cmd *c, uint8_t type,
                      struct coll *cl)
{
	uint8_t body[16];

	if (cl->count == 0) {
		return cl->live ? kv_clear(tx, c->key, &cl->o) : 0;
	}
	be_put64(body, cl->count);
	be_put64(body + 8, cl->head);
	kv_store(tx, c->key, type, cl->live ? cl->o.expires : 0, body,
	         type == T_LIST ? 16 : 8, &cl->o);
	return 0;
}

static void elem_key(struct sbuf *k, uint32_t group, uint8_t type,
                     struct store_slice key, const void *sub, size_t len)
{
	kv_sub_prefix(k, group, type, key);
	sbuf_add(k, sub, len);
}

static int elem_get(struct tx *tx, const struct sbuf *k, struct val *v)
{
	return tx_get(tx, k, v);
}

/* HEXISTS and SISMEMBER: i64 1 when the collection holds element c->arg
 * (its sub key of kind `type`), else 0; -1 on a read failure. */
static int elem_exists(struct tx *tx, const struct store_cmd *c,
                       const struct coll *cl, uint8_t type, struct sbuf *k,
                       struct sbuf *res)
{
	struct val got = {NULL, 0};
	int found = 0;

	if (cl->live) {
		elem_key(k, tx->group, type, c->key, c->arg.p, c->arg.len);
		found = elem_get(tx, k, &got);
		val_free(&got);
	}
	if (found < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, found);
	return 0;
}

/* --- Hashes ------------------------------------------------------------- */

/* HINCRBY (delta) and HINCRBYFLOAT (value: the increment's text, checked
 * by check_items) as Redis: the field's value must be an integer (a
 * float), a missing field counts as 0. */
static int hash_incr(struct tx *tx, const struct store_cmd *c, struct coll *cl,
                     struct sbuf *res)
{
	bool flt = c->op == STORE_OP_KV_HINCRBYFLOAT;
	char text[KV_LD_CHARS];
	struct sbuf k;
	struct val got;
	size_t n = 0;
	int found;

	sbuf_init(&k);
	elem_key(&k, tx->group, K_HASH, c->key, c->arg.p, c->arg.len);
	found = elem_get(tx, &k, &got);
	if (found < 0) {
		sbuf_free(&k);
		return -1;
	}
	if (flt) {
		long double cur = 0, incr = 0;
		(void)kv_parse_ld(c->value.p, c->value.len, &incr);
		if (found &&
		    !kv_parse_ld((const uint8_t *)got.p, got.len, &cur)) {
			res_error(res, STORE_ERR,
			          "ERR hash value is not a float");
			goto out;
		}
		n = kv_format_ld(cur + incr, text);
		if (n == 0) {
			res_error(
			    res, STORE_ERR,
			    "ERR increment would produce NaN or Infinity");
			goto out;
		}
	} else {
		int64_t cur = 0;
		if (found &&
		    !kv_parse_i64((const uint8_t *)got.p, got.len, &cur)) {
			res_error(res, STORE_ERR,
			          "ERR hash value is not an integer");
			goto out;
		}
		if ((c->delta > 0 && cur > INT64_MAX - c->delta) ||
		    (c->delta < 0 && cur < INT64_MIN - c->delta)) {
			res_error(res, STORE_ERR,
			          "ERR increment or decrement would overflow");
			goto out;
		}
		cur += c->delta;
		n = (size_t)snprintf(text, sizeof text, "%" PRId64, cur);
	}
	tx_put(tx, &k, text, n);
	if (!found) {
		cl->count++;
	}
	if (coll_store(tx, c, T_HASH, cl) != 0) {
		val_free(&got);
		sbuf_free(&k);
		return -1;
	}
	res_begin(res, STORE_OK);
	if (flt) {
		res_bytes(res, text, n);
	} else {
		res_i64(res, strtoll(text, NULL, 10));
	}
out:
	val_free(&got);
	sbuf_free(&k);
	return 0;
}

static int hash_op(struct tx *tx, const struct store_cmd *c, struct coll *cl,
                   struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice f, v;
	struct sbuf k;
	struct val got;
	int64_t n = 0;
	int rv = 0, found;

	sbuf_init(&k);
	store_list_iter_init(&it, &c->items);
	switch (c->op) {
	case STORE_OP_KV_HSET:
		while (store_list_next(&it, &f) && store_list_next(&it, &v)) {
			elem_key(&k, tx->group, K_HASH, c->key, f.p, f.len);
			found = elem_get(tx, &k, &got);
			val_free(&got);
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (!found) {
				n++;
				cl->count++;
			}
			tx_put(tx, &k, v.p, v.len);
		}
		rv = coll_store(tx, c, T_HASH, cl);
		res_begin(res, STORE_OK);
		res_i64(res, n);
		break;
	case STORE_OP_KV_HDEL:
		while (cl->live && store_list_next(&it, &f)) {
			elem_key(&k, tx->group, K_HASH, c->key, f.p, f.len);
			found = elem_get(tx, &k, &got);
			val_free(&got);
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (found) {
				tx_del(tx, &k);
				n++;
				cl->count--;
			}
		}
		rv = coll_store(tx, c, T_HASH, cl);
		res_begin(res, STORE_OK);
		res_i64(res, n);
		break;
	case STORE_OP_KV_HINCRBY:
	case STORE_OP_KV_HINCRBYFLOAT:
		rv = hash_incr(tx, c, cl, res);
		break;
	case STORE_OP_KV_HEXISTS:
		rv = elem_exists(tx, c, cl, K_HASH, &k, res);
		break;
	case STORE_OP_KV_HGET:
	case STORE_OP_KV_HMGET: {
		struct store_slice one[1] = {c->arg};
		struct store_list single = {1, one, NULL, 0};
		bool multi = c->op == STORE_OP_KV_HMGET;
		res_begin(res, STORE_OK);
		if (multi) {
			res_array(res, c->items.n);
		} else {
			store_list_iter_init(&it, &single);
		}
		while (store_list_next(&it, &f)) {
			found = 0;
			got.p = NULL;
			if (cl->live) {
				elem_key(&k, tx->group, K_HASH, c->key, f.p,
				         f.len);
				found = elem_get(tx, &k, &got);
			}
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (found) {
				res_bytes(res, got.p, got.len);
			} else {
				res_nil(res);
			}
			val_free(&got);
		}
		break;
	}
	default: { /* HGETALL, HKEYS (kind 0) and HVALS (kind 1) */
		struct titer ti;
		size_t mark, plen;
		uint32_t cnt = 0;
		bool keys = c->op == STORE_OP_KV_HKEYS && c->kind == 0;
		bool vals = c->op == STORE_OP_KV_HKEYS && c->kind == 1;
		kv_sub_prefix(&k, tx->group, K_HASH, c->key);
		plen = k.len;
		res_begin(res, STORE_OK);
		mark = keys || vals ? res_array_open(res) : res_map_open(res);
		if (cl->live) {
			titer_open(&ti, tx, &k);
			for (titer_seek(&ti, NULL); titer_valid(&ti);
			     titer_next(&ti)) {
				size_t kl, vl;
				const uint8_t *kp = titer_key(&ti, &kl);
				const uint8_t *vp = titer_value(&ti, &vl);
				if (keys) {
					res_bytes(res, kp + plen, kl - plen);
				} else if (vals) {
					res_bytes(res, vp, vl);
				} else {
					res_map_key(res, kp + plen, kl - plen);
					res_bytes(res, vp, vl);
				}
				cnt++;
			}
			rv = titer_close(&ti);
		}
		res_array_close(res, mark, cnt);
		break;
	}
	}
out:
	sbuf_free(&k);
	return rv;
}

/* --- Lists ---------------------------------------------------------------- */

static void pos_key(struct sbuf *k, uint32_t group, struct store_slice key,
                    uint64_t pos)
{
	uint8_t p[8];
	be_put64(p, pos);
	elem_key(k, group, K_LIST, key, p, sizeof p);
}

/* Resolves Redis-style [start, stop] over `len` items; false if empty. */
static bool resolve_range(int64_t start, int64_t stop, uint64_t len,
                          uint64_t *from, uint64_t *to)
{
	int64_t l = len > INT64_MAX ? INT64_MAX : (int64_t)len;

	if (start < 0) {
		start = start < -l ? 0 : start + l;
	}
	if (stop < 0) {
		if (stop < -l) {
			return false;
		}
		stop += l;
	}
	if (l == 0 || start > stop || start >= l) {
		return false;
	}
	if (stop >= l) {
		stop = l - 1;
	}
	*from = (uint64_t)start;
	*to = (uint64_t)stop;
	return true;
}

static int list_op(struct tx *tx, const struct store_cmd *c, struct coll *cl,
                   struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice v;
	struct sbuf k;
	int rv = 0;

	sbuf_init(&k);
	switch (c->op) {
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
		store_list_iter_init(&it, &c->items);
		while (store_list_next(&it, &v)) {
			uint64_t pos;
			if (c->op == STORE_OP_KV_LPUSH) {
				pos = --cl->head;
			} else {
				pos = cl->head + cl->count;
			}
			pos_key(&k, tx->group, c->key, pos);
			tx_put(tx, &k, v.p, v.len);
			cl->count++;
		}
		rv = coll_store(tx, c, T_LIST, cl);
		res_begin(res, STORE_OK);
		res_i64(res, (int64_t)cl->count);
		break;
	case STORE_OP_KV_LPOP:
	case STORE_OP_KV_RPOP:
	case STORE_OP_KV_POP: {
		/* KV_POP always answers an array, even of count 0 */
		bool counted = c->count > 0 || c->op == STORE_OP_KV_POP;
		bool head = c->op == STORE_OP_KV_LPOP ||
		            (c->op == STORE_OP_KV_POP && c->kind == 0);
		uint64_t want = counted ? c->count : 1;
		uint64_t n = want < cl->count ? want : cl->count;
		res_begin(res, STORE_OK);
		if (!cl->live) {
			res_nil(res);
			break;
		}
		if (counted) {
			res_array(res, (uint32_t)n);
		}
		if (n == 0) {
			break; /* nothing popped: the list stays as it is */
		}
		for (uint64_t i = 0; i < n; i++) {
			struct val got;
			uint64_t pos =
			    head ? cl->head : cl->head + cl->count - 1;
			int found;
			pos_key(&k, tx->group, c->key, pos);
			found = elem_get(tx, &k, &got);
			if (found <= 0) {
				val_free(&got);
				rv = found < 0
				         ? -1
				         : tx_fail(tx, "list element missing",
				                   NULL);
				goto out;
			}
			res_bytes(res, got.p, got.len);
			val_free(&got);
			tx_del(tx, &k);
			if (head) {
				cl->head++;
			}
			cl->count--;
		}
		rv = coll_store(tx, c, T_LIST, cl);
		break;
	}
	case STORE_OP_KV_LTRIM: {
		uint64_t from = 0, to = 0;
		bool keep = cl->live && resolve_range(c->start, c->stop,
		                                      cl->count, &from, &to);
		res_begin(res, STORE_OK);
		res_str(res, "OK");
		if (!cl->live) {
			break;
		}
		if (!keep) {
			from = cl->count;
			to = cl->count;
		}
		/* one delete per removed element: bounded by the list */
		for (uint64_t i = 0; i < cl->count; i++) {
			if (keep && i >= from && i <= to) {
				i = to;
				continue;
			}
			pos_key(&k, tx->group, c->key, cl->head + i);
			tx_del(tx, &k);
		}
		cl->head += keep ? from : 0;
		cl->count = keep ? to - from + 1 : 0;
		rv = coll_store(tx, c, T_LIST, cl);
		break;
	}
	case STORE_OP_KV_LINDEX: {
		struct val got;
		int64_t i = c->start;
		int found;
		res_begin(res, STORE_OK);
		if (cl->live && i < 0) {
			i += (int64_t)cl->count;
		}
		if (!cl->live || i < 0 || (uint64_t)i >= cl->count) {
			res_nil(res);
			break;
		}
		pos_key(&k, tx->group, c->key, cl->head + (uint64_t)i);
		found = elem_get(tx, &k, &got);
		if (found <= 0) {
			rv = found < 0
			         ? -1
			         : tx_fail(tx, "list element missing", NULL);
		} else {
			res_bytes(res, got.p, got.len);
		}
		val_free(&got);
		break;
	}
	default: { /* LRANGE */
		uint64_t from, to, n = 0;
		size_t mark;
		struct titer ti;
		res_begin(res, STORE_OK);
		mark = res_array_open(res);
		if (cl->live &&
		    resolve_range(c->start, c->stop, cl->count, &from, &to)) {
			kv_sub_prefix(&k, tx->group, K_LIST, c->key);
			titer_open(&ti, tx, &k);
			pos_key(&k, tx->group, c->key, cl->head + from);
			for (titer_seek(&ti, &k);
			     titer_valid(&ti) && n < to - from + 1;
			     titer_next(&ti)) {
				size_t vl;
				const uint8_t *vp = titer_value(&ti, &vl);
				res_bytes(res, vp, vl);
				n++;
			}
			rv = titer_close(&ti);
		}
		res_array_close(res, mark, (uint32_t)n);
		break;
	}
	}
out:
	sbuf_free(&k);
	return rv;
}

/* --- Sets ----------------------------------------------------------------- */

static int set_op(struct tx *tx, const struct store_cmd *c, struct coll *cl,
                  struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice m;
	struct sbuf k;
	struct val got;
	int64_t n = 0;
	int rv = 0, found;

	sbuf_init(&k);
	store_list_iter_init(&it, &c->items);
	switch (c->op) {
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM: {
		bool add = c->op == STORE_OP_KV_SADD;
		while ((add || cl->live) && store_list_next(&it, &m)) {
			elem_key(&k, tx->group, K_SET, c->key, m.p, m.len);
			found = elem_get(tx, &k, &got);
			val_free(&got);
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (add && !found) {
				tx_put(tx, &k, "", 0);
				cl->count++;
				n++;
			} else if (!add && found) {
				tx_del(tx, &k);
				cl->count--;
				n++;
			}
		}
		rv = coll_store(tx, c, T_SET, cl);
		res_begin(res, STORE_OK);
		res_i64(res, n);
		break;
	}
	case STORE_OP_KV_SISMEMBER:
		rv = elem_exists(tx, c, cl, K_SET, &k, res);
		break;
	default: { /* SMEMBERS */
		struct titer ti;
		size_t mark, plen;
		uint32_t cnt = 0;
		kv_sub_prefix(&k, tx->group, K_SET, c->key);
		plen = k.len;
		res_begin(res, STORE_OK);
		mark = res_array_open(res);
		if (cl->live) {
			titer_open(&ti, tx, &k);
			for (titer_seek(&ti, NULL); titer_valid(&ti);
			     titer_next(&ti)) {
				size_t kl;
				const uint8_t *kp = titer_key(&ti, &kl);
				res_bytes(res, kp + plen, kl - plen);
				cnt++;
			}
			rv = titer_close(&ti);
		}
		res_array_close(res, mark, cnt);
		break;
	}
	}
out:
	sbuf_free(&k);
	return rv;
}

/* --- Sorted sets ------------------------------------------------------------
 */

/* The shortest decimal text that reads back to `d`. */
static void score_text(double d, char *buf, size_t len)
{
	if (isinf(d)) {
		snprintf(buf, len, d > 0 ? "inf" : "-inf");
		return;
	}
	if (d == floor(d) && fabs(d) < 1e17) {
		snprintf(buf, len, "%.0f", d == 0 ? 0.0 : d);
		return;
	}
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, len, "%.*g", p, d);
		if (strtod(buf, NULL) == d) {
			return;
		}
	}
}

static void score_key(struct sbuf *k, uint32_t group, struct store_slice key,
                      double score, struct store_slice member)
{
	kv_sub_prefix(k, group, K_ZSCORE, key);
	sbuf_u64(k, key_score_bits(score));
	sbuf_add(k, member.p, member.len);
}

/* 1 found (score set), 0 absent, -1. */
static int zscore_get(struct tx *tx, struct store_slice key,
                      struct store_slice member, double *score)
{
	struct sbuf k;
	struct val v;
	int found;

	sbuf_init(&k);
	elem_key(&k, tx->group, K_ZMEMBER, key, member.p, member.len);
	found = elem_get(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0) {
		uint64_t u;
		if (v.len != 8) {
			val_free(&v);
			return tx_fail(tx, "corrupt sorted set member", NULL);
		}
		u = be_get64((const uint8_t *)v.p);
		memcpy(score, &u, sizeof u);
	}
	val_free(&v);
	return found;
}

static void res_score(struct sbuf *res, double d)
{
	char buf[64];
	score_text(d, buf, sizeof buf);
	res_str(res, buf);
}

static int zset_op(struct tx *tx, const struct store_cmd *c, struct coll *cl,
                   struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice m, sc;
	struct sbuf k;
	int64_t n = 0;
	double old;
	int rv = 0, found;

	sbuf_init(&k);
	store_list_iter_init(&it, &c->items);
	switch (c->op) {
	case STORE_OP_KV_ZADD:
	case STORE_OP_KV_ZADD_OPT: {
		/* Redis's zsetAdd per pair, in order: NX skips existing
		 * members, XX new ones, GT/LT scores that do not grow/shrink;
		 * INCR adds the score to the member's. */
		uint8_t f = c->op == STORE_OP_KV_ZADD_OPT ? c->flags : 0;
		bool processed = false;
		int64_t changed = 0;
		double last = 0;
		while (store_list_next(&it, &sc) && store_list_next(&it, &m)) {
			uint64_t u = be_get64(sc.p);
			double d;
			uint8_t bits[8];
			memcpy(&d, &u, sizeof d);
			/* even on a new key: a member may come twice */
			found = zscore_get(tx, c->key, m, &old);
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (found ? (f & STORE_ZADD_NX) != 0
			          : (f & STORE_ZADD_XX) != 0) {
				continue;
			}
			if (found && (f & STORE_ZADD_INCR)) {
				d += old;
				if (isnan(d)) {
					/* INCR has one pair: nothing is
					 * written yet */
					res_error(
					    res, STORE_ERR,
					    "ERR resulting score is not a "
					    "number (NaN)");
					goto out;
				}
			}
			if (found && (((f & STORE_ZADD_LT) && d >= old) ||
			              ((f & STORE_ZADD_GT) && d <= old))) {
				continue;
			}
			processed = true;
			last = d;
			if (found && old == d) {
				continue;
			}
			if (found) {
				score_key(&k, tx->group, c->key, old, m);
				tx_del(tx, &k);
				changed++;
			} else {
				cl->count++;
				n++;
			}
			memcpy(&u, &d, sizeof u);
			score_key(&k, tx->group, c->key, d, m);
			tx_put(tx, &k, "", 0);
			elem_key(&k, tx->group, K_ZMEMBER, c->key, m.p, m.len);
			be_put64(bits, u);
			tx_put(tx, &k, bits, sizeof bits);
		}
		rv = coll_store(tx, c, T_ZSET, cl);
		res_begin(res, STORE_OK);
		if (!(f & STORE_ZADD_INCR)) {
			res_i64(res, (f & STORE_ZADD_CH) ? n + changed : n);
		} else if (processed) {
			res_score(res, last);
		} else {
			res_nil(res);
		}
		break;
	}
	case STORE_OP_KV_ZREM:
		while (cl->live && store_list_next(&it, &m)) {
			found = zscore_get(tx, c->key, m, &old);
			if (found < 0) {
				rv = -1;
				goto out;
			}
			if (!found) {
				continue;
			}
			score_key(&k, tx->group, c->key, old, m);
			tx_del(tx, &k);
			elem_key(&k, tx->group, K_ZMEMBER, c->key, m.p, m.len);
			tx_del(tx, &k);
			cl->count--;
			n++;
		}
		rv = coll_store(tx, c, T_ZSET, cl);
		res_begin(res, STORE_OK);
		res_i64(res, n);
		break;
	case STORE_OP_KV_ZINCRBY: {
		uint64_t u = be_get64(c->value.p);
		double d, sum;
		uint8_t bits[8];
		memcpy(&d, &u, sizeof d);
		found = zscore_get(tx, c->key, c->arg, &old);
		if (found < 0) {
			rv = -1;
			goto out;
		}
		sum = found ? old + d : d;
		if (isnan(sum)) {
			res_error(res, STORE_ERR,
			          "ERR resulting score is not a number (NaN)");
			goto out;
		}
		if (found) {
			score_key(&k, tx->group, c->key, old, c->arg);
			tx_del(tx, &k);
		} else {
			cl->count++;
		}
		score_key(&k, tx->group, c->key, sum, c->arg);
		tx_put(tx, &k, "", 0);
		elem_key(&k, tx->group, K_ZMEMBER, c->key, c->arg.p,
		         c->arg.len);
		memcpy(&u, &sum, sizeof u);
		be_put64(bits, u);
		tx_put(tx, &k, bits, sizeof bits);
		rv = coll_store(tx, c, T_ZSET, cl);
		res_begin(res, STORE_OK);
		res_score(res, sum);
		break;
	}
	case STORE_OP_KV_ZSCORE:
		found = cl->live ? zscore_get(tx, c->key, c->arg, &old) : 0;
		if (found < 0) {
			rv = -1;
			goto out;
		}
		res_begin(res, STORE_OK);
		if (found) {
			res_score(res, old);
		} else {
			res_nil(res);
		}
		break;
	case STORE_OP_KV_ZRANK: {
		/* the rank is the count of index entries before the member's:
		 * a walk bounded by the set's size */
		struct sbuf want;
		struct titer ti;
		uint64_t rank = 0;
		bool hit = false;
		found = cl->live ? zscore_get(tx, c->key, c->arg, &old) : 0;
		if (found < 0) {
			rv = -1;
			goto out;
		}
		res_begin(res, STORE_OK);
		if (!found) {
			res_nil(res);
			break;
		}
		sbuf_init(&want);
		score_key(&want, tx->group, c->key, old, c->arg);
		kv_sub_prefix(&k, tx->group, K_ZSCORE, c->key);
		titer_open(&ti, tx, &k);
		for (titer_seek(&ti, NULL); titer_valid(&ti);
		     titer_next(&ti), rank++) {
			size_t kl;
			const uint8_t *kp = titer_key(&ti, &kl);
			if (kl == want.len && memcmp(kp, want.p, kl) == 0) {
				hit = true;
				break;
			}
		}
		rv = titer_close(&ti);
		sbuf_free(&want);
		if (rv == 0 && !hit) {
			rv =
			    tx_fail(tx, "sorted set index entry missing", NULL);
		}
		if (rv == 0) {
			res_i64(res, c->kind == 1
			                 ? (int64_t)(cl->count - 1 - rank)
			                 : (int64_t)rank);
		}
		break;
	}
	default: { /* ZRANGE by rank or by score, either direction */
		uint64_t from = 0, to = 0, rank = 0;
		uint32_t cnt = 0;
		size_t mark, plen;
		struct titer ti;
		struct sbuf hits; /* the matched index keys' offsets */
		struct sbuf keys; /* and the keys themselves */
		bool scores = c->flags & STORE_ZRANGE_WITHSCORES;
		bool bys = c->flags & STORE_ZRANGE_BYSCORE;
		bool rev = c->flags & STORE_ZRANGE_REV;
		bool ex = c->op == STORE_OP_KV_ZRANGE_EX;
		bool counting = ex && (c->flags & STORE_ZRANGE_COUNT);
		uint64_t skip = ex ? c->offset : 0;
		uint64_t take = ex ? c->count : UINT64_MAX;
		double lo = 0, hi = 0;
		bool any = cl->live;
		if (bys) {
			uint64_t u = (uint64_t)c->start;
			memcpy(&lo, &u, sizeof lo);
			u = (uint64_t)c->stop;
			memcpy(&hi, &u, sizeof hi);
		} else if (any) {
			any = resolve_range(c->start, c->stop, cl->count, &from,
			                    &to);
			if (any && rev) {
				uint64_t f = cl->count - 1 - to;
				to = cl->count - 1 - from;
				from = f;
			}
		}
		res_begin(res, STORE_OK);
		mark = counting ? 0 : res_array_open(res);
		sbuf_init(&hits);
		sbuf_init(&keys);
		if (any) {
			kv_sub_prefix(&k, tx->group, K_ZSCORE, c->key);
			plen = k.len;
			titer_open(&ti, tx, &k);
			/* a walk bounded by the set's size */
			for (titer_seek(&ti, NULL); titer_valid(&ti);
			     titer_next(&ti), rank++) {
				size_t kl, off = keys.len;
				const uint8_t *kp = titer_key(&ti, &kl);
				if (bys) {
					double d = key_score_from_bits(
					    be_get64(kp + plen));
					if (d > hi ||
					    (d == hi &&
					     (c->flags &
					      STORE_ZRANGE_MAX_EXCL))) {
						break;
					}
					if (d < lo ||
					    (d == lo &&
					     (c->flags &
					      STORE_ZRANGE_MIN_EXCL))) {
						continue;
					}
				} else if (rank > to) {
					break;
				} else if (rank < from) {
					continue;
				}
				sbuf_u64(&keys, kl - plen);
				sbuf_add(&keys, kp + plen, kl - plen);
				sbuf_add(&hits, &off, sizeof off);
			}
			rv = titer_close(&ti);
		}
		if (counting) {
			if (rv == 0) {
				res_i64(res,
				        (int64_t)(hits.len / sizeof(size_t)));
			}
			sbuf_free(&hits);
			sbuf_free(&keys);
			break;
		}
		/* LIMIT offset count: in the answer's order */
		for (size_t i = skip, nh = hits.len / sizeof(size_t);
		     rv == 0 && i < nh && i - skip < take; i++) {
			size_t off, len;
			memcpy(&off,
			       hits.p + (rev ? nh - 1 - i : i) * sizeof off,
			       sizeof off);
			len = (size_t)be_get64(keys.p + off);
			res_bytes(res, keys.p + off + 16, len - 8);
			cnt++;
			if (scores) {
				res_score(res, key_score_from_bits(
				                   be_get64(keys.p + off + 8)));
				cnt++;
			}
		}
		sbuf_free(&hits);
		sbuf_free(&keys);
		res_array_close(res, mark, cnt);
		break;
	}
	}
out:
	sbuf_free(&k);
	return rv;
}

/* KV_ZADD_OPT's flags, refused together as Redis refuses them. */
static bool zadd_flags_ok(const struct store_cmd *c, struct sbuf *res)
{
	uint8_t f = c->flags;
	const char *e = NULL;

	if (f & ~(STORE_ZADD_NX | STORE_ZADD_XX | STORE_ZADD_GT |
	          STORE_ZADD_LT | STORE_ZADD_CH | STORE_ZADD_INCR)) {
		e = "ERR syntax error";
	} else if ((f & STORE_ZADD_NX) && (f & STORE_ZADD_XX)) {
		e = "ERR XX and NX options at the same time are not "
		    "compatible";
	} else if (((f & STORE_ZADD_NX) &&
	            (f & (STORE_ZADD_GT | STORE_ZADD_LT))) ||
	           ((f & STORE_ZADD_GT) && (f & STORE_ZADD_LT))) {
		e = "ERR GT, LT, and/or NX options at the same time are not "
		    "compatible";
	} else if ((f & STORE_ZADD_INCR) && c->items.n > 2) {
		e = "ERR INCR option supports a single increment-element "
		    "pair";
	}
	if (e != NULL) {
		res_error(res, STORE_BAD_COMMAND, e);
		return false;
	}
	return true;
}

/* Validates element lists before anything is written. */
static bool check_items(const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice s, m;

	switch (c->op) {
	case STORE_OP_KV_HSET:
	case STORE_OP_KV_ZADD:
	case STORE_OP_KV_ZADD_OPT:
		if (c->op == STORE_OP_KV_ZADD_OPT && !zadd_flags_ok(c, res)) {
			return false;
		}
		if (c->items.n == 0 || c->items.n % 2 != 0) {
			res_error(res, STORE_BAD_COMMAND,
			          "ERR wrong number of arguments");
			return false;
		}
		if (c->op == STORE_OP_KV_HSET) {
			return true;
		}
		store_list_iter_init(&it, &c->items);
		while (store_list_next(&it, &s) && store_list_next(&it, &m)) {
			uint64_t u;
			double d;
			if (s.len != 8) {
				res_error(res, STORE_BAD_COMMAND,
				          "ERR value is not a valid float");
				return false;
			}
			u = be_get64(s.p);
			memcpy(&d, &u, sizeof d);
			if (isnan(d)) {
				res_error(res, STORE_BAD_COMMAND,
				          "ERR value is not a valid float");
				return false;
			}
		}
		return true;
	case STORE_OP_KV_ZINCRBY: {
		uint64_t u;
		double d;
		if (c->value.len != 8) {
			res_error(res, STORE_BAD_COMMAND,
			          "ERR value is not a valid float");
			return false;
		}
		u = be_get64(c->value.p);
		memcpy(&d, &u, sizeof d);
		if (isnan(d)) {
			res_error(res, STORE_BAD_COMMAND,
			          "ERR value is not a valid float");
			return false;
		}
		return true;
	}
	case STORE_OP_KV_HINCRBYFLOAT: {
		long double incr;
		if (!kv_parse_ld(c->value.p, c->value.len, &incr)) {
			res_error(res, STORE_ERR,
			          "ERR value is not a valid float");
			return false;
		}
		if (isinf(incr)) {
			res_error(res, STORE_ERR,
			          "ERR value is NaN or Infinity");
			return false;
		}
		return true;
	}
	case STORE_OP_KV_HDEL:
	case STORE_OP_KV_HMGET:
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM:
	case STORE_OP_KV_ZREM:
		if (c->items.n == 0) {
			res_error(res, STORE_BAD_COMMAND,
			          "ERR wrong number of arguments");
			return false;
		}
		return true;
	default:
		return true;
	}
}

int kvcoll_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	uint8_t type = coll_type(c->op);
	struct coll cl;
	int rv;

	if (!check_items(c, res)) {
		return 0;
	}
	rv = coll_load(tx, c, type, !store_op_is_read(c->op), &cl, res);
	if (rv <= 0) {
		return rv;
	}
	switch (type) {
	case T_HASH:
		rv = hash_op(tx, c, &cl, res);
		break;
	case T_LIST:
		rv = list_op(tx, c, &cl, res);
		break;
	case T_SET:
		rv = set_op(tx, c, &cl, res);
		break;
	default:
		rv = zset_op(tx, c, &cl, res);
		break;
	}
	kv_obj_free(&cl.o);
	return rv;
}
