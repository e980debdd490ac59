/* FSNP command table and request-to-store translation; see fsnp_cmd.h. */
#include "node/fsnp/fsnp_cmd.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"
#include "store/kvscan.h"
#include "node/scan_cursors.h"

/* --- Command table ------------------------------------------------------ */

#define KV(n, o, s)                                                            \
	{                                                                      \
		n, o, FSNP_CMD_KV, s                                           \
	}
#define CTL(n, o)                                                              \
	{                                                                      \
		n, o, FSNP_CMD_CONTROL, 0                                      \
	}

static const struct fsnp_cmd_info cmds[] = {
    KV("GET", FSNP_OP_GET, STORE_OP_KV_GET),
    KV("SET", FSNP_OP_SET, STORE_OP_KV_SET),
    KV("DEL", FSNP_OP_DEL, STORE_OP_KV_DEL),
    KV("UNLINK", 0, STORE_OP_KV_DEL),
    KV("MGET", FSNP_OP_MGET, STORE_OP_KV_MGET),
    KV("MSET", FSNP_OP_MSET, STORE_OP_KV_MSET),
    KV("CAS", FSNP_OP_CAS, STORE_OP_KV_CAS),
    KV("LOCK", FSNP_OP_LOCK, STORE_OP_KV_LOCK),
    KV("UNLOCK", FSNP_OP_UNLOCK, STORE_OP_KV_UNLOCK),
    KV("EXTEND", FSNP_OP_EXTEND, STORE_OP_KV_EXTEND),
    KV("RATELIMIT.ADD", FSNP_OP_RATELIMIT_ADD, STORE_OP_KV_RATELIMIT),
    KV("FETCH_OR_COMPUTE", FSNP_OP_FETCH_OR_COMPUTE, STORE_OP_KV_FOC),
    KV("FETCH_OR_COMPUTE_RESULT", FSNP_OP_FETCH_OR_COMPUTE_RESULT,
       STORE_OP_KV_FOC_RESULT),
    KV("FETCH_OR_COMPUTE_ERROR", FSNP_OP_FETCH_OR_COMPUTE_ERROR,
       STORE_OP_KV_FOC_ERROR),
    KV("HSET", FSNP_OP_HSET, STORE_OP_KV_HSET),
    KV("HGET", FSNP_OP_HGET, STORE_OP_KV_HGET),
    KV("HMGET", FSNP_OP_HMGET, STORE_OP_KV_HMGET),
    KV("HGETALL", FSNP_OP_HGETALL, STORE_OP_KV_HGETALL),
    KV("HDEL", 0, STORE_OP_KV_HDEL),
    KV("LPUSH", FSNP_OP_LPUSH, STORE_OP_KV_LPUSH),
    KV("RPUSH", FSNP_OP_RPUSH, STORE_OP_KV_RPUSH),
    KV("LPOP", FSNP_OP_LPOP, STORE_OP_KV_LPOP),
    KV("RPOP", FSNP_OP_RPOP, STORE_OP_KV_RPOP),
    KV("LRANGE", FSNP_OP_LRANGE, STORE_OP_KV_LRANGE),
    KV("SADD", FSNP_OP_SADD, STORE_OP_KV_SADD),
    KV("SREM", FSNP_OP_SREM, STORE_OP_KV_SREM),
    KV("SMEMBERS", FSNP_OP_SMEMBERS, STORE_OP_KV_SMEMBERS),
    KV("SISMEMBER", FSNP_OP_SISMEMBER, STORE_OP_KV_SISMEMBER),
    KV("ZADD", FSNP_OP_ZADD, STORE_OP_KV_ZADD),
    KV("ZREM", FSNP_OP_ZREM, STORE_OP_KV_ZREM),
    KV("ZRANGE", FSNP_OP_ZRANGE, STORE_OP_KV_ZRANGE),
    KV("ZSCORE", FSNP_OP_ZSCORE, STORE_OP_KV_ZSCORE),
    KV("ZRANGEBYSCORE", 0, STORE_OP_KV_ZRANGE),
    KV("INCR", 0, STORE_OP_KV_INCRBY),
    KV("DECR", 0, STORE_OP_KV_INCRBY),
    KV("INCRBY", 0, STORE_OP_KV_INCRBY),
    KV("DECRBY", 0, STORE_OP_KV_INCRBY),
    KV("EXISTS", 0, STORE_OP_KV_EXISTS),
    KV("TYPE", 0, STORE_OP_KV_KEYINFO),
    KV("TTL", 0, STORE_OP_KV_KEYINFO),
    KV("PTTL", 0, STORE_OP_KV_KEYINFO),
    KV("EXPIRE", 0, STORE_OP_KV_EXPIRE_SET),
    KV("PEXPIRE", 0, STORE_OP_KV_EXPIRE_SET),
    KV("PERSIST", 0, STORE_OP_KV_EXPIRE_SET),
    KV("APPEND", 0, STORE_OP_KV_APPEND),
    KV("STRLEN", 0, STORE_OP_KV_STRLEN),
    KV("GETDEL", 0, STORE_OP_KV_GETDEL),
    KV("GETRANGE", 0, STORE_OP_KV_GETRANGE),
    KV("LINDEX", 0, STORE_OP_KV_LINDEX),
    KV("LTRIM", 0, STORE_OP_KV_LTRIM),
    KV("INCRBYFLOAT", 0, STORE_OP_KV_INCRBYFLOAT),
    KV("SETRANGE", 0, STORE_OP_KV_SETRANGE),
    KV("GETEX", 0, STORE_OP_KV_GETEX),
    KV("ZRANK", 0, STORE_OP_KV_ZRANK),
    KV("ZREVRANK", 0, STORE_OP_KV_ZRANK),
    KV("HLEN", 0, STORE_OP_KV_LEN),
    KV("LLEN", 0, STORE_OP_KV_LEN),
    KV("SCARD", 0, STORE_OP_KV_LEN),
    KV("ZCARD", 0, STORE_OP_KV_LEN),
    KV("MSETNX", 0, STORE_OP_KV_MSETNX),
    KV("EXPIREAT", 0, STORE_OP_KV_EXPIRE_OPT),
    KV("PEXPIREAT", 0, STORE_OP_KV_EXPIRE_OPT),
    KV("RENAME", 0, STORE_OP_KV_RENAME),
    KV("RENAMENX", 0, STORE_OP_KV_RENAME),
    KV("ZINCRBY", 0, STORE_OP_KV_ZINCRBY),
    KV("ZCOUNT", 0, STORE_OP_KV_ZRANGE_EX),
    KV("ZREVRANGEBYSCORE", 0, STORE_OP_KV_ZRANGE),
    KV("HINCRBY", 0, STORE_OP_KV_HINCRBY),
    KV("HINCRBYFLOAT", 0, STORE_OP_KV_HINCRBYFLOAT),
    KV("HEXISTS", 0, STORE_OP_KV_HEXISTS),
    KV("HKEYS", 0, STORE_OP_KV_HKEYS),
    KV("HVALS", 0, STORE_OP_KV_HKEYS),
    KV("DBSIZE", 0, STORE_OP_KV_KEYCOUNT),
    KV("KEYS", 0, STORE_OP_KV_SCAN),
    KV("SCAN", 0, STORE_OP_KV_SCAN),
    KV("ACL", 0, STORE_OP_ACL_LIST),
    CTL("HELLO", FSNP_OP_HELLO),
    CTL("AUTH", FSNP_OP_AUTH),
    CTL("PING", FSNP_OP_PING),
    CTL("ECHO", 0),
    CTL("CLIENT", 0),
    CTL("CLIENT.SETNAME", FSNP_OP_CLIENT_SETNAME),
    CTL("CLIENT.INFO", FSNP_OP_CLIENT_INFO),
    CTL("ROUTE", FSNP_OP_ROUTE),
    CTL("SHARDS", FSNP_OP_SHARDS),
    CTL("BACKPRESSURE", FSNP_OP_BACKPRESSURE),
    CTL("QUIT", FSNP_OP_QUIT),
    CTL("OPTIONS", FSNP_OP_OPTIONS),
    CTL("STARTUP", FSNP_OP_STARTUP),
    CTL("WINDOW_UPDATE", FSNP_OP_WINDOW_UPDATE),
    CTL("PIPELINE", FSNP_OP_PIPELINE),
    CTL("ROUTE_BATCH", FSNP_OP_ROUTE_BATCH),
    CTL("SUBSCRIBE_EVENTS", FSNP_OP_SUBSCRIBE_EVENTS),
    CTL("UNSUBSCRIBE_EVENTS", FSNP_OP_UNSUBSCRIBE_EVENTS),
};

#define N_CMDS (sizeof cmds / sizeof cmds[0])

size_t fsnp_cmd_count(void)
{
	return N_CMDS;
}

const struct fsnp_cmd_info *fsnp_cmd_at(size_t index)
{
	return index < N_CMDS ? &cmds[index] : NULL;
}

static bool name_eq(const char *a, const void *b, size_t len)
{
	const unsigned char *p = b;
	size_t i;
	for (i = 0; i < len && a[i] != '\0'; i++) {
		if (toupper(p[i]) != (unsigned char)a[i]) {
			return false;
		}
	}
	return i == len && a[i] == '\0';
}

/* Flow and admin opcodes are known by name through the opcode table;
 * their entries here are built on the fly (one static slot per kind is
 * enough: callers only read name-independent fields). */
static const struct fsnp_cmd_info flow_info = {"FLOW", 0, FSNP_CMD_FLOW, 0};
static const struct fsnp_cmd_info admin_info = {"ADMIN", 0, FSNP_CMD_ADMIN, 0};

const struct fsnp_cmd_info *fsnp_cmd_by_name(const void *name, size_t len)
{
	for (size_t i = 0; i < N_CMDS; i++) {
		if (name_eq(cmds[i].name, name, len)) {
			return &cmds[i];
		}
	}
	uint16_t code;
	if (fsnp_opcode_by_name(name, len, &code) == 0) {
		return fsnp_cmd_by_opcode(code);
	}
	/* "FLOW.*" names the opcode table lacks are still Flow. */
	if (len > 5 && name_eq("FLOW.", name, 5)) {
		return &flow_info;
	}
	return NULL;
}

