/* nats_bench: acked JetStream publish throughput and latency against a
 * running nats-server, the NATS side of bench/felix-vs-nats.sh.
 *
 *   nats_bench --url nats://HOST:PORT[,nats://HOST:PORT...] [--stream NAME]
 *       [--replicas R]
 *       [--mode batch|sync] [--size BYTES] [--conns C] [--window W]
 *       [--seconds S]
 *
 * Creates (or reuses) a file-storage stream NAME with R replicas on
 * subject NAME.msgs. With several URLs (a cluster whose servers are named
 * n1, n2, ... in that order) the publishers connect to the stream's
 * leader, as Felix publishers do. batch: C connections each keep up to W
 * asynchronous publishes in flight (js_PublishMsgAsync, PublishAsync.MaxPending
 * W); sync: C connections each publish one message and wait for its ack
 * (js_Publish). Every ack's round trip from the publish call is recorded.
 * Prints msgs/s and MB/s acked (10^6 bytes of payload) and p50 / p99 / p999
 * of the ack round trip in one line. Built with libnats (Debian's
 * libnats-dev); see bench/felix-vs-nats.sh for the build command. */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#define MAX_CONNS 64

struct sent {
	natsMsg *msg;
	uint64_t t;
};

struct conn {
	struct opts *o;
	natsConnection *nc;
	jsCtx *js;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* batch: publishes awaiting their ack, oldest first */
	struct sent *ring;
	size_t cap, head, n;
	uint64_t *lat_ns;
	size_t nlat, lat_cap;
	uint64_t acked, errors;
	char error[256];
};

struct opts {
	const char *url;
	const char *stream;
	char subject[128];
	int replicas;
	bool sync;
	size_t size;
	unsigned conns;
	unsigned window;
	unsigned seconds;
	char *payload;
	uint64_t deadline;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: nats_bench --url nats://HOST:PORT [--stream NAME] "
	             "[--replicas R]\n"
	             "       [--mode batch|sync] [--size BYTES] [--conns C] "
	             "[--window W] [--seconds S]\n");
}

