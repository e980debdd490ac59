/* FerricFlow over FSNP: a Flow request (typed body, COMMAND_EXEC arguments
 * or compact body, all turned into the typed body) is validated and
 * encoded by flow/ (flow_cmd_encode, with a random seed and the configured
 * clock skew bound), routed by its partition's slot to a data group and
 * run there on the group's leader (reads through shards_read_cmd,
 * everything else proposed). The store result's value is the reply.
 *
 * What flow/ leaves to this layer (flow/flow.h):
 *  - CLAIM_DUE and RECLAIM without a partition ask the data groups one
 *    after the other (from a rotating start) with the limit still open,
 *    so nothing is claimed that the reply does not carry;
 *  - POLICY.SET and RETENTION_CLEANUP run on every group (the reply is
 *    group 1's); VALUE.MGET asks every group and merges per position;
 *  - *_MANY batches whose items live in different groups: independent
 *    ones are split into one command per group and the per-item results
 *    put back in request order; others are refused (`ERR flow batch
 *    crosses shards`, as the reference);
 *  - block_ms: a claim that finds nothing is parked on the node the
 *    client is connected to and asked again when a Flow write applied on
 *    this node makes a matching flow due (flow/'s changes hook: every
 *    replica applies every entry, so a follower holding the group sees the
 *    write as soon as it learns the commit), until it claims something or
 *    block_ms passes (0: no end). Each ask is an ordinary claim on the
 *    group's leader (forwarded within the forward timeout), so nothing
 *    waits at the leader. The safety-net re-check is timed to the
 *    earliest due time of this node's replica (flow_next_due: flows that
 *    become due by time passing), capped at FLOW_RECHECK_MAX_MS; for a
 *    group this node holds no replica of, it cannot see the writes and
 *    asks again every FLOW_REMOTE_POLL_MS (and at once after a Flow write
 *    through this node);
 *  - FLOW_WAKE events: for every Flow command applied on this node (one
 *    event per command, naming its first written flow), and for writes
 *    through this node to a group it holds no replica of;
 *  - compact Flow replies on connections that asked for them: job claims
 *    in flow_claim_jobs_v1, GET's record in flow_record_v1, claimed
 *    records in flow_record_list_v1.
 * COMMAND_EXEC arguments follow the SDK's grammar: the opcode's first
 * positional argument (or, for *_MANY, the partition, AUTO or MIXED and
 * then ITEMS), then TOKEN value pairs named after the body's fields. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "flow/flow.h"
#include "flow/flow_index.h"
#include "flow/flow_stats.h"
#include "flow/flow_gov.h"
#include "flow/flow_wait.h"
#include "node/fsnp/fsnp_internal.h"
#include "store/result.h"
#include "wire/flow_route.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"

/* Re-check periods of a parked claim: a group held here is asked again
 * by its earliest due time, this long at the latest; one whose floors
 * say "due now" (this replica behind the leader's claim) a little later;
 * a group held elsewhere this often. */
#define FLOW_RECHECK_MAX_MS 5000u
#define FLOW_RECHECK_BEHIND_MS 100u
#define FLOW_REMOTE_POLL_MS 100u

enum flow_kind {
	FK_ONE,   /* one group */
	FK_CLAIM, /* a claim: one group, or group after group */
	FK_FAN,   /* a claim over every group: peek all, then split */
	FK_ALL,   /* every group; group 1's reply */
	FK_MGET,  /* every group; values merged per position */
	FK_SPLIT, /* an independent batch, one command per group */
	FK_SLIST, /* FLOW.SCHEDULE.LIST: every group, lists merged */
	/* a governance listing: every group, lists merged */
	FK_GOV,
	/* EFFECT.RESERVE step 1: the named circuit's group */
	FK_CIRCUIT,
	FK_STATS, /* one group or every group; answers merged by flow/ */
	/* APPROVE / REJECT step 2: the waiting flow's group */
	FK_WAKE,
	/* EFFECT.RESERVE step 2 after a cross-group circuit admitted it */
	FK_RESERVE2,
	/* EFFECT.RESERVE refused by such a circuit: is it a replay? */
	FK_REPLAY,
	/* a claim admitted by a governance limit: the credits' spend */
	FK_ADMIT,
	/* that spend refused: is anything due at all? (peeks) */
	FK_ADMIT_PEEK,
	/* an admitted claim that found nothing gives its credits back
	 * before it waits */
	FK_UNSPEND,
	/* EXTEND_LEASE with the admission options: the credit's lease
	 * renewed first (LIMIT.RENEW in the scope's group) */
	FK_RENEW,
	/* a circuit count after the answer (probe given back, outcome fed):
	 * the saved answer is sent whatever it gives */
	FK_SIDE,
};

struct fsnp_flow {
	uint16_t opcode;
	enum flow_kind kind;
	uint8_t *body; /* the typed body (owned) */
	size_t len;
	struct flow_req *req; /* claims: the decoded body (views into it) */
	uint64_t seed;
	bool ok_on_success;

	/* claims */
	uint32_t fixed_group; /* 0: every group, in turn */
	bool block;
	uint64_t block_until; /* wall ms; 0 = no end */
	int64_t limit, remaining;
	uint32_t start, asked;
	int err_status; /* first group that failed (SHARDS_*), and which */
	uint32_t err_group;
	struct wbuf acc; /* claimed items, encoded one after another */
	uint32_t n_acc;

	/* FK_FAN: phase 0 peeks every group, phase 1 claims; the picks
	 * (what each group would take, merged) and each group's share */
	int phase;
	struct fan_pick *picks;
	uint32_t n_picks;
	uint32_t *quota; /* by group - 1 */

	/* fan-out and split: one result per part */
	struct fsnp_res *res;
	uint32_t n_res;
	uint32_t n_items;
	uint32_t *item_part; /* split: the part of each item */
	uint32_t *item_pos;  /* split: its position within the part */

	struct wbuf decided; /* an answer kept while a second step runs */
	bool decided_custom; /* ... and whether it is a compact payload */
	bool probe;          /* step 1 counted a half-open probe */

	/* a claim admitted by a governance limit: the credits spent (the
	 * encoded reservation_ids list), and whether they were recorded */
	bool admitted, admit_done;
	struct wbuf credits;
	/* refused with nothing due and block_ms: parked without credits,
	 * the spend asked again when polled */
	bool admit_wait;
};

struct fan_pick {
	uint32_t group;
	uint32_t rank; /* the group's place in this request's rotation */
	int64_t priority;
	int64_t due;
	int64_t count; /* flows it stands for; -1: as many as the group has */
	uint8_t state; /* PICK_* */
};

enum { PICK_FREE, PICK_ASKED, PICK_DONE };

static uint32_t claim_rotor;

static void flow_woke(struct fsnp_req *r);
static void reply_decided(struct fsnp_req *r);
static void circuit_checked(struct fsnp_req *r, int status, const uint8_t *res,
                            size_t len);
static void fan_step(struct fsnp_req *r);
static void reply_records_compact(struct fsnp_req *r, bool list);
static void fan_begin(struct fsnp_req *r);
static void claim_empty(struct fsnp_req *r);
static int plan_parts(struct fsnp_req *r, uint32_t n);
static void plan_single(struct fsnp_req *r);
static void res_free(struct fsnp_flow *f);
static void admit_peeked(struct fsnp_req *r);
static void renewed(struct fsnp_req *r, int status, const uint8_t *res,
                    size_t len);
static bool claim_admission(struct fsnp_req *r, const struct flow_req *req);
static bool admit_unspend(struct fsnp_req *r);
static void admit_unspent(struct fsnp_req *r);

/* Whether this node holds a replica of `group` (so its apply, and the
 * changes hook, run here). */
static bool held_here(struct fsnp_server *s, uint32_t group)
{
	return shards_replicated(s->shards, group);
}
static bool approval_wake(struct fsnp_req *r);
static bool circuit_side(struct fsnp_req *r, bool after_reserve);
static bool credit_return(struct fsnp_req *r);
static void replay_checked(struct fsnp_req *r, int status, const uint8_t *res,
                           size_t len);
static void admit_spent(struct fsnp_req *r, int status, const uint8_t *res,
                        size_t len);
static void wake_done(struct fsnp_req *r, int status, const uint8_t *res,
                      size_t len);

void fsnp_flow_free(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	if (f == NULL) {
		return;
	}
	free(f->body);
	free(f->req);
	wbuf_free(&f->acc);
	wbuf_free(&f->decided);
	wbuf_free(&f->credits);
	if (f->res != NULL) {
		for (uint32_t i = 0; i < f->n_res; i++) {
			free(f->res[i].data);
		}
		free(f->res);
	}
	free(f->item_part);
	free(f->item_pos);
	free(f->picks);
	free(f->quota);
	free(f);
	r->flow = NULL;
}

static uint64_t flow_seed(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
		v = uv_hrtime() * UINT64_C(0x9E3779B97F4A7C15);
	}
	return v;
}

static void flow_error(struct fsnp_req *r, int status, const char *msg)
{
	bool busy = status == FSNP_STATUS_BUSY;
	const char *code = status == FSNP_STATUS_BAD_REQUEST ? "bad_request"
	                   : busy                            ? "busy"
	                                                     : "error";
	fsnp_reply_error(r, (uint16_t)status, code, msg, busy,
	                 busy ? FSNP_RETRY_AFTER_MS : 0);
}

/* The error text of a store error result (a binary value). */
static void result_message(const uint8_t *v, size_t len, char *out, size_t cap)
{
	struct fsnp_val val;
	if (fsnp_value_decode(v, len, NULL, &val, NULL) == 0 &&
	    val.tag == FSNP_BIN) {
		size_t n = val.as.bin.len < cap - 1 ? val.as.bin.len : cap - 1;
		memcpy(out, val.as.bin.ptr, n);
		out[n] = '\0';
	} else {
		snprintf(out, cap, "ERR flow command failed");
	}
}

/* Answers from one part's outcome. */
static void reply_result(struct fsnp_req *r, int status, uint32_t group,
                         const uint8_t *res, size_t len)
{
	char msg[512];
	int st;
	if (status != SHARDS_OK) {
		fsnp_exec_reply_shards(r, status, group);
		return;
	}
	if (len < 3 || res[0] != STORE_RESULT_VERSION) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR malformed result from the store");
		return;
	}
	if (res[1] == STORE_OK) {
		wbuf_reset(&r->reply);
		r->custom = false;
		wbuf_put_u16(&r->reply, FSNP_STATUS_OK);
		wbuf_append(&r->reply, res + 2, len - 2);
		return;
	}
	if (len > 2 && res[2] == FSNP_MAP) {
		/* A governance denial: the map is the error value. */
		wbuf_reset(&r->reply);
		r->custom = false;
		wbuf_put_u16(&r->reply, FSNP_STATUS_ERROR);
		wbuf_append(&r->reply, res + 2, len - 2);
		return;
	}
	result_message(res + 2, len - 2, msg, sizeof msg);
	st = flow_reply_status(res[1]);
	if (strncmp(msg, "BUSY", 4) == 0 || strncmp(msg, "OOM", 3) == 0) {
		st = FSNP_STATUS_BUSY;
	}
	flow_error(r, st, msg);
}

/* Whether a store result is OK; its value in *v. */
static bool result_ok(int status, const uint8_t *res, size_t len,
                      struct fsnp_val *v)
{
	return status == SHARDS_OK && len >= 3 &&
	       res[0] == STORE_RESULT_VERSION && res[1] == STORE_OK &&
	       fsnp_value_decode(res + 2, len - 2, NULL, v, NULL) == 0;
}

/* A copy of the map `body` without the top-level key `drop`, and with
 * `extra` (when not NULL) written by `add`. */
static int body_rewrite(const uint8_t *body, size_t len, const char *drop,
                        void (*add)(struct fsnp_writer *, void *), void *arg,
                        struct wbuf *out)
{
	struct fsnp_val map, v;
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_writer w;
	if (fsnp_value_decode_body(body, len, NULL, &map) != 0) {
		return -1;
	}
	fsnp_w_init(&w, out);
	fsnp_w_map_begin(&w);
	fsnp_iter_init(&it, &map);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (fsnp_bytes_eq(k, drop)) {
			continue;
		}
		fsnp_w_key_bin(&w, k.ptr, k.len);
		fsnp_w_val(&w, &v);
	}
	if (add != NULL) {
		add(&w, arg);
	}
	fsnp_w_map_end(&w);
	return fsnp_w_finish(&w) != 0 ? -1 : 0;
}

/* Encodes `body` as the command of part `part` on `group`. */
static int part_encode(struct fsnp_req *r, struct fsnp_part *part,
                       uint32_t group, const uint8_t *body, size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct flow_cmd_meta meta = {
	    .max_clock_skew_ms = r->srv->lim.flow_clock_skew_ms,
	    .seed = f->seed,
	};
	struct flow_err err;
	uint8_t *cmd = NULL;
	size_t n = 0;
	/* f->body was decoded without error when the request started. */
	if ((body == f->body ? flow_cmd_encode_valid(f->opcode, body, len,
	                                             &meta, &cmd, &n, &err)
	                     : flow_cmd_encode(f->opcode, body, len, &meta,
	                                       &cmd, &n, &err)) != 0) {
		flow_error(r, err.status, err.msg);
		return -1;
	}
	if (part->cmd != NULL && part->cmd != r->plan.one_cmd) {
		free(part->cmd);
	}
	part->cmd = cmd;
	part->len = n;
	part->group = group;
	part->read = flow_opcode_is_read(f->opcode);
	return 0;
}

static void add_limit(struct fsnp_writer *w, void *arg)
{
	fsnp_w_key(w, "limit");
	fsnp_w_i64(w, *(int64_t *)arg);
}

/* The claim's next group, with the limit still open. */
static uint32_t claim_group(const struct fsnp_req *r)
{
	const struct fsnp_flow *f = r->flow;
	if (f->fixed_group != 0) {
		return f->fixed_group;
	}
	return 1 + (f->start + f->asked) % r->srv->data_groups;
}

static uint32_t claim_groups(const struct fsnp_req *r)
{
	return r->flow->fixed_group != 0 ? 1 : r->srv->data_groups;
}

static void submit_one(struct fsnp_req *r)
{
	r->ops = &r->op1;
	r->op1.req = r;
	r->op1.part = 0;
	r->pending = 1;
	fsnp_server_submit(r->srv, &r->op1);
}

/* Asks the claim's next group. False with the error in the reply. */
static bool claim_step(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct wbuf b;
	int rv;
	wbuf_init(&b);
	if (f->fixed_group != 0) {
		rv = part_encode(r, &r->plan.one, f->fixed_group, f->body,
		                 f->len);
	} else if (body_rewrite(f->body, f->len, "limit", add_limit,
	                        &f->remaining, &b) != 0 ||
	           b.oom) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		rv = -1;
	} else {
		rv =
		    part_encode(r, &r->plan.one, claim_group(r), b.data, b.len);
	}
	wbuf_free(&b);
	if (rv != 0) {
		return false;
	}
	submit_one(r);
	return true;
}

static void claim_reply(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	wbuf_reset(&r->reply);
	r->custom = false;
	wbuf_put_u16(&r->reply, FSNP_STATUS_OK);
	wbuf_put_u8(&r->reply, FSNP_ARRAY);
	wbuf_put_u32(&r->reply, f->n_acc);
	wbuf_append(&r->reply, f->acc.data, f->acc.len);
}

/* The claim's items as flow_claim_jobs_v1 (0x80: u32 n, then per job
 * bin id, obin partition, bin lease_token, i64 fencing_token, and for the
 * _state returns obin run_state) when the connection asked for compact
 * Flow replies and every item has that shape; else the reply stays typed. */
