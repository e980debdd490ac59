/* FSNP typed values: validating decoder, views, builder; see fsnp_value.h. */
#include "wire/fsnp_value.h"

#include <string.h>

/* The encoding of {} that an empty request body stands for. */
static const uint8_t empty_map_enc[5] = {FSNP_MAP, 0, 0, 0, 0};

static const char *const status_names[] = {
    "ok", "error", "auth", "noperm", "busy", "reroute", "bad_request",
};

const char *fsnp_status_name(unsigned status)
{
	if (status >= sizeof status_names / sizeof status_names[0]) {
		return NULL;
	}
	return status_names[status];
}

struct decoder {
	uint32_t max_items;
	uint32_t max_depth;
	uint32_t budget; /* container items still allowed in this value */
};

static void decoder_init(struct decoder *d, const struct fsnp_limits *lim)
{
	d->max_items = lim ? lim->max_items : FSNP_MAX_ITEMS_DEFAULT;
	d->max_depth = lim ? lim->max_depth : FSNP_MAX_DEPTH_DEFAULT;
	if (d->max_depth > FSNP_MAX_DEPTH_HARD) {
		d->max_depth = FSNP_MAX_DEPTH_HARD;
	}
	d->budget = d->max_items;
}

/* Re-parsing a value that was validated before: no item limit, the hard
 * depth bound only to keep the recursion finite. */
static void decoder_init_trusted(struct decoder *d)
{
	d->max_items = UINT32_MAX;
	d->max_depth = FSNP_MAX_DEPTH_HARD + 1;
	d->budget = UINT32_MAX;
}

