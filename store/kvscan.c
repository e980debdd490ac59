/* Redis globs and SCAN cursors; see kvscan.h. */
#include "store/kvscan.h"

#include <string.h>

/* Redis's nesting bound on '*' recursion. */
#define GLOB_NESTING_MAX 1000

/* Redis compares pattern and key bytes as (signed) chars. */
static int sch(uint8_t c)
{
	return (int)(signed char)c;
}

static bool glob_impl(const uint8_t *p, size_t plen, const uint8_t *s,
                      size_t slen, bool *skip_longer, int nesting)
{
	if (nesting > GLOB_NESTING_MAX) {
		return false;
	}
	while (plen > 0 && slen > 0) {
		switch (p[0]) {
		case '*':
			while (plen >= 2 && p[1] == '*') {
				p++;
				plen--;
			}
			if (plen == 1) {
				return true;
			}
			while (slen > 0) {
				if (glob_impl(p + 1, plen - 1, s, slen,
				              skip_longer, nesting + 1)) {
					return true;
				}
				if (*skip_longer) {
					return false;
				}
				s++;
				slen--;
			}
			/* No match for the rest anywhere in the rest of the
			 * string: a longer match of an earlier '*' cannot
			 * help either. */
			*skip_longer = true;
			return false;
		case '?':
			s++;
			slen--;
			break;
		case '[': {
			bool neg, match = false;
			p++;
			plen--;
			neg = plen > 0 && p[0] == '^';
			if (neg) {
				p++;
				plen--;
			}
			for (;;) {
				if (plen >= 2 && p[0] == '\\') {
					p++;
					plen--;
					if (p[0] == s[0]) {
						match = true;
					}
				} else if (plen == 0) {
					/* unterminated: as Redis, step back
					 * so the step below ends the pattern */
					p--;
					plen++;
					break;
				} else if (p[0] == ']') {
					break;
				} else if (plen >= 3 && p[1] == '-') {
					int lo = sch(p[0]), hi = sch(p[2]);
					int c = sch(s[0]);
					if (lo > hi) {
						int t = lo;
						lo = hi;
						hi = t;
					}
					p += 2;
					plen -= 2;
					if (c >= lo && c <= hi) {
						match = true;
					}
				} else if (p[0] == s[0]) {
					match = true;
				}
				p++;
				plen--;
			}
			if (neg) {
				match = !match;
			}
			if (!match) {
				return false;
			}
			s++;
			slen--;
			break;
		}
		case '\\':
			if (plen >= 2) {
				p++;
				plen--;
			}
			/* fall through */
		default:
			if (p[0] != s[0]) {
				return false;
			}
			s++;
			slen--;
			break;
		}
		p++;
		plen--;
		if (slen == 0) {
			while (plen > 0 && p[0] == '*') {
				p++;
				plen--;
			}
			break;
		}
	}
	return plen == 0 && slen == 0;
}

bool kvscan_glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
                     size_t slen)
{
	bool skip_longer = false;
	return glob_impl(pat, plen, s, slen, &skip_longer, 0);
}

/* Bits that hold 1..groups. */
static unsigned group_bits(unsigned groups)
{
	unsigned b = 1;
	while (b < 32 && (groups >> b) != 0) {
		b++;
	}
	return b;
}

static uint64_t prefix_of(const uint8_t *key, size_t len, unsigned pb)
{
	uint64_t v = 0;
	for (size_t i = 0; i < 8; i++) {
		v = (v << 8) | (i < len ? key[i] : 0);
	}
	return v >> (64 - pb);
}

static size_t seek_of_prefix(uint64_t prefix, unsigned pb,
                             uint8_t seek[KVSCAN_SEEK_MAX])
{
	uint64_t v = prefix << (64 - pb);
	size_t n = (pb + 7) / 8;
	for (size_t i = 0; i < 8; i++) {
		seek[i] = (uint8_t)(v >> (56 - 8 * i));
	}
	while (n > 0 && seek[n - 1] == 0) {
		n--;
	}
	return n;
}

int kvscan_cursor_parse(const uint8_t *text, size_t len, unsigned groups,
                      uint32_t *group, uint8_t seek[KVSCAN_SEEK_MAX],
                      size_t *seek_len)
{
	uint64_t v = 0;
	unsigned gb, pb;

	if (len == 0 || len > 20 || groups == 0) {
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] < '0' || text[i] > '9' ||
		    v > (UINT64_MAX - (uint64_t)(text[i] - '0')) / 10) {
			return -1;
		}
		v = v * 10 + (uint64_t)(text[i] - '0');
	}
	*seek_len = 0;
	if (v == 0) {
		*group = 1;
		return 0;
	}
	gb = group_bits(groups);
	pb = 63 - gb;
	if (v >> 63 != 0 || (v >> pb) == 0 || (v >> pb) > groups) {
		return -1;
	}
	*group = (uint32_t)(v >> pb);
	*seek_len = seek_of_prefix(v & ((UINT64_C(1) << pb) - 1), pb, seek);
	return 0;
}

uint64_t kvscan_cursor_at(uint32_t group, unsigned groups, const uint8_t *key,
                        size_t len)
{
	unsigned pb = 63 - group_bits(groups);
	return ((uint64_t)group << pb) | prefix_of(key, len, pb);
}

uint64_t kvscan_cursor_after(uint32_t group, unsigned groups)
{
	if (group >= groups) {
		return 0;
	}
	return (uint64_t)(group + 1) << (63 - group_bits(groups));
}

size_t kvscan_seek_of(unsigned groups, const uint8_t *key, size_t len,
                           uint8_t seek[KVSCAN_SEEK_MAX])
{
	unsigned pb = 63 - group_bits(groups);
	return seek_of_prefix(prefix_of(key, len, pb), pb, seek);
}
