/* Unit tests for the FQL1 modules: flow/fql_lex, flow/fql_parse (parser,
 * shape rules, binder, shape summary), flow/fql_print (canonical and
 * redacted text) and flow/fql_error (codes, messages, error maps). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow/fql_error.h"
#include "flow/fql_parse.h"
#include "flow/fql_print.h"
#include "flow/fql_shape.h"
#include "wire/fsnp_fqr.h"
#include "wire/fsnp_value.h"

static struct fql_query q, q2;

static char *print_query(const struct fql_query *query, bool redacted)
{
	struct wbuf b;
	wbuf_init(&b);
	assert_int_equal(
	    redacted ? fql_print_redacted(query, &b) : fql_print(query, &b), 0);
	char *s = malloc(b.len + 1);
	assert_non_null(s);
	memcpy(s, b.data, b.len);
	s[b.len] = '\0';
	wbuf_free(&b);
	return s;
}

static int parse(const char *text, struct fql_diag *d)
{
	return fql_parse(text, strlen(text), &q, d);
}

/* Valid queries and their canonical text (NULL: the input is canonical). */
static const struct {
	const char *in;
	const char *canonical;
} valid[] = {
    {"FROM runs WHERE run_id = @id RETURN RECORD", NULL},
    {"FROM runs WHERE partition_key = @p AND run_id = @id RETURN RECORD", NULL},
    {"from RUNS where RUN_ID = 'r-1' and Partition_Key = 'tenant' return "
     "record;",
     "FROM runs WHERE run_id = 'r-1' AND partition_key = 'tenant' RETURN "
     "RECORD"},
    {"FROM runs WHERE run_id = @id RETURN RECORD (run_id, state, "
     "attributes, attribute.region, state_meta['review']['ai.model'])",
     NULL},
    {"FROM runs WHERE partition_key = @partition AND type = @type AND "
     "state = @state ORDER BY updated_at_ms DESC LIMIT 50 RETURN RECORDS",
     NULL},
    {"FROM runs\nWHERE partition_key = @tenant\n  AND state IN ('failed', "
     "'completed')\n  AND updated_at_ms FROM @from_ms TO @until_ms\nORDER "
     "BY updated_at_ms DESC\nLIMIT 50\nCURSOR @cursor\nRETURN RECORDS",
     "FROM runs WHERE partition_key = @tenant AND state IN ('failed', "
     "'completed') AND updated_at_ms FROM @from_ms TO @until_ms ORDER BY "
     "updated_at_ms DESC LIMIT 50 CURSOR @cursor RETURN RECORDS"},
    {"FROM runs WHERE partition_key = @tenant AND type = 'invoice' AND "
     "state IN ('failed', 'completed') RETURN COUNT",
     NULL},
    {"FROM runs WHERE partition_key = 'p' AND priority BETWEEN -5 AND 10 "
     "ORDER BY priority, created_at_ms desc LIMIT 1 RETURN RECORDS",
     "FROM runs WHERE partition_key = 'p' AND priority BETWEEN -5 AND 10 "
     "ORDER BY priority ASC, created_at_ms DESC LIMIT 1 RETURN RECORDS"},
    {"FROM runs WHERE partition_key = @p AND parent_flow_id IS NULL AND "
     "correlation_id IS MISSING ORDER BY updated_at_ms ASC LIMIT 100 "
     "RETURN RECORDS",
     NULL},
    {"FROM runs WHERE partition_key = @p AND attribute['customer.region'] "
     "= 'eu' AND state_meta.review.risk_tier = 3 ORDER BY updated_at_ms "
     "DESC LIMIT 10 RETURN RECORDS",
     NULL},
    {"FROM runs WHERE partition_key = @p AND attribute['region'] = @r "
     "ORDER BY updated_at_ms DESC LIMIT 10 RETURN RECORDS",
     "FROM runs WHERE partition_key = @p AND attribute.region = @r ORDER "
     "BY updated_at_ms DESC LIMIT 10 RETURN RECORDS"},
    {"FROM runs WHERE partition_key = @p AND attribute['it''s'] = 'o''k' "
     "ORDER BY version DESC LIMIT 5 RETURN RECORDS",
     NULL},
    {"FROM runs WHERE partition_key = @p AND state_meta['__sys']['k'] = 1 "
     "ORDER BY attempts DESC LIMIT 5 RETURN RECORDS (attributes, "
     "state_meta)",
     NULL},
    {"FROM events WHERE run_id = @id ORDER BY event_id DESC LIMIT 20 "
     "RETURN RECORDS",
     NULL},
    {"FROM events WHERE partition_key = @p AND run_id = @id ORDER BY "
     "event_id LIMIT 20 RETURN RECORDS (event_id, fields.status, "
     "fields['a b'])",
     "FROM events WHERE partition_key = @p AND run_id = @id ORDER BY "
     "event_id ASC LIMIT 20 RETURN RECORDS (event_id, fields.status, "
     "fields['a b'])"},
    {"FROM events WHERE run_id = 'r' ORDER BY event_id DESC LIMIT 1 "
     "RETURN RECORD (fields)",
     NULL},
    {"EXPLAIN FROM runs WHERE partition_key = @p ORDER BY updated_at_ms "
     "DESC LIMIT 10 RETURN RECORDS",
     NULL},
    {"explain analyze FROM runs WHERE partition_key = @p RETURN COUNT",
     "EXPLAIN ANALYZE FROM runs WHERE partition_key = @p RETURN COUNT"},
    {"FROM runs WHERE partition_key = 'caf\xc3\xa9' AND type = "
     "'\xe2\x82\xac' ORDER BY next_run_at_ms ASC, lease_deadline_ms DESC "
     "LIMIT 7 RETURN RECORDS",
     NULL},
    {"  FROM runs WHERE run_id = @id RETURN RECORD ;  ",
     "FROM runs WHERE run_id = @id RETURN RECORD"},
    {"FROM runs WHERE partition_key = @p AND attribute.tier IN (1, 2, "
     "'gold') AND max_active_ms BETWEEN @a AND @b ORDER BY max_active_ms "
     "DESC LIMIT 3 RETURN RECORDS",
     NULL},
};

static void test_valid(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
		struct fql_diag d;
		int rv = parse(valid[i].in, &d);
		if (rv != 0) {
			fail_msg("case %zu: %s at byte %u: %s", i,
			         fql_code_name(d.code), d.byte,
			         d.detail ? d.detail : "");
		}
		char *out = print_query(&q, false);
		const char *want =
		    valid[i].canonical ? valid[i].canonical : valid[i].in;
		if (strcmp(out, want) != 0) {
			fail_msg("case %zu: printed\n%s\nwanted\n%s", i, out,
			         want);
		}
		/* the canonical text parses to the same query */
		assert_int_equal(fql_parse(out, strlen(out), &q2, &d), 0);
		assert_true(fql_query_equal(&q, &q2));
		free(out);
	}
}

