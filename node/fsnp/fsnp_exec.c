/* One FSNP request: admission (lanes, windows, budgets, auth), body
 * decoding, dispatch, the store operations of KV commands and PIPELINE,
 * and the reply. See fsnp_internal.h for lifetimes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "node/fsnp/fsnp_internal.h"
#include "node/scan_cursors.h"
#include "store/result.h"
#include "store/store.h"
#include "wire/fsnp_compact.h"
#include "wire/felix_utf8.h"
#include "wire/fsnp_opcode.h"

static const struct config_native *lim(const struct fsnp_req *r)
{
	return &r->srv->lim;
}

/* --- Requests ------------------------------------------------------------ */

static struct fsnp_req *req_new(struct fsnp_server *s, uint32_t lane,
                                uint16_t opcode, uint64_t request_id)
{
	struct fsnp_req *r = s->req_pool;
	if (r != NULL) {
		/* Reused: keep the reply buffer's storage; the plan's command
		 * storage needs no clearing (fsnp_cmd.h). */
		struct wbuf reply = r->reply;
		s->req_pool = r->next;
		s->n_req_pool--;
		memset(r, 0, offsetof(struct fsnp_req, plan.one_cmd));
		r->reply = reply;
		wbuf_reset(&r->reply);
	} else {
		r = calloc(1, sizeof *r);
		if (r == NULL) {
			return NULL;
		}
		wbuf_init(&r->reply);
	}
	r->srv = s;
	r->lane_id = lane;
	r->opcode = opcode;
	r->request_id = request_id;
	/* The command storage at the end is charged as the plan's command
	 * bytes (account_plan), as when it was allocated apart. */
	r->footprint = offsetof(struct fsnp_req, plan.one_cmd);
	s->session_bytes += r->footprint;
	return r;
}

static void charge(struct fsnp_req *r, size_t n)
{
	r->footprint += n;
	r->srv->session_bytes += n;
}

void fsnp_req_free(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	if (r->res != NULL) {
		for (uint32_t i = 0; i < r->plan.n_parts; i++) {
			free(r->res[i].data);
		}
		free(r->res);
	}
	if (r->ops != &r->op1) {
		free(r->ops);
	}
	fsnp_flow_free(r);
	fsnp_plan_free(&r->plan);
	for (uint32_t i = 0; i < r->n_items; i++) {
		if (r->items[i] != NULL) {
			fsnp_req_free(r->items[i]);
		}
	}
	free(r->items);
	s->session_bytes -= r->footprint;
	if (FSNP_POOLING && s->n_req_pool < FSNP_REQ_POOL_MAX &&
	    r->reply.cap <= FSNP_REQ_POOL_REPLY_MAX) {
		r->next = s->req_pool;
		s->req_pool = r;
		s->n_req_pool++;
		return;
	}
	wbuf_free(&r->reply);
	free(r);
}

void fsnp_req_pool_drain(struct fsnp_server *s)
{
	while (s->req_pool != NULL) {
		struct fsnp_req *r = s->req_pool;
		s->req_pool = r->next;
		wbuf_free(&r->reply);
		free(r);
	}
	s->n_req_pool = 0;
	wbuf_free(&s->compact_out);
	while (s->n_seg_pool > 0) {
		free(s->seg_pool[--s->n_seg_pool]);
	}
	while (s->n_seg_small_pool > 0) {
		free(s->seg_small_pool[--s->n_seg_small_pool]);
	}
}

bool fsnp_req_orphaned(const struct fsnp_req *r)
{
	while (r->parent != NULL) {
		r = r->parent;
	}
	return r->conn == NULL;
}

void fsnp_req_release(struct fsnp_req *r)
{
	if (r->parent == NULL && r->conn == NULL && r->pending == 0 &&
	    !r->waiting) {
		fsnp_req_free(r);
	}
}

static void lane_push(struct fsnp_conn *c, struct fsnp_lane *l,
                      struct fsnp_req *r)
{
	r->conn = c;
	r->lane = l;
	if (l->tail == NULL) {
		l->head = r;
	} else {
		l->tail->next = r;
	}
	l->tail = r;
	l->queued++;
	c->queued++;
}

static void pipeline_item_done(struct fsnp_req *parent);

void fsnp_req_complete(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	r->done = true;
	if (r->counted) {
		r->counted = false;
		if (!r->slot_lent) {
			s->executions--;
		}
		r->slot_lent = false;
		if (r->conn != NULL) {
			r->conn->inflight--;
			r->lane->inflight--;
		}
	}
	if (r->reply.len >= 2) {
		uint16_t st = wire_load_u16(r->reply.data);
		if (st == FSNP_STATUS_BUSY) {
			s->stats.busy++;
			metric_add(s->m_busy, 1);
		} else if (st == FSNP_STATUS_BAD_REQUEST) {
			s->stats.bad_requests++;
		}
		if (st != FSNP_STATUS_OK) {
			metric_add(s->m_errors[st < FSNP_METRIC_STATUSES
			                           ? st
			                           : FSNP_STATUS_ERROR],
			           1);
		}
	}
	if (r->parent == NULL && r->t0_ns != 0) {
		metric_hist_observe(&s->op_latency[fsnp_metric_slot(r->opcode)],
		                    uv_hrtime() - r->t0_ns);
	}
	if (r->parent != NULL) {
		pipeline_item_done(r->parent);
	} else if (r->conn != NULL) {
		fsnp_conn_lane_flush(r->conn, r->lane);
	} else {
		fsnp_req_release(r);
	}
}

/* --- Replies ----------------------------------------------------------- */

void fsnp_write_error(struct fsnp_writer *w, uint16_t status, const char *code,
                      const char *msg, bool safe_to_retry,
                      uint64_t retry_after_ms)
{
	fsnp_w_status(w, status);
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "code");
	fsnp_w_str(w, code != NULL ? code : fsnp_status_name(status));
	fsnp_w_key(w, "message");
	fsnp_w_str(w, msg);
	fsnp_w_key(w, "retryable");
	fsnp_w_bool(w, status == FSNP_STATUS_BUSY ||
	                   status == FSNP_STATUS_REROUTE);
	fsnp_w_key(w, "safe_to_retry");
	fsnp_w_bool(w, safe_to_retry);
	fsnp_w_key(w, "retry_after_ms");
	fsnp_w_u64(w, retry_after_ms);
	fsnp_w_map_end(w);
}

void fsnp_reply_error(struct fsnp_req *r, uint16_t status, const char *code,
                      const char *msg, bool safe_to_retry,
                      uint64_t retry_after_ms)
{
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_write_error(&w, status, code, msg, safe_to_retry, retry_after_ms);
	fsnp_w_finish(&w);
}

static void reply_cmd_err(struct fsnp_req *r, const struct fsnp_cmd_err *e)
{
	bool busy = e->status == FSNP_STATUS_BUSY;
	fsnp_reply_error(r, e->status, e->code, e->message, busy,
	                 busy ? FSNP_RETRY_AFTER_MS : 0);
}

static void reply_busy(struct fsnp_req *r, const char *code, const char *msg,
                       uint64_t retry_after_ms)
{
	fsnp_reply_error(r, FSNP_STATUS_BUSY, code, msg, true, retry_after_ms);
}

