/* FSNP compact request and KV response codecs; see fsnp_compact.h. */
#include "wire/fsnp_compact.h"

#include <string.h>

#include "wire/fsnp_opcode.h"

/* Walk n length-prefixed items (two per pair) from p; returns where they
 * end, or NULL when one is truncated. */
static const uint8_t *walk_items(const uint8_t *p, const uint8_t *end,
                                 uint32_t n, bool pairs)
{
	uint64_t fields = (uint64_t)n * (pairs ? 2 : 1);
	for (uint64_t i = 0; i < fields; i++) {
		if (end - p < 4) {
			return NULL;
		}
		uint32_t len = wire_load_u32(p);
		p += 4;
		if (len > (size_t)(end - p)) {
			return NULL;
		}
		p += len;
	}
	return p;
}

int fsnp_compact_req_decode(uint16_t opcode, const uint8_t *body, size_t len,
                            uint32_t max_items, struct fsnp_compact_req *out)
{
	const uint8_t *end;
	const uint8_t *p;
	int invalid;
	struct fsnp_compact_req r;

	memset(&r, 0, sizeof r);
	if (len == 0) {
		return FSNP_ERR_COMPACT_UNSUPPORTED;
	}
	end = body + len;
	if (opcode == FSNP_OP_FLOW_VALUE_MGET &&
	    body[0] == FSNP_COMPACT_VALUE_MGET_REQ) {
		invalid = FSNP_ERR_COMPACT_VALUE_MGET;
		if (len < 1 + 8 + 4) {
			return invalid;
		}
		r.kind = FSNP_COMPACT_VALUE_MGET;
		r.max_bytes = (int64_t)wire_load_u64(body + 1);
		r.has_max_bytes = r.max_bytes != INT64_MIN;
		r.count = wire_load_u32(body + 9);
		p = body + 13;
	} else if (body[0] == FSNP_COMPACT_PIPELINE_REQ &&
	           (opcode == FSNP_OP_MSET || opcode == FSNP_OP_MGET ||
	            opcode == FSNP_OP_PIPELINE)) {
		if (len < 2) {
			return FSNP_ERR_COMPACT_UNSUPPORTED;
		}
		uint8_t mode = body[1];
		if (opcode == FSNP_OP_MSET && mode == FSNP_COMPACT_MODE_SET) {
			r.kind = FSNP_COMPACT_MSET;
			invalid = FSNP_ERR_COMPACT_MSET;
		} else if (opcode == FSNP_OP_MGET &&
		           mode == FSNP_COMPACT_MODE_GET) {
			r.kind = FSNP_COMPACT_MGET;
			invalid = FSNP_ERR_COMPACT_MGET;
		} else if (opcode == FSNP_OP_PIPELINE &&
		           ((mode & 0x7fu) == FSNP_COMPACT_MODE_SET ||
		            (mode & 0x7fu) == FSNP_COMPACT_MODE_GET)) {
			r.kind = (mode & 0x7fu) == FSNP_COMPACT_MODE_SET
			             ? FSNP_COMPACT_PIPELINE_SET
			             : FSNP_COMPACT_PIPELINE_GET;
			r.values_only =
			    (mode & FSNP_COMPACT_MODE_VALUES_ONLY) != 0;
			invalid = FSNP_ERR_COMPACT_PIPELINE;
		} else {
			/* Other PIPELINE modes join with their commands. */
			return FSNP_ERR_COMPACT_UNSUPPORTED;
		}
		if (len < 2 + 4) {
			return invalid;
		}
		r.pairs = r.kind == FSNP_COMPACT_MSET ||
		          r.kind == FSNP_COMPACT_PIPELINE_SET;
		r.count = wire_load_u32(body + 2);
		p = body + 6;
	} else {
		return FSNP_ERR_COMPACT_UNSUPPORTED;
	}
	if (r.count > max_items) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	const uint8_t *q = walk_items(p, end, r.count, r.pairs);
	if (q == NULL || q != end) {
		return invalid;
	}
	r.items = p;
	r.end = end;
	*out = r;
	return 0;
}

void fsnp_compact_iter_init(struct fsnp_compact_iter *it,
                            const struct fsnp_compact_req *req)
{
	it->p = req->items;
	it->end = req->end;
	it->left = req->count;
	it->pairs = req->pairs;
}

