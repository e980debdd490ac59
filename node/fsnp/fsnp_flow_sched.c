/* FerricFlow schedules over FSNP: the parts of FLOW.SCHEDULE.* that are
 * not one store command. FIRE and FIRE_DUE run a schedule pass
 * (node/flow_sched.h: read, plan, record, create targets); LIST asks
 * every group and merges the replies (flow_sched_list_merge). CREATE,
 * GET, DELETE, PAUSE and RESUME are ordinary one-group Flow commands
 * (fsnp_flow.c, flow_cmd_encode). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_sched_def.h"
#include "flow/flow_schedule.h"
#include "node/flow_sched.h"
#include "node/fsnp/fsnp_internal.h"
#include "store/result.h"
#include "wire/fsnp_opcode.h"

static void sched_error(struct fsnp_req *r, int status, const char *msg)
{
	bool busy = status == FSNP_STATUS_BUSY;
	const char *code = status == FSNP_STATUS_BAD_REQUEST ? "bad_request"
	                   : busy                            ? "busy"
	                                                     : "error";
	fsnp_reply_error(r, (uint16_t)status, code, msg, busy,
	                 busy ? FSNP_RETRY_AFTER_MS : 0);
}

/* A FIRE or FIRE_DUE in progress: its pass's arguments and, for a
 * FIRE_DUE with block_ms, the wait between passes that claimed nothing. */
struct fire_call {
	uv_timer_t timer; /* timer.data = this */
	struct fsnp_req *r;
	struct flow_sched_args a;
	bool block;
	uint64_t block_until; /* wall ms; 0: no end */
};

static void on_fire_closed(uv_handle_t *h)
{
	free(h->data);
}

static void fire_start(struct fire_call *fc);

static void on_fire_timer(uv_timer_t *t)
{
	fire_start(t->data);
}

/* Whether a FIRE_DUE reply claimed nothing and may wait for more. */
static bool fire_wait(struct fire_call *fc, const uint8_t *value, size_t len)
{
	struct fsnp_req *r = fc->r;
	uint64_t now = fsnp_now_ms(r->srv);
	struct fsnp_val v;
	int64_t claimed = 1;
	if (!fc->block || fsnp_req_orphaned(r) || r->srv->draining ||
	    (fc->block_until != 0 && now >= fc->block_until) ||
	    (r->deadline_ms != 0 && now >= r->deadline_ms) ||
	    fsnp_value_decode(value, len, NULL, &v, NULL) != 0 ||
	    fsnp_map_i64(&v, "claimed", &claimed) != 0 || claimed != 0) {
		return false;
	}
	uint64_t at = FLOW_SCHED_TICK_MS;
	if (fc->block_until != 0 && fc->block_until - now < at) {
		at = fc->block_until - now;
	}
	uv_timer_start(&fc->timer, on_fire_timer, at, 0);
	return true;
}

static void on_pass_done(void *data, int status, const uint8_t *value,
                         size_t len, const char *msg)
{
	struct fire_call *fc = data;
	struct fsnp_req *r = fc->r;
	struct fsnp_server *s = r->srv;
	if (status == 0 && fire_wait(fc, value, len)) {
		return; /* still outstanding: the listener waits for it */
	}
	s->ops_outstanding--;
	r->pending = 0;
	if (status == 0) {
		wbuf_reset(&r->reply);
		r->custom = false;
		wbuf_put_u16(&r->reply, FSNP_STATUS_OK);
		wbuf_append(&r->reply, value, len);
		fsnp_server_flow_kick(r->srv);
	} else {
		sched_error(r, status, msg);
	}
	uv_close((uv_handle_t *)&fc->timer, on_fire_closed);
	fsnp_exec_finish(r);
	fsnp_server_release(s); /* a closed listener waits for passes too */
}

static void fire_start(struct fire_call *fc)
{
	struct fsnp_req *r = fc->r;
	if (flow_sched_pass(r->srv->shards, r->srv->log, &fc->a, on_pass_done,
	                    fc) != 0) {
		r->srv->ops_outstanding--;
		r->pending = 0;
		sched_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		uv_close((uv_handle_t *)&fc->timer, on_fire_closed);
		fsnp_exec_finish(r);
		fsnp_server_release(r->srv);
	}
}

