/* Quiescence of idle Raft groups: the decisions, as pure functions.
 *
 * A group whose leader has had nothing to do for a while (no proposal, no
 * read, no configuration change, every live follower's log matching the
 * leader's, everything committed and applied) stops ticking on every
 * replica: no heartbeats, no election timers. Node-level liveness stands in
 * for the per-group heartbeats: the node transport pings every peer and
 * drops a connection that stays silent, and a quiet follower whose
 * leader's node drops is woken and elects (docs/cluster.md "Quiescence").
 *
 * This module holds what can be decided without the group: whether a
 * leader may quiesce (quiesce_leader_poll), whether a follower may follow
 * it (quiesce_follower_accept), and whether a peer's connection event
 * wakes a quiet replica (quiesce_wake_on_peer). raft/group.c feeds them
 * libraft's state and carries out the answers. */
#ifndef LS_RAFT_QUIESCE_H
#define LS_RAFT_QUIESCE_H

#include <stdbool.h>
#include <stdint.h>

#define QUIESCE_MAX_SERVERS 16

/* A leader's view of its group at one poll. */
struct quiesce_leader_view {
	bool busy; /* proposals, reads or callbacks pending, a configuration
	              change, promotion, transfer or install in flight, or
	              the leadership not ready (first barrier not applied) */
	uint64_t term;
	uint64_t last_index;
	uint64_t commit_index;
	uint64_t applied_index;
	unsigned n_voters; /* voters of the configuration, this one included */
	unsigned n;        /* the other servers (voters, standbys, spares) */
	struct {
		uint64_t id;
		bool voter;
		bool live;            /* its node's connection is up */
		uint64_t match_index; /* libraft's progress */
	} servers[QUIESCE_MAX_SERVERS];
};

/* One group's quiescence state on one replica. */
struct quiesce {
	bool quiet;
	uint64_t idle_since_ms; /* the leader's idle streak began (0: none) */
	uint64_t idle_term;     /* term and last index of the streak */
	uint64_t idle_index;
};

enum {
	QUIESCE_STAY = 0, /* keep ticking */
	QUIESCE_NOW       /* send QUIESCE to the live followers, stop ticking */
};

/* The leader's decision at `now_ms`: QUIESCE_NOW once the view has been
 * quiescable (see above; a majority of voters, this one included, live
 * and matching) with the same term and last index for `idle_ms`, so every
 * live follower has had heartbeats carrying the final commit index.
 * Followers that are not live are left out: they are woken when their
 * node's connection comes back. Never QUIESCE_NOW for a quiet state. */
int quiesce_leader_poll(struct quiesce *q, const struct quiesce_leader_view *v,
                        uint64_t now_ms, unsigned idle_ms);

/* A follower's view when a QUIESCE arrives. */
struct quiesce_follower_view {
	bool follower;      /* libraft's state is follower */
	bool busy;          /* an install or state transfer in flight */
	uint64_t leader_id; /* the leader it follows (0: none) */
	uint64_t term;
	uint64_t last_index;
	uint64_t commit_index;
};

/* Whether the follower stops ticking on `leader`'s QUIESCE for (`term`,
 * `index`): only when it follows that leader in that term and its log
 * ends at `index`, all of it committed. Otherwise it asks the leader to
 * wake (a follower left ticking under a quiet leader would time out and
 * disrupt it). */
bool quiesce_follower_accept(const struct quiesce_follower_view *v,
                             uint64_t leader, uint64_t term, uint64_t index);

/* Roles for quiesce_wake_on_peer and quiesce_msg_wakes. */
enum { QUIESCE_FOLLOWER = 1, QUIESCE_LEADER };

/* Kinds of message for quiesce_msg_wakes. */
enum {
	QUIESCE_MSG_OTHER = 0,
	QUIESCE_MSG_APPEND,       /* AppendEntries */
	QUIESCE_MSG_APPEND_RESULT /* AppendEntries result */
};

/* A message arriving for a quiet replica, and the replica's state. */
struct quiesce_msg_view {
	int role; /* QUIESCE_FOLLOWER, QUIESCE_LEADER, or 0 */
	uint64_t term;
	uint64_t last_index;
	uint64_t commit_index;
	uint64_t leader_id; /* followers: the leader followed */
	int kind;           /* QUIESCE_MSG_* */
	uint64_t from;
	uint64_t msg_term;
	uint64_t msg_index;   /* append: prev index; result: last index */
	uint64_t msg_commit;  /* append: leader commit */
	unsigned msg_entries; /* append: entries carried */
	bool msg_rejected;    /* result */
};

/* Whether the message wakes the quiet replica. Everything does except
 * the tail of the exchange that quiesced it: the answer to the leader's
 * last heartbeat reaching the quiet leader (same term, accepted, the log
 * matching), or that heartbeat reaching a quiet follower (its leader, same
 * term, no entries, its log and commit index already there). Waking on
 * those would keep a group from ever settling. */
bool quiesce_msg_wakes(const struct quiesce_msg_view *v);

/* Whether a quiet replica in `role` (following `leader` when a follower;
 * `member` tells whether `peer` is in the group's configuration) wakes
 * when `peer`'s connection goes `up` or down: a follower whose leader's
 * node dropped (then elects), a leader one of whose followers' node came
 * back (then catches it up). */
bool quiesce_wake_on_peer(int role, uint64_t leader, bool member, uint64_t peer,
                          bool up);

#endif
