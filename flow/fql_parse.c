/* FQL1 parser, shape rules and binder (flow/fql_parse.h). */
#include "flow/fql_parse.h"

#include <math.h>
#include <string.h>

#include "wire/fsnp_fqr.h"

static const struct {
	const char *name;
	enum fql_ftype type;
} builtins[] = {
    [FQL_F_RUN_ID] = {"run_id", FQL_FT_KEYWORD},
    [FQL_F_TYPE] = {"type", FQL_FT_KEYWORD},
    [FQL_F_STATE] = {"state", FQL_FT_KEYWORD},
    [FQL_F_VERSION] = {"version", FQL_FT_INTEGER},
    [FQL_F_PRIORITY] = {"priority", FQL_FT_INTEGER},
    [FQL_F_PARTITION_KEY] = {"partition_key", FQL_FT_KEYWORD},
    [FQL_F_CREATED_AT_MS] = {"created_at_ms", FQL_FT_INTEGER},
    [FQL_F_UPDATED_AT_MS] = {"updated_at_ms", FQL_FT_INTEGER},
    [FQL_F_NEXT_RUN_AT_MS] = {"next_run_at_ms", FQL_FT_INTEGER},
    [FQL_F_LEASE_DEADLINE_MS] = {"lease_deadline_ms", FQL_FT_INTEGER},
    [FQL_F_ATTEMPTS] = {"attempts", FQL_FT_INTEGER},
    [FQL_F_RUN_STATE] = {"run_state", FQL_FT_KEYWORD},
    [FQL_F_MAX_ACTIVE_MS] = {"max_active_ms", FQL_FT_INTEGER},
    [FQL_F_PARENT_FLOW_ID] = {"parent_flow_id", FQL_FT_KEYWORD},
    [FQL_F_ROOT_FLOW_ID] = {"root_flow_id", FQL_FT_KEYWORD},
    [FQL_F_CORRELATION_ID] = {"correlation_id", FQL_FT_KEYWORD},
    [FQL_F_ATTRIBUTES] = {"attributes", FQL_FT_DYNAMIC},
    [FQL_F_STATE_META] = {"state_meta", FQL_FT_DYNAMIC},
    [FQL_F_EVENT_ID] = {"event_id", FQL_FT_KEYWORD},
    [FQL_F_FIELDS] = {"fields", FQL_FT_DYNAMIC},
    [FQL_F_ATTRIBUTE] = {NULL, FQL_FT_DYNAMIC},
    [FQL_F_STATE_META_KEY] = {NULL, FQL_FT_DYNAMIC},
    [FQL_F_FIELD] = {NULL, FQL_FT_DYNAMIC},
};

enum fql_ftype fql_field_type(enum fql_fid id)
{
	return (unsigned)id < FQL_FIDS ? builtins[id].type : FQL_FT_DYNAMIC;
}

const char *fql_field_name(enum fql_fid id)
{
	return (unsigned)id < FQL_FIDS ? builtins[id].name : NULL;
}

unsigned fql_field_fqr_bit(enum fql_fid id)
{
	switch (id) {
	case FQL_F_ATTRIBUTE:
		return FSNP_FQR_F_ATTRIBUTES;
	case FQL_F_STATE_META_KEY:
		return FSNP_FQR_F_STATE_META;
	case FQL_F_FIELD:
		return FSNP_FQR_F_FIELDS;
	default:
		/* the builtins share the bitmap's order */
		return (unsigned)id;
	}
}

static bool bytes_eq(const char *a, uint32_t alen, const char *b, uint32_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

bool fql_field_equal(const struct fql_field *a, const struct fql_field *b)
{
	return a->id == b->id && bytes_eq(a->a, a->alen, b->a, b->alen) &&
	       bytes_eq(a->b, a->blen, b->b, b->blen);
}

/* ---- parser ---- */

struct parser {
	struct fql_query *q;
	struct fql_tokens *toks;
	uint32_t pos;
	struct fql_diag *d;
};

enum field_use { USE_PRED, USE_ORDER, USE_PROJ };

static const struct fql_token *peek(struct parser *p)
{
	return &p->toks->t[p->pos];
}

static int fail_at(struct parser *p, enum fql_code code, uint32_t at,
                   const char *detail, const char *hint)
{
	fql_diag_set(p->d, code, detail, hint);
	fql_diag_at(p->d, p->q->text, p->q->text_len, at);
	return code;
}

static int fail_tok(struct parser *p, enum fql_code code, const char *detail,
                    const char *hint)
{
	return fail_at(p, code, peek(p)->at, detail, hint);
}

static bool is_kw(struct parser *p, const char *kw)
{
	return fql_tok_is(p->q->text, peek(p), kw);
}

static bool accept_kw(struct parser *p, const char *kw)
{
	if (is_kw(p, kw)) {
		p->pos++;
		return true;
	}
	return false;
}

static bool accept(struct parser *p, enum fql_tok kind)
{
	if (peek(p)->kind == kind) {
		p->pos++;
		return true;
	}
	return false;
}

static int expect_kw(struct parser *p, const char *kw, const char *detail)
{
	return accept_kw(p, kw) ? 0
	                        : fail_tok(p, FQL_INVALID_SYNTAX, detail, NULL);
}

/* Copy a string literal's content (between the quotes, '' unescaped) into
 * the arena. */
static void unescape(struct parser *p, const struct fql_token *t,
                     const char **out, uint32_t *len)
{
	struct fql_query *q = p->q;
	char *dst = q->arena + q->arena_used;
	uint32_t n = 0;
	const char *s = q->text + t->at + 1;
	uint32_t slen = t->len - 2;
	for (uint32_t i = 0; i < slen; i++) {
		dst[n++] = s[i];
		if (s[i] == '\'') {
			i++; /* the second quote of '' */
		}
	}
	q->arena_used += n;
	*out = dst;
	*len = n;
}

bool fql_name_is_plain(const char *s, uint32_t len)
{
	if (len == 0 || len > FQL_MAX_METADATA_NAME ||
	    (len >= 2 && s[0] == '_' && s[1] == '_')) {
		return false;
	}
	for (uint32_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-')) {
			return false;
		}
	}
	return true;
}

