/* Integration: GET /metrics after FSNP and Felix traffic, on one node and
 * on three. Every scrape passes `promtool check metrics` (Debian's
 * prometheus package; skipped when missing, a failure with CI=true), every
 * family is named lodestone_*, the subsystems' families are there
 * (per-group Raft, the log writer, RocksDB, the row cache, FSNP and Felix
 * per-opcode counters and latency histograms, connections, queues, drops,
 * forwarding, errors by kind), and --metrics-max-groups below the node's
 * group count leaves aggregates only. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/felix_util.h"
#include "tests/integration/fsnp_test_client.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_value.h"

#define SCRAPE_MAX (4u << 20)

static char scrape_buf[SCRAPE_MAX];

/* GET /metrics on node i into scrape_buf. */
static const char *scrape(struct harness_cluster *cl, unsigned i)
{
	int st = 0;
	assert_int_equal(harness_http(cl->nodes[i].admin, "GET", "/metrics",
	                              NULL, &st, scrape_buf, sizeof scrape_buf),
	                 0);
	assert_int_equal(st, 200);
	assert_true(strlen(scrape_buf) < sizeof scrape_buf - 1);
	return scrape_buf;
}

/* The path of promtool, or NULL (skips the test; CI=true fails it). */
static bool have_promtool(void)
{
	char out[256];
	const char *const argv[] = {"/bin/sh", "-c", "command -v promtool",
	                            NULL};
	if (harness_run(argv, out, sizeof out) == 0) {
		return true;
	}
	const char *ci = getenv("CI");
	if (ci != NULL && strcmp(ci, "true") == 0) {
		fail_msg("promtool is missing (Debian package prometheus)");
	}
	return false;
}

/* `promtool check metrics` on the text: exit 0 and nothing printed (no
 * lint problem either). */
static void promtool_check(struct harness_cluster *cl, const char *text)
{
	char path[600], cmd[700], out[8192];
	snprintf(path, sizeof path, "%s/scrape.txt", cl->root);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
	assert_int_equal(fclose(fp), 0);
	snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
	const char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
	int rv = harness_run(argv, out, sizeof out);
	if (rv != 0 || out[0] != '\0') {
		fail_msg("promtool check metrics: exit %d: %s", rv, out);
	}
}

/* Every HELP, TYPE and sample line names a lodestone_ family. */
static void all_lodestone(const char *text)
{
	unsigned lines = 0;
	for (const char *p = text; *p != '\0';) {
		const char *end = strchr(p, '\n');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		const char *name = p;
		if (strncmp(p, "# HELP ", 7) == 0 ||
		    strncmp(p, "# TYPE ", 7) == 0) {
			name = p + 7;
		} else if (p[0] == '#') {
			name = NULL;
		}
		if (name != NULL && len > 0 &&
		    strncmp(name, "lodestone_", 10) != 0) {
			fail_msg("not a lodestone_ family: %.*s", (int)len, p);
		}
		lines++;
		p = end != NULL ? end + 1 : p + len;
	}
	assert_true(lines > 100);
}

/* The sample line starting with `series` (name{labels}, or a name that a
 * space follows) exists; its value, or -1. */
static double sample(const char *text, const char *series)
{
	size_t sl = strlen(series);
	for (const char *p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, series, sl) == 0 &&
		    (p[sl] == ' ' || series[sl - 1] == ',' ||
		     series[sl - 1] == '{')) {
			const char *sp = strchr(p, ' ');
			return sp != NULL ? strtod(sp + 1, NULL) : -1;
		}
		p = strchr(p, '\n');
		p = p != NULL ? p + 1 : NULL;
	}
	return -1;
}

static void has_family(const char *text, const char *name, const char *type)
{
	char want[200];
	snprintf(want, sizeof want, "# TYPE %s %s\n", name, type);
	if (strstr(text, want) == NULL) {
		fail_msg("no family %s (%s)", name, type);
	}
}

