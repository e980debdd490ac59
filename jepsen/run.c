/* jepsen/run: the fault-testing entry point.
 *
 *   jepsen/run WORKLOAD [--nemesis KIND] [--time S] [--nodes N] [--seed X]
 *              [--dir D] [--binary PATH] [--run-id N] [--prefix A.B]
 *              [--dry-run]
 *   jepsen/run cleanup [--stale]
 *   jepsen/run hosts-selftest [--nodes N] [--dir D] [--binary PATH] [--keep]
 *
 * A run creates its hosts (jepsen/hosts.h), starts lodestone on each,
 * drives the nemesis schedule while the workload's clients record a
 * history, heals everything for a final phase, checks, and writes its
 * directory: history.txt, nemesis.log, hosts.txt, n<i>/lodestone.log and
 * summary.txt. Exit: 0 ok, 1 a check failed, 2 usage or a workload that
 * does not exist yet, 3 the harness itself failed, 130 stopped by a
 * signal (everything healed and removed all the same). */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jepsen/hosts.h"
#include "jepsen/nemesis.h"
#include "jepsen/selftest.h"

#define EXIT_CHECK 1
#define EXIT_USAGE 2
#define EXIT_HARNESS 3
#define EXIT_STOPPED 130

struct workload_info {
	const char *name;
	const char *missing; /* why it cannot run yet, or NULL */
};

/* Workloads by name. Their clients need client traffic that lodestone
 * does not serve yet (its Felix and FSNP listeners answer "not served by
 * this build yet"). */
static const struct workload_info workloads[] = {
    {"register",
     "the register client (linearizable reads, writes and cas over FSNP) "
     "needs lodestone to serve FSNP key-value commands, which this build "
     "does not yet"},
    {"stream",
     "the stream client (append and read over Felix) needs lodestone to "
     "serve Felix streams, which this build does not yet"},
    {"counter",
     "the counter client (INCRBY and GET over FSNP) needs lodestone to "
     "serve FSNP commands, which this build does not yet"},
    {"queue", "the queue client (consumer-group publish, consume, ack) needs "
              "lodestone to serve Felix queues, which this build does not yet"},
    {"idempotent",
     "the idempotent client (exactly-once publish with producer ids) "
     "needs lodestone to serve Felix publishes, which this build does not "
     "yet"},
    {"none", NULL},
};

struct opts {
	const char *workload;
	const char *nemesis;
	unsigned time_s;
	unsigned nodes;
	uint64_t seed;
	bool seed_set;
	const char *dir;
	const char *binary;
	unsigned run_id;
	const char *prefix;
	bool dry_run;
	bool stale;
	bool keep;
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: jepsen/run WORKLOAD [--nemesis "
	        "partition|kill|pause|skew|mixed|none]\n"
	        "                  [--time S] [--nodes N] [--seed X] [--dir D] "
	        "[--binary PATH]\n"
	        "                  [--run-id N] [--prefix A.B] [--dry-run]\n"
	        "       jepsen/run cleanup [--stale]\n"
	        "       jepsen/run hosts-selftest [--nodes N] [--dir D] "
	        "[--binary PATH] [--keep]\n"
	        "\n"
	        "WORKLOAD: register, stream, counter, queue, idempotent (not "
	        "available yet),\n"
	        "or none (the nemesis against the cluster, no client: the "
	        "history stays empty).\n"
	        "Defaults: --nemesis mixed --time 60 --nodes %d, a time-based "
	        "seed (printed),\n"
	        "--dir jepsen-runs/<time>-<workload>-<nemesis>, --binary "
	        "$LS_LODESTONE or the\n"
	        "build's lodestone. Needs root (network namespaces, iptables); "
	        "skew needs\n"
	        "libfaketime and a build without sanitizers.\n"
	        "cleanup removes every lsj* namespace, link and process of "
	        "fault runs\n"
	        "(--stale: only those of runs that are no longer alive).\n",
	        HOSTS_DEFAULT_NODES);
}

