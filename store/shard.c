/* The shard state machine: apply (one WriteBatch per entry, applied index
 * included, idempotent under replay), reads, the fsm glue, and export /
 * import of a group's key range as SST files, its approximate size, and
 * compaction requests. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/internal.h"

/* Split exported state into SST files of about this size. */
#define EXPORT_FILE_BYTES (256u << 20)

int store_open(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
               struct store **out)
{
	struct store *s = calloc(1, sizeof *s);

	if (s == NULL) {
		return -1;
	}
	s->db = db;
	s->cf = cf;
	s->ro = rocksdb_readoptions_create();
	s->wo = rocksdb_writeoptions_create();
	/* No WAL: the Raft log is the durable record of every applied
	 * entry, and the applied index lives in the same batches, so after
	 * a crash the state is a consistent earlier point that replay brings
	 * forward. raft/ calls store_sync() (a flush) before it drops log
	 * entries. Writing the data to the WAL too cost a fifth of the
	 * reactor's time under publish load (docs/storage.md). */
	rocksdb_writeoptions_set_sync(s->wo, 0);
	rocksdb_writeoptions_disable_WAL(s->wo, 1);
	s->wb = rocksdb_writebatch_wi_create(1 << 16, 1);
	if (ordrows_init(&s->ob) != 0) {
		rocksdb_writebatch_wi_destroy(s->wb);
		rocksdb_writeoptions_destroy(s->wo);
		rocksdb_readoptions_destroy(s->ro);
		free(s);
		return -1;
	}
	pthread_mutex_init(&s->kv_mu, NULL);
	kvdirty_init(&s->kv_dirty);
	if (dwrite_start(db, cf, s->wo, 0, &s->dw) != 0) {
		pthread_mutex_destroy(&s->kv_mu);
		ordrows_fini(&s->ob);
		rocksdb_writebatch_wi_destroy(s->wb);
		rocksdb_writeoptions_destroy(s->wo);
		rocksdb_readoptions_destroy(s->ro);
		free(s);
		return -1;
	}
	if (rowcache_create(STORE_ROW_CACHE_DEFAULT, &s->rows) != 0) {
		s->rows = NULL; /* no cache: every read goes to RocksDB */
	}
	*out = s;
	return 0;
}

void store_set_row_cache(struct store *s, size_t max_bytes)
{
	if (s->rows != NULL) {
		rowcache_resize(s->rows, max_bytes);
	}
}

struct verify {
	struct store *s;
	char *msg;
	size_t len;
};

/* Under kv_mu: frees the checkpoints written that nobody waits on. */
static void kv_reap(struct store *s)
{
	struct kv_ckpt **pp = &s->kv_flight;

	while (*pp != NULL) {
		struct kv_ckpt *ck = *pp;
		if (atomic_load(&ck->req.done) && !ck->held) {
			*pp = ck->next;
			if (ck->req.flags & DWRITE_FLUSH) {
				s->kv_flush_queued = false;
			}
			kvdirty_clear(&ck->rows);
			free(ck->order);
			free(ck);
		} else {
			pp = &ck->next;
		}
	}
}

/* Under kv_mu: moves the dirty KV rows into a checkpoint queued on the
 * data writer with `flags` and `fn`. Holding kv_mu orders it against the
 * reactor's commits: it follows exactly the batches whose KV rows it (or
 * an earlier checkpoint) holds. `held`: the caller waits on it and lets
 * go with kv_release. The checkpoint is done (rv -1) when the writer had
 * failed. `reactor`: the caller is the reactor, which owns s->ob and so
 * can hand the writer the rows already in order. */
static struct kv_ckpt *kv_checkpoint(struct store *s, unsigned flags,
                                     dwrite_fn fn, void *arg, bool held,
                                     bool reactor)
{
	struct kv_ckpt *ck = store_xmalloc(sizeof *ck);

	memset(ck, 0, sizeof *ck);
	kvdirty_move(&ck->rows, &s->kv_dirty);
	/* The next table will likely hold as many keys. */
	kvdirty_reserve(&s->kv_dirty, ck->rows.n);
	if (reactor && s->ob_iters == 0) {
		ck->order = kvdirty_sorted_by(&ck->rows, &s->ob, tx_row_ordered,
		                              &ck->req.norder);
		ck->req.order = ck->order;
	}
	ck->req.rows = &ck->rows;
	ck->req.flags = flags;
	ck->req.fn = fn;
	ck->req.arg = arg;
	ck->held = held;
	ck->next = s->kv_flight;
	s->kv_flight = ck;
	if (flags & DWRITE_FLUSH) {
		s->kv_flush_queued = true;
	}
	/* The reactor rebuilds its ordered index of the rows left. */
	atomic_fetch_add(&s->kv_gen, 1);
	(void)dwrite_submit_req(s->dw, &ck->req);
	return ck;
}

/* Queues a checkpoint and waits for it; returns its rv. The caller then
 * reads ck->req and calls kv_release. */
static int kv_checkpoint_wait(struct store *s, unsigned flags, dwrite_fn fn,
                              void *arg, struct kv_ckpt **out)
{
	pthread_mutex_lock(&s->kv_mu);
	*out = kv_checkpoint(s, flags, fn, arg, true, false);
	pthread_mutex_unlock(&s->kv_mu);
	return dwrite_wait(s->dw, &(*out)->req);
}

static void kv_release(struct store *s, struct kv_ckpt *ck)
{
	pthread_mutex_lock(&s->kv_mu);
	ck->held = false;
	kv_reap(s);
	pthread_mutex_unlock(&s->kv_mu);
}

int store_drain(struct store *s)
{
	struct kv_ckpt *ck;
	int rv;

	/* RocksDB then holds every entry applied so far, KV rows too. */
	rv = kv_checkpoint_wait(s, 0, NULL, NULL, &ck);
	kv_release(s, ck);
	return rv != 0 ? -1 : 0;
}

int store_kv_dirty_get(struct store *s, const struct sbuf *key, uint64_t hash,
                       struct val *v)
{
	const uint8_t *p = NULL;
	size_t len = 0;
	int rv;

