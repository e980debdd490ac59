/* Counters beside a cache shard: a signed 64-bit sum per key, changed by
 * deltas. A key never written has no record, which is how "never written"
 * differs from 0. A delta that would take the sum outside the i64 range
 * is refused with an error and the sum stays as it was. Cache compaction
 * never touches counters. */
#include <string.h>

#include "store/internal.h"

static void counter_key(struct sbuf *k, uint32_t group,
                        const struct store_cmd *c)
{
	key_start(k, group, K_COUNTER);
	key_shard(k, c->scope, c->shard);
	sbuf_add(k, c->key.p, c->key.len);
}

/* 1 found, 0 absent, -1 failure. */
static int counter_load(struct tx *tx, const struct sbuf *k, int64_t *sum)
{
	struct val v;
	int found = tx_get(tx, k, &v);

	*sum = 0;
	if (found > 0) {
		if (v.len != 8) {
			found = tx_fail(tx, "corrupt counter", NULL);
		} else {
			*sum = (int64_t)be_get64((const uint8_t *)v.p);
		}
	}
	val_free(&v);
	return found;
}

int counter_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct sbuf k;
	int64_t sum;
	int found;

	if (!check_scope(c, res)) {
		return 0;
	}
	sbuf_init(&k);
	counter_key(&k, tx->group, c);
	found = counter_load(tx, &k, &sum);
	if (found < 0) {
		sbuf_free(&k);
		return -1;
	}
	if (c->op == STORE_OP_COUNTER_GET) {
		res_begin(res, STORE_OK);
		if (found) {
			res_i64(res, sum);
		} else {
			res_nil(res);
		}
	} else if ((c->delta > 0 && sum > INT64_MAX - c->delta) ||
	           (c->delta < 0 && sum < INT64_MIN - c->delta)) {
		res_error(res, STORE_ERR, "ERR counter would overflow");
	} else {
		uint8_t v[8];
		sum += c->delta;
		be_put64(v, (uint64_t)sum);
		tx_put(tx, &k, v, sizeof v);
		res_begin(res, STORE_OK);
		res_i64(res, sum);
	}
	sbuf_free(&k);
	return 0;
}

int store_counter_get(struct store *s, uint32_t group, struct store_slice scope,
                      uint32_t shard, struct store_slice key, int64_t *value,
                      bool *found)
{
	struct tx tx;
	struct store_cmd c;
	struct sbuf k;
	int rv;

	memset(&c, 0, sizeof c);
	c.scope = scope;
	c.shard = shard;
	c.key = key;
	sbuf_init(&k);
	counter_key(&k, group, &c);
	tx_init(&tx, s, group, 0, 0, false);
	rv = counter_load(&tx, &k, value);
	tx_fini(&tx);
	sbuf_free(&k);
	*found = rv > 0;
	return rv < 0 ? -1 : 0;
}
