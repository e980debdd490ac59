/* The ordered write-back rows (store/ordrows.c) against a sorted array:
 * random puts and deletions of keys with shared prefixes (one key a
 * prefix of many others), seeks both ways from random probes, whole walks
 * both ways, node positions that stay put, clear and reuse, and keys
 * whose hashes collide. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/ordrows.h"

/* Bytes from a string literal. */
#define U(s) ((const uint8_t *)(s))

#define KEY_MAX 5
#define VAL_MAX 64
#define MODEL_MAX 1024

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Keys from a four-letter alphabet, 0 to 4 bytes: the empty key is a
 * prefix of all, "a" of "a\0", "aa"... and 0xFF tails sort last. */
static const uint8_t alphabet[4] = {0x00, 'a', 'b', 0xFF};

static size_t random_key(uint64_t *seed, uint8_t *k)
{
	size_t len = rnd(seed) % 5;

	for (size_t i = 0; i < len; i++) {
		k[i] = alphabet[rnd(seed) % 4];
	}
	return len;
}

/* Probes also fall between the keys ('c', 0x80) and past them (5 bytes). */
static size_t random_probe(uint64_t *seed, uint8_t *k)
{
	static const uint8_t more[6] = {0x00, 'a', 'b', 'c', 0x80, 0xFF};
	size_t len = rnd(seed) % (KEY_MAX + 1);

	for (size_t i = 0; i < len; i++) {
		k[i] = more[rnd(seed) % 6];
	}
	return len;
}

typedef uint64_t (*hash_fn)(const uint8_t *k, size_t len);

static uint64_t fnv(const uint8_t *k, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h = (h ^ k[i]) * 0x100000001b3ull;
	}
	return h;
}

/* Many keys, three hashes: every probe run is long. */
static uint64_t weak(const uint8_t *k, size_t len)
{
	(void)k;
	return len % 3;
}

struct mrow {
	uint8_t key[KEY_MAX];
	size_t klen;
	bool present;
	uint8_t val[VAL_MAX];
	size_t vlen;
	const struct ordnode *node; /* where the table put it */
};

struct model {
	struct mrow rows[MODEL_MAX]; /* in key order */
	size_t n;
};

/* The index of the first row >= key. */
static size_t model_lower(const struct model *m, const uint8_t *k, size_t kl)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ordrows_cmp(m->rows[mid].key, m->rows[mid].klen, k, kl) <
		    0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static void model_put(struct model *m, const uint8_t *k, size_t kl,
                      const uint8_t *v, size_t vl, bool present)
{
	size_t i = model_lower(m, k, kl);
	struct mrow *r = &m->rows[i];

	if (i == m->n || ordrows_cmp(r->key, r->klen, k, kl) != 0) {
		assert_true(m->n < MODEL_MAX);
		memmove(r + 1, r, (m->n - i) * sizeof *r);
		m->n++;
		memcpy(r->key, k, kl);
		r->klen = kl;
		r->node = NULL;
	}
	r->present = present;
	r->vlen = present ? vl : 0;
	if (r->vlen > 0) {
		memcpy(r->val, v, vl);
	}
}

static void check_node(const struct ordnode *n, struct mrow *r)
{
	assert_non_null(n);
	assert_int_equal(n->klen, r->klen);
	assert_memory_equal(ordnode_key(n), r->key, r->klen);
	assert_int_equal(n->present, r->present);
	assert_int_equal(n->vlen, r->vlen);
	if (r->vlen > 0) {
		assert_memory_equal(n->val, r->val, r->vlen);
	}
	/* A node lives until ordrows_clear: later puts never move it. */
	if (r->node == NULL) {
		r->node = n;
	}
	assert_ptr_equal(n, r->node);
}

/* Whole walks both ways, then seeks from random probes. */
static void check(const struct ordrows *t, struct model *m, uint64_t *seed)
{
	static const uint8_t past[KEY_MAX + 1] = {0xFF, 0xFF, 0xFF,
	                                          0xFF, 0xFF, 0xFF};
	const struct ordnode *n = ordrows_seek(t, U(""), 0);
	size_t i;

	assert_int_equal(t->n, m->n);
	for (i = 0; i < m->n; i++, n = ordrows_next(n)) {
		check_node(n, &m->rows[i]);
	}
	assert_null(n);
	n = ordrows_seek_prev(t, past, sizeof past);
	for (i = m->n; i > 0; i--, n = ordrows_prev(n)) {
		check_node(n, &m->rows[i - 1]);
	}
	assert_null(n);
	for (int p = 0; p < 8; p++) {
		uint8_t k[KEY_MAX];
		size_t kl = random_probe(seed, k);
		size_t lo = model_lower(m, k, kl);
		bool eq =
		    lo < m->n &&
		    ordrows_cmp(m->rows[lo].key, m->rows[lo].klen, k, kl) == 0;

		n = ordrows_seek(t, k, kl);
		if (lo == m->n) {
			assert_null(n);
		} else {
			check_node(n, &m->rows[lo]);
		}
		n = ordrows_seek_prev(t, k, kl);
		if (eq) {
			check_node(n, &m->rows[lo]);
		} else if (lo == 0) {
			assert_null(n);
		} else {
			check_node(n, &m->rows[lo - 1]);
		}
	}
}