/* Reply = u16 status + one encoded value. */
static void reply_raw(struct fsnp_req *r, uint16_t status, const uint8_t *v,
                      size_t len)
{
	wbuf_reset(&r->reply);
	r->custom = false;
	wbuf_put_u16(&r->reply, status);
	wbuf_append(&r->reply, v, len);
}

static bool want_compact(const struct fsnp_req *r, uint32_t codec,
                         size_t payload)
{
	const struct fsnp_conn *c = r->conn;
	uint32_t chunk;
	if (c == NULL || r->parent != NULL || !(c->codecs & codec) || c->zlib) {
		return false;
	}
	chunk = fsnp_chunk_size((uint32_t)lim(r)->response_chunk_bytes,
	                        (uint32_t)lim(r)->max_frame_bytes);
	return payload + 2 <= chunk;
}

/* Replaces a typed OK reply by its compact form when the connection asked
 * for the codec. */
static void maybe_compact(struct fsnp_req *r)
{
	const uint8_t *v = r->reply.data + 2;
	size_t vlen = r->reply.len - 2;
	struct fsnp_val val;
	struct wbuf out, tmp;
	uint32_t codec;

	switch (r->opcode) {
	case FSNP_OP_GET:
		codec = FSNP_CODEC_KV_GET;
		break;
	case FSNP_OP_SET:
	case FSNP_OP_MSET:
		codec = FSNP_CODEC_OK_LIST;
		break;
	case FSNP_OP_MGET:
		codec = FSNP_CODEC_KV_MGET;
		break;
	default:
		return;
	}
	/* Most connections ask for no codec: decide before decoding. */
	if (r->conn == NULL || !(r->conn->codecs & codec)) {
		return;
	}
	if (r->reply.len < 3 || wire_load_u16(r->reply.data) != 0) {
		return;
	}
	if (fsnp_value_decode(v, vlen, NULL, &val, NULL) != 0) {
		return;
	}
	/* Built in the server's scratch buffer, which then trades places
	 * with the reply: both keep their storage. */
	out = r->srv->compact_out;
	wbuf_reset(&out);
	wbuf_put_u16(&out, FSNP_STATUS_OK);
	switch (r->opcode) {
	case FSNP_OP_GET:
		if (val.tag != FSNP_NIL && val.tag != FSNP_BIN) {
			goto keep;
		}
		if (!want_compact(r, FSNP_CODEC_KV_GET, vlen + 2)) {
			goto keep;
		}
		fsnp_compact_kv_get_encode(
		    &out, val.tag == FSNP_BIN ? &val.as.bin : NULL);
		break;
	case FSNP_OP_SET:
	case FSNP_OP_MSET:
		if (val.tag != FSNP_BIN || !fsnp_bytes_eq(val.as.bin, "OK") ||
		    !want_compact(r, FSNP_CODEC_OK_LIST, 5)) {
			goto keep;
		}
		fsnp_compact_ok_list_encode(&out, 1);
		break;
	case FSNP_OP_MGET: {
		struct fsnp_iter it;
		struct fsnp_val e;
		if (val.tag != FSNP_ARRAY ||
		    !want_compact(r, FSNP_CODEC_KV_MGET, vlen + 1)) {
			goto keep;
		}
		fsnp_iter_init(&it, &val);
		while (fsnp_iter_next(&it, NULL, &e)) {
			if (e.tag != FSNP_NIL && e.tag != FSNP_BIN) {
				goto keep;
			}
		}
		fsnp_compact_kv_mget_begin(&out, val.as.count);
		fsnp_iter_init(&it, &val);
		while (fsnp_iter_next(&it, NULL, &e)) {
			fsnp_compact_kv_mget_item(
			    &out, e.tag == FSNP_BIN ? &e.as.bin : NULL);
		}
		break;
	}
	default:
		goto keep;
	}
	if (out.oom) {
		goto keep;
	}
	tmp = r->reply;
	r->reply = out;
	out = tmp;
	r->custom = true;
keep:
	wbuf_reset(&out);
	r->srv->compact_out = out;
}

static void finish_reply(struct fsnp_req *r)
{
	if (r->reply.oom) {
		reply_busy(r, "busy", "BUSY out of memory",
		           FSNP_RETRY_AFTER_MS);
	}
	if (r->reply.len > lim(r)->max_response_bytes) {
		fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 "ERR native response byte limit exceeded",
		                 false, 0);
	}
	maybe_compact(r);
}

/* The error text of a store error result (a binary value). */
static void store_message(const uint8_t *v, size_t len, char *out, size_t cap)
{
	struct fsnp_val val;
	if (fsnp_value_decode(v, len, NULL, &val, NULL) == 0 &&
	    val.tag == FSNP_BIN) {
		size_t n = val.as.bin.len < cap - 1 ? val.as.bin.len : cap - 1;
		memcpy(out, val.as.bin.ptr, n);
		out[n] = '\0';
	} else {
		snprintf(out, cap, "ERR command failed");
	}
}

/* Answers from a store result: KV results are FSNP typed values byte for
 * byte (store/result.h), so an OK result's value is copied as it is. */
static void reply_store(struct fsnp_req *r, const uint8_t *res, size_t len)
{
	char msg[512];
	if (len < 3 || res[0] != STORE_RESULT_VERSION) {
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
		                 "ERR malformed result from the store", false,
		                 0);
		return;
	}
	if (res[1] == STORE_OK) {
		reply_raw(r, FSNP_STATUS_OK, res + 2, len - 2);
		return;
	}
	store_message(res + 2, len - 2, msg, sizeof msg);
	fsnp_reply_error(r, FSNP_STATUS_ERROR, "error", msg, false, 0);
}

/* A SCAN page: the key its cursor resumes at kept in the node's table
 * (node/scan_cursors.h) and the answer without it. */
static void reply_scan(struct fsnp_req *r, const uint8_t *res, size_t len)
{
	uint8_t *page = NULL;
	size_t plen = 0;
	if (r->srv->scan_cursors != NULL &&
	    scan_cursors_result(r->srv->scan_cursors, r->plan.parts[0].group,
	                        res, len, &page, &plen) != 0) {
		reply_busy(r, "busy", "BUSY out of memory",
		           FSNP_RETRY_AFTER_MS);
		return;
	}
	if (page != NULL) {
		reply_store(r, page, plen);
		free(page);
	} else {
		reply_store(r, res, len);
	}
}

