/* bench_pacer: wakes a libuv loop at an absolute CLOCK_MONOTONIC time with
 * microsecond precision (a timerfd under a uv_poll), where libuv's own
 * timers round to milliseconds: open-loop loads send each operation at its
 * due time instead of up to a millisecond late. uv_hrtime() reads the
 * same clock. */
#ifndef LS_CLIENT_BENCH_PACER_H
#define LS_CLIENT_BENCH_PACER_H

#include <stdint.h>
#include <uv.h>

struct bench_pacer;

typedef void (*bench_pacer_cb)(struct bench_pacer *p);

struct bench_pacer {
	uv_poll_t poll; /* poll.data = this */
	int fd;
	bench_pacer_cb cb;
	void *data; /* the owner's */
};

/* 0, or -1 with errno when the timerfd cannot be made. */
int bench_pacer_init(uv_loop_t *loop, struct bench_pacer *p, bench_pacer_cb cb,
                     void *data);
/* Fires cb once at `at_ns` (at once if already past); re-arming replaces
 * the previous time. */
void bench_pacer_arm(struct bench_pacer *p, uint64_t at_ns);
/* Wake-ups at most every BENCH_PACER_MIN_NS: at high rates one wake-up
 * sends every operation due in that span together (in one write per
 * connection) instead of costing the client a loop turn and a write per
 * operation; an operation sent up to that late still has its latency
 * measured from its due time. */
#define BENCH_PACER_MIN_NS 100000u

/* When to wake for an operation due at `due_ns`: then, or
 * BENCH_PACER_MIN_NS after `now_ns` if that is later. */
uint64_t bench_pacer_next(uint64_t due_ns, uint64_t now_ns);
/* Closes the poll handle and the timerfd (the struct must live until the
 * loop has run the close). */
void bench_pacer_close(struct bench_pacer *p);

#endif
