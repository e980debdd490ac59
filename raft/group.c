/* The node's Raft groups on one loop; see group.h. */
#include "raft/group.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "raft/quiesce.h"

#define DEFAULT_ELECTION_MS 1000
#define DEFAULT_HEARTBEAT_MS 100
/* Entries between snapshots. Each snapshot flushes the data CF and
 * checkpoints the KV write-back rows (store_sync): at 1024, SET entries of
 * a few hundred bytes made a group snapshot every ~50 ms under load, and
 * the checkpoints lost most of their de-duplication. The bytes threshold
 * below still bounds large entries. */
#define DEFAULT_THRESHOLD 8192
#define DEFAULT_TRAILING 128
/* Raft log entries should die in the raft_log memtable (64 MiB, shared by
 * every group): a snapshot's range delete then drops them at flush instead
 * of RocksDB writing them to SST files and compacting them. With group
 * commit an entry holds up to max_entry_bytes, so the entry-count
 * threshold and trailing alone let each group keep ~70 MiB of log; bytes
 * bound it here (replica.c snapshots by applied bytes; the trailing count
 * adapts to the recent entry size). Each snapshot flushes the data CF
 * (store_sync, ~14 ms under publish load, on the thread pool), so not too
 * often: 32 MiB costs the same CPU as 16 and lets 1.6x more log reach SST
 * files, but halves those flushes (and the small L0 files they make). */
#define DEFAULT_SNAPSHOT_BYTES (32u << 20)
#define DEFAULT_TRAILING_BYTES (4u << 20)
#define MIN_TRAILING 16
#define ADAPT_EVERY 64 /* new entries between two trailing estimates */
#define MAX_ROUNDS                                                             \
	8 /* prepare passes before leaving the rest to the next                \
	     turn (the idle handle keeps the loop from sleeping) */

/* A non-voter this close to the commit index may be promoted: libraft
 * catches it up the rest of the way before the change. */
#define CAUGHT_UP_ENTRIES 256

enum { G_CREATED = 1, G_STARTED, G_STOPPING, G_DEAD };

struct group;

/* An install of a peer's snapshot waiting for its state transfer. */
struct install {
	struct group *g; /* NULL once the group stopped */
	struct rio_install *req;
	uint64_t index;
};

struct group {
	uint32_t id;
	struct group_mgr *m;
	struct replica *rp; /* NULL once closed */
	struct raft raft;
	struct raft_io io;
	/* The leadership transfer request (one at a time): it lives as long
	 * as the group because libraft sends its TimeoutNow with the
	 * request's own send, whose completion the io may run after the
	 * transfer was closed. */
	struct raft_transfer transfer;
	struct fsm *fsm;
	int state;
	bool remove; /* drop the group once closed (else keep it, dead) */
	bool failed;
	bool broken; /* fail at the next poll (errmsg says why) */
	struct install *install;
	bool dirty;
	bool in_changed; /* on the manager's changed list */
	struct group *dirty_next;
	unsigned trailing_max;   /* configured snapshot_trailing */
	uint64_t trailing_bytes; /* target bytes kept after a snapshot */
	raft_index adapted_at;   /* last index at the last estimate */
	/* Elections seen from the polls: the latest term this replica was
	 * candidate or leader in, and the latest it led. */
	raft_term ran_term;
	raft_term led_term;
	uint64_t elections;
	uint64_t leaderships;
	struct quiesce q;
	char errmsg[RAFT_ERRMSG_BUF_SIZE];
};

struct group_mgr {
	uv_loop_t *loop;
	struct rio_store *store;
	struct group_options o;
	char *address;
	uv_prepare_t prepare;
	uv_idle_t idle;
	bool idle_on;
	struct group **v; /* sorted by id */
	size_t n;
	size_t cap;
	struct group *dirty_head;
	struct group *dirty_tail;
	struct group *round_head; /* dirty groups the running round polls */
	bool closing;
	uint64_t elections; /* every group's, removed ones too */
	uint64_t leaderships;
	uint64_t activity; /* group events and polls (group_mgr_activity) */
	uint32_t *changed; /* ids of the groups with events since the last
	                      group_mgr_drain_changed */
	size_t n_changed;
	size_t cap_changed;
	bool changed_lost; /* the list could not grow: report every group */
	unsigned quiesce_idle_ms;
	group_mgr_close_cb close_cb;
	void *close_data;
	unsigned open_handles;
	bool handles_closing;
	char errmsg[RAFT_ERRMSG_BUF_SIZE];
};

static int set_err(struct group_mgr *m, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->errmsg, sizeof m->errmsg, fmt, ap);
	va_end(ap);
	return code;
}

static size_t find_pos(const struct group_mgr *m, uint32_t id)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid]->id < id) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static struct group *find(const struct group_mgr *m, uint32_t id)
{
	size_t i;
	/* Groups are usually 0..S, all present: then group `id` is at index
	 * `id` and every proposal skips the search. */
	if (id < m->n && m->v[id]->id == id) {
		return m->v[id];
	}
	i = find_pos(m, id);
	return i < m->n && m->v[i]->id == id ? m->v[i] : NULL;
}

static void idle_cb(uv_idle_t *h)
{
	(void)h; /* only keeps the loop from sleeping while groups are dirty */
}

static void note_changed(struct group *g)
{
	struct group_mgr *m = g->m;
	if (g->in_changed) {
		return;
	}
	if (m->n_changed == m->cap_changed) {
		size_t cap = m->cap_changed == 0 ? 64 : 2 * m->cap_changed;
		uint32_t *v = realloc(m->changed, cap * sizeof *v);
		if (v == NULL) {
			m->changed_lost = true;
			return;
		}
		m->changed = v;
		m->cap_changed = cap;
	}
	m->changed[m->n_changed++] = g->id;
	g->in_changed = true;
}

static void mark_dirty(struct group *g)
{
	struct group_mgr *m = g->m;
	m->activity++;
	note_changed(g);
	if (g->dirty) {
		return;
	}
	g->dirty = true;
	g->dirty_next = NULL;
	if (m->dirty_tail == NULL) {
		m->dirty_head = g;
	} else {
		m->dirty_tail->dirty_next = g;
	}
	m->dirty_tail = g;
	if (!m->idle_on && !m->handles_closing) {
		m->idle_on = true;
		uv_idle_start(&m->idle, idle_cb);
	}
}

