/* The node's Raft groups: the meta group 0 and the data groups 1..S, each a
 * libraft instance on the shared RocksDB raft_io (raft/io.h) with a replica
 * (raft/replica.h) gluing it to its state machine.
 *
 * All groups live on one libuv loop (the reactor). One uv_prepare handle
 * per manager, run once per loop turn before the loop polls, takes in
 * leadership changes, turns the commands proposed to each group in that
 * turn into one entry, issues one read barrier per group, runs due
 * callbacks and hands the turn's write batch to the writer thread.
 *
 * Status codes are the REPLICA_* codes of raft/replica.h. */
#ifndef LS_RAFT_GROUP_H
#define LS_RAFT_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "raft/fsm.h"
#include "raft/io.h"
#include "raft/replica.h"

#define GROUP_MAX_VOTERS 16

struct group_mgr;

/* One voter of a bootstrap configuration. */
struct group_member {
	uint64_t id;         /* node id, > 0 */
	const char *address; /* node internal address (copied) */
};

/* Tuning of one group; a zero field takes the manager's default, and a
 * zero default takes the built-in value in brackets. */
struct group_params {
	unsigned election_timeout_ms;  /* [1000] randomized up to 2x */
	unsigned heartbeat_timeout_ms; /* [100] */
	unsigned snapshot_threshold;   /* [1024] entries between snapshots */
	unsigned snapshot_trailing;    /* [128] entries kept after one */
	size_t max_entry_bytes;        /* [1 MiB] one entry, so one command */
	size_t max_pending_bytes;      /* [64 MiB] queued + unapplied */
	uint64_t snapshot_bytes;       /* [32 MiB] applied bytes forcing a
	                                  snapshot */
	uint64_t snapshot_trailing_bytes; /* [4 MiB] about this many bytes of
	                                     entries kept after a snapshot:
	                                     snapshot_trailing is lowered
	                                     (down to 16) for large entries */
};

/* The end of a state transfer: status 0 with `dir` holding the group's
 * state as files written by fsm->export_state on another node (only valid
 * during the call: the group imports them before returning), anything
 * else when the transfer was given up (the owner is shutting down). */
typedef void (*group_fetch_done_fn)(void *done_data, int status,
                                    const char *dir);

/* State transfer for a snapshot installed from peer `from`: fetch the
 * group's state with an applied index (fsm->applied_index) of at least
 * `index` (what the snapshot's manifest stands for) and call
 * done(done_data, ...)
 * exactly once, on the loop, possibly before returning. A transfer that
 * fails should be retried (from `from` or any other replica: every
 * replica's applied state is a committed prefix) until it succeeds: the
 * group takes no entries meanwhile, and libraft cannot take back an
 * install. The owner must call `done` for every fetch at the latest when
 * it shuts down, even if the group stopped first. Returns non-zero when
 * no transfer can be started (the group then fails). */
typedef int (*group_fetch_fn)(void *data, uint32_t group, uint64_t from,
                              uint64_t index, group_fetch_done_fn done,
                              void *done_data);

struct group_options {
	uint64_t node_id;    /* this node's raft id, > 0 */
	const char *address; /* this node's internal address (copied) */
	struct group_params defaults;
	replica_clock_fn clock; /* wall clock for now_ms; NULL = realtime */
	void *clock_data;
	group_fetch_fn fetch; /* state transfer; NULL = none: a lagging
	                         replica whose state is behind an installed
	                         snapshot then fails */
	void *fetch_data;
	/* Sends a read confirmation to `peer` (a question when !answer, else
	 * the answer `ok`); NULL = linearizable reads take a barrier entry.
	 * See replica.c, "reads confirmed without a log entry". */
	void (*confirm_send)(void *data, uint64_t peer, uint32_t group,
	                     bool answer, uint64_t term, uint64_t round,
	                     bool ok);
	void *confirm_data;
	/* Quiescence (raft/quiesce.h): sends QUIESCE (`wake` false: stop
	 * ticking at `term`, log ending at `index`) or a wake request to
	 * `peer`; non-zero when it cannot be queued. NULL: groups with other
	 * servers never quiesce. */
	int (*quiesce_send)(void *data, uint64_t peer, uint32_t group,
	                    uint64_t term, uint64_t index, bool wake);
	/* Whether `peer`'s node is reachable (its connection is up); NULL =
	 * always. Shares quiesce_data. */
	bool (*peer_live)(void *data, uint64_t peer);
	void *quiesce_data;
	bool no_quiesce;          /* groups always tick */
	unsigned quiesce_idle_ms; /* idle this long before quiescing; 0 =
	                             4 heartbeats, at least 500 ms */
	/* A group stopped by itself (storage or state-machine failure). */
	void (*on_failed)(void *data, uint32_t group, const char *msg);
	void *on_failed_data;
};

