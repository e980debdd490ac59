/* The data writer: one thread that writes apply batches into the data
 * column family, so that the memtable inserts (the largest cost of a
 * write-heavy apply: ~40 % of the reactor under SET load) leave the
 * reactor.
 *
 * The reactor builds each entry's WriteBatch, results included, and hands
 * it over with dwrite_submit(); the entry's rows are then already in the
 * row cache, and the applied index in store/'s own table. Anything that
 * reads RocksDB itself (an iterator, a snapshot export, a flush before log
 * compaction) first calls dwrite_drain(), which returns once every batch
 * submitted before the call is in RocksDB. A row cache miss drains only
 * when its key may be in a queued batch: each batch carries the hashes of
 * the cacheable rows it writes, counted in a small table until written.
 * Durability is unchanged: these writes bypass the WAL either way (the Raft log
 * is the durable record until a flush).
 *
 * Threads: batches from one thread (the reactor); requests, drain, error
 * and stats from any thread. */
#ifndef LS_STORE_DWRITE_H
#define LS_STORE_DWRITE_H

#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/kvdirty.h"

/* Default bound on the bytes submitted and not yet written: a submit
 * beyond it waits (backpressure on the reactor, as a synchronous write
 * stall would). */
#define DWRITE_MAX_BYTES (64u << 20)

/* Counters of queued row hashes (a false positive costs one drain). */
#define DWRITE_FILTER_SLOTS (1u << 15)

/* The writer asks for a flush (dwrite_want_flush) once the data column
 * family's active memtable holds this much. The column family's own
 * write_buffer_size must be larger (store/db.c): RocksDB must never switch
 * the memtable by itself, only right after a checkpoint (below). */
#define DWRITE_FLUSH_BYTES (48u << 20)

struct dwrite;

/* Starts the thread. `db`, `cf` (the data column family) and `wo` are
 * borrowed and must outlive the writer. Returns 0, or -1 when the thread
 * cannot start. */
int dwrite_start(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
                 const rocksdb_writeoptions_t *wo, size_t max_bytes,
                 struct dwrite **out);

/* Writes what was submitted, stops the thread and frees the writer. */
void dwrite_stop(struct dwrite *w);

/* Queues `b` (ownership passes to the writer, which destroys it once
 * written), with the hashes (rowcache_hash) of the cacheable rows it
 * writes (copied). Waits while more than max_bytes are queued. Returns -1
 * when an earlier write failed (dwrite_error says why): the node cannot
 * continue. */
int dwrite_submit(struct dwrite *w, rocksdb_writebatch_t *b,
                  const uint64_t *hashes, size_t nhashes);

/* The same for a WriteBatchWithIndex: written as is, then cleared and
 * kept for dwrite_take_wi (an entry's batch is not copied). */
int dwrite_submit_wi(struct dwrite *w, rocksdb_writebatch_wi_t *wi,
                     const uint64_t *hashes, size_t nhashes);

/* A written, cleared WriteBatchWithIndex to build the next entry in
 * (owned by the caller), or NULL when none is free. */
rocksdb_writebatch_wi_t *dwrite_take_wi(struct dwrite *w);

/* A request run in queue order on the writer thread: a checkpoint of the
 * KV write-back rows (`rows`, written sorted by key in one batch), then
 * by `flags` a memtable switch for a flush (DWRITE_FLUSH: the flush runs
 * in the background), a snapshot (DWRITE_SNAPSHOT, into `snap`, which the
 * caller releases), and `fn`. Everything submitted before the request is
 * written before it, nothing submitted after: a flush or snapshot taken
 * here holds exactly the state apply had made when the request was
 * queued, KV rows included. Owned by the caller, which must keep it (and
 * `rows`) until `done`. */
#define DWRITE_FLUSH 1u
#define DWRITE_SNAPSHOT 2u

typedef int (*dwrite_fn)(void *arg);

struct dwrite_req {
	const struct kvdirty *rows; /* borrowed; NULL for none */
	/* The rows to write in key order (borrowed), when the queuer had
	 * them so; NULL: the writer sorts `rows` itself. */
	struct kvrow *const *order;
	size_t norder;
	unsigned flags;
	dwrite_fn fn; /* NULL for none */
	void *arg;
	/* Results, valid once `done`. */
	const rocksdb_snapshot_t *snap;
	int rv; /* 0, or -1 (dwrite_error, or fn's own message) */
	atomic_bool done;
};

/* Queues `r` (fields above set; the results are reset). Any thread.
 * Returns -1 when an earlier write failed (r is then done). */
int dwrite_submit_req(struct dwrite *w, struct dwrite_req *r);

/* Waits until `r` is done; returns r->rv. */
int dwrite_wait(struct dwrite *w, struct dwrite_req *r);

/* Whether the active memtable reached DWRITE_FLUSH_BYTES since the last
 * DWRITE_FLUSH request: the reactor then queues a checkpoint with one. */
bool dwrite_want_flush(struct dwrite *w);

/* Whether a row with this hash may be in a queued batch. Only the
 * submitting thread may rely on a false answer. */
int dwrite_maybe_queued(struct dwrite *w, uint64_t hash);

/* Waits until every batch submitted before this call is written. 0, or
 * -1 when a write failed. Cheap when nothing is queued. */
int dwrite_drain(struct dwrite *w);

/* Why the writer failed ("" while it has not). */
const char *dwrite_error(struct dwrite *w);

struct dwrite_stats {
	uint64_t batches;     /* written */
	uint64_t merged;      /* of them, written in one write with others */
	uint64_t drains;      /* drain calls that had to wait */
	uint64_t waits;       /* submits that waited for room */
	uint64_t checkpoints; /* write-back checkpoints written */
	uint64_t checkpoint_rows;
	uint64_t flushes; /* memtable switches after a checkpoint */
};

void dwrite_stats(struct dwrite *w, struct dwrite_stats *st);

#endif
