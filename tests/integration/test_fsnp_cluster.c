/* Integration: the FSNP KV surface on a 3-node cluster. Three real
 * lodestone processes; for a hash-tagged key space the test finds the
 * shard's leader (ROUTE) and drives strings, a hash (also with a field
 * name that is not UTF-8), a list, a set, a sorted set, a lock, a rate
 * limit, PIPELINE and ROUTE/SHARDS once through a node that does not lead
 * the shard (it forwards) and once through the leader, checking that each
 * sees the other's writes. DBSIZE and a SCAN walk (COMMAND_EXEC) count
 * and return the keys of both data groups, from any node. A node stopped
 * while the requests it forwarded still wait for a leader exits cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

#define NODES 3

static struct harness_cluster cl;

static struct ftc_msg call(struct ftc *c, uint16_t op, const char *fmt, ...)
{
	struct wbuf b;
	struct ftc_msg m;
	va_list ap;
	va_start(ap, fmt);
	ftc_vbody(&b, fmt, ap);
	va_end(ap);
	assert_int_equal(ftc_call(c, 1, op, 0, &b, &m), 0);
	wbuf_free(&b);
	return m;
}

static struct ftc_msg callv(struct ftc *c, uint16_t op, struct wbuf *b)
{
	struct ftc_msg m;
	assert_int_equal(ftc_call(c, 1, op, 0, b, &m), 0);
	wbuf_free(b);
	return m;
}

static void ok_str(struct ftc_msg m, const char *s)
{
	assert_int_equal(m.status, 0);
	if (!ftc_str_eq(&m.value, s)) {
		fail_msg("expected '%s'", s);
	}
	ftc_msg_free(&m);
}

static void ok_int(struct ftc_msg m, int64_t n)
{
	int64_t v = 0;
	assert_int_equal(m.status, 0);
	assert_int_equal(fsnp_val_i64(&m.value, &v), 0);
	assert_int_equal(v, n);
	ftc_msg_free(&m);
}

static void ok_count(struct ftc_msg m, uint32_t n)
{
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, n);
	ftc_msg_free(&m);
}

static void err_has(struct ftc_msg m, const char *text)
{
	char msg[512];
	assert_int_not_equal(m.status, 0);
	ftc_error_text(&m, msg, sizeof msg);
	if (strstr(msg, text) == NULL) {
		fail_msg("error '%s' lacks '%s'", msg, text);
	}
	ftc_msg_free(&m);
}

static int setup(void **state)
{
	/* Forwarded requests outlive a stop's 5 s drain (the last test). */
	static const char *const extra[] = {
	    "--shards", "2", "--forward-timeout-ms", "20000", NULL};
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

/* Index of the node leading `key`'s shard, once every node's routing
 * snapshot names it (-1 after 20 s). */
static int leader_of(const char *key)
{
	for (int tries = 0; tries < 400; tries++) {
		int agreed = -1;
		bool all = true;
		for (unsigned i = 0; i < NODES && all; i++) {
			struct ftc c;
			struct ftc_msg m;
			int found = -1;
			assert_int_equal(ftc_connect(&c, cl.nodes[i].fsnp), 0);
			m = call(&c, FSNP_OP_ROUTE, "key=s", key);
			assert_int_equal(m.status, 0);
			if (!ftc_map_str(&m.value, "hint", "local_fallback")) {
				int64_t p =
				    ftc_map_int(&m.value, "native_port");
				for (unsigned k = 0; k < NODES; k++) {
					if (cl.nodes[k].fsnp == p) {
						found = (int)k;
					}
				}
			}
			ftc_msg_free(&m);
			ftc_close(&c);
			if (found < 0 || (agreed >= 0 && found != agreed)) {
				all = false;
			}
			agreed = found;
		}
		if (all) {
			return agreed;
		}
		usleep(50000);
	}
	return -1;
}

static void key(char *out, size_t cap, const char *p, const char *name)
{
	snprintf(out, cap, "{kv}:%s:%s", p, name);
}

