/* Felix v1 JSON messages; see felix_msg.h.
 *
 * Every message type is described by a const table of its fields in wire
 * order (name, kind, presence, offset in struct felix_msg). One decoder,
 * one encoder, one free and one equality walk those tables, so the four
 * cannot disagree about a field. */
#include "wire/felix_msg.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/felix_base64.h"
#include "wire/felix_frame.h"
#include "wire/felix_utf8.h"

enum kind {
	K_STR,     /* char * */
	K_BYTES,   /* struct felix_bytes, base64 on the wire */
	K_U16,     /* uint16_t */
	K_U32,     /* uint32_t */
	K_U64,     /* uint64_t */
	K_I64,     /* int64_t */
	K_BOOL,    /* bool */
	K_ACK,     /* enum felix_ack_mode */
	K_CURSOR,  /* enum felix_cursor_reason */
	K_START,   /* struct felix_start */
	K_REFUSAL, /* struct felix_refusal */
	K_BYTES_LIST,
	K_U64_LIST,
	K_RECORDS, /* struct felix_group_record_list */
	K_BROKERS, /* struct felix_broker_list */
};

enum presence {
	P_REQ,  /* must be present and not null */
	P_OPT,  /* absent or null reads as absent; absent is not written */
	P_NULL, /* like P_OPT, but absent is written as null */
};

struct field {
	const char *name;
	enum kind kind;
	enum presence pres;
	size_t off;     /* the value, from the start of struct felix_msg */
	size_t has_off; /* its has_* flag; 0 for required fields and
	                   optional strings (NULL means absent) */
};

struct msg_desc {
	const char *name;
	const struct field *fields;
	size_t nfields;
};

#define OFF(t, m) offsetof(struct felix_msg, u.t.m)
/* clang-format off */
#define REQ(t, m, k) {#m, k, P_REQ, OFF(t, m), 0}
#define OPT(t, m, k) {#m, k, P_OPT, OFF(t, m), OFF(t, has_##m)}
#define OPTSTR(t, m) {#m, K_STR, P_OPT, OFF(t, m), 0}
#define NULLABLE(t, m, k) {#m, k, P_NULL, OFF(t, m), OFF(t, has_##m)}
/* clang-format on */
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define AT(m, off, T) ((T *)(void *)((char *)(m) + (off)))
#define CAT(m, off, T) ((const T *)(const void *)((const char *)(m) + (off)))

