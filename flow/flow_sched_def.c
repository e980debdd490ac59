/* Schedule request bodies and definitions (flow_sched_def.h): the options
 * each FLOW.SCHEDULE.* opcode takes, and a CREATE body checked into a
 * definition with the reference's errors (reference/flow.md 6.1, 6.2). */
#include "flow/flow_sched_def.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "wire/fsnp_opcode.h"

static const char *const sf_names[SF_N] = {
    [SF_ID] = "id",
    [SF_KIND] = "kind",
    [SF_AT_MS] = "at_ms",
    [SF_START_AT_MS] = "start_at_ms",
    [SF_DELAY_MS] = "delay_ms",
    [SF_EVERY_MS] = "every_ms",
    [SF_CRON] = "cron",
    [SF_TIMEZONE] = "timezone",
    [SF_CATCHUP_POLICY] = "catchup_policy",
    [SF_OVERLAP_POLICY] = "overlap_policy",
    [SF_OVERLAP_RETRY_MS] = "overlap_retry_ms",
    [SF_MAX_FIRES] = "max_fires",
    [SF_END_AT_MS] = "end_at_ms",
    [SF_TARGET] = "target",
    [SF_OVERWRITE] = "overwrite",
    [SF_NOW_MS] = "now_ms",
    [SF_FIRE_AT_MS] = "fire_at_ms",
    [SF_WORKER] = "worker",
    [SF_LIMIT] = "limit",
    [SF_LEASE_MS] = "lease_ms",
    [SF_BLOCK_MS] = "block_ms",
    [SF_STATE] = "state",
    [SF_TARGET_TYPE] = "target_type",
    [SF_FROM_MS] = "from_ms",
    [SF_TO_MS] = "to_ms",
    [SF_COUNT] = "count",
    [SF_REV] = "rev",
};

#define B(f) (UINT32_C(1) << (f))

static uint32_t allowed(uint16_t opcode)
{
	switch (opcode) {
	case FSNP_OP_FLOW_SCHEDULE_CREATE:
		return B(SF_ID) | B(SF_KIND) | B(SF_AT_MS) | B(SF_START_AT_MS) |
		       B(SF_DELAY_MS) | B(SF_EVERY_MS) | B(SF_CRON) |
		       B(SF_TIMEZONE) | B(SF_CATCHUP_POLICY) |
		       B(SF_OVERLAP_POLICY) | B(SF_OVERLAP_RETRY_MS) |
		       B(SF_MAX_FIRES) | B(SF_END_AT_MS) | B(SF_TARGET) |
		       B(SF_OVERWRITE) | B(SF_NOW_MS);
	case FSNP_OP_FLOW_SCHEDULE_GET:
		return B(SF_ID) | B(SF_NOW_MS);
	case FSNP_OP_FLOW_SCHEDULE_DELETE:
	case FSNP_OP_FLOW_SCHEDULE_PAUSE:
	case FSNP_OP_FLOW_SCHEDULE_RESUME:
		return B(SF_ID) | B(SF_NOW_MS);
	case FSNP_OP_FLOW_SCHEDULE_FIRE:
		return B(SF_ID) | B(SF_FIRE_AT_MS) | B(SF_NOW_MS);
	case FSNP_OP_FLOW_SCHEDULE_FIRE_DUE:
		return B(SF_WORKER) | B(SF_LIMIT) | B(SF_LEASE_MS) |
		       B(SF_BLOCK_MS) | B(SF_NOW_MS);
	case FSNP_OP_FLOW_SCHEDULE_LIST:
		return B(SF_STATE) | B(SF_KIND) | B(SF_TARGET_TYPE) |
		       B(SF_TIMEZONE) | B(SF_FROM_MS) | B(SF_TO_MS) |
		       B(SF_COUNT) | B(SF_REV) | B(SF_NOW_MS);
	default:
		return 0;
	}
}

