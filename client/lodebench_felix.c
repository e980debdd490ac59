/* lodebench felix: acked publish throughput and latency against a running
 * broker, with F subscribers fanning the stream out; consumer group, counter
 * and idempotent publish throughput.
 *
 *   lodebench felix --felix HOST:PORT --ca FILE [--server-pid PID[,PID...]]
 *       [--sub-felix HOST:PORT --sub-ca FILE]
 *       [--mode throughput|latency|idempotent|group|counter] [--batch N]
 *       [--size BYTES] [--fanout F] [--seconds S] [--conns C] [--window W]
 *       [--max-lag N] [--records N] [--stream NAME] [--tenant T]
 *       [--token TOK] [--keys N]
 *
 * throughput: C publisher connections keep W acked batches of N records of
 *   BYTES each in flight (binary 0x0009 frames) to one stream shard; F
 *   subscriber connections read it live. Publishers pause while the
 *   subscribers trail by more than --max-lag records each (default 16384;
 *   0 lets them run ahead, and the broker then drops for them). Reports acked
 * msgs/s and MB/s (10^6 bytes of payload), events delivered per second, and,
 * with
 *   --server-pid, the server's CPU seconds and MB/s per CPU second (from
 *   /proc/PID/stat utime + stime).
 * --keys N (throughput, latency): each batch carries a key drawn uniformly
 *   from N ("k0".."k<N-1>"), so publishes spread over the stream's shards
 *   by the Felix routing hash; without it they are unkeyed (shard 0).
 * latency: one publisher sends a batch, waits for its ack, sends the next;
 *   reports p50 / p99 / p999 of the ack round trip.
 * --rate R (throughput mode): open loop: publish k (a batch) is due at k / R
 *   seconds (bench_sched.h) and leaves then, round-robin over the
 *   connections, whatever the acks do (subscribers do not pace it); its
 *   latency runs from that due time. At most W batches per connection are
 *   in flight; publishes due beyond that leave once an ack frees a place
 *   and count as late. Without --rate the latency runs from each send.
 * --json: the result as one JSON object (bench_report.h), with the latency
 *   histogram and each --server-pid's CPU per acked batch.
 * idempotent: as throughput, with publish_idempotent (JSON, one producer per
 *   connection, one sequence per batch) instead of binary acked publishes;
 *   compare with throughput at the same --fanout (0 for the bare cost).
 * group: --records N records (default 100000) are published first (not
 *   timed); then C consumer connections each poll up to --batch records
 *   (wait_ms 0), ack every one (pipelined) and poll again; reports records
 *   acked per second (poll + ack) until all are acked or --seconds passed.
 * counter: C connections keep W counter_add requests in flight over 64
 *   keys; reports adds per second.
 * On a cluster, publishers may reach any node (publishes are forwarded to
 *   the shard's leader) while subscribers must reach the leader of shard 0:
 *   --sub-felix / --sub-ca name it; --server-pid takes every node's pid.
 * Everything runs on one client thread: on a small machine the client
 * competes with the broker for CPU, which the figures include. */
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
#include "client/felix_client.h"
#include "client/lodebench.h"

#define MAX_CONNS 64
#define MAX_FANOUT 64

struct bench;

enum bench_mode {
	MODE_THROUGHPUT = 0,
	MODE_LATENCY,
	MODE_IDEMPOTENT,
	MODE_GROUP,
	MODE_COUNTER,
};

struct pubconn {
	struct bench *b;
	struct felix_client *c;
	bool ready;
	unsigned inflight;
	uint64_t producer; /* idempotent */
	uint64_t seq;
	bool polling; /* group: a poll in flight */
	uint64_t counter_i;
};

/* An acked publish in flight: its connection and the time its latency
 * runs from (sent, or due in the open loop). */
struct pubreq {
	struct pubconn *pc;
	uint64_t t_ns;
	struct pubreq *next_free;
};

