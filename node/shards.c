/* The node's replicated core; see shards.h and docs/cluster.md. */
#include "node/shards.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <unistd.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/forward.h"
#include "raft/group.h"
#include "raft/io.h"
#include "raft/join.h"
#include "raft/msg_codec.h"
#include "raft/placement.h"
#include "raft/rebalance.h"
#include "raft/transport.h"
#include "raft/xfer.h"
#include "store/dwrite.h"
#include "store/store.h"
#include "wire/felix_hash.h"
#include "wire/fsnp_slot.h"

#define EXPIRE_BATCH 1000
#define MAX_NODES 64
#define MAX_REPLICAS 8
#define TICK_MS 100
#define ANNOUNCE_MS 500
#define ANNOUNCE_TTL_MS 3000
#define META_MS 1000
#define BALANCE_STABLE_MS 2000  /* lead this long before handing over */
#define BALANCE_RETRY_MS 10000  /* between hand-over attempts per group */
#define BALANCE_PEER_UP_MS 3000 /* a peer this long up has caught up */
#define RECORD_MAX 4096
#define RECONCILE_MS 500   /* membership moves and replica clean-up */
#define JOIN_RETRY_MS 2000 /* between join requests until admitted */
#define ORPHAN_MS 5000     /* a replica removed this long is deleted */
#define EMPTY_MS 30000     /* a group started but never configured */
#define LOST_LEADER_MS 3000
#define HANDOFF_MS 1000 /* stopping: the longest wait for leaderships to go */
#define MAX_OPS 32
#define OP_RETRY_MS 120000 /* an operation's meta group writes retried */
#define STATE_ALL 0xF

/* What this node knows of a member. */
struct member {
	uint64_t id;
	char host[256];
	uint16_t port;
	char internal[SHARDS_ADDR_MAX];
	char felix[SHARDS_ADDR_MAX];
	char fsnp[SHARDS_ADDR_MAX];
	char admin[SHARDS_ADDR_MAX];
	char fsnp_tls[SHARDS_ADDR_MAX];
	bool has_record;
	uint64_t up_ms; /* connected since (0 = not connected) */
	int state;      /* STORE_NODE_*: active until a record says */
	uint64_t slot;  /* placement rank (its id, or the one it replaced) */
	uint8_t *held;  /* groups it votes in, as published (bitmap) */
	unsigned n_held;
};

/* The routing snapshot's entry of one group. */
struct route {
	bool local; /* this node replicates the group */
	uint64_t leader;
	uint64_t term;
	int role;            /* GROUP_ROLE_*, local groups */
	bool ready;          /* local leader whose first barrier applied */
	uint64_t ann_leader; /* announced by a peer */
	uint64_t ann_term;
	uint64_t ann_ms;
	uint64_t ann_stamp;
	unsigned n_replicas;
	uint64_t replicas[MAX_REPLICAS]; /* preference order */
	uint64_t leader_since_ms;
	uint64_t transfer_ms;
	uint64_t gen;        /* bumped on leader or placement changes */
	bool change_pending; /* a configuration change of ours in flight */
	bool start_wanted;   /* a leader sent entries: start a replica */
	bool deleting;       /* stopped; its state goes once it closed */
	uint64_t orphan_ms;  /* since this replica looks removed (0 = not) */
	bool handoff;        /* stopping: its leadership is being handed over */
};

/* A cluster operation started here (shards_op_start). */
struct op {
	uint64_t id;
	int kind;
	uint64_t node;
	uint64_t with;
	int state; /* 0 running, 1 done, 2 failed */
	int step;
	bool waiting;     /* a proposal of this step is in flight */
	bool drain_first; /* remove: the node was up, drain it first */
	unsigned total;
	unsigned done;
	uint64_t started_ms;
	uint64_t old_leader;
	char error[256];
	struct shards *s;
};

struct shards {
	uv_loop_t *loop;
	const struct log *log;
	struct db *db;
	struct shards_config cfg;
	char address[256];
	char cluster_id[MSG_CLUSTER_MAX + 1];
	char data_dir[1024];
	char advertise[256];
	struct rio_store *rio;
	struct group_mgr *groups;
	struct store *store;
	struct fsm fsm;   /* one fsm serves every group: entries name theirs */
	uv_timer_t maint; /* maint.data = this */
	uv_timer_t tick;  /* tick.data = this */

	bool cluster;
	bool joining; /* started with --join: not admitted yet */
	char join_text[300];
	bool join_sent;   /* a join request in flight */
	uint64_t join_ms; /* last join request */
	struct join *join;
	struct sockaddr_storage join_addr;
	bool members_known;     /* the meta group's records were read */
	unsigned replicas_meta; /* R from the meta group (0 = not read) */
	bool conf_busy;
	bool state_busy; /* our own state change in flight */
	bool removed;    /* told: this node was removed */
	uint64_t reconcile_ms;
	uint64_t handoff_ms; /* stopping: leaderships handed over since */
	uint64_t save_gen;   /* members/groups as saved in DATA/cluster */
	uint64_t saved_gen;
	struct op ops[MAX_OPS];
	uint64_t next_op;
	struct transport *t;
	struct forward *f;
	struct xfer *x;
	struct member members[MAX_NODES]; /* ascending ids */
	uint64_t ids[MAX_NODES];
	size_t n_members;
	struct route *routes; /* 0..S */
	uint64_t generation;
	uint64_t announce_ms;
	bool announce_now;
	uint64_t ann_stamp;

	char record[RECORD_MAX]; /* ours, as published */
	bool published;
	bool publishing;
	bool listing;
	uint64_t meta_ms;

	bool closing;
	unsigned handles_open;
	shards_close_cb close_cb;
	void *close_data;
	struct pending *spare; /* done calls kept for reuse */
	size_t n_spare;
	uint64_t direct;  /* commands encoded straight into a local entry */
	uint64_t wall;    /* shards_now_ms: the wall clock read ... */
	uint64_t wall_at; /* ... at this loop time */
};

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

static uint64_t now_ms(const struct shards *s)
{
	return uv_now(s->loop);
}

static void on_group_failed(void *data, uint32_t group, const char *msg)
{
	struct shards *s = data;
	log_error(s->log, "shards", "group %" PRIu32 " stopped: %s", group,
	          msg);
}

static struct member *member(struct shards *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_members; i++) {
		if (s->members[i].id == id) {
			return &s->members[i];
		}
	}
	return NULL;
}

/* ---- the protocol servers' calls ---- */

static bool valid_group(const struct shards *s, uint32_t group)
{
	return group <= s->cfg.data_groups;
}

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

