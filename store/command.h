/* Binary encoding of store commands (format version 1).
 *
 * A command is what a proposer puts into a Raft entry (struct fsm_cmd) and
 * what store_read() takes for reads on the leader:
 *
 *     u8 version (= STORE_CMD_VERSION)
 *     u8 op      (enum store_op)
 *     fields, in the order the op's schema lists them (command.c):
 *       u8 / u32 / u64 / i64    big-endian, fixed width
 *       bytes                   u32 length + bytes
 *       list                    u32 count + count x (u32 length + bytes)
 *
 * Trailing bytes, unknown versions or ops, and lengths past the end are
 * decode errors. Decoding borrows from the input: every slice of a
 * decoded command points into the buffer that was decoded.
 *
 * The fields each op carries and its result (store/result.h) are listed
 * at the op below. "scope" is the stream or cache name
 * "tenant/namespace/name"; "shard" the stream or cache shard index.
 * Results are arrays unless said otherwise; errors are in result.h.
 */
#ifndef LS_STORE_COMMAND_H
#define LS_STORE_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_CMD_VERSION 1

/* Largest list a command may carry. */
#define STORE_CMD_MAX_ITEMS (1u << 20)

/* Membership states of a node record (STORE_OP_NODE_*). */
enum {
	STORE_NODE_JOINING = 0,
	STORE_NODE_ACTIVE = 1,
	STORE_NODE_DRAINING = 2,
	STORE_NODE_REMOVED = 3,
};
#define STORE_NODE_RECORD_VERSION 2
/* A record with flags (STORE_NODE_F_*): version 3 adds a u8 flags after
 * the slot. Records without flags keep version 2. */
#define STORE_NODE_RECORD_VERSION_FLAGS 3
#define STORE_NODE_F_NONVOTER                                                  \
	0x01 /* the operator demoted it: placement                             \
	        gives it standbys, never voters */

enum store_op {
	/* Meta group (group 0): registered scopes. kind = STORE_SCOPE_*. */
	/* kind tenant ns name shards retention_bytes retention_ms durability
	 * -> i64 1 created, 0 updated (retention/durability); EXISTS when the
	 * scope exists with another shard count. */
	STORE_OP_SCOPE_REGISTER = 0x01,
	/* kind tenant ns name -> i64 1 deleted, 0 absent */
	STORE_OP_SCOPE_DELETE = 0x02,
	/* (read) kind tenant ns name -> [shards, retention_bytes,
	 * retention_ms, durability, created_ms] or NOT_FOUND */
	STORE_OP_SCOPE_DESCRIBE = 0x03,
	/* (read) kind tenant ns arg=cursor max -> [[[tenant, ns, name,
	 * shards, retention_bytes, retention_ms, durability]...],
	 * next cursor | nil]. Empty tenant = all tenants; empty ns = all
	 * namespaces of the tenant. */
	STORE_OP_SCOPE_LIST = 0x04,
	/* Meta group: one record per cluster node, its membership state,
	 * its placement slot and its addresses (text, opaque to the store).
	 * Stored as u8 version (2) | u8 state (STORE_NODE_*) | u64 slot |
	 * addresses, or with flags u8 version (3) | u8 state | u64 slot |
	 * u8 flags (STORE_NODE_F_*) |
	 * addresses. The slot is the id placement ranks the node by: its own
	 * id, or the id of the dead node it replaced. A record of format 1
	 * (addresses alone, written before membership states) reads as
	 * active, slot = its id. key=node id (8 bytes, BE) value=addresses ->
	 * i64 1 created (active), 0 updated (the state is kept) */
	STORE_OP_NODE_SET = 0x05,
	/* (read) -> [[key, record]...] in key order */
	STORE_OP_NODE_LIST = 0x06,
	/* key=node id value=addresses kind=state of a new record -> i64 1
	 * created, 0 exists (unchanged); EXISTS when the node was removed */
	STORE_OP_NODE_JOIN = 0x07,
	/* key=node id kind=new state max=mask of the states it may leave
	 * (bit 1 << STORE_NODE_*) offset=new slot (0 = kept) -> i64 1
	 * changed, 0 already so; NOT_FOUND, or ERR when the current state is
	 * not in the mask */
	STORE_OP_NODE_STATE = 0x08,
	/* Cluster settings (the replication factor "replicas"): key=name
	 * value -> i64 1 set, 0 already set (unchanged) */
	STORE_OP_CONF_INIT = 0x09,
	/* (read) key=name -> bytes | nil */
	STORE_OP_CONF_GET = 0x0A,
	/* Meta group: FSNP ACL users. key=user name value=the user's rules
	 * as text (node/auth/acl.h; passwords only as SHA-256), opaque to
	 * the store -> i64 1 created, 0 replaced */
	STORE_OP_ACL_SETUSER = 0x0B,
	/* key=user name -> i64 1 deleted, 0 absent */
	STORE_OP_ACL_DELUSER = 0x0C,
	/* (read) -> [[name, rules]...] in name order */
	STORE_OP_ACL_LIST = 0x0D,
	/* key=user name items=rule tokens: the tokens applied in order on
	 * top of the user's current rules (a new user starts from none) by
	 * the node's ACL rules function (store_set_acl_rules), inside the
	 * apply: concurrent changes of one user compose in log order ->
	 * [i64 1 created / 0 changed, the user's rules]; ERR (nothing
	 * changes) when a token does not apply or no function is set. */
	STORE_OP_ACL_APPLY = 0x0E,
	/* Meta group: whether a node may vote (CLUSTER.PROMOTE / DEMOTE).
	 * key=node id kind=1 voter, 0 non-voter -> i64 1 changed, 0 already
	 * so; NOT_FOUND, or ERR when the node was removed */
	STORE_OP_NODE_VOTER = 0x0F,

