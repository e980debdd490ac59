/* The node transport (raft/transport.h) between three raft stores on one
 * loop over loopback TCP, with the forwarding RPC (raft/forward.h) and
 * snapshot state transfer (raft/xfer.h) on top:
 *  - replication through the transport and forwarding from every node;
 *  - handshake refusals (other cluster, stranger, garbage) logged with a
 *    reason, and a peer vanishing in the middle of a frame;
 *  - a node kept down while the log is compacted catches up through a
 *    snapshot and a state transfer;
 *  - a peer that stops reading gets a bounded queue, then refusals;
 *  - mutual TLS (certificates from lodectl cert): frames of every size
 *    both ways, TLS joins, and refusals of another CA's certificate and of
 *    a certificate naming another node.
 * Outcomes are checked, never timings (waits are bounded by a guard). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/lodectl.h"
#include "net/tls.h"
#include "raft/forward.h"
#include "raft/join.h"
#include "raft/msg_codec.h"
#include "raft/transport.h"
#include "raft/xfer.h"
#include "tests/unit/testdb.h"
#include "tests/unit/testfsm.h"

#define NODES 3
#define GROUPS 3
#define GHOST                                                                  \
	5 /* a configured peer that never runs (raw sockets pose as it)        \
	   */
#define GUARD_MS 30000

struct cluster;

struct node {
	struct cluster *c;
	unsigned i;
	uint64_t id;
	uint16_t port;
	char addr[32];
	char dir[512];
	struct testdb db;
	struct testfsm *fsm;
	struct rio_store *store;
	struct group_mgr *m;
	struct transport *t;
	struct forward *f;
	struct xfer *x;
	bool up;
	int closing;
	char log[16384];
	size_t log_len;
};

