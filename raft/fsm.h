/* The state-machine interface between raft/ and whatever it replicates.
 *
 * raft/ knows nothing of what is stored: a proposal is an opaque command
 * (bytes encoded by store/), a result is opaque bytes handed back to the
 * proposer. store/ implements `struct fsm` for every data group.
 *
 * Entry payloads. The leader batches every command proposed to a group in
 * one loop turn into one Raft entry (group commit) and stamps it with
 * `now_ms = max(wall clock, previous entry's now_ms)`, so time never runs
 * backwards across a leader change. Apply reads time only from the entry.
 *
 * Apply contract (every replica, in log order, on the reactor thread):
 *  - `apply` turns the entry into ONE RocksDB WriteBatch that also records
 *    the group's applied index, and writes it (unsynced: the Raft log is the
 *    durable record until raft/ asks for `sync` before dropping log). The
 *    write may complete later on another thread (store/dwrite.h) as long as
 *    every read, `sync` and `export_state` sees it.
 *  - It never fails because of the commands: an invalid command yields an
 *    error *result*. A non-zero return means the node cannot continue
 *    (e.g. disk error) and raft/ stops the group.
 *  - It is idempotent under replay: an entry at or below the stored applied
 *    index changes nothing and yields empty results.
 *  - It is deterministic: no clock, no randomness, no local state other
 *    than what the entries built. Ids are chosen by the proposer and carried
 *    in the command.
 */
#ifndef LS_RAFT_FSM_H
#define LS_RAFT_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One command inside an entry. Borrowed: valid only during apply. */
struct fsm_cmd {
	const uint8_t *data;
	size_t len;
};

/* A committed entry as apply sees it. Borrowed: valid only during apply. */
struct fsm_entry {
	uint32_t group; /* 0 = meta group, 1..S data groups */
	uint64_t index; /* Raft log index */
	uint64_t term;
	uint64_t now_ms; /* leader-stamped wall-clock time */
	unsigned n_cmds;
	const struct fsm_cmd *cmds;
};

/* The result of one command. `data` is malloc'd by the fsm; ownership
 * passes to raft/, which hands it to the proposer's callback (or frees it
 * when nobody on this node waits). */
struct fsm_result {
	uint8_t *data;
	size_t len;
};

struct fsm;

/* Applies `e`; fills results[0 .. e->n_cmds-1] (zeroed by the caller). */
typedef int (*fsm_apply_fn)(struct fsm *fsm, const struct fsm_entry *e,
                            struct fsm_result *results);

/* The applied index stored with the group's state (0 when empty). raft/
 * reads it at start to skip replayed entries and to tell libraft where the
 * state stands. */
typedef int (*fsm_applied_index_fn)(struct fsm *fsm, uint32_t group,
                                    uint64_t *index);

/* Makes every applied state of `group` durable (e.g. a synced WAL flush).
 * raft/ calls it before dropping log entries on a snapshot. It runs on
 * raft/'s log writer thread, not the reactor (an fsync must not stall the
 * loop), possibly while apply runs on the reactor: it may only make
 * thread-safe calls such as rocksdb_flush_wal(db, 1). */
typedef int (*fsm_sync_fn)(struct fsm *fsm, uint32_t group);

/* Writes the group's whole state, as of its applied index, into files in
 * `dir` (e.g. SST files) and reports that index. Runs off the reactor. */
typedef int (*fsm_export_fn)(struct fsm *fsm, uint32_t group, const char *dir,
                             uint64_t *applied_index);

/* Replaces the group's state with what `dir` holds (written by export on
 * another node). The applied index comes from the data. */
typedef int (*fsm_import_fn)(struct fsm *fsm, uint32_t group, const char *dir,
                             uint64_t *applied_index);

/* Leadership of `group` on this node changed. A new leader must not answer
 * from state older than its first committed entry of `term`; raft/ calls
 * this after that barrier. */
typedef void (*fsm_leader_fn)(struct fsm *fsm, uint32_t group, bool leader,
                              uint64_t term);

struct fsm {
	void *data; /* the implementation's own state */
	fsm_apply_fn apply;
	fsm_applied_index_fn applied_index;
	fsm_sync_fn sync;
	fsm_export_fn export_state;
	fsm_import_fn import_state;
	fsm_leader_fn leader_changed; /* may be NULL */
};

#endif
