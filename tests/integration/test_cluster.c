/* Integration: three real lodestone processes on loopback, 8 shards, every
 * shard replicated on the three (docs/cluster.md).
 *
 *  - placement: /v1/cluster on every node shows every group with a leader
 *    and the voters placement gives; leaderships move to the preferred
 *    replica; peers and their client addresses are known everywhere;
 *  - 20 000 list appends (FSNP RPUSH) through every node, while the node
 *    leading the most groups is killed with SIGKILL and restarted three
 *    times: every group has a leader again within 5 s of a kill; at the
 *    end every replica holds the same data (hash of each group's range)
 *    and every acknowledged append is in its list exactly once, in order;
 *    a full-cluster restart keeps it all;
 *  - a follower kept down while the others compact their logs catches up
 *    through a snapshot and a state transfer;
 *  - a node started with another cluster id is refused (with the reason in
 *    the logs), and a peer that vanishes in the middle of a handshake
 *    wedges nobody;
 *  - with internal mutual TLS (certificates made by `lodectl cert`) the
 *    cluster elects, replicates appends sent through every node and
 *    survives a restart; a node with a certificate from another CA, a
 *    plaintext node (joining, and a member restarted without TLS) and a
 *    node presenting another node's certificate are refused, with the
 *    reason logged on both sides, and the cluster keeps working.
 * Outcomes are checked; times only bound the waits (and the 5 s leader
 * recovery the brief asks for). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "wire/buf.h"
#include "wire/fsnp_frame.h"
#include "wire/fsnp_slot.h"
#include "wire/fsnp_value.h"

#define NODES 3
#define SHARDS 8
#define KEYS_PER_GROUP 4
#define KEYS (SHARDS * KEYS_PER_GROUP)
#define OP_RPUSH 0x0121
#define OP_LRANGE 0x0124
#define LEADER_RECOVERY_MS 5000

static const char *const base_args[] = {"--shards", "8", NULL};

/* ---- admin view ---- */

static json_t *cluster_view(struct harness_cluster *c, unsigned i)
{
	static char body[65536];
	int st;
	json_error_t e;
	if (c->nodes[i].pid <= 0 ||
	    harness_http(c->nodes[i].admin, "GET", "/v1/cluster", NULL, &st,
	                 body, sizeof body) != 0 ||
	    st != 200) {
		return NULL;
	}
	return json_loads(body, 0, &e);
}

/* Leader of every group as node i sees it (0 = none); returns how many
 * groups have a live leader. */
static unsigned leaders(struct harness_cluster *c, unsigned i,
                        uint64_t lead[SHARDS + 1])
{
	json_t *v = cluster_view(c, i), *groups, *g;
	unsigned n = 0;
	size_t k;
	memset(lead, 0, sizeof(uint64_t) * (SHARDS + 1));
	if (v == NULL) {
		return 0;
	}
	groups = json_object_get(v, "groups");
	json_array_foreach(groups, k, g)
	{
		json_int_t id = json_integer_value(json_object_get(g, "id"));
		json_t *l = json_object_get(g, "leader");
		if (id >= 0 && id <= SHARDS && json_is_integer(l)) {
			uint64_t lid = (uint64_t)json_integer_value(l);
			if (lid >= 1 && lid <= NODES &&
			    c->nodes[lid - 1].pid > 0) {
				lead[id] = lid;
				n++;
			}
		}
	}
	json_decref(v);
	return n;
}

/* Every group has a live leader, agreed by every live node. */
static bool all_led(struct harness_cluster *c, uint64_t lead[SHARDS + 1])
{
	uint64_t mine[SHARDS + 1];
	bool first = true;
	for (unsigned i = 0; i < NODES; i++) {
		if (c->nodes[i].pid <= 0) {
			continue;
		}
		if (leaders(c, i, mine) != SHARDS + 1) {
			return false;
		}
		if (!first && memcmp(mine, lead, sizeof mine) != 0) {
			return false;
		}
		memcpy(lead, mine, sizeof mine);
		first = false;
	}
	return !first;
}

/* For failures: what every live node sees. */
static void dump_views(struct harness_cluster *c)
{
	for (unsigned i = 0; i < NODES; i++) {
		json_t *v = cluster_view(c, i);
		char *s;
		if (v == NULL) {
			fprintf(stderr, "node %u: no view\n", i + 1);
			continue;
		}
		s = json_dumps(v, JSON_COMPACT);
		fprintf(stderr, "node %u: %s\n", i + 1, s);
		free(s);
		json_decref(v);
	}
}

