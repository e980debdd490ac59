/* Extensions (store/ext.h): registration, and the transaction calls an
 * extension makes, over tx.c. */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

struct store_tx_iter {
	struct titer it;
	struct sbuf key; /* seek key */
};

int store_register_ext(struct store *s, const struct store_ext *ext)
{
	if (ext->first_op > ext->last_op ||
	    ext->first_op < STORE_OP_EXT_FIRST ||
	    ext->last_op > STORE_OP_EXT_LAST || ext->apply == NULL ||
	    s->next >= STORE_EXT_MAX) {
		return -1;
	}
	for (unsigned i = 0; i < s->next; i++) {
		if (ext->first_op <= s->ext[i].last_op &&
		    s->ext[i].first_op <= ext->last_op) {
			return -1;
		}
	}
	s->ext[s->next++] = *ext;
	return 0;
}

const struct store_ext *ext_find(const struct store *s, uint8_t op)
{
	if (op < STORE_OP_EXT_FIRST || op > STORE_OP_EXT_LAST) {
		return NULL;
	}
	for (unsigned i = 0; i < s->next; i++) {
		if (op >= s->ext[i].first_op && op <= s->ext[i].last_op) {
			return &s->ext[i];
		}
	}
	return NULL;
}

bool ext_cmd(const uint8_t *p, size_t len)
{
	return len >= 2 && p[0] == STORE_CMD_VERSION &&
	       p[1] >= STORE_OP_EXT_FIRST && p[1] <= STORE_OP_EXT_LAST;
}

uint32_t store_tx_group(const struct tx *tx)
{
	return tx->group;
}

uint64_t store_tx_now_ms(const struct tx *tx)
{
	return tx->now_ms;
}

uint64_t store_tx_index(const struct tx *tx)
{
	return tx->index;
}

bool store_tx_writable(const struct tx *tx)
{
	return tx->write;
}

int store_tx_get(struct tx *tx, const uint8_t *key, size_t klen,
                 struct sbuf *out)
{
	struct sbuf k = {(uint8_t *)key, klen, klen};
	struct val v;
	int rv = tx_get(tx, &k, &v);

	if (rv == 1) {
		sbuf_reset(out);
		sbuf_add(out, v.p, v.len);
	}
	val_free(&v);
	return rv;
}

void store_tx_put(struct tx *tx, const uint8_t *key, size_t klen, const void *v,
                  size_t vlen)
{
	struct sbuf k = {(uint8_t *)key, klen, klen};

	tx_put(tx, &k, v, vlen);
}

void store_tx_put_new(struct tx *tx, const uint8_t *key, size_t klen,
                      const void *v, size_t vlen)
{
	struct sbuf k = {(uint8_t *)key, klen, klen};

	tx_put_new(tx, &k, v, vlen);
}

void store_tx_del(struct tx *tx, const uint8_t *key, size_t klen)
{
	struct sbuf k = {(uint8_t *)key, klen, klen};

	tx_del(tx, &k);
}

struct store_tx_iter *store_tx_iter_open(struct tx *tx, const uint8_t *prefix,
                                         size_t plen)
{
	struct store_tx_iter *it = store_xmalloc(sizeof *it);
	struct sbuf p = {(uint8_t *)prefix, plen, plen};

	titer_open_bounded(&it->it, tx, &p);
	sbuf_init(&it->key);
	return it;
}

bool store_tx_iter_seek(struct store_tx_iter *it, const uint8_t *key,
                        size_t klen)
{
	if (key == NULL) {
		return titer_seek(&it->it, NULL);
	}
	sbuf_reset(&it->key);
	sbuf_add(&it->key, key, klen);
	return titer_seek(&it->it, &it->key);
}

bool store_tx_iter_seek_prev(struct store_tx_iter *it, const uint8_t *key,
                             size_t klen)
{
	sbuf_reset(&it->key);
	sbuf_add(&it->key, key, klen);
	return titer_seek_prev(&it->it, &it->key);
}

void store_tx_iter_prev(struct store_tx_iter *it)
{
	titer_prev(&it->it);
}

void store_tx_iter_narrow(struct store_tx_iter *it, const uint8_t *prefix,
                          size_t plen)
{
	titer_narrow(&it->it, prefix, plen);
}

bool store_tx_iter_valid(struct store_tx_iter *it)
{
	return titer_valid(&it->it);
}

void store_tx_iter_next(struct store_tx_iter *it)
{
	titer_next(&it->it);
}

const uint8_t *store_tx_iter_key(struct store_tx_iter *it, size_t *len)
{
	return titer_key(&it->it, len);
}

const uint8_t *store_tx_iter_value(struct store_tx_iter *it, size_t *len)
{
	return titer_value(&it->it, len);
}

int store_tx_iter_close(struct store_tx_iter *it)
{
	int rv = titer_close(&it->it);

	sbuf_free(&it->key);
	free(it);
	return rv;
}
