/* Integration: FerricFlow schedules on 3 real lodestone processes with the
 * built-in scheduler.
 *
 *  - raw FSNP: FLOW.SCHEDULE.CREATE with the bodies FerricStore's
 *    docs/flow-schedules.md and the protocol seed show, byte for byte the
 *    same maps, then GET, LIST, FIRE, FIRE_DUE, PAUSE, RESUME and DELETE,
 *    checking the record fields the official SDK requires;
 *  - a paused schedule fires nothing;
 *  - a one-shot schedule fires exactly once;
 *  - an interval schedule keeps firing once per period across a SIGKILL of
 *    its shard's leader and then a SIGSTOP of the next one (longer than
 *    three periods, with no majority left to commit meanwhile): every
 *    target exists once, the due times strictly increase at least a
 *    period apart (none doubled), and the periods the stop skipped are
 *    reported as coalesced.
 *  - a queue_after_previous occurrence held behind its previous target
 *    (retry 20 s) fires at once when that target completes;
 *  - with --flow-scheduler off (one more node) nothing fires by itself and
 *    FIRE_DUE fires the schedule, coalescing the periods it missed; a
 *    target id another flow holds is refused as FerricStore refuses it
 *    (the occurrence held, that flow untouched), and the schedule's own
 *    targets carry its owner proof; FIRE_DUE goes past one wave of 16,
 *    and with block_ms waits for a schedule coming due; LIST pages active
 *    schedules in next-run order.
 * Targets are enumerated by claiming their type (FLOW.CLAIM_DUE visits
 * every shard). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define NODES 3
#define EVERY_MS 700

static struct harness_cluster cl;
static bool alive[NODES] = {true, true, true};

static int setup(void **state)
{
	static const char *const extra[] = {"--shards", "2", NULL};
	(void)state;
	if (harness_cluster_start(&cl, NODES, extra, true) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < NODES; i++) {
		if (ftc_wait_ready(cl.nodes[i].fsnp, 30000) != 0) {
			return -1;
		}
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cl);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void connect_any(struct ftc *c)
{
	for (unsigned i = 0; i < NODES; i++) {
		if (alive[i] && ftc_connect(c, cl.nodes[i].fsnp) == 0) {
			return;
		}
	}
	fail_msg("no node answers");
}

static struct ftc_msg callb(struct ftc *c, uint16_t op, struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, 0, b, &m), 0);
	wbuf_free(b);
	return m;
}

static struct ftc_msg by_id(struct ftc *c, uint16_t op, const char *id)
{
	struct wbuf b;
	ftc_body(&b, "id=s", id);
	return callb(c, op, &b);
}

/* A schedule body: the map of `fmt` keys (ftc_body's letters, only s and
 * i) followed by target {type, [id_prefix | id]}. */
static void sched_body(struct wbuf *b, const char *type, const char *tkey,
                       const char *tval, const char *fmt, ...)
{
	struct fsnp_writer w;
	va_list ap;
	wbuf_init(b);
	fsnp_w_init(&w, b);
	fsnp_w_map_begin(&w);
	va_start(ap, fmt);
	for (const char *p = fmt; *p != '\0';) {
		char key[64];
		size_t n = strcspn(p, "=");
		memcpy(key, p, n);
		key[n] = '\0';
		fsnp_w_key(&w, key);
		if (p[n + 1] == 's') {
			fsnp_w_str(&w, va_arg(ap, const char *));
		} else {
			fsnp_w_i64(&w, va_arg(ap, int64_t));
		}
		p += n + 2;
		while (*p == ' ') {
			p++;
		}
	}
	va_end(ap);
	fsnp_w_key(&w, "target");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "type");
	fsnp_w_str(&w, type);
	if (tkey != NULL) {
		fsnp_w_key(&w, tkey);
		fsnp_w_str(&w, tval);
	}
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
}

static int64_t sched_int(const char *id, const char *k)
{
	struct ftc c;
	struct ftc_msg m;
	struct fsnp_val v;
	int64_t n = -1;
	connect_any(&c);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_GET, id);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_MAP);
	if (fsnp_map_get(&m.value, k, &v) == 0 && v.tag == FSNP_I64) {
		n = v.as.i;
	}
	ftc_msg_free(&m);
	ftc_close(&c);
	return n;
}

