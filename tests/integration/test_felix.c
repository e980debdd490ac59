/* Integration: the Felix broker over real QUIC against a lodestone --dev
 * cluster (one node now; the tests take the node count from NODES so they
 * extend to three once the cluster layer lands): ordered delivery per
 * shard, keyed routing against stream_shards, resume from offsets across a
 * subscriber reconnect and a node restart, cursor errors, caches with TTL,
 * counters, the JSON compatibility path, and a slow subscriber that cannot
 * grow the broker's memory past its bound. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/integration/felix_util.h"
#include "wire/felix_hash.h"

#define NODES 1

static const char *const dev_args[] = {
    "--dev", "--shards", "4", "--retention-interval-ms", "100", NULL};

static void start(struct harness_cluster *cl, const char *const *extra)
{
	assert_int_equal(
	    harness_cluster_start(cl, NODES, extra ? extra : dev_args, true),
	    0);
}

static void connect_ok(struct fx *f, uv_loop_t *loop,
                       struct harness_cluster *cl)
{
	fx_connect_ok(f, loop, cl, 0);
	assert_int_equal(felix_client_server_flags(f->c), 0x007F);
	/* 0x03FC: everything but topology and redirect on one node. */
	assert_int_equal(felix_client_server_features(f->c), 0x03FC);
}

static void publish_n(struct fx *f, const char *stream, const char *key,
                      int from, int n, const char *tag)
{
	char bufs[64][64];
	const char *p[64];
	for (int done = 0; done < n;) {
		int k = n - done < 64 ? n - done : 64;
		for (int i = 0; i < k; i++) {
			snprintf(bufs[i], sizeof bufs[i], "%s-%d", tag,
			         from + done + i);
			p[i] = bufs[i];
		}
		int rv = fx_publish(f, "default", stream, key, p, (uint32_t)k);
		if (rv != 0) {
			fail_msg("publish: %d %s", rv, f->message);
		}
		done += k;
	}
}

/* Ordered delivery per shard and keyed routing agreeing with
 * stream_shards; resume from an offset after a subscriber reconnect. */