	pthread_mutex_lock(&s->kv_mu);
	rv = kvdirty_get(&s->kv_dirty, hash, key->p, key->len, &p, &len);
	/* Then the checkpoints not yet written, newest first; a written
	 * one's rows are in RocksDB. */
	for (struct kv_ckpt *ck = s->kv_flight; rv < 0 && ck != NULL;
	     ck = ck->next) {
		if (!atomic_load(&ck->req.done)) {
			rv = kvdirty_get(&ck->rows, hash, key->p, key->len, &p,
			                 &len);
		}
	}
	if (rv == 1) {
		v->p = store_xmalloc(len > 0 ? len : 1);
		memcpy(v->p, p, len);
		v->len = len;
	}
	pthread_mutex_unlock(&s->kv_mu);
	return rv;
}

const char *store_writer_error(struct store *s)
{
	return dwrite_error(s->dw);
}

/* store_drain for the paths with their own message buffer: on failure
 * `buf` gets `prefix` and the writer's reason. */
static int drain_or_say(struct store *s, char *buf, size_t len,
                        const char *prefix)
{
	if (store_drain(s) != 0) {
		snprintf(buf, len, "%s%s", prefix, dwrite_error(s->dw));
		return -1;
	}
	return 0;
}

static int verify_row(void *arg, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen, bool present)
{
	struct verify *v = arg;
	char *err = NULL;
	size_t dlen = 0;
	char *d = rocksdb_get_cf(v->s->db, v->s->ro, v->s->cf,
	                         (const char *)key, klen, &dlen, &err);
	int rv = 0;

	if (err != NULL) {
		snprintf(v->msg, v->len, "read failed: %s", err);
		rocksdb_free(err);
		return -1;
	}
	if ((d != NULL) != present ||
	    (present && (dlen != vlen || memcmp(d, val, vlen) != 0))) {
		snprintf(v->msg, v->len,
		         "row of type 0x%02x (%zu key bytes): cached %s "
		         "(%zu bytes), RocksDB %s (%zu bytes)",
		         klen > 4 ? key[4] : 0, klen,
		         present ? "present" : "absent", vlen,
		         d != NULL ? "present" : "absent", dlen);
		rv = -1;
	}
	if (d != NULL) {
		rocksdb_free(d);
	}
	return rv;
}

int store_row_cache_verify(struct store *s, char *msg, size_t len)
{
	struct verify v = {s, msg, len};

	if (len > 0) {
		msg[0] = '\0';
	}
	if (s->rows == NULL) {
		return 0;
	}
	/* Compared with RocksDB: the KV rows must be there first. */
	if (drain_or_say(s, msg, len, "") != 0) {
		return -1;
	}
	return rowcache_walk(s->rows, verify_row, &v) != 0 ? -1 : 0;
}

void store_row_cache_stats(const struct store *s, struct rowcache_stats *st)
{
	memset(st, 0, sizeof *st);
	if (s->rows != NULL) {
		rowcache_stats(s->rows, st);
	}
}

void store_writer_stats(struct store *s, struct dwrite_stats *st)
{
	dwrite_stats(s->dw, st);
}

void store_close(struct store *s)
{
	if (s == NULL) {
		return;
	}
	/* The writer first writes what it holds, the KV rows last: the
	 * state it leaves is what apply made. */
	pthread_mutex_lock(&s->kv_mu);
	(void)kv_checkpoint(s, 0, NULL, NULL, false, false);
	pthread_mutex_unlock(&s->kv_mu);
	dwrite_stop(s->dw);
	kv_reap(s);
	kvdirty_clear(&s->kv_dirty);
	pthread_mutex_destroy(&s->kv_mu);
	rowcache_destroy(s->rows);
	free(s->applied);
	free(s->hashes);
	free(s->kv_hashes);
	free(s->kv_offs);
	sbuf_free(&s->tx_pend);
	free(s->tx_pslots);
	ordrows_fini(&s->ob);
	rocksdb_writebatch_wi_destroy(s->wb);
	rocksdb_writeoptions_destroy(s->wo);
	rocksdb_readoptions_destroy(s->ro);
	free(s);
}

const char *store_last_error(const struct store *s)
{
	return s->err;
}

const char *store_export_error(const struct store *s)
{
	return s->export_err;
}

const char *store_sync_error(const struct store *s)
{
	return s->sync_err;
}

static void group_state_key(struct sbuf *k, uint32_t group)
{
	key_start(k, group, K_GROUP);
}

/* The group's slot in the applied table, grown on demand; NULL for group
 * ids too large to keep in a flat table (those read RocksDB). */
static struct applied_slot *applied_slot(struct store *s, uint32_t group)
{
	if (group >= (1u << 20)) {
		return NULL;
	}
	if (group >= s->napplied) {
		size_t n = s->napplied ? s->napplied : 64;
		while (n <= group) {
			n *= 2;
		}
		s->applied = store_xrealloc(s->applied, n * sizeof *s->applied);
		memset(s->applied + s->napplied, 0,
		       (n - s->napplied) * sizeof *s->applied);
		s->napplied = n;
	}
	return &s->applied[group];
}

/* Records the group's applied index in the table. */
static void applied_note(struct store *s, uint32_t group, uint64_t index)
{
	struct applied_slot *slot = applied_slot(s, group);

	if (slot != NULL) {
		slot->index = index;
		slot->known = true;
	}
}

