/* The expiry index and the EXPIRE command. Every TTL'd entry (KV key,
 * cache entry, fetch-or-compute lease) has an index record keyed by its
 * deadline, so the leader finds what lapsed with one range scan
 * (store_expire_scan) and proposes EXPIRE; apply re-checks each entry
 * against the entry's time, so no replica ever reclaims on its own. */
#include <string.h>

#include "store/internal.h"

static void exp_key(struct sbuf *k, uint32_t group, uint64_t expires_at,
                    uint8_t kind, const struct sbuf *what)
{
	key_start(k, group, K_EXPIRY);
	sbuf_u64(k, expires_at);
	sbuf_u8(k, kind);
	sbuf_add(k, what->p, what->len);
}

void expiry_index_put(struct tx *tx, uint64_t expires_at, uint8_t kind,
                      const struct sbuf *what)
{
	struct sbuf k;

	if (expires_at == 0) {
		return;
	}
	sbuf_init(&k);
	exp_key(&k, tx->group, expires_at, kind, what);
	tx_put(tx, &k, "", 0);
	sbuf_free(&k);
}

void expiry_index_del(struct tx *tx, uint64_t expires_at, uint8_t kind,
                      const struct sbuf *what)
{
	struct sbuf k;

	if (expires_at == 0) {
		return;
	}
	sbuf_init(&k);
	exp_key(&k, tx->group, expires_at, kind, what);
	tx_del(tx, &k);
	sbuf_free(&k);
}

int expire_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice e;
	struct sbuf k;
	int64_t reclaimed = 0;
	int rv = 0;

	sbuf_init(&k);
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &e)) {
		uint64_t at;
		uint8_t kind;
		const uint8_t *what;
		size_t wlen;

		/* An entry is the index key after group and type. */
		if (e.len < 9) {
			continue;
		}
		at = be_get64(e.p);
		kind = e.p[8];
		what = e.p + 9;
		wlen = e.len - 9;
		if (at > tx->now_ms) {
			continue; /* not lapsed at this entry's time */
		}
		switch (kind) {
		case EXP_KV:
			rv = kv_expire_key(tx, what, wlen);
			break;
		case EXP_CACHE:
			rv = cache_expire_entry(tx, what, wlen);
			break;
		case EXP_FOC:
			rv = kv_expire_lease(tx, what, wlen);
			break;
		default:
			rv = 0;
			break;
		}
		if (rv < 0) {
			break;
		}
		reclaimed += rv;
		rv = 0;
		/* A stale index record (its entry changed) goes as well. */
		key_start(&k, tx->group, K_EXPIRY);
		sbuf_add(&k, e.p, e.len);
		tx_del(tx, &k);
	}
	sbuf_free(&k);
	if (rv < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, reclaimed);
	return 0;
}

int store_expire_scan(struct store *s, uint32_t group, uint64_t now_ms,
                      uint32_t max, uint8_t **cmd, size_t *len)
{
	struct tx tx;
	struct titer it;
	struct sbuf k, items;
	struct store_cmd c;
	uint32_t n = 0;
	const char *err;
	int rv = 0;

	*cmd = NULL;
	*len = 0;
	sbuf_init(&k);
	sbuf_init(&items);
	tx_init(&tx, s, group, 0, now_ms, false);
	key_start(&k, group, K_EXPIRY);
	titer_open(&it, &tx, &k);
	for (titer_seek(&it, NULL); titer_valid(&it) && n < max;
	     titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);

		if (kl < 5 + 9 || be_get64(kp + 5) > now_ms) {
			break;
		}
		sbuf_lbytes(&items, kp + 5, kl - 5);
		n++;
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	} else if (n > 0) {
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_EXPIRE;
		c.items.n = n;
		c.items.enc = items.p;
		c.items.enc_len = items.len;
		rv = store_cmd_encode(&c, cmd, len, &err);
	}
	tx_fini(&tx);
	sbuf_free(&k);
	sbuf_free(&items);
	return rv;
}