struct cluster {
	uv_loop_t loop;
	struct node n[NODES];
	unsigned threshold;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void append_log(char *buf, size_t *len, size_t cap, const char *msg)
{
	size_t n = strlen(msg);
	if (*len + n + 2 >= cap) {
		*len = 0; /* keep the newest lines */
	}
	memcpy(buf + *len, msg, n);
	*len += n;
	buf[(*len)++] = '\n';
	buf[*len] = '\0';
}

static void node_log(void *data, int level, const char *msg)
{
	struct node *n = data;
	(void)level;
	append_log(n->log, &n->log_len, sizeof n->log, msg);
	if (getenv("LS_TEST_VERBOSE") != NULL) {
		fprintf(stderr, "node %llu: %s\n", (unsigned long long)n->id,
		        msg);
	}
}

static void on_frame(void *data, uint64_t peer, uint8_t kind, const uint8_t *p,
                     size_t len)
{
	struct node *n = data;
	if (kind == MSG_FWD_REQ || kind == MSG_FWD_RESP) {
		forward_on_frame(n->f, peer, kind, p, len);
	} else {
		xfer_on_frame(n->x, peer, kind, p, len);
	}
}

static void on_peer(void *data, uint64_t peer, bool up, uint64_t gen)
{
	struct node *n = data;
	forward_on_peer(n->f, peer, up, gen);
	xfer_on_peer(n->x, peer, up, gen);
}

static uint64_t route_leader(void *data, uint32_t group)
{
	struct node *n = data;
	struct group_status st;
	if (group_status(n->m, group, &st) != 0) {
		return 0;
	}
	return st.leader_id;
}

static size_t replicas(void *data, uint32_t group, uint64_t *out, size_t max)
{
	struct node *n = data;
	size_t k;
	(void)group;
	for (k = 0; k < NODES && k < max; k++) {
		out[k] = n->c->n[k].id;
	}
	return k;
}

/* Reads are the counter at the key named by the command. */
static int read_cmd(void *data, uint32_t group, const uint8_t *cmd, size_t len,
                    uint8_t **res, size_t *rlen)
{
	struct node *n = data;
	char key[64];
	uint64_t v;
	if (len == 0 || len >= sizeof key) {
		return -1;
	}
	memcpy(key, cmd, len);
	key[len] = '\0';
	v = testfsm_counter(n->fsm, group, key);
	*res = malloc(8);
	for (int i = 0; i < 8; i++) {
		(*res)[i] = (uint8_t)(v >> (56 - 8 * i));
	}
	*rlen = 8;
	return 0;
}

static int export_state(void *data, uint32_t group, const char *dir,
                        uint64_t *applied)
{
	struct node *n = data;
	return n->fsm->fsm.export_state(&n->fsm->fsm, group, dir, applied);
}

static int applied_index(void *data, uint32_t group, uint64_t *index)
{
	struct node *n = data;
	return n->fsm->fsm.applied_index(&n->fsm->fsm, group, index);
}

static void node_start_transport(struct node *n, uint16_t port)
{
	struct transport_options to = {0};
	char err[256];
	to.node_id = n->id;
	to.cluster_id = "test";
	to.log = node_log;
	to.on_frame = on_frame;
	to.on_peer = on_peer;
	to.data = n;
	to.ping_ms = 100;
	to.dead_ms = 2000;
	assert_int_equal(transport_init(&n->t, &n->c->loop, &to), 0);
	assert_int_equal(
	    transport_start(n->t, "127.0.0.1", port, err, sizeof err), 0);
	n->port = transport_port(n->t);
	snprintf(n->addr, sizeof n->addr, "127.0.0.1:%u", n->port);
}

static void node_add_peers(struct node *n)
{
	for (unsigned k = 0; k < NODES; k++) {
		struct node *o = &n->c->n[k];
		if (o != n) {
			assert_int_equal(transport_add_peer(
			                     n->t, o->id, "127.0.0.1", o->port),
			                 0);
		}
	}
	/* A member that never runs: raw sockets pose as it. */
	assert_int_equal(transport_add_peer(n->t, GHOST, "127.0.0.1", 1), 0);
}

static void node_start_groups(struct node *n)
{
	char err[RAFT_ERRMSG_BUF_SIZE];
	struct rio_store_options so = {0};
	char waldir[300];
	struct group_options o = {0};
	struct forward_options fo = {0};
	struct xfer_options xo = {0};
	struct group_member members[NODES];
	char errb[256];

	so.seed = 77 + n->i;
	so.tick_ms = 10;
	snprintf(waldir, sizeof waldir, "%s/raftwal", n->db.dir);
	so.wal_dir = waldir;
	assert_int_equal(rio_store_init(&n->store, &n->c->loop, n->db.db,
	                                n->db.log, n->db.state, &so, err),
	                 0);
	transport_attach(n->t, n->store);
	snprintf(n->dir, sizeof n->dir, "%s/xfer", n->db.dir);
	xo.node_id = n->id;
	xo.dir = n->dir;
	xo.chunk_bytes = 4096; /* many chunks even for small states */
	xo.retry_ms = 100;
	xo.export_state = export_state;
	xo.applied_index = applied_index;
	xo.sources = replicas;
	xo.log = node_log;
	xo.data = n;
	assert_int_equal(
	    xfer_init(&n->x, &n->c->loop, n->t, &xo, errb, sizeof errb), 0);
	o.node_id = n->id;
	o.address = n->addr;
	o.defaults.election_timeout_ms = 300;
	o.defaults.heartbeat_timeout_ms = 40;
	o.defaults.snapshot_threshold = n->c->threshold;
	o.defaults.snapshot_trailing = 8;
	o.fetch = xfer_fetch;
	o.fetch_data = n->x;
	assert_int_equal(group_mgr_init(&n->m, &n->c->loop, n->store, &o), 0);
	for (unsigned k = 0; k < NODES; k++) {
		members[k].id = n->c->n[k].id;
		members[k].address = n->c->n[k].addr;
	}
	for (uint32_t g = 0; g < GROUPS; g++) {
		int rv;
		assert_int_equal(group_create(n->m, g, &n->fsm->fsm, NULL), 0);
		rv = group_bootstrap(n->m, g, members, NODES);
		assert_true(rv == 0 || rv == REPLICA_EEXIST);
		assert_int_equal(group_start(n->m, g), 0);
	}
	fo.node_id = n->id;
	fo.timeout_ms = 10000;
	fo.read = read_cmd;
	fo.leader = route_leader;
	fo.replicas = replicas;
	fo.data = n;
	assert_int_equal(forward_init(&n->f, &n->c->loop, n->t, n->m, &fo), 0);
	n->up = true;
}

static void step_done(struct node *n)
{
	n->closing--;
}

static void fwd_closed(struct forward *f, void *data)
{
	(void)f;
	step_done(data);
}

static void mgr_closed(struct group_mgr *m, void *data)
{
	(void)m;
	step_done(data);
}

static void xfer_closed(struct xfer *x, void *data)
{
	(void)x;
	step_done(data);
}

static void tr_closed(struct transport *t, void *data)
{
	(void)t;
	step_done(data);
}

static void store_closed(struct rio_store *s, void *data)
{
	(void)s;
	step_done(data);
}

static void run_until_zero(struct node *n)
{
	uint64_t end = mono_ms() + GUARD_MS;
	while (n->closing > 0) {
		uv_run(&n->c->loop, UV_RUN_ONCE);
		assert_true(mono_ms() < end);
	}
}

static void node_down(struct node *n)
{
	n->up = false;
	n->closing = 1;
	forward_close(n->f, fwd_closed, n);
	run_until_zero(n);
	n->closing = 1;
	group_mgr_close(n->m, mgr_closed, n);
	run_until_zero(n);
	group_mgr_free(n->m);
	forward_free(n->f);
	n->closing = 1;
	xfer_close(n->x, xfer_closed, n);
	run_until_zero(n);
	xfer_free(n->x);
	n->closing = 1;
	transport_close(n->t, tr_closed, n);
	run_until_zero(n);
	transport_free(n->t);
	n->closing = 1;
	rio_store_close(n->store, store_closed, n);
	run_until_zero(n);
	rio_store_free(n->store);
	n->m = NULL;
	n->t = NULL;
}

static struct cluster *cluster_new(unsigned threshold)
{
	struct cluster *c = calloc(1, sizeof *c);
	unsigned i;