static int E(struct flow_err *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int E(struct flow_err *err, int status, const char *fmt, ...)
{
	va_list ap;
	err->status = status;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	return -1;
}

static int key_field(struct fsnp_bytes k)
{
	for (int f = 0; f < SF_N; f++) {
		if (fsnp_bytes_eq(k, sf_names[f])) {
			return f;
		}
	}
	return -1;
}

static bool dropped(struct fsnp_bytes k)
{
	return fsnp_bytes_eq(k, "deadline_ms") ||
	       fsnp_bytes_eq(k, "request_context");
}

/* One map's keys into q: `top` entries win over `opts` ones. */
static int take(struct sched_req *q, const struct fsnp_val *m, bool top,
                uint32_t ok, struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	bool seen[SF_N] = {false};

	fsnp_iter_init(&it, m);
	while (fsnp_iter_next(&it, &k, &v)) {
		int f;
		if (dropped(k) || (top && fsnp_bytes_eq(k, "opts"))) {
			continue;
		}
		f = key_field(k);
		if (f < 0 || !(ok & B(f))) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR unsupported flow schedule option %.*s",
			         (int)(k.len > 200 ? 200 : k.len),
			         (const char *)k.ptr);
		}
		if (seen[f]) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR duplicate flow schedule option %s",
			         sf_names[f]);
		}
		seen[f] = true;
		if (!top && q->f[f].set) {
			continue;
		}
		q->f[f].set = true;
		q->f[f].v = v;
	}
	return 0;
}

const char *sched_field_name(enum sched_field f)
{
	return f < SF_N ? sf_names[f] : "?";
}

int sched_req_decode(uint16_t opcode, const uint8_t *body, size_t len,
                     struct sched_req *q, struct flow_err *err)
{
	struct fsnp_val m, opts;
	uint32_t ok = allowed(opcode);

