/* Integration: the dashboard on one real node: GET / answers the page as
 * text/html, GET /v1/dashboard valid JSON with every key the page reads,
 * the node up, every group led and the history's series growing. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"

/* GET `path`: the whole response, headers included, in `out`. */
static int get_raw(uint16_t port, const char *path, char *out, size_t cap)
{
	struct sockaddr_in sa = {0};
	struct timeval tv = {5, 0};
	char req[512];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	int n = snprintf(req, sizeof req,
	                 "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r = read(fd, out + got, cap - 1 - got);
		if (r <= 0 || (got += (size_t)r) == cap - 1) {
			break;
		}
	}
	close(fd);
	out[got] = '\0';
	return 0;
}

static char resp[1 << 20];

static void test_page_and_document(void **state)
{
	struct harness_cluster c;
	(void)state;
	assert_int_equal(harness_cluster_start(&c, 1, NULL, true), 0);
	uint16_t port = c.nodes[0].admin;

	assert_int_equal(get_raw(port, "/", resp, sizeof resp), 0);
	assert_true(strncmp(resp, "HTTP/1.1 200", 12) == 0 ||
	            strncmp(resp, "HTTP/1.0 200", 12) == 0);
	char *type = strcasestr(resp, "\r\nContent-Type:");
	assert_non_null(type);
	assert_non_null(strstr(type, "text/html"));
	assert_true(strstr(type, "text/html") < strstr(resp, "\r\n\r\n"));
	assert_non_null(strstr(resp, "<title>Lodestone dashboard</title>"));
	assert_non_null(strstr(resp, "/v1/dashboard"));

	/* Until the history holds a few samples and the groups are led. */
	json_t *d = NULL;
	uint64_t deadline = harness_mono_ms() + 20000;
	for (;;) {
		json_decref(d);
		d = NULL;
		assert_int_equal(
		    get_raw(port, "/v1/dashboard", resp, sizeof resp), 0);
		const char *body = strstr(resp, "\r\n\r\n");
		assert_non_null(body);
		assert_non_null(strcasestr(resp, "application/json"));
		d = json_loads(body + 4, 0, NULL);
		assert_non_null(d);
		json_t *t = json_object_get(json_object_get(d, "series"), "t");
		if (json_array_size(t) >= 3 &&
		    json_array_size(json_object_get(d, "problems")) == 0) {
			break;
		}
		assert_true(harness_mono_ms() < deadline);
		harness_nap(200);
	}
	static const char *keys[] = {"node_id", "cluster_id", "nodes",
	                             "groups",  "series",     "streams",
	                             "caches",  "problems"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		assert_non_null(json_object_get(d, keys[i]));
	}
	assert_int_equal(json_integer_value(json_object_get(d, "node_id")), 1);
	json_t *nodes = json_object_get(d, "nodes");
	assert_int_equal(json_array_size(nodes), 1);
	json_t *n0 = json_array_get(nodes, 0);
	assert_int_equal(json_integer_value(json_object_get(n0, "id")), 1);
	assert_string_equal(json_string_value(json_object_get(n0, "status")),
	                    "up");
	json_t *groups = json_object_get(d, "groups"), *g;
	size_t i;
	assert_true(json_array_size(groups) >= 2);
	json_array_foreach(groups, i, g)
	{
		assert_int_equal(
		    json_integer_value(json_object_get(g, "leader")), 1);
		assert_true(json_is_array(json_object_get(g, "voters")));
		assert_true(json_is_integer(json_object_get(g, "lag")));
		assert_string_equal(
		    json_string_value(json_object_get(g, "health")), "ok");
	}
	json_t *series = json_object_get(d, "series");
	size_t n = json_array_size(json_object_get(series, "t"));
	static const char *names[] = {"fsnp.requests_per_s",
	                              "felix.requests_per_s",
	                              "admin.requests_per_s",
	                              "admin.latency_ms",
	                              "raft.commits_per_s",
	                              "raft.sync_ms",
	                              "nodes.up"};
	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		assert_int_equal(
		    json_array_size(json_object_get(series, names[i])), n);
	}
	json_t *up = json_object_get(series, "nodes.up");
	assert_true(json_number_value(json_array_get(up, n - 1)) == 1.0);
	assert_int_equal(json_array_size(json_object_get(
	                     json_object_get(series, "node_up"), "1")),
	                 n);
	/* The admin requests this test made were counted and timed. */
	json_t *lat = json_object_get(series, "admin.latency_ms");
	bool timed = false;
	for (i = 0; i < n; i++) {
		timed = timed || json_is_number(json_array_get(lat, i));
	}
	assert_true(timed);
	json_decref(d);
	harness_cluster_stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_page_and_document),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
