/* Fault-testing hosts; see hosts.h. Namespaces and links are made with
 * `ip` (iproute2); processes enter a namespace with setns(2) in the child
 * between fork and exec, the same as `ip netns exec` without its mount
 * namespace, which lodestone does not need. */
#include "jepsen/hosts.h"

#include "jepsen/crashlog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns"
#define IP_TIMEOUT_MS 10000
#define MAX_NS_PIDS 256

/* Slot of the bridge and client namespaces in hosts.created. */
#define SLOT_BRIDGE 0
#define SLOT_CLIENT (HOSTS_MAX_NODES + 1)

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

__attribute__((format(printf, 3, 4))) static void fmt_err(char *err, size_t cap,
                                                          const char *fmt, ...)
{
	va_list ap;
	if (err == NULL || cap == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

#define seterr(h, ...) fmt_err((h)->err, sizeof(h)->err, __VA_ARGS__)

/* Copies src into dst[cap]; -ENAMETOOLONG if it does not fit. */
static int copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap) {
		return -ENAMETOOLONG;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

static int mkdir_p(const char *path)
{
	char buf[HOSTS_PATH_LEN];
	if (copy_str(buf, sizeof buf, path) != 0) {
		return -ENAMETOOLONG;
	}
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/') {
			continue;
		}
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
		return -errno;
	}
	return 0;
}

/* Writes `text` to path atomically (temp file, then rename), so a reader
 * never sees half of it. */
static int write_file_atomic(const char *path, const char *text)
{
	char tmp[HOSTS_PATH_LEN + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		return -errno;
	}
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w < 0) {
			int rc = -errno;
			close(fd);
			unlink(tmp);
			return rc;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		int rc = -errno;
		unlink(tmp);
		return rc;
	}
	return 0;
}

static int open_netns(const char *ns)
{
	char path[HOSTS_PATH_LEN];
	snprintf(path, sizeof path, NETNS_DIR "/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* In a child between fork and exec: default signal dispositions and an
 * empty mask, so the program does not inherit the harness's handling. */
static void child_reset_signals(void)
{
	static const int sigs[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP,
	                           SIGQUIT, SIGCHLD, SIGALRM, SIGUSR1};
	sigset_t none;
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		signal(sigs[i], SIG_DFL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int hosts_netns_enter(const char *ns, int *saved, char *err, size_t cap)
{
	int cur = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (cur < 0) {
		int rc = -errno;
		fmt_err(err, cap, "open /proc/thread-self/ns/net: %s",
		        strerror(-rc));
		return rc;
	}
	int fd = open_netns(ns);
	if (fd < 0) {
		fmt_err(err, cap, "open namespace %s: %s", ns, strerror(-fd));
		close(cur);
		return fd;
	}
	if (setns(fd, CLONE_NEWNET) != 0) {
		int rc = -errno;
		fmt_err(err, cap, "setns %s: %s", ns, strerror(-rc));
		close(fd);
		close(cur);
		return rc;
	}
	close(fd);
	*saved = cur;
	return 0;
}

int hosts_netns_leave(int saved)
{
	int rc = setns(saved, CLONE_NEWNET) == 0 ? 0 : -errno;
	close(saved);
	return rc;
}

int hosts_netns_call(const char *ns, hosts_ns_fn fn, void *arg)
{
	int saved, rc;
	rc = hosts_netns_enter(ns, &saved, NULL, 0);
	if (rc != 0) {
		return rc;
	}
	rc = fn(arg);
	if (hosts_netns_leave(saved) != 0) {
		/* The thread is stranded in the wrong namespace: nothing
		 * after this can be trusted. */
		abort();
	}
	return rc;
}

/* ---------------------------------------------------------------------
 * Running programs */

/* Reads fd into out until EOF or the deadline; returns -ETIMEDOUT when the
 * deadline passed first. */
static int drain(int fd, char *out, size_t cap, size_t *len, int64_t deadline)
{
	char scratch[4096];
	for (;;) {
		int64_t left = (deadline - mono_ns()) / 1000000;
		if (left <= 0) {
			return -ETIMEDOUT;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r < 0) {
			return -errno;
		}
		if (r == 0) {
			return -ETIMEDOUT;
		}
		ssize_t n = read(fd, scratch, sizeof scratch);
		if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
			continue;
		}
		if (n <= 0) {
			return n == 0 ? 0 : -errno;
		}
		if (out != NULL && cap > 0) {
			size_t room = cap - 1 - *len;
			size_t k = (size_t)n < room ? (size_t)n : room;
			memcpy(out + *len, scratch, k);
			*len += k;
			out[*len] = '\0';
		}
	}
}

int hosts_run(const char *ns, const char *const argv[], const char *const env[],
              const char *input, char *out, size_t cap, unsigned timeout_ms,
              int *exit_status)
{
	int in[2], outp[2], nsfd = -1, rc;
	size_t len = 0;
	if (out != NULL && cap > 0) {
		out[0] = '\0';
	}
	if (ns != NULL) {
		nsfd = open_netns(ns);
		if (nsfd < 0) {
			return nsfd;
		}
	}
	/* A socket as stdin: a child that exits without reading its input
	 * must not SIGPIPE us (send with MSG_NOSIGNAL). */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
		rc = -errno;
		goto err_ns;
	}
	if (pipe2(outp, O_CLOEXEC) != 0) {
		rc = -errno;
		goto err_in;
	}
	pid_t pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto err_out;
	}
	if (pid == 0) {
		child_reset_signals();
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) != 0) {
			dprintf(outp[1], "setns %s: %s\n", ns, strerror(errno));
			_exit(126);
		}
		dup2(in[1], 0);
		dup2(outp[1], 1);
		dup2(outp[1], 2);
		for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
			putenv((char *)env[i]);
		}
		execvp(argv[0], (char *const *)argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[1]);
	close(outp[1]);
	if (input != NULL) {
		size_t n = strlen(input), off = 0;
		while (off < n) {
			ssize_t w =
			    send(in[0], input + off, n - off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR) {
				continue;
			}
			if (w < 0) {
				break; /* it exited: its status says why */
			}
			off += (size_t)w;
		}
	}
	close(in[0]);
	rc = drain(outp[0], out, cap, &len,
	           mono_ns() + (int64_t)timeout_ms * 1000000);
	close(outp[0]);
	if (rc == -ETIMEDOUT) {
		kill(pid, SIGKILL);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	if (nsfd >= 0) {
		close(nsfd);
	}
	if (rc != 0) {
		return rc;
	}
	if (exit_status != NULL) {
		*exit_status = st;
	}
	return 0;

err_out:
	close(outp[0]);
	close(outp[1]);
err_in:
	close(in[0]);
	close(in[1]);
err_ns:
	if (nsfd >= 0) {
		close(nsfd);
	}
	return rc;
}

/* Runs `ip ARGS...` (NULL-terminated varargs); 0 when it exits 0, else
 * -EIO with its output in err. */
