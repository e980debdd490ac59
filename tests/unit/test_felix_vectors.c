/* Every Felix vector, shared (public Felix repository) and our own
 * (tests/vectors/felix): each frame decodes to exactly the fields its .json
 * names, and encoding those fields gives exactly its bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/felix_test_util.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"
#include "wire/felix_msg.h"

#define B(s) ((struct felix_bytes){(uint8_t *)(s), sizeof(s) - 1})
#define U64MAX UINT64_MAX

/* Fields of the seed's common scope. */
#define SCOPE(x, t, n)                                                         \
	do {                                                                   \
		(x).tenant_id = (t);                                           \
		(x).namespace = (n);                                           \
	} while (0)

static void settle(struct felix_msg *m, enum felix_msg_type t)
{
	felix_msg_init(m, t);
	SCOPE(m->u.group_settle, "t1", "default");
	m->u.group_settle.stream = "s1";
	m->u.group_settle.group = "g1";
	m->u.group_settle.offset = 3;
	m->u.group_settle.request_id = 10;
}

/* The message each JSON vector must decode to, built by hand from the
 * vector's meaning. False for a name this table does not know. The
 * strings are literals: these messages are never freed. */
static bool expected_msg(const char *name, struct felix_msg *m,
                         struct felix_bytes *scratch)
{
#define IS(s) (strcmp(name, s) == 0)
	/* ---- shared vectors ---- */
	if (IS("auth_ok")) {
		felix_msg_init(m, FELIX_MSG_AUTH_OK);
		m->u.auth_ok.server_flags = 25;
	} else if (IS("auth_with_capabilities")) {
		felix_msg_init(m, FELIX_MSG_AUTH);
		m->u.auth.tenant_id = "t1";
		m->u.auth.token = "demo-token";
		m->u.auth.has_client_flags = true;
		m->u.auth.client_flags = 25;
	} else if (IS("cache_get")) {
		felix_msg_init(m, FELIX_MSG_CACHE_GET);
		SCOPE(m->u.cache_get, "t1", "default");
		m->u.cache_get.cache = "primary";
		m->u.cache_get.key = "demo-key";
	} else if (IS("cache_put")) {
		felix_msg_init(m, FELIX_MSG_CACHE_PUT);
		SCOPE(m->u.cache_put, "t1", "default");
		m->u.cache_put.cache = "primary";
		m->u.cache_put.key = "demo-key";
		m->u.cache_put.value = B("cached");
		m->u.cache_put.has_ttl_ms = true;
		m->u.cache_put.ttl_ms = 1000;
	} else if (IS("cache_value")) {
		felix_msg_init(m, FELIX_MSG_CACHE_VALUE);
		SCOPE(m->u.cache_value, "t1", "default");
		m->u.cache_value.cache = "primary";
		m->u.cache_value.key = "demo-key";
		m->u.cache_value.has_value = true;
		m->u.cache_value.value = B("cached");
	} else if (IS("error")) {
		felix_msg_init(m, FELIX_MSG_ERROR);
		m->u.error.message = "oops";
	} else if (IS("event")) {
		felix_msg_init(m, FELIX_MSG_EVENT);
		SCOPE(m->u.event, "t1", "default");
		m->u.event.stream = "demo";
		m->u.event.payload = B("world");
	} else if (IS("ok")) {
		felix_msg_init(m, FELIX_MSG_OK);
	} else if (IS("publish")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH);
		SCOPE(m->u.publish, "t1", "default");
		m->u.publish.stream = "demo";
		m->u.publish.payload = B("hello");
	} else if (IS("subscribe")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE);
		SCOPE(m->u.subscribe, "t1", "default");
		m->u.subscribe.stream = "demo";
	}
	/* ---- our vectors ---- */
	else if (IS("msg_auth_client")) {
		felix_msg_init(m, FELIX_MSG_AUTH);
		m->u.auth.tenant_id = "t1";
		m->u.auth.token = "tok";
		m->u.auth.has_client_flags = true;
		m->u.auth.client_flags = 255;
		m->u.auth.has_client_features = true;
		m->u.auth.client_features = 1023;
	} else if (IS("msg_auth_legacy")) {
		felix_msg_init(m, FELIX_MSG_AUTH);
		m->u.auth.tenant_id = "t1";
		m->u.auth.token = "tok";
	} else if (IS("msg_auth_ok_features")) {
		felix_msg_init(m, FELIX_MSG_AUTH_OK);
		m->u.auth_ok.server_flags = 127;
		m->u.auth_ok.has_server_features = true;
		m->u.auth_ok.server_features = 1020;
	} else if (IS("msg_error_escapes")) {
		felix_msg_init(m, FELIX_MSG_ERROR);
		m->u.error.message = "a\"b\\c\n\r\t\b\f\x01\x1f\x7f/"
		                     "\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80";
	} else if (IS("msg_publish_keyed")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH);
		SCOPE(m->u.publish, "t1", "default");
		m->u.publish.stream = "s1";
		m->u.publish.payload = B("hello");
		m->u.publish.has_key = true;
		m->u.publish.key = B("k1");
		m->u.publish.has_request_id = true;
		m->u.publish.request_id = U64MAX;
		m->u.publish.has_ack = true;
		m->u.publish.ack = FELIX_ACK_PER_MESSAGE;
	} else if (IS("msg_publish_ack_none")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH);
		SCOPE(m->u.publish, "t1", "default");
		m->u.publish.stream = "s1";
		m->u.publish.has_ack = true;
		m->u.publish.ack = FELIX_ACK_NONE;
	} else if (IS("msg_publish_batch_client")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_BATCH);
		SCOPE(m->u.publish_batch, "t1", "default");
		m->u.publish_batch.stream = "s1";
		scratch[0] = B("hello");
		m->u.publish_batch.payloads.items = scratch;
		m->u.publish_batch.payloads.count = 1;
		m->u.publish_batch.has_key = true;
		m->u.publish_batch.key = B("k1");
		m->u.publish_batch.has_request_id = true;
		m->u.publish_batch.request_id = 1;
		m->u.publish_batch.has_ack = true;
		m->u.publish_batch.ack = FELIX_ACK_PER_MESSAGE;
	} else if (IS("msg_publish_batch_seed")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_BATCH);
		SCOPE(m->u.publish_batch, "t1", "default");
		m->u.publish_batch.stream = "s1";
		scratch[0] = B("");
		scratch[1] = B("a");
		scratch[2] = B("ab");
		scratch[3] = B("abc");
		m->u.publish_batch.payloads.items = scratch;
		m->u.publish_batch.payloads.count = 4;
		m->u.publish_batch.has_ack = true;
		m->u.publish_batch.ack = FELIX_ACK_PER_BATCH;
	} else if (IS("msg_publish_ok")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_OK);
		m->u.publish_ok.request_id = 1;
	} else if (IS("msg_publish_error")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_ERROR);
		m->u.publish_error.request_id = 2;
		m->u.publish_error.message = "unknown stream s9";
	} else if (IS("msg_producer_init")) {
		felix_msg_init(m, FELIX_MSG_PRODUCER_INIT);
		m->u.producer_init.request_id = 9223372036854775808ull;
	} else if (IS("msg_producer_init_ok")) {
		felix_msg_init(m, FELIX_MSG_PRODUCER_INIT_OK);
		m->u.producer_init_ok.request_id = 5;
		m->u.producer_init_ok.producer_id = U64MAX - 1;
	} else if (IS("msg_publish_idempotent")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_IDEMPOTENT);
		SCOPE(m->u.publish_idempotent, "t1", "default");
		m->u.publish_idempotent.stream = "s1";
		scratch[0] = B("x");
		m->u.publish_idempotent.payloads.items = scratch;
		m->u.publish_idempotent.payloads.count = 1;
		m->u.publish_idempotent.has_key = true;
		m->u.publish_idempotent.key = B("key");
		m->u.publish_idempotent.request_id = 6;
		m->u.publish_idempotent.producer_id = U64MAX;
		m->u.publish_idempotent.sequence = 0;
	} else if (IS("msg_publish_idempotent_unkeyed")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_IDEMPOTENT);
		SCOPE(m->u.publish_idempotent, "t1", "default");
		m->u.publish_idempotent.stream = "s1";
		m->u.publish_idempotent.request_id = 7;
		m->u.publish_idempotent.producer_id = 1;
		m->u.publish_idempotent.sequence = 9223372036854775807ull;
	} else if (IS("msg_publish_refused_sequence_gap")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_REFUSED);
		m->u.publish_refused.request_id = 6;
		m->u.publish_refused.reason.kind = FELIX_REFUSAL_SEQUENCE_GAP;
		m->u.publish_refused.reason.expected = 4;
		m->u.publish_refused.message = "sequence gap";
	} else if (IS("msg_publish_refused_unknown_producer")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_REFUSED);
		m->u.publish_refused.request_id = 6;
		m->u.publish_refused.reason.kind =
		    FELIX_REFUSAL_UNKNOWN_PRODUCER;
		m->u.publish_refused.message = "unknown producer";
	} else if (IS("msg_publish_refused_sequence_expired")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_REFUSED);
		m->u.publish_refused.request_id = 6;
		m->u.publish_refused.reason.kind =
		    FELIX_REFUSAL_SEQUENCE_EXPIRED;
		m->u.publish_refused.message = "expired";
	} else if (IS("msg_publish_refused_not_leader")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_REFUSED);
		m->u.publish_refused.request_id = 6;
		m->u.publish_refused.reason.kind = FELIX_REFUSAL_NOT_LEADER;
		m->u.publish_refused.reason.node_id = "broker-b";
		m->u.publish_refused.reason.addr = "10.0.0.5:5000";
		m->u.publish_refused.message = "not leader";
	} else if (IS("msg_publish_refused_not_leader_no_addr")) {
		felix_msg_init(m, FELIX_MSG_PUBLISH_REFUSED);
		m->u.publish_refused.request_id = 6;
		m->u.publish_refused.reason.kind = FELIX_REFUSAL_NOT_LEADER;
		m->u.publish_refused.reason.node_id = "broker-b";
		m->u.publish_refused.message = "not leader";
	} else if (IS("msg_subscribe_latest")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE);
		SCOPE(m->u.subscribe, "t1", "default");
		m->u.subscribe.stream = "s1";
		m->u.subscribe.has_start = true;
		m->u.subscribe.start.kind = FELIX_START_LATEST;
	} else if (IS("msg_subscribe_earliest_shard")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE);
		SCOPE(m->u.subscribe, "t1", "default");
		m->u.subscribe.stream = "s1";
		m->u.subscribe.has_start = true;
		m->u.subscribe.start.kind = FELIX_START_EARLIEST;
		m->u.subscribe.has_shard = true;
		m->u.subscribe.shard = 3;
	} else if (IS("msg_subscribe_offset")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE);
		SCOPE(m->u.subscribe, "t1", "default");
		m->u.subscribe.stream = "s1";
		m->u.subscribe.has_start = true;
		m->u.subscribe.start.kind = FELIX_START_OFFSET;
		m->u.subscribe.start.offset = U64MAX;
	} else if (IS("msg_subscribed")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBED);
		m->u.subscribed.subscription_id = 42;
	} else if (IS("msg_subscribe_cursor_error_too_old")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
		m->u.cursor_error.reason = FELIX_CURSOR_TOO_OLD;
		m->u.cursor_error.requested = 1;
		m->u.cursor_error.available = 10;
	} else if (IS("msg_subscribe_cursor_error_in_future")) {
		felix_msg_init(m, FELIX_MSG_SUBSCRIBE_CURSOR_ERROR);
		m->u.cursor_error.reason = FELIX_CURSOR_IN_FUTURE;
		m->u.cursor_error.requested = 99;
		m->u.cursor_error.available = 12;
	} else if (IS("msg_event_stream_hello")) {
		felix_msg_init(m, FELIX_MSG_EVENT_STREAM_HELLO);
		m->u.hello.subscription_id = 42;
	} else if (IS("msg_event_offset")) {
		felix_msg_init(m, FELIX_MSG_EVENT);
		SCOPE(m->u.event, "t1", "default");
		m->u.event.stream = "s1";
		m->u.event.payload = B("world");
		m->u.event.has_offset = true;
		m->u.event.offset = 0;
	} else if (IS("msg_event_batch")) {
		felix_msg_init(m, FELIX_MSG_EVENT_BATCH);
		SCOPE(m->u.event_batch, "t1", "default");
		m->u.event_batch.stream = "s1";
		scratch[0] = B("a");
		scratch[1] = B("b");
		m->u.event_batch.payloads.items = scratch;
		m->u.event_batch.payloads.count = 2;
		m->u.event_batch.has_base_offset = true;
		m->u.event_batch.base_offset = 10;
	} else if (IS("msg_cache_put_client") || IS("msg_cache_put_no_ttl")) {
		felix_msg_init(m, FELIX_MSG_CACHE_PUT);
		SCOPE(m->u.cache_put, "t1", "default");
		m->u.cache_put.cache = "c1";
		m->u.cache_put.key = "k";
		m->u.cache_put.value = B("v");
		m->u.cache_put.has_request_id = true;
		if (IS("msg_cache_put_client")) {
			m->u.cache_put.request_id = 3;
			m->u.cache_put.has_ttl_ms = true;
			m->u.cache_put.ttl_ms = 1500;
		} else {
			m->u.cache_put.request_id = 4;
		}
	} else if (IS("msg_cache_put_seed")) {
		felix_msg_init(m, FELIX_MSG_CACHE_PUT);
		m->u.cache_put.key = "k";
	} else if (IS("msg_cache_get_client")) {
		felix_msg_init(m, FELIX_MSG_CACHE_GET);
		SCOPE(m->u.cache_get, "t1", "default");
		m->u.cache_get.cache = "c1";
		m->u.cache_get.key = "k";
		m->u.cache_get.has_request_id = true;
		m->u.cache_get.request_id = 5;
	} else if (IS("msg_cache_get_seed")) {
		felix_msg_init(m, FELIX_MSG_CACHE_GET);
		m->u.cache_get.key = "k";
	} else if (IS("msg_cache_delete")) {
		felix_msg_init(m, FELIX_MSG_CACHE_DELETE);
		SCOPE(m->u.cache_delete, "t1", "default");
		m->u.cache_delete.cache = "c1";
		m->u.cache_delete.key = "k";
		m->u.cache_delete.has_request_id = true;
		m->u.cache_delete.request_id = 6;
	} else if (IS("msg_cache_value_miss")) {
		felix_msg_init(m, FELIX_MSG_CACHE_VALUE);
		SCOPE(m->u.cache_value, "t1", "default");
		m->u.cache_value.cache = "c1";
		m->u.cache_value.key = "k";
		m->u.cache_value.has_request_id = true;
		m->u.cache_value.request_id = 5;
	} else if (IS("msg_cache_value_seed")) {
		felix_msg_init(m, FELIX_MSG_CACHE_VALUE);
		m->u.cache_value.key = "k";
		m->u.cache_value.has_value = true;
		m->u.cache_value.value = B("v");
	} else if (IS("msg_cache_ok")) {
		felix_msg_init(m, FELIX_MSG_CACHE_OK);
		m->u.cache_ok.request_id = 3;
	} else if (IS("msg_cache_watch_key_retained")) {
		felix_msg_init(m, FELIX_MSG_CACHE_WATCH);
		SCOPE(m->u.cache_watch, "t1", "default");
		m->u.cache_watch.cache = "c1";
		m->u.cache_watch.key = "k";
		m->u.cache_watch.has_retained = true;
		m->u.cache_watch.retained = true;
	} else if (IS("msg_cache_watch_prefix")) {
		felix_msg_init(m, FELIX_MSG_CACHE_WATCH);
		SCOPE(m->u.cache_watch, "t1", "default");
		m->u.cache_watch.cache = "c1";
		m->u.cache_watch.prefix = "";
		m->u.cache_watch.has_shard = true;
		m->u.cache_watch.shard = 2;
		m->u.cache_watch.has_from_offset = true;
		m->u.cache_watch.from_offset = 7;
		m->u.cache_watch.has_retained = true;
		m->u.cache_watch.retained = false;
		m->u.cache_watch.has_subscription_id = true;
		m->u.cache_watch.subscription_id = 9;
	} else if (IS("msg_cache_watch_started")) {
		felix_msg_init(m, FELIX_MSG_CACHE_WATCH_STARTED);
		m->u.cache_watch_started.subscription_id = 9;
		m->u.cache_watch_started.resume_offset = 12;
		m->u.cache_watch_started.has_resnapshot = true;
		m->u.cache_watch_started.resnapshot = true;
		m->u.cache_watch_started.has_retained_count = true;
		m->u.cache_watch_started.retained_count = 0;
	} else if (IS("msg_cache_watch_started_plain")) {
		felix_msg_init(m, FELIX_MSG_CACHE_WATCH_STARTED);
		m->u.cache_watch_started.subscription_id = 9;
		m->u.cache_watch_started.resume_offset = 12;
	} else if (IS("msg_cache_event")) {
		felix_msg_init(m, FELIX_MSG_CACHE_EVENT);
		m->u.cache_event.key = "k";
		m->u.cache_event.has_value = true;
		m->u.cache_event.value = B("v");
		m->u.cache_event.offset = 4;
		m->u.cache_event.has_expires_at_millis = true;
		m->u.cache_event.expires_at_millis = 0;
	} else if (IS("msg_cache_event_delete")) {
		felix_msg_init(m, FELIX_MSG_CACHE_EVENT);
		m->u.cache_event.key = "k";
		m->u.cache_event.offset = 5;
	} else if (IS("msg_cache_watch_lagged")) {
		felix_msg_init(m, FELIX_MSG_CACHE_WATCH_LAGGED);
		m->u.cache_watch_lagged.resume_from = 7;
	} else if (IS("msg_counter_add")) {
		felix_msg_init(m, FELIX_MSG_COUNTER_ADD);
		SCOPE(m->u.counter_add, "t1", "default");
		m->u.counter_add.cache = "c1";
		m->u.counter_add.key = "ctr";
		m->u.counter_add.delta = INT64_MIN;
		m->u.counter_add.request_id = 7;
	} else if (IS("msg_counter_get")) {
		felix_msg_init(m, FELIX_MSG_COUNTER_GET);
		SCOPE(m->u.counter_get, "t1", "default");
		m->u.counter_get.cache = "c1";
		m->u.counter_get.key = "ctr";
		m->u.counter_get.request_id = 8;
	} else if (IS("msg_counter_value")) {
		felix_msg_init(m, FELIX_MSG_COUNTER_VALUE);
		m->u.counter_value.has_value = true;
		m->u.counter_value.value = 5;
		m->u.counter_value.request_id = 7;
	} else if (IS("msg_counter_value_absent")) {
		felix_msg_init(m, FELIX_MSG_COUNTER_VALUE);
		m->u.counter_value.request_id = 8;
	} else if (IS("msg_group_poll") || IS("msg_group_poll_no_wait")) {
		felix_msg_init(m, FELIX_MSG_GROUP_POLL);
		SCOPE(m->u.group_poll, "t1", "default");
		m->u.group_poll.stream = "s1";
		m->u.group_poll.group = "g1";
		m->u.group_poll.request_id = 9;
		if (IS("msg_group_poll")) {
			m->u.group_poll.max_records = 10;
			m->u.group_poll.has_wait_ms = true;
			m->u.group_poll.wait_ms = 100;
		} else {
			m->u.group_poll.shard = UINT32_MAX;
			m->u.group_poll.max_records = 32;
		}
	} else if (IS("msg_group_records")) {
		static struct felix_group_record recs[2];
		felix_msg_init(m, FELIX_MSG_GROUP_RECORDS);
		memset(recs, 0, sizeof recs);
		recs[0].offset = 3;
		recs[0].payload = B("a");
		recs[0].has_attempts = true;
		recs[0].attempts = 2;
		recs[1].offset = 4;
		m->u.group_records.records.items = recs;
		m->u.group_records.records.count = 2;
		m->u.group_records.request_id = 9;
	} else if (IS("msg_group_records_empty")) {
		felix_msg_init(m, FELIX_MSG_GROUP_RECORDS);
		m->u.group_records.request_id = 10;
	} else if (IS("msg_group_ack")) {
		settle(m, FELIX_MSG_GROUP_ACK);
	} else if (IS("msg_group_nack")) {
		settle(m, FELIX_MSG_GROUP_NACK);
	} else if (IS("msg_group_discard")) {
		settle(m, FELIX_MSG_GROUP_DISCARD);
	} else if (IS("msg_group_redrive")) {
		settle(m, FELIX_MSG_GROUP_REDRIVE);
	} else if (IS("msg_group_dead_letters")) {
		felix_msg_init(m, FELIX_MSG_GROUP_DEAD_LETTERS);
		SCOPE(m->u.group_dead_letters, "t1", "default");
		m->u.group_dead_letters.stream = "s1";
		m->u.group_dead_letters.shard = 1;
		m->u.group_dead_letters.group = "g1";
		m->u.group_dead_letters.request_id = 12;
	} else if (IS("msg_group_dead_letter_list")) {
		static uint64_t offsets[3] = {1, 2, U64MAX};
		felix_msg_init(m, FELIX_MSG_GROUP_DEAD_LETTER_LIST);
		m->u.group_dead_letter_list.offsets.items = offsets;
		m->u.group_dead_letter_list.offsets.count = 3;
		m->u.group_dead_letter_list.request_id = 12;
	} else if (IS("msg_stream_shards")) {
		felix_msg_init(m, FELIX_MSG_STREAM_SHARDS);
		SCOPE(m->u.stream_shards, "t1", "default");
		m->u.stream_shards.stream = "s1";
		m->u.stream_shards.request_id = 1;
	} else if (IS("msg_stream_shards_view")) {
		felix_msg_init(m, FELIX_MSG_STREAM_SHARDS_VIEW);
		m->u.stream_shards_view.shards = 8;
		m->u.stream_shards_view.request_id = 1;
	} else if (IS("msg_topology")) {
		felix_msg_init(m, FELIX_MSG_TOPOLOGY);
	} else if (IS("msg_topology_view")) {
		static struct felix_broker_endpoint brokers[2] = {
		    {"broker-a", "10.0.0.4:5000"},
		    {"broker-b", "10.0.0.5:5000"}};
		felix_msg_init(m, FELIX_MSG_TOPOLOGY_VIEW);
		m->u.topology_view.brokers.items = brokers;
		m->u.topology_view.brokers.count = 2;
	} else if (IS("msg_topology_view_empty")) {
		felix_msg_init(m, FELIX_MSG_TOPOLOGY_VIEW);
	} else if (IS("msg_not_leader")) {
		felix_msg_init(m, FELIX_MSG_NOT_LEADER);
		m->u.not_leader.node_id = "broker-b";
		m->u.not_leader.addr = "10.0.0.5:5000";
		m->u.not_leader.generation = 7;
	} else if (IS("msg_not_leader_no_addr")) {
		felix_msg_init(m, FELIX_MSG_NOT_LEADER);
		m->u.not_leader.node_id = "broker-b";
		m->u.not_leader.generation = 7;
	} else {
		return false;
	}
	return true;