static void claim_compact(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	const struct fsnp_conn *c = r->conn;
	struct fsnp_iter it, jt;
	struct fsnp_val list, job, e[5];
	struct wbuf out;
	uint32_t width = 0, chunk;
	if (c == NULL || !c->compact_flow_responses || c->zlib ||
	    r->parent != NULL || f->n_acc == 0) {
		return;
	}
	if (fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &list,
	                      NULL) != 0) {
		return;
	}
	fsnp_iter_init(&it, &list);
	if (fsnp_iter_next(&it, NULL, &job) && job.tag == FSNP_MAP) {
		/* Records: flow_record_list_v1. */
		reply_records_compact(r, true);
		return;
	}
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &job)) {
		uint32_t k = 0;
		if (job.tag != FSNP_ARRAY || job.as.count < 4 ||
		    job.as.count > 5 || (width != 0 && job.as.count != width)) {
			return;
		}
		width = job.as.count;
		fsnp_iter_init(&jt, &job);
		while (fsnp_iter_next(&jt, NULL, &e[k])) {
			k++;
		}
		if (e[0].tag != FSNP_BIN ||
		    (e[1].tag != FSNP_BIN && e[1].tag != FSNP_NIL) ||
		    e[2].tag != FSNP_BIN || e[3].tag != FSNP_I64 ||
		    (k == 5 && e[4].tag != FSNP_BIN && e[4].tag != FSNP_NIL)) {
			return;
		}
	}
	wbuf_init(&out);
	wbuf_put_u16(&out, FSNP_STATUS_OK);
	wbuf_put_u8(&out, FSNP_COMPACT_FLOW_CLAIM_JOBS);
	wbuf_put_u32(&out, list.as.count);
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &job)) {
		uint32_t k = 0;
		fsnp_iter_init(&jt, &job);
		while (fsnp_iter_next(&jt, NULL, &e[k])) {
			const struct fsnp_val *v = &e[k];
			if (k == 3) {
				wbuf_put_u64(&out, (uint64_t)v->as.i);
			} else if (v->tag == FSNP_NIL) {
				wbuf_put_u32(&out, UINT32_MAX);
			} else {
				wbuf_put_u32(&out, (uint32_t)v->as.bin.len);
				wbuf_append(&out, v->as.bin.ptr, v->as.bin.len);
			}
			k++;
		}
	}
	chunk = fsnp_chunk_size((uint32_t)r->srv->lim.response_chunk_bytes,
	                        (uint32_t)r->srv->lim.max_frame_bytes);
	if (out.oom || out.len > chunk) {
		wbuf_free(&out);
		return;
	}
	wbuf_free(&r->reply);
	r->reply = out;
	r->custom = true;
	r->srv->stats.flow_compact_replies++;
	metric_add(r->srv->m_flow_compact_replies, 1);
}

/* Whether this reply may go out in a compact Flow codec: the connection
 * asked for compact Flow replies, is not compressed, and the request is
 * not a pipeline item. */
static bool compact_ok(const struct fsnp_req *r)
{
	const struct fsnp_conn *c = r->conn;
	return c != NULL && c->compact_flow_responses && !c->zlib &&
	       r->parent == NULL && r->reply.len > 2 &&
	       wire_load_u16(r->reply.data) == FSNP_STATUS_OK;
}

/* Re-encodes the typed OK reply as flow_record_v1 (a record: a map) or
 * flow_record_list_v1 (a list of records); leaves it typed when it has
 * another shape or does not fit one frame. */
static void reply_records_compact(struct fsnp_req *r, bool list)
{
	struct fsnp_val v;
	struct wbuf out;
	uint32_t chunk;
	int rv;
	if (!compact_ok(r) ||
	    fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &v,
	                      NULL) != 0 ||
	    v.tag != (list ? FSNP_ARRAY : FSNP_MAP)) {
		return;
	}
	wbuf_init(&out);
	wbuf_put_u16(&out, FSNP_STATUS_OK);
	rv = list ? fsnp_compact_flow_record_list_encode(&out, &v)
	          : fsnp_compact_flow_record_encode(&out, &v);
	chunk = fsnp_chunk_size((uint32_t)r->srv->lim.response_chunk_bytes,
	                        (uint32_t)r->srv->lim.max_frame_bytes);
	if (rv != 0 || out.oom || out.len > chunk) {
		wbuf_free(&out);
		return;
	}
	wbuf_free(&r->reply);
	r->reply = out;
	r->custom = true;
	r->srv->stats.flow_compact_replies++;
	metric_add(r->srv->m_flow_compact_replies, 1);
}

static void claim_restart(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	f->asked = 0;
	f->remaining = f->limit;
	f->err_status = SHARDS_OK;
	f->start = claim_rotor++;
}

/* --- Claims over every group ------------------------------------------
 *
 * An unpartitioned CLAIM_DUE or RECLAIM on several groups: every group's
 * leader is first asked what it would take (a peek: [priority, due] per
 * flow, in its claim order, nothing written), the answers are merged by
 * priority (high first) then due time (the reference's order; ties by a
 * rotation of the groups), and the first `limit` of them split the limit:
 * each group is then asked to claim its share, all at once. The reply
 * lists the claimed flows in the merged order. Nothing is claimed that
 * the reply does not carry; a group whose flows went meanwhile answers
 * fewer. */

static void fan_run(struct fsnp_req *r, const bool *ask)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups;
	r->pending = 1;
	for (uint32_t i = 0; i < n; i++) {
		free(f->res[i].data);
		memset(&f->res[i], 0, sizeof f->res[i]);
		f->res[i].status = -1; /* not asked */
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ask[i]) {
			r->pending++;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ask[i]) {
			r->ops[i].req = r;
			r->ops[i].part = i;
			fsnp_server_submit(r->srv, &r->ops[i]);
		}
	}
	if (--r->pending == 0) {
		fan_step(r);
	}
}

static void fan_begin(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups;
	struct flow_cmd_meta meta = {
	    .max_clock_skew_ms = r->srv->lim.flow_clock_skew_ms,
	    .seed = f->seed,
	};
	struct flow_err err;
	bool *ask = calloc(n, sizeof *ask);
	if (ask == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	f->phase = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_part *p = &r->plan.parts[i];
		uint8_t *cmd = NULL;
		size_t len = 0;
		if (flow_cmd_encode_peek(f->opcode, f->body, f->len, &meta,
		                         &cmd, &len, &err) != 0) {
			flow_error(r, err.status, err.msg);
			free(ask);
			fsnp_exec_finish(r);
			return;
		}
		free(p->cmd);
		p->cmd = cmd;
		p->len = len;
		p->group = i + 1;
		p->read = true;
		ask[i] = true;
	}
	fan_run(r, ask);
	free(ask);
}

/* Which flows a claim takes across groups: priority first (as the
 * reference's scans), then the groups in the request's rotating order
 * (the reference starts its bucket scan round-robin; concurrent claims so
 * spread over the groups instead of all asking the one holding the oldest
 * flow), then due time. */
static int pick_take_cmp(const void *pa, const void *pb)
{
	const struct fan_pick *a = pa, *b = pb;
	if (a->priority != b->priority) {
		return a->priority > b->priority ? -1 : 1;
	}
	if (a->rank != b->rank) {
		return a->rank < b->rank ? -1 : 1;
	}
	return a->due < b->due ? -1 : a->due > b->due;
}

/* The reply's order: priority, then due time (ties by group order). */
static int pick_reply_cmp(const void *pa, const void *pb)
{
	const struct fan_pick *a = pa, *b = pb;
	if (a->priority != b->priority) {
		return a->priority > b->priority ? -1 : 1;
	}
	if (a->due != b->due) {
		return a->due < b->due ? -1 : 1;
	}
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* The first failed group's status into f->err_*; whether all failed. */
static bool fan_errors(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t asked = 0, failed = 0;
	for (uint32_t i = 0; i < r->srv->data_groups; i++) {
		struct fsnp_res *x = &f->res[i];
		struct fsnp_val v;
		if (x->status == -1) {
			continue;
		}
		asked++;
		if (!result_ok(x->status, x->data, x->len, &v) ||
		    v.tag != FSNP_ARRAY) {
			failed++;
			if (f->err_status == SHARDS_OK) {
				f->err_status =
				    x->status != SHARDS_OK ? x->status : -1;
				f->err_group = i;
			}
		}
	}
	return asked > 0 && failed == asked;
}

/* Answers the first failure (a store error as itself). */
static void fan_reply_error(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_res *x = &f->res[f->err_group];
	reply_result(r, x->status, f->err_group + 1, x->data, x->len);
	fsnp_exec_finish(r);
}

/* Nothing more to ask: the reply, the first error, or a wait. */
static void fan_done(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	if (f->n_acc > 0) {
		claim_reply(r);
		claim_compact(r);
		fsnp_exec_finish(r);
	} else if (f->err_status != SHARDS_OK) {
		fan_reply_error(r);
	} else {
		claim_empty(r); /* nothing due, or taken meanwhile */
	}
}

/* Asks each group for its share of the free picks that come first, up to
 * the claim's open limit. False when there is nothing left to ask. */
static bool fan_claim_round(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups, want, total = 0;
	struct flow_cmd_meta meta = {
	    .max_clock_skew_ms = r->srv->lim.flow_clock_skew_ms,
	    .seed = f->seed,
	};
	bool *ask;
	want =
	    f->limit > (int64_t)f->n_acc ? (uint32_t)(f->limit - f->n_acc) : 0;
	memset(f->quota, 0, n * sizeof *f->quota);
	for (uint32_t k = 0; k < f->n_picks && total < want; k++) {
		struct fan_pick *pk = &f->picks[k];
		uint32_t take;
		if (pk->state != PICK_FREE) {
			continue;
		}
		/* A summary (count -1) stands for all of its group's due
		 * flows: the group is asked for everything still open. */
		take = pk->count < 0 || (uint64_t)pk->count > want - total
		           ? want - total
		           : (uint32_t)pk->count;
		pk->state = PICK_ASKED;
		f->quota[pk->group - 1] += take;
		total += take;
	}
	if (total == 0) {
		return false;
	}
	ask = calloc(n, sizeof *ask);
	if (ask == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return true;
	}
	f->phase = 1;
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_part *p = &r->plan.parts[i];
		struct flow_err err;
		struct wbuf b;
		int64_t share = f->quota[i];
		uint8_t *cmd = NULL;
		size_t len = 0;
		if (share == 0) {
			continue;
		}
		wbuf_init(&b);
		if (body_rewrite(f->body, f->len, "limit", add_limit, &share,
		                 &b) != 0 ||
		    b.oom ||
		    flow_cmd_encode(f->opcode, b.data, b.len, &meta, &cmd, &len,
		                    &err) != 0) {
			wbuf_free(&b);
			free(ask);
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
			fsnp_exec_finish(r);
			return true;
		}
		wbuf_free(&b);
		free(p->cmd);
		p->cmd = cmd;
		p->len = len;
		p->read = false;
		ask[i] = true;
	}
	fan_run(r, ask);
	free(ask);
	return true;
}

static void fan_peeked(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups;
	f->err_status = SHARDS_OK;
	if (fan_errors(r)) {
		fan_reply_error(r);
		return;
	}
	f->n_picks = 0;
	wbuf_reset(&f->acc);
	f->n_acc = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_val v, e, pr, due;
		struct fsnp_iter it, jt;
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &v) ||
		    v.tag != FSNP_ARRAY) {
			continue;
		}
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			struct fan_pick *np;
			struct fsnp_val cnt = {.tag = FSNP_NIL};
			if (e.tag != FSNP_ARRAY || e.as.count < 2 ||
			    e.as.count > 3) {
				continue;
			}
			fsnp_iter_init(&jt, &e);
			if (!fsnp_iter_next(&jt, NULL, &pr) ||
			    !fsnp_iter_next(&jt, NULL, &due) ||
			    pr.tag != FSNP_I64 || due.tag != FSNP_I64 ||
			    (fsnp_iter_next(&jt, NULL, &cnt) &&
			     cnt.tag != FSNP_I64)) {
				continue;
			}
			np = realloc(f->picks, (f->n_picks + 1) * sizeof *np);
			if (np == NULL) {
				break;
			}
			f->picks = np;
			np += f->n_picks++;
			np->group = i + 1;
			np->rank = (i + n - f->start % n) % n;
			np->priority = pr.as.i;
			np->due = due.as.i;
			np->count = cnt.tag == FSNP_I64 ? cnt.as.i : 1;
			np->state = PICK_FREE;
		}
	}
	if (f->n_picks > 1) {
		qsort(f->picks, f->n_picks, sizeof *f->picks, pick_take_cmp);
	}
	if (!fan_claim_round(r)) {
		fan_done(r);
	}
}

/* A claim round answered: the flows in reply order; a group that claimed
 * fewer than its share has no more (its other picks are dropped) and the
 * shortfall is asked of the next picks of the other groups. */
static void fan_claimed(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups, n_round = 0;
	struct fsnp_iter *its = calloc(n, sizeof *its);
	bool *live = calloc(n, sizeof *live);
	struct fan_pick *round =
	    calloc(f->n_picks ? f->n_picks : 1, sizeof *round);
	uint32_t *got = calloc(n, sizeof *got);
	if (its == NULL || live == NULL || round == NULL || got == NULL) {
		free(its);
		free(live);
		free(round);
		free(got);
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	(void)fan_errors(r);
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_val v;
		if (f->res[i].status != -1 &&
		    result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		              &v) &&
		    v.tag == FSNP_ARRAY) {
			fsnp_iter_init(&its[i], &v);
			live[i] = true;
		}
	}
	for (uint32_t k = 0; k < f->n_picks; k++) {
		if (f->picks[k].state == PICK_ASKED) {
			f->picks[k].state = PICK_DONE;
			round[n_round++] = f->picks[k];
		}
	}
	if (n_round > 1) {
		qsort(round, n_round, sizeof *round, pick_reply_cmp);
	}
	for (uint32_t k = 0; k < n_round; k++) {
		uint32_t g = round[k].group - 1;
		int64_t left = round[k].count;
		struct fsnp_val e;
		while (live[g] && left != 0 &&
		       fsnp_iter_next(&its[g], NULL, &e)) {
			wbuf_append(&f->acc, e.enc, e.enc_len);
			f->n_acc++;
			got[g]++;
			left--;
		}
	}
	/* Groups that came short (or failed) have nothing more to give. */
	for (uint32_t k = 0; k < f->n_picks; k++) {
		uint32_t g = f->picks[k].group - 1;
		if (f->picks[k].state == PICK_FREE && f->res[g].status != -1 &&
		    got[g] < f->quota[g]) {
			f->picks[k].state = PICK_DONE;
		}
	}
	free(its);
	free(live);
	free(round);
	free(got);
	if (fsnp_req_orphaned(r) || !fan_claim_round(r)) {
		fan_done(r);
	}
}

static void fan_step(struct fsnp_req *r)
{
	if (r->flow->phase == 0) {
		fan_peeked(r);
	} else {
		fan_claimed(r);
	}
}

/* Sets up an FK_FAN claim's parts, ops and results (one per group). */
static int fan_setup(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint32_t n = r->srv->data_groups;
	if (plan_parts(r, n) != 0) {
		return -1;
	}
	r->ops = calloc(n, sizeof *r->ops);
	f->res = calloc(n, sizeof *f->res);
	if (f->quota == NULL) { /* set up before the claim waited */
		f->quota = calloc(n, sizeof *f->quota);
	}
	if (r->ops == NULL || f->res == NULL || f->quota == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		return -1;
	}
	f->n_res = n;
	return 0;
}

void fsnp_flow_poll(struct fsnp_req *r)
{
	if (r->slot_lent) {
		r->slot_lent = false;
		r->srv->executions++;
	}
	r->waiting = false;
	wbuf_reset(&r->reply);
	if (r->flow->admit_wait) {
		/* refused with nothing due: the spend is asked again */
		r->flow->admit_wait = false;
		plan_single(r);
		res_free(r->flow);
		if (!claim_admission(r, r->flow->req)) {
			fsnp_exec_finish(r);
		}
		return;
	}
	claim_restart(r);
	if (r->flow->kind == FK_FAN) {
		fan_begin(r);
	} else if (!claim_step(r)) {
		fsnp_exec_finish(r);
	}
}

