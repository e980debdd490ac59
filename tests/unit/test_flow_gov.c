/* flow/ governance: budgets, limits, effects, the ledger, approvals and
 * circuits on a temporary RocksDB through store_apply and store_read;
 * every error path, and a seeded model test of budgets and limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_gov.h"
#include "tests/unit/flow_test_util.h"
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

/* A denial: status 1, a map with this code and reason. */
static void denied(const struct freply *r, const char *code, const char *reason)
{
	char buf[256];

	assert_int_equal(r->status, 1);
	assert_int_equal(r->v.tag, FSNP_MAP);
	assert_string_equal(fr_str(&r->v, "code", buf), code);
	assert_string_equal(fr_str(&r->v, "reason", buf), reason);
	assert_false(fr_get(&r->v, "retryable").tag == FSNP_TRUE);
}

/* An integer inside a nested map. */
static int64_t sub_int(const struct fsnp_val *m, const char *k1, const char *k2)
{
	struct fsnp_val v = fr_get(m, k1);

	return fr_int(&v, k2);
}

static void reserve(struct tdb *t, uint64_t now, const char *scope,
                    int64_t amount, const char *rid, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", scope);
	fb_int(&b, "amount", amount);
	fb_int(&b, "limit", 100);
	fb_int(&b, "window_ms", 1000);
	if (rid != NULL) {
		fb_str(&b, "reservation_id", rid);
	}
	run(t, now, FSNP_OP_FLOW_BUDGET_RESERVE, &b, r);
}

static void settle(struct tdb *t, uint64_t now, const char *scope,
                   const char *rid, int64_t actual, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", scope);
	fb_str(&b, "reservation_id", rid);
	if (actual >= 0) {
		fb_int(&b, "actual_amount", actual);
		run(t, now, FSNP_OP_FLOW_BUDGET_COMMIT, &b, r);
	} else {
		run(t, now, FSNP_OP_FLOW_BUDGET_RELEASE, &b, r);
	}
}

static int64_t budget_used(struct tdb *t, uint64_t now, const char *scope)
{
	struct fbody b;
	struct freply r;
	int64_t used;

	fb_begin(&b);
	fb_str(&b, "scope", scope);
	run(t, now, FSNP_OP_FLOW_BUDGET_GET, &b, &r);
	assert_int_equal(r.status, 0);
	used = r.v.tag == FSNP_NIL ? -1 : fr_int(&r.v, "used");
	freply_free(&r);
	return used;
}

/* The 128 most recently settled reservations are kept (replayable);
 * older ones are forgotten, as in the reference; reservations_count
 * counts open and kept settled ones. */
static void test_budget_settled_cap(void **state)
{
	struct tdb t;
	struct freply r;
	char rid[16];

	(void)state;
	ftdb_open(&t);
	for (int i = 0; i < 130; i++) {
		snprintf(rid, sizeof rid, "s%d", i);
		reserve(&t, 1000 + (uint64_t)i, "cap", 1, rid, &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
		settle(&t, 1000 + (uint64_t)i, "cap", rid, i % 2 ? 0 : -1, &r);
		assert_int_equal(r.status, 0);
		assert_int_equal(fr_int(&r.v, "reservations_count"),
		                 i < 128 ? i + 1 : 128);
		freply_free(&r);
	}
	reserve(&t, 1200, "cap", 1, "open", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "reservations_count"), 129);
	freply_free(&r);
	/* s0 and s1 were forgotten; s2 still replays. */
	settle(&t, 1201, "cap", "s0", -1, &r);
	fr_err(&r, 1, "ERR flow budget reservation not found");
	freply_free(&r);
	settle(&t, 1201, "cap", "s1", 0, &r);
	fr_err(&r, 1, "ERR flow budget reservation not found");
	freply_free(&r);
	settle(&t, 1201, "cap", "s2", -1, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	settle(&t, 1201, "cap", "s129", 0, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	/* A new window drops the settled ones; the open one stays. */
	settle(&t, 2500, "cap", "s2", -1, &r);
	fr_err(&r, 1, "ERR flow budget reservation not found");
	freply_free(&r);
	reserve(&t, 2501, "cap", 1, "open", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "reservations_count"), 1);
	freply_free(&r);
	tdb_close(&t);
}

static void test_budget(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	/* Creating needs limit and window_ms. */
	fb_begin(&b);
	fb_str(&b, "scope", "llm");
	fb_int(&b, "amount", 5);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1, "ERR flow budget limit is required");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "llm");
	fb_int(&b, "amount", 0);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 6, "ERR native field amount must be a positive integer");
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "amount", 1);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 6, "ERR native field scope must be binary");
	freply_free(&r);
	assert_int_equal(budget_used(&t, 1000, "llm"), -1);

	reserve(&t, 1000, "llm", 60, "r1", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 60);
	assert_int_equal(fr_int(&r.v, "remaining"), 40);
	assert_int_equal(fr_int(&r.v, "reserved_amount"), 60);
	assert_string_equal(fr_str(&r.v, "status", buf), "reserved");
	assert_int_equal(fr_int(&r.v, "reservations_count"), 1);
	freply_free(&r);
	/* Same id and amount: the reservation again, counted once. */
	reserve(&t, 1001, "llm", 60, "r1", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 60);
	freply_free(&r);
	reserve(&t, 1001, "llm", 61, "r1", &r);
	fr_err(&r, 1, "ERR flow budget reservation id already exists");
	freply_free(&r);
	/* Over the limit. */
	reserve(&t, 1100, "llm", 41, "r2", &r);
	denied(&r, "GOVERNANCE_BUDGET_EXHAUSTED", "budget_exhausted");
	assert_int_equal(fr_int(&r.v, "requested"), 41);
	assert_int_equal(fr_int(&r.v, "used"), 60);
	assert_int_equal(fr_int(&r.v, "limit"), 100);
	assert_int_equal(fr_int(&r.v, "window_ms"), 1000);
	assert_int_equal(fr_int(&r.v, "retry_after_ms"), 900);
	assert_string_equal(fr_str(&r.v, "scope", buf), "llm");
	freply_free(&r);
	reserve(&t, 1100, "llm", 40, "r2", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "remaining"), 0);
	freply_free(&r);
	/* Commit less than reserved gives the rest back. */
	settle(&t, 1200, "llm", "r1", 50, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 90);
	assert_string_equal(fr_str(&r.v, "status", buf), "committed");
	assert_int_equal(fr_int(&r.v, "actual_amount"), 50);
	assert_int_equal(fr_int(&r.v, "settled_at_ms"), 1200);
	freply_free(&r);
	settle(&t, 1201, "llm", "r1", 50, &r); /* replay */
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 90);
	freply_free(&r);
	settle(&t, 1201, "llm", "r1", 51, &r);
	fr_err(&r, 1, "ERR flow budget reservation already committed");
	freply_free(&r);
	settle(&t, 1201, "llm", "r1", -1, &r);
	fr_err(&r, 1, "ERR flow budget reservation already committed");
	freply_free(&r);
	/* Commit over the reservation: overage. */
	settle(&t, 1300, "llm", "r2", 60, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 110);
	assert_int_equal(fr_int(&r.v, "overage_amount"), 10);
	assert_true(fr_get(&r.v, "over_budget").tag == FSNP_TRUE);
	freply_free(&r);
	settle(&t, 1300, "llm", "nope", 1, &r);
	fr_err(&r, 1, "ERR flow budget reservation not found");
	freply_free(&r);
	settle(&t, 1300, "other", "r1", 1, &r);
	fr_err(&r, 1, "ERR flow budget not found");
	freply_free(&r);
	/* A new window: used restarts; an old reservation settles without
	 * touching it. */
	reserve(&t, 2100, "llm", 30, "r3", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 30);
	assert_int_equal(fr_int(&r.v, "window_start_ms"), 2100);
	freply_free(&r);
	reserve(&t, 3200, "llm", 10, "r4", &r); /* window 3200 */
	assert_int_equal(r.status, 0);
	freply_free(&r);
	settle(&t, 3300, "llm", "r3", -1, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "used"), 10);
	assert_string_equal(fr_str(&r.v, "status", buf), "released");
	freply_free(&r);
	settle(&t, 3300, "llm", "r3", -1, &r); /* replay */
	assert_int_equal(r.status, 0);
	freply_free(&r);
	settle(&t, 3301, "llm", "r4", -1, &r);
	assert_int_equal(fr_int(&r.v, "used"), 0);
	freply_free(&r);
	/* A client clock older than the last update is refused. */
	fb_begin(&b);
	fb_str(&b, "scope", "llm");
	fb_int(&b, "amount", 1);
	fb_int(&b, "now_ms", 3000);
	run(&t, 3400, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1, "ERR flow budget now_ms cannot precede updated_at_ms");
	freply_free(&r);
	/* A generated reservation id: 22 characters. */
	reserve(&t, 3400, "llm", 1, NULL, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(strlen(fr_str(&r.v, "reservation_id", buf)), 22);
	freply_free(&r);
	/* Listing. */
	reserve(&t, 3400, "partition:tenant-a", 1, "x", &r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "partition_key", "tenant-a");
	run(&t, 3500, FSNP_OP_FLOW_BUDGET_LIST, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_ARRAY);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	fb_begin(&b);
	run(&t, 3500, FSNP_OP_FLOW_BUDGET_LIST, &b, &r);
	assert_int_equal(r.v.as.count, 2);
	freply_free(&r);
	tdb_close(&t);
}

