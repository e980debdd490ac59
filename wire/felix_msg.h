/* Felix v1 JSON messages (frame flags 0): every message the seed defines,
 * in both directions, as one tagged struct.
 *
 * Decoding (felix_msg_decode) parses with jansson, checks every required
 * field and its type, and ignores fields it does not know (peers rely on
 * that to add optional fields). Integers are exact over the whole u64 range.
 * Encoding (felix_msg_encode) is a hand-written emitter that reproduces the
 * reference encoder byte for byte: compact, "type" first, then the fields in
 * the seed's order, optional fields absent rather than null except where the
 * seed says null (cache_put.ttl_ms, cache_value.value), byte fields as
 * standard base64 with padding.
 *
 * Where the seed and the official client differ, the decoder accepts both:
 * publish and publish_batch take any ack mode ("none", "per_message",
 * "per_batch"); cache_put, cache_get and cache_value accept the seed's form
 * without tenant_id/namespace/cache as well as the client's form with them.
 *
 * Ownership. A message filled by felix_msg_decode() owns every pointer in
 * it (strings, byte buffers, arrays: each malloc'd separately) and must be
 * released with felix_msg_free(). A message the caller builds for
 * felix_msg_encode() may point at any memory: encoding only reads it. Call
 * felix_msg_free() on such a message only if all its pointers came from
 * malloc. Absent optional strings are NULL; absent optional numbers, byte
 * strings and booleans have a has_* flag that is false. Strings are
 * NUL-terminated UTF-8; byte fields are (data, len) and may hold anything. */
#ifndef WIRE_FELIX_MSG_H
#define WIRE_FELIX_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/felix_binary.h" /* enum felix_ack_mode */

enum felix_msg_type {
	FELIX_MSG_NONE = 0, /* an empty or freed message */
	/* session */
	FELIX_MSG_AUTH,
	FELIX_MSG_AUTH_OK,
	FELIX_MSG_OK,
	FELIX_MSG_ERROR,
	/* publishing */
	FELIX_MSG_PUBLISH,
	FELIX_MSG_PUBLISH_BATCH,
	FELIX_MSG_PUBLISH_OK,
	FELIX_MSG_PUBLISH_ERROR,
	FELIX_MSG_PRODUCER_INIT,
	FELIX_MSG_PRODUCER_INIT_OK,
	FELIX_MSG_PUBLISH_IDEMPOTENT,
	FELIX_MSG_PUBLISH_REFUSED,
	/* subscribing */
	FELIX_MSG_SUBSCRIBE,
	FELIX_MSG_SUBSCRIBED,
	FELIX_MSG_SUBSCRIBE_CURSOR_ERROR,
	FELIX_MSG_EVENT_STREAM_HELLO,
	FELIX_MSG_EVENT,
	FELIX_MSG_EVENT_BATCH, /* JSON event batch the official client reads */
	/* cache */
	FELIX_MSG_CACHE_PUT,
	FELIX_MSG_CACHE_GET,
	FELIX_MSG_CACHE_DELETE,
	FELIX_MSG_CACHE_VALUE,
	FELIX_MSG_CACHE_OK, /* answers cache_put and the group settles */
	FELIX_MSG_CACHE_WATCH,
	FELIX_MSG_CACHE_WATCH_STARTED,
	FELIX_MSG_CACHE_EVENT,
	FELIX_MSG_CACHE_WATCH_LAGGED,
	/* counters */
	FELIX_MSG_COUNTER_ADD,
	FELIX_MSG_COUNTER_GET,
	FELIX_MSG_COUNTER_VALUE,
	/* consumer groups */
	FELIX_MSG_GROUP_POLL,
	FELIX_MSG_GROUP_RECORDS,
	FELIX_MSG_GROUP_ACK,  /* u.group_settle */
	FELIX_MSG_GROUP_NACK, /* u.group_settle */
	FELIX_MSG_GROUP_DEAD_LETTERS,
	FELIX_MSG_GROUP_DEAD_LETTER_LIST,
	FELIX_MSG_GROUP_DISCARD, /* u.group_settle */
	FELIX_MSG_GROUP_REDRIVE, /* u.group_settle */
	/* topology and routing */
	FELIX_MSG_STREAM_SHARDS,
	FELIX_MSG_STREAM_SHARDS_VIEW,
	FELIX_MSG_TOPOLOGY,
	FELIX_MSG_TOPOLOGY_VIEW,
	FELIX_MSG_NOT_LEADER,
	FELIX_MSG_TYPE_COUNT
};

