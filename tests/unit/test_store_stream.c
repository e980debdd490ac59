/* Streams, meta scopes, idempotent producers and consumer groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/stream.h"
#include "tests/unit/store_test_util.h"

#define G 1
#define SCOPE "acme/prod/orders"

static struct store_cmd scmd(uint8_t op)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.scope = S(SCOPE);
	return c;
}

static struct store_cmd meta(uint8_t op, const char *t, const char *n,
                             const char *name)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.kind = STORE_SCOPE_STREAM;
	c.tenant = S(t);
	c.ns = S(n);
	c.name = S(name);
	return c;
}

/* Appends `n` payloads "p<i>" and returns the base offset. */
static uint64_t append(struct tdb *t, uint64_t now, uint32_t shard, int n,
                       const char *prefix)
{
	struct store_slice items[64];
	char bufs[64][32];
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND);
	struct tres x;
	uint64_t base;

	for (int i = 0; i < n; i++) {
		snprintf(bufs[i], sizeof bufs[i], "%s%d", prefix, i);
		items[i] = S(bufs[i]);
	}
	c.shard = shard;
	c.items.n = (uint32_t)n;
	c.items.v = items;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	base = tres_u64(&x);
	assert_int_equal(tres_u64(&x), (uint64_t)n);
	tres_free(&x);
	return base;
}

static void test_scopes(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	const char *cursor;

	tdb_open(&t);
	c = meta(STORE_OP_SCOPE_REGISTER, "acme", "prod", "orders");
	c.shards = 4;
	c.retention_bytes = 1000;
	c.retention_ms = 60000;
	c.durability = 1;
	tapply(&x, &t, 0, 500, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);
	/* Again: an update (retention may change), not a creation. */
	c.retention_bytes = 2000;
	tapply(&x, &t, 0, 600, &c);
	assert_int_equal(tres_i64(&x), 0);
	tres_free(&x);
	/* Another shard count is refused. */
	c.shards = 8;
	tapply(&x, &t, 0, 600, &c);
	assert_int_equal(tres_status(&x), STORE_EXISTS);
	tres_free(&x);
	/* Validation. */
	c.shards = 0;
	tapply(&x, &t, 0, 600, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	c = meta(STORE_OP_SCOPE_REGISTER, "acme", "", "x");
	c.shards = 1;
	tapply(&x, &t, 0, 600, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	c.kind = 7;
	tapply(&x, &t, 0, 600, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);

	c = meta(STORE_OP_SCOPE_DESCRIBE, "acme", "prod", "orders");
	tread(&x, &t, 0, 700, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 5);
	assert_int_equal(tres_u64(&x), 4);
	assert_int_equal(tres_u64(&x), 2000);
	assert_int_equal(tres_u64(&x), 60000);
	assert_int_equal(tres_u64(&x), 1);
	assert_int_equal(tres_u64(&x), 500); /* created at */
	tres_free(&x);
	/* A cache scope of the same name is another scope. */
	c.kind = STORE_SCOPE_CACHE;
	tread(&x, &t, 0, 700, &c);
	assert_int_equal(tres_status(&x), STORE_NOT_FOUND);
	tres_free(&x);

	/* More scopes, then list with filters and paging. */
	const char *names[][3] = {{"acme", "prod", "a"},
	                          {"acme", "dev", "b"},
	                          {"zeta", "prod", "c"},
	                          {"acme", "prod", "z"}};
	for (int i = 0; i < 4; i++) {
		c = meta(STORE_OP_SCOPE_REGISTER, names[i][0], names[i][1],
		         names[i][2]);
		c.shards = 1;
		tapply(&x, &t, 0, 800, &c);
		assert_int_equal(tres_status(&x), STORE_OK);
		tres_free(&x);
	}
	c = meta(STORE_OP_SCOPE_LIST, "", "", "");
	tread(&x, &t, 0, 900, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 5);
	tres_free(&x);
	c = meta(STORE_OP_SCOPE_LIST, "acme", "prod", "");
	tread(&x, &t, 0, 900, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_array(&x), 7);
	assert_string_equal(tres_bytes(&x, NULL), "acme");
	assert_string_equal(tres_bytes(&x, NULL), "prod");
	assert_string_equal(tres_bytes(&x, NULL), "a");
	tres_free(&x);
	/* Paging: two at a time over the tenant acme (4 scopes). */
	c = meta(STORE_OP_SCOPE_LIST, "acme", "", "");
	c.max = 2;
	tread(&x, &t, 0, 900, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tres_array(&x), 7);
		for (int j = 0; j < 3; j++) {
			tres_bytes(&x, NULL);
		}
		for (int j = 0; j < 4; j++) {
			tres_u64(&x);
		}
	}
	{
		size_t cl;
		cursor = tres_bytes(&x, &cl);
		char *saved = malloc(cl);
		memcpy(saved, cursor, cl);
		c.arg.p = (const uint8_t *)saved;
		c.arg.len = cl;
		tres_free(&x);
		tread(&x, &t, 0, 900, &c);
		assert_int_equal(tres_array(&x), 2);
		assert_int_equal(tres_array(&x), 2);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(tres_array(&x), 7);
			for (int j = 0; j < 3; j++) {
				tres_bytes(&x, NULL);
			}
			for (int j = 0; j < 4; j++) {
				tres_u64(&x);
			}
		}
		/* Exactly at the end: no "more" is known without a peek,
		 * but the next page is empty. */
		if (!tres_is_nil(&x)) {
			cursor = tres_bytes(&x, &cl);
			saved = realloc(saved, cl);
			memcpy(saved, cursor, cl);
			c.arg.p = (const uint8_t *)saved;
			c.arg.len = cl;
			tres_free(&x);
			tread(&x, &t, 0, 900, &c);
			assert_int_equal(tres_array(&x), 2);
			assert_int_equal(tres_array(&x), 0);
			assert_true(tres_is_nil(&x));
		}
		tres_free(&x);
		free(saved);
	}

	c = meta(STORE_OP_SCOPE_DELETE, "acme", "prod", "orders");
	tapply(&x, &t, 0, 1000, &c);
	assert_int_equal(tres_i64(&x), 1);
	tres_free(&x);
	tapply(&x, &t, 0, 1000, &c);
	assert_int_equal(tres_i64(&x), 0);
	tres_free(&x);
	c.op = STORE_OP_SCOPE_DESCRIBE;
	tread(&x, &t, 0, 1000, &c);
	assert_int_equal(tres_status(&x), STORE_NOT_FOUND);
	tres_free(&x);
	tdb_close(&t);
}

