/* Stream shards: records at contiguous offsets from 0 (value: entry time
 * u64 + payload), head/tail/bytes in the shard's meta record, retention
 * trimming from the head, and reads that tell too_old from in_future. */
#include <string.h>

#include "store/internal.h"

#define TRIM_DEFAULT 10000
#define DROP_DEFAULT 10000
#define READ_DEFAULT 1000

static void meta_key(struct sbuf *k, uint32_t group, struct store_slice scope,
                     uint32_t shard)
{
	key_start(k, group, K_STREAM);
	key_shard(k, scope, shard);
}

static void rec_key(struct sbuf *k, uint32_t group, struct store_slice scope,
                    uint32_t shard, uint64_t offset)
{
	key_start(k, group, K_REC);
	key_shard(k, scope, shard);
	sbuf_u64(k, offset);
}

int stream_meta_load(struct tx *tx, struct store_slice scope, uint32_t shard,
                     struct stream_meta *m)
{
	struct sbuf k, v;
	int found;

	memset(m, 0, sizeof *m);
	sbuf_init(&k);
	sbuf_init(&v);
	meta_key(&k, tx->group, scope, shard);
	found = tx_get_rec(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0) {
		struct rd r;
		rd_init(&r, v.p, v.len);
		m->head = rd_u64(&r);
		m->tail = rd_u64(&r);
		m->bytes = rd_u64(&r);
		m->producers = rd_u32(&r);
		if (!rd_done(&r) || m->head > m->tail) {
			found = tx_fail(tx, "corrupt stream meta", NULL);
		}
	}
	sbuf_free(&v);
	return found < 0 ? -1 : 0;
}

void stream_meta_store(struct tx *tx, struct store_slice scope, uint32_t shard,
                       const struct stream_meta *m)
{
	struct sbuf k;
	uint8_t v[28];

	sbuf_init(&k);
	meta_key(&k, tx->group, scope, shard);
	be_put64(v, m->head);
	be_put64(v + 8, m->tail);
	be_put64(v + 16, m->bytes);
	be_put32(v + 24, m->producers);
	tx_put_rec(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

int stream_append_records(struct tx *tx, const struct store_cmd *c,
                          struct stream_meta *m, uint64_t *base)
{
	struct store_list_iter it;
	struct store_slice p;
	struct sbuf k, v;

	sbuf_init(&k);
	sbuf_init(&v);
	*base = m->tail;
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &p)) {
		rec_key(&k, tx->group, c->scope, c->shard, m->tail);
		sbuf_reset(&v);
		sbuf_u64(&v, tx->now_ms);
		sbuf_add(&v, p.p, p.len);
		tx_put(tx, &k, v.p, v.len);
		m->tail++;
		m->bytes += p.len;
	}
	sbuf_free(&k);
	sbuf_free(&v);
	return 0;
}

static int stream_append(struct tx *tx, const struct store_cmd *c,
                         struct sbuf *res)
{
	struct stream_meta m;
	uint64_t base;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	stream_append_records(tx, c, &m, &base);
	stream_meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_u64(res, base);
	res_u64(res, c->items.n);
	return 0;
}