static int ip_cmd(char *err, size_t cap, ...)
{
	const char *argv[24];
	char out[1024];
	size_t n = 0;
	va_list ap;
	argv[n++] = "ip";
	va_start(ap, cap);
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
		if (n < sizeof argv / sizeof argv[0] - 1) {
			argv[n++] = a;
		}
	}
	va_end(ap);
	argv[n] = NULL;
	int st;
	int rc = hosts_run(NULL, argv, NULL, NULL, out, sizeof out,
	                   IP_TIMEOUT_MS, &st);
	if (rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		return 0;
	}
	char cmd[256] = "ip";
	for (size_t i = 1; i < n; i++) {
		size_t l = strlen(cmd);
		snprintf(cmd + l, sizeof cmd - l, " %s", argv[i]);
	}
	out[strcspn(out, "\n")] = '\0';
	if (rc != 0) {
		fmt_err(err, cap, "`%s`: %s", cmd, strerror(-rc));
	} else {
		fmt_err(err, cap, "`%s` failed: %s", cmd,
		        out[0] != '\0' ? out : "(no output)");
	}
	return -EIO;
}

/* ---------------------------------------------------------------------
 * Names, leftovers and cleanup */

int hosts_parse_tag(const char *name, unsigned *run_id)
{
	if (strncmp(name, "lsj", 3) != 0) {
		return -EINVAL;
	}
	const char *p = name + 3;
	unsigned v = 0;
	size_t digits = 0;
	while (*p >= '0' && *p <= '9' && digits < 4) {
		v = v * 10 + (unsigned)(*p - '0');
		p++;
		digits++;
	}
	if (digits == 0 || (digits > 1 && name[3] == '0') || v == 0 ||
	    v > HOSTS_MAX_RUN_ID || (*p != '\0' && *p != '-')) {
		return -EINVAL;
	}
	*run_id = v;
	return 0;
}

/* Pids of the processes whose network namespace is `ns`. */
static size_t ns_pids(const char *ns, pid_t *pids, size_t max)
{
	char path[HOSTS_PATH_LEN];
	struct stat want, st;
	size_t n = 0;
	snprintf(path, sizeof path, NETNS_DIR "/%s", ns);
	if (stat(path, &want) != 0) {
		return 0;
	}
	DIR *d = opendir("/proc");
	if (d == NULL) {
		return 0;
	}
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end != '\0' || pid <= 0 || pid == getpid()) {
			continue;
		}
		snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
		if (stat(path, &st) != 0 || st.st_ino != want.st_ino ||
		    st.st_dev != want.st_dev) {
			continue;
		}
		if (n < max) {
			pids[n++] = (pid_t)pid;
		}
	}
	closedir(d);
	return n;
}

/* Whether pid is gone or a zombie (dead, not reaped by its parent). */
static bool pid_dead(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		return true;
	}
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p == NULL || (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* SIGKILLs every process in namespace ns and waits (up to 3 s) until they
 * are dead. Returns how many it killed. */
static unsigned kill_ns_pids(const char *ns, FILE *report)
{
	pid_t pids[MAX_NS_PIDS];
	size_t n = ns_pids(ns, pids, MAX_NS_PIDS);
	unsigned killed = 0;
	for (size_t i = 0; i < n; i++) {
		if (kill(pids[i], SIGKILL) == 0) {
			killed++;
			if (report != NULL) {
				fprintf(report, "killed process %d in %s\n",
				        (int)pids[i], ns);
			}
		}
	}
	for (int t = 0; t < 300; t++) {
		bool all = true;
		for (size_t i = 0; i < n; i++) {
			all = all && pid_dead(pids[i]);
		}
		if (all) {
			break;
		}
		sleep_ms(10);
	}
	return killed;
}

/* Deletes namespace ns: `ip netns del`, else by hand (what it does). */
static int del_ns(const char *ns, char *err, size_t cap)
{
	if (ip_cmd(err, cap, "netns", "del", ns, NULL) == 0) {
		return 0;
	}
	char path[HOSTS_PATH_LEN];
	snprintf(path, sizeof path, NETNS_DIR "/%s", ns);
	umount2(path, MNT_DETACH);
	if (unlink(path) != 0 && errno != ENOENT) {
		return -errno;
	}
	return 0;
}

static void lock_path_for(char *out, size_t cap, const char *lock_dir,
                          unsigned run_id)
{
	snprintf(out, cap, "%s/lsj%u.lock", lock_dir, run_id);
}

/* Tries to take run_id's lock without waiting: the fd, -EWOULDBLOCK when a
 * live run holds it, another -errno on error. */
static int try_lock(const char *lock_dir, unsigned run_id, bool create)
{
	char path[HOSTS_PATH_LEN];
	lock_path_for(path, sizeof path, lock_dir, run_id);
	int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
	if (fd < 0) {
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int rc = -errno;
		close(fd);
		return rc == -EAGAIN ? -EWOULDBLOCK : rc;
	}
	return fd;
}

/* Names of every lsj* namespace of run_id (0: all). */
static size_t list_ns(unsigned run_id, char names[][HOSTS_NAME_LEN], size_t max)
{
	size_t n = 0;
	DIR *d = opendir(NETNS_DIR);
	if (d == NULL) {
		return 0;
	}
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		unsigned id;
		if (hosts_parse_tag(e->d_name, &id) != 0 ||
		    (run_id != 0 && id != run_id) ||
		    strlen(e->d_name) >= HOSTS_NAME_LEN) {
			continue;
		}
		if (n < max) {
			memcpy(names[n], e->d_name, strlen(e->d_name) + 1);
			n++;
		}
	}
	closedir(d);
	return n;
}

/* Removes every namespace (and its processes) of run_id. */
static unsigned remove_run(unsigned run_id, FILE *report, char *err, size_t cap)
{
	char names[64][HOSTS_NAME_LEN];
	size_t n = list_ns(run_id, names, 64);
	unsigned removed = 0;
	/* Processes first, in every namespace of the run, then the
	 * namespaces. */
	for (size_t i = 0; i < n; i++) {
		removed += kill_ns_pids(names[i], report);
	}
	for (size_t i = 0; i < n; i++) {
		if (del_ns(names[i], err, cap) == 0) {
			removed++;
			if (report != NULL) {
				fprintf(report, "deleted namespace %s\n",
				        names[i]);
			}
		}
	}
	return removed;
}

