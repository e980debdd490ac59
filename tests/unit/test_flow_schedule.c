/* flow/flow_schedule.c on a temporary store: CREATE / GET / DELETE /
 * PAUSE / RESUME / LIST with every error path, and fires through the same
 * steps as node/flow_sched.c (SCAN, flow_sched_plan, RECORD, the outbox's
 * idempotent FLOW.CREATE, OUTBOX_DONE) in one group: interval catch-up,
 * the overlap policies, bounds, one-shot and delay, manual fires, stale
 * and replayed plans, planning failures, cron in a zone. Then a seeded
 * model test over simulated time against a simple model of interval
 * schedules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_schedule.h"
#include "store/result.h"
#include "store/store.h"
#include "tests/unit/flow_test_util.h"
#include "wire/fsnp_opcode.h"

#define G 1

/* --- requests ------------------------------------------------------------ */

static void create_interval(struct tdb *t, uint64_t now, const char *id,
                            int64_t every, int64_t start, const char *overlap,
                            struct freply *r)
{
	struct fbody b;
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "kind", "interval");
	fb_int(&b, "every_ms", every);
	if (start >= 0) {
		fb_int(&b, "start_at_ms", start);
	}
	if (overlap != NULL) {
		fb_str(&b, "overlap_policy", overlap);
	}
	fb_int(&b, "now_ms", (int64_t)now);
	fb_key(&b, "target");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "type");
	fsnp_w_str(&b.w, "billing");
	fsnp_w_key(&b.w, "id_prefix");
	fsnp_w_str(&b.w, id);
	fsnp_w_map_end(&b.w);
	fb_end(&b);
	fl_run(t, G, now, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, r);
	fb_free(&b);
}

static void by_id(struct tdb *t, uint64_t now, uint16_t op, const char *id,
                  struct freply *r)
{
	struct fbody b;
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_end(&b);
	fl_run(t, G, now, op, &b, 1, r);
	fb_free(&b);
}

/* The schedule's record (asserts it exists); freed by the caller. */
static void get(struct tdb *t, uint64_t now, const char *id, struct freply *r)
{
	by_id(t, now, FSNP_OP_FLOW_SCHEDULE_GET, id, r);
	assert_int_equal(r->status, 0);
	assert_int_equal(r->v.tag, FSNP_MAP);
}

static int64_t field(struct tdb *t, uint64_t now, const char *id, const char *k)
{
	struct freply r;
	int64_t v;
	get(t, now, id, &r);
	v = fr_is_nil(&r.v, k) ? -1 : fr_int(&r.v, k);
	freply_free(&r);
	return v;
}

static void text(struct tdb *t, uint64_t now, const char *id, const char *k,
                 char *buf)
{
	struct freply r;
	get(t, now, id, &r);
	if (fr_is_nil(&r.v, k)) {
		strcpy(buf, "(nil)");
	} else {
		fr_str(&r.v, k, buf);
	}
	freply_free(&r);
}

/* An internal command, applied or read in group G at `now`. */
static void sched_cmd(struct tdb *t, uint64_t now, uint16_t kind,
                      const struct wbuf *body, struct freply *r)
{
	uint8_t *cmd;
	size_t clen;
	memset(r, 0, sizeof *r);
	assert_int_equal(flow_sched_cmd_wrap(kind, FLOW_CLOCK_SKEW_DEFAULT_MS,
	                                     body->data, body->len, &cmd,
	                                     &clen),
	                 0);
	if (flow_sched_kind_is_read(kind)) {
		struct fsm_result out;
		assert_int_equal(store_read(t->s, G, now, cmd, clen, &out), 0);
		r->buf = out.data;
		r->len = out.len;
	} else {
		struct fsm_cmd fc = {cmd, clen};
		struct fsm_result res = {NULL, 0};
		struct fsm_entry e = {.group = G,
		                      .index = t->next_index[G]++,
		                      .term = 1,
		                      .now_ms = now,
		                      .n_cmds = 1,
		                      .cmds = &fc};
		assert_int_equal(store_apply(t->s, &e, &res), 0);
		r->buf = res.data;
		r->len = res.len;
	}
	free(cmd);
	assert_true(r->len >= 3);
	r->status = flow_reply_status(r->buf[1]);
	assert_int_equal(
	    fsnp_value_decode_body(r->buf + 2, r->len - 2, NULL, &r->v), 0);
}

/* --- a pass, as node/flow_sched.c runs it --------------------------------- */

struct stats {
	int64_t claimed, fired, skipped, coalesced, errors, stale;
	char last_target[256];
	char last_error[320];
	struct wbuf record; /* the RECORD body proposed (for replays) */
};

static bool target_active(struct tdb *t, uint64_t now, struct fsnp_bytes id)
{
	struct fbody b;
	struct freply r;
	bool active = false;
	char st[256];
	fb_begin(&b);
	fb_key(&b, "id");
	fsnp_w_bin(&b.w, id.ptr, id.len);
	fb_end(&b);
	fl_run(t, G, now, FSNP_OP_FLOW_GET, &b, 1, &r);
	fb_free(&b);
	if (r.status == 0 && r.v.tag == FSNP_MAP) {
		fr_str(&r.v, "state", st);
		active = strcmp(st, "completed") != 0 &&
		         strcmp(st, "failed") != 0 &&
		         strcmp(st, "cancelled") != 0;
	}
	freply_free(&r);
	return active;
}

/* Creates every outbox target (FLOW.CREATE, idempotent) and removes the
 * entries; returns how many targets were created or already there. */
static int drain_outbox(struct tdb *t, uint64_t now, const struct fsnp_val *ob)
{
	struct fsnp_iter it;
	struct fsnp_val e, entry;
	struct wbuf keys;
	struct fsnp_writer w;
	struct freply r;
	int n = 0;
	wbuf_init(&keys);
	fsnp_w_init(&w, &keys);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "keys");
	fsnp_w_array_begin(&w);
	fsnp_iter_init(&it, ob);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct fsnp_bytes key, body;
		struct fbody fb;
		assert_int_equal(fsnp_map_bin(&e, "key", &key), 0);
		assert_int_equal(fsnp_map_get(&e, "entry", &entry), 0);
		assert_int_equal(fsnp_map_bin(&entry, "body", &body), 0);
		wbuf_init(&fb.b);
		wbuf_append(&fb.b, body.ptr, body.len);
		fl_run(t, G, now, FSNP_OP_FLOW_CREATE, &fb, 1, &r);
		wbuf_free(&fb.b);
		fr_ok(&r);
		freply_free(&r);
		fsnp_w_bin(&w, key.ptr, key.len);
		n++;
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	if (n > 0) {
		sched_cmd(t, now, FLOW_SCHED_KIND_OUTBOX_DONE, &keys, &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
	}
	wbuf_free(&keys);
	return n;
}

