/* Prometheus-style metrics owned by the node and rendered at GET /metrics.
 *
 * A metric is registered once (name, help, type, optional fixed label set)
 * and returns a handle; incrementing is a plain add on the reactor thread.
 * Series with labels are registered one per label value, e.g.
 *   metrics_counter(m, "felix_broker_json_publishes_total",
 *                   "JSON publishes received", "frame=\"publish\"")
 * The registry owns every series; handles stay valid until metrics_free. */
#ifndef LS_NODE_METRICS_H
#define LS_NODE_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric_type { METRIC_COUNTER = 0, METRIC_GAUGE };

struct metric {
	char name[96];
	char labels[128]; /* rendered inside {} ; "" when none */
	const char *help; /* static string */
	enum metric_type type;
	int64_t value;
};

struct metrics {
	/* Owned; each series has its own allocation so that handles stay
	 * put when the table grows. */
	struct metric **series;
	size_t n, cap;
};

void metrics_init(struct metrics *m);
void metrics_free(struct metrics *m);

/* Returns the series (creating it); NULL when out of memory. */
struct metric *metrics_counter(struct metrics *m, const char *name,
                               const char *help, const char *labels);
struct metric *metrics_gauge(struct metrics *m, const char *name,
                             const char *help, const char *labels);

static inline void metric_add(struct metric *s, int64_t d)
{
	if (s != NULL) {
		s->value += d;
	}
}

static inline void metric_set(struct metric *s, int64_t v)
{
	if (s != NULL) {
		s->value = v;
	}
}

/* Renders the exposition text into a malloc'd, NUL-terminated buffer
 * owned by the caller. Returns 0 or -1 when out of memory. */
int metrics_render(const struct metrics *m, char **out, size_t *len);

#endif