/* Records one ack's round trip; called with c->mu held. */
static void record(struct conn *c, uint64_t ns)
{
	if (c->nlat == c->lat_cap) {
		size_t cap = c->lat_cap ? c->lat_cap * 2 : 65536;
		uint64_t *l = realloc(c->lat_ns, cap * sizeof *l);
		if (l == NULL) {
			return; /* keeps counting acks; the histogram stops
			           growing */
		}
		c->lat_ns = l;
		c->lat_cap = cap;
	}
	c->lat_ns[c->nlat++] = ns;
}

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                   void *closure)
{
	struct conn *c = closure;
	uint64_t t = now_ns();
	(void)js;
	pthread_mutex_lock(&c->mu);
	/* Acks of one connection to one stream come back in publish order;
	 * the search only guards against an ack that does not. */
	size_t i;
	for (i = 0; i < c->n; i++) {
		if (c->ring[(c->head + i) % c->cap].msg == msg) {
			break;
		}
	}
	if (i < c->n) {
		struct sent *s = &c->ring[(c->head + i) % c->cap];
		if (pa != NULL) {
			record(c, t - s->t);
			c->acked++;
		} else {
			c->errors++;
			if (pae != NULL && c->error[0] == 0) {
				snprintf(c->error, sizeof c->error,
				         "publish ack: %s",
				         natsStatus_GetText(pae->Err));
			}
		}
		/* Close the gap, keeping the ring oldest first. */
		for (size_t j = i; j > 0; j--) {
			c->ring[(c->head + j) % c->cap] =
			    c->ring[(c->head + j - 1) % c->cap];
		}
		c->head = (c->head + 1) % c->cap;
		c->n--;
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	natsMsg_Destroy(msg);
}

static void *run_sync(struct conn *c)
{
	struct opts *o = c->o;
	while (now_ns() < o->deadline) {
		jsPubAck *pa = NULL;
		jsErrCode jerr = 0;
		uint64_t t0 = now_ns();
		natsStatus s = js_Publish(&pa, c->js, o->subject, o->payload,
		                          (int)o->size, NULL, &jerr);
		uint64_t t1 = now_ns();
		pthread_mutex_lock(&c->mu);
		if (s == NATS_OK) {
			record(c, t1 - t0);
			c->acked++;
		} else {
			c->errors++;
			if (c->error[0] == 0) {
				snprintf(c->error, sizeof c->error,
				         "js_Publish: %s (JetStream error %d)",
				         natsStatus_GetText(s), (int)jerr);
			}
		}
		pthread_mutex_unlock(&c->mu);
		jsPubAck_Destroy(pa);
	}
	return NULL;
}

static void *run_batch(struct conn *c)
{
	struct opts *o = c->o;
	while (now_ns() < o->deadline) {
		natsMsg *msg = NULL;
		natsStatus s = natsMsg_Create(&msg, o->subject, NULL,
		                              o->payload, (int)o->size);
		if (s != NATS_OK) {
			snprintf(c->error, sizeof c->error,
			         "natsMsg_Create: %s", natsStatus_GetText(s));
			break;
		}
		pthread_mutex_lock(&c->mu);
		while (c->n == c->cap) {
			pthread_cond_wait(&c->cv, &c->mu);
		}
		/* Enter it before publishing: its ack may beat the return. */
		natsMsg *key = msg;
		c->ring[(c->head + c->n) % c->cap] =
		    (struct sent){.msg = key, .t = now_ns()};
		c->n++;
		pthread_mutex_unlock(&c->mu);
		s = js_PublishMsgAsync(c->js, &msg, NULL);
		if (s != NATS_OK) {
			/* Not sent (window stalled past StallWait, or the
			 * connection failed): take it back out and retry. */
			pthread_mutex_lock(&c->mu);
			for (size_t i = 0; i < c->n; i++) {
				size_t k = (c->head + c->n - 1 - i) % c->cap;
				if (c->ring[k].msg == key) {
					for (size_t j = c->n - 1 - i;
					     j + 1 < c->n; j++) {
						c->ring[(c->head + j) %
						        c->cap] =
						    c->ring[(c->head + j + 1) %
						            c->cap];
					}
					c->n--;
					break;
				}
			}
			if (s != NATS_TIMEOUT) {
				c->errors++;
				if (c->error[0] == 0) {
					snprintf(c->error, sizeof c->error,
					         "js_PublishMsgAsync: %s",
					         natsStatus_GetText(s));
				}
			}
			pthread_mutex_unlock(&c->mu);
			natsMsg_Destroy(msg);
			if (s != NATS_TIMEOUT) {
				break;
			}
		}
	}
	/* Wait (bounded) for the acks of what is in flight; they count. */
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = 10000;
	js_PublishAsyncComplete(c->js, &po);
	return NULL;
}

static void *run(void *arg)
{
	struct conn *c = arg;
	return c->o->sync ? run_sync(c) : run_batch(c);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int connect_one(struct opts *o, struct conn *c, const char *url)
{
	natsStatus s = natsConnection_ConnectTo(&c->nc, url);
	if (s != NATS_OK) {
		snprintf(c->error, sizeof c->error, "connect to %s: %s", url,
		         natsStatus_GetText(s));
		return -1;
	}
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = 10000; /* sync publish: ms to wait for an ack */
	if (!o->sync) {
		jo.PublishAsync.MaxPending = o->window;
		jo.PublishAsync.AckHandler = on_ack;
		jo.PublishAsync.AckHandlerClosure = c;
	}
	s = natsConnection_JetStream(&c->js, c->nc, &jo);
	if (s != NATS_OK) {
		snprintf(c->error, sizeof c->error, "JetStream context: %s",
		         natsStatus_GetText(s));
		return -1;
	}
	return 0;
}

/* Creates the stream; `leader` gets the name of its leader ("" when the
 * server does not say). */
static int add_stream(struct opts *o, struct conn *c, char *leader,
                      size_t leader_len)
{
	jsStreamConfig cfg;
	jsStreamConfig_Init(&cfg);
	const char *subjects[] = {o->subject};
	cfg.Name = o->stream;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	cfg.Storage = js_FileStorage;
	cfg.Replicas = o->replicas;
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	natsStatus s = js_AddStream(&si, c->js, &cfg, NULL, &jerr);
	if (s != NATS_OK && jerr == 10058) {
		s = js_GetStreamInfo(&si, c->js, o->stream, NULL, &jerr);
	}
	leader[0] = 0;
	if (s == NATS_OK && si != NULL && si->Cluster != NULL &&
	    si->Cluster->Leader != NULL) {
		snprintf(leader, leader_len, "%s", si->Cluster->Leader);
	}
	jsStreamInfo_Destroy(si);
	/* 10058 (a stream by that name exists): earlier runs reuse it. */
	if (s != NATS_OK) {
		fprintf(stderr,
		        "nats_bench: create stream %s (file, R=%d): %s "
		        "(JetStream error %d)\n",
		        o->stream, o->replicas, natsStatus_GetText(s),
		        (int)jerr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.url = "nats://127.0.0.1:4222",
	                 .stream = "bench",
	                 .replicas = 1,
	                 .size = 1024,
	                 .conns = 4,
	                 .window = 1024,
	                 .seconds = 10};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (v == NULL) {
			usage(stderr);
			return 2;
		}
		if (strcmp(a, "--url") == 0) {
			o.url = v;
		} else if (strcmp(a, "--stream") == 0) {
			o.stream = v;
		} else if (strcmp(a, "--replicas") == 0) {
			o.replicas = atoi(v);
		} else if (strcmp(a, "--mode") == 0) {
			if (strcmp(v, "sync") != 0 && strcmp(v, "batch") != 0) {
				usage(stderr);
				return 2;
			}
			o.sync = strcmp(v, "sync") == 0;
		} else if (strcmp(a, "--size") == 0) {
			o.size = (size_t)atol(v);
		} else if (strcmp(a, "--conns") == 0) {
			o.conns = (unsigned)atoi(v);
		} else if (strcmp(a, "--window") == 0) {
			o.window = (unsigned)atoi(v);
		} else if (strcmp(a, "--seconds") == 0) {
			o.seconds = (unsigned)atoi(v);
		} else {
			usage(stderr);
			return 2;
		}
		i++;
	}
	if (o.conns == 0 || o.conns > MAX_CONNS || o.window == 0 ||
	    o.seconds == 0 || o.replicas < 1 || o.size > (1u << 20)) {
		usage(stderr);
		return 2;
	}
	snprintf(o.subject, sizeof o.subject, "%s.msgs", o.stream);
	o.payload = malloc(o.size ? o.size : 1);
	struct conn *cs = calloc(o.conns, sizeof *cs);
	if (o.payload == NULL || cs == NULL) {
		fprintf(stderr, "nats_bench: out of memory\n");
		return 1;
	}
	memset(o.payload, 'p', o.size);
	int rc = 1;
	/* URL list -> urls[]; the stream is created through the first. */
	char *urlbuf = strdup(o.url), *urls[16], *save = NULL;
	unsigned nurls = 0;
	for (char *u = strtok_r(urlbuf, ",", &save); u != NULL && nurls < 16;
	     u = strtok_r(NULL, ",", &save)) {
		urls[nurls++] = u;
	}
	if (nurls == 0) {
		usage(stderr);
		return 2;
	}
	struct conn boot = {.o = &o};
	char leader[64];
	if (connect_one(&o, &boot, urls[0]) != 0) {
		fprintf(stderr, "nats_bench: %s\n", boot.error);
		return 1;
	}
	if (add_stream(&o, &boot, leader, sizeof leader) != 0) {
		return 1;
	}
	jsCtx_Destroy(boot.js);
	natsConnection_Destroy(boot.nc);
	const char *url = urls[0];
	if (nurls > 1 && leader[0] == 'n') {
		unsigned li = (unsigned)atoi(leader + 1);
		if (li >= 1 && li <= nurls) {
			url = urls[li - 1];
		}
	}
	for (unsigned i = 0; i < o.conns; i++) {
		struct conn *c = &cs[i];
		c->o = &o;
		c->cap = (size_t)o.window + 1;
		c->ring = calloc(c->cap, sizeof *c->ring);
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		if (c->ring == NULL) {
			fprintf(stderr, "nats_bench: out of memory\n");
			goto err_conns;
		}
		if (connect_one(&o, c, url) != 0) {
			fprintf(stderr, "nats_bench: %s\n", c->error);
			goto err_conns;
		}
	}
	uint64_t t0 = now_ns();
	o.deadline = t0 + (uint64_t)o.seconds * 1000000000u;
	unsigned started = 0;
	for (; started < o.conns; started++) {
		if (pthread_create(&cs[started].thread, NULL, run,
		                   &cs[started]) != 0) {
			fprintf(stderr, "nats_bench: cannot start a thread\n");
			break;
		}
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(cs[i].thread, NULL);
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	uint64_t acked = 0, errors = 0;
	size_t nlat = 0;
	for (unsigned i = 0; i < o.conns; i++) {
		acked += cs[i].acked;
		errors += cs[i].errors;
		nlat += cs[i].nlat;
		if (cs[i].error[0] != 0) {
			fprintf(stderr, "nats_bench: connection %u: %s\n", i,
			        cs[i].error);
		}
	}
	uint64_t *lat = malloc((nlat ? nlat : 1) * sizeof *lat);
	if (lat == NULL) {
		fprintf(stderr, "nats_bench: out of memory\n");
		goto err_conns;
	}
	size_t k = 0;
	for (unsigned i = 0; i < o.conns; i++) {
		memcpy(lat + k, cs[i].lat_ns, cs[i].nlat * sizeof *lat);
		k += cs[i].nlat;
	}
	qsort(lat, nlat, sizeof *lat, cmp_u64);
	double p50 = nlat ? (double)lat[nlat * 50 / 100] / 1000 : 0;
	double p99 = nlat ? (double)lat[nlat * 99 / 100] / 1000 : 0;
	double p999 = nlat ? (double)lat[nlat * 999 / 1000] / 1000 : 0;
	printf("nats %s: %zu B, R=%d, leader %s at %s, %u conns x window %u: "
	       "%" PRIu64
	       " acks in %.1f s, %.0f msgs/s acked (%.1f MB/s), %" PRIu64
	       " errors; p50 %.0f us, p99 %.0f us, p999 %.0f us\n",
	       o.sync ? "sync" : "batch", o.size, o.replicas,
	       leader[0] ? leader : "-", url, o.conns, o.sync ? 1 : o.window,
	       acked, secs, (double)acked / secs,
	       (double)acked * (double)o.size / 1e6 / secs, errors, p50, p99,
	       p999);
	free(lat);
	rc = errors == 0 && acked > 0 ? 0 : 1;
err_conns:
	for (unsigned i = 0; i < o.conns; i++) {
		jsCtx_Destroy(cs[i].js);
		natsConnection_Destroy(cs[i].nc);
		free(cs[i].ring);
		free(cs[i].lat_ns);
	}
	free(cs);
	free(urlbuf);
	free(o.payload);
	nats_Close();
	return rc;
}