#undef IS
}

/* ---- reading vector fields ---- */

/* An integer field; values above 2^63-1 are stored as decimal strings. */
static uint64_t jnum(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	assert_non_null(v);
	if (json_is_string(v)) {
		return strtoull(json_string_value(v), NULL, 10);
	}
	assert_true(json_is_integer(v));
	return (uint64_t)json_integer_value(v);
}

static const char *jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	assert_non_null(v);
	assert_true(json_is_string(v));
	return json_string_value(v);
}

/* payloads_utf8 or payloads_hex, as malloc'd views (free each data). */
static size_t jpayloads(const json_t *o, struct felix_view **out)
{
	const json_t *a = json_object_get(o, "payloads_utf8");
	bool hex = false;
	size_t i, n;
	if (a == NULL) {
		a = json_object_get(o, "payloads_hex");
		hex = true;
	}
	assert_non_null(a);
	n = json_array_size(a);
	*out = calloc(n + 1, sizeof **out);
	for (i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));
		assert_non_null(s);
		if (hex) {
			(*out)[i].data = ftu_unhex(s, &(*out)[i].len);
		} else {
			(*out)[i].len = strlen(s);
			(*out)[i].data = (uint8_t *)strdup(s);
		}
		assert_non_null((*out)[i].data);
	}
	return n;
}

