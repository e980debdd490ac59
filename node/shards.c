/* The node's replicated core; see shards.h. */
#include "node/shards.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/group.h"
#include "raft/io.h"
#include "store/store.h"
#include "wire/felix_hash.h"
#include "wire/fsnp_slot.h"

#define EXPIRE_BATCH 1000

struct shards {
	uv_loop_t *loop;
	const struct log *log;
	struct shards_config cfg;
	char address[256];
	struct rio_store *rio;
	struct group_mgr *groups;
	struct store *store;
	struct fsm fsm;   /* one fsm serves every group: entries name theirs */
	uv_timer_t maint; /* maint.data = this */
	bool closing;
	shards_close_cb close_cb;
	void *close_data;
};

/* One pending propose or read; freed after its callback. */
struct pending {
	struct shards *s;
	uint32_t group;
	shards_propose_cb propose_cb;
	shards_read_cb read_cb;
	void *data;
	size_t len;
	uint8_t cmd[]; /* read commands only */
};

static int map_status(int rv)
{
	switch (rv) {
	case REPLICA_OK:
		return SHARDS_OK;
	case REPLICA_ENOTLEADER:
		return SHARDS_ENOTLEADER;
	case REPLICA_ELEADERSHIPLOST:
		return SHARDS_EUNAVAILABLE;
	case REPLICA_ETOOBIG:
		return SHARDS_ETOOBIG;
	case REPLICA_EBUSY:
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
		return "shard unavailable: no leader, or leadership lost "
		       "before "
		       "the answer (the write may or may not have happened)";
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

uint64_t shards_now_ms(const struct shards *s)
{
	(void)s;
	return wall_ms(NULL);
}

static void on_group_failed(void *data, uint32_t group, const char *msg)
{
	struct shards *s = data;
	log_error(s->log, "shards", "group %" PRIu32 " stopped: %s", group,
	          msg);
}

static void on_proposed(void *data, int status, uint8_t *result, size_t len)
{
	struct pending *p = data;
	p->propose_cb(p->data, map_status(status), result, len);
	free(result);
	free(p);
}

int shards_propose(struct shards *s, uint32_t group, const void *cmd,
                   size_t len, shards_propose_cb cb, void *data)
{
	struct pending *p;
	uint64_t leader = 0;
	if (s->closing) {
		return SHARDS_ESHUTDOWN;
	}
	p = calloc(1, sizeof *p);
	if (p == NULL) {
		return SHARDS_EBUSY;
	}
	p->s = s;
	p->group = group;
	p->propose_cb = cb;
	p->data = data;
	int rv =
	    group_propose(s->groups, group, cmd, len, on_proposed, p, &leader);
	if (rv != REPLICA_OK) {
		free(p);
		return map_status(rv);
	}
	return SHARDS_OK;
}

static void on_read(void *data, int status)
{
	struct pending *p = data;
	p->read_cb(p->data, map_status(status));
	free(p);
}

int shards_read(struct shards *s, uint32_t group, shards_read_cb cb, void *data)
{
	struct pending *p;
	uint64_t leader = 0;
	if (s->closing) {
		return SHARDS_ESHUTDOWN;
	}
	p = calloc(1, sizeof *p);
	if (p == NULL) {
		return SHARDS_EBUSY;
	}
	p->s = s;
	p->group = group;
	p->read_cb = cb;
	p->data = data;
	int rv = group_read(s->groups, group, on_read, p, &leader);
	if (rv != REPLICA_OK) {
		free(p);
		return map_status(rv);
	}
	return SHARDS_OK;
}

static void on_read_cmd(void *data, int status)
{
	struct pending *p = data;
	struct fsm_result res = {0};
	if (status == REPLICA_OK &&
	    store_read(p->s->store, p->group, shards_now_ms(p->s), p->cmd,
	               p->len, &res) != 0) {
		log_error(p->s->log, "shards", "read on group %" PRIu32 ": %s",
		          p->group, store_last_error(p->s->store));
		status = REPLICA_EIO;
	}
	p->propose_cb(p->data, map_status(status), res.data, res.len);
	free(res.data);
	free(p);
}

int shards_read_cmd(struct shards *s, uint32_t group, const void *cmd,
                    size_t len, shards_propose_cb cb, void *data)
{
	struct pending *p;
	uint64_t leader = 0;
	if (s->closing) {
		return SHARDS_ESHUTDOWN;
	}
	p = malloc(sizeof *p + len);
	if (p == NULL) {
		return SHARDS_EBUSY;
	}
	memset(p, 0, sizeof *p);
	p->s = s;
	p->group = group;
	p->propose_cb = cb;
	p->data = data;
	p->len = len;
	memcpy(p->cmd, cmd, len);
	int rv = group_read(s->groups, group, on_read_cmd, p, &leader);
	if (rv != REPLICA_OK) {
		free(p);
		return map_status(rv);
	}
	return SHARDS_OK;
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

uint64_t shards_leader(struct shards *s, uint32_t group, bool *is_self)
{
	struct group_status st;
	*is_self = false;
	if (group_status(s->groups, group, &st) != REPLICA_OK) {
		return 0;
	}
	*is_self =
	    st.leader_id == s->cfg.node_id && st.role == GROUP_ROLE_LEADER;
	return st.leader_id;
}

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

int shards_status_json(struct shards *s, char **out, size_t *len)
{
	uint32_t ids[4097];
	size_t n = group_ids(s->groups, ids, sizeof ids / sizeof ids[0]);
	json_t *arr = json_array();
	struct rio_stats rs;
	if (n > sizeof ids / sizeof ids[0]) {
		n = sizeof ids / sizeof ids[0];
	}
	for (size_t i = 0; i < n; i++) {
		struct group_status st;
		if (group_status(s->groups, ids[i], &st) != REPLICA_OK) {
			continue;
		}
		json_t *voters = json_array();
		for (unsigned v = 0; v < st.n_voters; v++) {
			json_array_append_new(
			    voters, json_integer((json_int_t)st.voters[v]));
		}
		json_t *g = json_pack(
		    "{s:I, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:b, "
		    "s:I, s:I}",
		    "id", (json_int_t)st.group, "role", role_name(st.role),
		    "term", (json_int_t)st.term, "leader",
		    st.leader_id ? json_integer((json_int_t)st.leader_id)
		                 : json_null(),
		    "voters", voters, "commit_index",
		    (json_int_t)st.commit_index, "applied_index",
		    (json_int_t)st.applied_index, "last_index",
		    (json_int_t)st.last_index, "snapshot_index",
		    (json_int_t)st.snapshot_index, "last_contact_ms",
		    (json_int_t)st.last_contact_ms, "ready", st.ready,
		    "proposals", (json_int_t)st.stats.proposals,
		    "entries_applied", (json_int_t)st.stats.entries_applied);
		if (g != NULL && st.failed) {
			json_object_set_new(g, "failed",
			                    json_string(st.message));
		}
		json_array_append_new(arr, g);
	}
	rio_store_stats(s->rio, &rs);
	json_t *root =
	    json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:I}}", "groups", arr,
	              "raft_io", "syncs", (json_int_t)rs.syncs, "entries",
	              (json_int_t)rs.entries, "bytes", (json_int_t)rs.bytes,
	              "max_groups_per_sync", (json_int_t)rs.max_groups,
	              "write_errors", (json_int_t)rs.write_errors);
	if (root == NULL) {
		return -1;
	}
	*out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (*out == NULL) {
		return -1;
	}
	*len = strlen(*out);
	return 0;
}

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

