/* lodebench kv: FSNP GET/SET throughput and latency, redis-benchmark
 * style: C connections, each sending batches of P requests back to back
 * and waiting for the whole batch before the next (-P semantics); random
 * keys from a keyspace, fixed-size values. Reports ops/s and p50/p99
 * latency (from a batch's send to each reply). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/fsnp_client.h"
#include "client/lodebench.h"
#include "wire/fsnp_opcode.h"

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
	uint64_t *lat_us; /* owned, `requests` entries */
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
		b->lat_us[b->done] = (t - k->batch_start) / 1000;
	}
	b->done++;
	if (--k->outstanding == 0) {
		if (b->done >= b->requests) {
			if (b->finished == 0 && b->done >= b->requests) {
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
	k->batch_start = uv_hrtime();
	for (unsigned i = 0; i < b->pipeline && b->sent < b->requests; i++) {
		char key[32];
		struct wbuf body;
		struct fsnp_writer w;
		int n = snprintf(key, sizeof key, "key:%012" PRIu64,
		                 rnd(b) % b->keyspace);
		wbuf_init(&body);
		fsnp_w_init(&w, &body);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "key");
		fsnp_w_bin(&w, key, (size_t)n);
		if (b->opcode == FSNP_OP_SET) {
			fsnp_w_key(&w, "value");
			fsnp_w_bin(&w, b->value, b->value_size);
		}
		fsnp_w_map_end(&w);
		fsnp_w_finish(&w);
		if (fsnp_client_send(k->c, b->opcode, key, (size_t)n, body.data,
		                     body.len, 0, on_reply, k) == 0) {
			k->outstanding++;
			b->sent++;
		}
		wbuf_free(&body);
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
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
	if (b->failed) {
		return -1;
	}
	double secs = (double)(b->finished - b->started) / 1e9;
	uint64_t n = b->done < b->requests ? b->done : b->requests;
	qsort(b->lat_us, n, sizeof *b->lat_us, cmp_u64);
	printf("%-3s conns=%-3u pipeline=%-3u requests=%" PRIu64
	       " ops/s=%.0f p50_ms=%.3f p99_ms=%.3f errors=%" PRIu64 "\n",
	       opcode == FSNP_OP_SET ? "SET" : "GET", b->conns, b->pipeline, n,
	       (double)n / secs, (double)b->lat_us[n / 2] / 1000.0,
	       (double)b->lat_us[(n * 99) / 100] / 1000.0, b->errors);
	fflush(stdout);
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
	b.lat_us = calloc(b.requests, sizeof *b.lat_us);
	if (b.value == NULL || b.lat_us == NULL) {
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
	free(b.lat_us);
	return rv;
}