/* One length-prefixed field at it->p; false when it does not fit. */
static bool take(const uint8_t **p, const uint8_t *end, struct fsnp_bytes *b)
{
	if (end - *p < 4) {
		return false;
	}
	uint32_t len = wire_load_u32(*p);
	if (len > (size_t)(end - *p - 4)) {
		return false;
	}
	b->ptr = *p + 4;
	b->len = len;
	*p += 4 + (size_t)len;
	return true;
}

bool fsnp_compact_iter_next(struct fsnp_compact_iter *it,
                            struct fsnp_bytes *key, struct fsnp_bytes *value)
{
	struct fsnp_bytes k, v = {NULL, 0};
	const uint8_t *p = it->p;
	if (it->left == 0 || !take(&p, it->end, &k) ||
	    (it->pairs && !take(&p, it->end, &v))) {
		it->left = 0;
		return false;
	}
	it->p = p;
	it->left--;
	*key = k;
	if (value != NULL) {
		*value = v;
	}
	return true;
}

static int put_field(struct wbuf *out, const struct fsnp_bytes *b)
{
	if (b->len > UINT32_MAX) {
		return FSNP_ERR_TOO_LONG;
	}
	if (wbuf_put_u32(out, (uint32_t)b->len) != 0 ||
	    wbuf_append(out, b->ptr, b->len) != 0) {
		return FSNP_ERR_NOMEM;
	}
	return 0;
}

int fsnp_compact_req_encode_kv(struct wbuf *out, uint8_t mode,
                               const struct fsnp_bytes *keys,
                               const struct fsnp_bytes *values, uint32_t n)
{
	bool pairs = (mode & 0x7fu) == FSNP_COMPACT_MODE_SET;
	size_t start = out->len;
	int rv = 0;
	if (pairs && values == NULL && n > 0) {
		return FSNP_ERR_WRITER;
	}
	if (wbuf_put_u8(out, FSNP_COMPACT_PIPELINE_REQ) != 0 ||
	    wbuf_put_u8(out, mode) != 0 || wbuf_put_u32(out, n) != 0) {
		rv = FSNP_ERR_NOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < n; i++) {
		rv = put_field(out, &keys[i]);
		if (rv == 0 && pairs) {
			rv = put_field(out, &values[i]);
		}
		if (rv != 0) {
			goto err;
		}
	}
	return 0;

err:
	if (!out->oom) {
		out->len = start;
	}
	return rv;
}

int fsnp_compact_req_encode_value_mget(struct wbuf *out, bool has_max_bytes,
                                       int64_t max_bytes,
                                       const struct fsnp_bytes *refs,
                                       uint32_t n)
{
	size_t start = out->len;
	int rv = 0;
	uint64_t mb = has_max_bytes ? (uint64_t)max_bytes : (uint64_t)INT64_MIN;
	if (wbuf_put_u8(out, FSNP_COMPACT_VALUE_MGET_REQ) != 0 ||
	    wbuf_put_u64(out, mb) != 0 || wbuf_put_u32(out, n) != 0) {
		rv = FSNP_ERR_NOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < n; i++) {
		rv = put_field(out, &refs[i]);
		if (rv != 0) {
			goto err;
		}
	}
	return 0;

err:
	if (!out->oom) {
		out->len = start;
	}
	return rv;
}

int fsnp_compact_ok_list_encode(struct wbuf *out, uint32_t count)
{
	if (wbuf_put_u8(out, FSNP_COMPACT_OK_LIST) != 0 ||
	    wbuf_put_u32(out, count) != 0) {
		return FSNP_ERR_NOMEM;
	}
	return 0;
}

int fsnp_compact_ok_list_decode(const uint8_t *p, size_t len, uint32_t *count)
{
	if (len < 5 || p[0] != FSNP_COMPACT_OK_LIST) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	if (len > 5) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	*count = wire_load_u32(p + 1);
	return 0;
}

