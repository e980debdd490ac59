/* FLOW.QUERY over FSNP (opcode 0x0231 and COMMAND_EXEC FLOW.QUERY FQL1
 * <query> name value...): the request is parsed and bound once
 * (flow/fql_parse.h); that prepared query names the partition the ACL
 * check (FLOW.QUERY, FLOW.QUERY.EXPLAIN, or both for EXPLAIN ANALYZE) and
 * the routing use. Static EXPLAIN is answered here from the plan
 * (flow/fql_plan.h) without storage; everything else runs as a Flow store
 * read on the partition's group leader (flow/fql_exec.h), with a cursor's
 * resume position taken out of the verified token first. The group's
 * internal answer becomes ferric.flow.query.result/v1 (typed, or the
 * compact 0xA0 payload on connections that negotiated
 * flow_query_result_v1), a ferric.flow.explain/v1 document, or the fixed
 * FQL error map. Cursors are sealed with the cluster's cursor key (meta
 * group), so any node resumes a cursor another node issued. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "flow/flow.h"
#include "flow/flow_cursor.h"
#include "flow/fql_exec.h"
#include "flow/fql_plan.h"
#include "flow/fql_print.h"
#include "node/fsnp/fsnp_internal.h"
#include "store/result.h"
#include "wire/flow_route.h"
#include "wire/fsnp_fqr.h"
#include "wire/fsnp_opcode.h"

static const char *const usage_keys[FSNP_FQR_USAGES] = {
    "range_seeks",       "range_pages",
    "scanned_entries",   "scanned_bytes",
    "hydrated_records",  "residual_checks",
    "duplicate_entries", "result_records",
    "response_bytes",    "memory_high_water_bytes",
    "wall_time_us"};

/* A request's prepared query (parsed and bound from its body). */
struct prep {
	struct fsnp_val body, params;
	struct fql_query *q;
	struct fql_plan plan;
	struct fql_diag d;
	struct fsnp_bytes part; /* routing: the bound or auto partition */
	struct fsnp_bytes id;   /* a point read's run id */
	bool has_pk;
	int64_t deadline_ms; /* the request's, wall clock ms; 0 none */
	char buf[FLOW_AUTO_PARTITION_MAX];
	uint8_t fp[FLOW_CURSOR_FP_BYTES];
};

static void reply_diag(struct fsnp_req *r, const struct fql_diag *d)
{
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, (uint16_t)fql_code_status(d->code));
	fql_diag_write(d, &w);
	fsnp_w_finish(&w);
}

/* query_no_bounded_plan with its redacted context. */
static void reply_no_plan(struct fsnp_req *r, const struct prep *p)
{
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, (uint16_t)fql_code_status(FQL_QUERY_NO_BOUNDED_PLAN));
	fql_plan_error_write(p->q, &p->plan, &w);
	fsnp_w_finish(&w);
}

static void busy(struct fsnp_req *r)
{
	fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy", "BUSY out of memory",
	                 true, FSNP_RETRY_AFTER_MS);
}

static void prep_free(struct prep *p)
{
	free(p->q);
	p->q = NULL;
}

/* Parses and binds the body; 0, or -1 with p->d set (or q NULL: out of
 * memory). */