int hosts_cleanup(const char *lock_dir, bool stale_only, FILE *report,
                  unsigned *removed, char *err, size_t cap)
{
	char names[256][HOSTS_NAME_LEN];
	bool seen[HOSTS_MAX_RUN_ID + 1] = {false};
	bool alive[HOSTS_MAX_RUN_ID + 1] = {false};
	unsigned total = 0;
	int rc = 0;
	if (lock_dir == NULL) {
		lock_dir = HOSTS_LOCK_DIR;
	}
	size_t n = list_ns(0, names, 256);
	for (size_t i = 0; i < n; i++) {
		unsigned id;
		hosts_parse_tag(names[i], &id);
		seen[id] = true;
	}
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *p = ifs; p != NULL && p->if_name != NULL;
	     p++) {
		unsigned id;
		if (hosts_parse_tag(p->if_name, &id) == 0) {
			seen[id] = true;
		}
	}
	for (unsigned id = 1; id <= HOSTS_MAX_RUN_ID; id++) {
		if (!seen[id]) {
			continue;
		}
		int fd = -1;
		if (stale_only) {
			fd = try_lock(lock_dir, id, false);
			if (fd == -EWOULDBLOCK) {
				alive[id] = true;
				continue;
			}
		}
		/* Holding the lock (when there is one) while removing keeps a
		 * new run from taking the id half-way through. */
		total += remove_run(id, report, err, cap);
		if (fd >= 0) {
			close(fd);
		}
	}
	for (struct if_nameindex *p = ifs; p != NULL && p->if_name != NULL;
	     p++) {
		unsigned id;
		if (hosts_parse_tag(p->if_name, &id) != 0 || alive[id]) {
			continue;
		}
		if (ip_cmd(err, cap, "link", "del", p->if_name, NULL) == 0) {
			total++;
			if (report != NULL) {
				fprintf(report, "deleted link %s\n",
				        p->if_name);
			}
		} else {
			rc = -EIO;
		}
	}
	if (ifs != NULL) {
		if_freenameindex(ifs);
	}
	if (removed != NULL) {
		*removed = total;
	}
	/* Anything of a dead run still there is a failure. */
	unsigned left = 0;
	for (unsigned id = 1; id <= HOSTS_MAX_RUN_ID; id++) {
		if (seen[id] && !alive[id]) {
			hosts_leftovers(id, NULL, 0, &left);
			if (left > 0) {
				fmt_err(err, cap,
				        "lsj%u: %u object(s) could not be "
				        "removed",
				        id, left);
				rc = -EBUSY;
			}
		}
	}
	return rc;
}

static void list_add(char *list, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void list_add(char *list, size_t cap, const char *fmt, ...)
{
	if (list == NULL || cap == 0) {
		return;
	}
	size_t l = strlen(list);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(list + l, cap - l, fmt, ap);
	va_end(ap);
}

int hosts_leftovers(unsigned run_id, char *list, size_t cap, unsigned *count)
{
	char names[256][HOSTS_NAME_LEN];
	unsigned c = 0;
	if (list != NULL && cap > 0) {
		list[0] = '\0';
	}
	size_t n = list_ns(run_id, names, 256);
	for (size_t i = 0; i < n; i++) {
		pid_t pids[MAX_NS_PIDS];
		size_t k = ns_pids(names[i], pids, MAX_NS_PIDS);
		list_add(list, cap, "namespace %s\n", names[i]);
		c++;
		for (size_t j = 0; j < k; j++) {
			if (pid_dead(pids[j])) {
				continue;
			}
			list_add(list, cap, "process %d in %s\n", (int)pids[j],
			         names[i]);
			c++;
		}
	}
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *p = ifs; p != NULL && p->if_name != NULL;
	     p++) {
		unsigned id;
		if (hosts_parse_tag(p->if_name, &id) == 0 &&
		    (run_id == 0 || id == run_id)) {
			list_add(list, cap, "link %s\n", p->if_name);
			c++;
		}
	}
	if (ifs != NULL) {
		if_freenameindex(ifs);
	}
	*count = c;
	return 0;
}

int hosts_binary_is_asan(const char *path, bool *asan)
{
	static const char needle[] = "__asan_init";
	const size_t nl = sizeof needle - 1;
	char buf[65536];
	size_t keep = 0;
	FILE *f = fopen(path, "rbe");
	if (f == NULL) {
		return -errno;
	}
	*asan = false;
	for (;;) {
		size_t n = fread(buf + keep, 1, sizeof buf - keep, f);
		if (n == 0) {
			break;
		}
		n += keep;
		if (memmem(buf, n, needle, nl) != NULL) {
			*asan = true;
			break;
		}
		/* The needle may straddle two reads. */
		keep = nl - 1 < n ? nl - 1 : n;
		memmove(buf, buf + n - keep, keep);
	}
	int rc = ferror(f) ? -EIO : 0;
	fclose(f);
	return rc;
}

const char *hosts_faketime_lib(void)
{
	static const char *const places[] = {
	    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	    "/usr/lib/faketime/libfaketime.so.1",
	    "/usr/local/lib/faketime/libfaketime.so.1",
	};
	for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
		if (access(places[i], R_OK) == 0) {
			return places[i];
		}
	}
	return places[0];
}

int hosts_check_faketime(const char *binary, const char *lib, char *err,
                         size_t cap)
{
	bool asan = false;
	int rc = hosts_binary_is_asan(binary, &asan);
	if (lib == NULL) {
		lib = hosts_faketime_lib();
	}
	if (rc != 0) {
		fmt_err(err, cap, "read %s: %s", binary, strerror(-rc));
		return rc;
	}
	if (asan) {
		fmt_err(
		    err, cap,
		    "clock skew needs libfaketime in LD_PRELOAD, which does "
		    "not mix with AddressSanitizer, and %s is an ASan "
		    "build: use a plain build (configure without "
		    "--enable-sanitizers) for fault runs with skew",
		    binary);
		return -ENOTSUP;
	}
	if (access(lib, R_OK) != 0) {
		fmt_err(
		    err, cap,
		    "clock skew needs libfaketime, not found at %s: install "
		    "Debian's libfaketime package",
		    lib);
		return -ENOENT;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Sockets */

static int new_tcp_socket(void *arg)
{
	int *fd = arg;
	*fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return *fd < 0 ? -errno : 0;
}

int hosts_tcp_connect(const char *ns, const char *addr, uint16_t port,
                      unsigned timeout_ms)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(port)};
	int fd, rc;
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		return -EINVAL;
	}
	/* The socket belongs to the namespace it was created in. */
	rc = ns != NULL ? hosts_netns_call(ns, new_tcp_socket, &fd)
	                : new_tcp_socket(&fd);
	if (rc != 0) {
		return rc;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			return rc;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
		for (;;) {
			int64_t left = (deadline - mono_ns()) / 1000000;
			int r = left > 0 ? poll(&p, 1, (int)left) : 0;
			if (r < 0 && errno == EINTR) {
				continue;
			}
			if (r <= 0) {
				close(fd);
				return r == 0 ? -ETIMEDOUT : -errno;
			}
			break;
		}
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr != 0) {
			close(fd);
			return -soerr;
		}
	}
	return fd;
}

/* The Date header of an HTTP response head as Unix seconds, or 0. */
static int64_t http_date(const char *head)
{
	for (const char *p = head; p != NULL && *p != '\0';) {
		if (strncasecmp(p, "Date:", 5) == 0) {
			struct tm tm;
			memset(&tm, 0, sizeof tm);
			const char *v = p + 5;
			while (*v == ' ') {
				v++;
			}
			if (strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm) ==
			    NULL) {
				return 0;
			}
			return (int64_t)timegm(&tm);
		}
		p = strstr(p, "\r\n");
		p = p != NULL ? p + 2 : NULL;
	}
	return 0;
}