static uint64_t wait_all_led(struct harness_cluster *c, unsigned timeout_ms)
{
	uint64_t lead[SHARDS + 1];
	uint64_t start = harness_mono_ms();
	while (!all_led(c, lead)) {
		if (harness_mono_ms() - start > timeout_ms) {
			for (unsigned i = 0; i < NODES; i++) {
				harness_node_dump_log(c, i);
			}
			fail_msg("groups without a leader after %u ms",
			         timeout_ms);
		}
		harness_nap(50);
	}
	return harness_mono_ms() - start;
}

struct ghash {
	char hash[32];
	uint64_t keys;
	uint64_t applied;
};

static int group_hash(struct harness_cluster *c, unsigned i, unsigned g,
                      struct ghash *out)
{
	char body[512], path[64];
	int st;
	json_t *v;
	json_error_t e;
	snprintf(path, sizeof path, "/v1/debug/group/%u/hash", g);
	if (harness_http(c->nodes[i].admin, "GET", path, NULL, &st, body,
	                 sizeof body) != 0 ||
	    st != 200 || (v = json_loads(body, 0, &e)) == NULL) {
		return -1;
	}
	snprintf(out->hash, sizeof out->hash, "%s",
	         json_string_value(json_object_get(v, "hash")));
	out->keys = (uint64_t)json_integer_value(json_object_get(v, "keys"));
	out->applied =
	    (uint64_t)json_integer_value(json_object_get(v, "applied_index"));
	json_decref(v);
	return 0;
}

/* Waits until every replica of every data group holds the same data;
 * fills `out` (may be NULL) with the agreed hashes. */
static void converge(struct harness_cluster *c, struct ghash out[SHARDS + 1])
{
	uint64_t end = harness_mono_ms() + 60000;
	for (unsigned g = 1; g <= SHARDS; g++) {
		for (;;) {
			struct ghash h[NODES];
			bool same = true;
			for (unsigned i = 0; i < NODES; i++) {
				if (group_hash(c, i, g, &h[i]) != 0) {
					same = false;
					break;
				}
				if (i > 0 &&
				    (strcmp(h[i].hash, h[0].hash) != 0 ||
				     h[i].applied != h[0].applied)) {
					same = false;
				}
			}
			if (same) {
				if (out != NULL) {
					out[g] = h[0];
				}
				break;
			}
			if (harness_mono_ms() > end) {
				fail_msg("group %u: replicas differ", g);
			}
			harness_nap(100);
		}
	}
}

/* ---- a small FSNP client: one connection per node, pipelined ---- */

struct fconn {
	int fd;
	uint8_t *in;
	size_t in_len;
	size_t in_cap;
};

struct writer {
	char key[32];
	unsigned group;
	unsigned total;
	unsigned next; /* next value to write */
	bool busy;
	unsigned conn;   /* where the request in flight went */
	uint8_t *status; /* per value: 0 unsent, 1 acked, 2 unknown */
};

struct load {
	struct harness_cluster *c;
	struct fconn conn[NODES];
	struct writer w[KEYS];
	unsigned acked;
	unsigned unknown;
	unsigned done;
	unsigned sent;
	unsigned limit; /* sends stop here until raised */
};

