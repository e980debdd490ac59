/* The Felix half of liblodestone: a Felix v1 client over one QUIC
 * connection (client/quic_client.h), on the caller's libuv loop.
 *
 * A client owns one connection and, on it:
 *  - `request_streams` authenticated bidi streams that carry publishes
 *    (binary frames when the broker advertised them, JSON otherwise) and
 *    cache, counter and stream_shards requests, multiplexed by request_id.
 *    Publishes of one stream name always use the same stream, so awaited
 *    and pipelined publishes keep their order;
 *  - one bidi stream per subscription or cache watch (auth + request,
 *    finished after the answer) and the uni stream the broker opens for its
 *    events;
 *  - one bidi stream per long poll (group_poll with wait_ms > 0), so a
 *    parked poll holds no other answer back; other group requests, counters
 *    and idempotent publishes share the request streams;
 *  - raw streams for tests: bytes in, decoded frames out.
 *
 * Every call is asynchronous: callbacks run from the loop. There are no
 * request timeouts (as in the official client): felix_client_run() bounds a
 * wait for callers that need one. A callback's status is 0 or one of
 * FELIX_CLIENT_E*; `message` is the broker's text or a local reason.
 *
 * Ownership: the client owns everything it allocates; a subscription or raw
 * stream handle is valid until its end callback returned. Messages and
 * payload views given to callbacks are valid during the call only. */
#ifndef LS_CLIENT_FELIX_CLIENT_H
#define LS_CLIENT_FELIX_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "wire/felix_features.h"
#include "wire/felix_binary.h"
#include "wire/felix_frame.h"
#include "wire/felix_msg.h"

enum {
	FELIX_CLIENT_OK = 0,
	FELIX_CLIENT_EREFUSED = -1,     /* the broker answered with an error */
	FELIX_CLIENT_ECLOSED = -2,      /* the connection is gone */
	FELIX_CLIENT_EUNSUPPORTED = -3, /* the broker did not advertise it */
	FELIX_CLIENT_EINVAL = -4,
	FELIX_CLIENT_ENOMEM = -5,
	FELIX_CLIENT_EPROTO = -6, /* an answer that makes no sense */
};

struct felix_client;
struct felix_sub;
struct felix_raw;

struct felix_client_config {
	const char *host; /* numeric or resolvable */
	uint16_t port;
	const char *ca_file;     /* NULL: system trust */
	const char *server_name; /* NULL: host */
	bool offer_alpn;         /* offer felix/1 */
	const char *tenant;
	const char *token;
	bool negotiate;           /* send client_flags / client_features */
	uint16_t client_flags;    /* frame layouts we accept */
	uint32_t client_features; /* requests we serve (none) */
	unsigned request_streams; /* 1..64 */
};

/* Defaults: port 5000, ALPN offered, tenant "t1", token "dev",
 * negotiation on with client_flags 0x007F, one request stream. */
void felix_client_config_init(struct felix_client_config *cfg);

typedef void (*felix_client_ready_cb)(void *data, struct felix_client *c,
                                      int status, const char *message);
/* The connection ended (after ready): every pending request failed. */
typedef void (*felix_client_lost_cb)(void *data, struct felix_client *c,
                                     const char *message);

/* Connects and authenticates the request streams; `ready` runs once. On
 * failure to even start, returns -1 with a message and nothing to free;
 * otherwise the caller owns the client and closes it with
 * felix_client_close() exactly once, whatever `ready` said. */
int felix_client_open(struct felix_client **out, uv_loop_t *loop,
                      const struct felix_client_config *cfg,
                      felix_client_ready_cb ready, void *data, char *err,
                      size_t errlen);
void felix_client_on_lost(struct felix_client *c, felix_client_lost_cb cb);

/* What the broker advertised (auth_ok), or the frozen original set and no
 * features after a legacy `ok`. */
uint16_t felix_client_server_flags(const struct felix_client *c);
uint32_t felix_client_server_features(const struct felix_client *c);
bool felix_client_is_open(const struct felix_client *c);

/* Closes the connection; the client is freed once the transport let go
 * (run the loop). Pending callbacks run with FELIX_CLIENT_ECLOSED. */
void felix_client_close(struct felix_client *c);

/* Bytes written by the caller that wait for send buffer room (pace
 * pipelined publishes by it). */
size_t felix_client_backlog(const struct felix_client *c);

/* Runs `loop` until *done is true or `timeout_ms` passed (0 = no limit).
 * 0 when done, -1 on timeout. */
int felix_client_run(uv_loop_t *loop, const bool *done, unsigned timeout_ms);

/* ---- publish ---------------------------------------------------------- */