static void test_order_routing_resume(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	(void)state;
	start(&cl, NULL);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "orders", "{\"shards\":3}"), 0);
	uint32_t shards = 0;
	assert_int_equal(fx_stream_shards(&f, "default", "orders", &shards), 0);
	assert_int_equal(shards, 3);
	assert_int_equal(fx_stream_shards(&f, "default", "nope-never", &shards),
	                 0);
	/* dev mode creates on first use: 4 (--auto-create-shards) */
	assert_int_equal(shards, 4);

	static struct fx_sub subs[3];
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	for (uint32_t j = 0; j < 3; j++) {
		assert_int_equal(fx_subscribe(&f, &subs[j], "default", "orders",
		                              j, &earliest),
		                 0);
	}
	/* 12 keys x 25 records, in batches per key. */
	char key[16];
	int expect[3] = {0, 0, 0};
	for (int round = 0; round < 5; round++) {
		for (int k = 0; k < 12; k++) {
			snprintf(key, sizeof key, "k%d", k);
			char tag[32];
			snprintf(tag, sizeof tag, "%s", key);
			publish_n(&f, "orders", key, round * 5, 5, tag);
			expect[felix_hash_shard(3, true, (const uint8_t *)key,
			                        strlen(key))] += 5;
		}
	}
	for (uint32_t j = 0; j < 3; j++) {
		assert_int_equal(fx_sub_wait(&subs[j], (uint64_t)expect[j]), 0);
		fx_spin(&f, 50);
		assert_int_equal(subs[j].n, (uint64_t)expect[j]);
		assert_true(subs[j].has_offsets);
		int next[12] = {0};
		for (uint64_t i = 0; i < subs[j].n; i++) {
			/* contiguous offsets from 0 */
			assert_int_equal(subs[j].offsets[i], i);
			int k, seq;
			assert_int_equal(
			    sscanf(subs[j].payloads[i], "k%d-%d", &k, &seq), 2);
			snprintf(key, sizeof key, "k%d", k);
			/* the key routes to this shard */
			assert_int_equal(felix_hash_shard(3, true,
			                                  (const uint8_t *)key,
			                                  strlen(key)),
			                 j);
			/* per-key order */
			assert_int_equal(seq, next[k]);
			next[k]++;
		}
	}

	/* Reconnect shard 0's subscriber and resume after offset 9. */
	uint64_t total0 = subs[0].n;
	char seen10[64];
	snprintf(seen10, sizeof seen10, "%s", subs[0].payloads[10]);
	fx_sub_free(&subs[0]);
	struct felix_start from = {FELIX_START_OFFSET, 10};
	assert_int_equal(
	    fx_subscribe(&f, &subs[0], "default", "orders", 0, &from), 0);
	assert_int_equal(fx_sub_wait(&subs[0], total0 - 10), 0);
	assert_string_equal(subs[0].payloads[0], seen10);
	assert_int_equal(subs[0].offsets[0], 10);
	/* History joined to live: a new publish arrives once, next offset. */
	for (int k = 0; k < 12; k++) {
		snprintf(key, sizeof key, "k%d", k);
		if (felix_hash_shard(3, true, (const uint8_t *)key,
		                     strlen(key)) == 0) {
			break;
		}
	}
	publish_n(&f, "orders", key, 100, 1, "late");
	assert_int_equal(fx_sub_wait(&subs[0], total0 - 10 + 1), 0);
	fx_spin(&f, 100);
	assert_int_equal(subs[0].n, total0 - 10 + 1);
	assert_int_equal(subs[0].offsets[subs[0].n - 1], total0);

	/* A latest subscription sees only what follows. */
	static struct fx_sub latest;
	assert_int_equal(
	    fx_subscribe(&f, &latest, "default", "orders", 0, NULL), 0);
	publish_n(&f, "orders", key, 101, 2, "new");
	assert_int_equal(fx_sub_wait(&latest, 2), 0);
	assert_int_equal(latest.offsets[0], total0 + 1);
	assert_string_equal(latest.payloads[0], "new-101");

	/* Shard out of range. */
	static struct fx_sub bad;
	assert_int_not_equal(
	    fx_subscribe(&f, &bad, "default", "orders", 3, NULL), 0);
	assert_non_null(strstr(bad.message, "out of range"));

	for (uint32_t j = 0; j < 3; j++) {
		fx_sub_free(&subs[j]);
	}
	fx_sub_free(&latest);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Cursor errors, retention, and resume across a node restart. */
