/* libraft's raft_io on RocksDB, shared by every group of the node; see io.h.
 *
 * RocksDB layout (format 1). All integers big endian.
 *
 *   CF "raft_log"    key   group u32 | index u64                (12 bytes)
 *                    value u8 format (1) | u8 entry type (RAFT_COMMAND,
 *                          RAFT_BARRIER, RAFT_CHANGE) | u64 term | payload
 *   CF "raft_state"  key   group u32 | 'm'                       (5 bytes)
 *                    value u8 format (1) | u64 term | u64 voted_for
 *                    key   group u32 | 's'
 *                    value u8 format (1) | u64 index | u64 term
 *                          | u64 configuration index
 *                          | u32 n_servers | n x { u64 id | u8 role
 *                            | u16 address length | address }
 *                          | u32 data length | data (the fsm's manifest)
 *
 * A group's log is one key range, so truncation and compaction are one
 * DeleteRange each, and a group's keys sort by index. The log holds no gaps:
 * `load` checks that the entries run without holes from the first one and
 * reach the snapshot.
 *
 * Life of a write: append/truncate/snapshot_put/set_term/set_vote add their
 * operations to `pending` (the batch of this loop turn) and, when the caller
 * waits, a request to its completion list. A uv_prepare handle hands
 * `pending` to the writer thread's queue at the end of each loop turn
 * (up to MAX_INFLIGHT batches). The writer takes every queued batch,
 * writes them in order, syncs the WAL once for all of them (group
 * commit), then wakes the loop (uv_async), which fires the completions in
 * order. Batches handed over during a sync share the next one, which
 * starts as soon as the previous ends, not when the loop gets round to
 * the result. bootstrap and recover write directly (unsynced) and force
 * the next batch to sync, so they cost no fsync of their own.
 *
 * Durability (with a `wal_dir`, as the node runs): each batch goes first to
 * our own write-ahead log (raft/wal.c: the batch's bytes as one record with
 * a hardware CRC-32C, then one fdatasync), then to RocksDB with RocksDB's
 * WAL off, both under `wal_mu` so the two see the same order. At start the
 * records are written again into RocksDB (blind puts and deletes, so
 * replaying a record already flushed changes nothing) before anything is
 * read. When the log moves to a new segment, a thread-pool job flushes the
 * raft_log and raft_state memtables and deletes the older segments: what
 * they wrote is in SST files then. Without a `wal_dir` RocksDB's own WAL is
 * used (synced with FlushWAL), which computes its CRCs in software on
 * Debian's build. */
#include "raft/io.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "raft/bytes.h"
#include "raft/wal.h"

#define FORMAT 1
#define LOG_KEY_SIZE 12
#define STATE_KEY_SIZE 5
#define LOG_VALUE_HEADER 10
#define META_VALUE_SIZE 17
#define DEFAULT_TICK_MS 50

enum {
	REQ_APPEND = 1,
	REQ_SNAPSHOT_PUT,
	REQ_SEND, /* a send waiting to be released or completed */
	REQ_SNAPSHOT_GET,
	REQ_CLOSE
};

struct rio;

/* A request whose callback is still due. Lives in one FIFO at a time: a
 * batch's completions, an instance's held sends, or the store's `soon`
 * queue of completions run at the next flush. */
struct rio_req {
	struct rio_req *next;
	int type;
	int status;
	struct rio *io;
	union {
		struct raft_io_append *append;
		struct raft_io_snapshot_put *put;
		struct raft_io_send *send;
		struct raft_io_snapshot_get *get;
	} req;
	struct raft_snapshot *snapshot; /* REQ_SNAPSHOT_GET result */
	/* REQ_SNAPSHOT_PUT of an install: libraft's array of the snapshot's
	 * buffers, which libraft before 0.17.1 leaks when it discards the
	 * install (see put_done). */
	struct raft_buffer *install_bufs;
	raft_index snapshot_index; /* REQ_SNAPSHOT_PUT: the snapshot's */
	struct raft_message msg;   /* REQ_SEND while held */
	char *address;             /* REQ_SEND while held: own copy */
};

const uint64_t rio_sync_bounds_ns[RIO_SYNC_BUCKETS] = {
    100000,     250000,     500000,      1000000,     2500000,   5000000,
    10000000,   25000000,   50000000,    100000000,   250000000, 500000000,
    1000000000, 2500000000, 5000000000u, 10000000000u};

struct rio_fifo {
	struct rio_req *head;
	struct rio_req *tail;
};

struct rio_batch {
	rocksdb_writebatch_t *wb;
	struct rio_fifo done; /* completions, in order */
	uint64_t gen;
	uint64_t n_groups;
	uint64_t n_entries;
	uint64_t n_bytes;
	uint64_t n_appends;
	uint64_t n_puts;
	bool force;        /* write (and so sync) even if empty */
	int status;        /* set by the writer */
	uint64_t write_ns; /* set by the writer: the write, then the sync */
	uint64_t sync_ns;
	bool synced; /* set by the writer: the last batch of its sync */
	struct rio_batch *next; /* in the writer's queues, or the spares */
	size_t spare_size;      /* as a spare: its size when written */
	char errmsg[RAFT_ERRMSG_BUF_SIZE];
};

/* A FIFO of batches. */
struct rio_bq {
	struct rio_batch *head;
	struct rio_batch *tail;
};

/* An install waiting for the owner's state transfer (rio_hooks.install). */
struct rio_install {
	struct rio *io; /* NULL once cancelled */
	struct raft_io_snapshot_put *req;
	const struct raft_snapshot *snap; /* libraft's, valid until cb */
	raft_io_snapshot_put_cb cb;
};

/* Payload sizes of the newest entries of one group's log, for
 * rio_recent_entry_bytes: the log has no gaps, so entry `i` (one of
 * last - n + 1 .. last) lives in slot i % RIO_RECENT_ENTRIES. */
struct rio_recent {
	uint64_t len[RIO_RECENT_ENTRIES];
	raft_index last; /* index of the newest entry held (if n > 0) */
	unsigned n;
	uint64_t sum; /* of the n entries held */
};

/* One group's instance. */
struct rio {
	struct raft_io *io;
	struct rio_store *s;
	uint32_t group;
	struct rio_hooks hooks;
	raft_io_tick_cb tick;
	raft_io_recv_cb recv;
	bool started;
	bool closing;
	bool close_queued;
	raft_io_close_cb close_cb;
	raft_term term;
	raft_id vote;
	raft_index next_index; /* index the next append starts at */
	uint64_t meta_gen;     /* batch holding our latest term/vote */
	uint64_t last_gen;     /* last batch we wrote into (to count groups) */
	unsigned outstanding;  /* requests whose callback is still due */
	struct rio_fifo held;  /* sends waiting for meta_gen to be on disk */
	uint64_t install_from; /* sender of the last InstallSnapshot */
	struct rio_install *install; /* waiting for the state transfer */
	struct rio_recent recent;
	raft_index snapshot_index;    /* latest snapshot stored (0 = none) */
	uint64_t snapshots_sent;      /* InstallSnapshot messages sent */
	uint64_t snapshots_installed; /* peers' snapshots stored */
	bool in_held_list;
	struct rio *held_next;
	struct rio *prev;
	struct rio *next;
	bool quiet; /* not ticked (rio_set_quiet) */
	/* Started, not closing and not quiet: on the store's ticking list. */
	bool ticking;
	struct rio *tick_prev;
	struct rio *tick_next;
};

/* Open-addressing map group -> instance (linear probing, backward-shift
 * deletion). */
struct rio_map {
	struct rio **slots;
	size_t cap; /* power of two */
	size_t n;
};

struct rio_store {
	uv_loop_t *loop;
	rocksdb_t *db;
	rocksdb_column_family_handle_t *cf_log;
	rocksdb_column_family_handle_t *cf_state;
	rocksdb_writeoptions_t *wo_sync;
	rocksdb_writeoptions_t *wo_plain;
	rocksdb_writeoptions_t *wo_nowal; /* RocksDB WAL off: ours has it */
	rocksdb_readoptions_t *ro;

	/* Our write-ahead log (NULL: RocksDB's). `wal_mu` orders its
	 * appends with the RocksDB writes of the same batches (writer thread
	 * and loop thread). */
	struct wal *wal;
	pthread_mutex_t wal_mu;
	uv_work_t release;     /* flush, then drop older segments */
	bool releasing;        /* `release` queued or running */
	uint64_t release_to;   /* segments below it go (set before queue) */
	uint64_t released_to;  /* segments below it are gone */
	int release_rv;        /* set by the job */
	char release_err[256]; /* set by the job */
	bool db_unmarked;      /* open: the database has no WAL mark yet */
	unsigned tick_ms;
	uint64_t rng;
	rio_send_fn send;
	rio_send_ref_fn send_ref; /* AppendEntries with entries, if set */
	void *send_data;

	struct rio *ios;     /* every instance, started or not */
	struct rio *ticking; /* the instances the timer ticks */
	struct rio_map map;
	unsigned n_started;
	unsigned n_quiet; /* started instances that are quiet */
	struct rio *held; /* instances with held sends */

	uv_timer_t timer;
	uv_prepare_t prepare;
	uv_async_t async;
	bool timer_running;

	struct rio_batch *pending; /* filling, loop thread only */
	unsigned inflight;         /* batches handed to the writer */
	struct rio_batch *spare;   /* written batches kept for reuse */
	size_t n_spare;
	size_t spare_bytes; /* their buffers' sizes when last written */
	uint64_t next_gen;
	uint64_t done_gen;
	struct rio_fifo soon;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rio_bq job;      /* handed to the writer (mu) */
	struct rio_bq job_done; /* written, not yet collected (mu) */
	bool stop;              /* (mu) */

	bool errored;
	char errmsg[RAFT_ERRMSG_BUF_SIZE];
	bool closing;
	rio_store_close_cb close_cb;
	void *close_data;
	/* The linked libraft leaks a discarded install's buffer array
	 * (before 0.17.1, which added raft_version_number). */
	bool install_leak;
	unsigned open_handles;
	struct rio_stats stats;
};

/* ---- byte helpers ---- */

static void log_key(uint8_t *k, uint32_t group, uint64_t index)
{
	bytes_put32(k, group);
	bytes_put64(k + 4, index);
}

static void state_key(uint8_t *k, uint32_t group, char kind)
{
	bytes_put32(k, group);
	k[4] = (uint8_t)kind;
}

static void fifo_push(struct rio_fifo *f, struct rio_req *r)
{
	r->next = NULL;
	if (f->tail == NULL) {
		f->head = r;
	} else {
		f->tail->next = r;
	}
	f->tail = r;
}

