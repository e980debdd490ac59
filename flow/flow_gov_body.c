/* Governance body decoding (flow_gov_body.h): a field table drives the
 * typed checks; each opcode lists its positional fields and their kind. */
#include "flow/flow_gov_body.h"

#include <string.h>

#include "flow/flow_gov.h"
#include "wire/fsnp_opcode.h"

enum gtype {
	GT_TEXT,
	GT_INT, /* non-negative integer <= FLOW_MAXI */
	GT_BOOL,
	GT_ANY,
	GT_LIST,
	GT_TI, /* text or integer */
};

static const struct {
	const char *name;
	uint8_t type;
} fields[GF_COUNT] = {
    [GF_ID] = {"id", GT_TEXT},
    [GF_FLOW_ID] = {"flow_id", GT_TEXT},
    [GF_EFFECT_KEY] = {"effect_key", GT_TEXT},
    [GF_EFFECT_TYPE] = {"effect_type", GT_TEXT},
    [GF_LEASE_TOKEN] = {"lease_token", GT_TEXT},
    [GF_FENCING_TOKEN] = {"fencing_token", GT_INT},
    [GF_OPERATION_DIGEST] = {"operation_digest", GT_TEXT},
    [GF_IDEMPOTENCY_KEY] = {"idempotency_key", GT_TEXT},
    [GF_PARTITION_KEY] = {"partition_key", GT_TEXT},
    [GF_GOVERNANCE_SCOPE] = {"governance_scope", GT_TEXT},
    [GF_NOW_MS] = {"now_ms", GT_INT},
    [GF_EXTERNAL_ID] = {"external_id", GT_TEXT},
    [GF_ERROR] = {"error", GT_ANY},
    [GF_REASON] = {"reason", GT_ANY},
    [GF_LATENCY_MS] = {"latency_ms", GT_INT},
    [GF_LIMIT] = {"limit", GT_INT},
    [GF_FROM_MS] = {"from_ms", GT_INT},
    [GF_TO_MS] = {"to_ms", GT_INT},
    [GF_REV] = {"rev", GT_BOOL},
    [GF_SCOPE] = {"scope", GT_TEXT},
    [GF_REQUESTED_BY] = {"requested_by", GT_TEXT},
    [GF_ASSIGNEES] = {"assignees", GT_LIST},
    [GF_POLICY_HASH] = {"policy_hash", GT_TEXT},
    [GF_POLICY_VERSION] = {"policy_version", GT_TI},
    [GF_TIMEOUT_MS] = {"timeout_ms", GT_INT},
    [GF_EXPIRES_AT_MS] = {"expires_at_ms", GT_INT},
    [GF_APPROVER] = {"approver", GT_TEXT},
    [GF_STATUS] = {"status", GT_TEXT},
    [GF_OPEN_MS] = {"open_ms", GT_INT},
    [GF_FAILURE_THRESHOLD] = {"failure_threshold", GT_INT},
    [GF_WINDOW_MS] = {"window_ms", GT_INT},
    [GF_MIN_CALLS] = {"min_calls", GT_INT},
    [GF_FAILURE_RATE_PCT] = {"failure_rate_pct", GT_INT},
    [GF_LATENCY_THRESHOLD_MS] = {"latency_threshold_ms", GT_INT},
    [GF_ERROR_CLASSES] = {"error_classes", GT_LIST},
    [GF_HALF_OPEN_MAX_PROBES] = {"half_open_max_probes", GT_INT},
    [GF_HALF_OPEN_SUCCESS_THRESHOLD] = {"half_open_success_threshold", GT_INT},
    [GF_AMOUNT] = {"amount", GT_INT},
    [GF_RESERVATION_ID] = {"reservation_id", GT_TEXT},
    [GF_ACTUAL_AMOUNT] = {"actual_amount", GT_INT},
    [GF_USAGE] = {"usage", GT_ANY},
    [GF_SHARD_ID] = {"shard_id", GT_INT},
    [GF_TTL_MS] = {"ttl_ms", GT_INT},
    [GF_CONFIG_VERSION] = {"config_version", GT_INT},
    [GF_RESERVATION_IDS] = {"reservation_ids", GT_LIST},
    [GF_WAIT_STATE] = {"wait_state", GT_TEXT},
    [GF_TRANSITION_TO] = {"transition_to", GT_TEXT},
    [GF_EXHAUST_TO] = {"exhaust_to", GT_TEXT},
    [GF_KIND] = {"kind", GT_TEXT},
    [GF_ITEMS] = {"items", GT_LIST},
};

/* A positional field: the field and whether an integer must be > 0. */
struct pos {
	uint8_t f;
	bool positive;
};

struct positional {
	uint16_t opcode;
	struct pos p[6];
	uint8_t n;
};

#define P(f)                                                                   \
	{                                                                      \
		f, false                                                       \
	}
#define PP(f)                                                                  \
	{                                                                      \
		f, true                                                        \
	}

