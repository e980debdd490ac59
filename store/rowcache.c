/* rowcache: chained hash table of rows plus an LRU list (see rowcache.h). */
#include <stdlib.h>
#include <string.h>

#include "store/rowcache.h"

/* Bytes charged per row beyond its key and value (the entry header and
 * its bucket slot, rounded up for the allocator). */
#define ROW_OVERHEAD 80

struct row {
	struct row *chain;       /* next in the bucket */
	struct row *prev, *next; /* LRU: head is the most recent */
	uint64_t hash;
	uint32_t klen;
	uint32_t vlen;
	bool present;
	uint8_t data[]; /* key, then value */
};

struct rowcache {
	struct row **buckets;
	size_t nbuckets; /* a power of two, or 0 */
	size_t rows;
	size_t bytes;
	size_t max_bytes;
	struct row *head, *tail;
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
	struct row *r = c->head;

	while (r != NULL) {
		struct row *next = r->next;
		free(r);
		r = next;
	}
	c->head = c->tail = NULL;
	if (c->buckets != NULL) {
		memset(c->buckets, 0, c->nbuckets * sizeof *c->buckets);
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
	free(c->buckets);
	free(c);
}

static void lru_unlink(struct rowcache *c, struct row *r)
{
	if (r->prev != NULL) {
		r->prev->next = r->next;
	} else {
		c->head = r->next;
	}
	if (r->next != NULL) {
		r->next->prev = r->prev;
	} else {
		c->tail = r->prev;
	}
	r->prev = r->next = NULL;
}

static void lru_push(struct rowcache *c, struct row *r)
{
	r->prev = NULL;
	r->next = c->head;
	if (c->head != NULL) {
		c->head->prev = r;
	}
	c->head = r;
	if (c->tail == NULL) {
		c->tail = r;
	}
}

/* The slot pointing at the row with this key, or the empty slot at the
 * end of its chain. */
static struct row **find_slot(struct rowcache *c, uint64_t h,
                              const uint8_t *key, size_t klen)
{
	struct row **slot = &c->buckets[h & (c->nbuckets - 1)];

	while (*slot != NULL) {
		struct row *r = *slot;
		if (r->hash == h && r->klen == klen &&
		    memcmp(r->data, key, klen) == 0) {
			return slot;
		}
		slot = &r->chain;
	}
	return slot;
}

/* Unlinks and frees the row in `slot`. */
static void remove_at(struct rowcache *c, struct row **slot)
{
	struct row *r = *slot;

	*slot = r->chain;
	lru_unlink(c, r);
	c->rows--;
	c->bytes -= row_cost(r);
	free(r);
}

static void remove_row(struct rowcache *c, struct row *r)
{
	remove_at(c, find_slot(c, r->hash, r->data, r->klen));
}

static int grow(struct rowcache *c)
{
	size_t n = c->nbuckets ? c->nbuckets * 2 : 1024;
	struct row **b = calloc(n, sizeof *b);

	if (b == NULL) {
		return -1;
	}
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct row *r = c->buckets[i];
		while (r != NULL) {
			struct row *next = r->chain;
			r->chain = b[r->hash & (n - 1)];
			b[r->hash & (n - 1)] = r;
			r = next;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
	return 0;
}

static void evict(struct rowcache *c)
{
	while (c->bytes > c->max_bytes && c->tail != NULL) {
		remove_row(c, c->tail);
		c->evictions++;
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
	r = *find_slot(c, rowcache_hash(key, klen), key, klen);
	if (r == NULL) {
		c->misses++;
		return -1;
	}
	c->hits++;
	if (c->head != r) {
		lru_unlink(c, r);
		lru_push(c, r);
	}
	*val = r->data + r->klen;
	*vlen = r->vlen;
	return r->present ? 1 : 0;
}

void rowcache_drop(struct rowcache *c, const uint8_t *key, size_t klen)
{
	struct row **slot;

	if (c->rows == 0) {
		return;
	}
	slot = find_slot(c, rowcache_hash(key, klen), key, klen);
	if (*slot != NULL) {
		remove_at(c, slot);
	}
}

void rowcache_put(struct rowcache *c, const uint8_t *key, size_t klen,
                  const uint8_t *val, size_t vlen, bool present)
{
	uint64_t h = rowcache_hash(key, klen);
	struct row **slot;
	struct row *r;

	if (!present) {
		vlen = 0;
	}
	/* A row over 1/64 of the budget would evict many small ones. */
	if (ROW_OVERHEAD + klen + vlen > c->max_bytes / 64 ||
	    klen > UINT32_MAX || vlen > UINT32_MAX) {
		rowcache_drop(c, key, klen);
		return;
	}
	if (c->rows >= c->nbuckets && grow(c) != 0) {
		rowcache_drop(c, key, klen);
		return;
	}
	slot = find_slot(c, h, key, klen);
	r = *slot;
	if (r != NULL && r->vlen == vlen) {
		/* Same size: overwrite in place. */
		if (vlen > 0) {
			memcpy(r->data + klen, val, vlen);
		}
		r->present = present;
		if (c->head != r) {
			lru_unlink(c, r);
			lru_push(c, r);
		}
		return;
	}
	if (r != NULL) {
		remove_at(c, slot);
		slot = find_slot(c, h, key, klen);
	}
	r = malloc(sizeof *r + klen + vlen);
	if (r == NULL) {
		return; /* not cached: the next read goes to RocksDB */
	}
	r->chain = NULL;
	r->hash = h;
	r->klen = (uint32_t)klen;
	r->vlen = (uint32_t)vlen;
	r->present = present;
	memcpy(r->data, key, klen);
	if (vlen > 0) {
		memcpy(r->data + klen, val, vlen);
	}
	*slot = r;
	lru_push(c, r);
	c->rows++;
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
	struct row *r = c->head;

	while (r != NULL) {
		struct row *next = r->next;
		if (bytes_cmp(r->data, r->klen, begin, blen) >= 0 &&
		    bytes_cmp(r->data, r->klen, end, elen) < 0) {
			remove_row(c, r);
		}
		r = next;
	}
}

int rowcache_walk(const struct rowcache *c, rowcache_walk_cb cb, void *arg)
{
	for (const struct row *r = c->head; r != NULL; r = r->next) {
		int rv = cb(arg, r->data, r->klen, r->data + r->klen, r->vlen,
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
