/* History parsers and pairing; see history.h and jepsen/README.md. */
#include "jepsen/history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Maximum nesting of EDN collections skipped inside an event map. */
#define EDN_MAX_DEPTH 64

static const char *const type_names[] = {"invoke", "ok", "fail", "info"};

static const char *const f_names[JEPSEN_F_COUNT_] = {
    "read",     "get",   "write",  "cas",      "append", "add",    "publish",
    "consume",  "ack",   "nack",   "send",     "recv",   "create", "claim",
    "complete", "retry", "extend", "schedule", "target",
};

const char *jepsen_history_type_name(enum jepsen_type t)
{
	return (unsigned)t < 4 ? type_names[t] : "?";
}

const char *jepsen_history_f_name(enum jepsen_f f)
{
	return (unsigned)f < JEPSEN_F_COUNT_ ? f_names[f] : "?";
}

static int type_lookup(const char *s, size_t len, uint8_t *out)
{
	for (unsigned i = 0; i < 4; i++) {
		if (strlen(type_names[i]) == len &&
		    memcmp(type_names[i], s, len) == 0) {
			*out = (uint8_t)i;
			return 0;
		}
	}
	return -1;
}

static int f_lookup(const char *s, size_t len, uint8_t *out)
{
	for (unsigned i = 0; i < JEPSEN_F_COUNT_; i++) {
		if (strlen(f_names[i]) == len &&
		    memcmp(f_names[i], s, len) == 0) {
			*out = (uint8_t)i;
			return 0;
		}
	}
	/* Porcupine's kv histories say "put" for a write. */
	if (len == 3 && memcmp(s, "put", 3) == 0) {
		*out = JEPSEN_F_WRITE;
		return 0;
	}
	return -1;
}

void jepsen_history_init(struct jepsen_history *h)
{
	memset(h, 0, sizeof *h);
	jepsen_intern_init(&h->strings);
}

void jepsen_history_free(struct jepsen_history *h)
{
	free(h->events);
	free(h->values);
	free(h->ops);
	free(h->event_op);
	jepsen_intern_free(&h->strings);
	memset(h, 0, sizeof *h);
}

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int push_value(struct jepsen_history *h, uint32_t id)
{
	if (h->n_values == h->values_cap) {
		if (h->values_cap >= UINT32_MAX / 2) {
			return -E2BIG;
		}
		size_t cap = h->values_cap ? h->values_cap * 2 : 256;
		uint32_t *nv = realloc(h->values, cap * sizeof *nv);
		if (nv == NULL) {
			return -ENOMEM;
		}
		h->values = nv;
		h->values_cap = cap;
	}
	h->values[h->n_values++] = id;
	return 0;
}

/* Appends an event whose values are h->values[first..n_values). */
static int push_event(struct jepsen_history *h, const struct jepsen_event *ev)
{
	if (h->n_events == h->events_cap) {
		if (h->events_cap >= UINT32_MAX / 4) {
			return -E2BIG;
		}
		size_t cap = h->events_cap ? h->events_cap * 2 : 256;
		struct jepsen_event *ne = realloc(h->events, cap * sizeof *ne);
		if (ne == NULL) {
			return -ENOMEM;
		}
		h->events = ne;
		h->events_cap = cap;
	}
	h->events[h->n_events++] = *ev;
	return 0;
}

static int intern_int(struct jepsen_history *h, int64_t v, uint32_t *id)
{
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%" PRId64, v);
	return jepsen_intern_put(&h->strings, buf, (size_t)n, id);
}

/* Parses a whole decimal int64 ("-12"); returns 0 or -1. */
static int parse_int(const char *s, size_t len, int64_t *out)
{
	size_t i = 0;
	int neg = 0;
	uint64_t v = 0;
	if (len > 0 && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		i = 1;
	}
	if (i == len) {
		return -1;
	}
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return -1;
		}
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10) {
			return -1;
		}
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1) {
			return -1;
		}
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	} else {
		if (v > (uint64_t)INT64_MAX) {
			return -1;
		}
		*out = (int64_t)v;
	}
	return 0;
}

/* Is value `id` the keyword a timed-out request reports? */
static int is_timeout(const struct jepsen_history *h, uint32_t id)
{
	size_t len;
	const char *v = jepsen_intern_str(&h->strings, id, &len);
	return (len == 10 && memcmp(v, ":timed-out", 10) == 0) ||
	       (len == 8 && memcmp(v, ":timeout", 8) == 0);
}

/* A "fail" that timed out is indeterminate: the request may still take
 * effect. */
static void timeout_is_info(const struct jepsen_history *h,
                            struct jepsen_event *ev, int error_timeout)
{
	if (ev->type != JEPSEN_FAIL) {
		return;
	}
	if (error_timeout ||
	    (ev->nvalues == 1 && is_timeout(h, h->values[ev->values]))) {
		ev->type = JEPSEN_INFO;
	}
}