/* Presence byte, then the bytes when present. */
static int put_optional(struct wbuf *out, const struct fsnp_bytes *value)
{
	if (value == NULL) {
		return wbuf_put_u8(out, 0) != 0 ? FSNP_ERR_NOMEM : 0;
	}
	if (wbuf_put_u8(out, 1) != 0) {
		return FSNP_ERR_NOMEM;
	}
	return put_field(out, value);
}

static bool take_optional(const uint8_t **p, const uint8_t *end, bool *present,
                          struct fsnp_bytes *value)
{
	if (*p >= end || **p > 1) {
		return false;
	}
	*present = **p == 1;
	(*p)++;
	value->ptr = NULL;
	value->len = 0;
	return !*present || take(p, end, value);
}

int fsnp_compact_kv_get_encode(struct wbuf *out, const struct fsnp_bytes *value)
{
	if (wbuf_put_u8(out, FSNP_COMPACT_KV_GET) != 0) {
		return FSNP_ERR_NOMEM;
	}
	return put_optional(out, value);
}

int fsnp_compact_kv_get_decode(const uint8_t *p, size_t len, bool *present,
                               struct fsnp_bytes *value)
{
	if (len < 1 || p[0] != FSNP_COMPACT_KV_GET) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	const uint8_t *end = p + len;
	p++;
	if (!take_optional(&p, end, present, value)) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	return p == end ? 0 : FSNP_ERR_TRAILING_BYTES;
}

int fsnp_compact_kv_mget_begin(struct wbuf *out, uint32_t count)
{
	if (wbuf_put_u8(out, FSNP_COMPACT_KV_MGET) != 0 ||
	    wbuf_put_u32(out, count) != 0) {
		return FSNP_ERR_NOMEM;
	}
	return 0;
}

int fsnp_compact_kv_mget_item(struct wbuf *out, const struct fsnp_bytes *value)
{
	return put_optional(out, value);
}

int fsnp_compact_kv_mget_decode(const uint8_t *p, size_t len,
                                uint32_t max_items,
                                struct fsnp_compact_list *out)
{
	if (len < 5 || p[0] != FSNP_COMPACT_KV_MGET) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	const uint8_t *end = p + len;
	uint32_t count = wire_load_u32(p + 1);
	if (count > max_items) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	const uint8_t *first = p + 5;
	const uint8_t *q = first;
	for (uint32_t i = 0; i < count; i++) {
		bool present;
		struct fsnp_bytes v;
		if (!take_optional(&q, end, &present, &v)) {
			return FSNP_ERR_COMPACT_RESPONSE;
		}
	}
	if (q != end) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	out->count = count;
	out->p = first;
	out->end = end;
	out->left = count;
	return 0;
}

bool fsnp_compact_list_next(struct fsnp_compact_list *l, bool *present,
                            struct fsnp_bytes *value)
{
	if (l->left == 0 || !take_optional(&l->p, l->end, present, value)) {
		l->left = 0;
		return false;
	}
	l->left--;
	return true;
}

/* --- Flow compact requests ------------------------------------------------ */

/* A bounded reader over a compact Flow body: every read fails once the
 * body is short (sticky). */
struct crd {
	const uint8_t *p, *end;
	bool bad;
};

static uint8_t rd_u8(struct crd *r)
{
	if (r->bad || r->end - r->p < 1) {
		r->bad = true;
		return 0;
	}
	return *r->p++;
}

static uint32_t rd_u32(struct crd *r)
{
	uint32_t v;
	if (r->bad || r->end - r->p < 4) {
		r->bad = true;
		return 0;
	}
	v = wire_load_u32(r->p);
	r->p += 4;
	return v;
}

static int64_t rd_i64(struct crd *r)
{
	int64_t v;
	if (r->bad || r->end - r->p < 8) {
		r->bad = true;
		return 0;
	}
	v = (int64_t)wire_load_u64(r->p);
	r->p += 8;
	return v;
}

/* bin (nil false) or obin (u32 0xFFFFFFFF: nil, *nil true). */
static struct fsnp_bytes rd_bin(struct crd *r, bool optional, bool *nil)
{
	struct fsnp_bytes b = {NULL, 0};
	uint32_t n = rd_u32(r);
	if (nil != NULL) {
		*nil = false;
	}
	if (r->bad) {
		return b;
	}
	if (optional && n == UINT32_MAX) {
		if (nil != NULL) {
			*nil = true;
		}
		return b;
	}
	if (n > (size_t)(r->end - r->p)) {
		r->bad = true;
		return b;
	}
	b.ptr = r->p;
	b.len = n;
	r->p += n;
	return b;
}

