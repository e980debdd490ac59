/* jepsen/run: the fault-testing entry point.
 *
 *   jepsen/run WORKLOAD [--nemesis KIND] [--time S] [--nodes N] [--seed X]
 *              [--dir D] [--binary PATH] [--run-id N] [--prefix A.B]
 *              [--procs N] [--op-timeout-ms MS] [--check-ms MS]
 *              [--fault MODE] [--expect-invalid] [--dry-run]
 *   jepsen/run cleanup [--stale]
 *   jepsen/run hosts-selftest [--nodes N] [--dir D] [--binary PATH] [--keep]
 *
 * A run creates its hosts (jepsen/hosts.h), starts lodestone on each,
 * drives the nemesis schedule while the workload's clients
 * (jepsen/workload_driver.h) record a history, heals everything for a
 * final phase in which the clients finish and read back, checks, and
 * writes its directory: history.txt, verdicts.txt, nemesis.log, hosts.txt,
 * n<i>/lodestone.log and summary.txt. Exit: 0 ok, 1 a check failed (or,
 * with --expect-invalid, found nothing), 2 usage or a workload that does
 * not exist yet, 3 the harness itself failed, 130 stopped by a signal
 * (everything healed and removed all the same). */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jepsen/crashlog.h"
#include "jepsen/hosts.h"
#include "jepsen/nemesis.h"
#include "jepsen/selftest.h"
#include "jepsen/workload_cluster.h"
#include "jepsen/workload_driver.h"
#include "jepsen/workload_member.h"

#define EXIT_CHECK 1
#define EXIT_USAGE 2
#define EXIT_HARNESS 3
#define EXIT_STOPPED 130

/* The cluster the workloads expect: lodestone's default 8 data groups. */
#define RUN_SHARDS 8
/* How long a fresh cluster may take to elect every group's leader. */
#define READY_TIMEOUT_MS 30000
/* Final reads may run this long past the end of the schedule. */
#define FINAL_GRACE_MS 30000
/* Spare hosts a membership nemesis may add (at most what is left of
 * HOSTS_MAX_NODES). */
#define RUN_SPARES 6

/* The fault hooks of lodestone-faulty (raft/replica.c, flow/flow_ops.c,
 * flow/flow_schedule.c, LS_FAULT_HOOKS). */