static void free_views(struct felix_view *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((void *)v[i].data);
	}
	free(v);
}

static void assert_view_str(struct felix_view v, const char *s)
{
	assert_int_equal(v.len, strlen(s));
	assert_memory_equal(v.data, s, v.len);
}

static void assert_records(const struct felix_records *r,
                           const struct felix_view *want, size_t n)
{
	struct felix_records_iter it;
	struct felix_view v;
	size_t i = 0;
	assert_int_equal(r->count, n);
	felix_records_iter_init(&it, r);
	while (felix_records_next(&it, &v)) {
		assert_true(i < n);
		assert_int_equal(v.len, want[i].len);
		if (v.len > 0) {
			assert_memory_equal(v.data, want[i].data, v.len);
		}
		i++;
	}
	assert_int_equal(i, n);
}

static void check_json_vector(const char *name, const json_t *meta,
                              const struct felix_frame *f, const uint8_t *frame,
                              size_t frame_len)
{
	struct felix_msg got, want;
	struct felix_bytes scratch[8];
	struct wbuf b;
	char err[256] = "";
	int rc;

	assert_int_equal(f->kind, FELIX_FRAME_JSON);
	/* The payload is exactly payload_json. */
	assert_int_equal(f->header.length, strlen(jstr(meta, "payload_json")));
	assert_memory_equal(f->payload, jstr(meta, "payload_json"),
	                    f->header.length);

	rc = felix_msg_decode(f->payload, f->header.length, &got, err,
	                      sizeof err);
	if (rc != 0) {
		fail_msg("%s: decode failed: %s", name, err);
	}
	if (!expected_msg(name, &want, scratch)) {
		fail_msg("%s: no expected message for this vector", name);
	}
	if (!felix_msg_equal(&got, &want)) {
		fail_msg("%s: decoded fields differ from the expected ones",
		         name);
	}
	/* Encoding the expected fields gives exactly the frame ... */
	wbuf_init(&b);
	assert_int_equal(felix_msg_encode_frame(&want, &b), 0);
	if (b.len != frame_len || memcmp(b.data, frame, frame_len) != 0) {
		fail_msg("%s: encoded\n  %.*s\nexpected\n  %s", name,
		         (int)(b.len - 12), b.data + 12,
		         jstr(meta, "payload_json"));
	}
	/* ... and so does re-encoding what was decoded. */
	wbuf_reset(&b);
	assert_int_equal(felix_msg_encode(&got, &b), 0);
	assert_int_equal(b.len, f->header.length);
	assert_memory_equal(b.data, f->payload, b.len);
	wbuf_free(&b);
	felix_msg_free(&got);
}

