/* RocksDB's column family statistics text; see cfstats.h. */
#include "store/cfstats.h"

#include <stdbool.h>
#include <string.h>

/* One whitespace-separated token of a line: [p, p + n). */
struct tok {
	const char *p;
	size_t n;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The next token of [*p, end) separated by spaces (and by `extra`, when
 * not NUL); false at the line's end. */
static bool next_tok(const char **p, const char *end, char extra, struct tok *t)
{
	const char *s = *p;
	while (s < end && (is_space(*s) || (extra != '\0' && *s == extra))) {
		s++;
	}
	if (s == end) {
		*p = s;
		return false;
	}
	t->p = s;
	while (s < end && !is_space(*s) && !(extra != '\0' && *s == extra)) {
		s++;
	}
	t->n = (size_t)(s - t->p);
	*p = s;
	return true;
}

static bool tok_is(const struct tok *t, const char *s)
{
	size_t n = strlen(s);
	return t->n == n && memcmp(t->p, s, n) == 0;
}

/* A token of decimal digits as a count (saturating); false otherwise. */
static bool tok_count(const struct tok *t, uint64_t *v)
{
	uint64_t x = 0;
	if (t->n == 0) {
		return false;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (t->p[i] < '0' || t->p[i] > '9') {
			return false;
		}
		unsigned d = (unsigned)(t->p[i] - '0');
		x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
	}
	*v = x;
	return true;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void store_cfstats_parse(const char *text, size_t len,
                         struct store_cfstats *out)
{
	const char *line = text, *end = text + len;
	int col = -1; /* Comp(cnt)'s token index in the rows */
	bool have_sum = false;

	memset(out, 0, sizeof *out);
	while (line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		const char *le = eol != NULL ? eol : end;
		const char *p = line;
		struct tok t;

		line = eol != NULL ? eol + 1 : end;
		if (!next_tok(&p, le, '\0', &t)) {
			continue;
		}
		if (tok_is(&t, "Level") && col < 0) {
			/* "Size" is one header token but two in the rows
			 * ("1.22 GB"). */
			int extra = 0;
			for (int i = 1; next_tok(&p, le, '\0', &t); i++) {
				if (tok_is(&t, "Size")) {
					extra = 1;
				} else if (tok_is(&t, "Comp(cnt)")) {
					col = i + extra;
					break;
				}
			}
		} else if (tok_is(&t, "Sum") && col > 0 && !have_sum) {
			for (int i = 1; next_tok(&p, le, '\0', &t); i++) {
				if (i == col) {
					have_sum =
					    tok_count(&t, &out->compactions);
					break;
				}
			}
		} else if (tok_is(&t, "Stalls(count):")) {
			/* "N cause, N cause, ..., interval N total count" */
			uint64_t v;
			while (next_tok(&p, le, ',', &t) &&
			       !tok_is(&t, "interval")) {
				if (tok_count(&t, &v)) {
					out->stalls = add_sat(out->stalls, v);
				}
			}
		}
	}
}
