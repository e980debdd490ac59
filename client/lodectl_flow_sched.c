/* lodectl flow schedule: FerricFlow schedules over FSNP. Each subcommand
 * is one FLOW.SCHEDULE.* opcode with a typed body, routed by the schedule
 * id (list and fire-due go to any node, which asks every shard); replies
 * print as values (--json: as JSON). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/flow_client.h"
#include "client/lodectl.h"
#include "wire/fsnp_opcode.h"

void lodectl_flow_schedule_usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [--fsnp HOST:PORT] flow schedule SUBCOMMAND "
	        "ARGS... [OPTIONS]\n\n"
	        "  create ID TARGET_TYPE (--every MS | --cron EXPR [--tz ZONE] "
	        "| --at MS\n"
	        "                 | --delay MS) [--start-at MS] [--id-prefix P]"
	        " [--target-id ID]\n"
	        "                 [--overlap allow|skip|queue_after_previous|"
	        "fail_schedule]\n"
	        "                 [--retry-ms MS] [--max-fires N] [--end-at MS]"
	        " [--state S]\n"
	        "                 [--pk TARGET_PARTITION_KEY] [--overwrite]\n"
	        "  get ID\n"
	        "  list [--state S|all] [--kind K] [--target-type T] [--count "
	        "N] [--rev]\n"
	        "  pause ID\n"
	        "  resume ID\n"
	        "  fire ID [--fire-at MS]\n"
	        "  fire-due [--limit N]\n"
	        "  delete ID\n\n"
	        "Every subcommand takes --now MS.\n");
}

static const struct {
	const char *name;
	uint16_t opcode;
	bool id;
} ssubs[] = {
    {"create", FSNP_OP_FLOW_SCHEDULE_CREATE, true},
    {"get", FSNP_OP_FLOW_SCHEDULE_GET, true},
    {"list", FSNP_OP_FLOW_SCHEDULE_LIST, false},
    {"pause", FSNP_OP_FLOW_SCHEDULE_PAUSE, true},
    {"resume", FSNP_OP_FLOW_SCHEDULE_RESUME, true},
    {"fire", FSNP_OP_FLOW_SCHEDULE_FIRE, true},
    {"fire-due", FSNP_OP_FLOW_SCHEDULE_FIRE_DUE, false},
    {"delete", FSNP_OP_FLOW_SCHEDULE_DELETE, true},
};

/* Options: name, body key, where (0 top, 1 target), integer. */
static const struct {
	const char *opt;
	const char *key;
	int target;
	bool integer;
} sopts[] = {
    {"--every", "every_ms", 0, true},
    {"--cron", "cron", 0, false},
    {"--tz", "timezone", 0, false},
    {"--at", "at_ms", 0, true},
    {"--delay", "delay_ms", 0, true},
    {"--start-at", "start_at_ms", 0, true},
    {"--overlap", "overlap_policy", 0, false},
    {"--retry-ms", "overlap_retry_ms", 0, true},
    {"--max-fires", "max_fires", 0, true},
    {"--end-at", "end_at_ms", 0, true},
    {"--fire-at", "fire_at_ms", 0, true},
    {"--limit", "limit", 0, true},
    {"--count", "count", 0, true},
    {"--kind", "kind", 0, false},
    {"--target-type", "target_type", 0, false},
    {"--now", "now_ms", 0, true},
    {"--id-prefix", "id_prefix", 1, false},
    {"--target-id", "id", 1, false},
    {"--pk", "partition_key", 1, false},
};

static int put_value(struct fsnp_writer *w, const char *key, const char *v,
                     bool integer)
{
	fsnp_w_key(w, key);
	if (integer) {
		char *end;
		long long n = strtoll(v, &end, 10);
		if (v[0] == '\0' || *end != '\0' || n < 0) {
			fprintf(stderr,
			        "lodectl: '%s' is not a non-negative integer\n",
			        v);
			return -1;
		}
		fsnp_w_i64(w, n);
	} else {
		fsnp_w_str(w, v);
	}
	return 0;
}

