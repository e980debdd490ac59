/* The ordered write-back rows: each key's latest write (a value or a
 * deletion) since the last checkpoint, for the kinds of rows that applies
 * and reads walk with iterators (Flow rows). A skiplist in key order
 * (bytewise, as the data column family); store/tx.c merges it with
 * RocksDB's iterator, a deletion here hiding the row RocksDB still has.
 *
 * The table owns copies of its keys and values, in chunks freed together
 * by ordrows_clear (a table of many small rows freed one by one left
 * malloc sorting its free lists at every later allocation). A node lives
 * until ordrows_clear, so a position (a node pointer) stays valid across
 * later puts; its value pointer only until the next put of that key. Not
 * thread-safe: the reactor alone uses it (store/internal.h, `ob`). */
#ifndef LS_STORE_ORDROWS_H
#define LS_STORE_ORDROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ORDROWS_MAX_HEIGHT 20

struct ordnode {
	uint8_t *val;  /* vcap bytes in a chunk; NULL while vcap is 0 */
	uint64_t hash; /* the caller's hash of the key */
	uint32_t klen;
	uint32_t vlen;
	uint32_t vcap;
	bool present; /* false: the key was deleted */
	uint8_t height;
	struct ordnode *prev;   /* level 0, NULL for the first node */
	struct ordnode *next[]; /* `height` links, then the key */
};

struct ordchunk;

struct ordrows {
	struct ordnode *head; /* a key-less node of ORDROWS_MAX_HEIGHT links */
	/* Every node by its key's hash (open addressing, cap a power of
	 * two): a write of a key the table holds finds it without a search,
	 * which in a table of many nodes is a cache miss per step. */
	struct ordnode **slots;
	size_t cap;
	unsigned height; /* levels in use */
	size_t n;        /* nodes */
	size_t bytes;    /* chunk bytes used: nodes, keys, values */
	struct ordchunk *chunks;
	uint64_t rnd; /* xorshift state for node heights */
};

/* 0, or -1 when out of memory. */
int ordrows_init(struct ordrows *t);
/* Frees every node; the table is empty and usable after. */
void ordrows_clear(struct ordrows *t);
/* Frees everything; the table is unusable after. */
void ordrows_fini(struct ordrows *t);

/* Records the latest write of a key (replacing an earlier one); `hash`
 * is the key's hash, the same for every write of the key. */
void ordrows_put(struct ordrows *t, uint64_t hash, const uint8_t *key,
                 size_t klen, const uint8_t *val, size_t vlen, bool present);

/* The first node whose key is >= `key`, or NULL. */
struct ordnode *ordrows_seek(const struct ordrows *t, const uint8_t *key,
                             size_t klen);
/* The last node whose key is <= `key`, or NULL. */
struct ordnode *ordrows_seek_prev(const struct ordrows *t, const uint8_t *key,
                                  size_t klen);

static inline struct ordnode *ordrows_next(const struct ordnode *n)
{
	return n->next[0];
}

static inline struct ordnode *ordrows_prev(const struct ordnode *n)
{
	return n->prev;
}

static inline const uint8_t *ordnode_key(const struct ordnode *n)
{
	return (const uint8_t *)&n->next[n->height];
}

/* Bytewise order, shorter first on a common prefix (RocksDB's). */
int ordrows_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

#endif
