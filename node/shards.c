/* The node's replicated core; see shards.h and docs/cluster.md. */
#include "node/shards.h"

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flow/flow.h"
#include "flow/flow_sweep.h"
#include "node/auth/auth.h"
#include "node/membership.h"
#include "net/tls.h"
#include "node/shards_internal.h"
#include "raft/forward.h"
#include "raft/group.h"
#include "raft/io.h"
#include "raft/join.h"
#include "raft/transport.h"
#include "raft/xfer.h"
#include "store/dwrite.h"
#include "store/store.h"
#include "wire/felix_hash.h"
#include "wire/fsnp_slot.h"

#define EXPIRE_BATCH 1000
#define EXPIRE_LOOKAHEAD_MS 60000 /* an idle group's sweep rests this long */
#define TICK_MS 100
#define REFRESH_FULL_MS 10000 /* refresh_local: every group this often */
#define START_FLUSH_EVERY 256 /* groups started between log flushes */
#define ANNOUNCE_MS 500
#define META_MS 1000
#define BALANCE_STABLE_MS 2000  /* lead this long before handing over */
#define BALANCE_RETRY_MS 10000  /* between hand-over attempts per group */
#define BALANCE_PEER_UP_MS 3000 /* a peer this long up has caught up */
#define RECONCILE_MS 500        /* membership moves and replica clean-up */
#define HANDOFF_MS 1000 /* stopping: the longest wait for leaderships to go */

/* One pending call of a protocol server; kept for reuse (or freed) after
 * its callback. */
struct pending {
	struct shards *s;
	uint32_t group;
	shards_propose_cb propose_cb;
	shards_read_cb read_cb;
	void *data;
	struct pending *next; /* in the spare list */
};

/* Done calls kept up to this many: every request of a protocol server
 * makes one, and malloc's per-thread cache holds only a few. */
#define MAX_SPARE_PENDING 1024

static struct pending *pending_new(struct shards *s)
{
	struct pending *p = s->spare;
	if (p != NULL) {
		s->spare = p->next;
		s->n_spare--;
		memset(p, 0, sizeof *p);
		return p;
	}
	return calloc(1, sizeof *p);
}

static void pending_free(struct shards *s, struct pending *p)
{
	if (s->n_spare < MAX_SPARE_PENDING) {
		p->next = s->spare;
		s->spare = p;
		s->n_spare++;
		return;
	}
	free(p);
}

static int map_status(int rv)
{
	switch (rv) {
	case REPLICA_OK:
		return SHARDS_OK;
	case REPLICA_ENOTLEADER:
		return SHARDS_ENOTLEADER;
	case REPLICA_ELEADERSHIPLOST:
	case REPLICA_EUNAVAILABLE:
		return SHARDS_EUNAVAILABLE;
	case REPLICA_ETOOBIG:
		return SHARDS_ETOOBIG;
	case REPLICA_EBUSY:
	case REPLICA_ENOMEM:
		return SHARDS_EBUSY;
	case REPLICA_ESHUTDOWN:
		return SHARDS_ESHUTDOWN;
	case REPLICA_ENOGROUP:
		return SHARDS_ENOGROUP;
	case REPLICA_EIO:
		return SHARDS_EIO;
	default:
		return SHARDS_EINVAL;
	}
}

const char *shards_strerror(int status)
{
	switch (status) {
	case SHARDS_OK:
		return "ok";
	case SHARDS_ENOTLEADER:
		return "this node does not lead the shard";
	case SHARDS_EUNAVAILABLE:
		return "shard unavailable: no leader reachable in time, or "
		       "leadership lost before the answer (a write may or may "
		       "not have happened)";
	case SHARDS_EBUSY:
		return "shard busy: too much work queued, retry later";
	case SHARDS_ETOOBIG:
		return "request too large for one replicated entry";
	case SHARDS_ESHUTDOWN:
		return "node shutting down";
	case SHARDS_ENOGROUP:
		return "no such shard";
	case SHARDS_EIO:
		return "storage failure on this node";
	default:
		return "invalid request";
	}
}