struct collect {
	int n;
	uint64_t offsets[128];
	char payloads[128][32];
	uint64_t ts[128];
};

static int collect_cb(void *arg, uint64_t offset, uint64_t ts, const uint8_t *p,
                      size_t len)
{
	struct collect *c = arg;
	c->offsets[c->n] = offset;
	c->ts[c->n] = ts;
	snprintf(c->payloads[c->n], 32, "%.*s", (int)len, (const char *)p);
	c->n++;
	return 0;
}

static void test_append_read(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	struct collect col;
	struct store_stream_info info;

	tdb_open(&t);
	assert_int_equal(append(&t, 100, 0, 3, "a"), 0);
	assert_int_equal(append(&t, 200, 0, 2, "b"), 3);
	/* Shards are independent. */
	assert_int_equal(append(&t, 200, 1, 1, "c"), 0);
	/* An empty batch takes no offset. */
	assert_int_equal(append(&t, 250, 0, 0, "x"), 5);

	c = scmd(STORE_OP_STREAM_READ);
	c.offset = 1;
	c.max = 3;
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 4); /* next offset */
	assert_int_equal(tres_array(&x), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tres_array(&x), 3);
		assert_int_equal(tres_u64(&x), (uint64_t)(1 + i));
		assert_int_equal(tres_u64(&x), i < 2 ? 100 : 200);
		tres_bytes(&x, NULL);
	}
	tres_free(&x);
	/* At the tail: empty, not an error. */
	c.offset = 5;
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 5);
	assert_int_equal(tres_array(&x), 0);
	tres_free(&x);
	/* Past the tail: in_future with the tail. */
	c.offset = 6;
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_status(&x), STORE_IN_FUTURE);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 6);
	assert_int_equal(tres_u64(&x), 5);
	tres_free(&x);
	/* max_bytes stops after the record that reaches it. */
	c.offset = 0;
	c.max = 0;
	c.max_bytes = 3;
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 2);
	tres_free(&x);

	/* Typed reads. */
	memset(&col, 0, sizeof col);
	assert_int_equal(store_stream_read(t.s, G, S(SCOPE), 0, 2, 10, 0,
	                                   collect_cb, &col, &info),
	                 0);
	assert_int_equal(col.n, 3);
	assert_string_equal(col.payloads[0], "a2");
	assert_string_equal(col.payloads[1], "b0");
	assert_int_equal(col.ts[1], 200);
	assert_int_equal(info.head, 0);
	assert_int_equal(info.tail, 5);
	assert_int_equal(info.bytes, 10);
	assert_int_equal(store_stream_read(t.s, G, S(SCOPE), 0, 9, 10, 0,
	                                   collect_cb, &col, &info),
	                 STORE_IN_FUTURE);
	/* An unknown stream is empty. */
	assert_int_equal(store_stream_info(t.s, G, S("no/such/s"), 0, &info),
	                 0);
	assert_int_equal(info.tail, 0);
	c = scmd(STORE_OP_STREAM_INFO);
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_array(&x), 4);
	assert_int_equal(tres_u64(&x), 0);
	assert_int_equal(tres_u64(&x), 5);
	assert_int_equal(tres_u64(&x), 10);
	assert_int_equal(tres_u64(&x), 0);
	tres_free(&x);
	/* An empty scope name is refused. */
	c.scope = S("");
	tread(&x, &t, G, 300, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	tdb_close(&t);
}

static void trim(struct tdb *t, uint64_t now, struct store_cmd *c,
                 uint64_t head, uint64_t trimmed, bool more)
{
	struct tres x;
	tapply(&x, t, G, now, c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), head);
	assert_int_equal(tres_u64(&x), trimmed);
	assert_int_equal(tres_bool(&x), more);
	tres_free(&x);
}

static void test_retention(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;
	struct store_stream_info info;

	tdb_open(&t);
	append(&t, 1000, 0, 10, "r"); /* r0..r9: 2 bytes each, 20 bytes */
	append(&t, 5000, 0, 10, "s"); /* 20 more */

	/* Explicit: below offset 3. */
	c = scmd(STORE_OP_STREAM_TRIM);
	c.offset = 3;
	trim(&t, 6000, &c, 3, 3, false);
	/* Reading below the head: too_old with the oldest offset. */
	c = scmd(STORE_OP_STREAM_READ);
	c.offset = 1;
	tread(&x, &t, G, 6000, &c);
	assert_int_equal(tres_status(&x), STORE_TOO_OLD);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 1);
	assert_int_equal(tres_u64(&x), 3);
	tres_free(&x);
	/* By bytes: 34 retained, keep at most 30 -> drop two. */
	c = scmd(STORE_OP_STREAM_TRIM);
	c.retention_bytes = 30;
	trim(&t, 6000, &c, 5, 2, false);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.bytes, 30);
	/* By age with a budget: records older than 3 s at 6000 are the
	 * first batch (time 1000); two per command. */
	c = scmd(STORE_OP_STREAM_TRIM);
	c.retention_ms = 3000;
	c.max = 2;
	trim(&t, 6000, &c, 7, 2, true);
	trim(&t, 6000, &c, 9, 2, true);
	trim(&t, 6000, &c, 10, 1, false);
	trim(&t, 6000, &c, 10, 0, false);
	/* Everything ages out, appends continue the offsets. */
	c.max = 0;
	trim(&t, 9000, &c, 20, 10, false);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.head, 20);
	assert_int_equal(info.bytes, 0);
	assert_int_equal(append(&t, 9000, 0, 1, "t"), 20);
	c = scmd(STORE_OP_STREAM_READ);
	c.offset = 20;
	tread(&x, &t, G, 9000, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 21);
	assert_int_equal(tres_array(&x), 1);
	tres_free(&x);

	/* Drop removes everything but keeps the offsets. */
	assert_int_equal(append(&t, 9000, 0, 1, "t"), 21);
	c = scmd(STORE_OP_STREAM_DROP);
	c.max = 1;
	tapply(&x, &t, G, 9100, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 1);
	assert_true(tres_bool(&x));
	tres_free(&x);
	c.max = 0;
	tapply(&x, &t, G, 9100, &c);
	assert_int_equal(tres_array(&x), 2);
	tres_u64(&x);
	assert_false(tres_bool(&x));
	tres_free(&x);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.head, 22);
	assert_int_equal(info.tail, 22);
	assert_int_equal(info.bytes, 0);
	assert_int_equal(append(&t, 9200, 0, 1, "u"), 22);
	c = scmd(STORE_OP_STREAM_READ);
	c.offset = 21;
	tread(&x, &t, G, 9200, &c);
	assert_int_equal(tres_status(&x), STORE_TOO_OLD);
	tres_free(&x);
	tdb_close(&t);
}

