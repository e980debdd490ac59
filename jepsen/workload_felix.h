/* Felix plumbing shared by the Felix workloads (stream, counter, queue,
 * idempotent, watch):
 *
 *  - struct wl_fx: one process's Felix connection to one node
 *    (client/felix_client.h over QUIC, the node's dev certificate), opened
 *    on demand, given up after a connect timeout, dropped when a request
 *    on it times out or it is lost, and reopened after a backoff;
 *  - struct wl_follow: a process's connections to every node, for what
 *    only a shard's leader serves, and the node it is asking;
 *  - tickets: the callback data of one request. A process abandons a
 *    request when its own timer gives up on it (Felix requests have no
 *    timeout of their own); the late callback then finds the ticket
 *    stale and does nothing. Tickets live until the workload is destroyed,
 *    so a late callback never touches freed memory;
 *  - the outcome of a refused Felix write: `fail` only when the broker
 *    says it did not happen.
 *
 * Everything runs on the workload's loop thread. */
#ifndef LS_JEPSEN_WORKLOAD_FELIX_H
#define LS_JEPSEN_WORKLOAD_FELIX_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "client/felix_client.h"
#include "jepsen/workload_impl.h"

#define WL_FX_TENANT "t1"
#define WL_FX_NS "jepsen"

/* The scopes every node registers at start (--scopes-file) for the Felix
 * workloads: the stream of `stream`, the queue of `queue`, the topic of
 * `idempotent`, the counters of `counter`. */
#define WL_FX_SCOPES                                                           \
	"stream t1/jepsen/s shards=4\n"                                        \
	"stream t1/jepsen/q shards=2\n"                                        \
	"stream t1/jepsen/i shards=2\n"                                        \
	"cache t1/jepsen/c shards=4\n"

/* Node flags for the Felix workloads: consumer-group claims that lapse
 * within a run's final phase, and no dead-lettering (NULL-terminated). */
extern const char *const wl_fx_args[];

struct wl_fx;

#define WL_FX_MAX_DYING 8

/* The connection came up (up = true) or an attempt failed. */
typedef void (*wl_fx_cb)(void *data, struct wl_fx *fx, bool up);

struct wl_fx {
	struct wl_ctx *x;
	unsigned node;
	/* Homed: each (re)connection goes to wl_ctx_home(x, home_idx), so
	 * a process follows membership when its connection drops. */
	bool homed;
	unsigned home_idx;
	struct felix_client *c; /* NULL when down */
	bool up;
	bool connecting;
	bool closed; /* for good */
	unsigned fails;
	int64_t retry_at_ms; /* backoff: no attempt before */
	uv_timer_t timer;    /* connect deadline, or the backoff's end */
	uv_timer_t reaper;   /* closes the dropped connections */
	struct felix_client *dying[WL_FX_MAX_DYING]; /* dropped, to close */
	unsigned n_dying;
	bool timer_init;
	wl_fx_cb cb;
	void *data;
};

void wl_fx_init(struct wl_fx *fx, struct wl_ctx *x, unsigned node, wl_fx_cb cb,
                void *data);

/* The same for the i-th process: its node is wl_ctx_home(x, i) at each
 * (re)connection. */
void wl_fx_init_home(struct wl_fx *fx, struct wl_ctx *x, unsigned i,
                     wl_fx_cb cb, void *data);

/* Brings the connection up unless it is up or on its way; `cb` follows
 * (possibly after the backoff). Returns true when it is up now. */
bool wl_fx_connect(struct wl_fx *fx);

/* Drops the connection: its pending requests fail (ECLOSED), the next
 * wl_fx_connect waits out a backoff. */
void wl_fx_reset(struct wl_fx *fx);

/* Closes for good (workload end). */
void wl_fx_close(struct wl_fx *fx);

/* --- Following a shard's leader ---------------------------------------------
 *
 * What only a shard's leader serves (subscribes, group requests, counter
 * reads, idempotent publishes, watches) a process asks one node at a time,
 * over a connection per node opened on demand: first the node that last
 * served the shard, then, when refused or unanswered, the next one in turn
 * (or the one a refusal names). Only the nodes clients may use now (the
 * endpoints, wl_ctx_is_endpoint) are asked. */

struct wl_follow {
	struct wl_fx fx[HOSTS_MAX_NODES]; /* by node id - 1, on demand */
	unsigned node;                    /* being asked (1-based) */
	unsigned tried;                   /* nodes tried for what is asked */
	const struct wl_ctx *x;
};

/* A connection per node of x (none open yet), asking `node` first. */
void wl_follow_init(struct wl_follow *f, struct wl_ctx *x, unsigned node,
                    wl_fx_cb cb, void *data);

/* Closes the connections for good (workload end). */
void wl_follow_close(struct wl_follow *f, const struct wl_ctx *x);

/* The connection to the node being asked. */
struct wl_fx *wl_follow_fx(struct wl_follow *f);

/* wl_fx_connect, wl_fx_reset of that connection; wl_follow_connect first
 * moves on to the next endpoint when the node asked is none any more. */
bool wl_follow_connect(struct wl_follow *f);
void wl_follow_reset(struct wl_follow *f);

/* Asks `node` first (the node that last served the shard, say; the next
 * endpoint when it is none now), no node tried yet. */
void wl_follow_start(struct wl_follow *f, unsigned node);

/* Moves on to the next endpoint in turn. */
void wl_follow_next(struct wl_follow *f, const struct wl_ctx *x);

/* Counts the node being asked as tried and, unless that makes every
 * endpoint, moves on to the next one (then returns true). */
bool wl_follow_retry(struct wl_follow *f, const struct wl_ctx *x);

/* --- Tickets ----------------------------------------------------------------
 */

struct wl_ticket {
	struct wl_ticket *next;
	void *owner; /* NULL once abandoned */
	uint64_t seq;
	struct wl_fx *fx;
};

struct wl_tickets {
	struct wl_ticket *head;
};

/* A ticket for owner's request number seq; NULL when out of memory. */
struct wl_ticket *wl_ticket_new(struct wl_tickets *t, void *owner, uint64_t seq,
                                struct wl_fx *fx);
void wl_tickets_free(struct wl_tickets *t);

/* Abandons the request of *k, if any (its callback finds the ticket stale),
 * and clears *k. */
void wl_ticket_drop(struct wl_ticket **k);

/* Publishes the record `r<rec>` keyed `key` to `stream` of WL_FX_NS on
 * fx's connection (up), acknowledged per batch: felix_client_publish. */
int wl_fx_publish_rec(struct wl_fx *fx, const char *stream, const char *key,
                      uint64_t rec, felix_client_ack_cb cb, void *data);

/* The outcome of a refused write (status FELIX_CLIENT_*, the broker's
 * message): WL_FAIL when it certainly did not happen, else WL_INFO. */
enum wl_type wl_fx_write_outcome(int status, const char *message);

/* A key that the Felix routing hash sends to `shard` of `shards`
 * ("<prefix><n>", the first such n). */
void wl_fx_key_for_shard(const char *prefix, unsigned shard, unsigned shards,
                         char *out, size_t cap);

#endif