static uint64_t wall_ms(void *data)
{
	struct timespec ts;
	(void)data;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t shards_now_ms(struct shards *s)
{
	/* Read once per loop millisecond: every read asks (TTL visibility),
	 * and clock_gettime was 2 % of a GET. */
	uint64_t loop_ms = uv_now(s->loop);
	if (s->wall_at != loop_ms || s->wall == 0) {
		s->wall_at = loop_ms;
		s->wall = wall_ms(NULL);
	}
	return s->wall;
}

uint64_t shards_now_fresh_ms(struct shards *s)
{
	s->wall_at = uv_now(s->loop);
	s->wall = wall_ms(NULL);
	return s->wall;
}

static void on_group_failed(void *data, uint32_t group, const char *msg)
{
	struct shards *s = data;
	log_error(s->log, "shards", "group %" PRIu32 " stopped: %s", group,
	          msg);
}

/* ---- the protocol servers' calls ---- */

static void on_forwarded(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct pending *p = data;
	p->propose_cb(p->data, map_status(status),
	              status == REPLICA_OK ? result : NULL,
	              status == REPLICA_OK ? len : 0);
	pending_free(p->s, p);
}

/* `owned` (may be NULL): the command, handed over (freed on every path);
 * otherwise `cmd` is copied. */
static int submit(struct shards *s, uint32_t group, int op, const void *cmd,
                  uint8_t *owned, size_t len, shards_propose_cb cb, void *data)
{
	struct pending *p;
	int rv;

	if (s->closing || !valid_group(s, group) ||
	    (p = pending_new(s)) == NULL) {
		free(owned);
		return s->closing               ? SHARDS_ESHUTDOWN
		       : !valid_group(s, group) ? SHARDS_ENOGROUP
		                                : SHARDS_EBUSY;
	}
	p->s = s;
	p->group = group;
	p->propose_cb = cb;
	p->data = data;
	rv = owned != NULL
	         ? forward_submit_owned(s->f, group, op, owned, len,
	                                s->cfg.forward_timeout_ms, on_forwarded,
	                                p)
	         : forward_submit(s->f, group, op, cmd, len,
	                          s->cfg.forward_timeout_ms, on_forwarded, p);
	if (rv != REPLICA_OK) {
		pending_free(s, p);
		return map_status(rv);
	}
	return SHARDS_OK;
}

static int reserve_local(struct shards *s, uint32_t group, size_t len,
                         shards_propose_cb cb, void *data, uint8_t **cmd);

int shards_propose(struct shards *s, uint32_t group, const void *cmd,
                   size_t len, shards_propose_cb cb, void *data)
{
	uint8_t *p;

	/* Copied straight into this node's entry when it would propose
	 * here: no forwarding call of its own (a SET's largest share of
	 * the proposal path). */
	if (reserve_local(s, group, len, cb, data, &p) == 0) {
		if (len > 0) {
			memcpy(p, cmd, len);
		}
		return SHARDS_OK;
	}
	return submit(s, group, FORWARD_PROPOSE, cmd, NULL, len, cb, data);
}

int shards_propose_owned(struct shards *s, uint32_t group, uint8_t *cmd,
                         size_t len, shards_propose_cb cb, void *data)
{
	return submit(s, group, FORWARD_PROPOSE, NULL, cmd, len, cb, data);
}

/* A command encoded straight into this node's entry. Refused before
 * libraft took it (not leader, so never applied), it goes to the leader
 * elsewhere, as the forwarding path does with a command its local group
 * refused. */
static void on_reserved(void *data, int status, uint8_t *result, size_t len,
                        const uint8_t *cmd, size_t cmd_len)
{
	struct pending *p = data;
	struct shards *s = p->s;

	if (status == REPLICA_ENOTLEADER && cmd != NULL && !s->closing) {
		status = forward_submit(s->f, p->group, FORWARD_PROPOSE, cmd,
		                        cmd_len, s->cfg.forward_timeout_ms,
		                        on_forwarded, p);
		if (status == REPLICA_OK) {
			free(result);
			return; /* p is on_forwarded's now */
		}
	}
	on_forwarded(p, status, result, len); /* answers and frees p */
	free(result);
}

/* Where the forwarding path would propose a command on this node (the
 * route names no other leader), room for its `len` bytes in the entry
 * being filled, its answer through on_reserved: *cmd is to be written at
 * once. Non-zero: not proposed here (go through the forwarding path). */
static int reserve_local(struct shards *s, uint32_t group, size_t len,
                         shards_propose_cb cb, void *data, uint8_t **cmd)
{
	struct pending *p;
	uint64_t lid;
	bool self;

	if (s->closing || !valid_group(s, group) ||
	    ((lid = shards_leader(s, group, &self)) != 0 &&
	     lid != s->cfg.node_id) ||
	    (p = pending_new(s)) == NULL) {
		return -1;
	}
	p->s = s;
	p->group = group;
	p->propose_cb = cb;
	p->data = data;
	if (group_propose_reserve(s->groups, group, len, on_reserved, p, &lid,
	                          cmd) != REPLICA_OK) {
		pending_free(s, p);
		return -1;
	}
	s->direct++;
	return 0;
}

int shards_propose_cmd(struct shards *s, uint32_t group,
                       const struct store_cmd *c, size_t len,
                       shards_propose_cb cb, void *data)
{
	uint8_t *cmd;
	size_t n;
	const char *e;

	if (reserve_local(s, group, len, cb, data, &cmd) == 0) {
		store_cmd_encode_to(c, cmd, len);
		return SHARDS_OK;
	}
	if (store_cmd_encode(c, &cmd, &n, &e) != 0) {
		return SHARDS_EINVAL;
	}
	return shards_propose_owned(s, group, cmd, n, cb, data);
}

int shards_read_cmd(struct shards *s, uint32_t group, const void *cmd,
                    size_t len, shards_propose_cb cb, void *data)
{
	return submit(s, group, FORWARD_READ, cmd, NULL, len, cb, data);
}

static void on_read(void *data, int status)
{
	struct pending *p = data;
	p->read_cb(p->data, map_status(status));
	pending_free(p->s, p);
}

int shards_read(struct shards *s, uint32_t group, shards_read_cb cb, void *data)
{
	struct pending *p;
	uint64_t leader = 0;
	int rv;

	if (s->closing) {
		return SHARDS_ESHUTDOWN;
	}
	if (!valid_group(s, group)) {
		return SHARDS_ENOGROUP;
	}
	p = pending_new(s);
	if (p == NULL) {
		return SHARDS_EBUSY;
	}
	p->s = s;
	p->group = group;
	p->read_cb = cb;
	p->data = data;
	rv = group_read(s->groups, group, on_read, p, &leader);
	if (rv != REPLICA_OK) {
		pending_free(s, p);
		/* A group without a replica here is led elsewhere. */
		return rv == REPLICA_ENOGROUP ? SHARDS_ENOTLEADER
		                              : map_status(rv);
	}
	return SHARDS_OK;
}

/* The forward module's read executor: the store's answer on the leader. */
static int exec_read(void *data, uint32_t group, const uint8_t *cmd, size_t len,
                     uint8_t **result, size_t *rlen)
{
	struct shards *s = data;
	struct fsm_result res = {0};
	/* Never before the group's newest entry: the loop's cached clock can
	 * be a millisecond behind it, and a read right after a write (a
	 * claim's peek after a create) must see the write's time as past. */
	uint64_t now = shards_now_ms(s);
	uint64_t newest = group_last_now_ms(s->groups, group);
	if (newest > now) {
		now = newest;
	}
	if (store_read(s->store, group, now, cmd, len, &res) != 0) {
		log_error(s->log, "shards", "read on group %" PRIu32 ": %s",
		          group, store_last_error(s->store));
		free(res.data);
		return -1;
	}
	*result = res.data;
	*rlen = res.len;
	return 0;
}

struct store *shards_store(struct shards *s)
{
	return s->store;
}

unsigned shards_data_groups(const struct shards *s)
{
	return s->cfg.data_groups;
}

uint32_t shards_group_of_slot(const struct shards *s, unsigned slot)
{
	return 1 + fsnp_slot_shard(slot, s->cfg.data_groups);
}

uint32_t shards_group_of_scope(const struct shards *s, const char *scope,
                               size_t len, uint32_t shard)
{
	uint64_t h = felix_hash64((const uint8_t *)scope, len);
	return 1 + (uint32_t)((h + shard) % s->cfg.data_groups);
}

/* ---- routing snapshot ---- */

static uint64_t effective_leader(const struct shards *s, const struct route *r)
{
	if (r->local && r->leader != 0) {
		return r->leader;
	}
	if (r->ann_leader != 0 && now_ms(s) - r->ann_ms < ANNOUNCE_TTL_MS) {
		return r->ann_leader;
	}
	return r->local ? r->leader : 0;
}

/* Raises the group's generation to the term of the leader it now names;
 * returns whether it moved. Terms only grow, and every new leader has a
 * higher one, so the generation moves on each leader change and is the
 * same on every node that knows that leader. */
static bool track_generation(struct shards *s, struct route *r)
{
	uint64_t l = effective_leader(s, r), term;
	if (l == 0) {
		return false;
	}
	term = r->local && r->leader != 0 ? r->term : r->ann_term;
	if (term <= r->gen_term) {
		return false;
	}
	r->gen_term = term;
	return true;
}

static uint64_t group_generation(const struct route *r)
{
	return r->gen_term;
}

uint64_t shards_group_applied(struct shards *s, uint32_t group)
{
	if (!valid_group(s, group) || !s->routes[group].local) {
		return 0;
	}
	return s->routes[group].applied;
}

uint64_t shards_leader(struct shards *s, uint32_t group, bool *is_self)
{
	struct route *r;
	uint64_t l;

	*is_self = false;
	if (!valid_group(s, group)) {
		return 0;
	}
	r = &s->routes[group];
	l = effective_leader(s, r);
	*is_self =
	    r->local && l == s->cfg.node_id && r->role == GROUP_ROLE_LEADER;
	return l;
}

int shards_route(struct shards *s, uint32_t group, struct shards_route *out)
{
	struct member *m;
	struct route *r;

	memset(out, 0, sizeof *out);
	out->generation = s->generation;
	if (!valid_group(s, group)) {
		return SHARDS_ENOGROUP;
	}
	r = &s->routes[group];
	out->leader_id = shards_leader(s, group, &out->is_self);
	out->replicated = r->local;
	out->group_generation = group_generation(r);
	m = out->leader_id != 0 ? member(s, out->leader_id) : NULL;
	if (m != NULL) {
		snprintf(out->felix, sizeof out->felix, "%s", m->felix);
		snprintf(out->fsnp, sizeof out->fsnp, "%s", m->fsnp);
		snprintf(out->admin, sizeof out->admin, "%s", m->admin);
	}
	return SHARDS_OK;
}

bool shards_replicated(struct shards *s, uint32_t group)
{
	return valid_group(s, group) && s->routes[group].local;
}

int shards_leader_addr(struct shards *s, uint32_t group, char *felix,
                       size_t felix_len, char *fsnp, size_t fsnp_len)
{
	struct shards_route r;
	int rv = shards_route(s, group, &r);
	if (rv != SHARDS_OK) {
		return rv;
	}
	if (r.leader_id == 0 || (felix != NULL && r.felix[0] == '\0') ||
	    (fsnp != NULL && r.fsnp[0] == '\0')) {
		return SHARDS_EUNAVAILABLE;
	}
	if (felix != NULL) {
		snprintf(felix, felix_len, "%s", r.felix);
	}
	if (fsnp != NULL) {
		snprintf(fsnp, fsnp_len, "%s", r.fsnp);
	}
	return SHARDS_OK;
}

uint64_t shards_generation(const struct shards *s)
{
	return s->generation;
}

uint64_t shards_group_generation(const struct shards *s, uint32_t group)
{
	return valid_group(s, group) ? group_generation(&s->routes[group]) : 0;
}

size_t shards_nodes(struct shards *s, struct shards_node *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_members && n < max; i++) {
		struct member *m = &s->members[i];
		struct shards_node *o = &out[n++];
		memset(o, 0, sizeof *o);
		o->id = m->id;
		o->self = m->id == s->cfg.node_id;
		o->connected = o->self || (s->t != NULL &&
		                           transport_connected(s->t, m->id));
		if (o->self) {
			/* Ours as we publish it, before the meta group has
			 * it. */
			shards_record_field(s->record, strlen(s->record),
			                    "felix", o->felix, sizeof o->felix);
			shards_record_field(s->record, strlen(s->record),
			                    "resp", o->resp, sizeof o->resp);
		} else if (m->has_record) {
			snprintf(o->felix, sizeof o->felix, "%s", m->felix);
			snprintf(o->resp, sizeof o->resp, "%s", m->resp);
		}
		o->state = m->state;
	}
	return n;
}

/* The forward module's routing callbacks. */
static uint64_t route_leader(void *data, uint32_t group)
{
	struct shards *s = data;
	bool self;
	return shards_leader(s, group, &self);
}

static size_t route_replicas(void *data, uint32_t group, uint64_t *out,
                             size_t max)
{
	struct shards *s = data;
	struct route *r;
	size_t i;
	if (!valid_group(s, group)) {
		return 0;
	}
	r = &s->routes[group];
	for (i = 0; i < r->n_replicas && i < max; i++) {
		out[i] = r->replicas[i];
	}
	return i;
}

