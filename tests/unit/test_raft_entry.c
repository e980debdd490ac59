/* raft/entry.c: the entry payload codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "raft/entry.h"

static void test_roundtrip(void **state)
{
	struct entry_builder b;
	struct entry_header h;
	struct fsm_cmd cmds[3];
	void *base;
	size_t len;

	(void)state;
	entry_builder_init(&b, 1024);
	assert_int_equal(entry_builder_add(&b, "abc", 3), 0);
	assert_int_equal(entry_builder_add(&b, "", 0), 0);
	assert_int_equal(entry_builder_add(&b, "hello", 5), 0);
	assert_int_equal(
	    entry_builder_finish(&b, 7, 1700000000123ull, &base, &len), 0);
	assert_int_equal(len, ENTRY_HEADER_SIZE + 3 * 4 + 8);
	assert_int_equal(((uint8_t *)base)[0], ENTRY_VERSION);
	assert_int_equal(entry_decode_header(base, len, &h), 0);
	assert_int_equal(h.n_cmds, 3);
	assert_int_equal(h.term, 7);
	assert_int_equal(h.now_ms, 1700000000123ull);
	assert_int_equal(entry_decode_cmds(base, len, &h, cmds), 0);
	assert_int_equal(cmds[0].len, 3);
	assert_memory_equal(cmds[0].data, "abc", 3);
	assert_int_equal(cmds[1].len, 0);
	assert_int_equal(cmds[2].len, 5);
	assert_memory_equal(cmds[2].data, "hello", 5);
	raft_free(base);
	/* The builder is reusable and empty. */
	assert_int_equal(b.n_cmds, 0);
	assert_int_equal(entry_builder_finish(&b, 1, 1, &base, &len),
	                 ENTRY_EMALFORMED);
	entry_builder_close(&b);
}

static void test_limits(void **state)
{
	struct entry_builder b;
	uint8_t big[100];
	void *base;
	size_t len;

	(void)state;
	memset(big, 'x', sizeof big);
	/* 24 header + 4 + 72 = 100 bytes exactly. */
	assert_int_equal(entry_max_cmd(100), 72);
	entry_builder_init(&b, 100);
	assert_false(entry_builder_fits(&b, 73));
	assert_int_equal(entry_builder_add(&b, big, 73), ENTRY_ETOOBIG);
	assert_int_equal(entry_builder_add(&b, big, 72), 0);
	assert_int_equal(entry_builder_add(&b, big, 0), ENTRY_ETOOBIG);
	assert_int_equal(entry_builder_finish(&b, 1, 2, &base, &len), 0);
	assert_int_equal(len, 100);
	raft_free(base);
	entry_builder_init(&b, 100);
	assert_int_equal(entry_builder_add(&b, big, 30), 0);
	assert_int_equal(entry_builder_add(&b, big, 30), 0);
	assert_int_equal(entry_builder_add(&b, big, 5), ENTRY_ETOOBIG);
	entry_builder_close(&b);
	assert_int_equal(entry_max_cmd(20), 0);
}

