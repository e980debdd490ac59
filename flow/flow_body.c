/* FSNP Flow body decoding (flow_body.h): a field table drives the typed
 * checks; each opcode lists its positional fields. */
#include "flow/flow_body.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "flow/flow_gov_body.h"
#include "wire/fsnp_opcode.h"

enum ftype {
	FT_TEXT, /* binary */
	FT_INT,  /* non-negative integer <= FLOW_MAXI */
	FT_IINF, /* FT_INT or "infinity" */
	FT_BOOL,
	FT_ANY,
	FT_MAP,
	FT_LIST,
	FT_TLIST, /* text or list */
};

static const struct {
	const char *name;
	uint8_t len; /* strlen(name) */
	uint8_t type;
} fields[FF_COUNT_FIELDS] = {
    [FF_ID] = {"id", 2, FT_TEXT},
    [FF_TYPE] = {"type", 4, FT_TEXT},
    [FF_STATE] = {"state", 5, FT_TEXT},
    [FF_STATES] = {"states", 6, FT_LIST},
    [FF_PARTITION_KEY] = {"partition_key", 13, FT_TEXT},
    [FF_PARTITION_KEYS] = {"partition_keys", 14, FT_LIST},
    [FF_PAYLOAD] = {"payload", 7, FT_ANY},
    [FF_RESULT] = {"result", 6, FT_ANY},
    [FF_ERROR] = {"error", 5, FT_ANY},
    [FF_REASON] = {"reason", 6, FT_ANY},
    [FF_VALUE] = {"value", 5, FT_ANY},
    [FF_VALUES] = {"values", 6, FT_ANY},
    [FF_ATTRIBUTES] = {"attributes", 10, FT_MAP},
    [FF_ATTRIBUTES_MERGE] = {"attributes_merge", 16, FT_MAP},
    [FF_ATTRIBUTES_DELETE] = {"attributes_delete", 17, FT_LIST},
    [FF_STATE_META] = {"state_meta", 10, FT_MAP},
    [FF_PARENT_FLOW_ID] = {"parent_flow_id", 14, FT_TEXT},
    [FF_ROOT_FLOW_ID] = {"root_flow_id", 12, FT_TEXT},
    [FF_CORRELATION_ID] = {"correlation_id", 14, FT_TEXT},
    [FF_RUN_AT_MS] = {"run_at_ms", 9, FT_INT},
    [FF_NOW_MS] = {"now_ms", 6, FT_INT},
    [FF_PRIORITY] = {"priority", 8, FT_INT},
    [FF_IDEMPOTENT] = {"idempotent", 10, FT_BOOL},
    [FF_RETENTION_TTL_MS] = {"retention_ttl_ms", 16, FT_INT},
    [FF_TTL_MS] = {"ttl_ms", 6, FT_INT},
    [FF_MAX_ACTIVE_MS] = {"max_active_ms", 13, FT_IINF},
    [FF_HISTORY_HOT_MAX_EVENTS] = {"history_hot_max_events", 22, FT_INT},
    [FF_HISTORY_MAX_EVENTS] = {"history_max_events", 18, FT_INT},
    [FF_FULL] = {"full", 4, FT_BOOL},
    [FF_PAYLOAD_MAX_BYTES] = {"payload_max_bytes", 17, FT_INT},
    [FF_RETURN] = {"return", 6, FT_TEXT},
    [FF_WORKER] = {"worker", 6, FT_TEXT},
    [FF_LEASE_MS] = {"lease_ms", 8, FT_INT},
    [FF_LIMIT] = {"limit", 5, FT_INT},
    [FF_RECLAIM_EXPIRED] = {"reclaim_expired", 15, FT_BOOL},
    [FF_RECLAIM_RATIO] = {"reclaim_ratio", 13, FT_INT},
    [FF_BLOCK_MS] = {"block_ms", 8, FT_INT},
    [FF_LEASE_TOKEN] = {"lease_token", 11, FT_TEXT},
    [FF_FENCING_TOKEN] = {"fencing_token", 13, FT_INT},
    [FF_FROM_STATE] = {"from_state", 10, FT_TEXT},
    [FF_TO_STATE] = {"to_state", 8, FT_TEXT},
    [FF_RETRY] = {"retry", 5, FT_MAP},
    [FF_COUNT] = {"count", 5, FT_INT},
    [FF_FROM_VERSION] = {"from_version", 12, FT_INT},
    [FF_TO_VERSION] = {"to_version", 10, FT_INT},
    [FF_FROM_MS] = {"from_ms", 7, FT_INT},
    [FF_TO_MS] = {"to_ms", 5, FT_INT},
    [FF_FROM_EVENT] = {"from_event", 10, FT_TEXT},
    [FF_TO_EVENT] = {"to_event", 8, FT_TEXT},
    [FF_REV] = {"rev", 3, FT_BOOL},
    [FF_EVENT] = {"event", 5, FT_TEXT},
    [FF_OWNER_FLOW_ID] = {"owner_flow_id", 13, FT_TEXT},
    [FF_NAME] = {"name", 4, FT_TEXT},
    [FF_OVERRIDE] = {"override", 8, FT_BOOL},
    [FF_REFS] = {"refs", 4, FT_LIST},
    [FF_MAX_BYTES] = {"max_bytes", 9, FT_INT},
    [FF_VALUE_MAX_BYTES] = {"value_max_bytes", 15, FT_INT},
    [FF_SIGNAL] = {"signal", 6, FT_TEXT},
    [FF_IF_STATE] = {"if_state", 8, FT_TLIST},
    [FF_TRANSITION_TO] = {"transition_to", 13, FT_TEXT},
    [FF_IDEMPOTENCY_KEY] = {"idempotency_key", 15, FT_TEXT},
    [FF_ITEMS] = {"items", 5, FT_LIST},
    [FF_INDEPENDENT] = {"independent", 11, FT_BOOL},
    [FF_INITIAL_STATE] = {"initial_state", 13, FT_TEXT},
    [FF_EXPECTED_GENERATION] = {"expected_generation", 19, FT_INT},
    [FF_REPLACE] = {"replace", 7, FT_BOOL},
    [FF_EXHAUSTED_TO] = {"exhausted_to", 12, FT_TEXT},
    [FF_RESULT_REF] = {"result_ref", 10, FT_ANY},
    [FF_ERROR_REF] = {"error_ref", 9, FT_ANY},
    [FF_REASON_REF] = {"reason_ref", 10, FT_ANY},
    [FF_PAYLOAD_REF] = {"payload_ref", 11, FT_TEXT},
    [FF_EXPECT_STATE] = {"expect_state", 12, FT_TEXT},
    [FF_STEPS] = {"steps", 5, FT_INT},
    [FF_CHILDREN] = {"children", 8, FT_LIST},
    [FF_GROUP_ID] = {"group_id", 8, FT_TEXT},
    [FF_WAIT] = {"wait", 4, FT_TEXT},
    [FF_WAIT_STATE] = {"wait_state", 10, FT_TEXT},
    [FF_SUCCESS] = {"success", 7, FT_TEXT},
    [FF_FAILURE] = {"failure", 7, FT_TEXT},
    [FF_ON_CHILD_FAILED] = {"on_child_failed", 15, FT_TEXT},
    [FF_ON_PARENT_CLOSED] = {"on_parent_closed", 16, FT_TEXT},
    [FF_ATTRIBUTE] = {"attribute", 9, FT_TEXT},
    [FF_CONSISTENT_PROJECTION] = {"consistent_projection", 21, FT_BOOL},
    [FF_INDEXED_ATTRIBUTES] = {"indexed_attributes", 18, FT_LIST},
    [FF_INDEXED_STATE_META] = {"indexed_state_meta", 18, FT_TEXT},
    [FF_SCOPE] = {"scope", 5, FT_TEXT},
};

