/* FerricFlow schedules (flow_schedule.h): records and their keys, the
 * proposer's planning, and the schedule ops' apply and read. */
#include "flow/flow_schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "flow/cron.h"
#include "flow/flow_record.h"
#include "flow/flow_sched_def.h"
#include "flow/tz.h"
#include "store/buf.h"
#include "store/command.h"
#include "store/ext.h"
#include "store/keys.h"
#include "store/result.h"
#include "wire/base64url.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define HEADER_LEN (1 + 1 + 1 + 2 + 8 + 4)

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

static struct fsnp_bytes cb(const char *s)
{
	struct fsnp_bytes b = {(const uint8_t *)s, strlen(s)};
	return b;
}

bool flow_sched_opcode(uint16_t opcode)
{
	return opcode >= FSNP_OP_FLOW_SCHEDULE_CREATE &&
	       opcode <= FSNP_OP_FLOW_SCHEDULE_RESUME;
}

bool flow_sched_kind_is_read(uint16_t kind)
{
	return kind == FSNP_OP_FLOW_SCHEDULE_GET ||
	       kind == FSNP_OP_FLOW_SCHEDULE_LIST ||
	       kind == FLOW_SCHED_KIND_SCAN;
}

static bool kind_known(uint16_t kind)
{
	switch (kind) {
	case FSNP_OP_FLOW_SCHEDULE_CREATE:
	case FSNP_OP_FLOW_SCHEDULE_GET:
	case FSNP_OP_FLOW_SCHEDULE_DELETE:
	case FSNP_OP_FLOW_SCHEDULE_LIST:
	case FSNP_OP_FLOW_SCHEDULE_PAUSE:
	case FSNP_OP_FLOW_SCHEDULE_RESUME:
	case FLOW_SCHED_KIND_SCAN:
	case FLOW_SCHED_KIND_RECORD:
	case FLOW_SCHED_KIND_OUTBOX_DONE:
		return true;
	default:
		return false;
	}
}

size_t flow_sched_partition(const uint8_t *id, size_t len, char *buf)
{
	const uint8_t *part;
	size_t plen;
	flow_route_partition(id, len, NULL, 0, buf, &part, &plen);
	if ((const char *)part != buf) {
		memmove(buf, part, plen);
	}
	return plen;
}

/* --- the command envelope ------------------------------------------------ */

int flow_sched_cmd_wrap(uint16_t kind, uint64_t skew, const uint8_t *body,
                        size_t len, uint8_t **out, size_t *out_len)
{
	struct sbuf b;
	if (len > UINT32_MAX) {
		return -1;
	}
	sbuf_init(&b);
	sbuf_reserve(&b, HEADER_LEN + len);
	sbuf_u8(&b, STORE_CMD_VERSION);
	sbuf_u8(&b, flow_sched_kind_is_read(kind) ? FLOW_SCHED_OP_READ
	                                          : FLOW_SCHED_OP_APPLY);
	sbuf_u8(&b, FLOW_SCHED_CMD_VERSION);
	sbuf_u16(&b, kind);
	sbuf_u64(&b, skew);
	sbuf_lbytes(&b, body, len);
	*out = sbuf_take(&b, out_len);
	return *out == NULL ? -1 : 0;
}

int flow_sched_body_check(uint16_t opcode, const uint8_t *body, size_t len,
                          struct flow_err *err)
{
	struct sched_req q;
	struct sched_def d;
	if (sched_req_decode(opcode, body, len, &q, err) != 0) {
		return -1;
	}
	if (opcode == FSNP_OP_FLOW_SCHEDULE_CREATE) {
		return sched_def_check(&q, len, &d, err);
	}
	return 0;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int flow_sched_cmd_encode(uint16_t opcode, const uint8_t *body, size_t len,
                          uint64_t skew, int64_t now_ms, const char *tzdir,
                          uint8_t **out, size_t *out_len, struct flow_err *err)
{
	static const uint8_t empty_map[5] = {FSNP_MAP, 0, 0, 0, 0};
	struct sched_req q;
	struct sched_def d;
	struct wbuf b;
	struct fsnp_writer w;
	int rv;

	if (opcode == FSNP_OP_FLOW_SCHEDULE_FIRE ||
	    opcode == FSNP_OP_FLOW_SCHEDULE_FIRE_DUE ||
	    !flow_sched_opcode(opcode)) {
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native flow schedule opcode 0x%04x is not a "
		         "command",
		         opcode);
	}
	if (sched_req_decode(opcode, body, len, &q, err) != 0) {
		return -1;
	}
	if (len == 0) {
		body = empty_map;
		len = sizeof empty_map;
	}
	if (opcode != FSNP_OP_FLOW_SCHEDULE_CREATE) {
		if (flow_sched_cmd_wrap(opcode, skew, body, len, out,
		                        out_len) != 0) {
			return E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
		}
		return 0;
	}
	if (sched_def_check(&q, len, &d, err) != 0) {
		return -1;
	}
	int64_t now = q.f[SF_NOW_MS].set ? q.i[SF_NOW_MS]
	              : now_ms >= 0      ? now_ms
	                                 : wall_ms();
	int64_t first = -1;
	if (sched_def_first_run(&d, now, tzdir, &first, err) != 0) {
		return -1;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "req");
	fsnp_w_bin(&w, body, len);
	fsnp_w_key(&w, "first_run_at_ms");
	if (d.kind == SK_CRON) {
		fsnp_w_i64(&w, first);
	} else {
		fsnp_w_nil(&w); /* planned at apply from the entry's time */
	}
	/* Drawn here, not at apply: every replica stores the same. */
	uint8_t secret[FLOW_SCHED_SECRET_LEN];
	if (RAND_bytes(secret, sizeof secret) != 1) {
		wbuf_free(&b);
		return E(err, FLOW_STATUS_BUSY,
		         "BUSY no randomness for the schedule's owner secret");
	}
	fsnp_w_key(&w, "owner_secret");
	fsnp_w_bin(&w, secret, sizeof secret);
	fsnp_w_map_end(&w);
	rv =
	    fsnp_w_finish(&w) == 0 && !b.oom
	        ? flow_sched_cmd_wrap(opcode, skew, b.data, b.len, out, out_len)
	        : -1;
	wbuf_free(&b);
	if (rv != 0) {
		return E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
	}
	return 0;
}

struct scmd {
	uint8_t op;
	uint16_t kind;
	uint64_t skew;
	const uint8_t *body;
	size_t body_len;
};

static int scmd_decode(const uint8_t *p, size_t len, struct scmd *c,
                       const char **msg)
{
	struct rd r;
	rd_init(&r, p, len);
	if (len < HEADER_LEN || rd_u8(&r) != STORE_CMD_VERSION) {
		*msg = "schedule command truncated or of another version";
		return -1;
	}
	c->op = rd_u8(&r);
	if (rd_u8(&r) != FLOW_SCHED_CMD_VERSION) {
		*msg = "unknown schedule command version";
		return -1;
	}
	c->kind = rd_u16(&r);
	c->skew = rd_u64(&r);
	c->body = rd_lbytes(&r, &c->body_len);
	if (r.bad || !rd_done(&r)) {
		*msg = "schedule command malformed";
		return -1;
	}
	if (!kind_known(c->kind) ||
	    (c->op == FLOW_SCHED_OP_READ) != flow_sched_kind_is_read(c->kind)) {
		*msg = "schedule command op does not match its kind";
		return -1;
	}
	return 0;
}

/* --- records ---------------------------------------------------------------
 */

static const char *const ss_names[SS_N] = {
    [SS_ID] = "id",
    [SS_FLOW_ID] = "flow_id",
    [SS_STATE] = "state",
    [SS_KIND] = "kind",
    [SS_CRON] = "cron",
    [SS_TIMEZONE] = "timezone",
    [SS_CATCHUP_POLICY] = "catchup_policy",
    [SS_OVERLAP_POLICY] = "overlap_policy",
    [SS_END_REASON] = "end_reason",
    [SS_LAST_TARGET_ID] = "last_target_id",
    [SS_LAST_OVERLAP_TARGET_ID] = "last_overlap_target_id",
    [SS_LAST_OVERLAP_REASON] = "last_overlap_reason",
    [SS_LAST_PLANNING_ERROR] = "last_planning_error",
    [SS_PART] = "_part",
    [SS_LAST_TARGET_PART] = "_last_target_part",
    [SS_OWNER_SECRET] = "_owner_secret",
};

static const char *const si_names[SI_N] = {
    [SI_CREATED_AT_MS] = "created_at_ms",
    [SI_UPDATED_AT_MS] = "updated_at_ms",
    [SI_EVERY_MS] = "every_ms",
    [SI_NEXT_RUN_AT_MS] = "next_run_at_ms",
    [SI_FIRE_COUNT] = "fire_count",
    [SI_ATTEMPTS] = "attempts",
    [SI_LAST_FIRE_AT_MS] = "last_fire_at_ms",
    [SI_LAST_OVERLAP_AT_MS] = "last_overlap_at_ms",
    [SI_LAST_SKIPPED_AT_MS] = "last_skipped_at_ms",
    [SI_SKIPPED_COUNT] = "skipped_count",
    [SI_COALESCED_COUNT] = "coalesced_count",
    [SI_LAST_CATCHUP_AT_MS] = "last_catchup_at_ms",
    [SI_LAST_COALESCED_COUNT] = "last_coalesced_count",
    [SI_OVERLAP_RETRY_MS] = "overlap_retry_ms",
    [SI_OVERLAP_QUEUED_DUE_AT_MS] = "overlap_queued_due_at_ms",
    [SI_MAX_FIRES] = "max_fires",
    [SI_END_AT_MS] = "end_at_ms",
    [SI_VERSION] = "_version",
    [SI_OVERLAP_STREAK] = "_overlap_streak",
    [SI_HIST_LO] = "_hist_lo",
    [SI_HIST_MS] = "_hist_ms",
};

