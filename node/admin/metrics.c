/* Metrics registry and Prometheus text rendering; see metrics.h. */
#include "node/admin/metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int metrics_render(const struct metrics *m, char **out, size_t *len)
{
	size_t cap = 256 + m->n * 400, n = 0;
	char *buf = malloc(cap);
	if (buf == NULL) {
		return -1;
	}
	buf[0] = '\0';
	for (size_t i = 0; i < m->n; i++) {
		const struct metric *s = m->series[i];
		bool first = true;
		/* HELP/TYPE once per name: at its first series. */
		for (size_t j = 0; j < i; j++) {
			if (strcmp(m->series[j]->name, s->name) == 0) {
				first = false;
				break;
			}
		}
		if (first) {
			n += (size_t)snprintf(
			    buf + n, cap - n, "# HELP %s %s\n# TYPE %s %s\n",
			    s->name, s->help ? s->help : s->name, s->name,
			    s->type == METRIC_COUNTER ? "counter" : "gauge");
		}
		if (s->labels[0] != '\0') {
			n += (size_t)snprintf(buf + n, cap - n, "%s{%s} %lld\n",
			                      s->name, s->labels,
			                      (long long)s->value);
		} else {
			n += (size_t)snprintf(buf + n, cap - n, "%s %lld\n",
			                      s->name, (long long)s->value);
		}
		if (n >= cap) {
			free(buf);
			return -1;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}