const struct fsnp_cmd_info *fsnp_cmd_by_opcode(uint16_t opcode)
{
	if (opcode == 0) {
		return NULL;
	}
	for (size_t i = 0; i < N_CMDS; i++) {
		if (cmds[i].opcode == opcode) {
			return &cmds[i];
		}
	}
	const struct fsnp_opcode_info *oi = fsnp_opcode_info(opcode);
	if (oi == NULL) {
		return NULL;
	}
	if (oi->group == FSNP_OPG_FLOW) {
		return &flow_info;
	}
	if (oi->group == FSNP_OPG_ADMIN) {
		return &admin_info;
	}
	return NULL;
}

/* --- Errors --------------------------------------------------------------- */

void fsnp_cmd_err_set(struct fsnp_cmd_err *err, uint16_t status,
                      const char *code, const char *fmt, ...)
{
	va_list ap;
	err->status = status;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
}

static int bad_request(struct fsnp_cmd_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int bad_request(struct fsnp_cmd_err *err, const char *fmt, ...)
{
	va_list ap;
	err->status = FSNP_STATUS_BAD_REQUEST;
	err->code = "bad_request";
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return -1;
}

static int cmd_error(struct fsnp_cmd_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int cmd_error(struct fsnp_cmd_err *err, const char *fmt, ...)
{
	va_list ap;
	err->status = FSNP_STATUS_ERROR;
	err->code = "error";
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return -1;
}

static int nomem(struct fsnp_cmd_err *err)
{
	fsnp_cmd_err_set(err, FSNP_STATUS_BUSY, "busy", "BUSY out of memory");
	return -1;
}

/* --- Request being parsed --------------------------------------------- */

/* Scratch memory for converted values (numbers as text, scores as
 * doubles): freed once the plan's commands are encoded. */
struct blk {
	struct blk *next;
	size_t used, cap;
	uint8_t data[];
};

struct preq {
	struct store_cmd c;
	struct store_slice *items; /* owned; c.items.v */
	uint32_t n, cap;
	struct blk *arena;
	const struct fsnp_cmd_ctx *ctx;
	struct fsnp_cmd_err *err;
	uint16_t opcode;
	uint16_t key_status; /* status of a bad key (GET: 1) */
};

static void preq_init(struct preq *r, uint16_t opcode, uint8_t op,
                      const struct fsnp_cmd_ctx *ctx, struct fsnp_cmd_err *err)
{
	memset(r, 0, sizeof *r);
	r->c.op = op;
	r->ctx = ctx;
	r->err = err;
	r->opcode = opcode;
	r->key_status =
	    opcode == FSNP_OP_GET ? FSNP_STATUS_ERROR : FSNP_STATUS_BAD_REQUEST;
}

static void preq_fini(struct preq *r)
{
	while (r->arena != NULL) {
		struct blk *b = r->arena;
		r->arena = b->next;
		free(b);
	}
	free(r->items);
}

static void *scratch(struct preq *r, size_t n)
{
	struct blk *b = r->arena;
	if (b == NULL || b->cap - b->used < n) {
		size_t cap = n > 4000 ? n : 4000;
		b = malloc(sizeof *b + cap);
		if (b == NULL) {
			return NULL;
		}
		b->cap = cap;
		b->used = 0;
		b->next = r->arena;
		r->arena = b;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

static int add_item(struct preq *r, const void *p, size_t len)
{
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 8;
		struct store_slice *v = realloc(r->items, cap * sizeof *v);
		if (v == NULL) {
			return nomem(r->err);
		}
		r->items = v;
		r->cap = cap;
	}
	if (r->n >= r->ctx->max_items || r->n >= STORE_CMD_MAX_ITEMS) {
		return bad_request(r->err,
		                   "ERR native command has more than %" PRIu32
		                   " items",
		                   r->ctx->max_items);
	}
	r->items[r->n].p = p;
	r->items[r->n].len = len;
	r->n++;
	return 0;
}

/* A scalar as the bytes stored for it: binaries as they are, numbers as
 * their decimal text. -1 for anything else. */
static int scalar_bytes(struct preq *r, const struct fsnp_val *v,
                        struct store_slice *out)
{
	char buf[64];
	int n;
	switch (v->tag) {
	case FSNP_BIN:
		out->p = v->as.bin.ptr;
		out->len = v->as.bin.len;
		return 0;
	case FSNP_I64:
		n = snprintf(buf, sizeof buf, "%" PRId64, v->as.i);
		break;
	case FSNP_U64:
		n = snprintf(buf, sizeof buf, "%" PRIu64, v->as.u);
		break;
	case FSNP_F64:
		if (!isfinite(v->as.f)) {
			return -1;
		}
		n = snprintf(buf, sizeof buf, "%.17g", v->as.f);
		break;
	default:
		return -1;
	}
	uint8_t *p = scratch(r, (size_t)n);
	if (p == NULL) {
		return nomem(r->err);
	}
	memcpy(p, buf, (size_t)n);
	out->p = p;
	out->len = (size_t)n;
	return 0;
}

/* An integer argument: an integer tag, or a binary holding decimal digits
 * (COMMAND_EXEC). */
static int val_int(const struct fsnp_val *v, int64_t *out)
{
	if (fsnp_val_i64(v, out) == 0) {
		return 0;
	}
	if (v->tag != FSNP_BIN || v->as.bin.len == 0 || v->as.bin.len > 20) {
		return -1;
	}
	char buf[24];
	char *end;
	memcpy(buf, v->as.bin.ptr, v->as.bin.len);
	buf[v->as.bin.len] = '\0';
	if (isspace((unsigned char)buf[0])) {
		return -1;
	}
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (errno != 0 || *end != '\0') {
		return -1;
	}
	*out = x;
	return 0;
}

/* A score: any number, or a binary holding one ("inf" included); never
 * NaN. */
static int val_score(const struct fsnp_val *v, double *out)
{
	if (v->tag == FSNP_BIN) {
		char buf[64];
		char *end;
		if (v->as.bin.len == 0 || v->as.bin.len >= sizeof buf) {
			return -1;
		}
		memcpy(buf, v->as.bin.ptr, v->as.bin.len);
		buf[v->as.bin.len] = '\0';
		if (isspace((unsigned char)buf[0])) {
			return -1;
		}
		errno = 0;
		*out = strtod(buf, &end);
		return *end != '\0' || isnan(*out) ? -1 : 0;
	}
	if (fsnp_val_f64(v, out) != 0 || isnan(*out)) {
		return -1;
	}
	return 0;
}

static int add_score(struct preq *r, double d)
{
	uint8_t *p = scratch(r, 8);
	uint64_t u;
	if (p == NULL) {
		return nomem(r->err);
	}
	memcpy(&u, &d, sizeof u);
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t)(u >> (56 - 8 * i));
	}
	return add_item(r, p, 8);
}

/* --- Typed bodies --------------------------------------------------------- */

static int field_key(struct preq *r, const struct fsnp_val *body,
                     const char *name, struct store_slice *out)
{
	struct fsnp_bytes b;
	if (fsnp_map_bin(body, name, &b) != 0) {
		fsnp_cmd_err_set(r->err, r->key_status,
		                 r->key_status == FSNP_STATUS_ERROR
		                     ? "error"
		                     : "bad_request",
		                 "ERR native %s must be binary", name);
		return -1;
	}
	out->p = b.ptr;
	out->len = b.len;
	return 0;
}

static int field_value(struct preq *r, const struct fsnp_val *body,
                       const char *name, bool required, struct store_slice *out)
{
	struct fsnp_val v;
	if (fsnp_map_get(body, name, &v) != 0) {
		if (!required) {
			out->p = NULL;
			out->len = 0;
			return 0;
		}
		return bad_request(r->err, "ERR native %s must be binary",
		                   name);
	}
	int rv = scalar_bytes(r, &v, out);
	if (rv != 0 && r->err->message[0] == '\0') {
		return bad_request(r->err, "ERR native %s must be binary",
		                   name);
	}
	return rv;
}

/* An optional integer field: *present tells whether it was there. */
static int field_int(struct preq *r, const struct fsnp_val *body,
                     const char *name, int64_t min, bool *present, int64_t *out)
{
	struct fsnp_val v;
	*present = false;
	if (fsnp_map_get(body, name, &v) != 0 || fsnp_val_is_nil(&v)) {
		return 0;
	}
	if (fsnp_val_i64(&v, out) != 0 || *out < min) {
		if (min > 0) {
			return bad_request(r->err,
			                   "ERR native %s must be a positive "
			                   "integer",
			                   name);
		}
		return bad_request(r->err,
		                   min == 0
		                       ? "ERR native %s must be a "
		                         "non-negative integer"
		                       : "ERR native %s must be an integer",
		                   name);
	}
	*present = true;
	return 0;
}

static int field_int_req(struct preq *r, const struct fsnp_val *body,
                         const char *name, int64_t min, int64_t *out)
{
	bool present;
	if (field_int(r, body, name, min, &present, out) != 0) {
		return -1;
	}
	if (!present) {
		return bad_request(r->err,
		                   min > 0 ? "ERR native %s must be a positive "
		                             "integer"
		                           : "ERR native %s must be an integer",
		                   name);
	}
	return 0;
}

static int field_bool(struct preq *r, const struct fsnp_val *body,
                      const char *name, bool *out)
{
	struct fsnp_val v;
	*out = false;
	if (fsnp_map_get(body, name, &v) != 0 || fsnp_val_is_nil(&v)) {
		return 0;
	}
	if (fsnp_val_bool(&v, out) != 0) {
		return bad_request(r->err, "ERR native %s must be boolean",
		                   name);
	}
	return 0;
}

/* A list of scalars appended to the items. */
static int field_list(struct preq *r, const struct fsnp_val *body,
                      const char *name, bool nonempty)
{
	struct fsnp_val arr, v;
	struct fsnp_iter it;
	if (fsnp_map_array(body, name, &arr) != 0) {
		return bad_request(r->err, "ERR native %s must be a list",
		                   name);
	}
	if (nonempty && arr.as.count == 0) {
		return bad_request(r->err, "ERR native %s must not be empty",
		                   name);
	}
	fsnp_iter_init(&it, &arr);
	while (fsnp_iter_next(&it, NULL, &v)) {
		struct store_slice s;
		if (scalar_bytes(r, &v, &s) != 0) {
			if (r->err->message[0] != '\0') {
				return -1;
			}
			return bad_request(
			    r->err, "ERR native %s must hold binaries", name);
		}
		if (add_item(r, s.p, s.len) != 0) {
			return -1;
		}
	}
	return 0;
}

static int body_set(struct preq *r, const struct fsnp_val *b)
{
	int64_t ttl = 0, exat = 0, pxat = 0;
	bool has_ttl, has_exat, has_pxat, nx, xx, get, keepttl;
	if (field_key(r, b, "key", &r->c.key) != 0 ||
	    field_value(r, b, "value", true, &r->c.value) != 0 ||
	    field_int(r, b, "ttl", 0, &has_ttl, &ttl) != 0 ||
	    field_int(r, b, "exat", 1, &has_exat, &exat) != 0 ||
	    field_int(r, b, "pxat", 1, &has_pxat, &pxat) != 0 ||
	    field_bool(r, b, "nx", &nx) != 0 ||
	    field_bool(r, b, "xx", &xx) != 0 ||
	    field_bool(r, b, "get", &get) != 0 ||
	    field_bool(r, b, "keepttl", &keepttl) != 0) {
		return -1;
	}
	if (nx && xx) {
		return bad_request(r->err, "ERR XX and NX options at the same "
		                           "time are not compatible");
	}
	if ((has_ttl && ttl > 0) + has_exat + has_pxat + keepttl > 1) {
		return bad_request(r->err, "ERR syntax error");
	}
	r->c.flags =
	    (uint8_t)((nx ? STORE_SET_NX : 0) | (xx ? STORE_SET_XX : 0) |
	              (get ? STORE_SET_GET : 0) |
	              (keepttl ? STORE_SET_KEEPTTL : 0));
	if (has_ttl && ttl > 0) {
		r->c.kind = STORE_EXPIRE_TTL;
		r->c.ttl_ms = (uint64_t)ttl;
	} else if (has_exat) {
		if (exat > INT64_MAX / 1000) {
			return bad_request(r->err, "ERR invalid expire time");
		}
		r->c.kind = STORE_EXPIRE_AT;
		r->c.ttl_ms = (uint64_t)exat * 1000;
	} else if (has_pxat) {
		r->c.kind = STORE_EXPIRE_AT;
		r->c.ttl_ms = (uint64_t)pxat;
	}
	return 0;
}

/* MSET pairs: [{key, value}...] or [[key, value]...]. */
static int body_pairs(struct preq *r, const struct fsnp_val *b)
{
	struct fsnp_val arr, pair, k, v;
	struct fsnp_iter it;
	if (fsnp_map_array(b, "pairs", &arr) != 0) {
		return bad_request(r->err,
		                   "ERR native field pairs must be a list");
	}
	fsnp_iter_init(&it, &arr);
	while (fsnp_iter_next(&it, NULL, &pair)) {
		struct store_slice ks, vs;
		bool ok = false;
		if (pair.tag == FSNP_MAP) {
			ok = fsnp_map_get(&pair, "key", &k) == 0 &&
			     fsnp_map_get(&pair, "value", &v) == 0;
		} else if (pair.tag == FSNP_ARRAY && pair.as.count == 2) {
			struct fsnp_iter pi;
			fsnp_iter_init(&pi, &pair);
			ok = fsnp_iter_next(&pi, NULL, &k) &&
			     fsnp_iter_next(&pi, NULL, &v);
		}
		if (!ok || k.tag != FSNP_BIN || scalar_bytes(r, &v, &vs) != 0) {
			if (r->err->message[0] != '\0') {
				return -1;
			}
			return bad_request(r->err,
			                   "ERR native mset pairs must be maps "
			                   "or [key, value] arrays");
		}
		ks.p = k.as.bin.ptr;
		ks.len = k.as.bin.len;
		if (add_item(r, ks.p, ks.len) != 0 ||
		    add_item(r, vs.p, vs.len) != 0) {
			return -1;
		}
	}
	if (r->n == 0) {
		return bad_request(r->err,
		                   "ERR native pairs must not be empty");
	}
	return 0;
}

static int body_hset(struct preq *r, const struct fsnp_val *b)
{
	struct fsnp_val map, v;
	struct fsnp_bytes f;
	struct fsnp_iter it;
	if (fsnp_map_map(b, "fields", &map) != 0 || map.as.count == 0) {
		return bad_request(r->err,
		                   "ERR native fields must be a non-empty map");
	}
	fsnp_iter_init(&it, &map);
	while (fsnp_iter_next(&it, &f, &v)) {
		struct store_slice vs;
		if (scalar_bytes(r, &v, &vs) != 0) {
			if (r->err->message[0] != '\0') {
				return -1;
			}
			return bad_request(r->err, "ERR native field values "
			                           "must be binary");
		}
		if (add_item(r, f.ptr, f.len) != 0 ||
		    add_item(r, vs.p, vs.len) != 0) {
			return -1;
		}
	}
	return 0;
}

/* ZADD items: [[score, member]...]; scores as integers or floats (the SDK
 * sends whole numbers as i64). */
static int body_zadd(struct preq *r, const struct fsnp_val *b)
{
	struct fsnp_val arr, pair, s, m;
	struct fsnp_iter it;
	if (fsnp_map_array(b, "items", &arr) != 0 || arr.as.count == 0) {
		return bad_request(r->err,
		                   "ERR native field items must be a list");
	}
	fsnp_iter_init(&it, &arr);
	while (fsnp_iter_next(&it, NULL, &pair)) {
		struct fsnp_iter pi;
		struct store_slice ms;
		double d;
		bool ok = false;
		if (pair.tag == FSNP_ARRAY && pair.as.count == 2) {
			fsnp_iter_init(&pi, &pair);
			ok = fsnp_iter_next(&pi, NULL, &s) &&
			     fsnp_iter_next(&pi, NULL, &m);
		} else if (pair.tag == FSNP_MAP) {
			ok = fsnp_map_get(&pair, "score", &s) == 0 &&
			     fsnp_map_get(&pair, "member", &m) == 0;
		}
		if (!ok) {
			return bad_request(r->err,
			                   "ERR native zadd items must be "
			                   "[score, member] pairs");
		}
		if (val_score(&s, &d) != 0) {
			return bad_request(r->err,
			                   "ERR value is not a valid float");
		}
		if (scalar_bytes(r, &m, &ms) != 0) {
			if (r->err->message[0] != '\0') {
				return -1;
			}
			return bad_request(r->err,
			                   "ERR native zadd member must be "
			                   "binary");
		}
		if (add_score(r, d) != 0 || add_item(r, ms.p, ms.len) != 0) {
			return -1;
		}
	}
	return 0;
}

static int parse_body(struct preq *r, const struct fsnp_val *b)
{
	struct store_cmd *c = &r->c;
	int64_t x = 0;
	bool present;

	switch (c->op) {
	case STORE_OP_KV_GET:
	case STORE_OP_KV_HGETALL:
	case STORE_OP_KV_SMEMBERS:
		return field_key(r, b, "key", &c->key);
	case STORE_OP_KV_SET:
		return body_set(r, b);
	case STORE_OP_KV_DEL:
	case STORE_OP_KV_MGET:
		return field_list(r, b, "keys", false);
	case STORE_OP_KV_MSET:
		return body_pairs(r, b);
	case STORE_OP_KV_CAS:
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_value(r, b, "expected", true, &c->arg) != 0 ||
		    field_value(r, b, "value", true, &c->value) != 0 ||
		    field_int(r, b, "ttl", 0, &present, &x) != 0) {
			return -1;
		}
		if (present && x > 0) {
			c->kind = STORE_EXPIRE_TTL;
			c->ttl_ms = (uint64_t)x;
		}
		return 0;
	case STORE_OP_KV_LOCK:
	case STORE_OP_KV_EXTEND:
		if (field_int_req(r, b, "ttl_ms", 1, &x) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		/* fall through */
	case STORE_OP_KV_UNLOCK: {
		struct fsnp_bytes owner;
		if (field_key(r, b, "key", &c->key) != 0) {
			return -1;
		}
		if (fsnp_map_bin(b, "owner", &owner) != 0) {
			return bad_request(r->err,
			                   "ERR native owner must be binary");
		}
		c->arg.p = owner.ptr;
		c->arg.len = owner.len;
		return 0;
	}
	case STORE_OP_KV_RATELIMIT:
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_int_req(r, b, "window_ms", 1, &x) != 0) {
			return -1;
		}
		c->window_ms = (uint64_t)x;
		if (field_int_req(r, b, "max", 1, &x) != 0) {
			return -1;
		}
		c->max = (uint64_t)x;
		if (field_int(r, b, "count", 1, &present, &x) != 0) {
			return -1;
		}
		c->count = present ? (uint64_t)x : 1;
		return 0;
	case STORE_OP_KV_FOC:
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_int_req(r, b, "ttl_ms", 1, &x) != 0 ||
		    field_value(r, b, "hint", false, &c->value) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		return 0;
	case STORE_OP_KV_FOC_RESULT:
		if (field_int_req(r, b, "ttl_ms", 1, &x) != 0 ||
		    field_value(r, b, "value", true, &c->value) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		/* fall through */
	case STORE_OP_KV_FOC_ERROR:
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_value(r, b, "token", true, &c->arg) != 0) {
			return -1;
		}
		if (c->op == STORE_OP_KV_FOC_ERROR &&
		    field_value(r, b, "message", true, &c->value) != 0) {
			return -1;
		}
		return 0;
	case STORE_OP_KV_HSET:
		return field_key(r, b, "key", &c->key) != 0 ? -1
		                                            : body_hset(r, b);
	case STORE_OP_KV_HGET:
		if (field_key(r, b, "key", &c->key) != 0) {
			return -1;
		}
		return field_value(r, b, "field", true, &c->arg);
	case STORE_OP_KV_SISMEMBER:
	case STORE_OP_KV_ZSCORE:
		if (field_key(r, b, "key", &c->key) != 0) {
			return -1;
		}
		return field_value(r, b, "member", true, &c->arg);
	case STORE_OP_KV_HMGET:
	case STORE_OP_KV_HDEL:
		return field_key(r, b, "key", &c->key) != 0
		           ? -1
		           : field_list(r, b, "fields", true);
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
		return field_key(r, b, "key", &c->key) != 0
		           ? -1
		           : field_list(r, b, "values", true);
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM:
	case STORE_OP_KV_ZREM:
		return field_key(r, b, "key", &c->key) != 0
		           ? -1
		           : field_list(r, b, "members", true);
	case STORE_OP_KV_LPOP:
	case STORE_OP_KV_RPOP:
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_int(r, b, "count", 1, &present, &x) != 0) {
			return -1;
		}
		c->count = present ? (uint64_t)x : 0;
		return 0;
	case STORE_OP_KV_LRANGE:
	case STORE_OP_KV_ZRANGE: {
		bool ws;
		if (field_key(r, b, "key", &c->key) != 0 ||
		    field_int_req(r, b, "start", INT64_MIN, &c->start) != 0 ||
		    field_int_req(r, b, "stop", INT64_MIN, &c->stop) != 0) {
			return -1;
		}
		if (c->op == STORE_OP_KV_ZRANGE) {
			if (field_bool(r, b, "withscores", &ws) != 0) {
				return -1;
			}
			c->flags = ws ? STORE_ZRANGE_WITHSCORES : 0;
		}
		return 0;
	}
	case STORE_OP_KV_ZADD:
		return field_key(r, b, "key", &c->key) != 0 ? -1
		                                            : body_zadd(r, b);
	default:
		return bad_request(r->err, "ERR native unsupported command");
	}
}