static void unlink_dirty(struct group *g)
{
	struct group_mgr *m = g->m;
	struct group *prev = NULL, *x;
	struct group **pp;
	if (!g->dirty) {
		return;
	}
	for (pp = &m->round_head; *pp != NULL; pp = &(*pp)->dirty_next) {
		if (*pp == g) {
			*pp = g->dirty_next;
			g->dirty = false;
			return;
		}
	}
	for (x = m->dirty_head; x != NULL; prev = x, x = x->dirty_next) {
		if (x == g) {
			if (prev == NULL) {
				m->dirty_head = g->dirty_next;
			} else {
				prev->dirty_next = g->dirty_next;
			}
			if (m->dirty_tail == g) {
				m->dirty_tail = prev;
			}
			break;
		}
	}
	g->dirty = false;
}

static void track_elections(struct group *g);

static void group_notify(void *data)
{
	mark_dirty(data);
}

/* ---- quiescence (raft/quiesce.h, docs/cluster.md "Quiescence") ---- */

static void send_quiesce(struct group *g, uint64_t peer, uint64_t term,
                         uint64_t index, bool wake, int *rv)
{
	struct group_mgr *m = g->m;
	int r = -1;
	if (m->o.quiesce_send != NULL) {
		r = m->o.quiesce_send(m->o.quiesce_data, peer, g->id, term,
		                      index, wake);
	}
	if (rv != NULL) {
		*rv = r;
	}
}

/* Brings a quiet replica back to ticking. libraft measures its timers
 * from election_timer_start: restarting it now keeps a follower from
 * timing out at its first tick and a leader from stepping down for want
 * of heartbeat answers it never asked for. A follower woken by anything
 * but its leader asks the leader to wake too, or the leader's silence
 * would make it start an election. */
static void group_wake(struct group *g, uint64_t from)
{
	struct raft *r = &g->raft;
	if (!g->q.quiet) {
		return;
	}
	g->q.quiet = false;
	g->q.idle_since_ms = 0;
	rio_set_quiet(&g->io, false);
	if (g->state != G_STARTED) {
		return;
	}
	r->election_timer_start = g->io.time(&g->io);
	if (raft_state(r) == RAFT_FOLLOWER) {
		uint64_t leader = r->follower_state.current_leader.id;
		if (leader != 0 && leader != from && leader != r->id) {
			send_quiesce(g, leader, r->current_term, 0, true, NULL);
		}
	}
	mark_dirty(g);
}

static void io_wake(void *data, const struct raft_message *msg)
{
	struct group *g = data;
	struct raft *r = &g->raft;
	struct quiesce_msg_view v = {0};

	if (g->state == G_STARTED && raft_state(r) == RAFT_LEADER) {
		v.role = QUIESCE_LEADER;
	} else if (g->state == G_STARTED && raft_state(r) == RAFT_FOLLOWER) {
		v.role = QUIESCE_FOLLOWER;
		v.leader_id = r->follower_state.current_leader.id;
	}
	v.term = r->current_term;
	v.last_index = raft_last_index(r);
	v.commit_index = r->commit_index;
	v.from = msg->server_id;
	if (msg->type == RAFT_IO_APPEND_ENTRIES) {
		v.kind = QUIESCE_MSG_APPEND;
		v.msg_term = msg->append_entries.term;
		v.msg_index = msg->append_entries.prev_log_index;
		v.msg_commit = msg->append_entries.leader_commit;
		v.msg_entries = msg->append_entries.n_entries;
	} else if (msg->type == RAFT_IO_APPEND_ENTRIES_RESULT) {
		v.kind = QUIESCE_MSG_APPEND_RESULT;
		v.msg_term = msg->append_entries_result.term;
		v.msg_index = msg->append_entries_result.last_log_index;
		v.msg_rejected = msg->append_entries_result.rejected != 0;
	}
	if (quiesce_msg_wakes(&v)) {
		group_wake(g, msg->server_id);
	}
}

static bool peer_live(struct group_mgr *m, uint64_t peer)
{
	return m->o.peer_live == NULL ||
	       m->o.peer_live(m->o.quiesce_data, peer);
}

/* On the leader, at each poll: quiesce once idle long enough. */
static void quiesce_poll(struct group *g)
{
	struct group_mgr *m = g->m;
	struct raft *r = &g->raft;
	struct quiesce_leader_view v = {0};
	unsigned i;

	if (m->quiesce_idle_ms == 0 || g->q.quiet) {
		return;
	}
	if (raft_state(r) != RAFT_LEADER || r->leader_state.progress == NULL) {
		g->q.idle_since_ms = 0;
		return;
	}
	v.busy = !replica_is_ready(g->rp) || !replica_idle(g->rp) ||
	         r->leader_state.change != NULL ||
	         r->leader_state.promotee_id != 0 || r->transfer != NULL ||
	         g->install != NULL || r->configuration_uncommitted_index != 0;
	v.term = r->current_term;
	v.last_index = raft_last_index(r);
	v.commit_index = r->commit_index;
	v.applied_index = raft_last_applied(r);
	for (i = 0; i < r->configuration.n; i++) {
		const struct raft_server *sv = &r->configuration.servers[i];
		if (sv->role == RAFT_VOTER) {
			v.n_voters++;
		}
		if (sv->id == r->id) {
			continue;
		}
		if (v.n == QUIESCE_MAX_SERVERS) {
			v.busy = true;
			break;
		}
		v.servers[v.n].id = sv->id;
		v.servers[v.n].voter = sv->role == RAFT_VOTER;
		v.servers[v.n].live = peer_live(m, sv->id);
		v.servers[v.n].match_index =
		    r->leader_state.progress[i].match_index;
		v.n++;
	}
	if (quiesce_leader_poll(&g->q, &v, uv_now(m->loop),
	                        m->quiesce_idle_ms) != QUIESCE_NOW) {
		return;
	}
	for (i = 0; i < v.n; i++) {
		int rv;
		if (!v.servers[i].live) {
			continue;
		}
		send_quiesce(g, v.servers[i].id, v.term, v.last_index, false,
		             &rv);
		if (rv != 0) {
			/* Stay awake: followers that did quiesce wake at
			 * the next heartbeat. */
			g->q.idle_since_ms = 0;
			return;
		}
	}
	g->q.quiet = true;
	rio_set_quiet(&g->io, true);
}

