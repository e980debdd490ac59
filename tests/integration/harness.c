/* Integration-test harness; see harness.h. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Clusters still running, killed at exit. Test-only state. */
static struct harness_cluster *live[16];
static bool atexit_done;

static void kill_all(void)
{
	for (unsigned k = 0; k < 16; k++) {
		struct harness_cluster *c = live[k];
		if (c == NULL) {
			continue;
		}
		for (unsigned i = 0; i < c->n; i++) {
			if (c->nodes[i].pid > 0) {
				kill(c->nodes[i].pid, SIGKILL);
				waitpid(c->nodes[i].pid, NULL, 0);
				c->nodes[i].pid = 0;
			}
		}
	}
}

static void track(struct harness_cluster *c, bool on)
{
	if (!atexit_done) {
		atexit(kill_all);
		atexit_done = true;
	}
	for (unsigned k = 0; k < 16; k++) {
		if (on && live[k] == NULL) {
			live[k] = c;
			return;
		}
		if (!on && live[k] == c) {
			live[k] = NULL;
			return;
		}
	}
}

const char *harness_binary(void)
{
	const char *b = getenv("LS_LODESTONE");
	return b ? b : LS_ABS_BUILDDIR "/lodestone";
}

uint64_t harness_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void harness_nap(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Ports come from below the kernel's ephemeral range (32768-60999 by
 * default): a port bind(0) handed out and we released could be taken by
 * another process's outgoing connection (tests run two at a time) before
 * lodestone binds it. Free for both TCP and UDP when checked.
 *
 * A port handed out is also reserved until this test process exits: a file
 * named for it in PORT_DIR, created exclusively, holds our pid. Without it
 * two draws in one process (five per node) could return the same port, and
 * another test process could take a port of ours while its node is down
 * between a kill and a restart. A reservation whose pid is gone is stale and
 * taken over. */
#define PORT_DIR "/tmp/lodestone-test-ports"
#define PORT_MAX_HELD 1024

/* Ports this process reserved, released at exit. Test-only state. */
static uint16_t held[PORT_MAX_HELD];
static unsigned n_held;
static bool release_registered;

static void release_ports(void)
{
	char path[64];

	for (unsigned k = 0; k < n_held; k++) {
		snprintf(path, sizeof path, PORT_DIR "/%u", held[k]);
		unlink(path);
	}
	n_held = 0;
}

/* 0 when this process now holds @port, -1 when another live process or this
 * one already does (or the reservation cannot be made). */
static int reserve_port(uint16_t port)
{
	char path[64], buf[32];
	int fd, len;
	ssize_t got;

	if (n_held == PORT_MAX_HELD) {
		return -1;
	}
	if (!release_registered) {
		/* Once: a draw that reserves nothing leaves n_held at 0. */
		atexit(release_ports);
		release_registered = true;
	}
	mkdir(PORT_DIR, 0777);
	chmod(PORT_DIR, 01777);
	snprintf(path, sizeof path, PORT_DIR "/%u", port);
	for (int tries = 0; tries < 2; tries++) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd >= 0) {
			len =
			    snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
			got = write(fd, buf, (size_t)len);
			close(fd);
			if (got != len) {
				unlink(path);
				return -1;
			}
			held[n_held++] = port;
			return 0;
		}
		if (errno != EEXIST) {
			return -1;
		}
		/* Taken: by a live process (maybe us), or stale. */
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			continue; /* released meanwhile */
		}
		got = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (got <= 0) {
			return -1; /* being written right now */
		}
		buf[got] = '\0';
		long pid = strtol(buf, NULL, 10);
		if (pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
			return -1;
		}
		unlink(path); /* stale: its process is gone */
	}
	return -1;
}