	/* Streams (data groups). */
	/* scope shard items=payloads -> [base_offset, count] */
	STORE_OP_STREAM_APPEND = 0x10,
	/* scope shard producer seq items -> [base_offset, count, duplicate]
	 * or SEQ_GAP / SEQ_EXPIRED / UNKNOWN_PRODUCER */
	STORE_OP_STREAM_APPEND_IDEM = 0x11,
	/* scope shard producer -> true, or EXISTS when the id is taken */
	STORE_OP_PRODUCER_INIT = 0x12,
	/* scope shard retention_bytes retention_ms offset=trim below (0 =
	 * none) max=records per command -> [head, trimmed, more] */
	STORE_OP_STREAM_TRIM = 0x13,
	/* scope shard max=keys per command -> [deleted, more]: removes the
	 * shard's records, producers and consumer groups. */
	STORE_OP_STREAM_DROP = 0x14,
	/* (read) scope shard offset max max_bytes -> [next_offset,
	 * [[offset, timestamp_ms, payload]...]] or TOO_OLD / IN_FUTURE */
	STORE_OP_STREAM_READ = 0x15,
	/* (read) scope shard -> [head, tail, bytes, producers] */
	STORE_OP_STREAM_INFO = 0x16,

	/* Consumer groups on a stream shard. */
	/* scope shard group max visibility_ms attempts=max attempts ->
	 * [next deadline (0 = no claim in flight), [[offset, attempts,
	 * payload]...]] */
	STORE_OP_CG_POLL = 0x20,
	/* scope shard group offset -> true or ERR */
	STORE_OP_CG_ACK = 0x21,
	/* scope shard group offset attempts=max attempts -> true or ERR */
	STORE_OP_CG_NACK = 0x22,
	/* scope shard group offset -> true or ERR */
	STORE_OP_CG_DISCARD = 0x23,
	/* scope shard group offset -> true or ERR */
	STORE_OP_CG_REDRIVE = 0x24,
	/* (read) scope shard group offset=from max -> [offset...] */
	STORE_OP_CG_DEAD_LETTERS = 0x25,
	/* (read) scope shard group -> [cursor (next offset never handed
	 * out), live claims, dead letters] */
	STORE_OP_CG_INFO = 0x26,

