/* The next membership move of one Raft group: a pure function from the
 * group's current configuration, the nodes that are alive and the group's
 * target voters (raft/placement.h over the membership) to the one
 * configuration change (or leadership transfer) its leader should make
 * next. The leader executes it with libraft (raft/group.h), waits for it
 * to commit, and asks again.
 *
 * A replica moves in four steps: the new node is added as a spare, made a
 * standby (it receives the log, or a snapshot and the state transfer),
 * promoted to voter once it has caught up, and only then is the old voter
 * removed. A leader outside the target hands its leadership to a voter
 * of the target before anything else moves.
 * A dead voter that is not in the target is removed before a new one is
 * promoted when the group keeps a live majority without it (a dead voter
 * only raises the quorum).
 *
 * Safety: a move is returned only when the configuration it makes still
 * has a live majority (alive voters >= half + 1), and, when the group had
 * at least a quorum of its target alive among its voters, keeps at least
 * that many; a group that cannot move safely waits.
 *
 * Standbys: a node the operator demoted (CLUSTER.DEMOTE) is in the
 * group's standby target instead of its voters. It keeps a replica that
 * receives the log but does not vote: a voter of the standby target is
 * demoted (made a standby) where another would be removed, a non-voter
 * of it is kept, and one missing from the configuration is added and
 * made a standby, never promoted. */
#ifndef LS_RAFT_REBALANCE_H
#define LS_RAFT_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	REBALANCE_NONE = 0, /* the configuration is the target */
	REBALANCE_WAIT,     /* a standby is catching up, or no safe move */
	REBALANCE_ADD,      /* add `node` as a spare */
	REBALANCE_STANDBY,  /* make spare `node` a standby (replicated) */
	REBALANCE_PROMOTE,  /* make standby `node` a voter */
	REBALANCE_REMOVE,   /* remove `node` from the configuration */
	REBALANCE_TRANSFER, /* hand leadership to `node` */
	REBALANCE_DEMOTE,   /* make voter `node` a standby */
};

enum {
	REBALANCE_SPARE = 0,
	REBALANCE_STANDBY_ROLE,
	REBALANCE_VOTER,
};

/* One server of the group's current configuration. */
struct rebalance_server {
	uint64_t id;
	int role;       /* REBALANCE_SPARE, _STANDBY_ROLE or _VOTER */
	bool caught_up; /* standby: its log is close to the leader's */
};

struct rebalance_group {
	const struct rebalance_server *servers;
	size_t n_servers;
	uint64_t leader;        /* the node deciding (a voter) */
	const uint64_t *target; /* target voters, in preference order */
	size_t n_target;
	const uint64_t *alive; /* nodes known to be up, the leader included */
	size_t n_alive;
	const uint64_t *standby; /* target standbys (none outside target) */
	size_t n_standby;
};

struct rebalance_move {
	int kind; /* REBALANCE_* */
	uint64_t node;
};

/* Fills `out` with the group's next move. */
void rebalance_next(const struct rebalance_group *g,
                    struct rebalance_move *out);

/* The move's name for logs ("add", "promote", ...). */
const char *rebalance_name(int kind);

#endif
