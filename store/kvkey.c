/* KV keyspace commands on any key (docs/storage.md "KV"): INCRBY, EXISTS,
 * INCRBYFLOAT, TYPE/TTL/PTTL, PERSIST (and EXPIRE/PEXPIRE of older
 * entries: kvspace.c serves their options), APPEND, STRLEN,
 * GETRANGE, SETRANGE, GETEX, GETDEL and the
 * element count of a collection (HLEN, LLEN, SCARD, ZCARD), MSETNX. Results are
 * FSNP typed values with Redis's error texts; time is the entry's (the
 * leader's clock on reads), so apply stays deterministic. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/kv.h"

#define NOT_INT "ERR value is not an integer or out of range"

/* Redis's strict integer text: optional '-', no leading zeros (but "0"),
 * within int64. */
bool kv_parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	bool neg = false;
	if (n == 0 || n > 20) {
		return false;
	}
	if (n == 1 && p[0] == '0') {
		*out = 0;
		return true;
	}
	if (p[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i >= n || p[i] < '1' || p[i] > '9') {
		return false;
	}
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9' ||
		    v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10) {
			return false;
		}
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
		return false;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static int kv_incrby(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	int64_t cur = 0;
	char text[24];
	int n;

	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	if (o.state == KV_LIVE && !kv_parse_i64(o.body.p, o.body.len, &cur)) {
		res_error(res, STORE_ERR, NOT_INT);
		goto out;
	}
	if ((c->delta > 0 && cur > INT64_MAX - c->delta) ||
	    (c->delta < 0 && cur < INT64_MIN - c->delta)) {
		res_error(res, STORE_ERR,
		          "ERR increment or decrement would overflow");
		goto out;
	}
	cur += c->delta;
	n = snprintf(text, sizeof text, "%" PRId64, cur);
	/* As Redis, the key keeps its expiry. */
	kv_store(tx, c->key, T_STRING, o.state == KV_LIVE ? o.expires : 0, text,
	         (size_t)n, &o);
	res_begin(res, STORE_OK);
	res_i64(res, cur);
out:
	kv_obj_free(&o);
	return 0;
}

/* Redis's bound on a long double's text, parsed and printed. */
#define LD_CHARS KV_LD_CHARS
#define NOT_FLOAT "ERR value is not a valid float"

/* Redis's string2ld: strtold over the whole text (up to a NUL), no leading
 * space, no NaN, no overflow. */
