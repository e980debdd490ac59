/* Integration: cache watches of the Felix broker over real QUIC against one
 * lodestone --dev node. Resumed from every offset of a history, a watch
 * yields exactly the changes from there and joins live delivery (a live
 * change is the sentinel that nothing is missing or repeated); retained
 * delivery; refusals; a watch whose history was compacted resnapshots; a
 * flooded watch gets cache_watch_lagged and a re-watch from resume_from is
 * gapless; a retained snapshot larger than the watch queue is streamed with
 * the broker's queue bounded (and ends lagged, gapless from resume_offset,
 * when a key not yet streamed changes meanwhile).
 * Times only bound the waits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tests/integration/felix_util.h"

#define NODES 1

static void start(struct harness_cluster *cl, const char *const *args)
{
	assert_int_equal(harness_cluster_start(cl, NODES, args, true), 0);
}

static void connect_ok(struct fx *f, uv_loop_t *loop,
                       struct harness_cluster *cl)
{
	fx_connect_ok(f, loop, cl, 0);
	assert_int_equal(felix_client_server_features(f->c), 0x03FC);
}

/* ---- cache watches --------------------------------------------------------
 */

/* The change history of a one-shard cache: offset i is change i. */
struct change {
	char key[16];
	char value[32]; /* "" with deleted */
	bool deleted;
};

static struct change hist[512];
static unsigned nhist;

static void put(struct fx *f, const char *cache, const char *key,
                const char *value)
{
	assert_true(nhist < 512);
	int rv = fx_cache_put(f, cache, key, value, false, 0);
	if (rv != 0) {
		fail_msg("cache_put: %d %s", rv, f->message);
	}
	snprintf(hist[nhist].key, sizeof hist[nhist].key, "%s", key);
	snprintf(hist[nhist].value, sizeof hist[nhist].value, "%s", value);
	hist[nhist].deleted = false;
	nhist++;
}

static void del(struct fx *f, const char *cache, const char *key)
{
	char buf[64];
	bool found = false;
	assert_int_equal(
	    fx_cache_delete(f, cache, key, buf, sizeof buf, &found), 0);
	assert_true(found); /* only deletes of present keys are changes */
	snprintf(hist[nhist].key, sizeof hist[nhist].key, "%s", key);
	hist[nhist].value[0] = '\0';
	hist[nhist].deleted = true;
	nhist++;
}

/* Checks that w received exactly the changes [from, upto] of the history
 * (upto is the sentinel) matching key/prefix, in order. */
static void expect_history(const struct fx_watch *w, uint64_t from,
                           uint64_t upto, const char *key)
{
	uint64_t i = 0;
	for (uint64_t o = from; o <= upto; o++) {
		if (key != NULL && strcmp(hist[o].key, key) != 0) {
			continue;
		}
		if (i >= w->n) {
			fail_msg("from %llu: change %llu missing",
			         (unsigned long long)from,
			         (unsigned long long)o);
		}
		assert_int_equal(w->offsets[i], o);
		assert_string_equal(w->keys[i], hist[o].key);
		if (hist[o].deleted) {
			assert_null(w->values[i]);
		} else {
			assert_non_null(w->values[i]);
			assert_string_equal(w->values[i], hist[o].value);
		}
		i++;
	}
	assert_int_equal(w->n, i);
}

static bool saw_offset(const struct fx_watch *w, uint64_t off)
{
	return w->n > 0 && w->offsets[w->n - 1] >= off;
}

/* Waits until the watch delivered the change at `off` (or more). */
static void wait_offset(struct fx_watch *w, uint64_t off)
{
	uint64_t t0 = harness_mono_ms();
	while (!saw_offset(w, off) && !w->ended) {
		assert_true(harness_mono_ms() - t0 < FX_WAIT_MS);
		fx_spin(w->f, 10);
	}
	assert_true(saw_offset(w, off));
}

