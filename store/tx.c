/* Transactions: the read/write view one apply (or one read) has of the
 * data column family. Writes go to the store's WriteBatchWithIndex, so
 * later commands of the same entry read them back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

void tx_init(struct tx *tx, struct store *s, uint32_t group, uint64_t index,
             uint64_t now_ms, bool write)
{
	tx->s = s;
	tx->group = group;
	tx->index = index;
	tx->now_ms = now_ms;
	tx->write = write;
	tx->failed = false;
	sbuf_init(&tx->ranges);
	tx->nranges = 0;
	tx->recs = NULL;
	tx->nrecs = 0;
	tx->caprecs = 0;
	sbuf_init(&tx->journal);
	tx->cached = true;
	sbuf_init(&tx->pend);
	tx->npend = 0;
	tx->pslots = NULL;
	tx->pcap = 0;
	tx->nsplit = 0;
	if (write && s != NULL && s->tx_pslots != NULL) {
		/* The last write transaction's buffers (see tx_fini). */
		tx->pend = s->tx_pend;
		tx->pend.len = 0;
		tx->pslots = s->tx_pslots; /* all empty */
		tx->pcap = s->tx_pcap;
		sbuf_init(&s->tx_pend);
		s->tx_pslots = NULL;
		s->tx_pcap = 0;
	}
}

/* Bounds of what tx_fini keeps for the next write transaction. */
#define TX_SPARE_MAX_BYTES ((size_t)64 << 10)
#define TX_SPARE_MAX_SLOTS ((size_t)1024)

void tx_fini(struct tx *tx)
{
	for (size_t i = 0; i < tx->nrecs; i++) {
		sbuf_free(&tx->recs[i].key);
		sbuf_free(&tx->recs[i].val);
	}
	free(tx->recs);
	sbuf_free(&tx->journal);
	sbuf_free(&tx->ranges);
	if (tx->write && tx->s != NULL && tx->s->tx_pslots == NULL &&
	    tx->pslots != NULL && tx->pend.cap <= TX_SPARE_MAX_BYTES &&
	    tx->pcap <= TX_SPARE_MAX_SLOTS) {
		/* tx_pend_publish empties the slots; a transaction that
		 * failed before it leaves writes indexed. */
		if (tx->npend > 0) {
			memset(tx->pslots, 0, tx->pcap * sizeof *tx->pslots);
		}
		tx->s->tx_pend = tx->pend;
		tx->s->tx_pslots = tx->pslots;
		tx->s->tx_pcap = tx->pcap;
		return;
	}
	sbuf_free(&tx->pend);
	free(tx->pslots);
}

/* Rows the cache may hold: records whose readers look them up by key
 * (iterators over them still go to RocksDB, which the cache mirrors).
 * Stream records, change logs and indexes are scanned, not looked up. */
static bool row_cacheable(const uint8_t *k, size_t len)
{
	if (len < 5) {
		return false;
	}
	switch (k[4]) {
	case K_STREAM:
	case K_PROD:
	case K_CG:
	case K_CACHE:
	case K_CIDX:
	case K_COUNTER:
	case K_KV:
	case K_HASH:
	case K_SET:
	case K_ZMEMBER:
	case K_FOC:
	case K_FLOW_COUNT:  /* read by key at every Flow state change */
	case K_FLOW_ACOUNT: /* and at every attribute change */
	case K_FLOW:        /* records: read by key at every Flow command */
	case K_FLOW_FLOOR:  /* and at every write that makes a flow due */
		return true;
	default:
		return false;
	}
}

static bool use_cache(const struct tx *tx, const struct sbuf *key)
{
	return tx->cached && tx->s->rows != NULL &&
	       row_cacheable(key->p, key->len);
}

/* Rows an apply never iterates (KV keys: only their sub keys are
 * scanned; the group's state row, rewritten by every entry; the group's
 * KV key counts, rewritten by every entry that adds or removes a key):
 * their writes
 * skip the WriteBatchWithIndex, whose index costs a skiplist insert per
 * write, and read back from tx->pend instead. At commit each key's latest
 * write goes to the store's write-back table (tx_split_dirty), or, when a
 * range deletion of the entry could cover KV keys, joins the batch
 * (tx_split_append). The state row written back means no data writer
 * batch at all for an entry of KV strings only, and one row per group and
 * checkpoint in the memtable instead of one per entry (with writes spread
 * over many groups, an entry carries a SET or two). */
static bool row_split(const uint8_t *k, size_t len)
{
	return len >= 5 &&
	       (k[4] == K_KV || k[4] == K_GROUP || k[4] == K_KVCOUNT ||
	        (k[4] >= K_FLOW && k[4] <= K_FLOW_AUTOFLOOR));
}

/* Write-back rows that applies and reads also walk with iterators (Flow
 * records, due and query indexes, history, floors, counters: a Flow
 * cycle writes ~30 rows, most of them index rows that the next state
 * change deletes again): kept in key order in s->ob as well, which
 * iterators over them merge with RocksDB. Written back, a row that lives
 * between two checkpoints never reaches the memtable, and one rewritten
 * many times reaches it once (docs/storage.md "Flow rows: write-back, in
 * key order"). */
static bool row_ordered(const uint8_t *k, size_t len)
{
	return len >= 5 && k[4] >= K_FLOW && k[4] <= K_FLOW_AUTOFLOOR;
}

bool tx_row_ordered(const uint8_t *k, size_t len)
{
	return row_ordered(k, len);
}

