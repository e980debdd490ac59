/* Unit tests for client/flow_client: routing keys (known answers of
 * reference/flow.md section 3), the typed bodies of each Flow call, and
 * the parsers of records, claims and history against hand-built FSNP
 * values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/flow_client.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

static void test_route_keys(void **state)
{
	char key[FLOW_CLIENT_KEY_MAX];
	size_t n;

	(void)state;
	n = flow_client_route_key("order-1", NULL, key);
	assert_string_equal(key, "{fa:239}");
	assert_int_equal(n, 8);
	assert_int_equal(fsnp_slot_of((const uint8_t *)key, n), 794);
	n = flow_client_route_key("x", "tenant-a", key);
	assert_string_equal(key,
	                    "{f:gKcHr33HfuEij5EnGA85ZINeW-tMSrDYEvD-dZNXmzo}");
	assert_int_equal(fsnp_slot_of((const uint8_t *)key, n), 914);
	/* A literal auto partition is its bucket. */
	flow_client_route_key("x", "__flow_auto__:239", key);
	assert_string_equal(key, "{fa:239}");
}

/* Encodes and decodes back the body. */
static void encode(uint16_t op, const struct flow_args *a, struct wbuf *b,
                   struct fsnp_val *v, char *key, size_t *klen)
{
	wbuf_init(b);
	assert_int_equal(flow_client_encode(op, a, b, key, klen), 0);
	assert_int_equal(fsnp_value_decode_body(b->data, b->len, NULL, v), 0);
	assert_int_equal(v->tag, FSNP_MAP);
}

static void assert_bin(const struct fsnp_val *m, const char *k, const char *s)
{
	struct fsnp_bytes b;
	assert_int_equal(fsnp_map_bin(m, k, &b), 0);
	assert_true(fsnp_bytes_eq(b, s));
}

static void assert_int(const struct fsnp_val *m, const char *k, int64_t want)
{
	int64_t i;
	assert_int_equal(fsnp_map_i64(m, k, &i), 0);
	assert_int_equal(i, want);
}

static void test_create_body(void **state)
{
	struct flow_args a;
	struct wbuf b;
	struct fsnp_val v;
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen;
	bool t;

	(void)state;
	flow_args_init(&a);
	a.id = "order-1";
	a.type = "email";
	a.data = "hi";
	a.data_len = 2;
	a.run_at_ms = 1000;
	a.idempotent = true;
	encode(FSNP_OP_FLOW_CREATE, &a, &b, &v, key, &klen);
	assert_int_equal(v.as.count, 5);
	assert_bin(&v, "id", "order-1");
	assert_bin(&v, "type", "email");
	assert_bin(&v, "payload", "hi");
	assert_int(&v, "run_at_ms", 1000);
	assert_int_equal(fsnp_map_bool(&v, "idempotent", &t), 0);
	assert_true(t);
	assert_string_equal(key, "{fa:239}");
	assert_int_equal(flow_client_flags(FSNP_OP_FLOW_CREATE, &a),
	                 FSNP_REQ_IDEMPOTENT);
	wbuf_free(&b);
	a.idempotent = false;
	assert_int_equal(flow_client_flags(FSNP_OP_FLOW_CREATE, &a), 0);
	/* Required fields. */
	a.type = NULL;
	wbuf_init(&b);
	assert_int_equal(
	    flow_client_encode(FSNP_OP_FLOW_CREATE, &a, &b, key, &klen),
	    FLOW_CLIENT_EINVAL);
	assert_int_equal(b.len, 0);
	wbuf_free(&b);
}

static void test_claim_body(void **state)
{
	struct flow_args a;
	struct wbuf b;
	struct fsnp_val v;
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen;
	bool t;

	(void)state;
	flow_args_init(&a);
	a.type = "email";
	a.worker = "w1";
	a.lease_ms = 5000;
	a.limit = 10;
	a.block_ms = 200;
	encode(FSNP_OP_FLOW_CLAIM_DUE, &a, &b, &v, key, &klen);
	assert_bin(&v, "type", "email");
	assert_bin(&v, "worker", "w1");
	assert_int(&v, "lease_ms", 5000);
	assert_int(&v, "limit", 10);
	assert_int(&v, "block_ms", 200);
	assert_int_equal(fsnp_map_bool(&v, "payload", &t), 0);
	assert_false(t);
	assert_int_equal(klen, 0); /* unpartitioned: the server scans */
	assert_int_equal(flow_client_flags(FSNP_OP_FLOW_CLAIM_DUE, &a), 0);
	wbuf_free(&b);
	a.partition_key = "tenant-a";
	a.payload = true;
	encode(FSNP_OP_FLOW_CLAIM_DUE, &a, &b, &v, key, &klen);
	assert_bin(&v, "partition_key", "tenant-a");
	assert_int_equal(fsnp_map_bool(&v, "payload", &t), FSNP_ERR_NOT_FOUND);
	assert_int_equal(fsnp_slot_of((const uint8_t *)key, klen), 914);
	wbuf_free(&b);
}

