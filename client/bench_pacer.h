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
/* Closes the poll handle and the timerfd (the struct must live until the
 * loop has run the close). */
void bench_pacer_close(struct bench_pacer *p);

#endif
