/* The RocksDB key layout of the "data" column family (docs/storage.md,
 * format version STORE_FORMAT_VERSION).
 *
 * Every key starts with the group id (u32 BE) and a type byte, so a shard
 * is the key range [group, group + 1). Inside a group:
 *
 *   shard id  = u16 scope length + scope + u32 shard index
 *   sub key   = u32 user key length + user key (when more follows)
 */
#ifndef LS_STORE_KEYS_H
#define LS_STORE_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/command.h"

#define STORE_FORMAT_VERSION 6

enum key_type {
	K_GROUP = 0x01,    /* applied index, term, format version */
	K_SCOPE = 0x02,    /* meta group: kind + 3 x (u16 len + name) */
	K_NODE = 0x03,     /* meta group: node id (8 bytes): record */
	K_CONF = 0x04,     /* meta group: setting name: value */
	K_ACL = 0x05,      /* meta group: ACL user name: rules */
	K_STREAM = 0x10,   /* shard id: head, tail, bytes, producers */
	K_REC = 0x11,      /* shard id + last offset: run (stream.h) */
	K_PROD = 0x12,     /* shard id + producer id: sequences */
	K_PROD_LRU = 0x13, /* shard id + last use + producer id */
	K_CG = 0x14,       /* shard id + u16 group: cursor, floor, ready */
	K_CLAIM = 0x15,    /* shard id + u16 group + u8 part + ...: claims
	                    * (0 + offset), deadlines (1 + deadline +
	                    * offset), ready queue (2 + seq + offset) */
	K_DEAD = 0x16,     /* shard id + u16 group + offset: attempts */
	K_CACHE = 0x20,    /* shard id: tail, compaction point, counts */
	K_CLOG = 0x21,     /* shard id + offset: change record */
	K_CIDX = 0x22,     /* shard id + key: latest offset, expiry */
	K_COUNTER = 0x23,  /* shard id + key: i64 sum */
	K_KV = 0x30,       /* user key: type, expiry, body */
	K_HASH = 0x31,     /* sub key + field: value */
	K_LIST = 0x32,     /* sub key + u64 position: value */
	K_SET = 0x33,      /* sub key + member */
	K_ZMEMBER = 0x34,  /* sub key + member: score */
	K_ZSCORE = 0x35,   /* sub key + sortable score + member */
	K_EXPIRY = 0x36,   /* u64 expiry + expiry kind + what */
	K_FOC = 0x37,      /* user key: fetch-or-compute lease */
	K_KVCOUNT = 0x38,  /* (alone): u64 KV keys, u64 of them with an
	                    * expiry (DBSIZE, INFO keyspace) */
	/* FerricFlow (flow/, an extension: store/ext.h). "part" = u32 len +
	 * partition, "id" = u32 len + flow id. */
	K_FLOW = 0x40,        /* part + id: flow record */
	K_FLOW_DUE = 0x41,    /* part + type + state + u8 255 - priority +
	                       * u64 next run + id: empty */
	K_FLOW_HIST = 0x42,   /* part + id + u64 version: history event */
	K_FLOW_VALUE = 0x43,  /* ref: stored value */
	K_FLOW_POLICY = 0x44, /* type: policy */
	K_FLOW_SIGNAL = 0x45, /* part + id + idempotency key: digest */
	K_FLOW_RETAIN = 0x46, /* u64 retention deadline + part + id: empty */
	K_FLOW_FLOOR = 0x47,  /* part + type + state + u8 255 - priority: u64
	                       * no due entry of the group is earlier */
	/* Flow schedules (flow/flow_schedule.h). */
	K_FLOW_SCHED = 0x48,     /* part + id: schedule record */
	K_FLOW_SCHED_DUE = 0x49, /* u64 next run + part + id: empty (active) */
	K_FLOW_SCHED_OUT = 0x4A, /* part + id + u64 due: target to create */
	/* Flow governance (flow/flow_gov_internal.h). */
	K_FLOW_GOV = 0x4B,       /* u8 kind + parts: governance records */
	K_FLOW_IX = 0x4C,        /* part + u8 index kind + ...: secondary
	                          * indexes (flow/flow_index.h): u64 version */
	K_FLOW_COUNT = 0x4D,     /* type + part: its states' u64 flows */
	K_FLOW_ACOUNT = 0x4E,    /* type + part + state + attribute name + u8 0
	                          * (flows with it) | 1 + value: u64 flows */
	K_FLOW_ACTIVE = 0x4F,    /* u64 created_at_ms + max_active_ms + part +
	                          * id: empty (non-terminal flows with a
	                          * max_active_ms) */
	K_FLOW_AUTOFLOOR = 0x50, /* type + state + u8 255 - priority: u64 no
	                          * due entry of an auto partition is
	                          * earlier; state "" = the type's floors
	                          * were all summed up */
};

/* Kinds of expiry index entries. */
enum {
	EXP_KV = 1,    /* + user key */
	EXP_CACHE = 2, /* + shard id + cache key */
	EXP_FOC = 3,   /* + user key */
};

static inline void key_start(struct sbuf *k, uint32_t group, uint8_t type)
{
	sbuf_reset(k);
	sbuf_u32(k, group);
	sbuf_u8(k, type);
}

/* Shard id of a stream or cache shard. The scope must fit a u16. */
static inline void key_shard(struct sbuf *k, struct store_slice scope,
                             uint32_t shard)
{
	sbuf_u16(k, (uint16_t)scope.len);
	sbuf_add(k, scope.p, scope.len);
	sbuf_u32(k, shard);
}

static inline void key_sub(struct sbuf *k, struct store_slice key)
{
	sbuf_lbytes(k, key.p, key.len);
}

/* Bytewise comparison, as RocksDB orders keys. */
int key_cmp(const struct sbuf *a, const struct sbuf *b);
int key_cmp_bytes(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

/* Order-preserving encoding of a double (NaN excluded). */
uint64_t key_score_bits(double d);
double key_score_from_bits(uint64_t u);

#endif