static int stream_trim(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct stream_meta m;
	struct titer it;
	struct sbuf k, end;
	uint64_t budget = c->max ? c->max : TRIM_DEFAULT;
	uint64_t head, bytes, trimmed = 0;
	bool more = false;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	head = m.head;
	bytes = m.bytes;
	sbuf_init(&k);
	sbuf_init(&end);
	key_start(&k, tx->group, K_REC);
	key_shard(&k, c->scope, c->shard);
	titer_open(&it, tx, &k);
	rec_key(&k, tx->group, c->scope, c->shard, head);
	for (titer_seek(&it, &k); titer_valid(&it) && head < m.tail;
	     titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		uint64_t off, ts, len;

		if (kl < 8 || vl < 8) {
			titer_close(&it);
			sbuf_free(&k);
			sbuf_free(&end);
			return tx_fail(tx, "corrupt stream record", NULL);
		}
		off = be_get64(kp + kl - 8);
		if (off >= m.tail) {
			break;
		}
		ts = be_get64(vp);
		len = vl - 8;
		if (!((c->offset > 0 && off < c->offset) ||
		      (c->retention_bytes > 0 && bytes > c->retention_bytes) ||
		      (c->retention_ms > 0 &&
		       deadline_after(ts, c->retention_ms) <= tx->now_ms))) {
			break;
		}
		if (budget == 0) {
			more = true;
			break;
		}
		budget--;
		head = off + 1;
		bytes -= len < bytes ? len : bytes;
		trimmed++;
	}
	if (titer_close(&it) != 0) {
		sbuf_free(&k);
		sbuf_free(&end);
		return -1;
	}
	if (head > m.head) {
		/* Offsets only grow (a drop keeps them), so nothing will be
		 * written below the new head again: a range deletion is
		 * safe after the batch. */
		rec_key(&k, tx->group, c->scope, c->shard, m.head);
		rec_key(&end, tx->group, c->scope, c->shard, head);
		tx_del_range(tx, &k, &end);
		m.head = head;
		m.bytes = bytes;
		stream_meta_store(tx, c->scope, c->shard, &m);
	}
	sbuf_free(&k);
	sbuf_free(&end);
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_u64(res, m.head);
	res_u64(res, trimmed);
	res_bool(res, more);
	return 0;
}

static int stream_drop(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	static const uint8_t types[] = {K_PROD,  K_PROD_LRU, K_CG,
	                                K_CLAIM, K_DEAD,     K_REC};
	struct stream_meta m;
	struct sbuf k;
	uint64_t budget = c->max ? c->max : DROP_DEFAULT, deleted = 0;
	int more = 0;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	sbuf_init(&k);
	for (size_t i = 0; i < sizeof types && more == 0; i++) {
		key_start(&k, tx->group, types[i]);
		key_shard(&k, c->scope, c->shard);
		more = tx_del_prefix(tx, &k, &budget, &deleted);
		if (more < 0) {
			sbuf_free(&k);
			return -1;
		}
	}
	sbuf_free(&k);
	/* The shard keeps its offsets: a stream created again under the
	 * same name continues after them. */
	m.head = m.tail;
	m.bytes = 0;
	m.producers = 0;
	stream_meta_store(tx, c->scope, c->shard, &m);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_u64(res, deleted);
	res_bool(res, more != 0);
	return 0;
}

/* Reads records from `from`; the status (0, STORE_TOO_OLD,
 * STORE_IN_FUTURE), a callback's non-zero value, or -1. */
