/* The state machine of the raft benchmarks (bench_raft, bench_cluster):
 * every command is one put into the "data" column family (key group |
 * index | position), plus the group's applied index, in one WriteBatch per
 * entry written without the WAL and flushed before log compaction, as the
 * real store does (store/shard.c); or, in null mode, nothing at all, to
 * measure raft/ alone. */
#ifndef LS_BENCH_BENCH_FSM_H
#define LS_BENCH_BENCH_FSM_H

#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>

#include "raft/fsm.h"

struct bench_fsm {
	struct fsm fsm;                     /* fsm.data = this */
	rocksdb_t *db;                      /* borrowed */
	rocksdb_column_family_handle_t *cf; /* borrowed */
	rocksdb_writeoptions_t *wo;         /* owned */
	uint64_t *applied;                  /* owned, per group */
	bool null;
	const char *name; /* program name for error messages */
};

/* Groups are numbered 0 .. groups (inclusive). Returns 0 or -1. */
int bench_fsm_init(struct bench_fsm *b, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf, unsigned groups,
                   bool null, const char *name);
void bench_fsm_close(struct bench_fsm *b);

#endif
