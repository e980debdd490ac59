/* The quick fault suite, run by `make jepsen-quick` (root): every
 * workload under the mixed nemesis (partitions, kill -9, pause, clock skew)
 * on a small cluster, then the fault-hook proofs: lodestone-faulty with
 * LODESTONE_FAULT set must be caught by the checkers.
 *
 * Each case runs `jepsen/run` as a child (bounded) and passes on its exit
 * status: 0 for the normal runs (history checked, nothing wrong, every node
 * healthy), and 0 with --expect-invalid for the proofs (anomalies found). A
 * workload that is not available yet (jepsen/run exits 2 with "workload not
 * available yet") is skipped with its reason. Run directories go to
 * $LS_JEPSEN_QUICK_DIR/<case>/ (node data removed afterwards, logs and
 * histories kept).
 *
 * Two cases change the nodes: register-asan runs the sanitizer build's
 * lodestone (LS_LODESTONE_ASAN; skipped when it does not exist) under
 * every fault but clock skew, register-loaded pins the nodes to one CPU
 * beside a busy loop (jepsen/run --node-cpu --cpu-hog). One changes the
 * cluster: register-membership adds, drains and removes, or replaces
 * nodes among kills, and fails when no add and no removal or replace
 * was done.
 *
 * Environment: LS_JEPSEN_RUN, LS_LODESTONE, LS_LODESTONE_FAULTY,
 * LS_LODESTONE_ASAN, LS_JEPSEN_QUICK_DIR, LS_JEPSEN_SCHEDULES (the
 * written schedules' directory; set by the make target);
 * LS_JEPSEN_QUICK_TIME (seconds per workload run, default 60),
 * LS_JEPSEN_QUICK_NODES (default 3), LS_JEPSEN_QUICK_SEED (default fixed
 * seeds), LS_JEPSEN_QUICK_ONLY (run only the cases whose name contains it).
 * Without root it FAILS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdbool.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define OUT_CAP 65536

enum { Q_PLAIN = 0, Q_ASAN = 1, Q_LOADED = 2, Q_MEMBERS = 3 };

struct qcase {
	const char *name;
	const char *workload;
	const char *nemesis;
	const char *fault; /* NULL: a normal run */
	unsigned time_s;   /* 0: LS_JEPSEN_QUICK_TIME */
	unsigned seed;
	/* Q_ASAN: the nodes are the ASan + UBSan build's lodestone
	 * (LS_LODESTONE_ASAN; skipped when there is none); Q_LOADED: the
	 * nodes share one CPU with a busy loop while the nemesis runs;
	 * Q_MEMBERS: the membership nemesis must also have added a node and
	 * removed or replaced one (its summary says so). */
	int mode;
};

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : dflt;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void rm_rf(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Runs argv, output into out; kills it after timeout_s. Returns the wait
 * status, or -1. */
static int run_child(char *const argv[], char *out, size_t cap,
                     unsigned timeout_s)
{
	int pipefd[2];
	size_t len = 0;
	if (pipe(pipefd) != 0) {
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	time_t end = time(NULL) + timeout_s;
	int status = -1;
	for (;;) {
		fd_set rd;
		struct timeval tv = {1, 0};
		FD_ZERO(&rd);
		FD_SET(pipefd[0], &rd);
		if (select(pipefd[0] + 1, &rd, NULL, NULL, &tv) > 0) {
			char buf[4096];
			ssize_t n = read(pipefd[0], buf, sizeof buf);
			if (n <= 0) {
				break;
			}
			fwrite(buf, 1, (size_t)n, stdout);
			fflush(stdout);
			size_t c = (size_t)n < cap - 1 - len ? (size_t)n
			                                     : cap - 1 - len;
			memcpy(out + len, buf, c);
			len += c;
		}
		if (time(NULL) > end) {
			fprintf(stderr,
			        "test_jepsen_quick: %s ran over %u s: "
			        "killed\n",
			        argv[0], timeout_s);
			kill(pid, SIGTERM);
			sleep(5);
			kill(pid, SIGKILL);
			break;
		}
	}
	out[len] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0) {
		return -1;
	}
	return status;
}

/* How many `op` operations the membership line of the run's summary
 * counts as done ("membership add: 1 done ...; drain-remove: 0 done
 * ..."); -1 when the summary has no such line. */
static int member_done(const char *dir, const char *op)
{
	char path[1100], line[1024], key[64];
	int done = -1;
	snprintf(path, sizeof path, "%s/summary.txt", dir);
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		return -1;
	}
	snprintf(key, sizeof key, " %s: ", op);
	while (fgets(line, sizeof line, f) != NULL) {
		char *p;
		if (strncmp(line, "membership", 10) == 0 &&
		    (p = strstr(line, key)) != NULL) {
			done = atoi(p + strlen(key));
		}
	}
	fclose(f);
	return done;
}