static double f64_from_bits(uint64_t bits)
{
	double f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* Parse and validate the value at p (p < end is not required). The error
 * order follows the reference decoder, so clients see the same message. */
static int decode_one(struct decoder *d, const uint8_t *p, const uint8_t *end,
                      unsigned depth, struct fsnp_val *out)
{
	if (p >= end) {
		return FSNP_ERR_VALUE_EMPTY;
	}
	size_t avail = (size_t)(end - p);
	out->enc = p;
	switch (p[0]) {
	case FSNP_NIL:
	case FSNP_TRUE:
	case FSNP_FALSE:
		out->tag = (enum fsnp_tag)p[0];
		out->enc_len = 1;
		return 0;
	case FSNP_I64:
	case FSNP_F64:
	case FSNP_U64: {
		if (avail < 9) {
			return FSNP_ERR_VALUE_TAG;
		}
		uint64_t raw = wire_load_u64(p + 1);
		out->tag = (enum fsnp_tag)p[0];
		out->enc_len = 9;
		if (p[0] == FSNP_I64) {
			out->as.i = (int64_t)raw;
		} else if (p[0] == FSNP_U64) {
			out->as.u = raw;
		} else {
			out->as.f = f64_from_bits(raw);
		}
		return 0;
	}
	case FSNP_BIN: {
		if (avail < 5) {
			return FSNP_ERR_VALUE_TAG;
		}
		uint32_t len = wire_load_u32(p + 1);
		if (len > avail - 5) {
			return FSNP_ERR_VALUE_BIN_TRUNCATED;
		}
		out->tag = FSNP_BIN;
		out->as.bin.ptr = p + 5;
		out->as.bin.len = len;
		out->enc_len = 5 + (size_t)len;
		return 0;
	}
	case FSNP_ARRAY:
	case FSNP_MAP: {
		if (avail < 5) {
			return FSNP_ERR_VALUE_TAG;
		}
		bool map = p[0] == FSNP_MAP;
		uint32_t count = wire_load_u32(p + 1);
		if (depth >= d->max_depth) {
			return FSNP_ERR_VALUE_DEPTH;
		}
		if (count > d->max_items) {
			return FSNP_ERR_VALUE_CONTAINER_ITEMS;
		}
		if (count > d->budget) {
			return FSNP_ERR_VALUE_TOTAL_ITEMS;
		}
		d->budget -= count;
		const uint8_t *q = p + 5;
		for (uint32_t i = 0; i < count; i++) {
			if (map) {
				if (end - q < 4) {
					return FSNP_ERR_VALUE_MAP_TRUNCATED;
				}
				uint32_t klen = wire_load_u32(q);
				q += 4;
				if (klen > (size_t)(end - q)) {
					return FSNP_ERR_VALUE_BIN_TRUNCATED;
				}
				q += klen;
			}
			struct fsnp_val child;
			int rv = decode_one(d, q, end, depth + 1, &child);
			if (rv != 0) {
				return rv;
			}
			q += child.enc_len;
		}
		out->tag = map ? FSNP_MAP : FSNP_ARRAY;
		out->as.count = count;
		out->enc_len = (size_t)(q - p);
		return 0;
	}
	default:
		return FSNP_ERR_VALUE_TAG;
	}
}

int fsnp_value_decode(const uint8_t *p, size_t len,
                      const struct fsnp_limits *lim, struct fsnp_val *out,
                      size_t *used)
{
	struct decoder d;
	struct fsnp_val v;
	if (len == 0) {
		return FSNP_ERR_VALUE_EMPTY; /* p may be NULL */
	}
	decoder_init(&d, lim);
	int rv = decode_one(&d, p, p + len, 0, &v);
	if (rv != 0) {
		return rv;
	}
	*out = v;
	if (used != NULL) {
		*used = v.enc_len;
	}
	return 0;
}

int fsnp_value_decode_body(const uint8_t *p, size_t len,
                           const struct fsnp_limits *lim, struct fsnp_val *out)
{
	if (len == 0) {
		out->tag = FSNP_MAP;
		out->enc = empty_map_enc;
		out->enc_len = sizeof empty_map_enc;
		out->as.count = 0;
		return 0;
	}
	size_t used;
	int rv = fsnp_value_decode(p, len, lim, out, &used);
	if (rv != 0) {
		return rv;
	}
	return used == len ? 0 : FSNP_ERR_TRAILING_BYTES;
}

int fsnp_value_decode_response(const uint8_t *p, size_t len,
                               const struct fsnp_limits *lim, uint16_t *status,
                               struct fsnp_val *out)
{
	if (len < 2 || fsnp_status_name(wire_load_u16(p)) == NULL) {
		return FSNP_ERR_STATUS;
	}
	size_t used;
	int rv = fsnp_value_decode(p + 2, len - 2, lim, out, &used);
	if (rv != 0) {
		return rv;
	}
	if (used != len - 2) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	*status = wire_load_u16(p);
	return 0;
}

void fsnp_iter_init(struct fsnp_iter *it, const struct fsnp_val *v)
{
	if (v->tag == FSNP_ARRAY || v->tag == FSNP_MAP) {
		it->p = v->enc + 5;
		it->end = v->enc + v->enc_len;
		it->left = v->as.count;
		it->map = v->tag == FSNP_MAP;
	} else {
		it->p = NULL;
		it->end = NULL;
		it->left = 0;
		it->map = false;
	}
}

bool fsnp_iter_next(struct fsnp_iter *it, struct fsnp_bytes *key,
                    struct fsnp_val *val)
{
	if (it->left == 0) {
		return false;
	}
	struct fsnp_bytes k = {NULL, 0};
	const uint8_t *q = it->p;
	if (it->map) {
		/* Validated before; these checks guard forged views. */
		if (it->end - q < 4) {
			goto err_malformed;
		}
		k.len = wire_load_u32(q);
		q += 4;
		if (k.len > (size_t)(it->end - q)) {
			goto err_malformed;
		}
		k.ptr = q;
		q += k.len;
	}
	struct decoder d;
	decoder_init_trusted(&d);
	if (decode_one(&d, q, it->end, 0, val) != 0) {
		goto err_malformed;
	}
	it->p = q + val->enc_len;
	it->left--;
	if (key != NULL) {
		*key = k;
	}
	return true;

err_malformed:
	it->left = 0;
	return false;
}

bool fsnp_val_is_nil(const struct fsnp_val *v)
{
	return v->tag == FSNP_NIL;
}

int fsnp_val_bool(const struct fsnp_val *v, bool *out)
{
	if (v->tag != FSNP_TRUE && v->tag != FSNP_FALSE) {
		return FSNP_ERR_TYPE;
	}
	*out = v->tag == FSNP_TRUE;
	return 0;
}

int fsnp_val_i64(const struct fsnp_val *v, int64_t *out)
{
	if (v->tag == FSNP_I64) {
		*out = v->as.i;
		return 0;
	}
	if (v->tag == FSNP_U64 && v->as.u <= (uint64_t)INT64_MAX) {
		*out = (int64_t)v->as.u;
		return 0;
	}
	return FSNP_ERR_TYPE;
}

int fsnp_val_u64(const struct fsnp_val *v, uint64_t *out)
{
	if (v->tag == FSNP_U64) {
		*out = v->as.u;
		return 0;
	}
	if (v->tag == FSNP_I64 && v->as.i >= 0) {
		*out = (uint64_t)v->as.i;
		return 0;
	}
	return FSNP_ERR_TYPE;
}

int fsnp_val_f64(const struct fsnp_val *v, double *out)
{
	switch (v->tag) {
	case FSNP_F64:
		*out = v->as.f;
		return 0;
	case FSNP_I64:
		*out = (double)v->as.i;
		return 0;
	case FSNP_U64:
		*out = (double)v->as.u;
		return 0;
	default:
		return FSNP_ERR_TYPE;
	}
}

int fsnp_val_bin(const struct fsnp_val *v, struct fsnp_bytes *out)
{
	if (v->tag != FSNP_BIN) {
		return FSNP_ERR_TYPE;
	}
	*out = v->as.bin;
	return 0;
}

int fsnp_map_get_n(const struct fsnp_val *map, const void *key, size_t len,
                   struct fsnp_val *out)
{
	if (map->tag != FSNP_MAP) {
		return FSNP_ERR_TYPE;
	}
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	bool found = false;
	fsnp_iter_init(&it, map);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (k.len == len &&
		    (len == 0 || memcmp(k.ptr, key, len) == 0)) {
			*out = v;
			found = true;
		}
	}
	return found ? 0 : FSNP_ERR_NOT_FOUND;
}

