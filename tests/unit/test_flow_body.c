/* flow/: routing (partitions, hash tags, slots), the FSNP body decoders
 * and the command envelope, without a store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "wire/flow_route.h"
#include "tests/unit/flow_test_util.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

#define U(s) (const uint8_t *)(s), strlen(s)

static void test_route(void **state)
{
	char tag[FLOW_TAG_MAX], buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *part;
	size_t len;
	unsigned b;

	(void)state;
	assert_int_equal(flow_route_bucket(U("order-1")), 239);
	flow_route_partition(U("order-1"), NULL, 0, buf, &part, &len);
	assert_int_equal(len, strlen("__flow_auto__:239"));
	assert_memory_equal(part, "__flow_auto__:239", len);
	assert_int_equal(flow_route_tag(part, len, tag), 6);
	assert_string_equal(tag, "fa:239");
	assert_int_equal(flow_route_slot(part, len), 794);
	assert_int_equal(flow_route_tag(U("tenant-a"), tag), 45);
	assert_string_equal(tag,
	                    "f:gKcHr33HfuEij5EnGA85ZINeW-tMSrDYEvD-dZNXmzo");
	assert_int_equal(flow_route_slot(U("tenant-a")), 914);
	/* The slot is the FSNP slot of the braced tag. */
	assert_int_equal(
	    fsnp_slot_of(U("f:{f:gKcHr33HfuEij5EnGA85ZINeW-tMSrDYEvD-dZNXmzo}"
	                   ":s:x")),
	    914);
	/* Literal auto partitions. */
	assert_true(flow_route_is_auto(U("__flow_auto__:7"), &b));
	assert_int_equal(b, 7);
	assert_true(flow_route_is_auto(U("__flow_auto__:255"), &b));
	assert_false(flow_route_is_auto(U("__flow_auto__:256"), &b));
	assert_false(flow_route_is_auto(U("__flow_auto__:07"), &b));
	assert_false(flow_route_is_auto(U("__flow_auto__:"), &b));
	assert_false(flow_route_is_auto(U("__flow_auto__:1a"), &b));
	assert_int_equal(flow_route_tag(U("__flow_auto__:0"), tag), 4);
	assert_string_equal(tag, "fa:0");
	assert_int_equal(flow_route_slot(U("__flow_auto__:0")), 1);
	/* An explicit partition key wins over the id. */
	flow_route_partition(U("order-1"), U("tenant-a"), buf, &part, &len);
	assert_memory_equal(part, "tenant-a", len);
	/* Shards: 1024 slots over 3 shards. */
	assert_int_equal(flow_route_shard(U("tenant-a"), 3), 2);
	assert_int_equal(flow_route_shard(U("__flow_auto__:0"), 3), 0);
}

static int decode(uint16_t op, struct fbody *b, struct flow_req *q,
                  struct flow_err *e)
{
	int rv;

	fb_end(b);
	rv = flow_body_decode_bytes(op, b->b.data, b->b.len, q, e);
	fb_free(b);
	return rv;
}

static void test_body(void **state)
{
	struct fbody b;
	struct flow_req q;
	struct flow_err e;

	(void)state;
	/* An empty body is {}: CREATE then misses its id. */
	assert_int_equal(
	    flow_body_decode_bytes(FSNP_OP_FLOW_CREATE, NULL, 0, &q, &e), -1);
	assert_int_equal(e.status, 6);
	assert_string_equal(e.msg, "ERR native field id must be binary");
	assert_int_equal(
	    flow_body_decode_bytes(FSNP_OP_FLOW_INFO, NULL, 0, &q, &e), -1);
	assert_string_equal(e.msg, "ERR native field type must be binary");
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_RETENTION_CLEANUP,
	                                        NULL, 0, &q, &e),
	                 0);
	/* Truncated values. */
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_GET,
	                                        (const uint8_t *)"\x06\x00", 2,
	                                        &q, &e),
	                 -1);
	assert_string_equal(e.msg,
	                    "ERR native value has unknown or truncated tag");
	/* Options: type checks name the field. */
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "lease_token", "t");
	fb_str(&b, "fencing_token", "1");
	assert_int_equal(decode(FSNP_OP_FLOW_COMPLETE, &b, &q, &e), -1);
	assert_int_equal(e.status, 6);
	assert_string_equal(e.msg, "ERR native field fencing_token must be a "
	                           "non-negative integer");
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "t");
	fb_str(&b, "priority", "high");
	assert_int_equal(decode(FSNP_OP_FLOW_CREATE, &b, &q, &e), -1);
	assert_int_equal(e.status, 1);
	assert_string_equal(e.msg,
	                    "ERR flow priority must be a non-negative integer");
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "t");
	fb_int(&b, "run_at_ms", INT64_C(9007199254740992));
	assert_int_equal(decode(FSNP_OP_FLOW_CREATE, &b, &q, &e), -1);
	assert_string_equal(e.msg, "ERR flow run_at_ms exceeds maximum "
	                           "9007199254740991");
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_str(&b, "type", "t");
	fb_str(&b, "max_active_ms", "infinity");
	fb_int(&b, "deadline_ms", 5);
	fb_key(&b, "request_context");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "whatever");
	fsnp_w_nil(&b.w);
	fsnp_w_map_end(&b.w);
	assert_int_equal(decode(FSNP_OP_FLOW_CREATE, &b, &q, &e), 0);
	assert_true(q.f[FF_MAX_ACTIVE_MS].set && q.f[FF_MAX_ACTIVE_MS].inf);
	/* Unknown options, at the top or in opts. */
	fb_begin(&b);
	fb_str(&b, "id", "x");
	fb_key(&b, "opts");
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "nonsense");
	fsnp_w_i64(&b.w, 1);
	fsnp_w_map_end(&b.w);
	assert_int_equal(decode(FSNP_OP_FLOW_GET, &b, &q, &e), -1);
	assert_int_equal(e.status, 6);
	assert_string_equal(e.msg, "ERR native unknown flow option nonsense");
	/* Positional fields that are not on the option list. */
	fb_begin(&b);
	fb_strs(&b, "refs", (const char *const[]){"a", "b"}, 2);
	assert_int_equal(decode(FSNP_OP_FLOW_VALUE_MGET, &b, &q, &e), 0);
	assert_int_equal(q.f[FF_REFS].v.as.count, 2);
}

