/* FerricFlow's store extension (flow.h): the command envelope, routing of
 * a request, and the apply entry point store/ calls. */
#include "flow/flow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow_gov.h"
#include "flow/flow_ops.h"
#include "flow/flow_overview.h"
#include "flow/flow_record.h"
#include "flow/flow_schedule.h"
#include "flow/flow_sweep.h"
#include "flow/flow_wait.h"
#include "flow/fql_exec.h"
#include "wire/flow_route.h"
#include "store/command.h"
#include "store/ext.h"
#include "store/result.h"
#include "wire/fsnp_opcode.h"

#define HEADER_LEN (1 + 1 + 1 + 2 + 8 + 8 + 4)

bool flow_opcode_supported(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_CREATE:
	case FSNP_OP_FLOW_GET:
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_COMPLETE:
	case FSNP_OP_FLOW_TRANSITION:
	case FSNP_OP_FLOW_RETRY:
	case FSNP_OP_FLOW_FAIL:
	case FSNP_OP_FLOW_CANCEL:
	case FSNP_OP_FLOW_EXTEND_LEASE:
	case FSNP_OP_FLOW_HISTORY:
	case FSNP_OP_FLOW_VALUE_PUT:
	case FSNP_OP_FLOW_VALUE_MGET:
	case FSNP_OP_FLOW_SIGNAL:
	case FSNP_OP_FLOW_CREATE_MANY:
	case FSNP_OP_FLOW_COMPLETE_MANY:
	case FSNP_OP_FLOW_TRANSITION_MANY:
	case FSNP_OP_FLOW_RETRY_MANY:
	case FSNP_OP_FLOW_FAIL_MANY:
	case FSNP_OP_FLOW_CANCEL_MANY:
	case FSNP_OP_FLOW_RECLAIM:
	case FSNP_OP_FLOW_INFO:
	case FSNP_OP_FLOW_POLICY_SET:
	case FSNP_OP_FLOW_POLICY_GET:
	case FSNP_OP_FLOW_START_AND_CLAIM:
	case FSNP_OP_FLOW_STEP_CONTINUE:
	case FSNP_OP_FLOW_REWIND:
	case FSNP_OP_FLOW_RETENTION_CLEANUP:
	case FSNP_OP_FLOW_RUN_STEPS_MANY:
	case FSNP_OP_FLOW_SPAWN_CHILDREN:
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
	case FSNP_OP_FLOW_QUERY:
		return true;
	case FSNP_OP_FLOW_SCHEDULE_CREATE:
	case FSNP_OP_FLOW_SCHEDULE_GET:
	case FSNP_OP_FLOW_SCHEDULE_DELETE:
	case FSNP_OP_FLOW_SCHEDULE_FIRE_DUE:
	case FSNP_OP_FLOW_SCHEDULE_LIST:
	case FSNP_OP_FLOW_SCHEDULE_FIRE:
	case FSNP_OP_FLOW_SCHEDULE_PAUSE:
	case FSNP_OP_FLOW_SCHEDULE_RESUME:
		return true;
	default:
		return flow_gov_opcode(opcode);
	}
}

bool flow_opcode_is_read(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_GET:
	case FSNP_OP_FLOW_HISTORY:
	case FSNP_OP_FLOW_VALUE_MGET:
	case FSNP_OP_FLOW_INFO:
	case FSNP_OP_FLOW_POLICY_GET:
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
	case FSNP_OP_FLOW_SCHEDULE_GET:
	case FSNP_OP_FLOW_SCHEDULE_LIST:
	case FSNP_OP_FLOW_QUERY:
		return true;
	default:
		return flow_gov_is_read(opcode);
	}
}

