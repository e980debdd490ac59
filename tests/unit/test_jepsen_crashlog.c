/* Crash reports: node/crash.c's handler in a child that faults (its report,
 * its exit by the same signal) and jepsen/crashlog.c's parsing and
 * symbolizing of such reports in a log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jepsen/crashlog.h"
#include "node/crash.h"

static const char two_reports[] =
    "2026-12-01T15:00:00Z info node started\n"
    "lodestone: crash: signal 6 (SIGABRT) addr 0x0 pid 10\n"
    "lodestone: crash: object 0x5500 /bin/lodestone\n"
    "lodestone: crash: frame 0 0x5510 /bin/lodestone+0x10\n"
    "lodestone: crash: end\n"
    "=== lsj: start 2 of node 1 at 3.000 s ===\n"
    "lodestone: crash: signal 11 (SIGSEGV) addr 0x18 pid 42\n"
    "lodestone: crash: object 0x55d4c0000000 /x/lodestone\n"
    "lodestone: crash: pc 0x7f0000001234\n"
    "lodestone: crash: frame 0 0x7f0000001234 /lib/libraft.so.0+0x1234\n"
    "lodestone: crash: frame 1 0x55d4c0012345 /x/lodestone+0x12345\n"
    "lodestone: crash: frame 2 0x9999 ?\n"
    "/lib/libraft.so.0(+0x1234)[0x7f0000001234]\n"
    "lodestone: crash: end\n";

static void test_parse(void **state)
{
	struct crashlog_report r[2];
	(void)state;

	assert_int_equal(crashlog_parse(two_reports, strlen(two_reports), r, 2),
	                 2);
	assert_int_equal(r[0].signal, 6);
	assert_string_equal(r[0].signame, "SIGABRT");
	assert_int_equal(r[0].n_frames, 1);
	assert_true(r[0].complete);

	assert_int_equal(r[1].signal, 11);
	assert_string_equal(r[1].signame, "SIGSEGV");
	assert_int_equal(r[1].fault_addr, 0x18);
	assert_int_equal(r[1].pid, 42);
	assert_int_equal(r[1].base, 0x55d4c0000000ull);
	assert_string_equal(r[1].binary, "/x/lodestone");
	assert_int_equal(r[1].n_frames, 3);
	assert_string_equal(r[1].frames[0].object, "/lib/libraft.so.0");
	assert_int_equal(r[1].frames[0].offset, 0x1234);
	assert_string_equal(r[1].frames[1].object, "/x/lodestone");
	assert_int_equal(r[1].frames[1].offset, 0x12345);
	assert_int_equal(r[1].frames[1].addr, 0x55d4c0012345ull);
	assert_string_equal(r[1].frames[2].object, "");
	assert_int_equal(r[1].frames[2].addr, 0x9999);
	assert_true(r[1].complete);

	/* One slot: the newest report. */
	assert_int_equal(crashlog_parse(two_reports, strlen(two_reports), r, 1),
	                 2);
	assert_int_equal(r[0].signal, 11);

	/* Nothing to find; a report cut short is still one. */
	assert_int_equal(crashlog_parse("hello\n", 6, r, 1), 0);
	assert_int_equal(crashlog_parse(two_reports, 160, r, 1), 1);
	assert_false(r[0].complete);
}

static void test_describe_unknown_objects(void **state)
{
	struct crashlog_report r[1];
	char out[1024];
	(void)state;

	/* Objects that do not exist: shown as object+offset. */
	crashlog_parse(two_reports, strlen(two_reports), r, 1);
	crashlog_describe(r, 8, out, sizeof out);
	assert_string_equal(out, "signal 11 (SIGSEGV) at 0x18: "
	                         "libraft.so.0+0x1234 < lodestone+0x12345 < "
	                         "0x9999");
	crashlog_describe(r, 1, out, sizeof out);
	assert_string_equal(out,
	                    "signal 11 (SIGSEGV) at 0x18: libraft.so.0+0x1234");
}

static void test_sanitizer_report(void **state)
{
	char path[] = "/tmp/test_crashlog_XXXXXX", out[1024];
	static const char text[] =
	    "start\n"
	    "==42==ERROR: AddressSanitizer: heap-use-after-free on address "
	    "0x6020 at pc 0x1 bp 0x2 sp 0x3\n"
	    "READ of size 8 at 0x6020 thread T0\n"
	    "    #0 0x55 in msg_raft_write raft/msg_codec.c:380\n"
	    "    #1 0x56 in transport_send_raft raft/transport.c:1250\n"
	    "\n"
	    "freed by thread T0 here:\n"
	    "    #0 0x57 in free\n";
	int fd = mkstemp(path);
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof text - 1), sizeof text - 1);
	close(fd);
	assert_int_equal(crashlog_describe_file(path, 8, out, sizeof out), 1);
	assert_string_equal(
	    out, "==42==ERROR: AddressSanitizer: heap-use-after-free on "
	         "address 0x6020 at pc 0x1 bp 0x2 sp 0x3: msg_raft_write "
	         "raft/msg_codec.c:380 < transport_send_raft "
	         "raft/transport.c:1250");
	unlink(path);
}

