/* Integration: a real lodestone serving RESP (--resp), driven by a small
 * RESP client in this file: RESP2 and RESP3, pipelining, inline commands,
 * the connection commands, the KV commands with Redis's error texts,
 * CLIENT, INFO, COMMAND, CLUSTER, a protocol error closing the
 * connection, the query buffer bound; then the same scripted session run
 * against Debian's redis-server (started on a loopback port; skipped when
 * it is missing, a failure with CI=true), the answers compared byte for
 * byte where Lodestone means to behave the same. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"
#include "wire/fsnp_slot.h"

static struct harness_cluster cluster;
static uint16_t port;

/* --- A small RESP client -------------------------------------------------- */

struct rc {
	int fd;
	char buf[1 << 20];
	size_t len;
};

static int rc_connect(struct rc *c, uint16_t p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p)};
	int one = 1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->len = 0;
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0) {
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (int i = 0; i < 100; i++) {
		if (connect(c->fd, (struct sockaddr *)&a, sizeof a) == 0) {
			return 0;
		}
		harness_nap(50);
	}
	close(c->fd);
	return -1;
}

static void rc_close(struct rc *c)
{
	close(c->fd);
}

static void rc_send(struct rc *c, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t k = write(c->fd, s, n);
		assert_true(k > 0);
		s += k;
		n -= (size_t)k;
	}
}

/* Length of the complete reply at p (0: incomplete). */
static size_t reply_len(const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	size_t head, total;
	long long k;
	if (n == 0 || nl == NULL) {
		return 0;
	}
	head = (size_t)(nl - p) + 1;
	k = atoll(p + 1);
	switch (p[0]) {
	case '$':
	case '=':
	case '!':
		if (k < 0) {
			return head;
		}
		return n >= head + (size_t)k + 2 ? head + (size_t)k + 2 : 0;
	case '*':
	case '~':
	case '>':
	case '%':
		if (k < 0) {
			return head;
		}
		if (p[0] == '%') {
			k *= 2;
		}
		total = head;
		for (long long i = 0; i < k; i++) {
			size_t e = reply_len(p + total, n - total);
			if (e == 0) {
				return 0;
			}
			total += e;
		}
		return total;
	default:
		return head;
	}
}

/* The next reply's bytes (NUL-terminated in a static buffer); "" when the
 * server closed the connection. Bounded by 10 s. */
static const char *rc_reply(struct rc *c)
{
	static char out[1 << 20];
	uint64_t until = harness_mono_ms() + 10000;
	for (;;) {
		size_t n = reply_len(c->buf, c->len);
		if (n > 0) {
			assert_true(n < sizeof out);
			memcpy(out, c->buf, n);
			out[n] = '\0';
			memmove(c->buf, c->buf + n, c->len - n);
			c->len -= n;
			return out;
		}
		struct pollfd pf = {c->fd, POLLIN, 0};
		assert_true(harness_mono_ms() < until);
		if (poll(&pf, 1, 200) <= 0) {
			continue;
		}
		ssize_t k =
		    read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
		if (k <= 0) {
			out[0] = '\0';
			return out;
		}
		c->len += (size_t)k;
	}
}

/* Sends one command as a multibulk array (arguments split on spaces; "~"
 * stands for an empty argument) and returns the reply. */
static const char *rc_cmd(struct rc *c, const char *line)
{
	char copy[4096], msg[8192];
	const char *argv[64];
	int argc = 0;
	size_t n;
	snprintf(copy, sizeof copy, "%s", line);
	for (char *t = strtok(copy, " "); t != NULL && argc < 64;
	     t = strtok(NULL, " ")) {
		argv[argc++] = strcmp(t, "~") == 0 ? "" : t;
	}
	n = (size_t)snprintf(msg, sizeof msg, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		n += (size_t)snprintf(msg + n, sizeof msg - n, "$%zu\r\n%s\r\n",
		                      strlen(argv[i]), argv[i]);
	}
	rc_send(c, msg, n);
	return rc_reply(c);
}

/* A send that may meet a connection the server closed (the limits). */
static void rc_send_try(struct rc *c, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t k = send(c->fd, s, n, MSG_NOSIGNAL);
		if (k <= 0) {
			return;
		}
		s += k;
		n -= (size_t)k;
	}
}

#define EXPECT(c, cmd, want) assert_string_equal(rc_cmd(c, cmd), want)

/* --- Lodestone alone ------------------------------------------------------ */

static int setup(void **state)
{
	(void)state;
	memset(&cluster, 0, sizeof cluster);
	if (harness_cluster_start_resp(&cluster, 1, NULL, true) != 0) {
		return -1;
	}
	port = cluster.nodes[0].resp;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_cluster_stop(&cluster);
	return 0;
}

