/* The FSNP listener: accepts connections, flushes their output once per
 * loop turn, runs store operations (waiting for a shard's leader when none
 * is known yet), parks fetch-or-compute waiters, sends events and drains
 * on close. See fsnp_server.h and fsnp_internal.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "flow/flow.h"
#include "node/fsnp/fsnp_internal.h"
#include "wire/fsnp_opcode.h"

#define TICK_MS 10u

uint64_t fsnp_now_ms(const struct fsnp_server *s)
{
	return shards_now_ms(s->shards);
}

static void handle_closed(uv_handle_t *h);
static void maybe_free(struct fsnp_server *s);

/* --- Dirty connections: one flush per loop turn ------------------------- */

static void on_wake(uv_idle_t *h)
{
	(void)h; /* only keeps the loop from blocking before the flush */
}

void fsnp_server_mark_dirty(struct fsnp_server *s, struct fsnp_conn *c)
{
	if (c->dirty || c->closing) {
		return;
	}
	c->dirty = true;
	c->dnext = s->dirty;
	s->dirty = c;
	if (!uv_is_active((uv_handle_t *)&s->wake) && !s->closed) {
		uv_idle_start(&s->wake, on_wake);
	}
}

static void on_flush(uv_check_t *h)
{
	struct fsnp_server *s = h->data;
	while (s->dirty != NULL) {
		struct fsnp_conn *c = s->dirty;
		s->dirty = c->dnext;
		c->dnext = NULL;
		c->dirty = false;
		fsnp_conn_resume(c);
		fsnp_conn_flush(c);
	}
	uv_idle_stop(&s->wake);
}

/* --- Store operations and leader waits ---------------------------------- */

static void on_tick(uv_timer_t *t);

static void tick_arm(struct fsnp_server *s)
{
	if (!s->tick_running && !s->closed) {
		s->tick_running = true;
		uv_timer_start(&s->tick, on_tick, TICK_MS, TICK_MS);
	}
}

static void on_shards(void *data, int status, const uint8_t *result, size_t len)
{
	struct fsnp_op *op = data;
	struct fsnp_server *s = op->req->srv;
	s->ops_outstanding--;
	fsnp_exec_op_done(op, status, result, len);
	maybe_free(s);
}

static int try_op(struct fsnp_server *s, struct fsnp_op *op)
{
	const struct fsnp_part *p = &op->req->plan.parts[op->part];
	int rv;
	s->ops_outstanding++;
	if (p->read) {
		rv = shards_read_cmd(s->shards, p->group, p->cmd, p->len,
		                     on_shards, op);
	} else {
		rv = shards_propose(s->shards, p->group, p->cmd, p->len,
		                    on_shards, op);
	}
	if (rv != SHARDS_OK) {
		s->ops_outstanding--;
	}
	return rv;
}

/* A leader other than this node is known for the group. */
static bool leader_elsewhere(struct fsnp_server *s, uint32_t group)
{
	bool self;
	uint64_t leader = shards_leader(s->shards, group, &self);
	return leader != 0 && !self;
}

static void gwait_push(struct fsnp_server *s, struct fsnp_op *op)
{
	const struct fsnp_part *p = &op->req->plan.parts[op->part];
	struct fsnp_gwait *q = &s->gwait[p->group];
	op->next = NULL;
	op->since_ms = uv_now(s->loop);
	if (q->tail == NULL) {
		q->head = op;
	} else {
		q->tail->next = op;
	}
	q->tail = op;
	s->n_waiting++;
	tick_arm(s);
}

static struct fsnp_op *gwait_pop(struct fsnp_server *s, struct fsnp_gwait *q)
{
	struct fsnp_op *op = q->head;
	q->head = op->next;
	if (q->head == NULL) {
		q->tail = NULL;
	}
	op->next = NULL;
	s->n_waiting--;
	return op;
}