/* Counters read 0, never nil. */
static bool si_counter(enum sched_int f)
{
	return f == SI_FIRE_COUNT || f == SI_ATTEMPTS ||
	       f == SI_SKIPPED_COUNT || f == SI_COALESCED_COUNT ||
	       f == SI_LAST_COALESCED_COUNT || f == SI_VERSION ||
	       f == SI_OVERLAP_STREAK;
}

/* The public order (reference/flow.md 6.1). 's' string, 'i' integer,
 * 't' the target. */
static const struct {
	char type;
	int f;
} pub_order[] = {
    {'s', SS_ID},
    {'s', SS_FLOW_ID},
    {'s', SS_STATE},
    {'s', SS_KIND},
    {'i', SI_CREATED_AT_MS},
    {'i', SI_UPDATED_AT_MS},
    {'i', SI_EVERY_MS},
    {'s', SS_CRON},
    {'i', SI_NEXT_RUN_AT_MS},
    {'i', SI_FIRE_COUNT},
    {'i', SI_ATTEMPTS},
    {'i', SI_LAST_FIRE_AT_MS},
    {'s', SS_LAST_TARGET_ID},
    {'i', SI_LAST_OVERLAP_AT_MS},
    {'s', SS_LAST_OVERLAP_TARGET_ID},
    {'s', SS_LAST_OVERLAP_REASON},
    {'i', SI_LAST_SKIPPED_AT_MS},
    {'i', SI_SKIPPED_COUNT},
    {'s', SS_CATCHUP_POLICY},
    {'i', SI_COALESCED_COUNT},
    {'i', SI_LAST_CATCHUP_AT_MS},
    {'i', SI_LAST_COALESCED_COUNT},
    {'s', SS_LAST_PLANNING_ERROR},
    {'s', SS_OVERLAP_POLICY},
    {'i', SI_OVERLAP_RETRY_MS},
    {'i', SI_OVERLAP_QUEUED_DUE_AT_MS},
    {'i', SI_MAX_FIRES},
    {'i', SI_END_AT_MS},
    {'s', SS_END_REASON},
    {'s', SS_TIMEZONE},
    {'t', 0},
};

static void rec_clear(struct flow_sched_rec *r)
{
	memset(r, 0, sizeof *r);
	for (int i = 0; i < SI_N; i++) {
		r->i[i] = si_counter((enum sched_int)i) ? 0 : -1;
	}
	r->target.tag = FSNP_NIL;
}

int flow_sched_rec_decode(const struct fsnp_val *map, struct flow_sched_rec *r)
{
	struct fsnp_iter it;
	struct fsnp_bytes k;
	struct fsnp_val v;

	rec_clear(r);
	if (map->tag != FSNP_MAP) {
		return -1;
	}
	fsnp_iter_init(&it, map);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (fsnp_bytes_eq(k, "target")) {
			r->target = v;
			continue;
		}
		for (int f = 0; f < SS_N; f++) {
			if (fsnp_bytes_eq(k, ss_names[f]) &&
			    v.tag == FSNP_BIN) {
				r->s[f] = v.as.bin;
			}
		}
		for (int f = 0; f < SI_N; f++) {
			int64_t n;
			if (fsnp_bytes_eq(k, si_names[f]) &&
			    fsnp_val_i64(&v, &n) == 0 && n >= 0) {
				r->i[f] = n;
			}
		}
	}
	return r->s[SS_ID].ptr != NULL && r->s[SS_STATE].ptr != NULL ? 0 : -1;
}

static void w_str_or_nil(struct fsnp_writer *w, struct fsnp_bytes b)
{
	if (b.ptr == NULL) {
		fsnp_w_nil(w);
	} else {
		fsnp_w_bin(w, b.ptr, b.len);
	}
}

void flow_sched_rec_write(struct fsnp_writer *w, const struct flow_sched_rec *r,
                          bool internal)
{
	fsnp_w_map_begin(w);
	for (size_t i = 0; i < sizeof pub_order / sizeof pub_order[0]; i++) {
		int f = pub_order[i].f;
		switch (pub_order[i].type) {
		case 's':
			fsnp_w_key(w, ss_names[f]);
			w_str_or_nil(w, r->s[f]);
			break;
		case 'i':
			fsnp_w_key(w, si_names[f]);
			if (r->i[f] < 0) {
				fsnp_w_nil(w);
			} else {
				fsnp_w_i64(w, r->i[f]);
			}
			break;
		default:
			fsnp_w_key(w, "target");
			if (r->target.tag == FSNP_NIL) {
				fsnp_w_nil(w);
			} else {
				fsnp_w_val(w, &r->target);
			}
			break;
		}
	}
	if (internal) {
		fsnp_w_key(w, ss_names[SS_PART]);
		w_str_or_nil(w, r->s[SS_PART]);
		fsnp_w_key(w, ss_names[SS_LAST_TARGET_PART]);
		w_str_or_nil(w, r->s[SS_LAST_TARGET_PART]);
		fsnp_w_key(w, ss_names[SS_OWNER_SECRET]);
		w_str_or_nil(w, r->s[SS_OWNER_SECRET]);
		fsnp_w_key(w, si_names[SI_VERSION]);
		fsnp_w_i64(w, r->i[SI_VERSION]);
		fsnp_w_key(w, si_names[SI_OVERLAP_STREAK]);
		fsnp_w_i64(w, r->i[SI_OVERLAP_STREAK]);
		for (int f = SI_HIST_LO; f <= SI_HIST_MS; f++) {
			if (r->i[f] >= 0) {
				fsnp_w_key(w, si_names[f]);
				fsnp_w_i64(w, r->i[f]);
			}
		}
	}
	fsnp_w_map_end(w);
}

bool flow_sched_is(const struct flow_sched_rec *r, enum sched_str f,
                   const char *s)
{
	return r->s[f].ptr != NULL && fsnp_bytes_eq(r->s[f], s);
}

static bool rec_terminal(const struct flow_sched_rec *r)
{
	return flow_sched_is(r, SS_STATE, "completed") ||
	       flow_sched_is(r, SS_STATE, "failed") ||
	       flow_sched_is(r, SS_STATE, "cancelled");
}

/* --- keys ---------------------------------------------------------------- */

static void key_rec(struct sbuf *k, uint32_t g, struct fsnp_bytes part,
                    struct fsnp_bytes id)
{
	key_start(k, g, K_FLOW_SCHED);
	sbuf_lbytes(k, part.ptr, part.len);
	sbuf_lbytes(k, id.ptr, id.len);
}

static void key_due(struct sbuf *k, uint32_t g, int64_t at,
                    struct fsnp_bytes part, struct fsnp_bytes id)
{
	key_start(k, g, K_FLOW_SCHED_DUE);
	sbuf_u64(k, (uint64_t)at);
	sbuf_lbytes(k, part.ptr, part.len);
	sbuf_lbytes(k, id.ptr, id.len);
}

static void key_out(struct sbuf *k, uint32_t g, struct fsnp_bytes part,
                    struct fsnp_bytes id, int64_t due)
{
	key_start(k, g, K_FLOW_SCHED_OUT);
	sbuf_lbytes(k, part.ptr, part.len);
	sbuf_lbytes(k, id.ptr, id.len);
	sbuf_u64(k, (uint64_t)due);
}

/* --- an apply's context ----------------------------------------------------
 */

struct sctx {
	struct tx *tx;
	uint32_t group;
	int64_t entry_now;
	int64_t now;
	uint64_t skew;
	struct sbuf key;
	/* Loaded records' bytes, kept until the command ends. */
	struct sbuf *held;
	size_t nheld;
};

static void sctx_fini(struct sctx *c)
{
	for (size_t i = 0; i < c->nheld; i++) {
		sbuf_free(&c->held[i]);
	}
	free(c->held);
	sbuf_free(&c->key);
}

static struct sbuf *hold(struct sctx *c)
{
	struct sbuf *n = store_xrealloc(c->held, (c->nheld + 1) * sizeof *n);
	c->held = n;
	sbuf_init(&c->held[c->nheld]);
	return &c->held[c->nheld++];
}

static void set_now(struct sctx *c, bool set, int64_t v)
{
	int64_t lo, hi;
	c->now = c->entry_now;
	if (!set) {
		return;
	}
	lo = c->entry_now > (int64_t)c->skew ? c->entry_now - (int64_t)c->skew
	                                     : 0;
	hi = c->entry_now + (int64_t)c->skew;
	c->now = v < lo ? lo : v > hi ? hi : v;
}

/* Loads the schedule `id`: 1 found, 0 absent, -1 I/O failure. */
static int rec_load(struct sctx *c, struct fsnp_bytes id,
                    struct flow_sched_rec *r)
{
	char pbuf[FLOW_AUTO_PARTITION_MAX];
	struct fsnp_bytes part;
	struct fsnp_val v;
	struct sbuf *b = hold(c);
	int rv;

	part.len = flow_sched_partition(id.ptr, id.len, pbuf);
	part.ptr = (const uint8_t *)pbuf;
	key_rec(&c->key, c->group, part, id);
	rv = store_tx_get(c->tx, c->key.p, c->key.len, b);
	if (rv <= 0) {
		return rv;
	}
	if (fsnp_value_decode(b->p, b->len, NULL, &v, NULL) != 0 ||
	    flow_sched_rec_decode(&v, r) != 0) {
		return 0; /* unreadable: treated as absent */
	}
	return 1;
}