static int prep_init(struct prep *p, const uint8_t *body, size_t len)
{
	struct fsnp_val v, dv;
	struct wbuf canon;
	memset(p, 0, sizeof *p);
	p->params.tag = FSNP_NIL;
	if (fsnp_value_decode_body(body, len, NULL, &p->body) != 0 ||
	    p->body.tag != FSNP_MAP) {
		fql_diag_set(&p->d, FQL_INVALID_SYNTAX,
		             "the request must be a map with version and query",
		             NULL);
		return -1;
	}
	if (fsnp_map_get(&p->body, "version", &v) != 0 || v.tag != FSNP_BIN) {
		fql_diag_set(&p->d, FQL_UNSUPPORTED_QUERY_VERSION,
		             "the request needs version FQL1", NULL);
		return -1;
	}
	if (fql_check_version(v.as.bin.ptr, v.as.bin.len, &p->d) != 0) {
		return -1;
	}
	if (fsnp_map_get(&p->body, "query", &v) != 0 || v.tag != FSNP_BIN) {
		fql_diag_set(&p->d, FQL_INVALID_SYNTAX,
		             "the request needs a query text", NULL);
		return -1;
	}
	(void)fsnp_map_get(&p->body, "params", &p->params);
	if (fsnp_map_get(&p->body, "deadline_ms", &dv) == 0 &&
	    fsnp_val_i64(&dv, &p->deadline_ms) != 0) {
		fql_diag_set(&p->d, FQL_INVALID_PARAMETERS,
		             "deadline_ms must be an integer", NULL);
		return -1;
	}
	p->q = malloc(sizeof *p->q);
	if (p->q == NULL) {
		return -1;
	}
	if (fql_parse((const char *)v.as.bin.ptr, v.as.bin.len, p->q, &p->d) !=
	        0 ||
	    fql_bind(p->q, &p->params, &p->d) != 0) {
		return -1;
	}
	fql_plan(p->q, &p->plan);
	{
		struct fsnp_bytes id = {0}, pk = {0};
		const uint8_t *part;
		size_t plen;
		for (uint32_t i = 0; i < p->q->npreds; i++) {
			const struct fql_pred *pr = &p->q->preds[i];
			if (pr->op != FQL_OP_EQ) {
				continue;
			}
			if (pr->field.id == FQL_F_PARTITION_KEY) {
				pk.ptr = pr->v[0].bp;
				pk.len = pr->v[0].blen;
			} else if (pr->field.id == FQL_F_RUN_ID) {
				id.ptr = pr->v[0].bp;
				id.len = pr->v[0].blen;
			}
		}
		flow_route_partition(id.ptr, id.len, pk.ptr, pk.len, p->buf,
		                     &part, &plen);
		p->part.ptr = part;
		p->part.len = plen;
		p->id = id;
		p->has_pk = pk.ptr != NULL;
	}
	wbuf_init(&canon);
	if (fql_exec_canonical(p->q, &canon) != 0) {
		wbuf_free(&canon);
		free(p->q);
		p->q = NULL;
		return -1;
	}
	flow_cursor_fingerprint(canon.data, canon.len, p->fp);
	wbuf_free(&canon);
	return 0;
}

static const char *q_exact(const struct prep *p)
{
	return p->plan.requires_hydration ? "authoritative" : "exact";
}

static void w_quality(struct fsnp_writer *w, const struct prep *p,
                      const char *pagination)
{
	fsnp_w_key(w, "quality");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "exactness");
	fsnp_w_str(w, q_exact(p));
	fsnp_w_key(w, "freshness");
	fsnp_w_str(w, "current");
	fsnp_w_key(w, "coverage");
	fsnp_w_str(w, "complete");
	fsnp_w_key(w, "pagination");
	fsnp_w_str(w, pagination);
	fsnp_w_map_end(w);
}

static void w_usage(struct fsnp_writer *w, const char *key, const uint64_t *u)
{
	fsnp_w_key(w, key);
	fsnp_w_map_begin(w);
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		fsnp_w_key(w, usage_keys[i]);
		fsnp_w_i64(w, (int64_t)u[i]);
	}
	fsnp_w_map_end(w);
}

/* ferric.flow.explain/v1: status planned, rejected (with the diagnostic)
 * or executed (with the actual usage). */