/* The reference's option allow-list (sorted). */
static const char *const known[] = {
    "actual_amount",
    "after_ms",
    "amount",
    "approver",
    "assignees",
    "at_ms",
    "attempt",
    "attribute",
    "attributes",
    "attributes_delete",
    "attributes_merge",
    "backoff",
    "base_ms",
    "block_ms",
    "catchup_policy",
    "children",
    "config_version",
    "consistent_projection",
    "correlation_id",
    "count",
    "cron",
    "delay_ms",
    "drop_values",
    "due_after_ms",
    "effect_key",
    "effect_type",
    "end_at_ms",
    "error",
    "error_class",
    "error_classes",
    "error_ref",
    "event",
    "every_ms",
    "exhaust_to",
    "exhausted_to",
    "expect_state",
    "expected_generation",
    "expires_at_ms",
    "external_id",
    "failure",
    "failure_rate_pct",
    "failure_threshold",
    "fencing_token",
    "fire_at_ms",
    "flow_id",
    "from_event",
    "from_ms",
    "from_state",
    "from_version",
    "full",
    "governance_limit_scope",
    "governance_scope",
    "governance_shard_id",
    "group_id",
    "half_open_max_probes",
    "half_open_success_threshold",
    "history_hot_max_events",
    "history_max_events",
    "id",
    "id_prefix",
    "idempotency_key",
    "idempotent",
    "if_state",
    "include_cold",
    "independent",
    "indexed_attributes",
    "indexed_state_meta",
    "initial_state",
    "items",
    "jitter_pct",
    "kind",
    "latency_ms",
    "latency_threshold_ms",
    "lease_ms",
    "lease_token",
    "limit",
    "local_cache",
    "max_active_ms",
    "max_attempts",
    "max_bytes",
    "max_fires",
    "max_ms",
    "max_retries",
    "min_calls",
    "name",
    "now_ms",
    "older_than_ms",
    "on_child_failed",
    "on_parent_closed",
    "open_ms",
    "operation_digest",
    "overlap_policy",
    "overlap_retry_ms",
    "override",
    "override_values",
    "overwrite",
    "owner_flow_id",
    "parent_flow_id",
    "partition_key",
    "partition_keys",
    "payload",
    "payload_max_bytes",
    "payload_ref",
    "payload_refs",
    "policy_hash",
    "policy_version",
    "priority",
    "reason",
    "reason_ref",
    "reclaim_expired",
    "reclaim_ratio",
    "replace",
    "requested_by",
    "reservation_id",
    "reservation_ids",
    "result",
    "result_ref",
    "retention_ttl_ms",
    "retry",
    "retry_at_ms",
    "return",
    "rev",
    "root_flow_id",
    "run_at_ms",
    "scope",
    "shard_id",
    "signal",
    "start_at_ms",
    "state",
    "state_meta",
    "states",
    "status",
    "steps",
    "success",
    "target",
    "target_type",
    "terminal_local_only",
    "terminal_only",
    "timeout_ms",
    "timezone",
    "to_event",
    "to_ms",
    "to_state",
    "to_version",
    "transition_to",
    "ttl_ms",
    "type",
    "usage",
    "value",
    "value_max_bytes",
    "value_refs",
    "values",
    "wait",
    "wait_state",
    "window_ms",
    "worker",
};