uint16_t harness_free_port(void)
{
	static uint64_t rng;

	if (rng == 0) {
		rng = ((uint64_t)getpid() << 32) ^ harness_mono_ms() ^
		      0x9e3779b97f4a7c15ull;
	}
	for (int attempt = 0; attempt < 1000; attempt++) {
		struct sockaddr_in sa = {0};
		int t, u, ok;
		uint16_t port;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		port = (uint16_t)(20000 + rng % 12000);
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = htons(port);
		t = socket(AF_INET, SOCK_STREAM, 0);
		u = socket(AF_INET, SOCK_DGRAM, 0);
		ok = t >= 0 && u >= 0 &&
		     bind(t, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		     bind(u, (struct sockaddr *)&sa, sizeof sa) == 0;
		if (t >= 0) {
			close(t);
		}
		if (u >= 0) {
			close(u);
		}
		if (ok && reserve_port(port) == 0) {
			return port;
		}
	}
	return 0;
}

static void rm_rf(const char *path)
{
	const char *argv[] = {"rm", "-rf", path, NULL};
	char out[256];
	harness_run(argv, out, sizeof out);
}

int harness_node_start(struct harness_cluster *c, unsigned i)
{
	struct harness_node *nd = &c->nodes[i];
	char id[16], felix[32], fsnp[32], tls[32], internal[32], admin[32];
	char resp[32];
	char peers[1024], join[32];
	char subst[HARNESS_MAX_ARGS][600];
	size_t pl = 0;
	const char *argv[64];
	unsigned a = 0;

	snprintf(id, sizeof id, "%u", nd->id);
	snprintf(felix, sizeof felix, "127.0.0.1:%u", nd->felix);
	snprintf(fsnp, sizeof fsnp, "127.0.0.1:%u", nd->fsnp);
	snprintf(tls, sizeof tls, "127.0.0.1:%u", nd->fsnp_tls);
	snprintf(internal, sizeof internal, "127.0.0.1:%u", nd->internal);
	snprintf(admin, sizeof admin, "127.0.0.1:%u", nd->admin);
	snprintf(resp, sizeof resp, "127.0.0.1:%u", nd->resp);
	peers[0] = '\0';
	for (unsigned k = 0; k < c->n; k++) {
		if (c->nodes[k].join != 0) {
			continue; /* joined later: not a bootstrap member */
		}
		pl += (size_t)snprintf(peers + pl, sizeof peers - pl,
		                       "%s%u=127.0.0.1:%u", pl ? "," : "",
		                       c->nodes[k].id, c->nodes[k].internal);
	}
	snprintf(join, sizeof join, "127.0.0.1:%u", nd->join);
	argv[a++] = harness_binary();
	argv[a++] = "--node-id";
	argv[a++] = id;
	argv[a++] = "--data";
	argv[a++] = nd->data_dir;
	argv[a++] = "--felix";
	argv[a++] = felix;
	argv[a++] = "--fsnp";
	argv[a++] = fsnp;
	argv[a++] = "--fsnp-tls";
	argv[a++] = tls;
	argv[a++] = "--internal";
	argv[a++] = internal;
	argv[a++] = "--admin";
	argv[a++] = admin;
	if (c->resp) {
		argv[a++] = "--resp";
		argv[a++] = resp;
	}
	argv[a++] = "--advertise-host";
	argv[a++] = "127.0.0.1";
	if (nd->join != 0) {
		argv[a++] = "--join";
		argv[a++] = join;
	} else if (c->n > 1) {
		argv[a++] = "--peers";
		argv[a++] = peers;
	}
	for (unsigned k = 0; k < c->n_extra && a < 62; k++) {
		const char *at = strstr(c->extra[k], "{id}");
		if (at == NULL) {
			argv[a++] = c->extra[k];
			continue;
		}
		snprintf(subst[k], sizeof subst[k], "%.*s%u%s",
		         (int)(at - c->extra[k]), c->extra[k], nd->id, at + 4);
		argv[a++] = subst[k];
	}
	argv[a] = NULL;

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		/* Die with the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) {
			_exit(127);
		}
		int fd = open(nd->log_path,
		              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	nd->pid = pid;
	return 0;
}

static void node_prepare(struct harness_cluster *c, unsigned i)
{
	struct harness_node *nd = &c->nodes[i];
	nd->id = i + 1;
	snprintf(nd->data_dir, sizeof nd->data_dir, "%s/node%u", c->root,
	         nd->id);
	snprintf(nd->log_path, sizeof nd->log_path, "%s/node%u.log", c->root,
	         nd->id);
	nd->felix = harness_free_port();
	nd->fsnp = harness_free_port();
	nd->fsnp_tls = harness_free_port();
	nd->resp = harness_free_port();
	nd->internal = harness_free_port();
	nd->admin = harness_free_port();
}

int harness_node_join(struct harness_cluster *c, unsigned via)
{
	unsigned i = c->n;
	if (i >= HARNESS_MAX_NODES || via >= c->n) {
		return -1;
	}
	node_prepare(c, i);
	c->nodes[i].join = c->nodes[via].internal;
	c->n++;
	return harness_node_start(c, i) == 0 ? (int)i : -1;
}

static int cluster_start(struct harness_cluster *c, unsigned n,
                         const char *const extra[], bool wait, bool resp)
{
	const char *tmp = getenv("TMPDIR");
	memset(c, 0, sizeof *c);
	c->resp = resp;
	if (n == 0 || n > HARNESS_MAX_NODES) {
		return -1;
	}
	c->n = n;
	snprintf(c->root, sizeof c->root, "%s/lodestone-test-XXXXXX",
	         tmp ? tmp : "/tmp");
	if (mkdtemp(c->root) == NULL) {
		return -1;
	}
	for (unsigned k = 0;
	     extra != NULL && extra[k] != NULL && k < HARNESS_MAX_ARGS; k++) {
		c->extra[c->n_extra++] = extra[k];
	}
	for (unsigned i = 0; i < n; i++) {
		node_prepare(c, i);
	}
	track(c, true);
	for (unsigned i = 0; i < n; i++) {
		if (harness_node_start(c, i) != 0) {
			return -1;
		}
	}
	if (wait) {
		for (unsigned i = 0; i < n; i++) {
			if (harness_node_wait_healthy(c, i, 15000) != 0) {
				harness_node_dump_log(c, i);
				return -1;
			}
		}
	}
	return 0;
}

int harness_node_signal(struct harness_cluster *c, unsigned i, int sig,
                        int *status)
{
	struct harness_node *nd = &c->nodes[i];
	int st = 0;
	if (nd->pid <= 0) {
		return -1;
	}
	if (kill(nd->pid, sig) != 0) {
		return -1;
	}
	if (sig != SIGKILL && sig != SIGTERM && sig != SIGINT) {
		return 0;
	}
	uint64_t deadline = harness_mono_ms() + 10000;
	for (;;) {
		pid_t r = waitpid(nd->pid, &st, WNOHANG);
		if (r == nd->pid) {
			break;
		}
		if (harness_mono_ms() > deadline) {
			kill(nd->pid, SIGKILL);
			waitpid(nd->pid, &st, 0);
			break;
		}
		harness_nap(10);
	}
	nd->pid = 0;
	if (status != NULL) {
		*status = st;
	}
	return 0;
}

int harness_http(uint16_t port, const char *method, const char *path,
                 const char *body, int *status, char *body_out, size_t cap)
{
	struct sockaddr_in sa = {0};
	char req[8192];
	char resp[65536];
	size_t got = 0;
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	size_t blen = body ? strlen(body) : 0;
	int n = snprintf(req, sizeof req,
	                 "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n"
	                 "Content-Length: %zu\r\n\r\n%s",
	                 method, path, blen, body ? body : "");
	if (n < 0 || (size_t)n >= sizeof req ||
	    write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r = read(fd, resp + got, sizeof resp - 1 - got);
		if (r <= 0) {
			break;
		}
		got += (size_t)r;
		if (got == sizeof resp - 1) {
			break;
		}
	}
	close(fd);
	resp[got] = '\0';
	int st = 0;
	if (sscanf(resp, "HTTP/%*s %d", &st) != 1) {
		return -1;
	}
	*status = st;
	const char *b = strstr(resp, "\r\n\r\n");
	if (body_out != NULL && cap > 0) {
		snprintf(body_out, cap, "%s", b ? b + 4 : "");
	}
	return 0;
}

int harness_node_wait_healthy(struct harness_cluster *c, unsigned i,
                              unsigned timeout_ms)
{
	uint64_t deadline = harness_mono_ms() + timeout_ms;
	while (harness_mono_ms() < deadline) {
		int st;
		char body[512];
		if (c->nodes[i].pid > 0 &&
		    waitpid(c->nodes[i].pid, NULL, WNOHANG) ==
		        c->nodes[i].pid) {
			c->nodes[i].pid = 0;
			return -1; /* exited */
		}
		if (harness_http(c->nodes[i].admin, "GET", "/healthz", NULL,
		                 &st, body, sizeof body) == 0 &&
		    st == 200) {
			return 0;
		}
		harness_nap(20);
	}
	return -1;
}

