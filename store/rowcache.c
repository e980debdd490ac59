/* rowcache: open-addressing hash table of rows, evicted by CLOCK (see
 * rowcache.h).
 *
 * A slot is one 64-byte cache line. A short row (key and value together
 * at most INLINE_MAX bytes: a KV key with a small value) lives in its slot,
 * so a hit costs one cache miss; a longer one is a separate allocation the
 * slot points to (two misses). The CLOCK marks live in the slots: the hand
 * never touches the rows it passes. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store/rowcache.h"

#define SLOT_SIZE 64
/* Slot arrays this large are aligned to (transparent) huge pages: a
 * random probe into megabytes of slots otherwise misses the TLB as well
 * as the cache, and a page walk is dear under virtualisation. */
#define HUGE_PAGE (2u << 20)
#define INLINE_MAX 56

/* Bytes charged per row beyond what it stores out of line: its two slots
 * (the table stays at most half full). An out-of-line row also pays its
 * key, value, header and allocator rounding. */
#define SLOT_CHARGE (2 * SLOT_SIZE)
#define HEAP_OVERHEAD 32

enum { SLOT_EMPTY = 0, SLOT_INLINE, SLOT_HEAP };

enum { F_PRESENT = 1, F_REF = 2 };

struct row {
	uint32_t klen;
	uint32_t vlen;
	uint8_t data[]; /* key, then value */
};

struct slot {
	uint32_t hash; /* low bits of rowcache_hash */
	uint8_t kind;  /* SLOT_* */
	uint8_t klen;  /* SLOT_INLINE */
	uint8_t vlen;  /* SLOT_INLINE */
	uint8_t flags; /* F_PRESENT: the row exists; F_REF: read or written
	                  since the clock hand last passed */
	union {
		struct row *row;          /* SLOT_HEAP, owned */
		uint8_t data[INLINE_MAX]; /* SLOT_INLINE: key, then value */
	} u;
};

_Static_assert(sizeof(struct slot) == SLOT_SIZE, "a slot is a cache line");

struct rowcache {
	struct slot *slots; /* cache-line aligned, owned */
	size_t cap;         /* a power of two, or 0 */
	size_t hand;        /* CLOCK position in slots */
	size_t rows;
	size_t bytes;
	size_t max_bytes;
	uint64_t hits, misses, evictions;
};

uint64_t rowcache_hash(const uint8_t *p, size_t n)
{
	/* 8 bytes per step, multiply-xorshift mixing. */
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);

	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h ^= w * 0xc4ceb9fe1a85ec53ull;
		h = (h << 31 | h >> 33) * 0x9e3779b97f4a7c15ull;
		p += 8;
		n -= 8;
	}
	if (n > 0) {
		uint64_t w = 0;
		memcpy(&w, p, n);
		h ^= w * 0xc4ceb9fe1a85ec53ull;
		h = (h << 31 | h >> 33) * 0x9e3779b97f4a7c15ull;
	}
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static const uint8_t *slot_key(const struct slot *s, size_t *klen)
{
	if (s->kind == SLOT_INLINE) {
		*klen = s->klen;
		return s->u.data;
	}
	*klen = s->u.row->klen;
	return s->u.row->data;
}

static const uint8_t *slot_val(const struct slot *s, size_t *vlen)
{
	if (s->kind == SLOT_INLINE) {
		*vlen = s->vlen;
		return s->u.data + s->klen;
	}
	*vlen = s->u.row->vlen;
	return s->u.row->data + s->u.row->klen;
}

static size_t slot_cost(const struct slot *s)
{
	if (s->kind == SLOT_HEAP) {
		return SLOT_CHARGE + HEAP_OVERHEAD + s->u.row->klen +
		       s->u.row->vlen;
	}
	return SLOT_CHARGE;
}

/* Frees what the slot owns and empties it. */
static void slot_clear(struct slot *s)
{
	if (s->kind == SLOT_HEAP) {
		free(s->u.row);
	}
	s->kind = SLOT_EMPTY;
}

int rowcache_create(size_t max_bytes, struct rowcache **out)
{
	struct rowcache *c = calloc(1, sizeof *c);

	if (c == NULL) {
		return -1;
	}
	c->max_bytes = max_bytes;
	*out = c;
	return 0;
}

void rowcache_clear(struct rowcache *c)
{
	for (size_t i = 0; i < c->cap; i++) {
		slot_clear(&c->slots[i]);
	}
	c->rows = 0;
	c->bytes = 0;
}

void rowcache_destroy(struct rowcache *c)
{
	if (c == NULL) {
		return;
	}
	rowcache_clear(c);
	free(c->slots);
	free(c);
}

