/* The max_active_ms sweep: a flow still running (or waiting) past
 * created_at_ms + max_active_ms is failed by the shard's leader, without
 * any client call, as the reference's cleanup sweep does (state failed,
 * history `failed` with reason max_active_ms).
 *
 * The leader reads its own replica (flow_sweep_cmd: a local store_read of
 * the active-time index, K_FLOW_ACTIVE, at most `max` flows past their
 * deadline; the scan's result is one bytes value, the sweep command's
 * body below) and proposes the sweep command
 *
 *     u8  STORE_CMD_VERSION
 *     u8  FLOW_STORE_OP_SWEEP
 *     u8  FLOW_CMD_VERSION
 *     u64 now_ms: the leader's time of the scan
 *     u32 n, then n x (u32 len + partition, u32 len + flow id)
 *
 * Apply takes min(now_ms, the entry's time) as the time and re-checks
 * every flow against its record (still there, non-terminal, past its
 * deadline), so a stale or replayed sweep changes nothing. Its result is
 * an i64: how many flows it failed. */
#ifndef LS_FLOW_FLOW_SWEEP_H
#define LS_FLOW_FLOW_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"

struct store;
struct tx;

#define FLOW_STORE_OP_SWEEP_SCAN 0xAE /* read: the leader's scan */
#define FLOW_STORE_OP_SWEEP 0xAF      /* apply: fail the listed flows */
#define FLOW_SWEEP_MAX 128            /* flows per sweep command */

/* Scans `group` of `s` (this node's replica) at `now_ms` for up to `max`
 * flows past max_active_ms and encodes the sweep command into *cmd
 * (malloc'd; *len 0 and *cmd NULL when nothing is due). 0, or -1 on a
 * read failure. */
int flow_sweep_cmd(struct store *s, uint32_t group, uint64_t now_ms,
                   uint32_t max, uint8_t **cmd, size_t *len);

/* Encodes a sweep command for the given flows (pure). */
void flow_sweep_encode(uint64_t now_ms, const uint8_t *const *parts,
                       const size_t *part_lens, const uint8_t *const *ids,
                       const size_t *id_lens, uint32_t n, struct sbuf *out);

/* store/ extension entry points for the two ops (flow.c dispatches). */
int flow_sweep_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                     struct sbuf *res);

#endif