/* When a parked claim is asked again at the latest (ms from now): by the
 * earliest due time this node's replicas know for it. */
static uint64_t claim_recheck_ms(struct fsnp_req *r, uint64_t now)
{
	struct fsnp_flow *f = r->flow;
	struct shards *sh = r->srv->shards;
	uint64_t at = FLOW_RECHECK_MAX_MS;
	uint32_t first = f->fixed_group != 0 ? f->fixed_group : 1;
	uint32_t last =
	    f->fixed_group != 0 ? f->fixed_group : r->srv->data_groups;
	for (uint32_t g = first; g <= last; g++) {
		uint64_t due;
		if (!shards_replicated(sh, g)) {
			at =
			    at < FLOW_REMOTE_POLL_MS ? at : FLOW_REMOTE_POLL_MS;
			continue;
		}
		if (flow_next_due(shards_store(sh), g, f->opcode, f->body,
		                  f->len, now, &due) != 0) {
			at =
			    at < FLOW_REMOTE_POLL_MS ? at : FLOW_REMOTE_POLL_MS;
		} else if (due <= now) {
			at = at < FLOW_RECHECK_BEHIND_MS
			         ? at
			         : FLOW_RECHECK_BEHIND_MS;
		} else if (due - now < at) {
			at = due - now;
		}
	}
	return at;
}

/* A claim round ended with nothing claimed: wait or answer []. */
static void claim_empty(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint64_t now = fsnp_now_ms(r->srv);
	uint64_t at;
	if (!f->block || fsnp_req_orphaned(r) ||
	    (f->block_until != 0 && now >= f->block_until) ||
	    (r->deadline_ms != 0 && now >= r->deadline_ms)) {
		claim_reply(r);
		fsnp_exec_finish(r);
		return;
	}
	if (f->admitted && !f->admit_done && admit_unspend(r)) {
		return;
	}
	at = claim_recheck_ms(r, now);
	if (f->block_until != 0 && f->block_until - now < at) {
		at = f->block_until - now;
	}
	fsnp_server_flow_park(r->srv, r, at);
}

static void claim_done(struct fsnp_req *r, int status, const uint8_t *res,
                       size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v, e;
	struct fsnp_iter it;
	if (status != SHARDS_OK && f->fixed_group == 0) {
		/* A group that cannot answer now: the others may have work;
		 * its failure is the reply only if nothing is claimed. */
		if (f->err_status == SHARDS_OK) {
			f->err_status = status;
			f->err_group = r->plan.one.group;
		}
	} else if (!result_ok(status, res, len, &v) || v.tag != FSNP_ARRAY) {
		if (f->n_acc == 0) {
			reply_result(r, status, r->plan.one.group, res, len);
			fsnp_exec_finish(r);
			return;
		}
		/* Claimed already: hand those out, the rest stays due. */
		claim_reply(r);
		claim_compact(r);
		fsnp_exec_finish(r);
		return;
	} else {
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			wbuf_append(&f->acc, e.enc, e.enc_len);
			f->n_acc++;
			f->remaining--;
		}
	}
	f->asked++;
	if (f->remaining > 0 && f->asked < claim_groups(r) &&
	    !fsnp_req_orphaned(r)) {
		if (!claim_step(r)) {
			fsnp_exec_finish(r);
		}
		return;
	}
	if (f->n_acc == 0 && f->err_status != SHARDS_OK) {
		fsnp_exec_reply_shards(r, f->err_status, f->err_group);
		fsnp_exec_finish(r);
		return;
	}
	if (f->n_acc == 0) {
		claim_empty(r);
		return;
	}
	claim_reply(r);
	claim_compact(r);
	fsnp_exec_finish(r);
}

/* Every part of a fan-out or split has answered. */
static void merge_all(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	for (uint32_t i = 0; i < f->n_res; i++) {
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &(struct fsnp_val){0})) {
			reply_result(r, f->res[i].status,
			             r->plan.parts[i].group, f->res[i].data,
			             f->res[i].len);
			return;
		}
	}
	reply_result(r, SHARDS_OK, 1, f->res[0].data, f->res[0].len);
}

/* A governance listing asked of every group: lists concatenated up to
 * the request's limit, overview counts summed (flow_gov_merge). */
static void merge_gov(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val *vals = calloc(f->n_res, sizeof *vals);
	struct fsnp_val body;
	struct gov_req q;
	struct flow_err err;
	struct fsnp_writer w;
	if (vals == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		return;
	}
	for (uint32_t i = 0; i < f->n_res; i++) {
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &vals[i])) {
			reply_result(r, f->res[i].status,
			             r->plan.parts[i].group, f->res[i].data,
			             f->res[i].len);
			goto out;
		}
	}
	if (fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0 ||
	    flow_gov_body_decode(f->opcode, &body, &q, &err) != 0) {
		flow_error(r, FSNP_STATUS_ERROR, "ERR flow listing failed");
		goto out;
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (flow_gov_merge(f->opcode, &q, vals, f->n_res, &w) != 0 ||
	    fsnp_w_finish(&w) != 0) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR flow listing could not be merged");
	}
out:
	free(vals);
}

static void merge_slist(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	fsnp_flow_sched_list_merge(r, f->body, f->len, f->res, r->plan.parts,
	                           f->n_res);
}

/* STATS / ATTRIBUTES / ATTRIBUTE_VALUES: flow/ combines the answers. */
static void merge_stats(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val *vals = calloc(f->n_res ? f->n_res : 1, sizeof *vals);
	struct flow_req *req = malloc(sizeof *req);
	struct flow_err err;
	struct fsnp_writer w;
	if (vals == NULL || req == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < f->n_res; i++) {
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &vals[i])) {
			reply_result(r, f->res[i].status,
			             r->plan.parts[i].group, f->res[i].data,
			             f->res[i].len);
			goto out;
		}
	}
	if (flow_body_decode_bytes(f->opcode, f->body, f->len, req, &err) !=
	    0) {
		flow_error(r, err.status, err.msg);
		goto out;
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (flow_stats_merge(req, vals, f->n_res, &w, &err) != 0) {
		flow_error(r, err.status, err.msg);
		goto out;
	}
	fsnp_w_finish(&w);
out:
	free(req);
	free(vals);
}

static void merge_mget(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val *lists = calloc(f->n_res, sizeof *lists);
	struct fsnp_iter *its = calloc(f->n_res, sizeof *its);
	struct fsnp_writer w;
	uint32_t n = 0;
	if (lists == NULL || its == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < f->n_res; i++) {
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &lists[i]) ||
		    lists[i].tag != FSNP_ARRAY) {
			reply_result(r, f->res[i].status,
			             r->plan.parts[i].group, f->res[i].data,
			             f->res[i].len);
			goto out;
		}
		n = lists[i].as.count;
		fsnp_iter_init(&its[i], &lists[i]);
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_array_begin(&w);
	for (uint32_t k = 0; k < n; k++) {
		struct fsnp_val pick = {.tag = FSNP_NIL};
		for (uint32_t i = 0; i < f->n_res; i++) {
			struct fsnp_val e;
			if (fsnp_iter_next(&its[i], NULL, &e) &&
			    e.tag != FSNP_NIL && pick.tag == FSNP_NIL) {
				pick = e;
			}
		}
		if (pick.tag == FSNP_NIL) {
			fsnp_w_nil(&w);
		} else {
			fsnp_w_val(&w, &pick);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_finish(&w);
out:
	free(lists);
	free(its);
}

/* Split batch: the per-item results back in request order. */
static void merge_split(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val *vals = calloc(f->n_items, sizeof *vals);
	char(*errs)[320] = calloc(f->n_res, sizeof *errs);
	bool *failed = calloc(f->n_res, sizeof *failed);
	struct fsnp_writer w;
	bool all_ok = true;
	if (vals == NULL || errs == NULL || failed == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		goto out;
	}
	for (uint32_t p = 0; p < f->n_res; p++) {
		struct fsnp_res *x = &f->res[p];
		struct fsnp_val v;
		if (!result_ok(x->status, x->data, x->len, &v)) {
			failed[p] = true;
			if (x->status != SHARDS_OK) {
				snprintf(errs[p], sizeof errs[p], "ERR %s",
				         shards_strerror(x->status));
			} else if (x->len >= 3) {
				result_message(x->data + 2, x->len - 2, errs[p],
				               sizeof errs[p]);
			} else {
				snprintf(errs[p], sizeof errs[p],
				         "ERR flow command failed");
			}
			continue;
		}
		if (v.tag != FSNP_ARRAY) {
			continue; /* "OK": every item of the part */
		}
		struct fsnp_iter it;
		struct fsnp_val e;
		uint32_t k = 0;
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			for (uint32_t i = 0; i < f->n_items; i++) {
				if (f->item_part[i] == p &&
				    f->item_pos[i] == k) {
					vals[i] = e;
				}
			}
			k++;
		}
	}
	for (uint32_t i = 0; i < f->n_items; i++) {
		const struct fsnp_val *e = &vals[i];
		if (failed[f->item_part[i]] ||
		    (e->enc != NULL &&
		     !(e->tag == FSNP_BIN && fsnp_bytes_eq(e->as.bin, "OK")))) {
			all_ok = false;
		}
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (all_ok && f->ok_on_success) {
		fsnp_w_str(&w, "OK");
	} else {
		fsnp_w_array_begin(&w);
		for (uint32_t i = 0; i < f->n_items; i++) {
			uint32_t p = f->item_part[i];
			if (failed[p]) {
				fsnp_w_array_begin(&w);
				fsnp_w_str(&w, "error");
				fsnp_w_str(&w, errs[p]);
				fsnp_w_array_end(&w);
			} else if (vals[i].enc != NULL) {
				fsnp_w_val(&w, &vals[i]);
			} else {
				fsnp_w_str(&w, "OK");
			}
		}
		fsnp_w_array_end(&w);
	}
	fsnp_w_finish(&w);
out:
	free(vals);
	free(errs);
	free(failed);
}

void fsnp_flow_op_done(struct fsnp_op *op, int status, const uint8_t *result,
                       size_t len)
{
	struct fsnp_req *r = op->req;
	struct fsnp_flow *f = r->flow;
	if (f->opcode == FSNP_OP_FLOW_QUERY) {
		r->pending = 0;
		fsnp_flow_query_done(r, f->body, f->len, status, result, len);
		return;
	}
	switch (f->kind) {
	case FK_ONE:
		r->pending = 0;
		reply_result(r, status, r->plan.one.group, result, len);
		if (f->opcode == FSNP_OP_FLOW_GET) {
			reply_records_compact(r, false);
		}
		if (!flow_opcode_is_read(f->opcode) && r->reply.len >= 2 &&
		    wire_load_u16(r->reply.data) == 0 &&
		    !held_here(r->srv, r->plan.one.group)) {
			flow_woke(r);
		}
		if (approval_wake(r) || circuit_side(r, false) ||
		    credit_return(r)) {
			return;
		}
		fsnp_exec_finish(r);
		return;
	case FK_RESERVE2:
		r->pending = 0;
		reply_result(r, status, r->plan.one.group, result, len);
		if (r->reply.len >= 2 && wire_load_u16(r->reply.data) == 0) {
			flow_woke(r);
		}
		if (circuit_side(r, true)) {
			return;
		}
		fsnp_exec_finish(r);
		return;
	case FK_REPLAY:
		r->pending = 0;
		replay_checked(r, status, result, len);
		return;
	case FK_ADMIT:
		r->pending = 0;
		admit_spent(r, status, result, len);
		return;
	case FK_RENEW:
		r->pending = 0;
		renewed(r, status, result, len);
		return;
	case FK_UNSPEND:
		r->pending = 0;
		admit_unspent(r);
		return;
	case FK_SIDE:
		r->pending = 0;
		reply_decided(r);
		fsnp_exec_finish(r);
		return;
	case FK_WAKE:
		r->pending = 0;
		wake_done(r, status, result, len);
		return;
	case FK_CLAIM:
		r->pending = 0;
		claim_done(r, status, result, len);
		return;
	case FK_CIRCUIT:
		r->pending = 0;
		circuit_checked(r, status, result, len);
		return;
	case FK_FAN: {
		struct fsnp_res *x = &f->res[op->part];
		x->status = status;
		if (status == SHARDS_OK && len > 0) {
			x->data = malloc(len);
			if (x->data == NULL) {
				x->status = SHARDS_EBUSY;
			} else {
				memcpy(x->data, result, len);
				x->len = len;
			}
		}
		if (--r->pending == 0) {
			fan_step(r);
		}
		return;
	}
	default:
		break;
	}
	struct fsnp_res *x = &f->res[op->part];
	x->status = status;
	if (status == SHARDS_OK && len > 0) {
		x->data = malloc(len);
		if (x->data == NULL) {
			x->status = SHARDS_EBUSY;
		} else {
			memcpy(x->data, result, len);
			x->len = len;
		}
	}
	if (--r->pending > 0) {
		return;
	}
	if (f->kind == FK_ADMIT_PEEK) {
		admit_peeked(r);
		return;
	}
	if (f->kind == FK_MGET) {
		merge_mget(r);
	} else if (f->kind == FK_STATS) {
		merge_stats(r);
	} else if (f->kind == FK_GOV) {
		merge_gov(r);
	} else if (f->kind == FK_SLIST) {
		merge_slist(r);
	} else {
		bool remote = false;
		if (f->kind == FK_SPLIT) {
			merge_split(r);
		} else {
			merge_all(r);
		}
		for (uint32_t i = 0; i < r->plan.n_parts; i++) {
			remote = remote ||
			         !held_here(r->srv, r->plan.parts[i].group);
		}
		if (remote) {
			flow_woke(r);
		}
		if (f->kind == FK_SPLIT && credit_return(r)) {
			return;
		}
	}
	fsnp_exec_finish(r);
}

/* A Flow write through this node to a group it holds no replica of (its
 * apply never runs here): parked claims try again now, and subscribers
 * of FLOW_WAKE on this node get {opcode, [id], [type], [partition_key]}
 * from the request's body. */
static void flow_woke(struct fsnp_req *r)
{
	static const char *const keys[] = {"id", "type", "partition_key"};
	struct fsnp_flow *f = r->flow;
	struct fsnp_val body, v;
	struct fsnp_writer w;
	struct wbuf b;
	const char *nm;
	fsnp_server_flow_kick(r->srv);
	if (!fsnp_server_has_subscriber(r->srv, FSNP_EV_FLOW_WAKE) ||
	    fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0) {
		return;
	}
	nm = fsnp_opcode_name(f->opcode);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "opcode");
	fsnp_w_str(&w, nm != NULL ? nm : "?");
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		if (fsnp_map_get(&body, keys[i], &v) == 0 &&
		    v.tag == FSNP_BIN) {
			fsnp_w_key(&w, keys[i]);
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) == 0 && !b.oom) {
		fsnp_server_broadcast(r->srv, FSNP_EV_FLOW_WAKE, "FLOW_WAKE",
		                      &b);
	}
	wbuf_free(&b);
}

static bool list_has(const struct fsnp_val *list, struct fsnp_bytes b)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (e.tag == FSNP_BIN && e.as.bin.len == b.len &&
		    (b.len == 0 || memcmp(e.as.bin.ptr, b.ptr, b.len) == 0)) {
			return true;
		}
	}
	return false;
}

