/* FerricFlow schedules over FSNP: the parts of FLOW.SCHEDULE.* that are
 * not one store command. FIRE and FIRE_DUE run a schedule pass
 * (node/flow_sched.h: read, plan, record, create targets); LIST asks
 * every group and merges the replies (flow_sched_list_merge). CREATE,
 * GET, DELETE, PAUSE and RESUME are ordinary one-group Flow commands
 * (fsnp_flow.c, flow_cmd_encode). */
#include <stdio.h>
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

static void on_pass_done(void *data, int status, const uint8_t *value,
                         size_t len, const char *msg)
{
	struct fsnp_req *r = data;
	struct fsnp_server *s = r->srv;
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
	fsnp_exec_finish(r);
	fsnp_server_release(s); /* a closed listener waits for passes too */
}

void fsnp_flow_sched_fire(struct fsnp_req *r, uint16_t opcode,
                          const uint8_t *body, size_t len)
{
	struct sched_req q;
	struct flow_err err;
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
	r->pending = 1;
	r->srv->ops_outstanding++;
	if (flow_sched_pass(r->srv->shards, r->srv->log, &a, on_pass_done, r) !=
	    0) {
		r->srv->ops_outstanding--;
		r->pending = 0;
		sched_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
	}
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