static int parse_uint(const char *s, unsigned long long max,
                      unsigned long long *out)
{
	char *end;
	errno = 0;
	if (s == NULL || *s == '\0' || *s == '-') {
		return -EINVAL;
	}
	unsigned long long v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0' || v > max) {
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	unsigned long long v;
	memset(o, 0, sizeof *o);
	o->nemesis = "mixed";
	o->time_s = 60;
	o->nodes = HOSTS_DEFAULT_NODES;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = true;
		int rc = 0;
		if (strcmp(a, "--nemesis") == 0) {
			o->nemesis = val;
			rc = val != NULL ? 0 : -EINVAL;
		} else if (strcmp(a, "--time") == 0) {
			rc = parse_uint(val, 86400, &v);
			o->time_s = (unsigned)v;
			rc = rc == 0 && v == 0 ? -EINVAL : rc;
		} else if (strcmp(a, "--nodes") == 0) {
			rc = parse_uint(val, HOSTS_MAX_NODES, &v);
			o->nodes = (unsigned)v;
		} else if (strcmp(a, "--seed") == 0) {
			rc = parse_uint(val, UINT64_MAX, &v);
			o->seed = v;
			o->seed_set = true;
		} else if (strcmp(a, "--dir") == 0) {
			o->dir = val;
			rc = val != NULL ? 0 : -EINVAL;
		} else if (strcmp(a, "--binary") == 0) {
			o->binary = val;
			rc = val != NULL ? 0 : -EINVAL;
		} else if (strcmp(a, "--run-id") == 0) {
			rc = parse_uint(val, HOSTS_MAX_RUN_ID, &v);
			o->run_id = (unsigned)v;
		} else if (strcmp(a, "--prefix") == 0) {
			o->prefix = val;
			rc = val != NULL ? 0 : -EINVAL;
		} else {
			takes = false;
			if (strcmp(a, "--dry-run") == 0) {
				o->dry_run = true;
			} else if (strcmp(a, "--stale") == 0) {
				o->stale = true;
			} else if (strcmp(a, "--keep") == 0) {
				o->keep = true;
			} else {
				fprintf(stderr, "jepsen/run: unknown flag %s\n",
				        a);
				return -EINVAL;
			}
		}
		if (rc != 0) {
			fprintf(stderr,
			        "jepsen/run: bad or missing value for %s\n", a);
			return rc;
		}
		if (takes) {
			i++;
		}
	}
	if (o->nodes < HOSTS_MIN_NODES) {
		fprintf(stderr, "jepsen/run: --nodes must be %d to %d\n",
		        HOSTS_MIN_NODES, HOSTS_MAX_NODES);
		return -EINVAL;
	}
	return 0;
}

/* The lodestone under test: --binary, $LS_LODESTONE, or the one of the
 * build this program belongs to (jepsen/run sits in the build's jepsen/). */
static const char *find_binary(const char *flag, char *buf, size_t cap)
{
	if (flag != NULL) {
		return flag;
	}
	const char *env = getenv("LS_LODESTONE");
	if (env != NULL && env[0] != '\0') {
		return env;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
			snprintf(buf, cap, "%s/../lodestone", self);
			if (access(buf, X_OK) == 0) {
				return buf;
			}
		}
	}
	return "lodestone";
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void rm_rf(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmd_cleanup(const struct opts *o)
{
	char err[HOSTS_ERR_LEN] = "";
	unsigned removed = 0;
	if (geteuid() != 0) {
		fprintf(stderr, "jepsen/run cleanup: needs root\n");
		return EXIT_HARNESS;
	}
	int rc =
	    hosts_cleanup(NULL, o->stale, stdout, &removed, err, sizeof err);
	printf("cleanup: removed %u object(s)%s\n", removed,
	       o->stale ? " of stale runs" : "");
	if (rc != 0) {
		fprintf(stderr, "jepsen/run cleanup: %s\n", err);
		return EXIT_HARNESS;
	}
	return 0;
}

static int cmd_selftest(const struct opts *o, const char *binary)
{
	char tmpl[] = "/tmp/lsj-selftest-XXXXXX";
	const char *dir = o->dir;
	struct selftest *t = calloc(1, sizeof *t);
	unsigned passed = 0, failed = 0;
	if (t == NULL) {
		return EXIT_HARNESS;
	}
	if (dir == NULL) {
		dir = mkdtemp(tmpl);
		if (dir == NULL) {
			perror("jepsen/run: mkdtemp");
			free(t);
			return EXIT_HARNESS;
		}
	}
	int rc = selftest_setup(t, binary, dir, o->nodes);
	if (rc != 0) {
		printf("FAIL setup: %s\n", t->msg);
		failed = 1;
	} else {
		printf("hosts: run %s, %u nodes, %s, binary %s%s\n",
		       t->hosts.tag, t->hosts.n, t->hosts.subnet, binary,
		       t->asan ? " (ASan: no skew of lodestone)" : "");
		for (unsigned i = 0; i < selftest_n_cases; i++) {
			t->msg[0] = '\0';
			rc = selftest_cases[i].fn(t);
			printf("%s %s: %s\n", rc == 0 ? "ok  " : "FAIL",
			       selftest_cases[i].name, t->msg);
			fflush(stdout);
			if (rc == 0) {
				passed++;
			} else {
				failed++;
			}
		}
	}
	selftest_teardown(t);
	printf("%u passed, %u failed\n", passed, failed);
	if (failed == 0 && !o->keep) {
		rm_rf(dir);
	} else {
		printf("run directory kept: %s\n", dir);
	}
	free(t);
	return failed == 0 ? 0 : EXIT_CHECK;
}

static void default_dir(const struct opts *o, char *buf, size_t cap)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(buf, cap, "jepsen-runs/%s-%s-%s-%d", stamp, o->workload,
	         o->nemesis, (int)getpid());
}

