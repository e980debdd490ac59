/* The row cache (store/rowcache.c) on its own, against a reference map
 * under random operations with a small budget; and its bookkeeping in a
 * transaction (store/tx.c): a command rolled back to its save point
 * leaves no trace in the cache, a written batch is published. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
#include "store/rowcache.h"
#include "tests/unit/store_test_util.h"

static const uint8_t *u8(const char *s)
{
	return (const uint8_t *)s;
}

static void test_basic(void **state)
{
	struct rowcache *c;
	const uint8_t *v;
	size_t vl;
	struct rowcache_stats st;

	(void)state;
	assert_int_equal(rowcache_create(1 << 20, &c), 0);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), -1);
	rowcache_put(c, u8("a"), 1, u8("one"), 3, true);
	rowcache_put(c, u8("b"), 1, NULL, 0, false);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), 1);
	assert_int_equal(vl, 3);
	assert_memory_equal(v, "one", 3);
	assert_int_equal(rowcache_get(c, u8("b"), 1, &v, &vl), 0);
	/* same size in place, then a different size */
	rowcache_put(c, u8("a"), 1, u8("two"), 3, true);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), 1);
	assert_memory_equal(v, "two", 3);
	rowcache_put(c, u8("a"), 1, u8("three"), 5, true);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), 1);
	assert_int_equal(vl, 5);
	rowcache_put(c, u8("a"), 1, NULL, 0, false);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), 0);
	rowcache_drop(c, u8("a"), 1);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), -1);

	/* ranges are [begin, end) bytewise */
	rowcache_put(c, u8("k1"), 2, u8("x"), 1, true);
	rowcache_put(c, u8("k2"), 2, u8("x"), 1, true);
	rowcache_put(c, u8("k3"), 2, u8("x"), 1, true);
	rowcache_put(c, u8("k"), 1, u8("x"), 1, true);
	rowcache_drop_range(c, u8("k1"), 2, u8("k3"), 2);
	assert_int_equal(rowcache_get(c, u8("k1"), 2, &v, &vl), -1);
	assert_int_equal(rowcache_get(c, u8("k2"), 2, &v, &vl), -1);
	assert_int_equal(rowcache_get(c, u8("k3"), 2, &v, &vl), 1);
	assert_int_equal(rowcache_get(c, u8("k"), 1, &v, &vl), 1);

	/* a row over 1/64 of the budget is not kept */
	{
		uint8_t *big = calloc(1, 1 << 15);
		rowcache_put(c, u8("big"), 3, big, 1 << 15, true);
		assert_int_equal(rowcache_get(c, u8("big"), 3, &v, &vl), -1);
		free(big);
	}
	rowcache_stats(c, &st);
	assert_int_equal(st.rows, 3); /* b, k3, k */
	assert_true(st.bytes > 0 && st.bytes <= st.max_bytes);
	rowcache_resize(c, 0);
	rowcache_stats(c, &st);
	assert_int_equal(st.rows, 0);
	assert_int_equal(st.bytes, 0);
	rowcache_put(c, u8("a"), 1, u8("one"), 3, true);
	assert_int_equal(rowcache_get(c, u8("a"), 1, &v, &vl), -1);
	rowcache_destroy(c);
}

/* CLOCK keeps rows that are used between evictions: ten hot keys read
 * after every insert survive 500 cold inserts into room for 73 rows. */
