/* Shared by store/ modules only: the store object, the per-entry (or
 * per-read) transaction, and each data type's entry point. */
#ifndef LS_STORE_INTERNAL_H
#define LS_STORE_INTERNAL_H

#include <pthread.h>
#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/command.h"
#include "store/dwrite.h"
#include "store/ext.h"
#include "store/keys.h"
#include "store/kvdirty.h"
#include "store/ordrows.h"
#include "store/result.h"
#include "store/rowcache.h"
#include "store/store.h"

struct store {
	rocksdb_t *db;                      /* borrowed */
	rocksdb_column_family_handle_t *cf; /* borrowed */
	rocksdb_readoptions_t *ro;
	rocksdb_writeoptions_t *wo;
	rocksdb_writebatch_wi_t *wb; /* reused by every apply */
	/* Failure messages, one per thread that may call in: the reactor
	 * (apply, import, reads), the exporter and raft/'s log writer. */
	char err[256];
	char export_err[256];
	char sync_err[256];
	struct store_observer observer;   /* all NULL when none */
	store_acl_change_cb acl_observer; /* NULL when none */
	void *acl_observer_data;
	store_acl_rules_fn acl_rules; /* NULL when none */
	void *acl_rules_data;
	/* Registered extensions (store/ext.h), reactor only. */
	struct store_ext ext[STORE_EXT_MAX];
	unsigned next;
	/* Rows read by point lookups only, cached in front of RocksDB
	 * (reactor only; tx.c keeps it equal to what RocksDB holds once the
	 * data writer has written what was submitted). */
	struct rowcache *rows;
	/* Writes each entry's batch off the reactor (dwrite.h): whatever
	 * reads RocksDB directly drains it first (store_drain). */
	struct dwrite *dw;
	/* Applied index per group id, as the last submitted batch set it
	 * (reactor only): apply checks it on every entry, and RocksDB may
	 * not have the batch yet. `known` false = read it from RocksDB. */
	struct applied_slot {
		uint64_t index;
		bool known;
	} * applied;
	size_t napplied;
	/* Reused by commit: hashes of an entry's cacheable rows. */
	uint64_t *hashes;
	size_t hcap;
	/* KV rows applied and not yet in RocksDB (docs/storage.md "KV rows:
	 * write-back"): `kv_dirty` since the last checkpoint, and the
	 * checkpoints queued on the data writer (newest first) until they
	 * are written and nobody waits on them. Under kv_mu: the reactor
	 * applies and reads; store_sync and store_export queue checkpoints
	 * from their own threads. */
	pthread_mutex_t kv_mu;
	struct kvdirty kv_dirty;
	struct kv_ckpt *kv_flight;
	bool kv_flush_queued; /* a checkpoint with DWRITE_FLUSH is in flight */
	/* Reused by tx_split_dirty and tx_split_append (under kv_mu): the
	 * latest write of each KV key of an entry. */
	uint64_t *kv_hashes;
	size_t *kv_offs;
	size_t kv_cap;
	/* The write-back rows that iterators walk (Flow rows, row_ordered in
	 * tx.c), each key's latest write in key order (store/ordrows.h): the
	 * rows of `kv_dirty` and of the running entry that are of those
	 * kinds, which iterators over them merge with RocksDB (reactor only).
	 * Rebuilt from `kv_dirty` once a checkpoint (queued from any thread:
	 * `kv_gen` counts them) has moved rows to the data writer; until then
	 * it may still hold rows a checkpoint moved, with the values RocksDB
	 * gets, which iterators drain the writer for. */
	struct ordrows ob;
	_Atomic uint64_t kv_gen; /* checkpoints queued, under kv_mu */
	uint64_t ob_gen;         /* kv_gen when `ob` was last rebuilt */
	unsigned ob_iters;       /* iterators open over `ob` */
	/* The last write transaction's pending writes and their index, lent
	 * to the next one (reactor only): an entry's apply then grows no
	 * buffer. Kept only while small (TX_SPARE_MAX_BYTES, _SLOTS in
	 * tx.c); the slots are lent empty. */
	struct sbuf tx_pend;
	size_t *tx_pslots;
	size_t tx_pcap;
};

