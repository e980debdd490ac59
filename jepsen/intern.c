/* String interning; see intern.h. */
#include "jepsen/intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SPAN_LEN_BITS 24
#define SPAN_MAX_OFFSET ((uint64_t)1 << 40)

void jepsen_intern_init(struct jepsen_intern *p)
{
	memset(p, 0, sizeof *p);
}

void jepsen_intern_free(struct jepsen_intern *p)
{
	free(p->bytes);
	free(p->spans);
	free(p->table);
	memset(p, 0, sizeof *p);
}

uint64_t jepsen_intern_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int span_equal(const struct jepsen_intern *p, uint32_t id, const char *s,
                      size_t len)
{
	uint64_t span = p->spans[id];
	size_t n = (size_t)(span & ((1u << SPAN_LEN_BITS) - 1));
	return n == len &&
	       memcmp(p->bytes + (span >> SPAN_LEN_BITS), s, len) == 0;
}

int jepsen_intern_find(const struct jepsen_intern *p, const char *s, size_t len,
                       uint32_t *id)
{
	if (p->table_cap == 0) {
		return 0;
	}
	size_t mask = p->table_cap - 1;
	size_t i = (size_t)jepsen_intern_hash(s, len) & mask;
	while (p->table[i] != 0) {
		if (span_equal(p, p->table[i], s, len)) {
			*id = p->table[i];
			return 1;
		}
		i = (i + 1) & mask;
	}
	return 0;
}

static int grow_table(struct jepsen_intern *p)
{
	size_t cap = p->table_cap ? p->table_cap * 2 : 64;
	uint32_t *t = calloc(cap, sizeof *t);
	if (t == NULL) {
		return -ENOMEM;
	}
	for (uint32_t id = 1; id < p->count; id++) {
		uint64_t span = p->spans[id];
		size_t n = (size_t)(span & ((1u << SPAN_LEN_BITS) - 1));
		size_t i = (size_t)jepsen_intern_hash(
		               p->bytes + (span >> SPAN_LEN_BITS), n) &
		           (cap - 1);
		while (t[i] != 0) {
			i = (i + 1) & (cap - 1);
		}
		t[i] = id;
	}
	free(p->table);
	p->table = t;
	p->table_cap = cap;
	return 0;
}

int jepsen_intern_put(struct jepsen_intern *p, const char *s, size_t len,
                      uint32_t *id)
{
	if (jepsen_intern_find(p, s, len, id)) {
		return 0;
	}
	if (len > JEPSEN_INTERN_MAX_LEN || p->count >= UINT32_MAX ||
	    p->bytes_len + len + 1 > SPAN_MAX_OFFSET) {
		return -E2BIG;
	}
	if (p->count == 0) {
		p->count = 1; /* id 0 is nil */
	}
	/* Keep the table at most half full. */
	if ((p->count + 1) * 2 > p->table_cap && grow_table(p) != 0) {
		return -ENOMEM;
	}
	if (p->count >= p->spans_cap) {
		size_t cap = p->spans_cap ? p->spans_cap * 2 : 64;
		uint64_t *ns = realloc(p->spans, cap * sizeof *ns);
		if (ns == NULL) {
			return -ENOMEM;
		}
		p->spans = ns;
		p->spans_cap = cap;
	}
	if (p->bytes_len + len + 1 > p->bytes_cap) {
		size_t cap = p->bytes_cap ? p->bytes_cap : 1024;
		while (cap < p->bytes_len + len + 1) {
			cap *= 2;
		}
		char *nb = realloc(p->bytes, cap);
		if (nb == NULL) {
			return -ENOMEM;
		}
		p->bytes = nb;
		p->bytes_cap = cap;
	}
	if (len > 0) {
		memcpy(p->bytes + p->bytes_len, s, len);
	}
	p->bytes[p->bytes_len + len] = '\0';
	uint32_t nid = (uint32_t)p->count++;
	p->spans[nid] = ((uint64_t)p->bytes_len << SPAN_LEN_BITS) | len;
	p->bytes_len += len + 1;
	size_t mask = p->table_cap - 1;
	size_t i = (size_t)jepsen_intern_hash(s, len) & mask;
	while (p->table[i] != 0) {
		i = (i + 1) & mask;
	}
	p->table[i] = nid;
	*id = nid;
	return 0;
}

const char *jepsen_intern_str(const struct jepsen_intern *p, uint32_t id,
                              size_t *len)
{
	if (id == JEPSEN_NIL || id >= p->count) {
		if (len != NULL) {
			*len = 0;
		}
		return "";
	}
	uint64_t span = p->spans[id];
	if (len != NULL) {
		*len = (size_t)(span & ((1u << SPAN_LEN_BITS) - 1));
	}
	return p->bytes + (span >> SPAN_LEN_BITS);
}

size_t jepsen_intern_memory(const struct jepsen_intern *p)
{
	return p->bytes_cap + p->spans_cap * sizeof *p->spans +
	       p->table_cap * sizeof *p->table;
}