int hosts_http_request(const char *ns, const char *addr, uint16_t port,
                       const char *method, const char *path, const char *body,
                       unsigned timeout_ms, int *status, char *out, size_t cap)
{
	char head[768];
	size_t blen = body != NULL ? strlen(body) : 0, len = 0;
	size_t rcap = cap + 4096;
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
	int n = snprintf(head, sizeof head,
	                 "%s %s HTTP/1.0\r\nHost: %s:%u\r\n"
	                 "Content-Type: application/json\r\n"
	                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	                 method, path, addr, (unsigned)port, blen);
	if (n < 0 || (size_t)n >= sizeof head) {
		return -ENAMETOOLONG;
	}
	char *resp = malloc(rcap);
	if (resp == NULL) {
		return -ENOMEM;
	}
	int fd = hosts_tcp_connect(ns, addr, port, timeout_ms);
	if (fd < 0) {
		free(resp);
		return fd;
	}
	int rc = 0;
	errno = 0;
	/* Small requests: they fit in an empty socket buffer. */
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n ||
	    (blen > 0 && send(fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen)) {
		rc = errno != 0 ? -errno : -EIO;
	}
	if (rc == 0) {
		resp[0] = '\0';
		rc = drain(fd, resp, rcap, &len, deadline);
	}
	close(fd);
	int st = 0;
	char *sep = rc == 0 ? strstr(resp, "\r\n\r\n") : NULL;
	if (rc == 0 &&
	    (sscanf(resp, "HTTP/%*d.%*d %d", &st) != 1 || sep == NULL)) {
		rc = -EPROTO;
	}
	if (rc == 0) {
		if (out != NULL && cap > 0) {
			snprintf(out, cap, "%s", sep + 4);
		}
		*status = st;
	}
	free(resp);
	return rc;
}

int hosts_http_get(const char *ns, const char *addr, uint16_t port,
                   const char *path, unsigned timeout_ms, int *status,
                   char *body, size_t cap, int64_t *date_out)
{
	char req[512], resp[16384];
	size_t len = 0;
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
	int fd = hosts_tcp_connect(ns, addr, port, timeout_ms);
	if (fd < 0) {
		return fd;
	}
	int n = snprintf(req, sizeof req,
	                 "GET %s HTTP/1.0\r\nHost: %s:%u\r\n"
	                 "Connection: close\r\n\r\n",
	                 path, addr, (unsigned)port);
	if (n < 0 || (size_t)n >= sizeof req) {
		close(fd);
		return -ENAMETOOLONG;
	}
	/* A request this small fits in an empty socket buffer. */
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		int rc = -errno;
		close(fd);
		return rc != 0 ? rc : -EIO;
	}
	int rc = drain(fd, resp, sizeof resp, &len, deadline);
	close(fd);
	if (rc != 0) {
		return rc;
	}
	int st = 0;
	if (sscanf(resp, "HTTP/%*d.%*d %d", &st) != 1) {
		return -EPROTO;
	}
	char *sep = strstr(resp, "\r\n\r\n");
	if (sep == NULL) {
		return -EPROTO;
	}
	*sep = '\0';
	if (date_out != NULL) {
		*date_out = http_date(resp);
	}
	if (body != NULL && cap > 0) {
		snprintf(body, cap, "%s", sep + 4);
	}
	*status = st;
	return 0;
}

/* ---------------------------------------------------------------------
 * Hosts */

const char *hosts_error(const struct hosts *h)
{
	return h->err;
}

struct hosts_node *hosts_node(struct hosts *h, unsigned id)
{
	if (id < 1 || id > h->n) {
		return NULL;
	}
	return &h->nodes[id - 1];
}

bool hosts_node_live(const struct hosts *h, unsigned id)
{
	return id >= 1 && id <= h->n &&
	       h->nodes[id - 1].member == HOSTS_MEMBER &&
	       h->nodes[id - 1].pid > 0;
}

int64_t hosts_now_ns(const struct hosts *h)
{
	return mono_ns() - h->t0_ns;
}

void hosts_reset_clock(struct hosts *h)
{
	h->t0_ns = mono_ns();
}

static int parse_prefix(const char *p)
{
	unsigned a, b;
	char tail;
	if (sscanf(p, "%u.%u%c", &a, &b, &tail) != 2 || a > 255 || b > 255) {
		return -EINVAL;
	}
	return 0;
}

/* Libfaketime's offset text for skew_ms: "+3600.000", "-0.250". */
static void skew_text(char *out, size_t cap, int64_t skew_ms)
{
	int64_t a = skew_ms < 0 ? -skew_ms : skew_ms;
	snprintf(out, cap, "%c%lld.%03lld\n", skew_ms < 0 ? '-' : '+',
	         (long long)(a / 1000), (long long)(a % 1000));
}

/* The environment a process needs to run under node nd's skewed clock. */
struct faketime_env {
	char preload[HOSTS_PATH_LEN + 16];
	char file[HOSTS_PATH_LEN + 32];
	const char *env[5];
};

static void faketime_env(const struct hosts *h, const struct hosts_node *nd,
                         struct faketime_env *fe)
{
	snprintf(fe->preload, sizeof fe->preload, "LD_PRELOAD=%s",
	         h->faketime_lib);
	snprintf(fe->file, sizeof fe->file, "FAKETIME_TIMESTAMP_FILE=%s",
	         nd->faketime_path);
	fe->env[0] = fe->preload;
	fe->env[1] = fe->file;
	/* Re-read the file on every call, so a change takes effect now. */
	fe->env[2] = "FAKETIME_NO_CACHE=1";
	/* Monotonic clocks stay real: libuv, libraft and ngtcp2 timers run
	 * on them. */
	fe->env[3] = "FAKETIME_DONT_FAKE_MONOTONIC=1";
	fe->env[4] = NULL;
}

static int make_ns(struct hosts *h, size_t slot, const char *ns)
{
	int rc = ip_cmd(h->err, sizeof h->err, "netns", "add", ns, NULL);
	if (rc != 0) {
		return rc;
	}
	h->created[slot] = true;
	return ip_cmd(h->err, sizeof h->err, "-n", ns, "link", "set", "lo",
	              "up", NULL);
}

/* Host namespace ns gets interface `ns` (its end of a veth pair) with
 * addr; the other end, `ns`b, is enslaved to the bridge. */
static int attach(struct hosts *h, const char *ns, const char *addr)
{
	char peer[HOSTS_NAME_LEN + 1], bridge[HOSTS_NAME_LEN], cidr[32];
	snprintf(peer, sizeof peer, "%sb", ns);
	snprintf(bridge, sizeof bridge, "%s-br0", h->tag);
	snprintf(cidr, sizeof cidr, "%s/24", addr);
	char *e = h->err;
	size_t c = sizeof h->err;
	if (ip_cmd(e, c, "link", "add", ns, "netns", ns, "type", "veth", "peer",
	           "name", peer, "netns", h->bridge_ns, NULL) != 0 ||
	    ip_cmd(e, c, "-n", h->bridge_ns, "link", "set", peer, "master",
	           bridge, "up", NULL) != 0 ||
	    ip_cmd(e, c, "-n", ns, "addr", "add", cidr, "dev", ns, NULL) != 0 ||
	    ip_cmd(e, c, "-n", ns, "link", "set", ns, "up", NULL) != 0) {
		return -EIO;
	}
	return 0;
}