static struct store_cmd idem(uint64_t producer, uint64_t seq,
                             const struct store_slice *items, uint32_t n)
{
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND_IDEM);
	c.producer = producer;
	c.seq = seq;
	c.items.n = n;
	c.items.v = items;
	return c;
}

static void expect_appended(struct tres *x, uint64_t base, uint64_t n, bool dup)
{
	assert_int_equal(tres_status(x), STORE_OK);
	assert_int_equal(tres_array(x), 3);
	assert_int_equal(tres_u64(x), base);
	assert_int_equal(tres_u64(x), n);
	assert_int_equal(tres_bool(x), dup);
}

static void test_idempotent_producers(void **state)
{
	struct tdb t;
	struct store_slice items[2] = {S("x"), S("y")};
	struct store_cmd c, cmds[2];
	struct fsm_result *r;
	struct tres x;
	struct store_stream_info info;

	tdb_open(&t);
	/* Unknown producer, not at zero. */
	c = idem(42, 3, items, 2);
	tapply(&x, &t, G, 1, &c);
	assert_int_equal(tres_status(&x), STORE_UNKNOWN_PRODUCER);
	tres_free(&x);
	/* Sequence 0 registers it. */
	c = idem(42, 0, items, 2);
	tapply(&x, &t, G, 1, &c);
	expect_appended(&x, 0, 2, false);
	tres_free(&x);
	/* Resent: the same offsets, nothing appended. */
	tapply(&x, &t, G, 2, &c);
	expect_appended(&x, 0, 2, true);
	tres_free(&x);
	/* A gap names the expected sequence. */
	c = idem(42, 5, items, 1);
	tapply(&x, &t, G, 3, &c);
	assert_int_equal(tres_status(&x), STORE_SEQ_GAP);
	assert_int_equal(tres_u64(&x), 1);
	tres_free(&x);
	/* Two copies of one batch in one entry append once. */
	cmds[0] = idem(42, 1, items, 1);
	cmds[1] = idem(42, 1, items, 1);
	r = tdb_apply_entry(&t, G, 4, cmds, 2);
	tres_init(&x, r[0].data, r[0].len);
	expect_appended(&x, 2, 1, false);
	tres_free(&x);
	tres_init(&x, r[1].data, r[1].len);
	expect_appended(&x, 2, 1, true);
	tres_free(&x);
	free(r);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.tail, 3);
	assert_int_equal(info.producers, 1);

	/* After 64 more batches sequence 1 is expired, 2 is remembered. */
	for (uint64_t s = 2; s < 66; s++) {
		c = idem(42, s, items, 1);
		tapply(&x, &t, G, 5, &c);
		expect_appended(&x, s + 1, 1, false);
		tres_free(&x);
	}
	c = idem(42, 1, items, 1);
	tapply(&x, &t, G, 6, &c);
	assert_int_equal(tres_status(&x), STORE_SEQ_EXPIRED);
	tres_free(&x);
	c = idem(42, 2, items, 1);
	tapply(&x, &t, G, 6, &c);
	expect_appended(&x, 3, 1, true);
	tres_free(&x);

	/* producer_init registers an id; a taken id is refused. */
	c = scmd(STORE_OP_PRODUCER_INIT);
	c.producer = 7;
	tapply(&x, &t, G, 7, &c);
	assert_true(tres_bool(&x));
	tres_free(&x);
	tapply(&x, &t, G, 7, &c);
	assert_int_equal(tres_status(&x), STORE_EXISTS);
	tres_free(&x);
	c = idem(7, 0, items, 1);
	tapply(&x, &t, G, 8, &c);
	expect_appended(&x, 67, 1, false);
	tres_free(&x);
	/* Per shard: the same id on another shard is unknown there. */
	c = idem(42, 66, items, 1);
	c.shard = 1;
	tapply(&x, &t, G, 8, &c);
	assert_int_equal(tres_status(&x), STORE_UNKNOWN_PRODUCER);
	tres_free(&x);
	tdb_close(&t);
}

static void test_producer_eviction(void **state)
{
	struct tdb t;
	struct store_slice items[1] = {S("x")};
	struct store_cmd *cmds;
	struct fsm_result *r;
	struct tres x;
	struct store_stream_info info;
	const unsigned per = 512;

	tdb_open(&t);
	cmds = calloc(per, sizeof *cmds);
	/* Producers 1..4096, in entries of 512 (ids ascending). */
	for (unsigned e = 0; e < STORE_PRODUCERS_MAX / per; e++) {
		for (unsigned i = 0; i < per; i++) {
			cmds[i] = idem(1 + e * per + i, 0, items, 1);
		}
		r = tdb_apply_entry(&t, G, 1, cmds, per);
		for (unsigned i = 0; i < per; i++) {
			free(r[i].data);
		}
		free(r);
	}
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.producers, STORE_PRODUCERS_MAX);
	/* Touch producer 1 so that 2 becomes the coldest. */
	cmds[0] = idem(1, 1, items, 1);
	tapply(&x, &t, G, 2, &cmds[0]);
	expect_appended(&x, STORE_PRODUCERS_MAX, 1, false);
	tres_free(&x);
	/* A new producer evicts producer 2 (oldest use, lowest id). */
	cmds[0] = idem(9999, 0, items, 1);
	tapply(&x, &t, G, 3, &cmds[0]);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.producers, STORE_PRODUCERS_MAX);
	cmds[0] = idem(2, 1, items, 1);
	tapply(&x, &t, G, 4, &cmds[0]);
	assert_int_equal(tres_status(&x), STORE_UNKNOWN_PRODUCER);
	tres_free(&x);
	cmds[0] = idem(1, 2, items, 1);
	tapply(&x, &t, G, 4, &cmds[0]);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	cmds[0] = idem(3, 1, items, 1);
	tapply(&x, &t, G, 4, &cmds[0]);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	free(cmds);
	tdb_close(&t);
}

static struct store_cmd gcmd(uint8_t op, uint64_t offset)
{
	struct store_cmd c = scmd(op);
	c.group = S("workers");
	c.offset = offset;
	return c;
}