/* Publish acknowledged (status 0) or refused; not called for ACK_NONE. */
typedef void (*felix_client_ack_cb)(void *data, int status,
                                    const char *message);

/* Publishes `count` payloads as one batch to ns/stream of the client's
 * tenant; `key` (with `keyed`) routes it to a shard. */
int felix_client_publish(struct felix_client *c, const char *ns,
                         const char *stream, bool keyed, const uint8_t *key,
                         size_t klen, const struct felix_view *payloads,
                         uint32_t count, enum felix_ack_mode ack,
                         felix_client_ack_cb cb, void *data);

/* Sends a publish as JSON (publish_batch with request_id) whatever the
 * broker advertised: the compatibility path. */
int felix_client_publish_json(struct felix_client *c, const char *ns,
                              const char *stream, bool keyed,
                              const uint8_t *key, size_t klen,
                              const struct felix_view *payloads, uint32_t count,
                              enum felix_ack_mode ack, felix_client_ack_cb cb,
                              void *data);

/* ---- request / reply -------------------------------------------------- */

/* The answer: `reply` is the broker's message (cache_ok, cache_value,
 * counter_value, stream_shards_view, group_records, ...) on success, NULL
 * otherwise (except publish_refused, see felix_client_publish_idempotent). */
typedef void (*felix_client_reply_cb)(void *data, int status,
                                      const struct felix_msg *reply,
                                      const char *message);

int felix_client_cache_put(struct felix_client *c, const char *ns,
                           const char *cache, const char *key,
                           const uint8_t *value, size_t len, bool has_ttl,
                           uint64_t ttl_ms, felix_client_reply_cb cb,
                           void *data);
int felix_client_cache_get(struct felix_client *c, const char *ns,
                           const char *cache, const char *key,
                           felix_client_reply_cb cb, void *data);
/* EUNSUPPORTED unless the broker advertised FEATURE_CACHE_DELETE. */
int felix_client_cache_delete(struct felix_client *c, const char *ns,
                              const char *cache, const char *key,
                              felix_client_reply_cb cb, void *data);
/* EUNSUPPORTED unless the broker advertised FEATURE_COUNTERS. */
int felix_client_counter_add(struct felix_client *c, const char *ns,
                             const char *cache, const char *key, int64_t delta,
                             felix_client_reply_cb cb, void *data);
int felix_client_counter_get(struct felix_client *c, const char *ns,
                             const char *cache, const char *key,
                             felix_client_reply_cb cb, void *data);
/* EUNSUPPORTED unless the broker advertised FEATURE_STREAM_SHARDS. */
int felix_client_stream_shards(struct felix_client *c, const char *ns,
                               const char *stream, felix_client_reply_cb cb,
                               void *data);

/* ---- consumer groups --------------------------------------------------- */

/* group_poll: `reply` is group_records. wait_ms > 0 lets the broker hold
 * the poll that long (capped by the broker) for records to arrive.
 * EUNSUPPORTED unless the broker advertised FEATURE_CONSUMER_GROUP. */
int felix_client_group_poll(struct felix_client *c, const char *ns,
                            const char *stream, uint32_t shard,
                            const char *group, uint32_t max_records,
                            uint64_t wait_ms, felix_client_reply_cb cb,
                            void *data);
/* group_ack, group_nack (FEATURE_CONSUMER_GROUP), group_discard,
 * group_redrive (FEATURE_GROUP_DEAD_LETTERS) of one offset, by `type`
 * (FELIX_MSG_GROUP_ACK ...): `reply` is cache_ok. */
int felix_client_group_settle(struct felix_client *c, enum felix_msg_type type,
                              const char *ns, const char *stream,
                              uint32_t shard, const char *group,
                              uint64_t offset, felix_client_reply_cb cb,
                              void *data);
/* group_dead_letters: `reply` is group_dead_letter_list. */
int felix_client_group_dead_letters(struct felix_client *c, const char *ns,
                                    const char *stream, uint32_t shard,
                                    const char *group, felix_client_reply_cb cb,
                                    void *data);

/* ---- idempotent producers ---------------------------------------------- */

/* producer_init: `reply` is producer_init_ok. EUNSUPPORTED unless the
 * broker advertised FEATURE_IDEMPOTENT_PRODUCER. */
int felix_client_producer_init(struct felix_client *c, felix_client_reply_cb cb,
                               void *data);
/* publish_idempotent of one batch under (producer_id, sequence); the
 * sequence counts this producer's batches on the shard the key routes to
 * (unkeyed: shard 0) from 0. The callback gets status 0 with publish_ok,
 * or FELIX_CLIENT_EREFUSED with `reply` = publish_refused (whose reason
 * says what to do) or NULL (publish_error / error: re-send under the same
 * sequence). */