static int fsnp_connect(uint16_t port)
{
	struct sockaddr_in sa = {0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0) {
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int fsnp_send(int fd, uint32_t lane, uint16_t op, uint64_t id,
                     const struct wbuf *body)
{
	struct fsnp_header h = {0};
	uint8_t hdr[FSNP_HEADER_SIZE];
	size_t off = 0;
	h.dir = FSNP_DIR_REQUEST;
	h.lane_id = lane;
	h.opcode = op;
	h.request_id = id;
	h.body_len = (uint32_t)body->len;
	fsnp_frame_encode_header(&h, hdr);
	while (off < sizeof hdr) {
		ssize_t r = send(fd, hdr + off, sizeof hdr - off, MSG_NOSIGNAL);
		if (r <= 0) {
			return -1;
		}
		off += (size_t)r;
	}
	off = 0;
	while (off < body->len) {
		ssize_t r =
		    send(fd, body->data + off, body->len - off, MSG_NOSIGNAL);
		if (r <= 0) {
			return -1;
		}
		off += (size_t)r;
	}
	return 0;
}

static void conn_drop(struct load *l, unsigned i)
{
	struct fconn *f = &l->conn[i];
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
	}
	f->in_len = 0;
	/* What was in flight there may or may not have happened. */
	for (unsigned k = 0; k < KEYS; k++) {
		struct writer *w = &l->w[k];
		if (w->busy && w->conn == i) {
			w->status[w->next - 1] = 2;
			w->busy = false;
			l->unknown++;
			l->done++;
		}
	}
}

static void conn_open(struct load *l, unsigned i)
{
	struct fconn *f = &l->conn[i];
	if (f->fd < 0 && l->c->nodes[i].pid > 0) {
		f->fd = fsnp_connect(l->c->nodes[i].fsnp);
	}
}

static void send_next(struct load *l, unsigned k)
{
	struct writer *w = &l->w[k];
	struct fsnp_writer fw;
	struct wbuf body;
	char val[32];
	unsigned tries;

	if (w->busy || w->next >= w->total || l->sent >= l->limit) {
		return;
	}
	for (tries = 0; tries < NODES; tries++) {
		unsigned i = (w->next + k + tries) % NODES;
		if (l->conn[i].fd >= 0) {
			w->conn = i;
			break;
		}
	}
	if (tries == NODES) {
		return;
	}
	snprintf(val, sizeof val, "%s-%06u", w->key, w->next);
	wbuf_init(&body);
	fsnp_w_init(&fw, &body);
	fsnp_w_map_begin(&fw);
	fsnp_w_key(&fw, "key");
	fsnp_w_str(&fw, w->key);
	fsnp_w_key(&fw, "values");
	fsnp_w_array_begin(&fw);
	fsnp_w_str(&fw, val);
	fsnp_w_array_end(&fw);
	fsnp_w_map_end(&fw);
	assert_int_equal(fsnp_w_finish(&fw), 0);
	w->busy = true;
	w->next++;
	l->sent++;
	if (fsnp_send(l->conn[w->conn].fd, k + 1, OP_RPUSH,
	              ((uint64_t)k << 32) | w->next, &body) != 0) {
		conn_drop(l, w->conn);
	}
	wbuf_free(&body);
}

static void on_reply(struct load *l, const struct fsnp_frame *fr)
{
	unsigned k = (unsigned)(fr->h.request_id >> 32);
	unsigned seq = (unsigned)fr->h.request_id;
	uint16_t status = 0;
	struct fsnp_val v;
	struct writer *w;

	if (k >= KEYS) {
		return;
	}
	w = &l->w[k];
	if (!w->busy || seq != w->next) {
		return;
	}
	w->busy = false;
	l->done++;
	if (fsnp_value_decode_response(fr->body, fr->h.body_len, NULL, &status,
	                               &v) == 0 &&
	    status == FSNP_STATUS_OK) {
		w->status[seq - 1] = 1;
		l->acked++;
	} else {
		w->status[seq - 1] = 2; /* not known to be applied or not */
		l->unknown++;
	}
}

static void conn_read(struct load *l, unsigned i)
{
	struct fconn *f = &l->conn[i];
	ssize_t r;
	size_t off = 0;

	if (f->in_cap - f->in_len < 65536) {
		f->in_cap = f->in_cap ? f->in_cap * 2 : 131072;
		f->in = realloc(f->in, f->in_cap);
	}
	r = recv(f->fd, f->in + f->in_len, f->in_cap - f->in_len, 0);
	if (r <= 0) {
		conn_drop(l, i);
		return;
	}
	f->in_len += (size_t)r;
	for (;;) {
		struct fsnp_frame fr;
		size_t flen = 0;
		if (fsnp_frame_decode(f->in + off, f->in_len - off,
		                      FSNP_DIR_RESPONSE, 64u << 20, &fr,
		                      &flen) != 0) {
			conn_drop(l, i);
			return;
		}
		if (flen == 0) {
			break;
		}
		if (fr.h.lane_id != 0) {
			on_reply(l, &fr);
		}
		off += flen;
	}
	memmove(f->in, f->in + off, f->in_len - off);
	f->in_len -= off;
}

/* One turn: sends what can go, reads what came. */
static void load_turn(struct load *l, int timeout_ms)
{
	struct pollfd p[NODES];
	unsigned idx[NODES], n = 0;

	for (unsigned k = 0; k < KEYS; k++) {
		send_next(l, k);
	}
	for (unsigned i = 0; i < NODES; i++) {
		if (l->conn[i].fd >= 0) {
			p[n].fd = l->conn[i].fd;
			p[n].events = POLLIN;
			p[n].revents = 0;
			idx[n++] = i;
		}
	}
	if (poll(p, n, timeout_ms) <= 0) {
		return;
	}
	for (unsigned j = 0; j < n; j++) {
		if (p[j].revents != 0 && l->conn[idx[j]].fd == p[j].fd) {
			conn_read(l, idx[j]);
		}
	}
}

/* Keys spread over the groups: KEYS_PER_GROUP per data group. */
static void make_keys(struct load *l, unsigned per_key)
{
	unsigned count[SHARDS + 1] = {0}, k = 0;
	for (unsigned i = 0; k < KEYS; i++) {
		char key[32];
		unsigned g;
		snprintf(key, sizeof key, "list%u", i);
		g = 1 + fsnp_slot_shard(
		            fsnp_slot_of((const uint8_t *)key, strlen(key)),
		            SHARDS);
		if (count[g] == KEYS_PER_GROUP) {
			continue;
		}
		count[g]++;
		snprintf(l->w[k].key, sizeof l->w[k].key, "%s", key);
		l->w[k].group = g;
		l->w[k].total = per_key;
		l->w[k].status = calloc(per_key, 1);
		k++;
	}
}

static unsigned load_total(const struct load *l);

static void load_init(struct load *l, struct harness_cluster *c,
                      unsigned per_key)
{
	memset(l, 0, sizeof *l);
	l->c = c;
	for (unsigned i = 0; i < NODES; i++) {
		l->conn[i].fd = -1;
		conn_open(l, i);
	}
	make_keys(l, per_key);
	l->limit = load_total(l);
}

static void load_free(struct load *l)
{
	for (unsigned i = 0; i < NODES; i++) {
		if (l->conn[i].fd >= 0) {
			close(l->conn[i].fd);
		}
		free(l->conn[i].in);
	}
	for (unsigned k = 0; k < KEYS; k++) {
		free(l->w[k].status);
	}
}

static unsigned load_total(const struct load *l)
{
	unsigned t = 0;
	for (unsigned k = 0; k < KEYS; k++) {
		t += l->w[k].total;
	}
	return t;
}

static void run_load(struct load *l)
{
	uint64_t end = harness_mono_ms() + 180000;
	while (l->done < load_total(l)) {
		for (unsigned i = 0; i < NODES; i++) {
			conn_open(l, i);
		}
		load_turn(l, 20);
		assert_true(harness_mono_ms() < end);
	}
}

/* LRANGE key 0 -1 through node i; checks the list against what was
 * acknowledged: every acked value exactly once, acked values in order, no
 * value that was never sent. */
static void check_list(struct load *l, unsigned i, unsigned k)
{
	struct writer *w = &l->w[k];
	struct fsnp_writer fw;
	struct wbuf body;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	struct fsnp_frame fr;
	size_t flen = 0;
	uint16_t status;
	struct fsnp_val v, item;
	struct fsnp_iter it;
	unsigned last = 0, found = 0;
	uint8_t *seen = calloc(w->total + 1, 1);
	int fd = fsnp_connect(l->c->nodes[i].fsnp);
	uint64_t end = harness_mono_ms() + 20000;

	assert_true(fd >= 0);
	wbuf_init(&body);
	fsnp_w_init(&fw, &body);
	fsnp_w_map_begin(&fw);
	fsnp_w_key(&fw, "key");
	fsnp_w_str(&fw, w->key);
	fsnp_w_key(&fw, "start");
	fsnp_w_i64(&fw, 0);
	fsnp_w_key(&fw, "stop");
	fsnp_w_i64(&fw, -1);
	fsnp_w_map_end(&fw);
	assert_int_equal(fsnp_w_finish(&fw), 0);
	assert_int_equal(fsnp_send(fd, 1, OP_LRANGE, 7, &body), 0);
	wbuf_free(&body);
	for (;;) {
		ssize_t r;
		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 131072;
			buf = realloc(buf, cap);
		}
		r = recv(fd, buf + len, cap - len, 0);
		assert_true(r > 0);
		len += (size_t)r;
		assert_int_equal(fsnp_frame_decode(buf, len, FSNP_DIR_RESPONSE,
		                                   64u << 20, &fr, &flen),
		                 0);
		if (flen > 0) {
			break;
		}
		assert_true(harness_mono_ms() < end);
	}
	close(fd);
	assert_int_equal(fsnp_value_decode_response(fr.body, fr.h.body_len,
	                                            NULL, &status, &v),
	                 0);
	assert_int_equal(status, FSNP_STATUS_OK);
	assert_int_equal(v.tag, FSNP_ARRAY);
	fsnp_iter_init(&it, &v);
	while (fsnp_iter_next(&it, NULL, &item)) {
		char s[64];
		const char *dash;
		unsigned seq;
		assert_int_equal(item.tag, FSNP_BIN);
		assert_true(item.as.bin.len < sizeof s);
		memcpy(s, item.as.bin.ptr, item.as.bin.len);
		s[item.as.bin.len] = '\0';
		dash = strrchr(s, '-');
		assert_non_null(dash);
		assert_int_equal((size_t)(dash - s), strlen(w->key));
		assert_memory_equal(s, w->key, strlen(w->key));
		seq = (unsigned)strtoul(dash + 1, NULL, 10);
		assert_true(seq < w->total);
		assert_int_not_equal(w->status[seq], 0); /* was sent */
		assert_int_equal(seen[seq], 0);          /* once */
		seen[seq] = 1;
		if (w->status[seq] == 1) {
			assert_true(seq >= last); /* acked ones in order */
			last = seq;
		}
		found++;
	}
	for (unsigned s = 0; s < w->total; s++) {
		if (w->status[s] == 1) {
			assert_int_equal(seen[s], 1); /* no acked write lost */
		}
	}
	free(seen);
	free(buf);
}

