/* Stream shards: records at contiguous offsets from 0, head/tail/bytes in
 * the shard's meta record, retention trimming from the head, and reads that
 * tell too_old from in_future.
 *
 * Records are stored in runs: the records one append command wrote, under
 * one key named by the run's LAST offset, so a seek to any offset lands on
 * the run that holds it (runs are contiguous and never overlap). A run's
 * value is u64 entry time, u32 count, then count x (u32 length + payload).
 * One key per command instead of one per record keeps the per-record cost
 * of the write batch, memtable, flushes and compactions off the publish
 * path. A command larger than STREAM_RUN_MAX_BYTES is split into several
 * runs, so a read starting inside a run never loads much more than it
 * returns. A trim below the middle of a run moves the head only; the run
 * is deleted once its last offset is below the head. */
#include <string.h>

#include "store/internal.h"
#include "store/stream.h"

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

/* A run's value header: u64 entry time, u32 count. */
#define RUN_HDR 12

int stream_run_open(const uint8_t *kp, size_t kl, const uint8_t *vp, size_t vl,
                    struct stream_run *run)
{
	uint64_t last;
	uint32_t n;

	if (kl < 8 || vl < RUN_HDR) {
		return -1;
	}
	last = be_get64(kp + kl - 8);
	n = be_get32(vp + 8);
	if (n == 0 || last < n - 1 || vl - RUN_HDR < (size_t)n * 4) {
		return -1;
	}
	run->ts = be_get64(vp);
	run->first = last - (n - 1);
	run->last = last;
	run->next = run->first;
	run->p = vp + RUN_HDR;
	run->end = vp + vl;
	return 0;
}

int stream_run_next(struct stream_run *run, uint64_t *offset,
                    const uint8_t **payload, size_t *len)
{
	uint32_t l;

	if (run->next > run->last) {
		return run->p == run->end ? 0 : -1;
	}
	if (run->end - run->p < 4) {
		return -1;
	}
	l = be_get32(run->p);
	if ((size_t)(run->end - run->p - 4) < l) {
		return -1;
	}
	*offset = run->next++;
	*payload = run->p + 4;
	*len = l;
	run->p += 4 + (size_t)l;
	return 1;
}

/* Writes the run being built in `v` (n records from m->tail). */
static void put_run(struct tx *tx, const struct store_cmd *c,
                    struct stream_meta *m, struct sbuf *k, struct sbuf *v,
                    uint32_t n)
{
	be_put32(v->p + 8, n);
	rec_key(k, tx->group, c->scope, c->shard, m->tail + n - 1);
	tx_put(tx, k, v->p, v->len);
	m->tail += n;
}

int stream_append_records(struct tx *tx, const struct store_cmd *c,
                          struct stream_meta *m, uint64_t *base)
{
	struct store_list_iter it;
	struct store_slice p;
	struct sbuf k, v;
	uint32_t n = 0;
	size_t want = c->items.v == NULL ? c->items.enc_len : 0;

	*base = m->tail;
	if (c->items.n == 0) {
		return 0;
	}
	sbuf_init(&k);
	sbuf_init(&v);
	if (c->items.v == NULL && want <= STREAM_RUN_MAX_BYTES - RUN_HDR) {
		/* One run (the usual case): the decoded command's list is
		 * already count x (u32 length + payload), the run's body, so
		 * it is taken in one copy, not record by record. The
		 * decoder checked every length against the list's end. */
		v.cap = RUN_HDR + want;
		v.p = store_xmalloc(v.cap);
		sbuf_u64(&v, tx->now_ms);
		sbuf_u32(&v, 0); /* the count, set by put_run */
		sbuf_add(&v, c->items.enc, want);
		m->bytes += want - (size_t)c->items.n * 4;
		put_run(tx, c, m, &k, &v, c->items.n);
		sbuf_free(&k);
		sbuf_free(&v);
		return 0;
	}
	sbuf_reserve(&v, RUN_HDR + (want < STREAM_RUN_MAX_BYTES
	                                ? want
	                                : STREAM_RUN_MAX_BYTES));
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &p)) {
		if (n > 0 && v.len + 4 + p.len > STREAM_RUN_MAX_BYTES) {
			put_run(tx, c, m, &k, &v, n);
			n = 0;
		}
		if (n == 0) {
			sbuf_reset(&v);
			sbuf_u64(&v, tx->now_ms);
			sbuf_u32(&v, 0); /* the count, set by put_run */
		}
		sbuf_u32(&v, (uint32_t)p.len);
		sbuf_add(&v, p.p, p.len);
		m->bytes += p.len;
		n++;
	}
	put_run(tx, c, m, &k, &v, n);
	sbuf_free(&k);
	sbuf_free(&v);
	return 0;
}

void stream_reader_init(struct stream_reader *r, struct tx *tx,
                        struct store_slice scope, uint32_t shard)
{
	memset(r, 0, sizeof *r);
	r->tx = tx;
	r->scope = scope;
	r->shard = shard;
	sbuf_init(&r->k);
}

