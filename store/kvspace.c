/* KV commands over a key as a whole or a group's whole keyspace: EXPIRE
 * with Redis 7's NX/XX/GT/LT and the absolute forms, RENAME / RENAMENX of
 * any type, the group's key counts (DBSIZE, INFO keyspace) and the SCAN /
 * KEYS walk of the group's key range (cursor and globs: store/kvscan.h).
 * Time is the entry's (the leader's clock on reads), so apply stays
 * deterministic. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "store/kv.h"
#include "store/kvscan.h"

static int kv_expire_opt(struct tx *tx, const struct store_cmd *c,
                         struct sbuf *res)
{
	uint8_t f = c->flags;
	struct kv_obj o;
	int64_t when, now = (int64_t)tx->now_ms, cur;
	int64_t n = 0;
	int rv = 0;

	if (c->kind == STORE_EXPIRE_TTL) {
		if (c->delta > INT64_MAX - now) {
			char msg[128];
			snprintf(msg, sizeof msg,
			         "ERR invalid expire time in '%.*s' command",
			         (int)(c->arg.len < 32 ? c->arg.len : 32),
			         (const char *)c->arg.p);
			res_error(res, STORE_ERR, msg);
			return 0;
		}
		when = now + c->delta;
	} else {
		when = c->delta;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state != KV_LIVE) {
		goto done;
	}
	/* Redis 7: no expiry counts as an infinite one for GT and LT. */
	cur = o.expires == 0 ? -1 : (int64_t)o.expires;
	if (((f & STORE_EXPIRE_F_NX) && cur != -1) ||
	    ((f & STORE_EXPIRE_F_XX) && cur == -1) ||
	    ((f & STORE_EXPIRE_F_GT) && (cur == -1 || when <= cur)) ||
	    ((f & STORE_EXPIRE_F_LT) && cur != -1 && when >= cur)) {
		goto done;
	}
	n = 1;
	if (when <= now) {
		/* A deadline already past deletes the key, as Redis. */
		rv = kv_clear(tx, c->key, &o);
		goto done;
	}
	kv_store(tx, c->key, o.type, (uint64_t)when, o.body.p, o.body.len, &o);
done:
	kv_obj_free(&o);
	if (rv == 0) {
		res_begin(res, STORE_OK);
		res_i64(res, n);
	}
	return rv;
}

/* Copies the elements under one sub prefix of `from` to `to`: collected
 * first, since writing under the iterator would disturb it. */
static int copy_sub(struct tx *tx, uint8_t type, struct store_slice from,
                    struct store_slice to)
{
	struct sbuf k, pairs;
	struct titer ti;
	size_t plen;
	struct rd r;
	int rv;

	sbuf_init(&k);
	sbuf_init(&pairs);
	kv_sub_prefix(&k, tx->group, type, from);
	plen = k.len;
	titer_open(&ti, tx, &k);
	for (titer_seek(&ti, NULL); titer_valid(&ti); titer_next(&ti)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&ti, &kl);
		const uint8_t *vp = titer_value(&ti, &vl);
		sbuf_lbytes(&pairs, kp + plen, kl - plen);
		sbuf_lbytes(&pairs, vp, vl);
	}
	rv = titer_close(&ti);
	rd_init(&r, pairs.p, pairs.len);
	while (rv == 0 && rd_left(&r) > 0) {
		size_t sl, vl;
		const uint8_t *sp = rd_lbytes(&r, &sl);
		const uint8_t *vp = rd_lbytes(&r, &vl);
		kv_sub_prefix(&k, tx->group, type, to);
		sbuf_add(&k, sp, sl);
		tx_put(tx, &k, vp, vl);
	}
	sbuf_free(&k);
	sbuf_free(&pairs);
	return rv;
}

/* RENAME / RENAMENX (kind 1) as Redis 7: the source must exist; the same
 * name changes nothing; the destination is replaced (RENAME) or kept
 * (RENAMENX answers 0); the expiry moves with the value. */
