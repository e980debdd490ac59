/* Strict UTF-8 validation; see felix_utf8.h. */
#include "wire/felix_utf8.h"

bool felix_utf8_valid(const uint8_t *p, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint8_t c = p[i];
		size_t n;
		uint8_t lo = 0x80, hi = 0xBF; /* range of the 2nd byte */
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			n = 1;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 2;
			if (c == 0xE0) {
				lo = 0xA0; /* overlong */
			} else if (c == 0xED) {
				hi = 0x9F; /* surrogates */
			}
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 3;
			if (c == 0xF0) {
				lo = 0x90; /* overlong */
			} else if (c == 0xF4) {
				hi = 0x8F; /* above U+10FFFF */
			}
		} else {
			return false;
		}
		if (len - i - 1 < n) {
			return false;
		}
		if (p[i + 1] < lo || p[i + 1] > hi) {
			return false;
		}
		for (size_t k = 2; k <= n; k++) {
			if ((p[i + k] & 0xC0) != 0x80) {
				return false;
			}
		}
		i += n + 1;
	}
	return true;
}
