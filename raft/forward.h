/* The forwarding RPC: "propose this command on the leader of group g" and
 * "run this linearizable read on the leader of group g", answered with the
 * leader's result, over the node transport (raft/transport.h).
 *
 * forward_submit() runs a command wherever the leader is: on this node
 * when it leads the group (group_propose / group_read), else on the leader
 * the routing callback names, else on any connected replica of the group
 * (which answers "not leader" with its own hint). A request that is
 * refused with "not leader" was not applied, so it is retried: at once
 * towards the hint, or after `retry_ms` while an election runs, until the
 * deadline. Then the caller gets REPLICA_EUNAVAILABLE.
 *
 * A forwarded request is never forwarded again: a node that is not the
 * leader answers REPLICA_ENOTLEADER with its leader hint.
 *
 * A write whose connection breaks before the answer, or that is not
 * answered by its deadline, ends with REPLICA_ELEADERSHIPLOST: it may or
 * may not have been applied. Reads are retried instead.
 *
 * Callbacks never run inside forward_submit(). Everything runs on the loop
 * thread. */
#ifndef LS_RAFT_FORWARD_H
#define LS_RAFT_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "raft/group.h"
#include "raft/transport.h"

struct forward;

enum { FORWARD_PROPOSE = 1, FORWARD_READ = 2 };

/* The outcome: REPLICA_* status and, on REPLICA_OK, the result bytes
 * (borrowed: valid during the call). */
typedef void (*forward_cb)(void *data, int status, const uint8_t *result,
                           size_t len);

/* Serves a read command on this node, the leader, after its barrier:
 * `*result` is malloc'd (the forward module frees it). Non-zero on a
 * storage failure. */
typedef int (*forward_read_fn)(void *data, uint32_t group, const uint8_t *cmd,
                               size_t len, uint8_t **result, size_t *rlen);

/* The leader of `group` as this node knows it (0 = unknown). */
typedef uint64_t (*forward_leader_fn)(void *data, uint32_t group);

/* The replicas of `group` (any order); returns how many were written. */
typedef size_t (*forward_replicas_fn)(void *data, uint32_t group, uint64_t *out,
                                      size_t max);

typedef void (*forward_close_cb)(struct forward *f, void *data);

struct forward_options {
	uint64_t node_id;
	unsigned timeout_ms; /* deadline of a request; 0 = 5000 */
	unsigned retry_ms;   /* pause while no leader answers; 0 = 50 */
	forward_read_fn read;
	forward_leader_fn leader;
	forward_replicas_fn replicas;
	void *data;
};

struct forward_stats {
	uint64_t local;     /* requests served by this node as leader */
	uint64_t sent;      /* requests sent to another node */
	uint64_t served;    /* requests served for other nodes */
	uint64_t refused;   /* requests answered "not leader" here */
	uint64_t retries;   /* attempts after a "not leader" or a wait */
	uint64_t timeouts;  /* requests that found no leader in time */
	uint64_t unknown;   /* writes that ended with an unknown outcome */
	uint64_t in_flight; /* requests not answered yet */
};

/* `t` may be NULL (a single node): only local groups serve. */
int forward_init(struct forward **out, uv_loop_t *loop, struct transport *t,
                 struct group_mgr *m, const struct forward_options *o);

/* Runs `cmd` (copied) on the leader of `group`. `timeout_ms` 0 takes the
 * default. 0: `cb` runs exactly once, later. Otherwise (REPLICA_ETOOBIG,
 * REPLICA_EBUSY, REPLICA_ENOMEM, REPLICA_ESHUTDOWN) `cb` never runs. */
int forward_submit(struct forward *f, uint32_t group, int op, const void *cmd,
                   size_t len, unsigned timeout_ms, forward_cb cb, void *data);
/* As forward_submit with `cmd` (malloc'd) handed over instead of copied:
 * it is freed when the call ends, and at once on a non-zero return. */
int forward_submit_owned(struct forward *f, uint32_t group, int op,
                         uint8_t *cmd, size_t len, unsigned timeout_ms,
                         forward_cb cb, void *data);

/* Transport frames of kinds MSG_FWD_REQ and MSG_FWD_RESP, and
 * connection changes (from the transport's callbacks). */
void forward_on_frame(struct forward *f, uint64_t peer, uint8_t kind,
                      const uint8_t *p, size_t len);
void forward_on_peer(struct forward *f, uint64_t peer, bool up, uint64_t gen);

void forward_stats(const struct forward *f, struct forward_stats *st);

/* Fails every request not waiting on a local group (those end when the
 * groups close), refuses new ones, then calls `cb`. Free with
 * forward_free() only after the group manager closed. */
void forward_close(struct forward *f, forward_close_cb cb, void *data);
void forward_free(struct forward *f);

#endif
