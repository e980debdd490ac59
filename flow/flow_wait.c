/* The next-due read of a parked claim (flow_wait.h). */
#include "flow/flow_wait.h"

#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_ops.h"
#include "flow/flow_record.h"
#include "raft/fsm.h"
#include "store/command.h"
#include "store/ext.h"
#include "store/result.h"
#include "store/store.h"
#include "wire/fsnp_opcode.h"

int flow_wait_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                    struct sbuf *res)
{
	struct rd r;
	struct flow_req q;
	struct flow_err err;
	struct fctx c;
	const uint8_t *body;
	size_t blen;
	uint16_t opcode;
	uint64_t now, at = UINT64_MAX;
	int rv;

	rd_init(&r, cmd, len);
	(void)rd_u8(&r);
	(void)rd_u8(&r);
	if (rd_u8(&r) != FLOW_CMD_VERSION) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR unknown flow command version");
		return 0;
	}
	opcode = rd_u16(&r);
	now = rd_u64(&r);
	body = rd_lbytes(&r, &blen);
	if (r.bad || !rd_done(&r) ||
	    (opcode != FSNP_OP_FLOW_CLAIM_DUE &&
	     opcode != FSNP_OP_FLOW_RECLAIM)) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow next-due read malformed");
		return 0;
	}
	if (flow_body_decode_bytes(opcode, body, blen, &q, &err) != 0) {
		res_error(res, STORE_ERR, err.msg);
		return 0;
	}
	fctx_init(&c, tx, 0, 0);
	c.now = now;
	rv = flow_op_next_due(&c, &q, &at);
	fctx_fini(&c);
	if (rv != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_u64(res, at);
	return 0;
}

int flow_next_due(struct store *s, uint32_t group, uint16_t opcode,
                  const uint8_t *body, size_t len, uint64_t now_ms,
                  uint64_t *at)
{
	struct fsm_result out = {0};
	struct sbuf b;
	size_t n;
	uint8_t *cmd;
	int rv = -1;

	*at = UINT64_MAX;
	sbuf_init(&b);
	sbuf_u8(&b, STORE_CMD_VERSION);
	sbuf_u8(&b, FLOW_STORE_OP_NEXT_DUE);
	sbuf_u8(&b, FLOW_CMD_VERSION);
	sbuf_u16(&b, opcode);
	sbuf_u64(&b, now_ms);
	sbuf_lbytes(&b, body, len);
	cmd = sbuf_take(&b, &n);
	if (cmd == NULL) {
		return -1;
	}
	if (store_read(s, group, now_ms, cmd, n, &out) == 0 &&
	    out.len == 2 + 1 + 8 && out.data[1] == STORE_OK &&
	    out.data[2] == STORE_T_U64) {
		*at = be_get64(out.data + 3);
		rv = 0;
	}
	free(cmd);
	free(out.data);
	return rv;
}
