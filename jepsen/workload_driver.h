/* Fault-testing workloads: clients that drive a cluster while the nemesis
 * breaks it, record what they did as a history (jepsen/README.md, `lines`
 * format) and hand it to the matching checker of libjepsen.
 *
 *   register    FSNP GET / SET / CAS on a handful of keys per shard;
 *               checked linearizable (lincheck)
 *   stream      Felix acknowledged publishes to a 4-shard stream, and
 *               subscribers reading from earliest / recent offsets;
 *               checked by streamcheck (+ setcheck for acked records no
 *               read saw: Felix acks carry no offset)
 *   counter     Felix counter_add / counter_get; checked by countercheck
 *   queue       Felix consumer group: publishes, group_poll, group_ack;
 *               checked by queuecheck
 *   idempotent  Felix publish_idempotent with re-sends under the same
 *               sequence, and a final read; checked by oncecheck
 *   flow        FerricFlow workers over FSNP: create, claim, extend,
 *               complete, retry, and a final read of every flow;
 *               checked by flowcheck
 *
 * A workload runs on a thread of its own, which moves into the client
 * namespace and runs a libuv loop with one client per logical process,
 * spread over every node (the nodes forward what they do not lead).
 * Processes invoke operations until `ops_end_ms`, then the workload runs
 * its final reads (on a healed cluster) and gives up on them at `end_ms`.
 * The history is written to the run directory when the workload is done
 * (also when it is stopped early).
 *
 * The harness's main thread keeps the hosts and the nemesis; it calls
 * wl_start, then wl_join (or wl_stop first on a signal), then wl_check. */
#ifndef LS_JEPSEN_WORKLOAD_DRIVER_H
#define LS_JEPSEN_WORKLOAD_DRIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "jepsen/hosts.h"
#include "jepsen/workload_hist.h"

struct wl_node_info {
	unsigned id;
	char addr[HOSTS_ADDR_LEN];
	char felix_ca[HOSTS_PATH_LEN]; /* the node's Felix certificate */
};

struct wl_config {
	const char *client_ns; /* namespace the clients run in */
	unsigned n_nodes;      /* the cluster's size at the start */
	/* Hosts the cluster may use, ids 1..n_slots (0: n_nodes): with a
	 * membership nemesis, spares join and members leave. */
	unsigned n_slots;
	struct wl_node_info nodes[HOSTS_MAX_NODES]; /* by id - 1 */
	/* Bit (1u << id) per node clients may use now, kept by the harness
	 * (struct hosts endpoints); NULL: nodes 1..n_nodes, always. */
	const atomic_uint *endpoints;
	int64_t t0_ns;      /* the run's CLOCK_MONOTONIC origin */
	uint64_t seed;      /* drives every random choice of the clients */
	int64_t ops_end_ms; /* no operation is invoked after this */
	int64_t end_ms;     /* final reads give up after this */
	unsigned shards;    /* data groups of the cluster (--shards) */
	unsigned procs;     /* client processes; 0: the workload's default */
	unsigned op_timeout_ms; /* 0: 2000 */
	const char *dir;        /* run directory: history files go there */
};

struct wl_workload;

/* The workload called `name`, or NULL. */
const struct wl_workload *wl_find(const char *name);
/* Every workload's name, NULL-terminated. */
extern const char *const wl_names[];

const char *wl_name(const struct wl_workload *w);
/* Why the workload cannot run in this build, or NULL. */
const char *wl_missing(const struct wl_workload *w);
/* The checker(s) it uses, for summaries ("linearizable", ...). */
const char *wl_checker(const struct wl_workload *w);
/* The scopes the nodes must have registered at start (a --scopes-file
 * body, see docs/felix.md), or NULL. */
const char *wl_scopes(const struct wl_workload *w);
/* More flags every node needs (NULL-terminated, static), or NULL. */
const char *const *wl_args(const struct wl_workload *w);

struct wl_run;

/* Starts the workload thread. 0, or -errno with why in err. */
int wl_start(struct wl_run **out, const struct wl_workload *w,
             const struct wl_config *cfg, char *err, size_t cap);

/* Asks the workload to stop now (no final reads); async-signal-unsafe,
 * call from the main thread. */
void wl_stop(struct wl_run *r);

/* Waits for the workload thread, at most until `end_ms` of the run plus
 * `grace_ms`. 0 once the history is written; -ETIMEDOUT if the thread is
 * stuck (its history is written all the same if it got that far: see
 * wl_history_written); -EIO if the history could not be written. */
int wl_join(struct wl_run *r, unsigned grace_ms);

bool wl_history_written(const struct wl_run *r);

/* Counts of the recorded events by type, and a line about the run
 * ("12 processes on 3 nodes, ..."). Valid after wl_join. */
void wl_stats(const struct wl_run *r, uint64_t counts[WL_N_TYPES], char *note,
              size_t cap);

/* Frees the run (after wl_join returned 0; a stuck thread's run is
 * leaked on purpose: the thread may still touch it). */
void wl_free(struct wl_run *r);

/* --- Checking ------------------------------------------------------------ */

enum wl_verdict_code {
	WL_VALID = 0,     /* every checker found nothing wrong */
	WL_INVALID = 1,   /* anomalies, or not linearizable */
	WL_UNCHECKED = 2, /* the history could not be read or checked */
	WL_UNKNOWN = 3,   /* the linearizability search hit its limit */
};

struct wl_verdict {
	enum wl_verdict_code code;
	size_t anomalies; /* counted anomalies over every checker */
	char text[1024];  /* one line: "valid", "not linearizable: ...",
	                     "invalid: 2 lost, 1 duplicate" */
};

/* Runs the workload's checkers on the history files in `dir` and writes
 * each checker's verdict and anomalies to `out` (verdicts.txt).
 * `max_ms` bounds the linearizability search (0: none). */
void wl_check(const struct wl_workload *w, const char *dir, uint64_t max_ms,
              FILE *out, struct wl_verdict *v);

#endif