static void test_watch_resume(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "2", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	static struct fx_watch wp, wk;
	struct felix_watch_request req;
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "hist", "{\"shards\":1}"), 0);
	nhist = 0;
	char k[16], v[32];
	bool live[5] = {false};
	for (int i = 0; i < 40; i++) {
		int key = (i * 3) % 5;
		snprintf(k, sizeof k, "k%d", key);
		if (live[key] && i % 7 == 3) {
			del(&f, "hist", k);
			live[key] = false;
		} else {
			snprintf(v, sizeof v, "v%d", i);
			put(&f, "hist", k, v);
			live[key] = true;
		}
	}
	unsigned tail0 = nhist;

	/* From every offset of the history (and the tail): exactly the
	 * changes from there, then live; a put is the sentinel. */
	for (unsigned from = 0; from <= tail0; from++) {
		unsigned tail = nhist;
		memset(&req, 0, sizeof req);
		req.prefix = "";
		req.has_from_offset = true;
		req.from_offset = from;
		assert_int_equal(fx_watch(&f, &wp, "hist", &req), 0);
		assert_int_equal(wp.info.resume_offset, tail);
		assert_false(wp.info.has_resnapshot);
		assert_false(wp.info.has_retained_count);
		memset(&req, 0, sizeof req);
		req.key = "k1";
		req.has_from_offset = true;
		req.from_offset = from;
		assert_int_equal(fx_watch(&f, &wk, "hist", &req), 0);
		snprintf(v, sizeof v, "s%u", from);
		put(&f, "hist", "k1", v);
		wait_offset(&wp, nhist - 1);
		wait_offset(&wk, nhist - 1);
		expect_history(&wp, from, nhist - 1, NULL);
		expect_history(&wk, from, nhist - 1, "k1");
		fx_watch_free(&wp);
		fx_watch_free(&wk);
	}

	/* Retained: each live key's current value at its offset, then live
	 * changes. */
	memset(&req, 0, sizeof req);
	req.prefix = "k";
	req.retained = true;
	assert_int_equal(fx_watch(&f, &wp, "hist", &req), 0);
	assert_true(wp.info.has_retained_count);
	uint64_t nlive = 0;
	for (int key = 0; key < 5; key++) {
		snprintf(k, sizeof k, "k%d", key);
		for (int o = (int)nhist - 1; o >= 0; o--) {
			if (strcmp(hist[o].key, k) == 0) {
				nlive += hist[o].deleted ? 0 : 1;
				break;
			}
		}
	}
	assert_int_equal(wp.info.retained_count, nlive);
	put(&f, "hist", "k9", "after");
	wait_offset(&wp, nhist - 1);
	assert_int_equal(wp.n, nlive + 1);
	for (uint64_t i = 0; i < nlive; i++) {
		uint64_t o = wp.offsets[i];
		assert_string_equal(wp.keys[i], hist[o].key);
		assert_string_equal(wp.values[i], hist[o].value);
		/* the newest change of its key */
		for (unsigned later = (unsigned)o + 1; later < nhist - 1;
		     later++) {
			assert_string_not_equal(hist[later].key, hist[o].key);
		}
	}
	assert_int_equal(wp.offsets[nlive], nhist - 1);
	fx_watch_free(&wp);
	/* A retained watch of a deleted key: 0, an answer. */
	del(&f, "hist", "k9");
	memset(&req, 0, sizeof req);
	req.key = "k9";
	req.retained = true;
	assert_int_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_true(wk.info.has_retained_count);
	assert_int_equal(wk.info.retained_count, 0);
	fx_watch_free(&wk);

	/* Refusals. */
	memset(&req, 0, sizeof req);
	req.key = "a";
	req.prefix = "b";
	assert_int_not_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_non_null(strstr(wk.message, "exactly one of key and prefix"));
	memset(&req, 0, sizeof req);
	assert_int_not_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_non_null(strstr(wk.message, "exactly one of key and prefix"));
	memset(&req, 0, sizeof req);
	req.key = "a";
	req.retained = true;
	req.has_from_offset = true;
	assert_int_not_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_non_null(strstr(wk.message, "retained and from_offset"));
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = nhist + 5;
	assert_int_not_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_int_equal(wk.answer, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
	assert_int_equal(wk.cursor.reason, FELIX_CURSOR_IN_FUTURE);
	assert_int_equal(wk.cursor.available, nhist);
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_shard = true;
	req.shard = 1;
	assert_int_not_equal(fx_watch(&f, &wk, "hist", &req), 0);
	assert_non_null(strstr(wk.message, "out of range"));
	/* Counters are not cache changes. */
	memset(&req, 0, sizeof req);
	req.prefix = "";
	assert_int_equal(fx_watch(&f, &wp, "hist", &req), 0);
	int64_t sum = 0;
	assert_int_equal(fx_counter_add(&f, "hist", "k1", 5, &sum), 0);
	put(&f, "hist", "k2", "last");
	wait_offset(&wp, nhist - 1);
	assert_int_equal(wp.n, 1);
	fx_watch_free(&wp);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

static void test_watch_resnapshot(void **state)
{
	static const char *const args[] = {"--dev", "--shards",
	                                   "2",     "--felix-cache-history",
	                                   "10",    "--retention-interval-ms",
	                                   "100",   NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f;
	static struct fx_watch w;
	struct felix_watch_request req;
	char k[16], v[32];
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "small", "{\"shards\":1}"), 0);
	nhist = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(k, sizeof k, "k%d", i % 4);
		snprintf(v, sizeof v, "v%d", i);
		put(&f, "small", k, v);
	}
	del(&f, "small", "k3");
	/* Compaction keeps the last 10 changes: from 0 resnapshots. */
	bool resnap = false;
	for (int i = 0; i < 100 && !resnap; i++) {
		memset(&req, 0, sizeof req);
		req.prefix = "";
		req.has_from_offset = true;
		req.from_offset = 0;
		assert_int_equal(fx_watch(&f, &w, "small", &req), 0);
		resnap = w.info.has_resnapshot && w.info.resnapshot;
		if (!resnap) {
			fx_watch_free(&w);
			fx_spin(&f, 100);
		}
	}
	assert_true(resnap);
	assert_int_equal(w.info.resume_offset, nhist);
	/* Current values (k0..k2; k3 is deleted) at their offsets, then
	 * live. */
	put(&f, "small", "z", "live");
	wait_offset(&w, nhist - 1);
	assert_int_equal(w.n, 4);
	for (int i = 0; i < 3; i++) {
		snprintf(k, sizeof k, "k%d", i);
		assert_string_equal(w.keys[i], k);
		assert_int_equal(w.offsets[i], 36 + i);
		snprintf(v, sizeof v, "v%d", 36 + i);
		assert_string_equal(w.values[i], v);
	}
	assert_int_equal(w.offsets[3], nhist - 1);
	fx_watch_free(&w);
	/* Within the kept history: an exact replay. */
	unsigned from = nhist - 5;
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = from;
	assert_int_equal(fx_watch(&f, &w, "small", &req), 0);
	assert_false(w.info.has_resnapshot);
	put(&f, "small", "z", "live2");
	wait_offset(&w, nhist - 1);
	expect_history(&w, from, nhist - 1, NULL);
	fx_watch_free(&w);
	/* A key watch from 0: the key's current value. */
	memset(&req, 0, sizeof req);
	req.key = "k1";
	req.has_from_offset = true;
	req.from_offset = 0;
	assert_int_equal(fx_watch(&f, &w, "small", &req), 0);
	assert_true(w.info.has_resnapshot && w.info.resnapshot);
	put(&f, "small", "k1", "live3");
	wait_offset(&w, nhist - 1);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.offsets[0], 37);
	assert_string_equal(w.values[0], "v37");
	assert_string_equal(w.values[1], "live3");
	fx_watch_free(&w);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Pipelined cache puts of big values. */