static void lease(struct tdb *t, uint64_t now, int64_t shard, int64_t amount,
                  int64_t ttl, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", shard);
	fb_int(&b, "amount", amount);
	fb_int(&b, "ttl_ms", ttl);
	fb_int(&b, "limit", 10);
	run(t, now, FSNP_OP_FLOW_LIMIT_LEASE, &b, r);
}

static void spend(struct tdb *t, uint64_t now, int64_t shard, int64_t amount,
                  struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", shard);
	fb_int(&b, "amount", amount);
	run(t, now, FSNP_OP_FLOW_LIMIT_SPEND, &b, r);
}

/* A limit's configuration as the reference applies it: a new limit needs
 * a newer config_version; an older one is ignored; the same one with
 * another limit conflicts; shrinking drains available credits in shard
 * order. */
static void cfg_lease(struct tdb *t, uint64_t now, int64_t shard,
                      int64_t amount, int64_t limit, int64_t cv,
                      struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "cfg");
	fb_int(&b, "shard_id", shard);
	fb_int(&b, "amount", amount);
	fb_int(&b, "ttl_ms", 100000);
	fb_int(&b, "limit", limit);
	if (cv >= 0) {
		fb_int(&b, "config_version", cv);
	}
	run(t, now, FSNP_OP_FLOW_LIMIT_LEASE, &b, r);
}