/* Answers a failed store operation (SHARDS_* status). */
void fsnp_exec_reply_shards(struct fsnp_req *r, int status, uint32_t group)
{
	char msg[256];
	bool read = r->plan.n_parts > 0 && r->plan.parts[0].read;
	switch (status) {
	case FSNP_OP_DEADLINE:
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "deadline_exceeded",
		                 "ERR native request deadline exceeded", false,
		                 0);
		break;
	case SHARDS_ENOTLEADER:
		snprintf(msg, sizeof msg,
		         "REROUTE shard %" PRIu32 " is led by another node",
		         group - 1);
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute", msg, true,
		                 FSNP_RETRY_AFTER_MS);
		break;
	case SHARDS_EUNAVAILABLE:
		snprintf(msg, sizeof msg, "REROUTE shard %" PRIu32 ": %s",
		         group - 1, shards_strerror(status));
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute", msg, read,
		                 FSNP_RETRY_AFTER_MS);
		break;
	case SHARDS_ESHUTDOWN:
		fsnp_reply_error(r, FSNP_STATUS_REROUTE, "reroute",
		                 "REROUTE node shutting down", read,
		                 FSNP_RETRY_AFTER_MS);
		break;
	case SHARDS_EBUSY:
		reply_busy(r, "busy", "BUSY shard has too much work queued",
		           FSNP_RETRY_AFTER_MS);
		break;
	case SHARDS_ETOOBIG:
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
		                 "ERR request too large for one replicated "
		                 "entry",
		                 false, 0);
		break;
	default:
		snprintf(msg, sizeof msg, "ERR %s", shards_strerror(status));
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "error", msg, false, 0);
		break;
	}
}

/* --- KV plans ------------------------------------------------------------- */

static bool first_is(const uint8_t *v, size_t len, const char *word,
                     struct fsnp_val *arr)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	if (fsnp_value_decode(v, len, NULL, arr, NULL) != 0 ||
	    arr->tag != FSNP_ARRAY) {
		return false;
	}
	fsnp_iter_init(&it, arr);
	return fsnp_iter_next(&it, NULL, &e) && e.tag == FSNP_BIN &&
	       fsnp_bytes_eq(e.as.bin, word);
}

/* After a successful FETCH_OR_COMPUTE_RESULT / _ERROR: wake the key's
 * waiters with the value or the error message. */
static void foc_finished(struct fsnp_req *r)
{
	struct store_cmd c;
	const char *emsg;
	if (r->reply.len < 2 || wire_load_u16(r->reply.data) != 0) {
		return;
	}
	if (store_cmd_decode(r->plan.parts[0].cmd, r->plan.parts[0].len, &c,
	                     &emsg) != 0) {
		return;
	}
	fsnp_server_foc_finish(r->srv, c.key.p, c.key.len,
	                       c.op == STORE_OP_KV_FOC_RESULT, c.value.p,
	                       c.value.len);
}

static void merge_sum(struct fsnp_req *r)
{
	int64_t sum = 0;
	for (uint32_t i = 0; i < r->plan.n_parts; i++) {
		struct fsnp_res *x = &r->res[i];
		struct fsnp_val v;
		int64_t n;
		if (x->status != SHARDS_OK) {
			fsnp_exec_reply_shards(r, x->status,
			                       r->plan.parts[i].group);
			return;
		}
		if (x->len < 3 || x->data[1] != STORE_OK) {
			reply_store(r, x->data, x->len);
			return;
		}
		if (fsnp_value_decode(x->data + 2, x->len - 2, NULL, &v,
		                      NULL) == 0 &&
		    fsnp_val_i64(&v, &n) == 0) {
			sum += n;
		}
	}
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_i64(&w, sum);
	fsnp_w_finish(&w);
}

static void merge_order(struct fsnp_req *r)
{
	uint32_t n = r->plan.n_items;
	struct fsnp_val *vals = NULL;
	struct fsnp_writer w;

	if (n > 0) {
		vals = calloc(n, sizeof *vals);
		if (vals == NULL) {
			reply_busy(r, "busy", "BUSY out of memory",
			           FSNP_RETRY_AFTER_MS);
			return;
		}
	}
	for (uint32_t i = 0; i < r->plan.n_parts; i++) {
		struct fsnp_res *x = &r->res[i];
		struct fsnp_part *p = &r->plan.parts[i];
		struct fsnp_val arr, e;
		struct fsnp_iter it;
		uint32_t k = 0;
		if (x->status != SHARDS_OK) {
			fsnp_exec_reply_shards(r, x->status, p->group);
			goto out;
		}
		if (x->len < 3 || x->data[1] != STORE_OK) {
			reply_store(r, x->data, x->len);
			goto out;
		}
		if (fsnp_value_decode(x->data + 2, x->len - 2, NULL, &arr,
		                      NULL) != 0 ||
		    arr.tag != FSNP_ARRAY || arr.as.count != p->n) {
			fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
			                 "ERR malformed result from the store",
			                 false, 0);
			goto out;
		}
		fsnp_iter_init(&it, &arr);
		while (k < p->n && fsnp_iter_next(&it, NULL, &e)) {
			vals[p->pos[k++]] = e;
		}
	}
	wbuf_reset(&r->reply);
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_array_begin(&w);
	for (uint32_t i = 0; i < n; i++) {
		if (vals[i].enc == NULL) {
			fsnp_w_nil(&w);
		} else {
			fsnp_w_val(&w, &vals[i]);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_finish(&w);
out:
	free(vals);
}

/* Finishes the reply written into `out` through w and makes it r's
 * reply (out is taken); BUSY when it could not be finished. */
static void reply_take(struct fsnp_req *r, struct fsnp_writer *w,
                       struct wbuf *out)
{
	if (fsnp_w_finish(w) != 0) {
		wbuf_free(out);
		reply_busy(r, "busy", "BUSY out of memory",
		           FSNP_RETRY_AFTER_MS);
		return;
	}
	wbuf_free(&r->reply);
	r->reply = *out;
}

/* KEYS: every part's list, one after another (in group order). */
static void merge_concat(struct fsnp_req *r)
{
	struct fsnp_writer w;
	struct wbuf out;

	wbuf_init(&out);
	fsnp_w_init(&w, &out);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_array_begin(&w);
	for (uint32_t i = 0; i < r->plan.n_parts; i++) {
		struct fsnp_res *x = &r->res[i];
		struct fsnp_val arr, e;
		struct fsnp_iter it;
		if (x->status != SHARDS_OK) {
			fsnp_exec_reply_shards(r, x->status,
			                       r->plan.parts[i].group);
			wbuf_free(&out);
			return;
		}
		if (x->len < 3 || x->data[1] != STORE_OK) {
			reply_store(r, x->data, x->len);
			wbuf_free(&out);
			return;
		}
		if (fsnp_value_decode(x->data + 2, x->len - 2, NULL, &arr,
		                      NULL) != 0 ||
		    arr.tag != FSNP_ARRAY) {
			fsnp_reply_error(r, FSNP_STATUS_ERROR, "error",
			                 "ERR malformed result from the store",
			                 false, 0);
			wbuf_free(&out);
			return;
		}
		fsnp_iter_init(&it, &arr);
		while (fsnp_iter_next(&it, NULL, &e)) {
			fsnp_w_val(&w, &e);
		}
	}
	fsnp_w_array_end(&w);
	reply_take(r, &w, &out);
}

/* HGETALL answers a map, whose keys the official SDK (and the seed's
 * clients generally) must decode as UTF-8. A hash with a field name that is
 * not valid UTF-8 is answered as a list of [field, value] pairs instead,
 * which the SDK accepts for HGETALL and decodes without a text check
 * (docs/fsnp.md). */
static void hgetall_shape(struct fsnp_req *r)
{
	struct fsnp_val map, v;
	struct fsnp_bytes k;
	struct fsnp_iter it;
	struct fsnp_writer w;
	struct wbuf out;
	bool all_text = true;

	if (r->reply.len < 3 || wire_load_u16(r->reply.data) != 0 ||
	    fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &map,
	                      NULL) != 0 ||
	    map.tag != FSNP_MAP) {
		return;
	}
	fsnp_iter_init(&it, &map);
	while (all_text && fsnp_iter_next(&it, &k, &v)) {
		all_text = felix_utf8_valid(k.ptr, k.len);
	}
	if (all_text) {
		return;
	}
	wbuf_init(&out);
	fsnp_w_init(&w, &out);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_array_begin(&w);
	fsnp_iter_init(&it, &map);
	while (fsnp_iter_next(&it, &k, &v)) {
		fsnp_w_array_begin(&w);
		fsnp_w_bin(&w, k.ptr, k.len);
		fsnp_w_val(&w, &v);
		fsnp_w_array_end(&w);
	}
	fsnp_w_array_end(&w);
	reply_take(r, &w, &out);
}