static struct rio_req *fifo_pop(struct rio_fifo *f)
{
	struct rio_req *r = f->head;
	if (r != NULL) {
		f->head = r->next;
		if (f->head == NULL) {
			f->tail = NULL;
		}
	}
	return r;
}

/* ---- recent entry sizes ---- */

/* Entry `index` of `len` payload bytes joins the log after the newest. */
static void recent_push(struct rio_recent *w, raft_index index, uint64_t len)
{
	unsigned slot = (unsigned)(index % RIO_RECENT_ENTRIES);

	if (w->n > 0 && index != w->last + 1) {
		/* The callers keep the log contiguous; start over if not. */
		w->n = 0;
		w->sum = 0;
	}
	if (w->n == RIO_RECENT_ENTRIES) {
		w->sum -= w->len[slot]; /* the oldest: index - n */
	} else {
		w->n++;
	}
	w->len[slot] = len;
	w->sum += len;
	w->last = index;
}

/* Entries from `index` on leave the log (truncation). */
static void recent_drop_from(struct rio_recent *w, raft_index index)
{
	while (w->n > 0 && w->last >= index) {
		w->sum -= w->len[w->last % RIO_RECENT_ENTRIES];
		w->n--;
		w->last--;
	}
}

/* Entries before `index` leave the log (compaction). */
static void recent_drop_before(struct rio_recent *w, raft_index index)
{
	while (w->n > 0 && w->last - (w->n - 1) < index) {
		w->sum -= w->len[(w->last - (w->n - 1)) % RIO_RECENT_ENTRIES];
		w->n--;
	}
}

/* ---- group map ---- */

static size_t map_hash(uint32_t group, size_t cap)
{
	uint64_t h = (uint64_t)group * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 32) & (cap - 1);
}

static struct rio *map_get(const struct rio_map *m, uint32_t group)
{
	size_t i;
	if (m->cap == 0) {
		return NULL;
	}
	for (i = map_hash(group, m->cap); m->slots[i] != NULL;
	     i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i]->group == group) {
			return m->slots[i];
		}
	}
	return NULL;
}

static int map_put(struct rio_map *m, struct rio *r)
{
	size_t i;
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap == 0 ? 16 : m->cap * 2;
		struct rio **slots = calloc(cap, sizeof *slots);
		size_t j;
		if (slots == NULL) {
			return RAFT_NOMEM;
		}
		for (j = 0; j < m->cap; j++) {
			struct rio *x = m->slots[j];
			if (x != NULL) {
				i = map_hash(x->group, cap);
				while (slots[i] != NULL) {
					i = (i + 1) & (cap - 1);
				}
				slots[i] = x;
			}
		}
		free(m->slots);
		m->slots = slots;
		m->cap = cap;
	}
	i = map_hash(r->group, m->cap);
	while (m->slots[i] != NULL) {
		i = (i + 1) & (m->cap - 1);
	}
	m->slots[i] = r;
	m->n++;
	return 0;
}

static void map_del(struct rio_map *m, uint32_t group)
{
	size_t i, j;
	if (m->cap == 0) {
		return;
	}
	i = map_hash(group, m->cap);
	while (m->slots[i] != NULL && m->slots[i]->group != group) {
		i = (i + 1) & (m->cap - 1);
	}
	if (m->slots[i] == NULL) {
		return;
	}
	m->slots[i] = NULL;
	m->n--;
	/* Shift back the rest of the cluster so probing still finds it. */
	j = i;
	for (;;) {
		size_t home;
		j = (j + 1) & (m->cap - 1);
		if (m->slots[j] == NULL) {
			break;
		}
		home = map_hash(m->slots[j]->group, m->cap);
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && (home <= i && home > j))) {
			m->slots[i] = m->slots[j];
			m->slots[j] = NULL;
			i = j;
		}
	}
}

/* ---- configuration codec (snapshot metadata) ---- */

static size_t conf_size(const struct raft_configuration *c)
{
	size_t n = 4;
	unsigned i;
	for (i = 0; i < c->n; i++) {
		n += 8 + 1 + 2 + strlen(c->servers[i].address);
	}
	return n;
}

static int conf_encode(const struct raft_configuration *c, uint8_t *p)
{
	unsigned i;
	bytes_put32(p, c->n);
	p += 4;
	for (i = 0; i < c->n; i++) {
		size_t len = strlen(c->servers[i].address);
		if (len > UINT16_MAX) {
			return RAFT_NAMETOOLONG;
		}
		bytes_put64(p, c->servers[i].id);
		p[8] = (uint8_t)c->servers[i].role;
		p[9] = (uint8_t)(len >> 8);
		p[10] = (uint8_t)len;
		memcpy(p + 11, c->servers[i].address, len);
		p += 11 + len;
	}
	return 0;
}

static int conf_decode(const uint8_t *p, size_t len,
                       struct raft_configuration *c, size_t *used)
{
	uint32_t n, i;
	size_t off = 4;
	char addr[UINT16_MAX + 1];

	if (len < 4) {
		return RAFT_CORRUPT;
	}
	n = bytes_get32(p);
	for (i = 0; i < n; i++) {
		size_t alen;
		int rv;
		if (len - off < 11) {
			return RAFT_CORRUPT;
		}
		alen = (size_t)p[off + 9] << 8 | p[off + 10];
		if (len - off - 11 < alen) {
			return RAFT_CORRUPT;
		}
		memcpy(addr, p + off + 11, alen);
		addr[alen] = '\0';
		rv = raft_configuration_add(c, bytes_get64(p + off), addr,
		                            p[off + 8]);
		if (rv != 0) {
			return rv == RAFT_NOMEM ? rv : RAFT_CORRUPT;
		}
		off += 11 + alen;
	}
	*used = off;
	return 0;
}

static void soon_push(struct rio_store *s, struct rio_req *q)
{
	fifo_push(&s->soon, q);
	uv_ref((uv_handle_t *)&s->prepare);
}

/* ---- batches and the writer thread ---- */

static void batch_free(struct rio_batch *b)
{
	if (b == NULL) {
		return;
	}
	rocksdb_writebatch_destroy(b->wb);
	free(b);
}

/* Written batches kept for reuse, and the bytes their buffers may hold
 * together: batches past either are freed rather than kept. */
#define SPARES 9 /* MAX_INFLIGHT + the turn's own */
#define SPARE_MAX_BYTES ((size_t)64 << 20)

/* Keeps a written batch for a later turn: its WriteBatch keeps its
 * buffer, so the next one does not grow a fresh buffer through
 * reallocations and page faults (a turn's batch holds every appended
 * payload: up to tens of MB). Several are kept because up to
 * MAX_INFLIGHT batches are with the writer at once: with one spare, a
 * follower receiving entries every turn grew a new buffer for most of
 * them. */
static void batch_recycle(struct rio_store *s, struct rio_batch *b)
{
	size_t size;

	if (b == NULL) {
		return;
	}
	rocksdb_writebatch_data(b->wb, &size);
	if (s->n_spare >= SPARES || s->spare_bytes + size > SPARE_MAX_BYTES) {
		batch_free(b);
		return;
	}
	rocksdb_writebatch_clear(b->wb);
	b->done.head = b->done.tail = NULL;
	b->gen = b->n_groups = b->n_entries = b->n_bytes = 0;
	b->n_appends = b->n_puts = 0;
	b->force = false;
	b->status = 0;
	b->write_ns = b->sync_ns = 0;
	b->synced = false;
	b->errmsg[0] = '\0';
	b->spare_size = size;
	b->next = s->spare;
	s->spare = b;
	s->n_spare++;
	s->spare_bytes += size;
}

/* The batch of this loop turn, created on demand. */
static struct rio_batch *pending_batch(struct rio_store *s)
{
	struct rio_batch *b = s->pending;
	if (b != NULL) {
		return b;
	}
	if (s->spare != NULL) {
		b = s->spare;
		s->spare = b->next;
		b->next = NULL;
		s->n_spare--;
		s->spare_bytes -= b->spare_size;
	} else {
		b = calloc(1, sizeof *b);
		if (b == NULL) {
			return NULL;
		}
		b->wb = rocksdb_writebatch_create();
	}
	b->gen = s->next_gen++;
	s->pending = b;
	uv_ref((uv_handle_t *)&s->prepare);
	return b;
}

/* Counts `r` among the groups of batch `b` once. */
static void batch_touch(struct rio_batch *b, struct rio *r)
{
	if (r->last_gen != b->gen) {
		r->last_gen = b->gen;
		b->n_groups++;
	}
}

/* Writes `wb` (if not NULL or empty) to the log's storage, then, if `sync`,
 * makes it and everything written before durable. Fills `ns` with the time
 * spent writing and syncing when not NULL. Any thread. */
static int log_write(struct rio_store *s, rocksdb_writebatch_t *wb, bool sync,
                     uint64_t ns[2], char *msg, size_t msglen)
{
	char *err = NULL;
	uint64_t t0 = uv_hrtime(), t1;
	size_t len;
	int rv = 0;

	if (s->wal == NULL) {
		/* Write, then sync the WAL: a write with sync=true would
		 * hold RocksDB's write queue during the fsync and stall
		 * every other writer of the database (the data writer's
		 * unsynced apply writes); SyncWAL lets them go on. */
		if (wb != NULL && rocksdb_writebatch_count(wb) > 0) {
			rocksdb_write(s->db, s->wo_plain, wb, &err);
		}
		t1 = uv_hrtime();
		if (err == NULL && sync) {
			rocksdb_flush_wal(s->db, 1, &err);
		}
		goto out;
	}
	pthread_mutex_lock(&s->wal_mu);
	if (wb != NULL && rocksdb_writebatch_count(wb) > 0) {
		const char *rep = rocksdb_writebatch_data(wb, &len);
		if (wal_append(s->wal, rep, len, msg, msglen) != 0) {
			pthread_mutex_unlock(&s->wal_mu);
			return -1;
		}
		rocksdb_write(s->db, s->wo_nowal, wb, &err);
	}
	t1 = uv_hrtime();
	/* An empty batch (a forced one) syncs what was written before. */
	if (err == NULL && sync) {
		rv = wal_sync(s->wal, msg, msglen);
	}
	pthread_mutex_unlock(&s->wal_mu);
out:
	if (ns != NULL) {
		ns[0] = t1 - t0;
		ns[1] = uv_hrtime() - t1;
	}
	if (err != NULL) {
		snprintf(msg, msglen, "%s", err);
		free(err);
		return -1;
	}
	return rv;
}

static void bq_push(struct rio_bq *q, struct rio_batch *b)
{
	b->next = NULL;
	if (q->tail == NULL) {
		q->head = b;
	} else {
		q->tail->next = b;
	}
	q->tail = b;
}