/* Wraps a body known to validate into the command. */
static int cmd_wrap(uint16_t opcode, const uint8_t *body, size_t len,
                    const struct flow_cmd_meta *meta, uint8_t **out,
                    size_t *out_len, struct flow_err *err)
{
	static const uint8_t empty_map[5] = {FSNP_MAP, 0, 0, 0, 0};
	struct sbuf b;

	if (flow_sched_opcode(opcode)) {
		/* Schedules are their own extension (flow_schedule.h). */
		return flow_sched_cmd_encode(opcode, body, len,
		                             meta->max_clock_skew_ms, -1, NULL,
		                             out, out_len, err);
	}
	if (len == 0) {
		body = empty_map;
		len = sizeof empty_map;
	}
	if (len > UINT32_MAX) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native flow body too large");
	}
	sbuf_init(&b);
	sbuf_reserve(&b, HEADER_LEN + len);
	sbuf_u8(&b, STORE_CMD_VERSION);
	sbuf_u8(&b, flow_opcode_is_read(opcode) ? FLOW_STORE_OP_READ
	                                        : FLOW_STORE_OP_APPLY);
	sbuf_u8(&b, FLOW_CMD_VERSION);
	sbuf_u16(&b, opcode);
	sbuf_u64(&b, meta->max_clock_skew_ms);
	sbuf_u64(&b, meta->seed);
	sbuf_lbytes(&b, body, len);
	*out = sbuf_take(&b, out_len);
	return 0;
}

int flow_cmd_encode(uint16_t opcode, const uint8_t *body, size_t len,
                    const struct flow_cmd_meta *meta, uint8_t **out,
                    size_t *out_len, struct flow_err *err)
{
	struct flow_req req;

	if (!flow_opcode_supported(opcode)) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native unsupported flow opcode 0x%04x",
		                 opcode);
	}
	/* FLOW.QUERY bodies are checked by the FQL1 parser and binder
	 * (flow/fql_exec.h); everything else by the Flow body decoder. */
	if (opcode != FSNP_OP_FLOW_QUERY &&
	    flow_body_decode_bytes(opcode, body, len, &req, err) != 0) {
		return -1;
	}
	return cmd_wrap(opcode, body, len, meta, out, out_len, err);
}

int flow_cmd_encode_valid(uint16_t opcode, const uint8_t *body, size_t len,
                          const struct flow_cmd_meta *meta, uint8_t **out,
                          size_t *out_len, struct flow_err *err)
{
	if (!flow_opcode_supported(opcode)) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native unsupported flow opcode 0x%04x",
		                 opcode);
	}
	return cmd_wrap(opcode, body, len, meta, out, out_len, err);
}

int flow_cmd_encode_peek(uint16_t opcode, const uint8_t *body, size_t len,
                         const struct flow_cmd_meta *meta, uint8_t **out,
                         size_t *out_len, struct flow_err *err)
{
	if (opcode != FSNP_OP_FLOW_CLAIM_DUE &&
	    opcode != FSNP_OP_FLOW_RECLAIM) {
		return flow_fail(err, FLOW_STATUS_BAD_REQUEST,
		                 "ERR native only claims can be peeked");
	}
	if (flow_cmd_encode(opcode, body, len, meta, out, out_len, err) != 0) {
		return -1;
	}
	(*out)[1] = FLOW_STORE_OP_PEEK;
	return 0;
}

int flow_cmd_decode(const uint8_t *p, size_t len, struct flow_cmd *c,
                    const char **msg)
{
	struct rd r;

	memset(c, 0, sizeof *c);
	rd_init(&r, p, len);
	if (len < HEADER_LEN) {
		*msg = "flow command truncated";
		return -1;
	}
	if (rd_u8(&r) != STORE_CMD_VERSION) {
		*msg = "unknown store command version";
		return -1;
	}
	c->store_op = rd_u8(&r);
	if (c->store_op != FLOW_STORE_OP_APPLY &&
	    c->store_op != FLOW_STORE_OP_READ &&
	    c->store_op != FLOW_STORE_OP_PEEK) {
		*msg = "not a flow command";
		return -1;
	}
	if (rd_u8(&r) != FLOW_CMD_VERSION) {
		*msg = "unknown flow command version";
		return -1;
	}
	c->opcode = rd_u16(&r);
	c->max_clock_skew_ms = rd_u64(&r);
	c->seed = rd_u64(&r);
	c->body = rd_lbytes(&r, &c->body_len);
	if (r.bad) {
		*msg = "flow command truncated";
		return -1;
	}
	if (!rd_done(&r)) {
		*msg = "flow command has trailing bytes";
		return -1;
	}
	if (c->store_op == FLOW_STORE_OP_PEEK) {
		if (c->opcode != FSNP_OP_FLOW_CLAIM_DUE &&
		    c->opcode != FSNP_OP_FLOW_RECLAIM) {
			*msg = "flow peek of an opcode that is not a claim";
			return -1;
		}
	} else if ((c->store_op == FLOW_STORE_OP_READ) !=
	           flow_opcode_is_read(c->opcode)) {
		*msg = "flow command op does not match its opcode";
		return -1;
	}
	return 0;
}