static void test_items(void **state)
{
	struct fbody b;
	struct flow_req q, item;
	struct flow_err e;
	struct fsnp_iter it;
	struct fsnp_val v;

	(void)state;
	fb_begin(&b);
	fb_str(&b, "partition_key", "pk");
	fb_int(&b, "now_ms", 77);
	fb_key(&b, "items");
	fsnp_w_array_begin(&b.w);
	fsnp_w_array_begin(&b.w); /* [id, lease, fencing] */
	fsnp_w_str(&b.w, "a");
	fsnp_w_str(&b.w, "l");
	fsnp_w_i64(&b.w, 3);
	fsnp_w_array_end(&b.w);
	fsnp_w_array_begin(&b.w); /* [id, pk, lease, fencing] */
	fsnp_w_str(&b.w, "b");
	fsnp_w_str(&b.w, "pk2");
	fsnp_w_str(&b.w, "l2");
	fsnp_w_i64(&b.w, 4);
	fsnp_w_array_end(&b.w);
	fsnp_w_map_begin(&b.w);
	fsnp_w_key(&b.w, "id");
	fsnp_w_str(&b.w, "c");
	fsnp_w_key(&b.w, "lease_token");
	fsnp_w_str(&b.w, "l3");
	fsnp_w_key(&b.w, "fencing_token");
	fsnp_w_i64(&b.w, 5);
	fsnp_w_map_end(&b.w);
	fsnp_w_i64(&b.w, 9); /* invalid */
	fsnp_w_array_end(&b.w);
	fb_end(&b);
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_COMPLETE_MANY,
	                                        b.b.data, b.b.len, &q, &e),
	                 0);
	fsnp_iter_init(&it, &q.f[FF_ITEMS].v);
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(flow_body_decode_item(&q, &v, &item, &e), 0);
	assert_int_equal(item.opcode, FSNP_OP_FLOW_COMPLETE);
	assert_true(fsnp_bytes_eq(item.f[FF_ID].t, "a"));
	assert_true(fsnp_bytes_eq(item.f[FF_LEASE_TOKEN].t, "l"));
	assert_int_equal(item.f[FF_FENCING_TOKEN].i, 3);
	assert_true(fsnp_bytes_eq(item.f[FF_PARTITION_KEY].t, "pk"));
	assert_int_equal(item.f[FF_NOW_MS].i, 77);
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(flow_body_decode_item(&q, &v, &item, &e), 0);
	assert_true(fsnp_bytes_eq(item.f[FF_PARTITION_KEY].t, "pk2"));
	assert_int_equal(item.f[FF_FENCING_TOKEN].i, 4);
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(flow_body_decode_item(&q, &v, &item, &e), 0);
	assert_true(fsnp_bytes_eq(item.f[FF_LEASE_TOKEN].t, "l3"));
	assert_true(fsnp_iter_next(&it, NULL, &v));
	assert_int_equal(flow_body_decode_item(&q, &v, &item, &e), -1);
	assert_int_equal(e.status, 6);
	assert_string_equal(e.msg, "ERR native flow item is invalid");
	fb_free(&b);
}

