/* Integration: live membership under FSNP writes (docs/operations.md).
 *
 * Three nodes bootstrapped with --peers, 6 shards, small snapshots (new
 * replicas catch up through snapshots and state transfer). While a writer
 * thread SETs keys through the live nodes:
 *  - nodes 4 and 5 join with --join (one each through a different member)
 *    and become active; every group reaches its target; a node a group
 *    moved off holds nothing of it any more (its key range deleted);
 *  - node 1 is removed with `lodectl cluster remove 1` (drained first): it
 *    logs that it was removed and exits 0;
 *  - node 3 is killed (SIGKILL), node 6 joins, `lodectl cluster replace 3
 *    --with 6` moves exactly node 3's replicas there.
 * Then: every acknowledged write reads back its value; every group has 3
 * voters, all on active nodes, and no other member; every replica of a
 * group hashes the same (/v1/debug/group/G/hash); a group's leadership
 * moves where `lodectl cluster transfer-leader` asks, through a node that
 * does not lead it. A rolling restart of 4 nodes moves no replica. Every
 * wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/integration/fsnp_test_client.h"
#include "tests/integration/harness.h"
#include "wire/fsnp_opcode.h"

#define SHARDS 6
#define REPLICAS 3
#define MAX_WRITES 200000
#define CONVERGE_MS 90000

static const char *const base_args[] = {"--shards",
                                        "6",
                                        "--snapshot-threshold",
                                        "200",
                                        "--snapshot-trailing",
                                        "50",
                                        "--election-timeout-ms",
                                        "500",
                                        NULL};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- the writer ---- */

struct writer {
	struct harness_cluster *c;
	pthread_t thread;
	atomic_bool stop;
	atomic_uint through; /* bit i: write through node index i */
	atomic_uint count;   /* writes attempted */
	atomic_uint acked_n;
	uint8_t acked[MAX_WRITES]; /* 1 acknowledged */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct ftc conn[HARNESS_MAX_NODES];
	bool open[HARNESS_MAX_NODES] = {false};
	unsigned i = 0;

	while (!atomic_load(&w->stop) && i < MAX_WRITES) {
		unsigned mask = atomic_load(&w->through), n;
		char key[32], val[32];
		struct wbuf b;
		struct ftc_msg m;
		uint64_t rid;

		/* Round robin over the nodes written through. */
		for (n = 0; n < HARNESS_MAX_NODES; n++) {
			if ((mask >> ((i + n) % HARNESS_MAX_NODES)) & 1) {
				break;
			}
		}
		if (n == HARNESS_MAX_NODES) {
			sleep_ms(10);
			continue;
		}
		n = (i + n) % HARNESS_MAX_NODES;
		for (unsigned k = 0; k < HARNESS_MAX_NODES; k++) {
			if (open[k] && !((mask >> k) & 1)) {
				ftc_close(&conn[k]);
				open[k] = false;
			}
		}
		if (!open[n]) {
			if (ftc_connect(&conn[n], w->c->nodes[n].fsnp) != 0) {
				sleep_ms(50);
				i++;
				atomic_store(&w->count, i);
				continue;
			}
			open[n] = true;
		}
		snprintf(key, sizeof key, "k%06u", i);
		snprintf(val, sizeof val, "v%06u", i);
		ftc_body(&b, "key=s value=s", key, val);
		rid = ftc_send(&conn[n], 1, FSNP_OP_SET, 0, &b);
		wbuf_free(&b);
		for (;;) {
			if (ftc_recv(&conn[n], &m, 8000) != 0) {
				ftc_close(&conn[n]);
				open[n] = false;
				break;
			}
			if (m.h.request_id == rid) {
				if (m.status == 0) {
					w->acked[i] = 1;
					atomic_fetch_add(&w->acked_n, 1);
				}
				ftc_msg_free(&m);
				break;
			}
			ftc_msg_free(&m);
		}
		i++;
		atomic_store(&w->count, i);
		sleep_ms(2);
	}
	for (unsigned k = 0; k < HARNESS_MAX_NODES; k++) {
		if (open[k]) {
			ftc_close(&conn[k]);
		}
	}
	return NULL;
}

/* ---- the admin view ---- */

static json_t *view(struct harness_cluster *c, unsigned i, const char *path)
{
	static char body[65536];
	int st;
	if (c->nodes[i].pid <= 0 ||
	    harness_http(c->nodes[i].admin, "GET", path, NULL, &st, body,
	                 sizeof body) != 0 ||
	    st != 200) {
		return NULL;
	}
	return json_loads(body, 0, NULL);
}