int shards_propose(struct shards *s, uint32_t group, const void *cmd,
                   size_t len, shards_propose_cb cb, void *data)
{
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

int shards_propose_cmd(struct shards *s, uint32_t group,
                       const struct store_cmd *c, size_t len,
                       shards_propose_cb cb, void *data)
{
	struct pending *p;
	uint8_t *cmd;
	uint64_t lid;
	bool self;
	size_t n;
	const char *e;

	/* Where the forwarding path would propose it on this node (the
	 * route names no other leader), it is encoded into the entry. */
	if (!s->closing && valid_group(s, group) &&
	    ((lid = shards_leader(s, group, &self)) == 0 ||
	     lid == s->cfg.node_id) &&
	    (p = pending_new(s)) != NULL) {
		p->s = s;
		p->group = group;
		p->propose_cb = cb;
		p->data = data;
		if (group_propose_reserve(s->groups, group, len, on_reserved, p,
		                          &lid, &cmd) == REPLICA_OK) {
			store_cmd_encode_to(c, cmd, len);
			s->direct++;
			return SHARDS_OK;
		}
		pending_free(s, p);
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
	if (store_read(s->store, group, shards_now_ms(s), cmd, len, &res) !=
	    0) {
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
	m = out->leader_id != 0 ? member(s, out->leader_id) : NULL;
	if (m != NULL) {
		snprintf(out->felix, sizeof out->felix, "%s", m->felix);
		snprintf(out->fsnp, sizeof out->fsnp, "%s", m->fsnp);
		snprintf(out->admin, sizeof out->admin, "%s", m->admin);
	}
	return SHARDS_OK;
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
	return valid_group(s, group) ? s->routes[group].gen : 0;
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

/* Refreshes the local groups' entries; returns whether a leader changed. */
static bool refresh_local(struct shards *s)
{
	uint64_t now = now_ms(s);
	bool changed = false;

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_status st;
		uint64_t before = effective_leader(s, r);
		bool was_leader = r->role == GROUP_ROLE_LEADER && r->ready;

		if (!r->local) {
			continue;
		}
		if (group_status(s->groups, g, &st) != REPLICA_OK) {
			continue;
		}
		r->role = st.role;
		r->ready = st.ready;
		r->term = st.term;
		r->leader = st.leader_id;
		if (st.role == GROUP_ROLE_LEADER && st.ready && !was_leader) {
			r->leader_since_ms = now;
			s->announce_now = true;
		} else if (was_leader &&
		           !(st.role == GROUP_ROLE_LEADER && st.ready)) {
			s->announce_now = true;
		}
		if (effective_leader(s, r) != before) {
			changed = true;
			r->gen++;
		}
	}
	return changed;
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
		if (effective_leader(s, r) != before) {
			changed = true;
			r->gen++;
		}
	}
	/* The list is whole: what the peer no longer leads goes. */
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (r->ann_leader == peer && r->ann_stamp != stamp) {
			uint64_t before = effective_leader(s, r);
			r->ann_leader = 0;
			if (effective_leader(s, r) != before) {
				changed = true;
				r->gen++;
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
				r->gen++;
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

/* ---- membership: node records in the meta group ---- */

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(v >> (56 - 8 * i));
	}
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static const char *state_name(int state)
{
	switch (state) {
	case STORE_NODE_JOINING:
		return "joining";
	case STORE_NODE_ACTIVE:
		return "active";
	case STORE_NODE_DRAINING:
		return "draining";
	default:
		return "removed";
	}
}

/* "HOST:PORT" or "[V6]:PORT" into host and port. */
static int split_hostport(const char *a, char *host, size_t cap, uint16_t *port)
{
	const char *colon;
	size_t hl;
	unsigned long p;
	char *end;

	if (a[0] == '[') {
		const char *close = strchr(a, ']');
		if (close == NULL || close[1] != ':') {
			return -1;
		}
		hl = (size_t)(close - a - 1);
		colon = close + 1;
		a++;
	} else {
		colon = strrchr(a, ':');
		if (colon == NULL) {
			return -1;
		}
		hl = (size_t)(colon - a);
	}
	p = strtoul(colon + 1, &end, 10);
	if (hl == 0 || hl >= cap || *end != '\0' || p == 0 || p > 65535) {
		return -1;
	}
	memcpy(host, a, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static size_t held_bytes(const struct shards *s)
{
	return (s->cfg.data_groups + 1 + 7) / 8;
}

static bool held_has(const struct member *m, uint32_t g)
{
	return m->held != NULL && (m->held[g / 8] >> (g % 8)) & 1;
}

/* A member from its internal address; the existing one when known. The
 * transport dials it from now on. */
static struct member *member_add(struct shards *s, uint64_t id,
                                 const char *internal)
{
	struct member *m = member(s, id);
	char host[256];
	uint16_t port;
	size_t i;

	if (m != NULL) {
		return m;
	}
	if (id == 0 || s->n_members >= MAX_NODES ||
	    split_hostport(internal, host, sizeof host, &port) != 0) {
		return NULL;
	}
	for (i = s->n_members; i > 0 && s->members[i - 1].id > id; i--) {
		s->members[i] = s->members[i - 1];
	}
	m = &s->members[i];
	memset(m, 0, sizeof *m);
	m->id = id;
	snprintf(m->host, sizeof m->host, "%s", host);
	m->port = port;
	snprintf(m->internal, sizeof m->internal,
	         strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host,
	         (unsigned)port);
	m->state = STORE_NODE_ACTIVE;
	m->slot = id;
	s->n_members++;
	for (i = 0; i < s->n_members; i++) {
		s->ids[i] = s->members[i].id;
	}
	if (s->t != NULL && id != s->cfg.node_id) {
		transport_add_peer(s->t, id, host, port);
	}
	s->save_gen++;
	log_info(s->log, "shards", "node %" PRIu64 " (%s) is a member", id,
	         internal);
	return member(s, id);
}

static unsigned replicas_r(const struct shards *s)
{
	if (s->replicas_meta != 0) {
		return s->replicas_meta;
	}
	return s->cfg.replicas != 0 ? s->cfg.replicas : 3;
}

static bool holds_replicas(const struct member *m)
{
	return m->state == STORE_NODE_JOINING || m->state == STORE_NODE_ACTIVE;
}

/* The nodes placement ranks (joining and active, one per slot). */
static size_t holders(const struct shards *s, uint64_t *slots, uint64_t *ids)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_members; i++) {
		const struct member *m = &s->members[i];
		bool dup = false;
		if (!holds_replicas(m)) {
			continue;
		}
		for (size_t j = 0; j < n; j++) {
			dup = dup || slots[j] == m->slot;
		}
		if (!dup) {
			slots[n] = m->slot;
			ids[n] = m->id;
			n++;
		}
	}
	return n;
}

/* The target voters of group g in preference order. */
static size_t target_of(const struct shards *s, uint32_t g, uint64_t *out)
{
	uint64_t slots[MAX_NODES], ids[MAX_NODES], res[MAX_NODES];
	size_t n = holders(s, slots, ids);
	size_t k = placement_replicas(slots, n, g, replicas_r(s), res);

	for (size_t i = 0; i < k; i++) {
		for (size_t j = 0; j < n; j++) {
			if (slots[j] == res[i]) {
				out[i] = ids[j];
			}
		}
	}
	return k;
}

static bool has_id(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == id) {
			return true;
		}
	}
	return false;
}

/* Every group's target from the membership; a group whose target
 * changed gets a new generation. */
static void recompute_routes(struct shards *s)
{
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		uint64_t out[MAX_NODES];
		size_t k = target_of(s, g, out);
		if (k > MAX_REPLICAS) {
			k = MAX_REPLICAS;
		}
		if (k != r->n_replicas ||
		    memcmp(out, r->replicas, k * sizeof out[0]) != 0) {
			memcpy(r->replicas, out, k * sizeof out[0]);
			r->n_replicas = (unsigned)k;
			r->gen++;
			s->generation++;
		}
	}
}

/* Whether this node votes in its replica of group g. */
static bool local_voter(struct shards *s, uint32_t g)
{
	struct group_status st;
	struct route *r = &s->routes[g];
	if (!r->local || r->deleting ||
	    group_status(s->groups, g, &st) != REPLICA_OK) {
		return false;
	}
	for (unsigned i = 0; i < st.n_voters; i++) {
		if (st.voters[i] == s->cfg.node_id) {
			return true;
		}
	}
	return false;
}

/* " groups=0-3,5": the groups this node votes in, as ranges. */
static size_t format_held(struct shards *s, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, " groups=");
	uint32_t g = 0, last = s->cfg.data_groups;
	bool first = true;

	while (g <= last && n < cap) {
		uint32_t e;
		if (!local_voter(s, g)) {
			g++;
			continue;
		}
		e = g;
		while (e + 1 <= last && local_voter(s, e + 1)) {
			e++;
		}
		n += (size_t)snprintf(out + n, cap - n,
		                      e == g ? "%s%" PRIu32
		                             : "%s%" PRIu32 "-%" PRIu32,
		                      first ? "" : ",", g, e);
		first = false;
		g = e + 1;
	}
	return n < cap ? n : cap - 1;
}