/* The ids of every flow of `type` (claimed, so each once). */
static size_t claim_all(const char *type, char ids[][96], size_t cap)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_iter it;
	struct fsnp_val e;
	size_t n = 0;
	connect_any(&c);
	ftc_body(&b, "type=s worker=s limit=i lease_ms=i", type, "itest",
	         (int64_t)1000, (int64_t)600000);
	m = callb(&c, FSNP_OP_FLOW_CLAIM_DUE, &b);
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&it, &m.value);
	while (fsnp_iter_next(&it, NULL, &e) && n < cap) {
		struct fsnp_bytes id;
		assert_int_equal(fsnp_map_bin(&e, "id", &id), 0);
		snprintf(ids[n++], 96, "%.*s", (int)id.len,
		         (const char *)id.ptr);
	}
	ftc_msg_free(&m);
	ftc_close(&c);
	return n;
}

/* The SDK's strict checks of a schedule record (reference/flow.md 6.1). */
static void check_record(const struct fsnp_val *r, const char *kind)
{
	static const char *const present[] = {"catchup_policy",
	                                      "every_ms",
	                                      "cron",
	                                      "timezone",
	                                      "overlap_retry_ms",
	                                      "coalesced_count",
	                                      "last_coalesced_count",
	                                      "last_catchup_at_ms",
	                                      "last_planning_error",
	                                      "fire_count",
	                                      "attempts",
	                                      "skipped_count",
	                                      "next_run_at_ms",
	                                      "target"};
	struct fsnp_val v;
	for (size_t i = 0; i < sizeof present / sizeof present[0]; i++) {
		if (fsnp_map_get(r, present[i], &v) != 0) {
			fail_msg("record lacks %s", present[i]);
		}
	}
	assert_true(ftc_map_str(r, "kind", kind));
	assert_int_equal(fsnp_map_get(r, "catchup_policy", &v), 0);
	if (strcmp(kind, "interval") == 0) {
		assert_true(ftc_str_eq(&v, "fire_once"));
	} else {
		assert_int_equal(v.tag, FSNP_NIL);
	}
}

