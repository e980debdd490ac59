/* The node transport: one internal TCP listener per node and one connection
 * per peer pair, carrying every group's libraft messages (each tagged with
 * its group) and the frames of the layers above (forwarding RPC, state
 * transfer, leader routes). Wire format: raft/msg_codec.h.
 *
 * Connections. Every node dials every peer it has no connection to, with
 * exponential backoff. The first frames are the handshake: the dialer sends
 * HELLO (magic, version, cluster id, its node id, the id it expects), the
 * acceptor answers WELCOME or refuses (another cluster, a node id that is
 * not a member, another version, a wrong id) with a reason that both sides
 * log. When both nodes dial each other the connection dialed by the lower
 * node id wins, on both sides, and the other is closed.
 *
 * Writes are coalesced: frames queued during one loop turn leave in one
 * write per connection, after the turn's callbacks ran (a uv_check handle,
 * and a prepare handle for what the turn's prepare handles queued). Each
 * connection's queue is bounded: a frame that does not fit while the queue
 * holds data is dropped (the send fails), so a slow or stuck peer costs a
 * bounded amount of memory and never blocks the others. An idle connection
 * sends a ping; one that hears nothing for `dead_ms` is closed.
 *
 * Raft messages: transport_attach() installs the rio send hook (messages
 * are encoded during the call) and delivers decoded messages to the store;
 * a message that cannot be queued returns RAFT_NOCONNECTION, which the
 * store reports to libraft through the send callback.
 *
 * With TLS (tls_server and tls_client set) every connection, accepted or
 * dialed, runs TLS before the first frame: the frames queued in a turn are
 * encrypted together when the turn's write leaves, and what is read is
 * decrypted before it is cut into frames. A peer whose certificate the
 * cluster CA does not verify, or that speaks plaintext, fails the TLS
 * handshake and never has a frame read; a certificate's common name must
 * be node-<id>, and the id the peer gives in HELLO (or JOIN), or the id
 * the dialer expects, must be that one.
 *
 * Everything runs on the loop thread. Memory of connections is freed in
 * their close callbacks. */
#ifndef LS_RAFT_TRANSPORT_H
#define LS_RAFT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "raft/io.h"

struct transport;
struct tls_ctx;

enum { TRANSPORT_DEBUG = 0, TRANSPORT_INFO, TRANSPORT_WARN, TRANSPORT_ERROR };

enum {
	TRANSPORT_OK = 0,
	TRANSPORT_ENOPEER, /* not a configured peer */
	TRANSPORT_ENOCONN, /* no connection to the peer right now */
	TRANSPORT_EFULL,   /* the peer's send queue is full */
	TRANSPORT_ETOOBIG, /* frame above the protocol limit */
	TRANSPORT_ENOMEM,
	TRANSPORT_EINVAL,
	TRANSPORT_ESHUTDOWN
};

typedef void (*transport_log_fn)(void *data, int level, const char *msg);

/* A frame of a kind the transport does not handle itself (not handshake,
 * raft or ping) from connected peer `peer`; `p` is valid during the call. */
typedef void (*transport_frame_fn)(void *data, uint64_t peer, uint8_t kind,
                                   const uint8_t *p, size_t len);

/* The peer's connection came up or went down. `gen` names the connection
 * (transport_conn_gen): a frame queued on one connection never travels on
 * another, so a request whose connection went down may be lost. */
typedef void (*transport_peer_fn)(void *data, uint64_t peer, bool up,
                                  uint64_t gen);

typedef void (*transport_close_cb)(struct transport *t, void *data);

/* A node asks to join (MSG_JOIN, on a connection of its own instead of a
 * handshake): `record` is its record (its addresses). Return MSG_HS_OK and
 * the members ("ID=HOST:PORT,...") in `reply`, or a refusal status and
 * the reason; the answer is sent and the connection closed. */
typedef int (*transport_join_fn)(void *data, uint64_t id, const char *record,
                                 size_t len, char *reply, size_t cap);

/* A raft message (libraft type `type`) from `peer` for a group that has no
 * started instance here: dropped; the owner may start the group (the
 * sender retries). */
