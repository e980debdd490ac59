/* The store's view of rows while some are written back (store/tx.c):
 * Flow rows, whose latest writes wait in the write-back table and in the
 * ordered table (s->ob) that iterators merge with RocksDB, next to rows
 * that go through the entry's batch. A test extension runs little scripts
 * of puts, deletions, point reads and iterator walks (forward, backward,
 * turning around, narrowed) on raw keys; thousands of seeded random
 * entries, reads, checkpoints and restarts are checked against a sorted
 * model after every step. A command that fails rolls its writes back,
 * one that keeps its writes despite the error leaves them. Checkpoints
 * land between the commands of an entry too, and, in a second run, come
 * from another thread all along (as store_sync's do). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/buf.h"
#include "store/ext.h"
#include "store/result.h"
#include "tests/unit/store_test_util.h"

/* Ops of the extension range that flow/ (not linked here) leaves free:
 * a script applied, and a script of reads only. */
#define OP_SCRIPT 0xD0
#define OP_READ 0xD1

#define NGROUPS 3    /* groups 1..3 */
#define KEY_MAX 8    /* group (4) + kind + up to 3 bytes */
#define PROBE_MAX 16 /* seek keys and narrowed prefixes */
#define VAL_MAX 40
#define ROWS_MAX 512 /* per group: 6 kinds x 85 suffixes */
#define STEPS 3000

/* Script ops. */
#define S_PUT 'P'
#define S_DEL 'D'
#define S_GET 'G'
#define S_ITER 'I'
#define S_FAIL 'F' /* an error result: the command's writes roll back */
#define S_KEEP 'K' /* an error result whose writes stand */
/* A checkpoint between two ops (store_drain): as one queued by another
 * thread (store_sync, an export) while an entry applies. */
#define S_CKPT 'C'

/* Walks. */
#define W_FWD 0  /* seek, then next */
#define W_BWD 1  /* seek_prev, then prev */
#define W_ZIG 2  /* seek, then the given moves */
#define W_ZIGB 3 /* seek_prev, then the given moves */

/* The walk's end in the log (keys are at most KEY_MAX bytes). */
#define LOG_END 0xFF

/* Written back and kept in the ordered table: K_FLOW (also cached),
 * K_FLOW_DUE, K_FLOW_IX, K_FLOW_AUTOFLOOR; through the entry's batch:
 * K_CIDX (cached) and 0x51 (neither). */
static const uint8_t kinds[6] = {0x22, 0x40, 0x41, 0x4C, 0x50, 0x51};
static const uint8_t alphabet[4] = {0x00, 'a', 'b', 0xFF};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c != 0) {
		return c;
	}
	return al < bl ? -1 : al > bl ? 1 : 0;
}

static bool has_prefix(const uint8_t *k, size_t kl, const uint8_t *p, size_t pl)
{
	return kl >= pl && memcmp(k, p, pl) == 0;
}

static bool ordered_kind(uint8_t kind)
{
	return kind >= 0x40 && kind <= 0x50;
}

static bool test_kind(uint8_t kind)
{
	return memchr(kinds, kind, sizeof kinds) != NULL;
}

/* The first key after every key starting with p (false when none). */
static bool successor(const uint8_t *p, size_t len, uint8_t *out, size_t *olen)
{
	while (len > 0 && p[len - 1] == 0xFF) {
		len--;
	}
	if (len == 0) {
		return false;
	}
	memcpy(out, p, len);
	out[len - 1]++;
	*olen = len;
	return true;
}

/* --- Scripts ------------------------------------------------------------ */

struct sop {
	uint8_t type;
	const uint8_t *key, *val;
	size_t klen, vlen;
	uint8_t walk;
	const uint8_t *prefix, *from, *narrow, *moves;
	size_t plen, flen, nlen, nmoves;
	bool has_from, has_narrow;
	unsigned limit; /* 0: none */
	/* Forward walks again on the same iterator, each narrowed anew:
	 * `nagain` x (narrow, from, u16 limit) (see sop_again). */
	const uint8_t *again;
	size_t nagain, againlen;
};

