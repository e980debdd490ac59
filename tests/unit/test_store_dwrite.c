/* The data writer (store/dwrite.c) on a real RocksDB: order, drain,
 * backpressure, the queued-row filter, failure; and the store over it:
 * direct reads after store_drain, a row-cache miss of a queued row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/dwrite.h"
#include "store/rowcache.h"
#include "store_test_util.h"

#define N_BATCHES 200

static rocksdb_writeoptions_t *nowal(void)
{
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(wo, 1);
	return wo;
}

static char *get(struct tdb *t, const char *k, size_t *len)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	char *err = NULL;
	char *v = rocksdb_get_cf(t->db, ro, t->cf[3], k, strlen(k), len, &err);

	assert_null(err);
	rocksdb_readoptions_destroy(ro);
	return v;
}

/* Batches land in submission order (a later write of a key wins), all of
 * them by the time drain returns, and the filter forgets them. */
static void run_batches(size_t max_bytes)
{
	struct tdb t;
	rocksdb_writeoptions_t *wo = nowal();
	struct dwrite *w;
	struct dwrite_stats st;
	uint64_t hashes[2];
	char k[32], v[32];
	size_t len;
	char *got;

	tdb_open(&t);
	assert_int_equal(dwrite_start(t.db, t.cf[3], wo, max_bytes, &w), 0);
	for (int i = 0; i < N_BATCHES; i++) {
		rocksdb_writebatch_t *b = rocksdb_writebatch_create();

		snprintf(k, sizeof k, "key-%d", i % 10);
		snprintf(v, sizeof v, "value-%d", i);
		rocksdb_writebatch_put_cf(b, t.cf[3], k, strlen(k), v,
		                          strlen(v));
		rocksdb_writebatch_put_cf(b, t.cf[3], "last", 4, v, strlen(v));
		hashes[0] = rowcache_hash((const uint8_t *)k, strlen(k));
		hashes[1] = rowcache_hash((const uint8_t *)"last", 4);
		assert_int_equal(dwrite_submit(w, b, hashes, 2), 0);
	}
	assert_int_equal(dwrite_drain(w), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof k, "key-%d", i);
		snprintf(v, sizeof v, "value-%d", N_BATCHES - 10 + i);
		got = get(&t, k, &len);
		assert_non_null(got);
		assert_int_equal(len, strlen(v));
		assert_memory_equal(got, v, len);
		free(got);
		assert_false(dwrite_maybe_queued(
		    w, rowcache_hash((const uint8_t *)k, strlen(k))));
	}
	snprintf(v, sizeof v, "value-%d", N_BATCHES - 1);
	got = get(&t, "last", &len);
	assert_non_null(got);
	assert_memory_equal(got, v, len);
	free(got);
	dwrite_stats(w, &st);
	assert_int_equal(st.batches, N_BATCHES);
	assert_string_equal(dwrite_error(w), "");
	dwrite_stop(w);
	rocksdb_writeoptions_destroy(wo);
	tdb_close(&t);
}

static void test_order_and_drain(void **state)
{
	(void)state;
	run_batches(0);
}

/* A one-byte bound: each submit waits until the queue is empty, and
 * nothing is lost or reordered. */
static void test_backpressure(void **state)
{
	(void)state;
	run_batches(1);
}

/* A hash stays "maybe queued" from submit until its batch is written. */
static void test_filter_counts(void **state)
{
	struct tdb t;
	rocksdb_writeoptions_t *wo = nowal();
	struct dwrite *w;
	uint64_t h = rowcache_hash((const uint8_t *)"k", 1);

	(void)state;
	tdb_open(&t);
	assert_int_equal(dwrite_start(t.db, t.cf[3], wo, 0, &w), 0);
	assert_false(dwrite_maybe_queued(w, h));
	for (int i = 0; i < 50; i++) {
		rocksdb_writebatch_t *b = rocksdb_writebatch_create();
		rocksdb_writebatch_put_cf(b, t.cf[3], "k", 1, "v", 1);
		assert_int_equal(dwrite_submit(w, b, &h, 1), 0);
		/* Either still queued (counted) or written (then the count
		 * may be 0); after drain it must be 0. */
	}
	assert_int_equal(dwrite_drain(w), 0);
	assert_false(dwrite_maybe_queued(w, h));
	dwrite_stop(w);
	rocksdb_writeoptions_destroy(wo);
	tdb_close(&t);
}

/* Holds the writer in a request until the test lets it go (bounded: 30 s),
 * so that the batches queued meanwhile reach it as one list. */
static atomic_bool gate, entered;

static void nap_ms(void)
{
	struct timespec ts = {0, 1000000};
	nanosleep(&ts, NULL);
}

static int wait_gate(void *arg)
{
	(void)arg;
	atomic_store(&entered, true);
	for (int i = 0; i < 30000 && !atomic_load(&gate); i++) {
		nap_ms();
	}
	return 0;
}