/* Moves all of `from` to the end of `to`. */
static void bq_splice(struct rio_bq *to, struct rio_bq *from)
{
	if (from->head == NULL) {
		return;
	}
	if (to->tail == NULL) {
		to->head = from->head;
	} else {
		to->tail->next = from->head;
	}
	to->tail = from->tail;
	from->head = from->tail = NULL;
}

/* Fails every batch of `q`: none of them is known to be durable. */
static void batches_fail(struct rio_bq *q, const char *what, const char *msg)
{
	for (struct rio_batch *b = q->head; b != NULL; b = b->next) {
		b->status = RAFT_IOERR;
		snprintf(b->errmsg, sizeof b->errmsg,
		         "%s of the raft log failed: %s", what, msg);
	}
}

/* Writes the batches of `q` in order, then makes them durable with one
 * sync (group commit): batches the loop handed over while the previous
 * sync ran share the next one. A failed write fails them all, the ones
 * written before it too: they share the sync that will not happen (and
 * the WAL refuses every later write anyway). */
static void batches_write(struct rio_store *s, struct rio_bq *q)
{
	char msg[sizeof q->head->errmsg - 64];
	struct rio_batch *b, *last = NULL;
	uint64_t ns[2];

	for (b = q->head; b != NULL; b = b->next) {
		ns[0] = ns[1] = 0;
		if (log_write(s, b->wb, false, ns, msg, sizeof msg) != 0) {
			batches_fail(q, "write", msg);
			return;
		}
		b->write_ns = ns[0];
		last = b;
	}
	if (last == NULL) {
		return;
	}
	ns[0] = ns[1] = 0;
	if (log_write(s, NULL, true, ns, msg, sizeof msg) != 0) {
		batches_fail(q, "sync", msg);
	}
	last->sync_ns = ns[1];
	last->synced = true;
}

static void *writer_main(void *arg)
{
	struct rio_store *s = arg;

	pthread_setname_np(pthread_self(), "raft-log"); /* for top and perf */
	rocksdb_set_perf_level(rocksdb_disable);        /* nothing reads them */
	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct rio_bq q;
		while (!s->stop && s->job.head == NULL) {
			pthread_cond_wait(&s->cv, &s->mu);
		}
		if (s->job.head == NULL) {
			break;
		}
		q = s->job;
		s->job.head = s->job.tail = NULL;
		pthread_mutex_unlock(&s->mu);
		batches_write(s, &q);
		pthread_mutex_lock(&s->mu);
		bq_splice(&s->job_done, &q);
		uv_async_send(&s->async);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Batches with the writer at most: more wait in `pending`, which then
 * grows instead. */
#define MAX_INFLIGHT 8

/* Hands `pending` to the writer. It need not be idle: what it receives
 * while syncing goes into its next sync, which starts as soon as the
 * previous one ends rather than when the loop has taken the result. */
static void submit(struct rio_store *s)
{
	struct rio_batch *b = s->pending;

	if (b == NULL || s->inflight >= MAX_INFLIGHT) {
		return;
	}
	if (rocksdb_writebatch_count(b->wb) == 0 && !b->force &&
	    b->done.head == NULL) {
		s->pending = NULL; /* nothing to write */
		batch_recycle(s, b);
		return;
	}
	s->pending = NULL;
	s->inflight++;
	uv_ref((uv_handle_t *)&s->async);
	pthread_mutex_lock(&s->mu);
	bq_push(&s->job, b);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* The prepare handle keeps the loop alive while work waits for it. */
static void update_ref(struct rio_store *s)
{
	if (s->closing && s->open_handles > 0) {
		return;
	}
	if (s->pending != NULL || s->soon.head != NULL) {
		uv_ref((uv_handle_t *)&s->prepare);
	} else {
		uv_unref((uv_handle_t *)&s->prepare);
	}
}

static void notify(struct rio *r)
{
	if (r->hooks.notify != NULL) {
		r->hooks.notify(r->hooks.data);
	}
}

/* Queues the close callback once nothing is due any more. */
static void maybe_closed(struct rio *r)
{
	struct rio_req *q;

	if (!r->closing || r->outstanding != 0 || r->close_queued) {
		return;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		abort(); /* cannot report a close failure to libraft */
	}
	r->close_queued = true;
	q->type = REQ_CLOSE;
	q->io = r;
	soon_push(r->s, q);
}

/* Runs a snapshot put's callback. A discarded install (failed, or its
 * instance closing: libraft is then unavailable) loses the array holding
 * the snapshot's buffer in libraft before 0.17.1 (fixed upstream by
 * 2a38d3d "replication: Fix handling of new term when snapshotting"):
 * that libraft frees the buffer but not the array, so we do, after it. */
static void put_done(struct rio_req *q, int status)
{
	struct rio *r = q->io;
	struct raft_buffer *orphan = NULL;

	if (q->install_bufs != NULL && r->s->install_leak &&
	    (status != 0 || r->closing)) {
		orphan = q->install_bufs;
	}
	if (status == 0) {
		r->snapshot_index = q->snapshot_index; /* stored */
	}
	q->req.put->cb(q->req.put, status);
	raft_free(orphan);
}

static void fire_send(struct rio_req *q)
{
	struct rio *r = q->io;
	if (q->req.send->cb != NULL) {
		q->req.send->cb(q->req.send, q->status);
	}
	free(q->address);
	free(q);
	r->outstanding--;
	notify(r);
	maybe_closed(r);
}

/* Passes a send to the hook now; its completion runs at the next flush. */
static void dispatch_send(struct rio_store *s, struct rio_req *q)
{
	struct rio *r = q->io;
	if (r->closing) {
		q->status = RAFT_CANCELED;
	} else if (s->errored) {
		q->status = RAFT_IOERR;
	} else if (s->send == NULL) {
		q->status = RAFT_NOCONNECTION;
	} else if (s->send_ref != NULL &&
	           q->msg.type == RAFT_IO_APPEND_ENTRIES &&
	           q->msg.append_entries.n_entries > 0) {
		/* The transport may send the payloads from libraft's memory;
		 * then the callback waits until it is done with them. */
		q->status = s->send_ref(s->send_data, r->group, &q->msg,
		                        (struct rio_sent *)q);
		if (q->status == RIO_SEND_LATER) {
			return;
		}
	} else {
		q->status = s->send(s->send_data, r->group, &q->msg);
		if (q->status == 0 && q->msg.type == RAFT_IO_INSTALL_SNAPSHOT) {
			r->snapshots_sent++;
			s->stats.snapshots_sent++;
		}
	}
	soon_push(s, q);
}

/* Releases the held sends whose term/vote is now on disk. */
static void release_held(struct rio_store *s)
{
	struct rio **pp = &s->held;

	while (*pp != NULL) {
		struct rio *r = *pp;
		while (r->held.head != NULL && (r->meta_gen <= s->done_gen ||
		                                r->closing || s->errored)) {
			dispatch_send(s, fifo_pop(&r->held));
		}
		if (r->held.head == NULL) {
			*pp = r->held_next;
			r->in_held_list = false;
			r->held_next = NULL;
		} else {
			pp = &r->held_next;
		}
	}
}

static void run_soon(struct rio_store *s)
{
	struct rio_req *q;

	while ((q = fifo_pop(&s->soon)) != NULL) {
		struct rio *r = q->io;
		switch (q->type) {
		case REQ_SEND:
			fire_send(q);
			break;
		case REQ_SNAPSHOT_GET:
			q->req.get->cb(q->req.get, q->snapshot, q->status);
			free(q);
			r->outstanding--;
			notify(r);
			maybe_closed(r);
			break;
		case REQ_SNAPSHOT_PUT:
			put_done(q, q->status);
			free(q);
			r->outstanding--;
			notify(r);
			maybe_closed(r);
			break;
		case REQ_CLOSE:
			free(q);
			/* The callback may release `r`. */
			if (r->close_cb != NULL) {
				r->close_cb(r->io);
			}
			break;
		default:
			abort();
		}
	}
}

static void maybe_finish_close(struct rio_store *s);

/* Flushes the memtables of the log's column families: what was written
 * to them (by records of our WAL) is then in SST files. Any thread. */
static int flush_log_cfs(struct rio_store *s, char *msg, size_t msglen)
{
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	char *err = NULL;

	rocksdb_flushoptions_set_wait(fo, 1);
	rocksdb_flush_cf(s->db, fo, s->cf_log, &err);
	if (err == NULL) {
		rocksdb_flush_cf(s->db, fo, s->cf_state, &err);
	}
	rocksdb_flushoptions_destroy(fo);
	if (err != NULL) {
		snprintf(msg, msglen, "flush of the raft log's memtables: %s",
		         err);
		free(err);
		return -1;
	}
	return 0;
}

static void release_work(uv_work_t *w)
{
	struct rio_store *s = w->data;

	s->release_rv = flush_log_cfs(s, s->release_err, sizeof s->release_err);
	if (s->release_rv == 0) {
		s->release_rv =
		    wal_release_before(s->wal, s->release_to, s->release_err,
		                       sizeof s->release_err);
	}
}

static void maybe_release(struct rio_store *s);

static void release_done(uv_work_t *w, int status)
{
	struct rio_store *s = w->data;

	s->releasing = false;
	if (status == 0 && s->release_rv == 0) {
		s->released_to = s->release_to;
		s->stats.wal_releases++;
		/* The WAL may have moved on while the job ran: with no write
		 * after it, nothing else would drop those segments. */
		maybe_release(s);
	} else {
		/* The segments stay (the next rotation tries again); a
		 * failing flush fails the log's writes soon enough. */
		s->stats.wal_release_errors++;
		fprintf(stderr, "raft WAL: older segments kept: %s\n",
		        status != 0 ? uv_strerror(status) : s->release_err);
	}
	maybe_finish_close(s);
}

/* Once the WAL moved to a new segment, drops the older ones after a flush,
 * one job at a time. */
static void maybe_release(struct rio_store *s)
{
	uint64_t cur;

	if (s->wal == NULL || s->releasing || s->closing) {
		return;
	}
	cur = wal_current(s->wal);
	if (cur <= s->released_to) {
		return;
	}
	s->release_to = cur;
	s->release.data = s;
	if (uv_queue_work(s->loop, &s->release, release_work, release_done) ==
	    0) {
		s->releasing = true;
	}
}

static void complete_batch(struct rio_store *s, struct rio_batch *b)
{
	struct rio_req *q;

	s->stats.batches++;
	s->stats.syncs += b->synced;
	s->stats.write_ns += b->write_ns;
	s->stats.sync_ns += b->sync_ns;
	if (b->synced) {
		unsigned i = 0;
		while (i < RIO_SYNC_BUCKETS &&
		       b->sync_ns > rio_sync_bounds_ns[i]) {
			i++;
		}
		if (i < RIO_SYNC_BUCKETS) {
			s->stats.sync_hist[i]++;
		}
	}
	s->stats.group_writes += b->n_groups;
	if (b->n_groups > s->stats.max_groups) {
		s->stats.max_groups = b->n_groups;
	}
	if (b->status != 0) {
		s->stats.write_errors++;
		if (!s->errored) {
			s->errored = true;
			memcpy(s->errmsg, b->errmsg, sizeof s->errmsg);
		}
	} else {
		s->stats.appends += b->n_appends;
		s->stats.entries += b->n_entries;
		s->stats.bytes += b->n_bytes;
		s->stats.snapshot_puts += b->n_puts;
		s->done_gen = b->gen;
	}
	release_held(s);
	while ((q = fifo_pop(&b->done)) != NULL) {
		struct rio *r = q->io;
		if (b->status != 0) {
			memcpy(r->io->errmsg, b->errmsg, sizeof r->io->errmsg);
		}
		if (q->type == REQ_APPEND) {
			q->req.append->cb(q->req.append, b->status);
		} else {
			put_done(q, b->status);
		}
		free(q);
		r->outstanding--;
		notify(r);
		maybe_closed(r);
	}
}

static void async_cb(uv_async_t *a)
{
	struct rio_store *s = a->data;
	struct rio_bq q;
	struct rio_batch *b;

	pthread_mutex_lock(&s->mu);
	q = s->job_done;
	s->job_done.head = s->job_done.tail = NULL;
	pthread_mutex_unlock(&s->mu);
	if (q.head == NULL) {
		return;
	}
	for (b = q.head; b != NULL; b = b->next) {
		s->inflight--;
	}
	if (s->inflight == 0) {
		uv_unref((uv_handle_t *)&s->async);
	}
	/* Hand over what accumulated before running callbacks. */
	submit(s);
	while ((b = q.head) != NULL) {
		q.head = b->next;
		complete_batch(s, b);
		batch_recycle(s, b);
	}
	maybe_release(s);
	run_soon(s);
	submit(s);
	update_ref(s);
	maybe_finish_close(s);
}

int rio_store_flush_log(struct rio_store *s, char *errmsg)
{
	return flush_log_cfs(s, errmsg, RAFT_ERRMSG_BUF_SIZE);
}

void rio_store_flush(struct rio_store *s)
{
	run_soon(s);
	submit(s);
	update_ref(s);
}

static void prepare_cb(uv_prepare_t *p)
{
	rio_store_flush(p->data);
}

/* The ticking list holds the started instances that are neither closing
 * nor quiet, so an idle node's timer costs nothing per quiet group. */
static void tick_link(struct rio *r)
{
	struct rio_store *s = r->s;
	if (r->ticking || !r->started || r->closing || r->quiet) {
		return;
	}
	r->ticking = true;
	r->tick_prev = NULL;
	r->tick_next = s->ticking;
	if (s->ticking != NULL) {
		s->ticking->tick_prev = r;
	}
	s->ticking = r;
}

static void tick_unlink(struct rio *r)
{
	struct rio_store *s = r->s;
	if (!r->ticking) {
		return;
	}
	if (r->tick_prev != NULL) {
		r->tick_prev->tick_next = r->tick_next;
	} else {
		s->ticking = r->tick_next;
	}
	if (r->tick_next != NULL) {
		r->tick_next->tick_prev = r->tick_prev;
	}
	r->ticking = false;
	r->tick_prev = r->tick_next = NULL;
}

static void timer_cb(uv_timer_t *t)
{
	struct rio_store *s = t->data;
	struct rio *r = s->ticking;

	while (r != NULL) {
		struct rio *next = r->tick_next;
		if (r->tick != NULL) {
			r->tick(r->io);
			notify(r);
		}
		r = next;
	}
}

void rio_set_quiet(struct raft_io *io, bool quiet)
{
	struct rio *r = io->impl;
	if (r == NULL || r->quiet == quiet) {
		return;
	}
	r->quiet = quiet;
	if (quiet) {
		tick_unlink(r);
		if (r->started && !r->closing) {
			r->s->n_quiet++;
		}
	} else {
		if (r->started && !r->closing) {
			r->s->n_quiet--;
		}
		tick_link(r);
	}
}

unsigned rio_store_quiet_count(const struct rio_store *s)
{
	return s->n_quiet;
}

/* ---- raft_io methods ---- */

static int io_init(struct raft_io *io, raft_id id, const char *address)
{
	(void)io;
	(void)id;
	(void)address;
	return 0;
}

static int read_meta(struct rio *r, raft_term *term, raft_id *vote)
{
	struct rio_store *s = r->s;
	uint8_t k[STATE_KEY_SIZE];
	char *err = NULL;
	size_t len;
	char *v;

	state_key(k, r->group, 'm');
	v = rocksdb_get_cf(s->db, s->ro, s->cf_state, (const char *)k, sizeof k,
	                   &len, &err);
	if (err != NULL) {
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "read term and vote of group %u: %s", r->group, err);
		free(err);
		return RAFT_IOERR;
	}
	*term = 0;
	*vote = 0;
	if (v == NULL) {
		return 0;
	}
	if (len != META_VALUE_SIZE || (uint8_t)v[0] != FORMAT) {
		free(v);
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "group %u: bad term/vote record", r->group);
		return RAFT_CORRUPT;
	}
	*term = bytes_get64((const uint8_t *)v + 1);
	*vote = bytes_get64((const uint8_t *)v + 9);
	free(v);
	return 0;
}

