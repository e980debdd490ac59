/* Self-test of hosts and nemeses; see selftest.h. */
#include "jepsen/selftest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_MS 300     /* a cut path must not connect within this */
#define REACH_MS 3000    /* a working path connects within this */
#define HEALTHY_MS 15000 /* a (re)started node answers /healthz */
#define SKEW_SLACK_S 3   /* clock comparisons: seconds of slack */

__attribute__((format(printf, 2, 3))) static void note(struct selftest *t,
                                                       const char *fmt, ...)
{
	size_t l = strlen(t->msg);
	va_list ap;
	if (l + 1 >= sizeof t->msg) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(t->msg + l, sizeof t->msg - l, fmt, ap);
	va_end(ap);
}

/* Whether a TCP connection from namespace ns to node dst's admin port
 * opens; *rc gets hosts_tcp_connect's error. */
static bool reaches(struct selftest *t, const char *ns, unsigned dst,
                    unsigned timeout_ms, int *rc)
{
	struct hosts_node *nd = hosts_node(&t->hosts, dst);
	int fd = hosts_tcp_connect(ns, nd->addr, HOSTS_PORT_ADMIN, timeout_ms);
	if (fd >= 0) {
		close(fd);
		*rc = 0;
		return true;
	}
	*rc = fd;
	return false;
}

static const char *ns_of(struct selftest *t, unsigned host)
{
	return host == NEMESIS_CLIENT ? t->hosts.client_ns
	                              : hosts_node(&t->hosts, host)->ns;
}

static void host_name(unsigned host, char *buf, size_t cap)
{
	if (host == NEMESIS_CLIENT) {
		snprintf(buf, cap, "client");
	} else {
		snprintf(buf, cap, "n%u", host);
	}
}

/* Probes every (client or node) -> node path and compares with g. */
static int check_matrix(struct selftest *t, const struct nemesis_grudge *g)
{
	int bad = 0;
	for (unsigned src = 0; src <= t->hosts.n; src++) {
		for (unsigned dst = 1; dst <= t->hosts.n; dst++) {
			if (src == dst) {
				continue;
			}
			bool want = nemesis_grudge_sees(g, src, dst);
			int rc;
			bool got = reaches(t, ns_of(t, src), dst,
			                   want ? REACH_MS : PROBE_MS, &rc);
			if (got != want) {
				char a[16], b[16];
				host_name(src, a, sizeof a);
				host_name(dst, b, sizeof b);
				note(t, "%s -> %s: %s (want %s; %s); ", a, b,
				     got ? "reachable" : "unreachable",
				     want ? "reachable" : "unreachable",
				     got ? "connected" : strerror(-rc));
				bad++;
			}
		}
	}
	return bad == 0 ? 0 : -EIO;
}