static void parse_held(struct shards *s, struct member *m, const char *list)
{
	const char *p = list;

	if (m->held == NULL) {
		m->held = calloc(1, held_bytes(s));
		if (m->held == NULL) {
			return;
		}
	}
	memset(m->held, 0, held_bytes(s));
	m->n_held = 0;
	while (*p != '\0') {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;
		if (end == p) {
			break;
		}
		p = end;
		if (*p == '-') {
			b = strtoul(p + 1, &end, 10);
			p = end;
		}
		for (unsigned long g = a; g <= b && g <= s->cfg.data_groups;
		     g++) {
			if (!held_has(m, (uint32_t)g)) {
				m->held[g / 8] |= (uint8_t)(1u << (g % 8));
				m->n_held++;
			}
		}
		if (*p == ',') {
			p++;
		}
	}
}

/* "internal=H:P felix=H:P fsnp=H:P fsnp_tls=H:P admin=H:P groups=..."
 * (a listener absent: not served). */
static void make_record(struct shards *s)
{
	const char *h = s->advertise;
	bool v6 = strchr(h, ':') != NULL;
	size_t n = 0;
	const struct {
		const char *name;
		uint16_t port;
	} l[] = {{"felix", s->cfg.felix_port},
	         {"fsnp", s->cfg.fsnp_port},
	         {"fsnp_tls", s->cfg.fsnp_tls_port},
	         {"admin", s->cfg.admin_port}};

	n += (size_t)snprintf(s->record + n, sizeof s->record - n,
	                      "internal=%s", s->address);
	for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
		if (l[i].port != 0 && n < sizeof s->record) {
			n += (size_t)snprintf(
			    s->record + n, sizeof s->record - n,
			    v6 ? " %s=[%s]:%u" : " %s=%s:%u", l[i].name, h,
			    (unsigned)l[i].port);
		}
	}
	if (s->groups != NULL && n < sizeof s->record) {
		format_held(s, s->record + n, sizeof s->record - n);
	}
}

static void record_field(const char *rec, size_t len, const char *key,
                         char *out, size_t cap)
{
	size_t kl = strlen(key), i = 0;
	out[0] = '\0';
	while (i < len) {
		size_t j = i;
		while (j < len && rec[j] != ' ') {
			j++;
		}
		if (j - i > kl && memcmp(rec + i, key, kl) == 0 &&
		    rec[i + kl] == '=') {
			size_t vl = j - i - kl - 1;
			if (vl >= cap) {
				vl = cap - 1;
			}
			memcpy(out, rec + i + kl + 1, vl);
			out[vl] = '\0';
			return;
		}
		i = j + 1;
	}
}

/* One node record read from the meta group. Returns whether placement
 * changed (state or slot). */
static bool apply_record(struct shards *s, uint64_t id, const uint8_t *p,
                         size_t len, bool *mine)
{
	char felix[SHARDS_ADDR_MAX], fsnp[SHARDS_ADDR_MAX],
	    fsnp_tls[SHARDS_ADDR_MAX], admin[SHARDS_ADDR_MAX],
	    internal[SHARDS_ADDR_MAX];
	char held[RECORD_MAX];
	int state = STORE_NODE_ACTIVE;
	uint64_t slot = id;
	struct member *m;
	bool placement = false;
	const char *rec;

	if (len >= 10 && p[0] == STORE_NODE_RECORD_VERSION) {
		state = p[1];
		slot = get_be64(p + 2);
		p += 10;
		len -= 10;
	}
	rec = (const char *)p;
	record_field(rec, len, "internal", internal, sizeof internal);
	m = member(s, id);
	if (m == NULL && (state == STORE_NODE_REMOVED || internal[0] == '\0' ||
	                  (m = member_add(s, id, internal)) == NULL)) {
		return false;
	}
	if (m->id == s->cfg.node_id) {
		size_t mine_len = strlen(s->record);
		*mine = len == mine_len && memcmp(p, s->record, len) == 0;
	}
	record_field(rec, len, "felix", felix, sizeof felix);
	record_field(rec, len, "fsnp", fsnp, sizeof fsnp);
	record_field(rec, len, "fsnp_tls", fsnp_tls, sizeof fsnp_tls);
	record_field(rec, len, "admin", admin, sizeof admin);
	record_field(rec, len, "groups", held, sizeof held);
	parse_held(s, m, held);
	if (!m->has_record || strcmp(felix, m->felix) != 0 ||
	    strcmp(fsnp, m->fsnp) != 0 || strcmp(admin, m->admin) != 0 ||
	    strcmp(fsnp_tls, m->fsnp_tls) != 0) {
		memcpy(m->felix, felix, sizeof felix);
		memcpy(m->fsnp, fsnp, sizeof fsnp);
		memcpy(m->fsnp_tls, fsnp_tls, sizeof fsnp_tls);
		memcpy(m->admin, admin, sizeof admin);
		s->generation++;
	}
	m->has_record = true;
	if (m->state != state || m->slot != slot) {
		if (m->state != state) {
			log_info(s->log, "shards", "node %" PRIu64 " is %s",
			         m->id, state_name(state));
		}
		m->state = state;
		m->slot = slot;
		placement = true;
		s->save_gen++;
	}
	return placement;
}

static void apply_node_list(struct shards *s, const uint8_t *buf, size_t len)
{
	struct store_result r;
	struct store_value v;
	bool mine = false;
	uint32_t n;

	if (store_result_open(buf, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &v) || v.tag != STORE_T_ARRAY) {
		return;
	}
	n = v.n;
	for (uint32_t i = 0; i < n; i++) {
		struct store_value k, val, arr;
		if (!store_result_next(&r, &arr) || arr.tag != STORE_T_ARRAY ||
		    arr.n != 2 || !store_result_next(&r, &k) ||
		    k.tag != STORE_T_BYTES || k.len != 8 ||
		    !store_result_next(&r, &val) || val.tag != STORE_T_BYTES) {
			return;
		}
		apply_record(s, get_be64(k.p), val.p, val.len, &mine);
	}
	if (!mine) {
		s->published = false; /* lost or stale: publish again */
	}
	{
		struct member *me = member(s, s->cfg.node_id);
		if (s->joining && me != NULL && me->has_record) {
			s->joining = false;
			log_info(s->log, "shards",
			         "admitted to the cluster as node %" PRIu64,
			         me->id);
		}
		if (me != NULL && me->has_record &&
		    me->state == STORE_NODE_REMOVED && !s->removed) {
			s->removed = true;
			log_warn(s->log, "shards",
			         "node %" PRIu64 " was removed from the "
			         "cluster: stopping",
			         me->id);
		}
	}
	s->members_known = true;
	recompute_routes(s);
}

static void on_published(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	struct store_result r;

	s->publishing = false;
	if (s->closing) {
		return;
	}
	if (status == REPLICA_OK && store_result_open(result, len, &r) == 0 &&
	    r.status == STORE_OK) {
		s->published = true;
		s->meta_ms = 0; /* list again at once */
		log_debug(s->log, "shards", "node record published: %s",
		          s->record);
	}
}

static void on_listed(void *data, int status, const uint8_t *result, size_t len)
{
	struct shards *s = data;
	s->listing = false;
	if (!s->closing && status == REPLICA_OK) {
		apply_node_list(s, result, len);
	}
}

static void apply_conf(struct shards *s, const uint8_t *buf, size_t len)
{
	struct store_result r;
	struct store_value v;
	char num[16];

	if (store_result_open(buf, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &v) || v.tag != STORE_T_BYTES ||
	    v.len == 0 || v.len >= sizeof num) {
		return;
	}
	memcpy(num, v.p, v.len);
	num[v.len] = '\0';
	if ((unsigned)atoi(num) != s->replicas_meta && atoi(num) > 0) {
		s->replicas_meta = (unsigned)atoi(num);
		log_info(s->log, "shards", "%u replicas per shard",
		         s->replicas_meta);
		recompute_routes(s);
	}
}

static void on_conf_read(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	s->conf_busy = false;
	if (!s->closing && status == REPLICA_OK) {
		apply_conf(s, result, len);
	}
}

static void on_conf_init(void *data, int status, const uint8_t *result,
                         size_t len)
{
	struct shards *s = data;
	(void)status;
	(void)result;
	(void)len;
	s->conf_busy = false;
	s->meta_ms = 0;
}

/* Proposes (or reads, `read`) a meta group command; `cb` gets the
 * answer. */
