/* The write-back table of KV rows; see kvdirty.h. */
#include "store/kvdirty.h"
#include "store/ordrows.h"

#include <stdlib.h>
#include <string.h>

#include "store/buf.h"
#include "store/keys.h"

/* Rows live in chunks of this size (a larger row gets its own chunk):
 * a checkpoint frees a few chunks instead of a row at a time. */
#define CHUNK_BYTES (256u << 10)

struct kvchunk {
	struct kvchunk *next;
	size_t used, size;
	uint8_t data[];
};

void kvdirty_init(struct kvdirty *d)
{
	memset(d, 0, sizeof *d);
}

void kvdirty_clear(struct kvdirty *d)
{
	struct kvchunk *c = d->chunks;

	while (c != NULL) {
		struct kvchunk *next = c->next;
		free(c);
		c = next;
	}
	free(d->slots);
	kvdirty_init(d);
}

static struct kvrow *row_alloc(struct kvdirty *d, size_t klen, size_t vlen)
{
	size_t need = (sizeof(struct kvrow) + klen + vlen + 7) & ~(size_t)7;
	struct kvchunk *c = d->chunks;

	if (c == NULL || c->size - c->used < need) {
		size_t size = need > CHUNK_BYTES ? need : CHUNK_BYTES;
		c = store_xmalloc(sizeof *c + size);
		c->used = 0;
		c->size = size;
		c->next = d->chunks;
		d->chunks = c;
	}
	c->used += need;
	return (struct kvrow *)(c->data + c->used - need);
}

/* The slot holding the key, or the empty slot ending its probe run. */
static size_t find(const struct kvdirty *d, uint64_t hash, const uint8_t *key,
                   size_t klen)
{
	size_t mask = d->cap - 1;
	size_t i = (size_t)hash & mask;

	for (;;) {
		const struct kvslot *s = &d->slots[i];
		if (s->row == NULL ||
		    (s->hash == hash && s->row->klen == klen &&
		     memcmp(s->row->data, key, klen) == 0)) {
			return i;
		}
		i = (i + 1) & mask;
	}
}

static void resize(struct kvdirty *d, size_t cap)
{
	struct kvslot *old = d->slots;
	size_t oldcap = d->cap;

	d->slots = store_xmalloc(cap * sizeof *d->slots);
	memset(d->slots, 0, cap * sizeof *d->slots);
	d->cap = cap;
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i].row != NULL) {
			size_t j = find(d, old[i].hash, old[i].row->data,
			                old[i].row->klen);
			d->slots[j] = old[i];
		}
	}
	free(old);
}

void kvdirty_reserve(struct kvdirty *d, size_t n)
{
	size_t cap = 1024;

	while (cap < n * 2) {
		cap *= 2;
	}
	if (cap > d->cap) {
		resize(d, cap);
	}
}

void kvdirty_put(struct kvdirty *d, uint64_t hash, const uint8_t *key,
                 size_t klen, const uint8_t *val, size_t vlen, bool present,
                 bool fresh)
{
	struct kvrow *r;
	size_t i;

	if (!present) {
		vlen = 0;
	}
	if ((d->n + 1) * 2 > d->cap) {
		resize(d, d->cap ? d->cap * 2 : 1024);
	}
	i = find(d, hash, key, klen);
	r = d->slots[i].row;
	if (r != NULL) {
		d->bytes -= r->klen + r->vlen;
		if (vlen > r->vcap) {
			/* The old row stays in its chunk until the table is
			 * cleared; dirty bytes bound the waste. */
			struct kvrow *nr = row_alloc(d, klen, vlen);
			memcpy(nr, r, sizeof *r + klen);
			nr->vcap = (uint32_t)vlen;
			r = nr;
		}
	} else {
		r = row_alloc(d, klen, vlen);
		r->klen = (uint32_t)klen;
		r->vcap = (uint32_t)vlen;
		memcpy(r->data, key, klen);
		r->fresh = fresh;
		d->n++;
	}
	r->vlen = (uint32_t)vlen;
	r->present = present;
	if (vlen > 0) {
		memcpy(r->data + klen, val, vlen);
	}
	d->slots[i].hash = hash;
	d->slots[i].row = r;
	d->bytes += klen + vlen;
}

