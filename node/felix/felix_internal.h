/* Shared by the Felix broker's modules only: felix_server.c (connections,
 * streams, the reply queue and the plain requests), felix_pubsub.c
 * (subscriptions, cache watches and their fan-out), felix_group.c
 * (consumer groups) and felix_produce.c (idempotent producers). */
#ifndef LS_NODE_FELIX_INTERNAL_H
#define LS_NODE_FELIX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "net/quic.h"
#include "node/felix/felix_auth.h"
#include "node/felix/felix_server.h"
#include "node/felix/hmap.h"
#include "node/admin/admin.h"
#include "node/felix/quic_server.h"
#include "store/command.h"
#include "store/result.h"
#include "wire/buf.h"
#include "wire/felix_binary.h"
#include "wire/felix_msg.h"

struct fconn;
struct fstream;
struct fsub;
struct freq;
struct gwait;
struct scope_info;

/* What a request (struct freq, below) is; also the opcode label of the
 * per-type metrics (felix_server.c). */
enum req_kind {
	REQ_REPLY = 0, /* an answer known at once */
	REQ_LOOKUP,    /* a scope lookup (not in the reply queue) */
	REQ_PUBLISH,   /* binary or JSON publish */
	REQ_CACHE_PUT,
	REQ_CACHE_GET,
	REQ_CACHE_DELETE,
	REQ_COUNTER_ADD,
	REQ_COUNTER_GET,
	REQ_SUBSCRIBE,
	REQ_WATCH,
	REQ_GROUP_POLL,
	REQ_GROUP_SETTLE,
	REQ_GROUP_DEAD,
	REQ_IDEMPOTENT,
	REQ_KIND_COUNT
};

struct felix_metrics {
	struct metric *json_publish;       /* frame="publish" */
	struct metric *json_publish_batch; /* frame="publish_batch" */
	struct metric *connections;        /* gauge */
	struct metric *streams;            /* gauge */
	struct metric *subscriptions;      /* gauge */
	struct metric *publish_frames;
	struct metric *publish_records;
	struct metric *publish_errors;
	struct metric *events_sent;
	struct metric *events_dropped;
	struct metric *queue_bytes; /* gauge: subscriber queues, all */
	struct metric *auth_failures;
	struct metric *protocol_errors;
	struct metric *requests;
	struct metric *watches;       /* gauge: cache watches */
	struct metric *watch_events;  /* cache_event frames sent */
	struct metric *watch_lagged;  /* watches ended by cache_watch_lagged */
	struct metric *group_polls;   /* polls proposed */
	struct metric *group_records; /* records handed out */
	struct metric *group_parked;  /* gauge: long polls waiting */
	struct metric *idem_duplicates; /* publish_idempotent duplicates */
	struct metric *idem_refused;    /* publish_refused answers */
	struct metric *redirects;       /* not_leader answers */
	struct metric *owner_acks;      /* binary acks naming the owner */
	/* Per request kind, rendered by a collector: requests received and
	 * their latency from arrival to the reply handed to the stream. */
	uint64_t kind_requests[REQ_KIND_COUNT];
	struct metric_hist kind_latency[REQ_KIND_COUNT];
};

struct felix_server {
	uv_loop_t *loop;
	struct metrics *metrics; /* the node's; our collector is in it */
	struct shards *shards;
	struct scopes *scopes;
	const struct log *log;
	struct felix_server_config cfg;
	char host[256];
	char cert[1100];
	char key[1100];
	struct felix_auth auth;
	struct quic_server qs;
	bool qs_started;
	bool closing;
	struct fconn *conns; /* list */
	size_t n_conns;
	uv_timer_t sweep; /* auth deadlines; sweep.data = this */
	uv_idle_t pump;   /* catch-up reads; pump.data = this */
	uv_timer_t gwake; /* parked group polls; gwake.data = this */
	bool pumping;
	int open_handles;
	struct hmap topics;     /* kind + scope + shard -> struct ftopic */
	struct fsub *pump_head; /* subscriptions and watches catching up */
	uint64_t next_sub_id;
	size_t queue_bytes;
	unsigned hreads;     /* history pages being read on the thread
	                        pool; closing waits for them */
	struct gwait *waits; /* long polls (felix_group.c) */
	size_t n_parked;
	struct felix_metrics m;
	felix_server_close_cb close_cb;
	void *close_data;
};

