/* The operations overview read (flow/flow_overview.h) on a real store:
 * counts by type and state summed over partitions, the failed flows newest
 * first with their error, the stuck ones oldest first (a lease run out, a
 * flow past max_active_ms the sweep has not failed), the list bound and
 * stuck_count beyond it, and the refusals of malformed commands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_overview.h"
#include "store/command.h"
#include "store/result.h"
#include "store/store.h"
#include "tests/unit/flow_test_util.h"
#include "wire/fsnp_opcode.h"

#define G 1

static struct tdb t;

static void create(uint64_t now, const char *id, const char *type,
                   const char *part, int64_t max_active_ms)
{
	struct fbody b;
	struct freply r;
	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", type);
	if (part != NULL) {
		fb_str(&b, "partition_key", part);
	}
	if (max_active_ms > 0) {
		fb_int(&b, "max_active_ms", max_active_ms);
	}
	fb_end(&b);
	fl_run(&t, G, now, FSNP_OP_FLOW_CREATE, &b, 1, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_free(&b);
}

/* Claims the one due flow of `type` (in partition `part`, NULL: the
 * automatic ones): its lease and fencing tokens. */
static void claim(uint64_t now, const char *type, const char *part,
                  int64_t lease_ms, char *lease, int64_t *fencing)
{
	struct fbody b;
	struct freply r;
	struct fsnp_iter it;
	struct fsnp_val rec;
	char buf[256];
	fb_begin(&b);
	fb_str(&b, "type", type);
	if (part != NULL) {
		fb_str(&b, "partition_key", part);
	}
	fb_str(&b, "worker", "w7");
	fb_int(&b, "limit", 1);
	fb_int(&b, "lease_ms", lease_ms);
	fb_end(&b);
	fl_run(&t, G, now, FSNP_OP_FLOW_CLAIM_DUE, &b, 2, &r);
	assert_int_equal(r.status, 0);
	fsnp_iter_init(&it, &r.v);
	assert_true(fsnp_iter_next(&it, NULL, &rec));
	strcpy(lease, fr_str(&rec, "lease_token", buf));
	*fencing = fr_int(&rec, "fencing_token");
	freply_free(&r);
	fb_free(&b);
}

static void fail_flow(uint64_t now, const char *id, const char *part,
                      const char *lease, int64_t fencing, const char *error)
{
	struct fbody b;
	struct freply r;
	fb_begin(&b);
	fb_str(&b, "id", id);
	if (part != NULL) {
		fb_str(&b, "partition_key", part);
	}
	fb_str(&b, "lease_token", lease);
	fb_int(&b, "fencing_token", fencing);
	fb_str(&b, "error", error);
	fb_end(&b);
	fl_run(&t, G, now, FSNP_OP_FLOW_FAIL, &b, 3, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_free(&b);
}

/* Runs the read at `now`: the raw result (store status in buf[1]). */
static struct freply overview_raw(uint64_t now, const uint8_t *cmd, size_t len)
{
	struct fsm_result out = {NULL, 0};
	struct freply r = {0};
	assert_int_equal(store_read(t.s, G, now, cmd, len, &out), 0);
	assert_true(out.len >= 3);
	assert_int_equal(out.data[0], STORE_RESULT_VERSION);
	r.buf = out.data;
	r.len = out.len;
	r.status = out.data[1];
	assert_int_equal(
	    fsnp_value_decode_body(out.data + 2, out.len - 2, NULL, &r.v), 0);
	return r;
}

static struct freply overview(uint64_t now, uint32_t max)
{
	struct sbuf cmd;
	struct freply r;
	sbuf_init(&cmd);
	flow_overview_encode(max, &cmd);
	r = overview_raw(now, cmd.p, cmd.len);
	sbuf_free(&cmd);
	assert_int_equal(r.status, STORE_OK);
	assert_int_equal(r.v.tag, FSNP_MAP);
	return r;
}

/* The count of (type, state) in the reply's queues (0 when absent). */
static int64_t queue(const struct fsnp_val *m, const char *type,
                     const char *state)
{
	struct fsnp_val l = fr_get(m, "queues"), e;
	struct fsnp_iter it;
	char a[256], b[256];
	fsnp_iter_init(&it, &l);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (strcmp(fr_str(&e, "type", a), type) == 0 &&
		    strcmp(fr_str(&e, "state", b), state) == 0) {
			return fr_int(&e, "count");
		}
	}
	return 0;
}

/* The i-th entry of list `k`; asserts it exists. */
static struct fsnp_val nth(const struct fsnp_val *m, const char *k, size_t i)
{
	struct fsnp_val l = fr_get(m, k), e;
	struct fsnp_iter it;
	assert_int_equal(l.tag, FSNP_ARRAY);
	assert_true(i < l.as.count);
	fsnp_iter_init(&it, &l);
	for (size_t n = 0; fsnp_iter_next(&it, NULL, &e); n++) {
		if (n == i) {
			return e;
		}
	}
	fail();
	return e;
}

static size_t count_of(const struct fsnp_val *m, const char *k)
{
	return fr_get(m, k).as.count;
}