/* The groups take a moment to elect: wait for a write to go through. */
static void wait_ready(struct rc *c)
{
	uint64_t until = harness_mono_ms() + 20000;
	for (;;) {
		const char *r = rc_cmd(c, "SET ready 1");
		if (strcmp(r, "+OK\r\n") == 0) {
			return;
		}
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
}

static void test_connection(void **state)
{
	struct rc *c = malloc(sizeof *c);
	(void)state;
	assert_int_equal(rc_connect(c, port), 0);
	EXPECT(c, "PING", "+PONG\r\n");
	EXPECT(c, "PING hi", "$2\r\nhi\r\n");
	EXPECT(c, "ECHO hello", "$5\r\nhello\r\n");
	EXPECT(c, "SELECT 0", "+OK\r\n");
	EXPECT(c, "SELECT 1", "-ERR DB index is out of range\r\n");
	EXPECT(c, "CLIENT SETNAME app1", "+OK\r\n");
	EXPECT(c, "CLIENT GETNAME", "$4\r\napp1\r\n");
	assert_true(rc_cmd(c, "CLIENT ID")[0] == ':');
	assert_non_null(strstr(rc_cmd(c, "CLIENT LIST"), "name=app1"));
	EXPECT(c, "NOSUCH a b",
	       "-ERR unknown command 'NOSUCH', with args beginning with: 'a' "
	       "'b' \r\n");
	assert_non_null(strstr(rc_cmd(c, "EVAL x 0"), "not supported"));
	EXPECT(c, "ZRANGE z 0 1 BYSCORE LIMIT 0 1", "*0\r\n");
	EXPECT(c, "ZRANGEBYSCORE z 0 1 LIMIT 0 1", "*0\r\n");
	EXPECT(c, "ZRANGE z 0 1 BYLEX",
	       "-ERR BYLEX is not supported by Lodestone (docs/resp.md)\r\n");
	EXPECT(c, "AUTH pw",
	       "-ERR AUTH <password> called without any password configured "
	       "for the default user. Are you sure your configuration is "
	       "correct?\r\n");
	/* RESP3 */
	assert_non_null(strstr(rc_cmd(c, "HELLO 3"), "%7\r\n"));
	EXPECT(c, "CLIENT GETNAME", "$4\r\napp1\r\n");
	EXPECT(c, "HELLO 4", "-NOPROTO unsupported protocol version\r\n");
	/* inline and pipelined */
	{
		const char *pipe =
		    "PING\r\nECHO \"a b\"\r\n*1\r\n$4\r\nPING\r\n";
		rc_send(c, pipe, strlen(pipe));
	}
	assert_string_equal(rc_reply(c), "+PONG\r\n");
	assert_string_equal(rc_reply(c), "$3\r\na b\r\n");
	assert_string_equal(rc_reply(c), "+PONG\r\n");
	EXPECT(c, "QUIT", "+OK\r\n");
	assert_string_equal(rc_reply(c), "");
	rc_close(c);
	free(c);
}

static void test_kv(void **state)
{
	struct rc *c = malloc(sizeof *c);
	(void)state;
	assert_int_equal(rc_connect(c, port), 0);
	wait_ready(c);
	EXPECT(c, "SET k1 v1", "+OK\r\n");
	EXPECT(c, "GET k1", "$2\r\nv1\r\n");
	EXPECT(c, "SET k1 v2 NX", "$-1\r\n");
	EXPECT(c, "SET k1 v2 XX GET", "$2\r\nv1\r\n");
	EXPECT(c, "SET k1 v3 EX 100 KEEPTTL", "-ERR syntax error\r\n");
	EXPECT(c, "SET k1 v3 PX 100000", "+OK\r\n");
	EXPECT(c, "SET k1 v3 EX 0",
	       "-ERR invalid expire time in 'set' command\r\n");
	EXPECT(c, "GET",
	       "-ERR wrong number of arguments for 'get' "
	       "command\r\n");
	EXPECT(c, "MSET a 1 {a}b 2", "+OK\r\n");
	EXPECT(c, "MGET a nokey {a}b", "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
	/* DEL and MGET fan out over groups */
	EXPECT(c, "MSET x1 1 x2 2",
	       "-CROSSSLOT Keys in request don't hash to "
	       "the same slot\r\n");
	EXPECT(c, "MSETNX x1 1 x2 2",
	       "-CROSSSLOT Keys in request don't hash "
	       "to the same slot\r\n");
	EXPECT(c, "SET x1 1", "+OK\r\n");
	EXPECT(c, "SET x2 2", "+OK\r\n");
	EXPECT(c, "DEL x1 x2 x3", ":2\r\n");
	EXPECT(c, "HSET h f1 a f2 b", ":2\r\n");
	EXPECT(c, "HGET h f1", "$1\r\na\r\n");
	EXPECT(c, "HGETALL h",
	       "*4\r\n$2\r\nf1\r\n$1\r\na\r\n$2\r\nf2\r\n$1\r\n"
	       "b\r\n");
	EXPECT(c, "GET h",
	       "-WRONGTYPE Operation against a key holding the "
	       "wrong kind of value\r\n");
	EXPECT(c, "RPUSH l a b c", ":3\r\n");
	EXPECT(c, "LRANGE l 0 -1", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
	EXPECT(c, "LRANGE l x 1",
	       "-ERR value is not an integer or out of "
	       "range\r\n");
	EXPECT(c, "LPOP l", "$1\r\na\r\n");
	EXPECT(c, "LPOP nolist 2", "*-1\r\n");
	EXPECT(c, "SADD s m", ":1\r\n");
	EXPECT(c, "SISMEMBER s m", ":1\r\n");
	EXPECT(c, "ZADD z 1 a 2.5 b", ":2\r\n");
	EXPECT(c, "ZRANGE z 0 -1 WITHSCORES",
	       "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n");
	EXPECT(c, "ZSCORE z b", "$3\r\n2.5\r\n");
	EXPECT(c, "ZADD z x a", "-ERR value is not a valid float\r\n");
	/* RESP3 shapes */
	assert_non_null(strstr(rc_cmd(c, "HELLO 3"), "proto"));
	EXPECT(c, "GET nokey", "_\r\n");
	EXPECT(c, "HGETALL h",
	       "%2\r\n$2\r\nf1\r\n$1\r\na\r\n$2\r\nf2\r\n$1\r\n"
	       "b\r\n");
	EXPECT(c, "SMEMBERS s", "~1\r\n$1\r\nm\r\n");
	EXPECT(c, "ZSCORE z b", ",2.5\r\n");
	EXPECT(c, "ZRANGE z 0 -1 WITHSCORES",
	       "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n");
	EXPECT(c, "ZINCRBY z 1 b", ",3.5\r\n");
	EXPECT(c, "ZRANGEBYSCORE z 0 5 WITHSCORES LIMIT 1 1",
	       "*1\r\n*2\r\n$1\r\nb\r\n,3.5\r\n");
	assert_non_null(strstr(rc_cmd(c, "HELLO 2"), "proto")); /* RESP2 */
	/* RENAME within one Lodestone slot only; keys of another slot
	 * answer Redis Cluster's CROSSSLOT */
	EXPECT(c, "SET {t}a 1", "+OK\r\n");
	EXPECT(c, "RENAME {t}a {u}a",
	       "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
	EXPECT(c, "RENAME {t}a {t}b", "+OK\r\n");
	EXPECT(c, "GET {t}b", "$1\r\n1\r\n");
	/* DBSIZE agrees with INFO keyspace */
	{
		char want[64], info[4096];
		const char *r = rc_cmd(c, "DBSIZE");
		assert_int_equal(r[0], ':');
		snprintf(want, sizeof want, "db0:keys=%lld,",
		         strtoll(r + 1, NULL, 10));
		snprintf(info, sizeof info, "%s", rc_cmd(c, "INFO keyspace"));
		assert_non_null(strstr(info, want));
	}
	rc_close(c);
	free(c);
}

static void test_server_commands(void **state)
{
	struct rc *c = malloc(sizeof *c);
	const char *r;
	(void)state;
	assert_int_equal(rc_connect(c, port), 0);
	r = rc_cmd(c, "INFO");
	assert_non_null(strstr(r, "# Server"));
	assert_non_null(strstr(r, "connected_clients:"));
	assert_non_null(strstr(r, "# Replication"));
	assert_non_null(strstr(r, "# Keyspace"));
	r = rc_cmd(c, "COMMAND DOCS get");
	assert_non_null(strstr(r, "arguments"));
	assert_true(rc_cmd(c, "COMMAND COUNT")[0] == ':');
	r = rc_cmd(c, "CLUSTER SLOTS");
	assert_true(strncmp(r, "*1\r\n*3\r\n:0\r\n:16383\r\n", 20) == 0);
	assert_non_null(strstr(rc_cmd(c, "CLUSTER NODES"), "myself,master"));
	EXPECT(c, "CLUSTER KEYSLOT foo", ":12182\r\n");
	rc_close(c);
	free(c);
}

static void test_protocol_errors(void **state)
{
	struct rc *c = malloc(sizeof *c);
	char big[70000];
	(void)state;
	assert_int_equal(rc_connect(c, port), 0);
	rc_send(c, "*1\r\n+PING\r\n", 11);
	assert_string_equal(rc_reply(c),
	                    "-ERR Protocol error: expected '$', got '+'\r\n");
	assert_string_equal(rc_reply(c), "");
	rc_close(c);
	assert_int_equal(rc_connect(c, port), 0);
	memset(big, 'a', sizeof big);
	rc_send(c, big, sizeof big);
	assert_string_equal(rc_reply(c),
	                    "-ERR Protocol error: too big inline request\r\n");
	assert_string_equal(rc_reply(c), "");
	rc_close(c);
	free(c);
}

/* AUTH against --requirepass (the FSNP listener's default user). */
static void test_auth(void **state)
{
	static struct harness_cluster auth;
	const char *const extra[] = {"--requirepass", "s3cret pw", NULL};
	struct rc *c = malloc(sizeof *c);
	(void)state;
	memset(&auth, 0, sizeof auth);
	assert_int_equal(harness_cluster_start_resp(&auth, 1, extra, true), 0);
	harness_secret(&auth, "s3cret pw");
	assert_int_equal(rc_connect(c, auth.nodes[0].resp), 0);
	EXPECT(c, "GET k", "-NOAUTH Authentication required.\r\n");
	EXPECT(c, "PING", "-NOAUTH Authentication required.\r\n");
	EXPECT(c, "AUTH nope",
	       "-WRONGPASS invalid username-password pair or "
	       "user is disabled.\r\n");
	EXPECT(c, "HELLO 3",
	       "-NOAUTH HELLO must be called with the client already "
	       "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
	       "option can be used to authenticate the client and select the "
	       "RESP protocol version at the same time\r\n");
	rc_send(c, "AUTH \"s3cret pw\"\r\n", 18);
	assert_string_equal(rc_reply(c), "+OK\r\n");
	EXPECT(c, "PING", "+PONG\r\n");
	rc_close(c);
	assert_int_equal(rc_connect(c, auth.nodes[0].resp), 0);
	rc_send(c, "HELLO 2 AUTH default \"s3cret pw\"\r\n", 34);
	assert_true(rc_reply(c)[0] == '*');
	EXPECT(c, "PING", "+PONG\r\n");
	EXPECT(c, "AUTH default wrong",
	       "-WRONGPASS invalid username-password "
	       "pair or user is disabled.\r\n");
	rc_close(c);
	free(c);
	harness_cluster_stop(&auth);
}

/* ACL users made over FSNP (lodectl acl) checked on RESP: AUTH user
 * pass, commands and keys refused with Redis's NOPERM texts. Runs last on
 * the shared node: the default user stays without a password. */
static void test_acl_users(void **state)
{
	struct rc *c = malloc(sizeof *c);
	char fsnp[32], out[4096];
	const char *setuser[] = {LS_ABS_BUILDDIR "/lodectl",
	                         "--fsnp",
	                         fsnp,
	                         "acl",
	                         "setuser",
	                         "alice",
	                         "on",
	                         ">alicepw",
	                         "~a:*",
	                         "+get",
	                         "+ping",
	                         NULL};
	uint64_t until = harness_mono_ms() + 20000;
	(void)state;
	snprintf(fsnp, sizeof fsnp, "127.0.0.1:%u", cluster.nodes[0].fsnp);
	assert_int_equal(harness_run(setuser, out, sizeof out), 0);
	assert_int_equal(rc_connect(c, port), 0);
	/* The listener's copy of the users follows the meta group. */
	for (;;) {
		const char *r = rc_cmd(c, "AUTH alice alicepw");
		if (strcmp(r, "+OK\r\n") == 0) {
			break;
		}
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
	EXPECT(c, "GET a:1", "$-1\r\n");
	EXPECT(c, "PING", "+PONG\r\n");
	EXPECT(c, "GET b:1",
	       "-NOPERM User alice has no permissions to access "
	       "the 'b:1' key\r\n");
	EXPECT(c, "SET a:1 x",
	       "-NOPERM User alice has no permissions to run "
	       "the 'set' command\r\n");
	EXPECT(c, "AUTH alice wrong",
	       "-WRONGPASS invalid username-password "
	       "pair or user is disabled.\r\n");
	/* The keyspace commands are checked as Redis checks them: KEYS is
	 * @dangerous (SCAN is not), RENAME's destination is a key too. */
	{
		const char *bob[] = {LS_ABS_BUILDDIR "/lodectl",
		                     "--fsnp",
		                     fsnp,
		                     "acl",
		                     "setuser",
		                     "bob",
		                     "on",
		                     ">bobpw",
		                     "~b:*",
		                     "+@all",
		                     "-@dangerous",
		                     NULL};
		assert_int_equal(harness_run(bob, out, sizeof out), 0);
		until = harness_mono_ms() + 20000;
		while (strcmp(rc_cmd(c, "AUTH bob bobpw"), "+OK\r\n") != 0) {
			assert_true(harness_mono_ms() < until);
			harness_nap(100);
		}
		assert_memory_equal(rc_cmd(c, "SCAN 0 COUNT 1"), "*2\r\n", 4);
		assert_int_equal(rc_cmd(c, "DBSIZE")[0], ':');
		EXPECT(c, "KEYS *",
		       "-NOPERM User bob has no permissions to run "
		       "the 'keys' command\r\n");
		EXPECT(c, "SET b:{x}1 v", "+OK\r\n");
		EXPECT(c, "RENAME b:{x}1 c:{x}1",
		       "-NOPERM User bob has no permissions to access "
		       "the 'c:{x}1' key\r\n");
		EXPECT(c, "RENAME b:{x}1 b:{x}2", "+OK\r\n");
	}
	rc_close(c);
	free(c);
}

/* --- SCAN pages over keys sharing a long prefix ------------------------ */

#define SP_KEYS 400
#define SP_PREFIX "scan:sharedprefix20:" /* 20 bytes */

/* One SCAN page from `cursor` (updated in place): marks the keys it
 * returns in seen[] and returns how many it returned. */
static long scan_page(struct rc *c, char *cursor, size_t cap, int count,
                      bool seen[SP_KEYS])
{
	char line[128];
	const char *r, *p;
	long k;
	snprintf(line, sizeof line, "SCAN %s COUNT %d", cursor, count);
	r = rc_cmd(c, line);
	assert_memory_equal(r, "*2\r\n$", 5);
	p = strchr(r + 5, '\n') + 1;
	size_t cl = strcspn(p, "\r");
	assert_true(cl < cap);
	memcpy(cursor, p, cl);
	cursor[cl] = '\0';
	p += cl + 2;
	assert_int_equal(p[0], '*');
	k = strtol(p + 1, NULL, 10);
	p = strchr(p, '\n') + 1;
	for (long i = 0; i < k; i++) {
		long l = strtol(p + 1, NULL, 10);
		p = strchr(p, '\n') + 1;
		if (l > (long)strlen(SP_PREFIX) &&
		    memcmp(p, SP_PREFIX, strlen(SP_PREFIX)) == 0) {
			long at = strtol(p + strlen(SP_PREFIX), NULL, 10);
			assert_true(at >= 0 && at < SP_KEYS);
			seen[at] = true;
		}
		p += l + 2;
	}
	return k;
}

static void sp_all_seen(const bool seen[SP_KEYS])
{
	for (int i = 0; i < SP_KEYS; i++) {
		if (!seen[i]) {
			print_error("SCAN walk missed %s%04d\n", SP_PREFIX, i);
		}
		assert_true(seen[i]);
	}
}

/* Keys sharing a 20-byte prefix: SCAN COUNT 10 answers pages of about 10
 * keys (the node keeps the key each page resumes at) and the walk returns
 * every key. With a table of two entries, walks that push each other's
 * entries out fall back to the cursors' seek points and still return
 * every key; so does a walk resumed after its entry was replaced. */
static void test_scan_pages(void **state)
{
	static struct harness_cluster sc;
	const char *const extra[] = {"--resp-scan-cursors", "2", NULL};
	struct rc *c = malloc(sizeof *c);
	static char msg[SP_KEYS * 64];
	static bool seen[3][SP_KEYS];
	char cursor[3][32];
	size_t n = 0;
	int pages = 0;
	long biggest = 0;
	(void)state;
	assert_non_null(c);
	memset(&sc, 0, sizeof sc);
	assert_int_equal(harness_cluster_start_resp(&sc, 1, extra, true), 0);
	assert_int_equal(rc_connect(c, sc.nodes[0].resp), 0);
	wait_ready(c);
	/* the keys, pipelined */
	for (int i = 0; i < SP_KEYS; i++) {
		n += (size_t)snprintf(msg + n, sizeof msg - n,
		                      "*3\r\n$3\r\nSET\r\n$%zu\r\n%s%04d\r\n"
		                      "$1\r\nv\r\n",
		                      strlen(SP_PREFIX) + 4, SP_PREFIX, i);
	}
	rc_send(c, msg, n);
	for (int i = 0; i < SP_KEYS; i++) {
		assert_string_equal(rc_reply(c), "+OK\r\n");
	}

	/* one walk: small pages, every key */
	memset(seen, 0, sizeof seen);
	snprintf(cursor[0], sizeof cursor[0], "0");
	do {
		long k = scan_page(c, cursor[0], sizeof cursor[0], 10, seen[0]);
		biggest = k > biggest ? k : biggest;
		assert_true(++pages < 1000);
	} while (strcmp(cursor[0], "0") != 0);
	if (biggest > 2 * 10 + 5) {
		print_error("a SCAN COUNT 10 page returned %ld keys\n",
		            biggest);
	}
	assert_true(biggest <= 2 * 10 + 5);
	/* about SP_KEYS / 10 pages, plus one short page per group at most */
	assert_true(pages >= SP_KEYS / 25);
	sp_all_seen(seen[0]);

	/* a walk whose entry was replaced: one page, then two other walks
	 * take both entries, then the rest of the walk */
	memset(seen, 0, sizeof seen);
	for (int w = 0; w < 3; w++) {
		snprintf(cursor[w], sizeof cursor[w], "0");
	}
	scan_page(c, cursor[0], sizeof cursor[0], 10, seen[0]);
	scan_page(c, cursor[1], sizeof cursor[1], 10, seen[1]);
	scan_page(c, cursor[2], sizeof cursor[2], 10, seen[2]);
	pages = 0;
	while (strcmp(cursor[0], "0") != 0) {
		scan_page(c, cursor[0], sizeof cursor[0], 10, seen[0]);
		assert_true(++pages < 1000);
	}
	sp_all_seen(seen[0]);

	/* three walks in turn over two entries: each page's entry is gone
	 * when its walk comes back */
	memset(seen, 0, sizeof seen);
	for (int w = 0; w < 3; w++) {
		snprintf(cursor[w], sizeof cursor[w], "0");
	}
	pages = 0;
	for (bool more = true; more;) {
		more = false;
		for (int w = 0; w < 3; w++) {
			if (pages > 0 && strcmp(cursor[w], "0") == 0) {
				continue;
			}
			scan_page(c, cursor[w], sizeof cursor[w], 10, seen[w]);
			more |= strcmp(cursor[w], "0") != 0;
		}
		assert_true(++pages < 1000);
	}
	for (int w = 0; w < 3; w++) {
		sp_all_seen(seen[w]);
	}
	rc_close(c);
	free(c);
	harness_cluster_stop(&sc);
}

/* A client past --resp-max-query-bytes or --resp-max-output-bytes (a
 * reader that does not read) is closed. */
static void test_buffer_limits(void **state)
{
	static struct harness_cluster lim;
	const char *const extra[] = {"--resp-max-query-bytes", "65536",
	                             "--resp-max-output-bytes", "65536", NULL};
	struct rc *c = malloc(sizeof *c);
	static char big[70000];
	char head[64];
	size_t n, got = 0;
	(void)state;
	memset(&lim, 0, sizeof lim);
	assert_int_equal(harness_cluster_start_resp(&lim, 1, extra, true), 0);
	/* query: a command whose two bulks pass the bound together */
	assert_int_equal(rc_connect(c, lim.nodes[0].resp), 0);
	memset(big, 'q', sizeof big);
	n = (size_t)snprintf(head, sizeof head, "*2\r\n$60000\r\n");
	rc_send_try(c, head, n);
	rc_send_try(c, big, 60000);
	n = (size_t)snprintf(head, sizeof head, "\r\n$60000\r\n");
	rc_send_try(c, head, n);
	rc_send_try(c, big, 10000);
	assert_string_equal(rc_reply(c), "");
	rc_close(c);
	/* output: a 60000-byte value asked for many times, nothing read */
	assert_int_equal(rc_connect(c, lim.nodes[0].resp), 0);
	wait_ready(c);
	n = (size_t)snprintf(head, sizeof head,
	                     "*3\r\n$3\r\nSET\r\n$3\r\n"
	                     "big\r\n$60000\r\n");
	rc_send(c, head, n);
	rc_send(c, big, 60000);
	rc_send(c, "\r\n", 2);
	assert_string_equal(rc_reply(c), "+OK\r\n");
	for (int i = 0; i < 2000; i++) {
		rc_send_try(c, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", 22);
	}
	harness_nap(500);
	/* Reading now: the connection ends before 2000 replies. */
	for (;;) {
		struct pollfd pf = {c->fd, POLLIN, 0};
		ssize_t k;
		assert_true(poll(&pf, 1, 10000) > 0);
		k = read(c->fd, c->buf, sizeof c->buf);
		if (k <= 0) {
			break;
		}
		got += (size_t)k;
	}
	assert_true(got < 2000u * 60000u);
	rc_close(c);
	/* Both closes counted as the limits' */
	assert_int_equal(rc_connect(c, lim.nodes[0].resp), 0);
	{
		const char *info = rc_cmd(c, "INFO stats");
		assert_non_null(strstr(
		    info, "client_query_buffer_limit_disconnections:1\r\n"));
		assert_non_null(strstr(
		    info, "client_output_buffer_limit_disconnections:1\r\n"));
	}
	rc_close(c);
	free(c);
	harness_cluster_stop(&lim);
}

/* --- Transactions --------------------------------------------------------- */

#define CROSSSLOT_ERR                                                          \
	"-CROSSSLOT Keys in request don't hash to the same slot\r\n"

/* Two keys of different Lodestone slots. */
static const char *const other_slot[2] = {"tx:c1", "tx:c2"};

/* MULTI/EXEC pipelined in one write; a WATCH conflict from a second
 * connection (RESP2 *-1, RESP3 _); a watched key that expires; keys of
 * two slots (CROSSSLOT, nothing applied). */
static void test_multi(void **state)
{
	struct rc *a = malloc(sizeof *a), *b = malloc(sizeof *b);
	static const char pipe[] = "*1\r\n$5\r\nMULTI\r\n"
	                           "*3\r\n$3\r\nSET\r\n$7\r\n{x}tx:a\r\n"
	                           "$1\r\n1\r\n"
	                           "*2\r\n$4\r\nINCR\r\n$7\r\n{x}tx:a\r\n"
	                           "*2\r\n$3\r\nGET\r\n$7\r\n{x}tx:a\r\n"
	                           "*1\r\n$4\r\nEXEC\r\n";
	uint64_t until;
	(void)state;
	assert_int_not_equal(fsnp_slot_of((const uint8_t *)other_slot[0], 5),
	                     fsnp_slot_of((const uint8_t *)other_slot[1], 5));
	assert_int_equal(rc_connect(a, port), 0);
	assert_int_equal(rc_connect(b, port), 0);
	wait_ready(a);
	rc_send(a, pipe, sizeof pipe - 1);
	assert_string_equal(rc_reply(a), "+OK\r\n");
	for (int i = 0; i < 3; i++) {
		assert_string_equal(rc_reply(a), "+QUEUED\r\n");
	}
	assert_string_equal(rc_reply(a), "*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n");

	/* WATCH pipelined with the transaction: the commands after it wait
	 * for its stamps. */
	{
		static const char wpipe[] =
		    "*2\r\n$5\r\nWATCH\r\n$7\r\n{x}tx:p\r\n"
		    "*1\r\n$5\r\nMULTI\r\n"
		    "*2\r\n$4\r\nINCR\r\n$7\r\n{x}tx:p\r\n"
		    "*1\r\n$4\r\nEXEC\r\n"
		    "*2\r\n$3\r\nGET\r\n$7\r\n{x}tx:p\r\n";
		rc_send(a, wpipe, sizeof wpipe - 1);
		assert_string_equal(rc_reply(a), "+OK\r\n");
		assert_string_equal(rc_reply(a), "+OK\r\n");
		assert_string_equal(rc_reply(a), "+QUEUED\r\n");
		assert_string_equal(rc_reply(a), "*1\r\n:1\r\n");
		assert_string_equal(rc_reply(a), "$1\r\n1\r\n");
	}

	/* A write of the same connection pipelined after WATCH counts. */
	{
		static const char wpipe[] =
		    "*2\r\n$5\r\nWATCH\r\n$7\r\n{x}tx:p\r\n"
		    "*3\r\n$3\r\nSET\r\n$7\r\n{x}tx:p\r\n$1\r\n7\r\n"
		    "*1\r\n$5\r\nMULTI\r\n"
		    "*2\r\n$4\r\nINCR\r\n$7\r\n{x}tx:p\r\n"
		    "*1\r\n$4\r\nEXEC\r\n";
		rc_send(a, wpipe, sizeof wpipe - 1);
		assert_string_equal(rc_reply(a), "+OK\r\n");
		assert_string_equal(rc_reply(a), "+OK\r\n");
		assert_string_equal(rc_reply(a), "+OK\r\n");
		assert_string_equal(rc_reply(a), "+QUEUED\r\n");
		assert_string_equal(rc_reply(a), "*-1\r\n");
		EXPECT(a, "GET {x}tx:p", "$1\r\n7\r\n");
	}

	/* A watched key written by another client: nothing applies. */
	EXPECT(a, "WATCH {x}tx:w {x}tx:a", "+OK\r\n");
	EXPECT(b, "SET {x}tx:w theirs", "+OK\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET {x}tx:w mine", "+QUEUED\r\n");
	EXPECT(a, "INCR {x}tx:a", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "*-1\r\n");
	EXPECT(a, "GET {x}tx:w", "$6\r\ntheirs\r\n");
	EXPECT(a, "GET {x}tx:a", "$1\r\n2\r\n");
	/* Unchanged since WATCH: applied (and EXEC ends the watch). */
	EXPECT(a, "WATCH {x}tx:w", "+OK\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET {x}tx:w mine", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "*1\r\n+OK\r\n");
	EXPECT(b, "SET {x}tx:w theirs", "+OK\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "GET {x}tx:w", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "*1\r\n$6\r\ntheirs\r\n");
	/* UNWATCH forgets. */
	EXPECT(a, "WATCH {x}tx:w", "+OK\r\n");
	EXPECT(b, "APPEND {x}tx:w !", ":7\r\n");
	EXPECT(a, "UNWATCH", "+OK\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "STRLEN {x}tx:w", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "*1\r\n:7\r\n");

	/* RESP3: an aborted EXEC answers the null _. */
	assert_non_null(strstr(rc_cmd(a, "HELLO 3"), "proto"));
	EXPECT(a, "WATCH {x}tx:h", "+OK\r\n");
	EXPECT(b, "HSET {x}tx:h f v", ":1\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "HGETALL {x}tx:h", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "_\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "HGETALL {x}tx:h", "+QUEUED\r\n");
	EXPECT(a, "GET {x}tx:none", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "*2\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n_\r\n");

	/* A watched key that expires before EXEC counts as changed. */
	EXPECT(a, "SET {x}tx:e v PX 200", "+OK\r\n");
	EXPECT(a, "WATCH {x}tx:e", "+OK\r\n");
	until = harness_mono_ms() + 10000;
	while (strcmp(rc_cmd(b, "PTTL {x}tx:e"), ":-2\r\n") != 0) {
		assert_true(harness_mono_ms() < until);
		harness_nap(50);
	}
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET {x}tx:f 1", "+QUEUED\r\n");
	EXPECT(a, "EXEC", "_\r\n");
	EXPECT(a, "EXISTS {x}tx:f", ":0\r\n");

	/* Keys of two slots in one transaction: nothing applies. */
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET tx:c1 1", "+QUEUED\r\n");
	EXPECT(a, "SET tx:c2 2", "+QUEUED\r\n");
	EXPECT(a, "EXEC", CROSSSLOT_ERR);
	EXPECT(a, "GET tx:c1", "_\r\n");
	/* ... or a watched key of another slot. */
	EXPECT(a, "WATCH tx:c1", "+OK\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET tx:c2 2", "+QUEUED\r\n");
	EXPECT(a, "EXEC", CROSSSLOT_ERR);
	EXPECT(a, "GET tx:c2", "_\r\n");
	/* ... or one command over two slots. */
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "SET tx:c1 1", "+QUEUED\r\n");
	EXPECT(a, "MSET tx:c1 1 tx:c2 2", "+QUEUED\r\n");
	EXPECT(a, "EXEC", CROSSSLOT_ERR);
	EXPECT(a, "GET tx:c1", "_\r\n");
	/* Commands refused when queued abort the transaction. */
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "HELLO 2",
	       "-ERR 'hello' inside MULTI is not supported by Lodestone "
	       "(docs/resp.md)\r\n");
	EXPECT(a, "EXEC",
	       "-EXECABORT Transaction discarded because of previous "
	       "errors.\r\n");
	/* Commands that read every group are refused when queued; INFO
	 * answers without its keyspace section. */
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "DBSIZE",
	       "-ERR 'dbsize' inside MULTI is not supported by Lodestone "
	       "(docs/resp.md)\r\n");
	EXPECT(a, "SCAN 0",
	       "-ERR 'scan' inside MULTI is not supported by Lodestone "
	       "(docs/resp.md)\r\n");
	EXPECT(a, "EXEC",
	       "-EXECABORT Transaction discarded because of previous "
	       "errors.\r\n");
	EXPECT(a, "MULTI", "+OK\r\n");
	EXPECT(a, "INFO", "+QUEUED\r\n");
	EXPECT(a, "SET {x}tx:i 1", "+QUEUED\r\n");
	{
		const char *x = rc_cmd(a, "EXEC");
		assert_true(strncmp(x, "*2\r\n", 4) == 0);
		assert_non_null(strstr(x, "# Server"));
		assert_null(strstr(x, "# Keyspace"));
		assert_non_null(strstr(x, "+OK\r\n"));
	}
	EXPECT(a, "GET {x}tx:i", "$1\r\n1\r\n");
	/* A connection that closes inside MULTI leaves nothing behind. */
	EXPECT(b, "MULTI", "+OK\r\n");
	EXPECT(b, "SET {x}tx:gone 1", "+QUEUED\r\n");
	assert_non_null(strstr(rc_cmd(a, "CLIENT LIST"),
	                       "flags=x db=0 sub=0 psub=0 ssub=0 multi=1 "));
	rc_close(b);
	EXPECT(a, "EXISTS {x}tx:gone", ":0\r\n");
	rc_close(a);
	free(a);
	free(b);
}

/* An ACL refusal when queued aborts the transaction, as in Redis. */
static void test_multi_acl(void **state)
{
	struct rc *c = malloc(sizeof *c);
	char fsnp[32], out[4096];
	const char *setuser[] = {LS_ABS_BUILDDIR "/lodectl",
	                         "--fsnp",
	                         fsnp,
	                         "acl",
	                         "setuser",
	                         "bob",
	                         "on",
	                         ">bobpw",
	                         "~b:*",
	                         "+@all",
	                         NULL};
	uint64_t until = harness_mono_ms() + 20000;
	(void)state;
	snprintf(fsnp, sizeof fsnp, "127.0.0.1:%u", cluster.nodes[0].fsnp);
	assert_int_equal(harness_run(setuser, out, sizeof out), 0);
	assert_int_equal(rc_connect(c, port), 0);
	while (strcmp(rc_cmd(c, "AUTH bob bobpw"), "+OK\r\n") != 0) {
		assert_true(harness_mono_ms() < until);
		harness_nap(100);
	}
	EXPECT(c, "MULTI", "+OK\r\n");
	EXPECT(c, "SET b:{1} x", "+QUEUED\r\n");
	EXPECT(c, "GET c:{1}",
	       "-NOPERM User bob has no permissions to access the 'c:{1}' "
	       "key\r\n");
	EXPECT(c, "EXEC",
	       "-EXECABORT Transaction discarded because of previous "
	       "errors.\r\n");
	EXPECT(c, "EXISTS b:{1}", ":0\r\n");
	EXPECT(c, "MULTI", "+OK\r\n");
	EXPECT(c, "SET b:{1} x", "+QUEUED\r\n");
	EXPECT(c, "GET b:{1}", "+QUEUED\r\n");
	EXPECT(c, "EXEC", "*2\r\n+OK\r\n$1\r\nx\r\n");
	rc_close(c);
	free(c);
}

/* Three nodes: EXEC through each node, so at least two of them forward
 * the transaction to the leader of its group; a WATCH on one node and
 * the conflicting write on another. */
static void test_multi_cluster(void **state)
{
	static struct harness_cluster c3;
	struct rc *n[3];
	char cmd[64], want[64];
	(void)state;
	memset(&c3, 0, sizeof c3);
	assert_int_equal(harness_cluster_start_resp(&c3, 3, NULL, true), 0);
	for (int i = 0; i < 3; i++) {
		n[i] = malloc(sizeof *n[i]);
		assert_int_equal(rc_connect(n[i], c3.nodes[i].resp), 0);
		wait_ready(n[i]);
	}
	for (int i = 0; i < 3; i++) {
		EXPECT(n[i], "MULTI", "+OK\r\n");
		EXPECT(n[i], "INCR {c}tx:n", "+QUEUED\r\n");
		snprintf(cmd, sizeof cmd, "RPUSH {c}tx:l n%d", i);
		EXPECT(n[i], cmd, "+QUEUED\r\n");
		EXPECT(n[i], "LLEN {c}tx:l", "+QUEUED\r\n");
		snprintf(want, sizeof want, "*3\r\n:%d\r\n:%d\r\n:%d\r\n",
		         i + 1, i + 1, i + 1);
		EXPECT(n[i], "EXEC", want);
	}
	for (int i = 0; i < 3; i++) {
		EXPECT(n[i], "GET {c}tx:n", "$1\r\n3\r\n");
		EXPECT(n[i], "LRANGE {c}tx:l 0 -1",
		       "*3\r\n$2\r\nn0\r\n$2\r\nn1\r\n$2\r\nn2\r\n");
	}
	/* WATCH through node 1, the write through node 2. */
	EXPECT(n[0], "WATCH {c}tx:n", "+OK\r\n");
	EXPECT(n[1], "INCR {c}tx:n", ":4\r\n");
	EXPECT(n[0], "MULTI", "+OK\r\n");
	EXPECT(n[0], "INCR {c}tx:n", "+QUEUED\r\n");
	EXPECT(n[0], "EXEC", "*-1\r\n");
	EXPECT(n[2], "GET {c}tx:n", "$1\r\n4\r\n");
	for (int i = 0; i < 3; i++) {
		rc_close(n[i]);
		free(n[i]);
	}
	harness_cluster_stop(&c3);
}

/* --- The same session against redis-server -------------------------------- */

/* Commands whose answers are meant to be identical, byte for byte. */
static const char *const script[] = {
    "PING",
    "PING hi",
    "ECHO ~",
    "SELECT 0",
    "SELECT x",
    "CLIENT SETNAME n1",
    "CLIENT GETNAME",
    "CLIENT SETNAME a\tb",
    "GET",
    "NOSUCH x",
    "SET d:k v",
    "GET d:k",
    "SET d:k v2 NX",
    "SET d:k v3 XX GET",
    "GET d:k",
    "SET d:k v EX 0",
    "SET d:k v EX x",
    "SET d:k v NX XX",
    "SET d:k v PX 100000",
    "SET d:k v PX 5 EX 5",
    "GET d:none",
    "MSET d:{t}1 a d:{t}2 b",
    "MGET d:{t}1 d:none d:{t}2",
    "MSET d:{t}1",
    "DEL d:{t}1 d:{t}2 d:none",
    "SET d:{t}u1 1",
    "SET d:u2 2",
    "UNLINK d:{t}u1 d:u2 d:none",
    "EXISTS d:{t}u1 d:u2",
    "UNLINK",
    "HSET d:h f v g w",
    "HSET d:h f",
    "HGET d:h f",
    "HMGET d:h f nof g",
    "HDEL d:h g nof",
    "HGETALL d:h",
    "GET d:h",
    "LPUSH d:h x",
    "RPUSH d:l a b c",
    "LPUSH d:l z",
    "LRANGE d:l 0 -1",
    "LRANGE d:l 1 2",
    "LRANGE d:l 5 9",
    "LRANGE d:l a 1",
    "LPOP d:l",
    "RPOP d:l 2",
    "LPOP d:none",
    "LPOP d:none 2",
    "SADD d:s a a b",
    "SREM d:s b x",
    "SISMEMBER d:s a",
    "SISMEMBER d:s x",
    "SMEMBERS d:s",
    "ZADD d:z 1 a 2 b",
    "ZADD d:z 1.5 c",
    "ZADD d:z x a",
    "ZADD d:z 1",
    "ZRANGE d:z 0 -1",
    "ZRANGE d:z 0 1 WITHSCORES",
    "ZSCORE d:z c",
    "ZSCORE d:z nope",
    "ZREM d:z a nope",
    "ZRANGE d:z 0 -1 WITHSCORES",
    "HELLO 4",
    "HELLO 3 x",
    "HELLO 3",
    "GET d:none",
    "HGETALL d:h",
    "SMEMBERS d:s",
    "ZSCORE d:z c",
    "ZRANGE d:z 0 -1 WITHSCORES",
    "LPOP d:none 2",
    "MGET d:k d:none",
    "HELLO 2",
    "INCR d:n",
    "INCRBY d:n 41",
    "DECR d:n",
    "DECRBY d:n 2",
    "INCRBY d:n x",
    "INCR d:k",
    "INCR d:h",
    "SET d:n 9223372036854775807",
    "INCR d:n",
    "SET d:n 012",
    "INCR d:n",
    "EXISTS d:k d:none d:k d:h",
    "TYPE d:k",
    "TYPE d:h",
    "TYPE d:l",
    "TYPE d:s",
    "TYPE d:z",
    "TYPE d:none",
    "TTL d:k",
    "PTTL d:none",
    "EXPIRE d:k 100",
    "TTL d:k",
    "PERSIST d:k",
    "PERSIST d:k",
    "TTL d:k",
    "EXPIRE d:none 10",
    "EXPIRE d:k x",
    "PEXPIRE d:h 0",
    "EXISTS d:h",
    "APPEND d:a xy",
    "APPEND d:a z",
    "STRLEN d:a",
    "STRLEN d:none",
    "STRLEN d:l",
    "GETDEL d:a",
    "GETDEL d:a",
    "GETDEL d:l",
    "HSET d:h2 a 1 b 2",
    "HLEN d:h2",
    "LLEN d:l",
    "SCARD d:s",
    "ZCARD d:z",
    "LLEN d:k",
    "ZCARD d:none",
    "SETNX d:x 1",
    "SETNX d:x 2",
    "GET d:x",
    "SETEX d:x 100 v",
    "TTL d:x",
    "SETEX d:x 0 v",
    "SETEX d:x y v",
    "PSETEX d:x 100000 w",
    "GET d:x",
    "SETNX d:h2 1",
    "MSETNX d:{m}1 a d:{m}2 b",
    "MSETNX d:{m}2 c d:{m}3 d",
    "MGET d:{m}1 d:{m}2 d:{m}3",
    "DEL d:{m}1 d:{m}2",

    "SET d:g Hello",
    "GETRANGE d:g 0 3",
    "GETRANGE d:g -3 -1",
    "GETRANGE d:g 0 -1",
    "GETRANGE d:g 10 100",
    "GETRANGE d:g -100 1",
    "GETRANGE d:g 3 1",
    "GETRANGE d:g -1 -3",
    "GETRANGE d:g 0 9223372036854775807",
    "GETRANGE d:none 0 -1",
    "GETRANGE d:l 0 1",
    "GETRANGE d:g x 1",
    "GETRANGE d:g 0",
    "RPUSH d:li a b c",
    "LINDEX d:li 0",
    "LINDEX d:li -1",
    "LINDEX d:li 2",
    "LINDEX d:li 3",
    "LINDEX d:li -4",
    "LINDEX d:none 0",
    "LINDEX d:g 0",
    "LINDEX d:li x",
    "LINDEX d:li",

    "ZADD d:zr 1 a 2 b 3 c 2 bb",
    "ZRANK d:zr a",
    "ZRANK d:zr bb",
    "ZRANK d:zr c",
    "ZREVRANK d:zr a",
    "ZREVRANK d:zr b",
    "ZRANK d:zr nope",
    "ZRANK d:none a",
    "ZRANK d:g a",
    "ZRANK d:zr",
    "ZRANGE d:zr 0 -1 REV",
    "ZRANGE d:zr 0 1 REV WITHSCORES",
    "ZRANGE d:zr -2 -1 REV",
    "ZRANGE d:zr 1 2 BYSCORE",
    "ZRANGE d:zr (1 3 BYSCORE WITHSCORES",
    "ZRANGE d:zr (1 (3 BYSCORE",
    "ZRANGE d:zr 3 (1 BYSCORE REV",
    "ZRANGE d:zr -inf +inf BYSCORE",
    "ZRANGE d:zr 5 1 BYSCORE",
    "ZRANGE d:zr x 1 BYSCORE",
    "ZRANGE d:zr 0 -1 FOO",
    "ZRANGE d:zr 0",
    "ZRANGE d:none 0 1 BYSCORE",
    "ZRANGE d:g 0 1 REV",
    "ZRANGEBYSCORE d:zr 2 2",
    "ZRANGEBYSCORE d:zr (2 +inf WITHSCORES",
    "ZRANGEBYSCORE d:zr 1 x",
    "ZRANGEBYSCORE d:zr 0 1 REV",
    "ZRANGEBYSCORE d:none 0 1",
    "ZRANGEBYSCORE d:g 0 1",
    "RPUSH d:lt a b c d e",
    "LTRIM d:lt 1 -2",
    "LRANGE d:lt 0 -1",
    "LTRIM d:lt -100 100",
    "LRANGE d:lt 0 -1",
    "LTRIM d:lt -1 -1",
    "LRANGE d:lt 0 -1",
    "LTRIM d:lt 5 9",
    "EXISTS d:lt",
    "RPUSH d:lt a b",
    "LTRIM d:lt 0 -5",
    "EXISTS d:lt",
    "LTRIM d:none 0 1",
    "LTRIM d:g 0 1",
    "LTRIM d:li x 1",
    "LTRIM d:li 0",

    "INCRBYFLOAT d:f 10.5",
    "INCRBYFLOAT d:f 0.1",
    "INCRBYFLOAT d:f -5.0e3",
    "INCRBYFLOAT d:f 3.0e3",
    "INCRBYFLOAT d:f 1.5e-7",
    "INCRBYFLOAT d:f x",
    "INCRBYFLOAT d:f inf",
    "INCRBYFLOAT d:f",
    "SET d:f 1e400",
    "INCRBYFLOAT d:f 1",
    "SET d:f 007",
    "INCRBYFLOAT d:f 0x10",
    "INCRBYFLOAT d:l 1",
    "INCRBYFLOAT d:fn -0",

    "SET d:sr HelloWorld",
    "SETRANGE d:sr 5 Redis",
    "GET d:sr",
    "SETRANGE d:sr 8 longer",
    "GET d:sr",
    "SETRANGE d:sp 5 ab",
    "STRLEN d:sp",
    "GETRANGE d:sp 5 6",
    "SETRANGE d:sr 100 ~",
    "SETRANGE d:none 3 ~",
    "EXISTS d:none",
    "SETRANGE d:sr -1 x",
    "SETRANGE d:sr x x",
    "SETRANGE d:sr 536870911 xy",
    "SETRANGE d:l 0 x",
    "SETRANGE d:sr 0",
    "SET d:gx v",
    "GETEX d:gx",
    "GETEX d:gx EX 100",
    "TTL d:gx",
    "GETEX d:gx PERSIST",
    "TTL d:gx",
    "GETEX d:gx PX 200000",
    "TTL d:gx",
    "GETEX d:gx EX 10 EX 300",
    "TTL d:gx",
    "GETEX d:gx EXAT 4102444800",
    "TTL d:gx",
    "GETEX d:gx PERSIST PERSIST",
    "GETEX d:gx EX 10 PX 10",
    "GETEX d:gx EX 10 PERSIST",
    "GETEX d:gx PERSIST EX 10",
    "GETEX d:gx EX",
    "GETEX d:gx EX 0",
    "GETEX d:gx EX x",
    "GETEX d:gx FOO",
    "GETEX d:none EX 10",
    "GETEX d:l",
    "GETEX d:gx PXAT 1",
    "EXISTS d:gx",
    "GETEX",

    /* EXPIRE's options (Redis 7: no expiry counts as infinite) */
    "SET d:{r}a 1",
    "EXPIRE d:{r}a 100 NX",
    "EXPIRE d:{r}a 100 nx",
    "EXPIRE d:{r}a 200 XX",
    "EXPIRE d:{r}a 50 GT",
    "EXPIRE d:{r}a 300 GT",
    "EXPIRE d:{r}a 400 LT",
    "EXPIRE d:{r}a 100 LT",
    "TTL d:{r}a",
    "EXPIRE d:{r}a 100 NX XX",
    "EXPIRE d:{r}a 100 GT LT",
    "EXPIRE d:{r}a 100 NX GT",
    "EXPIRE d:{r}a 100 FOO",
    "EXPIRE d:{r}a x NX",
    "PERSIST d:{r}a",
    "EXPIRE d:{r}a 100 XX",
    "EXPIRE d:{r}a 100 GT",
    "EXPIRE d:{r}a 100 LT",
    "PEXPIRE d:{r}a 500000 GT",
    "TTL d:{r}a",
    "EXPIRE d:none 100 NX",
    "EXPIREAT d:{r}a 4102444800",
    "PEXPIREAT d:{r}a 4102444800000 LT",
    "PEXPIREAT d:{r}a 4102444800000 GT",
    "EXPIREAT d:{r}a 4102444801 GT",
    "EXPIREAT d:{r}a x",
    "EXPIREAT d:{r}a",
    "EXPIREAT d:{r}a 1",
    "EXISTS d:{r}a",
    "EXPIRE d:{r}a 9223372036854775807",
    "PEXPIRE d:{r}a 9223372036854775807",
    "PEXPIRE d:none -5",
    "SET d:{r}a 1",
    "PEXPIRE d:{r}a -5",
    "EXISTS d:{r}a",

    /* RENAME / RENAMENX (one slot: a hash tag) */
    "SET d:{r}s v",
    "EXPIRE d:{r}s 100",
    "RENAME d:{r}s d:{r}t",
    "TTL d:{r}t",
    "GET d:{r}s",
    "GET d:{r}t",
    "RENAME d:{r}none d:{r}t",
    "RENAMENX d:{r}none d:{r}t",
    "RENAME d:{r}t d:{r}t",
    "RENAMENX d:{r}t d:{r}t",
    "RENAME d:{r}t",
    "HSET d:{r}h f 1",
    "RENAME d:{r}h d:{r}t",
    "HGETALL d:{r}t",
    "TYPE d:{r}t",
    "TTL d:{r}t",
    "EXISTS d:{r}h",
    "RPUSH d:{r}l a b c",
    "RENAMENX d:{r}l d:{r}t",
    "RENAMENX d:{r}l d:{r}u",
    "LRANGE d:{r}u 0 -1",
    "LPUSH d:{r}u z",
    "LRANGE d:{r}u 0 -1",
    "SADD d:{r}st x y",
    "RENAME d:{r}st d:{r}u",
    "SCARD d:{r}u",
    "SISMEMBER d:{r}u y",
    "ZADD d:{r}z 1 a 2 b",
    "RENAME d:{r}z d:{r}z2",
    "ZRANGE d:{r}z2 0 -1 WITHSCORES",
    "ZCARD d:{r}z",

    /* ZINCRBY, ZCOUNT, LIMIT, ZREVRANGEBYSCORE */
    "ZINCRBY d:zi 2 m",
    "ZINCRBY d:zi 2.5 m",
    "ZINCRBY d:zi x m",
    "ZINCRBY d:{r}t 1 m",
    "ZSCORE d:zi m",
    "ZINCRBY d:zi 1",
    "ZINCRBY d:zi -inf m",
    "ZINCRBY d:zi +inf m",
    "ZADD d:zc 1 a 2 b 3 c 4 d",
    "ZCOUNT d:zc 2 3",
    "ZCOUNT d:zc (1 3",
    "ZCOUNT d:zc -inf +inf",
    "ZCOUNT d:zc 5 1",
    "ZCOUNT d:zc x 1",
    "ZCOUNT d:none 0 1",
    "ZCOUNT d:{r}t 0 1",
    "ZCOUNT d:zc 1",
    "ZRANGEBYSCORE d:zc -inf +inf LIMIT 1 2",
    "ZRANGEBYSCORE d:zc -inf +inf WITHSCORES LIMIT 1 -1",
    "ZRANGEBYSCORE d:zc -inf +inf LIMIT -1 2",
    "ZRANGEBYSCORE d:zc -inf +inf LIMIT 0 0",
    "ZRANGEBYSCORE d:zc -inf +inf LIMIT 9 2",
    "ZRANGEBYSCORE d:zc 0 5 LIMIT x 1",
    "ZRANGEBYSCORE d:zc 0 5 LIMIT 1",
    "ZREVRANGEBYSCORE d:zc +inf -inf LIMIT 1 2",
    "ZREVRANGEBYSCORE d:zc 3 1",
    "ZREVRANGEBYSCORE d:zc (3 1 WITHSCORES",
    "ZREVRANGEBYSCORE d:zc 3 x",
    "ZRANGE d:zc 0 -1 LIMIT 0 1",
    "ZRANGE d:zc 0 -1 LIMIT 0 -1",
    "ZRANGE d:zc (1 4 BYSCORE LIMIT 1 1",
    "ZRANGE d:zc 4 1 BYSCORE REV LIMIT 0 2",

    /* hashes */
    "HSET d:hh a 1 b x",
    "HINCRBY d:hh a 5",
    "HINCRBY d:hh n 3",
    "HINCRBY d:hh b 1",
    "HINCRBY d:hh a x",
    "HINCRBY d:hh a 9223372036854775807",
    "HINCRBY d:zc a 1",
    "HINCRBY d:hh a",
    "HINCRBYFLOAT d:hh a 1.5",
    "HINCRBYFLOAT d:hh b 1",
    "HINCRBYFLOAT d:hh a x",
    "HINCRBYFLOAT d:hh f 0.1",
    "HINCRBYFLOAT d:hn f 3",
    "HGET d:hh f",
    "HEXISTS d:hh a",
    "HEXISTS d:hh zz",
    "HEXISTS d:none a",
    "HEXISTS d:zc a",
    "HLEN d:hh",
    "HSET d:h1 only 1",
    "HKEYS d:h1",
    "HVALS d:h1",
    "HKEYS d:none",
    "HVALS d:zc",
    "HKEYS",

    /* ZADD's options, LPOP/RPOP with count 0 */
    "ZADD d:za XX 1 a",
    "ZADD d:za XX INCR 1 a",
    "EXISTS d:za",
    "ZADD d:za NX 1 a 2 b",
    "ZADD d:za NX 5 a 3 c",
    "ZADD d:za XX 5 a 4 d",
    "ZADD d:za XX CH 6 a 3 c",
    "ZADD d:za ch 7 a 1 e",
    "ZADD d:za GT CH 0 b 9 c",
    "ZADD d:za LT CH 8 a 4 f",
    "ZADD d:za LT XX 0 c 0 g",
    "ZADD d:za CH 7 a 4 f",
    "ZRANGE d:za 0 -1 WITHSCORES",
    "ZADD d:za INCR 2.5 a",
    "ZADD d:za INCR 3 new",
    "ZADD d:za NX INCR 1 a",
    "ZADD d:za XX INCR 1 zz",
    "ZADD d:za GT INCR -1 a",
    "ZADD d:za LT INCR -1 a",
    "ZADD d:za incr gt 0 a",
    "ZADD d:za INCR 0 a",
    "ZADD d:za NX INCR 1 nx",
    "ZADD d:za INCR +inf b",
    "ZADD d:za INCR -inf b",
    "ZSCORE d:za b",
    "ZADD d:za CH 1 m 2 m",
    "ZADD d:za GT XX CH INCR 1 m",
    "ZRANGE d:za 0 -1 WITHSCORES",
    "ZADD d:za NX XX 1 a",
    "ZADD d:za XX NX 1 a",
    "ZADD d:za GT LT 1 a",
    "ZADD d:za NX GT 1 a",
    "ZADD d:za LT NX 1 a",
    "ZADD d:za INCR 1 a 2 b",
    "ZADD d:za NX XX GT 1 a 2",
    "ZADD d:za NX XX",
    "ZADD d:za INCR",
    "ZADD d:za 1 a 2",
    "ZADD d:za 1 a NX b",
    "ZADD d:za INCR x a",
    "ZADD d:za NX nan a",
    "SET d:zs v",
    "ZADD d:zs XX 1 a",
    "ZADD d:zs INCR 1 a",
    "ZADD d:zs NX XX 1 a",
    "RPUSH d:lp a b c",
    "LPOP d:lp 0",
    "RPOP d:lp 0",
    "LPOP d:none 0",
    "RPOP d:none 0",
    "LPOP d:zs 0",
    "RPOP d:za 0",
    "LPOP d:lp -1",
    "RPOP d:lp x",
    "RPOP d:lp 1 2",
    "LRANGE d:lp 0 -1",
    "HELLO 3",
    "ZADD d:za INCR 1 a",
    "ZADD d:za NX INCR 1 a",
    "ZADD d:za GT CH 20 a 1 b",
    "LPOP d:none 0",
    "LPOP d:lp 0",
    "HELLO 2",

    /* keyspace walks: errors (the keys themselves are compared as sets
     * below) */
    "SCAN x",
    "SCAN 0 COUNT 0",
    "SCAN 0 COUNT x",
    "SCAN 0 MATCH",
    "SCAN 0 FOO bar",
    "SCAN",
    "KEYS",
    "KEYS a b",
    "DBSIZE x",

    /* Transactions: queued replies, errors per element, aborts. */
    "MULTI",
    "SET d:{m}a 1",
    "INCR d:{m}a",
    "GET d:{m}a",
    "HSET d:{m}a f v",
    "SET d:{m}a 5 NX XX",
    "INCRBY d:{m}a x",
    "PING",
    "ECHO hi",
    "SELECT 0",
    "UNWATCH",
    "EXEC",
    "GET d:{m}a",
    "EXEC",
    "DISCARD",
    "MULTI",
    "MULTI",
    "WATCH d:{m}a",
    "SET d:{m}b 1",
    "NOSUCH x",
    "GET",
    "EXEC",
    "GET d:{m}b",
    "MULTI",
    "SET d:{m}b 1",
    "DISCARD",
    "GET d:{m}b",
    "MULTI",
    "EXEC",
    "MULTI",
    "DISCARD x",
    "EXEC",
    "MULTI",
    "SET d:{m}b 1",
    "EXEC x",
    "EXEC",
    "GET d:{m}b",
    "WATCH",
    "WATCH d:{m}w",
    "SET d:{m}w 1",
    "MULTI",
    "SET d:{m}w 2",
    "EXEC",
    "GET d:{m}w",
    "WATCH d:{m}w d:{m}none",
    "MULTI",
    "INCR d:{m}w",
    "EXEC",
    "WATCH d:{m}w",
    "UNWATCH",
    "SET d:{m}w 9",
    "MULTI",
    "GET d:{m}w",
    "EXEC",
    "WATCH d:{m}w",
    "DEL d:{m}w",
    "MULTI",
    "DISCARD",
    "MULTI",
    "GET d:{m}w",
    "EXEC",
    "MULTI",
    "RPUSH d:{m}l a b",
    "LRANGE d:{m}l 0 -1",
    "LPOP d:{m}l",
    "LPOP d:{m}l 0",
    "RPOP d:{m}none 0",
    "LLEN d:{m}l",
    "ZADD d:{m}z 1 a 2.5 b",
    "ZADD d:{m}z XX CH 3 a 1 nope",
    "ZADD d:{m}z NX INCR 1 a",
    "ZADD d:{m}z GT INCR 2 b",
    "ZADD d:{m}z INCR 1 a 2 b",
    "ZSCORE d:{m}z b",
    "ZRANGE d:{m}z 0 -1 WITHSCORES",
    "SADD d:{m}s x",
    "SMEMBERS d:{m}s",
    "HSET d:{m}h f v",
    "HGETALL d:{m}h",
    "TYPE d:{m}z",
    "GETDEL d:{m}a",
    "EXISTS d:{m}a",
    "MSET d:{m}a 1 d:{m}b 2",
    "MGET d:{m}b d:{m}none d:{m}l d:{m}a",
    "EXISTS d:{m}a d:{m}b d:{m}a",
    "DEL d:{m}a d:{m}none d:{m}b",
    "SETNX d:{m}a x",
    "SETNX d:{m}a y",
    "EXEC",
    "HELLO 3",
    "WATCH d:{m}w",
    "SET d:{m}w 3",
    "MULTI",
    "GET d:{m}w",
    "EXEC",
    "MULTI",
    "GET d:{m}none",
    "HGETALL d:{m}h",
    "SMEMBERS d:{m}s",
    "ZRANGE d:{m}z 0 -1 WITHSCORES",
    "ZSCORE d:{m}z b",
    "EXEC",
    "HELLO 2",
    "DEL d:{m}a d:{m}b d:{m}w d:{m}l d:{m}z d:{m}s d:{m}h",

    "DEL d:k d:h d:l d:s d:z d:n d:h2 d:x d:g d:li d:zr d:lt d:f d:fn d:sr "
    "d:sp d:{r}a d:{r}s d:{r}t d:{r}u d:{r}z2 d:zi d:zc d:hh d:hn d:h1 "
    "d:za d:zs d:lp",
};

/* The keys of a KEYS answer or of a SCAN walk (MATCH/TYPE options after
 * the cursor), sorted and joined by spaces into out. Bounded by pages. */
static void keys_sorted(struct rc *c, const char *cmd, char *out, size_t cap)
{
	char *keys[256];
	size_t n = 0, len = 0;
	char cursor[32] = "0";
	bool scan = strncmp(cmd, "SCAN", 4) == 0;
	for (int page = 0; page < 1000; page++) {
		char line[512];
		const char *r, *p;
		if (scan) {
			snprintf(line, sizeof line, "SCAN %s%s", cursor,
			         cmd + 4);
		} else {
			snprintf(line, sizeof line, "%s", cmd);
		}
		r = rc_cmd(c, line);
		p = r;
		if (scan) {
			/* *2 $n cursor *k ... */
			assert_memory_equal(p, "*2\r\n$", 5);
			p = strchr(p + 5, '\n') + 1;
			size_t cl = strcspn(p, "\r");
			assert_true(cl < sizeof cursor);
			memcpy(cursor, p, cl);
			cursor[cl] = '\0';
			p += cl + 2;
		}
		assert_int_equal(p[0], '*');
		long k = strtol(p + 1, NULL, 10);
		p = strchr(p, '\n') + 1;
		for (long i = 0; i < k; i++) {
			long l = strtol(p + 1, NULL, 10);
			p = strchr(p, '\n') + 1;
			bool dup = false;
			for (size_t j = 0; j < n; j++) {
				dup |= strlen(keys[j]) == (size_t)l &&
				       memcmp(keys[j], p, (size_t)l) == 0;
			}
			if (!dup) {
				assert_true(n < 256);
				keys[n] = strndup(p, (size_t)l);
				n++;
			}
			p += l + 2;
		}
		if (!scan || strcmp(cursor, "0") == 0) {
			break;
		}
	}
	assert_string_equal(cursor, "0");
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			if (strcmp(keys[j], keys[i]) < 0) {
				char *t = keys[i];
				keys[i] = keys[j];
				keys[j] = t;
			}
		}
	}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(out + len, cap - len, "%s%s",
		                        i ? " " : "", keys[i]);
		free(keys[i]);
	}
}

/* DBSIZE as a number. */
static long long dbsize(struct rc *c)
{
	const char *r = rc_cmd(c, "DBSIZE");
	assert_int_equal(r[0], ':');
	return strtoll(r + 1, NULL, 10);
}

/* The keyspace walks on both servers: keys of every type under "w:",
 * KEYS with a few patterns and SCAN walks (small pages, MATCH, TYPE)
 * return the same key sets; DBSIZE grows by the same count; INFO's
 * keyspace line names the count. */
static unsigned keyspace_walks(struct rc *a, struct rc *b)
{
	static const char *const setup_cmds[] = {
	    "SET w:s1 v",    "SET w:s2 v EX 1000", "SET w:a*b v",
	    "SET w:abc v",   "HSET w:h1 f v",      "RPUSH w:l1 a",
	    "SADD w:set1 m", "ZADD w:z1 1 m",      "SET w:x1 v",
	    "SET w:x2 v",    "SET w:x3 v",         "SET w:y10 v",
	    "SET w:y11 v",   "SET w:y20 v",        "SET w:[b] v",
	    "SET w:B v",
	};
	static const char *const walks[] = {
	    "KEYS w:*",
	    "KEYS w:s?",
	    "KEYS w:[xy]1*",
	    "KEYS w:[^x]*",
	    "KEYS w:a\\*b",
	    "KEYS w:[a-c]*",
	    "KEYS w:\\[b]",
	    "KEYS w:nomatch*",
	    "KEYS w:x[1-2",
	    "SCAN MATCH w:*",
	    "SCAN MATCH w:* COUNT 1",
	    "SCAN MATCH w:y* COUNT 2",
	    "SCAN MATCH w:* TYPE hash",
	    "SCAN MATCH w:* TYPE string COUNT 3",
	    "SCAN MATCH w:* TYPE zset",
	    "SCAN MATCH w:* TYPE nosuch",
	};
	unsigned differ = 0;
	long long da = dbsize(a), db = dbsize(b);
	for (size_t i = 0; i < sizeof setup_cmds / sizeof setup_cmds[0]; i++) {
		char want[512];
		snprintf(want, sizeof want, "%s", rc_cmd(b, setup_cmds[i]));
		assert_string_equal(rc_cmd(a, setup_cmds[i]), want);
	}
	if (dbsize(a) - da != dbsize(b) - db) {
		print_error("DBSIZE grew by %lld on lodestone, %lld on "
		            "redis-server\n",
		            dbsize(a) - da, dbsize(b) - db);
		differ++;
	}
	for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++) {
		static char ka[8192], kb[8192];
		keys_sorted(b, walks[i], kb, sizeof kb);
		keys_sorted(a, walks[i], ka, sizeof ka);
		if (strcmp(ka, kb) != 0) {
			print_error("'%s': redis-server '%s', lodestone '%s'\n",
			            walks[i], kb, ka);
			differ++;
		}
	}
	/* INFO keyspace: db0 with the DBSIZE count (and the key with an
	 * expiry among them) */
	{
		char want[64], info[4096];
		snprintf(want, sizeof want,
		         "db0:keys=%lld,expires=", dbsize(a));
		snprintf(info, sizeof info, "%s", rc_cmd(a, "INFO keyspace"));
		assert_non_null(strstr(info, "# Keyspace\r\n"));
		assert_non_null(strstr(info, want));
		assert_null(strstr(info, "expires=0,"));
	}
	for (size_t i = 0; i < sizeof setup_cmds / sizeof setup_cmds[0]; i++) {
		char del[128];
		const char *k = setup_cmds[i] + strcspn(setup_cmds[i], " ") + 1;
		snprintf(del, sizeof del, "DEL %.*s", (int)strcspn(k, " "), k);
		rc_cmd(a, del);
		rc_cmd(b, del);
	}
	return differ;
}

static pid_t redis_start(uint16_t p)
{
	char ps[16];
	pid_t pid;
	snprintf(ps, sizeof ps, "%u", p);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open("/dev/null", 0);
		dup2(fd, 1);
		execlp("redis-server", "redis-server", "--port", ps, "--bind",
		       "127.0.0.1", "--save", "", "--appendonly", "no",
		       "--protected-mode", "no", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void test_differential(void **state)
{
	struct rc *a = malloc(sizeof *a), *b = malloc(sizeof *b);
	uint16_t rp = harness_free_port();
	const char *ci = getenv("CI");
	char out[4096] = "";
	const char *which[] = {"sh", "-c", "command -v redis-server", NULL};
	pid_t pid;
	unsigned differ = 0;
	(void)state;
	if (harness_run(which, out, sizeof out) != 0 || out[0] == '\0') {
		free(a);
		free(b);
		if (ci != NULL && strcmp(ci, "true") == 0) {
			fail_msg("redis-server is missing (CI=true)");
		}
		skip();
		return;
	}
	pid = redis_start(rp);
	assert_true(pid > 0);
	assert_int_equal(rc_connect(a, port), 0);
	assert_int_equal(rc_connect(b, rp), 0);
	wait_ready(a);
	/* redis-server may still be loading */
	for (int i = 0; i < 100; i++) {
		if (strcmp(rc_cmd(b, "PING"), "+PONG\r\n") == 0) {
			break;
		}
		harness_nap(50);
	}
	for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
		char want[8192];
		snprintf(want, sizeof want, "%s", rc_cmd(b, script[i]));
		const char *got = rc_cmd(a, script[i]);
		if (strcmp(script[i], "HELLO 3") == 0 ||
		    strcmp(script[i], "HELLO 2") == 0) {
			/* Server name, version, id and mode differ. */
			assert_true(got[0] == want[0]);
			continue;
		}
		if (strcmp(want, got) != 0) {
			print_error("'%s': redis-server answered '%s', "
			            "lodestone '%s'\n",
			            script[i], want, got);
			differ++;
		}
	}
	differ += keyspace_walks(a, b);
	assert_int_equal(differ, 0);
	rc_close(a);
	rc_close(b);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_connection),
	    cmocka_unit_test(test_kv),
	    cmocka_unit_test(test_server_commands),
	    cmocka_unit_test(test_protocol_errors),
	    cmocka_unit_test(test_auth),
	    cmocka_unit_test(test_buffer_limits),
	    cmocka_unit_test(test_scan_pages),
	    cmocka_unit_test(test_differential),
	    cmocka_unit_test(test_acl_users),
	    cmocka_unit_test(test_multi),
	    cmocka_unit_test(test_multi_acl),
	    cmocka_unit_test(test_multi_cluster),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
