/* bench_report: what every lodebench family prints at the end of a run, in
 * text or as one JSON object per line (--json): operations, seconds,
 * throughput, errors, the open-loop rate if any, the latency histogram's
 * p50/p90/p99/p999/max, and for each server process given (--server-pid)
 * its CPU seconds over the run (utime + stime from /proc/PID/stat) and
 * CPU microseconds per operation. */
#ifndef LS_CLIENT_BENCH_REPORT_H
#define LS_CLIENT_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client/bench_hist.h"

#define BENCH_MAX_SERVERS 8

/* The server processes a run measures, and their CPU at its start. */
struct bench_servers {
	int pids[BENCH_MAX_SERVERS];
	unsigned n;
	double cpu0[BENCH_MAX_SERVERS]; /* seconds, at bench_servers_start */
	double cpu[BENCH_MAX_SERVERS]; /* seconds used, at bench_servers_stop */
};

/* Parses "PID[,PID...]" (at most BENCH_MAX_SERVERS); 0, or -1 when a
 * PID is not a positive number. */
int bench_servers_parse(struct bench_servers *s, const char *list);
void bench_servers_start(struct bench_servers *s);
void bench_servers_stop(struct bench_servers *s);
/* A process's CPU seconds so far (utime + stime), 0 if unreadable. */
double bench_proc_cpu(int pid);

struct bench_result {
	const char *family; /* "kv", "felix", "flow" */
	const char *op;     /* "set", "get", "publish", "cycle" */
	const char *unit;   /* what one operation is, for the text line */
	uint64_t ops;       /* completed operations */
	uint64_t errors;
	double secs;
	uint64_t rate;      /* open loop: scheduled operations per second; 0 =
	                       closed loop */
	uint64_t late;      /* open loop: operations sent after their due time
	                       because too many were in flight */
	const char *params; /* "conns=50 pipeline=16", printed as given in
	                       text; JSON gets it as a string */
	const struct bench_hist *lat;
	const struct bench_servers *servers; /* may be NULL */
};

/* Prints the result: one text line, or one JSON object, on `out`. */
void bench_report_print(FILE *out, const struct bench_result *r, bool json);

#endif