/* One pass at `now` (manual: FIRE of `id` at fire_at), with zone files
 * from `tzdir`. Drains the outbox unless `keep_outbox`. */
static void pass_ex(struct tdb *t, uint64_t now, const char *id,
                    int64_t fire_at, const char *tzdir, bool keep_outbox,
                    struct stats *s)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct freply scan, rec;
	struct fsnp_val list, e, ob;
	struct fsnp_iter it;
	struct flow_sched_plan plan;
	size_t n = 0;

	memset(s, 0, sizeof *s);
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, (int64_t)now);
	fsnp_w_key(&w, "limit");
	fsnp_w_i64(&w, 100);
	if (id != NULL) {
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, id);
	}
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	sched_cmd(t, now, FLOW_SCHED_KIND_SCAN, &b, &scan);
	assert_int_equal(scan.status, 0);
	wbuf_free(&b);

	wbuf_init(&s->record);
	fsnp_w_init(&w, &s->record);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, (int64_t)now);
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	assert_int_equal(fsnp_map_get(&scan.v, "schedules", &list), 0);
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		struct flow_sched_rec r;
		bool prev = false;
		assert_int_equal(flow_sched_rec_decode(&e, &r), 0);
		if (r.s[SS_LAST_TARGET_ID].ptr != NULL) {
			prev = target_active(t, now, r.s[SS_LAST_TARGET_ID]);
		}
		flow_sched_plan(&r, (int64_t)now, id != NULL,
		                fire_at >= 0 ? fire_at : (int64_t)now, prev,
		                tzdir, &plan);
		flow_sched_plan_write(&w, &r, &plan);
		n++;
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	freply_free(&scan);
	if (n == 0) {
		return;
	}
	sched_cmd(t, now, FLOW_SCHED_KIND_RECORD, &s->record, &rec);
	assert_int_equal(rec.status, 0);
	fsnp_iter_init(&it, &rec.v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		char res[256], buf[320];
		fr_str(&e, "result", res);
		if (strcmp(res, "stale") == 0) {
			s->stale++;
			continue;
		}
		s->claimed++;
		if (!fr_is_nil(&e, "coalesced")) {
			s->coalesced += fr_int(&e, "coalesced");
		}
		if (strcmp(res, "fired") == 0) {
			s->fired++;
			fr_str(&e, "target_id", s->last_target);
			if (!keep_outbox) {
				struct wbuf one;
				struct fsnp_writer ow;
				struct fsnp_val arr;
				assert_int_equal(
				    fsnp_map_get(&e, "outbox", &ob), 0);
				wbuf_init(&one);
				fsnp_w_init(&ow, &one);
				fsnp_w_array_begin(&ow);
				fsnp_w_val(&ow, &ob);
				fsnp_w_array_end(&ow);
				assert_int_equal(fsnp_w_finish(&ow), 0);
				assert_int_equal(
				    fsnp_value_decode(one.data, one.len, NULL,
				                      &arr, NULL),
				    0);
				assert_int_equal(drain_outbox(t, now, &arr), 1);
				wbuf_free(&one);
			}
		} else if (strcmp(res, "skipped") == 0 ||
		           strcmp(res, "queued") == 0) {
			s->skipped++;
		} else {
			s->errors++;
			fr_str(&e, "error", buf);
			snprintf(s->last_error, sizeof s->last_error, "%s",
			         buf);
		}
	}
	freply_free(&rec);
}

static void pass(struct tdb *t, uint64_t now, struct stats *s)
{
	pass_ex(t, now, NULL, -1, NULL, false, s);
	wbuf_free(&s->record);
}

static bool flow_exists(struct tdb *t, uint64_t now, const char *id)
{
	struct freply r;
	struct fbody b;
	bool found;
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_end(&b);
	fl_run(t, G, now, FSNP_OP_FLOW_GET, &b, 1, &r);
	fb_free(&b);
	found = r.status == 0 && r.v.tag == FSNP_MAP;
	freply_free(&r);
	return found;
}

static void cancel_flow(struct tdb *t, uint64_t now, const char *id)
{
	struct freply r;
	struct fbody b;
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_int(&b, "fencing_token", 0);
	fb_end(&b);
	fl_run(t, G, now, FSNP_OP_FLOW_CANCEL, &b, 1, &r);
	fb_free(&b);
	fr_ok(&r);
	freply_free(&r);
}

/* --- tests ---------------------------------------------------------------- */

static void create_err(struct tdb *t, const char *json_like, int status,
                       const char *msg, void (*build)(struct fbody *))
{
	struct fbody b;
	struct freply r;
	(void)json_like;
	fb_begin(&b);
	build(&b);
	fb_end(&b);
	fl_run(t, G, 1000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, &r);
	fb_free(&b);
	fr_err(&r, status, msg);
	freply_free(&r);
}

static void tgt(struct fbody *b, const char *k, const char *v)
{
	fb_key(b, "target");
	fsnp_w_map_begin(&b->w);
	fsnp_w_key(&b->w, "type");
	fsnp_w_str(&b->w, "x");
	if (k != NULL) {
		fsnp_w_key(&b->w, k);
		fsnp_w_str(&b->w, v);
	}
	fsnp_w_map_end(&b->w);
}

#define BUILD(name, body)                                                      \
	static void name(struct fbody *b)                                      \
	{                                                                      \
		body;                                                          \
	}

BUILD(b_no_id, tgt(b, NULL, NULL))
BUILD(b_no_target, fb_str(b, "id", "s"))
BUILD(b_target_not_map, fb_str(b, "id", "s"); fb_str(b, "target", "x"))
BUILD(b_every_zero, fb_str(b, "id", "s"); fb_str(b, "kind", "interval");
      fb_int(b, "every_ms", 0); tgt(b, NULL, NULL))
BUILD(b_every_missing, fb_str(b, "id", "s"); fb_str(b, "kind", "interval");
      tgt(b, NULL, NULL))
BUILD(b_bad_kind, fb_str(b, "id", "s"); fb_str(b, "kind", "weekly");
      tgt(b, NULL, NULL))
BUILD(b_cron_for_interval, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_str(b, "timezone", "UTC"); tgt(b, NULL, NULL))
BUILD(b_catchup_one_shot, fb_str(b, "id", "s");
      fb_str(b, "catchup_policy", "fire_once"); tgt(b, NULL, NULL))