static void check_publish_vector(const char *name, const json_t *meta,
                                 const struct felix_frame *f,
                                 const uint8_t *frame, size_t frame_len)
{
	struct felix_publish_batch pb;
	struct felix_view *want;
	struct wbuf b;
	char err[256] = "";
	size_t n = jpayloads(meta, &want);
	const json_t *key_hex = json_object_get(meta, "key_hex");
	const json_t *key_utf8 = json_object_get(meta, "key_utf8");
	bool acked = json_object_get(meta, "request_id") != NULL;

	assert_int_equal(f->kind, FELIX_FRAME_PUBLISH_BATCH);
	if (felix_publish_batch_decode(f->header.flags, f->payload,
	                               f->header.length, NULL, &pb, err,
	                               sizeof err) != 0) {
		fail_msg("%s: %s", name, err);
	}
	assert_int_equal(pb.acked, acked);
	if (acked) {
		uint64_t rid = 0;
		const char *mode = jstr(meta, "ack_mode");
		assert_int_equal(pb.request_id, jnum(meta, "request_id"));
		assert_int_equal(pb.ack_mode, strcmp(mode, "per_batch") == 0
		                                  ? FELIX_ACK_PER_BATCH
		                                  : FELIX_ACK_PER_MESSAGE);
		assert_int_equal(
		    felix_publish_batch_peek_request_id(
		        f->header.flags, f->payload, f->header.length, &rid),
		    0);
		assert_int_equal(rid, pb.request_id);
	}
	assert_int_equal(pb.keyed, key_hex != NULL || key_utf8 != NULL);
	if (key_hex != NULL) {
		size_t kl;
		uint8_t *k = ftu_unhex(json_string_value(key_hex), &kl);
		assert_int_equal(pb.key.len, kl);
		if (kl > 0) {
			assert_memory_equal(pb.key.data, k, kl);
		}
		free(k);
	} else if (key_utf8 != NULL) {
		assert_view_str(pb.key, json_string_value(key_utf8));
	}
	assert_view_str(pb.tenant_id, jstr(meta, "tenant_id"));
	assert_view_str(pb.namespace, jstr(meta, "namespace"));
	assert_view_str(pb.stream, jstr(meta, "stream"));
	assert_records(&pb.records, want, n);

	wbuf_init(&b);
	assert_int_equal(felix_publish_batch_encode(&b, &pb, want, (uint32_t)n),
	                 0);
	assert_int_equal(b.len, frame_len);
	assert_memory_equal(b.data, frame, frame_len);
	wbuf_free(&b);
	free_views(want, n);
}