/* Every part has answered: build the reply and complete (or park a
 * fetch-or-compute waiter). */
static void plan_finish(struct fsnp_req *r)
{
	switch (r->plan.merge) {
	case FSNP_MERGE_SUM:
		merge_sum(r);
		break;
	case FSNP_MERGE_ORDER:
		merge_order(r);
		break;
	case FSNP_MERGE_CONCAT:
		merge_concat(r);
		break;
	default:
		break;
	}
	if (r->plan.op == STORE_OP_KV_FOC && r->reply.len > 2 &&
	    wire_load_u16(r->reply.data) == 0) {
		struct fsnp_val arr;
		if (first_is(r->reply.data + 2, r->reply.len - 2, "wait",
		             &arr)) {
			fsnp_server_foc_park(r->srv, r);
			return;
		}
	}
	if (r->plan.op == STORE_OP_KV_FOC_RESULT ||
	    r->plan.op == STORE_OP_KV_FOC_ERROR) {
		foc_finished(r);
	}
	if (r->plan.op == STORE_OP_KV_HGETALL) {
		hgetall_shape(r);
	}
	fsnp_acl_shape(r);
	finish_reply(r);
	fsnp_req_complete(r);
}

void fsnp_exec_finish(struct fsnp_req *r)
{
	if (r->flow != NULL && fsnp_flow_finishing(r)) {
		return;
	}
	finish_reply(r);
	fsnp_req_complete(r);
}

void fsnp_exec_op_done(struct fsnp_op *op, int status, const uint8_t *result,
                       size_t len)
{
	struct fsnp_req *r = op->req;
	if (r->flow != NULL) {
		fsnp_flow_op_done(op, status, result, len);
		return;
	}
	if (r->plan.merge == FSNP_MERGE_ONE) {
		if (status == SHARDS_OK && r->plan.op == STORE_OP_KV_SCAN) {
			reply_scan(r, result, len);
		} else if (status == SHARDS_OK) {
			reply_store(r, result, len);
		} else {
			fsnp_exec_reply_shards(r, status,
			                       r->plan.parts[op->part].group);
		}
	} else {
		struct fsnp_res *x = &r->res[op->part];
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
	}
	if (--r->pending == 0) {
		plan_finish(r);
	}
}

/* Runs a parsed plan; the reply comes through fsnp_exec_op_done. */
static void run_plan(struct fsnp_req *r)
{
	uint32_t n = r->plan.n_parts;
	if (!fsnp_acl_check_plan(r)) {
		fsnp_req_complete(r);
		return;
	}
	if (n == 0) {
		r->pending = 0;
		if (r->plan.merge == FSNP_MERGE_SUM) {
			r->res = NULL;
			merge_sum(r);
		} else {
			merge_order(r);
		}
		finish_reply(r);
		fsnp_req_complete(r);
		return;
	}
	bool merge = r->plan.merge != FSNP_MERGE_ONE;
	r->ops = n == 1 ? &r->op1 : calloc(n, sizeof *r->ops);
	if (merge) {
		r->res = calloc(n, sizeof *r->res);
	}
	if (r->ops == NULL || (merge && r->res == NULL)) {
		reply_busy(r, "busy", "BUSY out of memory",
		           FSNP_RETRY_AFTER_MS);
		fsnp_req_complete(r);
		return;
	}
	charge(r, n * (sizeof *r->ops + sizeof *r->res));
	/* One extra count keeps r alive while parts may finish inside
	 * fsnp_server_submit. */
	r->pending = n + 1;
	for (uint32_t i = 0; i < n; i++) {
		r->ops[i].req = r;
		r->ops[i].part = i;
		fsnp_server_submit(r->srv, &r->ops[i]);
	}
	if (--r->pending == 0) {
		plan_finish(r);
	}
}

void fsnp_exec_foc_poll(struct fsnp_req *r)
{
	if (r->flow != NULL) {
		fsnp_flow_poll(r);
		return;
	}
	if (r->slot_lent) {
		r->slot_lent = false;
		r->srv->executions++;
	}
	r->waiting = false;
	r->pending = 1;
	wbuf_reset(&r->reply);
	fsnp_server_submit(r->srv, &r->ops[0]);
}

void fsnp_exec_foc_wake(struct fsnp_req *r, bool ok, const uint8_t *value,
                        size_t vlen)
{
	struct fsnp_writer w;
	r->waiting = false;
	wbuf_reset(&r->reply);
	fsnp_w_init(&w, &r->reply);
	if (ok) {
		fsnp_w_status(&w, FSNP_STATUS_OK);
		fsnp_w_array_begin(&w);
		fsnp_w_str(&w, "hit");
		fsnp_w_bin(&w, value, vlen);
		fsnp_w_array_end(&w);
		fsnp_w_finish(&w);
	} else {
		char msg[FSNP_CMD_MSG_MAX];
		size_t n = vlen < sizeof msg - 1 ? vlen : sizeof msg - 1;
		memcpy(msg, value, n);
		msg[n] = '\0';
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "error", msg, false, 0);
	}
	finish_reply(r);
	fsnp_req_complete(r);
}

static void cmd_ctx(struct fsnp_req *r, struct fsnp_cmd_ctx *ctx, char *token,
                    uint16_t opcode)
{
	/* Only a fetch-or-compute lease needs a token (getrandom). */
	if (opcode == FSNP_OP_FETCH_OR_COMPUTE ||
	    opcode == FSNP_OP_COMMAND_EXEC) {
		fsnp_server_token(r->srv, token);
	} else {
		token[0] = '\0';
	}
	ctx->data_groups = r->srv->data_groups;
	ctx->max_items = (uint32_t)lim(r)->max_value_items;
	ctx->foc_token = token;
	ctx->scan_cursors = r->srv->scan_cursors;
}

static void account_plan(struct fsnp_req *r)
{
	size_t n = r->plan.n_parts * sizeof *r->plan.parts;
	for (uint32_t i = 0; i < r->plan.n_parts; i++) {
		n += r->plan.parts[i].len + r->plan.parts[i].n * 4;
	}
	charge(r, n);
}

/* A planned GET's row will be read after the read barrier, later in this
 * loop turn or the next: start loading its row cache slot now, so that
 * reading it then costs no cache miss. */