/* Return codes. */
enum {
	/* decode: not valid JSON, not an object, no "type", a missing or
	 * mistyped field; encode: the struct cannot be encoded (a required
	 * string is NULL, a string is not UTF-8, an enum is out of range) */
	FELIX_MSG_EINVAL = -1,
	/* decode: a well-formed object whose "type" this version does not
	 * know (the reference broker ends the control loop on it) */
	FELIX_MSG_EUNKNOWN_TYPE = -2,
	FELIX_MSG_ENOMEM = -3,
};

/* A byte string. Owned (malloc'd) in decoded messages; NULL when empty. */
struct felix_bytes {
	uint8_t *data;
	size_t len;
};

struct felix_bytes_list {
	struct felix_bytes *items;
	size_t count;
};

struct felix_u64_list {
	uint64_t *items;
	size_t count;
};

/* subscribe.start: "latest", "earliest" or {"offset": n}. */
enum felix_start_kind {
	FELIX_START_LATEST = 0,
	FELIX_START_EARLIEST,
	FELIX_START_OFFSET,
};

struct felix_start {
	enum felix_start_kind kind;
	uint64_t offset; /* FELIX_START_OFFSET only */
};

enum felix_cursor_reason {
	FELIX_CURSOR_TOO_OLD = 0,
	FELIX_CURSOR_IN_FUTURE,
};

/* publish_refused.reason: {"sequence_gap":{"expected":n}},
 * "unknown_producer", "sequence_expired",
 * {"not_leader":{"node_id":s,"addr":s?}}. */
enum felix_refusal_kind {
	FELIX_REFUSAL_SEQUENCE_GAP = 0,
	FELIX_REFUSAL_UNKNOWN_PRODUCER,
	FELIX_REFUSAL_SEQUENCE_EXPIRED,
	FELIX_REFUSAL_NOT_LEADER,
};

struct felix_refusal {
	enum felix_refusal_kind kind;
	uint64_t expected; /* SEQUENCE_GAP */
	char *node_id;     /* NOT_LEADER, required there */
	char *addr;        /* NOT_LEADER, optional */
};

struct felix_group_record {
	uint64_t offset;
	struct felix_bytes payload;
	bool has_attempts; /* absent: the broker did not report it */
	uint32_t attempts;
};

struct felix_group_record_list {
	struct felix_group_record *items;
	size_t count;
};

struct felix_broker_endpoint {
	char *node_id;
	char *addr;
};

struct felix_broker_list {
	struct felix_broker_endpoint *items;
	size_t count;
};

struct felix_msg_auth {
	char *tenant_id;
	char *token;
	bool has_client_flags;
	uint16_t client_flags;
	bool has_client_features;
	uint32_t client_features;
};

struct felix_msg_auth_ok {
	uint16_t server_flags;
	bool has_server_features;
	uint32_t server_features;
};

struct felix_msg_error {
	char *message;
};

struct felix_msg_publish {
	char *tenant_id;
	char *namespace;
	char *stream;
	struct felix_bytes payload;
	bool has_key;
	struct felix_bytes key;
	bool has_request_id;
	uint64_t request_id;
	bool has_ack;
	enum felix_ack_mode ack;
};

struct felix_msg_publish_batch {
	char *tenant_id;
	char *namespace;
	char *stream;
	struct felix_bytes_list payloads;
	bool has_key;
	struct felix_bytes key;
	bool has_request_id;
	uint64_t request_id;
	bool has_ack;
	enum felix_ack_mode ack;
};

struct felix_msg_publish_ok {
	uint64_t request_id;
};

struct felix_msg_publish_error {
	uint64_t request_id;
	char *message;
};

struct felix_msg_producer_init {
	uint64_t request_id;
};

struct felix_msg_producer_init_ok {
	uint64_t request_id;
	uint64_t producer_id;
};

struct felix_msg_publish_idempotent {
	char *tenant_id;
	char *namespace;
	char *stream;
	struct felix_bytes_list payloads;
	bool has_key;
	struct felix_bytes key;
	uint64_t request_id;
	uint64_t producer_id;
	uint64_t sequence;
};