int store_applied_index(struct store *s, uint32_t group, uint64_t *index)
{
	struct applied_slot *slot = applied_slot(s, group);
	struct tx tx;
	struct sbuf k;
	struct val v;
	int rv;

	if (slot != NULL && slot->known) {
		*index = slot->index;
		return 0;
	}

	sbuf_init(&k);
	group_state_key(&k, group);
	tx_init(&tx, s, group, 0, 0, false);
	rv = tx_get(&tx, &k, &v);
	*index = 0;
	if (rv == 1) {
		uint32_t version =
		    v.len >= 20 ? be_get32((const uint8_t *)v.p + 16) : 0;
		if (v.len < 8) {
			rv = tx_fail(&tx, "corrupt group state", NULL);
		} else if (version != STORE_FORMAT_VERSION) {
			/* Another layout's data would be misread, not just
			 * refused later: say so before anything is served. */
			char what[160];
			snprintf(
			    what, sizeof what,
			    "the state was written in storage format %u, "
			    "this lodestone reads format %u (start from an "
			    "empty data directory; docs/storage.md)",
			    (unsigned)version, (unsigned)STORE_FORMAT_VERSION);
			rv = tx_fail(&tx, what, NULL);
		} else {
			*index = be_get64((const uint8_t *)v.p);
			rv = 0;
		}
	}
	if (rv >= 0) {
		applied_note(s, group, *index);
	}
	val_free(&v);
	tx_fini(&tx);
	sbuf_free(&k);
	return rv < 0 ? -1 : 0;
}

/* An extension's command (ext_cmd) as a store_cmd: the op, and the whole
 * encoding in `value` (borrowed). */
static void ext_wrap(const uint8_t *p, size_t len, struct store_cmd *c)
{
	memset(c, 0, sizeof *c);
	c->op = p[1];
	c->value.p = p;
	c->value.len = len;
}

static int dispatch_ext(struct tx *tx, const struct store_cmd *c,
                        struct sbuf *res)
{
	const struct store_ext *x = ext_find(tx->s, c->op);
	int rv;

	if (x == NULL) {
		res_error(res, STORE_BAD_COMMAND, "ERR unknown store op");
		return 0;
	}
	if (tx->group == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR data commands do not belong to the meta group");
		return 0;
	}
	rv = x->apply(x->data, tx, c->value.p, c->value.len, res);
	if (rv < 0) {
		return -1;
	}
	if (res->len == 0) {
		res_error(res, STORE_ERR, "ERR extension wrote no result");
		rv = 0;
	}
	return rv == STORE_EXT_KEEP && tx->write ? STORE_EXT_KEEP : 0;
}

static int dispatch(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	bool meta = store_op_is_meta(c->op);

	if (c->op >= STORE_OP_EXT_FIRST && c->op <= STORE_OP_EXT_LAST) {
		return dispatch_ext(tx, c, res);
	}

	if (meta && tx->group != 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR scope commands belong to the meta group");
		return 0;
	}
	if (!meta && tx->group == 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR data commands do not belong to the meta group");
		return 0;
	}
	switch (c->op) {
	case STORE_OP_SCOPE_REGISTER:
	case STORE_OP_SCOPE_DELETE:
	case STORE_OP_SCOPE_DESCRIBE:
	case STORE_OP_SCOPE_LIST:
	case STORE_OP_NODE_SET:
	case STORE_OP_NODE_LIST:
	case STORE_OP_NODE_JOIN:
	case STORE_OP_NODE_STATE:
	case STORE_OP_NODE_VOTER:
	case STORE_OP_CONF_INIT:
	case STORE_OP_CONF_GET:
	case STORE_OP_ACL_SETUSER:
	case STORE_OP_ACL_DELUSER:
	case STORE_OP_ACL_LIST:
	case STORE_OP_ACL_APPLY:
		return meta_apply(tx, c, res);
	case STORE_OP_STREAM_APPEND:
	case STORE_OP_STREAM_APPEND_IDEM:
	case STORE_OP_PRODUCER_INIT:
	case STORE_OP_STREAM_TRIM:
	case STORE_OP_STREAM_DROP:
	case STORE_OP_STREAM_READ:
	case STORE_OP_STREAM_INFO:
		return stream_apply(tx, c, res);
	case STORE_OP_CG_POLL:
	case STORE_OP_CG_ACK:
	case STORE_OP_CG_NACK:
	case STORE_OP_CG_DISCARD:
	case STORE_OP_CG_REDRIVE:
	case STORE_OP_CG_DEAD_LETTERS:
	case STORE_OP_CG_INFO:
		return cgroup_apply(tx, c, res);
	case STORE_OP_CACHE_PUT:
	case STORE_OP_CACHE_DELETE:
	case STORE_OP_CACHE_GET:
	case STORE_OP_CACHE_COMPACT:
	case STORE_OP_CACHE_LOG_READ:
	case STORE_OP_CACHE_SCAN:
	case STORE_OP_CACHE_INFO:
	case STORE_OP_CACHE_DROP:
		return cache_apply(tx, c, res);
	case STORE_OP_COUNTER_ADD:
	case STORE_OP_COUNTER_GET:
		return counter_apply(tx, c, res);
	case STORE_OP_KV_GET:
	case STORE_OP_KV_SET:
	case STORE_OP_KV_DEL:
	case STORE_OP_KV_MGET:
	case STORE_OP_KV_MSET:
	case STORE_OP_KV_CAS:
	case STORE_OP_KV_LOCK:
	case STORE_OP_KV_UNLOCK:
	case STORE_OP_KV_EXTEND:
	case STORE_OP_KV_RATELIMIT:
	case STORE_OP_KV_FOC:
	case STORE_OP_KV_FOC_RESULT:
	case STORE_OP_KV_FOC_ERROR:
		return kv_apply(tx, c, res);
	case STORE_OP_KV_INCRBY:
	case STORE_OP_KV_EXISTS:
	case STORE_OP_KV_KEYINFO:
	case STORE_OP_KV_LEN:
	case STORE_OP_KV_MSETNX:
	case STORE_OP_KV_EXPIRE_SET:
	case STORE_OP_KV_APPEND:
	case STORE_OP_KV_STRLEN:
	case STORE_OP_KV_GETRANGE:
	case STORE_OP_KV_INCRBYFLOAT:
	case STORE_OP_KV_SETRANGE:
	case STORE_OP_KV_GETEX:
	case STORE_OP_KV_GETDEL:
		return kvkey_apply(tx, c, res);
	case STORE_OP_EXPIRE:
		return expire_apply(tx, c, res);
	case STORE_OP_KV_EXPIRE_OPT:
	case STORE_OP_KV_RENAME:
	case STORE_OP_KV_KEYCOUNT:
	case STORE_OP_KV_SCAN:
		return kvspace_apply(tx, c, res);
	case STORE_OP_KV_MULTI:
	case STORE_OP_KV_WATCH:
		return kvmulti_apply(tx, c, res);
	default:
		return kvcoll_apply(tx, c, res);
	}
}