struct bench {
	uv_loop_t loop;
	char host[256];
	uint16_t port;
	const char *ca;
	const char *tenant;
	const char *token;
	char stream[128];
	struct bench_servers servers; /* --server-pid */
	char sub_host[256]; /* subscribers' broker; "" = the publishers' */
	uint16_t sub_port;
	const char *sub_ca;
	enum bench_mode mode;
	bool latency;
	uint64_t records;  /* group: records to consume */
	uint64_t done_ops; /* group: acks; counter: adds */
	uint32_t batch;
	size_t size;
	unsigned fanout;
	unsigned seconds;
	unsigned conns;
	unsigned window;
	uint64_t max_lag; /* records a subscriber may trail by; 0 = no
	                     pacing (then the broker drops) */
	struct felix_view *payloads;
	uint8_t *payload;
	struct pubconn pubs[MAX_CONNS];
	struct felix_client *subc[MAX_FANOUT];
	unsigned ready;
	unsigned subs_started;
	bool stop;
	bool failed;
	char error[512];
	uint64_t acked_batches;
	uint64_t inflight_total;
	uint64_t events;
	/* latency */
	struct bench_hist lat;
	struct pubreq *reqs; /* owned, conns * window */
	struct pubreq *free_reqs;
	/* open loop */
	uint64_t rate; /* batches per second; 0 = closed loop */
	struct bench_sched sched;
	struct bench_pacer pacer;
	uint64_t sched_sent;
	unsigned next_conn;
	uint64_t late;
	unsigned keys; /* --keys: keyed publishes over this many keys */
	uint64_t rng;
	char key[16]; /* the next publish's key (the client copies it) */
	size_t klen;
	bool json;
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static double server_cpu(int pid)
{
	char path[64], buf[4096];
	if (pid <= 0) {
		return 0;
	}
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
	if (p == NULL) {
		return 0;
	}
	unsigned long long ut = 0, st = 0;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	if (sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
	           &st) != 2) {
		return 0;
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double servers_cpu(const struct bench *b)
{
	double t = 0;
	for (unsigned i = 0; i < b->servers.n; i++) {
		t += server_cpu(b->servers.pids[i]);
	}
	return t;
}

/* With --keys, a fresh key for the next publish in b->key. */
static bool next_key(struct bench *b)
{
	if (b->keys == 0) {
		return false;
	}
	uint64_t x = b->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	b->rng = x;
	int n = snprintf(b->key, sizeof b->key, "k%u",
	                 (unsigned)((x * 2685821657736338717ull) % b->keys));
	b->klen = (size_t)n;
	return true;
}

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: lodebench felix --ca FILE [--felix HOST:PORT] "
	        "[--server-pid PID[,PID...]]\n"
	        "       [--sub-felix HOST:PORT --sub-ca FILE]\n"
	        "       [--mode throughput|latency|idempotent|group|counter]\n"
	        "       [--batch N] [--size B] [--fanout F] [--seconds S] "
	        "[--conns C]\n"
	        "       [--window W] [--max-lag N] [--records N] "
	        "[--stream NAME]\n"
	        "       [--tenant T] [--token TOK] [--rate BATCHES_PER_S] "
	        "[--json]\n"
	        "       [--keys N]\n"
	        "--keys: publish each batch with a key drawn from N, "
	        "spreading over the shards\n"
	        "--rate: open loop (throughput mode): publishes leave on a "
	        "fixed schedule,\n"
	        "        at most --window in flight per connection\n");
}

static void on_ready(void *data, struct felix_client *c, int status,
                     const char *message)
{
	struct bench *b = data;
	(void)c;
	if (status != 0) {
		b->failed = true;
		snprintf(b->error, sizeof b->error, "connect: %s", message);
	}
	b->ready++;
}

static void on_started(void *data, struct felix_sub *sub, int status,
                       const struct felix_msg *answer, const char *message)
{
	struct bench *b = data;
	(void)sub;
	(void)answer;
	if (status != 0) {
		b->failed = true;
		snprintf(b->error, sizeof b->error, "subscribe: %s", message);
	}
	b->subs_started++;
}

static void on_events(void *data, struct felix_sub *sub, bool has_offset,
                      uint64_t base, const struct felix_view *p, uint32_t n)
{
	struct bench *b = data;
	(void)sub;
	(void)has_offset;
	(void)base;
	(void)p;
	b->events += n;
}

