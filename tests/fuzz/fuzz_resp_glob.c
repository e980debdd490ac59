/* Fuzz target: the RESP listener's user-given patterns and cursors
 * (store/kvscan.h): KEYS and SCAN MATCH globs, SCAN cursors.
 *
 * Input: "PATTERN\nKEY" (no newline: the input is both). The glob match
 * runs on exactly-sized copies (a read past either end is an ASan
 * report) and must agree with a match of the pattern against itself
 * escaped; the KEY is also parsed as a cursor for a few group counts, and
 * the plain and reference cursors made from it must decode to a seek
 * point not past it (a reference to its slot and tag too). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/kvscan.h"

#define CHECK(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned groups[] = {1, 3, 64, 65535};
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : size;
	size_t klen = nl ? size - plen - 1 : size;
	uint8_t *pat = malloc(plen ? plen : 1), *key = malloc(klen ? klen : 1);
	uint8_t *esc = malloc(2 * klen + 1);

	if (pat == NULL || key == NULL || esc == NULL || size > 4096) {
		free(pat);
		free(key);
		free(esc);
		return 0;
	}
	memcpy(pat, data, plen);
	memcpy(key, nl ? nl + 1 : data, klen);
	(void)kvscan_glob_match(pat, plen, key, klen);
	/* every byte escaped matches exactly the key itself */
	for (size_t i = 0; i < klen; i++) {
		esc[2 * i] = '\\';
		esc[2 * i + 1] = key[i];
	}
	CHECK(kvscan_glob_match(esc, 2 * klen, key, klen));
	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
		uint8_t seek[KVSCAN_SEEK_MAX];
		size_t sl;
		uint32_t grp;
		if (kvscan_cursor_parse(key, klen, groups[g], &grp, seek,
		                        &sl) == 0) {
			CHECK(grp >= 1 && grp <= groups[g]);
			CHECK(sl <= KVSCAN_SEEK_MAX);
		}
		sl = kvscan_seek_of(groups[g], key, klen, seek);
		CHECK(sl <= KVSCAN_SEEK_MAX);
		int d = memcmp(seek, key, sl < klen ? sl : klen);
		CHECK(d < 0 || (d == 0 && sl <= klen));
		/* any text: a decoded cursor names one of the groups */
		struct kvscan_cursor kc;
		if (kvscan_cursor_decode(key, klen, groups[g], &kc) == 0) {
			CHECK(kc.group >= 1 && kc.group <= groups[g]);
			CHECK(kc.seek_len <= KVSCAN_SEEK_MAX);
			CHECK(!kc.ref || kc.slot < KVSCAN_SLOTS_MAX);
		}
		/* the reference cursor made from the key decodes back to its
		 * slot and tag and to a seek point not past the key */
		if (kvscan_ref_usable(groups[g])) {
			char text[24];
			uint32_t slot = klen * 31u % KVSCAN_SLOTS_MAX;
			uint32_t tag = (uint32_t)klen * 2654435761u;
			uint64_t cur = kvscan_cursor_ref(groups[g], groups[g],
			                                 slot, tag, key, klen);
			int tl = snprintf(text, sizeof text, "%llu",
			                  (unsigned long long)cur);
			CHECK(cur < (UINT64_C(1) << 63));
			CHECK(kvscan_cursor_decode((const uint8_t *)text,
			                           (size_t)tl, groups[g],
			                           &kc) == 0);
			CHECK(kc.ref && kc.group == groups[g] &&
			      kc.slot == slot);
			CHECK(kc.tag ==
			      (tag & ((1u << kvscan_tag_bits(groups[g])) - 1)));
			CHECK(kvscan_ref_matches(&kc, groups[g], key, klen));
			d = memcmp(kc.seek, key,
			           kc.seek_len < klen ? kc.seek_len : klen);
			CHECK(d < 0 || (d == 0 && kc.seek_len <= klen));
		}
	}
	free(pat);
	free(key);
	free(esc);
	return 0;
}
