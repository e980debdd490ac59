/* Consumer groups on a stream shard: claims with a visibility deadline and
 * an attempt count, ack / nack, a cursor below which every record is
 * settled, dead letters after the maximum attempts, discard and redrive.
 *
 * Per (stream shard, group): the cursor record, one claim record per
 * delivered and not yet settled-below-the-cursor offset, and one dead
 * letter record per dead-lettered offset. The cursor advances over
 * contiguous settled offsets (acked, dead-lettered, discarded), deleting
 * their claims. A redriven record gets a claim again even below the
 * cursor; polls look at those first. Polls are proposed: every claim is
 * decided with the entry's time. */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

#define POLL_DEFAULT 100
#define DEAD_LIST_DEFAULT 1000

enum {
	CL_INFLIGHT = 1,
	CL_NACKED = 2,
	CL_ACKED = 3,
	CL_DEAD = 4,
	CL_DISCARDED = 5,
};

struct claim {
	uint64_t offset;
	uint8_t status;
	uint32_t attempts;
	uint64_t deadline;
};

static bool settled(uint8_t status)
{
	return status == CL_ACKED || status == CL_DEAD ||
	       status == CL_DISCARDED;
}

static void group_prefix(struct sbuf *k, uint32_t group, uint8_t type,
                         const struct store_cmd *c)
{
	key_start(k, group, type);
	key_shard(k, c->scope, c->shard);
	sbuf_u16(k, (uint16_t)c->group.len);
	sbuf_add(k, c->group.p, c->group.len);
}

static void offset_key(struct sbuf *k, uint32_t group, uint8_t type,
                       const struct store_cmd *c, uint64_t offset)
{
	group_prefix(k, group, type, c);
	sbuf_u64(k, offset);
}

static int cursor_load(struct tx *tx, const struct store_cmd *c,
                       uint64_t *cursor)
{
	struct sbuf k;
	struct val v;
	int found;

	sbuf_init(&k);
	group_prefix(&k, tx->group, K_CG, c);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	*cursor = 0;
	if (found > 0) {
		if (v.len != 8) {
			found = tx_fail(tx, "corrupt consumer group", NULL);
		} else {
			*cursor = be_get64((const uint8_t *)v.p);
		}
	}
	val_free(&v);
	return found < 0 ? -1 : 0;
}

