/* FSNP Flow request bodies: the typed-value map of a Flow opcode decoded
 * into a flat request (pure functions, no I/O, no allocation).
 *
 * Rules (reference/flow.md section 1): a body that is not a map is an
 * empty map; an `opts` sub-map is merged in (top level wins);
 * `deadline_ms` and `request_context` are dropped. Every other key must be
 * on the reference's allow-list, else status 6 `ERR native unknown flow
 * option <key>`. Positional fields of the opcode (id, lease_token, ...)
 * with a wrong tag or missing give status 6 `ERR native field <k> must be
 * binary` (or `... must be a non-negative integer`, `... is required`);
 * options with a wrong tag or out of range give status 1 `ERR flow <k>
 * ...`. Every view points into the decoded body. */
#ifndef LS_FLOW_FLOW_BODY_H
#define LS_FLOW_FLOW_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/fsnp_value.h"

/* Reply statuses a decode or apply error carries (FSNP status codes). */
enum {
	FLOW_STATUS_ERROR = 1,       /* ERR flow ... */
	FLOW_STATUS_BUSY = 4,        /* BUSY ... */
	FLOW_STATUS_BAD_REQUEST = 6, /* ERR native ... */
};

/* Integers the reference treats as exact (2^53 - 1). */
#define FLOW_MAXI INT64_C(9007199254740991)

struct flow_err {
	int status;
	char msg[320];
};

/* Fields of the bodies this decoder knows. */
enum flow_field {
	FF_ID,
	FF_TYPE,
	FF_STATE,
	FF_STATES,
	FF_PARTITION_KEY,
	FF_PARTITION_KEYS,
	FF_PAYLOAD,
	FF_RESULT,
	FF_ERROR,
	FF_REASON,
	FF_VALUE,
	FF_VALUES,
	FF_ATTRIBUTES,
	FF_ATTRIBUTES_MERGE,
	FF_ATTRIBUTES_DELETE,
	FF_STATE_META,
	FF_PARENT_FLOW_ID,
	FF_ROOT_FLOW_ID,
	FF_CORRELATION_ID,
	FF_RUN_AT_MS,
	FF_NOW_MS,
	FF_PRIORITY,
	FF_IDEMPOTENT,
	FF_RETENTION_TTL_MS,
	FF_TTL_MS,
	FF_MAX_ACTIVE_MS,
	FF_HISTORY_HOT_MAX_EVENTS,
	FF_HISTORY_MAX_EVENTS,
	FF_FULL,
	FF_PAYLOAD_MAX_BYTES,
	FF_RETURN,
	FF_WORKER,
	FF_LEASE_MS,
	FF_LIMIT,
	FF_RECLAIM_EXPIRED,
	FF_RECLAIM_RATIO,
	FF_BLOCK_MS,
	FF_LEASE_TOKEN,
	FF_FENCING_TOKEN,
	FF_FROM_STATE,
	FF_TO_STATE,
	FF_RETRY,
	FF_COUNT,
	FF_FROM_VERSION,
	FF_TO_VERSION,
	FF_FROM_MS,
	FF_TO_MS,
	FF_FROM_EVENT,
	FF_TO_EVENT,
	FF_REV,
	FF_EVENT,
	FF_OWNER_FLOW_ID,
	FF_NAME,
	FF_OVERRIDE,
	FF_REFS,
	FF_MAX_BYTES,
	FF_VALUE_MAX_BYTES,
	FF_SIGNAL,
	FF_IF_STATE,
	FF_TRANSITION_TO,
	FF_IDEMPOTENCY_KEY,
	FF_ITEMS,
	FF_INDEPENDENT,
	FF_INITIAL_STATE,
	FF_EXPECTED_GENERATION,
	FF_REPLACE,
	FF_EXHAUSTED_TO,
	FF_RESULT_REF,
	FF_ERROR_REF,
	FF_REASON_REF,
	FF_PAYLOAD_REF,
	FF_EXPECT_STATE,
	FF_STEPS,
	FF_CHILDREN,
	FF_GROUP_ID,
	FF_WAIT,
	FF_WAIT_STATE,
	FF_SUCCESS,
	FF_FAILURE,
	FF_ON_CHILD_FAILED,
	FF_ON_PARENT_CLOSED,
	FF_ATTRIBUTE,
	FF_CONSISTENT_PROJECTION,
	FF_INDEXED_ATTRIBUTES,
	FF_INDEXED_STATE_META,
	FF_SCOPE, /* governance: budgets, circuits, limits */
	FF_COUNT_FIELDS
};

/* One field: absent (set false), or its value. `i` for integers (and
 * max_active_ms "infinity": inf true), `b` for booleans, `t` for text;
 * `v` always holds the typed value. */
struct flow_opt {
	bool set;
	bool inf;
	bool b;
	int64_t i;
	struct fsnp_bytes t;
	struct fsnp_val v;
};

struct flow_req {
	uint16_t opcode;
	struct flow_opt f[FF_COUNT_FIELDS];
};

/* Decodes the body of Flow opcode `opcode` (an already validated typed
 * value, e.g. from fsnp_value_decode_body) into `req`. Returns 0, or -1
 * with `err` (status and message). */
int flow_body_decode(uint16_t opcode, const struct fsnp_val *body,
                     struct flow_req *req, struct flow_err *err);

/* The same from bytes: the body's encoding (empty = {}). */
int flow_body_decode_bytes(uint16_t opcode, const uint8_t *p, size_t len,
                           struct flow_req *req, struct flow_err *err);

/* Decodes a batch item (a map, or a list form of the opcode, see
 * reference/flow.md *_MANY) into `item` with the opcode of its single
 * command (e.g. COMPLETE for COMPLETE_MANY); fields the batch gives and the
 * item does not are taken from `batch`. */
int flow_body_decode_item(const struct flow_req *batch,
                          const struct fsnp_val *v, struct flow_req *item,
                          struct flow_err *err);

/* Formats an error (returns -1 for `return flow_fail(...)`). */
int flow_fail(struct flow_err *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The field's name in bodies. */
const char *flow_field_name(enum flow_field f);

#endif