static int take_run_id(struct hosts *h, const char *lock_dir, unsigned wanted)
{
	int rc = mkdir_p(lock_dir);
	if (rc != 0) {
		seterr(h, "cannot create %s: %s", lock_dir, strerror(-rc));
		return rc;
	}
	unsigned first =
	    wanted != 0 ? wanted : (unsigned)getpid() % HOSTS_MAX_RUN_ID + 1;
	unsigned tries = wanted != 0 ? 1 : HOSTS_MAX_RUN_ID;
	for (unsigned k = 0; k < tries; k++) {
		unsigned id = (first - 1 + k) % HOSTS_MAX_RUN_ID + 1;
		int fd = try_lock(lock_dir, id, true);
		if (fd == -EWOULDBLOCK) {
			continue;
		}
		if (fd < 0) {
			seterr(h, "lock for run id %u: %s", id, strerror(-fd));
			return fd;
		}
		/* Ours now: whatever carries this id is a crashed run's. */
		remove_run(id, NULL, h->err, sizeof h->err);
		if (ftruncate(fd, 0) == 0) {
			dprintf(fd, "%d\n", (int)getpid());
		}
		h->lock_fd = fd;
		h->locked = true;
		h->run_id = id;
		lock_path_for(h->lock_path, sizeof h->lock_path, lock_dir, id);
		return 0;
	}
	if (wanted != 0) {
		seterr(h,
		       "run id %u is in use by a live run (lock %s/lsj%u.lock)",
		       wanted, lock_dir, wanted);
	} else {
		seterr(h, "every run id 1..%u is in use", HOSTS_MAX_RUN_ID);
	}
	return -EBUSY;
}

/* Finds an iptables that works inside a namespace of ours. */
static int pick_iptables(struct hosts *h, const char *wanted)
{
	static const char *const cands[] = {"iptables", "iptables-legacy"};
	char out[512];
	for (size_t i = 0; i < 2; i++) {
		const char *ipt = wanted != NULL ? wanted : cands[i];
		const char *argv[] = {ipt, "-w", "5", "-S", NULL};
		int st;
		int rc = hosts_run(h->nodes[0].ns, argv, NULL, NULL, out,
		                   sizeof out, IP_TIMEOUT_MS, &st);
		if (rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			snprintf(h->iptables, sizeof h->iptables, "%s", ipt);
			snprintf(h->iptables_restore,
			         sizeof h->iptables_restore, "%s-restore", ipt);
			return 0;
		}
		out[strcspn(out, "\n")] = '\0';
		seterr(h, "`%s -S` does not work in a namespace: %s", ipt,
		       rc != 0 ? strerror(-rc) : out);
		if (wanted != NULL) {
			break;
		}
	}
	return -EIO;
}

static int write_hosts_txt(struct hosts *h)
{
	char path[HOSTS_PATH_LEN + 16];
	snprintf(path, sizeof path, "%s/hosts.txt", h->dir);
	FILE *f = fopen(path, "we");
	if (f == NULL) {
		int rc = -errno;
		seterr(h, "create %s: %s", path, strerror(-rc));
		return rc;
	}
	fprintf(f, "# lodestone fault-testing hosts of run %s\n", h->tag);
	fprintf(f, "subnet %s\nbridge %s %s-br0\nclient %s %s\n", h->subnet,
	        h->bridge_ns, h->tag, h->client_ns, h->client_addr);
	for (unsigned i = 0; i < h->n; i++) {
		fprintf(f, "node %u %s %s %s%s\n", h->nodes[i].id,
		        h->nodes[i].ns, h->nodes[i].addr, h->nodes[i].log_path,
		        i < h->bootstrap ? "" : " spare");
	}
	fprintf(f, "iptables %s\nfaketime %s\n", h->iptables,
	        h->faketime ? h->faketime_lib : "off");
	if (fclose(f) != 0) {
		return -errno;
	}
	return 0;
}