static int node_index(struct harness_cluster *c, uint64_t id)
{
	for (unsigned i = 0; i < c->n; i++) {
		if (c->nodes[i].id == id) {
			return (int)i;
		}
	}
	return -1;
}

/* The state of node `id` in its record as node i sees it ("" unknown). */
static void node_state(struct harness_cluster *c, unsigned i, uint64_t id,
                       char *out, size_t cap)
{
	json_t *v = view(c, i, "/v1/cluster"), *n;
	size_t k;
	out[0] = '\0';
	json_array_foreach(json_object_get(v, "nodes"), k, n)
	{
		const char *admin =
		    json_string_value(json_object_get(n, "admin"));
		/* Known from its record (which carries its addresses). */
		if ((uint64_t)json_integer_value(json_object_get(n, "id")) ==
		        id &&
		    admin != NULL && admin[0] != '\0') {
			snprintf(
			    out, cap, "%s",
			    json_string_value(json_object_get(n, "state")));
		}
	}
	json_decref(v);
}

static bool set_has(json_t *arr, uint64_t id)
{
	size_t k;
	json_t *x;
	json_array_foreach(arr, k, x)
	{
		json_t *i = json_is_object(x) ? json_object_get(x, "id") : x;
		if ((uint64_t)json_integer_value(i) == id) {
			return true;
		}
	}
	return false;
}

/* Every group's configuration on its leader is exactly its target (the
 * voters placement gives over the active nodes `active`), all voters;
 * `why` says what is still missing. */
static bool converged(struct harness_cluster *c, unsigned via,
                      const uint64_t *active, size_t n_active, char *why,
                      size_t cap)
{
	json_t *v = view(c, via, "/v1/cluster"), *g;
	size_t k;
	bool ok = v != NULL;

	snprintf(why, cap, "no view from node %u", via + 1);
	json_array_foreach(json_object_get(v, "groups"), k, g)
	{
		json_t *l = json_object_get(g, "leader");
		json_t *targets = json_object_get(g, "voters");
		int li;
		json_t *lv, *lg, *x;
		size_t j;
		uint64_t gid =
		    (uint64_t)json_integer_value(json_object_get(g, "id"));

		if (!ok) {
			break;
		}
		if (!json_is_integer(l) ||
		    (li = node_index(c, (uint64_t)json_integer_value(l))) < 0) {
			snprintf(why, cap, "group %" PRIu64 ": no leader", gid);
			ok = false;
			break;
		}
		if (json_array_size(targets) !=
		    (gid == 0 ? (n_active >= 5 ? 5 : 3) : REPLICAS)) {
			snprintf(why, cap, "group %" PRIu64 ": %zu targets",
			         gid, json_array_size(targets));
			ok = false;
			break;
		}
		json_array_foreach(targets, j, x)
		{
			bool act = false;
			for (size_t a = 0; a < n_active; a++) {
				act =
				    act || active[a] ==
				               (uint64_t)json_integer_value(x);
			}
			if (!act) {
				snprintf(why, cap,
				         "group %" PRIu64
				         ": target on a node not active",
				         gid);
				ok = false;
			}
		}
		lv = view(c, (unsigned)li, "/v1/cluster");
		lg = lv != NULL
		         ? json_array_get(json_object_get(lv, "groups"), gid)
		         : NULL;
		if (lg == NULL ||
		    json_array_size(json_object_get(lg, "config")) !=
		        json_array_size(targets)) {
			snprintf(why, cap,
			         "group %" PRIu64 ": configuration not the "
			         "target yet",
			         gid);
			ok = false;
		} else {
			json_array_foreach(json_object_get(lg, "config"), j, x)
			{
				const char *role = json_string_value(
				    json_object_get(x, "role"));
				if (strcmp(role, "voter") != 0 ||
				    !set_has(targets,
				             (uint64_t)json_integer_value(
				                 json_object_get(x, "id")))) {
					snprintf(why, cap,
					         "group %" PRIu64
					         ": configuration not the "
					         "target yet",
					         gid);
					ok = false;
				}
			}
		}
		json_decref(lv);
	}
	json_decref(v);
	return ok;
}

static void wait_converged(struct harness_cluster *c, unsigned via,
                           const uint64_t *active, size_t n_active)
{
	uint64_t end = mono_ms() + CONVERGE_MS;
	char why[256] = "";
	while (!converged(c, via, active, n_active, why, sizeof why)) {
		if (mono_ms() > end) {
			for (unsigned i = 0; i < c->n; i++) {
				harness_node_dump_log(c, i);
			}
			fail_msg("not converged: %s", why);
		}
		sleep_ms(250);
	}
}

