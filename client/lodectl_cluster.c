/* `lodectl cluster`: membership and leadership through the admin API
 * (docs/operations.md):
 *
 *     lodectl cluster status
 *     lodectl cluster drain ID
 *     lodectl cluster promote ID
 *     lodectl cluster demote ID
 *     lodectl cluster remove ID
 *     lodectl cluster replace DEAD_ID [--with NEW_ID]
 *     lodectl cluster transfer-leader GROUP [--to ID]
 *
 * Long operations are started on the node --admin names and followed
 * there (GET /v1/cluster/ops/ID) until they end, with their progress on
 * stderr. Exit status: 0 done, 1 refused or failed, 2 bad usage, 3 the
 * admin API could not be reached. */
#include "client/lodectl.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 500
#define BODY_MAX (1u << 20)

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int parse_id(const char *s, uint64_t *v)
{
	char *end;
	if (s == NULL || *s < '0' || *s > '9') {
		return -1;
	}
	*v = strtoull(s, &end, 10);
	return *end == '\0' ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [--admin HOST:PORT] cluster SUBCOMMAND\n"
	        "  status                          nodes, groups, leaders, "
	        "operations\n"
	        "  drain ID                        move every replica off node "
	        "ID\n"
	        "  remove ID                       drain node ID (when alive), "
	        "then remove it\n"
	        "  demote ID                       node ID keeps standby "
	        "replicas only\n"
	        "                                  (it votes nowhere; "
	        "placement keeps it so)\n"
	        "  promote ID                      node ID votes again where "
	        "placement puts it\n"
	        "  replace DEAD_ID [--with NEW_ID] a dead node's replicas onto "
	        "NEW_ID\n"
	        "                                  (a node started with "
	        "--join), or onto\n"
	        "                                  the others; then it is "
	        "removed\n"
	        "  transfer-leader GROUP [--to ID] hand a group's leadership "
	        "over\n"
	        "options: --max-wait-s N           give up waiting after N s "
	        "(default 3600)\n");
}

static int print_error(const char *what, int status, const char *body)
{
	json_t *o = json_loads(body, 0, NULL);
	const char *msg = json_string_value(json_object_get(o, "error"));
	fprintf(stderr, "lodectl: %s: %s (HTTP %d)\n", what, msg ? msg : body,
	        status);
	json_decref(o);
	return LODECTL_EXIT_REFUSED;
}

static int status_cmd(const struct lodectl_global *g)
{
	char *body = malloc(BODY_MAX);
	json_t *root, *v;
	size_t i;
	int st = 0;

	if (body == NULL) {
		return LODECTL_EXIT_REFUSED;
	}
	if (lodectl_http(g->admin, "GET", "/v1/cluster", NULL, &st, body,
	                 BODY_MAX) != 0) {
		fprintf(stderr, "lodectl: %s\n", body);
		free(body);
		return LODECTL_EXIT_UNREACHABLE;
	}
	if (st != 200) {
		int rc = print_error("cluster status", st, body);
		free(body);
		return rc;
	}
	if (g->json) {
		printf("%s\n", body);
		free(body);
		return LODECTL_EXIT_OK;
	}
	root = json_loads(body, 0, NULL);
	free(body);
	if (root == NULL) {
		fprintf(stderr, "lodectl: the answer is not JSON\n");
		return LODECTL_EXIT_REFUSED;
	}
	printf("cluster '%s', %" JSON_INTEGER_FORMAT " replicas per shard\n\n",
	       json_string_value(json_object_get(root, "cluster_id")),
	       json_integer_value(json_object_get(root, "replicas")));
	printf("%-6s %-9s %-22s %-9s %-5s %-6s %s\n", "NODE", "STATE",
	       "INTERNAL", "CONNECTED", "VOTER", "GROUPS", "ADMIN");
	json_array_foreach(json_object_get(root, "nodes"), i, v)
	{
		printf("%-6" JSON_INTEGER_FORMAT " %-9s %-22s %-9s %-5s "
		       "%-6" JSON_INTEGER_FORMAT " %s\n",
		       json_integer_value(json_object_get(v, "id")),
		       json_string_value(json_object_get(v, "state")),
		       json_string_value(json_object_get(v, "internal")),
		       json_is_true(json_object_get(v, "connected")) ? "yes"
		                                                     : "no",
		       json_is_false(json_object_get(v, "voter")) ? "no"
		                                                  : "yes",
		       json_integer_value(json_object_get(v, "groups")),
		       json_string_value(json_object_get(v, "admin")));
	}
	printf("\n%-6s %-7s %s\n", "GROUP", "LEADER", "TARGET VOTERS");
	json_array_foreach(json_object_get(root, "groups"), i, v)
	{
		json_t *l = json_object_get(v, "leader"), *x;
		size_t k;
		printf("%-6" JSON_INTEGER_FORMAT " ",
		       json_integer_value(json_object_get(v, "id")));
		if (json_is_integer(l)) {
			printf("%-7" JSON_INTEGER_FORMAT " ",
			       json_integer_value(l));
		} else {
			printf("%-7s ", "-");
		}
		json_array_foreach(json_object_get(v, "voters"), k, x)
		{
			printf("%s%" JSON_INTEGER_FORMAT, k ? "," : "",
			       json_integer_value(x));
		}
		json_array_foreach(json_object_get(v, "standbys"), k, x)
		{
			printf("%s%" JSON_INTEGER_FORMAT, k ? "," : " standby ",
			       json_integer_value(x));
		}
		printf("\n");
	}
	if (json_array_size(json_object_get(root, "ops")) > 0) {
		printf("\n%-4s %-16s %-6s %-8s %s\n", "OP", "KIND", "ON",
		       "STATE", "PROGRESS");
		json_array_foreach(json_object_get(root, "ops"), i, v)
		{
			json_t *on = json_object_get(v, "node");
			if (on == NULL) {
				on = json_object_get(v, "group");
			}
			printf("%-4" JSON_INTEGER_FORMAT
			       " %-16s %-6" JSON_INTEGER_FORMAT
			       " %-8s %" JSON_INTEGER_FORMAT
			       "/%" JSON_INTEGER_FORMAT "\n",
			       json_integer_value(json_object_get(v, "id")),
			       json_string_value(json_object_get(v, "kind")),
			       json_integer_value(on),
			       json_string_value(json_object_get(v, "state")),
			       json_integer_value(json_object_get(v, "done")),
			       json_integer_value(json_object_get(v, "total")));
		}
	}
	json_decref(root);
	return LODECTL_EXIT_OK;
}