enum {
	GROUP_ROLE_UNAVAILABLE = 0,
	GROUP_ROLE_FOLLOWER,
	GROUP_ROLE_CANDIDATE,
	GROUP_ROLE_LEADER
};

struct group_status {
	uint32_t group;
	int role;    /* GROUP_ROLE_* */
	bool ready;  /* leader whose first barrier applied */
	bool failed; /* stopped by a failure (see message) */
	uint64_t term;
	uint64_t leader_id; /* 0 = unknown */
	char leader_address[128];
	unsigned n_voters;
	uint64_t voters[GROUP_MAX_VOTERS];
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t last_index;
	uint64_t snapshot_index;
	uint64_t last_contact_ms; /* follower: since the leader was heard
	                             (0 when quiet); candidate: since the
	                             election started; leader: 0 */
	bool quiet;               /* quiescent: not ticking */
	struct replica_stats stats;
	uint64_t elections;   /* elections this replica ran (since start) */
	uint64_t leaderships; /* terms it led */
	uint64_t snapshots_sent;
	uint64_t snapshots_installed;
	/* leader: every other server of the configuration and its match
	 * index (its lag is last_index - match_index) */
	unsigned n_progress;
	struct {
		uint64_t id;
		uint64_t match_index;
	} progress[GROUP_MAX_VOTERS];
	char message[RAFT_ERRMSG_BUF_SIZE];
};

typedef void (*group_mgr_close_cb)(struct group_mgr *m, void *data);

/* The store must outlive the manager. Returns a REPLICA_* code. */
int group_mgr_init(struct group_mgr **out, uv_loop_t *loop,
                   struct rio_store *store, const struct group_options *o);

/* The last error's message (set by every failing call below). */
const char *group_mgr_errmsg(const struct group_mgr *m);

/* Creates group `id` with state machine `fsm` (borrowed; must outlive the
 * group). `p` may be NULL. */
int group_create(struct group_mgr *m, uint32_t id, struct fsm *fsm,
                 const struct group_params *p);

/* Writes the initial configuration, every member a voter. Only for a
 * created, not started group without state: REPLICA_EEXIST otherwise,
 * which a restarting node can ignore. */
int group_bootstrap(struct group_mgr *m, uint32_t id,
                    const struct group_member *members, unsigned n);

/* Loads the group's log and starts it; a single voter elects itself. */
int group_start(struct group_mgr *m, uint32_t id);

/* Stops and removes the group (asynchronously: callbacks still due run
 * with REPLICA_ESHUTDOWN or REPLICA_ELEADERSHIPLOST first). */
int group_stop(struct group_mgr *m, uint32_t id);

/* See replica_propose, replica_propose_reserve and replica_read. */
int group_propose(struct group_mgr *m, uint32_t id, const void *cmd, size_t len,
                  replica_propose_cb cb, void *data, uint64_t *leader_id);
int group_propose_reserve(struct group_mgr *m, uint32_t id, size_t len,
                          replica_reserved_cb cb, void *data,
                          uint64_t *leader_id, uint8_t **cmd);
int group_read(struct group_mgr *m, uint32_t id, replica_read_cb cb, void *data,
               uint64_t *leader_id);

/* Asks the leader of `id` to hand leadership to `target` (0 = any voter). */
int group_transfer(struct group_mgr *m, uint32_t id, uint64_t target);

/* A read confirmation from `peer` (see group_options.confirm_send):
 * questions are answered through confirm_send, answers reach the group's
 * replica. Unknown groups answer no. */
void group_on_confirm(struct group_mgr *m, uint64_t peer, uint32_t group,
                      bool answer, uint64_t term, uint64_t round, bool ok);

/* The leader `gone` of group `id` is known to be unreachable (e.g. its
 * connection just dropped): if this replica follows it, its election
 * timer now expires within [ms, 2 ms] instead of after the full election
 * timeout, and it forgets that leader, so it grants its vote to the first
 * candidate; a new leader comes sooner. A leader that is in fact alive is
 * followed again with its next heartbeat. 0, or REPLICA_EINVAL when the
 * replica does not follow `gone` (nothing changes). */