/* Polls and checks the delivered (offset, attempts) pairs. */
static void poll_expect(struct tdb *t, uint64_t now, uint64_t max,
                        const uint64_t *offs, const uint32_t *att, int n)
{
	struct store_cmd c = gcmd(STORE_OP_CG_POLL, 0);
	struct tres x;

	c.max = max;
	c.visibility_ms = 1000;
	c.attempts = 3;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	(void)tres_u64(&x); /* next deadline: test_consumer_group_model */
	assert_int_equal(tres_array(&x), (uint32_t)n);
	for (int i = 0; i < n; i++) {
		char want[32];
		assert_int_equal(tres_array(&x), 3);
		assert_int_equal(tres_u64(&x), offs[i]);
		assert_int_equal(tres_u64(&x), att[i]);
		snprintf(want, sizeof want, "p%u", (unsigned)offs[i]);
		assert_string_equal(tres_bytes(&x, NULL), want);
	}
	tres_free(&x);
}

static void settle(struct tdb *t, uint8_t op, uint64_t offset, uint8_t status)
{
	struct store_cmd c = gcmd(op, offset);
	struct tres x;
	c.attempts = 3;
	tapply(&x, t, G, 0, &c);
	assert_int_equal(tres_status(&x), status);
	tres_free(&x);
}

static void info_expect(struct tdb *t, uint64_t cursor, uint64_t claims,
                        uint64_t dead)
{
	struct store_cmd c = gcmd(STORE_OP_CG_INFO, 0);
	struct tres x;
	tread(&x, t, G, 0, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), cursor);
	assert_int_equal(tres_u64(&x), claims);
	assert_int_equal(tres_u64(&x), dead);
	tres_free(&x);
}

static void test_consumer_groups(void **state)
{
	struct tdb t;
	struct store_cmd c;
	struct tres x;

	tdb_open(&t);
	append(&t, 0, 0, 6, "p"); /* p0..p5 */
	/* Empty poll on an empty group of another name is an answer. */
	poll_expect(&t, 10, 2, (uint64_t[]){0, 1}, (uint32_t[]){1, 1}, 2);
	/* In flight: the next poll moves on. */
	poll_expect(&t, 20, 2, (uint64_t[]){2, 3}, (uint32_t[]){1, 1}, 2);
	/* Ack out of order: the cursor waits for 0. */
	settle(&t, STORE_OP_CG_ACK, 1, STORE_OK);
	info_expect(&t, 4, 3, 0);
	settle(&t, STORE_OP_CG_ACK, 0, STORE_OK);
	info_expect(&t, 4, 2, 0);
	/* Acking twice, or below the cursor, is fine. */
	settle(&t, STORE_OP_CG_ACK, 0, STORE_OK);
	/* Not delivered yet, and past the end. */
	settle(&t, STORE_OP_CG_ACK, 5, STORE_ERR);
	settle(&t, STORE_OP_CG_ACK, 6, STORE_ERR);
	settle(&t, STORE_OP_CG_NACK, 0, STORE_ERR);
	/* Nack: immediately redeliverable, with its attempt count. */
	settle(&t, STORE_OP_CG_NACK, 2, STORE_OK);
	poll_expect(&t, 30, 10, (uint64_t[]){2, 4, 5}, (uint32_t[]){2, 1, 1},
	            3);
	/* Visibility lapses at 20 + 1000 for offset 3. */
	poll_expect(&t, 1019, 10, NULL, NULL, 0);
	poll_expect(&t, 1020, 10, (uint64_t[]){3}, (uint32_t[]){2}, 1);
	/* Offset 2 (attempt 2 at 30) lapses at 1030: attempt 3 is the last. */
	poll_expect(&t, 1030, 10, (uint64_t[]){2, 4, 5}, (uint32_t[]){3, 2, 2},
	            3);
	/* Its third failure dead-letters it (nack at max attempts). */
	settle(&t, STORE_OP_CG_NACK, 2, STORE_OK);
	c = gcmd(STORE_OP_CG_DEAD_LETTERS, 0);
	tread(&x, &t, G, 0, &c);
	assert_int_equal(tres_array(&x), 1);
	assert_int_equal(tres_u64(&x), 2);
	tres_free(&x);
	settle(&t, STORE_OP_CG_ACK, 2, STORE_ERR);
	/* 3, 4 and 5 time out twice more: at 3 attempts they die. */
	poll_expect(&t, 2020, 10, (uint64_t[]){3}, (uint32_t[]){3}, 1);
	poll_expect(&t, 3030, 10, (uint64_t[]){4, 5}, (uint32_t[]){3, 3}, 2);
	poll_expect(&t, 5000, 10, NULL, NULL, 0);
	info_expect(&t, 6, 0, 4);
	c = gcmd(STORE_OP_CG_DEAD_LETTERS, 3);
	c.max = 2;
	tread(&x, &t, G, 0, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 3);
	assert_int_equal(tres_u64(&x), 4);
	tres_free(&x);

	/* Discard one, redrive another: it is delivered again (below the
	 * cursor) with a fresh count. */
	settle(&t, STORE_OP_CG_DISCARD, 3, STORE_OK);
	settle(&t, STORE_OP_CG_DISCARD, 3, STORE_ERR);
	settle(&t, STORE_OP_CG_REDRIVE, 4, STORE_OK);
	settle(&t, STORE_OP_CG_REDRIVE, 1, STORE_ERR);
	append(&t, 5000, 0, 1, "p"); /* p0 at offset 6: payload "p0" */
	c = gcmd(STORE_OP_CG_POLL, 0);
	c.max = 10;
	c.visibility_ms = 1000;
	tapply(&x, &t, G, 6000, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 7000); /* next deadline */
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 4);
	assert_int_equal(tres_u64(&x), 1);
	assert_string_equal(tres_bytes(&x, NULL), "p4");
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 6);
	assert_int_equal(tres_u64(&x), 1);
	assert_string_equal(tres_bytes(&x, NULL), "p0");
	tres_free(&x);
	settle(&t, STORE_OP_CG_ACK, 4, STORE_OK);
	settle(&t, STORE_OP_CG_ACK, 6, STORE_OK);
	info_expect(&t, 7, 0, 2);

	/* Another group on the same stream starts from the head. */
	c = gcmd(STORE_OP_CG_POLL, 0);
	c.group = S("audit");
	c.max = 1;
	tapply(&x, &t, G, 7000, &c);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), 37000); /* default visibility */
	assert_int_equal(tres_array(&x), 1);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), 0);
	tres_free(&x);
	/* A group name is required. */
	c.group = S("");
	tapply(&x, &t, G, 7000, &c);
	assert_int_equal(tres_status(&x), STORE_BAD_COMMAND);
	tres_free(&x);
	tdb_close(&t);
}