/* Records a write of an ordered row in s->ob (v NULL: a deletion). */
static void ob_write(struct store *s, uint64_t h, const uint8_t *k, size_t kl,
                     const void *v, size_t vl, bool present)
{
	ordrows_put(&s->ob, h, k, kl, v, vl, present);
}

/* A write in tx->pend: u8 flags (PEND_PRESENT, PEND_FRESH) | the key's
 * rowcache_hash (8 bytes, host order: it never leaves the process) |
 * lbytes key | lbytes value. The hash is kept so that the lookups, the
 * write-back table and the cache need not compute it again. */
#define PEND_PRESENT 1u
/* The entry's first write of the key was tx_put_new's: the key was absent
 * (kvdirty_put's `fresh`). */
#define PEND_FRESH 2u

struct pend_rec {
	bool present;
	bool fresh;
	uint64_t h;
	const uint8_t *kp, *vp;
	size_t kl, vl;
};

/* Parses the write at `off`; returns the offset of the next one. */
static size_t pend_read(const struct tx *tx, size_t off, struct pend_rec *pr)
{
	struct rd r;

	uint8_t flags;

	rd_init(&r, tx->pend.p + off, tx->pend.len - off);
	flags = rd_u8(&r);
	pr->present = (flags & PEND_PRESENT) != 0;
	pr->fresh = (flags & PEND_FRESH) != 0;
	memcpy(&pr->h, rd_take(&r, sizeof pr->h), sizeof pr->h);
	pr->kp = rd_lbytes(&r, &pr->kl);
	pr->vp = rd_lbytes(&r, &pr->vl);
	return off + r.off;
}

static uint64_t pend_hash_at(const struct tx *tx, size_t off)
{
	uint64_t h;

	memcpy(&h, tx->pend.p + off + 1, sizeof h);
	return h;
}

/* The slot holding `key` (whose rowcache_hash is `h`), or the empty slot
 * ending its probe run. */
static size_t pend_slot(const struct tx *tx, const uint8_t *key, size_t len,
                        uint64_t h)
{
	size_t mask = tx->pcap - 1;
	size_t i = h & mask;

	while (tx->pslots[i] != 0) {
		size_t off = tx->pslots[i] - 1;

		if (pend_hash_at(tx, off) == h) {
			struct pend_rec pr;
			(void)pend_read(tx, off, &pr);
			if (pr.kl == len && memcmp(pr.kp, key, len) == 0) {
				break;
			}
		}
		i = (i + 1) & mask;
	}
	return i;
}

/* The offset of this entry's latest write of `key` in tx->pend, or -1. */
static long pend_find(const struct tx *tx, const uint8_t *key, size_t len,
                      uint64_t h)
{
	size_t i;

	if (tx->npend == 0) {
		return -1;
	}
	i = pend_slot(tx, key, len, h);
	return tx->pslots[i] != 0 ? (long)(tx->pslots[i] - 1) : -1;
}

/* Rebuilds the slots from tx->pend (after growth or a rollback). */
static void pend_reindex(struct tx *tx, size_t cap)
{
	size_t off = 0;

	free(tx->pslots);
	tx->pcap = cap;
	tx->pslots = store_xmalloc(cap * sizeof *tx->pslots);
	memset(tx->pslots, 0, cap * sizeof *tx->pslots);
	tx->npend = 0;
	tx->nsplit = 0;
	while (off < tx->pend.len) {
		struct pend_rec pr;
		size_t next = pend_read(tx, off, &pr);

		tx->pslots[pend_slot(tx, pr.kp, pr.kl, pr.h)] = off + 1;
		tx->npend++;
		if (row_split(pr.kp, pr.kl)) {
			tx->nsplit++;
		}
		off = next;
	}
}

static void pend_add(struct tx *tx, const struct sbuf *key, uint64_t h,
                     const void *v, size_t len, bool present, bool fresh)
{
	size_t off = tx->pend.len;
	long prev = pend_find(tx, key->p, key->len, h);

	if (prev >= 0) {
		/* The entry's first write of the key decides. */
		fresh = (tx->pend.p[prev] & PEND_FRESH) != 0;
	}
	sbuf_u8(&tx->pend,
	        (present ? PEND_PRESENT : 0) | (fresh ? PEND_FRESH : 0));
	sbuf_add(&tx->pend, &h, sizeof h);
	sbuf_lbytes(&tx->pend, key->p, key->len);
	sbuf_lbytes(&tx->pend, v, present ? len : 0);
	tx->npend++;
	if (row_split(key->p, key->len)) {
		tx->nsplit++;
	}
	if (tx->npend * 2 > tx->pcap) {
		/* Rebuild at twice the size: indexes this write too. */
		pend_reindex(tx, tx->pcap ? tx->pcap * 2 : 64);
	} else {
		tx->pslots[pend_slot(tx, key->p, key->len, h)] = off + 1;
	}
}

/* The latest write of each KV key of the entry, in pend order, into
 * s->kv_offs (with their hashes in s->kv_hashes); each one's table slot
 * in `d` prefetched when not NULL. Returns how many. */
static size_t split_latest(struct tx *tx, const struct kvdirty *d)
{
	struct store *s = tx->s;
	size_t n = 0;

	if (s->kv_cap < tx->nsplit) {
		s->kv_cap = tx->nsplit * 2;
		s->kv_hashes = store_xrealloc(s->kv_hashes,
		                              s->kv_cap * sizeof *s->kv_hashes);
		s->kv_offs =
		    store_xrealloc(s->kv_offs, s->kv_cap * sizeof *s->kv_offs);
	}
	for (size_t off = 0, next; off < tx->pend.len; off = next) {
		struct pend_rec pr;

		next = pend_read(tx, off, &pr);
		if (!row_split(pr.kp, pr.kl)) {
			continue;
		}
		if (tx->pslots[pend_slot(tx, pr.kp, pr.kl, pr.h)] != off + 1) {
			continue; /* written again later in the entry */
		}
		s->kv_hashes[n] = pr.h;
		s->kv_offs[n] = off;
		if (d != NULL) {
			kvdirty_prefetch(d, pr.h);
		}
		n++;
	}
	return n;
}