static const struct field auth_fields[] = {
    REQ(auth, tenant_id, K_STR),
    REQ(auth, token, K_STR),
    OPT(auth, client_flags, K_U16),
    OPT(auth, client_features, K_U32),
};
static const struct field auth_ok_fields[] = {
    REQ(auth_ok, server_flags, K_U16),
    OPT(auth_ok, server_features, K_U32),
};
static const struct field error_fields[] = {
    REQ(error, message, K_STR),
};
static const struct field publish_fields[] = {
    REQ(publish, tenant_id, K_STR), REQ(publish, namespace, K_STR),
    REQ(publish, stream, K_STR),    REQ(publish, payload, K_BYTES),
    OPT(publish, key, K_BYTES),     OPT(publish, request_id, K_U64),
    OPT(publish, ack, K_ACK),
};
static const struct field publish_batch_fields[] = {
    REQ(publish_batch, tenant_id, K_STR),
    REQ(publish_batch, namespace, K_STR),
    REQ(publish_batch, stream, K_STR),
    REQ(publish_batch, payloads, K_BYTES_LIST),
    OPT(publish_batch, key, K_BYTES),
    OPT(publish_batch, request_id, K_U64),
    OPT(publish_batch, ack, K_ACK),
};
static const struct field publish_ok_fields[] = {
    REQ(publish_ok, request_id, K_U64),
};
static const struct field publish_error_fields[] = {
    REQ(publish_error, request_id, K_U64),
    REQ(publish_error, message, K_STR),
};
static const struct field producer_init_fields[] = {
    REQ(producer_init, request_id, K_U64),
};
static const struct field producer_init_ok_fields[] = {
    REQ(producer_init_ok, request_id, K_U64),
    REQ(producer_init_ok, producer_id, K_U64),
};
static const struct field publish_idempotent_fields[] = {
    REQ(publish_idempotent, tenant_id, K_STR),
    REQ(publish_idempotent, namespace, K_STR),
    REQ(publish_idempotent, stream, K_STR),
    REQ(publish_idempotent, payloads, K_BYTES_LIST),
    OPT(publish_idempotent, key, K_BYTES),
    REQ(publish_idempotent, request_id, K_U64),
    REQ(publish_idempotent, producer_id, K_U64),
    REQ(publish_idempotent, sequence, K_U64),
};
static const struct field publish_refused_fields[] = {
    REQ(publish_refused, request_id, K_U64),
    REQ(publish_refused, reason, K_REFUSAL),
    REQ(publish_refused, message, K_STR),
};
static const struct field subscribe_fields[] = {
    REQ(subscribe, tenant_id, K_STR), REQ(subscribe, namespace, K_STR),
    REQ(subscribe, stream, K_STR),    OPT(subscribe, start, K_START),
    OPT(subscribe, shard, K_U32),
};
static const struct field subscribed_fields[] = {
    REQ(subscribed, subscription_id, K_U64),
};
static const struct field cursor_error_fields[] = {
    REQ(cursor_error, reason, K_CURSOR),
    REQ(cursor_error, requested, K_U64),
    REQ(cursor_error, available, K_U64),
};
static const struct field hello_fields[] = {
    REQ(hello, subscription_id, K_U64),
};
static const struct field event_fields[] = {
    REQ(event, tenant_id, K_STR), REQ(event, namespace, K_STR),
    REQ(event, stream, K_STR),    REQ(event, payload, K_BYTES),
    OPT(event, offset, K_U64),
};
static const struct field event_batch_fields[] = {
    REQ(event_batch, tenant_id, K_STR),
    REQ(event_batch, namespace, K_STR),
    REQ(event_batch, stream, K_STR),
    REQ(event_batch, payloads, K_BYTES_LIST),
    OPT(event_batch, base_offset, K_U64),
};
static const struct field cache_put_fields[] = {
    OPTSTR(cache_put, tenant_id),       OPTSTR(cache_put, namespace),
    OPTSTR(cache_put, cache),           REQ(cache_put, key, K_STR),
    REQ(cache_put, value, K_BYTES),     OPT(cache_put, request_id, K_U64),
    NULLABLE(cache_put, ttl_ms, K_U64),
};
static const struct field cache_get_fields[] = {
    OPTSTR(cache_get, tenant_id),      OPTSTR(cache_get, namespace),
    OPTSTR(cache_get, cache),          REQ(cache_get, key, K_STR),
    OPT(cache_get, request_id, K_U64),
};
static const struct field cache_delete_fields[] = {
    REQ(cache_delete, tenant_id, K_STR),  REQ(cache_delete, namespace, K_STR),
    REQ(cache_delete, cache, K_STR),      REQ(cache_delete, key, K_STR),
    OPT(cache_delete, request_id, K_U64),
};
static const struct field cache_value_fields[] = {
    OPTSTR(cache_value, tenant_id),
    OPTSTR(cache_value, namespace),
    OPTSTR(cache_value, cache),
    REQ(cache_value, key, K_STR),
    NULLABLE(cache_value, value, K_BYTES),
    OPT(cache_value, request_id, K_U64),
};
static const struct field cache_ok_fields[] = {
    REQ(cache_ok, request_id, K_U64),
};
static const struct field cache_watch_fields[] = {
    REQ(cache_watch, tenant_id, K_STR),
    REQ(cache_watch, namespace, K_STR),
    REQ(cache_watch, cache, K_STR),
    OPTSTR(cache_watch, key),
    OPTSTR(cache_watch, prefix),
    OPT(cache_watch, shard, K_U32),
    OPT(cache_watch, from_offset, K_U64),
    OPT(cache_watch, retained, K_BOOL),
    OPT(cache_watch, subscription_id, K_U64),
};
static const struct field cache_watch_started_fields[] = {
    REQ(cache_watch_started, subscription_id, K_U64),
    REQ(cache_watch_started, resume_offset, K_U64),
    OPT(cache_watch_started, resnapshot, K_BOOL),
    OPT(cache_watch_started, retained_count, K_U64),
};
static const struct field cache_event_fields[] = {
    REQ(cache_event, key, K_STR),
    OPT(cache_event, value, K_BYTES),
    REQ(cache_event, offset, K_U64),
    OPT(cache_event, expires_at_millis, K_U64),
};
static const struct field cache_watch_lagged_fields[] = {
    REQ(cache_watch_lagged, resume_from, K_U64),
};
static const struct field counter_add_fields[] = {
    REQ(counter_add, tenant_id, K_STR), REQ(counter_add, namespace, K_STR),
    REQ(counter_add, cache, K_STR),     REQ(counter_add, key, K_STR),
    REQ(counter_add, delta, K_I64),     REQ(counter_add, request_id, K_U64),
};
static const struct field counter_get_fields[] = {
    REQ(counter_get, tenant_id, K_STR),  REQ(counter_get, namespace, K_STR),
    REQ(counter_get, cache, K_STR),      REQ(counter_get, key, K_STR),
    REQ(counter_get, request_id, K_U64),
};
static const struct field counter_value_fields[] = {
    OPT(counter_value, value, K_I64),
    REQ(counter_value, request_id, K_U64),
};
static const struct field group_poll_fields[] = {
    REQ(group_poll, tenant_id, K_STR), REQ(group_poll, namespace, K_STR),
    REQ(group_poll, stream, K_STR),    REQ(group_poll, shard, K_U32),
    REQ(group_poll, group, K_STR),     REQ(group_poll, max_records, K_U32),
    OPT(group_poll, wait_ms, K_U64),   REQ(group_poll, request_id, K_U64),
};
static const struct field group_records_fields[] = {
    REQ(group_records, records, K_RECORDS),
    REQ(group_records, request_id, K_U64),
};
static const struct field group_settle_fields[] = {
    REQ(group_settle, tenant_id, K_STR),  REQ(group_settle, namespace, K_STR),
    REQ(group_settle, stream, K_STR),     REQ(group_settle, shard, K_U32),
    REQ(group_settle, group, K_STR),      REQ(group_settle, offset, K_U64),
    REQ(group_settle, request_id, K_U64),
};
static const struct field group_dead_letters_fields[] = {
    REQ(group_dead_letters, tenant_id, K_STR),
    REQ(group_dead_letters, namespace, K_STR),
    REQ(group_dead_letters, stream, K_STR),
    REQ(group_dead_letters, shard, K_U32),
    REQ(group_dead_letters, group, K_STR),
    REQ(group_dead_letters, request_id, K_U64),
};
static const struct field group_dead_letter_list_fields[] = {
    REQ(group_dead_letter_list, offsets, K_U64_LIST),
    REQ(group_dead_letter_list, request_id, K_U64),
};
static const struct field stream_shards_fields[] = {
    REQ(stream_shards, tenant_id, K_STR),
    REQ(stream_shards, namespace, K_STR),
    REQ(stream_shards, stream, K_STR),
    REQ(stream_shards, request_id, K_U64),
};
static const struct field stream_shards_view_fields[] = {
    REQ(stream_shards_view, shards, K_U32),
    REQ(stream_shards_view, request_id, K_U64),
};
static const struct field topology_view_fields[] = {
    REQ(topology_view, brokers, K_BROKERS),
};
static const struct field not_leader_fields[] = {
    REQ(not_leader, node_id, K_STR),
    OPTSTR(not_leader, addr),
    REQ(not_leader, generation, K_U64),
};

#define DESC(type, name, fields) [type] = {name, fields, N(fields)}
#define DESC0(type, name) [type] = {name, NULL, 0}