/* The slot holding the key, or the empty slot ending its probe run. */
static size_t find(const struct rowcache *c, uint32_t h, const uint8_t *key,
                   size_t klen)
{
	size_t mask = c->cap - 1, i = h & mask;

	for (;;) {
		const struct slot *s = &c->slots[i];
		if (s->kind == SLOT_EMPTY) {
			return i;
		}
		if (s->hash == h) {
			size_t kl;
			const uint8_t *k = slot_key(s, &kl);
			if (kl == klen && memcmp(k, key, klen) == 0) {
				return i;
			}
		}
		i = (i + 1) & mask;
	}
}

/* Frees the row at slot i and closes the gap by shifting later rows of
 * the probe run back (no tombstones). */
static void remove_at(struct rowcache *c, size_t i)
{
	size_t mask = c->cap - 1, j = i;

	c->rows--;
	c->bytes -= slot_cost(&c->slots[i]);
	slot_clear(&c->slots[i]);
	for (;;) {
		size_t home;
		j = (j + 1) & mask;
		if (c->slots[j].kind == SLOT_EMPTY) {
			return;
		}
		home = c->slots[j].hash & mask;
		/* Stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j)
		           : (i < home || home <= j)) {
			continue;
		}
		c->slots[i] = c->slots[j];
		c->slots[j].kind = SLOT_EMPTY;
		i = j;
	}
}

static int grow(struct rowcache *c)
{
	size_t n = c->cap ? c->cap * 2 : 1024;
	struct slot *t;

	if (n > SIZE_MAX / sizeof *t) {
		return -1;
	}
	if (n * sizeof *t >= HUGE_PAGE) {
		/* n is a power of two: the size is a multiple of HUGE_PAGE */
		t = aligned_alloc(HUGE_PAGE, n * sizeof *t);
#ifdef MADV_HUGEPAGE
		if (t != NULL) {
			(void)madvise(t, n * sizeof *t, MADV_HUGEPAGE);
		}
#endif
	} else {
		t = aligned_alloc(SLOT_SIZE, n * sizeof *t);
	}
	if (t == NULL) {
		return -1;
	}
	memset(t, 0, n * sizeof *t); /* every slot SLOT_EMPTY */
	for (size_t i = 0; i < c->cap; i++) {
		if (c->slots[i].kind != SLOT_EMPTY) {
			size_t j = c->slots[i].hash & (n - 1);
			while (t[j].kind != SLOT_EMPTY) {
				j = (j + 1) & (n - 1);
			}
			t[j] = c->slots[i];
		}
	}
	free(c->slots);
	c->slots = t;
	c->cap = n;
	c->hand = 0;
	return 0;
}

/* CLOCK: the hand clears the mark of rows used since it last passed and
 * evicts the first unmarked one. Two laps at most. */
static void evict(struct rowcache *c)
{
	while (c->bytes > c->max_bytes && c->rows > 0) {
		struct slot *s = &c->slots[c->hand];
		if (s->kind == SLOT_EMPTY) {
			c->hand = (c->hand + 1) & (c->cap - 1);
		} else if (s->flags & F_REF) {
			s->flags &= (uint8_t)~F_REF;
			c->hand = (c->hand + 1) & (c->cap - 1);
		} else {
			/* A later row may shift into this slot: look again. */
			remove_at(c, c->hand);
			c->evictions++;
		}
	}
}

void rowcache_resize(struct rowcache *c, size_t max_bytes)
{
	c->max_bytes = max_bytes;
	evict(c);
}

int rowcache_get(struct rowcache *c, const uint8_t *key, size_t klen,
                 const uint8_t **val, size_t *vlen)
{
	return rowcache_get_h(c, rowcache_hash(key, klen), key, klen, val,
	                      vlen);
}

int rowcache_get_h(struct rowcache *c, uint64_t hash, const uint8_t *key,
                   size_t klen, const uint8_t **val, size_t *vlen)
{
	struct slot *s;

	if (c->rows == 0) {
		c->misses++;
		return -1;
	}
	s = &c->slots[find(c, (uint32_t)hash, key, klen)];
	if (s->kind == SLOT_EMPTY) {
		c->misses++;
		return -1;
	}
	c->hits++;
	s->flags |= F_REF;
	*val = slot_val(s, vlen);
	return (s->flags & F_PRESENT) ? 1 : 0;
}

void rowcache_prefetch(const struct rowcache *c, const uint8_t *key,
                       size_t klen)
{
	if (c->cap > 0) {
		uint32_t h = (uint32_t)rowcache_hash(key, klen);
		__builtin_prefetch(&c->slots[h & (c->cap - 1)]);
	}
}

