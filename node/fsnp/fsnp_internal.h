/* Internals shared by the FSNP server's modules (not a public header):
 *   fsnp_server.c  listener, global budgets, leader waits, FOC waiters,
 *                  events, drain;
 *   fsnp_conn.c    one connection: receive loop, chunks, lanes and their
 *                  ordered replies, coalesced writes;
 *   fsnp_exec.c    one request: dispatch, store operations, replies;
 *   fsnp_control.c control opcodes and the capability manifest;
 *   fsnp_flow.c    FerricFlow requests: encoding, routing, fan-out,
 *                  batches split per group, block_ms waits.
 *   fsnp_acl.c     ACL users: AUTH, the check before a command runs, the
 *                  ACL command, invalidated sessions.
 *
 * Lifetimes. A connection owns its lanes and the requests queued on them.
 * A request lives from its frame until its reply has been queued for
 * writing (or dropped: no-reply, connection gone). When the connection
 * closes first, requests still executing are orphaned (conn = NULL) and
 * freed by whatever finishes them last. The server outlives every
 * request: it is freed only once no store operation is outstanding. */
#ifndef LS_NODE_FSNP_INTERNAL_H
#define LS_NODE_FSNP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/auth/auth.h"
#include "node/config.h"
#include "node/fsnp/fsnp_cmd.h"
#include "node/fsnp/fsnp_server.h"
#include "net/tls.h"
#include "node/log.h"
#include "node/admin/admin.h"
#include "node/shards.h"
#include "wire/buf.h"
#include "wire/fsnp_chunk.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_value.h"

struct fsnp_conn;
struct fsnp_req;

/* Compact reply codecs a connection asked for (and we serve). */
enum {
	FSNP_CODEC_KV_GET = 1u << 0,
	FSNP_CODEC_KV_MGET = 1u << 1,
	FSNP_CODEC_OK_LIST = 1u << 2,
	FSNP_CODEC_FLOW_QUERY = 1u << 3, /* flow_query_result_v1 (0xA0) */
};

/* Events a connection may subscribe to. */
enum {
	FSNP_EV_GOAWAY = 1u << 0,
	FSNP_EV_TOPOLOGY = 1u << 1,
	FSNP_EV_BACKPRESSURE = 1u << 2,
	FSNP_EV_AUTH_INVALIDATED = 1u << 3,
	FSNP_EV_FLOW_WAKE = 1u << 4, /* a Flow write through this node */
};

/* How long a request waits for a shard to elect a leader before it is
 * answered "reroute" (a deadline_ms that comes sooner wins). */
#define FSNP_LEADER_WAIT_MS 5000u
/* Pseudo status for an op whose request deadline passed while it waited
 * for a leader (never a SHARDS_* value). */
#define FSNP_OP_DEADLINE (-1)
/* busy replies tell clients to come back after this long. */
#define FSNP_RETRY_AFTER_MS 100u
/* Bodies at least this large are compressed on zlib connections. */
#define FSNP_COMPRESS_MIN 256u
/* Freed requests kept for reuse, and the largest reply buffer a pooled
 * request keeps. Sanitizer builds pool nothing (FSNP_POOLING 0), so that
 * a use after free is still caught. */
#ifndef FSNP_POOLING /* -DFSNP_POOLING=1 pools under a sanitizer too */
#if defined(__SANITIZE_ADDRESS__)
#define FSNP_POOLING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FSNP_POOLING 0
#endif
#endif
#endif
#ifndef FSNP_POOLING
#define FSNP_POOLING 1
#endif
#define FSNP_REQ_POOL_MAX 4096u
#define FSNP_REQ_POOL_REPLY_MAX 1024u
/* Output segments kept for reuse: a connection fills one or more per loop
 * turn, and malloc consolidates its heap for every block of 1 KiB or more
 * (or every free that leaves 64 KiB together). The first segment of a
 * turn is small, later ones large. */
#define FSNP_SEG_SMALL 4096u
#define FSNP_SEG_SIZE 65536u
#define FSNP_SEG_SMALL_POOL_MAX 256u
#define FSNP_SEG_POOL_MAX 32u

/* One store operation of a request: a part of its plan, run on one group
 * (possibly after waiting for a leader). */
struct fsnp_op {
	struct fsnp_req *req;
	uint32_t part;
	struct fsnp_op *next; /* leader-wait queue */
	uint64_t since_ms;    /* queued for a leader since */
};

