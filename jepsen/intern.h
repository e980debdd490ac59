/* String interning for the history checkers: every key and value of a
 * history is stored once and named by a small integer id, so checkers
 * compare values by id and hash states cheaply.
 *
 * Id 0 is reserved and means "no value" (nil); the first string interned
 * gets id 1. The pool owns all string bytes. A pointer returned by
 * jepsen_intern_str() stays valid until the next jepsen_intern_put() on the
 * same pool (the byte arena may move when it grows). */
#ifndef JEPSEN_INTERN_H
#define JEPSEN_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define JEPSEN_NIL 0u

struct jepsen_intern {
	char *bytes; /* every string, each followed by a NUL */
	size_t bytes_len;
	size_t bytes_cap;
	uint64_t *spans; /* id -> (offset << 24 | length), index 0 unused */
	size_t count;    /* ids handed out, plus the reserved id 0 */
	size_t spans_cap;
	uint32_t *table;  /* open addressing: id, or 0 for an empty slot */
	size_t table_cap; /* a power of two */
};

/* Largest string the pool accepts, in bytes. */
#define JEPSEN_INTERN_MAX_LEN ((1u << 24) - 1)

void jepsen_intern_init(struct jepsen_intern *p);
void jepsen_intern_free(struct jepsen_intern *p);

/* Interns `len` bytes at `s` (NULs allowed) and sets *id. Returns 0,
 * -ENOMEM, or -E2BIG for a string longer than JEPSEN_INTERN_MAX_LEN or a
 * pool that would pass 2^32 ids or 2^40 bytes. */
int jepsen_intern_put(struct jepsen_intern *p, const char *s, size_t len,
                      uint32_t *id);

/* Looks a string up without adding it: returns 1 and sets *id if present,
 * 0 if not. */
int jepsen_intern_find(const struct jepsen_intern *p, const char *s, size_t len,
                       uint32_t *id);

/* The bytes of `id` (NUL-terminated) and their length; "" for JEPSEN_NIL
 * or an id the pool never handed out. */
const char *jepsen_intern_str(const struct jepsen_intern *p, uint32_t id,
                              size_t *len);

/* Bytes of memory the pool holds. */
size_t jepsen_intern_memory(const struct jepsen_intern *p);

/* FNV-1a 64-bit, exposed for the checkers' own tables. */
uint64_t jepsen_intern_hash(const char *s, size_t len);

#endif