static void encode_meta(uint8_t *v, raft_term term, raft_id vote)
{
	v[0] = FORMAT;
	bytes_put64(v + 1, term);
	bytes_put64(v + 9, vote);
}

/* Reads the snapshot record; *out NULL when there is none. */
static int read_snapshot(struct rio *r, struct raft_snapshot **out)
{
	struct rio_store *s = r->s;
	uint8_t k[STATE_KEY_SIZE];
	char *err = NULL;
	struct raft_snapshot *snap;
	const uint8_t *p;
	size_t len, used, off;
	uint32_t dlen;
	char *v;
	int rv;

	*out = NULL;
	state_key(k, r->group, 's');
	v = rocksdb_get_cf(s->db, s->ro, s->cf_state, (const char *)k, sizeof k,
	                   &len, &err);
	if (err != NULL) {
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "read snapshot of group %u: %s", r->group, err);
		free(err);
		return RAFT_IOERR;
	}
	if (v == NULL) {
		return 0;
	}
	p = (const uint8_t *)v;
	rv = RAFT_CORRUPT;
	if (len < 25 || p[0] != FORMAT) {
		goto err_value;
	}
	snap = raft_calloc(1, sizeof *snap);
	if (snap == NULL) {
		rv = RAFT_NOMEM;
		goto err_value;
	}
	snap->index = bytes_get64(p + 1);
	snap->term = bytes_get64(p + 9);
	snap->configuration_index = bytes_get64(p + 17);
	raft_configuration_init(&snap->configuration);
	rv = conf_decode(p + 25, len - 25, &snap->configuration, &used);
	if (rv != 0) {
		goto err_snap;
	}
	off = 25 + used;
	rv = RAFT_CORRUPT;
	if (len - off < 4) {
		goto err_snap;
	}
	dlen = bytes_get32(p + off);
	off += 4;
	if (len - off != dlen) {
		goto err_snap;
	}
	rv = RAFT_NOMEM;
	snap->bufs = raft_malloc(sizeof *snap->bufs);
	if (snap->bufs == NULL) {
		goto err_snap;
	}
	snap->bufs[0].len = dlen;
	snap->bufs[0].base = raft_malloc(dlen > 0 ? dlen : 1);
	if (snap->bufs[0].base == NULL) {
		raft_free(snap->bufs);
		snap->bufs = NULL;
		goto err_snap;
	}
	memcpy(snap->bufs[0].base, p + off, dlen);
	snap->n_bufs = 1;
	free(v);
	*out = snap;
	return 0;

err_snap:
	raft_configuration_close(&snap->configuration);
	raft_free(snap);
err_value:
	free(v);
	if (rv == RAFT_CORRUPT) {
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "group %u: bad snapshot record", r->group);
	}
	return rv;
}

static void free_snapshot(struct raft_snapshot *snap)
{
	unsigned i;
	if (snap == NULL) {
		return;
	}
	raft_configuration_close(&snap->configuration);
	for (i = 0; i < snap->n_bufs; i++) {
		raft_free(snap->bufs[i].base);
	}
	raft_free(snap->bufs);
	raft_free(snap);
}

static rocksdb_iterator_t *log_iter(struct rio *r, uint8_t *lo, uint8_t *hi,
                                    rocksdb_readoptions_t **ro)
{
	struct rio_store *s = r->s;
	log_key(lo, r->group, 0);
	log_key(hi, r->group, UINT64_MAX);
	*ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_iterate_lower_bound(*ro, (const char *)lo,
	                                            LOG_KEY_SIZE);
	rocksdb_readoptions_set_iterate_upper_bound(*ro, (const char *)hi,
	                                            LOG_KEY_SIZE);
	return rocksdb_create_iterator_cf(s->db, *ro, s->cf_log);
}

/* Loads every log entry of the group: one raft_malloc'd array and one batch
 * buffer holding all payloads (libraft frees both). */