void harness_secret(struct harness_cluster *c, const char *secret)
{
	if (secret[0] == '\0') {
		return;
	}
	/* A secret that could not be registered would go unchecked. */
	if (c->n_secrets >= HARNESS_MAX_SECRETS ||
	    strlen(secret) >= sizeof c->secrets[0]) {
		fprintf(stderr,
		        "harness: secret #%u cannot be registered (at "
		        "most %d of at most %zu bytes)\n",
		        c->n_secrets + 1, HARNESS_MAX_SECRETS,
		        sizeof c->secrets[0] - 1);
		exit(1);
	}
	snprintf(c->secrets[c->n_secrets++], sizeof c->secrets[0], "%s",
	         secret);
}

/* Whether the file holds `s`. */
static bool file_holds(const char *path, const char *s)
{
	FILE *f = fopen(path, "rb");
	size_t n = strlen(s), have = 0;
	char buf[65536 + 128];
	bool found = false;
	if (f == NULL) {
		return false;
	}
	for (;;) {
		size_t r = fread(buf + have, 1, sizeof buf - have - 1, f);
		if (r == 0) {
			break;
		}
		have += r;
		buf[have] = '\0';
		if (memmem(buf, have, s, n) != NULL) {
			found = true;
			break;
		}
		/* Keep a tail that may start a match across reads. */
		if (have >= n) {
			memmove(buf, buf + have - (n - 1), n - 1);
			have = n - 1;
		}
	}
	fclose(f);
	return found;
}