static int stream_scan(struct tx *tx, struct store_slice scope, uint32_t shard,
                       uint64_t from, uint64_t max, uint64_t max_bytes,
                       store_record_cb cb, void *arg, struct stream_meta *m)
{
	struct titer it;
	struct sbuf k;
	uint64_t n = 0, bytes = 0;
	int rv = 0;

	if (stream_meta_load(tx, scope, shard, m) != 0) {
		return -1;
	}
	if (from < m->head) {
		return STORE_TOO_OLD;
	}
	if (from > m->tail) {
		return STORE_IN_FUTURE;
	}
	sbuf_init(&k);
	key_start(&k, tx->group, K_REC);
	key_shard(&k, scope, shard);
	titer_open(&it, tx, &k);
	rec_key(&k, tx->group, scope, shard, from);
	for (titer_seek(&it, &k); titer_valid(&it); titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		uint64_t off;

		if ((max > 0 && n >= max) ||
		    (max_bytes > 0 && n > 0 && bytes >= max_bytes)) {
			break;
		}
		if (kl < 8 || vl < 8) {
			rv = tx_fail(tx, "corrupt stream record", NULL);
			break;
		}
		off = be_get64(kp + kl - 8);
		if (off >= m->tail) {
			break;
		}
		rv = cb(arg, off, be_get64(vp), vp + 8, vl - 8);
		if (rv != 0) {
			break;
		}
		n++;
		bytes += vl - 8;
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	return rv;
}

struct read_ctx {
	struct sbuf *res;
	uint32_t n;
	uint64_t next;
};

static int read_cb(void *arg, uint64_t offset, uint64_t ts,
                   const uint8_t *payload, size_t len)
{
	struct read_ctx *r = arg;

	res_array(r->res, 3);
	res_u64(r->res, offset);
	res_u64(r->res, ts);
	res_bytes(r->res, payload, len);
	r->n++;
	r->next = offset + 1;
	return 0;
}

static int stream_read(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct stream_meta m;
	struct read_ctx r = {res, 0, c->offset};
	size_t mark;
	int rv;

	res_begin(res, STORE_OK);
	res_array(res, 2);
	mark = res->len;
	res_u64(res, 0);
	{
		size_t amark = res_array_open(res);
		rv = stream_scan(tx, c->scope, c->shard, c->offset,
		                 c->max ? c->max : READ_DEFAULT, c->max_bytes,
		                 read_cb, &r, &m);
		res_array_close(res, amark, r.n);
	}
	if (rv < 0) {
		return -1;
	}
	if (rv == STORE_TOO_OLD || rv == STORE_IN_FUTURE) {
		sbuf_reset(res);
		res_error_pair(res, (uint8_t)rv, c->offset,
		               rv == STORE_TOO_OLD ? m.head : m.tail);
		return 0;
	}
	be_put64(res->p + mark + 1, r.next);
	return 0;
}

static int stream_info(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct stream_meta m;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_array(res, 4);
	res_u64(res, m.head);
	res_u64(res, m.tail);
	res_u64(res, m.bytes);
	res_u64(res, m.producers);
	return 0;
}

int stream_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	if (!check_scope(c, res)) {
		return 0;
	}
	switch (c->op) {
	case STORE_OP_STREAM_APPEND:
		return stream_append(tx, c, res);
	case STORE_OP_STREAM_APPEND_IDEM:
		return producer_append(tx, c, res);
	case STORE_OP_PRODUCER_INIT:
		return producer_init(tx, c, res);
	case STORE_OP_STREAM_TRIM:
		return stream_trim(tx, c, res);
	case STORE_OP_STREAM_DROP:
		return stream_drop(tx, c, res);
	case STORE_OP_STREAM_READ:
		return stream_read(tx, c, res);
	default:
		return stream_info(tx, c, res);
	}
}

static void info_from_meta(struct store_stream_info *info,
                           const struct stream_meta *m)
{
	if (info != NULL) {
		info->head = m->head;
		info->tail = m->tail;
		info->bytes = m->bytes;
		info->producers = m->producers;
	}
}

int store_stream_info(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, struct store_stream_info *info)
{
	struct tx tx;
	struct stream_meta m;
	int rv;

	tx_init(&tx, s, group, 0, 0, false);
	rv = stream_meta_load(&tx, scope, shard, &m);
	tx_fini(&tx);
	if (rv == 0) {
		info_from_meta(info, &m);
	}
	return rv;
}

int store_stream_read(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, uint64_t from, uint64_t max_records,
                      uint64_t max_bytes, store_record_cb cb, void *arg,
                      struct store_stream_info *info)
{
	struct tx tx;
	struct stream_meta m;
	int rv;

	tx_init(&tx, s, group, 0, 0, false);
	tx.cached = false; /* may run off the reactor */
	rv = stream_scan(&tx, scope, shard, from, max_records, max_bytes, cb,
	                 arg, &m);
	tx_fini(&tx);
	if (rv >= 0) {
		info_from_meta(info, &m);
	}
	return rv;
}