struct summary {
	const struct opts *o;
	const char *command;
	size_t steps;
	int64_t final_ms;
	unsigned healthy;
	unsigned exits;
	bool stopped;
	const char *verdict;
};

static void write_summary(FILE *f, struct hosts *h, struct nemesis *nem,
                          const struct summary *s)
{
	fprintf(f, "run        %s (%s), directory %s\n", h->tag, h->subnet,
	        h->dir);
	fprintf(f, "command    %s\n", s->command);
	fprintf(f, "workload   %s (no client: the history is empty)\n",
	        s->o->workload);
	fprintf(f,
	        "nemesis    %s, seed %llu: %zu steps, %u faults started, %u "
	        "healed, %u skipped, %u errors\n",
	        s->o->nemesis, (unsigned long long)s->o->seed, s->steps,
	        nem->faults_started, nem->faults_healed, nem->faults_skipped,
	        nem->errors);
	if (nem->errors > 0) {
		fprintf(f, "           last error: %s\n", nem->err);
	}
	fprintf(f, "duration   %u s, final phase from %.1f s%s\n", s->o->time_s,
	        (double)s->final_ms / 1000,
	        s->stopped ? " (stopped early by a signal)" : "");
	fprintf(f, "nodes      %u, exits the nemesis did not cause: %u\n", h->n,
	        s->exits);
	for (unsigned id = 1; id <= h->n; id++) {
		struct hosts_node *nd = hosts_node(h, id);
		if (nd->unexpected_exits > 0) {
			fprintf(f, "           n%u exited %u time(s); see %s\n",
			        id, nd->unexpected_exits, nd->log_path);
		}
	}
	if (!s->stopped) {
		fprintf(f,
		        "health     %u/%u nodes healthy after the final "
		        "phase\n",
		        s->healthy, h->n);
	}
	fprintf(f, "verdict    %s\n", s->verdict);
	fprintf(f, "files      summary.txt history.txt nemesis.log hosts.txt "
	           "n<i>/lodestone.log\n");
}