static const struct positional positionals[] = {
    {FSNP_OP_FLOW_EFFECT_RESERVE,
     {P(GF_ID), P(GF_EFFECT_KEY), P(GF_EFFECT_TYPE), P(GF_LEASE_TOKEN),
      P(GF_FENCING_TOKEN), P(GF_OPERATION_DIGEST)},
     6},
    {FSNP_OP_FLOW_EFFECT_CONFIRM,
     {P(GF_ID), P(GF_EFFECT_KEY), P(GF_LEASE_TOKEN), P(GF_FENCING_TOKEN)},
     4},
    {FSNP_OP_FLOW_EFFECT_FAIL,
     {P(GF_ID), P(GF_EFFECT_KEY), P(GF_LEASE_TOKEN), P(GF_FENCING_TOKEN)},
     4},
    {FSNP_OP_FLOW_EFFECT_COMPENSATE,
     {P(GF_ID), P(GF_EFFECT_KEY), P(GF_LEASE_TOKEN), P(GF_FENCING_TOKEN)},
     4},
    {FSNP_OP_FLOW_EFFECT_GET, {P(GF_ID), P(GF_EFFECT_KEY)}, 2},
    {FSNP_OP_FLOW_GOVERNANCE_LEDGER, {P(GF_ID)}, 1},
    {FSNP_OP_FLOW_APPROVAL_REQUEST, {P(GF_ID), P(GF_FLOW_ID), P(GF_SCOPE)}, 3},
    {FSNP_OP_FLOW_APPROVAL_APPROVE, {P(GF_ID), P(GF_APPROVER)}, 2},
    {FSNP_OP_FLOW_APPROVAL_REJECT, {P(GF_ID), P(GF_APPROVER)}, 2},
    {FSNP_OP_FLOW_APPROVAL_GET, {P(GF_ID)}, 1},
    {FSNP_OP_FLOW_CIRCUIT_OPEN, {P(GF_SCOPE)}, 1},
    {FSNP_OP_FLOW_CIRCUIT_CLOSE, {P(GF_SCOPE)}, 1},
    {FSNP_OP_FLOW_CIRCUIT_GET, {P(GF_SCOPE)}, 1},
    {FSNP_OP_FLOW_BUDGET_RESERVE, {P(GF_SCOPE), PP(GF_AMOUNT)}, 2},
    {FSNP_OP_FLOW_BUDGET_COMMIT,
     {P(GF_SCOPE), P(GF_RESERVATION_ID), P(GF_ACTUAL_AMOUNT)},
     3},
    {FSNP_OP_FLOW_BUDGET_RELEASE, {P(GF_SCOPE), P(GF_RESERVATION_ID)}, 2},
    {FSNP_OP_FLOW_BUDGET_GET, {P(GF_SCOPE)}, 1},
    {FSNP_OP_FLOW_LIMIT_LEASE,
     {P(GF_SCOPE), P(GF_SHARD_ID), PP(GF_AMOUNT), PP(GF_TTL_MS)},
     4},
    {FSNP_OP_FLOW_LIMIT_SPEND, {P(GF_SCOPE), P(GF_SHARD_ID), PP(GF_AMOUNT)}, 3},
    {FSNP_OP_FLOW_LIMIT_RELEASE,
     {P(GF_SCOPE), P(GF_SHARD_ID), P(GF_RESERVATION_IDS)},
     3},
    {FSNP_OP_FLOW_LIMIT_GET, {P(GF_SCOPE)}, 1},
    {FSNP_OP_FLOW_APPROVAL_LIST, {{0, false}}, 0},
    {FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, {{0, false}}, 0},
    {FSNP_OP_FLOW_BUDGET_LIST, {{0, false}}, 0},
    {FSNP_OP_FLOW_LIMIT_LIST, {{0, false}}, 0},
    {FLOW_GOV_OP_CIRCUIT_COUNT, {P(GF_SCOPE), P(GF_KIND)}, 2},
    {FLOW_GOV_OP_LIMIT_CLAIM, {P(GF_SCOPE), P(GF_SHARD_ID)}, 2},
    {FLOW_GOV_OP_LIMIT_RETURN, {P(GF_SCOPE), P(GF_SHARD_ID)}, 2},
    {FLOW_GOV_OP_LIMIT_RENEW,
     {P(GF_SCOPE), P(GF_SHARD_ID), P(GF_ID), PP(GF_TTL_MS)},
     4},
};

bool flow_gov_opcode(uint16_t opcode)
{
	return (opcode >= FSNP_OP_FLOW_EFFECT_RESERVE &&
	        opcode <= FSNP_OP_FLOW_BUDGET_RELEASE) ||
	       opcode == FLOW_GOV_OP_CIRCUIT_COUNT ||
	       opcode == FLOW_GOV_OP_LIMIT_CLAIM ||
	       opcode == FLOW_GOV_OP_LIMIT_RETURN ||
	       opcode == FLOW_GOV_OP_LIMIT_RENEW;
}

const char *flow_gov_field_name(enum gov_field f)
{
	return f < GF_COUNT ? fields[f].name : "?";
}