static int read_log(struct rio *r, raft_index *first, struct raft_entry **out,
                    size_t *n_out)
{
	uint8_t lo[LOG_KEY_SIZE], hi[LOG_KEY_SIZE];
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	struct raft_entry *entries = NULL;
	size_t n = 0, cap = 0;
	uint8_t *data = NULL;
	size_t dlen = 0, dcap = 0;
	raft_index expect = 0;
	char *err = NULL;
	size_t i;
	int rv = 0;

	*first = 0;
	*out = NULL;
	*n_out = 0;
	it = log_iter(r, lo, hi, &ro);
	for (rocksdb_iter_seek(it, (const char *)lo, sizeof lo);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t klen, vlen, plen;
		const uint8_t *k = (const uint8_t *)rocksdb_iter_key(it, &klen);
		const uint8_t *v =
		    (const uint8_t *)rocksdb_iter_value(it, &vlen);
		raft_index index;

		if (klen != LOG_KEY_SIZE || vlen < LOG_VALUE_HEADER ||
		    v[0] != FORMAT) {
			snprintf(r->io->errmsg, sizeof r->io->errmsg,
			         "group %u: bad log record", r->group);
			rv = RAFT_CORRUPT;
			goto out;
		}
		index = bytes_get64(k + 4);
		if (n == 0) {
			*first = index;
		} else if (index != expect) {
			snprintf(r->io->errmsg, sizeof r->io->errmsg,
			         "group %u: log has a gap before index %llu",
			         r->group, (unsigned long long)index);
			rv = RAFT_CORRUPT;
			goto out;
		}
		expect = index + 1;
		if (n == cap) {
			size_t ncap = cap == 0 ? 64 : cap * 2;
			struct raft_entry *e =
			    raft_realloc(entries, ncap * sizeof *e);
			if (e == NULL) {
				rv = RAFT_NOMEM;
				goto out;
			}
			entries = e;
			cap = ncap;
		}
		plen = vlen - LOG_VALUE_HEADER;
		if (dlen + plen > dcap) {
			size_t ncap = dcap == 0 ? 4096 : dcap;
			uint8_t *d;
			while (ncap < dlen + plen) {
				ncap *= 2;
			}
			d = raft_realloc(data, ncap);
			if (d == NULL) {
				rv = RAFT_NOMEM;
				goto out;
			}
			data = d;
			dcap = ncap;
		}
		memcpy(data + dlen, v + LOG_VALUE_HEADER, plen);
		entries[n].type = v[1];
		entries[n].term = bytes_get64(v + 2);
		/* Offsets for now: `data` may still move. */
		entries[n].buf.base = (void *)(uintptr_t)dlen;
		entries[n].buf.len = plen;
		dlen += plen;
		n++;
	}
	rocksdb_iter_get_error(it, &err);
	if (err != NULL) {
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "read log of group %u: %s", r->group, err);
		free(err);
		rv = RAFT_IOERR;
		goto out;
	}
	if (n > 0 && data == NULL) {
		data = raft_malloc(1);
		if (data == NULL) {
			rv = RAFT_NOMEM;
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		entries[i].buf.base = data + (uintptr_t)entries[i].buf.base;
		entries[i].batch = data;
	}
	*out = entries;
	*n_out = n;
	entries = NULL;
	data = NULL;
out:
	raft_free(entries);
	raft_free(data);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return rv;
}

static int io_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                   struct raft_snapshot **snapshot, raft_index *start_index,
                   struct raft_entry *entries[], size_t *n_entries)
{
	struct rio *r = io->impl;
	struct raft_snapshot *snap = NULL;
	struct raft_entry *es = NULL;
	raft_index first = 0;
	size_t n = 0, i;
	int rv;

	rv = read_meta(r, term, voted_for);
	if (rv != 0) {
		return rv;
	}
	rv = read_snapshot(r, &snap);
	if (rv != 0) {
		return rv;
	}
	rv = read_log(r, &first, &es, &n);
	if (rv != 0) {
		free_snapshot(snap);
		return rv;
	}
	if (n > 0 && snap != NULL && first + n - 1 < snap->index) {
		/* Every entry is older than the snapshot: none is needed. */
		raft_free(es[0].batch);
		raft_free(es);
		es = NULL;
		n = 0;
	}
	if (n == 0) {
		*start_index = snap != NULL ? snap->index + 1 : 1;
	} else {
		*start_index = first;
		if ((snap == NULL && first != 1) ||
		    (snap != NULL && first > snap->index + 1)) {
			snprintf(io->errmsg, sizeof io->errmsg,
			         "group %u: log starts at %llu, after the "
			         "snapshot (%llu) + 1",
			         r->group, (unsigned long long)first,
			         snap != NULL ? (unsigned long long)snap->index
			                      : 0ull);
			raft_free(es[0].batch);
			raft_free(es);
			free_snapshot(snap);
			return RAFT_CORRUPT;
		}
	}
	r->term = *term;
	r->vote = *voted_for;
	r->next_index = *start_index + n;
	r->snapshot_index = snap != NULL ? snap->index : 0;
	memset(&r->recent, 0, sizeof r->recent);
	for (i = n > RIO_RECENT_ENTRIES ? n - RIO_RECENT_ENTRIES : 0; i < n;
	     i++) {
		recent_push(&r->recent, *start_index + i, es[i].buf.len);
	}
	*snapshot = snap;
	*entries = es;
	*n_entries = n;
	return 0;
}

static int io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                    raft_io_recv_cb recv)
{
	struct rio *r = io->impl;
	struct rio_store *s = r->s;

	(void)msecs; /* one store-wide timer ticks every group */
	if (r->started || r->closing) {
		return RAFT_BUSY;
	}
	r->tick = tick;
	r->recv = recv;
	r->started = true;
	s->n_started++;
	if (r->quiet) {
		s->n_quiet++;
	}
	tick_link(r);
	if (!s->timer_running) {
		uv_timer_start(&s->timer, timer_cb, s->tick_ms, s->tick_ms);
		s->timer_running = true;
	}
	return 0;
}

/* Writes `wb` now without sync, and makes sure the next batch syncs it
 * before this group sends anything. */
static int write_direct(struct rio *r, rocksdb_writebatch_t *wb)
{
	struct rio_store *s = r->s;
	struct rio_batch *b;
	char msg[RAFT_ERRMSG_BUF_SIZE - 32];

	b = pending_batch(s);
	if (b == NULL) {
		return RAFT_NOMEM;
	}
	if (log_write(s, wb, false, NULL, msg, sizeof msg) != 0) {
		snprintf(r->io->errmsg, sizeof r->io->errmsg,
		         "write group %u: %s", r->group, msg);
		return RAFT_IOERR;
	}
	b->force = true;
	r->meta_gen = b->gen;
	return 0;
}

static int put_change_entry(struct rio *r, rocksdb_writebatch_t *wb,
                            raft_index index, raft_term term,
                            const struct raft_configuration *conf)
{
	struct raft_buffer buf;
	uint8_t k[LOG_KEY_SIZE], h[LOG_VALUE_HEADER];
	const char *parts[2];
	size_t sizes[2];
	const char *kp = (const char *)k;
	size_t klen = sizeof k;
	int rv;

	rv = raft_configuration_encode(conf, &buf);
	if (rv != 0) {
		return rv;
	}
	log_key(k, r->group, index);
	h[0] = FORMAT;
	h[1] = RAFT_CHANGE;
	bytes_put64(h + 2, term);
	parts[0] = (const char *)h;
	sizes[0] = sizeof h;
	parts[1] = buf.base;
	sizes[1] = buf.len;
	rocksdb_writebatch_putv_cf(wb, r->s->cf_log, 1, &kp, &klen, 2, parts,
	                           sizes);
	raft_free(buf.base);
	return 0;
}

static int io_bootstrap(struct raft_io *io,
                        const struct raft_configuration *conf)
{
	struct rio *r = io->impl;
	struct raft_snapshot *snap = NULL;
	struct raft_entry *es = NULL;
	raft_index first;
	raft_term term;
	raft_id vote;
	size_t n = 0;
	rocksdb_writebatch_t *wb;
	uint8_t k[STATE_KEY_SIZE], v[META_VALUE_SIZE];
	int rv;

	rv = read_meta(r, &term, &vote);
	if (rv != 0) {
		return rv;
	}
	rv = read_snapshot(r, &snap);
	if (rv != 0) {
		return rv;
	}
	rv = read_log(r, &first, &es, &n);
	if (rv != 0) {
		free_snapshot(snap);
		return rv;
	}
	if (n > 0) {
		raft_free(es[0].batch);
		raft_free(es);
	}
	if (term != 0 || snap != NULL || n > 0) {
		free_snapshot(snap);
		snprintf(io->errmsg, sizeof io->errmsg,
		         "group %u already has state (term %llu)", r->group,
		         (unsigned long long)term);
		return RAFT_CANTBOOTSTRAP;
	}
	wb = rocksdb_writebatch_create();
	state_key(k, r->group, 'm');
	encode_meta(v, 1, 0);
	rocksdb_writebatch_put_cf(wb, r->s->cf_state, (const char *)k, sizeof k,
	                          (const char *)v, sizeof v);
	rv = put_change_entry(r, wb, 1, 1, conf);
	if (rv == 0) {
		rv = write_direct(r, wb);
	}
	rocksdb_writebatch_destroy(wb);
	if (rv != 0) {
		return rv;
	}
	r->term = 1;
	r->vote = 0;
	return 0;
}

static int io_recover(struct raft_io *io, const struct raft_configuration *conf)
{
	struct rio *r = io->impl;
	struct raft_snapshot *snap = NULL;
	struct raft_entry *es = NULL;
	raft_index first, next;
	raft_term term = 1;
	size_t n = 0;
	rocksdb_writebatch_t *wb;
	int rv;

	rv = read_snapshot(r, &snap);
	if (rv != 0) {
		return rv;
	}
	rv = read_log(r, &first, &es, &n);
	if (rv != 0) {
		free_snapshot(snap);
		return rv;
	}
	if (n > 0) {
		next = first + n;
		term = es[n - 1].term;
		raft_free(es[0].batch);
		raft_free(es);
	} else {
		next = snap != NULL ? snap->index + 1 : 1;
		term = snap != NULL ? snap->term : 1;
	}
	free_snapshot(snap);
	wb = rocksdb_writebatch_create();
	rv = put_change_entry(r, wb, next, term > 0 ? term : 1, conf);
	if (rv == 0) {
		rv = write_direct(r, wb);
	}
	rocksdb_writebatch_destroy(wb);
	return rv;
}

/* Queues the group's term and vote into the batch of this turn. */
static int put_meta(struct rio *r)
{
	struct rio_store *s = r->s;
	uint8_t k[STATE_KEY_SIZE], v[META_VALUE_SIZE];
	struct rio_batch *b;

	if (s->errored) {
		memcpy(r->io->errmsg, s->errmsg, sizeof r->io->errmsg);
		return RAFT_IOERR;
	}
	b = pending_batch(s);
	if (b == NULL) {
		return RAFT_NOMEM;
	}
	state_key(k, r->group, 'm');
	encode_meta(v, r->term, r->vote);
	rocksdb_writebatch_put_cf(b->wb, s->cf_state, (const char *)k, sizeof k,
	                          (const char *)v, sizeof v);
	batch_touch(b, r);
	r->meta_gen = b->gen;
	return 0;
}

static int io_set_term(struct raft_io *io, raft_term term)
{
	struct rio *r = io->impl;
	r->term = term;
	r->vote = 0;
	return put_meta(r);
}

static int io_set_vote(struct raft_io *io, raft_id server_id)
{
	struct rio *r = io->impl;
	r->vote = server_id;
	return put_meta(r);
}

