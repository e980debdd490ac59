/* The apply observer: stream appends and cache changes are reported after
 * their entry is written, with the offsets apply chose; errors, duplicates,
 * deletes of absent keys, expiry and replays report nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/store_test_util.h"

#define G 3
#define SCOPE "acme/prod/orders"

struct seen {
	struct tdb *t;
	char log[8192];
	size_t len;
	unsigned appends, changes;
};

static void say(struct seen *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->log + s->len, sizeof s->log - s->len, fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof s->log - s->len);
	s->len += (size_t)n;
}

static void on_append(void *data, uint32_t group, struct store_slice scope,
                      uint32_t shard, uint64_t base,
                      const struct store_list *records)
{
	struct seen *s = data;
	struct store_list_iter it;
	struct store_slice r;
	struct store_stream_info info;

	s->appends++;
	say(s, "A g%u %.*s/%u @%llu:", (unsigned)group, (int)scope.len,
	    (const char *)scope.p, (unsigned)shard, (unsigned long long)base);
	store_list_iter_init(&it, records);
	while (store_list_next(&it, &r)) {
		say(s, " %.*s", (int)r.len, (const char *)r.p);
	}
	say(s, ";");
	/* The entry is written when the observer runs: reads see it. */
	assert_int_equal(store_stream_info(s->t->s, group, scope, shard, &info),
	                 0);
	assert_int_equal(info.tail, base + records->n);
}

static void on_change(void *data, uint32_t group, struct store_slice scope,
                      uint32_t shard, uint64_t offset, struct store_slice key,
                      const struct store_slice *value, uint64_t expires_at)
{
	struct seen *s = data;
	s->changes++;
	say(s, "C g%u %.*s/%u @%llu %.*s=", (unsigned)group, (int)scope.len,
	    (const char *)scope.p, (unsigned)shard, (unsigned long long)offset,
	    (int)key.len, (const char *)key.p);
	if (value == NULL) {
		say(s, "<deleted>");
	} else {
		say(s, "%.*s", (int)value->len, (const char *)value->p);
	}
	say(s, " exp%llu;", (unsigned long long)expires_at);
}

static struct store_cmd scmd(uint8_t op, uint32_t shard)
{
	struct store_cmd c;
	memset(&c, 0, sizeof c);
	c.op = op;
	c.scope = S(SCOPE);
	c.shard = shard;
	return c;
}

