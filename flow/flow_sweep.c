/* The max_active_ms sweep (flow_sweep.h): the leader's scan of the
 * active-time index and the replicated command that fails what it found. */
#include "flow/flow_sweep.h"

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

#define SCAN_LEN (1 + 1 + 1 + 8 + 4)

void flow_sweep_encode(uint64_t now_ms, const uint8_t *const *parts,
                       const size_t *part_lens, const uint8_t *const *ids,
                       const size_t *id_lens, uint32_t n, struct sbuf *out)
{
	sbuf_u8(out, STORE_CMD_VERSION);
	sbuf_u8(out, FLOW_STORE_OP_SWEEP);
	sbuf_u8(out, FLOW_CMD_VERSION);
	sbuf_u64(out, now_ms);
	sbuf_u32(out, n);
	for (uint32_t i = 0; i < n; i++) {
		sbuf_lbytes(out, parts[i], part_lens[i]);
		sbuf_lbytes(out, ids[i], id_lens[i]);
	}
}

/* The scan (a read): u64 now, u32 max -> result: one bytes value holding
 * u64 now, u32 n, n x (lbytes part, lbytes id), ready to follow the
 * sweep command's header. */
static int sweep_scan(struct tx *tx, struct rd *r, struct sbuf *res)
{
	struct sbuf k, items;
	struct store_tx_iter *it;
	uint64_t now = rd_u64(r);
	uint32_t max = rd_u32(r), n = 0;
	int rv;

	if (r->bad || !rd_done(r)) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow sweep scan malformed");
		return 0;
	}
	sbuf_init(&k);
	sbuf_init(&items);
	fkey_active_prefix(&k, store_tx_group(tx));
	it = store_tx_iter_open(tx, k.p, k.len);
	if (it == NULL) {
		sbuf_free(&k);
		sbuf_free(&items);
		return -1;
	}
	for (store_tx_iter_seek(it, NULL, 0);
	     store_tx_iter_valid(it) && n < max; store_tx_iter_next(it)) {
		size_t kl, off = k.len + 8;
		const uint8_t *kp = store_tx_iter_key(it, &kl);
		struct fsnp_bytes part, id;
		if (kl < off || be_get64(kp + k.len) >= now) {
			break; /* not past yet: neither is anything later */
		}
		if (!fkey_part(kp, kl, &off, &part) ||
		    !fkey_part(kp, kl, &off, &id)) {
			continue;
		}
		sbuf_lbytes(&items, part.ptr, part.len);
		sbuf_lbytes(&items, id.ptr, id.len);
		n++;
	}
	rv = store_tx_iter_close(it);
	if (rv == 0) {
		/* One bytes value: what follows the sweep command's header. */
		struct sbuf body;
		sbuf_init(&body);
		sbuf_u64(&body, now);
		sbuf_u32(&body, n);
		sbuf_add(&body, items.p, items.len);
		res_begin(res, STORE_OK);
		res_bytes(res, body.p, body.len);
		sbuf_free(&body);
	}
	sbuf_free(&k);
	sbuf_free(&items);
	return rv;
}

static int sweep_run(struct tx *tx, struct rd *r, struct sbuf *res)
{
	struct fctx c;
	uint64_t now = rd_u64(r);
	uint32_t n = rd_u32(r);
	int64_t failed = 0;
	int rv = 0;

	if (r->bad || n > rd_left(r) / 8) {
		res_error(res, STORE_BAD_COMMAND, "ERR flow sweep malformed");
		return 0;
	}
	fctx_init(&c, tx, 0, 0);
	c.track = true;
	if (now < c.now) {
		c.now = now; /* never later than the entry */
	}
	for (uint32_t i = 0; i < n && rv == 0; i++) {
		struct fsnp_bytes part, id;
		bool one;
		part.ptr = rd_lbytes(r, &part.len);
		id.ptr = rd_lbytes(r, &id.len);
		if (r->bad) {
			break;
		}
		rv = flow_op_active_timeout(&c, part, id, &one);
		failed += one;
	}
	if (rv == 0 && (r->bad || !rd_done(r))) {
		fctx_fini(&c);
		res_error(res, STORE_BAD_COMMAND, "ERR flow sweep malformed");
		return 0;
	}
	if (rv == 0) {
		flow_changes_notify(&c, 0);
	}
	fctx_fini(&c);
	if (rv != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, failed);
	return 0;
}

int flow_sweep_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                     struct sbuf *res)
{
	struct rd r;
	uint8_t op;

	rd_init(&r, cmd, len);
	(void)rd_u8(&r);
	op = rd_u8(&r);
	if (rd_u8(&r) != FLOW_CMD_VERSION || r.bad) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR unknown flow command version");
		return 0;
	}
	if (op == FLOW_STORE_OP_SWEEP_SCAN) {
		return sweep_scan(tx, &r, res);
	}
	if (!store_tx_writable(tx)) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow sweep is not a read");
		return 0;
	}
	return sweep_run(tx, &r, res);
}

int flow_sweep_cmd(struct store *s, uint32_t group, uint64_t now_ms,
                   uint32_t max, uint8_t **cmd, size_t *len)
{
	uint8_t scan[SCAN_LEN];
	struct fsm_result out = {0};
	struct sbuf b;
	size_t i = 0;

	*cmd = NULL;
	*len = 0;
	scan[i++] = STORE_CMD_VERSION;
	scan[i++] = FLOW_STORE_OP_SWEEP_SCAN;
	scan[i++] = FLOW_CMD_VERSION;
	be_put64(scan + i, now_ms);
	i += 8;
	be_put32(scan + i, max);
	if (store_read(s, group, now_ms, scan, sizeof scan, &out) != 0) {
		return -1;
	}
	/* u8 result version, u8 status, bytes tag, u32 len, then u64 now,
	 * u32 n, items */
	if (out.len < 2 + 5 + 12 || out.data[1] != STORE_OK ||
	    out.data[2] != STORE_T_BYTES ||
	    be_get32(out.data + 3) != out.len - 7 ||
	    be_get32(out.data + 7 + 8) == 0) {
		int rv = out.len >= 2 && out.data[1] == STORE_OK ? 0 : -1;
		free(out.data);
		return rv;
	}
	sbuf_init(&b);
	sbuf_u8(&b, STORE_CMD_VERSION);
	sbuf_u8(&b, FLOW_STORE_OP_SWEEP);
	sbuf_u8(&b, FLOW_CMD_VERSION);
	sbuf_add(&b, out.data + 7, out.len - 7);
	free(out.data);
	*cmd = sbuf_take(&b, len);
	return *cmd != NULL ? 0 : -1;
}
