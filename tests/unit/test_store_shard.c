/* store/shard: the apply framework (applied index, idempotent replay,
 * per-command atomicity, bad commands), reads, the fsm glue, determinism
 * and export / import of a group. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

static struct store_cmd append_cmd(const char *scope,
                                   const struct store_slice *items, uint32_t n)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_STREAM_APPEND;
	c.scope = S(scope);
	c.items.n = n;
	c.items.v = items;
	return c;
}

static struct store_cmd set_cmd(const char *key, const char *value)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_SET;
	c.key = S(key);
	c.value = S(value);
	return c;
}

static void free_results(struct fsm_result *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		free(r[i].data);
	}
	free(r);
}

static void test_applied_index_and_replay(void **state)
{
	struct tdb t;
	struct store_slice items[2] = {S("a"), S("b")};
	struct store_cmd c = append_cmd("t/n/s", items, 2);
	struct fsm_cmd fc;
	struct fsm_entry e;
	struct fsm_result r[1];
	struct store_stream_info info;
	uint64_t idx, h;
	size_t len;

	tdb_open(&t);
	assert_int_equal(store_applied_index(t.s, 1, &idx), 0);
	assert_int_equal(idx, 0);
	fc.data = tcmd_encode(&c, &len);
	fc.len = len;
	e = (struct fsm_entry){1, 5, 2, 1000, 1, &fc};
	memset(r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, r), 0);
	assert_non_null(r[0].data);
	free(r[0].data);
	assert_int_equal(store_applied_index(t.s, 1, &idx), 0);
	assert_int_equal(idx, 5);
	h = tdb_hash_group(&t, 1);

	/* The same entry again, and an older one: nothing changes, empty
	 * results. */
	for (uint64_t i = 4; i <= 5; i++) {
		e.index = i;
		memset(r, 0, sizeof r);
		assert_int_equal(store_apply(t.s, &e, r), 0);
		assert_null(r[0].data);
		assert_int_equal(r[0].len, 0);
	}
	assert_int_equal(tdb_hash_group(&t, 1), h);
	assert_int_equal(store_stream_info(t.s, 1, S("t/n/s"), 0, &info), 0);
	assert_int_equal(info.tail, 2);

	/* Other groups have their own index. */
	assert_int_equal(store_applied_index(t.s, 2, &idx), 0);
	assert_int_equal(idx, 0);
	e.group = 2;
	e.index = 1;
	memset(r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, r), 0);
	assert_non_null(r[0].data);
	free(r[0].data);
	assert_int_equal(store_applied_index(t.s, 2, &idx), 0);
	assert_int_equal(idx, 1);
	free((void *)fc.data);
	tdb_close(&t);
}

/* A group written in another storage format is refused with a message
 * that says so, never misread. */
static void test_other_format_refused(void **state)
{
	struct tdb t;
	struct store_slice items[1] = {S("a")};
	struct store_cmd c = append_cmd("t/n/s", items, 1);
	uint8_t key[5] = {0, 0, 0, 1, 0x01}, val[20] = {0};
	uint64_t idx;
	uint8_t *res;
	size_t len;
	char *err = NULL;
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();

	tdb_open(&t);
	res = tdb_apply(&t, 1, 1000, &c, &len);
	free(res);
	assert_int_equal(store_applied_index(t.s, 1, &idx), 0);
	val[7] = 1;                            /* index 1 */
	val[19] = 2;                           /* format 2 */
	assert_int_equal(store_drain(t.s), 0); /* apply's write lands first */
	rocksdb_put_cf(t.db, wo, t.cf[3], (const char *)key, sizeof key,
	               (const char *)val, sizeof val, &err);
	assert_null(err);
	rocksdb_writeoptions_destroy(wo);
	/* The store reads the format when it first meets the group (a
	 * node's start): a new store over the same database. */
	store_close(t.s);
	assert_int_equal(store_open(t.db, t.cf[3], &t.s), 0);
	assert_int_equal(store_applied_index(t.s, 1, &idx), -1);
	assert_non_null(strstr(store_last_error(t.s), "storage format 2"));
	tdb_close(&t);
}

