/* Extensions: data types implemented outside store/ on its transaction.
 *
 * An extension (flow/ is one) registers a range of store ops inside
 * [STORE_OP_EXT_FIRST, STORE_OP_EXT_LAST]. A command of such an op is
 *
 *     u8 version (= STORE_CMD_VERSION)
 *     u8 op
 *     the extension's own bytes
 *
 * store/ does not decode it: apply and store_read hand the whole command
 * to the extension with the entry's transaction (reads see the entry's
 * own earlier writes; an error result rolls the command's writes back, as
 * for store/'s own ops). The extension writes one result (store/result.h)
 * into `res`. Its keys must lie in the group's key range (key type bytes
 * reserved for it in store/keys.h), so that snapshots and state transfer
 * carry them; replayed entries never reach it.
 *
 * store/ knows nothing of an extension beyond this interface: it includes
 * no extension header. Registration is per store, before any apply. */
#ifndef LS_STORE_EXT_H
#define LS_STORE_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/result.h"

struct store;
struct tx; /* one apply's or one read's transaction (opaque here) */

/* Applies (or, for reads, serves) one command of the extension's range.
 * Returns 0 with a result in `res` (an error status rolls the command's
 * writes back), STORE_EXT_KEEP with an error result whose writes stand
 * (the command failed but changed state, e.g. a flow timed out), or -1
 * when the node cannot continue (an I/O failure the transaction
 * recorded). */
#define STORE_EXT_KEEP 1

typedef int (*store_ext_apply_fn)(void *data, struct tx *tx, const uint8_t *cmd,
                                  size_t len, struct sbuf *res);

struct store_ext {
	uint8_t first_op; /* inclusive, within the extension range */
	uint8_t last_op;
	/* Whether store_read() may serve the op (no proposal needed). */
	bool (*is_read)(uint8_t op);
	store_ext_apply_fn apply;
	void *data;
};

#define STORE_EXT_MAX 4

/* Registers (copies) `ext`. Returns 0, or -1 when its range is empty,
 * leaves the extension range, overlaps a registered one, or STORE_EXT_MAX
 * are registered. */
int store_register_ext(struct store *s, const struct store_ext *ext);

/* --- The transaction, as an extension sees it ----------------------------- */

uint32_t store_tx_group(const struct tx *tx);
/* The entry's time (leader-stamped), or the leader's clock for reads. */
uint64_t store_tx_now_ms(const struct tx *tx);
/* The entry's Raft index; 0 for reads. */
uint64_t store_tx_index(const struct tx *tx);
/* False for reads: the extension must not write then. */
bool store_tx_writable(const struct tx *tx);

/* Point read: 1 found (a copy of the value replaces `out`'s contents), 0
 * absent, -1 failure. */
int store_tx_get(struct tx *tx, const uint8_t *key, size_t klen,
                 struct sbuf *out);
void store_tx_put(struct tx *tx, const uint8_t *key, size_t klen, const void *v,
                  size_t vlen);
void store_tx_del(struct tx *tx, const uint8_t *key, size_t klen);
/* store_tx_put of a key the caller knows is absent from the state the
 * transaction sees (an index entry whose key the record's previous
 * version did not have): if it is deleted again before it reaches the
 * disk, no deletion is written there either. Wrong use loses data: a
 * later deletion of a key that is on disk would not reach it. */
void store_tx_put_new(struct tx *tx, const uint8_t *key, size_t klen,
                      const void *v, size_t vlen);

/* Iterator over the keys starting with a prefix. Writes made while an
 * iterator is open may or may not be seen by it: collect, close, then
 * write. */
struct store_tx_iter;

struct store_tx_iter *store_tx_iter_open(struct tx *tx, const uint8_t *prefix,
                                         size_t plen);
/* Positions at the first key >= key (the prefix start when key is NULL);
 * returns whether a key under the prefix is there. */
bool store_tx_iter_seek(struct store_tx_iter *it, const uint8_t *key,
                        size_t klen);
/* Positions at the last key <= key; returns whether it is under the
 * prefix. With store_tx_iter_prev, a descending walk. */
bool store_tx_iter_seek_prev(struct store_tx_iter *it, const uint8_t *key,
                             size_t klen);
/* Until it is narrowed again, the iterator's forward walks end at the
 * last key under `prefix` (which lies under the iterator's own prefix):
 * a walk that stops at the first key past a sub-range then does not step
 * over the deleted rows that follow it. Takes effect at the next seek. */
void store_tx_iter_narrow(struct store_tx_iter *it, const uint8_t *prefix,
                          size_t plen);
bool store_tx_iter_valid(struct store_tx_iter *it);
void store_tx_iter_next(struct store_tx_iter *it);
void store_tx_iter_prev(struct store_tx_iter *it);
const uint8_t *store_tx_iter_key(struct store_tx_iter *it, size_t *len);
const uint8_t *store_tx_iter_value(struct store_tx_iter *it, size_t *len);
/* Closes and frees; -1 (the transaction failed) on an iterator error. */
int store_tx_iter_close(struct store_tx_iter *it);

#endif