static void test_clock(void **state)
{
	struct rowcache *c;
	struct rowcache_stats st;
	const uint8_t *v;
	size_t vl;
	char k[16];

	(void)state;
	/* 73 rows of 128 B: a short row is charged its two slots */
	assert_int_equal(rowcache_create(73 * 128, &c), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(k, sizeof k, "hot%03d", i);
		rowcache_put(c, u8(k), 6, u8("v"), 1, true);
	}
	for (int i = 0; i < 500; i++) {
		snprintf(k, sizeof k, "col%03d", i);
		rowcache_put(c, u8(k), 6, u8("v"), 1, true);
		for (int j = 0; j < 10; j++) {
			snprintf(k, sizeof k, "hot%03d", j);
			assert_int_equal(rowcache_get(c, u8(k), 6, &v, &vl), 1);
		}
	}
	rowcache_stats(c, &st);
	assert_true(st.bytes <= st.max_bytes);
	assert_int_equal(st.rows, 73);
	assert_int_equal(st.evictions, 510 - 73);
	/* the newest cold row is there, the oldest long gone */
	assert_int_equal(rowcache_get(c, u8("col499"), 6, &v, &vl), 1);
	assert_int_equal(rowcache_get(c, u8("col000"), 6, &v, &vl), -1);
	rowcache_destroy(c);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct walked {
	char keys[400][8];
	size_t n;
};

static int collect(void *arg, const uint8_t *key, size_t klen,
                   const uint8_t *val, size_t vlen, bool present)
{
	struct walked *w = arg;

	assert_true(klen < sizeof w->keys[0] && w->n < 400);
	memcpy(w->keys[w->n], key, klen);
	w->keys[w->n][klen] = '\0';
	w->n++;
	return 0;
}

static int count_rows(void *arg, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen, bool present)
{
	size_t *n = arg;
	(void)key;
	(void)klen;
	(void)val;
	(void)vlen;
	(void)present;
	(*n)++;
	return 0;
}

/* Every row is counted by a walk (keys of any length). */
static void check_reachable_any(struct rowcache *c)
{
	struct rowcache_stats st;
	size_t n = 0;

	assert_int_equal(rowcache_walk(c, count_rows, &n), 0);
	rowcache_stats(c, &st);
	assert_int_equal(n, st.rows);
}

/* Every row the table holds is found by its key, and counted. */
static void check_reachable(struct rowcache *c)
{
	static struct walked w;
	struct rowcache_stats st;
	const uint8_t *v;
	size_t vl;

	w.n = 0;
	assert_int_equal(rowcache_walk(c, collect, &w), 0);
	rowcache_stats(c, &st);
	assert_int_equal(w.n, st.rows);
	for (size_t i = 0; i < w.n; i++) {
		assert_int_not_equal(
		    rowcache_get(c, u8(w.keys[i]), strlen(w.keys[i]), &v, &vl),
		    -1);
	}
}

/* Random puts, drops, ranges and resizes against a reference table: a
 * cached answer is always the reference's (evictions only forget). */
static void test_random(void **state)
{
	enum { NK = 300, STEPS = 200000 };
	struct rowcache *c;
	int ref[NK]; /* -1 absent, else value length */
	uint64_t seed = 0x1234567;
	uint8_t val[200];
	char k[16];

	(void)state;
	memset(val, 'v', sizeof val);
	for (int i = 0; i < NK; i++) {
		ref[i] = -2; /* never written: the cache must not know it */
	}
	/* Room for about a hundred rows, short (in their slot) and long. */
	assert_int_equal(rowcache_create(24576, &c), 0);
	for (int s = 0; s < STEPS; s++) {
		int i = (int)(rnd(&seed) % NK), op = (int)(rnd(&seed) % 100);
		const uint8_t *v;
		size_t vl;
		int got;

		snprintf(k, sizeof k, "k%04d", i);
		if (op < 40) {
			int len = (int)(rnd(&seed) % 120);
			bool present = rnd(&seed) % 4 != 0;
			rowcache_put(c, u8(k), 5, val, (size_t)len, present);
			ref[i] = present ? len : -1;
		} else if (op < 45) {
			rowcache_drop(c, u8(k), 5);
			ref[i] = -2;
		} else if (op < 46) {
			int j = (int)(rnd(&seed) % NK);
			char e[16];
			snprintf(e, sizeof e, "k%04d", j);
			rowcache_drop_range(c, u8(k), 5, u8(e), 5);
			for (int x = i; x < j; x++) {
				ref[x] = -2;
			}
		} else if (op < 47) {
			rowcache_resize(c, 4096 + rnd(&seed) % 40960);
		} else {
			got = rowcache_get(c, u8(k), 5, &v, &vl);
			if (got == -1) {
				continue;
			}
			assert_true(ref[i] != -2);
			if (ref[i] == -1) {
				assert_int_equal(got, 0);
			} else {
				assert_int_equal(got, 1);
				assert_int_equal(vl, (size_t)ref[i]);
			}
		}
		{
			struct rowcache_stats st;
			rowcache_stats(c, &st);
			assert_true(st.bytes <= st.max_bytes);
		}
		if (s % 997 == 0) {
			check_reachable(c);
		}
	}
	check_reachable(c);
	rowcache_destroy(c);
}

/* The table grows and shrinks by removals across its whole range. */
static void test_many(void **state)
{
	struct rowcache *c;
	struct rowcache_stats st;
	const uint8_t *v;
	size_t vl;
	char k[16];

	(void)state;
	assert_int_equal(rowcache_create(64 << 20, &c), 0);
	for (int i = 0; i < 20000; i++) {
		snprintf(k, sizeof k, "m%06d", i);
		rowcache_put(c, u8(k), 7, u8(k), 7, true);
	}
	for (int i = 0; i < 20000; i += 3) {
		snprintf(k, sizeof k, "m%06d", i);
		rowcache_drop(c, u8(k), 7);
	}
	rowcache_drop_range(c, u8("m010000"), 7, u8("m015000"), 7);
	for (int i = 0; i < 20000; i++) {
		int want = i % 3 == 0 || (i >= 10000 && i < 15000) ? -1 : 1;
		snprintf(k, sizeof k, "m%06d", i);
		assert_int_equal(rowcache_get(c, u8(k), 7, &v, &vl), want);
		if (want == 1) {
			assert_int_equal(vl, 7);
			assert_memory_equal(v, k, 7);
		}
	}
	rowcache_stats(c, &st);
	assert_int_equal(st.rows, 20000 - 6667 - (5000 - 1666));
	rowcache_destroy(c);
}

/* Rows short enough to live in their slot and longer ones, rewritten
 * across that boundary: every read returns the latest bytes, and the
 * charge follows the row's current form. */
static void test_shapes(void **state)
{
	struct rowcache *c;
	struct rowcache_stats st;
	const uint8_t *v;
	size_t vl;
	uint8_t val[300];
	char k[80];
	uint64_t seed = 42;
	struct {
		size_t len, off;
		bool present;
	} ref[200];

	(void)state;
	for (size_t i = 0; i < sizeof val; i++) {
		val[i] = (uint8_t)(i * 7 + 1);
	}
	assert_int_equal(rowcache_create(1 << 20, &c), 0);
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < 200; i++) {
			size_t len = (size_t)(rnd(&seed) % 256);
			size_t off = (size_t)(rnd(&seed) % 40);
			bool present = rnd(&seed) % 8 != 0;
			/* key lengths 4..63 (fixed per key), values
			 * 0..255 bytes: both sides of the in-slot limit */
			int kl = snprintf(k, sizeof k, "s%03d", i);
			if (i % 2 == 1) {
				memset(k + kl, 'x', (size_t)(i % 60));
				kl += i % 60;
			}
			rowcache_put(c, u8(k), (size_t)kl, val + off, len,
			             present);
			ref[i].len = len;
			ref[i].off = off;
			ref[i].present = present;
			assert_int_equal(
			    rowcache_get(c, u8(k), (size_t)kl, &v, &vl),
			    present ? 1 : 0);
			if (present) {
				assert_int_equal(vl, len);
				assert_memory_equal(v, val + off, len);
			} else {
				assert_int_equal(vl, 0);
			}
		}
		check_reachable_any(c);
		/* every key still holds its latest bytes */
		for (int i = 0; i < 200; i++) {
			int kl = snprintf(k, sizeof k, "s%03d", i);
			if (i % 2 == 1) {
				memset(k + kl, 'x', (size_t)(i % 60));
				kl += i % 60;
			}
			assert_int_equal(
			    rowcache_get(c, u8(k), (size_t)kl, &v, &vl),
			    ref[i].present ? 1 : 0);
			if (ref[i].present) {
				assert_int_equal(vl, ref[i].len);
				assert_memory_equal(v, val + ref[i].off, vl);
			}
		}
	}
	rowcache_stats(c, &st);
	assert_int_equal(st.rows, 200);
	assert_int_equal(st.evictions, 0);
	rowcache_clear(c);
	rowcache_stats(c, &st);
	assert_int_equal(st.rows, 0);
	assert_int_equal(st.bytes, 0);
	rowcache_destroy(c);
}