static int meta_submit(struct shards *s, const struct store_cmd *c, bool read,
                       forward_cb cb, void *data)
{
	uint8_t *cmd = NULL;
	size_t len = 0;
	const char *err;
	int rv;

	if (store_cmd_encode(c, &cmd, &len, &err) != 0) {
		return -1;
	}
	rv = forward_submit(s->f, 0, read ? FORWARD_READ : FORWARD_PROPOSE, cmd,
	                    len, 0, cb, data);
	free(cmd);
	return rv == REPLICA_OK ? 0 : -1;
}

/* Reads the meta group: from our own replica (possibly a little stale,
 * which routing and placement tolerate), else on its leader. */
static void meta_read(struct shards *s, const struct store_cmd *c,
                      void (*apply)(struct shards *, const uint8_t *, size_t),
                      forward_cb cb, bool *busy)
{
	uint8_t *cmd = NULL;
	size_t len = 0;
	const char *err;

	if (*busy) {
		return;
	}
	if (s->routes[0].local && !s->routes[0].deleting) {
		struct fsm_result res = {0};
		if (store_cmd_encode(c, &cmd, &len, &err) == 0 &&
		    store_read(s->store, 0, shards_now_ms(s), cmd, len, &res) ==
		        0) {
			apply(s, res.data, res.len);
		}
		free(res.data);
		free(cmd);
		return;
	}
	if (meta_submit(s, c, true, cb, s) == 0) {
		*busy = true;
	}
}

static void meta_refresh(struct shards *s)
{
	struct store_cmd c;
	uint8_t key[8];

	make_record(s);
	/* A joining node publishes once admitted (its record exists). */
	if (!s->published && !s->publishing && !s->joining) {
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_NODE_SET;
		put_be64(key, s->cfg.node_id);
		c.key.p = key;
		c.key.len = 8;
		c.value.p = (const uint8_t *)s->record;
		c.value.len = strlen(s->record);
		if (meta_submit(s, &c, false, on_published, s) == 0) {
			s->publishing = true;
		}
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_LIST;
	meta_read(s, &c, apply_node_list, on_listed, &s->listing);
	memset(&c, 0, sizeof c);
	c.key.p = (const uint8_t *)"replicas";
	c.key.len = strlen("replicas");
	if (s->replicas_meta == 0 && s->cfg.join == NULL && !s->conf_busy &&
	    s->members_known) {
		/* Bootstrap: the first node to get there records R. */
		char num[16];
		snprintf(num, sizeof num, "%u", replicas_r(s));
		c.op = STORE_OP_CONF_INIT;
		c.value.p = (const uint8_t *)num;
		c.value.len = strlen(num);
		if (meta_submit(s, &c, false, on_conf_init, s) == 0) {
			s->conf_busy = true;
		}
		return;
	}
	c.op = STORE_OP_CONF_GET;
	meta_read(s, &c, apply_conf, on_conf_read, &s->conf_busy);
}

/* ---- membership: joining ---- */

static void on_join_answer(void *data, int status, const char *text)
{
	struct shards *s = data;
	const char *p = text;

	s->join = NULL;
	s->join_sent = false;
	if (status == JOIN_ECANCELED || s->closing) {
		return;
	}
	if (status != MSG_HS_OK) {
		log_warn(s->log, "shards", "join through %s: %s", s->cfg.join,
		         text);
		return;
	}
	/* "ID=HOST:PORT,...": the members to dial. */
	while (*p != '\0') {
		char item[SHARDS_ADDR_MAX + 32], *eq;
		size_t l = strcspn(p, ",");
		if (l < sizeof item) {
			memcpy(item, p, l);
			item[l] = '\0';
			eq = strchr(item, '=');
			if (eq != NULL) {
				*eq = '\0';
				member_add(s, strtoull(item, NULL, 10), eq + 1);
			}
		}
		p += l;
		if (*p == ',') {
			p++;
		}
	}
	s->meta_ms = 0;
}

static void join_step(struct shards *s)
{
	struct msg_join req = {0};
	uint64_t now = now_ms(s);

	if (!s->joining || s->join_sent ||
	    (s->join_ms != 0 && now - s->join_ms < JOIN_RETRY_MS)) {
		return;
	}
	make_record(s);
	req.version = MSG_VERSION;
	req.from = s->cfg.node_id;
	req.cluster = s->cluster_id;
	req.cluster_len = strlen(s->cluster_id);
	req.record = s->record;
	req.record_len = strlen(s->record);
	s->join_ms = now;
	if (join_start(&s->join, s->loop, (struct sockaddr *)&s->join_addr,
	               &req, 3000, on_join_answer, s) == 0) {
		s->join_sent = true;
	}
}

static void on_node_joined(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct shards *s = data;
	struct store_result r;
	if (s->closing) {
		return;
	}
	if (status != REPLICA_OK || store_result_open(result, len, &r) != 0 ||
	    r.status != STORE_OK) {
		log_warn(s->log, "shards", "recording a joining node failed");
	}
	s->meta_ms = 0;
}

/* A node asks to join through us (transport_join_fn). */
static int on_join_request(void *data, uint64_t id, const char *record,
                           size_t len, char *reply, size_t cap)
{
	struct shards *s = data;
	struct member *m = member(s, id);
	char internal[SHARDS_ADDR_MAX];
	struct store_cmd c;
	uint8_t key[8];
	size_t n = 0;

	if (s->closing) {
		snprintf(reply, cap, "node %" PRIu64 " is stopping",
		         s->cfg.node_id);
		return MSG_HS_STRANGER;
	}
	if (m != NULL && m->state == STORE_NODE_REMOVED) {
		snprintf(reply, cap,
		         "node %" PRIu64 " was removed from the cluster; join "
		         "with a new --node-id and an empty data directory",
		         id);
		return MSG_HS_STRANGER;
	}
	record_field(record, len, "internal", internal, sizeof internal);
	if (m != NULL && m->has_record && strcmp(m->internal, internal) != 0) {
		snprintf(reply, cap, "node id %" PRIu64 " is taken by %s", id,
		         m->internal);
		return MSG_HS_STRANGER;
	}
	if (m == NULL || !m->has_record) {
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_NODE_JOIN;
		put_be64(key, id);
		c.key.p = key;
		c.key.len = 8;
		c.value.p = (const uint8_t *)record;
		c.value.len = len;
		c.kind = STORE_NODE_JOINING;
		if (meta_submit(s, &c, false, on_node_joined, s) != 0) {
			snprintf(reply, cap, "the meta group is unavailable");
			return MSG_HS_STRANGER;
		}
		if (m == NULL) {
			m = member_add(s, id, internal);
			if (m == NULL) {
				snprintf(reply, cap,
				         "bad internal address '%s'", internal);
				return MSG_HS_STRANGER;
			}
			m->state = STORE_NODE_JOINING;
		}
		log_info(s->log, "shards", "node %" PRIu64 " (%s) joins", id,
		         internal);
	}
	reply[0] = '\0';
	for (size_t i = 0; i < s->n_members && n < cap; i++) {
		const struct member *x = &s->members[i];
		if (x->state == STORE_NODE_REMOVED) {
			continue;
		}
		n += (size_t)snprintf(reply + n, cap - n, "%s%" PRIu64 "=%s",
		                      n == 0 ? "" : ",", x->id, x->internal);
	}
	return MSG_HS_OK;
}

/* ---- membership: local replicas ---- */

static void on_unknown_group(void *data, uint64_t peer, uint32_t group,
                             int type)
{
	struct shards *s = data;
	(void)peer;
	/* A leader replicating to us: it added us to the group. Started at
	 * the next tick (not inside the transport's delivery). */
	if ((type == RAFT_IO_APPEND_ENTRIES ||
	     type == RAFT_IO_INSTALL_SNAPSHOT) &&
	    valid_group(s, group) && !s->routes[group].local &&
	    !s->routes[group].deleting && !s->removed && !s->closing) {
		s->routes[group].start_wanted = true;
	}
}

/* Creates and starts group g, bootstrapped with `boot` when given. */
static int start_group(struct shards *s, uint32_t g, const uint64_t *boot,
                       size_t n_boot, char *err, size_t errlen)
{
	struct group_member mem[MAX_REPLICAS];
	int rv;

	for (size_t i = 0; i < n_boot && i < MAX_REPLICAS; i++) {
		mem[i].id = boot[i];
		mem[i].address = member(s, boot[i])->internal;
	}
	rv = group_create(s->groups, g, &s->fsm, NULL);
	if (rv == REPLICA_OK && n_boot > 0) {
		rv = group_bootstrap(s->groups, g, mem, (unsigned)n_boot);
		if (rv == REPLICA_EEXIST) {
			rv = REPLICA_OK; /* restart: state exists */
		}
	}
	if (rv == REPLICA_OK) {
		rv = group_start(s->groups, g);
	}
	if (rv != REPLICA_OK) {
		/* The state machine says why it failed, if it did. */
		const char *why = store_last_error(s->store);
		snprintf(err, errlen, "raft group %" PRIu32 ": %s%s%s", g,
		         group_mgr_errmsg(s->groups), *why ? ": " : "", why);
		return -1;
	}
	s->routes[g].local = true;
	s->routes[g].orphan_ms = 0;
	s->save_gen++;
	return 0;
}

/* Whether replica g here has been removed from its group: it is not in
 * the group's configuration any more, or it is cut off (no leader heard,
 * or candidate) while another node announces that it leads the group. */
static bool looks_removed(struct shards *s, uint32_t g, bool *empty)
{
	struct route *r = &s->routes[g];
	struct group_server sv[GROUP_MAX_VOTERS];
	struct group_status st;
	unsigned n = 0;
	bool changing, in = false;

	*empty = false;
	if (group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n, &changing) !=
	        REPLICA_OK ||
	    group_status(s->groups, g, &st) != REPLICA_OK) {
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		in = in || sv[i].id == s->cfg.node_id;
	}
	if (n == 0) {
		*empty = true;
		return true;
	}
	if (!in) {
		return true;
	}
	return st.role != GROUP_ROLE_LEADER && r->ann_leader != 0 &&
	       r->ann_leader != s->cfg.node_id &&
	       now_ms(s) - r->ann_ms < ANNOUNCE_TTL_MS &&
	       (st.role == GROUP_ROLE_CANDIDATE ||
	        st.last_contact_ms > LOST_LEADER_MS);
}

