/* bench_sched: the schedule of an open-loop load. Operation k (0-based) is
 * due at start + k * 10^9 / rate nanoseconds, whatever the replies do;
 * its latency is measured from that time, so a stalled server shows in
 * the tail instead of slowing the load down (no coordinated omission).
 * Pure integer arithmetic, no clock: callers pass the time. */
#ifndef LS_CLIENT_BENCH_SCHED_H
#define LS_CLIENT_BENCH_SCHED_H

#include <stdint.h>

struct bench_sched {
	uint64_t start_ns;
	uint64_t rate;  /* operations per second, > 0 */
	uint64_t limit; /* operations in all; UINT64_MAX for no limit */
};

/* 0, or -1 when rate is 0. */
int bench_sched_init(struct bench_sched *s, uint64_t rate, uint64_t start_ns,
                     uint64_t limit);
/* The time operation k is due (ns, same clock as start_ns). */
uint64_t bench_sched_time(const struct bench_sched *s, uint64_t k);
/* How many operations are due at `now_ns` (those with time <= now),
 * at most the limit. */
uint64_t bench_sched_due(const struct bench_sched *s, uint64_t now_ns);
/* Nanoseconds from now until operation k is due; 0 when already due. */
uint64_t bench_sched_wait(const struct bench_sched *s, uint64_t k,
                          uint64_t now_ns);
/* The latency of operation k completed at done_ns, in whole microseconds
 * from its due time (0 if it completed before it was due). */
uint64_t bench_sched_latency_us(const struct bench_sched *s, uint64_t k,
                                uint64_t done_ns);

#endif