/* A part's outcome, kept when several parts merge into one reply. */
struct fsnp_res {
	int status;    /* SHARDS_* */
	uint8_t *data; /* owned store result */
	size_t len;
};

struct fsnp_lane {
	uint32_t id;
	struct fsnp_req *head, *tail; /* FIFO in arrival order */
	uint32_t queued;              /* requests in the FIFO */
	uint32_t inflight;            /* of them, executing */
};

struct fsnp_req {
	struct fsnp_server *srv;
	struct fsnp_conn *conn;  /* NULL once orphaned; NULL for items */
	struct fsnp_lane *lane;  /* NULL for PIPELINE items */
	struct fsnp_req *next;   /* lane FIFO */
	struct fsnp_req *parent; /* PIPELINE item: its pipeline */
	uint32_t index;          /* position in the pipeline */
	uint32_t lane_id;
	uint16_t opcode;
	uint64_t request_id;
	uint64_t deadline_ms;
	bool no_reply;
	bool done;
	bool counted;     /* holds an execution slot */
	bool slot_lent;   /* parked waiter: its global execution slot is
	                     given back until it polls again */
	bool custom;      /* reply is a compact payload (flag 0x02) */
	bool close_after; /* QUIT */
	bool waiting;     /* parked as a fetch-or-compute waiter */
	bool trace;       /* traced (flag 0x01 with fsnp-trace on) */
	uint64_t t0_ns;   /* received at (uv_hrtime), for traces */
	uint32_t pending; /* operations or items not finished */
	uint16_t status;
	struct wbuf reply; /* u16 status + value (or compact payload) */
	size_t footprint;  /* bytes charged to the session budget */

	/* KV (and `plan`, last) */
	struct fsnp_op *ops;  /* plan.n_parts, owned, or &op1 */
	struct fsnp_op op1;   /* a single-part plan's operation */
	struct fsnp_res *res; /* multi-part plans, owned */

	/* PIPELINE */
	struct fsnp_req **items; /* owned, each item owned */
	uint32_t n_items;
	uint8_t pipe_format; /* FSNP_PIPE_* */

	/* fetch-or-compute waiter */
	struct fsnp_req *wnext;
	uint64_t next_poll_ms;
	uint64_t poll_every_ms;
	bool polling;

	/* FerricFlow request state (fsnp_flow.c), owned; NULL otherwise. */
	struct fsnp_flow *flow;

	/* Last: its command storage (plan.one_cmd), at the very end, is
	 * not cleared when a pooled request is reused. */
	struct fsnp_plan plan;
};

enum {
	FSNP_PIPE_MAPS = 0,
	FSNP_PIPE_PAIRS,
	FSNP_PIPE_VALUES,
};

/* A run of bytes waiting to be written, or being written. */
struct fsnp_seg {
	uint8_t *data; /* owned */
	size_t len, cap;
};

struct fsnp_conn {
	struct fsnp_server *srv;
	uv_tcp_t tcp;                  /* tcp.data = this */
	struct fsnp_conn *prev, *next; /* server's list */
	struct fsnp_conn *dnext;       /* server's dirty list */
	bool dirty;
	/* TLS session (NULL on the plaintext listener), owned: socket reads
	 * are fed into it and decrypted into rbuf; queued output is encrypted
	 * when it is flushed. */
	struct tls_session *tls;
	bool tls_bye; /* close_notify queued: close once it is written */
	uint64_t id;
	char peer[80];
	char name[129];
	char user[ACL_NAME_MAX + 1]; /* authenticated as ("" before) */
	uint64_t created_ms;
	uint64_t opened_ms; /* loop clock at accept (the auth deadline) */
	uint64_t last_rx_ms;
	bool remote; /* the peer is not on a loopback address */

	/* receive */
	uint8_t *rbuf; /* owned */
	size_t rlen, rcap, roff;
	bool reading;    /* uv_read_start active */
	bool in_process; /* inside conn_process */
	bool stalled;    /* frames left unprocessed (a lane was full) */
	struct fsnp_chunk_asm chunks;
	/* Chunk streams already answered with an error: their remaining
	 * chunks are dropped silently up to the final one. */
	struct fsnp_poisoned {
		uint32_t lane;
		uint16_t opcode;
		uint64_t request_id;
	} * poisoned; /* owned */
	size_t n_poisoned, cap_poisoned;