static void test_cursors_retention_restart(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	(void)state;
	start(&cl, NULL);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "durable", "{\"shards\":1}"), 0);
	publish_n(&f, "durable", NULL, 0, 50, "d");

	static struct fx_sub s;
	struct felix_start fut = {FELIX_START_OFFSET, 55};
	assert_int_not_equal(
	    fx_subscribe(&f, &s, "default", "durable", 0, &fut), 0);
	assert_int_equal(s.answer, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
	assert_int_equal(s.cursor.reason, FELIX_CURSOR_IN_FUTURE);
	assert_int_equal(s.cursor.requested, 55);
	assert_int_equal(s.cursor.available, 50);
	/* The tail itself is fine: live from there. */
	struct felix_start tail = {FELIX_START_OFFSET, 50};
	assert_int_equal(fx_subscribe(&f, &s, "default", "durable", 0, &tail),
	                 0);
	fx_sub_free(&s);

	/* Restart: state and offsets survive. */
	fx_close(&f);
	assert_int_equal(harness_node_signal(&cl, 0, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&cl, 0), 0);
	assert_int_equal(harness_node_wait_healthy(&cl, 0, 15000), 0);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	struct felix_start from = {FELIX_START_OFFSET, 20};
	assert_int_equal(fx_subscribe(&f, &s, "default", "durable", 0, &from),
	                 0);
	assert_int_equal(fx_sub_wait(&s, 30), 0);
	assert_string_equal(s.payloads[0], "d-20");
	assert_string_equal(s.payloads[29], "d-49");
	publish_n(&f, "durable", NULL, 50, 3, "d");
	assert_int_equal(fx_sub_wait(&s, 33), 0);
	assert_int_equal(s.offsets[32], 52);
	assert_string_equal(s.payloads[32], "d-52");
	fx_sub_free(&s);

	/* Retention by bytes: the head moves, old offsets are too_old. */
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "short",
	                    "{\"shards\":1,\"retention_bytes\":200}"),
	    0);
	publish_n(&f, "short", NULL, 0, 60, "r"); /* ~4 bytes each x 60 */
	publish_n(&f, "short", NULL, 60, 60, "r");
	struct felix_start zero = {FELIX_START_OFFSET, 0};
	int rv = -1;
	for (int i = 0; i < 100 && rv != 1; i++) {
		rv = fx_subscribe(&f, &s, "default", "short", 0, &zero);
		if (rv == 0) {
			fx_sub_free(&s);
			fx_spin(&f, 100);
			continue;
		}
		rv = 1;
	}
	assert_int_equal(rv, 1);
	assert_int_equal(s.answer, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
	assert_int_equal(s.cursor.reason, FELIX_CURSOR_TOO_OLD);
	assert_true(s.cursor.available > 0);
	/* earliest starts at the head */
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	assert_int_equal(fx_subscribe(&f, &s, "default", "short", 0, &earliest),
	                 0);
	assert_int_equal(fx_sub_wait(&s, 1), 0);
	assert_true(s.offsets[0] >= s.cursor.available || s.offsets[0] > 0);
	fx_sub_free(&s);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Caches with TTL, delete, counters, the JSON publish path. */
static void test_cache_counters_json(void **state)
{
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	char buf[128];
	bool found;
	(void)state;
	start(&cl, NULL);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);

	assert_int_equal(fx_cache_put(&f, "c1", "a", "alpha", false, 0), 0);
	assert_int_equal(fx_cache_get(&f, "c1", "a", buf, sizeof buf, &found),
	                 0);
	assert_true(found);
	assert_string_equal(buf, "alpha");
	assert_int_equal(fx_cache_get(&f, "c1", "zz", buf, sizeof buf, &found),
	                 0);
	assert_false(found);
	assert_int_equal(
	    fx_cache_delete(&f, "c1", "a", buf, sizeof buf, &found), 0);
	assert_true(found);
	assert_string_equal(buf, "alpha");
	assert_int_equal(
	    fx_cache_delete(&f, "c1", "a", buf, sizeof buf, &found), 0);
	assert_false(found);

	/* TTL: present before the deadline (when we get there in time),
	 * gone after it, never gone before it. */
	uint64_t t0 = harness_mono_ms();
	assert_int_equal(fx_cache_put(&f, "c1", "t", "ttl", true, 1500), 0);
	assert_int_equal(fx_cache_get(&f, "c1", "t", buf, sizeof buf, &found),
	                 0);
	if (harness_mono_ms() - t0 < 1400) {
		assert_true(found);
	}
	for (;;) {
		assert_int_equal(
		    fx_cache_get(&f, "c1", "t", buf, sizeof buf, &found), 0);
		if (!found) {
			break;
		}
		assert_true(harness_mono_ms() - t0 < 10000);
		fx_spin(&f, 100);
	}
	assert_true(harness_mono_ms() - t0 >= 1400);

	int64_t v = 0;
	assert_int_equal(fx_counter_get(&f, "c1", "n", &v, &found), 0);
	assert_false(found);
	assert_int_equal(fx_counter_add(&f, "c1", "n", 5, &v), 0);
	assert_int_equal(v, 5);
	assert_int_equal(fx_counter_add(&f, "c1", "n", -7, &v), 0);
	assert_int_equal(v, -2);
	assert_int_equal(fx_counter_get(&f, "c1", "n", &v, &found), 0);
	assert_true(found);
	assert_int_equal(v, -2);
	assert_int_equal(fx_counter_add(&f, "c1", "n", INT64_MAX, &v), 0);
	assert_int_not_equal(fx_counter_add(&f, "c1", "n", 10, &v), 0);
	assert_non_null(strstr(f.message, "overflow"));

	/* JSON publishes land in the same stream and are counted. */
	static struct fx_sub s;
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	const char *p[2] = {"j1", "j2"};
	assert_int_equal(fx_publish_json(&f, "default", "js", NULL, p, 2), 0);
	assert_int_equal(fx_publish(&f, "default", "js", NULL, p, 1), 0);
	assert_int_equal(fx_subscribe(&f, &s, "default", "js", 0, &earliest),
	                 0);
	assert_int_equal(fx_sub_wait(&s, 3), 0);
	assert_string_equal(s.payloads[1], "j2");
	assert_int_equal(fx_metric(&cl, 0,
	                           "lodestone_felix_json_publishes_total{frame="
	                           "\"publish_batch\"}"),
	                 1);
	fx_sub_free(&s);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Under AddressSanitizer a process keeps up to 256 MiB of freed memory in
 * quarantine, so its RSS grows with every byte it allocates and frees until
 * that fills: the memory bound below would measure the quarantine, not the
 * node. The node started here gets a small one. */
#if defined(__SANITIZE_ADDRESS__)
#define FX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FX_ASAN 1
#endif
#endif

static void start_small_quarantine(struct harness_cluster *cl,
                                   const char *const *extra)
{
#ifdef FX_ASAN
	const char *old = getenv("ASAN_OPTIONS");
	char *saved = old != NULL ? strdup(old) : NULL;
	char opts[1024];
	snprintf(opts, sizeof opts, "%s%squarantine_size_mb=8",
	         saved != NULL ? saved : "",
	         saved != NULL && saved[0] != '\0' ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	start(cl, extra);
	if (saved != NULL) {
		setenv("ASAN_OPTIONS", saved, 1);
	} else {
		unsetenv("ASAN_OPTIONS");
	}
	free(saved);
#else
	start(cl, extra);
#endif
}

/* A subscriber that reads nothing: its queue stays within the bound,
 * the broker drops (DropNew), and the gap shows in the offsets. */
static void test_slow_subscriber_bounded(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "2", "--felix-sub-queue-bytes", "65536", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f, g;
	(void)state;
	start_small_quarantine(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(fx_connect(&g, &loop, &cl, 0, "t1", "x", 1), 0);
	static char big[16384];
	memset(big, 'x', sizeof big - 1);
	const char *p[32];
	for (int i = 0; i < 32; i++) {
		p[i] = big;
	}
	/* Phase A, nobody subscribed: what publishing alone costs the
	 * node (Raft log in memory, RocksDB memtables). */
	uint64_t rss0 = fx_rss_kib(cl.nodes[0].pid);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(
		    fx_publish(&f, "default", "flood", NULL, p, 32), 0);
	}
	uint64_t rss1 = fx_rss_kib(cl.nodes[0].pid);
	/* Phase B: the same 32 MiB while a subscriber reads nothing. */
	static struct fx_sub s;
	assert_int_equal(fx_subscribe(&g, &s, "default", "flood", 0, NULL), 0);
	felix_sub_set_paused(s.h, true);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(
		    fx_publish(&f, "default", "flood", NULL, p, 32), 0);
	}
	int64_t queued =
	    fx_metric(&cl, 0, "lodestone_felix_subscriber_queue_bytes");
	int64_t dropped =
	    fx_metric(&cl, 0, "lodestone_felix_events_dropped_total");
	uint64_t rss2 = fx_rss_kib(cl.nodes[0].pid);
	fprintf(stderr,
	        "slow subscriber: queued %lld B, dropped %lld, RSS %llu -> "
	        "%llu (no subscriber) -> %llu KiB (paused subscriber)\n",
	        (long long)queued, (long long)dropped, (unsigned long long)rss0,
	        (unsigned long long)rss1, (unsigned long long)rss2);
	assert_true(queued >= 0 && queued <= 65536 + 32 * 16400);
	assert_true(dropped > 0);
	/* The subscriber costs at most its queue and the QUIC send buffers
	 * (1 MiB per stream), far below the 32 MiB it did not read. */
	assert_true(rss2 < rss1 + (rss1 - rss0) + 16 * 1024);

	/* Reading again: what was kept arrives, and a gap is visible. */
	felix_sub_set_paused(s.h, false);
	fx_spin(&g, 500);
	assert_true(s.n > 0 && s.n < 64 * 32);
	assert_int_equal(s.offsets[0], 64 * 32);
	bool gap = false;
	for (uint64_t i = 1; i < s.n; i++) {
		if (s.offsets[i] != s.offsets[i - 1] + 1) {
			gap = true;
		}
	}
	/* DropNew: what was kept is the oldest; the rest is missing at
	 * the end (or as a gap when the queue drained in between). */
	assert_true(gap || s.offsets[s.n - 1] < 2 * 64 * 32 - 1);
	fx_sub_free(&s);
	fx_close(&g);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Publishes `total` records "m-N" (N from `from`) as batches of 10 with
 * up to 32 batches in flight, running the loop meanwhile. */
struct pump_pub {
	int sent, acked, failed;
	char bufs[32][10][24];
};

static void pump_ack(void *data, int status, const char *message)
{
	struct pump_pub *pp = data;
	(void)message;
	pp->acked++;
	pp->failed += status != 0;
}

static void publish_async(struct fx *f, const char *stream, int from, int total)
{
	static struct pump_pub pp;
	memset(&pp, 0, sizeof pp);
	while (pp.acked * 10 < total && pp.failed == 0) {
		while (pp.sent * 10 < total && pp.sent - pp.acked < 32) {
			struct felix_view v[10];
			char(*b)[24] = pp.bufs[pp.sent % 32];
			for (int i = 0; i < 10; i++) {
				snprintf(b[i], sizeof b[i], "m-%d",
				         from + pp.sent * 10 + i);
				v[i].data = (const uint8_t *)b[i];
				v[i].len = strlen(b[i]);
			}
			assert_int_equal(
			    felix_client_publish(
			        f->c, "default", stream, false, NULL, 0, v, 10,
			        FELIX_ACK_PER_BATCH, pump_ack, &pp),
			    0);
			pp.sent++;
		}
		bool done = false;
		felix_client_run(f->loop, &done, 5);
	}
	assert_int_equal(pp.failed, 0);
}

/* History read off the reactor joins live delivery with no gap and no
 * duplicate while publishes keep landing: subscribers start from earliest
 * (and from an offset) behind a long history, and the stream grows fast
 * while they catch up, so their last history page races with appends. */
static void test_history_joins_live(void **state)
{
	enum { HISTORY = 3000, MORE = 12000, N = HISTORY + MORE };
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	(void)state;
	start(&cl, NULL);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "join", "{\"shards\":1}"), 0);
	publish_n(&f, "join", NULL, 0, HISTORY, "h");

	static struct fx_sub subs[3];
	struct felix_start earliest = {FELIX_START_EARLIEST, 0};
	struct felix_start mid = {FELIX_START_OFFSET, 1234};
	for (int j = 0; j < 3; j++) {
		assert_int_equal(fx_subscribe(&f, &subs[j], "default", "join",
		                              0, j == 2 ? &mid : &earliest),
		                 0);
	}
	publish_async(&f, "join", HISTORY, MORE);
	for (int j = 0; j < 3; j++) {
		uint64_t from = j == 2 ? 1234 : 0;
		assert_int_equal(fx_sub_wait(&subs[j], N - from), 0);
		fx_spin(&f, 50);
		assert_int_equal(subs[j].n, N - from);
		assert_true(subs[j].has_offsets);
		for (uint64_t i = 0; i < subs[j].n; i++) {
			assert_int_equal(subs[j].offsets[i], from + i);
		}
		char want[32];
		snprintf(want, sizeof want, "m-%d", N - 1);
		assert_string_equal(subs[j].payloads[subs[j].n - 1], want);
		fx_sub_free(&subs[j]);
	}
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

static int lodectl(char *out, size_t cap, const struct harness_cluster *cl,
                   const char *a1, const char *a2, const char *a3,
                   const char *a4, const char *a5)
{
	char addr[64];
	snprintf(addr, sizeof addr, "127.0.0.1:%u", cl->nodes[0].admin);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--admin",
	                      addr,
	                      a1,
	                      a2,
	                      a3,
	                      a4,
	                      a5,
	                      NULL};
	return harness_run(argv, out, cap);
}