/* ---- EDN reader (the subset Jepsen histories use) -------------------- */

enum edn_kind {
	EDN_NIL,
	EDN_BOOL,
	EDN_INT,
	EDN_STR,     /* decoded into edn.scratch */
	EDN_KEYWORD, /* text after the ':' */
	EDN_SYMBOL,
	EDN_OPEN, /* '[', '(' or '{'; `text` holds the bracket */
	EDN_CLOSE,
	EDN_EOF,
};

struct edn_atom {
	enum edn_kind kind;
	int64_t i;
	const char *text; /* into the input, or edn.scratch for strings */
	size_t len;
};

struct edn {
	const char *p;
	const char *end;
	uint32_t line;
	char *scratch; /* owned: decoded string bytes */
	size_t scratch_cap;
	char *err;
	size_t errlen;
};

static int edn_is_delim(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',' ||
	       c == '{' || c == '}' || c == '[' || c == ']' || c == '(' ||
	       c == ')' || c == '"' || c == ';' || c == '\f' || c == '\v';
}

static void edn_skip_ws(struct edn *e)
{
	while (e->p < e->end) {
		char c = *e->p;
		if (c == '\n') {
			e->line++;
			e->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == ',' ||
		           c == '\f' || c == '\v') {
			e->p++;
		} else if (c == ';') {
			while (e->p < e->end && *e->p != '\n') {
				e->p++;
			}
		} else {
			break;
		}
	}
}

static int edn_scratch_put(struct edn *e, size_t at, char c)
{
	if (at >= JEPSEN_HISTORY_MAX_TOKEN) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: string longer than %d bytes", e->line,
		               JEPSEN_HISTORY_MAX_TOKEN);
	}
	if (at >= e->scratch_cap) {
		size_t cap = e->scratch_cap ? e->scratch_cap * 2 : 256;
		char *ns = realloc(e->scratch, cap);
		if (ns == NULL) {
			return -ENOMEM;
		}
		e->scratch = ns;
		e->scratch_cap = cap;
	}
	e->scratch[at] = c;
	return 0;
}

static int edn_read_string(struct edn *e, struct edn_atom *a)
{
	uint32_t start_line = e->line;
	size_t n = 0;
	int rc;
	e->p++; /* opening quote */
	for (;;) {
		if (e->p >= e->end) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: unterminated string",
			               start_line);
		}
		char c = *e->p++;
		if (c == '"') {
			break;
		}
		if (c == '\n') {
			e->line++;
		}
		if (c == '\\') {
			if (e->p >= e->end) {
				continue; /* reported as unterminated */
			}
			char x = *e->p++;
			switch (x) {
			case 'n':
				c = '\n';
				break;
			case 't':
				c = '\t';
				break;
			case 'r':
				c = '\r';
				break;
			case '"':
			case '\\':
				c = x;
				break;
			default:
				return set_err(
				    e->err, e->errlen, -EINVAL,
				    "line %u: unsupported string escape "
				    "'\\%c'",
				    e->line, x);
			}
		}
		if ((rc = edn_scratch_put(e, n++, c)) != 0) {
			return rc;
		}
	}
	a->kind = EDN_STR;
	a->text = n > 0 ? e->scratch : "";
	a->len = n;
	return 0;
}

/* Reads the next atom or bracket. */
static int edn_next(struct edn *e, struct edn_atom *a)
{
	edn_skip_ws(e);
	memset(a, 0, sizeof *a);
	if (e->p >= e->end) {
		a->kind = EDN_EOF;
		return 0;
	}
	char c = *e->p;
	if (c == '{' || c == '[' || c == '(') {
		a->kind = EDN_OPEN;
		a->text = e->p++;
		a->len = 1;
		return 0;
	}
	if (c == '}' || c == ']' || c == ')') {
		a->kind = EDN_CLOSE;
		a->text = e->p++;
		a->len = 1;
		return 0;
	}
	if (c == '"') {
		return edn_read_string(e, a);
	}
	if (c == '#' || c == '\\' || c == '^' || c == '@' || c == '`' ||
	    c == '~' || c == '\'') {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: unsupported EDN syntax '%c'", e->line,
		               c);
	}
	const char *s = e->p;
	while (e->p < e->end && !edn_is_delim(*e->p)) {
		e->p++;
	}
	size_t len = (size_t)(e->p - s);
	if (len > JEPSEN_HISTORY_MAX_TOKEN) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: token longer than %d bytes", e->line,
		               JEPSEN_HISTORY_MAX_TOKEN);
	}
	a->text = s;
	a->len = len;
	if (c == ':') {
		if (len < 2) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: empty keyword", e->line);
		}
		a->kind = EDN_KEYWORD;
		a->text = s + 1;
		a->len = len - 1;
		return 0;
	}
	int numeric =
	    (c >= '0' && c <= '9') ||
	    ((c == '-' || c == '+') && len > 1 && s[1] >= '0' && s[1] <= '9');
	if (numeric) {
		if (parse_int(s, len, &a->i) != 0) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: unsupported number '%.*s'",
			               e->line, (int)(len > 40 ? 40 : len), s);
		}
		a->kind = EDN_INT;
		return 0;
	}
	if (len == 3 && memcmp(s, "nil", 3) == 0) {
		a->kind = EDN_NIL;
	} else if (len == 4 && memcmp(s, "true", 4) == 0) {
		a->kind = EDN_BOOL;
		a->i = 1;
	} else if (len == 5 && memcmp(s, "false", 5) == 0) {
		a->kind = EDN_BOOL;
	} else {
		a->kind = EDN_SYMBOL;
	}
	return 0;
}