static const struct positional *positional_of(uint16_t opcode)
{
	for (size_t i = 0; i < sizeof positionals / sizeof positionals[0];
	     i++) {
		if (positionals[i].opcode == opcode) {
			return &positionals[i];
		}
	}
	return NULL;
}

/* Fills unset fields from map `m` (the top level first, then `opts`). */
static void collect(const struct fsnp_val *m, struct gov_req *req, bool top)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	if (m->tag != FSNP_MAP) {
		return;
	}
	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		for (unsigned f = 0; f < GF_COUNT; f++) {
			if (!fsnp_bytes_eq(k, fields[f].name)) {
				continue;
			}
			if (top || !req->f[f].set) {
				req->f[f].set = true;
				req->f[f].v = v;
			}
			break;
		}
	}
}

static int parse(unsigned f, const struct pos *p, struct gov_opt *o,
                 struct flow_err *err)
{
	const char *name = fields[f].name;
	const struct fsnp_val *v = &o->v;

	switch (fields[f].type) {
	case GT_TEXT:
		if (fsnp_val_bin(v, &o->t) != 0) {
			if (p != NULL) {
				return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
				                 "ERR native field %s must be "
				                 "binary",
				                 name);
			}
			return flow_fail(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow %s must be a non-empty string", name);
		}
		if (o->t.len == 0) {
			return flow_fail(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow %s must be a non-empty string", name);
		}
		return 0;
	case GT_TI:
		if (v->tag == FSNP_BIN) {
			o->t = v->as.bin;
			return 0;
		}
		/* fall through */
	case GT_INT:
		if (fsnp_val_i64(v, &o->i) != 0 || o->i < 0 ||
		    (p != NULL && p->positive && o->i == 0)) {
			bool pos = p != NULL && p->positive;
			if (v->tag == FSNP_U64 ||
			    (fsnp_val_i64(v, &o->i) == 0 && o->i > FLOW_MAXI)) {
				return flow_fail(err, FLOW_STATUS_ERROR,
				                 "ERR flow %s exceeds maximum "
				                 "9007199254740991",
				                 name);
			}
			return flow_fail(err,
			                 p != NULL ? FLOW_STATUS_BAD_REQUEST
			                           : FLOW_STATUS_ERROR,
			                 "ERR %s %s must be a %s integer",
			                 p != NULL ? "native field" : "flow",
			                 name,
			                 pos ? "positive" : "non-negative");
		}
		if (o->i > FLOW_MAXI) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s exceeds maximum "
			                 "9007199254740991",
			                 name);
		}
		return 0;
	case GT_BOOL:
		if (fsnp_val_bool(v, &o->b) != 0) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s must be a boolean", name);
		}
		return 0;
	case GT_LIST:
		if (v->tag != FSNP_ARRAY) {
			if (p != NULL) {
				return flow_fail(
				    err, FLOW_STATUS_BAD_REQUEST,
				    "ERR native field %s must be a "
				    "binary list",
				    name);
			}
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s must be a list", name);
		}
		return 0;
	default:
		return 0;
	}
}

int flow_gov_body_decode(uint16_t opcode, const struct fsnp_val *body,
                         struct gov_req *req, struct flow_err *err)
{
	const struct positional *ps = positional_of(opcode);
	struct fsnp_val opts;

	memset(req, 0, sizeof *req);
	req->opcode = opcode;
	if (ps == NULL) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native unsupported flow opcode 0x%04x",
		                 opcode);
	}
	if (body->tag == FSNP_MAP) {
		collect(body, req, true);
		if (fsnp_map_get(body, "opts", &opts) == 0) {
			collect(&opts, req, false);
		}
	}
	/* Positional fields first, in order, as the reference reports. */
	for (unsigned i = 0; i < ps->n; i++) {
		unsigned f = ps->p[i].f;
		if (!req->f[f].set || fsnp_val_is_nil(&req->f[f].v)) {
			req->f[f].set = false;
			if (fields[f].type == GT_INT) {
				return flow_fail(
				    err, FLOW_STATUS_BAD_REQUEST,
				    "ERR native field %s must be a %s integer",
				    fields[f].name,
				    ps->p[i].positive ? "positive"
				                      : "non-negative");
			}
			return flow_fail(
			    err, FLOW_STATUS_BAD_REQUEST,
			    "ERR native field %s must be %s", fields[f].name,
			    fields[f].type == GT_LIST ? "a binary list"
			                              : "binary");
		}
		if (parse(f, &ps->p[i], &req->f[f], err) != 0) {
			return -1;
		}
	}
	for (unsigned f = 0; f < GF_COUNT; f++) {
		bool positional = false;
		for (unsigned i = 0; i < ps->n; i++) {
			positional = positional || ps->p[i].f == f;
		}
		if (positional || !req->f[f].set) {
			continue;
		}
		/* An explicit nil is an absent option. */
		if (fsnp_val_is_nil(&req->f[f].v)) {
			req->f[f].set = false;
			continue;
		}
		if (parse(f, NULL, &req->f[f], err) != 0) {
			return -1;
		}
	}
	return 0;
}