static void on_sub_ended(void *data, struct felix_sub *sub, const char *why)
{
	(void)data;
	(void)sub;
	(void)why;
}

static void pump(struct pubconn *pc);

static void bench_fail(struct bench *b, const char *what, const char *message)
{
	if (!b->failed) {
		snprintf(b->error, sizeof b->error, "%s: %s", what,
		         message ? message : "failed");
	}
	b->failed = true;
}

static void on_idem(void *data, int status, const struct felix_msg *reply,
                    const char *message)
{
	struct pubconn *pc = data;
	struct bench *b = pc->b;
	(void)reply;
	pc->inflight--;
	b->inflight_total--;
	if (status != 0) {
		bench_fail(b, "publish_idempotent", message);
		return;
	}
	b->acked_batches++;
	pump(pc);
}

static void on_counter(void *data, int status, const struct felix_msg *reply,
                       const char *message)
{
	struct pubconn *pc = data;
	struct bench *b = pc->b;
	(void)reply;
	pc->inflight--;
	if (status != 0) {
		bench_fail(b, "counter_add", message);
		return;
	}
	b->done_ops++;
	pump(pc);
}

static void on_ack(void *data, int status, const char *message)
{
	struct pubconn *pc = data;
	struct bench *b = pc->b;
	pc->inflight--;
	b->inflight_total--;
	if (status != 0) {
		if (!b->failed) {
			snprintf(b->error, sizeof b->error, "publish: %s",
			         message);
		}
		b->failed = true;
		return;
	}
	b->acked_batches++;
	pump(pc);
}

static void open_pump(struct bench *b);

/* The ack of a timed publish: its latency, its place back. */
static void on_pub_ack(void *data, int status, const char *message)
{
	struct pubreq *q = data;
	struct pubconn *pc = q->pc;
	struct bench *b = pc->b;
	uint64_t t = now_ns();
	q->next_free = b->free_reqs;
	b->free_reqs = q;
	if (status == 0) {
		bench_hist_add(&b->lat, t > q->t_ns ? (t - q->t_ns) / 1000 : 0);
	}
	if (b->rate == 0) {
		on_ack(pc, status, message);
		return;
	}
	pc->inflight--;
	b->inflight_total--;
	if (status != 0) {
		bench_fail(b, "publish", message);
		return;
	}
	b->acked_batches++;
	open_pump(b);
}

/* Open loop: every publish due by now that has a free place, round-robin
 * over the connections; then the pacer for the next one. */
static void open_pump(struct bench *b)
{
	uint64_t now = now_ns();
	uint64_t due = bench_sched_due(&b->sched, now);
	while (!b->stop && !b->failed && b->sched_sent < due &&
	       b->free_reqs != NULL) {
		struct pubreq *q = b->free_reqs;
		struct pubconn *pc = &b->pubs[b->next_conn];
		b->next_conn = (b->next_conn + 1) % b->conns;
		b->free_reqs = q->next_free;
		q->pc = pc;
		q->t_ns = bench_sched_time(&b->sched, b->sched_sent++);
		if (now - q->t_ns > 1000000) {
			b->late++;
		}
		pc->inflight++;
		b->inflight_total++;
		bool keyed = next_key(b);
		if (felix_client_publish(
		        pc->c, "default", b->stream, keyed,
		        (const uint8_t *)b->key, b->klen, b->payloads, b->batch,
		        FELIX_ACK_PER_BATCH, on_pub_ack, q) != 0) {
			pc->inflight--;
			b->inflight_total--;
			q->next_free = b->free_reqs;
			b->free_reqs = q;
			bench_fail(b, "publish", "connection lost");
			return;
		}
	}
	if (!b->stop && b->free_reqs != NULL) {
		bench_pacer_arm(
		    &b->pacer,
		    bench_pacer_next(bench_sched_time(&b->sched, b->sched_sent),
		                     now));
	}
}

static void on_pacer(struct bench_pacer *p)
{
	open_pump(p->data);
}

static void group_pump(struct pubconn *pc);