/* Small batches queued together are written merged, with every record
 * (puts, deletes, range deletions) applied in submission order; a large
 * batch between them is written on its own and keeps its place. */
static void test_merged_writes(void **state)
{
	struct tdb t;
	rocksdb_writeoptions_t *wo = nowal();
	struct dwrite *w;
	struct dwrite_req req;
	struct dwrite_stats st;
	char k[32], v[32], *big, *got;
	size_t len;

	(void)state;
	tdb_open(&t);
	assert_int_equal(dwrite_start(t.db, t.cf[3], wo, 0, &w), 0);
	memset(&req, 0, sizeof req);
	req.fn = wait_gate;
	atomic_store(&gate, false);
	atomic_store(&entered, false);
	assert_int_equal(dwrite_submit_req(w, &req), 0);
	for (int i = 0; i < 30000 && !atomic_load(&entered); i++) {
		nap_ms();
	}
	assert_true(atomic_load(&entered));
	big = malloc(40000);
	assert_non_null(big);
	memset(big, 'b', 40000);
	for (int i = 0; i < 100; i++) {
		rocksdb_writebatch_t *b = rocksdb_writebatch_create();
		snprintf(k, sizeof k, "m-%d", i % 7);
		snprintf(v, sizeof v, "v-%d", i);
		rocksdb_writebatch_put_cf(b, t.cf[3], k, strlen(k), v,
		                          strlen(v));
		if (i % 10 == 9) {
			rocksdb_writebatch_delete_cf(b, t.cf[3], "m-3", 3);
		}
		if (i == 50) {
			/* the large one: "big" written, then overwritten
			 * by a later small batch */
			rocksdb_writebatch_put_cf(b, t.cf[3], "big", 3, big,
			                          40000);
		}
		if (i == 60) {
			rocksdb_writebatch_put_cf(b, t.cf[3], "big", 3, "s", 1);
			rocksdb_writebatch_put_cf(b, t.cf[3], "r-1", 3, "x", 1);
		}
		if (i == 70) {
			rocksdb_writebatch_delete_range_cf(b, t.cf[3], "r-", 2,
			                                   "r-~", 3);
		}
		assert_int_equal(dwrite_submit(w, b, NULL, 0), 0);
	}
	atomic_store(&gate, true);
	assert_int_equal(dwrite_wait(w, &req), 0);
	assert_int_equal(dwrite_drain(w), 0);
	/* the last write of each key: i = 93..99 for m-(i % 7) */
	for (int i = 93; i < 100; i++) {
		snprintf(k, sizeof k, "m-%d", i % 7);
		snprintf(v, sizeof v, "v-%d", i);
		got = get(&t, k, &len);
		if (i % 7 == 3) {
			/* m-3 (i = 94) was deleted by i = 99 */
			assert_null(got);
			continue;
		}
		assert_non_null(got);
		assert_int_equal(len, strlen(v));
		assert_memory_equal(got, v, len);
		free(got);
	}
	got = get(&t, "big", &len);
	assert_non_null(got);
	assert_int_equal(len, 1);
	free(got);
	assert_null(get(&t, "r-1", &len));
	dwrite_stats(w, &st);
	assert_int_equal(st.batches, 101);
	/* 0-49 and 51-99 in two runs (the large batch alone between) */
	assert_int_equal(st.merged, 99);
	dwrite_stop(w);
	free(big);
	rocksdb_writeoptions_destroy(wo);
	tdb_close(&t);
}

/* A WriteBatchWithIndex is written as it is, then comes back cleared
 * for the next entry. */
static void test_wi_spares(void **state)
{
	struct tdb t;
	rocksdb_writeoptions_t *wo = nowal();
	struct dwrite *w;
	rocksdb_writebatch_wi_t *wi;
	size_t len;
	char *got;

	(void)state;
	tdb_open(&t);
	assert_int_equal(dwrite_start(t.db, t.cf[3], wo, 0, &w), 0);
	assert_null(dwrite_take_wi(w));
	for (int i = 0; i < 3; i++) {
		char v[8];
		snprintf(v, sizeof v, "w%d", i);
		wi = rocksdb_writebatch_wi_create(0, 1);
		rocksdb_writebatch_wi_put_cf(wi, t.cf[3], "wk", 2, v, 2);
		assert_int_equal(dwrite_submit_wi(w, wi, NULL, 0), 0);
	}
	assert_int_equal(dwrite_drain(w), 0);
	got = get(&t, "wk", &len);
	assert_non_null(got);
	assert_memory_equal(got, "w2", 2);
	free(got);
	for (int i = 0; i < 3; i++) {
		wi = dwrite_take_wi(w);
		assert_non_null(wi);
		assert_int_equal(rocksdb_writebatch_wi_count(wi), 0);
		rocksdb_writebatch_wi_destroy(wi);
	}
	assert_null(dwrite_take_wi(w));
	dwrite_stop(w);
	rocksdb_writeoptions_destroy(wo);
	tdb_close(&t);
}

