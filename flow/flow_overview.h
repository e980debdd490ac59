/* The operations overview read of one data group: what the admin
 * dashboard's Flow panel shows (docs/operations.md "Flow panels").
 *
 * Served as a read (no proposal) on the group's leader:
 *
 *     u8  STORE_CMD_VERSION
 *     u8  FLOW_STORE_OP_OVERVIEW
 *     u8  FLOW_CMD_VERSION
 *     u32 max: the longest failed and stuck lists (1..FLOW_OVERVIEW_MAX)
 *
 * Its result is one FSNP map, built from the exact counters FLOW.STATS
 * sums (K_FLOW_COUNT), the updated-at index and the active-time index:
 *
 *     {now_ms, truncated,
 *      queues: [{type, state, count}],          summed over partitions
 *      failed: [{id, type, partition_key, updated_at_ms, attempts, error}],
 *              newest first
 *      stuck:  [{id, type, partition_key, state, reason, since_ms,
 *                lease_owner, attempts}], oldest first
 *      stuck_count}
 *
 * A flow is stuck when it is running with its lease deadline passed (not
 * reclaimed yet: reason "lease_expired") or non-terminal past
 * created_at_ms + max_active_ms (the sweep has not failed it yet: reason
 * "max_active_ms"). Every walk is bounded (FLOW_OVERVIEW_MAX_COUNTERS
 * counters; FLOW_OVERVIEW_MAX_RECORDS index entries of failed flows, and
 * as many running or overdue flows); past a bound the answer says
 * truncated: true. */
#ifndef LS_FLOW_FLOW_OVERVIEW_H
#define LS_FLOW_FLOW_OVERVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"

struct tx;

#define FLOW_STORE_OP_OVERVIEW 0xAB
#define FLOW_OVERVIEW_MAX 100
#define FLOW_OVERVIEW_MAX_COUNTERS 20000
#define FLOW_OVERVIEW_MAX_RECORDS 2000

/* Encodes the read for lists of at most `max` flows. */
void flow_overview_encode(uint32_t max, struct sbuf *out);

/* store/ extension entry point (flow.c dispatches). */
int flow_overview_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                        struct sbuf *res);

#endif