int group_expedite_election(struct group_mgr *m, uint32_t id, uint64_t gone,
                            unsigned ms);

int group_status(struct group_mgr *m, uint32_t id, struct group_status *st);

/* One server of a group's current configuration (the latest appended,
 * committed or not). */
struct group_server {
	uint64_t id;
	int role;       /* GROUP_SPARE, GROUP_STANDBY or GROUP_VOTER */
	bool caught_up; /* on the leader: its log is within 256 entries of
	                   the commit index */
};

enum { GROUP_SPARE = 0, GROUP_STANDBY, GROUP_VOTER };

/* Writes up to `max` servers of group `id`'s configuration into `out` and
 * their count into `*n`; `*changing` tells whether a configuration change
 * is still in flight (not yet committed) on this leader. */
int group_config(struct group_mgr *m, uint32_t id, struct group_server *out,
                 unsigned max, unsigned *n, bool *changing);

enum { GROUP_CHANGE_ADD = 1, GROUP_CHANGE_ASSIGN, GROUP_CHANGE_REMOVE };

/* On the leader of `id`: adds `node` (at `address`) as a spare, assigns
 * it `role`, or removes it (raft_add, raft_assign, raft_remove). One
 * change at a time per group; `cb` (may be NULL) runs once the change
 * committed (status 0) or failed. */
typedef void (*group_change_cb)(void *data, uint32_t id, int status);
int group_change(struct group_mgr *m, uint32_t id, int op, uint64_t node,
                 const char *address, int role, group_change_cb cb, void *data);

/* A QUIESCE or wake request from `peer` (see group_options.quiesce_send). */
void group_on_quiesce(struct group_mgr *m, uint64_t peer, uint32_t group,
                      uint64_t term, uint64_t index, bool wake);

/* `peer`'s node connection went up or down: wakes the quiet followers
 * whose leader it was (down; the caller then expedites their election)
 * and the quiet leaders it replicates (up, to catch it up). */
void group_on_peer(struct group_mgr *m, uint64_t peer, bool up);

/* The local replica's commit and applied indexes (0 for an unknown
 * group). */
uint64_t group_commit_index(const struct group_mgr *m, uint32_t id);
uint64_t group_applied_index(const struct group_mgr *m, uint32_t id);
/* The time of the group's newest entry proposed or applied here (0 when
 * none or no such group). */
uint64_t group_last_now_ms(const struct group_mgr *m, uint32_t id);

/* A few of group_status's fields, without the rest's cost: for a node's
 * periodic looks at thousands of groups. */
struct group_brief {
	int role; /* GROUP_ROLE_* */
	bool ready;
	bool quiet;
	bool voter; /* this node votes in the group's configuration */
	uint64_t term;
	uint64_t leader_id;
	uint64_t last_contact_ms; /* as in group_status */
};

/* REPLICA_ENOGROUP for an unknown group. */
int group_brief(struct group_mgr *m, uint32_t id, struct group_brief *b);

/* Calls fn(data, id) for each group that had an event (a message, tick,
 * completion, start or stop) since the previous call, and forgets them:
 * a node keeping a view of its groups refreshes only those. */
typedef void (*group_changed_fn)(void *data, uint32_t id);
void group_mgr_drain_changed(struct group_mgr *m, group_changed_fn fn,
                             void *data);

/* Groups that are quiet now. */
unsigned group_mgr_quiet(const struct group_mgr *m);

/* A counter that moves whenever any group may have changed state (it
 * counts the io's notifications and the polls): unchanged, every group's
 * role, leader and term are too. */
uint64_t group_mgr_activity(const struct group_mgr *m);

/* Elections run and terms led by every group of the manager, removed
 * ones included (monotonic). */
void group_mgr_counts(const struct group_mgr *m, uint64_t *elections,
                      uint64_t *leaderships);

/* Writes up to `max` group ids in ascending order; returns the count of
 * groups (which may exceed `max`). */
size_t group_ids(const struct group_mgr *m, uint32_t *ids, size_t max);

/* Stops every group, then calls `cb`; close the store after that. */
void group_mgr_close(struct group_mgr *m, group_mgr_close_cb cb, void *data);
void group_mgr_free(struct group_mgr *m);

#endif