int fsnp_map_get(const struct fsnp_val *map, const char *key,
                 struct fsnp_val *out)
{
	return fsnp_map_get_n(map, key, strlen(key), out);
}

int fsnp_map_bool(const struct fsnp_val *map, const char *key, bool *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	return rv != 0 ? rv : fsnp_val_bool(&v, out);
}

int fsnp_map_i64(const struct fsnp_val *map, const char *key, int64_t *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	return rv != 0 ? rv : fsnp_val_i64(&v, out);
}

int fsnp_map_u64(const struct fsnp_val *map, const char *key, uint64_t *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	return rv != 0 ? rv : fsnp_val_u64(&v, out);
}

int fsnp_map_f64(const struct fsnp_val *map, const char *key, double *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	return rv != 0 ? rv : fsnp_val_f64(&v, out);
}

int fsnp_map_bin(const struct fsnp_val *map, const char *key,
                 struct fsnp_bytes *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	return rv != 0 ? rv : fsnp_val_bin(&v, out);
}

static int map_container(const struct fsnp_val *map, const char *key,
                         enum fsnp_tag tag, struct fsnp_val *out)
{
	struct fsnp_val v;
	int rv = fsnp_map_get(map, key, &v);
	if (rv != 0) {
		return rv;
	}
	if (v.tag != tag) {
		return FSNP_ERR_TYPE;
	}
	*out = v;
	return 0;
}

int fsnp_map_array(const struct fsnp_val *map, const char *key,
                   struct fsnp_val *out)
{
	return map_container(map, key, FSNP_ARRAY, out);
}

int fsnp_map_map(const struct fsnp_val *map, const char *key,
                 struct fsnp_val *out)
{
	return map_container(map, key, FSNP_MAP, out);
}

bool fsnp_bytes_eq(struct fsnp_bytes b, const char *s)
{
	size_t n = strlen(s);
	return b.len == n && (n == 0 || memcmp(b.ptr, s, n) == 0);
}

void fsnp_w_init(struct fsnp_writer *w, struct wbuf *buf)
{
	w->buf = buf;
	w->err = 0;
	w->depth = 0;
}

static bool w_ok(struct fsnp_writer *w)
{
	if (w->err == 0 && w->buf->oom) {
		w->err = FSNP_ERR_NOMEM;
	}
	return w->err == 0;
}

static void w_fail(struct fsnp_writer *w, int err)
{
	if (w->err == 0) {
		w->err = err;
	}
}

/* Account for one value about to be written in the open container. */
static bool w_value_slot(struct fsnp_writer *w)
{
	if (!w_ok(w)) {
		return false;
	}
	if (w->depth == 0) {
		return true;
	}
	if (w->open[w->depth - 1].map) {
		if (!w->open[w->depth - 1].keyed) {
			w_fail(w, FSNP_ERR_WRITER);
			return false;
		}
		w->open[w->depth - 1].keyed = false;
	}
	if (w->open[w->depth - 1].count == UINT32_MAX) {
		w_fail(w, FSNP_ERR_TOO_LONG);
		return false;
	}
	w->open[w->depth - 1].count++;
	return true;
}

static void w_fixed(struct fsnp_writer *w, uint8_t tag, uint64_t raw)
{
	if (!w_value_slot(w)) {
		return;
	}
	uint8_t *p = wbuf_extend(w->buf, 9);
	if (p == NULL) {
		w_fail(w, FSNP_ERR_NOMEM);
		return;
	}
	p[0] = tag;
	wire_store_u64(p + 1, raw);
}

static void w_byte(struct fsnp_writer *w, uint8_t tag)
{
	if (w_value_slot(w) && wbuf_put_u8(w->buf, tag) != 0) {
		w_fail(w, FSNP_ERR_NOMEM);
	}
}

void fsnp_w_status(struct fsnp_writer *w, uint16_t status)
{
	if (!w_ok(w)) {
		return;
	}
	if (w->depth != 0) {
		w_fail(w, FSNP_ERR_WRITER);
		return;
	}
	if (wbuf_put_u16(w->buf, status) != 0) {
		w_fail(w, FSNP_ERR_NOMEM);
	}
}