void fsnp_server_submit(struct fsnp_server *s, struct fsnp_op *op)
{
	uint32_t g = op->req->plan.parts[op->part].group;
	int rv;
	/* Group 0 only for the meta commands FSNP plans (ACL users). */
	if ((g == 0 && !store_op_is_meta(op->req->plan.op)) ||
	    g > s->data_groups) {
		fsnp_exec_op_done(op, SHARDS_ENOGROUP, NULL, 0);
		return;
	}
	if (s->draining && s->closed) {
		fsnp_exec_op_done(op, SHARDS_ESHUTDOWN, NULL, 0);
		return;
	}
	/* Behind ops already waiting for this group: arrival order. */
	if (s->gwait[g].head != NULL) {
		gwait_push(s, op);
		return;
	}
	rv = try_op(s, op);
	if (rv == SHARDS_OK) {
		return;
	}
	if (rv == SHARDS_ENOTLEADER && !leader_elsewhere(s, g)) {
		gwait_push(s, op);
		return;
	}
	fsnp_exec_op_done(op, rv, NULL, 0);
}

static void tick_waits(struct fsnp_server *s, uint64_t now)
{
	uint64_t wall = fsnp_now_ms(s);
	for (uint32_t g = 0; g <= s->data_groups && s->n_waiting > 0; g++) {
		struct fsnp_gwait *q = &s->gwait[g];
		while (q->head != NULL) {
			struct fsnp_op *op = q->head;
			struct fsnp_req *r = op->req;
			int rv;
			if (fsnp_req_orphaned(r)) {
				fsnp_exec_op_done(gwait_pop(s, q),
				                  SHARDS_ESHUTDOWN, NULL, 0);
				continue;
			}
			if (r->deadline_ms > 0 && wall > r->deadline_ms) {
				fsnp_exec_op_done(gwait_pop(s, q),
				                  FSNP_OP_DEADLINE, NULL, 0);
				continue;
			}
			if (now - op->since_ms >= FSNP_LEADER_WAIT_MS) {
				fsnp_exec_op_done(gwait_pop(s, q),
				                  SHARDS_EUNAVAILABLE, NULL, 0);
				continue;
			}
			rv = try_op(s, op);
			if (rv == SHARDS_OK) {
				gwait_pop(s, q);
				continue;
			}
			if (rv == SHARDS_ENOTLEADER &&
			    !leader_elsewhere(s, g)) {
				break; /* still no leader */
			}
			fsnp_exec_op_done(gwait_pop(s, q), rv, NULL, 0);
		}
	}
}

/* --- Fetch-or-compute waiters ------------------------------------------ */

void fsnp_server_foc_park(struct fsnp_server *s, struct fsnp_req *r)
{
	if (fsnp_req_orphaned(r) || s->draining) {
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute",
		                 "REROUTE node shutting down", true,
		                 FSNP_RETRY_AFTER_MS);
		fsnp_req_complete(r);
		return;
	}
	if (s->blocking >= s->lim.max_global_blocking_requests) {
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY too many requests waiting on "
		                 "fetch-or-compute",
		                 true, FSNP_RETRY_AFTER_MS);
		fsnp_req_complete(r);
		return;
	}
	if (r->poll_every_ms == 0) {
		r->poll_every_ms = 25;
	} else if (r->poll_every_ms < 1000) {
		r->poll_every_ms *= 2;
	}
	/* A blocked waiter does not execute: its global execution slot is
	 * lent back (the blocking budget bounds waiters). */
	if (r->counted && !r->slot_lent) {
		r->slot_lent = true;
		s->executions--;
	}
	r->waiting = true;
	r->next_poll_ms = uv_now(s->loop) + r->poll_every_ms;
	r->wnext = s->foc;
	s->foc = r;
	s->blocking++;
	tick_arm(s);
}

void fsnp_server_flow_park(struct fsnp_server *s, struct fsnp_req *r,
                           uint64_t after_ms)
{
	if (fsnp_req_orphaned(r) || s->draining) {
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute",
		                 "REROUTE node shutting down", true,
		                 FSNP_RETRY_AFTER_MS);
		fsnp_exec_finish(r);
		return;
	}
	if (s->blocking >= s->lim.max_global_blocking_requests) {
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY too many blocked requests", true,
		                 FSNP_RETRY_AFTER_MS);
		fsnp_exec_finish(r);
		return;
	}
	if (r->counted && !r->slot_lent) {
		r->slot_lent = true;
		s->executions--;
	}
	r->waiting = true;
	r->next_poll_ms = uv_now(s->loop) + after_ms;
	r->wnext = s->foc;
	s->foc = r;
	s->blocking++;
	tick_arm(s);
}