	memset(q, 0, sizeof *q);
	q->opcode = opcode;
	if (ok == 0) {
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native unsupported flow opcode 0x%04x", opcode);
	}
	if (fsnp_value_decode_body(body, len, NULL, &m) != 0) {
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native flow body is malformed");
	}
	if (m.tag != FSNP_MAP) {
		m.tag = FSNP_NIL; /* a non-map body is {} */
	}
	if (m.tag == FSNP_MAP) {
		if (take(q, &m, true, ok, err) != 0) {
			return -1;
		}
		if (fsnp_map_get(&m, "opts", &opts) == 0 &&
		    opts.tag == FSNP_MAP &&
		    take(q, &opts, false, ok, err) != 0) {
			return -1;
		}
	}
	if (ok & B(SF_ID)) {
		struct fsnp_bytes id;
		if (!q->f[SF_ID].set ||
		    fsnp_val_bin(&q->f[SF_ID].v, &id) != 0) {
			return E(err, FLOW_STATUS_BAD_REQUEST,
			         "ERR native field id must be binary");
		}
		if (id.len == 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow id must be a non-empty string");
		}
		if (id.len > FLOW_SCHED_ID_MAX) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow id too large (max %d bytes)",
			         FLOW_SCHED_ID_MAX);
		}
		q->id = id;
	}
	/* Integer options, shared by every opcode. */
	for (int f = 0; f < SF_N; f++) {
		static const uint32_t ints =
		    B(SF_AT_MS) | B(SF_START_AT_MS) | B(SF_DELAY_MS) |
		    B(SF_EVERY_MS) | B(SF_OVERLAP_RETRY_MS) | B(SF_MAX_FIRES) |
		    B(SF_END_AT_MS) | B(SF_NOW_MS) | B(SF_FIRE_AT_MS) |
		    B(SF_LIMIT) | B(SF_LEASE_MS) | B(SF_BLOCK_MS) |
		    B(SF_FROM_MS) | B(SF_TO_MS) | B(SF_COUNT);
		int64_t v;
		if (!q->f[f].set || !(ints & B(f))) {
			continue;
		}
		if (fsnp_val_i64(&q->f[f].v, &v) != 0 || v < 0) {
			if (q->f[f].v.tag == FSNP_U64) {
				return E(err, FLOW_STATUS_ERROR,
				         "ERR flow schedule %s exceeds maximum "
				         "9007199254740991",
				         sf_names[f]);
			}
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule %s must be a non-negative "
			         "integer",
			         sf_names[f]);
		}
		if (v > FLOW_MAXI) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule %s exceeds maximum "
			         "9007199254740991",
			         sf_names[f]);
		}
		q->i[f] = v;
	}
	for (int f = 0; f < SF_N; f++) {
		static const uint32_t bools = B(SF_OVERWRITE) | B(SF_REV);
		static const uint32_t texts =
		    B(SF_KIND) | B(SF_CRON) | B(SF_TIMEZONE) |
		    B(SF_CATCHUP_POLICY) | B(SF_OVERLAP_POLICY) | B(SF_WORKER) |
		    B(SF_STATE) | B(SF_TARGET_TYPE);
		if (!q->f[f].set) {
			continue;
		}
		if ((bools & B(f)) &&
		    fsnp_val_bool(&q->f[f].v, &q->b[f]) != 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule %s must be a boolean",
			         sf_names[f]);
		}
		if ((texts & B(f)) &&
		    (fsnp_val_bin(&q->f[f].v, &q->t[f]) != 0 ||
		     q->t[f].len == 0)) {
			return E(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow schedule %s must be a non-empty string",
			    sf_names[f]);
		}
	}
	if (opcode == FSNP_OP_FLOW_SCHEDULE_FIRE_DUE && q->f[SF_LIMIT].set &&
	    (q->i[SF_LIMIT] < 1 || q->i[SF_LIMIT] > FLOW_SCHED_FIRE_DUE_MAX)) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule limit must be between 1 and %d",
		         FLOW_SCHED_FIRE_DUE_MAX);
	}
	if (opcode == FSNP_OP_FLOW_SCHEDULE_LIST) {
		static const char *const states[] = {
		    "active", "paused",    "running", "completed",
		    "failed", "cancelled", "all"};
		bool good = !q->f[SF_STATE].set;
		for (size_t i = 0; !good && i < 7; i++) {
			good = q->t[SF_STATE].len == strlen(states[i]) &&
			       strncasecmp((const char *)q->t[SF_STATE].ptr,
			                   states[i], q->t[SF_STATE].len) == 0;
		}
		if (!good) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule state must be active, "
			         "paused, running, completed, failed, "
			         "cancelled, or all");
		}
		if (q->f[SF_FROM_MS].set && q->f[SF_TO_MS].set &&
		    q->i[SF_FROM_MS] > q->i[SF_TO_MS]) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule from_ms must be less than "
			         "or equal to to_ms");
		}
	}
	return 0;
}

/* --- definitions ---------------------------------------------------------- */

static bool ieq(struct fsnp_bytes b, const char *s)
{
	return b.len == strlen(s) &&
	       strncasecmp((const char *)b.ptr, s, b.len) == 0;
}

const char *sched_kind_name(enum sched_kind k)
{
	static const char *const names[] = {"one_shot", "delay", "interval",
	                                    "cron"};
	return names[k];
}

static const char *only_for(enum sched_field f)
{
	switch (f) {
	case SF_EVERY_MS:
	case SF_CATCHUP_POLICY:
		return "interval";
	case SF_CRON:
	case SF_TIMEZONE:
		return "cron";
	case SF_DELAY_MS:
		return "delay";
	case SF_AT_MS:
	case SF_START_AT_MS:
		return "one_shot, interval, and cron";
	case SF_OVERLAP_POLICY:
	case SF_OVERLAP_RETRY_MS:
	case SF_MAX_FIRES:
	case SF_END_AT_MS:
		return "interval and cron";
	default:
		return NULL;
	}
}

static bool applies(enum sched_field f, enum sched_kind k)
{
	switch (f) {
	case SF_EVERY_MS:
	case SF_CATCHUP_POLICY:
		return k == SK_INTERVAL;
	case SF_CRON:
	case SF_TIMEZONE:
		return k == SK_CRON;
	case SF_DELAY_MS:
		return k == SK_DELAY;
	case SF_AT_MS:
	case SF_START_AT_MS:
		return k != SK_DELAY;
	case SF_OVERLAP_POLICY:
	case SF_OVERLAP_RETRY_MS:
	case SF_MAX_FIRES:
	case SF_END_AT_MS:
		return k == SK_INTERVAL || k == SK_CRON;
	default:
		return true;
	}
}

