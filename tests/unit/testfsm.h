/* A small state machine for raft/ tests and benchmarks, implementing
 * struct fsm (raft/fsm.h) on RocksDB's "data" column family.
 *
 * Commands (bytes):
 *   'A' klen:u8 key delta:u64be  add delta to the counter at key;
 *                                result: new value u64be | index u64be
 *   'P' klen:u8 key value...     store value at key; result: index u64be
 *   'N' anything                 no-op; no result
 *   other                        result "ERR"
 *
 * Keys are prefixed by the instance's namespace and the group, so several
 * instances (one per simulated node) can share one database. Each apply is
 * one unsynced WriteBatch that also stores the group's applied index, as
 * the real store does. The instance counts what raft/ asked of it and
 * records violations of the apply contract (index or now_ms going
 * backwards, replays applied again). */
#ifndef LS_TESTS_TESTFSM_H
#define LS_TESTS_TESTFSM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "raft/fsm.h"

#define TESTFSM_MAX_GROUPS 2048

struct testfsm_group {
	bool loaded;
	uint64_t applied;
	uint64_t last_now_ms;
	uint64_t apply_calls;
	uint64_t cmds;
	uint64_t leader_up;
	uint64_t leader_down;
	bool leader;
	uint64_t leader_term;
};

struct testfsm {
	struct fsm fsm; /* fsm.data points back here */
	rocksdb_t *db;
	rocksdb_column_family_handle_t *cf;
	rocksdb_writeoptions_t *wo;
	rocksdb_readoptions_t *ro;
	uint32_t ns;
	struct testfsm_group g[TESTFSM_MAX_GROUPS];
	uint64_t apply_calls;
	uint64_t skipped;    /* entries at or below the applied index */
	uint64_t violations; /* contract violations seen */
	atomic_uint_fast64_t syncs;
	uint64_t exports;
	uint64_t imports;
	int fail_apply_at; /* if > 0: apply of this index fails */
};

void testfsm_init(struct testfsm *t, rocksdb_t *db,
                  rocksdb_column_family_handle_t *cf, uint32_t ns);
void testfsm_close(struct testfsm *t);

/* Forgets cached state (after the database was reopened). */
void testfsm_reset(struct testfsm *t, rocksdb_t *db,
                   rocksdb_column_family_handle_t *cf);

/* Command builders; return the length written into buf. */
size_t testfsm_cmd_add(uint8_t *buf, const char *key, uint64_t delta);
size_t testfsm_cmd_put(uint8_t *buf, const char *key, const void *value,
                       size_t vlen);

/* Reads a counter (0 if absent) / a value (malloc'd, NULL if absent). */
uint64_t testfsm_counter(struct testfsm *t, uint32_t group, const char *key);
char *testfsm_value(struct testfsm *t, uint32_t group, const char *key,
                    size_t *len);

/* The applied index stored in the database for `group`. */
uint64_t testfsm_stored_applied(struct testfsm *t, uint32_t group);

#endif