void fsnp_server_flow_retime(struct fsnp_server *s, struct fsnp_req *r,
                             uint64_t after_ms)
{
	uint64_t at = uv_now(s->loop) + after_ms;
	if (r->waiting && r->next_poll_ms > at) {
		r->next_poll_ms = at;
		tick_arm(s);
	}
}

void fsnp_server_on_flow_write(struct fsnp_server *s,
                               fsnp_server_flow_write_cb cb, void *data)
{
	s->on_flow_write = cb;
	s->on_flow_write_data = data;
}

void fsnp_server_flow_kick(struct fsnp_server *s)
{
	uint64_t now = uv_now(s->loop);
	if (s->on_flow_write != NULL) {
		s->on_flow_write(s->on_flow_write_data);
	}
	for (struct fsnp_req *r = s->foc; r != NULL; r = r->wnext) {
		if (r->flow != NULL && r->next_poll_ms > now) {
			r->next_poll_ms = now;
		}
	}
}

/* Unlinks every waiter matching `pick` into a list of its own. */
static struct fsnp_req *foc_take(struct fsnp_server *s,
                                 bool (*pick)(struct fsnp_req *, void *),
                                 void *arg)
{
	struct fsnp_req **pp = &s->foc, *out = NULL, **tail = &out;
	while (*pp != NULL) {
		struct fsnp_req *r = *pp;
		if (pick(r, arg)) {
			*pp = r->wnext;
			r->wnext = NULL;
			*tail = r;
			tail = &r->wnext;
			s->blocking--;
		} else {
			pp = &r->wnext;
		}
	}
	return out;
}

struct key_arg {
	const uint8_t *key;
	size_t len;
};

static bool pick_key(struct fsnp_req *r, void *arg)
{
	struct key_arg *k = arg;
	struct store_cmd c;
	const char *emsg;
	if (r->flow != NULL) {
		return false;
	}
	if (store_cmd_decode(r->plan.parts[0].cmd, r->plan.parts[0].len, &c,
	                     &emsg) != 0) {
		return false;
	}
	return c.key.len == k->len &&
	       (k->len == 0 || memcmp(c.key.p, k->key, k->len) == 0);
}

void fsnp_server_foc_finish(struct fsnp_server *s, const uint8_t *key,
                            size_t klen, bool ok, const uint8_t *value,
                            size_t vlen)
{
	struct key_arg k = {key, klen};
	struct fsnp_req *list = foc_take(s, pick_key, &k);
	while (list != NULL) {
		struct fsnp_req *r = list;
		list = r->wnext;
		r->wnext = NULL;
		fsnp_exec_foc_wake(r, ok, value, vlen);
	}
}

static bool pick_due(struct fsnp_req *r, void *arg)
{
	uint64_t now = *(uint64_t *)arg;
	return fsnp_req_orphaned(r) || now >= r->next_poll_ms;
}

static void tick_foc(struct fsnp_server *s, uint64_t now)
{
	struct fsnp_req *list = foc_take(s, pick_due, &now);
	while (list != NULL) {
		struct fsnp_req *r = list;
		list = r->wnext;
		r->wnext = NULL;
		if (fsnp_req_orphaned(r)) {
			r->waiting = false;
			fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
			                 "ERR connection closed", false, 0);
			fsnp_req_complete(r);
		} else {
			fsnp_exec_foc_poll(r);
		}
	}
}

/* Answers every waiter "reroute": the node is shutting down. */
static void foc_fail_all(struct fsnp_server *s)
{
	uint64_t forever = UINT64_MAX;
	struct fsnp_req *list = foc_take(s, pick_due, &forever);
	while (list != NULL) {
		struct fsnp_req *r = list;
		list = r->wnext;
		r->wnext = NULL;
		r->waiting = false;
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute",
		                 "REROUTE node shutting down", true,
		                 FSNP_RETRY_AFTER_MS);
		fsnp_req_complete(r);
	}
}

static void on_tick(uv_timer_t *t)
{
	struct fsnp_server *s = t->data;
	uint64_t now = uv_now(s->loop);
	if (s->n_waiting > 0) {
		tick_waits(s, now);
	}
	if (s->foc != NULL) {
		tick_foc(s, now);
	}
	if (s->n_waiting == 0 && s->foc == NULL) {
		uv_timer_stop(&s->tick);
		s->tick_running = false;
	}
}