static const char *const fault_modes[] = {"ack-before-commit",
                                          "read-no-barrier", "flow-no-fencing",
                                          "flow-sched-refire", NULL};

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
	unsigned procs;
	unsigned op_timeout_ms;
	unsigned check_ms;
	const char *fault;
	bool expect_invalid;
	bool pin_cpu; /* --node-cpu */
	unsigned cpu;
	bool cpu_hog;         /* --cpu-hog */
	const char *schedule; /* --schedule FILE: the steps, not seeded */
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: jepsen/run WORKLOAD [--nemesis "
	        "partition|partition-leader|kill|pause|skew|membership|\n"
	        "                  mixed|none or a list of classes, e.g. "
	        "membership,kill]\n"
	        "                  [--time S] [--nodes N] [--seed X] [--dir D] "
	        "[--binary PATH]\n"
	        "                  [--run-id N] [--prefix A.B] [--procs N] "
	        "[--op-timeout-ms MS]\n"
	        "                  [--check-ms MS] [--fault MODE] "
	        "[--expect-invalid] [--dry-run]\n"
	        "                  [--node-cpu CPU] [--cpu-hog] "
	        "[--schedule FILE]\n"
	        "       jepsen/run cleanup [--stale]\n"
	        "       jepsen/run hosts-selftest [--nodes N] [--dir D] "
	        "[--binary PATH] [--keep]\n"
	        "\n"
	        "WORKLOAD: register (FSNP GET/SET/CAS, linearizable), stream "
	        "(Felix publishes\n"
	        "and subscribers), counter (Felix counters), queue (Felix "
	        "consumer group),\n"
	        "idempotent (Felix idempotent producer), watch (Felix cache "
	        "watches), flow\n"
	        "(FerricFlow workers: create, claim, extend, complete, retry), "
	        "or none\n"
	        "(the nemesis against the cluster, no client).\n"
	        "Defaults: --nemesis mixed --time 60 --nodes %d, a time-based "
	        "seed (printed),\n"
	        "--dir jepsen-runs/<time>-<workload>-<nemesis>, --binary "
	        "$LS_LODESTONE or the\n"
	        "build's lodestone, the workload's client processes (--procs: "
	        "its writers),\n"
	        "op timeout 2000 ms, no bound on the linearizability search "
	        "(--check-ms).\n"
	        "--fault ack-before-commit|read-no-barrier|flow-no-fencing|"
	        "flow-sched-refire runs "
	        "lodestone-faulty (configure\n"
	        "--enable-fault-hooks, or make lodestone-faulty) with that "
	        "hook on, to prove\n"
	        "the checkers catch it; --expect-invalid makes a run that "
	        "finds no anomaly\n"
	        "the failure. --node-cpu runs every node on that CPU only; "
	        "--cpu-hog spins\n"
	        "a busy loop (on that CPU) while the nemesis runs. "
	        "--schedule FILE runs the\n"
	        "steps written in FILE (the lines --dry-run prints: kill, "
	        "pause, skew,\n"
	        "partition-isolate, membership) instead of a seeded "
	        "schedule.\n"
	        "membership adds nodes (--join), drains and removes them, "
	        "and replaces\n"
	        "killed ones, on spare hosts; not part of mixed.\n"
	        "Needs root (network namespaces, iptables); skew "
	        "needs\n"
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
		} else if (strcmp(a, "--procs") == 0) {
			rc = parse_uint(val, 256, &v);
			o->procs = (unsigned)v;
		} else if (strcmp(a, "--op-timeout-ms") == 0) {
			rc = parse_uint(val, 600000, &v);
			o->op_timeout_ms = (unsigned)v;
		} else if (strcmp(a, "--check-ms") == 0) {
			rc = parse_uint(val, 86400000, &v);
			o->check_ms = (unsigned)v;
		} else if (strcmp(a, "--schedule") == 0) {
			o->schedule = val;
			rc = val != NULL ? 0 : -EINVAL;
		} else if (strcmp(a, "--node-cpu") == 0) {
			rc = parse_uint(val, CPU_SETSIZE - 1, &v);
			o->cpu = (unsigned)v;
			o->pin_cpu = true;
		} else if (strcmp(a, "--fault") == 0) {
			o->fault = val;
			rc = -EINVAL;
			for (size_t k = 0; val != NULL && fault_modes[k]; k++) {
				if (strcmp(val, fault_modes[k]) == 0) {
					rc = 0;
				}
			}
		} else {
			takes = false;
			if (strcmp(a, "--dry-run") == 0) {
				o->dry_run = true;
			} else if (strcmp(a, "--stale") == 0) {
				o->stale = true;
			} else if (strcmp(a, "--keep") == 0) {
				o->keep = true;
			} else if (strcmp(a, "--expect-invalid") == 0) {
				o->expect_invalid = true;
			} else if (strcmp(a, "--cpu-hog") == 0) {
				o->cpu_hog = true;
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

/* The lodestone under test: --binary, $LS_LODESTONE (with a fault hook:
 * $LS_LODESTONE_FAULTY), or the one of the build this program belongs to
 * (jepsen/run sits in the build's jepsen/): lodestone, or lodestone-faulty
 * for a fault-hook run. */
static const char *find_binary(const char *flag, bool faulty, char *buf,
                               size_t cap)
{
	const char *name = faulty ? "lodestone-faulty" : "lodestone";
	if (flag != NULL) {
		return flag;
	}
	const char *env =
	    getenv(faulty ? "LS_LODESTONE_FAULTY" : "LS_LODESTONE");
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
			snprintf(buf, cap, "%s/../%s", self, name);
			if (access(buf, X_OK) == 0) {
				return buf;
			}
		}
	}
	return name;
}

/* Whether the file at path contains `needle` (a marker string compiled
 * into the fault-hook build only). */