/* Follows operation `op` on `admin` until it ends. */
static int follow(const struct lodectl_global *g, const char *admin,
                  const char *what, uint64_t op, unsigned max_wait_s)
{
	char path[64], body[4096];
	uint64_t deadline = mono_ms() + (uint64_t)max_wait_s * 1000;
	long long last_done = -1, last_total = -1;

	snprintf(path, sizeof path, "/v1/cluster/ops/%" PRIu64, op);
	for (;;) {
		int st = 0;
		json_t *o;
		const char *state;
		long long done, total;

		if (lodectl_http(admin, "GET", path, NULL, &st, body,
		                 sizeof body) != 0) {
			fprintf(stderr, "lodectl: %s\n", body);
			return LODECTL_EXIT_UNREACHABLE;
		}
		if (st != 200) {
			return print_error(what, st, body);
		}
		o = json_loads(body, 0, NULL);
		state = json_string_value(json_object_get(o, "state"));
		done = json_integer_value(json_object_get(o, "done"));
		total = json_integer_value(json_object_get(o, "total"));
		if (done != last_done || total != last_total) {
			fprintf(stderr, "%s: %lld/%lld groups\n", what, done,
			        total);
			last_done = done;
			last_total = total;
		}
		if (state != NULL && strcmp(state, "done") == 0) {
			if (g->json) {
				printf("%s\n", body);
			} else {
				printf("%s: done\n", what);
			}
			json_decref(o);
			return LODECTL_EXIT_OK;
		}
		if (state == NULL || strcmp(state, "failed") == 0) {
			const char *e =
			    json_string_value(json_object_get(o, "error"));
			fprintf(stderr, "lodectl: %s failed: %s\n", what,
			        e != NULL ? e : body);
			json_decref(o);
			return LODECTL_EXIT_REFUSED;
		}
		json_decref(o);
		if (mono_ms() > deadline) {
			fprintf(
			    stderr,
			    "lodectl: %s still running after %u s (operation "
			    "%" PRIu64 " on %s goes on)\n",
			    what, max_wait_s, op, admin);
			return LODECTL_EXIT_REFUSED;
		}
		sleep_ms(POLL_MS);
	}
}