/* State transfer sources: the leader first, then the other replicas. */
static size_t xfer_sources(void *data, uint32_t group, uint64_t *out,
                           size_t max)
{
	struct shards *s = data;
	size_t n = 0, i;
	bool self;
	uint64_t l = shards_leader(s, group, &self);
	struct route *r;

	if (!valid_group(s, group) || max == 0) {
		return 0;
	}
	r = &s->routes[group];
	if (l != 0 && !self) {
		out[n++] = l;
	}
	for (i = 0; i < r->n_replicas && n < max; i++) {
		if (r->replicas[i] != l && r->replicas[i] != s->cfg.node_id) {
			out[n++] = r->replicas[i];
		}
	}
	return n;
}

static int xfer_export(void *data, uint32_t group, const char *dir,
                       uint64_t *applied)
{
	struct shards *s = data;
	return store_export(s->store, group, dir, applied);
}

static int xfer_applied(void *data, uint32_t group, uint64_t *index)
{
	struct shards *s = data;
	if (!valid_group(s, group) || !s->routes[group].local) {
		return -1;
	}
	return store_applied_index(s->store, group, index);
}

struct refresh {
	struct shards *s;
	uint64_t now;
	bool changed;
};

/* Refreshes group g's entry from its local replica. */
static void refresh_one(void *data, uint32_t g)
{
	struct refresh *x = data;
	struct shards *s = x->s;
	struct route *r;
	uint64_t before;
	bool was_leader;
	struct group_brief b;

	if (!valid_group(s, g) || !s->routes[g].local) {
		return;
	}
	r = &s->routes[g];
	before = effective_leader(s, r);
	was_leader = r->role == GROUP_ROLE_LEADER && r->ready;
	if (group_brief(s->groups, g, &b) != REPLICA_OK) {
		return;
	}
	r->role = b.role;
	r->ready = b.ready;
	r->term = b.term;
	r->leader = b.leader_id;
	r->voter = b.voter;
	r->applied = group_applied_index(s->groups, g);
	if (b.role == GROUP_ROLE_LEADER && b.ready && !was_leader) {
		r->leader_since_ms = x->now;
		s->announce_now = true;
	} else if (was_leader && !(b.role == GROUP_ROLE_LEADER && b.ready)) {
		s->announce_now = true;
	}
	if (effective_leader(s, r) != before) {
		x->changed = true;
	}
	x->changed |= track_generation(s, r);
}

/* Refreshes the entries of the local groups that had an event since the
 * last refresh (with thousands of quiet groups a walk over all of them
 * would be most of an idle node's work), and every group now and then;
 * returns whether a leader changed. */
static bool refresh_local(struct shards *s)
{
	struct refresh x = {.s = s, .now = now_ms(s), .changed = false};

	group_mgr_drain_changed(s->groups, refresh_one, &x);
	if (x.now - s->refresh_ms >= REFRESH_FULL_MS) {
		s->refresh_ms = x.now;
		for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
			refresh_one(&x, g);
		}
	}
	return x.changed;
}

static void announce(struct shards *s)
{
	struct msg_route *v;
	uint32_t n = 0;
	size_t i;

	v = calloc(s->cfg.data_groups + 1, sizeof *v);
	if (v == NULL) {
		return;
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (r->local && r->role == GROUP_ROLE_LEADER && r->ready) {
			v[n].group = g;
			v[n].term = r->term;
			n++;
		}
	}
	for (i = 0; i < s->n_members; i++) {
		uint64_t id = s->members[i].id;
		uint8_t *p;
		int st;
		if (id == s->cfg.node_id || !transport_connected(s->t, id)) {
			continue;
		}
		p = transport_reserve(s->t, id, MSG_ROUTES, msg_routes_size(n),
		                      &st);
		if (p != NULL) {
			msg_routes_write(p, v, n);
		}
	}
	free(v);
	s->announce_ms = now_ms(s);
	s->announce_now = false;
}

static void on_routes(struct shards *s, uint64_t peer, const uint8_t *p,
                      size_t len)
{
	uint64_t now = now_ms(s), stamp = ++s->ann_stamp;
	uint32_t n, i;
	bool changed = false;

	if (msg_routes_decode(p, len, &n) != 0) {
		return;
	}
	for (i = 0; i < n; i++) {
		struct msg_route x;
		struct route *r;
		uint64_t before;
		msg_routes_get(p, i, &x);
		if (!valid_group(s, x.group)) {
			continue;
		}
		r = &s->routes[x.group];
		before = effective_leader(s, r);
		if (r->ann_leader == peer || x.term >= r->ann_term ||
		    now - r->ann_ms >= ANNOUNCE_TTL_MS) {
			r->ann_leader = peer;
			r->ann_term = x.term;
			r->ann_ms = now;
			r->ann_stamp = stamp;
		}
		changed |= effective_leader(s, r) != before;
		changed |= track_generation(s, r);
	}
	/* The list is whole: what the peer no longer leads goes. */
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (r->ann_leader == peer && r->ann_stamp != stamp) {
			uint64_t before = effective_leader(s, r);
			r->ann_leader = 0;
			if (effective_leader(s, r) != before) {
				changed = true;
			}
		}
	}
	if (changed) {
		s->generation++;
	}
}

static void forget_peer(struct shards *s, uint64_t peer)
{
	unsigned hb = s->cfg.heartbeat_ms != 0 ? s->cfg.heartbeat_ms : 100;
	unsigned fast = 3 * hb > 300 ? 3 * hb : 300;
	bool changed = false;
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (r->local && r->leader == peer) {
			/* Its connection just dropped: elect a new leader
			 * without waiting a whole election timeout. The
			 * replicas' timers are staggered by preference order
			 * (among the ones still connected) so that one
			 * candidate usually runs alone: no split vote. */
			unsigned rank = 0;
			for (unsigned i = 0; i < r->n_replicas; i++) {
				uint64_t id = r->replicas[i];
				if (id == s->cfg.node_id) {
					break;
				}
				if (id != peer && s->t != NULL &&
				    transport_connected(s->t, id)) {
					rank++;
				}
			}
			group_expedite_election(s->groups, g, peer,
			                        fast * (1 + 2 * rank));
		}
		if (r->ann_leader == peer) {
			uint64_t before = effective_leader(s, r);
			r->ann_leader = 0;
			if (effective_leader(s, r) != before) {
				changed = true;
			}
		}
	}
	if (changed) {
		s->generation++;
	}
}

/* Hands leadership to the group's preferred replica when it is up. */
static void balance(struct shards *s)
{
	uint64_t now = now_ms(s);

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_status st;
		uint64_t want = 0;
		unsigned i;

		if (!r->local || r->role != GROUP_ROLE_LEADER || !r->ready ||
		    now - r->leader_since_ms < BALANCE_STABLE_MS ||
		    (r->transfer_ms != 0 &&
		     now - r->transfer_ms < BALANCE_RETRY_MS)) {
			continue;
		}
		/* Most groups are led where placement prefers: that needs
		 * no look at the configuration. */
		for (i = 0; i < r->n_replicas; i++) {
			uint64_t id = r->replicas[i];
			struct member *m = member(s, id);
			if (id == s->cfg.node_id ||
			    (m != NULL && m->up_ms != 0 &&
			     now - m->up_ms >= BALANCE_PEER_UP_MS)) {
				break;
			}
		}
		if (i == r->n_replicas || r->replicas[i] == s->cfg.node_id) {
			continue;
		}
		if (group_status(s->groups, g, &st) != REPLICA_OK) {
			continue;
		}
		for (i = 0; i < r->n_replicas; i++) {
			uint64_t id = r->replicas[i];
			struct member *m = member(s, id);
			bool voter = false;
			for (unsigned v = 0; v < st.n_voters; v++) {
				voter = voter || st.voters[v] == id;
			}
			if (voter && (id == s->cfg.node_id ||
			              (m != NULL && m->up_ms != 0 &&
			               now - m->up_ms >= BALANCE_PEER_UP_MS))) {
				want = id;
				break;
			}
		}
		if (want == 0 || want == s->cfg.node_id) {
			continue;
		}
		r->transfer_ms = now;
		if (group_transfer(s->groups, g, want) == REPLICA_OK) {
			log_debug(s->log, "shards",
			          "group %" PRIu32
			          ": handing leadership to node %" PRIu64
			          " (placement)",
			          g, want);
		}
	}
}

uint64_t shards_leader_admin(struct shards *s, uint32_t group, char *admin,
                             size_t len)
{
	bool self;
	uint64_t l = shards_leader(s, group, &self);
	struct member *m = l != 0 ? member(s, l) : NULL;
	snprintf(admin, len, "%s", m != NULL ? m->admin : "");
	return l;
}