static void check_lists(struct load *l, unsigned i)
{
	for (unsigned k = 0; k < KEYS; k++) {
		check_list(l, i, k);
	}
}

/* ---- the tests ---- */

static void start3(struct harness_cluster *c, const char *const extra[])
{
	assert_int_equal(harness_cluster_start(c, NODES, extra, true), 0);
	wait_all_led(c, 30000);
}

static void test_placement_and_leaders(void **state)
{
	struct harness_cluster c;
	uint64_t end;
	(void)state;

	start3(&c, base_args);
	/* Leaderships settle on each group's preferred replica. */
	end = harness_mono_ms() + 40000;
	for (;;) {
		bool settled = true;
		unsigned led[NODES + 1] = {0};
		for (unsigned i = 0; i < NODES && settled; i++) {
			json_t *v = cluster_view(&c, i), *g, *p;
			size_t k;
			assert_non_null(v);
			assert_int_equal(
			    json_array_size(json_object_get(v, "groups")),
			    SHARDS + 1);
			/* Every peer connected, with its client addresses. */
			json_array_foreach(json_object_get(v, "peers"), k, p)
			{
				settled =
				    settled &&
				    json_is_true(
				        json_object_get(p, "connected")) &&
				    json_is_string(json_object_get(p, "fsnp"));
			}
			json_array_foreach(json_object_get(v, "groups"), k, g)
			{
				json_t *voters = json_object_get(g, "voters");
				json_t *l = json_object_get(g, "leader");
				assert_int_equal(json_array_size(voters),
				                 NODES);
				assert_true(json_is_true(
				    json_object_get(g, "replica")));
				settled = settled && json_is_integer(l) &&
				          json_integer_value(l) ==
				              json_integer_value(
				                  json_array_get(voters, 0));
				if (i == 0 && json_is_integer(l)) {
					led[json_integer_value(l)]++;
				}
			}
			json_decref(v);
		}
		if (settled) {
			/* Spread: every node leads some group. */
			for (unsigned n = 1; n <= NODES; n++) {
				assert_true(led[n] > 0);
			}
			break;
		}
		assert_true(harness_mono_ms() < end);
		harness_nap(200);
	}
	/* Every node applied the meta group's node records through its data
	 * writer, whose counters the admin view shows. */
	for (unsigned i = 0; i < NODES; i++) {
		json_t *v = cluster_view(&c, i);
		json_t *w = json_object_get(v, "data_writer");
		assert_non_null(w);
		assert_true(json_integer_value(json_object_get(w, "batches")) >
		            0);
		assert_true(json_is_integer(json_object_get(w, "drains")));
		/* The Raft log's own WAL: the current segment, no failures. */
		json_t *wal =
		    json_object_get(json_object_get(v, "raft_io"), "wal");
		assert_non_null(wal);
		assert_true(
		    json_integer_value(json_object_get(wal, "segments")) >= 1);
		assert_int_equal(
		    json_integer_value(json_object_get(wal, "release_errors")),
		    0);
		json_decref(v);
	}
	harness_cluster_stop(&c);
}

