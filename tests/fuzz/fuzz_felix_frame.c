/* Fuzz the Felix frame envelope decoder. The input (after two control
 * bytes: frame limit and chunking seed) is treated as a byte stream and
 * decoded twice: all at once, and delivered in random chunks the way a
 * socket would, each attempt on an exact-size copy so any read past the
 * delivered bytes trips ASan. Both must see the same frames and end the
 * same way; every frame's header must re-encode to its own bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/felix_frame.h"

struct seen {
	size_t at;
	size_t frame_len;
	uint16_t flags;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok) {
		abort();
	}
}

/* Decode in[0..len) into frames; returns the final result. */
static enum felix_frame_result run_whole(const uint8_t *in, size_t len,
                                         uint32_t max, struct seen *out,
                                         size_t *n, char *err, size_t errlen)
{
	size_t off = 0;
	*n = 0;
	for (;;) {
		struct felix_frame f;
		size_t need = 0;
		enum felix_frame_result r = felix_frame_decode(
		    in + off, len - off, max, &f, &need, err, errlen);
		if (r != FELIX_FRAME_COMPLETE) {
			if (r == FELIX_FRAME_NEED_MORE) {
				check(need > len - off);
				check(need <=
				      (size_t)FELIX_FRAME_HEADER_LEN + max);
			}
			return r;
		}
		uint8_t h[FELIX_FRAME_HEADER_LEN];
		felix_frame_header_encode(f.header.flags, f.header.length, h);
		check(memcmp(h, in + off, FELIX_FRAME_HEADER_LEN) == 0);
		check(f.payload == in + off + FELIX_FRAME_HEADER_LEN);
		check(f.frame_len == FELIX_FRAME_HEADER_LEN + f.header.length);
		check(f.header.length <= max);
		check(felix_frame_flags_check(f.header.flags, NULL, NULL, 0) ==
		      0);
		out[*n].at = off;
		out[*n].frame_len = f.frame_len;
		out[*n].flags = f.header.flags;
		(*n)++;
		off += f.frame_len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen *whole;
	size_t nwhole, nseen = 0, consumed = 0, avail = 0;
	uint64_t rng;
	uint32_t max;
	char err_whole[256] = "", err_inc[256] = "";
	enum felix_frame_result end_whole, end_inc = FELIX_FRAME_NEED_MORE;
	const uint8_t *in;
	size_t len;

	if (size < 2) {
		return 0;
	}
	/* 0xff: the default limit; otherwise a small one so that inputs
	 * hold whole frames and the limit check is exercised. */
	max = data[0] == 0xff ? FELIX_FRAME_DEFAULT_MAX_PAYLOAD
	                      : (uint32_t)data[0] * 4;
	rng = data[1] * 0x9e3779b97f4a7c15ull + size;
	in = data + 2;
	len = size - 2;
	whole = malloc((len / FELIX_FRAME_HEADER_LEN + 1) * sizeof *whole);
	check(whole != NULL);
	end_whole = run_whole(in, len, max, whole, &nwhole, err_whole,
	                      sizeof err_whole);

	/* Deliver the stream in chunks of 0..16 bytes. */
	while (avail < len && end_inc != FELIX_FRAME_ERROR) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		size_t chunk = (size_t)(rng >> 60);
		avail = avail + chunk > len ? len : avail + chunk;
		for (;;) {
			size_t have = avail - consumed, need = 0;
			uint8_t *copy = malloc(have ? have : 1);
			struct felix_frame f;
			check(copy != NULL);
			memcpy(copy, in + consumed, have);
			end_inc = felix_frame_decode(copy, have, max, &f, &need,
			                             err_inc, sizeof err_inc);
			if (end_inc == FELIX_FRAME_COMPLETE) {
				check(nseen < nwhole);
				check(whole[nseen].at == consumed);
				check(whole[nseen].frame_len == f.frame_len);
				check(whole[nseen].flags == f.header.flags);
				check(memcmp(copy + FELIX_FRAME_HEADER_LEN,
				             in + consumed +
				                 FELIX_FRAME_HEADER_LEN,
				             f.header.length) == 0);
				consumed += f.frame_len;
				nseen++;
			} else if (end_inc == FELIX_FRAME_NEED_MORE) {
				check(need > have);
			}
			free(copy);
			if (end_inc != FELIX_FRAME_COMPLETE) {
				break;
			}
		}
	}
	if (len == 0) {
		end_inc = felix_frame_decode(in, 0, max, NULL, NULL, NULL, 0);
	}
	/* Same frames, same ending, same error. */
	check(nseen == nwhole);
	check(end_inc == end_whole);
	if (end_inc == FELIX_FRAME_ERROR) {
		check(strcmp(err_inc, err_whole) == 0);
	}
	free(whole);
	return 0;
}
