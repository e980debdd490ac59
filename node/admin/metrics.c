/* Metrics registry and Prometheus text rendering; see metrics.h. */
#include "node/admin/metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint64_t metric_hist_bounds_ns[METRIC_HIST_BOUNDS] = {
    100000,     250000,     500000,      1000000,     2500000,   5000000,
    10000000,   25000000,   50000000,    100000000,   250000000, 500000000,
    1000000000, 2500000000, 5000000000u, 10000000000u};

struct metrics_out {
	char *buf;
	size_t len, cap;
	bool oom;
};

void metrics_init(struct metrics *m)
{
	memset(m, 0, sizeof *m);
}

void metrics_free(struct metrics *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->series[i]);
	}
	free(m->series);
	memset(m, 0, sizeof *m);
}

static struct metric *get(struct metrics *m, enum metric_type type,
                          const char *name, const char *help,
                          const char *labels)
{
	labels = labels ? labels : "";
	for (size_t i = 0; i < m->n; i++) {
		struct metric *s = m->series[i];
		if (strcmp(s->name, name) == 0 &&
		    strcmp(s->labels, labels) == 0) {
			return s;
		}
	}
	if (strlen(name) >= sizeof m->series[0]->name ||
	    strlen(labels) >= sizeof m->series[0]->labels) {
		return NULL;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		struct metric **ns = realloc(m->series, cap * sizeof *ns);
		if (ns == NULL) {
			return NULL;
		}
		m->series = ns;
		m->cap = cap;
	}
	/* Each series on its own: handles stay valid as the index grows. */
	struct metric *s = calloc(1, sizeof *s);
	if (s == NULL) {
		return NULL;
	}
	m->series[m->n++] = s;
	strcpy(s->name, name);
	strcpy(s->labels, labels);
	s->help = help;
	s->type = type;
	return s;
}

struct metric *metrics_counter(struct metrics *m, const char *name,
                               const char *help, const char *labels)
{
	return get(m, METRIC_COUNTER, name, help, labels);
}

struct metric *metrics_gauge(struct metrics *m, const char *name,
                             const char *help, const char *labels)
{
	return get(m, METRIC_GAUGE, name, help, labels);
}

int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *data)
{
	if (m->n_collectors == METRICS_MAX_COLLECTORS) {
		return -1;
	}
	m->collectors[m->n_collectors].fn = fn;
	m->collectors[m->n_collectors].data = data;
	m->n_collectors++;
	return 0;
}

void metrics_remove_collector(struct metrics *m, metrics_collect_fn fn,
                              void *data)
{
	for (unsigned i = 0; i < m->n_collectors; i++) {
		if (m->collectors[i].fn == fn &&
		    m->collectors[i].data == data) {
			memmove(&m->collectors[i], &m->collectors[i + 1],
			        (m->n_collectors - i - 1) *
			            sizeof m->collectors[0]);
			m->n_collectors--;
			return;
		}
	}
}

/* ---- output ------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static void
out_printf(struct metrics_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom) {
		return;
	}
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap * 2 + (size_t)n;
		char *nb = realloc(o->buf, cap);
		if (nb == NULL) {
			o->oom = true;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
}

static const char *type_name(enum metric_type t)
{
	switch (t) {
	case METRIC_COUNTER:
		return "counter";
	case METRIC_HISTOGRAM:
		return "histogram";
	default:
		return "gauge";
	}
}

void metrics_out_family(struct metrics_out *o, const char *name,
                        enum metric_type type, const char *help)
{
	out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name,
	           help != NULL ? help : name, name, type_name(type));
}

void metrics_out_int(struct metrics_out *o, const char *name,
                     const char *labels, int64_t v)
{
	if (labels != NULL && labels[0] != '\0') {
		out_printf(o, "%s{%s} %lld\n", name, labels, (long long)v);
	} else {
		out_printf(o, "%s %lld\n", name, (long long)v);
	}
}

void metrics_out_uint(struct metrics_out *o, const char *name,
                      const char *labels, uint64_t v)
{
	if (labels != NULL && labels[0] != '\0') {
		out_printf(o, "%s{%s} %llu\n", name, labels,
		           (unsigned long long)v);
	} else {
		out_printf(o, "%s %llu\n", name, (unsigned long long)v);
	}
}

void metrics_out_hist(struct metrics_out *o, const char *name,
                      const char *labels, const uint64_t *bounds_ns,
                      const uint64_t *bucket, size_t n, uint64_t count,
                      uint64_t sum_ns)
{
	bool lb = labels != NULL && labels[0] != '\0';
	const char *sep = lb ? "," : "";
	uint64_t cum = 0;

	labels = lb ? labels : "";
	for (size_t i = 0; i < n && i < 32; i++) {
		cum += bucket[i];
		out_printf(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels,
		           sep, (double)bounds_ns[i] / 1e9,
		           (unsigned long long)cum);
	}
	out_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
	           (unsigned long long)count);
	if (lb) {
		out_printf(o, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name,
		           labels, (double)sum_ns / 1e9, name, labels,
		           (unsigned long long)count);
	} else {
		out_printf(o, "%s_sum %.9g\n%s_count %llu\n", name,
		           (double)sum_ns / 1e9, name,
		           (unsigned long long)count);
	}
}

int metrics_render(const struct metrics *m, char **out, size_t *len)
{
	struct metrics_out o = {.cap = 4096 + m->n * 200};

	o.buf = malloc(o.cap);
	if (o.buf == NULL) {
		return -1;
	}
	o.buf[0] = '\0';
	for (size_t i = 0; i < m->n; i++) {
		const struct metric *s = m->series[i];
		bool first = true;
		/* A family's samples are contiguous, under one HELP/TYPE:
		 * written at the name's first series. */
		for (size_t j = 0; j < i; j++) {
			if (strcmp(m->series[j]->name, s->name) == 0) {
				first = false;
				break;
			}
		}
		if (!first) {
			continue;
		}
		metrics_out_family(&o, s->name, s->type, s->help);
		for (size_t k = i; k < m->n; k++) {
			const struct metric *x = m->series[k];
			if (strcmp(x->name, s->name) == 0) {
				metrics_out_int(&o, x->name, x->labels,
				                x->value);
			}
		}
	}
	for (unsigned c = 0; c < m->n_collectors; c++) {
		m->collectors[c].fn(m->collectors[c].data, &o);
	}
	if (o.oom) {
		free(o.buf);
		return -1;
	}
	*out = o.buf;
	*len = o.len;
	return 0;
}