/* Positional fields per opcode (terminated by FF_COUNT_FIELDS). */
struct positional {
	uint16_t opcode;
	uint8_t f[5];
};

static const struct positional positionals[] = {
    {FSNP_OP_FLOW_CREATE, {FF_ID, FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_GET, {FF_ID, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_CLAIM_DUE, {FF_TYPE, FF_WORKER, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_RECLAIM, {FF_TYPE, FF_WORKER, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_COMPLETE,
     {FF_ID, FF_LEASE_TOKEN, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_FAIL,
     {FF_ID, FF_LEASE_TOKEN, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_RETRY,
     {FF_ID, FF_LEASE_TOKEN, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_EXTEND_LEASE,
     {FF_ID, FF_LEASE_TOKEN, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_TRANSITION,
     {FF_ID, FF_FROM_STATE, FF_TO_STATE, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_CANCEL, {FF_ID, FF_FENCING_TOKEN, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_HISTORY, {FF_ID, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_VALUE_PUT, {FF_VALUE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_VALUE_MGET, {FF_REFS, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_SIGNAL, {FF_ID, FF_SIGNAL, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_CREATE_MANY, {FF_ITEMS, FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_COMPLETE_MANY, {FF_ITEMS, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_FAIL_MANY, {FF_ITEMS, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_RETRY_MANY, {FF_ITEMS, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_CANCEL_MANY, {FF_ITEMS, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_TRANSITION_MANY,
     {FF_ITEMS, FF_FROM_STATE, FF_TO_STATE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_INFO, {FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_POLICY_SET, {FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_POLICY_GET, {FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_STATS, {FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_ATTRIBUTES, {FF_TYPE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_ATTRIBUTE_VALUES, {FF_TYPE, FF_ATTRIBUTE, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_START_AND_CLAIM,
     {FF_ID, FF_TYPE, FF_INITIAL_STATE, FF_WORKER, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_REWIND, {FF_ID, FF_TO_EVENT, FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_RETENTION_CLEANUP, {FF_COUNT_FIELDS}},
    {FSNP_OP_FLOW_STEP_CONTINUE,
     {FF_ID, FF_LEASE_TOKEN, FF_FROM_STATE, FF_TO_STATE, FF_FENCING_TOKEN}},
    {FSNP_OP_FLOW_SPAWN_CHILDREN,
     {FF_ID, FF_CHILDREN, FF_PARTITION_KEY, FF_GROUP_ID, FF_FENCING_TOKEN}},
    {FSNP_OP_FLOW_RUN_STEPS_MANY,
     {FF_ITEMS, FF_TYPE, FF_WORKER, FF_COUNT_FIELDS}},
};

int flow_fail(struct flow_err *err, int status, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

const char *flow_field_name(enum flow_field f)
{
	return f < FF_COUNT_FIELDS ? fields[f].name : "?";
}

/* Bytewise order of a name against a key, shorter first (memcmp of the
 * common length, then the lengths), without measuring the name first. */
static int name_cmp(const char *name, struct fsnp_bytes k)
{
	size_t i;

	for (i = 0; i < k.len && name[i] != '\0'; i++) {
		if ((uint8_t)name[i] != k.ptr[i]) {
			return (uint8_t)name[i] < k.ptr[i] ? -1 : 1;
		}
	}
	if (i == k.len) {
		return name[i] == '\0' ? 0 : 1;
	}
	return -1; /* the name ended first */
}

static bool is_known(struct fsnp_bytes k)
{
	size_t lo = 0, hi = sizeof known / sizeof known[0];

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = name_cmp(known[mid], k);
		if (c == 0) {
			return true;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return false;
}

static bool ignored_key(struct fsnp_bytes k)
{
	return fsnp_bytes_eq(k, "deadline_ms") ||
	       fsnp_bytes_eq(k, "request_context") || fsnp_bytes_eq(k, "opts");
}

static bool positional_key(const struct positional *p, struct fsnp_bytes k);
static const struct positional *positional_of(uint16_t opcode);

static int check_keys(const struct fsnp_val *m, const struct positional *pos,
                      struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (ignored_key(k) || is_known(k) || positional_key(pos, k)) {
			continue;
		}
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native unknown flow option %.*s",
		                 (int)(k.len > 200 ? 200 : k.len),
		                 (const char *)k.ptr);
	}
	return 0;
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

/* Checks and converts one present field. */
static int parse_field(unsigned f, bool pos, struct flow_opt *o,
                       struct flow_err *err)
{
	const char *name = fields[f].name;
	const struct fsnp_val *v = &o->v;

	switch (fields[f].type) {
	case FT_TEXT:
		if (fsnp_val_bin(v, &o->t) != 0) {
			if (pos) {
				return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
				                 "ERR native field %s must be "
				                 "binary",
				                 name);
			}
			return flow_fail(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow %s must be a non-empty string", name);
		}
		return 0;
	case FT_IINF:
		if (v->tag == FSNP_BIN &&
		    fsnp_bytes_eq(v->as.bin, "infinity")) {
			o->inf = true;
			return 0;
		}
		/* fall through */
	case FT_INT:
		if (fsnp_val_i64(v, &o->i) != 0 || o->i < 0) {
			if (v->tag == FSNP_U64) {
				return flow_fail(err, FLOW_STATUS_ERROR,
				                 "ERR flow %s exceeds maximum "
				                 "9007199254740991",
				                 name);
			}
			return flow_fail(err,
			                 pos ? FLOW_STATUS_BAD_REQUEST
			                     : FLOW_STATUS_ERROR,
			                 "ERR %s %s must be a non-negative "
			                 "integer",
			                 pos ? "native field" : "flow", name);
		}
		if (o->i > FLOW_MAXI) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s exceeds maximum "
			                 "9007199254740991",
			                 name);
		}
		return 0;
	case FT_BOOL:
		if (fsnp_val_bool(v, &o->b) != 0) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s must be a boolean", name);
		}
		return 0;
	case FT_MAP:
		if (v->tag != FSNP_MAP) {
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s must be a map", name);
		}
		return 0;
	case FT_LIST:
		if (v->tag != FSNP_ARRAY) {
			if (pos) {
				return flow_fail(
				    err, FLOW_STATUS_BAD_REQUEST,
				    "ERR native field %s must be a "
				    "binary list",
				    name);
			}
			return flow_fail(err, FLOW_STATUS_ERROR,
			                 "ERR flow %s must be a non-empty list",
			                 name);
		}
		return 0;
	case FT_TLIST:
		if (v->tag == FSNP_BIN) {
			o->t = v->as.bin;
			return 0;
		}
		if (v->tag != FSNP_ARRAY) {
			return flow_fail(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow %s must be a string or a list", name);
		}
		return 0;
	default:
		return 0;
	}
}

/* Fills the fields from `m` (the top level, or `opts`): `m` wins over
 * what is already set only when `top`. One pass over `m`; a field takes
 * the value of the last entry of its name, as a lookup per field would. */
static void collect(const struct fsnp_val *m, bool top, struct flow_req *req)
{
	struct fsnp_val vals[FF_COUNT_FIELDS];
	bool found[FF_COUNT_FIELDS] = {false};
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	if (m->tag != FSNP_MAP) {
		return;
	}
	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		for (unsigned f = 0; f < FF_COUNT_FIELDS; f++) {
			/* The names differ: the first match is the only one. */
			if (fields[f].len == k.len &&
			    memcmp(fields[f].name, k.ptr, k.len) == 0) {
				vals[f] = v;
				found[f] = true;
				break;
			}
		}
	}
	for (unsigned f = 0; f < FF_COUNT_FIELDS; f++) {
		if (req->f[f].set && !top) {
			continue;
		}
		if (found[f]) {
			req->f[f].set = true;
			req->f[f].v = vals[f];
		}
	}
}

static bool positional_key(const struct positional *p, struct fsnp_bytes k)
{
	for (unsigned i = 0; p != NULL && i < 5 && p->f[i] != FF_COUNT_FIELDS;
	     i++) {
		if (fsnp_bytes_eq(k, fields[p->f[i]].name)) {
			return true;
		}
	}
	return false;
}

static int finish(const struct positional *pos, struct flow_req *req,
                  struct flow_err *err)
{
	bool posf[FF_COUNT_FIELDS] = {false};

	for (unsigned i = 0;
	     pos != NULL && i < 5 && pos->f[i] != FF_COUNT_FIELDS; i++) {
		if (pos->f[i] < FF_COUNT_FIELDS) {
			posf[pos->f[i]] = true;
		}
	}
	for (unsigned f = 0; f < FF_COUNT_FIELDS; f++) {
		bool p = posf[f];
		if (!req->f[f].set) {
			if (!p) {
				continue;
			}
			if (fields[f].type == FT_INT) {
				return flow_fail(
				    err, FLOW_STATUS_BAD_REQUEST,
				    "ERR native field %s must be a "
				    "non-negative integer",
				    fields[f].name);
			}
			if (fields[f].type == FT_TEXT) {
				return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
				                 "ERR native field %s must be "
				                 "binary",
				                 fields[f].name);
			}
			if (fields[f].type == FT_LIST) {
				return flow_fail(
				    err, FLOW_STATUS_BAD_REQUEST,
				    "ERR native field %s must be a "
				    "binary list",
				    fields[f].name);
			}
			return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
			                 "ERR native field %s is required",
			                 fields[f].name);
		}
		if (parse_field(f, p, &req->f[f], err) != 0) {
			return -1;
		}
	}
	return 0;
}

int flow_body_decode(uint16_t opcode, const struct fsnp_val *body,
                     struct flow_req *req, struct flow_err *err)
{
	struct fsnp_val opts;
	bool has_opts = false;

	memset(req, 0, sizeof *req);
	req->opcode = opcode;
	if (body->tag == FSNP_MAP) {
		if (check_keys(body, positional_of(opcode), err) != 0) {
			return -1;
		}
		collect(body, true, req);
		if (fsnp_map_get(body, "opts", &opts) == 0 &&
		    opts.tag == FSNP_MAP) {
			has_opts = true;
			if (check_keys(&opts, positional_of(opcode), err) !=
			    0) {
				return -1;
			}
			collect(&opts, false, req);
		}
	}
	(void)has_opts;
	if (flow_gov_opcode(opcode)) {
		/* After the allow-list: the governance fields and errors. */
		struct gov_req g;
		if (flow_gov_body_decode(opcode, body, &g, err) != 0) {
			return -1;
		}
	}
	return finish(positional_of(opcode), req, err);
}

int flow_body_decode_bytes(uint16_t opcode, const uint8_t *p, size_t len,
                           struct flow_req *req, struct flow_err *err)
{
	struct fsnp_val body;

	if (fsnp_value_decode_body(p, len, NULL, &body) != 0) {
		memset(req, 0, sizeof *req);
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native value has unknown or truncated "
		                 "tag");
	}
	return flow_body_decode(opcode, &body, req, err);
}

/* The single opcode of a batch opcode. */
static uint16_t single_of(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_CREATE_MANY:
		return FSNP_OP_FLOW_CREATE;
	case FSNP_OP_FLOW_COMPLETE_MANY:
		return FSNP_OP_FLOW_COMPLETE;
	case FSNP_OP_FLOW_FAIL_MANY:
		return FSNP_OP_FLOW_FAIL;
	case FSNP_OP_FLOW_RETRY_MANY:
		return FSNP_OP_FLOW_RETRY;
	case FSNP_OP_FLOW_CANCEL_MANY:
		return FSNP_OP_FLOW_CANCEL;
	case FSNP_OP_FLOW_TRANSITION_MANY:
		return FSNP_OP_FLOW_TRANSITION;
	default:
		return 0;
	}
}

/* The list forms: [id, a, b] / [id, pk, a, b] per opcode. */
static int item_list(uint16_t single, const struct fsnp_val *v,
                     struct flow_req *item)
{
	struct fsnp_val e[4];
	struct fsnp_iter it;
	unsigned n = 0, base;
	uint8_t short_f[3], nshort;

	fsnp_iter_init(&it, v);
	while (n < 4 && fsnp_iter_next(&it, NULL, &e[n])) {
		n++;
	}
	if (v->as.count > 4 || n == 0) {
		return -1;
	}
	switch (single) {
	case FSNP_OP_FLOW_CREATE:
		short_f[0] = FF_ID;
		short_f[1] = FF_PAYLOAD;
		nshort = 2;
		break;
	case FSNP_OP_FLOW_CANCEL:
		short_f[0] = FF_ID;
		short_f[1] = FF_FENCING_TOKEN;
		nshort = 2;
		break;
	case FSNP_OP_FLOW_TRANSITION:
		short_f[0] = FF_ID;
		short_f[1] = FF_FENCING_TOKEN;
		short_f[2] = FF_LEASE_TOKEN;
		nshort = 3;
		break;
	default:
		short_f[0] = FF_ID;
		short_f[1] = FF_LEASE_TOKEN;
		short_f[2] = FF_FENCING_TOKEN;
		nshort = 3;
		break;
	}
	if (n != nshort && n != nshort + 1u) {
		return -1;
	}
	base = n == nshort ? 0 : 1;
	item->f[FF_ID].set = true;
	item->f[FF_ID].v = e[0];
	if (base) {
		item->f[FF_PARTITION_KEY].set = true;
		item->f[FF_PARTITION_KEY].v = e[1];
	}
	for (unsigned i = 1; i < nshort; i++) {
		if (e[i + base].tag == FSNP_NIL) {
			continue;
		}
		item->f[short_f[i]].set = true;
		item->f[short_f[i]].v = e[i + base];
	}
	return 0;
}

int flow_body_decode_item(const struct flow_req *batch,
                          const struct fsnp_val *v, struct flow_req *item,
                          struct flow_err *err)
{
	uint16_t single = single_of(batch->opcode);
	struct flow_err sub;

	memset(item, 0, sizeof *item);
	item->opcode = single;
	if (single == 0) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native flow item is invalid");
	}
	if (v->tag == FSNP_MAP) {
		if (check_keys(v, positional_of(single), &sub) != 0) {
			return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
			                 "ERR native flow item is invalid");
		}
		collect(v, true, item);
	} else if (v->tag != FSNP_ARRAY || item_list(single, v, item) != 0) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native flow item is invalid");
	}
	/* The batch's shared options, where the item has none. */
	for (unsigned f = 0; f < FF_COUNT_FIELDS; f++) {
		if (!item->f[f].set && batch->f[f].set && f != FF_ITEMS &&
		    f != FF_INDEPENDENT && f != FF_RETURN) {
			item->f[f] = batch->f[f];
		}
	}
	if (finish(positional_of(single), item, &sub) != 0) {
		if (sub.status == FLOW_STATUS_BAD_REQUEST) {
			return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
			                 "ERR native flow item is invalid");
		}
		*err = sub;
		return -1;
	}
	return 0;
}