/* Not inlined, so that it is a frame of its own for addr2line. */
__attribute__((noinline)) static void fault_here(uintptr_t addr)
{
	volatile uintptr_t a = addr;
	*(volatile int *)a = 1;
}

/* A removed node's clean exit is told apart from a crash: the removal
 * must be logged in its last run, with no report after it. */
static void test_removed_exit(void **state)
{
	static const char clean[] =
	    "=== lsj: start 1 of node 4 at 1.500 s ===\n"
	    "info  shards: node 4 is draining\n"
	    "warn  shards: node 4 was removed from the cluster: stopping\n"
	    "info  node: stopped\n";
	static const char earlier[] =
	    "=== lsj: start 1 of node 4 at 1.500 s ===\n"
	    "warn  shards: node 4 was removed from the cluster: stopping\n"
	    "=== lsj: start 2 of node 4 at 9.000 s ===\n"
	    "info  node: listening\n";
	static const char crashed[] =
	    "=== lsj: start 1 of node 4 at 1.500 s ===\n"
	    "warn  shards: node 4 was removed from the cluster: stopping\n"
	    "lodestone: crash: signal 11 (SIGSEGV) addr 0x18 pid 42\n"
	    "lodestone: crash: object 0x1000 /bin/lodestone\n"
	    "lodestone: crash: frame 0 0x1010 /bin/lodestone+0x10\n"
	    "lodestone: crash: end\n";
	static const char leak[] =
	    "=== lsj: start 1 of node 4 at 1.500 s ===\n"
	    "warn  shards: node 4 was removed from the cluster: stopping\n"
	    "==7==ERROR: LeakSanitizer: detected memory leaks\n";
	(void)state;
	assert_int_equal(crashlog_removed_exit_text(clean, strlen(clean), 4),
	                 1);
	/* Another node's removal is not this one's. */
	assert_int_equal(crashlog_removed_exit_text(clean, strlen(clean), 5),
	                 0);
	assert_int_equal(
	    crashlog_removed_exit_text(earlier, strlen(earlier), 4), 0);
	assert_int_equal(
	    crashlog_removed_exit_text(crashed, strlen(crashed), 4), 0);
	assert_int_equal(crashlog_removed_exit_text(leak, strlen(leak), 4), 0);
	assert_true(crashlog_removed_exit("/nonexistent/lodestone.log", 4) < 0);
}

static void test_handler(void **state)
{
	char path[] = "/tmp/test_crashlog_XXXXXX", out[4096];
	struct crashlog_report r[1];
	int fd = mkstemp(path), st;
	pid_t pid;
	(void)state;

	if (crash_sanitized()) {
		unlink(path);
		skip(); /* the sanitizers report instead */
	}
	assert_true(fd >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit none = {0, 0};
		setrlimit(RLIMIT_CORE, &none); /* no core from a test */
		dup2(fd, 2);
		if (!crash_install()) {
			_exit(3);
		}
		fault_here(8);
		_exit(4);
	}
	close(fd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	/* Dead of the signal itself, as without a handler. */
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSEGV);

	assert_int_equal(crashlog_describe_file(path, 4, out, sizeof out), 1);
	assert_non_null(strstr(out, "signal 11 (SIGSEGV) at 0x8: "));
	/* The first frame is the faulting function, named (static
	 * functions included), then its caller. */
	assert_non_null(strstr(out, ": fault_here (test_jepsen_crashlog.c:"));
	assert_non_null(
	    strstr(out, " < test_handler (test_jepsen_crashlog.c:"));

	{
		FILE *f = fopen(path, "r");
		static char text[65536];
		size_t n;
		assert_non_null(f);
		n = fread(text, 1, sizeof text, f);
		fclose(f);
		assert_int_equal(crashlog_parse(text, n, r, 1), 1);
		assert_true(r[0].complete);
		assert_int_not_equal(r[0].base, 0);
		assert_true(r[0].n_frames >= 2);
		assert_int_equal(r[0].frames[0].addr,
		                 r[0].base + r[0].frames[0].offset);
	}
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_describe_unknown_objects),
	    cmocka_unit_test(test_sanitizer_report),
	    cmocka_unit_test(test_removed_exit),
	    cmocka_unit_test(test_handler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