/* Admin writes are answered with their outcome once the meta group
 * decided: created (201), refused (409), deleted (200), unknown (404);
 * lodectl reports each and exits accordingly. */
static void test_admin_outcomes(void **state)
{
	struct harness_cluster cl;
	char out[8192];
	int st = 0;
	(void)state;

	start(&cl, NULL);
	assert_int_equal(harness_http(cl.nodes[0].admin, "POST",
	                              "/v1/streams/t1/adm/s1", "{\"shards\":3}",
	                              &st, out, sizeof out),
	                 0);
	assert_int_equal(st, 201);
	assert_non_null(strstr(out, "\"created\""));
	assert_non_null(strstr(out, "\"shards\":3"));
	/* Visible at once on the node that answered. */
	assert_int_equal(harness_http(cl.nodes[0].admin, "GET",
	                              "/v1/streams/t1/adm/s1", NULL, &st, out,
	                              sizeof out),
	                 0);
	assert_int_equal(st, 200);
	/* The shard count cannot change. */
	assert_int_equal(harness_http(cl.nodes[0].admin, "POST",
	                              "/v1/streams/t1/adm/s1", "{\"shards\":5}",
	                              &st, out, sizeof out),
	                 0);
	assert_int_equal(st, 409);
	assert_int_equal(harness_http(cl.nodes[0].admin, "DELETE",
	                              "/v1/streams/t1/adm/s1", NULL, &st, out,
	                              sizeof out),
	                 0);
	assert_int_equal(st, 200);
	assert_non_null(strstr(out, "\"deleted\""));
	assert_int_equal(harness_http(cl.nodes[0].admin, "DELETE",
	                              "/v1/streams/t1/adm/nosuch", NULL, &st,
	                              out, sizeof out),
	                 0);
	assert_int_equal(st, 404);

	/* The same through lodectl. */
	assert_int_equal(lodectl(out, sizeof out, &cl, "stream", "create",
	                         "t1/adm/s2", "--shards", "2"),
	                 0);
	assert_non_null(strstr(out, "2 shards"));
	assert_int_equal(lodectl(out, sizeof out, &cl, "stream", "describe",
	                         "t1/adm/s2", NULL, NULL),
	                 0);
	assert_int_equal(lodectl(out, sizeof out, &cl, "cache", "create",
	                         "t1/adm/c1", NULL, NULL),
	                 0);
	assert_int_equal(lodectl(out, sizeof out, &cl, "stream", "delete",
	                         "t1/adm/s2", NULL, NULL),
	                 0);
	assert_int_equal(lodectl(out, sizeof out, &cl, "stream", "delete",
	                         "t1/adm/s2", NULL, NULL),
	                 1);
	assert_non_null(strstr(out, "not found"));
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order_routing_resume),
	    cmocka_unit_test(test_cursors_retention_restart),
	    cmocka_unit_test(test_cache_counters_json),
	    cmocka_unit_test(test_slow_subscriber_bounded),
	    cmocka_unit_test(test_admin_outcomes),
	    cmocka_unit_test(test_history_joins_live),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
