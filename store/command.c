/* Command codec: a schema per op drives both encoder and decoder, so the
 * two cannot disagree. */
#include "store/command.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "store/buf.h"

enum field {
	F_END = 0,
	F_KIND,
	F_FLAGS,
	F_DURABILITY,
	F_SHARD,
	F_SHARDS,
	F_ATTEMPTS,
	F_SCOPE,
	F_TENANT,
	F_NS,
	F_NAME,
	F_GROUP,
	F_KEY,
	F_VALUE,
	F_ARG,
	F_OFFSET,
	F_PRODUCER,
	F_SEQ,
	F_TTL,
	F_MAX,
	F_MAX_BYTES,
	F_VISIBILITY,
	F_RBYTES,
	F_RMS,
	F_WINDOW,
	F_COUNT,
	F_DELTA,
	F_START,
	F_STOP,
	F_ITEMS,
};

#define MAX_FIELDS 9

struct op_desc {
	uint8_t op;
	bool read;
	bool meta;
	const char *name;
	uint8_t fields[MAX_FIELDS];
};

#define SS F_SCOPE, F_SHARD

static const struct op_desc ops[] = {
    [STORE_OP_SCOPE_REGISTER] = {STORE_OP_SCOPE_REGISTER,
                                 false,
                                 true,
                                 "SCOPE_REGISTER",
                                 {F_KIND, F_TENANT, F_NS, F_NAME, F_SHARDS,
                                  F_RBYTES, F_RMS, F_DURABILITY}},
    [STORE_OP_SCOPE_DELETE] = {STORE_OP_SCOPE_DELETE,
                               false,
                               true,
                               "SCOPE_DELETE",
                               {F_KIND, F_TENANT, F_NS, F_NAME}},
    [STORE_OP_SCOPE_DESCRIBE] = {STORE_OP_SCOPE_DESCRIBE,
                                 true,
                                 true,
                                 "SCOPE_DESCRIBE",
                                 {F_KIND, F_TENANT, F_NS, F_NAME}},
    [STORE_OP_SCOPE_LIST] = {STORE_OP_SCOPE_LIST,
                             true,
                             true,
                             "SCOPE_LIST",
                             {F_KIND, F_TENANT, F_NS, F_ARG, F_MAX}},
    [STORE_OP_NODE_SET] =
        {STORE_OP_NODE_SET, false, true, "NODE_SET", {F_KEY, F_VALUE}},
    [STORE_OP_NODE_LIST] =
        {STORE_OP_NODE_LIST, true, true, "NODE_LIST", {F_END}},
    [STORE_OP_NODE_JOIN] = {STORE_OP_NODE_JOIN,
                            false,
                            true,
                            "NODE_JOIN",
                            {F_KEY, F_VALUE, F_KIND}},
    [STORE_OP_NODE_STATE] = {STORE_OP_NODE_STATE,
                             false,
                             true,
                             "NODE_STATE",
                             {F_KEY, F_KIND, F_MAX, F_OFFSET}},
    [STORE_OP_NODE_VOTER] =
        {STORE_OP_NODE_VOTER, false, true, "NODE_VOTER", {F_KEY, F_KIND}},
    [STORE_OP_CONF_INIT] =
        {STORE_OP_CONF_INIT, false, true, "CONF_INIT", {F_KEY, F_VALUE}},
    [STORE_OP_CONF_GET] = {STORE_OP_CONF_GET, true, true, "CONF_GET", {F_KEY}},
    [STORE_OP_ACL_SETUSER] =
        {STORE_OP_ACL_SETUSER, false, true, "ACL_SETUSER", {F_KEY, F_VALUE}},
    [STORE_OP_ACL_DELUSER] =
        {STORE_OP_ACL_DELUSER, false, true, "ACL_DELUSER", {F_KEY}},
    [STORE_OP_ACL_LIST] = {STORE_OP_ACL_LIST, true, true, "ACL_LIST", {F_END}},
    [STORE_OP_ACL_APPLY] =
        {STORE_OP_ACL_APPLY, false, true, "ACL_APPLY", {F_KEY, F_ITEMS}},
    [STORE_OP_STREAM_APPEND] =
        {STORE_OP_STREAM_APPEND, false, false, "STREAM_APPEND", {SS, F_ITEMS}},
    [STORE_OP_STREAM_APPEND_IDEM] = {STORE_OP_STREAM_APPEND_IDEM,
                                     false,
                                     false,
                                     "STREAM_APPEND_IDEM",
                                     {SS, F_PRODUCER, F_SEQ, F_ITEMS}},
    [STORE_OP_PRODUCER_INIT] = {STORE_OP_PRODUCER_INIT,
                                false,
                                false,
                                "PRODUCER_INIT",
                                {SS, F_PRODUCER}},
    [STORE_OP_STREAM_TRIM] = {STORE_OP_STREAM_TRIM,
                              false,
                              false,
                              "STREAM_TRIM",
                              {SS, F_RBYTES, F_RMS, F_OFFSET, F_MAX}},
    [STORE_OP_STREAM_DROP] =
        {STORE_OP_STREAM_DROP, false, false, "STREAM_DROP", {SS, F_MAX}},
    [STORE_OP_STREAM_READ] = {STORE_OP_STREAM_READ,
                              true,
                              false,
                              "STREAM_READ",
                              {SS, F_OFFSET, F_MAX, F_MAX_BYTES}},
    [STORE_OP_STREAM_INFO] =
        {STORE_OP_STREAM_INFO, true, false, "STREAM_INFO", {SS}},
    [STORE_OP_CG_POLL] = {STORE_OP_CG_POLL,
                          false,
                          false,
                          "CG_POLL",
                          {SS, F_GROUP, F_MAX, F_VISIBILITY, F_ATTEMPTS}},
    [STORE_OP_CG_ACK] =
        {STORE_OP_CG_ACK, false, false, "CG_ACK", {SS, F_GROUP, F_OFFSET}},
    [STORE_OP_CG_NACK] = {STORE_OP_CG_NACK,
                          false,
                          false,
                          "CG_NACK",
                          {SS, F_GROUP, F_OFFSET, F_ATTEMPTS}},
    [STORE_OP_CG_DISCARD] = {STORE_OP_CG_DISCARD,
                             false,
                             false,
                             "CG_DISCARD",
                             {SS, F_GROUP, F_OFFSET}},
    [STORE_OP_CG_REDRIVE] = {STORE_OP_CG_REDRIVE,
                             false,
                             false,
                             "CG_REDRIVE",
                             {SS, F_GROUP, F_OFFSET}},
    [STORE_OP_CG_DEAD_LETTERS] = {STORE_OP_CG_DEAD_LETTERS,
                                  true,
                                  false,
                                  "CG_DEAD_LETTERS",
                                  {SS, F_GROUP, F_OFFSET, F_MAX}},
    [STORE_OP_CG_INFO] =
        {STORE_OP_CG_INFO, true, false, "CG_INFO", {SS, F_GROUP}},
    [STORE_OP_CACHE_PUT] = {STORE_OP_CACHE_PUT,
                            false,
                            false,
                            "CACHE_PUT",
                            {SS, F_KEY, F_VALUE, F_TTL}},
    [STORE_OP_CACHE_DELETE] =
        {STORE_OP_CACHE_DELETE, false, false, "CACHE_DELETE", {SS, F_KEY}},
    [STORE_OP_CACHE_GET] =
        {STORE_OP_CACHE_GET, true, false, "CACHE_GET", {SS, F_KEY}},
    [STORE_OP_CACHE_COMPACT] = {STORE_OP_CACHE_COMPACT,
                                false,
                                false,
                                "CACHE_COMPACT",
                                {SS, F_OFFSET, F_MAX}},
    [STORE_OP_CACHE_LOG_READ] = {STORE_OP_CACHE_LOG_READ,
                                 true,
                                 false,
                                 "CACHE_LOG_READ",
                                 {SS, F_OFFSET, F_MAX}},
    [STORE_OP_CACHE_SCAN] = {STORE_OP_CACHE_SCAN,
                             true,
                             false,
                             "CACHE_SCAN",
                             {SS, F_KEY, F_ARG, F_MAX}},
    [STORE_OP_CACHE_INFO] =
        {STORE_OP_CACHE_INFO, true, false, "CACHE_INFO", {SS}},
    [STORE_OP_CACHE_DROP] =
        {STORE_OP_CACHE_DROP, false, false, "CACHE_DROP", {SS, F_MAX}},
    [STORE_OP_COUNTER_ADD] = {STORE_OP_COUNTER_ADD,
                              false,
                              false,
                              "COUNTER_ADD",
                              {SS, F_KEY, F_DELTA}},
    [STORE_OP_COUNTER_GET] =
        {STORE_OP_COUNTER_GET, true, false, "COUNTER_GET", {SS, F_KEY}},
    [STORE_OP_KV_GET] = {STORE_OP_KV_GET, true, false, "GET", {F_KEY}},
    [STORE_OP_KV_SET] = {STORE_OP_KV_SET,
                         false,
                         false,
                         "SET",
                         {F_KEY, F_VALUE, F_FLAGS, F_KIND, F_TTL}},
    [STORE_OP_KV_DEL] = {STORE_OP_KV_DEL, false, false, "DEL", {F_ITEMS}},
    [STORE_OP_KV_MGET] = {STORE_OP_KV_MGET, true, false, "MGET", {F_ITEMS}},
    [STORE_OP_KV_MSET] = {STORE_OP_KV_MSET, false, false, "MSET", {F_ITEMS}},
    [STORE_OP_KV_CAS] = {STORE_OP_KV_CAS,
                         false,
                         false,
                         "CAS",
                         {F_KEY, F_ARG, F_VALUE, F_KIND, F_TTL}},
    [STORE_OP_KV_LOCK] =
        {STORE_OP_KV_LOCK, false, false, "LOCK", {F_KEY, F_ARG, F_TTL}},
    [STORE_OP_KV_UNLOCK] =
        {STORE_OP_KV_UNLOCK, false, false, "UNLOCK", {F_KEY, F_ARG}},
    [STORE_OP_KV_EXTEND] =
        {STORE_OP_KV_EXTEND, false, false, "EXTEND", {F_KEY, F_ARG, F_TTL}},
    [STORE_OP_KV_RATELIMIT] = {STORE_OP_KV_RATELIMIT,
                               false,
                               false,
                               "RATELIMIT.ADD",
                               {F_KEY, F_WINDOW, F_MAX, F_COUNT}},
    [STORE_OP_KV_FOC] = {STORE_OP_KV_FOC,
                         false,
                         false,
                         "FETCH_OR_COMPUTE",
                         {F_KEY, F_TTL, F_VALUE, F_ARG}},
    [STORE_OP_KV_FOC_RESULT] = {STORE_OP_KV_FOC_RESULT,
                                false,
                                false,
                                "FETCH_OR_COMPUTE_RESULT",
                                {F_KEY, F_ARG, F_VALUE, F_TTL}},
    [STORE_OP_KV_FOC_ERROR] = {STORE_OP_KV_FOC_ERROR,
                               false,
                               false,
                               "FETCH_OR_COMPUTE_ERROR",
                               {F_KEY, F_ARG, F_VALUE}},
    [STORE_OP_KV_INCRBY] =
        {STORE_OP_KV_INCRBY, false, false, "INCRBY", {F_KEY, F_DELTA}},
    [STORE_OP_KV_EXISTS] =
        {STORE_OP_KV_EXISTS, true, false, "EXISTS", {F_ITEMS}},
    [STORE_OP_KV_KEYINFO] =
        {STORE_OP_KV_KEYINFO, true, false, "KEYINFO", {F_KEY, F_KIND}},
    [STORE_OP_KV_MSETNX] =
        {STORE_OP_KV_MSETNX, false, false, "MSETNX", {F_ITEMS}},
    [STORE_OP_KV_LEN] = {STORE_OP_KV_LEN, true, false, "LEN", {F_KEY, F_KIND}},
    [STORE_OP_KV_EXPIRE_SET] = {STORE_OP_KV_EXPIRE_SET,
                                false,
                                false,
                                "EXPIRE_SET",
                                {F_KEY, F_KIND, F_DELTA}},
    [STORE_OP_KV_APPEND] =
        {STORE_OP_KV_APPEND, false, false, "APPEND", {F_KEY, F_VALUE}},
    [STORE_OP_KV_STRLEN] = {STORE_OP_KV_STRLEN, true, false, "STRLEN", {F_KEY}},
    [STORE_OP_KV_GETRANGE] = {STORE_OP_KV_GETRANGE,
                              true,
                              false,
                              "GETRANGE",
                              {F_KEY, F_START, F_STOP}},
    [STORE_OP_KV_LINDEX] =
        {STORE_OP_KV_LINDEX, true, false, "LINDEX", {F_KEY, F_START}},
    [STORE_OP_KV_ZRANK] =
        {STORE_OP_KV_ZRANK, true, false, "ZRANK", {F_KEY, F_ARG, F_KIND}},
    [STORE_OP_KV_LTRIM] =
        {STORE_OP_KV_LTRIM, false, false, "LTRIM", {F_KEY, F_START, F_STOP}},
    [STORE_OP_KV_INCRBYFLOAT] = {STORE_OP_KV_INCRBYFLOAT,
                                 false,
                                 false,
                                 "INCRBYFLOAT",
                                 {F_KEY, F_VALUE}},
    [STORE_OP_KV_SETRANGE] = {STORE_OP_KV_SETRANGE,
                              false,
                              false,
                              "SETRANGE",
                              {F_KEY, F_START, F_VALUE}},
    [STORE_OP_KV_GETEX] =
        {STORE_OP_KV_GETEX, false, false, "GETEX", {F_KEY, F_KIND, F_DELTA}},
    [STORE_OP_KV_GETDEL] =
        {STORE_OP_KV_GETDEL, false, false, "GETDEL", {F_KEY}},
    [STORE_OP_KV_HSET] =
        {STORE_OP_KV_HSET, false, false, "HSET", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_HGET] =
        {STORE_OP_KV_HGET, true, false, "HGET", {F_KEY, F_ARG}},
    [STORE_OP_KV_HMGET] =
        {STORE_OP_KV_HMGET, true, false, "HMGET", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_HGETALL] =
        {STORE_OP_KV_HGETALL, true, false, "HGETALL", {F_KEY}},
    [STORE_OP_KV_HDEL] =
        {STORE_OP_KV_HDEL, false, false, "HDEL", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_LPUSH] =
        {STORE_OP_KV_LPUSH, false, false, "LPUSH", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_RPUSH] =
        {STORE_OP_KV_RPUSH, false, false, "RPUSH", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_LPOP] =
        {STORE_OP_KV_LPOP, false, false, "LPOP", {F_KEY, F_COUNT}},
    [STORE_OP_KV_RPOP] =
        {STORE_OP_KV_RPOP, false, false, "RPOP", {F_KEY, F_COUNT}},
    [STORE_OP_KV_LRANGE] =
        {STORE_OP_KV_LRANGE, true, false, "LRANGE", {F_KEY, F_START, F_STOP}},
    [STORE_OP_KV_SADD] =
        {STORE_OP_KV_SADD, false, false, "SADD", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_SREM] =
        {STORE_OP_KV_SREM, false, false, "SREM", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_SMEMBERS] =
        {STORE_OP_KV_SMEMBERS, true, false, "SMEMBERS", {F_KEY}},
    [STORE_OP_KV_SISMEMBER] =
        {STORE_OP_KV_SISMEMBER, true, false, "SISMEMBER", {F_KEY, F_ARG}},
    [STORE_OP_KV_ZADD] =
        {STORE_OP_KV_ZADD, false, false, "ZADD", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_ZREM] =
        {STORE_OP_KV_ZREM, false, false, "ZREM", {F_KEY, F_ITEMS}},
    [STORE_OP_KV_ZRANGE] = {STORE_OP_KV_ZRANGE,
                            true,
                            false,
                            "ZRANGE",
                            {F_KEY, F_START, F_STOP, F_FLAGS}},
    [STORE_OP_KV_ZSCORE] =
        {STORE_OP_KV_ZSCORE, true, false, "ZSCORE", {F_KEY, F_ARG}},
    [STORE_OP_EXPIRE] = {STORE_OP_EXPIRE, false, false, "EXPIRE", {F_ITEMS}},
    [STORE_OP_KV_EXPIRE_OPT] = {STORE_OP_KV_EXPIRE_OPT,
                                false,
                                false,
                                "EXPIRE_OPT",
                                {F_KEY, F_KIND, F_FLAGS, F_DELTA, F_ARG}},
    [STORE_OP_KV_RENAME] =
        {STORE_OP_KV_RENAME, false, false, "RENAME", {F_KEY, F_ARG, F_KIND}},
    [STORE_OP_KV_ZRANGE_EX] = {STORE_OP_KV_ZRANGE_EX,
                               true,
                               false,
                               "ZRANGE_EX",
                               {F_KEY, F_START, F_STOP, F_FLAGS, F_OFFSET,
                                F_COUNT}},
    [STORE_OP_KV_ZINCRBY] =
        {STORE_OP_KV_ZINCRBY, false, false, "ZINCRBY", {F_KEY, F_VALUE, F_ARG}},
    [STORE_OP_KV_HINCRBY] =
        {STORE_OP_KV_HINCRBY, false, false, "HINCRBY", {F_KEY, F_ARG, F_DELTA}},
    [STORE_OP_KV_HINCRBYFLOAT] = {STORE_OP_KV_HINCRBYFLOAT,
                                  false,
                                  false,
                                  "HINCRBYFLOAT",
                                  {F_KEY, F_ARG, F_VALUE}},
    [STORE_OP_KV_HEXISTS] =
        {STORE_OP_KV_HEXISTS, true, false, "HEXISTS", {F_KEY, F_ARG}},
    [STORE_OP_KV_HKEYS] =
        {STORE_OP_KV_HKEYS, true, false, "HKEYS", {F_KEY, F_KIND}},
    [STORE_OP_KV_KEYCOUNT] =
        {STORE_OP_KV_KEYCOUNT, true, false, "KEYCOUNT", {F_KIND}},
    [STORE_OP_KV_SCAN] = {STORE_OP_KV_SCAN,
                          true,
                          false,
                          "SCAN",
                          {F_ARG, F_COUNT, F_VALUE, F_FLAGS, F_KIND, F_SHARDS}},
    [STORE_OP_KV_ZADD_OPT] = {STORE_OP_KV_ZADD_OPT,
                              false,
                              false,
                              "ZADD_OPT",
                              {F_KEY, F_FLAGS, F_ITEMS}},
    [STORE_OP_KV_POP] =
        {STORE_OP_KV_POP, false, false, "POP", {F_KEY, F_KIND, F_COUNT}},
    [STORE_OP_KV_MULTI] =
        {STORE_OP_KV_MULTI, false, false, "MULTI", {F_COUNT, F_ITEMS}},
    [STORE_OP_KV_WATCH] = {STORE_OP_KV_WATCH, true, false, "WATCH", {F_ITEMS}},
};