/* Starts the groups a leader added us to; deletes the replicas removed
 * from their group (their log and state), once they have been out for a
 * while and placement no longer names this node. */
static void groups_step(struct shards *s)
{
	uint64_t now = now_ms(s);
	char err[512];

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_status st;
		bool empty;

		if (r->deleting) {
			char msg[RAFT_ERRMSG_BUF_SIZE];
			if (group_status(s->groups, g, &st) !=
			    REPLICA_ENOGROUP) {
				continue; /* still closing */
			}
			if (rio_store_erase(s->rio, g, msg) != 0 ||
			    store_drop(s->store, g) != 0) {
				log_error(s->log, "shards",
				          "group %" PRIu32
				          ": deleting the replica: %s",
				          g, msg);
			}
			r->deleting = false;
			r->local = false;
			r->role = GROUP_ROLE_UNAVAILABLE;
			r->leader = 0;
			r->ready = false;
			s->save_gen++;
			s->published = false;
			log_info(s->log, "shards",
			         "group %" PRIu32 ": replica deleted", g);
			continue;
		}
		if (r->start_wanted) {
			r->start_wanted = false;
			if (!r->local) {
				if (start_group(s, g, NULL, 0, err,
				                sizeof err) != 0) {
					log_error(s->log, "shards", "%s", err);
				} else {
					log_info(s->log, "shards",
					         "group %" PRIu32
					         ": replica started (added "
					         "by its leader)",
					         g);
				}
			}
			continue;
		}
		if (!r->local || !s->members_known ||
		    has_id(r->replicas, r->n_replicas, s->cfg.node_id) ||
		    !looks_removed(s, g, &empty)) {
			r->orphan_ms = 0;
			continue;
		}
		if (r->orphan_ms == 0) {
			r->orphan_ms = now;
		}
		if (now - r->orphan_ms < (empty ? EMPTY_MS : ORPHAN_MS)) {
			continue;
		}
		log_info(s->log, "shards",
		         "group %" PRIu32 ": this node's replica was removed; "
		         "deleting it",
		         g);
		if (group_stop(s->groups, g) == REPLICA_OK) {
			r->deleting = true;
		}
	}
}

/* ---- membership: moving replicas (on each group's leader) ---- */

static void on_changed(void *data, uint32_t g, int status)
{
	struct shards *s = data;
	struct route *r;
	if (!valid_group(s, g)) {
		return;
	}
	r = &s->routes[g];
	r->change_pending = false;
	r->gen++;
	s->generation++;
	if (status != 0 && !s->closing) {
		log_warn(s->log, "shards",
		         "group %" PRIu32 ": configuration change failed: %s",
		         g, replica_strerror(status));
	}
}

static bool alive(struct shards *s, uint64_t id)
{
	return id == s->cfg.node_id ||
	       (s->t != NULL && transport_connected(s->t, id));
}

/* Each group this node leads moves one step towards its target. */
static void reconcile(struct shards *s)
{
	unsigned limit = s->cfg.rebalance_concurrency != 0
	                     ? s->cfg.rebalance_concurrency
	                     : 2;
	unsigned moving = 0;
	uint64_t now = now_ms(s);
	uint64_t al[MAX_NODES];
	size_t n_alive = 0;

	for (size_t i = 0; i < s->n_members; i++) {
		if (alive(s, s->members[i].id)) {
			al[n_alive++] = s->members[i].id;
		}
	}
	/* Moves under way: groups we lead with a replica on its way in. */
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_server sv[GROUP_MAX_VOTERS];
		unsigned n = 0;
		bool changing;
		if (!r->local || r->deleting || r->role != GROUP_ROLE_LEADER ||
		    group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n,
		                 &changing) != REPLICA_OK) {
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			if (sv[i].role != GROUP_VOTER) {
				moving++;
				break;
			}
		}
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		struct group_server sv[GROUP_MAX_VOTERS];
		struct rebalance_server rs[GROUP_MAX_VOTERS];
		struct rebalance_group rg;
		struct rebalance_move mv;
		struct member *m;
		unsigned n = 0;
		bool changing;
		int rv = -1;

		if (!r->local || r->deleting || r->role != GROUP_ROLE_LEADER ||
		    !r->ready || r->change_pending ||
		    group_config(s->groups, g, sv, GROUP_MAX_VOTERS, &n,
		                 &changing) != REPLICA_OK ||
		    changing) {
			continue;
		}
		for (unsigned i = 0; i < n; i++) {
			rs[i].id = sv[i].id;
			rs[i].role = sv[i].role == GROUP_VOTER ? REBALANCE_VOTER
			             : sv[i].role == GROUP_STANDBY
			                 ? REBALANCE_STANDBY_ROLE
			                 : REBALANCE_SPARE;
			rs[i].caught_up = sv[i].caught_up;
		}
		rg.servers = rs;
		rg.n_servers = n;
		rg.leader = s->cfg.node_id;
		rg.target = r->replicas;
		rg.n_target = r->n_replicas;
		rg.alive = al;
		rg.n_alive = n_alive;
		rebalance_next(&rg, &mv);
		switch (mv.kind) {
		case REBALANCE_ADD:
			m = member(s, mv.node);
			if (moving >= limit || m == NULL) {
				continue;
			}
			rv = group_change(s->groups, g, GROUP_CHANGE_ADD,
			                  mv.node, m->internal, 0, on_changed,
			                  s);
			moving += rv == 0;
			break;
		case REBALANCE_STANDBY:
		case REBALANCE_PROMOTE:
			rv = group_change(
			    s->groups, g, GROUP_CHANGE_ASSIGN, mv.node, NULL,
			    mv.kind == REBALANCE_PROMOTE ? GROUP_VOTER
			                                 : GROUP_STANDBY,
			    on_changed, s);
			break;
		case REBALANCE_REMOVE:
			rv = group_change(s->groups, g, GROUP_CHANGE_REMOVE,
			                  mv.node, NULL, 0, on_changed, s);
			break;
		case REBALANCE_TRANSFER:
			if (r->transfer_ms != 0 &&
			    now - r->transfer_ms < 3000) {
				continue;
			}
			r->transfer_ms = now;
			if (group_transfer(s->groups, g, mv.node) == 0) {
				log_info(s->log, "shards",
				         "group %" PRIu32
				         ": handing leadership to node %" PRIu64
				         " (placement moves off this node)",
				         g, mv.node);
			}
			continue;
		default:
			continue;
		}
		if (rv == 0) {
			r->change_pending = true;
			log_info(s->log, "shards",
			         "group %" PRIu32 ": %s node %" PRIu64, g,
			         rebalance_name(mv.kind), mv.node);
		} else {
			log_debug(s->log, "shards", "group %" PRIu32 ": %s: %s",
			          g, rebalance_name(mv.kind),
			          group_mgr_errmsg(s->groups));
		}
	}
}