static void pump(struct pubconn *pc)
{
	struct bench *b = pc->b;
	unsigned window = b->latency ? 1 : b->window;
	if (b->mode == MODE_GROUP) {
		group_pump(pc);
		return;
	}
	while (b->mode == MODE_COUNTER && !b->stop && !b->failed &&
	       pc->inflight < window) {
		char key[16];
		snprintf(key, sizeof key, "k%u",
		         (unsigned)(pc->counter_i++ % 64));
		pc->inflight++;
		if (felix_client_counter_add(pc->c, "default", b->stream, key,
		                             1, on_counter, pc) != 0) {
			pc->inflight--;
			bench_fail(b, "counter_add", "connection lost");
			return;
		}
	}
	if (b->mode == MODE_COUNTER || b->rate > 0) {
		return;
	}
	while (!b->stop && !b->failed && pc->inflight < window &&
	       felix_client_backlog(pc->c) < (4u << 20)) {
		/* Paced by the slowest possible subscriber: what was sent
		 * to the fan-out minus what arrived. */
		uint64_t sent = (b->acked_batches + b->inflight_total) *
		                b->batch * b->fanout;
		if (b->max_lag > 0 && b->fanout > 0 &&
		    sent > b->events + b->max_lag * b->fanout) {
			return;
		}
		struct pubreq *q = b->free_reqs;
		if (b->mode != MODE_IDEMPOTENT) {
			if (q == NULL) {
				return;
			}
			b->free_reqs = q->next_free;
			q->pc = pc;
			q->t_ns = now_ns();
		}
		pc->inflight++;
		b->inflight_total++;
		int rv;
		if (b->mode == MODE_IDEMPOTENT) {
			rv = felix_client_publish_idempotent(
			    pc->c, "default", b->stream, false, NULL, 0,
			    b->payloads, b->batch, pc->producer, pc->seq++,
			    on_idem, pc);
		} else {
			bool keyed = next_key(b);
			rv = felix_client_publish(
			    pc->c, "default", b->stream, keyed,
			    (const uint8_t *)b->key, b->klen, b->payloads,
			    b->batch, FELIX_ACK_PER_BATCH, on_pub_ack, q);
		}
		if (rv != 0) {
			if (b->mode != MODE_IDEMPOTENT) {
				q->next_free = b->free_reqs;
				b->free_reqs = q;
			}
			pc->inflight--;
			b->inflight_total--;
			b->failed = true;
			snprintf(b->error, sizeof b->error,
			         "publish: connection lost");
			return;
		}
	}
}

static void on_pinit(void *data, int status, const struct felix_msg *reply,
                     const char *message)
{
	struct pubconn *pc = data;
	if (status != 0 || reply == NULL ||
	    reply->type != FELIX_MSG_PRODUCER_INIT_OK) {
		bench_fail(pc->b, "producer_init", message);
		return;
	}
	pc->producer = reply->u.producer_init_ok.producer_id;
}

/* ---- consumer group mode ---- */

static void on_group_ack(void *data, int status, const struct felix_msg *reply,
                         const char *message)
{
	struct pubconn *pc = data;
	struct bench *b = pc->b;
	(void)reply;
	pc->inflight--;
	if (status != 0) {
		bench_fail(b, "group_ack", message);
		return;
	}
	b->done_ops++;
	if (b->done_ops >= b->records) {
		b->stop = true;
	}
	group_pump(pc);
}

static void on_group_poll(void *data, int status, const struct felix_msg *reply,
                          const char *message)
{
	struct pubconn *pc = data;
	struct bench *b = pc->b;
	pc->polling = false;
	if (status != 0 || reply == NULL ||
	    reply->type != FELIX_MSG_GROUP_RECORDS) {
		bench_fail(b, "group_poll", message);
		return;
	}
	const struct felix_group_record_list *l =
	    &reply->u.group_records.records;
	for (size_t i = 0; i < l->count && !b->failed; i++) {
		pc->inflight++;
		if (felix_client_group_settle(
		        pc->c, FELIX_MSG_GROUP_ACK, "default", b->stream, 0,
		        "bench", l->items[i].offset, on_group_ack, pc) != 0) {
			pc->inflight--;
			bench_fail(b, "group_ack", "connection lost");
		}
	}
	group_pump(pc);
}