static void w_explain(struct fsnp_writer *w, const struct prep *p,
                      const char *status, const uint64_t *actual,
                      const struct fql_diag *diag)
{
	char fp[65];
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "version");
	fsnp_w_str(w, "ferric.flow.explain/v1");
	fsnp_w_key(w, "query_fingerprint");
	if (fql_print_fingerprint(p->q, fp) != 0) {
		memset(fp, '0', 64);
		fp[64] = '\0';
	}
	fsnp_w_str(w, fp);
	fsnp_w_key(w, "status");
	fsnp_w_str(w, status);
	fsnp_w_key(w, "plan");
	fql_plan_write(p->q, &p->plan, w);
	fsnp_w_key(w, "estimate");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "max_range_seeks");
	fsnp_w_i64(w, p->plan.access == FQL_ACCESS_RANGE && p->plan.multi
	                  ? p->plan.multi->nvals
	                  : 1);
	fsnp_w_key(w, "max_scanned_entries");
	fsnp_w_i64(w, p->plan.access == FQL_ACCESS_RANGE ? FQL_PLAN_SCAN_BUDGET
	                                                 : 1);
	fsnp_w_key(w, "max_result_records");
	fsnp_w_i64(w, p->q->has_limit ? p->q->limit : 1);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "stats");
	fsnp_w_map_begin(w);
	fsnp_w_map_end(w);
	w_quality(w, p,
	          p->q->kind == FQL_K_COLLECTION ? "authenticated_seek"
	                                         : "none");
	fsnp_w_key(w, "bounds");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "limit");
	fsnp_w_i64(w, p->q->has_limit ? p->q->limit : 1);
	fsnp_w_key(w, "scan_budget");
	fsnp_w_i64(w, FQL_PLAN_SCAN_BUDGET);
	fsnp_w_key(w, "max_ranges");
	fsnp_w_i64(w, FQL_PLAN_MAX_RANGES);
	fsnp_w_key(w, "unbounded_scan");
	fsnp_w_bool(w, false);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "pressure");
	fsnp_w_map_begin(w);
	fsnp_w_map_end(w);
	fsnp_w_key(w, "decision");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "admitted");
	fsnp_w_bool(w, p->plan.access != FQL_ACCESS_NONE);
	fsnp_w_key(w, "shape");
	fsnp_w_str(w, fql_shape_name(p->plan.shape));
	fsnp_w_map_end(w);
	fsnp_w_key(w, "alternatives");
	fsnp_w_array_begin(w);
	fsnp_w_array_end(w);
	fsnp_w_key(w, "actual");
	if (actual != NULL) {
		fsnp_w_map_begin(w);
		for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
			fsnp_w_key(w, usage_keys[i]);
			fsnp_w_i64(w, (int64_t)actual[i]);
		}
		fsnp_w_map_end(w);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "diagnostic");
	if (diag != NULL) {
		fql_diag_write(diag, w);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_map_end(w);
}

static void reply_explain(struct fsnp_req *r, const struct prep *p,
                          const char *status, const uint64_t *actual,
                          const struct fql_diag *diag)
{
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	w_explain(&w, p, status, actual, diag);
	if (fsnp_w_finish(&w) != 0 || r->reply.oom) {
		busy(r);
	}
}

/* --- Start -------------------------------------------------------------- */

static void add_group_body(struct fsnp_writer *w, const struct prep *p,
                           const uint8_t *resume, size_t rlen)
{
	struct fsnp_val qv;
	fsnp_w_map_begin(w);
	fsnp_map_get(&p->body, "query", &qv);
	fsnp_w_key(w, "query");
	fsnp_w_val(w, &qv);
	if (p->params.tag != FSNP_NIL) {
		fsnp_w_key(w, "params");
		fsnp_w_val(w, &p->params);
	}
	if (rlen > 0) {
		fsnp_w_key(w, "resume");
		fsnp_w_bin(w, resume, rlen);
	}
	if (p->deadline_ms > 0) {
		fsnp_w_key(w, "deadline_ms");
		fsnp_w_i64(w, p->deadline_ms);
	}
	fsnp_w_map_end(w);
}