static void test_streams_and_caches(void **state)
{
	struct tdb t;
	struct seen s;
	struct store_observer o = {on_append, on_change, &s, NULL};
	(void)state;
	tdb_open(&t);
	memset(&s, 0, sizeof s);
	s.t = &t;
	store_set_observer(t.s, &o);

	/* One entry: two appends to two shards, a put, a delete of an
	 * absent key (nothing), a delete of the put key. */
	struct store_slice p1[2] = {S("a"), S("b")};
	struct store_slice p2[1] = {S("c")};
	struct store_cmd cmds[6];
	cmds[0] = scmd(STORE_OP_STREAM_APPEND, 0);
	cmds[0].items.n = 2;
	cmds[0].items.v = p1;
	cmds[1] = scmd(STORE_OP_STREAM_APPEND, 1);
	cmds[1].items.n = 1;
	cmds[1].items.v = p2;
	cmds[2] = scmd(STORE_OP_CACHE_PUT, 2);
	cmds[2].key = S("k");
	cmds[2].value = S("v");
	cmds[2].ttl_ms = 500;
	cmds[3] = scmd(STORE_OP_CACHE_DELETE, 2);
	cmds[3].key = S("absent");
	cmds[4] = scmd(STORE_OP_CACHE_DELETE, 2);
	cmds[4].key = S("k");
	/* An invalid command (empty scope) reports nothing. */
	cmds[5] = scmd(STORE_OP_STREAM_APPEND, 0);
	cmds[5].scope = S("");
	cmds[5].items.n = 1;
	cmds[5].items.v = p2;
	struct fsm_result *r = tdb_apply_entry(&t, G, 1000, cmds, 6);
	for (int i = 0; i < 6; i++) {
		free(r[i].data);
	}
	free(r);
	assert_string_equal(s.log, "A g3 acme/prod/orders/0 @0: a b;"
	                           "A g3 acme/prod/orders/1 @0: c;"
	                           "C g3 acme/prod/orders/2 @0 k=v exp1500;"
	                           "C g3 acme/prod/orders/2 @1 k=<deleted> "
	                           "exp0;");

	/* Next entry continues the offsets. */
	s.len = 0;
	s.log[0] = '\0';
	struct tres x;
	tapply(&x, &t, G, 2000, &cmds[0]);
	tres_free(&x);
	assert_string_equal(s.log, "A g3 acme/prod/orders/0 @2: a b;");

	/* Idempotent producer: the first batch reports, its duplicate does
	 * not. */
	s.len = 0;
	s.log[0] = '\0';
	struct store_cmd idem = scmd(STORE_OP_STREAM_APPEND_IDEM, 0);
	idem.producer = 77;
	idem.seq = 0;
	idem.items.n = 1;
	idem.items.v = p2;
	tapply(&x, &t, G, 3000, &idem);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	tapply(&x, &t, G, 3001, &idem);
	assert_int_equal(tres_status(&x), STORE_OK);
	tres_free(&x);
	assert_string_equal(s.log, "A g3 acme/prod/orders/0 @4: c;");
	assert_int_equal(s.appends, 4);

	/* Expiry reclaims without a change; trims and reads report
	 * nothing. */
	s.len = 0;
	s.log[0] = '\0';
	struct store_cmd put = cmds[2];
	tapply(&x, &t, G, 4000, &put);
	tres_free(&x);
	uint8_t *ecmd = NULL;
	size_t elen = 0;
	assert_int_equal(store_expire_scan(t.s, G, 10000, 100, &ecmd, &elen),
	                 0);
	assert_true(elen > 0);
	struct store_cmd ec;
	const char *msg;
	assert_int_equal(store_cmd_decode(ecmd, elen, &ec, &msg), 0);
	tapply(&x, &t, G, 10000, &ec);
	tres_free(&x);
	free(ecmd);
	struct store_cmd trim = scmd(STORE_OP_STREAM_TRIM, 0);
	trim.offset = 2;
	tapply(&x, &t, G, 10001, &trim);
	tres_free(&x);
	assert_string_equal(s.log, "C g3 acme/prod/orders/2 @2 k=v exp4500;");

	/* Without an observer nothing is called. */
	store_set_observer(t.s, NULL);
	unsigned before = s.appends;
	tapply(&x, &t, G, 11000, &cmds[0]);
	tres_free(&x);
	assert_int_equal(s.appends, before);
	tdb_close(&t);
}

/* A replayed entry (index at or below the applied one) reports nothing. */
static void test_replay_is_silent(void **state)
{
	struct tdb t;
	struct seen s;
	struct store_observer o = {on_append, NULL, &s, NULL};
	(void)state;
	tdb_open(&t);
	memset(&s, 0, sizeof s);
	s.t = &t;
	store_set_observer(t.s, &o);
	struct store_slice p[1] = {S("x")};
	struct store_cmd c = scmd(STORE_OP_STREAM_APPEND, 0);
	c.items.n = 1;
	c.items.v = p;
	struct tres x;
	tapply(&x, &t, G, 1, &c);
	tres_free(&x);
	assert_int_equal(s.appends, 1);

	size_t len;
	uint8_t *enc = tcmd_encode(&c, &len);
	struct fsm_cmd fc = {enc, len};
	struct fsm_entry e = {.group = G,
	                      .index = t.next_index[G] - 1,
	                      .term = 1,
	                      .now_ms = 2,
	                      .n_cmds = 1,
	                      .cmds = &fc};
	struct fsm_result res = {0};
	assert_int_equal(store_apply(t.s, &e, &res), 0);
	assert_int_equal(res.len, 0);
	free(res.data);
	free(enc);
	assert_int_equal(s.appends, 1);
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_streams_and_caches),
	    cmocka_unit_test(test_replay_is_silent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
