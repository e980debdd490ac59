/* lodebench kv: FSNP GET/SET throughput and latency, redis-benchmark
 * style: C connections, each sending batches of P requests back to back
 * and waiting for the whole batch before the next (-P semantics); random
 * keys from a keyspace, fixed-size values. Reports ops/s and p50/p99
 * latency (from a batch's send to each reply).
 *
 * The benchmark shares the machine with the server, so its own CPU per
 * request is kept small: latencies go into a histogram (struct lat_hist)
 * rather than an array sorted at the end, and every request body is one
 * template (struct body_tpl) with the key's digits written in place. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/fsnp_client.h"
#include "client/lodebench.h"
#include "wire/fsnp_opcode.h"

/* Latencies in whole microseconds, counted per value below LAT_EXACT_US
 * (so p50/p99 there are exactly what sorting every sample gave), and
 * above it in log-scaled buckets of LAT_SUB_BUCKETS per power of two (a
 * quantile that far out is reported as its bucket's lower bound, within
 * 0.1 %). The counts are calloc'd per run: only the pages holding
 * observed latencies are written. */
#define LAT_EXACT_BITS 20u
#define LAT_EXACT_US (1ull << LAT_EXACT_BITS) /* ~1.05 s */
#define LAT_SUB_BITS 10u
#define LAT_SUB_BUCKETS (1u << LAT_SUB_BITS)
#define LAT_TAIL_BUCKETS ((64u - LAT_EXACT_BITS) * LAT_SUB_BUCKETS)

struct lat_hist {
	uint64_t *exact; /* owned, LAT_EXACT_US entries */
	uint64_t *tail;  /* owned, LAT_TAIL_BUCKETS entries */
	uint64_t count;
};

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

struct bench {
	uv_loop_t loop;
	char host[256];
	uint16_t port;
	const char *password;
	unsigned conns, pipeline, value_size, keyspace;
	uint64_t requests; /* per test */
	uint64_t sent, done, errors;
	struct lat_hist lat;
	struct body_tpl tpl; /* for `opcode` */
	uint16_t opcode;
	struct bconn *bc; /* owned */
	unsigned ready_count;
	uint64_t started, finished;
	uint64_t rng;
	char *value; /* owned */
	bool failed;
	bool topology; /* route by slot to each shard's leader (SHARDS) */
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

static int lat_init(struct lat_hist *h)
{
	h->exact = calloc(LAT_EXACT_US, sizeof *h->exact);
	h->tail = calloc(LAT_TAIL_BUCKETS, sizeof *h->tail);
	h->count = 0;
	return h->exact != NULL && h->tail != NULL ? 0 : -1;
}

static void lat_free(struct lat_hist *h)
{
	free(h->exact);
	free(h->tail);
}

static void lat_add(struct lat_hist *h, uint64_t us)
{
	h->count++;
	if (us < LAT_EXACT_US) {
		h->exact[us]++;
		return;
	}
	unsigned e = LAT_EXACT_BITS; /* the top bit's position */
	while (e < 63u && (us >> (e + 1)) != 0) {
		e++;
	}
	unsigned m =
	    (unsigned)(us >> (e - LAT_SUB_BITS)) & (LAT_SUB_BUCKETS - 1);
	h->tail[(e - LAT_EXACT_BITS) * LAT_SUB_BUCKETS + m]++;
}

/* The latency of rank `rank` (0-based) in ascending order: what the sorted
 * array of every sample held at that index. */
static uint64_t lat_at(const struct lat_hist *h, uint64_t rank)
{
	uint64_t seen = 0;
	for (uint64_t us = 0; us < LAT_EXACT_US; us++) {
		seen += h->exact[us];
		if (seen > rank) {
			return us;
		}
	}
	for (unsigned i = 0; i < LAT_TAIL_BUCKETS; i++) {
		seen += h->tail[i];
		if (seen > rank) {
			unsigned e = LAT_EXACT_BITS + i / LAT_SUB_BUCKETS;
			uint64_t m = LAT_SUB_BUCKETS + i % LAT_SUB_BUCKETS;
			return m << (e - LAT_SUB_BITS);
		}
	}
	return 0; /* rank >= count */
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
		lat_add(&b->lat, (t - k->batch_start) / 1000);
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
		tpl_set_key(t, rnd(b) % b->keyspace);
		if (fsnp_client_send(k->c, b->opcode, t->body.data + t->key_at,
		                     KEY_LEN, t->body.data, t->body.len, 0,
		                     on_reply, k) == 0) {
			k->outstanding++;
			b->sent++;
		}
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
		b->started = uv_hrtime();
		for (unsigned i = 0; i < b->conns; i++) {
			send_batch(&b->bc[i]);
		}
	}
}

static int run_one(struct bench *b, uint16_t opcode)
{
	struct fsnp_client_options o;
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
	if (lat_init(&b->lat) != 0) {
		fprintf(stderr, "lodebench: out of memory\n");
		lat_free(&b->lat);
		wbuf_free(&b->tpl.body);
		return -1;
	}
	b->sent = b->done = b->errors = 0;
	b->ready_count = 0;
	b->finished = 0;
	b->failed = false;
	uv_loop_init(&b->loop);
	b->bc = calloc(b->conns, sizeof *b->bc);
	for (unsigned i = 0; i < b->conns; i++) {
		b->bc[i].b = b;
		if (fsnp_client_open(&b->loop, &o, on_ready, &b->bc[i],
		                     &b->bc[i].c) != 0) {
			fprintf(stderr, "lodebench: bad options\n");
			return -1;
		}
	}
	while (!b->failed && b->done < b->requests) {
		uv_run(&b->loop, UV_RUN_ONCE);
	}
	for (unsigned i = 0; i < b->conns; i++) {
		fsnp_client_close(b->bc[i].c, NULL, NULL);
	}
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_loop_close(&b->loop);
	free(b->bc);
	wbuf_free(&b->tpl.body);
	if (b->failed) {
		lat_free(&b->lat);
		return -1;
	}
	double secs = (double)(b->finished - b->started) / 1e9;
	uint64_t n = b->lat.count;
	printf("%-3s conns=%-3u pipeline=%-3u requests=%" PRIu64
	       " ops/s=%.0f p50_ms=%.3f p99_ms=%.3f errors=%" PRIu64 "\n",
	       opcode == FSNP_OP_SET ? "SET" : "GET", b->conns, b->pipeline, n,
	       (double)n / secs, (double)lat_at(&b->lat, n / 2) / 1000.0,
	       (double)lat_at(&b->lat, (n * 99) / 100) / 1000.0, b->errors);
	fflush(stdout);
	lat_free(&b->lat);
	return b->errors > 0 ? 1 : 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lodebench kv [--fsnp HOST:PORT] [-c CONNS] [-P "
	           "PIPELINE]\n"
	           "                    [-n REQUESTS] [-d VALUE_BYTES] [-r "
	           "KEYSPACE]\n"
	           "                    [-t set,get] [--password P] "
	           "[--topology]\n"
	           "--topology: send each key to its shard's leader (SHARDS), "
	           "for clusters\n"
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
		if (v == NULL) {
			usage(stderr);
			return 2;
		}
		i++;
		if (strcmp(a, "--fsnp") == 0) {
			const char *colon = strrchr(v, ':');
			if (colon == NULL) {
				usage(stderr);
				return 2;
			}
			snprintf(b.host, sizeof b.host, "%.*s",
			         (int)(colon - v), v);
			b.port = (uint16_t)atoi(colon + 1);
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