static int cmd_run(const struct opts *o, const char *binary, int argc,
                   char **argv)
{
	const struct workload_info *w = NULL;
	for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
		if (strcmp(workloads[i].name, o->workload) == 0) {
			w = &workloads[i];
		}
	}
	if (w == NULL) {
		fprintf(stderr, "jepsen/run: unknown workload '%s'\n\n",
		        o->workload);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (w->missing != NULL) {
		fprintf(stderr, "workload not available yet: %s\n", w->missing);
		return EXIT_USAGE;
	}
	unsigned mask;
	if (nemesis_parse_mask(o->nemesis, o->nodes, false, &mask) != 0) {
		fprintf(stderr, "jepsen/run: unknown nemesis '%s'\n",
		        o->nemesis);
		return EXIT_USAGE;
	}
	struct opts oo = *o;
	if (!oo.seed_set) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		oo.seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
	}
	struct nemesis_plan plan;
	struct nemesis_schedule sched;
	char err[HOSTS_ERR_LEN];
	nemesis_plan_defaults(&plan, oo.nodes, oo.seed, mask,
	                      (int64_t)oo.time_s * 1000);
	if (nemesis_schedule_make(&sched, &plan, err, sizeof err) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", err);
		return EXIT_USAGE;
	}
	char command[1024] = "";
	for (int i = 0; i < argc; i++) {
		size_t l = strlen(command);
		snprintf(command + l, sizeof command - l, "%s%s",
		         i > 0 ? " " : "", argv[i]);
	}
	if (!oo.seed_set) {
		size_t l = strlen(command);
		snprintf(command + l, sizeof command - l, " --seed %llu",
		         (unsigned long long)oo.seed);
	}
	if (oo.dry_run) {
		printf("# %s\n# %zu steps; final phase from %lld ms of %lld\n",
		       command, sched.n, (long long)sched.final_ms,
		       (long long)sched.total_ms);
		for (size_t i = 0; i < sched.n; i++) {
			char line[512];
			nemesis_step_describe(&sched.steps[i], line,
			                      sizeof line);
			printf("%s\n", line);
		}
		nemesis_schedule_free(&sched);
		return 0;
	}

	/* Stop signals are waited for by the nemesis, so a ^C still heals
	 * and removes everything. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop, NULL);

	char dirbuf[HOSTS_PATH_LEN];
	if (oo.dir == NULL) {
		default_dir(&oo, dirbuf, sizeof dirbuf);
		oo.dir = dirbuf;
	}
	struct hosts *h = calloc(1, sizeof *h);
	struct nemesis nem;
	struct hosts_config cfg;
	int code = 0;
	memset(&nem, 0, sizeof nem);
	memset(&cfg, 0, sizeof cfg);
	cfg.nodes = oo.nodes;
	cfg.run_id = oo.run_id;
	cfg.net_prefix = oo.prefix;
	cfg.binary = binary;
	cfg.dir = oo.dir;
	cfg.faketime = (mask & NEMESIS_BIT(NEMESIS_SKEW)) != 0;
	if (h == NULL) {
		nemesis_schedule_free(&sched);
		return EXIT_HARNESS;
	}
	if (hosts_create(h, &cfg) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", hosts_error(h));
		code = EXIT_HARNESS;
		goto out;
	}
	char path[HOSTS_PATH_LEN + 32];
	snprintf(path, sizeof path, "%s/history.txt", h->dir);
	FILE *hist = fopen(path, "we");
	if (hist == NULL) {
		fprintf(stderr, "jepsen/run: create %s: %s\n", path,
		        strerror(errno));
		code = EXIT_HARNESS;
		goto out;
	}
	fprintf(hist,
	        "# lodestone history (lines format), workload %s: no "
	        "client, no operations\n",
	        oo.workload);
	fclose(hist);
	snprintf(path, sizeof path, "%s/nemesis.log", h->dir);
	if (nemesis_open(&nem, h, path) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", nem.err);
		code = EXIT_HARNESS;
		goto out;
	}
	nem.stop_signals = stop;
	printf("run %s in %s: %u nodes on %s\n", h->tag, h->dir, h->n,
	       h->subnet);
	fflush(stdout);
	if (hosts_start_all(h, 20000) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", hosts_error(h));
		code = EXIT_HARNESS;
		goto out;
	}
	hosts_reset_clock(h);
	int rc = nemesis_run(&nem, &sched);

	struct summary s = {.o = &oo,
	                    .command = command,
	                    .steps = sched.n,
	                    .final_ms = sched.final_ms,
	                    .stopped = rc == -EINTR};
	for (unsigned id = 1; id <= h->n; id++) {
		if (!s.stopped && hosts_node_wait_healthy(h, id, 15000) == 0) {
			s.healthy++;
		}
		s.exits += hosts_node(h, id)->unexpected_exits;
	}
	if (s.stopped) {
		s.verdict = "stopped (nothing checked)";
		code = EXIT_STOPPED;
	} else if (s.healthy != h->n || s.exits > 0 || nem.errors > 0) {
		s.verdict = "FAILED: the cluster did not come through the "
		            "nemesis (see health, exits, errors above)";
		code = EXIT_CHECK;
	} else {
		s.verdict = "ok: no workload, so no history to check; every "
		            "node survived the nemesis and is healthy";
	}
	snprintf(path, sizeof path, "%s/summary.txt", h->dir);
	FILE *sf = fopen(path, "we");
	if (sf != NULL) {
		write_summary(sf, h, &nem, &s);
		fclose(sf);
	}
	write_summary(stdout, h, &nem, &s);
out:
	nemesis_close(&nem);
	hosts_destroy(h);
	free(h);
	nemesis_schedule_free(&sched);
	return code;
}

int main(int argc, char **argv)
{
	struct opts o;
	char binbuf[PATH_MAX];
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	o.workload = argv[1];
	const char *binary = find_binary(o.binary, binbuf, sizeof binbuf);
	char real[PATH_MAX];
	if (strchr(binary, '/') != NULL && realpath(binary, real) != NULL) {
		binary = real;
	}
	if (strcmp(argv[1], "cleanup") == 0) {
		return cmd_cleanup(&o);
	}
	if (strcmp(argv[1], "hosts-selftest") == 0) {
		struct opts so = o;
		bool nodes_given = false;
		for (int i = 2; i < argc; i++) {
			nodes_given =
			    nodes_given || strcmp(argv[i], "--nodes") == 0;
		}
		if (!nodes_given) {
			so.nodes = HOSTS_MIN_NODES;
		}
		return cmd_selftest(&so, binary);
	}
	return cmd_run(&o, binary, argc, argv);
}
