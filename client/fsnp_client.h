/* The FSNP half of liblodestone: a client of FerricStore's native protocol
 * on a libuv loop.
 *
 * One `struct fsnp_client` talks to a cluster through one connection per
 * endpoint: it connects to the seed, sends STARTUP (and AUTH when given a
 * password), and, in topology mode, fetches SHARDS, connects to every
 * shard's endpoint and routes each keyed request by slot to its shard's
 * endpoint and lane (lane = shard + 1). Without topology, data requests go
 * round-robin over `lanes` data lanes of the seed connection and control
 * requests on lane 0.
 *
 * Requests are pipelined and matched by request_id; bodies above the
 * server's frame limit are chunked, and compressed when zlib was
 * negotiated; chunked and compressed replies are joined and inflated.
 *
 * Retries follow the seed's safe replay rules: `busy` (status 4, nothing
 * executed) is retried after retry_after_ms; `reroute` (status 5) refreshes
 * SHARDS and is retried when the server says it is safe or the request is
 * marked idempotent; a lost connection is re-established with jitter and
 * only idempotent requests are replayed, the others fail with
 * FSNP_CLIENT_ELOST (they may have executed). GOAWAY stops new requests on
 * that connection; they go to a fresh one.
 *
 * Ownership: request bodies are copied at submission. A reply's views are
 * valid only during its callback. Everything runs on the loop thread. */
#ifndef LS_CLIENT_FSNP_CLIENT_H
#define LS_CLIENT_FSNP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "wire/buf.h"
#include "wire/fsnp_value.h"

/* Transport-level outcomes (struct fsnp_reply.error). */
enum {
	FSNP_CLIENT_OK = 0,
	FSNP_CLIENT_ETIMEDOUT, /* no reply within timeout_ms */
	FSNP_CLIENT_ELOST,     /* connection lost: may have executed */
	FSNP_CLIENT_ECLOSED,   /* client closing, or never sent */
	FSNP_CLIENT_EPROTO,    /* malformed reply */
	FSNP_CLIENT_ENOMEM,
	FSNP_CLIENT_EINVAL,
};

const char *fsnp_client_strerror(int error);

struct fsnp_reply {
	int error;              /* FSNP_CLIENT_*; the rest is valid when 0 */
	uint16_t status;        /* enum fsnp_status */
	bool custom;            /* compact payload (flag 0x02): see `payload` */
	struct fsnp_val value;  /* the typed value (when !custom) */
	const uint8_t *payload; /* bytes after the status */
	size_t payload_len;
	const char *message; /* error replies: the message (NUL-ended) */
	uint64_t retry_after_ms;
	unsigned attempts; /* sends it took */
};

typedef void (*fsnp_reply_cb)(void *data, const struct fsnp_reply *reply);

/* Server-initiated frames: EVENT (name = its "event") and GOAWAY. `value`
 * is the frame's value; valid during the call. */
typedef void (*fsnp_event_cb)(void *data, uint16_t opcode, const char *name,
                              const struct fsnp_val *value);

struct fsnp_client_options {
	const char *host; /* seed, numeric or a name */
	uint16_t port;
	const char *username; /* NULL: "default" */
	const char *password; /* NULL: no AUTH */
	const char *client_name;
	unsigned lanes;        /* data lanes without topology; 0 = 8 */
	bool topology;         /* SHARDS routing */
	bool zlib;             /* negotiate zlib bodies */
	const char *codecs;    /* comma-separated compact_response_codecs */
	uint64_t timeout_ms;   /* per request; 0 = 30000 */
	unsigned max_attempts; /* sends per request at most; 0 = 4 */
	uint32_t max_inflight; /* per connection before queueing; 0 = 4096 */
	fsnp_event_cb on_event;
	void *event_data;
	/* TLS to the seed (the listener's --fsnp-tls port): the server's
	 * certificate must verify against tls_ca_file (NULL: the system's
	 * CAs) and name `host`; tls_cert_file/tls_key_file offer a client
	 * certificate. Not with `topology`: SHARDS lists plaintext
	 * endpoints. */
	bool tls;
	const char *tls_ca_file;
	const char *tls_cert_file;
	const char *tls_key_file;
};

struct fsnp_client;

typedef void (*fsnp_client_ready_cb)(void *data, struct fsnp_client *c,
                                     int status, const char *err);
typedef void (*fsnp_client_close_cb)(void *data);

/* Connects; `cb` runs once the seed has answered STARTUP (and AUTH,
 * SHARDS), with status 0 or an error and its message. The client may be
 * used (requests queue) before that. */
int fsnp_client_open(uv_loop_t *loop, const struct fsnp_client_options *o,
                     fsnp_client_ready_cb cb, void *data,
                     struct fsnp_client **out);

/* Request flags. */
#define FSNP_REQ_IDEMPOTENT 0x01u /* may be replayed after a lost conn */
#define FSNP_REQ_NO_REPLY                                                      \
	0x02u                  /* flag 0x10: cb gets an empty reply            \
	                          once sent */
#define FSNP_REQ_COMPACT 0x04u /* body is a compact payload (0x02) */

/* Sends `opcode` with `body` (copied). `key` (may be NULL) routes it in
 * topology mode and picks its lane; NULL sends control opcodes on lane 0
 * and data opcodes round-robin. `cb` runs exactly once unless the call
 * fails (non-zero return). */
int fsnp_client_send(struct fsnp_client *c, uint16_t opcode, const void *key,
                     size_t klen, const uint8_t *body, size_t len,
                     unsigned flags, fsnp_reply_cb cb, void *data);

/* The same, with an explicit lane (no routing). */
int fsnp_client_send_lane(struct fsnp_client *c, uint32_t lane, uint16_t opcode,
                          const uint8_t *body, size_t len, unsigned flags,
                          fsnp_reply_cb cb, void *data);

/* What the handshake told about the server. */
struct fsnp_client_info {
	uint64_t client_id;
	uint32_t max_frame_bytes;
	unsigned shard_count;
	bool auth_required;
	bool zlib; /* negotiated */
	size_t connections;
	size_t inflight;
};
void fsnp_client_get_info(const struct fsnp_client *c,
                          struct fsnp_client_info *out);

/* Fails what is still pending with FSNP_CLIENT_ECLOSED, closes every
 * connection, then calls `cb` (may be NULL) and frees the client. */
void fsnp_client_close(struct fsnp_client *c, fsnp_client_close_cb cb,
                       void *data);

/* --- Blocking convenience (tools, tests) ---------------------------------- */

/* A client on a private loop; every call runs that loop until done. */
struct fsnp_sync;

int fsnp_sync_open(struct fsnp_sync **out, const struct fsnp_client_options *o,
                   char *err, size_t errlen);
/* Sends and waits. `out` (may be NULL) receives a copy of the reply
 * payload (the bytes after the status); *status gets the FSNP status.
 * Returns 0, or an FSNP_CLIENT_* error. */
int fsnp_sync_call(struct fsnp_sync *s, uint16_t opcode, const void *key,
                   size_t klen, const uint8_t *body, size_t len, unsigned flags,
                   uint16_t *status, struct wbuf *out);
struct fsnp_client *fsnp_sync_client(struct fsnp_sync *s);
uv_loop_t *fsnp_sync_loop(struct fsnp_sync *s);
void fsnp_sync_close(struct fsnp_sync *s);

#endif
