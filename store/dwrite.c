/* The data writer thread; see dwrite.h. */
#include "store/dwrite.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Batches queued while the writer sleeps wake it at this many bytes;
 * fewer wait at most DWRITE_IDLE_MS. */
#define DWRITE_WAKE_BYTES (64u << 10)
#define DWRITE_IDLE_MS 20

struct item {
	rocksdb_writebatch_t *b; /* owned; or */
	rocksdb_writebatch_wi_t
	    *wi;                /* owned, kept as a spare once written; or */
	struct dwrite_req *req; /* borrowed until done */
	size_t bytes;
	struct item *next;
	size_t nslots;
	uint32_t slots[]; /* filter slots of its rows */
};

struct dwrite {
	rocksdb_t *db;                      /* borrowed */
	rocksdb_column_family_handle_t *cf; /* borrowed */
	const rocksdb_writeoptions_t *wo;   /* borrowed */
	size_t max_bytes;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work; /* the writer waits for items (or stop) */
	pthread_cond_t done; /* drains and full submits wait for writes */
	/* Under mu. */
	struct item *head, *tail;
	size_t queued_bytes;
	/* Written and cleared WriteBatchWithIndex objects. */
	rocksdb_writebatch_wi_t **spares;
	size_t nspares, capspares;
	bool idle; /* the writer waits on `work` */
	bool stop;
	struct dwrite_stats stats;
	/* Batches submitted and written so far; written only moves under mu
	 * but is read without it by drain's fast path. */
	_Atomic uint64_t submitted;
	_Atomic uint64_t written;
	atomic_bool failed;
	char err[256]; /* set once, before `failed` */
	/* Queued rows per hash slot: +1 at submit, -1 once written. */
	_Atomic uint32_t filter[DWRITE_FILTER_SLOTS];
	/* Writer thread: bytes written since the memtable size was read. */
	size_t since_check;
	atomic_bool want_flush;
};

/* Writer thread, without mu. */
static void keep_spare(struct dwrite *w, rocksdb_writebatch_wi_t *wi)
{
	pthread_mutex_lock(&w->mu);
	if (w->nspares == w->capspares) {
		size_t cap = w->capspares ? w->capspares * 2 : 8;
		void *p = realloc(w->spares, cap * sizeof *w->spares);
		if (p == NULL) {
			pthread_mutex_unlock(&w->mu);
			rocksdb_writebatch_wi_destroy(wi);
			return;
		}
		w->spares = p;
		w->capspares = cap;
	}
	w->spares[w->nspares++] = wi;
	pthread_mutex_unlock(&w->mu);
}

rocksdb_writebatch_wi_t *dwrite_take_wi(struct dwrite *w)
{
	rocksdb_writebatch_wi_t *wi = NULL;

	pthread_mutex_lock(&w->mu);
	if (w->nspares > 0) {
		wi = w->spares[--w->nspares];
	}
	pthread_mutex_unlock(&w->mu);
	return wi;
}

static void fail(struct dwrite *w, const char *what, char *err)
{
	if (!atomic_load(&w->failed)) {
		snprintf(w->err, sizeof w->err, "%s: %s", what, err);
		atomic_store(&w->failed, true);
	}
	rocksdb_free(err);
}

/* A WriteBatch's serialized form: an 8-byte sequence number and a 4-byte
 * little-endian record count, then the records (RocksDB's WriteBatch
 * layout, which rocksdb_writebatch_data gives and
 * rocksdb_writebatch_create_from takes). */
#define WB_HEADER 12
/* Plain batches up to this size are merged with their neighbours in the
 * queue into one write of at most DWRITE_MERGE_BYTES: with writes spread
 * over many groups an entry carries a command or two, and a RocksDB write
 * per entry (its write group, sequence and memtable bookkeeping) cost
 * more than its rows. */
#define DWRITE_MERGE_ITEM (16u << 10)
#define DWRITE_MERGE_BYTES (256u << 10)

static bool mergeable(const struct item *it)
{
	return it != NULL && it->b != NULL && it->bytes >= WB_HEADER &&
	       it->bytes <= DWRITE_MERGE_ITEM;
}

/* Writer thread: the run of mergeable items from `first` (two or more)
 * as one batch, or NULL (then each is written alone). *last gets the run's
 * last item. */
