/* FSNP compact flow query result codec (0xA0); see fsnp_fqr.h. */
#include "wire/fsnp_fqr.h"

#include <string.h>

/* tag, kind, four quality codes, eleven u64 usage counters */
#define FIXED_BYTES (1u + 1u + FSNP_FQR_QUALITIES + 8u * FSNP_FQR_USAGES)
#define USAGE_AT 6u
#define NIL_CURSOR 0xFFFFFFFFu

static const char *const field_names[FSNP_FQR_FIELDS] = {
    "id",
    "type",
    "state",
    "version",
    "priority",
    "partition_key",
    "created_at_ms",
    "updated_at_ms",
    "next_run_at_ms",
    "lease_deadline_ms",
    "attempts",
    "run_state",
    "max_active_ms",
    "parent_flow_id",
    "root_flow_id",
    "correlation_id",
    "attributes",
    "state_meta",
    "event_id",
    "fields",
};

static const char *const quality_fields[FSNP_FQR_QUALITIES] = {
    "exactness",
    "freshness",
    "coverage",
    "pagination",
};

#define MAX_CODES 4
static const char *const quality_codes[FSNP_FQR_QUALITIES][MAX_CODES] = {
    {"authoritative", "projected_exact", "exact", "not_applicable"},
    {"current", "projection_watermark", "not_applicable", NULL},
    {"complete", "unavailable", NULL, NULL},
    {"none", "complete", "authenticated_seek", "live_seek"},
};

static const char *const usage_names[FSNP_FQR_USAGES] = {
    "range_seeks",       "range_pages",
    "scanned_entries",   "scanned_bytes",
    "hydrated_records",  "residual_checks",
    "duplicate_entries", "result_records",
    "response_bytes",    "memory_high_water_bytes",
    "wall_time_us",
};

const char *fsnp_fqr_field_name(unsigned bit)
{
	return bit < FSNP_FQR_FIELDS ? field_names[bit] : NULL;
}

const char *fsnp_fqr_quality_field(unsigned quality)
{
	return quality < FSNP_FQR_QUALITIES ? quality_fields[quality] : NULL;
}

const char *fsnp_fqr_quality_name(unsigned quality, unsigned code)
{
	if (quality >= FSNP_FQR_QUALITIES || code >= MAX_CODES) {
		return NULL;
	}
	return quality_codes[quality][code];
}

const char *fsnp_fqr_usage_name(unsigned usage)
{
	return usage < FSNP_FQR_USAGES ? usage_names[usage] : NULL;
}

static bool name_is(const char *name, const char *s, size_t len)
{
	return strlen(name) == len && memcmp(name, s, len) == 0;
}

int fsnp_fqr_field_bit(const char *name, size_t len)
{
	for (unsigned i = 0; i < FSNP_FQR_FIELDS; i++) {
		if (name_is(field_names[i], name, len)) {
			return (int)i;
		}
	}
	return -1;
}

int fsnp_fqr_quality_code(unsigned quality, const char *name, size_t len)
{
	if (quality >= FSNP_FQR_QUALITIES) {
		return -1;
	}
	for (unsigned i = 0; i < MAX_CODES; i++) {
		const char *c = quality_codes[quality][i];
		if (c != NULL && name_is(c, name, len)) {
			return (int)i;
		}
	}
	return -1;
}

static bool code_valid(unsigned quality, uint8_t code)
{
	return code < MAX_CODES && quality_codes[quality][code] != NULL;
}

