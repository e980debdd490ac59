/* QUIC client on a libuv loop: one UDP socket carrying any number of
 * connections to QUIC v1 servers, TLS 1.3 with certificate verification
 * (GnuTLS). Streams and connection events go through net/quic.h.
 *
 * Verification: the server certificate must chain to `ca_file` (every
 * certificate in it is trusted; a self-signed leaf given as its own CA file
 * is accepted) or to the system store, and match the name: a DNS name is
 * sent as SNI and checked against the DNS SANs; an IP literal sends no SNI
 * and is checked against the IP SANs (as the official Felix client does).
 *
 * The `struct quic_client` is the caller's and must stay put from
 * quic_client_init() until the close callback of quic_client_close(). */
#ifndef LS_CLIENT_QUIC_CLIENT_H
#define LS_CLIENT_QUIC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/gnutls.h>
#include <uv.h>

#include "net/quic.h"

#define QUIC_CLIENT_MAX_ALPN 8

struct quic_client_config {
	const char *bind_host;   /* local address: "0.0.0.0" (IPv4, default)
	                            or "::" (IPv6) */
	const char *ca_file;     /* PEM trust anchors; NULL: system store */
	const char *server_name; /* name to verify and send as SNI; NULL:
	                            the host given to quic_client_connect() */
	const char *const *alpn; /* protocols offered, in order */
	size_t alpn_count;       /* 0: offer no ALPN at all */
	struct quic_limits limits;
	struct quic_callbacks callbacks;
	void *owner; /* returned by quic_conn_owner() */
};

/* Defaults: bind 0.0.0.0, system trust, ALPN {"felix/1"},
 * quic_limits_client_default(). */
void quic_client_config_init(struct quic_client_config *cfg);

struct quic_client;
typedef void (*quic_client_close_cb)(struct quic_client *cl);

struct quic_client {
	void *data; /* the owner's */
	/* private */
	struct quic_endpoint *ep;
	gnutls_certificate_credentials_t cred;
	gnutls_priority_t prio;
	gnutls_datum_t alpn[QUIC_CLIENT_MAX_ALPN];
	char alpn_buf[QUIC_CLIENT_MAX_ALPN][64];
	size_t alpn_count;
	char server_name[256];
	int family;
	quic_client_close_cb close_cb;
	bool closing;
};

/* Loads the trust anchors and binds the socket. Returns 0, or -1 with a
 * message in `err`. Configuration strings need not outlive the call. */
int quic_client_init(struct quic_client *cl, uv_loop_t *loop,
                     const struct quic_client_config *cfg, char *err,
                     size_t errlen);

/* Starts a connection to host:port (`host` is resolved with getaddrinfo,
 * which blocks for names not in /etc/hosts). On success *out is the
 * connection: the owner gets on_conn_open once the handshake is done, or
 * on_conn_close when it fails. Returns 0, or -1 with a message. */
int quic_client_connect(struct quic_client *cl, const char *host, uint16_t port,
                        struct quic_conn **out, char *err, size_t errlen);

/* Closes every connection (application error 0, owner notified for each)
 * and the socket; `cb` runs once all memory is released. Later calls do
 * nothing. */
void quic_client_close(struct quic_client *cl, quic_client_close_cb cb);

/* Local port of the client's socket. */
uint16_t quic_client_port(const struct quic_client *cl);

#endif
