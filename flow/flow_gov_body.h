/* FerricFlow governance request bodies (reference/flow.md 6.4): the typed
 * map of a governance opcode (0x0240-0x0258) decoded into a flat request.
 * Pure functions, no I/O, no allocation; every view points into the body.
 *
 * Positional fields missing or wrongly tagged give status 6 (`ERR native
 * field <k> must be binary`, `... must be a positive integer`, `... must
 * be a non-negative integer`, `... must be a binary list`); options with
 * a wrong tag or range give status 1 `ERR flow <k> ...`. Keys outside the
 * reference's allow-list are refused by flow/flow_body.c first. */
#ifndef LS_FLOW_FLOW_GOV_BODY_H
#define LS_FLOW_FLOW_GOV_BODY_H

#include <stdbool.h>
#include <stdint.h>

#include "flow/flow_body.h"
#include "wire/fsnp_value.h"

enum gov_field {
	GF_ID,
	GF_FLOW_ID,
	GF_EFFECT_KEY,
	GF_EFFECT_TYPE,
	GF_LEASE_TOKEN,
	GF_FENCING_TOKEN,
	GF_OPERATION_DIGEST,
	GF_IDEMPOTENCY_KEY,
	GF_PARTITION_KEY,
	GF_GOVERNANCE_SCOPE,
	GF_NOW_MS,
	GF_EXTERNAL_ID,
	GF_ERROR,
	GF_REASON,
	GF_LATENCY_MS,
	GF_LIMIT,
	GF_FROM_MS,
	GF_TO_MS,
	GF_REV,
	GF_SCOPE,
	GF_REQUESTED_BY,
	GF_ASSIGNEES,
	GF_POLICY_HASH,
	GF_POLICY_VERSION,
	GF_TIMEOUT_MS,
	GF_EXPIRES_AT_MS,
	GF_APPROVER,
	GF_STATUS,
	GF_OPEN_MS,
	GF_FAILURE_THRESHOLD,
	GF_WINDOW_MS,
	GF_MIN_CALLS,
	GF_FAILURE_RATE_PCT,
	GF_LATENCY_THRESHOLD_MS,
	GF_ERROR_CLASSES,
	GF_HALF_OPEN_MAX_PROBES,
	GF_HALF_OPEN_SUCCESS_THRESHOLD,
	GF_AMOUNT,
	GF_RESERVATION_ID,
	GF_ACTUAL_AMOUNT,
	GF_USAGE,
	GF_SHARD_ID,
	GF_TTL_MS,
	GF_CONFIG_VERSION,
	GF_RESERVATION_IDS,
	GF_WAIT_STATE,
	GF_TRANSITION_TO,
	GF_EXHAUST_TO,
	GF_KIND,
	GF_ITEMS,
	GF_COUNT
};

struct gov_opt {
	bool set;
	int64_t i;           /* integers */
	bool b;              /* booleans */
	struct fsnp_bytes t; /* text */
	struct fsnp_val v;   /* always the typed value */
};

struct gov_req {
	uint16_t opcode;
	struct gov_opt f[GF_COUNT];
};

/* Whether `opcode` is a governance opcode. */
bool flow_gov_opcode(uint16_t opcode);

/* Decodes `body` (a typed value; not a map = {}) for governance opcode
 * `opcode`. 0, or -1 with `err`. */
int flow_gov_body_decode(uint16_t opcode, const struct fsnp_val *body,
                         struct gov_req *req, struct flow_err *err);

/* The field's name in bodies. */
const char *flow_gov_field_name(enum gov_field f);

#endif
