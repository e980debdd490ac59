/* FerricFlow: durable flows (jobs and workflow runs) as a deterministic
 * state machine over a store/ group, registered with store/ as an
 * extension (store/ext.h). This header is what the FSNP layer calls.
 *
 * A Flow request goes through three steps:
 *
 *   1. flow_cmd_encode(opcode, body, meta): validates the FSNP body (the
 *      typed-value map of the request, flow/flow_body.h) and, when it is
 *      usable, returns a store command. Validation errors come back at
 *      once (err->status 6 "ERR native ...", 1 "ERR flow ..."): nothing
 *      is proposed. flow_cmd_partition() names the partition the command
 *      belongs to, for routing (wire/flow_route.h turns it into a slot
 *      and shard).
 *   2. Reads (flow_opcode_is_read: GET, HISTORY, VALUE.MGET, INFO,
 *      POLICY.GET) go to store_read(); everything else is proposed as one
 *      command of an entry.
 *   3. The store result (store/result.h) maps to the FSNP reply with
 *      flow_reply_status(): its typed value is the FSNP reply value byte
 *      for byte (STORE_OK -> status 0 and the value; STORE_ERR -> status
 *      1 and the message text; STORE_BAD_COMMAND -> status 6 and the
 *      message text).
 *
 * The command (format FLOW_CMD_VERSION), all integers big-endian:
 *
 *     u8  STORE_CMD_VERSION
 *     u8  FLOW_STORE_OP_APPLY | FLOW_STORE_OP_READ
 *     u8  FLOW_CMD_VERSION
 *     u16 FSNP opcode
 *     u64 client clock skew allowed, ms (a body's now_ms is clamped to
 *         the entry's time +- this)
 *     u64 seed: the proposer's randomness (value refs, backoff jitter,
 *         the auto bucket of an unpartitioned VALUE.PUT)
 *     u32 body length + the FSNP body (a typed value)
 *
 * What stays with the caller (the FSNP layer): CLAIM_DUE and RECLAIM
 * without one partition go to every data group (each claims among its own
 * flows; FLOW_STORE_OP_PEEK first says what each would take, so the
 * limit can be split in the claim order across groups); `block_ms` waiting and
 * re-claiming on new work; POLICY.SET on every group (reads from one); refusing
 * batches whose items route to different shards (`ERR flow batch crosses
 * shards`); the compact request forms (reference/flow.md section 7) turned into
 * typed bodies; the error map envelope around status 1 and 6 messages.
 *
 * Applying it decodes the body again (the same pure decoder), so a
 * command's effect depends only on the command, the entry's time and the
 * group's state. Time is the entry's now_ms; lease tokens are
 * "<worker>:<now_ms>:<fencing_token>" as in the reference. */
#ifndef LS_FLOW_FLOW_H
#define LS_FLOW_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/flow_body.h"

struct store;

#define FLOW_STORE_OP_APPLY 0xA0
#define FLOW_STORE_OP_READ 0xA1
/* A CLAIM_DUE or RECLAIM served as a read (the command is otherwise the
 * same): its reply lists what the claim would take, in its order, as
 * [priority, next_run_at_ms] pairs, and nothing is written. The FSNP
 * layer's fan-out of unpartitioned claims asks every group this first. */
#define FLOW_STORE_OP_PEEK 0xAC
#define FLOW_CMD_VERSION 1
#define FLOW_CLOCK_SKEW_DEFAULT_MS 60000

struct flow_cmd_meta {
	uint64_t max_clock_skew_ms; /* FLOW_CLOCK_SKEW_DEFAULT_MS */
	uint64_t seed;              /* random, per request */
};

/* A decoded command: views into the encoding. */
struct flow_cmd {
	uint8_t store_op;
	uint16_t opcode;
	uint64_t max_clock_skew_ms;
	uint64_t seed;
	const uint8_t *body;
	size_t body_len;
};

/* Whether the state machine implements the opcode. */
bool flow_opcode_supported(uint16_t opcode);
/* Whether the opcode is served by store_read() (no proposal). */
bool flow_opcode_is_read(uint16_t opcode);

/* Validates `body` (len 0 = {}) and encodes the command into a malloc'd
 * buffer (*out, *out_len; the caller frees). Returns 0, or -1 with `err`
 * (an unsupported opcode is status 6). */
int flow_cmd_encode(uint16_t opcode, const uint8_t *body, size_t len,
                    const struct flow_cmd_meta *meta, uint8_t **out,
                    size_t *out_len, struct flow_err *err);

/* As flow_cmd_encode for a body the caller has just decoded without
 * error with flow_body_decode_bytes (same opcode): it is not decoded
 * again here (apply still does). */
int flow_cmd_encode_valid(uint16_t opcode, const uint8_t *body, size_t len,
                          const struct flow_cmd_meta *meta, uint8_t **out,
                          size_t *out_len, struct flow_err *err);

/* As flow_cmd_encode for the peek of a claim (FLOW_STORE_OP_PEEK). */
int flow_cmd_encode_peek(uint16_t opcode, const uint8_t *body, size_t len,
                         const struct flow_cmd_meta *meta, uint8_t **out,
                         size_t *out_len, struct flow_err *err);

/* Decodes a command's envelope (not its body). 0, or -1 with *msg. */
int flow_cmd_decode(const uint8_t *p, size_t len, struct flow_cmd *c,
                    const char **msg);

/* The partition a decoded request belongs to: the flow's (id commands,
 * CREATE, batches: the batch's or the first item's), the VALUE.PUT
 * bucket (seed % 256 without a partition key), or none (*len 0: CLAIM_DUE
 * and RECLAIM without one partition, VALUE.MGET, INFO, policies,
 * RETENTION_CLEANUP go to every group, or the reference's choice). `buf`
 * holds FLOW_AUTO_PARTITION_MAX bytes. */
void flow_cmd_partition(const struct flow_req *req, uint64_t seed, char *buf,
                        const uint8_t **part, size_t *len);

/* The FSNP status of a store result status. */
int flow_reply_status(uint8_t store_status);

/* One flow record an applied command wrote (views valid during the
 * call). next_run_at_ms is -1 when the flow is terminal or has none. */
struct flow_change {
	struct fsnp_bytes id, type, state, partition_key;
	int64_t priority;
	int64_t next_run_at_ms;
};

/* Called on the reactor thread after each Flow command applied on this
 * node that wrote flow records (not after failed commands, reads or
 * replays), with the command's FSNP opcode (0 for the max_active_ms
 * sweep) and every record it wrote, in order. Every replica applies every
 * entry, so every node holding the group calls it; a node holding no
 * replica of the group never does. The node's waiters (block_ms claims,
 * FLOW_WAKE subscribers) hang off it. */
typedef void (*flow_changes_fn)(void *data, uint32_t group, uint16_t opcode,
                                const struct flow_change *ch, size_t n);

/* Sets the hook (NULL to clear). One per process: a node runs one store
 * and one FSNP server. */
void flow_set_changes_hook(flow_changes_fn fn, void *data);

/* Registers the Flow ops with `s` (before any apply). 0, or -1. */
int flow_register(struct store *s);

#endif