/* The KV surface under prefix `p` through `c`. */
static void kv_surface(struct ftc *c, const char *p)
{
	char k[64], h[64], l[64], s[64], z[64], lk[64], rl[64];
	struct fsnp_writer w;
	struct wbuf b;
	struct ftc_msg m;
	struct fsnp_val v, pair, x;
	struct fsnp_iter it;

	key(k, sizeof k, p, "str");
	key(h, sizeof h, p, "hash");
	key(l, sizeof l, p, "list");
	key(s, sizeof s, p, "set");
	key(z, sizeof z, p, "zset");
	key(lk, sizeof lk, p, "lock");
	key(rl, sizeof rl, p, "rl");

	/* Strings */
	ok_str(call(c, FSNP_OP_SET, "key=s value=s", k, "v1"), "OK");
	ok_str(call(c, FSNP_OP_GET, "key=s", k), "v1");
	m = call(c, FSNP_OP_CAS, "key=s expected=s value=s", k, "v1", "v2");
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_TRUE);
	ftc_msg_free(&m);
	const char *ks[] = {k, lk};
	m = call(c, FSNP_OP_MGET, "keys=a", ks, 2);
	ok_count(m, 2);

	/* Hash, one field name not UTF-8: HGETALL answers pairs. */
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, h);
	fsnp_w_key(&w, "fields");
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "f1");
	fsnp_w_str(&w, "a");
	fsnp_w_key_bin(&w, "\xff\xfe", 2);
	fsnp_w_str(&w, "bin");
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	ok_int(callv(c, FSNP_OP_HSET, &b), 2);
	ok_str(call(c, FSNP_OP_HGET, "key=s field=s", h, "f1"), "a");
	m = call(c, FSNP_OP_HGETALL, "key=s", h);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.tag, FSNP_ARRAY);
	assert_int_equal(m.value.as.count, 2);
	fsnp_iter_init(&it, &m.value);
	bool saw_bin = false;
	while (fsnp_iter_next(&it, NULL, &pair)) {
		struct fsnp_iter pi;
		assert_int_equal(pair.tag, FSNP_ARRAY);
		assert_int_equal(pair.as.count, 2);
		fsnp_iter_init(&pi, &pair);
		fsnp_iter_next(&pi, NULL, &x);
		fsnp_iter_next(&pi, NULL, &v);
		if (x.as.bin.len == 2 &&
		    memcmp(x.as.bin.ptr, "\xff\xfe", 2) == 0) {
			assert_true(ftc_str_eq(&v, "bin"));
			saw_bin = true;
		}
	}
	assert_true(saw_bin);
	ftc_msg_free(&m);
	const char *hd[] = {h, "\xff\xfe"};
	struct wbuf eb;
	ftc_body(&eb, "command=s args=a", "HDEL", hd, 2);
	ok_int(callv(c, FSNP_OP_COMMAND_EXEC, &eb), 1);
	/* All text again: a map. */
	m = call(c, FSNP_OP_HGETALL, "key=s", h);
	assert_int_equal(m.value.tag, FSNP_MAP);
	assert_true(ftc_map_str(&m.value, "f1", "a"));
	ftc_msg_free(&m);

	/* List */
	const char *lv[] = {"a", "b", "c"};
	ok_int(call(c, FSNP_OP_RPUSH, "key=s values=a", l, lv, 3), 3);
	ok_int(call(c, FSNP_OP_LPUSH, "key=s values=a", l, lv, 1), 4);
	ok_count(call(c, FSNP_OP_LRANGE, "key=s start=i stop=i", l, (int64_t)0,
	              (int64_t)-1),
	         4);
	ok_str(call(c, FSNP_OP_LPOP, "key=s", l), "a");
	ok_str(call(c, FSNP_OP_RPOP, "key=s", l), "c");

	/* Set */
	ok_int(call(c, FSNP_OP_SADD, "key=s members=a", s, lv, 3), 3);
	ok_int(call(c, FSNP_OP_SREM, "key=s members=a", s, lv, 1), 1);
	ok_count(call(c, FSNP_OP_SMEMBERS, "key=s", s), 2);
	ok_int(call(c, FSNP_OP_SISMEMBER, "key=s member=s", s, "b"), 1);

	/* Sorted set */
	const char *za[] = {z, "2.5", "x", "1", "y"};
	ftc_body(&eb, "command=s args=a", "ZADD", za, 5);
	ok_int(callv(c, FSNP_OP_COMMAND_EXEC, &eb), 2);
	ok_str(call(c, FSNP_OP_ZSCORE, "key=s member=s", z, "x"), "2.5");
	ok_count(call(c, FSNP_OP_ZRANGE, "key=s start=i stop=i withscores=b", z,
	              (int64_t)0, (int64_t)-1, 1),
	         4);
	const char *zr[] = {"y"};
	ok_int(call(c, FSNP_OP_ZREM, "key=s members=a", z, zr, 1), 1);

	/* Lock */
	ok_str(call(c, FSNP_OP_LOCK, "key=s owner=s ttl_ms=i", lk, "o1",
	            (int64_t)10000),
	       "OK");
	err_has(call(c, FSNP_OP_LOCK, "key=s owner=s ttl_ms=i", lk, "o2",
	             (int64_t)10000),
	        "held by another owner");
	ok_int(call(c, FSNP_OP_EXTEND, "key=s owner=s ttl_ms=i", lk, "o1",
	            (int64_t)10000),
	       1);
	ok_int(call(c, FSNP_OP_UNLOCK, "key=s owner=s", lk, "o1"), 1);

	/* Rate limit: 2 allowed, then denied. */
	for (int i = 0; i < 3; i++) {
		m = call(c, FSNP_OP_RATELIMIT_ADD,
		         "key=s window_ms=i max=i count=i", rl, (int64_t)60000,
		         (int64_t)2, (int64_t)1);
		assert_int_equal(m.status, 0);
		assert_int_equal(m.value.as.count, 4);
		fsnp_iter_init(&it, &m.value);
		fsnp_iter_next(&it, NULL, &v);
		assert_true(ftc_str_eq(&v, i < 2 ? "allowed" : "denied"));
		ftc_msg_free(&m);
	}

	/* PIPELINE, same_shard: SET then GET of one key. */
	struct wbuf items[2];
	ftc_body(&items[0], "key=s value=s", k, "piped");
	ftc_body(&items[1], "key=s", k);
	uint16_t ops[2] = {FSNP_OP_SET, FSNP_OP_GET};
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "atomicity");
	fsnp_w_str(&w, "same_shard");
	fsnp_w_key(&w, "commands");
	fsnp_w_array_begin(&w);
	for (int i = 0; i < 2; i++) {
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "opcode");
		fsnp_w_i64(&w, ops[i]);
		fsnp_w_key(&w, "body");
		assert_int_equal(fsnp_value_decode(items[i].data, items[i].len,
		                                   NULL, &v, NULL),
		                 0);
		fsnp_w_val(&w, &v);
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	wbuf_free(&items[0]);
	wbuf_free(&items[1]);
	m = callv(c, FSNP_OP_PIPELINE, &b);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.value.as.count, 2);
	fsnp_iter_init(&it, &m.value);
	fsnp_iter_next(&it, NULL, &v);
	fsnp_iter_next(&it, NULL, &v);
	assert_true(ftc_map_str(&v, "value", "piped"));
	ftc_msg_free(&m);

	/* ROUTE and SHARDS: every range has a known leader endpoint. */
	m = call(c, FSNP_OP_ROUTE, "key=s", k);
	assert_int_equal(m.status, 0);
	assert_false(ftc_map_str(&m.value, "hint", "leader_unknown"));
	ftc_msg_free(&m);
	m = call(c, FSNP_OP_SHARDS, "");
	assert_int_equal(m.status, 0);
	assert_int_equal(ftc_map_int(&m.value, "shard_count"), 2);
	assert_int_equal(fsnp_map_array(&m.value, "ranges", &v), 0);
	int64_t next = 0;
	fsnp_iter_init(&it, &v);
	while (fsnp_iter_next(&it, NULL, &x)) {
		assert_int_equal(ftc_map_int(&x, "first_slot"), next);
		next = ftc_map_int(&x, "last_slot") + 1;
		bool known = false;
		for (unsigned i = 0; i < NODES; i++) {
			known = known || ftc_map_int(&x, "native_port") ==
			                     cl.nodes[i].fsnp;
		}
		assert_true(known);
	}
	assert_int_equal(next, 1024);
	ftc_msg_free(&m);
}