/* Batches from this size go to the writer as they are. */
#define STORE_HANDOVER_BYTES (64u << 10)

/* Whether a range deletion of the entry could cover write-back rows (KV
 * keys and counts, Flow rows; none does today: they trim stream
 * records). */
static bool ranges_cover_kv(const struct tx *tx)
{
	struct rd r;

	rd_init(&r, tx->ranges.p, tx->ranges.len);
	for (size_t i = 0; i < tx->nranges; i++) {
		size_t bl, el;
		const uint8_t *bp = rd_lbytes(&r, &bl);
		const uint8_t *ep = rd_lbytes(&r, &el);

		if (bl < 5 || el < 5 || memcmp(bp, ep, 4) != 0 ||
		    (bp[4] <= K_FLOW_AUTOFLOOR && ep[4] >= K_KV)) {
			return true;
		}
	}
	return false;
}

/* Hands the entry's batch (the WriteBatchWithIndex's records, then range
 * deletions) to the data writer, and its KV rows to the write-back table.
 * Under kv_mu, so that a checkpoint queued from any thread lands between
 * two entries. */
static int commit(struct tx *tx)
{
	struct store *s = tx->s;
	bool kv_in_batch = tx->nranges > 0 && ranges_cover_kv(tx);
	size_t size, n = tx_pend_hashes(tx, kv_in_batch, &s->hashes, &s->hcap);
	const char *data;
	rocksdb_writebatch_t *b;
	struct rd r;
	int rv = 0;

	pthread_mutex_lock(&s->kv_mu);
	if (kv_in_batch) {
		/* Earlier KV rows first, then this entry's in its batch,
		 * before its range deletions (as they applied). */
		(void)kv_checkpoint(s, 0, NULL, NULL, false, true);
	} else if (tx_has_split(tx)) {
		tx_split_dirty(tx, &s->kv_dirty);
	}
	data = rocksdb_writebatch_wi_data(s->wb, &size);
	if (tx->nranges == 0 && size >= STORE_HANDOVER_BYTES) {
		/* The batch goes as it is (stream appends: no copy of the
		 * payloads); the next entry is built in a spare. */
		rocksdb_writebatch_wi_t *wi = s->wb;
		s->wb = dwrite_take_wi(s->dw);
		if (s->wb == NULL) {
			s->wb = rocksdb_writebatch_wi_create(1 << 16, 1);
		}
		if (dwrite_submit_wi(s->dw, wi, s->hashes, n) != 0) {
			rv = tx_fail(tx, "write failed", dwrite_error(s->dw));
		}
		goto out;
	}
	if (tx->nranges == 0 && !kv_in_batch &&
	    rocksdb_writebatch_wi_count(s->wb) == 0) {
		/* Nothing for RocksDB (an entry of KV strings: its rows and
		 * the group's state row wait in the write-back table). */
		goto out;
	}
	/* Small batches are copied: cheaper than a fresh
	 * WriteBatchWithIndex per entry while the writer holds the
	 * spares. */
	b = rocksdb_writebatch_create_from(data, size);
	if (kv_in_batch) {
		(void)tx_split_append(tx, b);
	}
	rd_init(&r, tx->ranges.p, tx->ranges.len);
	for (size_t i = 0; i < tx->nranges; i++) {
		size_t bl, el;
		const uint8_t *bp = rd_lbytes(&r, &bl);
		const uint8_t *ep = rd_lbytes(&r, &el);
		rocksdb_writebatch_delete_range_cf(b, s->cf, (const char *)bp,
		                                   bl, (const char *)ep, el);
	}
	if (dwrite_submit(s->dw, b, s->hashes, n) != 0) {
		rv = tx_fail(tx, "write failed", dwrite_error(s->dw));
	}
out:
	if (rv == 0) {
		/* The memtable is due for a flush: only here can its cut
		 * hold the KV rows of exactly the entries it holds. */
		if (dwrite_want_flush(s->dw) && !s->kv_flush_queued) {
			(void)kv_checkpoint(s, DWRITE_FLUSH, NULL, NULL, false,
			                    true);
		} else if (s->kv_dirty.bytes >= STORE_KV_DIRTY_MAX ||
		           s->ob.bytes >= STORE_OB_MAX) {
			(void)kv_checkpoint(s, 0, NULL, NULL, false, true);
		}
	}
	tx_ob_sync(s, NULL);
	if (s->kv_flight != NULL) {
		kv_reap(s);
	}
	pthread_mutex_unlock(&s->kv_mu);
	return rv;
}

/* Runs one decoded command with a save point: an error result leaves no
 * write behind (unless an extension says its writes stand). */
int store_run_cmd(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store *s = tx->s;
	int before = rocksdb_writebatch_wi_count(s->wb);
	size_t ranges_len = tx->ranges.len, nranges = tx->nranges;
	size_t pend = tx_pend_mark(tx);
	char *err = NULL;
	int rv;

	rocksdb_writebatch_wi_set_save_point(s->wb);
	rv = dispatch(tx, c, res);
	if (rv < 0) {
		return -1;
	}
	if (res_status(res) == STORE_OK || rv == STORE_EXT_KEEP) {
		tx_recs_commit_cmd(tx);
		return 0;
	}
	tx_recs_rollback(tx);
	tx_pend_rollback(tx, pend);
	tx->ranges.len = ranges_len;
	tx->nranges = nranges;
	if (rocksdb_writebatch_wi_count(s->wb) != before) {
		rocksdb_writebatch_wi_rollback_to_save_point(s->wb, &err);
		if (err != NULL) {
			tx_fail(tx, "rollback failed", err);
			rocksdb_free(err);
			return -1;
		}
	}
	return 0;
}