static void test_raw_bodies(void **state)
{
	static const char *const extra[] = {"--shards", "2", "--flow-scheduler",
	                                    "off", NULL};
	struct harness_cluster own;
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_val v, t;
	char msg[512];
	(void)state;
	/* Its own node without the built-in scheduler: a manual FIRE must
	 * not race the scheduler's first fire of the interval (which then
	 * holds FIRE's occurrence behind its queued target). */
	assert_int_equal(harness_cluster_start(&own, 1, extra, true), 0);
	assert_int_equal(ftc_wait_ready(own.nodes[0].fsnp, 30000), 0);
	assert_int_equal(ftc_connect(&c, own.nodes[0].fsnp), 0);
	/* docs/flow-schedules.md, "Native request body", field for field. */
	{
		struct wbuf d;
		struct fsnp_writer w;
		wbuf_init(&d);
		fsnp_w_init(&w, &d);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, "billing-sweep");
		fsnp_w_key(&w, "kind");
		fsnp_w_str(&w, "interval");
		fsnp_w_key(&w, "every_ms");
		fsnp_w_i64(&w, 60000);
		fsnp_w_key(&w, "catchup_policy");
		fsnp_w_str(&w, "fire_once");
		fsnp_w_key(&w, "overlap_policy");
		fsnp_w_str(&w, "queue_after_previous");
		fsnp_w_key(&w, "target");
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "id_prefix");
		fsnp_w_str(&w, "billing-sweep");
		fsnp_w_key(&w, "type");
		fsnp_w_str(&w, "billing");
		fsnp_w_key(&w, "state");
		fsnp_w_str(&w, "queued");
		fsnp_w_map_end(&w);
		fsnp_w_map_end(&w);
		assert_int_equal(fsnp_w_finish(&w), 0);
		b = d;
	}
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	check_record(&m.value, "interval");
	assert_true(ftc_map_str(&m.value, "state", "active"));
	assert_true(
	    ftc_map_str(&m.value, "overlap_policy", "queue_after_previous"));
	assert_int_equal(ftc_map_int(&m.value, "every_ms"), 60000);
	assert_int_equal(fsnp_map_get(&m.value, "target", &t), 0);
	assert_true(ftc_map_str(&t, "type", "billing"));
	ftc_msg_free(&m);
	/* The seed's body: same id again is a duplicate. */
	sched_body(&b, "billing", "id_prefix", "billing-sweep",
	           "id=s kind=s every_ms=i catchup_policy=s", "billing-sweep",
	           "interval", (int64_t)60000, "fire_once");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 1);
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(msg, "ERR flow already exists");
	ftc_msg_free(&m);
	/* An option no schedule takes; one no Flow command knows. */
	sched_body(&b, "billing", NULL, NULL, "id=s worker=s", "x", "w");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(msg, "ERR unsupported flow schedule option worker");
	ftc_msg_free(&m);
	sched_body(&b, "billing", NULL, NULL, "id=s colour=s", "x", "red");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 6);
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(msg, "ERR native unknown flow option colour");
	ftc_msg_free(&m);
	/* GET, LIST (every shard), FIRE (now), FIRE_DUE as the seed shows. */
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_GET, "billing-sweep");
	assert_int_equal(m.status, 0);
	check_record(&m.value, "interval");
	ftc_msg_free(&m);
	ftc_body(&b, "state=s", "all");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_LIST, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	assert_true(m.value.as.count >= 1);
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_FIRE, "billing-sweep");
	if (m.status != 0) {
		ftc_error_text(&m, msg, sizeof msg);
		fail_msg("FIRE: %s", msg);
	}
	assert_int_equal(ftc_map_int(&m.value, "fired"), 1);
	assert_int_equal(fsnp_map_get(&m.value, "target_id", &v), 0);
	assert_int_equal(v.tag, FSNP_BIN);
	assert_true(v.as.bin.len > strlen("billing-sweep:") &&
	            memcmp(v.as.bin.ptr, "billing-sweep:", 14) == 0);
	assert_int_equal(fsnp_map_get(&m.value, "schedule", &v), 0);
	check_record(&v, "interval");
	ftc_msg_free(&m);
	ftc_body(&b, "worker=s limit=i", "scheduler-1", (int64_t)100);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	{
		int64_t claimed = ftc_map_int(&m.value, "claimed");
		int64_t fired = ftc_map_int(&m.value, "fired");
		int64_t skipped = ftc_map_int(&m.value, "skipped");
		struct fsnp_val errs;
		assert_int_equal(fsnp_map_get(&m.value, "errors", &errs), 0);
		assert_int_equal(errs.tag, FSNP_ARRAY);
		assert_int_equal(fired + skipped + (int64_t)errs.as.count,
		                 claimed);
		assert_true(ftc_map_int(&m.value, "coalesced") >= 0);
	}
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_PAUSE, "billing-sweep");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "state", "paused"));
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_FIRE, "billing-sweep");
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(msg, "ERR flow schedule is not active");
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_RESUME, "billing-sweep");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "state", "active"));
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_DELETE, "billing-sweep");
	assert_int_equal(m.status, 0);
	assert_true(ftc_str_eq(&m.value, "OK"));
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_DELETE, "billing-sweep");
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(msg, "ERR flow is terminal; use FLOW.REWIND");
	ftc_msg_free(&m);
	/* A cron schedule in a zone the tz database lacks is refused. */
	sched_body(&b, "r", NULL, NULL, "id=s cron=s timezone=s", "cz",
	           "0 9 * * MON-FRI", "Mars/Olympus");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(
	    msg, "ERR flow schedule timezone is invalid or unavailable");
	ftc_msg_free(&m);
	sched_body(&b, "r", "id_prefix", "nyc", "id=s cron=s timezone=s", "cz",
	           "0 9 * * MON-FRI", "America/New_York");
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	check_record(&m.value, "cron");
	assert_true(ftc_map_str(&m.value, "timezone", "America/New_York"));
	ftc_msg_free(&m);
	ftc_close(&c);
	harness_cluster_stop(&own);
}

static void test_paused_fires_nothing(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	char ids[8][96];
	int64_t start = now_ms() + 1500;
	(void)state;
	connect_any(&c);
	sched_body(&b, "paused-t", NULL, NULL, "id=s every_ms=i start_at_ms=i",
	           "paused", (int64_t)500, start);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_PAUSE, "paused");
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "fire_count"), 0);
	assert_int_equal(ftc_map_int(&m.value, "next_run_at_ms"), start);
	ftc_msg_free(&m);
	ftc_close(&c);
	/* Well past the first due time and two more periods. */
	while (now_ms() < start + 1200) {
		harness_nap(100);
	}
	assert_int_equal(sched_int("paused", "fire_count"), 0);
	assert_int_equal(claim_all("paused-t", ids, 8), 0);
}

