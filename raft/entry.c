/* Entry payload codec; see entry.h for the layout. */
#include "raft/entry.h"

#include <string.h>

#include <raft.h>

#include "raft/bytes.h"

void entry_builder_init(struct entry_builder *b, size_t max_len)
{
	b->buf = NULL;
	b->len = 0;
	b->cap = 0;
	b->n_cmds = 0;
	b->max_len = max_len;
	b->expect = 0;
}

void entry_builder_expect(struct entry_builder *b, size_t len)
{
	b->expect = len < b->max_len ? len : b->max_len;
}

size_t entry_max_cmd(size_t max_len)
{
	size_t overhead = ENTRY_HEADER_SIZE + ENTRY_CMD_OVERHEAD;
	if (max_len <= overhead) {
		return 0;
	}
	if (max_len - overhead > UINT32_MAX) {
		return UINT32_MAX;
	}
	return max_len - overhead;
}

int entry_builder_fits(const struct entry_builder *b, size_t len)
{
	size_t used = b->len == 0 ? ENTRY_HEADER_SIZE : b->len;
	if (len > UINT32_MAX || b->n_cmds == UINT32_MAX) {
		return 0;
	}
	return used <= b->max_len && b->max_len - used >= ENTRY_CMD_OVERHEAD &&
	       b->max_len - used - ENTRY_CMD_OVERHEAD >= len;
}

int entry_builder_reserve(struct entry_builder *b, size_t len, uint8_t **cmd)
{
	size_t need;

	if (!entry_builder_fits(b, len)) {
		return ENTRY_ETOOBIG;
	}
	if (b->len == 0) {
		b->len = ENTRY_HEADER_SIZE;
	}
	need = b->len + ENTRY_CMD_OVERHEAD + len;
	if (need > b->cap) {
		size_t cap = b->cap == 0 ? 256 : b->cap;
		uint8_t *p;
		if (b->cap == 0 && b->expect > cap) {
			cap = b->expect;
		}
		while (cap < need) {
			cap *= 2;
		}
		if (cap > b->max_len) {
			cap = b->max_len;
		}
		p = raft_realloc(b->buf, cap);
		if (p == NULL) {
			if (b->n_cmds == 0) {
				b->len = 0;
			}
			return ENTRY_ENOMEM;
		}
		b->buf = p;
		b->cap = cap;
	}
	bytes_put32(b->buf + b->len, (uint32_t)len);
	*cmd = b->buf + b->len + ENTRY_CMD_OVERHEAD;
	b->len = need;
	b->n_cmds++;
	return 0;
}

int entry_builder_add(struct entry_builder *b, const void *cmd, size_t len)
{
	uint8_t *p;
	int rv = entry_builder_reserve(b, len, &p);

	if (rv == 0 && len > 0) {
		memcpy(p, cmd, len);
	}
	return rv;
}

int entry_builder_finish(struct entry_builder *b, uint64_t term,
                         uint64_t now_ms, void **base, size_t *len)
{
	if (b->n_cmds == 0) {
		return ENTRY_EMALFORMED;
	}
	b->buf[0] = ENTRY_VERSION;
	b->buf[1] = 0;
	b->buf[2] = 0;
	b->buf[3] = 0;
	bytes_put32(b->buf + 4, b->n_cmds);
	bytes_put64(b->buf + 8, term);
	bytes_put64(b->buf + 16, now_ms);
	if (b->cap - b->len > 4096 && b->cap - b->len > b->len / 8) {
		/* Shrinking in place copies nothing. */
		uint8_t *p = raft_realloc(b->buf, b->len);
		if (p != NULL) {
			b->buf = p;
		}
	}
	*base = b->buf;
	*len = b->len;
	entry_builder_init(b, b->max_len);
	return 0;
}

void entry_builder_close(struct entry_builder *b)
{
	raft_free(b->buf);
	entry_builder_init(b, b->max_len);
}

int entry_decode_header(const void *buf, size_t len, struct entry_header *h)
{
	const uint8_t *p = buf;

	if (buf == NULL || len < ENTRY_HEADER_SIZE) {
		return ENTRY_EMALFORMED;
	}
	if (p[0] != ENTRY_VERSION || p[1] != 0 || p[2] != 0 || p[3] != 0) {
		return ENTRY_EMALFORMED;
	}
	h->version = p[0];
	h->n_cmds = bytes_get32(p + 4);
	h->term = bytes_get64(p + 8);
	h->now_ms = bytes_get64(p + 16);
	/* Each command takes at least its length prefix. */
	if (h->n_cmds == 0 ||
	    h->n_cmds > (len - ENTRY_HEADER_SIZE) / ENTRY_CMD_OVERHEAD) {
		return ENTRY_EMALFORMED;
	}
	return 0;
}

int entry_decode_cmds(const void *buf, size_t len, const struct entry_header *h,
                      struct fsm_cmd *cmds)
{
	const uint8_t *p = buf;
	size_t off = ENTRY_HEADER_SIZE;
	uint32_t i;

	for (i = 0; i < h->n_cmds; i++) {
		uint32_t n;
		if (len - off < ENTRY_CMD_OVERHEAD) {
			return ENTRY_EMALFORMED;
		}
		n = bytes_get32(p + off);
		off += ENTRY_CMD_OVERHEAD;
		if (len - off < n) {
			return ENTRY_EMALFORMED;
		}
		cmds[i].data = p + off;
		cmds[i].len = n;
		off += n;
	}
	return off == len ? 0 : ENTRY_EMALFORMED;
}