void store_set_observer(struct store *s, const struct store_observer *o)
{
	if (o == NULL) {
		memset(&s->observer, 0, sizeof s->observer);
	} else {
		s->observer = *o;
	}
}

/* Reads up to two leading u64 or nil items of an OK array result. */
static int result_pair(const struct fsm_result *r, bool nil_ok,
                       struct store_value v[3])
{
	struct store_result res;
	struct store_value a;

	if (r->len == 0 || store_result_open(r->data, r->len, &res) != 0 ||
	    res.status != STORE_OK || !store_result_next(&res, &a) ||
	    a.tag != STORE_T_ARRAY || a.n < 2) {
		return -1;
	}
	for (unsigned i = 0; i < 2 || (i < 3 && i < a.n); i++) {
		if (!store_result_next(&res, &v[i])) {
			return -1;
		}
		if (v[i].tag == STORE_T_NIL && !nil_ok) {
			return -1;
		}
	}
	return 0;
}

void store_set_acl_observer(struct store *s, store_acl_change_cb cb, void *data)
{
	s->acl_observer = cb;
	s->acl_observer_data = data;
}

/* An ACL_APPLY's user as it left it: the rules are its result's second
 * item ([created, rules]). */
static void notify_acl_apply(struct store *s, struct store_slice name,
                             const struct fsm_result *res)
{
	struct store_result r;
	struct store_value v;
	struct store_slice rules;

	if (store_result_open(res->data, res->len, &r) != 0 ||
	    !store_result_next(&r, &v) || v.tag != STORE_T_ARRAY ||
	    !store_result_next(&r, &v) || !store_result_next(&r, &v) ||
	    v.tag != STORE_T_BYTES) {
		return;
	}
	rules.p = v.p;
	rules.len = v.len;
	s->acl_observer(s->acl_observer_data, name, &rules);
}

/* Tells the ACL observer which users the entry's commands changed. */
static void notify_acl(struct store *s, const struct fsm_entry *e,
                       const struct fsm_result *results)
{
	for (unsigned i = 0; i < e->n_cmds; i++) {
		struct store_cmd c;
		const char *msg;
		uint8_t op = e->cmds[i].len >= 2 ? e->cmds[i].data[1] : 0;

		if ((op != STORE_OP_ACL_SETUSER && op != STORE_OP_ACL_DELUSER &&
		     op != STORE_OP_ACL_APPLY) ||
		    store_cmd_decode(e->cmds[i].data, e->cmds[i].len, &c,
		                     &msg) != 0) {
			continue;
		}
		/* i64: 1 created / deleted, 0 replaced / absent */
		if (results[i].len < 3 || results[i].data[1] != STORE_OK) {
			continue;
		}
		if (op == STORE_OP_ACL_SETUSER) {
			s->acl_observer(s->acl_observer_data, c.key, &c.value);
		} else if (op == STORE_OP_ACL_APPLY) {
			notify_acl_apply(s, c.key, &results[i]);
		} else if (results[i].len >= 11 &&
		           results[i].data[2] == STORE_T_I64 &&
		           results[i].data[10] == 1) {
			s->acl_observer(s->acl_observer_data, c.key, NULL);
		}
	}
}

/* Tells the observer what the entry's commands appended, from each command
 * and its result (the entry is written: nothing here can fail it). */
static void notify(struct store *s, const struct fsm_entry *e,
                   const struct fsm_result *results)
{
	const struct store_observer *o = &s->observer;

	for (unsigned i = 0; i < e->n_cmds; i++) {
		struct store_cmd c;
		struct store_value v[3];
		const char *msg;

		if (e->cmds[i].len < 2) {
			continue;
		}
		switch (e->cmds[i].data[1]) {
		case STORE_OP_STREAM_APPEND:
		case STORE_OP_STREAM_APPEND_IDEM:
			if (o->stream_append == NULL) {
				continue;
			}
			break;
		case STORE_OP_CACHE_PUT:
		case STORE_OP_CACHE_DELETE:
			if (o->cache_change == NULL) {
				continue;
			}
			break;
		default:
			continue;
		}
		if (store_cmd_decode(e->cmds[i].data, e->cmds[i].len, &c,
		                     &msg) != 0) {
			continue;
		}
		memset(v, 0, sizeof(struct store_value) * 3);
		switch (c.op) {
		case STORE_OP_STREAM_APPEND:
		case STORE_OP_STREAM_APPEND_IDEM:
			/* [base, count] or [base, count, duplicate] */
			if (result_pair(&results[i], false, v) != 0 ||
			    v[0].tag != STORE_T_U64 ||
			    v[2].tag == STORE_T_TRUE || c.items.n == 0) {
				continue;
			}
			o->stream_append(o->data, e->group, c.scope, c.shard,
			                 v[0].u, &c.items);
			break;
		case STORE_OP_CACHE_PUT:
			/* [offset, expires_at] */
			if (result_pair(&results[i], false, v) != 0 ||
			    v[0].tag != STORE_T_U64 ||
			    v[1].tag != STORE_T_U64) {
				continue;
			}
			o->cache_change(o->data, e->group, c.scope, c.shard,
			                v[0].u, c.key, &c.value, v[1].u);
			break;
		default:
			/* [removed | nil, offset | nil]: nil offset = absent */
			if (result_pair(&results[i], true, v) != 0 ||
			    v[1].tag != STORE_T_U64) {
				continue;
			}
			o->cache_change(o->data, e->group, c.scope, c.shard,
			                v[1].u, c.key, NULL, 0);
			break;
		}
	}
}

/* Decodes command i of `e`; prefetches the row of a SET. */
static int decode_ahead(struct store *s, const struct fsm_entry *e, unsigned i,
                        struct store_cmd *c, const char **msg)
{
	int rv;

	if (ext_cmd(e->cmds[i].data, e->cmds[i].len)) {
		ext_wrap(e->cmds[i].data, e->cmds[i].len, c);
		return 0;
	}
	rv = store_cmd_decode(e->cmds[i].data, e->cmds[i].len, c, msg);
	if (rv == 0 && c->op == STORE_OP_KV_SET) {
		store_kv_prefetch(s, e->group, c->key);
	}
	return rv;
}

