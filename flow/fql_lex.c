/* FQL1 lexer (flow/fql_lex.h). */
#include "flow/fql_lex.h"

#include <string.h>

size_t fql_utf8_valid_prefix(const uint8_t *p, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint8_t c = p[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			n = 1;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 2;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return i;
		}
		if (len - i <= n) {
			return i;
		}
		for (size_t k = 1; k <= n; k++) {
			if ((p[i + k] & 0xC0) != 0x80) {
				return i;
			}
			cp = (cp << 6) | (p[i + k] & 0x3F);
		}
		/* overlong forms, surrogates, beyond U+10FFFF */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
			return i;
		}
		i += n + 1;
	}
	return len;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_word(char c)
{
	return is_alpha(c) || is_digit(c) || c == '.' || c == '-';
}

static int fail(struct fql_diag *d, enum fql_code code, const char *detail,
                const char *text, size_t len, size_t at)
{
	fql_diag_set(d, code, detail, NULL);
	fql_diag_at(d, text, len, at);
	return code;
}

int fql_lex(const char *text, size_t len, struct fql_tokens *out,
            struct fql_diag *d)
{
	out->n = 0;
	if (len > FQL_MAX_TEXT) {
		return fail(d, FQL_QUERY_TOO_LARGE,
		            "Query text is longer than 16384 bytes.", text, len,
		            FQL_MAX_TEXT);
	}
	size_t ok = fql_utf8_valid_prefix((const uint8_t *)text, len);
	if (ok != len) {
		return fail(d, FQL_INVALID_SYNTAX,
		            "Query text is not valid UTF-8.", text, len, ok);
	}
	size_t i = 0;
	for (;;) {
		while (i < len && is_space(text[i])) {
			i++;
		}
		struct fql_token *t = &out->t[out->n];
		memset(t, 0, sizeof *t);
		t->at = (uint32_t)i;
		if (i == len) {
			t->kind = FQL_T_EOF;
			return 0;
		}
		if (out->n == FQL_MAX_TOKENS) {
			return fail(d, FQL_QUERY_TOO_LARGE,
			            "Query text has more than 256 tokens.",
			            text, len, i);
		}
		char c = text[i];
		size_t start = i;
		if (is_alpha(c)) {
			while (i < len && is_word(text[i])) {
				i++;
			}
			t->kind = FQL_T_WORD;
		} else if (is_digit(c) ||
		           (c == '-' && i + 1 < len && is_digit(text[i + 1]))) {
			bool neg = c == '-';
			if (neg) {
				i++;
			}
			/* accumulate as a negative number so INT64_MIN fits */
			int64_t v = 0;
			bool range = true;
			while (i < len && is_digit(text[i])) {
				int dg = text[i] - '0';
				if (v < (INT64_MIN + dg) / 10) {
					range = false;
				} else {
					v = v * 10 - dg;
				}
				i++;
			}
			if (i < len && is_word(text[i])) {
				return fail(d, FQL_INVALID_SYNTAX,
				            "A number runs into a word.", text,
				            len, i);
			}
			if (!neg && v == INT64_MIN) {
				range = false;
			}
			if (!range) {
				return fail(
				    d, FQL_INVALID_PARAMETER_TYPE,
				    "Integer literal is outside the signed "
				    "64-bit range.",
				    text, len, start);
			}
			t->kind = FQL_T_INT;
			t->i = neg ? v : -v;
		} else if (c == '\'') {
			i++;
			for (;;) {
				if (i == len) {
					return fail(d, FQL_INVALID_SYNTAX,
					            "String literal is not "
					            "terminated.",
					            text, len, start);
				}
				if (text[i] == '\'') {
					if (i + 1 < len &&
					    text[i + 1] == '\'') {
						i += 2;
						continue;
					}
					i++;
					break;
				}
				i++;
			}
			t->kind = FQL_T_STR;
		} else if (c == '@') {
			i++;
			if (i == len || !is_alpha(text[i])) {
				return fail(
				    d, FQL_INVALID_SYNTAX,
				    "A parameter name starts with a letter "
				    "or underscore after @.",
				    text, len, start);
			}
			while (i < len &&
			       (is_alpha(text[i]) || is_digit(text[i]))) {
				i++;
			}
			if (i - start - 1 > FQL_MAX_PARAM_NAME) {
				return fail(
				    d, FQL_INVALID_SYNTAX,
				    "A parameter name is longer than 128 "
				    "bytes.",
				    text, len, start);
			}
			t->kind = FQL_T_PARAM;
		} else {
			static const char punct[] = "()[],=;";
			static const enum fql_tok kinds[] = {
			    FQL_T_LPAREN, FQL_T_RPAREN, FQL_T_LBRACK,
			    FQL_T_RBRACK, FQL_T_COMMA,  FQL_T_EQ,
			    FQL_T_SEMI};
			const char *p = memchr(punct, c, sizeof punct - 1);
			if (c == '\0' || p == NULL) {
				return fail(d, FQL_INVALID_SYNTAX,
				            "Unexpected character.", text, len,
				            i);
			}
			t->kind = kinds[p - punct];
			i++;
		}
		t->len = (uint32_t)(i - start);
		out->n++;
	}
}

bool fql_tok_is(const char *text, const struct fql_token *t, const char *kw)
{
	size_t n = strlen(kw);
	if (t->kind != FQL_T_WORD || t->len != n) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = text[t->at + i];
		if (c >= 'a' && c <= 'z') {
			c = (char)(c - 32);
		}
		if (c != kw[i]) {
			return false;
		}
	}
	return true;
}