static void test_kv_via_follower_and_leader(void **state)
{
	struct ftc lc, fc;
	char k[64];
	(void)state;
	int leader = leader_of("{kv}:probe");
	assert_true(leader >= 0);
	int follower = (leader + 1) % NODES;
	assert_int_equal(ftc_connect(&fc, cl.nodes[follower].fsnp), 0);
	assert_int_equal(ftc_connect(&lc, cl.nodes[leader].fsnp), 0);
	kv_surface(&fc, "f");
	kv_surface(&lc, "l");
	/* Each node reads the other's writes (linearizable reads on the
	 * leader, forwarded from the follower). */
	key(k, sizeof k, "f", "str");
	ok_str(call(&lc, FSNP_OP_GET, "key=s", k), "piped");
	ok_str(call(&fc, FSNP_OP_SET, "key=s value=s", k, "again"), "OK");
	ok_str(call(&lc, FSNP_OP_GET, "key=s", k), "again");
	key(k, sizeof k, "l", "list");
	ok_count(call(&fc, FSNP_OP_LRANGE, "key=s start=i stop=i", k,
	              (int64_t)0, (int64_t)-1),
	         2);
	ftc_close(&fc);
	ftc_close(&lc);
}

static struct ftc_msg exec_args(struct ftc *c, const char *cmd, int argc,
                                const char **argv)
{
	struct wbuf b;
	ftc_body(&b, "command=s args=a", cmd, argv, argc);
	return callv(c, FSNP_OP_COMMAND_EXEC, &b);
}