/* A joining node becomes active once it votes in every group placement
 * gives it. */
static void on_state_changed(void *data, int status, const uint8_t *result,
                             size_t len)
{
	struct shards *s = data;
	(void)status;
	(void)result;
	(void)len;
	s->state_busy = false;
	s->meta_ms = 0;
}

static void self_state_step(struct shards *s)
{
	struct member *me = member(s, s->cfg.node_id);
	struct store_cmd c;
	uint8_t key[8];

	if (!s->members_known || s->state_busy || me == NULL ||
	    !me->has_record || me->state != STORE_NODE_JOINING) {
		return;
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (has_id(r->replicas, r->n_replicas, me->id) &&
		    !local_voter(s, g)) {
			return;
		}
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	put_be64(key, me->id);
	c.key.p = key;
	c.key.len = 8;
	c.kind = STORE_NODE_ACTIVE;
	c.max = 1u << STORE_NODE_JOINING;
	if (meta_submit(s, &c, false, on_state_changed, s) == 0) {
		s->state_busy = true;
	}
}

/* ---- membership: DATA/cluster (members and local groups) ---- */

/* "lodestone-cluster 1", then "member ID INTERNAL STATE SLOT" and
 * "group G" lines: what this node knew at its last change, so that a
 * restart finds its peers and its replicas without --peers or --join. */
static void save_cluster(struct shards *s)
{
	char path[1100], tmp[1110];
	FILE *f;
	int fd;

	if (!s->cluster || s->save_gen == s->saved_gen) {
		return;
	}
	snprintf(path, sizeof path, "%s/cluster", s->data_dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL) {
		log_warn(s->log, "shards", "cannot write %s: %s", tmp,
		         strerror(errno));
		return;
	}
	fprintf(f, "lodestone-cluster 1\n");
	for (size_t i = 0; i < s->n_members; i++) {
		const struct member *m = &s->members[i];
		fprintf(f, "member %" PRIu64 " %s %d %" PRIu64 "\n", m->id,
		        m->internal, m->state, m->slot);
	}
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		if (s->routes[g].local && !s->routes[g].deleting) {
			fprintf(f, "group %" PRIu32 "\n", g);
		}
	}
	fflush(f);
	fd = fileno(f);
	if (fsync(fd) != 0 || ferror(f)) {
		fclose(f);
		unlink(tmp);
		return;
	}
	fclose(f);
	if (rename(tmp, path) != 0) {
		unlink(tmp);
		return;
	}
	s->saved_gen = s->save_gen;
}

/* Reads DATA/cluster: members into s->members, groups into `groups`
 * (true = local). Returns 1 when read, 0 when absent, -1 when bad. */
static int load_cluster(struct shards *s, bool *groups)
{
	char path[1100], line[512];
	FILE *f;
	int rv = 1;

	snprintf(path, sizeof path, "%s/cluster", s->data_dir);
	f = fopen(path, "r");
	if (f == NULL) {
		return errno == ENOENT ? 0 : -1;
	}
	if (fgets(line, sizeof line, f) == NULL ||
	    strcmp(line, "lodestone-cluster 1\n") != 0) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		unsigned long long id, slot;
		unsigned g;
		int state;
		char addr[SHARDS_ADDR_MAX];
		if (sscanf(line, "member %llu %299s %d %llu", &id, addr, &state,
		           &slot) == 4) {
			struct member *m = member_add(s, id, addr);
			if (m != NULL) {
				m->state = state;
				m->slot = slot;
			}
		} else if (sscanf(line, "group %u", &g) == 1) {
			if (g <= s->cfg.data_groups) {
				groups[g] = true;
			}
		} else {
			rv = -1;
		}
	}
	fclose(f);
	return rv;
}

/* ---- cluster operations ---- */

static const char *op_kind_name(int kind)
{
	switch (kind) {
	case SHARDS_OP_DRAIN:
		return "drain";
	case SHARDS_OP_REMOVE:
		return "remove";
	case SHARDS_OP_REPLACE:
		return "replace";
	default:
		return "transfer-leader";
	}
}

static void op_fail(struct op *o, const char *msg)
{
	o->state = 2;
	snprintf(o->error, sizeof o->error, "%s", msg);
	log_warn(o->s->log, "shards", "%s %" PRIu64 " failed: %s",
	         op_kind_name(o->kind), o->node, msg);
}

static void on_op_proposed(void *data, int status, const uint8_t *result,
                           size_t len)
{
	struct op *o = data;
	struct store_result r;
	struct store_value v;

	o->waiting = false;
	if (o->s->closing || o->state != 0) {
		return;
	}
	if (status != REPLICA_OK) {
		/* No answer from the meta group (leadership moved, no leader
		 * in time): the state changes are idempotent, so the step is
		 * tried again at the next tick, for a while. */
		if (now_ms(o->s) - o->started_ms > OP_RETRY_MS) {
			op_fail(o, replica_strerror(status));
		}
		return;
	}
	if (store_result_open(result, len, &r) != 0) {
		op_fail(o, "malformed answer from the meta group");
		return;
	}
	if (r.status != STORE_OK) {
		char msg[200] = "refused by the meta group";
		if (store_result_next(&r, &v) && v.tag == STORE_T_BYTES) {
			snprintf(msg, sizeof msg, "%.*s", (int)v.len,
			         (const char *)v.p);
		}
		op_fail(o, msg);
		return;
	}
	o->step++;
	o->s->meta_ms = 0; /* see the change at once */
}

static void op_set_state(struct op *o, uint64_t node, int state, unsigned mask,
                         uint64_t slot)
{
	struct shards *s = o->s;
	struct store_cmd c;
	uint8_t key[8];

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_NODE_STATE;
	put_be64(key, node);
	c.key.p = key;
	c.key.len = 8;
	c.kind = (uint8_t)state;
	c.max = mask;
	c.offset = slot;
	if (meta_submit(s, &c, false, on_op_proposed, o) == 0) {
		o->waiting = true;
	} else {
		op_fail(o, "the meta group is unavailable");
	}
}

/* Groups `gone` held whose new replicas are in: every other holder set
 * reaches the target again (and holds `with` when given). */
static void op_moved(struct shards *s, struct op *o, const struct member *gone,
                     const struct member *with)
{
	unsigned total = 0, done = 0;

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		uint64_t t[MAX_NODES];
		size_t k, have = 0;
		if (!held_has(gone, g)) {
			continue;
		}
		total++;
		k = target_of(s, g, t);
		for (size_t i = 0; i < s->n_members; i++) {
			const struct member *m = &s->members[i];
			if (m != gone && holds_replicas(m) && held_has(m, g)) {
				have++;
			}
		}
		if (have >= k && (with == NULL || held_has(with, g))) {
			done++;
		}
	}
	o->total = total;
	o->done = done;
}