static void on_tick(uv_timer_t *h)
{
	struct shards *s = h->data;
	uint64_t now = now_ms(s);

	if (s->closing) {
		return;
	}
	if (refresh_local(s)) {
		s->generation++;
	}
	if (s->cluster) {
		if (s->announce_now || now - s->announce_ms >= ANNOUNCE_MS) {
			announce(s);
		}
		balance(s);
	}
	if (s->meta_ms == 0 || now - s->meta_ms >= META_MS ||
	    (!s->published && !s->publishing)) {
		s->meta_ms = now;
		membership_refresh(s);
	}
	if (s->cluster && now - s->reconcile_ms >= RECONCILE_MS) {
		s->reconcile_ms = now;
		membership_tick(s);
	}
	if (s->removed && s->cfg.on_removed != NULL) {
		void (*cb)(void *) = s->cfg.on_removed;
		s->cfg.on_removed = NULL;
		cb(s->cfg.on_removed_data);
	}
}

/* Read confirmations (raft/replica.c) between group replicas. A message
 * that cannot be queued is dropped: the leader asks again. */
static void send_confirm(void *data, uint64_t peer, uint32_t group, bool answer,
                         uint64_t term, uint64_t round, bool ok)
{
	struct shards *s = data;
	struct msg_read_check c = {.answer = answer,
	                           .ok = ok,
	                           .group = group,
	                           .term = term,
	                           .round = round};
	int st;
	uint8_t *p;
	if (s->t == NULL) {
		return;
	}
	p = transport_reserve(s->t, peer, MSG_READ_CHECK, msg_read_check_size(),
	                      &st);
	if (p != NULL) {
		msg_read_check_write(p, &c);
	}
}

/* Quiescence (raft/quiesce.h): the transport's connections are the
 * node-level liveness that stands in for quiet groups' heartbeats. */
static int send_quiesce(void *data, uint64_t peer, uint32_t group,
                        uint64_t term, uint64_t index, bool wake)
{
	struct shards *s = data;
	struct msg_quiesce q = {
	    .wake = wake, .group = group, .term = term, .index = index};
	int st;
	uint8_t *p;
	if (s->t == NULL) {
		return -1;
	}
	p = transport_reserve(s->t, peer, MSG_QUIESCE, msg_quiesce_size(), &st);
	if (p == NULL) {
		return -1;
	}
	msg_quiesce_write(p, &q);
	return 0;
}

static bool peer_live(void *data, uint64_t peer)
{
	struct shards *s = data;
	return s->t != NULL && transport_connected(s->t, peer);
}

/* ---- the transport's callbacks ---- */

static void on_frame(void *data, uint64_t peer, uint8_t kind, const uint8_t *p,
                     size_t len)
{
	struct shards *s = data;
	switch (kind) {
	case MSG_FWD_REQ:
	case MSG_FWD_RESP:
		forward_on_frame(s->f, peer, kind, p, len);
		break;
	case MSG_ROUTES:
		on_routes(s, peer, p, len);
		break;
	case MSG_QUIESCE: {
		struct msg_quiesce q;
		if (msg_quiesce_decode(p, len, &q) == 0 && s->groups != NULL) {
			group_on_quiesce(s->groups, peer, q.group, q.term,
			                 q.index, q.wake);
		}
		break;
	}
	case MSG_READ_CHECK: {
		struct msg_read_check c;
		if (msg_read_check_decode(p, len, &c) == 0 &&
		    s->groups != NULL) {
			group_on_confirm(s->groups, peer, c.group, c.answer,
			                 c.term, c.round, c.ok);
		}
		break;
	}
	default:
		xfer_on_frame(s->x, peer, kind, p, len);
		break;
	}
}

static void on_peer(void *data, uint64_t peer, bool up, uint64_t gen)
{
	struct shards *s = data;
	if (s->f != NULL) {
		forward_on_peer(s->f, peer, up, gen);
	}
	if (s->x != NULL) {
		xfer_on_peer(s->x, peer, up, gen);
	}
	struct member *m = member(s, peer);
	if (m != NULL) {
		m->up_ms = up ? now_ms(s) : 0;
	}
	if (s->groups != NULL) {
		/* Before forget_peer: a quiet follower must tick to elect. */
		group_on_peer(s->groups, peer, up);
	}
	if (up) {
		s->announce_now = true;
	} else {
		forget_peer(s, peer);
	}
}

static void on_transport_log(void *data, int level, const char *msg)
{
	struct shards *s = data;
	static const enum log_level map[] = {LOG_DEBUG, LOG_INFO, LOG_WARN,
	                                     LOG_ERROR};
	log_emit(s->log, map[level < 0 || level > 3 ? 1 : level], "cluster",
	         "%s", msg);
}

/* ---- admin view ---- */

int shards_status(struct shards *s, uint32_t group, struct group_status *st)
{
	return map_status(group_status(s->groups, group, st));
}

static const char *role_name(int role)
{
	switch (role) {
	case GROUP_ROLE_LEADER:
		return "leader";
	case GROUP_ROLE_FOLLOWER:
		return "follower";
	case GROUP_ROLE_CANDIDATE:
		return "candidate";
	default:
		return "unavailable";
	}
}

static json_t *peers_json(struct shards *s)
{
	json_t *arr = json_array();
	struct transport_peer_info info[MAX_NODES];
	size_t n = s->t != NULL ? transport_peers(s->t, info, MAX_NODES) : 0;

	for (size_t i = 0; i < s->n_members; i++) {
		struct member *m = &s->members[i];
		bool self = m->id == s->cfg.node_id;
		json_t *o;
		const struct transport_peer_info *pi = NULL;
		for (size_t k = 0; k < n && k < MAX_NODES; k++) {
			if (info[k].id == m->id) {
				pi = &info[k];
			}
		}
		o = json_pack("{s:I, s:s, s:b, s:b}", "id", (json_int_t)m->id,
		              "address", m->internal, "self", self, "connected",
		              self || (pi != NULL && pi->connected));
		if (o == NULL) {
			continue;
		}
		if (m->has_record) {
			json_object_set_new(o, "felix", json_string(m->felix));
			json_object_set_new(o, "fsnp", json_string(m->fsnp));
			json_object_set_new(o, "admin", json_string(m->admin));
		}
		if (pi != NULL) {
			json_object_set_new(
			    o, "queued_bytes",
			    json_integer((json_int_t)pi->queued));
			json_object_set_new(
			    o, "dropped_frames",
			    json_integer((json_int_t)pi->dropped));
			json_object_set_new(
			    o, "connects",
			    json_integer((json_int_t)pi->connects));
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *group_json(struct shards *s, uint32_t g)
{
	struct route *r = &s->routes[g];
	struct group_status st;
	json_t *voters = json_array(), *o;
	bool self;
	uint64_t leader = shards_leader(s, g, &self);

	for (unsigned v = 0; v < r->n_replicas; v++) {
		json_array_append_new(voters,
		                      json_integer((json_int_t)r->replicas[v]));
	}
	o = json_pack("{s:I, s:o, s:I, s:o, s:b}", "id", (json_int_t)g,
	              "leader",
	              leader ? json_integer((json_int_t)leader) : json_null(),
	              "generation", (json_int_t)group_generation(r), "voters",
	              voters, "replica", r->local);
	if (o != NULL) {
		json_t *sb = json_array();
		for (unsigned v = 0; v < r->n_standbys; v++) {
			json_array_append_new(
			    sb, json_integer((json_int_t)r->standbys[v]));
		}
		json_object_set_new(o, "standbys", sb);
	}
	if (o == NULL || !r->local ||
	    group_status(s->groups, g, &st) != REPLICA_OK) {
		if (o != NULL) {
			json_object_set_new(o, "role", json_string("none"));
		}
		return o;
	}
	json_object_set_new(o, "role", json_string(role_name(st.role)));
	json_object_set_new(o, "quiet", json_boolean(st.quiet));
	{
		/* The replica's configuration as it stands (the latest
		 * appended), roles included. */
		struct group_server sv[GROUP_MAX_VOTERS];
		unsigned n = 0;
		bool changing;
		json_t *conf = json_array();
		if (group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n,
		                 &changing) == REPLICA_OK) {
			for (unsigned i = 0; i < n; i++) {
				json_array_append_new(
				    conf,
				    json_pack("{s:I, s:s}", "id",
				              (json_int_t)sv[i].id, "role",
				              sv[i].role == GROUP_VOTER
				                  ? "voter"
				              : sv[i].role == GROUP_STANDBY
				                  ? "standby"
				                  : "spare"));
			}
		}
		json_object_set_new(o, "config", conf);
	}
	json_object_set_new(o, "term", json_integer((json_int_t)st.term));
	json_object_set_new(o, "ready", json_boolean(st.ready));
	json_object_set_new(o, "commit_index",
	                    json_integer((json_int_t)st.commit_index));
	json_object_set_new(o, "applied_index",
	                    json_integer((json_int_t)st.applied_index));
	json_object_set_new(o, "last_index",
	                    json_integer((json_int_t)st.last_index));
	json_object_set_new(o, "snapshot_index",
	                    json_integer((json_int_t)st.snapshot_index));
	json_object_set_new(o, "last_contact_ms",
	                    json_integer((json_int_t)st.last_contact_ms));
	json_object_set_new(o, "proposals",
	                    json_integer((json_int_t)st.stats.proposals));
	json_object_set_new(o, "entries_applied",
	                    json_integer((json_int_t)st.stats.entries_applied));
	json_object_set_new(o, "imports",
	                    json_integer((json_int_t)st.stats.imports));
	/* How linearizable reads were served: read batches answered by a
	 * barrier entry, by confirmation from the voters, or locally (sole
	 * voter). */
	json_object_set_new(
	    o, "reads",
	    json_pack("{s:I, s:I, s:I, s:I}", "requests",
	              (json_int_t)st.stats.reads, "barriers",
	              (json_int_t)st.stats.read_barriers, "confirmed",
	              (json_int_t)st.stats.read_confirms, "local",
	              (json_int_t)st.stats.reads_local));
	if (st.failed) {
		json_object_set_new(o, "failed", json_string(st.message));
	}
	return o;
}

/* The Raft log's own WAL (raft/wal.c): segments on disk, moves to a new
 * segment, flushes that let older ones go (and failures), what the last
 * start replayed and cut, and rotations into zeroed spares. */
static json_t *wal_json(const struct rio_stats *rs)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "segments",
	                 (json_int_t)rs->wal_segments, "rotations",
	                 (json_int_t)rs->wal_rotations, "releases",
	                 (json_int_t)rs->wal_releases, "release_errors",
	                 (json_int_t)rs->wal_release_errors, "replayed_records",
	                 (json_int_t)rs->wal_replayed, "torn_bytes_cut",
	                 (json_int_t)rs->wal_torn_bytes, "spares_used",
	                 (json_int_t)rs->wal_spares_used, "spare_errors",
	                 (json_int_t)rs->wal_spare_errors);
}

