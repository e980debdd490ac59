/* Fuzz target: the raft entry payload decoder (raft/entry.h). A payload
 * that decodes must re-encode to the same bytes through the builder. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "raft/entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct entry_header h;
	if (entry_decode_header(data, size, &h) != 0) {
		return 0;
	}
	/* Each command takes at least its 4-byte length: bound the array. */
	if (h.n_cmds == 0 || h.n_cmds > size / 4) {
		struct fsm_cmd one;
		if (h.n_cmds == 1) {
			entry_decode_cmds(data, size, &h, &one);
		}
		return 0;
	}
	struct fsm_cmd *cmds = calloc(h.n_cmds, sizeof *cmds);
	if (cmds == NULL) {
		return 0;
	}
	if (entry_decode_cmds(data, size, &h, cmds) == 0) {
		struct entry_builder b;
		entry_builder_init(&b, size + 64);
		for (uint32_t i = 0; i < h.n_cmds; i++) {
			if (entry_builder_add(&b, cmds[i].data, cmds[i].len) !=
			    0) {
				abort();
			}
		}
		void *base = NULL;
		size_t len = 0;
		if (entry_builder_finish(&b, h.term, h.now_ms, &base, &len) !=
		        0 ||
		    len != size || memcmp(base, data, size) != 0) {
			abort(); /* decode and encode disagree */
		}
		raft_free(base);
		entry_builder_close(&b);
	}
	free(cmds);
	return 0;
}