static void check_ack_vector(const char *name, const json_t *meta,
                             const struct felix_frame *f, const uint8_t *frame,
                             size_t frame_len)
{
	struct felix_publish_ack a;
	struct wbuf b;
	char err[256] = "";
	const json_t *msg = json_object_get(meta, "message");
	const json_t *node = json_object_get(meta, "owner_node_id");

	assert_int_equal(f->kind, FELIX_FRAME_PUBLISH_ACK);
	if (felix_publish_ack_decode(f->header.flags, f->payload,
	                             f->header.length, &a, err,
	                             sizeof err) != 0) {
		fail_msg("%s: %s", name, err);
	}
	assert_int_equal(a.status, strcmp(jstr(meta, "status"), "ok") == 0
	                               ? FELIX_ACK_STATUS_OK
	                               : FELIX_ACK_STATUS_ERROR);
	assert_int_equal(a.request_id, jnum(meta, "request_id"));
	assert_view_str(a.message,
	                json_is_string(msg) ? json_string_value(msg) : "");
	assert_int_equal(a.has_owner, node != NULL);
	if (node != NULL) {
		const json_t *addr = json_object_get(meta, "owner_addr");
		assert_view_str(a.owner_node_id, json_string_value(node));
		assert_int_equal(a.has_owner_addr, json_is_string(addr));
		if (json_is_string(addr)) {
			assert_view_str(a.owner_addr, json_string_value(addr));
		}
		assert_int_equal(a.owner_generation,
		                 jnum(meta, "owner_generation"));
	}
	wbuf_init(&b);
	assert_int_equal(felix_publish_ack_encode(&b, &a), 0);
	assert_int_equal(b.len, frame_len);
	assert_memory_equal(b.data, frame, frame_len);
	wbuf_free(&b);
}

