/* Key helpers (see keys.h and docs/storage.md). */
#include "store/keys.h"

#include <string.h>

int key_cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;

	if (c != 0) {
		return c;
	}
	return al < bl ? -1 : al > bl ? 1 : 0;
}

int key_cmp(const struct sbuf *a, const struct sbuf *b)
{
	return key_cmp_bytes(a->p, a->len, b->p, b->len);
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
