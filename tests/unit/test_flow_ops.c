/* flow/ state machine: every implemented opcode and its error paths on a
 * temporary RocksDB, through store_apply and store_read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_sweep.h"
#include "flow/flow_wait.h"
#include "tests/unit/flow_test_util.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

#define G 1

static uint64_t seed = 1;

static void run(struct tdb *t, uint64_t now, uint16_t op, struct fbody *b,
                struct freply *r)
{
	fb_end(b);
	fl_run(t, G, now, op, b, seed++, r);
	fb_free(b);
}

static void create(struct tdb *t, uint64_t now, const char *id,
                   const char *type, int prio)
{
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", type);
	if (prio > 0) {
		fb_int(&b, "priority", prio);
	}
	run(t, now, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
}

/* Claims up to `limit` flows of `type`; replies kept in r. */
static void claim(struct tdb *t, uint64_t now, const char *type,
                  const char *worker, int64_t limit, int64_t lease_ms,
                  struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "type", type);
	fb_str(&b, "worker", worker);
	fb_int(&b, "limit", limit);
	fb_int(&b, "lease_ms", lease_ms);
	run(t, now, FSNP_OP_FLOW_CLAIM_DUE, &b, r);
	assert_int_equal(r->status, 0);
	assert_int_equal(r->v.tag, FSNP_ARRAY);
}

static struct fsnp_val nth(const struct fsnp_val *list, uint32_t i)
{
	struct fsnp_iter it;
	struct fsnp_val v;

	fsnp_iter_init(&it, list);
	for (uint32_t j = 0; j <= i; j++) {
		assert_true(fsnp_iter_next(&it, NULL, &v));
	}
	return v;
}

static void get(struct tdb *t, uint64_t now, const char *id, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_bool(&b, "payload", true);
	run(t, now, FSNP_OP_FLOW_GET, &b, r);
	assert_int_equal(r->status, 0);
}

static void finish(struct tdb *t, uint64_t now, uint16_t op, const char *id,
                   const char *lease, int64_t fencing, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	if (lease != NULL) {
		fb_str(&b, "lease_token", lease);
	}
	fb_int(&b, "fencing_token", fencing);
	run(t, now, op, &b, r);
}

static void test_create_get(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "id", "order-1");
	fb_str(&b, "type", "email");
	fb_str(&b, "payload", "hello");
	fb_key(&b, "attributes");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "tenant");
	fsnp_w_str(&b.w, "acme");
	fsnp_w_map_end(&b.w);
	fb_key(&b, "state_meta");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "step");
	fsnp_w_i64(&b.w, 1);
	fsnp_w_map_end(&b.w);
	fb_int(&b, "now_ms", 1000);
	run(&t, 1000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);

	get(&t, 1001, "order-1", &r);
	assert_string_equal(fr_str(&r.v, "id", buf), "order-1");
	assert_string_equal(fr_str(&r.v, "state", buf), "queued");
	assert_string_equal(fr_str(&r.v, "partition_key", buf),
	                    "__flow_auto__:239");
	assert_string_equal(fr_str(&r.v, "root_flow_id", buf), "order-1");
	assert_int_equal(fr_int(&r.v, "version"), 1);
	assert_int_equal(fr_int(&r.v, "attempts"), 0);
	assert_int_equal(fr_int(&r.v, "fencing_token"), 0);
	assert_int_equal(fr_int(&r.v, "created_at_ms"), 1000);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1000);
	assert_int_equal(fr_int(&r.v, "retention_ttl_ms"), 604800000);
	assert_int_equal(fr_int(&r.v, "history_max_events"), 100000);
	assert_true(fr_is_nil(&r.v, "lease_token"));
	assert_string_equal(fr_str(&r.v, "payload", buf), "hello");
	{
		struct fsnp_val a = fr_get(&r.v, "attributes");
		assert_string_equal(fr_str(&a, "tenant", buf), "acme");
		struct fsnp_val sm = fr_get(&r.v, "state_meta");
		struct fsnp_val q = fr_get(&sm, "queued");
		assert_int_equal(fr_int(&q, "step"), 1);
	}
	freply_free(&r);

	/* Without payload: no payload field. */
	fb_begin(&b);
	fb_str(&b, "id", "order-1");
	run(&t, 1001, FSNP_OP_FLOW_GET, &b, &r);
	{
		struct fsnp_val v;
		assert_int_not_equal(fsnp_map_get(&r.v, "payload", &v), 0);
	}
	freply_free(&r);

	/* Unknown flow: nil. */
	fb_begin(&b);
	fb_str(&b, "id", "nope");
	run(&t, 1001, FSNP_OP_FLOW_GET, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);

	/* Duplicates and idempotent creates. */
	fb_begin(&b);
	fb_str(&b, "id", "order-1");
	fb_str(&b, "type", "email");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow already exists");
	freply_free(&r);
	create(&t, 1000, "idem", "email", 0);
	fb_begin(&b);
	fb_str(&b, "id", "idem");
	fb_str(&b, "type", "email");
	fb_bool(&b, "idempotent", true);
	fb_int(&b, "now_ms", 5000);
	run(&t, 5000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "idem");
	fb_str(&b, "type", "sms");
	fb_bool(&b, "idempotent", true);
	run(&t, 5000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow idempotency conflict");
	freply_free(&r);

	/* Body and validation errors. */
	fb_begin(&b);
	fb_str(&b, "type", "email");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 6, "ERR native field id must be binary");
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "id", 5);
	fb_str(&b, "type", "email");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 6, "ERR native field id must be binary");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_str(&b, "bogus", "1");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 6, "ERR native unknown flow option bogus");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "");
	fb_str(&b, "type", "email");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow id must be a non-empty string");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "__ferricstore_schedule__:x");
	fb_str(&b, "type", "email");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow id is reserved for internal use");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "__ferricstore_schedule");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow type is reserved for internal use");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_int(&b, "priority", 3);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow priority must be between 0 and 2");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_int(&b, "ttl_ms", 3);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow ttl_ms was renamed to retention_ttl_ms");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_int(&b, "max_active_ms", 0);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1,
	       "ERR flow max_active_ms must be between 1 and 31536000000 or "
	       "infinity");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_int(&b, "history_hot_max_events", 10);
	fb_int(&b, "history_max_events", 5);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1,
	       "ERR flow history_max_events must be greater than or equal "
	       "to history_hot_max_events");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "email");
	fb_int(&b, "now_ms", -1);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow now_ms must be a non-negative integer");
	freply_free(&r);
	/* opts is merged in; the top level wins. */
	fb_begin(&b);
	fb_str(&b, "id", "opt-1");
	fb_str(&b, "type", "email");
	fb_str(&b, "state", "top");
	fb_key(&b, "opts");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "state");
	fsnp_w_str(&b.w, "inner");
	fsnp_w_key(&b.w, "priority");
	fsnp_w_i64(&b.w, 2);
	fsnp_w_map_end(&b.w);
	fb_int(&b, "deadline_ms", 0);
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1002, "opt-1", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "top");
	assert_int_equal(fr_int(&r.v, "priority"), 2);
	freply_free(&r);
	/* An explicit partition. */
	fb_begin(&b);
	fb_str(&b, "id", "p-1");
	fb_str(&b, "type", "email");
	fb_str(&b, "partition_key", "tenant-a");
	run(&t, 1002, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p-1");
	run(&t, 1002, FSNP_OP_FLOW_GET, &b, &r);
	assert_int_equal(r.v.tag, FSNP_NIL); /* the auto bucket */
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p-1");
	fb_str(&b, "partition_key", "tenant-a");
	run(&t, 1002, FSNP_OP_FLOW_GET, &b, &r);
	assert_string_equal(fr_str(&r.v, "partition_key", buf), "tenant-a");
	freply_free(&r);
	tdb_close(&t);
}