static bool has_due(const struct flow_sched_rec *r)
{
	return r != NULL && flow_sched_is(r, SS_STATE, "active") &&
	       r->i[SI_NEXT_RUN_AT_MS] >= 0;
}

/* Writes `r` and moves its due entry from `old`'s (NULL: new). */
static int rec_save(struct sctx *c, const struct flow_sched_rec *old,
                    const struct flow_sched_rec *r)
{
	struct wbuf b;
	struct fsnp_writer w;
	int rv = 0;

	if (has_due(old)) {
		key_due(&c->key, c->group, old->i[SI_NEXT_RUN_AT_MS],
		        old->s[SS_PART], old->s[SS_ID]);
		store_tx_del(c->tx, c->key.p, c->key.len);
	}
	if (has_due(r)) {
		key_due(&c->key, c->group, r->i[SI_NEXT_RUN_AT_MS],
		        r->s[SS_PART], r->s[SS_ID]);
		store_tx_put(c->tx, c->key.p, c->key.len, "", 0);
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	flow_sched_rec_write(&w, r, true);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		rv = -1;
	} else {
		key_rec(&c->key, c->group, r->s[SS_PART], r->s[SS_ID]);
		store_tx_put(c->tx, c->key.p, c->key.len, b.data, b.len);
	}
	wbuf_free(&b);
	return rv;
}

/* Appends event `signal` for r's current version to the history of its
 * flow_id in its partition (as FerricStore's signal on the schedule's
 * flow records it) and drops the oldest past FLOW_SCHED_HISTORY_MAX. */
static int sched_event(struct sctx *c, struct flow_sched_rec *r,
                       const char *signal)
{
	static const char *const nil_fields[] = {
	    "priority",          "attempts",       "fencing_token",
	    "created_at_ms",     "updated_at_ms",  "next_run_at_ms",
	    "lease_deadline_ms", "lease_owner",    "parent_flow_id",
	    "root_flow_id",      "correlation_id",
	};
	struct wbuf b;
	struct fsnp_writer w;
	struct sbuf k;
	char eid[48];
	int64_t version = r->i[SI_VERSION];
	int64_t ms = c->now;
	size_t plen;
	int rv = 0;

	if (r->i[SI_HIST_MS] > ms) {
		ms = r->i[SI_HIST_MS]; /* event ids never go back */
	}
	r->i[SI_HIST_MS] = ms;
	if (r->i[SI_HIST_LO] < 0) {
		r->i[SI_HIST_LO] = version;
	}
	snprintf(eid, sizeof eid, "%lld-%lld", (long long)ms,
	         (long long)version);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, eid);
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, "event");
	fsnp_w_str(&w, "signaled");
	fsnp_w_str(&w, "version");
	fsnp_w_i64(&w, version);
	fsnp_w_str(&w, "at");
	fsnp_w_i64(&w, c->now);
	fsnp_w_str(&w, "id");
	w_str_or_nil(&w, r->s[SS_FLOW_ID]);
	fsnp_w_str(&w, "type");
	fsnp_w_str(&w, FLOW_SCHED_FLOW_TYPE);
	fsnp_w_str(&w, "state");
	w_str_or_nil(&w, r->s[SS_STATE]);
	for (size_t i = 0; i < sizeof nil_fields / sizeof nil_fields[0]; i++) {
		const char *f = nil_fields[i];
		int64_t v = -1;
		fsnp_w_str(&w, f);
		if (strcmp(f, "created_at_ms") == 0) {
			v = r->i[SI_CREATED_AT_MS];
		} else if (strcmp(f, "updated_at_ms") == 0) {
			v = r->i[SI_UPDATED_AT_MS];
		} else if (strcmp(f, "next_run_at_ms") == 0) {
			v = r->i[SI_NEXT_RUN_AT_MS];
		} else if (strcmp(f, "attempts") == 0) {
			v = r->i[SI_ATTEMPTS];
		}
		if (v >= 0) {
			fsnp_w_i64(&w, v);
		} else {
			fsnp_w_nil(&w);
		}
	}
	fsnp_w_str(&w, "signal");
	fsnp_w_str(&w, signal);
	fsnp_w_array_end(&w);
	fsnp_w_array_end(&w);
	sbuf_init(&k);
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		rv = -1;
		goto out;
	}
	fkey_hist_prefix(&k, c->group, r->s[SS_PART], r->s[SS_FLOW_ID]);
	plen = k.len;
	sbuf_u64(&k, (uint64_t)version);
	store_tx_put(c->tx, k.p, k.len, b.data, b.len);
	while (version - r->i[SI_HIST_LO] + 1 > FLOW_SCHED_HISTORY_MAX) {
		k.len = plen;
		sbuf_u64(&k, (uint64_t)r->i[SI_HIST_LO]);
		store_tx_del(c->tx, k.p, k.len);
		r->i[SI_HIST_LO]++;
	}
out:
	sbuf_free(&k);
	wbuf_free(&b);
	return rv;
}

/* --- CREATE, DELETE, PAUSE, RESUME, GET ---------------------------------- */

static int op_create(struct sctx *c, const struct fsnp_val *body,
                     struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_val req, fr;
	struct sched_req q;
	struct sched_def d;
	struct flow_sched_rec old, r;
	char pbuf[FLOW_AUTO_PARTITION_MAX];
	char flow_id[sizeof FLOW_SCHED_FLOW_PREFIX + FLOW_SCHED_ID_MAX];
	int64_t first = -1;
	int found;

	if (fsnp_map_get(body, "req", &req) != 0 || req.tag != FSNP_BIN ||
	    sched_req_decode(FSNP_OP_FLOW_SCHEDULE_CREATE, req.as.bin.ptr,
	                     req.as.bin.len, &q, err) != 0 ||
	    sched_def_check(&q, req.as.bin.len, &d, err) != 0) {
		if (err->msg[0] == '\0') {
			E(err, FLOW_STATUS_BAD_REQUEST,
			  "ERR native schedule create command malformed");
		}
		return -1;
	}
	set_now(c, q.f[SF_NOW_MS].set, q.i[SF_NOW_MS]);
	if (d.kind == SK_CRON) {
		if (fsnp_map_get(body, "first_run_at_ms", &fr) != 0 ||
		    fsnp_val_i64(&fr, &first) != 0 || first < 0) {
			return E(err, FLOW_STATUS_BAD_REQUEST,
			         "ERR native schedule create command has no "
			         "planned first run");
		}
		if (d.end_at >= 0 && d.end_at < first) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule end_at_ms must be at or "
			         "after first run");
		}
	} else if (sched_def_first_run(&d, c->now, NULL, &first, err) != 0) {
		return -1;
	}
	found = rec_load(c, d.id, &old);
	if (found < 0) {
		return -2;
	}
	if (found == 1 && !d.overwrite) {
		return E(err, FLOW_STATUS_ERROR, "ERR flow already exists");
	}
	rec_clear(&r);
	r.s[SS_ID] = d.id;
	snprintf(flow_id, sizeof flow_id, "%s%.*s", FLOW_SCHED_FLOW_PREFIX,
	         (int)d.id.len, (const char *)d.id.ptr);
	r.s[SS_FLOW_ID] = cb(flow_id);
	r.s[SS_STATE] = cb("active");
	r.s[SS_KIND] = cb(sched_kind_name(d.kind));
	r.i[SI_CREATED_AT_MS] = c->now;
	r.i[SI_UPDATED_AT_MS] = c->now;
	if (d.kind == SK_INTERVAL) {
		r.i[SI_EVERY_MS] = d.every;
		r.s[SS_CATCHUP_POLICY] = cb("fire_once");
	}
	if (d.kind == SK_CRON) {
		r.s[SS_CRON] = d.cron;
		r.s[SS_TIMEZONE] = d.tz;
	}
	r.s[SS_OVERLAP_POLICY] = cb(d.overlap);
	r.i[SI_OVERLAP_RETRY_MS] = d.overlap_retry;
	r.i[SI_MAX_FIRES] = d.max_fires;
	r.i[SI_END_AT_MS] = d.end_at;
	r.i[SI_NEXT_RUN_AT_MS] = first;
	r.target = d.target;
	r.s[SS_PART].len = flow_sched_partition(d.id.ptr, d.id.len, pbuf);
	r.s[SS_PART].ptr = (const uint8_t *)pbuf;
	if (fsnp_map_get(body, "owner_secret", &fr) == 0 &&
	    fr.tag == FSNP_BIN && fr.as.bin.len == FLOW_SCHED_SECRET_LEN) {
		r.s[SS_OWNER_SECRET] = fr.as.bin;
	}
	r.i[SI_VERSION] = found == 1 ? old.i[SI_VERSION] + 1 : 1;
	if (found == 1) {
		/* An overwrite goes on with the same history. */
		r.i[SI_HIST_LO] = old.i[SI_HIST_LO];
		r.i[SI_HIST_MS] = old.i[SI_HIST_MS];
	}
	if (sched_event(c, &r, "schedule_created") != 0 ||
	    rec_save(c, found == 1 ? &old : NULL, &r) != 0) {
		return E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
	}
	flow_sched_rec_write(w, &r, false);
	return 0;
}

static int op_simple(struct sctx *c, uint16_t kind, const struct fsnp_val *body,
                     struct fsnp_writer *w, struct flow_err *err)
{
	struct sched_req q;
	struct flow_sched_rec old, r;
	int found;