/* Parses the op at r (the script is the test's own: well formed). */
static void sop_read(struct rd *r, struct sop *o)
{
	uint8_t flags;

	memset(o, 0, sizeof *o);
	o->type = rd_u8(r);
	switch (o->type) {
	case S_PUT:
		o->klen = rd_u8(r);
		o->key = rd_take(r, o->klen);
		o->vlen = rd_u8(r);
		o->val = rd_take(r, o->vlen);
		break;
	case S_DEL:
	case S_GET:
		o->klen = rd_u8(r);
		o->key = rd_take(r, o->klen);
		break;
	case S_ITER:
		o->walk = rd_u8(r);
		o->plen = rd_u8(r);
		o->prefix = rd_take(r, o->plen);
		flags = rd_u8(r);
		o->has_from = flags & 1;
		o->has_narrow = flags & 2;
		if (o->has_from) {
			o->flen = rd_u8(r);
			o->from = rd_take(r, o->flen);
		}
		if (o->has_narrow) {
			o->nlen = rd_u8(r);
			o->narrow = rd_take(r, o->nlen);
		}
		o->limit = rd_u16(r);
		o->nmoves = rd_u8(r);
		o->moves = rd_take(r, o->nmoves);
		o->nagain = rd_u8(r);
		o->againlen = rd_u16(r);
		o->again = rd_take(r, o->againlen);
		break;
	default:
		break;
	}
}

/* The walks after the first of an iterator: the first one's prefix, each
 * forward with its own narrowed prefix, seek key and limit. */
static void sop_again(const struct sop *o, struct rd *r, struct sop *w)
{
	*w = *o;
	w->walk = W_FWD;
	w->nagain = 0;
	w->has_narrow = true;
	w->nlen = rd_u8(r);
	w->narrow = rd_take(r, w->nlen);
	w->has_from = true;
	w->flen = rd_u8(r);
	w->from = rd_take(r, w->flen);
	w->limit = rd_u16(r);
}

static void log_row(struct sbuf *log, const uint8_t *k, size_t kl,
                    const uint8_t *v, size_t vl)
{
	sbuf_u8(log, (uint8_t)kl);
	sbuf_add(log, k, kl);
	sbuf_u8(log, (uint8_t)vl);
	sbuf_add(log, v, vl);
}

/* --- The extension: scripts on the store's transaction -------------------- */

/* Whether the store is on a row for the walk: under the prefix, and for
 * a forward walk before the narrowed bound. Where the entry's batch takes
 * part (a write transaction over rows that are not all ordered), RocksDB
 * applies the narrowed bound to its own rows only and the walk ends at
 * the bound itself (store_tx_iter_narrow). */
static bool walk_on(struct store_tx_iter *it, const struct sop *o,
                    bool cut_at_bound, const uint8_t *bound, size_t blen)
{
	size_t kl;
	const uint8_t *k;

	if (!store_tx_iter_valid(it)) {
		return false;
	}
	k = store_tx_iter_key(it, &kl);
	assert_true(has_prefix(k, kl, o->prefix, o->plen));
	if (cut_at_bound && key_cmp(k, kl, bound, blen) >= 0) {
		return false;
	}
	return true;
}

/* The kind byte of the store's row. */
static uint8_t key4(struct store_tx_iter *it)
{
	size_t kl;
	const uint8_t *k = store_tx_iter_key(it, &kl);

	assert_true(kl >= 5);
	return k[4];
}

/* Runs a walk on the store; -1 when the iterator failed. */
static void store_walk_it(struct tx *tx, struct store_tx_iter *it,
                          const struct sop *o, struct sbuf *log)
{
	uint8_t bound[PROBE_MAX];
	size_t blen = 0;
	bool cut = false;
	unsigned n = 0;

	if (o->has_narrow) {
		store_tx_iter_narrow(it, o->narrow, o->nlen);
		cut = store_tx_writable(tx) &&
		      (o->plen < 5 || !ordered_kind(o->prefix[4])) &&
		      successor(o->narrow, o->nlen, bound, &blen);
	}
	sbuf_u8(log, S_ITER);
	if (o->walk == W_FWD || o->walk == W_ZIG) {
		(void)store_tx_iter_seek(it, o->has_from ? o->from : NULL,
		                         o->flen);
	} else {
		(void)store_tx_iter_seek_prev(it, o->from, o->flen);
	}
	if (o->walk == W_FWD || o->walk == W_BWD) {
		for (; walk_on(it, o, cut, bound, blen);
		     o->walk == W_FWD ? store_tx_iter_next(it)
		                      : store_tx_iter_prev(it)) {
			size_t kl, vl;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			const uint8_t *v = store_tx_iter_value(it, &vl);

			if (!test_kind(k[4])) {
				continue; /* the group's state row */
			}
			if (o->limit > 0 && n == o->limit) {
				break;
			}
			log_row(log, k, kl, v, vl);
			n++;
		}
	} else {
		/* Past the group's state row, which sorts before the rows. */
		while (walk_on(it, o, false, NULL, 0) && !test_kind(key4(it))) {
			if (o->walk == W_ZIG) {
				store_tx_iter_next(it);
			} else {
				store_tx_iter_prev(it);
			}
		}
		for (size_t m = 0; walk_on(it, o, false, NULL, 0); m++) {
			size_t kl, vl;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			const uint8_t *v = store_tx_iter_value(it, &vl);

			if (!test_kind(k[4])) {
				break; /* stepped back onto the state row */
			}
			log_row(log, k, kl, v, vl);
			if (m == o->nmoves) {
				break;
			}
			if (o->moves[m] == 'n') {
				store_tx_iter_next(it);
			} else {
				store_tx_iter_prev(it);
			}
		}
	}
	sbuf_u8(log, LOG_END);
}