/* Invalid queries: code and one-based byte, line and column. */
static const struct {
	const char *in;
	enum fql_code code;
	uint32_t byte, line, column;
} invalid[] = {
    {"", FQL_INVALID_SYNTAX, 1, 1, 1},
    {"   ", FQL_INVALID_SYNTAX, 4, 1, 4},
    {"SELECT run_id FROM runs", FQL_INVALID_SYNTAX, 1, 1, 1},
    {"FROM runs WHERE * = 1 RETURN COUNT", FQL_INVALID_SYNTAX, 17, 1, 17},
    {"FROM tables WHERE run_id = @id RETURN RECORD", FQL_UNSUPPORTED_SOURCE, 6,
     1, 6},
    {"FROM WHERE run_id = @id RETURN RECORD", FQL_INVALID_SYNTAX, 6, 1, 6},
    {"FROM runs run_id = @id RETURN RECORD", FQL_INVALID_SYNTAX, 11, 1, 11},
    {"FROM runs WHERE run_id = @id", FQL_INVALID_SYNTAX, 29, 1, 29},
    {"FROM runs WHERE run_id = @id RETURN", FQL_INVALID_SYNTAX, 36, 1, 36},
    {"FROM runs WHERE run_id = @id RETURN ROWS", FQL_INVALID_SYNTAX, 37, 1, 37},
    {"FROM runs WHERE run_id = RETURN RECORD", FQL_INVALID_SYNTAX, 26, 1, 26},
    {"FROM runs WHERE run_id == @id RETURN RECORD", FQL_INVALID_SYNTAX, 25, 1,
     25},
    {"FROM runs WHERE run_id = @id OR run_id = @x RETURN RECORD",
     FQL_INVALID_SYNTAX, 30, 1, 30},
    {"FROM runs WHERE NOT run_id = @id RETURN RECORD", FQL_UNSUPPORTED_FIELD,
     17, 1, 17},
    {"FROM runs WHERE run_id = 'abc RETURN RECORD", FQL_INVALID_SYNTAX, 26, 1,
     26},
    {"FROM runs WHERE run_id = @ RETURN RECORD", FQL_INVALID_SYNTAX, 26, 1, 26},
    {"FROM runs WHERE run_id = @1x RETURN RECORD", FQL_INVALID_SYNTAX, 26, 1,
     26},
    {"FROM runs WHERE run_id = @id RETURN RECORD;;", FQL_INVALID_SYNTAX, 44, 1,
     44},
    {"FROM runs WHERE run_id = @id RETURN RECORD extra", FQL_INVALID_SYNTAX, 44,
     1, 44},
    {"FROM runs WHERE run_id = @id # RETURN RECORD", FQL_INVALID_SYNTAX, 30, 1,
     30},
    {"FROM runs WHERE run_id = @id\n  AND\n  colour = 'x' RETURN RECORD",
     FQL_UNSUPPORTED_FIELD, 38, 3, 3},
    {"FROM runs\nWHERE partition_key = 'caf\xc3\xa9' AND bogus = 1 ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_UNSUPPORTED_FIELD, 45, 2, 34},
    {"FROM runs WHERE run_id = '\xff' RETURN RECORD", FQL_INVALID_SYNTAX, 27, 1,
     27},
    {"FROM runs WHERE run_id = '\xe2\x82' RETURN RECORD", FQL_INVALID_SYNTAX,
     27, 1, 27},
    {"FROM runs WHERE priority = 99999999999999999999 AND partition_key = "
     "@p RETURN COUNT",
     FQL_INVALID_PARAMETER_TYPE, 28, 1, 28},
    {"FROM runs WHERE priority = 12abc RETURN COUNT", FQL_INVALID_SYNTAX, 30, 1,
     30},
    {"FROM runs WHERE run_id = 5 RETURN RECORD", FQL_INVALID_PARAMETER_TYPE, 26,
     1, 26},
    {"FROM runs WHERE run_id = '' RETURN RECORD", FQL_INVALID_PARAMETER_TYPE,
     26, 1, 26},
    {"FROM runs WHERE partition_key = @p AND priority = 'high' RETURN COUNT",
     FQL_INVALID_PARAMETER_TYPE, 51, 1, 51},
    /* shapes */
    {"FROM runs WHERE state = @s ORDER BY updated_at_ms DESC LIMIT 5 "
     "RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 17, 1, 17},
    {"FROM runs WHERE partition_key = @p AND partition_key = @q ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 40, 1, 40},
    {"FROM runs WHERE partition_key IN (@p, @q) RETURN COUNT",
     FQL_UNSUPPORTED_QUERY_SHAPE, 17, 1, 17},
    {"FROM runs WHERE partition_key = @p RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 36, 1, 36},
    {"FROM runs WHERE partition_key = @p ORDER BY updated_at_ms DESC "
     "RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 64, 1, 64},
    {"FROM runs WHERE partition_key = @p ORDER BY state DESC LIMIT 5 RETURN "
     "RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 45, 1, 45},
    {"FROM runs WHERE partition_key = @p ORDER BY run_id LIMIT 5 RETURN "
     "RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 45, 1, 45},
    {"FROM runs WHERE partition_key = @p ORDER BY attribute.x LIMIT 5 "
     "RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 45, 1, 45},
    {"FROM runs WHERE partition_key = @p ORDER BY version, version LIMIT 5 "
     "RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 54, 1, 54},
    {"FROM runs WHERE partition_key = @p ORDER BY colour LIMIT 5 RETURN "
     "RECORDS",
     FQL_UNSUPPORTED_FIELD, 45, 1, 45},
    {"FROM runs WHERE partition_key = @p ORDER BY updated_at_ms LIMIT 5 "
     "RETURN COUNT",
     FQL_UNSUPPORTED_QUERY_SHAPE, 36, 1, 36},
    {"FROM runs WHERE partition_key = @p LIMIT 5 RETURN COUNT",
     FQL_UNSUPPORTED_QUERY_SHAPE, 36, 1, 36},
    {"FROM runs WHERE partition_key = @p RETURN COUNT (state)",
     FQL_UNSUPPORTED_QUERY_SHAPE, 49, 1, 49},
    {"FROM runs WHERE run_id = @id ORDER BY version LIMIT 1 RETURN RECORD",
     FQL_UNSUPPORTED_QUERY_SHAPE, 30, 1, 30},
    {"FROM runs WHERE run_id = @id AND type = @t RETURN RECORD",
     FQL_UNSUPPORTED_QUERY_SHAPE, 17, 1, 17},
    {"FROM runs WHERE run_id IN (@a, @b) RETURN RECORD",
     FQL_UNSUPPORTED_QUERY_SHAPE, 17, 1, 17},
    {"FROM runs WHERE partition_key = @p AND run_id = @id ORDER BY version "
     "LIMIT 1 RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 17, 1, 17},
    {"FROM runs WHERE partition_key = @p AND state FROM @a TO @b ORDER BY "
     "version LIMIT 1 RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND priority BETWEEN 10 AND 5 "
     "RETURN COUNT",
     FQL_UNSUPPORTED_QUERY_SHAPE, 57, 1, 57},
    {"FROM runs WHERE partition_key = @p AND priority BETWEEN 1 AND "
     "RETURN COUNT",
     FQL_INVALID_SYNTAX, 63, 1, 63},
    {"FROM runs WHERE partition_key = @p AND state IN ('a', 'b', 'a') "
     "RETURN COUNT",
     FQL_INVALID_SYNTAX, 60, 1, 60},
    {"FROM runs WHERE partition_key = @p AND state IN () RETURN COUNT",
     FQL_INVALID_SYNTAX, 50, 1, 50},
    {"FROM runs WHERE partition_key = @p AND state IS EMPTY RETURN COUNT",
     FQL_INVALID_SYNTAX, 49, 1, 49},
    {"EXPLAIN FROM runs WHERE partition_key = @p ORDER BY version LIMIT 5 "
     "CURSOR @c RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 76, 1, 76},
    {"FROM runs WHERE partition_key = @p ORDER BY version LIMIT 5 CURSOR "
     "'fqc1_x' RETURN RECORDS",
     FQL_INVALID_SYNTAX, 68, 1, 68},
    {"FROM runs WHERE partition_key = @p ORDER BY version LIMIT @n RETURN "
     "RECORDS",
     FQL_INVALID_SYNTAX, 59, 1, 59},
    /* selectors */
    {"FROM runs WHERE partition_key = @p AND attribute.a.b = 1 RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND attribute.__x = 1 RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND attribute[''] = 1 RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND attribute[x] = 1 RETURN COUNT",
     FQL_INVALID_SYNTAX, 50, 1, 50},
    {"FROM runs WHERE partition_key = @p AND attribute['x' = 1 RETURN "
     "COUNT",
     FQL_INVALID_SYNTAX, 54, 1, 54},
    {"FROM runs WHERE partition_key = @p AND state_meta['s'] = 1 RETURN "
     "COUNT",
     FQL_INVALID_SYNTAX, 56, 1, 56},
    {"FROM runs WHERE partition_key = @p AND state_meta.s = 1 RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND attributes = 1 RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM runs WHERE partition_key = @p AND event_id = 'e' RETURN COUNT",
     FQL_UNSUPPORTED_FIELD, 40, 1, 40},
    {"FROM events WHERE run_id = @id AND type = @t ORDER BY event_id LIMIT "
     "5 RETURN RECORDS",
     FQL_UNSUPPORTED_FIELD, 36, 1, 36},
    {"FROM events WHERE run_id = @id ORDER BY event_id LIMIT 5 RETURN "
     "COUNT",
     FQL_UNSUPPORTED_QUERY_SHAPE, 58, 1, 58},
    {"FROM events WHERE run_id = @id LIMIT 5 RETURN RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 40, 1, 40},
    {"FROM events WHERE partition_key = @p ORDER BY event_id LIMIT 5 RETURN "
     "RECORDS",
     FQL_UNSUPPORTED_QUERY_SHAPE, 19, 1, 19},
    {"FROM events WHERE run_id = @id ORDER BY event_id LIMIT 5 RETURN "
     "RECORDS (state)",
     FQL_UNSUPPORTED_FIELD, 74, 1, 74},
    /* projections */
    {"FROM runs WHERE run_id = @id RETURN RECORD ()", FQL_INVALID_SYNTAX, 45, 1,
     45},
    {"FROM runs WHERE run_id = @id RETURN RECORD (state, state)",
     FQL_DUPLICATE_PROJECTION_FIELD, 52, 1, 52},
    {"FROM runs WHERE run_id = @id RETURN RECORD (attribute.x, "
     "attribute['x'])",
     FQL_DUPLICATE_PROJECTION_FIELD, 58, 1, 58},
    {"FROM runs WHERE run_id = @id RETURN RECORD (payload)",
     FQL_UNSUPPORTED_FIELD, 45, 1, 45},
    {"FROM runs WHERE run_id = @id RETURN RECORD (state", FQL_INVALID_SYNTAX,
     50, 1, 50},
};

static void test_invalid(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
		struct fql_diag d;
		int rv = parse(invalid[i].in, &d);
		if (rv != (int)invalid[i].code || d.code != invalid[i].code ||
		    !d.has_position || d.byte != invalid[i].byte ||
		    d.line != invalid[i].line ||
		    d.column != invalid[i].column) {
			bad++;
			print_error(
			    "case %zu (%s): got %s at byte %u line %u "
			    "column %u (%s), wanted %s at %u %u %u\n",
			    i, invalid[i].in, fql_code_name(d.code), d.byte,
			    d.line, d.column, d.detail ? d.detail : "",
			    fql_code_name(invalid[i].code), invalid[i].byte,
			    invalid[i].line, invalid[i].column);
		}
		/* unsupported fields carry the supported list */
		if (invalid[i].code == FQL_UNSUPPORTED_FIELD) {
			assert_int_not_equal(d.context, FQL_CTX_NONE);
		}
	}
	assert_int_equal(bad, 0);
}

static void test_positions(void **state)
{
	(void)state;
	struct fql_diag d;
	/* a NUL byte outside a string */
	static const char nul[] =
	    "FROM runs WHERE run_id = @id\0 RETURN RECORD";
	assert_int_equal(fql_parse(nul, sizeof nul - 1, &q, &d),
	                 FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, 29);
	/* inside a string it is a byte like any other */
	static const char nul_str[] = "FROM runs WHERE run_id = 'a\0b' RETURN "
	                              "RECORD";
	assert_int_equal(fql_parse(nul_str, sizeof nul_str - 1, &q, &d), 0);
	assert_int_equal(q.preds[0].v[0].len, 3);
	/* CRLF lines; a 4-byte character is one column */
	const char *crlf = "FROM runs\r\nWHERE run_id = '\xf0\x9f\x98\x80' "
	                   "?";
	assert_int_equal(parse(crlf, &d), FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, strlen(crlf));
	assert_int_equal(d.line, 2);
	assert_int_equal(d.column, 20);
	/* the end of an incomplete query on a later line */
	const char *end = "FROM runs\nWHERE\n";
	assert_int_equal(parse(end, &d), FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, strlen(end) + 1);
	assert_int_equal(d.line, 3);
	assert_int_equal(d.column, 1);
	/* overlong and surrogate encodings are not UTF-8 */
	assert_int_equal(parse("FROM runs WHERE run_id = '\xc0\xaf' RETURN "
	                       "RECORD",
	                       &d),
	                 FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, 27);
	assert_int_equal(parse("FROM runs WHERE run_id = '\xed\xa0\x80' "
	                       "RETURN RECORD",
	                       &d),
	                 FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, 27);
	/* the widest integers */
	assert_int_equal(parse("FROM runs WHERE partition_key = 'p' AND "
	                       "priority BETWEEN -9223372036854775808 AND "
	                       "9223372036854775807 RETURN COUNT",
	                       &d),
	                 0);
	assert_true(q.preds[1].v[0].i == INT64_MIN);
	assert_true(q.preds[1].v[1].i == INT64_MAX);
	assert_int_equal(parse("FROM runs WHERE partition_key = 'p' AND "
	                       "priority = 9223372036854775808 RETURN COUNT",
	                       &d),
	                 FQL_INVALID_PARAMETER_TYPE);
	assert_int_equal(parse("FROM runs WHERE partition_key = 'p' AND "
	                       "priority = -9223372036854775809 RETURN COUNT",
	                       &d),
	                 FQL_INVALID_PARAMETER_TYPE);
	/* a 129-byte parameter name */
	char text[400];
	char name[130];
	memset(name, 'n', 129);
	name[129] = '\0';
	snprintf(text, sizeof text,
	         "FROM runs WHERE run_id = @%s RETURN RECORD", name);
	assert_int_equal(parse(text, &d), FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, 26);
	name[128] = '\0';
	snprintf(text, sizeof text,
	         "FROM runs WHERE run_id = @%s RETURN RECORD", name);
	assert_int_equal(parse(text, &d), 0);
}

/* ---- limits ---- */

struct sb {
	char s[40000];
	size_t n;
};

static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof b->s - b->n);
	b->n += (size_t)n;
}

static int parse_sb(struct sb *b, struct fql_diag *d)
{
	return fql_parse(b->s, b->n, &q, d);
}

static void test_limit_text(void **state)
{
	(void)state;
	static struct sb b;
	struct fql_diag d;
	/* exactly 16 KiB parses (padding is whitespace) */
	b.n = 0;
	sb_add(&b, "FROM runs WHERE run_id = @id RETURN RECORD");
	memset(b.s + b.n, ' ', FQL_MAX_TEXT - b.n);
	b.n = FQL_MAX_TEXT;
	assert_int_equal(parse_sb(&b, &d), 0);
	/* one byte more is too large, positioned just past the limit */
	b.s[b.n++] = ' ';
	assert_int_equal(parse_sb(&b, &d), FQL_QUERY_TOO_LARGE);
	assert_int_equal(d.byte, FQL_MAX_TEXT + 1);
	/* a long string literal fits as long as the text does */
	b.n = 0;
	sb_add(&b, "FROM runs WHERE run_id = '");
	memset(b.s + b.n, 'x', 16000);
	b.n += 16000;
	sb_add(&b, "' RETURN RECORD");
	assert_int_equal(parse_sb(&b, &d), 0);
	assert_int_equal(q.preds[0].v[0].len, 16000);
}

static void test_limit_tokens(void **state)
{
	(void)state;
	static struct sb b;
	struct fql_diag d;
	/* FROM runs WHERE partition_key = @p: 6 tokens; RETURN COUNT: 2; an
	 * "AND f IN (v, ...)" predicate of k values: 2k + 4. Ten of 9 values
	 * and one of 12 make 248, so the query has exactly 256 tokens. */
	unsigned tokens = 6 + 2;
	b.n = 0;
	sb_add(&b, "FROM runs WHERE partition_key = @p");
	for (unsigned p = 0; p < 11; p++) {
		unsigned k = p < 10 ? 9 : 12;
		sb_add(&b, " AND attribute.a%u IN (0", p);
		for (unsigned v = 1; v < k; v++) {
			sb_add(&b, ", %u", v);
		}
		sb_add(&b, ")");
		tokens += 2 * k + 4;
	}
	sb_add(&b, " RETURN COUNT");
	assert_int_equal(tokens, FQL_MAX_TOKENS);
	assert_int_equal(parse_sb(&b, &d), 0);
	assert_int_equal(q.npreds, FQL_MAX_PREDICATES);
	/* the 257th token: a trailing semicolon */
	size_t at = b.n;
	sb_add(&b, ";");
	assert_int_equal(parse_sb(&b, &d), FQL_QUERY_TOO_LARGE);
	assert_int_equal(d.byte, at + 1);
}

static void test_limit_predicates(void **state)
{
	(void)state;
	static struct sb b;
	struct fql_diag d;
	b.n = 0;
	sb_add(&b, "FROM runs WHERE partition_key = @p");
	for (unsigned i = 1; i < FQL_MAX_PREDICATES; i++) {
		sb_add(&b, " AND attribute.a%u = %u", i, i);
	}
	size_t at = b.n + 5; /* the 13th predicate's field */
	sb_add(&b, " RETURN COUNT");
	assert_int_equal(parse_sb(&b, &d), 0);
	assert_int_equal(q.npreds, FQL_MAX_PREDICATES);
	b.n -= strlen(" RETURN COUNT");
	sb_add(&b, " AND version = 1 RETURN COUNT");
	assert_int_equal(parse_sb(&b, &d), FQL_UNSUPPORTED_QUERY_SHAPE);
	assert_int_equal(d.byte, at + 1);
}

static void test_limit_in(void **state)
{
	(void)state;
	static struct sb b;
	struct fql_diag d;
	b.n = 0;
	sb_add(&b, "FROM runs WHERE partition_key = @p AND state IN ('s0'");
	for (unsigned i = 1; i < FQL_MAX_IN_VALUES; i++) {
		sb_add(&b, ", 's%u'", i);
	}
	size_t at = b.n + 2;
	sb_add(&b, ") RETURN COUNT");
	assert_int_equal(parse_sb(&b, &d), 0);
	assert_int_equal(q.preds[1].nvals, FQL_MAX_IN_VALUES);
	b.n -= strlen(") RETURN COUNT");
	sb_add(&b, ", 'sx') RETURN COUNT");
	assert_int_equal(parse_sb(&b, &d), FQL_UNSUPPORTED_QUERY_SHAPE);
	assert_int_equal(d.byte, at + 1);
}

static void test_limit_order(void **state)
{
	(void)state;
	struct fql_diag d;
	const char *two = "FROM runs WHERE partition_key = @p ORDER BY "
	                  "priority DESC, updated_at_ms LIMIT 5 RETURN "
	                  "RECORDS";
	assert_int_equal(parse(two, &d), 0);
	assert_int_equal(q.norder, 2);
	const char *three = "FROM runs WHERE partition_key = @p ORDER BY "
	                    "priority DESC, updated_at_ms, version LIMIT 5 "
	                    "RETURN RECORDS";
	assert_int_equal(parse(three, &d), FQL_UNSUPPORTED_QUERY_SHAPE);
	assert_int_equal(d.byte, strstr(three, "version") - three + 1);
}

static void test_limit_projection(void **state)
{
	(void)state;
	static struct sb b;
	struct fql_diag d;
	b.n = 0;
	sb_add(&b, "FROM runs WHERE run_id = @id RETURN RECORD (run_id");
	for (unsigned i = 1; i < FQL_MAX_PROJECTION; i++) {
		sb_add(&b, ", attribute.a%u", i);
	}
	size_t at = b.n + 2;
	sb_add(&b, ")");
	assert_int_equal(parse_sb(&b, &d), 0);
	assert_int_equal(q.nproj, FQL_MAX_PROJECTION);
	b.n--;
	sb_add(&b, ", state)");
	assert_int_equal(parse_sb(&b, &d), FQL_QUERY_PROJECTION_LIMIT_EXCEEDED);
	assert_int_equal(d.byte, at + 1);
}

static void test_limit_limit(void **state)
{
	(void)state;
	struct fql_diag d;
	static const struct {
		const char *n;
		int rv;
	} cases[] = {{"1", 0},
	             {"100", 0},
	             {"0", FQL_UNSUPPORTED_QUERY_SHAPE},
	             {"101", FQL_UNSUPPORTED_QUERY_SHAPE},
	             {"-1", FQL_UNSUPPORTED_QUERY_SHAPE}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[200];
		snprintf(text, sizeof text,
		         "FROM runs WHERE partition_key = @p ORDER BY version "
		         "LIMIT %s RETURN RECORDS",
		         cases[i].n);
		assert_int_equal(parse(text, &d), cases[i].rv);
		if (cases[i].rv != 0) {
			assert_int_equal(d.byte,
			                 strstr(text, "LIMIT") - text + 7);
		} else {
			assert_int_equal(q.limit, atoi(cases[i].n));
		}
	}
}

/* ---- binder ---- */

struct params {
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
};

static void params_begin(struct params *p)
{
	wbuf_init(&p->b);
	fsnp_w_init(&p->w, &p->b);
	fsnp_w_map_begin(&p->w);
}

static const struct fsnp_val *params_end(struct params *p)
{
	fsnp_w_map_end(&p->w);
	assert_int_equal(fsnp_w_finish(&p->w), 0);
	assert_int_equal(
	    fsnp_value_decode_body(p->b.data, p->b.len, NULL, &p->v), 0);
	return &p->v;
}

static const char *collection =
    "FROM runs WHERE partition_key = @p AND state IN (@s1, @s2) AND "
    "updated_at_ms FROM @from TO @to AND attribute.tier = @tier ORDER BY "
    "updated_at_ms DESC LIMIT 10 CURSOR @c RETURN RECORDS";

static void collection_params(struct params *p, const char *skip,
                              const char *extra)
{
	params_begin(p);
	if (strcmp(skip, "p")) {
		fsnp_w_key(&p->w, "p");
		fsnp_w_str(&p->w, "tenant-a");
	}
	if (strcmp(skip, "s1")) {
		fsnp_w_key(&p->w, "s1");
		fsnp_w_str(&p->w, "failed");
	}
	if (strcmp(skip, "s2")) {
		fsnp_w_key(&p->w, "s2");
		fsnp_w_str(&p->w, "completed");
	}
	if (strcmp(skip, "from")) {
		fsnp_w_key(&p->w, "from");
		fsnp_w_i64(&p->w, 1000);
	}
	if (strcmp(skip, "to")) {
		fsnp_w_key(&p->w, "to");
		fsnp_w_u64(&p->w, 2000);
	}
	if (strcmp(skip, "tier")) {
		fsnp_w_key(&p->w, "tier");
		fsnp_w_bool(&p->w, true);
	}
	if (strcmp(skip, "c")) {
		fsnp_w_key(&p->w, "c");
		fsnp_w_str(&p->w, "fqc1_0123456789abcdef");
	}
	if (extra != NULL) {
		fsnp_w_key(&p->w, extra);
		fsnp_w_i64(&p->w, 1);
	}
}

static void test_bind_ok(void **state)
{
	(void)state;
	struct fql_diag d;
	struct params p;
	assert_int_equal(parse(collection, &d), 0);
	assert_int_equal(q.nparams, 7);
	collection_params(&p, "", NULL);
	assert_int_equal(fql_bind(&q, params_end(&p), &d), 0);
	assert_true(q.bound);
	assert_int_equal(q.preds[0].v[0].btype, FQL_B_STR);
	assert_memory_equal(q.preds[0].v[0].bp, "tenant-a", 8);
	assert_int_equal(q.preds[2].v[1].btype, FQL_B_INT);
	assert_int_equal(q.preds[2].v[1].bi, 2000);
	assert_int_equal(q.preds[3].v[0].btype, FQL_B_BOOL);
	assert_int_equal(q.cursor.blen, 21);
	wbuf_free(&p.b);

	/* literals bind to themselves; no params at all is fine */
	assert_int_equal(
	    parse("FROM runs WHERE run_id = 'r1' RETURN RECORD", &d), 0);
	assert_int_equal(fql_bind(&q, NULL, &d), 0);
	assert_int_equal(q.preds[0].v[0].blen, 2);

	/* one parameter used twice is bound once */
	assert_int_equal(parse("FROM runs WHERE partition_key = @p AND "
	                       "priority BETWEEN @x AND @x RETURN COUNT",
	                       &d),
	                 0);
	assert_int_equal(q.nparams, 2);
	params_begin(&p);
	fsnp_w_key(&p.w, "p");
	fsnp_w_str(&p.w, "t");
	fsnp_w_key(&p.w, "x");
	fsnp_w_i64(&p.w, 5);
	assert_int_equal(fql_bind(&q, params_end(&p), &d), 0);
	wbuf_free(&p.b);
}

static void test_bind_errors(void **state)
{
	(void)state;
	struct fql_diag d;
	struct params p;
	assert_int_equal(parse(collection, &d), 0);

	collection_params(&p, "s2", NULL);
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_MISSING_PARAMETER);
	assert_true(d.has_position);
	assert_int_equal(d.byte, strstr(collection, "@s2") - collection + 1);
	wbuf_free(&p.b);

	collection_params(&p, "", "unused");
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_UNEXPECTED_PARAMETER);
	assert_false(d.has_position);
	wbuf_free(&p.b);

	assert_int_equal(fql_bind(&q, NULL, &d), FQL_MISSING_PARAMETER);
	assert_int_equal(d.byte, strstr(collection, "@p") - collection + 1);

	/* wrong types */
	params_begin(&p);
	fsnp_w_key(&p.w, "p");
	fsnp_w_i64(&p.w, 7);
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_INVALID_PARAMETER_TYPE);
	assert_int_equal(d.byte, strstr(collection, "@p") - collection + 1);
	wbuf_free(&p.b);

	/* not a map */
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode_body(b.data, b.len, NULL, &v), 0);
	assert_int_equal(fql_bind(&q, &v, &d), FQL_INVALID_PARAMETERS);
	wbuf_free(&b);

	/* more than 64 entries */
	params_begin(&p);
	for (int i = 0; i < 65; i++) {
		char k[8];
		snprintf(k, sizeof k, "k%d", i);
		fsnp_w_key(&p.w, k);
		fsnp_w_i64(&p.w, i);
	}
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_INVALID_PARAMETERS);
	wbuf_free(&p.b);

	/* a repeated name */
	collection_params(&p, "", "p");
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_INVALID_PARAMETERS);
	wbuf_free(&p.b);
}

static void test_bind_values(void **state)
{
	(void)state;
	struct fql_diag d;
	struct params p;
	static char big[FQL_MAX_PARTITION_KEY + 2];
	memset(big, 'k', sizeof big);

	/* partition keys up to 65535 bytes, run ids up to 65483 */
	const char *pk = "FROM runs WHERE partition_key = @p AND run_id = @r "
	                 "RETURN RECORD";
	assert_int_equal(parse(pk, &d), 0);
	for (int round = 0; round < 4; round++) {
		size_t plen = round == 1 ? FQL_MAX_PARTITION_KEY + 1
		                         : FQL_MAX_PARTITION_KEY;
		size_t rlen = round == 2 ? FQL_MAX_RUN_ID + 1 : FQL_MAX_RUN_ID;
		if (round == 3) {
			rlen = 0;
		}
		params_begin(&p);
		fsnp_w_key(&p.w, "p");
		fsnp_w_bin(&p.w, big, plen);
		fsnp_w_key(&p.w, "r");
		fsnp_w_bin(&p.w, big, rlen);
		int want = round == 0   ? 0
		           : round == 3 ? FQL_INVALID_PARAMETER_TYPE
		                        : FQL_QUERY_VALUE_TOO_LARGE;
		assert_int_equal(fql_bind(&q, params_end(&p), &d), want);
		wbuf_free(&p.b);
	}

	/* ranges: same type, ordered */
	const char *rg = "FROM runs WHERE partition_key = 'p' AND "
	                 "attribute.x BETWEEN @lo AND @hi RETURN COUNT";
	assert_int_equal(parse(rg, &d), 0);
	params_begin(&p);
	fsnp_w_key(&p.w, "lo");
	fsnp_w_i64(&p.w, 5);
	fsnp_w_key(&p.w, "hi");
	fsnp_w_str(&p.w, "z");
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_INVALID_PARAMETER_TYPE);
	assert_int_equal(d.byte, strstr(rg, "@hi") - rg + 1);
	wbuf_free(&p.b);
	params_begin(&p);
	fsnp_w_key(&p.w, "lo");
	fsnp_w_f64(&p.w, 2.5);
	fsnp_w_key(&p.w, "hi");
	fsnp_w_f64(&p.w, -1.0);
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_UNSUPPORTED_QUERY_SHAPE);
	wbuf_free(&p.b);
	params_begin(&p);
	fsnp_w_key(&p.w, "lo");
	fsnp_w_f64(&p.w, -0.0);
	fsnp_w_key(&p.w, "hi");
	fsnp_w_f64(&p.w, 0.0);
	assert_int_equal(fql_bind(&q, params_end(&p), &d), 0);
	wbuf_free(&p.b);

	/* non-finite floats, nil and containers are refused */
	const char *dy = "FROM runs WHERE partition_key = 'p' AND "
	                 "attribute.x = @v RETURN COUNT";
	assert_int_equal(parse(dy, &d), 0);
	for (int kind = 0; kind < 3; kind++) {
		params_begin(&p);
		fsnp_w_key(&p.w, "v");
		if (kind == 0) {
			fsnp_w_f64(&p.w, 1.0 / 0.0);
		} else if (kind == 1) {
			fsnp_w_nil(&p.w);
		} else {
			fsnp_w_map_begin(&p.w);
			fsnp_w_map_end(&p.w);
		}
		assert_int_equal(fql_bind(&q, params_end(&p), &d),
		                 FQL_INVALID_PARAMETER_TYPE);
		wbuf_free(&p.b);
	}

	/* IN repeats found once values are bound */
	const char *in = "FROM runs WHERE partition_key = 'p' AND state IN "
	                 "(@a, @b) RETURN COUNT";
	assert_int_equal(parse(in, &d), 0);
	params_begin(&p);
	fsnp_w_key(&p.w, "a");
	fsnp_w_str(&p.w, "x");
	fsnp_w_key(&p.w, "b");
	fsnp_w_str(&p.w, "x");
	assert_int_equal(fql_bind(&q, params_end(&p), &d), FQL_INVALID_SYNTAX);
	assert_int_equal(d.byte, strstr(in, "@b") - in + 1);
	wbuf_free(&p.b);
}

static void test_bind_cursor(void **state)
{
	(void)state;
	struct fql_diag d;
	struct params p;
	static char big[FQL_CURSOR_MAX + 1];
	memcpy(big, "fqc1_", 5);
	memset(big + 5, 'a', sizeof big - 5);
	const char *text = "FROM runs WHERE partition_key = 'p' ORDER BY "
	                   "version LIMIT 5 CURSOR @c RETURN RECORDS";
	assert_int_equal(parse(text, &d), 0);
	static const struct {
		size_t len;
		const char *prefix;
		int want;
	} cases[] = {
	    {16, "fqc1_", 0},
	    {FQL_CURSOR_MAX, "fqc1_", 0},
	    {FQL_CURSOR_MAX + 1, "fqc1_", FQL_QUERY_CURSOR_TOO_LARGE},
	    {15, "fqc1_", FQL_QUERY_CURSOR_INVALID},
	    {40, "fqc2_", FQL_QUERY_CURSOR_INVALID},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memcpy(big, cases[i].prefix, 5);
		params_begin(&p);
		fsnp_w_key(&p.w, "c");
		fsnp_w_bin(&p.w, big, cases[i].len);
		assert_int_equal(fql_bind(&q, params_end(&p), &d),
		                 cases[i].want);
		if (cases[i].want) {
			assert_int_equal(d.byte, strstr(text, "@c") - text + 1);
		}
		wbuf_free(&p.b);
	}
	params_begin(&p);
	fsnp_w_key(&p.w, "c");
	fsnp_w_i64(&p.w, 1);
	assert_int_equal(fql_bind(&q, params_end(&p), &d),
	                 FQL_INVALID_PARAMETER_TYPE);
	wbuf_free(&p.b);
}

static void test_version(void **state)
{
	(void)state;
	struct fql_diag d;
	assert_int_equal(fql_check_version("FQL1", 4, &d), 0);
	assert_int_equal(fql_check_version("FQL2", 4, &d),
	                 FQL_UNSUPPORTED_QUERY_VERSION);
	assert_int_equal(fql_check_version("fql1", 4, &d),
	                 FQL_UNSUPPORTED_QUERY_VERSION);
	assert_int_equal(fql_check_version("FQL1 ", 5, &d),
	                 FQL_UNSUPPORTED_QUERY_VERSION);
}

/* Queries as the official SDK's query builders and projection helper
 * write them, with the parameters it sends: they parse, bind and take the
 * fixed-index shapes. */
struct sdk_param {
	const char *name;
	const char *str; /* NULL: the integer */
	int64_t i;
};

static const struct {
	const char *query;
	struct sdk_param params[8];
	enum fql_shape_id shape;
} sdk[] = {
    {"FROM runs WHERE partition_key = @partition AND type = @type AND state "
     "= @state ORDER BY updated_at_ms DESC LIMIT 50 RETURN RECORDS",
     {{"partition", "tenant-a", 0},
      {"type", "email", 0},
      {"state", "failed", 0}},
     FQL_SHAPE_TYPE_STATE_ORDERED},
    {"FROM runs WHERE partition_key = @partition_key AND type = @type AND "
     "state = @state AND attribute['region'] = @attribute_0 AND "
     "updated_at_ms BETWEEN @from_ms AND @to_ms ORDER BY updated_at_ms DESC "
     "LIMIT 50 RETURN RECORDS",
     {{"partition_key", "tenant-a", 0},
      {"type", "email", 0},
      {"state", "queued", 0},
      {"attribute_0", "eu", 0},
      {"from_ms", NULL, 0},
      {"to_ms", NULL, 9007199254740991LL}},
     FQL_SHAPE_METADATA_ORDERED},
    {"FROM runs WHERE partition_key = @partition_key AND type = @type AND "
     "state IN (@terminal_0, @terminal_1, @terminal_2) ORDER BY "
     "updated_at_ms ASC LIMIT 100 RETURN RECORDS",
     {{"partition_key", "tenant-a", 0},
      {"type", "email", 0},
      {"terminal_0", "completed", 0},
      {"terminal_1", "failed", 0},
      {"terminal_2", "cancelled", 0}},
     FQL_SHAPE_TYPE_TERMINALS_ORDERED},
    {"FROM runs WHERE partition_key = @partition_key AND type = @type AND "
     "state = @state AND lease_deadline_ms BETWEEN @lease_from_ms AND "
     "@lease_to_ms ORDER BY lease_deadline_ms ASC LIMIT 10 RETURN RECORDS",
     {{"partition_key", "tenant-a", 0},
      {"type", "email", 0},
      {"state", "running", 0},
      {"lease_from_ms", NULL, 0},
      {"lease_to_ms", NULL, 1700000000000LL}},
     FQL_SHAPE_TYPE_RUNNING_LEASE_DEADLINE_ORDERED},
    {"FROM runs WHERE partition_key = @partition_key AND parent_flow_id = "
     "@lineage_id ORDER BY updated_at_ms DESC LIMIT 50 RETURN RECORDS",
     {{"partition_key", "tenant-a", 0}, {"lineage_id", "parent-1", 0}},
     FQL_SHAPE_PARENT_ORDERED},
    {"FROM runs WHERE partition_key = @partition_key AND type = @type AND "
     "state_meta['review']['risk'] = @state_meta_0 ORDER BY updated_at_ms "
     "DESC LIMIT 50 RETURN RECORDS",
     {{"partition_key", "tenant-a", 0},
      {"type", "email", 0},
      {"state_meta_0", "high", 0}},
     FQL_SHAPE_METADATA_ORDERED},
    {"FROM runs WHERE run_id = @id RETURN RECORD (run_id, attribute['x'], "
     "state_meta['s']['k'])",
     {{"id", "run-1", 0}},
     FQL_SHAPE_RUN_ID_RECORD},
    {"FROM events WHERE run_id = @id ORDER BY event_id ASC LIMIT 100 RETURN "
     "RECORDS (event_id, fields['status'])",
     {{"id", "run-1", 0}},
     FQL_SHAPE_EVENTS_ORDERED},
};

static void test_sdk_queries(void **state)
{
	(void)state;
	struct fql_diag d;
	for (size_t i = 0; i < sizeof sdk / sizeof sdk[0]; i++) {
		struct params p;
		if (parse(sdk[i].query, &d) != 0) {
			fail_msg("case %zu: %s at byte %u", i,
			         fql_code_name(d.code), d.byte);
		}
		params_begin(&p);
		for (size_t k = 0; k < 8 && sdk[i].params[k].name; k++) {
			fsnp_w_key(&p.w, sdk[i].params[k].name);
			if (sdk[i].params[k].str != NULL) {
				fsnp_w_str(&p.w, sdk[i].params[k].str);
			} else {
				fsnp_w_i64(&p.w, sdk[i].params[k].i);
			}
		}
		if (fql_bind(&q, params_end(&p), &d) != 0) {
			fail_msg("case %zu: bind: %s", i,
			         fql_code_name(d.code));
		}
		assert_int_equal(fql_shape_classify(&q), sdk[i].shape);
		wbuf_free(&p.b);
	}
}

/* ---- printer, shape ---- */

/* sha256sum of "FROM runs WHERE run_id = ? RETURN RECORD" */
#define FINGERPRINT_POINT                                                      \
	"075437554f734516218fa26d5ca2508c36c7d2ff9bbf5ea3600b92b0f866a400"

static void test_redacted(void **state)
{
	(void)state;
	struct fql_diag d;
	const char *a = "FROM runs WHERE partition_key = 'tenant-secret' AND "
	                "state IN ('failed', @s) AND updated_at_ms FROM 1 TO "
	                "@to ORDER BY updated_at_ms DESC LIMIT 50 CURSOR @c "
	                "RETURN RECORDS (run_id, attribute['x y'])";
	const char *b = "from runs where partition_key = @p and state in "
	                "(@a, 'x') and updated_at_ms from @f to 99 order by "
	                "updated_at_ms desc limit 50 cursor @cur return "
	                "records (run_id, attribute['x y'])";
	assert_int_equal(parse(a, &d), 0);
	char *ra = print_query(&q, true);
	assert_int_equal(parse(b, &d), 0);
	char *rb = print_query(&q, true);
	assert_string_equal(
	    ra, "FROM runs WHERE partition_key = ? AND state IN (?, ?) AND "
	        "updated_at_ms FROM ? TO ? ORDER BY updated_at_ms DESC LIMIT "
	        "50 CURSOR ? RETURN RECORDS (run_id, attribute['x y'])");
	assert_string_equal(ra, rb);
	assert_null(strstr(ra, "tenant"));
	/* the fingerprint is the redacted text's SHA-256 */
	char fa[65], fb[65];
	assert_int_equal(parse(a, &d), 0);
	assert_int_equal(fql_print_fingerprint(&q, fa), 0);
	assert_int_equal(parse(b, &d), 0);
	assert_int_equal(fql_print_fingerprint(&q, fb), 0);
	assert_string_equal(fa, fb);
	assert_int_equal(strlen(fa), 64);
	assert_int_equal(
	    parse("FROM runs WHERE run_id = 'x' RETURN RECORD", &d), 0);
	assert_int_equal(fql_print_fingerprint(&q, fa), 0);
	assert_string_equal(fa, FINGERPRINT_POINT);
	free(ra);
	free(rb);
}

static void test_shape(void **state)
{
	(void)state;
	struct fql_diag d;
	struct fql_shape s;
	assert_int_equal(parse("FROM runs WHERE state = @s AND type = @t AND "
	                       "partition_key = @p AND updated_at_ms FROM @a "
	                       "TO @b AND parent_flow_id IS NULL ORDER BY "
	                       "updated_at_ms DESC LIMIT 20 CURSOR @c RETURN "
	                       "RECORDS (run_id, attribute.region)",
	                       &d),
	                 0);
	fql_shape(&q, &s);
	assert_int_equal(s.kind, FQL_K_COLLECTION);
	assert_int_equal(s.source, FQL_RUNS);
	assert_non_null(s.partition);
	assert_memory_equal(s.partition->s, "p", 1);
	assert_null(s.run_id);
	assert_int_equal(s.neq, 2);
	/* sorted by field: type before state */
	assert_int_equal(s.eq[0]->field.id, FQL_F_TYPE);
	assert_int_equal(s.eq[1]->field.id, FQL_F_STATE);
	assert_non_null(s.range);
	assert_int_equal(s.range->op, FQL_OP_WINDOW);
	assert_int_equal(s.range->field.id, FQL_F_UPDATED_AT_MS);
	assert_int_equal(s.nnull, 1);
	assert_int_equal(s.norder, 1);
	assert_true(s.order[0].desc);
	assert_int_equal(s.proj_bits,
	                 (1u << FSNP_FQR_F_ID) | (1u << FSNP_FQR_F_ATTRIBUTES));
	assert_true(s.has_limit);
	assert_int_equal(s.limit, 20);
	assert_true(s.has_cursor);

	assert_int_equal(
	    parse("FROM runs WHERE run_id = @id RETURN RECORD", &d), 0);
	fql_shape(&q, &s);
	assert_int_equal(s.kind, FQL_K_POINT);
	assert_null(s.partition);
	assert_non_null(s.run_id);
	assert_int_equal(s.proj_bits, (1u << 18) - 1);

	assert_int_equal(parse("FROM events WHERE run_id = @id ORDER BY "
	                       "event_id DESC LIMIT 5 RETURN RECORDS",
	                       &d),
	                 0);
	fql_shape(&q, &s);
	assert_int_equal(s.kind, FQL_K_HISTORY);
	assert_int_equal(s.proj_bits, (1u << 18) | (1u << 19));

	assert_int_equal(parse("FROM runs WHERE partition_key = @p AND "
	                       "priority BETWEEN 1 AND 2 AND attempts BETWEEN "
	                       "0 AND 3 RETURN COUNT",
	                       &d),
	                 0);
	fql_shape(&q, &s);
	assert_int_equal(s.kind, FQL_K_COUNT);
	assert_int_equal(s.nranges, 2);
	assert_null(s.range);
	assert_int_equal(s.proj_bits, 0);
}

/* Bound queries (literals only) and the shape they are advertised as. */
static const struct {
	const char *in;
	enum fql_shape_id shape;
} shapes[] = {
    {"FROM runs WHERE run_id = 'r' RETURN RECORD", FQL_SHAPE_RUN_ID_RECORD},
    {"FROM runs WHERE run_id = 'r' AND partition_key = 'p' RETURN RECORD",
     FQL_SHAPE_PARTITION_RUN_ID_RECORD},
    {"FROM events WHERE run_id = 'r' ORDER BY event_id LIMIT 5 RETURN "
     "RECORDS",
     FQL_SHAPE_EVENTS_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND state = 'queued' RETURN COUNT",
     FQL_SHAPE_PREDICATES_COUNT},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state = "
     "'queued' ORDER BY updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_TYPE_STATE_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state IN "
     "('failed', 'completed') AND updated_at_ms FROM 0 TO 100 ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_TYPE_TERMINALS_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state IN "
     "('failed', 'queued') ORDER BY updated_at_ms DESC LIMIT 5 RETURN "
     "RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND attribute.region = 'eu' ORDER "
     "BY updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_METADATA_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND "
     "state_meta.review.risk = 3 ORDER BY updated_at_ms DESC LIMIT 5 RETURN "
     "RECORDS",
     FQL_SHAPE_METADATA_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND state_meta.review.risk = 3 "
     "ORDER BY updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state = "
     "'running' AND lease_deadline_ms BETWEEN 0 AND 1000 ORDER BY "
     "lease_deadline_ms ASC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_TYPE_RUNNING_LEASE_DEADLINE_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state = "
     "'queued' AND lease_deadline_ms BETWEEN 0 AND 1000 ORDER BY "
     "lease_deadline_ms ASC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND parent_flow_id = 'x' ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PARENT_ORDERED},
    {"FROM runs WHERE root_flow_id = 'x' AND partition_key = 'p' ORDER BY "
     "updated_at_ms ASC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_ROOT_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND correlation_id = 'x' ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_CORRELATION_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND correlation_id = 'x' ORDER BY "
     "created_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state = 'q' "
     "ORDER BY updated_at_ms DESC, priority DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
    {"FROM runs WHERE partition_key = 'p' AND type = 't' AND state = 'q' "
     "AND updated_at_ms BETWEEN 10 AND 9007199254740992 ORDER BY "
     "updated_at_ms DESC LIMIT 5 RETURN RECORDS",
     FQL_SHAPE_PREDICATES_ORDERED},
};

static void test_shape_classify(void **state)
{
	(void)state;
	struct fql_diag d;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		assert_int_equal(parse(shapes[i].in, &d), 0);
		assert_int_equal(fql_bind(&q, NULL, &d), 0);
		enum fql_shape_id got = fql_shape_classify(&q);
		if (got != shapes[i].shape) {
			fail_msg("case %zu: %s, wanted %s", i,
			         fql_shape_name(got),
			         fql_shape_name(shapes[i].shape));
		}
	}
	assert_string_equal(fql_shape_name(FQL_SHAPE_RUN_ID_RECORD),
	                    "runs_by_run_id_record");
	assert_string_equal(fql_shape_name(FQL_SHAPE_EVENTS_ORDERED),
	                    "events_by_run_id_ordered_records");
	assert_null(fql_shape_name(FQL_SHAPES));
}

static void test_field_bits(void **state)
{
	(void)state;
	for (unsigned id = 0; id <= FQL_F_FIELDS; id++) {
		const char *name = fql_field_name(id);
		unsigned bit = fql_field_fqr_bit(id);
		if (id == FQL_F_RUN_ID) {
			assert_string_equal(fsnp_fqr_field_name(bit), "id");
		} else {
			assert_string_equal(fsnp_fqr_field_name(bit), name);
		}
	}
}

/* ---- errors ---- */

static void test_error_table(void **state)
{
	(void)state;
	assert_null(fql_code_name(FQL_OK));
	assert_null(fql_code_name(FQL_CODES));
	for (unsigned c = 1; c < FQL_CODES; c++) {
		const char *name = fql_code_name(c);
		assert_non_null(name);
		assert_non_null(fql_code_message(c));
		assert_int_equal(fql_code_lookup(name, strlen(name)), (int)c);
		for (unsigned k = 1; k < c; k++) {
			assert_string_not_equal(fql_code_name(k), name);
		}
	}
	assert_string_equal(fql_code_message(FQL_INVALID_SYNTAX),
	                    "ERR FQL1 invalid syntax");
	assert_string_equal(fql_code_message(FQL_UNSUPPORTED_FIELD),
	                    "ERR FQL1 field is not supported");
	assert_int_equal(fql_code_lookup("nope", 4), -1);
	assert_true(fql_code_retryable(FQL_QUERY_STORAGE_UNAVAILABLE));
	assert_true(fql_code_retryable(FQL_QUERY_PROJECTION_CHANGED));
	assert_false(fql_code_retryable(FQL_QUERY_ENGINE_FAILURE));
	assert_false(fql_code_retryable(FQL_QUERY_STORAGE_INCONSISTENT));
	assert_false(fql_code_retryable(FQL_INVALID_SYNTAX));
	assert_int_equal(fql_code_status(FQL_UNAUTHORIZED_SCOPE),
	                 FSNP_STATUS_NOPERM);
	assert_int_equal(fql_code_status(FQL_QUERY_STORAGE_UNAVAILABLE),
	                 FSNP_STATUS_ERROR);
	assert_int_equal(fql_code_status(FQL_QUERY_ENGINE_FAILURE),
	                 FSNP_STATUS_ERROR);
	assert_int_equal(fql_code_status(FQL_INVALID_SYNTAX),
	                 FSNP_STATUS_BAD_REQUEST);
	/* supported field lists are sorted */
	for (int ctx = FQL_CTX_RUN_FIELDS; ctx <= FQL_CTX_EVENT_FIELDS; ctx++) {
		const char *const *names;
		size_t n = fql_context_fields(ctx, &names);
		assert_true(n > 0);
		for (size_t i = 1; i < n; i++) {
			assert_true(strcmp(names[i - 1], names[i]) < 0);
		}
	}
}

static void test_error_map(void **state)
{
	(void)state;
	struct fql_diag d;
	const char *text = "FROM runs\nWHERE colour = 'x' RETURN RECORD";
	assert_int_equal(parse(text, &d), FQL_UNSUPPORTED_FIELD);
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v, pos, ctx, list;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fql_diag_write(&d, &w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(fsnp_value_decode_body(b.data, b.len, NULL, &v), 0);
	struct fsnp_bytes s;
	bool flag;
	int64_t n;
	assert_int_equal(fsnp_map_bin(&v, "code", &s), 0);
	assert_true(fsnp_bytes_eq(s, "unsupported_field"));
	assert_int_equal(fsnp_map_bin(&v, "message", &s), 0);
	assert_true(fsnp_bytes_eq(s, "ERR FQL1 field is not supported"));
	assert_int_equal(fsnp_map_bool(&v, "retryable", &flag), 0);
	assert_false(flag);
	assert_int_equal(fsnp_map_bool(&v, "safe_to_retry", &flag), 0);
	assert_false(flag);
	assert_int_equal(fsnp_map_i64(&v, "retry_after_ms", &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(fsnp_map_bin(&v, "detail", &s), 0);
	/* value-free: the rejected name is not quoted back */
	assert_null(memmem(b.data, b.len, "colour", 6));
	assert_int_equal(fsnp_map_map(&v, "position", &pos), 0);
	assert_int_equal(fsnp_map_i64(&pos, "byte", &n), 0);
	assert_int_equal(n, 17);
	assert_int_equal(fsnp_map_i64(&pos, "line", &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(fsnp_map_i64(&pos, "column", &n), 0);
	assert_int_equal(n, 7);
	assert_int_equal(fsnp_map_map(&v, "context", &ctx), 0);
	assert_int_equal(fsnp_map_array(&ctx, "supported_fields", &list), 0);
	assert_int_equal(list.as.count, 22);
	wbuf_free(&b);

	char line[512];
	fql_diag_format(&d, line, sizeof line);
	assert_non_null(strstr(line, "ERR FQL1 field is not supported at "
	                             "line 2, column 7 (byte 17); DETAIL: "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_invalid),
	    cmocka_unit_test(test_positions),
	    cmocka_unit_test(test_limit_text),
	    cmocka_unit_test(test_limit_tokens),
	    cmocka_unit_test(test_limit_predicates),
	    cmocka_unit_test(test_limit_in),
	    cmocka_unit_test(test_limit_order),
	    cmocka_unit_test(test_limit_projection),
	    cmocka_unit_test(test_limit_limit),
	    cmocka_unit_test(test_bind_ok),
	    cmocka_unit_test(test_bind_errors),
	    cmocka_unit_test(test_bind_values),
	    cmocka_unit_test(test_bind_cursor),
	    cmocka_unit_test(test_version),
	    cmocka_unit_test(test_sdk_queries),
	    cmocka_unit_test(test_redacted),
	    cmocka_unit_test(test_shape),
	    cmocka_unit_test(test_shape_classify),
	    cmocka_unit_test(test_field_bits),
	    cmocka_unit_test(test_error_table),
	    cmocka_unit_test(test_error_map),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