static void test_consumer_groups_and_retention(void **state)
{
	struct tdb t;
	struct store_cmd c;

	tdb_open(&t);
	append(&t, 0, 0, 5, "p");
	poll_expect(&t, 10, 2, (uint64_t[]){0, 1}, (uint32_t[]){1, 1}, 2);
	/* Trim below 3: delivery resumes at 3; the claims of 0 and 1 are
	 * dropped when they come due (never redelivered). */
	c = scmd(STORE_OP_STREAM_TRIM);
	c.offset = 3;
	trim(&t, 20, &c, 3, 3, false);
	poll_expect(&t, 30, 10, (uint64_t[]){3, 4}, (uint32_t[]){1, 1}, 2);
	info_expect(&t, 5, 4, 0);
	settle(&t, STORE_OP_CG_ACK, 3, STORE_OK);
	settle(&t, STORE_OP_CG_ACK, 4, STORE_OK);
	/* Trimmed but never delivered is settled too. */
	settle(&t, STORE_OP_CG_ACK, 2, STORE_OK);
	settle(&t, STORE_OP_CG_NACK, 2, STORE_ERR);
	info_expect(&t, 5, 2, 0);
	poll_expect(&t, 1010, 10, NULL, NULL, 0);
	info_expect(&t, 5, 0, 0);
	tdb_close(&t);
}

/* ---- consumer groups against a model ------------------------------------
 * Random entries of polls, acks, nacks, discards, redrives, appends and
 * trims (several commands per entry), each result compared with a plain
 * model of the documented rules: nacked and redriven records first (in the
 * order they became ready), then lapsed claims by (deadline, offset), then
 * never-delivered offsets; at the maximum attempts a failed record is a
 * dead letter; trimmed claims are dropped when they come due. */

#define CGM_MAX 512 /* offsets */
#define CGM_VIS 50
#define CGM_ATT 3

struct cgm_claim {
	uint8_t st; /* 0 none, 1 in flight, 2 ready */
	uint32_t att;
	uint64_t due; /* deadline (in flight) or ready sequence */
};

struct cgm {
	uint64_t head, tail, cursor, seq;
	struct cgm_claim cl[CGM_MAX];
	bool dead[CGM_MAX];
	uint64_t rng;
};

static uint64_t cgm_rand(struct cgm *m)
{
	m->rng = m->rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return m->rng >> 33;
}

struct cgm_out {
	uint64_t off;
	uint32_t att;
};

/* Handles one claim a poll looks at; returns whether it was delivered. */
static bool cgm_take(struct cgm *m, uint64_t o, uint64_t now,
                     struct cgm_out *out, size_t *n)
{
	struct cgm_claim *c = &m->cl[o];

	if (o < m->head) {
		c->st = 0;
		return false;
	}
	if (c->att >= CGM_ATT) {
		c->st = 0;
		m->dead[o] = true;
		return false;
	}
	c->st = 1;
	c->att++;
	c->due = now + CGM_VIS;
	out[*n].off = o;
	out[*n].att = c->att;
	(*n)++;
	return true;
}

/* The model's poll: fills out (offset order) and the next deadline. */
static size_t cgm_poll(struct cgm *m, uint64_t now, size_t max,
                       struct cgm_out *out, uint64_t *next_due)
{
	static uint64_t pick[CGM_MAX];
	size_t n = 0, np = 0;

	/* Ready, by sequence. */
	for (uint64_t o = 0; o < m->tail; o++) {
		if (m->cl[o].st == 2) {
			pick[np++] = o;
		}
	}
	for (size_t i = 1; i < np; i++) {
		for (size_t j = i;
		     j > 0 && m->cl[pick[j - 1]].due > m->cl[pick[j]].due;
		     j--) {
			uint64_t x = pick[j];
			pick[j] = pick[j - 1];
			pick[j - 1] = x;
		}
	}
	for (size_t i = 0; i < np && n < max; i++) {
		cgm_take(m, pick[i], now, out, &n);
	}
	/* Lapsed, by (deadline, offset); those just delivered are not. */
	np = 0;
	for (uint64_t o = 0; o < m->tail; o++) {
		if (m->cl[o].st == 1 && m->cl[o].due <= now) {
			pick[np++] = o;
		}
	}
	for (size_t i = 1; i < np; i++) {
		for (size_t j = i;
		     j > 0 && m->cl[pick[j - 1]].due > m->cl[pick[j]].due;
		     j--) {
			uint64_t x = pick[j];
			pick[j] = pick[j - 1];
			pick[j - 1] = x;
		}
	}
	for (size_t i = 0; i < np && n < max; i++) {
		cgm_take(m, pick[i], now, out, &n);
	}
	if (m->cursor < m->head) {
		m->cursor = m->head;
	}
	while (n < max && m->cursor < m->tail) {
		struct cgm_claim *c = &m->cl[m->cursor];
		c->st = 1;
		c->att = 1;
		c->due = now + CGM_VIS;
		out[n].off = m->cursor++;
		out[n].att = 1;
		n++;
	}
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0 && out[j - 1].off > out[j].off; j--) {
			struct cgm_out x = out[j];
			out[j] = out[j - 1];
			out[j - 1] = x;
		}
	}
	*next_due = 0;
	for (uint64_t o = 0; o < m->tail; o++) {
		if (m->cl[o].st == 1 &&
		    (*next_due == 0 || m->cl[o].due < *next_due)) {
			*next_due = m->cl[o].due;
		}
	}
	return n;
}

/* The model's ack / nack / discard / redrive: the expected status. */
static uint8_t cgm_settle(struct cgm *m, uint8_t op, uint64_t o)
{
	struct cgm_claim *c = o < CGM_MAX ? &m->cl[o] : NULL;

	if (o >= m->tail) {
		return STORE_ERR;
	}
	switch (op) {
	case STORE_OP_CG_ACK:
	case STORE_OP_CG_NACK:
		if (c->st == 0) {
			if (m->dead[o] || (o >= m->cursor && o >= m->head)) {
				return STORE_ERR;
			}
			return op == STORE_OP_CG_ACK ? STORE_OK : STORE_ERR;
		}
		if (op == STORE_OP_CG_ACK) {
			c->st = 0;
		} else if (c->att >= CGM_ATT) {
			c->st = 0;
			m->dead[o] = true;
		} else if (c->st == 1) {
			c->st = 2;
			c->due = m->seq++;
		}
		return STORE_OK;
	case STORE_OP_CG_DISCARD:
		if (!m->dead[o]) {
			return STORE_ERR;
		}
		m->dead[o] = false;
		return STORE_OK;
	default:
		if (!m->dead[o] || o < m->head) {
			return STORE_ERR;
		}
		m->dead[o] = false;
		c->st = 2;
		c->att = 0;
		c->due = m->seq++;
		return STORE_OK;
	}
}