/* --- COMMAND_EXEC arguments ------------------------------------------------
 */

struct args {
	struct fsnp_val *v; /* owned */
	uint32_t n;
};

static bool arg_is(const struct fsnp_val *v, const char *word)
{
	return v->tag == FSNP_BIN &&
	       name_eq(word, v->as.bin.ptr, v->as.bin.len);
}

static int wrong_args(struct preq *r, const char *name)
{
	char lower[64];
	size_t i;
	for (i = 0; name[i] != '\0' && i + 1 < sizeof lower; i++) {
		lower[i] = (char)tolower((unsigned char)name[i]);
	}
	lower[i] = '\0';
	return cmd_error(
	    r->err, "ERR wrong number of arguments for '%s' command", lower);
}

static int arg_bytes(struct preq *r, const struct fsnp_val *v,
                     struct store_slice *out)
{
	if (scalar_bytes(r, v, out) != 0) {
		if (r->err->message[0] != '\0') {
			return -1;
		}
		return cmd_error(r->err, "ERR native field args contains an "
		                         "unsupported value");
	}
	return 0;
}

static int arg_key(struct preq *r, const struct fsnp_val *v,
                   struct store_slice *out)
{
	if (v->tag != FSNP_BIN) {
		return arg_bytes(r, v, out);
	}
	out->p = v->as.bin.ptr;
	out->len = v->as.bin.len;
	return 0;
}