	/* Caches and counters (data groups). */
	/* scope shard key value ttl_ms (0 = none) -> [offset, expires_at] */
	STORE_OP_CACHE_PUT = 0x30,
	/* scope shard key -> [removed value | nil, offset | nil] */
	STORE_OP_CACHE_DELETE = 0x31,
	/* (read) scope shard key -> [value, expires_at, offset] or nil */
	STORE_OP_CACHE_GET = 0x32,
	/* scope shard offset=compact below max -> [compacted_below,
	 * removed, more] */
	STORE_OP_CACHE_COMPACT = 0x33,
	/* (read) scope shard offset max -> [next_offset, [[offset, key,
	 * value | nil, expires_at]...]] or RESNAPSHOT / IN_FUTURE */
	STORE_OP_CACHE_LOG_READ = 0x34,
	/* (read) scope shard key=prefix arg=after max -> [[[key, value,
	 * offset, expires_at]...], next after | nil] */
	STORE_OP_CACHE_SCAN = 0x35,
	/* (read) scope shard -> [tail, compacted_below, records, live] */
	STORE_OP_CACHE_INFO = 0x36,
	/* scope shard max -> [deleted, more]: removes the cache shard's log,
	 * index and counters. */
	STORE_OP_CACHE_DROP = 0x37,
	/* scope shard key delta -> i64 sum, or ERR on overflow */
	STORE_OP_COUNTER_ADD = 0x40,
	/* (read) scope shard key -> i64 or nil (never written) */
	STORE_OP_COUNTER_GET = 0x41,