static void wait_state(struct harness_cluster *c, unsigned via, uint64_t id,
                       const char *state)
{
	uint64_t end = mono_ms() + CONVERGE_MS;
	char st[32];
	for (;;) {
		node_state(c, via, id, st, sizeof st);
		if (strcmp(st, state) == 0) {
			return;
		}
		if (mono_ms() > end) {
			fail_msg("node %" PRIu64 " is '%s', not '%s'", id, st,
			         state);
		}
		sleep_ms(200);
	}
}

static int lodectl(struct harness_cluster *c, unsigned via, char *out,
                   size_t cap, const char *a1, const char *a2, const char *a3,
                   const char *a4, const char *a5)
{
	char addr[64];
	snprintf(addr, sizeof addr, "127.0.0.1:%u", c->nodes[via].admin);
	const char *argv[] = {LS_ABS_BUILDDIR "/lodectl",
	                      "--admin",
	                      addr,
	                      "cluster",
	                      a1,
	                      a2,
	                      a3,
	                      a4,
	                      a5,
	                      NULL};
	return harness_run(argv, out, cap);
}

/* Every acknowledged write reads back its value (through node i). */
static void check_writes(struct writer *w, struct harness_cluster *c,
                         unsigned i)
{
	struct ftc conn;
	unsigned n = atomic_load(&w->count), checked = 0;

	assert_int_equal(ftc_connect(&conn, c->nodes[i].fsnp), 0);
	for (unsigned k = 0; k < n && k < MAX_WRITES; k++) {
		char key[32], val[32];
		struct wbuf b;
		struct ftc_msg m;
		if (!w->acked[k]) {
			continue;
		}
		snprintf(key, sizeof key, "k%06u", k);
		snprintf(val, sizeof val, "v%06u", k);
		ftc_body(&b, "key=s", key);
		assert_int_equal(ftc_call(&conn, 1, FSNP_OP_GET, 0, &b, &m), 0);
		wbuf_free(&b);
		assert_int_equal(m.status, 0);
		if (!ftc_str_eq(&m.value, val)) {
			fail_msg("acknowledged %s=%s lost", key, val);
		}
		ftc_msg_free(&m);
		checked++;
	}
	ftc_close(&conn);
	print_message("%u acknowledged writes of %u read back\n", checked, n);
	assert_true(checked > 100);
}

/* Every replica of every group hashes the same (once applied alike). */
static void check_hashes(struct harness_cluster *c, unsigned via)
{
	json_t *v = view(c, via, "/v1/cluster"), *g;
	size_t k;

	assert_non_null(v);
	json_array_foreach(json_object_get(v, "groups"), k, g)
	{
		uint64_t gid =
		    (uint64_t)json_integer_value(json_object_get(g, "id"));
		uint64_t end = mono_ms() + 20000;
		char path[64];
		snprintf(path, sizeof path, "/v1/debug/group/%" PRIu64 "/hash",
		         gid);
		for (;;) {
			char first[64] = "";
			bool same = true;
			size_t j;
			json_t *x;
			json_array_foreach(json_object_get(g, "voters"), j, x)
			{
				int ni = node_index(
				    c, (uint64_t)json_integer_value(x));
				json_t *h = ni >= 0
				                ? view(c, (unsigned)ni, path)
				                : NULL;
				char cur[64];
				snprintf(
				    cur, sizeof cur, "%s/%" JSON_INTEGER_FORMAT,
				    h != NULL ? json_string_value(
				                    json_object_get(h, "hash"))
				              : "?",
				    json_integer_value(
				        json_object_get(h, "keys")));
				if (j == 0) {
					snprintf(first, sizeof first, "%s",
					         cur);
				}
				same = same && h != NULL &&
				       strcmp(first, cur) == 0;
				json_decref(h);
			}
			if (same) {
				break;
			}
			if (mono_ms() > end) {
				fail_msg("group %" PRIu64 ": replicas differ",
				         gid);
			}
			sleep_ms(250);
		}
	}
	json_decref(v);
}

/* Every running node outside a group's target holds nothing of it: no
 * replica, and its key range is empty (deleted when it was removed). */