struct flood {
	unsigned inflight, done, failed;
};

static void on_flood(void *data, int status, const struct felix_msg *reply,
                     const char *message)
{
	struct flood *fl = data;
	(void)reply;
	(void)message;
	fl->inflight--;
	fl->done++;
	fl->failed += status != 0;
}

static void test_watch_lagged(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "2", "--felix-sub-queue-bytes", "65536", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f, g;
	static struct fx_watch w, w2;
	struct felix_watch_request req;
	(void)state;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	connect_ok(&g, &loop, &cl);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "flood", "{\"shards\":1}"), 0);
	memset(&req, 0, sizeof req);
	req.prefix = "";
	assert_int_equal(fx_watch(&g, &w, "flood", &req), 0);
	assert_int_equal(w.info.resume_offset, 0);
	felix_sub_set_paused(w.h, true);
	/* ~30 MB of events for a watcher reading nothing: more than its
	 * stream window (16 MiB) and queue (64 KiB) hold. */
	static char big[8001];
	memset(big, 'x', sizeof big - 1);
	const unsigned N = 2800;
	struct flood fl = {0, 0, 0};
	char key[16];
	for (unsigned i = 0; i < N;) {
		while (fl.inflight < 64 && i < N) {
			snprintf(key, sizeof key, "f%u", i % 50);
			int rv = felix_client_cache_put(
			    f.c, "default", "flood", key, (const uint8_t *)big,
			    sizeof big - 1, false, 0, on_flood, &fl);
			assert_int_equal(rv, 0);
			fl.inflight++;
			i++;
		}
		bool never = false;
		felix_client_run(&loop, &never, 5);
	}
	uint64_t t0 = harness_mono_ms();
	while (fl.done < N) {
		assert_true(harness_mono_ms() - t0 < 60000);
		fx_spin(&f, 10);
	}
	assert_int_equal(fl.failed, 0);
	assert_true(
	    fx_metric(&cl, 0, "lodestone_felix_cache_watch_lagged_total") >= 1);
	/* Reading again: what was queued, the lag notice, the end. */
	if (w.h != NULL) { /* it may have ended already */
		felix_sub_set_paused(w.h, false);
	}
	t0 = harness_mono_ms();
	while (!w.ended) {
		if (harness_mono_ms() - t0 >= FX_WAIT_MS) {
			fail_msg("watch not ended: lagged %d, %llu changes",
			         (int)w.lagged, (unsigned long long)w.n);
		}
		fx_spin(&g, 10);
	}
	assert_true(w.lagged);
	assert_true(w.n > 0 && w.n < N);
	for (uint64_t i = 0; i < w.n; i++) {
		assert_int_equal(w.offsets[i], i);
		assert_int_equal(w.value_len[i], sizeof big - 1);
	}
	assert_int_equal(w.resume_from, w.n);
	/* Re-watching from resume_from is gapless to the tail. */
	memset(&req, 0, sizeof req);
	req.prefix = "";
	req.has_from_offset = true;
	req.from_offset = w.resume_from;
	assert_int_equal(fx_watch(&g, &w2, "flood", &req), 0);
	assert_int_equal(w2.info.resume_offset, N);
	assert_int_equal(fx_watch_wait(&w2, N - w.resume_from), 0);
	for (uint64_t i = 0; i < w2.n; i++) {
		assert_int_equal(w2.offsets[i], w.resume_from + i);
	}
	fx_spin(&g, 100);
	assert_int_equal(w2.n, N - w.resume_from);
	fx_watch_free(&w2);
	fx_watch_free(&w);
	fx_close(&g);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

