/* libraft's struct raft_io on the node's RocksDB, for many groups at once.
 *
 * One `struct rio_store` per node owns the shared machinery: the writer
 * thread, the write batch every group appends into, the tick timer, the
 * PRNG and the transport hook. Each group's libraft instance gets its own
 * `struct raft_io` (rio_init) bound to the store and to its group id.
 *
 * Durability and order. Every append, truncate, snapshot_put, set_term and
 * set_vote of every group in a loop turn goes into ONE RocksDB WriteBatch;
 * the writer thread writes it and syncs the WAL (one fsync for the whole
 * node) and posts the completions back to the loop with uv_async. A request's
 * callback fires only after its batch is on disk, and requests of one group
 * keep their order (batches are written one after the other). While a batch
 * is being written the next one accumulates (group commit).
 *
 * Term and vote are not synced on the spot: they ride in the next batch and
 * every message the group sends is held until that batch is on disk, so no
 * peer ever sees a vote or term that a crash could take back.
 *
 * Threads: everything here runs on the loop thread except the writer, which
 * only touches its batch, RocksDB and the per-group sync hook.
 *
 * The RocksDB layout is described at the top of io.c. */
#ifndef LS_RAFT_IO_H
#define LS_RAFT_IO_H

#include <stdbool.h>
#include <stdint.h>

#include <raft.h>
#include <rocksdb/c.h>
#include <uv.h>

struct rio_store;
struct rio_install;

/* Hands one message of `group` to the node transport. The hook must copy or
 * encode all it needs before returning: `m` (entries, snapshot data,
 * addresses) is only valid during the call. Returns 0 when the message was
 * queued for sending, non-zero (e.g. RAFT_NOCONNECTION) otherwise; libraft
 * learns the status through its send callback either way. */
typedef int (*rio_send_fn)(void *data, uint32_t group,
                           const struct raft_message *m);

/* A send whose completion the transport reports later. */
struct rio_sent;

/* What a rio_send_ref_fn returns when it keeps the payloads. */
#define RIO_SEND_LATER (-1)

/* The hook for AppendEntries with entries (data as rio_send_fn's): like
 * rio_send_fn, but it may keep pointers into the entries' payloads instead
 * of copying them (they stay valid until libraft's send callback, which
 * then waits): it returns RIO_SEND_LATER and calls rio_sent_done(sent,
 * status) exactly once, on the loop thread, after the call, when it no
 * longer needs them. Any other return is a status as rio_send_fn's. */
typedef int (*rio_send_ref_fn)(void *data, uint32_t group,
                               const struct raft_message *m,
                               struct rio_sent *sent);

/* Completes a send the hook kept (RIO_SEND_LATER): libraft's callback runs
 * at the next flush with `status` (0 or RAFT_*). */
void rio_sent_done(struct rio_sent *sent, int status);

typedef void (*rio_store_close_cb)(struct rio_store *s, void *data);

struct rio_store_options {
	unsigned tick_ms; /* period of the one timer ticking every group;
	                     0 = 50 */
	uint64_t seed;    /* PRNG seed for election timeouts; 0 = random */
	rio_send_fn send; /* may be NULL: single node, nobody to send to */
	void *send_data;
	/* Directory of the log's own write-ahead log (raft/wal.h), replayed
	 * into RocksDB by rio_store_init; NULL: RocksDB's WAL instead. */
	const char *wal_dir;
	uint64_t wal_segment_bytes; /* 0 = 64 MiB */
};