static void op_step(struct shards *s, struct op *o)
{
	struct member *m = member(s, o->node);
	struct member *w = o->with != 0 ? member(s, o->with) : NULL;
	const unsigned live = (1u << STORE_NODE_JOINING) |
	                      (1u << STORE_NODE_ACTIVE) |
	                      (1u << STORE_NODE_DRAINING);

	if (o->state != 0 || o->waiting) {
		return;
	}
	if (o->kind == SHARDS_OP_TRANSFER) {
		bool self;
		uint64_t l = shards_leader(s, (uint32_t)o->node, &self);
		if (l != 0 &&
		    (o->with != 0 ? l == o->with : l != o->old_leader)) {
			o->state = 1;
			o->done = o->total = 1;
		} else if (now_ms(s) - o->started_ms > 15000) {
			op_fail(o, "leadership did not move in 15 s");
		}
		return;
	}
	if (m == NULL) {
		op_fail(o, "the node is no longer known");
		return;
	}
	/* Steps: drain 0 draining, 1 wait until it holds nothing; remove (of
	 * a live node) the same, then 5 removed, 6 done; remove of
	 * a dead node 2 removed, 3 wait until its groups are rebuilt;
	 * replace 0 removed, 1 the new node takes its slot, 2 wait. A step
	 * whose write got no answer runs again. */
	switch (o->kind * 10 + o->step) {
	case SHARDS_OP_DRAIN * 10 + 0:
	case SHARDS_OP_REMOVE * 10 + 0:
		if (o->kind == SHARDS_OP_REMOVE && !o->drain_first) {
			o->step = 2;
			op_step(s, o);
			return;
		}
		op_set_state(
		    o, o->node, STORE_NODE_DRAINING,
		    (1u << STORE_NODE_JOINING) | (1u << STORE_NODE_ACTIVE), 0);
		return;
	case SHARDS_OP_DRAIN * 10 + 1:
	case SHARDS_OP_REMOVE * 10 + 1:
		/* Drained once its own record lists no group. */
		if (m->n_held > o->total) {
			o->total = m->n_held;
		}
		o->done = o->total - m->n_held;
		if (m->state != STORE_NODE_DRAINING || m->n_held > 0) {
			return;
		}
		if (o->kind == SHARDS_OP_DRAIN) {
			o->state = 1;
			return;
		}
		o->step = 5;
		op_step(s, o);
		return;
	case SHARDS_OP_REMOVE * 10 + 5:
		op_set_state(o, o->node, STORE_NODE_REMOVED,
		             1u << STORE_NODE_DRAINING, 0);
		return;
	case SHARDS_OP_REMOVE * 10 + 6:
		o->state = 1;
		o->done = o->total;
		return;
	case SHARDS_OP_REMOVE * 10 + 2:
		op_moved(s, o, m, NULL);
		op_set_state(o, o->node, STORE_NODE_REMOVED, live, 0);
		return;
	case SHARDS_OP_REMOVE * 10 + 3:
	case SHARDS_OP_REPLACE * 10 + 2:
		op_moved(s, o, m, w);
		if (o->done == o->total) {
			o->state = 1;
		}
		return;
	case SHARDS_OP_REPLACE * 10 + 0:
		op_moved(s, o, m, w);
		op_set_state(o, o->node, STORE_NODE_REMOVED, live, 0);
		return;
	case SHARDS_OP_REPLACE * 10 + 1:
		if (w == NULL) {
			o->step = 2;
			return;
		}
		/* The new node takes the dead one's placement slot: exactly
		 * its groups move there. */
		op_set_state(o, o->with, w->state, live, m->slot);
		return;
	default:
		return;
	}
}

static void ops_step(struct shards *s)
{
	for (size_t i = 0; i < MAX_OPS; i++) {
		if (s->ops[i].id != 0) {
			op_step(s, &s->ops[i]);
		}
	}
}

int shards_op_start(struct shards *s, int kind, uint64_t node, uint64_t with,
                    uint64_t *op, char *err, size_t errlen)
{
	struct member *m = NULL, *w = NULL;
	struct op *o = NULL;
	uint64_t slots[MAX_NODES], ids[MAX_NODES];
	size_t nh;

	if (!s->cluster) {
		snprintf(err, errlen, "a single node: nothing to move");
		return 409;
	}
	if (kind == SHARDS_OP_TRANSFER) {
		bool self;
		uint64_t l;
		if (node > s->cfg.data_groups) {
			snprintf(err, errlen, "no group %" PRIu64, node);
			return 404;
		}
		l = shards_leader(s, (uint32_t)node, &self);
		if (!self) {
			snprintf(err, errlen,
			         "node %" PRIu64 " does not lead group %" PRIu64
			         "; ask its leader (node %" PRIu64 ")",
			         s->cfg.node_id, node, l);
			return 421;
		}
		if (with != 0 && with != s->cfg.node_id &&
		    group_transfer(s->groups, (uint32_t)node, with) != 0) {
			snprintf(err, errlen, "%s",
			         group_mgr_errmsg(s->groups));
			return 409;
		}
		if (with == 0 &&
		    group_transfer(s->groups, (uint32_t)node, 0) != 0) {
			snprintf(err, errlen, "%s",
			         group_mgr_errmsg(s->groups));
			return 409;
		}
	} else {
		m = member(s, node);
		if (m == NULL || !m->has_record) {
			snprintf(err, errlen, "no node %" PRIu64, node);
			return 404;
		}
		if (m->state == STORE_NODE_REMOVED) {
			snprintf(err, errlen, "node %" PRIu64 " was removed",
			         node);
			return 409;
		}
		nh = holders(s, slots, ids);
		if (kind == SHARDS_OP_REPLACE) {
			if (alive(s, node)) {
				snprintf(err, errlen,
				         "node %" PRIu64 " is alive: drain or "
				         "remove it instead",
				         node);
				return 409;
			}
			if (with != 0) {
				w = member(s, with);
				if (w == NULL || !w->has_record ||
				    !holds_replicas(w) || with == node) {
					snprintf(err, errlen,
					         "node %" PRIu64
					         " is not a joining or active "
					         "member (start it with --join "
					         "first)",
					         with);
					return 409;
				}
				if (w->slot != w->id) {
					snprintf(err, errlen,
					         "node %" PRIu64
					         " already replaces another",
					         with);
					return 409;
				}
			}
		}
		if ((kind != SHARDS_OP_REPLACE || with == 0) &&
		    holds_replicas(m) && nh - 1 < replicas_r(s)) {
			snprintf(err, errlen,
			         "without node %" PRIu64 " %zu nodes would "
			         "remain for %u replicas per shard: add a "
			         "node first, or replace it --with a new one",
			         node, nh - 1, replicas_r(s));
			return 409;
		}
		for (size_t i = 0; i < MAX_OPS; i++) {
			struct op *x = &s->ops[i];
			if (x->id != 0 && x->state == 0 &&
			    x->kind != SHARDS_OP_TRANSFER &&
			    (x->node == node || x->node == with)) {
				snprintf(err, errlen,
				         "operation %" PRIu64
				         " on node %" PRIu64 " is running",
				         x->id, x->node);
				return 409;
			}
		}
	}
	/* A free slot, else the oldest finished one. */
	for (size_t i = 0; i < MAX_OPS; i++) {
		struct op *x = &s->ops[i];
		if (x->id == 0) {
			o = x;
			break;
		}
		if (x->state != 0 && (o == NULL || x->id < o->id)) {
			o = x;
		}
	}
	if (o == NULL) {
		snprintf(err, errlen, "too many operations running");
		return 429;
	}
	memset(o, 0, sizeof *o);
	o->id = ++s->next_op;
	o->kind = kind;
	o->node = node;
	o->with = with;
	o->s = s;
	o->started_ms = now_ms(s);
	if (kind == SHARDS_OP_TRANSFER) {
		bool self;
		o->old_leader = shards_leader(s, (uint32_t)node, &self);
		o->total = 1;
	} else if (kind == SHARDS_OP_REMOVE) {
		o->drain_first = alive(s, node);
	}
	log_info(s->log, "shards", "operation %" PRIu64 ": %s %" PRIu64, o->id,
	         op_kind_name(kind), node);
	op_step(s, o);
	*op = o->id;
	return 0;
}

