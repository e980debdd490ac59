/* Prometheus metrics owned by the node and rendered at GET /metrics.
 *
 * Two kinds of source, both on the reactor thread:
 *  - series: a counter or gauge registered once (name, help, type, an
 *    optional fixed label set) returning a handle; counting is a plain add
 *    on the reactor thread, no lock, no allocation. Series of one name with
 *    different labels are registered one per label value, e.g.
 *      metrics_counter(m, "lodestone_felix_json_publishes_total",
 *                      "JSON publishes received", "frame=\"publish\"")
 *  - collectors: callbacks run at each scrape that write whole families
 *    through a struct metrics_out (what is cheaper to read when asked than
 *    to count as it happens: per-group Raft state, RocksDB properties,
 *    per-opcode tables and their latency histograms).
 * Every family is prefixed `lodestone_`; counters end in `_total`; units are
 * in the names (`_seconds`, `_bytes`). The registry owns every series;
 * handles stay valid until metrics_free. */
#ifndef LS_NODE_METRICS_H
#define LS_NODE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metric_type { METRIC_COUNTER = 0, METRIC_GAUGE, METRIC_HISTOGRAM };

struct metric {
	char name[96];
	char labels[128]; /* rendered inside {} ; "" when none */
	const char *help; /* static string */
	enum metric_type type;
	int64_t value;
};

/* Latency histograms share one set of upper bounds (seconds in the
 * exposition, nanoseconds here): 100 us .. 10 s, then +Inf. */
#define METRIC_HIST_BOUNDS 16
extern const uint64_t metric_hist_bounds_ns[METRIC_HIST_BOUNDS];

/* One histogram's counts: bucket[i] counts observations <= bound i and
 * > bound i-1 (not cumulative); observations above the last bound count
 * in `count` only. */
struct metric_hist {
	uint64_t bucket[METRIC_HIST_BOUNDS];
	uint64_t count;
	uint64_t sum_ns;
};

static inline void metric_hist_observe(struct metric_hist *h, uint64_t ns)
{
	unsigned i = 0;
	while (i < METRIC_HIST_BOUNDS && ns > metric_hist_bounds_ns[i]) {
		i++;
	}
	if (i < METRIC_HIST_BOUNDS) {
		h->bucket[i]++;
	}
	h->count++;
	h->sum_ns += ns;
}

/* What a collector writes into (an output buffer that grows). */
struct metrics_out;

/* Writes one family at a time: its HELP and TYPE lines, then its samples.
 * `labels` is the text inside {} (NULL or "" for none). */
void metrics_out_family(struct metrics_out *o, const char *name,
                        enum metric_type type, const char *help);
void metrics_out_int(struct metrics_out *o, const char *name,
                     const char *labels, int64_t v);
void metrics_out_uint(struct metrics_out *o, const char *name,
                      const char *labels, uint64_t v);
/* A histogram's _bucket, _sum and _count lines from `n` non-cumulative
 * bucket counts against `bounds_ns` (the caller's, n <= 32). */
void metrics_out_hist(struct metrics_out *o, const char *name,
                      const char *labels, const uint64_t *bounds_ns,
                      const uint64_t *bucket, size_t n, uint64_t count,
                      uint64_t sum_ns);

typedef void (*metrics_collect_fn)(void *data, struct metrics_out *o);

struct metrics_collector {
	metrics_collect_fn fn;
	void *data;
};

#define METRICS_MAX_COLLECTORS 8

struct metrics {
	/* Owned; each series has its own allocation so that handles stay
	 * put when the table grows. */
	struct metric **series;
	size_t n, cap;
	struct metrics_collector collectors[METRICS_MAX_COLLECTORS];
	unsigned n_collectors;
};

void metrics_init(struct metrics *m);
void metrics_free(struct metrics *m);

/* Returns the series (creating it); NULL when out of memory. */
struct metric *metrics_counter(struct metrics *m, const char *name,
                               const char *help, const char *labels);
struct metric *metrics_gauge(struct metrics *m, const char *name,
                             const char *help, const char *labels);

/* Adds a collector run at every render, after the series. 0, or -1 when
 * the table is full. */
int metrics_add_collector(struct metrics *m, metrics_collect_fn fn, void *data);
/* Removes the collector (fn, data), if present. */
void metrics_remove_collector(struct metrics *m, metrics_collect_fn fn,
                              void *data);

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
 * owned by the caller: the series grouped by family (in the order of
 * their first registration), then every collector's families. Returns 0
 * or -1 when out of memory. */
int metrics_render(const struct metrics *m, char **out, size_t *len);

#endif