	if (sched_req_decode(kind, body->enc, body->enc_len, &q, err) != 0) {
		return -1;
	}
	set_now(c, q.f[SF_NOW_MS].set, q.i[SF_NOW_MS]);
	found = rec_load(c, q.id, &old);
	if (found < 0) {
		return -2;
	}
	if (kind == FSNP_OP_FLOW_SCHEDULE_GET) {
		if (found == 0) {
			fsnp_w_nil(w);
		} else {
			flow_sched_rec_write(w, &old, false);
		}
		return 0;
	}
	if (found == 0) {
		return E(err, FLOW_STATUS_ERROR, "ERR flow schedule not found");
	}
	r = old;
	switch (kind) {
	case FSNP_OP_FLOW_SCHEDULE_DELETE:
		if (rec_terminal(&old)) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow is terminal; use FLOW.REWIND");
		}
		r.s[SS_STATE] = cb("cancelled");
		r.i[SI_NEXT_RUN_AT_MS] = -1;
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		break;
	case FSNP_OP_FLOW_SCHEDULE_PAUSE:
		if (!flow_sched_is(&old, SS_STATE, "active")) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule is not active");
		}
		r.s[SS_STATE] = cb("paused");
		break;
	case FSNP_OP_FLOW_SCHEDULE_RESUME:
		if (!flow_sched_is(&old, SS_STATE, "paused")) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule is not paused");
		}
		if (old.i[SI_NEXT_RUN_AT_MS] < 0) {
			return E(err, FLOW_STATUS_ERROR,
			         "ERR flow schedule has no next run time");
		}
		r.s[SS_STATE] = cb("active");
		break;
	default:
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native unsupported schedule command");
	}
	r.i[SI_UPDATED_AT_MS] = c->now;
	r.i[SI_VERSION] = old.i[SI_VERSION] + 1;
	if ((kind == FSNP_OP_FLOW_SCHEDULE_DELETE &&
	     sched_event(c, &r, "schedule_deleted") != 0) ||
	    rec_save(c, &old, &r) != 0) {
		return E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
	}
	if (kind == FSNP_OP_FLOW_SCHEDULE_DELETE) {
		fsnp_w_str(w, "OK");
	} else {
		flow_sched_rec_write(w, &r, false);
	}
	return 0;
}

/* --- LIST ---------------------------------------------------------------- */

struct list_item {
	int64_t next;
	struct fsnp_bytes id;
	struct fsnp_val rec;
	uint8_t *own; /* the bytes rec views, when the item owns them */
};

static int list_cmp(const void *a, const void *b)
{
	const struct list_item *x = a, *y = b;
	int64_t nx = x->next < 0 ? INT64_MAX : x->next;
	int64_t ny = y->next < 0 ? INT64_MAX : y->next;
	size_t n;
	int d;
	if (nx != ny) {
		return nx < ny ? -1 : 1;
	}
	n = x->id.len < y->id.len ? x->id.len : y->id.len;
	d = memcmp(x->id.ptr, y->id.ptr, n);
	if (d != 0) {
		return d;
	}
	return x->id.len < y->id.len ? -1 : x->id.len > y->id.len;
}

static void list_write(struct fsnp_writer *w, struct list_item *items, size_t n,
                       int64_t count, bool rev)
{
	if (n > 1) {
		qsort(items, n, sizeof *items, list_cmp);
	}
	if ((int64_t)n > count) {
		if (rev) {
			items += n - (size_t)count;
		}
		n = (size_t)count;
	}
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < n; i++) {
		fsnp_w_val(w, &items[rev ? n - 1 - i : i].rec);
	}
	fsnp_w_array_end(w);
}

static bool list_match(const struct sched_req *q,
                       const struct flow_sched_rec *r)
{
	struct fsnp_val tt;
	if (q->f[SF_STATE].set) {
		if (!fsnp_bytes_eq(q->t[SF_STATE], "all") &&
		    !(r->s[SS_STATE].len == q->t[SF_STATE].len &&
		      memcmp(r->s[SS_STATE].ptr, q->t[SF_STATE].ptr,
		             q->t[SF_STATE].len) == 0)) {
			return false;
		}
	} else if (!flow_sched_is(r, SS_STATE, "active")) {
		return false;
	}
	if (q->f[SF_KIND].set && !(r->s[SS_KIND].len == q->t[SF_KIND].len &&
	                           memcmp(r->s[SS_KIND].ptr, q->t[SF_KIND].ptr,
	                                  q->t[SF_KIND].len) == 0)) {
		return false;
	}
	if (q->f[SF_TIMEZONE].set &&
	    (r->s[SS_TIMEZONE].ptr == NULL ||
	     r->s[SS_TIMEZONE].len != q->t[SF_TIMEZONE].len ||
	     memcmp(r->s[SS_TIMEZONE].ptr, q->t[SF_TIMEZONE].ptr,
	            q->t[SF_TIMEZONE].len) != 0)) {
		return false;
	}
	if (q->f[SF_TARGET_TYPE].set) {
		struct fsnp_bytes t;
		if (fsnp_map_get(&r->target, "type", &tt) != 0 ||
		    fsnp_val_bin(&tt, &t) != 0 ||
		    t.len != q->t[SF_TARGET_TYPE].len ||
		    memcmp(t.ptr, q->t[SF_TARGET_TYPE].ptr, t.len) != 0) {
			return false;
		}
	}
	if ((q->f[SF_FROM_MS].set || q->f[SF_TO_MS].set) &&
	    r->i[SI_NEXT_RUN_AT_MS] < 0) {
		return false;
	}
	if (q->f[SF_FROM_MS].set &&
	    r->i[SI_NEXT_RUN_AT_MS] < q->i[SF_FROM_MS]) {
		return false;
	}
	if (q->f[SF_TO_MS].set && r->i[SI_NEXT_RUN_AT_MS] > q->i[SF_TO_MS]) {
		return false;
	}
	return true;
}

/* Keeps the public form of r as a list item (owning a copy). 0, or -1
 * out of memory. */
static int list_add(const struct flow_sched_rec *r, struct wbuf *pub,
                    struct list_item **items, size_t *n, size_t *cap)
{
	struct fsnp_writer pw;
	struct flow_sched_rec x;
	struct list_item *it;
	wbuf_reset(pub);
	fsnp_w_init(&pw, pub);
	flow_sched_rec_write(&pw, r, false);
	if (fsnp_w_finish(&pw) != 0 || pub->oom) {
		return -1;
	}
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*items = store_xrealloc(*items, *cap * sizeof **items);
	}
	it = &(*items)[*n];
	it->own = store_xrealloc(NULL, pub->len);
	memcpy(it->own, pub->data, pub->len);
	if (fsnp_value_decode(it->own, pub->len, NULL, &it->rec, NULL) != 0 ||
	    flow_sched_rec_decode(&it->rec, &x) != 0) {
		free(it->own);
		return -1;
	}
	it->next = x.i[SI_NEXT_RUN_AT_MS];
	it->id = x.s[SS_ID];
	(*n)++;
	return 0;
}

/* Keeps the `count` items the listing can answer with (the first by next
 * run, or the last with rev), so that memory follows count, not the
 * number of schedules. */
static void list_trim(struct list_item *items, size_t *n, int64_t count,
                      bool rev)
{
	size_t keep = (size_t)count, drop;
	if (*n <= keep) {
		return;
	}
	if (*n > 1) {
		qsort(items, *n, sizeof *items, list_cmp);
	}
	drop = *n - keep;
	if (rev) {
		for (size_t i = 0; i < drop; i++) {
			free(items[i].own);
		}
		memmove(items, items + drop, keep * sizeof *items);
	} else {
		for (size_t i = keep; i < *n; i++) {
			free(items[i].own);
		}
	}
	*n = keep;
}

static void list_free(struct list_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(items[i].own);
	}
	free(items);
}

/* Active schedules in next-run order, from the due index: from from_ms
 * on, until to_ms or `count` found (and the ties of the last). Only the
 * schedules visited are read. */
static int list_by_due(struct sctx *c, const struct sched_req *q, int64_t count,
                       struct wbuf *pub, struct list_item **items, size_t *n,
                       size_t *cap, struct flow_err *err)
{
	struct store_tx_iter *it;
	struct sbuf seek;
	int64_t last = -1;
	int rv = 0;

	key_start(&c->key, c->group, K_FLOW_SCHED_DUE);
	sbuf_init(&seek);
	sbuf_add(&seek, c->key.p, c->key.len);
	if (q->f[SF_FROM_MS].set) {
		uint8_t t[8];
		be_put64(t, (uint64_t)q->i[SF_FROM_MS]);
		sbuf_add(&seek, t, 8);
	}
	it = store_tx_iter_open(c->tx, c->key.p, c->key.len);
	for (bool ok = store_tx_iter_seek(it, seek.p, seek.len); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t kl, off = 5 + 8;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		struct sbuf *h;
		struct fsnp_val v;
		struct flow_sched_rec r;
		int64_t next;
		if (kl < off) {
			continue;
		}
		next = (int64_t)be_get64(k + 5);
		if ((q->f[SF_TO_MS].set && next > q->i[SF_TO_MS]) ||
		    ((int64_t)*n >= count && next > last)) {
			break;
		}
		h = hold(c);
		key_start(&c->key, c->group, K_FLOW_SCHED);
		sbuf_add(&c->key, k + off, kl - off);
		if (store_tx_get(c->tx, c->key.p, c->key.len, h) != 1 ||
		    fsnp_value_decode(h->p, h->len, NULL, &v, NULL) != 0 ||
		    flow_sched_rec_decode(&v, &r) != 0 || !list_match(q, &r)) {
			continue;
		}
		if (list_add(&r, pub, items, n, cap) != 0) {
			rv = E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
			break;
		}
		last = next;
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -2;
	}
	sbuf_free(&seek);
	return rv;
}