/* Families every node shows whatever its traffic and group count. */
static void common_families(const char *t)
{
	static const char *const fam[][2] = {
	    {"lodestone_uptime_seconds", "gauge"},
	    {"lodestone_raft_groups", "gauge"},
	    {"lodestone_metrics_group_series", "gauge"},
	    {"lodestone_raft_elections_total", "counter"},
	    {"lodestone_raft_leaderships_total", "counter"},
	    {"lodestone_raft_follower_lag_max_entries", "gauge"},
	    {"lodestone_raft_snapshots_sent_total", "counter"},
	    {"lodestone_raft_snapshots_installed_total", "counter"},
	    {"lodestone_raft_log_batches_total", "counter"},
	    {"lodestone_raft_log_bytes_total", "counter"},
	    {"lodestone_raft_log_fsync_duration_seconds", "histogram"},
	    {"lodestone_rocksdb_memtable_bytes", "gauge"},
	    {"lodestone_rocksdb_live_sst_bytes", "gauge"},
	    {"lodestone_rocksdb_compactions_total", "counter"},
	    {"lodestone_rocksdb_running_compactions", "gauge"},
	    {"lodestone_rocksdb_pending_compaction_bytes", "gauge"},
	    {"lodestone_rocksdb_write_stalls_total", "counter"},
	    {"lodestone_rocksdb_write_stopped", "gauge"},
	    {"lodestone_row_cache_hits_total", "counter"},
	    {"lodestone_row_cache_misses_total", "counter"},
	    {"lodestone_fsnp_connections", "gauge"},
	    {"lodestone_fsnp_requests_total", "counter"},
	    {"lodestone_fsnp_errors_total", "counter"},
	    {"lodestone_fsnp_requests_in_flight", "gauge"},
	    {"lodestone_fsnp_opcode_requests_total", "counter"},
	    {"lodestone_fsnp_request_duration_seconds", "histogram"},
	    {"lodestone_felix_connections", "gauge"},
	    {"lodestone_felix_subscriber_queue_bytes", "gauge"},
	    {"lodestone_felix_events_dropped_total", "counter"},
	    {"lodestone_felix_errors_total", "counter"},
	    {"lodestone_felix_opcode_requests_total", "counter"},
	    {"lodestone_felix_request_duration_seconds", "histogram"},
	    {"lodestone_forward_requests_total", "counter"},
	    {"lodestone_forward_errors_total", "counter"},
	    {"lodestone_forward_in_flight", "gauge"},
	};
	for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
		has_family(t, fam[i][0], fam[i][1]);
	}
	assert_true(sample(t, "lodestone_raft_log_batches_total") > 0);
	assert_true(
	    sample(t, "lodestone_raft_log_fsync_duration_seconds_count") > 0);
	assert_true(sample(t, "lodestone_raft_log_fsync_duration_seconds_"
	                      "bucket{le=\"+Inf\"}") > 0);
	assert_true(sample(t, "lodestone_fsnp_errors_total{status=\"busy\"}") >=
	            0);
	assert_true(
	    sample(t, "lodestone_felix_errors_total{kind=\"protocol\"}") >= 0);
	assert_true(
	    sample(t, "lodestone_rocksdb_memtable_bytes{cf=\"data\"}") >= 0);
}