/* The node leading the most groups in `lead` (what every live node agreed
 * on a moment ago: asking again could catch a hand-over under way). */
static unsigned busiest(const uint64_t lead[SHARDS + 1])
{
	unsigned count[NODES + 1] = {0}, best = 0;
	for (unsigned g = 0; g <= SHARDS; g++) {
		count[lead[g]]++;
	}
	for (unsigned n = 1; n <= NODES; n++) {
		if (count[n] > count[best]) {
			best = n;
		}
	}
	return best - 1;
}

static void test_writes_with_kills(void **state)
{
	struct harness_cluster c;
	struct load l;
	struct ghash before[SHARDS + 1], after[SHARDS + 1];
	unsigned kills = 0;
	const unsigned at[] = {4000, 9000, 14000};
	(void)state;

	start3(&c, base_args);
	load_init(&l, &c, 20000 / KEYS);
	assert_int_equal(load_total(&l), 20000 - 20000 % KEYS);
	/* Writes run on during each failover, but not past the next kill. */
	l.limit = at[0];
	while (l.done < load_total(&l)) {
		for (unsigned i = 0; i < NODES; i++) {
			conn_open(&l, i);
		}
		load_turn(&l, 20);
		if (kills < 3 && l.done >= at[kills]) {
			uint64_t lead[SHARDS + 1], t0, took;
			unsigned victim;
			/* Past any election or hand-over still running. */
			t0 = harness_mono_ms();
			while (!all_led(&c, lead)) {
				load_turn(&l, 20);
				assert_true(harness_mono_ms() - t0 < 30000);
			}
			victim = busiest(lead);
			assert_int_equal(
			    harness_node_signal(&c, victim, SIGKILL, NULL), 0);
			conn_drop(&l, victim);
			t0 = harness_mono_ms();
			/* Writes go on through the others meanwhile. */
			for (;;) {
				load_turn(&l, 20);
				if (all_led(&c, lead)) {
					break;
				}
				if (harness_mono_ms() - t0 >= 30000) {
					dump_views(&c);
					fail_msg(
					    "kill %u: groups without a leader",
					    kills + 1);
				}
			}
			took = harness_mono_ms() - t0;
			fprintf(stderr,
			        "kill %u (node %u): every group led again "
			        "after %llu ms\n",
			        kills + 1, victim + 1,
			        (unsigned long long)took);
			assert_true(took <= LEADER_RECOVERY_MS);
			assert_int_equal(harness_node_start(&c, victim), 0);
			assert_int_equal(
			    harness_node_wait_healthy(&c, victim, 15000), 0);
			kills++;
			l.limit = kills < 3 ? at[kills] : load_total(&l);
		}
	}
	fprintf(stderr, "writes: %u acknowledged, %u unknown\n", l.acked,
	        l.unknown);
	assert_int_equal(kills, 3);
	assert_true(l.acked > load_total(&l) * 9 / 10);
	converge(&c, before);
	for (unsigned i = 0; i < NODES; i++) {
		check_lists(&l, i);
	}

	/* A full-cluster restart keeps everything. */
	for (unsigned i = 0; i < NODES; i++) {
		harness_node_signal(&c, i, SIGTERM, NULL);
	}
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(harness_node_start(&c, i), 0);
	}
	for (unsigned i = 0; i < NODES; i++) {
		assert_int_equal(harness_node_wait_healthy(&c, i, 15000), 0);
	}
	wait_all_led(&c, 30000);
	converge(&c, after);
	for (unsigned g = 1; g <= SHARDS; g++) {
		assert_string_equal(after[g].hash, before[g].hash);
		assert_int_equal(after[g].keys, before[g].keys);
	}
	check_lists(&l, 2);
	load_free(&l);
	harness_cluster_stop(&c);
}

