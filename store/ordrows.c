/* The ordered write-back rows (ordrows.h): a skiplist with a back link at
 * level 0, one search per put. */
#include <stdlib.h>
#include <string.h>

#include "store/ordrows.h"

/* Nodes take 1, 2, 3... links with probability 3/4, 3/16...: a search
 * steps ~4 nodes per level over log4(n) levels. */
static unsigned random_height(struct ordrows *t)
{
	unsigned h = 1;
	uint64_t x = t->rnd;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t->rnd = x;
	while (h < ORDROWS_MAX_HEIGHT && (x & 3) == 0) {
		h++;
		x >>= 2;
	}
	return h;
}

struct ordchunk {
	struct ordchunk *next;
	size_t size, used;
	uint8_t data[]; /* 8-aligned: three 8-byte fields before */
};

#define CHUNK_BYTES ((size_t)256 << 10)

/* `n` bytes (8-aligned) from the current chunk, or a new one. */
static void *alloc(struct ordrows *t, size_t n)
{
	struct ordchunk *c = t->chunks;

	n = (n + 7) & ~(size_t)7;
	if (c == NULL || c->size - c->used < n) {
		size_t size = n > CHUNK_BYTES ? n : CHUNK_BYTES;
		c = malloc(sizeof *c + size);
		if (c == NULL) {
			abort(); /* as store_xmalloc: no partial apply */
		}
		c->size = size;
		c->used = 0;
		c->next = t->chunks;
		t->chunks = c;
	}
	c->used += n;
	t->bytes += n;
	return c->data + c->used - n;
}

int ordrows_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c != 0) {
		return c;
	}
	return al < bl ? -1 : al > bl ? 1 : 0;
}

int ordrows_init(struct ordrows *t)
{
	t->head = calloc(1, sizeof *t->head +
	                        ORDROWS_MAX_HEIGHT * sizeof t->head->next[0]);
	if (t->head == NULL) {
		return -1;
	}
	t->head->height = ORDROWS_MAX_HEIGHT;
	t->slots = NULL;
	t->cap = 0;
	t->chunks = NULL;
	t->height = 1;
	t->n = 0;
	t->bytes = 0;
	t->rnd = 0x9E3779B97F4A7C15ull;
	return 0;
}

void ordrows_clear(struct ordrows *t)
{
	struct ordchunk *c = t->chunks;

	/* The newest chunk is kept for the next rows, emptied. */
	if (c != NULL) {
		struct ordchunk *rest = c->next;
		c->used = 0;
		c->next = NULL;
		while (rest != NULL) {
			struct ordchunk *next = rest->next;
			free(rest);
			rest = next;
		}
		if (c->size > CHUNK_BYTES) {
			free(c);
			t->chunks = NULL;
		}
	}
	memset(t->head->next, 0, ORDROWS_MAX_HEIGHT * sizeof t->head->next[0]);
	if (t->cap > 0) {
		memset(t->slots, 0, t->cap * sizeof *t->slots);
	}
	t->height = 1;
	t->n = 0;
	t->bytes = 0;
}

void ordrows_fini(struct ordrows *t)
{
	if (t->head != NULL) {
		ordrows_clear(t);
		free(t->chunks);
		t->chunks = NULL;
		free(t->head);
		free(t->slots);
		t->head = NULL;
		t->slots = NULL;
		t->cap = 0;
	}
}

static int node_cmp(const struct ordnode *n, const uint8_t *key, size_t klen)
{
	return ordrows_cmp(ordnode_key(n), n->klen, key, klen);
}

/* The last node < key at each level into `prev` (the head where none). */
static void find_prev(const struct ordrows *t, const uint8_t *key, size_t klen,
                      struct ordnode **prev)
{
	struct ordnode *x = t->head;

	for (int l = (int)t->height - 1; l >= 0; l--) {
		struct ordnode *next;
		while ((next = x->next[l]) != NULL &&
		       node_cmp(next, key, klen) < 0) {
			x = next;
		}
		prev[l] = x;
	}
}

