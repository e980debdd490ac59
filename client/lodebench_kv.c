/* lodebench kv: FSNP GET/SET throughput and latency, redis-benchmark
 * style: C connections, each sending batches of P requests back to back
 * and waiting for the whole batch before the next (-P semantics); random
 * keys from a keyspace (uniform, or Zipf-skewed with --zipf), fixed-size
 * values. Reports ops/s and the latency
 * histogram (from a batch's send to each reply) through bench_report.
 *
 * With --rate R the load is open-loop instead: request k is due at
 * k / R seconds (bench_sched.h) and leaves then, round-robin over the
 * connections, whatever the replies do; its latency runs from that due
 * time. At most -P requests per connection are in flight; requests due
 * beyond that leave as soon as a reply frees a place and count as late.
 *
 * The benchmark shares the machine with the server, so its own CPU per
 * request is kept small: latencies go into a histogram (bench_hist.h)
 * rather than an array sorted at the end, and every request body is one
 * template (struct body_tpl) with the key's digits written in place. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/bench_hist.h"
#include "client/bench_pacer.h"
#include "client/bench_report.h"
#include "client/bench_sched.h"
#include "client/bench_zipf.h"
#include "client/fsnp_client.h"
#include "client/lodebench.h"
#include "wire/fsnp_opcode.h"

/* A request body, built once by the FSNP writer with a placeholder key;
 * each request only rewrites the key's 12 digits. */
#define KEY_DIGITS 12u
#define KEY_PREFIX "key:"
#define KEY_LEN (sizeof KEY_PREFIX - 1 + KEY_DIGITS)

struct body_tpl {
	struct wbuf body;
	size_t key_at; /* the key's bytes: body.data[key_at .. + KEY_LEN) */
};

struct bench;

struct bconn {
	struct bench *b;
	struct fsnp_client *c;
	unsigned outstanding;
	uint64_t batch_start;
	bool ready;
};

/* Open loop: one request in flight, with its due time. */
struct kreq {
	struct bconn *k;
	uint64_t due_ns;
	struct kreq *next_free;
};

struct bench {
	uv_loop_t loop;
	char host[256];
	uint16_t port;
	const char *password;
	unsigned conns, pipeline, value_size, keyspace;
	uint64_t requests; /* per test (this run's; the stop timer lowers it) */
	uint64_t requests_arg; /* -n */
	uint64_t sent, done, errors;
	struct bench_hist lat;
	/* open loop */
	uint64_t rate; /* requests per second; 0 = closed loop */
	struct bench_sched sched;
	struct bench_pacer pacer;
	struct kreq *reqs; /* owned, conns * pipeline */
	struct kreq *free_reqs;
	unsigned next_conn;
	uint64_t late;
	struct bench_servers servers;
	bool json;
	unsigned seconds; /* --seconds: the run ends then (0: after -n) */
	uv_timer_t stop_timer;
	struct body_tpl tpl; /* for `opcode` */
	uint16_t opcode;
	struct bconn *bc; /* owned */
	unsigned ready_count;
	uint64_t started, finished;
	uint64_t rng;
	char *value; /* owned */
	bool failed;
	bool topology; /* route by slot to each shard's leader (SHARDS) */
	double zipf_s; /* --zipf: the exponent; 0 = uniform keys */
	struct bench_zipf zipf;
};

static uint64_t rnd(struct bench *b)
{
	uint64_t x = b->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	b->rng = x;
	return x * 2685821657736338717ull;
}

static uint64_t zipf_rnd(void *data)
{
	return rnd(data);
}

/* The next request's key number: uniform over the keyspace, or its Zipf
 * rank (key 0 the most requested). */
static uint64_t next_key(struct bench *b)
{
	if (b->zipf_s > 0) {
		return bench_zipf_next(&b->zipf, zipf_rnd, b);
	}
	return rnd(b) % b->keyspace;
}

/* The body the FSNP writer builds for `key`: the template's reference. */
static int body_build(struct wbuf *out, uint16_t opcode, const char *key,
                      size_t klen, const char *value, size_t vlen)
{
	struct fsnp_writer w;
	wbuf_init(out);
	fsnp_w_init(&w, out);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_bin(&w, key, klen);
	if (opcode == FSNP_OP_SET) {
		fsnp_w_key(&w, "value");
		fsnp_w_bin(&w, value, vlen);
	}
	fsnp_w_map_end(&w);
	return fsnp_w_finish(&w);
}