static const struct msg_desc descs[FELIX_MSG_TYPE_COUNT] = {
    DESC(FELIX_MSG_AUTH, "auth", auth_fields),
    DESC(FELIX_MSG_AUTH_OK, "auth_ok", auth_ok_fields),
    DESC0(FELIX_MSG_OK, "ok"),
    DESC(FELIX_MSG_ERROR, "error", error_fields),
    DESC(FELIX_MSG_PUBLISH, "publish", publish_fields),
    DESC(FELIX_MSG_PUBLISH_BATCH, "publish_batch", publish_batch_fields),
    DESC(FELIX_MSG_PUBLISH_OK, "publish_ok", publish_ok_fields),
    DESC(FELIX_MSG_PUBLISH_ERROR, "publish_error", publish_error_fields),
    DESC(FELIX_MSG_PRODUCER_INIT, "producer_init", producer_init_fields),
    DESC(FELIX_MSG_PRODUCER_INIT_OK, "producer_init_ok",
         producer_init_ok_fields),
    DESC(FELIX_MSG_PUBLISH_IDEMPOTENT, "publish_idempotent",
         publish_idempotent_fields),
    DESC(FELIX_MSG_PUBLISH_REFUSED, "publish_refused", publish_refused_fields),
    DESC(FELIX_MSG_SUBSCRIBE, "subscribe", subscribe_fields),
    DESC(FELIX_MSG_SUBSCRIBED, "subscribed", subscribed_fields),
    DESC(FELIX_MSG_SUBSCRIBE_CURSOR_ERROR, "subscribe_cursor_error",
         cursor_error_fields),
    DESC(FELIX_MSG_EVENT_STREAM_HELLO, "event_stream_hello", hello_fields),
    DESC(FELIX_MSG_EVENT, "event", event_fields),
    DESC(FELIX_MSG_EVENT_BATCH, "event_batch", event_batch_fields),
    DESC(FELIX_MSG_CACHE_PUT, "cache_put", cache_put_fields),
    DESC(FELIX_MSG_CACHE_GET, "cache_get", cache_get_fields),
    DESC(FELIX_MSG_CACHE_DELETE, "cache_delete", cache_delete_fields),
    DESC(FELIX_MSG_CACHE_VALUE, "cache_value", cache_value_fields),
    DESC(FELIX_MSG_CACHE_OK, "cache_ok", cache_ok_fields),
    DESC(FELIX_MSG_CACHE_WATCH, "cache_watch", cache_watch_fields),
    DESC(FELIX_MSG_CACHE_WATCH_STARTED, "cache_watch_started",
         cache_watch_started_fields),
    DESC(FELIX_MSG_CACHE_EVENT, "cache_event", cache_event_fields),
    DESC(FELIX_MSG_CACHE_WATCH_LAGGED, "cache_watch_lagged",
         cache_watch_lagged_fields),
    DESC(FELIX_MSG_COUNTER_ADD, "counter_add", counter_add_fields),
    DESC(FELIX_MSG_COUNTER_GET, "counter_get", counter_get_fields),
    DESC(FELIX_MSG_COUNTER_VALUE, "counter_value", counter_value_fields),
    DESC(FELIX_MSG_GROUP_POLL, "group_poll", group_poll_fields),
    DESC(FELIX_MSG_GROUP_RECORDS, "group_records", group_records_fields),
    DESC(FELIX_MSG_GROUP_ACK, "group_ack", group_settle_fields),
    DESC(FELIX_MSG_GROUP_NACK, "group_nack", group_settle_fields),
    DESC(FELIX_MSG_GROUP_DEAD_LETTERS, "group_dead_letters",
         group_dead_letters_fields),
    DESC(FELIX_MSG_GROUP_DEAD_LETTER_LIST, "group_dead_letter_list",
         group_dead_letter_list_fields),
    DESC(FELIX_MSG_GROUP_DISCARD, "group_discard", group_settle_fields),
    DESC(FELIX_MSG_GROUP_REDRIVE, "group_redrive", group_settle_fields),
    DESC(FELIX_MSG_STREAM_SHARDS, "stream_shards", stream_shards_fields),
    DESC(FELIX_MSG_STREAM_SHARDS_VIEW, "stream_shards_view",
         stream_shards_view_fields),
    DESC0(FELIX_MSG_TOPOLOGY, "topology"),
    DESC(FELIX_MSG_TOPOLOGY_VIEW, "topology_view", topology_view_fields),
    DESC(FELIX_MSG_NOT_LEADER, "not_leader", not_leader_fields),
};

static const char *const ack_names[] = {"none", "per_message", "per_batch"};
static const char *const cursor_names[] = {"too_old", "in_future"};
static const char *const refusal_names[] = {"sequence_gap", "unknown_producer",
                                            "sequence_expired", "not_leader"};

void felix_msg_init(struct felix_msg *m, enum felix_msg_type type)
{
	memset(m, 0, sizeof *m);
	m->type = type;
}

const char *felix_msg_type_name(enum felix_msg_type type)
{
	if ((int)type <= FELIX_MSG_NONE || type >= FELIX_MSG_TYPE_COUNT) {
		return NULL;
	}
	return descs[type].name;
}

enum felix_msg_type felix_msg_type_from_name(const char *name)
{
	int t;
	for (t = FELIX_MSG_NONE + 1; t < FELIX_MSG_TYPE_COUNT; t++) {
		if (strcmp(descs[t].name, name) == 0) {
			return (enum felix_msg_type)t;
		}
	}
	return FELIX_MSG_NONE;
}

/* ---- Big integers ------------------------------------------------------
 *
 * jansson holds integers as signed 64-bit and refuses larger literals, but
 * request ids, producer ids and offsets are u64. Before parsing, every
 * integer literal outside the int64 range is rewritten as a marker string:
 * "\u0000" followed by its digits. Real strings can never start with NUL,
 * because the scan refuses any \u0000 escape in the input, so a string
 * that starts with NUL is always a rewritten integer. */

static bool is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

/* Is t[0..n) a JSON integer literal outside [INT64_MIN, INT64_MAX]? */
static bool big_integer(const uint8_t *t, size_t n)
{
	bool neg = n > 0 && t[0] == '-';
	const uint8_t *d = t + neg;
	size_t nd = n - neg, i;
	if (nd == 0 || (d[0] == '0' && nd > 1)) {
		return false; /* not an integer literal; jansson decides */
	}
	for (i = 0; i < nd; i++) {
		if (!is_digit(d[i])) {
			return false;
		}
	}
	if (nd != 19) {
		return nd > 19;
	}
	return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807",
	              19) > 0;
}

/* Copy in[0..len) to out (when not NULL), rewriting big integers; count
 * them in *nbig. -1 when the input holds a \u0000 escape. */
static int scan_json(const uint8_t *in, size_t len, struct wbuf *out,
                     size_t *nbig)
{
	size_t i = 0;
	*nbig = 0;
	while (i < len) {
		uint8_t c = in[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && in[j] != '"') {
				if (in[j] == '\\') {
					if (j + 5 < len && in[j + 1] == 'u' &&
					    memcmp(in + j + 2, "0000", 4) ==
					        0) {
						return -1;
					}
					j++;
				}
				j++;
			}
			if (j >= len) {
				j = len; /* unterminated (even mid-escape) */
			} else {
				j++; /* closing quote */
			}
			if (out != NULL) {
				wbuf_append(out, in + i, j - i);
			}
			i = j;
		} else if (c == '-' || is_digit(c)) {
			size_t j = i;
			while (j < len && (is_digit(in[j]) || in[j] == '-' ||
			                   in[j] == '+' || in[j] == '.' ||
			                   in[j] == 'e' || in[j] == 'E')) {
				j++;
			}
			bool big = big_integer(in + i, j - i);
			if (big) {
				(*nbig)++;
			}
			if (out != NULL) {
				if (big) {
					wbuf_append_str(out, "\"\\u0000");
				}
				wbuf_append(out, in + i, j - i);
				if (big) {
					wbuf_append_str(out, "\"");
				}
			}
			i = j;
		} else {
			if (out != NULL) {
				wbuf_append(out, in + i, 1);
			}
			i++;
		}
	}
	return 0;
}