static void test_claim_complete(void **state)
{
	struct tdb t;
	struct freply r, c;
	char buf[256], lease[256];
	struct fsnp_val j;

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "a", "email", 0);
	create(&t, 1001, "b", "email", 2);
	create(&t, 1002, "c", "email", 1);
	create(&t, 1003, "d", "sms", 2);
	create(&t, 1004, "e", "email", 0);
	claim(&t, 2000, "email", "w1", 3, 30000, &c);
	assert_int_equal(c.v.as.count, 3);
	j = nth(&c.v, 0);
	assert_string_equal(fr_str(&j, "id", buf), "b");
	assert_string_equal(fr_str(&j, "state", buf), "running");
	assert_string_equal(fr_str(&j, "run_state", buf), "queued");
	assert_string_equal(fr_str(&j, "lease_token", buf), "w1:2000:1");
	assert_string_equal(fr_str(&j, "lease_owner", buf), "w1");
	assert_int_equal(fr_int(&j, "fencing_token"), 1);
	assert_int_equal(fr_int(&j, "version"), 2);
	assert_int_equal(fr_int(&j, "lease_deadline_ms"), 32000);
	assert_int_equal(fr_int(&j, "next_run_at_ms"), 32000);
	j = nth(&c.v, 1);
	assert_string_equal(fr_str(&j, "id", buf), "c");
	j = nth(&c.v, 2);
	assert_string_equal(fr_str(&j, "id", buf), "a");
	freply_free(&c);
	/* Nothing else due before e's time... e is due: one more. */
	claim(&t, 2000, "email", "w1", 10, 30000, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	claim(&t, 2000, "email", "w1", 10, 30000, &c);
	assert_int_equal(c.v.as.count, 0);
	freply_free(&c);

	finish(&t, 2100, FSNP_OP_FLOW_COMPLETE, "b", "w1:2000:9", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 2100, FSNP_OP_FLOW_COMPLETE, "b", "w1:2000:1", 2, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 2100, FSNP_OP_FLOW_COMPLETE, "nope", "w1:2000:1", 1, &r);
	fr_err(&r, 1, "ERR flow not found");
	freply_free(&r);
	finish(&t, 2100, FSNP_OP_FLOW_COMPLETE, "b", NULL, 1, &r);
	fr_err(&r, 6, "ERR native field lease_token must be binary");
	freply_free(&r);
	finish(&t, 2100, FSNP_OP_FLOW_COMPLETE, "b", "w1:2000:1", 1, &r);
	fr_ok(&r);
	freply_free(&r);
	/* A replay of the same completion is a no-op. */
	finish(&t, 2200, FSNP_OP_FLOW_COMPLETE, "b", "w1:2000:1", 1, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 2300, "b", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "completed");
	assert_int_equal(fr_int(&r.v, "version"), 3);
	assert_true(fr_is_nil(&r.v, "lease_token"));
	assert_true(fr_is_nil(&r.v, "next_run_at_ms"));
	assert_int_equal(fr_int(&r.v, "terminal_retention_until_ms"),
	                 2100 + 604800000);
	freply_free(&r);
	/* FAIL of a completed flow is stale. */
	finish(&t, 2300, FSNP_OP_FLOW_FAIL, "b", "w1:2000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	/* FAIL with an error value. */
	strcpy(lease, "w1:2000:1");
	{
		struct fbody b;
		fb_begin(&b);
		fb_str(&b, "id", "c");
		fb_str(&b, "lease_token", lease);
		fb_int(&b, "fencing_token", 1);
		fb_str(&b, "error", "boom");
		run(&t, 2400, FSNP_OP_FLOW_FAIL, &b, &r);
		fr_ok(&r);
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "id", "a");
		fb_str(&b, "lease_token", lease);
		fb_int(&b, "fencing_token", 1);
		fb_str(&b, "result_ref", "x");
		run(&t, 2400, FSNP_OP_FLOW_COMPLETE, &b, &r);
		fr_err(&r, 1,
		       "ERR flow result_ref input is not supported; use "
		       "result");
		freply_free(&r);
	}
	get(&t, 2500, "c", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "failed");
	assert_string_equal(fr_str(&r.v, "error", buf), "boom");
	freply_free(&r);

	/* Claim errors. */
	{
		struct fbody b;
		fb_begin(&b);
		fb_str(&b, "type", "email");
		fb_str(&b, "worker", "w");
		fb_int(&b, "limit", 1001);
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(&r, 1, "ERR flow limit exceeds maximum 1000");
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "type", "email");
		fb_str(&b, "worker", "w");
		fb_str(&b, "state", "queued");
		fb_strs(&b, "states", (const char *const[]){"queued"}, 1);
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(&r, 1,
		       "ERR flow state and states are mutually exclusive");
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "type", "email");
		fb_str(&b, "worker", "w");
		fb_strs(&b, "states", (const char *const[]){"any", "queued"},
		        2);
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(
		    &r, 1,
		    "ERR flow STATE ANY cannot be mixed with explicit states");
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "type", "email");
		fb_str(&b, "worker", "w");
		fb_str(&b, "partition_key", "p");
		fb_strs(&b, "partition_keys", (const char *const[]){"p"}, 1);
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(&r, 1,
		       "ERR flow partition_key and partition_keys are "
		       "mutually exclusive");
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "type", "email");
		fb_str(&b, "worker", "w");
		fb_int(&b, "reclaim_ratio", 101);
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(&r, 1,
		       "ERR flow reclaim_ratio must be an integer between 0 "
		       "and 100");
		freply_free(&r);
		fb_begin(&b);
		fb_str(&b, "worker", "w");
		run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
		fr_err(&r, 6, "ERR native field type must be binary");
		freply_free(&r);
	}
	tdb_close(&t);
}

static void test_fencing(void **state)
{
	struct tdb t;
	struct freply r, c;
	char buf[256];
	struct fsnp_val j;
	struct fbody b;

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "f", "job", 0);
	claim(&t, 1000, "job", "w1", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	/* Not expired: nobody else gets it. */
	claim(&t, 1500, "job", "w2", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 0);
	freply_free(&c);
	/* Expired, not reclaimed yet: w1 may still extend. */
	fb_begin(&b);
	fb_str(&b, "id", "f");
	fb_str(&b, "lease_token", "w1:1000:1");
	fb_int(&b, "fencing_token", 1);
	fb_int(&b, "lease_ms", 500);
	run(&t, 2500, FSNP_OP_FLOW_EXTEND_LEASE, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "lease_deadline_ms"), 3000);
	freply_free(&r);
	/* Reclaimed by w2 after the new deadline. */
	claim(&t, 3001, "job", "w2", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 1);
	j = nth(&c.v, 0);
	assert_int_equal(fr_int(&j, "fencing_token"), 2);
	assert_string_equal(fr_str(&j, "lease_token", buf), "w2:3001:2");
	assert_string_equal(fr_str(&j, "run_state", buf), "queued");
	freply_free(&c);
	/* w1 can do nothing any more. */
	finish(&t, 3002, FSNP_OP_FLOW_COMPLETE, "f", "w1:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 3002, FSNP_OP_FLOW_FAIL, "f", "w1:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 3002, FSNP_OP_FLOW_RETRY, "f", "w1:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 3002, FSNP_OP_FLOW_EXTEND_LEASE, "f", "w1:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 3002, FSNP_OP_FLOW_CANCEL, "f", "w1:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "f");
	fb_str(&b, "from_state", "running");
	fb_str(&b, "to_state", "queued");
	fb_str(&b, "lease_token", "w1:1000:1");
	fb_int(&b, "fencing_token", 1);
	run(&t, 3002, FSNP_OP_FLOW_TRANSITION, &b, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	/* The old token with the new fencing is stale too. */
	finish(&t, 3002, FSNP_OP_FLOW_COMPLETE, "f", "w1:1000:1", 2, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	/* The expired lease of w2, not reclaimed, still completes. */
	finish(&t, 9000, FSNP_OP_FLOW_COMPLETE, "f", "w2:3001:2", 2, &r);
	fr_ok(&r);
	freply_free(&r);
	/* RECLAIM takes only expired running flows. */
	create(&t, 10000, "g", "job", 0);
	claim(&t, 10000, "job", "w1", 1, 100, &c);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w3");
	fb_int(&b, "limit", 5);
	run(&t, 10050, FSNP_OP_FLOW_RECLAIM, &b, &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	create(&t, 10000, "h", "job", 0);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w3");
	fb_int(&b, "limit", 5);
	fb_str(&b, "return", "jobs_compact");
	run(&t, 10200, FSNP_OP_FLOW_RECLAIM, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	j = nth(&r.v, 0);
	{
		struct fsnp_val id = nth(&j, 0), tok = nth(&j, 2);
		assert_true(fsnp_bytes_eq(id.as.bin, "g"));
		assert_true(fsnp_bytes_eq(tok.as.bin, "w3:10200:2"));
	}
	freply_free(&r);
	tdb_close(&t);
}

static void test_transition_cancel(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "t", "job", 0);
#define TRANS(from, to, lease, fencing, now)                                   \
	do {                                                                   \
		fb_begin(&b);                                                  \
		fb_str(&b, "id", "t");                                         \
		fb_str(&b, "from_state", from);                                \
		fb_str(&b, "to_state", to);                                    \
		if (lease != NULL) {                                           \
			fb_str(&b, "lease_token", lease);                      \
		}                                                              \
		fb_int(&b, "fencing_token", fencing);                          \
		fb_int(&b, "run_at_ms", 5000);                                 \
		run(&t, now, FSNP_OP_FLOW_TRANSITION, &b, &r);                 \
	} while (0)
	TRANS("queued", "running", (const char *)NULL, 0, 1100);
	fr_err(&r, 1,
	       "ERR flow running state is only entered by FLOW.CLAIM_DUE");
	freply_free(&r);
	TRANS("queued", "completed", (const char *)NULL, 0, 1100);
	fr_err(&r, 1,
	       "ERR terminal flow state requires FLOW.COMPLETE, FLOW.FAIL, "
	       "or FLOW.CANCEL");
	freply_free(&r);
	TRANS("waiting", "ready", (const char *)NULL, 0, 1100);
	fr_err(&r, 1, "ERR flow wrong state");
	freply_free(&r);
	TRANS("queued", "ready", (const char *)NULL, 1, 1100);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	TRANS("queued", "ready", "x", 0, 1100);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	TRANS("queued", "ready", (const char *)NULL, 0, 1100);
	fr_ok(&r);
	freply_free(&r);
	/* Already there, unleased, same fencing: a no-op. */
	TRANS("queued", "ready", (const char *)NULL, 0, 1200);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1300, "t", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "ready");
	assert_int_equal(fr_int(&r.v, "version"), 2);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 5000);
	freply_free(&r);
	/* Not due before run_at_ms. */
	claim(&t, 4999, "job", "w", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 0);
	freply_free(&c);
	claim(&t, 5000, "job", "w", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	/* A leased flow moves with its lease. */
	TRANS("running", "queued", (const char *)NULL, 1, 5001);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	TRANS("running", "queued", "w:5000:1", 1, 5001);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 5002, "t", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "queued");
	assert_string_equal(fr_str(&r.v, "run_state", buf), "ready");
	assert_int_equal(fr_int(&r.v, "fencing_token"), 1);
	freply_free(&r);
	/* Cancel: fencing, then terminal. */
	finish(&t, 5003, FSNP_OP_FLOW_CANCEL, "t", NULL, 0, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 5003, FSNP_OP_FLOW_CANCEL, "t", "w:5000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "t");
	fb_int(&b, "fencing_token", 1);
	fb_str(&b, "reason", "user");
	run(&t, 5003, FSNP_OP_FLOW_CANCEL, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	finish(&t, 5004, FSNP_OP_FLOW_CANCEL, "t", NULL, 1, &r);
	fr_err(&r, 1, "ERR flow is terminal; use FLOW.REWIND");
	freply_free(&r);
	TRANS("cancelled", "queued", (const char *)NULL, 1, 5005);
	fr_err(&r, 1, "ERR flow is terminal; use FLOW.REWIND");
	freply_free(&r);
	get(&t, 5006, "t", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "cancelled");
	assert_string_equal(fr_str(&r.v, "error", buf), "user");
	freply_free(&r);
#undef TRANS
	tdb_close(&t);
}

static void retry(struct tdb *t, uint64_t now, const char *id,
                  const char *lease, int64_t fencing, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "lease_token", lease);
	fb_int(&b, "fencing_token", fencing);
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "max_retries");
	fsnp_w_i64(&b.w, 1);
	fsnp_w_key(&b.w, "backoff");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "kind");
	fsnp_w_str(&b.w, "fixed");
	fsnp_w_key(&b.w, "base_ms");
	fsnp_w_i64(&b.w, 500);
	fsnp_w_key(&b.w, "jitter_pct");
	fsnp_w_i64(&b.w, 0);
	fsnp_w_map_end(&b.w);
	fsnp_w_map_end(&b.w);
	run(t, now, FSNP_OP_FLOW_RETRY, &b, r);
}

