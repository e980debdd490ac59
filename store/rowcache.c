/* rowcache: open-addressing hash table of rows, evicted by CLOCK (see
 * rowcache.h). A hit touches the slot array and the row only: no list
 * neighbours to relink, which cost a cache miss each. */
#include <stdlib.h>
#include <string.h>

#include "store/rowcache.h"

/* Bytes charged per row beyond its key and value: its two slots (the
 * table stays at most half full), header and allocator rounding. */
#define ROW_OVERHEAD 80

struct row {
	uint32_t klen;
	uint32_t vlen;
	bool present;
	bool ref;       /* read or written since the clock hand last passed */
	uint8_t data[]; /* key, then value */
};

struct slot {
	uint64_t hash;
	struct row *row; /* NULL: empty */
};

struct rowcache {
	struct slot *slots;
	size_t cap;  /* a power of two, or 0 */
	size_t hand; /* CLOCK position in slots */
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

static size_t row_cost(const struct row *r)
{
	return ROW_OVERHEAD + r->klen + r->vlen;
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
		free(c->slots[i].row);
		c->slots[i].row = NULL;
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
static size_t find(const struct rowcache *c, uint64_t h, const uint8_t *key,
                   size_t klen)
{
	size_t mask = c->cap - 1, i = h & mask;

	for (;;) {
		const struct slot *s = &c->slots[i];
		if (s->row == NULL || (s->hash == h && s->row->klen == klen &&
		                       memcmp(s->row->data, key, klen) == 0)) {
			return i;
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
	c->bytes -= row_cost(c->slots[i].row);
	free(c->slots[i].row);
	c->slots[i].row = NULL;
	for (;;) {
		size_t home;
		j = (j + 1) & mask;
		if (c->slots[j].row == NULL) {
			return;
		}
		home = c->slots[j].hash & mask;
		/* Stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j)
		           : (i < home || home <= j)) {
			continue;
		}
		c->slots[i] = c->slots[j];
		c->slots[j].row = NULL;
		i = j;
	}
}

static int grow(struct rowcache *c)
{
	size_t n = c->cap ? c->cap * 2 : 1024;
	struct slot *t = calloc(n, sizeof *t);

	if (t == NULL) {
		return -1;
	}
	for (size_t i = 0; i < c->cap; i++) {
		if (c->slots[i].row != NULL) {
			size_t j = c->slots[i].hash & (n - 1);
			while (t[j].row != NULL) {
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
		if (s->row == NULL) {
			c->hand = (c->hand + 1) & (c->cap - 1);
		} else if (s->row->ref) {
			s->row->ref = false;
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
	struct row *r;

	if (c->rows == 0) {
		c->misses++;
		return -1;
	}
	r = c->slots[find(c, rowcache_hash(key, klen), key, klen)].row;
	if (r == NULL) {
		c->misses++;
		return -1;
	}
	c->hits++;
	r->ref = true;
	*val = r->data + r->klen;
	*vlen = r->vlen;
	return r->present ? 1 : 0;
}

void rowcache_drop(struct rowcache *c, const uint8_t *key, size_t klen)
{
	size_t i;

	if (c->rows == 0) {
		return;
	}
	i = find(c, rowcache_hash(key, klen), key, klen);
	if (c->slots[i].row != NULL) {
		remove_at(c, i);
	}
}

void rowcache_put(struct rowcache *c, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen, bool present)
{
	uint64_t h = rowcache_hash(key, klen);
	struct row *r, *old;
	size_t i;

	if (!present) {
		vlen = 0;
	}
	/* A row over 1/64 of the budget would evict many small ones. */
	if (ROW_OVERHEAD + klen + vlen > c->max_bytes / 64 ||
	    klen > UINT32_MAX || vlen > UINT32_MAX) {
		rowcache_drop(c, key, klen);
		return;
	}
	if ((c->rows + 1) * 2 > c->cap && grow(c) != 0) {
		rowcache_drop(c, key, klen);
		return;
	}
	i = find(c, h, key, klen);
	old = c->slots[i].row;
	if (old != NULL && old->vlen == vlen) {
		/* Same size: overwrite in place. */
		if (vlen > 0) {
			memcpy(old->data + klen, val, vlen);
		}
		old->present = present;
		old->ref = true;
		return;
	}
	r = malloc(sizeof *r + klen + vlen);
	if (r == NULL) {
		if (old != NULL) {
			remove_at(c, i);
		}
		return; /* not cached: the next read goes to RocksDB */
	}
	r->klen = (uint32_t)klen;
	r->vlen = (uint32_t)vlen;
	r->present = present;
	r->ref = true;
	memcpy(r->data, key, klen);
	if (vlen > 0) {
		memcpy(r->data + klen, val, vlen);
	}
	if (old != NULL) {
		c->bytes -= row_cost(old);
		free(old);
	} else {
		c->rows++;
	}
	c->slots[i].hash = h;
	c->slots[i].row = r;
	c->bytes += row_cost(r);
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
		struct row *r = c->slots[i].row;
		if (r != NULL &&
		    bytes_cmp(r->data, r->klen, begin, blen) >= 0 &&
		    bytes_cmp(r->data, r->klen, end, elen) < 0) {
			remove_at(c, i);
			continue;
		}
		i++;
	}
}

int rowcache_walk(const struct rowcache *c, rowcache_walk_cb cb, void *arg)
{
	for (size_t i = 0; i < c->cap; i++) {
		const struct row *r = c->slots[i].row;
		int rv;
		if (r == NULL) {
			continue;
		}
		rv = cb(arg, r->data, r->klen, r->data + r->klen, r->vlen,
		        r->present);
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