/* A quoted metadata name: 1..64 bytes; keys (not state names) may not
 * start with "__", which is reserved for the server's own metadata. */
static bool quoted_name_ok(const char *s, uint32_t len, bool key)
{
	return len > 0 && len <= FQL_MAX_METADATA_NAME &&
	       !(key && len >= 2 && s[0] == '_' && s[1] == '_');
}

static bool word_eq_lower(const char *s, uint32_t len, const char *lower)
{
	if (strlen(lower) != len) {
		return false;
	}
	for (uint32_t i = 0; i < len; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z') {
			c = (char)(c + 32);
		}
		if (c != lower[i]) {
			return false;
		}
	}
	return true;
}

static bool field_allowed(enum fql_source src, enum field_use use,
                          enum fql_fid id)
{
	if (src == FQL_EVENTS) {
		switch (use) {
		case USE_PRED:
			return id == FQL_F_RUN_ID || id == FQL_F_PARTITION_KEY;
		case USE_ORDER:
			return id == FQL_F_EVENT_ID;
		default:
			return id == FQL_F_EVENT_ID || id == FQL_F_FIELDS ||
			       id == FQL_F_FIELD;
		}
	}
	switch (use) {
	case USE_PRED:
		return id <= FQL_F_CORRELATION_ID || id == FQL_F_ATTRIBUTE ||
		       id == FQL_F_STATE_META_KEY;
	case USE_ORDER:
		/* the check for integer fields comes after: an unknown name
		 * is unsupported_field, a known one of the wrong kind a shape
		 * error */
		return id <= FQL_F_CORRELATION_ID || id == FQL_F_ATTRIBUTE ||
		       id == FQL_F_STATE_META_KEY;
	default:
		return id <= FQL_F_STATE_META || id == FQL_F_ATTRIBUTE ||
		       id == FQL_F_STATE_META_KEY;
	}
}

static int unsupported_field(struct parser *p, uint32_t at)
{
	int rv = fail_at(p, FQL_UNSUPPORTED_FIELD, at,
	                 "The field is not a supported selector of this "
	                 "source.",
	                 "Use a field from context.supported_fields; metadata "
	                 "names with dots, spaces or quotes need the bracket "
	                 "form.");
	p->d->context = p->q->source == FQL_EVENTS ? FQL_CTX_EVENT_FIELDS
	                                           : FQL_CTX_RUN_FIELDS;
	return rv;
}

/* [ 'name' ] */
static int bracket_name(struct parser *p, uint32_t field_at, bool key,
                        const char **s, uint32_t *len)
{
	if (!accept(p, FQL_T_LBRACK)) {
		return fail_tok(
		    p, FQL_INVALID_SYNTAX,
		    "Expected ['name'] after the metadata selector.", NULL);
	}
	const struct fql_token *t = peek(p);
	if (t->kind != FQL_T_STR) {
		return fail_tok(p, FQL_INVALID_SYNTAX,
		                "A bracket selector takes a quoted name.",
		                NULL);
	}
	p->pos++;
	unescape(p, t, s, len);
	if (!accept(p, FQL_T_RBRACK)) {
		return fail_tok(p, FQL_INVALID_SYNTAX,
		                "Expected ] after the quoted name.", NULL);
	}
	if (!quoted_name_ok(*s, *len, key)) {
		return unsupported_field(p, field_at);
	}
	return 0;
}

