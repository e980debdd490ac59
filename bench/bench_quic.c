/* Loopback throughput of the QUIC transport: a quic_server on its own
 * thread and loop, quic_client connections on the main thread, bulk bytes
 * over N connections x S streams in one direction.
 *
 *   bench_quic [--conns N] [--streams S] [--mbytes M] [--chunk KIB]
 *              [--dir up|down]
 *
 * up:   the client writes M MiB in all (split over the streams), the server
 *       counts and answers each stream's FIN with its byte count.
 * down: each client stream asks for its share; the server opens a uni
 *       stream and writes one shared buffer (quic_sbuf) again and again,
 *       the way the broker fans event batches out.
 * Prints MB/s (10^6 bytes per second) and the CPU seconds of the server
 * thread and of the client thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "net/quic.h"
#include "client/quic_client.h"
#include "node/devcert.h"
#include "node/felix/quic_server.h"

struct bench {
	/* parameters */
	int conns;
	int streams;
	uint64_t total;
	size_t chunk;
	bool down;
	char cert[300];
	char key[300];
	/* server thread */
	pthread_t thread;
	uv_loop_t sloop;
	uv_async_t stop;
	struct quic_server srv;
	struct quic_sbuf *sbuf;
	uint64_t srv_bytes;
	double srv_cpu;
	uv_sem_t ready;
	uint16_t port;
	/* client */
	uv_loop_t cloop;
	struct quic_client cli;
	int opened;
	int done;
	uint64_t cli_bytes;
	uint8_t *wbuf;
	bool failed;
};

/* Per-stream progress (client upload or server download). */
struct flow {
	int64_t id;
	uint64_t target;
	uint64_t sent;
	uint64_t got;
	bool fin_sent;
};

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- server ---- */

static void srv_pump(struct quic_conn *c, struct flow *f)
{
	struct bench *b = quic_conn_owner(c);
	while (!f->fin_sent) {
		uint64_t left = f->target - f->sent;
		size_t n = left < b->sbuf->len ? (size_t)left : b->sbuf->len;
		bool fin = n == left;
		int rv =
		    quic_conn_stream_write_sbuf(c, f->id, b->sbuf, 0, n, fin);
		if (rv == QUIC_EAGAIN) {
			return;
		}
		if (rv != 0) {
			fprintf(stderr, "server write: %s\n",
			        quic_strerror(rv));
			return;
		}
		f->sent += n;
		f->fin_sent = fin;
	}
}

static void srv_stream_open(struct quic_conn *c, int64_t sid, bool bidi)
{
	struct flow *f = calloc(1, sizeof *f);
	f->id = sid;
	quic_conn_stream_set_data(c, sid, f);
}

static void srv_stream_data(struct quic_conn *c, int64_t sid,
                            const uint8_t *data, size_t len, bool fin)
{
	struct bench *b = quic_conn_owner(c);
	struct flow *f = quic_conn_stream_get_data(c, sid);
	if (f == NULL) {
		return;
	}
	f->got += len;
	b->srv_bytes += len;
	if (!fin) {
		return;
	}
	if (!b->down) {
		uint8_t reply[8];
		put_u64(reply, f->got);
		quic_conn_stream_write(c, sid, reply, sizeof reply, true);
		return;
	}
	/* A request: 8 bytes naming how much to send back. */
	struct flow *out = calloc(1, sizeof *out);
	quic_conn_stream_shutdown(c, sid);
	if (quic_conn_open_uni_stream(c, &out->id) != 0) {
		fprintf(stderr, "server: cannot open a uni stream\n");
		free(out);
		return;
	}
	out->target =
	    f->got == 8 ? b->total / (uint64_t)(b->conns * b->streams) : 0;
	quic_conn_stream_set_data(c, out->id, out);
	srv_pump(c, out);
}

static void srv_stream_writable(struct quic_conn *c, int64_t sid)
{
	struct flow *f = quic_conn_stream_get_data(c, sid);
	if (f != NULL) {
		srv_pump(c, f);
	}
}

static void srv_stream_close(struct quic_conn *c, int64_t sid, uint64_t e)
{
	free(quic_conn_stream_get_data(c, sid));
	quic_conn_stream_set_data(c, sid, NULL);
}

static void on_srv_closed(struct quic_server *s)
{
	(void)s;
}