	uv_loop_init(&c->loop);
	c->threshold = threshold;
	for (i = 0; i < NODES; i++) {
		struct node *n = &c->n[i];
		n->c = c;
		n->i = i;
		n->id = i + 1;
		testdb_create(&n->db);
		n->fsm = calloc(1, sizeof *n->fsm);
		testfsm_init(n->fsm, n->db.db, n->db.data, 1);
		node_start_transport(n, 0);
	}
	for (i = 0; i < NODES; i++) {
		node_add_peers(&c->n[i]);
	}
	for (i = 0; i < NODES; i++) {
		node_start_groups(&c->n[i]);
	}
	return c;
}

static void cluster_free(struct cluster *c)
{
	unsigned i;
	for (i = 0; i < NODES; i++) {
		if (c->n[i].up) {
			node_down(&c->n[i]);
		}
	}
	uv_run(&c->loop, UV_RUN_NOWAIT);
	assert_int_equal(uv_loop_close(&c->loop), 0);
	for (i = 0; i < NODES; i++) {
		testfsm_close(c->n[i].fsm);
		free(c->n[i].fsm);
		testdb_destroy(&c->n[i].db);
	}
	free(c);
}

static unsigned leader_of(struct cluster *c, uint32_t g)
{
	for (unsigned i = 0; i < NODES; i++) {
		struct group_status st;
		if (c->n[i].up && group_status(c->n[i].m, g, &st) == 0 &&
		    st.role == GROUP_ROLE_LEADER && st.ready) {
			return i;
		}
	}
	return NODES;
}

static void run_until_leaders(struct cluster *c)
{
	uint64_t end = mono_ms() + GUARD_MS;
	for (uint32_t g = 0; g < GROUPS; g++) {
		while (leader_of(c, g) == NODES) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
}

static void run_ms(struct cluster *c, unsigned ms)
{
	uint64_t end = mono_ms() + ms;
	while (mono_ms() < end) {
		uv_run(&c->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
}

/* ---- a client submitting through forward on every node ---- */

struct client {
	struct cluster *c;
	unsigned ok;
	unsigned unknown;
	unsigned failed;
	unsigned pending;
	uint64_t max_value;
};

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static void client_cb(void *data, int status, const uint8_t *res, size_t len)
{
	struct client *cl = data;
	cl->pending--;
	if (status == REPLICA_OK) {
		assert_true(len >= 8);
		cl->ok++;
		if (be64(res) > cl->max_value) {
			cl->max_value = be64(res);
		}
	} else if (status == REPLICA_ELEADERSHIPLOST) {
		cl->unknown++;
	} else {
		cl->failed++;
	}
}

static void submit_rot(struct cluster *c, struct client *cl, unsigned per_node,
                       const char *key, unsigned offset)
{
	uint8_t cmd[64];
	size_t n = testfsm_cmd_add(cmd, key, 1);
	uint64_t end = mono_ms() + GUARD_MS;

	for (unsigned k = 0; k < per_node; k++) {
		for (unsigned i = 0; i < NODES; i++) {
			struct node *nd = &c->n[i];
			uint32_t g = (offset + k + i) % GROUPS;
			if (!nd->up) {
				continue;
			}
			assert_int_equal(forward_submit(nd->f, g,
			                                FORWARD_PROPOSE, cmd, n,
			                                0, client_cb, cl),
			                 0);
			cl->pending++;
		}
		if (k % 16 == 15) {
			uv_run(&c->loop, UV_RUN_NOWAIT);
		}
	}
	while (cl->pending > 0) {
		uv_run(&c->loop, UV_RUN_ONCE);
		assert_true(mono_ms() < end);
	}
}

static void submit_all(struct cluster *c, struct client *cl, unsigned per_node,
                       const char *key)
{
	submit_rot(c, cl, per_node, key, 0);
}

static void converge(struct cluster *c, const char *key, uint64_t want)
{
	uint64_t end = mono_ms() + GUARD_MS;
	for (uint32_t g = 0; g < GROUPS; g++) {
		for (;;) {
			unsigned same = 0;
			for (unsigned i = 0; i < NODES; i++) {
				same += testfsm_counter(c->n[i].fsm, g, key) ==
				        want;
			}
			if (same == NODES) {
				break;
			}
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
}

static uint64_t total(struct cluster *c, unsigned i, const char *key)
{
	uint64_t t = 0;
	for (uint32_t g = 0; g < GROUPS; g++) {
		t += testfsm_counter(c->n[i].fsm, g, key);
	}
	return t;
}

static void test_replicate_and_forward(void **state)
{
	struct cluster *c = cluster_new(1024);
	struct client cl = {0};
	struct forward_stats fs;
	struct transport_peer_info pi[8];
	uint64_t gens[NODES][8];
	unsigned forwarded = 0;
	(void)state;

	run_until_leaders(c);
	cl.c = c;
	submit_all(c, &cl, 200, "k");
	assert_int_equal(cl.failed, 0);
	assert_int_equal(cl.unknown, 0);
	assert_int_equal(cl.ok, 200 * NODES);
	/* 600 increments over 3 groups: each group got 200. */
	converge(c, "k", 200);
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(c->n[i].fsm->violations, 0);
		forward_stats(c->n[i].f, &fs);
		forwarded += (unsigned)fs.sent;
		assert_int_equal(fs.in_flight, 0);
	}
	assert_true(forwarded > 0); /* non-leaders forwarded */

	/* Linearizable reads through forward, from every node. */
	for (unsigned i = 0; i < NODES; i++) {
		struct client rc = {0};
		for (uint32_t g = 0; g < GROUPS; g++) {
			assert_int_equal(forward_submit(c->n[i].f, g,
			                                FORWARD_READ, "k", 1, 0,
			                                client_cb, &rc),
			                 0);
			rc.pending++;
		}
		while (rc.pending > 0) {
			uv_run(&c->loop, UV_RUN_ONCE);
		}
		assert_int_equal(rc.ok, GROUPS);
		assert_int_equal(rc.max_value, 200);
	}

	/* One connection per pair, stable: both dialed, one won. */
	for (unsigned i = 0; i < NODES; i++) {
		size_t np = transport_peers(c->n[i].t, pi, 8);
		assert_int_equal(np, NODES); /* two nodes and the ghost */
		for (size_t k = 0; k < np; k++) {
			if (pi[k].id == GHOST) {
				assert_false(pi[k].connected);
				continue;
			}
			assert_true(pi[k].connected);
			gens[i][k] = pi[k].gen;
		}
	}
	run_ms(c, 300);
	for (unsigned i = 0; i < NODES; i++) {
		size_t np = transport_peers(c->n[i].t, pi, 8);
		for (size_t k = 0; k < np; k++) {
			if (pi[k].id != GHOST) {
				assert_int_equal(pi[k].gen, gens[i][k]);
			}
		}
	}
	cluster_free(c);
}

/* Entries of tens of KB reach every replica intact: the followers decode
 * such AppendEntries in place, in read buffers sized for the previous
 * frame, so sizes that grow, shrink and repeat are sent back to back,
 * with small commands between them. */
static void test_large_entries(void **state)
{
	enum { N = 30 };
	static const size_t kb[] = {16, 70, 70, 17, 130, 40, 40, 200, 24, 64};
	struct cluster *c = cluster_new(1024);
	struct client cl = {0};
	uint8_t *cmd = malloc(300 << 10), *v = malloc(256 << 10);
	uint64_t end;
	(void)state;

	assert_non_null(cmd);
	assert_non_null(v);
	run_until_leaders(c);
	cl.c = c;
	for (unsigned k = 0; k < N; k++) {
		char key[16];
		size_t vlen = kb[k % 10] << 10, n;
		snprintf(key, sizeof key, "big%u", k);
		for (size_t j = 0; j < vlen; j++) {
			v[j] = (uint8_t)(k * 31 + j * 7 + j / 251);
		}
		n = testfsm_cmd_put(cmd, key, v, vlen);
		assert_int_equal(forward_submit(c->n[k % NODES].f, 1,
		                                FORWARD_PROPOSE, cmd, n, 0,
		                                client_cb, &cl),
		                 0);
		cl.pending++;
		n = testfsm_cmd_add(cmd, "k", 1);
		assert_int_equal(forward_submit(c->n[k % NODES].f, 1,
		                                FORWARD_PROPOSE, cmd, n, 0,
		                                client_cb, &cl),
		                 0);
		cl.pending++;
		if (k % 3 == 2) {
			uv_run(&c->loop, UV_RUN_NOWAIT);
		}
	}
	end = mono_ms() + GUARD_MS;
	while (cl.pending > 0) {
		uv_run(&c->loop, UV_RUN_ONCE);
		assert_true(mono_ms() < end);
	}
	assert_int_equal(cl.failed, 0);
	assert_int_equal(cl.unknown, 0);
	assert_int_equal(cl.ok, 2 * N);
	for (unsigned i = 0; i < NODES; i++) {
		for (unsigned k = 0; k < N; k++) {
			char key[16], *got;
			size_t vlen = kb[k % 10] << 10, len = 0;
			snprintf(key, sizeof key, "big%u", k);
			for (size_t j = 0; j < vlen; j++) {
				v[j] = (uint8_t)(k * 31 + j * 7 + j / 251);
			}
			/* Followers apply once the leader's commit reaches
			 * them. */
			while ((got = testfsm_value(c->n[i].fsm, 1, key,
			                            &len)) == NULL) {
				uv_run(&c->loop, UV_RUN_ONCE);
				assert_true(mono_ms() < end);
			}
			assert_int_equal(len, vlen);
			assert_memory_equal(got, v, vlen);
			free(got);
		}
		assert_int_equal(c->n[i].fsm->violations, 0);
	}
	for (unsigned i = 0; i < NODES; i++) {
		while (testfsm_counter(c->n[i].fsm, 1, "k") != N) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
	free(cmd);
	free(v);
	cluster_free(c);
}

/* A raw TCP connection to node `n`. */
static int raw_connect(struct node *n)
{
	struct sockaddr_in sa = {0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(n->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

static void raw_hello(int fd, uint64_t from, const char *cluster)
{
	struct msg_hello h = {0};
	uint8_t b[600];
	size_t len;
	h.version = MSG_VERSION;
	h.from = from;
	h.to = 1;
	h.cluster = cluster;
	h.cluster_len = strlen(cluster);
	len = msg_hello_size(&h);
	msg_frame_header(b, MSG_HELLO, (uint32_t)len);
	msg_hello_write(b + MSG_FRAME_HEADER, &h);
	assert_int_equal(write(fd, b, MSG_FRAME_HEADER + len),
	                 (ssize_t)(MSG_FRAME_HEADER + len));
}

/* Runs the loop until `fd` has `want` bytes (or EOF); returns them. */
static size_t raw_read(struct cluster *c, int fd, uint8_t *buf, size_t want)
{
	size_t got = 0;
	uint64_t end = mono_ms() + GUARD_MS;
	struct timeval tv = {0, 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	while (got < want) {
		ssize_t r;
		uv_run(&c->loop, UV_RUN_NOWAIT);
		r = read(fd, buf + got, want - got);
		if (r == 0) {
			break;
		}
		if (r > 0) {
			got += (size_t)r;
		}
		assert_true(mono_ms() < end);
	}
	return got;
}

static void expect_refusal(struct cluster *c, int fd, uint8_t status)
{
	uint8_t b[600];
	uint8_t kind;
	uint32_t plen;
	struct msg_welcome w;
	assert_int_equal(raw_read(c, fd, b, MSG_FRAME_HEADER),
	                 MSG_FRAME_HEADER);
	assert_int_equal(msg_frame_parse(b, 512, &kind, &plen), 0);
	assert_int_equal(kind, MSG_WELCOME);
	assert_int_equal(raw_read(c, fd, b, plen), plen);
	assert_int_equal(msg_welcome_decode(b, plen, &w), 0);
	assert_int_equal(w.status, status);
	/* Then the node closes the connection. */
	assert_int_equal(raw_read(c, fd, b, 1), 0);
}

static void other_closed_cb(struct transport *t, void *data)
{
	(void)t;
	*(bool *)data = true;
}

static void test_refusals(void **state)
{
	struct cluster *c = cluster_new(1024);
	struct node *n1 = &c->n[0];
	struct client cl = {0};
	struct transport *other;
	struct transport_options to = {0};
	char err[256];
	bool other_closed = false;
	uint8_t junk[64];
	int fd;
	(void)state;

	run_until_leaders(c);

	/* Another cluster: refused, both sides log why. */
	to.node_id = 2;
	to.cluster_id = "elsewhere";
	to.data = NULL;
	to.log = NULL;
	assert_int_equal(transport_init(&other, &c->loop, &to), 0);
	assert_int_equal(
	    transport_start(other, "127.0.0.1", 0, err, sizeof err), 0);
	assert_int_equal(transport_add_peer(other, 1, "127.0.0.1", n1->port),
	                 0);
	{
		uint64_t end = mono_ms() + GUARD_MS;
		while (strstr(n1->log, "cluster 'elsewhere'") == NULL) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
	assert_non_null(strstr(n1->log, "refused connection from"));
	assert_false(transport_connected(other, 1));
	transport_close(other, other_closed_cb, &other_closed);
	while (!other_closed) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	transport_free(other);

	/* A stranger (node 9 is not a member). */
	fd = raw_connect(n1);
	raw_hello(fd, 9, "test");
	expect_refusal(c, fd, MSG_HS_STRANGER);
	close(fd);
	assert_non_null(strstr(n1->log, "node 9 is not a member"));

	/* Another protocol version. */
	fd = raw_connect(n1);
	{
		struct msg_hello h = {0};
		uint8_t b[128];
		size_t len;
		h.version = MSG_VERSION + 1;
		h.from = 2;
		h.cluster = "test";
		h.cluster_len = 4;
		len = msg_hello_size(&h);
		msg_frame_header(b, MSG_HELLO, (uint32_t)len);
		msg_hello_write(b + MSG_FRAME_HEADER, &h);
		assert_int_equal(write(fd, b, MSG_FRAME_HEADER + len),
		                 (ssize_t)(MSG_FRAME_HEADER + len));
	}
	expect_refusal(c, fd, MSG_HS_VERSION);
	close(fd);

	/* Garbage instead of a handshake: closed. */
	fd = raw_connect(n1);
	memset(junk, 0xFF, sizeof junk);
	assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
	assert_int_equal(raw_read(c, fd, junk, 1), 0);
	close(fd);

	/* A member that vanishes in the middle of a frame. */
	fd = raw_connect(n1);
	raw_hello(fd, GHOST, "test");
	{
		uint8_t b[64];
		uint64_t end = mono_ms() + GUARD_MS;
		while (!transport_connected(n1->t, GHOST)) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
		/* A raft frame announcing 1000 bytes, cut after 10. */
		msg_frame_header(b, MSG_RAFT, 1000);
		memset(b + MSG_FRAME_HEADER, 0, 10);
		assert_int_equal(write(fd, b, MSG_FRAME_HEADER + 10),
		                 MSG_FRAME_HEADER + 10);
		run_ms(c, 20);
		close(fd);
		while (transport_connected(n1->t, GHOST)) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}

	/* The cluster is not wedged. */
	cl.c = c;
	submit_all(c, &cl, 30, "after");
	assert_int_equal(cl.ok, 30 * NODES);
	converge(c, "after", 30);
	cluster_free(c);
}

static void test_snapshot_catch_up(void **state)
{
	struct cluster *c = cluster_new(32);
	struct node *n3 = &c->n[2];
	struct client cl = {0};
	struct xfer_stats xs;
	struct group_status st;
	(void)state;

	run_until_leaders(c);
	cl.c = c;
	submit_all(c, &cl, 30, "k");
	converge(c, "k", 30);

	/* Node 3 goes down; the others go on and compact their logs. */
	node_down(n3);
	run_until_leaders(c);
	/* One entry per round and group: enough entries to compact. */
	for (unsigned r = 0; r < 120; r++) {
		submit_rot(c, &cl, 1, "k", r);
	}
	assert_int_equal(cl.ok, 30 * NODES + 120 * (NODES - 1));
	for (uint32_t g = 0; g < GROUPS; g++) {
		assert_int_equal(group_status(c->n[0].m, g, &st), 0);
		assert_true(st.snapshot_index > 40);
	}

	/* It comes back on the same data and port. */
	testdb_reopen(&n3->db);
	testfsm_reset(n3->fsm, n3->db.db, n3->db.data);
	node_start_transport(n3, n3->port);
	for (unsigned k = 0; k < NODES; k++) {
		struct node *o = &c->n[k];
		if (o != n3) {
			transport_add_peer(n3->t, o->id, "127.0.0.1", o->port);
		}
	}
	transport_add_peer(n3->t, GHOST, "127.0.0.1", 1);
	node_start_groups(n3);
	/* 30 + 120 * 2 / 3 per group. */
	converge(c, "k", 110);
	xfer_stats(n3->x, &xs);
	assert_true(xs.fetches > 0);
	assert_true(xs.bytes_in > 0);
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(c->n[i].fsm->violations, 0);
	}
	assert_int_equal(total(c, 2, "k"), total(c, 0, "k"));
	/* It serves forwarded writes again. */
	submit_all(c, &cl, 10, "k");
	converge(c, "k", 120);
	cluster_free(c);
}

static void test_bounded_queue(void **state)
{
	struct cluster *c = cluster_new(1024);
	struct node *n1 = &c->n[0];
	static uint8_t chunk[65536];
	unsigned sent = 0;
	int fd, rv = 0;
	(void)state;

	run_until_leaders(c);
	fd = raw_connect(n1);
	raw_hello(fd, GHOST, "test");
	{
		uint64_t end = mono_ms() + GUARD_MS;
		while (!transport_connected(n1->t, GHOST)) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
	/* The ghost reads nothing: kernel buffers fill, then the queue. */
	while (sent < 20000) {
		rv = transport_send(n1->t, GHOST, MSG_XFER_END, chunk,
		                    sizeof chunk);
		if (rv != 0) {
			break;
		}
		sent++;
		if (sent % 32 == 0) {
			uv_run(&c->loop, UV_RUN_NOWAIT);
		}
	}
	assert_int_equal(rv, TRANSPORT_EFULL);
	assert_true(transport_queued(n1->t, GHOST) <= (64u << 20));
	/* The others are not held up by it. */
	{
		struct client cl = {0};
		cl.c = c;
		submit_all(c, &cl, 10, "q");
		assert_int_equal(cl.ok, 10 * NODES);
	}
	close(fd);
	{
		uint64_t end = mono_ms() + GUARD_MS;
		while (transport_connected(n1->t, GHOST)) {
			uv_run(&c->loop, UV_RUN_ONCE);
			assert_true(mono_ms() < end);
		}
	}
	assert_int_equal(transport_send(n1->t, GHOST, MSG_XFER_END, chunk, 8),
	                 TRANSPORT_ENOCONN);
	cluster_free(c);
}

/* Joining: a node's JOIN on a connection of its own is answered by the
 * owner's hook (the members, or a refusal with its reason), another
 * cluster id is refused by the transport itself, and the connection then
 * closes. */
struct join_result {
	bool done;
	int status;
	char text[256];
	uint64_t asked;
};

static int join_hook(void *data, uint64_t id, const char *record, size_t len,
                     char *reply, size_t cap)
{
	struct join_result *r = data;
	r->asked = id;
	if (id == 9) {
		snprintf(reply, cap, "node 9 was removed");
		return MSG_HS_STRANGER;
	}
	assert_int_equal(len, strlen("internal=127.0.0.1:7007"));
	assert_memory_equal(record, "internal=127.0.0.1:7007", len);
	snprintf(reply, cap, "1=127.0.0.1:7001,7=127.0.0.1:7007");
	return MSG_HS_OK;
}

static void join_done(void *data, int status, const char *text)
{
	struct join_result *r = data;
	r->done = true;
	r->status = status;
	snprintf(r->text, sizeof r->text, "%s", text);
}

static void ask(uv_loop_t *loop, uint16_t port, uint64_t id,
                const char *cluster, struct join_result *r)
{
	struct sockaddr_in sa;
	struct msg_join req = {0};
	struct join *j;
	uint64_t end = mono_ms() + GUARD_MS;

	uv_ip4_addr("127.0.0.1", port, &sa);
	req.version = MSG_VERSION;
	req.from = id;
	req.cluster = cluster;
	req.cluster_len = strlen(cluster);
	req.record = "internal=127.0.0.1:7007";
	req.record_len = strlen(req.record);
	r->done = false;
	assert_int_equal(join_start(&j, loop, (struct sockaddr *)&sa, &req,
	                            NULL, 5000, join_done, r),
	                 0);
	while (!r->done) {
		uv_run(loop, UV_RUN_ONCE);
		assert_true(mono_ms() < end);
	}
}

static void test_join(void **state)
{
	uv_loop_t loop;
	struct transport *t;
	struct transport_options to = {0};
	struct join_result r = {0};
	char err[256];
	bool closed = false;
	(void)state;

	assert_int_equal(uv_loop_init(&loop), 0);
	to.node_id = 1;
	to.cluster_id = "test";
	to.on_join = join_hook;
	to.data = &r;
	assert_int_equal(transport_init(&t, &loop, &to), 0);
	assert_int_equal(transport_start(t, "127.0.0.1", 0, err, sizeof err),
	                 0);

	ask(&loop, transport_port(t), 7, "test", &r);
	assert_int_equal(r.status, MSG_HS_OK);
	assert_int_equal(r.asked, 7);
	assert_string_equal(r.text, "1=127.0.0.1:7001,7=127.0.0.1:7007");

	ask(&loop, transport_port(t), 9, "test", &r);
	assert_int_equal(r.status, MSG_HS_STRANGER);
	assert_string_equal(r.text, "node 9 was removed");

	r.asked = 0;
	ask(&loop, transport_port(t), 7, "elsewhere", &r);
	assert_int_equal(r.status, MSG_HS_CLUSTER);
	assert_int_equal(r.asked, 0); /* the hook never saw it */

	/* Nobody listening: the request fails, once. */
	{
		uint16_t port = transport_port(t);
		transport_close(t, other_closed_cb, &closed);
		while (!closed) {
			uv_run(&loop, UV_RUN_ONCE);
		}
		transport_free(t);
		ask(&loop, port, 7, "test", &r);
		assert_int_equal(r.status, JOIN_EFAILED);
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- mutual TLS ---- */

struct tnode {
	struct transport *t;
	struct tls_ctx *server;
	struct tls_ctx *client;
	char log[8192];
	size_t got;     /* frames of kind MSG_READ_CHECK received */
	size_t got_big; /* bytes of the big frame received, when intact */
	struct join_result join;
};

static void tnode_log(void *data, int level, const char *msg)
{
	struct tnode *n = data;
	size_t l = strlen(n->log);
	if (level >= TRANSPORT_WARN && l + strlen(msg) + 2 < sizeof n->log) {
		snprintf(n->log + l, sizeof n->log - l, "%s\n", msg);
	}
}

#define BIG (3u << 20)

static void tnode_frame(void *data, uint64_t peer, uint8_t kind,
                        const uint8_t *p, size_t len)
{
	struct tnode *n = data;
	(void)peer;
	if (kind == MSG_READ_CHECK && len == BIG) {
		bool ok = true;
		for (size_t i = 0; i < len && ok; i++) {
			ok = p[i] == (uint8_t)(i * 7);
		}
		n->got_big = ok ? len : 0;
	} else if (kind == MSG_READ_CHECK) {
		n->got++;
	}
}

static int tnode_join(void *data, uint64_t id, const char *record, size_t len,
                      char *reply, size_t cap)
{
	(void)data;
	(void)id;
	(void)record;
	(void)len;
	snprintf(reply, cap, "1=127.0.0.1:7001");
	return MSG_HS_OK;
}

static void certs_make(const char *dir, const char *ca, unsigned id)
{
	char n[16], out[600];
	snprintf(n, sizeof n, "%u", id);
	snprintf(out, sizeof out, "%s/%s", dir, ca);
	char *argv[] = {"cert", "node",      n,   "--ca-dir",
	                out,    "--out-dir", out, NULL};
	assert_int_equal(lodectl_cert_main(NULL, 7, argv), 0);
}

static void tnode_ctx(struct tnode *n, const char *dir, const char *ca,
                      unsigned id)
{
	char cert[600], key[600], cafile[600], err[512];
	snprintf(cert, sizeof cert, "%s/%s/node-%u.crt", dir, ca, id);
	snprintf(key, sizeof key, "%s/%s/node-%u.key", dir, ca, id);
	snprintf(cafile, sizeof cafile, "%s/%s/ca.crt", dir, ca);
	assert_int_equal(
	    tls_ctx_new(&n->server, cert, key, cafile, err, sizeof err), 0);
	assert_int_equal(
	    tls_ctx_new_client(&n->client, cafile, cert, key, err, sizeof err),
	    0);
	tls_ctx_require_tls13(n->server);
	tls_ctx_require_tls13(n->client);
}

static void tnode_start(struct tnode *n, uv_loop_t *loop, uint64_t id)
{
	struct transport_options to = {0};
	char err[256];
	to.node_id = id;
	to.cluster_id = "test";
	to.log = tnode_log;
	to.on_frame = tnode_frame;
	to.on_join = tnode_join;
	to.tls_server = n->server;
	to.tls_client = n->client;
	to.reconnect_max_ms = 200;
	to.data = n;
	assert_int_equal(transport_init(&n->t, loop, &to), 0);
	assert_int_equal(transport_start(n->t, "127.0.0.1", 0, err, sizeof err),
	                 0);
}

static void tnode_stop(struct tnode *n, uv_loop_t *loop)
{
	bool closed = false;
	transport_close(n->t, other_closed_cb, &closed);
	while (!closed) {
		uv_run(loop, UV_RUN_ONCE);
	}
	transport_free(n->t);
	tls_ctx_free(n->server);
	tls_ctx_free(n->client);
	memset(n, 0, sizeof *n);
}

/* Runs the loop until `s` is in the log of `n`. */
static void spin_for(uv_loop_t *loop, struct tnode *n, const char *s)
{
	uint64_t end = mono_ms() + GUARD_MS;
	while (strstr(n->log, s) == NULL) {
		uv_run(loop, UV_RUN_NOWAIT);
		assert_true(mono_ms() < end);
		usleep(1000);
	}
}

static void tls_ask(uv_loop_t *loop, struct tnode *n, uint16_t port,
                    uint64_t id)
{
	struct sockaddr_in sa;
	struct msg_join req = {0};
	struct join *j;
	uint64_t end = mono_ms() + GUARD_MS;

	uv_ip4_addr("127.0.0.1", port, &sa);
	req.version = MSG_VERSION;
	req.from = id;
	req.cluster = "test";
	req.cluster_len = 4;
	req.record = "internal=127.0.0.1:7007";
	req.record_len = strlen(req.record);
	n->join.done = false;
	assert_int_equal(join_start(&j, loop, (struct sockaddr *)&sa, &req,
	                            n->client, 5000, join_done, &n->join),
	                 0);
	while (!n->join.done) {
		uv_run(loop, UV_RUN_ONCE);
		assert_true(mono_ms() < end);
	}
}

static void test_tls(void **state)
{
	static struct tnode a, b, x;
	char dir[] = "/tmp/lodestone-tls-XXXXXX", path[600];
	uv_loop_t loop;
	uint8_t *big;
	uint64_t end;
	(void)state;

	assert_non_null(mkdtemp(dir));
	for (int k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "%s/%s", dir,
		         k == 0 ? "ca" : "ca2");
		char *argv[] = {"cert", "ca", "--out-dir", path, NULL};
		assert_int_equal(mkdir(path, 0700), 0);
		assert_int_equal(lodectl_cert_main(NULL, 4, argv), 0);
	}
	certs_make(dir, "ca", 1);
	certs_make(dir, "ca", 2);
	certs_make(dir, "ca", 7);
	certs_make(dir, "ca2", 2);
	assert_int_equal(uv_loop_init(&loop), 0);

	/* Nodes 1 and 2: connected over TLS, frames both ways. */
	tnode_ctx(&a, dir, "ca", 1);
	tnode_ctx(&b, dir, "ca", 2);
	tnode_start(&a, &loop, 1);
	tnode_start(&b, &loop, 2);
	assert_int_equal(
	    transport_add_peer(a.t, 2, "127.0.0.1", transport_port(b.t)), 0);
	assert_int_equal(
	    transport_add_peer(b.t, 1, "127.0.0.1", transport_port(a.t)), 0);
	end = mono_ms() + GUARD_MS;
	while (!transport_connected(a.t, 2) || !transport_connected(b.t, 1)) {
		uv_run(&loop, UV_RUN_NOWAIT);
		assert_true(mono_ms() < end);
		usleep(1000);
	}
	/* Both dialed: let the lower id's connection win before sending
	 * (a frame never moves to another connection). */
	for (uint64_t settle = mono_ms() + 500; mono_ms() < settle;) {
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_true(transport_connected(a.t, 2) && transport_connected(b.t, 1));
	big = malloc(BIG);
	assert_non_null(big);
	for (size_t i = 0; i < BIG; i++) {
		big[i] = (uint8_t)(i * 7);
	}
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(transport_send(a.t, 2, MSG_READ_CHECK, "x", 1),
		                 0);
		assert_int_equal(transport_send(b.t, 1, MSG_READ_CHECK, "y", 1),
		                 0);
	}
	assert_int_equal(transport_send(a.t, 2, MSG_READ_CHECK, big, BIG), 0);
	free(big);
	while (a.got < 1000 || b.got < 1000 || b.got_big != BIG) {
		uv_run(&loop, UV_RUN_NOWAIT);
		assert_true(mono_ms() < end);
		usleep(100);
	}

	/* A TLS join: node 7's certificate, as node 7 and as node 8. */
	tnode_ctx(&x, dir, "ca", 7);
	tls_ask(&loop, &x, transport_port(a.t), 7);
	assert_int_equal(x.join.status, MSG_HS_OK);
	assert_string_equal(x.join.text, "1=127.0.0.1:7001");
	tls_ask(&loop, &x, transport_port(a.t), 8);
	assert_int_equal(x.join.status, MSG_HS_IDENTITY);
	assert_non_null(strstr(x.join.text, "certificate names node 7"));
	tls_ctx_free(x.server);
	tls_ctx_free(x.client);
	memset(&x, 0, sizeof x);

	/* Node 2 again, with another CA's certificate: refused both ways,
	 * the reason on both sides. */
	tnode_stop(&b, &loop);
	a.log[0] = '\0';
	tnode_ctx(&b, dir, "ca2", 2);
	tnode_start(&b, &loop, 2);
	assert_int_equal(
	    transport_add_peer(a.t, 9, "127.0.0.1", transport_port(b.t)), 0);
	assert_int_equal(
	    transport_add_peer(b.t, 1, "127.0.0.1", transport_port(a.t)), 0);
	spin_for(&loop, &b, "server certificate not verified");
	spin_for(&loop, &a, "refused connection from 127.0.0.1");
	spin_for(&loop, &a, "TLS with node 9");
	assert_false(transport_connected(b.t, 1));
	assert_false(transport_connected(a.t, 9));
	tnode_stop(&b, &loop);

	/* Node 10, presenting node 2's certificate. */
	a.log[0] = '\0';
	tnode_ctx(&b, dir, "ca", 2);
	tnode_start(&b, &loop, 10);
	assert_int_equal(
	    transport_add_peer(a.t, 10, "127.0.0.1", transport_port(b.t)), 0);
	assert_int_equal(
	    transport_add_peer(b.t, 1, "127.0.0.1", transport_port(a.t)), 0);
	spin_for(&loop, &a, "the peer's certificate names node 2, not node 10");
	spin_for(&loop, &a,
	         "claims to be node 10 but its certificate names "
	         "node 2");
	spin_for(&loop, &b, "refused our connection");
	assert_false(transport_connected(a.t, 10));
	tnode_stop(&b, &loop);

	/* Node 1's certificate and CA replaced in place, as a reload does
	 * (tls_ctx_replace): a new connection must present and trust CA 2's,
	 * so node 7 with CA 1's certificate is refused and with CA 2's is
	 * admitted. */
	{
		static struct tnode fresh;
		certs_make(dir, "ca2", 1);
		certs_make(dir, "ca2", 7);
		tnode_ctx(&fresh, dir, "ca2", 1);
		tls_ctx_replace(a.server, fresh.server);
		tls_ctx_replace(a.client, fresh.client);
		tnode_ctx(&x, dir, "ca", 7);
		tls_ask(&loop, &x, transport_port(a.t), 7);
		assert_int_not_equal(x.join.status, MSG_HS_OK);
		assert_non_null(strstr(x.join.text, "not verified"));
		tls_ctx_free(x.server);
		tls_ctx_free(x.client);
		memset(&x, 0, sizeof x);
		tnode_ctx(&x, dir, "ca2", 7);
		tls_ask(&loop, &x, transport_port(a.t), 7);
		assert_int_equal(x.join.status, MSG_HS_OK);
		tls_ctx_free(x.server);
		tls_ctx_free(x.client);
		memset(&x, 0, sizeof x);
	}
	tnode_stop(&a, &loop);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	snprintf(path, sizeof path, "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replicate_and_forward),
	    cmocka_unit_test(test_large_entries),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_snapshot_catch_up),
	    cmocka_unit_test(test_bounded_queue),
	    cmocka_unit_test(test_join),
	    cmocka_unit_test(test_tls),
	};
	signal(SIGPIPE, SIG_IGN); /* as the node does */
	return cmocka_run_group_tests_name("raft_transport", tests, NULL, NULL);
}
