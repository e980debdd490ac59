/* FSNP test helpers; see fsnp_test_util.h. */
#include "tests/unit/fsnp_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

uint8_t *fsnp_test_unhex(const char *hex, size_t *len)
{
	size_t n = strlen(hex);
	uint8_t *out = malloc(n / 2 + 1);
	size_t k = 0;
	int hi = -1;
	if (out == NULL) {
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (hex[i] == ' ' || hex[i] == '\n' || hex[i] == '\t' ||
		    hex[i] == '\r') {
			continue;
		}
		int v = hexval(hex[i]);
		if (v < 0) {
			free(out);
			return NULL;
		}
		if (hi < 0) {
			hi = v;
		} else {
			out[k++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	if (hi >= 0) {
		free(out);
		return NULL;
	}
	*len = k;
	return out;
}

char *fsnp_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;
	size_t cap = 0;
	if (f == NULL) {
		return NULL;
	}
	for (;;) {
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 8192;
			char *nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);
		if (r == 0) {
			break;
		}
		n += r;
	}
	fclose(f);
	buf[n] = '\0';
	if (len != NULL) {
		*len = n;
	}
	return buf;
}

const char *fsnp_test_shared_dir(void)
{
	const char *dir = getenv("LS_SHARED_DIR");
	return dir != NULL && dir[0] != '\0' ? dir : LS_SHARED_DIR;
}

uint8_t *fsnp_test_sdk_frame(const char *name, size_t *len)
{
	char *text = fsnp_test_read_file(
	    LS_ABS_SRCDIR "/tests/vectors/fsnp/sdk_frames.txt", NULL);
	uint8_t *frame = NULL;
	size_t n = strlen(name);
	if (text == NULL) {
		return NULL;
	}
	for (char *line = text; line != NULL && *line != '\0';) {
		char *next = strchr(line, '\n');
		if (next != NULL) {
			*next++ = '\0';
		}
		if (strncmp(line, name, n) == 0 && line[n] == ' ') {
			frame = fsnp_test_unhex(line + n + 1, len);
			break;
		}
		line = next;
	}
	free(text);
	return frame;
}

void fsnp_rng_seed(struct fsnp_rng *r, uint64_t seed)
{
	r->s = seed ? seed : 0x9e3779b97f4a7c15u;
}

uint64_t fsnp_rng_next(struct fsnp_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1du;
}

uint64_t fsnp_rng_below(struct fsnp_rng *r, uint64_t n)
{
	return fsnp_rng_next(r) % n;
}

static void random_bytes(struct fsnp_rng *r, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)fsnp_rng_next(r);
	}
}

void fsnp_test_random_value(struct fsnp_rng *r, struct fsnp_writer *w,
                            unsigned depth)
{
	uint8_t bytes[64];
	unsigned kinds = depth > 0 ? 9 : 7;
	switch (fsnp_rng_below(r, kinds)) {
	case 0:
		fsnp_w_nil(w);
		break;
	case 1:
		fsnp_w_bool(w, fsnp_rng_below(r, 2) == 0);
		break;
	case 2:
		fsnp_w_i64(w, (int64_t)fsnp_rng_next(r));
		break;
	case 3:
		fsnp_w_u64(w, fsnp_rng_next(r));
		break;
	case 4: {
		uint64_t bits = fsnp_rng_next(r);
		double f;
		memcpy(&f, &bits, sizeof f);
		fsnp_w_f64(w, f);
		break;
	}
	case 5:
	case 6: {
		size_t n = (size_t)fsnp_rng_below(r, sizeof bytes + 1);
		random_bytes(r, bytes, n);
		fsnp_w_bin(w, bytes, n);
		break;
	}
	case 7: {
		uint64_t n = fsnp_rng_below(r, 6);
		fsnp_w_array_begin(w);
		for (uint64_t i = 0; i < n; i++) {
			fsnp_test_random_value(r, w, depth - 1);
		}
		fsnp_w_array_end(w);
		break;
	}
	default: {
		uint64_t n = fsnp_rng_below(r, 6);
		fsnp_w_map_begin(w);
		for (uint64_t i = 0; i < n; i++) {
			size_t klen = (size_t)fsnp_rng_below(r, 12);
			random_bytes(r, bytes, klen);
			fsnp_w_key_bin(w, bytes, klen);
			fsnp_test_random_value(r, w, depth - 1);
		}
		fsnp_w_map_end(w);
		break;
	}
	}
}

void fsnp_test_reencode(struct fsnp_writer *w, const struct fsnp_val *v)
{
	struct fsnp_iter it;
	struct fsnp_bytes key;
	struct fsnp_val child;
	switch (v->tag) {
	case FSNP_NIL:
		fsnp_w_nil(w);
		break;
	case FSNP_TRUE:
	case FSNP_FALSE:
		fsnp_w_bool(w, v->tag == FSNP_TRUE);
		break;
	case FSNP_I64:
		fsnp_w_i64(w, v->as.i);
		break;
	case FSNP_U64:
		if (v->as.u <= (uint64_t)INT64_MAX) {
			/* A non-canonical small u64 has no builder call; copy
			 * its encoding so the round trip stays exact. */
			fsnp_w_val(w, v);
		} else {
			fsnp_w_u64(w, v->as.u);
		}
		break;
	case FSNP_F64:
		fsnp_w_f64(w, v->as.f);
		break;
	case FSNP_BIN:
		fsnp_w_bin(w, v->as.bin.ptr, v->as.bin.len);
		break;
	case FSNP_ARRAY:
	case FSNP_MAP:
		if (v->tag == FSNP_MAP) {
			fsnp_w_map_begin(w);
		} else {
			fsnp_w_array_begin(w);
		}
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, &key, &child)) {
			if (v->tag == FSNP_MAP) {
				fsnp_w_key_bin(w, key.ptr, key.len);
			}
			fsnp_test_reencode(w, &child);
		}
		if (v->tag == FSNP_MAP) {
			fsnp_w_map_end(w);
		} else {
			fsnp_w_array_end(w);
		}
		break;
	}
}