static char closer(char open)
{
	return open == '{' ? '}' : open == '[' ? ']' : ')';
}

/* Skips the rest of a collection whose opening bracket was just read. */
static int edn_skip_coll(struct edn *e, char open, int depth)
{
	struct edn_atom a;
	int rc;
	if (depth > EDN_MAX_DEPTH) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: collections nested too deeply",
		               e->line);
	}
	for (;;) {
		if ((rc = edn_next(e, &a)) != 0) {
			return rc;
		}
		if (a.kind == EDN_EOF) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: missing '%c'", e->line,
			               closer(open));
		}
		if (a.kind == EDN_CLOSE) {
			if (a.text[0] != closer(open)) {
				return set_err(e->err, e->errlen, -EINVAL,
				               "line %u: '%c' closes '%c'",
				               e->line, a.text[0], open);
			}
			return 0;
		}
		if (a.kind == EDN_OPEN &&
		    (rc = edn_skip_coll(e, a.text[0], depth + 1)) != 0) {
			return rc;
		}
	}
}

/* Interns a scalar atom as a value id: integers in canonical form,
 * keywords with their ':', nil as JEPSEN_NIL. */
static int edn_intern(struct jepsen_history *h, const struct edn_atom *a,
                      uint32_t *id)
{
	switch (a->kind) {
	case EDN_NIL:
		*id = JEPSEN_NIL;
		return 0;
	case EDN_INT:
		return intern_int(h, a->i, id);
	case EDN_BOOL:
		return jepsen_intern_put(&h->strings, a->i ? "true" : "false",
		                         a->i ? 4 : 5, id);
	case EDN_KEYWORD:
		return jepsen_intern_put(&h->strings, a->text - 1, a->len + 1,
		                         id);
	case EDN_STR:
	case EDN_SYMBOL:
		return jepsen_intern_put(&h->strings, a->text, a->len, id);
	default:
		return -EINVAL;
	}
}

static int is_scalar(enum edn_kind k)
{
	return k == EDN_NIL || k == EDN_BOOL || k == EDN_INT || k == EDN_STR ||
	       k == EDN_KEYWORD || k == EDN_SYMBOL;
}

/* Reads an operation value: a scalar, or a vector/list of scalars (a cas
 * pair). Pushes the ids onto h->values and counts them in *n. A map or a
 * nested collection is skipped and flagged in *nested: only a nemesis
 * event may carry one. */
static int edn_read_value(struct edn *e, struct jepsen_history *h, uint32_t *n,
                          int *nested)
{
	struct edn_atom a;
	uint32_t id;
	int rc;
	*n = 0;
	*nested = 0;
	if ((rc = edn_next(e, &a)) != 0) {
		return rc;
	}
	if (is_scalar(a.kind)) {
		if ((rc = edn_intern(h, &a, &id)) != 0 ||
		    (rc = push_value(h, id)) != 0) {
			return rc;
		}
		*n = 1;
		return 0;
	}
	if (a.kind != EDN_OPEN) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: expected a value", e->line);
	}
	if (a.text[0] == '{') {
		*nested = 1;
		return edn_skip_coll(e, '{', 1);
	}
	char open = a.text[0];
	for (;;) {
		if ((rc = edn_next(e, &a)) != 0) {
			return rc;
		}
		if (a.kind == EDN_CLOSE && a.text[0] == closer(open)) {
			return 0;
		}
		if (a.kind == EDN_OPEN) {
			*nested = 1;
			if ((rc = edn_skip_coll(e, a.text[0], 2)) != 0) {
				return rc;
			}
			continue;
		}
		if (a.kind == EDN_EOF) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: missing '%c'", e->line,
			               closer(open));
		}
		if (!is_scalar(a.kind)) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: '%c' closes '%c'", e->line,
			               a.text[0], open);
		}
		if ((rc = edn_intern(h, &a, &id)) != 0 ||
		    (rc = push_value(h, id)) != 0) {
			return rc;
		}
		if (++*n > 1024) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: value vector too long",
			               e->line);
		}
	}
}

/* Reads one event map whose '{' was just read; *skip is set for events of
 * non-client processes (:nemesis). */