int fsnp_fqr_check_usage(const struct fsnp_fqr *r)
{
	const uint64_t *u = r->usage;
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		if (u[i] > (uint64_t)INT64_MAX) {
			return FSNP_ERR_FQR_USAGE;
		}
	}
	uint64_t scanned = u[FSNP_FQR_SCANNED_ENTRIES];
	/* Sums of two values <= INT64_MAX cannot overflow a u64. */
	if (u[FSNP_FQR_HYDRATED_RECORDS] > scanned ||
	    u[FSNP_FQR_DUPLICATE_ENTRIES] > scanned ||
	    u[FSNP_FQR_RANGE_PAGES] > scanned + u[FSNP_FQR_RANGE_SEEKS] ||
	    (u[FSNP_FQR_RESIDUAL_CHECKS] + FSNP_FQR_MAX_PREDICATES - 1) /
	            FSNP_FQR_MAX_PREDICATES >
	        scanned) {
		return FSNP_ERR_FQR_USAGE;
	}
	if (r->kind == FSNP_FQR_RECORDS) {
		if (u[FSNP_FQR_RESULT_RECORDS] != r->record_count ||
		    u[FSNP_FQR_RESULT_RECORDS] > scanned) {
			return FSNP_ERR_FQR_USAGE;
		}
	} else if (u[FSNP_FQR_RESULT_RECORDS] != 1) {
		return FSNP_ERR_FQR_USAGE;
	}
	return 0;
}

static unsigned popcount32(uint32_t x)
{
	unsigned n = 0;
	while (x != 0) {
		x &= x - 1;
		n++;
	}
	return n;
}

/* Validate one record at *p; advances *p past it. */
static int check_record(const uint8_t **p, const uint8_t *end,
                        const struct fsnp_limits *lim)
{
	if (end - *p < 4) {
		return FSNP_ERR_FQR_TRUNCATED;
	}
	uint32_t bitmap = wire_load_u32(*p);
	if (bitmap >> FSNP_FQR_FIELDS) {
		return FSNP_ERR_FQR_BITMAP;
	}
	*p += 4;
	for (unsigned i = popcount32(bitmap); i > 0; i--) {
		struct fsnp_val v;
		size_t used;
		int rv =
		    fsnp_value_decode(*p, (size_t)(end - *p), lim, &v, &used);
		if (rv != 0) {
			return rv;
		}
		*p += used;
	}
	return 0;
}

static int check_cursor(struct fsnp_bytes c)
{
	size_t plen = sizeof FSNP_FQR_CURSOR_PREFIX - 1;
	if (c.len < FSNP_FQR_CURSOR_MIN || c.len > FSNP_FQR_CURSOR_MAX ||
	    memcmp(c.ptr, FSNP_FQR_CURSOR_PREFIX, plen) != 0) {
		return FSNP_ERR_FQR_PAGE;
	}
	return 0;
}

int fsnp_fqr_decode(const uint8_t *p, size_t len,
                    const struct fsnp_fqr_limits *lim, struct fsnp_fqr *out)
{
	const uint8_t *end;
	const uint8_t *q;
	struct fsnp_fqr r;
	uint32_t max_records =
	    lim ? lim->max_records : FSNP_FQR_MAX_RECORDS_DEFAULT;
	const struct fsnp_limits *vlim = lim ? &lim->values : NULL;
	int rv;

	memset(&r, 0, sizeof r);
	if (len < 1 || p[0] != FSNP_FQR_TAG) {
		return FSNP_ERR_COMPACT_RESPONSE;
	}
	if (len < FIXED_BYTES) {
		return FSNP_ERR_FQR_TRUNCATED;
	}
	end = p + len;
	r.kind = p[1];
	if (r.kind != FSNP_FQR_RECORDS && r.kind != FSNP_FQR_COUNT) {
		return FSNP_ERR_FQR_KIND;
	}
	for (unsigned i = 0; i < FSNP_FQR_QUALITIES; i++) {
		r.quality[i] = p[2 + i];
		if (!code_valid(i, r.quality[i])) {
			return FSNP_ERR_FQR_CODE;
		}
	}
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		r.usage[i] = wire_load_u64(p + USAGE_AT + 8 * i);
	}
	q = p + FIXED_BYTES;
	if (r.kind == FSNP_FQR_COUNT) {
		if (end - q < 8) {
			return FSNP_ERR_FQR_TRUNCATED;
		}
		r.count = wire_load_u64(q);
		if (r.count > (uint64_t)INT64_MAX) {
			return FSNP_ERR_FQR_COUNT;
		}
		q += 8;
	} else {
		if (end - q < 5) {
			return FSNP_ERR_FQR_TRUNCATED;
		}
		if (q[0] > 1) {
			return FSNP_ERR_FQR_PAGE;
		}
		r.has_more = q[0] == 1;
		uint32_t clen = wire_load_u32(q + 1);
		q += 5;
		if (clen != NIL_CURSOR) {
			if (clen > (size_t)(end - q)) {
				return FSNP_ERR_FQR_TRUNCATED;
			}
			r.cursor.ptr = q;
			r.cursor.len = clen;
			q += clen;
		}
		if (r.has_more != (r.cursor.ptr != NULL)) {
			return FSNP_ERR_FQR_PAGE;
		}
		if (r.has_more && (rv = check_cursor(r.cursor)) != 0) {
			return rv;
		}
		if (end - q < 4) {
			return FSNP_ERR_FQR_TRUNCATED;
		}
		r.record_count = wire_load_u32(q);
		q += 4;
		if (r.record_count > max_records) {
			return FSNP_ERR_FQR_COUNT;
		}
		r.records = q;
		for (uint32_t i = 0; i < r.record_count; i++) {
			rv = check_record(&q, end, vlim);
			if (rv != 0) {
				return rv;
			}
		}
		r.records_len = (size_t)(q - r.records);
	}
	if (q != end) {
		return FSNP_ERR_TRAILING_BYTES;
	}
	if (r.usage[FSNP_FQR_RESPONSE_BYTES] != len) {
		return FSNP_ERR_FQR_USAGE;
	}
	rv = fsnp_fqr_check_usage(&r);
	if (rv != 0) {
		return rv;
	}
	*out = r;
	return 0;
}

