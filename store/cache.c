/* Caches, per cache shard: a change log with offsets (put with absolute
 * expiry, delete), a key -> latest offset index, and compaction to the
 * newest record per key that keeps offsets.
 *
 * Invariant: below `compacted_below` the log holds exactly the newest
 * record of each live key (a newer write deletes the older record there
 * at once); from `compacted_below` to the tail it holds every change, so
 * a watch can replay [from, tail) when from >= compacted_below and must
 * resnapshot (current values) otherwise. TTL expiry is not a change: a
 * lapsed key just stops being visible, and compaction or the EXPIRE
 * command drops it without a log record. Counters live beside the cache
 * (counter.c) under the same shard id. */
#include <string.h>

#include "store/internal.h"

#define LOG_READ_DEFAULT 1000
#define SCAN_DEFAULT 1000
#define COMPACT_DEFAULT 10000
#define DROP_DEFAULT 10000

enum {
	LOG_PUT = 1,
	LOG_DEL = 2,
};

struct cache_meta {
	uint64_t tail;
	uint64_t compacted_below;
	uint64_t records;
	uint64_t live;
};

struct idx {
	uint64_t offset;
	uint64_t expires; /* 0 = never */
};

static bool expired(uint64_t expires, uint64_t now)
{
	return expires != 0 && expires <= now;
}

static void shard_key(struct sbuf *k, uint32_t group, uint8_t type,
                      struct store_slice scope, uint32_t shard)
{
	key_start(k, group, type);
	key_shard(k, scope, shard);
}

static void log_key(struct sbuf *k, uint32_t group, struct store_slice scope,
                    uint32_t shard, uint64_t offset)
{
	shard_key(k, group, K_CLOG, scope, shard);
	sbuf_u64(k, offset);
}

static void idx_key(struct sbuf *k, uint32_t group, struct store_slice scope,
                    uint32_t shard, struct store_slice key)
{
	shard_key(k, group, K_CIDX, scope, shard);
	sbuf_add(k, key.p, key.len);
}

/* The expiry index names a cache entry by shard id + key. */
static void exp_what(struct sbuf *w, struct store_slice scope, uint32_t shard,
                     struct store_slice key)
{
	sbuf_reset(w);
	key_shard(w, scope, shard);
	sbuf_add(w, key.p, key.len);
}

static int meta_load(struct tx *tx, struct store_slice scope, uint32_t shard,
                     struct cache_meta *m)
{
	struct sbuf k, v;
	int found;

	memset(m, 0, sizeof *m);
	sbuf_init(&k);
	sbuf_init(&v);
	shard_key(&k, tx->group, K_CACHE, scope, shard);
	found = tx_get_rec(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0) {
		struct rd r;
		rd_init(&r, v.p, v.len);
		m->tail = rd_u64(&r);
		m->compacted_below = rd_u64(&r);
		m->records = rd_u64(&r);
		m->live = rd_u64(&r);
		if (!rd_done(&r)) {
			found = tx_fail(tx, "corrupt cache meta", NULL);
		}
	}
	sbuf_free(&v);
	return found < 0 ? -1 : 0;
}