/* key, arg, value: the arguments of HINCRBYFLOAT, FOC_RESULT and
 * FOC_ERROR, in that order. */
static int args_key_arg_value(struct preq *r, const struct fsnp_val *v,
                              struct store_cmd *c)
{
	if (arg_key(r, &v[0], &c->key) != 0 ||
	    arg_bytes(r, &v[1], &c->arg) != 0) {
		return -1;
	}
	return arg_bytes(r, &v[2], &c->value);
}

static int arg_int(struct preq *r, const struct fsnp_val *v, int64_t min,
                   int64_t *out)
{
	if (val_int(v, out) != 0 || *out < min) {
		return cmd_error(r->err, min > 0
		                             ? "ERR value is out of range, "
		                               "must be positive"
		                             : "ERR value is not an integer "
		                               "or out of range");
	}
	return 0;
}

static int args_items(struct preq *r, const struct args *a, uint32_t from)
{
	for (uint32_t i = from; i < a->n; i++) {
		struct store_slice s;
		if (arg_bytes(r, &a->v[i], &s) != 0 ||
		    add_item(r, s.p, s.len) != 0) {
			return -1;
		}
	}
	return 0;
}

static int args_set(struct preq *r, const struct args *a)
{
	struct store_cmd *c = &r->c;
	bool expiry = false;
	if (a->n < 2) {
		return wrong_args(r, "SET");
	}
	if (arg_key(r, &a->v[0], &c->key) != 0 ||
	    arg_bytes(r, &a->v[1], &c->value) != 0) {
		return -1;
	}
	for (uint32_t i = 2; i < a->n; i++) {
		const struct fsnp_val *o = &a->v[i];
		int64_t x;
		if (arg_is(o, "NX") && !(c->flags & STORE_SET_XX)) {
			c->flags |= STORE_SET_NX;
		} else if (arg_is(o, "XX") && !(c->flags & STORE_SET_NX)) {
			c->flags |= STORE_SET_XX;
		} else if (arg_is(o, "GET")) {
			c->flags |= STORE_SET_GET;
		} else if (arg_is(o, "KEEPTTL") && !expiry) {
			c->flags |= STORE_SET_KEEPTTL;
			expiry = true;
		} else if ((arg_is(o, "EX") || arg_is(o, "PX") ||
		            arg_is(o, "EXAT") || arg_is(o, "PXAT")) &&
		           !expiry && i + 1 < a->n) {
			bool secs = arg_is(o, "EX") || arg_is(o, "EXAT");
			bool at = arg_is(o, "EXAT") || arg_is(o, "PXAT");
			if (val_int(&a->v[i + 1], &x) != 0 || x <= 0 ||
			    (secs && x > INT64_MAX / 1000)) {
				return cmd_error(r->err,
				                 "ERR invalid expire time in "
				                 "'set' command");
			}
			c->kind = at ? STORE_EXPIRE_AT : STORE_EXPIRE_TTL;
			c->ttl_ms = (uint64_t)(secs ? x * 1000 : x);
			expiry = true;
			i++;
		} else {
			return cmd_error(r->err, "ERR syntax error");
		}
	}
	return 0;
}

/* GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST], with Redis's
 * acceptance (a repeated EX or PX is taken, the last one wins). */
static int args_getex(struct preq *r, const struct args *a)
{
	struct store_cmd *c = &r->c;
	bool secs = false;
	int64_t x;
	if (a->n < 1) {
		return wrong_args(r, "GETEX");
	}
	if (arg_key(r, &a->v[0], &c->key) != 0) {
		return -1;
	}
	c->kind = STORE_GETEX_KEEP;
	for (uint32_t i = 1; i < a->n; i++) {
		const struct fsnp_val *o = &a->v[i];
		bool next = i + 1 < a->n;
		bool ex = arg_is(o, "EX"), px = arg_is(o, "PX");
		bool exat = arg_is(o, "EXAT"), pxat = arg_is(o, "PXAT");
		uint8_t k = c->kind;
		bool other_rel = k == STORE_GETEX_TTL && secs != ex;
		bool other_at = k == STORE_GETEX_AT && secs != exat;
		if ((ex || px) && next && k != STORE_GETEX_PERSIST &&
		    k != STORE_GETEX_AT && !other_rel) {
			c->kind = STORE_GETEX_TTL;
			secs = ex;
			c->delta = i + 1; /* the argument's index for now */
			i++;
		} else if ((exat || pxat) && next && k != STORE_GETEX_PERSIST &&
		           k != STORE_GETEX_TTL && !other_at) {
			c->kind = STORE_GETEX_AT;
			secs = exat;
			c->delta = i + 1;
			i++;
		} else if (arg_is(o, "PERSIST") && (k == STORE_GETEX_KEEP ||
		                                    k == STORE_GETEX_PERSIST)) {
			c->kind = STORE_GETEX_PERSIST;
		} else {
			return cmd_error(r->err, "ERR syntax error");
		}
	}
	if (c->kind != STORE_GETEX_TTL && c->kind != STORE_GETEX_AT) {
		c->delta = 0;
		return 0;
	}
	if (val_int(&a->v[c->delta], &x) != 0) {
		return cmd_error(r->err, "ERR value is not an integer or out "
		                         "of range");
	}
	if (x <= 0 || (secs && x > INT64_MAX / 1000)) {
		return cmd_error(r->err,
		                 "ERR invalid expire time in 'getex' command");
	}
	c->delta = secs ? x * 1000 : x;
	return 0;
}

/* A ZRANGE score bound as Redis reads it: strtod over the whole text, a
 * leading '(' for an exclusive bound, no NaN. */
static bool score_bound(struct preq *r, const struct fsnp_val *v, double *out,
                        bool *excl)
{
	char buf[128];
	struct store_slice s;
	const char *p = buf;
	char *end;
	if (scalar_bytes(r, v, &s) != 0 || s.len >= sizeof buf) {
		return false;
	}
	memcpy(buf, s.p, s.len);
	buf[s.len] = '\0';
	*excl = buf[0] == '(';
	p += *excl;
	*out = strtod(p, &end);
	return end[0] == '\0' && !isnan(*out);
}

/* ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...],
 * with Redis's checks in its order: the options are the words before the
 * first score. Without options it stays KV_ZADD (the encoding older
 * entries have); with them KV_ZADD_OPT. */
static int args_zadd(struct preq *r, const struct args *a, const char *name)
{
	static const struct {
		const char *word;
		uint8_t flag;
	} opts[] = {
	    {"NX", STORE_ZADD_NX}, {"XX", STORE_ZADD_XX},
	    {"GT", STORE_ZADD_GT}, {"LT", STORE_ZADD_LT},
	    {"CH", STORE_ZADD_CH}, {"INCR", STORE_ZADD_INCR},
	};
	struct store_cmd *c = &r->c;
	const struct fsnp_val *v = a->v;
	uint8_t f = 0;
	uint32_t i = 1, pairs;

	if (a->n < 3) {
		return wrong_args(r, name);
	}
	if (arg_key(r, &v[0], &c->key) != 0) {
		return -1;
	}
	for (; i < a->n; i++) {
		size_t k = 0;
		while (k < sizeof opts / sizeof opts[0] &&
		       !arg_is(&v[i], opts[k].word)) {
			k++;
		}
		if (k == sizeof opts / sizeof opts[0]) {
			break;
		}
		f |= opts[k].flag;
	}
	pairs = a->n - i;
	if (pairs == 0 || pairs % 2 != 0) {
		return cmd_error(r->err, "ERR syntax error");
	}
	if ((f & STORE_ZADD_NX) && (f & STORE_ZADD_XX)) {
		return cmd_error(r->err, "ERR XX and NX options at the same "
		                         "time are not compatible");
	}
	if (((f & STORE_ZADD_NX) && (f & (STORE_ZADD_GT | STORE_ZADD_LT))) ||
	    ((f & STORE_ZADD_GT) && (f & STORE_ZADD_LT))) {
		return cmd_error(r->err, "ERR GT, LT, and/or NX options at the "
		                         "same time are not compatible");
	}
	if ((f & STORE_ZADD_INCR) && pairs > 2) {
		return cmd_error(r->err, "ERR INCR option supports a single "
		                         "increment-element pair");
	}
	for (; i + 1 < a->n; i += 2) {
		double d;
		struct store_slice m;
		if (val_score(&v[i], &d) != 0) {
			return cmd_error(r->err,
			                 "ERR value is not a valid float");
		}
		if (arg_bytes(r, &v[i + 1], &m) != 0 || add_score(r, d) != 0 ||
		    add_item(r, m.p, m.len) != 0) {
			return -1;
		}
	}
	if (f != 0) {
		c->op = STORE_OP_KV_ZADD_OPT;
		c->flags = f;
	}
	return 0;
}

/* ZRANGE key start stop [BYSCORE] [REV] [WITHSCORES] and ZRANGEBYSCORE key
 * min max [WITHSCORES], with Redis's checks in its order. LIMIT and BYLEX
 * are refused. */