void group_on_quiesce(struct group_mgr *m, uint64_t peer, uint32_t group,
                      uint64_t term, uint64_t index, bool wake)
{
	struct group *g = find(m, group);
	struct raft *r;
	struct quiesce_follower_view v = {0};

	if (g == NULL || g->rp == NULL || g->state != G_STARTED || m->closing) {
		return;
	}
	r = &g->raft;
	if (wake) {
		/* A follower that could not quiesce, or was woken: restart
		 * the streak too, in case this leader was still awake. */
		g->q.idle_since_ms = 0;
		group_wake(g, peer);
		return;
	}
	v.follower = raft_state(r) == RAFT_FOLLOWER;
	v.busy = g->install != NULL;
	v.leader_id = v.follower ? r->follower_state.current_leader.id : 0;
	v.term = r->current_term;
	v.last_index = raft_last_index(r);
	v.commit_index = r->commit_index;
	if (m->quiesce_idle_ms != 0 &&
	    quiesce_follower_accept(&v, peer, term, index)) {
		if (!g->q.quiet) {
			g->q.quiet = true;
			g->q.idle_since_ms = 0;
			rio_set_quiet(&g->io, true);
		}
		return;
	}
	group_wake(g, peer);
	send_quiesce(g, peer, r->current_term, 0, true, NULL);
}

void group_on_peer(struct group_mgr *m, uint64_t peer, bool up)
{
	size_t i;
	for (i = 0; i < m->n; i++) {
		struct group *g = m->v[i];
		struct raft *r = &g->raft;
		bool member = false;
		int role = 0;
		unsigned k;
		if (!g->q.quiet || g->state != G_STARTED) {
			continue;
		}
		if (raft_state(r) == RAFT_LEADER) {
			role = QUIESCE_LEADER;
		} else if (raft_state(r) == RAFT_FOLLOWER) {
			role = QUIESCE_FOLLOWER;
		}
		for (k = 0; k < r->configuration.n; k++) {
			member =
			    member || r->configuration.servers[k].id == peer;
		}
		/* A quiet replica in any other state should not exist;
		 * wake it rather than leave it unticked. */
		if (role == 0 || quiesce_wake_on_peer(
		                     role,
		                     role == QUIESCE_FOLLOWER
		                         ? r->follower_state.current_leader.id
		                         : 0,
		                     member, peer, up)) {
			group_wake(g, peer);
		}
	}
}

uint64_t group_commit_index(const struct group_mgr *m, uint32_t id)
{
	const struct group *g = find(m, id);
	return g != NULL && g->rp != NULL ? g->raft.commit_index : 0;
}

uint64_t group_applied_index(const struct group_mgr *m, uint32_t id)
{
	struct group *g = find(m, id);
	return g != NULL && g->rp != NULL ? raft_last_applied(&g->raft) : 0;
}

uint64_t group_last_now_ms(const struct group_mgr *m, uint32_t id)
{
	struct group *g = find(m, id);
	return g != NULL && g->rp != NULL ? replica_last_now_ms(g->rp) : 0;
}

int group_brief(struct group_mgr *m, uint32_t id, struct group_brief *b)
{
	struct group *g = find(m, id);
	struct raft *r;
	raft_id lid = 0;
	const char *addr = NULL;
	unsigned i;

	memset(b, 0, sizeof *b);
	b->role = GROUP_ROLE_UNAVAILABLE;
	if (g == NULL) {
		return REPLICA_ENOGROUP;
	}
	if (g->rp == NULL) {
		return 0;
	}
	r = &g->raft;
	b->ready = replica_is_ready(g->rp);
	b->term = r->current_term;
	b->quiet = g->q.quiet;
	for (i = 0; i < r->configuration.n; i++) {
		if (r->configuration.servers[i].id == m->o.node_id &&
		    r->configuration.servers[i].role == RAFT_VOTER) {
			b->voter = true;
		}
	}
	if (g->state != G_STARTED) {
		return 0;
	}
	switch (raft_state(r)) {
	case RAFT_FOLLOWER:
		b->role = GROUP_ROLE_FOLLOWER;
		break;
	case RAFT_CANDIDATE:
		b->role = GROUP_ROLE_CANDIDATE;
		break;
	case RAFT_LEADER:
		b->role = GROUP_ROLE_LEADER;
		break;
	default:
		break;
	}
	raft_leader(r, &lid, &addr);
	b->leader_id = lid;
	if ((b->role == GROUP_ROLE_FOLLOWER ||
	     b->role == GROUP_ROLE_CANDIDATE) &&
	    !g->q.quiet) {
		uint64_t now = uv_now(m->loop);
		b->last_contact_ms = now > r->election_timer_start
		                         ? now - r->election_timer_start
		                         : 0;
	}
	track_elections(g);
	return 0;
}

void group_mgr_drain_changed(struct group_mgr *m, group_changed_fn fn,
                             void *data)
{
	/* fn may make groups change again: those go on a fresh list. */
	uint32_t *ids = m->changed;
	size_t i, n = m->n_changed;
	bool all = m->changed_lost;

	m->changed = NULL;
	m->n_changed = m->cap_changed = 0;
	m->changed_lost = false;
	for (i = 0; i < n; i++) {
		struct group *g = find(m, ids[i]);
		if (g != NULL) {
			g->in_changed = false;
		}
	}
	if (all) {
		for (i = 0; i < m->n; i++) {
			m->v[i]->in_changed = false;
		}
		for (i = 0; i < m->n; i++) {
			fn(data, m->v[i]->id);
		}
	} else {
		for (i = 0; i < n; i++) {
			fn(data, ids[i]);
		}
	}
	free(ids);
}

unsigned group_mgr_quiet(const struct group_mgr *m)
{
	return rio_store_quiet_count(m->store);
}

uint64_t group_mgr_activity(const struct group_mgr *m)
{
	return m->activity;
}

static void group_confirm(void *data, uint64_t peer, uint64_t term,
                          uint64_t round)
{
	struct group *g = data;
	struct group_mgr *m = g->m;
	m->o.confirm_send(m->o.confirm_data, peer, g->id, false, term, round,
	                  false);
}

void group_on_confirm(struct group_mgr *m, uint64_t peer, uint32_t group,
                      bool answer, uint64_t term, uint64_t round, bool ok)
{
	struct group *g = find(m, group);
	bool live =
	    g != NULL && g->rp != NULL && g->state == G_STARTED && !m->closing;
	if (answer) {
		if (live) {
			replica_confirmed(g->rp, peer, term, round, ok);
		}
		return;
	}
	if (m->o.confirm_send != NULL) {
		m->o.confirm_send(m->o.confirm_data, peer, group, true, term,
		                  round,
		                  live && replica_follows(g->rp, peer, term));
	}
}

