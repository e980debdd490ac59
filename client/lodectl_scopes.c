/* lodectl stream|cache: register, list, describe and delete Felix streams
 * and caches through the admin API (/v1/streams, /v1/caches). A node
 * answers a write once the meta group committed it (201 / 200); an older
 * node, or one that could not wait, answers 202 "accepted", and the command
 * then polls until the change is visible. Either way it returns after the
 * commit. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lodectl.h"

#define WAIT_MS 15000

struct kind {
	const char *word;       /* "stream" */
	const char *collection; /* "/v1/streams" */
	const char *list_key;   /* "streams" */
	int retention;          /* accepts retention options */
};

static const struct kind streams = {"stream", "/v1/streams", "streams", 1};
static const struct kind caches = {"cache", "/v1/caches", "caches", 0};

static void usage(const struct kind *k, FILE *out)
{
	fprintf(out,
	        "usage: lodectl [--admin HOST:PORT] %s create TENANT/NS/NAME "
	        "[--shards K]%s\n"
	        "       lodectl %s list [--tenant T] [--namespace NS]\n"
	        "       lodectl %s describe TENANT/NS/NAME\n"
	        "       lodectl %s delete TENANT/NS/NAME\n"
	        "Under Felix JWT auth, create and delete need a token of the "
	        "tenant granting\nns.manage on NS in $LODESTONE_ADMIN_TOKEN "
	        "(lodectl felix token --help).\n",
	        k->word,
	        k->retention ? " [--retention-bytes B] [--retention-ms T]" : "",
	        k->word, k->word, k->word);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int parse_u64(const char *s, unsigned long long *v)
{
	char *end;
	if (*s == '\0' || *s == '-') {
		return -1;
	}
	*v = strtoull(s, &end, 10);
	return *end == '\0' ? 0 : -1;
}

static void print_error(const char *what, int status, const char *body)
{
	json_error_t e;
	json_t *o = json_loads(body, 0, &e);
	const char *msg = json_string_value(json_object_get(o, "error"));
	fprintf(stderr, "lodectl: %s: %s (HTTP %d)\n", what, msg ? msg : body,
	        status);
	json_decref(o);
}

/* Polls GET path until `want` status (and, for 200, `shards`). */
static int wait_for(const struct lodectl_global *g, const char *path, int want,
                    long shards, char *out, size_t cap)
{
	int st = 0;
	for (unsigned waited = 0; waited < WAIT_MS; waited += 50) {
		if (lodectl_http(g->admin, "GET", path, NULL, &st, out, cap) !=
		    0) {
			fprintf(stderr, "lodectl: %s\n", out);
			return 1;
		}
		if (st == want) {
			if (want != 200) {
				return 0;
			}
			json_error_t e;
			json_t *o = json_loads(out, 0, &e);
			long have = (long)json_integer_value(
			    json_object_get(o, "shards"));
			json_decref(o);
			if (shards < 0 || have == shards) {
				return 0;
			}
		} else if (st != 202 && st != 200 && st != 404) {
			print_error("failed", st, out);
			return 1;
		}
		sleep_ms(50);
	}
	fprintf(stderr, "lodectl: not visible after %d ms (HTTP %d)\n", WAIT_MS,
	        st);
	return 1;
}

static int cmd_create(const struct lodectl_global *g, const struct kind *k,
                      int argc, char **argv)
{
	unsigned long long shards = 1, rb = 0, rm = 0;
	if (argc < 1) {
		usage(k, stderr);
		return 2;
	}
	const char *name = argv[0];
	for (int i = 1; i < argc; i += 2) { /* option, value pairs */
		unsigned long long *dst = NULL;
		if (strcmp(argv[i], "--shards") == 0) {
			dst = &shards;
		} else if (k->retention &&
		           strcmp(argv[i], "--retention-bytes") == 0) {
			dst = &rb;
		} else if (k->retention &&
		           strcmp(argv[i], "--retention-ms") == 0) {
			dst = &rm;
		}
		if (dst == NULL || i + 1 >= argc ||
		    parse_u64(argv[i + 1], dst) != 0) {
			fprintf(stderr, "lodectl: bad option '%s'\n", argv[i]);
			usage(k, stderr);
			return 2;
		}
	}
	char path[2048], body[256], out[65536];
	int st;
	snprintf(path, sizeof path, "%s/%s", k->collection, name);
	if (k->retention) {
		snprintf(body, sizeof body,
		         "{\"shards\":%llu,\"retention_bytes\":%llu,"
		         "\"retention_ms\":%llu}",
		         shards, rb, rm);
	} else {
		snprintf(body, sizeof body, "{\"shards\":%llu}", shards);
	}
	if (lodectl_http(g->admin, "POST", path, body, &st, out, sizeof out) !=
	    0) {
		fprintf(stderr, "lodectl: %s\n", out);
		return 1;
	}
	if (st != 201 && st != 202) {
		print_error("create", st, out);
		return 1;
	}
	if (wait_for(g, path, 200, (long)shards, out, sizeof out) != 0) {
		return 1;
	}
	printf("%s %s: %llu shards\n", k->word, name, shards);
	return 0;
}

static int cmd_delete(const struct lodectl_global *g, const struct kind *k,
                      int argc, char **argv)
{
	char path[2048], out[65536];
	int st;
	if (argc != 1) {
		usage(k, stderr);
		return 2;
	}
	snprintf(path, sizeof path, "%s/%s", k->collection, argv[0]);
	if (lodectl_http(g->admin, "DELETE", path, NULL, &st, out,
	                 sizeof out) != 0) {
		fprintf(stderr, "lodectl: %s\n", out);
		return 1;
	}
	if (st != 200 && st != 202) {
		print_error("delete", st, out);
		return 1;
	}
	if (wait_for(g, path, 404, -1, out, sizeof out) != 0) {
		return 1;
	}
	printf("%s %s deleted\n", k->word, argv[0]);
	return 0;
}

static int cmd_describe(const struct lodectl_global *g, const struct kind *k,
                        int argc, char **argv)
{
	char path[2048], out[1 << 16];
	int st;
	if (argc != 1) {
		usage(k, stderr);
		return 2;
	}
	snprintf(path, sizeof path, "%s/%s", k->collection, argv[0]);
	if (lodectl_http(g->admin, "GET", path, NULL, &st, out, sizeof out) !=
	    0) {
		fprintf(stderr, "lodectl: %s\n", out);
		return 1;
	}
	if (st != 200) {
		print_error("describe", st, out);
		return 1;
	}
	json_error_t e;
	json_t *o = json_loads(out, 0, &e);
	char *pretty = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
	printf("%s\n", pretty ? pretty : out);
	free(pretty);
	json_decref(o);
	return 0;
}

static int cmd_list(const struct lodectl_global *g, const struct kind *k,
                    int argc, char **argv)
{
	char path[2048], out[1 << 20];
	const char *tenant = NULL, *ns = NULL;
	int st;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc) {
			tenant = argv[++i];
		} else if (strcmp(argv[i], "--namespace") == 0 &&
		           i + 1 < argc) {
			ns = argv[++i];
		} else {
			usage(k, stderr);
			return 2;
		}
	}
	snprintf(path, sizeof path, "%s%s%s%s%s%s", k->collection,
	         tenant || ns ? "?" : "", tenant ? "tenant=" : "",
	         tenant ? tenant : "", tenant && ns ? "&" : "",
	         ns ? "namespace=" : "");
	if (ns != NULL) {
		strncat(path, ns, sizeof path - strlen(path) - 1);
	}
	static char big[1 << 20];
	(void)out;
	if (lodectl_http(g->admin, "GET", path, NULL, &st, big, sizeof big) !=
	    0) {
		fprintf(stderr, "lodectl: %s\n", big);
		return 1;
	}
	if (st != 200) {
		print_error("list", st, big);
		return 1;
	}
	json_error_t e;
	json_t *o = json_loads(big, 0, &e);
	json_t *arr = json_object_get(o, k->list_key);
	size_t i;
	json_t *it;
	json_array_foreach(arr, i, it)
	{
		printf("%s/%s/%s\tshards=%lld",
		       json_string_value(json_object_get(it, "tenant")),
		       json_string_value(json_object_get(it, "namespace")),
		       json_string_value(json_object_get(it, "name")),
		       (long long)json_integer_value(
		           json_object_get(it, "shards")));
		if (k->retention) {
			printf("\tretention_bytes=%lld\tretention_ms=%lld",
			       (long long)json_integer_value(
			           json_object_get(it, "retention_bytes")),
			       (long long)json_integer_value(
			           json_object_get(it, "retention_ms")));
		}
		printf("\n");
	}
	json_decref(o);
	return 0;
}

static int family(const struct lodectl_global *g, const struct kind *k,
                  int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(k, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "create") == 0) {
		return cmd_create(g, k, argc - 2, argv + 2);
	}
	if (strcmp(cmd, "delete") == 0) {
		return cmd_delete(g, k, argc - 2, argv + 2);
	}
	if (strcmp(cmd, "describe") == 0) {
		return cmd_describe(g, k, argc - 2, argv + 2);
	}
	if (strcmp(cmd, "list") == 0) {
		return cmd_list(g, k, argc - 2, argv + 2);
	}
	fprintf(stderr, "lodectl: unknown %s command '%s'\n", k->word, cmd);
	usage(k, stderr);
	return 2;
}

int lodectl_stream_main(const struct lodectl_global *g, int argc, char **argv)
{
	return family(g, &streams, argc, argv);
}

int lodectl_cache_main(const struct lodectl_global *g, int argc, char **argv)
{
	return family(g, &caches, argc, argv);
}