static int io_send(struct raft_io *io, struct raft_io_send *req,
                   const struct raft_message *m, raft_io_send_cb cb)
{
	struct rio *r = io->impl;
	struct rio_store *s = r->s;
	struct rio_req *q;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		return RAFT_NOMEM;
	}
	req->cb = cb;
	q->type = REQ_SEND;
	q->io = r;
	q->req.send = req;
	q->msg = *m;
	r->outstanding++;
	if (s->send != NULL && !s->errored &&
	    (r->meta_gen > s->done_gen || r->held.head != NULL)) {
		/* Our term/vote is not on disk yet: the message waits. */
		if (m->server_address != NULL) {
			q->address = strdup(m->server_address);
			if (q->address == NULL) {
				free(q);
				r->outstanding--;
				return RAFT_NOMEM;
			}
			q->msg.server_address = q->address;
		}
		fifo_push(&r->held, q);
		if (!r->in_held_list) {
			r->in_held_list = true;
			r->held_next = s->held;
			s->held = r;
		}
		s->stats.held_sends++;
		return 0;
	}
	dispatch_send(s, q);
	return 0;
}

static int io_append(struct raft_io *io, struct raft_io_append *req,
                     const struct raft_entry entries[], unsigned n,
                     raft_io_append_cb cb)
{
	struct rio *r = io->impl;
	struct rio_store *s = r->s;
	struct rio_batch *b;
	struct rio_req *q;
	unsigned i;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	if (s->errored) {
		memcpy(io->errmsg, s->errmsg, sizeof io->errmsg);
		return RAFT_IOERR;
	}
	q = calloc(1, sizeof *q);
	b = pending_batch(s);
	if (q == NULL || b == NULL) {
		free(q);
		return RAFT_NOMEM;
	}
	for (i = 0; i < n; i++) {
		uint8_t k[LOG_KEY_SIZE], h[LOG_VALUE_HEADER];
		const char *kp = (const char *)k;
		size_t klen = sizeof k;
		const char *parts[2];
		size_t sizes[2];

		log_key(k, r->group, r->next_index + i);
		h[0] = FORMAT;
		h[1] = (uint8_t)entries[i].type;
		bytes_put64(h + 2, entries[i].term);
		parts[0] = (const char *)h;
		sizes[0] = sizeof h;
		parts[1] = entries[i].buf.base;
		sizes[1] = entries[i].buf.len;
		rocksdb_writebatch_putv_cf(b->wb, s->cf_log, 1, &kp, &klen, 2,
		                           parts, sizes);
		b->n_bytes += entries[i].buf.len;
		recent_push(&r->recent, r->next_index + i, entries[i].buf.len);
	}
	r->next_index += n;
	b->n_entries += n;
	b->n_appends++;
	batch_touch(b, r);
	req->cb = cb;
	q->type = REQ_APPEND;
	q->io = r;
	q->req.append = req;
	fifo_push(&b->done, q);
	r->outstanding++;
	return 0;
}

static void delete_log_range(struct rio *r, rocksdb_writebatch_t *wb,
                             raft_index from, raft_index to)
{
	uint8_t lo[LOG_KEY_SIZE], hi[LOG_KEY_SIZE];
	log_key(lo, r->group, from);
	log_key(hi, r->group, to);
	rocksdb_writebatch_delete_range_cf(wb, r->s->cf_log, (const char *)lo,
	                                   sizeof lo, (const char *)hi,
	                                   sizeof hi);
}

static int io_truncate(struct raft_io *io, raft_index index)
{
	struct rio *r = io->impl;
	struct rio_store *s = r->s;
	struct rio_batch *b;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	if (s->errored) {
		memcpy(io->errmsg, s->errmsg, sizeof io->errmsg);
		return RAFT_IOERR;
	}
	b = pending_batch(s);
	if (b == NULL) {
		return RAFT_NOMEM;
	}
	/* In batch order: after earlier appends, before later ones. */
	delete_log_range(r, b->wb, index, UINT64_MAX);
	batch_touch(b, r);
	recent_drop_from(&r->recent, index);
	r->next_index = index;
	return 0;
}

static int put_snapshot(struct rio *r, unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snap,
                        raft_io_snapshot_put_cb cb);

/* Completes a snapshot put with `status` at the next flush. */
static int fail_put(struct rio *r, struct raft_io_snapshot_put *req,
                    raft_io_snapshot_put_cb cb, int status,
                    struct raft_buffer *install_bufs)
{
	struct rio_req *q = calloc(1, sizeof *q);
	if (q == NULL) {
		return RAFT_NOMEM;
	}
	req->cb = cb;
	q->type = REQ_SNAPSHOT_PUT;
	q->status = status;
	q->io = r;
	q->req.put = req;
	q->install_bufs = install_bufs;
	r->outstanding++;
	soon_push(r->s, q);
	return 0;
}

void rio_install_done(struct rio_install *x, int status)
{
	struct rio *r = x->io;
	int rv;

	if (r == NULL) {
		free(x); /* cancelled when the instance closed */
		return;
	}
	r->install = NULL;
	r->outstanding--;
	rv = status;
	if (rv == 0 && (r->closing || r->s->errored)) {
		rv = r->closing ? RAFT_CANCELED : RAFT_IOERR;
	}
	if (rv == 0) {
		rv = put_snapshot(r, 0, x->req, x->snap, x->cb);
		if (rv == 0) {
			r->snapshots_installed++;
			r->s->stats.snapshots_installed++;
		}
	}
	if (rv != 0 && fail_put(r, x->req, x->cb, rv, x->snap->bufs) != 0) {
		abort(); /* libraft must hear of its install */
	}
	free(x);
	notify(r);
	maybe_closed(r);
}

/* A snapshot of our own: the state it names (and that the log entries it
 * compacts produced) must be durable before it is. The sync (a flush of the
 * state, tens of milliseconds under load) runs on the thread pool, so the log
 * writer and every other group's appends go on meanwhile; then the put joins a
 * batch as any other write. */
struct rio_sync {
	uv_work_t work; /* work.data = this */
	struct rio *io;
	unsigned trailing;
	struct raft_io_snapshot_put *req;
	const struct raft_snapshot *snap; /* libraft's, valid until cb */
	raft_io_snapshot_put_cb cb;
	int status;
};

static void sync_work(uv_work_t *w)
{
	struct rio_sync *x = w->data;
	x->status = x->io->hooks.sync(x->io->hooks.data);
}

static void sync_done(uv_work_t *w, int status)
{
	struct rio_sync *x = w->data;
	struct rio *r = x->io;
	struct rio_store *s = r->s;
	int rv = 0;

	r->outstanding--;
	if (status != 0) {
		rv = RAFT_CANCELED;
	} else if (x->status != 0) {
		/* The state cannot be made durable: storage is failing, as
		 * for a failed log write. */
		rv = RAFT_IOERR;
		if (!s->errored) {
			s->errored = true;
			snprintf(s->errmsg, sizeof s->errmsg,
			         "group %u: state sync before log compaction "
			         "failed",
			         r->group);
		}
	} else if (r->closing) {
		rv = RAFT_CANCELED;
	} else if (s->errored) {
		rv = RAFT_IOERR;
	}
	if (rv == 0) {
		rv = put_snapshot(r, x->trailing, x->req, x->snap, x->cb);
	}
	if (rv != 0) {
		if (rv == RAFT_IOERR) {
			memcpy(r->io->errmsg, s->errmsg, sizeof r->io->errmsg);
		}
		if (fail_put(r, x->req, x->cb, rv, NULL) != 0) {
			abort(); /* libraft must hear of its snapshot */
		}
	}
	free(x);
	notify(r);
	maybe_closed(r);
	rio_store_flush(s);
}

static int sync_then_put(struct rio *r, unsigned trailing,
                         struct raft_io_snapshot_put *req,
                         const struct raft_snapshot *snap,
                         raft_io_snapshot_put_cb cb)
{
	struct rio_sync *x = calloc(1, sizeof *x);

	if (x == NULL) {
		return RAFT_NOMEM;
	}
	x->work.data = x;
	x->io = r;
	x->trailing = trailing;
	x->req = req;
	x->snap = snap;
	x->cb = cb;
	if (uv_queue_work(r->s->loop, &x->work, sync_work, sync_done) != 0) {
		free(x);
		return RAFT_IOERR;
	}
	r->outstanding++;
	return 0;
}

static int io_snapshot_put(struct raft_io *io, unsigned trailing,
                           struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snap,
                           raft_io_snapshot_put_cb cb)
{
	struct rio *r = io->impl;
	struct rio_install *x;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	if (r->s->errored) {
		memcpy(io->errmsg, r->s->errmsg, sizeof io->errmsg);
		return RAFT_IOERR;
	}
	/* Every snapshot of our own syncs first, even one that compacts no
	 * entry yet (index <= trailing): a restart loads it and refuses a
	 * state older than its manifest (group_install). */
	if (trailing != 0 && r->hooks.sync != NULL) {
		return sync_then_put(r, trailing, req, snap, cb);
	}
	if (trailing != 0 || r->hooks.install == NULL) {
		return put_snapshot(r, trailing, req, snap, cb);
	}
	/* Installing a peer's snapshot: the state comes first. */
	x = calloc(1, sizeof *x);
	if (x == NULL) {
		return RAFT_NOMEM;
	}
	x->io = r;
	x->req = req;
	x->snap = snap;
	x->cb = cb;
	r->install = x;
	r->outstanding++;
	r->hooks.install(r->hooks.data, r->install_from, snap, x);
	return 0;
}

static int put_snapshot(struct rio *r, unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snap,
                        raft_io_snapshot_put_cb cb)
{
	struct raft_io *io = r->io;
	struct rio_store *s = r->s;
	struct rio_batch *b;
	struct rio_req *q;
	uint8_t k[STATE_KEY_SIZE];
	uint8_t *v, *p;
	size_t len, dlen = 0;
	unsigned i;
	int rv;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	if (s->errored) {
		memcpy(io->errmsg, s->errmsg, sizeof io->errmsg);
		return RAFT_IOERR;
	}
	for (i = 0; i < snap->n_bufs; i++) {
		dlen += snap->bufs[i].len;
	}
	if (dlen > UINT32_MAX) {
		return RAFT_TOOBIG;
	}
	len = 25 + conf_size(&snap->configuration) + 4 + dlen;
	v = malloc(len);
	q = calloc(1, sizeof *q);
	b = pending_batch(s);
	if (v == NULL || q == NULL || b == NULL) {
		free(v);
		free(q);
		return RAFT_NOMEM;
	}
	v[0] = FORMAT;
	bytes_put64(v + 1, snap->index);
	bytes_put64(v + 9, snap->term);
	bytes_put64(v + 17, snap->configuration_index);
	rv = conf_encode(&snap->configuration, v + 25);
	if (rv != 0) {
		free(v);
		free(q);
		return rv;
	}
	p = v + 25 + conf_size(&snap->configuration);
	bytes_put32(p, (uint32_t)dlen);
	p += 4;
	for (i = 0; i < snap->n_bufs; i++) {
		if (snap->bufs[i].len > 0) {
			memcpy(p, snap->bufs[i].base, snap->bufs[i].len);
			p += snap->bufs[i].len;
		}
	}
	state_key(k, r->group, 's');
	rocksdb_writebatch_put_cf(b->wb, s->cf_state, (const char *)k, sizeof k,
	                          (const char *)v, len);
	free(v);
	if (trailing == 0) {
		/* Installing: the snapshot replaces the whole log. */
		delete_log_range(r, b->wb, 0, UINT64_MAX);
		r->next_index = snap->index + 1;
		memset(&r->recent, 0, sizeof r->recent);
	} else if (snap->index > trailing) {
		delete_log_range(r, b->wb, 0, snap->index - trailing + 1);
		recent_drop_before(&r->recent, snap->index - trailing + 1);
	}
	batch_touch(b, r);
	b->n_puts++;
	req->cb = cb;
	q->type = REQ_SNAPSHOT_PUT;
	q->io = r;
	q->req.put = req;
	q->snapshot_index = snap->index;
	if (trailing == 0) {
		q->install_bufs = snap->bufs;
	}
	fifo_push(&b->done, q);
	r->outstanding++;
	return 0;
}