/* Whether the timeline file contains `text`. */
static bool timeline_has(struct selftest *t, const char *text)
{
	char buf[65536];
	FILE *f = fopen(t->timeline, "re");
	if (f == NULL) {
		return false;
	}
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

int selftest_setup(struct selftest *t, const char *binary, const char *dir,
                   unsigned nodes)
{
	struct hosts_config cfg;
	memset(t, 0, sizeof *t);
	snprintf(t->binary, sizeof t->binary, "%s", binary);
	snprintf(t->dir, sizeof t->dir, "%s", dir);
	if (geteuid() != 0) {
		note(t, "the hosts self-test needs root (network namespaces, "
		        "veth, iptables); it runs as root here and in CI");
		return -EPERM;
	}
	int rc = hosts_binary_is_asan(binary, &t->asan);
	if (rc != 0) {
		note(t, "read %s: %s", binary, strerror(-rc));
		return rc;
	}
	memset(&cfg, 0, sizeof cfg);
	cfg.nodes = nodes;
	cfg.binary = binary;
	cfg.dir = dir;
	cfg.faketime = !t->asan;
	rc = hosts_create(&t->hosts, &cfg);
	if (rc != 0) {
		note(t, "hosts_create: %s", hosts_error(&t->hosts));
		return rc;
	}
	t->up = true;
	snprintf(t->timeline, sizeof t->timeline, "%s/nemesis.log",
	         t->hosts.dir);
	rc = nemesis_open(&t->nem, &t->hosts, t->timeline);
	if (rc != 0) {
		note(t, "%s", t->nem.err);
		return rc;
	}
	rc = hosts_start_all(&t->hosts, HEALTHY_MS);
	if (rc != 0) {
		note(t, "start: %s", hosts_error(&t->hosts));
		return rc;
	}
	return 0;
}

void selftest_teardown(struct selftest *t)
{
	if (t->nem.timeline != NULL) {
		nemesis_close(&t->nem);
	}
	if (t->up) {
		hosts_destroy(&t->hosts);
		t->up = false;
	}
}

/* Every node answers /healthz on its own address, seen from the client
 * namespace. */
static int case_healthz(struct selftest *t)
{
	for (unsigned id = 1; id <= t->hosts.n; id++) {
		struct hosts_node *nd = hosts_node(&t->hosts, id);
		char body[512], want[32];
		int st = 0;
		int rc = hosts_http_get(t->hosts.client_ns, nd->addr,
		                        HOSTS_PORT_ADMIN, "/healthz", REACH_MS,
		                        &st, body, sizeof body, NULL);
		if (rc != 0 || st != 200) {
			note(t, "n%u (%s) /healthz from %s: %s", id, nd->addr,
			     t->hosts.client_ns,
			     rc != 0 ? strerror(-rc) : "not 200");
			return rc != 0 ? rc : -EIO;
		}
		snprintf(want, sizeof want, "\"node_id\":%u", id);
		if (strstr(body, want) == NULL) {
			note(t, "n%u /healthz body lacks %s: %s", id, want,
			     body);
			return -EIO;
		}
	}
	note(t, "%u nodes healthy from the client namespace", t->hosts.n);
	return 0;
}

/* Node 1 isolated, the client with the majority: node 1 is unreachable
 * from the client and from node 2, 2 <-> 3 work; the heal restores all.
 * Then the same with the client reaching every node. */
static int case_partition_isolate(struct selftest *t)
{
	struct nemesis_grudge g, none;
	int rc;
	nemesis_grudge_none(&none, t->hosts.n);
	for (int pass = 0; pass < 2; pass++) {
		enum nemesis_client_side side =
		    pass == 0 ? NEMESIS_CLIENT_MAJORITY : NEMESIS_CLIENT_ALL;
		nemesis_grudge_isolate(&g, t->hosts.n, 1, side);
		rc = nemesis_partition(&t->nem, &g, "partition-isolate");
		if (rc != 0) {
			note(t, "%s", t->nem.err);
			return rc;
		}
		rc = check_matrix(t, &g);
		if (rc != 0) {
			note(t, "under %s", g.desc);
			nemesis_heal_partition(&t->nem);
			return rc;
		}
		rc = nemesis_heal_partition(&t->nem);
		if (rc != 0) {
			note(t, "%s", t->nem.err);
			return rc;
		}
		rc = check_matrix(t, &none);
		if (rc != 0) {
			note(t, "after healing %s", g.desc);
			return rc;
		}
	}
	if (!timeline_has(t, " start partition-isolate 1|2,3") ||
	    !timeline_has(t, " heal partition-isolate 1|2,3")) {
		note(t, "timeline %s lacks the partition's start/heal",
		     t->timeline);
		return -EIO;
	}
	note(t, "isolation and heal verified on every path");
	return 0;
}

/* Random halves (seeded): every path matches the grudge, then heals. */
static int case_partition_halves(struct selftest *t)
{
	struct nemesis_grudge g, none;
	struct nemesis_rng r;
	nemesis_rng_seed(&r, 7);
	nemesis_grudge_none(&none, t->hosts.n);
	nemesis_grudge_halves(&g, t->hosts.n, &r, NEMESIS_CLIENT_MINORITY);
	int rc = nemesis_partition(&t->nem, &g, "partition-halves");
	if (rc != 0) {
		note(t, "%s", t->nem.err);
		return rc;
	}
	rc = check_matrix(t, &g);
	int hr = nemesis_heal_partition(&t->nem);
	if (rc != 0 || hr != 0) {
		note(t, "under %s %s", g.desc, hr != 0 ? t->nem.err : "");
		return rc != 0 ? rc : hr;
	}
	rc = check_matrix(t, &none);
	if (rc != 0) {
		return rc;
	}
	note(t, "halves %s verified and healed", g.desc);
	return 0;
}

/* A majorities ring (needs 4 nodes or more). */
static int case_partition_ring(struct selftest *t)
{
	struct nemesis_grudge g, none;
	struct nemesis_rng r;
	if (t->hosts.n < 4) {
		note(t,
		     "not applicable with %u nodes (a ring needs 4); "
		     "its shape is covered by the unit tests",
		     t->hosts.n);
		return 0;
	}
	nemesis_rng_seed(&r, 11);
	nemesis_grudge_none(&none, t->hosts.n);
	nemesis_grudge_ring(&g, t->hosts.n, &r);
	int rc = nemesis_partition(&t->nem, &g, "partition-ring");
	if (rc != 0) {
		note(t, "%s", t->nem.err);
		return rc;
	}
	rc = check_matrix(t, &g);
	int hr = nemesis_heal_partition(&t->nem);
	if (rc != 0 || hr != 0) {
		return rc != 0 ? rc : hr;
	}
	rc = check_matrix(t, &none);
	if (rc == 0) {
		note(t, "%s verified and healed", g.desc);
	}
	return rc;
}

/* kill -9: the port refuses; a restart on the same data comes back. */
static int case_kill_restart(struct selftest *t)
{
	struct hosts_node *nd = hosts_node(&t->hosts, 2);
	pid_t old = nd->pid;
	int rc = nemesis_kill(&t->nem, 2);
	if (rc != 0 || nd->pid != 0) {
		note(t, "kill: %s", t->nem.err);
		return rc != 0 ? rc : -EIO;
	}
	if (kill(old, 0) == 0) {
		note(t, "pid %d still exists after kill -9", (int)old);
		return -EIO;
	}
	int crc;
	if (reaches(t, t->hosts.client_ns, 2, PROBE_MS, &crc)) {
		note(t, "n2 admin port still accepts after kill -9");
		return -EIO;
	}
	rc = nemesis_restart(&t->nem, 2);
	if (rc == 0) {
		rc = hosts_node_wait_healthy(&t->hosts, 2, HEALTHY_MS);
		if (rc != 0) {
			note(t, "%s", hosts_error(&t->hosts));
		}
	} else {
		note(t, "restart: %s", t->nem.err);
	}
	if (rc != 0) {
		return rc;
	}
	note(t, "killed pid %d (connect: %s), restarted as pid %d, healthy",
	     (int)old, strerror(-crc), (int)nd->pid);
	return 0;
}

/* SIGSTOP: /healthz times out (the kernel still accepts the connection);
 * SIGCONT: it answers again. */
static int case_pause_resume(struct selftest *t)
{
	struct hosts_node *nd = hosts_node(&t->hosts, 3);
	char body[256];
	int st = 0;
	int rc = nemesis_pause(&t->nem, 3);
	if (rc != 0 || !nd->paused) {
		note(t, "pause: %s", t->nem.err);
		return rc != 0 ? rc : -EIO;
	}
	rc = hosts_http_get(t->hosts.client_ns, nd->addr, HOSTS_PORT_ADMIN,
	                    "/healthz", 500, &st, body, sizeof body, NULL);
	if (rc != -ETIMEDOUT) {
		note(t, "paused n3 /healthz: %s (want a timeout)",
		     rc == 0 ? "answered" : strerror(-rc));
		nemesis_resume(&t->nem, 3);
		return -EIO;
	}
	rc = nemesis_resume(&t->nem, 3);
	if (rc != 0) {
		note(t, "resume: %s", t->nem.err);
		return rc;
	}
	rc = hosts_http_get(t->hosts.client_ns, nd->addr, HOSTS_PORT_ADMIN,
	                    "/healthz", REACH_MS, &st, body, sizeof body, NULL);
	if (rc != 0 || st != 200) {
		note(t, "resumed n3 /healthz: %s",
		     rc != 0 ? strerror(-rc) : "not 200");
		return rc != 0 ? rc : -EIO;
	}
	note(t, "paused /healthz timed out; resumed it answers");
	return 0;
}

/* `date +%s` in node id's namespace under its faketime environment, minus
 * the real time, in seconds. */
static int date_offset(struct selftest *t, unsigned id, int64_t *off)
{
	const char *argv[] = {"date", "+%s", NULL};
	char out[128];
	int st;
	int rc = hosts_node_run(&t->hosts, id, argv, out, sizeof out, &st);
	if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		note(t, "date in n%u: %s", id,
		     rc != 0 ? hosts_error(&t->hosts) : out);
		return rc != 0 ? rc : -EIO;
	}
	*off = strtoll(out, NULL, 10) - (int64_t)time(NULL);
	return 0;
}