BUILD(b_catchup_bad, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_str(b, "catchup_policy", "all"); tgt(b, NULL, NULL))
BUILD(b_both_starts, fb_str(b, "id", "s"); fb_int(b, "at_ms", 5);
      fb_int(b, "start_at_ms", 5); tgt(b, NULL, NULL))
BUILD(b_recurring_id, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      tgt(b, "id", "fixed"))
BUILD(b_id_and_prefix, fb_str(b, "id", "s"); fb_key(b, "target");
      fsnp_w_map_begin(&b->w); fsnp_w_key(&b->w, "type");
      fsnp_w_str(&b->w, "x"); fsnp_w_key(&b->w, "id"); fsnp_w_str(&b->w, "a");
      fsnp_w_key(&b->w, "id_prefix"); fsnp_w_str(&b->w, "b");
      fsnp_w_map_end(&b->w))
BUILD(b_target_unknown, fb_str(b, "id", "s"); tgt(b, "colour", "red"))
BUILD(b_target_dup, fb_str(b, "id", "s"); fb_key(b, "target");
      fsnp_w_map_begin(&b->w); fsnp_w_key(&b->w, "type");
      fsnp_w_str(&b->w, "x"); fsnp_w_key(&b->w, "type"); fsnp_w_str(&b->w, "y");
      fsnp_w_map_end(&b->w))
BUILD(b_target_no_type, fb_str(b, "id", "s"); fb_key(b, "target");
      fsnp_w_map_begin(&b->w); fsnp_w_map_end(&b->w))
BUILD(b_reserved_target, fb_str(b, "id", "s");
      tgt(b, "id", "__ferricstore_schedule__:x"))
BUILD(b_reserved_id, fb_str(b, "id", "__ferricstore_schedule__:s");
      tgt(b, NULL, NULL))
BUILD(b_end_before, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_int(b, "start_at_ms", 100); fb_int(b, "end_at_ms", 50);
      tgt(b, NULL, NULL))
BUILD(b_unknown_opt, fb_str(b, "id", "s"); fb_str(b, "worker", "w");
      tgt(b, NULL, NULL))
BUILD(b_dup_opt, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_int(b, "every_ms", 6); tgt(b, NULL, NULL))
BUILD(b_overlap_bad, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_str(b, "overlap_policy", "sometimes"); tgt(b, NULL, NULL))
BUILD(b_overlap_one_shot, fb_str(b, "id", "s");
      fb_str(b, "overlap_policy", "skip"); tgt(b, NULL, NULL))
BUILD(b_retry_without_queue, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_int(b, "overlap_retry_ms", 10); tgt(b, NULL, NULL))
BUILD(b_max_fires_zero, fb_str(b, "id", "s"); fb_int(b, "every_ms", 5);
      fb_int(b, "max_fires", 0); tgt(b, NULL, NULL))
BUILD(b_delay_missing, fb_str(b, "id", "s"); fb_str(b, "kind", "delay");
      tgt(b, NULL, NULL))
BUILD(b_bad_cron, fb_str(b, "id", "s"); fb_str(b, "cron", "61 * * * *");
      tgt(b, NULL, NULL))
BUILD(b_bad_zone, fb_str(b, "id", "s"); fb_str(b, "cron", "* * * * *");
      fb_str(b, "timezone", "Mars/Olympus"); tgt(b, NULL, NULL))
BUILD(b_zone_path, fb_str(b, "id", "s"); fb_str(b, "cron", "* * * * *");
      fb_str(b, "timezone", "../../etc/passwd"); tgt(b, NULL, NULL))
BUILD(b_neg_every, fb_str(b, "id", "s"); fb_int(b, "every_ms", -5);
      tgt(b, NULL, NULL))
BUILD(b_big_payload, fb_str(b, "id", "s"); fb_key(b, "target");
      fsnp_w_map_begin(&b->w); fsnp_w_key(&b->w, "type");
      fsnp_w_str(&b->w, "x"); fsnp_w_key(&b->w, "payload"); char big[9000];
      memset(big, 'p', sizeof big); fsnp_w_bin(&b->w, big, sizeof big);
      fsnp_w_map_end(&b->w))

static void test_create_errors(void **state)
{
	struct tdb t;
	(void)state;
	ftdb_open(&t);
	create_err(&t, "", 6, "ERR native field id must be binary", b_no_id);
	create_err(&t, "", 1, "ERR flow schedule target is required",
	           b_no_target);
	create_err(&t, "", 1, "ERR flow schedule target must be a map",
	           b_target_not_map);
	create_err(&t, "", 1,
	           "ERR flow schedule every_ms must be a positive integer",
	           b_every_zero);
	create_err(&t, "", 1,
	           "ERR flow schedule every_ms must be a positive integer",
	           b_every_missing);
	create_err(&t, "", 1,
	           "ERR flow schedule kind must be one_shot, delay, interval, "
	           "or cron",
	           b_bad_kind);
	create_err(&t, "", 1,
	           "ERR flow schedule timezone is only supported for cron "
	           "schedules",
	           b_cron_for_interval);
	create_err(&t, "", 1,
	           "ERR flow schedule catchup_policy is only supported for "
	           "interval schedules",
	           b_catchup_one_shot);
	create_err(&t, "", 1,
	           "ERR flow schedule catchup_policy must be :fire_once",
	           b_catchup_bad);
	create_err(&t, "", 1,
	           "ERR flow schedule cannot set both at_ms and start_at_ms",
	           b_both_starts);
	create_err(&t, "", 1,
	           "ERR recurring schedule target must use id_prefix, not id",
	           b_recurring_id);
	create_err(&t, "", 1,
	           "ERR flow schedule target cannot set both id and id_prefix",
	           b_id_and_prefix);
	create_err(&t, "", 1,
	           "ERR unsupported flow schedule target field colour",
	           b_target_unknown);
	create_err(&t, "", 1, "ERR duplicate flow schedule target field type",
	           b_target_dup);
	create_err(&t, "", 1, "ERR flow schedule target type is required",
	           b_target_no_type);
	create_err(&t, "", 1,
	           "ERR scheduled target id is reserved for internal use",
	           b_reserved_target);
	create_err(&t, "", 1, "ERR flow id is reserved for internal use",
	           b_reserved_id);
	create_err(&t, "", 1,
	           "ERR flow schedule end_at_ms must be at or after first run",
	           b_end_before);
	create_err(&t, "", 1, "ERR unsupported flow schedule option worker",
	           b_unknown_opt);
	create_err(&t, "", 1, "ERR duplicate flow schedule option every_ms",
	           b_dup_opt);
	create_err(&t, "", 1,
	           "ERR flow schedule overlap_policy must be allow, skip, "
	           "queue_after_previous, or fail_schedule",
	           b_overlap_bad);
	create_err(&t, "", 1,
	           "ERR flow schedule overlap_policy is only supported for "
	           "interval and cron schedules",
	           b_overlap_one_shot);
	create_err(&t, "", 1,
	           "ERR flow schedule overlap_retry_ms requires overlap_policy "
	           "queue_after_previous",
	           b_retry_without_queue);
	create_err(&t, "", 1,
	           "ERR flow schedule max_fires must be a positive integer",
	           b_max_fires_zero);
	create_err(&t, "", 1,
	           "ERR flow schedule delay_ms must be a non-negative integer",
	           b_delay_missing);
	create_err(&t, "", 1, "ERR flow schedule cron value out of range",
	           b_bad_cron);
	create_err(&t, "", 1,
	           "ERR flow schedule timezone is invalid or unavailable",
	           b_bad_zone);
	create_err(&t, "", 1,
	           "ERR flow schedule timezone is invalid or unavailable",
	           b_zone_path);
	create_err(&t, "", 1,
	           "ERR flow schedule every_ms must be a non-negative integer",
	           b_neg_every);
	create_err(&t, "", 1,
	           "ERR flow schedule payload too large; use payload_ref",
	           b_big_payload);
	tdb_close(&t);
}