/* Puts `n` keys PREFIX%05u with `size`-byte values, pipelined. */
static void put_many(struct fx *f, uv_loop_t *loop, const char *cache,
                     const char *prefix, unsigned n, size_t size)
{
	char *val = malloc(size);
	struct flood fl = {0, 0, 0};
	char key[64];
	assert_non_null(val);
	memset(val, 'v', size);
	for (unsigned i = 0; i < n;) {
		while (fl.inflight < 64 && i < n) {
			snprintf(key, sizeof key, "%s%05u", prefix, i);
			assert_int_equal(
			    felix_client_cache_put(f->c, "default", cache, key,
			                           (const uint8_t *)val, size,
			                           false, 0, on_flood, &fl),
			    0);
			fl.inflight++;
			i++;
		}
		bool never = false;
		felix_client_run(loop, &never, 5);
	}
	uint64_t t0 = harness_mono_ms();
	while (fl.done < n) {
		assert_true(harness_mono_ms() - t0 < 60000);
		fx_spin(f, 10);
	}
	assert_int_equal(fl.failed, 0);
	free(val);
}

/* A retained watch of a prefix holding more than the watch queue bound:
 * streamed in pages, the broker's queue stays bounded, every value once
 * (key order, offsets below resume_offset), then live changes. When a key
 * not yet streamed is written meanwhile, the watch ends lagged at
 * resume_offset and a re-watch from there is gapless. */