static int parse_field(struct parser *p, enum field_use use,
                       struct fql_field *f)
{
	const struct fql_token *t = peek(p);
	memset(f, 0, sizeof *f);
	f->at = t->at;
	if (t->kind != FQL_T_WORD) {
		return fail_tok(p, FQL_INVALID_SYNTAX, "Expected a field name.",
		                NULL);
	}
	p->pos++;
	const char *w = p->q->text + t->at;
	uint32_t wlen = t->len;
	const char *dot = memchr(w, '.', wlen);
	int rv;
	if (dot != NULL) {
		/* dotted metadata: attribute.n, state_meta.s.n, fields.n */
		uint32_t hlen = (uint32_t)(dot - w);
		const char *rest = dot + 1;
		uint32_t rlen = wlen - hlen - 1;
		const char *dot2 = memchr(rest, '.', rlen);
		if (word_eq_lower(w, hlen, "attribute") && dot2 == NULL &&
		    fql_name_is_plain(rest, rlen)) {
			f->id = FQL_F_ATTRIBUTE;
			f->a = rest;
			f->alen = rlen;
		} else if (word_eq_lower(w, hlen, "fields") && dot2 == NULL &&
		           fql_name_is_plain(rest, rlen)) {
			f->id = FQL_F_FIELD;
			f->a = rest;
			f->alen = rlen;
		} else if (word_eq_lower(w, hlen, "state_meta") &&
		           dot2 != NULL &&
		           fql_name_is_plain(rest, (uint32_t)(dot2 - rest)) &&
		           fql_name_is_plain(
		               dot2 + 1, rlen - (uint32_t)(dot2 - rest) - 1)) {
			f->id = FQL_F_STATE_META_KEY;
			f->a = rest;
			f->alen = (uint32_t)(dot2 - rest);
			f->b = dot2 + 1;
			f->blen = rlen - f->alen - 1;
		} else {
			return unsupported_field(p, f->at);
		}
	} else if (peek(p)->kind == FQL_T_LBRACK &&
	           word_eq_lower(w, wlen, "attribute")) {
		f->id = FQL_F_ATTRIBUTE;
		if ((rv = bracket_name(p, f->at, true, &f->a, &f->alen))) {
			return rv;
		}
	} else if (peek(p)->kind == FQL_T_LBRACK &&
	           word_eq_lower(w, wlen, "fields")) {
		f->id = FQL_F_FIELD;
		if ((rv = bracket_name(p, f->at, true, &f->a, &f->alen))) {
			return rv;
		}
	} else if (peek(p)->kind == FQL_T_LBRACK &&
	           word_eq_lower(w, wlen, "state_meta")) {
		f->id = FQL_F_STATE_META_KEY;
		if ((rv = bracket_name(p, f->at, false, &f->a, &f->alen)) ||
		    (rv = bracket_name(p, f->at, true, &f->b, &f->blen))) {
			return rv;
		}
	} else {
		unsigned i;
		for (i = 0; i < FQL_F_ATTRIBUTE; i++) {
			if (word_eq_lower(w, wlen, builtins[i].name)) {
				break;
			}
		}
		if (i == FQL_F_ATTRIBUTE) {
			return unsupported_field(p, f->at);
		}
		f->id = (enum fql_fid)i;
	}
	if (!field_allowed(p->q->source, use, f->id)) {
		return unsupported_field(p, f->at);
	}
	return 0;
}

static int parse_value(struct parser *p, const struct fql_field *f,
                       struct fql_value *v)
{
	const struct fql_token *t = peek(p);
	memset(v, 0, sizeof *v);
	v->at = t->at;
	enum fql_ftype ft = fql_field_type(f->id);
	switch (t->kind) {
	case FQL_T_STR:
		unescape(p, t, &v->s, &v->len);
		v->kind = FQL_V_STR;
		if (ft == FQL_FT_INTEGER ||
		    (ft == FQL_FT_KEYWORD && v->len == 0)) {
			return fail_tok(
			    p, FQL_INVALID_PARAMETER_TYPE,
			    ft == FQL_FT_INTEGER
			        ? "The field compares with integers."
			        : "The field compares with non-empty "
			          "strings.",
			    NULL);
		}
		break;
	case FQL_T_INT:
		v->kind = FQL_V_INT;
		v->i = t->i;
		if (ft == FQL_FT_KEYWORD) {
			return fail_tok(p, FQL_INVALID_PARAMETER_TYPE,
			                "The field compares with strings.",
			                NULL);
		}
		break;
	case FQL_T_PARAM:
		v->kind = FQL_V_PARAM;
		v->s = p->q->text + t->at + 1;
		v->len = t->len - 1;
		break;
	default:
		return fail_tok(p, FQL_INVALID_SYNTAX,
		                "Expected a value: a quoted string, an integer "
		                "or an @parameter.",
		                NULL);
	}
	p->pos++;
	return 0;
}

static bool value_equal(const struct fql_value *a, const struct fql_value *b)
{
	if (a->kind != b->kind) {
		return false;
	}
	if (a->kind == FQL_V_INT) {
		return a->i == b->i;
	}
	return bytes_eq(a->s, a->len, b->s, b->len);
}