/* Indexed by op (every command and read looks its op up). */
static const struct op_desc *find_op(uint8_t op)
{
	if (op >= sizeof ops / sizeof ops[0] || ops[op].name == NULL) {
		return NULL;
	}
	return &ops[op];
}

bool store_op_is_read(uint8_t op)
{
	const struct op_desc *d = find_op(op);
	return d != NULL && d->read;
}

bool store_op_in_multi(uint8_t op)
{
	return op >= STORE_OP_KV_FIRST && op <= STORE_OP_KV_LAST &&
	       op != STORE_OP_EXPIRE && find_op(op) != NULL;
}

bool store_op_is_meta(uint8_t op)
{
	const struct op_desc *d = find_op(op);
	return d != NULL && d->meta;
}

const char *store_op_name(uint8_t op)
{
	const struct op_desc *d = find_op(op);
	return d ? d->name : NULL;
}

/* How each field is stored in struct store_cmd and encoded: one table
 * lookup per field (every command is sized, encoded and decoded through
 * it; a chain of accessors per field was most of a SET's codec cost). */
enum field_kind { FK_NONE = 0, FK_SLICE, FK_U64, FK_U8, FK_U32, FK_ITEMS };

struct field_desc {
	uint8_t kind;
	uint16_t off; /* offsetof(struct store_cmd, ...) */
};