static void test_retry(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "r", "job", 0);
	claim(&t, 1000, "job", "w", 1, 1000, &c);
	freply_free(&c);
	retry(&t, 1100, "r", "w:1000:1", 1, &r);
	fr_ok(&r);
	freply_free(&r);
	retry(&t, 1150, "r", "w:1000:1", 1, &r); /* replay */
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1200, "r", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "queued");
	assert_int_equal(fr_int(&r.v, "attempts"), 1);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1600);
	assert_true(fr_is_nil(&r.v, "run_state"));
	assert_true(fr_is_nil(&r.v, "lease_token"));
	freply_free(&r);
	claim(&t, 1599, "job", "w", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 0);
	freply_free(&c);
	claim(&t, 1600, "job", "w", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	retry(&t, 1700, "r", "w:1600:2", 2, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1800, "r", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "failed");
	assert_int_equal(fr_int(&r.v, "attempts"), 2);
	assert_true(fr_is_nil(&r.v, "next_run_at_ms"));
	freply_free(&r);
	/* Bad policies. */
	create(&t, 2000, "r2", "job", 0);
	claim(&t, 2000, "job", "w", 1, 1000, &c);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "r2");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "max_retries");
	fsnp_w_i64(&b.w, 1001);
	fsnp_w_map_end(&b.w);
	run(&t, 2100, FSNP_OP_FLOW_RETRY, &b, &r);
	fr_err(&r, 1, "ERR flow retry max_retries must be between 0 and 1000");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "r2");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "backoff");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "kind");
	fsnp_w_str(&b.w, "cubic");
	fsnp_w_map_end(&b.w);
	fsnp_w_map_end(&b.w);
	run(&t, 2100, FSNP_OP_FLOW_RETRY, &b, &r);
	fr_err(&r, 1,
	       "ERR flow retry backoff kind must be none, fixed, linear, or "
	       "exponential");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "r2");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "max_attempts");
	fsnp_w_i64(&b.w, 3);
	fsnp_w_map_end(&b.w);
	run(&t, 2100, FSNP_OP_FLOW_RETRY, &b, &r);
	fr_err(&r, 1, "ERR flow retry max_attempts was renamed to max_retries");
	freply_free(&r);
	/* Default policy: exponential from 1000 with 20 % jitter, so the
	 * first retry is 800..1200 ms away; exhausted_to from the type's
	 * policy. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_key(&b, "retry");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "max_retries");
	fsnp_w_i64(&b.w, 0);
	fsnp_w_key(&b.w, "exhausted_to");
	fsnp_w_str(&b.w, "dead");
	fsnp_w_map_end(&b.w);
	run(&t, 2100, FSNP_OP_FLOW_POLICY_SET, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "generation"), 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "r2");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	run(&t, 2200, FSNP_OP_FLOW_RETRY, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 2300, "r2", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "dead");
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 2200);
	freply_free(&r);
	create(&t, 3000, "r3", "other", 0);
	claim(&t, 3000, "other", "w", 1, 1000, &c);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "r3");
	fb_str(&b, "lease_token", "w:3000:1");
	fb_int(&b, "fencing_token", 1);
	run(&t, 3000, FSNP_OP_FLOW_RETRY, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 3000, "r3", &r);
	{
		int64_t next = fr_int(&r.v, "next_run_at_ms");
		assert_true(next >= 3800 && next <= 4200);
	}
	freply_free(&r);
	tdb_close(&t);
}

static void test_history(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;
	struct fsnp_val e, ev;

	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_str(&b, "type", "job");
	fb_int(&b, "history_max_events", 3);
	run(&t, 1000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	claim(&t, 1000, "job", "w", 1, 1000, &c);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_str(&b, "signal", "poke");
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	run(&t, 1100, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.as.count, 3);
	freply_free(&r);
	finish(&t, 1200, FSNP_OP_FLOW_COMPLETE, "h", "w:1000:1", 1, &r);
	fr_ok(&r);
	freply_free(&r);
	/* Four events happened; three are kept, oldest first. */
	fb_begin(&b);
	fb_str(&b, "id", "h");
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 3);
	e = nth(&r.v, 0);
	ev = nth(&e, 0);
	assert_true(fsnp_bytes_eq(ev.as.bin, "1000-2"));
	ev = nth(&e, 1);
	assert_true(fsnp_bytes_eq(nth(&ev, 1).as.bin, "claimed"));
	e = nth(&r.v, 2);
	assert_true(fsnp_bytes_eq(nth(&e, 0).as.bin, "1200-4"));
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_bool(&b, "rev", true);
	fb_int(&b, "count", 1);
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	e = nth(&r.v, 0);
	assert_true(fsnp_bytes_eq(nth(&e, 0).as.bin, "1200-4"));
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_str(&b, "event", "signaled");
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_int(&b, "from_version", 3);
	fb_int(&b, "to_version", 3);
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_int(&b, "count", 10001);
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	fr_err(&r, 1, "ERR flow count exceeds maximum 10000");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "h");
	fb_str(&b, "from_event", "12x");
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	fr_err(&r, 1, "ERR flow from_event must be a history event id");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "nope");
	run(&t, 1300, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	tdb_close(&t);
}