static int parse_pred(struct parser *p, struct fql_pred *pr)
{
	int rv;
	memset(pr, 0, sizeof *pr);
	pr->at = peek(p)->at;
	if ((rv = parse_field(p, USE_PRED, &pr->field))) {
		return rv;
	}
	if (accept(p, FQL_T_EQ)) {
		pr->op = FQL_OP_EQ;
		pr->nvals = 1;
		return parse_value(p, &pr->field, &pr->v[0]);
	}
	if (accept_kw(p, "IN")) {
		pr->op = FQL_OP_IN;
		if (!accept(p, FQL_T_LPAREN)) {
			return fail_tok(p, FQL_INVALID_SYNTAX,
			                "Expected ( after IN.", NULL);
		}
		do {
			if (pr->nvals == FQL_MAX_IN_VALUES) {
				return fail_tok(p, FQL_UNSUPPORTED_QUERY_SHAPE,
				                "An IN list takes at most 20 "
				                "values.",
				                NULL);
			}
			struct fql_value *v = &pr->v[pr->nvals];
			if ((rv = parse_value(p, &pr->field, v))) {
				return rv;
			}
			for (uint32_t k = 0; k < pr->nvals; k++) {
				if (value_equal(&pr->v[k], v)) {
					return fail_at(p, FQL_INVALID_SYNTAX,
					               v->at,
					               "An IN list repeats a "
					               "value.",
					               NULL);
				}
			}
			pr->nvals++;
		} while (accept(p, FQL_T_COMMA));
		if (!accept(p, FQL_T_RPAREN)) {
			return fail_tok(p, FQL_INVALID_SYNTAX,
			                "Expected , or ) in the IN list.",
			                NULL);
		}
		return 0;
	}
	bool between = is_kw(p, "BETWEEN");
	if (between || is_kw(p, "FROM")) {
		p->pos++;
		pr->op = between ? FQL_OP_BETWEEN : FQL_OP_WINDOW;
		pr->nvals = 2;
		if ((rv = parse_value(p, &pr->field, &pr->v[0])) ||
		    (rv = expect_kw(p, between ? "AND" : "TO",
		                    between ? "Expected AND in BETWEEN."
		                            : "Expected TO in FROM ... TO.")) ||
		    (rv = parse_value(p, &pr->field, &pr->v[1]))) {
			return rv;
		}
		return 0;
	}
	if (accept_kw(p, "IS")) {
		if (accept_kw(p, "NULL")) {
			pr->op = FQL_OP_IS_NULL;
		} else if (accept_kw(p, "MISSING")) {
			pr->op = FQL_OP_IS_MISSING;
		} else {
			return fail_tok(p, FQL_INVALID_SYNTAX,
			                "Expected NULL or MISSING after IS.",
			                NULL);
		}
		return 0;
	}
	return fail_tok(p, FQL_INVALID_SYNTAX,
	                "Expected =, IN, BETWEEN, FROM or IS after the field.",
	                NULL);
}

static bool is_time_field(enum fql_fid id)
{
	return id == FQL_F_CREATED_AT_MS || id == FQL_F_UPDATED_AT_MS ||
	       id == FQL_F_NEXT_RUN_AT_MS || id == FQL_F_LEASE_DEADLINE_MS;
}

/* Compare two values of one type: <0, 0, >0. */
static int cmp_bound(const struct fql_value *a, const struct fql_value *b)
{
	switch (a->btype) {
	case FQL_B_INT:
		return a->bi < b->bi ? -1 : a->bi > b->bi;
	case FQL_B_FLOAT:
		return a->bf < b->bf ? -1 : a->bf > b->bf;
	case FQL_B_BOOL:
		return (int)a->bb - (int)b->bb;
	default: {
		size_t n = a->blen < b->blen ? a->blen : b->blen;
		int c = n ? memcmp(a->bp, b->bp, n) : 0;
		if (c != 0) {
			return c;
		}
		return a->blen < b->blen ? -1 : a->blen > b->blen;
	}
	}
}

static void bind_literal(struct fql_value *v)
{
	if (v->kind == FQL_V_STR) {
		v->btype = FQL_B_STR;
		v->bp = (const uint8_t *)v->s;
		v->blen = v->len;
	} else if (v->kind == FQL_V_INT) {
		v->btype = FQL_B_INT;
		v->bi = v->i;
	}
}