static int edn_read_event(struct edn *e, struct jepsen_history *h,
                          struct jepsen_event *ev, int *skip)
{
	struct edn_atom k, a;
	int have_process = 0, have_type = 0, have_f = 0, have_value = 0;
	int nested = 0, error_timeout = 0;
	uint32_t map_line = e->line;
	int rc;
	memset(ev, 0, sizeof *ev);
	ev->line = map_line;
	ev->time = (int64_t)h->n_events;
	ev->values = (uint32_t)h->n_values;
	*skip = 0;
	for (;;) {
		if ((rc = edn_next(e, &k)) != 0) {
			return rc;
		}
		if (k.kind == EDN_CLOSE && k.text[0] == '}') {
			break;
		}
		if (k.kind != EDN_KEYWORD) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: expected a keyword key or '}'",
			               e->line);
		}
#define KEY_IS(s) (k.len == sizeof(s) - 1 && memcmp(k.text, s, k.len) == 0)
		if (KEY_IS("value")) {
			if (have_value) {
				return set_err(e->err, e->errlen, -EINVAL,
				               "line %u: duplicate :value",
				               e->line);
			}
			have_value = 1;
			if ((rc = edn_read_value(e, h, &ev->nvalues,
			                         &nested)) != 0) {
				return rc;
			}
			continue;
		}
		if ((rc = edn_next(e, &a)) != 0) {
			return rc;
		}
		if (a.kind == EDN_EOF || a.kind == EDN_CLOSE) {
			return set_err(e->err, e->errlen, -EINVAL,
			               "line %u: key :%.*s has no value",
			               e->line, (int)(k.len > 40 ? 40 : k.len),
			               k.text);
		}
		if (KEY_IS("process")) {
			if (a.kind == EDN_INT) {
				ev->process = a.i;
			} else if (a.kind == EDN_KEYWORD) {
				*skip = 1; /* :nemesis and friends */
			} else {
				return set_err(e->err, e->errlen, -EINVAL,
				               "line %u: :process must be an "
				               "integer or a keyword",
				               e->line);
			}
			have_process = 1;
		} else if (KEY_IS("type")) {
			if (a.kind != EDN_KEYWORD ||
			    type_lookup(a.text, a.len, &ev->type) != 0) {
				return set_err(
				    e->err, e->errlen, -EINVAL,
				    "line %u: :type must be :invoke, "
				    ":ok, :fail or :info",
				    e->line);
			}
			have_type = 1;
		} else if (KEY_IS("f")) {
			if ((a.kind != EDN_KEYWORD && a.kind != EDN_STR) ||
			    f_lookup(a.text, a.len, &ev->f) != 0) {
				if (a.kind == EDN_KEYWORD ||
				    a.kind == EDN_STR) {
					/* Decided below, once :process is
					 * known: nemesis ops have their own
					 * vocabulary. */
					ev->f = JEPSEN_F_COUNT_;
				} else {
					return set_err(e->err, e->errlen,
					               -EINVAL,
					               "line %u: :f must be a "
					               "keyword",
					               e->line);
				}
			}
			have_f = 1;
		} else if (KEY_IS("key")) {
			if (!is_scalar(a.kind)) {
				return set_err(e->err, e->errlen, -EINVAL,
				               "line %u: :key must be a scalar",
				               e->line);
			}
			if ((rc = edn_intern(h, &a, &ev->key)) != 0) {
				return rc;
			}
		} else if (KEY_IS("error")) {
			if (a.kind == EDN_KEYWORD &&
			    ((a.len == 7 &&
			      memcmp(a.text, "timeout", 7) == 0) ||
			     (a.len == 9 &&
			      memcmp(a.text, "timed-out", 9) == 0))) {
				error_timeout = 1;
			} else if (a.kind == EDN_OPEN &&
			           (rc = edn_skip_coll(e, a.text[0], 1)) != 0) {
				return rc;
			}
		} else if (KEY_IS("time")) {
			if (a.kind != EDN_INT) {
				return set_err(
				    e->err, e->errlen, -EINVAL,
				    "line %u: :time must be an integer",
				    e->line);
			}
			ev->time = a.i;
		} else if (a.kind == EDN_OPEN) {
			if ((rc = edn_skip_coll(e, a.text[0], 1)) != 0) {
				return rc;
			}
		}
#undef KEY_IS
	}
	if (*skip) {
		return 0;
	}
	if (!have_process || !have_type || !have_f) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: event needs :process, :type and :f",
		               map_line);
	}
	if (nested) {
		return set_err(
		    e->err, e->errlen, -EINVAL,
		    "line %u: only scalars and vectors of scalars are "
		    "supported as a client operation's :value",
		    map_line);
	}
	if (ev->f == JEPSEN_F_COUNT_) {
		return set_err(e->err, e->errlen, -EINVAL,
		               "line %u: unknown :f for a client operation",
		               map_line);
	}
	timeout_is_info(h, ev, error_timeout);
	return 0;
}