static void cursor_store(struct tx *tx, const struct store_cmd *c,
                         uint64_t cursor)
{
	struct sbuf k;
	uint8_t v[8];

	sbuf_init(&k);
	group_prefix(&k, tx->group, K_CG, c);
	be_put64(v, cursor);
	tx_put(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

static int decode_claim(struct tx *tx, const void *p, size_t len,
                        struct claim *cl)
{
	struct rd r;

	rd_init(&r, p, len);
	cl->status = rd_u8(&r);
	cl->attempts = rd_u32(&r);
	cl->deadline = rd_u64(&r);
	if (!rd_done(&r) || cl->status < CL_INFLIGHT ||
	    cl->status > CL_DISCARDED) {
		return tx_fail(tx, "corrupt claim", NULL);
	}
	return 0;
}

/* 1 found, 0 absent, -1 failure. */
static int claim_load(struct tx *tx, const struct store_cmd *c, uint64_t offset,
                      struct claim *cl)
{
	struct sbuf k;
	struct val v;
	int found;

	memset(cl, 0, sizeof *cl);
	cl->offset = offset;
	sbuf_init(&k);
	offset_key(&k, tx->group, K_CLAIM, c, offset);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0 && decode_claim(tx, v.p, v.len, cl) != 0) {
		found = -1;
	}
	val_free(&v);
	return found;
}

static void claim_store(struct tx *tx, const struct store_cmd *c,
                        const struct claim *cl)
{
	struct sbuf k;
	uint8_t v[13];

	sbuf_init(&k);
	offset_key(&k, tx->group, K_CLAIM, c, cl->offset);
	v[0] = cl->status;
	be_put32(v + 1, cl->attempts);
	be_put64(v + 5, cl->deadline);
	tx_put(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

static void claim_del(struct tx *tx, const struct store_cmd *c, uint64_t offset)
{
	struct sbuf k;

	sbuf_init(&k);
	offset_key(&k, tx->group, K_CLAIM, c, offset);
	tx_del(tx, &k);
	sbuf_free(&k);
}

/* A claim that is settled: below the cursor it is simply dropped. */
static void claim_settle(struct tx *tx, const struct store_cmd *c,
                         struct claim *cl, uint8_t status, uint64_t cursor)
{
	if (cl->offset < cursor) {
		claim_del(tx, c, cl->offset);
	} else {
		cl->status = status;
		claim_store(tx, c, cl);
	}
}

static void dead_put(struct tx *tx, const struct store_cmd *c,
                     const struct claim *cl)
{
	struct sbuf k;
	uint8_t v[4];

	sbuf_init(&k);
	offset_key(&k, tx->group, K_DEAD, c, cl->offset);
	be_put32(v, cl->attempts);
	tx_put(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

/* 1 present (and deleted when `del`), 0 absent, -1 failure. */
static int dead_take(struct tx *tx, const struct store_cmd *c, uint64_t offset,
                     bool del)
{
	struct sbuf k;
	struct val v;
	int found;

	sbuf_init(&k);
	offset_key(&k, tx->group, K_DEAD, c, offset);
	found = tx_get(tx, &k, &v);
	val_free(&v);
	if (found > 0 && del) {
		tx_del(tx, &k);
	}
	sbuf_free(&k);
	return found;
}

/* Collects the group's claims from offset 0 on, at most `limit`. */
static int claims_collect(struct tx *tx, const struct store_cmd *c,
                          size_t limit, struct claim **out, size_t *n,
                          bool *truncated)
{
	struct titer it;
	struct sbuf k;
	size_t cap = 0;
	int rv = 0;

	*out = NULL;
	*n = 0;
	*truncated = false;
	sbuf_init(&k);
	group_prefix(&k, tx->group, K_CLAIM, c);
	titer_open(&it, tx, &k);
	for (titer_seek(&it, NULL); titer_valid(&it); titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);

		if (*n == limit) {
			*truncated = true;
			break;
		}
		if (kl != k.len + 8) {
			rv = tx_fail(tx, "corrupt claim key", NULL);
			break;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*out = store_xrealloc(*out, cap * sizeof **out);
		}
		if (decode_claim(tx, vp, vl, &(*out)[*n]) != 0) {
			rv = -1;
			break;
		}
		(*out)[*n].offset = be_get64(kp + kl - 8);
		(*n)++;
	}
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	return rv;
}

/* Moves the cursor to the head at least, then over settled claims. */
static int cursor_advance(struct tx *tx, const struct store_cmd *c,
                          uint64_t *cursor, const struct stream_meta *m)
{
	struct claim cl;
	int found;

	if (*cursor < m->head) {
		/* Trimmed records: their claims go with them. */
		struct claim *all;
		size_t n;
		bool truncated;
		if (claims_collect(tx, c, SIZE_MAX, &all, &n, &truncated) !=
		    0) {
			free(all);
			return -1;
		}
		for (size_t i = 0; i < n && all[i].offset < m->head; i++) {
			if (all[i].offset >= *cursor) {
				claim_del(tx, c, all[i].offset);
			}
		}
		free(all);
		*cursor = m->head;
	}
	for (;;) {
		found = claim_load(tx, c, *cursor, &cl);
		if (found < 0) {
			return -1;
		}
		if (!found || !settled(cl.status)) {
			return 0;
		}
		claim_del(tx, c, *cursor);
		(*cursor)++;
	}
}

struct delivery {
	uint64_t offset;
	uint32_t attempts;
};

static int cg_poll(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	uint64_t cursor, cursor0, o;
	uint64_t vis =
	    c->visibility_ms ? c->visibility_ms : STORE_CG_VISIBILITY_MS;
	uint32_t max_att = c->attempts ? c->attempts : STORE_CG_MAX_ATTEMPTS;
	uint64_t max = c->max ? c->max : POLL_DEFAULT;
	struct claim *cls = NULL;
	struct delivery *out = NULL;
	size_t ncl, nout = 0, scanned = 0;
	bool truncated;
	struct sbuf k;
	int rv = 0;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0 ||
	    cursor_load(tx, c, &cursor) != 0) {
		return -1;
	}
	cursor0 = cursor;
	if (claims_collect(tx, c, STORE_CG_SCAN_LIMIT, &cls, &ncl,
	                   &truncated) != 0) {
		free(cls);
		return -1;
	}
	if (max > STORE_CG_SCAN_LIMIT) {
		max = STORE_CG_SCAN_LIMIT;
	}
	out = store_xmalloc(max * sizeof *out);
	o = cursor > m.head ? cursor : m.head;
	for (size_t i = 0; i <= ncl && nout < max; i++) {
		struct claim *cl = i < ncl ? &cls[i] : NULL;
		uint64_t limit = cl ? cl->offset : m.tail;

		if (cl == NULL && truncated) {
			break; /* unseen claims lie beyond: do not guess */
		}
		if (cl != NULL && cl->offset < m.head) {
			claim_del(tx, c, cl->offset); /* trimmed away */
			continue;
		}
		if (cl == NULL || cl->offset >= o) {
			/* Never delivered: [o, limit). */
			while (o < limit && o < m.tail && nout < max &&
			       scanned < STORE_CG_SCAN_LIMIT) {
				struct claim fresh = {
				    o, CL_INFLIGHT, 1,
				    deadline_after(tx->now_ms, vis)};
				claim_store(tx, c, &fresh);
				out[nout].offset = o;
				out[nout].attempts = 1;
				nout++;
				o++;
				scanned++;
			}
			if (cl == NULL || nout >= max) {
				break;
			}
			o = cl->offset + 1;
		}
		scanned++;
		if (settled(cl->status) ||
		    (cl->status == CL_INFLIGHT && cl->deadline > tx->now_ms)) {
			continue;
		}
		if (cl->attempts >= max_att) {
			dead_put(tx, c, cl);
			claim_settle(tx, c, cl, CL_DEAD, cursor);
			continue;
		}
		cl->attempts++;
		cl->status = CL_INFLIGHT;
		cl->deadline = deadline_after(tx->now_ms, vis);
		claim_store(tx, c, cl);
		out[nout].offset = cl->offset;
		out[nout].attempts = cl->attempts;
		nout++;
	}
	free(cls);
	if (cursor_advance(tx, c, &cursor, &m) != 0) {
		free(out);
		return -1;
	}
	if (cursor != cursor0) {
		cursor_store(tx, c, cursor);
	}
	/* Redelivered records below the cursor come first in `out`;
	 * answer in offset order. */
	for (size_t i = 1; i < nout; i++) {
		struct delivery d = out[i];
		size_t j = i;
		while (j > 0 && out[j - 1].offset > d.offset) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = d;
	}
	res_begin(res, STORE_OK);
	res_array(res, (uint32_t)nout);
	sbuf_init(&k);
	for (size_t i = 0; i < nout; i++) {
		struct val v;
		int found;

		key_start(&k, tx->group, K_REC);
		key_shard(&k, c->scope, c->shard);
		sbuf_u64(&k, out[i].offset);
		found = tx_get(tx, &k, &v);
		if (found <= 0 || v.len < 8) {
			val_free(&v);
			rv = found < 0
			         ? -1
			         : tx_fail(tx, "stream record missing", NULL);
			break;
		}
		res_array(res, 3);
		res_u64(res, out[i].offset);
		res_u64(res, out[i].attempts);
		res_bytes(res, v.p + 8, v.len - 8);
		val_free(&v);
	}
	sbuf_free(&k);
	free(out);
	return rv;
}

/* Ack, nack, discard and redrive of one offset. */
static int cg_settle(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	struct claim cl;
	uint64_t cursor, cursor0;
	uint32_t max_att = c->attempts ? c->attempts : STORE_CG_MAX_ATTEMPTS;
	int found, dead;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0 ||
	    cursor_load(tx, c, &cursor) != 0) {
		return -1;
	}
	cursor0 = cursor;
	if (c->offset >= m.tail) {
		res_error(res, STORE_ERR,
		          "offset is past the end of the stream");
		return 0;
	}
	found = claim_load(tx, c, c->offset, &cl);
	if (found < 0) {
		return -1;
	}
	switch (c->op) {
	case STORE_OP_CG_ACK:
	case STORE_OP_CG_NACK:
		dead = found && cl.status != CL_DEAD
		           ? 0
		           : dead_take(tx, c, c->offset, false);
		if (dead < 0) {
			return -1;
		}
		if (dead) {
			res_error(res, STORE_ERR, "record is dead-lettered");
			return 0;
		}
		if ((found && settled(cl.status)) ||
		    (!found && c->offset < cursor)) {
			if (c->op == STORE_OP_CG_NACK) {
				res_error(res, STORE_ERR,
				          "record is already acknowledged");
				return 0;
			}
			break; /* acking twice is fine */
		}
		if (!found) {
			res_error(res, STORE_ERR, "record is not in flight");
			return 0;
		}
		if (c->op == STORE_OP_CG_ACK) {
			claim_settle(tx, c, &cl, CL_ACKED, cursor);
		} else if (cl.attempts >= max_att) {
			dead_put(tx, c, &cl);
			claim_settle(tx, c, &cl, CL_DEAD, cursor);
		} else if (cl.status != CL_NACKED) {
			cl.status = CL_NACKED;
			claim_store(tx, c, &cl);
		}
		break;
	case STORE_OP_CG_DISCARD:
	case STORE_OP_CG_REDRIVE:
		dead = dead_take(tx, c, c->offset, false);
		if (dead < 0) {
			return -1;
		}
		if (!dead) {
			res_error(res, STORE_ERR,
			          "offset is not dead-lettered");
			return 0;
		}
		if (c->op == STORE_OP_CG_REDRIVE && c->offset < m.head) {
			res_error(res, STORE_ERR,
			          "record is no longer retained");
			return 0;
		}
		(void)dead_take(tx, c, c->offset, true);
		if (c->op == STORE_OP_CG_DISCARD) {
			if (found) {
				claim_settle(tx, c, &cl, CL_DISCARDED, cursor);
			}
		} else {
			cl.offset = c->offset;
			cl.status = CL_NACKED;
			cl.attempts = 0;
			cl.deadline = 0;
			claim_store(tx, c, &cl);
		}
		break;
	default:
		break;
	}
	if (cursor_advance(tx, c, &cursor, &m) != 0) {
		return -1;
	}
	if (cursor != cursor0) {
		cursor_store(tx, c, cursor);
	}
	res_begin(res, STORE_OK);
	res_bool(res, true);
	return 0;
}

static int cg_dead_letters(struct tx *tx, const struct store_cmd *c,
                           struct sbuf *res)
{
	struct titer it;
	struct sbuf k;
	uint64_t max = c->max ? c->max : DEAD_LIST_DEFAULT;
	uint32_t n = 0;
	size_t mark;
	int rv = 0;

	sbuf_init(&k);
	group_prefix(&k, tx->group, K_DEAD, c);
	titer_open(&it, tx, &k);
	sbuf_u64(&k, c->offset);
	res_begin(res, STORE_OK);
	mark = res_array_open(res);
	for (titer_seek(&it, &k); titer_valid(&it) && n < max;
	     titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		res_u64(res, be_get64(kp + kl - 8));
		n++;
	}
	res_array_close(res, mark, n);
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	return rv;
}

static int count_prefix(struct tx *tx, const struct sbuf *prefix, uint64_t *n)
{
	struct titer it;

	*n = 0;
	titer_open(&it, tx, prefix);
	for (titer_seek(&it, NULL); titer_valid(&it); titer_next(&it)) {
		(*n)++;
	}
	return titer_close(&it);
}

static int cg_info(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct sbuf k;
	uint64_t cursor, claims, dead;
	int rv;

	if (cursor_load(tx, c, &cursor) != 0) {
		return -1;
	}
	sbuf_init(&k);
	group_prefix(&k, tx->group, K_CLAIM, c);
	rv = count_prefix(tx, &k, &claims);
	group_prefix(&k, tx->group, K_DEAD, c);
	if (rv == 0) {
		rv = count_prefix(tx, &k, &dead);
	}
	sbuf_free(&k);
	if (rv != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_u64(res, cursor);
	res_u64(res, claims);
	res_u64(res, dead);
	return 0;
}

int cgroup_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	if (!check_scope(c, res)) {
		return 0;
	}
	if (c->group.len == 0 || c->group.len > STORE_NAME_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR consumer group name must be 1 to 4096 bytes");
		return 0;
	}
	switch (c->op) {
	case STORE_OP_CG_POLL:
		return cg_poll(tx, c, res);
	case STORE_OP_CG_DEAD_LETTERS:
		return cg_dead_letters(tx, c, res);
	case STORE_OP_CG_INFO:
		return cg_info(tx, c, res);
	default:
		return cg_settle(tx, c, res);
	}
}