/* The wall clock of node id's lodestone (its HTTP Date header) minus the
 * real time, in seconds. */
static int node_offset(struct selftest *t, unsigned id, int64_t *off)
{
	struct hosts_node *nd = hosts_node(&t->hosts, id);
	char body[256];
	int st = 0;
	int64_t date = 0;
	int rc =
	    hosts_http_get(t->hosts.client_ns, nd->addr, HOSTS_PORT_ADMIN,
	                   "/healthz", REACH_MS, &st, body, sizeof body, &date);
	if (rc != 0 || st != 200 || date == 0) {
		note(t, "n%u /healthz under skew: %s", id,
		     rc != 0 ? strerror(-rc)
		             : (st != 200 ? "not 200" : "no Date header"));
		return rc != 0 ? rc : -EIO;
	}
	*off = date - (int64_t)time(NULL);
	return 0;
}

static bool near(int64_t got, int64_t want)
{
	return got >= want - SKEW_SLACK_S && got <= want + SKEW_SLACK_S;
}

static int skew_asan(struct selftest *t)
{
	char err[HOSTS_ERR_LEN];
	int64_t off;
	int rc = hosts_check_faketime(t->binary, NULL, err, sizeof err);
	if (rc != -ENOTSUP || strstr(err, "AddressSanitizer") == NULL) {
		note(t, "an ASan binary must be refused for skew: rc %d (%s)",
		     rc, err);
		return -EIO;
	}
	if (nemesis_skew(&t->nem, 1, 3600000) != -ENOTSUP) {
		note(t, "nemesis_skew must refuse nodes not under libfaketime");
		return -EIO;
	}
	/* The skew mechanism itself, on a plain program. */
	rc = hosts_node_set_skew(&t->hosts, 1, 3600000);
	if (rc == 0) {
		rc = date_offset(t, 1, &off);
	}
	hosts_node_set_skew(&t->hosts, 1, 0);
	if (rc != 0) {
		return rc;
	}
	if (!near(off, 3600)) {
		note(t, "date under +3600 s skew is off by %lld s",
		     (long long)off);
		return -EIO;
	}
	note(t,
	     "ASan build: lodestone skew refused (%s); date under the "
	     "node's faketime env: %+lld s",
	     err, (long long)off);
	return 0;
}

