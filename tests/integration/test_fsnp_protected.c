/* Integration: FSNP protected mode from a non-loopback address. The test
 * makes a network namespace and a veth pair (root only; skipped
 * otherwise): the node runs inside the namespace, listening there, and
 * the test connects from the root namespace through the pair, so the node
 * sees a client that is not on loopback. Refused while no user has a
 * password (with the reason), served once one has, or with
 * --protected-mode no; a loopback client inside the namespace is always
 * served. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define PW "pr0tected-Secret"

static char ns[32], host_if[32], node_ip[32], host_ip[32];
static char tmp[256];

static int sh(const char *const argv[])
{
	char out[2048];
	int rv = harness_run(argv, out, sizeof out);
	if (rv != 0) {
		fprintf(stderr, "%s: %s\n", argv[0], out);
	}
	return rv;
}

static int setup(void **state)
{
	int n = (int)(getpid() % 200) + 20;
	(void)state;
	if (geteuid() != 0) {
		return 0;
	}
	snprintf(ns, sizeof ns, "lsprot%d", (int)getpid());
	snprintf(host_if, sizeof host_if, "lsp%dh", (int)getpid() % 100000);
	snprintf(node_ip, sizeof node_ip, "10.231.%d.2", n);
	snprintf(host_ip, sizeof host_ip, "10.231.%d.1", n);
	char cidr_node[40], cidr_host[40];
	snprintf(cidr_node, sizeof cidr_node, "%s/30", node_ip);
	snprintf(cidr_host, sizeof cidr_host, "%s/30", host_ip);
	const char *add[] = {"ip", "netns", "add", ns, NULL};
	const char *veth[] = {"ip",   "link", "add",  host_if, "type", "veth",
	                      "peer", "name", "eth0", "netns", ns,     NULL};
	const char *addr_h[] = {"ip",  "addr",  "add", cidr_host,
	                        "dev", host_if, NULL};
	const char *up_h[] = {"ip", "link", "set", host_if, "up", NULL};
	const char *addr_n[] = {"ip",  "netns",   "exec", ns,     "ip", "addr",
	                        "add", cidr_node, "dev",  "eth0", NULL};
	const char *up_n[] = {"ip",   "netns", "exec", ns,   "ip",
	                      "link", "set",   "eth0", "up", NULL};
	const char *lo_n[] = {"ip",   "netns", "exec", ns,   "ip",
	                      "link", "set",   "lo",   "up", NULL};
	if (sh(add) != 0) {
		ns[0] = '\0';
		return 0;
	}
	if (sh(veth) != 0 || sh(addr_h) != 0 || sh(up_h) != 0 ||
	    sh(addr_n) != 0 || sh(up_n) != 0 || sh(lo_n) != 0) {
		return -1;
	}
	snprintf(tmp, sizeof tmp, "/tmp/ls-protected-%d", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (ns[0] != '\0') {
		const char *del_if[] = {"ip", "link", "del", host_if, NULL};
		const char *del[] = {"ip", "netns", "del", ns, NULL};
		sh(del_if);
		sh(del);
	}
	if (tmp[0] != '\0') {
		const char *rm[] = {"rm", "-rf", tmp, NULL};
		sh(rm);
	}
	return 0;
}

/* Starts lodestone inside the namespace with `extra` flags; its pid. */
static pid_t start_node(const char *name, uint16_t port, const char *extra[])
{
	char data[300], log[300], fsnp[64], admin[64], internal[64], felix[64];
	const char *argv[40];
	int n = 0;
	snprintf(data, sizeof data, "%s/%s", tmp, name);
	snprintf(log, sizeof log, "%s/%s.log", tmp, name);
	snprintf(fsnp, sizeof fsnp, "0.0.0.0:%u", port);
	snprintf(admin, sizeof admin, "127.0.0.1:%u", port + 1);
	snprintf(internal, sizeof internal, "127.0.0.1:%u", port + 2);
	snprintf(felix, sizeof felix, "127.0.0.1:%u", port + 3);
	mkdir(tmp, 0700);
	argv[n++] = "ip";
	argv[n++] = "netns";
	argv[n++] = "exec";
	argv[n++] = ns;
	argv[n++] = harness_binary();
	argv[n++] = "--data";
	argv[n++] = data;
	argv[n++] = "--fsnp";
	argv[n++] = fsnp;
	argv[n++] = "--admin";
	argv[n++] = admin;
	argv[n++] = "--internal";
	argv[n++] = internal;
	argv[n++] = "--felix";
	argv[n++] = felix;
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		FILE *f = freopen(log, "w", stdout);
		(void)f;
		dup2(1, 2);
		execvp("ip", (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Fails the test when node `name`'s log holds `secret`. */
static void expect_not_logged(const char *name, const char *secret)
{
	char path[300];
	static char log[1 << 20];
	snprintf(path, sizeof path, "%s/%s.log", tmp, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	size_t n = fread(log, 1, sizeof log, f);
	fclose(f);
	assert_null(memmem(log, n, secret, strlen(secret)));
}

static void stop_node(pid_t pid)
{
	int st;
	kill(pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			return;
		}
		harness_nap(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

/* PING from the root namespace once the node answers at all: its status
 * and error text. */
static uint16_t remote_ping(uint16_t port, char *msg, size_t cap)
{
	uint64_t end = harness_mono_ms() + 20000;
	for (;;) {
		struct ftc c;
		struct ftc_msg m;
		struct wbuf b;
		if (ftc_connect_ip(&c, node_ip, port) == 0) {
			ftc_body(&b, "");
			int rv = ftc_call(&c, 0, FSNP_OP_PING, 0, &b, &m);
			wbuf_free(&b);
			if (rv == 0) {
				uint16_t st = m.status;
				ftc_error_text(&m, msg, cap);
				ftc_msg_free(&m);
				ftc_close(&c);
				return st;
			}
			ftc_close(&c);
		}
		assert_true(harness_mono_ms() < end);
		harness_nap(100);
	}
}

static void test_protected(void **state)
{
	char msg[512];
	(void)state;
	if (geteuid() != 0 || ns[0] == '\0') {
		fprintf(stderr, "protected mode test skipped: needs root and "
		                "`ip netns` to make a namespace\n");
		skip();
	}
	uint16_t port = harness_free_port();

	/* Default: protected mode on, no password: refused from outside. */
	pid_t pid = start_node("a", port, NULL);
	assert_int_equal(remote_ping(port, msg, sizeof msg),
	                 FSNP_STATUS_NOPERM);
	assert_non_null(strstr(msg, "DENIED"));
	assert_non_null(strstr(msg, "protected mode"));
	assert_non_null(strstr(msg, "--protected-mode no"));
	stop_node(pid);

	/* A password: served (after AUTH). */
	const char *pw[] = {"--requirepass", PW, NULL};
	pid = start_node("b", port, pw);
	assert_int_equal(remote_ping(port, msg, sizeof msg), 0);
	{
		struct ftc c;
		struct ftc_msg m;
		struct wbuf b;
		assert_int_equal(ftc_connect_ip(&c, node_ip, port), 0);
		ftc_body(&b, "username=s password=s", "default", PW);
		assert_int_equal(ftc_call(&c, 0, FSNP_OP_AUTH, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		ftc_msg_free(&m);
		ftc_close(&c);
	}
	stop_node(pid);
	expect_not_logged("b", PW);

	/* Protected mode off: served without a password. */
	const char *off[] = {"--protected-mode", "no", NULL};
	pid = start_node("c", port, off);
	assert_int_equal(remote_ping(port, msg, sizeof msg), 0);
	stop_node(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_protected),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
