/* The node's recent history for the dashboard: every second a uv_timer on
 * the reactor samples a small, fixed set of series into a ring of
 * HISTORY_SAMPLES samples (ten minutes at one per second):
 *  - per protocol, requests/s and errors/s from the counters the rooms
 *    already keep in the metrics registry (FSNP, Felix), requests/s and
 *    mean latency of admin HTTP (counted by admin_http.c);
 *  - Raft: entries committed/s over this node's replicas and the mean
 *    fsync time of the log writer (from shards_status_json);
 *  - which members this node sees up (ids 1..64, as a bit mask).
 *
 * The ring and the rate arithmetic are pure (history_ring_*,
 * history_rate); the sampler reads the live node. Everything runs on the
 * reactor thread. */
#ifndef LS_NODE_ADMIN_HISTORY_H
#define LS_NODE_ADMIN_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define HISTORY_SAMPLES 600
#define HISTORY_INTERVAL_MS 1000

/* The sampled series; history_series_name() names them. */
enum history_series {
	HISTORY_FSNP_RPS = 0,
	HISTORY_FSNP_ERRS,
	HISTORY_FELIX_RPS,
	HISTORY_FELIX_ERRS,
	HISTORY_ADMIN_RPS,
	HISTORY_ADMIN_LAT_MS,
	HISTORY_RAFT_COMMITS,
	HISTORY_RAFT_SYNC_MS,
	HISTORY_NODES_UP,
	HISTORY_N_SERIES,
};

/* One sample; a value that could not be measured is NaN. */
struct history_sample {
	uint64_t t_ms; /* wall clock, ms since the epoch */
	double v[HISTORY_N_SERIES];
	uint64_t up_mask;    /* bit id-1: member `id` seen up */
	uint64_t known_mask; /* bit id-1: member `id` known */
};

/* A fixed-capacity ring, oldest sample overwritten first. */
struct history_ring {
	struct history_sample *s; /* owned */
	size_t cap, head, n;      /* head: where the next sample goes */
};

int history_ring_init(struct history_ring *r, size_t cap);
void history_ring_free(struct history_ring *r);
void history_ring_push(struct history_ring *r, const struct history_sample *s);
/* Sample i, 0 the oldest held; NULL past the end. */
const struct history_sample *history_ring_at(const struct history_ring *r,
                                             size_t i);
static inline size_t history_ring_len(const struct history_ring *r)
{
	return r->n;
}

/* Per second rate of a counter that went from `prev` to `cur` in `dt_ms`;
 * NaN when dt_ms is 0 or the counter went back (a restart). */
double history_rate(uint64_t prev, uint64_t cur, uint64_t dt_ms);
/* Mean of a sum/count pair over an interval: (dsum / dcount) * scale, NaN
 * when nothing was counted or a counter went back. */
double history_mean(uint64_t sum0, uint64_t sum1, uint64_t n0, uint64_t n1,
                    double scale);

const char *history_series_name(enum history_series s);

struct shards;
struct metrics;
struct admin_http;

/* Raw counter values read at one instant. */
struct history_counters {
	bool valid;
	uint64_t mono_ms;
	uint64_t fsnp_req, fsnp_err, felix_req, felix_err;
	uint64_t admin_req, admin_us;
	uint64_t raft_commit, raft_syncs, raft_sync_us;
};

struct history {
	uv_loop_t *loop;
	uv_timer_t timer; /* timer.data = this */
	struct shards *shards;
	const struct metrics *metrics;
	const struct admin_http *admin;
	struct history_ring ring;
	struct history_counters last;
	void (*close_cb)(void *data);
	void *close_data;
};

/* Starts sampling; returns 0, or -1 when out of memory (`*out` NULL). */
int history_start(struct history **out, uv_loop_t *loop, struct shards *shards,
                  const struct metrics *metrics,
                  const struct admin_http *admin);

/* Takes one sample now (the timer calls it; tests may too). */
void history_sample_now(struct history *h);

/* Stops the timer; the module is freed in its close callback, after which
 * `cb` (may be NULL) runs. */
void history_close(struct history *h, void (*cb)(void *data), void *data);

#endif