static void cgm_check_state(struct tdb *t, struct cgm *m)
{
	struct store_cmd c = gcmd(STORE_OP_CG_INFO, 0);
	uint64_t claims = 0, dead = 0;
	struct tres x;

	for (uint64_t o = 0; o < m->tail; o++) {
		claims += m->cl[o].st != 0;
		dead += m->dead[o];
	}
	tread(&x, t, G, 0, &c);
	assert_int_equal(tres_array(&x), 3);
	assert_int_equal(tres_u64(&x), m->cursor);
	assert_int_equal(tres_u64(&x), claims);
	assert_int_equal(tres_u64(&x), dead);
	tres_free(&x);
	c = gcmd(STORE_OP_CG_DEAD_LETTERS, 0);
	c.max = CGM_MAX;
	tread(&x, t, G, 0, &c);
	assert_int_equal(tres_array(&x), (uint32_t)dead);
	for (uint64_t o = 0; o < m->tail; o++) {
		if (m->dead[o]) {
			assert_int_equal(tres_u64(&x), o);
		}
	}
	tres_free(&x);
}

static void test_consumer_group_model(void **state)
{
	struct cgm *m = calloc(1, sizeof *m);
	struct store_cmd cmds[6];
	struct store_slice items[8];
	uint8_t want[6];
	uint64_t now = 1000;
	struct tdb t;

	assert_non_null(m);
	m->rng = 42;
	tdb_open(&t);
	for (int i = 0; i < 8; i++) {
		items[i] = S("x");
	}
	for (int e = 0; e < 1500; e++) {
		unsigned n = 1 + (unsigned)(cgm_rand(m) % 4);
		struct cgm_out out[6][16];
		size_t nout[6] = {0};
		uint64_t next_due[6] = {0};
		struct fsm_result *r;

		now += cgm_rand(m) % 30;
		for (unsigned i = 0; i < n; i++) {
			unsigned k = (unsigned)(cgm_rand(m) % 16);
			uint64_t o = m->tail ? cgm_rand(m) % (m->tail + 1) : 0;
			struct store_cmd *c = &cmds[i];

			if (k < 2 && m->tail + 8 < CGM_MAX) {
				*c = scmd(STORE_OP_STREAM_APPEND);
				c->items.n = 1 + (uint32_t)(cgm_rand(m) % 8);
				c->items.v = items;
				m->tail += c->items.n;
				want[i] = STORE_OK;
			} else if (k < 6) {
				*c = gcmd(STORE_OP_CG_POLL, 0);
				c->max = 1 + cgm_rand(m) % 6;
				c->visibility_ms = CGM_VIS;
				c->attempts = CGM_ATT;
				nout[i] = cgm_poll(m, now, c->max, out[i],
				                   &next_due[i]);
				want[i] = STORE_OK;
			} else if (k == 6 && e % 50 == 0) {
				*c = scmd(STORE_OP_STREAM_TRIM);
				c->offset = m->head + cgm_rand(m) % 6;
				if (c->offset > m->tail) {
					c->offset = m->tail;
				}
				if (c->offset > m->head) {
					m->head = c->offset;
				}
				want[i] = STORE_OK;
			} else {
				static const uint8_t ops[] = {
				    STORE_OP_CG_ACK,     STORE_OP_CG_ACK,
				    STORE_OP_CG_ACK,     STORE_OP_CG_NACK,
				    STORE_OP_CG_DISCARD, STORE_OP_CG_REDRIVE};
				uint8_t op = ops[cgm_rand(m) % sizeof ops];
				*c = gcmd(op, o);
				c->attempts = CGM_ATT;
				want[i] = cgm_settle(m, op, o);
			}
		}
		r = tdb_apply_entry(&t, G, now, cmds, n);
		for (unsigned i = 0; i < n; i++) {
			struct tres x;
			tres_init(&x, r[i].data, r[i].len);
			assert_int_equal(tres_status(&x), want[i]);
			if (cmds[i].op == STORE_OP_CG_POLL) {
				assert_int_equal(tres_array(&x), 2);
				assert_int_equal(tres_u64(&x), next_due[i]);
				assert_int_equal(tres_array(&x),
				                 (uint32_t)nout[i]);
				for (size_t j = 0; j < nout[i]; j++) {
					assert_int_equal(tres_array(&x), 3);
					assert_int_equal(tres_u64(&x),
					                 out[i][j].off);
					assert_int_equal(tres_u64(&x),
					                 out[i][j].att);
					(void)tres_bytes(&x, NULL);
				}
			}
			tres_free(&x);
		}
		free(r);
		if (e % 100 == 99) {
			cgm_check_state(&t, m);
		}
	}
	cgm_check_state(&t, m);
	tdb_close(&t);
	free(m);
}

/* ---- record runs: one key per append, read and trimmed per record ---- */

#define RUNS_MAX 4096

struct runs_model {
	uint64_t seed;
	uint64_t head, tail, bytes;
	uint64_t ts[RUNS_MAX];
	uint64_t run_last[RUNS_MAX]; /* last offset of each run, in order */
	size_t nruns;
	uint64_t cursor; /* the consumer group's next fresh offset */
};

static uint64_t runs_rand(struct runs_model *m)
{
	m->seed ^= m->seed << 13;
	m->seed ^= m->seed >> 7;
	m->seed ^= m->seed << 17;
	return m->seed;
}

/* Payloads differ in length so byte accounting is exercised. */
static size_t runs_payload(uint64_t off, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "p%llu", (unsigned long long)off);
	size_t len = (size_t)n;
	for (uint64_t i = 0; i < off % 7 && len + 1 < cap; i++) {
		buf[len++] = 'x';
	}
	buf[len] = '\0';
	return len;
}

static void runs_append(struct tdb *t, struct runs_model *m, uint64_t now,
                        uint32_t n)
{
	struct store_slice items[64];
	char bufs[64][32];
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND);
	struct tres x;

	for (uint32_t i = 0; i < n; i++) {
		size_t len = runs_payload(m->tail + i, bufs[i], sizeof bufs[i]);
		items[i].p = (const uint8_t *)bufs[i];
		items[i].len = len;
	}
	c.items.n = n;
	c.items.v = items;
	tapply(&x, t, G, now, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	assert_int_equal(tres_u64(&x), m->tail);
	assert_int_equal(tres_u64(&x), n);
	tres_free(&x);
	for (uint32_t i = 0; i < n; i++) {
		m->ts[m->tail] = now;
		m->bytes += items[i].len;
		m->tail++;
	}
	if (n > 0) {
		m->run_last[m->nruns++] = m->tail - 1;
	}
}

