/* lodebench flow-query: FLOW.QUERY cost over one partition of many flows.
 * It loads -n flows into one partition (FLOW.CREATE_MANY batches of 500;
 * --no-load reuses a partition loaded before with --run), then measures
 * two workloads one request at a time on one connection:
 *
 *   point   FROM runs WHERE partition_key = @pk AND run_id = @id
 *           RETURN RECORD                         (random ids)
 *   page    FROM runs WHERE partition_key = @pk AND type = @t AND state =
 *           'queued' ORDER BY updated_at_ms DESC LIMIT 50 RETURN RECORDS
 *           (paged through its cursors, from the start again at the end)
 *
 * For each: queries per second, latency p50/p99 (send to reply), the mean
 * index entries a query read (usage.scanned_entries: a page reads O(LIMIT)
 * entries whatever the partition holds), and with --server-pid the
 * servers' CPU seconds (utime + stime from /proc/PID/stat) and queries
 * per server CPU-second. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/flow_client.h"
#include "client/lodebench.h"
#include "wire/fsnp_opcode.h"

#define MAX_PIDS 8
#define BATCH 500

struct qbench {
	struct fsnp_sync *s;
	char pk[80];
	char type[64];
	uint64_t flows;
	uint64_t queries;
	int pids[MAX_PIDS];
	unsigned npids;
	uint64_t rng;
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

static double servers_cpu(const struct qbench *b)
{
	double t = 0;
	for (unsigned i = 0; i < b->npids; i++) {
		t += server_cpu(b->pids[i]);
	}
	return t;
}

static int call(struct qbench *b, uint16_t op, struct wbuf *body,
                struct wbuf *out, struct fsnp_val *v)
{
	uint16_t status = 0;
	int rv;
	wbuf_reset(out);
	rv = fsnp_sync_call(b->s, op, NULL, 0, body->data, body->len, 0,
	                    &status, out);
	if (rv != 0) {
		fprintf(stderr, "lodebench: %s\n", fsnp_client_strerror(rv));
		return -1;
	}
	if (flow_client_decode(out->data, out->len, v) != 0) {
		fprintf(stderr, "lodebench: malformed reply\n");
		return -1;
	}
	if (status != FSNP_STATUS_OK) {
		struct fsnp_bytes m = {0};
		if (v->tag == FSNP_MAP) {
			fsnp_map_bin(v, "message", &m);
		}
		fprintf(stderr, "lodebench: status %u: %.*s\n", status,
		        (int)m.len, (const char *)m.ptr);
		return -1;
	}
	return 0;
}

static int load(struct qbench *b)
{
	struct wbuf body, out;
	struct fsnp_writer w;
	struct fsnp_val v;
	int rv = 0;
	wbuf_init(&body);
	wbuf_init(&out);
	for (uint64_t i = 0; i < b->flows && rv == 0; i += BATCH) {
		wbuf_reset(&body);
		fsnp_w_init(&w, &body);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "partition_key");
		fsnp_w_str(&w, b->pk);
		fsnp_w_key(&w, "type");
		fsnp_w_str(&w, b->type);
		fsnp_w_key(&w, "items");
		fsnp_w_array_begin(&w);
		for (uint64_t k = i; k < i + BATCH && k < b->flows; k++) {
			char id[40];
			snprintf(id, sizeof id, "r%08" PRIu64, k);
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "id");
			fsnp_w_str(&w, id);
			fsnp_w_map_end(&w);
		}
		fsnp_w_array_end(&w);
		fsnp_w_map_end(&w);
		if (fsnp_w_finish(&w) != 0 ||
		    call(b, FSNP_OP_FLOW_CREATE_MANY, &body, &out, &v) != 0) {
			rv = -1;
		}
	}
	wbuf_free(&body);
	wbuf_free(&out);
	return rv;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
	return a < c ? -1 : a > c;
}

static uint64_t rnd(struct qbench *b)
{
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return b->rng;
}

static const char *const POINT = "FROM runs WHERE partition_key = @pk AND "
                                 "run_id = @id RETURN RECORD";
static const char *const PAGE =
    "FROM runs WHERE partition_key = @pk AND type = @t AND state = 'queued' "
    "ORDER BY updated_at_ms DESC LIMIT 50 RETURN RECORDS";
static const char *const PAGE_CURSOR =
    "FROM runs WHERE partition_key = @pk AND type = @t AND state = 'queued' "
    "ORDER BY updated_at_ms DESC LIMIT 50 CURSOR @cursor RETURN RECORDS";

/* One workload: `page` pages through cursors, else random point reads. */
static int measure(struct qbench *b, bool page)
{
	uint64_t *lat = calloc(b->queries, sizeof *lat);
	uint64_t entries = 0, records = 0, t0, t1;
	struct wbuf body, out;
	char cursor[4200] = "";
	double cpu0, cpu, secs;
	int rv = 0;

	if (lat == NULL) {
		return -1;
	}
	wbuf_init(&body);
	wbuf_init(&out);
	cpu0 = servers_cpu(b);
	t0 = uv_hrtime();
	for (uint64_t q = 0; q < b->queries && rv == 0; q++) {
		struct fsnp_writer w;
		struct fsnp_val v, u, recs, pg, cur;
		int64_t n = 0;
		uint64_t s0;
		wbuf_reset(&body);
		fsnp_w_init(&w, &body);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "version");
		fsnp_w_str(&w, "FQL1");
		fsnp_w_key(&w, "query");
		fsnp_w_str(&w, !page ? POINT : cursor[0] ? PAGE_CURSOR : PAGE);
		fsnp_w_key(&w, "params");
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "pk");
		fsnp_w_str(&w, b->pk);
		if (page) {
			fsnp_w_key(&w, "t");
			fsnp_w_str(&w, b->type);
			if (cursor[0]) {
				fsnp_w_key(&w, "cursor");
				fsnp_w_str(&w, cursor);
			}
		} else {
			char id[40];
			snprintf(id, sizeof id, "r%08" PRIu64,
			         rnd(b) % b->flows);
			fsnp_w_key(&w, "id");
			fsnp_w_str(&w, id);
		}
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
		if (fsnp_w_finish(&w) != 0) {
			rv = -1;
			break;
		}
		s0 = uv_hrtime();
		if (call(b, FSNP_OP_FLOW_QUERY, &body, &out, &v) != 0) {
			rv = -1;
			break;
		}
		lat[q] = uv_hrtime() - s0;
		if (fsnp_map_get(&v, "usage", &u) == 0 &&
		    fsnp_map_i64(&u, "scanned_entries", &n) == 0) {
			entries += (uint64_t)n;
		}
		if (fsnp_map_get(&v, "records", &recs) == 0) {
			records += recs.as.count;
		}
		cursor[0] = '\0';
		if (page && fsnp_map_get(&v, "page", &pg) == 0 &&
		    fsnp_map_get(&pg, "cursor", &cur) == 0 &&
		    cur.tag == FSNP_BIN && cur.as.bin.len < sizeof cursor) {
			memcpy(cursor, cur.as.bin.ptr, cur.as.bin.len);
			cursor[cur.as.bin.len] = '\0';
		}
	}
	t1 = uv_hrtime();
	cpu = servers_cpu(b) - cpu0;
	if (rv == 0) {
		secs = (double)(t1 - t0) / 1e9;
		qsort(lat, b->queries, sizeof *lat, cmp_u64);
		printf("flow-query %s flows=%" PRIu64 " queries=%" PRIu64
		       " queries/s=%.0f p50_ms=%.3f p99_ms=%.3f "
		       "entries_per_query=%.1f records_per_query=%.1f",
		       page ? "page50" : "point", b->flows, b->queries,
		       (double)b->queries / secs, lat[b->queries / 2] / 1e6,
		       lat[(b->queries * 99) / 100] / 1e6,
		       (double)entries / (double)b->queries,
		       (double)records / (double)b->queries);
		if (b->npids > 0 && cpu > 0) {
			printf(
			    " server_cpu_s=%.2f queries_per_server_cpu_s=%.0f",
			    cpu, (double)b->queries / cpu);
		}
		printf("\n");
		fflush(stdout);
	}
	free(lat);
	wbuf_free(&body);
	wbuf_free(&out);
	return rv;
}

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: lodebench flow-query [--fsnp HOST:PORT] [-n FLOWS] "
	       "[-q QUERIES]\n"
	       "                            [--run NAME] [--no-load] "
	       "[--password P]\n"
	       "                            [--server-pid PID[,PID...]]\n"
	       "Loads FLOWS queued flows into one partition, then measures "
	       "point reads and\n"
	       "LIMIT 50 pages. Defaults: 127.0.0.1:6388, -n 10000 -q 2000.\n");
}