	/* FSNP KV (data groups). Results are FSNP typed values. */
	STORE_OP_KV_GET = 0x50,  /* (read) key -> bytes | nil */
	STORE_OP_KV_SET = 0x51,  /* key value flags kind ttl_ms */
	STORE_OP_KV_DEL = 0x52,  /* items=keys -> i64 */
	STORE_OP_KV_MGET = 0x53, /* (read) items=keys -> [bytes | nil...] */
	STORE_OP_KV_MSET = 0x54, /* items=k,v,k,v... -> "OK" */
	/* key arg=expected value kind ttl_ms -> true | false | nil */
	STORE_OP_KV_CAS = 0x55,
	STORE_OP_KV_LOCK = 0x56,   /* key arg=owner ttl_ms -> "OK" */
	STORE_OP_KV_UNLOCK = 0x57, /* key arg=owner -> i64 1 */
	STORE_OP_KV_EXTEND = 0x58, /* key arg=owner ttl_ms -> i64 1 */
	/* key window_ms max count -> ["allowed"|"denied", count,
	 * remaining, ms_until_reset] */
	STORE_OP_KV_RATELIMIT = 0x59,
	/* key ttl_ms value=hint arg=token -> ["hit", value] |
	 * ["compute", hint, token] | ["wait", owner token] */
	STORE_OP_KV_FOC = 0x5A,
	/* key arg=token value ttl_ms -> "OK" */
	STORE_OP_KV_FOC_RESULT = 0x5B,
	/* key arg=token value=message -> "OK" */
	STORE_OP_KV_FOC_ERROR = 0x5C,
	/* Keyspace commands (store/kvkey.c). */
	/* key delta -> i64 the new value (the key keeps its expiry); ERR
	 * when the value is not an integer or it would overflow */
	STORE_OP_KV_INCRBY = 0x5D,
	/* (read) items=keys -> i64 how many exist (repeats count) */
	STORE_OP_KV_EXISTS = 0x5E,
	/* (read) key kind (STORE_KEYINFO_*) -> TYPE: text ("none",
	 * "string", "hash", "list", "set", "zset"); TTL (s, rounded) / PTTL
	 * (ms): i64, -2 absent, -1 no expiry */
	STORE_OP_KV_KEYINFO = 0x5F,
	STORE_OP_KV_HSET = 0x60,    /* key items=f,v,f,v... -> i64 new */
	STORE_OP_KV_HGET = 0x61,    /* (read) key arg=field -> bytes|nil */
	STORE_OP_KV_HMGET = 0x62,   /* (read) key items=fields -> [..] */
	STORE_OP_KV_HGETALL = 0x63, /* (read) key -> map field->value */
	STORE_OP_KV_HDEL = 0x64,    /* key items=fields -> i64 removed */
	/* key value=increment text -> bytes the new value (Redis's long
	 * double text; the key keeps its expiry); ERR when a value is not a
	 * float or the sum is NaN or infinite */
	STORE_OP_KV_INCRBYFLOAT = 0x65,
	/* key start=offset value -> i64 the new length: writes value at
	 * offset, zero-padding; an empty value writes nothing */
	STORE_OP_KV_SETRANGE = 0x66,
	/* key kind (STORE_GETEX_*) delta=ms -> bytes | nil: GET, then sets
	 * the expiry (TTL: delta ms after the entry's time; AT: at Unix ms
	 * delta, a past one deletes the key) or removes it (PERSIST) */
	STORE_OP_KV_GETEX = 0x67,
	STORE_OP_KV_LPUSH = 0x68, /* key items -> i64 length */
	STORE_OP_KV_RPUSH = 0x69, /* key items -> i64 length */
	/* key count (0 = one value, else a list of up to count) */
	STORE_OP_KV_LPOP = 0x6A,
	STORE_OP_KV_RPOP = 0x6B,
	STORE_OP_KV_LRANGE = 0x6C, /* (read) key start stop -> [..] */
	/* (read) key kind=the type (2 hash, 3 list, 4 set, 5 zset) -> i64
	 * its element count (0 absent), WRONGTYPE for another type */
	STORE_OP_KV_LEN = 0x6D,
	/* items=k,v,k,v... -> i64 1 every key set, 0 none (one of them
	 * exists) */
	STORE_OP_KV_MSETNX = 0x6E,
	STORE_OP_KV_SADD = 0x70,      /* key items -> i64 added */
	STORE_OP_KV_SREM = 0x71,      /* key items -> i64 removed */
	STORE_OP_KV_SMEMBERS = 0x72,  /* (read) key -> [member...] */
	STORE_OP_KV_SISMEMBER = 0x73, /* (read) key arg=member -> i64 1|0 */
	/* (read) key start stop -> bytes: the string's bytes start..stop
	 * (inclusive, negative from the end; "" absent or empty range) */
	STORE_OP_KV_GETRANGE = 0x74,
	/* (read) key start=index -> bytes | nil (absent key or index out of
	 * range; negative counts from the tail) */
	STORE_OP_KV_LINDEX = 0x75,
	/* (read) key arg=member kind (0 ZRANK, 1 ZREVRANK) -> i64 the
	 * member's rank | nil (absent key or member) */
	STORE_OP_KV_ZRANK = 0x76,
	/* key start stop -> "OK": keeps the list's elements start..stop
	 * (LRANGE's indexes), deleting the key when none remain */
	STORE_OP_KV_LTRIM = 0x77,
	/* key items=score,member,... (score: 8-byte BE IEEE double) ->
	 * i64 new members */
	STORE_OP_KV_ZADD = 0x78,
	STORE_OP_KV_ZREM = 0x79, /* key items -> i64 removed */
	/* (read) key start stop flags (STORE_ZRANGE_*: WITHSCORES, REV,
	 * BYSCORE) ->
	 * [member...] or [member, score text, ...] */
	STORE_OP_KV_ZRANGE = 0x7A,
	STORE_OP_KV_ZSCORE = 0x7B, /* (read) key arg=member -> text|nil */
	/* key kind delta: kind STORE_EXPIRE_TTL sets the expiry `delta` ms
	 * after the entry's time (delta <= 0 deletes the key), kind
	 * STORE_EXPIRE_NONE removes it (PERSIST) -> i64 1 changed, 0 not
	 * (absent key, or PERSIST of a key without expiry) */
	STORE_OP_KV_EXPIRE_SET = 0x7C,
	STORE_OP_KV_APPEND = 0x7D, /* key value -> i64 the new length */
	STORE_OP_KV_STRLEN = 0x7E, /* (read) key -> i64 (0 absent) */
	STORE_OP_KV_GETDEL = 0x7F, /* key -> bytes | nil; deletes a string */