static const char *const target_fields[] = {
    "type",           "state",        "id",       "id_prefix",
    "partition_key",  "run_at_ms",    "priority", "correlation_id",
    "parent_flow_id", "root_flow_id", "payload",  "payload_ref",
    "values",         "value_refs",
};
#define N_TARGET_FIELDS (sizeof target_fields / sizeof target_fields[0])

static int target_check(const struct fsnp_val *t, struct sched_def *d,
                        struct flow_err *err)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;
	bool seen[N_TARGET_FIELDS] = {false};

	fsnp_iter_init(&it, t);
	while (fsnp_iter_next(&it, &k, &v)) {
		size_t f;
		for (f = 0; f < N_TARGET_FIELDS; f++) {
			if (fsnp_bytes_eq(k, target_fields[f])) {
				break;
			}
		}
		if (f == N_TARGET_FIELDS) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR unsupported flow schedule target field "
			         "%.*s",
			         (int)(k.len > 200 ? 200 : k.len),
			         (const char *)k.ptr);
		}
		if (seen[f]) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR duplicate flow schedule target field %s",
			         target_fields[f]);
		}
		seen[f] = true;
		if (fsnp_bytes_eq(k, "payload") &&
		    v.enc_len > FLOW_SCHED_INLINE_MAX) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule payload too large; use "
			         "payload_ref");
		}
		if (fsnp_bytes_eq(k, "values") &&
		    v.enc_len > FLOW_SCHED_INLINE_MAX) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule values too large; use "
			         "value_refs");
		}
		if (fsnp_bytes_eq(k, "run_at_ms") ||
		    fsnp_bytes_eq(k, "priority")) {
			int64_t n;
			if (fsnp_val_i64(&v, &n) != 0 || n < 0 ||
			    n > FLOW_MAXI) {
				return E(
				    err, FLOW_STATUS_ERROR,
				    "ERR flow schedule target %s must be a "
				    "non-negative integer",
				    target_fields[f]);
			}
			if (fsnp_bytes_eq(k, "priority") && n > 2) {
				return E(err, FLOW_STATUS_ERROR,
				         "ERR flow priority must be between 0 "
				         "and 2");
			}
			continue;
		}
		if (fsnp_bytes_eq(k, "payload") || fsnp_bytes_eq(k, "values") ||
		    fsnp_bytes_eq(k, "value_refs")) {
			continue;
		}
		struct fsnp_bytes b;
		if (fsnp_val_bin(&v, &b) != 0 || b.len == 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule target %s must be a "
			         "non-empty string",
			         target_fields[f]);
		}
		if (b.len > FLOW_SCHED_ID_MAX) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule target %s too large (max "
			         "%d bytes)",
			         target_fields[f], FLOW_SCHED_ID_MAX);
		}
		if (fsnp_bytes_eq(k, "type")) {
			d->target_type = b;
		} else if (fsnp_bytes_eq(k, "id")) {
			d->target_id = b;
		} else if (fsnp_bytes_eq(k, "id_prefix")) {
			d->target_prefix = b;
		} else if (fsnp_bytes_eq(k, "state") &&
		           (fsnp_bytes_eq(b, "running") ||
		            fsnp_bytes_eq(b, "completed") ||
		            fsnp_bytes_eq(b, "failed") ||
		            fsnp_bytes_eq(b, "cancelled"))) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule target state must not be "
			         "running or terminal");
		}
	}
	if (d->target_type.ptr == NULL) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule target type is required");
	}
	if (fsnp_bytes_eq(d->target_type, "__ferricstore_schedule")) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow type is reserved for internal use");
	}
	if (d->target_id.ptr != NULL && d->target_prefix.ptr != NULL) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule target cannot set both id and "
		         "id_prefix");
	}
	if (d->target_id.ptr != NULL &&
	    (d->kind == SK_INTERVAL || d->kind == SK_CRON)) {
		return E(
		    err, FLOW_STATUS_ERROR,
		    "ERR recurring schedule target must use id_prefix, not "
		    "id");
	}
	if (d->target_id.ptr != NULL &&
	    d->target_id.len >= strlen(FLOW_SCHED_FLOW_PREFIX) &&
	    memcmp(d->target_id.ptr, FLOW_SCHED_FLOW_PREFIX,
	           strlen(FLOW_SCHED_FLOW_PREFIX)) == 0) {
		return E(
		    err, FLOW_STATUS_ERROR,
		    "ERR scheduled target id is reserved for internal use");
	}
	return 0;
}

