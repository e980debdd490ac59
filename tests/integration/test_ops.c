/* Integration: what a service manager and a load balancer see of a node —
 * the sd_notify readiness protocol (READY=1 once the listeners are up,
 * STOPPING=1 on drain) on a datagram socket of the test's own, by path and
 * by abstract name, and GET /readyz on one node and on three nodes of which
 * two are killed. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"

static const char *const base_args[] = {"--shards", "4", NULL};

/* Polls GET /readyz on node i until it answers `want` with a body that
 * contains `has` (any body when NULL); returns the body. */
static void wait_readyz(struct harness_cluster *c, unsigned i, int want,
                        const char *has, unsigned timeout_ms, char *body,
                        size_t cap)
{
	uint64_t start = harness_mono_ms();
	int st = 0;
	for (;;) {
		if (harness_http(c->nodes[i].admin, "GET", "/readyz", NULL, &st,
		                 body, cap) == 0 &&
		    st == want && (has == NULL || strstr(body, has) != NULL)) {
			return;
		}
		if (harness_mono_ms() - start > timeout_ms) {
			harness_node_dump_log(c, i);
			fail_msg(
			    "node %u: /readyz %d, not %d with %s, after %u ms: "
			    "%s",
			    i + 1, st, want, has != NULL ? has : "any body",
			    timeout_ms, body);
		}
		harness_nap(100);
	}
}

/* A datagram socket bound at `name` (a path, or "@..." abstract). */
static int notify_listen(const char *name)
{
	struct sockaddr_un sa;
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_true(len < sizeof sa.sun_path);
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, name, len);
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	                              len + (name[0] == '@' ? 0 : 1));
	if (name[0] == '@') {
		sa.sun_path[0] = '\0';
	}
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, salen), 0);
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	return fd;
}

static void notify_expect(int fd, const char *want)
{
	char msg[512];
	ssize_t n = recv(fd, msg, sizeof msg - 1, 0);
	if (n < 0) {
		fail_msg("no notification '%s': %s", want, strerror(errno));
		return;
	}
	msg[(size_t)n] = '\0';
	if (strstr(msg, want) == NULL) {
		fail_msg("notification '%s' lacks '%s'", msg, want);
	}
}

static void check_notify(const char *name)
{
	struct harness_cluster c;
	char body[2048];
	int st;
	int fd = notify_listen(name);

	assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
	assert_int_equal(harness_cluster_start(&c, 1, base_args, false), 0);
	unsetenv("NOTIFY_SOCKET");
	notify_expect(fd, "READY=1");
	/* READY=1 means the listeners answer. */
	assert_int_equal(harness_http(c.nodes[0].admin, "GET", "/healthz", NULL,
	                              &st, body, sizeof body),
	                 0);
	assert_int_equal(st, 200);
	assert_int_equal(harness_node_signal(&c, 0, SIGTERM, &st), 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	notify_expect(fd, "STOPPING=1");
	harness_cluster_stop(&c);
	close(fd);
}

static void test_notify_path(void **state)
{
	char dir[] = "/tmp/ls-notify-XXXXXX", path[128];
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/notify", dir);
	check_notify(path);
	unlink(path);
	rmdir(dir);
}

static void test_notify_abstract(void **state)
{
	char name[64];
	(void)state;
	snprintf(name, sizeof name, "@lodestone-test-notify-%ld",
	         (long)getpid());
	check_notify(name);
}

static void test_readyz_one_node(void **state)
{
	struct harness_cluster c;
	char body[2048];
	(void)state;
	assert_int_equal(harness_cluster_start(&c, 1, base_args, true), 0);
	wait_readyz(&c, 0, 200, NULL, 20000, body, sizeof body);
	assert_non_null(strstr(body, "\"status\":\"ready\""));
	assert_non_null(strstr(body, "\"groups\":5"));
	harness_cluster_stop(&c);
}

static void test_readyz_three_nodes_lose_quorum(void **state)
{
	struct harness_cluster c;
	char body[2048];
	(void)state;
	assert_int_equal(harness_cluster_start(&c, 3, base_args, true), 0);
	for (unsigned i = 0; i < 3; i++) {
		wait_readyz(&c, i, 200, NULL, 30000, body, sizeof body);
	}
	assert_int_equal(harness_node_signal(&c, 1, SIGKILL, NULL), 0);
	assert_int_equal(harness_node_signal(&c, 2, SIGKILL, NULL), 0);
	/* The survivor's groups lose their leaders once elections fail and
	 * leaders that lost their quorum step down. */
	/* Groups step down one by one: wait until the meta group is among
	 * them. */
	wait_readyz(&c, 0, 503, "\"groups_without_leader\":[0", 30000, body,
	            sizeof body);
	assert_non_null(strstr(body, "\"status\":\"not ready\""));
	/* /healthz still says the process is alive. */
	int st;
	assert_int_equal(harness_http(c.nodes[0].admin, "GET", "/healthz", NULL,
	                              &st, body, sizeof body),
	                 0);
	assert_int_equal(st, 200);
	/* A peer back: leaders again. */
	assert_int_equal(harness_node_start(&c, 1), 0);
	wait_readyz(&c, 0, 200, NULL, 30000, body, sizeof body);
	harness_cluster_stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_notify_path),
	    cmocka_unit_test(test_notify_abstract),
	    cmocka_unit_test(test_readyz_one_node),
	    cmocka_unit_test(test_readyz_three_nodes_lose_quorum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
