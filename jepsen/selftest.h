/* Self-test of the fault-testing hosts and nemeses on real namespaces and
 * real lodestone processes: reachability, a partition and its heal, kill -9
 * and restart, SIGSTOP and SIGCONT, clock skew, and cleanup (also after a
 * crashed harness). Shared by `jepsen/run hosts-selftest` and the
 * integration test tests/integration/test_jepsen_hosts, which runs each
 * case as a test. Needs root. */
#ifndef LS_JEPSEN_SELFTEST_H
#define LS_JEPSEN_SELFTEST_H

#include <stdbool.h>

#include "jepsen/hosts.h"
#include "jepsen/nemesis.h"

struct selftest {
	struct hosts hosts;
	struct nemesis nem;
	bool up;   /* hosts created and nodes started */
	bool asan; /* the binary is an ASan build: no skew of lodestone */
	char binary[HOSTS_PATH_LEN];
	char dir[HOSTS_PATH_LEN];
	char timeline[HOSTS_PATH_LEN + 32];
	char msg[2048]; /* why the last case failed, or what it measured */
};

typedef int (*selftest_fn)(struct selftest *t);

struct selftest_case {
	const char *name;
	selftest_fn fn;
};

/* The cases in the order they must run; the last one tears down. */
extern const struct selftest_case selftest_cases[];
extern const unsigned selftest_n_cases;

/* Creates `nodes` hosts under `dir` (must not hold node data), starts
 * lodestone in each (under libfaketime unless binary is an ASan build)
 * and waits until all are healthy. */
int selftest_setup(struct selftest *t, const char *binary, const char *dir,
                   unsigned nodes);

/* Destroys what is left (idempotent). */
void selftest_teardown(struct selftest *t);

#endif