void flow_cmd_partition(const struct flow_req *req, uint64_t seed, char *buf,
                        const uint8_t **part, size_t *len)
{
	const struct flow_opt *pk = &req->f[FF_PARTITION_KEY];
	const struct flow_opt *id = &req->f[FF_ID];

	*part = NULL;
	*len = 0;
	if (flow_gov_opcode(req->opcode)) {
		flow_gov_partition(req, buf, part, len);
		return;
	}
	switch (req->opcode) {
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_RECLAIM:
		if (pk->set && pk->t.len > 0 && !fsnp_bytes_eq(pk->t, "ANY") &&
		    !fsnp_bytes_eq(pk->t, "AUTO") &&
		    !fsnp_bytes_eq(pk->t, "any") &&
		    !fsnp_bytes_eq(pk->t, "auto")) {
			*part = pk->t.ptr;
			*len = pk->t.len;
		}
		return;
	case FSNP_OP_FLOW_VALUE_PUT:
		if (req->f[FF_OWNER_FLOW_ID].set) {
			id = &req->f[FF_OWNER_FLOW_ID];
			break;
		}
		if (pk->set) {
			*part = pk->t.ptr;
			*len = pk->t.len;
		} else {
			*len = flow_route_auto_partition(
			    (unsigned)(seed % 256u), buf);
			*part = (const uint8_t *)buf;
		}
		return;
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
		/* One partition's counters, or every group's merged. */
		if (pk->set && pk->t.len > 0) {
			*part = pk->t.ptr;
			*len = pk->t.len;
		}
		return;
	case FSNP_OP_FLOW_VALUE_MGET:
	case FSNP_OP_FLOW_INFO:
	case FSNP_OP_FLOW_POLICY_SET:
	case FSNP_OP_FLOW_POLICY_GET:
	case FSNP_OP_FLOW_RETENTION_CLEANUP:
		return;
	default:
		break;
	}
	if (req->f[FF_ITEMS].set && !pk->set) {
		/* A batch without a shared partition: its first item's. */
		struct fsnp_iter it;
		struct fsnp_val e;
		struct flow_req item;
		struct flow_err err;
		fsnp_iter_init(&it, &req->f[FF_ITEMS].v);
		if (fsnp_iter_next(&it, NULL, &e) &&
		    flow_body_decode_item(req, &e, &item, &err) == 0) {
			flow_cmd_partition(&item, seed, buf, part, len);
		}
		return;
	}
	if (pk->set && pk->t.len > 0) {
		*part = pk->t.ptr;
		*len = pk->t.len;
	} else if (id->set && id->t.len > 0) {
		flow_route_partition(id->t.ptr, id->t.len, NULL, 0, buf, part,
		                     len);
	}
}

int flow_reply_status(uint8_t store_status)
{
	switch (store_status) {
	case STORE_OK:
		return 0;
	case STORE_BAD_COMMAND:
		return FLOW_STATUS_BAD_REQUEST;
	default:
		return FLOW_STATUS_ERROR;
	}
}

static flow_changes_fn changes_fn;
static void *changes_data;

void flow_set_changes_hook(flow_changes_fn fn, void *data)
{
	changes_fn = fn;
	changes_data = data;
}

void flow_changes_notify(struct fctx *c, uint16_t opcode)
{
	if (changes_fn != NULL && c->nchg > 0) {
		changes_fn(changes_data, c->group, opcode, c->chg, c->nchg);
	}
}

