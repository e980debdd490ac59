/* FQL1 parser and binder: query text into a prepared AST (struct fql_query),
 * the contract's shape rules, and the named parameters bound once from the
 * FSNP params map, so authorization, routing, planning and execution all
 * read the same request. docs/flow-query.md is the grammar.
 *
 * A struct fql_query is self-contained after fql_parse (it copies the text
 * and unescaped strings into its own storage); after fql_bind its bound
 * values are views into the params map's encoding, which must outlive it.
 * It is large (about 53 KiB): allocate it, or keep it off small stacks. */
#ifndef FLOW_FQL_PARSE_H
#define FLOW_FQL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/fql_error.h"
#include "flow/fql_lex.h"
#include "wire/fsnp_value.h"

#define FQL_VERSION "FQL1"
#define FQL_MAX_PREDICATES 12u
#define FQL_MAX_IN_VALUES 20u
#define FQL_MAX_ORDER 2u
#define FQL_MAX_PROJECTION 32u
#define FQL_MAX_PARAMS 64u
#define FQL_MAX_LIMIT 100u
#define FQL_MAX_METADATA_NAME 64u
#define FQL_MAX_PARTITION_KEY 65535u
/* A run id must leave room for the partitioned state key's fixed part
 * ("f:{f:" + 43 bytes of hash + "}:s:") under a 65,535-byte key. */
#define FQL_MAX_RUN_ID (65535u - 52u)
#define FQL_CURSOR_MIN 16u
#define FQL_CURSOR_MAX 4096u
#define FQL_CURSOR_PREFIX "fqc1_"

enum fql_mode { FQL_EXECUTE, FQL_EXPLAIN, FQL_EXPLAIN_ANALYZE };
enum fql_source { FQL_RUNS, FQL_EVENTS };

/* Fields. The builtins of runs are in the order of the 0xA0 presence
 * bitmap (fql_field_fqr_bit). */
enum fql_fid {
	FQL_F_RUN_ID,
	FQL_F_TYPE,
	FQL_F_STATE,
	FQL_F_VERSION,
	FQL_F_PRIORITY,
	FQL_F_PARTITION_KEY,
	FQL_F_CREATED_AT_MS,
	FQL_F_UPDATED_AT_MS,
	FQL_F_NEXT_RUN_AT_MS,
	FQL_F_LEASE_DEADLINE_MS,
	FQL_F_ATTEMPTS,
	FQL_F_RUN_STATE,
	FQL_F_MAX_ACTIVE_MS,
	FQL_F_PARENT_FLOW_ID,
	FQL_F_ROOT_FLOW_ID,
	FQL_F_CORRELATION_ID,
	FQL_F_ATTRIBUTES, /* the whole map: projection only */
	FQL_F_STATE_META, /* the whole map: projection only */
	FQL_F_EVENT_ID,
	FQL_F_FIELDS,         /* an event's whole field map: projection only */
	FQL_F_ATTRIBUTE,      /* attribute[name] */
	FQL_F_STATE_META_KEY, /* state_meta[state][name] */
	FQL_F_FIELD,          /* fields[name] of an event: projection only */
	FQL_FIDS
};

/* What a field compares against. */
enum fql_ftype { FQL_FT_KEYWORD, FQL_FT_INTEGER, FQL_FT_DYNAMIC };

struct fql_field {
	enum fql_fid id;
	/* FQL_F_ATTRIBUTE, FQL_F_FIELD: a = name; FQL_F_STATE_META_KEY: a =
	 * state, b = name. Point into the query's storage. */
	const char *a;
	uint32_t alen;
	const char *b;
	uint32_t blen;
	uint32_t at; /* byte offset in the text */
};

enum fql_vkind { FQL_V_STR, FQL_V_INT, FQL_V_PARAM };
/* The type of a bound value. */
enum fql_btype { FQL_B_STR, FQL_B_INT, FQL_B_BOOL, FQL_B_FLOAT };

struct fql_value {
	enum fql_vkind kind;
	const char *s; /* FQL_V_STR: unescaped bytes; FQL_V_PARAM: the name */
	uint32_t len;
	int64_t i; /* FQL_V_INT */
	uint32_t at;
	/* After fql_bind (literals are bound to themselves). */
	enum fql_btype btype;
	const uint8_t *bp; /* FQL_B_STR */
	size_t blen;
	int64_t bi;
	double bf;
	bool bb;
};