/* The write at `off` in tx->pend: whether present, its key and value. */
static bool pend_at(const struct tx *tx, size_t off, const uint8_t **kp,
                    size_t *kl, const uint8_t **vp, size_t *vl)
{
	struct pend_rec pr;

	(void)pend_read(tx, off, &pr);
	*kp = pr.kp;
	*kl = pr.kl;
	*vp = pr.vp;
	*vl = pr.vl;
	return pr.present;
}

size_t tx_split_append(struct tx *tx, rocksdb_writebatch_t *b)
{
	size_t n = split_latest(tx, NULL);

	for (size_t i = 0; i < n; i++) {
		size_t kl, vl;
		const uint8_t *kp, *vp;

		if (pend_at(tx, tx->s->kv_offs[i], &kp, &kl, &vp, &vl)) {
			rocksdb_writebatch_put_cf(b, tx->s->cf,
			                          (const char *)kp, kl,
			                          (const char *)vp, vl);
		} else {
			rocksdb_writebatch_delete_cf(b, tx->s->cf,
			                             (const char *)kp, kl);
		}
	}
	return n;
}

void tx_split_dirty(struct tx *tx, struct kvdirty *d)
{
	struct store *s = tx->s;
	/* Slots prefetched while listing, then the rows they hold, then the
	 * puts: the entry's cache misses overlap. */
	size_t n = split_latest(tx, d);

	for (size_t i = 0; i < n; i++) {
		kvdirty_prefetch_row(d, s->kv_hashes[i]);
	}
	for (size_t i = 0; i < n; i++) {
		struct pend_rec pr;

		(void)pend_read(tx, s->kv_offs[i], &pr);
		kvdirty_put(d, s->kv_hashes[i], pr.kp, pr.kl, pr.vp, pr.vl,
		            pr.present, pr.fresh);
	}
}

size_t tx_pend_hashes(struct tx *tx, bool with_split, uint64_t **buf,
                      size_t *cap)
{
	size_t n = 0;

	if (tx->npend > *cap) {
		*cap = tx->npend * 2;
		*buf = store_xrealloc(*buf, *cap * sizeof **buf);
	}
	for (size_t off = 0, next; off < tx->pend.len && n < tx->npend;
	     off = next) {
		struct pend_rec pr;

		next = pend_read(tx, off, &pr);
		if (!with_split && row_split(pr.kp, pr.kl)) {
			continue; /* in the write-back table, not the batch */
		}
		(*buf)[n++] = pr.h;
	}
	return n;
}

bool tx_has_split(const struct tx *tx)
{
	return tx->nsplit > 0;
}

size_t tx_pend_mark(struct tx *tx)
{
	return tx->pend.len;
}

static void ob_restore(struct tx *tx, const struct sbuf *key, uint64_t h);

void tx_pend_rollback(struct tx *tx, size_t mark)
{
	struct sbuf undone;
	struct rd r;

	if (tx->pend.len == mark) {
		return;
	}
	/* The ordered rows written since the mark, to put back in s->ob as
	 * they were before (a WriteBatchWithIndex's own rollback rebuilds
	 * its whole index). */
	sbuf_init(&undone);
	for (size_t off = mark, next; off < tx->pend.len; off = next) {
		struct pend_rec pr;

		next = pend_read(tx, off, &pr);
		if (row_ordered(pr.kp, pr.kl)) {
			sbuf_add(&undone, &pr.h, sizeof pr.h);
			sbuf_lbytes(&undone, pr.kp, pr.kl);
		}
	}
	tx->pend.len = mark;
	pend_reindex(tx, tx->pcap);
	rd_init(&r, undone.p, undone.len);
	while (rd_left(&r) > 0) {
		uint64_t h;
		size_t kl;
		struct sbuf k;

		memcpy(&h, rd_take(&r, sizeof h), sizeof h);
		k.p = (uint8_t *)rd_lbytes(&r, &kl);
		k.len = k.cap = kl;
		ob_restore(tx, &k, h);
	}
	sbuf_free(&undone);
}

void tx_pend_publish(struct tx *tx)
{
	struct rowcache *c = tx->s->rows;
	struct rd r;

	if (c == NULL) {
		return;
	}
	for (size_t off = 0, next; off < tx->pend.len; off = next) {
		struct pend_rec pr;

		next = pend_read(tx, off, &pr);
		if (row_cacheable(pr.kp, pr.kl)) { /* not the state row */
			rowcache_put_h(c, pr.h, pr.kp, pr.kl, pr.vp, pr.vl,
			               pr.present);
		}
	}
	/* Range deletions cover stream records only today; drop whatever
	 * cached rows they could cover all the same. */
	rd_init(&r, tx->ranges.p, tx->ranges.len);
	for (size_t i = 0; i < tx->nranges; i++) {
		size_t bl, el;
		const uint8_t *bp = rd_lbytes(&r, &bl);
		const uint8_t *ep = rd_lbytes(&r, &el);

		if (bl >= 5 && el >= 5 && memcmp(bp, ep, 5) == 0 &&
		    !row_cacheable(bp, bl)) {
			continue;
		}
		rowcache_drop_range(c, bp, bl, ep, el);
	}
	sbuf_reset(&tx->pend);
	tx->npend = 0;
	tx->nsplit = 0;
	if (tx->pslots != NULL) {
		memset(tx->pslots, 0, tx->pcap * sizeof *tx->pslots);
	}
}