struct felix_msg_publish_refused {
	uint64_t request_id;
	struct felix_refusal reason;
	char *message;
};

struct felix_msg_subscribe {
	char *tenant_id;
	char *namespace;
	char *stream;
	bool has_start; /* absent means latest */
	struct felix_start start;
	bool has_shard; /* absent means 0 */
	uint32_t shard;
};

struct felix_msg_subscribed {
	uint64_t subscription_id;
};

struct felix_msg_subscribe_cursor_error {
	enum felix_cursor_reason reason;
	uint64_t requested;
	uint64_t available;
};

struct felix_msg_event_stream_hello {
	uint64_t subscription_id;
};

struct felix_msg_event {
	char *tenant_id;
	char *namespace;
	char *stream;
	struct felix_bytes payload;
	bool has_offset; /* absent for in-memory streams */
	uint64_t offset;
};

struct felix_msg_event_batch {
	char *tenant_id;
	char *namespace;
	char *stream;
	struct felix_bytes_list payloads;
	bool has_base_offset;
	uint64_t base_offset;
};

struct felix_msg_cache_put {
	char *tenant_id; /* optional: the seed's form has no scope */
	char *namespace; /* optional */
	char *cache;     /* optional */
	char *key;
	struct felix_bytes value;
	bool has_request_id;
	uint64_t request_id;
	bool has_ttl_ms; /* encoded as null when false */
	uint64_t ttl_ms;
};

struct felix_msg_cache_get {
	char *tenant_id; /* optional */
	char *namespace; /* optional */
	char *cache;     /* optional */
	char *key;
	bool has_request_id;
	uint64_t request_id;
};

struct felix_msg_cache_delete {
	char *tenant_id;
	char *namespace;
	char *cache;
	char *key;
	bool has_request_id;
	uint64_t request_id;
};

struct felix_msg_cache_value {
	char *tenant_id; /* optional; the official client needs it */
	char *namespace; /* optional; the official client needs it */
	char *cache;     /* optional; the official client needs it */
	char *key;
	bool has_value; /* encoded as null when false (a miss) */
	struct felix_bytes value;
	bool has_request_id;
	uint64_t request_id;
};

struct felix_msg_cache_ok {
	uint64_t request_id;
};

struct felix_msg_cache_watch {
	char *tenant_id;
	char *namespace;
	char *cache;
	char *key;    /* optional; exactly one of key/prefix is valid, which */
	char *prefix; /* the broker checks: the codec keeps what was sent */
	bool has_shard;
	uint32_t shard;
	bool has_from_offset;
	uint64_t from_offset;
	bool has_retained;
	bool retained;
	bool has_subscription_id;
	uint64_t subscription_id;
};

struct felix_msg_cache_watch_started {
	uint64_t subscription_id;
	uint64_t resume_offset;
	bool has_resnapshot;
	bool resnapshot;
	bool has_retained_count;
	uint64_t retained_count;
};

struct felix_msg_cache_event {
	char *key;
	bool has_value; /* absent: the key was deleted */
	struct felix_bytes value;
	uint64_t offset;
	bool has_expires_at_millis;
	uint64_t expires_at_millis;
};

struct felix_msg_cache_watch_lagged {
	uint64_t resume_from;
};

struct felix_msg_counter_add {
	char *tenant_id;
	char *namespace;
	char *cache;
	char *key;
	int64_t delta;
	uint64_t request_id;
};

struct felix_msg_counter_get {
	char *tenant_id;
	char *namespace;
	char *cache;
	char *key;
	uint64_t request_id;
};

struct felix_msg_counter_value {
	bool has_value; /* absent (or null): never written */
	int64_t value;
	uint64_t request_id;
};

struct felix_msg_group_poll {
	char *tenant_id;
	char *namespace;
	char *stream;
	uint32_t shard;
	char *group;
	uint32_t max_records;
	bool has_wait_ms;
	uint64_t wait_ms;
	uint64_t request_id;
};

struct felix_msg_group_records {
	struct felix_group_record_list records;
	uint64_t request_id;
};

/* group_ack, group_nack, group_discard, group_redrive */
struct felix_msg_group_settle {
	char *tenant_id;
	char *namespace;
	char *stream;
	uint32_t shard;
	char *group;
	uint64_t offset;
	uint64_t request_id;
};