#define FD(k, m)                                                               \
	{                                                                      \
		k, (uint16_t)offsetof(struct store_cmd, m)                     \
	}

static const struct field_desc fields[] = {
    [F_KIND] = FD(FK_U8, kind),
    [F_FLAGS] = FD(FK_U8, flags),
    [F_DURABILITY] = FD(FK_U8, durability),
    [F_SHARD] = FD(FK_U32, shard),
    [F_SHARDS] = FD(FK_U32, shards),
    [F_ATTEMPTS] = FD(FK_U32, attempts),
    [F_SCOPE] = FD(FK_SLICE, scope),
    [F_TENANT] = FD(FK_SLICE, tenant),
    [F_NS] = FD(FK_SLICE, ns),
    [F_NAME] = FD(FK_SLICE, name),
    [F_GROUP] = FD(FK_SLICE, group),
    [F_KEY] = FD(FK_SLICE, key),
    [F_VALUE] = FD(FK_SLICE, value),
    [F_ARG] = FD(FK_SLICE, arg),
    [F_OFFSET] = FD(FK_U64, offset),
    [F_PRODUCER] = FD(FK_U64, producer),
    [F_SEQ] = FD(FK_U64, seq),
    [F_TTL] = FD(FK_U64, ttl_ms),
    [F_MAX] = FD(FK_U64, max),
    [F_MAX_BYTES] = FD(FK_U64, max_bytes),
    [F_VISIBILITY] = FD(FK_U64, visibility_ms),
    [F_RBYTES] = FD(FK_U64, retention_bytes),
    [F_RMS] = FD(FK_U64, retention_ms),
    [F_WINDOW] = FD(FK_U64, window_ms),
    [F_COUNT] = FD(FK_U64, count),
    /* Signed, encoded as their two's complement u64. */
    [F_DELTA] = FD(FK_U64, delta),
    [F_START] = FD(FK_U64, start),
    [F_STOP] = FD(FK_U64, stop),
    [F_ITEMS] = FD(FK_ITEMS, items),
};