static bool is_marker(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) > 0 &&
	       json_string_value(v)[0] == '\0';
}

/* ---- Decoding ------------------------------------------------------------ */

struct dctx {
	const char *type;
	char *err;
	size_t errlen;
};

static int dfail(struct dctx *c, const char *path, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	if (c->err == NULL || c->errlen == 0) {
		return FELIX_MSG_EINVAL;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->err, c->errlen, "%s: field \"%s\": %s", c->type, path, msg);
	return FELIX_MSG_EINVAL;
}

static int dnomem(struct dctx *c)
{
	if (c->err != NULL && c->errlen > 0) {
		snprintf(c->err, c->errlen, "%s: out of memory", c->type);
	}
	return FELIX_MSG_ENOMEM;
}

static const char *jtype(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return is_marker(v) ? "integer" : "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static int d_str(struct dctx *c, const char *path, const json_t *v, char **out)
{
	size_t n;
	const char *s;
	if (!json_is_string(v) || is_marker(v)) {
		return dfail(c, path, "expected string, got %s", jtype(v));
	}
	s = json_string_value(v);
	n = json_string_length(v);
	if (memchr(s, '\0', n) != NULL) {
		return dfail(c, path, "string contains a NUL character");
	}
	*out = malloc(n + 1);
	if (*out == NULL) {
		return dnomem(c);
	}
	memcpy(*out, s, n + 1);
	return 0;
}

/* An unsigned integer no greater than max; `tname` names the range. */
static int d_uint(struct dctx *c, const char *path, const json_t *v,
                  uint64_t max, const char *tname, uint64_t *out)
{
	uint64_t x = 0;
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0) {
			return dfail(c, path,
			             "%" PRId64 " is out of range for %s",
			             (int64_t)i, tname);
		}
		x = (uint64_t)i;
	} else if (is_marker(v)) {
		const char *s = json_string_value(v) + 1;
		const char *p;
		if (s[0] == '-') {
			return dfail(c, path, "%.40s is out of range for %s", s,
			             tname);
		}
		for (p = s; *p != '\0'; p++) {
			unsigned d = (unsigned)(*p - '0');
			if (x > (UINT64_MAX - d) / 10) {
				return dfail(c, path,
				             "%.40s is out of range for %s", s,
				             tname);
			}
			x = x * 10 + d;
		}
	} else {
		return dfail(c, path, "expected integer, got %s", jtype(v));
	}
	if (x > max) {
		return dfail(c, path, "%" PRIu64 " is out of range for %s", x,
		             tname);
	}
	*out = x;
	return 0;
}

static int d_i64(struct dctx *c, const char *path, const json_t *v,
                 int64_t *out)
{
	if (is_marker(v)) {
		return dfail(c, path, "%.40s is out of range for i64",
		             json_string_value(v) + 1);
	}
	if (!json_is_integer(v)) {
		return dfail(c, path, "expected integer, got %s", jtype(v));
	}
	*out = (int64_t)json_integer_value(v);
	return 0;
}

static int d_bytes(struct dctx *c, const char *path, const json_t *v,
                   struct felix_bytes *out)
{
	size_t n, outlen;
	uint8_t *p;
	if (!json_is_string(v) || is_marker(v)) {
		return dfail(c, path, "expected base64 string, got %s",
		             jtype(v));
	}
	n = json_string_length(v);
	out->data = NULL;
	out->len = 0;
	if (n == 0) {
		return 0;
	}
	p = malloc(n / 4 * 3 + 1);
	if (p == NULL) {
		return dnomem(c);
	}
	if (felix_base64_decode(json_string_value(v), n, p, &outlen) != 0) {
		free(p);
		return dfail(c, path,
		             "not valid base64 (standard alphabet, padded)");
	}
	out->data = p;
	out->len = outlen;
	return 0;
}

/* A string naming one of names[0..n); its index in *out. */
static int d_name(struct dctx *c, const char *path, const json_t *v,
                  const char *const *names, size_t n, int *out)
{
	size_t i;
	if (!json_is_string(v) || is_marker(v)) {
		return dfail(c, path, "expected string, got %s", jtype(v));
	}
	for (i = 0; i < n; i++) {
		if (strcmp(json_string_value(v), names[i]) == 0) {
			*out = (int)i;
			return 0;
		}
	}
	return dfail(c, path, "unknown value \"%.40s\"", json_string_value(v));
}

static int d_start(struct dctx *c, const char *path, const json_t *v,
                   struct felix_start *out)
{
	static const char *const names[] = {"latest", "earliest"};
	const json_t *off;
	int k;
	if (json_is_string(v) && !is_marker(v)) {
		if (d_name(c, path, v, names, N(names), &k) != 0) {
			return FELIX_MSG_EINVAL;
		}
		out->kind = (enum felix_start_kind)k;
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) != 1 ||
	    (off = json_object_get(v, "offset")) == NULL) {
		return dfail(c, path,
		             "expected \"latest\", \"earliest\" or "
		             "{\"offset\":n}, got %s",
		             jtype(v));
	}
	out->kind = FELIX_START_OFFSET;
	return d_uint(c, "start.offset", off, UINT64_MAX, "u64", &out->offset);
}

static int d_refusal(struct dctx *c, const char *path, const json_t *v,
                     struct felix_refusal *out)
{
	const char *key;
	const json_t *body, *f;
	int k, rc;
	if (json_is_string(v) && !is_marker(v)) {
		if (d_name(c, path, v, refusal_names, N(refusal_names), &k) !=
		    0) {
			return FELIX_MSG_EINVAL;
		}
		if (k != FELIX_REFUSAL_UNKNOWN_PRODUCER &&
		    k != FELIX_REFUSAL_SEQUENCE_EXPIRED) {
			return dfail(c, path, "\"%s\" needs an object body",
			             refusal_names[k]);
		}
		out->kind = (enum felix_refusal_kind)k;
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) != 1) {
		return dfail(c, path,
		             "expected a reason name or a one-key object, "
		             "got %s",
		             jtype(v));
	}
	key = json_object_iter_key(json_object_iter((json_t *)v));
	body = json_object_iter_value(json_object_iter((json_t *)v));
	if (strcmp(key, "sequence_gap") == 0) {
		out->kind = FELIX_REFUSAL_SEQUENCE_GAP;
		if (!json_is_object(body)) {
			return dfail(c, "reason.sequence_gap",
			             "expected object, got %s", jtype(body));
		}
		f = json_object_get(body, "expected");
		if (f == NULL) {
			return dfail(c, "reason.sequence_gap.expected",
			             "missing");
		}
		return d_uint(c, "reason.sequence_gap.expected", f, UINT64_MAX,
		              "u64", &out->expected);
	}
	if (strcmp(key, "not_leader") == 0) {
		out->kind = FELIX_REFUSAL_NOT_LEADER;
		if (!json_is_object(body)) {
			return dfail(c, "reason.not_leader",
			             "expected object, got %s", jtype(body));
		}
		f = json_object_get(body, "node_id");
		if (f == NULL) {
			return dfail(c, "reason.not_leader.node_id", "missing");
		}
		rc = d_str(c, "reason.not_leader.node_id", f, &out->node_id);
		if (rc != 0) {
			return rc;
		}
		f = json_object_get(body, "addr");
		if (f == NULL || json_is_null(f)) {
			return 0;
		}
		return d_str(c, "reason.not_leader.addr", f, &out->addr);
	}
	if (strcmp(key, "unknown_producer") == 0 ||
	    strcmp(key, "sequence_expired") == 0) {
		return dfail(c, path, "\"%s\" is spelled as a bare string",
		             key);
	}
	return dfail(c, path, "unknown reason \"%.40s\"", key);
}