	/* send */
	struct fsnp_seg *pend; /* queued, not yet handed to uv_write */
	size_t n_pend, cap_pend;
	struct fsnp_seg *flight; /* handed to uv_write */
	size_t n_flight, cap_flight;
	uv_write_t wreq; /* wreq.data = this */
	bool writing;
	size_t out_bytes;   /* pend + flight (plaintext bytes) */
	size_t flight_acct; /* of out_bytes, handed to the write in flight */
	uint64_t write_started_ms;

	/* lanes: open addressing by id */
	struct fsnp_lane **lanes;
	uint32_t lane_cap, n_lanes;
	uint32_t queued;   /* requests in all FIFOs */
	uint32_t inflight; /* executing requests */

	/* session */
	bool authenticated;
	uint32_t auth_failures; /* AUTH answered WRONGPASS, never reset */
	bool zlib;
	bool compact_flow_responses;
	uint32_t codecs; /* FSNP_CODEC_* */
	uint32_t events; /* FSNP_EV_* */
	uint32_t max_frame;
	uint64_t max_inflight_conn;
	uint64_t max_inflight_lane;

	bool closing;  /* uv_close issued */
	bool draining; /* GOAWAY sent: no new requests */
	bool quit;     /* QUIT answered: close once written */
};

/* Requests waiting for a group's leader, in arrival order. */
struct fsnp_gwait {
	struct fsnp_op *head, *tail;
};

/* Per-opcode metric slots: the opcode table's entries, then one for
 * unknown opcodes (the table has fewer than FSNP_METRIC_OPS entries). */
#define FSNP_METRIC_OPS 192
#define FSNP_METRIC_STATUSES 8

struct fsnp_server {
	uv_loop_t *loop;
	fsnp_server_flow_write_cb on_flow_write; /* may be NULL */
	void *on_flow_write_data;
	struct shards *shards;
	const struct log *log;
	struct config_native lim;
	char advertise_host[CONFIG_HOST_MAX];
	uint16_t port;
	uint16_t advertise_port;
	uint16_t advertise_tls_port;
	char tls_cert[CONFIG_PATH_MAX]; /* reported by OPTIONS */
	char tls_key[CONFIG_PATH_MAX];
	uint64_t node_id;
	unsigned data_groups;
	struct scan_cursors *scan_cursors; /* borrowed; may be NULL */

	uv_tcp_t listener; /* listener.data = this */
	/* TLS listener (lim.tls_enabled with a certificate). */
	uv_tcp_t tls_listener;   /* tls_listener.data = this */
	struct tls_ctx *tls_ctx; /* owned; NULL: no TLS listener */
	uint16_t tls_port;       /* bound TLS port */
	bool tls_listening;
	uv_check_t flush; /* flush.data = this; writes out dirty conns */
	uv_idle_t wake;   /* keeps the loop from blocking while dirty */
	uv_timer_t sweep; /* timeouts, events */
	uv_timer_t tick;  /* leader waits and fetch-or-compute polls */
	uv_timer_t grace; /* drain deadline */
	int handles;      /* open handles */
	bool listening;

	struct fsnp_conn *conns; /* list */
	size_t n_conns;
	struct fsnp_conn *dirty; /* conns with output to write */
	uint64_t next_client_id;

	/* global budgets */
	uint64_t executions;
	uint64_t lanes;
	uint64_t blocking;
	uint64_t inbound_bytes;
	uint64_t session_bytes;
	uint64_t outbound_bytes;
	uint64_t ops_outstanding; /* handed to shards, not called back */

	struct fsnp_gwait *gwait; /* by group, data_groups + 1 */
	uint32_t n_waiting;       /* ops in gwait */
	struct fsnp_req *foc;     /* fetch-or-compute waiters */
	bool tick_running;

	/* Freed requests kept for reuse (linked by `next`), each with its
	 * reply buffer's storage: a GET then allocates no request and no
	 * reply. Owned; at most FSNP_REQ_POOL_MAX. */
	struct fsnp_req *req_pool;
	uint32_t n_req_pool;
	/* Scratch for compact replies, swapped with a request's reply
	 * (owned). */
	struct wbuf compact_out;
	/* Free output segments of FSNP_SEG_SMALL and FSNP_SEG_SIZE bytes
	 * (owned). */
	uint8_t *seg_small_pool[FSNP_SEG_SMALL_POOL_MAX];
	uint32_t n_seg_small_pool;
	uint8_t *seg_pool[FSNP_SEG_POOL_MAX];
	uint32_t n_seg_pool;