/* FSNP SET and GET, and Felix publishes and cache puts, through node i. */
static void traffic(struct harness_cluster *cl, unsigned i, struct fx *f)
{
	struct ftc c;
	assert_int_equal(ftc_connect(&c, cl->nodes[i].fsnp), 0);
	for (int k = 0; k < 10; k++) {
		struct wbuf b;
		struct ftc_msg m;
		char key[32];
		snprintf(key, sizeof key, "mk%d", k);
		ftc_body(&b, "key=s value=s", key, "v");
		assert_int_equal(ftc_call(&c, 1, FSNP_OP_SET, 0, &b, &m), 0);
		assert_int_equal(m.status, FSNP_STATUS_OK);
		ftc_msg_free(&m);
		wbuf_free(&b);
		ftc_body(&b, "key=s", key);
		assert_int_equal(ftc_call(&c, 1, FSNP_OP_GET, 0, &b, &m), 0);
		assert_int_equal(m.status, FSNP_STATUS_OK);
		ftc_msg_free(&m);
		wbuf_free(&b);
	}
	ftc_close(&c);

	const char *p[2] = {"a", "b"};
	for (int k = 0; k < 5; k++) {
		int rv = fx_publish(f, "default", "ms", NULL, p, 2);
		if (rv != 0) {
			fail_msg("publish: %d %s", rv, f->message);
		}
		rv = fx_cache_put(f, "mc", "k", "v", false, 0);
		if (rv != 0) {
			fail_msg("cache_put: %d %s", rv, f->message);
		}
	}
}

static void per_opcode(const char *t)
{
	assert_true(
	    sample(t, "lodestone_fsnp_opcode_requests_total{opcode=\"SET\"}") >=
	    10);
	assert_true(
	    sample(t, "lodestone_fsnp_opcode_requests_total{opcode=\"GET\"}") >=
	    10);
	assert_true(sample(t, "lodestone_fsnp_request_duration_seconds_count{"
	                      "opcode=\"SET\"}") >= 10);
	assert_true(sample(t, "lodestone_fsnp_request_duration_seconds_bucket{"
	                      "opcode=\"SET\",le=\"+Inf\"}") >= 10);
	assert_true(
	    sample(
	        t,
	        "lodestone_felix_opcode_requests_total{opcode=\"publish\"}") >=
	    5);
	assert_true(sample(t, "lodestone_felix_request_duration_seconds_count{"
	                      "opcode=\"cache_put\"}") >= 5);
	assert_true(sample(t, "lodestone_felix_connections") >= 1);
}

