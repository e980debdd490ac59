/* hmap: a chained hash map from byte-string keys to pointers, for the
 * node's in-memory indexes (scope cache, subscription topics).
 *
 * The map owns a copy of every key; values are the caller's. Lookups and
 * inserts are O(1) on average; the table doubles past a load of 1. Not
 * thread-safe (reactor only). */
#ifndef LS_NODE_HMAP_H
#define LS_NODE_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap_entry {
	struct hmap_entry *next;
	uint64_t hash;
	void *value;
	size_t klen;
	uint8_t key[]; /* owned copy */
};

struct hmap {
	struct hmap_entry **buckets;
	size_t nbuckets; /* a power of two, or 0 before the first insert */
	size_t count;
};

void hmap_init(struct hmap *m);
/* Frees the entries and keys (not the values). */
void hmap_free(struct hmap *m);

void *hmap_get(const struct hmap *m, const void *key, size_t klen);
/* Sets key -> value (replacing). 0, or -1 when out of memory. */
int hmap_put(struct hmap *m, const void *key, size_t klen, void *value);
/* Removes the key; returns its value or NULL. */
void *hmap_del(struct hmap *m, const void *key, size_t klen);

/* Iteration. The map must not change during a walk, except by hmap_del()
 * of the entry just returned (its successor was fetched already). */
struct hmap_iter {
	size_t pos;
	struct hmap_entry *next;
};
void hmap_iter_init(const struct hmap *m, struct hmap_iter *it);
/* The next entry, or NULL at the end. */
struct hmap_entry *hmap_iter_next(const struct hmap *m, struct hmap_iter *it);

#endif