static void run_model(hash_fn hash, uint64_t seed, int steps)
{
	struct ordrows t;
	static struct model m;
	uint8_t v[VAL_MAX];

	assert_int_equal(ordrows_init(&t), 0);
	m.n = 0;
	check(&t, &m, &seed);
	for (int step = 0; step < steps; step++) {
		uint8_t k[KEY_MAX];
		size_t kl = random_key(&seed, k);
		unsigned op = (unsigned)(rnd(&seed) % 1000);

		if (op < 600) {
			/* Empty values, and values growing and shrinking. */
			size_t vl =
			    rnd(&seed) % 4 == 0 ? 0 : rnd(&seed) % VAL_MAX;
			for (size_t j = 0; j < vl; j++) {
				v[j] = (uint8_t)rnd(&seed);
			}
			model_put(&m, k, kl, v, vl, true);
			ordrows_put(&t, hash(k, kl), k, kl, vl > 0 ? v : NULL,
			            vl, true);
		} else if (op < 999) {
			model_put(&m, k, kl, NULL, 0, false);
			/* A deletion's value is ignored. */
			ordrows_put(&t, hash(k, kl), k, kl, v, sizeof v, false);
		} else {
			ordrows_clear(&t);
			assert_int_equal(t.n, 0);
			assert_int_equal(t.bytes, 0);
			m.n = 0;
		}
		check(&t, &m, &seed);
	}
	ordrows_fini(&t);
}

static void test_model(void **state)
{
	(void)state;
	run_model(fnv, 0x5EED0001ull, 6000);
}

static void test_model_colliding(void **state)
{
	(void)state;
	run_model(weak, 0x5EED0002ull, 3000);
}

/* Two keys with one hash are two rows; a deletion of one leaves the
 * other. */
static void test_collision(void **state)
{
	struct ordrows t;
	const struct ordnode *a, *b;

	(void)state;
	assert_int_equal(ordrows_init(&t), 0);
	ordrows_put(&t, 7, U("ab"), 2, U("1"), 1, true);
	ordrows_put(&t, 7, U("a"), 1, U("22"), 2, true);
	assert_int_equal(t.n, 2);
	a = ordrows_seek(&t, U("a"), 1);
	b = ordrows_next(a);
	assert_int_equal(a->klen, 1);
	assert_memory_equal(a->val, "22", 2);
	assert_int_equal(b->klen, 2);
	assert_memory_equal(b->val, "1", 1);
	assert_ptr_equal(ordrows_prev(b), a);
	assert_null(ordrows_prev(a));
	assert_null(ordrows_next(b));
	ordrows_put(&t, 7, U("ab"), 2, NULL, 0, false);
	ordrows_put(&t, 7, U("a"), 1, U("333"), 3, true);
	assert_int_equal(t.n, 2);
	assert_ptr_equal(ordrows_seek(&t, U("a"), 1), a);
	assert_true(a->present);
	assert_int_equal(a->vlen, 3);
	assert_memory_equal(a->val, "333", 3);
	assert_ptr_equal(ordrows_seek_prev(&t, U("b"), 1), b);
	assert_false(b->present);
	assert_int_equal(b->vlen, 0);
	/* Cleared, the same keys start over as new rows. */
	ordrows_clear(&t);
	assert_null(ordrows_seek(&t, U(""), 0));
	ordrows_put(&t, 7, U("a"), 1, U("4"), 1, true);
	ordrows_put(&t, 7, U("ab"), 2, U("5"), 1, true);
	assert_int_equal(t.n, 2);
	a = ordrows_seek(&t, U(""), 0);
	assert_int_equal(a->klen, 1);
	assert_memory_equal(a->val, "4", 1);
	assert_int_equal(ordrows_next(a)->klen, 2);
	assert_memory_equal(ordrows_next(a)->val, "5", 1);
	ordrows_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_model_colliding),
	    cmocka_unit_test(test_collision),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