/* Keys in both data groups: DBSIZE sums every group, SCAN (small pages,
 * cursors carried from page to page and from node to node, bounded) and
 * KEYS return them all, asked of every node. */
static void test_keyspace_every_group(void **state)
{
	enum { NK = 12 };
	char keys[NK][32];
	unsigned per_group[3] = {0, 0, 0};
	struct ftc c;
	(void)state;
	assert_int_equal(ftc_connect(&c, cl.nodes[0].fsnp), 0);
	for (unsigned i = 0; i < NK; i++) {
		snprintf(keys[i], sizeof keys[i], "ks:%u", i);
		unsigned slot =
		    fsnp_slot_of((const uint8_t *)keys[i], strlen(keys[i]));
		per_group[1 + fsnp_slot_shard(slot, 2)]++;
		ok_str(call(&c, FSNP_OP_SET, "key=s value=s", keys[i], "v"),
		       "OK");
	}
	/* the keys do land in both groups */
	assert_true(per_group[1] > 0 && per_group[2] > 0);
	ftc_close(&c);
	for (unsigned n = 0; n < NODES; n++) {
		bool seen[NK] = {false};
		char cursor[32] = "0";
		int64_t size = 0;
		struct ftc_msg m;
		struct ftc other;
		assert_int_equal(ftc_connect(&c, cl.nodes[n].fsnp), 0);
		assert_int_equal(
		    ftc_connect(&other, cl.nodes[(n + 1) % NODES].fsnp), 0);
		m = exec_args(&c, "DBSIZE", 0, NULL);
		assert_int_equal(m.status, 0);
		assert_int_equal(fsnp_val_i64(&m.value, &size), 0);
		assert_true(size >= NK);
		ftc_msg_free(&m);
		for (int page = 0; page < 1000; page++) {
			const char *args[] = {cursor, "MATCH", "ks:*", "COUNT",
			                      "2"};
			struct fsnp_iter it, kit;
			struct fsnp_val cur, list, k;
			/* every other page on the next node: a cursor naming
			 * another node's kept key still resumes in time */
			m = exec_args(page % 2 ? &other : &c, "SCAN", 5, args);
			assert_int_equal(m.status, 0);
			assert_int_equal(m.value.tag, FSNP_ARRAY);
			fsnp_iter_init(&it, &m.value);
			assert_true(fsnp_iter_next(&it, NULL, &cur));
			assert_true(fsnp_iter_next(&it, NULL, &list));
			/* [cursor, keys]: the node keeps the next key */
			assert_false(fsnp_iter_next(&it, NULL, &k));
			assert_int_equal(cur.tag, FSNP_BIN);
			assert_true(cur.as.bin.len < sizeof cursor);
			memcpy(cursor, cur.as.bin.ptr, cur.as.bin.len);
			cursor[cur.as.bin.len] = '\0';
			fsnp_iter_init(&kit, &list);
			while (fsnp_iter_next(&kit, NULL, &k)) {
				char name[32];
				unsigned i;
				assert_int_equal(k.tag, FSNP_BIN);
				assert_true(k.as.bin.len > 3 &&
				            k.as.bin.len < sizeof name);
				memcpy(name, k.as.bin.ptr, k.as.bin.len);
				name[k.as.bin.len] = '\0';
				assert_memory_equal(name, "ks:", 3);
				i = (unsigned)atoi(name + 3);
				assert_true(i < NK);
				seen[i] = true;
			}
			ftc_msg_free(&m);
			if (strcmp(cursor, "0") == 0) {
				break;
			}
		}
		assert_string_equal(cursor, "0");
		for (unsigned i = 0; i < NK; i++) {
			assert_true(seen[i]);
		}
		const char *pat[] = {"ks:*"};
		ok_count(exec_args(&c, "KEYS", 1, pat), NK);
		ftc_close(&other);
		ftc_close(&c);
	}
}

