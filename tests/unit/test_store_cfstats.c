/* Unit: store/cfstats.c on RocksDB 7.8's statistics text and on text that
 * lacks parts or is cut short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store/cfstats.h"

/* The layout RocksDB 7.8 writes (values changed). */
static const char text[] =
    "\n** Compaction Stats [data] **\n"
    "Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) "
    "Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) "
    "CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) "
    "Wblob(GB)\n"
    "-------------------------------------------------------------------\n"
    "  L0      3/0    2.99 MB   0.8      0.0     0.0      0.0       0.0      "
    "0.0       0.0   1.0      0.0     41.2      0.07              0.05       "
    "  5    0.015       0      0       0.0       0.0\n"
    "  L1      1/0    1.00 MB   0.1      0.0     0.0      0.0       0.0      "
    "0.0       0.0   1.0      0.0     41.2      0.07              0.05       "
    "  2    0.015       0      0       0.0       0.0\n"
    " Sum      4/0    3.99 MB   0.0      0.0     0.0      0.0       0.0      "
    "0.0       0.0   1.0      0.0     41.2      0.07              0.05       "
    "  7    0.015       0      0       0.0       0.0\n"
    " Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.0      "
    "0.0       0.0   0.0      0.0      0.0      0.00              0.00       "
    "  0    0.000       0      0       0.0       0.0\n"
    "\n** Compaction Stats [data] **\n"
    "Priority    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) "
    "Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) "
    "CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) "
    "Wblob(GB)\n"
    "Stalls(count): 2 level0_slowdown, 0 level0_slowdown_with_compaction, 1 "
    "level0_numfiles, 0 level0_numfiles_with_compaction, 4 stop for "
    "pending_compaction_bytes, 0 slowdown for pending_compaction_bytes, 0 "
    "memtable_compaction, 3 memtable_slowdown, interval 9 total count\n";

static void test_rocksdb_text(void **state)
{
	struct store_cfstats st;
	(void)state;
	store_cfstats_parse(text, strlen(text), &st);
	assert_int_equal(st.compactions, 7);
	assert_int_equal(st.stalls, 10);
}

static void test_missing_and_cut(void **state)
{
	struct store_cfstats st;
	(void)state;
	store_cfstats_parse("", 0, &st);
	assert_int_equal(st.compactions, 0);
	assert_int_equal(st.stalls, 0);
	/* A Sum row before any header: no column known. */
	store_cfstats_parse(" Sum 1/0 1 KB 9\n", 16, &st);
	assert_int_equal(st.compactions, 0);
	/* Every prefix parses, never reading past its end. */
	for (size_t n = 0; n <= strlen(text); n++) {
		store_cfstats_parse(text, n, &st);
		assert_true(st.compactions <= 7);
		assert_true(st.stalls <= 10);
	}
	/* Huge counts saturate. */
	static const char big[] = "Stalls(count): 18446744073709551615 a, "
	                          "99999999999999999999999 b, interval 0\n";
	store_cfstats_parse(big, strlen(big), &st);
	assert_true(st.stalls == UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rocksdb_text),
	    cmocka_unit_test(test_missing_and_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