void fsnp_server_token(struct fsnp_server *s, char out[33])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[16];
	if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
		/* Fall back on the start-up seed and a counter. */
		uint64_t n = ++s->token_seq;
		memcpy(b, s->rng, sizeof b);
		for (int i = 0; i < 8; i++) {
			b[i] ^= (uint8_t)(n >> (8 * i));
		}
	}
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[32] = '\0';
}

/* --- Events and sweeps -----------------------------------------------------
 */

uint64_t fsnp_server_route_epoch(struct fsnp_server *s)
{
	/* The routing snapshot's generation: bumped whenever a leader or a
	 * node's addresses change, i.e. exactly when routing answers would;
	 * mixed with the shard count. Kept exact in a double (JavaScript
	 * clients). */
	uint64_t g = shards_generation(s->shards);
	return (g * 4099 + s->data_groups) & ((1ull << 53) - 1);
}

bool fsnp_server_pressure(const struct fsnp_server *s)
{
	return s->executions * 10 >= s->lim.max_global_executions * 9 ||
	       (s->lim.max_global_blocking_requests > 0 &&
	        s->blocking * 10 >= s->lim.max_global_blocking_requests * 9) ||
	       s->outbound_bytes * 10 >= s->lim.max_global_outbound_bytes * 9 ||
	       s->session_bytes * 10 >= s->lim.max_global_session_bytes * 9;
}

void fsnp_server_broadcast(struct fsnp_server *s, uint32_t ev, const char *name,
                           const struct wbuf *payload)
{
	for (struct fsnp_conn *c = s->conns; c != NULL; c = c->next) {
		if ((c->events & ev) && !c->closing) {
			fsnp_conn_event(c, name, payload);
		}
	}
}

bool fsnp_server_has_subscriber(const struct fsnp_server *s, uint32_t ev)
{
	for (const struct fsnp_conn *c = s->conns; c != NULL; c = c->next) {
		if ((c->events & ev) && !c->closing) {
			return true;
		}
	}
	return false;
}

static void on_sweep(uv_timer_t *t)
{
	struct fsnp_server *s = t->data;
	uint64_t now = uv_now(s->loop);
	struct fsnp_conn *c, *next;
	for (c = s->conns; c != NULL; c = next) {
		next = c->next;
		fsnp_conn_check_timeouts(c, now);
		if (!c->closing && !c->reading) {
			fsnp_conn_update_reading(c);
		}
	}
	fsnp_acl_sweep(s, now);
	uint64_t epoch = fsnp_server_route_epoch(s);
	if (epoch != s->route_epoch) {
		struct wbuf b;
		struct fsnp_writer w;
		char node[32];
		s->route_epoch = epoch;
		snprintf(node, sizeof node, "%" PRIu64, s->node_id);
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "route_epoch");
		fsnp_w_u64(&w, epoch);
		fsnp_w_key(&w, "node");
		fsnp_w_str(&w, node);
		fsnp_w_map_end(&w);
		if (fsnp_w_finish(&w) == 0) {
			fsnp_server_broadcast(s, FSNP_EV_TOPOLOGY,
			                      "TOPOLOGY_CHANGED", &b);
		}
		wbuf_free(&b);
	}
	bool p = fsnp_server_pressure(s);
	if (p != s->pressure) {
		struct wbuf b;
		struct fsnp_writer w;
		s->pressure = p;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_control_backpressure(s, &w);
		if (fsnp_w_finish(&w) == 0) {
			fsnp_server_broadcast(s, FSNP_EV_BACKPRESSURE,
			                      "BACKPRESSURE_CHANGED", &b);
		}
		wbuf_free(&b);
	}
}

/* --- Connections ------------------------------------------------------- */

static void on_connection(uv_stream_t *l, int status)
{
	struct fsnp_server *s = l->data;
	struct fsnp_conn *c;
	if (status < 0) {
		log_warn(s->log, "fsnp", "accept: %s", uv_strerror(status));
		return;
	}
	c = fsnp_conn_new(s, l == (uv_stream_t *)&s->tls_listener ? s->tls_ctx
	                                                          : NULL);
	if (c == NULL) {
		return;
	}
	if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
		fsnp_conn_close(c);
		return;
	}
	if (s->n_conns > s->lim.maxclients || s->draining) {
		uint64_t now = uv_now(s->loop);
		s->stats.conns_refused++;
		if (now - s->refusal_logged_ms >= 1000) {
			s->refusal_logged_ms = now;
			log_warn(s->log, "fsnp",
			         "refusing a connection: maxclients %u reached",
			         s->lim.maxclients);
		}
		fsnp_conn_close(c);
		return;
	}
	s->stats.conns_accepted++;
	metric_add(s->m_conns_total, 1);
	if (fsnp_conn_start(c) != 0) {
		fsnp_conn_close(c);
	}
}

