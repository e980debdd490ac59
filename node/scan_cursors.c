/* The SCAN resume-key table; see scan_cursors.h. */
#include "node/scan_cursors.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "store/result.h"

#define NONE UINT32_MAX

struct entry {
	uint8_t *key; /* malloc'd; NULL: free */
	size_t len;
	uint32_t group;
	uint32_t tag;
	bool resumed; /* a page resumed from it */
	/* recency list: prev is more recent, next less */
	uint32_t prev, next;
};

struct scan_cursors {
	struct entry *e;
	uint32_t n;
	unsigned groups;
	uint32_t head; /* most recent */
	uint32_t tail; /* replaced next */
	struct scan_cursors_stats stats;
};

static void unlink_entry(struct scan_cursors *t, uint32_t i)
{
	struct entry *x = &t->e[i];
	if (x->prev != NONE) {
		t->e[x->prev].next = x->next;
	} else {
		t->head = x->next;
	}
	if (x->next != NONE) {
		t->e[x->next].prev = x->prev;
	} else {
		t->tail = x->prev;
	}
	x->prev = x->next = NONE;
}

static void push_head(struct scan_cursors *t, uint32_t i)
{
	struct entry *x = &t->e[i];
	x->prev = NONE;
	x->next = t->head;
	if (t->head != NONE) {
		t->e[t->head].prev = i;
	}
	t->head = i;
	if (t->tail == NONE) {
		t->tail = i;
	}
}

static void push_tail(struct scan_cursors *t, uint32_t i)
{
	struct entry *x = &t->e[i];
	x->next = NONE;
	x->prev = t->tail;
	if (t->tail != NONE) {
		t->e[t->tail].next = i;
	}
	t->tail = i;
	if (t->head == NONE) {
		t->head = i;
	}
}

int scan_cursors_new(struct scan_cursors **out, unsigned entries,
                     unsigned groups, char *err, size_t errlen)
{
	struct scan_cursors *t;
	uint32_t *tags = NULL;

	*out = NULL;
	if (entries == 0 || entries > KVSCAN_SLOTS_MAX) {
		snprintf(err, errlen,
		         "SCAN cursor table: %u entries is out of range "
		         "(1..%u)",
		         entries, KVSCAN_SLOTS_MAX);
		return -1;
	}
	if (!kvscan_ref_usable(groups)) {
		snprintf(err, errlen,
		         "SCAN cursor table: %u data groups leave no room "
		         "for a check tag in a cursor",
		         groups);
		return -1;
	}
	t = calloc(1, sizeof *t);
	if (t == NULL) {
		goto err_nomem;
	}
	t->e = calloc(entries, sizeof *t->e);
	tags = calloc(entries, sizeof *tags);
	if (t->e == NULL || tags == NULL) {
		goto err_free;
	}
	/* random first tags: another node's or an earlier run's cursors
	 * name none of this table's keys but by chance */
	for (size_t got = 0; got < entries * sizeof *tags;) {
		ssize_t r = getrandom((uint8_t *)tags + got,
		                      entries * sizeof *tags - got, 0);
		if (r <= 0) {
			snprintf(err, errlen,
			         "SCAN cursor table: no random bytes for its "
			         "check tags");
			goto err_free_quiet;
		}
		got += (size_t)r;
	}
	t->n = entries;
	t->groups = groups;
	t->head = t->tail = NONE;
	for (uint32_t i = 0; i < entries; i++) {
		t->e[i].tag = tags[i];
		t->e[i].prev = t->e[i].next = NONE;
		push_tail(t, i);
	}
	free(tags);
	*out = t;
	return 0;

err_free:
	snprintf(err, errlen, "SCAN cursor table: out of memory for %u entries",
	         entries);
err_free_quiet:
	free(tags);
	free(t->e);
	free(t);
	return -1;
err_nomem:
	snprintf(err, errlen, "SCAN cursor table: out of memory");
	return -1;
}

void scan_cursors_free(struct scan_cursors *t)
{
	if (t == NULL) {
		return;
	}
	for (uint32_t i = 0; i < t->n; i++) {
		free(t->e[i].key);
	}
	free(t->e);
	free(t);
}