void fsnp_flow_query_start(struct fsnp_req *r, const uint8_t *body, size_t len)
{
	struct prep p;
	uint8_t key[FLOW_CURSOR_KEY_BYTES];
	uint8_t resume[FLOW_CURSOR_RESUME_MAX];
	size_t rlen = 0;
	struct flow_cmd_meta meta = {
	    .max_clock_skew_ms = r->srv->lim.flow_clock_skew_ms, .seed = 0};
	struct flow_err err;
	struct fsnp_writer w;
	struct wbuf b;
	uint8_t *cmd = NULL;
	size_t n = 0, acl_len;
	const uint8_t *acl_key;
	char akey[24];

	if (prep_init(&p, body, len) != 0) {
		if (p.q == NULL && p.d.code == FQL_OK) {
			busy(r);
		} else {
			reply_diag(r, &p.d);
		}
		goto done;
	}
	acl_key = p.part.ptr;
	acl_len = p.part.len;
	if (!p.has_pk) {
		/* A point read's auto partition, named for ACLs as every
		 * Flow command names it ("fa:<bucket>"). */
		int kn = snprintf(akey, sizeof akey, "fa:%u",
		                  flow_route_bucket(p.id.ptr, p.id.len));
		acl_key = (const uint8_t *)akey;
		acl_len = (size_t)kn;
	}
	if (!fsnp_acl_check_flow_query(r, acl_key, acl_len,
	                               p.q->mode != FQL_EXECUTE,
	                               p.q->mode == FQL_EXPLAIN_ANALYZE)) {
		goto done;
	}
	if (p.deadline_ms > 0 &&
	    (uint64_t)p.deadline_ms <= fsnp_now_ms(r->srv)) {
		fql_diag_set(&p.d, FQL_QUERY_DEADLINE_EXCEEDED, NULL, NULL);
		reply_diag(r, &p.d);
		goto done;
	}
	if (p.q->mode == FQL_EXPLAIN) {
		if (p.plan.access == FQL_ACCESS_NONE) {
			fql_plan_diag(&p.plan, &p.d);
			reply_explain(r, &p, "rejected", NULL, &p.d);
		} else {
			reply_explain(r, &p, "planned", NULL, NULL);
		}
		goto done;
	}
	if (p.plan.access == FQL_ACCESS_NONE) {
		fql_plan_diag(&p.plan, &p.d);
		if (p.q->mode == FQL_EXPLAIN_ANALYZE) {
			reply_explain(r, &p, "rejected", NULL, &p.d);
		} else {
			reply_no_plan(r, &p);
		}
		goto done;
	}
	if (p.q->has_cursor) {
		enum flow_cursor_status st;
		if (shards_flow_cursor_key(r->srv->shards, key) != 0) {
			fql_diag_set(&p.d, FQL_QUERY_STORAGE_UNAVAILABLE,
			             "the cursor key is not known yet", NULL);
			reply_diag(r, &p.d);
			goto done;
		}
		st = flow_cursor_decode(key, (const char *)p.q->cursor.bp,
		                        p.q->cursor.blen, p.fp,
		                        fsnp_now_ms(r->srv), resume, &rlen);
		if (st != FLOW_CURSOR_OK ||
		    (rlen > 0 && !fql_exec_tail_ok(resume, rlen))) {
			const char *code = flow_cursor_code(
			    st != FLOW_CURSOR_OK ? st : FLOW_CURSOR_MALFORMED);
			int c = fql_code_lookup(code, strlen(code));
			fql_diag_set(
			    &p.d,
			    c > 0 ? (enum fql_code)c : FQL_QUERY_CURSOR_INVALID,
			    flow_cursor_detail(st != FLOW_CURSOR_OK
			                           ? st
			                           : FLOW_CURSOR_MALFORMED),
			    NULL);
			fql_diag_at(&p.d, p.q->text, p.q->text_len,
			            p.q->cursor.at);
			reply_diag(r, &p.d);
			goto done;
		}
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	add_group_body(&w, &p, resume, rlen);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_cmd_encode(FSNP_OP_FLOW_QUERY, b.data, b.len, &meta, &cmd, &n,
	                    &err) != 0) {
		wbuf_free(&b);
		busy(r);
		goto done;
	}
	wbuf_free(&b);
	r->plan.parts = &r->plan.one;
	r->plan.n_parts = 1;
	if (r->plan.one.cmd != NULL && r->plan.one.cmd != r->plan.one_cmd) {
		free(r->plan.one.cmd);
	}
	r->plan.one.cmd = cmd;
	r->plan.one.len = n;
	r->plan.one.group = shards_group_of_slot(
	    r->srv->shards, flow_route_slot(p.part.ptr, p.part.len));
	r->plan.one.read = true;
	r->ops = &r->op1;
	r->op1.req = r;
	r->op1.part = 0;
	r->pending = 1;
	prep_free(&p);
	fsnp_server_submit(r->srv, &r->op1);
	return;
done:
	prep_free(&p);
	fsnp_exec_finish(r);
}