static bool bytes_same(struct fsnp_bytes a, struct fsnp_bytes b)
{
	return a.len == b.len &&
	       (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static bool is_any(struct fsnp_bytes b)
{
	return fsnp_bytes_eq(b, "any") || fsnp_bytes_eq(b, "ANY");
}

/* Whether the parked claim `q` could take the changed flow `ch` once it
 * is due (type, states, partitions and priority as the claim filters
 * them; a running flow is a reclaim once its lease deadline passes). */
static bool claim_wants(const struct flow_req *q, const struct flow_change *ch)
{
	const struct flow_opt *st = &q->f[FF_STATE], *sts = &q->f[FF_STATES];
	const struct flow_opt *pk = &q->f[FF_PARTITION_KEY];
	const struct flow_opt *pks = &q->f[FF_PARTITION_KEYS];
	bool running = fsnp_bytes_eq(ch->state, "running");
	unsigned b;
	if (ch->next_run_at_ms < 0 || !bytes_same(q->f[FF_TYPE].t, ch->type)) {
		return false;
	}
	if (q->f[FF_PRIORITY].set && q->f[FF_PRIORITY].i != ch->priority) {
		return false;
	}
	if (q->opcode == FSNP_OP_FLOW_RECLAIM) {
		if (!running) {
			return false;
		}
	} else if (running) {
		if (q->f[FF_RECLAIM_EXPIRED].set &&
		    !q->f[FF_RECLAIM_EXPIRED].b) {
			return false;
		}
	} else if (st->set && !is_any(st->t) && !bytes_same(st->t, ch->state)) {
		return false;
	} else if (sts->set && sts->v.tag == FSNP_ARRAY &&
	           !list_has(&sts->v, ch->state) &&
	           !list_has(&sts->v,
	                     (struct fsnp_bytes){(const uint8_t *)"any", 3}) &&
	           !list_has(&sts->v,
	                     (struct fsnp_bytes){(const uint8_t *)"ANY", 3})) {
		return false;
	}
	if (pks->set && pks->v.tag == FSNP_ARRAY) {
		return list_has(&pks->v, ch->partition_key);
	}
	if (pk->set && pk->t.len > 0 && !fsnp_bytes_eq(pk->t, "AUTO") &&
	    !fsnp_bytes_eq(pk->t, "auto")) {
		return is_any(pk->t) || bytes_same(pk->t, ch->partition_key);
	}
	return flow_route_is_auto(ch->partition_key.ptr, ch->partition_key.len,
	                          &b);
}

void fsnp_flow_changes(void *data, uint32_t group, uint16_t opcode,
                       const struct flow_change *ch, size_t n)
{
	struct fsnp_server *s = data;
	uint64_t now = fsnp_now_ms(s);
	/* A flow that ended may release a queued schedule occurrence. */
	if (n > 0 && s->on_flow_write != NULL) {
		s->on_flow_write(s->on_flow_write_data);
	}
	for (struct fsnp_req *r = s->foc; r != NULL; r = r->wnext) {
		struct fsnp_flow *f = r->flow;
		uint64_t after = UINT64_MAX;
		if (f == NULL || (f->kind != FK_CLAIM && f->kind != FK_FAN) ||
		    f->req == NULL ||
		    (f->fixed_group != 0 && f->fixed_group != group)) {
			continue;
		}
		for (size_t i = 0; i < n && after > 0; i++) {
			uint64_t due;
			if (!claim_wants(f->req, &ch[i])) {
				continue;
			}
			due = (uint64_t)ch[i].next_run_at_ms;
			due = due > now ? due - now : 0;
			after = due < after ? due : after;
		}
		if (after != UINT64_MAX) {
			fsnp_server_flow_retime(s, r, after);
		}
	}
	if (opcode != 0 && n > 0 &&
	    fsnp_server_has_subscriber(s, FSNP_EV_FLOW_WAKE)) {
		const char *nm = fsnp_opcode_name(opcode);
		struct fsnp_writer w;
		struct wbuf b;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_str(&w, nm != NULL ? nm : "?");
		fsnp_w_key(&w, "id");
		fsnp_w_bin(&w, ch[0].id.ptr, ch[0].id.len);
		fsnp_w_key(&w, "type");
		fsnp_w_bin(&w, ch[0].type.ptr, ch[0].type.len);
		fsnp_w_key(&w, "partition_key");
		fsnp_w_bin(&w, ch[0].partition_key.ptr,
		           ch[0].partition_key.len);
		fsnp_w_key(&w, "state");
		fsnp_w_bin(&w, ch[0].state.ptr, ch[0].state.len);
		fsnp_w_key(&w, "count");
		fsnp_w_i64(&w, (int64_t)n);
		fsnp_w_map_end(&w);
		if (fsnp_w_finish(&w) == 0 && !b.oom) {
			fsnp_server_broadcast(s, FSNP_EV_FLOW_WAKE, "FLOW_WAKE",
			                      &b);
		}
		wbuf_free(&b);
	}
}

/* Runs the prepared parts (r->plan.parts, n of them) at once. */
static void run_parts(struct fsnp_req *r, uint32_t n)
{
	struct fsnp_flow *f = r->flow;
	r->ops = calloc(n, sizeof *r->ops);
	f->res = calloc(n, sizeof *f->res);
	if (r->ops == NULL || f->res == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	f->n_res = n;
	r->pending = n + 1;
	for (uint32_t i = 0; i < n; i++) {
		r->ops[i].req = r;
		r->ops[i].part = i;
		fsnp_server_submit(r->srv, &r->ops[i]);
	}
	if (--r->pending == 0) {
		/* Every part answered inside submit: merge now. */
		if (f->kind == FK_ADMIT_PEEK) {
			admit_peeked(r);
			return;
		}
		if (f->kind == FK_MGET) {
			merge_mget(r);
		} else if (f->kind == FK_STATS) {
			merge_stats(r);
		} else if (f->kind == FK_GOV) {
			merge_gov(r);
		} else if (f->kind == FK_SLIST) {
			merge_slist(r);
		} else if (f->kind == FK_SPLIT) {
			merge_split(r);
			if (credit_return(r)) {
				return;
			}
		} else {
			merge_all(r);
		}
		fsnp_exec_finish(r);
	}
}

static int plan_parts(struct fsnp_req *r, uint32_t n)
{
	/* A step before (a claim's admission) may have left its command in
	 * plan.one, which the plan frees no more once parts moves off it. */
	if (r->plan.parts == &r->plan.one &&
	    r->plan.one.cmd != r->plan.one_cmd) {
		free(r->plan.one.cmd);
		r->plan.one.cmd = NULL;
	}
	r->plan.parts = calloc(n, sizeof *r->plan.parts);
	if (r->plan.parts == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		return -1;
	}
	r->plan.n_parts = n;
	return 0;
}

static void start_all(struct fsnp_req *r)
{
	unsigned s = r->srv->data_groups;
	if (plan_parts(r, s) != 0) {
		fsnp_exec_finish(r);
		return;
	}
	for (uint32_t i = 0; i < s; i++) {
		if (part_encode(r, &r->plan.parts[i], i + 1, r->flow->body,
		                r->flow->len) != 0) {
			fsnp_exec_finish(r);
			return;
		}
	}
	run_parts(r, s);
}

static bool is_many(uint16_t op)
{
	return op >= FSNP_OP_FLOW_CREATE_MANY && op <= FSNP_OP_FLOW_CANCEL_MANY;
}

struct items_arg {
	const struct fsnp_val *items;
	const uint32_t *item_part;
	uint32_t part;
};

static void add_items(struct fsnp_writer *w, void *arg)
{
	struct items_arg *a = arg;
	struct fsnp_iter it;
	struct fsnp_val e;
	uint32_t i = 0;
	fsnp_w_key(w, "items");
	fsnp_w_array_begin(w);
	fsnp_iter_init(&it, a->items);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (a->item_part[i++] == a->part) {
			fsnp_w_val(w, &e);
		}
	}
	fsnp_w_array_end(w);
}

/* A *_MANY batch: one group, split, or refused. */
static void start_batch(struct fsnp_req *r, const struct flow_req *req,
                        uint32_t first_group)
{
	struct fsnp_flow *f = r->flow;
	const struct fsnp_val *items = &req->f[FF_ITEMS].v;
	uint32_t groups[64];
	uint32_t n_groups = 0, n = 0, i = 0;
	struct fsnp_iter it;
	struct fsnp_val e;
	bool crosses = false;

	if (!req->f[FF_ITEMS].set || items->tag != FSNP_ARRAY ||
	    items->as.count == 0) {
		goto one; /* flow/ answers the error */
	}
	n = items->as.count;
	f->item_part = calloc(n, sizeof *f->item_part);
	f->item_pos = calloc(n, sizeof *f->item_pos);
	if (f->item_part == NULL || f->item_pos == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	fsnp_iter_init(&it, items);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req item;
		struct flow_err err;
		char buf[FLOW_AUTO_PARTITION_MAX];
		const uint8_t *part;
		size_t plen;
		uint32_t g, p;
		if (flow_body_decode_item(req, &e, &item, &err) != 0) {
			goto one; /* flow/ answers the error */
		}
		flow_cmd_partition(&item, f->seed, buf, &part, &plen);
		g = plen == 0
		        ? first_group
		        : shards_group_of_slot(r->srv->shards,
		                               flow_route_slot(part, plen));
		for (p = 0; p < n_groups && groups[p] != g; p++) {
		}
		if (p == n_groups) {
			if (n_groups == sizeof groups / sizeof groups[0]) {
				goto one;
			}
			groups[n_groups++] = g;
		}
		if (g != first_group) {
			crosses = true;
		}
		f->item_part[i++] = p;
	}
	if (!crosses) {
		goto one;
	}
	if (!(req->f[FF_INDEPENDENT].set && req->f[FF_INDEPENDENT].b)) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR flow batch crosses shards");
		fsnp_exec_finish(r);
		return;
	}
	f->n_items = n;
	{
		uint32_t *cnt = calloc(n_groups, sizeof *cnt);
		if (cnt == NULL) {
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
			fsnp_exec_finish(r);
			return;
		}
		for (i = 0; i < n; i++) {
			f->item_pos[i] = cnt[f->item_part[i]]++;
		}
		free(cnt);
	}
	f->kind = FK_SPLIT;
	if (plan_parts(r, n_groups) != 0) {
		fsnp_exec_finish(r);
		return;
	}
	for (uint32_t p = 0; p < n_groups; p++) {
		struct items_arg a = {items, f->item_part, p};
		struct wbuf b;
		int rv;
		wbuf_init(&b);
		rv = body_rewrite(f->body, f->len, "items", add_items, &a, &b);
		if (rv == 0 && !b.oom) {
			rv = part_encode(r, &r->plan.parts[p], groups[p],
			                 b.data, b.len);
		} else {
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
			rv = -1;
		}
		wbuf_free(&b);
		if (rv != 0) {
			fsnp_exec_finish(r);
			return;
		}
	}
	run_parts(r, n_groups);
	return;
one:
	f->kind = FK_ONE;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	if (part_encode(r, &r->plan.one, first_group, f->body, f->len) != 0) {
		fsnp_exec_finish(r);
		return;
	}
	submit_one(r);
}

int fsnp_flow_prepare(struct fsnp_req *r, uint16_t opcode, const uint8_t *body,
                      size_t len)
{
	struct fsnp_flow *f;
	char msg[200];

	if (!flow_opcode_supported(opcode)) {
		const char *nm = fsnp_opcode_name(opcode);
		snprintf(msg, sizeof msg,
		         "ERR FerricFlow command %s is not available in this "
		         "build",
		         nm != NULL ? nm : "?");
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "flow_unavailable", msg,
		                 false, 0);
		return -1;
	}
	f = calloc(1, sizeof *f);
	if (f == NULL || (len > 0 && (f->body = malloc(len)) == NULL)) {
		free(f);
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		return -1;
	}
	if (len > 0) {
		memcpy(f->body, body, len);
	}
	f->len = len;
	f->opcode = opcode;
	f->seed = flow_seed();
	wbuf_init(&f->acc);
	wbuf_init(&f->decided);
	wbuf_init(&f->credits);
	r->flow = f;
	r->plan.opcode = opcode;
	r->srv->stats.flow_requests++;
	return 0;
}

void fsnp_flow_exec(struct fsnp_req *r, uint16_t opcode, const uint8_t *body,
                    size_t len)
{
	if (fsnp_flow_prepare(r, opcode, body, len) != 0) {
		fsnp_exec_finish(r);
		return;
	}
	fsnp_flow_start(r);
}

/* Whether a partition key names one partition (not ANY / AUTO). */
static bool one_partition(const struct flow_opt *pk)
{
	return pk->set && pk->t.len > 0 && !fsnp_bytes_eq(pk->t, "ANY") &&
	       !fsnp_bytes_eq(pk->t, "AUTO") && !fsnp_bytes_eq(pk->t, "any") &&
	       !fsnp_bytes_eq(pk->t, "auto");
}

/* One request's (or batch item's) ACL check: @flow with @read or @write,
 * and the key of its partition (its partition key, or its id's auto
 * partition "fa:<n>"). A request that names neither spans partitions and
 * needs access to every key ("*"). */
static bool flow_acl_one(struct fsnp_req *r, const char *name, bool read,
                         const struct flow_req *req)
{
	const struct flow_opt *pk = &req->f[FF_PARTITION_KEY];
	const struct flow_opt *id = &req->f[FF_ID];
	if (one_partition(pk)) {
		return fsnp_acl_check_flow(
		    r, name, strlen(name), read, id->set ? id->t.ptr : NULL,
		    id->set ? id->t.len : 0, pk->t.ptr, pk->t.len);
	}
	if (id->set && id->t.len > 0) {
		return fsnp_acl_check_flow(r, name, strlen(name), read,
		                           id->t.ptr, id->t.len, NULL, 0);
	}
	if (req->f[FF_SCOPE].set && req->f[FF_SCOPE].t.len > 0) {
		/* Governance scopes route (and are checked) as partitions. */
		return fsnp_acl_check_flow(r, name, strlen(name), read, NULL, 0,
		                           req->f[FF_SCOPE].t.ptr,
		                           req->f[FF_SCOPE].t.len);
	}
	return fsnp_acl_check_flow(r, name, strlen(name), read, NULL, 0,
	                           (const uint8_t *)"*", 1);
}

/* The ACL check of a decoded Flow request, every item of a batch
 * included: true when allowed, false with the NOPERM reply in r. */
static bool flow_acl(struct fsnp_req *r, uint16_t opcode,
                     const struct flow_req *req)
{
	const char *name = fsnp_opcode_name(opcode);
	bool read = flow_opcode_is_read(opcode);
	struct fsnp_iter it;
	struct fsnp_val e;

	if (name == NULL) {
		name = "FLOW";
	}
	if (!req->f[FF_ITEMS].set || one_partition(&req->f[FF_PARTITION_KEY])) {
		return flow_acl_one(r, name, read, req);
	}
	fsnp_iter_init(&it, &req->f[FF_ITEMS].v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req item;
		struct flow_err err;
		if (flow_body_decode_item(req, &e, &item, &err) != 0) {
			/* Refused by the state machine with its own error;
			 * checked here as spanning partitions. */
			return flow_acl_one(r, name, read, req);
		}
		if (!flow_acl_one(r, name, read, &item)) {
			return false;
		}
	}
	return true;
}

/* EFFECT.RESERVE naming a circuit (governance_scope) that lives in
 * another group than the flow: a two-step protocol (docs/flow.md
 * "Governance"). Step 1 reads the circuit on its group's leader; an open
 * circuit answers GOVERNANCE_CIRCUIT_OPEN and nothing is written, an
 * unreachable one GOVERNANCE_UNAVAILABLE. Step 2 proposes the reservation
 * to the flow's group. Returns whether step 1 was started. */