typedef void (*transport_unknown_fn)(void *data, uint64_t peer, uint32_t group,
                                     int type);

struct transport_options {
	uint64_t node_id;          /* > 0 */
	const char *cluster_id;    /* copied; at most MSG_CLUSTER_MAX bytes */
	size_t max_queue_bytes;    /* per connection; 0 = 64 MiB */
	unsigned reconnect_min_ms; /* 0 = 50 */
	unsigned reconnect_max_ms; /* 0 = 2000 */
	unsigned handshake_timeout_ms;   /* 0 = 3000 */
	unsigned ping_ms;                /* 0 = 500 */
	unsigned dead_ms;                /* 0 = 5000 */
	transport_log_fn log;            /* may be NULL */
	transport_frame_fn on_frame;     /* may be NULL */
	transport_peer_fn on_peer;       /* may be NULL */
	transport_join_fn on_join;       /* may be NULL: joins refused */
	transport_unknown_fn on_unknown; /* may be NULL */
	/* Internal TLS: both or neither (not owned, outlive the transport).
	 * The server context verifies client certificates against the
	 * cluster CA, the client context the servers'; both TLS 1.3 only.
	 * Every peer's certificate must have CN=node-<id> for the id it
	 * claims in the handshake. */
	struct tls_ctx *tls_server;
	struct tls_ctx *tls_client;
	void *data;
};

struct transport_peer_info {
	uint64_t id;
	char address[300]; /* host:port */
	bool connected;
	uint64_t gen;
	uint64_t frames_sent;
	uint64_t frames_received;
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t dropped;  /* frames refused: no connection or queue full */
	uint64_t connects; /* handshakes completed */
	size_t queued;     /* bytes waiting to be written */
};

int transport_init(struct transport **out, uv_loop_t *loop,
                   const struct transport_options *o);

/* Adds a peer (not this node) to dial and accept; also once started (it
 * is dialed at the next tick). */
int transport_add_peer(struct transport *t, uint64_t id, const char *host,
                       uint16_t port);

/* Listens on host:port (numeric address) and starts dialing the peers. */
int transport_start(struct transport *t, const char *host, uint16_t port,
                    char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
uint16_t transport_port(const struct transport *t);

/* Sends raft messages of `s` through this transport and delivers the ones
 * received to it. NULL detaches. */
void transport_attach(struct transport *t, struct rio_store *s);

/* The rio send hook itself (data = the transport), for tests. */
int transport_send_raft(void *data, uint32_t group,
                        const struct raft_message *m);
/* The rio AppendEntries hook: on a plain-TCP connection, payloads of 16
 * KiB and more are written from libraft's memory (writev) instead of
 * copied into the queue, and the send completes once they are written or
 * the connection is gone. */
int transport_send_raft_ref(void *data, uint32_t group,
                            const struct raft_message *m,
                            struct rio_sent *sent);

/* Queues a frame (payload copied). TRANSPORT_* status. */
int transport_send(struct transport *t, uint64_t peer, uint8_t kind,
                   const void *p, size_t len);

/* Reserves room for a frame of `len` payload bytes and returns where to
 * write them (valid until the next call into the transport), or NULL with
 * *status set. */
uint8_t *transport_reserve(struct transport *t, uint64_t peer, uint8_t kind,
                           size_t len, int *status);

bool transport_connected(const struct transport *t, uint64_t peer);

/* The current connection's generation (0 = not connected). */
uint64_t transport_conn_gen(const struct transport *t, uint64_t peer);

/* Bytes queued to `peer` and not yet written. */
size_t transport_queued(const struct transport *t, uint64_t peer);

/* Fills up to `max` entries, ascending by id; returns the peer count. */
size_t transport_peers(const struct transport *t,
                       struct transport_peer_info *out, size_t max);

/* Closes the listener and every connection, then calls `cb`. Free with
 * transport_free() after that. */
void transport_close(struct transport *t, transport_close_cb cb, void *data);
void transport_free(struct transport *t);

const char *transport_strerror(int status);

#endif