void fsnp_flow_sched_fire(struct fsnp_req *r, uint16_t opcode,
                          const uint8_t *body, size_t len)
{
	struct sched_req q;
	struct flow_err err;
	struct fire_call *fc;
	struct flow_sched_args a = {
	    .skew = r->srv->lim.flow_clock_skew_ms,
	    .now_ms = -1,
	    .limit = 1,
	    .first_group = 1,
	    .n_groups = r->srv->data_groups,
	    .id = NULL,
	    .fire_at_ms = -1,
	};

	if (sched_req_decode(opcode, body, len, &q, &err) != 0) {
		sched_error(r, err.status, err.msg);
		fsnp_exec_finish(r);
		return;
	}
	if (q.f[SF_NOW_MS].set) {
		a.now_ms = q.i[SF_NOW_MS];
	}
	if (opcode == FSNP_OP_FLOW_SCHEDULE_FIRE) {
		a.id = q.id.ptr;
		a.id_len = q.id.len;
		if (q.f[SF_FIRE_AT_MS].set) {
			a.fire_at_ms = q.i[SF_FIRE_AT_MS];
		}
	} else if (q.f[SF_LIMIT].set) {
		a.limit = (uint32_t)q.i[SF_LIMIT];
	}
	fc = calloc(1, sizeof *fc);
	if (fc == NULL) {
		sched_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	fc->r = r;
	fc->a = a;
	/* FIRE's id lives in the request's body, kept until it ends. */
	if (opcode == FSNP_OP_FLOW_SCHEDULE_FIRE_DUE && q.f[SF_BLOCK_MS].set) {
		fc->block = true;
		fc->block_until =
		    q.i[SF_BLOCK_MS] == 0
		        ? 0
		        : fsnp_now_ms(r->srv) + (uint64_t)q.i[SF_BLOCK_MS];
	}
	uv_timer_init(r->srv->loop, &fc->timer);
	fc->timer.data = fc;
	r->pending = 1;
	r->srv->ops_outstanding++;
	fire_start(fc);
}

void fsnp_flow_sched_list_merge(struct fsnp_req *r, const uint8_t *body,
                                size_t len, const struct fsnp_res *res,
                                const struct fsnp_part *parts, uint32_t n)
{
	struct sched_req q;
	struct flow_err err;
	struct fsnp_val *lists;
	struct fsnp_writer w;
	int64_t count;

	if (sched_req_decode(FSNP_OP_FLOW_SCHEDULE_LIST, body, len, &q, &err) !=
	    0) {
		sched_error(r, err.status, err.msg);
		return;
	}
	count = q.f[SF_COUNT].set ? q.i[SF_COUNT] : FLOW_SCHED_LIST_DEFAULT;
	if (count > FLOW_SCHED_LIST_MAX) {
		count = FLOW_SCHED_LIST_MAX;
	}
	lists = calloc(n ? n : 1, sizeof *lists);
	if (lists == NULL) {
		sched_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct fsnp_res *x = &res[i];
		if (x->status != SHARDS_OK) {
			fsnp_exec_reply_shards(r, x->status, parts[i].group);
			free(lists);
			return;
		}
		if (x->len < 3 || x->data[0] != STORE_RESULT_VERSION ||
		    fsnp_value_decode(x->data + 2, x->len - 2, NULL, &lists[i],
		                      NULL) != 0) {
			sched_error(r, FSNP_STATUS_ERROR,
			            "ERR malformed result from the store");
			free(lists);
			return;
		}
		if (x->data[1] != STORE_OK) {
			char msg[512] = "ERR flow schedule list failed";
			if (lists[i].tag == FSNP_BIN) {
				snprintf(msg, sizeof msg, "%.*s",
				         (int)lists[i].as.bin.len,
				         (const char *)lists[i].as.bin.ptr);
			}
			sched_error(r, flow_reply_status(x->data[1]), msg);
			free(lists);
			return;
		}
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	wbuf_put_u16(&r->reply, FSNP_STATUS_OK);
	fsnp_w_init(&w, &r->reply);
	flow_sched_list_merge(&w, lists, n, count,
	                      q.f[SF_REV].set && q.b[SF_REV]);
	if (fsnp_w_finish(&w) != 0 || r->reply.oom) {
		sched_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
	}
	free(lists);
}
