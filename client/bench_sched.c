/* bench_sched: see bench_sched.h. */
#include "client/bench_sched.h"

#define NS 1000000000ull

int bench_sched_init(struct bench_sched *s, uint64_t rate, uint64_t start_ns,
                     uint64_t limit)
{
	if (rate == 0) {
		return -1;
	}
	s->rate = rate;
	s->start_ns = start_ns;
	s->limit = limit;
	return 0;
}

uint64_t bench_sched_time(const struct bench_sched *s, uint64_t k)
{
	/* 128-bit product: k * 10^9 overflows 64 bits after ~1.8e10 ops. */
	return s->start_ns + (uint64_t)((unsigned __int128)k * NS / s->rate);
}

uint64_t bench_sched_due(const struct bench_sched *s, uint64_t now_ns)
{
	if (now_ns < s->start_ns) {
		return 0;
	}
	/* k is due when floor(k * 10^9 / rate) <= e, i.e. when
	 * k * 10^9 < (e + 1) * rate: ceil((e + 1) * rate / 10^9) of them. */
	unsigned __int128 e = now_ns - s->start_ns;
	unsigned __int128 n = ((e + 1) * s->rate + NS - 1) / NS;
	return n > s->limit ? s->limit : (uint64_t)n;
}

uint64_t bench_sched_wait(const struct bench_sched *s, uint64_t k,
                          uint64_t now_ns)
{
	uint64_t t = bench_sched_time(s, k);
	return t > now_ns ? t - now_ns : 0;
}

uint64_t bench_sched_latency_us(const struct bench_sched *s, uint64_t k,
                                uint64_t done_ns)
{
	uint64_t t = bench_sched_time(s, k);
	return done_ns > t ? (done_ns - t) / 1000 : 0;
}