static int op_list(struct sctx *c, const struct fsnp_val *body,
                   struct fsnp_writer *w, struct flow_err *err)
{
	struct sched_req q;
	struct store_tx_iter *it;
	struct list_item *items = NULL;
	size_t n = 0, cap = 0;
	struct wbuf pub;
	int64_t count;
	bool rev, active;
	int rv = 0;

	if (sched_req_decode(FSNP_OP_FLOW_SCHEDULE_LIST, body->enc,
	                     body->enc_len, &q, err) != 0) {
		return -1;
	}
	count = q.f[SF_COUNT].set ? q.i[SF_COUNT] : FLOW_SCHED_LIST_DEFAULT;
	if (count > FLOW_SCHED_LIST_MAX) {
		count = FLOW_SCHED_LIST_MAX;
	}
	rev = q.f[SF_REV].set && q.b[SF_REV];
	active = !q.f[SF_STATE].set || fsnp_bytes_eq(q.t[SF_STATE], "active");
	wbuf_init(&pub);
	if (active && !rev) {
		/* The default listing pages through the due index. */
		rv = list_by_due(c, &q, count, &pub, &items, &n, &cap, err);
		goto out;
	}
	key_start(&c->key, c->group, K_FLOW_SCHED);
	it = store_tx_iter_open(c->tx, c->key.p, c->key.len);
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
		size_t vl;
		const uint8_t *vp = store_tx_iter_value(it, &vl);
		struct fsnp_val v;
		struct flow_sched_rec r;
		if (fsnp_value_decode(vp, vl, NULL, &v, NULL) != 0 ||
		    flow_sched_rec_decode(&v, &r) != 0 || !list_match(&q, &r)) {
			continue;
		}
		if (list_add(&r, &pub, &items, &n, &cap) != 0) {
			rv = E(err, FLOW_STATUS_BUSY, "BUSY out of memory");
			break;
		}
		if ((int64_t)n >= 2 * count) {
			list_trim(items, &n, count, rev);
		}
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -2;
	}
out:
	if (rv == 0) {
		list_write(w, items, n, count, rev);
	}
	list_free(items, n);
	wbuf_free(&pub);
	return rv;
}

void flow_sched_list_merge(struct fsnp_writer *w, const struct fsnp_val *lists,
                           size_t n, int64_t count, bool rev)
{
	struct list_item *items = NULL;
	size_t m = 0, cap = 0;
	for (size_t i = 0; i < n; i++) {
		struct fsnp_iter it;
		struct fsnp_val v;
		fsnp_iter_init(&it, &lists[i]);
		while (fsnp_iter_next(&it, NULL, &v)) {
			struct flow_sched_rec r;
			if (flow_sched_rec_decode(&v, &r) != 0) {
				continue;
			}
			if (m == cap) {
				cap = cap ? cap * 2 : 16;
				items =
				    store_xrealloc(items, cap * sizeof *items);
			}
			items[m].next = r.i[SI_NEXT_RUN_AT_MS];
			items[m].id = r.s[SS_ID];
			items[m].rec = v;
			items[m].own = NULL;
			m++;
		}
	}
	list_write(w, items, m, count, rev);
	free(items);
}

/* --- SCAN: due schedules and the outbox -------------------------------- */

static int op_scan(struct sctx *c, const struct fsnp_val *body,
                   struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_val idv;
	int64_t limit = 16, now = c->entry_now, t, visited = 0;
	struct store_tx_iter *it;
	bool held_only = false;
	int rv = 0;

	(void)err;
	/* A wake scan: the held queue_after_previous occurrences whose retry
	 * is due before now_ms (a horizon), visiting a bounded number of
	 * entries. */
	fsnp_map_bool(body, "held_only", &held_only);
	if (fsnp_map_i64(body, "limit", &t) == 0 && t > 0) {
		limit =
		    t > FLOW_SCHED_FIRE_DUE_MAX ? FLOW_SCHED_FIRE_DUE_MAX : t;
	}
	if (fsnp_map_i64(body, "now_ms", &t) == 0 && t >= 0) {
		now = t;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "schedules");
	fsnp_w_array_begin(w);
	if (fsnp_map_get(body, "id", &idv) == 0 && idv.tag == FSNP_BIN) {
		struct flow_sched_rec r;
		int found = rec_load(c, idv.as.bin, &r);
		if (found < 0) {
			return -2;
		}
		if (found == 1) {
			flow_sched_rec_write(w, &r, true);
		}
	} else {
		int64_t n = 0;
		key_start(&c->key, c->group, K_FLOW_SCHED_DUE);
		it = store_tx_iter_open(c->tx, c->key.p, c->key.len);
		for (bool ok = store_tx_iter_seek(it, NULL, 0);
		     ok && n < limit && visited < FLOW_SCHED_WAKE_VISIT_MAX;
		     store_tx_iter_next(it), ok = store_tx_iter_valid(it)) {
			size_t kl, off = 5 + 8;
			const uint8_t *k = store_tx_iter_key(it, &kl);
			struct sbuf *h;
			struct fsnp_val v;
			uint32_t pl, il;
			if (kl < off + 8 || (int64_t)be_get64(k + 5) > now) {
				break;
			}
			pl = be_get32(k + off);
			if (kl < off + 4 + pl + 4) {
				continue;
			}
			il = be_get32(k + off + 4 + pl);
			if (kl != off + 8 + pl + il) {
				continue;
			}
			/* The record's key: part and id as in the due key. */
			h = hold(c);
			key_start(&c->key, c->group, K_FLOW_SCHED);
			sbuf_add(&c->key, k + off, kl - off);
			if (held_only) {
				visited++;
			}
			if (store_tx_get(c->tx, c->key.p, c->key.len, h) == 1 &&
			    fsnp_value_decode(h->p, h->len, NULL, &v, NULL) ==
			        0) {
				struct flow_sched_rec r;
				if (held_only &&
				    (flow_sched_rec_decode(&v, &r) != 0 ||
				     r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] < 0 ||
				     !flow_sched_is(&r, SS_OVERLAP_POLICY,
				                    "queue_after_previous"))) {
					continue;
				}
				fsnp_w_val(w, &v);
				n++;
			}
		}
		if (store_tx_iter_close(it) != 0) {
			rv = -2;
		}
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "outbox");
	fsnp_w_array_begin(w);
	key_start(&c->key, c->group, K_FLOW_SCHED_OUT);
	it = store_tx_iter_open(c->tx, c->key.p, c->key.len);
	int64_t n = 0;
	for (bool ok = store_tx_iter_seek(it, NULL, 0); ok && n < limit;
	     store_tx_iter_next(it), ok = store_tx_iter_valid(it), n++) {
		size_t vl, kl;
		const uint8_t *vp = store_tx_iter_value(it, &vl);
		const uint8_t *kp = store_tx_iter_key(it, &kl);
		struct fsnp_val v;
		if (fsnp_value_decode(vp, vl, NULL, &v, NULL) != 0) {
			continue;
		}
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "key");
		fsnp_w_bin(w, kp + 5, kl - 5);
		fsnp_w_key(w, "entry");
		fsnp_w_val(w, &v);
		fsnp_w_map_end(w);
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -2;
	}
	fsnp_w_array_end(w);
	fsnp_w_map_end(w);
	return rv;
}

static int op_outbox_done(struct sctx *c, const struct fsnp_val *body,
                          struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_val keys, k;
	struct fsnp_iter it;
	int64_t n = 0;
	if (fsnp_map_get(body, "keys", &keys) != 0 || keys.tag != FSNP_ARRAY) {
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native schedule outbox command malformed");
	}
	fsnp_iter_init(&it, &keys);
	while (fsnp_iter_next(&it, NULL, &k)) {
		if (k.tag != FSNP_BIN) {
			continue;
		}
		key_start(&c->key, c->group, K_FLOW_SCHED_OUT);
		sbuf_add(&c->key, k.as.bin.ptr, k.as.bin.len);
		store_tx_del(c->tx, c->key.p, c->key.len);
		n++;
	}
	fsnp_w_i64(w, n);
	return 0;
}

/* --- planning ---------------------------------------------------------------
 */

static struct fsnp_bytes tgt_str(const struct fsnp_val *t, const char *k)
{
	struct fsnp_bytes b = {NULL, 0};
	struct fsnp_val v;
	if (fsnp_map_get(t, k, &v) == 0 && v.tag == FSNP_BIN) {
		b = v.as.bin;
	}
	return b;
}

void flow_sched_plan(const struct flow_sched_rec *r, int64_t now, bool manual,
                     int64_t fire_at, bool prev_active, const char *tzdir,
                     struct flow_sched_plan *p)
{
	bool recurring = flow_sched_is(r, SS_KIND, "interval") ||
	                 flow_sched_is(r, SS_KIND, "cron");
	struct fsnp_bytes fixed = tgt_str(&r->target, "id");
	struct fsnp_bytes prefix = tgt_str(&r->target, "id_prefix");