	uint64_t route_epoch;
	bool pressure; /* last BACKPRESSURE state sent */
	uint64_t refusal_logged_ms;
	uint8_t rng[16]; /* token counter state */
	uint64_t token_seq;

	bool draining;
	bool closed; /* close callback done */
	fsnp_server_close_cb close_cb;
	/* The close callback is running: what it closes may complete the
	 * last outstanding ops, and freeing the server then would pull it
	 * from under handle_closed. */
	bool in_close_cb;
	void *close_data;
	uint64_t grace_ms;

	/* ACL users: this node's copy of the meta group's (fsnp_acl.c). */
	struct acl_table acl;
	bool acl_loaded;
	bool acl_reading; /* an ACL_LIST read in flight */
	bool acl_again;   /* read again when it answers */
	uint64_t acl_next_ms;
	uint8_t *acl_last; /* the last ACL_LIST result loaded (owned) */
	size_t acl_last_len;
	uint64_t acl_denied_logged_ms;
	uint64_t auth_closed_logged_ms; /* last close for failed AUTHs */

	struct fsnp_server_stats stats;
	struct metrics *metrics; /* the node's series (NULL: none) */
	struct metric *m_conns, *m_conns_total, *m_requests, *m_busy,
	    *m_bytes_in, *m_bytes_out, *m_flow_compact, *m_flow_compact_replies,
	    *m_flow_query_compact;
	/* lodestone_fsnp_errors_total by status (index: the status; 0, OK,
	 * unused). */
	struct metric *m_errors[FSNP_METRIC_STATUSES];
	/* Per opcode, rendered by a collector (index: the opcode table's,
	 * fsnp_metric_slot): top-level requests received and their latency
	 * from arrival to the reply. */
	uint64_t op_requests[FSNP_METRIC_OPS];
	struct metric_hist op_latency[FSNP_METRIC_OPS];
};

/* The per-opcode metrics slot of `opcode`: its index in the opcode table,
 * or the last slot for unknown opcodes. */
unsigned fsnp_metric_slot(uint16_t opcode);

/* --- fsnp_server.c ----------------------------------------------------- */

uint64_t fsnp_now_ms(const struct fsnp_server *s);
/* Queues the conn for the end-of-turn flush. */
void fsnp_server_mark_dirty(struct fsnp_server *s, struct fsnp_conn *c);
/* Runs op (a part of a request) on its group, waiting for a leader when
 * none is known yet. Completes the op through fsnp_exec_op_done. */
void fsnp_server_submit(struct fsnp_server *s, struct fsnp_op *op);
/* Fetch-or-compute: park a request whose lease another holds; wake the
 * waiters of `key` with the owner's value or error. */
void fsnp_server_foc_park(struct fsnp_server *s, struct fsnp_req *r);
void fsnp_server_foc_finish(struct fsnp_server *s, const uint8_t *key,
                            size_t klen, bool ok, const uint8_t *value,
                            size_t vlen);
/* A fresh 32-hex-digit lease token. */
void fsnp_server_token(struct fsnp_server *s, char out[33]);
/* Current route epoch (hash of shard count and known leaders). */
uint64_t fsnp_server_route_epoch(struct fsnp_server *s);
bool fsnp_server_pressure(const struct fsnp_server *s);
/* A connection closed: drop it from the list. */
void fsnp_server_conn_gone(struct fsnp_server *s, struct fsnp_conn *c);
/* Frees the server once closed with nothing outstanding. */
void fsnp_server_release(struct fsnp_server *s);
/* Sends an EVENT to every subscriber of `ev`. */
void fsnp_server_broadcast(struct fsnp_server *s, uint32_t ev, const char *name,
                           const struct wbuf *payload);

/* FerricFlow claims waiting for due work (block_ms): parked with the
 * fetch-or-compute waiters, polled again (fsnp_flow_poll) after
 * `after_ms`, or at the next tick once fsnp_server_flow_kick runs. */
void fsnp_server_flow_park(struct fsnp_server *s, struct fsnp_req *r,
                           uint64_t after_ms);
/* A Flow write succeeded: poll the parked claims again now. */
void fsnp_server_flow_kick(struct fsnp_server *s);
/* Brings a parked claim's next poll forward to `after_ms` from now (never
 * later than it already is). */
void fsnp_server_flow_retime(struct fsnp_server *s, struct fsnp_req *r,
                             uint64_t after_ms);