/* Per-group hooks, all optional. */
struct rio_hooks {
	void *data;
	/* Runs on the loop after the io handed libraft anything (tick,
	 * message, completion), so the owner can look at the new state. */
	void (*notify)(void *data);
	/* Runs on a THREAD-POOL THREAD before a snapshot that drops log
	 * entries of this group is written, so the state those entries
	 * produced is durable first; the log writer and other groups go on
	 * meanwhile. Non-zero fails the snapshot and stops the store's writes
	 * (storage failure). */
	int (*sync)(void *data);
	/* A snapshot `snap` sent by peer `from` (InstallSnapshot) is being
	 * installed: the state it stands for lives on other nodes. Runs on the
	 * loop, inside libraft. The owner brings the group's state to where
	 * `snap` says (state transfer) and then calls rio_install_done(req, 0),
	 * possibly before returning. Only then is the snapshot record written
	 * and libraft told, so the record never runs ahead of the state.
	 * libraft cannot undo an install that fails (it already moved its log),
	 * so the owner retries a failed transfer and reports a non-zero status
	 * only when the group is stopping or broken. NULL: the snapshot is
	 * stored at once. */
	void (*install)(void *data, uint64_t from,
	                const struct raft_snapshot *snap,
	                struct rio_install *req);
	/* Runs on the loop before a received message is handed to libraft;
	 * false refuses it (rio_store_deliver then answers RAFT_INVALID and
	 * the message stays the caller's to free). NULL: all are handed on. */
	bool (*admit)(void *data, const struct raft_message *m);
	/* Runs on the loop when message `m` arrives for a quiet instance,
	 * before libraft sees it (after admit): the owner wakes the group
	 * (rio_set_quiet(io, false) and whatever its timers need) unless the
	 * message needs no wake. NULL: the instance stays quiet. */
	void (*wake)(void *data, const struct raft_message *m);
};

/* The log writer's sync latency histogram: upper bounds (100 us .. 10 s;
 * slower syncs count in `syncs` only). */
#define RIO_SYNC_BUCKETS 16
extern const uint64_t rio_sync_bounds_ns[RIO_SYNC_BUCKETS];

/* Counters, for tests, metrics and benchmarks. */
struct rio_stats {
	uint64_t batches;       /* batches written (one per loop turn) */
	uint64_t syncs;         /* synced writes (fsyncs) done */
	uint64_t appends;       /* append requests completed */
	uint64_t entries;       /* entries written */
	uint64_t bytes;         /* entry payload bytes written */
	uint64_t snapshot_puts; /* snapshots stored */
	uint64_t group_writes;  /* sum over syncs of groups in the batch */
	uint64_t max_groups;    /* most groups in one synced batch */
	uint64_t held_sends;    /* sends held back for an unsynced term/vote */
	uint64_t write_errors;
	uint64_t write_ns; /* writer time in the batch writes (RocksDB's write
	                      queue and memtable inserts included) */
	uint64_t sync_ns;  /* writer time in the WAL syncs */
	/* syncs by duration: sync_hist[i] counts those <= bound i and above
	 * bound i - 1 (not cumulative) */
	uint64_t sync_hist[RIO_SYNC_BUCKETS];
	uint64_t snapshots_sent;      /* InstallSnapshot messages sent */
	uint64_t snapshots_installed; /* peers' snapshots stored */
	/* Our WAL (zero without one): */
	uint64_t wal_segments;       /* segment files on disk */
	uint64_t wal_rotations;      /* segments started since open */
	uint64_t wal_releases;       /* flushes that let older segments go */
	uint64_t wal_release_errors; /* such flushes or deletes that failed */
	uint64_t wal_replayed;       /* records replayed at open */
	uint64_t wal_torn_bytes;     /* torn tail cut at open */
	uint64_t wal_spares_used;    /* rotations into a zeroed spare */
	uint64_t wal_spare_errors;   /* spares that could not be written */
};

/* Creates the store. `db` and the column families are borrowed and must
 * outlive the store. On failure returns a RAFT_* code and a message in
 * `errmsg` (RAFT_ERRMSG_BUF_SIZE bytes). */
int rio_store_init(struct rio_store **out, uv_loop_t *loop, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf_log,
                   rocksdb_column_family_handle_t *cf_state,
                   const struct rio_store_options *o, char *errmsg);

/* Installs (or clears, fn = NULL) the transport hook. */
void rio_store_set_send(struct rio_store *s, rio_send_fn fn, void *data);

/* Installs (or clears) the AppendEntries hook beside the send hook, with
 * the same data; without it rio_send_fn sends them too. */
void rio_store_set_send_ref(struct rio_store *s, rio_send_ref_fn fn);