static bool circuit_step(struct fsnp_req *r, uint32_t flow_group)
{
	struct fsnp_flow *f = r->flow;
	const struct gov_opt *scope;
	struct fsnp_val body;
	struct gov_req q;
	struct flow_err err;
	struct fsnp_writer w;
	struct wbuf b;
	uint32_t g;
	int rv;
	if (fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0 ||
	    flow_gov_body_decode(f->opcode, &body, &q, &err) != 0 ||
	    !q.f[GF_GOVERNANCE_SCOPE].set) {
		return false;
	}
	scope = &q.f[GF_GOVERNANCE_SCOPE];
	g = shards_group_of_slot(r->srv->shards,
	                         flow_route_slot(scope->t.ptr, scope->t.len));
	if (g == flow_group) {
		return false; /* checked in the reservation's own apply */
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, scope->t.ptr, scope->t.len);
	fsnp_w_key(&w, "kind");
	fsnp_w_str(&w, "admit");
	fsnp_w_key(&w, "effect_type");
	fsnp_w_bin(&w, q.f[GF_EFFECT_TYPE].t.ptr, q.f[GF_EFFECT_TYPE].t.len);
	fsnp_w_map_end(&w);
	f->kind = FK_CIRCUIT;
	f->fixed_group = flow_group;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	f->opcode = FLOW_GOV_OP_CIRCUIT_COUNT;
	rv = fsnp_w_finish(&w) == 0 && !b.oom
	         ? part_encode(r, &r->plan.one, g, b.data, b.len)
	         : -1;
	f->opcode = FSNP_OP_FLOW_EFFECT_RESERVE;
	wbuf_free(&b);
	if (rv != 0) {
		if (r->reply.len == 0) {
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		}
		fsnp_exec_finish(r);
		return true;
	}
	submit_one(r);
	return true;
}

/* A governance denial made here (the reference's map, no context). */
static void gov_denial(struct fsnp_req *r, const char *code, const char *reason,
                       const char *msg)
{
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_ERROR);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "code");
	fsnp_w_str(&w, code);
	fsnp_w_key(&w, "message");
	fsnp_w_str(&w, msg);
	fsnp_w_key(&w, "reason");
	fsnp_w_str(&w, reason);
	fsnp_w_key(&w, "retryable");
	fsnp_w_bool(&w, false);
	fsnp_w_key(&w, "safe_to_retry");
	fsnp_w_bool(&w, false);
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
}

/* Reads the effect a refused cross-group reservation names (the denial
 * kept in f->decided). Returns whether the read was started. */
static bool replay_check(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val body, v;
	struct fsnp_writer w;
	struct wbuf b;
	static const char *const keys[] = {"id", "effect_key", "partition_key"};
	int rv;

	if (fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0) {
		return false;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		if (fsnp_map_get(&body, keys[i], &v) == 0 &&
		    v.tag == FSNP_BIN) {
			fsnp_w_key(&w, keys[i]);
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		wbuf_free(&b);
		return false;
	}
	wbuf_reset(&f->decided);
	wbuf_append(&f->decided, r->reply.data, r->reply.len);
	f->decided_custom = false;
	f->opcode = FSNP_OP_FLOW_EFFECT_GET;
	rv = f->decided.oom
	         ? -1
	         : part_encode(r, &r->plan.one, f->fixed_group, b.data, b.len);
	f->opcode = FSNP_OP_FLOW_EFFECT_RESERVE;
	wbuf_free(&b);
	if (rv != 0) {
		reply_decided(r);
		return false;
	}
	f->kind = FK_REPLAY;
	submit_one(r);
	return true;
}

/* The effect of a refused reservation: none (or unreadable) → the
 * circuit's denial; the same digest → the effect as a replay
 * (already_reserved, or already_applied once settled); another digest →
 * GOVERNANCE_CONFLICT, as the flow's group answers. */
static void replay_checked(struct fsnp_req *r, int status, const uint8_t *res,
                           size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v, body, e;
	struct fsnp_bytes have, want, st, k;
	struct fsnp_iter it;
	struct fsnp_writer w;

	if (!result_ok(status, res, len, &v) || v.tag != FSNP_MAP ||
	    fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0 ||
	    fsnp_map_bin(&body, "operation_digest", &want) != 0 ||
	    fsnp_map_bin(&v, "operation_digest", &have) != 0 ||
	    fsnp_map_bin(&v, "status", &st) != 0) {
		reply_decided(r);
		fsnp_exec_finish(r);
		return;
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	if (have.len != want.len || memcmp(have.ptr, want.ptr, have.len) != 0) {
		struct fsnp_bytes ek = {NULL, 0};
		fsnp_map_bin(&v, "effect_key", &ek);
		fsnp_w_status(&w, FSNP_STATUS_ERROR);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "code");
		fsnp_w_str(&w, "GOVERNANCE_CONFLICT");
		fsnp_w_key(&w, "message");
		fsnp_w_str(&w, "effect already reserved with a different "
		               "operation_digest");
		fsnp_w_key(&w, "reason");
		fsnp_w_str(&w, "governance_conflict");
		fsnp_w_key(&w, "retryable");
		fsnp_w_bool(&w, false);
		fsnp_w_key(&w, "safe_to_retry");
		fsnp_w_bool(&w, false);
		fsnp_w_key(&w, "effect_key");
		fsnp_w_bin(&w, ek.ptr, ek.len);
		fsnp_w_key(&w, "status");
		fsnp_w_bin(&w, st.ptr, st.len);
		fsnp_w_map_end(&w);
	} else {
		fsnp_w_status(&w, FSNP_STATUS_OK);
		fsnp_w_map_begin(&w);
		fsnp_iter_init(&it, &v);
		while (fsnp_iter_next(&it, &k, &e)) {
			if (!fsnp_bytes_eq(k, "decision")) {
				fsnp_w_key_bin(&w, k.ptr, k.len);
				fsnp_w_val(&w, &e);
			}
		}
		fsnp_w_key(&w, "decision");
		fsnp_w_str(&w, fsnp_bytes_eq(st, "reserved")
		                   ? "already_reserved"
		                   : "already_applied");
		fsnp_w_map_end(&w);
	}
	fsnp_w_finish(&w);
	fsnp_exec_finish(r);
}

/* Step 1's answer: refuse, or propose the reservation (step 2). */
static void circuit_checked(struct fsnp_req *r, int status, const uint8_t *res,
                            size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v;
	if (status == SHARDS_OK && len > 2 && res[0] == STORE_RESULT_VERSION &&
	    res[1] != STORE_OK && res[2] == FSNP_MAP) {
		/* open, or every half-open probe out: the circuit's
		 * denial, nothing written; unless the reservation exists
		 * already (a client's retry), which is answered as the
		 * flow's group would (a replay is looked at first there) */
		reply_result(r, status, r->plan.one.group, res, len);
		if (replay_check(r)) {
			return;
		}
		fsnp_exec_finish(r);
		return;
	}
	if (!result_ok(status, res, len, &v)) {
		gov_denial(r, "GOVERNANCE_UNAVAILABLE",
		           "governance_unavailable",
		           "the circuit named by governance_scope could not be "
		           "checked; nothing was reserved");
		fsnp_exec_finish(r);
		return;
	}
	if (v.tag == FSNP_MAP) {
		struct fsnp_bytes st;
		f->probe = fsnp_map_bin(&v, "status", &st) == 0 &&
		           fsnp_bytes_eq(st, "half_open");
	}
	f->kind = FK_RESERVE2;
	if (part_encode(r, &r->plan.one, f->fixed_group, f->body, f->len) !=
	    0) {
		fsnp_exec_finish(r);
		return;
	}
	submit_one(r);
}

/* APPROVE / REJECT of an approval that names how its flow waits
 * (`wait_state`, `transition_to`, `exhaust_to`), the flow in another group
 * (in the same group the decision's apply wakes it): step 2 signals the
 * flow out of wait_state in the flow's group (docs/flow.md "Approvals"). It
 * runs after the decision committed, and again after a repeated decision
 * (GOVERNANCE_CONFLICT carrying the same status and the wake keys), so a
 * wake lost to a failure is repaired by repeating the decision; the
 * signal's if_state makes a second wake a no-op. Returns whether step 2
 * was started. */
static bool approval_wake(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	bool approve = f->opcode == FSNP_OP_FLOW_APPROVAL_APPROVE;
	char buf[FLOW_AUTO_PARTITION_MAX];
	struct fsnp_bytes st, fid, ws, to, pk = {0};
	const uint8_t *part;
	struct fsnp_writer w;
	struct fsnp_val m;
	struct wbuf b;
	size_t plen;
	uint32_t g;
	int rv;

	if ((!approve && f->opcode != FSNP_OP_FLOW_APPROVAL_REJECT) ||
	    r->reply.len < 3 ||
	    fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &m,
	                      NULL) != 0 ||
	    m.tag != FSNP_MAP || fsnp_map_bin(&m, "status", &st) != 0 ||
	    !fsnp_bytes_eq(st, approve ? "approved" : "rejected") ||
	    fsnp_map_bin(&m, "wait_state", &ws) != 0 ||
	    fsnp_map_bin(&m, approve ? "transition_to" : "exhaust_to", &to) !=
	        0 ||
	    fsnp_map_bin(&m, "flow_id", &fid) != 0 || fid.len == 0) {
		return false;
	}
	if (fsnp_map_bin(&m, "partition_key", &pk) != 0) {
		pk.ptr = NULL;
		pk.len = 0;
	}
	flow_route_partition(fid.ptr, fid.len, pk.len > 0 ? pk.ptr : NULL,
	                     pk.len, buf, &part, &plen);
	g = shards_group_of_slot(r->srv->shards, flow_route_slot(part, plen));
	if (g == r->plan.one.group) {
		return false; /* woken in the decision's own apply */
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_bin(&w, fid.ptr, fid.len);
	if (pk.len > 0) {
		fsnp_w_key(&w, "partition_key");
		fsnp_w_bin(&w, pk.ptr, pk.len);
	}
	fsnp_w_key(&w, "signal");
	fsnp_w_str(&w, approve ? "approval_approved" : "approval_rejected");
	fsnp_w_key(&w, "if_state");
	fsnp_w_bin(&w, ws.ptr, ws.len);
	fsnp_w_key(&w, "transition_to");
	fsnp_w_bin(&w, to.ptr, to.len);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		wbuf_free(&b);
		return false;
	}
	wbuf_reset(&f->decided);
	wbuf_append(&f->decided, r->reply.data, r->reply.len);
	f->decided_custom = false;
	if (f->decided.oom) {
		wbuf_free(&b);
		return false;
	}
	f->opcode = FSNP_OP_FLOW_SIGNAL;
	rv = part_encode(r, &r->plan.one, g, b.data, b.len);
	f->opcode = approve ? FSNP_OP_FLOW_APPROVAL_APPROVE
	                    : FSNP_OP_FLOW_APPROVAL_REJECT;
	wbuf_free(&b);
	if (rv != 0) {
		/* the decision stands; answer it */
		reply_decided(r);
		return false;
	}
	f->kind = FK_WAKE;
	submit_one(r);
	return true;
}

/* Step 2's answer. A flow that is no longer in wait_state (woken before,
 * moved on, terminal, deleted) needs no wake: the decision is answered.
 * Only a flow group that could not answer leaves the wake undone:
 * GOVERNANCE_UNAVAILABLE, and repeating the decision wakes it. */
static void wake_done(struct fsnp_req *r, int status, const uint8_t *res,
                      size_t len)
{
	char msg[256];

	if (status != SHARDS_OK) {
		snprintf(msg, sizeof msg,
		         "the approval is decided, but its flow could not be "
		         "woken (%s); repeat the decision to wake it",
		         shards_strerror(status));
		gov_denial(r, "GOVERNANCE_UNAVAILABLE",
		           "governance_unavailable", msg);
		fsnp_exec_finish(r);
		return;
	}
	if (len >= 2 && res[1] == STORE_OK) {
		fsnp_server_flow_kick(r->srv);
	}
	reply_decided(r);
	fsnp_exec_finish(r);
}

/* Circuit counts in another group, after the answer is known (docs/flow.md
 * "Circuits, and the two-step check"): after a cross-group reservation
 * that took a half-open probe but did not reserve (refused, or a replay),
 * the probe is given back ("unadmit"); after EFFECT.CONFIRM / FAIL newly
 * settled an effect whose circuit (governance_scope) lives in another
 * group, its outcome is counted there ("success" / "failure"). The answer
 * is kept and sent once the count is done, whatever the count gives: a
 * count lost to a failure is not retried. Returns whether a count was
 * started. */
static bool circuit_side(struct fsnp_req *r, bool after_reserve)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val m, body;
	struct fsnp_bytes scope, dec;
	struct gov_req q;
	struct flow_err err;
	struct fsnp_writer w;
	struct wbuf b;
	const char *kind;
	uint16_t op = f->opcode;
	bool ok_reply;
	uint32_t g;
	int rv;

	if (!after_reserve && op != FSNP_OP_FLOW_EFFECT_CONFIRM &&
	    op != FSNP_OP_FLOW_EFFECT_FAIL) {
		return false;
	}
	if (after_reserve && !f->probe) {
		return false;
	}
	ok_reply = r->reply.len >= 3 && wire_load_u16(r->reply.data) == 0 &&
	           fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL,
	                             &m, NULL) == 0 &&
	           m.tag == FSNP_MAP;
	if (after_reserve) {
		if (ok_reply && fsnp_map_bin(&m, "decision", &dec) == 0 &&
		    fsnp_bytes_eq(dec, "reserved")) {
			return false; /* the probe is this reservation's */
		}
		if (fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0 ||
		    flow_gov_body_decode(op, &body, &q, &err) != 0 ||
		    !q.f[GF_GOVERNANCE_SCOPE].set) {
			return false;
		}
		scope = q.f[GF_GOVERNANCE_SCOPE].t;
		kind = "unadmit";
	} else {
		if (!ok_reply || fsnp_map_bin(&m, "decision", &dec) != 0 ||
		    !(fsnp_bytes_eq(dec, "confirmed") ||
		      fsnp_bytes_eq(dec, "failed")) ||
		    fsnp_map_bin(&m, "governance_scope", &scope) != 0 ||
		    scope.len == 0) {
			return false;
		}
		kind = fsnp_bytes_eq(dec, "confirmed") ? "success" : "failure";
	}
	g = shards_group_of_slot(r->srv->shards,
	                         flow_route_slot(scope.ptr, scope.len));
	if (g == r->plan.one.group) {
		return false; /* counted in the apply */
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, scope.ptr, scope.len);
	fsnp_w_key(&w, "kind");
	fsnp_w_str(&w, kind);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		wbuf_free(&b);
		return false;
	}
	wbuf_reset(&f->decided);
	wbuf_append(&f->decided, r->reply.data, r->reply.len);
	f->decided_custom = false;
	if (f->decided.oom) {
		wbuf_free(&b);
		return false;
	}
	f->opcode = FLOW_GOV_OP_CIRCUIT_COUNT;
	rv = part_encode(r, &r->plan.one, g, b.data, b.len);
	f->opcode = op;
	wbuf_free(&b);
	if (rv != 0) {
		reply_decided(r);
		return false;
	}
	f->kind = FK_SIDE;
	submit_one(r);
	return true;
}

/* The admission options of a body (top level, else `opts`): the limit's
 * scope and shard id. Returns how many of the two are present. */
static int admission_opts(const uint8_t *body, size_t len,
                          struct fsnp_val *scope, struct fsnp_val *shard)
{
	struct fsnp_val m, opts;
	bool has_scope, has_shard;

	if (fsnp_value_decode_body(body, len, NULL, &m) != 0 ||
	    m.tag != FSNP_MAP) {
		return 0;
	}
	has_scope = fsnp_map_get(&m, "governance_limit_scope", scope) == 0 &&
	            !fsnp_val_is_nil(scope);
	has_shard = fsnp_map_get(&m, "governance_shard_id", shard) == 0 &&
	            !fsnp_val_is_nil(shard);
	if (fsnp_map_get(&m, "opts", &opts) == 0 && opts.tag == FSNP_MAP) {
		if (!has_scope) {
			has_scope =
			    fsnp_map_get(&opts, "governance_limit_scope",
			                 scope) == 0 &&
			    !fsnp_val_is_nil(scope);
		}
		if (!has_shard) {
			has_shard = fsnp_map_get(&opts, "governance_shard_id",
			                         shard) == 0 &&
			            !fsnp_val_is_nil(shard);
		}
	}
	return (int)has_scope + (int)has_shard;
}

