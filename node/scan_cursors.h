/* The node's table of SCAN resume keys (docs/resp.md "SCAN cursors"): a
 * bounded set of entries, each the whole key a SCAN page stopped at, so
 * that the next page resumes exactly there and a page holds about COUNT
 * keys even where keys share long prefixes. A page's answer names an
 * entry by a reference cursor (store/kvscan.h: group, slot, check tag and
 * the key's first bits); the RESP and FSNP listeners share one table.
 *
 * Entries: at most `entries` (--resp-scan-cursors, up to
 * KVSCAN_SLOTS_MAX), keys of up to KVSCAN_RESUME_MAX bytes, the least
 * recently made one replaced first; an entry a page has resumed from is
 * replaced before any other, so a walk holds about one entry. Each slot's
 * tag starts random and changes with every key put there: a cursor whose
 * entry was replaced, or that another node (or this one before a restart)
 * gave out, finds no key with its tag and falls back to its seek point,
 * which resumes at or before the key (no key skipped; the page may be
 * long and repeat keys).
 *
 * The table is the node's, used on the reactor thread only; it must
 * outlive every SCAN in flight (the node frees it after the listeners and
 * the groups have closed). */
#ifndef LS_NODE_SCAN_CURSORS_H
#define LS_NODE_SCAN_CURSORS_H

#include <stddef.h>
#include <stdint.h>

#include "store/kvscan.h"

struct scan_cursors;

struct scan_cursors_stats {
	uint64_t hits;      /* reference cursors resumed at their key */
	uint64_t misses;    /* reference cursors that fell back */
	uint64_t evictions; /* entries replaced while unused */
	uint32_t used;      /* entries holding a key */
	size_t key_bytes;   /* bytes of the keys held */
};

/* A table of `entries` (1..KVSCAN_SLOTS_MAX) for `groups` data groups.
 * Returns 0, or -1 with the reason in `err` (out of memory; a size out of
 * range; more groups than reference cursors can name). */
int scan_cursors_new(struct scan_cursors **out, unsigned entries,
                     unsigned groups, char *err, size_t errlen);
void scan_cursors_free(struct scan_cursors *t);

/* The key reference cursor `c` names, when its entry still holds it (the
 * tag, group and first bits agree), or NULL. The entry is then the next
 * one replaced. The key is borrowed until the next scan_cursors_put. */
const uint8_t *scan_cursors_lookup(struct scan_cursors *t,
                                   const struct kvscan_cursor *c, size_t *len);

/* Keeps `key` (copied) for a page of `group` that resumes at it and makes
 * the reference cursor naming it. -1 when the key is longer than
 * KVSCAN_RESUME_MAX or out of memory: the caller answers the plain
 * cursor. */
int scan_cursors_put(struct scan_cursors *t, uint32_t group, const uint8_t *key,
                     size_t len, uint64_t *cursor);

/* A KV_SCAN result with STORE_SCAN_RESUME ([cursor text, [key...], key |
 * nil], store/command.h) made into the answer clients get ([cursor text,
 * [key...]]), the key kept and its reference cursor answered. 0 with the
 * new result in *out (malloc'd, the caller frees it), or *out NULL when
 * `res` is already the answer (an error, or a two-item result); -1 out of
 * memory. */
int scan_cursors_result(struct scan_cursors *t, uint32_t group,
                        const uint8_t *res, size_t len, uint8_t **out,
                        size_t *out_len);

void scan_cursors_get_stats(const struct scan_cursors *t,
                            struct scan_cursors_stats *out);

#endif