bool kv_parse_ld(const uint8_t *p, size_t n, long double *out)
{
	char buf[LD_CHARS];
	char *end;
	long double v;
	if (n == 0 || n >= sizeof buf) {
		return false;
	}
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	v = strtold(buf, &end);
	if (isspace((unsigned char)buf[0]) || end[0] != '\0' ||
	    (errno == ERANGE &&
	     (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
	    errno == EINVAL || isnan(v)) {
		return false;
	}
	*out = v;
	return true;
}

size_t kv_format_ld(long double v, char *text)
{
	int n;
	if (isnan(v) || isinf(v)) {
		return 0;
	}
	n = snprintf(text, LD_CHARS, "%.17Lf", v);
	if (n <= 0 || n >= LD_CHARS) {
		return 0;
	}
	if (strchr(text, '.') != NULL) {
		while (text[n - 1] == '0') {
			n--;
		}
		if (text[n - 1] == '.') {
			n--;
		}
	}
	if (n == 2 && text[0] == '-' && text[1] == '0') {
		text[0] = '0';
		n = 1;
	}
	return (size_t)n;
}

/* INCRBYFLOAT: the sum in long double, as Redis, printed with 17 decimals
 * less trailing zeros. The same binary on every replica gives the same
 * text. */
static int kv_incrbyfloat(struct tx *tx, const struct store_cmd *c,
                          struct sbuf *res)
{
	struct kv_obj o;
	long double cur = 0, incr;
	char *text = NULL;
	int n;

	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	if ((o.state == KV_LIVE && !kv_parse_ld(o.body.p, o.body.len, &cur)) ||
	    !kv_parse_ld(c->value.p, c->value.len, &incr)) {
		res_error(res, STORE_ERR, NOT_FLOAT);
		goto out;
	}
	cur += incr;
	if (isnan(cur) || isinf(cur)) {
		res_error(res, STORE_ERR,
		          "ERR increment would produce NaN or Infinity");
		goto out;
	}
	text = malloc(LD_CHARS);
	if (text == NULL) {
		kv_obj_free(&o);
		return tx_fail(tx, "out of memory for INCRBYFLOAT", NULL);
	}
	n = (int)kv_format_ld(cur, text);
	if (n == 0) {
		res_error(res, STORE_ERR,
		          "ERR increment would produce NaN or Infinity");
		goto out;
	}
	/* As Redis, the key keeps its expiry. */
	kv_store(tx, c->key, T_STRING, o.state == KV_LIVE ? o.expires : 0, text,
	         (size_t)n, &o);
	res_begin(res, STORE_OK);
	res_bytes(res, text, (size_t)n);
out:
	free(text);
	kv_obj_free(&o);
	return 0;
}

/* SETRANGE's bound on the string it makes: an offset must not make every
 * replica allocate Redis's 512 MiB. */
#define SETRANGE_MAX (64u << 20)

static int kv_setrange(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct kv_obj o;
	struct sbuf v;
	size_t olen;

	if (c->start < 0) {
		res_error(res, STORE_ERR, "ERR offset is out of range");
		return 0;
	}
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	olen = o.state == KV_LIVE ? o.body.len : 0;
	if (c->value.len == 0) {
		res_begin(res, STORE_OK);
		res_i64(res, (int64_t)olen);
		goto out;
	}
	if ((uint64_t)c->start > SETRANGE_MAX ||
	    (uint64_t)c->start + c->value.len > SETRANGE_MAX) {
		res_error(res, STORE_ERR,
		          "ERR string exceeds maximum allowed size "
		          "(proto-max-bulk-len)");
		goto out;
	}
	sbuf_init(&v);
	if (olen > 0) {
		sbuf_add(&v, o.body.p, olen);
	}
	if (v.len < (size_t)c->start + c->value.len) {
		/* zero padding, then room for the value */
		size_t grow = (size_t)c->start + c->value.len - v.len;
		sbuf_reserve(&v, grow);
		memset(v.p + v.len, 0, grow);
		v.len += grow;
	}
	memcpy(v.p + c->start, c->value.p, c->value.len);
	/* As Redis, the key keeps its expiry. */
	kv_store(tx, c->key, T_STRING, o.state == KV_LIVE ? o.expires : 0, v.p,
	         v.len, &o);
	res_begin(res, STORE_OK);
	res_i64(res, (int64_t)v.len);
	sbuf_free(&v);
out:
	kv_obj_free(&o);
	return 0;
}

static int kv_getex(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	int rv = 0;

	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state != KV_LIVE) {
		res_begin(res, STORE_OK);
		res_nil(res);
		goto out;
	}
	if (o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		goto out;
	}
	if (c->kind == STORE_GETEX_TTL &&
	    (c->delta <= 0 || (uint64_t)c->delta >= UINT64_MAX - tx->now_ms)) {
		res_error(res, STORE_ERR,
		          "ERR invalid expire time in 'getex' command");
		goto out;
	}
	res_begin(res, STORE_OK);
	res_bytes(res, o.body.p, o.body.len);
	switch (c->kind) {
	case STORE_GETEX_TTL:
		kv_store(tx, c->key, T_STRING, tx->now_ms + (uint64_t)c->delta,
		         o.body.p, o.body.len, &o);
		break;
	case STORE_GETEX_AT:
		/* a deadline already past deletes the key, as Redis */
		if (c->delta <= 0 || (uint64_t)c->delta <= tx->now_ms) {
			rv = kv_clear(tx, c->key, &o);
		} else {
			kv_store(tx, c->key, T_STRING, (uint64_t)c->delta,
			         o.body.p, o.body.len, &o);
		}
		break;
	case STORE_GETEX_PERSIST:
		if (o.expires != 0) {
			kv_store(tx, c->key, T_STRING, 0, o.body.p, o.body.len,
			         &o);
		}
		break;
	default:
		break;
	}
out:
	kv_obj_free(&o);
	return rv;
}

static int kv_exists(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key;
	int64_t n = 0;

	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key)) {
		struct kv_obj o;
		if (kv_load(tx, key, &o) != 0) {
			return -1;
		}
		n += o.state == KV_LIVE;
		kv_obj_free(&o);
	}
	res_begin(res, STORE_OK);
	res_i64(res, n);
	return 0;
}

