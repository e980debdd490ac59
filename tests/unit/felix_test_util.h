/* Helpers shared by the Felix codec tests: files, hex, vector directories
 * and a seeded PRNG. Header-only (static inline) so each test stays one
 * program. */
#ifndef TESTS_UNIT_FELIX_TEST_UTIL_H
#define TESTS_UNIT_FELIX_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shared vectors (from the public Felix repository). */
static inline void ftu_shared_dir(char *out, size_t n)
{
	const char *root = getenv("LS_SHARED_DIR");
	if (root == NULL || root[0] == '\0') {
		root = LS_SHARED_DIR;
	}
	snprintf(out, n, "%s/vectors/felix", root);
}

/* Our own vectors, in the source tree. */
static inline void ftu_own_dir(char *out, size_t n)
{
	snprintf(out, n, "%s/tests/vectors/felix", LS_ABS_SRCDIR);
}

/* Read a whole file into a malloc'd, NUL-terminated buffer. */
static inline uint8_t *ftu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;
	if (f == NULL) {
		return NULL;
	}
	for (;;) {
		if (cap - n < 4096) {
			uint8_t *nb = realloc(buf, cap + 65536);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		if (r == 0) {
			break;
		}
		n += r;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static inline int ftu_hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

/* Decode hex (whitespace ignored) into a malloc'd buffer; NULL if bad. */
static inline uint8_t *ftu_unhex(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	uint8_t *out = malloc(n / 2 + 1);
	int hi = -1;
	if (out == NULL) {
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		int v;
		if (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' ||
		    s[i] == '\t') {
			continue;
		}
		v = ftu_hexval(s[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		if (hi < 0) {
			hi = v;
		} else {
			out[o++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	if (hi >= 0) {
		free(out);
		return NULL;
	}
	*len = o;
	return out;
}

/* splitmix64: a deterministic PRNG for property tests. */
struct ftu_rng {
	uint64_t s;
};

static inline uint64_t ftu_next(struct ftu_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint64_t ftu_below(struct ftu_rng *r, uint64_t n)
{
	return n == 0 ? 0 : ftu_next(r) % n;
}

/* A u64 biased towards the edges (0, 1, 2^31, 2^32, 2^63, 2^64-1). */
static inline uint64_t ftu_u64(struct ftu_rng *r)
{
	static const uint64_t edges[] = {0,
	                                 1,
	                                 0x7fffffffull,
	                                 0xffffffffull,
	                                 0x100000000ull,
	                                 0x7fffffffffffffffull,
	                                 0x8000000000000000ull,
	                                 0xfffffffffffffffeull,
	                                 0xffffffffffffffffull};
	switch (ftu_below(r, 3)) {
	case 0:
		return edges[ftu_below(r, sizeof edges / sizeof edges[0])];
	case 1:
		return ftu_below(r, 1000);
	default:
		return ftu_next(r);
	}
}

#endif /* TESTS_UNIT_FELIX_TEST_UTIL_H */
