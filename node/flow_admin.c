/* The admin API's Flow views; see flow_admin.h. */
#include "node/flow_admin.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_gov.h"
#include "flow/flow_gov_body.h"
#include "flow/flow_overview.h"
#include "store/result.h"
#include "wire/buf.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_value.h"

#define LIST_DEFAULT 20

enum fan_kind { FAN_STATS, FAN_GOV };

struct fan;

/* One group's read in flight. */
struct fan_op {
	struct fan *f;
	uint32_t i;
};

/* A read of every data group; answers the deferred request once all
 * came back. */
struct fan {
	enum fan_kind kind;
	struct admin_deferred *d;
	uint32_t limit;
	uint32_t n;
	uint32_t pending;
	struct fan_op *ops;
	struct {
		int status;
		uint8_t *data;
		size_t len;
	} * res;
};

/* --- FSNP values as JSON -------------------------------------------------- */

/* A JSON string of `b`; bytes that are not UTF-8 text become '?'. */
static json_t *jbytes(struct fsnp_bytes b)
{
	json_t *s = json_stringn((const char *)b.ptr, b.len);
	char *c;
	if (s != NULL) {
		return s;
	}
	c = malloc(b.len + 1);
	if (c == NULL) {
		return json_null();
	}
	for (size_t i = 0; i < b.len; i++) {
		c[i] =
		    b.ptr[i] >= 0x20 && b.ptr[i] < 0x7f ? (char)b.ptr[i] : '?';
	}
	s = json_stringn(c, b.len);
	free(c);
	return s != NULL ? s : json_null();
}

static json_t *to_json(const struct fsnp_val *v)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val e;
	json_t *o;

	switch (v->tag) {
	case FSNP_TRUE:
		return json_true();
	case FSNP_FALSE:
		return json_false();
	case FSNP_I64:
		return json_integer((json_int_t)v->as.i);
	case FSNP_U64:
		return v->as.u <= (uint64_t)INT64_MAX
		           ? json_integer((json_int_t)v->as.u)
		           : json_real((double)v->as.u);
	case FSNP_F64:
		return json_real(v->as.f);
	case FSNP_BIN:
		return jbytes(v->as.bin);
	case FSNP_ARRAY:
		o = json_array();
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, NULL, &e)) {
			json_array_append_new(o, to_json(&e));
		}
		return o;
	case FSNP_MAP:
		o = json_object();
		fsnp_iter_init(&it, v);
		while (fsnp_iter_next(&it, &k, &e)) {
			json_object_setn_new(o, (const char *)k.ptr, k.len,
			                     to_json(&e));
		}
		return o;
	default:
		return json_null();
	}
}

/* --- Replies -------------------------------------------------------------- */

static int reply_json(struct admin_reply *reply, unsigned status, json_t *doc)
{
	char *body = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (body == NULL) {
		return admin_reply_json(reply, 500,
		                        "{\"error\":\"the answer could not be "
		                        "encoded\"}");
	}
	reply->status = status;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = strlen(body);
	return 0;
}

/* Group i's answer as a value (true), or its error added to `errors`. */
static bool part_value(struct fan *f, uint32_t i, struct fsnp_val *v,
                       json_t *errors)
{
	const uint8_t *r = f->res[i].data;
	size_t len = f->res[i].len;
	char msg[256];
	struct fsnp_val e;

	if (f->res[i].status != SHARDS_OK) {
		snprintf(msg, sizeof msg, "%s",
		         shards_strerror(f->res[i].status));
	} else if (len < 3 || r[0] != STORE_RESULT_VERSION) {
		snprintf(msg, sizeof msg, "malformed answer");
	} else if (r[1] == STORE_OK &&
	           fsnp_value_decode(r + 2, len - 2, NULL, v, NULL) == 0 &&
	           v->tag == FSNP_MAP) {
		return true;
	} else if (r[1] != STORE_OK &&
	           fsnp_value_decode(r + 2, len - 2, NULL, &e, NULL) == 0 &&
	           e.tag == FSNP_BIN) {
		snprintf(msg, sizeof msg, "%.*s", (int)e.as.bin.len,
		         (const char *)e.as.bin.ptr);
	} else {
		snprintf(msg, sizeof msg, "malformed answer");
	}
	json_array_append_new(errors,
	                      json_pack("{s:I, s:s}", "group",
	                                (json_int_t)(i + 1), "error", msg));
	return false;
}