	memset(p, 0, sizeof *p);
	p->manual = manual;
	p->outcome = FSO_FIRE;
	p->due = manual ? fire_at
	         : r->i[SI_OVERLAP_QUEUED_DUE_AT_MS] >= 0
	             ? r->i[SI_OVERLAP_QUEUED_DUE_AT_MS]
	             : r->i[SI_NEXT_RUN_AT_MS];
	p->next = r->i[SI_NEXT_RUN_AT_MS];
	if (!recurring) {
		p->next = -1;
		p->end_reason = "one_shot_fired";
	} else if (manual) {
		/* A manual fire keeps the cadence. */
	} else if (flow_sched_is(r, SS_KIND, "interval")) {
		int64_t every = r->i[SI_EVERY_MS] > 0 ? r->i[SI_EVERY_MS] : 1;
		if (now - p->due >= every) {
			int64_t upto =
			    r->i[SI_END_AT_MS] >= 0 && r->i[SI_END_AT_MS] < now
			        ? r->i[SI_END_AT_MS]
			        : now;
			p->coalesced =
			    upto > p->due ? (upto - p->due) / every : 0;
			p->next = now > FLOW_MAXI - every ? -1 : now + every;
		} else {
			p->next =
			    p->due > FLOW_MAXI - every ? -1 : p->due + every;
		}
		if (p->next < 0) {
			p->end_reason = "timestamp_limit";
		}
	} else {
		struct cron cr;
		struct tz z;
		char msg[200];
		int64_t next;
		if (r->s[SS_CRON].ptr == NULL ||
		    cron_parse(&cr, (const char *)r->s[SS_CRON].ptr,
		               r->s[SS_CRON].len, msg, sizeof msg) != 0) {
			p->outcome = FSO_FAIL_PLANNING;
			snprintf(p->error, sizeof p->error, "%s",
			         r->s[SS_CRON].ptr == NULL
			             ? "ERR flow schedule cron must be a string"
			             : msg);
			return;
		}
		if (r->s[SS_TIMEZONE].ptr == NULL ||
		    tz_load(&z, tzdir, (const char *)r->s[SS_TIMEZONE].ptr,
		            r->s[SS_TIMEZONE].len, msg, sizeof msg) != 0) {
			p->outcome = FSO_FAIL_PLANNING;
			snprintf(p->error, sizeof p->error,
			         "ERR flow schedule timezone is invalid or "
			         "unavailable");
			return;
		}
		int rv = cron_next(&cr, &z, p->due, &next, msg, sizeof msg);
		tz_free(&z);
		if (rv != 0) {
			p->outcome = FSO_FAIL_PLANNING;
			snprintf(p->error, sizeof p->error, "%s", msg);
			return;
		}
		p->next = next > FLOW_MAXI ? -1 : next;
		if (p->next < 0) {
			p->end_reason = "timestamp_limit";
		}
	}
	if (fixed.ptr != NULL && !recurring) {
		snprintf(p->target_id, sizeof p->target_id, "%.*s",
		         (int)fixed.len, (const char *)fixed.ptr);
	} else {
		struct fsnp_bytes pre =
		    prefix.ptr != NULL ? prefix : r->s[SS_ID];
		snprintf(p->target_id, sizeof p->target_id, "%.*s:%lld:%lld",
		         (int)pre.len, (const char *)pre.ptr, (long long)p->due,
		         (long long)(r->i[SI_FIRE_COUNT] + 1));
	}
	if (recurring && prev_active &&
	    !flow_sched_is(r, SS_OVERLAP_POLICY, "allow") &&
	    r->s[SS_OVERLAP_POLICY].ptr != NULL) {
		if (flow_sched_is(r, SS_OVERLAP_POLICY, "skip") ||
		    (manual && flow_sched_is(r, SS_OVERLAP_POLICY,
		                             "queue_after_previous"))) {
			p->outcome = FSO_SKIP;
		} else if (flow_sched_is(r, SS_OVERLAP_POLICY,
		                         "queue_after_previous")) {
			/* The first check after overlap_retry_ms; repeated
			 * checks of the same target back off, doubling up to
			 * 30 s (or the configured retry when longer). */
			int64_t base = r->i[SI_OVERLAP_RETRY_MS] > 0
			                   ? r->i[SI_OVERLAP_RETRY_MS]
			                   : FLOW_SCHED_RETRY_DEFAULT_MS;
			int64_t cap = base > FLOW_SCHED_RETRY_CAP_MS
			                  ? base
			                  : FLOW_SCHED_RETRY_CAP_MS;
			int64_t retry = base;
			for (int64_t k = 0;
			     k < r->i[SI_OVERLAP_STREAK] && retry < cap; k++) {
				retry *= 2;
			}
			if (retry > cap) {
				retry = cap;
			}
			p->outcome = FSO_QUEUE;
			p->coalesced = 0;
			p->next = now + retry;
			p->end_reason = NULL;
		} else {
			p->outcome = FSO_FAIL_OVERLAP;
		}
	}
}

static const char *outcome_name(enum flow_sched_outcome o)
{
	static const char *const names[] = {"fire",          "skip",
	                                    "queue",         "fail_overlap",
	                                    "fail_planning", "owner_conflict"};
	return names[o];
}

void flow_sched_plan_write(struct fsnp_writer *w,
                           const struct flow_sched_rec *r,
                           const struct flow_sched_plan *p)
{
	char pbuf[FLOW_AUTO_PARTITION_MAX];
	struct fsnp_bytes pk = tgt_str(&r->target, "partition_key");

	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_bin(w, r->s[SS_ID].ptr, r->s[SS_ID].len);
	fsnp_w_key(w, "version");
	fsnp_w_i64(w, r->i[SI_VERSION]);
	fsnp_w_key(w, "outcome");
	fsnp_w_str(w, outcome_name(p->outcome));
	fsnp_w_key(w, "manual");
	fsnp_w_bool(w, p->manual);
	fsnp_w_key(w, "due_at_ms");
	fsnp_w_i64(w, p->due);
	fsnp_w_key(w, "next_run_at_ms");
	if (p->next < 0) {
		fsnp_w_nil(w);
	} else {
		fsnp_w_i64(w, p->next);
	}
	fsnp_w_key(w, "end_reason");
	if (p->end_reason == NULL) {
		fsnp_w_nil(w);
	} else {
		fsnp_w_str(w, p->end_reason);
	}
	fsnp_w_key(w, "coalesced");
	fsnp_w_i64(w, p->coalesced);
	fsnp_w_key(w, "target_id");
	fsnp_w_str(w, p->target_id);
	fsnp_w_key(w, "target_part");
	if (pk.ptr != NULL) {
		fsnp_w_bin(w, pk.ptr, pk.len);
	} else {
		size_t n = flow_sched_partition((const uint8_t *)p->target_id,
		                                strlen(p->target_id), pbuf);
		fsnp_w_bin(w, pbuf, n);
	}
	fsnp_w_key(w, "error");
	fsnp_w_str(w, p->error);
	fsnp_w_map_end(w);
}

/* --- RECORD: planned outcomes ----------------------------------------------
 */

int flow_sched_owner_proof(const struct flow_sched_rec *r, const char *tid,
                           char out[FLOW_SCHED_PROOF_MAX])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	struct wbuf data, enc;
	size_t tl = strlen(tid);
	int rv = -1, w = 0;

	out[0] = '\0';
	if (r->s[SS_OWNER_SECRET].ptr == NULL) {
		return -1;
	}
	/* id, target id and target definition, each length-prefixed. */
	wbuf_init(&data);
	wbuf_init(&enc);
	w |= wbuf_put_u32(&data, (uint32_t)r->s[SS_ID].len);
	w |= wbuf_append(&data, r->s[SS_ID].ptr, r->s[SS_ID].len);
	w |= wbuf_put_u32(&data, (uint32_t)tl);
	w |= wbuf_append(&data, tid, tl);
	if (r->target.tag != FSNP_NIL) {
		w |= wbuf_put_u32(&data, (uint32_t)r->target.enc_len);
		w |= wbuf_append(&data, r->target.enc, r->target.enc_len);
	}
	if (w == 0 && !data.oom &&
	    HMAC(EVP_sha256(), r->s[SS_OWNER_SECRET].ptr,
	         (int)r->s[SS_OWNER_SECRET].len, data.data, data.len, md,
	         &mdlen) != NULL &&
	    base64url_encode(&enc, md, mdlen) == 0 &&
	    enc.len < FLOW_SCHED_PROOF_MAX) {
		memcpy(out, enc.data, enc.len);
		out[enc.len] = '\0';
		rv = 0;
	}
	wbuf_free(&data);
	wbuf_free(&enc);
	return rv;
}

void flow_sched_target_get_body(struct fsnp_writer *w,
                                const struct flow_sched_rec *r,
                                const struct flow_sched_plan *p, char *pbuf,
                                struct fsnp_bytes *part)
{
	struct fsnp_bytes pk = tgt_str(&r->target, "partition_key");
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_str(w, p->target_id);
	if (pk.ptr != NULL) {
		fsnp_w_key(w, "partition_key");
		fsnp_w_bin(w, pk.ptr, pk.len);
		*part = pk;
	} else {
		part->len = flow_sched_partition((const uint8_t *)p->target_id,
		                                 strlen(p->target_id), pbuf);
		part->ptr = (const uint8_t *)pbuf;
	}
	fsnp_w_map_end(w);
}