static void test_one_shot_once(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	char ids[8][96];
	uint64_t until;
	(void)state;
	connect_any(&c);
	sched_body(&b, "once-t", NULL, NULL, "id=s at_ms=i", "once",
	           now_ms() + 300);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
	until = harness_mono_ms() + 10000;
	while (sched_int("once", "fire_count") < 1 &&
	       harness_mono_ms() < until) {
		harness_nap(100);
	}
	harness_nap(800); /* more scheduler turns: nothing more fires */
	assert_int_equal(sched_int("once", "fire_count"), 1);
	assert_int_equal(sched_int("once", "next_run_at_ms"), -1);
	assert_int_equal(claim_all("once-t", ids, 8), 1);
}

/* The node leading the shard of schedule `id` (ROUTE of its tag). */
static int leader_of_schedule(const char *id)
{
	char part[FLOW_AUTO_PARTITION_MAX], tag[FLOW_TAG_MAX],
	    key[FLOW_TAG_MAX + 3];
	const uint8_t *p;
	size_t plen;
	flow_route_partition((const uint8_t *)id, strlen(id), NULL, 0, part, &p,
	                     &plen);
	flow_route_tag(p, plen, tag);
	snprintf(key, sizeof key, "{%s}", tag);
	for (int tries = 0; tries < 200; tries++) {
		struct ftc c;
		struct ftc_msg m;
		struct wbuf b;
		int found = -1;
		connect_any(&c);
		ftc_body(&b, "key=s", key);
		m = callb(&c, FSNP_OP_ROUTE, &b);
		if (m.status == 0 &&
		    !ftc_map_str(&m.value, "hint", "local_fallback")) {
			int64_t port = ftc_map_int(&m.value, "native_port");
			for (unsigned k = 0; k < NODES; k++) {
				if (cl.nodes[k].fsnp == port) {
					found = (int)k;
				}
			}
		}
		ftc_msg_free(&m);
		ftc_close(&c);
		if (found >= 0) {
			return found;
		}
		harness_nap(100);
	}
	return -1;
}

/* queue_after_previous: the next occurrence waits behind the first target
 * with a long retry (20 s); completing that target on the node that runs
 * the schedule releases it at once (well before the retry), with its
 * original due time. */
static void test_queue_woken_by_complete(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_val e;
	struct fsnp_iter it;
	struct fsnp_bytes tok;
	char token[128], tid[96];
	int64_t fence, queued;
	uint64_t until, t0;
	int leader;
	(void)state;
	connect_any(&c);
	sched_body(&b, "wq-t", NULL, NULL,
	           "id=s every_ms=i overlap_policy=s overlap_retry_ms=i", "wq",
	           (int64_t)300, "queue_after_previous", (int64_t)20000);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
	/* The first target, then the second occurrence held behind it. */
	until = harness_mono_ms() + 15000;
	while ((queued = sched_int("wq", "overlap_queued_due_at_ms")) < 0 &&
	       harness_mono_ms() < until) {
		harness_nap(100);
	}
	assert_true(queued > 0);
	assert_int_equal(sched_int("wq", "fire_count"), 1);
	leader = leader_of_schedule("wq");
	assert_true(leader >= 0);
	assert_int_equal(ftc_connect(&c, cl.nodes[leader].fsnp), 0);
	ftc_body(&b, "type=s worker=s limit=i lease_ms=i", "wq-t", "itest",
	         (int64_t)1, (int64_t)60000);
	m = callb(&c, FSNP_OP_FLOW_CLAIM_DUE, &b);
	assert_int_equal(m.status, 0);
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_int_equal(fsnp_map_bin(&e, "id", &tok), 0);
	snprintf(tid, sizeof tid, "%.*s", (int)tok.len, (const char *)tok.ptr);
	assert_int_equal(fsnp_map_bin(&e, "lease_token", &tok), 0);
	snprintf(token, sizeof token, "%.*s", (int)tok.len,
	         (const char *)tok.ptr);
	fence = ftc_map_int(&e, "fencing_token");
	ftc_msg_free(&m);
	ftc_body(&b, "id=s lease_token=s fencing_token=i", tid, token, fence);
	m = callb(&c, FSNP_OP_FLOW_COMPLETE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
	t0 = harness_mono_ms();
	until = t0 + 15000;
	while (sched_int("wq", "fire_count") < 2 && harness_mono_ms() < until) {
		harness_nap(50);
	}
	assert_int_equal(sched_int("wq", "fire_count"), 2);
	/* Far sooner than the retry (20 s, the first check after 1 s at
	 * the earliest would already be past it). */
	assert_true(harness_mono_ms() - t0 < 10000);
	{
		char ids[8][96];
		size_t n = claim_all("wq-t", ids, 8);
		char want[96];
		snprintf(want, sizeof want, "wq:%lld:2", (long long)queued);
		assert_int_equal(n, 1);
		assert_string_equal(ids[0], want);
	}
	connect_any(&c);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_DELETE, "wq");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
}