static void limit_config(struct tdb *t)
{
	struct freply r;
	struct fsnp_val o, ls, l;

	cfg_lease(t, 3000, 0, 4, 10, -1, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	cfg_lease(t, 3000, 1, 4, 10, -1, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	cfg_lease(t, 3001, 1, 1, 12, -1, &r);
	fr_err(&r, 1,
	       "ERR flow limit config_version is required to change "
	       "limit");
	freply_free(&r);
	cfg_lease(t, 3001, 1, 1, 10, 0, &r);
	assert_int_equal(r.status, 0); /* the same configuration */
	freply_free(&r);
	cfg_lease(t, 3001, 1, 1, 11, 0, &r);
	fr_err(&r, 1, "ERR flow limit config_version conflict");
	freply_free(&r);
	/* Version 2 shrinks the limit to 6 while 9 are held (shard 0: 4,
	 * shard 1: 5): 3 are drained from shard 0 first (shard order). */
	cfg_lease(t, 3002, 1, 1, 6, 2, &r);
	denied(&r, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	freply_free(&r);
	cfg_lease(t, 3003, 0, 1, 99, 1, &r); /* older: ignored */
	denied(&r, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	freply_free(&r);
	{
		struct fbody b;
		fb_begin(&b);
		fb_str(&b, "scope", "cfg");
		run(t, 3004, FSNP_OP_FLOW_LIMIT_GET, &b, &r);
	}
	o = r.v;
	assert_int_equal(fr_int(&o, "limit"), 6);
	assert_int_equal(fr_int(&o, "config_version"), 2);
	assert_int_equal(fr_int(&o, "free"), 0);
	ls = fr_get(&o, "leases");
	l = fr_get(&ls, "0");
	assert_int_equal(fr_int(&l, "available"), 1);
	assert_int_equal(fr_int(&l, "pending_reclaim"), 1);
	l = fr_get(&ls, "1");
	assert_int_equal(fr_int(&l, "available"), 5);
	assert_int_equal(fr_int(&l, "pending_reclaim"), 1);
	freply_free(&r);
}

static void test_limit(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	struct fsnp_val owner, ids, e;
	struct fsnp_iter it;
	char id0[64], id1[64];

	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_int(&b, "amount", 1);
	fb_int(&b, "ttl_ms", 100);
	run(&t, 1000, FSNP_OP_FLOW_LIMIT_LEASE, &b, &r);
	fr_err(&r, 1, "ERR flow limit limit is required");
	freply_free(&r);
	lease(&t, 1000, 0, 1001, 100, &r);
	fr_err(&r, 1, "ERR flow limit amount must be between 1 and 1000");
	freply_free(&r);
	spend(&t, 1000, 0, 1, &r);
	fr_err(&r, 1, "ERR flow limit not found");
	freply_free(&r);

	lease(&t, 1000, 0, 6, 1000, &r);
	assert_int_equal(r.status, 0);
	owner = fr_get(&r.v, "owner");
	assert_int_equal(fr_int(&owner, "free"), 4);
	assert_int_equal(sub_int(&r.v, "lease", "available"), 6);
	freply_free(&r);
	/* Only 4 left: shard 1 gets 4, then nothing. */
	lease(&t, 1000, 1, 6, 1000, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(sub_int(&r.v, "lease", "available"), 4);
	freply_free(&r);
	lease(&t, 1001, 2, 1, 1000, &r);
	denied(&r, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	assert_int_equal(fr_int(&r.v, "free"), 0);
	assert_int_equal(fr_int(&r.v, "limit"), 10);
	freply_free(&r);
	/* The refused lease marked a credit to reclaim on shard 0 (the
	 * first other lease in shard order). */
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	run(&t, 1001, FSNP_OP_FLOW_LIMIT_GET, &b, &r);
	{
		struct fsnp_val ls = fr_get(&r.v, "leases");
		struct fsnp_val l0 = fr_get(&ls, "0");
		struct fsnp_val l1 = fr_get(&ls, "1");
		assert_int_equal(fr_int(&l0, "pending_reclaim"), 1);
		assert_int_equal(fr_int(&l1, "pending_reclaim"), 0);
		assert_int_equal(fr_get(&l0, "drain_rate").tag, FSNP_F64);
	}
	freply_free(&r);
	/* Spend 2 of shard 0's 6. */
	spend(&t, 1100, 0, 2, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(sub_int(&r.v, "lease", "in_use"), 2);
	assert_int_equal(sub_int(&r.v, "lease", "available"), 4);
	ids = fr_get(&r.v, "reservation_ids");
	assert_int_equal(ids.as.count, 2);
	fsnp_iter_init(&it, &ids);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	snprintf(id0, sizeof id0, "%.*s", (int)e.as.bin.len,
	         (const char *)e.as.bin.ptr);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	snprintf(id1, sizeof id1, "%.*s", (int)e.as.bin.len,
	         (const char *)e.as.bin.ptr);
	assert_string_not_equal(id0, id1);
	freply_free(&r);
	spend(&t, 1100, 0, 5, &r);
	denied(&r, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	freply_free(&r);
	spend(&t, 1100, 3, 1, &r); /* no lease on shard 3 */
	denied(&r, "GOVERNANCE_LIMIT_EXCEEDED", "limit_exhausted");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_int(&b, "amount", 1);
	fb_strs(&b, "reservation_ids", (const char *const[]){"a"}, 1);
	run(&t, 1100, FSNP_OP_FLOW_LIMIT_SPEND, &b, &r);
	fr_err(&r, 1,
	       "ERR flow limit reservation_ids cannot be supplied for spend");
	freply_free(&r);
	/* Release: unique ids, one per credit. */
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_strs(&b, "reservation_ids", (const char *const[]){id0, id0}, 2);
	run(&t, 1200, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	fr_err(&r, 1,
	       "ERR flow limit reservation_ids must contain one unique id per "
	       "credit");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_int(&b, "amount", 1);
	fb_strs(&b, "reservation_ids", (const char *const[]){id0, id1}, 2);
	run(&t, 1200, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	fr_err(&r, 1,
	       "ERR flow limit reservation_ids must contain one unique id per "
	       "credit");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_strs(&b, "reservation_ids", (const char *const[]){id0}, 1);
	run(&t, 1200, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	assert_int_equal(r.status, 0);
	/* As the reference: the credit goes back to the lease. */
	assert_int_equal(fr_int(&r.v, "free"), 0);
	{
		struct fsnp_val ls = fr_get(&r.v, "leases");
		struct fsnp_val l0 = fr_get(&ls, "0");
		assert_int_equal(fr_int(&l0, "available"), 5);
		assert_int_equal(fr_int(&l0, "in_use"), 1);
	}
	freply_free(&r);
	/* Releasing the same id again gives nothing back. */
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_strs(&b, "reservation_ids", (const char *const[]){id0}, 1);
	run(&t, 1201, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	assert_int_equal(fr_int(&r.v, "free"), 0);
	{
		struct fsnp_val ls = fr_get(&r.v, "leases");
		struct fsnp_val l0 = fr_get(&ls, "0");
		assert_int_equal(fr_int(&l0, "available"), 5);
	}
	freply_free(&r);
	/* Leases expire with their credits (in use included). */
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	run(&t, 2000, FSNP_OP_FLOW_LIMIT_GET, &b, &r);
	assert_int_equal(fr_int(&r.v, "free"), 10);
	assert_int_equal(fr_get(&r.v, "leases").as.count, 0);
	freply_free(&r);
	/* An expired lease's credit is no longer released twice. */
	lease(&t, 2000, 0, 10, 1000, &r);
	assert_int_equal(sub_int(&r.v, "owner", "free"), 0);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_strs(&b, "reservation_ids", (const char *const[]){id1}, 1);
	run(&t, 2001, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	assert_int_equal(fr_int(&r.v, "free"), 0);
	freply_free(&r);
	fb_begin(&b);
	run(&t, 2002, FSNP_OP_FLOW_LIMIT_LIST, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	limit_config(&t);
	tdb_close(&t);
}

/* A claimed flow: its lease token and fencing token. */
static void claimed_flow(struct tdb *t, uint64_t now, const char *id,
                         char *lease_tok, int64_t *fencing)
{
	struct fbody b;
	struct freply r;
	struct fsnp_val j;
	struct fsnp_iter it;
	char buf[256];

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "type", "pay");
	run(t, now, FSNP_OP_FLOW_CREATE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "type", "pay");
	fb_str(&b, "worker", "w1");
	fb_int(&b, "lease_ms", 100);
	run(t, now, FSNP_OP_FLOW_CLAIM_DUE, &b, &r);
	assert_int_equal(r.status, 0);
	fsnp_iter_init(&it, &r.v);
	assert_true(fsnp_iter_next(&it, NULL, &j));
	strcpy(lease_tok, fr_str(&j, "lease_token", buf));
	*fencing = fr_int(&j, "fencing_token");
	freply_free(&r);
}

static void effect(struct tdb *t, uint64_t now, uint16_t op, const char *id,
                   const char *key, const char *lease_tok, int64_t fencing,
                   const char *digest, const char *scope, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "effect_key", key);
	if (op == FSNP_OP_FLOW_EFFECT_RESERVE) {
		fb_str(&b, "effect_type", "charge");
		fb_str(&b, "operation_digest", digest);
	}
	if (scope != NULL) {
		fb_str(&b, "governance_scope", scope);
	}
	fb_str(&b, "lease_token", lease_tok);
	fb_int(&b, "fencing_token", fencing);
	run(t, now, op, &b, r);
}

static void ledger_kinds(struct tdb *t, uint64_t now, const char *id,
                         const char *pk, const char *const *kinds, size_t n)
{
	struct fbody b;
	struct freply r;
	struct fsnp_iter it;
	struct fsnp_val e;
	char buf[256];
	size_t i = 0;

	fb_begin(&b);
	fb_str(&b, "id", id);
	if (pk != NULL) {
		fb_str(&b, "partition_key", pk);
	}
	run(t, now, FSNP_OP_FLOW_GOVERNANCE_LEDGER, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_ARRAY);
	if (r.v.as.count != n) {
		fprintf(stderr, "ledger of %s: %u events, want %zu\n", id,
		        r.v.as.count, n);
	}
	assert_int_equal(r.v.as.count, n);
	fsnp_iter_init(&it, &r.v);
	while (fsnp_iter_next(&it, NULL, &e)) {
		assert_string_equal(fr_str(&e, "kind", buf), kinds[i++]);
	}
	freply_free(&r);
}

static void test_effect(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	char lt[128], buf[256];
	int64_t ft;

	(void)state;
	ftdb_open(&t);
	effect(&t, 1000, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", "x", 1, "d1",
	       NULL, &r);
	fr_err(&r, 1, "ERR flow not found");
	freply_free(&r);
	claimed_flow(&t, 1000, "p1", lt, &ft);
	effect(&t, 1001, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", "bad", ft,
	       "d1", NULL, &r);
	fr_err(&r, 1, "ERR flow lease token mismatch");
	freply_free(&r);
	effect(&t, 1001, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", lt, ft + 1,
	       "d1", NULL, &r);
	fr_err(&r, 1, "ERR flow fencing token mismatch");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p1");
	fb_str(&b, "effect_key", "k1");
	run(&t, 1001, FSNP_OP_FLOW_EFFECT_RESERVE, &b, &r);
	fr_err(&r, 6, "ERR native field effect_type must be binary");
	freply_free(&r);

	effect(&t, 1002, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", lt, ft, "d1",
	       NULL, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "reserved");
	assert_string_equal(fr_str(&r.v, "decision", buf), "reserved");
	assert_string_equal(fr_str(&r.v, "type", buf), "pay");
	assert_string_equal(fr_str(&r.v, "effect_type", buf), "charge");
	freply_free(&r);
	effect(&t, 1003, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", lt, ft, "d1",
	       NULL, &r);
	assert_string_equal(fr_str(&r.v, "decision", buf), "already_reserved");
	freply_free(&r);
	effect(&t, 1003, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", lt, ft, "d2",
	       NULL, &r);
	denied(&r, "GOVERNANCE_CONFLICT", "governance_conflict");
	freply_free(&r);
	effect(&t, 1004, FSNP_OP_FLOW_EFFECT_CONFIRM, "p1", "nope", lt, ft,
	       NULL, NULL, &r);
	fr_err(&r, 1, "ERR flow effect not found");
	freply_free(&r);
	effect(&t, 1004, FSNP_OP_FLOW_EFFECT_CONFIRM, "p1", "k1", lt, ft, NULL,
	       NULL, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "confirmed");
	assert_string_equal(fr_str(&r.v, "decision", buf), "confirmed");
	freply_free(&r);
	/* Confirmed twice: applied once. */
	effect(&t, 1005, FSNP_OP_FLOW_EFFECT_CONFIRM, "p1", "k1", lt, ft, NULL,
	       NULL, &r);
	assert_string_equal(fr_str(&r.v, "decision", buf), "already_applied");
	assert_int_equal(fr_int(&r.v, "updated_at_ms"), 1004);
	freply_free(&r);
	effect(&t, 1005, FSNP_OP_FLOW_EFFECT_FAIL, "p1", "k1", lt, ft, NULL,
	       NULL, &r);
	denied(&r, "GOVERNANCE_CONFLICT", "governance_conflict");
	freply_free(&r);
	effect(&t, 1005, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k1", lt, ft, "d1",
	       NULL, &r);
	assert_string_equal(fr_str(&r.v, "decision", buf), "already_applied");
	freply_free(&r);
	/* now_ms older than the effect's update. */
	effect(&t, 1006, FSNP_OP_FLOW_EFFECT_RESERVE, "p1", "k2", lt, ft, "d",
	       NULL, &r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p1");
	fb_str(&b, "effect_key", "k2");
	fb_str(&b, "lease_token", lt);
	fb_int(&b, "fencing_token", ft);
	fb_int(&b, "now_ms", 1000);
	run(&t, 1007, FSNP_OP_FLOW_EFFECT_COMPENSATE, &b, &r);
	fr_err(&r, 1, "ERR flow effect now_ms cannot precede updated_at_ms");
	freply_free(&r);
	/* A later claim (lease expired) fences the old worker out. */
	{
		char lt2[128];
		int64_t ft2;
		struct fsnp_val j;
		struct fsnp_iter it;
		fb_begin(&b);
		fb_str(&b, "type", "pay");
		fb_str(&b, "worker", "w2");
		fb_int(&b, "lease_ms", 100);
		fb_bool(&b, "reclaim_expired", true);
		run(&t, 5000, FSNP_OP_FLOW_RECLAIM, &b, &r);
		assert_int_equal(r.status, 0);
		fsnp_iter_init(&it, &r.v);
		assert_true(fsnp_iter_next(&it, NULL, &j));
		strcpy(lt2, fr_str(&j, "lease_token", buf));
		ft2 = fr_int(&j, "fencing_token");
		assert_true(ft2 > ft);
		freply_free(&r);
		effect(&t, 5001, FSNP_OP_FLOW_EFFECT_COMPENSATE, "p1", "k2", lt,
		       ft, NULL, NULL, &r);
		fr_err(&r, 1, "ERR flow fencing token mismatch");
		freply_free(&r);
		effect(&t, 5001, FSNP_OP_FLOW_EFFECT_COMPENSATE, "p1", "k2",
		       lt2, ft2, NULL, NULL, &r);
		assert_string_equal(fr_str(&r.v, "status", buf), "compensated");
		freply_free(&r);
	}
	fb_begin(&b);
	fb_str(&b, "id", "p1");
	fb_str(&b, "effect_key", "k1");
	run(&t, 5002, FSNP_OP_FLOW_EFFECT_GET, &b, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "confirmed");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "p1");
	fb_str(&b, "effect_key", "zz");
	run(&t, 5002, FSNP_OP_FLOW_EFFECT_GET, &b, &r);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	{
		static const char *const kinds[] = {
		    "effect_reserved", "effect_confirmed", "effect_reserved",
		    "effect_compensated"};
		ledger_kinds(&t, 5003, "p1", NULL, kinds, 4);
	}
	/* rev and limit page the ledger. */
	fb_begin(&b);
	fb_str(&b, "id", "p1");
	fb_bool(&b, "rev", true);
	fb_int(&b, "limit", 1);
	run(&t, 5003, FSNP_OP_FLOW_GOVERNANCE_LEDGER, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	{
		struct fsnp_iter it;
		struct fsnp_val e;
		fsnp_iter_init(&it, &r.v);
		assert_true(fsnp_iter_next(&it, NULL, &e));
		assert_string_equal(fr_str(&e, "kind", buf),
		                    "effect_compensated");
		assert_int_equal(fr_int(&e, "at_ms"), 5001);
	}
	freply_free(&r);
	tdb_close(&t);
}

static void circuit(struct tdb *t, uint64_t now, uint16_t op, int64_t open_ms,
                    struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "effect:charge");
	if (open_ms > 0) {
		fb_int(&b, "open_ms", open_ms);
	}
	run(t, now, op, &b, r);
}

static void test_circuit(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	char lt[128], buf[256];
	int64_t ft;

	(void)state;
	ftdb_open(&t);
	circuit(&t, 1000, FSNP_OP_FLOW_CIRCUIT_GET, 0, &r);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "effect:charge");
	fb_int(&b, "min_calls", 65);
	run(&t, 1000, FSNP_OP_FLOW_CIRCUIT_OPEN, &b, &r);
	fr_err(&r, 1, "ERR flow circuit min_calls must be <= 64");
	freply_free(&r);
	circuit(&t, 1000, FSNP_OP_FLOW_CIRCUIT_OPEN, 500, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "open");
	assert_int_equal(fr_int(&r.v, "opened_at_ms"), 1000);
	assert_int_equal(fr_int(&r.v, "failure_threshold"), 5);
	freply_free(&r);
	claimed_flow(&t, 1000, "c1", lt, &ft);
	effect(&t, 1100, FSNP_OP_FLOW_EFFECT_RESERVE, "c1", "k1", lt, ft, "d",
	       "effect:charge", &r);
	denied(&r, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	assert_int_equal(fr_int(&r.v, "retry_after_ms"), 400);
	freply_free(&r);
	/* The denial is in the ledger; no effect was stored. */
	{
		static const char *const kinds[] = {"circuit_open"};
		ledger_kinds(&t, 1100, "c1", NULL, kinds, 1);
	}
	/* After open_ms: half-open, one probe. */
	circuit(&t, 1500, FSNP_OP_FLOW_CIRCUIT_GET, 0, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "half_open");
	freply_free(&r);
	effect(&t, 1500, FSNP_OP_FLOW_EFFECT_RESERVE, "c1", "k1", lt, ft, "d",
	       "effect:charge", &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	effect(&t, 1501, FSNP_OP_FLOW_EFFECT_RESERVE, "c1", "k2", lt, ft, "d",
	       "effect:charge", &r);
	denied(&r, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	freply_free(&r);
	/* The probe succeeds: closed. */
	effect(&t, 1502, FSNP_OP_FLOW_EFFECT_CONFIRM, "c1", "k1", lt, ft, NULL,
	       NULL, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	circuit(&t, 1503, FSNP_OP_FLOW_CIRCUIT_GET, 0, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "closed");
	freply_free(&r);
	/* Five failures open it again. */
	for (int i = 0; i < 5; i++) {
		char key[16];
		snprintf(key, sizeof key, "f%d", i);
		effect(&t, 1600 + (uint64_t)i, FSNP_OP_FLOW_EFFECT_RESERVE,
		       "c1", key, lt, ft, "d", "effect:charge", &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
		effect(&t, 1600 + (uint64_t)i, FSNP_OP_FLOW_EFFECT_FAIL, "c1",
		       key, lt, ft, NULL, NULL, &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
	}
	circuit(&t, 1700, FSNP_OP_FLOW_CIRCUIT_GET, 0, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "open");
	assert_int_equal(fr_int(&r.v, "failures"), 5);
	freply_free(&r);
	circuit(&t, 1701, FSNP_OP_FLOW_CIRCUIT_CLOSE, 0, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "closed");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "effect:charge");
	fb_int(&b, "now_ms", 1000);
	run(&t, 1702, FSNP_OP_FLOW_CIRCUIT_OPEN, &b, &r);
	fr_err(&r, 1, "ERR flow circuit now_ms cannot precede updated_at_ms");
	freply_free(&r);
	{
		static const char *const kinds[] = {
		    "circuit_opened", "circuit_closed", "circuit_opened",
		    "circuit_closed"};
		ledger_kinds(&t, 1703, "effect:charge", "effect:charge", kinds,
		             4);
	}
	tdb_close(&t);
}

static void approval(struct tdb *t, uint64_t now, const char *id,
                     int64_t timeout, struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "flow_id", "f1");
	fb_str(&b, "scope", "partition:tenant-a");
	fb_str(&b, "requested_by", "bot");
	fb_strs(&b, "assignees", (const char *const[]){"ann", "bob"}, 2);
	if (timeout > 0) {
		fb_int(&b, "timeout_ms", timeout);
	}
	run(t, now, FSNP_OP_FLOW_APPROVAL_REQUEST, &b, r);
}

static void decide(struct tdb *t, uint64_t now, const char *id, bool approve,
                   struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "id", id);
	fb_str(&b, "approver", "ann");
	fb_str(&b, "reason", "ok");
	run(t, now,
	    approve ? FSNP_OP_FLOW_APPROVAL_APPROVE
	            : FSNP_OP_FLOW_APPROVAL_REJECT,
	    &b, r);
}

static void test_approval(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	char buf[256];

	(void)state;
	ftdb_open(&t);
	approval(&t, 1000, "a1", 0, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "pending");
	assert_int_equal(fr_int(&r.v, "requested_at_ms"), 1000);
	assert_true(fr_is_nil(&r.v, "expires_at_ms"));
	freply_free(&r);
	approval(&t, 1000, "a1", 0, &r);
	denied(&r, "GOVERNANCE_CONFLICT", "governance_conflict");
	assert_string_equal(fr_str(&r.v, "message", buf),
	                    "Approval already exists");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a9");
	fb_str(&b, "flow_id", "f1");
	fb_str(&b, "scope", "s");
	fb_int(&b, "expires_at_ms", 900);
	run(&t, 1000, FSNP_OP_FLOW_APPROVAL_REQUEST, &b, &r);
	fr_err(&r, 1,
	       "ERR flow approval expires_at_ms must be greater than now_ms");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a9");
	fb_str(&b, "flow_id", "f1");
	fb_str(&b, "scope", "s");
	fb_strs(&b, "assignees", (const char *const[]){"x", "x"}, 2);
	run(&t, 1000, FSNP_OP_FLOW_APPROVAL_REQUEST, &b, &r);
	fr_err(&r, 1, "ERR flow approval assignees must be unique");
	freply_free(&r);
	decide(&t, 1000, "nope", true, &r);
	fr_err(&r, 1, "ERR flow approval not found");
	freply_free(&r);
	decide(&t, 1100, "a1", true, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "approved");
	assert_string_equal(fr_str(&r.v, "decided_by", buf), "ann");
	assert_int_equal(fr_int(&r.v, "decided_at_ms"), 1100);
	freply_free(&r);
	decide(&t, 1200, "a1", false, &r);
	denied(&r, "GOVERNANCE_CONFLICT", "governance_conflict");
	freply_free(&r);
	/* Expiry: a late decision stores expired and is refused. */
	approval(&t, 2000, "a2", 100, &r);
	assert_int_equal(fr_int(&r.v, "expires_at_ms"), 2100);
	freply_free(&r);
	decide(&t, 2100, "a2", true, &r);
	denied(&r, "GOVERNANCE_CONFLICT", "governance_conflict");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a2");
	run(&t, 2101, FSNP_OP_FLOW_APPROVAL_GET, &b, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "expired");
	freply_free(&r);
	approval(&t, 3000, "a3", 0, &r);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a3");
	fb_str(&b, "approver", "bob");
	fb_int(&b, "now_ms", 2000);
	run(&t, 3000, FSNP_OP_FLOW_APPROVAL_REJECT, &b, &r);
	fr_err(&r, 1,
	       "ERR flow approval now_ms cannot precede requested_at_ms");
	freply_free(&r);
	decide(&t, 3001, "a3", false, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "rejected");
	freply_free(&r);
	approval(&t, 3002, "a4", 0, &r);
	freply_free(&r);
	/* Listing and the overview. */
	fb_begin(&b);
	fb_str(&b, "status", "pending");
	run(&t, 3003, FSNP_OP_FLOW_APPROVAL_LIST, &b, &r);
	assert_int_equal(r.v.as.count, 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "partition_key", "tenant-a");
	run(&t, 3003, FSNP_OP_FLOW_APPROVAL_LIST, &b, &r);
	assert_int_equal(r.v.as.count, 4);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "status", "maybe");
	run(&t, 3003, FSNP_OP_FLOW_APPROVAL_LIST, &b, &r);
	fr_err(&r, 1,
	       "ERR flow approval status must be pending, approved, rejected, "
	       "or expired");
	freply_free(&r);
	fb_begin(&b);
	fb_int(&b, "limit", 2);
	run(&t, 3003, FSNP_OP_FLOW_GOVERNANCE_OVERVIEW, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_get(&r.v, "approvals").as.count, 2);
	assert_int_equal(sub_int(&r.v, "counts", "approvals"), 4);
	assert_int_equal(sub_int(&r.v, "counts", "pending_approvals"), 1);
	freply_free(&r);
	{
		static const char *const kinds[] = {"approval_required",
		                                    "approval_expired"};
		ledger_kinds(&t, 3004, "a2", NULL, kinds, 2);
	}
	tdb_close(&t);
}

/* Seeded model test: random budget and limit commands against a simple
 * model of used, open reservations, free credits and in-use credits. */
struct mres {
	int64_t amount;
	int state; /* 0 none, 1 reserved, 2 settled */
	uint64_t window;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_model(void **state)
{
	struct tdb t;
	struct freply r;
	struct fbody b;
	struct mres res[32] = {{0, 0, 0}};
	uint64_t s = 0x5eedULL, now = 10000, window = 0; /* 0: no budget yet */
	int64_t used = 0, free_c = 10, avail = 0;
	char held[64][32];
	int nheld = 0;
	bool have_lease = false;
	uint64_t lease_until = 0;

	(void)state;
	ftdb_open(&t);
	for (int step = 0; step < 600; step++) {
		uint64_t op = rnd(&s) % 6;
		int i = (int)(rnd(&s) % 32);
		char rid[16];
		now += rnd(&s) % 40;
		/* The budget starts a new window on its next command. */
		bool sends = (op == 0 && res[i].state == 0) ||
		             ((op == 1 || op == 2) && res[i].state == 1);
		if (sends && (window == 0 || now - window >= 1000)) {
			window = now;
			used = 0;
		}
		snprintf(rid, sizeof rid, "r%d", i);
		if (op == 0 && res[i].state == 0) {
			int64_t amt = (int64_t)(rnd(&s) % 30) + 1;
			reserve(&t, now, "m", amt, rid, &r);
			if (used + amt > 100) {
				denied(&r, "GOVERNANCE_BUDGET_EXHAUSTED",
				       "budget_exhausted");
			} else {
				assert_int_equal(r.status, 0);
				used += amt;
				res[i] = (struct mres){amt, 1, window};
			}
			freply_free(&r);
		} else if ((op == 1 || op == 2) && res[i].state == 1) {
			int64_t actual = op == 1 ? (int64_t)(rnd(&s) % 40) : -1;
			settle(&t, now, "m", rid, actual, &r);
			assert_int_equal(r.status, 0);
			if (res[i].window == window) {
				used +=
				    (actual >= 0 ? actual : 0) - res[i].amount;
				if (used < 0) {
					used = 0;
				}
			}
			res[i].state = 2;
			freply_free(&r);
		} else if (op == 3) {
			int64_t amt = (int64_t)(rnd(&s) % 4) + 1;
			if (have_lease && now >= lease_until) {
				free_c += avail + nheld;
				avail = 0;
				nheld = 0;
				have_lease = false;
			}
			lease(&t, now, 0, amt, 300, &r);
			if (free_c == 0) {
				denied(&r, "GOVERNANCE_LIMIT_EXCEEDED",
				       "limit_exhausted");
			} else {
				int64_t g = amt < free_c ? amt : free_c;
				assert_int_equal(r.status, 0);
				free_c -= g;
				avail += g;
				have_lease = true;
				lease_until = now + 300;
			}
			freply_free(&r);
		} else if (op == 4) {
			if (have_lease && now >= lease_until) {
				free_c += avail + nheld;
				avail = 0;
				nheld = 0;
				have_lease = false;
			}
			spend(&t, now, 0, 1, &r);
			if (!have_lease && free_c == 10 && step < 5) {
				fr_err(&r, 1, "ERR flow limit not found");
			} else if (r.status == 0) {
				struct fsnp_val ids =
				    fr_get(&r.v, "reservation_ids");
				struct fsnp_iter it;
				struct fsnp_val e;
				assert_true(have_lease && avail >= 1);
				fsnp_iter_init(&it, &ids);
				assert_true(fsnp_iter_next(&it, NULL, &e));
				if (nheld < 64) {
					snprintf(held[nheld++], 32, "%.*s",
					         (int)e.as.bin.len,
					         (const char *)e.as.bin.ptr);
				}
				avail--;
			} else {
				assert_false(have_lease && avail >= 1);
			}
			freply_free(&r);
		} else if (op == 5 && nheld > 0) {
			if (have_lease && now >= lease_until) {
				free_c += avail + nheld;
				avail = 0;
				nheld = 0;
				have_lease = false;
				continue;
			}
			fb_begin(&b);
			fb_str(&b, "scope", "api");
			fb_int(&b, "shard_id", 0);
			fb_strs(&b, "reservation_ids",
			        (const char *const[]){held[nheld - 1]}, 1);
			run(&t, now, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
			assert_int_equal(r.status, 0);
			nheld--;
			avail++; /* back to the lease (reference) */
			assert_int_equal(fr_int(&r.v, "free"), free_c);
			freply_free(&r);
		}
		if (window != 0 && now - window < 1000) {
			assert_int_equal(budget_used(&t, now, "m"), used);
		}
		assert_true(used <= 100);
	}
	tdb_close(&t);
}

/* Body errors: positional fields (status 6), options (status 1), and the
 * allow-list checked first. */
static void test_bodies(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;

	(void)state;
	ftdb_open(&t);
	fb_begin(&b);
	fb_str(&b, "amount", "3");
	fb_str(&b, "scope", "s");
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 6, "ERR native field amount must be a positive integer");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "bogus", "x");
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 6, "ERR native unknown flow option bogus");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "");
	fb_int(&b, "amount", 1);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1, "ERR flow scope must be a non-empty string");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "s");
	fb_int(&b, "amount", 1);
	fb_str(&b, "window_ms", "soon");
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1, "ERR flow window_ms must be a non-negative integer");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "s");
	fb_int(&b, "amount", 1);
	fb_int(&b, "limit", 5);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1, "ERR flow budget window_ms is required");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "s");
	fb_int(&b, "amount", 1);
	fb_int(&b, "limit", 5);
	fb_int(&b, "window_ms", 100);
	fb_str(
	    &b, "reservation_id",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "x");
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	fr_err(&r, 1,
	       "ERR flow budget reservation_id too large (max 256 bytes)");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "s");
	fb_int(&b, "shard_id", 5000);
	fb_int(&b, "amount", 1);
	fb_int(&b, "ttl_ms", 10);
	fb_int(&b, "limit", 1);
	run(&t, 1000, FSNP_OP_FLOW_LIMIT_LEASE, &b, &r);
	fr_err(&r, 1, "ERR flow limit shard_id must be below 1024");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "s");
	fb_int(&b, "shard_id", 0);
	fb_str(&b, "reservation_ids", "x");
	run(&t, 1000, FSNP_OP_FLOW_LIMIT_RELEASE, &b, &r);
	fr_err(&r, 6, "ERR native field reservation_ids must be a binary list");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a");
	fb_str(&b, "flow_id", "f");
	fb_str(&b, "scope", "s");
	fb_int(&b, "timeout_ms", 0);
	run(&t, 1000, FSNP_OP_FLOW_APPROVAL_REQUEST, &b, &r);
	fr_err(&r, 1,
	       "ERR flow approval timeout_ms must be a positive integer");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "a");
	run(&t, 1000, FSNP_OP_FLOW_APPROVAL_APPROVE, &b, &r);
	fr_err(&r, 6, "ERR native field approver must be binary");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "f");
	fb_str(&b, "effect_key", "k");
	fb_str(&b, "lease_token", "t");
	run(&t, 1000, FSNP_OP_FLOW_EFFECT_CONFIRM, &b, &r);
	fr_err(&r, 6,
	       "ERR native field fencing_token must be a non-negative integer");
	freply_free(&r);
	/* Options may come in `opts`; the top level wins. */
	fb_begin(&b);
	fb_str(&b, "scope", "o");
	fb_key(&b, "opts");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "amount");
	fsnp_w_i64(&b.w, 2);
	fsnp_w_key(&b.w, "scope");
	fsnp_w_str(&b.w, "ignored");
	fsnp_w_key(&b.w, "limit");
	fsnp_w_i64(&b.w, 5);
	fsnp_w_key(&b.w, "window_ms");
	fsnp_w_i64(&b.w, 100);
	fsnp_w_map_end(&b.w);
	run(&t, 1000, FSNP_OP_FLOW_BUDGET_RESERVE, &b, &r);
	assert_int_equal(r.status, 0);
	{
		char buf[256];
		assert_string_equal(fr_str(&r.v, "scope", buf), "o");
		assert_int_equal(fr_int(&r.v, "used"), 2);
	}
	freply_free(&r);
	tdb_close(&t);
}

