/* Key helpers (see keys.h and docs/storage.md). */
#include "store/keys.h"

#include <string.h>

int key_cmp(const struct sbuf *a, const struct sbuf *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->p, b->p, n) : 0;

	if (c != 0) {
		return c;
	}
	return a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

uint64_t key_score_bits(double d)
{
	uint64_t u;

	if (d == 0) {
		d = 0; /* -0.0 sorts and compares as 0 */
	}
	memcpy(&u, &d, sizeof u);
	return (u >> 63) ? ~u : u | (UINT64_C(1) << 63);
}

double key_score_from_bits(uint64_t u)
{
	double d;

	u = (u >> 63) ? u & ~(UINT64_C(1) << 63) : ~u;
	memcpy(&d, &u, sizeof d);
	return d;
}