static int group_sync(void *data)
{
	/* Writer thread: only the fsm's sync, which fsm.h allows here. */
	struct group *g = data;
	if (g->fsm->sync == NULL) {
		return 0;
	}
	return g->fsm->sync(g->fsm, g->id);
}

static void maybe_finish(struct group_mgr *m);

/* Stops the group at the next poll: libraft may be on the stack. */
static void break_group(struct group *g, const char *fmt, ...)
{
	va_list ap;
	if (g->broken || g->failed) {
		return;
	}
	g->broken = true;
	va_start(ap, fmt);
	vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
	va_end(ap);
	mark_dirty(g);
}

/* libraft 0.15 keeps a leadership transfer when its leader steps down
 * (to a later term), and while it is set grants its vote to the transfer's
 * target even after voting for another candidate in the same term
 * (electionVote's is_transferee): two leaders of one term. A transfer
 * means something only while we lead, so one found on a replica that no
 * longer leads is closed as libraft closes one that timed out, before the
 * next message can ask for a vote. */
static void drop_stale_transfer(struct group *g)
{
	struct raft *r = &g->raft;
	struct raft_transfer *req = r->transfer;

	if (req == NULL || raft_state(r) == RAFT_LEADER) {
		return;
	}
	r->transfer = NULL;
	if (req->cb != NULL) {
		req->cb(req);
	}
}

/* The io's admit hook: runs before each received message reaches libraft. */
static bool group_admit(void *data, const struct raft_message *m)
{
	struct group *g = data;
	struct raft *r = &g->raft;
	raft_term term = 0;

	drop_stale_transfer(g);
	if (m->type == RAFT_IO_APPEND_ENTRIES) {
		term = m->append_entries.term;
	} else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
		term = m->install_snapshot.term;
	}
	if (term != 0 && term == r->current_term &&
	    raft_state(r) == RAFT_LEADER) {
		/* Another leader of our own term: Raft never allows it, and
		 * libraft (built without assertions) would take the sender
		 * for our leader while we lead, writing follower fields over
		 * its leader state. Stop the group with why instead. */
		break_group(g, "group %u: node %llu leads term %llu too", g->id,
		            (unsigned long long)m->server_id,
		            (unsigned long long)term);
		return false;
	}
	return true;
}

static void install_done(void *data, int status, const char *dir)
{
	struct install *x = data;
	struct group *g = x->g;
	uint64_t applied = 0;
	int rv = status;

	if (g == NULL) {
		rio_install_done(x->req, RAFT_CANCELED);
		free(x);
		return;
	}
	g->install = NULL;
	if (rv == 0) {
		rv = g->fsm->import_state(g->fsm, g->id, dir, &applied);
		if (rv != 0) {
			break_group(g,
			            "group %u: importing the state of "
			            "snapshot %llu failed",
			            g->id, (unsigned long long)x->index);
		} else if (applied < x->index) {
			rv = -1;
			break_group(g,
			            "group %u: the transferred state (%llu) is "
			            "older than snapshot %llu",
			            g->id, (unsigned long long)applied,
			            (unsigned long long)x->index);
		}
	} else {
		break_group(g,
		            "group %u: state transfer for snapshot %llu "
		            "given up",
		            g->id, (unsigned long long)x->index);
	}
	if (rv == 0) {
		replica_count_import(g->rp);
	}
	rio_install_done(x->req, rv == 0 ? 0 : RAFT_IOERR);
	free(x);
}

static void group_install(void *data, uint64_t from,
                          const struct raft_snapshot *snap,
                          struct rio_install *req)
{
	struct group *g = data;
	struct group_mgr *m = g->m;
	struct install *x;
	uint64_t applied = 0, index = 0;

	if (snap->n_bufs != 1 ||
	    replica_manifest_index(snap->bufs[0].base, snap->bufs[0].len, g->id,
	                           &index) != 0) {
		break_group(g,
		            "group %u: installed snapshot %llu has a "
		            "malformed manifest",
		            g->id, (unsigned long long)snap->index);
		rio_install_done(req, RAFT_MALFORMED);
		return;
	}
	if (g->fsm->applied_index(g->fsm, g->id, &applied) == 0 &&
	    applied >= index) {
		rio_install_done(req, 0); /* the state has it already */
		return;
	}
	if (m->o.fetch == NULL) {
		break_group(g,
		            "group %u: snapshot %llu is ahead of the state "
		            "(%llu) and no state transfer is set up",
		            g->id, (unsigned long long)index,
		            (unsigned long long)applied);
		rio_install_done(req, RAFT_IOERR);
		return;
	}
	x = calloc(1, sizeof *x);
	if (x == NULL) {
		break_group(g, "group %u: out of memory", g->id);
		rio_install_done(req, RAFT_NOMEM);
		return;
	}
	x->g = g;
	x->req = req;
	x->index = index;
	g->install = x;
	if (m->o.fetch(m->o.fetch_data, g->id, from, index, install_done, x) !=
	    0) {
		if (g->install == x) {
			g->install = NULL;
			break_group(g,
			            "group %u: cannot start the state transfer "
			            "for snapshot %llu",
			            g->id, (unsigned long long)index);
			rio_install_done(req, RAFT_IOERR);
			free(x);
		}
	}
}

static void remove_group(struct group_mgr *m, struct group *g)
{
	size_t i = find_pos(m, g->id);
	if (i < m->n && m->v[i] == g) {
		memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
		m->n--;
	}
	unlink_dirty(g);
	free(g);
}

static void raft_closed(struct raft *r)
{
	struct group *g = r->data;
	struct group_mgr *m = g->m;

	replica_free(g->rp); /* runs the callbacks still due */
	g->rp = NULL;
	rio_release(&g->io);
	if (g->remove) {
		remove_group(m, g);
	} else {
		g->state = G_DEAD;
		unlink_dirty(g);
	}
	maybe_finish(m);
}

static void stop_group(struct group *g)
{
	if (g->state == G_STOPPING || g->state == G_DEAD) {
		return;
	}
	g->state = G_STOPPING;
	if (g->install != NULL) {
		g->install->g = NULL; /* the fetch owner finishes it */
		g->install = NULL;
	}
	replica_shutdown(g->rp);
	raft_close(&g->raft, raft_closed);
	mark_dirty(g);
}