static void check_event_vector(const char *name, const json_t *meta,
                               const struct felix_frame *f,
                               const uint8_t *frame, size_t frame_len,
                               bool shared)
{
	struct felix_event_batch e;
	struct felix_view *want;
	struct wbuf b;
	char err[256] = "";
	size_t n = jpayloads(meta, &want);
	const json_t *base = json_object_get(meta, "base_offset");

	assert_int_equal(f->kind, shared ? FELIX_FRAME_EVENT_BATCH_SHARED
	                                 : FELIX_FRAME_EVENT_BATCH);
	if (felix_event_batch_decode(f->header.flags, f->payload,
	                             f->header.length, NULL, &e, err,
	                             sizeof err) != 0) {
		fail_msg("%s: %s", name, err);
	}
	assert_int_equal(e.shared, shared);
	if (!shared) {
		assert_int_equal(e.subscription_id,
		                 jnum(meta, "subscription_id"));
	}
	assert_int_equal(e.has_base_offset, base != NULL);
	if (base != NULL) {
		assert_int_equal(e.base_offset, jnum(meta, "base_offset"));
	}
	assert_records(&e.records, want, n);
	wbuf_init(&b);
	assert_int_equal(felix_event_batch_encode(&b, &e, want, (uint32_t)n),
	                 0);
	assert_int_equal(b.len, frame_len);
	assert_memory_equal(b.data, frame, frame_len);
	wbuf_free(&b);
	free_views(want, n);
}