static void test_lifecycle_errors(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	(void)state;
	ftdb_open(&t);
	by_id(&t, 1000, FSNP_OP_FLOW_SCHEDULE_GET, "nope", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	by_id(&t, 1000, FSNP_OP_FLOW_SCHEDULE_DELETE, "nope", &r);
	fr_err(&r, 1, "ERR flow schedule not found");
	freply_free(&r);
	by_id(&t, 1000, FSNP_OP_FLOW_SCHEDULE_PAUSE, "nope", &r);
	fr_err(&r, 1, "ERR flow schedule not found");
	freply_free(&r);
	create_interval(&t, 1000, "s", 100, 1000, NULL, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1000);
	freply_free(&r);
	create_interval(&t, 1000, "s", 100, 1000, NULL, &r);
	fr_err(&r, 1, "ERR flow already exists");
	freply_free(&r);
	by_id(&t, 1001, FSNP_OP_FLOW_SCHEDULE_RESUME, "s", &r);
	fr_err(&r, 1, "ERR flow schedule is not paused");
	freply_free(&r);
	by_id(&t, 1001, FSNP_OP_FLOW_SCHEDULE_PAUSE, "s", &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	by_id(&t, 1002, FSNP_OP_FLOW_SCHEDULE_PAUSE, "s", &r);
	fr_err(&r, 1, "ERR flow schedule is not active");
	freply_free(&r);
	by_id(&t, 1003, FSNP_OP_FLOW_SCHEDULE_DELETE, "s", &r);
	fr_ok(&r);
	freply_free(&r);
	by_id(&t, 1004, FSNP_OP_FLOW_SCHEDULE_DELETE, "s", &r);
	fr_err(&r, 1, "ERR flow is terminal; use FLOW.REWIND");
	freply_free(&r);
	assert_int_equal(field(&t, 1005, "s", "next_run_at_ms"), -1);
	/* LIST's own errors. */
	fb_begin(&b);
	fb_str(&b, "state", "sleeping");
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_LIST, &b, 1, &r);
	fb_free(&b);
	fr_err(&r, 1,
	       "ERR flow schedule state must be active, paused, running, "
	       "completed, failed, cancelled, or all");
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "from_ms", 10);
	fb_int(&b, "to_ms", 5);
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_LIST, &b, 1, &r);
	fb_free(&b);
	fr_err(&r, 1,
	       "ERR flow schedule from_ms must be less than or equal to to_ms");
	freply_free(&r);
	/* The cancelled one lists under cancelled and all only. */
	fb_begin(&b);
	fb_str(&b, "state", "all");
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_LIST, &b, 1, &r);
	fb_free(&b);
	assert_int_equal(r.v.tag, FSNP_ARRAY);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_LIST, NULL, 1, &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	tdb_close(&t);
}

/* The reference's example: due 1000, every 100, recovered at 2050. */
static void test_interval_catchup(void **state)
{
	struct tdb t;
	struct freply r;
	struct stats s;
	char buf[256];
	(void)state;
	ftdb_open(&t);
	create_interval(&t, 1000, "b", 100, 1000, NULL, &r);
	freply_free(&r);
	pass(&t, 2050, &s);
	assert_int_equal(s.claimed, 1);
	assert_int_equal(s.fired, 1);
	assert_int_equal(s.coalesced, 10);
	assert_string_equal(s.last_target, "b:1000:1");
	assert_true(flow_exists(&t, 2050, "b:1000:1"));
	assert_int_equal(field(&t, 2050, "b", "next_run_at_ms"), 2150);
	assert_int_equal(field(&t, 2050, "b", "coalesced_count"), 10);
	assert_int_equal(field(&t, 2050, "b", "last_coalesced_count"), 10);
	assert_int_equal(field(&t, 2050, "b", "last_catchup_at_ms"), 2050);
	/* A second pass at the same time creates nothing. */
	pass(&t, 2050, &s);
	assert_int_equal(s.claimed, 0);
	/* Less than a period late keeps the cadence. */
	pass(&t, 2190, &s);
	assert_int_equal(s.fired, 1);
	assert_int_equal(s.coalesced, 0);
	assert_string_equal(s.last_target, "b:2150:2");
	assert_int_equal(field(&t, 2190, "b", "next_run_at_ms"), 2250);
	assert_int_equal(field(&t, 2190, "b", "fire_count"), 2);
	text(&t, 2190, "b", "catchup_policy", buf);
	assert_string_equal(buf, "fire_once");
	tdb_close(&t);
}