static int parse_edn(struct jepsen_history *h, const char *buf, size_t len,
                     char *err, size_t errlen)
{
	struct edn e = {.p = buf,
	                .end = buf + len,
	                .line = 1,
	                .err = err,
	                .errlen = errlen};
	struct edn_atom a;
	struct jepsen_event ev;
	char wrapper = 0;
	int first = 1, skip, rc;
	for (;;) {
		if ((rc = edn_next(&e, &a)) != 0) {
			goto out;
		}
		if (a.kind == EDN_EOF) {
			if (wrapper != 0) {
				rc = set_err(err, errlen, -EINVAL,
				             "line %u: missing '%c'", e.line,
				             closer(wrapper));
			}
			goto out;
		}
		if (a.kind == EDN_CLOSE && wrapper != 0 &&
		    a.text[0] == closer(wrapper)) {
			edn_skip_ws(&e);
			if (e.p < e.end) {
				rc = set_err(err, errlen, -EINVAL,
				             "line %u: data after the history",
				             e.line);
			}
			goto out;
		}
		if (a.kind == EDN_OPEN && a.text[0] != '{' && first) {
			/* The whole history may be one vector or list. */
			wrapper = a.text[0];
			first = 0;
			continue;
		}
		first = 0;
		if (a.kind != EDN_OPEN || a.text[0] != '{') {
			rc = set_err(err, errlen, -EINVAL,
			             "line %u: expected an event map '{'",
			             e.line);
			goto out;
		}
		size_t values_mark = h->n_values;
		if ((rc = edn_read_event(&e, h, &ev, &skip)) != 0) {
			goto out;
		}
		if (skip) {
			h->n_values = values_mark;
			continue;
		}
		if ((rc = push_event(h, &ev)) != 0) {
			goto out;
		}
	}
out:
	free(e.scratch);
	return rc;
}

/* ---- line-oriented formats -------------------------------------------- */

struct cursor {
	const char *p;
	const char *end; /* end of the line, excluding "\r\n" */
};

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\f' || c == '\v';
}

/* Next whitespace-separated token; returns 0 at the end of the line. */
static int next_token(struct cursor *c, const char **tok, size_t *len)
{
	while (c->p < c->end && is_space(*c->p)) {
		c->p++;
	}
	if (c->p >= c->end) {
		return 0;
	}
	*tok = c->p;
	while (c->p < c->end && !is_space(*c->p)) {
		c->p++;
	}
	*len = (size_t)(c->p - *tok);
	return 1;
}

static int tok_is(const char *tok, size_t len, const char *s)
{
	return strlen(s) == len && memcmp(tok, s, len) == 0;
}

/* One line of an etcd test log:
 *   LEVEL LOGGER - PROCESS :TYPE :F VALUE
 * Lines of other loggers are skipped, as are nemesis events. */
static int parse_etcd_line(struct jepsen_history *h, struct cursor *c,
                           uint32_t line, char *err, size_t errlen)
{
	static const char *const levels[] = {"TRACE", "DEBUG", "INFO",
	                                     "WARN",  "ERROR", "FATAL"};
	const char *tok;
	size_t len;
	int rc;
	if (!next_token(c, &tok, &len)) {
		return 0; /* blank line */
	}
	int known = 0;
	for (unsigned i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		known |= tok_is(tok, len, levels[i]);
	}
	if (!known) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: not a log line (expected a level such "
		               "as INFO)",
		               line);
	}
	if (!next_token(c, &tok, &len)) {
		return set_err(err, errlen, -EINVAL, "line %u: no logger",
		               line);
	}
	if (!tok_is(tok, len, "jepsen.util")) {
		return 0;
	}
	if (!next_token(c, &tok, &len) || !tok_is(tok, len, "-")) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: expected '-' after the logger", line);
	}
	struct jepsen_event ev;
	memset(&ev, 0, sizeof ev);
	ev.line = line;
	ev.time = line;
	ev.values = (uint32_t)h->n_values;
	if (!next_token(c, &tok, &len)) {
		return set_err(err, errlen, -EINVAL, "line %u: no process",
		               line);
	}
	if (tok[0] == ':') {
		return 0; /* :nemesis */
	}
	if (parse_int(tok, len, &ev.process) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: process must be an integer", line);
	}
	if (!next_token(c, &tok, &len) || len < 2 || tok[0] != ':' ||
	    type_lookup(tok + 1, len - 1, &ev.type) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: type must be :invoke, :ok, :fail or "
		               ":info",
		               line);
	}
	if (!next_token(c, &tok, &len) || len < 2 || tok[0] != ':' ||
	    f_lookup(tok + 1, len - 1, &ev.f) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: unknown operation (expected :read, "
		               ":write, :cas ...)",
		               line);
	}
	/* The value is EDN: nil, an integer, [a b], or a keyword. */
	struct edn e = {.p = c->p,
	                .end = c->end,
	                .line = line,
	                .err = err,
	                .errlen = errlen};
	int nested;
	rc = edn_read_value(&e, h, &ev.nvalues, &nested);
	free(e.scratch);
	if (rc != 0) {
		return rc;
	}
	if (nested) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: the value must be nil, a number, a "
		               "keyword or a flat vector",
		               line);
	}
	edn_skip_ws(&e);
	if (e.p != e.end) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: unexpected text after the value",
		               line);
	}
	timeout_is_info(h, &ev, 0);
	return push_event(h, &ev);
}

