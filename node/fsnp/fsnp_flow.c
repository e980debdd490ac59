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
 *  - block_ms: a claim that finds nothing is parked and polled again
 *    (every FLOW_POLL_MS, and at once when a Flow write succeeds through
 *    this node) until it claims something or block_ms passes (0: no end);
 *  - FLOW_WAKE events for the Flow writes through this node;
 *  - job claims answered flow_claim_jobs_v1 on connections that asked for
 *    compact Flow replies.
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
#include "node/fsnp/fsnp_internal.h"
#include "store/result.h"
#include "wire/flow_route.h"
#include "wire/fsnp_compact.h"
#include "wire/fsnp_opcode.h"

/* A parked claim is polled again this often at the latest. */
#define FLOW_POLL_MS 100u

enum flow_kind {
	FK_ONE,   /* one group */
	FK_CLAIM, /* a claim: one group, or group after group */
	FK_ALL,   /* every group; group 1's reply */
	FK_MGET,  /* every group; values merged per position */
	FK_SPLIT, /* an independent batch, one command per group */
	FK_SLIST, /* FLOW.SCHEDULE.LIST: every group, lists merged */
	/* a governance listing: every group, lists merged */
	FK_GOV,
	/* EFFECT.RESERVE step 1: the named circuit's group */
	FK_CIRCUIT,
	FK_STATS, /* one group or every group; answers merged by flow/ */
};

struct fsnp_flow {
	uint16_t opcode;
	enum flow_kind kind;
	uint8_t *body; /* the typed body (owned) */
	size_t len;
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

	/* fan-out and split: one result per part */
	struct fsnp_res *res;
	uint32_t n_res;
	uint32_t n_items;
	uint32_t *item_part; /* split: the part of each item */
	uint32_t *item_pos;  /* split: its position within the part */
};

static uint32_t claim_rotor;

static void flow_woke(struct fsnp_req *r);
static void circuit_checked(struct fsnp_req *r, int status, const uint8_t *res,
                            size_t len);

void fsnp_flow_free(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	if (f == NULL) {
		return;
	}
	free(f->body);
	wbuf_free(&f->acc);
	if (f->res != NULL) {
		for (uint32_t i = 0; i < f->n_res; i++) {
			free(f->res[i].data);
		}
		free(f->res);
	}
	free(f->item_part);
	free(f->item_pos);
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
	if (flow_cmd_encode(f->opcode, body, len, &meta, &cmd, &n, &err) != 0) {
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

static void claim_restart(struct fsnp_req *r)
{
	struct fsnp_flow *f = r->flow;
	f->asked = 0;
	f->remaining = f->limit;
	f->err_status = SHARDS_OK;
	f->start = claim_rotor++;
}

void fsnp_flow_poll(struct fsnp_req *r)
{
	if (r->slot_lent) {
		r->slot_lent = false;
		r->srv->executions++;
	}
	r->waiting = false;
	wbuf_reset(&r->reply);
	claim_restart(r);
	if (!claim_step(r)) {
		fsnp_exec_finish(r);
	}
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
	at = FLOW_POLL_MS;
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
		if (!flow_opcode_is_read(f->opcode) && r->reply.len >= 2 &&
		    wire_load_u16(r->reply.data) == 0) {
			flow_woke(r);
		}
		fsnp_exec_finish(r);
		return;
	case FK_CLAIM:
		r->pending = 0;
		claim_done(r, status, result, len);
		return;
	case FK_CIRCUIT:
		r->pending = 0;
		circuit_checked(r, status, result, len);
		return;
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
		flow_woke(r);
	} else {
		merge_all(r);
		flow_woke(r);
	}
	fsnp_exec_finish(r);
}

/* A Flow write succeeded: parked claims try again now, and subscribers
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
		} else {
			merge_all(r);
		}
		fsnp_exec_finish(r);
	}
}

static int plan_parts(struct fsnp_req *r, uint32_t n)
{
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
	fsnp_w_map_end(&w);
	f->kind = FK_CIRCUIT;
	f->fixed_group = flow_group;
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	f->opcode = FSNP_OP_FLOW_CIRCUIT_GET;
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

static void gov_denial(struct fsnp_req *r, const char *code, const char *reason,
                       const char *msg, const struct fsnp_val *circuit)
{
	struct fsnp_writer w;
	struct fsnp_val v;
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
	if (circuit != NULL && fsnp_map_get(circuit, "scope", &v) == 0) {
		int64_t at = 0, open_ms = 0, left;
		fsnp_w_key(&w, "scope");
		fsnp_w_val(&w, &v);
		fsnp_map_i64(circuit, "opened_at_ms", &at);
		fsnp_map_i64(circuit, "open_ms", &open_ms);
		left = at + open_ms - (int64_t)fsnp_now_ms(r->srv);
		fsnp_w_key(&w, "retry_after_ms");
		fsnp_w_i64(&w, left > 0 ? left : 0);
		fsnp_w_key(&w, "policy");
		fsnp_w_str(&w, "circuit");
	}
	fsnp_w_map_end(&w);
	fsnp_w_finish(&w);
}

/* Step 1's answer: refuse, or propose the reservation (step 2). */
static void circuit_checked(struct fsnp_req *r, int status, const uint8_t *res,
                            size_t len)
{
	struct fsnp_flow *f = r->flow;
	struct fsnp_val v;
	if (!result_ok(status, res, len, &v)) {
		gov_denial(r, "GOVERNANCE_UNAVAILABLE",
		           "governance_unavailable",
		           "the circuit named by governance_scope could not be "
		           "read; nothing was reserved",
		           NULL);
		fsnp_exec_finish(r);
		return;
	}
	if (v.tag == FSNP_MAP) {
		struct fsnp_bytes st;
		if (fsnp_map_bin(&v, "status", &st) == 0 &&
		    fsnp_bytes_eq(st, "open")) {
			gov_denial(r, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open",
			           "circuit is open for scope", &v);
			fsnp_exec_finish(r);
			return;
		}
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

	switch (opcode) {
	case FSNP_OP_FLOW_CLAIM_DUE:
	case FSNP_OP_FLOW_RECLAIM:
		f->kind = FK_CLAIM;
		f->fixed_group = plen > 0 ? group : 0;
		f->limit = req->f[FF_LIMIT].set ? req->f[FF_LIMIT].i : 1;
		if (f->limit < 1) {
			f->limit = 1;
		}
		if (req->f[FF_BLOCK_MS].set) {
			f->block = true;
			f->block_until =
			    req->f[FF_BLOCK_MS].i == 0
			        ? 0
			        : fsnp_now_ms(r->srv) +
			              (uint64_t)req->f[FF_BLOCK_MS].i;
		}
		r->plan.parts = &r->plan.one;
		r->plan.n_parts = 1;
		claim_restart(r);
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