static int kv_rename(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	static const uint8_t subs[][2] = {
	    [T_HASH] = {K_HASH, 0},
	    [T_LIST] = {K_LIST, 0},
	    [T_SET] = {K_SET, 0},
	    [T_ZSET] = {K_ZMEMBER, K_ZSCORE},
	};
	bool nx = c->kind == 1;
	struct kv_obj so, dobj;
	int rv = 0;

	memset(&dobj, 0, sizeof dobj);
	if (kv_load_w(tx, c->key, &so) != 0) {
		return -1;
	}
	if (so.state != KV_LIVE) {
		res_error(res, STORE_ERR, "ERR no such key");
		goto out;
	}
	if (c->key.len == c->arg.len &&
	    (c->key.len == 0 || memcmp(c->key.p, c->arg.p, c->key.len) == 0)) {
		res_begin(res, STORE_OK);
		if (nx) {
			res_i64(res, 0);
		} else {
			res_str(res, "OK");
		}
		goto out;
	}
	if (kv_load_w(tx, c->arg, &dobj) != 0) {
		rv = -1;
		goto out;
	}
	if (dobj.state == KV_LIVE && nx) {
		res_begin(res, STORE_OK);
		res_i64(res, 0);
		goto out;
	}
	if (kv_clear(tx, c->arg, &dobj) != 0) {
		rv = -1;
		goto out;
	}
	if (so.type < sizeof subs / sizeof subs[0]) {
		for (int i = 0; i < 2 && subs[so.type][i] != 0; i++) {
			if (copy_sub(tx, subs[so.type][i], c->key, c->arg) !=
			    0) {
				rv = -1;
				goto out;
			}
		}
	}
	kv_store(tx, c->arg, so.type, so.expires, so.body.p, so.body.len,
	         &dobj);
	if (kv_clear(tx, c->key, &so) != 0) {
		rv = -1;
		goto out;
	}
	res_begin(res, STORE_OK);
	if (nx) {
		res_i64(res, 1);
	} else {
		res_str(res, "OK");
	}
out:
	kv_obj_free(&so);
	kv_obj_free(&dobj);
	return rv;
}