static json_int_t jint(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s != NULL ? s : "";
}

static int cmp_failed(const void *a, const void *b)
{
	json_int_t x = jint(*(json_t *const *)a, "updated_at_ms");
	json_int_t y = jint(*(json_t *const *)b, "updated_at_ms");
	return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_stuck(const void *a, const void *b)
{
	json_int_t x = jint(*(json_t *const *)a, "since_ms");
	json_int_t y = jint(*(json_t *const *)b, "since_ms");
	return x < y ? -1 : x > y ? 1 : 0;
}

/* Orders types: most stuck, then most failed, then largest, then name. */
static int cmp_type(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *keys[] = {"stuck", "failed", "total"};
	for (size_t i = 0; i < 3; i++) {
		json_int_t p = jint(x, keys[i]), q = jint(y, keys[i]);
		if (p != q) {
			return p > q ? -1 : 1;
		}
	}
	return strcmp(json_string_value(json_object_get(x, "type")),
	              json_string_value(json_object_get(y, "type")));
}

/* `arr` sorted by `cmp` and cut to `limit` (a new array). */
static json_t *sort_cut(json_t *arr, int (*cmp)(const void *, const void *),
                        size_t limit)
{
	size_t n = json_array_size(arr);
	json_t **v = malloc((n ? n : 1) * sizeof *v), *out = json_array();
	if (v == NULL) {
		return out;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = json_array_get(arr, i);
	}
	if (n > 1) {
		qsort(v, n, sizeof *v, cmp);
	}
	for (size_t i = 0; i < n && i < limit; i++) {
		json_array_append(out, v[i]);
	}
	free(v);
	return out;
}

static json_t *build_stats(struct fan *f)
{
	json_t *errors = json_array(), *types = json_object();
	json_t *failed = json_array(), *stuck = json_array(), *doc;
	json_t *tlist = json_array(), *v;
	json_int_t failed_total = 0, stuck_total = 0, now = 0;
	bool truncated = false;
	uint32_t answered = 0;
	const char *name;
	size_t i;

	for (uint32_t g = 0; g < f->n; g++) {
		struct fsnp_val val;
		json_t *o, *q;
		if (!part_value(f, g, &val, errors)) {
			continue;
		}
		answered++;
		o = to_json(&val);
		truncated =
		    truncated || json_is_true(json_object_get(o, "truncated"));
		stuck_total += jint(o, "stuck_count");
		if (jint(o, "now_ms") > now) {
			now = jint(o, "now_ms");
		}
		json_array_foreach(json_object_get(o, "queues"), i, q)
		{
			const char *t =
			    json_string_value(json_object_get(q, "type"));
			const char *s =
			    json_string_value(json_object_get(q, "state"));
			json_int_t n = jint(q, "count");
			json_t *e, *states;
			if (t == NULL || s == NULL) {
				continue;
			}
			e = json_object_get(types, t);
			if (e == NULL) {
				e = json_pack("{s:s, s:I, s:I, s:I, s:{}}",
				              "type", t, "total", (json_int_t)0,
				              "failed", (json_int_t)0, "stuck",
				              (json_int_t)0, "states");
				json_object_set_new(types, t, e);
			}
			states = json_object_get(e, "states");
			json_object_set_new(states, s,
			                    json_integer(jint(states, s) + n));
			json_object_set_new(e, "total",
			                    json_integer(jint(e, "total") + n));
			if (strcmp(s, "failed") == 0) {
				json_object_set_new(
				    e, "failed",
				    json_integer(jint(e, "failed") + n));
				failed_total += n;
			}
		}
		json_array_extend(failed, json_object_get(o, "failed"));
		json_array_extend(stuck, json_object_get(o, "stuck"));
		json_decref(o);
	}
	json_array_foreach(stuck, i, v)
	{
		json_t *e = json_object_get(types, jstr(v, "type"));
		if (e != NULL) {
			json_object_set_new(e, "stuck",
			                    json_integer(jint(e, "stuck") + 1));
		}
	}
	json_object_foreach(types, name, v)
	{
		json_array_append(tlist, v);
	}
	doc =
	    json_pack("{s:I, s:I, s:I, s:b, s:I, s:I}", "groups",
	              (json_int_t)f->n, "groups_answered", (json_int_t)answered,
	              "now_ms", now, "truncated", truncated, "failed_total",
	              failed_total, "stuck_total", stuck_total);
	json_object_set_new(doc, "types", sort_cut(tlist, cmp_type, SIZE_MAX));
	json_object_set_new(doc, "failed",
	                    sort_cut(failed, cmp_failed, f->limit));
	json_object_set_new(doc, "stuck", sort_cut(stuck, cmp_stuck, f->limit));
	json_object_set_new(doc, "errors", errors);
	json_decref(tlist);
	json_decref(types);
	json_decref(failed);
	json_decref(stuck);
	return doc;
}

/* The governance overview merged by flow/ from the groups that answered. */
static json_t *build_gov(struct fan *f)
{
	json_t *errors = json_array(), *doc = NULL, *v;
	json_t *open = json_array(), *pending = json_array(),
	       *near = json_array();
	struct fsnp_val *vals = calloc(f->n ? f->n : 1, sizeof *vals);
	struct fsnp_val body, merged;
	struct gov_req q;
	struct flow_err err;
	struct fsnp_writer w;
	struct wbuf b;
	size_t nok = 0, i;

	wbuf_init(&b);
	if (vals == NULL) {
		goto out;
	}
	for (uint32_t g = 0; g < f->n; g++) {
		if (part_value(f, g, &vals[nok], errors)) {
			nok++;
		}
	}
	fsnp_w_init(&w, &b);
	if (fsnp_value_decode_body(NULL, 0, NULL, &body) != 0 ||
	    flow_gov_body_decode(FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, &body, &q,
	                         &err) != 0 ||
	    flow_gov_merge(FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, &q, vals, nok,
	                   &w) != 0 ||
	    fsnp_w_finish(&w) != 0 || b.oom ||
	    fsnp_value_decode(b.data, b.len, NULL, &merged, NULL) != 0) {
		json_array_append_new(
		    errors, json_pack("{s:n, s:s}", "group", "error",
		                      "the groups' overviews could not be "
		                      "merged"));
		doc = json_object();
	} else {
		doc = to_json(&merged);
	}
	json_array_foreach(json_object_get(doc, "circuits"), i, v)
	{
		const char *st =
		    json_string_value(json_object_get(v, "status"));
		if (st != NULL && strcmp(st, "closed") != 0) {
			json_array_append(open, v);
		}
	}
	json_array_foreach(json_object_get(doc, "approvals"), i, v)
	{
		const char *st =
		    json_string_value(json_object_get(v, "status"));
		if (st != NULL && strcmp(st, "pending") == 0) {
			json_array_append(pending, v);
		}
	}
	json_array_foreach(json_object_get(doc, "budgets"), i, v)
	{
		json_int_t lim = jint(v, "limit"), used = jint(v, "used");
		if (lim > 0 &&
		    (double)used >= FLOW_ADMIN_BUDGET_NEAR * (double)lim) {
			json_t *c = json_deep_copy(v);
			json_object_set_new(
			    c, "ratio", json_real((double)used / (double)lim));
			json_array_append_new(near, c);
		}
	}
out:
	if (doc == NULL) {
		doc = json_object();
	}
	json_object_set_new(doc, "open_circuits", open);
	json_object_set_new(doc, "pending_approvals", pending);
	json_object_set_new(doc, "budgets_near_limit", near);
	json_object_set_new(doc, "groups", json_integer((json_int_t)f->n));
	json_object_set_new(doc, "groups_answered",
	                    json_integer((json_int_t)nok));
	json_object_set_new(doc, "errors", errors);
	wbuf_free(&b);
	free(vals);
	return doc;
}

static void fan_free(struct fan *f)
{
	for (uint32_t i = 0; i < f->n; i++) {
		free(f->res[i].data);
	}
	free(f->res);
	free(f->ops);
	free(f);
}

static void fan_finish(struct fan *f)
{
	struct admin_reply reply = {0};
	json_t *doc = f->kind == FAN_STATS ? build_stats(f) : build_gov(f);
	if (reply_json(&reply, 200, doc) != 0) {
		reply.status = 0;
	}
	if (reply.status == 0) {
		admin_reply_json(&reply, 500,
		                 "{\"error\":\"out of memory building the "
		                 "answer\"}");
	}
	admin_http_finish(f->d, &reply);
	fan_free(f);
}

static void on_part(void *data, int status, const uint8_t *result, size_t len)
{
	struct fan_op *op = data;
	struct fan *f = op->f;
	f->res[op->i].status = status;
	if (status == SHARDS_OK && len > 0) {
		f->res[op->i].data = malloc(len);
		if (f->res[op->i].data == NULL) {
			f->res[op->i].status = SHARDS_EBUSY;
		} else {
			memcpy(f->res[op->i].data, result, len);
			f->res[op->i].len = len;
		}
	}
	if (--f->pending == 0) {
		fan_finish(f);
	}
}

/* ?limit=N: 1..FLOW_OVERVIEW_MAX, default LIST_DEFAULT; 0 when bad. */
static uint32_t limit_arg(const struct admin_request *req)
{
	const char *s = admin_request_arg(req, "limit");
	char *end = NULL;
	long v;
	if (s == NULL) {
		return LIST_DEFAULT;
	}
	v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || v < 1 || v > FLOW_OVERVIEW_MAX) {
		return 0;
	}
	return (uint32_t)v;
}