	/* Maintenance, proposed by the leader (store_expire_scan). */
	/* items=expiry index entries -> i64 reclaimed */
	STORE_OP_EXPIRE = 0x80,

	/* More keyspace and collection commands (store/kvkey.c,
	 * store/kvcoll.c), 0x81-0x8F. */
	/* key kind (STORE_EXPIRE_TTL: delta ms after the entry's time;
	 * STORE_EXPIRE_AT: at Unix ms delta) flags (STORE_EXPIRE_F_*)
	 * arg=the command's name for the error text -> i64 1 set (or the key
	 * deleted: a deadline not after the entry's time), 0 not (absent
	 * key, or a condition failed); ERR when now + delta overflows */
	STORE_OP_KV_EXPIRE_OPT = 0x81,
	/* key=source arg=destination kind (1 RENAMENX) -> "OK" (RENAME) or
	 * i64 1 / 0 (RENAMENX); ERR "no such key" when the source is absent.
	 * Any type, elements and expiry move with the key. */
	STORE_OP_KV_RENAME = 0x82,
	/* (read) ZRANGE_EX: KV_ZRANGE's fields, plus offset and count (LIMIT;
	 * count UINT64_MAX = all) -> as KV_ZRANGE; with STORE_ZRANGE_COUNT
	 * in flags -> i64 the members in the score range (ZCOUNT) */
	STORE_OP_KV_ZRANGE_EX = 0x83,
	/* key value=increment (8-byte BE IEEE double) arg=member -> text the
	 * new score; ERR when the sum is NaN */
	STORE_OP_KV_ZINCRBY = 0x84,
	/* key arg=field delta -> i64 the new value; ERR when the field's
	 * value is not an integer or the sum overflows */
	STORE_OP_KV_HINCRBY = 0x85,
	/* key arg=field value=increment text -> text the new value (as
	 * INCRBYFLOAT) */
	STORE_OP_KV_HINCRBYFLOAT = 0x86,
	/* (read) key arg=field -> i64 1 | 0 */
	STORE_OP_KV_HEXISTS = 0x87,
	/* (read) key kind (0 fields, 1 values) -> [bytes...] */
	STORE_OP_KV_HKEYS = 0x88,
	/* (read) kind (0: keys; 1: [keys, keys with an expiry]) -> the
	 * group's KV key counts (the maintained row, docs/storage.md) */
	STORE_OP_KV_KEYCOUNT = 0x89,
	/* (read) arg=seek point (store/kvscan.h) count value=pattern flags
	 * (STORE_SCAN_*) kind=type (0 any, else the TYPE names' order:
	 * 1 string ... 5 zset) shards=data groups -> [cursor text,
	 * [key...]]; with STORE_SCAN_RESUME [cursor text, [key...], the key
	 * a reference cursor may resume at | nil]; with STORE_SCAN_ALL the
	 * whole range: [key...] */
	STORE_OP_KV_SCAN = 0x8A,
	/* ZADD with Redis's options: key flags (STORE_ZADD_*) items as
	 * KV_ZADD -> i64 the members added (with CH: added or given a new
	 * score); with INCR (one pair, the score an increment): text the
	 * new score, or nil when NX, XX, GT or LT left the member as it
	 * was. ERR for flags Redis refuses together. KV_ZADD keeps its
	 * encoding (entries in the logs decode as they did) and serves
	 * ZADD without options. */
	STORE_OP_KV_ZADD_OPT = 0x8B,
	/* LPOP and RPOP with a count the KV_LPOP and KV_RPOP encoding cannot
	 * carry (0): key kind (0 head, 1 tail) count -> [value...] up to
	 * count ([] for 0), nil when the key is absent */
	STORE_OP_KV_POP = 0x8C,
	/* KV transactions (store/kvmulti.c; RESP MULTI/EXEC/WATCH). */
	/* count=watched keys items=key, stamp (STORE_WATCH_STAMP_LEN
	 * bytes) for each watched key, then the queued commands, each a
	 * whole encoded store command of a KV op (store_op_in_multi) ->
	 * nil when a watched key's stamp is not its stamp now (nothing
	 * applied), else [result...]: each command's own encoded result
	 * (bytes), run in order in this entry with its own save point, so
	 * a command's error leaves the others applied. */
	STORE_OP_KV_MULTI = 0x90,
	/* (read) items=keys -> [stamp...]: each key's stamp as KV_MULTI
	 * compares it (a digest of its type, expiry and content; an absent
	 * or lapsed key has the stamp of an absent one) */
	STORE_OP_KV_WATCH = 0x91,