/* One line of the Lodestone line format:
 *   TIME PROCESS TYPE F KEY [VALUE...]   ('#' starts a comment line) */
static int parse_lines_line(struct jepsen_history *h, struct cursor *c,
                            uint32_t line, int64_t *last_time, char *err,
                            size_t errlen)
{
	const char *tok;
	size_t len;
	uint32_t id;
	int rc;
	if (!next_token(c, &tok, &len) || tok[0] == '#') {
		return 0;
	}
	struct jepsen_event ev;
	memset(&ev, 0, sizeof ev);
	ev.line = line;
	ev.values = (uint32_t)h->n_values;
	if (parse_int(tok, len, &ev.time) != 0 || ev.time < 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: time must be a non-negative integer",
		               line);
	}
	if (ev.time < *last_time) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: time %" PRId64
		               " is before the previous "
		               "line's %" PRId64,
		               line, ev.time, *last_time);
	}
	*last_time = ev.time;
	if (!next_token(c, &tok, &len) ||
	    parse_int(tok, len, &ev.process) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: process must be an integer", line);
	}
	if (!next_token(c, &tok, &len) ||
	    type_lookup(tok, len, &ev.type) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: type must be invoke, ok, fail or info",
		               line);
	}
	if (!next_token(c, &tok, &len) || f_lookup(tok, len, &ev.f) != 0) {
		return set_err(err, errlen, -EINVAL,
		               "line %u: unknown operation", line);
	}
	if (!next_token(c, &tok, &len)) {
		return set_err(err, errlen, -EINVAL, "line %u: no key", line);
	}
	if (len > JEPSEN_HISTORY_MAX_TOKEN) {
		return set_err(err, errlen, -EINVAL, "line %u: key too long",
		               line);
	}
	if ((rc = jepsen_intern_put(&h->strings, tok, len, &ev.key)) != 0) {
		return rc;
	}
	while (next_token(c, &tok, &len)) {
		if (len > JEPSEN_HISTORY_MAX_TOKEN) {
			return set_err(err, errlen, -EINVAL,
			               "line %u: value too long", line);
		}
		if (tok_is(tok, len, "nil")) {
			id = JEPSEN_NIL;
		} else if ((rc = jepsen_intern_put(&h->strings, tok, len,
		                                   &id)) != 0) {
			return rc;
		}
		if ((rc = push_value(h, id)) != 0) {
			return rc;
		}
		ev.nvalues++;
	}
	return push_event(h, &ev);
}

static int parse_by_line(struct jepsen_history *h, enum jepsen_format fmt,
                         const char *buf, size_t len, char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len;
	uint32_t line = 0;
	int64_t last_time = 0;
	int rc;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl != NULL ? nl : end;
		struct cursor c = {p, eol};
		if (line == UINT32_MAX - 1) {
			return set_err(err, errlen, -E2BIG, "too many lines");
		}
		line++;
		if (c.end > c.p && c.end[-1] == '\r') {
			c.end--;
		}
		size_t values_mark = h->n_values;
		if (fmt == JEPSEN_FORMAT_ETCD_LOG) {
			rc = parse_etcd_line(h, &c, line, err, errlen);
		} else {
			rc = parse_lines_line(h, &c, line, &last_time, err,
			                      errlen);
		}
		if (rc != 0) {
			return rc;
		}
		if (h->n_events == 0 ||
		    h->events[h->n_events - 1].line != line) {
			h->n_values = values_mark; /* skipped line */
		}
		p = nl != NULL ? nl + 1 : end;
	}
	return 0;
}

/* ---- pairing ----------------------------------------------------------- */

struct pending {
	int64_t *procs;
	uint32_t *ops; /* op index + 1; 0 = empty slot */
	size_t cap;
	size_t used;
};

static size_t proc_slot(const struct pending *t, int64_t proc)
{
	uint64_t x = (uint64_t)proc * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(x ^ (x >> 29)) & (t->cap - 1);
	while (t->ops[i] != 0 && t->procs[i] != proc) {
		i = (i + 1) & (t->cap - 1);
	}
	return i;
}

