/* Growable byte buffers (see buf.h). */
#include "store/buf.h"

#include <stdio.h>
#include <stdlib.h>

void *store_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL) {
		fprintf(stderr, "store: out of memory allocating %zu bytes\n",
		        n);
		abort();
	}
	return p;
}

void *store_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL) {
		fprintf(stderr, "store: out of memory allocating %zu bytes\n",
		        n);
		abort();
	}
	return q;
}

void sbuf_init(struct sbuf *b)
{
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
}

void sbuf_free(struct sbuf *b)
{
	free(b->p);
	sbuf_init(b);
}

void sbuf_reserve(struct sbuf *b, size_t n)
{
	size_t need = b->len + n;
	size_t cap = b->cap ? b->cap : 64;

	if (need <= b->cap) {
		return;
	}
	while (cap < need) {
		cap *= 2;
	}
	b->p = store_xrealloc(b->p, cap);
	b->cap = cap;
}

uint8_t *sbuf_take(struct sbuf *b, size_t *len)
{
	uint8_t *p = b->p;
	*len = b->len;
	if (b->len == 0) {
		free(p);
		p = NULL;
	}
	sbuf_init(b);
	return p;
}