/* A checkpoint: the rows it writes (owned) and its request. */
struct kv_ckpt {
	struct kvdirty rows;
	struct kvrow **order; /* rows in key order, or NULL (req.order) */
	struct dwrite_req req;
	bool held; /* a waiter reads req: not freed until it lets go */
	struct kv_ckpt *next;
};

/* A checkpoint is queued once this many key and value bytes are dirty,
 * or once the ordered write-back rows (`ob`) hold this many bytes: a
 * small table keeps its searches short, and a Flow row lives a few
 * milliseconds between the writes that make and delete it. */
#define STORE_KV_DIRTY_MAX (64u << 20)
#define STORE_OB_MAX (8u << 20)

/* A record kept in the transaction until commit (hot meta records that
 * many commands of one entry rewrite: one batch write instead of many). */
struct tx_rec {
	struct sbuf key;
	struct sbuf val;
	bool present;
	bool dirty;
};

/* One apply (write = true: reads see the entry's own writes) or one read
 * (write = false: straight from the DB). */
struct tx {
	struct store *s;
	uint32_t group;
	uint64_t index;  /* entry index; 0 for reads */
	uint64_t now_ms; /* entry time, or the leader's clock for reads */
	bool write;
	bool failed;
	/* Range deletions appended after the batch: (u32 len, begin, u32
	 * len, end)... Only for ranges no later write can reuse. */
	struct sbuf ranges;
	size_t nranges;
	/* Write-back records and the undo journal of the running command:
	 * (u32 record index, u8 present, u8 dirty, u32 len, old value)... */
	struct tx_rec *recs;
	size_t nrecs;
	size_t caprecs;
	struct sbuf journal;
	/* Whether this tx may use the row cache: true on the reactor (the
	 * default), false for reads on other threads. */
	bool cached;
	/* Cacheable rows this entry wrote, in order: (u8 present, u32 len,
	 * key, u32 len, value)...; published to the cache after the batch
	 * is written. `pslots` maps a key to 1 + the offset of its latest
	 * write (open addressing, `pcap` a power of two or 0). */
	struct sbuf pend;
	size_t npend;
	size_t nsplit; /* writes in pend kept out of the WBWI (KV keys) */
	size_t *pslots;
	size_t pcap;
};

/* A value read from RocksDB (malloc'd by RocksDB). */
struct val {
	char *p;
	size_t len;
};

/* Looks a KV key (its rowcache_hash in `hash`) up among the rows not yet
 * in RocksDB: 1 present (a copy in v), 0 deleted, -1 not there (RocksDB
 * has its latest write). */
int store_kv_dirty_get(struct store *s, const struct sbuf *key, uint64_t hash,
                       struct val *v);

void tx_init(struct tx *tx, struct store *s, uint32_t group, uint64_t index,
             uint64_t now_ms, bool write);
void tx_fini(struct tx *tx);
/* Waits for the data writer (store_drain) before the transaction reads
 * RocksDB itself; a failed writer fails the transaction (-1). */
int tx_drain(struct tx *tx);
/* Records a failure; returns -1 for `return tx_fail(...)`. */
int tx_fail(struct tx *tx, const char *what, const char *detail);
/* 1 found, 0 absent, -1 failure. */
int tx_get(struct tx *tx, const struct sbuf *key, struct val *v);
void val_free(struct val *v);
/* tx_get for a read that uses the value at once (GET): `*out` borrows
 * the row cache's copy when it has the row (valid until the next call on
 * the transaction or the cache), else points into `hold`, which then owns
 * the value (val_free it either way). No copy, no allocation on a hit. */
int tx_get_view(struct tx *tx, const struct sbuf *key, struct store_slice *out,
                struct val *hold);
void tx_put(struct tx *tx, const struct sbuf *key, const void *v, size_t len);
/* tx_put of a key the caller knows is absent (no row of it in the state
 * the transaction sees): a write-back row deleted again before the next
 * checkpoint then leaves nothing on disk, not even a deletion. */