static int store_walk(struct tx *tx, const struct sop *o, struct sbuf *log)
{
	struct store_tx_iter *it = store_tx_iter_open(tx, o->prefix, o->plen);
	struct rd r;

	store_walk_it(tx, it, o, log);
	rd_init(&r, o->again, o->againlen);
	for (size_t i = 0; i < o->nagain; i++) {
		struct sop w;

		sop_again(o, &r, &w);
		store_walk_it(tx, it, &w, log);
	}
	return store_tx_iter_close(it);
}

static bool ext_is_read(uint8_t op)
{
	return op == OP_READ;
}

static int ext_apply(void *data, struct tx *tx, const uint8_t *cmd, size_t len,
                     struct sbuf *res)
{
	struct tdb *t = data;
	struct sbuf log, v;
	struct rd r;
	int rv = 0;

	sbuf_init(&log);
	sbuf_init(&v);
	rd_init(&r, cmd + 2, len - 2);
	while (rd_left(&r) > 0 && rv == 0) {
		struct sop o;
		int found;

		sop_read(&r, &o);
		switch (o.type) {
		case S_PUT:
			store_tx_put(tx, o.key, o.klen, o.val, o.vlen);
			break;
		case S_DEL:
			store_tx_del(tx, o.key, o.klen);
			break;
		case S_GET:
			found = store_tx_get(tx, o.key, o.klen, &v);
			if (found < 0) {
				rv = -1;
				break;
			}
			sbuf_u8(&log, S_GET);
			sbuf_u8(&log, (uint8_t)found);
			if (found) {
				sbuf_u8(&log, (uint8_t)v.len);
				sbuf_add(&log, v.p, v.len);
			}
			break;
		case S_ITER:
			rv = store_walk(tx, &o, &log);
			break;
		case S_CKPT:
			assert_int_equal(store_drain(t->s), 0);
			break;
		case S_FAIL:
		case S_KEEP:
			sbuf_free(&log);
			sbuf_free(&v);
			res_error(res, STORE_ERR, "ERR the script failed");
			return o.type == S_KEEP ? STORE_EXT_KEEP : 0;
		default:
			fail_msg("unknown script op %u", o.type);
		}
	}
	if (rv == 0) {
		res_begin(res, STORE_OK);
		res_bytes(res, log.p, log.len);
	}
	sbuf_free(&log);
	sbuf_free(&v);
	return rv;
}

static void register_ext(struct tdb *t)
{
	struct store_ext x = {
	    .first_op = OP_SCRIPT,
	    .last_op = OP_READ,
	    .is_read = ext_is_read,
	    .apply = ext_apply,
	    .data = t,
	};

	assert_int_equal(store_register_ext(t->s, &x), 0);
}

/* --- The model: each group's rows in key order ---------------------------- */

struct mrow {
	uint8_t key[KEY_MAX];
	uint8_t val[VAL_MAX];
	uint8_t klen, vlen;
};

struct mtab {
	struct mrow rows[ROWS_MAX];
	size_t n;
};

