/* A workload's history in memory; see workload_hist.h. */
#include "jepsen/workload_hist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const type_names[WL_N_TYPES] = {"invoke", "ok", "fail",
                                                   "info"};

const char *wl_type_name(enum wl_type t)
{
	return t < WL_N_TYPES ? type_names[t] : "?";
}

void wl_hist_init(struct wl_hist *h, int64_t t0_ns)
{
	memset(h, 0, sizeof *h);
	h->t0_ns = t0_ns;
}

void wl_hist_free(struct wl_hist *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->lines[i]);
	}
	free(h->lines);
	memset(h, 0, sizeof *h);
}

int64_t wl_hist_now(struct wl_hist *h)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - h->t0_ns;
	if (t < h->last_ns) {
		t = h->last_ns;
	}
	return t;
}

/* Appends a line (owned). Returns its index, or SIZE_MAX. */
static size_t push(struct wl_hist *h, char *line)
{
	if (line == NULL) {
		h->oom = true;
		return SIZE_MAX;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap == 0 ? 4096 : h->cap * 2;
		char **l = realloc(h->lines, cap * sizeof *l);
		if (l == NULL) {
			free(line);
			h->oom = true;
			return SIZE_MAX;
		}
		h->lines = l;
		h->cap = cap;
	}
	h->lines[h->n] = line;
	return h->n++;
}

size_t wl_hist_event(struct wl_hist *h, unsigned process, enum wl_type type,
                     const char *f, const char *key, const char *vals)
{
	if (h->frozen) {
		return SIZE_MAX;
	}
	int64_t t = wl_hist_now(h);
	char *line = NULL;
	bool has = vals != NULL && vals[0] != '\0';
	if (asprintf(&line, "%" PRId64 " %u %s %s %s%s%s", t, process,
	             wl_type_name(type), f, key, has ? " " : "",
	             has ? vals : "") < 0) {
		line = NULL;
	}
	h->last_ns = t;
	if (type < WL_N_TYPES) {
		h->counts[type]++;
	}
	return push(h, line);
}

size_t wl_hist_eventf(struct wl_hist *h, unsigned process, enum wl_type type,
                      const char *f, const char *key, const char *fmt, ...)
{
	va_list ap;
	char *vals = NULL;
	va_start(ap, fmt);
	if (vasprintf(&vals, fmt, ap) < 0) {
		vals = NULL;
	}
	va_end(ap);
	if (vals == NULL) {
		h->oom = true;
		return SIZE_MAX;
	}
	size_t i = wl_hist_event(h, process, type, f, key, vals);
	free(vals);
	return i;
}

void wl_hist_comment(struct wl_hist *h, const char *fmt, ...)
{
	va_list ap;
	char *body = NULL, *line = NULL;
	if (h->frozen) {
		return;
	}
	va_start(ap, fmt);
	if (vasprintf(&body, fmt, ap) < 0) {
		body = NULL;
	}
	va_end(ap);
	if (body != NULL) {
		/* One line: a message may carry line breaks. */
		for (char *c = body; *c != '\0'; c++) {
			if (*c == '\n' || *c == '\r') {
				*c = ' ';
			}
		}
		if (asprintf(&line, "# %s", body) < 0) {
			line = NULL;
		}
	}
	free(body);
	push(h, line);
}

void wl_hist_replace(struct wl_hist *h, size_t i, char *line)
{
	if (i >= h->n) {
		free(line);
		return;
	}
	free(h->lines[i]);
	h->lines[i] = line;
}

int wl_hist_write(const struct wl_hist *h, const char *path)
{
	FILE *f = fopen(path, "we");
	if (f == NULL) {
		return -errno;
	}
	for (size_t i = 0; i < h->n; i++) {
		if (h->lines[i] != NULL) {
			fputs(h->lines[i], f);
			fputc('\n', f);
		}
	}
	if (h->oom) {
		fputs("# incomplete: events were lost for want of memory\n", f);
	}
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && rc == 0) {
		rc = -errno;
	}
	return rc;
}

bool wl_token_ok(const char *s, size_t len)
{
	if (len == 0 || len > 65536 || s[0] == '#') {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c == 0x7f) {
			return false;
		}
	}
	return true;
}

void wl_token_of(const uint8_t *p, size_t len, char *out, size_t cap)
{
	if (len < cap && wl_token_ok((const char *)p, len) &&
	    !(len == 3 && memcmp(p, "nil", 3) == 0)) {
		memcpy(out, p, len);
		out[len] = '\0';
		return;
	}
	size_t o = (size_t)snprintf(out, cap, "x");
	for (size_t i = 0; i < len && o + 3 < cap; i++) {
		o += (size_t)snprintf(out + o, cap - o, "%02x", p[i]);
	}
}