static void runs_read(struct tdb *t, struct runs_model *m, uint64_t from,
                      uint64_t max, uint64_t max_bytes)
{
	struct store_cmd c = scmd(STORE_OP_STREAM_READ);
	struct tres x;
	uint64_t lim = max ? max : 1000, n = 0, bytes = 0, off = from;

	c.offset = from;
	c.max = max;
	c.max_bytes = max_bytes;
	tread(&x, t, G, 0, &c);
	if (from < m->head || from > m->tail) {
		assert_int_equal(tres_status(&x), from < m->head
		                                      ? STORE_TOO_OLD
		                                      : STORE_IN_FUTURE);
		tres_free(&x);
		return;
	}
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	(void)tres_u64(&x); /* next, checked below */
	uint32_t got = tres_array(&x);
	for (uint32_t i = 0; i < got; i++, off++) {
		char want[32];
		size_t wlen = runs_payload(off, want, sizeof want), len;
		const char *p;

		assert_true(off < m->tail);
		assert_true(n < lim);
		assert_false(max_bytes > 0 && n > 0 && bytes >= max_bytes);
		assert_int_equal(tres_array(&x), 3);
		assert_int_equal(tres_u64(&x), off);
		assert_int_equal(tres_u64(&x), m->ts[off]);
		p = tres_bytes(&x, &len);
		assert_int_equal(len, wlen);
		assert_memory_equal(p, want, len);
		n++;
		bytes += len;
	}
	/* It stopped only where it had to. */
	assert_true(off == m->tail || n == lim ||
	            (max_bytes > 0 && n > 0 && bytes >= max_bytes));
	tres_free(&x);
}

static void runs_trim(struct tdb *t, struct runs_model *m, uint64_t below,
                      uint64_t keep_bytes, uint64_t max)
{
	struct store_cmd c = scmd(STORE_OP_STREAM_TRIM);
	uint64_t budget = max ? max : 10000, head = m->head, trimmed = 0;
	bool more = false;

	c.offset = below;
	c.retention_bytes = keep_bytes;
	c.max = max;
	for (uint64_t off = m->head; off < m->tail; off++) {
		char buf[32];
		size_t len = runs_payload(off, buf, sizeof buf);
		if (!((below > 0 && off < below) ||
		      (keep_bytes > 0 && m->bytes > keep_bytes))) {
			break;
		}
		if (budget == 0) {
			more = true;
			break;
		}
		budget--;
		head = off + 1;
		m->bytes -= len;
		trimmed++;
	}
	m->head = head;
	trim(t, 0, &c, head, trimmed, more);
}

static void runs_poll(struct tdb *t, struct runs_model *m, uint64_t max)
{
	struct store_cmd c = gcmd(STORE_OP_CG_POLL, 0);
	struct tres x;
	uint64_t from = m->cursor > m->head ? m->cursor : m->head;
	uint64_t n = m->tail - from < max ? m->tail - from : max;

	c.max = max;
	c.visibility_ms = 1000000;
	tapply(&x, t, G, 0, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	assert_int_equal(tres_array(&x), 2);
	(void)tres_u64(&x);
	assert_int_equal(tres_array(&x), (uint32_t)n);
	for (uint64_t i = 0; i < n; i++) {
		char want[32];
		size_t wlen = runs_payload(from + i, want, sizeof want), len;
		const char *p;

		assert_int_equal(tres_array(&x), 3);
		assert_int_equal(tres_u64(&x), from + i);
		assert_int_equal(tres_u64(&x), 1);
		p = tres_bytes(&x, &len);
		assert_int_equal(len, wlen);
		assert_memory_equal(p, want, len);
	}
	tres_free(&x);
	m->cursor = from + n;
}

/* Record keys of the shard left in the data column family. */
static size_t runs_keys(struct tdb *t)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *it;

	assert_int_equal(store_drain(t->s), 0);
	it = rocksdb_create_iterator_cf(t->db, ro, t->cf[3]);
	uint8_t pfx[5] = {0, 0, 0, G, 0x11};
	size_t n = 0;

	for (rocksdb_iter_seek(it, (const char *)pfx, sizeof pfx);
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl;
		const char *k = rocksdb_iter_key(it, &kl);
		if (kl < sizeof pfx || memcmp(k, pfx, sizeof pfx) != 0) {
			break;
		}
		n++;
	}
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	return n;
}

static void test_record_runs(void **state)
{
	static struct runs_model m;
	struct tdb t;
	struct store_stream_info info;
	uint64_t now = 1000;

	(void)state;
	memset(&m, 0, sizeof m);
	m.seed = 0x9e3779b97f4a7c15ull;
	tdb_open(&t);
	for (int step = 0; step < 400; step++) {
		uint64_t r = runs_rand(&m) % 100;
		uint64_t span = m.tail - m.head;

		now += runs_rand(&m) % 50;
		if (r < 35 && m.tail + 64 < RUNS_MAX) {
			runs_append(&t, &m, now,
			            (uint32_t)(runs_rand(&m) % 41));
		} else if (r < 65) {
			/* Any offset from below the head to past the tail. */
			uint64_t from = m.head + runs_rand(&m) % (span + 3);
			from = from >= 1 ? from - 1 : 0;
			runs_read(&t, &m, from, runs_rand(&m) % 50,
			          runs_rand(&m) % 2 ? 0 : runs_rand(&m) % 200);
		} else if (r < 75) {
			runs_trim(
			    &t, &m, m.head + runs_rand(&m) % (span / 4 + 2), 0,
			    runs_rand(&m) % 3 ? 0 : 1 + runs_rand(&m) % 9);
		} else if (r < 80) {
			runs_trim(&t, &m, 0,
			          m.bytes - runs_rand(&m) % (m.bytes / 4 + 1),
			          0);
		} else {
			runs_poll(&t, &m, 1 + runs_rand(&m) % 30);
		}
		assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info),
		                 0);
		assert_int_equal(info.head, m.head);
		assert_int_equal(info.tail, m.tail);
		assert_int_equal(info.bytes, m.bytes);
	}
	/* A run stays while the head is inside it; runs wholly below the
	 * head are gone. */
	{
		size_t live = 0;
		for (size_t i = 0; i < m.nruns; i++) {
			live += m.run_last[i] >= m.head;
		}
		assert_int_equal(runs_keys(&t), live);
	}
	assert_true(m.head > 0 && m.tail > m.head + 100);
	tdb_close(&t);
}