int store_apply(struct store *s, const struct fsm_entry *e,
                struct fsm_result *results)
{
	struct store_cmd next;
	const char *next_msg = NULL;
	int next_rv;
	struct tx tx;
	struct sbuf res, k, v;
	uint8_t kb[8], vb[20];
	uint64_t applied;
	unsigned i;

	if (store_applied_index(s, e->group, &applied) != 0) {
		return -1;
	}
	if (e->index <= applied) {
		return 0; /* replay: nothing changes, empty results */
	}
	rocksdb_writebatch_wi_clear(s->wb);
	tx_init(&tx, s, e->group, e->index, e->now_ms, true);
	sbuf_init(&res);
	/* Each command is decoded one step ahead: a SET's KV row then starts
	 * loading into the CPU cache while the command before it runs (its
	 * first touch of the row cache slot was a cache miss). */
	next_rv = e->n_cmds > 0 ? decode_ahead(s, e, 0, &next, &next_msg) : 0;
	for (i = 0; i < e->n_cmds; i++) {
		struct store_cmd c = next;
		const char *msg = next_msg;
		int rv = next_rv;

		if (i + 1 < e->n_cmds) {
			next_rv = decode_ahead(s, e, i + 1, &next, &next_msg);
		}
		if (rv != 0) {
			char text[128];
			snprintf(text, sizeof text, "ERR %s", msg);
			sbuf_reset(&res);
			res_error(&res, STORE_BAD_COMMAND, text);
		} else if (store_run_cmd(&tx, &c, &res) != 0) {
			goto err;
		}
		results[i].data = sbuf_take(&res, &results[i].len);
	}
	tx_recs_flush(&tx);
	/* On the stack: 5 and 20 bytes, never grown. */
	k = (struct sbuf){kb, 0, sizeof kb};
	v = (struct sbuf){vb, 0, sizeof vb};
	group_state_key(&k, e->group);
	sbuf_u64(&v, e->index);
	sbuf_u64(&v, e->term);
	sbuf_u32(&v, STORE_FORMAT_VERSION);
	tx_put(&tx, &k, v.p, v.len);
	if (commit(&tx) != 0) {
		goto err;
	}
	applied_note(s, e->group, e->index);
	tx_pend_publish(&tx);
	rocksdb_writebatch_wi_clear(s->wb);
	tx_fini(&tx);
	notify(s, e, results);
	if (e->group == 0 && s->acl_observer != NULL) {
		notify_acl(s, e, results);
	}
	return 0;

err:
	sbuf_free(&res);
	for (unsigned j = 0; j < i && j < e->n_cmds; j++) {
		free(results[j].data);
		results[j].data = NULL;
		results[j].len = 0;
	}
	rocksdb_writebatch_wi_clear(s->wb);
	tx_fini(&tx);
	return -1;
}

int store_read(struct store *s, uint32_t group, uint64_t now_ms,
               const uint8_t *cmd, size_t len, struct fsm_result *out)
{
	struct store_cmd c;
	struct sbuf res;
	struct tx tx;
	const char *msg;
	bool ext_read = false;
	int rv = 0;

	sbuf_init(&res);
	out->data = NULL;
	out->len = 0;
	if (ext_cmd(cmd, len)) {
		const struct store_ext *x = ext_find(s, cmd[1]);
		ext_wrap(cmd, len, &c);
		ext_read = x != NULL && x->is_read != NULL && x->is_read(c.op);
	}
	if (!ext_cmd(cmd, len) && store_cmd_decode(cmd, len, &c, &msg) != 0) {
		char text[128];
		snprintf(text, sizeof text, "ERR %s", msg);
		res_error(&res, STORE_BAD_COMMAND, text);
	} else if (!ext_read && !store_op_is_read(c.op)) {
		res_error(&res, STORE_BAD_COMMAND,
		          "ERR not a read command: propose it");
	} else {
		tx_init(&tx, s, group, 0, now_ms, false);
		rv = dispatch(&tx, &c, &res) < 0 ? -1 : 0;
		tx_fini(&tx);
	}
	if (rv != 0) {
		sbuf_free(&res);
		return -1;
	}
	out->data = sbuf_take(&res, &out->len);
	return 0;
}

int store_sync(struct store *s)
{
	struct kv_ckpt *ck;
	uint64_t imm = 0, bg = 0;
	int rv;

	/* The flush must hold every entry applied before the snapshot that
	 * asked for it, KV rows included: the writer checkpoints them and
	 * switches the memtable at that point. A flush asked for here would
	 * switch it wherever the writer is, without the rows since. */
	rv = kv_checkpoint_wait(s, DWRITE_FLUSH, NULL, NULL, &ck);
	kv_release(s, ck);
	if (rv != 0) {
		snprintf(s->sync_err, sizeof s->sync_err, "%s",
		         dwrite_error(s->dw));
		return -1;
	}
	/* Then wait for RocksDB's flush of the switched memtables. */
	for (;;) {
		struct timespec ts = {0, 1000000};

		if (rocksdb_property_int_cf(
		        s->db, s->cf, "rocksdb.background-errors", &bg) == 0 &&
		    bg > 0) {
			snprintf(s->sync_err, sizeof s->sync_err,
			         "flush of the state failed (RocksDB reports "
			         "%llu background errors; see its LOG)",
			         (unsigned long long)bg);
			return -1;
		}
		if (rocksdb_property_int_cf(s->db, s->cf,
		                            "rocksdb.num-immutable-mem-table",
		                            &imm) != 0) {
			snprintf(s->sync_err, sizeof s->sync_err,
			         "flush of the state: cannot read RocksDB's "
			         "memtable count");
			return -1;
		}
		if (imm == 0) {
			return 0;
		}
		nanosleep(&ts, NULL);
	}
}

/* [group] and [group][0xFF]: every key of the group lies between (type
 * bytes are below 0xFF). */
