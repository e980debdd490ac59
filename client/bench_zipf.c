/* bench_zipf: Zipf ranks by rejection-inversion (bench_zipf.h). The
 * continuous hat h(x) = x^-s is integrated and inverted in closed form;
 * a draw from its integral between 0.5 and n + 0.5 is rounded to a rank
 * and accepted if it falls under the rank's own mass, so each rank k
 * comes out with probability k^-s / sum_j j^-s. */
#include "client/bench_zipf.h"

#include <math.h>

/* log1p(x) / x, continuous at 0. */
static double helper1(double x)
{
	return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x / 3);
}

/* expm1(x) / x, continuous at 0. */
static double helper2(double x)
{
	return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x / 3);
}

/* The integral of the hat: (x^(1-s) - 1) / (1 - s), or log x at s = 1. */
static double h_integral(const struct bench_zipf *z, double x)
{
	double lx = log(x);
	return helper2((1 - z->s) * lx) * lx;
}

static double h(const struct bench_zipf *z, double x)
{
	return exp(-z->s * log(x));
}

static double h_integral_inverse(const struct bench_zipf *z, double x)
{
	double t = x * (1 - z->s);
	if (t < -1) {
		t = -1; /* rounding at the far end only */
	}
	return exp(helper1(t) * x);
}

int bench_zipf_init(struct bench_zipf *z, uint64_t n, double s)
{
	if (n == 0 || !(s > 0) || !isfinite(s)) {
		return -1;
	}
	z->n = n;
	z->s = s;
	z->h_x1 = h_integral(z, 1.5) - 1;
	z->h_n = h_integral(z, (double)n + 0.5);
	z->sv = 2 - h_integral_inverse(z, h_integral(z, 2.5) - h(z, 2));
	return 0;
}

uint64_t bench_zipf_next(const struct bench_zipf *z, bench_zipf_rand_cb rnd,
                         void *data)
{
	for (;;) {
		/* 53 random bits: a uniform double in [0, 1). */
		double u01 = (double)(rnd(data) >> 11) * 0x1.0p-53;
		double u = z->h_n + u01 * (z->h_x1 - z->h_n);
		double x = h_integral_inverse(z, u);
		double kd = floor(x + 0.5);
		uint64_t k;
		if (kd < 1) {
			k = 1;
		} else if (kd > (double)z->n) {
			k = z->n;
		} else {
			k = (uint64_t)kd;
		}
		if ((double)k - x <= z->sv ||
		    u >= h_integral(z, (double)k + 0.5) - h(z, (double)k)) {
			return k - 1;
		}
	}
}
