/* QUIC transport shared by the server (node/felix/quic_server.h) and the client
 * (client/quic_client.h): connections, streams and the shared buffers an
 * owner writes to them. It knows nothing of Felix: it hands stream bytes and
 * connection events to an owner through `struct quic_callbacks` and takes
 * bytes to send through quic_conn_*().
 *
 * Everything runs on one libuv loop (the caller's thread); nothing here is
 * thread-safe, including the reference counts of `struct quic_sbuf`.
 *
 * Ownership and lifetime rules:
 * - A `struct quic_conn` belongs to the transport. The owner may use it from
 *   on_conn_open (server) or from quic_client_connect() (client) until
 *   on_conn_close returns; after that the pointer is dead.
 * - Callbacks run from the loop, some from inside packet processing. From any
 *   callback the owner may call every quic_conn_*() function on any
 *   connection, and quic_server_close() / quic_client_close(): closes take
 *   effect once packet processing is over, and no connection or stream is
 *   freed while a callback about it runs.
 * - Stream ids are those of QUIC: bit 0 says who opened the stream (0
 *   client, 1 server), bit 1 says unidirectional. on_stream_open reports
 *   only the peer's streams; a stream id is dead after on_stream_close.
 * - Stream bytes given to quic_conn_stream_write() are copied. A shared
 *   buffer given to quic_conn_stream_write_sbuf() is referenced, not copied:
 *   the transport takes its own reference per write and drops it once the
 *   peer acknowledged the bytes (or the stream or connection is gone), so one
 *   encoded batch can be written to any number of streams.
 * - Bytes passed to on_stream_data are valid only during the callback.
 *
 * Memory is bounded per connection: unacknowledged send data per stream and
 * per connection is capped (a write that does not fit is refused with
 * QUIC_EAGAIN and on_stream_writable fires once it fits), and receive data is
 * bounded by the flow-control windows the owner grants (automatically as
 * bytes are delivered, or by quic_conn_stream_consume() in manual mode). */
#ifndef LS_NET_QUIC_H
#define LS_NET_QUIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Error codes returned by quic_conn_*() (0 is success). */
#define QUIC_EAGAIN (-1)  /* send buffer full: wait for on_stream_writable */
#define QUIC_ESTREAM (-2) /* no such open stream, or its sending side ended */
#define QUIC_ELIMIT (-3)  /* the peer allows no more streams for now */
#define QUIC_ECLOSED (-4) /* the connection is closing or closed */
#define QUIC_ENOMEM (-5)
#define QUIC_EINVAL (-6) /* e.g. writing to a stream the peer sends on */

/* app_error given to on_stream_close for streams still open when their
 * connection closes (QUIC application error codes are below 2^62). */
#define QUIC_STREAM_CONN_CLOSED UINT64_MAX

/* Longest reason phrase kept for CONNECTION_CLOSE. */
#define QUIC_REASON_MAX 128

const char *quic_strerror(int rv);

/* A reference-counted, immutable byte buffer: encode once, write to many
 * streams. The creator holds the first reference and fills `data` before the
 * first write; afterwards the bytes must not change. */
struct quic_sbuf {
	uint8_t *data;
	size_t len;
	unsigned refs;
	bool owns_data; /* data was handed over by quic_sbuf_take() */
};

/* A buffer of `len` bytes (uninitialised), refs = 1; NULL when out of
 * memory. */
struct quic_sbuf *quic_sbuf_new(size_t len);
/* Wraps `data` (from malloc) and takes ownership of it: it is free()d with
 * the buffer. On failure returns NULL and `data` still belongs to the
 * caller. */
struct quic_sbuf *quic_sbuf_take(uint8_t *data, size_t len);
/* A new buffer holding a copy of `data`. */
struct quic_sbuf *quic_sbuf_copy(const void *data, size_t len);
void quic_sbuf_ref(struct quic_sbuf *b);
void quic_sbuf_unref(struct quic_sbuf *b);

struct quic_conn;

/* Why a connection ended. */
enum quic_close_origin {
	QUIC_CLOSE_LOCAL = 0, /* this side closed it (owner, protocol error,
	                         endpoint shutdown) */
	QUIC_CLOSE_PEER,      /* the peer sent CONNECTION_CLOSE */
	QUIC_CLOSE_IDLE,      /* nothing heard for the idle timeout */
	QUIC_CLOSE_HANDSHAKE_TIMEOUT, /* the handshake did not finish in time */
	QUIC_CLOSE_RESET,             /* the peer sent a stateless reset */
};