static void w_key_bin(struct fsnp_writer *w, const char *key,
                      struct fsnp_bytes b)
{
	fsnp_w_key(w, key);
	fsnp_w_bin(w, b.ptr, b.len);
}

static void w_key_i64(struct fsnp_writer *w, const char *key, int64_t v)
{
	fsnp_w_key(w, key);
	fsnp_w_i64(w, v);
}

/* An optional partition (obin; nil, or "-" as the SDK writes for an
 * item without one, is none). */
static void w_opt_pk(struct fsnp_writer *w, struct crd *r)
{
	bool nil;
	struct fsnp_bytes pk = rd_bin(r, true, &nil);
	if (!nil && !r->bad && !(pk.len == 1 && pk.ptr[0] == '-')) {
		w_key_bin(w, "partition_key", pk);
	}
}

/* `ind`: 0 unspecified, 1/4 false, 2/3 true. */
static void w_ind(struct fsnp_writer *w, uint8_t ind)
{
	if (ind == 0) {
		return;
	}
	fsnp_w_key(w, "independent");
	fsnp_w_bool(w, ind == 2 || ind == 3);
}

bool fsnp_compact_is_flow(uint16_t opcode, uint8_t tag)
{
	switch (opcode) {
	case FSNP_OP_FLOW_CREATE_MANY:
		return tag == 0x90 || tag == 0x96 || tag == 0x9E;
	case FSNP_OP_FLOW_CLAIM_DUE:
		return tag == 0x91;
	case FSNP_OP_FLOW_COMPLETE_MANY:
	case FSNP_OP_FLOW_FAIL_MANY:
		return tag == 0x92 || tag == 0x93;
	case FSNP_OP_FLOW_RETRY_MANY:
		return tag == 0x97 || tag == 0x98;
	case FSNP_OP_FLOW_CANCEL_MANY:
		return tag == 0x99 || tag == 0x9A;
	case FSNP_OP_FLOW_TRANSITION_MANY:
		return tag == 0x9B || tag == 0x9C;
	case FSNP_OP_FLOW_VALUE_MGET:
		return tag == 0x9D;
	default:
		return false;
	}
}

static void w_claim(struct fsnp_writer *w, struct crd *r, uint32_t max_items,
                    int *err)
{
	static const char *const rets[] = {
	    "records", "jobs_compact", "jobs_compact_state",
	    "jobs_compact_attrs", "jobs_compact_state_attrs"};
	bool nil;
	struct fsnp_bytes b;
	int64_t v;
	uint8_t u, pmode;

	w_key_bin(w, "type", rd_bin(r, false, NULL));
	b = rd_bin(r, true, &nil);
	if (!nil && !r->bad) {
		w_key_bin(w, "state", b);
	}
	w_key_bin(w, "worker", rd_bin(r, false, NULL));
	w_key_i64(w, "lease_ms", rd_i64(r));
	w_key_i64(w, "limit", rd_i64(r));
	v = rd_i64(r);
	if (v != INT64_MIN) {
		w_key_i64(w, "block_ms", v);
	}
	u = rd_u8(r);
	fsnp_w_key(w, "reclaim_expired");
	fsnp_w_bool(w, u != 0);
	w_key_i64(w, "reclaim_ratio", rd_i64(r));
	v = rd_i64(r);
	if (v != INT64_MIN) {
		w_key_i64(w, "priority", v);
	}
	u = rd_u8(r);
	if (u > 4 || u == 0) {
		r->bad = true;
		return;
	}
	fsnp_w_key(w, "return");
	fsnp_w_str(w, rets[u]);
	pmode = rd_u8(r);
	if (pmode == 1) {
		w_key_bin(w, "partition_key", rd_bin(r, false, NULL));
	} else if (pmode == 2) {
		uint32_t n = rd_u32(r);
		if (n > max_items) {
			*err = FSNP_ERR_COMPACT_ITEMS;
			return;
		}
		fsnp_w_key(w, "partition_keys");
		fsnp_w_array_begin(w);
		for (uint32_t i = 0; i < n && !r->bad; i++) {
			b = rd_bin(r, false, NULL);
			fsnp_w_bin(w, b.ptr, b.len);
		}
		fsnp_w_array_end(w);
	} else if (pmode != 0) {
		r->bad = true;
	}
}