static int cmp_due(const void *a, const void *b)
{
	long long x = atoll(strchr((const char *)a, ':') + 1);
	long long y = atoll(strchr((const char *)b, ':') + 1);
	return x < y ? -1 : x > y;
}

static void test_interval_across_leader_kill(void **state)
{
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	static char ids[256][96];
	int victim, status;
	int64_t before, after, coalesced, max_gap = 0, prev_due = -1;
	uint64_t until;
	size_t n;
	(void)state;
	connect_any(&c);
	sched_body(&b, "tick-t", NULL, NULL, "id=s every_ms=i", "tick",
	           (int64_t)EVERY_MS);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_close(&c);
	until = harness_mono_ms() + 10000;
	while (sched_int("tick", "fire_count") < 3 &&
	       harness_mono_ms() < until) {
		harness_nap(100);
	}
	before = sched_int("tick", "fire_count");
	assert_true(before >= 3);
	victim = leader_of_schedule("tick");
	assert_true(victim >= 0);
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)victim, SIGKILL, &status), 0);
	alive[victim] = false;
	/* A new leader, and three more periods. */
	until = harness_mono_ms() + 20000;
	for (;;) {
		struct ftc_msg g;
		connect_any(&c);
		g = by_id(&c, FSNP_OP_FLOW_SCHEDULE_GET, "tick");
		after = g.status == 0 && g.value.tag == FSNP_MAP
		            ? ftc_map_int(&g.value, "fire_count")
		            : before;
		ftc_msg_free(&g);
		ftc_close(&c);
		if (after >= before + 3 || harness_mono_ms() > until) {
			break;
		}
		harness_nap(150);
	}
	assert_true(after >= before + 3);
	/* Stop the new leader for longer than three periods: one of three
	 * nodes is dead, so no one else can commit meanwhile, and the next
	 * fire comes late and must coalesce what it missed. */
	victim = leader_of_schedule("tick");
	assert_true(victim >= 0);
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)victim, SIGSTOP, &status), 0);
	alive[victim] = false;
	harness_nap(3 * EVERY_MS + 400);
	assert_int_equal(
	    harness_node_signal(&cl, (unsigned)victim, SIGCONT, &status), 0);
	alive[victim] = true;
	until = harness_mono_ms() + 20000;
	while (sched_int("tick", "fire_count") < after + 2 &&
	       harness_mono_ms() < until) {
		harness_nap(150);
	}
	/* Pause so that the count and the targets hold still. */
	connect_any(&c);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_PAUSE, "tick");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_int(&m.value, "fire_count") >= after + 2);
	after = ftc_map_int(&m.value, "fire_count");
	coalesced = ftc_map_int(&m.value, "coalesced_count");
	ftc_msg_free(&m);
	ftc_close(&c);
	harness_nap(300); /* the last outbox entries land */
	n = claim_all("tick-t", ids, 256);
	assert_int_equal((int64_t)n, after);
	qsort(ids, n, sizeof ids[0], cmp_due);
	for (size_t i = 0; i < n; i++) {
		char want_tail[32];
		const char *c2 = strrchr(ids[i], ':');
		int64_t due = atoll(strchr(ids[i], ':') + 1);
		/* tick:<due>:<fire_count>, counts 1..n in due order */
		snprintf(want_tail, sizeof want_tail, ":%zu", i + 1);
		assert_string_equal(c2, want_tail);
		if (prev_due >= 0) {
			assert_true(due - prev_due >= EVERY_MS);
			if (due - prev_due > max_gap) {
				max_gap = due - prev_due;
			}
		}
		prev_due = due;
	}
	/* The stop skipped occurrences: reported as coalesced, not
	 * replayed. */
	assert_true(max_gap >= 2 * EVERY_MS);
	assert_true(coalesced >= 1);
	print_message("fires %lld (before the kill %lld), coalesced %lld, "
	              "largest gap %lld ms\n",
	              (long long)after, (long long)before, (long long)coalesced,
	              (long long)max_gap);
}