_Static_assert(sizeof(int64_t) == sizeof(uint64_t),
               "i64 fields are read and written as u64");

static const void *field_at(const struct store_cmd *c, uint8_t f)
{
	return (const uint8_t *)c + fields[f].off;
}

static void *field_at_mut(struct store_cmd *c, uint8_t f)
{
	return (uint8_t *)c + fields[f].off;
}

/* The encoded size of `c` (whose op is `d`), so the encoder allocates once
 * and no more than it writes: a stream append's command is tens of KiB, and
 * sbuf's doubling gave a 64 x 1 KiB batch a 128 KiB buffer, glibc's mmap
 * threshold. */
static size_t encoded_size(const struct store_cmd *c, const struct op_desc *d)
{
	size_t n = 2;

	for (int i = 0; i < MAX_FIELDS && d->fields[i] != F_END; i++) {
		uint8_t f = d->fields[i];

		switch (fields[f].kind) {
		case FK_SLICE:
			n += 4 +
			     ((const struct store_slice *)field_at(c, f))->len;
			break;
		case FK_U64:
			n += 8;
			break;
		case FK_U8:
			n += 1;
			break;
		case FK_U32:
			n += 4;
			break;
		case FK_ITEMS:
			n += 4;
			if (c->items.v == NULL) {
				n += c->items.enc_len;
				break;
			}
			for (uint32_t j = 0; j < c->items.n; j++) {
				n += 4 + c->items.v[j].len;
			}
			break;
		default:
			break;
		}
	}
	return n;
}

