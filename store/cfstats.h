/* RocksDB's per-column-family statistics text (the property
 * rocksdb.cfstats-no-file-histogram): the counts that no integer property
 * holds, for the metrics. Pure parsing; nothing is allocated. */
#ifndef LS_STORE_CFSTATS_H
#define LS_STORE_CFSTATS_H

#include <stddef.h>
#include <stdint.h>

struct store_cfstats {
	/* The "Comp(cnt)" column of the level table's Sum row: compactions,
	 * flushes to L0 included, since the database opened. */
	uint64_t compactions;
	/* The "Stalls(count):" line's counts summed (every slowdown and stop
	 * cause; its interval total left out). */
	uint64_t stalls;
};

/* Parses text[0..len) (need not be NUL-terminated). Parts not found leave
 * their count at 0; the parse never fails. */
void store_cfstats_parse(const char *text, size_t len,
                         struct store_cfstats *out);

#endif