/* --flow-scheduler off: nothing fires by itself; FIRE_DUE does, with the
 * elapsed periods coalesced. */

/* Whether field `k` of history entry e ([event_id, [k, v, ...]]) is the
 * text s. */
static bool hist_is(const struct fsnp_val *e, const char *k, const char *s)
{
	struct fsnp_iter it, f;
	struct fsnp_val id, fields, kv, vv;
	fsnp_iter_init(&it, e);
	if (!fsnp_iter_next(&it, NULL, &id) ||
	    !fsnp_iter_next(&it, NULL, &fields)) {
		return false;
	}
	fsnp_iter_init(&f, &fields);
	while (fsnp_iter_next(&f, NULL, &kv) && fsnp_iter_next(&f, NULL, &vv)) {
		if (ftc_str_eq(&kv, k)) {
			return ftc_str_eq(&vv, s);
		}
	}
	return false;
}

/* Target ownership, on the node without a scheduler so that FIRE_DUE
 * reports each outcome: a target id another flow holds is refused with
 * FerricStore's error and the occurrence is held (fire_count stays 0,
 * nothing more is due for the retry time), and that flow is untouched;
 * a target the schedule creates carries its owner proof. */
static void owner_checks(struct ftc *c)
{
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_val errs, e, x, attrs;
	char msg[512];

	m = by_id(c, FSNP_OP_FLOW_SCHEDULE_DELETE, "off");
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_body(&b, "id=s type=s", "taken", "manual");
	m = callb(c, FSNP_OP_FLOW_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	sched_body(&b, "owned-t", "id", "taken", "id=s", "own");
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_body(&b, "limit=i", (int64_t)10);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "claimed"), 1);
	assert_int_equal(ftc_map_int(&m.value, "fired"), 0);
	assert_int_equal(fsnp_map_get(&m.value, "errors", &errs), 0);
	assert_int_equal(errs.tag, FSNP_ARRAY);
	assert_int_equal(errs.as.count, 1);
	{
		struct fsnp_iter it;
		fsnp_iter_init(&it, &errs);
		assert_true(fsnp_iter_next(&it, NULL, &e));
		fsnp_iter_init(&it, &e);
		assert_true(fsnp_iter_next(&it, NULL, &x));
		assert_true(ftc_str_eq(&x, "own"));
		assert_true(fsnp_iter_next(&it, NULL, &x));
		assert_true(ftc_str_eq(&x, "ERR scheduled target id already "
		                           "exists with different owner"));
	}
	ftc_msg_free(&m);
	m = by_id(c, FSNP_OP_FLOW_SCHEDULE_GET, "own");
	assert_true(ftc_map_str(&m.value, "state", "active"));
	assert_int_equal(ftc_map_int(&m.value, "fire_count"), 0);
	assert_true(ftc_map_int(&m.value, "next_run_at_ms") > now_ms() + 20000);
	ftc_msg_free(&m);
	ftc_body(&b, "limit=i", (int64_t)10);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(ftc_map_int(&m.value, "claimed"), 0);
	ftc_msg_free(&m);
	m = by_id(c, FSNP_OP_FLOW_SCHEDULE_FIRE, "own");
	ftc_error_text(&m, msg, sizeof msg);
	assert_string_equal(
	    msg, "ERR scheduled target id already exists with different owner");
	ftc_msg_free(&m);
	m = by_id(c, FSNP_OP_FLOW_GET, "taken");
	assert_true(ftc_map_str(&m.value, "type", "manual"));
	ftc_msg_free(&m);
	/* A target of its own: created, with the proof. */
	sched_body(&b, "owned-t", "id", "mine", "id=s", "own2");
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_body(&b, "limit=i", (int64_t)10);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	if (m.status != 0) {
		ftc_error_text(&m, msg, sizeof msg);
		print_message("FIRE_DUE failed: %s\n", msg);
	}
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "fired"), 1);
	ftc_msg_free(&m);
	m = by_id(c, FSNP_OP_FLOW_GET, "mine");
	assert_int_equal(m.status, 0);
	assert_true(ftc_map_str(&m.value, "type", "owned-t"));
	assert_int_equal(fsnp_map_get(&m.value, "attributes", &attrs), 0);
	assert_int_equal(attrs.tag, FSNP_MAP);
	assert_int_equal(
	    fsnp_map_get(&attrs, "ferricstore.schedule.owner.v1", &x), 0);
	assert_int_equal(x.tag, FSNP_BIN);
	assert_int_equal(x.as.bin.len, 43);
	ftc_msg_free(&m);
	/* Its events, as FerricStore signals them on the schedule's flow,
	 * in the history of flow_id in the schedule's partition. */
	{
		char pk[48];
		struct fsnp_iter it;
		snprintf(pk, sizeof pk, "%s%u", FLOW_AUTO_PREFIX,
		         flow_route_bucket((const uint8_t *)"own2", 4));
		ftc_body(&b, "id=s partition_key=s",
		         "__ferricstore_schedule__:own2", pk);
		m = callb(c, FSNP_OP_FLOW_HISTORY, &b);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.tag, FSNP_ARRAY);
		assert_int_equal(m.value.as.count, 2);
		fsnp_iter_init(&it, &m.value);
		assert_true(fsnp_iter_next(&it, NULL, &e));
		assert_true(hist_is(&e, "event", "signaled"));
		assert_true(hist_is(&e, "signal", "schedule_created"));
		assert_true(hist_is(&e, "type", "__ferricstore_schedule"));
		assert_true(fsnp_iter_next(&it, NULL, &e));
		assert_true(hist_is(&e, "signal", "schedule_fired"));
		assert_true(hist_is(&e, "state", "completed"));
		ftc_msg_free(&m);
	}
}