static struct tx_rec *rec_find(struct tx *tx, const struct sbuf *key)
{
	for (size_t i = 0; i < tx->nrecs; i++) {
		struct tx_rec *r = &tx->recs[i];
		if (r->key.len == key->len &&
		    memcmp(r->key.p, key->p, key->len) == 0) {
			return r;
		}
	}
	return NULL;
}

/* Finds or loads the record. NULL on failure. */
static struct tx_rec *rec_load(struct tx *tx, const struct sbuf *key)
{
	struct tx_rec *r = rec_find(tx, key);
	struct val v;
	int found;

	if (r != NULL) {
		return r;
	}
	found = tx_get(tx, key, &v);
	if (found < 0) {
		return NULL;
	}
	if (tx->nrecs == tx->caprecs) {
		tx->caprecs = tx->caprecs ? tx->caprecs * 2 : 8;
		tx->recs =
		    store_xrealloc(tx->recs, tx->caprecs * sizeof *tx->recs);
	}
	r = &tx->recs[tx->nrecs++];
	sbuf_init(&r->key);
	sbuf_init(&r->val);
	sbuf_add(&r->key, key->p, key->len);
	sbuf_add(&r->val, v.p, v.len);
	r->present = found > 0;
	r->dirty = false;
	val_free(&v);
	return r;
}

int tx_get_rec(struct tx *tx, const struct sbuf *key, struct sbuf *out)
{
	struct tx_rec *r;

	sbuf_reset(out);
	if (!tx->write) {
		struct val v;
		int found = tx_get(tx, key, &v);
		if (found > 0) {
			sbuf_add(out, v.p, v.len);
		}
		val_free(&v);
		return found;
	}
	r = rec_load(tx, key);
	if (r == NULL) {
		return -1;
	}
	if (r->present) {
		sbuf_add(out, r->val.p, r->val.len);
	}
	return r->present ? 1 : 0;
}

void tx_put_rec(struct tx *tx, const struct sbuf *key, const void *v,
                size_t len)
{
	struct tx_rec *r = rec_find(tx, key);

	if (r == NULL) {
		/* Not read first: start from "absent" (no lookup needed,
		 * the value is replaced anyway). */
		if (tx->nrecs == tx->caprecs) {
			tx->caprecs = tx->caprecs ? tx->caprecs * 2 : 8;
			tx->recs = store_xrealloc(
			    tx->recs, tx->caprecs * sizeof *tx->recs);
		}
		r = &tx->recs[tx->nrecs++];
		sbuf_init(&r->key);
		sbuf_init(&r->val);
		sbuf_add(&r->key, key->p, key->len);
		r->present = false;
		r->dirty = false;
	}
	sbuf_u32(&tx->journal, (uint32_t)(r - tx->recs));
	sbuf_u8(&tx->journal, r->present);
	sbuf_u8(&tx->journal, r->dirty);
	sbuf_lbytes(&tx->journal, r->val.p, r->val.len);
	sbuf_reset(&r->val);
	if (v != NULL) {
		sbuf_add(&r->val, v, len);
	}
	r->present = v != NULL;
	r->dirty = true;
}

void tx_del_rec(struct tx *tx, const struct sbuf *key)
{
	tx_put_rec(tx, key, NULL, 0);
}

void tx_recs_rollback(struct tx *tx)
{
	/* Entries are variable-sized: replay them into a list first,
	 * then undo newest first. */
	size_t n = 0, cap = 0;
	size_t *offs = NULL;
	struct rd r;

	rd_init(&r, tx->journal.p, tx->journal.len);
	while (rd_left(&r) > 0) {
		size_t l;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			offs = store_xrealloc(offs, cap * sizeof *offs);
		}
		offs[n++] = r.off;
		(void)rd_take(&r, 6);
		(void)rd_lbytes(&r, &l);
	}
	while (n > 0) {
		struct tx_rec *rec;
		size_t l;
		const uint8_t *p;

		rd_init(&r, tx->journal.p, tx->journal.len);
		r.off = offs[--n];
		rec = &tx->recs[rd_u32(&r)];
		rec->present = rd_u8(&r) != 0;
		rec->dirty = rd_u8(&r) != 0;
		p = rd_lbytes(&r, &l);
		sbuf_reset(&rec->val);
		sbuf_add(&rec->val, p, l);
	}
	free(offs);
	sbuf_reset(&tx->journal);
}

void tx_recs_commit_cmd(struct tx *tx)
{
	sbuf_reset(&tx->journal);
}

void tx_recs_flush(struct tx *tx)
{
	for (size_t i = 0; i < tx->nrecs; i++) {
		struct tx_rec *r = &tx->recs[i];
		if (r->dirty && r->present) {
			tx_put(tx, &r->key, r->val.p, r->val.len);
		} else if (r->dirty) {
			tx_del(tx, &r->key);
		}
		r->dirty = false;
	}
}

int tx_drain(struct tx *tx)
{
	/* Batches only: apply never iterates KV keys (row_split), and reads
	 * them through the write-back table. */
	if (dwrite_drain(tx->s->dw) != 0) {
		return tx_fail(tx, "read failed", dwrite_error(tx->s->dw));
	}
	return 0;
}