/* Delivers a message received for `group` to its started instance, which
 * takes over the message's memory as libraft's recv callback does: the
 * AppendEntries entries array and their batches (every entry's `batch`
 * must be set: one raft_malloc'd block holding the payloads), the
 * InstallSnapshot data and configuration. `server_address` is only read
 * during the call. Returns RAFT_NOTFOUND when no started instance serves
 * `group`, RAFT_INVALID when the owner's admit hook refused the message:
 * it then stays the caller's to free. */
int rio_store_deliver(struct rio_store *s, uint32_t group,
                      struct raft_message *m);

/* Hands the accumulated batch to the writer now if it is idle and runs
 * deferred completions. The store does this by itself from a uv_prepare
 * handle before the loop polls; an owner that appends from its own
 * prepare handle calls it to make sure the batch leaves this turn. */
void rio_store_flush(struct rio_store *s);

/* Flushes the log's RocksDB memtables into SST files, waiting (blocks the
 * calling thread). The log's memtable is a vector, which every read sorts
 * whole: a node starting thousands of groups, each reading its log while
 * the earlier ones' writes pile up in the memtable, flushes every few
 * hundred groups so that start-up stays linear. RAFT_* code and a message
 * in `errmsg` (RAFT_ERRMSG_BUF_SIZE bytes) on failure. */
int rio_store_flush_log(struct rio_store *s, char *errmsg);

void rio_store_stats(const struct rio_store *s, struct rio_stats *st);

/* One group's snapshot counts (zero for another raft_io). */
void rio_group_counts(const struct raft_io *io, uint64_t *snapshots_sent,
                      uint64_t *snapshots_installed);

/* Deletes every log entry, term, vote and snapshot record of `group`
 * (synchronously, unsynced). The group must not have an instance. */
int rio_store_erase(struct rio_store *s, uint32_t group, char *errmsg);

/* Closes the store once every instance is closed: writes what is pending,
 * stops the writer, closes the handles, then calls `cb`. Free with
 * rio_store_free() after that. */
void rio_store_close(struct rio_store *s, rio_store_close_cb cb, void *data);
void rio_store_free(struct rio_store *s);

/* Fills `io` (all methods) for `group`. Fails with RAFT_DUPLICATEID if the
 * group already has an instance. Call before raft_init(). */
int rio_init(struct raft_io *io, struct rio_store *s, uint32_t group,
             const struct rio_hooks *hooks);

/* Finishes an install handed to the `install` hook; `status` 0 stores the
 * snapshot, anything else fails it. May be called after the instance
 * closed (the install was cancelled then): it only frees `req`. */
void rio_install_done(struct rio_install *req, int status);

/* Releases what rio_init allocated; only after libraft's close callback
 * (raft_close) or if raft_init was never called. */
void rio_release(struct raft_io *io);

/* A quiet instance is not ticked (libraft neither sends heartbeats nor
 * runs its election timer); see raft/quiesce.h. Quiet or not may be set
 * before start. A message for a quiet instance runs its wake hook first. */
void rio_set_quiet(struct raft_io *io, bool quiet);
/* Started instances that are quiet. */
unsigned rio_store_quiet_count(const struct rio_store *s);

/* The most entries rio_recent_entry_bytes() covers. */
#define RIO_RECENT_ENTRIES 16

/* Sets `*n` to the count (at most RIO_RECENT_ENTRIES) and `*bytes` to the
 * summed payload sizes of the newest entries of the group's log as this
 * io knows it: loaded, or appended by either role (counted at append, not
 * at completion), and not since dropped by a truncation, a compacting
 * snapshot or an installed one. A truncation reaching below the window
 * leaves fewer entries than the log holds until appends refill it. Lets
 * the owner size things by recent entry size without reading libraft's
 * private in-memory log. Both 0 when no entry qualifies or before
 * rio_init / after rio_release. Loop thread only. */
void rio_recent_entry_bytes(const struct raft_io *io, unsigned *n,
                            uint64_t *bytes);

/* The index of the group's latest snapshot: the one loaded, or the last
 * one whose put completed successfully (taken or installed); 0 = none. The
 * value libraft keeps privately as its log's snapshot index. Loop thread
 * only; 0 before rio_init / after rio_release, and for a raft_io that is
 * not this module's. */
raft_index rio_snapshot_index(const struct raft_io *io);

#endif