/* Seeded model test of effects and approvals: random reserves and
 * settlements of a few effect keys, random decisions of approvals at
 * random times, against a model of their states. */
static void test_model_effects_approvals(void **state)
{
	struct tdb t;
	struct freply r;
	char lt[128], buf[256];
	int64_t ft;
	int eff[6] = {
	    0}; /* 0 none, 1 reserved, 2 confirmed, 3 failed, 4 comp */
	int64_t digest[6] = {0};
	int appr[6] = {
	    0}; /* 0 none, 1 pending, 2 approved, 3 rejected, 4 exp */
	int64_t expires[6] = {0};
	static const char *const st[] = {"", "reserved", "confirmed", "failed",
	                                 "compensated"};
	static const uint16_t ops[] = {0, FSNP_OP_FLOW_EFFECT_CONFIRM,
	                               FSNP_OP_FLOW_EFFECT_FAIL,
	                               FSNP_OP_FLOW_EFFECT_COMPENSATE};
	static const char *const ast[] = {"", "pending", "approved", "rejected",
	                                  "expired"};
	uint64_t s = 0xabcdefULL, now = 1000;
	int events = 0;

	(void)state;
	ftdb_open(&t);
	claimed_flow(&t, now, "m1", lt, &ft);
	for (int step = 0; step < 400; step++) {
		int k = (int)(rnd(&s) % 6);
		uint64_t op = rnd(&s) % 4;
		char key[16], dg[16], id[16];
		now += rnd(&s) % 20;
		snprintf(key, sizeof key, "k%d", k);
		snprintf(id, sizeof id, "a%d", k);
		if (rnd(&s) % 2 == 0) {
			/* effects */
			if (op == 0) {
				int64_t d = (int64_t)(rnd(&s) % 2);
				snprintf(dg, sizeof dg, "d%lld", (long long)d);
				effect(&t, now, FSNP_OP_FLOW_EFFECT_RESERVE,
				       "m1", key, lt, ft, dg, NULL, &r);
				if (eff[k] == 0) {
					assert_int_equal(r.status, 0);
					eff[k] = 1;
					digest[k] = d;
					events++;
				} else if (digest[k] != d) {
					denied(&r, "GOVERNANCE_CONFLICT",
					       "governance_conflict");
				} else {
					assert_string_equal(
					    fr_str(&r.v, "decision", buf),
					    eff[k] == 1 ? "already_reserved"
					                : "already_applied");
				}
			} else {
				effect(&t, now, ops[op], "m1", key, lt, ft,
				       NULL, NULL, &r);
				if (eff[k] == 0) {
					fr_err(&r, 1,
					       "ERR flow effect not found");
				} else if (eff[k] == 1) {
					assert_int_equal(r.status, 0);
					eff[k] = (int)op + 1;
					events++;
				} else if (eff[k] == (int)op + 1) {
					assert_string_equal(
					    fr_str(&r.v, "decision", buf),
					    "already_applied");
				} else {
					denied(&r, "GOVERNANCE_CONFLICT",
					       "governance_conflict");
				}
			}
			if (r.status == 0) {
				assert_string_equal(fr_str(&r.v, "status", buf),
				                    st[eff[k]]);
			}
			freply_free(&r);
			continue;
		}
		/* approvals */
		if (op == 0) {
			int64_t to = (int64_t)(rnd(&s) % 100) + 1;
			approval(&t, now, id, to, &r);
			if (appr[k] == 0) {
				assert_int_equal(r.status, 0);
				appr[k] = 1;
				expires[k] = (int64_t)now + to;
			} else {
				denied(&r, "GOVERNANCE_CONFLICT",
				       "governance_conflict");
			}
		} else {
			bool yes = op == 1;
			decide(&t, now, id, yes, &r);
			if (appr[k] == 0) {
				fr_err(&r, 1, "ERR flow approval not found");
			} else if (appr[k] != 1) {
				denied(&r, "GOVERNANCE_CONFLICT",
				       "governance_conflict");
			} else if ((int64_t)now >= expires[k]) {
				denied(&r, "GOVERNANCE_CONFLICT",
				       "governance_conflict");
				appr[k] = 4;
			} else {
				assert_int_equal(r.status, 0);
				appr[k] = yes ? 2 : 3;
			}
		}
		freply_free(&r);
		{
			struct fbody b;
			fb_begin(&b);
			fb_str(&b, "id", id);
			run(&t, now, FSNP_OP_FLOW_APPROVAL_GET, &b, &r);
			if (appr[k] == 0) {
				assert_int_equal(r.v.tag, FSNP_NIL);
			} else {
				int want =
				    appr[k] == 1 && (int64_t)now >= expires[k]
				        ? 4
				        : appr[k];
				assert_string_equal(fr_str(&r.v, "status", buf),
				                    ast[want]);
			}
			freply_free(&r);
		}
	}
	/* The flow's ledger has one event per effect decision. */
	{
		struct fbody b;
		fb_begin(&b);
		fb_str(&b, "id", "m1");
		fb_int(&b, "limit", 1000);
		run(&t, now, FSNP_OP_FLOW_GOVERNANCE_LEDGER, &b, &r);
		assert_int_equal(r.v.as.count, events);
		freply_free(&r);
	}
	tdb_close(&t);
}