/* RocksDB refuses a synced write without the WAL: the writer fails, says
 * why, drains report it, and later submits are refused (their batches
 * freed: ASan checks). */
static void test_failure(void **state)
{
	struct tdb t;
	rocksdb_writeoptions_t *wo = nowal();
	struct dwrite *w;
	rocksdb_writebatch_t *b;

	(void)state;
	rocksdb_writeoptions_set_sync(wo, 1);
	tdb_open(&t);
	assert_int_equal(dwrite_start(t.db, t.cf[3], wo, 0, &w), 0);
	for (int i = 0; i < 3; i++) {
		b = rocksdb_writebatch_create();
		rocksdb_writebatch_put_cf(b, t.cf[3], "k", 1, "v", 1);
		/* The first may be accepted before the writer fails. */
		(void)dwrite_submit(w, b, NULL, 0);
	}
	assert_int_equal(dwrite_drain(w), -1);
	assert_non_null(
	    strstr(dwrite_error(w), "write of applied state failed"));
	b = rocksdb_writebatch_create();
	rocksdb_writebatch_put_cf(b, t.cf[3], "k", 1, "v", 1);
	assert_int_equal(dwrite_submit(w, b, NULL, 0), -1);
	{
		rocksdb_writebatch_wi_t *wi =
		    rocksdb_writebatch_wi_create(0, 1);
		rocksdb_writebatch_wi_put_cf(wi, t.cf[3], "k", 1, "v", 1);
		assert_int_equal(dwrite_submit_wi(w, wi, NULL, 0), -1);
	}
	dwrite_stop(w);
	rocksdb_writeoptions_destroy(wo);
	tdb_close(&t);
}

/* With no row cache every read of a just-applied key goes to RocksDB:
 * each must drain the writer first (store_read and the typed read), and
 * a direct read after store_drain sees the last write. */
static void test_store_reads_after_apply(void **state)
{
	struct tdb t;
	char k[32], v[32];
	size_t len;

	(void)state;
	tdb_open(&t);
	store_set_row_cache(t.s, 0);
	for (int i = 0; i < 300; i++) {
		struct store_cmd c;
		struct tres x;
		uint8_t *val;
		size_t vlen;
		bool found;

		snprintf(k, sizeof k, "k%d", i % 7);
		snprintf(v, sizeof v, "v%d", i);
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_KV_SET;
		c.key = S(k);
		c.value = S(v);
		tapply(&x, &t, 1, 1000, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
		c.op = STORE_OP_KV_GET;
		c.value = S("");
		tread(&x, &t, 1, 1000, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_string_equal(tres_bytes(&x, NULL), v);
		tres_free(&x);
		assert_int_equal(
		    store_kv_get(t.s, 1, S(k), 1000, &val, &vlen, &found), 0);
		assert_true(found);
		assert_int_equal(vlen, strlen(v));
		assert_memory_equal(val, v, vlen);
		free(val);
	}
	assert_int_equal(store_drain(t.s), 0);
	/* Group 1's state record, read directly: applied index 300. */
	{
		rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
		const char key[5] = {0, 0, 0, 1, 0x01};
		char *err = NULL;
		char *st = rocksdb_get_cf(t.db, ro, t.cf[3], key, sizeof key,
		                          &len, &err);
		assert_null(err);
		assert_non_null(st);
		assert_true(len >= 8);
		assert_int_equal(((uint8_t)st[6] << 8) | (uint8_t)st[7], 300);
		free(st);
		rocksdb_readoptions_destroy(ro);
	}
	tdb_close(&t);
}

/* store_sync (the flush raft/ waits for before it drops log entries)
 * first drains the writer: once it returns, every entry applied before
 * it is in an SST file, none left in the memtable or the queue. */
static void test_sync_includes_queued(void **state)
{
	struct tdb t;
	uint64_t active = 1;
	char k[32];

	(void)state;
	tdb_open(&t);
	for (int i = 0; i < 200; i++) {
		struct store_cmd c;
		struct tres x;

		snprintf(k, sizeof k, "sync%d", i);
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_KV_SET;
		c.key = S(k);
		c.value = S("v");
		tapply(&x, &t, 1, 1000, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
	}
	assert_int_equal(store_sync(t.s), 0);
	assert_int_equal(
	    rocksdb_property_int_cf(
	        t.db, t.cf[3], "rocksdb.num-entries-active-mem-table", &active),
	    0);
	assert_int_equal(active, 0);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order_and_drain),
	    cmocka_unit_test(test_backpressure),
	    cmocka_unit_test(test_filter_counts),
	    cmocka_unit_test(test_wi_spares),
	    cmocka_unit_test(test_merged_writes),
	    cmocka_unit_test(test_failure),
	    cmocka_unit_test(test_store_reads_after_apply),
	    cmocka_unit_test(test_sync_includes_queued),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
