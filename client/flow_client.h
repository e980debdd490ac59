/* FerricFlow calls of liblodestone: typed FSNP bodies for the Flow opcodes
 * (seed 002, reference/flow.md section 5), routed to the flow's slot, and
 * their replies parsed into plain structs.
 *
 * One argument struct serves every call; each opcode's encoder writes only
 * the fields its body takes (flow_client_encode). Id commands route by the
 * hash tag of the flow's partition (wire/flow_route.h): the routing key is
 * "{fa:<crc32(id) % 256>}" without a partition key, else "{f:" +
 * base64url(SHA-256(pk)) + "}", so a topology-mode client sends them to
 * the shard owning the flow. CLAIM_DUE routes by its partition key when
 * given; without one the server scans every auto bucket.
 *
 * Replies are views: a parsed struct points into the reply value and is
 * valid while that value is (the reply callback, or the caller's copy of
 * a synchronous payload). */
#ifndef LS_CLIENT_FLOW_CLIENT_H
#define LS_CLIENT_FLOW_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/fsnp_client.h"
#include "wire/buf.h"
#include "wire/flow_route.h"
#include "wire/fsnp_value.h"

/* Errors of the parsers and encoders (negative, beside 0). */
enum {
	FLOW_CLIENT_ENOTFOUND = -1, /* the reply is nil: no such flow */
	FLOW_CLIENT_EPROTO = -2,    /* the reply has another shape */
	FLOW_CLIENT_EINVAL = -3,    /* a required argument is missing */
	FLOW_CLIENT_ENOMEM = -4,
};

/* "{" tag "}" with a NUL. */
#define FLOW_CLIENT_KEY_MAX (FLOW_TAG_MAX + 2)

/* Arguments of every Flow call; NULL / FLOW_UNSET / false = absent. */
#define FLOW_UNSET INT64_MIN

struct flow_args {
	const char *id;
	const char *type;
	const char *state; /* CREATE: initial state; CLAIM_DUE: state */
	const char *partition_key;
	const char *worker;      /* CLAIM_DUE */
	const char *lease_token; /* COMPLETE, FAIL, RETRY, EXTEND, ... */
	const char *from_state;  /* TRANSITION */
	const char *to_state;
	const char *ret; /* CLAIM_DUE "return" (records, jobs, ...) */
	/* CREATE payload, COMPLETE result, FAIL/RETRY error, CANCEL reason:
	 * a binary value when `data` is not NULL. */
	const void *data;
	size_t data_len;
	int64_t fencing_token; /* FLOW_UNSET or >= 0 */
	int64_t lease_ms;      /* CLAIM_DUE, EXTEND_LEASE */
	int64_t limit;         /* CLAIM_DUE 1..1000 */
	int64_t block_ms;      /* CLAIM_DUE: wait for due work */
	int64_t run_at_ms;
	int64_t now_ms;
	int64_t priority;
	int64_t count; /* HISTORY */
	bool idempotent;
	bool payload; /* GET: with payload; CLAIM_DUE: false sends payload
	                 false */
	bool rev;     /* HISTORY newest first */
};

/* Every field absent. */
void flow_args_init(struct flow_args *a);

/* The routing key of a flow (id, and pk or NULL) into out
 * (FLOW_CLIENT_KEY_MAX bytes); returns its length. */
size_t flow_client_route_key(const char *id, const char *pk, char *out);

/* Encodes the body of `opcode` (one of the FSNP_OP_FLOW_* this module
 * knows: CREATE, GET, CLAIM_DUE, COMPLETE, FAIL, RETRY, TRANSITION,
 * CANCEL, EXTEND_LEASE, HISTORY) into `body` (appended) and its routing
 * key into `key` (FLOW_CLIENT_KEY_MAX bytes; *klen 0 = unrouted).
 * Returns 0, FLOW_CLIENT_EINVAL (a required field missing, or an opcode
 * not known here) or FLOW_CLIENT_ENOMEM. */
int flow_client_encode(uint16_t opcode, const struct flow_args *a,
                       struct wbuf *body, char *key, size_t *klen);