/* Back to a one-part plan after a step over several groups (a claim's
 * fan-out): its parts and ops are released, so that the op submitted next
 * carries plan.one's command and not a group's stale claim or peek. */
static void plan_single(struct fsnp_req *r)
{
	if (r->plan.parts != NULL && r->plan.parts != &r->plan.one) {
		for (uint32_t i = 0; i < r->plan.n_parts; i++) {
			if (r->plan.parts[i].cmd != r->plan.one_cmd) {
				free(r->plan.parts[i].cmd);
			}
			free(r->plan.parts[i].pos);
		}
		free(r->plan.parts);
	}
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	if (r->ops != NULL && r->ops != &r->op1) {
		free(r->ops);
	}
	r->ops = &r->op1;
}

/* Proposes an internal governance command (`op`, `body`) to `group`, the
 * answer so far kept in f->decided and sent when it is done (FK_SIDE).
 * Returns whether it was started. */
static bool side_step(struct fsnp_req *r, uint16_t op, uint32_t group,
                      const struct wbuf *body)
{
	struct fsnp_flow *f = r->flow;
	uint16_t was = f->opcode;
	int rv;

	plan_single(r);
	wbuf_reset(&f->decided);
	wbuf_append(&f->decided, r->reply.data, r->reply.len);
	f->decided_custom = r->custom;
	if (f->decided.oom) {
		return false;
	}
	f->opcode = op;
	rv = part_encode(r, &r->plan.one, group, body->data, body->len);
	f->opcode = was;
	if (rv != 0) {
		reply_decided(r);
		return false;
	}
	f->kind = FK_SIDE;
	submit_one(r);
	return true;
}

static void res_free(struct fsnp_flow *f)
{
	if (f->res != NULL) {
		for (uint32_t i = 0; i < f->n_res; i++) {
			free(f->res[i].data);
		}
		free(f->res);
	}
	f->res = NULL;
	f->n_res = 0;
}

/* The answer kept in f->decided becomes the reply. */
static void reply_decided(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	wbuf_reset(&r->reply);
	r->custom = f->decided_custom;
	wbuf_append(&r->reply, f->decided.data, f->decided.len);
}

/* A claim's spend was refused (the refusal kept in f->decided): the
 * claim's groups are peeked (what it would take, nothing written), and
 * the refusal is the answer only when something is due; with nothing due
 * the claim answers [] (or waits, with block_ms), as the reference checks
 * for due work before returning a refused spend. */
static void admit_peek(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct flow_cmd_meta meta = {
	    .max_clock_skew_ms = r->srv->lim.flow_clock_skew_ms,
	    .seed = f->seed,
	};
	struct flow_err err;
	uint32_t n = f->fixed_group != 0 ? 1 : r->srv->data_groups;

	plan_single(r);
	res_free(f);
	if (plan_parts(r, n) != 0) {
		reply_decided(r);
		fsnp_exec_finish(r);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_part *p = &r->plan.parts[i];
		if (flow_cmd_encode_peek(f->opcode, f->body, f->len, &meta,
		                         &p->cmd, &p->len, &err) != 0) {
			reply_decided(r);
			fsnp_exec_finish(r);
			return;
		}
		p->group = f->fixed_group != 0 ? f->fixed_group : i + 1;
		p->read = true;
	}
	f->kind = FK_ADMIT_PEEK;
	run_parts(r, n);
}

/* Nothing due and block_ms asked: the claim waits without credits, as a
 * parked claim does; polled, it spends again (fsnp_flow_poll). */
static bool admit_park(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct flow_err err;
	int64_t ms;

	if (f->req == NULL) {
		struct flow_req *req = malloc(sizeof *req);
		if (req == NULL ||
		    flow_body_decode_bytes(f->opcode, f->body, f->len, req,
		                           &err) != 0) {
			free(req);
			return false;
		}
		f->req = req;
	}
	if (!f->req->f[FF_BLOCK_MS].set) {
		return false;
	}
	ms = f->req->f[FF_BLOCK_MS].i;
	if (!f->block) {
		f->block = true;
		f->block_until =
		    ms == 0 ? 0 : fsnp_now_ms(r->srv) + (uint64_t)ms;
	}
	f->kind = FK_CLAIM;
	f->admit_wait = true;
	f->n_acc = 0;
	wbuf_reset(&f->acc);
	claim_empty(r);
	return true;
}

/* An admitted claim found nothing due and is to wait: as the reference
 * spends per attempt and gives back what it did not use, its credits go
 * back first (LIMIT.CLAIM naming no flow) and it waits holding none,
 * spending again when polled. True when the give-back was started. */
static bool admit_unspend(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val ids, scope, shard;
	struct fsnp_bytes s;
	struct fsnp_writer w;
	struct wbuf b;
	uint16_t was = f->opcode;
	int64_t sid;
	int rv;

	if (fsnp_value_decode(f->credits.data, f->credits.len, NULL, &ids,
	                      NULL) != 0 ||
	    admission_opts(f->body, f->len, &scope, &shard) != 2 ||
	    fsnp_val_bin(&scope, &s) != 0 || fsnp_val_i64(&shard, &sid) != 0) {
		return false;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, s.ptr, s.len);
	fsnp_w_key(&w, "shard_id");
	fsnp_w_i64(&w, sid);
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	fsnp_w_array_end(&w);
	fsnp_w_key(&w, "reservation_ids");
	fsnp_w_val(&w, &ids);
	fsnp_w_map_end(&w);
	plan_single(r);
	f->opcode = FLOW_GOV_OP_LIMIT_CLAIM;
	rv = fsnp_w_finish(&w) == 0 && !b.oom
	         ? part_encode(
	               r, &r->plan.one,
	               shards_group_of_slot(r->srv->shards,
	                                    flow_route_slot(s.ptr, s.len)),
	               b.data, b.len)
	         : -1;
	f->opcode = was;
	wbuf_free(&b);
	if (rv != 0) {
		return false;
	}
	f->admit_done = true;
	f->kind = FK_UNSPEND;
	submit_one(r);
	return true;
}

/* The credits are back (or, the scope's group failing, left in use until
 * their lease expires): the claim waits unadmitted. */
static void admit_unspent(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;

	f->admitted = false;
	f->admit_done = false;
	wbuf_reset(&f->credits);
	wbuf_reset(&r->reply);
	res_free(f);
	f->kind = FK_CLAIM;
	f->admit_wait = true;
	f->n_acc = 0;
	wbuf_reset(&f->acc);
	claim_empty(r);
}

/* The peeks of a refused claim answered. */
static void admit_peeked(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	bool empty = true;

	for (uint32_t i = 0; i < f->n_res; i++) {
		struct fsnp_val v;
		if (!result_ok(f->res[i].status, f->res[i].data, f->res[i].len,
		               &v) ||
		    v.tag != FSNP_ARRAY || v.as.count != 0) {
			empty = false;
		}
	}
	if (!empty) {
		reply_decided(r);
		fsnp_exec_finish(r);
		return;
	}
	if (admit_park(r)) {
		return;
	}
	f->n_acc = 0;
	wbuf_reset(&f->acc);
	claim_reply(r);
	fsnp_exec_finish(r);
}

/* CLAIM_DUE / RECLAIM with governance_limit_scope and governance_shard_id
 * (docs/flow.md "Claim admission"): step 1 spends `limit` credits of the
 * shard's lease (LIMIT.SPEND in the scope's group; a refusal is the
 * answer), step 2 is the claim, step 3 (fsnp_flow_finishing) records the
 * credit of each claimed flow and gives the rest back. One option alone
 * is the reference's error. True when the request was taken over here. */
static bool claim_admission(struct fsnp_req *r, const struct flow_req *req)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val scope, shard;
	struct fsnp_bytes s;
	struct fsnp_writer w;
	struct wbuf b;
	int64_t id;
	int n = admission_opts(f->body, f->len, &scope, &shard);
	uint16_t was;
	int rv;

	if (n == 0 || f->admitted) {
		return false;
	}
	if (n == 1) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR flow governance_limit_scope and "
		           "governance_shard_id must be provided together");
		fsnp_exec_finish(r);
		return true;
	}
	if (fsnp_val_bin(&scope, &s) != 0 || s.len == 0) {
		flow_error(
		    r, FSNP_STATUS_ERROR,
		    "ERR flow governance_limit_scope must be a non-empty "
		    "string");
		fsnp_exec_finish(r);
		return true;
	}
	if (fsnp_val_i64(&shard, &id) != 0 || id < 0) {
		flow_error(
		    r, FSNP_STATUS_ERROR,
		    "ERR flow governance_shard_id must be a non-negative "
		    "integer");
		fsnp_exec_finish(r);
		return true;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, s.ptr, s.len);
	fsnp_w_key(&w, "shard_id");
	fsnp_w_i64(&w, id);
	fsnp_w_key(&w, "amount");
	fsnp_w_i64(&w, req->f[FF_LIMIT].set && req->f[FF_LIMIT].i > 0
	                   ? req->f[FF_LIMIT].i
	                   : 1);
	if (req->f[FF_LEASE_MS].set && req->f[FF_LEASE_MS].i > 0) {
		fsnp_w_key(&w, "ttl_ms");
		fsnp_w_i64(&w, req->f[FF_LEASE_MS].i);
	}
	fsnp_w_map_end(&w);
	was = f->opcode;
	f->opcode = FSNP_OP_FLOW_LIMIT_SPEND;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	rv = fsnp_w_finish(&w) == 0 && !b.oom
	         ? part_encode(
	               r, &r->plan.one,
	               shards_group_of_slot(r->srv->shards,
	                                    flow_route_slot(s.ptr, s.len)),
	               b.data, b.len)
	         : -1;
	f->opcode = was;
	wbuf_free(&b);
	if (rv != 0) {
		if (r->reply.len == 0) {
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		}
		fsnp_exec_finish(r);
		return true;
	}
	f->kind = FK_ADMIT;
	submit_one(r);
	return true;
}

/* Step 1's answer: the limit's refusal is the reply; spent credits are
 * kept and the claim runs. */
static void admit_spent(struct fsnp_req *r, int status, const uint8_t *res,
                        size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v, ids;

	if (!result_ok(status, res, len, &v) || v.tag != FSNP_MAP ||
	    fsnp_map_get(&v, "reservation_ids", &ids) != 0 ||
	    ids.tag != FSNP_ARRAY) {
		reply_result(r, status, r->plan.one.group, res, len);
		wbuf_reset(&f->decided);
		wbuf_append(&f->decided, r->reply.data, r->reply.len);
		f->decided_custom = r->custom;
		if (f->decided.oom) {
			fsnp_exec_finish(r);
			return;
		}
		admit_peek(r);
		return;
	}
	wbuf_append(&f->credits, ids.enc, ids.enc_len);
	if (f->credits.oom) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r); /* gives the credits back */
		return;
	}
	f->admitted = true;
	fsnp_flow_start(r);
}

/* The id and partition key of a claimed item (a record or job map, or a
 * compact job [id, partition_key, ...]). */
static bool claimed_item(const struct fsnp_val *e, struct fsnp_val *id,
                         struct fsnp_val *pk, struct fsnp_val *fen)
{
	struct fsnp_iter it;
	struct fsnp_val tok;

	fen->tag = FSNP_NIL;
	if (e->tag == FSNP_MAP) {
		if (fsnp_map_get(e, "id", id) != 0 || id->tag != FSNP_BIN) {
			return false;
		}
		if (fsnp_map_get(e, "partition_key", pk) != 0) {
			pk->tag = FSNP_NIL;
		}
		if (fsnp_map_get(e, "fencing_token", fen) != 0) {
			fen->tag = FSNP_NIL;
		}
		return true;
	}
	if (e->tag != FSNP_ARRAY) {
		return false;
	}
	/* a compact job: [id, partition_key, lease_token, fencing_token…] */
	fsnp_iter_init(&it, e);
	if (!fsnp_iter_next(&it, NULL, id) || id->tag != FSNP_BIN) {
		return false;
	}
	if (!fsnp_iter_next(&it, NULL, pk)) {
		pk->tag = FSNP_NIL;
	} else if (!fsnp_iter_next(&it, NULL, &tok) ||
	           !fsnp_iter_next(&it, NULL, fen)) {
		fen->tag = FSNP_NIL;
	}
	return true;
}

bool fsnp_flow_finishing(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val ids, rid, item, id, pk, fen, scope, shard;
	struct fsnp_iter cit;
	struct fsnp_bytes s;
	struct fsnp_writer w;
	struct wbuf b;
	const uint8_t *p = f->acc.data;
	size_t left = f->acc.len;
	uint32_t claimed = 0;
	int64_t sid;
	bool started;

	if (!f->admitted || f->admit_done) {
		return false;
	}
	f->admit_done = true;
	if (fsnp_value_decode(f->credits.data, f->credits.len, NULL, &ids,
	                      NULL) != 0 ||
	    admission_opts(f->body, f->len, &scope, &shard) != 2 ||
	    fsnp_val_bin(&scope, &s) != 0 || fsnp_val_i64(&shard, &sid) != 0) {
		return false;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, s.ptr, s.len);
	fsnp_w_key(&w, "shard_id");
	fsnp_w_i64(&w, sid);
	/* One credit per claimed flow, in order; the rest go back. */
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	fsnp_iter_init(&cit, &ids);
	while (claimed < f->n_acc && left > 0) {
		size_t used = 0;
		if (fsnp_value_decode(p, left, NULL, &item, &used) != 0) {
			break;
		}
		p += used;
		left -= used;
		claimed++;
		if (!claimed_item(&item, &id, &pk, &fen) ||
		    !fsnp_iter_next(&cit, NULL, &rid)) {
			continue;
		}
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "id");
		fsnp_w_val(&w, &id);
		if (pk.tag == FSNP_BIN) {
			fsnp_w_key(&w, "partition_key");
			fsnp_w_val(&w, &pk);
		}
		fsnp_w_key(&w, "reservation_id");
		fsnp_w_val(&w, &rid);
		if (fen.tag == FSNP_I64) {
			fsnp_w_key(&w, "fencing_token");
			fsnp_w_val(&w, &fen);
		}
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	fsnp_w_key(&w, "reservation_ids");
	fsnp_w_array_begin(&w);
	while (fsnp_iter_next(&cit, NULL, &rid)) {
		fsnp_w_val(&w, &rid);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	started = fsnp_w_finish(&w) == 0 && !b.oom &&
	          side_step(r, FLOW_GOV_OP_LIMIT_CLAIM,
	                    shards_group_of_slot(r->srv->shards,
	                                         flow_route_slot(s.ptr, s.len)),
	                    &b);
	wbuf_free(&b);
	return started;
}

static bool settles_many(uint16_t op)
{
	return op == FSNP_OP_FLOW_COMPLETE_MANY ||
	       op == FSNP_OP_FLOW_FAIL_MANY || op == FSNP_OP_FLOW_CANCEL_MANY ||
	       op == FSNP_OP_FLOW_RETRY_MANY;
}

/* The items of a settled *_MANY batch that succeeded (every item when
 * the reply is "OK", else those answered "OK"), as [{id,
 * partition_key}]. False when none did. */
static bool settled_items(struct fsnp_req *r, struct fsnp_writer *w)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val reply, e, res;
	struct fsnp_iter it, rit;
	struct flow_req *req = malloc(sizeof *req);
	struct flow_err err;
	bool all, any = false;

	if (req == NULL ||
	    flow_body_decode_bytes(f->opcode, f->body, f->len, req, &err) !=
	        0 ||
	    !req->f[FF_ITEMS].set || req->f[FF_ITEMS].v.tag != FSNP_ARRAY ||
	    fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &reply,
	                      NULL) != 0) {
		free(req);
		return false;
	}
	all = reply.tag == FSNP_BIN && fsnp_bytes_eq(reply.as.bin, "OK");
	if (!all && reply.tag != FSNP_ARRAY) {
		free(req);
		return false;
	}
	if (!all) {
		fsnp_iter_init(&rit, &reply);
	}
	fsnp_w_key(w, "items");
	fsnp_w_array_begin(w);
	fsnp_iter_init(&it, &req->f[FF_ITEMS].v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_req item;
		const struct flow_opt *pk;
		if (!all &&
		    (!fsnp_iter_next(&rit, NULL, &res) || res.tag != FSNP_BIN ||
		     !fsnp_bytes_eq(res.as.bin, "OK"))) {
			continue;
		}
		if (flow_body_decode_item(req, &e, &item, &err) != 0 ||
		    !item.f[FF_ID].set) {
			continue;
		}
		pk = &item.f[FF_PARTITION_KEY];
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "id");
		fsnp_w_bin(w, item.f[FF_ID].t.ptr, item.f[FF_ID].t.len);
		if (pk->set && pk->t.len > 0) {
			fsnp_w_key(w, "partition_key");
			fsnp_w_bin(w, pk->t.ptr, pk->t.len);
		}
		fsnp_w_map_end(w);
		any = true;
	}
	fsnp_w_array_end(w);
	free(req);
	return any;
}