struct quic_close_info {
	enum quic_close_origin origin;
	bool app;            /* error_code is an application error code; else
	                        a QUIC transport error code */
	uint64_t error_code; /* 0 = no error; TLS alert A is transport
	                        error 0x100 + A */
	/* Both strings are valid during the callback only. */
	const char *reason;  /* reason phrase sent or received ("" if none) */
	const char *message; /* human summary, e.g. "peer closed: TLS alert
	                        120 no_application_protocol" */
	bool handshake_done; /* the connection was ever open */
};

typedef void (*quic_conn_open_cb)(struct quic_conn *c);
/* The peer opened a stream (its first frame arrived). */
typedef void (*quic_stream_open_cb)(struct quic_conn *c, int64_t stream_id,
                                    bool bidi);
/* In-order bytes of a stream; `fin` marks the end of the peer's side. */
typedef void (*quic_stream_data_cb)(struct quic_conn *c, int64_t stream_id,
                                    const uint8_t *data, size_t len, bool fin);
/* A write refused with QUIC_EAGAIN on this stream would now be accepted. */
typedef void (*quic_stream_writable_cb)(struct quic_conn *c, int64_t stream_id);
/* The peer abandoned its sending side (RESET_STREAM): no more data. */
typedef void (*quic_stream_reset_cb)(struct quic_conn *c, int64_t stream_id,
                                     uint64_t app_error);
/* The stream is gone (both sides finished, reset, or the connection
 * closed); its id is dead and its user data can be freed. */
typedef void (*quic_stream_close_cb)(struct quic_conn *c, int64_t stream_id,
                                     uint64_t app_error);
/* The peer raised our limit of streams we may open. */
typedef void (*quic_streams_available_cb)(struct quic_conn *c, bool bidi);
/* The connection ended; on_stream_close has already run for its streams.
 * `c` must not be used after this returns. */
typedef void (*quic_conn_close_cb)(struct quic_conn *c,
                                   const struct quic_close_info *info);

/* Any callback may be NULL. */
struct quic_callbacks {
	quic_conn_open_cb on_conn_open;
	quic_stream_open_cb on_stream_open;
	quic_stream_data_cb on_stream_data;
	quic_stream_writable_cb on_stream_writable;
	quic_stream_reset_cb on_stream_reset;
	quic_stream_close_cb on_stream_close;
	quic_streams_available_cb on_streams_available;
	quic_conn_close_cb on_conn_close;
};

/* Per-connection limits and timers; both sides use the same struct. */
struct quic_limits {
	uint64_t initial_max_data;        /* connection receive window */
	uint64_t initial_max_stream_data; /* per-stream receive window */
	/* A peer can make ngtcp2 hold up to max_window bytes of
	 * out-of-order data per connection: size it with the connection
	 * count in mind. */
	uint64_t max_window;        /* auto-tuning cap, connection */
	uint64_t max_stream_window; /* auto-tuning cap, per stream */
	uint64_t max_streams_bidi;  /* concurrent peer-opened bidi */
	uint64_t max_streams_uni;   /* concurrent peer-opened uni */
	uint64_t idle_timeout_ms;   /* 0 = no idle timeout */
	uint64_t keepalive_ms;      /* PING after this much quiet; 0 off */
	uint64_t handshake_timeout_ms;
	size_t stream_send_buf_max; /* unacknowledged bytes per stream */
	size_t conn_send_buf_max;   /* unacknowledged bytes per connection */
	/* Receive datagrams one by one even where the kernel could hand
	 * over a sender's GSO burst whole (UDP_GRO); for tests. */
	bool no_udp_gro;
};

/* Server defaults: 8 MiB connection / 1 MiB stream receive windows that
 * auto-tune up to 32 / 8 MiB, 256 bidi and 16 uni peer streams, idle 30 s,
 * keep-alive 10 s, handshake 10 s, send caps 1 MiB per stream and 16 MiB
 * per connection. The caps count bytes written: a shared buffer written to
 * many streams counts once per stream but is stored once. */
void quic_limits_server_default(struct quic_limits *l);
/* Client defaults: as the server's, but 1024 peer uni streams (one per
 * subscription), 16 peer bidi streams and no keep-alive. */