int stream_reader_get(struct stream_reader *r, uint64_t offset, uint64_t *ts,
                      const uint8_t **payload, size_t *len)
{
	uint64_t off;
	int got;

	if (!r->in_run || offset < r->run.first || offset > r->run.last) {
		size_t kl, vl;
		const uint8_t *kp, *vp;

		r->in_run = false;
		if (!r->open) {
			key_start(&r->k, r->tx->group, K_REC);
			key_shard(&r->k, r->scope, r->shard);
			titer_open(&r->it, r->tx, &r->k);
			r->open = true;
		}
		rec_key(&r->k, r->tx->group, r->scope, r->shard, offset);
		if (!titer_seek(&r->it, &r->k)) {
			return 0;
		}
		kp = titer_key(&r->it, &kl);
		vp = titer_value(&r->it, &vl);
		if (stream_run_open(kp, kl, vp, vl, &r->run) != 0) {
			return tx_fail(r->tx, "corrupt stream record", NULL);
		}
		r->start = r->run;
		r->in_run = true;
		if (offset < r->run.first) {
			return 0; /* trimmed, or a hole */
		}
	}
	if (offset < r->run.next) {
		r->run = r->start; /* walk again from the run's start */
	}
	while ((got = stream_run_next(&r->run, &off, payload, len)) > 0) {
		if (off == offset) {
			*ts = r->run.ts;
			return 1;
		}
	}
	r->in_run = false;
	return tx_fail(r->tx, "corrupt stream record", NULL);
}

int stream_reader_close(struct stream_reader *r)
{
	int rv = 0;

	if (r->open) {
		rv = titer_close(&r->it);
	}
	sbuf_free(&r->k);
	r->open = r->in_run = false;
	return rv;
}

/* Walks the records of one shard in offset order from `from`, run by run;
 * trims and history reads share it. */
struct cursor {
	struct tx *tx;
	struct titer it;
	struct sbuf k;
	struct stream_run run;
	uint64_t from;
	bool in_run;
};

static void cursor_open(struct cursor *cur, struct tx *tx,
                        struct store_slice scope, uint32_t shard, uint64_t from)
{
	cur->tx = tx;
	cur->from = from;
	cur->in_run = false;
	sbuf_init(&cur->k);
	key_start(&cur->k, tx->group, K_REC);
	key_shard(&cur->k, scope, shard);
	titer_open(&cur->it, tx, &cur->k);
	rec_key(&cur->k, tx->group, scope, shard, from);
	titer_seek(&cur->it, &cur->k);
}

/* The next record at or above `from`: 1 (payload borrowed until the next
 * call), 0 at the end of the shard, -1 (the tx failed) on a corrupt run. */
static int cursor_next(struct cursor *cur, uint64_t *offset, uint64_t *ts,
                       const uint8_t **payload, size_t *len)
{
	for (;;) {
		int got;

		if (!cur->in_run) {
			size_t kl, vl;
			const uint8_t *kp, *vp;

			if (!titer_valid(&cur->it)) {
				return 0;
			}
			kp = titer_key(&cur->it, &kl);
			vp = titer_value(&cur->it, &vl);
			if (stream_run_open(kp, kl, vp, vl, &cur->run) != 0) {
				return tx_fail(cur->tx, "corrupt stream record",
				               NULL);
			}
			cur->in_run = true;
		}
		while ((got = stream_run_next(&cur->run, offset, payload,
		                              len)) > 0) {
			if (*offset >= cur->from) {
				*ts = cur->run.ts;
				return 1;
			}
		}
		if (got < 0) {
			return tx_fail(cur->tx, "corrupt stream record", NULL);
		}
		cur->in_run = false;
		titer_next(&cur->it);
	}
}

/* -1 (the tx failed) on an iterator error. */
static int cursor_close(struct cursor *cur)
{
	int rv = titer_close(&cur->it);
	sbuf_free(&cur->k);
	return rv;
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
	struct cursor cur;
	struct sbuf k, end;
	uint64_t budget = c->max ? c->max : TRIM_DEFAULT;
	uint64_t head, bytes, trimmed = 0, off, ts;
	const uint8_t *pp;
	size_t len;
	bool more = false;
	int got;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0) {
		return -1;
	}
	head = m.head;
	bytes = m.bytes;
	cursor_open(&cur, tx, c->scope, c->shard, head);
	while ((got = cursor_next(&cur, &off, &ts, &pp, &len)) > 0) {
		if (off >= m.tail ||
		    !((c->offset > 0 && off < c->offset) ||
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
	if (cursor_close(&cur) != 0 || got < 0) {
		return -1;
	}
	if (head > m.head) {
		/* Offsets only grow (a drop keeps them), so nothing will be
		 * written below the new head again: a range deletion is
		 * safe after the batch. It takes the runs whose last offset
		 * is below the new head; a run the head is inside stays. */
		sbuf_init(&k);
		sbuf_init(&end);
		rec_key(&k, tx->group, c->scope, c->shard, m.head);
		rec_key(&end, tx->group, c->scope, c->shard, head);
		tx_del_range(tx, &k, &end);
		sbuf_free(&k);
		sbuf_free(&end);
		m.head = head;
		m.bytes = bytes;
		stream_meta_store(tx, c->scope, c->shard, &m);
	}
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
	struct cursor cur;
	uint64_t n = 0, bytes = 0, off, ts;
	const uint8_t *pp;
	size_t len;
	int got, rv = 0;

	if (stream_meta_load(tx, scope, shard, m) != 0) {
		return -1;
	}
	if (from < m->head) {
		return STORE_TOO_OLD;
	}
	if (from > m->tail) {
		return STORE_IN_FUTURE;
	}
	cursor_open(&cur, tx, scope, shard, from);
	while ((got = cursor_next(&cur, &off, &ts, &pp, &len)) > 0) {
		if ((max > 0 && n >= max) ||
		    (max_bytes > 0 && n > 0 && bytes >= max_bytes) ||
		    off >= m->tail) {
			break;
		}
		rv = cb(arg, off, ts, pp, len);
		if (rv != 0) {
			break;
		}
		n++;
		bytes += len;
	}
	if (got < 0) {
		rv = -1;
	}
	if (cursor_close(&cur) != 0) {
		rv = -1;
	}
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