struct felix_msg_group_dead_letters {
	char *tenant_id;
	char *namespace;
	char *stream;
	uint32_t shard;
	char *group;
	uint64_t request_id;
};

struct felix_msg_group_dead_letter_list {
	struct felix_u64_list offsets;
	uint64_t request_id;
};

struct felix_msg_stream_shards {
	char *tenant_id;
	char *namespace;
	char *stream;
	uint64_t request_id;
};

struct felix_msg_stream_shards_view {
	uint32_t shards;
	uint64_t request_id;
};

struct felix_msg_topology_view {
	struct felix_broker_list brokers;
};

struct felix_msg_not_leader {
	char *node_id;
	char *addr; /* optional */
	uint64_t generation;
};

/* One message. ok and topology have no fields. */
struct felix_msg {
	enum felix_msg_type type;
	union {
		struct felix_msg_auth auth;
		struct felix_msg_auth_ok auth_ok;
		struct felix_msg_error error;
		struct felix_msg_publish publish;
		struct felix_msg_publish_batch publish_batch;
		struct felix_msg_publish_ok publish_ok;
		struct felix_msg_publish_error publish_error;
		struct felix_msg_producer_init producer_init;
		struct felix_msg_producer_init_ok producer_init_ok;
		struct felix_msg_publish_idempotent publish_idempotent;
		struct felix_msg_publish_refused publish_refused;
		struct felix_msg_subscribe subscribe;
		struct felix_msg_subscribed subscribed;
		struct felix_msg_subscribe_cursor_error cursor_error;
		struct felix_msg_event_stream_hello hello;
		struct felix_msg_event event;
		struct felix_msg_event_batch event_batch;
		struct felix_msg_cache_put cache_put;
		struct felix_msg_cache_get cache_get;
		struct felix_msg_cache_delete cache_delete;
		struct felix_msg_cache_value cache_value;
		struct felix_msg_cache_ok cache_ok;
		struct felix_msg_cache_watch cache_watch;
		struct felix_msg_cache_watch_started cache_watch_started;
		struct felix_msg_cache_event cache_event;
		struct felix_msg_cache_watch_lagged cache_watch_lagged;
		struct felix_msg_counter_add counter_add;
		struct felix_msg_counter_get counter_get;
		struct felix_msg_counter_value counter_value;
		struct felix_msg_group_poll group_poll;
		struct felix_msg_group_records group_records;
		struct felix_msg_group_settle group_settle;
		struct felix_msg_group_dead_letters group_dead_letters;
		struct felix_msg_group_dead_letter_list group_dead_letter_list;
		struct felix_msg_stream_shards stream_shards;
		struct felix_msg_stream_shards_view stream_shards_view;
		struct felix_msg_topology_view topology_view;
		struct felix_msg_not_leader not_leader;
	} u;
};

/* Zero the message and set its type. */
void felix_msg_init(struct felix_msg *m, enum felix_msg_type type);

/* The wire name of a type ("auth", "cache_ok", ...), or NULL. */
const char *felix_msg_type_name(enum felix_msg_type type);
/* The type named `name`, or FELIX_MSG_NONE. */
enum felix_msg_type felix_msg_type_from_name(const char *name);

/* Decode the JSON payload json[0..len) into *out, which afterwards owns
 * everything it points to. On failure *out is left as FELIX_MSG_NONE with
 * nothing to free, and err (if not NULL) holds a precise message, e.g.
 * `cache_put: missing required field "key"`. Returns 0 or a FELIX_MSG_E*
 * code. */
int felix_msg_decode(const uint8_t *json, size_t len, struct felix_msg *out,
                     char *err, size_t errlen);

/* Append the compact JSON of *m to out. 0 or a FELIX_MSG_E* code; on
 * failure out->len is restored (unless memory ran out). */
int felix_msg_encode(const struct felix_msg *m, struct wbuf *out);

/* Append a whole frame (header with flags 0, then the JSON). */
int felix_msg_encode_frame(const struct felix_msg *m, struct wbuf *out);

/* Free everything a decoded message owns and reset it to FELIX_MSG_NONE. */
void felix_msg_free(struct felix_msg *m);

/* Field-by-field equality (strings and bytes by content), as decoding and
 * re-encoding must preserve it. */
bool felix_msg_equal(const struct felix_msg *a, const struct felix_msg *b);

#endif /* WIRE_FELIX_MSG_H */
