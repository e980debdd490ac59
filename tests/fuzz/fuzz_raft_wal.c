/* Fuzz target: the raft WAL segment parser (raft/wal.h, wal_scan), which
 * reads what a crash may have left on disk. The intact prefix it reports
 * must parse again with nothing wrong, and re-encoding its records must give
 * back exactly those bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "raft/crc32c.h"
#include "raft/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rebuild {
	uint8_t *buf; /* the records re-encoded after the 8-byte magic */
	size_t len;
	size_t n;
};

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static int add(void *data, const void *rec, size_t len, char *err,
               size_t errlen)
{
	struct rebuild *r = data;
	(void)err;
	(void)errlen;
	put32(r->buf + r->len, (uint32_t)len);
	put32(r->buf + r->len + 4,
	      crc32c_extend(crc32c_extend(0, r->buf + r->len, 4), rec, len));
	memcpy(r->buf + r->len + 8, rec, len);
	r->len += 8 + len;
	r->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rebuild a = {0}, b = {0};
	size_t good, good2;
	const char *why, *why2;
	char err[64];

	a.buf = malloc(size + 8);
	b.buf = malloc(size + 8);
	if (a.buf == NULL || b.buf == NULL) {
		goto out;
	}
	memcpy(a.buf, data, size < 8 ? size : 8);
	a.len = 8;
	if (wal_scan(data, size, add, &a, &good, &why, err, sizeof err) != 0 ||
	    good > size) {
		abort();
	}
	/* Nothing wrong means all of it is intact; something wrong stops
	 * before the end (or the input is empty: no header). */
	if (why == NULL ? good != size : good == size && size > 0) {
		abort();
	}
	if (good == 0) {
		goto out; /* no header: nothing was intact */
	}
	if (a.len != good || memcmp(a.buf, data, good) != 0) {
		abort();
	}
	b.len = 8;
	if (wal_scan(data, good, add, &b, &good2, &why2, err, sizeof err) !=
	        0 ||
	    why2 != NULL || good2 != good || b.n != a.n) {
		abort();
	}
out:
	free(a.buf);
	free(b.buf);
	return 0;
}
