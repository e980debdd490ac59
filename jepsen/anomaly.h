/* Anomaly lists: what a workload checker found wrong with a history, each
 * with a kind (a short fixed word such as "lost"), the input line it is
 * about, and a sentence explaining it. A history is valid for a checker
 * when the checker adds no anomaly. The list owns every message. */
#ifndef JEPSEN_ANOMALY_H
#define JEPSEN_ANOMALY_H

#include <stddef.h>
#include <stdint.h>

struct jepsen_anomaly {
	const char *kind; /* static string */
	uint32_t line;    /* input line the anomaly is about; 0 if none */
	char *msg;        /* owned */
};

struct jepsen_anomalies {
	struct jepsen_anomaly *items;
	size_t n;
	size_t cap;
	size_t dropped; /* anomalies past JEPSEN_ANOMALY_MAX, only counted */
};

/* Anomalies kept with their messages; later ones are only counted. */
#define JEPSEN_ANOMALY_MAX 10000

void jepsen_anomalies_init(struct jepsen_anomalies *a);
void jepsen_anomalies_free(struct jepsen_anomalies *a);

/* Appends an anomaly. Returns 0 or -ENOMEM. */
int jepsen_anomalies_add(struct jepsen_anomalies *a, const char *kind,
                         uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Total anomalies, counted ones included. */
size_t jepsen_anomalies_count(const struct jepsen_anomalies *a);

/* Number of kept anomalies of `kind`. */
size_t jepsen_anomalies_count_kind(const struct jepsen_anomalies *a,
                                   const char *kind);

#endif