static void test_lease_bodies(void **state)
{
	static const uint16_t ops[] = {FSNP_OP_FLOW_COMPLETE, FSNP_OP_FLOW_FAIL,
	                               FSNP_OP_FLOW_RETRY,
	                               FSNP_OP_FLOW_EXTEND_LEASE};
	struct flow_args a;
	struct wbuf b;
	struct fsnp_val v;
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen;

	(void)state;
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		flow_args_init(&a);
		a.id = "order-1";
		a.lease_token = "w1:1000:3";
		a.fencing_token = 3;
		a.now_ms = 1500;
		encode(ops[i], &a, &b, &v, key, &klen);
		assert_bin(&v, "id", "order-1");
		assert_bin(&v, "lease_token", "w1:1000:3");
		assert_int(&v, "fencing_token", 3);
		assert_int(&v, "now_ms", 1500);
		assert_string_equal(key, "{fa:239}");
		assert_int_equal(flow_client_flags(ops[i], &a),
		                 FSNP_REQ_IDEMPOTENT);
		wbuf_free(&b);
		/* The lease token and the fencing token are required. */
		a.lease_token = NULL;
		wbuf_init(&b);
		assert_int_equal(flow_client_encode(ops[i], &a, &b, key, &klen),
		                 FLOW_CLIENT_EINVAL);
		a.lease_token = "t";
		a.fencing_token = FLOW_UNSET;
		assert_int_equal(flow_client_encode(ops[i], &a, &b, key, &klen),
		                 FLOW_CLIENT_EINVAL);
		wbuf_free(&b);
	}
	/* CANCEL and TRANSITION: the lease token is optional. */
	flow_args_init(&a);
	a.id = "order-1";
	a.fencing_token = 0;
	a.data = "stop";
	a.data_len = 4;
	encode(FSNP_OP_FLOW_CANCEL, &a, &b, &v, key, &klen);
	assert_bin(&v, "reason", "stop");
	assert_int(&v, "fencing_token", 0);
	assert_int_equal(v.as.count, 3);
	wbuf_free(&b);
	a.data = NULL;
	a.from_state = "queued";
	a.to_state = "waiting";
	encode(FSNP_OP_FLOW_TRANSITION, &a, &b, &v, key, &klen);
	assert_bin(&v, "from_state", "queued");
	assert_bin(&v, "to_state", "waiting");
	wbuf_free(&b);
	/* Opcodes this module does not know. */
	wbuf_init(&b);
	assert_int_equal(
	    flow_client_encode(FSNP_OP_FLOW_SIGNAL, &a, &b, key, &klen),
	    FLOW_CLIENT_EINVAL);
	wbuf_free(&b);
}

/* A record as the server sends it (the fields the parser reads). */
static void w_record(struct fsnp_writer *w, const char *id, int64_t fence,
                     const char *token)
{
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "id");
	fsnp_w_str(w, id);
	fsnp_w_key(w, "type");
	fsnp_w_str(w, "email");
	fsnp_w_key(w, "state");
	fsnp_w_str(w, token ? "running" : "queued");
	fsnp_w_key(w, "version");
	fsnp_w_i64(w, 4);
	fsnp_w_key(w, "attempts");
	fsnp_w_i64(w, 1);
	fsnp_w_key(w, "fencing_token");
	fsnp_w_i64(w, fence);
	fsnp_w_key(w, "lease_token");
	if (token) {
		fsnp_w_str(w, token);
	} else {
		fsnp_w_nil(w);
	}
	fsnp_w_key(w, "next_run_at_ms");
	fsnp_w_i64(w, 9000);
	fsnp_w_key(w, "lease_deadline_ms");
	fsnp_w_i64(w, token ? 9000 : 0);
	fsnp_w_key(w, "payload");
	fsnp_w_str(w, "p");
	fsnp_w_map_end(w);
}