static void prefetch_get(const struct fsnp_req *r)
{
	if (r->plan.op == STORE_OP_KV_GET && r->plan.n_parts == 1 &&
	    r->plan.key != NULL) {
		struct store_slice k = {r->plan.key, r->plan.key_len};
		store_kv_prefetch(shards_store(r->srv->shards),
		                  r->plan.parts[0].group, k);
	}
}

/* --- Unserved families ------------------------------------------------ */

static void flow_unavailable(struct fsnp_req *r, const char *name)
{
	char msg[256];
	snprintf(msg, sizeof msg,
	         "ERR FerricFlow is not available in this build (%s)", name);
	fsnp_reply_error(r, FSNP_STATUS_ERROR, "flow_unavailable", msg, false,
	                 0);
}

static const char *opname(uint16_t opcode)
{
	const char *n = fsnp_opcode_name(opcode);
	return n != NULL ? n : "?";
}

/* --- COMMAND_EXEC ------------------------------------------------------ */

/* Parses a KV command (by opcode or COMMAND_EXEC) into r->plan; false with
 * the error already in r->reply. */
static bool parse_kv(struct fsnp_req *r, uint16_t opcode,
                     const struct fsnp_val *body)
{
	struct fsnp_cmd_ctx ctx;
	struct fsnp_cmd_err err;
	char token[33];
	int rv;
	cmd_ctx(r, &ctx, token, opcode);
	if (opcode == FSNP_OP_COMMAND_EXEC) {
		struct fsnp_bytes name;
		struct fsnp_val args;
		static const uint8_t empty_arr[] = {FSNP_ARRAY, 0, 0, 0, 0};
		const struct fsnp_cmd_info *info;
		if (fsnp_map_bin(body, "command", &name) != 0) {
			fsnp_reply_error(
			    r, FSNP_STATUS_BAD_REQUEST, "bad_request",
			    "ERR native command must be binary", false, 0);
			return false;
		}
		if (fsnp_map_get(body, "args", &args) != 0) {
			fsnp_value_decode(empty_arr, sizeof empty_arr, NULL,
			                  &args, NULL);
		} else if (args.tag != FSNP_ARRAY) {
			fsnp_reply_error(
			    r, FSNP_STATUS_BAD_REQUEST, "bad_request",
			    "ERR native field args must be a list", false, 0);
			return false;
		}
		info = fsnp_cmd_by_name(name.ptr, name.len);
		if (info == NULL) {
			char msg[200];
			snprintf(msg, sizeof msg, "ERR unknown command '%.*s'",
			         (int)(name.len < 64 ? name.len : 64),
			         (const char *)name.ptr);
			fsnp_reply_error(r, FSNP_STATUS_ERROR, "error", msg,
			                 false, 0);
			return false;
		}
		char nm[72];
		snprintf(nm, sizeof nm, "%.*s",
		         (int)(name.len < 64 ? name.len : 64),
		         (const char *)name.ptr);
		switch (info->kind) {
		case FSNP_CMD_FLOW:
			if (strcasecmp(nm, "FLOW.QUERY.INDEXES") == 0) {
				fsnp_flow_query_indexes(r, &args);
			} else {
				flow_unavailable(r, nm);
			}
			return false;
		case FSNP_CMD_ADMIN:
			fsnp_admin_exec(r, name.ptr, name.len, &args);
			return false;
		case FSNP_CMD_CONTROL:
			if (r->parent != NULL) {
				fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST,
				                 "bad_request",
				                 "ERR native pipeline cannot "
				                 "contain control commands",
				                 false, 0);
			} else {
				fsnp_control_exec(r, info, &args);
			}
			return false;
		default:
			break;
		}
		rv = info->store_op == STORE_OP_ACL_LIST
		         ? fsnp_acl_exec(r, &args, &err)
		         : fsnp_cmd_parse_args(info, &args, &ctx, &r->plan,
		                               &err);
		if (rv > 0) {
			return false;
		}
	} else {
		rv = fsnp_cmd_parse_body(opcode, body, &ctx, &r->plan, &err);
	}
	if (rv != 0) {
		reply_cmd_err(r, &err);
		return false;
	}
	account_plan(r);
	return true;
}

/* --- PIPELINE --------------------------------------------------------------
 */

static struct fsnp_req *item_new(struct fsnp_req *p, uint32_t index,
                                 uint16_t opcode, uint32_t lane,
                                 uint64_t request_id)
{
	struct fsnp_req *it = req_new(p->srv, lane, opcode, request_id);
	if (it == NULL) {
		return NULL;
	}
	it->parent = p;
	it->index = index;
	it->deadline_ms = p->deadline_ms;
	p->items[index] = it;
	return it;
}

static void item_value(const struct fsnp_req *it, uint16_t *status,
                       struct fsnp_val *v)
{
	static const uint8_t nil[] = {FSNP_NIL};
	*status = it->reply.len >= 2 ? wire_load_u16(it->reply.data)
	                             : FSNP_STATUS_ERROR;
	if (it->reply.len < 3 ||
	    fsnp_value_decode(it->reply.data + 2, it->reply.len - 2, NULL, v,
	                      NULL) != 0) {
		fsnp_value_decode(nil, sizeof nil, NULL, v, NULL);
	}
}