/* The target's FLOW.CREATE body. */
static void create_body(struct fsnp_writer *w, const struct flow_sched_rec *r,
                        struct fsnp_bytes target_id, int64_t now)
{
	static const char *const copy[] = {
	    "type",        "state",          "partition_key", "run_at_ms",
	    "priority",    "parent_flow_id", "root_flow_id",  "payload",
	    "payload_ref", "values",
	};
	struct fsnp_val v;
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_bin(w, target_id.ptr, target_id.len);
	for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
		if (fsnp_map_get(&r->target, copy[i], &v) == 0 &&
		    !fsnp_val_is_nil(&v)) {
			fsnp_w_key(w, copy[i]);
			fsnp_w_val(w, &v);
		}
	}
	fsnp_w_key(w, "correlation_id");
	if (fsnp_map_get(&r->target, "correlation_id", &v) == 0 &&
	    v.tag == FSNP_BIN) {
		fsnp_w_val(w, &v);
	} else {
		w_str_or_nil(w, r->s[SS_FLOW_ID]);
	}
	char proof[FLOW_SCHED_PROOF_MAX];
	char tid[FLOW_SCHED_ID_MAX + 48];
	snprintf(tid, sizeof tid, "%.*s", (int)target_id.len,
	         (const char *)target_id.ptr);
	if (flow_sched_owner_proof(r, tid, proof) == 0) {
		fsnp_w_key(w, "attributes");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, FLOW_SCHED_OWNER_ATTR);
		fsnp_w_str(w, proof);
		fsnp_w_map_end(w);
	}
	fsnp_w_key(w, "idempotent");
	fsnp_w_bool(w, true);
	fsnp_w_key(w, "now_ms");
	fsnp_w_i64(w, now);
	fsnp_w_map_end(w);
}

/* Writes the outbox entry of a fire; its key (after group and type) and
 * value are left in `key` and `val` for the reply. */
static int outbox_put(struct sctx *c, const struct flow_sched_rec *r,
                      int64_t due, struct fsnp_bytes target_id,
                      struct fsnp_bytes target_part, struct sbuf *key,
                      struct wbuf *val)
{
	struct wbuf body;
	struct fsnp_writer w;
	int rv = 0;
	wbuf_init(&body);
	fsnp_w_init(&w, &body);
	create_body(&w, r, target_id, c->now);
	if (fsnp_w_finish(&w) != 0 || body.oom) {
		rv = -1;
		goto out;
	}
	fsnp_w_init(&w, val);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "schedule_id");
	fsnp_w_bin(&w, r->s[SS_ID].ptr, r->s[SS_ID].len);
	fsnp_w_key(&w, "due_at_ms");
	fsnp_w_i64(&w, due);
	fsnp_w_key(&w, "target_id");
	fsnp_w_bin(&w, target_id.ptr, target_id.len);
	fsnp_w_key(&w, "target_part");
	fsnp_w_bin(&w, target_part.ptr, target_part.len);
	fsnp_w_key(&w, "body");
	fsnp_w_bin(&w, body.data, body.len);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || val->oom) {
		rv = -1;
		goto out;
	}
	key_out(&c->key, c->group, r->s[SS_PART], r->s[SS_ID], due);
	store_tx_put(c->tx, c->key.p, c->key.len, val->data, val->len);
	sbuf_reset(key);
	sbuf_add(key, c->key.p + 5, c->key.len - 5);
out:
	wbuf_free(&body);
	return rv;
}

static void item_result(struct fsnp_writer *w, struct fsnp_bytes id,
                        const char *result, struct fsnp_bytes target_id,
                        int64_t coalesced, const char *error,
                        const char *reason, const struct flow_sched_rec *r,
                        const struct sbuf *okey, const struct wbuf *oval)
{
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_bin(w, id.ptr, id.len);
	fsnp_w_key(w, "result");
	fsnp_w_str(w, result);
	fsnp_w_key(w, "target_id");
	w_str_or_nil(w, target_id);
	fsnp_w_key(w, "coalesced");
	fsnp_w_i64(w, coalesced);
	fsnp_w_key(w, "error");
	if (error != NULL) {
		fsnp_w_str(w, error);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "reason");
	if (reason != NULL) {
		fsnp_w_str(w, reason);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "schedule");
	if (r != NULL) {
		flow_sched_rec_write(w, r, false);
	} else {
		fsnp_w_nil(w);
	}
	if (okey != NULL) {
		struct fsnp_val v;
		fsnp_w_key(w, "outbox");
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "key");
		fsnp_w_bin(w, okey->p, okey->len);
		fsnp_w_key(w, "entry");
		if (fsnp_value_decode(oval->data, oval->len, NULL, &v, NULL) ==
		    0) {
			fsnp_w_val(w, &v);
		} else {
			fsnp_w_nil(w);
		}
		fsnp_w_map_end(w);
	}
	fsnp_w_map_end(w);
}

#ifdef LS_FAULT_HOOKS
/* ---- Fault hook (lodestone-faulty only; never in the normal build) ----
 *
 * jepsen/'s proof that the flow checker catches a doubled schedule fire.
 * With LODESTONE_FAULT=flow-sched-refire every third fire of a recurring
 * schedule leaves its next run at the due time it has just fired, as if
 * the fire had not been recorded: the next pass fires the same occurrence
 * again under the next fire count. Decided from the replicated fire count,
 * so every replica applies it alike. */
static bool fault_refire(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *v = getenv("LODESTONE_FAULT");
		mode = v != NULL && strcmp(v, "flow-sched-refire") == 0;
		if (mode) {
			fprintf(stderr,
			        "lodestone: FAULT HOOK flow-sched-refire "
			        "ACTIVE: this node breaks its "
			        "guarantees on purpose\n");
		}
	}
	return mode == 1;
}
#endif /* LS_FAULT_HOOKS */

static int record_item(struct sctx *c, const struct fsnp_val *it,
                       struct fsnp_writer *w)
{
	struct fsnp_bytes id, outcome, target_id, target_part, error,
	    end_reason = {NULL, 0};
	struct fsnp_val v;
	int64_t version, due, next = -1, coalesced = 0;
	bool manual = false;
	struct flow_sched_rec old, r;
	char reason[FLOW_SCHED_ID_MAX + 64];
	const char *reason_p = NULL, *err_p = NULL, *result;
	char errbuf[FLOW_SCHED_ID_MAX + 96];
	struct sbuf okey;
	struct wbuf oval;
	bool fired = false, held = false;
	int found;