void tx_put_new(struct tx *tx, const struct sbuf *key, const void *v,
                size_t len);
void tx_del(struct tx *tx, const struct sbuf *key);
void tx_del_range(struct tx *tx, const struct sbuf *begin,
                  const struct sbuf *end);

/* Row-cache bookkeeping around the batch: a command's save point, its
 * rollback, and the publication of a written batch's rows. */
size_t tx_pend_mark(struct tx *tx);
/* Whether the entry wrote rows kept out of the WriteBatchWithIndex, and
 * appending them (each key's latest write) to `b`. */
bool tx_has_split(const struct tx *tx);
size_t tx_split_append(struct tx *tx, rocksdb_writebatch_t *b);
void tx_pend_rollback(struct tx *tx, size_t mark);
/* The rowcache_hash of every row in tx->pend (KV keys only when
 * `with_split`), into *buf (grown as needed, owned by the caller);
 * returns how many. */
size_t tx_pend_hashes(struct tx *tx, bool with_split, uint64_t **buf,
                      size_t *cap);
/* Records each KV key's latest write of the entry in `d` instead. */
void tx_split_dirty(struct tx *tx, struct kvdirty *d);
/* Whether rows of this key are kept in s->ob too (row_ordered). */
bool tx_row_ordered(const uint8_t *k, size_t len);
/* Under kv_mu, on the reactor: rebuilds s->ob from s->kv_dirty (and the
 * running entry's writes, when `tx` is a write transaction) once a
 * checkpoint moved rows out of the table, unless an iterator is open. */
void tx_ob_sync(struct store *s, struct tx *tx);
void tx_pend_publish(struct tx *tx);

/* Write-back access for records read and written by point lookups only
 * (never iterated during apply). `out` gets a copy. 1 found, 0 absent,
 * -1 failure. */
int tx_get_rec(struct tx *tx, const struct sbuf *key, struct sbuf *out);
void tx_put_rec(struct tx *tx, const struct sbuf *key, const void *v,
                size_t len);
/* Deletes the record (v NULL in tx_put_rec does the same). */
void tx_del_rec(struct tx *tx, const struct sbuf *key);
/* Undoes the record changes since the journal was last cleared. */
void tx_recs_rollback(struct tx *tx);
void tx_recs_commit_cmd(struct tx *tx);
/* Writes the dirty records to the batch. */
void tx_recs_flush(struct tx *tx);

/* Iterator over the keys starting with a prefix (a copy is kept). */
struct titer {
	struct tx *tx;
	rocksdb_iterator_t *it;
	struct sbuf prefix;
	/* titer_open_bounded: RocksDB's upper bound (the prefix's successor)
	 * and the read options holding it; NULL / empty otherwise. */
	rocksdb_readoptions_t *ro;
	struct sbuf upper;
	/* Merged with s->ob's rows (counted in s->ob_iters): `on` is the
	 * table's position, `cur` which side the iterator is on (0 none, 1
	 * RocksDB, 2 the table), `fwd` the direction it last moved in. */
	bool ob;
	struct ordnode *on;
	int cur;
	bool fwd;
};

void titer_open(struct titer *it, struct tx *tx, const struct sbuf *prefix);
/* The same, with RocksDB's iterate_upper_bound at the end of the prefix:
 * a step past the prefix's last live key then stops at the bound instead
 * of stepping over the deleted keys of whatever range follows. */
void titer_open_bounded(struct titer *it, struct tx *tx,
                        const struct sbuf *prefix);
/* Positions at the first key >= `key` (or the prefix start when NULL).
 * Returns whether a key under the prefix is there. */
bool titer_seek(struct titer *it, const struct sbuf *key);
/* Ends forward walks at the last key under `p` (see store_tx_iter_narrow);
 * keys past it may still be returned where RocksDB ignores the bound. */