static void group_failed(struct group *g)
{
	struct group_mgr *m = g->m;
	if (g->failed) {
		return;
	}
	g->failed = true;
	if (!g->broken) {
		snprintf(g->errmsg, sizeof g->errmsg, "%s",
		         replica_errmsg(g->rp));
	}
	if (m->o.on_failed != NULL) {
		m->o.on_failed(m->o.on_failed_data, g->id, g->errmsg);
	}
	stop_group(g);
}

/* Sets libraft's trailing count so that the entries kept after a snapshot
 * hold about trailing_bytes, from the mean size of the newest entries of
 * the group's log as our io saw them pass (rio_recent_entry_bytes);
 * bounded by [MIN_TRAILING, trailing_max]. */
static void adapt_trailing(struct group *g)
{
	struct raft *r = &g->raft;
	raft_index last = raft_last_index(r);
	uint64_t bytes, want;
	unsigned n, t;

	if (last < g->adapted_at) {
		g->adapted_at = last; /* truncated */
	}
	if (last - g->adapted_at < ADAPT_EVERY) {
		return;
	}
	g->adapted_at = last;
	rio_recent_entry_bytes(&g->io, &n, &bytes);
	if (n == 0 || bytes == 0) {
		return;
	}
	want = g->trailing_bytes * n / bytes;
	t = want > g->trailing_max ? g->trailing_max : (unsigned)want;
	if (t < MIN_TRAILING) {
		t = g->trailing_max < MIN_TRAILING ? g->trailing_max
		                                   : MIN_TRAILING;
	}
	if (t != r->snapshot.trailing) {
		raft_set_snapshot_trailing(r, t);
	}
}

/* Counts the elections this replica ran (a term it became candidate in, or
 * leader without a candidacy seen: a single voter wins at once) and the
 * terms it led. Polls see every state change: the group is dirty after
 * each raft event. */
static void track_elections(struct group *g)
{
	struct raft *r = &g->raft;
	int state = raft_state(r);

	if ((state == RAFT_CANDIDATE || state == RAFT_LEADER) &&
	    r->current_term > g->ran_term) {
		g->ran_term = r->current_term;
		g->elections++;
		g->m->elections++;
	}
	if (state == RAFT_LEADER && r->current_term > g->led_term) {
		g->led_term = r->current_term;
		g->leaderships++;
		g->m->leaderships++;
	}
}

static void prepare_cb(uv_prepare_t *p)
{
	struct group_mgr *m = p->data;
	int round;

	for (round = 0; round < MAX_ROUNDS; round++) {
		struct group *g;
		/* This round polls the groups dirty now; a group its own poll
		 * (or another's) makes dirty again waits for the next round,
		 * so a group that keeps itself busy cannot hold the loop. */
		m->round_head = m->dirty_head;
		m->dirty_head = m->dirty_tail = NULL;
		while ((g = m->round_head) != NULL) {
			m->round_head = g->dirty_next;
			g->dirty_next = NULL;
			g->dirty = false;
			if (g->rp == NULL || g->state == G_CREATED) {
				continue;
			}
			m->activity++;
			if (g->broken || replica_poll(g->rp) != 0) {
				group_failed(g);
			} else if (g->state == G_STARTED) {
				track_elections(g);
				adapt_trailing(g);
				quiesce_poll(g);
			}
		}
		/* Hands this turn's appends to the writer; its deferred
		 * completions may make groups dirty again. */
		rio_store_flush(m->store);
		if (m->dirty_head == NULL) {
			break;
		}
	}
	if (m->idle_on && m->dirty_head == NULL) {
		uv_idle_stop(&m->idle);
		m->idle_on = false;
	}
}

int group_mgr_init(struct group_mgr **out, uv_loop_t *loop,
                   struct rio_store *store, const struct group_options *o)
{
	struct group_mgr *m;

	*out = NULL;
	if (o == NULL || o->node_id == 0 || o->address == NULL) {
		return REPLICA_EINVAL;
	}
	m = calloc(1, sizeof *m);
	if (m == NULL) {
		return REPLICA_ENOMEM;
	}
	m->loop = loop;
	m->store = store;
	m->o = *o;
	m->address = strdup(o->address);
	if (m->address == NULL) {
		free(m);
		return REPLICA_ENOMEM;
	}
	m->o.address = m->address;
	if (!o->no_quiesce) {
		/* Long enough for a heartbeat or two after the last commit,
		 * so the followers know it before they stop hearing. */
		unsigned hb = o->defaults.heartbeat_timeout_ms != 0
		                  ? o->defaults.heartbeat_timeout_ms
		                  : DEFAULT_HEARTBEAT_MS;
		m->quiesce_idle_ms = o->quiesce_idle_ms != 0
		                         ? o->quiesce_idle_ms
		                         : (4 * hb > 500 ? 4 * hb : 500);
	}
	uv_prepare_init(loop, &m->prepare);
	m->prepare.data = m;
	uv_prepare_start(&m->prepare, prepare_cb);
	uv_unref((uv_handle_t *)&m->prepare);
	uv_idle_init(loop, &m->idle);
	m->idle.data = m;
	*out = m;
	return 0;
}

const char *group_mgr_errmsg(const struct group_mgr *m)
{
	return m->errmsg;
}

static unsigned pick(unsigned v, unsigned dflt, unsigned builtin)
{
	return v != 0 ? v : dflt != 0 ? dflt : builtin;
}

static size_t pick_size(size_t v, size_t dflt)
{
	return v != 0 ? v : dflt;
}