static uint64_t transfer_fetches(struct harness_cluster *c, unsigned i)
{
	json_t *v = cluster_view(c, i);
	uint64_t n;
	assert_non_null(v);
	n = (uint64_t)json_integer_value(
	    json_object_get(json_object_get(v, "transfer"), "fetches"));
	json_decref(v);
	return n;
}

static void test_snapshot_catch_up(void **state)
{
	struct harness_cluster c;
	struct load l;
	const char *const extra[] = {"--shards",
	                             "8",
	                             "--snapshot-threshold",
	                             "64",
	                             "--snapshot-trailing",
	                             "16",
	                             NULL};
	(void)state;

	start3(&c, extra);
	/* Node 3 is down while the others write and compact. */
	assert_int_equal(harness_node_signal(&c, 2, SIGKILL, NULL), 0);
	wait_all_led(&c, 30000);
	load_init(&l, &c, 40);
	run_load(&l);
	assert_int_equal(l.unknown, 0);
	assert_int_equal(harness_node_start(&c, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 2, 15000), 0);
	converge(&c, NULL);
	assert_true(transfer_fetches(&c, 2) > 0);
	check_lists(&l, 2);
	load_free(&l);
	harness_cluster_stop(&c);
}

static bool log_has(struct harness_cluster *c, unsigned i, const char *s)
{
	FILE *f = fopen(c->nodes[i].log_path, "r");
	char *buf;
	size_t n = 0, cap = 1 << 16;
	bool found;
	if (f == NULL) {
		return false;
	}
	buf = malloc(cap);
	assert_non_null(buf);
	for (;;) {
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0) {
			break;
		}
		if (cap - n < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	buf[n] = '\0';
	fclose(f);
	found = strstr(buf, s) != NULL;
	free(buf);
	return found;
}

static bool peer_connected(struct harness_cluster *c, unsigned i, unsigned id)
{
	json_t *v = cluster_view(c, i), *p;
	size_t k;
	bool up = false;
	if (v == NULL) {
		return false;
	}
	json_array_foreach(json_object_get(v, "peers"), k, p)
	{
		if (json_integer_value(json_object_get(p, "id")) == id) {
			up = json_is_true(json_object_get(p, "connected"));
		}
	}
	json_decref(v);
	return up;
}

static void test_refusals(void **state)
{
	struct harness_cluster c;
	struct load l;
	uint64_t end;
	int fd;
	(void)state;

	start3(&c, base_args);
	/* Node 3 comes back believing it is in another cluster. */
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);
	c.extra[c.n_extra++] = "--cluster-id";
	c.extra[c.n_extra++] = "other";
	assert_int_equal(harness_node_start(&c, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 2, 15000), 0);
	end = harness_mono_ms() + 20000;
	while (!log_has(&c, 0, "is in cluster 'other', not 'lodestone'") ||
	       !log_has(&c, 2, "refused our connection")) {
		assert_true(harness_mono_ms() < end);
		harness_nap(100);
	}
	assert_false(peer_connected(&c, 0, 3));
	assert_false(peer_connected(&c, 1, 3));

	/* A peer that vanishes in the middle of its handshake. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	{
		struct sockaddr_in sa = {0};
		const uint8_t partial[] = {0, 0, 0, 40, 1, 'L', 'S'};
		sa.sin_family = AF_INET;
		sa.sin_port = htons(c.nodes[0].internal);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa),
		                 0);
		assert_int_equal(write(fd, partial, sizeof partial),
		                 (ssize_t)sizeof partial);
		close(fd);
	}

	/* Nodes 1 and 2 still serve every shard. */
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);
	wait_all_led(&c, 30000);
	load_init(&l, &c, 5);
	run_load(&l);
	assert_int_equal(l.acked, load_total(&l));
	load_free(&l);

	/* Back with the right cluster id, it rejoins. */
	c.n_extra -= 2;
	assert_int_equal(harness_node_start(&c, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 2, 15000), 0);
	end = harness_mono_ms() + 20000;
	while (!peer_connected(&c, 0, 3)) {
		assert_true(harness_mono_ms() < end);
		harness_nap(100);
	}
	converge(&c, NULL);
	harness_cluster_stop(&c);
}