/* A KV row key of group 3. */
static void kv_row(struct sbuf *k, const char *name)
{
	key_start(k, 3, K_KV);
	sbuf_add(k, name, strlen(name));
}

/* Writes the entry's batch as store/shard.c's commit does: the indexed
 * batch plus the KV rows kept out of it. */
static void batch_write(struct tdb *t, struct tx *tx)
{
	char *err = NULL;
	size_t size;
	const char *data = rocksdb_writebatch_wi_data(t->s->wb, &size);
	rocksdb_writebatch_t *b = rocksdb_writebatch_create_from(data, size);
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();

	(void)tx_split_append(tx, b);
	rocksdb_write(t->db, wo, b, &err);
	assert_null(err);
	rocksdb_writebatch_destroy(b);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_writebatch_wi_clear(t->s->wb);
}

/* A counter row of group 3: cached, but written through the indexed
 * batch. */
static void counter_row(struct sbuf *k, const char *name)
{
	key_start(k, 3, K_COUNTER);
	sbuf_add(k, name, strlen(name));
}

static void expect(struct tx *tx, const struct sbuf *k, const char *want)
{
	struct val v, hold;
	struct store_slice view;
	int rv;

	/* The borrowing read first (it may be the one to miss and fill),
	 * then the copying one: both see the same row. */
	rv = tx_get_view(tx, k, &view, &hold);
	if (want == NULL) {
		assert_int_equal(rv, 0);
	} else {
		assert_int_equal(rv, 1);
		assert_int_equal(view.len, strlen(want));
		assert_memory_equal(view.p, want, view.len);
	}
	val_free(&hold);
	rv = tx_get(tx, k, &v);
	if (want == NULL) {
		assert_int_equal(rv, 0);
	} else {
		assert_int_equal(rv, 1);
		assert_int_equal(v.len, strlen(want));
		assert_memory_equal(v.p, want, v.len);
	}
	val_free(&v);
}