static void group_bounds(uint32_t group, uint8_t begin[5], uint8_t end[5])
{
	be_put32(begin, group);
	begin[4] = 0;
	be_put32(end, group);
	end[4] = 0xFF;
}

static int export_err(struct store *s, const char *what, char *err)
{
	snprintf(s->export_err, sizeof s->export_err, "export: %s: %s", what,
	         err ? err : "");
	if (err != NULL) {
		rocksdb_free(err);
	}
	return -1;
}

int store_export(struct store *s, uint32_t group, const char *dir,
                 uint64_t *applied_index)
{
	uint8_t begin[5], end[5];
	const rocksdb_snapshot_t *snap;
	struct kv_ckpt *ck;
	rocksdb_readoptions_t *ro;
	rocksdb_envoptions_t *env;
	rocksdb_options_t *opts;
	rocksdb_sstfilewriter_t *w = NULL;
	rocksdb_iterator_t *it;
	char *err = NULL;
	int files = 0, rv = 0;

	*applied_index = 0;
	/* A snapshot taken by the writer after a checkpoint: every entry
	 * applied so far, KV rows included, and nothing of later ones. */
	if (kv_checkpoint_wait(s, DWRITE_SNAPSHOT, NULL, NULL, &ck) != 0) {
		kv_release(s, ck);
		snprintf(s->export_err, sizeof s->export_err, "export: %s",
		         dwrite_error(s->dw));
		return -1;
	}
	snap = ck->req.snap;
	kv_release(s, ck);
	ro = rocksdb_readoptions_create();
	env = rocksdb_envoptions_create();
	opts = rocksdb_options_create();
	group_bounds(group, begin, end);
	rocksdb_readoptions_set_snapshot(ro, snap);
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)end, 5);
	it = rocksdb_create_iterator_cf(s->db, ro, s->cf);
	for (rocksdb_iter_seek(it, (const char *)begin, 4);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *kp = rocksdb_iter_key(it, &kl);
		const char *vp = rocksdb_iter_value(it, &vl);
		uint64_t size = 0;

		if (w != NULL) {
			rocksdb_sstfilewriter_file_size(w, &size);
		}
		if (w == NULL || size >= EXPORT_FILE_BYTES) {
			char path[4096];
			if (w != NULL) {
				rocksdb_sstfilewriter_finish(w, &err);
				rocksdb_sstfilewriter_destroy(w);
				w = NULL;
				if (err != NULL) {
					rv = export_err(s, "finish", err);
					goto out;
				}
			}
			snprintf(path, sizeof path, "%s/group-%u-%06d.sst", dir,
			         (unsigned)group, files++);
			w = rocksdb_sstfilewriter_create(env, opts);
			rocksdb_sstfilewriter_open(w, path, &err);
			if (err != NULL) {
				rv = export_err(s, path, err);
				goto out;
			}
		}
		if (kl == 5 && (uint8_t)kp[4] == K_GROUP && vl >= 8) {
			*applied_index = be_get64((const uint8_t *)vp);
		}
		rocksdb_sstfilewriter_put(w, kp, kl, vp, vl, &err);
		if (err != NULL) {
			rv = export_err(s, "put", err);
			goto out;
		}
	}
	rocksdb_iter_get_error(it, &err);
	if (err != NULL) {
		rv = export_err(s, "iterate", err);
		goto out;
	}
	if (w != NULL) {
		rocksdb_sstfilewriter_finish(w, &err);
		if (err != NULL) {
			rv = export_err(s, "finish", err);
		}
	}
