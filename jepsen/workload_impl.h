/* What the workloads (workload_register.c, workload_stream.c,
 * workload_counter.c) share with the driver (workload_driver.c): the
 * context of a running workload on its loop thread, and the table entry
 * each workload provides.
 *
 * Life of a workload on the loop thread:
 *   start(x)            open clients, schedule the first operations
 *   phase(x, OPS_OVER)  at ops_end_ms: invoke nothing new; once what is in
 *                       flight completed, run the final reads, then call
 *                       wl_ctx_done(x)
 *   phase(x, DEADLINE)  at end_ms (or when stopped): give up on what is
 *                       pending (it stays in the history as invocations
 *                       without completion, i.e. indeterminate) and call
 *                       wl_ctx_done(x)
 *   write(x)            (inside wl_ctx_done) write the history file(s);
 *                       events recorded afterwards are dropped
 *   close(x)            close every client and handle; the loop then runs
 *                       until they are gone, and the thread ends
 *   destroy(x)          free the workload's state (after the loop ended) */
#ifndef LS_JEPSEN_WORKLOAD_IMPL_H
#define LS_JEPSEN_WORKLOAD_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "client/fsnp_client.h"
#include "jepsen/anomaly.h"
#include "jepsen/history.h"
#include "jepsen/nemesis.h"
#include "jepsen/workload_driver.h"
#include "jepsen/workload_hist.h"

enum wl_phase {
	WL_PHASE_OPS_OVER,
	WL_PHASE_DEADLINE,
};

struct wl_ctx {
	const struct wl_config *cfg;
	uv_loop_t *loop;
	struct wl_hist hist;
	struct nemesis_rng rng;
	bool ops_over;  /* invoke nothing new */
	bool deadline;  /* final reads gave up (or stopped) */
	bool stopped;   /* stopped by the harness (signal) */
	bool done;      /* wl_ctx_done ran */
	bool written;   /* the history files exist */
	int write_rc;   /* what writing them returned */
	void *impl;     /* the workload's state */
	char note[256]; /* a line about the run for the summary */
	const struct wl_workload *w;
	struct wl_run *run;
};

typedef int (*wl_check_fn)(const struct jepsen_history *h,
                           struct jepsen_anomalies *out, char *err,
                           size_t errlen);

/* A history file and the checker that reads it. */
struct wl_check_file {
	const char *file;    /* relative to the run directory */
	const char *checker; /* "linearizable" or a jepsen/check name */
	wl_check_fn fn;      /* NULL: linearizable */
};

struct wl_workload {
	const char *name;
	const char *missing;     /* why not available, or NULL */
	const char *scopes;      /* --scopes-file body, or NULL */
	const char *const *args; /* more node flags, NULL-terminated, or NULL */
	const char *checker;     /* for summaries */
	struct wl_check_file checks[2];
	int (*start)(struct wl_ctx *x);
	void (*phase)(struct wl_ctx *x, enum wl_phase p);
	int (*write)(struct wl_ctx *x);
	void (*close)(struct wl_ctx *x);
	void (*destroy)(struct wl_ctx *x);
};

extern const struct wl_workload wl_register;
extern const struct wl_workload wl_stream;
extern const struct wl_workload wl_counter;
extern const struct wl_workload wl_queue;
extern const struct wl_workload wl_idempotent;
extern const struct wl_workload wl_watch;
extern const struct wl_workload wl_flow;

/* The workload is finished: writes the history, then closes the clients.
 * Idempotent. */
void wl_ctx_done(struct wl_ctx *x);

/* Milliseconds since the run's origin. */
int64_t wl_ctx_ms(struct wl_ctx *x);

/* Uniform in [lo, hi]. */
uint64_t wl_rand(struct wl_ctx *x, uint64_t lo, uint64_t hi);

/* "<dir>/<name>" into buf. */
void wl_ctx_path(const struct wl_ctx *x, const char *name, char *buf,
                 size_t cap);

/* Writes history h to "<dir>/<name>" (wl_hist_write). */
int wl_ctx_write(const struct wl_ctx *x, const struct wl_hist *h,
                 const char *name);

/* Node `id`'s address (1-based). */
const struct wl_node_info *wl_ctx_node(const struct wl_ctx *x, unsigned id);

/* The node that the i-th process (or shard) uses: the processes spread
 * over the nodes clients may use now (the endpoints) in turn. The answer
 * changes when membership does. */
unsigned wl_ctx_home(const struct wl_ctx *x, unsigned i);

/* Node ids run 1..wl_ctx_slots(x). */
unsigned wl_ctx_slots(const struct wl_ctx *x);

/* Whether clients may use node id now; how many such nodes there are. */
bool wl_ctx_is_endpoint(const struct wl_ctx *x, unsigned id);
unsigned wl_ctx_n_endpoints(const struct wl_ctx *x);

/* The endpoint after node id in id order (wrapping), or id when there is
 * none other. */
unsigned wl_ctx_next_endpoint(const struct wl_ctx *x, unsigned id);

/* The op timeout. */
unsigned wl_ctx_timeout(const struct wl_ctx *x);

/* Opens an FSNP client named `name` to node id's FSNP port with the op
 * timeout and 3 attempts; cb gets `data` when it is ready or failed. On
 * failure *out is NULL, x->note says why and -EIO is returned. */
int wl_ctx_fsnp_open(struct wl_ctx *x, unsigned id, const char *name,
                     fsnp_client_ready_cb cb, void *data,
                     struct fsnp_client **out);

/* Closes a uv handle unless it is closing already (the close callback
 * does nothing: handles live in the workload's state, freed by
 * destroy once the loop has ended). */
void wl_close_handle(uv_handle_t *h);

/* Stops a timer and closes it (wl_close_handle). */
void wl_close_timer(uv_timer_t *t);

#endif
