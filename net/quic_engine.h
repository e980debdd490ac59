/* The QUIC engine under quic_server.c and quic_client.c (implemented in
 * net/quic.c): one UDP socket on a libuv loop, the connections it carries
 * and their demultiplexing by connection ID, packet batching, per-connection
 * expiry timers and the closing/draining periods. The server and client
 * modules add what differs: TLS sessions, and (server) what to do with a
 * datagram that matches no connection. Owners use net/quic.h only.
 *
 * The endpoint owns its libuv handles (each handle's data points to the
 * endpoint or connection holding it) and frees memory only from their close
 * callbacks. */
#ifndef LS_NET_QUIC_ENGINE_H
#define LS_NET_QUIC_ENGINE_H

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <uv.h>

#include "net/quic.h"

/* Length of every connection ID we issue. */
#define QUIC_SCID_LEN 16
/* Length of the endpoint's random secret (tokens, stateless resets). */
#define QUIC_SECRET_LEN 32

struct quic_endpoint;

enum quic_log_level {
	QUIC_LOG_DEBUG = 0,
	QUIC_LOG_INFO,
	QUIC_LOG_WARN,
	QUIC_LOG_ERROR
};
typedef void (*quic_log_fn)(void *arg, enum quic_log_level level,
                            const char *msg);

/* A datagram whose destination connection ID matches no connection.
 * `vc_rv` is ngtcp2_pkt_decode_version_cid()'s result for it (0 or
 * NGTCP2_ERR_VERSION_NEGOTIATION). */
typedef void (*quic_unknown_fn)(struct quic_endpoint *ep, void *arg,
                                const uint8_t *pkt, size_t len,
                                const ngtcp2_version_cid *vc, int vc_rv,
                                const struct sockaddr *from, socklen_t fromlen);
typedef void (*quic_endpoint_closed_fn)(void *arg);

struct quic_endpoint_config {
	bool server;
	struct quic_limits limits;
	struct quic_callbacks callbacks;
	void *owner; /* returned by quic_conn_owner() */
	quic_log_fn log;
	void *log_arg;
	quic_unknown_fn on_unknown; /* NULL: drop such datagrams */
	void *unknown_arg;
	/* QUIC_SECRET_LEN bytes keying stateless reset and Retry tokens;
	 * NULL: random. A server that keeps it across restarts can reset
	 * the connections of its previous life. */
	const uint8_t *secret;
};

struct quic_endpoint_stats {
	uint64_t conns_created;
	uint64_t handshakes_done;
	uint64_t handshakes_failed; /* closed before the handshake finished */
	uint64_t datagrams_in;
	uint64_t datagrams_out;
	uint64_t send_blocked; /* times the socket said EAGAIN */
	/* UDP GRO: receive buffers that held more than one datagram, and the
	 * datagrams they held. */
	uint64_t gro_buffers;
	uint64_t datagrams_coalesced;
};

/* Binds a UDP socket to `bind_addr` and starts receiving, with UDP GRO
 * unless the kernel refuses it or `cfg->limits.no_udp_gro`. */
int quic_endpoint_open(uv_loop_t *loop, const struct quic_endpoint_config *cfg,
                       const struct sockaddr *bind_addr,
                       struct quic_endpoint **out, char *err, size_t errlen);
/* Closes every connection (CONNECTION_CLOSE with `app_error`/`reason` for
 * open ones, owner notified), then the socket; `cb(arg)` runs once all
 * memory is freed. The endpoint pointer is dead after that. */
void quic_endpoint_close(struct quic_endpoint *ep, uint64_t app_error,
                         const char *reason, quic_endpoint_closed_fn cb,
                         void *arg);
const struct sockaddr *quic_endpoint_local_addr(const struct quic_endpoint *ep);
/* Connections in any state, closing ones included. */
size_t quic_endpoint_conn_count(const struct quic_endpoint *ep);
const uint8_t *quic_endpoint_secret(const struct quic_endpoint *ep);
void quic_endpoint_get_stats(const struct quic_endpoint *ep,
                             struct quic_endpoint_stats *out);
void quic_endpoint_log(const struct quic_endpoint *ep,
                       enum quic_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends one datagram that belongs to no connection (Version Negotiation,
 * Retry, stateless reset or close); best effort, dropped when the socket is
 * busy. */
void quic_endpoint_send_raw(struct quic_endpoint *ep, const struct sockaddr *to,
                            socklen_t tolen, const uint8_t *pkt, size_t len);

/* Server: creates a connection for a client Initial whose header `hd` came
 * from ngtcp2_accept(), and processes the packet. `ocid` is the original
 * destination connection ID when the Initial carried a valid Retry token,
 * else NULL. `tls` is a server session configured by the caller; the
 * connection owns it from here on, also on failure. Returns 0 (the
 * connection exists, possibly already closing), 1 when ngtcp2 wants the
 * client's address validated first (the connection was dropped: send a
 * Retry), or a negative QUIC_E* code. */
int quic_conn_accept(struct quic_endpoint *ep, const ngtcp2_pkt_hd *hd,
                     const ngtcp2_cid *ocid, const struct sockaddr *from,
                     socklen_t fromlen, gnutls_session_t tls,
                     const uint8_t *pkt, size_t len);

/* Client: starts a handshake with `to`. `tls` is a client session configured
 * by the caller (SNI, trust, ALPN); the connection owns it from here on,
 * also on failure. The connection is visible to the owner at once: it gets
 * on_conn_open or on_conn_close. */
int quic_conn_connect(struct quic_endpoint *ep, const struct sockaddr *to,
                      socklen_t tolen, gnutls_session_t tls,
                      struct quic_conn **out);

#endif