	if (fsnp_map_bin(it, "id", &id) != 0 ||
	    fsnp_map_bin(it, "outcome", &outcome) != 0 ||
	    fsnp_map_i64(it, "version", &version) != 0 ||
	    fsnp_map_i64(it, "due_at_ms", &due) != 0 || due < 0 ||
	    fsnp_map_bin(it, "target_id", &target_id) != 0 ||
	    fsnp_map_bin(it, "target_part", &target_part) != 0 ||
	    fsnp_map_bin(it, "error", &error) != 0) {
		item_result(w, (struct fsnp_bytes){NULL, 0}, "stale",
		            (struct fsnp_bytes){NULL, 0}, 0,
		            "ERR flow schedule fire item malformed", NULL, NULL,
		            NULL, NULL);
		return 0;
	}
	if (fsnp_map_get(it, "next_run_at_ms", &v) == 0 &&
	    fsnp_val_i64(&v, &next) != 0) {
		next = -1;
	}
	if (next > FLOW_MAXI) {
		next = -1;
	}
	fsnp_map_i64(it, "coalesced", &coalesced);
	if (coalesced < 0) {
		coalesced = 0;
	}
	fsnp_map_bool(it, "manual", &manual);
	if (fsnp_map_get(it, "end_reason", &v) == 0 && v.tag == FSNP_BIN) {
		end_reason = v.as.bin;
	}
	found = rec_load(c, id, &old);
	if (found < 0) {
		return -2;
	}
	if (found == 0) {
		item_result(w, id, "error", (struct fsnp_bytes){NULL, 0}, 0,
		            "ERR flow schedule not found", NULL, NULL, NULL,
		            NULL);
		return 0;
	}
	if (!flow_sched_is(&old, SS_STATE, "active")) {
		item_result(w, id, manual ? "error" : "stale",
		            (struct fsnp_bytes){NULL, 0}, 0,
		            manual ? "ERR flow schedule is not active" : NULL,
		            NULL, &old, NULL, NULL);
		return 0;
	}
	if (old.i[SI_VERSION] != version) {
		/* Planned against an older state: another fire (or a pause,
		 * resume, overwrite) came first. */
		item_result(w, id, "stale", (struct fsnp_bytes){NULL, 0}, 0,
		            NULL, NULL, &old, NULL, NULL);
		return 0;
	}
	if (fsnp_bytes_eq(outcome, "owner_conflict") && manual) {
		/* A manual fire changes nothing it could not do. */
		item_result(w, id, "error", (struct fsnp_bytes){NULL, 0}, 0,
		            FLOW_SCHED_OWNER_CONFLICT, NULL, &old, NULL, NULL);
		return 0;
	}
	r = old;
	sbuf_init(&okey);
	wbuf_init(&oval);
	snprintf(reason, sizeof reason, "previous target still active: %.*s",
	         (int)old.s[SS_LAST_TARGET_ID].len,
	         old.s[SS_LAST_TARGET_ID].ptr != NULL
	             ? (const char *)old.s[SS_LAST_TARGET_ID].ptr
	             : "");
	if (fsnp_bytes_eq(outcome, "fire")) {
		result = "fired";
		r.i[SI_FIRE_COUNT]++;
		r.i[SI_ATTEMPTS]++;
		r.i[SI_LAST_FIRE_AT_MS] = c->now;
		r.s[SS_LAST_TARGET_ID] = target_id;
		r.s[SS_LAST_TARGET_PART] = target_part;
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		if (outbox_put(c, &r, due, target_id, target_part, &okey,
		               &oval) != 0) {
			goto oom;
		}
		fired = true;
#ifdef LS_FAULT_HOOKS
		if (fault_refire() && next >= 0 &&
		    r.i[SI_FIRE_COUNT] % 3 == 0) {
			next = due;
		}
#endif
	} else if (fsnp_bytes_eq(outcome, "skip")) {
		result = "skipped";
		reason_p = reason;
		r.i[SI_SKIPPED_COUNT]++;
		r.i[SI_LAST_SKIPPED_AT_MS] = c->now;
		r.i[SI_LAST_OVERLAP_AT_MS] = c->now;
		r.s[SS_LAST_OVERLAP_TARGET_ID] = old.s[SS_LAST_TARGET_ID];
		r.s[SS_LAST_OVERLAP_REASON] = cb(reason);
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		target_id.ptr = NULL;
	} else if (fsnp_bytes_eq(outcome, "queue")) {
		result = "queued";
		reason_p = reason;
		r.i[SI_LAST_OVERLAP_AT_MS] = c->now;
		r.s[SS_LAST_OVERLAP_TARGET_ID] = old.s[SS_LAST_TARGET_ID];
		r.s[SS_LAST_OVERLAP_REASON] = cb(reason);
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = due;
		r.i[SI_OVERLAP_STREAK]++;
		target_id.ptr = NULL;
		coalesced = 0;
	} else if (fsnp_bytes_eq(outcome, "owner_conflict")) {
		/* Another flow holds the target id: nothing fired; the
		 * occurrence is held with its due time and tried again. */
		result = "error";
		err_p = FLOW_SCHED_OWNER_CONFLICT;
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = due;
		next = c->now > FLOW_MAXI - FLOW_SCHED_OWNER_RETRY_MS
		           ? FLOW_MAXI
		           : c->now + FLOW_SCHED_OWNER_RETRY_MS;
		target_id.ptr = NULL;
		coalesced = 0;
		held = true;
	} else if (fsnp_bytes_eq(outcome, "fail_overlap")) {
		result = "failed";
		snprintf(errbuf, sizeof errbuf,
		         "ERR flow schedule overlap failed: %s", reason);
		err_p = errbuf;
		r.s[SS_STATE] = cb("failed");
		r.s[SS_END_REASON] = cb("overlap_failed");
		r.i[SI_LAST_OVERLAP_AT_MS] = c->now;
		r.s[SS_LAST_OVERLAP_TARGET_ID] = old.s[SS_LAST_TARGET_ID];
		r.s[SS_LAST_OVERLAP_REASON] = cb(reason);
		r.i[SI_NEXT_RUN_AT_MS] = -1;
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		target_id.ptr = NULL;
		coalesced = 0;
	} else {
		result = "failed";
		snprintf(errbuf, sizeof errbuf, "%.*s", (int)error.len,
		         (const char *)error.ptr);
		err_p = errbuf;
		r.s[SS_STATE] = cb("failed");
		r.s[SS_END_REASON] = cb("planning_failed");
		r.s[SS_LAST_PLANNING_ERROR] = error;
		r.i[SI_NEXT_RUN_AT_MS] = -1;
		r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		target_id.ptr = NULL;
		coalesced = 0;
	}
	if (!fsnp_bytes_eq(outcome, "queue")) {
		r.i[SI_OVERLAP_STREAK] = 0;
	}
	if (coalesced > 0) {
		r.i[SI_COALESCED_COUNT] += coalesced;
		r.i[SI_LAST_COALESCED_COUNT] = coalesced;
		r.i[SI_LAST_CATCHUP_AT_MS] = c->now;
	}
	if (held) {
		r.i[SI_NEXT_RUN_AT_MS] = next;
	} else if (flow_sched_is(&r, SS_STATE, "active")) {
		bool fired_or_skipped = fsnp_bytes_eq(outcome, "fire") ||
		                        fsnp_bytes_eq(outcome, "skip");
		r.i[SI_NEXT_RUN_AT_MS] = next;
		if (fired_or_skipped && r.i[SI_MAX_FIRES] > 0 &&
		    r.i[SI_FIRE_COUNT] >= r.i[SI_MAX_FIRES]) {
			r.s[SS_END_REASON] = cb("max_fires");
		} else if (next < 0) {
			r.s[SS_END_REASON] = end_reason.ptr != NULL
			                         ? end_reason
			                         : cb("timestamp_limit");
		} else if (r.i[SI_END_AT_MS] >= 0 && next > r.i[SI_END_AT_MS]) {
			r.s[SS_END_REASON] = cb("end_at_ms");
		}
		if (r.s[SS_END_REASON].ptr != NULL) {
			r.s[SS_STATE] = cb("completed");
			r.i[SI_NEXT_RUN_AT_MS] = -1;
			r.i[SI_OVERLAP_QUEUED_DUE_AT_MS] = -1;
		}
	}
	r.i[SI_UPDATED_AT_MS] = c->now;
	r.i[SI_VERSION] = old.i[SI_VERSION] + 1;
	{
		/* FerricStore's signals on the schedule's flow. */
		const char *ev = fired ? "schedule_fired"
		                 : fsnp_bytes_eq(outcome, "skip")
		                     ? "schedule_skipped_overlap"
		                 : fsnp_bytes_eq(outcome, "fail_overlap")
		                     ? "schedule_failed_overlap"
		                 : fsnp_bytes_eq(outcome, "queue") || held
		                     ? NULL
		                     : "schedule_failed_planning";
		if (ev != NULL && sched_event(c, &r, ev) != 0) {
			goto oom;
		}
	}
	if (rec_save(c, &old, &r) != 0) {
		goto oom;
	}
	item_result(w, id, result, target_id, coalesced, err_p, reason_p, &r,
	            fired ? &okey : NULL, fired ? &oval : NULL);
	sbuf_free(&okey);
	wbuf_free(&oval);
	return 0;
oom:
	sbuf_free(&okey);
	wbuf_free(&oval);
	return -1;
}

static int op_record(struct sctx *c, const struct fsnp_val *body,
                     struct fsnp_writer *w, struct flow_err *err)
{
	struct fsnp_val items, it;
	struct fsnp_iter i;
	int64_t now;
	bool now_set = fsnp_map_i64(body, "now_ms", &now) == 0 && now >= 0;
	if (fsnp_map_get(body, "items", &items) != 0 ||
	    items.tag != FSNP_ARRAY) {
		return E(err, FLOW_STATUS_BAD_REQUEST,
		         "ERR native schedule fire command malformed");
	}
	set_now(c, now_set, now);
	fsnp_w_array_begin(w);
	fsnp_iter_init(&i, &items);
	while (fsnp_iter_next(&i, NULL, &it)) {
		int rv = record_item(c, &it, w);
		if (rv != 0) {
			return rv == -2 ? -2
			                : E(err, FLOW_STATUS_BUSY,
			                    "BUSY out of memory");
		}
	}
	fsnp_w_array_end(w);
	return 0;
}

/* --- the extension ------------------------------------------------------- */

static bool sched_is_read(uint8_t op)
{
	return op == FLOW_SCHED_OP_READ;
}

static int sched_apply(void *data, struct tx *tx, const uint8_t *cmd,
                       size_t len, struct sbuf *res)
{
	struct scmd c;
	struct sctx x;
	struct fsnp_val body;
	struct flow_err err = {0, ""};
	struct wbuf b;
	struct fsnp_writer w;
	const char *msg;
	int rv;

	(void)data;
	if (scmd_decode(cmd, len, &c, &msg) != 0) {
		char text[128];
		snprintf(text, sizeof text, "ERR %s", msg);
		res_error(res, STORE_BAD_COMMAND, text);
		return 0;
	}
	if (fsnp_value_decode_body(c.body, c.body_len, NULL, &body) != 0 ||
	    body.tag != FSNP_MAP) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR native schedule command body is malformed");
		return 0;
	}
	memset(&x, 0, sizeof x);
	x.tx = tx;
	x.group = store_tx_group(tx);
	x.entry_now = (int64_t)store_tx_now_ms(tx);
	x.now = x.entry_now;
	x.skew = c.skew;
	sbuf_init(&x.key);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	if (!store_tx_writable(tx) && !flow_sched_kind_is_read(c.kind)) {
		rv = E(&err, FLOW_STATUS_BAD_REQUEST,
		       "ERR native schedule command is not a read");
	} else {
		switch (c.kind) {
		case FSNP_OP_FLOW_SCHEDULE_CREATE:
			rv = op_create(&x, &body, &w, &err);
			break;
		case FSNP_OP_FLOW_SCHEDULE_LIST:
			rv = op_list(&x, &body, &w, &err);
			break;
		case FLOW_SCHED_KIND_SCAN:
			rv = op_scan(&x, &body, &w, &err);
			break;
		case FLOW_SCHED_KIND_RECORD:
			rv = op_record(&x, &body, &w, &err);
			break;
		case FLOW_SCHED_KIND_OUTBOX_DONE:
			rv = op_outbox_done(&x, &body, &w, &err);
			break;
		default:
			rv = op_simple(&x, c.kind, &body, &w, &err);
			break;
		}
	}
	if (rv == 0 && fsnp_w_finish(&w) == 0 && !b.oom) {
		res_begin(res, STORE_OK);
		sbuf_add(res, b.data, b.len);
	} else if (rv == -1) {
		res_error(res,
		          err.status == FLOW_STATUS_BAD_REQUEST
		              ? STORE_BAD_COMMAND
		              : STORE_ERR,
		          err.msg);
		rv = 0;
	} else if (rv == 0) {
		res_error(res, STORE_ERR, "ERR flow reply could not be built");
	}
	wbuf_free(&b);
	sctx_fini(&x);
	return rv == -2 ? -1 : 0;
}

int flow_sched_register(struct store *s)
{
	struct store_ext x = {
	    .first_op = FLOW_SCHED_OP_APPLY,
	    .last_op = FLOW_SCHED_OP_READ,
	    .is_read = sched_is_read,
	    .apply = sched_apply,
	    .data = NULL,
	};
#ifdef LS_FAULT_HOOKS
	(void)fault_refire();
#endif
	return store_register_ext(s, &x);
}