/* The contract's shapes: point reads, collections, counts, history. */
static int check_shape(struct parser *p, uint32_t at_return, uint32_t at_order,
                       uint32_t at_limit)
{
	struct fql_query *q = p->q;
	uint32_t partitions = 0, run_ids = 0, eq_partition = 0, eq_run = 0;
	const struct fql_pred *second_partition = NULL;
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		if (pr->field.id == FQL_F_PARTITION_KEY) {
			if (++partitions == 2) {
				second_partition = pr;
			}
			eq_partition += pr->op == FQL_OP_EQ;
		}
		if (pr->field.id == FQL_F_RUN_ID) {
			run_ids++;
			eq_run += pr->op == FQL_OP_EQ;
		}
		if (pr->op == FQL_OP_WINDOW && !is_time_field(pr->field.id)) {
			return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE, pr->at,
			               "FROM ... TO windows apply to "
			               "created_at_ms, updated_at_ms, "
			               "next_run_at_ms and lease_deadline_ms.",
			               NULL);
		}
		if (pr->op == FQL_OP_BETWEEN || pr->op == FQL_OP_WINDOW) {
			const struct fql_value *lo = &pr->v[0], *hi = &pr->v[1];
			if (lo->kind != FQL_V_PARAM &&
			    hi->kind != FQL_V_PARAM) {
				if (lo->kind != hi->kind) {
					return fail_at(
					    p, FQL_INVALID_PARAMETER_TYPE,
					    hi->at,
					    "Both bounds of a range have "
					    "one type.",
					    NULL);
				}
				struct fql_value a = *lo, b = *hi;
				bind_literal(&a);
				bind_literal(&b);
				if (cmp_bound(&a, &b) > 0) {
					return fail_at(
					    p, FQL_UNSUPPORTED_QUERY_SHAPE,
					    lo->at,
					    "The lower bound of a range is "
					    "above "
					    "its upper bound.",
					    NULL);
				}
			}
		}
	}
	if (second_partition != NULL) {
		return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE,
		               second_partition->at,
		               "A second partition predicate is ambiguous.",
		               "Name exactly one partition_key = value.");
	}
	if (q->mode != FQL_EXECUTE && q->has_cursor) {
		return fail_at(
		    p, FQL_UNSUPPORTED_QUERY_SHAPE, q->cursor.at,
		    "EXPLAIN plans a fresh query and takes no CURSOR.", NULL);
	}
	if (q->source == FQL_EVENTS) {
		/* the seed fixes RECORD for point reads and RECORDS for
		 * collections of runs only; history takes either */
		if (q->ret == FQL_RET_COUNT) {
			return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE,
			               at_return,
			               "Event history returns records.", NULL);
		}
		if (eq_run != 1 || run_ids != 1 ||
		    q->npreds != 1 + partitions || eq_partition != partitions) {
			return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE,
			               q->preds[0].at,
			               "Event history takes run_id = value and "
			               "optionally partition_key = value.",
			               NULL);
		}
		if (q->norder != 1 || !q->has_limit) {
			return fail_at(
			    p, FQL_UNSUPPORTED_QUERY_SHAPE,
			    q->norder ? at_limit : at_return,
			    "Event history needs ORDER BY event_id and "
			    "a LIMIT.",
			    NULL);
		}
		q->kind = FQL_K_HISTORY;
		return 0;
	}
	if (q->ret == FQL_RET_RECORD) {
		if (eq_run != 1 || run_ids != 1 ||
		    q->npreds != 1 + partitions || eq_partition != partitions) {
			return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE,
			               q->preds[0].at,
			               "RETURN RECORD reads one run: run_id = "
			               "value and optionally partition_key = "
			               "value.",
			               "Collections use ORDER BY, LIMIT and "
			               "RETURN RECORDS.");
		}
		if (q->norder || q->has_limit || q->has_cursor) {
			return fail_at(
			    p, FQL_UNSUPPORTED_QUERY_SHAPE,
			    q->norder ? at_order : at_limit,
			    "A point read takes no ORDER BY, LIMIT or "
			    "CURSOR.",
			    NULL);
		}
		q->kind = FQL_K_POINT;
		return 0;
	}
	if (eq_partition != 1) {
		return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE, q->preds[0].at,
		               "A collection or count needs exactly one "
		               "partition_key = value.",
		               NULL);
	}
	if (q->ret == FQL_RET_COUNT) {
		if (q->norder || q->has_limit || q->has_cursor) {
			return fail_at(
			    p, FQL_UNSUPPORTED_QUERY_SHAPE,
			    q->norder ? at_order : at_limit,
			    "RETURN COUNT takes no ORDER BY, LIMIT or "
			    "CURSOR.",
			    NULL);
		}
		q->kind = FQL_K_COUNT;
		return 0;
	}
	if (q->npreds == 2 && eq_run == 1 && run_ids == 1) {
		return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE, q->preds[0].at,
		               "partition_key and run_id name one run.",
		               "Use RETURN RECORD for a point read.");
	}
	if (q->norder == 0 || !q->has_limit) {
		return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE, at_return,
		               "RETURN RECORDS needs ORDER BY and LIMIT.",
		               NULL);
	}
	for (uint32_t i = 0; i < q->norder; i++) {
		enum fql_fid id = q->order[i].field.id;
		if (fql_field_type(id) != FQL_FT_INTEGER) {
			return fail_at(p, FQL_UNSUPPORTED_QUERY_SHAPE,
			               q->order[i].field.at,
			               "ORDER BY takes integer record fields.",
			               "The run identity is the implicit tie "
			               "breaker.");
		}
	}
	q->kind = FQL_K_COLLECTION;
	return 0;
}

static bool param_seen(const struct fql_query *q, const struct fql_value *v)
{
	/* a parameter used before v in text order */
	for (uint32_t i = 0; i < q->npreds; i++) {
		for (uint32_t k = 0; k < q->preds[i].nvals; k++) {
			const struct fql_value *u = &q->preds[i].v[k];
			if (u == v) {
				return false;
			}
			if (u->kind == FQL_V_PARAM &&
			    bytes_eq(u->s, u->len, v->s, v->len)) {
				return true;
			}
		}
	}
	return false;
}

static void count_params(struct fql_query *q)
{
	q->nparams = 0;
	for (uint32_t i = 0; i < q->npreds; i++) {
		for (uint32_t k = 0; k < q->preds[i].nvals; k++) {
			const struct fql_value *v = &q->preds[i].v[k];
			if (v->kind == FQL_V_PARAM && !param_seen(q, v)) {
				q->nparams++;
			}
		}
	}
	if (q->has_cursor && !param_seen(q, &q->cursor)) {
		q->nparams++;
	}
}