int felix_client_publish_idempotent(struct felix_client *c, const char *ns,
                                    const char *stream, bool keyed,
                                    const uint8_t *key, size_t klen,
                                    const struct felix_view *payloads,
                                    uint32_t count, uint64_t producer_id,
                                    uint64_t sequence, felix_client_reply_cb cb,
                                    void *data);

/* ---- subscriptions ---------------------------------------------------- */

/* The subscription is established (status 0, `answer` is subscribed) or
 * refused (`answer` is subscribe_cursor_error or error, or NULL). After a
 * refusal the handle is dead once the callback returns. */
typedef void (*felix_sub_started_cb)(void *data, struct felix_sub *sub,
                                     int status, const struct felix_msg *answer,
                                     const char *message);
/* One event batch: payloads[i] is at base_offset + i when has_offset. */
typedef void (*felix_sub_events_cb)(void *data, struct felix_sub *sub,
                                    bool has_offset, uint64_t base_offset,
                                    const struct felix_view *payloads,
                                    uint32_t count);
/* The event stream ended (finished, reset, or the connection closed);
 * the handle is dead once this returns. */
typedef void (*felix_sub_ended_cb)(void *data, struct felix_sub *sub,
                                   const char *why);

struct felix_sub_handlers {
	felix_sub_started_cb started;
	felix_sub_events_cb events;
	felix_sub_ended_cb ended;
};

int felix_client_subscribe(struct felix_client *c, const char *ns,
                           const char *stream, uint32_t shard,
                           const struct felix_start *start,
                           const struct felix_sub_handlers *h, void *data,
                           struct felix_sub **out);
uint64_t felix_sub_id(const struct felix_sub *sub);
/* A paused subscription stops opening its flow-control window: the broker
 * is held back (and drops what its queue cannot hold). */
void felix_sub_set_paused(struct felix_sub *sub, bool paused);
/* Stops the event stream (STOP_SENDING); `ended` follows. */
void felix_sub_close(struct felix_sub *sub);

/* ---- cache watches ---------------------------------------------------- */

/* What a cache_watch asks for: exactly one of key and prefix (the broker
 * refuses both or neither); shard for a prefix watch; from_offset to
 * resume; retained for the current values first. */
struct felix_watch_request {
	const char *key;
	const char *prefix;
	bool has_shard;
	uint32_t shard;
	bool has_from_offset;
	uint64_t from_offset;
	bool retained;
};

/* One change: `value` NULL means the key was deleted. */
typedef void (*felix_watch_change_cb)(void *data, struct felix_sub *sub,
                                      const char *key, const uint8_t *value,
                                      size_t len, uint64_t offset,
                                      uint64_t expires_at_millis);
/* The watch fell behind: re-watch with from_offset = resume_from. The
 * event stream ends next. */
typedef void (*felix_watch_lagged_cb)(void *data, struct felix_sub *sub,
                                      uint64_t resume_from);

struct felix_watch_handlers {
	/* `answer`: cache_watch_started on success; error or
	 * subscribe_cursor_error (or NULL) on a refusal. */
	felix_sub_started_cb started;
	felix_watch_change_cb change;
	felix_watch_lagged_cb lagged;
	felix_sub_ended_cb ended;
};

/* EUNSUPPORTED unless the broker advertised FEATURE_CACHE_WATCH (and
 * FEATURE_CACHE_WATCH_RETAINED for a retained watch). The handle works
 * with felix_sub_id / felix_sub_set_paused / felix_sub_close. */
int felix_client_watch(struct felix_client *c, const char *ns,
                       const char *cache, const struct felix_watch_request *w,
                       const struct felix_watch_handlers *h, void *data,
                       struct felix_sub **out);

/* ---- raw streams (tests) ---------------------------------------------- */

/* One frame as received (payload valid during the call), or the end. */
typedef void (*felix_raw_frame_cb)(void *data, struct felix_raw *raw,
                                   uint16_t flags, const uint8_t *payload,
                                   uint32_t len);
typedef void (*felix_raw_end_cb)(void *data, struct felix_raw *raw,
                                 const char *why);

/* Opens a bidi stream; with `auth`, the client's auth frame is sent first
 * (its answer arrives as a frame like any other). */
int felix_client_raw_open(struct felix_client *c, bool auth,
                          felix_raw_frame_cb frame, felix_raw_end_cb end,
                          void *data, struct felix_raw **out);
/* Sends bytes as they are (copied); `fin` finishes our side. */
int felix_raw_send(struct felix_raw *raw, const void *bytes, size_t len,
                   bool fin);

#endif