/* COMPLETE, FAIL, CANCEL or RETRY (or their *_MANY batches) with the
 * admission options, done: the credit each settled flow holds goes back
 * (LIMIT.RETURN in the scope's group). The answer waits for it; a return
 * that fails leaves the credits in use until their lease expires. */
static bool credit_return(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val scope, shard, body, v;
	struct fsnp_bytes s;
	struct fsnp_writer w;
	struct wbuf b;
	int64_t sid;
	bool many = settles_many(f->opcode);
	bool started;

	if ((f->opcode != FSNP_OP_FLOW_COMPLETE &&
	     f->opcode != FSNP_OP_FLOW_FAIL &&
	     f->opcode != FSNP_OP_FLOW_CANCEL &&
	     f->opcode != FSNP_OP_FLOW_RETRY && !many) ||
	    r->reply.len < 3 || wire_load_u16(r->reply.data) != 0 ||
	    admission_opts(f->body, f->len, &scope, &shard) != 2 ||
	    fsnp_val_bin(&scope, &s) != 0 || s.len == 0 ||
	    fsnp_val_i64(&shard, &sid) != 0 ||
	    fsnp_value_decode_body(f->body, f->len, NULL, &body) != 0) {
		return false;
	}
	if (!many &&
	    (fsnp_map_get(&body, "id", &v) != 0 || v.tag != FSNP_BIN)) {
		return false;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, s.ptr, s.len);
	fsnp_w_key(&w, "shard_id");
	fsnp_w_i64(&w, sid);
	if (many) {
		if (!settled_items(r, &w)) {
			wbuf_free(&b);
			return false;
		}
	} else {
		fsnp_w_key(&w, "id");
		fsnp_w_val(&w, &v);
		if (fsnp_map_get(&body, "partition_key", &v) == 0 &&
		    v.tag == FSNP_BIN) {
			fsnp_w_key(&w, "partition_key");
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_map_end(&w);
	started = fsnp_w_finish(&w) == 0 && !b.oom &&
	          side_step(r, FLOW_GOV_OP_LIMIT_RETURN,
	                    shards_group_of_slot(r->srv->shards,
	                                         flow_route_slot(s.ptr, s.len)),
	                    &b);
	wbuf_free(&b);
	return started;
}

/* EXTEND_LEASE with governance_limit_scope and governance_shard_id: the
 * reference renews the lease of the credit a governed flow holds before
 * extending the flow's lease. Step 1, LIMIT.RENEW in the scope's group
 * (the flow's credit from the claim with this fencing token, if any, keeps
 * its lease lease_ms more; a lease already dropped is refused and the flow
 * is not extended); step 2, the extension in the flow's group. True when
 * step 1 was started. */
static bool renew_step(struct fsnp_req *r, const struct flow_req *req,
                       uint32_t flow_group)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val scope, shard;
	struct fsnp_bytes s;
	struct fsnp_writer w;
	struct wbuf b;
	const struct flow_opt *pk = &req->f[FF_PARTITION_KEY];
	int64_t sid;
	uint16_t was = f->opcode;
	int rv;

	if (admission_opts(f->body, f->len, &scope, &shard) != 2 ||
	    fsnp_val_bin(&scope, &s) != 0 || s.len == 0 ||
	    fsnp_val_i64(&shard, &sid) != 0 || sid < 0 || !req->f[FF_ID].set ||
	    !req->f[FF_LEASE_MS].set || req->f[FF_LEASE_MS].i <= 0) {
		return false;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "scope");
	fsnp_w_bin(&w, s.ptr, s.len);
	fsnp_w_key(&w, "shard_id");
	fsnp_w_i64(&w, sid);
	fsnp_w_key(&w, "id");
	fsnp_w_bin(&w, req->f[FF_ID].t.ptr, req->f[FF_ID].t.len);
	if (pk->set && pk->t.len > 0) {
		fsnp_w_key(&w, "partition_key");
		fsnp_w_bin(&w, pk->t.ptr, pk->t.len);
	}
	if (req->f[FF_FENCING_TOKEN].set) {
		fsnp_w_key(&w, "fencing_token");
		fsnp_w_i64(&w, req->f[FF_FENCING_TOKEN].i);
	}
	fsnp_w_key(&w, "ttl_ms");
	fsnp_w_i64(&w, req->f[FF_LEASE_MS].i);
	fsnp_w_map_end(&w);
	f->kind = FK_RENEW;
	f->fixed_group = flow_group;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	f->opcode = FLOW_GOV_OP_LIMIT_RENEW;
	rv = fsnp_w_finish(&w) == 0 && !b.oom
	         ? part_encode(
	               r, &r->plan.one,
	               shards_group_of_slot(r->srv->shards,
	                                    flow_route_slot(s.ptr, s.len)),
	               b.data, b.len)
	         : -1;
	f->opcode = was;
	wbuf_free(&b);
	if (rv != 0) {
		if (r->reply.len == 0) {
			flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		}
		fsnp_exec_finish(r);
		return true;
	}
	submit_one(r);
	return true;
}

/* Step 1 of a governed EXTEND_LEASE answered: a refusal is the reply
 * (nothing extended), an unreachable group GOVERNANCE_UNAVAILABLE; else
 * the extension is proposed to the flow's group. */
static void renewed(struct fsnp_req *r, int status, const uint8_t *res,
                    size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v;

	if (status != SHARDS_OK) {
		gov_denial(
		    r, "GOVERNANCE_UNAVAILABLE", "governance_unavailable",
		    "the limit named by governance_limit_scope could not "
		    "be renewed; the lease was not extended");
		fsnp_exec_finish(r);
		return;
	}
	if (!result_ok(status, res, len, &v)) {
		reply_result(r, status, r->plan.one.group, res, len);
		fsnp_exec_finish(r);
		return;
	}
	f->kind = FK_ONE;
	if (part_encode(r, &r->plan.one, f->fixed_group, f->body, f->len) !=
	    0) {
		fsnp_exec_finish(r);
		return;
	}
	submit_one(r);
}

void fsnp_flow_start(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	uint16_t opcode = f->opcode;
	struct flow_req *req = malloc(sizeof *req);
	struct flow_err err;
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *part;
	size_t plen;
	uint32_t group;

	if (opcode == FSNP_OP_FLOW_QUERY) {
		free(req);
		fsnp_flow_query_start(r, f->body, f->len);
		return;
	}
	if (req == NULL) {
		flow_error(r, FSNP_STATUS_BUSY, "BUSY out of memory");
		fsnp_exec_finish(r);
		return;
	}
	if (flow_body_decode_bytes(opcode, f->body, f->len, req, &err) != 0) {
		flow_error(r, err.status, err.msg);
		fsnp_exec_finish(r);
		goto out;
	}
	if (!flow_acl(r, opcode, req)) {
		fsnp_exec_finish(r);
		goto out;
	}
	f->ok_on_success = req->f[FF_RETURN].set &&
	                   req->f[FF_RETURN].t.len == 13 &&
	                   strncasecmp((const char *)req->f[FF_RETURN].t.ptr,
	                               "ok_on_success", 13) == 0;
	flow_cmd_partition(req, f->seed, buf, &part, &plen);
	group = plen > 0 ? shards_group_of_slot(r->srv->shards,
	                                        flow_route_slot(part, plen))
	                 : 1;

	if (opcode == FSNP_OP_FLOW_CLAIM_DUE ||
	    opcode == FSNP_OP_FLOW_RECLAIM) {
		f->fixed_group = plen > 0 ? group : 0;
		if (claim_admission(r, req)) {
			goto out;
		}
	}
	switch (opcode) {
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_RECLAIM:
		f->kind = FK_CLAIM;
		f->fixed_group = plen > 0 ? group : 0;
		f->limit = req->f[FF_LIMIT].set ? req->f[FF_LIMIT].i : 1;
		if (f->limit < 1) {
			f->limit = 1;
		}
		if (req->f[FF_BLOCK_MS].set && !f->block) {
			f->block = true;
			f->block_until =
			    req->f[FF_BLOCK_MS].i == 0
			        ? 0
			        : fsnp_now_ms(r->srv) +
			              (uint64_t)req->f[FF_BLOCK_MS].i;
		}
		free(f->req);
		f->req = req; /* matched against applied changes */
		req = NULL;
		claim_restart(r);
		if (f->fixed_group == 0 && r->srv->data_groups > 1) {
			f->kind = FK_FAN;
			if (fan_setup(r) != 0) {
				fsnp_exec_finish(r);
			} else {
				fan_begin(r);
			}
			goto out;
		}
		r->plan.parts = &r->plan.one;
		r->plan.n_parts = 1;
		if (!claim_step(r)) {
			fsnp_exec_finish(r);
		}
		goto out;
	case FSNP_OP_FLOW_VALUE_MGET:
		if (plen == 0) {
			f->kind = FK_MGET;
			start_all(r);
			goto out;
		}
		break;
	case FSNP_OP_FLOW_POLICY_SET:
	case FSNP_OP_FLOW_RETENTION_CLEANUP:
		if (plen == 0) {
			f->kind = FK_ALL;
			start_all(r);
			goto out;
		}
		break;
	case FSNP_OP_FLOW_SCHEDULE_FIRE:
	case FSNP_OP_FLOW_SCHEDULE_FIRE_DUE:
		fsnp_flow_sched_fire(r, opcode, f->body, f->len);
		goto out;
	case FSNP_OP_FLOW_SCHEDULE_LIST:
		f->kind = FK_SLIST;
		start_all(r);
		goto out;
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
		f->kind = FK_STATS;
		if (plen == 0) {
			start_all(r);
		} else if (plan_parts(r, 1) != 0 ||
		           part_encode(r, &r->plan.parts[0], group, f->body,
		                       f->len) != 0) {
			fsnp_exec_finish(r);
		} else {
			run_parts(r, 1);
		}
		goto out;
	default:
		if (is_many(opcode)) {
			start_batch(r, req, group);
			goto out;
		}
		if (plen == 0 && flow_gov_fans_out(opcode)) {
			f->kind = FK_GOV;
			start_all(r);
			goto out;
		}
		break;
	}
	if (opcode == FSNP_OP_FLOW_EFFECT_RESERVE && circuit_step(r, group)) {
		goto out;
	}
	if (opcode == FSNP_OP_FLOW_EXTEND_LEASE && renew_step(r, req, group)) {
		goto out;
	}
	f->kind = FK_ONE;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	if (part_encode(r, &r->plan.one, group, f->body, f->len) != 0) {
		fsnp_exec_finish(r);
		goto out;
	}
	submit_one(r);
out:
	free(req);
}

/* --- COMMAND_EXEC ------------------------------------------------------ */

/* How a COMMAND_EXEC token names a body field. */
static const struct {
	const char *token;
	const char *field;
} ce_alias[] = {
    {"NOW", "now_ms"},
    {"PARTITION", "partition_key"},
    {"FENCING", "fencing_token"},
    {"LEASE", "lease_token"},
    {"BLOCK", "block_ms"},
    {"MAXBYTES", "payload_max_bytes"},
    {"RUN_AT", "run_at_ms"},
    {"FROM", "from_state"},
    {"TO", "to_state"},
    {"TTL", "ttl_ms"},
    {"RETENTION", "retention_ttl_ms"},
};

/* Tokens that stand alone: the field and its value. */
static const struct {
	const char *token;
	const char *field;
	bool value;
} ce_flag[] = {
    {"NOPAYLOAD", "payload", false}, {"IDEMPOTENT", "idempotent", true},
    {"FULL", "full", true},          {"INDEPENDENT", "independent", true},
    {"OVERRIDE", "override", true},  {"REPLACE", "replace", true},
};

static bool int_field(const char *k)
{
	static const char *const ints[] = {"limit",
	                                   "priority",
	                                   "fencing_token",
	                                   "count",
	                                   "reclaim_ratio",
	                                   "payload_max_bytes",
	                                   "value_max_bytes",
	                                   "max_bytes",
	                                   "expected_generation",
	                                   "history_max_events",
	                                   "history_hot_max_events",
	                                   "from_version",
	                                   "to_version",
	                                   "from_event",
	                                   "to_event",
	                                   "rev",
	                                   "max_attempts",
	                                   "attempt"};
	size_t n = strlen(k);
	if (n > 3 && strcmp(k + n - 3, "_ms") == 0) {
		return true;
	}
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		if (strcmp(k, ints[i]) == 0) {
			return true;
		}
	}
	return false;
}

static bool bool_field(const char *k)
{
	return strcmp(k, "reclaim_expired") == 0 ||
	       strcmp(k, "idempotent") == 0 || strcmp(k, "full") == 0 ||
	       strcmp(k, "independent") == 0 || strcmp(k, "override") == 0 ||
	       strcmp(k, "replace") == 0 || strcmp(k, "payload") == 0 ||
	       strcmp(k, "consistent_projection") == 0;
}

/* The positional field of the opcode's first argument. */
static const char *ce_first(uint16_t op)
{
	switch (op) {
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_RECLAIM:
	case FSNP_OP_FLOW_POLICY_SET:
	case FSNP_OP_FLOW_POLICY_GET:
	case FSNP_OP_FLOW_STATS:
	case FSNP_OP_FLOW_ATTRIBUTES:
	case FSNP_OP_FLOW_ATTRIBUTE_VALUES:
		return "type";
	case FSNP_OP_FLOW_VALUE_PUT:
		return "value";
	case FSNP_OP_FLOW_INFO:
	case FSNP_OP_FLOW_RETENTION_CLEANUP:
		return NULL;
	default:
		return "id";
	}
}

/* Writes a CE value as the field's type: integers from text or
 * integers, booleans from true/false/1/0, everything else as given. */
static void ce_value(struct fsnp_writer *w, const char *k,
                     const struct fsnp_val *v)
{
	char t[32];
	if (v->tag == FSNP_BIN && v->as.bin.len < sizeof t) {
		memcpy(t, v->as.bin.ptr, v->as.bin.len);
		t[v->as.bin.len] = '\0';
		if (int_field(k)) {
			char *end;
			long long x = strtoll(t, &end, 10);
			if (t[0] != '\0' && *end == '\0') {
				fsnp_w_i64(w, x);
				return;
			}
		}
		if (bool_field(k)) {
			if (strcasecmp(t, "true") == 0 || strcmp(t, "1") == 0) {
				fsnp_w_bool(w, true);
				return;
			}
			if (strcasecmp(t, "false") == 0 ||
			    strcmp(t, "0") == 0) {
				fsnp_w_bool(w, false);
				return;
			}
		}
	}
	fsnp_w_val(w, v);
}