static void check_deleted(struct harness_cluster *c, unsigned via)
{
	uint64_t end = mono_ms() + CONVERGE_MS;

	for (;;) {
		json_t *v = view(c, via, "/v1/cluster"), *g;
		size_t k;
		bool clean = v != NULL;
		char why[128] = "no view";

		json_array_foreach(json_object_get(v, "groups"), k, g)
		{
			uint64_t gid = (uint64_t)json_integer_value(
			    json_object_get(g, "id"));
			for (unsigned i = 0; i < c->n && clean; i++) {
				char path[64];
				json_t *h, *w, *wg;
				if (c->nodes[i].pid <= 0 ||
				    set_has(json_object_get(g, "voters"),
				            c->nodes[i].id)) {
					continue;
				}
				snprintf(path, sizeof path,
				         "/v1/debug/group/%" PRIu64 "/hash",
				         gid);
				h = view(c, i, path);
				w = view(c, i, "/v1/cluster");
				wg =
				    w != NULL
				        ? json_array_get(
				              json_object_get(w, "groups"), gid)
				        : NULL;
				if (h == NULL || wg == NULL ||
				    json_integer_value(
				        json_object_get(h, "keys")) != 0 ||
				    json_is_true(
				        json_object_get(wg, "replica"))) {
					snprintf(why, sizeof why,
					         "node %u still holds group "
					         "%" PRIu64,
					         c->nodes[i].id, gid);
					clean = false;
				}
				json_decref(h);
				json_decref(w);
			}
		}
		json_decref(v);
		if (clean) {
			return;
		}
		if (mono_ms() > end) {
			fail_msg("%s", why);
		}
		sleep_ms(500);
	}
}

/* transfer-leader through a node that does not lead the group: lodectl
 * follows the answer to the leader; the leadership moves where asked. */
static void transfer_leader(struct harness_cluster *c)
{
	json_t *v = view(c, 1, "/v1/cluster");
	json_t *g = json_array_get(json_object_get(v, "groups"), 1), *x;
	uint64_t leader =
	    (uint64_t)json_integer_value(json_object_get(g, "leader"));
	uint64_t to = 0, via = 0, end;
	char arg[16], out[4096];
	size_t k;
	int rc;

	json_array_foreach(json_object_get(g, "voters"), k, x)
	{
		uint64_t id = (uint64_t)json_integer_value(x);
		if (id != leader && to == 0) {
			to = id;
		}
	}
	json_decref(v);
	assert_true(leader != 0 && to != 0);
	for (unsigned i = 0; i < c->n; i++) {
		if (c->nodes[i].pid > 0 && c->nodes[i].id != leader) {
			via = i;
		}
	}
	snprintf(arg, sizeof arg, "%" PRIu64, to);
	rc = lodectl(c, (unsigned)via, out, sizeof out, "transfer-leader", "1",
	             "--to", arg, NULL);
	if (rc != 0) {
		fail_msg("lodectl cluster transfer-leader 1 --to %s: %d: %s",
		         arg, rc, out);
	}
	end = mono_ms() + 10000;
	for (;;) {
		v = view(c, (unsigned)via, "/v1/cluster");
		g = json_array_get(json_object_get(v, "groups"), 1);
		leader =
		    (uint64_t)json_integer_value(json_object_get(g, "leader"));
		json_decref(v);
		if (leader == to) {
			break;
		}
		assert_true(mono_ms() < end);
		sleep_ms(100);
	}
}

