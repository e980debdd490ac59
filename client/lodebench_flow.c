/* lodebench flow: FerricFlow create -> claim -> complete cycles over FSNP
 * (client/flow_client.h). C connections each run one cycle at a time:
 * FLOW.CREATE of a new flow, FLOW.CLAIM_DUE of one due flow of the run's
 * type, FLOW.COMPLETE of what was claimed. By default each connection
 * works in a partition of its own (partition key "bench-<run>-<conn>"), so
 * every call goes to one shard; --auto creates flows without a partition
 * key and claims from the auto buckets (the server scans them all).
 *
 * Reports completed flows per second, the claim latency (send to reply)
 * at p50 and p99, and with --server-pid the servers' CPU seconds (utime +
 * stime from /proc/PID/stat, summed) and flows per server CPU-second; then
 * the cycle's latency histogram (create sent to complete answered) and
 * each server's CPU per completed flow (bench_report.h; --json prints that
 * alone, as JSON).
 *
 * --rate R: open loop: cycle k is due at k / R seconds (bench_sched.h) and
 * starts then on an idle connection, whatever the earlier cycles do; its
 * latency runs from that due time. A cycle due while every connection is
 * busy starts once one is free and counts as late. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/bench_hist.h"
#include "client/bench_pacer.h"
#include "client/bench_report.h"
#include "client/bench_sched.h"
#include "client/flow_client.h"
#include "client/lodebench.h"

struct fbench;

struct fconn {
	struct fbench *b;
	struct fsnp_client *c;
	unsigned idx;
	uint64_t seq;
	uint64_t t0; /* claim sent */
	char pk[64];
	char id[96];
	char token[160];
	int64_t fence;
	bool busy;
	uint64_t cycle_t0; /* the cycle's latency runs from here */
	struct fconn *next_idle;
};

struct fbench {
	uv_loop_t loop;
	char host[256];
	uint16_t port;
	const char *password;
	bool topology;
	bool auto_part;
	unsigned conns;
	uint64_t flows;   /* cycles to complete */
	uint64_t started; /* cycles started */
	uint64_t done;    /* completed */
	uint64_t empty;   /* claims that found nothing due */
	uint64_t errors;
	int64_t lease_ms;
	size_t payload_len;
	char *payload;
	char type[64];
	unsigned ready_count;
	uint64_t t_start, t_end;
	uint32_t *lat_us; /* claim latencies */
	size_t nlat;
	bool failed;
	struct bench_servers servers;
	struct fconn *fc;
	struct bench_hist cycles; /* cycle latencies */
	bool json;
	/* open loop */
	uint64_t rate; /* cycles per second; 0 = closed loop */
	struct bench_sched sched;
	struct bench_pacer pacer;
	struct fconn *idle_conns;
	uint64_t late;
};