/* Whether any connection subscribed to `ev`. */
bool fsnp_server_has_subscriber(const struct fsnp_server *s, uint32_t ev);

/* --- fsnp_conn.c ------------------------------------------------------- */

/* A connection accepted on the plaintext listener, or with `tls` (not
 * NULL) on the TLS listener. */
struct fsnp_conn *fsnp_conn_new(struct fsnp_server *s, struct tls_ctx *tls);
int fsnp_conn_start(struct fsnp_conn *c);
void fsnp_conn_close(struct fsnp_conn *c);
/* GOAWAY, stop reading, close once everything is answered. */
void fsnp_conn_drain(struct fsnp_conn *c, uint64_t grace_ms);
/* Re-evaluates whether the connection should read. */
void fsnp_conn_update_reading(struct fsnp_conn *c);
/* Processes frames left in the buffer by a full lane once it has room
 * (end of loop turn). */
void fsnp_conn_resume(struct fsnp_conn *c);
/* Hands queued bytes to uv_write (end of loop turn). */
void fsnp_conn_flush(struct fsnp_conn *c);
/* Sweep: idle, send and chunk assembly timeouts. */
void fsnp_conn_check_timeouts(struct fsnp_conn *c, uint64_t now);
/* Frames `body` (u16 status + value) as a response or event and queues
 * it: chunked at the connection's frame limit, compressed when zlib was
 * negotiated (never with FSNP_FLAG_CUSTOM). `flags` (FSNP_FLAG_CUSTOM,
 * FSNP_FLAG_TRACE) are set on every frame of it. */
void fsnp_conn_send(struct fsnp_conn *c, uint32_t lane, uint16_t opcode,
                    uint64_t request_id, uint8_t flags, const uint8_t *body,
                    size_t len);
/* An EVENT frame {event, payload, at_ms}; payload is one encoded value
 * (NULL: empty map). */
void fsnp_conn_event(struct fsnp_conn *c, const char *name,
                     const struct wbuf *payload);
/* Emits the done requests at the head of a lane. */
void fsnp_conn_lane_flush(struct fsnp_conn *c, struct fsnp_lane *l);
struct fsnp_lane *fsnp_conn_lane(struct fsnp_conn *c, uint32_t id, bool create);

/* Stops reading and closes once queued replies and events are written. */
void fsnp_conn_quit(struct fsnp_conn *c);

/* --- fsnp_acl.c -------------------------------------------------------- */

void fsnp_acl_init(struct fsnp_server *s);
void fsnp_acl_free(struct fsnp_server *s);
/* The users as this node's replica of the meta group last applied them,
 * read synchronously at start (before the first connection), so that a
 * restarted node never serves with an empty copy. */
void fsnp_acl_load_local(struct fsnp_server *s);
/* Installs (on) or removes the store's ACL observer: user changes this
 * node's replica of the meta group applies reach the copy at once. */
void fsnp_acl_observe(struct fsnp_server *s, bool on);
/* Reads the users from the meta group (again). */
void fsnp_acl_refresh(struct fsnp_server *s);
/* From the sweep timer: refreshes every ACL_REFRESH_MS. */
void fsnp_acl_sweep(struct fsnp_server *s, uint64_t now);
/* Whether a new connection is the default user without AUTH. */
bool fsnp_acl_default_open(const struct fsnp_server *s);
/* Whether some user needs a password (requirepass counts). */
bool fsnp_acl_has_password(const struct fsnp_server *s);
/* AUTH: true (and c->user set) when the pair authenticates. */
bool fsnp_acl_auth(struct fsnp_conn *c, struct fsnp_bytes user,
                   struct fsnp_bytes pass);
/* The checks: true when allowed; false with the NOPERM reply in r. */
bool fsnp_acl_check_cmd(struct fsnp_req *r, const char *name, size_t len,
                        uint32_t cats);
bool fsnp_acl_check_key(struct fsnp_req *r, const uint8_t *key, size_t len,
                        uint8_t need);
/* A Flow command (@flow, and @read or @write): its key is the partition
 * key pk, or without one (pk NULL) the auto partition "fa:<n>" of the
 * flow id (flow/flow_route.h). */
bool fsnp_acl_check_flow(struct fsnp_req *r, const char *name, size_t len,
                         bool read, const uint8_t *id, size_t idlen,
                         const uint8_t *pk, size_t pklen);