static bool file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	size_t nl = strlen(needle), have = 0;
	char buf[65536 + 64];
	bool found = false;
	if (f == NULL) {
		return false;
	}
	for (;;) {
		size_t got = fread(buf + have, 1, sizeof buf - have - 1, f);
		if (got == 0) {
			break;
		}
		have += got;
		if (memmem(buf, have, needle, nl) != NULL) {
			found = true;
			break;
		}
		/* Keep a tail that may hold the start of the needle. */
		size_t keep = have < nl ? have : nl - 1;
		memmove(buf, buf + have - keep, keep);
		have = keep;
	}
	fclose(f);
	return found;
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
	unsigned members; /* members at the end (the nodes checked) */
	bool membership;  /* the nemesis changes membership */
	unsigned exits;
	bool stopped;
	const struct wl_workload *w; /* NULL: workload none */
	uint64_t counts[WL_N_TYPES];
	char wl_note[512];
	bool checked;
	struct wl_verdict vw;
	const char *verdict;
	char verdict_buf[1400];
};

/* How a node that exited by itself ended: its last exit status, and the
 * crash report in its log (node/crash.h) with the top frames named. */
static void describe_death(FILE *f, const struct hosts_node *nd)
{
	char why[2048];
	int st = nd->last_status;
	int rc = crashlog_describe_file(nd->log_path, 8, why, sizeof why);
	if (WIFSIGNALED(st)) {
		fprintf(f, "           n%u last died of signal %d (%s)%s%s\n",
		        nd->id, WTERMSIG(st), strsignal(WTERMSIG(st)),
		        nd->core_path[0] != '\0' ? "; core " : "",
		        nd->core_path);
	} else if (WIFEXITED(st)) {
		fprintf(f, "           n%u last exited with status %d\n",
		        nd->id, WEXITSTATUS(st));
	}
	if (rc > 0) {
		fprintf(f, "           n%u crash report: %s\n", nd->id, why);
	} else if (WIFSIGNALED(st)) {
		fprintf(f,
		        "           n%u wrote no crash report (SIGKILL, or "
		        "a build without the handler: see its log)\n",
		        nd->id);
	}
}

/* A child that spins on one CPU (or wherever it is let run) until
 * hog_stop, dying with us if we die. Returns its pid or -errno. */
static pid_t hog_start(bool pin, unsigned cpu)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		return -errno;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) {
			_exit(1);
		}
		if (pin) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			if (sched_setaffinity(0, sizeof set, &set) != 0) {
				_exit(1);
			}
		}
		for (volatile unsigned long n = 0;; n++) {
		}
	}
	return pid;
}

static void hog_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
	}
}

static void write_summary(FILE *f, struct hosts *h, struct nemesis *nem,
                          const struct summary *s)
{
	fprintf(f, "run        %s (%s), directory %s\n", h->tag, h->subnet,
	        h->dir);
	fprintf(f, "command    %s\n", s->command);
	if (s->w == NULL) {
		fprintf(f, "workload   %s (no client: the history is empty)\n",
		        s->o->workload);
	} else {
		fprintf(f, "workload   %s (checked by %s): %s\n",
		        s->o->workload, wl_checker(s->w), s->wl_note);
	}
	if (s->o->fault != NULL) {
		fprintf(f,
		        "fault      LODESTONE_FAULT=%s in every node "
		        "(lodestone-faulty %s)\n",
		        s->o->fault, h->binary);
	}
	fprintf(f,
	        "nemesis    %s, seed %llu: %zu steps, %u faults started, %u "
	        "healed, %u skipped, %u errors\n",
	        s->o->nemesis, (unsigned long long)s->o->seed, s->steps,
	        nem->faults_started, nem->faults_healed, nem->faults_skipped,
	        nem->errors);
	if (nem->errors > 0) {
		fprintf(f, "           last error: %s\n", nem->err);
	}
	if (s->membership) {
		fprintf(f, "membership");
		for (unsigned op = 0; op < NEMESIS_MEMBER_N_OPS; op++) {
			fprintf(
			    f, "%s%s:", op == 0 ? " " : "; ",
			    nemesis_member_op_name((enum nemesis_member_op)op));
			for (unsigned o = 0; o < NEMESIS_MEMBER_N_OUTCOMES;
			     o++) {
				fprintf(f, " %u %s", nem->member_counts[op][o],
				        nemesis_member_outcome_name(
				            (enum nemesis_member_outcome)o));
			}
		}
		fprintf(f, "\n           members at the end:");
		for (unsigned id = 1; id <= h->n; id++) {
			if (hosts_node(h, id)->member == HOSTS_MEMBER) {
				fprintf(f, " n%u", id);
			}
		}
		fprintf(f, "\n");
	}
	fprintf(f, "duration   %u s, final phase from %.1f s%s\n", s->o->time_s,
	        (double)s->final_ms / 1000,
	        s->stopped ? " (stopped early by a signal)" : "");
	fprintf(f, "nodes      %u, exits the nemesis did not cause: %u\n",
	        s->members, s->exits);
	for (unsigned id = 1; id <= h->n; id++) {
		struct hosts_node *nd = hosts_node(h, id);
		if (nd->unexpected_exits > 0) {
			fprintf(f, "           n%u exited %u time(s); see %s\n",
			        id, nd->unexpected_exits, nd->log_path);
			describe_death(f, nd);
		}
	}
	if (!s->stopped) {
		fprintf(f,
		        "health     %u/%u nodes healthy after the final "
		        "phase\n",
		        s->healthy, s->members);
	}
	if (s->w != NULL) {
		fprintf(f,
		        "history    %llu operations: %llu ok, %llu fail, %llu "
		        "info, %llu never completed\n",
		        (unsigned long long)s->counts[WL_INVOKE],
		        (unsigned long long)s->counts[WL_OK],
		        (unsigned long long)s->counts[WL_FAIL],
		        (unsigned long long)s->counts[WL_INFO],
		        (unsigned long long)(s->counts[WL_INVOKE] -
		                             s->counts[WL_OK] -
		                             s->counts[WL_FAIL] -
		                             s->counts[WL_INFO]));
		fprintf(f, "check      %s\n",
		        s->checked ? s->vw.text : "not checked");
	}
	fprintf(f, "verdict    %s\n", s->verdict);
	fprintf(f,
	        "files      summary.txt history.txt%s nemesis.log "
	        "hosts.txt n<i>/lodestone.log\n",
	        s->w != NULL ? " verdicts.txt" : "");
}