void fsnp_w_nil(struct fsnp_writer *w)
{
	w_byte(w, FSNP_NIL);
}

void fsnp_w_bool(struct fsnp_writer *w, bool v)
{
	w_byte(w, v ? FSNP_TRUE : FSNP_FALSE);
}

void fsnp_w_i64(struct fsnp_writer *w, int64_t v)
{
	w_fixed(w, FSNP_I64, (uint64_t)v);
}

void fsnp_w_u64(struct fsnp_writer *w, uint64_t v)
{
	w_fixed(w, v <= (uint64_t)INT64_MAX ? FSNP_I64 : FSNP_U64, v);
}

void fsnp_w_f64(struct fsnp_writer *w, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof bits);
	w_fixed(w, FSNP_F64, bits);
}

void fsnp_w_bin(struct fsnp_writer *w, const void *p, size_t len)
{
	if (len > UINT32_MAX) {
		w_fail(w, FSNP_ERR_TOO_LONG);
		return;
	}
	if (!w_value_slot(w)) {
		return;
	}
	uint8_t *q = wbuf_extend(w->buf, 5 + len);
	if (q == NULL) {
		w_fail(w, FSNP_ERR_NOMEM);
		return;
	}
	q[0] = FSNP_BIN;
	wire_store_u32(q + 1, (uint32_t)len);
	if (len > 0) {
		memcpy(q + 5, p, len);
	}
}

void fsnp_w_str(struct fsnp_writer *w, const char *s)
{
	fsnp_w_bin(w, s, strlen(s));
}

static void w_begin(struct fsnp_writer *w, bool map)
{
	if (!w_ok(w)) {
		return;
	}
	if (w->depth == FSNP_WRITER_MAX_DEPTH) {
		w_fail(w, FSNP_ERR_WRITER);
		return;
	}
	if (!w_value_slot(w)) {
		return;
	}
	size_t at = w->buf->len + 1;
	uint8_t *p = wbuf_extend(w->buf, 5);
	if (p == NULL) {
		w_fail(w, FSNP_ERR_NOMEM);
		return;
	}
	p[0] = map ? FSNP_MAP : FSNP_ARRAY;
	wire_store_u32(p + 1, 0);
	w->open[w->depth].count_at = at;
	w->open[w->depth].count = 0;
	w->open[w->depth].map = map;
	w->open[w->depth].keyed = false;
	w->depth++;
}

static void w_end(struct fsnp_writer *w, bool map)
{
	if (!w_ok(w)) {
		return;
	}
	if (w->depth == 0 || w->open[w->depth - 1].map != map ||
	    w->open[w->depth - 1].keyed) {
		w_fail(w, FSNP_ERR_WRITER);
		return;
	}
	w->depth--;
	wbuf_patch_u32(w->buf, w->open[w->depth].count_at,
	               w->open[w->depth].count);
}

void fsnp_w_array_begin(struct fsnp_writer *w)
{
	w_begin(w, false);
}

void fsnp_w_array_end(struct fsnp_writer *w)
{
	w_end(w, false);
}

void fsnp_w_map_begin(struct fsnp_writer *w)
{
	w_begin(w, true);
}

void fsnp_w_map_end(struct fsnp_writer *w)
{
	w_end(w, true);
}

void fsnp_w_key_bin(struct fsnp_writer *w, const void *key, size_t len)
{
	if (!w_ok(w)) {
		return;
	}
	if (w->depth == 0 || !w->open[w->depth - 1].map ||
	    w->open[w->depth - 1].keyed) {
		w_fail(w, FSNP_ERR_WRITER);
		return;
	}
	if (len > UINT32_MAX) {
		w_fail(w, FSNP_ERR_TOO_LONG);
		return;
	}
	uint8_t *p = wbuf_extend(w->buf, 4 + len);
	if (p == NULL) {
		w_fail(w, FSNP_ERR_NOMEM);
		return;
	}
	wire_store_u32(p, (uint32_t)len);
	if (len > 0) {
		memcpy(p + 4, key, len);
	}
	w->open[w->depth - 1].keyed = true;
}

void fsnp_w_key(struct fsnp_writer *w, const char *key)
{
	fsnp_w_key_bin(w, key, strlen(key));
}

void fsnp_w_val(struct fsnp_writer *w, const struct fsnp_val *v)
{
	if (w_value_slot(w) && wbuf_append(w->buf, v->enc, v->enc_len) != 0) {
		w_fail(w, FSNP_ERR_NOMEM);
	}
}

int fsnp_w_finish(struct fsnp_writer *w)
{
	if (!w_ok(w)) {
		return w->err;
	}
	if (w->depth != 0) {
		w_fail(w, FSNP_ERR_WRITER);
	}
	return w->err;
}
