/* KV rows applied but not yet written to RocksDB: the write-back table of
 * KV keys (type K_KV). A SET's row goes here at apply instead of into the
 * entry's batch; a checkpoint later writes every row of the table, sorted,
 * in one batch (docs/storage.md "KV rows: write-back"). A key written many
 * times between two checkpoints costs one memtable insert, not one per
 * write.
 *
 * The table owns copies of its keys and values, in chunks freed together
 * by kvdirty_clear. Not thread-safe: store/
 * guards it (internal.h, kv_mu). */
#ifndef LS_STORE_KVDIRTY_H
#define LS_STORE_KVDIRTY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row: the key, then the value (none for a deletion). */
struct kvrow {
	uint32_t klen;
	uint32_t vlen;
	uint32_t vcap; /* room for the value */
	bool present;  /* false: the key was deleted */
	/* The key was absent from RocksDB when its first write since the
	 * last checkpoint came (the writer said so): a deletion then needs
	 * no tombstone on disk. */
	bool fresh;
	uint8_t data[];
};

struct kvslot {
	uint64_t hash; /* rowcache_hash of the key */
	struct kvrow *row;
};

struct kvchunk;

struct kvdirty {
	struct kvslot *slots; /* open addressing; cap a power of two or 0 */
	size_t cap;
	size_t n;
	size_t bytes;           /* keys and values held */
	struct kvchunk *chunks; /* where the rows live */
};

void kvdirty_init(struct kvdirty *d);
/* Frees the rows and the slots; the table is empty and usable after. */
void kvdirty_clear(struct kvdirty *d);

/* Hints for a batch of puts: the key's first slot, then (once that is
 * loaded) the row it holds. Puts of a whole entry overlap their cache
 * misses this way instead of taking them one by one. */
void kvdirty_prefetch(const struct kvdirty *d, uint64_t hash);
void kvdirty_prefetch_row(const struct kvdirty *d, uint64_t hash);

/* Makes room for `n` rows without growing (a table that replaces one
 * of about that size). */
void kvdirty_reserve(struct kvdirty *d, size_t n);

/* Records the latest write of a key (replacing an earlier one). `fresh`:
 * the write is the first of the key since RocksDB last had it written
 * (or deleted) and the key is absent there; only the first write of a
 * key in the table says it (later ones keep the row's flag). */
void kvdirty_put(struct kvdirty *d, uint64_t hash, const uint8_t *key,
                 size_t klen, const uint8_t *val, size_t vlen, bool present,
                 bool fresh);

/* The key's latest write: 1 present (*val borrows the table's copy until
 * the table changes), 0 deleted, -1 not in the table. */
int kvdirty_get(const struct kvdirty *d, uint64_t hash, const uint8_t *key,
                size_t klen, const uint8_t **val, size_t *vlen);

/* Forgets the rows whose key lies in [begin, end) (bytewise order). */
void kvdirty_drop_range(struct kvdirty *d, const uint8_t *begin, size_t blen,
                        const uint8_t *end, size_t elen);

/* Moves every row of `src` into `dst` (which must be empty); `src` is
 * left empty. */
void kvdirty_move(struct kvdirty *dst, struct kvdirty *src);

/* The rows a checkpoint writes (all but the deletions of fresh rows,
 * which are not on disk), sorted by key: a malloc'd array of `*n`
 * pointers into the table (the caller frees the array, not the rows). */
struct kvrow **kvdirty_sorted(const struct kvdirty *d, size_t *n);

struct ordrows;
/* The same for a table whose rows of the kinds `ordered` names are also
 * in `ob` (which may hold more): those are taken in ob's key order, only
 * the others are sorted, and the two lists merged. A checkpoint of Flow
 * rows spent a fifth of the node's instructions sorting them again. */
struct kvrow **kvdirty_sorted_by(const struct kvdirty *d,
                                 const struct ordrows *ob,
                                 bool (*ordered)(const uint8_t *k, size_t len),
                                 size_t *n);

static inline const uint8_t *kvrow_key(const struct kvrow *r)
{
	return r->data;
}

/* Whether a checkpoint writes the row: all but a deletion of a fresh row,
 * which is not on disk. */
static inline bool kvrow_written(const struct kvrow *r)
{
	return r->present || !r->fresh;
}

static inline const uint8_t *kvrow_val(const struct kvrow *r)
{
	return r->data + r->klen;
}

#endif