static void test_parse_record(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	struct flow_record r;

	(void)state;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	w_record(&w, "order-1", 2, "w1:1000:2");
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_record(&v, &r), 0);
	assert_true(fsnp_bytes_eq(r.id, "order-1"));
	assert_true(fsnp_bytes_eq(r.state, "running"));
	assert_true(fsnp_bytes_eq(r.lease_token, "w1:1000:2"));
	assert_int_equal(r.fencing_token, 2);
	assert_int_equal(r.version, 4);
	assert_int_equal(r.attempts, 1);
	assert_true(r.has_next_run_at_ms);
	assert_int_equal(r.lease_deadline_ms, 9000);
	assert_true(r.has_payload);
	/* nil: not found; other shapes: EPROTO; trailing bytes too. */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_nil(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_record(&v, &r),
	                 FLOW_CLIENT_ENOTFOUND);
	assert_int_equal(flow_client_decode(b.data, b.len + 0, &v), 0);
	wbuf_put_u8(&b, 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v),
	                 FLOW_CLIENT_EPROTO);
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_str(&w, "OK");
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_true(flow_client_is_ok(&v));
	assert_int_equal(flow_client_parse_record(&v, &r), FLOW_CLIENT_EPROTO);
	wbuf_free(&b);
}

static void test_parse_claims(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	struct flow_record r[2];
	size_t n;

	(void)state;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	w_record(&w, "a", 1, "w:1:1");
	w_record(&w, "b", 7, "w:1:7");
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_claims(&v, r, 2, &n), 0);
	assert_int_equal(n, 2);
	assert_true(fsnp_bytes_eq(r[1].id, "b"));
	assert_int_equal(r[1].fencing_token, 7);
	assert_int_equal(flow_client_parse_claims(&v, r, 1, &n),
	                 FLOW_CLIENT_EPROTO);
	/* A claimed flow without a lease token is not a claim. */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	w_record(&w, "a", 1, NULL);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_claims(&v, r, 2, &n),
	                 FLOW_CLIENT_EPROTO);
	/* Nothing due. */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_claims(&v, r, 2, &n), 0);
	assert_int_equal(n, 0);
	wbuf_free(&b);
}

static void w_event(struct fsnp_writer *w, const char *id, const char *ev,
                    int64_t version, int64_t fence)
{
	fsnp_w_array_begin(w);
	fsnp_w_str(w, id);
	fsnp_w_array_begin(w);
	fsnp_w_str(w, "event");
	fsnp_w_str(w, ev);
	fsnp_w_str(w, "version");
	fsnp_w_i64(w, version);
	fsnp_w_str(w, "fencing_token");
	fsnp_w_i64(w, fence);
	fsnp_w_str(w, "state");
	fsnp_w_str(w, "running");
	fsnp_w_array_end(w);
	fsnp_w_array_end(w);
}

static void test_parse_history(void **state)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val v;
	struct flow_event e;
	size_t n;

	(void)state;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	w_event(&w, "1000-1", "created", 1, 0);
	w_event(&w, "1001-2", "claimed", 2, 1);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_event(&v, 1, &e, &n), 0);
	assert_int_equal(n, 2);
	assert_true(fsnp_bytes_eq(e.event_id, "1001-2"));
	assert_true(fsnp_bytes_eq(e.event, "claimed"));
	assert_int_equal(e.version, 2);
	assert_int_equal(e.fencing_token, 1);
	assert_int_equal(flow_client_parse_event(&v, 2, &e, NULL),
	                 FLOW_CLIENT_ENOTFOUND);
	/* An entry whose fields are not pairs. */
	wbuf_reset(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_array_begin(&w);
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, "1-1");
	fsnp_w_array_begin(&w);
	fsnp_w_str(&w, "event");
	fsnp_w_array_end(&w);
	fsnp_w_array_end(&w);
	fsnp_w_array_end(&w);
	assert_int_equal(fsnp_w_finish(&w), 0);
	assert_int_equal(flow_client_decode(b.data, b.len, &v), 0);
	assert_int_equal(flow_client_parse_event(&v, 0, &e, NULL),
	                 FLOW_CLIENT_EPROTO);
	wbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_route_keys),
	    cmocka_unit_test(test_create_body),
	    cmocka_unit_test(test_claim_body),
	    cmocka_unit_test(test_lease_bodies),
	    cmocka_unit_test(test_parse_record),
	    cmocka_unit_test(test_parse_claims),
	    cmocka_unit_test(test_parse_history),
	};
	return cmocka_run_group_tests_name("flow_client", tests, NULL, NULL);
}
