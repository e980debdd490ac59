/* Fuzz target: the RESP listener's user-given patterns and cursors
 * (store/kvscan.h): KEYS and SCAN MATCH globs, SCAN cursors.
 *
 * Input: "PATTERN\nKEY" (no newline: the input is both). The glob match
 * runs on exactly-sized copies (a read past either end is an ASan
 * report) and must agree with a match of the pattern against itself
 * escaped; the KEY is also parsed as a cursor for a few group counts, and
 * the cursor made from it must decode to a seek point not past it. */
#include <stdbool.h>
#include <stdint.h>
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
		if (kvscan_cursor_parse(key, klen, groups[g], &grp, seek, &sl) ==
		    0) {
			CHECK(grp >= 1 && grp <= groups[g]);
			CHECK(sl <= KVSCAN_SEEK_MAX);
		}
		sl = kvscan_seek_of(groups[g], key, klen, seek);
		CHECK(sl <= KVSCAN_SEEK_MAX);
		int d = memcmp(seek, key, sl < klen ? sl : klen);
		CHECK(d < 0 || (d == 0 && sl <= klen));
	}
	free(pat);
	free(key);
	free(esc);
	return 0;
}