/* "00" to "99". */
static const char digit_pairs[] = "00010203040506070809"
                                  "10111213141516171819"
                                  "20212223242526272829"
                                  "30313233343536373839"
                                  "40414243444546474849"
                                  "50515253545556575859"
                                  "60616263646566676869"
                                  "70717273747576777879"
                                  "80818283848586878889"
                                  "90919293949596979899";

/* Writes the key of number `n` (< 10^12) into the template: two digits at
 * a time, both six-digit halves together, as snprintf's "%012" would. */
static void tpl_set_key(struct body_tpl *t, uint64_t n)
{
	uint8_t *d = t->body.data + t->key_at + sizeof KEY_PREFIX - 1;
	uint32_t hi = (uint32_t)(n / 1000000), lo = (uint32_t)(n % 1000000);
	for (unsigned i = 6; i > 0; i -= 2) {
		memcpy(d + i - 2, digit_pairs + 2 * (hi % 100), 2);
		memcpy(d + 6 + i - 2, digit_pairs + 2 * (lo % 100), 2);
		hi /= 100;
		lo /= 100;
	}
}

/* Builds the template for `opcode` and checks it against the writer for a
 * few keys, so its bytes are the writer's for every key. */
static int tpl_init(struct body_tpl *t, uint16_t opcode, const char *value,
                    size_t vlen, uint64_t keyspace)
{
	static const char zero_key[] = KEY_PREFIX "000000000000";
	_Static_assert(sizeof zero_key - 1 == KEY_LEN, "12 digits");
	char key[32];
	uint64_t probes[8] = {0,           9, 999999, 1000000, 123456789012,
	                      999999999999};
	probes[6] = keyspace / 2;
	probes[7] = keyspace - 1;
	memcpy(key, zero_key, sizeof zero_key);
	if (body_build(&t->body, opcode, key, KEY_LEN, value, vlen) != 0) {
		goto err_body;
	}
	/* Only the key's bytes can match: the map's keys are short and
	 * the value is all 'x'. */
	t->key_at = 0;
	while (t->key_at + KEY_LEN <= t->body.len &&
	       memcmp(t->body.data + t->key_at, key, KEY_LEN) != 0) {
		t->key_at++;
	}
	if (t->key_at + KEY_LEN > t->body.len) {
		goto err_body;
	}
	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		struct wbuf ref;
		int n = snprintf(key, sizeof key, "key:%012" PRIu64, probes[i]);
		int rv = body_build(&ref, opcode, key, (size_t)n, value, vlen);
		tpl_set_key(t, probes[i]);
		bool same = rv == 0 && ref.len == t->body.len &&
		            memcmp(ref.data, t->body.data, ref.len) == 0;
		wbuf_free(&ref);
		if (!same) {
			goto err_body;
		}
	}
	return 0;

err_body:
	wbuf_free(&t->body);
	return -1;
}

static void send_batch(struct bconn *k);

static void on_reply(void *data, const struct fsnp_reply *r)
{
	struct bconn *k = data;
	struct bench *b = k->b;
	uint64_t t = uv_hrtime();
	if (r->error != 0 || r->status != FSNP_STATUS_OK) {
		b->errors++;
		if (b->errors == 1) {
			fprintf(stderr, "lodebench: %s\n",
			        r->error ? fsnp_client_strerror(r->error)
			                 : (r->message ? r->message : "error"));
		}
	}
	if (b->done < b->requests) {
		bench_hist_add(&b->lat, (t - k->batch_start) / 1000);
	}
	b->done++;
	if (--k->outstanding == 0) {
		if (b->done >= b->requests) {
			if (b->finished == 0) {
				b->finished = t;
			}
			return;
		}
		send_batch(k);
	}
}