static void on_stop(uv_async_t *a)
{
	struct bench *b = a->data;
	quic_server_close(&b->srv, 0, "bench over", on_srv_closed);
	uv_close((uv_handle_t *)a, NULL);
}

static void *server_main(void *arg)
{
	struct bench *b = arg;
	struct quic_server_config cfg;
	char err[256];
	double cpu0;

	uv_loop_init(&b->sloop);
	uv_async_init(&b->sloop, &b->stop, on_stop);
	b->stop.data = b;
	quic_server_config_init(&cfg);
	cfg.port = 0;
	cfg.cert_file = b->cert;
	cfg.key_file = b->key;
	cfg.owner = b;
	cfg.callbacks.on_stream_open = srv_stream_open;
	cfg.callbacks.on_stream_data = srv_stream_data;
	cfg.callbacks.on_stream_writable = srv_stream_writable;
	cfg.callbacks.on_stream_close = srv_stream_close;
	b->sbuf = quic_sbuf_new(b->chunk);
	memset(b->sbuf->data, 0x5a, b->chunk);
	if (quic_server_start(&b->srv, &b->sloop, &cfg, NULL, err,
	                      sizeof err) != 0) {
		fprintf(stderr, "server: %s\n", err);
		exit(1);
	}
	b->port = quic_server_port(&b->srv);
	uv_sem_post(&b->ready);
	cpu0 = thread_cpu();
	uv_run(&b->sloop, UV_RUN_DEFAULT);
	b->srv_cpu = thread_cpu() - cpu0;
	uv_loop_close(&b->sloop);
	quic_sbuf_unref(b->sbuf);
	return NULL;
}

/* ---- client ---- */

static void cli_pump(struct quic_conn *c, struct flow *f)
{
	struct bench *b = quic_conn_owner(c);
	while (!f->fin_sent) {
		uint64_t left = f->target - f->sent;
		size_t n = left < b->chunk ? (size_t)left : b->chunk;
		bool fin = n == left;
		int rv = quic_conn_stream_write(c, f->id, b->wbuf, n, fin);
		if (rv == QUIC_EAGAIN) {
			return;
		}
		if (rv != 0) {
			fprintf(stderr, "client write: %s\n",
			        quic_strerror(rv));
			b->failed = true;
			return;
		}
		f->sent += n;
		f->fin_sent = fin;
	}
}

static void cli_conn_open(struct quic_conn *c)
{
	struct bench *b = quic_conn_owner(c);
	b->opened++;
	for (int i = 0; i < b->streams; i++) {
		struct flow *f = calloc(1, sizeof *f);
		if (quic_conn_open_bidi_stream(c, &f->id) != 0) {
			fprintf(stderr, "client: cannot open a stream\n");
			b->failed = true;
			free(f);
			return;
		}
		quic_conn_stream_set_data(c, f->id, f);
		if (b->down) {
			uint8_t req[8];
			put_u64(req, 1);
			quic_conn_stream_write(c, f->id, req, sizeof req, true);
			f->fin_sent = true;
		} else {
			f->target =
			    b->total / (uint64_t)(b->conns * b->streams);
			cli_pump(c, f);
		}
	}
}

static void cli_stream_open(struct quic_conn *c, int64_t sid, bool bidi)
{
	struct flow *f = calloc(1, sizeof *f);
	f->id = sid;
	quic_conn_stream_set_data(c, sid, f);
}

static void cli_stream_data(struct quic_conn *c, int64_t sid,
                            const uint8_t *data, size_t len, bool fin)
{
	struct bench *b = quic_conn_owner(c);
	struct flow *f = quic_conn_stream_get_data(c, sid);
	if (f == NULL) {
		return;
	}
	f->got += len;
	if (b->down && (sid & 0x3) == 0x3) {
		b->cli_bytes += len;
		if (fin) {
			b->done++;
		}
	} else if (!b->down && fin) {
		b->done++;
	}
}

static void cli_stream_writable(struct quic_conn *c, int64_t sid)
{
	struct flow *f = quic_conn_stream_get_data(c, sid);
	struct bench *b = quic_conn_owner(c);
	if (f != NULL && !b->down) {
		cli_pump(c, f);
	}
}

static void cli_stream_close(struct quic_conn *c, int64_t sid, uint64_t e)
{
	free(quic_conn_stream_get_data(c, sid));
	quic_conn_stream_set_data(c, sid, NULL);
}