static void finish_close(struct fsnp_server *s);

void fsnp_server_conn_gone(struct fsnp_server *s, struct fsnp_conn *c)
{
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		s->conns = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	if (c->dirty) {
		struct fsnp_conn **pp = &s->dirty;
		while (*pp != NULL && *pp != c) {
			pp = &(*pp)->dnext;
		}
		if (*pp == c) {
			*pp = c->dnext;
		}
	}
	s->n_conns--;
	metric_set(s->m_conns, (int64_t)s->n_conns);
	if (s->draining && s->n_conns == 0) {
		finish_close(s);
	}
}

/* --- Start -----------------------------------------------------------------
 */

unsigned fsnp_metric_slot(uint16_t opcode)
{
	const struct fsnp_opcode_info *info = fsnp_opcode_info(opcode);
	size_t i;

	if (info == NULL) {
		return FSNP_METRIC_OPS - 1;
	}
	i = (size_t)(info - fsnp_opcode_at(0));
	return i < FSNP_METRIC_OPS - 1 ? (unsigned)i : FSNP_METRIC_OPS - 1;
}

/* Per-opcode families and the execution queue at scrape time; opcodes
 * never used are left out, so the scrape stays small. */
static void metrics_collect(void *data, struct metrics_out *o)
{
	const struct fsnp_server *s = data;
	char labels[80];

	metrics_out_family(
	    o, "lodestone_fsnp_requests_in_flight", METRIC_GAUGE,
	    "FSNP requests executing (holding an execution slot)");
	metrics_out_uint(o, "lodestone_fsnp_requests_in_flight", NULL,
	                 s->executions);
	metrics_out_family(o, "lodestone_fsnp_session_memory_bytes",
	                   METRIC_GAUGE,
	                   "Bytes charged to the FSNP session budget (requests "
	                   "queued and executing)");
	metrics_out_uint(o, "lodestone_fsnp_session_memory_bytes", NULL,
	                 s->session_bytes);
	metrics_out_family(o, "lodestone_fsnp_outbound_queue_bytes",
	                   METRIC_GAUGE,
	                   "FSNP reply bytes queued and not yet written");
	metrics_out_uint(o, "lodestone_fsnp_outbound_queue_bytes", NULL,
	                 s->outbound_bytes);
	metrics_out_family(o, "lodestone_fsnp_opcode_requests_total",
	                   METRIC_COUNTER, "FSNP requests received, by opcode");
	for (unsigned i = 0; i < FSNP_METRIC_OPS; i++) {
		if (s->op_requests[i] == 0) {
			continue;
		}
		const struct fsnp_opcode_info *info = fsnp_opcode_at(i);
		snprintf(labels, sizeof labels, "opcode=\"%s\"",
		         i < FSNP_METRIC_OPS - 1 && info != NULL ? info->name
		                                                 : "unknown");
		metrics_out_uint(o, "lodestone_fsnp_opcode_requests_total",
		                 labels, s->op_requests[i]);
	}
	metrics_out_family(o, "lodestone_fsnp_request_duration_seconds",
	                   METRIC_HISTOGRAM,
	                   "FSNP request latency from arrival to the reply, "
	                   "by opcode");
	for (unsigned i = 0; i < FSNP_METRIC_OPS; i++) {
		const struct metric_hist *h = &s->op_latency[i];
		if (h->count == 0) {
			continue;
		}
		const struct fsnp_opcode_info *info = fsnp_opcode_at(i);
		snprintf(labels, sizeof labels, "opcode=\"%s\"",
		         i < FSNP_METRIC_OPS - 1 && info != NULL ? info->name
		                                                 : "unknown");
		metrics_out_hist(o, "lodestone_fsnp_request_duration_seconds",
		                 labels, metric_hist_bounds_ns, h->bucket,
		                 METRIC_HIST_BOUNDS, h->count, h->sum_ns);
	}
}

