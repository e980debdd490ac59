/* Quiescence decisions (see quiesce.h). */
#include "raft/quiesce.h"

#include <stddef.h>

/* Whether the leader's group has nothing left to replicate. */
static bool quiescable(const struct quiesce_leader_view *v)
{
	unsigned live_voters = 1; /* the leader */
	unsigned i;

	if (v->busy || v->commit_index != v->last_index ||
	    v->applied_index != v->commit_index || v->n > QUIESCE_MAX_SERVERS) {
		return false;
	}
	for (i = 0; i < v->n; i++) {
		if (!v->servers[i].live) {
			continue;
		}
		if (v->servers[i].match_index != v->last_index) {
			return false;
		}
		if (v->servers[i].voter) {
			live_voters++;
		}
	}
	return live_voters > v->n_voters / 2;
}

int quiesce_leader_poll(struct quiesce *q, const struct quiesce_leader_view *v,
                        uint64_t now_ms, unsigned idle_ms)
{
	if (q->quiet) {
		return QUIESCE_STAY;
	}
	if (!quiescable(v)) {
		q->idle_since_ms = 0;
		return QUIESCE_STAY;
	}
	if (q->idle_since_ms == 0 || q->idle_term != v->term ||
	    q->idle_index != v->last_index || now_ms < q->idle_since_ms) {
		/* A new streak: the followers may not yet have heard the
		 * commit index of the last entry. */
		q->idle_since_ms = now_ms != 0 ? now_ms : 1;
		q->idle_term = v->term;
		q->idle_index = v->last_index;
		return QUIESCE_STAY;
	}
	if (now_ms - q->idle_since_ms < idle_ms) {
		return QUIESCE_STAY;
	}
	return QUIESCE_NOW;
}

bool quiesce_follower_accept(const struct quiesce_follower_view *v,
                             uint64_t leader, uint64_t term, uint64_t index)
{
	return v->follower && !v->busy && leader != 0 &&
	       v->leader_id == leader && v->term == term &&
	       v->last_index == index && v->commit_index == index;
}

bool quiesce_msg_wakes(const struct quiesce_msg_view *v)
{
	if (v->role == QUIESCE_LEADER && v->kind == QUIESCE_MSG_APPEND_RESULT) {
		return v->msg_term != v->term || v->msg_rejected ||
		       v->msg_index != v->last_index;
	}
	if (v->role == QUIESCE_FOLLOWER && v->kind == QUIESCE_MSG_APPEND) {
		return v->from != v->leader_id || v->msg_term != v->term ||
		       v->msg_entries != 0 || v->msg_index != v->last_index ||
		       v->msg_commit != v->commit_index;
	}
	return true;
}

bool quiesce_wake_on_peer(int role, uint64_t leader, bool member, uint64_t peer,
                          bool up)
{
	switch (role) {
	case QUIESCE_FOLLOWER:
		return !up && leader == peer;
	case QUIESCE_LEADER:
		return up && member;
	default:
		return false;
	}
}