out:
	if (w != NULL) {
		rocksdb_sstfilewriter_destroy(w);
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	rocksdb_release_snapshot(s->db, snap);
	rocksdb_envoptions_destroy(env);
	rocksdb_options_destroy(opts);
	return rv;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct import_job {
	struct store *s;
	const uint8_t *begin, *end; /* the group's bounds, 4 and 5 bytes */
	char **files;
	size_t n;
	char err[256]; /* the writer's message, read once the job is done */
};

/* Writer thread: replaces the group's range by the ingested files. The
 * old state goes first, durably: ingested files then take newer sequence
 * numbers than the range deletion. */
static int import_job(void *arg)
{
	struct import_job *j = arg;
	struct store *s = j->s;
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char *err = NULL;

	rocksdb_writeoptions_set_sync(wo, 1);
	rocksdb_delete_range_cf(s->db, wo, s->cf, (const char *)j->begin, 4,
	                        (const char *)j->end, 5, &err);
	rocksdb_writeoptions_destroy(wo);
	if (err != NULL) {
		snprintf(j->err, sizeof j->err, "import: delete range: %s",
		         err);
		rocksdb_free(err);
		return -1;
	}
	if (j->n > 0) {
		rocksdb_ingestexternalfileoptions_t *io =
		    rocksdb_ingestexternalfileoptions_create();
		rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
		rocksdb_ingest_external_file_cf(s->db, s->cf,
		                                (const char *const *)j->files,
		                                j->n, io, &err);
		rocksdb_ingestexternalfileoptions_destroy(io);
		if (err != NULL) {
			snprintf(j->err, sizeof j->err, "import: ingest: %s",
			         err);
			rocksdb_free(err);
			return -1;
		}
	}
	return 0;
}

int store_import(struct store *s, uint32_t group, const char *dir,
                 uint64_t *applied_index)
{
	uint8_t begin[5], end[5];
	char prefix[32];
	char **files = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;
	struct import_job job;
	struct kv_ckpt *ck;
	int rv = 0;

	*applied_index = 0;
	memset(&job, 0, sizeof job);
	snprintf(prefix, sizeof prefix, "group-%u-", (unsigned)group);
	if (dir == NULL) {
		goto replace; /* store_drop: no files */
	}
	d = opendir(dir);
	if (d == NULL) {
		snprintf(s->err, sizeof s->err, "import: cannot open %s", dir);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (l < 4 || strcmp(de->d_name + l - 4, ".sst") != 0) {
			continue;
		}
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0) {
			snprintf(s->err, sizeof s->err,
			         "import: %s is not an export of group %u",
			         de->d_name, (unsigned)group);
			closedir(d);
			rv = -1;
			goto out;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			files = store_xrealloc(files, cap * sizeof *files);
		}
		files[n] = store_xmalloc(strlen(dir) + l + 2);
		sprintf(files[n], "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	if (n > 1) {
		qsort(files, n, sizeof *files, cmp_str);
	}
replace:

	if (group < s->napplied) {
		s->applied[group].known = false;
	}
	group_bounds(group, begin, end);
	if (s->rows != NULL) {
		rowcache_drop_range(s->rows, begin, 4, end, 5);
	}
	/* On the writer, after every batch and KV row applied so far (the
	 * group's own pending KV rows are dropped: they belong to the state
	 * being replaced), so the memtable switch an ingest makes holds a
	 * consistent state of every other group. */
	job.s = s;
	job.begin = begin;
	job.end = end;
	job.files = files;
	job.n = n;
	pthread_mutex_lock(&s->kv_mu);
	kvdirty_drop_range(&s->kv_dirty, begin, 4, end, 5);
	ck = kv_checkpoint(s, 0, import_job, &job, true, false);
	pthread_mutex_unlock(&s->kv_mu);
	rv = dwrite_wait(s->dw, &ck->req);
	kv_release(s, ck);
	if (rv != 0) {
		if (job.err[0] == '\0') {
			snprintf(s->err, sizeof s->err, "import: %s",
			         dwrite_error(s->dw));
		} else {
			snprintf(s->err, sizeof s->err, "%s", job.err);
		}
		goto out;
	}
	rv = store_applied_index(s, group, applied_index);
	if (rv == 0 && s->observer.imported != NULL) {
		s->observer.imported(s->observer.data, group);
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(files[i]);
	}
	free(files);
	return rv;
}

int store_drop(struct store *s, uint32_t group)
{
	uint64_t applied;
	return store_import(s, group, NULL, &applied);
}

static int list_shards_type(struct store *s, uint32_t group, uint8_t type,
                            uint8_t kind, store_shard_cb cb, void *arg)
{
	struct tx tx;
	struct titer it;
	struct sbuf k;
	int rv = 0;

	sbuf_init(&k);
	tx_init(&tx, s, group, 0, 0, false);
	key_start(&k, group, type);
	titer_open(&it, &tx, &k);
	for (titer_seek(&it, NULL); titer_valid(&it); titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		struct rd r;
		struct store_slice scope;
		uint32_t shard;

		rd_init(&r, kp + 5, kl - 5);
		scope.len = rd_u16(&r);
		scope.p = rd_take(&r, scope.len);
		shard = rd_u32(&r);
		if (!rd_done(&r)) {
			continue;
		}
		rv = cb(arg, kind, scope, shard);
		if (rv != 0) {
			break;
		}
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	tx_fini(&tx);
	sbuf_free(&k);
	return rv;
}

int store_list_shards(struct store *s, uint32_t group, store_shard_cb cb,
                      void *arg)
{
	int rv =
	    list_shards_type(s, group, K_STREAM, STORE_SCOPE_STREAM, cb, arg);
	if (rv != 0) {
		return rv;
	}
	return list_shards_type(s, group, K_CACHE, STORE_SCOPE_CACHE, cb, arg);
}

static int fsm_apply(struct fsm *fsm, const struct fsm_entry *e,
                     struct fsm_result *results)
{
	return store_apply(fsm->data, e, results);
}

static int fsm_applied_index(struct fsm *fsm, uint32_t group, uint64_t *index)
{
	return store_applied_index(fsm->data, group, index);
}

static int fsm_sync(struct fsm *fsm, uint32_t group)
{
	return store_sync(fsm->data);
}

static int fsm_export(struct fsm *fsm, uint32_t group, const char *dir,
                      uint64_t *applied_index)
{
	return store_export(fsm->data, group, dir, applied_index);
}

static int fsm_import(struct fsm *fsm, uint32_t group, const char *dir,
                      uint64_t *applied_index)
{
	return store_import(fsm->data, group, dir, applied_index);
}

void store_fsm_init(struct fsm *fsm, struct store *s)
{
	fsm->data = s;
	fsm->apply = fsm_apply;
	fsm->applied_index = fsm_applied_index;
	fsm->sync = fsm_sync;
	fsm->export_state = fsm_export;
	fsm->import_state = fsm_import;
	fsm->leader_changed = NULL;
}

/* --- Sizes and compaction ------------------------------------------------ */

static void range_of_group(uint32_t group, char *lo, char *hi)
{
	for (int i = 0; i < 4; i++) {
		lo[i] = (char)(group >> (24 - 8 * i));
		hi[i] = (char)((group + 1) >> (24 - 8 * i));
	}
}

int store_group_size(struct store *s, uint32_t group, uint64_t *bytes)
{
	char lo[4], hi[4];
	const char *starts[1] = {lo}, *limits[1] = {hi};
	size_t slen[1] = {4}, llen[1] = {4};
	uint64_t size = 0;
	char *err = NULL;
	if (group == UINT32_MAX) {
		return -1;
	}
	range_of_group(group, lo, hi);
	rocksdb_approximate_sizes_cf(s->db, s->cf, 1, starts, slen, limits,
	                             llen, &size, &err);
	if (err != NULL) {
		snprintf(s->err, sizeof s->err, "approximate sizes: %s", err);
		rocksdb_free(err);
		return -1;
	}
	*bytes = size;
	return 0;
}

int store_request_compaction(struct store *s)
{
	/* Every key starts with a u32 group id: ["", FF FF FF FF FF) is
	 * the whole CF. */
	static const char limit[] = {'\xff', '\xff', '\xff', '\xff', '\xff'};
	char *err = NULL;
	rocksdb_suggest_compact_range_cf(s->db, s->cf, "", 0, limit,
	                                 sizeof limit, &err);
	if (err != NULL) {
		snprintf(s->err, sizeof s->err, "suggest compaction: %s", err);
		rocksdb_free(err);
		return -1;
	}
	return 0;
}