void fsnp_fqr_iter_init(struct fsnp_fqr_iter *it, const struct fsnp_fqr *r)
{
	it->p = r->records;
	it->end = r->records ? r->records + r->records_len : NULL;
	it->left = r->kind == FSNP_FQR_RECORDS ? r->record_count : 0;
}

bool fsnp_fqr_iter_next(struct fsnp_fqr_iter *it, struct fsnp_fqr_record *rec)
{
	if (it->left == 0 || it->p == NULL || it->end - it->p < 4) {
		it->left = 0;
		return false;
	}
	const uint8_t *q = it->p;
	rec->bitmap = wire_load_u32(q);
	q += 4;
	if (rec->bitmap >> FSNP_FQR_FIELDS) {
		goto err_malformed;
	}
	/* Validated by fsnp_fqr_decode; re-parsed with generous limits. */
	struct fsnp_limits lim = {UINT32_MAX, FSNP_MAX_DEPTH_HARD};
	for (unsigned bit = 0; bit < FSNP_FQR_FIELDS; bit++) {
		size_t used;
		if (!(rec->bitmap & (1u << bit))) {
			continue;
		}
		if (fsnp_value_decode(q, (size_t)(it->end - q), &lim,
		                      &rec->field[bit], &used) != 0) {
			goto err_malformed;
		}
		q += used;
	}
	it->p = q;
	it->left--;
	return true;

err_malformed:
	it->left = 0;
	return false;
}

static int fw_fail(struct fsnp_fqr_writer *fw, int err)
{
	if (fw->err == 0) {
		fw->err = err;
	}
	return fw->err;
}

/* The writer's own error or a buffer failure, if any. */
static int fw_state(struct fsnp_fqr_writer *fw)
{
	if (fw->err == 0 && fw->w->err != 0) {
		fw->err = fw->w->err;
	}
	if (fw->err == 0 && fw->w->buf->oom) {
		fw->err = FSNP_ERR_NOMEM;
	}
	return fw->err;
}

