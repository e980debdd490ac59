/* Anomaly lists; see anomaly.h. */
#include "jepsen/anomaly.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jepsen_anomalies_init(struct jepsen_anomalies *a)
{
	memset(a, 0, sizeof *a);
}

void jepsen_anomalies_free(struct jepsen_anomalies *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->items[i].msg);
	}
	free(a->items);
	memset(a, 0, sizeof *a);
}

int jepsen_anomalies_add(struct jepsen_anomalies *a, const char *kind,
                         uint32_t line, const char *fmt, ...)
{
	va_list ap;
	if (a->n >= JEPSEN_ANOMALY_MAX) {
		a->dropped++;
		return 0;
	}
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct jepsen_anomaly *ni = realloc(a->items, cap * sizeof *ni);
		if (ni == NULL) {
			return -ENOMEM;
		}
		a->items = ni;
		a->cap = cap;
	}
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0) {
		return -EINVAL;
	}
	char *msg = malloc((size_t)len + 1);
	if (msg == NULL) {
		return -ENOMEM;
	}
	va_start(ap, fmt);
	vsnprintf(msg, (size_t)len + 1, fmt, ap);
	va_end(ap);
	a->items[a->n].kind = kind;
	a->items[a->n].line = line;
	a->items[a->n].msg = msg;
	a->n++;
	return 0;
}

size_t jepsen_anomalies_count(const struct jepsen_anomalies *a)
{
	return a->n + a->dropped;
}

size_t jepsen_anomalies_count_kind(const struct jepsen_anomalies *a,
                                   const char *kind)
{
	size_t n = 0;
	for (size_t i = 0; i < a->n; i++) {
		n += strcmp(a->items[i].kind, kind) == 0;
	}
	return n;
}