enum fql_op {
	FQL_OP_EQ,
	FQL_OP_IN,
	FQL_OP_BETWEEN, /* closed */
	FQL_OP_WINDOW,  /* FROM lower TO upper, half-open */
	FQL_OP_IS_NULL,
	FQL_OP_IS_MISSING,
};

struct fql_pred {
	enum fql_op op;
	struct fql_field field;
	uint32_t nvals; /* EQ 1, IN 1..20, BETWEEN/WINDOW 2, IS 0 */
	struct fql_value v[FQL_MAX_IN_VALUES];
	uint32_t at;
};

struct fql_order {
	struct fql_field field;
	bool desc;
};

enum fql_return { FQL_RET_RECORD, FQL_RET_RECORDS, FQL_RET_COUNT };

/* The query's classified kind (after the shape rules). */
enum fql_kind {
	FQL_K_POINT,      /* runs: run_id [and partition_key], RETURN RECORD */
	FQL_K_COLLECTION, /* runs: partition + predicates, ordered, limited */
	FQL_K_COUNT,      /* runs: RETURN COUNT */
	FQL_K_HISTORY,    /* events of one run by event_id */
};

struct fql_query {
	enum fql_mode mode;
	enum fql_source source;
	enum fql_kind kind;
	uint32_t npreds;
	struct fql_pred preds[FQL_MAX_PREDICATES];
	uint32_t norder;
	struct fql_order order[FQL_MAX_ORDER];
	bool has_limit;
	uint32_t limit;
	bool has_cursor;
	struct fql_value cursor; /* always FQL_V_PARAM */
	enum fql_return ret;
	bool has_projection;
	uint32_t nproj;
	struct fql_field proj[FQL_MAX_PROJECTION];
	bool bound;
	uint32_t nparams; /* distinct parameter names used */
	/* storage */
	uint32_t text_len;
	char text[FQL_MAX_TEXT + 1];
	uint32_t arena_used;
	char arena[FQL_MAX_TEXT];
};

/* Parse text[0..len) into q and apply the shape rules. 0, or the FQL code
 * with d filled in (every parse error has a position). */
int fql_parse(const char *text, size_t len, struct fql_query *q,
              struct fql_diag *d);

/* The envelope's version string: 0 for exactly "FQL1", else
 * unsupported_query_version. */
int fql_check_version(const void *version, size_t len, struct fql_diag *d);

/* Bind the parameters: `params` is the request's params value as the FSNP
 * decoder gives it (NULL or nil: none). Every @name used must be present
 * (missing_parameter), every entry used (unexpected_parameter), at most 64
 * entries with non-empty, unique names (invalid_parameters), each of the
 * field's type (invalid_parameter_type; strings for keyword fields, signed
 * integers for integer fields, string, integer, boolean or finite float
 * for metadata), within the byte limits (query_value_too_large), ranges
 * ordered and IN lists without repeats; the cursor a string of 16..4096
 * bytes starting "fqc1_" (query_cursor_too_large, query_cursor_invalid).
 * Errors at a parameter carry the position of its first use. */
int fql_bind(struct fql_query *q, const struct fsnp_val *params,
             struct fql_diag *d);

/* True when a and b are the same query (fields, operators, values or
 * parameter names, order, limit, cursor, return and projection; positions
 * and bindings are not compared). */
bool fql_query_equal(const struct fql_query *a, const struct fql_query *b);

/* Field facts. */
enum fql_ftype fql_field_type(enum fql_fid id);
/* The builtin name ("run_id", "attributes", ...); NULL for the keyed
 * metadata selectors. */
const char *fql_field_name(enum fql_fid id);
/* The 0xA0 presence-bitmap bit (wire/fsnp_fqr.h) a projected field fills:
 * run_id is bit 0 ("id"); attribute[x] fills attributes, state_meta[s][k]
 * state_meta, fields[x] fields. */
unsigned fql_field_fqr_bit(enum fql_fid id);
bool fql_field_equal(const struct fql_field *a, const struct fql_field *b);
/* True when a metadata name can be written dotted: 1..64 bytes of
 * [A-Za-z0-9_-], not starting with "__". */
bool fql_name_is_plain(const char *s, uint32_t len);

#endif /* FLOW_FQL_PARSE_H */