int kvdirty_get(const struct kvdirty *d, uint64_t hash, const uint8_t *key,
                size_t klen, const uint8_t **val, size_t *vlen)
{
	const struct kvrow *r;

	if (d->n == 0) {
		return -1;
	}
	r = d->slots[find(d, hash, key, klen)].row;
	if (r == NULL) {
		return -1;
	}
	*val = kvrow_val(r);
	*vlen = r->vlen;
	return r->present ? 1 : 0;
}

void kvdirty_drop_range(struct kvdirty *d, const uint8_t *begin, size_t blen,
                        const uint8_t *end, size_t elen)
{
	bool dropped = false;

	for (size_t i = 0; i < d->cap; i++) {
		struct kvrow *r = d->slots[i].row;
		if (r != NULL &&
		    key_cmp_bytes(r->data, r->klen, begin, blen) >= 0 &&
		    key_cmp_bytes(r->data, r->klen, end, elen) < 0) {
			d->slots[i].row = NULL;
			d->n--;
			d->bytes -= r->klen + r->vlen;
			dropped = true;
		}
	}
	if (dropped) {
		/* Rebuild: linear probing cannot leave holes in its runs. */
		resize(d, d->cap);
	}
}

void kvdirty_move(struct kvdirty *dst, struct kvdirty *src)
{
	*dst = *src;
	kvdirty_init(src);
}

static int cmp_rows(const void *a, const void *b)
{
	const struct kvrow *x = *(struct kvrow *const *)a;
	const struct kvrow *y = *(struct kvrow *const *)b;

	return key_cmp_bytes(x->data, x->klen, y->data, y->klen);
}

struct kvrow **kvdirty_sorted(const struct kvdirty *d, size_t *out)
{
	struct kvrow **rows = store_xmalloc((d->n ? d->n : 1) * sizeof *rows);
	size_t n = 0;

	for (size_t i = 0; i < d->cap; i++) {
		const struct kvrow *r = d->slots[i].row;
		if (r != NULL && kvrow_written(r)) {
			rows[n++] = d->slots[i].row;
		}
	}
	qsort(rows, n, sizeof *rows, cmp_rows);
	*out = n;
	return rows;
}

struct kvrow **kvdirty_sorted_by(const struct kvdirty *d,
                                 const struct ordrows *ob,
                                 bool (*ordered)(const uint8_t *k, size_t len),
                                 size_t *out)
{
	struct kvrow **rest, **ord, **rows;
	size_t nrest = 0, nord = 0, want = 0, n = 0, i = 0, j = 0;

	if (d->n == 0) {
		return kvdirty_sorted(d, out);
	}
	rest = store_xmalloc(d->n * sizeof *rest);
	ord = store_xmalloc(d->n * sizeof *ord);
	for (size_t s = 0; s < d->cap; s++) {
		struct kvrow *r = d->slots[s].row;
		if (r == NULL || !kvrow_written(r)) {
			continue;
		}
		if (ordered(kvrow_key(r), r->klen)) {
			want++;
		} else {
			rest[nrest++] = r;
		}
	}
	for (const struct ordnode *o = ob->head->next[0];
	     o != NULL && nord < want; o = ordrows_next(o)) {
		struct kvrow *r =
		    d->slots[find(d, o->hash, ordnode_key(o), o->klen)].row;
		if (r != NULL && kvrow_written(r)) {
			ord[nord++] = r;
		}
	}
	if (nord != want) {
		/* Not all of them in `ob`: sort them all. */
		free(rest);
		free(ord);
		return kvdirty_sorted(d, out);
	}
	qsort(rest, nrest, sizeof *rest, cmp_rows);
	rows = store_xmalloc((nrest + nord ? nrest + nord : 1) * sizeof *rows);
	while (i < nrest || j < nord) {
		if (j >= nord ||
		    (i < nrest && cmp_rows(&rest[i], &ord[j]) < 0)) {
			rows[n++] = rest[i++];
		} else {
			rows[n++] = ord[j++];
		}
	}
	free(rest);
	free(ord);
	*out = n;
	return rows;
}

void kvdirty_prefetch(const struct kvdirty *d, uint64_t hash)
{
	if (d->cap > 0) {
		__builtin_prefetch(&d->slots[(size_t)hash & (d->cap - 1)]);
	}
}

void kvdirty_prefetch_row(const struct kvdirty *d, uint64_t hash)
{
	if (d->cap > 0) {
		const struct kvslot *s = &d->slots[(size_t)hash & (d->cap - 1)];
		if (s->row != NULL && s->hash == hash) {
			__builtin_prefetch(s->row);
		}
	}
}