/* --- Results ------------------------------------------------------------ */

/* The internal answer's usage into u (response_bytes left 0). */
static void read_usage(const struct fsnp_val *ans, uint64_t *u)
{
	struct fsnp_val m;
	memset(u, 0, FSNP_FQR_USAGES * sizeof *u);
	if (fsnp_map_get(ans, "usage", &m) != 0) {
		return;
	}
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		int64_t v = 0;
		if (fsnp_map_i64(&m, usage_keys[i], &v) == 0 && v > 0) {
			u[i] = (uint64_t)v;
		}
	}
}

/* The typed result envelope (response_bytes as given). */
static void w_result(struct fsnp_writer *w, const struct prep *p,
                     const struct fsnp_val *ans, const uint64_t *u,
                     const char *cursor, size_t clen)
{
	struct fsnp_val recs;
	bool has_more = cursor != NULL;
	int64_t count = 0;
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "version");
	fsnp_w_str(w, FSNP_FQR_CONTRACT);
	if (p->plan.access == FQL_ACCESS_COUNTER) {
		fsnp_map_i64(ans, "count", &count);
		fsnp_w_key(w, "result");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "kind");
		fsnp_w_str(w, "count");
		fsnp_w_key(w, "value");
		fsnp_w_i64(w, count);
		fsnp_w_map_end(w);
		w_quality(w, p, "none");
	} else {
		fsnp_w_key(w, "records");
		if (fsnp_map_get(ans, "records", &recs) == 0) {
			fsnp_w_val(w, &recs);
		} else {
			fsnp_w_array_begin(w);
			fsnp_w_array_end(w);
		}
		fsnp_w_key(w, "page");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "has_more");
		fsnp_w_bool(w, has_more);
		fsnp_w_key(w, "cursor");
		if (has_more) {
			fsnp_w_bin(w, cursor, clen);
		} else {
			fsnp_w_nil(w);
		}
		fsnp_w_map_end(w);
		w_quality(w, p,
		          p->q->kind == FQL_K_POINT ? "none"
		          : has_more                ? "authenticated_seek"
		                                    : "complete");
	}
	w_usage(w, "usage", u);
	fsnp_w_map_end(w);
}

/* The typed reply, usage.response_bytes the value's own encoded size
 * (an i64 is fixed-width, so one measuring pass fixes it). */
static int typed_reply(struct wbuf *out, const struct prep *p,
                       const struct fsnp_val *ans, uint64_t *u,
                       const char *cursor, size_t clen)
{
	struct fsnp_writer w;
	wbuf_reset(out);
	fsnp_w_init(&w, out);
	w_result(&w, p, ans, u, cursor, clen);
	if (fsnp_w_finish(&w) != 0 || out->oom) {
		return -1;
	}
	u[FSNP_FQR_RESPONSE_BYTES] = out->len;
	wbuf_reset(out);
	fsnp_w_init(&w, out);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	w_result(&w, p, ans, u, cursor, clen);
	return fsnp_w_finish(&w) != 0 || out->oom ? -1 : 0;
}

static uint8_t code_of(unsigned quality, const char *name)
{
	int c = fsnp_fqr_quality_code(quality, name, strlen(name));
	return c < 0 ? 0 : (uint8_t)c;
}