static void init_metrics(struct fsnp_server *s, struct metrics *m)
{
	if (m == NULL) {
		return;
	}
	s->m_conns = metrics_gauge(m, "lodestone_fsnp_connections",
	                           "FSNP connections open", NULL);
	s->m_conns_total =
	    metrics_counter(m, "lodestone_fsnp_connections_accepted_total",
	                    "FSNP connections accepted", NULL);
	s->m_requests = metrics_counter(m, "lodestone_fsnp_requests_total",
	                                "FSNP requests received", NULL);
	s->m_busy = metrics_counter(m, "lodestone_fsnp_busy_total",
	                            "FSNP requests answered busy", NULL);
	for (unsigned st = 1; st < FSNP_METRIC_STATUSES; st++) {
		char labels[48];
		const char *name = fsnp_status_name(st);
		if (name == NULL) {
			continue;
		}
		snprintf(labels, sizeof labels, "status=\"%s\"", name);
		s->m_errors[st] = metrics_counter(
		    m, "lodestone_fsnp_errors_total",
		    "FSNP requests answered with an error status, by status",
		    labels);
	}
	s->m_bytes_in = metrics_counter(m, "lodestone_fsnp_bytes_in_total",
	                                "FSNP bytes received", NULL);
	s->m_bytes_out = metrics_counter(m, "lodestone_fsnp_bytes_out_total",
	                                 "FSNP bytes sent", NULL);
	s->m_flow_compact = metrics_counter(
	    m, "lodestone_fsnp_flow_compact_requests_total",
	    "FerricFlow requests received in a compact (flag 0x02) form", NULL);
	s->m_flow_compact_replies = metrics_counter(
	    m, "lodestone_fsnp_flow_compact_replies_total",
	    "FerricFlow replies sent in a compact codec (flow_claim_jobs_v1, "
	    "flow_record_v1, flow_record_list_v1)",
	    NULL);
	s->m_flow_query_compact = metrics_counter(
	    m, "lodestone_fsnp_flow_query_compact_replies_total",
	    "FLOW.QUERY results sent as flow_query_result_v1 (0xA0)", NULL);
	metrics_add_collector(m, metrics_collect, s);
}

