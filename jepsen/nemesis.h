/* Nemeses: the faults a fault-testing run injects into its hosts, and the
 * seeded schedules that combine them.
 *
 * - Partitions are grudges: a symmetric "cut" relation between the client
 *   (index 0) and the nodes (1..n). A cut between two hosts becomes iptables
 *   DROP rules in the namespace of each node involved, both directions
 *   (INPUT from the other's address, OUTPUT to it), added in one
 *   iptables-restore per namespace; a heal deletes exactly the rules that
 *   were added. Shapes: random halves, one node isolated, the leader of a
 *   shard isolated (asked of a caller's callback), and a majorities ring.
 * - kill -9 and restart, SIGSTOP and SIGCONT, clock skew (libfaketime
 *   timestamp file of the node; the nodes must run under libfaketime).
 * - Membership changes: add a node, drain and remove one, replace a dead
 *   one. The schedule says which (and when); a caller's callback runs it
 *   against the cluster within the step's time and says how it ended
 *   (done, refused, timed out, ...). While membership changes, the other
 *   faults apply to the nodes that are members when they start: the
 *   schedule's node numbers are positions among them (the k-th member in
 *   id order); a partition shape planned for another number of nodes, or
 *   nodes beyond the members, are drawn again over them.
 *
 * Everything done is recorded in a timeline file, one event a line:
 *     TIME_NS EVENT FAULT TARGETS [DETAIL...]
 * TIME_NS is hosts_now_ns() (the history's time base); EVENT is start, heal,
 * skip (a fault that could not apply, with why), error (a fault or heal that
 * failed), exit (a node died without the nemesis killing it) or phase.
 *
 * The grudge and schedule functions are pure (seeded, deterministic); the
 * others act on a struct hosts. */
#ifndef LS_JEPSEN_NEMESIS_H
#define LS_JEPSEN_NEMESIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>

#include "jepsen/hosts.h"

/* --- Deterministic randomness (splitmix64) --- */

struct nemesis_rng {
	uint64_t state;
};

