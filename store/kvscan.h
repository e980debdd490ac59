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
 * makes progress.
 *
 * Reference cursors. A node may keep the whole key a page stopped at in
 * a table of its own (node/scan_cursors.h) and answer a cursor naming
 * that entry: its top gb bits are zero (no plain cursor has them so,
 * save 0), then the group in gb bits, the table slot
 * (KVSCAN_SLOT_BITS), a check tag (kvscan_tag_bits) and the first
 * kvscan_ref_prefix_bits of the key. Resuming at the kept key lets a
 * page stop after COUNT keys whatever the keys share; without the entry
 * (evicted, another node, a restart) the cursor still decodes to a group
 * and a seek point not past the key, and the walk goes on as with a
 * plain cursor. */
#ifndef LS_STORE_KVSCAN_H
#define LS_STORE_KVSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a seek point, at most. */
#define KVSCAN_SEEK_MAX 8

/* A reference cursor's table slot bits, hence the most entries a node's
 * table may have. */
#define KVSCAN_SLOT_BITS 14
#define KVSCAN_SLOTS_MAX (1u << KVSCAN_SLOT_BITS)

/* The longest key a reference cursor may resume at (the per-entry bound
 * of a node's table): a page does not stop before a longer key unless its
 * seek point moves on (KV_SCAN with STORE_SCAN_EXACT). */
#define KVSCAN_RESUME_MAX 512

/* A decoded cursor: a group and the seek point to resume at without a
 * table; for a reference cursor also the slot and tag it names. */
struct kvscan_cursor {
	uint32_t group;
	uint8_t seek[KVSCAN_SEEK_MAX];
	size_t seek_len;
	bool ref;
	uint32_t slot;
	uint32_t tag;
};

/* Redis's stringmatchlen (case-sensitive): '*', '?', '[...]' with '^'
 * and ranges, '\' escapes, byte for byte as redis-server 7 (its chars
 * compare signed in ranges, as on x86). Deep '*' recursion is bounded. */
bool kvscan_glob_match(const uint8_t *pat, size_t plen, const uint8_t *s,
                       size_t slen);

/* Parses a cursor's text (Redis: an unsigned decimal, else "ERR invalid
 * cursor") and decodes it for `groups` data groups: the group (1..groups)
 * and the seek point (seek_len bytes into seek; a reference cursor's
 * without its table). -1 when the text is not a number, or names no
 * group of these. */
int kvscan_cursor_parse(const uint8_t *text, size_t len, unsigned groups,
                        uint32_t *group, uint8_t seek[KVSCAN_SEEK_MAX],
                        size_t *seek_len);

/* Parses and decodes a cursor's text, plain or reference, for `groups`
 * data groups. -1 when the text is not a number, or names no group of
 * these (Redis: "ERR invalid cursor"). */
int kvscan_cursor_decode(const uint8_t *text, size_t len, unsigned groups,
                         struct kvscan_cursor *out);

/* Whether reference cursors fit beside `groups` data groups (up to 2^16
 * - 1 groups), and their tag and prefix widths. */
bool kvscan_ref_usable(unsigned groups);
unsigned kvscan_tag_bits(unsigned groups);
unsigned kvscan_ref_prefix_bits(unsigned groups);

/* The reference cursor naming `slot` with `tag` (the low
 * kvscan_tag_bits bits are kept) for a page resuming at `key` in
 * `group`. */
uint64_t kvscan_cursor_ref(uint32_t group, unsigned groups, uint32_t slot,
                           uint32_t tag, const uint8_t *key, size_t len);

/* Whether `key` may be the key reference cursor `c` was made from: its
 * seek point at the reference width is c's. */
bool kvscan_ref_matches(const struct kvscan_cursor *c, unsigned groups,
                        const uint8_t *key, size_t len);

/* Whether a reference cursor made from `key` decodes to a seek point
 * past `floor`: a page that started from a seek point (no kept key) may
 * answer one only then, so that a walk whose kept keys are all lost
 * still ends. */
bool kvscan_ref_advances(unsigned groups, const uint8_t *key, size_t len,
                         const uint8_t *floor, size_t floor_len);

/* The cursor resuming at `key` in `group`, and the one starting the
 * group after `group` (0 after the last). */
uint64_t kvscan_cursor_at(uint32_t group, unsigned groups, const uint8_t *key,
                          size_t len);
uint64_t kvscan_cursor_after(uint32_t group, unsigned groups);

/* The seek point of `key` (what kvscan_cursor_at's cursor decodes to). */
size_t kvscan_seek_of(unsigned groups, const uint8_t *key, size_t len,
                      uint8_t seek[KVSCAN_SEEK_MAX]);

#endif