int fql_parse(const char *text, size_t len, struct fql_query *q,
              struct fql_diag *d)
{
	struct fql_tokens toks;
	int rv;
	memset(q, 0, offsetof(struct fql_query, text));
	q->text_len = 0;
	q->arena_used = 0;
	fql_diag_set(d, FQL_OK, NULL, NULL);
	if (len > FQL_MAX_TEXT) {
		return fql_lex(text, len, &toks, d);
	}
	memcpy(q->text, text, len);
	q->text[len] = '\0';
	q->text_len = (uint32_t)len;
	if ((rv = fql_lex(q->text, len, &toks, d))) {
		return rv;
	}
	struct parser p = {q, &toks, 0, d};
	if (accept_kw(&p, "EXPLAIN")) {
		q->mode = accept_kw(&p, "ANALYZE") ? FQL_EXPLAIN_ANALYZE
		                                   : FQL_EXPLAIN;
	}
	if ((rv = expect_kw(&p, "FROM", "A query starts with FROM."))) {
		return rv;
	}
	if (accept_kw(&p, "RUNS")) {
		q->source = FQL_RUNS;
	} else if (accept_kw(&p, "EVENTS")) {
		q->source = FQL_EVENTS;
	} else if (peek(&p)->kind == FQL_T_WORD && !is_kw(&p, "WHERE")) {
		return fail_tok(&p, FQL_UNSUPPORTED_SOURCE,
		                "The sources are runs and events.", NULL);
	} else {
		return fail_tok(&p, FQL_INVALID_SYNTAX,
		                "Expected runs or events after FROM.", NULL);
	}
	if ((rv = expect_kw(&p, "WHERE", "Expected WHERE after the source."))) {
		return rv;
	}
	do {
		if (q->npreds == FQL_MAX_PREDICATES) {
			return fail_tok(&p, FQL_UNSUPPORTED_QUERY_SHAPE,
			                "A query takes at most 12 predicates.",
			                NULL);
		}
		if ((rv = parse_pred(&p, &q->preds[q->npreds]))) {
			return rv;
		}
		q->npreds++;
	} while (accept_kw(&p, "AND"));
	uint32_t at_order = peek(&p)->at;
	if (accept_kw(&p, "ORDER")) {
		if ((rv = expect_kw(&p, "BY", "Expected BY after ORDER."))) {
			return rv;
		}
		do {
			if (q->norder == FQL_MAX_ORDER) {
				return fail_tok(
				    &p, FQL_UNSUPPORTED_QUERY_SHAPE,
				    "ORDER BY takes at most 2 fields.", NULL);
			}
			struct fql_order *o = &q->order[q->norder];
			if ((rv = parse_field(&p, USE_ORDER, &o->field))) {
				return rv;
			}
			for (uint32_t k = 0; k < q->norder; k++) {
				if (fql_field_equal(&q->order[k].field,
				                    &o->field)) {
					return fail_at(
					    &p, FQL_UNSUPPORTED_QUERY_SHAPE,
					    o->field.at,
					    "ORDER BY names a field twice.",
					    NULL);
				}
			}
			if (accept_kw(&p, "DESC")) {
				o->desc = true;
			} else {
				accept_kw(&p, "ASC");
			}
			q->norder++;
		} while (accept(&p, FQL_T_COMMA));
	}
	uint32_t at_limit = peek(&p)->at;
	if (accept_kw(&p, "LIMIT")) {
		const struct fql_token *t = peek(&p);
		if (t->kind != FQL_T_INT) {
			return fail_tok(&p, FQL_INVALID_SYNTAX,
			                "LIMIT takes an integer.", NULL);
		}
		if (t->i < 1 || t->i > (int64_t)FQL_MAX_LIMIT) {
			return fail_tok(&p, FQL_UNSUPPORTED_QUERY_SHAPE,
			                "LIMIT is 1 to 100.", NULL);
		}
		q->has_limit = true;
		q->limit = (uint32_t)t->i;
		p.pos++;
	}
	if (accept_kw(&p, "CURSOR")) {
		const struct fql_token *t = peek(&p);
		if (t->kind != FQL_T_PARAM) {
			return fail_tok(&p, FQL_INVALID_SYNTAX,
			                "CURSOR takes an @parameter.", NULL);
		}
		q->has_cursor = true;
		q->cursor.kind = FQL_V_PARAM;
		q->cursor.s = q->text + t->at + 1;
		q->cursor.len = t->len - 1;
		q->cursor.at = t->at;
		p.pos++;
	}
	uint32_t at_return = peek(&p)->at;
	if (!accept_kw(&p, "RETURN")) {
		return fail_tok(
		    &p, FQL_INVALID_SYNTAX,
		    q->norder || q->has_limit
		        ? "Expected LIMIT, CURSOR or RETURN."
		        : "Expected AND, ORDER BY, LIMIT or RETURN.",
		    NULL);
	}
	if (accept_kw(&p, "RECORD")) {
		q->ret = FQL_RET_RECORD;
	} else if (accept_kw(&p, "RECORDS")) {
		q->ret = FQL_RET_RECORDS;
	} else if (accept_kw(&p, "COUNT")) {
		q->ret = FQL_RET_COUNT;
	} else {
		return fail_tok(
		    &p, FQL_INVALID_SYNTAX,
		    "Expected RECORD, RECORDS or COUNT after RETURN.", NULL);
	}
	if (peek(&p)->kind == FQL_T_LPAREN) {
		if (q->ret == FQL_RET_COUNT) {
			return fail_tok(&p, FQL_UNSUPPORTED_QUERY_SHAPE,
			                "RETURN COUNT takes no projection.",
			                NULL);
		}
		p.pos++;
		q->has_projection = true;
		do {
			if (q->nproj == FQL_MAX_PROJECTION) {
				return fail_tok(
				    &p, FQL_QUERY_PROJECTION_LIMIT_EXCEEDED,
				    "A projection takes at most 32 "
				    "fields.",
				    NULL);
			}
			struct fql_field *f = &q->proj[q->nproj];
			if ((rv = parse_field(&p, USE_PROJ, f))) {
				return rv;
			}
			for (uint32_t k = 0; k < q->nproj; k++) {
				if (fql_field_equal(&q->proj[k], f)) {
					return fail_at(
					    &p, FQL_DUPLICATE_PROJECTION_FIELD,
					    f->at, NULL, NULL);
				}
			}
			q->nproj++;
		} while (accept(&p, FQL_T_COMMA));
		if (!accept(&p, FQL_T_RPAREN)) {
			return fail_tok(&p, FQL_INVALID_SYNTAX,
			                "Expected , or ) in the projection.",
			                NULL);
		}
	}
	accept(&p, FQL_T_SEMI);
	if (peek(&p)->kind != FQL_T_EOF) {
		return fail_tok(&p, FQL_INVALID_SYNTAX,
		                "Unexpected text after the end of the query.",
		                NULL);
	}
	if ((rv = check_shape(&p, at_return, at_order, at_limit))) {
		return rv;
	}
	count_params(q);
	return 0;
}