/* Allocate n zeroed items (NULL when n is 0). */
static int d_alloc(struct dctx *c, size_t n, size_t size, void **out)
{
	*out = NULL;
	if (n == 0) {
		return 0;
	}
	*out = calloc(n, size);
	return *out == NULL ? dnomem(c) : 0;
}

static int d_array(struct dctx *c, const char *path, const json_t *v)
{
	if (!json_is_array(v)) {
		return dfail(c, path, "expected array, got %s", jtype(v));
	}
	return 0;
}

static int d_bytes_list(struct dctx *c, const char *path, const json_t *v,
                        struct felix_bytes_list *out)
{
	size_t i, n;
	char p[64];
	int rc = d_array(c, path, v);
	if (rc != 0) {
		return rc;
	}
	n = json_array_size(v);
	rc = d_alloc(c, n, sizeof *out->items, (void **)&out->items);
	if (rc != 0) {
		return rc;
	}
	out->count = n;
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s[%zu]", path, i);
		rc = d_bytes(c, p, json_array_get(v, i), &out->items[i]);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

static int d_u64_list(struct dctx *c, const char *path, const json_t *v,
                      struct felix_u64_list *out)
{
	size_t i, n;
	char p[64];
	int rc = d_array(c, path, v);
	if (rc != 0) {
		return rc;
	}
	n = json_array_size(v);
	rc = d_alloc(c, n, sizeof *out->items, (void **)&out->items);
	if (rc != 0) {
		return rc;
	}
	out->count = n;
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s[%zu]", path, i);
		rc = d_uint(c, p, json_array_get(v, i), UINT64_MAX, "u64",
		            &out->items[i]);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

/* A required member of an array element object. */
static const json_t *d_member(struct dctx *c, const json_t *obj,
                              const char *path, const char *name, int *rc)
{
	const json_t *f = json_object_get(obj, name);
	if (f == NULL) {
		*rc = dfail(c, path, "missing required field \"%s\"", name);
	}
	return f;
}

static int d_records(struct dctx *c, const char *path, const json_t *v,
                     struct felix_group_record_list *out)
{
	size_t i, n;
	char p[64], pm[80];
	int rc = d_array(c, path, v);
	if (rc != 0) {
		return rc;
	}
	n = json_array_size(v);
	rc = d_alloc(c, n, sizeof *out->items, (void **)&out->items);
	if (rc != 0) {
		return rc;
	}
	out->count = n;
	for (i = 0; i < n; i++) {
		const json_t *r = json_array_get(v, i), *f;
		struct felix_group_record *rec = &out->items[i];
		uint64_t attempts;
		snprintf(p, sizeof p, "%s[%zu]", path, i);
		if (!json_is_object(r)) {
			return dfail(c, p, "expected object, got %s", jtype(r));
		}
		snprintf(pm, sizeof pm, "%s.offset", p);
		if ((f = d_member(c, r, p, "offset", &rc)) == NULL ||
		    (rc = d_uint(c, pm, f, UINT64_MAX, "u64", &rec->offset)) !=
		        0) {
			return rc;
		}
		snprintf(pm, sizeof pm, "%s.payload", p);
		if ((f = d_member(c, r, p, "payload", &rc)) == NULL ||
		    (rc = d_bytes(c, pm, f, &rec->payload)) != 0) {
			return rc;
		}
		f = json_object_get(r, "attempts");
		if (f != NULL && !json_is_null(f)) {
			snprintf(pm, sizeof pm, "%s.attempts", p);
			rc = d_uint(c, pm, f, UINT32_MAX, "u32", &attempts);
			if (rc != 0) {
				return rc;
			}
			rec->has_attempts = true;
			rec->attempts = (uint32_t)attempts;
		}
	}
	return 0;
}

static int d_brokers(struct dctx *c, const char *path, const json_t *v,
                     struct felix_broker_list *out)
{
	size_t i, n;
	char p[64], pm[80];
	int rc = d_array(c, path, v);
	if (rc != 0) {
		return rc;
	}
	n = json_array_size(v);
	rc = d_alloc(c, n, sizeof *out->items, (void **)&out->items);
	if (rc != 0) {
		return rc;
	}
	out->count = n;
	for (i = 0; i < n; i++) {
		const json_t *b = json_array_get(v, i), *f;
		snprintf(p, sizeof p, "%s[%zu]", path, i);
		if (!json_is_object(b)) {
			return dfail(c, p, "expected object, got %s", jtype(b));
		}
		snprintf(pm, sizeof pm, "%s.node_id", p);
		if ((f = d_member(c, b, p, "node_id", &rc)) == NULL ||
		    (rc = d_str(c, pm, f, &out->items[i].node_id)) != 0) {
			return rc;
		}
		snprintf(pm, sizeof pm, "%s.addr", p);
		if ((f = d_member(c, b, p, "addr", &rc)) == NULL ||
		    (rc = d_str(c, pm, f, &out->items[i].addr)) != 0) {
			return rc;
		}
	}
	return 0;
}

static int d_field(struct dctx *c, const struct field *f, const json_t *obj,
                   struct felix_msg *m)
{
	const json_t *v = json_object_get(obj, f->name);
	void *dst = AT(m, f->off, char);
	uint64_t u;
	int rc, k;