/* Whether node i knows node `id` as a member (joining or not). */
static bool has_member(struct harness_cluster *c, unsigned i, unsigned id)
{
	json_t *v = cluster_view(c, i), *p;
	size_t k;
	bool found = false;
	assert_non_null(v);
	json_array_foreach(json_object_get(v, "peers"), k, p)
	{
		if (json_integer_value(json_object_get(p, "id")) ==
		    (json_int_t)id) {
			found = true;
		}
	}
	json_decref(v);
	return found;
}

/* Runs lodectl with `args` (NULL-terminated); its exit status. */
static int lodectl(const char *const args[])
{
	const char *argv[16];
	char out[4096];
	unsigned a = 0;
	argv[a++] = LS_ABS_BUILDDIR "/lodectl";
	for (unsigned k = 0; args[k] != NULL && a < 15; k++) {
		argv[a++] = args[k];
	}
	argv[a] = NULL;
	return harness_run(argv, out, sizeof out);
}

/* Waits up to 20 s for `s` in node i's log. */
static void wait_log(struct harness_cluster *c, unsigned i, const char *s)
{
	uint64_t end = harness_mono_ms() + 20000;
	while (!log_has(c, i, s)) {
		if (harness_mono_ms() >= end) {
			harness_node_dump_log(c, i);
			fail_msg("node %u never logged '%s'", i + 1, s);
		}
		harness_nap(100);
	}
}