int lodectl_flow_schedule_main(const struct lodectl_global *g, int argc,
                               char **argv)
{
	int sub = -1, i = 2, rv;
	struct wbuf body, out;
	struct fsnp_writer w;
	const char *id = NULL, *type = NULL, *state = NULL;
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen = 0;
	struct fsnp_sync *s;
	uint16_t status = 0;
	struct fsnp_val v;
	bool opcode_create;

	if (argc < 2 || strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		lodectl_flow_schedule_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	for (size_t k = 0; k < sizeof ssubs / sizeof ssubs[0]; k++) {
		if (strcmp(argv[1], ssubs[k].name) == 0) {
			sub = (int)k;
		}
	}
	if (sub < 0) {
		fprintf(stderr, "lodectl: unknown flow schedule command '%s'\n",
		        argv[1]);
		lodectl_flow_schedule_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	opcode_create = ssubs[sub].opcode == FSNP_OP_FLOW_SCHEDULE_CREATE;
	if (ssubs[sub].id) {
		if (argc < 3 || (opcode_create && argc < 4)) {
			lodectl_flow_schedule_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		id = argv[i++];
		if (opcode_create) {
			type = argv[i++];
		}
	}
	wbuf_init(&body);
	wbuf_init(&out);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	if (id != NULL) {
		fsnp_w_key(&w, "id");
		fsnp_w_str(&w, id);
	}
	rv = LODECTL_EXIT_USAGE;
	/* Top-level options first, then the target's. */
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && opcode_create) {
			fsnp_w_key(&w, "target");
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "type");
			fsnp_w_str(&w, type);
		}
		for (int k = i; k < argc; k++) {
			const char *o = argv[k];
			bool found = false;
			if (strcmp(o, "--overwrite") == 0 ||
			    strcmp(o, "--rev") == 0) {
				if (pass == 0) {
					fsnp_w_key(&w, o + 2);
					fsnp_w_bool(&w, true);
				}
				continue;
			}
			if (k + 1 >= argc) {
				fprintf(stderr,
				        "lodectl: option '%s' needs a value\n",
				        o);
				goto out;
			}
			if (strcmp(o, "--state") == 0) {
				/* list: a filter; create: the target's state */
				state = argv[++k];
				if (pass == (opcode_create ? 1 : 0)) {
					fsnp_w_key(&w, "state");
					fsnp_w_str(&w, state);
				}
				continue;
			}
			for (size_t m = 0; m < sizeof sopts / sizeof sopts[0];
			     m++) {
				if (strcmp(o, sopts[m].opt) != 0) {
					continue;
				}
				found = true;
				if (sopts[m].target == pass &&
				    put_value(&w, sopts[m].key, argv[k + 1],
				              sopts[m].integer) != 0) {
					goto out;
				}
			}
			if (!found) {
				fprintf(stderr,
				        "lodectl: unknown flow schedule option "
				        "'%s'\n",
				        o);
				goto out;
			}
			k++;
		}
		if (pass == 1 && opcode_create) {
			fsnp_w_map_end(&w);
		}
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || body.oom) {
		fprintf(stderr, "lodectl: out of memory\n");
		rv = LODECTL_EXIT_REFUSED;
		goto out;
	}
	if (id != NULL) {
		klen = flow_client_route_key(id, NULL, key);
	}
	if (lodectl_fsnp_connect(g, &s) != 0) {
		rv = LODECTL_EXIT_UNREACHABLE;
		goto out;
	}
	rv = fsnp_sync_call(s, ssubs[sub].opcode, klen ? key : NULL, klen,
	                    body.data, body.len, 0, &status, &out);
	if (rv != 0) {
		fprintf(stderr, "lodectl: %s\n", fsnp_client_strerror(rv));
		rv = rv == FSNP_CLIENT_ELOST || rv == FSNP_CLIENT_ETIMEDOUT
		         ? LODECTL_EXIT_UNREACHABLE
		         : LODECTL_EXIT_REFUSED;
	} else if (status != FSNP_STATUS_OK) {
		rv = lodectl_print_reply(g, status, &out);
	} else if (flow_client_decode(out.data, out.len, &v) != 0) {
		fprintf(stderr, "lodectl: malformed reply\n");
		rv = LODECTL_EXIT_REFUSED;
	} else if (v.tag == FSNP_NIL) {
		printf("(not found)\n");
		rv = LODECTL_EXIT_REFUSED;
	} else {
		lodectl_print_value(g, stdout, &v);
		rv = LODECTL_EXIT_OK;
	}
	fsnp_sync_close(s);
out:
	wbuf_free(&body);
	wbuf_free(&out);
	return rv;
}
