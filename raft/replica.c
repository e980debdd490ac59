/* One group's replica above libraft: fsm glue, group commit, read barriers,
 * leadership tracking; see replica.h. */
#include "raft/replica.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/bytes.h"
#include "raft/entry.h"
#include "raft/io.h"

#define DEFAULT_MAX_ENTRY (1u << 20)
#define DEFAULT_MAX_PENDING (64u << 20)
#define DEFAULT_SNAPSHOT_BYTES (64u << 20)
#define STACK_CMDS 16
/* Delivered batches kept for reuse, with their waiter and result arrays
 * (a busy leader fills one per group per loop turn), unless their arrays
 * grew beyond SPARE_BATCH_MAX_CMDS commands. */
#define SPARE_BATCHES 8
#define SPARE_BATCH_MAX_CMDS 4096

/* Snapshot manifest: the state is already in RocksDB, so a snapshot only
 * records where it stands.
 *   0 "LSRM" | 4 u8 version (1) | 5 3 x 0 | 8 u32 group | 12 u32 0
 *   | 16 u64 state index | 24 u64 now_ms of that entry        (32 bytes)
 * The state index is the last command entry the state holds (the fsm's
 * applied index), which may be below the snapshot's Raft index when the
 * last entries were barriers or configuration changes: they carry no
 * state. */
#define MANIFEST_SIZE 32
#define MANIFEST_VERSION 1

enum { DONE_BATCH = 1, DONE_READS, DONE_NOTE };

struct done {
	struct done *next;
	int kind;
};

struct waiter {
	replica_propose_cb propose;
	replica_read_cb read;
	replica_reserved_cb reserved; /* replica_propose_reserve's */
	void *data;
	size_t off; /* reserved: where its command is in the entry */
	size_t len;
};

struct waiters {
	struct waiter *w;
	unsigned n;
	unsigned cap;
};

/* The commands of one entry, from queueing to the proposers' callbacks. */
struct batch {
	struct done done; /* first member: a batch is a done item */
	struct raft_apply req;
	struct replica *rp;
	struct batch *prev;
	struct batch *next;
	struct entry_builder eb;
	struct waiters ws;
	/* Set by apply on the proposing leader: results[0 .. n_results-1]
	 * hold the commands' results (each data the waiter's once
	 * delivered). The array (res_cap entries, owned) outlives its
	 * contents and is kept when the batch is reused. */
	struct fsm_result *results;
	unsigned n_results;
	unsigned res_cap;
	void *refused; /* the entry libraft refused (not leader), raft_malloc'd:
	                  kept for its reserved commands' callbacks */
	uint64_t index;
	uint64_t term;
	size_t bytes;
	int status;
};

/* The reads of one turn, served by one barrier or one confirmation. */
struct reads {
	struct done done;
	struct raft_barrier req;
	struct replica *rp;
	struct waiters ws;
	int status;
	/* Confirmation (see confirm_start): */
	struct reads *next;  /* in rp->confirming */
	uint64_t term;       /* our leadership term when it started */
	uint64_t round;      /* answers to this round or later count */
	uint64_t read_index; /* commit index when it started */
	uint64_t sent_ms;    /* when its round was sent (replica clock) */
};

#define MAX_VOTERS 16
/* A confirmation round unanswered for this long is sent again. */
#define CONFIRM_RESEND_MS 200

/* A leader_changed call due. */
struct note {
	struct done done;
	bool leader;
	uint64_t term;
};

/* The barrier a new leader waits for before serving. */
struct ready {
	struct raft_barrier req;
	struct replica *rp;
	uint64_t term;
};

struct replica {
	uint32_t group;
	struct fsm *fsm;
	struct raft *raft;
	struct raft_fsm rfsm;
	struct replica_params p;
	struct replica_hooks h;

	uint64_t floor;        /* highest index whose effects the fsm has */
	uint64_t last_now_ms;  /* max now_ms of applied and proposed entries */
	uint64_t last_mono_ms; /* h.mono when last_now_ms last moved */
	uint64_t bytes_since_snapshot;
	unsigned saved_threshold;
	bool threshold_lowered;

	uint64_t lead_term; /* term of our leadership, 0 when not leader */
	bool ready;         /* first barrier of lead_term applied */
	bool ready_inflight;
	bool announced; /* leader_changed(true) queued for lead_term */

	struct batch *q_head; /* queued, not yet proposed; tail is filling */
	struct batch *q_tail;
	struct reads *q_reads;
	struct reads *spare_reads; /* a delivered batch kept for reuse */
	struct batch *spare;       /* delivered batches kept for reuse */
	unsigned n_spare;
	/* fsm_apply's scratch (owned, grown on demand, kept): the decoded
	 * commands of an entry with more than STACK_CMDS, and the results
	 * of an entry no waiter here takes (follower, replay). */
	struct fsm_cmd *cmds;
	unsigned cmds_cap;
	struct fsm_result *scratch;
	unsigned scratch_cap;
	struct reads *confirming; /* awaiting a quorum's answers, FIFO */
	struct reads *confirming_tail;
	uint64_t round; /* last confirmation round sent */
	struct {
		uint64_t id;
		uint64_t round; /* highest round it confirmed in lead_term */
	} acked[MAX_VOTERS];
	unsigned n_acked;
	struct batch *in_head; /* proposed, in index order */
	struct batch *in_tail;
	struct done *d_head; /* callbacks due, in order */
	struct done *d_tail;
	size_t pending_bytes;
	size_t expect_len; /* the size a new entry is expected to reach: the
	                      largest recent one, slowly decaying */

	bool stopping;
	int failed;
	char errmsg[RAFT_ERRMSG_BUF_SIZE];
	struct replica_stats st;
#ifdef LS_FAULT_HOOKS
	int fault; /* FAULT_* (test build only: see "Fault hooks") */
#endif
};