static int start(struct shards *s, enum fan_kind kind,
                 const struct admin_request *req, struct admin_reply *reply)
{
	uint32_t limit = limit_arg(req);
	uint8_t *cmd = NULL;
	size_t cmd_len = 0;
	struct sbuf ov;
	struct fan *f;

	if (limit == 0) {
		return admin_reply_json(reply, 400,
		                        "{\"error\":\"limit must be an integer "
		                        "from 1 to 100\"}");
	}
	sbuf_init(&ov);
	if (kind == FAN_STATS) {
		flow_overview_encode(limit, &ov);
		cmd = ov.p;
		cmd_len = ov.len;
	} else {
		struct flow_cmd_meta meta = {.max_clock_skew_ms =
		                                 FLOW_CLOCK_SKEW_DEFAULT_MS};
		struct flow_err err;
		if (flow_cmd_encode(FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, NULL, 0,
		                    &meta, &cmd, &cmd_len, &err) != 0) {
			sbuf_free(&ov);
			return admin_reply_json(
			    reply, 500,
			    "{\"error\":\"the governance overview read could "
			    "not be encoded\"}");
		}
	}
	f = calloc(1, sizeof *f);
	if (f != NULL) {
		f->n = shards_data_groups(s);
		f->ops = calloc(f->n ? f->n : 1, sizeof *f->ops);
		f->res = calloc(f->n ? f->n : 1, sizeof *f->res);
	}
	if (f == NULL || f->ops == NULL || f->res == NULL ||
	    (f->d = admin_http_defer(req)) == NULL) {
		if (f != NULL) {
			fan_free(f);
		}
		if (kind == FAN_GOV) {
			free(cmd);
		}
		sbuf_free(&ov);
		return admin_reply_json(reply, 503,
		                        "{\"error\":\"the node is busy or "
		                        "shutting down\"}");
	}
	f->kind = kind;
	f->limit = limit;
	/* One extra count so that answers given inside submit cannot
	 * finish the request before every group was asked. */
	f->pending = f->n + 1;
	for (uint32_t i = 0; i < f->n; i++) {
		int st;
		f->ops[i] = (struct fan_op){f, i};
		st = shards_read_cmd(s, i + 1, cmd, cmd_len, on_part,
		                     &f->ops[i]);
		if (st != 0) {
			f->res[i].status = st;
			f->pending--;
		}
	}
	if (kind == FAN_GOV) {
		free(cmd);
	}
	sbuf_free(&ov);
	if (--f->pending == 0) {
		fan_finish(f);
	}
	return 0;
}

static int on_stats(void *data, const struct admin_request *req,
                    struct admin_reply *reply)
{
	return start(data, FAN_STATS, req, reply);
}

static int on_governance(void *data, const struct admin_request *req,
                         struct admin_reply *reply)
{
	return start(data, FAN_GOV, req, reply);
}

int flow_admin_register(struct admin_http *a, struct shards *s)
{
	if (admin_http_route(a, "GET", "/v1/flow/stats", false, on_stats, s) !=
	        0 ||
	    admin_http_route(a, "GET", "/v1/flow/governance", false,
	                     on_governance, s) != 0) {
		return -1;
	}
	return 0;
}