int fsnp_compact_flow_body(uint16_t opcode, const uint8_t *body, size_t len,
                           uint32_t max_items, struct wbuf *out)
{
	struct crd r = {body, body + len, false};
	struct fsnp_writer w;
	int err = 0;
	uint8_t tag;
	uint32_t n;
	bool ok_on_success = false;

	if (len == 0 || !fsnp_compact_is_flow(opcode, body[0])) {
		return FSNP_ERR_COMPACT_UNSUPPORTED;
	}
	tag = rd_u8(&r);
	fsnp_w_init(&w, out);
	fsnp_w_map_begin(&w);
	switch (tag) {
	case 0x91:
		w_claim(&w, &r, max_items, &err);
		goto end;
	case 0x9D: {
		int64_t mb = rd_i64(&r);
		if (mb != INT64_MIN) {
			w_key_i64(&w, "max_bytes", mb);
		}
		n = rd_u32(&r);
		if (n > max_items) {
			return FSNP_ERR_COMPACT_ITEMS;
		}
		fsnp_w_key(&w, "refs");
		fsnp_w_array_begin(&w);
		for (uint32_t i = 0; i < n && !r.bad; i++) {
			struct fsnp_bytes b = rd_bin(&r, false, NULL);
			fsnp_w_bin(&w, b.ptr, b.len);
		}
		fsnp_w_array_end(&w);
		goto end;
	}
	case 0x90:
	case 0x96:
	case 0x9E:
		w_key_bin(&w, "type", rd_bin(&r, false, NULL));
		w_key_bin(&w, "state", rd_bin(&r, false, NULL));
		if (tag == 0x96) {
			w_opt_pk(&w, &r);
		}
		w_key_i64(&w, "now_ms", rd_i64(&r));
		w_key_i64(&w, "run_at_ms", rd_i64(&r));
		w_ind(&w, rd_u8(&r));
		ok_on_success = rd_u8(&r) == 1;
		break;
	case 0x9B:
	case 0x9C:
		w_key_bin(&w, "from_state", rd_bin(&r, false, NULL));
		w_key_bin(&w, "to_state", rd_bin(&r, false, NULL));
		w_opt_pk(&w, &r);
		w_key_i64(&w, "now_ms", rd_i64(&r));
		w_key_i64(&w, "run_at_ms", rd_i64(&r));
		w_ind(&w, rd_u8(&r));
		ok_on_success = tag == 0x9C;
		break;
	case 0x97:
	case 0x98:
		w_opt_pk(&w, &r);
		w_key_i64(&w, "now_ms", rd_i64(&r));
		w_key_i64(&w, "run_at_ms", rd_i64(&r));
		w_ind(&w, rd_u8(&r));
		ok_on_success = tag == 0x98;
		break;
	default: /* 0x92, 0x93, 0x99, 0x9A */
		w_opt_pk(&w, &r);
		w_key_i64(&w, "now_ms", rd_i64(&r));
		w_ind(&w, rd_u8(&r));
		ok_on_success = tag == 0x93 || tag == 0x9A;
		break;
	}
	if (ok_on_success) {
		fsnp_w_key(&w, "return");
		fsnp_w_str(&w, "ok_on_success");
	}
	n = rd_u32(&r);
	if (n > max_items) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	for (uint32_t i = 0; i < n && !r.bad; i++) {
		bool nil;
		struct fsnp_bytes b;
		fsnp_w_map_begin(&w);
		w_key_bin(&w, "id", rd_bin(&r, false, NULL));
		switch (tag) {
		case 0x90:
		case 0x96:
			w_key_bin(&w, "payload", rd_bin(&r, false, NULL));
			break;
		case 0x9E:
			w_key_bin(&w, "partition_key", rd_bin(&r, false, NULL));
			w_key_bin(&w, "payload", rd_bin(&r, false, NULL));
			break;
		case 0x99:
		case 0x9A:
			w_opt_pk(&w, &r);
			w_key_i64(&w, "fencing_token", rd_i64(&r));
			break;
		case 0x9B:
		case 0x9C:
			w_opt_pk(&w, &r);
			w_key_i64(&w, "fencing_token", rd_i64(&r));
			b = rd_bin(&r, true, &nil);
			if (!nil && !r.bad) {
				w_key_bin(&w, "lease_token", b);
			}
			break;
		default: /* complete, fail, retry */
			w_opt_pk(&w, &r);
			w_key_bin(&w, "lease_token", rd_bin(&r, false, NULL));
			w_key_i64(&w, "fencing_token", rd_i64(&r));
			break;
		}
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
end:
	if (err != 0) {
		return err;
	}
	if (r.bad || r.p != r.end) {
		return FSNP_ERR_COMPACT_FLOW;
	}
	fsnp_w_map_end(&w);
	return fsnp_w_finish(&w) != 0 ? FSNP_ERR_NOMEM : 0;
}

/* --- flow_record_v1 and flow_record_list_v1 ----------------------------- */

/* The SDK's table: id i names flow_fields[i - 1]. */
static const char *const flow_fields[FSNP_COMPACT_FLOW_FIELDS] = {
    "id",
    "type",
    "state",
    "version",
    "priority",
    "partition_key",
    "payload_ref",
    "result_ref",
    "error_ref",
    "payload",
    "result",
    "error",
    "created_at_ms",
    "updated_at_ms",
    "next_run_at_ms",
    "lease_deadline_ms",
    "lease_owner",
    "lease_token",
    "fencing_token",
    "attempts",
    "history_max_events",
    "history_hot_max_events",
    "child_groups",
    "parent_flow_id",
    "parent_partition_key",
    "root_flow_id",
    "correlation_id",
    "terminal_retention_until_ms",
    "ttl_ms",
    "retention_ttl_ms",
    "run_state",
    "value_refs",
    "values",
    "payload_omitted",
    "payload_size",
    "result_omitted",
    "result_size",
    "error_omitted",
    "error_size",
    "max_attempts",
    "attributes",
};

const char *fsnp_compact_flow_field_name(uint8_t id)
{
	return id >= 1 && id <= FSNP_COMPACT_FLOW_FIELDS ? flow_fields[id - 1]
	                                                 : NULL;
}

uint8_t fsnp_compact_flow_field_id(const uint8_t *key, size_t len)
{
	for (uint8_t i = 0; i < FSNP_COMPACT_FLOW_FIELDS; i++) {
		if (strlen(flow_fields[i]) == len &&
		    (len == 0 || memcmp(flow_fields[i], key, len) == 0)) {
			return (uint8_t)(i + 1);
		}
	}
	return 0;
}

int fsnp_compact_flow_record_encode(struct wbuf *out,
                                    const struct fsnp_val *record)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	if (record->tag != FSNP_MAP) {
		return FSNP_ERR_TYPE;
	}
	if (wbuf_put_u8(out, FSNP_COMPACT_FLOW_RECORD) != 0 ||
	    wbuf_put_u32(out, record->as.count) != 0) {
		return FSNP_ERR_NOMEM;
	}
	fsnp_iter_init(&it, record);
	while (fsnp_iter_next(&it, &k, &v)) {
		uint8_t id = fsnp_compact_flow_field_id(k.ptr, k.len);
		int rv;
		if (wbuf_put_u8(out, id) != 0) {
			return FSNP_ERR_NOMEM;
		}
		if (id == 0 && (rv = put_field(out, &k)) != 0) {
			return rv;
		}
		if (wbuf_append(out, v.enc, v.enc_len) != 0) {
			return FSNP_ERR_NOMEM;
		}
	}
	return 0;
}