/* The nemesis's leader oracle: shard i is data group i + 1. */
static int leader_oracle(void *arg, unsigned shard, unsigned *node)
{
	return wl_cluster_leader(arg, shard + 1, node);
}

/* A whole (small) text file, NUL-terminated; NULL with errno. */
static char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (f == NULL) {
		return NULL;
	}
	for (;;) {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0) {
			break;
		}
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	if (f == NULL) {
		return -errno;
	}
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -errno;
}

/* Fills the workload's view of the cluster. */
static void workload_config(struct hosts *h, const struct opts *o,
                            const struct nemesis_schedule *sched,
                            struct wl_config *wc)
{
	memset(wc, 0, sizeof *wc);
	wc->client_ns = h->client_ns;
	wc->n_nodes = h->bootstrap;
	wc->n_slots = h->n;
	wc->endpoints = &h->endpoints;
	for (unsigned id = 1; id <= h->n; id++) {
		struct hosts_node *nd = hosts_node(h, id);
		struct wl_node_info *ni = &wc->nodes[id - 1];
		ni->id = id;
		snprintf(ni->addr, sizeof ni->addr, "%s", nd->addr);
		snprintf(ni->felix_ca, sizeof ni->felix_ca,
		         "%s/tls/dev-cert.pem", nd->data_dir);
	}
	wc->t0_ns = h->t0_ns;
	wc->seed = o->seed;
	/* Operations go on into the healed final phase for half of it, so
	 * the history shows the cluster serving again; the final reads
	 * follow. */
	wc->ops_end_ms =
	    sched->final_ms + (sched->total_ms - sched->final_ms) / 2;
	wc->end_ms = sched->total_ms + FINAL_GRACE_MS;
	wc->shards = RUN_SHARDS;
	wc->procs = o->procs;
	wc->op_timeout_ms = o->op_timeout_ms;
	wc->dir = h->dir;
}

