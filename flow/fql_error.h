/* FQL1 query errors: the fixed, value-free codes and messages of FLOW.QUERY
 * failures, their FSNP status and retry flags, and a diagnostic (position,
 * bounded detail and hint, context) written as the error map
 *
 *   {code, message, retryable, safe_to_retry, retry_after_ms,
 *    [detail], [hint], [position: {byte, line, column}], [context]}
 *
 * Positions are one-based: the byte offset, the line, and the column counted
 * in UTF-8 characters. Details and hints are static texts that never quote
 * the query's values or rejected identifiers. */
#ifndef FLOW_FQL_ERROR_H
#define FLOW_FQL_ERROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/fsnp_value.h"

enum fql_code {
	FQL_OK = 0,
	FQL_DUPLICATE_PROJECTION_FIELD,
	FQL_INVALID_PARAMETERS,
	FQL_INVALID_PARAMETER_TYPE,
	FQL_INVALID_SYNTAX,
	FQL_MISSING_PARAMETER,
	FQL_QUERY_CONCURRENCY_EXCEEDED,
	FQL_QUERY_CURSOR_EXPIRED,
	FQL_QUERY_CURSOR_INVALID,
	FQL_QUERY_CURSOR_TOO_LARGE,
	FQL_QUERY_DEADLINE_EXCEEDED,
	FQL_QUERY_ENGINE_FAILURE,
	FQL_QUERY_HYDRATION_BUDGET_EXCEEDED,
	FQL_QUERY_MEMORY_BUDGET_EXCEEDED,
	FQL_QUERY_NO_BOUNDED_PLAN,
	FQL_QUERY_PROJECTION_CHANGED,
	FQL_QUERY_PROJECTION_LIMIT_EXCEEDED,
	FQL_QUERY_RANGE_BUDGET_EXCEEDED,
	FQL_QUERY_RESPONSE_BUDGET_EXCEEDED,
	FQL_QUERY_RESULT_BUDGET_EXCEEDED,
	FQL_QUERY_SCAN_BUDGET_EXCEEDED,
	FQL_QUERY_SCAN_BYTE_BUDGET_EXCEEDED,
	FQL_QUERY_STORAGE_INCONSISTENT,
	FQL_QUERY_STORAGE_UNAVAILABLE,
	FQL_QUERY_TOO_LARGE,
	FQL_QUERY_VALUE_TOO_LARGE,
	FQL_UNEXPECTED_PARAMETER,
	FQL_UNSUPPORTED_FIELD,
	FQL_UNSUPPORTED_QUERY_SHAPE,
	FQL_UNSUPPORTED_QUERY_VERSION,
	FQL_UNSUPPORTED_SOURCE,
	FQL_UNAUTHORIZED_SCOPE,
	FQL_CODES /* number of codes */
};

/* "invalid_syntax", ...; NULL for FQL_OK or out of range. */
const char *fql_code_name(unsigned code);
/* "ERR FQL1 invalid syntax", ...; NULL for FQL_OK or out of range. */
const char *fql_code_message(unsigned code);
/* The code named `name`, or -1. */
int fql_code_lookup(const char *name, size_t len);
/* The FSNP status of a failure: noperm for unauthorized_scope, error for
 * storage and engine failures and projection changes, bad_request for the
 * rest. */
enum fsnp_status fql_code_status(unsigned code);
/* Retryable (and then also safe to retry): query_projection_changed and
 * query_storage_unavailable only. */
bool fql_code_retryable(unsigned code);

/* Which value-free context a diagnostic carries. */
enum fql_context {
	FQL_CTX_NONE,
	FQL_CTX_RUN_FIELDS,   /* supported_fields of FROM runs */
	FQL_CTX_EVENT_FIELDS, /* supported_fields of FROM events */
};

struct fql_diag {
	enum fql_code code;
	bool has_position;
	uint32_t byte; /* one-based */
	uint32_t line;
	uint32_t column;    /* UTF-8 characters, one-based */
	const char *detail; /* static text or NULL */
	const char *hint;   /* static text or NULL */
	enum fql_context context;
};

/* Set d to `code` with detail and hint (either may be NULL), no position. */
void fql_diag_set(struct fql_diag *d, enum fql_code code, const char *detail,
                  const char *hint);
/* Set d's position from the zero-based byte offset `at` in text[0..len)
 * (at == len: the end of the text). */
void fql_diag_at(struct fql_diag *d, const char *text, size_t len, size_t at);

/* The sorted supported_fields list of a context: count and names. */
size_t fql_context_fields(enum fql_context ctx, const char *const **names);

/* Write d as the error map (one typed value) through w. */
void fql_diag_write(const struct fql_diag *d, struct fsnp_writer *w);

/* One-line text of d: message, then " at line L, column C (byte B)" and
 * "; DETAIL: ..." / "; HINT: ..." when present. Truncated to fit; returns
 * what snprintf would. */
int fql_diag_format(const struct fql_diag *d, char *out, size_t cap);

#endif /* FLOW_FQL_ERROR_H */