/* One poll in flight per consumer, and acks for at most a window of
 * batches: the next poll leaves while the last batch is acked. */
static void group_pump(struct pubconn *pc)
{
	struct bench *b = pc->b;
	if (b->stop || b->failed || pc->polling ||
	    pc->inflight >= (unsigned)b->window * b->batch) {
		return;
	}
	pc->polling = true;
	if (felix_client_group_poll(pc->c, "default", b->stream, 0, "bench",
	                            b->batch, 0, on_group_poll, pc) != 0) {
		pc->polling = false;
		bench_fail(b, "group_poll", "connection lost");
	}
}

/* Publishes --records records (batches of --batch), not timed. */
static void prefill(struct bench *b)
{
	uint64_t sent = 0;
	struct pubconn *pc = &b->pubs[0];
	b->stop = true; /* the acks must not start the pump */
	while (!b->failed) {
		while (sent < b->records && pc->inflight < 16) {
			uint32_t n = b->records - sent < b->batch
			                 ? (uint32_t)(b->records - sent)
			                 : b->batch;
			pc->inflight++;
			b->inflight_total++;
			if (felix_client_publish(pc->c, "default", b->stream,
			                         false, NULL, 0, b->payloads, n,
			                         FELIX_ACK_PER_BATCH, on_ack,
			                         pc) != 0) {
				bench_fail(b, "publish", "connection lost");
				return;
			}
			sent += n;
		}
		if (sent >= b->records && pc->inflight == 0) {
			break;
		}
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	b->stop = false;
}

static void on_tick(uv_timer_t *t)
{
	struct bench *b = t->data;
	/* Backlog-limited publishers resume here. */
	for (unsigned i = 0; i < b->conns; i++) {
		pump(&b->pubs[i]);
	}
}

static void on_stop(uv_timer_t *t)
{
	struct bench *b = t->data;
	b->stop = true;
}

static int connect_one(struct bench *b, struct felix_client **out, bool sub)
{
	struct felix_client_config cfg;
	char err[256];
	bool other = sub && b->sub_host[0] != '\0';
	felix_client_config_init(&cfg);
	cfg.host = other ? b->sub_host : b->host;
	cfg.port = other ? b->sub_port : b->port;
	cfg.ca_file = other && b->sub_ca != NULL ? b->sub_ca : b->ca;
	cfg.server_name = "localhost";
	cfg.tenant = b->tenant;
	cfg.token = b->token;
	if (felix_client_open(out, &b->loop, &cfg, on_ready, b, err,
	                      sizeof err) != 0) {
		fprintf(stderr, "lodebench: %s\n", err);
		return -1;
	}
	return 0;
}

static void on_closed_timer(uv_handle_t *h)
{
	(void)h;
}

int lodebench_felix_main(int argc, char **argv)
{
	static struct bench b;
	memset(&b, 0, sizeof b);
	strcpy(b.host, "127.0.0.1");
	b.port = 5000;
	b.tenant = "t1";
	b.token = "dev";
	b.batch = 64;
	b.size = 1024;
	b.fanout = 1;
	b.seconds = 10;
	b.conns = 4;
	b.window = 16;
	b.max_lag = 16384;
	snprintf(b.stream, sizeof b.stream, "bench-%d", (int)getpid());
	b.rng = (uint64_t)now_ns() | 1;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(o, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(o, "--json") == 0) {
			b.json = true;
			continue;
		}
		if (v == NULL) {
			usage(stderr);
			return 2;
		}
		if (strcmp(o, "--felix") == 0) {
			if (lodebench_split_hostport(v, b.host, sizeof b.host,
			                             &b.port) != 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(o, "--ca") == 0) {
			b.ca = v;
		} else if (strcmp(o, "--server-pid") == 0) {
			if (bench_servers_parse(&b.servers, v) != 0) {
				fprintf(stderr,
				        "lodebench: bad --server-pid "
				        "'%s' (PID[,PID...], at most "
				        "8)\n",
				        v);
				return 2;
			}
		} else if (strcmp(o, "--rate") == 0) {
			b.rate = strtoull(v, NULL, 10);
			if (b.rate == 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(o, "--sub-felix") == 0) {
			if (lodebench_split_hostport(v, b.sub_host,
			                             sizeof b.sub_host,
			                             &b.sub_port) != 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(o, "--sub-ca") == 0) {
			b.sub_ca = v;
		} else if (strcmp(o, "--mode") == 0) {
			static const char *const modes[] = {
			    "throughput", "latency", "idempotent", "group",
			    "counter"};
			size_t k = 0;
			while (k < 5 && strcmp(v, modes[k]) != 0) {
				k++;
			}
			if (k == 5) {
				usage(stderr);
				return 2;
			}
			b.mode = (enum bench_mode)k;
			b.latency = b.mode == MODE_LATENCY;
		} else if (strcmp(o, "--records") == 0) {
			b.records = strtoull(v, NULL, 10);
		} else if (strcmp(o, "--batch") == 0) {
			b.batch = (uint32_t)atoi(v);
		} else if (strcmp(o, "--size") == 0) {
			b.size = (size_t)atol(v);
		} else if (strcmp(o, "--fanout") == 0) {
			b.fanout = (unsigned)atoi(v);
		} else if (strcmp(o, "--seconds") == 0) {
			b.seconds = (unsigned)atoi(v);
		} else if (strcmp(o, "--conns") == 0) {
			b.conns = (unsigned)atoi(v);
		} else if (strcmp(o, "--window") == 0) {
			b.window = (unsigned)atoi(v);
		} else if (strcmp(o, "--max-lag") == 0) {
			b.max_lag = strtoull(v, NULL, 10);
		} else if (strcmp(o, "--keys") == 0) {
			b.keys = (unsigned)atoi(v);
			if (b.keys == 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(o, "--stream") == 0) {
			snprintf(b.stream, sizeof b.stream, "%s", v);
		} else if (strcmp(o, "--tenant") == 0) {
			b.tenant = v;
		} else if (strcmp(o, "--token") == 0) {
			b.token = v;
		} else {
			usage(stderr);
			return 2;
		}
		i++;
	}
	if (b.latency) {
		b.conns = 1;
	}
	if (b.mode == MODE_GROUP || b.mode == MODE_COUNTER) {
		b.fanout = 0;
	}
	if (b.mode == MODE_GROUP && b.records == 0) {
		b.records = 100000;
	}
	if (b.batch == 0 || b.batch > 65536 || b.conns == 0 ||
	    b.conns > MAX_CONNS || b.fanout > MAX_FANOUT || b.window == 0 ||
	    b.seconds == 0) {
		usage(stderr);
		return 2;
	}
	if (b.rate > 0 && b.mode != MODE_THROUGHPUT) {
		fprintf(stderr, "lodebench: --rate needs --mode throughput\n");
		return 2;
	}
	size_t nreq = (size_t)b.conns * b.window;
	b.reqs = calloc(nreq, sizeof *b.reqs);
	if (b.reqs == NULL || bench_hist_init(&b.lat) != 0) {
		fprintf(stderr, "lodebench: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < nreq; i++) {
		b.reqs[i].next_free = b.free_reqs;
		b.free_reqs = &b.reqs[i];
	}
	b.payload = malloc(b.size ? b.size : 1);
	b.payloads = calloc(b.batch, sizeof *b.payloads);
	if (b.payload == NULL || b.payloads == NULL) {
		return 1;
	}
	memset(b.payload, 'p', b.size);
	for (uint32_t i = 0; i < b.batch; i++) {
		b.payloads[i].data = b.payload;
		b.payloads[i].len = b.size;
	}
	uv_loop_init(&b.loop);
	for (unsigned i = 0; i < b.conns; i++) {
		b.pubs[i].b = &b;
		if (connect_one(&b, &b.pubs[i].c, false) != 0) {
			return 1;
		}
	}
	for (unsigned i = 0; i < b.fanout; i++) {
		if (connect_one(&b, &b.subc[i], true) != 0) {
			return 1;
		}
	}
	while (b.ready < b.conns + b.fanout && !b.failed) {
		uv_run(&b.loop, UV_RUN_ONCE);
	}
	/* The stream exists before subscribing (dev mode creates it). */
	struct felix_view one = {(const uint8_t *)"w", 1};
	b.pubs[0].inflight++;
	b.inflight_total++;
	felix_client_publish(b.pubs[0].c, "default", b.stream, false, NULL, 0,
	                     &one, 1, FELIX_ACK_PER_BATCH, on_ack, &b.pubs[0]);
	b.stop = true; /* the ack must not start the pump yet */
	while (b.acked_batches == 0 && !b.failed) {
		uv_run(&b.loop, UV_RUN_ONCE);
	}
	b.stop = false;
	static const struct felix_sub_handlers h = {on_started, on_events,
	                                            on_sub_ended};
	for (unsigned i = 0; i < b.fanout && !b.failed; i++) {
		struct felix_sub *sub;
		if (felix_client_subscribe(b.subc[i], "default", b.stream, 0,
		                           NULL, &h, &b, &sub) != 0) {
			b.failed = true;
		}
	}
	while (b.subs_started < b.fanout && !b.failed) {
		uv_run(&b.loop, UV_RUN_ONCE);
	}
	if (b.mode == MODE_IDEMPOTENT) {
		unsigned got = 0;
		for (unsigned i = 0; i < b.conns && !b.failed; i++) {
			if (felix_client_producer_init(b.pubs[i].c, on_pinit,
			                               &b.pubs[i]) != 0) {
				bench_fail(&b, "producer_init",
				           "not served by this broker");
			}
		}
		while (!b.failed && got < b.conns) {
			uv_run(&b.loop, UV_RUN_ONCE);
			got = 0;
			for (unsigned i = 0; i < b.conns; i++) {
				got += b.pubs[i].producer != 0;
			}
		}
	}
	if (b.mode == MODE_GROUP) {
		prefill(&b);
	}
	if (b.failed) {
		fprintf(stderr, "lodebench: %s\n", b.error);
		return 1;
	}
	/* The warm-up record reached every subscriber or not: start the
	 * fan-out count from zero either way. */
	b.acked_batches = 0;
	b.events = 0;
	/* Nor is the warm-up ack a latency sample (it was not timed). */
	bench_hist_free(&b.lat);
	if (bench_hist_init(&b.lat) != 0) {
		fprintf(stderr, "lodebench: out of memory\n");
		return 1;
	}
	uv_timer_t tick, stop;
	uv_timer_init(&b.loop, &tick);
	uv_timer_init(&b.loop, &stop);
	tick.data = &b;
	stop.data = &b;
	uv_timer_start(&tick, on_tick, 1, 1);
	uv_timer_start(&stop, on_stop, (uint64_t)b.seconds * 1000, 0);
	if (b.rate > 0 &&
	    bench_pacer_init(&b.loop, &b.pacer, on_pacer, &b) != 0) {
		fprintf(stderr,
		        "lodebench: cannot make a timerfd for --rate\n");
		return 1;
	}
	bench_servers_start(&b.servers);
	double cpu0 = servers_cpu(&b);
	uint64_t t0 = now_ns();
	if (b.rate > 0) {
		bench_sched_init(&b.sched, b.rate, t0, UINT64_MAX);
		open_pump(&b);
	}
	for (unsigned i = 0; i < b.conns; i++) {
		pump(&b.pubs[i]);
	}
	while (!b.stop && !b.failed) {
		uv_run(&b.loop, UV_RUN_ONCE);
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	double cpu = servers_cpu(&b) - cpu0;
	bench_servers_stop(&b.servers);
	uint64_t acked = b.acked_batches;
	uint64_t events = b.events;
	/* Let in-flight acks drain before closing. */
	for (int k = 0; k < 200; k++) {
		unsigned busy = 0;
		for (unsigned i = 0; i < b.conns; i++) {
			busy += b.pubs[i].inflight;
		}
		if (busy == 0) {
			break;
		}
		uv_run(&b.loop, UV_RUN_NOWAIT);
		usleep(5000);
	}
	uv_timer_stop(&tick);
	if (b.rate > 0) {
		bench_pacer_close(&b.pacer);
	}
	uv_close((uv_handle_t *)&tick, on_closed_timer);
	uv_close((uv_handle_t *)&stop, on_closed_timer);
	if (b.failed) {
		fprintf(stderr, "lodebench: %s\n", b.error);
	}
	double msgs = (double)acked * b.batch / secs;
	double mb = msgs * (double)b.size / 1e6;
	if (b.mode == MODE_GROUP) {
		printf("felix consumer group: %u consumers x poll %u, acks "
		       "pipelined: %" PRIu64 " records polled and acked in "
		       "%.1f s: %.0f records/s",
		       b.conns, b.batch, b.done_ops, secs,
		       (double)b.done_ops / secs);
	} else if (b.mode == MODE_COUNTER) {
		printf("felix counters: %u conns x window %u: %" PRIu64
		       " adds in %.1f s: %.0f adds/s",
		       b.conns, b.window, b.done_ops, secs,
		       (double)b.done_ops / secs);
	}
	if (b.mode == MODE_GROUP || b.mode == MODE_COUNTER) {
		if (b.servers.n > 0 && cpu > 0) {
			printf(", server CPU %.2f s (%.0f%%)", cpu,
			       100 * cpu / secs);
		}
		printf("\n");
	} else if (b.latency) {
		if (!b.json) {
			printf("felix latency: batch %u x %zu B, fanout %u: "
			       "%" PRIu64 " acks in %.1f s; p50 %" PRIu64
			       " us, p99 %" PRIu64 " us, p999 %" PRIu64 " us\n",
			       b.batch, b.size, b.fanout, b.lat.count, secs,
			       bench_hist_quantile(&b.lat, BENCH_P50),
			       bench_hist_quantile(&b.lat, BENCH_P99),
			       bench_hist_quantile(&b.lat, BENCH_P999));
		}
	} else if (!b.json) {
		printf("felix %s: batch %u x %zu B, fanout %u, %u "
		       "conns x window %u: %.0f msgs/s acked (%.1f MB/s), "
		       "%.0f events/s delivered",
		       b.mode == MODE_IDEMPOTENT ? "idempotent throughput"
		                                 : "throughput",
		       b.batch, b.size, b.fanout, b.conns, b.window, msgs, mb,
		       (double)events / secs);
		if (b.servers.n > 0 && cpu > 0) {
			printf(", server CPU %.2f s (%.0f%%), %.1f MB/s per "
			       "server CPU-second",
			       cpu, 100 * cpu / secs, mb * secs / cpu);
		}
		printf("\n");
	}
	if (b.mode == MODE_THROUGHPUT || b.mode == MODE_LATENCY) {
		char params[160];
		snprintf(params, sizeof params,
		         "batch=%u size=%zu fanout=%u conns=%u window=%u "
		         "keys=%u msgs/s=%.0f MB/s=%.1f",
		         b.batch, b.size, b.fanout, b.conns,
		         b.latency ? 1 : b.window, b.keys, msgs, mb);
		struct bench_result res = {
		    .family = "felix",
		    .op = "publish",
		    .unit = "batches",
		    .ops = b.latency ? b.lat.count : acked,
		    .errors = b.failed ? 1 : 0,
		    .secs = secs,
		    .rate = b.rate,
		    .late = b.late,
		    .params = params,
		    .lat = &b.lat,
		    .servers = b.servers.n > 0 ? &b.servers : NULL,
		};
		bench_report_print(stdout, &res, b.json);
	}
	for (unsigned i = 0; i < b.conns; i++) {
		felix_client_close(b.pubs[i].c);
	}
	for (unsigned i = 0; i < b.fanout; i++) {
		felix_client_close(b.subc[i]);
	}
	uv_run(&b.loop, UV_RUN_DEFAULT);
	uv_loop_close(&b.loop);
	bench_hist_free(&b.lat);
	free(b.reqs);
	free(b.payload);
	free(b.payloads);
	return b.failed ? 1 : 0;
}