/* A Flow query (FLOW.QUERY) bound to partition key pk (NULL: across
 * partitions), a plain query, EXPLAIN or EXPLAIN ANALYZE
 * (acl_check_flow_query in node/auth/acl.h). */
bool fsnp_acl_check_flow_query(struct fsnp_req *r, const uint8_t *pk,
                               size_t pklen, bool explain, bool analyze);
/* A planned command: its name and categories, then every key. */
bool fsnp_acl_check_plan(struct fsnp_req *r);
/* COMMAND_EXEC ACL ...: 0 planned (a meta group command in r->plan), 1
 * answered (r's reply written), -1 error in err. */
int fsnp_acl_exec(struct fsnp_req *r, const struct fsnp_val *args,
                  struct fsnp_cmd_err *err);
/* Shapes an answered ACL plan's reply (from plan_finish). */
void fsnp_acl_shape(struct fsnp_req *r);

/* --- fsnp_exec.c ------------------------------------------------------- */

/* One logical request message (chunks joined, inflated). */
void fsnp_exec_message(struct fsnp_conn *c, const struct fsnp_message *m);
/* A header-level failure (before the message exists): answered in lane
 * order with `status`. */
void fsnp_exec_reject(struct fsnp_conn *c, const struct fsnp_header *h,
                      uint16_t status, const char *code, const char *msg);
void fsnp_exec_op_done(struct fsnp_op *op, int status, const uint8_t *result,
                       size_t len);
/* Marks a request done; emits or frees it as its state allows. */
void fsnp_req_complete(struct fsnp_req *r);
/* Frees a request whose connection is gone once nothing runs for it. */
void fsnp_req_release(struct fsnp_req *r);
bool fsnp_req_orphaned(const struct fsnp_req *r);
void fsnp_req_free(struct fsnp_req *r);
/* Frees the pooled requests and segments (server teardown). */
void fsnp_req_pool_drain(struct fsnp_server *s);
/* Error replies: {code, message, retryable, safe_to_retry,
 * retry_after_ms}. */
void fsnp_reply_error(struct fsnp_req *r, uint16_t status, const char *code,
                      const char *msg, bool safe_to_retry,
                      uint64_t retry_after_ms);
void fsnp_write_error(struct fsnp_writer *w, uint16_t status, const char *code,
                      const char *msg, bool safe_to_retry,
                      uint64_t retry_after_ms);
/* Fetch-or-compute waiter polls (re-proposes its request). */
void fsnp_exec_foc_poll(struct fsnp_req *r);
/* Answers a waiter from the owner's outcome. */
void fsnp_exec_foc_wake(struct fsnp_req *r, bool ok, const uint8_t *value,
                        size_t vlen);

/* Answers a failed store operation (SHARDS_* status) of `group`. */
void fsnp_exec_reply_shards(struct fsnp_req *r, int status, uint32_t group);
/* Final touches of a reply (size limit, compact codecs), then
 * fsnp_req_complete. */
void fsnp_exec_finish(struct fsnp_req *r);

/* --- fsnp_flow.c ------------------------------------------------------- */

/* A Flow opcode with its typed body (the encoding of a map; len 0 = {}):
 * answered through fsnp_exec_finish. */
void fsnp_flow_exec(struct fsnp_req *r, uint16_t opcode, const uint8_t *body,
                    size_t len);
/* COMMAND_EXEC of a Flow command: `args` after the name. */
/* COMMAND_EXEC FLOW.QUERY.INDEXES [index-id]: the index status
 * (flow_index_status_v1); answers r. */
void fsnp_flow_query_indexes(struct fsnp_req *r, const struct fsnp_val *args);
void fsnp_flow_exec_args(struct fsnp_req *r, uint16_t opcode,
                         const struct fsnp_val *args);
/* The same in two steps, for PIPELINE items: prepare (0, or -1 with the
 * error in r->reply and nothing started), then start (answered through
 * fsnp_exec_finish). */
int fsnp_flow_prepare(struct fsnp_req *r, uint16_t opcode, const uint8_t *body,
                      size_t len);
int fsnp_flow_prepare_args(struct fsnp_req *r, uint16_t opcode,
                           const struct fsnp_val *args);
void fsnp_flow_start(struct fsnp_req *r);
/* Whether a flag 0x02 body of `opcode` is a compact Flow request, and
 * running one (r->opcode). */
bool fsnp_flow_compact(uint16_t opcode, const uint8_t *body, size_t len);