int fsnp_fqr_w_begin(struct fsnp_fqr_writer *fw, struct fsnp_writer *w,
                     const struct fsnp_fqr *meta, uint32_t max_records)
{
	struct wbuf *b = w->buf;
	memset(fw, 0, sizeof *fw);
	fw->w = w;
	fw->meta = *meta;
	fw->max_records = max_records;
	fw->last_bit = -1;
	fw->start = b->len;
	if (w->depth != 0) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	if (meta->kind != FSNP_FQR_RECORDS && meta->kind != FSNP_FQR_COUNT) {
		return fw_fail(fw, FSNP_ERR_FQR_KIND);
	}
	wbuf_put_u8(b, FSNP_FQR_TAG);
	wbuf_put_u8(b, meta->kind);
	for (unsigned i = 0; i < FSNP_FQR_QUALITIES; i++) {
		wbuf_put_u8(b, meta->quality[i]);
	}
	for (unsigned i = 0; i < FSNP_FQR_USAGES; i++) {
		wbuf_put_u64(b,
		             i == FSNP_FQR_RESPONSE_BYTES ? 0 : meta->usage[i]);
	}
	if (meta->kind == FSNP_FQR_COUNT) {
		wbuf_put_u64(b, meta->count);
		return fw_state(fw);
	}
	wbuf_put_u8(b, meta->has_more ? 1 : 0);
	if (meta->cursor.ptr == NULL) {
		wbuf_put_u32(b, NIL_CURSOR);
	} else if (meta->cursor.len >= NIL_CURSOR) {
		return fw_fail(fw, FSNP_ERR_TOO_LONG);
	} else {
		wbuf_put_u32(b, (uint32_t)meta->cursor.len);
		wbuf_append(b, meta->cursor.ptr, meta->cursor.len);
	}
	fw->count_at = b->len;
	wbuf_put_u32(b, 0);
	return fw_state(fw);
}

int fsnp_fqr_w_record_begin(struct fsnp_fqr_writer *fw)
{
	if (fw_state(fw) != 0) {
		return fw->err;
	}
	if (fw->meta.kind != FSNP_FQR_RECORDS || fw->in_record) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	fw->bitmap_at = fw->w->buf->len;
	fw->bitmap = 0;
	fw->last_bit = -1;
	fw->in_record = true;
	wbuf_put_u32(fw->w->buf, 0);
	return fw_state(fw);
}

int fsnp_fqr_w_field(struct fsnp_fqr_writer *fw, unsigned bit)
{
	if (fw_state(fw) != 0) {
		return fw->err;
	}
	if (!fw->in_record || fw->w->depth != 0) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	if (bit >= FSNP_FQR_FIELDS || (int)bit <= fw->last_bit) {
		return fw_fail(fw, FSNP_ERR_FQR_BITMAP);
	}
	fw->bitmap |= 1u << bit;
	fw->last_bit = (int)bit;
	return 0;
}

int fsnp_fqr_w_record_end(struct fsnp_fqr_writer *fw)
{
	if (fw_state(fw) != 0) {
		return fw->err;
	}
	struct wbuf *b = fw->w->buf;
	if (!fw->in_record || fw->w->depth != 0) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	wbuf_patch_u32(b, fw->bitmap_at, fw->bitmap);
	/* Exactly one complete value per announced field. */
	const uint8_t *q = b->data + fw->bitmap_at;
	const uint8_t *end = b->data + b->len;
	if (check_record(&q, end, NULL) != 0 || q != end) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	fw->in_record = false;
	fw->records++;
	return 0;
}

int fsnp_fqr_w_end(struct fsnp_fqr_writer *fw)
{
	if (fw_state(fw) != 0) {
		return fw->err;
	}
	struct wbuf *b = fw->w->buf;
	if (fw->in_record || fw->w->depth != 0) {
		return fw_fail(fw, FSNP_ERR_WRITER);
	}
	if (fw->meta.kind == FSNP_FQR_RECORDS) {
		wbuf_patch_u32(b, fw->count_at, fw->records);
	}
	size_t total = b->len - fw->start;
	wire_store_u64(b->data + fw->start + USAGE_AT +
	                   8 * FSNP_FQR_RESPONSE_BYTES,
	               total);
	struct fsnp_fqr check;
	struct fsnp_fqr_limits lim = {
	    fw->max_records, {FSNP_MAX_ITEMS_DEFAULT, FSNP_MAX_DEPTH_DEFAULT}};
	int rv = fsnp_fqr_decode(b->data + fw->start, total, &lim, &check);
	if (rv != 0) {
		return fw_fail(fw, rv);
	}
	return 0;
}
