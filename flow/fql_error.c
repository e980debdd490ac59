/* FQL1 query errors: the fixed code/message table, statuses, retry flags and
 * the diagnostic's error map (flow/fql_error.h). */
#include "flow/fql_error.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *code;
	const char *message;
} errors[FQL_CODES] = {
    [FQL_DUPLICATE_PROJECTION_FIELD] =
        {"duplicate_projection_field",
         "ERR FQL1 return projection contains a duplicate field"},
    [FQL_INVALID_PARAMETERS] = {"invalid_parameters",
                                "ERR FQL1 parameters must be an object"},
    [FQL_INVALID_PARAMETER_TYPE] = {"invalid_parameter_type",
                                    "ERR FQL1 parameter has an invalid type"},
    [FQL_INVALID_SYNTAX] = {"invalid_syntax", "ERR FQL1 invalid syntax"},
    [FQL_MISSING_PARAMETER] = {"missing_parameter",
                               "ERR FQL1 parameter is missing"},
    [FQL_QUERY_CONCURRENCY_EXCEEDED] =
        {"query_concurrency_exceeded",
         "ERR Flow query concurrency limit exceeded"},
    [FQL_QUERY_CURSOR_EXPIRED] = {"query_cursor_expired",
                                  "ERR Flow query cursor expired"},
    [FQL_QUERY_CURSOR_INVALID] = {"query_cursor_invalid",
                                  "ERR Flow query cursor is invalid"},
    [FQL_QUERY_CURSOR_TOO_LARGE] =
        {"query_cursor_too_large",
         "ERR Flow query cursor exceeds the byte limit"},
    [FQL_QUERY_DEADLINE_EXCEEDED] = {"query_deadline_exceeded",
                                     "ERR Flow query deadline exceeded"},
    [FQL_QUERY_ENGINE_FAILURE] = {"query_engine_failure",
                                  "ERR Flow query engine failed"},
    [FQL_QUERY_HYDRATION_BUDGET_EXCEEDED] =
        {"query_hydration_budget_exceeded",
         "ERR Flow query hydration budget exceeded"},
    [FQL_QUERY_MEMORY_BUDGET_EXCEEDED] =
        {"query_memory_budget_exceeded",
         "ERR Flow query memory budget exceeded"},
    [FQL_QUERY_NO_BOUNDED_PLAN] =
        {"query_no_bounded_plan",
         "ERR Flow query has no bounded execution plan"},
    [FQL_QUERY_PROJECTION_CHANGED] =
        {"query_projection_changed",
         "ERR Flow visibility projection changed during the query"},
    [FQL_QUERY_PROJECTION_LIMIT_EXCEEDED] =
        {"query_projection_limit_exceeded",
         "ERR FQL1 return projection exceeds the field limit"},
    [FQL_QUERY_RANGE_BUDGET_EXCEEDED] =
        {"query_range_budget_exceeded", "ERR Flow query range budget exceeded"},
    [FQL_QUERY_RESPONSE_BUDGET_EXCEEDED] =
        {"query_response_budget_exceeded",
         "ERR Flow query response budget exceeded"},
    [FQL_QUERY_RESULT_BUDGET_EXCEEDED] =
        {"query_result_budget_exceeded",
         "ERR Flow query result budget exceeded"},
    [FQL_QUERY_SCAN_BUDGET_EXCEEDED] = {"query_scan_budget_exceeded",
                                        "ERR Flow query scan budget exceeded"},
    [FQL_QUERY_SCAN_BYTE_BUDGET_EXCEEDED] =
        {"query_scan_byte_budget_exceeded",
         "ERR Flow query scan byte budget exceeded"},
    [FQL_QUERY_STORAGE_INCONSISTENT] =
        {"query_storage_inconsistent",
         "ERR Flow query storage record is inconsistent"},
    [FQL_QUERY_STORAGE_UNAVAILABLE] = {"query_storage_unavailable",
                                       "ERR Flow query storage is unavailable"},
    [FQL_QUERY_TOO_LARGE] = {"query_too_large",
                             "ERR FQL1 query exceeds the byte limit"},
    [FQL_QUERY_VALUE_TOO_LARGE] = {"query_value_too_large",
                                   "ERR FQL1 value exceeds the byte limit"},
    [FQL_UNEXPECTED_PARAMETER] = {"unexpected_parameter",
                                  "ERR FQL1 received an unexpected parameter"},
    [FQL_UNSUPPORTED_FIELD] = {"unsupported_field",
                               "ERR FQL1 field is not supported"},
    [FQL_UNSUPPORTED_QUERY_SHAPE] = {"unsupported_query_shape",
                                     "ERR FQL1 query shape is not supported"},
    [FQL_UNSUPPORTED_QUERY_VERSION] = {"unsupported_query_version",
                                       "ERR unsupported FQL version"},
    [FQL_UNSUPPORTED_SOURCE] = {"unsupported_source",
                                "ERR FQL1 source is not supported"},
    [FQL_UNAUTHORIZED_SCOPE] = {"unauthorized_scope",
                                "NOPERM Flow query scope is not authorized"},
};

/* Sorted by byte order (checked by the unit tests). Both metadata syntaxes
 * are listed with placeholders, never a rejected name. */
