/* One Raft group's replica on this node, above a libraft instance it does
 * not own (group.c owns it in the daemon; libraft's fixture in tests).
 *
 * It is the glue between libraft and `struct fsm` (raft/fsm.h):
 *  - the libraft raft_fsm: apply decodes the entry (raft/entry.h) and calls
 *    fsm->apply with index, term, now_ms and the commands; snapshot writes a
 *    tiny manifest (group, applied index, now_ms) because the state already
 *    lives in RocksDB; restore checks the manifest against the fsm's applied
 *    index and, when the state is behind, fetches and imports it;
 *  - group commit: every command proposed in one turn (between two
 *    replica_poll calls) becomes ONE entry, stamped by the leader with
 *    now_ms = the wall clock, never behind the group's time (the
 *    now_ms of every earlier entry); while the group's time is ahead of
 *    the wall clock it flows on at half speed until the clock catches up
 *    (a forward clock jump must not freeze TTLs and timeouts);
 *  - linearizable reads: the reads queued in one turn wait until every
 *    command proposed before them is applied and, with other voters, until
 *    a majority confirmed our leadership after they arrived (one small
 *    message per voter per turn, no entry, no fsync: ReadIndex); a sole
 *    voter needs no one. Without the confirm hook (or while the
 *    configuration changes) one raft_barrier per turn serves them;
 *  - leadership: a new leader proposes nothing and answers no read before
 *    its first barrier is applied; then fsm->leader_changed(true) runs.
 *    Losing leadership calls fsm->leader_changed(false).
 *
 * Callbacks to the proposer and reader, and leader_changed, never run
 * inside libraft: they are queued and run by replica_poll, in order.
 * Everything runs on the loop thread. */
#ifndef LS_RAFT_REPLICA_H
#define LS_RAFT_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "raft/fsm.h"

/* Status codes of raft/'s public API (replica.h and group.h). */
enum {
	REPLICA_OK = 0,
	REPLICA_ENOTLEADER,      /* not the leader: see leader_id (0 unknown) */
	REPLICA_ELEADERSHIPLOST, /* leadership ended after the command was
	                            proposed: it may or may not be applied */
	REPLICA_ETOOBIG,   /* command larger than max_entry_bytes allows */
	REPLICA_EBUSY,     /* too many bytes queued for the group */
	REPLICA_ESHUTDOWN, /* the group is stopping, stopped or failed */
	REPLICA_ENOGROUP,  /* no such group on this node */
	REPLICA_ENOMEM,
	REPLICA_EIO,         /* storage or state-machine failure */
	REPLICA_EEXIST,      /* the group exists / already has state */
	REPLICA_EINVAL,      /* bad argument */
	REPLICA_EUNAVAILABLE /* no leader reachable before the deadline
	                        (forwarding): nothing was applied */
};

const char *replica_strerror(int code);

/* Maps a libraft RAFT_* code to a REPLICA_* code. */
int replica_from_raft(int rv);

struct replica_params {
	size_t max_entry_bytes;   /* one entry, header included; 0 = 1 MiB */
	size_t max_pending_bytes; /* queued + unapplied proposals; beyond it
	                             propose fails with REPLICA_EBUSY;
	                             0 = 64 MiB */
	uint64_t snapshot_bytes;  /* also snapshot once this many entry bytes
	                             were applied since the last snapshot
	                             (libraft only counts entries);
	                             0 = 64 MiB */
};

/* Wall-clock milliseconds since the epoch. */
typedef uint64_t (*replica_clock_fn)(void *data);

/* The result of one proposed command. `result` (malloc'd by the fsm) is the
 * callee's to free; NULL with len 0 when status != REPLICA_OK or when the
 * command had no result. */
typedef void (*replica_propose_cb)(void *data, int status, uint8_t *result,
                                   size_t len);

/* A read may now be served from local state (status REPLICA_OK). */
typedef void (*replica_read_cb)(void *data, int status);

/* State transfer for a snapshot this replica is behind: places the group's
 * state, as of at least `index`, as files in a directory and writes its
 * path into dir[0 .. size-1]; fsm->import_state then loads it. */
typedef int (*replica_fetch_fn)(void *data, uint32_t group, uint64_t index,
                                char *dir, size_t size);

/* Asks voter `peer` whether it still follows this leader in `term`;
 * its answer comes back through replica_confirmed(). May drop the
 * message (it is asked again). */
typedef void (*replica_confirm_fn)(void *data, uint64_t peer, uint64_t term,
                                   uint64_t round);