/* Linear probing with deletion by backward shift keeps lookups exact. */
static void pending_remove(struct pending *t, size_t i)
{
	size_t j = i;
	t->ops[i] = 0;
	for (;;) {
		j = (j + 1) & (t->cap - 1);
		if (t->ops[j] == 0) {
			return;
		}
		uint64_t x = (uint64_t)t->procs[j] * 0x9e3779b97f4a7c15ull;
		size_t home = (size_t)(x ^ (x >> 29)) & (t->cap - 1);
		/* Move j to i unless its home lies cyclically in (i, j]. */
		int stays =
		    i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			t->procs[i] = t->procs[j];
			t->ops[i] = t->ops[j];
			t->ops[j] = 0;
			i = j;
		}
	}
}

static int pending_grow(struct pending *t)
{
	struct pending n = {0};
	n.cap = t->cap ? t->cap * 2 : 64;
	n.procs = calloc(n.cap, sizeof *n.procs);
	n.ops = calloc(n.cap, sizeof *n.ops);
	if (n.procs == NULL || n.ops == NULL) {
		free(n.procs);
		free(n.ops);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->cap; i++) {
		if (t->ops[i] != 0) {
			size_t s = proc_slot(&n, t->procs[i]);
			n.procs[s] = t->procs[i];
			n.ops[s] = t->ops[i];
		}
	}
	n.used = t->used;
	free(t->procs);
	free(t->ops);
	*t = n;
	return 0;
}

static int pair_ops(struct jepsen_history *h, char *err, size_t errlen)
{
	struct pending t = {0};
	int rc = 0;
	if (h->n_events == 0) {
		return 0;
	}
	h->ops = calloc(h->n_events, sizeof *h->ops);
	h->event_op = calloc(h->n_events, sizeof *h->event_op);
	if (h->ops == NULL || h->event_op == NULL || pending_grow(&t) != 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < h->n_events; i++) {
		const struct jepsen_event *ev = &h->events[i];
		size_t s = proc_slot(&t, ev->process);
		if (ev->type == JEPSEN_INVOKE) {
			if (t.ops[s] != 0) {
				const struct jepsen_op *prev =
				    &h->ops[t.ops[s] - 1];
				rc =
				    set_err(err, errlen, -EINVAL,
				            "line %u: process %" PRId64
				            " invokes while its operation from "
				            "line %u is pending",
				            ev->line, ev->process,
				            h->events[prev->invoke].line);
				goto out;
			}
			struct jepsen_op *op = &h->ops[h->n_ops];
			op->process = ev->process;
			op->key = ev->key;
			op->invoke = (uint32_t)i;
			op->complete = JEPSEN_NONE;
			op->type = JEPSEN_INFO;
			op->f = ev->f;
			h->event_op[i] = (uint32_t)h->n_ops;
			t.procs[s] = ev->process;
			t.ops[s] = (uint32_t)++h->n_ops;
			if (++t.used * 2 > t.cap &&
			    (rc = pending_grow(&t)) != 0) {
				goto out;
			}
			continue;
		}
		if (t.ops[s] == 0) {
			rc = set_err(err, errlen, -EINVAL,
			             "line %u: process %" PRId64
			             " completes an operation it never invoked",
			             ev->line, ev->process);
			goto out;
		}
		struct jepsen_op *op = &h->ops[t.ops[s] - 1];
		if (op->f != ev->f || op->key != ev->key) {
			rc = set_err(err, errlen, -EINVAL,
			             "line %u: completion does not match the "
			             "invocation at line %u (operation or key "
			             "differs)",
			             ev->line, h->events[op->invoke].line);
			goto out;
		}
		op->complete = (uint32_t)i;
		op->type = ev->type;
		h->event_op[i] = t.ops[s] - 1;
		pending_remove(&t, s);
		t.used--;
	}
out:
	free(t.procs);
	free(t.ops);
	return rc;
}

int jepsen_history_parse(struct jepsen_history *h, enum jepsen_format fmt,
                         const char *buf, size_t len, char *err, size_t errlen)
{
	int rc;
	if (err != NULL && errlen > 0) {
		err[0] = '\0';
	}
	if (memchr(buf, '\0', len) != NULL) {
		size_t at =
		    (size_t)((const char *)memchr(buf, '\0', len) - buf);
		return set_err(err, errlen, -EINVAL,
		               "NUL byte at offset %zu: not a text history",
		               at);
	}
	switch (fmt) {
	case JEPSEN_FORMAT_KV_EDN:
		rc = parse_edn(h, buf, len, err, errlen);
		break;
	case JEPSEN_FORMAT_ETCD_LOG:
	case JEPSEN_FORMAT_LINES:
		rc = parse_by_line(h, fmt, buf, len, err, errlen);
		break;
	default:
		return set_err(err, errlen, -EINVAL, "unknown format");
	}
	if (rc == 0) {
		rc = pair_ops(h, err, errlen);
	}
	if (rc == -ENOMEM && err != NULL && errlen > 0 && err[0] == '\0') {
		set_err(err, errlen, rc, "out of memory");
	}
	if (rc == -E2BIG && err != NULL && errlen > 0 && err[0] == '\0') {
		set_err(err, errlen, rc, "history too large");
	}
	return rc;
}