/* A large command is split into runs of at most STREAM_RUN_MAX_BYTES; a
 * record larger than that is a run of its own. */
static void test_record_runs_split(void **state)
{
	enum { BIG_N = 100, BIG_LEN = 8000, HUGE_LEN = 300 * 1024 };
	static struct store_slice items[BIG_N];
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND);
	struct store_stream_info info;
	struct tdb t;
	struct tres x;
	uint8_t *big = malloc((size_t)BIG_N * BIG_LEN);
	uint8_t *huge = malloc(HUGE_LEN);
	size_t per_run = (STREAM_RUN_MAX_BYTES - 12) / (4 + BIG_LEN);
	size_t runs = (BIG_N + per_run - 1) / per_run;

	(void)state;
	assert_non_null(big);
	assert_non_null(huge);
	for (size_t i = 0; i < (size_t)BIG_N * BIG_LEN; i++) {
		big[i] = (uint8_t)(i * 7 + i / BIG_LEN);
	}
	memset(huge, 'h', HUGE_LEN);
	for (int i = 0; i < BIG_N; i++) {
		items[i].p = big + (size_t)i * BIG_LEN;
		items[i].len = BIG_LEN;
	}
	tdb_open(&t);
	c.items.n = BIG_N;
	c.items.v = items;
	tapply(&x, &t, G, 100, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_true(runs > 1);
	assert_int_equal(runs_keys(&t), runs);
	/* A huge record alone, then two small ones in a run of their own. */
	items[0].p = huge;
	items[0].len = HUGE_LEN;
	items[1].p = big;
	items[1].len = 10;
	items[2].p = big + 10;
	items[2].len = 20;
	c.items.n = 3;
	tapply(&x, &t, G, 200, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_int_equal(runs_keys(&t), runs + 2);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.tail, BIG_N + 3);
	assert_int_equal(info.bytes, (uint64_t)BIG_N * BIG_LEN + HUGE_LEN + 30);
	/* Every record reads back from every starting offset around the
	 * run boundaries. */
	for (uint64_t from = 0; from < BIG_N + 3; from++) {
		struct store_cmd r = scmd(STORE_OP_STREAM_READ);
		r.offset = from;
		r.max = 3;
		tread(&x, &t, G, 300, &r);
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_array(&x), 2);
		uint64_t next = tres_u64(&x);
		uint32_t n = tres_array(&x);
		assert_int_equal(next, from + n);
		assert_int_equal(n,
		                 BIG_N + 3 - from < 3 ? BIG_N + 3 - from : 3);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t off = from + i;
			size_t len;
			const char *p;
			assert_int_equal(tres_array(&x), 3);
			assert_int_equal(tres_u64(&x), off);
			assert_int_equal(tres_u64(&x), off < BIG_N ? 100 : 200);
			p = tres_bytes(&x, &len);
			if (off < BIG_N) {
				assert_int_equal(len, BIG_LEN);
				assert_memory_equal(p, big + off * BIG_LEN,
				                    BIG_LEN);
			} else if (off == BIG_N) {
				assert_int_equal(len, HUGE_LEN);
				assert_memory_equal(p, huge, HUGE_LEN);
			} else {
				assert_int_equal(len,
				                 off == BIG_N + 1 ? 10 : 20);
			}
		}
		tres_free(&x);
	}
	/* Trimming past the first run deletes it and only it. */
	c = scmd(STORE_OP_STREAM_TRIM);
	c.offset = per_run + 1;
	trim(&t, 300, &c, per_run + 1, per_run + 1, false);
	assert_int_equal(runs_keys(&t), runs + 1);
	tdb_close(&t);
	free(big);
	free(huge);
}

/* A command whose run is exactly STREAM_RUN_MAX_BYTES is one run (taken
 * whole from the command's list); one byte more splits it. */
static void test_record_runs_boundary(void **state)
{
	enum { FIRST = 1000 };
	static uint8_t buf[STREAM_RUN_MAX_BYTES];
	struct store_slice items[2];
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND);
	struct store_stream_info info;
	struct tdb t;
	struct tres x;
	/* Run header 12, two u32 lengths. */
	size_t second = STREAM_RUN_MAX_BYTES - 12 - 8 - FIRST;

	(void)state;
	for (size_t i = 0; i < sizeof buf; i++) {
		buf[i] = (uint8_t)(i * 13 + 5);
	}
	tdb_open(&t);
	items[0].p = buf;
	items[0].len = FIRST;
	items[1].p = buf + FIRST;
	items[1].len = second;
	c.items.n = 2;
	c.items.v = items;
	tapply(&x, &t, G, 100, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_int_equal(runs_keys(&t), 1);
	items[1].len = second + 1;
	tapply(&x, &t, G, 200, &c);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_int_equal(runs_keys(&t), 3);
	assert_int_equal(store_stream_info(t.s, G, S(SCOPE), 0, &info), 0);
	assert_int_equal(info.tail, 4);
	assert_int_equal(info.bytes, 2 * (FIRST + second) + 1);
	for (uint64_t off = 0; off < 4; off++) {
		struct store_cmd r = scmd(STORE_OP_STREAM_READ);
		size_t len;
		const char *p;
		r.offset = off;
		r.max = 1;
		tread(&x, &t, G, 300, &r);
		assert_int_equal(tres_status(&x), STORE_OK);
		assert_int_equal(tres_array(&x), 2);
		assert_int_equal(tres_u64(&x), off + 1);
		assert_int_equal(tres_array(&x), 1);
		assert_int_equal(tres_array(&x), 3);
		assert_int_equal(tres_u64(&x), off);
		assert_int_equal(tres_u64(&x), off < 2 ? 100 : 200);
		p = tres_bytes(&x, &len);
		assert_int_equal(len, off % 2 == 0 ? FIRST
		                      : off == 1   ? second
		                                   : second + 1);
		assert_memory_equal(p, off % 2 == 0 ? buf : buf + FIRST, len);
		tres_free(&x);
	}
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scopes),
	    cmocka_unit_test(test_append_read),
	    cmocka_unit_test(test_retention),
	    cmocka_unit_test(test_idempotent_producers),
	    cmocka_unit_test(test_producer_eviction),
	    cmocka_unit_test(test_consumer_groups),
	    cmocka_unit_test(test_consumer_groups_and_retention),
	    cmocka_unit_test(test_consumer_group_model),
	    cmocka_unit_test(test_record_runs),
	    cmocka_unit_test(test_record_runs_split),
	    cmocka_unit_test(test_record_runs_boundary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