static void pipeline_reply(struct fsnp_req *p)
{
	struct fsnp_writer w;
	bool all_ok = true;
	uint16_t st;
	struct fsnp_val v;

	for (uint32_t i = 0; i < p->n_items; i++) {
		item_value(p->items[i], &st, &v);
		all_ok = all_ok && st == FSNP_STATUS_OK;
	}
	wbuf_reset(&p->reply);
	fsnp_w_init(&w, &p->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_array_begin(&w);
	for (uint32_t i = 0; i < p->n_items; i++) {
		struct fsnp_req *it = p->items[i];
		item_value(it, &st, &v);
		if (p->pipe_format == FSNP_PIPE_VALUES && all_ok) {
			fsnp_w_val(&w, &v);
		} else if (p->pipe_format == FSNP_PIPE_MAPS) {
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "opcode");
			fsnp_w_i64(&w, it->opcode);
			fsnp_w_key(&w, "request_id");
			fsnp_w_u64(&w, it->request_id);
			fsnp_w_key(&w, "lane_id");
			fsnp_w_i64(&w, it->lane_id);
			fsnp_w_key(&w, "status");
			fsnp_w_str(&w, fsnp_status_name(st));
			fsnp_w_key(&w, "value");
			fsnp_w_val(&w, &v);
			fsnp_w_map_end(&w);
		} else {
			fsnp_w_array_begin(&w);
			fsnp_w_str(&w, fsnp_status_name(st));
			fsnp_w_val(&w, &v);
			fsnp_w_array_end(&w);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_finish(&w);
	finish_reply(p);
}

static void pipeline_item_done(struct fsnp_req *p)
{
	if (--p->pending == 0) {
		pipeline_reply(p);
		fsnp_req_complete(p);
	}
}

static void pipeline_fail(struct fsnp_req *p, const char *msg)
{
	fsnp_reply_error(p, FSNP_STATUS_BAD_REQUEST, "bad_request", msg, false,
	                 0);
	fsnp_req_complete(p);
}

static bool pipeline_alloc(struct fsnp_req *p, uint32_t n)
{
	if (n > lim(p)->max_pipeline_commands) {
		pipeline_fail(p, "ERR native pipeline exceeds max commands");
		return false;
	}
	if (n > 0) {
		p->items = calloc(n, sizeof *p->items);
		if (p->items == NULL) {
			reply_busy(p, "busy", "BUSY out of memory",
			           FSNP_RETRY_AFTER_MS);
			fsnp_req_complete(p);
			return false;
		}
		charge(p, n * sizeof *p->items);
	}
	p->n_items = n;
	return true;
}

/* Executes every item (already parsed); items that failed parsing are
 * done already. */
static void pipeline_run(struct fsnp_req *p, bool same_shard)
{
	if (same_shard) {
		uint32_t group = 0;
		for (uint32_t i = 0; i < p->n_items; i++) {
			const struct fsnp_plan *pl = &p->items[i]->plan;
			for (uint32_t k = 0; k < pl->n_parts; k++) {
				if (group != 0 && pl->parts[k].group != group) {
					pipeline_fail(p,
					              "ERR native same_shard "
					              "pipeline contains "
					              "multiple shards");
					return;
				}
				group = pl->parts[k].group;
			}
		}
	}
	p->pending = p->n_items + 1;
	for (uint32_t i = 0; i < p->n_items; i++) {
		struct fsnp_req *it = p->items[i];
		if (it->done) {
			p->pending--;
		} else if (it->flow != NULL) {
			fsnp_flow_start(it);
		} else {
			run_plan(it);
		}
	}
	pipeline_item_done(p);
}

static bool flow_command(const struct fsnp_val *body, uint16_t *opcode,
                         struct fsnp_val *args);

static void exec_pipeline_typed(struct fsnp_req *p, const struct fsnp_val *b)
{
	struct fsnp_bytes atom = {(const uint8_t *)"none", 4}, ret;
	struct fsnp_val cmds, item, body, v;
	struct fsnp_iter iter;
	bool same_shard;
	uint32_t i = 0;

	if (fsnp_map_get(b, "atomicity", &v) == 0) {
		if (v.tag != FSNP_BIN) {
			pipeline_fail(p, "ERR native field atomicity must be "
			                 "binary");
			return;
		}
		atom = v.as.bin;
	}
	if (!fsnp_bytes_eq(atom, "none") && !fsnp_bytes_eq(atom, "per_shard") &&
	    !fsnp_bytes_eq(atom, "same_shard")) {
		char msg[160];
		snprintf(msg, sizeof msg,
		         "ERR native unsupported pipeline atomicity %.*s",
		         (int)(atom.len < 64 ? atom.len : 64),
		         (const char *)atom.ptr);
		pipeline_fail(p, msg);
		return;
	}
	same_shard = fsnp_bytes_eq(atom, "same_shard");
	p->pipe_format = FSNP_PIPE_MAPS;
	if (fsnp_map_bin(b, "return", &ret) == 0 &&
	    (fsnp_bytes_eq(ret, "pairs") || fsnp_bytes_eq(ret, "compact"))) {
		/* No compact pipeline codec is advertised: pairs. */
		p->pipe_format = FSNP_PIPE_PAIRS;
	}
	if (fsnp_map_array(b, "commands", &cmds) != 0) {
		pipeline_fail(p, "ERR native pipeline requires commands list");
		return;
	}
	if (!pipeline_alloc(p, cmds.as.count)) {
		return;
	}
	/* Validate the structure first: a malformed entry fails the whole
	 * pipeline before anything runs. */
	fsnp_iter_init(&iter, &cmds);
	while (fsnp_iter_next(&iter, NULL, &item)) {
		int64_t op;
		if (item.tag != FSNP_MAP ||
		    fsnp_map_i64(&item, "opcode", &op) ||
		    fsnp_map_get(&item, "body", &body) != 0 || op < 0 ||
		    op > 0xFFFF) {
			pipeline_fail(p, "ERR native pipeline commands require "
			                 "opcode and body");
			return;
		}
		if (op < FSNP_OP_COMMAND_EXEC ||
		    fsnp_opcode_is_control((uint16_t)op)) {
			pipeline_fail(p, "ERR native pipeline cannot contain "
			                 "control commands");
			return;
		}
	}
	fsnp_iter_init(&iter, &cmds);
	while (fsnp_iter_next(&iter, NULL, &item)) {
		int64_t op = 0, lane = p->lane_id;
		uint64_t rid = i + 1;
		static const uint8_t empty_map[] = {FSNP_MAP, 0, 0, 0, 0};
		fsnp_map_i64(&item, "opcode", &op);
		fsnp_map_get(&item, "body", &body);
		fsnp_map_i64(&item, "lane_id", &lane);
		fsnp_map_u64(&item, "request_id", &rid);
		if (body.tag != FSNP_MAP) {
			fsnp_value_decode(empty_map, sizeof empty_map, NULL,
			                  &body, NULL);
		}
		struct fsnp_req *it =
		    item_new(p, i, (uint16_t)op, (uint32_t)lane, rid);
		if (it == NULL) {
			p->n_items = i;
			reply_busy(p, "busy", "BUSY out of memory",
			           FSNP_RETRY_AFTER_MS);
			fsnp_req_complete(p);
			return;
		}
		i++;
		const struct fsnp_cmd_info *info =
		    fsnp_cmd_by_opcode((uint16_t)op);
		uint16_t fop;
		struct fsnp_val fargs;
		if (op == FSNP_OP_COMMAND_EXEC &&
		    flow_command(&body, &fop, &fargs)) {
			/* Started with the others in pipeline_run. */
			if (fsnp_flow_prepare_args(it, fop, &fargs) != 0) {
				it->done = true;
			}
		} else if (op == FSNP_OP_COMMAND_EXEC ||
		           (info != NULL && info->kind == FSNP_CMD_KV)) {
			if (!parse_kv(it, (uint16_t)op, &body)) {
				it->done = true;
			}
		} else if (info != NULL && info->kind == FSNP_CMD_FLOW) {
			if (fsnp_flow_prepare(it, (uint16_t)op, body.enc,
			                      body.enc_len) != 0) {
				it->done = true;
			}
		} else if (info != NULL && info->kind == FSNP_CMD_ADMIN) {
			fsnp_admin(it, (uint16_t)op, &body);
			it->done = true;
		} else {
			fsnp_reply_error(it, FSNP_STATUS_BAD_REQUEST,
			                 "bad_request",
			                 "ERR native unknown opcode", false, 0);
			it->done = true;
		}
	}
	pipeline_run(p, same_shard);
}

static void exec_pipeline_compact(struct fsnp_req *p,
                                  const struct fsnp_compact_req *cr)
{
	struct fsnp_compact_iter it;
	struct fsnp_bytes k, v;
	uint32_t i = 0;
	bool set = cr->kind == FSNP_COMPACT_PIPELINE_SET;

	p->pipe_format = cr->values_only ? FSNP_PIPE_VALUES : FSNP_PIPE_MAPS;
	if (!pipeline_alloc(p, cr->count)) {
		return;
	}
	fsnp_compact_iter_init(&it, cr);
	while (fsnp_compact_iter_next(&it, &k, set ? &v : NULL)) {
		struct store_cmd c;
		struct fsnp_cmd_ctx ctx;
		struct fsnp_cmd_err err;
		char token[33];
		uint16_t op = set ? FSNP_OP_SET : FSNP_OP_GET;
		struct fsnp_req *r = item_new(p, i, op, p->lane_id, i + 1);
		if (r == NULL) {
			p->n_items = i;
			reply_busy(p, "busy", "BUSY out of memory",
			           FSNP_RETRY_AFTER_MS);
			fsnp_req_complete(p);
			return;
		}
		i++;
		memset(&c, 0, sizeof c);
		c.op = set ? STORE_OP_KV_SET : STORE_OP_KV_GET;
		c.key.p = k.ptr;
		c.key.len = k.len;
		if (set) {
			c.value.p = v.ptr;
			c.value.len = v.len;
		}
		cmd_ctx(r, &ctx, token, op);
		if (fsnp_cmd_plan_store(op, &c, &ctx, &r->plan, &err) != 0) {
			reply_cmd_err(r, &err);
			r->done = true;
		} else {
			account_plan(r);
			prefetch_get(r);
		}
	}
	pipeline_run(p, false);
}

/* --- Admission and dispatch --------------------------------------------- */

static bool auth_exempt(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_HELLO:
	case FSNP_OP_STARTUP:
	case FSNP_OP_AUTH:
	case FSNP_OP_PING:
	case FSNP_OP_OPTIONS:
	case FSNP_OP_QUIT:
		return true;
	default:
		return false;
	}
}

void fsnp_exec_reject(struct fsnp_conn *c, const struct fsnp_header *h,
                      uint16_t status, const char *code, const char *msg)
{
	struct fsnp_server *s = c->srv;
	struct fsnp_lane *l = fsnp_conn_lane(c, h->lane_id, true);
	struct fsnp_req *r = req_new(s, h->lane_id, h->opcode, h->request_id);
	s->stats.requests++;
	metric_add(s->m_requests, 1);
	s->op_requests[fsnp_metric_slot(h->opcode)]++;
	if (r == NULL) {
		fsnp_conn_close(c);
		return;
	}
	r->t0_ns = uv_hrtime();
	fsnp_reply_error(r, status, code, msg, status == FSNP_STATUS_BUSY,
	                 status == FSNP_STATUS_BUSY ? FSNP_RETRY_AFTER_MS : 0);
	r->trace = (h->flags & FSNP_FLAG_TRACE) != 0 && lim(r)->trace;
	if (r->trace) {
		r->t0_ns = uv_hrtime();
	}
	if (l == NULL) {
		/* No such lane (limits): nothing earlier to wait for. */
		fsnp_conn_send(c, h->lane_id, h->opcode, h->request_id, 0,
		               r->reply.data, r->reply.len);
		if (status == FSNP_STATUS_BUSY) {
			s->stats.busy++;
		} else if (status == FSNP_STATUS_BAD_REQUEST) {
			s->stats.bad_requests++;
		}
		fsnp_req_free(r);
		return;
	}
	lane_push(c, l, r);
	fsnp_req_complete(r);
}

static bool decode_body(struct fsnp_req *r, const struct fsnp_message *m,
                        struct fsnp_val *body)
{
	struct fsnp_limits vl = {
	    .max_items = (uint32_t)lim(r)->max_value_items,
	    .max_depth = (uint32_t)lim(r)->max_value_depth,
	};
	int e = fsnp_value_decode_body(m->body, m->len, &vl, body);
	if (e != 0) {
		fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 fsnp_strerror(e), false, 0);
		return false;
	}
	if (body->tag != FSNP_MAP) {
		/* A well-formed body that is not a map counts as {}. */
		static const uint8_t empty_map[] = {FSNP_MAP, 0, 0, 0, 0};
		fsnp_value_decode(empty_map, sizeof empty_map, NULL, body,
		                  NULL);
	}
	return true;
}

