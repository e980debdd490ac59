/* TLS over libuv streams on OpenSSL memory BIOs, server and client side
 * (the FSNP listener and liblodestone's FSNP client): the connection keeps
 * reading and writing its libuv stream and hands the ciphertext through
 * here, so nothing ever blocks the loop.
 *
 * A context (one per TLS listener) owns the SSL_CTX (TLS 1.2 and 1.3, the
 * server certificate and key, and with a CA file the requirement that
 * clients present a certificate it verifies) and the one buffer every TLS
 * connection's socket reads land in: libuv calls a stream's alloc and read
 * callbacks back to back on the loop thread and tls_feed consumes the
 * bytes at once, so one buffer serves all connections.
 *
 * A session (one per connection) owns its SSL object and both BIOs. Bytes
 * read from the socket are fed in (the handshake runs as they arrive);
 * plaintext comes out of tls_read; plaintext given to tls_write
 * and everything the session has to send (handshake, alerts, tickets,
 * close_notify) accumulates as ciphertext that tls_take hands to the
 * caller for writing. Buffers are bounded by the caller: it feeds at most
 * one read buffer before draining the plaintext, and writes only what its
 * own bounded output queue holds. */
#ifndef LS_NET_TLS_H
#define LS_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Size of the shared socket read buffer. */
#define TLS_READ_BUF 65536u

struct tls_ctx;
struct tls_session;

/* Loads `cert_file` (PEM chain) and `key_file`; with `ca_file` (may be
 * NULL or "") clients must present a certificate signed by one of its
 * CAs. Returns 0, or -1 with the reason in `err`. */
int tls_ctx_new(struct tls_ctx **out, const char *cert_file,
                const char *key_file, const char *ca_file, char *err,
                size_t errlen);
void tls_ctx_free(struct tls_ctx *x);
/* Whether client certificates are required. */
bool tls_ctx_verifies_clients(const struct tls_ctx *x);
/* The shared buffer a socket read may fill (TLS_READ_BUF bytes). */
uint8_t *tls_ctx_read_buf(struct tls_ctx *x);

/* A client context (liblodestone's FSNP client): servers must present a
 * certificate `ca_file` verifies (NULL or "": the system's CAs); with
 * `cert_file` (and `key_file`, NULL: the same file) a client certificate
 * is offered. Returns 0, or -1 with the reason in `err`. */
int tls_ctx_new_client(struct tls_ctx **out, const char *ca_file,
                       const char *cert_file, const char *key_file, char *err,
                       size_t errlen);

/* Replaces what `into` presents and trusts by `from`'s (a context loaded
 * again from renewed files) and frees `from`. Sessions already made keep
 * the old certificate and trust (each holds a reference to it); sessions
 * made from now on use the new ones. `into` keeps its address, which its
 * users hold. */
void tls_ctx_replace(struct tls_ctx *into, struct tls_ctx *from);

/* Refuses every protocol version below TLS 1.3 on `x`. */
void tls_ctx_require_tls13(struct tls_ctx *x);

/* A server-side session; NULL when out of memory. */
struct tls_session *tls_session_new(struct tls_ctx *x);
/* A client-side session for a client context; the server's certificate
 * must name `host` (a DNS or IP SAN; names are also sent as SNI). With
 * `host` NULL only the certificate's chain is verified (the caller checks
 * the identity itself, tls_peer_cn). Feeding it no bytes (tls_feed with
 * n 0) queues the ClientHello. NULL when out of memory or `host` is
 * unusable. */
struct tls_session *tls_session_new_client(struct tls_ctx *x, const char *host);
void tls_session_free(struct tls_session *t);

/* Feeds `n` ciphertext bytes received from the peer and advances the
 * handshake. Returns 0, or -1 when the session failed (handshake refused,
 * certificate not verified, bad record) with the reason in `err`; any
 * alert to send is then pending. */
int tls_feed(struct tls_session *t, const uint8_t *p, size_t n, char *err,
             size_t errlen);
bool tls_established(const struct tls_session *t);
/* Decrypts up to `cap` bytes into `dst`; *got 0 means more ciphertext is
 * needed. Returns 0, 1 when the peer closed the session (close_notify), or
 * -1 on a failure (reason in `err`). */
int tls_read(struct tls_session *t, uint8_t *dst, size_t cap, size_t *got,
             char *err, size_t errlen);
/* Encrypts `n` bytes (the session must be established). Returns 0 or
 * -1. */
int tls_write(struct tls_session *t, const uint8_t *p, size_t n);
/* Queues close_notify (once). */
void tls_shutdown(struct tls_session *t);
/* Ciphertext waiting to be sent. */
size_t tls_pending(const struct tls_session *t);
/* Moves the pending ciphertext into a new buffer the caller owns (free()).
 * Returns 0 (with *len 0 and *out NULL when nothing is pending) or -1. */
int tls_take(struct tls_session *t, uint8_t **out, size_t *len);
/* Moves up to `cap` bytes of pending ciphertext into `dst` (a buffer the
 * caller keeps). Returns 0 with the count in *got, or -1. */
int tls_drain(struct tls_session *t, uint8_t *dst, size_t cap, size_t *got);
/* The common name of the peer's verified certificate, NUL-terminated, in
 * `out`. Returns 0, or -1 when there is no certificate, no common name or
 * it does not fit (or holds a NUL). */
int tls_peer_cn(const struct tls_session *t, char *out, size_t cap);
/* Negotiated protocol version and cipher, for logs ("TLSv1.3", ...). */
const char *tls_version(const struct tls_session *t);
const char *tls_cipher(const struct tls_session *t);

#endif
