/* What a parked claim (block_ms) waits for: the earliest time its due
 * work could appear in a group, read from this node's replica (the due
 * floors, docs/storage.md "FerricFlow"). A node uses it to time its
 * safety-net re-check of a parked claim for flows that become due by
 * time passing; writes that make work due wake it through the changes
 * hook (flow.h) instead.
 *
 * The read command (never proposed, served by store_read locally):
 *
 *     u8  STORE_CMD_VERSION
 *     u8  FLOW_STORE_OP_NEXT_DUE
 *     u8  FLOW_CMD_VERSION
 *     u16 FSNP opcode (CLAIM_DUE or RECLAIM)
 *     u64 now_ms
 *     u32 body length + the claim's FSNP body
 *
 * Result: STORE_OK and a u64 value (UINT64_MAX: nothing waiting). */
#ifndef LS_FLOW_FLOW_WAIT_H
#define LS_FLOW_FLOW_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"

struct store;
struct tx;

#define FLOW_STORE_OP_NEXT_DUE 0xAD

/* The earliest due time (*at, a lower bound; UINT64_MAX none) of the
 * claim `body` in `group` of this node's replica. 0, or -1 on a read
 * failure or a body that is not a claim. */
int flow_next_due(struct store *s, uint32_t group, uint16_t opcode,
                  const uint8_t *body, size_t len, uint64_t now_ms,
                  uint64_t *at);

/* The read's entry point (flow.c dispatches the op). */
int flow_wait_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                    struct sbuf *res);

#endif