struct fconn {
	struct felix_server *srv;
	struct quic_conn *qc;
	struct fconn *prev, *next;
	struct fstream *streams; /* client-opened bidi streams */
	struct fsub *subs;       /* subscriptions and watches on this conn */
	uint32_t auth_failures;  /* auth refused on its streams */
	bool closing;
};

/* A client-opened bidirectional stream: one session. */
struct fstream {
	struct fconn *conn;
	int64_t id;
	struct fstream *prev, *next;
	uint64_t opened_ms;
	bool authed;
	bool dead;     /* stopped reading (protocol error or auth refused) */
	bool peer_fin; /* the client finished its side */
	bool fin_sent;
	bool in_process;
	bool blocked; /* waiting for a scope lookup */
	int lookup_failed;
	struct freq *lookup; /* the lookup in flight, if any */
	char tenant[256];
	/* Owned: the session's permissions (JWT mode); NULL allows all. */
	struct felix_grants *grants;
	uint16_t send_flags;      /* layouts we may send this client */
	uint32_t client_features; /* what the client understands */
	struct wbuf rx;           /* received bytes */
	size_t rx_off;            /* first unprocessed byte */
	size_t unconsumed;        /* delivered, flow control not yet opened */
	struct freq *head, *tail; /* replies, in request order */
	unsigned inflight;
	size_t out_bytes; /* reply bytes queued here (not yet in QUIC) */
};

/* ---- requests (felix_server.c) ------------------------------------------ */

/* One request of a stream. Owned by the stream's reply queue while the
 * stream lives; when the stream closes first, `st` becomes NULL and the
 * pending callback frees it (or `abandon`, for a request that has no
 * callback pending, e.g. a parked long poll). */
struct freq {
	struct freq *next;
	struct fstream *st;
	struct felix_server *srv;
	enum req_kind kind;
	bool done;
	uint64_t t0_ns; /* received at (uv_hrtime), for the latency */
	uint8_t *out;   /* reply frames, malloc'd */
	size_t out_len;
	/* publish */
	bool binary; /* reply with a binary ack */
	enum felix_ack_mode ack;
	bool has_request_id;
	uint64_t request_id;
	uint32_t records;
	bool forwarded; /* proposed through another node */
	/* reads, subscribe, groups, watches */
	struct felix_msg msg; /* decoded JSON request, owned */
	char *scope;          /* "tenant/ns/name", owned */
	size_t scope_len;
	uint32_t group;
	uint32_t shard;
	bool offsets;
	/* Called by the stream's teardown for a request not done whose
	 * completion is not already pending elsewhere; NULL otherwise. */
	void (*abandon)(struct freq *r);
	void *ext; /* the owning module's state (e.g. struct gwait) */
};

struct freq *freq_new(struct fstream *st, enum req_kind kind);
void freq_free(struct freq *r);
/* Appends a request to the stream's reply queue. */
void freq_enqueue(struct fstream *st, struct freq *r);
/* The request's answer is `w` (taken; may be NULL for none). Frees the
 * request when its stream is gone. */
void freq_complete(struct freq *r, struct wbuf *w);
/* Completes with one JSON message / an error message. */
void freq_reply_msg(struct freq *r, const struct felix_msg *m);
void freq_error(struct freq *r, const char *message);
/* Takes a copy of the scope name into the request. 0 or -1 (no memory). */
int freq_set_scope(struct freq *r, const struct scope_info *info);

/* Answers known at once, queued in request order. */
void fstream_reply_msg(struct fstream *st, const struct felix_msg *m);
void fstream_reply_error(struct fstream *st, const char *message);
/* Queues encoded frames `w` (taken). */
void fstream_reply_frames(struct fstream *st, struct wbuf *w);

/* Scope resolution for a request: FOUND fills *info; ABSENT means reply
 * not-found (msg says so); BLOCKED means a lookup is running and the frame
 * will be read again; FAILED is a lookup failure to report (msg). */