static json_t *op_json(const struct op *o)
{
	static const char *states[] = {"running", "done", "failed"};
	json_t *j =
	    json_pack("{s:I, s:s, s:I, s:s, s:I, s:I}", "id", (json_int_t)o->id,
	              "kind", op_kind_name(o->kind),
	              o->kind == SHARDS_OP_TRANSFER ? "group" : "node",
	              (json_int_t)o->node, "state", states[o->state], "done",
	              (json_int_t)o->done, "total", (json_int_t)o->total);
	if (j == NULL) {
		return NULL;
	}
	if (o->kind == SHARDS_OP_REPLACE || o->kind == SHARDS_OP_TRANSFER) {
		json_object_set_new(
		    j, o->kind == SHARDS_OP_REPLACE ? "with" : "to",
		    o->with != 0 ? json_integer((json_int_t)o->with)
		                 : json_null());
	}
	json_object_set_new(j, "error",
	                    o->error[0] != '\0' ? json_string(o->error)
	                                        : json_null());
	return j;
}

int shards_op_json(struct shards *s, uint64_t op, char **out, size_t *len)
{
	for (size_t i = 0; i < MAX_OPS; i++) {
		if (s->ops[i].id == op && op != 0) {
			json_t *j = op_json(&s->ops[i]);
			*out = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
			json_decref(j);
			if (*out == NULL) {
				return -1;
			}
			*len = strlen(*out);
			return 0;
		}
	}
	return -1;
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
		meta_refresh(s);
	}
	if (s->cluster && now - s->reconcile_ms >= RECONCILE_MS) {
		s->reconcile_ms = now;
		join_step(s);
		groups_step(s);
		if (s->members_known && !s->removed) {
			reconcile(s);
			self_state_step(s);
		}
		ops_step(s);
		save_cluster(s);
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
	o = json_pack("{s:I, s:o, s:o, s:b}", "id", (json_int_t)g, "leader",
	              leader ? json_integer((json_int_t)leader) : json_null(),
	              "voters", voters, "replica", r->local);
	if (o == NULL || !r->local ||
	    group_status(s->groups, g, &st) != REPLICA_OK) {
		if (o != NULL) {
			json_object_set_new(o, "role", json_string("none"));
		}
		return o;
	}
	json_object_set_new(o, "role", json_string(role_name(st.role)));
	json_object_set_new(o, "generation", json_integer((json_int_t)r->gen));
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

int shards_status_json(struct shards *s, char **out, size_t *len)
{
	json_t *groups = json_array();
	struct rio_stats rs;
	struct forward_stats fs;
	struct xfer_stats xs = {0};
	json_t *root;

	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		json_t *o = group_json(s, g);
		if (o != NULL) {
			json_array_append_new(groups, o);
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
	    "replicas", (json_int_t)replicas_r(s), "groups", groups, "raft_io",
	    "syncs", (json_int_t)rs.syncs, "entries", (json_int_t)rs.entries,
	    "bytes", (json_int_t)rs.bytes, "max_groups_per_sync",
	    (json_int_t)rs.max_groups, "write_us",
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
	{
		json_t *nodes = json_array(), *ops = json_array();
		for (size_t i = 0; i < s->n_members; i++) {
			const struct member *m = &s->members[i];
			json_t *o = json_pack(
			    "{s:I, s:s, s:I, s:s, s:b, s:b, s:I}", "id",
			    (json_int_t)m->id, "state", state_name(m->state),
			    "slot", (json_int_t)m->slot, "internal",
			    m->internal, "self", m->id == s->cfg.node_id,
			    "connected", alive(s, m->id), "groups",
			    (json_int_t)m->n_held);
			if (o == NULL) {
				continue;
			}
			json_object_set_new(o, "felix", json_string(m->felix));
			json_object_set_new(o, "fsnp", json_string(m->fsnp));
			json_object_set_new(o, "fsnp_tls",
			                    json_string(m->fsnp_tls));
			json_object_set_new(o, "admin", json_string(m->admin));
			json_array_append_new(nodes, o);
		}
		for (size_t i = 0; i < MAX_OPS; i++) {
			if (s->ops[i].id != 0) {
				json_t *o = op_json(&s->ops[i]);
				if (o != NULL) {
					json_array_append_new(ops, o);
				}
			}
		}
		json_object_set_new(root, "nodes", nodes);
		json_object_set_new(root, "ops", ops);
		json_object_set_new(root, "members_known",
		                    json_boolean(s->members_known));
	}
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
		if (store_expire_scan(s->store, g, now, EXPIRE_BATCH, &cmd,
		                      &len) != 0) {
			log_warn(s->log, "shards",
			         "expiry scan of group %" PRIu32 ": %s", g,
			         store_last_error(s->store));
			continue;
		}
		if (len > 0) {
			shards_propose(s, g, cmd, len, on_expired, s);
		}
		free(cmd);
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
		if (split_hostport(s->address, m->host, sizeof m->host,
		                   &m->port) != 0) {
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
	recompute_routes(s);
	return 0;
}

/* --join HOST:PORT resolved once at start. */
static int resolve_join(struct shards *s, char *err, size_t errlen)
{
	char host[256], port[8];
	uint16_t p;
	struct addrinfo hints, *res = NULL;

	if (split_hostport(s->cfg.join, host, sizeof host, &p) != 0) {
		snprintf(err, errlen, "join: '%s' is not HOST:PORT",
		         s->cfg.join);
		return -1;
	}
	snprintf(port, sizeof port, "%u", (unsigned)p);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) {
		snprintf(err, errlen, "join: cannot resolve '%s'", host);
		return -1;
	}
	memcpy(&s->join_addr, res->ai_addr,
	       res->ai_addrlen < sizeof s->join_addr ? res->ai_addrlen
	                                             : sizeof s->join_addr);
	freeaddrinfo(res);
	return 0;
}

static void handle_closed(uv_handle_t *h)
{
	struct shards *s = h->data;
	s->handles_open--;
}

static int start_transport(struct shards *s, char *err, size_t errlen)
{
	struct transport_options to = {0};
	int rv;

	to.node_id = s->cfg.node_id;
	to.cluster_id = s->cluster_id;
	to.log = on_transport_log;
	to.on_frame = on_frame;
	to.on_peer = on_peer;
	to.on_join = on_join_request;
	to.on_unknown = on_unknown_group;
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
		if (resolve_join(s, err, errlen) != 0) {
			goto err_free;
		}
	}
	local_groups = calloc(s->cfg.data_groups + 1, sizeof *local_groups);
	if (local_groups == NULL) {
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	if (s->cluster) {
		found = load_cluster(s, local_groups);
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
	make_record(s);
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
	rv = group_mgr_init(&s->groups, loop, s->rio, &go);
	if (rv != REPLICA_OK) {
		snprintf(err, errlen, "raft groups: cannot start (%d)", rv);
		goto err_xfer;
	}
	/* The replicas this node holds: as saved at its last change, else
	 * (first start of a bootstrapped cluster) its place in the initial
	 * placement, every group bootstrapped with the same configuration on
	 * every node. A joining node starts with none: leaders add it. */
	for (uint32_t g = 0; g <= s->cfg.data_groups; g++) {
		struct route *r = &s->routes[g];
		if (found > 0 ? !local_groups[g]
		              : s->cfg.join != NULL ||
		                    !has_id(r->replicas, r->n_replicas,
		                            s->cfg.node_id)) {
			continue;
		}
		if (start_group(s, g, found > 0 ? NULL : r->replicas,
		                found > 0 ? 0 : r->n_replicas, err,
		                errlen) != 0) {
			goto err_groups;
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
	if (s->cluster) {
		log_info(log, "shards",
		         "node %" PRIu64 " of %zu in cluster '%s': %u replicas "
		         "per shard; internal listener %s:%u",
		         cfg->node_id, s->n_members, s->cluster_id,
		         replicas_r(s), cfg->listen_host,
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