int jepsen_history_load(struct jepsen_history *h, enum jepsen_format fmt,
                        const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;
	if (f == NULL) {
		rc = -errno;
		return set_err(err, errlen, rc, "%s: %s", path, strerror(-rc));
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, ncap);
			if (nb == NULL) {
				rc = set_err(err, errlen, -ENOMEM,
				             "%s: out of memory", path);
				goto err_read;
			}
			buf = nb;
			cap = ncap;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0) {
			break;
		}
	}
	if (ferror(f)) {
		rc = set_err(err, errlen, -EIO, "%s: read error", path);
		goto err_read;
	}
	fclose(f);
	rc = jepsen_history_parse(h, fmt, buf, len, err, errlen);
	free(buf);
	return rc;
err_read:
	fclose(f);
	free(buf);
	return rc;
}

int jepsen_history_format_parse(const char *name, enum jepsen_format *fmt)
{
	if (strcmp(name, "etcd-log") == 0) {
		*fmt = JEPSEN_FORMAT_ETCD_LOG;
	} else if (strcmp(name, "kv-edn") == 0) {
		*fmt = JEPSEN_FORMAT_KV_EDN;
	} else if (strcmp(name, "lines") == 0) {
		*fmt = JEPSEN_FORMAT_LINES;
	} else {
		return -EINVAL;
	}
	return 0;
}

const uint32_t *jepsen_history_op_values(const struct jepsen_history *h,
                                         const struct jepsen_op *op, size_t *n)
{
	const struct jepsen_event *ev = op->type == JEPSEN_OK
	                                    ? &h->events[op->complete]
	                                    : &h->events[op->invoke];
	*n = ev->nvalues;
	/* A history without any values has no array (NULL + 0 is UB). */
	return h->values != NULL ? h->values + ev->values : NULL;
}

const char *jepsen_history_str(const struct jepsen_history *h, uint32_t id)
{
	return id == JEPSEN_NIL ? "nil"
	                        : jepsen_intern_str(&h->strings, id, NULL);
}

uint32_t jepsen_history_invoke_line(const struct jepsen_history *h,
                                    const struct jepsen_op *op)
{
	return h->events[op->invoke].line;
}

uint32_t jepsen_history_complete_line(const struct jepsen_history *h,
                                      const struct jepsen_op *op)
{
	return op->complete == JEPSEN_NONE ? 0 : h->events[op->complete].line;
}

void jepsen_history_describe(const struct jepsen_history *h,
                             const struct jepsen_op *op, char *buf,
                             size_t buflen)
{
	size_t n, used;
	const uint32_t *v = jepsen_history_op_values(h, op, &n);
	int w = snprintf(buf, buflen, "process %" PRId64 " %s", op->process,
	                 jepsen_history_f_name(op->f));
	used = w < 0 ? 0 : (size_t)w;
	if (op->key != JEPSEN_NIL && used < buflen) {
		w = snprintf(buf + used, buflen - used, " key %.40s",
		             jepsen_history_str(h, op->key));
		used += w < 0 ? 0 : (size_t)w;
	}
	for (size_t i = 0; i < n && i < 4 && used < buflen; i++) {
		w = snprintf(buf + used, buflen - used, " %.60s",
		             jepsen_history_str(h, v[i]));
		used += w < 0 ? 0 : (size_t)w;
	}
	if (n > 4 && used < buflen) {
		w = snprintf(buf + used, buflen - used, " ...(%zu values)", n);
		used += w < 0 ? 0 : (size_t)w;
	}
	if (used < buflen) {
		if (op->complete == JEPSEN_NONE) {
			snprintf(buf + used, buflen - used,
			         " never completed (line %u)",
			         jepsen_history_invoke_line(h, op));
		} else {
			snprintf(buf + used, buflen - used, " %s (lines %u-%u)",
			         jepsen_history_type_name(op->type),
			         jepsen_history_invoke_line(h, op),
			         jepsen_history_complete_line(h, op));
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int jepsen_history_ops_by_key(const struct jepsen_history *h, uint32_t **order)
{
	uint64_t *keyed = malloc((h->n_ops + 1) * sizeof *keyed);
	uint32_t *out = malloc((h->n_ops + 1) * sizeof *out);
	if (keyed == NULL || out == NULL) {
		free(keyed);
		free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < h->n_ops; i++) {
		keyed[i] = ((uint64_t)h->ops[i].key << 32) | i;
	}
	qsort(keyed, h->n_ops, sizeof *keyed, cmp_u64);
	for (size_t i = 0; i < h->n_ops; i++) {
		out[i] = (uint32_t)keyed[i];
	}
	free(keyed);
	*order = out;
	return 0;
}