/* The compact 0xA0 reply; -1 when the result does not fit the codec. */
static int compact_reply(struct wbuf *out, const struct prep *p,
                         const struct fsnp_val *ans, const uint64_t *u,
                         const char *cursor, size_t clen)
{
	struct fsnp_fqr meta;
	struct fsnp_fqr_writer fw;
	struct fsnp_writer w;
	struct fsnp_val recs, rec, v;
	struct fsnp_iter it, jt;
	struct fsnp_bytes k;
	bool has_more = cursor != NULL;
	int64_t count = 0;

	memset(&meta, 0, sizeof meta);
	memcpy(meta.usage, u, sizeof meta.usage);
	meta.usage[FSNP_FQR_RESPONSE_BYTES] = 0;
	meta.quality[FSNP_FQR_EXACTNESS] =
	    code_of(FSNP_FQR_EXACTNESS, q_exact(p));
	meta.quality[FSNP_FQR_FRESHNESS] =
	    code_of(FSNP_FQR_FRESHNESS, "current");
	meta.quality[FSNP_FQR_COVERAGE] =
	    code_of(FSNP_FQR_COVERAGE, "complete");
	wbuf_reset(out);
	fsnp_w_init(&w, out);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (p->plan.access == FQL_ACCESS_COUNTER) {
		fsnp_map_i64(ans, "count", &count);
		meta.kind = FSNP_FQR_COUNT;
		meta.count = (uint64_t)count;
		meta.quality[FSNP_FQR_PAGINATION] =
		    code_of(FSNP_FQR_PAGINATION, "none");
		if (fsnp_fqr_w_begin(&fw, &w, &meta,
		                     FSNP_FQR_MAX_RECORDS_DEFAULT) != 0) {
			return -1;
		}
		return fsnp_fqr_w_end(&fw) != 0 || out->oom ? -1 : 0;
	}
	meta.kind = FSNP_FQR_RECORDS;
	meta.has_more = has_more;
	if (has_more) {
		meta.cursor.ptr = (const uint8_t *)cursor;
		meta.cursor.len = clen;
	}
	meta.quality[FSNP_FQR_PAGINATION] =
	    code_of(FSNP_FQR_PAGINATION, p->q->kind == FQL_K_POINT ? "none"
	                                 : has_more ? "authenticated_seek"
	                                            : "complete");
	if (fsnp_fqr_w_begin(&fw, &w, &meta, FSNP_FQR_MAX_RECORDS_DEFAULT) !=
	        0 ||
	    fsnp_map_get(ans, "records", &recs) != 0) {
		return -1;
	}
	fsnp_iter_init(&it, &recs);
	while (fsnp_iter_next(&it, NULL, &rec)) {
		if (fsnp_fqr_w_record_begin(&fw) != 0) {
			return -1;
		}
		fsnp_iter_init(&jt, &rec);
		while (fsnp_iter_next(&jt, &k, &v)) {
			int bit =
			    fsnp_fqr_field_bit((const char *)k.ptr, k.len);
			if (bit < 0 ||
			    fsnp_fqr_w_field(&fw, (unsigned)bit) != 0) {
				return -1;
			}
			fsnp_w_val(&w, &v);
		}
		if (fsnp_fqr_w_record_end(&fw) != 0) {
			return -1;
		}
	}
	return fsnp_fqr_w_end(&fw) != 0 || out->oom ? -1 : 0;
}