int tx_fail(struct tx *tx, const char *what, const char *detail)
{
	if (!tx->failed) {
		snprintf(tx->s->err, sizeof tx->s->err, "group %u: %s%s%s",
		         (unsigned)tx->group, what, detail ? ": " : "",
		         detail ? detail : "");
	}
	tx->failed = true;
	return -1;
}

/* Serves `key` from the cache when it knows the row; 1, 0 or -1 (not
 * known) like rowcache_get. The value is copied into v (malloc'd, freed
 * by val_free as RocksDB's are). */
static int cache_get(struct tx *tx, const struct sbuf *key, uint64_t h,
                     struct val *v)
{
	const uint8_t *p;
	size_t len;
	int rv = rowcache_get_h(tx->s->rows, h, key->p, key->len, &p, &len);

	if (rv == 1) {
		v->p = store_xmalloc(len > 0 ? len : 1);
		memcpy(v->p, p, len);
		v->len = len;
	}
	return rv;
}

/* Reads `key` from RocksDB into v, through this entry's batch when
 * `batch`: 1 found, 0 absent, -1 failure. `drain`: the data writer may
 * hold a write of the key. */
static int db_get(struct tx *tx, const struct sbuf *key, bool batch, bool drain,
                  struct val *v)
{
	char *err = NULL;
	struct store *s = tx->s;

	if (drain && tx_drain(tx) != 0) {
		return -1;
	}
	if (batch) {
		v->p = rocksdb_writebatch_wi_get_from_batch_and_db_cf(
		    s->wb, s->db, s->ro, s->cf, (const char *)key->p, key->len,
		    &v->len, &err);
	} else {
		v->p = rocksdb_get_cf(s->db, s->ro, s->cf, (const char *)key->p,
		                      key->len, &v->len, &err);
	}
	if (err != NULL) {
		tx_fail(tx, "read failed", err);
		rocksdb_free(err);
		return -1;
	}
	return v->p != NULL ? 1 : 0;
}

/* Puts an ordered row back in s->ob as the entry's earlier writes, the
 * write-back table or RocksDB hold it. */
static void ob_restore(struct tx *tx, const struct sbuf *key, uint64_t h)
{
	long off = pend_find(tx, key->p, key->len, h);
	struct val v = {NULL, 0};
	int rv;

	if (off >= 0) {
		struct pend_rec pr;

		(void)pend_read(tx, (size_t)off, &pr);
		ob_write(tx->s, h, pr.kp, pr.kl, pr.vp, pr.vl, pr.present);
		return;
	}
	rv = store_kv_dirty_get(tx->s, key, h, &v);
	if (rv < 0) {
		rv = db_get(tx, key, false, true, &v);
	}
	if (rv >= 0) {
		ob_write(tx->s, h, key->p, key->len, v.p, v.len, rv == 1);
	}
	val_free(&v);
}

/* Whether a read of `key` from RocksDB must wait for the data writer.
 * Every queued write of a cacheable row is counted in the writer's filter
 * by the reactor, which alone may rely on a "no" (tx->cached). */
static bool may_be_queued(const struct tx *tx, const struct sbuf *key,
                          uint64_t h)
{
	if (!tx->cached || !(row_cacheable(key->p, key->len) ||
	                     row_ordered(key->p, key->len))) {
		return true;
	}
	/* An ordered row is in a batch only when a range deletion took the
	 * entry's write-back rows along (tx_pend_hashes counts them then);
	 * otherwise the write-back table or a checkpoint has it, which the
	 * caller read first. */
	return dwrite_maybe_queued(tx->s->dw, h);
}

/* A cacheable row the cache does not know (and this entry did not write):
 * read from RocksDB into v and record it in the cache. */
static int get_miss(struct tx *tx, const struct sbuf *key, uint64_t h,
                    struct val *v)
{
	int rv = -1;

	if (row_split(key->p, key->len)) {
		rv = store_kv_dirty_get(tx->s, key, h, v);
	}
	if (rv < 0) {
		rv = db_get(tx, key, false, may_be_queued(tx, key, h), v);
	}
	if (rv >= 0) {
		rowcache_put_h(tx->s->rows, h, key->p, key->len,
		               (const uint8_t *)v->p, v->len, rv == 1);
	}
	return rv;
}

int tx_get(struct tx *tx, const struct sbuf *key, struct val *v)
{
	bool split = row_split(key->p, key->len);
	bool cache = use_cache(tx, key);
	uint64_t h = rowcache_hash(key->p, key->len);
	long off = -1;

	v->p = NULL;
	v->len = 0;
	if (tx->write && (split || cache)) {
		off = pend_find(tx, key->p, key->len, h);
	}
	if (split && off >= 0) {
		/* Written by this entry: its latest write. */
		struct pend_rec pr;

		(void)pend_read(tx, (size_t)off, &pr);
		if (!pr.present) {
			return 0;
		}
		v->p = store_xmalloc(pr.vl > 0 ? pr.vl : 1);
		memcpy(v->p, pr.vp, pr.vl);
		v->len = pr.vl;
		return 1;
	}
	if (cache && off < 0) {
		/* Not written by this entry: the cache, else RocksDB. */
		int rv = cache_get(tx, key, h, v);
		if (rv >= 0) {
			return rv;
		}
		return get_miss(tx, key, h, v);
	}
	/* No cache, an uncacheable row, or one this entry wrote (then it is
	 * in the batch, which db_get reads through). A KV key's row may be
	 * waiting for a checkpoint. */
	if (split) {
		int rv = store_kv_dirty_get(tx->s, key, h, v);
		if (rv >= 0) {
			return rv;
		}
	}
	return db_get(tx, key, tx->write, may_be_queued(tx, key, h), v);
}

