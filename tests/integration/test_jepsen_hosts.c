/* Integration: the fault-testing hosts and nemeses on real network
 * namespaces, iptables and lodestone processes (3 nodes + a client
 * namespace). Each case of jepsen/selftest.c is one test: /healthz from the
 * client namespace, partitions and their heal probed on every path, kill -9
 * and restart, SIGSTOP/SIGCONT, clock skew (lodestone's HTTP Date header and
 * `date` under the node's libfaketime environment), a short seeded mixed
 * schedule, cleanup after a crashed harness, and no lsj* namespace, link or
 * process left after destroy.
 *
 * Needs root and `ip netns`: without them it FAILS (it never skips), since
 * it runs as root here and in CI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "jepsen/hosts.h"
#include "jepsen/selftest.h"

struct fixture {
	struct selftest t;
	char dir[64];
	bool failed;
};

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	const char *bin = getenv("LS_LODESTONE");
	assert_non_null(f);
	*state = f;
	if (geteuid() != 0) {
		fprintf(stderr,
		        "test_jepsen_hosts: FAIL: needs root (network "
		        "namespaces, veth, iptables); it runs as root in dev "
		        "and CI\n");
		return -1;
	}
	const char *argv[] = {"ip", "netns", "list", NULL};
	char out[512];
	int st;
	if (hosts_run(NULL, argv, NULL, NULL, out, sizeof out, 10000, &st) !=
	        0 ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr,
		        "test_jepsen_hosts: FAIL: `ip netns` is unavailable "
		        "(install iproute2): %s\n",
		        out);
		return -1;
	}
	if (bin == NULL) {
		fprintf(stderr, "test_jepsen_hosts: FAIL: LS_LODESTONE is not "
		                "set (make check sets it)\n");
		return -1;
	}
	snprintf(f->dir, sizeof f->dir, "/tmp/lsj-test-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		perror("mkdtemp");
		return -1;
	}
	if (selftest_setup(&f->t, bin, f->dir, 3) != 0) {
		fprintf(stderr, "test_jepsen_hosts: setup failed: %s\n",
		        f->t.msg);
		selftest_teardown(&f->t);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;
	if (f == NULL) {
		return 0;
	}
	selftest_teardown(&f->t);
	if (f->dir[0] != '\0' && !f->failed && getenv("LS_KEEP_TMP") == NULL) {
		nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	} else if (f->dir[0] != '\0') {
		fprintf(stderr, "test_jepsen_hosts: run directory kept: %s\n",
		        f->dir);
	}
	free(f);
	return 0;
}

static void run_case(void **state, const char *name)
{
	struct fixture *f = *state;
	for (unsigned i = 0; i < selftest_n_cases; i++) {
		if (strcmp(selftest_cases[i].name, name) != 0) {
			continue;
		}
		f->t.msg[0] = '\0';
		int rc = selftest_cases[i].fn(&f->t);
		printf("  %s: %s\n", name, f->t.msg);
		if (rc != 0) {
			f->failed = true;
		}
		assert_int_equal(rc, 0);
		return;
	}
	fail_msg("no self-test case %s", name);
}

#define CASE(fn, name)                                                         \
	static void fn(void **state)                                           \
	{                                                                      \
		run_case(state, name);                                         \
	}
CASE(test_healthz, "healthz")
CASE(test_partition_isolate, "partition-isolate")
CASE(test_partition_halves, "partition-halves")
CASE(test_partition_ring, "partition-ring")
CASE(test_kill_restart, "kill-restart")
CASE(test_pause_resume, "pause-resume")
CASE(test_skew, "skew")
CASE(test_schedule, "schedule")
CASE(test_crash_cleanup, "crash-cleanup")
CASE(test_teardown, "teardown")

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthz),
	    cmocka_unit_test(test_partition_isolate),
	    cmocka_unit_test(test_partition_halves),
	    cmocka_unit_test(test_partition_ring),
	    cmocka_unit_test(test_kill_restart),
	    cmocka_unit_test(test_pause_resume),
	    cmocka_unit_test(test_skew),
	    cmocka_unit_test(test_schedule),
	    cmocka_unit_test(test_crash_cleanup),
	    cmocka_unit_test(test_teardown),
	};
	if (selftest_n_cases != sizeof tests / sizeof tests[0]) {
		fprintf(stderr,
		        "test_jepsen_hosts: FAIL: jepsen/selftest.c has %u "
		        "cases, this test runs %zu: add the new ones here\n",
		        selftest_n_cases, sizeof tests / sizeof tests[0]);
		return 1;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
