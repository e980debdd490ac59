/* bench_hist: the latency histogram of lodebench. Whole microseconds,
 * counted exactly below BENCH_HIST_EXACT_US (a quantile there is what
 * sorting every sample would give) and above it in log-scaled buckets of
 * 1024 per power of two (a quantile that far out is its bucket's lower
 * bound, within 0.1 %); the maximum is kept exactly. Pure code: no clock,
 * no I/O. */
#ifndef LS_CLIENT_BENCH_HIST_H
#define LS_CLIENT_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_EXACT_BITS 20u
#define BENCH_HIST_EXACT_US (1ull << BENCH_HIST_EXACT_BITS) /* ~1.05 s */

struct bench_hist {
	uint64_t *exact; /* owned, BENCH_HIST_EXACT_US counts (calloc'd: only
	                    the pages of observed values are touched) */
	uint64_t *tail;  /* owned, log-scaled buckets above */
	uint64_t count;
	uint64_t max_us;
	uint64_t sum_us;
};

/* Quantiles in parts per million (p50 = 500000, p999 = 999000). */
#define BENCH_P50 500000u
#define BENCH_P90 900000u
#define BENCH_P99 990000u
#define BENCH_P999 999000u

/* 0, or -1 when out of memory (then bench_hist_free is still safe). */
int bench_hist_init(struct bench_hist *h);
void bench_hist_free(struct bench_hist *h);
void bench_hist_add(struct bench_hist *h, uint64_t us);
/* Adds every sample of `from` into `to`. */
void bench_hist_merge(struct bench_hist *to, const struct bench_hist *from);
/* The sample of 0-based rank `rank` in ascending order (what a sorted
 * array of every sample holds at that index); 0 when rank >= count. */
uint64_t bench_hist_at(const struct bench_hist *h, uint64_t rank);
/* The quantile `ppm` (parts per million): the sample of rank
 * floor(count * ppm / 10^6), the last one at 10^6; 0 when empty. */
uint64_t bench_hist_quantile(const struct bench_hist *h, uint32_t ppm);

#endif