int tx_get_view(struct tx *tx, const struct sbuf *key, struct store_slice *out,
                struct val *hold)
{
	int rv;

	hold->p = NULL;
	hold->len = 0;
	out->p = NULL;
	out->len = 0;
	/* A write transaction may hold its own writes of the key: tx_get
	 * knows them. */
	if (!tx->write && use_cache(tx, key)) {
		uint64_t h = rowcache_hash(key->p, key->len);
		const uint8_t *p;
		size_t len;
		rv = rowcache_get_h(tx->s->rows, h, key->p, key->len, &p, &len);
		if (rv == 1) {
			out->p = p;
			out->len = len;
			return 1;
		}
		if (rv == 0) {
			return 0;
		}
		rv = get_miss(tx, key, h, hold);
	} else {
		rv = tx_get(tx, key, hold);
	}
	if (rv == 1) {
		out->p = (const uint8_t *)hold->p;
		out->len = hold->len;
	}
	return rv;
}

void val_free(struct val *v)
{
	if (v->p != NULL) {
		rocksdb_free(v->p);
	}
	v->p = NULL;
	v->len = 0;
}

static void put(struct tx *tx, const struct sbuf *key, const void *v,
                size_t len, bool fresh)
{
	if (!tx->write) {
		abort(); /* a read path tried to write */
	}
	if (row_split(key->p, key->len)) {
		uint64_t h = rowcache_hash(key->p, key->len);

		pend_add(tx, key, h, v, len, true, fresh);
		if (row_ordered(key->p, key->len)) {
			ob_write(tx->s, h, key->p, key->len, v, len, true);
		}
		return;
	}
	rocksdb_writebatch_wi_put_cf(tx->s->wb, tx->s->cf, (const char *)key->p,
	                             key->len, (const char *)v, len);
	if (row_cacheable(key->p, key->len)) {
		pend_add(tx, key, rowcache_hash(key->p, key->len), v, len, true,
		         false);
	}
}

void tx_put(struct tx *tx, const struct sbuf *key, const void *v, size_t len)
{
	put(tx, key, v, len, false);
}

void tx_put_new(struct tx *tx, const struct sbuf *key, const void *v,
                size_t len)
{
	put(tx, key, v, len, true);
}

void tx_del(struct tx *tx, const struct sbuf *key)
{
	if (!tx->write) {
		abort();
	}
	if (row_split(key->p, key->len)) {
		uint64_t h = rowcache_hash(key->p, key->len);

		pend_add(tx, key, h, NULL, 0, false, false);
		if (row_ordered(key->p, key->len)) {
			ob_write(tx->s, h, key->p, key->len, NULL, 0, false);
		}
		return;
	}
	rocksdb_writebatch_wi_delete_cf(tx->s->wb, tx->s->cf,
	                                (const char *)key->p, key->len);
	if (row_cacheable(key->p, key->len)) {
		pend_add(tx, key, rowcache_hash(key->p, key->len), NULL, 0,
		         false, false);
	}
}

void tx_del_range(struct tx *tx, const struct sbuf *begin,
                  const struct sbuf *end)
{
	if (!tx->write) {
		abort();
	}
	sbuf_lbytes(&tx->ranges, begin->p, begin->len);
	sbuf_lbytes(&tx->ranges, end->p, end->len);
	tx->nranges++;
}

void tx_ob_sync(struct store *s, struct tx *tx)
{
	uint64_t gen = atomic_load(&s->kv_gen);

	if (s->ob_gen == gen || s->ob_iters > 0) {
		return;
	}
	ordrows_clear(&s->ob);
	for (size_t i = 0; i < s->kv_dirty.cap; i++) {
		const struct kvrow *r = s->kv_dirty.slots[i].row;

		if (r != NULL && row_ordered(kvrow_key(r), r->klen)) {
			ob_write(s, s->kv_dirty.slots[i].hash, kvrow_key(r),
			         r->klen, kvrow_val(r), r->vlen, r->present);
		}
	}
	if (tx != NULL && tx->write) {
		/* The running entry's writes, newer than the table's. */
		for (size_t off = 0, next; off < tx->pend.len; off = next) {
			struct pend_rec pr;

			next = pend_read(tx, off, &pr);
			if (row_ordered(pr.kp, pr.kl)) {
				ob_write(s, pr.h, pr.kp, pr.kl, pr.vp, pr.vl,
				         pr.present);
			}
		}
	}
	s->ob_gen = gen;
}

/* Sets it->ob when the ordered write-back rows can be under the prefix
 * (reactor only: s->ob is the reactor's), which the titer functions merge
 * with RocksDB's rows. Before the writer is drained and RocksDB's iterator
 * made: a checkpoint queued from another thread (store_sync) after s->ob
 * is rebuilt leaves its rows in s->ob, and one queued before is drained;
 * rebuilt after the drain, s->ob would miss the rows of one queued in
 * between, which RocksDB's iterator may not hold yet. */
static void ob_attach(struct titer *it, struct tx *tx,
                      const struct sbuf *prefix)
{
	struct store *s = tx->s;

	it->ob = false;
	it->on = NULL;
	it->cur = 0;
	it->fwd = true;
	if ((prefix->len < 5 || row_ordered(prefix->p, prefix->len)) &&
	    tx->cached) {
		if (atomic_load(&s->kv_gen) != s->ob_gen) {
			pthread_mutex_lock(&s->kv_mu);
			tx_ob_sync(s, tx);
			pthread_mutex_unlock(&s->kv_mu);
		}
		if (s->ob.n > 0) {
			it->ob = true;
			s->ob_iters++;
		}
	}
}

