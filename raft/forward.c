/* The forwarding RPC; see forward.h. */
#include "raft/forward.h"

#include <stdlib.h>
#include <string.h>

#include "raft/msg_codec.h"

#define DEFAULT_TIMEOUT 5000
#define DEFAULT_RETRY 50
#define MAX_HOPS 8      /* redirects followed at once, in a row */
#define MAX_REPLICAS 16 /* asked when no leader is known */
#define DEADLINE_SCAN 5 /* ticks between scans of in-flight requests */

enum { W_NONE = 0, W_WAIT, W_LOCAL, W_REMOTE };

/* One request of this node, from submit to its callback. */
struct call {
	struct forward *f;
	uint64_t id; /* of the remote attempt in flight */
	uint32_t group;
	uint8_t op;
	int where;
	forward_cb cb;
	void *data;
	uint64_t deadline;
	uint64_t hint; /* leader to try next (0 = ask the routes) */
	uint64_t peer; /* remote attempt: where and on which connection */
	uint64_t gen;
	unsigned hops;
	unsigned tries;
	struct call *prev; /* wait or remote list */
	struct call *next;
	struct call *hnext; /* id map chain (remote) */
	size_t len;
	const uint8_t *cmdp; /* the command: `cmd` or `owned` */
	uint8_t *owned;      /* forward_submit_owned's buffer, freed with us */
	bool small; /* allocated with SMALL_CMD bytes for cmd: reusable */
	uint8_t cmd[];
};

/* Calls whose command fits SMALL_CMD bytes (reads, most writes) are kept
 * for reuse when done, up to MAX_SPARE: a busy node submits hundreds of
 * thousands a second and malloc's per-thread cache holds only a few. */
#define SMALL_CMD 448
#define MAX_SPARE 1024

/* A request another node forwarded to us, waiting for our group. */
struct serve {
	struct forward *f;
	uint64_t peer;
	uint64_t gen;
	uint64_t id;
	uint32_t group;
	size_t len;
	uint8_t cmd[]; /* reads only */
};

struct list {
	struct call *head;
	struct call *tail;
};

struct forward {
	uv_loop_t *loop;
	struct transport *t;
	struct group_mgr *m;
	struct forward_options o;
	uv_timer_t timer; /* timer.data = this */
	bool timer_on;
	unsigned ticks;
	struct list waiting;
	struct list remote;
	struct call **map; /* remote calls by id */
	size_t map_cap;
	size_t map_n;
	uint64_t next_id;
	size_t n_local;
	size_t n_serving;
	bool closing;
	forward_close_cb close_cb;
	void *close_data;
	struct call *spare; /* done small calls, linked by `next` */
	size_t n_spare;
	struct forward_stats st;
};

static uint64_t now_ms(struct forward *f)
{
	return uv_now(f->loop);
}

static void list_add(struct list *l, struct call *c)
{
	c->prev = l->tail;
	c->next = NULL;
	if (l->tail != NULL) {
		l->tail->next = c;
	} else {
		l->head = c;
	}
	l->tail = c;
}

static void list_del(struct list *l, struct call *c)
{
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		l->head = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	} else {
		l->tail = c->prev;
	}
	c->prev = c->next = NULL;
}

/* ---- id map ---- */

