/* Integration: graceful drain of the FSNP listener. On SIGTERM a
 * lodestone sends GOAWAY (request_id 0) on every connection, answers what
 * is in flight — a blocked fetch-or-compute waiter gets "reroute", the
 * replies held behind it on its lane follow — closes each connection once
 * everything is answered, and exits 0. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

static struct ftc_msg CALL(struct ftc *c, uint16_t op, const char *fmt, ...) {
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

static void
test_goaway_drain(void **state)
{
	struct harness_cluster cl;
	struct ftc c, owner;
	struct ftc_msg m;
	struct wbuf b;
	int status = -1;
	(void)state;
	uint16_t port;
	assert_int_equal(ftc_start(&cl, 1, NULL, &port), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	assert_int_equal(ftc_connect(&owner, port), 0);

	/* 200 SETs answered before the drain. */
	for (int i = 0; i < 200; i++) {
		char k[32];
		snprintf(k, sizeof k, "dr:%d", i);
		ftc_body(&b, "key=s value=s", k, "v");
		ftc_send(&c, 1 + (uint32_t)(i % 4), FSNP_OP_SET, 0, &b);
		wbuf_free(&b);
	}
	for (int i = 0; i < 200; i++) {
		assert_int_equal(ftc_recv(&c, &m, 10000), 0);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
	}
	/* Lane 5: a waiter (the lease is the owner's), and a SET behind it
	 * whose reply the waiter holds back. */
	m = CALL(&owner, FSNP_OP_FETCH_OR_COMPUTE, "key=s ttl_ms=i", "dr:foc",
	         (int64_t)20000);
	assert_int_equal(m.status, 0);
	ftc_msg_free(&m);
	ftc_body(&b, "key=s ttl_ms=i", "dr:foc", (int64_t)20000);
	uint64_t waiter = ftc_send(&c, 5, FSNP_OP_FETCH_OR_COMPUTE, 0, &b);
	wbuf_free(&b);
	ftc_body(&b, "key=s value=s", "dr:behind", "x");
	uint64_t behind = ftc_send(&c, 5, FSNP_OP_SET, 0, &b);
	wbuf_free(&b);
	assert_int_equal(ftc_recv(&c, &m, 500), -1);

	/* SIGTERM; the harness waits for the exit. */
	assert_int_equal(harness_node_signal(&cl, 0, SIGTERM, &status), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* Everything the server wrote is still in our socket buffer. */
	bool goaway = false, got_waiter = false, got_behind = false;
	while (ftc_recv(&c, &m, 2000) == 0) {
		if (m.h.request_id == 0) {
			assert_int_equal(m.h.opcode, FSNP_OP_GOAWAY);
			assert_int_equal(m.h.lane_id, 0);
			assert_true(
			    ftc_map_str(&m.value, "reason", "server_shutdown"));
			goaway = true;
		} else if (m.h.request_id == waiter) {
			assert_false(got_behind);
			assert_int_equal(m.status, 5);
			got_waiter = true;
		} else if (m.h.request_id == behind) {
			assert_true(got_waiter);
			assert_int_equal(m.status, 0);
			got_behind = true;
		}
		ftc_msg_free(&m);
	}
	assert_true(goaway);
	assert_true(got_waiter);
	assert_true(got_behind);
	assert_true(ftc_wait_closed(&c, 1000));
	ftc_close(&c);
	ftc_close(&owner);

	/* What was acknowledged survived the restart. */
	assert_int_equal(harness_node_start(&cl, 0), 0);
	assert_int_equal(ftc_wait_ready(port, 20000), 0);
	assert_int_equal(ftc_connect(&c, port), 0);
	m = CALL(&c, FSNP_OP_GET, "key=s", "dr:behind");
	assert_true(ftc_str_eq(&m.value, "x"));
	ftc_msg_free(&m);
	m = CALL(&c, FSNP_OP_GET, "key=s", "dr:199");
	assert_true(ftc_str_eq(&m.value, "v"));
	ftc_msg_free(&m);
	ftc_close(&c);
	harness_cluster_stop(&cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_goaway_drain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