/* The index of the first row >= key. */
static size_t m_lower(const struct mtab *m, const uint8_t *k, size_t kl)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (key_cmp(m->rows[mid].key, m->rows[mid].klen, k, kl) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static bool m_found(const struct mtab *m, size_t i, const uint8_t *k, size_t kl)
{
	return i < m->n && key_cmp(m->rows[i].key, m->rows[i].klen, k, kl) == 0;
}

static void m_put(struct mtab *m, const uint8_t *k, size_t kl, const uint8_t *v,
                  size_t vl)
{
	size_t i = m_lower(m, k, kl);
	struct mrow *r = &m->rows[i];

	if (!m_found(m, i, k, kl)) {
		assert_true(m->n < ROWS_MAX);
		memmove(r + 1, r, (m->n - i) * sizeof *r);
		m->n++;
		memcpy(r->key, k, kl);
		r->klen = (uint8_t)kl;
	}
	memcpy(r->val, v, vl);
	r->vlen = (uint8_t)vl;
}

static void m_del(struct mtab *m, const uint8_t *k, size_t kl)
{
	size_t i = m_lower(m, k, kl);

	if (m_found(m, i, k, kl)) {
		memmove(&m->rows[i], &m->rows[i + 1],
		        (m->n - i - 1) * sizeof m->rows[0]);
		m->n--;
	}
}

static bool m_under(const struct mtab *m, long i, const struct sop *o)
{
	return i >= 0 && (size_t)i < m->n &&
	       has_prefix(m->rows[i].key, m->rows[i].klen, o->prefix, o->plen);
}

static void m_log(const struct mtab *m, long i, struct sbuf *log)
{
	const struct mrow *r = &m->rows[i];

	log_row(log, r->key, r->klen, r->val, r->vlen);
}

static void m_walk(const struct mtab *m, const struct sop *o, struct sbuf *log)
{
	uint8_t bound[PROBE_MAX];
	size_t blen = 0;
	bool bounded =
	    o->has_narrow && successor(o->narrow, o->nlen, bound, &blen);
	long i;
	unsigned n = 0;

	sbuf_u8(log, S_ITER);
	if (o->walk == W_FWD || o->walk == W_ZIG) {
		i = o->has_from ? (long)m_lower(m, o->from, o->flen)
		                : (long)m_lower(m, o->prefix, o->plen);
	} else {
		/* The last row <= from. */
		i = (long)m_lower(m, o->from, o->flen);
		if (!m_found(m, (size_t)i, o->from, o->flen)) {
			i--;
		}
	}
	if (o->walk == W_FWD || o->walk == W_BWD) {
		for (; m_under(m, i, o); i += o->walk == W_FWD ? 1 : -1) {
			const struct mrow *r = &m->rows[i];

			if (o->walk == W_FWD && bounded &&
			    key_cmp(r->key, r->klen, bound, blen) >= 0) {
				break;
			}
			if (o->limit > 0 && n == o->limit) {
				break;
			}
			m_log(m, i, log);
			n++;
		}
	} else {
		for (size_t k = 0; m_under(m, i, o); k++) {
			m_log(m, i, log);
			if (k == o->nmoves) {
				break;
			}
			i += o->moves[k] == 'n' ? 1 : -1;
		}
	}
	sbuf_u8(log, LOG_END);
}

/* Runs a script on the model; returns whether it failed and whether its
 * writes stand. */
static void m_run(struct mtab *m, const uint8_t *script, size_t len,
                  struct sbuf *log, bool *failed)
{
	static struct mtab before;
	struct rd r, ra;

	before = *m;
	*failed = false;
	rd_init(&r, script, len);
	while (rd_left(&r) > 0) {
		struct sop o;
		size_t i;

		sop_read(&r, &o);
		switch (o.type) {
		case S_PUT:
			m_put(m, o.key, o.klen, o.val, o.vlen);
			break;
		case S_DEL:
			m_del(m, o.key, o.klen);
			break;
		case S_GET:
			i = m_lower(m, o.key, o.klen);
			sbuf_u8(log, S_GET);
			sbuf_u8(log, m_found(m, i, o.key, o.klen));
			if (m_found(m, i, o.key, o.klen)) {
				sbuf_u8(log, m->rows[i].vlen);
				sbuf_add(log, m->rows[i].val, m->rows[i].vlen);
			}
			break;
		case S_ITER:
			m_walk(m, &o, log);
			rd_init(&ra, o.again, o.againlen);
			for (size_t j = 0; j < o.nagain; j++) {
				struct sop w;

				sop_again(&o, &ra, &w);
				m_walk(m, &w, log);
			}
			break;
		case S_FAIL:
			*m = before;
			*failed = true;
			return;
		case S_KEEP:
			*failed = true;
			return;
		case S_CKPT:
			break;
		default:
			fail();
		}
	}
}

/* --- Random scripts --------------------------------------------------- */

struct world {
	struct tdb t;
	struct mtab model[NGROUPS + 1]; /* [g]: group g's rows */
	uint64_t seed;
	int step;
	uint64_t now;
};

static size_t random_key(struct world *w, const struct mtab *m, uint32_t g,
                         uint8_t *k)
{
	size_t len;

	if (m->n > 0 && rnd(&w->seed) % 2 == 0) {
		const struct mrow *r = &m->rows[rnd(&w->seed) % m->n];
		memcpy(k, r->key, r->klen);
		return r->klen;
	}
	be_put32(k, g);
	k[4] = kinds[rnd(&w->seed) % sizeof kinds];
	len = 5 + rnd(&w->seed) % 4;
	for (size_t i = 5; i < len; i++) {
		k[i] = alphabet[rnd(&w->seed) % sizeof alphabet];
	}
	return len;
}

static size_t random_prefix(struct world *w, uint32_t g, uint8_t *p)
{
	unsigned r = (unsigned)(rnd(&w->seed) % 100);
	size_t len;

	be_put32(p, g);
	if (r < 15) {
		return 4; /* the whole group: batch and ordered rows */
	}
	p[4] = kinds[rnd(&w->seed) % sizeof kinds];
	len = r < 60 ? 5 : 6 + rnd(&w->seed) % 2;
	for (size_t i = 5; i < len; i++) {
		p[i] = alphabet[rnd(&w->seed) % sizeof alphabet];
	}
	return len;
}

/* A key under the prefix (it may fall between the model's keys). */
static size_t random_under(struct world *w, const uint8_t *p, size_t plen,
                           uint8_t *k)
{
	static const uint8_t more[5] = {0x00, 'a', 'b', 'c', 0xFF};
	size_t len = plen + rnd(&w->seed) % 4;

	memcpy(k, p, plen);
	for (size_t i = plen; i < len; i++) {
		k[i] = more[rnd(&w->seed) % sizeof more];
	}
	if (plen == 4 && len > 4) {
		k[4] = kinds[rnd(&w->seed) % sizeof kinds];
	}
	return len;
}

static void add_key(struct sbuf *s, const uint8_t *k, size_t kl)
{
	sbuf_u8(s, (uint8_t)kl);
	sbuf_add(s, k, kl);
}

static void add_iter(struct sbuf *s, uint8_t walk, const uint8_t *p,
                     size_t plen, const uint8_t *from, size_t flen,
                     const uint8_t *narrow, size_t nlen, unsigned limit,
                     const uint8_t *moves, size_t nmoves,
                     const struct sbuf *again, size_t nagain)
{
	sbuf_u8(s, S_ITER);
	sbuf_u8(s, walk);
	add_key(s, p, plen);
	sbuf_u8(s, (uint8_t)((from != NULL) | (narrow != NULL) << 1));
	if (from != NULL) {
		add_key(s, from, flen);
	}
	if (narrow != NULL) {
		add_key(s, narrow, nlen);
	}
	sbuf_u16(s, (uint16_t)limit);
	sbuf_u8(s, (uint8_t)nmoves);
	sbuf_add(s, moves, nmoves);
	sbuf_u8(s, (uint8_t)nagain);
	sbuf_u16(s, (uint16_t)(again != NULL ? again->len : 0));
	if (again != NULL) {
		sbuf_add(s, again->p, again->len);
	}
}

static void random_iter(struct world *w, uint32_t g, struct sbuf *s)
{
	uint8_t p[KEY_MAX], from[PROBE_MAX], narrow[PROBE_MAX], moves[12];
	size_t plen = random_prefix(w, g, p), flen = 0, nlen = 0, nmoves = 0;
	size_t nagain = 0;
	struct sbuf again;
	uint8_t walk = (uint8_t)(rnd(&w->seed) % 4);
	bool has_from = true, has_narrow = false;
	unsigned limit = rnd(&w->seed) % 4 == 0 ? 1 + rnd(&w->seed) % 5 : 0;

	if (walk == W_BWD || walk == W_ZIGB) {
		if (rnd(&w->seed) % 3 == 0) {
			/* From the end of the prefix. */
			memcpy(from, p, plen);
			memset(from + plen, 0xFF, 5);
			flen = plen + 5;
		} else {
			flen = random_under(w, p, plen, from);
		}
	} else if (rnd(&w->seed) % 3 == 0) {
		has_from = false;
	} else {
		flen = random_under(w, p, plen, from);
	}
	if (walk == W_FWD && rnd(&w->seed) % 3 == 0) {
		has_narrow = true;
		nlen = random_under(w, p, plen, narrow);
	}
	if (walk == W_ZIG || walk == W_ZIGB) {
		nmoves = rnd(&w->seed) % sizeof moves;
		for (size_t i = 0; i < nmoves; i++) {
			moves[i] = rnd(&w->seed) % 2 ? 'n' : 'p';
		}
	}
	/* Then walks narrowed to other parts of the prefix, as a claim walks
	 * one due group after another. */
	sbuf_init(&again);
	if (has_narrow && rnd(&w->seed) % 2 == 0) {
		nagain = 1 + rnd(&w->seed) % 3;
		for (size_t i = 0; i < nagain; i++) {
			uint8_t n2[PROBE_MAX], f2[PROBE_MAX];
			size_t n2len = random_under(w, p, plen, n2);
			size_t f2len = random_under(w, n2, n2len, f2);

			add_key(&again, n2, n2len);
			add_key(&again, f2, f2len);
			sbuf_u16(&again, rnd(&w->seed) % 4 == 0
			                     ? 1 + rnd(&w->seed) % 5
			                     : 0);
		}
	}
	add_iter(s, walk, p, plen, has_from ? from : NULL, flen,
	         has_narrow ? narrow : NULL, nlen, limit, moves, nmoves, &again,
	         nagain);
	sbuf_free(&again);
}

static void random_get(struct world *w, const struct mtab *m, uint32_t g,
                       struct sbuf *s)
{
	uint8_t k[KEY_MAX];
	size_t kl = random_key(w, m, g, k);

	sbuf_u8(s, S_GET);
	add_key(s, k, kl);
}

/* A command's script; `m` is the group as the command will find it (for
 * keys that exist). */
static void random_script(struct world *w, const struct mtab *m, uint32_t g,
                          bool writes, struct sbuf *s)
{
	unsigned nops = 1 + (unsigned)(rnd(&w->seed) % 6);

	for (unsigned i = 0; i < nops; i++) {
		unsigned r = (unsigned)(rnd(&w->seed) % 100);
		uint8_t k[KEY_MAX], v[VAL_MAX];
		size_t kl, vl;

		if (!writes) {
			r = 55 + r * 45 / 100; /* no writes */
		}
		if (r < 38) {
			kl = random_key(w, m, g, k);
			/* Empty values, and values growing and shrinking. */
			vl = rnd(&w->seed) % 5 == 0 ? 0
			                            : rnd(&w->seed) % VAL_MAX;
			for (size_t j = 0; j < vl; j++) {
				v[j] = (uint8_t)rnd(&w->seed);
			}
			sbuf_u8(s, S_PUT);
			add_key(s, k, kl);
			sbuf_u8(s, (uint8_t)vl);
			sbuf_add(s, v, vl);
		} else if (r < 55) {
			kl = random_key(w, m, g, k);
			sbuf_u8(s, S_DEL);
			add_key(s, k, kl);
		} else if (r < 58) {
			sbuf_u8(s, S_CKPT);
		} else if (r < 72) {
			random_get(w, m, g, s);
		} else {
			random_iter(w, g, s);
		}
	}
	if (writes) {
		unsigned r = (unsigned)(rnd(&w->seed) % 100);
		if (r < 12) {
			sbuf_u8(s, S_FAIL);
		} else if (r < 16) {
			sbuf_u8(s, S_KEEP);
		}
	}
}

/* --- Running and checking --------------------------------------------- */

static void dump(const char *what, const uint8_t *p, size_t len)
{
	fprintf(stderr, "%s (%zu bytes):", what, len);
	for (size_t i = 0; i < len; i++) {
		fprintf(stderr, " %02x", p[i]);
	}
	fprintf(stderr, "\n");
}

/* A command's result against the model's: an error, or OK with its log. */
static void expect(struct world *w, const uint8_t *script, size_t slen,
                   const uint8_t *res, size_t rlen, bool failed,
                   const struct sbuf *log)
{
	struct store_result r;
	struct store_value v;

	assert_int_equal(store_result_open(res, rlen, &r), 0);
	if (failed) {
		assert_int_equal(r.status, STORE_ERR);
		return;
	}
	if (r.status != STORE_OK) {
		dump("script", script, slen);
		dump("result", res, rlen);
		fail_msg("step %d: status %u", w->step, r.status);
	}
	assert_true(store_result_next(&r, &v));
	assert_int_equal(v.tag, STORE_T_BYTES);
	if (v.len != log->len ||
	    (v.len > 0 && memcmp(v.p, log->p, v.len) != 0)) {
		dump("script", script, slen);
		dump("store", v.p, v.len);
		dump("model", log->p, log->len);
		fail_msg("step %d: the store and the model differ", w->step);
	}
}

/* Applies one entry of `n` scripts to group g. */
static void apply_entry(struct world *w, uint32_t g, struct sbuf *scripts,
                        unsigned n)
{
	struct fsm_cmd cmds[8];
	struct fsm_result res[8];
	struct fsm_entry e;
	static struct mtab m;

	m = w->model[g];
	e.group = g;
	e.index = w->t.next_index[g]++;
	e.term = 1;
	e.now_ms = ++w->now;
	e.n_cmds = n;
	e.cmds = cmds;
	for (unsigned i = 0; i < n; i++) {
		cmds[i].data = scripts[i].p;
		cmds[i].len = scripts[i].len;
	}
	memset(res, 0, sizeof res);
	assert_int_equal(store_apply(w->t.s, &e, res), 0);
	for (unsigned i = 0; i < n; i++) {
		struct sbuf log;
		bool failed;

		sbuf_init(&log);
		m_run(&m, scripts[i].p + 2, scripts[i].len - 2, &log, &failed);
		expect(w, scripts[i].p, scripts[i].len, res[i].data, res[i].len,
		       failed, &log);
		sbuf_free(&log);
		free(res[i].data);
	}
	w->model[g] = m;
}

static void script_begin(struct sbuf *s, uint8_t op)
{
	sbuf_init(s);
	sbuf_u8(s, STORE_CMD_VERSION);
	sbuf_u8(s, op);
}

/* Applies a random entry; returns its group. */
static uint32_t random_entry(struct world *w)
{
	uint32_t g = 1 + (uint32_t)(rnd(&w->seed) % NGROUPS);
	unsigned n = 1 + (unsigned)(rnd(&w->seed) % 4);
	struct sbuf scripts[4];
	static struct mtab m;
	bool failed;

	/* Keys that exist by the time each command runs. */
	m = w->model[g];
	for (unsigned i = 0; i < n; i++) {
		struct sbuf scratch;

		script_begin(&scripts[i], OP_SCRIPT);
		random_script(w, &m, g, true, &scripts[i]);
		sbuf_init(&scratch);
		m_run(&m, scripts[i].p + 2, scripts[i].len - 2, &scratch,
		      &failed);
		sbuf_free(&scratch);
	}
	apply_entry(w, g, scripts, n);
	for (unsigned i = 0; i < n; i++) {
		sbuf_free(&scripts[i]);
	}
	return g;
}

/* Serves a script of reads through store_read (a read transaction). */
static void read_script(struct world *w, uint32_t g, const struct sbuf *s)
{
	struct fsm_result out;
	struct sbuf log;
	struct mtab *m = &w->model[g];
	bool failed;

	assert_int_equal(store_read(w->t.s, g, ++w->now, s->p, s->len, &out),
	                 0);
	sbuf_init(&log);
	m_run(m, s->p + 2, s->len - 2, &log, &failed);
	expect(w, s->p, s->len, out.data, out.len, failed, &log);
	sbuf_free(&log);
	free(out.data);
}

/* The group walked whole both ways, one kind both ways, and point reads,
 * through a read transaction (or, when `apply`, an entry's). */
static void check(struct world *w, uint32_t g, bool apply)
{
	uint8_t p[5], end4[9], end5[10];
	struct sbuf s;

	script_begin(&s, apply ? OP_SCRIPT : OP_READ);
	be_put32(p, g);
	p[4] = kinds[rnd(&w->seed) % sizeof kinds];
	/* Past every key of the group, and of the kind. */
	memcpy(end4, p, 4);
	memset(end4 + 4, 0xFF, 5);
	memcpy(end5, p, 5);
	memset(end5 + 5, 0xFF, 5);
	add_iter(&s, W_FWD, p, 4, NULL, 0, NULL, 0, 0, NULL, 0, NULL, 0);
	add_iter(&s, W_BWD, p, 4, end4, 9, NULL, 0, 0, NULL, 0, NULL, 0);
	add_iter(&s, W_FWD, p, 5, NULL, 0, NULL, 0, 0, NULL, 0, NULL, 0);
	add_iter(&s, W_BWD, p, 5, end5, 10, NULL, 0, 0, NULL, 0, NULL, 0);
	for (int i = 0; i < 6; i++) {
		random_get(w, &w->model[g], g, &s);
	}
	if (apply) {
		apply_entry(w, g, &s, 1);
	} else {
		read_script(w, g, &s);
	}
	sbuf_free(&s);
}

static void check_all(struct world *w, bool apply)
{
	for (uint32_t g = 1; g <= NGROUPS; g++) {
		check(w, g, apply);
	}
}

static void reopen(struct world *w)
{
	tdb_reopen(&w->t);
	register_ext(&w->t);
}

static void test_model(void **state)
{
	static struct world w;
	char msg[256];

	(void)state;
	memset(&w, 0, sizeof w);
	w.seed = 0x0DDB1A5E5EEDull;
	tdb_open(&w.t);
	register_ext(&w.t);
	for (w.step = 0; w.step < STEPS; w.step++) {
		unsigned r = (unsigned)(rnd(&w.seed) % 1000);
		uint32_t g = 1 + (uint32_t)(rnd(&w.seed) % NGROUPS);

		if (r < 700) {
			/* The group it changed, the others now and then. */
			g = random_entry(&w);
			check(&w, g, w.step % 10 == 0);
		} else if (r < 900) {
			struct sbuf s;

			script_begin(&s, OP_READ);
			random_script(&w, &w.model[g], g, false, &s);
			read_script(&w, g, &s);
			sbuf_free(&s);
			check(&w, g, false);
		} else if (r < 990) {
			/* A checkpoint: the written-back rows go to RocksDB,
			 * and the ordered table starts over. */
			assert_int_equal(store_drain(w.t.s), 0);
			assert_int_equal(
			    store_row_cache_verify(w.t.s, msg, sizeof msg), 0);
			check_all(&w, false);
		} else {
			reopen(&w);
			check_all(&w, false);
		}
		if (w.step % 20 == 0) {
			check_all(&w, w.step % 40 == 0);
		}
	}
	/* All of it in RocksDB, and again after a clean restart. */
	assert_int_equal(store_drain(w.t.s), 0);
	check_all(&w, false);
	reopen(&w);
	check_all(&w, false);
	check_all(&w, true);
	tdb_close(&w.t);
}

/* Checkpoints queued from another thread all along, as store_sync does
 * from the Raft log writer's: wherever one lands between the reactor's
 * steps, its rows stay visible (the queued checkpoint, then RocksDB). */
struct ckpt_loop {
	struct store *s;
	atomic_bool stop;
	unsigned long n;
	int rv;
};

static void *ckpt_run(void *arg)
{
	struct ckpt_loop *c = arg;

	/* Bounded by count as well: each one waits for the data writer. */
	while (!atomic_load(&c->stop) && c->n < 1000000) {
		if (store_drain(c->s) != 0) {
			c->rv = -1;
			break;
		}
		c->n++;
	}
	return NULL;
}

static void test_concurrent_checkpoints(void **state)
{
	static struct world w;
	struct ckpt_loop c;
	pthread_t th;

	(void)state;
	memset(&w, 0, sizeof w);
	w.seed = 0xC0FFEE5EEDull;
	tdb_open(&w.t);
	register_ext(&w.t);
	c.s = w.t.s;
	atomic_init(&c.stop, false);
	c.n = 0;
	c.rv = 0;
	assert_int_equal(pthread_create(&th, NULL, ckpt_run, &c), 0);
	for (w.step = 0; w.step < STEPS / 2; w.step++) {
		uint32_t g = 1 + (uint32_t)(rnd(&w.seed) % NGROUPS);

		if (rnd(&w.seed) % 4 != 0) {
			g = random_entry(&w);
		} else {
			struct sbuf s;

			script_begin(&s, OP_READ);
			random_script(&w, &w.model[g], g, false, &s);
			read_script(&w, g, &s);
			sbuf_free(&s);
		}
		check(&w, g, w.step % 2 == 0);
	}
	atomic_store(&c.stop, true);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(c.rv, 0);
	check_all(&w, false);
	tdb_close(&w.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_concurrent_checkpoints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