void quic_limits_client_default(struct quic_limits *l);

/* Owner's pointers. */
void quic_conn_set_data(struct quic_conn *c, void *data);
void *quic_conn_get_data(const struct quic_conn *c);
/* The `owner` pointer of the server or client configuration. */
void *quic_conn_owner(const struct quic_conn *c);
bool quic_conn_is_server(const struct quic_conn *c);
/* The negotiated ALPN protocol, or NULL when none was negotiated. */
const char *quic_conn_alpn(const struct quic_conn *c);
/* The peer's address (valid while the connection is). */
const struct sockaddr *quic_conn_peer_addr(const struct quic_conn *c);

/* Opens a stream of ours; the id is stored in *stream_id. QUIC_ELIMIT when
 * the peer's limit is reached (wait for on_streams_available) or the
 * handshake has not finished. */
int quic_conn_open_bidi_stream(struct quic_conn *c, int64_t *stream_id);
int quic_conn_open_uni_stream(struct quic_conn *c, int64_t *stream_id);

/* Queues `len` bytes (copied) and, with `fin`, the end of our side. The
 * write is accepted whole or refused with QUIC_EAGAIN: it is accepted when
 * it fits under the stream's and the connection's send caps, or when the
 * capped buffer is empty (so one write larger than a cap still goes). After
 * QUIC_EAGAIN, on_stream_writable fires once a write of the same length
 * would be accepted. A zero-length write with `fin` just finishes the side
 * and is never refused. */
int quic_conn_stream_write(struct quic_conn *c, int64_t stream_id,
                           const uint8_t *data, size_t len, bool fin);
/* As quic_conn_stream_write(), for bytes [off, off+len) of a shared buffer:
 * takes a reference on `b` (the caller keeps its own). */
int quic_conn_stream_write_sbuf(struct quic_conn *c, int64_t stream_id,
                                struct quic_sbuf *b, size_t off, size_t len,
                                bool fin);
/* Would a write of `len` bytes be accepted now? */
bool quic_conn_stream_writable(const struct quic_conn *c, int64_t stream_id,
                               size_t len);
/* Bytes written and not yet acknowledged by the peer (0 for unknown). */
size_t quic_conn_stream_queued(const struct quic_conn *c, int64_t stream_id);
size_t quic_conn_queued(const struct quic_conn *c);
/* Ends our sending side cleanly (FIN after the queued bytes). */
int quic_conn_stream_shutdown(struct quic_conn *c, int64_t stream_id);
/* Aborts the stream: RESET_STREAM for our side (queued bytes are dropped)
 * and STOP_SENDING for the peer's, with `app_error`. */
int quic_conn_stream_reset(struct quic_conn *c, int64_t stream_id,
                           uint64_t app_error);

/* Receive flow control. By default a stream's window is re-opened as soon
 * as its bytes are delivered. In manual mode the owner re-opens it with
 * quic_conn_stream_consume() once it has processed `n` delivered bytes, so
 * a slow owner holds the peer back and buffers at most one window. Every
 * delivered byte must be consumed eventually, even after on_stream_close:
 * the connection-wide window is re-opened by the same call. */
int quic_conn_stream_set_manual_consume(struct quic_conn *c, int64_t stream_id,
                                        bool manual);
int quic_conn_stream_consume(struct quic_conn *c, int64_t stream_id, size_t n);

void quic_conn_stream_set_data(struct quic_conn *c, int64_t stream_id,
                               void *data);
void *quic_conn_stream_get_data(const struct quic_conn *c, int64_t stream_id);

/* Closes the connection with an application error code and reason (cut to
 * QUIC_REASON_MAX - 1 bytes): CONNECTION_CLOSE is sent after the current
 * callback returns, then on_stream_close for each open stream and
 * on_conn_close (origin QUIC_CLOSE_LOCAL) run, and the connection lingers
 * unseen for its closing period. Idempotent. */
void quic_conn_close(struct quic_conn *c, uint64_t app_error,
                     const char *reason);

/* Transport statistics of one connection. */
struct quic_conn_stats {
	uint64_t smoothed_rtt_us;
	uint64_t cwnd;
	uint64_t bytes_in_flight;
	uint64_t streams_open;
	uint64_t cids; /* our connection IDs routed to this connection */
};
void quic_conn_get_stats(const struct quic_conn *c,
                         struct quic_conn_stats *out);

#endif