void rowcache_drop(struct rowcache *c, const uint8_t *key, size_t klen)
{
	size_t i;

	if (c->rows == 0) {
		return;
	}
	i = find(c, (uint32_t)rowcache_hash(key, klen), key, klen);
	if (c->slots[i].kind != SLOT_EMPTY) {
		remove_at(c, i);
	}
}

void rowcache_put(struct rowcache *c, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen, bool present)
{
	rowcache_put_h(c, rowcache_hash(key, klen), key, klen, val, vlen,
	               present);
}

void rowcache_put_h(struct rowcache *c, uint64_t hash, const uint8_t *key,
                    size_t klen, const uint8_t *val, size_t vlen, bool present)
{
	uint32_t h = (uint32_t)hash;
	bool inl;
	struct slot *s;
	struct row *r = NULL;
	size_t i, cost;

	if (!present) {
		vlen = 0;
	}
	inl = klen + vlen <= INLINE_MAX;
	cost = inl ? SLOT_CHARGE : SLOT_CHARGE + HEAP_OVERHEAD + klen + vlen;
	/* A row over 1/64 of the budget would evict many small ones. */
	if (cost > c->max_bytes / 64 || klen > UINT32_MAX ||
	    vlen > UINT32_MAX) {
		rowcache_drop(c, key, klen);
		return;
	}
	if ((c->rows + 1) * 2 > c->cap && grow(c) != 0) {
		rowcache_drop(c, key, klen);
		return;
	}
	i = find(c, h, key, klen);
	s = &c->slots[i];
	if (s->kind == SLOT_HEAP && !inl && s->u.row->vlen == vlen) {
		/* Same size out of line: overwrite in place. */
		if (vlen > 0) {
			memcpy(s->u.row->data + klen, val, vlen);
		}
		s->flags = (uint8_t)(F_REF | (present ? F_PRESENT : 0));
		return;
	}
	if (!inl) {
		r = malloc(sizeof *r + klen + vlen);
		if (r == NULL) {
			if (s->kind != SLOT_EMPTY) {
				remove_at(c, i);
			}
			return; /* not cached: the next read goes to RocksDB */
		}
		r->klen = (uint32_t)klen;
		r->vlen = (uint32_t)vlen;
		memcpy(r->data, key, klen);
		if (vlen > 0) {
			memcpy(r->data + klen, val, vlen);
		}
	}
	if (s->kind != SLOT_EMPTY) {
		c->bytes -= slot_cost(s);
		slot_clear(s);
	} else {
		c->rows++;
	}
	s->hash = h;
	s->flags = (uint8_t)(F_REF | (present ? F_PRESENT : 0));
	if (inl) {
		s->kind = SLOT_INLINE;
		s->klen = (uint8_t)klen;
		s->vlen = (uint8_t)vlen;
		memcpy(s->u.data, key, klen);
		if (vlen > 0) {
			memcpy(s->u.data + klen, val, vlen);
		}
	} else {
		s->kind = SLOT_HEAP;
		s->u.row = r;
	}
	c->bytes += slot_cost(s);
	evict(c);
}

static int bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int d = memcmp(a, b, al < bl ? al : bl);

	if (d != 0) {
		return d;
	}
	return al < bl ? -1 : al > bl ? 1 : 0;
}

void rowcache_drop_range(struct rowcache *c, const uint8_t *begin, size_t blen,
                         const uint8_t *end, size_t elen)
{
	size_t i = 0;

	/* A removal may shift a later row into slot i: look at it again.
	 * Rows that wrapped around may be looked at twice (harmless). */
	while (i < c->cap) {
		const struct slot *s = &c->slots[i];
		if (s->kind != SLOT_EMPTY) {
			size_t kl;
			const uint8_t *k = slot_key(s, &kl);
			if (bytes_cmp(k, kl, begin, blen) >= 0 &&
			    bytes_cmp(k, kl, end, elen) < 0) {
				remove_at(c, i);
				continue;
			}
		}
		i++;
	}
}

int rowcache_walk(const struct rowcache *c, rowcache_walk_cb cb, void *arg)
{
	for (size_t i = 0; i < c->cap; i++) {
		const struct slot *s = &c->slots[i];
		const uint8_t *k, *v;
		size_t kl, vl;
		int rv;
		if (s->kind == SLOT_EMPTY) {
			continue;
		}
		k = slot_key(s, &kl);
		v = slot_val(s, &vl);
		rv = cb(arg, k, kl, v, vl, (s->flags & F_PRESENT) != 0);
		if (rv != 0) {
			return rv;
		}
	}
	return 0;
}

void rowcache_stats(const struct rowcache *c, struct rowcache_stats *st)
{
	st->hits = c->hits;
	st->misses = c->misses;
	st->evictions = c->evictions;
	st->rows = c->rows;
	st->bytes = c->bytes;
	st->max_bytes = c->max_bytes;
}