	/* Ops of registered extensions (store/ext.h): flow/ takes
	 * 0xA0..0xA1. store_cmd_decode refuses them; apply and store_read
	 * hand them to their extension undecoded. */
	STORE_OP_EXT_FIRST = 0xA0,
	STORE_OP_EXT_LAST = 0xDF,
};

/* KV ops a transaction (STORE_OP_KV_MULTI) may carry: the data
 * group's KV commands, not the expiry maintenance op nor another
 * transaction. */
#define STORE_OP_KV_FIRST 0x50
#define STORE_OP_KV_LAST 0x8F
/* Bytes of a watched key's stamp (STORE_OP_KV_WATCH). */
#define STORE_WATCH_STAMP_LEN 16

/* Scope kinds. */
enum {
	STORE_SCOPE_STREAM = 1,
	STORE_SCOPE_CACHE = 2,
};

/* KV expiry kinds (`kind` of SET and CAS). */
enum {
	STORE_EXPIRE_NONE = 0,
	STORE_EXPIRE_TTL = 1, /* ttl_ms after the entry's time */
	STORE_EXPIRE_AT = 2,  /* ttl_ms is an absolute Unix ms time */
};

/* GETEX kinds. */
enum {
	STORE_GETEX_KEEP = 0,
	STORE_GETEX_TTL = 1,
	STORE_GETEX_AT = 2,
	STORE_GETEX_PERSIST = 3,
};

/* SET flags. */
#define STORE_SET_NX 0x01
#define STORE_SET_XX 0x02
#define STORE_SET_GET 0x04
#define STORE_SET_KEEPTTL 0x08

#define STORE_ZRANGE_WITHSCORES 0x01
/* ZRANGE ... REV: from the highest score down */
#define STORE_ZRANGE_REV 0x02
/* ZRANGE ... BYSCORE: start and stop hold the IEEE bits of the min and
 * max scores (min <= max in score order whatever REV says), exclusive
 * with the two flags after */
#define STORE_ZRANGE_BYSCORE 0x04
#define STORE_ZRANGE_MIN_EXCL 0x08
#define STORE_ZRANGE_MAX_EXCL 0x10

/* KV_ZRANGE_EX: answer the count of the score range (ZCOUNT) */
#define STORE_ZRANGE_COUNT 0x20

/* KV_ZADD_OPT flags (Redis 7's ZADD options). */
#define STORE_ZADD_NX 0x01
#define STORE_ZADD_XX 0x02
#define STORE_ZADD_GT 0x04
#define STORE_ZADD_LT 0x08
#define STORE_ZADD_CH 0x10
#define STORE_ZADD_INCR 0x20

/* KV_EXPIRE_OPT flags (Redis 7's EXPIRE options). */
#define STORE_EXPIRE_F_NX 0x01
#define STORE_EXPIRE_F_XX 0x02
#define STORE_EXPIRE_F_GT 0x04
#define STORE_EXPIRE_F_LT 0x08

/* KV_SCAN flags. */
#define STORE_SCAN_MATCH 0x01 /* value holds a pattern */
#define STORE_SCAN_ALL 0x02   /* the whole range, no cursor (KEYS) */
/* The node keeps resume keys (node/scan_cursors.h): answer the key the
 * next page would start at when a reference cursor may name it. */