int group_create(struct group_mgr *m, uint32_t id, struct fsm *fsm,
                 const struct group_params *p)
{
	const struct group_params *d = &m->o.defaults;
	struct group_params none = {0};
	struct replica_params rpp = {0};
	struct replica_hooks rh = {0};
	struct rio_hooks ioh = {0};
	struct group *g;
	size_t pos;
	int rv;

	if (m->closing) {
		return set_err(m, REPLICA_ESHUTDOWN, "the groups are closing");
	}
	if (find(m, id) != NULL) {
		return set_err(m, REPLICA_EEXIST, "group %u exists", id);
	}
	if (p == NULL) {
		p = &none;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap == 0 ? 16 : m->cap * 2;
		struct group **v = realloc(m->v, cap * sizeof *v);
		if (v == NULL) {
			return set_err(m, REPLICA_ENOMEM, "out of memory");
		}
		m->v = v;
		m->cap = cap;
	}
	g = calloc(1, sizeof *g);
	if (g == NULL) {
		return set_err(m, REPLICA_ENOMEM, "out of memory");
	}
	g->id = id;
	g->m = m;
	g->fsm = fsm;
	rpp.max_entry_bytes = pick_size(p->max_entry_bytes, d->max_entry_bytes);
	rpp.max_pending_bytes =
	    pick_size(p->max_pending_bytes, d->max_pending_bytes);
	rpp.snapshot_bytes = p->snapshot_bytes != 0   ? p->snapshot_bytes
	                     : d->snapshot_bytes != 0 ? d->snapshot_bytes
	                                              : DEFAULT_SNAPSHOT_BYTES;
	g->trailing_bytes =
	    p->snapshot_trailing_bytes != 0   ? p->snapshot_trailing_bytes
	    : d->snapshot_trailing_bytes != 0 ? d->snapshot_trailing_bytes
	                                      : DEFAULT_TRAILING_BYTES;
	rh.clock = m->o.clock;
	rh.clock_data = m->o.clock_data;
	rh.notify = group_notify;
	rh.notify_data = g;
	if (m->o.confirm_send != NULL) {
		rh.confirm = group_confirm;
		rh.confirm_data = g;
	}
	/* State transfer runs before the install is stored (the rio install
	 * hook below), so restore only checks. */
	rh.fetch = NULL;
	rh.fetch_data = NULL;
	rv = replica_new(&g->rp, id, fsm, &rpp, &rh);
	if (rv != 0) {
		free(g);
		return set_err(m, rv, "group %u: %s", id, replica_strerror(rv));
	}
	ioh.data = g;
	ioh.notify = group_notify;
	ioh.sync = group_sync;
	ioh.install = group_install;
	ioh.admit = group_admit;
	ioh.wake = io_wake;
	g->io.data = NULL;
	rv = rio_init(&g->io, m->store, id, &ioh);
	if (rv != 0) {
		replica_free(g->rp);
		free(g);
		return set_err(m, replica_from_raft(rv), "group %u: %s", id,
		               raft_strerror(rv));
	}
	rv = raft_init(&g->raft, &g->io, replica_raft_fsm(g->rp), m->o.node_id,
	               m->address);
	if (rv != 0) {
		set_err(m, replica_from_raft(rv), "group %u: %s", id,
		        raft_errmsg(&g->raft));
		rio_release(&g->io);
		replica_free(g->rp);
		free(g);
		return replica_from_raft(rv);
	}
	g->raft.data = g;
	raft_set_election_timeout(&g->raft, pick(p->election_timeout_ms,
	                                         d->election_timeout_ms,
	                                         DEFAULT_ELECTION_MS));
	raft_set_heartbeat_timeout(&g->raft, pick(p->heartbeat_timeout_ms,
	                                          d->heartbeat_timeout_ms,
	                                          DEFAULT_HEARTBEAT_MS));
	raft_set_snapshot_threshold(&g->raft, pick(p->snapshot_threshold,
	                                           d->snapshot_threshold,
	                                           DEFAULT_THRESHOLD));
	g->trailing_max =
	    pick(p->snapshot_trailing, d->snapshot_trailing, DEFAULT_TRAILING);
	raft_set_snapshot_trailing(&g->raft, g->trailing_max);
	g->state = G_CREATED;
	pos = find_pos(m, id);
	memmove(&m->v[pos + 1], &m->v[pos], (m->n - pos) * sizeof *m->v);
	m->v[pos] = g;
	m->n++;
	return 0;
}

int group_bootstrap(struct group_mgr *m, uint32_t id,
                    const struct group_member *members, unsigned n)
{
	struct group *g = find(m, id);
	struct raft_configuration conf;
	unsigned i;
	int rv;

	if (g == NULL) {
		return set_err(m, REPLICA_ENOGROUP, "no group %u", id);
	}
	if (g->state != G_CREATED) {
		return set_err(m, REPLICA_EEXIST, "group %u already started",
		               id);
	}
	if (n == 0 || members == NULL) {
		return set_err(m, REPLICA_EINVAL, "group %u: no members", id);
	}
	raft_configuration_init(&conf);
	for (i = 0; i < n; i++) {
		rv = raft_configuration_add(&conf, members[i].id,
		                            members[i].address, RAFT_VOTER);
		if (rv != 0) {
			raft_configuration_close(&conf);
			return set_err(m, replica_from_raft(rv),
			               "group %u: member %llu: %s", id,
			               (unsigned long long)members[i].id,
			               raft_strerror(rv));
		}
	}
	rv = raft_bootstrap(&g->raft, &conf);
	raft_configuration_close(&conf);
	if (rv != 0) {
		return set_err(m, replica_from_raft(rv), "group %u: %s", id,
		               raft_errmsg(&g->raft));
	}
	return 0;
}

int group_start(struct group_mgr *m, uint32_t id)
{
	struct group *g = find(m, id);
	int rv;

	if (g == NULL) {
		return set_err(m, REPLICA_ENOGROUP, "no group %u", id);
	}
	if (g->state != G_CREATED) {
		return set_err(m, REPLICA_EEXIST, "group %u already started",
		               id);
	}
	rv = replica_bind(g->rp, &g->raft);
	if (rv != 0) {
		return set_err(m, rv, "%s", replica_errmsg(g->rp));
	}
	rv = raft_start(&g->raft);
	if (rv != 0) {
		const char *why = raft_errmsg(&g->raft);
		if (replica_errmsg(g->rp)[0] != '\0') {
			why = replica_errmsg(g->rp);
		}
		return set_err(m, replica_from_raft(rv), "group %u: %s", id,
		               why);
	}
	g->state = G_STARTED;
	mark_dirty(g); /* a single voter is leader already */
	return 0;
}

int group_stop(struct group_mgr *m, uint32_t id)
{
	struct group *g = find(m, id);

	if (g == NULL) {
		return set_err(m, REPLICA_ENOGROUP, "no group %u", id);
	}
	g->remove = true;
	if (g->state == G_DEAD) {
		remove_group(m, g);
		maybe_finish(m);
		return 0;
	}
	stop_group(g);
	return 0;
}