/* The last CPU this process may run on (the first is where most other
 * work lands), as text. */
static int pick_cpu(char *out, size_t cap)
{
	cpu_set_t set;
	int last = -1;
	if (sched_getaffinity(0, sizeof set, &set) != 0) {
		return -1;
	}
	for (int i = 0; i < CPU_SETSIZE; i++) {
		if (CPU_ISSET(i, &set)) {
			last = i;
		}
	}
	if (last < 0) {
		return -1;
	}
	snprintf(out, cap, "%d", last);
	return 0;
}

static void run_case(const struct qcase *c)
{
	const char *only = getenv("LS_JEPSEN_QUICK_ONLY");
	if (only != NULL && only[0] != '\0' && strstr(c->name, only) == NULL) {
		skip();
	}
	const char *run = env_or("LS_JEPSEN_RUN", "jepsen/run");
	const char *top = env_or("LS_JEPSEN_QUICK_DIR", "jepsen-runs/quick");
	unsigned time_s =
	    c->time_s ? c->time_s
	              : (unsigned)atoi(env_or("LS_JEPSEN_QUICK_TIME", "60"));
	const char *nodes = env_or("LS_JEPSEN_QUICK_NODES", "3");
	const char *seed_env = getenv("LS_JEPSEN_QUICK_SEED");
	const char *asan = getenv("LS_LODESTONE_ASAN");
	char dir[1024], tbuf[16], sbuf[32], path[1100], cpu[16], sched[1100];
	char *out;

	if (c->mode == Q_ASAN &&
	    (asan == NULL || asan[0] == '\0' || access(asan, X_OK) != 0)) {
		printf("== %s: skipped: no sanitizer build (LS_LODESTONE_ASAN "
		       "'%s'; ./dev asan makes one)\n",
		       c->name, asan != NULL ? asan : "");
		skip();
	}
	if (c->mode == Q_LOADED && pick_cpu(cpu, sizeof cpu) != 0) {
		printf("== %s: skipped: no CPU to pin to\n", c->name);
		skip();
	}
	out = malloc(OUT_CAP);
	assert_non_null(out);

	snprintf(dir, sizeof dir, "%s/%s", top, c->name);
	rm_rf(dir);
	snprintf(tbuf, sizeof tbuf, "%u", time_s ? time_s : 60);
	if (seed_env != NULL && seed_env[0] != '\0') {
		snprintf(sbuf, sizeof sbuf, "%s", seed_env);
	} else {
		snprintf(sbuf, sizeof sbuf, "%u", c->seed);
	}
	char *argv[32];
	size_t a = 0;
	argv[a++] = (char *)run;
	argv[a++] = (char *)c->workload;
	argv[a++] = "--nemesis";
	argv[a++] = (char *)c->nemesis;
	argv[a++] = "--time";
	argv[a++] = tbuf;
	argv[a++] = "--nodes";
	argv[a++] = (char *)nodes;
	argv[a++] = "--seed";
	argv[a++] = sbuf;
	argv[a++] = "--dir";
	argv[a++] = dir;
	/* A bound on the search, so that a hard history fails the suite
	 * (verdict unknown) instead of hanging it. */
	argv[a++] = "--check-ms";
	argv[a++] = "120000";
	if (c->fault != NULL) {
		argv[a++] = "--fault";
		argv[a++] = (char *)c->fault;
		argv[a++] = "--expect-invalid";
	}
	if (c->mode == Q_ASAN) {
		argv[a++] = "--binary";
		argv[a++] = (char *)asan;
	}
	if (c->mode == Q_MEMBERS) {
		snprintf(sched, sizeof sched, "%s/membership-quick.sched",
		         env_or("LS_JEPSEN_SCHEDULES", "jepsen/schedules"));
		argv[a++] = "--schedule";
		argv[a++] = sched;
	}
	if (c->mode == Q_LOADED) {
		argv[a++] = "--node-cpu";
		argv[a++] = cpu;
		argv[a++] = "--cpu-hog";
	}
	argv[a] = NULL;

	printf("== %s:", c->name);
	for (size_t k = 0; k < a; k++) {
		printf(" %s", argv[k]);
	}
	printf("\n");
	fflush(stdout);
	int st = run_child(argv, out, OUT_CAP, time_s + 240);
	/* Node data is large and of no use once checked; logs and
	 * histories stay. */
	for (unsigned i = 1; i <= 9; i++) {
		snprintf(path, sizeof path, "%s/n%u/data", dir, i);
		rm_rf(path);
	}
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
	    strstr(out, "workload not available yet") != NULL) {
		printf("== %s: skipped: %s", c->name,
		       strstr(out, "workload not available yet"));
		free(out);
		skip();
	}
	bool ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (ok && c->mode == Q_MEMBERS) {
		int adds = member_done(dir, "add");
		int removes = member_done(dir, "drain-remove");
		int replaces = member_done(dir, "replace");
		printf("== %s: membership done: %d add, %d drain-remove, %d "
		       "replace\n",
		       c->name, adds, removes, replaces);
		if (adds < 1 || removes + replaces < 1) {
			fprintf(stderr,
			        "test_jepsen_quick: %s: the membership nemesis "
			        "did not add a node and remove or replace one "
			        "(see %s/nemesis.log)\n",
			        c->name, dir);
			ok = false;
		}
	}
	if (!ok) {
		fprintf(stderr,
		        "test_jepsen_quick: %s FAILED (status %d): see "
		        "%s/summary.txt\n",
		        c->name, st, dir);
	}
	free(out);
	assert_true(ok);
}