/* Checks that `c` can be encoded: its op's schema, or NULL with *err. */
static const struct op_desc *encodable(const struct store_cmd *c,
                                       const char **err)
{
	const struct op_desc *d = find_op(c->op);

	if (d == NULL) {
		*err = "unknown store op";
		return NULL;
	}
	if (c->items.n > STORE_CMD_MAX_ITEMS) {
		*err = "too many items in a store command";
		return NULL;
	}
	return d;
}

/* Writes the fields of `c` into `b`, which has room for all of them (the
 * encoded size): it never grows. */
static void encode_fields(const struct store_cmd *c, const struct op_desc *d,
                          struct sbuf *b)
{
	sbuf_u8(b, STORE_CMD_VERSION);
	sbuf_u8(b, c->op);
	for (int i = 0; i < MAX_FIELDS && d->fields[i] != F_END; i++) {
		uint8_t f = d->fields[i];
		const void *at = field_at(c, f);
		uint64_t u64;
		uint32_t u32;

		switch (fields[f].kind) {
		case FK_SLICE: {
			const struct store_slice *s = at;
			sbuf_lbytes(b, s->p, s->len);
			break;
		}
		case FK_U64:
			memcpy(&u64, at, sizeof u64);
			sbuf_u64(b, u64);
			break;
		case FK_U8:
			sbuf_u8(b, *(const uint8_t *)at);
			break;
		case FK_U32:
			memcpy(&u32, at, sizeof u32);
			sbuf_u32(b, u32);
			break;
		case FK_ITEMS:
			sbuf_u32(b, c->items.n);
			if (c->items.v != NULL) {
				for (uint32_t j = 0; j < c->items.n; j++) {
					sbuf_lbytes(b, c->items.v[j].p,
					            c->items.v[j].len);
				}
			} else {
				sbuf_add(b, c->items.enc, c->items.enc_len);
			}
			break;
		default:
			break;
		}
	}
}