int sched_def_check(const struct sched_req *q, size_t body_len,
                    struct sched_def *d, struct flow_err *err)
{
	memset(d, 0, sizeof *d);
	d->id = q->id;
	if (body_len > FLOW_SCHED_DEF_MAX) {
		return E(
		    err, FLOW_STATUS_ERROR,
		    "ERR flow schedule definition too large (max %d bytes)",
		    FLOW_SCHED_DEF_MAX);
	}
	if (d->id.len >= strlen(FLOW_SCHED_FLOW_PREFIX) &&
	    memcmp(d->id.ptr, FLOW_SCHED_FLOW_PREFIX,
	           strlen(FLOW_SCHED_FLOW_PREFIX)) == 0) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow id is reserved for internal use");
	}
	if (q->f[SF_KIND].set) {
		struct fsnp_bytes k = q->t[SF_KIND];
		if (ieq(k, "one_shot")) {
			d->kind = SK_ONE_SHOT;
		} else if (ieq(k, "delay")) {
			d->kind = SK_DELAY;
		} else if (ieq(k, "interval")) {
			d->kind = SK_INTERVAL;
		} else if (ieq(k, "cron")) {
			d->kind = SK_CRON;
		} else {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule kind must be one_shot, "
			         "delay, interval, or cron");
		}
	} else if (q->f[SF_CRON].set) {
		d->kind = SK_CRON;
	} else if (q->f[SF_EVERY_MS].set) {
		d->kind = SK_INTERVAL;
	} else if (q->f[SF_DELAY_MS].set) {
		d->kind = SK_DELAY;
	} else {
		d->kind = SK_ONE_SHOT;
	}
	for (int f = 0; f < SF_N; f++) {
		if (q->f[f].set && !applies((enum sched_field)f, d->kind)) {
			return E(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow schedule %s is only supported for %s "
			    "schedules",
			    sf_names[f], only_for((enum sched_field)f));
		}
	}
	if (q->f[SF_AT_MS].set && q->f[SF_START_AT_MS].set) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule cannot set both at_ms and "
		         "start_at_ms");
	}
	d->start = q->f[SF_AT_MS].set         ? q->i[SF_AT_MS]
	           : q->f[SF_START_AT_MS].set ? q->i[SF_START_AT_MS]
	                                      : -1;
	switch (d->kind) {
	case SK_DELAY:
		if (!q->f[SF_DELAY_MS].set) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule delay_ms must be a "
			         "non-negative integer");
		}
		d->delay = q->i[SF_DELAY_MS];
		break;
	case SK_INTERVAL:
		if (!q->f[SF_EVERY_MS].set || q->i[SF_EVERY_MS] <= 0) {
			return E(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow schedule every_ms must be a positive "
			    "integer");
		}
		d->every = q->i[SF_EVERY_MS];
		if (q->f[SF_CATCHUP_POLICY].set &&
		    !ieq(q->t[SF_CATCHUP_POLICY], "fire_once")) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule catchup_policy must be "
			         ":fire_once");
		}
		break;
	case SK_CRON: {
		char msg[200];
		if (!q->f[SF_CRON].set) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule cron must be a string");
		}
		d->cron = q->t[SF_CRON];
		if (cron_parse(&d->cr, (const char *)d->cron.ptr, d->cron.len,
		               msg, sizeof msg) != 0) {
			return E(err, FLOW_STATUS_ERROR, "%s", msg);
		}
		d->tz =
		    q->f[SF_TIMEZONE].set
		        ? q->t[SF_TIMEZONE]
		        : (struct fsnp_bytes){(const uint8_t *)"Etc/UTC", 7};
		if (ieq(d->tz, "UTC")) {
			d->tz =
			    (struct fsnp_bytes){(const uint8_t *)"Etc/UTC", 7};
		}
		if (!tz_name_valid((const char *)d->tz.ptr, d->tz.len)) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule timezone is invalid or "
			         "unavailable");
		}
		break;
	}
	default:
		break;
	}
	d->overlap = "allow";
	if (q->f[SF_OVERLAP_POLICY].set) {
		static const char *const pols[] = {
		    "allow", "skip", "queue_after_previous", "fail_schedule"};
		d->overlap = NULL;
		for (size_t i = 0; i < 4; i++) {
			if (ieq(q->t[SF_OVERLAP_POLICY], pols[i])) {
				d->overlap = pols[i];
			}
		}
		if (d->overlap == NULL) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule overlap_policy must be "
			         "allow, skip, queue_after_previous, or "
			         "fail_schedule");
		}
	}
	d->overlap_retry = -1;
	if (q->f[SF_OVERLAP_RETRY_MS].set) {
		if (strcmp(d->overlap, "queue_after_previous") != 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule overlap_retry_ms requires "
			         "overlap_policy queue_after_previous");
		}
		if (q->i[SF_OVERLAP_RETRY_MS] <= 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule overlap_retry_ms must be a "
			         "positive integer");
		}
		d->overlap_retry = q->i[SF_OVERLAP_RETRY_MS];
	}
	d->max_fires = -1;
	if (q->f[SF_MAX_FIRES].set) {
		if (q->i[SF_MAX_FIRES] <= 0) {
			return E(
			    err, FLOW_STATUS_ERROR,
			    "ERR flow schedule max_fires must be a positive "
			    "integer");
		}
		d->max_fires = q->i[SF_MAX_FIRES];
	}
	d->end_at = q->f[SF_END_AT_MS].set ? q->i[SF_END_AT_MS] : -1;
	if (!q->f[SF_TARGET].set || fsnp_val_is_nil(&q->f[SF_TARGET].v)) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule target is required");
	}
	if (q->f[SF_TARGET].v.tag != FSNP_MAP) {
		return E(err, FLOW_STATUS_ERROR,
		         "ERR flow schedule target must be a map");
	}
	d->target = q->f[SF_TARGET].v;
	d->overwrite = q->f[SF_OVERWRITE].set && q->b[SF_OVERWRITE];
	return target_check(&d->target, d, err);
}

int sched_def_first_run(const struct sched_def *d, int64_t now,
                        const char *tzdir, int64_t *out, struct flow_err *err)
{
	int64_t start = d->start >= 0 ? d->start : now;
	switch (d->kind) {
	case SK_DELAY:
		if (now > FLOW_MAXI - d->delay) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule delay_ms deadline exceeds "
			         "maximum 9007199254740991");
		}
		*out = now + d->delay;
		break;
	case SK_CRON: {
		struct tz z;
		char msg[200];
		if (tz_load(&z, tzdir, (const char *)d->tz.ptr, d->tz.len, msg,
		            sizeof msg) != 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule timezone is invalid or "
			         "unavailable");
		}
		int rv = cron_next(&d->cr, &z, start - 1, out, msg, sizeof msg);
		tz_free(&z);
		if (rv != 0) {
			return E(err, FLOW_STATUS_ERROR, "%s", msg);
		}
		break;
	}
	default:
		*out = start;
		break;
	}
	if (d->end_at >= 0 && d->end_at < *out) {
		return E(
		    err, FLOW_STATUS_ERROR,
		    "ERR flow schedule end_at_ms must be at or after first "
		    "run");
	}
	return 0;
}