static void test_membership(void **state)
{
	static struct harness_cluster cl;
	static struct writer w;
	struct harness_cluster *c = &cl;
	char out[8192];
	int st, rc;
	(void)state;

	assert_int_equal(harness_cluster_start(c, 3, base_args, true), 0);
	{
		const uint64_t a[] = {1, 2, 3};
		wait_converged(c, 0, a, 3);
	}
	memset(&w, 0, sizeof w);
	w.c = c;
	atomic_store(&w.through, 0x7u);
	assert_int_equal(pthread_create(&w.thread, NULL, writer_main, &w), 0);
	sleep_ms(1000);

	/* Usage errors exit 2. */
	assert_int_equal(
	    lodectl(c, 0, out, sizeof out, "drain", NULL, NULL, NULL, NULL), 2);

	/* Grow: 4 joins through node 2, 5 through node 3. */
	assert_int_equal(harness_node_join(c, 1), 3);
	assert_int_equal(harness_node_wait_healthy(c, 3, 15000), 0);
	wait_state(c, 0, 4, "active");
	{
		const uint64_t a[] = {1, 2, 3, 4};
		wait_converged(c, 0, a, 4);
	}
	atomic_store(&w.through, 0xFu);
	assert_int_equal(harness_node_join(c, 2), 4);
	assert_int_equal(harness_node_wait_healthy(c, 4, 15000), 0);
	wait_state(c, 0, 5, "active");
	{
		const uint64_t a[] = {1, 2, 3, 4, 5};
		wait_converged(c, 0, a, 5);
	}
	atomic_store(&w.through, 0x1Fu);
	check_deleted(c, 0);
	print_message("grown to 5 nodes; %u writes acknowledged\n",
	              atomic_load(&w.acked_n));

	/* Shrink: remove node 1 (drained first), through node 2. */
	atomic_store(&w.through, 0x1Eu);
	rc = lodectl(c, 1, out, sizeof out, "remove", "1", NULL, NULL, NULL);
	if (rc != 0) {
		fail_msg("lodectl cluster remove 1: %d: %s", rc, out);
	}
	{
		uint64_t end = mono_ms() + 20000;
		pid_t r;
		while ((r = waitpid(c->nodes[0].pid, &st, WNOHANG)) == 0) {
			assert_true(mono_ms() < end);
			sleep_ms(100);
		}
		assert_int_equal(r, c->nodes[0].pid);
		c->nodes[0].pid = 0;
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	{
		const uint64_t a[] = {2, 3, 4, 5};
		wait_converged(c, 1, a, 4);
	}
	print_message("node 1 removed; %u writes acknowledged\n",
	              atomic_load(&w.acked_n));

	/* Replace: node 3 dies, node 6 takes its replicas. */
	atomic_store(&w.through, 0x1Au);
	assert_int_equal(harness_node_signal(c, 2, SIGKILL, NULL), 0);
	assert_int_equal(harness_node_join(c, 1), 5);
	assert_int_equal(harness_node_wait_healthy(c, 5, 15000), 0);
	wait_state(c, 1, 6, "joining");
	rc =
	    lodectl(c, 1, out, sizeof out, "replace", "3", "--with", "6", NULL);
	if (rc != 0) {
		fail_msg("lodectl cluster replace 3 --with 6: %d: %s", rc, out);
	}
	atomic_store(&w.through, 0x3Au);
	{
		const uint64_t a[] = {2, 4, 5, 6};
		wait_converged(c, 1, a, 4);
	}
	wait_state(c, 1, 6, "active");
	sleep_ms(1000);
	atomic_store(&w.stop, true);
	pthread_join(w.thread, NULL);
	print_message("replaced node 3; %u writes, %u acknowledged\n",
	              atomic_load(&w.count), atomic_load(&w.acked_n));

	check_writes(&w, c, 3);
	check_hashes(c, 1);
	transfer_leader(c);
	{
		/* The status view shows the new membership. */
		rc = lodectl(c, 1, out, sizeof out, "status", NULL, NULL, NULL,
		             NULL);
		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "removed"));
	}
	harness_cluster_stop(c);
}

/* Whether node i's log mentions `what`. */
static bool log_has(struct harness_cluster *c, unsigned i, const char *what)
{
	static char buf[1 << 20];
	FILE *f = fopen(c->nodes[i].log_path, "r");
	size_t n;
	if (f == NULL) {
		return false;
	}
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, what) != NULL;
}

/* A rolling restart (SIGTERM, start again, next node) is no membership
 * change: 4 nodes, 3 replicas, every node restarted in turn; no replica
 * moves, and each stop exits 0. */
static void test_rolling_restart(void **state)
{
	static struct harness_cluster cl;
	struct harness_cluster *c = &cl;
	const uint64_t a[] = {1, 2, 3, 4};
	char why[256];
	(void)state;

	assert_int_equal(harness_cluster_start(c, 4, base_args, true), 0);
	wait_converged(c, 0, a, 4);
	for (unsigned i = 0; i < 4; i++) {
		int st = -1;
		uint64_t end;
		assert_int_equal(harness_node_signal(c, i, SIGTERM, &st), 0);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
		assert_int_equal(harness_node_start(c, i), 0);
		assert_int_equal(harness_node_wait_healthy(c, i, 15000), 0);
		/* Every group led again, configurations untouched. */
		end = mono_ms() + 30000;
		while (!converged(c, i, a, 4, why, sizeof why)) {
			if (mono_ms() > end) {
				fail_msg("after restarting node %u: %s", i + 1,
				         why);
			}
			sleep_ms(200);
		}
	}
	for (unsigned i = 0; i < 4; i++) {
		assert_false(log_has(c, i, ": add node"));
		assert_false(log_has(c, i, ": remove node"));
		assert_false(log_has(c, i, "replica deleted"));
	}
	harness_cluster_stop(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_membership),
	    cmocka_unit_test(test_rolling_restart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