static int status_json(struct shards *s, bool summary, char **out, size_t *len)
{
	json_t *groups = json_array();
	struct rio_stats rs;
	struct forward_stats fs;
	struct xfer_stats xs = {0};
	json_t *root;
	uint64_t commit_total = 0;

	for (uint32_t g = 0; g <= s->cfg.data_groups && !summary; g++) {
		json_t *o = group_json(s, g);
		if (o != NULL) {
			json_array_append_new(groups, o);
		}
	}
	if (summary) {
		/* Without the per-group objects: a sampler's view that costs
		 * little with thousands of groups. */
		for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
			if (s->routes[g].local) {
				commit_total +=
				    group_commit_index(s->groups, g);
			}
		}
	}
	rio_store_stats(s->rio, &rs);
	forward_stats(s->f, &fs);
	fs.local += s->direct; /* served here too, without the forward call */
	if (s->x != NULL) {
		xfer_stats(s->x, &xs);
	}
	root = json_pack(
	    "{s:o, s:I, s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}, "
	    "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
	    "s:{s:I, s:I, s:I, s:I, s:I, s:I}}",
	    "peers", peers_json(s), "generation", (json_int_t)s->generation,
	    "replicas", (json_int_t)membership_replicas(s), "groups", groups,
	    "raft_io", "syncs", (json_int_t)rs.syncs, "entries",
	    (json_int_t)rs.entries, "bytes", (json_int_t)rs.bytes,
	    "max_groups_per_sync", (json_int_t)rs.max_groups, "write_us",
	    (json_int_t)(rs.write_ns / 1000), "sync_us",
	    (json_int_t)(rs.sync_ns / 1000), "write_errors",
	    (json_int_t)rs.write_errors, "wal", wal_json(&rs), "forward",
	    "local", (json_int_t)fs.local, "sent", (json_int_t)fs.sent,
	    "served", (json_int_t)fs.served, "refused", (json_int_t)fs.refused,
	    "retries", (json_int_t)fs.retries, "timeouts",
	    (json_int_t)fs.timeouts, "unknown", (json_int_t)fs.unknown,
	    "in_flight", (json_int_t)fs.in_flight, "transfer", "fetches",
	    (json_int_t)xs.fetches, "attempts", (json_int_t)xs.attempts,
	    "bytes_in", (json_int_t)xs.bytes_in, "exports",
	    (json_int_t)xs.exports, "bytes_out", (json_int_t)xs.bytes_out,
	    "running", (json_int_t)xs.running);
	if (root == NULL) {
		return -1;
	}
	if (summary) {
		json_object_set_new(root, "commit_total",
		                    json_integer((json_int_t)commit_total));
		json_object_set_new(
		    root, "quiescent_groups",
		    json_integer((json_int_t)group_mgr_quiet(s->groups)));
	}
	membership_status_json(s, root);
	{
		struct rowcache_stats rc;
		store_row_cache_stats(s->store, &rc);
		json_object_set_new(
		    root, "row_cache",
		    json_pack(
		        "{s:I, s:I, s:I, s:I, s:I, s:I}", "hits",
		        (json_int_t)rc.hits, "misses", (json_int_t)rc.misses,
		        "evictions", (json_int_t)rc.evictions, "rows",
		        (json_int_t)rc.rows, "bytes", (json_int_t)rc.bytes,
		        "max_bytes", (json_int_t)rc.max_bytes));
	}
	{
		struct dwrite_stats ws;
		store_writer_stats(s->store, &ws);
		json_object_set_new(
		    root, "data_writer",
		    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "batches",
		              (json_int_t)ws.batches, "drains",
		              (json_int_t)ws.drains, "full_waits",
		              (json_int_t)ws.waits, "kv_checkpoints",
		              (json_int_t)ws.checkpoints, "kv_checkpoint_rows",
		              (json_int_t)ws.checkpoint_rows, "flushes",
		              (json_int_t)ws.flushes));
	}
	*out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (*out == NULL) {
		return -1;
	}
	*len = strlen(*out);
	return 0;
}

int shards_status_json(struct shards *s, char **out, size_t *len)
{
	return status_json(s, false, out, len);
}