static int args_zrange(struct preq *r, const struct args *a, const char *name)
{
	struct store_cmd *c = &r->c;
	const struct fsnp_val *v = a->v;
	bool revbys = strcmp(name, "ZREVRANGEBYSCORE") == 0;
	bool bys = strcmp(name, "ZRANGEBYSCORE") == 0 || revbys, rev = revbys;
	bool limit = false;
	int64_t off = 0, cnt = -1;
	uint32_t lo = 1, hi = 2;
	if (a->n < 3) {
		return wrong_args(r, name);
	}
	for (uint32_t i = 3; i < a->n; i++) {
		if (arg_is(&v[i], "WITHSCORES")) {
			c->flags |= STORE_ZRANGE_WITHSCORES;
		} else if (arg_is(&v[i], "LIMIT") && i + 2 < a->n) {
			if (val_int(&v[i + 1], &off) != 0 ||
			    val_int(&v[i + 2], &cnt) != 0) {
				return cmd_error(r->err,
				                 "ERR value is not an integer "
				                 "or out of range");
			}
			limit = true;
			i += 2;
		} else if (!bys && arg_is(&v[i], "BYSCORE")) {
			c->flags |= STORE_ZRANGE_BYSCORE;
		} else if (!bys && arg_is(&v[i], "REV")) {
			rev = true;
		} else if (!bys && arg_is(&v[i], "BYLEX")) {
			return cmd_error(r->err,
			                 "ERR BYLEX is not supported by "
			                 "Lodestone (docs/resp.md)");
		} else {
			return cmd_error(r->err, "ERR syntax error");
		}
	}
	if (limit && cnt != -1 && !bys && !(c->flags & STORE_ZRANGE_BYSCORE)) {
		return cmd_error(r->err, "ERR syntax error, LIMIT is only "
		                         "supported in combination with "
		                         "either BYSCORE or BYLEX");
	}
	if (rev) {
		c->flags |= STORE_ZRANGE_REV;
	}
	if (bys) {
		c->flags |= STORE_ZRANGE_BYSCORE;
	}
	if (limit && (c->flags & STORE_ZRANGE_BYSCORE)) {
		/* Redis: a negative offset answers nothing, a negative
		 * count everything from the offset */
		c->op = STORE_OP_KV_ZRANGE_EX;
		c->offset = off < 0 ? UINT64_MAX : (uint64_t)off;
		c->count = cnt < 0 ? UINT64_MAX : (uint64_t)cnt;
	}
	if (c->flags & STORE_ZRANGE_BYSCORE) {
		double dl, dh;
		bool el, eh;
		uint64_t u;
		if (rev) {
			lo = 2;
			hi = 1;
		}
		if (!score_bound(r, &v[lo], &dl, &el) ||
		    !score_bound(r, &v[hi], &dh, &eh)) {
			return cmd_error(r->err,
			                 "ERR min or max is not a float");
		}
		memcpy(&u, &dl, sizeof u);
		c->start = (int64_t)u;
		memcpy(&u, &dh, sizeof u);
		c->stop = (int64_t)u;
		c->flags |= (el ? STORE_ZRANGE_MIN_EXCL : 0) |
		            (eh ? STORE_ZRANGE_MAX_EXCL : 0);
	} else if (arg_int(r, &v[1], INT64_MIN, &c->start) != 0 ||
	           arg_int(r, &v[2], INT64_MIN, &c->stop) != 0) {
		return -1;
	}
	return arg_key(r, &v[0], &c->key);
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT key time [NX|XX|GT|LT ...] with
 * Redis 7's checks in its order: the options, then the integer, then its
 * conversion to ms; all four are KV_EXPIRE_OPT (KV_EXPIRE_SET stays
 * for PERSIST and for entries already in logs). */
static int args_expire(struct preq *r, const struct args *a, const char *name)
{
	static const char *const lower[] = {"expire", "pexpire", "expireat",
	                                    "pexpireat"};
	struct store_cmd *c = &r->c;
	bool at =
	    strcmp(name, "EXPIREAT") == 0 || strcmp(name, "PEXPIREAT") == 0;
	bool secs = name[0] == 'E';
	const char *lname = lower[(at ? 2 : 0) + (secs ? 0 : 1)];
	uint8_t f = 0;
	int64_t x;

	if (a->n < 2) {
		return wrong_args(r, name);
	}
	for (uint32_t i = 2; i < a->n; i++) {
		const struct fsnp_val *o = &a->v[i];
		if (arg_is(o, "NX")) {
			f |= STORE_EXPIRE_F_NX;
		} else if (arg_is(o, "XX")) {
			f |= STORE_EXPIRE_F_XX;
		} else if (arg_is(o, "GT")) {
			f |= STORE_EXPIRE_F_GT;
		} else if (arg_is(o, "LT")) {
			f |= STORE_EXPIRE_F_LT;
		} else {
			struct store_slice s;
			if (arg_bytes(r, o, &s) != 0) {
				return -1;
			}
			return cmd_error(r->err, "ERR Unsupported option %.*s",
			                 (int)(s.len < 64 ? s.len : 64),
			                 (const char *)s.p);
		}
	}
	if ((f & STORE_EXPIRE_F_NX) &&
	    (f & (STORE_EXPIRE_F_XX | STORE_EXPIRE_F_GT | STORE_EXPIRE_F_LT))) {
		return cmd_error(r->err, "ERR NX and XX, GT or LT options at "
		                         "the same time are not compatible");
	}
	if ((f & STORE_EXPIRE_F_GT) && (f & STORE_EXPIRE_F_LT)) {
		return cmd_error(r->err, "ERR GT and LT options at the same "
		                         "time are not compatible");
	}
	if (val_int(&a->v[1], &x) != 0) {
		return cmd_error(r->err, "ERR value is not an integer or out "
		                         "of range");
	}
	if (secs && (x > INT64_MAX / 1000 || x < INT64_MIN / 1000)) {
		return cmd_error(
		    r->err, "ERR invalid expire time in '%s' command", lname);
	}
	c->delta = secs ? x * 1000 : x;
	c->op = STORE_OP_KV_EXPIRE_OPT;
	c->kind = at ? STORE_EXPIRE_AT : STORE_EXPIRE_TTL;
	c->flags = f;
	c->arg.p = (const uint8_t *)lname;
	c->arg.len = strlen(lname);
	return arg_key(r, &a->v[0], &c->key);
}

/* SCAN cursor [MATCH pattern] [COUNT n] [TYPE type] and KEYS pattern, as
 * Redis 7.0 parses them. SCAN's cursor names the group (c->shard, for
 * planning) and the seek point (arg); store/kvscan.h. With the node's
 * resume keys, a reference cursor whose key is still kept resumes at
 * that key (STORE_SCAN_EXACT), and every page asks for the key the next
 * one resumes at (STORE_SCAN_RESUME). */
static int args_scan(struct preq *r, const struct args *a, const char *name)
{
	/* arg_is's words are upper case */
	static const char *const types[] = {"STRING", "HASH", "LIST", "SET",
	                                    "ZSET"};
	struct store_cmd *c = &r->c;
	struct store_slice cur;
	struct kvscan_cursor kc;
	const uint8_t *start;
	uint8_t *sp;
	size_t slen;

	c->shards = r->ctx->data_groups;
	if (strcmp(name, "KEYS") == 0) {
		if (a->n != 1) {
			return wrong_args(r, name);
		}
		c->flags = STORE_SCAN_ALL | STORE_SCAN_MATCH;
		return arg_bytes(r, &a->v[0], &c->value);
	}
	if (a->n < 1) {
		return wrong_args(r, name);
	}
	if (arg_bytes(r, &a->v[0], &cur) != 0) {
		return -1;
	}
	if (kvscan_cursor_decode(cur.p, cur.len, r->ctx->data_groups, &kc) !=
	    0) {
		return cmd_error(r->err, "ERR invalid cursor");
	}
	c->count = 10;
	/* option, value pairs */
	for (uint32_t i = 1; i < a->n; i += 2) {
		const struct fsnp_val *o = &a->v[i];
		bool more = i + 1 < a->n;
		if (arg_is(o, "COUNT") && more) {
			int64_t x;
			if (val_int(&a->v[i + 1], &x) != 0) {
				return cmd_error(r->err,
				                 "ERR value is not an integer "
				                 "or out of range");
			}
			if (x < 1) {
				return cmd_error(r->err, "ERR syntax error");
			}
			c->count = (uint64_t)x;
		} else if (arg_is(o, "MATCH") && more) {
			if (arg_bytes(r, &a->v[i + 1], &c->value) != 0) {
				return -1;
			}
			c->flags |= STORE_SCAN_MATCH;
		} else if (arg_is(o, "TYPE") && more) {
			/* an unknown type matches no key (Redis 7.0) */
			c->kind = 7;
			for (uint8_t t = 0; t < 5; t++) {
				if (arg_is(&a->v[i + 1], types[t])) {
					c->kind = (uint8_t)(t + 1);
				}
			}
		} else {
			return cmd_error(r->err, "ERR syntax error");
		}
	}
	start = kc.seek;
	slen = kc.seek_len;
	if (r->ctx->scan_cursors != NULL) {
		const uint8_t *kept =
		    scan_cursors_lookup(r->ctx->scan_cursors, &kc, &slen);
		c->flags |= STORE_SCAN_RESUME;
		if (kept != NULL) {
			c->flags |= STORE_SCAN_EXACT;
			start = kept;
		} else {
			slen = kc.seek_len;
		}
	}
	sp = scratch(r, slen > 0 ? slen : 1);
	if (sp == NULL) {
		return nomem(r->err);
	}
	memcpy(sp, start, slen);
	c->arg.p = sp;
	c->arg.len = slen;
	c->shard = kc.group;
	return 0;
}

/* Positional arguments after the name, per command. */
static int parse_args(struct preq *r, const struct args *a, const char *name)
{
	struct store_cmd *c = &r->c;
	const struct fsnp_val *v = a->v;
	uint32_t n = a->n;
	int64_t x;

	switch (c->op) {
	case STORE_OP_KV_GET:
	case STORE_OP_KV_HGETALL:
	case STORE_OP_KV_SMEMBERS:
	case STORE_OP_KV_STRLEN:
	case STORE_OP_KV_GETDEL:
		if (n != 1) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_INCRBY: {
		bool by =
		    strcmp(name, "INCRBY") == 0 || strcmp(name, "DECRBY") == 0;
		if (n != (by ? 2u : 1u)) {
			return wrong_args(r, name);
		}
		c->delta = 1;
		if (by && (val_int(&v[1], &c->delta) != 0 ||
		           (name[0] == 'D' && c->delta == INT64_MIN))) {
			return cmd_error(r->err, "ERR value is not an integer "
			                         "or out of range");
		}
		if (name[0] == 'D') {
			c->delta = -c->delta;
		}
		return arg_key(r, &v[0], &c->key);
	}
	case STORE_OP_KV_EXISTS:
		if (n == 0) {
			return wrong_args(r, name);
		}
		return args_items(r, a, 0);
	case STORE_OP_KV_KEYINFO:
		if (n != 1) {
			return wrong_args(r, name);
		}
		c->kind = strcmp(name, "TYPE") == 0  ? STORE_KEYINFO_TYPE
		          : strcmp(name, "TTL") == 0 ? STORE_KEYINFO_TTL
		                                     : STORE_KEYINFO_PTTL;
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_LEN:
		if (n != 1) {
			return wrong_args(r, name);
		}
		/* the kv record types of store/kv.h */
		c->kind = name[0] == 'H'   ? 2
		          : name[0] == 'L' ? 3
		          : name[0] == 'S' ? 4
		                           : 5;
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_EXPIRE_SET:
		if (strcmp(name, "PERSIST") == 0) {
			if (n != 1) {
				return wrong_args(r, name);
			}
			c->kind = STORE_EXPIRE_NONE;
			return arg_key(r, &v[0], &c->key);
		}
		return args_expire(r, a, name);
	case STORE_OP_KV_EXPIRE_OPT:
		return args_expire(r, a, name);
	case STORE_OP_KV_RENAME:
		if (n != 2) {
			return wrong_args(r, name);
		}
		c->kind = strcmp(name, "RENAMENX") == 0 ? 1 : 0;
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_key(r, &v[1], &c->arg);
	case STORE_OP_KV_ZINCRBY: {
		double d;
		uint8_t *p;
		uint64_t u;
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (val_score(&v[1], &d) != 0) {
			return cmd_error(r->err, "ERR value is not a valid "
			                         "float");
		}
		p = scratch(r, 8);
		if (p == NULL) {
			return nomem(r->err);
		}
		memcpy(&u, &d, sizeof u);
		for (int i = 0; i < 8; i++) {
			p[i] = (uint8_t)(u >> (56 - 8 * i));
		}
		c->value.p = p;
		c->value.len = 8;
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[2], &c->arg);
	}
	case STORE_OP_KV_ZRANGE_EX: { /* ZCOUNT key min max */
		double dl, dh;
		bool el, eh;
		uint64_t u;
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (!score_bound(r, &v[1], &dl, &el) ||
		    !score_bound(r, &v[2], &dh, &eh)) {
			return cmd_error(r->err,
			                 "ERR min or max is not a float");
		}
		memcpy(&u, &dl, sizeof u);
		c->start = (int64_t)u;
		memcpy(&u, &dh, sizeof u);
		c->stop = (int64_t)u;
		c->flags = STORE_ZRANGE_BYSCORE | STORE_ZRANGE_COUNT |
		           (el ? STORE_ZRANGE_MIN_EXCL : 0) |
		           (eh ? STORE_ZRANGE_MAX_EXCL : 0);
		c->count = UINT64_MAX;
		return arg_key(r, &v[0], &c->key);
	}
	case STORE_OP_KV_HINCRBY:
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (val_int(&v[2], &c->delta) != 0) {
			return cmd_error(r->err, "ERR value is not an integer "
			                         "or out of range");
		}
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_HINCRBYFLOAT:
		if (n != 3) {
			return wrong_args(r, name);
		}
		return args_key_arg_value(r, v, c);
	case STORE_OP_KV_HEXISTS:
		if (n != 2) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_HKEYS:
		if (n != 1) {
			return wrong_args(r, name);
		}
		c->kind = strcmp(name, "HVALS") == 0 ? 1 : 0;
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_KEYCOUNT:
		if (n != 0) {
			return wrong_args(r, name);
		}
		return 0;
	case STORE_OP_KV_SCAN:
		return args_scan(r, a, name);
	case STORE_OP_KV_GETEX:
		return args_getex(r, a);
	case STORE_OP_KV_SETRANGE:
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[1], INT64_MIN, &c->start) != 0 ||
		    arg_key(r, &v[0], &c->key) != 0) {
			return -1;
		}
		return arg_bytes(r, &v[2], &c->value);
	case STORE_OP_KV_APPEND:
	case STORE_OP_KV_INCRBYFLOAT:
		if (n != 2) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->value);
	case STORE_OP_KV_SET:
		return args_set(r, a);
	case STORE_OP_KV_DEL:
	case STORE_OP_KV_MGET:
		if (n == 0) {
			return wrong_args(r, name);
		}
		return args_items(r, a, 0);
	case STORE_OP_KV_MSET:
	case STORE_OP_KV_MSETNX:
		if (n == 0 || n % 2 != 0) {
			return wrong_args(r, name);
		}
		return args_items(r, a, 0);
	case STORE_OP_KV_CAS:
		if (n != 3 && n != 5) {
			return wrong_args(r, name);
		}
		if (arg_key(r, &v[0], &c->key) != 0 ||
		    arg_bytes(r, &v[1], &c->arg) != 0 ||
		    arg_bytes(r, &v[2], &c->value) != 0) {
			return -1;
		}
		if (n == 5) {
			bool secs = arg_is(&v[3], "EX");
			if (!secs && !arg_is(&v[3], "PX")) {
				return cmd_error(r->err, "ERR syntax error");
			}
			if (arg_int(r, &v[4], 1, &x) != 0) {
				return -1;
			}
			if (secs && x > INT64_MAX / 1000) {
				return cmd_error(r->err,
				                 "ERR invalid expire time in "
				                 "'cas' command");
			}
			c->kind = STORE_EXPIRE_TTL;
			c->ttl_ms = (uint64_t)(secs ? x * 1000 : x);
		}
		return 0;
	case STORE_OP_KV_LOCK:
	case STORE_OP_KV_EXTEND:
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[2], 1, &x) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_UNLOCK:
		if (n != 2) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_RATELIMIT:
		if (n != 3 && n != 4) {
			return wrong_args(r, name);
		}
		if (arg_key(r, &v[0], &c->key) != 0 ||
		    arg_int(r, &v[1], 1, &x) != 0) {
			return -1;
		}
		c->window_ms = (uint64_t)x;
		if (arg_int(r, &v[2], 1, &x) != 0) {
			return -1;
		}
		c->max = (uint64_t)x;
		c->count = 1;
		if (n == 4) {
			if (arg_int(r, &v[3], 1, &x) != 0) {
				return -1;
			}
			c->count = (uint64_t)x;
		}
		return 0;
	case STORE_OP_KV_FOC:
		if (n != 2 && n != 3) {
			return wrong_args(r, name);
		}
		if (arg_key(r, &v[0], &c->key) != 0 ||
		    arg_int(r, &v[1], 1, &x) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		return n == 3 ? arg_bytes(r, &v[2], &c->value) : 0;
	case STORE_OP_KV_FOC_RESULT:
		if (n != 4) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[3], 1, &x) != 0) {
			return -1;
		}
		c->ttl_ms = (uint64_t)x;
		return args_key_arg_value(r, v, c);
	case STORE_OP_KV_FOC_ERROR:
		if (n != 3) {
			return wrong_args(r, name);
		}
		return args_key_arg_value(r, v, c);
	case STORE_OP_KV_HSET:
		if (n < 3 || n % 2 != 1) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0 ? -1
		                                       : args_items(r, a, 1);
	case STORE_OP_KV_HGET:
	case STORE_OP_KV_SISMEMBER:
	case STORE_OP_KV_ZSCORE:
		if (n != 2) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_HMGET:
	case STORE_OP_KV_HDEL:
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM:
	case STORE_OP_KV_ZREM:
		if (n < 2) {
			return wrong_args(r, name);
		}
		return arg_key(r, &v[0], &c->key) != 0 ? -1
		                                       : args_items(r, a, 1);
	case STORE_OP_KV_LPOP:
	case STORE_OP_KV_RPOP:
		if (n != 1 && n != 2) {
			return wrong_args(r, name);
		}
		if (n == 2) {
			/* Redis 7.0 answers a non-integer as a negative */
			if (val_int(&v[1], &x) != 0 || x < 0) {
				return cmd_error(
				    r->err, "ERR value is out of range, must "
				            "be positive");
			}
			c->count = (uint64_t)x;
			if (x == 0) {
				/* a count KV_LPOP/KV_RPOP cannot carry */
				c->kind = c->op == STORE_OP_KV_RPOP ? 1 : 0;
				c->op = STORE_OP_KV_POP;
			}
		}
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_ZRANK:
		if (n != 2) {
			return wrong_args(r, name);
		}
		c->kind = strcmp(name, "ZREVRANK") == 0 ? 1 : 0;
		return arg_key(r, &v[0], &c->key) != 0
		           ? -1
		           : arg_bytes(r, &v[1], &c->arg);
	case STORE_OP_KV_GETRANGE:
	case STORE_OP_KV_LTRIM:
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[1], INT64_MIN, &c->start) != 0 ||
		    arg_int(r, &v[2], INT64_MIN, &c->stop) != 0) {
			return -1;
		}
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_LINDEX:
		if (n != 2) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[1], INT64_MIN, &c->start) != 0) {
			return -1;
		}
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_ZRANGE:
		return args_zrange(r, a, name);
	case STORE_OP_KV_LRANGE:
		if (n != 3) {
			return wrong_args(r, name);
		}
		if (arg_int(r, &v[1], INT64_MIN, &c->start) != 0 ||
		    arg_int(r, &v[2], INT64_MIN, &c->stop) != 0) {
			return -1;
		}
		return arg_key(r, &v[0], &c->key);
	case STORE_OP_KV_ZADD:
		return args_zadd(r, a, name);
	default:
		return cmd_error(r->err, "ERR unknown command '%s'", name);
	}
}