int fsnp_compact_flow_record_list_encode(struct wbuf *out,
                                         const struct fsnp_val *list)
{
	struct fsnp_iter it;
	struct fsnp_val e;
	if (list->tag != FSNP_ARRAY) {
		return FSNP_ERR_TYPE;
	}
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (e.tag != FSNP_MAP) {
			return FSNP_ERR_TYPE;
		}
	}
	if (wbuf_put_u8(out, FSNP_COMPACT_FLOW_RECORD_LIST) != 0 ||
	    wbuf_put_u32(out, list->as.count) != 0) {
		return FSNP_ERR_NOMEM;
	}
	fsnp_iter_init(&it, list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		int rv = fsnp_compact_flow_record_encode(out, &e);
		if (rv != 0) {
			return rv;
		}
	}
	return 0;
}

/* One entry at *p: its key and value. 0, or the decode error. */
static int take_entry(const uint8_t **p, const uint8_t *end,
                      struct fsnp_bytes *key, struct fsnp_val *value)
{
	uint8_t id;
	size_t used;
	int rv;
	if (*p >= end) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	id = **p;
	(*p)++;
	if (id == 0) {
		if (!take(p, end, key)) {
			return FSNP_ERR_COMPACT_RESPONSE;
		}
	} else if (id > FSNP_COMPACT_FLOW_FIELDS) {
		return FSNP_ERR_COMPACT_RESPONSE;
	} else {
		key->ptr = (const uint8_t *)flow_fields[id - 1];
		key->len = strlen(flow_fields[id - 1]);
	}
	rv = fsnp_value_decode(*p, (size_t)(end - *p), NULL, value, &used);
	if (rv == FSNP_ERR_VALUE_TOTAL_ITEMS ||
	    rv == FSNP_ERR_VALUE_CONTAINER_ITEMS ||
	    rv == FSNP_ERR_VALUE_DEPTH) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	if (rv != 0) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	*p += used;
	return 0;
}