static int kv_keyinfo(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	static const char *const names[] = {"none", "string", "hash",  "list",
	                                    "set",  "zset",   "string"};
	struct kv_obj o;

	if (kv_load(tx, c->key, &o) != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	if (c->kind == STORE_KEYINFO_TYPE) {
		res_str(res, o.state != KV_LIVE ? "none"
		             : o.type < sizeof names / sizeof names[0]
		                 ? names[o.type]
		                 : "none");
	} else if (o.state != KV_LIVE) {
		res_i64(res, -2);
	} else if (o.expires == 0) {
		res_i64(res, -1);
	} else {
		uint64_t ms = o.expires - tx->now_ms;
		res_i64(res, c->kind == STORE_KEYINFO_PTTL
		                 ? (int64_t)ms
		                 : (int64_t)((ms + 500) / 1000));
	}
	kv_obj_free(&o);
	return 0;
}

static int kv_expire_set(struct tx *tx, const struct store_cmd *c,
                         struct sbuf *res)
{
	struct kv_obj o;
	int64_t n = 0;
	int rv = 0;

	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state != KV_LIVE) {
		goto done;
	}
	if (c->kind == STORE_EXPIRE_NONE) {
		/* PERSIST */
		if (o.expires != 0) {
			kv_store(tx, c->key, o.type, 0, o.body.p, o.body.len,
			         &o);
			n = 1;
		}
		goto done;
	}
	n = 1;
	if (c->delta <= 0 || (uint64_t)c->delta >= UINT64_MAX - tx->now_ms) {
		/* A deadline already past deletes the key, as Redis. */
		if (c->delta <= 0) {
			rv = kv_clear(tx, c->key, &o);
			goto done;
		}
		res_error(res, STORE_ERR,
		          "ERR invalid expire time in 'expire' command");
		kv_obj_free(&o);
		return 0;
	}
	kv_store(tx, c->key, o.type, tx->now_ms + (uint64_t)c->delta, o.body.p,
	         o.body.len, &o);
done:
	kv_obj_free(&o);
	if (rv == 0) {
		res_begin(res, STORE_OK);
		res_i64(res, n);
	}
	return rv;
}

static int kv_append(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	struct sbuf v;
	int64_t len;

	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		kv_obj_free(&o);
		return 0;
	}
	sbuf_init(&v);
	if (o.state == KV_LIVE) {
		sbuf_add(&v, o.body.p, o.body.len);
	}
	sbuf_add(&v, c->value.p, c->value.len);
	len = (int64_t)v.len;
	kv_store(tx, c->key, T_STRING, o.state == KV_LIVE ? o.expires : 0, v.p,
	         v.len, &o);
	sbuf_free(&v);
	kv_obj_free(&o);
	res_begin(res, STORE_OK);
	res_i64(res, len);
	return 0;
}

