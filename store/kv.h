/* KV keyspace internals shared by kv.c (strings, locks, rate limits,
 * fetch-or-compute) and kvcoll.c (hashes, lists, sets, sorted sets).
 *
 * A key's record ([group][K_KV][key]) holds: u8 type, u64 expiry (0 =
 * never), then the type's body: a string's value; a collection's element
 * count (u64) plus, for a list, the position of its first element (u64);
 * a rate limit's current count, window start and previous count. The
 * elements of a collection live under [group][type][u32 len][key]... */
#ifndef LS_STORE_KV_H
#define LS_STORE_KV_H

#include "store/internal.h"

enum kv_type {
	T_STRING = 1,
	T_HASH = 2,
	T_LIST = 3,
	T_SET = 4,
	T_ZSET = 5,
	T_RATELIMIT = 6,
};

enum kv_state {
	KV_ABSENT = 0,
	KV_LIVE = 1,
	KV_LAPSED = 2, /* stored but past its expiry: invisible */
};

#define KV_WRONGTYPE                                                           \
	"WRONGTYPE Operation against a key holding the wrong kind of value"

struct kv_obj {
	int state;
	uint8_t type;
	uint64_t expires;
	struct store_slice body; /* points into raw */
	struct val raw;
};

void kv_key(struct sbuf *k, uint32_t group, struct store_slice key);
/* Prefix of a collection's elements. */
void kv_sub_prefix(struct sbuf *k, uint32_t group, uint8_t type,
                   struct store_slice key);
/* Loads a key as seen at tx->now_ms. */
int kv_load(struct tx *tx, struct store_slice key, struct kv_obj *o);
void kv_obj_free(struct kv_obj *o);
/* Removes a key with its elements and expiry entry; o becomes ABSENT. */
int kv_clear(struct tx *tx, struct store_slice key, struct kv_obj *o);
/* Loads a key for writing: a lapsed key is cleared first. */
int kv_load_w(struct tx *tx, struct store_slice key, struct kv_obj *o);
/* Writes the key's record; `o` is the loaded previous state (its expiry
 * entry is moved). */
void kv_store(struct tx *tx, struct store_slice key, uint8_t type,
              uint64_t expires, const void *body, size_t blen,
              const struct kv_obj *o);

/* The group's KV key counts (K_KVCOUNT; 0 when never written). */
int kv_count_get(struct tx *tx, uint64_t *keys, uint64_t *expires);
/* Redis's strict integer text (kvkey.c). */
bool kv_parse_i64(const uint8_t *p, size_t n, int64_t *out);
/* Redis's long double text (string2ld): false when not a float. */
bool kv_parse_ld(const uint8_t *p, size_t n, long double *out);
/* INCRBYFLOAT's text of a sum into out (KV_LD_CHARS bytes): its length,
 * or 0 when the sum is NaN, infinite or too long. */
#define KV_LD_CHARS (5 * 1024)
size_t kv_format_ld(long double v, char *out);

#endif