static int io_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                           raft_io_snapshot_get_cb cb)
{
	struct rio *r = io->impl;
	struct rio_req *q;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		return RAFT_NOMEM;
	}
	req->cb = cb;
	q->type = REQ_SNAPSHOT_GET;
	q->io = r;
	q->req.get = req;
	q->status = read_snapshot(r, &q->snapshot);
	if (q->status == 0 && q->snapshot == NULL) {
		q->status = RAFT_NOTFOUND;
	}
	r->outstanding++;
	soon_push(r->s, q);
	return 0;
}

static raft_time io_time(struct raft_io *io)
{
	struct rio *r = io->impl;
	return uv_now(r->s->loop);
}

static uint64_t rng_next(struct rio_store *s)
{
	uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int io_random(struct raft_io *io, int min, int max)
{
	struct rio *r = io->impl;
	if (max <= min) {
		return min;
	}
	return min + (int)(rng_next(r->s) % (uint64_t)(max - min));
}

struct rio_work {
	uv_work_t work;
	struct rio *io;
	struct raft_io_async_work *req;
	int status;
};

static void work_run(uv_work_t *w)
{
	struct rio_work *x = w->data;
	x->status = x->req->work(x->req);
}

static void work_done(uv_work_t *w, int status)
{
	struct rio_work *x = w->data;
	struct rio *r = x->io;
	x->req->cb(x->req, status != 0 ? RAFT_CANCELED : x->status);
	free(x);
	r->outstanding--;
	notify(r);
	maybe_closed(r);
	rio_store_flush(r->s);
}

static int io_async_work(struct raft_io *io, struct raft_io_async_work *req,
                         raft_io_async_work_cb cb)
{
	struct rio *r = io->impl;
	struct rio_work *x;
	int rv;

	if (r->closing) {
		return RAFT_CANCELED;
	}
	x = calloc(1, sizeof *x);
	if (x == NULL) {
		return RAFT_NOMEM;
	}
	req->cb = cb;
	x->io = r;
	x->req = req;
	x->work.data = x;
	rv = uv_queue_work(r->s->loop, &x->work, work_run, work_done);
	if (rv != 0) {
		free(x);
		return RAFT_IOERR;
	}
	r->outstanding++;
	return 0;
}

static void io_close(struct raft_io *io, raft_io_close_cb cb)
{
	struct rio *r = io->impl;
	struct rio_store *s = r->s;

	if (r->closing) {
		return;
	}
	tick_unlink(r);
	if (r->started && r->quiet) {
		s->n_quiet--;
	}
	r->closing = true;
	r->close_cb = cb;
	if (r->started) {
		s->n_started--;
		if (s->n_started == 0 && s->timer_running) {
			uv_timer_stop(&s->timer);
			s->timer_running = false;
		}
	}
	map_del(&s->map, r->group);
	release_held(s); /* cancels ours */
	if (r->install != NULL) {
		struct rio_install *x = r->install;
		r->install = NULL;
		x->io = NULL; /* the owner frees it with rio_install_done */
		r->outstanding--;
		if (fail_put(r, x->req, x->cb, RAFT_CANCELED, x->snap->bufs) !=
		    0) {
			abort();
		}
	}
	maybe_closed(r);
}

/* ---- store ---- */

int rio_init(struct raft_io *io, struct rio_store *s, uint32_t group,
             const struct rio_hooks *hooks)
{
	struct rio *r;
	void *data = io->data;
	int rv;

	if (s->closing) {
		return RAFT_SHUTDOWN;
	}
	if (map_get(&s->map, group) != NULL) {
		snprintf(io->errmsg, sizeof io->errmsg,
		         "group %u already has an instance", group);
		return RAFT_DUPLICATEID;
	}
	r = calloc(1, sizeof *r);
	if (r == NULL) {
		return RAFT_NOMEM;
	}
	r->io = io;
	r->s = s;
	r->group = group;
	if (hooks != NULL) {
		r->hooks = *hooks;
	}
	r->next_index = 1;
	rv = map_put(&s->map, r);
	if (rv != 0) {
		free(r);
		return rv;
	}
	memset(io, 0, sizeof *io);
	io->data = data;
	io->version = 2;
	io->impl = r;
	io->init = io_init;
	io->close = io_close;
	io->load = io_load;
	io->start = io_start;
	io->bootstrap = io_bootstrap;
	io->recover = io_recover;
	io->set_term = io_set_term;
	io->set_vote = io_set_vote;
	io->send = io_send;
	io->append = io_append;
	io->truncate = io_truncate;
	io->snapshot_put = io_snapshot_put;
	io->snapshot_get = io_snapshot_get;
	io->time = io_time;
	io->random = io_random;
	io->async_work = io_async_work;
	r->next = s->ios;
	if (s->ios != NULL) {
		s->ios->prev = r;
	}
	s->ios = r;
	return 0;
}

void rio_release(struct raft_io *io)
{
	struct rio *r = io->impl;
	struct rio_store *s;

	if (r == NULL) {
		return;
	}
	s = r->s;
	if (!r->closing) {
		map_del(&s->map, r->group);
		tick_unlink(r);
		if (r->started && r->quiet) {
			s->n_quiet--;
		}
		if (r->started && --s->n_started == 0 && s->timer_running) {
			uv_timer_stop(&s->timer);
			s->timer_running = false;
		}
	}
	if (r->prev != NULL) {
		r->prev->next = r->next;
	} else {
		s->ios = r->next;
	}
	if (r->next != NULL) {
		r->next->prev = r->prev;
	}
	free(r);
	io->impl = NULL;
	maybe_finish_close(s);
}

void rio_recent_entry_bytes(const struct raft_io *io, unsigned *n,
                            uint64_t *bytes)
{
	const struct rio *r = io->impl;

	*n = r != NULL ? r->recent.n : 0;
	*bytes = r != NULL ? r->recent.sum : 0;
}

void rio_group_counts(const struct raft_io *io, uint64_t *snapshots_sent,
                      uint64_t *snapshots_installed)
{
	const struct rio *r = io->impl;

	*snapshots_sent = *snapshots_installed = 0;
	if (io->append != io_append || r == NULL) {
		return;
	}
	*snapshots_sent = r->snapshots_sent;
	*snapshots_installed = r->snapshots_installed;
}

raft_index rio_snapshot_index(const struct raft_io *io)
{
	const struct rio *r = io->impl;

	/* Another raft_io (libraft's test fixture) has another impl. */
	if (io->append != io_append) {
		return 0;
	}
	return r != NULL ? r->snapshot_index : 0;
}

void rio_sent_done(struct rio_sent *sent, int status)
{
	struct rio_req *q = (struct rio_req *)sent;
	q->status = status;
	soon_push(q->io->s, q);
}

void rio_store_set_send_ref(struct rio_store *s, rio_send_ref_fn fn)
{
	s->send_ref = fn;
}

void rio_store_set_send(struct rio_store *s, rio_send_fn fn, void *data)
{
	s->send = fn;
	s->send_data = data;
}

int rio_store_deliver(struct rio_store *s, uint32_t group,
                      struct raft_message *m)
{
	struct rio *r = map_get(&s->map, group);
	if (r == NULL || !r->started || r->closing || r->recv == NULL) {
		return RAFT_NOTFOUND;
	}
	if (r->hooks.admit != NULL && !r->hooks.admit(r->hooks.data, m)) {
		return RAFT_INVALID;
	}
	if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
		r->install_from = m->server_id;
	}
	if (r->quiet && r->hooks.wake != NULL) {
		/* Any message wakes a quiet group before libraft sees it. */
		r->hooks.wake(r->hooks.data, m);
	}
	r->recv(r->io, m);
	notify(r);
	return 0;
}

void rio_store_stats(const struct rio_store *s, struct rio_stats *st)
{
	*st = s->stats;
	if (s->wal != NULL) {
		struct wal_stats ws;
		wal_stats(s->wal, &ws);
		st->wal_segments = ws.segments;
		st->wal_rotations = ws.rotations;
		st->wal_replayed = ws.replayed;
		st->wal_torn_bytes = ws.torn_bytes;
		st->wal_spares_used = ws.spares_used;
		st->wal_spare_errors = ws.spare_errors;
	}
}

int rio_store_erase(struct rio_store *s, uint32_t group, char *errmsg)
{
	rocksdb_writebatch_t *wb;
	uint8_t lo[LOG_KEY_SIZE], hi[LOG_KEY_SIZE];
	uint8_t k[STATE_KEY_SIZE];
	char msg[RAFT_ERRMSG_BUF_SIZE - 32];
	int rv;

	if (map_get(&s->map, group) != NULL) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
		         "group %u still has an instance", group);
		return RAFT_BUSY;
	}
	wb = rocksdb_writebatch_create();
	log_key(lo, group, 0);
	log_key(hi, group, UINT64_MAX);
	rocksdb_writebatch_delete_range_cf(wb, s->cf_log, (const char *)lo,
	                                   sizeof lo, (const char *)hi,
	                                   sizeof hi);
	state_key(k, group, 'm');
	rocksdb_writebatch_delete_cf(wb, s->cf_state, (const char *)k,
	                             sizeof k);
	state_key(k, group, 's');
	rocksdb_writebatch_delete_cf(wb, s->cf_state, (const char *)k,
	                             sizeof k);
	rv = log_write(s, wb, false, NULL, msg, sizeof msg);
	rocksdb_writebatch_destroy(wb);
	if (rv != 0) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE, "erase group %u: %s",
		         group, msg);
		return RAFT_IOERR;
	}
	return 0;
}