#define STORE_SCAN_RESUME 0x04
/* With RESUME: arg is the exact key to resume at (a kept one), and the
 * page stops after `count` keys at any key a reference cursor may name
 * (up to KVSCAN_RESUME_MAX bytes). */
#define STORE_SCAN_EXACT 0x08

/* KV_KEYINFO kinds. */
enum {
	STORE_KEYINFO_TYPE = 0,
	STORE_KEYINFO_TTL = 1,
	STORE_KEYINFO_PTTL = 2,
};

struct store_slice {
	const uint8_t *p;
	size_t len;
};

/* A list of byte strings. Encoder input: `v` (n entries). Decoder output:
 * `enc`, the encoded entries (borrowed), walked with store_list_next(). */
struct store_list {
	uint32_t n;
	const struct store_slice *v;
	const uint8_t *enc;
	size_t enc_len;
};

struct store_cmd {
	uint8_t op;
	uint8_t kind;       /* scope kind; KV expiry kind */
	uint8_t flags;      /* SET / ZRANGE / ZADD flags */
	uint8_t durability; /* scope durability, opaque to store */
	uint32_t shard;     /* stream or cache shard index */
	uint32_t shards;    /* scope shard count */
	uint32_t attempts;  /* consumer group max attempts (0 = default) */
	struct store_slice scope; /* "tenant/namespace/name" */
	struct store_slice tenant;
	struct store_slice ns;
	struct store_slice name;
	struct store_slice group; /* consumer group name */
	struct store_slice key;
	struct store_slice value;
	struct store_slice arg; /* owner, token, field, member, cursor ... */
	uint64_t offset;
	uint64_t producer;
	uint64_t seq;
	uint64_t ttl_ms;
	uint64_t max;
	uint64_t max_bytes;
	uint64_t visibility_ms; /* 0 = default */
	uint64_t retention_bytes;
	uint64_t retention_ms;
	uint64_t window_ms;
	uint64_t count;
	int64_t delta;
	int64_t start;
	int64_t stop;
	struct store_list items;
};

struct store_list_iter {
	const struct store_list *l;
	uint32_t i;
	size_t off;
};

/* Appends the encoding of `c` to a malloc'd buffer owned by the caller.
 * Returns 0, or -1 (with *err) when `c->op` is unknown or a list holds
 * more than STORE_CMD_MAX_ITEMS entries. */
int store_cmd_encode(const struct store_cmd *c, uint8_t **out, size_t *len,
                     const char **err);

/* The exact encoded size of `c` in *len: 0, or -1 (with *err) for what
 * store_cmd_encode refuses. */
int store_cmd_size(const struct store_cmd *c, size_t *len, const char **err);

/* Writes the encoding of `c` into out[0 .. len-1], `len` being what
 * store_cmd_size answered for it (so the command can be encoded straight
 * into a buffer someone else owns, e.g. a Raft entry being filled). */
void store_cmd_encode_to(const struct store_cmd *c, uint8_t *out, size_t len);

/* Decodes `len` bytes into `c` (zeroed first). Returns 0, or -1 with a
 * static message in *err. */
int store_cmd_decode(const uint8_t *p, size_t len, struct store_cmd *c,
                     const char **err);

/* True when `op` is a read: store_read() serves it without a proposal. */
bool store_op_is_read(uint8_t op);

/* True for the ops a transaction (STORE_OP_KV_MULTI) may carry. */
bool store_op_in_multi(uint8_t op);

/* True for the scope ops that belong to the meta group. */
bool store_op_is_meta(uint8_t op);

/* The op's name (e.g. "STREAM_APPEND"), or NULL when unknown. */
const char *store_op_name(uint8_t op);

void store_list_iter_init(struct store_list_iter *it,
                          const struct store_list *l);
bool store_list_next(struct store_list_iter *it, struct store_slice *out);

#endif
