/* FQL1 lexer: query text into at most FQL_MAX_TOKENS tokens, each with its
 * byte offset. The text must be valid UTF-8 of at most FQL_MAX_TEXT bytes.
 *
 * Tokens: words ([A-Za-z_] then [A-Za-z0-9_.-]*, so a dotted selector such
 * as state_meta.review.risk_tier is one word; keywords are words compared
 * without regard to ASCII case), signed 64-bit integers (-?[0-9]+), string
 * literals ('...' with '' for a quote), parameters (@ then [A-Za-z_] and
 * [A-Za-z0-9_]*, at most 128 bytes of name), ( ) [ ] , = ;. Whitespace is
 * space, tab, CR, LF, VT and FF. */
#ifndef FLOW_FQL_LEX_H
#define FLOW_FQL_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/fql_error.h"

#define FQL_MAX_TEXT 16384u
#define FQL_MAX_TOKENS 256u
#define FQL_MAX_PARAM_NAME 128u

enum fql_tok {
	FQL_T_EOF,
	FQL_T_WORD,
	FQL_T_INT,
	FQL_T_STR,
	FQL_T_PARAM,
	FQL_T_LPAREN,
	FQL_T_RPAREN,
	FQL_T_LBRACK,
	FQL_T_RBRACK,
	FQL_T_COMMA,
	FQL_T_EQ,
	FQL_T_SEMI,
};

struct fql_token {
	enum fql_tok kind;
	uint32_t at;  /* byte offset of the first byte */
	uint32_t len; /* bytes of source text */
	int64_t i;    /* FQL_T_INT */
};

struct fql_tokens {
	uint32_t n; /* tokens before the final FQL_T_EOF */
	struct fql_token t[FQL_MAX_TOKENS + 1];
};

/* Tokenize text[0..len). 0, or an FQL code with d filled in (position at
 * the offending byte): query_too_large (bytes or tokens), invalid_syntax
 * (bad UTF-8, stray character, unterminated string, bad parameter name),
 * invalid_parameter_type (integer out of range). */
int fql_lex(const char *text, size_t len, struct fql_tokens *out,
            struct fql_diag *d);

/* True when token t of text is the keyword kw (upper case, no dots). */
bool fql_tok_is(const char *text, const struct fql_token *t, const char *kw);

/* Length of the valid UTF-8 prefix of p[0..len) (== len when valid). */
size_t fql_utf8_valid_prefix(const uint8_t *p, size_t len);

#endif /* FLOW_FQL_LEX_H */