/* A node stopped (SIGTERM) while requests it forwarded still wait for a
 * leader (the two other nodes are stopped with SIGSTOP, so it leads
 * nothing): the drain's grace ends first, the requests are failed when
 * forwarding closes, from the FSNP server's close callback; the node exits
 * 0. (The server was once freed by those late answers while its
 * close callback ran, and then read: under ASan the node aborted.) */
static void test_stop_with_requests_pending(void **state)
{
	struct ftc c;
	int st = -1;
	(void)state;

	assert_int_equal(harness_node_signal(&cl, 0, SIGSTOP, NULL), 0);
	assert_int_equal(harness_node_signal(&cl, 1, SIGSTOP, NULL), 0);
	/* Node 3 alone steps down from what it led: it leads nothing when
	 * it stops, so its forwarding closes as soon as FSNP has closed. */
	harness_nap(3000);
	assert_int_equal(ftc_connect(&c, cl.nodes[2].fsnp), 0);
	for (unsigned i = 0; i < 16; i++) {
		char k[32];
		struct wbuf b;
		snprintf(k, sizeof k, "{p%u}:k", i);
		ftc_body(&b, "key=s value=s", k, "v");
		ftc_send(&c, 1 + i % 4, FSNP_OP_SET, 0, &b);
		wbuf_free(&b);
	}
	harness_nap(500);
	assert_int_equal(harness_node_signal(&cl, 2, SIGTERM, &st), 0);
	ftc_close(&c);
	assert_int_equal(harness_node_signal(&cl, 0, SIGCONT, NULL), 0);
	assert_int_equal(harness_node_signal(&cl, 1, SIGCONT, NULL), 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kv_via_follower_and_leader),
	    cmocka_unit_test(test_keyspace_every_group),
	    cmocka_unit_test(test_stop_with_requests_pending),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