static bool bin_ieq(struct fsnp_bytes b, const char *s)
{
	size_t n = strlen(s);
	return b.len == n && strncasecmp((const char *)b.ptr, s, n) == 0;
}

/* The ITEMS of a *_MANY command: per item, by opcode (pk only when the
 * batch has none; "-" and empty lease tokens stand for none):
 *   CREATE_MANY                    id [pk] payload
 *   COMPLETE_MANY, RETRY, FAIL     id [pk] lease_token fencing_token
 *   CANCEL_MANY                    id [pk] fencing_token
 *   TRANSITION_MANY                id [pk] fencing_token lease_token */
static int ce_items(struct fsnp_writer *w, uint16_t op, bool mixed,
                    const struct fsnp_val *a, uint32_t n)
{
	static const char *const create[] = {"payload"};
	static const char *const claimed[] = {"lease_token", "fencing_token"};
	static const char *const cancel[] = {"fencing_token"};
	static const char *const trans[] = {"fencing_token", "lease_token"};
	const char *const *rest;
	uint32_t n_rest, arity;
	switch (op) {
	case FSNP_OP_FLOW_CREATE_MANY:
		rest = create;
		n_rest = 1;
		break;
	case FSNP_OP_FLOW_CANCEL_MANY:
		rest = cancel;
		n_rest = 1;
		break;
	case FSNP_OP_FLOW_TRANSITION_MANY:
		rest = trans;
		n_rest = 2;
		break;
	default:
		rest = claimed;
		n_rest = 2;
		break;
	}
	arity = 1 + (mixed ? 1 : 0) + n_rest;
	if (n == 0 || n % arity != 0) {
		return -1;
	}
	fsnp_w_key(w, "items");
	fsnp_w_array_begin(w);
	for (uint32_t k = 0; k < n; k += arity) {
		uint32_t j = k;
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "id");
		fsnp_w_val(w, &a[j++]);
		if (mixed) {
			if (!(a[j].tag == FSNP_BIN &&
			      fsnp_bytes_eq(a[j].as.bin, "-"))) {
				fsnp_w_key(w, "partition_key");
				fsnp_w_val(w, &a[j]);
			}
			j++;
		}
		for (uint32_t f = 0; f < n_rest; f++, j++) {
			if (strcmp(rest[f], "lease_token") == 0 &&
			    a[j].tag == FSNP_BIN && a[j].as.bin.len == 0) {
				continue;
			}
			fsnp_w_key(w, rest[f]);
			ce_value(w, rest[f], &a[j]);
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	return 0;
}

/* COMMAND_EXEC arguments as the typed body: the first positional
 * argument, then TOKEN value pairs (tokens case-insensitive; STATE and
 * VALUE may repeat; PARTITIONS n p...). 0, or -1 with `msg`. */
static int ce_body(uint16_t op, const struct fsnp_val *args, struct wbuf *out,
                   char *msg, size_t cap)
{
	struct fsnp_val *a = NULL;
	struct fsnp_iter it;
	struct fsnp_writer w;
	uint32_t n = args->as.count, i = 0, k = 0;
	uint32_t n_states = 0, n_values = 0;
	const char *first = ce_first(op);
	bool mixed = true, wrote_attrs = false;
	int rv = -1;

	a = calloc(n + 1, sizeof *a);
	if (a == NULL) {
		snprintf(msg, cap, "BUSY out of memory");
		return -1;
	}
	fsnp_iter_init(&it, args);
	while (fsnp_iter_next(&it, NULL, &a[k])) {
		k++;
	}
	fsnp_w_init(&w, out);
	fsnp_w_map_begin(&w);
	if (first != NULL && op == FSNP_OP_FLOW_VALUE_MGET) {
		fsnp_w_key(&w, "refs");
		fsnp_w_array_begin(&w);
		for (; i < n; i++) {
			fsnp_w_val(&w, &a[i]);
		}
		fsnp_w_array_end(&w);
	} else if (is_many(op)) {
		/* <partition | AUTO | MIXED> [from to] options ITEMS ... */
		if (n > 0 && a[0].tag == FSNP_BIN &&
		    !bin_ieq(a[0].as.bin, "AUTO") &&
		    !bin_ieq(a[0].as.bin, "MIXED")) {
			fsnp_w_key(&w, "partition_key");
			fsnp_w_val(&w, &a[0]);
			mixed = false;
		}
		i = n > 0 ? 1 : 0;
		if (op == FSNP_OP_FLOW_TRANSITION_MANY && n >= 3) {
			fsnp_w_key(&w, "from_state");
			fsnp_w_val(&w, &a[1]);
			fsnp_w_key(&w, "to_state");
			fsnp_w_val(&w, &a[2]);
			i = 3;
		}
	} else if (first != NULL && n > 0) {
		fsnp_w_key(&w, first);
		fsnp_w_val(&w, &a[i++]);
		if (op == FSNP_OP_FLOW_ATTRIBUTE_VALUES && i < n) {
			fsnp_w_key(&w, "attribute");
			fsnp_w_val(&w, &a[i++]);
		}
	}
	for (uint32_t j = i; j < n; j++) {
		if (a[j].tag == FSNP_BIN && a[j].as.bin.len == 5 &&
		    strncasecmp((const char *)a[j].as.bin.ptr, "STATE", 5) ==
		        0) {
			n_states++;
		}
		if (a[j].tag == FSNP_BIN && a[j].as.bin.len == 5 &&
		    strncasecmp((const char *)a[j].as.bin.ptr, "VALUE", 5) ==
		        0 &&
		    (op == FSNP_OP_FLOW_CLAIM_DUE || op == FSNP_OP_FLOW_GET)) {
			n_values++;
		}
	}
	while (i < n) {
		char tok[64], key[64];
		size_t tl;
		bool done = false;
		if (a[i].tag != FSNP_BIN || a[i].as.bin.len >= sizeof tok) {
			snprintf(msg, cap, "ERR syntax error");
			goto out;
		}
		tl = a[i].as.bin.len;
		for (size_t c = 0; c < tl; c++) {
			tok[c] = (char)toupper(a[i].as.bin.ptr[c]);
			key[c] = (char)tolower(a[i].as.bin.ptr[c]);
		}
		tok[tl] = key[tl] = '\0';
		i++;
		for (size_t c = 0; c < sizeof ce_flag / sizeof ce_flag[0];
		     c++) {
			if (strcmp(tok, ce_flag[c].token) == 0) {
				bool v = ce_flag[c].value;
				/* "INDEPENDENT true": the value may follow. */
				if (i < n && a[i].tag == FSNP_BIN &&
				    (bin_ieq(a[i].as.bin, "true") ||
				     bin_ieq(a[i].as.bin, "false"))) {
					v = bin_ieq(a[i].as.bin, "true");
					i++;
				} else if (i < n && (a[i].tag == FSNP_TRUE ||
				                     a[i].tag == FSNP_FALSE)) {
					v = a[i].tag == FSNP_TRUE;
					i++;
				}
				fsnp_w_key(&w, ce_flag[c].field);
				fsnp_w_bool(&w, v);
				done = true;
			}
		}
		if (!done && strcmp(tok, "PAYLOAD") == 0 &&
		    (op == FSNP_OP_FLOW_CLAIM_DUE || op == FSNP_OP_FLOW_GET ||
		     op == FSNP_OP_FLOW_RECLAIM)) {
			fsnp_w_key(&w, "payload");
			fsnp_w_bool(&w, true);
			done = true;
		}
		if (done) {
			continue;
		}
		if (is_many(op) && strcmp(tok, "ITEMS") == 0) {
			if (ce_items(&w, op, mixed, a + i, n - i) != 0) {
				snprintf(msg, cap, "ERR syntax error");
				goto out;
			}
			i = n;
			break;
		}
		if (strcmp(tok, "STATE") == 0 && n_states > 1) {
			fsnp_w_key(&w, "states");
			fsnp_w_array_begin(&w);
			for (uint32_t j = i - 1; j + 1 < n; j++) {
				if (a[j].tag == FSNP_BIN &&
				    a[j].as.bin.len == 5 &&
				    strncasecmp((const char *)a[j].as.bin.ptr,
				                "STATE", 5) == 0) {
					fsnp_w_val(&w, &a[j + 1]);
				}
			}
			fsnp_w_array_end(&w);
			n_states = 0; /* written once; later STATEs skip */
			i++;
			continue;
		}
		if (strcmp(tok, "STATE") == 0 && n_states == 0) {
			i++; /* already written with the first */
			continue;
		}
		if (strcmp(tok, "ATTRIBUTE") == 0 && op == FSNP_OP_FLOW_STATS) {
			/* ATTRIBUTE name value, repeated: one attributes map,
			 * written at the first. */
			if (!wrote_attrs) {
				fsnp_w_key(&w, "attributes");
				fsnp_w_map_begin(&w);
				for (uint32_t j = i - 1; j + 2 < n; j++) {
					if (a[j].tag == FSNP_BIN &&
					    bin_ieq(a[j].as.bin, "ATTRIBUTE") &&
					    a[j + 1].tag == FSNP_BIN) {
						fsnp_w_key_bin(
						    &w, a[j + 1].as.bin.ptr,
						    a[j + 1].as.bin.len);
						fsnp_w_val(&w, &a[j + 2]);
						j += 2;
					}
				}
				fsnp_w_map_end(&w);
				wrote_attrs = true;
			}
			if (i + 2 > n) {
				snprintf(msg, cap, "ERR syntax error");
				goto out;
			}
			i += 2;
			continue;
		}
		if (strcmp(tok, "VALUE") == 0 && n_values > 0) {
			fsnp_w_key(&w, "values");
			fsnp_w_array_begin(&w);
			for (uint32_t j = i - 1; j + 1 < n; j++) {
				if (a[j].tag == FSNP_BIN &&
				    a[j].as.bin.len == 5 &&
				    strncasecmp((const char *)a[j].as.bin.ptr,
				                "VALUE", 5) == 0) {
					fsnp_w_val(&w, &a[j + 1]);
				}
			}
			fsnp_w_array_end(&w);
			n_values = 0;
			i++;
			continue;
		}
		if (strcmp(tok, "VALUE") == 0 &&
		    (op == FSNP_OP_FLOW_CLAIM_DUE || op == FSNP_OP_FLOW_GET)) {
			i++;
			continue;
		}
		if (strcmp(tok, "PARTITIONS") == 0) {
			int64_t cnt;
			if (i >= n || fsnp_val_i64(&a[i], &cnt) != 0) {
				char t[24] = "";
				if (i < n && a[i].tag == FSNP_BIN &&
				    a[i].as.bin.len < sizeof t) {
					memcpy(t, a[i].as.bin.ptr,
					       a[i].as.bin.len);
				}
				cnt = strtoll(t, NULL, 10);
			}
			i++;
			if (cnt < 0 || (uint64_t)cnt > n - i) {
				snprintf(msg, cap, "ERR syntax error");
				goto out;
			}
			fsnp_w_key(&w, "partition_keys");
			fsnp_w_array_begin(&w);
			for (int64_t c = 0; c < cnt; c++) {
				fsnp_w_val(&w, &a[i++]);
			}
			fsnp_w_array_end(&w);
			continue;
		}
		if (i >= n) {
			snprintf(msg, cap, "ERR syntax error");
			goto out;
		}
		const char *field = key;
		for (size_t c = 0; c < sizeof ce_alias / sizeof ce_alias[0];
		     c++) {
			if (strcmp(tok, ce_alias[c].token) == 0) {
				field = ce_alias[c].field;
			}
		}
		if (strcmp(field, "return") == 0 && a[i].tag == FSNP_BIN) {
			/* RETURN RECORDS / JOBS ...: lower case. */
			char rv_[48];
			size_t rl = a[i].as.bin.len < sizeof rv_ - 1
			                ? a[i].as.bin.len
			                : sizeof rv_ - 1;
			for (size_t c = 0; c < rl; c++) {
				rv_[c] = (char)tolower(a[i].as.bin.ptr[c]);
			}
			fsnp_w_key(&w, "return");
			fsnp_w_bin(&w, rv_, rl);
			i++;
			continue;
		}
		fsnp_w_key(&w, field);
		ce_value(&w, field, &a[i++]);
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0) {
		snprintf(msg, cap, "BUSY out of memory");
		goto out;
	}
	rv = 0;
out:
	free(a);
	return rv;
}

int fsnp_flow_prepare_args(struct fsnp_req *r, uint16_t opcode,
                           const struct fsnp_val *args)
{
	struct wbuf b;
	char msg[128];
	int rv;
	if (opcode == FSNP_OP_FLOW_QUERY) {
		return fsnp_flow_query_prepare_args(r, args);
	}
	wbuf_init(&b);
	if (ce_body(opcode, args, &b, msg, sizeof msg) != 0 || b.oom) {
		if (b.oom) {
			snprintf(msg, sizeof msg, "BUSY out of memory");
		}
		flow_error(r,
		           strncmp(msg, "BUSY", 4) == 0 ? FSNP_STATUS_BUSY
		                                        : FSNP_STATUS_ERROR,
		           msg);
		wbuf_free(&b);
		return -1;
	}
	rv = fsnp_flow_prepare(r, opcode, b.data, b.len);
	wbuf_free(&b);
	return rv;
}

void fsnp_flow_exec_args(struct fsnp_req *r, uint16_t opcode,
                         const struct fsnp_val *args)
{
	if (fsnp_flow_prepare_args(r, opcode, args) != 0) {
		fsnp_exec_finish(r);
		return;
	}
	fsnp_flow_start(r);
}

/* --- Compact requests -------------------------------------------------- */

bool fsnp_flow_compact(uint16_t opcode, const uint8_t *body, size_t len)
{
	return len > 0 && fsnp_compact_is_flow(opcode, body[0]);
}

void fsnp_flow_exec_compact(struct fsnp_req *r, const uint8_t *body, size_t len)
{
	struct wbuf b;
	int e;
	wbuf_init(&b);
	e = fsnp_compact_flow_body(r->opcode, body, len,
	                           (uint32_t)r->srv->lim.max_value_items, &b);
	if (e == 0 && b.oom) {
		e = FSNP_ERR_NOMEM;
	}
	if (e != 0) {
		fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 fsnp_strerror(e), false, 0);
		wbuf_free(&b);
		fsnp_exec_finish(r);
		return;
	}
	r->srv->stats.flow_compact_requests++;
	metric_add(r->srv->m_flow_compact, 1);
	fsnp_flow_exec(r, r->opcode, b.data, b.len);
	wbuf_free(&b);
}

/* --- FLOW.QUERY.INDEXES ------------------------------------------------ */

void fsnp_flow_query_indexes(struct fsnp_req *r, const struct fsnp_val *args)
{
	struct fsnp_iter it;
	struct fsnp_val id = {.tag = FSNP_NIL};
	struct fsnp_writer w;
	uint32_t n = args->tag == FSNP_ARRAY ? args->as.count : 0;

	if (n > 1) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR wrong number of arguments for "
		           "'flow.query.indexes' command");
		return;
	}
	if (n == 1) {
		fsnp_iter_init(&it, args);
		(void)fsnp_iter_next(&it, NULL, &id);
		if (id.tag != FSNP_BIN || id.as.bin.len == 0 ||
		    id.as.bin.len > 64) {
			flow_error(r, FSNP_STATUS_ERROR,
			           "ERR Flow query index id must be 1 to 64 "
			           "bytes");
			return;
		}
	}
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (flow_index_status_v1(&w, fsnp_now_ms(r->srv), r->srv->data_groups,
	                         n == 1 ? id.as.bin.ptr : NULL,
	                         n == 1 ? id.as.bin.len : 0) != 0) {
		flow_error(r, FSNP_STATUS_ERROR,
		           "ERR Flow query index not found");
		return;
	}
	fsnp_w_finish(&w);
}