static void overlap_case(const char *policy, bool prev_done,
                         const char *want_state, int64_t want_fired,
                         int64_t want_skipped, int64_t want_errors)
{
	struct tdb t;
	struct freply r;
	struct stats s;
	char buf[320];
	ftdb_open(&t);
	create_interval(&t, 1000, "o", 100, 1000, policy, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	pass(&t, 1000, &s);
	assert_int_equal(s.fired, 1);
	if (prev_done) {
		cancel_flow(&t, 1050, "o:1000:1");
	}
	pass(&t, 1100, &s);
	assert_int_equal(s.claimed, 1);
	assert_int_equal(s.fired, want_fired);
	assert_int_equal(s.skipped, want_skipped);
	assert_int_equal(s.errors, want_errors);
	text(&t, 1100, "o", "state", buf);
	assert_string_equal(buf, want_state);
	if (!prev_done && strcmp(policy, "allow") != 0) {
		text(&t, 1100, "o", "last_overlap_reason", buf);
		assert_string_equal(buf,
		                    "previous target still active: o:1000:1");
	}
	tdb_close(&t);
}

static void test_overlap_matrix(void **state)
{
	(void)state;
	/* policy, previous target finished, state, fired, skipped, errors */
	overlap_case("allow", false, "active", 1, 0, 0);
	overlap_case("allow", true, "active", 1, 0, 0);
	overlap_case("skip", false, "active", 0, 1, 0);
	overlap_case("skip", true, "active", 1, 0, 0);
	overlap_case("queue_after_previous", false, "active", 0, 1, 0);
	overlap_case("queue_after_previous", true, "active", 1, 0, 0);
	overlap_case("fail_schedule", false, "failed", 0, 0, 1);
	overlap_case("fail_schedule", true, "active", 1, 0, 0);
}

/* Whether text field k of map m is s. */
static bool fr_str_eq(const struct fsnp_val *m, const char *k, const char *s)
{
	char buf[256];
	return strcmp(fr_str(m, k, buf), s) == 0;
}

/* A scan (by id, or a wake scan of held queue_after_previous occurrences)
 * with its reply in r. */
static void scan_cmd(struct tdb *t, uint64_t now, int64_t scan_now,
                     const char *id, bool held_only, struct freply *r)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, scan_now);
	fsnp_w_key(&w, "limit");
	fsnp_w_i64(&w, 100);
	if (id != NULL) {
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, id);
	}
	if (held_only) {
		fsnp_w_key(&w, "held_only");
		fsnp_w_bool(&w, true);
	}
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	sched_cmd(t, now, FLOW_SCHED_KIND_SCAN, &b, r);
	assert_int_equal(r->status, 0);
	wbuf_free(&b);
}

static void test_skip_and_queue_details(void **state)
{
	struct tdb t;
	struct freply r;
	struct stats s;
	(void)state;
	ftdb_open(&t);
	/* skip advances, counts, and keeps coalescing. */
	create_interval(&t, 1000, "k", 100, 1000, "skip", &r);
	freply_free(&r);
	pass(&t, 1000, &s);
	pass(&t, 1350, &s);
	assert_int_equal(s.skipped, 1);
	assert_int_equal(s.coalesced, 2);
	assert_int_equal(field(&t, 1350, "k", "skipped_count"), 1);
	assert_int_equal(field(&t, 1350, "k", "next_run_at_ms"), 1450);
	assert_int_equal(field(&t, 1350, "k", "fire_count"), 1);
	/* queue holds the occurrence and retries; released, it fires with
	 * its original due time and coalesces what elapsed. */
	create_interval(&t, 1000, "q", 100, 1000, "queue_after_previous", &r);
	freply_free(&r);
	pass(&t, 1000, &s);
	pass(&t, 1100, &s);
	assert_int_equal(field(&t, 1100, "q", "overlap_queued_due_at_ms"),
	                 1100);
	assert_int_equal(field(&t, 1100, "q", "next_run_at_ms"), 2100);
	/* Still running at the retry: the next check backs off (2 s). */
	pass(&t, 2100, &s); /* k is due too */
	assert_int_equal(field(&t, 2100, "q", "overlap_queued_due_at_ms"),
	                 1100);
	assert_int_equal(field(&t, 2100, "q", "next_run_at_ms"), 4100);
	{
		/* A wake scan finds the hold before its retry is due; a
		 * plain scan does not. */
		struct freply sc;
		struct fsnp_val list;
		scan_cmd(&t, 2200, 2200 + 600000, NULL, true, &sc);
		assert_int_equal(fsnp_map_get(&sc.v, "schedules", &list), 0);
		assert_int_equal(list.as.count, 1);
		freply_free(&sc);
		scan_cmd(&t, 2200, 2200, NULL, false, &sc);
		assert_int_equal(fsnp_map_get(&sc.v, "schedules", &list), 0);
		{
			struct fsnp_iter it;
			struct fsnp_val e;
			fsnp_iter_init(&it, &list);
			while (fsnp_iter_next(&it, NULL, &e)) {
				assert_false(fr_str_eq(&e, "id", "q"));
			}
		}
		freply_free(&sc);
	}
	cancel_flow(&t, 4000, "q:1000:1");
	pass(&t, 4100, &s);
	assert_true(flow_exists(&t, 4100, "q:1100:2"));
	assert_int_equal(field(&t, 4100, "q", "overlap_queued_due_at_ms"), -1);
	assert_int_equal(field(&t, 4100, "q", "last_coalesced_count"), 30);
	assert_int_equal(field(&t, 4100, "q", "next_run_at_ms"), 4200);
	tdb_close(&t);
}

static void test_bounds(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct stats s;
	char buf[256];
	(void)state;
	ftdb_open(&t);
	/* max_fires */
	fb_begin(&b);
	fb_str(&b, "id", "m");
	fb_int(&b, "every_ms", 100);
	fb_int(&b, "start_at_ms", 1000);
	fb_int(&b, "max_fires", 2);
	tgt(&b, NULL, NULL);
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, &r);
	fb_free(&b);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	pass(&t, 1000, &s);
	pass(&t, 1100, &s);
	pass(&t, 1200, &s);
	assert_int_equal(s.claimed, 0);
	text(&t, 1200, "m", "state", buf);
	assert_string_equal(buf, "completed");
	text(&t, 1200, "m", "end_reason", buf);
	assert_string_equal(buf, "max_fires");
	assert_int_equal(field(&t, 1200, "m", "next_run_at_ms"), -1);
	/* end_at_ms, inclusive */
	fb_begin(&b);
	fb_str(&b, "id", "e");
	fb_int(&b, "every_ms", 100);
	fb_int(&b, "start_at_ms", 1000);
	fb_int(&b, "end_at_ms", 1100);
	tgt(&b, NULL, NULL);
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, &r);
	fb_free(&b);
	freply_free(&r);
	pass(&t, 1000, &s);
	text(&t, 1000, "e", "state", buf);
	assert_string_equal(buf, "active");
	pass(&t, 1100, &s);
	assert_int_equal(s.fired, 1);
	text(&t, 1100, "e", "state", buf);
	assert_string_equal(buf, "completed");
	text(&t, 1100, "e", "end_reason", buf);
	assert_string_equal(buf, "end_at_ms");
	tdb_close(&t);
}