/* RETENTION_CLEANUP deletes a flow's effects and ledger with it (as the
 * reference's cleanup does); another flow's stay. */
static void test_retention_drops_governance(void **state)
{
	static const char *const one[] = {"effect_reserved"};
	struct tdb t;
	struct fbody b;
	struct freply r;
	char lt[128], lt2[128];
	int64_t ft, ft2;

	(void)state;
	ftdb_open(&t);
	claimed_flow(&t, 1000, "gone", lt, &ft);
	effect(&t, 1001, FSNP_OP_FLOW_EFFECT_RESERVE, "gone", "k1", lt, ft,
	       "d1", NULL, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	effect(&t, 1002, FSNP_OP_FLOW_EFFECT_CONFIRM, "gone", "k1", lt, ft,
	       NULL, NULL, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	claimed_flow(&t, 1003, "kept", lt2, &ft2);
	effect(&t, 1004, FSNP_OP_FLOW_EFFECT_RESERVE, "kept", "k1", lt2, ft2,
	       "d1", NULL, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "gone");
	fb_str(&b, "lease_token", lt);
	fb_int(&b, "fencing_token", ft);
	fb_int(&b, "ttl_ms", 10);
	run(&t, 1005, FSNP_OP_FLOW_COMPLETE, &b, &r);
	fr_ok(&r);
	freply_free(&r);
	fb_begin(&b);
	run(&t, 5000, FSNP_OP_FLOW_RETENTION_CLEANUP, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(fr_int(&r.v, "flows"), 1);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "gone");
	fb_str(&b, "effect_key", "k1");
	run(&t, 5001, FSNP_OP_FLOW_EFFECT_GET, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	ledger_kinds(&t, 5001, "gone", NULL, NULL, 0);
	fb_begin(&b);
	fb_str(&b, "id", "kept");
	fb_str(&b, "effect_key", "k1");
	run(&t, 5001, FSNP_OP_FLOW_EFFECT_GET, &b, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_MAP);
	freply_free(&r);
	ledger_kinds(&t, 5001, "kept", NULL, one, 1);
	tdb_close(&t);
}

static void count(struct tdb *t, uint64_t now, const char *kind,
                  struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "effect:charge");
	fb_str(&b, "kind", kind);
	run(t, now, FLOW_GOV_OP_CIRCUIT_COUNT, &b, r);
}

/* The internal CIRCUIT.COUNT a reservation or settlement in another
 * group sends: admit counts a half-open probe or refuses, unadmit gives
 * it back, success / failure are outcomes. */
static void test_circuit_count(void **state)
{
	struct tdb t;
	struct freply r;
	char buf[64];

	(void)state;
	ftdb_open(&t);
	count(&t, 1000, "admit", &r); /* no circuit: admitted, nil */
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	count(&t, 1000, "sideways", &r);
	fr_err(&r, 1,
	       "ERR flow circuit count kind must be admit, unadmit, success "
	       "or failure");
	freply_free(&r);
	circuit(&t, 1000, FSNP_OP_FLOW_CIRCUIT_OPEN, 100, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	count(&t, 1050, "admit", &r);
	denied(&r, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	assert_int_equal(fr_int(&r.v, "retry_after_ms"), 50);
	freply_free(&r);
	count(&t, 1100, "admit", &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "half_open");
	assert_int_equal(fr_int(&r.v, "half_open_in_flight"), 1);
	freply_free(&r);
	count(&t, 1101, "admit", &r); /* the one probe is out */
	denied(&r, "GOVERNANCE_CIRCUIT_OPEN", "circuit_open");
	freply_free(&r);
	count(&t, 1102, "unadmit", &r);
	assert_int_equal(fr_int(&r.v, "half_open_in_flight"), 0);
	freply_free(&r);
	count(&t, 1103, "admit", &r);
	assert_int_equal(fr_int(&r.v, "half_open_in_flight"), 1);
	freply_free(&r);
	count(&t, 1104, "success", &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "closed");
	freply_free(&r);
	/* Closed: admitted without a probe; failures open it. */
	count(&t, 1105, "admit", &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "closed");
	assert_int_equal(fr_int(&r.v, "half_open_in_flight"), 0);
	freply_free(&r);
	for (int i = 0; i < 5; i++) {
		count(&t, 1106 + (uint64_t)i, "failure", &r);
		assert_int_equal(r.status, 0);
		freply_free(&r);
	}
	circuit(&t, 1200, FSNP_OP_FLOW_CIRCUIT_GET, 0, &r);
	assert_string_equal(fr_str(&r.v, "status", buf), "open");
	freply_free(&r);
	tdb_close(&t);
}

static void renew(struct tdb *t, uint64_t now, const char *id, int64_t fen,
                  struct freply *r)
{
	struct fbody b;

	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_str(&b, "id", id);
	fb_int(&b, "fencing_token", fen);
	fb_int(&b, "ttl_ms", 5000);
	run(t, now, FLOW_GOV_OP_LIMIT_RENEW, &b, r);
}

/* The internal LIMIT.CLAIM / LIMIT.RETURN / LIMIT.RENEW of claim
 * admission: a claimed
 * flow keeps its credit until returned (once), unused credits go back at
 * once, and a credit of an expired lease is not returned. */
static void test_limit_claim_return(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	struct fsnp_val ids, e, ls, l0;
	struct fsnp_iter it;
	char rid[2][64];
	const char *items_id[] = {"f1"};

	(void)state;
	ftdb_open(&t);
	lease(&t, 1000, 0, 3, 1000, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	spend(&t, 1001, 0, 2, &r);
	assert_int_equal(r.status, 0);
	ids = fr_get(&r.v, "reservation_ids");
	fsnp_iter_init(&it, &ids);
	for (int i = 0; i < 2; i++) {
		assert_true(fsnp_iter_next(&it, NULL, &e));
		snprintf(rid[i], sizeof rid[i], "%.*s", (int)e.as.bin.len,
		         (const char *)e.as.bin.ptr);
	}
	freply_free(&r);
	/* f1 got rid[0]; rid[1] was not used. */
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "id");
	fsnp_w_str(&b.w, items_id[0]);
	fsnp_w_key(&b.w, "reservation_id");
	fsnp_w_str(&b.w, rid[0]);
	fsnp_w_key(&b.w, "fencing_token");
	fsnp_w_i64(&b.w, 7);
	fsnp_w_map_end(&b.w);
	fsnp_w_array_end(&b.w);
	fb_strs(&b, "reservation_ids", (const char *const[]){rid[1]}, 1);
	run(&t, 1002, FLOW_GOV_OP_LIMIT_CLAIM, &b, &r);
	assert_int_equal(r.status, 0);
	ls = fr_get(&r.v, "leases");
	l0 = fr_get(&ls, "0");
	assert_int_equal(fr_int(&l0, "in_use"), 1);
	assert_int_equal(fr_int(&l0, "available"), 2);
	freply_free(&r);
	/* LIMIT.RENEW: only the claim holding the credit (its fencing
	 * token) renews the lease; a flow holding none renews nothing. */
	renew(&t, 1003, "f1", 6, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	renew(&t, 1003, "f9", 7, &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.v.tag, FSNP_NIL);
	freply_free(&r);
	renew(&t, 1004, "f1", 7, &r);
	assert_int_equal(r.status, 0);
	l0 = fr_get(&r.v, "lease");
	assert_int_equal(fr_int(&l0, "expires_at_ms"), 1004 + 5000);
	freply_free(&r);
	for (int k = 0; k < 2; k++) {
		fb_begin(&b);
		fb_str(&b, "scope", "api");
		fb_int(&b, "shard_id", 0);
		fb_str(&b, "id", "f1");
		run(&t, 1005 + (uint64_t)k, FLOW_GOV_OP_LIMIT_RETURN, &b, &r);
		assert_int_equal(r.status, 0);
		if (k == 0) {
			ls = fr_get(&r.v, "leases");
			l0 = fr_get(&ls, "0");
			assert_int_equal(fr_int(&l0, "in_use"), 0);
			assert_int_equal(fr_int(&l0, "available"), 3);
		} else {
			assert_int_equal(r.v.tag, FSNP_NIL); /* held nothing */
		}
		freply_free(&r);
	}
	/* A batch's return: each listed flow's credit once. */
	spend(&t, 1010, 0, 2, &r);
	assert_int_equal(r.status, 0);
	ids = fr_get(&r.v, "reservation_ids");
	fsnp_iter_init(&it, &ids);
	for (int i = 0; i < 2; i++) {
		assert_true(fsnp_iter_next(&it, NULL, &e));
		snprintf(rid[i], sizeof rid[i], "%.*s", (int)e.as.bin.len,
		         (const char *)e.as.bin.ptr);
	}
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	for (int i = 0; i < 2; i++) {
		fsnp_w_map_begin(&b.w);
		fsnp_w_key(&b.w, "id");
		fsnp_w_str(&b.w, i == 0 ? "f2" : "f3");
		fsnp_w_key(&b.w, "reservation_id");
		fsnp_w_str(&b.w, rid[i]);
		fsnp_w_key(&b.w, "fencing_token");
		fsnp_w_i64(&b.w, 1);
		fsnp_w_map_end(&b.w);
	}
	fsnp_w_array_end(&b.w);
	run(&t, 1011, FLOW_GOV_OP_LIMIT_CLAIM, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	for (int k = 0; k < 2; k++) {
		fb_begin(&b);
		fb_str(&b, "scope", "api");
		fb_int(&b, "shard_id", 0);
		fb_key(&b, "items");
		fsnp_w_array_begin(&b.w);
		for (int i = 0; i < 3; i++) {
			fsnp_w_map_begin(&b.w);
			fsnp_w_key(&b.w, "id");
			fsnp_w_str(&b.w, i == 0 ? "f2" : i == 1 ? "f3" : "f4");
			fsnp_w_map_end(&b.w);
		}
		fsnp_w_array_end(&b.w);
		run(&t, 1012 + (uint64_t)k, FLOW_GOV_OP_LIMIT_RETURN, &b, &r);
		assert_int_equal(r.status, 0);
		if (k == 0) {
			ls = fr_get(&r.v, "leases");
			l0 = fr_get(&ls, "0");
			assert_int_equal(fr_int(&l0, "in_use"), 0);
			assert_int_equal(fr_int(&l0, "available"), 3);
		} else {
			assert_int_equal(r.v.tag, FSNP_NIL);
		}
		freply_free(&r);
	}
	/* A credit whose lease was dropped: not renewed, the extension is
	 * refused. */
	spend(&t, 1020, 0, 1, &r);
	assert_int_equal(r.status, 0);
	ids = fr_get(&r.v, "reservation_ids");
	fsnp_iter_init(&it, &ids);
	assert_true(fsnp_iter_next(&it, NULL, &e));
	snprintf(rid[0], sizeof rid[0], "%.*s", (int)e.as.bin.len,
	         (const char *)e.as.bin.ptr);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "scope", "api");
	fb_int(&b, "shard_id", 0);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "id");
	fsnp_w_str(&b.w, "f5");
	fsnp_w_key(&b.w, "reservation_id");
	fsnp_w_str(&b.w, rid[0]);
	fsnp_w_key(&b.w, "fencing_token");
	fsnp_w_i64(&b.w, 3);
	fsnp_w_map_end(&b.w);
	fsnp_w_array_end(&b.w);
	run(&t, 1021, FLOW_GOV_OP_LIMIT_CLAIM, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	renew(&t, 7000, "f5", 3, &r);
	fr_err(&r, 1, "ERR flow limit lease expired");
	freply_free(&r);
	tdb_close(&t);
}

/* An approval whose flow is in the same group wakes it in the decision's
 * apply: APPROVE moves it from wait_state to transition_to (due now); a
 * flow no longer waiting is left alone. */
static void test_approval_wake_here(void **state)
{
	struct tdb t;
	struct fbody b;
	struct freply r;
	char lt[128], buf[64];
	int64_t ft;

	(void)state;
	ftdb_open(&t);
	claimed_flow(&t, 1000, "wf", lt, &ft);
	fb_begin(&b);
	fb_str(&b, "id", "wf");
	fb_str(&b, "from_state", "running");
	fb_str(&b, "to_state", "waiting");
	fb_str(&b, "lease_token", lt);
	fb_int(&b, "fencing_token", ft);
	fb_int(&b, "run_at_ms", 999999);
	run(&t, 1001, FSNP_OP_FLOW_TRANSITION, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "ap");
	fb_str(&b, "flow_id", "wf");
	fb_str(&b, "scope", "s");
	fb_str(&b, "wait_state", "waiting");
	fb_str(&b, "transition_to", "go");
	run(&t, 1002, FSNP_OP_FLOW_APPROVAL_REQUEST, &b, &r);
	assert_int_equal(r.status, 0);
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "ap");
	fb_str(&b, "approver", "ann");
	run(&t, 1003, FSNP_OP_FLOW_APPROVAL_APPROVE, &b, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "status", buf), "approved");
	freply_free(&r);
	fb_begin(&b);
	fb_str(&b, "id", "wf");
	run(&t, 1004, FSNP_OP_FLOW_GET, &b, &r);
	assert_int_equal(r.status, 0);
	assert_string_equal(fr_str(&r.v, "state", buf), "go");
	assert_int_equal(fr_int(&r.v, "next_run_at_ms"), 1003);
	freply_free(&r);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_budget_settled_cap),
	    cmocka_unit_test(test_limit),
	    cmocka_unit_test(test_effect),
	    cmocka_unit_test(test_circuit),
	    cmocka_unit_test(test_approval),
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_bodies),
	    cmocka_unit_test(test_model_effects_approvals),
	    cmocka_unit_test(test_retention_drops_governance),
	    cmocka_unit_test(test_circuit_count),
	    cmocka_unit_test(test_limit_claim_return),
	    cmocka_unit_test(test_approval_wake_here),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