static void check_vector(const char *dir, const char *file)
{
	char path[4096], name[256];
	size_t len = 0, hexlen = 0, frame_len = 0, need = 0;
	uint8_t *hex, *frame;
	json_error_t je;
	json_t *meta;
	struct felix_frame f;
	char err[256] = "";
	const char *kind;

	snprintf(name, sizeof name, "%.*s", (int)(strlen(file) - 5), file);
	snprintf(path, sizeof path, "%s/%s", dir, file);
	meta = json_load_file(path, 0, &je);
	if (meta == NULL) {
		fail_msg("%s: %s", path, je.text);
	}
	assert_string_equal(jstr(meta, "name"), name);
	snprintf(path, sizeof path, "%s/%s.hex", dir, name);
	hex = ftu_read_file(path, &len);
	assert_non_null(hex);
	frame = ftu_unhex((const char *)hex, &frame_len);
	assert_non_null(frame);
	/* The .hex file and frame_hex agree. */
	{
		uint8_t *fh = ftu_unhex(jstr(meta, "frame_hex"), &hexlen);
		assert_int_equal(hexlen, frame_len);
		assert_memory_equal(fh, frame, frame_len);
		free(fh);
	}
	if (felix_frame_decode(frame, frame_len,
	                       FELIX_FRAME_DEFAULT_MAX_PAYLOAD, &f, &need, err,
	                       sizeof err) != FELIX_FRAME_COMPLETE) {
		fail_msg("%s: frame: %s", name, err);
	}
	assert_int_equal(f.frame_len, frame_len);
	if (json_object_get(meta, "flags") != NULL) {
		assert_int_equal(f.header.flags, jnum(meta, "flags"));
	}
	kind =
	    json_object_get(meta, "kind") != NULL ? jstr(meta, "kind") : "json";
	if (json_object_get(meta, "payload_json") != NULL) {
		check_json_vector(name, meta, &f, frame, frame_len);
	} else if (strcmp(kind, "binary_publish_batch") == 0 ||
	           strcmp(kind, "binary_acked_publish_batch") == 0) {
		check_publish_vector(name, meta, &f, frame, frame_len);
	} else if (strcmp(kind, "binary_publish_ack") == 0) {
		check_ack_vector(name, meta, &f, frame, frame_len);
	} else if (strcmp(kind, "binary_event_batch") == 0) {
		check_event_vector(name, meta, &f, frame, frame_len, false);
	} else if (strcmp(kind, "binary_shared_event_batch") == 0) {
		check_event_vector(name, meta, &f, frame, frame_len, true);
	} else {
		fail_msg("%s: unknown vector kind %s", name, kind);
	}
	free(frame);
	free(hex);
	json_decref(meta);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Check every NAME.json in dir; returns how many. */
static size_t check_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char *names[1024];
	size_t n = 0, i;
	if (d == NULL) {
		fail_msg("cannot open vector directory %s", dir);
	}
	while ((e = readdir(d)) != NULL && n < 1024) {
		size_t l = strlen(e->d_name);
		if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
			names[n++] = strdup(e->d_name);
		}
	}
	closedir(d);
	qsort(names, n, sizeof names[0], cmp_str);
	for (i = 0; i < n; i++) {
		check_vector(dir, names[i]);
		free(names[i]);
	}
	return n;
}