static rocksdb_writebatch_t *merge_run(struct item *first, struct item **last)
{
	struct item *it = first, *end = first;
	size_t total = WB_HEADER, off = WB_HEADER;
	uint32_t count = 0;
	rocksdb_writebatch_t *b;
	char *rep;

	*last = first;
	while (mergeable(it) &&
	       total + it->bytes - WB_HEADER <= DWRITE_MERGE_BYTES) {
		total += it->bytes - WB_HEADER;
		end = it;
		it = it->next;
	}
	if (end == first) {
		return NULL;
	}
	rep = malloc(total);
	if (rep == NULL) {
		return NULL;
	}
	memset(rep, 0, WB_HEADER);
	for (it = first;; it = it->next) {
		size_t n;
		const char *d = rocksdb_writebatch_data(it->b, &n);
		count += (uint32_t)rocksdb_writebatch_count(it->b);
		memcpy(rep + off, d + WB_HEADER, n - WB_HEADER);
		off += n - WB_HEADER;
		if (it == end) {
			break;
		}
	}
	for (int i = 0; i < 4; i++) {
		rep[8 + i] = (char)((count >> (8 * i)) & 0xff);
	}
	b = rocksdb_writebatch_create_from(rep, total);
	free(rep);
	*last = end;
	return b;
}

/* Writer thread. Reads the active memtable's size every MiB written and
 * asks for a flush (through the reactor, which alone can checkpoint the
 * rows at the same point) once it is due. */
static void check_memtable(struct dwrite *w, size_t bytes)
{
	uint64_t size = 0;

	w->since_check += bytes;
	if (w->since_check < (1u << 20) || atomic_load(&w->want_flush)) {
		return;
	}
	w->since_check = 0;
	if (rocksdb_property_int_cf(w->db, w->cf,
	                            "rocksdb.cur-size-active-mem-table",
	                            &size) == 0 &&
	    size >= DWRITE_FLUSH_BYTES) {
		atomic_store(&w->want_flush, true);
	}
}