const char *replica_strerror(int code)
{
	switch (code) {
	case REPLICA_OK:
		return "ok";
	case REPLICA_ENOTLEADER:
		return "not the leader of the group";
	case REPLICA_ELEADERSHIPLOST:
		return "leadership lost: the command may or may not be applied";
	case REPLICA_ETOOBIG:
		return "command too large for one entry";
	case REPLICA_EBUSY:
		return "too many proposals queued for the group";
	case REPLICA_ESHUTDOWN:
		return "the group is shutting down or stopped";
	case REPLICA_ENOGROUP:
		return "no such group on this node";
	case REPLICA_ENOMEM:
		return "out of memory";
	case REPLICA_EIO:
		return "storage or state machine failure";
	case REPLICA_EEXIST:
		return "the group already exists or has state";
	case REPLICA_EINVAL:
		return "invalid argument";
	case REPLICA_EUNAVAILABLE:
		return "no leader of the group could be reached in time";
	default:
		return "unknown error";
	}
}

int replica_from_raft(int rv)
{
	switch (rv) {
	case 0:
		return REPLICA_OK;
	case RAFT_NOTLEADER:
		return REPLICA_ENOTLEADER;
	case RAFT_LEADERSHIPLOST:
	case RAFT_SHUTDOWN:
	case RAFT_CANCELED:
		return REPLICA_ELEADERSHIPLOST;
	case RAFT_NOMEM:
		return REPLICA_ENOMEM;
	case RAFT_TOOBIG:
		return REPLICA_ETOOBIG;
	case RAFT_CANTBOOTSTRAP:
	case RAFT_DUPLICATEID:
		return REPLICA_EEXIST;
	case RAFT_BADID:
	case RAFT_BADROLE:
	case RAFT_INVALID:
	case RAFT_DUPLICATEADDRESS:
		return REPLICA_EINVAL;
	case RAFT_BUSY:
		return REPLICA_EBUSY;
	default:
		return REPLICA_EIO;
	}
}