/* Stacks over `base` what an iterator of the transaction must see besides
 * RocksDB and s->ob (ob_attach): for an apply, the entry's batch when the
 * prefix can hold rows other than ordered ones. */
static rocksdb_iterator_t *iter_layers(struct tx *tx, const struct sbuf *prefix,
                                       rocksdb_iterator_t *base)
{
	struct store *s = tx->s;
	bool all = prefix->len < 5;
	bool ordered = all || row_ordered(prefix->p, prefix->len);

	if (tx->write && (all || !ordered)) {
		return rocksdb_writebatch_wi_create_iterator_with_base_cf(
		    s->wb, base, s->cf);
	}
	return base;
}

void titer_open(struct titer *it, struct tx *tx, const struct sbuf *prefix)
{
	struct store *s = tx->s;
	rocksdb_iterator_t *base;

	ob_attach(it, tx, prefix);
	/* A failed writer fails the transaction; the iterator still opens
	 * (and titer_close reports the failure). */
	(void)tx_drain(tx);
	base = rocksdb_create_iterator_cf(s->db, s->ro, s->cf);

	it->tx = tx;
	it->it = iter_layers(tx, prefix, base);
	it->ro = NULL;
	sbuf_init(&it->upper);
	sbuf_init(&it->prefix);
	sbuf_add(&it->prefix, prefix->p, prefix->len);
}

/* The first key after every key starting with p: p up to its last byte
 * below 0xFF, plus one, into `out`. False (out empty) when p is only 0xFF
 * bytes: no key is after them all. */
static bool successor(const uint8_t *p, size_t len, struct sbuf *out)
{
	size_t n = len;

	while (n > 0 && p[n - 1] == 0xFF) {
		n--;
	}
	sbuf_reset(out);
	if (n == 0) {
		return false;
	}
	sbuf_add(out, p, n);
	out->p[n - 1]++;
	return true;
}

void titer_narrow(struct titer *it, const uint8_t *p, size_t len)
{
	if (!successor(p, len, &it->upper)) {
		/* Nothing to narrow to: the iterator's own bound again. */
		if (!successor(it->prefix.p, it->prefix.len, &it->upper) &&
		    it->ro != NULL) {
			rocksdb_readoptions_set_iterate_upper_bound(it->ro,
			                                            NULL, 0);
			return;
		}
	}
	if (it->ro != NULL) {
		/* RocksDB reads the bound through the read options at every
		 * step, and a seek starts over from it. */
		rocksdb_readoptions_set_iterate_upper_bound(
		    it->ro, (const char *)it->upper.p, it->upper.len);
	}
}

void titer_open_bounded(struct titer *it, struct tx *tx,
                        const struct sbuf *prefix)
{
	struct store *s = tx->s;
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *base;

	sbuf_init(&it->upper);
	if (!successor(prefix->p, prefix->len, &it->upper)) {
		sbuf_free(&it->upper);
		titer_open(it, tx, prefix);
		return;
	}
	ob_attach(it, tx, prefix);
	(void)tx_drain(tx); /* a failure fails tx: titer_close says so */
	ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_upper_bound(
	    ro, (const char *)it->upper.p, it->upper.len);
	base = rocksdb_create_iterator_cf(s->db, ro, s->cf);
	it->tx = tx;
	it->ro = ro;
	it->it = iter_layers(tx, prefix, base);
	sbuf_init(&it->prefix);
	sbuf_add(&it->prefix, prefix->p, prefix->len);
}

/* Iterator sides (titer.cur). */
#define ON_NONE 0
#define ON_BASE 1
#define ON_TABLE 2

static bool has_prefix(const struct titer *it, const uint8_t *k, size_t len)
{
	return len >= it->prefix.len &&
	       memcmp(k, it->prefix.p, it->prefix.len) == 0;
}

/* The table's node, unless it lies beyond the prefix on the side the
 * iterator moves to (the rest of the table there is too). */
static struct ordnode *in_range(const struct titer *it, struct ordnode *n,
                                bool fwd)
{
	int c;

	if (n != NULL && fwd && it->upper.len > 0 &&
	    ordrows_cmp(ordnode_key(n), n->klen, it->upper.p, it->upper.len) >=
	        0) {
		return NULL;
	}
	if (n == NULL || has_prefix(it, ordnode_key(n), n->klen)) {
		return n;
	}
	c = ordrows_cmp(ordnode_key(n), n->klen, it->prefix.p, it->prefix.len);
	return (fwd ? c > 0 : c < 0) ? NULL : n;
}

/* One step of RocksDB's side, and of the table's, in direction `fwd`. */
static void base_step(struct titer *it, bool fwd)
{
	if (fwd) {
		rocksdb_iter_next(it->it);
	} else {
		rocksdb_iter_prev(it->it);
	}
}

static struct ordnode *node_step(const struct ordnode *n, bool fwd)
{
	return fwd ? ordrows_next(n) : ordrows_prev(n);
}

/* Puts the merged iterator on the next visible row in its direction: the
 * nearer of RocksDB's row and the table's node; on equal keys the table's
 * write hides RocksDB's row, and a deletion in the table hides both. */