int fql_check_version(const void *version, size_t len, struct fql_diag *d)
{
	if (len == 4 && memcmp(version, FQL_VERSION, 4) == 0) {
		return 0;
	}
	fql_diag_set(d, FQL_UNSUPPORTED_QUERY_VERSION, NULL,
	             "The supported language version is FQL1.");
	return FQL_UNSUPPORTED_QUERY_VERSION;
}

/* ---- binder ---- */

static int bind_fail(struct fql_query *q, struct fql_diag *d,
                     enum fql_code code, const struct fql_value *v,
                     const char *detail)
{
	fql_diag_set(d, code, detail, NULL);
	if (v != NULL) {
		fql_diag_at(d, q->text, q->text_len, v->at);
	}
	return code;
}

/* The bound value of parameter v, from the params map. */
static int bind_param(struct fql_query *q, const struct fsnp_val *params,
                      struct fql_value *v, struct fql_diag *d)
{
	struct fsnp_val pv;
	if (params == NULL || fsnp_map_get_n(params, v->s, v->len, &pv) != 0) {
		return bind_fail(q, d, FQL_MISSING_PARAMETER, v,
		                 "The query names a parameter the request does "
		                 "not carry.");
	}
	switch (pv.tag) {
	case FSNP_BIN:
		v->btype = FQL_B_STR;
		v->bp = pv.as.bin.ptr;
		v->blen = pv.as.bin.len;
		return 0;
	case FSNP_I64:
		v->btype = FQL_B_INT;
		v->bi = pv.as.i;
		return 0;
	case FSNP_U64:
		if (pv.as.u > (uint64_t)INT64_MAX) {
			break;
		}
		v->btype = FQL_B_INT;
		v->bi = (int64_t)pv.as.u;
		return 0;
	case FSNP_TRUE:
	case FSNP_FALSE:
		v->btype = FQL_B_BOOL;
		v->bb = pv.tag == FSNP_TRUE;
		return 0;
	case FSNP_F64:
		if (!isfinite(pv.as.f)) {
			break;
		}
		v->btype = FQL_B_FLOAT;
		/* -0.0 and 0.0 compare and index alike */
		v->bf = pv.as.f == 0.0 ? 0.0 : pv.as.f;
		return 0;
	default:
		break;
	}
	return bind_fail(q, d, FQL_INVALID_PARAMETER_TYPE, v,
	                 "Parameters are strings, signed 64-bit integers, "
	                 "booleans or finite floats.");
}

static int check_bound(struct fql_query *q, const struct fql_field *f,
                       const struct fql_value *v, struct fql_diag *d)
{
	switch (fql_field_type(f->id)) {
	case FQL_FT_KEYWORD:
		if (v->btype != FQL_B_STR || v->blen == 0) {
			return bind_fail(q, d, FQL_INVALID_PARAMETER_TYPE, v,
			                 "The field compares with non-empty "
			                 "strings.");
		}
		if ((f->id == FQL_F_PARTITION_KEY &&
		     v->blen > FQL_MAX_PARTITION_KEY) ||
		    (f->id == FQL_F_RUN_ID && v->blen > FQL_MAX_RUN_ID)) {
			return bind_fail(
			    q, d, FQL_QUERY_VALUE_TOO_LARGE, v,
			    f->id == FQL_F_RUN_ID
			        ? "A run id is at most 65483 bytes."
			        : "A partition key is at most 65535 "
			          "bytes.");
		}
		return 0;
	case FQL_FT_INTEGER:
		if (v->btype != FQL_B_INT) {
			return bind_fail(q, d, FQL_INVALID_PARAMETER_TYPE, v,
			                 "The field compares with integers.");
		}
		return 0;
	default:
		return 0;
	}
}