static void send_batch(struct bconn *k)
{
	struct bench *b = k->b;
	struct body_tpl *t = &b->tpl;
	k->batch_start = uv_hrtime();
	for (unsigned i = 0; i < b->pipeline && b->sent < b->requests; i++) {
		/* The client copies the body at once: one template serves
		 * every request. */
		tpl_set_key(t, next_key(b));
		if (fsnp_client_send(k->c, b->opcode, t->body.data + t->key_at,
		                     KEY_LEN, t->body.data, t->body.len, 0,
		                     on_reply, k) == 0) {
			k->outstanding++;
			b->sent++;
		}
	}
}

static void open_pump(struct bench *b);

static void on_open_reply(void *data, const struct fsnp_reply *r)
{
	struct kreq *q = data;
	struct bench *b = q->k->b;
	uint64_t t = uv_hrtime();
	if (r->error != 0 || r->status != FSNP_STATUS_OK) {
		b->errors++;
		if (b->errors == 1) {
			fprintf(stderr, "lodebench: %s\n",
			        r->error ? fsnp_client_strerror(r->error)
			                 : (r->message ? r->message : "error"));
		}
	}
	bench_hist_add(&b->lat, q->due_ns < t ? (t - q->due_ns) / 1000 : 0);
	q->k->outstanding--;
	q->next_free = b->free_reqs;
	b->free_reqs = q;
	if (++b->done >= b->requests && b->finished == 0) {
		b->finished = t;
	}
	open_pump(b);
}

/* Sends every request due by now that has a free place, round-robin over
 * the connections, then arms the pacer for the next one. */
static void open_pump(struct bench *b)
{
	uint64_t now = uv_hrtime();
	uint64_t due = bench_sched_due(&b->sched, now);
	struct body_tpl *t = &b->tpl;
	if (due > b->requests) {
		due = b->requests; /* --seconds ended the run */
	}
	while (b->sent < due && b->free_reqs != NULL) {
		struct kreq *q = b->free_reqs;
		struct bconn *k = &b->bc[b->next_conn];
		uint64_t at = bench_sched_time(&b->sched, b->sent);
		/* The free list only holds places of connections with room:
		 * every connection has -P of them. */
		b->free_reqs = q->next_free;
		q->k = k;
		q->due_ns = at;
		if (now - at > 1000000) {
			b->late++;
		}
		tpl_set_key(t, next_key(b));
		if (fsnp_client_send(k->c, b->opcode, t->body.data + t->key_at,
		                     KEY_LEN, t->body.data, t->body.len, 0,
		                     on_open_reply, q) != 0) {
			q->next_free = b->free_reqs;
			b->free_reqs = q;
			b->errors++;
			b->failed = b->errors > b->requests / 10 + 10;
		} else {
			k->outstanding++;
		}
		b->sent++;
		if (b->failed) {
			return;
		}
	}
	/* The next wake-up's requests go out on the next connection: what
	 * one wake-up sends leaves in one write. */
	b->next_conn = (b->next_conn + 1) % b->conns;
	if (b->sent < b->requests && b->free_reqs != NULL) {
		bench_pacer_arm(&b->pacer,
		                bench_sched_time(&b->sched, b->sent));
	}
}

static void on_pacer(struct bench_pacer *p)
{
	open_pump(p->data);
}

/* --seconds: no request leaves after this; those in flight finish. */
static void on_stop_timer(uv_timer_t *t)
{
	struct bench *b = t->data;
	b->requests = b->sent;
	if (b->done >= b->requests && b->finished == 0) {
		b->finished = uv_hrtime();
	}
}

static void start_load(struct bench *b)
{
	b->started = uv_hrtime();
	if (b->seconds > 0) {
		uv_timer_start(&b->stop_timer, on_stop_timer,
		               (uint64_t)b->seconds * 1000, 0);
	}
	bench_servers_start(&b->servers);
	if (b->rate > 0) {
		bench_sched_init(&b->sched, b->rate, b->started, b->requests);
		open_pump(b);
		return;
	}
	for (unsigned i = 0; i < b->conns; i++) {
		send_batch(&b->bc[i]);
	}
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err)
{
	struct bconn *k = data;
	struct bench *b = k->b;
	(void)c;
	if (status != 0) {
		fprintf(stderr, "lodebench: cannot connect: %s\n", err);
		b->failed = true;
		uv_stop(&b->loop);
		return;
	}
	k->ready = true;
	if (++b->ready_count == b->conns) {
		start_load(b);
	}
}

