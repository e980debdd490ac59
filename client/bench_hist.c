/* bench_hist: see bench_hist.h. */
#include "client/bench_hist.h"

#include <stdlib.h>

#define SUB_BITS 10u
#define SUB_BUCKETS (1u << SUB_BITS)
#define TAIL_BUCKETS ((64u - BENCH_HIST_EXACT_BITS) * SUB_BUCKETS)

int bench_hist_init(struct bench_hist *h)
{
	h->exact = calloc(BENCH_HIST_EXACT_US, sizeof *h->exact);
	h->tail = calloc(TAIL_BUCKETS, sizeof *h->tail);
	h->count = 0;
	h->max_us = 0;
	h->sum_us = 0;
	return h->exact != NULL && h->tail != NULL ? 0 : -1;
}

void bench_hist_free(struct bench_hist *h)
{
	free(h->exact);
	free(h->tail);
	h->exact = NULL;
	h->tail = NULL;
}

void bench_hist_add(struct bench_hist *h, uint64_t us)
{
	h->count++;
	h->sum_us += us;
	if (us > h->max_us) {
		h->max_us = us;
	}
	if (us < BENCH_HIST_EXACT_US) {
		h->exact[us]++;
		return;
	}
	unsigned e = BENCH_HIST_EXACT_BITS; /* the top bit's position */
	while (e < 63u && (us >> (e + 1)) != 0) {
		e++;
	}
	unsigned m = (unsigned)(us >> (e - SUB_BITS)) & (SUB_BUCKETS - 1);
	h->tail[(e - BENCH_HIST_EXACT_BITS) * SUB_BUCKETS + m]++;
}

void bench_hist_merge(struct bench_hist *to, const struct bench_hist *from)
{
	for (uint64_t i = 0; i < BENCH_HIST_EXACT_US; i++) {
		to->exact[i] += from->exact[i];
	}
	for (unsigned i = 0; i < TAIL_BUCKETS; i++) {
		to->tail[i] += from->tail[i];
	}
	to->count += from->count;
	to->sum_us += from->sum_us;
	if (from->max_us > to->max_us) {
		to->max_us = from->max_us;
	}
}

uint64_t bench_hist_at(const struct bench_hist *h, uint64_t rank)
{
	uint64_t seen = 0;
	if (rank >= h->count) {
		return 0;
	}
	if (rank == h->count - 1) {
		return h->max_us; /* exact, even in the tail */
	}
	for (uint64_t us = 0; us < BENCH_HIST_EXACT_US; us++) {
		seen += h->exact[us];
		if (seen > rank) {
			return us;
		}
	}
	for (unsigned i = 0; i < TAIL_BUCKETS; i++) {
		seen += h->tail[i];
		if (seen > rank) {
			unsigned e = BENCH_HIST_EXACT_BITS + i / SUB_BUCKETS;
			uint64_t m = SUB_BUCKETS + i % SUB_BUCKETS;
			return m << (e - SUB_BITS);
		}
	}
	return 0;
}

uint64_t bench_hist_quantile(const struct bench_hist *h, uint32_t ppm)
{
	if (h->count == 0) {
		return 0;
	}
	if (ppm >= 1000000u) {
		return h->max_us;
	}
	/* count * ppm fits: count < 2^44 in any run we can make. */
	uint64_t rank =
	    (uint64_t)((unsigned __int128)h->count * ppm / 1000000u);
	return bench_hist_at(h, rank);
}
