/* jepsen/check: runs one checker over one history file.
 *
 *   check linearizable [--format etcd-log|kv-edn|lines] [limits] FILE
 *   check set|stream|counter|queue|exactly-once|watch [--format lines] FILE
 *
 * stdout gets one word, the verdict; stderr gets the explanation (the
 * anomalies). Exit 0: linearizable / valid; 1: not linearizable / invalid;
 * 2: unreadable or malformed input, or bad usage; 3: unknown (a search
 * limit was reached). See jepsen/README.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jepsen/anomaly.h"
#include "jepsen/countercheck.h"
#include "jepsen/history.h"
#include "jepsen/flowcheck.h"
#include "jepsen/lincheck.h"
#include "jepsen/oncecheck.h"
#include "jepsen/queuecheck.h"
#include "jepsen/setcheck.h"
#include "jepsen/streamcheck.h"
#include "jepsen/watchcheck.h"

typedef int (*workload_check_fn)(const struct jepsen_history *h,
                                 struct jepsen_anomalies *out, char *err,
                                 size_t errlen);

static const struct {
	const char *name;
	workload_check_fn run;
} workloads[] = {
    {"set", jepsen_setcheck_run},           {"stream", jepsen_streamcheck_run},
    {"counter", jepsen_countercheck_run},   {"queue", jepsen_queuecheck_run},
    {"exactly-once", jepsen_oncecheck_run}, {"watch", jepsen_watchcheck_run},
    {"flow", jepsen_flowcheck_run},
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: check linearizable [--format etcd-log|kv-edn|lines]\n"
	        "             [--max-ms N] [--max-mb N] [--max-steps N] "
	        "[--stats] FILE\n"
	        "       check set|stream|counter|queue|exactly-once|watch|flow "
	        "[--format lines] FILE\n"
	        "Prints the verdict on stdout and why on stderr. Exit 0 "
	        "linearizable/valid,\n"
	        "1 not-linearizable/invalid, 2 bad input or usage, 3 unknown "
	        "(limit reached).\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
		return -1;
	}
	*out = v;
	return 0;
}

static double elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static int run_linearizable(const struct jepsen_history *h,
                            const struct jepsen_lin_limits *limits, int stats,
                            const struct timespec *t0)
{
	struct jepsen_lin_result res;
	char err[512];
	if (jepsen_lincheck_run(h, limits, &res, err, sizeof err) != 0) {
		fprintf(stderr, "check: %s\n", err);
		return 2;
	}
	printf("%s\n", jepsen_lincheck_verdict_name(res.verdict));
	if (res.verdict != JEPSEN_LIN_LINEARIZABLE) {
		fprintf(stderr, "%s\n", res.explanation);
	}
	if (stats) {
		fprintf(stderr,
		        "stats: %zu keys, %zu ops searched, %" PRIu64
		        " steps, peak %zu bytes, %.1f ms\n",
		        res.partitions, res.ops, res.steps, res.peak_memory,
		        elapsed_ms(t0));
	}
	return res.verdict == JEPSEN_LIN_LINEARIZABLE       ? 0
	       : res.verdict == JEPSEN_LIN_NOT_LINEARIZABLE ? 1
	                                                    : 3;
}

static int run_workload(const struct jepsen_history *h, workload_check_fn fn,
                        int stats, const struct timespec *t0)
{
	struct jepsen_anomalies a;
	char err[512];
	int rc;
	jepsen_anomalies_init(&a);
	if (fn(h, &a, err, sizeof err) != 0) {
		fprintf(stderr, "check: %s\n", err);
		jepsen_anomalies_free(&a);
		return 2;
	}
	size_t n = jepsen_anomalies_count(&a);
	printf("%s\n", n == 0 ? "valid" : "invalid");
	for (size_t i = 0; i < a.n; i++) {
		fprintf(stderr, "%s line %u: %s\n", a.items[i].kind,
		        a.items[i].line, a.items[i].msg);
	}
	if (a.dropped > 0) {
		fprintf(stderr, "... and %zu more anomalies\n", a.dropped);
	}
	if (stats) {
		fprintf(stderr, "stats: %zu ops, %zu anomalies, %.1f ms\n",
		        h->n_ops, n, elapsed_ms(t0));
	}
	rc = n == 0 ? 0 : 1;
	jepsen_anomalies_free(&a);
	return rc;
}

int main(int argc, char *argv[])
{
	enum jepsen_format fmt = JEPSEN_FORMAT_LINES;
	struct jepsen_lin_limits limits = {0};
	struct jepsen_history h;
	struct timespec t0;
	const char *path = NULL;
	workload_check_fn fn = NULL;
	int stats = 0, rc;
	char err[512];
	uint64_t v;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *checker = argv[1];
	if (strcmp(checker, "linearizable") != 0) {
		for (size_t i = 0; i < sizeof workloads / sizeof workloads[0];
		     i++) {
			if (strcmp(checker, workloads[i].name) == 0) {
				fn = workloads[i].run;
			}
		}
		if (fn == NULL) {
			fprintf(stderr, "check: unknown checker '%s'\n",
			        checker);
			usage(stderr);
			return 2;
		}
	}
	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(arg, "--stats") == 0) {
			stats = 1;
			continue;
		}
		if (arg[0] == '-' && arg[1] == '-' && val == NULL) {
			fprintf(stderr, "check: %s needs a value\n", arg);
			return 2;
		}
		if (strcmp(arg, "--format") == 0) {
			if (jepsen_history_format_parse(val, &fmt) != 0) {
				fprintf(stderr, "check: unknown format '%s'\n",
				        val);
				return 2;
			}
		} else if (strcmp(arg, "--max-ms") == 0 && fn == NULL &&
		           parse_u64(val, &v) == 0) {
			limits.max_ms = v;
		} else if (strcmp(arg, "--max-mb") == 0 && fn == NULL &&
		           parse_u64(val, &v) == 0 && v > 0 &&
		           v < SIZE_MAX / (1024 * 1024)) {
			limits.max_memory = (size_t)v * 1024 * 1024;
		} else if (strcmp(arg, "--max-steps") == 0 && fn == NULL &&
		           parse_u64(val, &v) == 0) {
			limits.max_steps = v;
		} else if (arg[0] == '-' && arg[1] != '\0') {
			fprintf(stderr, "check: bad option %s %s\n", arg, val);
			usage(stderr);
			return 2;
		} else if (path == NULL) {
			path = arg;
			continue;
		} else {
			fprintf(stderr, "check: more than one file\n");
			return 2;
		}
		i++;
	}
	if (path == NULL) {
		fprintf(stderr, "check: no history file\n");
		usage(stderr);
		return 2;
	}
	if (fn != NULL && fmt != JEPSEN_FORMAT_LINES) {
		fprintf(stderr, "check: %s reads only --format lines\n",
		        checker);
		return 2;
	}
	jepsen_history_init(&h);
	if (jepsen_history_load(&h, fmt, path, err, sizeof err) != 0) {
		fprintf(stderr, "check: %s: %s\n", path, err);
		jepsen_history_free(&h);
		return 2;
	}
	if (fn == NULL) {
		rc = run_linearizable(&h, &limits, stats, &t0);
	} else {
		rc = run_workload(&h, fn, stats, &t0);
	}
	jepsen_history_free(&h);
	return rc;
}