enum { RES_FOUND = 0, RES_ABSENT, RES_BLOCKED, RES_FAILED };
int fstream_resolve(struct fstream *st, uint8_t kind, const char *t,
                    const char *ns, const char *name, struct scope_info *info,
                    char *msg, size_t msglen);
/* Whether `t` is the session's tenant; else fills an "unauthorized"
 * message. */
bool fstream_tenant_ok(struct fstream *st, const char *t, char *msg,
                       size_t msglen);

/* Text for a shard failure, as a client should read it. */
const char *felix_shards_message(int status);
/* The message of an error result ("ERR " stripped) or a fallback. */
void felix_result_message(const struct store_result *r, char *msg, size_t len,
                          const char *fallback);
/* Whether this node leads `group`: 0, or -1 with a "not leader" message
 * naming the leader (and its client address) when one is known. `what`
 * names the shard for the message. */
int felix_leader_check(struct felix_server *s, uint32_t group, const char *what,
                       char *msg, size_t msglen);
/* Whether this node leads `group`: 0. Otherwise -1 with the answer for
 * the stream's client encoded into `w`: not_leader{node_id, addr,
 * generation} when the client offered FEATURE_REDIRECT and the leader is
 * known, else an error naming the leader as felix_leader_check does. */
int felix_leader_answer(struct fstream *st, uint32_t group, const char *what,
                        struct wbuf *w);
/* Whether this node is one of several (topology and redirects are
 * served). */
bool felix_is_cluster(struct felix_server *s);

/* ---- subscriptions and cache watches (felix_pubsub.c) ------------------- */

/* Starts a subscription on `conn` for scope shard (group, scope, shard)
 * from offset `next` (tail = live at once): opens the uni stream, writes
 * event_stream_hello and registers. Returns 0 with the id, or -1 with the
 * message for the client. Call on the reactor after the read barrier, so
 * history read from the store and live appends join without gap. */
int pubsub_subscribe(struct felix_server *s, struct fconn *conn, uint32_t group,
                     const char *scope, size_t scope_len, uint32_t shard,
                     uint64_t next, uint64_t tail, bool offsets, uint64_t *id,
                     char *err, size_t errlen);

/* Handles cache_watch (the message is taken into the request when it is
 * accepted); false when the stream is blocked on a scope lookup. */
bool pubsub_handle_watch(struct fstream *st, struct felix_msg *m);

/* Quic callbacks for the uni streams (return false when `sid` is not a
 * subscription's or watch's stream). */
bool pubsub_stream_writable(struct felix_server *s, struct fconn *conn,
                            int64_t sid);
bool pubsub_stream_close(struct felix_server *s, struct fconn *conn,
                         int64_t sid);
/* Ends every subscription and watch of a closing connection. */
void pubsub_conn_closed(struct felix_server *s, struct fconn *conn);

/* The store observer's callbacks. */
void pubsub_on_append(struct felix_server *s, struct store_slice scope,
                      uint32_t shard, uint64_t base,
                      const struct store_list *records);
void pubsub_on_cache_change(struct felix_server *s, struct store_slice scope,
                            uint32_t shard, uint64_t offset,
                            struct store_slice key,
                            const struct store_slice *value,
                            uint64_t expires_at);

/* A snapshot replaced group `group`'s state here: live subscriptions and
 * watches on it missed the changes it covers. */
void pubsub_on_imported(struct felix_server *s, uint32_t group);
void pubsub_init(struct felix_server *s);
void pubsub_free(struct felix_server *s);
/* The close callback runs once nothing is left (history reads included). */
void felix_server_maybe_closed(struct felix_server *s);

/* ---- consumer groups (felix_group.c) ------------------------------------ */

/* group_poll, group_ack, group_nack, group_discard, group_redrive and
 * group_dead_letters; false when blocked on a scope lookup. */
bool group_handle(struct fstream *st, struct felix_msg *m);
/* The store observer's stream callback: wakes long polls on the shard. */
void group_on_append(struct felix_server *s, struct store_slice scope,
                     uint32_t shard);
/* Answers nobody and frees every long poll (server teardown). */
void group_free(struct felix_server *s);

/* ---- idempotent producers (felix_produce.c) ----------------------------- */

/* producer_init and publish_idempotent; false when blocked. */
bool produce_handle(struct fstream *st, struct felix_msg *m);

#endif