static void set_val(struct ordrows *t, struct ordnode *n, const uint8_t *val,
                    size_t vlen, bool present)
{
	if (!present) {
		vlen = 0;
	}
	if (vlen > n->vcap) {
		/* The old value's room stays in its chunk until the table is
		 * cleared; `bytes` counts it, so a checkpoint bounds it. */
		n->val = alloc(t, vlen);
		n->vcap = (uint32_t)((vlen + 7) & ~(size_t)7);
	}
	if (vlen > 0) {
		memcpy(n->val, val, vlen);
	}
	n->vlen = (uint32_t)vlen;
	n->present = present;
}

/* The slot holding the node of `key`, or the empty slot ending its probe
 * run. The table must have slots. */
static size_t slot_of(const struct ordrows *t, uint64_t hash,
                      const uint8_t *key, size_t klen)
{
	size_t mask = t->cap - 1;
	size_t i = hash & mask;
	struct ordnode *n;

	while ((n = t->slots[i]) != NULL) {
		if (n->hash == hash && n->klen == klen &&
		    memcmp(ordnode_key(n), key, klen) == 0) {
			break;
		}
		i = (i + 1) & mask;
	}
	return i;
}

static void grow(struct ordrows *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct ordnode **slots = calloc(cap, sizeof *slots);
	struct ordnode *n;

	if (slots == NULL) {
		abort();
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	for (n = t->head->next[0]; n != NULL; n = n->next[0]) {
		t->slots[slot_of(t, n->hash, ordnode_key(n), n->klen)] = n;
	}
}

void ordrows_put(struct ordrows *t, uint64_t hash, const uint8_t *key,
                 size_t klen, const uint8_t *val, size_t vlen, bool present)
{
	struct ordnode *prev[ORDROWS_MAX_HEIGHT];
	struct ordnode *n;
	unsigned h;
	size_t size, slot;

	if ((t->n + 1) * 2 > t->cap) {
		grow(t);
	}
	slot = slot_of(t, hash, key, klen);
	if (t->slots[slot] != NULL) {
		set_val(t, t->slots[slot], val, vlen, present);
		return;
	}
	find_prev(t, key, klen, prev);
	h = random_height(t);
	if (h > t->height) {
		for (unsigned l = t->height; l < h; l++) {
			prev[l] = t->head;
		}
		t->height = h;
	}
	size = sizeof *n + h * sizeof n->next[0] + klen;
	n = alloc(t, size);
	n->val = NULL;
	n->hash = hash;
	n->vcap = 0;
	n->vlen = 0;
	n->klen = (uint32_t)klen;
	n->height = (uint8_t)h;
	memcpy((uint8_t *)&n->next[h], key, klen);
	for (unsigned l = 0; l < h; l++) {
		n->next[l] = prev[l]->next[l];
		prev[l]->next[l] = n;
	}
	n->prev = prev[0] == t->head ? NULL : prev[0];
	if (n->next[0] != NULL) {
		n->next[0]->prev = n;
	}
	t->slots[slot] = n;
	t->n++;
	set_val(t, n, val, vlen, present);
}

struct ordnode *ordrows_seek(const struct ordrows *t, const uint8_t *key,
                             size_t klen)
{
	struct ordnode *prev[ORDROWS_MAX_HEIGHT];

	find_prev(t, key, klen, prev);
	return prev[0]->next[0];
}

struct ordnode *ordrows_seek_prev(const struct ordrows *t, const uint8_t *key,
                                  size_t klen)
{
	struct ordnode *prev[ORDROWS_MAX_HEIGHT];
	struct ordnode *n;

	find_prev(t, key, klen, prev);
	n = prev[0]->next[0];
	if (n != NULL && node_cmp(n, key, klen) == 0) {
		return n;
	}
	return prev[0] == t->head ? NULL : prev[0];
}