int store_cmd_size(const struct store_cmd *c, size_t *len, const char **err)
{
	const struct op_desc *d = encodable(c, err);

	if (d == NULL) {
		return -1;
	}
	*len = encoded_size(c, d);
	return 0;
}

void store_cmd_encode_to(const struct store_cmd *c, uint8_t *out, size_t len)
{
	const struct op_desc *d = find_op(c->op);
	/* The caller's buffer, exactly the encoded size: sbuf_add never
	 * needs to grow it. */
	struct sbuf b = {out, 0, len};

	encode_fields(c, d, &b);
}

int store_cmd_encode(const struct store_cmd *c, uint8_t **out, size_t *len,
                     const char **err)
{
	const struct op_desc *d = encodable(c, err);
	struct sbuf b;

	if (d == NULL) {
		return -1;
	}
	/* Exactly the encoded size (sbuf_reserve rounds up to a power of
	 * two). */
	b.cap = encoded_size(c, d);
	b.p = store_xmalloc(b.cap);
	b.len = 0;
	encode_fields(c, d, &b);
	*out = sbuf_take(&b, len);
	return 0;
}

/* A transaction's items: `count` (key, stamp) pairs, then commands that
 * each decode and are of an op a transaction may carry (so transactions
 * never nest). */
static int check_multi(const struct store_cmd *c, const char **err)
{
	struct store_list_iter it;
	struct store_slice s;
	uint64_t i = 0;

	if (c->count > c->items.n / 2) {
		*err = "transaction watches more keys than it lists";
		return -1;
	}
	store_list_iter_init(&it, &c->items);
	while (store_list_next(&it, &s)) {
		struct store_cmd sub;
		const char *e;

		if (i < 2 * c->count) {
			if (i % 2 == 1 && s.len != STORE_WATCH_STAMP_LEN) {
				*err = "transaction has a watch stamp of the "
				       "wrong length";
				return -1;
			}
		} else if (s.len < 2 || s.p[0] != STORE_CMD_VERSION ||
		           !store_op_in_multi(s.p[1])) {
			*err = "transaction carries a command that is not a "
			       "KV command";
			return -1;
		} else if (store_cmd_decode(s.p, s.len, &sub, &e) != 0) {
			*err = "transaction carries a command that does not "
			       "decode";
			return -1;
		}
		i++;
	}
	return 0;
}