static void test_shared_vectors(void **state)
{
	char dir[2048];
	ftu_shared_dir(dir, sizeof dir);
	/* 13 vectors in the shared set at the time of writing. */
	assert_true(check_dir(dir) >= 13);
}

static void test_own_vectors(void **state)
{
	char dir[2048];
	ftu_own_dir(dir, sizeof dir);
	assert_true(check_dir(dir) >= 80);
}

/* Every message type has at least one JSON vector across both sets. */
static void test_every_type_has_a_vector(void **state)
{
	bool seen[FELIX_MSG_TYPE_COUNT] = {false};
	const char *dirs[2];
	char d0[2048], d1[2048];
	int t;
	ftu_shared_dir(d0, sizeof d0);
	ftu_own_dir(d1, sizeof d1);
	dirs[0] = d0;
	dirs[1] = d1;
	for (int k = 0; k < 2; k++) {
		DIR *d = opendir(dirs[k]);
		struct dirent *e;
		assert_non_null(d);
		while ((e = readdir(d)) != NULL) {
			char name[256];
			struct felix_msg m;
			struct felix_bytes scratch[8];
			size_t l = strlen(e->d_name);
			if (l <= 5 || strcmp(e->d_name + l - 5, ".json") != 0) {
				continue;
			}
			snprintf(name, sizeof name, "%.*s", (int)(l - 5),
			         e->d_name);
			if (expected_msg(name, &m, scratch)) {
				seen[m.type] = true;
			}
		}
		closedir(d);
	}
	for (t = FELIX_MSG_NONE + 1; t < FELIX_MSG_TYPE_COUNT; t++) {
		if (!seen[t]) {
			fail_msg("no vector for %s",
			         felix_msg_type_name((enum felix_msg_type)t));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shared_vectors),
	    cmocka_unit_test(test_own_vectors),
	    cmocka_unit_test(test_every_type_has_a_vector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