void fsnp_flow_query_done(struct fsnp_req *r, const uint8_t *body, size_t len,
                          int status, const uint8_t *res, size_t rlen)
{
	struct prep p;
	struct fsnp_val ans, e;
	uint64_t u[FSNP_FQR_USAGES];
	struct wbuf cur;
	bool has_more = false;
	struct fsnp_val rs;
	const struct fsnp_conn *c = r->conn;

	wbuf_init(&cur);
	if (prep_init(&p, body, len) != 0) {
		/* Parsed once already: only memory can fail here. */
		busy(r);
		goto out;
	}
	if (status != SHARDS_OK) {
		fql_diag_set(&p.d, FQL_QUERY_STORAGE_UNAVAILABLE,
		             "the partition's group could not be read", NULL);
		reply_diag(r, &p.d);
		goto out;
	}
	if (rlen < 3 || res[0] != STORE_RESULT_VERSION || res[1] != STORE_OK ||
	    fsnp_value_decode(res + 2, rlen - 2, NULL, &ans, NULL) != 0 ||
	    ans.tag != FSNP_MAP) {
		fql_diag_set(&p.d, FQL_QUERY_ENGINE_FAILURE, NULL, NULL);
		reply_diag(r, &p.d);
		goto out;
	}
	if (fsnp_map_get(&ans, "error", &e) == 0) {
		struct fsnp_bytes code = {0};
		int cd;
		fsnp_map_bin(&e, "code", &code);
		cd = fql_code_lookup((const char *)code.ptr, code.len);
		if (p.q->mode == FQL_EXPLAIN_ANALYZE && cd > 0) {
			fql_diag_set(&p.d, (enum fql_code)cd, NULL, NULL);
			reply_explain(r, &p, "rejected", NULL, &p.d);
			goto out;
		}
		wbuf_reset(&r->reply);
		r->custom = false;
		wbuf_put_u16(&r->reply,
		             (uint16_t)(cd > 0 ? fql_code_status((unsigned)cd)
		                               : FSNP_STATUS_ERROR));
		wbuf_append(&r->reply, e.enc, e.enc_len);
		goto out;
	}
	read_usage(&ans, u);
	if (fsnp_map_get(&ans, "has_more", &e) == 0 && e.tag == FSNP_TRUE &&
	    fsnp_map_get(&ans, "resume", &rs) == 0 && rs.tag == FSNP_BIN) {
		uint8_t key[FLOW_CURSOR_KEY_BYTES],
		    nonce[FLOW_CURSOR_NONCE_BYTES];
		if (shards_flow_cursor_key(r->srv->shards, key) != 0 ||
		    getrandom(nonce, sizeof nonce, 0) !=
		        (ssize_t)sizeof nonce ||
		    flow_cursor_encode(key, nonce, p.fp, fsnp_now_ms(r->srv),
		                       r->srv->lim.flow_cursor_ttl_ms,
		                       rs.as.bin.ptr, rs.as.bin.len,
		                       &cur) != 0 ||
		    cur.oom) {
			fql_diag_set(&p.d, FQL_QUERY_STORAGE_UNAVAILABLE,
			             "a cursor could not be issued", NULL);
			reply_diag(r, &p.d);
			goto out;
		}
		has_more = true;
	}
	if (p.q->mode == FQL_EXPLAIN_ANALYZE) {
		/* What the result would have cost on the wire, measured. */
		struct wbuf tmp;
		wbuf_init(&tmp);
		typed_reply(&tmp, &p, &ans, u,
		            has_more ? (char *)cur.data : NULL, cur.len);
		wbuf_free(&tmp);
		reply_explain(r, &p, "executed", u, NULL);
		goto out;
	}
	if (c != NULL && (c->codecs & FSNP_CODEC_FLOW_QUERY) && !c->zlib &&
	    r->parent == NULL) {
		struct wbuf cb;
		wbuf_init(&cb);
		if (compact_reply(&cb, &p, &ans, u,
		                  has_more ? (char *)cur.data : NULL,
		                  cur.len) == 0) {
			wbuf_free(&r->reply);
			r->reply = cb;
			r->custom = true;
			r->srv->stats.flow_query_compact++;
			metric_add(r->srv->m_flow_query_compact, 1);
			goto out;
		}
		wbuf_free(&cb);
	}
	if (typed_reply(&r->reply, &p, &ans, u,
	                has_more ? (char *)cur.data : NULL, cur.len) != 0) {
		busy(r);
	}
	r->custom = false;
out:
	wbuf_free(&cur);
	prep_free(&p);
	fsnp_exec_finish(r);
}