int fsnp_compact_flow_record_decode(const uint8_t *p, size_t len,
                                    uint32_t max_items,
                                    struct fsnp_compact_record *out,
                                    size_t *used)
{
	const uint8_t *end = p + len, *q;
	uint32_t count;
	if (len < 5 || p[0] != FSNP_COMPACT_FLOW_RECORD) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	count = wire_load_u32(p + 1);
	if (count > max_items) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	q = p + 5;
	for (uint32_t i = 0; i < count; i++) {
		struct fsnp_bytes k;
		struct fsnp_val v;
		int rv = take_entry(&q, end, &k, &v);
		if (rv != 0) {
			return rv;
		}
	}
	if (used != NULL) {
		*used = (size_t)(q - p);
	} else if (q != end) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	out->count = count;
	out->p = p + 5;
	out->end = q;
	out->left = count;
	return 0;
}

bool fsnp_compact_record_next(struct fsnp_compact_record *r,
                              struct fsnp_bytes *key, struct fsnp_val *value)
{
	if (r->left == 0 || take_entry(&r->p, r->end, key, value) != 0) {
		return false;
	}
	r->left--;
	return true;
}

int fsnp_compact_flow_record_list_decode(const uint8_t *p, size_t len,
                                         uint32_t max_items,
                                         struct fsnp_compact_list *out)
{
	const uint8_t *end = p + len, *q;
	uint32_t count;
	uint64_t entries = 0;
	if (len < 5 || p[0] != FSNP_COMPACT_FLOW_RECORD_LIST) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	count = wire_load_u32(p + 1);
	if (count > max_items) {
		return FSNP_ERR_COMPACT_ITEMS;
	}
	q = p + 5;
	for (uint32_t i = 0; i < count; i++) {
		struct fsnp_compact_record rec;
		size_t used;
		int rv = fsnp_compact_flow_record_decode(
		    q, (size_t)(end - q), max_items, &rec, &used);
		if (rv != 0) {
			return rv;
		}
		entries += rec.count;
		if (entries > max_items) {
			return FSNP_ERR_COMPACT_ITEMS;
		}
		q += used;
	}
	if (q != end) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	out->count = count;
	out->p = p + 5;
	out->end = end;
	out->left = count;
	return 0;
}

bool fsnp_compact_record_list_next(struct fsnp_compact_list *l,
                                   struct fsnp_compact_record *rec)
{
	size_t used;
	if (l->left == 0 ||
	    fsnp_compact_flow_record_decode(l->p, (size_t)(l->end - l->p),
	                                    UINT32_MAX, rec, &used) != 0) {
		return false;
	}
	l->p += used;
	l->left--;
	return true;
}