/* FIRE_DUE past one wave (16) of due schedules, and block_ms: a call
 * that finds nothing waits for a schedule coming due, or answers empty
 * at the end of block_ms. */
static void fire_due_waves_and_block(struct ftc *c)
{
	struct ftc_msg m;
	struct wbuf b;
	uint64_t t0;
	int64_t at = now_ms();

	for (int i = 0; i < 20; i++) {
		char id[32];
		snprintf(id, sizeof id, "wave-%d", i);
		sched_body(&b, "wave-t", NULL, NULL, "id=s at_ms=i", id, at);
		m = callb(c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	ftc_body(&b, "limit=i", (int64_t)100);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "claimed"), 20);
	assert_int_equal(ftc_map_int(&m.value, "fired"), 20);
	ftc_msg_free(&m);
	/* Nothing due: an empty answer after block_ms. */
	t0 = harness_mono_ms();
	ftc_body(&b, "limit=i block_ms=i", (int64_t)10, (int64_t)400);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "claimed"), 0);
	assert_true(harness_mono_ms() - t0 >= 350);
	ftc_msg_free(&m);
	/* A schedule due in 600 ms: the blocked call fires it. */
	sched_body(&b, "wave-t", NULL, NULL, "id=s at_ms=i", "wave-late",
	           now_ms() + 600);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	t0 = harness_mono_ms();
	ftc_body(&b, "limit=i block_ms=i", (int64_t)10, (int64_t)10000);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "fired"), 1);
	assert_true(harness_mono_ms() - t0 < 8000);
	ftc_msg_free(&m);
}

/* LIST of active schedules (through the due index) in next-run order,
 * cut at count, bounded by from_ms/to_ms; rev from the other end. */