static void test_watch_retained_large(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "2", "--felix-sub-queue-bytes", "65536", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	struct fx f, g;
	static struct fx_watch w, w2;
	struct felix_watch_request req;
	char key[64];
	(void)state;
	nhist = 0;
	start(&cl, args);
	uv_loop_init(&loop);
	connect_ok(&f, &loop, &cl);
	assert_int_equal(fx_publish_ready(&f, "default", "warm"), 0);
	connect_ok(&g, &loop, &cl);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "wide", "{\"shards\":1}"), 0);

	/* ~520 KB of values (8x the queue bound), read as they come. */
	const unsigned MID = 400;
	put_many(&f, &loop, "wide", "mid/", MID, 1000);
	put(&f, "wide", "other", "x"); /* not under the prefix */
	memset(&req, 0, sizeof req);
	req.prefix = "mid/";
	req.retained = true;
	assert_int_equal(fx_watch(&g, &w, "wide", &req), 0);
	assert_true(w.info.has_retained_count);
	assert_int_equal(w.info.retained_count, MID);
	uint64_t tail = w.info.resume_offset;
	assert_int_equal(tail, MID + 1);
	put(&f, "wide", "mid/zz", "live");
	assert_int_equal(fx_watch_wait(&w, MID + 1), 0);
	for (unsigned i = 0; i < MID; i++) {
		snprintf(key, sizeof key, "mid/%05u", i);
		assert_string_equal(w.keys[i], key);
		assert_int_equal(w.offsets[i], i);
		assert_int_equal(w.value_len[i], 1000);
	}
	assert_string_equal(w.keys[MID], "mid/zz");
	assert_int_equal(w.offsets[MID], tail);
	fx_spin(&g, 100);
	assert_int_equal(w.n, MID + 1);
	assert_false(w.ended);
	fx_watch_free(&w);

	/* ~26 MB of values for a watcher that stops reading: more than its
	 * stream window (16 MiB) takes, so the snapshot stalls half way. */
	const unsigned BIG = 3000;
	put_many(&f, &loop, "wide", "big/", BIG, 6500);
	memset(&req, 0, sizeof req);
	req.prefix = "big/";
	req.retained = true;
	assert_int_equal(fx_watch(&g, &w, "wide", &req), 0);
	felix_sub_set_paused(w.h, true);
	assert_int_equal(w.info.retained_count, BIG);
	tail = w.info.resume_offset;
	fx_spin(&f, 500);
	/* Bounded: at most the queue bound and a page, not the snapshot. */
	assert_true(
	    fx_metric(&cl, 0, "lodestone_felix_subscriber_queue_bytes") <
	    (1 << 20));
	/* The last key changes before its page is read. */
	snprintf(key, sizeof key, "big/%05u", BIG - 1);
	put(&f, "wide", key, "late");
	felix_sub_set_paused(w.h, false);
	uint64_t t0 = harness_mono_ms();
	while (!w.ended) {
		if (harness_mono_ms() - t0 >= 2 * FX_WAIT_MS) {
			fail_msg("watch not ended: lagged %d, %llu changes",
			         (int)w.lagged, (unsigned long long)w.n);
		}
		fx_spin(&g, 10);
	}
	assert_true(w.lagged);
	assert_int_equal(w.resume_from, tail);
	assert_int_equal(w.n, BIG - 1);
	for (unsigned i = 0; i < BIG - 1; i++) {
		snprintf(key, sizeof key, "big/%05u", i);
		assert_string_equal(w.keys[i], key);
		assert_true(w.offsets[i] < tail);
	}
	/* From resume_from: the change the snapshot could not carry. */
	memset(&req, 0, sizeof req);
	req.prefix = "big/";
	req.has_from_offset = true;
	req.from_offset = w.resume_from;
	assert_int_equal(fx_watch(&g, &w2, "wide", &req), 0);
	assert_int_equal(fx_watch_wait(&w2, 1), 0);
	assert_int_equal(w2.offsets[0], tail);
	snprintf(key, sizeof key, "big/%05u", BIG - 1);
	assert_string_equal(w2.keys[0], key);
	assert_string_equal(w2.values[0], "late");
	fx_watch_free(&w2);
	fx_watch_free(&w);
	fx_close(&g);
	fx_close(&f);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_watch_resume),
	    cmocka_unit_test(test_watch_resnapshot),
	    cmocka_unit_test(test_watch_lagged),
	    cmocka_unit_test(test_watch_retained_large),
	};
	fx_test_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