/* +1 h on node 1: its lodestone's Date header and `date` under its
 * environment are an hour ahead, node 2 is not, node 1 keeps answering;
 * -2 h likewise; the heal brings it back. */
static int case_skew(struct selftest *t)
{
	static const int64_t offsets_s[] = {3600, -7200, 0};
	if (t->asan) {
		return skew_asan(t);
	}
	for (size_t i = 0; i < 3; i++) {
		int64_t want = offsets_s[i], n1, d1, n2;
		int rc = nemesis_skew(&t->nem, 1, want * 1000);
		if (rc != 0) {
			note(t, "%s", t->nem.err);
			return rc;
		}
		rc = node_offset(t, 1, &n1);
		if (rc == 0) {
			rc = date_offset(t, 1, &d1);
		}
		if (rc == 0) {
			rc = node_offset(t, 2, &n2);
		}
		if (rc != 0) {
			return rc;
		}
		if (!near(n1, want) || !near(d1, want) || !near(n2, 0)) {
			note(t,
			     "skew %+lld s: n1 lodestone %+lld s, n1 date "
			     "%+lld s, n2 lodestone %+lld s",
			     (long long)want, (long long)n1, (long long)d1,
			     (long long)n2);
			return -EIO;
		}
		note(t, "skew %+lld s: n1 lodestone %+lld, date %+lld; ",
		     (long long)want, (long long)n1, (long long)d1);
	}
	return 0;
}