int shards_open(struct shards **out, uv_loop_t *loop, struct db *db,
                const struct shards_config *cfg, const struct log *log,
                char *err, size_t errlen)
{
	struct shards *s = calloc(1, sizeof *s);
	char msg[512] = "";
	int rv;
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->loop = loop;
	s->log = log;
	s->cfg = *cfg;
	snprintf(s->address, sizeof s->address, "%s", cfg->internal_addr);
	s->cfg.internal_addr = s->address;
	if (s->cfg.maintenance_ms == 0) {
		s->cfg.maintenance_ms = 1000;
	}

	struct rio_store_options ro = {0};
	if (rio_store_init(&s->rio, loop, db->db, db->raft_log, db->raft_state,
	                   &ro, msg) != 0) {
		snprintf(err, errlen, "raft storage: %s", msg);
		goto err_free;
	}
	if (store_open(db->db, db->data, &s->store) != 0) {
		snprintf(err, errlen, "state machine: cannot open the store");
		goto err_rio;
	}
	store_fsm_init(&s->fsm, s->store);

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
	rv = group_mgr_init(&s->groups, loop, s->rio, &go);
	if (rv != REPLICA_OK) {
		snprintf(err, errlen, "raft groups: cannot start (%d)", rv);
		goto err_store;
	}
	struct group_member self = {.id = cfg->node_id, .address = s->address};
	for (uint32_t g = 0; g <= cfg->data_groups; g++) {
		rv = group_create(s->groups, g, &s->fsm, NULL);
		if (rv == REPLICA_OK) {
			rv = group_bootstrap(s->groups, g, &self, 1);
			if (rv == REPLICA_EEXIST) {
				rv = REPLICA_OK; /* restart: state exists */
			}
		}
		if (rv == REPLICA_OK) {
			rv = group_start(s->groups, g);
		}
		if (rv != REPLICA_OK) {
			snprintf(err, errlen, "raft group %" PRIu32 ": %s", g,
			         group_mgr_errmsg(s->groups));
			goto err_groups;
		}
	}
	uv_timer_init(loop, &s->maint);
	s->maint.data = s;
	uv_timer_start(&s->maint, on_maint, s->cfg.maintenance_ms,
	               s->cfg.maintenance_ms);
	*out = s;
	return 0;

err_groups:
	/* Groups never ran a loop turn; the manager can be freed directly. */
	group_mgr_free(s->groups);
err_store:
	store_close(s->store);
err_rio:
	rio_store_free(s->rio);
err_free:
	free(s);
	return -1;
}

static void on_maint_closed(uv_handle_t *h)
{
	struct shards *s = h->data;
	store_close(s->store);
	shards_close_cb cb = s->close_cb;
	void *data = s->close_data;
	free(s);
	if (cb != NULL) {
		cb(data);
	}
}

static void on_rio_closed(struct rio_store *r, void *data)
{
	struct shards *s = data;
	rio_store_free(r);
	uv_close((uv_handle_t *)&s->maint, on_maint_closed);
}

static void on_groups_closed(struct group_mgr *m, void *data)
{
	struct shards *s = data;
	group_mgr_free(m);
	rio_store_close(s->rio, on_rio_closed, s);
}

void shards_close(struct shards *s, shards_close_cb cb, void *data)
{
	if (s->closing) {
		return;
	}
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	uv_timer_stop(&s->maint);
	group_mgr_close(s->groups, on_groups_closed, s);
}