static uint64_t realtime_ms(void *data)
{
	struct timespec ts;
	(void)data;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t monotonic_ms(void *data)
{
	struct timespec ts;
	(void)data;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An entry with time `now_ms` was applied or proposed. */
static void note_time(struct replica *rp, uint64_t now_ms)
{
	if (now_ms > rp->last_now_ms) {
		rp->last_now_ms = now_ms;
		rp->last_mono_ms = rp->h.mono(rp->h.mono_data);
	}
}

/* The time of a new entry: the wall clock, but never behind the group's
 * time. When the group's time is ahead (a leader's clock ran ahead, or
 * this one was set back), it flows on at half speed from where it stands
 * until the wall clock catches up, rather than stand still: standing
 * still froze every TTL and visibility timeout of the group for as long
 * as the jump (seen in a fault run with clock skew). */
static uint64_t stamp_time(struct replica *rp)
{
	uint64_t now = rp->h.clock(rp->h.clock_data);
	if (now >= rp->last_now_ms) {
		note_time(rp, now);
		return now;
	}
	uint64_t mono = rp->h.mono(rp->h.mono_data);
	uint64_t adv =
	    mono > rp->last_mono_ms ? (mono - rp->last_mono_ms) / 2 : 0;
	if (adv > 0) {
		rp->last_now_ms += adv;
		rp->last_mono_ms += adv * 2;
	}
	return rp->last_now_ms;
}

static void notify(struct replica *rp)
{
	if (rp->h.notify != NULL) {
		rp->h.notify(rp->h.notify_data);
	}
}

static void fail(struct replica *rp, int code, const char *fmt, ...)
{
	va_list ap;
	if (rp->failed) {
		return;
	}
	rp->failed = code;
	va_start(ap, fmt);
	vsnprintf(rp->errmsg, sizeof rp->errmsg, fmt, ap);
	va_end(ap);
	notify(rp);
}

static void push_done(struct replica *rp, struct done *d, int kind)
{
	d->kind = kind;
	d->next = NULL;
	if (rp->d_tail == NULL) {
		rp->d_head = d;
	} else {
		rp->d_tail->next = d;
	}
	rp->d_tail = d;
}

static int waiters_push(struct waiters *ws, replica_propose_cb p,
                        replica_read_cb r, void *data)
{
	if (ws->n == ws->cap) {
		unsigned cap = ws->cap == 0 ? 8 : ws->cap * 2;
		struct waiter *w = realloc(ws->w, cap * sizeof *w);
		if (w == NULL) {
			return REPLICA_ENOMEM;
		}
		ws->w = w;
		ws->cap = cap;
	}
	ws->w[ws->n].propose = p;
	ws->w[ws->n].read = r;
	ws->w[ws->n].reserved = NULL;
	ws->w[ws->n].data = data;
	ws->n++;
	return 0;
}

/* Frees the results' data; the array stays. */
static void clear_results(struct fsm_result *res, unsigned n)
{
	unsigned i;
	for (i = 0; i < n; i++) {
		free(res[i].data);
		res[i].data = NULL;
		res[i].len = 0;
	}
}

static void batch_clear_results(struct batch *b)
{
	clear_results(b->results, b->n_results);
	b->n_results = 0;
}

/* Grows a result array to at least `n` entries (contents kept). */
static int results_reserve(struct fsm_result **res, unsigned *cap, unsigned n)
{
	struct fsm_result *p;
	if (n <= *cap) {
		return 0;
	}
	p = realloc(*res, n * sizeof *p);
	if (p == NULL) {
		return -1;
	}
	*res = p;
	*cap = n;
	return 0;
}

/* An empty batch: a delivered one reused (with its arrays) or a new one. */
static struct batch *batch_new(struct replica *rp)
{
	struct batch *b = rp->spare;
	struct waiters ws;
	struct fsm_result *results;
	unsigned res_cap;

	if (b == NULL) {
		b = calloc(1, sizeof *b);
		if (b != NULL) {
			b->rp = rp;
		}
		return b;
	}
	rp->spare = b->next;
	rp->n_spare--;
	ws = b->ws;
	results = b->results;
	res_cap = b->res_cap;
	memset(b, 0, sizeof *b);
	b->rp = rp;
	b->ws.w = ws.w;
	b->ws.cap = ws.cap;
	b->results = results;
	b->res_cap = res_cap;
	return b;
}

static void batch_free(struct batch *b)
{
	struct replica *rp = b->rp;

	entry_builder_close(&b->eb);
	raft_free(b->refused);
	b->refused = NULL;
	batch_clear_results(b);
	if (rp != NULL && rp->n_spare < SPARE_BATCHES &&
	    b->ws.cap <= SPARE_BATCH_MAX_CMDS &&
	    b->res_cap <= SPARE_BATCH_MAX_CMDS) {
		b->next = rp->spare; /* unused while spare */
		rp->spare = b;
		rp->n_spare++;
		return;
	}
	free(b->ws.w);
	free(b->results);
	free(b);
}

static void note_leader(struct replica *rp, bool leader, uint64_t term)
{
	struct note *n = calloc(1, sizeof *n);
	if (n == NULL) {
		fail(rp, REPLICA_ENOMEM, "group %u: out of memory", rp->group);
		return;
	}
	n->leader = leader;
	n->term = term;
	push_done(rp, &n->done, DONE_NOTE);
	notify(rp);
}

/* ---- libraft raft_fsm ---- */

static void maybe_lower_threshold(struct replica *rp, uint64_t index)
{
	struct raft *r = rp->raft;
	uint64_t since;

	if (rp->p.snapshot_bytes == 0 || rp->threshold_lowered ||
	    rp->bytes_since_snapshot < rp->p.snapshot_bytes) {
		return;
	}
	/* libraft snapshots by entry count only: make the count due now. */
	since = index - rio_snapshot_index(r->io);
	rp->saved_threshold = r->snapshot.threshold;
	raft_set_snapshot_threshold(r, since == 0           ? 1
	                               : since > UINT32_MAX ? UINT32_MAX
	                                                    : (unsigned)since);
	rp->threshold_lowered = true;
}

static int fsm_apply(struct raft_fsm *f, const struct raft_buffer *buf,
                     void **result)
{
	struct replica *rp = f->data;
	struct raft *r = rp->raft;
	struct fsm_cmd stack[STACK_CMDS];
	struct fsm_cmd *cmds = stack;
	struct fsm_result *results;
	struct entry_header h;
	struct fsm_entry e;
	struct batch *b;
	uint64_t index;
	int rv;

	*result = NULL;
	if (rp->failed) {
		return RAFT_IOERR;
	}
	/* libraft advances last_applied only after apply returns. */
	index = raft_last_applied(r) + 1;
	if (entry_decode_header(buf->base, buf->len, &h) != 0) {
		fail(rp, REPLICA_EIO, "group %u: entry %llu is malformed",
		     rp->group, (unsigned long long)index);
		return RAFT_MALFORMED;
	}
	note_time(rp, h.now_ms);
	rp->bytes_since_snapshot += buf->len;
	maybe_lower_threshold(rp, index);
	if (index <= rp->floor) {
		/* Replayed after a restart: the state already has it. */
		rp->st.entries_skipped++;
		return 0;
	}
	/* Results go to the proposers only on the leader that proposed this
	 * very entry (libraft fires its request callback right after), into
	 * the batch's own array; any other entry's results are dropped after
	 * the apply. Both arrays, and the decoded commands beyond the stack's,
	 * are kept from entry to entry: no allocation per entry. */
	b = rp->in_head;
	if (b == NULL || b->index != index || b->term != h.term ||
	    raft_state(r) != RAFT_LEADER) {
		b = NULL;
	}
	if (h.n_cmds > STACK_CMDS) {
		if (h.n_cmds > rp->cmds_cap) {
			struct fsm_cmd *p =
			    realloc(rp->cmds, h.n_cmds * sizeof *p);
			if (p != NULL) {
				rp->cmds = p;
				rp->cmds_cap = h.n_cmds;
			}
		}
		cmds = h.n_cmds <= rp->cmds_cap ? rp->cmds : NULL;
	}
	if (b != NULL) {
		batch_clear_results(b);
		rv = results_reserve(&b->results, &b->res_cap, h.n_cmds);
		results = b->results;
	} else {
		rv = results_reserve(&rp->scratch, &rp->scratch_cap, h.n_cmds);
		results = rp->scratch;
	}
	if (cmds == NULL || rv != 0) {
		fail(rp, REPLICA_ENOMEM,
		     "group %u: out of memory applying "
		     "entry %llu",
		     rp->group, (unsigned long long)index);
		return RAFT_NOMEM;
	}
	memset(results, 0, h.n_cmds * sizeof *results);
	if (entry_decode_cmds(buf->base, buf->len, &h, cmds) != 0) {
		fail(rp, REPLICA_EIO, "group %u: entry %llu is malformed",
		     rp->group, (unsigned long long)index);
		return RAFT_MALFORMED;
	}
	e.group = rp->group;
	e.index = index;
	e.term = h.term;
	e.now_ms = h.now_ms;
	e.n_cmds = h.n_cmds;
	e.cmds = cmds;
	rv = rp->fsm->apply(rp->fsm, &e, results);
	if (rv != 0) {
		clear_results(results, h.n_cmds);
		fail(rp, REPLICA_EIO,
		     "group %u: the state machine failed to apply entry %llu "
		     "(%d)",
		     rp->group, (unsigned long long)index, rv);
		return RAFT_IOERR;
	}
	rp->floor = index;
	rp->st.entries_applied++;
	rp->st.cmds_applied += h.n_cmds;
	if (b != NULL) {
		b->n_results = h.n_cmds;
	} else {
		clear_results(results, h.n_cmds);
	}
	return 0;
}

static int fsm_snapshot(struct raft_fsm *f, struct raft_buffer *bufs[],
                        unsigned *n_bufs)
{
	struct replica *rp = f->data;
	struct raft *r = rp->raft;
	uint8_t *m;

	*bufs = raft_malloc(sizeof **bufs);
	m = raft_malloc(MANIFEST_SIZE);
	if (*bufs == NULL || m == NULL) {
		raft_free(*bufs);
		raft_free(m);
		*bufs = NULL;
		return RAFT_NOMEM;
	}
	memset(m, 0, MANIFEST_SIZE);
	memcpy(m, "LSRM", 4);
	m[4] = MANIFEST_VERSION;
	bytes_put32(m + 8, rp->group);
	bytes_put64(m + 16, rp->floor);
	bytes_put64(m + 24, rp->last_now_ms);
	(*bufs)[0].base = m;
	(*bufs)[0].len = MANIFEST_SIZE;
	*n_bufs = 1;
	if (rp->threshold_lowered) {
		raft_set_snapshot_threshold(r, rp->saved_threshold);
		rp->threshold_lowered = false;
	}
	rp->bytes_since_snapshot = 0;
	rp->st.snapshots++;
	return 0;
}

int replica_manifest_index(const void *buf, size_t len, uint32_t group,
                           uint64_t *index)
{
	const uint8_t *m = buf;
	if (len != MANIFEST_SIZE || memcmp(m, "LSRM", 4) != 0 ||
	    m[4] != MANIFEST_VERSION || bytes_get32(m + 8) != group) {
		return REPLICA_EINVAL;
	}
	*index = bytes_get64(m + 16);
	return 0;
}

static int fsm_restore(struct raft_fsm *f, struct raft_buffer *buf)
{
	struct replica *rp = f->data;
	const uint8_t *m = buf->base;
	uint64_t index, now_ms, applied = 0;
	char dir[4096];
	int rv;

	if (replica_manifest_index(buf->base, buf->len, rp->group, &index) !=
	    0) {
		snprintf(rp->errmsg, sizeof rp->errmsg,
		         "group %u: snapshot manifest is malformed", rp->group);
		return RAFT_MALFORMED;
	}
	now_ms = bytes_get64(m + 24);
	rv = rp->fsm->applied_index(rp->fsm, rp->group, &applied);
	if (rv != 0) {
		snprintf(rp->errmsg, sizeof rp->errmsg,
		         "group %u: cannot read the applied index", rp->group);
		return RAFT_IOERR;
	}
	if (applied < index) {
		/* The state is behind the snapshot: it must come from the
		 * node that sent it. */
		if (rp->h.fetch == NULL) {
			snprintf(rp->errmsg, sizeof rp->errmsg,
			         "group %u: snapshot at %llu is ahead of the "
			         "state (%llu) and no state transfer is set up",
			         rp->group, (unsigned long long)index,
			         (unsigned long long)applied);
			return RAFT_IOERR;
		}
		rv = rp->h.fetch(rp->h.fetch_data, rp->group, index, dir,
		                 sizeof dir);
		if (rv == 0) {
			rv = rp->fsm->import_state(rp->fsm, rp->group, dir,
			                           &applied);
		}
		if (rv != 0 || applied < index) {
			snprintf(rp->errmsg, sizeof rp->errmsg,
			         "group %u: state transfer for snapshot %llu "
			         "failed",
			         rp->group, (unsigned long long)index);
			return RAFT_IOERR;
		}
		rp->st.imports++;
	}
	if (applied > rp->floor) {
		rp->floor = applied;
	}
	note_time(rp, now_ms);
	rp->bytes_since_snapshot = 0;
	rp->st.restores++;
	raft_free(buf->base); /* ours on success, as libraft documents */
	return 0;
}

/* ---- proposing ---- */

static void inflight_remove(struct replica *rp, struct batch *b)
{
	if (b->prev != NULL) {
		b->prev->next = b->next;
	} else if (rp->in_head == b) {
		rp->in_head = b->next;
	}
	if (b->next != NULL) {
		b->next->prev = b->prev;
	} else if (rp->in_tail == b) {
		rp->in_tail = b->prev;
	}
	b->prev = b->next = NULL;
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	struct batch *b = req->data;
	struct replica *rp = b->rp;

	(void)result; /* results travel on the batch */
	inflight_remove(rp, b);
	b->status = replica_from_raft(status);
	if (status != 0) {
		batch_clear_results(b);
	}
	push_done(rp, &b->done, DONE_BATCH);
	notify(rp);
}

static void reads_cb(struct raft_barrier *req, int status)
{
	struct reads *x = req->data;
	x->status = replica_from_raft(status);
	push_done(x->rp, &x->done, DONE_READS);
	notify(x->rp);
}

static void ready_cb(struct raft_barrier *req, int status)
{
	struct ready *x = req->data;
	struct replica *rp = x->rp;
	struct raft *r = rp->raft;

	rp->ready_inflight = false;
	if (status == 0 && !rp->stopping && raft_state(r) == RAFT_LEADER &&
	    r->current_term == x->term && rp->lead_term == x->term) {
		/* Ready once the fsm has heard it (see deliver). */
		rp->announced = true;
		note_leader(rp, true, x->term);
	}
	free(x);
	notify(rp);
}

static uint64_t leader_of(struct replica *rp)
{
	raft_id id = 0;
	const char *addr = NULL;
	if (rp->raft != NULL) {
		raft_leader(rp->raft, &id, &addr);
	}
	return id;
}

static void fail_confirming(struct replica *rp, int status)
{
	while (rp->confirming != NULL) {
		struct reads *x = rp->confirming;
		rp->confirming = x->next;
		x->status = status;
		push_done(rp, &x->done, DONE_READS);
	}
	rp->confirming_tail = NULL;
	rp->n_acked = 0;
}

/* Fails every queued (not yet proposed) command and read. */
static void fail_queued(struct replica *rp, int status)
{
	while (rp->q_head != NULL) {
		struct batch *b = rp->q_head;
		rp->q_head = b->next;
		b->next = NULL;
		b->status = status;
		push_done(rp, &b->done, DONE_BATCH);
	}
	rp->q_tail = NULL;
	if (rp->q_reads != NULL) {
		rp->q_reads->status = status;
		push_done(rp, &rp->q_reads->done, DONE_READS);
		rp->q_reads = NULL;
	}
	fail_confirming(rp, status);
}

static int check_open(struct replica *rp, uint64_t *leader_id)
{
	if (leader_id != NULL) {
		*leader_id = 0;
	}
	if (rp->stopping || rp->failed || rp->raft == NULL) {
		return REPLICA_ESHUTDOWN;
	}
	if (raft_state(rp->raft) != RAFT_LEADER) {
		if (leader_id != NULL) {
			*leader_id = leader_of(rp);
		}
		return REPLICA_ENOTLEADER;
	}
	return 0;
}

#ifdef LS_FAULT_HOOKS
/* ---- Fault hooks (lodestone-faulty only; never in the normal build) ----
 *
 * jepsen/'s proof that its checkers catch broken guarantees. The
 * environment variable LODESTONE_FAULT picks one:
 *  - ack-before-commit: a proposal on the leader is answered at once with
 *    a fabricated success, before it is replicated; the command is still
 *    proposed, and is lost if leadership is (partition, crash);
 *  - read-no-barrier: a read is served at once from local state, with no
 *    barrier and on any replica, leader or not (stale reads).
 * (flow-no-fencing is flow/flow_ops.c's.) */
enum { FAULT_NONE, FAULT_ACK_BEFORE_COMMIT, FAULT_READ_NO_BARRIER };

static int fault_mode(uint32_t group)
{
	const char *v = getenv("LODESTONE_FAULT");
	int mode = FAULT_NONE;
	if (v == NULL || v[0] == '\0') {
		return FAULT_NONE;
	}
	if (strcmp(v, "ack-before-commit") == 0) {
		mode = FAULT_ACK_BEFORE_COMMIT;
	} else if (strcmp(v, "read-no-barrier") == 0) {
		mode = FAULT_READ_NO_BARRIER;
	} else if (strncmp(v, "flow-", 5) == 0) {
		return FAULT_NONE; /* flow/flow_ops.c's */
	}
	fprintf(stderr,
	        mode == FAULT_NONE
	            ? "lodestone: unknown LODESTONE_FAULT '%s' ignored "
	              "(group %u)\n"
	            : "lodestone: FAULT HOOK %s ACTIVE on group %u: this "
	              "node breaks its guarantees on purpose\n",
	        v, (unsigned)group);
	return mode;
}

static void fault_drop(void *data, int status, uint8_t *result, size_t len)
{
	(void)data;
	(void)status;
	(void)len;
	free(result);
}

/* Proposes cmd for real (its outcome dropped) and answers the caller
 * with a success right away. The answer is a store result (store/result.h)
 * "version 1, OK, nil", so that the servers above take it for success. */
static int fault_propose(struct replica *rp, const void *cmd, size_t len,
                         replica_propose_cb cb, void *data, uint64_t *leader_id)
{
	static const uint8_t ok_nil[3] = {1, 0, 0};
	struct batch *fake = batch_new(rp);
	int rv;

	if (fake == NULL) {
		return REPLICA_ENOMEM;
	}
	if (waiters_push(&fake->ws, cb, NULL, data) != 0 ||
	    results_reserve(&fake->results, &fake->res_cap, 1) != 0 ||
	    (fake->results[0].data = malloc(sizeof ok_nil)) == NULL) {
		batch_free(fake);
		return REPLICA_ENOMEM;
	}
	memcpy(fake->results[0].data, ok_nil, sizeof ok_nil);
	fake->results[0].len = sizeof ok_nil;
	fake->n_results = 1;
	rv = replica_propose(rp, cmd, len, fault_drop, NULL, leader_id);
	if (rv != 0) {
		batch_free(fake);
		return rv;
	}
	fake->status = REPLICA_OK;
	push_done(rp, &fake->done, DONE_BATCH);
	notify(rp);
	return 0;
}

/* Serves a read now from local state, leader or not. */
static int fault_read(struct replica *rp, replica_read_cb cb, void *data)
{
	struct reads *x;

	if (rp->stopping || rp->failed || rp->raft == NULL) {
		return REPLICA_ESHUTDOWN;
	}
	x = calloc(1, sizeof *x);
	if (x == NULL || waiters_push(&x->ws, NULL, cb, data) != 0) {
		free(x);
		return REPLICA_ENOMEM;
	}
	x->rp = rp;
	x->status = REPLICA_OK;
	rp->st.reads++;
	push_done(rp, &x->done, DONE_READS);
	notify(rp);
	return 0;
}
#endif /* LS_FAULT_HOOKS */

/* Queues room for a command of `len` bytes in the filling batch, with its
 * waiter (propose or reserved callback), and points *cmd at it. */
static int queue_cmd(struct replica *rp, size_t len, replica_propose_cb cb,
                     replica_reserved_cb rcb, void *data, uint64_t *leader_id,
                     uint8_t **cmd)
{
	struct batch *b;
	struct waiter *w;
	int rv;

	rv = check_open(rp, leader_id);
	if (rv != 0) {
		return rv;
	}
	if (len > entry_max_cmd(rp->p.max_entry_bytes)) {
		return REPLICA_ETOOBIG;
	}
	if (rp->pending_bytes + len > rp->p.max_pending_bytes) {
		return REPLICA_EBUSY;
	}
	b = rp->q_tail;
	if (b == NULL || !entry_builder_fits(&b->eb, len)) {
		b = batch_new(rp);
		if (b == NULL) {
			return REPLICA_ENOMEM;
		}
		entry_builder_init(&b->eb, rp->p.max_entry_bytes);
		/* Commands are filled in place, and a buffer that grows is
		 * copied: start at about the largest recent entry (a
		 * smaller one is trimmed when finished). */
		entry_builder_expect(&b->eb,
		                     rp->expect_len + rp->expect_len / 8);
		if (rp->q_tail == NULL) {
			rp->q_head = b;
		} else {
			rp->q_tail->next = b;
		}
		rp->q_tail = b;
	}
	if (waiters_push(&b->ws, cb, NULL, data) != 0) {
		return REPLICA_ENOMEM;
	}
	w = &b->ws.w[b->ws.n - 1];
	w->reserved = rcb;
	if (entry_builder_reserve(&b->eb, len, cmd) != 0) {
		b->ws.n--;
		return REPLICA_ENOMEM;
	}
	w->off = (size_t)(*cmd - b->eb.buf);
	w->len = len;
	b->bytes += len;
	rp->pending_bytes += len;
	rp->st.proposals++;
	notify(rp);
	return 0;
}

int replica_propose(struct replica *rp, const void *cmd, size_t len,
                    replica_propose_cb cb, void *data, uint64_t *leader_id)
{
	uint8_t *p;
	int rv;

#ifdef LS_FAULT_HOOKS
	if (rp->fault == FAULT_ACK_BEFORE_COMMIT && cb != fault_drop) {
		return fault_propose(rp, cmd, len, cb, data, leader_id);
	}
#endif

	rv = queue_cmd(rp, len, cb, NULL, data, leader_id, &p);
	if (rv == 0 && len > 0) {
		memcpy(p, cmd, len);
	}
	return rv;
}

int replica_propose_reserve(struct replica *rp, size_t len,
                            replica_reserved_cb cb, void *data,
                            uint64_t *leader_id, uint8_t **cmd)
{
#ifdef LS_FAULT_HOOKS
	if (rp->fault == FAULT_ACK_BEFORE_COMMIT) {
		/* The fault answers through replica_propose's path. */
		if (leader_id != NULL) {
			*leader_id = 0;
		}
		return REPLICA_EINVAL;
	}
#endif
	return queue_cmd(rp, len, NULL, cb, data, leader_id, cmd);
}

int replica_read(struct replica *rp, replica_read_cb cb, void *data,
                 uint64_t *leader_id)
{
	int rv;

#ifdef LS_FAULT_HOOKS
	if (rp->fault == FAULT_READ_NO_BARRIER) {
		if (leader_id != NULL) {
			*leader_id = 0;
		}
		return fault_read(rp, cb, data);
	}
#endif

	rv = check_open(rp, leader_id);
	if (rv != 0) {
		return rv;
	}
	if (rp->q_reads == NULL) {
		struct reads *x = rp->spare_reads;
		if (x != NULL) {
			struct waiters ws = x->ws;
			rp->spare_reads = NULL;
			memset(x, 0, sizeof *x);
			x->ws = ws; /* n is 0 */
		} else if ((x = calloc(1, sizeof *x)) == NULL) {
			return REPLICA_ENOMEM;
		}
		x->rp = rp;
		rp->q_reads = x;
	}
	if (waiters_push(&rp->q_reads->ws, NULL, cb, data) != 0) {
		return REPLICA_ENOMEM;
	}
	rp->st.reads++;
	notify(rp);
	return 0;
}

/* Notices leadership gained or lost since the last look. */
static void check_leadership(struct replica *rp)
{
	struct raft *r = rp->raft;
	int state = raft_state(r);

	if (rp->lead_term != 0 &&
	    (state != RAFT_LEADER || r->current_term != rp->lead_term)) {
		if (rp->announced) {
			note_leader(rp, false, rp->lead_term);
			rp->announced = false;
		}
		rp->ready = false;
		rp->lead_term = 0;
	}
	if (state != RAFT_LEADER) {
		fail_queued(rp, REPLICA_ENOTLEADER);
		return;
	}
	if (rp->lead_term == 0) {
		rp->lead_term = r->current_term;
	}
	if (!rp->ready && !rp->ready_inflight && !rp->announced) {
		struct ready *x = calloc(1, sizeof *x);
		if (x == NULL) {
			return; /* retried at the next poll */
		}
		x->rp = rp;
		x->term = rp->lead_term;
		x->req.data = x;
		if (raft_barrier(r, &x->req, ready_cb) != 0) {
			free(x);
			return;
		}
		rp->ready_inflight = true;
	}
}

/* True when this leader is the only voter of a committed configuration:
 * then no other leader can exist, and reads need no barrier. */
static bool sole_voter(const struct raft *r)
{
	unsigned voters = 0;
	bool self = false;

	if (r->configuration_uncommitted_index != 0) {
		return false;
	}
	for (unsigned i = 0; i < r->configuration.n; i++) {
		const struct raft_server *sv = &r->configuration.servers[i];
		if (sv->role == RAFT_VOTER) {
			voters++;
			self = self || sv->id == r->id;
		}
	}
	return voters == 1 && self;
}

/* ---- reads confirmed without a log entry ----
 *
 * ReadIndex as in the Raft thesis (6.4), with our own messages instead of
 * heartbeats: remember the commit index, ask every other voter whether it
 * still follows us in our term, and serve once a majority (us included)
 * said yes to this round or a later one, and the commit index is applied.
 * A voter that says yes after the read arrived had not voted in a later
 * term, so no later leader existed when the read arrived: no clock is
 * trusted. A sole voter asks no one. Without the hook, or while the
 * configuration changes, reads take a barrier (an entry) instead. */

static void confirm_send(struct replica *rp, uint64_t round)
{
	const struct raft_configuration *c = &rp->raft->configuration;
	for (unsigned i = 0; i < c->n; i++) {
		const struct raft_server *sv = &c->servers[i];
		if (sv->role == RAFT_VOTER && sv->id != rp->raft->id) {
			rp->h.confirm(rp->h.confirm_data, sv->id, rp->lead_term,
			              round);
		}
	}
}

/* `alone`: we are the only voter; no one needs asking. */
static int confirm_start(struct replica *rp, struct reads *x, bool alone)
{
	struct raft *r = rp->raft;
	uint64_t now = rp->h.clock(rp->h.clock_data);

	if (!alone &&
	    (rp->h.confirm == NULL || r->configuration_uncommitted_index != 0 ||
	     r->configuration.n > MAX_VOTERS)) {
		return -1;
	}
	x->term = rp->lead_term;
	/* Not just the commit index: every command proposed before the
	 * read (flush proposed this turn's first) must be applied, so that
	 * a read pipelined after a write sees it, as with a barrier. */
	x->read_index = raft_last_index(r);
	x->round = alone ? 0 : ++rp->round;
	x->sent_ms = now;
	x->next = NULL;
	if (rp->confirming_tail == NULL) {
		rp->confirming = x;
	} else {
		rp->confirming_tail->next = x;
	}
	rp->confirming_tail = x;
	if (alone) {
		rp->st.reads_local++;
	} else {
		confirm_send(rp, x->round);
		rp->st.read_confirms++;
	}
	return 0;
}

/* Whether voters confirming `round` make a majority with us. */
static bool confirm_quorum(struct replica *rp, uint64_t round)
{
	const struct raft_configuration *c = &rp->raft->configuration;
	unsigned voters = 0, yes = 0;
	for (unsigned i = 0; i < c->n; i++) {
		const struct raft_server *sv = &c->servers[i];
		if (sv->role != RAFT_VOTER) {
			continue;
		}
		voters++;
		if (sv->id == rp->raft->id) {
			yes++;
			continue;
		}
		for (unsigned k = 0; k < rp->n_acked; k++) {
			if (rp->acked[k].id == sv->id &&
			    rp->acked[k].round >= round) {
				yes++;
				break;
			}
		}
	}
	return yes * 2 > voters;
}

/* Serves the confirmed reads, in order; re-asks when answers are late
 * (a dropped message, a peer that came back). */
static void confirm_check(struct replica *rp)
{
	struct raft *r = rp->raft;
	struct reads *x;

	while ((x = rp->confirming) != NULL) {
		if (raft_state(r) != RAFT_LEADER ||
		    r->current_term != x->term || rp->lead_term != x->term) {
			fail_confirming(rp, REPLICA_ENOTLEADER);
			return;
		}
		if (!confirm_quorum(rp, x->round) ||
		    r->last_applied < x->read_index) {
			break;
		}
		rp->confirming = x->next;
		if (rp->confirming == NULL) {
			rp->confirming_tail = NULL;
		}
		x->status = REPLICA_OK;
		push_done(rp, &x->done, DONE_READS);
	}
	if (x != NULL && x->round != 0 && rp->h.confirm != NULL) {
		uint64_t now = rp->h.clock(rp->h.clock_data);
		if (now >= x->sent_ms + CONFIRM_RESEND_MS || now < x->sent_ms) {
			/* Every waiting batch moves to the new round: it is
			 * sent after each of them arrived. */
			uint64_t round = ++rp->round;
			for (struct reads *y = x; y != NULL; y = y->next) {
				y->round = round;
				y->sent_ms = now;
			}
			confirm_send(rp, round);
		}
	}
}

void replica_confirmed(struct replica *rp, uint64_t peer, uint64_t term,
                       uint64_t round, bool ok)
{
	unsigned k;
	if (!ok || term == 0 || term != rp->lead_term) {
		return;
	}
	for (k = 0; k < rp->n_acked; k++) {
		if (rp->acked[k].id == peer) {
			break;
		}
	}
	if (k == rp->n_acked) {
		if (k == MAX_VOTERS) {
			return;
		}
		rp->acked[k].id = peer;
		rp->acked[k].round = 0;
		rp->n_acked++;
	}
	if (round > rp->acked[k].round) {
		rp->acked[k].round = round;
	}
	if (rp->confirming != NULL) {
		notify(rp);
	}
}

bool replica_follows(const struct replica *rp, uint64_t leader, uint64_t term)
{
	const struct raft *r = rp->raft;
	/* In that term and not a candidate: it has voted in no later term,
	 * which is all the leader needs to know. */
	(void)leader;
	return r != NULL && !rp->stopping && !rp->failed &&
	       r->state == RAFT_FOLLOWER && r->current_term == term;
}

/* Hands queued commands (one entry per batch) and reads to libraft. */
static void flush(struct replica *rp)
{
	struct raft *r = rp->raft;

	if (!rp->ready || raft_state(r) != RAFT_LEADER) {
		return;
	}
	while (rp->q_head != NULL) {
		struct batch *b = rp->q_head;
		struct raft_buffer buf;
		uint64_t now;
		int rv;

		rp->q_head = b->next;
		if (rp->q_head == NULL) {
			rp->q_tail = NULL;
		}
		b->next = NULL;
		now = stamp_time(rp);
		b->term = r->current_term;
		if (entry_builder_finish(&b->eb, b->term, now, &buf.base,
		                         &buf.len) != 0) {
			b->status = REPLICA_EINVAL;
			push_done(rp, &b->done, DONE_BATCH);
			continue;
		}
		b->req.data = b;
		if (buf.len >= rp->expect_len) {
			rp->expect_len = buf.len;
		} else {
			rp->expect_len -= (rp->expect_len - buf.len) / 16;
		}
		rv = raft_apply(r, &b->req, &buf, 1, apply_cb);
		if (rv != 0) {
			/* libraft frees the buffer itself when it fails after
			 * taking it; it takes nothing when not leader (kept
			 * until the callbacks: reserved commands get it). */
			if (rv == RAFT_NOTLEADER) {
				b->refused = buf.base;
			}
			b->status = replica_from_raft(rv);
			push_done(rp, &b->done, DONE_BATCH);
			continue;
		}
		b->index = b->req.index;
		b->prev = rp->in_tail;
		if (rp->in_tail == NULL) {
			rp->in_head = b;
		} else {
			rp->in_tail->next = b;
		}
		rp->in_tail = b;
		rp->st.entries_proposed++;
	}
	if (rp->q_reads != NULL) {
		struct reads *x = rp->q_reads;
		int rv;
		rp->q_reads = NULL;
		if (confirm_start(rp, x, sole_voter(r)) == 0) {
			return;
		}
		x->req.data = x;
		rv = raft_barrier(r, &x->req, reads_cb);
		if (rv != 0) {
			x->status = replica_from_raft(rv);
			push_done(rp, &x->done, DONE_READS);
		} else {
			rp->st.read_barriers++;
		}
	}
}

/* The callback of a reserved command; when it was refused before
 * libraft took it (not leader: never applied), with its bytes. */
static void deliver_reserved(struct batch *b, const struct waiter *w,
                             uint8_t *res, size_t len)
{
	const uint8_t *base = b->eb.buf != NULL ? b->eb.buf : b->refused;
	const uint8_t *cmd = NULL;
	size_t cmd_len = 0;

	if (b->status == REPLICA_ENOTLEADER && base != NULL) {
		cmd = base + w->off;
		cmd_len = w->len;
	}
	w->reserved(w->data, b->status, res, len, cmd, cmd_len);
}

static void deliver(struct replica *rp)
{
	struct done *d;

	while ((d = rp->d_head) != NULL) {
		unsigned i;
		rp->d_head = d->next;
		if (rp->d_head == NULL) {
			rp->d_tail = NULL;
		}
		switch (d->kind) {
		case DONE_BATCH: {
			struct batch *b = (struct batch *)d;
			rp->pending_bytes -= b->bytes;
			for (i = 0; i < b->ws.n; i++) {
				struct waiter *w = &b->ws.w[i];
				uint8_t *res = NULL;
				size_t len = 0;
				if (b->status == REPLICA_OK &&
				    i < b->n_results) {
					res = b->results[i].data;
					len = b->results[i].len;
					b->results[i].data = NULL;
				}
				if (w->reserved != NULL) {
					deliver_reserved(b, w, res, len);
				} else {
					w->propose(w->data, b->status, res,
					           len);
				}
			}
			if (b->status == REPLICA_OK &&
			    b->n_results <= b->ws.n) {
				b->n_results = 0; /* every result handed out */
			}
			batch_free(b);
			break;
		}
		case DONE_READS: {
			struct reads *x = (struct reads *)d;
			for (i = 0; i < x->ws.n; i++) {
				x->ws.w[i].read(x->ws.w[i].data, x->status);
			}
			/* One batch (and its waiter array) is kept: a busy
			 * leader makes one per loop turn. */
			if (rp->spare_reads == NULL) {
				x->ws.n = 0;
				rp->spare_reads = x;
			} else {
				free(x->ws.w);
				free(x);
			}
			break;
		}
		case DONE_NOTE: {
			struct note *n = (struct note *)d;
			if (n->leader && rp->announced &&
			    rp->lead_term == n->term && !rp->stopping) {
				/* The fsm learns of its leadership before the
				 * first command or read is served. */
				rp->ready = true;
				notify(rp);
			}
			if (rp->fsm->leader_changed != NULL) {
				rp->fsm->leader_changed(rp->fsm, rp->group,
				                        n->leader, n->term);
			}
			free(n);
			break;
		}
		default:
			abort();
		}
	}
}

int replica_poll(struct replica *rp)
{
	if (rp->raft != NULL && !rp->stopping && !rp->failed) {
		check_leadership(rp);
		flush(rp);
		confirm_check(rp);
	}
	deliver(rp);
	return rp->failed;
}

void replica_shutdown(struct replica *rp)
{
	rp->stopping = true;
	fail_queued(rp, REPLICA_ESHUTDOWN);
	if (rp->announced) {
		note_leader(rp, false, rp->lead_term);
		rp->announced = false;
	}
	rp->ready = false;
	rp->lead_term = 0;
}

/* ---- lifecycle ---- */

int replica_new(struct replica **out, uint32_t group, struct fsm *fsm,
                const struct replica_params *p, const struct replica_hooks *h)
{
	struct replica *rp;

	*out = NULL;
	if (fsm == NULL || fsm->apply == NULL || fsm->applied_index == NULL) {
		return REPLICA_EINVAL;
	}
	rp = calloc(1, sizeof *rp);
	if (rp == NULL) {
		return REPLICA_ENOMEM;
	}
	rp->group = group;
	rp->fsm = fsm;
	if (p != NULL) {
		rp->p = *p;
	}
	if (rp->p.max_entry_bytes == 0) {
		rp->p.max_entry_bytes = DEFAULT_MAX_ENTRY;
	}
	if (rp->p.max_entry_bytes < ENTRY_HEADER_SIZE + ENTRY_CMD_OVERHEAD) {
		free(rp);
		return REPLICA_EINVAL;
	}
	if (rp->p.max_pending_bytes == 0) {
		rp->p.max_pending_bytes = DEFAULT_MAX_PENDING;
	}
	if (rp->p.snapshot_bytes == 0) {
		rp->p.snapshot_bytes = DEFAULT_SNAPSHOT_BYTES;
	}
	if (h != NULL) {
		rp->h = *h;
	}
	if (rp->h.clock == NULL) {
		rp->h.clock = realtime_ms;
	}
	if (rp->h.mono == NULL) {
		rp->h.mono = monotonic_ms;
	}
	rp->rfsm.version = 1;
	rp->rfsm.data = rp;
	rp->rfsm.apply = fsm_apply;
	rp->rfsm.snapshot = fsm_snapshot;
	rp->rfsm.restore = fsm_restore;
#ifdef LS_FAULT_HOOKS
	rp->fault = fault_mode(group);
#endif
	*out = rp;
	return 0;
}

struct raft_fsm *replica_raft_fsm(struct replica *rp)
{
	return &rp->rfsm;
}

int replica_bind(struct replica *rp, struct raft *raft)
{
	uint64_t applied = 0;

	rp->raft = raft;
	if (rp->fsm->applied_index(rp->fsm, rp->group, &applied) != 0) {
		snprintf(rp->errmsg, sizeof rp->errmsg,
		         "group %u: cannot read the applied index", rp->group);
		return REPLICA_EIO;
	}
	rp->floor = applied;
	return 0;
}

void replica_free(struct replica *rp)
{
	if (rp == NULL) {
		return;
	}
	fail_queued(rp, REPLICA_ESHUTDOWN);
	/* libraft failed what it held when it closed; anything left over
	 * is failed here so that every callback runs once. */
	while (rp->in_head != NULL) {
		struct batch *b = rp->in_head;
		inflight_remove(rp, b);
		batch_clear_results(b);
		b->status = REPLICA_ELEADERSHIPLOST;
		push_done(rp, &b->done, DONE_BATCH);
	}
	deliver(rp);
	if (rp->spare_reads != NULL) {
		free(rp->spare_reads->ws.w);
		free(rp->spare_reads);
	}
	while (rp->spare != NULL) {
		struct batch *b = rp->spare;
		rp->spare = b->next;
		free(b->ws.w);
		free(b->results);
		free(b);
	}
	free(rp->cmds);
	free(rp->scratch);
	free(rp);
}

bool replica_idle(const struct replica *rp)
{
	return rp->q_head == NULL && rp->q_reads == NULL &&
	       rp->confirming == NULL && rp->in_head == NULL &&
	       rp->d_head == NULL && !rp->ready_inflight &&
	       rp->pending_bytes == 0 && !rp->stopping && rp->failed == 0;
}

bool replica_is_ready(const struct replica *rp)
{
	return rp->ready;
}

const char *replica_errmsg(const struct replica *rp)
{
	return rp->errmsg;
}

void replica_stats(const struct replica *rp, struct replica_stats *st)
{
	*st = rp->st;
}

void replica_count_import(struct replica *rp)
{
	rp->st.imports++;
}

uint64_t replica_last_now_ms(const struct replica *rp)
{
	return rp->last_now_ms;
}