/* --- COMMAND_EXEC ------------------------------------------------------- */

/* The field a parameter is first used with (NULL: not used). */
static const struct fql_field *param_field(const struct fql_query *q,
                                           struct fsnp_bytes name)
{
	for (uint32_t i = 0; i < q->npreds; i++) {
		const struct fql_pred *pr = &q->preds[i];
		for (uint32_t k = 0; k < pr->nvals; k++) {
			const struct fql_value *v = &pr->v[k];
			if (v->kind == FQL_V_PARAM && v->len == name.len &&
			    memcmp(v->s, name.ptr, name.len) == 0) {
				return &pr->field;
			}
		}
	}
	return NULL;
}

/* A textual parameter typed for its field: integer fields take a signed
 * decimal integer, everything else stays as given. */
static void ce_param(struct fsnp_writer *w, const struct fql_field *f,
                     const struct fsnp_val *v)
{
	char t[32], *end;
	if (f != NULL && fql_field_type(f->id) == FQL_FT_INTEGER &&
	    v->tag == FSNP_BIN && v->as.bin.len > 0 &&
	    v->as.bin.len < sizeof t) {
		long long x;
		memcpy(t, v->as.bin.ptr, v->as.bin.len);
		t[v->as.bin.len] = '\0';
		x = strtoll(t, &end, 10);
		if (*end == '\0') {
			fsnp_w_i64(w, x);
			return;
		}
	}
	fsnp_w_val(w, v);
}

int fsnp_flow_query_prepare_args(struct fsnp_req *r,
                                 const struct fsnp_val *args)
{
	struct fsnp_val a[2], nm, v;
	struct fsnp_iter it;
	struct fql_query *q = NULL;
	struct fql_diag d;
	struct fsnp_writer w;
	struct wbuf b;
	bool parsed;
	int rv;

	if (args->tag != FSNP_ARRAY || args->as.count < 2 ||
	    args->as.count % 2 != 0) {
		fsnp_reply_error(
		    r, FSNP_STATUS_ERROR, "error",
		    "ERR wrong number of arguments for 'flow.query' "
		    "command",
		    false, 0);
		return -1;
	}
	fsnp_iter_init(&it, args);
	fsnp_iter_next(&it, NULL, &a[0]);
	fsnp_iter_next(&it, NULL, &a[1]);
	q = malloc(sizeof *q);
	if (q == NULL) {
		busy(r);
		return -1;
	}
	parsed =
	    a[1].tag == FSNP_BIN && fql_parse((const char *)a[1].as.bin.ptr,
	                                      a[1].as.bin.len, q, &d) == 0;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "version");
	fsnp_w_val(&w, &a[0]);
	fsnp_w_key(&w, "query");
	fsnp_w_val(&w, &a[1]);
	if (args->as.count > 2) {
		fsnp_w_key(&w, "params");
		fsnp_w_map_begin(&w);
		while (fsnp_iter_next(&it, NULL, &nm) &&
		       fsnp_iter_next(&it, NULL, &v)) {
			if (nm.tag != FSNP_BIN) {
				/* a name that is not text: the binder says so
				 */
				fsnp_w_key(&w, "");
			} else {
				fsnp_w_key_bin(&w, nm.as.bin.ptr,
				               nm.as.bin.len);
			}
			ce_param(&w,
			         parsed && nm.tag == FSNP_BIN
			             ? param_field(q, nm.as.bin)
			             : NULL,
			         &v);
		}
		fsnp_w_map_end(&w);
	}
	fsnp_w_map_end(&w);
	free(q);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		wbuf_free(&b);
		busy(r);
		return -1;
	}
	rv = fsnp_flow_prepare(r, FSNP_OP_FLOW_QUERY, b.data, b.len);
	wbuf_free(&b);
	return rv;
}