/* A proposal or read on a quiet leader wakes the group; on a follower it
 * is refused with a leader hint, which needs no wake. */
static void wake_leader(struct group *g)
{
	if (g->q.quiet && raft_state(&g->raft) == RAFT_LEADER) {
		group_wake(g, 0);
	}
}

static struct group *live(struct group_mgr *m, uint32_t id, int *rv)
{
	struct group *g = find(m, id);
	if (g == NULL) {
		*rv = REPLICA_ENOGROUP;
		return NULL;
	}
	if (g->state != G_STARTED) {
		*rv = REPLICA_ESHUTDOWN;
		return NULL;
	}
	return g;
}

int group_propose(struct group_mgr *m, uint32_t id, const void *cmd, size_t len,
                  replica_propose_cb cb, void *data, uint64_t *leader_id)
{
	int rv;
	struct group *g = live(m, id, &rv);
	if (g == NULL) {
		if (leader_id != NULL) {
			*leader_id = 0;
		}
		return rv;
	}
	wake_leader(g);
	return replica_propose(g->rp, cmd, len, cb, data, leader_id);
}

int group_propose_reserve(struct group_mgr *m, uint32_t id, size_t len,
                          replica_reserved_cb cb, void *data,
                          uint64_t *leader_id, uint8_t **cmd)
{
	int rv;
	struct group *g = live(m, id, &rv);
	if (g == NULL) {
		if (leader_id != NULL) {
			*leader_id = 0;
		}
		return rv;
	}
	wake_leader(g);
	return replica_propose_reserve(g->rp, len, cb, data, leader_id, cmd);
}

int group_read(struct group_mgr *m, uint32_t id, replica_read_cb cb, void *data,
               uint64_t *leader_id)
{
	int rv;
	struct group *g = live(m, id, &rv);
	if (g == NULL) {
		if (leader_id != NULL) {
			*leader_id = 0;
		}
		return rv;
	}
	wake_leader(g);
	return replica_read(g->rp, cb, data, leader_id);
}

static void transfer_cb(struct raft_transfer *req)
{
	(void)req; /* the group's own: nothing to free */
}

int group_transfer(struct group_mgr *m, uint32_t id, uint64_t target)
{
	int rv;
	struct group *g = live(m, id, &rv);

	if (g == NULL) {
		return set_err(m, rv, "group %u is not running", id);
	}
	wake_leader(g);
	/* libraft refuses while a transfer is under way (r->transfer set),
	 * so the request is free whenever it accepts. */
	rv = raft_transfer(&g->raft, &g->transfer, target, transfer_cb);
	if (rv != 0) {
		return set_err(m, replica_from_raft(rv), "group %u: %s", id,
		               raft_errmsg(&g->raft));
	}
	mark_dirty(g);
	return 0;
}

int group_expedite_election(struct group_mgr *m, uint32_t id, uint64_t gone,
                            unsigned ms)
{
	int rv;
	struct group *g = live(m, id, &rv);
	struct raft *r;
	raft_time now, elapsed;
	unsigned t;

	if (g == NULL) {
		return rv;
	}
	r = &g->raft;
	if (ms == 0 || raft_state(r) != RAFT_FOLLOWER ||
	    r->follower_state.current_leader.id != gone) {
		return REPLICA_EINVAL;
	}
	group_wake(g, gone); /* a quiet follower must tick to elect */
	/* libraft keeps the timer as start + randomized timeout: bring the
	 * expiry forward, never back. */
	now = g->io.time(&g->io);
	elapsed =
	    now > r->election_timer_start ? now - r->election_timer_start : 0;
	t = (unsigned)g->io.random(&g->io, (int)ms, 2 * (int)ms);
	if (elapsed + t < r->follower_state.randomized_election_timeout) {
		r->follower_state.randomized_election_timeout =
		    (unsigned)(elapsed + t);
	}
	/* A follower that still knows a leader refuses its vote to any
	 * candidate (libraft's leader stickiness), which would hold the
	 * election until every follower's timer ran out. The next message
	 * of a leader that is in fact alive sets it again. */
	r->follower_state.current_leader.id = 0;
	return 0;
}

int group_status(struct group_mgr *m, uint32_t id, struct group_status *st)
{
	struct group *g = find(m, id);
	struct raft *r;
	unsigned i;

	memset(st, 0, sizeof *st);
	st->group = id;
	if (g == NULL) {
		return set_err(m, REPLICA_ENOGROUP, "no group %u", id);
	}
	st->failed = g->failed;
	snprintf(st->message, sizeof st->message, "%s", g->errmsg);
	if (g->rp == NULL) {
		return 0; /* closed: unavailable */
	}
	r = &g->raft;
	replica_stats(g->rp, &st->stats);
	st->ready = replica_is_ready(g->rp);
	st->term = r->current_term;
	for (i = 0; i < r->configuration.n && st->n_voters < GROUP_MAX_VOTERS;
	     i++) {
		if (r->configuration.servers[i].role == RAFT_VOTER) {
			st->voters[st->n_voters++] =
			    r->configuration.servers[i].id;
		}
	}
	if (g->state != G_STARTED) {
		return 0;
	}
	switch (raft_state(r)) {
	case RAFT_FOLLOWER:
		st->role = GROUP_ROLE_FOLLOWER;
		break;
	case RAFT_CANDIDATE:
		st->role = GROUP_ROLE_CANDIDATE;
		break;
	case RAFT_LEADER:
		st->role = GROUP_ROLE_LEADER;
		break;
	default:
		st->role = GROUP_ROLE_UNAVAILABLE;
		break;
	}
	{
		raft_id lid = 0;
		const char *addr = NULL;
		raft_leader(r, &lid, &addr);
		st->leader_id = lid;
		if (addr != NULL) {
			snprintf(st->leader_address, sizeof st->leader_address,
			         "%s", addr);
		}
	}
	track_elections(g);
	st->elections = g->elections;
	st->leaderships = g->leaderships;
	rio_group_counts(&g->io, &st->snapshots_sent, &st->snapshots_installed);
	st->commit_index = r->commit_index;
	st->applied_index = raft_last_applied(r);
	st->last_index = raft_last_index(r);
	st->snapshot_index = rio_snapshot_index(&g->io);
	if (st->role == GROUP_ROLE_LEADER && r->leader_state.progress != NULL) {
		for (i = 0; i < r->configuration.n &&
		            st->n_progress < GROUP_MAX_VOTERS;
		     i++) {
			if (r->configuration.servers[i].id == r->id) {
				continue;
			}
			st->progress[st->n_progress].id =
			    r->configuration.servers[i].id;
			st->progress[st->n_progress].match_index =
			    r->leader_state.progress[i].match_index;
			st->n_progress++;
		}
	}
	st->quiet = g->q.quiet;
	if ((st->role == GROUP_ROLE_FOLLOWER ||
	     st->role == GROUP_ROLE_CANDIDATE) &&
	    !g->q.quiet) {
		/* A quiet follower hears its leader's node instead. */
		uint64_t now = uv_now(m->loop);
		st->last_contact_ms = now > r->election_timer_start
		                          ? now - r->election_timer_start
		                          : 0;
	}
	return 0;
}

