/* The Redis keyspace walk's pure parts: glob patterns as Redis's
 * stringmatchlen matches them (KEYS, SCAN MATCH), and the SCAN cursor.
 *
 * A Lodestone SCAN cursor is one unsigned decimal number below 2^63 that
 * names a data group and a place in that group's key range (keys are
 * walked in byte order). With G data groups numbered 1..G, the top
 * `gb` = bits(G) of the 63 bits hold the group and the low `pb` = 63 - gb
 * bits the first pb bits of the key to resume at (zero padded). Cursor 0
 * starts at group 1; a page that ends a group's range answers the next
 * group's cursor (its prefix empty), the last group's 0.
 *
 * Resuming seeks to the prefix's bytes with trailing zero bytes dropped
 * (the "seek point" of a key): never past the key the cursor was made
 * from, so a key present for the whole scan is returned at least once.
 * A page stops before a key only when that key's seek point is past the
 * page's own (the store keeps walking keys sharing it), so every page
 * makes progress. */
#ifndef LS_STORE_KVSCAN_H
#define LS_STORE_KVSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a seek point, at most. */
#define KVSCAN_SEEK_MAX 8

/* Redis's stringmatchlen (case-sensitive): '*', '?', '[...]' with '^'
 * and ranges, '\' escapes, byte for byte as redis-server 7 (its chars
 * compare signed in ranges, as on x86). Deep '*' recursion is bounded. */
bool kvscan_glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
                     size_t slen);

/* Parses a cursor's text (Redis: an unsigned decimal, else "ERR invalid
 * cursor") and decodes it for `groups` data groups: the group (1..groups)
 * and the seek point (seek_len bytes into seek). -1 when the text is not
 * a number, or names no group of these. */
int kvscan_cursor_parse(const uint8_t *text, size_t len, unsigned groups,
                      uint32_t *group, uint8_t seek[KVSCAN_SEEK_MAX],
                      size_t *seek_len);

/* The cursor resuming at `key` in `group`, and the one starting the
 * group after `group` (0 after the last). */
uint64_t kvscan_cursor_at(uint32_t group, unsigned groups, const uint8_t *key,
                        size_t len);
uint64_t kvscan_cursor_after(uint32_t group, unsigned groups);

/* The seek point of `key` (what kvscan_cursor_at's cursor decodes to). */
size_t kvscan_seek_of(unsigned groups, const uint8_t *key, size_t len,
                           uint8_t seek[KVSCAN_SEEK_MAX]);

#endif