static void test_commands_of_an_entry_see_each_other(void **state)
{
	struct tdb t;
	struct store_slice items[1] = {S("x")};
	struct store_cmd c[3];
	struct fsm_result *r;
	struct tres x;

	tdb_open(&t);
	c[0] = append_cmd("t/n/s", items, 1);
	c[1] = append_cmd("t/n/s", items, 1);
	c[2] = set_cmd("k", "v");
	r = tdb_apply_entry(&t, 1, 100, c, 3);
	for (int i = 0; i < 2; i++) {
		tres_init(&x, r[i].data, r[i].len);
		r[i].data = NULL;
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_array(&x), 2);
		assert_int_equal(tres_u64(&x), (uint64_t)i);
		assert_int_equal(tres_u64(&x), 1);
		tres_free(&x);
	}
	free_results(r, 3);
	tdb_close(&t);
}

static void test_bad_commands_yield_errors(void **state)
{
	struct tdb t;
	struct fsm_cmd fc[3];
	struct fsm_result r[3];
	struct fsm_entry e;
	struct store_slice items[1] = {S("x")};
	struct store_cmd ok = append_cmd("t/n/s", items, 1);
	uint8_t garbage[] = {1, 0xFE, 1, 2};
	size_t len;
	struct tres x;

	tdb_open(&t);
	fc[0].data = garbage;
	fc[0].len = sizeof garbage;
	fc[1].data = NULL;
	fc[1].len = 0;
	fc[2].data = tcmd_encode(&ok, &len);
	fc[2].len = len;
	e = (struct fsm_entry){1, 1, 1, 1, 3, fc};
	memset(r, 0, sizeof r);
	assert_int_equal(store_apply(t.s, &e, r), 0);
	for (int i = 0; i < 2; i++) {
		tres_init(&x, r[i].data, r[i].len);
		assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
		assert_non_null(strstr(tres_bytes(&x, NULL), "ERR "));
		tres_free(&x);
	}
	tres_init(&x, r[2].data, r[2].len);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	free((void *)fc[2].data);
	t.next_index[1] = 2;

	/* Scope commands only in group 0, data commands never there. */
	{
		struct store_cmd reg;
		memset(&reg, 0, sizeof reg);
		reg.op = STORE_OP_SCOPE_REGISTER;
		reg.kind = STORE_SCOPE_STREAM;
		reg.tenant = S("t");
		reg.ns = S("n");
		reg.name = S("s");
		reg.shards = 1;
		tapply(&x, &t, 1, 1, &reg);
		assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
		tres_free(&x);
		tapply(&x, &t, 0, 1, &ok);
		assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
		tres_free(&x);
		tapply(&x, &t, 0, 1, &reg);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
	}
	tdb_close(&t);
}

static void test_error_results_write_nothing(void **state)
{
	struct tdb t;
	struct store_cmd c[3];
	struct store_slice odd[3] = {S("a"), S("1"), S("b")};
	struct fsm_result *r;
	struct tres x;
	uint64_t h;

	tdb_open(&t);
	c[0] = set_cmd("k", "v");
	r = tdb_apply_entry(&t, 1, 1, c, 1);
	free_results(r, 1);
	h = tdb_hash_group_x(&t, 1, true);
	/* MSET with an odd list, LOCK by another owner, SET GET on a
	 * hash: all refused, none leaves a trace. */
	memset(c, 0, sizeof c);
	c[0].op = STORE_OP_KV_MSET;
	c[0].items.n = 3;
	c[0].items.v = odd;
	c[1].op = STORE_OP_KV_LOCK;
	c[1].key = S("k");
	c[1].arg = S("owner");
	c[1].ttl_ms = 10;
	c[2].op = STORE_OP_KV_CAS;
	c[2].key = S("k");
	c[2].kind = 9; /* invalid expiry kind */
	r = tdb_apply_entry(&t, 1, 2, c, 3);
	for (int i = 0; i < 3; i++) {
		tres_init(&x, r[i].data, r[i].len);
		r[i].data = NULL;
		assert_int_not_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
	}
	free_results(r, 3);
	assert_int_equal(tdb_hash_group_x(&t, 1, true), h);
	tdb_close(&t);
}

static void test_reads(void **state)
{
	struct tdb t;
	struct store_cmd c = set_cmd("k", "v");
	struct store_cmd get;
	struct fsm_result out;
	struct tres x;
	uint8_t garbage[] = {9};
	uint8_t *enc;
	size_t len;

	tdb_open(&t);
	tapply(&x, &t, 1, 1, &c);
	tres_free(&x);
	/* A write is refused by store_read. */
	enc = tcmd_encode(&c, &len);
	assert_int_equal(store_read(t.s, 1, 1, enc, len, &out), 0);
	free(enc);
	tres_init(&x, out.data, out.len);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	assert_int_equal(store_read(t.s, 1, 1, garbage, 1, &out), 0);
	tres_init(&x, out.data, out.len);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	/* A read served directly and through the log agree. */
	memset(&get, 0, sizeof get);
	get.op = STORE_OP_KV_GET;
	get.key = S("k");
	tread(&x, &t, 1, 1, &get);
	assert_string_equal(tres_bytes(&x, NULL), "v");
	tres_free(&x);
	tapply(&x, &t, 1, 1, &get);
	assert_string_equal(tres_bytes(&x, NULL), "v");
	tres_free(&x);
	tdb_close(&t);
}

