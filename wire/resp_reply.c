/* RESP reply encoders; see resp_reply.h. */
#include "wire/resp_reply.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void head(struct wbuf *b, char type, int64_t n)
{
	char tmp[32];
	int k = snprintf(tmp, sizeof tmp, "%c%" PRId64 "\r\n", type, n);
	wbuf_append(b, tmp, (size_t)k);
}

void resp_w_simple(struct wbuf *b, const char *s)
{
	/* One reservation: every SET's "+OK" goes through here. */
	size_t n = strlen(s);
	uint8_t *p = wbuf_extend(b, n + 3);
	if (p == NULL) {
		return;
	}
	p[0] = '+';
	memcpy(p + 1, s, n);
	p[n + 1] = '\r';
	p[n + 2] = '\n';
}

void resp_w_error(struct wbuf *b, const char *msg)
{
	size_t n = strlen(msg);
	uint8_t *p;
	wbuf_put_u8(b, '-');
	p = wbuf_extend(b, n);
	if (p != NULL) {
		for (size_t i = 0; i < n; i++) {
			p[i] = msg[i] == '\r' || msg[i] == '\n'
			           ? ' '
			           : (uint8_t)msg[i];
		}
	}
	wbuf_append(b, "\r\n", 2);
}

void resp_w_errorf(struct wbuf *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	resp_w_error(b, msg);
}

void resp_w_int(struct wbuf *b, int64_t v)
{
	head(b, ':', v);
}

void resp_w_bulk(struct wbuf *b, const void *p, size_t n)
{
	head(b, '$', (int64_t)n);
	wbuf_append(b, p, n);
	wbuf_append(b, "\r\n", 2);
}

void resp_w_bulk_str(struct wbuf *b, const char *s)
{
	resp_w_bulk(b, s, strlen(s));
}

void resp_w_null(struct wbuf *b, int proto)
{
	if (proto >= 3) {
		wbuf_append(b, "_\r\n", 3);
	} else {
		wbuf_append(b, "$-1\r\n", 5);
	}
}

void resp_w_null_array(struct wbuf *b, int proto)
{
	if (proto >= 3) {
		wbuf_append(b, "_\r\n", 3);
	} else {
		wbuf_append(b, "*-1\r\n", 5);
	}
}

void resp_w_array(struct wbuf *b, size_t n)
{
	head(b, '*', (int64_t)n);
}

void resp_w_map(struct wbuf *b, size_t n, int proto)
{
	if (proto >= 3) {
		head(b, '%', (int64_t)n);
	} else {
		head(b, '*', (int64_t)(2 * n));
	}
}

void resp_w_set(struct wbuf *b, size_t n, int proto)
{
	head(b, proto >= 3 ? '~' : '*', (int64_t)n);
}

/* Redis's text of a double: "inf", "-inf", else %.17g trimmed the way
 * its fpconv does (shortest text that reads back; %.17g is close and
 * exact for the integers scores usually are). */
static int double_text(double d, char *out, size_t cap)
{
	if (isinf(d)) {
		return snprintf(out, cap, "%s", d > 0 ? "inf" : "-inf");
	}
	if (isnan(d)) {
		return snprintf(out, cap, "nan");
	}
	for (int prec = 1; prec <= 17; prec++) {
		int k = snprintf(out, cap, "%.*g", prec, d);
		if (strtod(out, NULL) == d) {
			return k;
		}
	}
	return snprintf(out, cap, "%.17g", d);
}

void resp_w_double(struct wbuf *b, double d, int proto)
{
	char tmp[64];
	int k = double_text(d, tmp, sizeof tmp);
	if (proto >= 3) {
		wbuf_put_u8(b, ',');
		wbuf_append(b, tmp, (size_t)k);
		wbuf_append(b, "\r\n", 2);
	} else {
		resp_w_bulk(b, tmp, (size_t)k);
	}
}

void resp_w_verbatim(struct wbuf *b, const char *s, size_t n, int proto)
{
	if (proto >= 3) {
		head(b, '=', (int64_t)n + 4);
		wbuf_append(b, "txt:", 4);
		wbuf_append(b, s, n);
		wbuf_append(b, "\r\n", 2);
	} else {
		resp_w_bulk(b, s, n);
	}
}