/* Whether any DROP rule is left in a node's namespace. */
static int rules_left(struct selftest *t, unsigned id, bool *left)
{
	const char *argv[] = {t->hosts.iptables, "-w", "5", "-S", NULL};
	char out[4096];
	int st;
	int rc = hosts_run(hosts_node(&t->hosts, id)->ns, argv, NULL, NULL, out,
	                   sizeof out, 10000, &st);
	if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		note(t, "%s -S in n%u: %s", t->hosts.iptables, id,
		     rc != 0 ? strerror(-rc) : out);
		return rc != 0 ? rc : -EIO;
	}
	*left = strstr(out, "DROP") != NULL;
	return 0;
}

/* A short seeded mixed schedule end to end: every fault healed, no rule
 * left, every node healthy after. */
static int case_schedule(struct selftest *t)
{
	struct nemesis_plan p;
	struct nemesis_schedule s;
	char err[256];
	unsigned mask;
	nemesis_parse_mask("mixed", t->hosts.n, false, &mask);
	if (t->asan) {
		mask &= ~NEMESIS_BIT(NEMESIS_SKEW);
	}
	nemesis_plan_defaults(&p, t->hosts.n, 42, mask, 4500);
	p.final_ms = 1000;
	p.quiet_min_ms = 100;
	p.quiet_max_ms = 300;
	p.fault_min_ms = 300;
	p.fault_max_ms = 700;
	int rc = nemesis_schedule_make(&s, &p, err, sizeof err);
	if (rc != 0) {
		note(t, "schedule: %s", err);
		return rc;
	}
	unsigned started = t->nem.faults_started;
	unsigned healed = t->nem.faults_healed;
	unsigned errors = t->nem.errors;
	rc = nemesis_run(&t->nem, &s);
	size_t steps = s.n;
	nemesis_schedule_free(&s);
	if (rc != 0) {
		note(t, "nemesis_run: %d", rc);
		return rc;
	}
	started = t->nem.faults_started - started;
	healed = t->nem.faults_healed - healed;
	if (t->nem.errors != errors || started != healed || started == 0) {
		note(t,
		     "%zu steps: %u faults started, %u healed, %u errors "
		     "(%s)",
		     steps, started, healed, t->nem.errors - errors,
		     t->nem.err);
		return -EIO;
	}
	for (unsigned id = 1; id <= t->hosts.n; id++) {
		bool left;
		rc = rules_left(t, id, &left);
		if (rc != 0) {
			return rc;
		}
		if (left) {
			note(t, "DROP rules left in n%u after the schedule",
			     id);
			return -EIO;
		}
		rc = hosts_node_wait_healthy(&t->hosts, id, HEALTHY_MS);
		if (rc != 0) {
			note(t, "after the schedule: %s",
			     hosts_error(&t->hosts));
			return rc;
		}
	}
	note(t,
	     "%zu steps, %u faults started and healed, no rule left, "
	     "all healthy",
	     steps, started);
	return 0;
}

/* A harness that dies with SIGKILL leaves namespaces but no node (they
 * die with it); cleanup of stale runs removes the namespaces and leaves
 * this live run alone. */
