/* Firing FerricFlow schedules (flow/flow_schedule.h) over the shards:
 * the passes behind FLOW.SCHEDULE.FIRE_DUE and FLOW.SCHEDULE.FIRE, and
 * the built-in scheduler that runs one on every group this node leads.
 *
 * A pass over one group: a read of its due schedules and its outbox of
 * targets not yet created (FLOW_SCHED_KIND_SCAN); for each schedule whose
 * overlap policy needs it, a FLOW.GET of its previous target in the
 * target's group; the plans (flow_sched_plan: next occurrence, catch-up,
 * overlap; cron in its zone) proposed as one FLOW_SCHED_KIND_RECORD
 * command, which apply accepts only for schedules still at the version
 * planned against; then every outbox entry's target created with an
 * idempotent FLOW.CREATE in the group its id routes to, and the entries
 * created removed (FLOW_SCHED_KIND_OUTBOX_DONE). A pass that stops
 * half-way (a leader change, a crash) leaves the outbox for the next one:
 * nothing is lost, and the deterministic target ids and idempotent
 * creates mean nothing is doubled.
 *
 * The built-in scheduler ticks every FLOW_SCHED_TICK_MS and starts a pass
 * (at most FLOW_SCHED_PASS_LIMIT schedules) on each group it leads that
 * has none in flight: bounded work per turn, one pass per group. */
#ifndef LS_NODE_FLOW_SCHED_H
#define LS_NODE_FLOW_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct shards;
struct log;

#define FLOW_SCHED_TICK_MS 100
#define FLOW_SCHED_PASS_LIMIT 64
/* A pass reads and fires a group's due schedules in waves of at most
 * FLOW_SCHED_WAVE (as FerricStore claims them), the next wave read once
 * the last is recorded; at most FLOW_SCHED_WAVES_MAX waves a group. */
#define FLOW_SCHED_WAVE 16
/* FIRE plans again this many times when a concurrent fire (the built-in
 * scheduler's) changed the schedule first. */
#define FLOW_SCHED_FIRE_TRIES 3
#define FLOW_SCHED_WAVES_MAX 64
/* How far ahead a wake pass looks for held occurrences. */
#define FLOW_SCHED_WAKE_HORIZON_MS 600000

/* A pass's end: status 0 with the reply value (an FSNP typed value:
 * FIRE_DUE's counts map, or FIRE's outcome map), or an FSNP status (1, 4)
 * with the error text in `msg`. */
typedef void (*flow_sched_done_cb)(void *data, int status, const uint8_t *value,
                                   size_t len, const char *msg);

struct flow_sched_args {
	uint64_t skew;  /* FerricFlow clock skew bound */
	int64_t now_ms; /* -1: the leader's clock */
	uint32_t limit; /* FIRE_DUE: schedules at most */
	uint32_t first_group;
	uint32_t n_groups; /* groups visited, from first_group on */
	/* FIRE: one schedule (NULL for FIRE_DUE) and its fire time (-1:
	 * now). */
	const uint8_t *id;
	size_t id_len;
	int64_t fire_at_ms;
	/* A wake pass: only queue_after_previous occurrences held until a
	 * retry within FLOW_SCHED_WAKE_HORIZON_MS, fired if their previous
	 * target has ended (left held, untouched, if not). */
	bool wake;
};

/* Starts a pass; `cb` runs exactly once (perhaps before this returns).
 * 0, or -1 (out of memory: `cb` will not run). */
int flow_sched_pass(struct shards *s, const struct log *log,
                    const struct flow_sched_args *a, flow_sched_done_cb cb,
                    void *data);

struct flow_scheduler;

/* The built-in scheduler on `loop`. */
int flow_scheduler_start(struct flow_scheduler **out, uv_loop_t *loop,
                         struct shards *s, const struct log *log,
                         uint64_t skew);
/* A Flow write succeeded here (data: the scheduler): at its next tick the
 * scheduler runs a wake pass on each group it leads that holds a
 * queue_after_previous occurrence, so that a target's end releases the
 * occurrence at once instead of at its retry. The retry stays the
 * fallback for ends this node does not see. */
void flow_scheduler_wake(void *data);
/* Stops ticking; the scheduler is freed once its passes have ended. */
void flow_scheduler_stop(struct flow_scheduler *fs);

#endif