static void test_cmd(void **state)
{
	struct fbody b;
	struct flow_cmd_meta meta = {1234, 99};
	struct flow_cmd c;
	struct flow_err e;
	struct flow_req q;
	const char *msg;
	uint8_t *cmd;
	size_t len;
	char buf[FLOW_AUTO_PARTITION_MAX];
	const uint8_t *part;
	size_t plen;

	(void)state;
	fb_begin(&b);
	fb_str(&b, "id", "order-1");
	fb_end(&b);
	assert_int_equal(flow_cmd_encode(FSNP_OP_FLOW_GET, b.b.data, b.b.len,
	                                 &meta, &cmd, &len, &e),
	                 0);
	assert_int_equal(cmd[0], 1);
	assert_int_equal(cmd[1], FLOW_STORE_OP_READ);
	assert_int_equal(flow_cmd_decode(cmd, len, &c, &msg), 0);
	assert_int_equal(c.opcode, FSNP_OP_FLOW_GET);
	assert_int_equal(c.max_clock_skew_ms, 1234);
	assert_int_equal(c.seed, 99);
	assert_int_equal(c.body_len, b.b.len);
	assert_memory_equal(c.body, b.b.data, b.b.len);
	assert_int_equal(flow_cmd_decode(cmd, len - 1, &c, &msg), -1);
	cmd = realloc(cmd, len + 1);
	cmd[len] = 0;
	assert_int_equal(flow_cmd_decode(cmd, len + 1, &c, &msg), -1);
	assert_string_equal(msg, "flow command has trailing bytes");
	cmd[1] = FLOW_STORE_OP_APPLY; /* a read opcode in a write op */
	assert_int_equal(flow_cmd_decode(cmd, len, &c, &msg), -1);
	free(cmd);
	/* Routing of a decoded request. */
	assert_int_equal(
	    flow_body_decode_bytes(FSNP_OP_FLOW_GET, b.b.data, b.b.len, &q, &e),
	    0);
	flow_cmd_partition(&q, 0, buf, &part, &plen);
	assert_int_equal(plen, strlen("__flow_auto__:239"));
	assert_memory_equal(part, "__flow_auto__:239", plen);
	fb_free(&b);
	fb_begin(&b);
	fb_str(&b, "value", "v");
	fb_end(&b);
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_VALUE_PUT,
	                                        b.b.data, b.b.len, &q, &e),
	                 0);
	flow_cmd_partition(&q, 256 + 17, buf, &part, &plen);
	assert_memory_equal(part, "__flow_auto__:17", plen);
	fb_free(&b);
	fb_begin(&b);
	fb_str(&b, "type", "t");
	fb_str(&b, "worker", "w");
	fb_end(&b);
	assert_int_equal(flow_body_decode_bytes(FSNP_OP_FLOW_CLAIM_DUE,
	                                        b.b.data, b.b.len, &q, &e),
	                 0);
	flow_cmd_partition(&q, 0, buf, &part, &plen);
	assert_int_equal(plen, 0); /* every group */
	fb_free(&b);
	/* Unsupported opcodes. */
	assert_int_equal(
	    flow_cmd_encode(0x0299, NULL, 0, &meta, &cmd, &len, &e), -1);
	assert_int_equal(e.status, 6);
	/* FLOW.QUERY bodies are the FQL1 executor's to check. */
	assert_int_equal(
	    flow_cmd_encode(FSNP_OP_FLOW_QUERY, NULL, 0, &meta, &cmd, &len, &e),
	    0);
	free(cmd);
	assert_int_equal(flow_reply_status(0), 0);
	assert_int_equal(flow_reply_status(1), 1);
	assert_int_equal(flow_reply_status(3), 6);
}

/* store/'s side of the extension interface. */
static void test_store_ext(void **state)
{
	struct tdb t;
	struct fsm_result out;
	uint8_t cmd[2] = {1, 0xB0};

	(void)state;
	tdb_open(&t);
	/* Nothing registered: refused as a read, and as a command. */
	assert_int_equal(store_read(t.s, 1, 0, cmd, 2, &out), 0);
	assert_int_equal(out.data[1], STORE_BAD_COMMAND);
	free(out.data);
	assert_int_equal(flow_register(t.s), 0);
	assert_int_equal(flow_register(t.s), -1); /* overlaps itself */
	{
		struct fsm_cmd fc = {cmd, 2};
		struct fsm_result res = {NULL, 0};
		struct fsm_entry e = {1, 1, 1, 0, 1, &fc};
		assert_int_equal(store_apply(t.s, &e, &res), 0);
		assert_int_equal(res.data[1], STORE_BAD_COMMAND);
		free(res.data);
	}
	/* Flow commands do not belong to the meta group. */
	{
		struct fbody b;
		struct freply r;
		fb_begin(&b);
		fb_str(&b, "id", "x");
		fb_str(&b, "type", "t");
		fb_end(&b);
		fl_run(&t, 0, 1000, FSNP_OP_FLOW_CREATE, &b, 1, &r);
		assert_int_equal(r.status, 6);
		freply_free(&r);
		fb_free(&b);
	}
	tdb_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_route),     cmocka_unit_test(test_body),
	    cmocka_unit_test(test_items),     cmocka_unit_test(test_cmd),
	    cmocka_unit_test(test_store_ext),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