static void settle(struct titer *it)
{
	int dir = it->fwd ? 1 : -1;

	for (;;) {
		bool bv = rocksdb_iter_valid(it->it);
		int c = 0;

		it->on = in_range(it, it->on, it->fwd);
		if (it->on != NULL && bv) {
			size_t bl;
			const char *bk = rocksdb_iter_key(it->it, &bl);
			c = ordrows_cmp(ordnode_key(it->on), it->on->klen,
			                (const uint8_t *)bk, bl) *
			    dir;
		}
		if (it->on != NULL && (!bv || c <= 0)) {
			if (bv && c == 0) {
				base_step(it, it->fwd);
			}
			if (it->on->present) {
				it->cur = ON_TABLE;
				return;
			}
			it->on = node_step(it->on, it->fwd);
			continue;
		}
		it->cur = bv ? ON_BASE : ON_NONE;
		return;
	}
}

bool titer_valid(struct titer *it)
{
	size_t len;
	const uint8_t *k;

	if (it->ob ? it->cur == ON_NONE : !rocksdb_iter_valid(it->it)) {
		return false;
	}
	k = titer_key(it, &len);
	return has_prefix(it, k, len);
}

bool titer_seek(struct titer *it, const struct sbuf *key)
{
	const struct sbuf *k = key ? key : &it->prefix;
	rocksdb_iter_seek(it->it, (const char *)k->p, k->len);
	if (it->ob) {
		it->fwd = true;
		it->on = ordrows_seek(&it->tx->s->ob, k->p, k->len);
		settle(it);
	}
	return titer_valid(it);
}

bool titer_seek_prev(struct titer *it, const struct sbuf *key)
{
	rocksdb_iter_seek_for_prev(it->it, (const char *)key->p, key->len);
	if (it->ob) {
		it->fwd = false;
		it->on = ordrows_seek_prev(&it->tx->s->ob, key->p, key->len);
		settle(it);
	}
	return titer_valid(it);
}

/* Turns the merged iterator around on its current row (both sides are
 * placed at it again, from the other direction). */
static void turn(struct titer *it)
{
	struct sbuf k;
	size_t len;
	const uint8_t *p = titer_key(it, &len);

	sbuf_init(&k);
	sbuf_add(&k, p, len);
	if (it->fwd) {
		(void)titer_seek_prev(it, &k);
	} else {
		(void)titer_seek(it, &k);
	}
	sbuf_free(&k);
}

/* One row on in direction `fwd`, turning around first if the iterator
 * last moved the other way. */
static void step(struct titer *it, bool fwd)
{
	if (!it->ob) {
		base_step(it, fwd);
		return;
	}
	if (it->cur == ON_NONE) {
		return;
	}
	if (it->fwd != fwd) {
		turn(it);
	}
	if (it->cur == ON_TABLE) {
		it->on = node_step(it->on, fwd);
	} else {
		base_step(it, fwd);
	}
	settle(it);
}

void titer_next(struct titer *it)
{
	step(it, true);
}

void titer_prev(struct titer *it)
{
	step(it, false);
}

const uint8_t *titer_key(struct titer *it, size_t *len)
{
	if (it->ob && it->cur == ON_TABLE) {
		*len = it->on->klen;
		return ordnode_key(it->on);
	}
	return (const uint8_t *)rocksdb_iter_key(it->it, len);
}

const uint8_t *titer_value(struct titer *it, size_t *len)
{
	if (it->ob && it->cur == ON_TABLE) {
		*len = it->on->vlen;
		return it->on->val != NULL ? it->on->val : (const uint8_t *)"";
	}
	return (const uint8_t *)rocksdb_iter_value(it->it, len);
}

int titer_close(struct titer *it)
{
	char *err = NULL;
	int rv = 0;

	rocksdb_iter_get_error(it->it, &err);
	if (err != NULL) {
		tx_fail(it->tx, "iterator failed", err);
		rocksdb_free(err);
		rv = -1;
	}
	if (it->tx->failed) {
		rv = -1; /* e.g. the data writer failed before the open */
	}
	rocksdb_iter_destroy(it->it);
	if (it->ob) {
		it->tx->s->ob_iters--;
	}
	if (it->ro != NULL) {
		rocksdb_readoptions_destroy(it->ro);
		it->ro = NULL;
	}
	sbuf_free(&it->upper);
	sbuf_free(&it->prefix);
	return rv;
}

int tx_del_prefix(struct tx *tx, const struct sbuf *prefix, uint64_t *budget,
                  uint64_t *deleted)
{
	struct titer it;
	struct sbuf keys, k;
	struct rd r;
	int more = 0;

	/* Writing while a batch iterator is open invalidates it: collect
	 * the keys first, delete after. */
	sbuf_init(&keys);
	sbuf_init(&k);
	titer_open(&it, tx, prefix);
	for (titer_seek(&it, NULL); titer_valid(&it); titer_next(&it)) {
		size_t kl;
		const uint8_t *kp;

		if (*budget == 0) {
			more = 1;
			break;
		}
		kp = titer_key(&it, &kl);
		sbuf_lbytes(&keys, kp, kl);
		(*budget)--;
	}
	if (titer_close(&it) != 0) {
		sbuf_free(&keys);
		return -1;
	}
	rd_init(&r, keys.p, keys.len);
	while (rd_left(&r) > 0) {
		size_t kl;
		const uint8_t *kp = rd_lbytes(&r, &kl);
		sbuf_reset(&k);
		sbuf_add(&k, kp, kl);
		tx_del(tx, &k);
		(*deleted)++;
	}
	sbuf_free(&keys);
	sbuf_free(&k);
	return more;
}

bool check_scope(const struct store_cmd *c, struct sbuf *res)
{
	if (c->scope.len == 0 || c->scope.len > STORE_NAME_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR scope name must be 1 to 4096 bytes");
		return false;
	}
	return true;
}