/* A compact (flag 0x02) request: MGET, MSET and PIPELINE SET/GET. */
static void exec_compact(struct fsnp_req *r, const struct fsnp_message *m)
{
	struct fsnp_compact_req cr;
	struct fsnp_cmd_ctx ctx;
	struct fsnp_cmd_err err;
	char token[33];
	int e;
	if (fsnp_flow_compact(r->opcode, m->body, m->len)) {
		fsnp_flow_exec_compact(r, m->body, m->len);
		return;
	}
	e = fsnp_compact_req_decode(r->opcode, m->body, m->len,
	                            (uint32_t)lim(r)->max_value_items, &cr);
	if (e != 0) {
		if (r->opcode == FSNP_OP_FLOW_VALUE_MGET ||
		    (fsnp_opcode_info(r->opcode) != NULL &&
		     fsnp_opcode_info(r->opcode)->group == FSNP_OPG_FLOW)) {
			flow_unavailable(r, opname(r->opcode));
		} else {
			fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST,
			                 "bad_request", fsnp_strerror(e), false,
			                 0);
		}
		fsnp_req_complete(r);
		return;
	}
	switch (cr.kind) {
	case FSNP_COMPACT_PIPELINE_SET:
	case FSNP_COMPACT_PIPELINE_GET:
		exec_pipeline_compact(r, &cr);
		return;
	case FSNP_COMPACT_VALUE_MGET:
		flow_unavailable(r, "FLOW.VALUE.MGET");
		fsnp_req_complete(r);
		return;
	default:
		break;
	}
	cmd_ctx(r, &ctx, token, r->opcode);
	if (fsnp_cmd_parse_compact(&cr, &ctx, &r->plan, &err) != 0) {
		reply_cmd_err(r, &err);
		fsnp_req_complete(r);
		return;
	}
	account_plan(r);
	run_plan(r);
}

/* Whether a COMMAND_EXEC body names a Flow command with an opcode and a
 * list of arguments: *opcode and *args. */
static bool flow_command(const struct fsnp_val *body, uint16_t *opcode,
                         struct fsnp_val *args)
{
	static const uint8_t empty_arr[] = {FSNP_ARRAY, 0, 0, 0, 0};
	const struct fsnp_cmd_info *info;
	struct fsnp_bytes name;
	if (fsnp_map_bin(body, "command", &name) != 0) {
		return false;
	}
	info = fsnp_cmd_by_name(name.ptr, name.len);
	if (info == NULL || info->kind != FSNP_CMD_FLOW ||
	    fsnp_opcode_by_name((const char *)name.ptr, name.len, opcode) !=
	        0) {
		return false;
	}
	if (fsnp_map_get(body, "args", args) != 0) {
		fsnp_value_decode(empty_arr, sizeof empty_arr, NULL, args,
		                  NULL);
	} else if (args->tag != FSNP_ARRAY) {
		return false; /* parse_kv answers it */
	}
	return true;
}

/* COMMAND_EXEC of a Flow command: handed to fsnp_flow.c. False when the
 * body names something else. */
static bool exec_flow_command(struct fsnp_req *r, const struct fsnp_val *body)
{
	uint16_t opcode;
	struct fsnp_val args;
	if (!flow_command(body, &opcode, &args)) {
		return false;
	}
	fsnp_flow_exec_args(r, opcode, &args);
	return true;
}