int group_config(struct group_mgr *m, uint32_t id, struct group_server *out,
                 unsigned max, unsigned *n, bool *changing)
{
	int rv;
	struct group *g = live(m, id, &rv);
	struct raft *r;
	unsigned i;

	*n = 0;
	*changing = false;
	if (g == NULL) {
		return rv;
	}
	r = &g->raft;
	if (raft_state(r) == RAFT_LEADER) {
		*changing = r->leader_state.change != NULL ||
		            r->leader_state.promotee_id != 0 ||
		            r->configuration_uncommitted_index != 0;
	}
	for (i = 0; i < r->configuration.n && *n < max; i++) {
		const struct raft_server *sv = &r->configuration.servers[i];
		struct group_server *o = &out[(*n)++];
		o->id = sv->id;
		o->role = sv->role == RAFT_VOTER     ? GROUP_VOTER
		          : sv->role == RAFT_STANDBY ? GROUP_STANDBY
		                                     : GROUP_SPARE;
		o->caught_up = false;
		if (raft_state(r) == RAFT_LEADER &&
		    r->leader_state.progress != NULL) {
			raft_index match =
			    r->leader_state.progress[i].match_index;
			o->caught_up =
			    sv->id == r->id ||
			    (match > 0 &&
			     match + CAUGHT_UP_ENTRIES >= r->commit_index);
		}
	}
	return 0;
}

struct change {
	struct raft_change req;
	struct group_mgr *m;
	uint32_t id;
	group_change_cb cb;
	void *data;
};

static void change_cb(struct raft_change *req, int status)
{
	struct change *c = req->data;
	if (c->cb != NULL) {
		c->cb(c->data, c->id,
		      status == 0 ? 0 : replica_from_raft(status));
	}
	free(c);
}

int group_change(struct group_mgr *m, uint32_t id, int op, uint64_t node,
                 const char *address, int role, group_change_cb cb, void *data)
{
	int rv;
	struct group *g = live(m, id, &rv);
	struct change *c;
	int raft_role = role == GROUP_VOTER     ? RAFT_VOTER
	                : role == GROUP_STANDBY ? RAFT_STANDBY
	                                        : RAFT_SPARE;

	if (g == NULL) {
		return set_err(m, rv, "group %u is not running", id);
	}
	wake_leader(g);
	c = calloc(1, sizeof *c);
	if (c == NULL) {
		return set_err(m, REPLICA_ENOMEM, "out of memory");
	}
	c->req.data = c;
	c->m = m;
	c->id = id;
	c->cb = cb;
	c->data = data;
	switch (op) {
	case GROUP_CHANGE_ADD:
		rv = raft_add(&g->raft, &c->req, node, address, change_cb);
		break;
	case GROUP_CHANGE_ASSIGN:
		rv = raft_assign(&g->raft, &c->req, node, raft_role, change_cb);
		break;
	case GROUP_CHANGE_REMOVE:
		/* The removed replica gets no more messages from this
		 * leader: if it is quiet it must wake, time out and see that
		 * it was removed (docs/cluster.md "Membership"). */
		send_quiesce(g, node, g->raft.current_term, 0, true, NULL);
		rv = raft_remove(&g->raft, &c->req, node, change_cb);
		break;
	default:
		rv = RAFT_INVALID;
		break;
	}
	if (rv != 0) {
		/* libraft 0.15's raft_assign records the request as the
		 * pending change before appending the new configuration, and
		 * leaves it there when the append fails: it would call back a
		 * freed request when leadership is lost, and refuse every
		 * later change. The request was never taken: undo that. */
		if (raft_state(&g->raft) == RAFT_LEADER &&
		    g->raft.leader_state.change == &c->req) {
			g->raft.leader_state.change = NULL;
		}
		free(c);
		return set_err(m, replica_from_raft(rv), "group %u: %s", id,
		               raft_errmsg(&g->raft));
	}
	mark_dirty(g);
	return 0;
}

void group_mgr_counts(const struct group_mgr *m, uint64_t *elections,
                      uint64_t *leaderships)
{
	*elections = m->elections;
	*leaderships = m->leaderships;
}

size_t group_ids(const struct group_mgr *m, uint32_t *ids, size_t max)
{
	size_t i;
	for (i = 0; i < m->n && i < max; i++) {
		ids[i] = m->v[i]->id;
	}
	return m->n;
}

static void handle_closed(uv_handle_t *h)
{
	struct group_mgr *m = h->data;
	m->open_handles--;
	if (m->open_handles == 0 && m->close_cb != NULL) {
		m->close_cb(m, m->close_data);
	}
}

static void maybe_finish(struct group_mgr *m)
{
	if (!m->closing || m->n > 0 || m->handles_closing) {
		return;
	}
	m->handles_closing = true;
	if (m->idle_on) {
		uv_idle_stop(&m->idle);
		m->idle_on = false;
	}
	m->open_handles = 2;
	uv_close((uv_handle_t *)&m->prepare, handle_closed);
	uv_close((uv_handle_t *)&m->idle, handle_closed);
}

void group_mgr_close(struct group_mgr *m, group_mgr_close_cb cb, void *data)
{
	size_t i;

	m->closing = true;
	m->close_cb = cb;
	m->close_data = data;
	/* Copy the ids: stopping a dead group removes it at once. */
	for (i = m->n; i > 0; i--) {
		group_stop(m, m->v[i - 1]->id);
	}
	maybe_finish(m);
}

void group_mgr_free(struct group_mgr *m)
{
	if (m == NULL) {
		return;
	}
	free(m->v);
	free(m->changed);
	free(m->address);
	free(m);
}