static void list_active(struct ftc *c)
{
	struct ftc_msg m;
	struct wbuf b;
	struct fsnp_iter it;
	struct fsnp_val e;
	int64_t t = now_ms() + 3600000;
	const char *order[] = {"ls-0", "ls-1", "ls-2", "ls-3", "ls-4"};
	size_t k;

	/* Created out of order: ls-i starts at t + i s. */
	for (int i = 4; i >= 0; i--) {
		sched_body(&b, "list-t", NULL, NULL,
		           "id=s every_ms=i start_at_ms=i", order[i],
		           (int64_t)60000, t + i * 1000);
		m = callb(c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	ftc_body(&b, "target_type=s count=i", "list-t", (int64_t)3);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_LIST, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 3);
	fsnp_iter_init(&it, &m.value);
	for (k = 0; fsnp_iter_next(&it, NULL, &e); k++) {
		assert_true(ftc_map_str(&e, "id", order[k]));
	}
	ftc_msg_free(&m);
	ftc_body(&b, "target_type=s from_ms=i to_ms=i", "list-t", t + 1000,
	         t + 3000);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_LIST, &b);
	assert_int_equal(m.value.as.count, 3);
	fsnp_iter_init(&it, &m.value);
	for (k = 1; fsnp_iter_next(&it, NULL, &e); k++) {
		assert_true(ftc_map_str(&e, "id", order[k]));
	}
	ftc_msg_free(&m);
	ftc_body(&b, "target_type=s count=i rev=b", "list-t", (int64_t)2, true);
	m = callb(c, FSNP_OP_FLOW_SCHEDULE_LIST, &b);
	assert_int_equal(m.value.as.count, 2);
	fsnp_iter_init(&it, &m.value);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_true(ftc_map_str(&e, "id", "ls-4"));
	assert_true(fsnp_iter_next(&it, NULL, &e));
	assert_true(ftc_map_str(&e, "id", "ls-3"));
	ftc_msg_free(&m);
	/* The schedule's flow_id, as FerricStore answers public callers:
	 * GET refuses the reserved id, HISTORY without the schedule's
	 * partition finds nothing. */
	m = by_id(c, FSNP_OP_FLOW_GET, "__ferricstore_schedule__:ls-0");
	{
		char msg[256];
		ftc_error_text(&m, msg, sizeof msg);
		assert_string_equal(msg,
		                    "ERR flow id is reserved for internal use");
	}
	ftc_msg_free(&m);
	m = by_id(c, FSNP_OP_FLOW_HISTORY, "__ferricstore_schedule__:ls-0");
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	assert_int_equal(m.value.as.count, 0);
	ftc_msg_free(&m);
}

static void test_scheduler_off(void **state)
{
	static const char *const extra[] = {"--shards", "2", "--flow-scheduler",
	                                    "off", NULL};
	struct harness_cluster one;
	struct ftc c;
	struct ftc_msg m;
	struct wbuf b;
	(void)state;
	assert_int_equal(harness_cluster_start(&one, 1, extra, true), 0);
	assert_int_equal(ftc_wait_ready(one.nodes[0].fsnp, 30000), 0);
	assert_int_equal(ftc_connect(&c, one.nodes[0].fsnp), 0);
	sched_body(&b, "off-t", NULL, NULL, "id=s every_ms=i", "off",
	           (int64_t)300);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_CREATE, &b);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	harness_nap(1000);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_GET, "off");
	assert_int_equal(ftc_map_int(&m.value, "fire_count"), 0);
	ftc_msg_free(&m);
	ftc_body(&b, "limit=i", (int64_t)10);
	m = callb(&c, FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "claimed"), 1);
	assert_int_equal(ftc_map_int(&m.value, "fired"), 1);
	assert_true(ftc_map_int(&m.value, "coalesced") >= 2);
	{
		struct fsnp_val t;
		assert_int_equal(fsnp_map_get(&m.value, "last_target_id", &t),
		                 0);
		assert_int_equal(t.tag, FSNP_BIN);
	}
	ftc_msg_free(&m);
	m = by_id(&c, FSNP_OP_FLOW_SCHEDULE_GET, "off");
	assert_int_equal(ftc_map_int(&m.value, "fire_count"), 1);
	ftc_msg_free(&m);
	owner_checks(&c);
	fire_due_waves_and_block(&c);
	list_active(&c);
	ftc_close(&c);
	harness_cluster_stop(&one);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_raw_bodies),
	    cmocka_unit_test(test_paused_fires_nothing),
	    cmocka_unit_test(test_one_shot_once),
	    cmocka_unit_test(test_interval_across_leader_kill),
	    cmocka_unit_test(test_queue_woken_by_complete),
	    cmocka_unit_test(test_scheduler_off),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