static bool flow_is_read(uint8_t op)
{
	return op == FLOW_STORE_OP_READ || op == FLOW_STORE_OP_PEEK ||
	       op == FLOW_STORE_OP_SWEEP_SCAN || op == FLOW_STORE_OP_NEXT_DUE ||
	       op == FLOW_STORE_OP_OVERVIEW;
}

static int flow_apply(void *data, struct tx *tx, const uint8_t *cmd, size_t len,
                      struct sbuf *res)
{
	struct flow_cmd c;
	struct flow_req req;
	struct flow_err err;
	struct fctx ctx;
	struct wbuf b;
	struct fsnp_writer w;
	const char *msg;
	int rv;

	(void)data;
	if (len >= 2 && (cmd[1] == FLOW_STORE_OP_SWEEP ||
	                 cmd[1] == FLOW_STORE_OP_SWEEP_SCAN)) {
		return flow_sweep_apply(tx, cmd, len, res);
	}
	if (len >= 2 && cmd[1] == FLOW_STORE_OP_NEXT_DUE) {
		return flow_wait_apply(tx, cmd, len, res);
	}
	if (len >= 2 && cmd[1] == FLOW_STORE_OP_OVERVIEW) {
		return flow_overview_apply(tx, cmd, len, res);
	}
	if (flow_cmd_decode(cmd, len, &c, &msg) != 0) {
		char text[128];
		snprintf(text, sizeof text, "ERR %s", msg);
		res_error(res, STORE_BAD_COMMAND, text);
		return 0;
	}
	if (!flow_opcode_supported(c.opcode) || flow_sched_opcode(c.opcode)) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR native unsupported flow opcode");
		return 0;
	}
	if (c.opcode == FSNP_OP_FLOW_QUERY) {
		return fql_exec_apply(tx, c.body, c.body_len, res);
	}
	if (flow_gov_opcode(c.opcode)) {
		return flow_gov_apply(tx, c.opcode, c.body, c.body_len,
		                      c.max_clock_skew_ms, c.seed, res);
	}
	if (flow_body_decode_bytes(c.opcode, c.body, c.body_len, &req, &err) !=
	    0) {
		res_error(res,
		          err.status == FLOW_STATUS_BAD_REQUEST
		              ? STORE_BAD_COMMAND
		              : STORE_ERR,
		          err.msg);
		return 0;
	}
	fctx_init(&ctx, tx, c.max_clock_skew_ms, c.seed);
	ctx.track = changes_fn != NULL && ctx.write;
	ctx.peek = c.store_op == FLOW_STORE_OP_PEEK;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	err.status = 0;
	err.msg[0] = '\0';
	rv = flow_op_run(&ctx, &req, &w, &err);
	if (rv == 0 && fsnp_w_finish(&w) == 0) {
		res_begin(res, STORE_OK);
		sbuf_add(res, b.data, b.len);
	} else if (rv == FLOW_OP_ERROR || rv == FLOW_OP_ERROR_KEEP) {
		res_error(res,
		          err.status == FLOW_STATUS_BAD_REQUEST
		              ? STORE_BAD_COMMAND
		              : STORE_ERR,
		          err.msg);
	} else if (rv == 0) {
		res_error(res, STORE_ERR, "ERR flow reply could not be built");
	}
	if (rv == 0 || rv == FLOW_OP_ERROR_KEEP) {
		flow_changes_notify(&ctx, c.opcode);
	}
	wbuf_free(&b);
	fctx_fini(&ctx);
	if (rv < 0) {
		return -1;
	}
	return rv == FLOW_OP_ERROR_KEEP ? STORE_EXT_KEEP : 0;
}

int flow_register(struct store *s)
{
	struct store_ext x = {
	    .first_op = FLOW_STORE_OP_APPLY,
	    .last_op = FLOW_STORE_OP_SWEEP,
	    .is_read = flow_is_read,
	    .apply = flow_apply,
	    .data = NULL,
	};

#ifdef LS_FAULT_HOOKS
	flow_op_fault_init();
#endif
	if (store_register_ext(s, &x) != 0) {
		return -1;
	}
	return flow_sched_register(s);
}