static void test_values(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char ref[256], ref2[256], buf[256];
	struct fsnp_val e;

	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "value", "small");
	run(&t, 1000, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	assert_int_equal(r.status, 0);
	fr_str(&r.v, "ref", ref);
	assert_true(fr_is_nil(&r.v, "partition_key"));
	assert_int_equal(strncmp(ref, "f:{fa:", 6), 0);
	assert_int_equal(strlen(strstr(ref, ":v:s:")), 5 + 24 + 2);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "a much larger value than the limit");
	fb_str(&b, "partition_key", "tenant-a");
	fb_int(&b, "ttl_ms", 100);
	run(&t, 1000, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_str(&r.v, "ref", ref2);
	assert_string_equal(fr_str(&r.v, "partition_key", buf), "tenant-a");
	assert_int_equal(strncmp(ref2,
	                         "f:{f:gKcHr33HfuEij5EnGA85ZINeW-tMSrDYEvD-"
	                         "dZNXmzo}:v:s:",
	                         54),
	                 0);
	freply_free(&r);
	fb_begin(&b);
	fb_strs(&b, "refs", (const char *const[]){ref, "missing", ref2}, 3);
	fb_int(&b, "max_bytes", 20);
	run(&t, 1050, FSNP_OP_FLOW_VALUE_MGET, &b, &r);
	if (r.status != 0) {
		fprintf(stderr, "%s\n", r.text);
	}
	assert_int_equal(r.v.as.count, 3);
	assert_true(fsnp_bytes_eq(nth(&r.v, 0).as.bin, "small"));
	assert_int_equal(nth(&r.v, 1).tag, FSNP_NIL);
	e = nth(&r.v, 2);
	assert_true(fsnp_bytes_eq(fr_get(&e, "ref").as.bin, ref2));
	assert_int_equal(fr_get(&e, "value_omitted").tag, FSNP_TRUE);
	assert_int_equal(fr_int(&e, "value_size"), 5 + 34);
	freply_free(&r);
	/* The TTL'd value lapses. */
	fb_begin(&b);
	fb_strs(&b, "refs", (const char *const[]){ref2}, 1);
	run(&t, 1100, FSNP_OP_FLOW_VALUE_MGET, &b, &r);
	assert_int_equal(nth(&r.v, 0).tag, FSNP_NIL);
	freply_free(&r);
	fb_begin(&b);
	run(&t, 1100, FSNP_OP_FLOW_VALUE_MGET, &b, &r);
	fr_err(&r, 6, "ERR native field refs must be a binary list");
	freply_free(&r);
	fb_begin(&b);
	run(&t, 1100, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_err(&r, 6, "ERR native field value is required");
	freply_free(&r);
	/* Named values live with their owner flow. */
	create(&t, 1000, "own", "job", 0);
	fb_begin(&b);
	fb_str(&b, "value", "v1");
	fb_str(&b, "owner_flow_id", "own");
	run(&t, 1200, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_err(&r, 1,
	       "ERR flow named value put requires owner_flow_id and name");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v1");
	fb_str(&b, "owner_flow_id", "own");
	fb_str(&b, "name", "doc");
	fb_int(&b, "ttl_ms", 5);
	run(&t, 1200, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_err(&r, 1, "ERR flow ttl_ms is not supported for named values");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v1");
	fb_str(&b, "owner_flow_id", "own");
	fb_str(&b, "name", "doc");
	run(&t, 1200, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_get(&r.v, "created").tag, FSNP_TRUE);
	assert_int_equal(fr_int(&r.v, "version"), 2);
	fr_str(&r.v, "ref", ref);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v2");
	fb_str(&b, "owner_flow_id", "own");
	fb_str(&b, "name", "doc");
	run(&t, 1300, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_err(&r, 1,
	       "ERR flow value doc already exists with different digest; use "
	       "OVERRIDE true");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v2");
	fb_str(&b, "owner_flow_id", "own");
	fb_str(&b, "name", "doc");
	fb_bool(&b, "override", true);
	run(&t, 1300, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_get(&r.v, "created").tag, FSNP_FALSE);
	freply_free(&r);
	get(&t, 1400, "own", &r);
	{
		struct fsnp_val refs = fr_get(&r.v, "value_refs");
		assert_string_equal(fr_str(&refs, "doc", buf), ref);
	}
	freply_free(&r);
	fb_begin(&b);
	fb_strs(&b, "refs", (const char *const[]){ref}, 1);
	run(&t, 1400, FSNP_OP_FLOW_VALUE_MGET, &b, &r);
	assert_true(fsnp_bytes_eq(nth(&r.v, 0).as.bin, "v2"));
	freply_free(&r);
	/* Named values given at create, read back by GET. */
	fb_begin(&b);
	fb_str(&b, "id", "withv");
	fb_str(&b, "type", "job");
	fb_key(&b, "values");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "a");
	fsnp_w_str(&b.w, "x");
	fsnp_w_key(&b.w, "b");
	fsnp_w_i64(&b.w, 5);
	fsnp_w_map_end(&b.w);
	run(&t, 1500, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "withv");
	fb_bool(&b, "values", true);
	run(&t, 1500, FSNP_OP_FLOW_GET, &b, &r);
	{
		struct fsnp_val vals = fr_get(&r.v, "values");
		assert_int_equal(vals.as.count, 2);
		assert_string_equal(fr_str(&vals, "a", buf), "x");
		assert_int_equal(fr_int(&vals, "b"), 5);
	}
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "withv");
	fb_str(&b, "values", "b");
	run(&t, 1500, FSNP_OP_FLOW_GET, &b, &r);
	{
		struct fsnp_val vals = fr_get(&r.v, "values");
		assert_int_equal(vals.as.count, 1);
		assert_int_equal(fr_int(&vals, "b"), 5);
	}
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "withv");
	fb_int(&b, "values", 3);
	run(&t, 1500, FSNP_OP_FLOW_GET, &b, &r);
	fr_err(&r, 1,
	       "ERR flow values must be true, false, a name, or a name list");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v2");
	fb_str(&b, "owner_flow_id", "ghost");
	fb_str(&b, "name", "doc");
	run(&t, 1300, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	fr_err(&r, 1, "ERR flow not found");
	freply_free(&r);
	tdb_close(&t);
}

static void test_signal(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "s", "job", 0);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "signal", "go");
	fb_str(&b, "transition_to", "ready");
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_err(&r, 1, "ERR flow signal transition requires if_state");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "signal", "go");
	fb_str(&b, "transition_to", "ready");
	fb_str(&b, "if_state", "waiting");
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_err(&r, 1, "ERR flow state mismatch");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "signal", "go");
	fb_str(&b, "transition_to", "running");
	fb_str(&b, "if_state", "queued");
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_err(&r, 1,
	       "ERR flow running state is only entered by FLOW.CLAIM_DUE");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "signal", "go");
	fb_str(&b, "transition_to", "ready");
	fb_strs(&b, "if_state", (const char *const[]){"waiting", "queued"}, 2);
	fb_str(&b, "idempotency_key", "k1");
	fb_int(&b, "run_at_ms", 2000);
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "signal", "other");
	fb_str(&b, "idempotency_key", "k1");
	run(&t, 1100, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_err(&r, 1, "ERR flow signal idempotency conflict");
	freply_free(&r);
	get(&t, 1200, "s", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "ready");
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 2000);
	assert_int_equal(fr_int(&r.v, "version"), 2);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_str(&b, "state", "ready");
	run(&t, 2000, FSNP_OP_FLOW_CLAIM_DUE, &b, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "nope");
	fb_str(&b, "signal", "go");
	run(&t, 2000, FSNP_OP_FLOW_SIGNAL, &b, &r);
	fr_err(&r, 1, "ERR flow not found");
	freply_free(&r);
	tdb_close(&t);
}

static void test_many(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;

	(void)state;
	ftdb_open(&t);
	/* Atomic: a duplicate id fails the batch, nothing is created. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	for (int i = 0; i < 3; i++) {
		fsnp_w_array_begin(&b.w);
		fsnp_w_str(&b.w, i == 2 ? "m0" : (i ? "m1" : "m0"));
		fsnp_w_str(&b.w, "payload");
		fsnp_w_array_end(&b.w);
	}
	fsnp_w_array_end(&b.w);
	run(&t, 1000, FSNP_OP_FLOW_CREATE_MANY, &b, &r);
	fr_err(&r, 1, "ERR flow duplicate id in batch");
	freply_free(&r);
	/* An existing id fails the atomic batch after others applied:
	 * rolled back. */
	create(&t, 1000, "m9", "job", 0);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m0");
	fsnp_w_nil(&b.w);
	fsnp_w_array_end(&b.w);
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "id");
	fsnp_w_str(&b.w, "m9");
	fsnp_w_map_end(&b.w);
	fsnp_w_array_end(&b.w);
	run(&t, 1000, FSNP_OP_FLOW_CREATE_MANY, &b, &r);
	fr_err(&r, 1, "ERR flow already exists");
	freply_free(&r);
	claim(&t, 1000, "job", "w", 10, 1000, &c);
	assert_int_equal(c.v.as.count, 1); /* only m9 */
	freply_free(&c);
	/* Independent: per item results. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_bool(&b, "independent", true);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m1");
	fsnp_w_nil(&b.w);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m9");
	fsnp_w_nil(&b.w);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m2");
	fsnp_w_nil(&b.w);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_end(&b.w);
	run(&t, 1000, FSNP_OP_FLOW_CREATE_MANY, &b, &r);
	if (r.status != 0) {
		fprintf(stderr, "%s\n", r.text);
	}
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.as.count, 3);
	assert_true(fsnp_bytes_eq(nth(&r.v, 0).as.bin, "OK"));
	{
		struct fsnp_val e = nth(&r.v, 1);
		assert_true(fsnp_bytes_eq(nth(&e, 0).as.bin, "error"));
		assert_true(fsnp_bytes_eq(nth(&e, 1).as.bin,
		                          "ERR flow already exists"));
	}
	freply_free(&r);
	claim(&t, 1000, "job", "w", 10, 1000, &c);
	assert_int_equal(c.v.as.count, 2);
	freply_free(&c);
	/* COMPLETE_MANY with the list form. */
	fb_begin(&b);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m1");
	fsnp_w_str(&b.w, "w:1000:1");
	fsnp_w_i64(&b.w, 1);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "m2");
	fsnp_w_str(&b.w, "w:1000:1");
	fsnp_w_i64(&b.w, 1);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_end(&b.w);
	run(&t, 1100, FSNP_OP_FLOW_COMPLETE_MANY, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_str(&b.w, "bad");
	fsnp_w_array_end(&b.w);
	run(&t, 1100, FSNP_OP_FLOW_COMPLETE_MANY, &b, &r);
	fr_err(&r, 6, "ERR native flow item is invalid");
	freply_free(&r);
	fb_begin(&b);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_array_end(&b.w);
	run(&t, 1100, FSNP_OP_FLOW_CANCEL_MANY, &b, &r);
	fr_err(&r, 1, "ERR flow items must be a non-empty list");
	freply_free(&r);
	tdb_close(&t);
}

