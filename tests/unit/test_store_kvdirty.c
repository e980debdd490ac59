/* The KV write-back table (store/kvdirty.c) against a plain model, and
 * the store's checkpoints: KV rows reach RocksDB by store_sync, export
 * and store_drain, and never by a flush that misses them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/kvdirty.h"
#include "store/rowcache.h"
#include "tests/unit/store_test_util.h"

#define NKEYS 300

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct model {
	int state[NKEYS]; /* -1 not in the table, 0 deleted, 1 present */
	size_t vlen[NKEYS];
	uint8_t val[NKEYS][40];
};

static size_t key_of(int i, uint8_t *k)
{
	return (size_t)snprintf((char *)k, 32, "key-%d", i * 7919);
}

static void check(const struct kvdirty *d, const struct model *m)
{
	size_t n = 0;

	for (int i = 0; i < NKEYS; i++) {
		uint8_t k[32];
		size_t kl = key_of(i, k), vl;
		const uint8_t *v;
		int rv = kvdirty_get(d, rowcache_hash(k, kl), k, kl, &v, &vl);

		assert_int_equal(rv, m->state[i]);
		if (rv == 1) {
			assert_int_equal(vl, m->vlen[i]);
			assert_memory_equal(v, m->val[i], vl);
		}
		n += m->state[i] >= 0;
	}
	assert_int_equal(d->n, n);
}

static void test_model(void **state)
{
	struct kvdirty d;
	struct model m;
	uint64_t seed = 0x1234567;

	kvdirty_init(&d);
	memset(&m, 0, sizeof m);
	for (int i = 0; i < NKEYS; i++) {
		m.state[i] = -1;
	}
	for (int step = 0; step < 20000; step++) {
		int i = (int)(rnd(&seed) % NKEYS);
		uint8_t k[32];
		size_t kl = key_of(i, k);
		unsigned op = (unsigned)(rnd(&seed) % 100);

		if (op < 70) {
			size_t vl = rnd(&seed) % sizeof m.val[i];
			for (size_t j = 0; j < vl; j++) {
				m.val[i][j] = (uint8_t)rnd(&seed);
			}
			m.vlen[i] = vl;
			m.state[i] = 1;
			kvdirty_put(&d, rowcache_hash(k, kl), k, kl, m.val[i],
			            vl, true, false);
		} else if (op < 95) {
			m.state[i] = 0;
			kvdirty_put(&d, rowcache_hash(k, kl), k, kl, NULL, 0,
			            false, false);
		} else if (op < 98) {
			/* Drop the keys "key-1..." to "key-5...". */
			kvdirty_drop_range(&d, (const uint8_t *)"key-1", 5,
			                   (const uint8_t *)"key-5", 5);
			for (int j = 0; j < NKEYS; j++) {
				uint8_t kj[32];
				size_t l = key_of(j, kj);
				if (memcmp(kj, "key-1", 5) >= 0 &&
				    memcmp(kj, "key-5", l < 5 ? l : 5) < 0) {
					m.state[j] = -1;
				}
			}
		} else {
			/* A checkpoint: the rows leave, sorted; the next
			 * table starts about as large. */
			struct kvdirty moved;
			struct kvrow **rows;

			kvdirty_move(&moved, &d);
			kvdirty_reserve(&d, moved.n);
			size_t nrows;

			rows = kvdirty_sorted(&moved, &nrows);
			assert_int_equal(nrows, moved.n); /* none fresh here */
			for (size_t j = 1; j < nrows; j++) {
				size_t a = rows[j - 1]->klen, b = rows[j]->klen;
				int c =
				    memcmp(kvrow_key(rows[j - 1]),
				           kvrow_key(rows[j]), a < b ? a : b);
				assert_true(c < 0 || (c == 0 && a < b));
			}
			check(&moved, &m);
			free(rows);
			kvdirty_clear(&moved);
			for (int j = 0; j < NKEYS; j++) {
				m.state[j] = -1;
			}
		}
		if (step % 1000 == 0) {
			check(&d, &m);
		}
	}
	check(&d, &m);
	kvdirty_clear(&d);
	assert_int_equal(d.n, 0);
	assert_int_equal(d.cap, 0);
}

/* A value read straight from RocksDB's data column family (no drain). */
static int raw_get(struct tdb *t, const char *key, char *out, size_t cap)
{
	uint8_t k[64];
	size_t kl = 0, len = 0;
	char *err = NULL, *v;
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();

	/* group 1, K_KV, user key */
	k[kl++] = 0;
	k[kl++] = 0;
	k[kl++] = 0;
	k[kl++] = 1;
	k[kl++] = 0x30;
	memcpy(k + kl, key, strlen(key));
	kl += strlen(key);
	v = rocksdb_get_cf(t->db, ro, t->cf[3], (const char *)k, kl, &len,
	                   &err);
	rocksdb_readoptions_destroy(ro);
	assert_null(err);
	if (v == NULL) {
		return 0;
	}
	assert_true(len >= 9 && len - 9 < cap);
	memcpy(out, v + 9, len - 9);
	out[len - 9] = '\0';
	free(v);
	return 1;
}

static void set_key(struct tdb *t, uint64_t now, const char *key,
                    const char *val)
{
	struct store_cmd c;
	struct tres x;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_SET;
	c.key = S(key);
	c.value = S(val);
	tapply(&x, t, 1, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
}

static void get_key(struct tdb *t, uint64_t now, const char *key,
                    const char *want)
{
	struct store_cmd c;
	struct tres x;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_GET;
	c.key = S(key);
	tread(&x, t, 1, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_string_equal(tres_bytes(&x, NULL), want);
	tres_free(&x);
}

static void test_checkpoints(void **state)
{
	struct tdb t;
	uint64_t now = 1000;
	char v[64];

	tdb_open(&t);
	set_key(&t, now, "a", "1");
	set_key(&t, now, "b", "2");
	set_key(&t, now, "a", "3");
	/* Applied, answered from the cache, not yet in RocksDB. */
	get_key(&t, now, "a", "3");
	assert_int_equal(raw_get(&t, "a", v, sizeof v), 0);
	/* A sync (before log compaction) writes them with the flush. */
	assert_int_equal(store_sync(t.s), 0);
	assert_int_equal(raw_get(&t, "a", v, sizeof v), 1);
	assert_string_equal(v, "3");
	assert_int_equal(raw_get(&t, "b", v, sizeof v), 1);
	assert_string_equal(v, "2");

	/* Reads of rows waiting for a checkpoint, with no row cache. */
	store_set_row_cache(t.s, 0);
	set_key(&t, now, "c", "4");
	set_key(&t, now, "a", "5");
	get_key(&t, now, "c", "4");
	get_key(&t, now, "a", "5");
	get_key(&t, now, "b", "2");
	/* store_drain puts them in RocksDB for direct readers. */
	assert_int_equal(raw_get(&t, "c", v, sizeof v), 0);
	assert_int_equal(store_drain(t.s), 0);
	assert_int_equal(raw_get(&t, "c", v, sizeof v), 1);
	assert_string_equal(v, "4");
	assert_int_equal(raw_get(&t, "a", v, sizeof v), 1);
	assert_string_equal(v, "5");
	get_key(&t, now, "a", "5");
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_checkpoints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