int lodebench_flow_query_main(int argc, char **argv)
{
	struct qbench b;
	struct fsnp_client_options o;
	char host[256] = "127.0.0.1", err[256];
	const char *run = NULL, *password = NULL;
	uint16_t port = 6388;
	bool no_load = false;
	int rv;

	memset(&b, 0, sizeof b);
	b.flows = 10000;
	b.queries = 2000;
	b.rng = 0x9E3779B97F4A7C15ull;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--no-load") == 0) {
			no_load = true;
			continue;
		}
		if (v == NULL) {
			usage(stderr);
			return 2;
		}
		i++;
		if (strcmp(a, "--fsnp") == 0) {
			if (lodebench_split_hostport(v, host, sizeof host,
			                             &port) != 0) {
				usage(stderr);
				return 2;
			}
		} else if (strcmp(a, "-n") == 0) {
			b.flows = strtoull(v, NULL, 10);
		} else if (strcmp(a, "-q") == 0) {
			b.queries = strtoull(v, NULL, 10);
		} else if (strcmp(a, "--run") == 0) {
			run = v;
		} else if (strcmp(a, "--password") == 0) {
			password = v;
		} else if (strcmp(a, "--server-pid") == 0) {
			const char *p = v;
			while (*p != '\0' && b.npids < MAX_PIDS) {
				b.pids[b.npids++] = atoi(p);
				p += strcspn(p, ",");
				p += *p == ',';
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (b.flows == 0 || b.queries == 0 || (no_load && run == NULL)) {
		usage(stderr);
		return 2;
	}
	if (run == NULL) {
		static char name[32];
		snprintf(name, sizeof name, "fq%llx",
		         (unsigned long long)(uv_hrtime() & 0xffffffffu));
		run = name;
	}
	snprintf(b.pk, sizeof b.pk, "%s-part", run);
	snprintf(b.type, sizeof b.type, "%s-t", run);
	memset(&o, 0, sizeof o);
	o.host = host;
	o.port = port;
	o.password = password;
	o.client_name = "lodebench-flow-query";
	o.timeout_ms = 60000;
	if (fsnp_sync_open(&b.s, &o, err, sizeof err) != 0) {
		fprintf(stderr, "lodebench: %s\n", err);
		return 1;
	}
	rv = 0;
	if (!no_load) {
		uint64_t t0 = uv_hrtime();
		rv = load(&b);
		if (rv == 0) {
			printf("flow-query loaded %" PRIu64
			       " flows into one partition in %.1f s\n",
			       b.flows, (double)(uv_hrtime() - t0) / 1e9);
		}
	}
	if (rv == 0) {
		rv = measure(&b, false);
	}
	if (rv == 0) {
		rv = measure(&b, true);
	}
	fsnp_sync_close(b.s);
	return rv == 0 ? 0 : 1;
}