/* --- Planning ------------------------------------------------------------- */

static uint32_t group_of(const struct fsnp_cmd_ctx *ctx, const uint8_t *key,
                         size_t len, unsigned *slot)
{
	*slot = fsnp_slot_of(key, len);
	return 1 + fsnp_slot_shard(*slot, ctx->data_groups);
}

/* Zeroes a plan but for its command storage (one_cmd), whose bytes mean
 * nothing until a command is encoded there. */
static void plan_reset(struct fsnp_plan *p)
{
	memset(p, 0, offsetof(struct fsnp_plan, one_cmd));
}

void fsnp_plan_free(struct fsnp_plan *p)
{
	for (uint32_t i = 0; i < p->n_parts; i++) {
		if (p->parts[i].cmd != p->one_cmd) {
			free(p->parts[i].cmd);
		}
		free(p->parts[i].pos);
	}
	if (p->parts != &p->one) {
		free(p->parts);
	}
	plan_reset(p);
}

/* Encodes `c` into `inline_buf` (cap bytes; NULL: none) when it fits,
 * else into a new allocation. */
static int encode_part(struct fsnp_part *part, const struct store_cmd *c,
                       uint8_t *inline_buf, size_t cap,
                       struct fsnp_cmd_err *err)
{
	const char *emsg = NULL;
	size_t n;
	if (store_cmd_size(c, &n, &emsg) != 0) {
		return bad_request(err, "ERR native cannot encode command: %s",
		                   emsg != NULL ? emsg : "invalid");
	}
	if (inline_buf != NULL && n <= cap) {
		part->cmd = inline_buf;
	} else {
		part->cmd = malloc(n > 0 ? n : 1);
		if (part->cmd == NULL) {
			return nomem(err);
		}
	}
	store_cmd_encode_to(c, part->cmd, n);
	part->len = n;
	part->read = store_op_is_read(c->op);
	return 0;
}

struct keypos {
	uint32_t group;
	uint32_t pos;
};

static int keypos_cmp(const void *a, const void *b)
{
	const struct keypos *x = a, *y = b;
	if (x->group != y->group) {
		return x->group < y->group ? -1 : 1;
	}
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* DEL and MGET: one part per group, each with its keys in request order. */
static int plan_fanout(const struct store_cmd *c,
                       const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                       struct fsnp_cmd_err *err)
{
	uint32_t n = c->items.n;
	struct keypos *kp = NULL;
	struct store_slice *sub = NULL;
	int rv = -1;

	out->n_items = n;
	if (n == 0) {
		return 0;
	}
	kp = malloc(n * sizeof *kp);
	sub = malloc(n * sizeof *sub);
	out->parts = calloc(n, sizeof *out->parts);
	if (kp == NULL || sub == NULL || out->parts == NULL) {
		nomem(err);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		unsigned slot;
		kp[i].group =
		    group_of(ctx, c->items.v[i].p, c->items.v[i].len, &slot);
		kp[i].pos = i;
		if (i == 0) {
			out->slot = slot;
		}
	}
	qsort(kp, n, sizeof *kp, keypos_cmp);
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i;
		struct fsnp_part *part = &out->parts[out->n_parts];
		while (j < n && kp[j].group == kp[i].group) {
			j++;
		}
		part->group = kp[i].group;
		part->n = j - i;
		part->pos = malloc(part->n * sizeof *part->pos);
		out->n_parts++;
		if (part->pos == NULL) {
			nomem(err);
			goto out;
		}
		for (uint32_t k = i; k < j; k++) {
			part->pos[k - i] = kp[k].pos;
			sub[k - i] = c->items.v[kp[k].pos];
		}
		struct store_cmd pc = *c;
		pc.items.n = part->n;
		pc.items.v = sub;
		if (encode_part(part, &pc, NULL, 0, err) != 0) {
			goto out;
		}
		i = j;
	}
	rv = 0;
out:
	free(kp);
	free(sub);
	return rv;
}

/* DBSIZE and KEYS: the same read on every data group. */
static int plan_every_group(const struct store_cmd *c,
                            const struct fsnp_cmd_ctx *ctx,
                            struct fsnp_plan *out, struct fsnp_cmd_err *err)
{
	uint32_t n = ctx->data_groups;
	out->parts = calloc(n > 0 ? n : 1, sizeof *out->parts);
	if (out->parts == NULL) {
		return nomem(err);
	}
	for (uint32_t g = 1; g <= n; g++) {
		struct fsnp_part *part = &out->parts[out->n_parts];
		part->group = g;
		out->n_parts++;
		if (encode_part(part, c, NULL, 0, err) != 0) {
			return -1;
		}
	}
	return 0;
}

int fsnp_cmd_plan_store(uint16_t opcode, const struct store_cmd *c,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err)
{
	plan_reset(out);
	out->opcode = opcode;
	out->op = c->op;
	if (c->op == STORE_OP_KV_KEYCOUNT ||
	    (c->op == STORE_OP_KV_SCAN && (c->flags & STORE_SCAN_ALL))) {
		out->merge = c->op == STORE_OP_KV_KEYCOUNT ? FSNP_MERGE_SUM
		                                           : FSNP_MERGE_CONCAT;
		if (plan_every_group(c, ctx, out, err) != 0) {
			fsnp_plan_free(out);
			return -1;
		}
		return 0;
	}
	if (c->op == STORE_OP_KV_DEL || c->op == STORE_OP_KV_MGET ||
	    c->op == STORE_OP_KV_EXISTS) {
		out->merge = c->op == STORE_OP_KV_MGET ? FSNP_MERGE_ORDER
		                                       : FSNP_MERGE_SUM;
		if (plan_fanout(c, ctx, out, err) != 0) {
			fsnp_plan_free(out);
			return -1;
		}
		return 0;
	}
	out->merge = FSNP_MERGE_ONE;
	uint32_t group;
	if (c->op == STORE_OP_KV_MSET || c->op == STORE_OP_KV_MSETNX) {
		unsigned slot = 0;
		if (c->items.n == 0) {
			return bad_request(err, "ERR native pairs must not be "
			                        "empty");
		}
		group = group_of(ctx, c->items.v[0].p, c->items.v[0].len,
		                 &out->slot);
		for (uint32_t i = 2; i < c->items.n; i += 2) {
			group_of(ctx, c->items.v[i].p, c->items.v[i].len,
			         &slot);
			if (slot != out->slot) {
				return cmd_error(err,
				                 "CROSSSLOT Keys in request "
				                 "don't hash to the same "
				                 "slot");
			}
		}
	} else if (c->op == STORE_OP_KV_SCAN) {
		/* the group the cursor names (args_scan) */
		if (c->shard < 1 || c->shard > ctx->data_groups) {
			return cmd_error(err, "ERR invalid cursor");
		}
		group = c->shard;
	} else {
		group = group_of(ctx, c->key.p, c->key.len, &out->slot);
		out->key = c->key.p;
		out->key_len = c->key.len;
		if (c->op == STORE_OP_KV_RENAME) {
			unsigned slot;
			group_of(ctx, c->arg.p, c->arg.len, &slot);
			if (slot != out->slot) {
				return cmd_error(err,
				                 "CROSSSLOT Keys in request "
				                 "don't hash to the same "
				                 "slot");
			}
		}
	}
	memset(&out->one, 0, sizeof out->one);
	out->parts = &out->one;
	out->n_parts = 1;
	out->parts[0].group = group;
	if (encode_part(&out->parts[0], c, out->one_cmd, sizeof out->one_cmd,
	                err) != 0) {
		fsnp_plan_free(out);
		return -1;
	}
	return 0;
}

