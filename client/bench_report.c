/* bench_report: see bench_report.h. */
#include "client/bench_report.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bench_servers_parse(struct bench_servers *s, const char *list)
{
	const char *p = list;
	memset(s, 0, sizeof *s);
	while (*p != '\0') {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p || pid <= 0 || (*end != ',' && *end != '\0') ||
		    s->n == BENCH_MAX_SERVERS) {
			return -1;
		}
		s->pids[s->n++] = (int)pid;
		p = *end == ',' ? end + 1 : end;
	}
	return s->n > 0 ? 0 : -1;
}

double bench_proc_cpu(int pid)
{
	char path[64], buf[4096];
	unsigned long long ut = 0, st = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		return 0;
	}
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name (which may hold spaces). */
	char *p = strrchr(buf, ')');
	if (p == NULL ||
	    sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
	           &st) != 2) {
		return 0;
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void bench_servers_start(struct bench_servers *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		s->cpu0[i] = bench_proc_cpu(s->pids[i]);
	}
}

void bench_servers_stop(struct bench_servers *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		s->cpu[i] = bench_proc_cpu(s->pids[i]) - s->cpu0[i];
	}
}

static void print_json(FILE *out, const struct bench_result *r)
{
	const struct bench_hist *h = r->lat;
	double total = 0;
	fprintf(out,
	        "{\"family\":\"%s\",\"op\":\"%s\",\"params\":\"%s\","
	        "\"mode\":\"%s\",\"rate\":%llu,\"ops\":%llu,\"errors\":%llu,"
	        "\"late\":%llu,\"secs\":%.3f,\"ops_per_s\":%.1f",
	        r->family, r->op, r->params ? r->params : "",
	        r->rate ? "open" : "closed", (unsigned long long)r->rate,
	        (unsigned long long)r->ops, (unsigned long long)r->errors,
	        (unsigned long long)r->late, r->secs,
	        r->secs > 0 ? (double)r->ops / r->secs : 0.0);
	fprintf(out,
	        ",\"latency_us\":{\"count\":%llu,\"mean\":%.1f,\"p50\":%llu,"
	        "\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu}",
	        (unsigned long long)h->count,
	        h->count ? (double)h->sum_us / (double)h->count : 0.0,
	        (unsigned long long)bench_hist_quantile(h, BENCH_P50),
	        (unsigned long long)bench_hist_quantile(h, BENCH_P90),
	        (unsigned long long)bench_hist_quantile(h, BENCH_P99),
	        (unsigned long long)bench_hist_quantile(h, BENCH_P999),
	        (unsigned long long)h->max_us);
	fprintf(out, ",\"servers\":[");
	for (unsigned i = 0; r->servers != NULL && i < r->servers->n; i++) {
		double c = r->servers->cpu[i];
		total += c;
		fprintf(out,
		        "%s{\"pid\":%d,\"cpu_s\":%.3f,\"cpu_share\":%.3f,"
		        "\"cpu_us_per_op\":%.2f}",
		        i ? "," : "", r->servers->pids[i], c,
		        r->secs > 0 ? c / r->secs : 0.0,
		        r->ops ? c * 1e6 / (double)r->ops : 0.0);
	}
	fprintf(out,
	        "],\"servers_cpu_s\":%.3f,\"servers_cpu_us_per_op\":%.2f}\n",
	        total, r->ops ? total * 1e6 / (double)r->ops : 0.0);
}

static void print_text(FILE *out, const struct bench_result *r)
{
	const struct bench_hist *h = r->lat;
	double total = 0;
	fprintf(out, "%s %s %s%s", r->family, r->op, r->params ? r->params : "",
	        r->params ? " " : "");
	if (r->rate) {
		fprintf(out, "open-loop rate=%llu/s late=%llu ",
		        (unsigned long long)r->rate,
		        (unsigned long long)r->late);
	} else {
		fprintf(out, "closed-loop ");
	}
	fprintf(out,
	        "%s=%llu secs=%.2f %s/s=%.0f errors=%llu latency_ms "
	        "p50=%.3f p90=%.3f p99=%.3f p999=%.3f max=%.3f",
	        r->unit, (unsigned long long)r->ops, r->secs, r->unit,
	        r->secs > 0 ? (double)r->ops / r->secs : 0.0,
	        (unsigned long long)r->errors,
	        (double)bench_hist_quantile(h, BENCH_P50) / 1000.0,
	        (double)bench_hist_quantile(h, BENCH_P90) / 1000.0,
	        (double)bench_hist_quantile(h, BENCH_P99) / 1000.0,
	        (double)bench_hist_quantile(h, BENCH_P999) / 1000.0,
	        (double)h->max_us / 1000.0);
	for (unsigned i = 0; r->servers != NULL && i < r->servers->n; i++) {
		double c = r->servers->cpu[i];
		total += c;
		fprintf(out, " server[%d] cpu_s=%.2f cpu_us/op=%.2f",
		        r->servers->pids[i], c,
		        r->ops ? c * 1e6 / (double)r->ops : 0.0);
	}
	if (r->servers != NULL && r->servers->n > 1) {
		fprintf(out, " servers cpu_s=%.2f cpu_us/op=%.2f", total,
		        r->ops ? total * 1e6 / (double)r->ops : 0.0);
	}
	fprintf(out, "\n");
}

void bench_report_print(FILE *out, const struct bench_result *r, bool json)
{
	if (json) {
		print_json(out, r);
	} else {
		print_text(out, r);
	}
	fflush(out);
}