/* Starts an operation; answers 202 {"op": ID} when accepted. */
static int start(const struct lodectl_global *g, const char *admin,
                 const char *method, const char *path, const char *req,
                 const char *what, unsigned max_wait_s, bool redirect)
{
	char body[4096];
	int st = 0;
	json_t *o;
	uint64_t op;

	if (lodectl_http(admin, method, path, req, &st, body, sizeof body) !=
	    0) {
		fprintf(stderr, "lodectl: %s\n", body);
		return LODECTL_EXIT_UNREACHABLE;
	}
	o = json_loads(body, 0, NULL);
	if (st == 409 && redirect &&
	    json_string_value(json_object_get(o, "leader_admin")) != NULL &&
	    json_string_value(json_object_get(o, "leader_admin"))[0] != '\0') {
		/* Leadership moves on the leader: ask it. */
		char leader[300];
		snprintf(leader, sizeof leader, "%s",
		         json_string_value(json_object_get(o, "leader_admin")));
		json_decref(o);
		return start(g, leader, method, path, req, what, max_wait_s,
		             false);
	}
	if (st != 202 || !json_is_integer(json_object_get(o, "op"))) {
		json_decref(o);
		return print_error(what, st, body);
	}
	op = (uint64_t)json_integer_value(json_object_get(o, "op"));
	json_decref(o);
	return follow(g, admin, what, op, max_wait_s);
}

int lodectl_cluster_main(const struct lodectl_global *g, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	uint64_t id = 0, other = 0;
	unsigned max_wait_s = 3600;
	bool has_other = false;
	char path[128], req[64], what[128];
	int i;

	if (sub == NULL || strcmp(sub, "help") == 0) {
		usage(sub == NULL ? stderr : stdout);
		return sub == NULL ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	if (strcmp(sub, "status") == 0) {
		if (argc != 2) {
			usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		return status_cmd(g);
	}
	if (argc < 3 || parse_id(argv[2], &id) != 0) {
		usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	for (i = 3; i < argc; i++) {
		uint64_t v;
		if ((strcmp(argv[i], "--with") == 0 ||
		     strcmp(argv[i], "--to") == 0) &&
		    i + 1 < argc && parse_id(argv[i + 1], &other) == 0 &&
		    other != 0) {
			/* --with for replace, --to for transfer-leader */
			if ((strcmp(argv[i], "--with") == 0) !=
			    (strcmp(sub, "replace") == 0)) {
				usage(stderr);
				return LODECTL_EXIT_USAGE;
			}
			has_other = true;
			i++;
		} else if (strcmp(argv[i], "--max-wait-s") == 0 &&
		           i + 1 < argc && parse_id(argv[i + 1], &v) == 0 &&
		           v > 0 && v < 1000000) {
			max_wait_s = (unsigned)v;
			i++;
		} else {
			usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	snprintf(req, sizeof req, "{}");
	if (strcmp(sub, "drain") == 0 && !has_other) {
		snprintf(path, sizeof path,
		         "/v1/cluster/nodes/%" PRIu64 "/drain", id);
		snprintf(what, sizeof what, "drain node %" PRIu64, id);
		return start(g, g->admin, "POST", path, req, what, max_wait_s,
		             false);
	}
	if ((strcmp(sub, "promote") == 0 || strcmp(sub, "demote") == 0) &&
	    !has_other) {
		snprintf(path, sizeof path, "/v1/cluster/nodes/%" PRIu64 "/%s",
		         id, sub);
		snprintf(what, sizeof what, "%s node %" PRIu64, sub, id);
		return start(g, g->admin, "POST", path, req, what, max_wait_s,
		             false);
	}
	if (strcmp(sub, "remove") == 0 && !has_other) {
		snprintf(path, sizeof path, "/v1/cluster/nodes/%" PRIu64, id);
		snprintf(what, sizeof what, "remove node %" PRIu64, id);
		return start(g, g->admin, "DELETE", path, NULL, what,
		             max_wait_s, false);
	}
	if (strcmp(sub, "replace") == 0) {
		snprintf(path, sizeof path,
		         "/v1/cluster/nodes/%" PRIu64 "/replace", id);
		if (has_other) {
			snprintf(req, sizeof req, "{\"with\":%" PRIu64 "}",
			         other);
			snprintf(what, sizeof what,
			         "replace node %" PRIu64 " with %" PRIu64, id,
			         other);
		} else {
			snprintf(what, sizeof what, "replace node %" PRIu64,
			         id);
		}
		return start(g, g->admin, "POST", path, req, what, max_wait_s,
		             false);
	}
	if (strcmp(sub, "transfer-leader") == 0) {
		snprintf(path, sizeof path,
		         "/v1/cluster/groups/%" PRIu64 "/transfer", id);
		if (has_other) {
			snprintf(req, sizeof req, "{\"to\":%" PRIu64 "}",
			         other);
		}
		snprintf(what, sizeof what, "leadership of group %" PRIu64, id);
		return start(g, g->admin, "POST", path, req, what, max_wait_s,
		             true);
	}
	usage(stderr);
	return LODECTL_EXIT_USAGE;
}