static void test_overview(void **state)
{
	char lease[256], buf[256];
	int64_t fencing;
	struct freply r;
	(void)state;

	ftdb_open(&t);
	/* jobs: three over two partitions, one claimed with a 100 ms
	 * lease. slow: one with max_active_ms 500. bad: two failed. */
	create(1000, "j1", "jobs", "p1", 0);
	create(1000, "j2", "jobs", "p2", 0);
	create(1000, "j3", "jobs", NULL, 0);
	claim(1000, "jobs", NULL, 100, lease, &fencing);
	create(1000, "s1", "slow", NULL, 500);
	create(1000, "b1", "bad", "p1", 0);
	claim(1001, "bad", "p1", 30000, lease, &fencing);
	fail_flow(1002, "b1", "p1", lease, fencing, "first");
	create(1003, "b2", "bad", NULL, 0);
	claim(1004, "bad", NULL, 30000, lease, &fencing);
	fail_flow(1005, "b2", NULL, lease, fencing, "second");

	/* Before any deadline: nothing stuck; counts summed over the
	 * partitions; failed newest first. */
	r = overview(1050, 10);
	assert_int_equal(queue(&r.v, "jobs", "queued"), 2);
	assert_int_equal(queue(&r.v, "jobs", "running"), 1);
	assert_int_equal(queue(&r.v, "slow", "queued"), 1);
	assert_int_equal(queue(&r.v, "bad", "failed"), 2);
	assert_int_equal(queue(&r.v, "bad", "queued"), 0);
	assert_int_equal(count_of(&r.v, "stuck"), 0);
	assert_int_equal(fr_int(&r.v, "stuck_count"), 0);
	assert_int_equal(fr_int(&r.v, "now_ms"), 1050);
	assert_int_equal(count_of(&r.v, "failed"), 2);
	struct fsnp_val e = nth(&r.v, "failed", 0);
	assert_string_equal(fr_str(&e, "id", buf), "b2");
	assert_string_equal(fr_str(&e, "error", buf), "second");
	assert_string_equal(fr_str(&e, "type", buf), "bad");
	assert_int_equal(fr_int(&e, "updated_at_ms"), 1005);
	e = nth(&r.v, "failed", 1);
	assert_string_equal(fr_str(&e, "id", buf), "b1");
	assert_string_equal(fr_str(&e, "partition_key", buf), "p1");
	freply_free(&r);

	/* The lease ran out at 1100: stuck until reclaimed. */
	r = overview(1200, 10);
	assert_int_equal(fr_int(&r.v, "stuck_count"), 1);
	e = nth(&r.v, "stuck", 0);
	assert_string_equal(fr_str(&e, "reason", buf), "lease_expired");
	assert_string_equal(fr_str(&e, "state", buf), "running");
	assert_string_equal(fr_str(&e, "type", buf), "jobs");
	assert_string_equal(fr_str(&e, "lease_owner", buf), "w7");
	assert_int_equal(fr_int(&e, "since_ms"), 1100);
	freply_free(&r);

	/* s1 passed its max_active_ms at 1500 (no sweep here), and so did
	 * nothing else: the claimed job has none. Oldest first. */
	r = overview(2000, 10);
	assert_int_equal(fr_int(&r.v, "stuck_count"), 2);
	e = nth(&r.v, "stuck", 0);
	assert_string_equal(fr_str(&e, "reason", buf), "lease_expired");
	e = nth(&r.v, "stuck", 1);
	assert_string_equal(fr_str(&e, "id", buf), "s1");
	assert_string_equal(fr_str(&e, "reason", buf), "max_active_ms");
	assert_string_equal(fr_str(&e, "state", buf), "queued");
	assert_int_equal(fr_int(&e, "since_ms"), 1500);
	assert_false(fr_get(&r.v, "truncated").tag == FSNP_TRUE);
	freply_free(&r);

	/* The lists are cut to max; stuck_count still counts all. */
	r = overview(2000, 1);
	assert_int_equal(count_of(&r.v, "stuck"), 1);
	assert_int_equal(count_of(&r.v, "failed"), 1);
	assert_int_equal(fr_int(&r.v, "stuck_count"), 2);
	e = nth(&r.v, "failed", 0);
	assert_string_equal(fr_str(&e, "id", buf), "b2");
	freply_free(&r);

	/* Malformed commands are refused with a message. */
	{
		uint8_t bad[] = {STORE_CMD_VERSION,
		                 FLOW_STORE_OP_OVERVIEW,
		                 FLOW_CMD_VERSION,
		                 0,
		                 0,
		                 0,
		                 0};
		r = overview_raw(2000, bad, sizeof bad);
		assert_int_equal(r.status, STORE_BAD_COMMAND);
		freply_free(&r);
		bad[6] = 101;
		r = overview_raw(2000, bad, sizeof bad);
		assert_int_equal(r.status, STORE_BAD_COMMAND);
		freply_free(&r);
		r = overview_raw(2000, bad, sizeof bad - 1);
		assert_int_equal(r.status, STORE_BAD_COMMAND);
		freply_free(&r);
		bad[6] = 5;
		bad[2] = FLOW_CMD_VERSION + 1;
		r = overview_raw(2000, bad, sizeof bad);
		assert_int_equal(r.status, STORE_BAD_COMMAND);
		freply_free(&r);
	}
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_overview),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
