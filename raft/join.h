/* Asking a member to admit this node: one short connection to a member's
 * internal listener that sends MSG_JOIN (this node's id, cluster id and
 * record) and reads the one MSG_JOIN_RESP (raft/msg_codec.h) that comes
 * back. The member records the node as joining in the meta group and
 * answers with the members it knows; the node's transport then dials them
 * like any peer (docs/cluster.md "Membership").
 *
 * With internal TLS (a client context) the connection runs TLS first: the
 * member's certificate must be verified by the cluster CA and name a node
 * (CN=node-<id>) before the request is sent.
 *
 * Everything runs on the loop thread. */
#ifndef LS_RAFT_JOIN_H
#define LS_RAFT_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "raft/msg_codec.h"

/* Connection failed, timed out, or the answer was malformed. */
#define JOIN_EFAILED (-1)
/* join_cancel() was called. */
#define JOIN_ECANCELED (-2)

struct join;
struct tls_ctx;

/* The outcome: a MSG_HS_* status with the answer's text (the members, or
 * the reason of a refusal; NUL-terminated, valid during the call), or a
 * JOIN_E* code with a description. Called exactly once. */
typedef void (*join_cb)(void *data, int status, const char *text);

/* Starts one request to `addr` (over TLS with `tls`, a client context,
 * or NULL); the request frees itself after `cb`. */
int join_start(struct join **out, uv_loop_t *loop, const struct sockaddr *addr,
               const struct msg_join *req, struct tls_ctx *tls,
               unsigned timeout_ms, join_cb cb, void *data);

/* Ends the request now: `cb` runs with JOIN_ECANCELED before returning. */
void join_cancel(struct join *j);

#endif