/* The verdict of a run with a workload (not stopped). */
static int judge(struct summary *s, bool cluster_ok)
{
	const struct opts *o = s->o;
	if (o->expect_invalid) {
		if (s->checked && s->vw.code == WL_INVALID) {
			snprintf(s->verdict_buf, sizeof s->verdict_buf,
			         "ok: the checkers caught the fault hook %s, "
			         "as expected (%zu anomalies)",
			         o->fault != NULL ? o->fault : "(none)",
			         s->vw.anomalies);
			return 0;
		}
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: anomalies were expected (fault hook %s) but "
		         "the checkers found none: %s",
		         o->fault != NULL ? o->fault : "(none)",
		         s->checked ? s->vw.text
		                    : "the history was not "
		                      "checked");
		return EXIT_CHECK;
	}
	if (!cluster_ok) {
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: the cluster did not come through the nemesis "
		         "(see health, exits, errors above)%s%s",
		         s->checked ? "; check: " : "",
		         s->checked ? s->vw.text : "");
		return EXIT_CHECK;
	}
	if (!s->checked) {
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: the workload wrote no history (%s)",
		         s->wl_note);
		return EXIT_CHECK;
	}
	if (s->counts[WL_OK] == 0) {
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: no operation succeeded: the cluster never "
		         "served the clients");
		return EXIT_CHECK;
	}
	switch (s->vw.code) {
	case WL_VALID:
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "ok: %s; every node survived the nemesis and is "
		         "healthy",
		         s->vw.text);
		return 0;
	case WL_INVALID:
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: anomalies (see verdicts.txt): %s",
		         s->vw.text);
		return EXIT_CHECK;
	case WL_UNKNOWN:
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: the check did not finish: %s", s->vw.text);
		return EXIT_CHECK;
	default:
		snprintf(s->verdict_buf, sizeof s->verdict_buf,
		         "FAILED: the history could not be checked: %s",
		         s->vw.text);
		return EXIT_CHECK;
	}
}