static void dispatch(struct fsnp_req *r, const struct fsnp_val *body)
{
	const struct fsnp_cmd_info *info;
	switch (r->opcode) {
	case FSNP_OP_PIPELINE:
		exec_pipeline_typed(r, body);
		return;
	case FSNP_OP_COMMAND_EXEC:
		if (exec_flow_command(r, body)) {
			return;
		}
		if (parse_kv(r, r->opcode, body)) {
			prefetch_get(r);
			run_plan(r);
		} else {
			fsnp_req_complete(r);
		}
		return;
	case FSNP_OP_EVENT:
	case FSNP_OP_GOAWAY:
		fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 r->opcode == FSNP_OP_EVENT
		                     ? "ERR native EVENT is server-initiated"
		                     : "ERR native GOAWAY is server-initiated",
		                 false, 0);
		fsnp_req_complete(r);
		return;
	default:
		break;
	}
	info = fsnp_cmd_by_opcode(r->opcode);
	if (info == NULL) {
		fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 fsnp_strerror(FSNP_ERR_UNKNOWN_OPCODE), false,
		                 0);
		fsnp_req_complete(r);
		return;
	}
	switch (info->kind) {
	case FSNP_CMD_CONTROL:
		fsnp_control(r, body);
		fsnp_req_complete(r);
		return;
	case FSNP_CMD_FLOW:
		fsnp_flow_exec(r, r->opcode, body->enc, body->enc_len);
		return;
	case FSNP_CMD_ADMIN:
		fsnp_admin(r, r->opcode, body);
		fsnp_req_complete(r);
		return;
	default:
		if (parse_kv(r, r->opcode, body)) {
			prefetch_get(r);
			run_plan(r);
		} else {
			fsnp_req_complete(r);
		}
		return;
	}
}

/* GET and SET with the usual body ({"key": <binary>} and {"key": <binary>,
 * "value": <binary>}, no deadline, no options): planned from the raw
 * bytes (the general decode and field lookups were ~12 % of a SET's
 * reactor time). False when the body is anything else (then decoded and
 * dispatched as every request is). The value limits are far above what
 * this body uses; tiny configured ones keep the general path, which
 * enforces them. */
static bool kv_fast(struct fsnp_req *r, const struct fsnp_message *m)
{
	struct fsnp_cmd_ctx ctx;
	struct fsnp_cmd_err err;
	char token[33];
	int rv;

	if (lim(r)->max_value_items < 16 || lim(r)->max_value_depth < 16) {
		return false;
	}
	cmd_ctx(r, &ctx, token, r->opcode);
	rv =
	    r->opcode == FSNP_OP_GET
	        ? fsnp_cmd_parse_get_fast(m->body, m->len, &ctx, &r->plan, &err)
	        : fsnp_cmd_parse_set_fast(m->body, m->len, &ctx, &r->plan,
	                                  &err);
	if (rv > 0) {
		return false;
	}
	if (rv < 0) {
		reply_cmd_err(r, &err);
		fsnp_req_complete(r);
		return true;
	}
	account_plan(r);
	prefetch_get(r);
	run_plan(r);
	return true;
}

void fsnp_exec_message(struct fsnp_conn *c, const struct fsnp_message *m)
{
	struct fsnp_server *s = c->srv;
	const struct fsnp_header *h = &m->h;
	struct fsnp_lane *l;
	struct fsnp_req *r;
	struct fsnp_val body;
	struct fsnp_cmd_err err;
	/* One table lookup for both questions. */
	const struct fsnp_opcode_info *oi = fsnp_opcode_info(h->opcode);
	bool control = oi != NULL && oi->group == FSNP_OPG_CONTROL;
	int e = fsnp_opcode_lane_error(oi, h->lane_id);

	if (e != 0) {
		fsnp_exec_reject(c, h, FSNP_STATUS_BAD_REQUEST, "bad_request",
		                 fsnp_strerror(e));
		return;
	}
	l = fsnp_conn_lane(c, h->lane_id, true);
	if (l == NULL) {
		fsnp_exec_reject(c, h, FSNP_STATUS_BUSY, "lane_limit_exceeded",
		                 "BUSY native lane limit exceeded");
		return;
	}
	r = req_new(s, h->lane_id, h->opcode, h->request_id);
	if (r == NULL) {
		fsnp_conn_close(c);
		return;
	}
	s->stats.requests++;
	metric_add(s->m_requests, 1);
	s->op_requests[fsnp_metric_slot(h->opcode)]++;
	r->no_reply = (h->flags & FSNP_FLAG_NO_REPLY) != 0;
	/* The frame check let 0x01 through only with fsnp-trace on. */
	r->trace = (h->flags & FSNP_FLAG_TRACE) != 0 && lim(r)->trace;
	/* For the latency histogram, and traces. */
	r->t0_ns = uv_hrtime();
	lane_push(c, l, r);

	/* Windows and budgets: answered busy, in lane order. */
	if (!control || h->opcode == FSNP_OP_PIPELINE) {
		if (c->inflight >= c->max_inflight_conn) {
			reply_busy(r, "flow_control_window_exhausted",
			           "ERR native connection inflight window "
			           "exhausted",
			           1);
			goto done;
		}
		if (l->inflight >= c->max_inflight_lane) {
			reply_busy(r, "flow_control_window_exhausted",
			           "ERR native lane inflight window exhausted",
			           1);
			goto done;
		}
		if (s->executions >= lim(r)->max_global_executions ||
		    s->session_bytes > lim(r)->max_global_session_bytes) {
			reply_busy(
			    r, "busy",
			    "BUSY server has too many requests in flight",
			    FSNP_RETRY_AFTER_MS);
			goto done;
		}
		r->counted = true;
		s->executions++;
		c->inflight++;
		l->inflight++;
	}
	if (!c->authenticated && !auth_exempt(h->opcode)) {
		fsnp_reply_error(r, FSNP_STATUS_AUTH, "auth",
		                 "NOAUTH Authentication required.", false, 0);
		goto done;
	}
	if (h->flags & FSNP_FLAG_CUSTOM) {
		exec_compact(r, m);
		return;
	}
	if ((h->opcode == FSNP_OP_GET || h->opcode == FSNP_OP_SET) &&
	    kv_fast(r, m)) {
		return;
	}
	if (!decode_body(r, m, &body)) {
		goto done;
	}
	if (fsnp_cmd_deadline(&body, &r->deadline_ms, &err) != 0) {
		reply_cmd_err(r, &err);
		goto done;
	}
	/* FLOW.QUERY answers a past deadline with its own fixed code
	 * (query_deadline_exceeded, fsnp_flow_query.c). */
	if (r->deadline_ms > 0 && r->deadline_ms < fsnp_now_ms(s) &&
	    r->opcode != FSNP_OP_FLOW_QUERY) {
		fsnp_reply_error(r, FSNP_STATUS_ERROR, "deadline_exceeded",
		                 "ERR native request deadline exceeded", false,
		                 0);
		goto done;
	}
	dispatch(r, &body);
	return;
done:
	fsnp_req_complete(r);
}