static int check_config(struct hosts *h, const struct hosts_config *cfg)
{
	if (cfg->nodes < HOSTS_MIN_NODES || cfg->nodes > HOSTS_MAX_NODES) {
		seterr(h, "%u nodes: a run has %d to %d", cfg->nodes,
		       HOSTS_MIN_NODES, HOSTS_MAX_NODES);
		return -EINVAL;
	}
	if (cfg->spares > HOSTS_MAX_NODES - cfg->nodes) {
		seterr(h, "%u nodes and %u spares: at most %d hosts in all",
		       cfg->nodes, cfg->spares, HOSTS_MAX_NODES);
		return -EINVAL;
	}
	if (cfg->run_id > HOSTS_MAX_RUN_ID) {
		seterr(h, "run id %u: must be 1..%d (0: any free one)",
		       cfg->run_id, HOSTS_MAX_RUN_ID);
		return -EINVAL;
	}
	if (cfg->pin_cpu) {
		cpu_set_t mine;
		if (sched_getaffinity(0, sizeof mine, &mine) != 0 ||
		    cfg->cpu >= CPU_SETSIZE || !CPU_ISSET(cfg->cpu, &mine)) {
			seterr(h, "CPU %u is not available to this process",
			       cfg->cpu);
			return -EINVAL;
		}
	}
	if (cfg->binary == NULL || access(cfg->binary, X_OK) != 0) {
		seterr(h, "lodestone binary %s is not executable",
		       cfg->binary != NULL ? cfg->binary : "(none)");
		return -EINVAL;
	}
	if (cfg->dir == NULL || cfg->dir[0] == '\0') {
		seterr(h, "no run directory");
		return -EINVAL;
	}
	if (cfg->net_prefix != NULL && parse_prefix(cfg->net_prefix) != 0) {
		seterr(h, "network prefix '%s': want two octets like 10.77",
		       cfg->net_prefix);
		return -EINVAL;
	}
	size_t k = 0;
	while (cfg->extra_args != NULL && cfg->extra_args[k] != NULL) {
		if (k == HOSTS_MAX_EXTRA) {
			seterr(h, "more than %d extra node flags",
			       HOSTS_MAX_EXTRA);
			return -EINVAL;
		}
		h->extra_args[k] = cfg->extra_args[k];
		k++;
	}
	h->extra_args[k] = NULL;
	if (copy_str(h->binary, sizeof h->binary, cfg->binary) != 0 ||
	    copy_str(h->faketime_lib, sizeof h->faketime_lib,
	             cfg->faketime_lib != NULL ? cfg->faketime_lib
	                                       : hosts_faketime_lib()) != 0) {
		seterr(h, "path too long");
		return -ENAMETOOLONG;
	}
	if (geteuid() != 0) {
		seterr(h, "fault-testing hosts need root (network namespaces, "
		          "veth, iptables): run as root");
		return -EPERM;
	}
	if (cfg->faketime) {
		int rc = hosts_check_faketime(cfg->binary, h->faketime_lib,
		                              h->err, sizeof h->err);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

static int prepare_dirs(struct hosts *h, const char *dir)
{
	char tmp[HOSTS_PATH_LEN];
	int rc = mkdir_p(dir);
	if (rc != 0) {
		seterr(h, "create run directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	/* realpath() into a buffer needs PATH_MAX bytes; let it allocate. */
	char *abs = realpath(dir, NULL);
	if (abs == NULL) {
		seterr(h, "run directory %s: %s", dir, strerror(errno));
		return -EINVAL;
	}
	rc = copy_str(h->dir, sizeof h->dir - 64, abs);
	free(abs);
	if (rc != 0) {
		seterr(h, "run directory %s: path too long", dir);
		return -EINVAL;
	}
	for (unsigned i = 0; i < h->n; i++) {
		struct hosts_node *nd = &h->nodes[i];
		struct stat st;
		snprintf(tmp, sizeof tmp, "%s/n%u", h->dir, nd->id);
		snprintf(nd->dir, sizeof nd->dir, "%s", tmp);
		snprintf(nd->data_dir, sizeof nd->data_dir, "%s/data", tmp);
		snprintf(nd->log_path, sizeof nd->log_path, "%s/lodestone.log",
		         tmp);
		snprintf(nd->faketime_path, sizeof nd->faketime_path,
		         "%s/faketime", tmp);
		if (stat(nd->data_dir, &st) == 0) {
			seterr(h,
			       "run directory %s already holds node data (%s): "
			       "use a new directory",
			       h->dir, nd->data_dir);
			return -EEXIST;
		}
		rc = mkdir_p(tmp);
		if (rc == 0) {
			rc = hosts_node_set_skew(h, nd->id, 0);
		}
		if (rc != 0) {
			seterr(h, "prepare %s: %s", tmp, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int hosts_create(struct hosts *h, const struct hosts_config *cfg)
{
	char out[256];
	int rc, st;
	memset(h, 0, sizeof *h);
	h->lock_fd = -1;
	h->t0_ns = mono_ns();
	rc = check_config(h, cfg);
	if (rc != 0) {
		return rc;
	}
	h->bootstrap = cfg->nodes;
	h->n = cfg->nodes + cfg->spares;
	h->faketime = cfg->faketime;
	for (unsigned i = 0; i < h->n; i++) {
		h->nodes[i].id = i + 1;
		h->nodes[i].member =
		    i < h->bootstrap ? HOSTS_MEMBER : HOSTS_SPARE;
	}
	atomic_init(&h->endpoints, 0);
	const char *ipargv[] = {"ip", "netns", "list", NULL};
	rc = hosts_run(NULL, ipargv, NULL, NULL, out, sizeof out, IP_TIMEOUT_MS,
	               &st);
	if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		out[strcspn(out, "\n")] = '\0';
		seterr(h, "`ip netns` is unavailable (install iproute2): %s",
		       rc != 0 ? strerror(-rc) : out);
		return -ENOTSUP;
	}
	h->pin_cpu = cfg->pin_cpu;
	h->cpu = cfg->cpu;
	rc = prepare_dirs(h, cfg->dir);
	if (rc != 0) {
		return rc;
	}
	const char *lock_dir =
	    cfg->lock_dir != NULL ? cfg->lock_dir : HOSTS_LOCK_DIR;
	/* Leftovers of crashed runs go first; live runs stay. */
	hosts_cleanup(lock_dir, true, NULL, NULL, NULL, 0);
	rc = take_run_id(h, lock_dir, cfg->run_id);
	if (rc != 0) {
		return rc;
	}
	const char *prefix =
	    cfg->net_prefix != NULL ? cfg->net_prefix : HOSTS_DEFAULT_PREFIX;
	snprintf(h->tag, sizeof h->tag, "lsj%u", h->run_id);
	snprintf(h->bridge_ns, sizeof h->bridge_ns, "%s-br", h->tag);
	snprintf(h->client_ns, sizeof h->client_ns, "%s-c", h->tag);
	snprintf(h->client_addr, sizeof h->client_addr, "%s.%u.%d", prefix,
	         h->run_id, HOSTS_CLIENT_HOST);
	snprintf(h->subnet, sizeof h->subnet, "%s.%u.0/24", prefix, h->run_id);
	for (unsigned i = 0; i < h->n; i++) {
		snprintf(h->nodes[i].ns, sizeof h->nodes[i].ns, "%s-n%u",
		         h->tag, i + 1);
		snprintf(h->nodes[i].addr, sizeof h->nodes[i].addr, "%s.%u.%u",
		         prefix, h->run_id, i + 1);
	}

	char bridge[HOSTS_NAME_LEN];
	snprintf(bridge, sizeof bridge, "%s-br0", h->tag);
	rc = make_ns(h, SLOT_BRIDGE, h->bridge_ns);
	if (rc == 0) {
		rc = ip_cmd(h->err, sizeof h->err, "-n", h->bridge_ns, "link",
		            "add", bridge, "type", "bridge", NULL);
	}
	if (rc == 0) {
		rc = ip_cmd(h->err, sizeof h->err, "-n", h->bridge_ns, "link",
		            "set", bridge, "up", NULL);
	}
	for (unsigned i = 0; rc == 0 && i < h->n; i++) {
		rc = make_ns(h, 1 + i, h->nodes[i].ns);
		if (rc == 0) {
			rc = attach(h, h->nodes[i].ns, h->nodes[i].addr);
		}
	}
	if (rc == 0) {
		rc = make_ns(h, SLOT_CLIENT, h->client_ns);
	}
	if (rc == 0) {
		rc = attach(h, h->client_ns, h->client_addr);
	}
	if (rc == 0) {
		rc = pick_iptables(h, cfg->iptables);
	}
	if (rc == 0) {
		rc = write_hosts_txt(h);
	}
	if (rc != 0) {
		char keep[HOSTS_ERR_LEN];
		memcpy(keep, h->err, sizeof keep);
		hosts_destroy(h);
		memcpy(h->err, keep, sizeof keep);
		return rc;
	}
	return 0;
}

void hosts_destroy(struct hosts *h)
{
	for (unsigned i = 0; i < h->n && i < HOSTS_MAX_NODES; i++) {
		struct hosts_node *nd = &h->nodes[i];
		if (nd->pid > 0) {
			kill(nd->pid, SIGKILL);
			while (waitpid(nd->pid, &nd->last_status, 0) < 0 &&
			       errno == EINTR) {
			}
			nd->pid = 0;
			nd->paused = false;
		}
	}
	const char *names[HOSTS_MAX_NODES + 2];
	names[SLOT_BRIDGE] = h->bridge_ns;
	for (unsigned i = 0; i < HOSTS_MAX_NODES; i++) {
		names[1 + i] = h->nodes[i].ns;
	}
	names[SLOT_CLIENT] = h->client_ns;
	/* Stragglers first (anything a caller started in a namespace),
	 * then the namespaces, which takes their links with them. */
	for (size_t s = 0; s < HOSTS_MAX_NODES + 2; s++) {
		if (h->created[s]) {
			kill_ns_pids(names[s], NULL);
		}
	}
	for (size_t s = 0; s < HOSTS_MAX_NODES + 2; s++) {
		if (h->created[s]) {
			del_ns(names[s], h->err, sizeof h->err);
			h->created[s] = false;
		}
	}
	if (h->locked) {
		close(h->lock_fd);
		h->locked = false;
		h->lock_fd = -1;
	}
}

static int node_argv(struct hosts *h, struct hosts_node *nd,
                     char bufs[][HOSTS_PATH_LEN], const char **argv, size_t max)
{
	size_t a = 0, b = 0;
#define ARG(s) (argv[a++] = (s))
#define FMT(...)                                                               \
	(snprintf(bufs[b], HOSTS_PATH_LEN, __VA_ARGS__), argv[a++] = bufs[b++])
	ARG(h->binary);
	ARG("--node-id");
	FMT("%u", nd->id);
	ARG("--cluster-id");
	ARG("jepsen");
	ARG("--data");
	ARG(nd->data_dir);
	ARG("--felix");
	FMT("%s:%d", nd->addr, HOSTS_PORT_FELIX);
	ARG("--fsnp");
	FMT("%s:%d", nd->addr, HOSTS_PORT_FSNP);
	ARG("--fsnp-tls");
	FMT("%s:%d", nd->addr, HOSTS_PORT_FSNP_TLS);
	ARG("--internal");
	FMT("%s:%d", nd->addr, HOSTS_PORT_INTERNAL);
	ARG("--admin");
	FMT("%s:%d", nd->addr, HOSTS_PORT_ADMIN);
	ARG("--advertise-host");
	ARG(nd->addr);
	if (nd->join[0] != '\0') {
		/* A restart keeps it: with data, the node reads its members
		 * from DATA/cluster and the flag is harmless. */
		ARG("--join");
		ARG(nd->join);
		goto extra;
	}
	ARG("--peers");
	bufs[b][0] = '\0';
	for (unsigned i = 0; i < h->bootstrap; i++) {
		size_t l = strlen(bufs[b]);
		snprintf(bufs[b] + l, HOSTS_PATH_LEN - l, "%s%u=%s:%d",
		         i > 0 ? "," : "", h->nodes[i].id, h->nodes[i].addr,
		         HOSTS_PORT_INTERNAL);
	}
	argv[a++] = bufs[b++];
#undef ARG
#undef FMT
extra:
	for (size_t k = 0; h->extra_args[k] != NULL; k++) {
		if (a + 1 >= max) {
			return -E2BIG;
		}
		argv[a++] = h->extra_args[k];
	}
	argv[a] = NULL;
	return 0;
}

int hosts_node_start(struct hosts *h, unsigned id)
{
	struct hosts_node *nd = hosts_node(h, id);
	char bufs[8][HOSTS_PATH_LEN];
	const char *argv[24 + HOSTS_MAX_EXTRA];
	struct faketime_env fe;
	int rc, errp[2];
	if (nd == NULL) {
		seterr(h, "no node %u", id);
		return -EINVAL;
	}
	if (nd->pid > 0) {
		seterr(h, "node %u is already running (pid %d)", id,
		       (int)nd->pid);
		return -EALREADY;
	}
	if (nd->member != HOSTS_MEMBER) {
		seterr(h, "node %u is %s, not a member: not started", id,
		       nd->member == HOSTS_SPARE ? "a spare that never joined"
		                                 : "removed from the cluster");
		return -EINVAL;
	}
	rc = node_argv(h, nd, bufs, argv, sizeof argv / sizeof argv[0]);
	if (rc != 0) {
		seterr(h, "node %u: too many flags", id);
		return rc;
	}
	faketime_env(h, nd, &fe);
	int log =
	    open(nd->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log < 0) {
		rc = -errno;
		seterr(h, "open %s: %s", nd->log_path, strerror(-rc));
		return rc;
	}
	dprintf(log, "=== lsj: start %u of node %u at %.3f s%s ===\n",
	        nd->starts + 1, id, (double)hosts_now_ns(h) / 1e9,
	        h->faketime ? " (under libfaketime)" : "");
	int nsfd = open_netns(nd->ns);
	if (nsfd < 0) {
		seterr(h, "node %u: namespace %s: %s", id, nd->ns,
		       strerror(-nsfd));
		close(log);
		return nsfd;
	}
	/* Tells exec failures apart from a start: EOF means exec worked. */
	if (pipe2(errp, O_CLOEXEC) != 0) {
		rc = -errno;
		goto err_ns;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		rc = -errno;
		seterr(h, "fork: %s", strerror(-rc));
		close(errp[0]);
		close(errp[1]);
		goto err_ns;
	}
	if (pid == 0) {
		int e;
		/* Dies with the harness, so a crash leaves no node behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) {
			_exit(1);
		}
		setpgid(0, 0); /* a terminal's ^C is for the harness */
		child_reset_signals();
		/* A death leaves a core in n<i>/ (with the default core
		 * pattern, "core"; the machine's pattern is not ours). */
		struct rlimit core = {RLIM_INFINITY, RLIM_INFINITY};
		if (setrlimit(RLIMIT_CORE, &core) != 0 &&
		    getrlimit(RLIMIT_CORE, &core) == 0) {
			core.rlim_cur = core.rlim_max;
			setrlimit(RLIMIT_CORE, &core);
		}
		if (chdir(nd->dir) != 0) {
			goto child_err;
		}
		if (h->pin_cpu) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(h->cpu, &set);
			if (sched_setaffinity(0, sizeof set, &set) != 0) {
				goto child_err;
			}
		}
		if (setns(nsfd, CLONE_NEWNET) != 0) {
			goto child_err;
		}
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 ||
		    dup2(log, 2) < 0) {
			goto child_err;
		}
		if (h->faketime) {
			for (size_t i = 0; fe.env[i] != NULL; i++) {
				putenv((char *)fe.env[i]);
			}
		}
		execv(argv[0], (char *const *)argv);
	child_err:
		e = errno;
		if (write(errp[1], &e, sizeof e) != sizeof e) {
			_exit(127);
		}
		_exit(127);
	}
	close(errp[1]);
	int child_errno = 0;
	ssize_t r;
	while ((r = read(errp[0], &child_errno, sizeof child_errno)) < 0 &&
	       errno == EINTR) {
	}
	close(errp[0]);
	close(nsfd);
	close(log);
	if (r > 0) {
		while (waitpid(pid, &nd->last_status, 0) < 0 &&
		       errno == EINTR) {
		}
		seterr(h, "node %u: cannot start %s in %s: %s", id, argv[0],
		       nd->ns, strerror(child_errno));
		return -child_errno;
	}
	nd->pid = pid;
	nd->paused = false;
	nd->starts++;
	return 0;

err_ns:
	close(nsfd);
	close(log);
	return rc;
}

int hosts_node_join(struct hosts *h, unsigned id, unsigned via)
{
	struct hosts_node *nd = hosts_node(h, id);
	struct hosts_node *vn = hosts_node(h, via);
	if (nd == NULL || vn == NULL || nd->member != HOSTS_SPARE ||
	    vn->member != HOSTS_MEMBER) {
		seterr(h,
		       "node %u cannot join through node %u: it must be a "
		       "spare and the other a member",
		       id, via);
		return -EINVAL;
	}
	snprintf(nd->join, sizeof nd->join, "%s:%d", vn->addr,
	         HOSTS_PORT_INTERNAL);
	nd->member = HOSTS_MEMBER;
	int rc = hosts_node_start(h, id);
	if (rc != 0) {
		nd->member = HOSTS_SPARE;
		nd->join[0] = '\0';
	}
	return rc;
}

/* Whether exit status st of nd is its own clean leave: it was being
 * removed, exited 0, and its log says the cluster removed it (with no
 * crash or sanitizer report after). Such a node is gone for good. */
static bool clean_leave(struct hosts_node *nd, int st)
{
	if (!nd->leaving || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    crashlog_removed_exit(nd->log_path, nd->id) != 1) {
		return false;
	}
	nd->member = HOSTS_GONE;
	nd->removed_exit = true;
	return true;
}

/* A core dumped as n<i>/core is renamed core.<pid>, so that the next
 * death does not overwrite it. */
static void keep_core(struct hosts_node *nd, int st)
{
	char from[HOSTS_PATH_LEN + 8], to[HOSTS_PATH_LEN + 32];
	if (!WIFSIGNALED(st) || !WCOREDUMP(st)) {
		return;
	}
	snprintf(from, sizeof from, "%s/core", nd->dir);
	snprintf(to, sizeof to, "%s/core.%d", nd->dir, (int)nd->pid);
	if (rename(from, to) == 0) {
		snprintf(nd->core_path, sizeof nd->core_path, "%s", to);
	} else if (access(to, F_OK) == 0) {
		/* A pattern with the pid in it (core_uses_pid). */
		snprintf(nd->core_path, sizeof nd->core_path, "%s", to);
	}
}

unsigned hosts_reap(struct hosts *h)
{
	unsigned n = 0;
	for (unsigned i = 0; i < h->n; i++) {
		struct hosts_node *nd = &h->nodes[i];
		int st;
		if (nd->pid > 0 && waitpid(nd->pid, &st, WNOHANG) == nd->pid) {
			keep_core(nd, st);
			nd->pid = 0;
			nd->paused = false;
			nd->last_status = st;
			atomic_fetch_and(&h->endpoints, ~(1u << nd->id));
			if (clean_leave(nd, st)) {
				continue;
			}
			nd->unexpected_exits++;
			n++;
		}
	}
	return n;
}

static void describe_status(char *out, size_t cap, int st)
{
	if (WIFEXITED(st)) {
		snprintf(out, cap, "exit %d", WEXITSTATUS(st));
	} else if (WIFSIGNALED(st)) {
		snprintf(out, cap, "signal %d", WTERMSIG(st));
	} else {
		snprintf(out, cap, "status 0x%x", st);
	}
}

int hosts_node_wait_healthy(struct hosts *h, unsigned id, unsigned timeout_ms)
{
	struct hosts_node *nd = hosts_node(h, id);
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
	char body[512];
	int last = 0, st = 0;
	if (nd == NULL) {
		seterr(h, "no node %u", id);
		return -EINVAL;
	}
	for (;;) {
		hosts_reap(h);
		if (nd->pid == 0) {
			char why[64];
			describe_status(why, sizeof why, nd->last_status);
			seterr(h,
			       "node %u is not running (last %s) before "
			       "answering /healthz; see %s",
			       id, why, nd->log_path);
			return -ESRCH;
		}
		int64_t left = (deadline - mono_ns()) / 1000000;
		if (left <= 0) {
			break;
		}
		last = hosts_http_get(nd->ns, nd->addr, HOSTS_PORT_ADMIN,
		                      "/healthz",
		                      left < 1000 ? (unsigned)left : 1000, &st,
		                      body, sizeof body, NULL);
		if (last == 0 && st == 200) {
			return 0;
		}
		sleep_ms(50);
	}
	seterr(h,
	       "node %u: no healthy /healthz within %u ms (last: %s); see %s",
	       id, timeout_ms, last != 0 ? strerror(-last) : "not 200",
	       nd->log_path);
	return -ETIMEDOUT;
}

int hosts_start_all(struct hosts *h, unsigned timeout_ms)
{
	int rc;
	for (unsigned i = 1; i <= h->bootstrap; i++) {
		rc = hosts_node_start(h, i);
		if (rc != 0) {
			return rc;
		}
	}
	for (unsigned i = 1; i <= h->bootstrap; i++) {
		rc = hosts_node_wait_healthy(h, i, timeout_ms);
		if (rc != 0) {
			return rc;
		}
		atomic_fetch_or(&h->endpoints, 1u << i);
	}
	return 0;
}

int hosts_node_signal(struct hosts *h, unsigned id, int sig)
{
	struct hosts_node *nd = hosts_node(h, id);
	if (nd == NULL) {
		seterr(h, "no node %u", id);
		return -EINVAL;
	}
	if (nd->pid <= 0) {
		seterr(h, "node %u is not running", id);
		return -ESRCH;
	}
	if (kill(nd->pid, sig) != 0) {
		int rc = -errno;
		seterr(h, "signal %d to node %u: %s", sig, id, strerror(-rc));
		return rc;
	}
	if (sig == SIGKILL) {
		int st = 0;
		while (waitpid(nd->pid, &st, 0) < 0 && errno == EINTR) {
		}
		if ((!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) &&
		    !clean_leave(nd, st)) {
			/* It had died by itself before the kill: that is
			 * still its own exit. */
			keep_core(nd, st);
			nd->unexpected_exits++;
		}
		nd->last_status = st;
		nd->pid = 0;
		nd->paused = false;
	} else if (sig == SIGSTOP) {
		nd->paused = true;
	} else if (sig == SIGCONT) {
		nd->paused = false;
	}
	return 0;
}

int hosts_node_set_skew(struct hosts *h, unsigned id, int64_t skew_ms)
{
	struct hosts_node *nd = hosts_node(h, id);
	char text[48];
	if (nd == NULL) {
		seterr(h, "no node %u", id);
		return -EINVAL;
	}
	skew_text(text, sizeof text, skew_ms);
	int rc = write_file_atomic(nd->faketime_path, text);
	if (rc != 0) {
		seterr(h, "write %s: %s", nd->faketime_path, strerror(-rc));
		return rc;
	}
	nd->skew_ms = skew_ms;
	return 0;
}

int hosts_node_run(struct hosts *h, unsigned id, const char *const argv[],
                   char *out, size_t cap, int *exit_status)
{
	struct hosts_node *nd = hosts_node(h, id);
	struct faketime_env fe;
	if (nd == NULL) {
		seterr(h, "no node %u", id);
		return -EINVAL;
	}
	faketime_env(h, nd, &fe);
	int rc = hosts_run(nd->ns, argv, fe.env, NULL, out, cap, IP_TIMEOUT_MS,
	                   exit_status);
	if (rc != 0) {
		seterr(h, "run %s in %s: %s", argv[0], nd->ns, strerror(-rc));
	}
	return rc;
}