/* ---- the WAL's mark ----
 *
 * The database and the WAL directory carry the same random mark, made when
 * the WAL is first created: in raft_state under a group id no group has,
 * and in the WAL directory (wal_mark_write). Records replayed
 * into a database that is not theirs (db/ replaced or restored alone, a WAL
 * directory copied from elsewhere) would graft one log onto another node's
 * state; a database whose WAL directory is gone may have lost acknowledged
 * entries. Both refuse to start. */
#define MARK_GROUP 0xffffffffu
#define MARK_VALUE_SIZE 9

static int read_db_mark(struct rio_store *s, uint64_t *mark, char *errmsg)
{
	uint8_t k[STATE_KEY_SIZE];
	char *err = NULL, *v;
	size_t len;

	state_key(k, MARK_GROUP, 'w');
	v = rocksdb_get_cf(s->db, s->ro, s->cf_state, (const char *)k, sizeof k,
	                   &len, &err);
	if (err != NULL) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
		         "read the raft WAL mark of the database: %s", err);
		free(err);
		return -1;
	}
	*mark = 0;
	if (v == NULL) {
		return 0;
	}
	if (len != MARK_VALUE_SIZE || (uint8_t)v[0] != FORMAT) {
		free(v);
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
		         "the database's raft WAL mark is unreadable");
		return -1;
	}
	*mark = bytes_get64((const uint8_t *)v + 1);
	free(v);
	return 0;
}

static int write_db_mark(struct rio_store *s, uint64_t mark, char *errmsg)
{
	uint8_t k[STATE_KEY_SIZE], v[MARK_VALUE_SIZE];
	char *err = NULL;

	state_key(k, MARK_GROUP, 'w');
	v[0] = FORMAT;
	bytes_put64(v + 1, mark);
	/* Through RocksDB's own WAL, synced: written once. */
	rocksdb_put_cf(s->db, s->wo_sync, s->cf_state, (const char *)k,
	               sizeof k, (const char *)v, sizeof v, &err);
	if (err != NULL) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
		         "write the raft WAL mark into the database: %s", err);
		free(err);
		return -1;
	}
	return 0;
}

static uint64_t new_mark(void)
{
	uint64_t m = 0;

	while (m == 0) {
		if (getrandom(&m, sizeof m, 0) != (ssize_t)sizeof m) {
			m = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32);
		}
	}
	return m;
}

/* Writes a record of our WAL into RocksDB again (rio_store_init). */
static int replay_record(void *data, const void *rec, size_t len, char *msg,
                         size_t msglen)
{
	struct rio_store *s = data;
	rocksdb_writebatch_t *wb;
	char *err = NULL;

	if (s->db_unmarked) {
		snprintf(msg, msglen,
		         "the raft WAL holds records but the database has no "
		         "mark of it: db/ was replaced or restored without "
		         "raftwal/; restore the data directory whole");
		return -1;
	}
	wb = rocksdb_writebatch_create_from(rec, len);

	rocksdb_write(s->db, s->wo_nowal, wb, &err);
	rocksdb_writebatch_destroy(wb);
	if (err != NULL) {
		snprintf(msg, msglen, "replay of the raft WAL: %s", err);
		free(err);
		return -1;
	}
	return 0;
}

/* Opens our WAL: its records go into RocksDB, are flushed to SST files,
 * and the replayed segments are deleted. */
static int open_wal(struct rio_store *s, const struct rio_store_options *o,
                    char *errmsg)
{
	uint64_t db_mark, wal_mark;

	if (read_db_mark(s, &db_mark, errmsg) != 0 ||
	    wal_mark_read(o->wal_dir, &wal_mark, errmsg,
	                  RAFT_ERRMSG_BUF_SIZE) != 0) {
		return -1;
	}
	if (db_mark != 0 && wal_mark != db_mark) {
		if (wal_mark == 0) {
			snprintf(
			    errmsg, RAFT_ERRMSG_BUF_SIZE,
			    "the database was written through raft WAL "
			    "%016" PRIx64 " but %s has no mark: it was "
			    "removed or replaced, and acknowledged entries "
			    "may be lost with it; restore the data "
			    "directory whole",
			    db_mark, o->wal_dir);
		} else {
			snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
			         "raft WAL %s (mark %016" PRIx64
			         ") belongs to another database (its mark "
			         "%016" PRIx64
			         "); restore the data directory whole",
			         o->wal_dir, wal_mark, db_mark);
		}
		return -1;
	}
	if (wal_mark == 0) {
		/* A new WAL (a new node, or one from before it existed):
		 * its mark goes first, so a crash before the database's
		 * leaves a WAL without records to adopt. */
		wal_mark = new_mark();
		if (wal_mark_write(o->wal_dir, wal_mark, errmsg,
		                   RAFT_ERRMSG_BUF_SIZE) != 0) {
			return -1;
		}
	}
	s->db_unmarked = db_mark == 0;
	if (wal_open(&s->wal, o->wal_dir, o->wal_segment_bytes, replay_record,
	             s, errmsg, RAFT_ERRMSG_BUF_SIZE) != 0) {
		return -1;
	}
	/* On failure the caller frees the store, and the WAL with it. */
	if (db_mark == 0 && write_db_mark(s, wal_mark, errmsg) != 0) {
		return -1;
	}
	s->released_to = wal_current(s->wal);
	if (flush_log_cfs(s, errmsg, RAFT_ERRMSG_BUF_SIZE) != 0 ||
	    wal_release_before(s->wal, s->released_to, errmsg,
	                       RAFT_ERRMSG_BUF_SIZE) != 0) {
		return -1;
	}
	return 0;
}

int rio_store_init(struct rio_store **out, uv_loop_t *loop, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf_log,
                   rocksdb_column_family_handle_t *cf_state,
                   const struct rio_store_options *o, char *errmsg)
{
	struct rio_store *s;
	int rv;

	s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE, "out of memory");
		return RAFT_NOMEM;
	}
	s->loop = loop;
	s->db = db;
	s->install_leak = dlsym(RTLD_DEFAULT, "raft_version_number") == NULL;
	s->cf_log = cf_log;
	s->cf_state = cf_state;
	s->tick_ms = o != NULL && o->tick_ms > 0 ? o->tick_ms : DEFAULT_TICK_MS;
	if (o != NULL && o->seed != 0) {
		s->rng = o->seed;
	} else if (getrandom(&s->rng, sizeof s->rng, GRND_NONBLOCK) !=
	           (ssize_t)sizeof s->rng) {
		s->rng = (uint64_t)uv_hrtime() ^ (uint64_t)getpid();
	}
	if (o != NULL) {
		s->send = o->send;
		s->send_data = o->send_data;
	}
	s->next_gen = 1;
	s->wo_sync = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(s->wo_sync, 1);
	s->wo_plain = rocksdb_writeoptions_create();
	s->wo_nowal = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(s->wo_nowal, 1);
	s->ro = rocksdb_readoptions_create();
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->wal_mu, NULL);
	if (o != NULL && o->wal_dir != NULL && open_wal(s, o, errmsg) != 0) {
		goto err_wal;
	}

	uv_timer_init(loop, &s->timer);
	s->timer.data = s;
	uv_prepare_init(loop, &s->prepare);
	s->prepare.data = s;
	uv_prepare_start(&s->prepare, prepare_cb);
	uv_unref((uv_handle_t *)&s->prepare);
	rv = uv_async_init(loop, &s->async, async_cb);
	if (rv != 0) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE, "uv_async_init: %s",
		         uv_strerror(rv));
		goto err_handles;
	}
	s->async.data = s;
	uv_unref((uv_handle_t *)&s->async);
	rv = pthread_create(&s->thread, NULL, writer_main, s);
	if (rv != 0) {
		snprintf(errmsg, RAFT_ERRMSG_BUF_SIZE,
		         "cannot start the raft log writer thread: %s",
		         strerror(rv));
		uv_close((uv_handle_t *)&s->async, NULL);
		goto err_handles;
	}
	*out = s;
	return 0;

err_handles:
	/* The handles close on the next loop turn; the store leaks until
	 * then only if the caller never runs the loop again. */
	uv_close((uv_handle_t *)&s->timer, NULL);
	uv_close((uv_handle_t *)&s->prepare, NULL);
	wal_close(s->wal);
	rocksdb_writeoptions_destroy(s->wo_sync);
	rocksdb_writeoptions_destroy(s->wo_plain);
	rocksdb_writeoptions_destroy(s->wo_nowal);
	rocksdb_readoptions_destroy(s->ro);
	*out = NULL;
	return RAFT_IOERR;

err_wal:
	rio_store_free(s); /* nothing else started yet */
	*out = NULL;
	return RAFT_IOERR;
}

static void handle_closed(uv_handle_t *h)
{
	struct rio_store *s = h->data;
	s->open_handles--;
	if (s->open_handles == 0 && s->close_cb != NULL) {
		s->close_cb(s, s->close_data);
	}
}

static void maybe_finish_close(struct rio_store *s)
{
	if (!s->closing || s->open_handles > 0 || s->ios != NULL) {
		return;
	}
	submit(s);
	if (s->inflight > 0 || s->pending != NULL) {
		if (s->inflight == 0) {
			/* Nothing worth writing is left. */
			batch_free(s->pending);
			s->pending = NULL;
		} else {
			return;
		}
	}
	if (s->open_handles > 0 || s->stop || s->releasing) {
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	s->open_handles = 3;
	if (s->timer_running) {
		uv_timer_stop(&s->timer);
		s->timer_running = false;
	}
	uv_close((uv_handle_t *)&s->timer, handle_closed);
	uv_close((uv_handle_t *)&s->prepare, handle_closed);
	uv_close((uv_handle_t *)&s->async, handle_closed);
}

void rio_store_close(struct rio_store *s, rio_store_close_cb cb, void *data)
{
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	run_soon(s);
	maybe_finish_close(s);
}

void rio_store_free(struct rio_store *s)
{
	if (s == NULL) {
		return;
	}
	batch_free(s->pending);
	while (s->spare != NULL) {
		struct rio_batch *b = s->spare;
		s->spare = b->next;
		batch_free(b);
	}
	free(s->map.slots);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->wal_mu);
	wal_close(s->wal);
	rocksdb_writeoptions_destroy(s->wo_sync);
	rocksdb_writeoptions_destroy(s->wo_plain);
	rocksdb_writeoptions_destroy(s->wo_nowal);
	rocksdb_readoptions_destroy(s->ro);
	free(s);
}