struct replica_hooks {
	replica_clock_fn clock; /* NULL = CLOCK_REALTIME */
	void *clock_data;
	/* Elapsed time in ms, never going back (NULL = CLOCK_MONOTONIC): lets
	 * the group's time flow while it is ahead of `clock`. */
	replica_clock_fn mono;
	void *mono_data;
	void (*notify)(void *data); /* replica_poll has work to do */
	void *notify_data;
	replica_fetch_fn fetch; /* NULL = no state transfer */
	void *fetch_data;
	replica_confirm_fn confirm; /* NULL = reads take a barrier */
	void *confirm_data;
};

struct replica_stats {
	uint64_t proposals;        /* commands accepted by propose */
	uint64_t entries_proposed; /* command entries handed to libraft */
	uint64_t reads;            /* reads accepted */
	uint64_t read_barriers;    /* barriers issued for reads */
	uint64_t reads_local;      /* read batches served with no barrier */
	uint64_t read_confirms;    /* read batches served by confirmation */
	uint64_t entries_applied;  /* command entries passed to fsm->apply */
	uint64_t cmds_applied;
	uint64_t entries_skipped; /* replayed entries at/below the state */
	uint64_t snapshots;       /* manifests taken */
	uint64_t restores;        /* manifests restored */
	uint64_t imports;         /* states imported through fetch */
};

struct replica;

int replica_new(struct replica **out, uint32_t group, struct fsm *fsm,
                const struct replica_params *p, const struct replica_hooks *h);

/* The raft_fsm to pass to raft_init(); owned by the replica. */
struct raft_fsm *replica_raft_fsm(struct replica *rp);

/* Binds the libraft instance (after raft_init, before raft_start) and reads
 * the fsm's applied index: replayed entries at or below it are skipped. */
int replica_bind(struct replica *rp, struct raft *raft);

/* Queues a command (copied). 0: `cb` runs exactly once, later, from
 * replica_poll. Otherwise `cb` never runs; on REPLICA_ENOTLEADER
 * *leader_id (if not NULL) is the known leader, 0 if none. */
int replica_propose(struct replica *rp, const void *cmd, size_t len,
                    replica_propose_cb cb, void *data, uint64_t *leader_id);

/* The result of a command proposed with replica_propose_reserve: as
 * replica_propose_cb, and when the command was refused before libraft took
 * it (REPLICA_ENOTLEADER: never applied), `cmd` and `cmd_len` borrow its
 * bytes for the call, so that the proposer can send it to the leader
 * (NULL and 0 otherwise). */
typedef void (*replica_reserved_cb)(void *data, int status, uint8_t *result,
                                    size_t len, const uint8_t *cmd,
                                    size_t cmd_len);

/* As replica_propose, for a command the caller writes in place instead of
 * having it copied: on 0, *cmd points at `len` bytes in the entry being
 * filled, to be written at once (before any other call on this replica,
 * which may move them). REPLICA_EINVAL when this replica takes no reserved
 * commands (a fault hook is active: use replica_propose). */
int replica_propose_reserve(struct replica *rp, size_t len,
                            replica_reserved_cb cb, void *data,
                            uint64_t *leader_id, uint8_t **cmd);

/* A voter answered confirmation `round` of `term` (see replica_hooks). */
void replica_confirmed(struct replica *rp, uint64_t peer, uint64_t term,
                       uint64_t round, bool ok);

/* The answer to a confirmation from `leader`: whether this replica is a
 * follower in `term` (so has voted in no later term). */
bool replica_follows(const struct replica *rp, uint64_t leader, uint64_t term);

/* Queues a linearizable read; same conventions as replica_propose. */
int replica_read(struct replica *rp, replica_read_cb cb, void *data,
                 uint64_t *leader_id);

/* Takes in state changes (leadership), hands queued commands and reads to
 * libraft and runs due callbacks. Returns non-zero once the replica failed
 * (the owner should stop the group; replica_errmsg says why). */
int replica_poll(struct replica *rp);

/* Fails everything queued with REPLICA_ESHUTDOWN and refuses new work;
 * call before raft_close(). */
void replica_shutdown(struct replica *rp);

/* After libraft's close callback: runs the callbacks still due (work that
 * libraft failed when closing), then frees. */
void replica_free(struct replica *rp);

bool replica_is_ready(const struct replica *rp); /* leader, barrier done */
/* Nothing queued, proposed, unapplied, confirming or due (quiescence). */
bool replica_idle(const struct replica *rp);
const char *replica_errmsg(const struct replica *rp);
void replica_stats(const struct replica *rp, struct replica_stats *st);

/* Reads the state index a snapshot manifest (the snapshot's data, written
 * by this module) stands for: the state must be at least there. */
int replica_manifest_index(const void *buf, size_t len, uint32_t group,
                           uint64_t *index);

/* Counts a state imported by the owner's state transfer (stats only). */
void replica_count_import(struct replica *rp);

/* Latest now_ms seen in the group's entries (applied or proposed). */
uint64_t replica_last_now_ms(const struct replica *rp);

#endif