static size_t slot(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static int map_put(struct forward *f, struct call *c)
{
	size_t i;
	if (f->map_n + 1 > f->map_cap) {
		size_t cap = f->map_cap == 0 ? 256 : f->map_cap * 2;
		struct call **m = calloc(cap, sizeof *m);
		if (m == NULL) {
			return -1;
		}
		for (i = 0; i < f->map_cap; i++) {
			struct call *x = f->map[i];
			while (x != NULL) {
				struct call *nx = x->hnext;
				size_t j = slot(x->id, cap);
				x->hnext = m[j];
				m[j] = x;
				x = nx;
			}
		}
		free(f->map);
		f->map = m;
		f->map_cap = cap;
	}
	i = slot(c->id, f->map_cap);
	c->hnext = f->map[i];
	f->map[i] = c;
	f->map_n++;
	return 0;
}

static struct call *map_get(struct forward *f, uint64_t id)
{
	struct call *c;
	if (f->map_cap == 0) {
		return NULL;
	}
	for (c = f->map[slot(id, f->map_cap)]; c != NULL; c = c->hnext) {
		if (c->id == id) {
			return c;
		}
	}
	return NULL;
}

static struct call *map_take(struct forward *f, uint64_t id)
{
	struct call **pp;
	if (f->map_cap == 0) {
		return NULL;
	}
	for (pp = &f->map[slot(id, f->map_cap)]; *pp != NULL;
	     pp = &(*pp)->hnext) {
		if ((*pp)->id == id) {
			struct call *c = *pp;
			*pp = c->hnext;
			c->hnext = NULL;
			f->map_n--;
			return c;
		}
	}
	return NULL;
}

/* ---- completion ---- */

static void unlink_call(struct call *c)
{
	struct forward *f = c->f;
	switch (c->where) {
	case W_WAIT:
		list_del(&f->waiting, c);
		break;
	case W_REMOTE:
		list_del(&f->remote, c);
		map_take(f, c->id);
		break;
	case W_LOCAL:
		f->n_local--;
		break;
	default:
		break;
	}
	c->where = W_NONE;
}

static struct call *call_new(struct forward *f, size_t len)
{
	struct call *c;

	if (len <= SMALL_CMD && f->spare != NULL) {
		c = f->spare;
		f->spare = c->next;
		f->n_spare--;
	} else {
		c = malloc(sizeof *c + (len <= SMALL_CMD ? SMALL_CMD : len));
		if (c == NULL) {
			return NULL;
		}
	}
	memset(c, 0, sizeof *c);
	c->small = len <= SMALL_CMD;
	return c;
}

static void call_free(struct forward *f, struct call *c)
{
	free(c->owned);
	c->owned = NULL;
	if (c->small && f->n_spare < MAX_SPARE) {
		c->next = f->spare;
		f->spare = c;
		f->n_spare++;
		return;
	}
	free(c);
}

static void finish(struct call *c, int status, const uint8_t *res, size_t len)
{
	struct forward *f = c->f;
	unlink_call(c);
	f->st.in_flight--;
	c->cb(c->data, status, res, len);
	call_free(f, c);
}

static void timer_cb(uv_timer_t *h);

static void arm(struct forward *f)
{
	if (!f->timer_on && !f->closing) {
		f->timer_on = true;
		uv_timer_start(&f->timer, timer_cb, f->o.retry_ms,
		               f->o.retry_ms);
	}
}

static void wait_retry(struct call *c)
{
	unlink_call(c);
	c->where = W_WAIT;
	list_add(&c->f->waiting, c);
	arm(c->f);
}

/* ---- attempts ---- */

static int attempt(struct call *c);

/* The local group refused the call after taking it ("not leader": not
 * applied). Go to another leader at once if one is known; if this node
 * still looks like the leader (e.g. it is handing leadership over), wait
 * a little instead of spinning on it. */
static void local_refused(struct call *c)
{
	struct forward *f = c->f;
	uint64_t l = f->o.leader != NULL ? f->o.leader(f->o.data, c->group) : 0;
	int rv;

	unlink_call(c);
	f->st.retries++;
	if (l == 0 || l == f->o.node_id) {
		wait_retry(c);
		return;
	}
	c->hint = l;
	rv = attempt(c);
	if (rv != 0) {
		finish(c, rv, NULL, 0);
	}
}

static void local_proposed(void *data, int status, uint8_t *result, size_t len)
{
	struct call *c = data;

	if (status == REPLICA_ENOTLEADER && !c->f->closing) {
		/* Queued here but never proposed: safe to send elsewhere. */
		free(result);
		local_refused(c);
		return;
	}
	finish(c, status, result, len);
	free(result);
}

static void local_read(void *data, int status)
{
	struct call *c = data;
	struct forward *f = c->f;
	uint8_t *res = NULL;
	size_t len = 0;

	if (!f->closing && (status == REPLICA_ENOTLEADER ||
	                    status == REPLICA_ELEADERSHIPLOST ||
	                    status == REPLICA_ESHUTDOWN)) {
		/* A read changed nothing: it can always go again. */
		local_refused(c);
		return;
	}
	if (status == REPLICA_OK &&
	    f->o.read(f->o.data, c->group, c->cmdp, c->len, &res, &len) != 0) {
		status = REPLICA_EIO;
	}
	finish(c, status, res, len);
	free(res);
}

/* Tries the group on this node. 1: not served here (*lid = leader hint),
 * 0: under way, else a final REPLICA_* error. */
static int try_local(struct call *c, uint64_t *lid)
{
	struct forward *f = c->f;
	int rv;

	*lid = 0;
	if (c->op == FORWARD_PROPOSE) {
		rv = group_propose(f->m, c->group, c->cmdp, c->len,
		                   local_proposed, c, lid);
	} else {
		rv = group_read(f->m, c->group, local_read, c, lid);
	}
	switch (rv) {
	case REPLICA_OK:
		c->where = W_LOCAL;
		f->n_local++;
		f->st.local++;
		return 0;
	case REPLICA_ENOTLEADER:
	case REPLICA_ENOGROUP:
	case REPLICA_ESHUTDOWN:
		return 1;
	default:
		return rv;
	}
}

/* A connected replica of the group other than us, round robin. */
static uint64_t pick_replica(struct call *c)
{
	struct forward *f = c->f;
	uint64_t ids[MAX_REPLICAS];
	size_t n, i;

	if (f->o.replicas == NULL || f->t == NULL) {
		return 0;
	}
	n = f->o.replicas(f->o.data, c->group, ids, MAX_REPLICAS);
	for (i = 0; i < n; i++) {
		uint64_t id = ids[(c->tries + i) % n];
		if (id != f->o.node_id && transport_connected(f->t, id)) {
			c->tries++;
			return id;
		}
	}
	return 0;
}

static int send_remote(struct call *c, uint64_t peer)
{
	struct forward *f = c->f;
	struct msg_fwd_req r;
	uint64_t now = now_ms(f);
	uint8_t *p;
	int status;

	if (f->t == NULL) {
		return -1; /* a single node: nobody to ask */
	}
	r.id = ++f->next_id;
	r.group = c->group;
	r.op = c->op == FORWARD_PROPOSE ? MSG_FWD_PROPOSE : MSG_FWD_READ;
	r.timeout_ms = c->deadline > now ? (uint32_t)(c->deadline - now) : 0;
	r.cmd = c->cmdp;
	r.len = c->len;
	c->id = r.id;
	if (map_put(f, c) != 0) {
		return -1;
	}
	p = transport_reserve(f->t, peer, MSG_FWD_REQ, msg_fwd_req_size(&r),
	                      &status);
	if (p == NULL) {
		map_take(f, c->id);
		return -1;
	}
	msg_fwd_req_write(p, &r);
	c->peer = peer;
	c->gen = transport_conn_gen(f->t, peer);
	c->where = W_REMOTE;
	list_add(&f->remote, c);
	f->st.sent++;
	arm(f);
	return 0;
}

/* Places the call: locally, remotely or in the wait list. Returns 0, or a
 * final REPLICA_* error (the call is then in no list). */
static int attempt(struct call *c)
{
	struct forward *f = c->f;
	uint64_t target = c->hint, lid = 0;
	int rv;

	if (f->closing) {
		return REPLICA_ESHUTDOWN;
	}
	c->hint = 0;
	if (target == 0 && f->o.leader != NULL) {
		target = f->o.leader(f->o.data, c->group);
	}
	if (target == 0 || target == f->o.node_id) {
		rv = try_local(c, &lid);
		if (rv != 1) {
			return rv;
		}
		target = lid != f->o.node_id ? lid : 0;
	}
	if (target == 0) {
		target = pick_replica(c);
	}
	if (target != 0 && target != f->o.node_id &&
	    send_remote(c, target) == 0) {
		return 0;
	}
	wait_retry(c);
	return 0;
}

/* `owned` (may be NULL): the command, handed over; otherwise `cmd` is
 * copied. `owned` is freed on every path. */
static int submit(struct forward *f, uint32_t group, int op, const void *cmd,
                  uint8_t *owned, size_t len, unsigned timeout_ms,
                  forward_cb cb, void *data)
{
	struct call *c;
	int rv;

	if (f->closing || (op != FORWARD_PROPOSE && op != FORWARD_READ) ||
	    len > MSG_MAX_PAYLOAD - 64) {
		free(owned);
		return f->closing                   ? REPLICA_ESHUTDOWN
		       : len > MSG_MAX_PAYLOAD - 64 ? REPLICA_ETOOBIG
		                                    : REPLICA_EINVAL;
	}
	c = call_new(f, owned != NULL ? 0 : len);
	if (c == NULL) {
		free(owned);
		return REPLICA_ENOMEM;
	}
	c->f = f;
	c->group = group;
	c->op = (uint8_t)op;
	c->cb = cb;
	c->data = data;
	c->len = len;
	if (owned != NULL) {
		c->owned = owned;
		c->cmdp = owned;
	} else {
		if (len > 0) {
			memcpy(c->cmd, cmd, len);
		}
		c->cmdp = c->cmd;
	}
	c->deadline =
	    now_ms(f) + (timeout_ms != 0 ? timeout_ms : f->o.timeout_ms);
	f->st.in_flight++;
	rv = attempt(c);
	if (rv != 0) {
		unlink_call(c);
		f->st.in_flight--;
		call_free(f, c);
		return rv;
	}
	return 0;
}

int forward_submit(struct forward *f, uint32_t group, int op, const void *cmd,
                   size_t len, unsigned timeout_ms, forward_cb cb, void *data)
{
	return submit(f, group, op, cmd, NULL, len, timeout_ms, cb, data);
}

int forward_submit_owned(struct forward *f, uint32_t group, int op,
                         uint8_t *cmd, size_t len, unsigned timeout_ms,
                         forward_cb cb, void *data)
{
	return submit(f, group, op, NULL, cmd, len, timeout_ms, cb, data);
}

/* ---- timer: retries and deadlines ---- */

static void timer_cb(uv_timer_t *h)
{
	struct forward *f = h->data;
	uint64_t now = now_ms(f);
	struct call *c, *next;
	struct list due;

	/* Retry what waits; attempts may put calls back in the list. */
	due = f->waiting;
	f->waiting.head = f->waiting.tail = NULL;
	for (c = due.head; c != NULL; c = next) {
		int rv;
		next = c->next;
		c->prev = c->next = NULL;
		c->where = W_NONE;
		if (now >= c->deadline) {
			f->st.timeouts++;
			finish(c, REPLICA_EUNAVAILABLE, NULL, 0);
			continue;
		}
		f->st.retries++;
		c->hops = 0;
		rv = attempt(c);
		if (rv != 0) {
			finish(c, rv, NULL, 0);
		}
	}
	if (++f->ticks % DEADLINE_SCAN == 0) {
		for (c = f->remote.head; c != NULL; c = next) {
			next = c->next;
			if (now < c->deadline) {
				continue;
			}
			if (c->op == FORWARD_PROPOSE) {
				f->st.unknown++;
				finish(c, REPLICA_ELEADERSHIPLOST, NULL, 0);
			} else {
				f->st.timeouts++;
				finish(c, REPLICA_EUNAVAILABLE, NULL, 0);
			}
		}
	}
	if (f->waiting.head == NULL && f->remote.head == NULL) {
		uv_timer_stop(&f->timer);
		f->timer_on = false;
	}
}

/* ---- the serving side ---- */

static void reply(struct forward *f, uint64_t peer, uint64_t gen, uint64_t id,
                  int status, uint64_t leader, const uint8_t *res, size_t len)
{
	struct msg_fwd_resp r;
	uint8_t *p;
	int st;

	if (f->closing || f->t == NULL ||
	    transport_conn_gen(f->t, peer) != gen) {
		return; /* the asker saw the connection go */
	}
	r.id = id;
	r.status = (uint8_t)status;
	r.leader = leader;
	r.result = res;
	r.len = len;
	p = transport_reserve(f->t, peer, MSG_FWD_RESP, msg_fwd_resp_size(&r),
	                      &st);
	if (p != NULL) {
		msg_fwd_resp_write(p, &r);
	}
}

static uint64_t hint_for(struct forward *f, uint32_t group, uint64_t lid,
                         uint64_t peer)
{
	if (lid == 0 && f->o.leader != NULL) {
		lid = f->o.leader(f->o.data, group);
	}
	return lid == f->o.node_id || lid == peer ? 0 : lid;
}

static void serve_done(struct serve *s, int status, const uint8_t *res,
                       size_t len)
{
	struct forward *f = s->f;
	uint64_t lid = 0;

	if (status == REPLICA_ENOTLEADER) {
		f->st.refused++;
		lid = hint_for(f, s->group, 0, s->peer);
	}
	reply(f, s->peer, s->gen, s->id, status, lid, res, len);
	f->n_serving--;
	free(s);
}

static void serve_proposed(void *data, int status, uint8_t *result, size_t len)
{
	serve_done(data, status, result, len);
	free(result);
}

static void serve_read(void *data, int status)
{
	struct serve *s = data;
	struct forward *f = s->f;
	uint8_t *res = NULL;
	size_t len = 0;

	if (status == REPLICA_OK && !f->closing &&
	    f->o.read(f->o.data, s->group, s->cmd, s->len, &res, &len) != 0) {
		status = REPLICA_EIO;
	}
	serve_done(s, status, res, len);
	free(res);
}

static void on_request(struct forward *f, uint64_t peer, const uint8_t *p,
                       size_t len)
{
	struct msg_fwd_req r;
	struct serve *s;
	uint64_t gen = transport_conn_gen(f->t, peer), lid = 0;
	int rv;

	if (msg_fwd_req_decode(p, len, &r) != 0) {
		return;
	}
	if (f->closing) {
		reply(f, peer, gen, r.id, REPLICA_ESHUTDOWN, 0, NULL, 0);
		return;
	}
	s = malloc(sizeof *s + (r.op == MSG_FWD_READ ? r.len : 0));
	if (s == NULL) {
		reply(f, peer, gen, r.id, REPLICA_ENOMEM, 0, NULL, 0);
		return;
	}
	s->f = f;
	s->peer = peer;
	s->gen = gen;
	s->id = r.id;
	s->group = r.group;
	s->len = 0;
	if (r.op == MSG_FWD_READ) {
		s->len = r.len;
		if (r.len > 0) {
			memcpy(s->cmd, r.cmd, r.len);
		}
		rv = group_read(f->m, r.group, serve_read, s, &lid);
	} else {
		rv = group_propose(f->m, r.group, r.cmd, r.len, serve_proposed,
		                   s, &lid);
	}
	if (rv == REPLICA_OK) {
		f->n_serving++;
		f->st.served++;
		return;
	}
	free(s);
	if (rv == REPLICA_ENOTLEADER || rv == REPLICA_ENOGROUP ||
	    rv == REPLICA_ESHUTDOWN) {
		/* Never forwarded again: the asker follows the hint. */
		f->st.refused++;
		reply(f, peer, gen, r.id, REPLICA_ENOTLEADER,
		      hint_for(f, r.group, lid, peer), NULL, 0);
		return;
	}
	reply(f, peer, gen, r.id, rv, 0, NULL, 0);
}

static void on_response(struct forward *f, uint64_t peer, const uint8_t *p,
                        size_t len)
{
	struct msg_fwd_resp r;
	struct call *c;
	int rv;

	if (msg_fwd_resp_decode(p, len, &r) != 0) {
		return;
	}
	c = map_get(f, r.id);
	if (c == NULL || c->peer != peer) {
		return; /* answered too late, or not by the node asked */
	}
	if (r.status != REPLICA_ENOTLEADER &&
	    !(c->op == FORWARD_READ && (r.status == REPLICA_ELEADERSHIPLOST ||
	                                r.status == REPLICA_ESHUTDOWN))) {
		finish(c, r.status, r.result, r.len);
		return;
	}
	/* Not applied: try again, at once when there is a new hint. */
	unlink_call(c);
	f->st.retries++;
	if (r.leader != 0 && r.leader != peer && c->hops < MAX_HOPS) {
		c->hops++;
		c->hint = r.leader;
		rv = attempt(c);
		if (rv != 0) {
			finish(c, rv, NULL, 0);
		}
		return;
	}
	wait_retry(c);
}

void forward_on_frame(struct forward *f, uint64_t peer, uint8_t kind,
                      const uint8_t *p, size_t len)
{
	if (kind == MSG_FWD_REQ) {
		on_request(f, peer, p, len);
	} else if (kind == MSG_FWD_RESP) {
		on_response(f, peer, p, len);
	}
}

void forward_on_peer(struct forward *f, uint64_t peer, bool up, uint64_t gen)
{
	struct call *c, *next;

	if (up) {
		return;
	}
	for (c = f->remote.head; c != NULL; c = next) {
		next = c->next;
		if (c->peer != peer || c->gen != gen) {
			continue;
		}
		if (c->op == FORWARD_READ) {
			wait_retry(c); /* reads are safe to repeat */
		} else {
			f->st.unknown++;
			finish(c, REPLICA_ELEADERSHIPLOST, NULL, 0);
		}
	}
}

void forward_stats(const struct forward *f, struct forward_stats *st)
{
	*st = f->st;
}

int forward_init(struct forward **out, uv_loop_t *loop, struct transport *t,
                 struct group_mgr *m, const struct forward_options *o)
{
	struct forward *f = calloc(1, sizeof *f);

	*out = NULL;
	if (f == NULL) {
		return REPLICA_ENOMEM;
	}
	f->loop = loop;
	f->t = t;
	f->m = m;
	f->o = *o;
	if (f->o.timeout_ms == 0) {
		f->o.timeout_ms = DEFAULT_TIMEOUT;
	}
	if (f->o.retry_ms == 0) {
		f->o.retry_ms = DEFAULT_RETRY;
	}
	uv_timer_init(loop, &f->timer);
	f->timer.data = f;
	*out = f;
	return 0;
}

static void timer_closed(uv_handle_t *h)
{
	struct forward *f = h->data;
	if (f->close_cb != NULL) {
		f->close_cb(f, f->close_data);
	}
}

void forward_close(struct forward *f, forward_close_cb cb, void *data)
{
	if (f->closing) {
		return;
	}
	f->closing = true;
	f->close_cb = cb;
	f->close_data = data;
	while (f->waiting.head != NULL) {
		finish(f->waiting.head, REPLICA_ESHUTDOWN, NULL, 0);
	}
	while (f->remote.head != NULL) {
		struct call *c = f->remote.head;
		if (c->op == FORWARD_PROPOSE) {
			f->st.unknown++;
			finish(c, REPLICA_ELEADERSHIPLOST, NULL, 0);
		} else {
			finish(c, REPLICA_ESHUTDOWN, NULL, 0);
		}
	}
	uv_timer_stop(&f->timer);
	f->timer_on = false;
	uv_close((uv_handle_t *)&f->timer, timer_closed);
}

void forward_free(struct forward *f)
{
	if (f == NULL) {
		return;
	}
	while (f->spare != NULL) {
		struct call *c = f->spare;
		f->spare = c->next;
		free(c);
	}
	free(f->map);
	free(f);
}
