/* Redis globs and SCAN cursors (plain and reference); see kvscan.h. */
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

/* The first pb bits of `key` (zero padded), 0 <= pb <= 63. */
static uint64_t prefix_of(const uint8_t *key, size_t len, unsigned pb)
{
	uint64_t v = 0;
	if (pb == 0) {
		return 0;
	}
	for (size_t i = 0; i < 8; i++) {
		v = (v << 8) | (i < len ? key[i] : 0);
	}
	return v >> (64 - pb);
}

static size_t seek_of_prefix(uint64_t prefix, unsigned pb,
                             uint8_t seek[KVSCAN_SEEK_MAX])
{
	uint64_t v = pb == 0 ? 0 : prefix << (64 - pb);
	size_t n = (pb + 7) / 8;
	for (size_t i = 0; i < 8; i++) {
		seek[i] = (uint8_t)(v >> (56 - 8 * i));
	}
	while (n > 0 && seek[n - 1] == 0) {
		n--;
	}
	return n;
}

static int cmp_seek(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int d = n > 0 ? memcmp(a, b, n) : 0; /* an empty seek may be NULL */
	if (d != 0) {
		return d;
	}
	return al < bl ? -1 : al > bl;
}

/* A reference cursor's layout below its gb zero bits: the group (gb
 * bits), the slot, the tag, the prefix. The tag gets up to 20 bits, the
 * prefix what is left (23 bits with 8 groups). */
#define REF_TAG_BITS_MAX 20
#define REF_TAG_BITS_MIN 16

static unsigned ref_free_bits(unsigned groups)
{
	unsigned gb = group_bits(groups);
	if (2 * gb + KVSCAN_SLOT_BITS > 63) {
		return 0;
	}
	return 63 - 2 * gb - KVSCAN_SLOT_BITS;
}

bool kvscan_ref_usable(unsigned groups)
{
	return groups > 0 && ref_free_bits(groups) >= REF_TAG_BITS_MIN;
}

unsigned kvscan_tag_bits(unsigned groups)
{
	unsigned f = ref_free_bits(groups);
	return f < REF_TAG_BITS_MAX ? f : REF_TAG_BITS_MAX;
}

unsigned kvscan_ref_prefix_bits(unsigned groups)
{
	return ref_free_bits(groups) - kvscan_tag_bits(groups);
}

int kvscan_cursor_decode(const uint8_t *text, size_t len, unsigned groups,
                         struct kvscan_cursor *out)
{
	uint64_t v = 0, g;
	unsigned gb, pb, tb, p;

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
	memset(out, 0, sizeof *out);
	if (v == 0) {
		out->group = 1;
		return 0;
	}
	gb = group_bits(groups);
	pb = 63 - gb;
	if (v >> 63 != 0 || (v >> pb) > groups) {
		return -1;
	}
	if ((v >> pb) != 0) {
		out->group = (uint32_t)(v >> pb);
		out->seek_len = seek_of_prefix(v & ((UINT64_C(1) << pb) - 1),
		                               pb, out->seek);
		return 0;
	}
	/* a reference cursor: group, slot, tag, prefix */
	if (!kvscan_ref_usable(groups)) {
		return -1;
	}
	tb = kvscan_tag_bits(groups);
	p = kvscan_ref_prefix_bits(groups);
	g = v >> (pb - gb);
	if (g == 0 || g > groups) {
		return -1;
	}
	out->ref = true;
	out->group = (uint32_t)g;
	out->slot = (uint32_t)(v >> (tb + p)) & (KVSCAN_SLOTS_MAX - 1);
	out->tag = (uint32_t)(v >> p) & ((UINT32_C(1) << tb) - 1);
	out->seek_len = seek_of_prefix(
	    p == 0 ? 0 : v & ((UINT64_C(1) << p) - 1), p, out->seek);
	return 0;
}

int kvscan_cursor_parse(const uint8_t *text, size_t len, unsigned groups,
                        uint32_t *group, uint8_t seek[KVSCAN_SEEK_MAX],
                        size_t *seek_len)
{
	struct kvscan_cursor c;
	if (kvscan_cursor_decode(text, len, groups, &c) != 0) {
		return -1;
	}
	*group = c.group;
	memcpy(seek, c.seek, KVSCAN_SEEK_MAX);
	*seek_len = c.seek_len;
	return 0;
}

uint64_t kvscan_cursor_ref(uint32_t group, unsigned groups, uint32_t slot,
                           uint32_t tag, const uint8_t *key, size_t len)
{
	unsigned gb = group_bits(groups);
	unsigned tb = kvscan_tag_bits(groups);
	unsigned p = kvscan_ref_prefix_bits(groups);
	return ((uint64_t)group << (63 - 2 * gb)) |
	       ((uint64_t)(slot & (KVSCAN_SLOTS_MAX - 1)) << (tb + p)) |
	       ((uint64_t)(tag & ((UINT32_C(1) << tb) - 1)) << p) |
	       prefix_of(key, len, p);
}

bool kvscan_ref_matches(const struct kvscan_cursor *c, unsigned groups,
                        const uint8_t *key, size_t len)
{
	uint8_t seek[KVSCAN_SEEK_MAX];
	unsigned p = kvscan_ref_prefix_bits(groups);
	size_t n = seek_of_prefix(prefix_of(key, len, p), p, seek);
	return c->ref && cmp_seek(seek, n, c->seek, c->seek_len) == 0;
}

bool kvscan_ref_advances(unsigned groups, const uint8_t *key, size_t len,
                         const uint8_t *floor, size_t floor_len)
{
	uint8_t seek[KVSCAN_SEEK_MAX];
	unsigned p = kvscan_ref_prefix_bits(groups);
	size_t n = seek_of_prefix(prefix_of(key, len, p), p, seek);
	return cmp_seek(seek, n, floor, floor_len) > 0;
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