static int case_crash_cleanup(struct selftest *t)
{
	int pfd[2];
	char dir[HOSTS_PATH_LEN + 16], list[2048], err[HOSTS_ERR_LEN];
	unsigned id = 0, left = 0, removed = 0;
	snprintf(dir, sizeof dir, "%s/crashed-run", t->hosts.dir);
	if (pipe(pfd) != 0) {
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		struct hosts *h = calloc(1, sizeof *h);
		struct hosts_config cfg;
		memset(&cfg, 0, sizeof cfg);
		cfg.nodes = 3;
		cfg.binary = t->binary;
		cfg.dir = dir;
		close(pfd[0]);
		if (h == NULL || hosts_create(h, &cfg) != 0 ||
		    hosts_node_start(h, 1) != 0 ||
		    hosts_node_wait_healthy(h, 1, HEALTHY_MS) != 0) {
			unsigned zero = 0;
			if (h != NULL) {
				dprintf(2, "crashed-run child: %s\n",
				        hosts_error(h));
			}
			if (write(pfd[1], &zero, sizeof zero) < 0) {
				_exit(2);
			}
			_exit(1);
		}
		if (write(pfd[1], &h->run_id, sizeof h->run_id) < 0) {
			_exit(2);
		}
		raise(SIGKILL);
		_exit(3);
	}
	close(pfd[1]);
	ssize_t r = read(pfd[0], &id, sizeof id);
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	if (r != sizeof id || id == 0) {
		note(t, "the crashing child could not set up its run");
		return -EIO;
	}
	if (id == t->hosts.run_id) {
		note(t, "the child got this live run's id %u", id);
		return -EIO;
	}
	hosts_leftovers(id, list, sizeof list, &left);
	if (left == 0) {
		note(t, "the crashed run lsj%u left nothing to clean?", id);
		return -EIO;
	}
	/* Its node dies with it (PR_SET_PDEATHSIG). */
	for (int k = 0; k < 100; k++) {
		hosts_leftovers(id, list, sizeof list, &left);
		if (strstr(list, "process ") == NULL) {
			break;
		}
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	if (strstr(list, "process ") != NULL) {
		note(t, "a node of the crashed run outlived it:\n%s", list);
		return -EIO;
	}
	int rc = hosts_cleanup(NULL, true, NULL, &removed, err, sizeof err);
	hosts_leftovers(id, list, sizeof list, &left);
	if (rc != 0 || left != 0) {
		note(t, "cleanup: rc %d (%s); left:\n%s", rc, err, list);
		return -EIO;
	}
	/* This run is alive: untouched. */
	hosts_leftovers(t->hosts.run_id, list, sizeof list, &left);
	if (left < t->hosts.n + 2) {
		note(t, "cleanup of stale runs touched the live run:\n%s",
		     list);
		return -EIO;
	}
	note(t, "crashed run lsj%u: node died with it, %u objects removed", id,
	     removed);
	return 0;
}

/* Destroy leaves no namespace, link or process of the run. */
static int case_teardown(struct selftest *t)
{
	pid_t pids[HOSTS_MAX_NODES];
	char list[2048];
	unsigned left = 0, id = t->hosts.run_id, n = t->hosts.n;
	for (unsigned i = 0; i < n; i++) {
		pids[i] = t->hosts.nodes[i].pid;
	}
	selftest_teardown(t);
	hosts_leftovers(id, list, sizeof list, &left);
	if (left != 0) {
		note(t, "left after destroy:\n%s", list);
		return -EIO;
	}
	/* What `ip` itself reports, too. */
	char tag[HOSTS_NAME_LEN + 1], out[16384];
	snprintf(tag, sizeof tag, "lsj%u-", id);
	const char *const cmds[][4] = {{"ip", "netns", "list", NULL},
	                               {"ip", "-o", "link", NULL}};
	for (size_t c = 0; c < 2; c++) {
		int st;
		int rc = hosts_run(NULL, cmds[c], NULL, NULL, out, sizeof out,
		                   10000, &st);
		if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			note(t, "`%s %s` failed", cmds[c][0], cmds[c][1]);
			return -EIO;
		}
		if (strstr(out, tag) != NULL) {
			note(t, "`%s %s %s` still lists %s:\n%s", cmds[c][0],
			     cmds[c][1], cmds[c][2] != NULL ? cmds[c][2] : "",
			     tag, out);
			return -EIO;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		if (pids[i] > 0 && kill(pids[i], 0) == 0) {
			note(t, "node pid %d still exists", (int)pids[i]);
			return -EIO;
		}
	}
	note(t, "lsj%u: no namespace, link or process left", id);
	return 0;
}

const struct selftest_case selftest_cases[] = {
    {"healthz", case_healthz},
    {"partition-isolate", case_partition_isolate},
    {"partition-halves", case_partition_halves},
    {"partition-ring", case_partition_ring},
    {"kill-restart", case_kill_restart},
    {"pause-resume", case_pause_resume},
    {"skew", case_skew},
    {"schedule", case_schedule},
    {"crash-cleanup", case_crash_cleanup},
    {"teardown", case_teardown},
};

const unsigned selftest_n_cases =
    sizeof selftest_cases / sizeof selftest_cases[0];