static void test_clock_and_misc(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	/* A client clock far ahead is clamped to the entry's time + skew. */
	fb_begin(&b);
	fb_str(&b, "id", "clk");
	fb_str(&b, "type", "job");
	fb_int(&b, "now_ms", 10000000);
	run(&t, 1000000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "clk2");
	fb_str(&b, "type", "job");
	fb_int(&b, "now_ms", 10);
	run(&t, 1000000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1000000, "clk", &r);
	assert_int_equal(fr_int(&r.v, "created_at_ms"), 1060000);
	freply_free(&r);
	get(&t, 1000000, "clk2", &r);
	assert_int_equal(fr_int(&r.v, "created_at_ms"), 940000);
	freply_free(&r);
	/* START_AND_CLAIM */
	fb_begin(&b);
	fb_str(&b, "id", "sc");
	fb_str(&b, "type", "job");
	fb_str(&b, "initial_state", "step1");
	fb_str(&b, "worker", "w");
	run(&t, 2000000, FSNP_OP_FLOW_START_AND_CLAIM, &b, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "state", buf), "running");
	assert_string_equal(fr_str(&r.v, "run_state", buf), "step1");
	assert_string_equal(fr_str(&r.v, "lease_token", buf), "w:2000000:1");
	assert_int_equal(fr_int(&r.v, "attempts"), 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "sc");
	fb_str(&b, "type", "job");
	fb_str(&b, "initial_state", "step1");
	fb_str(&b, "worker", "w");
	run(&t, 2000000, FSNP_OP_FLOW_START_AND_CLAIM, &b, &r);
	fr_err(&r, 1, "ERR flow already exists");
	freply_free(&r);
	/* INFO */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	run(&t, 2000000, FSNP_OP_FLOW_INFO, &b, &r);
	assert_int_equal(fr_int(&r.v, "queued"), 2);
	assert_int_equal(fr_int(&r.v, "running"), 1);
	assert_int_equal(fr_int(&r.v, "completed"), 0);
	freply_free(&r);
	/* POLICY generations */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	run(&t, 2000000, FSNP_OP_FLOW_POLICY_GET, &b, &r);
	assert_int_equal(fr_int(&r.v, "generation"), 0);
	{
		struct fsnp_val rt = fr_get(&r.v, "retry");
		assert_int_equal(fr_int(&rt, "max_retries"), 3);
	}
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_int(&b, "expected_generation", 1);
	run(&t, 2000000, FSNP_OP_FLOW_POLICY_SET, &b, &r);
	fr_err(&r, 1, "ERR stale flow policy generation");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_int(&b, "expected_generation", 0);
	fb_int(&b, "max_active_ms", 5000);
	run(&t, 2000000, FSNP_OP_FLOW_POLICY_SET, &b, &r);
	assert_int_equal(fr_int(&r.v, "generation"), 1);
	assert_int_equal(fr_int(&r.v, "max_active_ms"), 5000);
	freply_free(&r);
	/* max_active_ms on COMPLETE */
	fb_begin(&b);
	fb_str(&b, "id", "old");
	fb_str(&b, "type", "job2");
	fb_int(&b, "max_active_ms", 10);
	run(&t, 3000000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "job2");
	fb_str(&b, "worker", "w");
	run(&t, 3000000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	freply_free(&r);
	finish(&t, 3000100, FSNP_OP_FLOW_COMPLETE, "old", "w:3000000:1", 1, &r);
	fr_err(&r, 1, "ERR flow max_active_ms exceeded");
	freply_free(&r);
	/* ... and the flow failed, with the reason in its history. */
	get(&t, 3000200, "old", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "failed");
	assert_int_equal(fr_int(&r.v, "version"), 3);
	assert_true(fr_is_nil(&r.v, "lease_token"));
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "old");
	fb_str(&b, "event", "failed");
	run(&t, 3000200, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	/* Unsupported opcodes are refused before proposing. */
	fb_begin(&b);
	run(&t, 3000000, FSNP_OP_FLOW_SCHEDULE_CREATE, &b, &r);
	assert_int_equal(r.status, 6);
	freply_free(&r);
	tdb_close(&t);
}

static void test_steps_rewind_retention(void **state)
{
	struct tdb t;
	struct freply r, c;
	struct fbody b;
	char buf[256];
	struct fsnp_val e;

	(void)state;
	ftdb_open(&t);
	/* STEP_CONTINUE keeps the flow running under a new fencing token. */
	create(&t, 1000, "s", "job", 0);
	claim(&t, 1000, "job", "w", 1, 1000, &c);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "lease_token", "w:1000:1");
	fb_int(&b, "fencing_token", 1);
	fb_str(&b, "from_state", "other");
	fb_str(&b, "to_state", "two");
	run(&t, 1100, FSNP_OP_FLOW_STEP_CONTINUE, &b, &r);
	fr_err(&r, 1, "ERR flow wrong state");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "lease_token", "w:1000:1");
	fb_int(&b, "fencing_token", 1);
	fb_str(&b, "from_state", "queued");
	fb_str(&b, "to_state", "two");
	fb_str(&b, "worker", "someone-else");
	run(&t, 1100, FSNP_OP_FLOW_STEP_CONTINUE, &b, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "lease_token", "w:1000:1");
	fb_int(&b, "fencing_token", 1);
	fb_str(&b, "from_state", "queued");
	fb_str(&b, "to_state", "two");
	fb_int(&b, "lease_ms", 500);
	run(&t, 1100, FSNP_OP_FLOW_STEP_CONTINUE, &b, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "state", buf), "running");
	assert_string_equal(fr_str(&r.v, "run_state", buf), "two");
	assert_string_equal(fr_str(&r.v, "lease_token", buf), "w:1100:2");
	assert_int_equal(fr_int(&r.v, "lease_deadline_ms"), 1600);
	freply_free(&r);
	/* The old lease is stale now. */
	finish(&t, 1200, FSNP_OP_FLOW_COMPLETE, "s", "w:1000:1", 1, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	finish(&t, 1200, FSNP_OP_FLOW_COMPLETE, "s", "w:1100:2", 2, &r);
	fr_ok(&r);
	freply_free(&r);
	/* REWIND back to the created event. */
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "to_event", "1000-9");
	run(&t, 1300, FSNP_OP_FLOW_REWIND, &b, &r);
	fr_err(&r, 1, "ERR flow rewind target event not found");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "to_event", "1000-1");
	fb_str(&b, "expect_state", "queued");
	run(&t, 1300, FSNP_OP_FLOW_REWIND, &b, &r);
	fr_err(&r, 1, "ERR flow wrong state");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "to_event", "1000-1");
	fb_str(&b, "expect_state", "completed");
	fb_int(&b, "run_at_ms", 1400);
	run(&t, 1300, FSNP_OP_FLOW_REWIND, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 1300, "s", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "queued");
	assert_int_equal(fr_int(&r.v, "fencing_token"), 3);
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1400);
	assert_true(fr_is_nil(&r.v, "terminal_retention_until_ms"));
	freply_free(&r);
	claim(&t, 1400, "job", "w", 1, 1000, &c);
	assert_int_equal(c.v.as.count, 1);
	freply_free(&c);
	fb_begin(&b);
	fb_str(&b, "id", "s");
	fb_str(&b, "to_event", "1000-1");
	run(&t, 1500, FSNP_OP_FLOW_REWIND, &b, &r);
	fr_err(&r, 1, "ERR flow cannot rewind leased flow");
	freply_free(&r);
	/* RUN_STEPS_MANY creates flows straight to completed. */
	fb_begin(&b);
	fb_str(&b, "type", "bulk");
	fb_str(&b, "worker", "w");
	fb_int(&b, "steps", 3);
	fb_strs(&b, "items", (const char *const[]){"x1", "x2"}, 2);
	run(&t, 2000, FSNP_OP_FLOW_RUN_STEPS_MANY, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	get(&t, 2000, "x2", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "completed");
	assert_string_equal(fr_str(&r.v, "run_state", buf), "step_3");
	assert_int_equal(fr_int(&r.v, "fencing_token"), 3);
	assert_int_equal(fr_int(&r.v, "version"), 4);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "bulk");
	fb_str(&b, "worker", "w");
	fb_int(&b, "steps", 600);
	fb_strs(&b, "items", (const char *const[]){"y1", "y2"}, 2);
	run(&t, 2000, FSNP_OP_FLOW_RUN_STEPS_MANY, &b, &r);
	fr_err(&r, 1, "ERR flow run step operation count exceeds maximum 1000");
	freply_free(&r);
	/* RETENTION_CLEANUP deletes terminal flows past their retention. */
	fb_begin(&b);
	fb_str(&b, "id", "short");
	fb_str(&b, "type", "job");
	fb_int(&b, "retention_ttl_ms", 10);
	run(&t, 3000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "value", "v");
	fb_str(&b, "owner_flow_id", "short");
	fb_str(&b, "name", "n");
	run(&t, 3000, FSNP_OP_FLOW_VALUE_PUT, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	finish(&t, 3000, FSNP_OP_FLOW_CANCEL, "short", NULL, 0, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "limit", 1);
	run(&t, 3005, FSNP_OP_FLOW_RETENTION_CLEANUP, &b, &r);
	assert_int_equal(fr_int(&r.v, "flows"), 0);
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "limit", 1);
	run(&t, 3010, FSNP_OP_FLOW_RETENTION_CLEANUP, &b, &r);
	assert_int_equal(fr_int(&r.v, "flows"), 1);
	assert_int_equal(fr_int(&r.v, "history"), 3);
	assert_int_equal(fr_int(&r.v, "values"), 1);
	e = fr_get(&r.v, "more?");
	assert_int_equal(e.tag, FSNP_FALSE);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "short");
	run(&t, 3010, FSNP_OP_FLOW_GET, &b, &r);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "short");
	run(&t, 3010, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	tdb_close(&t);
}