static void test_malformed(void **state)
{
	struct entry_builder b;
	struct entry_header h;
	struct fsm_cmd cmds[4];
	uint8_t *p;
	void *base;
	size_t len, cut;

	(void)state;
	entry_builder_init(&b, 4096);
	assert_int_equal(entry_builder_add(&b, "one", 3), 0);
	assert_int_equal(entry_builder_add(&b, "two!", 4), 0);
	assert_int_equal(entry_builder_finish(&b, 3, 4, &base, &len), 0);
	p = base;

	/* Every truncation is rejected. */
	for (cut = 0; cut < len; cut++) {
		int rv = entry_decode_header(p, cut, &h);
		if (rv == 0) {
			rv = entry_decode_cmds(p, cut, &h, cmds);
		}
		assert_int_equal(rv, ENTRY_EMALFORMED);
	}
	/* A bad version, flags, zero or too many commands. */
	p[0] = 2;
	assert_int_equal(entry_decode_header(p, len, &h), ENTRY_EMALFORMED);
	p[0] = ENTRY_VERSION;
	p[1] = 1;
	assert_int_equal(entry_decode_header(p, len, &h), ENTRY_EMALFORMED);
	p[1] = 0;
	p[7] = 0;
	assert_int_equal(entry_decode_header(p, len, &h), ENTRY_EMALFORMED);
	p[4] = 0xff;
	p[7] = 2;
	assert_int_equal(entry_decode_header(p, len, &h), ENTRY_EMALFORMED);
	p[4] = 0;
	/* A length running past the end, and trailing bytes. */
	assert_int_equal(entry_decode_header(p, len, &h), 0);
	p[ENTRY_HEADER_SIZE + 3] = 200;
	assert_int_equal(entry_decode_cmds(p, len, &h, cmds), ENTRY_EMALFORMED);
	p[ENTRY_HEADER_SIZE + 3] = 2;
	assert_int_equal(entry_decode_cmds(p, len, &h, cmds), ENTRY_EMALFORMED);
	p[ENTRY_HEADER_SIZE + 3] = 3;
	assert_int_equal(entry_decode_cmds(p, len, &h, cmds), 0);
	assert_int_equal(entry_decode_header(NULL, 0, &h), ENTRY_EMALFORMED);
	raft_free(base);
}

/* Commands written in place give the same bytes as copied ones; the
 * expected size is allocated at once, and a buffer much larger than the
 * entry is trimmed when it is handed out. */
static void test_reserve(void **state)
{
	struct entry_builder a, b;
	struct entry_header h;
	struct fsm_cmd cmds[40];
	uint8_t cmd[1000], *dst;
	void *ba, *bb;
	size_t la, lb, cap;
	unsigned i;

	(void)state;
	entry_builder_init(&a, 1 << 20);
	entry_builder_init(&b, 1 << 20);
	entry_builder_expect(&b, 64 << 10);
	for (i = 0; i < 40; i++) {
		size_t n = 1 + (i * 37) % sizeof cmd;
		memset(cmd, (int)i, n);
		assert_int_equal(entry_builder_add(&a, cmd, n), 0);
		assert_int_equal(entry_builder_reserve(&b, n, &dst), 0);
		memcpy(dst, cmd, n);
		if (i == 0) {
			cap = b.cap;
			assert_int_equal(cap, 64 << 10);
		}
	}
	/* Still the first allocation: nothing was moved. */
	assert_int_equal(b.cap, cap);
	assert_int_equal(entry_builder_finish(&a, 9, 10, &ba, &la), 0);
	assert_int_equal(entry_builder_finish(&b, 9, 10, &bb, &lb), 0);
	assert_int_equal(la, lb);
	assert_memory_equal(ba, bb, la);
	/* About 20 KiB of commands in a 64 KiB buffer: trimmed (libraft's
	 * default heap is malloc's). */
	assert_true(lb < 32 << 10);
	assert_true(malloc_usable_size(bb) < lb + 4096);
	assert_int_equal(entry_decode_header(bb, lb, &h), 0);
	assert_int_equal(h.n_cmds, 40);
	assert_int_equal(entry_decode_cmds(bb, lb, &h, cmds), 0);
	raft_free(ba);
	raft_free(bb);

	/* The expectation is capped at the entry's limit; a reservation
	 * that does not fit is refused like an add. */
	entry_builder_init(&b, 100);
	entry_builder_expect(&b, 1 << 20);
	assert_int_equal(b.expect, 100);
	assert_int_equal(entry_builder_reserve(&b, 73, &dst), ENTRY_ETOOBIG);
	assert_int_equal(entry_builder_reserve(&b, 72, &dst), 0);
	assert_int_equal(b.cap, 100);
	memset(dst, 'x', 72);
	assert_int_equal(entry_builder_finish(&b, 1, 2, &bb, &lb), 0);
	assert_int_equal(lb, 100);
	raft_free(bb);
	entry_builder_close(&a);
	entry_builder_close(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_reserve),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