static void cli_conn_close(struct quic_conn *c,
                           const struct quic_close_info *info)
{
	struct bench *b = quic_conn_owner(c);
	if (b->done < b->conns * b->streams) {
		fprintf(stderr, "connection closed early: %s\n", info->message);
		b->failed = true;
	}
}

static void on_cli_closed(struct quic_client *cl)
{
	(void)cl;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_quic [--conns N] [--streams S] "
	                "[--mbytes M] [--chunk KIB] [--dir up|down]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct bench b;
	struct quic_client_config cfg;
	struct quic_conn *conn;
	char dir[] = "/tmp/bench_quic.XXXXXX";
	char err[256];
	double t0, t1, cpu0, cpu1;

	b.conns = 1;
	b.streams = 1;
	b.total = 512ull << 20;
	b.chunk = 64 * 1024;
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc) {
			usage();
		}
		if (strcmp(argv[i], "--conns") == 0) {
			b.conns = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--streams") == 0) {
			b.streams = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--mbytes") == 0) {
			b.total = (uint64_t)atoll(argv[++i]) << 20;
		} else if (strcmp(argv[i], "--chunk") == 0) {
			b.chunk = (size_t)atoi(argv[++i]) * 1024;
		} else if (strcmp(argv[i], "--dir") == 0) {
			b.down = strcmp(argv[++i], "down") == 0;
		} else {
			usage();
		}
	}
	if (b.conns < 1 || b.streams < 1 || b.chunk == 0 || b.total == 0) {
		usage();
	}
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(b.cert, sizeof b.cert, "%s/cert.pem", dir);
	snprintf(b.key, sizeof b.key, "%s/key.pem", dir);
	if (devcert_ensure(b.cert, b.key, err, sizeof err) != 0) {
		fprintf(stderr, "devcert: %s\n", err);
		return 1;
	}
	b.wbuf = malloc(b.chunk);
	memset(b.wbuf, 0xa5, b.chunk);
	uv_sem_init(&b.ready, 0);
	pthread_create(&b.thread, NULL, server_main, &b);
	uv_sem_wait(&b.ready);

	uv_loop_init(&b.cloop);
	quic_client_config_init(&cfg);
	cfg.ca_file = b.cert;
	cfg.server_name = "localhost";
	cfg.owner = &b;
	cfg.callbacks.on_conn_open = cli_conn_open;
	cfg.callbacks.on_stream_open = cli_stream_open;
	cfg.callbacks.on_stream_data = cli_stream_data;
	cfg.callbacks.on_stream_writable = cli_stream_writable;
	cfg.callbacks.on_stream_close = cli_stream_close;
	cfg.callbacks.on_conn_close = cli_conn_close;
	if (quic_client_init(&b.cli, &b.cloop, &cfg, err, sizeof err) != 0) {
		fprintf(stderr, "client: %s\n", err);
		return 1;
	}
	t0 = wall();
	cpu0 = thread_cpu();
	for (int i = 0; i < b.conns; i++) {
		if (quic_client_connect(&b.cli, "127.0.0.1", b.port, &conn, err,
		                        sizeof err) != 0) {
			fprintf(stderr, "connect: %s\n", err);
			return 1;
		}
	}
	while (b.done < b.conns * b.streams && !b.failed) {
		uv_run(&b.cloop, UV_RUN_ONCE);
	}
	t1 = wall();
	cpu1 = thread_cpu();
	quic_client_close(&b.cli, on_cli_closed);
	uv_run(&b.cloop, UV_RUN_DEFAULT);
	uv_loop_close(&b.cloop);
	uv_async_send(&b.stop);
	pthread_join(b.thread, NULL);

	uint64_t moved = b.down ? b.cli_bytes : b.srv_bytes;
	printf("dir=%s conns=%d streams=%d chunk=%zuKiB bytes=%llu "
	       "time=%.3fs throughput=%.1f MB/s server_cpu=%.2fs "
	       "client_cpu=%.2fs%s\n",
	       b.down ? "down" : "up", b.conns, b.streams, b.chunk / 1024,
	       (unsigned long long)moved, t1 - t0,
	       (double)moved / (t1 - t0) / 1e6, b.srv_cpu, cpu1 - cpu0,
	       b.failed ? " FAILED" : "");
	unlink(b.cert);
	unlink(b.key);
	rmdir(dir);
	free(b.wbuf);
	return b.failed ? 1 : 0;
}