/* A deterministic mixed workload: entries of several commands over
 * streams, caches, counters, KV and groups. */
struct workload {
	uint64_t rng;
	char bufs[16][32];
	struct store_slice items[8];
	struct store_cmd cmds[8];
};

static uint64_t wrand(struct workload *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

static unsigned next_entry(struct workload *w)
{
	unsigned n = 1 + (unsigned)(wrand(w) % 6);

	for (int i = 0; i < 16; i++) {
		snprintf(w->bufs[i], sizeof w->bufs[i], "v%u",
		         (unsigned)(wrand(w) % 50));
	}
	for (int i = 0; i < 8; i++) {
		w->items[i] = S(w->bufs[8 + i]);
	}
	for (unsigned i = 0; i < n; i++) {
		struct store_cmd *c = &w->cmds[i];
		const char *k = w->bufs[i];
		memset(c, 0, sizeof *c);
		c->scope = S((wrand(w) & 1) ? "t/n/a" : "t/n/b");
		c->shard = (uint32_t)(wrand(w) % 2);
		switch (wrand(w) % 12) {
		case 0:
			c->op = STORE_OP_STREAM_APPEND;
			c->items.n = 1 + (uint32_t)(wrand(w) % 4);
			c->items.v = w->items;
			break;
		case 1:
			c->op = STORE_OP_CACHE_PUT;
			c->key = S(k);
			c->value = S(w->bufs[15]);
			c->ttl_ms = wrand(w) % 3 ? 0 : 50;
			break;
		case 2:
			c->op = STORE_OP_CACHE_DELETE;
			c->key = S(k);
			break;
		case 3:
			c->op = STORE_OP_COUNTER_ADD;
			c->key = S(k);
			c->delta = (int64_t)(wrand(w) % 20) - 10;
			break;
		case 4:
			c->op = STORE_OP_KV_SET;
			c->key = S(k);
			c->value = S(w->bufs[14]);
			c->kind =
			    wrand(w) % 2 ? STORE_EXPIRE_NONE : STORE_EXPIRE_TTL;
			c->ttl_ms = 30;
			break;
		case 5:
			c->op = STORE_OP_KV_HSET;
			c->key = S(k);
			c->items.n = 2;
			c->items.v = w->items;
			break;
		case 6:
			c->op = STORE_OP_KV_RPUSH;
			c->key = S(k);
			c->items.n = 3;
			c->items.v = w->items;
			break;
		case 7:
			c->op = STORE_OP_KV_DEL;
			c->items.n = 2;
			c->items.v = w->items;
			break;
		case 8:
			c->op = STORE_OP_CG_POLL;
			c->group = S("g");
			c->max = 3;
			c->visibility_ms = 20;
			break;
		case 9:
			c->op = STORE_OP_CG_ACK;
			c->group = S("g");
			c->offset = wrand(w) % 10;
			break;
		case 10:
			c->op = STORE_OP_CACHE_COMPACT;
			break;
		default:
			c->op = STORE_OP_STREAM_TRIM;
			c->retention_bytes = 40;
			break;
		}
	}
	return n;
}

static void run_workload(struct tdb *t, uint32_t group, uint64_t seed,
                         int entries, uint64_t *now)
{
	struct workload w;

	memset(&w, 0, sizeof w);
	w.rng = seed;
	for (int i = 0; i < entries; i++) {
		unsigned n = next_entry(&w);
		struct fsm_result *r;
		*now += wrand(&w) % 10;
		r = tdb_apply_entry(t, group, *now, w.cmds, n);
		free_results(r, n);
	}
}

static void test_determinism(void **state)
{
	struct tdb a, b;
	uint64_t now_a = 1000, now_b = 1000;

	tdb_open(&a);
	tdb_open(&b);
	run_workload(&a, 3, 0x1234567, 300, &now_a);
	run_workload(&b, 3, 0x1234567, 300, &now_b);
	assert_int_equal(tdb_hash_group(&a, 3), tdb_hash_group(&b, 3));
	/* A different history gives a different state. */
	run_workload(&b, 3, 0x99, 5, &now_b);
	assert_int_not_equal(tdb_hash_group(&a, 3), tdb_hash_group(&b, 3));
	tdb_close(&a);
	tdb_close(&b);
}

static void test_export_import(void **state)
{
	struct tdb a, b;
	char dir[600];
	char cmd[700];
	uint64_t now_a = 1000, now_b = 5000, idx, idx2;
	uint64_t h2;

	tdb_open(&a);
	tdb_open(&b);
	run_workload(&a, 1, 7, 200, &now_a);
	run_workload(&a, 2, 8, 50, &now_a);
	run_workload(&b, 1, 9, 80, &now_b); /* diverging state to replace */
	run_workload(&b, 2, 10, 30, &now_b);
	h2 = tdb_hash_group(&b, 2);

	snprintf(dir, sizeof dir, "%s/export", a.dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(store_export(a.s, 1, dir, &idx), 0);
	assert_int_equal(idx, 200);
	assert_int_equal(store_import(b.s, 1, dir, &idx2), 0);
	assert_int_equal(idx2, 200);
	assert_int_equal(tdb_hash_group(&a, 1), tdb_hash_group(&b, 1));
	assert_int_equal(tdb_hash_group(&b, 2), h2);

	/* Both continue from the same state to the same state. */
	b.next_index[1] = a.next_index[1];
	now_b = now_a;
	run_workload(&a, 1, 11, 50, &now_a);
	run_workload(&b, 1, 11, 50, &now_b);
	assert_int_equal(tdb_hash_group(&a, 1), tdb_hash_group(&b, 1));

	/* An empty group exports nothing and imports as empty. */
	snprintf(dir, sizeof dir, "%s/export-empty", a.dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(store_export(a.s, 9, dir, &idx), 0);
	assert_int_equal(idx, 0);
	assert_int_equal(store_import(b.s, 2, dir, &idx2), 0);
	assert_int_equal(idx2, 0);
	assert_int_equal(tdb_hash_group(&b, 2), tdb_hash_group(&a, 9));
	/* Files of another group are refused. */
	snprintf(dir, sizeof dir, "%s/export", a.dir);
	assert_int_equal(store_export(a.s, 1, dir, &idx), 0);
	assert_int_equal(store_import(b.s, 3, dir, &idx2), -1);
	assert_non_null(strstr(store_last_error(b.s), "not an export"));
	assert_int_equal(store_import(b.s, 3, "/nonexistent-dir", &idx2), -1);
	tdb_close(&a);
	tdb_close(&b);
}

static int count_shard(void *arg, uint8_t kind, struct store_slice scope,
                       uint32_t shard)
{
	int *n = arg;
	n[kind]++;
	return 0;
}

static void test_fsm_glue(void **state)
{
	struct tdb t;
	struct fsm fsm;
	struct store_slice items[1] = {S("x")};
	struct store_cmd c = append_cmd("t/n/s", items, 1);
	struct fsm_cmd fc;
	struct fsm_entry e;
	struct fsm_result r;
	uint64_t idx;
	size_t len;
	int n[3] = {0, 0, 0};

	tdb_open(&t);
	store_fsm_init(&fsm, t.s);
	assert_ptr_equal(fsm.data, t.s);
	assert_null(fsm.leader_changed);
	fc.data = tcmd_encode(&c, &len);
	fc.len = len;
	e = (struct fsm_entry){4, 3, 1, 1, 1, &fc};
	memset(&r, 0, sizeof r);
	assert_int_equal(fsm.apply(&fsm, &e, &r), 0);
	free(r.data);
	free((void *)fc.data);
	assert_int_equal(fsm.applied_index(&fsm, 4, &idx), 0);
	assert_int_equal(idx, 3);
	assert_int_equal(fsm.sync(&fsm, 4), 0);
	assert_int_equal(store_list_shards(t.s, 4, count_shard, n), 0);
	assert_int_equal(n[STORE_SCOPE_STREAM], 1);
	assert_int_equal(n[STORE_SCOPE_CACHE], 0);
	assert_string_equal(store_last_error(t.s), "");
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_applied_index_and_replay),
	    cmocka_unit_test(test_other_format_refused),
	    cmocka_unit_test(test_commands_of_an_entry_see_each_other),
	    cmocka_unit_test(test_bad_commands_yield_errors),
	    cmocka_unit_test(test_error_results_write_nothing),
	    cmocka_unit_test(test_reads),
	    cmocka_unit_test(test_determinism),
	    cmocka_unit_test(test_export_import),
	    cmocka_unit_test(test_fsm_glue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