/* --- fsnp_flow_query.c ------------------------------------------------- */

/* FLOW.QUERY with its typed body {version, query, params}: parsed, bound,
 * authorized, then answered (static EXPLAIN, an error) or run on the
 * partition's group (answered in fsnp_flow_query_done). Called from
 * fsnp_flow_start; answers through fsnp_exec_finish. */
void fsnp_flow_query_start(struct fsnp_req *r, const uint8_t *body, size_t len);
/* The group's answer to a started query: the reply. */
void fsnp_flow_query_done(struct fsnp_req *r, const uint8_t *body, size_t len,
                          int status, const uint8_t *res, size_t rlen);
/* COMMAND_EXEC FLOW.QUERY FQL1 <query> name value...: the typed body
 * (textual values of integer fields typed as integers), then
 * fsnp_flow_prepare. */
int fsnp_flow_query_prepare_args(struct fsnp_req *r,
                                 const struct fsnp_val *args);

/* --- fsnp_flow_sched.c --------------------------------------------------- */

/* FLOW.SCHEDULE.FIRE or FIRE_DUE: a schedule pass, answered through
 * fsnp_exec_finish. */
void fsnp_flow_sched_fire(struct fsnp_req *r, uint16_t opcode,
                          const uint8_t *body, size_t len);
/* FLOW.SCHEDULE.LIST's reply from every group's (n results of the n
 * parts), into r->reply. */
void fsnp_flow_sched_list_merge(struct fsnp_req *r, const uint8_t *body,
                                size_t len, const struct fsnp_res *res,
                                const struct fsnp_part *parts, uint32_t n);
void fsnp_flow_exec_compact(struct fsnp_req *r, const uint8_t *body,
                            size_t len);
/* A part of a Flow request finished (from fsnp_exec_op_done). */
void fsnp_flow_op_done(struct fsnp_op *op, int status, const uint8_t *result,
                       size_t len);
/* A parked claim's turn to try again. */
void fsnp_flow_poll(struct fsnp_req *r);
/* flow/'s changes hook (flow/flow.h): wakes the parked claims the changed
 * flows are due for and sends FLOW_WAKE to subscribers. */
struct flow_change;
void fsnp_flow_changes(void *data, uint32_t group, uint16_t opcode,
                       const struct flow_change *ch, size_t n);
/* Frees r->flow. */
void fsnp_flow_free(struct fsnp_req *r);
/* Called by fsnp_exec_finish for a Flow request: true when a last step
 * (a claim admitted by a governance limit recording its credits) was
 * started instead, which calls fsnp_exec_finish again when done. */
bool fsnp_flow_finishing(struct fsnp_req *r);

/* --- fsnp_control.c ---------------------------------------------------- */

/* Control opcodes (and COMMAND_EXEC control commands, with `body` built
 * from their arguments): fills r->reply. */
void fsnp_control(struct fsnp_req *r, const struct fsnp_val *body);
/* COMMAND_EXEC of a control command (PING, ECHO, CLIENT, ...). */
void fsnp_control_exec(struct fsnp_req *r, const struct fsnp_cmd_info *info,
                       const struct fsnp_val *args);
/* The capability manifest (OPTIONS; STARTUP's `capabilities`). */
void fsnp_control_capabilities(struct fsnp_conn *c, struct fsnp_writer *w);
/* SHARDS / ROUTE payloads. */
void fsnp_control_shards(struct fsnp_server *s, struct fsnp_writer *w);
void fsnp_control_route(struct fsnp_server *s, const uint8_t *key, size_t len,
                        struct fsnp_writer *w);
/* BACKPRESSURE payload. */
void fsnp_control_backpressure(struct fsnp_server *s, struct fsnp_writer *w);
/* Every FERRICSTORE_NATIVE_* setting in effect, as a map. */
void fsnp_control_settings(struct fsnp_server *s, struct fsnp_writer *w);

/* --- fsnp_admin.c ------------------------------------------------------ */

/* An admin opcode (CLUSTER.*, FERRICSTORE.*) with its body: fills
 * r->reply, synchronously. */
void fsnp_admin(struct fsnp_req *r, uint16_t opcode,
                const struct fsnp_val *body);
/* The same by COMMAND_EXEC name with its argument list. */
void fsnp_admin_exec(struct fsnp_req *r, const void *name, size_t len,
                     const struct fsnp_val *args);

#endif