static double server_cpu(int pid)
{
	char path[64], buf[4096];
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;
	char *p;

	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL) {
		return 0;
	}
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL) {
		return 0;
	}
	if (sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
	           &st) != 2) {
		return 0;
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double servers_cpu(const struct fbench *b)
{
	double t = 0;
	for (unsigned i = 0; i < b->servers.n; i++) {
		t += server_cpu(b->servers.pids[i]);
	}
	return t;
}

static void next_cycle(struct fconn *k);

static void fail_reply(struct fbench *b, const char *what,
                       const struct fsnp_reply *r)
{
	b->errors++;
	if (b->errors <= 3) {
		fprintf(stderr, "lodebench: %s: %s\n", what,
		        r->error ? fsnp_client_strerror(r->error)
		                 : (r->message ? r->message : "error"));
	}
}

static void flow_args_of(struct fconn *k, struct flow_args *a)
{
	flow_args_init(a);
	a->type = k->b->type;
	a->partition_key = k->b->auto_part ? NULL : k->pk;
}

static void on_complete(void *data, const struct fsnp_reply *r)
{
	struct fconn *k = data;
	struct fbench *b = k->b;

	if (r->error != 0 || r->status != FSNP_STATUS_OK) {
		fail_reply(b, "complete", r);
	} else {
		uint64_t t = uv_hrtime();
		b->done++;
		bench_hist_add(&b->cycles,
		               t > k->cycle_t0 ? (t - k->cycle_t0) / 1000 : 0);
	}
	next_cycle(k);
}

static void send_claim(struct fconn *k);

static void on_claim(void *data, const struct fsnp_reply *r)
{
	struct fconn *k = data;
	struct fbench *b = k->b;
	struct flow_record rec;
	struct flow_args a;
	size_t n = 0;

	if (r->error != 0 || r->status != FSNP_STATUS_OK) {
		fail_reply(b, "claim", r);
		next_cycle(k);
		return;
	}
	if (b->nlat < b->flows * 2) {
		b->lat_us[b->nlat++] = (uint32_t)((uv_hrtime() - k->t0) / 1000);
	}
	if (flow_client_parse_claims(&r->value, &rec, 1, &n) != 0) {
		b->errors++;
		next_cycle(k);
		return;
	}
	if (n == 0) {
		/* Another connection took ours (--auto): claim again. */
		b->empty++;
		if (b->empty > b->flows * 4) {
			fprintf(stderr, "lodebench: claims find nothing due\n");
			b->failed = true;
			return;
		}
		send_claim(k);
		return;
	}
	snprintf(k->id, sizeof k->id, "%.*s", (int)rec.id.len,
	         (const char *)rec.id.ptr);
	snprintf(k->token, sizeof k->token, "%.*s", (int)rec.lease_token.len,
	         (const char *)rec.lease_token.ptr);
	flow_args_of(k, &a);
	a.id = k->id;
	if (rec.partition_key.len == 0 || b->auto_part) {
		a.partition_key = NULL;
	}
	a.lease_token = k->token;
	a.fencing_token = rec.fencing_token;
	if (flow_client_complete(k->c, &a, on_complete, k) != 0) {
		b->errors++;
		next_cycle(k);
	}
}

static void send_claim(struct fconn *k)
{
	struct flow_args a;

	flow_args_of(k, &a);
	a.worker = k->pk;
	a.lease_ms = k->b->lease_ms;
	a.limit = 1;
	a.ret = "jobs";
	k->t0 = uv_hrtime();
	if (flow_client_claim_due(k->c, &a, on_claim, k) != 0) {
		k->b->errors++;
		k->busy = false;
	}
}

static void on_create(void *data, const struct fsnp_reply *r)
{
	struct fconn *k = data;

	if (r->error != 0 || r->status != FSNP_STATUS_OK) {
		fail_reply(k->b, "create", r);
		next_cycle(k);
		return;
	}
	send_claim(k);
}

static void start_cycle(struct fconn *k, uint64_t t0);
static void open_pump(struct fbench *b);

static void next_cycle(struct fconn *k)
{
	struct fbench *b = k->b;

	k->busy = false;
	if (b->rate > 0) {
		k->next_idle = b->idle_conns;
		b->idle_conns = k;
		if (b->done >= b->flows && b->t_end == 0) {
			b->t_end = uv_hrtime();
		}
		open_pump(b);
		return;
	}
	if (b->done >= b->flows) {
		if (b->t_end == 0) {
			b->t_end = uv_hrtime();
		}
		return;
	}
	if (b->started >= b->flows + b->errors || b->failed ||
	    b->errors > b->flows / 10 + 10) {
		return;
	}
	b->started++;
	start_cycle(k, uv_hrtime());
}

/* Open loop: every cycle due by now gets an idle connection; then the
 * pacer for the next one. */
static void open_pump(struct fbench *b)
{
	uint64_t now = uv_hrtime();
	uint64_t due = bench_sched_due(&b->sched, now);
	while (!b->failed && b->started < due && b->idle_conns != NULL &&
	       b->errors <= b->flows / 10 + 10) {
		struct fconn *k = b->idle_conns;
		uint64_t at = bench_sched_time(&b->sched, b->started++);
		b->idle_conns = k->next_idle;
		if (now - at > 1000000) {
			b->late++;
		}
		start_cycle(k, at);
	}
	if (b->started < b->flows && b->idle_conns != NULL) {
		bench_pacer_arm(
		    &b->pacer,
		    bench_pacer_next(bench_sched_time(&b->sched, b->started),
		                     now));
	}
}

static void on_pacer(struct bench_pacer *p)
{
	open_pump(p->data);
}

static void start_cycle(struct fconn *k, uint64_t t0)
{
	struct fbench *b = k->b;
	struct flow_args a;

	k->busy = true;
	k->cycle_t0 = t0;
	snprintf(k->id, sizeof k->id, "%s-%u-%" PRIu64, b->type, k->idx,
	         k->seq++);
	flow_args_of(k, &a);
	a.id = k->id;
	a.data = b->payload;
	a.data_len = b->payload_len;
	if (flow_client_create(k->c, &a, on_create, k) != 0) {
		b->errors++;
		k->busy = false;
	}
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err)
{
	struct fconn *k = data;
	struct fbench *b = k->b;

	(void)c;
	if (status != 0) {
		fprintf(stderr, "lodebench: cannot connect: %s\n", err);
		b->failed = true;
		return;
	}
	if (++b->ready_count == b->conns) {
		b->t_start = uv_hrtime();
		bench_servers_start(&b->servers);
		if (b->rate > 0) {
			bench_sched_init(&b->sched, b->rate, b->t_start,
			                 b->flows);
		}
		for (unsigned i = 0; i < b->conns; i++) {
			next_cycle(&b->fc[i]);
		}
	}
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

static bool idle(const struct fbench *b)
{
	for (unsigned i = 0; i < b->conns; i++) {
		if (b->fc[i].busy) {
			return false;
		}
	}
	return true;
}

static int run(struct fbench *b)
{
	struct fsnp_client_options o;
	double cpu0, cpu, secs;
	int rv = 0;

	memset(&o, 0, sizeof o);
	o.host = b->host;
	o.port = b->port;
	o.password = b->password;
	o.client_name = "lodebench-flow";
	o.lanes = 8;
	o.topology = b->topology;
	o.timeout_ms = 60000;
	b->lat_us = calloc(b->flows * 2 + 1, sizeof *b->lat_us);
	b->fc = calloc(b->conns, sizeof *b->fc);
	if (b->lat_us == NULL || b->fc == NULL ||
	    bench_hist_init(&b->cycles) != 0) {
		fprintf(stderr, "lodebench: out of memory\n");
		rv = 1;
		goto err_mem;
	}
	uv_loop_init(&b->loop);
	if (b->rate > 0 &&
	    bench_pacer_init(&b->loop, &b->pacer, on_pacer, b) != 0) {
		fprintf(stderr,
		        "lodebench: cannot make a timerfd for --rate\n");
		uv_loop_close(&b->loop);
		rv = 1;
		goto err_mem;
	}
	cpu0 = servers_cpu(b);
	for (unsigned i = 0; i < b->conns; i++) {
		struct fconn *k = &b->fc[i];
		k->b = b;
		k->idx = i;
		snprintf(k->pk, sizeof k->pk, "%s-p%u", b->type, i);
		if (fsnp_client_open(&b->loop, &o, on_ready, k, &k->c) != 0) {
			fprintf(stderr, "lodebench: bad options\n");
			b->failed = true;
			b->conns = i;
			break;
		}
	}
	/* Until every cycle is done, or nothing is left in flight (nor, in
	 * the open loop, due later). */
	while (!b->failed && b->done < b->flows &&
	       (b->ready_count < b->conns || !idle(b) ||
	        (b->rate > 0 && b->started < b->flows &&
	         b->errors <= b->flows / 10 + 10))) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	if (b->t_end == 0) {
		b->t_end = uv_hrtime();
	}
	cpu = servers_cpu(b) - cpu0;
	bench_servers_stop(&b->servers);
	for (unsigned i = 0; i < b->conns; i++) {
		fsnp_client_close(b->fc[i].c, NULL, NULL);
	}
	if (b->rate > 0) {
		bench_pacer_close(&b->pacer);
	}
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
	if (b->failed || b->t_start == 0) {
		rv = 1;
		goto err_mem;
	}
	secs = (double)(b->t_end - b->t_start) / 1e9;
	qsort(b->lat_us, b->nlat, sizeof *b->lat_us, cmp_u32);
	rv = b->errors > 0 || b->done < b->flows ? 1 : 0;
	char params[96];
	snprintf(params, sizeof params, "conns=%u payload=%zu%s", b->conns,
	         b->payload_len, b->auto_part ? " auto" : "");
	struct bench_result res = {
	    .family = "flow",
	    .op = "cycle",
	    .unit = "flows",
	    .ops = b->done,
	    .errors = b->errors,
	    .secs = secs,
	    .rate = b->rate,
	    .late = b->late,
	    .params = params,
	    .lat = &b->cycles,
	    .servers = b->servers.n > 0 ? &b->servers : NULL,
	};
	if (b->json) {
		bench_report_print(stdout, &res, true);
		goto err_mem;
	}
	printf("flow conns=%u flows=%" PRIu64 " flows/s=%.0f claim_p50_ms=%.3f "
	       "claim_p99_ms=%.3f empty_claims=%" PRIu64 " errors=%" PRIu64,
	       b->conns, b->done, (double)b->done / secs,
	       b->nlat ? b->lat_us[b->nlat / 2] / 1000.0 : 0.0,
	       b->nlat ? b->lat_us[(b->nlat * 99) / 100] / 1000.0 : 0.0,
	       b->empty, b->errors);
	if (b->servers.n > 0 && cpu > 0) {
		printf(
		    " server_cpu_s=%.2f (%.0f%%) flows_per_server_cpu_s=%.0f",
		    cpu, 100 * cpu / secs, (double)b->done / cpu);
	}
	printf("\n");
	bench_report_print(stdout, &res, false);

err_mem:
	bench_hist_free(&b->cycles);
	free(b->lat_us);
	free(b->fc);
	return rv;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lodebench flow [--fsnp HOST:PORT] [-c CONNS] [-n "
	           "FLOWS] [-d PAYLOAD_BYTES]\n"
	           "                      [--lease-ms MS] [--auto] "
	           "[--topology] [--password P]\n"
	           "                      [--server-pid PID[,PID...]] "
	           "[--rate FLOWS_PER_S] [--json]\n"
	           "--rate: open loop, a cycle starts on a fixed schedule "
	           "(on an idle connection)\n"
	           "--auto: no partition keys (claims scan the auto buckets)\n"
	           "--topology: send each flow to its shard's leader "
	           "(SHARDS)\n"
	           "Defaults: 127.0.0.1:6388, -c 50 -n 20000 -d 16 "
	           "--lease-ms 30000\n");
}

int lodebench_flow_main(int argc, char **argv)
{
	struct fbench b;
	int rv;

	memset(&b, 0, sizeof b);
	snprintf(b.host, sizeof b.host, "127.0.0.1");
	b.port = 6388;
	b.conns = 50;
	b.flows = 20000;
	b.payload_len = 16;
	b.lease_ms = 30000;
	snprintf(b.type, sizeof b.type, "bench%llx",
	         (unsigned long long)(uv_hrtime() & 0xffffffffu));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--topology") == 0) {
			b.topology = true;
			continue;
		}
		if (strcmp(a, "--auto") == 0) {
			b.auto_part = true;
			continue;
		}
		if (strcmp(a, "--json") == 0) {
			b.json = true;
			continue;
		}
		if (v == NULL) {
			usage(stderr);
			return 2;
		}
		i++;
		if (strcmp(a, "--fsnp") == 0) {
			if (lodebench_split_hostport(v, b.host, sizeof b.host,
			                             &b.port) != 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(a, "-c") == 0) {
			b.conns = (unsigned)atoi(v);
		} else if (strcmp(a, "-n") == 0) {
			b.flows = strtoull(v, NULL, 10);
		} else if (strcmp(a, "-d") == 0) {
			b.payload_len = (size_t)atoi(v);
		} else if (strcmp(a, "--lease-ms") == 0) {
			b.lease_ms = atoll(v);
		} else if (strcmp(a, "--password") == 0) {
			b.password = v;
		} else if (strcmp(a, "--server-pid") == 0) {
			if (bench_servers_parse(&b.servers, v) != 0) {
				fprintf(stderr,
				        "lodebench: bad --server-pid "
				        "'%s' (PID[,PID...], at most "
				        "8)\n",
				        v);
				return 2;
			}
		} else if (strcmp(a, "--rate") == 0) {
			b.rate = strtoull(v, NULL, 10);
			if (b.rate == 0) {
				usage(stderr);
				return 2;
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (b.conns == 0 || b.flows == 0 || b.lease_ms <= 0 ||
	    b.flows > 100000000) {
		usage(stderr);
		return 2;
	}
	b.payload = malloc(b.payload_len + 1);
	if (b.payload == NULL) {
		return 1;
	}
	memset(b.payload, 'x', b.payload_len);
	rv = run(&b);
	free(b.payload);
	return rv;
}