static void test_one_shot_and_delay(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct stats s;
	char buf[256];
	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "id", "one");
	fb_int(&b, "at_ms", 1500);
	tgt(&b, "id", "the-target");
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, &r);
	fb_free(&b);
	assert_int_equal(r.status, 0);
	fr_str(&r.v, "kind", buf);
	assert_string_equal(buf, "one_shot");
	assert_true(fr_is_nil(&r.v, "every_ms"));
	assert_true(fr_is_nil(&r.v, "catchup_policy"));
	freply_free(&r);
	pass(&t, 1499, &s);
	assert_int_equal(s.claimed, 0);
	pass(&t, 1600, &s);
	assert_int_equal(s.fired, 1);
	assert_string_equal(s.last_target, "the-target");
	pass(&t, 9000, &s);
	assert_int_equal(s.claimed, 0);
	text(&t, 9000, "one", "end_reason", buf);
	assert_string_equal(buf, "one_shot_fired");
	/* delay: now + delay_ms; generated id. */
	fb_begin(&b);
	fb_str(&b, "id", "d");
	fb_int(&b, "delay_ms", 250);
	fb_int(&b, "now_ms", 1000);
	tgt(&b, NULL, NULL);
	fb_end(&b);
	fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, 1, &r);
	fb_free(&b);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1250);
	freply_free(&r);
	pass(&t, 1300, &s);
	assert_string_equal(s.last_target, "d:1250:1");
	tdb_close(&t);
}

static void test_manual_fire(void **state)
{
	struct tdb t;
	struct freply r;
	struct stats s;
	(void)state;
	ftdb_open(&t);
	create_interval(&t, 1000, "f", 1000, 5000, NULL, &r);
	freply_free(&r);
	pass_ex(&t, 1200, "f", -1, NULL, false, &s);
	wbuf_free(&s.record);
	assert_int_equal(s.fired, 1);
	assert_string_equal(s.last_target, "f:1200:1");
	/* The cadence is kept; nothing replayed. */
	assert_int_equal(field(&t, 1200, "f", "next_run_at_ms"), 5000);
	assert_int_equal(field(&t, 1200, "f", "coalesced_count"), 0);
	by_id(&t, 1300, FSNP_OP_FLOW_SCHEDULE_PAUSE, "f", &r);
	freply_free(&r);
	pass_ex(&t, 1400, "f", -1, NULL, false, &s);
	wbuf_free(&s.record);
	assert_int_equal(s.errors, 1);
	assert_string_equal(s.last_error, "ERR flow schedule is not active");
	tdb_close(&t);
}

/* A plan recorded twice (a replay after a lost answer, or a second
 * scheduler) changes nothing the second time; a plan made before a pause
 * is refused. */
static void test_stale_and_replayed(void **state)
{
	struct tdb t;
	struct freply r;
	struct stats s;
	(void)state;
	ftdb_open(&t);
	create_interval(&t, 1000, "r", 100, 1000, NULL, &r);
	freply_free(&r);
	pass_ex(&t, 1000, NULL, -1, NULL, false, &s);
	assert_int_equal(s.fired, 1);
	sched_cmd(&t, 1001, FLOW_SCHED_KIND_RECORD, &s.record, &r);
	assert_int_equal(r.status, 0);
	{
		struct fsnp_val e;
		struct fsnp_iter it;
		char res[256];
		fsnp_iter_init(&it, &r.v);
		assert_true(fsnp_iter_next(&it, NULL, &e));
		fr_str(&e, "result", res);
		assert_string_equal(res, "stale");
	}
	freply_free(&r);
	wbuf_free(&s.record);
	assert_int_equal(field(&t, 1001, "r", "fire_count"), 1);
	/* Planned, then paused before the record lands. */
	pass_ex(&t, 1100, NULL, -1, NULL, true, &s);
	assert_int_equal(s.fired, 1); /* recorded; outbox kept */
	by_id(&t, 1150, FSNP_OP_FLOW_SCHEDULE_PAUSE, "r", &r);
	freply_free(&r);
	sched_cmd(&t, 1151, FLOW_SCHED_KIND_RECORD, &s.record, &r);
	freply_free(&r);
	wbuf_free(&s.record);
	assert_int_equal(field(&t, 1151, "r", "fire_count"), 2);
	/* The outbox survives until drained: the next pass creates it. */
	assert_false(flow_exists(&t, 1152, "r:1100:2"));
	by_id(&t, 1152, FSNP_OP_FLOW_SCHEDULE_RESUME, "r", &r);
	freply_free(&r);
	{
		struct wbuf b;
		struct fsnp_writer w;
		struct freply scan;
		struct fsnp_val ob;
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "now_ms");
		fsnp_w_i64(&w, 1152);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		sched_cmd(&t, 1152, FLOW_SCHED_KIND_SCAN, &b, &scan);
		wbuf_free(&b);
		assert_int_equal(fsnp_map_get(&scan.v, "outbox", &ob), 0);
		assert_int_equal(drain_outbox(&t, 1152, &ob), 1);
		/* Draining twice is harmless (idempotent creates). */
		assert_int_equal(drain_outbox(&t, 1153, &ob), 1);
		freply_free(&scan);
	}
	assert_true(flow_exists(&t, 1153, "r:1100:2"));
	tdb_close(&t);
}

static void test_planning_failure(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct stats s;
	char buf[320];
	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "id", "c");
	fb_str(&b, "cron", "30 2 * * *");
	fb_str(&b, "timezone", "America/New_York");
	fb_int(&b, "now_ms", INT64_C(1772884800000)); /* 2026-03-07 12:00Z */
	tgt(&b, NULL, NULL);
	fb_end(&b);
	fl_run(&t, G, UINT64_C(1772884800000), FSNP_OP_FLOW_SCHEDULE_CREATE, &b,
	       1, &r);
	fb_free(&b);
	assert_int_equal(r.status, 0);
	/* 2026-03-08 02:30 does not exist in New York: 03-09 06:30Z. */
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"),
	                 INT64_C(1773037800000));
	fr_str(&r.v, "timezone", buf);
	assert_string_equal(buf, "America/New_York");
	assert_true(fr_is_nil(&r.v, "every_ms"));
	freply_free(&r);
	/* The zone is gone from the planner's database: the schedule fails
	 * without creating a target. */
	pass_ex(&t, UINT64_C(1773037800000), NULL, -1, "/nonexistent", false,
	        &s);
	wbuf_free(&s.record);
	assert_int_equal(s.errors, 1);
	assert_int_equal(s.fired, 0);
	assert_string_equal(
	    s.last_error,
	    "ERR flow schedule timezone is invalid or unavailable");
	text(&t, 1, "c", "state", buf);
	assert_string_equal(buf, "failed");
	text(&t, 1, "c", "end_reason", buf);
	assert_string_equal(buf, "planning_failed");
	text(&t, 1, "c", "last_planning_error", buf);
	assert_string_equal(
	    buf, "ERR flow schedule timezone is invalid or unavailable");
	tdb_close(&t);
}

