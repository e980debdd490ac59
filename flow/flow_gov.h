/* FerricFlow governance (reference/flow.md 6.3, 6.4; docs/flow.md
 * "Governance"): effects, approvals, circuits, budgets, limits and the
 * decision ledger, as records of the same store extension as flows
 * (flow/flow.h). flow.c hands every governance opcode here: routing,
 * the apply, and merging the per-group answers of the listing opcodes.
 *
 * Routing: effects and GOVERNANCE.LEDGER live with their flow (id and
 * partition_key as any id command); approvals by the approval id's auto
 * partition; circuits, budgets and limits by their scope, hashed as an
 * explicit partition key. APPROVAL.LIST, GOVERNANCE.OVERVIEW and
 * BUDGET/LIMIT.LIST without a scope ask every group and are merged with
 * flow_gov_merge(). */
#ifndef LS_FLOW_FLOW_GOV_H
#define LS_FLOW_FLOW_GOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/flow_body.h"
#include "flow/flow_gov_body.h"
#include "store/buf.h"
#include "wire/fsnp_value.h"

struct tx;

/* An internal governance command, proposed by the FSNP layer and never
 * accepted from a client (no wire name): CIRCUIT.COUNT {scope, kind} in
 * the circuit's group, kind "admit" (a reservation in another group asks
 * to pass: refused when open or when half-open probes are all out,
 * else a half-open probe is counted), "unadmit" (that reservation was not
 * made: the probe is given back), "success" or "failure" (a settled
 * effect's outcome). docs/flow.md "Circuits, and the two-step check". */
#define FLOW_GOV_OP_CIRCUIT_COUNT 0x02FE

/* Internal too: CLAIM_DUE admission through a limit (governance_limit_scope
 * + governance_shard_id; docs/flow.md "Claim admission"). LIMIT.CLAIM
 * {scope, shard_id, items: [{id, partition_key, reservation_id,
 * fencing_token}], reservation_ids} records the credit each claimed flow
 * holds and gives back the unused ones; LIMIT.RETURN {scope, shard_id,
 * id, partition_key} (or `items` [{id, partition_key}] after a batch)
 * gives back the credit each settled flow holds. */
#define FLOW_GOV_OP_LIMIT_CLAIM 0x02FC
#define FLOW_GOV_OP_LIMIT_RETURN 0x02FD
/* LIMIT.RENEW {scope, shard_id, id, partition_key, fencing_token, ttl_ms}
 * before EXTEND_LEASE with the options: the lease of the credit the flow
 * holds (from the claim with that fencing token) lives ttl_ms more. */
#define FLOW_GOV_OP_LIMIT_RENEW 0x02FB

/* Read-only governance opcodes (served by store_read). */
bool flow_gov_is_read(uint16_t opcode);

/* Whether the opcode asks every group when it names no scope. */
bool flow_gov_fans_out(uint16_t opcode);

/* The partition of a governance request (see above); *len 0 = every
 * group. `buf` holds FLOW_AUTO_PARTITION_MAX bytes. */
void flow_gov_partition(const struct flow_req *req, char *buf,
                        const uint8_t **part, size_t *len);

/* Applies (or serves) one governance command: `body` is the FSNP body,
 * `skew` the allowed client clock skew, `seed` the proposer's randomness.
 * Writes the store result into `res`: STORE_OK with the reply value, or
 * STORE_ERR / STORE_BAD_COMMAND with a text, or STORE_ERR with a denial
 * map ({code, message, reason, ...}). Returns 0 (writes stand only on
 * success), STORE_EXT_KEEP (an error whose writes stand: a denial's
 * ledger event, an approval that expired), or -1 on an I/O failure. */
int flow_gov_apply(struct tx *tx, uint16_t opcode, const uint8_t *body,
                   size_t len, uint64_t skew, uint64_t seed, struct sbuf *res);

/* The key prefixes of what a flow owns in governance (its effects, its
 * ledger events and the ledger's counter), i = 0, 1, 2: writes prefix i
 * of flow (part, id) in `group` into `k` and returns true, or false past
 * the last. RETENTION_CLEANUP deletes them with the flow, as the
 * reference does. */
bool flow_gov_flow_prefix(struct sbuf *k, uint32_t group, unsigned i,
                          struct fsnp_bytes part, struct fsnp_bytes id);

/* Merges the replies of every group for a fanned-out listing opcode
 * (values[i], n of them) into one reply written to `w`, honouring the
 * request's `limit`. 0, or -1 when a value is not of the expected shape. */
int flow_gov_merge(uint16_t opcode, const struct gov_req *req,
                   const struct fsnp_val *values, size_t n,
                   struct fsnp_writer *w);

#endif
