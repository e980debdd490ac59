/* bench_pacer: see bench_pacer.h. */
#include "client/bench_pacer.h"

#include <stdio.h>
#include <sys/timerfd.h>
#include <unistd.h>

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct bench_pacer *p = h->data;
	uint64_t expirations;
	(void)status;
	(void)events;
	/* Drain the expiration count; a spurious wake-up reads nothing. */
	if (read(p->fd, &expirations, sizeof expirations) < 0) {
		return;
	}
	p->cb(p);
}

int bench_pacer_init(uv_loop_t *loop, struct bench_pacer *p, bench_pacer_cb cb,
                     void *data)
{
	p->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->fd < 0) {
		return -1;
	}
	p->cb = cb;
	p->data = data;
	if (uv_poll_init(loop, &p->poll, p->fd) != 0) {
		close(p->fd);
		return -1;
	}
	p->poll.data = p;
	uv_poll_start(&p->poll, UV_READABLE, on_poll);
	return 0;
}

void bench_pacer_arm(struct bench_pacer *p, uint64_t at_ns)
{
	struct itimerspec its = {0};
	/* 0 would disarm: the earliest representable time fires at once. */
	if (at_ns == 0) {
		at_ns = 1;
	}
	its.it_value.tv_sec = (time_t)(at_ns / 1000000000u);
	its.it_value.tv_nsec = (long)(at_ns % 1000000000u);
	timerfd_settime(p->fd, TFD_TIMER_ABSTIME, &its, NULL);
}

uint64_t bench_pacer_next(uint64_t due_ns, uint64_t now_ns)
{
	uint64_t soonest = now_ns + BENCH_PACER_MIN_NS;
	return due_ns > soonest ? due_ns : soonest;
}

static void on_closed(uv_handle_t *h)
{
	struct bench_pacer *p = h->data;
	close(p->fd);
	p->fd = -1;
}

void bench_pacer_close(struct bench_pacer *p)
{
	uv_poll_stop(&p->poll);
	uv_close((uv_handle_t *)&p->poll, on_closed);
}
