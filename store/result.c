/* Result codec (see result.h). */
#include "store/result.h"

#include <string.h>

void res_begin(struct sbuf *b, uint8_t status)
{
	sbuf_u8(b, STORE_RESULT_VERSION);
	sbuf_u8(b, status);
}

void res_nil(struct sbuf *b)
{
	sbuf_u8(b, STORE_T_NIL);
}

void res_bool(struct sbuf *b, bool v)
{
	sbuf_u8(b, v ? STORE_T_TRUE : STORE_T_FALSE);
}

void res_i64(struct sbuf *b, int64_t v)
{
	sbuf_u8(b, STORE_T_I64);
	sbuf_u64(b, (uint64_t)v);
}

void res_u64(struct sbuf *b, uint64_t v)
{
	sbuf_u8(b, STORE_T_U64);
	sbuf_u64(b, v);
}

void res_f64(struct sbuf *b, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	sbuf_u8(b, STORE_T_F64);
	sbuf_u64(b, u);
}

void res_bytes(struct sbuf *b, const void *p, size_t n)
{
	sbuf_u8(b, STORE_T_BYTES);
	sbuf_lbytes(b, p, n);
}

void res_str(struct sbuf *b, const char *s)
{
	res_bytes(b, s, strlen(s));
}

void res_array(struct sbuf *b, uint32_t n)
{
	sbuf_u8(b, STORE_T_ARRAY);
	sbuf_u32(b, n);
}

void res_map(struct sbuf *b, uint32_t n)
{
	sbuf_u8(b, STORE_T_MAP);
	sbuf_u32(b, n);
}

void res_map_key(struct sbuf *b, const void *p, size_t n)
{
	sbuf_lbytes(b, p, n);
}

size_t res_array_open(struct sbuf *b)
{
	sbuf_u8(b, STORE_T_ARRAY);
	size_t mark = b->len;
	sbuf_u32(b, 0);
	return mark;
}

size_t res_map_open(struct sbuf *b)
{
	sbuf_u8(b, STORE_T_MAP);
	size_t mark = b->len;
	sbuf_u32(b, 0);
	return mark;
}

void res_array_close(struct sbuf *b, size_t mark, uint32_t n)
{
	be_put32(b->p + mark, n);
}

void res_error(struct sbuf *b, uint8_t status, const char *msg)
{
	res_begin(b, status);
	res_str(b, msg);
}

void res_error_pair(struct sbuf *b, uint8_t status, uint64_t requested,
                    uint64_t available)
{
	res_begin(b, status);
	res_array(b, 2);
	res_u64(b, requested);
	res_u64(b, available);
}

/* Checks one value (and what it nests) starting at r->off. */
static int check_value(struct rd *r, int depth)
{
	uint8_t tag = rd_u8(r);
	size_t n;

	if (r->bad || depth > STORE_RESULT_MAX_DEPTH) {
		return -1;
	}
	switch (tag) {
	case STORE_T_NIL:
	case STORE_T_TRUE:
	case STORE_T_FALSE:
		return 0;
	case STORE_T_I64:
	case STORE_T_F64:
	case STORE_T_U64:
		(void)rd_take(r, 8);
		return r->bad ? -1 : 0;
	case STORE_T_BYTES:
		(void)rd_lbytes(r, &n);
		return r->bad ? -1 : 0;
	case STORE_T_ARRAY: {
		uint32_t count = rd_u32(r);
		for (uint32_t i = 0; i < count; i++) {
			/* Each item takes at least one byte. */
			if (r->bad || rd_left(r) < count - i) {
				return -1;
			}
			if (check_value(r, depth + 1) != 0) {
				return -1;
			}
		}
		return r->bad ? -1 : 0;
	}
	case STORE_T_MAP: {
		uint32_t count = rd_u32(r);
		for (uint32_t i = 0; i < count; i++) {
			if (r->bad || rd_left(r) / 5 < count - i) {
				return -1;
			}
			(void)rd_lbytes(r, &n);
			if (check_value(r, depth + 1) != 0) {
				return -1;
			}
		}
		return r->bad ? -1 : 0;
	}
	default:
		return -1;
	}
}

int store_result_open(const uint8_t *buf, size_t len, struct store_result *r)
{
	struct rd c;

	if (buf == NULL || len < 3 || buf[0] != STORE_RESULT_VERSION) {
		return -1;
	}
	rd_init(&c, buf, len);
	c.off = 2;
	if (check_value(&c, 0) != 0 || !rd_done(&c)) {
		return -1;
	}
	r->status = buf[1];
	r->p = buf;
	r->len = len;
	r->off = 2;
	return 0;
}

bool store_result_next(struct store_result *r, struct store_value *v)
{
	struct rd c;

	if (r->off >= r->len) {
		return false;
	}
	memset(v, 0, sizeof *v);
	rd_init(&c, r->p, r->len);
	c.off = r->off;
	v->tag = rd_u8(&c);
	switch (v->tag) {
	case STORE_T_I64:
		v->i = (int64_t)rd_u64(&c);
		break;
	case STORE_T_U64:
		v->u = rd_u64(&c);
		break;
	case STORE_T_F64: {
		uint64_t u = rd_u64(&c);
		memcpy(&v->f, &u, sizeof u);
		break;
	}
	case STORE_T_BYTES:
		v->p = rd_lbytes(&c, &v->len);
		break;
	case STORE_T_ARRAY:
	case STORE_T_MAP:
		v->n = rd_u32(&c);
		break;
	default:
		break;
	}
	r->off = c.off;
	return true;
}

bool store_result_next_key(struct store_result *r, struct store_value *v)
{
	struct rd c;

	if (r->off >= r->len) {
		return false;
	}
	memset(v, 0, sizeof *v);
	rd_init(&c, r->p, r->len);
	c.off = r->off;
	v->tag = STORE_T_BYTES;
	v->p = rd_lbytes(&c, &v->len);
	r->off = c.off;
	return true;
}

void store_result_skip(struct store_result *r, const struct store_value *v)
{
	struct store_value x;

	if (v->tag == STORE_T_ARRAY) {
		for (uint32_t i = 0; i < v->n; i++) {
			store_result_next(r, &x);
			store_result_skip(r, &x);
		}
	} else if (v->tag == STORE_T_MAP) {
		for (uint32_t i = 0; i < v->n; i++) {
			store_result_next_key(r, &x);
			store_result_next(r, &x);
			store_result_skip(r, &x);
		}
	}
}