int fql_bind(struct fql_query *q, const struct fsnp_val *params,
             struct fql_diag *d)
{
	int rv;
	fql_diag_set(d, FQL_OK, NULL, NULL);
	q->bound = false;
	if (params != NULL && params->tag == FSNP_NIL) {
		params = NULL;
	}
	if (params != NULL) {
		if (params->tag != FSNP_MAP) {
			return bind_fail(q, d, FQL_INVALID_PARAMETERS, NULL,
			                 "params is a map of names to values.");
		}
		if (params->as.count > FQL_MAX_PARAMS) {
			return bind_fail(
			    q, d, FQL_INVALID_PARAMETERS, NULL,
			    "A query takes at most 64 parameters.");
		}
		struct fsnp_iter it, it2;
		struct fsnp_bytes k, k2;
		struct fsnp_val unused;
		fsnp_iter_init(&it, params);
		uint32_t idx = 0;
		while (fsnp_iter_next(&it, &k, &unused)) {
			if (k.len == 0) {
				return bind_fail(q, d, FQL_INVALID_PARAMETERS,
				                 NULL,
				                 "A parameter name is empty.");
			}
			fsnp_iter_init(&it2, params);
			for (uint32_t j = 0;
			     j < idx && fsnp_iter_next(&it2, &k2, &unused);
			     j++) {
				if (k2.len == k.len &&
				    memcmp(k2.ptr, k.ptr, k.len) == 0) {
					return bind_fail(
					    q, d, FQL_INVALID_PARAMETERS, NULL,
					    "A parameter name is repeated.");
				}
			}
			idx++;
		}
	}
	for (uint32_t i = 0; i < q->npreds; i++) {
		struct fql_pred *pr = &q->preds[i];
		for (uint32_t k = 0; k < pr->nvals; k++) {
			struct fql_value *v = &pr->v[k];
			if (v->kind == FQL_V_PARAM) {
				if ((rv = bind_param(q, params, v, d))) {
					return rv;
				}
			} else {
				bind_literal(v);
			}
			if ((rv = check_bound(q, &pr->field, v, d))) {
				return rv;
			}
			for (uint32_t j = 0; pr->op == FQL_OP_IN && j < k;
			     j++) {
				if (pr->v[j].btype == v->btype &&
				    cmp_bound(&pr->v[j], v) == 0) {
					return bind_fail(q, d,
					                 FQL_INVALID_SYNTAX, v,
					                 "An IN list repeats a "
					                 "value.");
				}
			}
		}
		if (pr->op == FQL_OP_BETWEEN || pr->op == FQL_OP_WINDOW) {
			if (pr->v[0].btype != pr->v[1].btype) {
				return bind_fail(
				    q, d, FQL_INVALID_PARAMETER_TYPE, &pr->v[1],
				    "Both bounds of a range have one "
				    "type.");
			}
			if (cmp_bound(&pr->v[0], &pr->v[1]) > 0) {
				return bind_fail(
				    q, d, FQL_UNSUPPORTED_QUERY_SHAPE,
				    &pr->v[0],
				    "The lower bound of a range is above "
				    "its upper bound.");
			}
		}
	}
	if (q->has_cursor) {
		struct fql_value *c = &q->cursor;
		if ((rv = bind_param(q, params, c, d))) {
			return rv;
		}
		if (c->btype != FQL_B_STR) {
			return bind_fail(q, d, FQL_INVALID_PARAMETER_TYPE, c,
			                 "A cursor is a string.");
		}
		if (c->blen > FQL_CURSOR_MAX) {
			return bind_fail(q, d, FQL_QUERY_CURSOR_TOO_LARGE, c,
			                 NULL);
		}
		if (c->blen < FQL_CURSOR_MIN ||
		    memcmp(c->bp, FQL_CURSOR_PREFIX,
		           strlen(FQL_CURSOR_PREFIX)) != 0) {
			return bind_fail(q, d, FQL_QUERY_CURSOR_INVALID, c,
			                 NULL);
		}
	}
	uint32_t entries = params != NULL ? params->as.count : 0;
	if (entries != q->nparams) {
		/* every name used is present (checked above), so some entry
		 * is not used */
		return bind_fail(q, d, FQL_UNEXPECTED_PARAMETER, NULL,
		                 "The request carries a parameter the query "
		                 "does not name.");
	}
	q->bound = true;
	return 0;
}

/* ---- equality ---- */

bool fql_query_equal(const struct fql_query *a, const struct fql_query *b)
{
	if (a->mode != b->mode || a->source != b->source ||
	    a->kind != b->kind || a->npreds != b->npreds ||
	    a->norder != b->norder || a->has_limit != b->has_limit ||
	    (a->has_limit && a->limit != b->limit) ||
	    a->has_cursor != b->has_cursor || a->ret != b->ret ||
	    a->has_projection != b->has_projection || a->nproj != b->nproj ||
	    a->nparams != b->nparams) {
		return false;
	}
	for (uint32_t i = 0; i < a->npreds; i++) {
		const struct fql_pred *x = &a->preds[i], *y = &b->preds[i];
		if (x->op != y->op || x->nvals != y->nvals ||
		    !fql_field_equal(&x->field, &y->field)) {
			return false;
		}
		for (uint32_t k = 0; k < x->nvals; k++) {
			if (!value_equal(&x->v[k], &y->v[k])) {
				return false;
			}
		}
	}
	for (uint32_t i = 0; i < a->norder; i++) {
		if (a->order[i].desc != b->order[i].desc ||
		    !fql_field_equal(&a->order[i].field, &b->order[i].field)) {
			return false;
		}
	}
	if (a->has_cursor && !value_equal(&a->cursor, &b->cursor)) {
		return false;
	}
	for (uint32_t i = 0; i < a->nproj; i++) {
		if (!fql_field_equal(&a->proj[i], &b->proj[i])) {
			return false;
		}
	}
	return true;
}