static void test_cron_fires(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct stats s;
	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "id", "berlin");
	fb_str(&b, "cron", "30 2 * * *");
	fb_str(&b, "timezone", "Europe/Berlin");
	fb_int(&b, "now_ms", INT64_C(1792882800000)); /* 2026-10-24 23:00Z */
	tgt(&b, NULL, NULL);
	fb_end(&b);
	fl_run(&t, G, UINT64_C(1792882800000), FSNP_OP_FLOW_SCHEDULE_CREATE, &b,
	       1, &r);
	fb_free(&b);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"),
	                 INT64_C(1792888200000));
	freply_free(&r);
	/* 02:30 happens twice on 2026-10-25; an overdue cron advances one
	 * match per fire (no coalescing). */
	pass(&t, UINT64_C(1792990000000), &s);
	assert_string_equal(s.last_target, "berlin:1792888200000:1");
	assert_int_equal(s.coalesced, 0);
	assert_int_equal(field(&t, 1, "berlin", "next_run_at_ms"),
	                 INT64_C(1792891800000));
	pass(&t, UINT64_C(1792990000000), &s);
	assert_string_equal(s.last_target, "berlin:1792891800000:2");
	assert_int_equal(field(&t, 1, "berlin", "next_run_at_ms"),
	                 INT64_C(1792978200000));
	assert_int_equal(field(&t, 1, "berlin", "coalesced_count"), 0);
	tdb_close(&t);
}

/* --- the model test ----------------------------------------------------- */

struct model {
	bool paused;
	int64_t every, next, fires, coalesced;
	int64_t last_due;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Interval schedules over simulated time: passes at random gaps (often
 * several periods), pauses and resumes, replayed records. The model says
 * which due time fires next, how many occurrences are coalesced and the
 * next run; the store must agree, create each target exactly once, and
 * never fire a due time twice. */
/* Targets carry the owner proof: a keyed digest of schedule, target id
 * and definition, the same for the same inputs and different for another
 * target id. A fire planned onto a target id another flow holds
 * (owner_conflict) records nothing but holds the occurrence for 30 s. */
static void test_owner_proof(void **state)
{
	struct tdb t;
	struct freply r, scan;
	struct fsnp_val list, e, ob, ent, body, attrs, pv;
	struct fsnp_iter it;
	struct flow_sched_rec rec;
	struct flow_sched_plan plan;
	char p1[FLOW_SCHED_PROOF_MAX], p2[FLOW_SCHED_PROOF_MAX];
	struct wbuf b;
	struct fsnp_writer w;
	(void)state;
	ftdb_open(&t);
	create_interval(&t, 1000, "o", 1000, 2000, NULL, &r);
	freply_free(&r);
	/* The internal form (the scan's) holds the secret; GET does not. */
	get(&t, 1000, "o", &r);
	assert_int_not_equal(fsnp_map_get(&r.v, "_owner_secret", &pv), 0);
	freply_free(&r);
	scan_cmd(&t, 2000, 2000, "o", false, &scan);
	assert_int_equal(fsnp_map_get(&scan.v, "schedules", &list), 0);
	fsnp_iter_init(&it, &list);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(flow_sched_rec_decode(&e, &rec), 0);
	assert_int_equal(rec.s[SS_OWNER_SECRET].len, FLOW_SCHED_SECRET_LEN);
	assert_int_equal(flow_sched_owner_proof(&rec, "o:2000:1", p1), 0);
	assert_int_equal(strlen(p1), 43);
	assert_int_equal(flow_sched_owner_proof(&rec, "o:2000:1", p2), 0);
	assert_string_equal(p1, p2);
	assert_int_equal(flow_sched_owner_proof(&rec, "o:3000:2", p2), 0);
	assert_string_not_equal(p1, p2);
	/* The fire's target create request carries the proof. */
	flow_sched_plan(&rec, 2000, false, 2000, false, NULL, &plan);
	assert_string_equal(plan.target_id, "o:2000:1");
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, 2000);
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	flow_sched_plan_write(&w, &rec, &plan);
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	sched_cmd(&t, 2000, FLOW_SCHED_KIND_RECORD, &b, &r);
	wbuf_free(&b);
	freply_free(&scan);
	assert_int_equal(r.status, 0);
	fsnp_iter_init(&it, &r.v);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(fsnp_map_get(&e, "outbox", &ob), 0);
	assert_int_equal(fsnp_map_get(&ob, "entry", &ent), 0);
	assert_int_equal(fsnp_map_get(&ent, "body", &pv), 0);
	assert_int_equal(
	    fsnp_value_decode(pv.as.bin.ptr, pv.as.bin.len, NULL, &body, NULL),
	    0);
	assert_int_equal(fsnp_map_get(&body, "attributes", &attrs), 0);
	assert_true(fr_str_eq(&attrs, FLOW_SCHED_OWNER_ATTR, p1));
	freply_free(&r);
	/* The next occurrence (due 3000) meets a foreign flow. */
	scan_cmd(&t, 3000, 3000, "o", false, &scan);
	assert_int_equal(fsnp_map_get(&scan.v, "schedules", &list), 0);
	fsnp_iter_init(&it, &list);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(flow_sched_rec_decode(&e, &rec), 0);
	flow_sched_plan(&rec, 3000, false, 3000, false, NULL, &plan);
	plan.outcome = FSO_OWNER_CONFLICT;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, 3000);
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	flow_sched_plan_write(&w, &rec, &plan);
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	sched_cmd(&t, 3000, FLOW_SCHED_KIND_RECORD, &b, &r);
	wbuf_free(&b);
	freply_free(&scan);
	fsnp_iter_init(&it, &r.v);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_true(fr_str_eq(&e, "result", "error"));
	assert_true(fr_str_eq(&e, "error", FLOW_SCHED_OWNER_CONFLICT));
	freply_free(&r);
	assert_int_equal(field(&t, 3000, "o", "fire_count"), 1);
	assert_int_equal(field(&t, 3000, "o", "overlap_queued_due_at_ms"),
	                 3000);
	assert_int_equal(field(&t, 3000, "o", "next_run_at_ms"),
	                 3000 + FLOW_SCHED_OWNER_RETRY_MS);
	/* A wake scan looks for queue_after_previous holds only. */
	scan_cmd(&t, 3000, 3000 + 600000, NULL, true, &scan);
	assert_int_equal(fsnp_map_get(&scan.v, "schedules", &list), 0);
	assert_int_equal(list.as.count, 0);
	freply_free(&scan);
	tdb_close(&t);
}