/* Every registered secret against every node's log. */
static bool secrets_leaked(const struct harness_cluster *c)
{
	bool leaked = false;
	for (unsigned i = 0; i < c->n; i++) {
		for (unsigned k = 0; k < c->n_secrets; k++) {
			if (file_holds(c->nodes[i].log_path, c->secrets[k])) {
				fprintf(stderr,
				        "harness: %s holds secret #%u the test "
				        "registered\n",
				        c->nodes[i].log_path, k + 1);
				leaked = true;
			}
		}
	}
	return leaked;
}

void harness_cluster_stop(struct harness_cluster *c)
{
	bool leaked;
	for (unsigned i = 0; i < c->n; i++) {
		if (c->nodes[i].pid > 0) {
			harness_node_signal(c, i, SIGTERM, NULL);
		}
	}
	track(c, false);
	leaked = secrets_leaked(c);
	if (leaked) {
		exit(1);
	}
	if (getenv("LS_KEEP_TMP") == NULL && c->root[0] != '\0') {
		rm_rf(c->root);
	}
}

int harness_run(const char *const argv[], char *out, size_t cap)
{
	int pipefd[2];
	if (pipe(pipefd) != 0) {
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	size_t got = 0;
	for (;;) {
		char tmp[4096];
		ssize_t r = read(pipefd[0], tmp, sizeof tmp);
		if (r <= 0) {
			break;
		}
		for (ssize_t k = 0; k < r && got + 1 < cap; k++) {
			out[got++] = tmp[k];
		}
	}
	if (cap > 0) {
		out[got < cap ? got : cap - 1] = '\0';
	}
	close(pipefd[0]);
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void harness_node_dump_log(struct harness_cluster *c, unsigned i)
{
	char buf[8192];
	FILE *f = fopen(c->nodes[i].log_path, "r");
	if (f == NULL) {
		return;
	}
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0,
	      SEEK_SET);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	fprintf(stderr, "---- node %u log (%s) ----\n%s\n----\n",
	        c->nodes[i].id, c->nodes[i].log_path, buf);
}

int harness_cluster_start(struct harness_cluster *c, unsigned n,
                          const char *const extra[], bool wait)
{
	return cluster_start(c, n, extra, wait, false);
}

int harness_cluster_start_resp(struct harness_cluster *c, unsigned n,
                               const char *const extra[], bool wait)
{
	return cluster_start(c, n, extra, wait, true);
}