/* FSNP_REQ_IDEMPOTENT when the call may be replayed after a lost
 * connection: reads, and the lease mutations whose replay the server
 * answers as a no-op; CREATE only when `idempotent`. */
unsigned flow_client_flags(uint16_t opcode, const struct flow_args *a);

/* Encodes and sends (fsnp_client_send) with flow_client_flags | flags. */
int flow_client_call(struct fsnp_client *c, uint16_t opcode,
                     const struct flow_args *a, unsigned flags,
                     fsnp_reply_cb cb, void *data);

/* The calls by name. */
int flow_client_create(struct fsnp_client *c, const struct flow_args *a,
                       fsnp_reply_cb cb, void *data);
int flow_client_get(struct fsnp_client *c, const struct flow_args *a,
                    fsnp_reply_cb cb, void *data);
int flow_client_claim_due(struct fsnp_client *c, const struct flow_args *a,
                          fsnp_reply_cb cb, void *data);
int flow_client_complete(struct fsnp_client *c, const struct flow_args *a,
                         fsnp_reply_cb cb, void *data);
int flow_client_fail(struct fsnp_client *c, const struct flow_args *a,
                     fsnp_reply_cb cb, void *data);
int flow_client_retry(struct fsnp_client *c, const struct flow_args *a,
                      fsnp_reply_cb cb, void *data);
int flow_client_transition(struct fsnp_client *c, const struct flow_args *a,
                           fsnp_reply_cb cb, void *data);
int flow_client_cancel(struct fsnp_client *c, const struct flow_args *a,
                       fsnp_reply_cb cb, void *data);
int flow_client_extend_lease(struct fsnp_client *c, const struct flow_args *a,
                             fsnp_reply_cb cb, void *data);
int flow_client_history(struct fsnp_client *c, const struct flow_args *a,
                        fsnp_reply_cb cb, void *data);

/* The same on a blocking client: *status gets the FSNP status and `out`
 * the reply payload (the bytes after the status). Returns 0, an
 * FSNP_CLIENT_* error, or a FLOW_CLIENT_* error from the encoder. */
int flow_client_sync(struct fsnp_sync *s, uint16_t opcode,
                     const struct flow_args *a, uint16_t *status,
                     struct wbuf *out);

/* A flow record (GET, CLAIM_DUE records or jobs, EXTEND_LEASE's record):
 * text fields are views (len 0 when absent), integers 0 when absent
 * (the has_ flags tell the nullable ones). */
struct flow_record {
	struct fsnp_bytes id, type, state, run_state, partition_key;
	struct fsnp_bytes lease_owner, lease_token;
	int64_t version, attempts, fencing_token, priority;
	int64_t created_at_ms, updated_at_ms, next_run_at_ms;
	int64_t lease_deadline_ms;
	bool has_next_run_at_ms;
	bool has_lease_deadline_ms;
	bool has_payload; /* payload read: `payload` is its value */
	struct fsnp_val payload;
};

/* Parses a record (a map). nil gives FLOW_CLIENT_ENOTFOUND. */
int flow_client_parse_record(const struct fsnp_val *v, struct flow_record *out);

/* CLAIM_DUE's reply (a list of records or jobs): up to `cap` into out,
 * the number in *n. More than cap gives FLOW_CLIENT_EPROTO. */
int flow_client_parse_claims(const struct fsnp_val *v, struct flow_record *out,
                             size_t cap, size_t *n);

/* One HISTORY entry: [event_id, [field, value, ...]]. */
struct flow_event {
	struct fsnp_bytes event_id, event, state, lease_owner;
	int64_t version, attempts, fencing_token, at;
};

/* Parses the i-th entry of a HISTORY reply (a list); *n (may be NULL)
 * gets the list's length. i past the end gives FLOW_CLIENT_ENOTFOUND. */
int flow_client_parse_event(const struct fsnp_val *list, size_t i,
                            struct flow_event *out, size_t *n);

/* True when the reply value is the text "OK". */
bool flow_client_is_ok(const struct fsnp_val *v);

/* Decodes an ordinary reply payload (the bytes after the status) into v;
 * 0 or FLOW_CLIENT_EPROTO. */
int flow_client_decode(const uint8_t *p, size_t len, struct fsnp_val *v);

#endif