void nemesis_rng_seed(struct nemesis_rng *r, uint64_t seed);
uint64_t nemesis_rng_next(struct nemesis_rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t nemesis_rng_below(struct nemesis_rng *r, uint64_t n);

/* --- Grudges --- */

#define NEMESIS_CLIENT 0 /* index of the client in a grudge */
#define NEMESIS_DESC_LEN 160

/* Where the client stands in a two-sided partition. */
enum nemesis_client_side {
	NEMESIS_CLIENT_ALL, /* reaches every node (Jepsen's control node) */
	NEMESIS_CLIENT_MAJORITY, /* only the larger side */
	NEMESIS_CLIENT_MINORITY, /* only the smaller side */
};

struct nemesis_grudge {
	unsigned n; /* nodes 1..n */
	/* cut[a][b]: a and b cannot exchange packets; symmetric, never
	 * cut[a][a]; index NEMESIS_CLIENT is the client. */
	bool cut[HOSTS_MAX_NODES + 1][HOSTS_MAX_NODES + 1];
	char desc[NEMESIS_DESC_LEN]; /* "1,4|2,3,5", "ring 3-1-5-2-4" */
};

/* No cuts. */
void nemesis_grudge_none(struct nemesis_grudge *g, unsigned n);

/* Nodes split at random into a minority of n/2 and the rest. */
int nemesis_grudge_halves(struct nemesis_grudge *g, unsigned n,
                          struct nemesis_rng *rng,
                          enum nemesis_client_side side);

/* Node `node` cut from every other node (the client per `side`: with the
 * majority it cannot reach `node`). */
int nemesis_grudge_isolate(struct nemesis_grudge *g, unsigned n, unsigned node,
                           enum nemesis_client_side side);

/* Majorities ring: nodes on a random ring, each sees the nodes within
 * distance d = ceil(floor(n/2)/2) of it (2d+1 with itself, a majority), so
 * every node sees a majority and no two see the same one. Needs n >= 4
 * (with 3 nodes every majority ring is a full mesh). The client sees all. */
int nemesis_grudge_ring(struct nemesis_grudge *g, unsigned n,
                        struct nemesis_rng *rng);

/* Whether a and b can exchange packets. */
bool nemesis_grudge_sees(const struct nemesis_grudge *g, unsigned a,
                         unsigned b);

/* The iptables-restore input that adds (op 'A') or deletes (op 'D') the
 * DROP rules node `node`'s namespace needs for g; addrs[0] is the client's
 * address, addrs[i] node i's. *rules gets how many rules (0: nothing to
 * do, buf holds an empty table). -ENOSPC if cap is too small. */
int nemesis_grudge_rules(const struct nemesis_grudge *g, unsigned node,
                         const char *const addrs[], char op, char *buf,
                         size_t cap, unsigned *rules);

/* --- Faults and schedules --- */

/* Partition shapes come first, before NEMESIS_KILL. */
enum nemesis_fault {
	NEMESIS_PARTITION_HALVES,
	NEMESIS_PARTITION_ISOLATE,
	NEMESIS_PARTITION_LEADER,
	NEMESIS_PARTITION_RING,
	NEMESIS_KILL,
	NEMESIS_PAUSE,
	NEMESIS_SKEW,
	NEMESIS_MEMBERSHIP,
	NEMESIS_N_FAULTS
};

/* What a membership step does. */
enum nemesis_member_op {
	NEMESIS_MEMBER_ADD,     /* start a spare node with --join */
	NEMESIS_MEMBER_REMOVE,  /* drain a member, then remove it (exit 0) */
	NEMESIS_MEMBER_REPLACE, /* kill -9 a member, start a spare, replace */
	NEMESIS_MEMBER_N_OPS
};

/* "add", "drain-remove", "replace" */
const char *nemesis_member_op_name(enum nemesis_member_op op);

#define NEMESIS_BIT(f) (1u << (f))
#define NEMESIS_PARTITIONS                                                     \
	(NEMESIS_BIT(NEMESIS_PARTITION_HALVES) |                               \
	 NEMESIS_BIT(NEMESIS_PARTITION_ISOLATE) |                              \
	 NEMESIS_BIT(NEMESIS_PARTITION_RING))

/* "partition-halves", "kill", ... */
const char *nemesis_fault_name(enum nemesis_fault f);

/* Fault mask of a --nemesis name: partition, kill, pause, skew, mixed
 * (all of them but membership), membership, none, or a comma-separated
 * list of them (the union, e.g. "kill,pause" or "membership,kill"). `nodes`
 * drops the ring below 4 nodes, `leader` adds the leader partition (only with a
 * leader oracle). */
int nemesis_parse_mask(const char *name, unsigned nodes, bool leader,
                       unsigned *mask);

struct nemesis_step {
	int64_t start_ms; /* since the schedule began */
	int64_t heal_ms;
	enum nemesis_fault fault;
	unsigned targets; /* bit (1u << id) per node: kill, pause, skew,
	                     isolate */
	unsigned shard;   /* leader partition */
	int64_t skew_ms[HOSTS_MAX_NODES + 1]; /* skew, per node id */
	struct nemesis_grudge grudge;         /* halves, isolate, ring */
	enum nemesis_member_op member_op;     /* membership */
	unsigned pick; /* membership: chooses the node among candidates */
};

struct nemesis_plan {
	unsigned nodes;
	uint64_t seed;
	unsigned faults; /* NEMESIS_BIT mask; 0: an empty schedule */
	int64_t total_ms;
	/* Fault-free tail; every fault is healed before it begins. */
	int64_t final_ms;
	int64_t quiet_min_ms, quiet_max_ms; /* gap before each fault */
	int64_t fault_min_ms, fault_max_ms; /* how long a fault lasts */
	int64_t max_skew_ms;                /* |offset| bound */
	unsigned shards;                    /* for the leader partition */
	enum nemesis_client_side client;    /* halves and isolate */
	/* How long a membership step may take (it ends when done). */
	int64_t member_min_ms, member_max_ms;
	unsigned spares; /* spare nodes: adds and replaces use one each */
};

/* The defaults for a run of total_ms: quiet 1-4 s, faults 2-8 s,
 * membership steps 12-20 s, a final phase of max(3 s, total/5), skew up
 * to 60 s, 8 shards, no spare. */
void nemesis_plan_defaults(struct nemesis_plan *p, unsigned nodes,
                           uint64_t seed, unsigned faults, int64_t total_ms);

struct nemesis_schedule {
	struct nemesis_step *steps; /* owned; nemesis_schedule_free */
	size_t n;
	int64_t total_ms, final_ms; /* final_ms: when the final phase starts */
	uint64_t seed;
};

/* A schedule of faults one at a time (each healed before the next
 * starts, and the last before the final phase), the same for the same
 * plan. -EINVAL (with why in err) for a plan that cannot be. */
int nemesis_schedule_make(struct nemesis_schedule *s,
                          const struct nemesis_plan *p, char *err, size_t cap);
void nemesis_schedule_free(struct nemesis_schedule *s);

/* A written schedule: one step a line, as nemesis_step_describe writes
 * them ("START_MS HEAL_MS FAULT TARGETS [nI=+Nms...]"), for kill, pause,
 * skew, partition-isolate and membership (TARGETS: add, drain-remove or
 * replace); '#' lines are comments. With membership steps, node numbers
 * are positions among the members (up to HOSTS_MAX_NODES). Steps in order, not
 * overlapping, healed before the final phase (total_ms - final_ms).
 * -EINVAL with why in err. */
int nemesis_schedule_parse(struct nemesis_schedule *s, const char *text,
                           unsigned nodes, int64_t total_ms, int64_t final_ms,
                           char *err, size_t cap);

/* One line describing step i: "<start> <heal> <fault> <targets>". */
void nemesis_step_describe(const struct nemesis_step *st, char *buf,
                           size_t cap);

/* --- Acting on hosts --- */

/* Answers which node leads `shard` now: 0 and *node, or an error. */
typedef int (*nemesis_leader_cb)(void *arg, unsigned shard, unsigned *node);

/* How a membership step ended. */
enum nemesis_member_outcome {
	NEMESIS_MEMBER_DONE,    /* the cluster did it */
	NEMESIS_MEMBER_REFUSED, /* the cluster said no (e.g. below R) */
	NEMESIS_MEMBER_FAILED,  /* the cluster's operation failed */
	NEMESIS_MEMBER_TIMEOUT, /* not finished within the step */
	NEMESIS_MEMBER_SKIPPED, /* nothing to do it with (no spare, ...) */
	NEMESIS_MEMBER_ERROR,   /* the harness could not act: fails the run */
	NEMESIS_MEMBER_N_OUTCOMES
};

/* "done", "refused", "failed", "timeout", "skipped", "error" */
const char *nemesis_member_outcome_name(enum nemesis_member_outcome o);

struct nemesis_member_result {
	enum nemesis_member_outcome outcome;
	unsigned node; /* the node added, removed or replaced (0: none) */
	unsigned with; /* replace: the new node */
	char detail[256];
};

/* Runs membership operation op until hosts time deadline_ns at the latest
 * (pick chooses among candidate nodes) and fills res. */
typedef void (*nemesis_member_cb)(void *arg, enum nemesis_member_op op,
                                  unsigned pick, int64_t deadline_ns,
                                  struct nemesis_member_result *res);

struct nemesis {
	struct hosts *hosts; /* borrowed */
	FILE *timeline;      /* owned */
	nemesis_leader_cb leader;
	void *leader_arg;
	nemesis_member_cb member; /* NULL: membership steps are skipped */
	void *member_arg;
	/* Outcomes of the membership steps, per operation. */
	unsigned member_counts[NEMESIS_MEMBER_N_OPS][NEMESIS_MEMBER_N_OUTCOMES];
	uint64_t seed; /* the schedule's, to draw faults over members again */
	/* Signals that stop a schedule early (blocked by the caller and
	 * waited for with sigtimedwait); empty: sleeps are plain. */
	sigset_t stop_signals;
	int stopped_by; /* the signal that stopped the schedule, or 0 */
	bool partitioned;
	struct nemesis_grudge active; /* the rules in place */
	char active_fault[32];
	int64_t skew_ms[HOSTS_MAX_NODES + 1]; /* in place, per node */
	bool killed[HOSTS_MAX_NODES + 1];
	unsigned exits_seen[HOSTS_MAX_NODES + 1]; /* unexpected exits logged */
	unsigned faults_started, faults_healed, faults_skipped, errors;
	char err[HOSTS_ERR_LEN];
};

/* Opens the timeline at timeline_path (created or truncated). */
int nemesis_open(struct nemesis *nem, struct hosts *h,
                 const char *timeline_path);
/* Heals what is still in place, closes the timeline. */
void nemesis_close(struct nemesis *nem);

/* Appends an event line to the timeline (and flushes it). */
void nemesis_log(struct nemesis *nem, const char *event, const char *fault,
                 const char *targets, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Puts grudge g in place (healing an earlier partition first). */
int nemesis_partition(struct nemesis *nem, const struct nemesis_grudge *g,
                      const char *fault);
/* Isolates the leader of shard (asks the leader callback). */
int nemesis_partition_leader(struct nemesis *nem, unsigned shard,
                             enum nemesis_client_side side);
int nemesis_heal_partition(struct nemesis *nem);

int nemesis_kill(struct nemesis *nem, unsigned node);
int nemesis_restart(struct nemesis *nem, unsigned node);
int nemesis_pause(struct nemesis *nem, unsigned node);
int nemesis_resume(struct nemesis *nem, unsigned node);
/* Needs the hosts created with faketime. */
int nemesis_skew(struct nemesis *nem, unsigned node, int64_t skew_ms);

/* Runs one membership operation now (the member callback), bounded by
 * hosts time deadline_ns; logged and counted. */
int nemesis_membership(struct nemesis *nem, enum nemesis_member_op op,
                       unsigned pick, int64_t deadline_ns);

/* Heals everything in place: partition, paused, killed, skewed nodes. */
int nemesis_heal_all(struct nemesis *nem);

/* Runs the schedule in real time from now (hosts_now_ns() at the call is
 * its zero): every step applied and healed on time, everything healed at
 * the final phase, which it waits out. Returns 0, or -EINTR when one of
 * stop_signals arrived (everything healed all the same). Failed faults
 * are logged as errors and counted, not fatal. */
int nemesis_run(struct nemesis *nem, const struct nemesis_schedule *s);

#endif