static int bind_listener(struct fsnp_server *s, uv_tcp_t *t, const char *what,
                         const char *host, uint16_t port, uint16_t *bound,
                         char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int rv;
	if (strchr(host, ':') != NULL) {
		rv = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
	} else {
		rv = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s: '%s' is not a numeric address", what,
		         host);
		return -1;
	}
	(void)s;
	rv = uv_tcp_bind(t, (const struct sockaddr *)&ss, 0);
	if (rv == 0) {
		rv = uv_listen((uv_stream_t *)t, 511, on_connection);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s: cannot listen on %s:%u: %s", what,
		         host, port, uv_strerror(rv));
		return -1;
	}
	int len = sizeof ss;
	uv_tcp_getsockname(t, (struct sockaddr *)&ss, &len);
	*bound = ntohs(ss.ss_family == AF_INET6
	                   ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                   : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* The TLS listener, when fsnp-tls was given: the certificate (given, or
 * the dev one) is required; without one only require_tls is an error. */
static int start_tls(struct fsnp_server *s,
                     const struct fsnp_server_config *cfg, char *err,
                     size_t errlen)
{
	s->advertise_tls_port = 0;
	if (!s->lim.tls_enabled) {
		return 0;
	}
	if (s->tls_cert[0] == '\0' || s->tls_key[0] == '\0') {
		if (s->lim.require_tls) {
			snprintf(
			    err, errlen,
			    "FSNP TLS: fsnp-require-tls needs a certificate "
			    "(tls-cert and tls-key, or --dev)");
			return -1;
		}
		log_warn(s->log, "fsnp",
		         "FSNP TLS not started on %s:%u: no tls-cert/tls-key "
		         "(give them, or run with --dev)",
		         s->lim.tls_host, s->lim.tls_port);
		return 0;
	}
	if (tls_ctx_new(&s->tls_ctx, s->tls_cert, s->tls_key, s->lim.tls_ca,
	                err, errlen) != 0) {
		return -1;
	}
	uv_tcp_init(s->loop, &s->tls_listener);
	s->tls_listener.data = s;
	s->handles++;
	if (bind_listener(s, &s->tls_listener, "FSNP TLS", s->lim.tls_host,
	                  s->lim.tls_port, &s->tls_port, err, errlen) != 0) {
		uv_close((uv_handle_t *)&s->tls_listener, handle_closed);
		return -1;
	}
	s->tls_listening = true;
	s->advertise_tls_port = cfg->advertise_tls_port
	                            ? cfg->advertise_tls_port
	                        : s->lim.advertise_tls_port != 0
	                            ? (uint16_t)s->lim.advertise_tls_port
	                            : s->tls_port;
	log_info(s->log, "fsnp", "FSNP TLS on %s:%u (%s)%s%s", s->lim.tls_host,
	         s->tls_port,
	         tls_ctx_verifies_clients(s->tls_ctx)
	             ? "client certificates required"
	             : "no client certificates",
	         s->lim.require_tls ? "; plaintext FSNP refused" : "",
	         s->lim.trace ? "; tracing on" : "");
	return 0;
}

int fsnp_server_start(struct fsnp_server **out, uv_loop_t *loop,
                      struct shards *shards,
                      const struct fsnp_server_config *cfg,
                      const struct log *log, struct metrics *metrics, char *err,
                      size_t errlen)
{
	struct fsnp_server *s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "FSNP: out of memory");
		return -1;
	}
	s->loop = loop;
	s->shards = shards;
	s->log = log;
	fsnp_acl_init(s);
	fsnp_acl_load_local(s);
	s->lim = cfg->limits;
	s->node_id = cfg->node_id;
	s->data_groups = shards_data_groups(shards);
	s->scan_cursors = cfg->scan_cursors;
	snprintf(s->advertise_host, sizeof s->advertise_host, "%s",
	         cfg->advertise_host != NULL ? cfg->advertise_host : cfg->host);
	s->advertise_tls_port = cfg->advertise_tls_port;
	snprintf(s->tls_cert, sizeof s->tls_cert, "%s",
	         cfg->tls_cert_file != NULL ? cfg->tls_cert_file : "");
	snprintf(s->tls_key, sizeof s->tls_key, "%s",
	         cfg->tls_key_file != NULL ? cfg->tls_key_file : "");
	s->gwait = calloc(s->data_groups + 1, sizeof *s->gwait);
	if (s->gwait == NULL) {
		free(s);
		snprintf(err, errlen, "FSNP: out of memory");
		return -1;
	}
	if (getrandom(s->rng, sizeof s->rng, GRND_NONBLOCK) !=
	    (ssize_t)sizeof s->rng) {
		uint64_t t = uv_hrtime();
		memcpy(s->rng, &t, sizeof t);
	}
	s->metrics = metrics;
	init_metrics(s, metrics);
	uv_tcp_init(loop, &s->listener);
	s->listener.data = s;
	s->handles++;
	if (bind_listener(s, &s->listener, "FSNP", cfg->host, cfg->port,
	                  &s->port, err, errlen) != 0) {
		uv_close((uv_handle_t *)&s->listener, handle_closed);
		/* Let the close finish before freeing. */
		s->closed = true;
		return -1;
	}
	s->listening = true;
	s->advertise_port = cfg->advertise_port ? cfg->advertise_port : s->port;
	if (start_tls(s, cfg, err, errlen) != 0) {
		s->listening = false;
		uv_close((uv_handle_t *)&s->listener, handle_closed);
		s->closed = true;
		return -1;
	}
	/* Flow writes applied on this node wake its parked claims. */
	flow_set_changes_hook(fsnp_flow_changes, s);
	uv_check_init(loop, &s->flush);
	s->flush.data = s;
	uv_check_start(&s->flush, on_flush);
	uv_idle_init(loop, &s->wake);
	s->wake.data = s;
	uv_timer_init(loop, &s->sweep);
	s->sweep.data = s;
	uv_timer_init(loop, &s->tick);
	s->tick.data = s;
	uv_timer_init(loop, &s->grace);
	s->grace.data = s;
	s->handles += 5;
	/* Timeouts are checked a few times per shortest timeout. */
	uint64_t every = 1000;
	uint64_t shortest[] = {s->lim.idle_timeout_ms, s->lim.send_timeout_ms,
	                       s->lim.frame_assembly_timeout_ms,
	                       s->lim.auth_timeout_ms};
	for (size_t i = 0; i < 4; i++) {
		if (shortest[i] > 0 && shortest[i] / 4 < every) {
			every = shortest[i] / 4;
		}
	}
	if (every < 10) {
		every = 10;
	}
	s->route_epoch = fsnp_server_route_epoch(s);
	uv_timer_start(&s->sweep, on_sweep, every, every);
	fsnp_acl_observe(s, true);
	fsnp_acl_refresh(s);
	*out = s;
	return 0;
}

