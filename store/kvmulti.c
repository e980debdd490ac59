/* KV transactions: STORE_OP_KV_MULTI runs a list of KV commands in one
 * apply (one Raft entry, one store transaction: nothing interleaves, a
 * crash keeps all or nothing), each with its own save point and result,
 * after comparing the stamps of the keys the client watched; and
 * STORE_OP_KV_WATCH, the read that gives those stamps.
 *
 * A stamp is a digest (SHA-256, first STORE_WATCH_STAMP_LEN bytes) of
 * what a key holds as seen at the transaction's time: its type, expiry
 * and whole content (a string's value, every field and value of a hash,
 * element of a list or set, member and score of a sorted set). Apply
 * computes it the same way from the entry's time, so every replica
 * decides alike. A key that was changed and changed back to the same
 * content (and expiry) has its old stamp: that change is not seen. */
#include <openssl/evp.h>
#include <string.h>

#include "store/kv.h"

/* What a stamp is computed over: a version of the input's layout. */
static const uint8_t stamp_tag[4] = {'L', 'S', 'W', '1'};

static void digest_bytes(EVP_MD_CTX *md, const void *p, size_t len)
{
	uint8_t n[4];

	be_put32(n, (uint32_t)len);
	EVP_DigestUpdate(md, n, sizeof n);
	EVP_DigestUpdate(md, p, len);
}

/* The elements of a live collection (those that say what it holds: a
 * sorted set's members with their scores, not its score order). */
static int digest_elements(struct tx *tx, struct store_slice key, uint8_t type,
                           EVP_MD_CTX *md)
{
	struct titer ti;
	struct sbuf k;
	uint8_t sub;
	int rv;

	switch (type) {
	case T_HASH:
		sub = K_HASH;
		break;
	case T_LIST:
		sub = K_LIST;
		break;
	case T_SET:
		sub = K_SET;
		break;
	case T_ZSET:
		sub = K_ZMEMBER;
		break;
	default:
		return 0; /* strings, rate limits: the record is all */
	}
	sbuf_init(&k);
	kv_sub_prefix(&k, tx->group, sub, key);
	titer_open_bounded(&ti, tx, &k);
	for (titer_seek(&ti, NULL); titer_valid(&ti); titer_next(&ti)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&ti, &kl);
		const uint8_t *vp = titer_value(&ti, &vl);

		digest_bytes(md, kp + k.len, kl - k.len);
		digest_bytes(md, vp, vl);
	}
	rv = titer_close(&ti);
	sbuf_free(&k);
	return rv;
}

int kvmulti_stamp(struct tx *tx, struct store_slice key,
                  uint8_t stamp[STORE_WATCH_STAMP_LEN])
{
	uint8_t md_out[EVP_MAX_MD_SIZE], head[9] = {0};
	unsigned md_len = 0;
	struct kv_obj o;
	EVP_MD_CTX *md;
	int rv = 0;

	if (kv_load(tx, key, &o) != 0) {
		return -1;
	}
	md = EVP_MD_CTX_new();
	if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		kv_obj_free(&o);
		return tx_fail(tx, "watch stamp failed",
		               "SHA-256 is not available");
	}
	EVP_DigestUpdate(md, stamp_tag, sizeof stamp_tag);
	if (o.state == KV_LIVE) {
		/* The record itself: type, expiry, body (a collection's
		 * count and list positions change with its elements). */
		head[0] = o.type;
		be_put64(head + 1, o.expires);
		EVP_DigestUpdate(md, head, sizeof head);
		digest_bytes(md, o.body.p, o.body.len);
		rv = digest_elements(tx, key, o.type, md);
	} else {
		EVP_DigestUpdate(md, head, sizeof head); /* type 0: absent */
	}
	if (rv == 0 && EVP_DigestFinal_ex(md, md_out, &md_len) != 1) {
		rv = tx_fail(tx, "watch stamp failed", "SHA-256 failed");
	}
	if (rv == 0) {
		memcpy(stamp, md_out, STORE_WATCH_STAMP_LEN);
	}
	EVP_MD_CTX_free(md);
	kv_obj_free(&o);
	return rv;
}

static int watch_read(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key;
	uint8_t stamp[STORE_WATCH_STAMP_LEN];

	res_begin(res, STORE_OK);
	res_array(res, c->items.n);
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key)) {
		if (kvmulti_stamp(tx, key, stamp) != 0) {
			return -1;
		}
		res_bytes(res, stamp, sizeof stamp);
	}
	return 0;
}

/* Whether every watched key still has the stamp the client read. */
static int watches_hold(struct tx *tx, const struct store_cmd *c,
                        struct store_list_iter *it, bool *hold)
{
	uint8_t now[STORE_WATCH_STAMP_LEN];

	*hold = true;
	for (uint64_t i = 0; i < c->count; i++) {
		struct store_slice key, stamp;

		/* The decoder checked the pairs and each stamp's length. */
		(void)store_list_next(it, &key);
		(void)store_list_next(it, &stamp);
		if (!*hold) {
			continue; /* walked past for the commands after */
		}
		if (kvmulti_stamp(tx, key, now) != 0) {
			return -1;
		}
		*hold = memcmp(now, stamp.p, sizeof now) == 0;
	}
	return 0;
}

static int multi_apply(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice enc;
	struct sbuf one;
	bool hold;
	int rv = 0;

	if (!tx->write) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR a transaction is not a read: propose it");
		return 0;
	}
	store_list_iter_init(&it, &c->items);
	if (watches_hold(tx, c, &it, &hold) != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	if (!hold) {
		res_nil(res); /* as Redis: EXEC answers a null array */
		return 0;
	}
	res_array(res, (uint32_t)(c->items.n - 2 * c->count));
	sbuf_init(&one);
	while (store_list_next(&it, &enc)) {
		struct store_cmd sub;
		const char *msg;

		sbuf_reset(&one);
		if (store_cmd_decode(enc.p, enc.len, &sub, &msg) != 0) {
			/* The decoder of the transaction checked each. */
			res_error(&one, STORE_BAD_COMMAND, "ERR bad command");
		} else if (store_run_cmd(tx, &sub, &one) != 0) {
			rv = -1;
			break;
		}
		res_bytes(res, one.p, one.len);
	}
	sbuf_free(&one);
	return rv;
}

int kvmulti_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	if (c->op == STORE_OP_KV_WATCH) {
		return watch_read(tx, c, res);
	}
	return multi_apply(tx, c, res);
}