static void test_mtls(void **state)
{
	static char dir[256], ca[300], ca2[300], certs[300], certs2[300];
	static char cert[400], key[400], cafile[400];
	static char cert2[400], key2[400], cafile2[400];
	struct harness_cluster c;
	struct load l;
	const char *tmp = getenv("TMPDIR");
	unsigned i4;
	(void)state;

	snprintf(dir, sizeof dir, "%s/lodestone-mtls-XXXXXX",
	         tmp != NULL ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(ca, sizeof ca, "%s/ca", dir);
	snprintf(ca2, sizeof ca2, "%s/ca2", dir);
	snprintf(certs, sizeof certs, "%s/certs", dir);
	snprintf(certs2, sizeof certs2, "%s/certs2", dir);
	assert_int_equal(mkdir(ca, 0700), 0);
	assert_int_equal(mkdir(ca2, 0700), 0);
	assert_int_equal(mkdir(certs, 0700), 0);
	assert_int_equal(mkdir(certs2, 0700), 0);
	assert_int_equal(
	    lodectl((const char *[]){"cert", "ca", "--out-dir", ca, NULL}), 0);
	assert_int_equal(
	    lodectl((const char *[]){"cert", "ca", "--out-dir", ca2, NULL}), 0);
	for (unsigned id = 1; id <= NODES; id++) {
		char n[8];
		snprintf(n, sizeof n, "%u", id);
		assert_int_equal(
		    lodectl((const char *[]){"cert", "node", n, "--ca-dir", ca,
		                             "--out-dir", certs, "--host",
		                             "127.0.0.1", NULL}),
		    0);
	}
	/* Node 4's certificate comes from another CA. */
	assert_int_equal(
	    lodectl((const char *[]){"cert", "node", "4", "--ca-dir", ca2,
	                             "--out-dir", certs2, NULL}),
	    0);
	snprintf(cert, sizeof cert, "%s/node-{id}.crt", certs);
	snprintf(key, sizeof key, "%s/node-{id}.key", certs);
	snprintf(cafile, sizeof cafile, "%s/ca.crt", ca);
	{
		const char *args[] = {"--shards",
		                      "8",
		                      "--internal-tls-cert",
		                      cert,
		                      "--internal-tls-key",
		                      key,
		                      "--internal-tls-ca",
		                      cafile,
		                      NULL};
		start3(&c, args);
	}
	assert_true(log_has(&c, 0, "TLSv1.3)"));

	/* Appends through every node (followers forward them). */
	load_init(&l, &c, 5);
	run_load(&l);
	assert_int_equal(l.acked, load_total(&l));
	/* A restart: node 2 comes back over TLS and catches up. */
	assert_int_equal(harness_node_signal(&c, 1, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&c, 1), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 1, 15000), 0);
	wait_all_led(&c, 30000);
	converge(&c, NULL);
	for (unsigned i = 0; i < NODES; i++) {
		check_lists(&l, i);
	}
	load_free(&l);

	/* A node whose certificate (and CA) are another CA's, joining
	 * through node 1: both sides say why, it never joins. */
	snprintf(cert2, sizeof cert2, "%s/node-4.crt", certs2);
	snprintf(key2, sizeof key2, "%s/node-4.key", certs2);
	snprintf(cafile2, sizeof cafile2, "%s/ca.crt", ca2);
	c.extra[3] = cert2;
	c.extra[5] = key2;
	c.extra[7] = cafile2;
	i4 = (unsigned)harness_node_join(&c, 0);
	assert_int_equal(i4, 3);
	wait_log(&c, 0, "refused connection from 127.0.0.1");
	wait_log(&c, 3, "server certificate not verified");
	assert_int_equal(harness_node_signal(&c, 3, SIGKILL, NULL), 0);
	assert_false(has_member(&c, 0, 4));

	/* A plaintext node (no internal TLS) is refused too. */
	c.n_extra = 2;
	assert_int_equal(harness_node_start(&c, 3), 0);
	wait_log(&c, 0, "wrong version number");
	wait_log(&c, 3, "join through");
	assert_int_equal(harness_node_signal(&c, 3, SIGKILL, NULL), 0);
	c.n = NODES;

	/* Node 3 restarted without internal TLS: refused both ways. */
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);
	assert_int_equal(harness_node_start(&c, 2), 0);
	wait_log(&c, 2, "does it run internal TLS?");
	wait_log(&c, 2, "not a lodestone node handshake");
	wait_log(&c, 0, "TLS with node 3");
	assert_false(peer_connected(&c, 0, 3));
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);

	/* Node 3 presenting node 2's certificate. */
	c.n_extra = 8;
	c.extra[3] = cert;
	c.extra[5] = key;
	c.extra[7] = cafile;
	snprintf(cert2, sizeof cert2, "%s/node-2.crt", certs);
	snprintf(key2, sizeof key2, "%s/node-2.key", certs);
	c.extra[3] = cert2;
	c.extra[5] = key2;
	assert_int_equal(harness_node_start(&c, 2), 0);
	wait_log(&c, 0,
	         "claims to be node 3 but its certificate names "
	         "node 2");
	wait_log(&c, 0, "certificate names node 2, not node 3");
	wait_log(&c, 2, "refused our connection");
	assert_false(peer_connected(&c, 0, 3));
	assert_false(peer_connected(&c, 1, 3));
	assert_int_equal(harness_node_signal(&c, 2, SIGTERM, NULL), 0);

	/* Nodes 1 and 2 keep serving every shard; node 3 with its own
	 * certificate is back. */
	wait_all_led(&c, 30000);
	load_init(&l, &c, 2);
	run_load(&l);
	assert_int_equal(l.acked, load_total(&l));
	load_free(&l);
	c.extra[3] = cert;
	c.extra[5] = key;
	assert_int_equal(harness_node_start(&c, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&c, 2, 15000), 0);
	wait_all_led(&c, 30000);
	converge(&c, NULL);
	harness_cluster_stop(&c);
	{
		char rm[400];
		snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
		assert_int_equal(system(rm), 0);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_placement_and_leaders),
	    cmocka_unit_test(test_writes_with_kills),
	    cmocka_unit_test(test_snapshot_catch_up),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_mtls),
	};
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]); /* one test by name */
	}
	return cmocka_run_group_tests_name("cluster", tests, NULL, NULL);
}