uint16_t fsnp_server_port(const struct fsnp_server *s)
{
	return s->port;
}

uint16_t fsnp_server_tls_port(const struct fsnp_server *s)
{
	return s->tls_port;
}

size_t fsnp_server_conn_count(const struct fsnp_server *s)
{
	return s->n_conns;
}

void fsnp_server_get_stats(const struct fsnp_server *s,
                           struct fsnp_server_stats *out)
{
	*out = s->stats;
}

/* --- Close ------------------------------------------------------------------
 */

void fsnp_server_release(struct fsnp_server *s)
{
	maybe_free(s);
}

static void maybe_free(struct fsnp_server *s)
{
	if (s->closed && s->handles == 0 && s->ops_outstanding == 0 &&
	    s->close_cb == NULL && !s->in_close_cb) {
		if (s->metrics != NULL) {
			metrics_remove_collector(s->metrics, metrics_collect,
			                         s);
		}
		fsnp_acl_free(s);
		tls_ctx_free(s->tls_ctx);
		fsnp_req_pool_drain(s);
		free(s->gwait);
		free(s);
	}
}

static void handle_closed(uv_handle_t *h)
{
	struct fsnp_server *s = h->data;
	if (--s->handles > 0) {
		return;
	}
	if (s->close_cb != NULL) {
		fsnp_server_close_cb cb = s->close_cb;
		s->close_cb = NULL;
		s->in_close_cb = true;
		cb(s->close_data);
		s->in_close_cb = false;
	}
	maybe_free(s);
}

static void finish_close(struct fsnp_server *s)
{
	if (s->closed) {
		return;
	}
	s->closed = true;
	fsnp_acl_observe(s, false);
	/* Nothing can wait any more: fail leader waits and waiters. */
	for (uint32_t g = 0; g <= s->data_groups; g++) {
		while (s->gwait[g].head != NULL) {
			fsnp_exec_op_done(gwait_pop(s, &s->gwait[g]),
			                  SHARDS_ESHUTDOWN, NULL, 0);
		}
	}
	foc_fail_all(s);
	uv_close((uv_handle_t *)&s->flush, handle_closed);
	uv_close((uv_handle_t *)&s->wake, handle_closed);
	uv_close((uv_handle_t *)&s->sweep, handle_closed);
	uv_close((uv_handle_t *)&s->tick, handle_closed);
	uv_close((uv_handle_t *)&s->grace, handle_closed);
}

static void on_grace(uv_timer_t *t)
{
	struct fsnp_server *s = t->data;
	struct fsnp_conn *c, *next;
	if (s->n_conns > 0) {
		log_warn(s->log, "fsnp",
		         "drain: closing %zu connection(s) still busy after "
		         "%" PRIu64 " ms",
		         s->n_conns, s->grace_ms);
	}
	for (c = s->conns; c != NULL; c = next) {
		next = c->next;
		fsnp_conn_close(c);
	}
}

void fsnp_server_close(struct fsnp_server *s, uint64_t grace_ms,
                       fsnp_server_close_cb cb, void *data)
{
	struct fsnp_conn *c, *next;
	if (s->draining) {
		return;
	}
	s->draining = true;
	flow_set_changes_hook(NULL, NULL);
	s->close_cb = cb;
	s->close_data = data;
	s->grace_ms = grace_ms;
	if (s->listening) {
		s->listening = false;
		uv_close((uv_handle_t *)&s->listener, handle_closed);
	}
	if (s->tls_listening) {
		s->tls_listening = false;
		uv_close((uv_handle_t *)&s->tls_listener, handle_closed);
	}
	for (c = s->conns; c != NULL; c = next) {
		next = c->next;
		fsnp_conn_drain(c, grace_ms);
	}
	/* Waiters are not executing: answer them now so their connections
	 * can drain. */
	foc_fail_all(s);
	if (s->n_conns == 0) {
		finish_close(s);
	} else {
		uv_timer_start(&s->grace, on_grace, grace_ms, 0);
	}
}