static int run_one(struct bench *b, uint16_t opcode)
{
	struct fsnp_client_options o;
	char params[128];
	int rv = 0;
	memset(&o, 0, sizeof o);
	o.host = b->host;
	o.port = b->port;
	o.password = b->password;
	o.client_name = "lodebench";
	o.lanes = 8;
	o.topology = b->topology;
	o.timeout_ms = 60000;
	b->opcode = opcode;
	if (tpl_init(&b->tpl, opcode, b->value, b->value_size, b->keyspace) !=
	    0) {
		fprintf(stderr, "lodebench: cannot build the request body\n");
		return -1;
	}
	b->requests = b->requests_arg;
	b->sent = b->done = b->errors = b->late = 0;
	b->ready_count = 0;
	b->finished = 0;
	b->failed = false;
	b->next_conn = 0;
	b->free_reqs = NULL;
	b->reqs = NULL;
	b->bc = calloc(b->conns, sizeof *b->bc);
	if (b->rate > 0) {
		size_t n = (size_t)b->conns * b->pipeline;
		b->reqs = calloc(n, sizeof *b->reqs);
		for (size_t i = 0; b->reqs != NULL && i < n; i++) {
			b->reqs[i].next_free = b->free_reqs;
			b->free_reqs = &b->reqs[i];
		}
	}
	if (bench_hist_init(&b->lat) != 0 || b->bc == NULL ||
	    (b->rate > 0 && b->reqs == NULL)) {
		fprintf(stderr, "lodebench: out of memory\n");
		rv = -1;
		goto err_mem;
	}
	uv_loop_init(&b->loop);
	uv_timer_init(&b->loop, &b->stop_timer);
	b->stop_timer.data = b;
	if (b->seconds > 0) {
		/* Until the timer: -n bounds nothing then (the open loop's
		 * schedule still stops at rate x seconds). */
		b->requests = b->rate > 0 ? b->rate * b->seconds : UINT64_MAX;
	}
	if (b->rate > 0 &&
	    bench_pacer_init(&b->loop, &b->pacer, on_pacer, b) != 0) {
		fprintf(stderr,
		        "lodebench: cannot make a timerfd for --rate\n");
		uv_loop_close(&b->loop);
		rv = -1;
		goto err_mem;
	}
	for (unsigned i = 0; i < b->conns; i++) {
		b->bc[i].b = b;
		if (fsnp_client_open(&b->loop, &o, on_ready, &b->bc[i],
		                     &b->bc[i].c) != 0) {
			fprintf(stderr, "lodebench: bad options\n");
			b->failed = true;
			b->conns = i;
			break;
		}
	}
	while (!b->failed && b->done < b->requests) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	bench_servers_stop(&b->servers);
	for (unsigned i = 0; i < b->conns; i++) {
		fsnp_client_close(b->bc[i].c, NULL, NULL);
	}
	if (b->rate > 0) {
		bench_pacer_close(&b->pacer);
	}
	uv_close((uv_handle_t *)&b->stop_timer, NULL);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
	if (b->failed) {
		rv = -1;
		goto err_mem;
	}
	snprintf(params, sizeof params,
	         "conns=%u pipeline=%u value=%u keyspace=%u zipf=%g", b->conns,
	         b->pipeline, b->value_size, b->keyspace, b->zipf_s);
	struct bench_result res = {
	    .family = "kv",
	    .op = opcode == FSNP_OP_SET ? "set" : "get",
	    .unit = "ops",
	    .ops = b->lat.count,
	    .errors = b->errors,
	    .secs = (double)(b->finished - b->started) / 1e9,
	    .rate = b->rate,
	    .late = b->late,
	    .params = params,
	    .lat = &b->lat,
	    .servers = b->servers.n > 0 ? &b->servers : NULL,
	};
	bench_report_print(stdout, &res, b->json);
	rv = b->errors > 0 ? 1 : 0;

err_mem:
	bench_hist_free(&b->lat);
	free(b->reqs);
	free(b->bc);
	wbuf_free(&b->tpl.body);
	return rv;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lodebench kv [--fsnp HOST:PORT] [-c CONNS] [-P "
	           "PIPELINE]\n"
	           "                    [-n REQUESTS] [-d VALUE_BYTES] [-r "
	           "KEYSPACE]\n"
	           "                    [-t set,get] [--password P] "
	           "[--topology]\n"
	           "                    [--rate OPS_PER_S] "
	           "[--server-pid PID[,PID...]] [--json]\n"
	           "                    [--seconds S] [--zipf EXPONENT]\n"
	           "--topology: send each key to its shard's leader (SHARDS), "
	           "for clusters\n"
	           "--rate: open loop, requests leave on a fixed schedule (at "
	           "most -P in flight per connection)\n"
	           "--seconds: run S seconds instead of -n requests\n"
	           "--zipf: key k of the keyspace with probability "
	           "proportional to 1/(k+1)^EXPONENT (e.g. 0.99)\n"
	           "Defaults: 127.0.0.1:6388, -c 1 -P 1 -n 100000 -d 3 -r "
	           "100000 -t set,get\n");
}