static void create_in(struct tdb *t, uint64_t now, const char *id,
                      const char *pk)
{
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", "job");
	fb_str(&b, "partition_key", pk);
	run(t, now, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
}

static void test_claim_partitions(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "auto-1", "job", 0);
	create_in(&t, 1000, "p1-a", "p1");
	create_in(&t, 1000, "p1-b", "p1");
	create_in(&t, 1000, "p2-a", "p2");
	/* No partition (or AUTO): the auto buckets only. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	run(&t, 2000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val j = nth(&r.v, 0);
		assert_string_equal(fr_str(&j, "id", buf), "auto-1");
	}
	freply_free(&r);
	/* partition_keys: those listed. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	fb_strs(&b, "partition_keys", (const char *const[]){"p2", "p9"}, 2);
	run(&t, 2000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val j = nth(&r.v, 0);
		assert_string_equal(fr_str(&j, "id", buf), "p2-a");
		assert_string_equal(fr_str(&j, "partition_key", buf), "p2");
	}
	freply_free(&r);
	/* One partition, limited. */
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_str(&b, "partition_key", "p1");
	fb_str(&b, "return", "jobs");
	run(&t, 2000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val j = nth(&r.v, 0);
		assert_string_equal(fr_str(&j, "id", buf), "p1-a");
		assert_string_equal(fr_str(&j, "run_state", buf), "queued");
		assert_int_equal(fr_int(&j, "fencing_token"), 1);
	}
	freply_free(&r);
	/* ANY: every partition (one left). */
	create(&t, 1000, "auto-2", "job", 0);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	fb_str(&b, "partition_key", "ANY");
	fb_bool(&b, "reclaim_expired", false);
	run(&t, 2000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 2);
	freply_free(&r);
	/* The explicitly partitioned flow completes with its partition. */
	fb_begin(&b);
	fb_str(&b, "id", "p2-a");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	run(&t, 2100, FSNP_OP_FLOW_COMPLETE, &b, &r);
	fr_err(&r, 1, "ERR flow not found");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p2-a");
	fb_str(&b, "partition_key", "p2");
	fb_str(&b, "lease_token", "w:2000:1");
	fb_int(&b, "fencing_token", 1);
	run(&t, 2100, FSNP_OP_FLOW_COMPLETE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	/* A priority filter. */
	create(&t, 3000, "hi", "job", 2);
	create(&t, 3000, "lo", "job", 0);
	fb_begin(&b);
	fb_str(&b, "type", "job");
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	fb_int(&b, "priority", 0);
	fb_bool(&b, "reclaim_expired", false);
	run(&t, 3000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val j = nth(&r.v, 0);
		assert_string_equal(fr_str(&j, "id", buf), "lo");
	}
	freply_free(&r);
	tdb_close(&t);
}

/* SPAWN_CHILDREN body for parent `id` (claimed: lease w:<now>:1). */
static void spawn_body(struct fbody *b, const char *id, const char *lease,
                       const char *group, const char *failure,
                       const char *const *kids, int n)
{
	fb_begin(b);
	fb_str(b, "id", id);
	fb_str(b, "partition_key", "pk");
	fb_str(b, "group_id", group);
	fb_int(b, "fencing_token", 1);
	fb_str(b, "lease_token", lease);
	fb_str(b, "wait_state", "waiting");
	fb_str(b, "success", "done");
	fb_str(b, "failure", failure);
	fb_key(b, "children");
	fsnp_w_array_begin(&b->w);
	for (int i = 0; i < n; i++) {
		fsnp_w_map_begin(&b->w);
		fsnp_w_key(&b->w, "id");
		fsnp_w_str(&b->w, kids[i]);
		fsnp_w_key(&b->w, "type");
		fsnp_w_str(&b->w, "kid");
		fsnp_w_map_end(&b->w);
	}
	fsnp_w_array_end(&b->w);
}

static void get_pk(struct tdb *t, uint64_t now, const char *id,
                   struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "partition_key", "pk");
	run(t, now, FSNP_OP_FLOW_GET, &b, r);
	assert_int_equal(r->status, 0);
}

static void claim_pk(struct tdb *t, uint64_t now, const char *type,
                     struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "type", type);
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	fb_str(&b, "partition_key", "pk");
	run(t, now, FSNP_OP_FLOW_CLAIM_DUE, &b, r);
	assert_int_equal(r->status, 0);
}

static void finish_pk(struct tdb *t, uint64_t now, uint16_t op, const char *id,
                      const char *lease, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "partition_key", "pk");
	fb_str(&b, "lease_token", lease);
	fb_int(&b, "fencing_token", 1);
	run(t, now, op, &b, r);
}

