/* Chained hash map; see hmap.h. */
#include "node/felix/hmap.h"

#include <stdlib.h>
#include <string.h>

#include "wire/felix_hash.h"

void hmap_init(struct hmap *m)
{
	m->buckets = NULL;
	m->nbuckets = 0;
	m->count = 0;
}

void hmap_free(struct hmap *m)
{
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct hmap_entry *e = m->buckets[i];
		while (e != NULL) {
			struct hmap_entry *n = e->next;
			free(e);
			e = n;
		}
	}
	free(m->buckets);
	hmap_init(m);
}

static struct hmap_entry **slot(const struct hmap *m, const void *key,
                                size_t klen, uint64_t h)
{
	struct hmap_entry **pp = &m->buckets[h & (m->nbuckets - 1)];
	while (*pp != NULL) {
		struct hmap_entry *e = *pp;
		if (e->hash == h && e->klen == klen &&
		    memcmp(e->key, key, klen) == 0) {
			return pp;
		}
		pp = &e->next;
	}
	return pp;
}

void *hmap_get(const struct hmap *m, const void *key, size_t klen)
{
	if (m->nbuckets == 0) {
		return NULL;
	}
	struct hmap_entry **pp = slot(m, key, klen, felix_hash64(key, klen));
	return *pp != NULL ? (*pp)->value : NULL;
}

static int grow(struct hmap *m)
{
	size_t n = m->nbuckets ? m->nbuckets * 2 : 16;
	struct hmap_entry **b = calloc(n, sizeof *b);
	if (b == NULL) {
		return -1;
	}
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct hmap_entry *e = m->buckets[i];
		while (e != NULL) {
			struct hmap_entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
	return 0;
}

int hmap_put(struct hmap *m, const void *key, size_t klen, void *value)
{
	if (m->count >= m->nbuckets && grow(m) != 0) {
		return -1;
	}
	uint64_t h = felix_hash64(key, klen);
	struct hmap_entry **pp = slot(m, key, klen, h);
	if (*pp != NULL) {
		(*pp)->value = value;
		return 0;
	}
	struct hmap_entry *e = malloc(sizeof *e + klen);
	if (e == NULL) {
		return -1;
	}
	e->next = NULL;
	e->hash = h;
	e->value = value;
	e->klen = klen;
	memcpy(e->key, key, klen);
	*pp = e;
	m->count++;
	return 0;
}

void *hmap_del(struct hmap *m, const void *key, size_t klen)
{
	if (m->nbuckets == 0) {
		return NULL;
	}
	struct hmap_entry **pp = slot(m, key, klen, felix_hash64(key, klen));
	struct hmap_entry *e = *pp;
	if (e == NULL) {
		return NULL;
	}
	void *v = e->value;
	*pp = e->next;
	free(e);
	m->count--;
	return v;
}

static void iter_fill(const struct hmap *m, struct hmap_iter *it)
{
	while (it->next == NULL && it->pos < m->nbuckets) {
		it->next = m->buckets[it->pos++];
	}
}

void hmap_iter_init(const struct hmap *m, struct hmap_iter *it)
{
	it->pos = 0;
	it->next = NULL;
	iter_fill(m, it);
}

struct hmap_entry *hmap_iter_next(const struct hmap *m, struct hmap_iter *it)
{
	struct hmap_entry *e = it->next;
	if (e != NULL) {
		it->next = e->next;
		iter_fill(m, it);
	}
	return e;
}
