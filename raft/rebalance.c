/* The next membership move of one group; see rebalance.h. */
#include "raft/rebalance.h"

static bool has(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == id) {
			return true;
		}
	}
	return false;
}

static bool alive(const struct rebalance_group *g, uint64_t id)
{
	return id == g->leader || has(g->alive, g->n_alive, id);
}

static bool in_target(const struct rebalance_group *g, uint64_t id)
{
	return has(g->target, g->n_target, id);
}

static bool in_standby(const struct rebalance_group *g, uint64_t id)
{
	return g->standby != NULL && has(g->standby, g->n_standby, id) &&
	       !in_target(g, id);
}

static const struct rebalance_server *server(const struct rebalance_group *g,
                                             uint64_t id)
{
	for (size_t i = 0; i < g->n_servers; i++) {
		if (g->servers[i].id == id) {
			return &g->servers[i];
		}
	}
	return NULL;
}

static size_t quorum(size_t n)
{
	return n / 2 + 1;
}

/* Whether voters `n` with `live` of them alive may become `n2` voters with
 * `live2` alive: a live majority remains, and a group that had a quorum of
 * its target alive keeps one. */
static bool safe(const struct rebalance_group *g, size_t n, size_t live,
                 size_t n2, size_t live2)
{
	size_t tq = quorum(g->n_target);
	(void)n;
	if (n2 == 0 || live2 < quorum(n2)) {
		return false;
	}
	return live < tq || live2 >= tq;
}

static void set(struct rebalance_move *out, int kind, uint64_t node)
{
	out->kind = kind;
	out->node = node;
}

/* The first alive voter of the target other than the leader. */
static uint64_t transfer_target(const struct rebalance_group *g)
{
	for (size_t i = 0; i < g->n_target; i++) {
		const struct rebalance_server *s = server(g, g->target[i]);
		if (s != NULL && s->role == REBALANCE_VOTER &&
		    s->id != g->leader && alive(g, s->id)) {
			return s->id;
		}
	}
	return 0;
}

void rebalance_next(const struct rebalance_group *g, struct rebalance_move *out)
{
	size_t nv = 0, live = 0, in_t = 0, i;
	const struct rebalance_server *s;

	set(out, REBALANCE_NONE, 0);
	if (g->n_target == 0) {
		return; /* no membership yet: nothing to aim at */
	}
	for (i = 0; i < g->n_servers; i++) {
		s = &g->servers[i];
		if (s->role != REBALANCE_VOTER) {
			continue;
		}
		nv++;
		live += alive(g, s->id);
		in_t += in_target(g, s->id);
	}

	/* 1. Non-voters outside the target go (quorum is not theirs). */
	for (i = 0; i < g->n_servers; i++) {
		s = &g->servers[i];
		if (s->role != REBALANCE_VOTER && !in_target(g, s->id) &&
		    !in_standby(g, s->id)) {
			set(out, REBALANCE_REMOVE, s->id);
			return;
		}
	}

	/* 2. A dead voter outside the target goes (or, demoted, stays as a
	 * standby) when that is safe. */
	for (i = 0; i < g->n_servers; i++) {
		s = &g->servers[i];
		if (s->role == REBALANCE_VOTER && !in_target(g, s->id) &&
		    !alive(g, s->id) && safe(g, nv, live, nv - 1, live)) {
			set(out,
			    in_standby(g, s->id) ? REBALANCE_DEMOTE
			                         : REBALANCE_REMOVE,
			    s->id);
			return;
		}
	}

	/* 3. A leader outside the target (a draining node, say) hands its
	 * leadership to a voter of the target first, when one is up: the
	 * moves then run on a node that stays. */
	if (!in_target(g, g->leader)) {
		uint64_t to = transfer_target(g);
		if (to != 0) {
			set(out, REBALANCE_TRANSFER, to);
			return;
		}
	}

	/* 4. A new replica on its way: spare -> standby -> voter. */
	for (i = 0; i < g->n_target; i++) {
		s = server(g, g->target[i]);
		if (s == NULL || s->role == REBALANCE_VOTER) {
			continue;
		}
		if (s->role == REBALANCE_SPARE) {
			set(out,
			    alive(g, s->id) ? REBALANCE_STANDBY
			                    : REBALANCE_WAIT,
			    s->id);
			return;
		}
		if (s->caught_up && alive(g, s->id) &&
		    safe(g, nv, live, nv + 1, live + 1)) {
			set(out, REBALANCE_PROMOTE, s->id);
		} else {
			set(out, REBALANCE_WAIT, s->id);
		}
		return;
	}

	/* 5. A voter outside the target goes once the target's voters are
	 * all in (or there are more voters than the target has); never the
	 * leader itself, which had no voter of the target to hand over to
	 * in step 3. */
	if (in_t == g->n_target || nv > g->n_target) {
		for (i = 0; i < g->n_servers; i++) {
			s = &g->servers[i];
			if (s->role != REBALANCE_VOTER || in_target(g, s->id)) {
				continue;
			}
			if (s->id == g->leader) {
				continue;
			}
			if (safe(g, nv, live, nv - 1, live - alive(g, s->id))) {
				set(out,
				    in_standby(g, s->id) ? REBALANCE_DEMOTE
				                         : REBALANCE_REMOVE,
				    s->id);
				return;
			}
		}
	}

	/* 6. A target node missing from the configuration: add the first
	 * one alive (one new replica at a time). */
	for (i = 0; i < g->n_target; i++) {
		if (server(g, g->target[i]) == NULL) {
			if (alive(g, g->target[i])) {
				set(out, REBALANCE_ADD, g->target[i]);
				return;
			}
		}
	}
	if (in_t < g->n_target || nv > in_t) {
		set(out, REBALANCE_WAIT, 0);
		return;
	}

	/* 7. The standbys, once the voters are the target: a spare is made a
	 * standby, a missing one added (one at a time). */
	for (i = 0; g->standby != NULL && i < g->n_standby; i++) {
		uint64_t id = g->standby[i];
		if (!in_standby(g, id)) {
			continue;
		}
		s = server(g, id);
		if (s != NULL && s->role == REBALANCE_SPARE && alive(g, id)) {
			set(out, REBALANCE_STANDBY, id);
			return;
		}
		if (s == NULL && alive(g, id)) {
			set(out, REBALANCE_ADD, id);
			return;
		}
	}
}

const char *rebalance_name(int kind)
{
	switch (kind) {
	case REBALANCE_NONE:
		return "none";
	case REBALANCE_WAIT:
		return "wait";
	case REBALANCE_ADD:
		return "add";
	case REBALANCE_STANDBY:
		return "standby";
	case REBALANCE_PROMOTE:
		return "promote";
	case REBALANCE_REMOVE:
		return "remove";
	case REBALANCE_TRANSFER:
		return "transfer";
	case REBALANCE_DEMOTE:
		return "demote";
	default:
		return "?";
	}
}