void titer_narrow(struct titer *it, const uint8_t *p, size_t len);
bool titer_valid(struct titer *it);
void titer_next(struct titer *it);
/* Positions at the last key <= key; steps back. */
bool titer_seek_prev(struct titer *it, const struct sbuf *key);
void titer_prev(struct titer *it);
const uint8_t *titer_key(struct titer *it, size_t *len);
const uint8_t *titer_value(struct titer *it, size_t *len);
/* Closes; returns -1 (and fails the tx) on an iterator error. */
int titer_close(struct titer *it);

/* The result buffer's status. */
static inline uint8_t res_status(const struct sbuf *res)
{
	return res->len >= 2 ? res->p[1] : STORE_OK;
}

/* Checks a scope and shard of a data command; writes an error result and
 * returns false when unusable. */
bool check_scope(const struct store_cmd *c, struct sbuf *res);

/* Module entry points: write the result into `res`; return 0, or -1 when
 * the node cannot continue (tx->failed). */
int meta_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int stream_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int cgroup_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int cache_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int counter_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int kv_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int kvcoll_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int kvkey_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int kvspace_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int expire_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
/* KV transactions and the watch read (kvmulti.c). */
int kvmulti_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
/* The stamp of `key` as a transaction compares it (kvmulti.c). */
int kvmulti_stamp(struct tx *tx, struct store_slice key,
                  uint8_t stamp[STORE_WATCH_STAMP_LEN]);

/* Runs one decoded command in the transaction with a save point of its
 * own: an error result leaves no write of it behind (shard.c; a KV
 * transaction runs each of its commands so). */
int store_run_cmd(struct tx *tx, const struct store_cmd *c, struct sbuf *res);

/* Extensions (ext.c): the one registered for `op` (NULL when none), and
 * whether an encoded command names an op of the extension range. */
const struct store_ext *ext_find(const struct store *s, uint8_t op);
bool ext_cmd(const uint8_t *p, size_t len);

/* Deletes every key under `prefix`, at most `*budget` of them (the budget
 * is decreased). Returns 1 when keys remain, 0 when done, -1 on failure. */
int tx_del_prefix(struct tx *tx, const struct sbuf *prefix, uint64_t *budget,
                  uint64_t *deleted);

/* Stream state shared by streams, producers and consumer groups. */
struct stream_meta {
	uint64_t head;
	uint64_t tail;
	uint64_t bytes;
	uint32_t producers;
};

int stream_meta_load(struct tx *tx, struct store_slice scope, uint32_t shard,
                     struct stream_meta *m);
void stream_meta_store(struct tx *tx, struct store_slice scope, uint32_t shard,
                       const struct stream_meta *m);
/* Appends the command's items; fills base offset. */
int stream_append_records(struct tx *tx, const struct store_cmd *c,
                          struct stream_meta *m, uint64_t *base);
/* Producer table (producer.c). */
int producer_append(struct tx *tx, const struct store_cmd *c, struct sbuf *res);
int producer_init(struct tx *tx, const struct store_cmd *c, struct sbuf *res);

/* Expiry index maintenance (expire.c). `what` is the entry after the kind
 * byte. expires_at 0 = none (nothing is written or removed). */
void expiry_index_put(struct tx *tx, uint64_t expires_at, uint8_t kind,
                      const struct sbuf *what);
void expiry_index_del(struct tx *tx, uint64_t expires_at, uint8_t kind,
                      const struct sbuf *what);

/* Reclaims the cache entry named by `what` (shard id + key) when it
 * lapsed at the entry's time. Returns 1 reclaimed, 0 not, -1 failure. */
int cache_expire_entry(struct tx *tx, const uint8_t *what, size_t len);
/* Same for a KV key and a fetch-or-compute lease (kv.c). */
int kv_expire_key(struct tx *tx, const uint8_t *key, size_t len);
int kv_expire_lease(struct tx *tx, const uint8_t *key, size_t len);

/* Saturating now + ttl. */
static inline uint64_t deadline_after(uint64_t now, uint64_t ttl)
{
	return ttl > UINT64_MAX - now ? UINT64_MAX : now + ttl;
}

#endif