static void write_rows(struct dwrite *w, const struct dwrite_req *req)
{
	const struct kvdirty *rows = req->rows;
	struct kvrow **sorted = NULL;
	struct kvrow *const *order = req->order;
	size_t n = req->norder;
	rocksdb_writebatch_t *b;
	char *err = NULL;

	if (rows == NULL || rows->n == 0) {
		return;
	}
	/* In key order: consecutive inserts land near each other in the
	 * memtable's skiplist. */
	if (order == NULL) {
		sorted = kvdirty_sorted(rows, &n);
		order = sorted;
	}
	b = rocksdb_writebatch_create();
	for (size_t i = 0; i < n; i++) {
		const struct kvrow *r = order[i];
		if (r->present) {
			rocksdb_writebatch_put_cf(
			    b, w->cf, (const char *)kvrow_key(r), r->klen,
			    (const char *)kvrow_val(r), r->vlen);
		} else {
			rocksdb_writebatch_delete_cf(
			    b, w->cf, (const char *)kvrow_key(r), r->klen);
		}
	}
	free(sorted);
	rocksdb_write(w->db, w->wo, b, &err);
	rocksdb_writebatch_destroy(b);
	if (err != NULL) {
		fail(w, "write of a KV checkpoint failed", err);
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->stats.checkpoints++;
	w->stats.checkpoint_rows += n;
	pthread_mutex_unlock(&w->mu);
}

/* Writer thread: one request, in queue order. */
static void run_req(struct dwrite *w, struct dwrite_req *r)
{
	char *err = NULL;

	r->rv = -1;
	if (atomic_load(&w->failed)) {
		goto out;
	}
	write_rows(w, r);
	if (atomic_load(&w->failed)) {
		goto out;
	}
	if (r->flags & DWRITE_FLUSH) {
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
		/* The switch happens in this call; the flush itself runs on
		 * RocksDB's threads (store_sync waits for it). */
		rocksdb_flushoptions_set_wait(fo, 0);
		rocksdb_flush_cf(w->db, fo, w->cf, &err);
		rocksdb_flushoptions_destroy(fo);
		if (err != NULL) {
			fail(w, "flush of applied state failed", err);
			goto out;
		}
		atomic_store(&w->want_flush, false);
		w->since_check = 0;
		pthread_mutex_lock(&w->mu);
		w->stats.flushes++;
		pthread_mutex_unlock(&w->mu);
	}
	if (r->flags & DWRITE_SNAPSHOT) {
		r->snap = rocksdb_create_snapshot(w->db);
	}
	r->rv = 0;
	if (r->fn != NULL) {
		r->rv = r->fn(r->arg);
	}
out:
	/* Published under mu so that dwrite_wait cannot miss the wakeup. */
	pthread_mutex_lock(&w->mu);
	atomic_store(&r->done, true);
	pthread_cond_broadcast(&w->done);
	pthread_mutex_unlock(&w->mu);
}

/* Records a failed write: the node stops, the Raft log keeps the entries. */
static void write_failed(struct dwrite *w, char *err)
{
	snprintf(w->err, sizeof w->err, "write of applied state failed: %s",
	         err);
	rocksdb_free(err);
	atomic_store(&w->failed, true);
}

/* An item's rows are in RocksDB: its slots leave the read filter. */
static void release_slots(struct dwrite *w, const struct item *it)
{
	for (size_t i = 0; i < it->nslots; i++) {
		atomic_fetch_sub_explicit(&w->filter[it->slots[i]], 1,
		                          memory_order_release);
	}
}

static void *writer_main(void *arg)
{
	struct dwrite *w = arg;

	pthread_setname_np(pthread_self(),
	                   "data-writer"); /* for top and perf */
	/* RocksDB's per-thread perf counters (on by default, counting) cost
	 * ~8 % of this thread's memtable inserts; nothing reads them. */
	rocksdb_set_perf_level(rocksdb_disable);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct item *list;
		size_t bytes = 0;
		uint64_t n = 0, merged_n = 0;

		while (w->head == NULL && !w->stop) {
			struct timespec ts;
			w->idle = true;
			/* Submits below DWRITE_WAKE_BYTES do not signal: a
			 * light load is written within DWRITE_IDLE_MS. */
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += DWRITE_IDLE_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			(void)pthread_cond_timedwait(&w->work, &w->mu, &ts);
		}
		w->idle = false;
		if (w->head == NULL) {
			break; /* stopping and nothing left */
		}
		list = w->head;
		w->head = w->tail = NULL;
		pthread_mutex_unlock(&w->mu);
		while (list != NULL) {
			struct item *it = list, *last = NULL;
			rocksdb_writebatch_t *merged = NULL;
			char *err = NULL;

			if (mergeable(it) && !atomic_load(&w->failed)) {
				merged = merge_run(it, &last);
			}
			if (merged != NULL) {
				rocksdb_write(w->db, w->wo, merged, &err);
				rocksdb_writebatch_destroy(merged);
				if (err != NULL) {
					write_failed(w, err);
				}
				/* Its items are written: only their
				 * release below remains (up to the item
				 * after the run, read before last is
				 * freed). */
				struct item *after = last->next;
				while (list != after) {
					it = list;
					list = it->next;
					rocksdb_writebatch_destroy(it->b);
					release_slots(w, it);
					bytes += it->bytes;
					n++;
					merged_n++;
					free(it);
				}
				continue;
			}
			list = it->next;
			if (it->req != NULL) {
				run_req(w, it->req);
				n++;
				free(it);
				continue;
			}
			/* After a failure the rest is dropped: the node stops,
			 * and the Raft log still holds these entries. */
			if (!atomic_load(&w->failed)) {
				if (it->wi != NULL) {
					rocksdb_write_writebatch_wi(
					    w->db, w->wo, it->wi, &err);
				} else {
					rocksdb_write(w->db, w->wo, it->b,
					              &err);
				}
				if (err != NULL) {
					write_failed(w, err);
				}
			}
			if (it->wi != NULL) {
				rocksdb_writebatch_wi_clear(it->wi);
				keep_spare(w, it->wi);
			} else {
				rocksdb_writebatch_destroy(it->b);
			}
			release_slots(w, it);
			bytes += it->bytes;
			n++;
			free(it);
		}
		check_memtable(w, bytes);
		pthread_mutex_lock(&w->mu);
		w->queued_bytes -= bytes;
		w->stats.batches += n;
		w->stats.merged += merged_n;
		atomic_fetch_add(&w->written, n);
		pthread_cond_broadcast(&w->done);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int dwrite_start(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
                 const rocksdb_writeoptions_t *wo, size_t max_bytes,
                 struct dwrite **out)
{
	struct dwrite *w = calloc(1, sizeof *w);

	*out = NULL;
	if (w == NULL) {
		return -1;
	}
	w->db = db;
	w->cf = cf;
	w->wo = wo;
	atomic_init(&w->want_flush, false);
	w->max_bytes = max_bytes != 0 ? max_bytes : DWRITE_MAX_BYTES;
	atomic_init(&w->submitted, 0);
	atomic_init(&w->written, 0);
	atomic_init(&w->failed, false);
	for (size_t i = 0; i < DWRITE_FILTER_SLOTS; i++) {
		atomic_init(&w->filter[i], 0);
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_cond_init(&w->done, NULL);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		goto err_thread;
	}
	*out = w;
	return 0;

err_thread:
	pthread_cond_destroy(&w->done);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->mu);
	free(w);
	return -1;
}

void dwrite_stop(struct dwrite *w)
{
	if (w == NULL) {
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	for (size_t i = 0; i < w->nspares; i++) {
		rocksdb_writebatch_wi_destroy(w->spares[i]);
	}
	free(w->spares);
	pthread_cond_destroy(&w->done);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* Under mu. */
static void wake_locked(struct dwrite *w)
{
	if (w->idle) {
		w->idle = false;
		pthread_cond_signal(&w->work);
	}
}

/* Under mu: appends `it` to the queue. */
static void enqueue_locked(struct dwrite *w, struct item *it)
{
	if (w->tail != NULL) {
		w->tail->next = it;
	} else {
		w->head = it;
	}
	w->tail = it;
	atomic_fetch_add(&w->submitted, 1);
}

static int submit(struct dwrite *w, rocksdb_writebatch_t *b,
                  rocksdb_writebatch_wi_t *wi, const uint64_t *hashes,
                  size_t nhashes)
{
	struct item *it;
	size_t bytes;

	if (atomic_load(&w->failed)) {
		if (wi != NULL) {
			rocksdb_writebatch_wi_destroy(wi);
		} else {
			rocksdb_writebatch_destroy(b);
		}
		return -1;
	}
	if (wi != NULL) {
		(void)rocksdb_writebatch_wi_data(wi, &bytes);
	} else {
		(void)rocksdb_writebatch_data(b, &bytes);
	}
	it = malloc(sizeof *it + nhashes * sizeof it->slots[0]);
	if (it == NULL) {
		abort(); /* as store_xmalloc: no partial apply */
	}
	it->b = b;
	it->wi = wi;
	it->req = NULL;
	it->bytes = bytes;
	it->next = NULL;
	it->nslots = nhashes;
	for (size_t i = 0; i < nhashes; i++) {
		it->slots[i] =
		    (uint32_t)(hashes[i] & (DWRITE_FILTER_SLOTS - 1));
		atomic_fetch_add_explicit(&w->filter[it->slots[i]], 1,
		                          memory_order_relaxed);
	}
	pthread_mutex_lock(&w->mu);
	if (w->queued_bytes > 0 && w->queued_bytes + bytes > w->max_bytes) {
		w->stats.waits++;
		wake_locked(w);
		do {
			pthread_cond_wait(&w->done, &w->mu);
		} while (w->queued_bytes > 0 &&
		         w->queued_bytes + bytes > w->max_bytes);
	}
	enqueue_locked(w, it);
	w->queued_bytes += bytes;
	/* Small batches wait for company: a wakeup per entry cost the
	 * reactor a futex call and the CPU a context switch for a few
	 * hundred bytes. Whatever needs them written drains, which wakes
	 * the writer. */
	if (w->queued_bytes >= DWRITE_WAKE_BYTES) {
		wake_locked(w);
	}
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int dwrite_submit_req(struct dwrite *w, struct dwrite_req *r)
{
	struct item *it = malloc(sizeof *it);

	if (it == NULL) {
		abort(); /* as store_xmalloc */
	}
	r->snap = NULL;
	r->rv = -1;
	atomic_init(&r->done, false);
	memset(it, 0, sizeof *it);
	it->req = r;
	pthread_mutex_lock(&w->mu);
	if (atomic_load(&w->failed)) {
		atomic_store(&r->done, true);
		pthread_mutex_unlock(&w->mu);
		free(it);
		return -1;
	}
	enqueue_locked(w, it);
	wake_locked(w);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int dwrite_wait(struct dwrite *w, struct dwrite_req *r)
{
	if (!atomic_load(&r->done)) {
		pthread_mutex_lock(&w->mu);
		while (!atomic_load(&r->done)) {
			pthread_cond_wait(&w->done, &w->mu);
		}
		pthread_mutex_unlock(&w->mu);
	}
	return r->rv;
}

bool dwrite_want_flush(struct dwrite *w)
{
	return atomic_load_explicit(&w->want_flush, memory_order_relaxed);
}

int dwrite_drain(struct dwrite *w)
{
	uint64_t target = atomic_load(&w->submitted);

	if (atomic_load(&w->written) < target) {
		pthread_mutex_lock(&w->mu);
		w->stats.drains++;
		wake_locked(w);
		while (atomic_load(&w->written) < target) {
			pthread_cond_wait(&w->done, &w->mu);
		}
		pthread_mutex_unlock(&w->mu);
	}
	return atomic_load(&w->failed) ? -1 : 0;
}

int dwrite_submit(struct dwrite *w, rocksdb_writebatch_t *b,
                  const uint64_t *hashes, size_t nhashes)
{
	return submit(w, b, NULL, hashes, nhashes);
}

int dwrite_submit_wi(struct dwrite *w, rocksdb_writebatch_wi_t *wi,
                     const uint64_t *hashes, size_t nhashes)
{
	return submit(w, NULL, wi, hashes, nhashes);
}

int dwrite_maybe_queued(struct dwrite *w, uint64_t hash)
{
	return atomic_load_explicit(
	           &w->filter[hash & (DWRITE_FILTER_SLOTS - 1)],
	           memory_order_acquire) != 0;
}

const char *dwrite_error(struct dwrite *w)
{
	return atomic_load(&w->failed) ? w->err : "";
}

void dwrite_stats(struct dwrite *w, struct dwrite_stats *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->stats;
	pthread_mutex_unlock(&w->mu);
}