static void test_spawn_children(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char buf[256];
	static const char *const kids[] = {"c1", "c2"};
	static const char *const kids2[] = {"d1", "d2"};

	(void)state;
	ftdb_open(&t);
	create_in(&t, 1000, "par", "pk");
	claim_pk(&t, 1000, "job", &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	/* Errors first. */
	spawn_body(&b, "par", "w:1000:1", "__g", "broken", kids, 2);
	run(&t, 1100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_err(&r, 1, "ERR flow group_id is reserved");
	freply_free(&r);
	spawn_body(&b, "par", "w:1000:1", "g1", "", kids, 2);
	run(&t, 1100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_err(&r, 1,
	       "ERR flow exhaust_to must include success and failure states");
	freply_free(&r);
	spawn_body(&b, "par", "w:1000:1", "g1", "broken",
	           (const char *const[]){"par"}, 1);
	run(&t, 1100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_err(&r, 1, "ERR flow child id must differ from parent id");
	freply_free(&r);
	spawn_body(&b, "par", "w:1000:9", "g1", "broken", kids, 2);
	run(&t, 1100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_err(&r, 1, "ERR stale flow lease");
	freply_free(&r);
	/* Spawned: the parent waits, unleased and not due. */
	spawn_body(&b, "par", "w:1000:1", "g1", "broken", kids, 2);
	run(&t, 1100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	spawn_body(&b, "par", "w:1000:1", "g1", "broken", kids, 2);
	run(&t, 1150, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_ok(&r); /* the same request again */
	freply_free(&r);
	spawn_body(&b, "par", "w:1000:1", "g1", "other", kids, 2);
	run(&t, 1150, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_err(&r, 1, "ERR flow child group idempotency conflict");
	freply_free(&r);
	get_pk(&t, 1200, "par", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "waiting");
	assert_true(fr_is_nil(&r.v, "next_run_at_ms"));
	assert_true(fr_is_nil(&r.v, "lease_token"));
	{
		struct fsnp_val cg = fr_get(&r.v, "child_groups");
		struct fsnp_val g1 = fr_get(&cg, "g1");
		assert_int_equal(fr_int(&g1, "total"), 2);
	}
	freply_free(&r);
	get_pk(&t, 1200, "c1", &r);
	assert_string_equal(fr_str(&r.v, "parent_flow_id", buf), "par");
	assert_string_equal(fr_str(&r.v, "parent_partition_key", buf), "pk");
	assert_string_equal(fr_str(&r.v, "root_flow_id", buf), "par");
	freply_free(&r);
	claim_pk(&t, 1300, "kid", &r);
	assert_int_equal(r.v.as.count, 2);
	freply_free(&r);
	finish_pk(&t, 1400, FSNP_OP_FLOW_COMPLETE, "c1", "w:1300:1", &r);
	fr_ok(&r);
	freply_free(&r);
	get_pk(&t, 1400, "par", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "waiting");
	freply_free(&r);
	finish_pk(&t, 1500, FSNP_OP_FLOW_COMPLETE, "c2", "w:1300:1", &r);
	fr_ok(&r);
	freply_free(&r);
	get_pk(&t, 1500, "par", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "done");
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1500);
	freply_free(&r);
	/* A failing child fails the parent (failure "failed", terminal),
	 * which cancels the other child. */
	create_in(&t, 2000, "par2", "pk");
	claim_pk(&t, 2000, "job", &r);
	freply_free(&r);
	spawn_body(&b, "par2", "w:2000:1", "g", "failed", kids2, 2);
	run(&t, 2100, FSNP_OP_FLOW_SPAWN_CHILDREN, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	claim_pk(&t, 2200, "kid", &r);
	assert_int_equal(r.v.as.count, 2);
	freply_free(&r);
	finish_pk(&t, 2300, FSNP_OP_FLOW_FAIL, "d1", "w:2200:1", &r);
	fr_ok(&r);
	freply_free(&r);
	get_pk(&t, 2300, "par2", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "failed");
	freply_free(&r);
	get_pk(&t, 2300, "d2", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "cancelled");
	freply_free(&r);
	/* Parents and children cannot be rewound. */
	fb_begin(&b);
	fb_str(&b, "id", "c1");
	fb_str(&b, "partition_key", "pk");
	fb_str(&b, "to_event", "1100-1");
	run(&t, 3000, FSNP_OP_FLOW_REWIND, &b, &r);
	fr_err(&r, 1, "ERR flow cannot rewind parent or child flow");
	freply_free(&r);
	tdb_close(&t);
}

/* Applies a raw store command at entry time `now`; returns the i64 the
 * sweep answers (asserts an OK result). */
static int64_t apply_sweep(struct tdb *t, uint64_t now, const uint8_t *cmd,
                           size_t len)
{
	struct fsm_cmd fc = {cmd, len};
	struct fsm_result res = {NULL, 0};
	struct fsm_entry e;
	struct fsnp_val v;
	int64_t n;

	e.group = G;
	e.index = t->next_index[G]++;
	e.term = 1;
	e.now_ms = now;
	e.n_cmds = 1;
	e.cmds = &fc;
	assert_int_equal(store_apply(t->s, &e, &res), 0);
	assert_true(res.len >= 3);
	assert_int_equal(res.data[1], STORE_OK);
	assert_int_equal(
	    fsnp_value_decode_body(res.data + 2, res.len - 2, NULL, &v), 0);
	assert_int_equal(v.tag, FSNP_I64);
	n = v.as.i;
	free(res.data);
	return n;
}

static void create_active(struct tdb *t, uint64_t now, const char *id,
                          int64_t max_active)
{
	struct fbody b;
	struct freply r;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", "timed");
	if (max_active > 0) {
		fb_int(&b, "max_active_ms", max_active);
	}
	run(t, now, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
}

/* The leader's max_active_ms sweep: the scan finds exactly the
 * non-terminal flows past their deadline; apply fails them as COMPLETE
 * would (state, history reason) and re-checks, so a stale, replayed or
 * early command changes nothing. */
static void test_active_sweep(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char buf[256];
	uint8_t *cmd;
	size_t len;
	struct sbuf raw;
	const uint8_t *part;
	size_t plen;
	char pbuf[FLOW_AUTO_PARTITION_MAX];
	struct flow_req q;
	struct flow_err err;

	(void)state;
	ftdb_open(&t);
	create_active(&t, 1000, "a", 100);   /* deadline 1100 */
	create_active(&t, 1000, "b", 10000); /* deadline 11000 */
	create_active(&t, 1000, "c", 0);     /* none */
	create_active(&t, 1000, "d", 100);   /* ends in time */
	fb_begin(&b);
	fb_str(&b, "type", "timed");
	fb_str(&b, "worker", "w");
	fb_int(&b, "limit", 10);
	run(&t, 1050, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 4);
	freply_free(&r);
	finish(&t, 1060, FSNP_OP_FLOW_COMPLETE, "d", "w:1050:1", 1, &r);
	fr_ok(&r);
	freply_free(&r);

	/* Nothing is past its deadline yet. */
	assert_int_equal(
	    flow_sweep_cmd(t.s, G, 1100, FLOW_SWEEP_MAX, &cmd, &len), 0);
	assert_null(cmd);
	assert_int_equal(len, 0);

	/* At 2000 only "a" is. */
	assert_int_equal(
	    flow_sweep_cmd(t.s, G, 2000, FLOW_SWEEP_MAX, &cmd, &len), 0);
	assert_non_null(cmd);
	assert_int_equal(cmd[1], FLOW_STORE_OP_SWEEP);
	assert_int_equal(be_get32(cmd + 3 + 8), 1);
	assert_int_equal(apply_sweep(&t, 2000, cmd, len), 1);
	get(&t, 2000, "a", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "failed");
	assert_int_equal(fr_int(&r.v, "version"), 3);
	assert_true(fr_is_nil(&r.v, "lease_token"));
	assert_true(fr_int(&r.v, "terminal_retention_until_ms") > 2000);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a");
	fb_str(&b, "event", "failed");
	run(&t, 2000, FSNP_OP_FLOW_HISTORY, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val ev = nth(&r.v, 0), fields = nth(&ev, 1);
		struct fsnp_iter it;
		struct fsnp_val k, v;
		bool reason = false;
		fsnp_iter_init(&it, &fields);
		while (fsnp_iter_next(&it, NULL, &k) &&
		       fsnp_iter_next(&it, NULL, &v)) {
			if (k.tag == FSNP_BIN &&
			    fsnp_bytes_eq(k.as.bin, "reason")) {
				assert_true(
				    fsnp_bytes_eq(v.as.bin, "max_active_ms"));
				reason = true;
			}
		}
		assert_true(reason);
	}
	freply_free(&r);

	/* The same command again (stale): nothing changes. */
	assert_int_equal(apply_sweep(&t, 2100, cmd, len), 0);
	get(&t, 2100, "a", &r);
	assert_int_equal(fr_int(&r.v, "version"), 3);
	freply_free(&r);
	free(cmd);
	/* The index no longer lists "a". */
	assert_int_equal(
	    flow_sweep_cmd(t.s, G, 2000, FLOW_SWEEP_MAX, &cmd, &len), 0);
	assert_null(cmd);

	/* A command naming "b" and "c" early: b's deadline has not passed at
	 * the entry's time (the command's later time is not believed) and c
	 * has none. */
	fb_begin(&b);
	fb_str(&b, "id", "b");
	fb_end(&b);
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_GET, b.b.data,
	                                        b.b.len, &q, &err),
	                 0);
	flow_cmd_partition(&q, 0, pbuf, &part, &plen);
	fb_free(&b);
	{
		const uint8_t *parts[2] = {part, part};
		size_t plens[2] = {plen, plen};
		const uint8_t *ids[2] = {(const uint8_t *)"b",
		                         (const uint8_t *)"c"};
		size_t ilens[2] = {1, 1};
		char cpbuf[FLOW_AUTO_PARTITION_MAX];
		const uint8_t *cpart;
		size_t cplen;
		fb_begin(&b);
		fb_str(&b, "id", "c");
		fb_end(&b);
		assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_GET,
		                                        b.b.data, b.b.len, &q,
		                                        &err),
		                 0);
		flow_cmd_partition(&q, 0, cpbuf, &cpart, &cplen);
		fb_free(&b);
		parts[1] = cpart;
		plens[1] = cplen;
		sbuf_init(&raw);
		flow_sweep_encode(20000, parts, plens, ids, ilens, 2, &raw);
		assert_int_equal(apply_sweep(&t, 3000, raw.p, raw.len), 0);
		get(&t, 3000, "b", &r);
		assert_string_equal(fr_str(&r.v, "state", buf), "running");
		freply_free(&r);
		/* Past b's deadline the same command fails b only. */
		assert_int_equal(apply_sweep(&t, 12000, raw.p, raw.len), 1);
		get(&t, 12000, "b", &r);
		assert_string_equal(fr_str(&r.v, "state", buf), "failed");
		freply_free(&r);
		get(&t, 12000, "c", &r);
		assert_string_equal(fr_str(&r.v, "state", buf), "running");
		freply_free(&r);
		sbuf_free(&raw);
	}
	/* A malformed sweep is refused without a change. */
	{
		uint8_t bad[] = {STORE_CMD_VERSION,
		                 FLOW_STORE_OP_SWEEP,
		                 FLOW_CMD_VERSION,
		                 0,
		                 0,
		                 0,
		                 0,
		                 0,
		                 0,
		                 0,
		                 1,
		                 0,
		                 0,
		                 0,
		                 9};
		struct fsm_cmd fc = {bad, sizeof bad};
		struct fsm_result res = {NULL, 0};
		struct fsm_entry e = {.group = G,
		                      .index = t.next_index[G]++,
		                      .term = 1,
		                      .now_ms = 13000,
		                      .n_cmds = 1,
		                      .cmds = &fc};
		assert_int_equal(store_apply(t.s, &e, &res), 0);
		assert_int_equal(res.data[1], STORE_BAD_COMMAND);
		free(res.data);
	}
	tdb_close(&t);
}

struct seen {
	int calls;
	uint16_t opcode;
	size_t n;
	char id[32], state[32];
	int64_t next;
};

static void on_changes(void *data, uint32_t group, uint16_t opcode,
                       const struct flow_change *ch, size_t n)
{
	struct seen *s = data;
	assert_int_equal(group, G);
	s->calls++;
	s->opcode = opcode;
	s->n = n;
	snprintf(s->id, sizeof s->id, "%.*s", (int)ch[n - 1].id.len,
	         (const char *)ch[n - 1].id.ptr);
	snprintf(s->state, sizeof s->state, "%.*s", (int)ch[n - 1].state.len,
	         (const char *)ch[n - 1].state.ptr);
	s->next = ch[n - 1].next_run_at_ms;
}

/* The changes hook sees every record a successful command wrote (not
 * failed commands or reads); the next-due read gives a parked claim the
 * earliest due time of its type. */
static void test_changes_next_due(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct seen sn = {0};
	uint64_t at;

	(void)state;
	ftdb_open(&t);
	flow_set_changes_hook(on_changes, &sn);
	fb_begin(&b);
	fb_str(&b, "id", "later");
	fb_str(&b, "type", "w");
	fb_int(&b, "run_at_ms", 5000);
	run(&t, 1000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	assert_int_equal(sn.calls, 1);
	assert_int_equal(sn.opcode, FSNP_OP_FLOW_CREATE);
	assert_string_equal(sn.id, "later");
	assert_string_equal(sn.state, "queued");
	assert_int_equal(sn.next, 5000);
	/* A refused create and a read: no call. */
	fb_begin(&b);
	fb_str(&b, "id", "later");
	fb_str(&b, "type", "w");
	run(&t, 1000, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_err(&r, 1, "ERR flow already exists");
	freply_free(&r);
	get(&t, 1000, "later", &r);
	freply_free(&r);
	assert_int_equal(sn.calls, 1);

	/* Next due of a claim of type w: 5000; of another type: none. */
	fb_begin(&b);
	fb_str(&b, "type", "w");
	fb_str(&b, "worker", "x");
	fb_end(&b);
	assert_int_equal(flow_next_due(t.s, G, FSNP_OP_FLOW_CLAIM_DUE, b.b.data,
	                               b.b.len, 1000, &at),
	                 0);
	assert_int_equal(at, 5000);
	fb_free(&b);
	fb_begin(&b);
	fb_str(&b, "type", "other");
	fb_str(&b, "worker", "x");
	fb_end(&b);
	assert_int_equal(flow_next_due(t.s, G, FSNP_OP_FLOW_CLAIM_DUE, b.b.data,
	                               b.b.len, 1000, &at),
	                 0);
	assert_true(at == UINT64_MAX);
	fb_free(&b);

	/* A claim at 6000 writes the running flow (next run = deadline). */
	fb_begin(&b);
	fb_str(&b, "type", "w");
	fb_str(&b, "worker", "x");
	fb_int(&b, "lease_ms", 1000);
	run(&t, 6000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	assert_int_equal(sn.calls, 2);
	assert_int_equal(sn.opcode, FSNP_OP_FLOW_CLAIM_DUE);
	assert_string_equal(sn.state, "running");
	assert_int_equal(sn.next, 7000);
	/* Now from the summary floors (lower bounds, exact once a claim
	 * that found nothing raised them): the lease's end (a reclaim). */
	fb_begin(&b);
	fb_str(&b, "type", "w");
	fb_str(&b, "worker", "x");
	run(&t, 6000, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "w");
	fb_str(&b, "worker", "x");
	fb_end(&b);
	assert_int_equal(flow_next_due(t.s, G, FSNP_OP_FLOW_CLAIM_DUE, b.b.data,
	                               b.b.len, 6000, &at),
	                 0);
	assert_int_equal(at, 7000);
	fb_free(&b);
	flow_set_changes_hook(NULL, NULL);
	tdb_close(&t);
}

/* A claim peek (FLOW_STORE_OP_PEEK) at `now`: its reply in r. */
static void peek(struct tdb *t, uint64_t now, const char *type,
                 struct freply *r)
{
	struct fbody b;
	struct flow_cmd_meta meta = {FLOW_CLOCK_SKEW_DEFAULT_MS, 7};
	struct flow_err err;
	struct fsm_result out;
	uint8_t *cmd;
	size_t len;

	fb_begin(&b);
	fb_str(&b, "type", type);
	fb_str(&b, "worker", "pk");
	fb_int(&b, "limit", 5);
	fb_end(&b);
	assert_int_equal(flow_cmd_encode_peek(FSNP_OP_FLOW_CLAIM_DUE, b.b.data,
	                                      b.b.len, &meta, &cmd, &len, &err),
	                 0);
	fb_free(&b);
	assert_int_equal(store_read(t->s, G, now, cmd, len, &out), 0);
	free(cmd);
	r->buf = out.data;
	r->len = out.len;
	assert_int_equal(r->buf[1], STORE_OK);
	assert_int_equal(
	    fsnp_value_decode_body(r->buf + 2, r->len - 2, NULL, &r->v), 0);
	assert_int_equal(r->v.tag, FSNP_ARRAY);
}

/* The i-th [priority, due(, count)] of a peek. */
static void peek_entry(const struct freply *r, uint32_t i, int64_t *prio,
                       int64_t *due, int64_t *count)
{
	struct fsnp_val e = nth(&r->v, i);
	*prio = nth(&e, 0).as.i;
	*due = nth(&e, 1).as.i;
	*count = e.as.count == 3 ? nth(&e, 2).as.i : 1;
}

/* Peeks say what a claim would take without writing: per flow until the
 * type's auto-partition floors are summed up (by its first claim), then
 * one [priority, floor, -1] per priority with due work, kept in step with
 * creates and claims. */
static void test_claim_peek(void **state)
{
	struct tdb t;
	struct freply r;
	int64_t p, d, n;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	create(&t, 1000, "pa", "pk", 0);
	create(&t, 1100, "pb", "pk", 2);
	peek(&t, 2000, "pk", &r);
	assert_int_equal(r.v.as.count, 2);
	peek_entry(&r, 0, &p, &d, &n);
	assert_int_equal(p, 2);
	assert_int_equal(d, 1100);
	assert_int_equal(n, 1);
	peek_entry(&r, 1, &p, &d, &n);
	assert_int_equal(p, 0);
	assert_int_equal(d, 1000);
	freply_free(&r);
	/* Nothing was claimed by the peek. */
	get(&t, 2000, "pb", &r);
	assert_string_equal(fr_str(&r.v, "state", buf), "queued");
	freply_free(&r);

	claim(&t, 2000, "pk", "w", 1, 1000, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_val first = nth(&r.v, 0);
		assert_string_equal(fr_str(&first, "id", buf), "pb");
	}
	freply_free(&r);
	/* Summed up now: one entry per priority, a lower bound (pb's
	 * queued floor is raised past its claimed entry by the next scan
	 * of that group, so priority 2 may still be listed). */
	peek(&t, 2000, "pk", &r);
	assert_true(r.v.as.count >= 1 && r.v.as.count <= 2);
	peek_entry(&r, r.v.as.count - 1, &p, &d, &n);
	assert_int_equal(p, 0);
	assert_true(d <= 1000);
	assert_int_equal(n, -1);
	freply_free(&r);

	claim(&t, 2000, "pk", "w", 5, 1000, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	/* Both leased until 3000; a claim finding nothing raises the
	 * floors past the claimed entries and sums them up again. */
	claim(&t, 2000, "pk", "w", 5, 1000, &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	peek(&t, 2000, "pk", &r);
	assert_int_equal(r.v.as.count, 0);
	freply_free(&r);
	create(&t, 2500, "pc", "pk", 1);
	peek(&t, 2600, "pk", &r);
	assert_int_equal(r.v.as.count, 1);
	peek_entry(&r, 0, &p, &d, &n);
	assert_int_equal(p, 1);
	assert_int_equal(d, 2500);
	freply_free(&r);
	/* Past the leases, the expired ones are due (reclaims) too. */
	peek(&t, 3500, "pk", &r);
	assert_int_equal(r.v.as.count, 3);
	freply_free(&r);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_get),
	    cmocka_unit_test(test_claim_complete),
	    cmocka_unit_test(test_fencing),
	    cmocka_unit_test(test_transition_cancel),
	    cmocka_unit_test(test_retry),
	    cmocka_unit_test(test_history),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_signal),
	    cmocka_unit_test(test_many),
	    cmocka_unit_test(test_clock_and_misc),
	    cmocka_unit_test(test_steps_rewind_retention),
	    cmocka_unit_test(test_claim_partitions),
	    cmocka_unit_test(test_spawn_children),
	    cmocka_unit_test(test_active_sweep),
	    cmocka_unit_test(test_changes_next_due),
	    cmocka_unit_test(test_claim_peek),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