int shards_summary_json(struct shards *s, char **out, size_t *len)
{
	return status_json(s, true, out, len);
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

int shards_group_hash(struct shards *s, uint32_t group,
                      struct shards_group_hash *out)
{
	uint8_t lo[4], hi[5];
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	char *err = NULL;
	uint64_t h = 14695981039346656037ull;

	memset(out, 0, sizeof out[0]);
	if (!valid_group(s, group)) {
		return SHARDS_ENOGROUP;
	}
	/* Read below from RocksDB itself: the data writer's queue and the
	 * KV rows waiting for a checkpoint go in first. */
	if (s->store != NULL && store_drain(s->store) != 0) {
		return SHARDS_EIO;
	}
	for (int i = 0; i < 4; i++) {
		lo[i] = (uint8_t)(group >> (24 - 8 * i));
		hi[i] = (uint8_t)((group + 1ull) >> (24 - 8 * i));
	}
	hi[4] = 0;
	ro = rocksdb_readoptions_create();
	/* group + 1 overflows for the last id: bound by a 5-byte key. */
	if (group == UINT32_MAX) {
		memset(hi, 0xFF, sizeof hi);
	}
	rocksdb_readoptions_set_iterate_upper_bound(
	    ro, (const char *)hi, group == UINT32_MAX ? 5 : 4);
	it = rocksdb_create_iterator_cf(s->db->db, ro, s->db->data);
	for (rocksdb_iter_seek(it, (const char *)lo, 4); rocksdb_iter_valid(it);
	     rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
		uint8_t n[4];
		if (kl == 5 && k[4] == 0x01) {
			/* The group state record: applied index, not data. */
			if (vl >= 8) {
				out->applied_index = get_be64(v);
			}
			continue;
		}
		n[0] = (uint8_t)(kl >> 24);
		n[1] = (uint8_t)(kl >> 16);
		n[2] = (uint8_t)(kl >> 8);
		n[3] = (uint8_t)kl;
		for (int i = 0; i < 4; i++) {
			h = (h ^ n[i]) * 1099511628211ull;
		}
		for (size_t i = 0; i < kl; i++) {
			h = (h ^ k[i]) * 1099511628211ull;
		}
		n[0] = (uint8_t)(vl >> 24);
		n[1] = (uint8_t)(vl >> 16);
		n[2] = (uint8_t)(vl >> 8);
		n[3] = (uint8_t)vl;
		for (int i = 0; i < 4; i++) {
			h = (h ^ n[i]) * 1099511628211ull;
		}
		for (size_t i = 0; i < vl; i++) {
			h = (h ^ v[i]) * 1099511628211ull;
		}
		out->keys++;
	}
	rocksdb_iter_get_error(it, &err);
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	if (err != NULL) {
		log_error(s->log, "shards", "hash of group %" PRIu32 ": %s",
		          group, err);
		free(err);
		return SHARDS_EIO;
	}
	out->hash = h;
	return SHARDS_OK;
}

/* ---- maintenance ---- */

/* Reclaims expired entries: the leader proposes what store_expire_scan
 * found; apply re-checks every entry against the entry's time. */
static void on_expired(void *data, int status, const uint8_t *result,
                       size_t len)
{
	(void)data;
	(void)status;
	(void)result;
	(void)len;
}

/* Whether group g has nothing due for expiry before now + EXPIRE_LOOKAHEAD_MS
 * (the expiry index is sorted by deadline, so one probe tells): then its
 * sweep rests until that time or the group's next applied entry. */
static bool expire_rests(struct shards *s, uint32_t g, uint64_t now)
{
	struct route *r = &s->routes[g];
	uint64_t applied = r->applied;
	uint8_t *cmd = NULL;
	size_t len = 0;

	/* (The second bound guards against the wall clock going back.) */
	if (applied == r->expire_applied && now < r->expire_quiet_ms &&
	    r->expire_quiet_ms - now <= EXPIRE_LOOKAHEAD_MS) {
		return true;
	}
	if (store_expire_scan(s->store, g, now + EXPIRE_LOOKAHEAD_MS, 1, &cmd,
	                      &len) != 0) {
		return false;
	}
	free(cmd);
	if (len > 0) {
		r->expire_quiet_ms = 0;
		return false;
	}
	r->expire_applied = applied;
	r->expire_quiet_ms = now + EXPIRE_LOOKAHEAD_MS;
	return true;
}

/* As expire_rests, for flows past max_active_ms (flow/flow_sweep.h). */
static bool sweep_rests(struct shards *s, uint32_t g, uint64_t now)
{
	struct route *r = &s->routes[g];
	uint64_t applied = r->applied;
	uint8_t *cmd = NULL;
	size_t len = 0;

	if (applied == r->sweep_applied && now < r->sweep_quiet_ms &&
	    r->sweep_quiet_ms - now <= EXPIRE_LOOKAHEAD_MS) {
		return true;
	}
	if (flow_sweep_cmd(s->store, g, now + EXPIRE_LOOKAHEAD_MS, 1, &cmd,
	                   &len) != 0) {
		return false;
	}
	free(cmd);
	if (len > 0) {
		r->sweep_quiet_ms = 0;
		return false;
	}
	r->sweep_applied = applied;
	r->sweep_quiet_ms = now + EXPIRE_LOOKAHEAD_MS;
	return true;
}

static void on_maint(uv_timer_t *t)
{
	struct shards *s = t->data;
	uint64_t now = shards_now_ms(s);
	for (uint32_t g = 1; g <= s->cfg.data_groups; g++) {
		bool self;
		uint8_t *cmd = NULL;
		size_t len = 0;
		shards_leader(s, g, &self);
		if (!self) {
			continue;
		}
		if (!expire_rests(s, g, now)) {
			if (store_expire_scan(s->store, g, now, EXPIRE_BATCH,
			                      &cmd, &len) != 0) {
				log_warn(s->log, "shards",
				         "expiry scan of group %" PRIu32 ": %s",
				         g, store_last_error(s->store));
			} else if (len > 0) {
				shards_propose(s, g, cmd, len, on_expired, s);
			}
			free(cmd);
			cmd = NULL;
			len = 0;
		}
		if (sweep_rests(s, g, now)) {
			continue;
		}
		/* Flows past max_active_ms, failed by a replicated command
		 * that re-checks each one (flow/flow_sweep.h). */
		if (flow_sweep_cmd(s->store, g, now, FLOW_SWEEP_MAX, &cmd,
		                   &len) != 0) {
			log_warn(s->log, "shards",
			         "flow max_active_ms scan of group %" PRIu32
			         " failed",
			         g);
			continue;
		}
		if (len > 0) {
			shards_propose_owned(s, g, cmd, len, on_expired, s);
		}
	}
}

/* ---- opening ---- */

static int by_id(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int setup_members(struct shards *s, char *err, size_t errlen)
{
	const struct shards_config *c = &s->cfg;

	if (c->n_peers > MAX_NODES) {
		snprintf(err, errlen, "at most %d nodes", MAX_NODES);
		return -1;
	}
	s->cluster = c->n_peers > 0 || c->join != NULL;
	if (c->n_peers == 0) {
		struct member *m = &s->members[0];
		m->id = c->node_id;
		snprintf(m->internal, sizeof m->internal, "%s", s->address);
		if (membership_split_hostport(s->address, m->host,
		                              sizeof m->host, &m->port) != 0) {
			snprintf(m->host, sizeof m->host, "%s", s->address);
		}
		m->state = STORE_NODE_ACTIVE;
		m->slot = c->node_id;
		s->n_members = 1;
	} else {
		bool self = false;
		for (unsigned i = 0; i < c->n_peers; i++) {
			struct member *m = &s->members[s->n_members++];
			m->id = c->peers[i].id;
			snprintf(m->host, sizeof m->host, "%s",
			         c->peers[i].host);
			m->port = c->peers[i].port;
			snprintf(m->internal, sizeof m->internal,
			         strchr(m->host, ':') != NULL ? "[%s]:%u"
			                                      : "%s:%u",
			         m->host, (unsigned)m->port);
			m->state = STORE_NODE_ACTIVE;
			m->slot = m->id;
			self = self || m->id == c->node_id;
		}
		if (!self) {
			snprintf(err, errlen,
			         "'peers' must list this node (%" PRIu64
			         ") with its internal address",
			         c->node_id);
			return -1;
		}
		qsort(s->members, s->n_members, sizeof s->members[0], by_id);
	}
	for (size_t i = 0; i < s->n_members; i++) {
		s->ids[i] = s->members[i].id;
	}
	return 0;
}

static int setup_routes(struct shards *s, char *err, size_t errlen)
{
	s->routes = calloc(s->cfg.data_groups + 1, sizeof *s->routes);
	if (s->routes == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	membership_recompute(s);
	return 0;
}

static void handle_closed(uv_handle_t *h)
{
	struct shards *s = h->data;
	s->handles_open--;
}

/* The internal TLS contexts, when configured: TLS 1.3 only, the node's
 * certificate on both sides, peers verified against the cluster CA. */
static int open_tls_into(struct shards *s, struct tls_ctx **srv,
                         struct tls_ctx **cli, char *err, size_t errlen)
{
	const struct shards_config *c = &s->cfg;

	if (tls_ctx_new(srv, c->internal_tls_cert, c->internal_tls_key,
	                c->internal_tls_ca, err, errlen) != 0 ||
	    tls_ctx_new_client(cli, c->internal_tls_ca, c->internal_tls_cert,
	                       c->internal_tls_key, err, errlen) != 0) {
		return -1;
	}
	tls_ctx_require_tls13(*srv);
	tls_ctx_require_tls13(*cli);
	return 0;
}

static int open_tls(struct shards *s, char *err, size_t errlen)
{
	const struct shards_config *c = &s->cfg;

	if (c->internal_tls_cert == NULL || c->internal_tls_cert[0] == '\0') {
		return 0;
	}
	return open_tls_into(s, &s->tls_server, &s->tls_client, err, errlen);
}

/* SIGHUP: the internal certificate, key and CA files are read again;
 * connections made from now on (dialed or accepted) present and check
 * the new ones, established ones keep theirs. Files that do not load
 * leave everything as it was. */
static void on_sighup(uv_signal_t *h, int signum)
{
	struct shards *s = h->data;
	struct tls_ctx *srv = NULL, *cli = NULL;
	char err[600];
	(void)signum;

	if (open_tls_into(s, &srv, &cli, err, sizeof err) != 0) {
		tls_ctx_free(srv);
		log_warn(s->log, "shards",
		         "SIGHUP: internal TLS not reloaded, the previous "
		         "certificate stays: %s",
		         err);
		return;
	}
	tls_ctx_replace(s->tls_server, srv);
	tls_ctx_replace(s->tls_client, cli);
	log_info(s->log, "shards",
	         "SIGHUP: internal TLS reloaded from %s (new connections use "
	         "it)",
	         s->cfg.internal_tls_cert);
}

static void close_tls(struct shards *s)
{
	tls_ctx_free(s->tls_server);
	tls_ctx_free(s->tls_client);
	s->tls_server = s->tls_client = NULL;
}

static int start_transport(struct shards *s, char *err, size_t errlen)
{
	struct transport_options to = {0};
	int rv;

	if (open_tls(s, err, errlen) != 0) {
		char why[600];
		snprintf(why, sizeof why, "internal TLS: %s", err);
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	to.tls_server = s->tls_server;
	to.tls_client = s->tls_client;

	to.node_id = s->cfg.node_id;
	to.cluster_id = s->cluster_id;
	to.log = on_transport_log;
	to.on_frame = on_frame;
	to.on_peer = on_peer;
	to.on_join = membership_on_join;
	to.on_unknown = membership_on_unknown;
	to.data = s;
	rv = transport_init(&s->t, s->loop, &to);
	if (rv != 0) {
		snprintf(err, errlen, "node transport: %s",
		         transport_strerror(rv));
		return -1;
	}
	for (size_t i = 0; i < s->n_members; i++) {
		struct member *m = &s->members[i];
		if (m->id == s->cfg.node_id) {
			continue;
		}
		rv = transport_add_peer(s->t, m->id, m->host, m->port);
		if (rv != 0) {
			snprintf(err, errlen, "peer %" PRIu64 " (%s): %s",
			         m->id, m->internal, transport_strerror(rv));
			return -1;
		}
	}
	if (transport_start(s->t, s->cfg.listen_host, s->cfg.listen_port, err,
	                    errlen) != 0) {
		return -1;
	}
	return 0;
}

/* Runs the loop until a close callback sets `*done` (start-up failures
 * only: nothing else is waiting on the loop yet). */
static void spin_until(uv_loop_t *loop, const bool *done)
{
	while (!*done) {
		uv_run(loop, UV_RUN_NOWAIT);
	}
}

static void sync_closed(struct transport *t, void *data)
{
	(void)t;
	*(bool *)data = true;
}

static void sync_xfer_closed(struct xfer *x, void *data)
{
	(void)x;
	*(bool *)data = true;
}

/* Only while opening: nothing else has run on the loop yet. */
static void close_xfer_now(struct shards *s)
{
	bool done = false;
	if (s->x == NULL) {
		return;
	}
	xfer_close(s->x, sync_xfer_closed, &done);
	spin_until(s->loop, &done);
	xfer_free(s->x);
	s->x = NULL;
}

/* Only while opening: nothing else has run on the loop yet. */
static void close_transport_now(struct shards *s)
{
	bool done = false;
	if (s->t == NULL) {
		return;
	}
	transport_close(s->t, sync_closed, &done);
	spin_until(s->loop, &done);
	transport_free(s->t);
	s->t = NULL;
}

static void groups_closed_now(struct group_mgr *m, void *data)
{
	*(bool *)data = true;
}

static void close_groups_now(struct shards *s)
{
	bool done = false;
	group_mgr_close(s->groups, groups_closed_now, &done);
	spin_until(s->loop, &done);
	group_mgr_free(s->groups);
	s->groups = NULL;
}

static void rio_closed_now(struct rio_store *r, void *data)
{
	*(bool *)data = true;
}

/* Stops the raft log writer thread and frees the store (start-up
 * failures: no group uses it). */
static void close_rio_now(struct shards *s)
{
	bool done = false;
	rio_store_close(s->rio, rio_closed_now, &done);
	spin_until(s->loop, &done);
	rio_store_free(s->rio);
	s->rio = NULL;
}

/* The store's ACL rules function: ACL_APPLY (ACL SETUSER) applies its
 * tokens to the stored user inside the replicated apply. */
static int acl_rules(void *data, struct store_slice name,
                     const struct store_slice *rules,
                     const struct store_list *tokens, char *out, size_t cap,
                     char *err, size_t errlen)
{
	struct store_list_iter it;
	struct store_slice t;
	struct acl_token *tok;
	size_t n = 0;
	int rv;

	(void)data;
	if (tokens->n > ACL_SETUSER_TOKENS_MAX) {
		snprintf(err, errlen,
		         "ERR at most %d ACL rules in one ACL SETUSER",
		         ACL_SETUSER_TOKENS_MAX);
		return -1;
	}
	tok = malloc((tokens->n > 0 ? tokens->n : 1) * sizeof *tok);
	if (tok == NULL) {
		snprintf(err, errlen, "ERR out of memory");
		return -1;
	}
	store_list_iter_init(&it, tokens);
	while (n < tokens->n && store_list_next(&it, &t)) {
		tok[n].p = (const char *)t.p;
		tok[n].len = t.len;
		n++;
	}
	rv = acl_rules_merge((const char *)name.p, name.len,
	                     rules != NULL ? (const char *)rules->p : NULL,
	                     rules != NULL ? rules->len : 0, tok, n, out, cap,
	                     err, errlen);
	free(tok);
	return rv;
}

int shards_open(struct shards **out, uv_loop_t *loop, struct db *db,
                const struct shards_config *cfg, const struct log *log,
                char *err, size_t errlen)
{
	struct shards *s = calloc(1, sizeof *s);
	char msg[512] = "";
	bool *local_groups = NULL;
	int found = 0;
	int rv;

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->loop = loop;
	s->log = log;
	s->db = db;
	s->cfg = *cfg;
	snprintf(s->address, sizeof s->address, "%s", cfg->internal_addr);
	s->cfg.internal_addr = s->address;
	snprintf(s->cluster_id, sizeof s->cluster_id, "%s",
	         cfg->cluster_id != NULL ? cfg->cluster_id : "lodestone");
	s->cfg.cluster_id = s->cluster_id;
	snprintf(s->data_dir, sizeof s->data_dir, "%s",
	         cfg->data_dir != NULL ? cfg->data_dir : ".");
	s->cfg.data_dir = s->data_dir;
	snprintf(s->advertise, sizeof s->advertise, "%s",
	         cfg->advertise_host != NULL ? cfg->advertise_host
	                                     : "127.0.0.1");
	if (s->cfg.maintenance_ms == 0) {
		s->cfg.maintenance_ms = 1000;
	}
	if (s->cfg.data_groups == 0) {
		snprintf(err, errlen, "at least one data group is needed");
		goto err_free;
	}
	if (setup_members(s, err, errlen) != 0) {
		goto err_free;
	}
	s->cfg.peers = NULL; /* copied into members */
	if (s->cluster) {
		struct member *me = member(s, s->cfg.node_id);
		/* Every node must bootstrap the same configuration: our own
		 * address is the one the others know. */
		snprintf(s->address, sizeof s->address, "%s", me->internal);
	}
	if (s->cfg.join != NULL) {
		snprintf(s->join_text, sizeof s->join_text, "%s", cfg->join);
		s->cfg.join = s->join_text;
		s->joining = true;
		if (membership_resolve_join(s, err, errlen) != 0) {
			goto err_free;
		}
	}
	local_groups = calloc(s->cfg.data_groups + 1, sizeof *local_groups);
	if (local_groups == NULL) {
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	if (s->cluster) {
		found = membership_load(s, local_groups);
		if (found < 0) {
			snprintf(err, errlen,
			         "%s/cluster is not a lodestone cluster file",
			         s->data_dir);
			goto err_free;
		}
	}
	if (setup_routes(s, err, errlen) != 0) {
		goto err_free;
	}
	membership_make_record(s);
	if (s->cluster && start_transport(s, err, errlen) != 0) {
		goto err_transport;
	}

	struct rio_store_options ro = {0};
	char waldir[1100];
	snprintf(waldir, sizeof waldir, "%s/raftwal", s->data_dir);
	ro.wal_dir = waldir;
	if (rio_store_init(&s->rio, loop, db->db, db->raft_log, db->raft_state,
	                   &ro, msg) != 0) {
		snprintf(err, errlen, "raft storage: %s", msg);
		goto err_transport;
	}
	if (store_open(db->db, db->data, &s->store) != 0) {
		snprintf(err, errlen, "state machine: cannot open the store");
		goto err_rio;
	}
	if (flow_register(s->store) != 0) {
		snprintf(err, errlen,
		         "state machine: cannot register FerricFlow");
		store_close(s->store);
		goto err_rio;
	}
	store_set_acl_rules(s->store, acl_rules, NULL);
	store_set_row_cache(s->store, cfg->row_cache_bytes);
	store_fsm_init(&s->fsm, s->store);

	if (s->cluster) {
		struct xfer_options xo = {0};
		char dir[1100];
		snprintf(dir, sizeof dir, "%s/xfer", s->data_dir);
		xo.node_id = s->cfg.node_id;
		xo.dir = dir;
		xo.export_state = xfer_export;
		xo.applied_index = xfer_applied;
		xo.sources = xfer_sources;
		xo.log = on_transport_log;
		xo.data = s;
		if (xfer_init(&s->x, loop, s->t, &xo, err, errlen) != 0) {
			goto err_store;
		}
		transport_attach(s->t, s->rio);
	}

	struct group_options go = {0};
	go.node_id = cfg->node_id;
	go.address = s->address;
	go.defaults.election_timeout_ms = cfg->election_timeout_ms;
	go.defaults.heartbeat_timeout_ms = cfg->heartbeat_ms;
	go.defaults.snapshot_threshold = cfg->snapshot_threshold;
	go.defaults.snapshot_trailing = cfg->snapshot_trailing;
	go.defaults.max_entry_bytes = cfg->max_entry_bytes;
	go.clock = wall_ms;
	go.on_failed = on_group_failed;
	go.on_failed_data = s;
	if (s->cluster && !cfg->read_barriers) {
		go.confirm_send = send_confirm;
		go.confirm_data = s;
	}
	if (s->x != NULL) {
		go.fetch = xfer_fetch;
		go.fetch_data = s->x;
	}
	go.no_quiesce = cfg->no_quiesce;
	if (s->cluster) {
		go.quiesce_send = send_quiesce;
		go.peer_live = peer_live;
		go.quiesce_data = s;
	}
	rv = group_mgr_init(&s->groups, loop, s->rio, &go);
	if (rv != REPLICA_OK) {
		snprintf(err, errlen, "raft groups: cannot start (%d)", rv);
		goto err_xfer;
	}
	/* The replicas this node holds: as saved at its last change, else
	 * (first start of a bootstrapped cluster) its place in the initial
	 * placement, every group bootstrapped with the same configuration on
	 * every node. A joining node starts with none: leaders add it. */
	unsigned started = 0;
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (found > 0 ? !local_groups[g]
		              : s->cfg.join != NULL ||
		                    !membership_has(r->replicas, r->n_replicas,
		                                    s->cfg.node_id)) {
			continue;
		}
		if (membership_start_group(s, g, found > 0 ? NULL : r->replicas,
		                           found > 0 ? 0 : r->n_replicas, err,
		                           errlen) != 0) {
			goto err_groups;
		}
		if (++started % START_FLUSH_EVERY == 0) {
			char why[RAFT_ERRMSG_BUF_SIZE];
			if (rio_store_flush_log(s->rio, why) != 0) {
				snprintf(err, errlen, "starting the groups: %s",
				         why);
				goto err_groups;
			}
		}
	}
	free(local_groups);
	local_groups = NULL;
	s->save_gen++;
	struct forward_options fo = {0};
	fo.node_id = cfg->node_id;
	fo.timeout_ms = cfg->forward_timeout_ms;
	fo.read = exec_read;
	fo.leader = route_leader;
	fo.replicas = route_replicas;
	fo.data = s;
	rv = forward_init(&s->f, loop, s->t, s->groups, &fo);
	if (rv != REPLICA_OK) {
		snprintf(err, errlen, "forwarding: cannot start");
		goto err_groups;
	}
	uv_timer_init(loop, &s->maint);
	s->maint.data = s;
	uv_timer_start(&s->maint, on_maint, s->cfg.maintenance_ms,
	               s->cfg.maintenance_ms);
	uv_timer_init(loop, &s->tick);
	s->tick.data = s;
	uv_timer_start(&s->tick, on_tick, 0, TICK_MS);
	s->handles_open = 2;
	if (s->tls_server != NULL) {
		uv_signal_init(loop, &s->sighup);
		s->sighup.data = s;
		uv_signal_start(&s->sighup, on_sighup, SIGHUP);
		uv_unref((uv_handle_t *)&s->sighup);
		s->sighup_on = true;
		s->handles_open++;
	}
	if (s->cluster) {
		log_info(log, "shards",
		         "node %" PRIu64 " of %zu in cluster '%s': %u replicas "
		         "per shard; internal listener %s:%u",
		         cfg->node_id, s->n_members, s->cluster_id,
		         membership_replicas(s), cfg->listen_host,
		         (unsigned)transport_port(s->t));
	}
	*out = s;
	return 0;

err_groups:
	/* Created groups hold raft I/O on the log store: close them (no
	 * loop turn ran, so this finishes at once) before the store. */
	close_groups_now(s);
err_xfer:
	close_xfer_now(s);
err_store:
	store_close(s->store);
err_rio:
	close_rio_now(s);
err_transport:
	close_transport_now(s);
err_free:
	close_tls(s);
	free(local_groups);
	free(s->routes);
	for (size_t i = 0; i < s->n_members; i++) {
		free(s->members[i].held);
	}
	free(s);
	return -1;
}

/* ---- closing ---- */

static void close_step(struct shards *s);

static void on_rio_closed(struct rio_store *r, void *data)
{
	struct shards *s = data;
	rio_store_free(r);
	s->rio = NULL;
	close_step(s);
}

static void on_transport_closed(struct transport *t, void *data)
{
	struct shards *s = data;
	transport_free(t);
	s->t = NULL;
	close_step(s);
}

static void on_xfer_closed(struct xfer *x, void *data)
{
	struct shards *s = data;
	xfer_free(x);
	s->x = NULL;
	close_step(s);
}

static void on_groups_closed(struct group_mgr *m, void *data)
{
	struct shards *s = data;
	group_mgr_free(m);
	s->groups = NULL;
	close_step(s);
}

static void on_forward_closed(struct forward *f, void *data)
{
	struct shards *s = data;
	(void)f;
	close_step(s);
}

static void finish_close(struct shards *s)
{
	shards_close_cb cb = s->close_cb;
	void *data = s->close_data;
	forward_free(s->f);
	store_close(s->store);
	close_tls(s);
	free(s->routes);
	for (size_t i = 0; i < s->n_members; i++) {
		free(s->members[i].held);
	}
	while (s->spare != NULL) {
		struct pending *p = s->spare;
		s->spare = p->next;
		free(p);
	}
	free(s);
	if (cb != NULL) {
		cb(data);
	}
}

static void handles_closed(uv_handle_t *h)
{
	struct shards *s = h->data;
	handle_closed(h);
	if (s->handles_open == 0) {
		finish_close(s);
	}
}

/* The closing order: forwarding (callers get their answers), the groups,
 * state transfer, the transport, the raft store, then the timers. */
static void close_step(struct shards *s)
{
	if (s->groups != NULL) {
		group_mgr_close(s->groups, on_groups_closed, s);
		return;
	}
	if (s->x != NULL) {
		xfer_close(s->x, on_xfer_closed, s);
		return;
	}
	if (s->t != NULL) {
		transport_close(s->t, on_transport_closed, s);
		return;
	}
	if (s->rio != NULL) {
		rio_store_close(s->rio, on_rio_closed, s);
		return;
	}
	uv_close((uv_handle_t *)&s->maint, handles_closed);
	uv_close((uv_handle_t *)&s->tick, handles_closed);
	if (s->sighup_on) {
		uv_close((uv_handle_t *)&s->sighup, handles_closed);
	}
}

/* A node stopping (SIGTERM) first hands the leaderships it holds to other
 * voters: their groups then have a leader at once instead of after an
 * election timeout. Its replicas stay: this is no membership change. */
static bool handoff_start(struct shards *s)
{
	bool any = false;

	if (!s->cluster) {
		return false;
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_status st;
		if (!r->local || r->deleting ||
		    group_status(s->groups, g, &st) != REPLICA_OK ||
		    st.role != GROUP_ROLE_LEADER || st.n_voters < 2) {
			continue;
		}
		if (group_transfer(s->groups, g, 0) == REPLICA_OK) {
			r->handoff = true;
			any = true;
		}
	}
	s->handoff_ms = now_ms(s);
	if (any) {
		log_info(s->log, "shards",
		         "handing leaderships over before stopping");
	}
	return any;
}

static void on_handoff(uv_timer_t *h)
{
	struct shards *s = h->data;
	bool leading = false;

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct group_status st;
		if (s->routes[g].handoff &&
		    group_status(s->groups, g, &st) == REPLICA_OK &&
		    st.role == GROUP_ROLE_LEADER) {
			leading = true;
		}
	}
	if (leading && now_ms(s) - s->handoff_ms < HANDOFF_MS) {
		return;
	}
	uv_timer_stop(&s->tick);
	forward_close(s->f, on_forward_closed, s);
}

void shards_close(struct shards *s, shards_close_cb cb, void *data)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	if (s->join != NULL) {
		join_cancel(s->join);
	}
	uv_timer_stop(&s->maint);
	uv_timer_stop(&s->tick);
	if (handoff_start(s)) {
		uv_timer_start(&s->tick, on_handoff, 20, 20);
		return;
	}
	forward_close(s->f, on_forward_closed, s);
}
