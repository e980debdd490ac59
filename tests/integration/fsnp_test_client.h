/* A blocking FSNP test client over a raw socket: it sends exactly the
 * bytes a test asks for (well-formed or not) and reads frames back with a
 * timeout, so integration tests can probe the server's framing, lanes and
 * error handling byte by byte. */
#ifndef LS_TESTS_FSNP_TEST_CLIENT_H
#define LS_TESTS_FSNP_TEST_CLIENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/integration/harness.h"
#include "wire/buf.h"
#include "wire/fsnp_chunk.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_value.h"

struct ftc {
	int fd;
	void *ssl; /* OpenSSL SSL * of a TLS connection, else NULL (owned) */
	char tls_err[256]; /* why ftc_connect_tls failed */
	uint8_t *buf;      /* received, not yet decoded */
	size_t len, cap;
	uint64_t next_rid;
	struct fsnp_chunk_asm chunks;
};

/* One reply (chunks joined, inflated). `value` views `body` (owned). */
struct ftc_msg {
	struct fsnp_header h;
	uint8_t flags;           /* of the logical message (0x02 custom, ...) */
	unsigned frames;         /* frames it took */
	uint32_t max_frame_body; /* largest frame body seen */
	uint8_t *body;           /* owned */
	size_t len;
	uint16_t status;
	bool has_value; /* decoded (not a custom payload) */
	struct fsnp_val value;
};

/* Connects to 127.0.0.1:port (retrying for up to 10 s). */
int ftc_connect(struct ftc *c, uint16_t port);
/* The same to another IPv4 address (a namespace's, in the tests that made
 * it). */
int ftc_connect_ip(struct ftc *c, const char *ipv4, uint16_t port);
void ftc_close(struct ftc *c);
/* Connects to 127.0.0.1:port and completes a TLS handshake (blocking),
 * verifying the server against `ca_file` (PEM; NULL: no verification) and
 * presenting `cert_file`/`key_file` when given. Returns 0, or -1 with the
 * reason in c->tls_err (the connection is closed). */
int ftc_connect_tls(struct ftc *c, uint16_t port, const char *ca_file,
                    const char *cert_file, const char *key_file);

int ftc_send_raw(struct ftc *c, const void *p, size_t n);
/* One frame with an explicit request id. */
int ftc_send_frame(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
                   uint64_t rid, const void *body, size_t len);
/* One request with the next request id (returned); lane 0 for control
 * opcodes below 0x0100 except PIPELINE, else `lane`. */
uint64_t ftc_send(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
                  const struct wbuf *body);

/* The next reply or event; -1 on timeout or when the server closed. */
int ftc_recv(struct ftc *c, struct ftc_msg *m, int timeout_ms);
void ftc_msg_free(struct ftc_msg *m);
/* True when the server closes the connection within timeout_ms (frames
 * still arriving are discarded). */
bool ftc_wait_closed(struct ftc *c, int timeout_ms);

/* Sends and waits for the reply with that request id (events and other
 * replies in between are skipped). Returns 0 or -1. */
int ftc_call(struct ftc *c, uint32_t lane, uint16_t opcode, uint8_t flags,
             const struct wbuf *body, struct ftc_msg *m);

/* Body builders: `fmt` pairs keys with values, e.g.
 *   ftc_body(&b, "key=s value=s ttl=i", "k", "v", (int64_t)100)
 * s string, b bool (int), i int64_t, n nil, a string array (const char **,
 * int count), m raw encoded value (const uint8_t *, size_t). An empty fmt
 * is {}. */
void ftc_body(struct wbuf *b, const char *fmt, ...);
void ftc_vbody(struct wbuf *b, const char *fmt, va_list ap);

/* Map lookups on a reply value, for assertions. */
bool ftc_str_eq(const struct fsnp_val *v, const char *s);
bool ftc_map_str(const struct fsnp_val *m, const char *key, const char *s);
int64_t ftc_map_int(const struct fsnp_val *m, const char *key);
/* The error message of an error reply (a map's "message", or the text). */
void ftc_error_text(const struct ftc_msg *m, char *out, size_t cap);

/* Waits until the node answers a write on every shard (leaders elected);
 * 0 or -1 after timeout_ms. */
int ftc_wait_ready(uint16_t port, int timeout_ms);

/* $LS_FSNP_NODES, or 1: how many nodes a test that runs on any number
 * starts. */
unsigned ftc_env_nodes(void);

/* Starts n nodes with `extra` (harness_cluster_start) and waits until the
 * first answers (ftc_wait_ready, 20 s); its FSNP port into *port. 0 or
 * -1. */
int ftc_start(struct harness_cluster *c, unsigned n, const char *const extra[],
              uint16_t *port);

#endif