int store_cmd_decode(const uint8_t *p, size_t len, struct store_cmd *c,
                     const char **err)
{
	struct rd r;
	const struct op_desc *d;

	memset(c, 0, sizeof *c);
	rd_init(&r, p, len);
	if (len < 2) {
		*err = "store command truncated";
		return -1;
	}
	if (rd_u8(&r) != STORE_CMD_VERSION) {
		*err = "unknown store command version";
		return -1;
	}
	c->op = rd_u8(&r);
	d = find_op(c->op);
	if (d == NULL) {
		*err = "unknown store op";
		return -1;
	}
	for (int i = 0; i < MAX_FIELDS && d->fields[i] != F_END; i++) {
		uint8_t f = d->fields[i];
		void *at = field_at_mut(c, f);
		uint64_t u64;
		uint32_t u32;

		switch (fields[f].kind) {
		case FK_SLICE: {
			struct store_slice *s = at;
			s->p = rd_lbytes(&r, &s->len);
			break;
		}
		case FK_U64:
			u64 = rd_u64(&r);
			memcpy(at, &u64, sizeof u64);
			break;
		case FK_U8:
			*(uint8_t *)at = rd_u8(&r);
			break;
		case FK_U32:
			u32 = rd_u32(&r);
			memcpy(at, &u32, sizeof u32);
			break;
		case FK_ITEMS: {
			uint32_t n = rd_u32(&r);
			size_t start = r.off;
			if (n > STORE_CMD_MAX_ITEMS) {
				*err = "too many items in a store command";
				return -1;
			}
			for (uint32_t j = 0; j < n && !r.bad; j++) {
				size_t l;
				(void)rd_lbytes(&r, &l);
			}
			c->items.n = n;
			c->items.enc = r.bad ? NULL : p + start;
			c->items.enc_len = r.bad ? 0 : r.off - start;
			break;
		}
		default:
			break;
		}
		if (r.bad) {
			*err = "store command truncated";
			return -1;
		}
	}
	if (!rd_done(&r)) {
		*err = "store command has trailing bytes";
		return -1;
	}
	if (c->op == STORE_OP_KV_MULTI) {
		return check_multi(c, err);
	}
	return 0;
}

void store_list_iter_init(struct store_list_iter *it,
                          const struct store_list *l)
{
	it->l = l;
	it->i = 0;
	it->off = 0;
}

bool store_list_next(struct store_list_iter *it, struct store_slice *out)
{
	const struct store_list *l = it->l;

	if (it->i >= l->n) {
		return false;
	}
	if (l->v != NULL) {
		*out = l->v[it->i++];
		return true;
	}
	/* The decoder validated every length. */
	out->len = be_get32(l->enc + it->off);
	out->p = l->enc + it->off + 4;
	it->off += 4 + out->len;
	it->i++;
	return true;
}
