/* What node/shards.c and node/membership.c share of the replicated core:
 * the shards object, its members, the routing snapshot's entries and the
 * cluster operations. Nothing else includes it. */
#ifndef LS_NODE_SHARDS_INTERNAL_H
#define LS_NODE_SHARDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "node/shards.h"
#include "raft/fsm.h"
#include "raft/msg_codec.h"

#define MAX_NODES 64
#define MAX_REPLICAS 8
#define ANNOUNCE_TTL_MS 3000
#define RECORD_MAX 4096
#define MAX_OPS 32

struct group_mgr;
struct rio_store;
struct transport;
struct forward;
struct xfer;
struct join;
struct pending;

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
	char resp[SHARDS_ADDR_MAX]; /* RESP listener ("" not served) */
	bool has_record;
	uint64_t up_ms; /* connected since (0 = not connected) */
	int state;      /* STORE_NODE_*: active until a record says */
	uint64_t slot;  /* placement rank (its id, or the one it replaced) */
	uint8_t *held;  /* groups it votes in, as published (bitmap) */
	unsigned n_held;
	bool nonvoter; /* demoted: placement gives it standbys only */
};

/* The routing snapshot's entry of one group. */
/* membership_recompute's inputs: 4 per member and 2 more. */
#define PLACEMENT_INPUTS (4 * MAX_NODES + 2)

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
	unsigned n_standbys;
	uint64_t
	    standbys[MAX_REPLICAS]; /* demoted nodes' non-voting replicas */
	uint64_t leader_since_ms;
	uint64_t transfer_ms;
	/* Ownership generation: the newest term this node saw a leader in,
	 * (shards_group_generation). */
	uint64_t gen_term;
	bool change_pending; /* a configuration change of ours in flight */
	bool start_wanted;   /* a leader sent entries: start a replica */
	bool deleting;       /* stopped; its state goes once it closed */
	uint64_t orphan_ms;  /* since this replica looks removed (0 = not) */
	bool handoff;        /* stopping: its leadership is being handed over */
	/* The expiry sweep found nothing due before expire_quiet_ms at
	 * applied index expire_applied: no scan until either moves. */
	uint64_t expire_applied;
	uint64_t expire_quiet_ms;
	/* The same for the max_active_ms sweep of FerricFlow. */
	uint64_t sweep_applied;
	uint64_t sweep_quiet_ms;
	/* The local replica's, as of the last refresh_local (shards.c): */
	bool voter;       /* this node votes in the group */
	uint64_t applied; /* applied index */
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

struct tls_ctx;

struct shards {
	uv_loop_t *loop;
	/* Internal mutual TLS (NULL: plaintext): the transport's accepting
	 * and dialing contexts; joins dial with the client one. */
	struct tls_ctx *tls_server;
	struct tls_ctx *tls_client;
	const struct log *log;
	struct db *db;
	struct shards_config cfg;
	uint64_t refresh_ms; /* refresh_local's last look at every group */
	/* What membership_recompute last placed the groups from. */
	uint64_t placement_in[PLACEMENT_INPUTS];
	size_t placement_n; /* 0: never placed */
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
	/* SIGHUP: internal TLS files read again (only with internal TLS);
	 * sighup.data = this */
	uv_signal_t sighup;
	bool sighup_on;

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
	/* The FLOW.QUERY cursor key (meta group setting "flow_cursor_key",
	 * created once by a replicated set-if-absent). */
	uint8_t cursor_key[32];
	bool cursor_key_known;
	bool cursor_key_absent; /* read as unset: propose one */
	bool cursor_busy;
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

static inline struct member *member(struct shards *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_members; i++) {
		if (s->members[i].id == id) {
			return &s->members[i];
		}
	}
	return NULL;
}

static inline bool valid_group(const struct shards *s, uint32_t group)
{
	return group <= s->cfg.data_groups;
}

static inline uint64_t now_ms(const struct shards *s)
{
	return uv_now(s->loop);
}

/* The value of `key` in a node record (`rec`, `len` bytes) into `out`
 * (`cap` bytes, "" when absent). */
void shards_record_field(const char *rec, size_t len, const char *key,
                         char *out, size_t cap);

#endif