const uint8_t *scan_cursors_lookup(struct scan_cursors *t,
                                   const struct kvscan_cursor *c, size_t *len)
{
	uint32_t mask = (UINT32_C(1) << kvscan_tag_bits(t->groups)) - 1;
	struct entry *x;

	if (!c->ref || c->slot >= t->n) {
		t->stats.misses += c->ref;
		return NULL;
	}
	x = &t->e[c->slot];
	if (x->key == NULL || x->group != c->group ||
	    (x->tag & mask) != c->tag ||
	    !kvscan_ref_matches(c, t->groups, x->key, x->len)) {
		t->stats.misses++;
		return NULL;
	}
	t->stats.hits++;
	/* The walk moves on to a new entry: this one goes first (a client
	 * repeating the cursor still finds it until then). */
	x->resumed = true;
	unlink_entry(t, c->slot);
	push_tail(t, c->slot);
	*len = x->len;
	return x->key;
}

int scan_cursors_put(struct scan_cursors *t, uint32_t group, const uint8_t *key,
                     size_t len, uint64_t *cursor)
{
	uint32_t i = t->tail;
	struct entry *x;
	uint8_t *copy;

	if (len > KVSCAN_RESUME_MAX || i == NONE) {
		return -1;
	}
	copy = malloc(len > 0 ? len : 1);
	if (copy == NULL) {
		return -1;
	}
	if (len > 0) {
		memcpy(copy, key, len);
	}
	x = &t->e[i];
	if (x->key != NULL) {
		t->stats.evictions += !x->resumed;
		t->stats.used--;
		t->stats.key_bytes -= x->len;
		free(x->key);
	}
	x->key = copy;
	x->len = len;
	x->group = group;
	x->resumed = false;
	/* a new tag: cursors naming the slot's previous key miss */
	x->tag++;
	t->stats.used++;
	t->stats.key_bytes += len;
	unlink_entry(t, i);
	push_head(t, i);
	*cursor = kvscan_cursor_ref(group, t->groups, i, x->tag, key, len);
	return 0;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

int scan_cursors_result(struct scan_cursors *t, uint32_t group,
                        const uint8_t *res, size_t len, uint8_t **out,
                        size_t *out_len)
{
	struct store_result r;
	struct store_value top, cur, keys, next;
	size_t keys_at, keys_end, n;
	char text[24];
	const char *ct;
	size_t ctl;
	uint64_t ref;
	uint8_t *b;

	*out = NULL;
	*out_len = 0;
	if (store_result_open(res, len, &r) != 0 || r.status != STORE_OK ||
	    !store_result_next(&r, &top) || top.tag != STORE_T_ARRAY ||
	    top.n != 3 || !store_result_next(&r, &cur) ||
	    cur.tag != STORE_T_BYTES) {
		return 0;
	}
	keys_at = r.off;
	if (!store_result_next(&r, &keys) || keys.tag != STORE_T_ARRAY) {
		return 0;
	}
	store_result_skip(&r, &keys);
	keys_end = r.off;
	if (!store_result_next(&r, &next)) {
		return 0;
	}
	ct = (const char *)cur.p;
	ctl = cur.len;
	if (next.tag == STORE_T_BYTES &&
	    scan_cursors_put(t, group, next.p, next.len, &ref) == 0) {
		ctl = (size_t)snprintf(text, sizeof text, "%llu",
		                       (unsigned long long)ref);
		ct = text;
	}
	/* version, status, array of 2, the cursor text, the keys as they
	 * were */
	n = 2 + 5 + 5 + ctl + (keys_end - keys_at);
	b = malloc(n);
	if (b == NULL) {
		return -1;
	}
	b[0] = STORE_RESULT_VERSION;
	b[1] = STORE_OK;
	b[2] = STORE_T_ARRAY;
	put_u32(b + 3, 2);
	b[7] = STORE_T_BYTES;
	put_u32(b + 8, (uint32_t)ctl);
	memcpy(b + 12, ct, ctl);
	memcpy(b + 12 + ctl, res + keys_at, keys_end - keys_at);
	*out = b;
	*out_len = n;
	return 0;
}

void scan_cursors_get_stats(const struct scan_cursors *t,
                            struct scan_cursors_stats *out)
{
	*out = t->stats;
}