static void test_tx(void **state)
{
	struct tdb t;
	struct tx tx;
	struct sbuf a, b, ca;
	size_t mark;
	char err[256], *rerr = NULL;

	(void)state;
	tdb_open(&t);
	sbuf_init(&a);
	sbuf_init(&b);
	sbuf_init(&ca);
	kv_row(&a, "a");
	kv_row(&b, "b");
	counter_row(&ca, "a");

	/* b is read (cached absent) before an entry writes it */
	tx_init(&tx, t.s, 3, 0, 0, false);
	expect(&tx, &b, NULL);
	tx_fini(&tx);

	tx_init(&tx, t.s, 3, 1, 0, true);
	tx_put(&tx, &a, "1", 1);
	tx_put(&tx, &ca, "c1", 2);
	expect(&tx, &a, "1"); /* read back from the entry's writes */
	expect(&tx, &ca, "c1");
	/* a command writes a and b, then is rolled back */
	mark = tx_pend_mark(&tx);
	rocksdb_writebatch_wi_set_save_point(t.s->wb);
	tx_put(&tx, &a, "2", 1);
	tx_put(&tx, &b, "x", 1);
	tx_put(&tx, &ca, "c2", 2);
	expect(&tx, &a, "2");
	expect(&tx, &b, "x");
	expect(&tx, &ca, "c2");
	rocksdb_writebatch_wi_rollback_to_save_point(t.s->wb, &rerr);
	assert_null(rerr);
	tx_pend_rollback(&tx, mark);
	expect(&tx, &a, "1");
	expect(&tx, &b, NULL);
	expect(&tx, &ca, "c1");
	batch_write(&t, &tx);
	tx_pend_publish(&tx);
	tx_fini(&tx);
	assert_int_equal(store_row_cache_verify(t.s, err, sizeof err), 0);

	/* reads now come from the cache and agree */
	tx_init(&tx, t.s, 3, 0, 0, false);
	expect(&tx, &a, "1");
	expect(&tx, &b, NULL);
	expect(&tx, &ca, "c1");
	tx_fini(&tx);

	/* a delete is published as absent */
	tx_init(&tx, t.s, 3, 2, 0, true);
	tx_del(&tx, &a);
	expect(&tx, &a, NULL);
	batch_write(&t, &tx);
	tx_pend_publish(&tx);
	tx_fini(&tx);
	assert_int_equal(store_row_cache_verify(t.s, err, sizeof err), 0);
	tx_init(&tx, t.s, 3, 0, 0, false);
	expect(&tx, &a, NULL);
	tx_fini(&tx);

	/* a tx that may not use the cache (off the reactor) neither reads
	 * nor fills it */
	{
		struct rowcache_stats before, after;
		store_row_cache_stats(t.s, &before);
		tx_init(&tx, t.s, 3, 0, 0, false);
		tx.cached = false;
		expect(&tx, &b, NULL);
		tx_fini(&tx);
		store_row_cache_stats(t.s, &after);
		assert_int_equal(before.hits, after.hits);
		assert_int_equal(before.misses, after.misses);
	}
	sbuf_free(&a);
	sbuf_free(&b);
	sbuf_free(&ca);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_basic),  cmocka_unit_test(test_clock),
	    cmocka_unit_test(test_random), cmocka_unit_test(test_many),
	    cmocka_unit_test(test_tx),     cmocka_unit_test(test_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
