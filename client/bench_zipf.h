/* bench_zipf: a Zipf-distributed choice of key for lodebench: rank k
 * (1..n) with probability proportional to 1 / k^s, in constant time and
 * memory whatever n (rejection-inversion, W. Hörmann and G. Derflinger,
 * "Rejection-inversion to generate variates from monotone discrete
 * distributions", 1996). Pure arithmetic: the caller passes uniform
 * random bits. */
#ifndef LS_CLIENT_BENCH_ZIPF_H
#define LS_CLIENT_BENCH_ZIPF_H

#include <stdint.h>

struct bench_zipf {
	uint64_t n; /* ranks 1..n */
	double s;   /* exponent, > 0 */
	double h_x1, h_n, sv;
};

/* Uniform 64-bit random values. */
typedef uint64_t (*bench_zipf_rand_cb)(void *data);

/* 0, or -1 when n is 0 or s is not a positive finite number. */
int bench_zipf_init(struct bench_zipf *z, uint64_t n, double s);
/* A rank in 0..n-1 (0 the most frequent), drawing from `rnd`. */
uint64_t bench_zipf_next(const struct bench_zipf *z, bench_zipf_rand_cb rnd,
                         void *data);

#endif