static int cmd_run(const struct opts *o, const char *binary, int argc,
                   char **argv)
{
	const struct wl_workload *w = NULL;
	bool none = strcmp(o->workload, "none") == 0;
	if (!none) {
		w = wl_find(o->workload);
		if (w == NULL) {
			fprintf(stderr, "jepsen/run: unknown workload '%s'\n\n",
			        o->workload);
			usage(stderr);
			return EXIT_USAGE;
		}
		if (wl_missing(w) != NULL) {
			fprintf(stderr, "workload not available yet: %s\n",
			        wl_missing(w));
			return EXIT_USAGE;
		}
	}
	if (none && (o->fault != NULL || o->expect_invalid)) {
		fprintf(stderr, "jepsen/run: --fault and --expect-invalid "
		                "need a workload\n");
		return EXIT_USAGE;
	}
	unsigned mask;
	if (strcmp(o->nemesis, "partition-leader") == 0 && !none) {
		mask = NEMESIS_BIT(NEMESIS_PARTITION_LEADER);
	} else if (nemesis_parse_mask(o->nemesis, o->nodes, !none, &mask) !=
	           0) {
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
	plan.shards = RUN_SHARDS;
	if (mask & NEMESIS_BIT(NEMESIS_MEMBERSHIP)) {
		plan.spares = HOSTS_MAX_NODES - oo.nodes < RUN_SPARES
		                  ? HOSTS_MAX_NODES - oo.nodes
		                  : RUN_SPARES;
	}
	if (oo.schedule != NULL) {
		char *text = read_text(oo.schedule);
		if (text == NULL) {
			fprintf(stderr, "jepsen/run: %s: %s\n", oo.schedule,
			        strerror(errno));
			return EXIT_USAGE;
		}
		int rc = nemesis_schedule_parse(&sched, text, oo.nodes,
		                                plan.total_ms, plan.final_ms,
		                                err, sizeof err);
		free(text);
		if (rc != 0) {
			fprintf(stderr, "jepsen/run: %s: %s\n", oo.schedule,
			        err);
			return EXIT_USAGE;
		}
		sched.seed = oo.seed;
		mask = 0; /* what the steps need (skew: libfaketime) */
		for (size_t i = 0; i < sched.n; i++) {
			mask |= NEMESIS_BIT(sched.steps[i].fault);
		}
		if (mask & NEMESIS_BIT(NEMESIS_MEMBERSHIP)) {
			plan.spares = HOSTS_MAX_NODES - oo.nodes < RUN_SPARES
			                  ? HOSTS_MAX_NODES - oo.nodes
			                  : RUN_SPARES;
		}
	} else if (nemesis_schedule_make(&sched, &plan, err, sizeof err) != 0) {
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
	if (oo.fault != NULL) {
		/* The marker is the variable's name, which only the
		 * fault-hook build reads. */
		if (!file_contains(binary, "LODESTONE_FAULT")) {
			fprintf(stderr,
			        "jepsen/run: %s has no fault hooks: build "
			        "lodestone-faulty (make lodestone-faulty, or "
			        "configure --enable-fault-hooks) or pass it "
			        "with --binary\n",
			        binary);
			nemesis_schedule_free(&sched);
			return EXIT_USAGE;
		}
		setenv("LODESTONE_FAULT", oo.fault, 1);
	} else {
		unsetenv("LODESTONE_FAULT");
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
	char scopes_path[HOSTS_PATH_LEN + 32] = "";
	const char *extra[HOSTS_MAX_EXTRA + 1];
	struct wl_run *run = NULL;
	pid_t hog = 0;
	int code = 0;
	memset(&nem, 0, sizeof nem);
	memset(&cfg, 0, sizeof cfg);
	cfg.nodes = oo.nodes;
	cfg.run_id = oo.run_id;
	cfg.net_prefix = oo.prefix;
	cfg.binary = binary;
	cfg.dir = oo.dir;
	cfg.faketime = (mask & NEMESIS_BIT(NEMESIS_SKEW)) != 0;
	cfg.pin_cpu = oo.pin_cpu;
	cfg.cpu = oo.cpu;
	cfg.spares = plan.spares;
	if (!none) {
		/* Dev mode: the generated Felix certificate, no auth. The
		 * scopes path is filled in once the run directory exists
		 * (the flags are read when the nodes start). */
		size_t e = 0;
		extra[e++] = "--dev";
		if (wl_scopes(w) != NULL) {
			extra[e++] = "--scopes-file";
			extra[e++] = scopes_path;
		}
		for (const char *const *a = wl_args(w);
		     a != NULL && *a != NULL && e < HOSTS_MAX_EXTRA; a++) {
			extra[e++] = *a;
		}
		extra[e] = NULL;
		cfg.extra_args = extra;
	}
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
	if (none) {
		snprintf(path, sizeof path, "%s/history.txt", h->dir);
		if (write_file(path, "# lodestone history (lines format), "
		                     "workload none: no client, no "
		                     "operations\n") != 0) {
			fprintf(stderr, "jepsen/run: create %s: %s\n", path,
			        strerror(errno));
			code = EXIT_HARNESS;
			goto out;
		}
	} else if (wl_scopes(w) != NULL) {
		snprintf(scopes_path, sizeof scopes_path, "%s/scopes.conf",
		         h->dir);
		if (write_file(scopes_path, wl_scopes(w)) != 0) {
			fprintf(stderr, "jepsen/run: create %s: %s\n",
			        scopes_path, strerror(errno));
			code = EXIT_HARNESS;
			goto out;
		}
	}
	snprintf(path, sizeof path, "%s/nemesis.log", h->dir);
	if (nemesis_open(&nem, h, path) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", nem.err);
		code = EXIT_HARNESS;
		goto out;
	}
	nem.stop_signals = stop;
	if (!none) {
		nem.leader = leader_oracle;
		nem.leader_arg = h;
	}
	if (mask & NEMESIS_BIT(NEMESIS_MEMBERSHIP)) {
		nem.member = wl_member_run;
		nem.member_arg = h;
	}
	printf("run %s in %s: %u nodes (%u spare) on %s%s%s\n", h->tag, h->dir,
	       h->bootstrap, h->n - h->bootstrap, h->subnet,
	       oo.fault != NULL ? ", fault hook " : "",
	       oo.fault != NULL ? oo.fault : "");
	fflush(stdout);
	if (hosts_start_all(h, 20000) != 0) {
		fprintf(stderr, "jepsen/run: %s\n", hosts_error(h));
		code = EXIT_HARNESS;
		goto out;
	}
	if (!none) {
		if (wl_cluster_wait_ready(h, RUN_SHARDS + 1, READY_TIMEOUT_MS,
		                          err, sizeof err) != 0) {
			fprintf(stderr,
			        "jepsen/run: the cluster did not elect a ready "
			        "leader for every group within %d s: %s\n",
			        READY_TIMEOUT_MS / 1000, err);
			code = EXIT_HARNESS;
			goto out;
		}
		if (oo.fault != NULL &&
		    !file_contains(hosts_node(h, 1)->log_path, "FAULT HOOK")) {
			fprintf(stderr,
			        "jepsen/run: node 1 does not report its fault "
			        "hook (no FAULT HOOK line in %s)\n",
			        hosts_node(h, 1)->log_path);
			code = EXIT_HARNESS;
			goto out;
		}
	}
	hosts_reset_clock(h);
	if (oo.cpu_hog) {
		hog = hog_start(oo.pin_cpu, oo.cpu);
		if (hog < 0) {
			fprintf(stderr,
			        "jepsen/run: cannot start the CPU hog: %s\n",
			        strerror(-(int)hog));
			code = EXIT_HARNESS;
			goto out;
		}
	}
	if (!none) {
		struct wl_config wc;
		workload_config(h, &oo, &sched, &wc);
		if (wl_start(&run, w, &wc, err, sizeof err) != 0) {
			fprintf(stderr, "jepsen/run: %s\n", err);
			code = EXIT_HARNESS;
			goto out;
		}
	}
	int rc = nemesis_run(&nem, &sched);
	if (hog > 0) {
		/* The final reads and the checks run unloaded. */
		hog_stop(hog);
		hog = 0;
	}

	struct summary s = {.o = &oo,
	                    .command = command,
	                    .steps = sched.n,
	                    .final_ms = sched.final_ms,
	                    .stopped = rc == -EINTR,
	                    .membership =
	                        (mask & NEMESIS_BIT(NEMESIS_MEMBERSHIP)) != 0,
	                    .w = w};
	if (run != NULL) {
		if (s.stopped) {
			wl_stop(run);
		}
		int jr = wl_join(run, FINAL_GRACE_MS);
		wl_stats(run, s.counts, s.wl_note, sizeof s.wl_note);
		if (jr == -ETIMEDOUT) {
			size_t l = strlen(s.wl_note);
			snprintf(s.wl_note + l, sizeof s.wl_note - l,
			         "%sthe workload thread did not finish",
			         l > 0 ? "; " : "");
		}
		s.checked = wl_history_written(run);
		if (jr != -ETIMEDOUT) {
			wl_free(run);
		}
		run = NULL;
	}
	hosts_reap(h);
	for (unsigned id = 1; id <= h->n; id++) {
		/* Removed and replaced nodes are out; a spare never ran. */
		if (hosts_node(h, id)->member == HOSTS_MEMBER) {
			s.members++;
			if (!s.stopped &&
			    hosts_node_wait_healthy(h, id, 15000) == 0) {
				s.healthy++;
			}
		}
		s.exits += hosts_node(h, id)->unexpected_exits;
	}
	bool cluster_ok =
	    s.healthy == s.members && s.exits == 0 && nem.errors == 0;
	if (s.checked && !s.stopped) {
		snprintf(path, sizeof path, "%s/verdicts.txt", h->dir);
		FILE *vf = fopen(path, "we");
		if (vf != NULL) {
			wl_check(w, h->dir, oo.check_ms, vf, &s.vw);
			fclose(vf);
		} else {
			s.checked = false;
		}
	} else {
		s.checked = false;
	}
	if (s.stopped) {
		s.verdict = "stopped (nothing checked)";
		code = EXIT_STOPPED;
	} else if (none) {
		if (!cluster_ok) {
			s.verdict = "FAILED: the cluster did not come through "
			            "the nemesis (see health, exits, errors "
			            "above)";
			code = EXIT_CHECK;
		} else {
			s.verdict = "ok: no workload, so no history to check; "
			            "every node survived the nemesis and is "
			            "healthy";
		}
	} else {
		code = judge(&s, cluster_ok);
		s.verdict = s.verdict_buf;
	}
	snprintf(path, sizeof path, "%s/summary.txt", h->dir);
	FILE *sf = fopen(path, "we");
	if (sf != NULL) {
		write_summary(sf, h, &nem, &s);
		fclose(sf);
	}
	write_summary(stdout, h, &nem, &s);
out:
	if (hog > 0) {
		hog_stop(hog);
	}
	if (run != NULL) {
		wl_stop(run);
		if (wl_join(run, FINAL_GRACE_MS) != -ETIMEDOUT) {
			wl_free(run);
		}
	}
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
	const char *binary =
	    find_binary(o.binary, o.fault != NULL, binbuf, sizeof binbuf);
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
