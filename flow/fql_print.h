/* FQL1 printer: a parsed query back into canonical FQL1 text (upper-case
 * keywords, single spaces, explicit ASC/DESC, dotted metadata selectors
 * where every segment is a plain name and bracket selectors otherwise), and
 * the redacted form static EXPLAIN shows: the same text with every literal
 * and parameter printed as ?, so it is deterministic for a query's shape
 * and names no value, and that text's SHA-256 as EXPLAIN's fingerprint.
 * Parsing the canonical text gives the same query
 * (fql_query_equal). */
#ifndef FLOW_FQL_PRINT_H
#define FLOW_FQL_PRINT_H

#include "flow/fql_parse.h"
#include "wire/buf.h"

/* Append q's canonical text to out (no NUL). 0, or -1 when out ran out of
 * memory. */
int fql_print(const struct fql_query *q, struct wbuf *out);
/* Append q's redacted text to out. 0 or -1. */
int fql_print_redacted(const struct fql_query *q, struct wbuf *out);
/* EXPLAIN's query_fingerprint: the SHA-256 of the redacted text, as 64
 * lower-case hex digits and a NUL, so queries differing only in values
 * share it. 0, or -1 when memory ran out. */
int fql_print_fingerprint(const struct fql_query *q, char out[65]);
/* Append one field's canonical selector. 0 or -1. */
int fql_print_field(const struct fql_field *f, struct wbuf *out);

#endif /* FLOW_FQL_PRINT_H */