static int kv_strlen(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	if (kv_load(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
	} else {
		res_begin(res, STORE_OK);
		res_i64(res, o.state == KV_LIVE ? (int64_t)o.body.len : 0);
	}
	kv_obj_free(&o);
	return 0;
}

/* GETRANGE: Redis's clamping, so an empty or inverted range gives "". */
static int kv_getrange(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct kv_obj o;
	int64_t len, start = c->start, stop = c->stop;
	if (kv_load(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
		kv_obj_free(&o);
		return 0;
	}
	len = o.state == KV_LIVE ? (int64_t)o.body.len : 0;
	res_begin(res, STORE_OK);
	if (start < 0 && stop < 0 && start > stop) {
		len = 0;
	}
	if (start < 0) {
		start = start < -len ? 0 : len + start;
	}
	if (stop < 0) {
		stop = stop < -len ? 0 : len + stop;
	}
	if (stop >= len) {
		stop = len - 1;
	}
	if (len == 0 || start > stop) {
		res_bytes(res, "", 0);
	} else {
		res_bytes(res, o.body.p + start, (size_t)(stop - start + 1));
	}
	kv_obj_free(&o);
	return 0;
}

static int kv_getdel(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	int rv = 0;
	if (kv_load_w(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != T_STRING) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
	} else if (o.state != KV_LIVE) {
		res_begin(res, STORE_OK);
		res_nil(res);
	} else {
		res_begin(res, STORE_OK);
		res_bytes(res, o.body.p, o.body.len);
		rv = kv_clear(tx, c->key, &o);
	}
	kv_obj_free(&o);
	return rv;
}

/* HLEN, LLEN, SCARD, ZCARD: `kind` is the type asked for; a collection's
 * body starts with its element count. */
static int kv_len(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct kv_obj o;
	if (kv_load(tx, c->key, &o) != 0) {
		return -1;
	}
	if (o.state == KV_LIVE && o.type != c->kind) {
		res_error(res, STORE_WRONGTYPE, KV_WRONGTYPE);
	} else {
		res_begin(res, STORE_OK);
		res_i64(res, o.state == KV_LIVE && o.body.len >= 8
		                 ? (int64_t)be_get64(o.body.p)
		                 : 0);
	}
	kv_obj_free(&o);
	return 0;
}

/* MSETNX: every key set when none exists, else nothing. */
static int kv_msetnx(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct store_list_iter it;
	struct store_slice key, value;

	if (c->items.n == 0 || c->items.n % 2 != 0) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR wrong number of arguments for 'msetnx' command");
		return 0;
	}
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key) && store_list_next(&it, &value)) {
		struct kv_obj o;
		bool live;
		if (kv_load(tx, key, &o) != 0) {
			return -1;
		}
		live = o.state == KV_LIVE;
		kv_obj_free(&o);
		if (live) {
			res_begin(res, STORE_OK);
			res_i64(res, 0);
			return 0;
		}
	}
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &key) && store_list_next(&it, &value)) {
		struct kv_obj o;
		if (kv_load_w(tx, key, &o) != 0) {
			return -1;
		}
		kv_store(tx, key, T_STRING, 0, value.p, value.len, &o);
		kv_obj_free(&o);
	}
	res_begin(res, STORE_OK);
	res_i64(res, 1);
	return 0;
}

int kvkey_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	switch (c->op) {
	case STORE_OP_KV_INCRBY:
		return kv_incrby(tx, c, res);
	case STORE_OP_KV_EXISTS:
		return kv_exists(tx, c, res);
	case STORE_OP_KV_KEYINFO:
		return kv_keyinfo(tx, c, res);
	case STORE_OP_KV_EXPIRE_SET:
		return kv_expire_set(tx, c, res);
	case STORE_OP_KV_APPEND:
		return kv_append(tx, c, res);
	case STORE_OP_KV_STRLEN:
		return kv_strlen(tx, c, res);
	case STORE_OP_KV_GETDEL:
		return kv_getdel(tx, c, res);
	case STORE_OP_KV_GETRANGE:
		return kv_getrange(tx, c, res);
	case STORE_OP_KV_INCRBYFLOAT:
		return kv_incrbyfloat(tx, c, res);
	case STORE_OP_KV_SETRANGE:
		return kv_setrange(tx, c, res);
	case STORE_OP_KV_GETEX:
		return kv_getex(tx, c, res);
	case STORE_OP_KV_MSETNX:
		return kv_msetnx(tx, c, res);
	default:
		return kv_len(tx, c, res);
	}
}
