/* The payload codec of a Raft command entry (one group-commit batch).
 *
 * Every RAFT_COMMAND entry raft/ proposes carries the commands proposed to
 * one group in one loop turn, stamped by the leader:
 *
 *   off  size  field
 *     0     1  version (ENTRY_VERSION)
 *     1     1  flags (0; anything else is malformed)
 *     2     2  reserved (0)
 *     4     4  n_cmds, >= 1                      (u32 big endian)
 *     8     8  term the leader proposed it in    (u64 big endian)
 *    16     8  now_ms, leader-stamped wall clock (u64 big endian)
 *    24        n_cmds x { u32 BE length, length bytes }
 *
 * The commands fill the buffer exactly. The term equals the Raft term of
 * the entry (libraft stamps the entry with the proposer's current term, and
 * raft/ encodes that same term), so apply learns it without reaching into
 * libraft's log.
 *
 * Buffers built here are allocated with raft_malloc() because libraft takes
 * them over in raft_apply(). Decoding borrows the buffer: the commands point
 * into it. */
#ifndef LS_RAFT_ENTRY_H
#define LS_RAFT_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "raft/fsm.h"

#define ENTRY_VERSION 1
#define ENTRY_HEADER_SIZE 24
#define ENTRY_CMD_OVERHEAD 4 /* length prefix of each command */

enum {
	ENTRY_EMALFORMED = 1, /* the bytes are not a valid entry */
	ENTRY_ENOMEM,
	ENTRY_ETOOBIG /* the command does not fit the entry size limit */
};

struct entry_header {
	uint8_t version;
	uint32_t n_cmds;
	uint64_t term;
	uint64_t now_ms;
};

/* An entry being filled with commands. `buf` (raft_malloc'd) is owned by
 * the builder until entry_builder_finish() hands it out. */
struct entry_builder {
	uint8_t *buf;
	size_t len;
	size_t cap;
	uint32_t n_cmds;
	size_t max_len; /* limit of the finished entry, header included */
	size_t expect;  /* first allocation: the size the entry will likely
	                   reach (entry_builder_expect), so that filling it
	                   does not copy it again and again as it grows */
};

/* Starts an empty entry that may grow to `max_len` bytes in all. */
void entry_builder_init(struct entry_builder *b, size_t max_len);

/* The entry will likely reach `len` bytes in all: its buffer is allocated
 * at that size at once (at most max_len). Call before the first command. */
void entry_builder_expect(struct entry_builder *b, size_t len);

/* Makes room for one command of `len` bytes and points *cmd at it: the
 * caller writes the command there before anything else is added (a later
 * add may move the buffer). Same errors as entry_builder_add. */
int entry_builder_reserve(struct entry_builder *b, size_t len, uint8_t **cmd);

/* Appends one command (copied). ENTRY_ETOOBIG when the entry would exceed
 * its limit (nothing is added), ENTRY_ENOMEM when out of memory. */
int entry_builder_add(struct entry_builder *b, const void *cmd, size_t len);

/* Whether a command of `len` bytes would still fit. */
int entry_builder_fits(const struct entry_builder *b, size_t len);

/* Writes the header and hands the buffer out: `*base` (raft_malloc'd, now
 * the caller's) and `*len`. The builder is empty afterwards. Needs at least
 * one command. A buffer much larger than the entry (a wrong expectation) is
 * shrunk first: libraft keeps entries in memory for a while. */
int entry_builder_finish(struct entry_builder *b, uint64_t term,
                         uint64_t now_ms, void **base, size_t *len);

/* Frees whatever the builder still holds. */
void entry_builder_close(struct entry_builder *b);

/* The largest command an entry of `max_len` bytes can hold alone. */
size_t entry_max_cmd(size_t max_len);

/* Checks the header and that n_cmds is plausible for `len`. */
int entry_decode_header(const void *buf, size_t len, struct entry_header *h);

/* Fills cmds[0 .. h->n_cmds-1] (borrowing `buf`) and checks that the
 * commands fill the buffer exactly. */
int entry_decode_cmds(const void *buf, size_t len, const struct entry_header *h,
                      struct fsm_cmd *cmds);

#endif