static const struct qcase cases[] = {
    {"register-mixed", "register", "mixed", NULL, 0, 1101, Q_PLAIN},
    {"stream-mixed", "stream", "mixed", NULL, 0, 1102, Q_PLAIN},
    {"counter-mixed", "counter", "mixed", NULL, 0, 1103, Q_PLAIN},
    {"queue-mixed", "queue", "mixed", NULL, 0, 1104, Q_PLAIN},
    {"idempotent-mixed", "idempotent", "mixed", NULL, 0, 1105, Q_PLAIN},
    {"watch-mixed", "watch", "mixed", NULL, 0, 1106, Q_PLAIN},
    /* The nodes built with ASan + UBSan: every fault but clock skew
     * (libfaketime does not mix with ASan). */
    {"register-asan", "register", "partition,kill,pause", NULL, 0, 1107,
     Q_ASAN},
    /* The nodes on one CPU beside a busy loop: timings of a loaded
     * machine (slow fsyncs, late timers, long turns). */
    {"register-loaded", "register", "mixed", NULL, 0, 1108, Q_LOADED},
    {"flow-mixed", "flow", "mixed", NULL, 30, 1109, Q_PLAIN},
    /* Membership changes among kills: a spare joins, a member is killed
     * and restarted, another is drained and removed
     * (jepsen/schedules/membership-quick.sched). */
    {"register-membership", "register", "membership,kill", NULL, 45, 1110,
     Q_MEMBERS},
    /* The proofs: each must be caught. */
    {"proof-register-read-no-barrier", "register", "partition",
     "read-no-barrier", 30, 2101, Q_PLAIN},
    {"proof-register-ack-before-commit", "register", "partition-leader",
     "ack-before-commit", 30, 2102, Q_PLAIN},
    {"proof-stream-ack-before-commit", "stream", "partition-leader",
     "ack-before-commit", 30, 2103, Q_PLAIN},
    {"proof-counter-read-no-barrier", "counter", "partition", "read-no-barrier",
     30, 2104, Q_PLAIN},
    {"proof-flow-no-fencing", "flow", "partition", "flow-no-fencing", 20, 2105,
     Q_PLAIN},
    {"proof-flow-sched-refire", "flow", "partition", "flow-sched-refire", 15,
     2106, Q_PLAIN},
};

static void test_case(void **state)
{
	run_case(*state);
}

static int group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_jepsen_quick: FAIL: needs root (network "
		                "namespaces, veth, iptables)\n");
		return -1;
	}
	if (access(env_or("LS_JEPSEN_RUN", "jepsen/run"), X_OK) != 0) {
		fprintf(stderr, "test_jepsen_quick: FAIL: no jepsen/run "
		                "(LS_JEPSEN_RUN; make jepsen-quick sets it)\n");
		return -1;
	}
	const char *top = env_or("LS_JEPSEN_QUICK_DIR", "jepsen-runs/quick");
	char cmd[1100];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct CMUnitTest t = {cases[i].name, test_case, NULL, NULL,
		                       (void *)&cases[i]};
		tests[i] = t;
	}
	return _cmocka_run_group_tests("jepsen_quick", tests,
	                               sizeof tests / sizeof tests[0],
	                               group_setup, NULL);
}