static void test_one_node(void **state)
{
	static const char *const args[] = {"--dev", "--shards", "4", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[1];
	(void)state;
	if (!have_promtool()) {
		skip();
	}
	fx_start_cluster(&cl, 1, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "ms", "{\"shards\":1}"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "mc", "{\"shards\":1}"), 0);
	traffic(&cl, 0, &f[0]);

	const char *t = scrape(&cl, 0);
	promtool_check(&cl, t);
	all_lodestone(t);
	common_families(t);
	per_opcode(t);
	/* 5 groups, under the default limit: per-group series. */
	assert_true(sample(t, "lodestone_metrics_group_series") == 1);
	assert_true(sample(t, "lodestone_raft_groups{role=\"leader\"}") == 5);
	assert_true(sample(t, "lodestone_raft_group_term{group=\"0\"}") >= 1);
	assert_true(sample(t, "lodestone_raft_group_role{group=\"4\"}") == 3);
	assert_true(
	    sample(t, "lodestone_raft_group_commit_index{group=\"1\"}") > 0);
	assert_true(
	    sample(t, "lodestone_raft_group_applied_index{group=\"1\"}") > 0);
	assert_true(
	    sample(t, "lodestone_raft_group_elections_total{group=\"0\"}") >=
	    1);
	has_family(t, "lodestone_raft_group_snapshots_sent_total", "counter");
	has_family(t, "lodestone_raft_group_snapshots_installed_total",
	           "counter");
	has_family(t, "lodestone_raft_group_follower_lag_entries", "gauge");

	fx_close(&f[0]);
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

static void test_three_nodes_limited(void **state)
{
	static const char *const args[] = {
	    "--dev", "--shards", "4", "--metrics-max-groups", "2", NULL};
	struct harness_cluster cl;
	uv_loop_t loop;
	static struct fx f[3];
	(void)state;
	if (!have_promtool()) {
		skip();
	}
	fx_start_cluster(&cl, 3, args, &loop, f);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "streams", "ms", "{\"shards\":1}"), 0);
	assert_int_equal(
	    fx_create_scope(&cl, 0, "caches", "mc", "{\"shards\":1}"), 0);
	fx_wait_settled(&cl, 0);
	for (unsigned i = 0; i < 3; i++) {
		traffic(&cl, i, &f[i]);
	}
	for (unsigned i = 0; i < 3; i++) {
		const char *t = scrape(&cl, i);
		promtool_check(&cl, t);
		all_lodestone(t);
		common_families(t);
		per_opcode(t);
		/* 5 groups here, more than 2: aggregates only. */
		assert_true(sample(t, "lodestone_metrics_group_series") == 0);
		if (strstr(t, "group=\"") != NULL ||
		    strstr(t, "\nlodestone_raft_group_") != NULL ||
		    strstr(t, "# TYPE lodestone_raft_group_") != NULL) {
			fail_msg("node %u: per-group series above the limit",
			         i + 1);
		}
		double groups = 0;
		static const char *const roles[] = {"unavailable", "follower",
		                                    "candidate", "leader"};
		for (unsigned r = 0; r < 4; r++) {
			char s[64];
			snprintf(s, sizeof s,
			         "lodestone_raft_groups{role=\"%s\"}",
			         roles[r]);
			groups += sample(t, s);
		}
		assert_true(groups == 5);
		/* The node transport's two peers. */
		has_family(t, "lodestone_peer_connected", "gauge");
		has_family(t, "lodestone_peer_queue_bytes", "gauge");
		has_family(t, "lodestone_peer_frames_dropped_total", "counter");
		char s[64];
		for (unsigned p = 1; p <= 3; p++) {
			snprintf(s, sizeof s,
			         "lodestone_peer_connected{peer=\"%u\"}", p);
			if (p != i + 1) {
				assert_true(sample(t, s) == 1);
			}
		}
	}
	/* Some node forwarded a write to a leader elsewhere. */
	double sent = 0;
	for (unsigned i = 0; i < 3; i++) {
		const char *t = scrape(&cl, i);
		sent += sample(
		    t, "lodestone_forward_requests_total{kind=\"sent\"}");
	}
	assert_true(sent > 0);

	/* Node 3 again with the default limit: its groups' series, and the
	 * lag of each follower of the groups it leads. */
	assert_int_equal(harness_node_signal(&cl, 2, SIGTERM, NULL), 0);
	for (unsigned k = 0; k < cl.n_extra; k++) {
		if (strcmp(cl.extra[k], "2") == 0 && k > 0 &&
		    strcmp(cl.extra[k - 1], "--metrics-max-groups") == 0) {
			cl.extra[k] = "256";
		}
	}
	assert_int_equal(harness_node_start(&cl, 2), 0);
	assert_int_equal(harness_node_wait_healthy(&cl, 2, 20000), 0);
	fx_wait_settled(&cl, 2);
	uint64_t t0 = harness_mono_ms();
	const char *t;
	for (;;) {
		t = scrape(&cl, 2);
		if (strstr(t, "lodestone_raft_group_follower_lag_entries{") !=
		    NULL) {
			break;
		}
		if (harness_mono_ms() - t0 > 20000) {
			fail_msg("node 3 leads no group after 20 s:\n%s", t);
		}
		harness_nap(200);
	}
	promtool_check(&cl, t);
	all_lodestone(t);
	assert_true(sample(t, "lodestone_metrics_group_series") == 1);
	assert_true(sample(t, "lodestone_raft_group_term{group=\"0\"}") >= 1);

	for (unsigned i = 0; i < 3; i++) {
		fx_close(&f[i]);
	}
	uv_loop_close(&loop);
	harness_cluster_stop(&cl);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_node),
	    cmocka_unit_test(test_three_nodes_limited),
	};
	fx_test_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