/* LIST keeps only what it can answer with: the first `count` by next run
 * (the last with rev), whether through the due index (active) or over
 * every record (other states), from more schedules than twice count. */
static void test_list_count(void **state)
{
	static const char *const ids[] = {"l0", "l1", "l2", "l3", "l4", "l5"};
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct fsnp_iter it;
	struct fsnp_val e;
	(void)state;
	ftdb_open(&t);
	/* li starts at 9000 - 1000 i: l5 first. */
	for (int i = 0; i < 6; i++) {
		create_interval(&t, 1000, ids[i], 1000, 9000 - 1000 * i, NULL,
		                &r);
		freply_free(&r);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (int rev = 0; rev < 2; rev++) {
			const char *want[2] = {rev ? "l0" : "l5",
			                       rev ? "l1" : "l4"};
			fb_begin(&b);
			if (pass == 1) {
				fb_str(&b, "state", "paused");
			}
			fb_int(&b, "count", 2);
			if (rev) {
				fb_bool(&b, "rev", true);
			}
			fb_end(&b);
			fl_run(&t, G, 1000, FSNP_OP_FLOW_SCHEDULE_LIST, &b, 1,
			       &r);
			fb_free(&b);
			assert_int_equal(r.v.as.count, 2);
			fsnp_iter_init(&it, &r.v);
			for (int k = 0; fsnp_iter_next(&it, NULL, &e); k++) {
				assert_true(fr_str_eq(&e, "id", want[k]));
			}
			freply_free(&r);
		}
		for (int i = 0; pass == 0 && i < 6; i++) {
			by_id(&t, 1000, FSNP_OP_FLOW_SCHEDULE_PAUSE, ids[i],
			      &r);
			freply_free(&r);
		}
	}
	tdb_close(&t);
}

static void test_model(void **state)
{
	enum { N = 4, STEPS = 300 };
	struct tdb t;
	struct model m[N];
	uint64_t seed = 0x5eed5c4edULL, now = 10000;
	char id[16], tid[64];
	(void)state;
	ftdb_open(&t);
	for (int i = 0; i < N; i++) {
		struct freply r;
		snprintf(id, sizeof id, "m%d", i);
		m[i] = (struct model){
		    false, 50 + (int64_t)(rnd(&seed) % 400), (int64_t)now, 0, 0,
		    -1};
		create_interval(&t, now, id, m[i].every, (int64_t)now, NULL,
		                &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
	}
	for (int step = 0; step < STEPS; step++) {
		uint64_t op = rnd(&seed) % 10;
		int i = (int)(rnd(&seed) % N);
		struct freply r;
		struct stats s;
		snprintf(id, sizeof id, "m%d", i);
		now +=
		    rnd(&seed) % 3 == 0 ? rnd(&seed) % 2000 : rnd(&seed) % 120;
		if (op == 0) {
			by_id(&t, now,
			      m[i].paused ? FSNP_OP_FLOW_SCHEDULE_RESUME
			                  : FSNP_OP_FLOW_SCHEDULE_PAUSE,
			      id, &r);
			assert_int_equal(r.status, 0);
			freply_free(&r);
			m[i].paused = !m[i].paused;
			continue;
		}
		/* Expected outcomes. */
		int64_t want_fired = 0, want_coalesced = 0;
		for (int k = 0; k < N; k++) {
			if (m[k].paused || m[k].next > (int64_t)now) {
				continue;
			}
			int64_t due = m[k].next, late = (int64_t)now - due;
			int64_t c = late >= m[k].every ? late / m[k].every : 0;
			assert_true(due > m[k].last_due);
			m[k].last_due = due;
			m[k].fires++;
			m[k].coalesced += c;
			m[k].next = c > 0 ? (int64_t)now + m[k].every
			                  : due + m[k].every;
			want_fired++;
			want_coalesced += c;
		}
		pass_ex(&t, now, NULL, -1, NULL, false, &s);
		assert_int_equal(s.fired, want_fired);
		assert_int_equal(s.coalesced, want_coalesced);
		assert_int_equal(s.stale, 0);
		if (op == 1 && s.fired > 0) {
			/* A replay of the same plans: all stale. */
			sched_cmd(&t, now, FLOW_SCHED_KIND_RECORD, &s.record,
			          &r);
			struct fsnp_val e;
			struct fsnp_iter it;
			char res[256];
			fsnp_iter_init(&it, &r.v);
			while (fsnp_iter_next(&it, NULL, &e)) {
				fr_str(&e, "result", res);
				assert_string_equal(res, "stale");
			}
			freply_free(&r);
		}
		wbuf_free(&s.record);
		for (int k = 0; k < N; k++) {
			snprintf(id, sizeof id, "m%d", k);
			assert_int_equal(field(&t, now, id, "fire_count"),
			                 m[k].fires);
			assert_int_equal(field(&t, now, id, "coalesced_count"),
			                 m[k].coalesced);
			assert_int_equal(field(&t, now, id, "next_run_at_ms"),
			                 m[k].next);
			if (m[k].fires > 0) {
				snprintf(tid, sizeof tid,
				         "m%d:%" PRId64 ":%" PRId64, k,
				         m[k].last_due, m[k].fires);
				assert_true(flow_exists(&t, now, tid));
			}
		}
	}
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_errors),
	    cmocka_unit_test(test_lifecycle_errors),
	    cmocka_unit_test(test_interval_catchup),
	    cmocka_unit_test(test_overlap_matrix),
	    cmocka_unit_test(test_skip_and_queue_details),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_one_shot_and_delay),
	    cmocka_unit_test(test_manual_fire),
	    cmocka_unit_test(test_stale_and_replayed),
	    cmocka_unit_test(test_planning_failure),
	    cmocka_unit_test(test_cron_fires),
	    cmocka_unit_test(test_owner_proof),
	    cmocka_unit_test(test_list_count),
	    cmocka_unit_test(test_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
