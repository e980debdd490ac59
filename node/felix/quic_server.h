/* The Felix QUIC listener: a UDP socket on the reactor's libuv loop serving
 * QUIC v1 with TLS 1.3 (ngtcp2 + GnuTLS). It accepts connections, answers
 * what needs no connection (Version Negotiation, optional Retry, stateless
 * resets, refusals past max_connections) and hands every connection to the
 * owner through the callbacks of net/quic.h, whose quic_conn_*()
 * functions the owner uses to talk back.
 *
 * ALPN: `alpn` (default "felix/1") is selected when the client offers it; a
 * client that offers no ALPN at all is accepted too (the official Felix
 * 0.5.0 client offers none); a client offering only other protocols is
 * refused with the TLS alert no_application_protocol.
 *
 * The server owns its socket, credentials and connections. The
 * `struct quic_server` itself is the caller's and must stay put from
 * quic_server_start() until the close callback of quic_server_close(). */
#ifndef LS_NODE_QUIC_SERVER_H
#define LS_NODE_QUIC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/gnutls.h>
#include <uv.h>

#include "net/quic.h"
#include "node/log.h"

struct quic_server_config {
	const char *host;      /* numeric bind address ("127.0.0.1", "::") */
	uint16_t port;         /* 0 picks a free port: quic_server_port() */
	const char *cert_file; /* PEM certificate chain, leaf first */
	const char *key_file;  /* PEM private key */
	const char *alpn;      /* protocol selected when offered */
	bool retry;            /* validate addresses with a Retry first */
	size_t max_connections;
	/* QUIC_SERVER_SECRET_LEN bytes for stateless reset and Retry
	 * tokens; keep it across restarts so peers of a previous run get
	 * stateless resets they can verify. NULL: random per start. */
	const uint8_t *secret;
	struct quic_limits limits;
	struct quic_callbacks callbacks;
	void *owner; /* returned by quic_conn_owner() */
};

#define QUIC_SERVER_SECRET_LEN 32

/* Defaults: host 127.0.0.1, port 5000, alpn "felix/1", no Retry, 10000
 * connections, quic_limits_server_default(). Paths and callbacks are left
 * NULL. */
void quic_server_config_init(struct quic_server_config *cfg);

struct quic_server_stats {
	uint64_t conns_accepted; /* connections created for an Initial */
	uint64_t conns_refused;  /* over max_connections */
	uint64_t handshakes_done;
	uint64_t handshakes_failed;
	uint64_t retries_sent;
	uint64_t version_negotiations;
	uint64_t stateless_resets;
	uint64_t datagrams_in;
	uint64_t datagrams_out;
	uint64_t send_blocked; /* times the socket refused with EAGAIN */
};

struct quic_server;
typedef void (*quic_server_close_cb)(struct quic_server *s);

struct quic_server {
	void *data; /* the owner's */
	/* private */
	struct quic_endpoint *ep;
	const struct log *log;
	gnutls_certificate_credentials_t cred;
	gnutls_priority_t prio;
	char alpn[64];
	bool retry;
	size_t max_connections;
	uint64_t resets_budget;  /* stateless resets left this second */
	uint64_t resets_epoch;   /* the second that budget is for */
	uint64_t refusal_logged; /* second of the last refusal logged */
	struct quic_server_stats stats;
	quic_server_close_cb close_cb;
	bool closing;
};

/* Loads the certificate and key, binds the socket and starts serving.
 * Returns 0, or -1 with a message in `err`. Configuration strings need not
 * outlive the call. */
int quic_server_start(struct quic_server *s, uv_loop_t *loop,
                      const struct quic_server_config *cfg,
                      const struct log *log, char *err, size_t errlen);

/* The bound UDP port. */
uint16_t quic_server_port(const struct quic_server *s);
/* Connections held, handshaking and closing ones included. */
size_t quic_server_conn_count(const struct quic_server *s);
void quic_server_get_stats(const struct quic_server *s,
                           struct quic_server_stats *out);

/* Closes every connection with CONNECTION_CLOSE(app_error, reason) (the
 * owner gets on_conn_close for each), then the socket; `cb` runs once all
 * memory is released. Later calls do nothing. */
void quic_server_close(struct quic_server *s, uint64_t app_error,
                       const char *reason, quic_server_close_cb cb);

#endif