static const char *const run_fields[] = {
    "attempts",
    "attribute.<name>",
    "attribute['<name>']",
    "attributes",
    "correlation_id",
    "created_at_ms",
    "lease_deadline_ms",
    "max_active_ms",
    "next_run_at_ms",
    "parent_flow_id",
    "partition_key",
    "priority",
    "root_flow_id",
    "run_id",
    "run_state",
    "state",
    "state_meta",
    "state_meta.<state>.<name>",
    "state_meta['<state>']['<name>']",
    "type",
    "updated_at_ms",
    "version",
};

static const char *const event_fields[] = {
    "event_id",         "fields",        "fields.<name>",
    "fields['<name>']", "partition_key", "run_id",
};

const char *fql_code_name(unsigned code)
{
	return code > 0 && code < FQL_CODES ? errors[code].code : NULL;
}

const char *fql_code_message(unsigned code)
{
	return code > 0 && code < FQL_CODES ? errors[code].message : NULL;
}

int fql_code_lookup(const char *name, size_t len)
{
	for (unsigned i = 1; i < FQL_CODES; i++) {
		if (strlen(errors[i].code) == len &&
		    memcmp(errors[i].code, name, len) == 0) {
			return (int)i;
		}
	}
	return -1;
}

enum fsnp_status fql_code_status(unsigned code)
{
	switch (code) {
	case FQL_UNAUTHORIZED_SCOPE:
		return FSNP_STATUS_NOPERM;
	case FQL_QUERY_ENGINE_FAILURE:
	case FQL_QUERY_PROJECTION_CHANGED:
	case FQL_QUERY_STORAGE_INCONSISTENT:
	case FQL_QUERY_STORAGE_UNAVAILABLE:
		return FSNP_STATUS_ERROR;
	default:
		return FSNP_STATUS_BAD_REQUEST;
	}
}

bool fql_code_retryable(unsigned code)
{
	return code == FQL_QUERY_PROJECTION_CHANGED ||
	       code == FQL_QUERY_STORAGE_UNAVAILABLE;
}

void fql_diag_set(struct fql_diag *d, enum fql_code code, const char *detail,
                  const char *hint)
{
	memset(d, 0, sizeof *d);
	d->code = code;
	d->detail = detail;
	d->hint = hint;
}

void fql_diag_at(struct fql_diag *d, const char *text, size_t len, size_t at)
{
	if (at > len) {
		at = len;
	}
	uint32_t line = 1, column = 1;
	for (size_t i = 0; i < at; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c == '\n') {
			line++;
			column = 1;
		} else if ((c & 0xC0) != 0x80) {
			column++;
		}
	}
	d->has_position = true;
	d->byte = (uint32_t)at + 1;
	d->line = line;
	d->column = column;
}

size_t fql_context_fields(enum fql_context ctx, const char *const **names)
{
	switch (ctx) {
	case FQL_CTX_RUN_FIELDS:
		*names = run_fields;
		return sizeof run_fields / sizeof run_fields[0];
	case FQL_CTX_EVENT_FIELDS:
		*names = event_fields;
		return sizeof event_fields / sizeof event_fields[0];
	default:
		*names = NULL;
		return 0;
	}
}

void fql_diag_write(const struct fql_diag *d, struct fsnp_writer *w)
{
	unsigned code = d->code;
	if (fql_code_name(code) == NULL) {
		code = FQL_QUERY_ENGINE_FAILURE;
	}
	bool retry = fql_code_retryable(code);
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "code");
	fsnp_w_str(w, fql_code_name(code));
	fsnp_w_key(w, "message");
	fsnp_w_str(w, fql_code_message(code));
	fsnp_w_key(w, "retryable");
	fsnp_w_bool(w, retry);
	fsnp_w_key(w, "safe_to_retry");
	fsnp_w_bool(w, retry);
	fsnp_w_key(w, "retry_after_ms");
	fsnp_w_i64(w, 0);
	if (d->detail != NULL) {
		fsnp_w_key(w, "detail");
		fsnp_w_str(w, d->detail);
	}
	if (d->hint != NULL) {
		fsnp_w_key(w, "hint");
		fsnp_w_str(w, d->hint);
	}
	if (d->has_position) {
		fsnp_w_key(w, "position");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "byte");
		fsnp_w_i64(w, d->byte);
		fsnp_w_key(w, "line");
		fsnp_w_i64(w, d->line);
		fsnp_w_key(w, "column");
		fsnp_w_i64(w, d->column);
		fsnp_w_map_end(w);
	}
	const char *const *names;
	size_t n = fql_context_fields(d->context, &names);
	if (n > 0) {
		fsnp_w_key(w, "context");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "supported_fields");
		fsnp_w_array_begin(w);
		for (size_t i = 0; i < n; i++) {
			fsnp_w_str(w, names[i]);
		}
		fsnp_w_array_end(w);
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
}

int fql_diag_format(const struct fql_diag *d, char *out, size_t cap)
{
	const char *msg = fql_code_message(d->code);
	if (msg == NULL) {
		msg = fql_code_message(FQL_QUERY_ENGINE_FAILURE);
	}
	char pos[80] = "";
	if (d->has_position) {
		snprintf(pos, sizeof pos, " at line %u, column %u (byte %u)",
		         (unsigned)d->line, (unsigned)d->column,
		         (unsigned)d->byte);
	}
	return snprintf(out, cap, "%s%s%s%s%s%s", msg, pos,
	                d->detail ? "; DETAIL: " : "",
	                d->detail ? d->detail : "", d->hint ? "; HINT: " : "",
	                d->hint ? d->hint : "");
}