static void meta_store(struct tx *tx, struct store_slice scope, uint32_t shard,
                       const struct cache_meta *m)
{
	struct sbuf k;
	uint8_t v[32];

	sbuf_init(&k);
	shard_key(&k, tx->group, K_CACHE, scope, shard);
	be_put64(v, m->tail);
	be_put64(v + 8, m->compacted_below);
	be_put64(v + 16, m->records);
	be_put64(v + 24, m->live);
	tx_put_rec(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

/* 1 found, 0 absent, -1 failure. */
static int idx_load(struct tx *tx, struct store_slice scope, uint32_t shard,
                    struct store_slice key, struct idx *ix)
{
	struct sbuf k;
	struct val v;
	int found;

	memset(ix, 0, sizeof *ix);
	sbuf_init(&k);
	idx_key(&k, tx->group, scope, shard, key);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0) {
		if (v.len != 16) {
			found = tx_fail(tx, "corrupt cache index", NULL);
		} else {
			ix->offset = be_get64((const uint8_t *)v.p);
			ix->expires = be_get64((const uint8_t *)v.p + 8);
		}
	}
	val_free(&v);
	return found;
}

struct log_rec {
	uint8_t op;
	uint64_t expires;
	struct store_slice key;
	struct store_slice value;
};

static int parse_log(struct tx *tx, const void *p, size_t len,
                     struct log_rec *r)
{
	struct rd d;

	rd_init(&d, p, len);
	r->op = rd_u8(&d);
	r->expires = rd_u64(&d);
	r->key.p = rd_lbytes(&d, &r->key.len);
	r->value.p = rd_rest(&d, &r->value.len);
	if (d.bad || (r->op != LOG_PUT && r->op != LOG_DEL)) {
		return tx_fail(tx, "corrupt cache log record", NULL);
	}
	return 0;
}

/* Reads the log record at `offset` (must exist). `v` holds the bytes the
 * record points into. */
static int log_load(struct tx *tx, struct store_slice scope, uint32_t shard,
                    uint64_t offset, struct val *v, struct log_rec *r)
{
	struct sbuf k;
	int found;

	sbuf_init(&k);
	log_key(&k, tx->group, scope, shard, offset);
	found = tx_get(tx, &k, v);
	sbuf_free(&k);
	if (found == 0) {
		return tx_fail(tx, "cache log record missing", NULL);
	}
	if (found < 0) {
		return -1;
	}
	return parse_log(tx, v->p, v->len, r);
}

static void log_del(struct tx *tx, struct store_slice scope, uint32_t shard,
                    uint64_t offset)
{
	struct sbuf k;

	sbuf_init(&k);
	log_key(&k, tx->group, scope, shard, offset);
	tx_del(tx, &k);
	sbuf_free(&k);
}

static uint64_t log_append(struct tx *tx, const struct store_cmd *c,
                           struct cache_meta *m, uint8_t op, uint64_t expires)
{
	struct sbuf k, v;
	uint64_t o = m->tail++;

	sbuf_init(&k);
	sbuf_init(&v);
	log_key(&k, tx->group, c->scope, c->shard, o);
	sbuf_u8(&v, op);
	sbuf_u64(&v, expires);
	sbuf_lbytes(&v, c->key.p, c->key.len);
	if (op == LOG_PUT) {
		sbuf_add(&v, c->value.p, c->value.len);
	}
	tx_put(tx, &k, v.p, v.len);
	m->records++;
	sbuf_free(&k);
	sbuf_free(&v);
	return o;
}

/* Removes the key's index entry (and its expiry entry); below the
 * compaction point its log record goes too. */
static void idx_remove(struct tx *tx, struct store_slice scope, uint32_t shard,
                       struct store_slice key, const struct idx *ix,
                       struct cache_meta *m)
{
	struct sbuf k;

	sbuf_init(&k);
	idx_key(&k, tx->group, scope, shard, key);
	tx_del(tx, &k);
	if (ix->expires != 0) {
		exp_what(&k, scope, shard, key);
		expiry_index_del(tx, ix->expires, EXP_CACHE, &k);
	}
	if (ix->offset < m->compacted_below) {
		log_del(tx, scope, shard, ix->offset);
		m->records--;
	}
	m->live--;
	sbuf_free(&k);
}

static int cache_put(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct cache_meta m;
	struct idx ix;
	struct sbuf k;
	uint8_t v[16];
	uint64_t expires =
	    c->ttl_ms ? deadline_after(tx->now_ms, c->ttl_ms) : 0;
	uint64_t o;
	int found;

	if (meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	found = idx_load(tx, c->scope, c->shard, c->key, &ix);
	if (found < 0) {
		return -1;
	}
	if (found) {
		idx_remove(tx, c->scope, c->shard, c->key, &ix, &m);
	}
	o = log_append(tx, c, &m, LOG_PUT, expires);
	sbuf_init(&k);
	idx_key(&k, tx->group, c->scope, c->shard, c->key);
	be_put64(v, o);
	be_put64(v + 8, expires);
	tx_put(tx, &k, v, sizeof v);
	if (expires != 0) {
		exp_what(&k, c->scope, c->shard, c->key);
		expiry_index_put(tx, expires, EXP_CACHE, &k);
	}
	sbuf_free(&k);
	m.live++;
	meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_u64(res, o);
	res_u64(res, expires);
	return 0;
}

static int cache_delete(struct tx *tx, const struct store_cmd *c,
                        struct sbuf *res)
{
	struct cache_meta m;
	struct idx ix;
	struct val v = {NULL, 0};
	struct log_rec r;
	int found;

	if (meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	found = idx_load(tx, c->scope, c->shard, c->key, &ix);
	if (found < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_array(res, 2);
	if (!found || expired(ix.expires, tx->now_ms)) {
		if (found) {
			/* Lapsed: reclaimed quietly, no change recorded. */
			idx_remove(tx, c->scope, c->shard, c->key, &ix, &m);
			meta_store(tx, c->scope, c->shard, &m);
		}
		res_nil(res);
		res_nil(res);
		return 0;
	}
	if (log_load(tx, c->scope, c->shard, ix.offset, &v, &r) != 0) {
		val_free(&v);
		return -1;
	}
	res_bytes(res, r.value.p, r.value.len);
	val_free(&v);
	idx_remove(tx, c->scope, c->shard, c->key, &ix, &m);
	res_u64(res, log_append(tx, c, &m, LOG_DEL, 0));
	meta_store(tx, c->scope, c->shard, &m);
	return 0;
}

/* The current value of a key at `now`: 1 found (r points into v), 0 not. */
static int cache_lookup(struct tx *tx, struct store_slice scope, uint32_t shard,
                        struct store_slice key, uint64_t now, struct idx *ix,
                        struct val *v, struct log_rec *r)
{
	int found = idx_load(tx, scope, shard, key, ix);

	v->p = NULL;
	v->len = 0;
	if (found <= 0) {
		return found;
	}
	if (expired(ix->expires, now)) {
		return 0;
	}
	if (log_load(tx, scope, shard, ix->offset, v, r) != 0) {
		return -1;
	}
	return 1;
}

static int cache_get(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct idx ix;
	struct val v;
	struct log_rec r;
	int found = cache_lookup(tx, c->scope, c->shard, c->key, tx->now_ms,
	                         &ix, &v, &r);

	if (found < 0) {
		val_free(&v);
		return -1;
	}
	res_begin(res, STORE_OK);
	if (found) {
		res_array(res, 3);
		res_bytes(res, r.value.p, r.value.len);
		res_u64(res, ix.expires);
		res_u64(res, ix.offset);
	} else {
		res_nil(res);
	}
	val_free(&v);
	return 0;
}

static int cache_compact(struct tx *tx, const struct store_cmd *c,
                         struct sbuf *res)
{
	struct cache_meta m;
	struct titer it;
	struct sbuf k, dels, lapsed;
	uint64_t budget = c->max ? c->max : COMPACT_DEFAULT;
	uint64_t upto, next, removed = 0;
	struct rd d;
	int rv = 0;

	if (meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	upto = c->offset == 0 || c->offset > m.tail ? m.tail : c->offset;
	next = m.compacted_below;
	sbuf_init(&k);
	sbuf_init(&dels);
	sbuf_init(&lapsed);
	shard_key(&k, tx->group, K_CLOG, c->scope, c->shard);
	titer_open(&it, tx, &k);
	log_key(&k, tx->group, c->scope, c->shard, next);
	for (titer_seek(&it, &k); titer_valid(&it) && next < upto;
	     titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		struct log_rec r;
		struct idx ix;
		uint64_t off;
		int found;

		off = be_get64(kp + kl - 8);
		if (off >= upto) {
			break;
		}
		if (budget == 0) {
			break;
		}
		budget--;
		if (parse_log(tx, vp, vl, &r) != 0) {
			rv = -1;
			break;
		}
		found = idx_load(tx, c->scope, c->shard, r.key, &ix);
		if (found < 0) {
			rv = -1;
			break;
		}
		next = off + 1;
		if (found && ix.offset == off) {
			if (!expired(ix.expires, tx->now_ms)) {
				continue; /* the newest value of its key */
			}
			sbuf_lbytes(&lapsed, r.key.p, r.key.len);
			sbuf_u64(&lapsed, ix.expires);
		}
		sbuf_u64(&dels, off);
	}
	if (titer_close(&it) != 0 || rv != 0) {
		rv = -1;
		goto out;
	}
	if (budget > 0 && next < upto) {
		next = upto; /* nothing left in between */
	}
	/* Apply what the scan decided, now that no iterator is open. */
	rd_init(&d, dels.p, dels.len);
	while (rd_left(&d) > 0) {
		log_del(tx, c->scope, c->shard, rd_u64(&d));
		m.records--;
		removed++;
	}
	rd_init(&d, lapsed.p, lapsed.len);
	while (rd_left(&d) > 0) {
		struct store_slice key;
		uint64_t exp;
		key.p = rd_lbytes(&d, &key.len);
		exp = rd_u64(&d);
		idx_key(&k, tx->group, c->scope, c->shard, key);
		tx_del(tx, &k);
		exp_what(&k, c->scope, c->shard, key);
		expiry_index_del(tx, exp, EXP_CACHE, &k);
		m.live--;
	}
	m.compacted_below = next;
	meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_u64(res, m.compacted_below);
	res_u64(res, removed);
	res_bool(res, m.compacted_below < upto);
out:
	sbuf_free(&k);
	sbuf_free(&dels);
	sbuf_free(&lapsed);
	return rv;
}

/* Replays [from, ...): 0, STORE_RESNAPSHOT, STORE_IN_FUTURE, a callback
 * value, or -1. */
static int log_scan(struct tx *tx, struct store_slice scope, uint32_t shard,
                    uint64_t from, uint64_t max, store_change_cb cb, void *arg,
                    struct cache_meta *m)
{
	struct titer it;
	struct sbuf k;
	uint64_t n = 0;
	int rv = 0;

	if (meta_load(tx, scope, shard, m) != 0) {
		return -1;
	}
	if (from < m->compacted_below) {
		return STORE_RESNAPSHOT;
	}
	if (from > m->tail) {
		return STORE_IN_FUTURE;
	}
	sbuf_init(&k);
	shard_key(&k, tx->group, K_CLOG, scope, shard);
	titer_open(&it, tx, &k);
	log_key(&k, tx->group, scope, shard, from);
	for (titer_seek(&it, &k); titer_valid(&it) && (max == 0 || n < max);
	     titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		struct log_rec r;

		if (parse_log(tx, vp, vl, &r) != 0) {
			rv = -1;
			break;
		}
		rv = cb(arg, be_get64(kp + kl - 8), r.key.p, r.key.len,
		        r.op == LOG_PUT ? r.value.p : NULL,
		        r.op == LOG_PUT ? r.value.len : 0, r.expires);
		if (rv != 0) {
			break;
		}
		n++;
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	return rv;
}

struct change_ctx {
	struct sbuf *res;
	uint32_t n;
	uint64_t next;
	struct sbuf last; /* key of the last scan entry */
};

static int scan_cb(void *arg, uint64_t offset, const uint8_t *key, size_t klen,
                   const uint8_t *value, size_t vlen, uint64_t expires)
{
	struct change_ctx *x = arg;

	res_array(x->res, 4);
	res_bytes(x->res, key, klen);
	res_bytes(x->res, value, vlen);
	res_u64(x->res, offset);
	res_u64(x->res, expires);
	x->n++;
	sbuf_reset(&x->last);
	sbuf_add(&x->last, key, klen);
	return 0;
}

static int log_cb(void *arg, uint64_t offset, const uint8_t *key, size_t klen,
                  const uint8_t *value, size_t vlen, uint64_t expires)
{
	struct change_ctx *x = arg;

	res_array(x->res, 4);
	res_u64(x->res, offset);
	res_bytes(x->res, key, klen);
	if (value != NULL) {
		res_bytes(x->res, value, vlen);
	} else {
		res_nil(x->res);
	}
	res_u64(x->res, expires);
	x->n++;
	x->next = offset + 1;
	return 0;
}

static int cache_log_read(struct tx *tx, const struct store_cmd *c,
                          struct sbuf *res)
{
	struct cache_meta m;
	struct change_ctx x = {res, 0, c->offset, {NULL, 0, 0}};
	size_t mark, amark;
	int rv;

	res_begin(res, STORE_OK);
	res_array(res, 2);
	mark = res->len;
	res_u64(res, 0);
	amark = res_array_open(res);
	rv = log_scan(tx, c->scope, c->shard, c->offset,
	              c->max ? c->max : LOG_READ_DEFAULT, log_cb, &x, &m);
	if (rv < 0) {
		return -1;
	}
	if (rv == STORE_RESNAPSHOT || rv == STORE_IN_FUTURE) {
		sbuf_reset(res);
		res_error_pair(res, (uint8_t)rv, c->offset,
		               rv == STORE_RESNAPSHOT ? m.compacted_below
		                                      : m.tail);
		return 0;
	}
	res_array_close(res, amark, x.n);
	be_put64(res->p + mark + 1, x.next);
	return 0;
}

/* Current values under a prefix, from just after `after`. */
static int idx_scan(struct tx *tx, struct store_slice scope, uint32_t shard,
                    struct store_slice prefix, struct store_slice after,
                    uint64_t max, uint64_t now, store_change_cb cb, void *arg,
                    bool *more)
{
	struct titer it;
	struct sbuf k, seek;
	size_t base;
	uint64_t n = 0;
	int rv = 0;

	*more = false;
	sbuf_init(&k);
	sbuf_init(&seek);
	shard_key(&k, tx->group, K_CIDX, scope, shard);
	base = k.len;
	sbuf_add(&k, prefix.p, prefix.len);
	titer_open(&it, tx, &k);
	sbuf_add(&seek, k.p, base);
	if (after.len > 0) {
		sbuf_add(&seek, after.p, after.len);
		sbuf_u8(&seek, 0);
	}
	if (key_cmp(&seek, &k) < 0) {
		sbuf_reset(&seek);
		sbuf_add(&seek, k.p, k.len);
	}
	for (titer_seek(&it, &seek); titer_valid(&it); titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		struct val v;
		struct log_rec r;
		uint64_t off, exp;

		if (vl != 16) {
			rv = tx_fail(tx, "corrupt cache index", NULL);
			break;
		}
		off = be_get64(vp);
		exp = be_get64(vp + 8);
		if (expired(exp, now)) {
			continue;
		}
		if (max > 0 && n == max) {
			*more = true;
			break;
		}
		if (log_load(tx, scope, shard, off, &v, &r) != 0) {
			val_free(&v);
			rv = -1;
			break;
		}
		rv = cb(arg, off, kp + base, kl - base, r.value.p, r.value.len,
		        exp);
		val_free(&v);
		if (rv != 0) {
			break;
		}
		n++;
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	sbuf_free(&seek);
	return rv;
}

static int cache_scan(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	struct change_ctx x = {res, 0, 0, {NULL, 0, 0}};
	size_t amark;
	bool more;
	int rv;

	res_begin(res, STORE_OK);
	res_array(res, 2);
	amark = res_array_open(res);
	rv = idx_scan(tx, c->scope, c->shard, c->key, c->arg,
	              c->max ? c->max : SCAN_DEFAULT, tx->now_ms, scan_cb, &x,
	              &more);
	if (rv != 0) {
		sbuf_free(&x.last);
		return -1;
	}
	res_array_close(res, amark, x.n);
	if (more) {
		res_bytes(res, x.last.p, x.last.len);
	} else {
		res_nil(res);
	}
	sbuf_free(&x.last);
	return 0;
}

static int cache_info_cmd(struct tx *tx, const struct store_cmd *c,
                          struct sbuf *res)
{
	struct cache_meta m;

	if (meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_array(res, 4);
	res_u64(res, m.tail);
	res_u64(res, m.compacted_below);
	res_u64(res, m.records);
	res_u64(res, m.live);
	return 0;
}

static int cache_drop(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	static const uint8_t types[] = {K_CIDX, K_COUNTER, K_CLOG};
	struct cache_meta m;
	struct sbuf k;
	uint64_t budget = c->max ? c->max : DROP_DEFAULT, deleted = 0;
	int more = 0;

	if (meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	sbuf_init(&k);
	for (size_t i = 0; i < sizeof types && more == 0; i++) {
		shard_key(&k, tx->group, types[i], c->scope, c->shard);
		more = tx_del_prefix(tx, &k, &budget, &deleted);
		if (more < 0) {
			sbuf_free(&k);
			return -1;
		}
	}
	sbuf_free(&k);
	/* Offsets stay monotonic across a drop, like streams'. */
	m.compacted_below = m.tail;
	m.records = 0;
	m.live = 0;
	meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_u64(res, deleted);
	res_bool(res, more != 0);
	return 0;
}

int cache_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	if (!check_scope(c, res)) {
		return 0;
	}
	switch (c->op) {
	case STORE_OP_CACHE_PUT:
		return cache_put(tx, c, res);
	case STORE_OP_CACHE_DELETE:
		return cache_delete(tx, c, res);
	case STORE_OP_CACHE_GET:
		return cache_get(tx, c, res);
	case STORE_OP_CACHE_COMPACT:
		return cache_compact(tx, c, res);
	case STORE_OP_CACHE_LOG_READ:
		return cache_log_read(tx, c, res);
	case STORE_OP_CACHE_SCAN:
		return cache_scan(tx, c, res);
	case STORE_OP_CACHE_INFO:
		return cache_info_cmd(tx, c, res);
	default:
		return cache_drop(tx, c, res);
	}
}

int cache_expire_entry(struct tx *tx, const uint8_t *what, size_t len)
{
	struct rd d;
	struct store_slice scope, key;
	uint32_t shard;
	struct cache_meta m;
	struct idx ix;
	int found;

	rd_init(&d, what, len);
	scope.len = rd_u16(&d);
	scope.p = rd_take(&d, scope.len);
	shard = rd_u32(&d);
	key.p = rd_rest(&d, &key.len);
	if (d.bad) {
		return 0;
	}
	if (meta_load(tx, scope, shard, &m) != 0) {
		return -1;
	}
	found = idx_load(tx, scope, shard, key, &ix);
	if (found <= 0 || !expired(ix.expires, tx->now_ms)) {
		return found < 0 ? -1 : 0;
	}
	idx_remove(tx, scope, shard, key, &ix, &m);
	meta_store(tx, scope, shard, &m);
	return 1;
}

/* --- Typed reads ---------------------------------------------------------- */

int store_cache_get(struct store *s, uint32_t group, struct store_slice scope,
                    uint32_t shard, struct store_slice key, uint64_t now_ms,
                    uint8_t **value, size_t *len, uint64_t *expires_at,
                    uint64_t *offset, bool *found)
{
	struct tx tx;
	struct idx ix;
	struct val v;
	struct log_rec r;
	int rv;

	*found = false;
	*value = NULL;
	*len = 0;
	tx_init(&tx, s, group, 0, now_ms, false);
	rv = cache_lookup(&tx, scope, shard, key, now_ms, &ix, &v, &r);
	if (rv > 0) {
		*value = store_xmalloc(r.value.len);
		if (r.value.len > 0) {
			memcpy(*value, r.value.p, r.value.len);
		}
		*len = r.value.len;
		*expires_at = ix.expires;
		*offset = ix.offset;
		*found = true;
	}
	val_free(&v);
	tx_fini(&tx);
	return rv < 0 ? -1 : 0;
}

static void info_from(struct store_cache_info *info, const struct cache_meta *m)
{
	if (info != NULL) {
		info->tail = m->tail;
		info->compacted_below = m->compacted_below;
		info->records = m->records;
		info->live = m->live;
	}
}

int store_cache_info(struct store *s, uint32_t group, struct store_slice scope,
                     uint32_t shard, struct store_cache_info *info)
{
	struct tx tx;
	struct cache_meta m;
	int rv;

	tx_init(&tx, s, group, 0, 0, false);
	rv = meta_load(&tx, scope, shard, &m);
	tx_fini(&tx);
	if (rv == 0) {
		info_from(info, &m);
	}
	return rv;
}

int store_cache_log_read(struct store *s, uint32_t group,
                         struct store_slice scope, uint32_t shard,
                         uint64_t from, uint64_t max, store_change_cb cb,
                         void *arg, struct store_cache_info *info)
{
	struct tx tx;
	struct cache_meta m;
	int rv;

	tx_init(&tx, s, group, 0, 0, false);
	rv = log_scan(&tx, scope, shard, from, max, cb, arg, &m);
	tx_fini(&tx);
	if (rv >= 0) {
		info_from(info, &m);
	}
	return rv;
}

int store_cache_scan(struct store *s, uint32_t group, struct store_slice scope,
                     uint32_t shard, struct store_slice prefix, uint64_t now_ms,
                     store_change_cb cb, void *arg)
{
	struct tx tx;
	struct store_slice none = {NULL, 0};
	bool more;
	int rv;

	tx_init(&tx, s, group, 0, now_ms, false);
	rv = idx_scan(&tx, scope, shard, prefix, none, 0, now_ms, cb, arg,
	              &more);
	tx_fini(&tx);
	return rv;
}