static int kv_keycount(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	uint64_t keys, exp;
	if (kv_count_get(tx, &keys, &exp) != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	if (c->kind == 1) {
		res_array(res, 2);
		res_u64(res, keys);
		res_u64(res, exp);
	} else {
		res_i64(res, keys > INT64_MAX ? INT64_MAX : (int64_t)keys);
	}
	return 0;
}

static int cmp_seek(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int d = n > 0 ? memcmp(a, b, n) : 0; /* an empty seek may be NULL */
	if (d != 0) {
		return d;
	}
	return al < bl ? -1 : al > bl;
}

/* Whether a record's type is the TYPE name `kind` asks for (1 string, 2
 * hash, 3 list, 4 set, 5 zset; a rate limit reads as a string). */
static bool type_is(uint8_t type, uint8_t kind)
{
	return kind == 0 || type == kind ||
	       (kind == T_STRING && type == T_RATELIMIT);
}

/* SCAN: from the seek point, `count` keys examined, then on until a key
 * whose own seek point is past this page's (so the next page starts
 * after this one's); KEYS (STORE_SCAN_ALL): the whole range. Keys past
 * their expiry are skipped. The data writer is drained first: KV rows
 * are written back late (docs/storage.md), and this walks RocksDB.
 *
 * With STORE_SCAN_EXACT the page starts at a kept key and stops after
 * `count` keys at the first key short enough to be kept in turn (or
 * whose seek point is past the start's); with STORE_SCAN_RESUME the
 * answer also names the key the next page starts at when a reference
 * cursor may carry it: after an exact start any such key, after a seek
 * point only one whose reference seek point is past it, so that a walk
 * whose kept keys are all lost still moves on (store/kvscan.h). */
static int kv_scan(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	bool all = c->flags & STORE_SCAN_ALL;
	bool resume = !all && (c->flags & STORE_SCAN_RESUME);
	bool exact = resume && (c->flags & STORE_SCAN_EXACT);
	bool match = (c->flags & STORE_SCAN_MATCH) &&
	             !(c->value.len == 1 && c->value.p[0] == '*');
	uint64_t examined = 0, cursor = 0;
	/* a page examines at least one key (progress) */
	uint64_t count = c->count > 0 ? c->count : 1;
	struct sbuf prefix, seek, keys, next;
	uint8_t floor[KVSCAN_SEEK_MAX];
	const uint8_t *fp = c->arg.p;
	size_t fl = c->arg.len;
	struct titer ti;
	uint32_t n = 0;
	bool stopped = false, have_next = false;
	int rv;

	if (store_drain(tx->s) != 0) {
		return tx_fail(tx, "SCAN could not drain the data writer",
		               NULL);
	}
	if (exact) {
		/* the seek point the start key's plain cursor has */
		fl = kvscan_seek_of(c->shards, c->arg.p, c->arg.len, floor);
		fp = floor;
	}
	sbuf_init(&prefix);
	sbuf_init(&seek);
	sbuf_init(&keys);
	sbuf_init(&next);
	key_start(&prefix, tx->group, K_KV);
	sbuf_add(&seek, prefix.p, prefix.len);
	if (!all) {
		sbuf_add(&seek, c->arg.p, c->arg.len);
	}
	titer_open_bounded(&ti, tx, &prefix);
	for (titer_seek(&ti, &seek); titer_valid(&ti); titer_next(&ti)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&ti, &kl);
		const uint8_t *vp = titer_value(&ti, &vl);
		uint64_t exp;
		kp += prefix.len;
		kl -= prefix.len;
		if (!all && examined >= count) {
			uint8_t s2[KVSCAN_SEEK_MAX];
			size_t sl = kvscan_seek_of(c->shards, kp, kl, s2);
			bool keep = kl <= KVSCAN_RESUME_MAX;
			if ((exact && keep) || cmp_seek(s2, sl, fp, fl) > 0) {
				cursor = kvscan_cursor_at(tx->group, c->shards,
				                          kp, kl);
				if (resume && keep &&
				    (exact || kvscan_ref_advances(
				                  c->shards, kp, kl, c->arg.p,
				                  c->arg.len))) {
					sbuf_add(&next, kp, kl);
					have_next = true;
				}
				stopped = true;
				break;
			}
		}
		examined++;
		if (vl < 9) {
			continue;
		}
		exp = be_get64(vp + 1);
		if ((exp != 0 && exp <= tx->now_ms) ||
		    !type_is(vp[0], c->kind) ||
		    (match &&
		     !kvscan_glob_match(c->value.p, c->value.len, kp, kl))) {
			continue;
		}
		sbuf_lbytes(&keys, kp, kl);
		n++;
	}
	rv = titer_close(&ti);
	if (rv == 0) {
		struct rd r;
		res_begin(res, STORE_OK);
		if (!all) {
			char text[24];
			if (!stopped) {
				cursor =
				    kvscan_cursor_after(tx->group, c->shards);
			}
			snprintf(text, sizeof text, "%" PRIu64, cursor);
			res_array(res, resume ? 3 : 2);
			res_str(res, text);
		}
		res_array(res, n);
		rd_init(&r, keys.p, keys.len);
		while (rd_left(&r) > 0) {
			size_t l;
			const uint8_t *p = rd_lbytes(&r, &l);
			res_bytes(res, p, l);
		}
		if (resume) {
			if (have_next) {
				res_bytes(res, next.p, next.len);
			} else {
				res_nil(res);
			}
		}
	}
	sbuf_free(&prefix);
	sbuf_free(&seek);
	sbuf_free(&keys);
	sbuf_free(&next);
	return rv;
}

int kvspace_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	switch (c->op) {
	case STORE_OP_KV_EXPIRE_OPT:
		return kv_expire_opt(tx, c, res);
	case STORE_OP_KV_RENAME:
		return kv_rename(tx, c, res);
	case STORE_OP_KV_KEYCOUNT:
		return kv_keycount(tx, c, res);
	default:
		return kv_scan(tx, c, res);
	}
}
