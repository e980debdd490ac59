/* Idempotent producers, per stream shard: for each producer id the next
 * expected batch sequence and the outcomes (base offset, count) of the
 * last STORE_PRODUCER_WINDOW batches. At most STORE_PRODUCERS_MAX
 * producers per shard: a new one evicts the least recently used (ordered
 * by the Raft index of its last use, then by id, so every replica evicts
 * the same one). Everything is decided here, in apply. */
#include <string.h>

#include "store/internal.h"

struct producer {
	uint64_t next_seq;
	uint64_t last_used;
	uint32_t n; /* outcomes kept, for sequences next_seq - n .. - 1 */
	uint64_t base[STORE_PRODUCER_WINDOW];
	uint32_t count[STORE_PRODUCER_WINDOW];
};

static void prod_key(struct sbuf *k, uint32_t group, const struct store_cmd *c,
                     uint64_t pid)
{
	key_start(k, group, K_PROD);
	key_shard(k, c->scope, c->shard);
	sbuf_u64(k, pid);
}

static void lru_key(struct sbuf *k, uint32_t group, const struct store_cmd *c,
                    uint64_t last_used, uint64_t pid)
{
	key_start(k, group, K_PROD_LRU);
	key_shard(k, c->scope, c->shard);
	sbuf_u64(k, last_used);
	sbuf_u64(k, pid);
}

/* 1 found, 0 absent, -1 failure. */
static int prod_load(struct tx *tx, const struct store_cmd *c, uint64_t pid,
                     struct producer *p)
{
	struct sbuf k;
	struct val v;
	int found;

	memset(p, 0, sizeof *p);
	sbuf_init(&k);
	prod_key(&k, tx->group, c, pid);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0) {
		struct rd r;
		rd_init(&r, v.p, v.len);
		p->next_seq = rd_u64(&r);
		p->last_used = rd_u64(&r);
		p->n = rd_u32(&r);
		if (p->n > STORE_PRODUCER_WINDOW) {
			r.bad = true;
		}
		for (uint32_t i = 0; i < p->n && !r.bad; i++) {
			p->base[i] = rd_u64(&r);
			p->count[i] = rd_u32(&r);
		}
		if (!rd_done(&r)) {
			found = tx_fail(tx, "corrupt producer state", NULL);
		}
	}
	val_free(&v);
	return found;
}

/* Stores `p` as used now, moving its LRU entry. */
static void prod_store(struct tx *tx, const struct store_cmd *c, uint64_t pid,
                       struct producer *p, bool existed)
{
	struct sbuf k, v;

	sbuf_init(&k);
	sbuf_init(&v);
	if (existed) {
		lru_key(&k, tx->group, c, p->last_used, pid);
		tx_del(tx, &k);
	}
	p->last_used = tx->index;
	lru_key(&k, tx->group, c, p->last_used, pid);
	tx_put(tx, &k, "", 0);
	prod_key(&k, tx->group, c, pid);
	sbuf_u64(&v, p->next_seq);
	sbuf_u64(&v, p->last_used);
	sbuf_u32(&v, p->n);
	for (uint32_t i = 0; i < p->n; i++) {
		sbuf_u64(&v, p->base[i]);
		sbuf_u32(&v, p->count[i]);
	}
	tx_put(tx, &k, v.p, v.len);
	sbuf_free(&k);
	sbuf_free(&v);
}

/* Makes room for one more producer in the shard. */
static int prod_admit(struct tx *tx, const struct store_cmd *c,
                      struct stream_meta *m)
{
	struct titer it;
	struct sbuf k;
	uint64_t pid = 0;
	bool victim = false;

	if (m->producers < STORE_PRODUCERS_MAX) {
		m->producers++;
		return 0;
	}
	sbuf_init(&k);
	key_start(&k, tx->group, K_PROD_LRU);
	key_shard(&k, c->scope, c->shard);
	titer_open(&it, tx, &k);
	if (titer_seek(&it, NULL)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		/* The LRU key ends with last use and id. */
		sbuf_reset(&k);
		sbuf_add(&k, kp, kl);
		pid = be_get64(kp + kl - 8);
		victim = true;
	}
	if (titer_close(&it) != 0) {
		sbuf_free(&k);
		return -1;
	}
	if (victim) {
		tx_del(tx, &k);
		prod_key(&k, tx->group, c, pid);
		tx_del(tx, &k);
	} else {
		/* The count says full but no entry is there: recount. */
		m->producers++;
	}
	sbuf_free(&k);
	return 0;
}

int producer_append(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	struct producer p;
	uint64_t base;
	int found;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	found = prod_load(tx, c, c->producer, &p);
	if (found < 0) {
		return -1;
	}
	if (!found && c->seq != 0) {
		res_error(res, STORE_UNKNOWN_PRODUCER,
		          "unknown producer: start again under a new id");
		return 0;
	}
	if (found && c->seq < p.next_seq) {
		uint64_t back = p.next_seq - c->seq;
		if (back > p.n) {
			res_error(res, STORE_SEQ_EXPIRED,
			          "sequence is older than the remembered "
			          "batches");
			return 0;
		}
		/* A duplicate: the first send's answer, nothing appended. */
		res_begin(res, STORE_OK);
		res_array(res, 3);
		res_u64(res, p.base[p.n - back]);
		res_u64(res, p.count[p.n - back]);
		res_bool(res, true);
		prod_store(tx, c, c->producer, &p, true);
		return 0;
	}
	if (found && c->seq > p.next_seq) {
		res_begin(res, STORE_SEQ_GAP);
		res_u64(res, p.next_seq);
		return 0;
	}
	if (!found && prod_admit(tx, c, &m) != 0) {
		return -1;
	}
	stream_append_records(tx, c, &m, &base);
	if (p.n == STORE_PRODUCER_WINDOW) {
		memmove(p.base, p.base + 1, (p.n - 1) * sizeof p.base[0]);
		memmove(p.count, p.count + 1, (p.n - 1) * sizeof p.count[0]);
		p.n--;
	}
	p.base[p.n] = base;
	p.count[p.n] = c->items.n;
	p.n++;
	p.next_seq++;
	prod_store(tx, c, c->producer, &p, found > 0);
	stream_meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_u64(res, base);
	res_u64(res, c->items.n);
	res_bool(res, false);
	return 0;
}

int producer_init(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	struct producer p;
	int found;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	found = prod_load(tx, c, c->producer, &p);
	if (found < 0) {
		return -1;
	}
	if (found) {
		res_error(res, STORE_EXISTS, "ERR producer id already in use");
		return 0;
	}
	if (prod_admit(tx, c, &m) != 0) {
		return -1;
	}
	prod_store(tx, c, c->producer, &p, false);
	stream_meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_bool(res, true);
	return 0;
}