	if (v == NULL || (f->pres != P_REQ && json_is_null(v))) {
		if (f->pres == P_REQ) {
			if (c->err != NULL && c->errlen > 0) {
				snprintf(c->err, c->errlen,
				         "%s: missing required field \"%s\"",
				         c->type, f->name);
			}
			return FELIX_MSG_EINVAL;
		}
		return 0;
	}
	if (f->has_off != 0) {
		*AT(m, f->has_off, bool) = true;
	}
	switch (f->kind) {
	case K_STR:
		return d_str(c, f->name, v, dst);
	case K_BYTES:
		return d_bytes(c, f->name, v, dst);
	case K_U16:
		rc = d_uint(c, f->name, v, UINT16_MAX, "u16", &u);
		*(uint16_t *)dst = (uint16_t)u;
		return rc;
	case K_U32:
		rc = d_uint(c, f->name, v, UINT32_MAX, "u32", &u);
		*(uint32_t *)dst = (uint32_t)u;
		return rc;
	case K_U64:
		return d_uint(c, f->name, v, UINT64_MAX, "u64", dst);
	case K_I64:
		return d_i64(c, f->name, v, dst);
	case K_BOOL:
		if (!json_is_boolean(v)) {
			return dfail(c, f->name, "expected boolean, got %s",
			             jtype(v));
		}
		*(bool *)dst = json_is_true(v);
		return 0;
	case K_ACK:
		rc = d_name(c, f->name, v, ack_names, N(ack_names), &k);
		*(enum felix_ack_mode *)dst = (enum felix_ack_mode)k;
		return rc;
	case K_CURSOR:
		rc = d_name(c, f->name, v, cursor_names, N(cursor_names), &k);
		*(enum felix_cursor_reason *)dst = (enum felix_cursor_reason)k;
		return rc;
	case K_START:
		return d_start(c, f->name, v, dst);
	case K_REFUSAL:
		return d_refusal(c, f->name, v, dst);
	case K_BYTES_LIST:
		return d_bytes_list(c, f->name, v, dst);
	case K_U64_LIST:
		return d_u64_list(c, f->name, v, dst);
	case K_RECORDS:
		return d_records(c, f->name, v, dst);
	case K_BROKERS:
		return d_brokers(c, f->name, v, dst);
	}
	return FELIX_MSG_EINVAL;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int felix_msg_decode(const uint8_t *json, size_t len, struct felix_msg *out,
                     char *err, size_t errlen)
{
	struct wbuf copy;
	size_t nbig, i;
	json_error_t je;
	json_t *root = NULL, *type;
	enum felix_msg_type t;
	struct dctx c;
	int rc = FELIX_MSG_EINVAL;

	felix_msg_init(out, FELIX_MSG_NONE);
	wbuf_init(&copy);
	if (scan_json(json, len, NULL, &nbig) != 0) {
		seterr(err, errlen,
		       "invalid JSON: \\u0000 in a string is not supported");
		return FELIX_MSG_EINVAL;
	}
	if (nbig > 0) {
		scan_json(json, len, &copy, &nbig);
		if (copy.oom) {
			seterr(err, errlen, "out of memory");
			rc = FELIX_MSG_ENOMEM;
			goto err_copy;
		}
		root = json_loadb((const char *)copy.data, copy.len,
		                  JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	} else {
		root = json_loadb((const char *)json, len,
		                  JSON_REJECT_DUPLICATES, &je);
	}
	if (root == NULL) {
		seterr(err, errlen, "invalid JSON: %s (line %d, column %d)",
		       je.text, je.line, je.column);
		goto err_copy;
	}
	if (!json_is_object(root)) {
		seterr(err, errlen, "message must be a JSON object, got %s",
		       jtype(root));
		goto err_root;
	}
	type = json_object_get(root, "type");
	if (type == NULL) {
		seterr(err, errlen, "message has no \"type\" field");
		goto err_root;
	}
	if (!json_is_string(type) || is_marker(type)) {
		seterr(err, errlen, "message \"type\" must be a string, got %s",
		       jtype(type));
		goto err_root;
	}
	t = felix_msg_type_from_name(json_string_value(type));
	if (t == FELIX_MSG_NONE ||
	    strlen(json_string_value(type)) != json_string_length(type)) {
		seterr(err, errlen, "unknown message type \"%.64s\"",
		       json_string_value(type));
		rc = FELIX_MSG_EUNKNOWN_TYPE;
		goto err_root;
	}
	out->type = t;
	c.type = descs[t].name;
	c.err = err;
	c.errlen = errlen;
	for (i = 0; i < descs[t].nfields; i++) {
		rc = d_field(&c, &descs[t].fields[i], root, out);
		if (rc != 0) {
			felix_msg_free(out);
			goto err_root;
		}
	}
	json_decref(root);
	wbuf_free(&copy);
	return 0;

err_root:
	json_decref(root);
err_copy:
	wbuf_free(&copy);
	return rc;
}

/* ---- Encoding ------------------------------------------------------------
 *
 * Output matches serde_json's compact form: no spaces, strings escaped with
 * \" \\ \b \f \n \r \t and \u00xx (lowercase) for other control characters,
 * everything else (including non-ASCII UTF-8 and '/') written as is. */

static int e_str(struct wbuf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(s), i, run = 0;
	if (!felix_utf8_valid((const uint8_t *)s, n)) {
		return FELIX_MSG_EINVAL;
	}
	wbuf_put_u8(b, '"');
	for (i = 0; i < n; i++) {
		uint8_t ch = (uint8_t)s[i];
		char esc[7];
		size_t elen = 2;
		if (ch >= 0x20 && ch != '"' && ch != '\\') {
			continue;
		}
		wbuf_append(b, s + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (ch) {
		case '"':
			esc[1] = '"';
			break;
		case '\\':
			esc[1] = '\\';
			break;
		case '\b':
			esc[1] = 'b';
			break;
		case '\f':
			esc[1] = 'f';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		case '\t':
			esc[1] = 't';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[ch >> 4];
			esc[5] = hex[ch & 15];
			elen = 6;
		}
		wbuf_append(b, esc, elen);
	}
	wbuf_append(b, s + run, n - run);
	wbuf_put_u8(b, '"');
	return 0;
}

static int e_bytes(struct wbuf *b, const struct felix_bytes *v)
{
	if (v->len > 0 && v->data == NULL) {
		return FELIX_MSG_EINVAL;
	}
	wbuf_put_u8(b, '"');
	felix_base64_encode(b, v->data, v->len);
	wbuf_put_u8(b, '"');
	return 0;
}

static void e_u64(struct wbuf *b, uint64_t v)
{
	char s[24];
	int n = snprintf(s, sizeof s, "%" PRIu64, v);
	wbuf_append(b, s, (size_t)n);
}

static void e_i64(struct wbuf *b, int64_t v)
{
	char s[24];
	int n = snprintf(s, sizeof s, "%" PRId64, v);
	wbuf_append(b, s, (size_t)n);
}

static int e_name(struct wbuf *b, int v, const char *const *names, size_t n)
{
	if (v < 0 || (size_t)v >= n) {
		return FELIX_MSG_EINVAL;
	}
	return e_str(b, names[v]);
}

static int e_refusal(struct wbuf *b, const struct felix_refusal *r)
{
	int rc;
	switch (r->kind) {
	case FELIX_REFUSAL_SEQUENCE_GAP:
		wbuf_append_str(b, "{\"sequence_gap\":{\"expected\":");
		e_u64(b, r->expected);
		wbuf_append_str(b, "}}");
		return 0;
	case FELIX_REFUSAL_UNKNOWN_PRODUCER:
	case FELIX_REFUSAL_SEQUENCE_EXPIRED:
		return e_str(b, refusal_names[r->kind]);
	case FELIX_REFUSAL_NOT_LEADER:
		if (r->node_id == NULL) {
			return FELIX_MSG_EINVAL;
		}
		wbuf_append_str(b, "{\"not_leader\":{\"node_id\":");
		if ((rc = e_str(b, r->node_id)) != 0) {
			return rc;
		}
		if (r->addr != NULL) {
			wbuf_append_str(b, ",\"addr\":");
			if ((rc = e_str(b, r->addr)) != 0) {
				return rc;
			}
		}
		wbuf_append_str(b, "}}");
		return 0;
	}
	return FELIX_MSG_EINVAL;
}

static int e_value(struct wbuf *b, const struct field *f, const void *src)
{
	size_t i;
	int rc;
	switch (f->kind) {
	case K_STR: {
		const char *s = *(char *const *)src;
		return s == NULL ? FELIX_MSG_EINVAL : e_str(b, s);
	}
	case K_BYTES:
		return e_bytes(b, src);
	case K_U16:
		e_u64(b, *(const uint16_t *)src);
		return 0;
	case K_U32:
		e_u64(b, *(const uint32_t *)src);
		return 0;
	case K_U64:
		e_u64(b, *(const uint64_t *)src);
		return 0;
	case K_I64:
		e_i64(b, *(const int64_t *)src);
		return 0;
	case K_BOOL:
		wbuf_append_str(b, *(const bool *)src ? "true" : "false");
		return 0;
	case K_ACK:
		return e_name(b, (int)*(const enum felix_ack_mode *)src,
		              ack_names, N(ack_names));
	case K_CURSOR:
		return e_name(b, (int)*(const enum felix_cursor_reason *)src,
		              cursor_names, N(cursor_names));
	case K_START: {
		const struct felix_start *s = src;
		switch (s->kind) {
		case FELIX_START_LATEST:
			wbuf_append_str(b, "\"latest\"");
			return 0;
		case FELIX_START_EARLIEST:
			wbuf_append_str(b, "\"earliest\"");
			return 0;
		case FELIX_START_OFFSET:
			wbuf_append_str(b, "{\"offset\":");
			e_u64(b, s->offset);
			wbuf_put_u8(b, '}');
			return 0;
		}
		return FELIX_MSG_EINVAL;
	}
	case K_REFUSAL:
		return e_refusal(b, src);
	case K_BYTES_LIST: {
		const struct felix_bytes_list *l = src;
		wbuf_put_u8(b, '[');
		for (i = 0; i < l->count; i++) {
			if (i > 0) {
				wbuf_put_u8(b, ',');
			}
			if ((rc = e_bytes(b, &l->items[i])) != 0) {
				return rc;
			}
		}
		wbuf_put_u8(b, ']');
		return 0;
	}
	case K_U64_LIST: {
		const struct felix_u64_list *l = src;
		wbuf_put_u8(b, '[');
		for (i = 0; i < l->count; i++) {
			if (i > 0) {
				wbuf_put_u8(b, ',');
			}
			e_u64(b, l->items[i]);
		}
		wbuf_put_u8(b, ']');
		return 0;
	}
	case K_RECORDS: {
		const struct felix_group_record_list *l = src;
		wbuf_put_u8(b, '[');
		for (i = 0; i < l->count; i++) {
			const struct felix_group_record *r = &l->items[i];
			wbuf_append_str(b, i > 0 ? ",{\"offset\":"
			                         : "{\"offset\":");
			e_u64(b, r->offset);
			wbuf_append_str(b, ",\"payload\":");
			if ((rc = e_bytes(b, &r->payload)) != 0) {
				return rc;
			}
			if (r->has_attempts) {
				wbuf_append_str(b, ",\"attempts\":");
				e_u64(b, r->attempts);
			}
			wbuf_put_u8(b, '}');
		}
		wbuf_put_u8(b, ']');
		return 0;
	}
	case K_BROKERS: {
		const struct felix_broker_list *l = src;
		wbuf_put_u8(b, '[');
		for (i = 0; i < l->count; i++) {
			const struct felix_broker_endpoint *e = &l->items[i];
			if (e->node_id == NULL || e->addr == NULL) {
				return FELIX_MSG_EINVAL;
			}
			wbuf_append_str(b, i > 0 ? ",{\"node_id\":"
			                         : "{\"node_id\":");
			if ((rc = e_str(b, e->node_id)) != 0) {
				return rc;
			}
			wbuf_append_str(b, ",\"addr\":");
			if ((rc = e_str(b, e->addr)) != 0) {
				return rc;
			}
			wbuf_put_u8(b, '}');
		}
		wbuf_put_u8(b, ']');
		return 0;
	}
	}
	return FELIX_MSG_EINVAL;
}

/* Is the field present (for optional fields)? */
static bool present(const struct felix_msg *m, const struct field *f)
{
	if (f->pres == P_REQ) {
		return true;
	}
	if (f->has_off == 0) {
		return *CAT(m, f->off, char *) != NULL;
	}
	return *CAT(m, f->has_off, bool);
}

int felix_msg_encode(const struct felix_msg *m, struct wbuf *out)
{
	size_t start = out->len, i;
	const struct msg_desc *d;
	int rc = FELIX_MSG_EINVAL;

	if ((int)m->type <= FELIX_MSG_NONE || m->type >= FELIX_MSG_TYPE_COUNT) {
		return FELIX_MSG_EINVAL;
	}
	d = &descs[m->type];
	wbuf_append_str(out, "{\"type\":\"");
	wbuf_append_str(out, d->name);
	wbuf_put_u8(out, '"');
	for (i = 0; i < d->nfields; i++) {
		const struct field *f = &d->fields[i];
		bool has = present(m, f);
		if (!has && f->pres == P_OPT) {
			continue;
		}
		wbuf_append_str(out, ",\"");
		wbuf_append_str(out, f->name);
		wbuf_append_str(out, "\":");
		if (!has) {
			wbuf_append_str(out, "null");
			continue;
		}
		rc = e_value(out, f, CAT(m, f->off, char));
		if (rc != 0) {
			goto err;
		}
	}
	wbuf_put_u8(out, '}');
	if (out->oom) {
		return FELIX_MSG_ENOMEM;
	}
	return 0;
err:
	if (!out->oom) {
		out->len = start;
	}
	return rc;
}

int felix_msg_encode_frame(const struct felix_msg *m, struct wbuf *out)
{
	size_t at = felix_frame_begin(out, 0);
	int rc = felix_msg_encode(m, out);
	if (rc != 0) {
		if (!out->oom) {
			out->len = at;
		}
		return rc;
	}
	if (felix_frame_finish(out, at) != 0) {
		if (!out->oom) {
			out->len = at;
			return FELIX_MSG_EINVAL;
		}
		return FELIX_MSG_ENOMEM;
	}
	return 0;
}

/* ---- Free and equality ----------------------------------------------------
 */

static void free_value(const struct field *f, void *p)
{
	size_t i;
	switch (f->kind) {
	case K_STR:
		free(*(char **)p);
		break;
	case K_BYTES:
		free(((struct felix_bytes *)p)->data);
		break;
	case K_REFUSAL:
		free(((struct felix_refusal *)p)->node_id);
		free(((struct felix_refusal *)p)->addr);
		break;
	case K_BYTES_LIST: {
		struct felix_bytes_list *l = p;
		for (i = 0; i < l->count && l->items != NULL; i++) {
			free(l->items[i].data);
		}
		free(l->items);
		break;
	}
	case K_U64_LIST:
		free(((struct felix_u64_list *)p)->items);
		break;
	case K_RECORDS: {
		struct felix_group_record_list *l = p;
		for (i = 0; i < l->count && l->items != NULL; i++) {
			free(l->items[i].payload.data);
		}
		free(l->items);
		break;
	}
	case K_BROKERS: {
		struct felix_broker_list *l = p;
		for (i = 0; i < l->count && l->items != NULL; i++) {
			free(l->items[i].node_id);
			free(l->items[i].addr);
		}
		free(l->items);
		break;
	}
	default:
		break;
	}
}

void felix_msg_free(struct felix_msg *m)
{
	size_t i;
	if ((int)m->type > FELIX_MSG_NONE && m->type < FELIX_MSG_TYPE_COUNT) {
		const struct msg_desc *d = &descs[m->type];
		for (i = 0; i < d->nfields; i++) {
			free_value(&d->fields[i],
			           AT(m, d->fields[i].off, char));
		}
	}
	felix_msg_init(m, FELIX_MSG_NONE);
}

static bool str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL) {
		return a == b;
	}
	return strcmp(a, b) == 0;
}

static bool bytes_eq(const struct felix_bytes *a, const struct felix_bytes *b)
{
	return a->len == b->len &&
	       (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static bool value_eq(const struct field *f, const void *a, const void *b)
{
	size_t i;
	switch (f->kind) {
	case K_STR:
		return str_eq(*(char *const *)a, *(char *const *)b);
	case K_BYTES:
		return bytes_eq(a, b);
	case K_U16:
		return *(const uint16_t *)a == *(const uint16_t *)b;
	case K_U32:
		return *(const uint32_t *)a == *(const uint32_t *)b;
	case K_U64:
		return *(const uint64_t *)a == *(const uint64_t *)b;
	case K_I64:
		return *(const int64_t *)a == *(const int64_t *)b;
	case K_BOOL:
		return *(const bool *)a == *(const bool *)b;
	case K_ACK:
		return *(const enum felix_ack_mode *)a ==
		       *(const enum felix_ack_mode *)b;
	case K_CURSOR:
		return *(const enum felix_cursor_reason *)a ==
		       *(const enum felix_cursor_reason *)b;
	case K_START: {
		const struct felix_start *x = a, *y = b;
		return x->kind == y->kind && (x->kind != FELIX_START_OFFSET ||
		                              x->offset == y->offset);
	}
	case K_REFUSAL: {
		const struct felix_refusal *x = a, *y = b;
		if (x->kind != y->kind) {
			return false;
		}
		if (x->kind == FELIX_REFUSAL_SEQUENCE_GAP) {
			return x->expected == y->expected;
		}
		if (x->kind == FELIX_REFUSAL_NOT_LEADER) {
			return str_eq(x->node_id, y->node_id) &&
			       str_eq(x->addr, y->addr);
		}
		return true;
	}
	case K_BYTES_LIST: {
		const struct felix_bytes_list *x = a, *y = b;
		if (x->count != y->count) {
			return false;
		}
		for (i = 0; i < x->count; i++) {
			if (!bytes_eq(&x->items[i], &y->items[i])) {
				return false;
			}
		}
		return true;
	}
	case K_U64_LIST: {
		const struct felix_u64_list *x = a, *y = b;
		return x->count == y->count &&
		       (x->count == 0 ||
		        memcmp(x->items, y->items,
		               x->count * sizeof *x->items) == 0);
	}
	case K_RECORDS: {
		const struct felix_group_record_list *x = a, *y = b;
		if (x->count != y->count) {
			return false;
		}
		for (i = 0; i < x->count; i++) {
			const struct felix_group_record *r = &x->items[i];
			const struct felix_group_record *s = &y->items[i];
			if (r->offset != s->offset ||
			    !bytes_eq(&r->payload, &s->payload) ||
			    r->has_attempts != s->has_attempts ||
			    (r->has_attempts && r->attempts != s->attempts)) {
				return false;
			}
		}
		return true;
	}
	case K_BROKERS: {
		const struct felix_broker_list *x = a, *y = b;
		if (x->count != y->count) {
			return false;
		}
		for (i = 0; i < x->count; i++) {
			if (!str_eq(x->items[i].node_id, y->items[i].node_id) ||
			    !str_eq(x->items[i].addr, y->items[i].addr)) {
				return false;
			}
		}
		return true;
	}
	}
	return false;
}

bool felix_msg_equal(const struct felix_msg *a, const struct felix_msg *b)
{
	size_t i;
	const struct msg_desc *d;
	if (a->type != b->type) {
		return false;
	}
	if ((int)a->type <= FELIX_MSG_NONE || a->type >= FELIX_MSG_TYPE_COUNT) {
		return true;
	}
	d = &descs[a->type];
	for (i = 0; i < d->nfields; i++) {
		const struct field *f = &d->fields[i];
		bool ha = present(a, f), hb = present(b, f);
		if (ha != hb) {
			return false;
		}
		if (ha &&
		    !value_eq(f, CAT(a, f->off, char), CAT(b, f->off, char))) {
			return false;
		}
	}
	return true;
}