int lodebench_kv_main(int argc, char **argv)
{
	struct bench b;
	const char *tests = "set,get";
	int rv = 0;
	memset(&b, 0, sizeof b);
	snprintf(b.host, sizeof b.host, "127.0.0.1");
	b.port = 6388;
	b.conns = 1;
	b.pipeline = 1;
	b.requests = 100000;
	b.value_size = 3;
	b.keyspace = 100000;
	b.rng = uv_hrtime() | 1;
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
		} else if (strcmp(a, "-P") == 0) {
			b.pipeline = (unsigned)atoi(v);
		} else if (strcmp(a, "-n") == 0) {
			b.requests = strtoull(v, NULL, 10);
		} else if (strcmp(a, "-d") == 0) {
			b.value_size = (unsigned)atoi(v);
		} else if (strcmp(a, "-r") == 0) {
			b.keyspace = (unsigned)atoi(v);
		} else if (strcmp(a, "-t") == 0) {
			tests = v;
		} else if (strcmp(a, "--password") == 0) {
			b.password = v;
		} else if (strcmp(a, "--seconds") == 0) {
			b.seconds = (unsigned)atoi(v);
		} else if (strcmp(a, "--zipf") == 0) {
			char *end;
			b.zipf_s = strtod(v, &end);
			if (*end != '\0' || !(b.zipf_s > 0)) {
				fprintf(stderr,
				        "lodebench: bad --zipf '%s' (a "
				        "positive exponent, e.g. 0.99)\n",
				        v);
				return 2;
			}
		} else if (strcmp(a, "--rate") == 0) {
			b.rate = strtoull(v, NULL, 10);
			if (b.rate == 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(a, "--server-pid") == 0) {
			if (bench_servers_parse(&b.servers, v) != 0) {
				fprintf(stderr,
				        "lodebench: bad --server-pid "
				        "'%s' (PID[,PID...], at most "
				        "8)\n",
				        v);
				return 2;
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (b.conns == 0 || b.pipeline == 0 || b.requests == 0 ||
	    b.keyspace == 0) {
		usage(stderr);
		return 2;
	}
	if (b.zipf_s > 0 &&
	    bench_zipf_init(&b.zipf, b.keyspace, b.zipf_s) != 0) {
		fprintf(stderr, "lodebench: bad --zipf %g for keyspace %u\n",
		        b.zipf_s, b.keyspace);
		return 2;
	}
	b.requests_arg = b.requests;
	b.value = malloc(b.value_size ? b.value_size : 1);
	if (b.value == NULL) {
		fprintf(stderr, "lodebench: out of memory\n");
		return 1;
	}
	memset(b.value, 'x', b.value_size);
	if (strstr(tests, "set") != NULL && run_one(&b, FSNP_OP_SET) != 0) {
		rv = 1;
	}
	if (rv == 0 && strstr(tests, "get") != NULL &&
	    run_one(&b, FSNP_OP_GET) != 0) {
		rv = 1;
	}
	free(b.value);
	return rv;
}