int fsnp_cmd_parse_get_fast(const uint8_t *body, size_t len,
                            const struct fsnp_cmd_ctx *ctx,
                            struct fsnp_plan *out, struct fsnp_cmd_err *err)
{
	/* map tag, count 1, key length 3, "key", binary tag, its length */
	static const uint8_t head[] = {FSNP_MAP, 0, 0,   0,   1,   0,       0,
	                               0,        3, 'k', 'e', 'y', FSNP_BIN};
	const size_t hlen = sizeof head + 4;
	struct store_cmd c;

	if (len < hlen || memcmp(body, head, sizeof head) != 0 ||
	    wire_load_u32(body + sizeof head) != len - hlen) {
		return 1;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_GET;
	c.key.p = body + hlen;
	c.key.len = len - hlen;
	err->message[0] = '\0';
	return fsnp_cmd_plan_store(FSNP_OP_GET, &c, ctx, out, err);
}

int fsnp_cmd_parse_set_fast(const uint8_t *body, size_t len,
                            const struct fsnp_cmd_ctx *ctx,
                            struct fsnp_plan *out, struct fsnp_cmd_err *err)
{
	/* map tag, count 2, key length 3, "key", binary tag (then its
	 * length and bytes), key length 5, "value", binary tag (then its
	 * length and bytes) */
	static const uint8_t head[] = {FSNP_MAP, 0, 0,   0,   2,   0,       0,
	                               0,        3, 'k', 'e', 'y', FSNP_BIN};
	static const uint8_t mid[] = {0,   0,   0,   5,   'v',
	                              'a', 'l', 'u', 'e', FSNP_BIN};
	size_t off = sizeof head, klen, vlen;
	struct store_cmd c;

	if (len < sizeof head + 4 + sizeof mid + 4 ||
	    memcmp(body, head, sizeof head) != 0) {
		return 1;
	}
	klen = wire_load_u32(body + off);
	off += 4;
	if (klen > len - off || len - off - klen < sizeof mid + 4 ||
	    memcmp(body + off + klen, mid, sizeof mid) != 0) {
		return 1;
	}
	vlen = wire_load_u32(body + off + klen + sizeof mid);
	if (vlen != len - off - klen - sizeof mid - 4) {
		return 1;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_SET;
	c.key.p = body + off;
	c.key.len = klen;
	c.value.p = body + off + klen + sizeof mid + 4;
	c.value.len = vlen;
	err->message[0] = '\0';
	return fsnp_cmd_plan_store(FSNP_OP_SET, &c, ctx, out, err);
}

static int finish(struct preq *r, struct fsnp_plan *out)
{
	r->c.items.n = r->n;
	r->c.items.v = r->items;
	if (r->c.op == STORE_OP_KV_FOC) {
		const char *t = r->ctx->foc_token ? r->ctx->foc_token : "";
		r->c.arg.p = (const uint8_t *)t;
		r->c.arg.len = strlen(t);
	}
	return fsnp_cmd_plan_store(r->opcode, &r->c, r->ctx, out, r->err);
}

int fsnp_cmd_parse_body(uint16_t opcode, const struct fsnp_val *body,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err)
{
	static const uint8_t empty_map[] = {FSNP_MAP, 0, 0, 0, 0};
	const struct fsnp_cmd_info *info = fsnp_cmd_by_opcode(opcode);
	struct fsnp_val emap;
	struct preq r;
	int rv;

	plan_reset(out);
	err->message[0] = '\0';
	if (info == NULL || info->kind != FSNP_CMD_KV) {
		return bad_request(err, "ERR native unknown opcode 0x%04x",
		                   opcode);
	}
	if (body->tag != FSNP_MAP) {
		/* A well-formed body that is not a map counts as {}. */
		fsnp_value_decode(empty_map, sizeof empty_map, NULL, &emap,
		                  NULL);
		body = &emap;
	}
	preq_init(&r, opcode, info->store_op, ctx, err);
	rv = parse_body(&r, body);
	if (rv == 0) {
		rv = finish(&r, out);
	}
	preq_fini(&r);
	return rv;
}

int fsnp_cmd_parse_args(const struct fsnp_cmd_info *info,
                        const struct fsnp_val *args,
                        const struct fsnp_cmd_ctx *ctx, struct fsnp_plan *out,
                        struct fsnp_cmd_err *err)
{
	struct args a = {NULL, 0};
	struct fsnp_iter it;
	struct preq r;
	int rv;

	plan_reset(out);
	err->message[0] = '\0';
	if (info == NULL || info->kind != FSNP_CMD_KV) {
		return cmd_error(err, "ERR unknown command");
	}
	if (args->tag == FSNP_ARRAY && args->as.count > 0) {
		if (args->as.count > ctx->max_items) {
			return bad_request(err,
			                   "ERR native command has more than "
			                   "%" PRIu32 " items",
			                   ctx->max_items);
		}
		a.v = malloc(args->as.count * sizeof *a.v);
		if (a.v == NULL) {
			return nomem(err);
		}
		fsnp_iter_init(&it, args);
		while (a.n < args->as.count &&
		       fsnp_iter_next(&it, NULL, &a.v[a.n])) {
			a.n++;
		}
	}
	preq_init(&r, info->opcode, info->store_op, ctx, err);
	rv = parse_args(&r, &a, info->name);
	if (rv == 0) {
		rv = finish(&r, out);
	}
	/* COMMAND_EXEC replies answer for COMMAND_EXEC. */
	out->opcode = FSNP_OP_COMMAND_EXEC;
	if (rv == 0) {
		out->name = info->name;
	}
	preq_fini(&r);
	free(a.v);
	return rv;
}

int fsnp_cmd_parse_args_fast(const struct fsnp_cmd_info *info,
                             const struct fsnp_bytes *args, uint32_t n,
                             const struct fsnp_cmd_ctx *ctx,
                             struct fsnp_plan *out, struct fsnp_cmd_err *err)
{
	struct store_cmd c;
	int rv;

	if (info == NULL || info->kind != FSNP_CMD_KV || n > ctx->max_items ||
	    !((info->store_op == STORE_OP_KV_SET && n == 2) ||
	      (info->store_op == STORE_OP_KV_GET && n == 1))) {
		return 1;
	}
	/* As args_set and parse_args's GET with binary arguments. */
	memset(&c, 0, sizeof c);
	c.op = info->store_op;
	c.key.p = args[0].ptr;
	c.key.len = args[0].len;
	if (n == 2) {
		c.value.p = args[1].ptr;
		c.value.len = args[1].len;
	}
	err->message[0] = '\0';
	rv = fsnp_cmd_plan_store(info->opcode, &c, ctx, out, err);
	/* COMMAND_EXEC replies answer for COMMAND_EXEC. */
	out->opcode = FSNP_OP_COMMAND_EXEC;
	if (rv == 0) {
		out->name = info->name;
	}
	return rv;
}

int fsnp_cmd_parse_compact(const struct fsnp_compact_req *req,
                           const struct fsnp_cmd_ctx *ctx,
                           struct fsnp_plan *out, struct fsnp_cmd_err *err)
{
	struct fsnp_compact_iter it;
	struct fsnp_bytes k, v;
	struct preq r;
	int rv = 0;
	uint16_t opcode;
	uint8_t op;

	plan_reset(out);
	err->message[0] = '\0';
	if (req->kind == FSNP_COMPACT_MSET) {
		opcode = FSNP_OP_MSET;
		op = STORE_OP_KV_MSET;
	} else if (req->kind == FSNP_COMPACT_MGET) {
		opcode = FSNP_OP_MGET;
		op = STORE_OP_KV_MGET;
	} else {
		return bad_request(err, "ERR native unsupported compact body");
	}
	preq_init(&r, opcode, op, ctx, err);
	fsnp_compact_iter_init(&it, req);
	while (rv == 0 &&
	       fsnp_compact_iter_next(&it, &k, req->pairs ? &v : NULL)) {
		rv = add_item(&r, k.ptr, k.len);
		if (rv == 0 && req->pairs) {
			rv = add_item(&r, v.ptr, v.len);
		}
	}
	if (rv == 0) {
		rv = finish(&r, out);
	}
	preq_fini(&r);
	return rv;
}

int fsnp_cmd_deadline(const struct fsnp_val *body, uint64_t *deadline_ms,
                      struct fsnp_cmd_err *err)
{
	struct fsnp_val v;
	*deadline_ms = 0;
	if (body->tag != FSNP_MAP ||
	    fsnp_map_get(body, "deadline_ms", &v) != 0) {
		return 0;
	}
	if (fsnp_val_u64(&v, deadline_ms) != 0) {
		fsnp_cmd_err_set(err, FSNP_STATUS_BAD_REQUEST,
		                 "invalid_deadline",
		                 "ERR native request deadline must be a "
		                 "non-negative integer");
		return -1;
	}
	return 0;
}
