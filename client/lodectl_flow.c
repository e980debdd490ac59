/* lodectl flow: FerricFlow over FSNP (client/flow_client.h). Each
 * subcommand is one Flow opcode with a typed body, routed to the flow's
 * shard; records print as "field: value" lines (--json: the reply value
 * as JSON), claims one block per claimed flow, history one line per
 * event. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/flow_client.h"
#include "client/lodectl.h"
#include "wire/fsnp_opcode.h"

static void flow_usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [--fsnp HOST:PORT] flow SUBCOMMAND ARGS... "
	        "[OPTIONS]\n\n"
	        "  create ID TYPE [--state S] [--payload TEXT] [--run-at MS] "
	        "[--priority N]\n"
	        "                 [--idempotent]\n"
	        "  get ID [--payload]\n"
	        "  claim TYPE WORKER [--state S] [--lease-ms N] [--limit N] "
	        "[--block-ms N]\n"
	        "  complete ID LEASE_TOKEN FENCING [--result TEXT]\n"
	        "  fail ID LEASE_TOKEN FENCING [--error TEXT]\n"
	        "  retry ID LEASE_TOKEN FENCING [--error TEXT] [--run-at MS]\n"
	        "  transition ID FROM_STATE TO_STATE FENCING [--lease-token "
	        "T] [--run-at MS]\n"
	        "  cancel ID FENCING [--lease-token T] [--reason TEXT]\n"
	        "  extend ID LEASE_TOKEN FENCING [--lease-ms N]\n"
	        "  history ID [--count N] [--rev]\n"
	        "  query 'FQL1 QUERY' [--param NAME=VALUE] [--int NAME=N] "
	        "[--cursor TOKEN]\n"
	        "  schedule SUBCOMMAND ...  (lodectl flow schedule help)\n"
	        "  governance OBJECT VERB ...  (lodectl flow governance "
	        "help)\n\n"
	        "Every subcommand takes --pk PARTITION_KEY (a flow created "
	        "with one is\naddressed with it) and --now MS.\n");
}

struct sub {
	const char *name;
	uint16_t opcode;
	int npos; /* positional arguments after the subcommand */
};

static const struct sub subs[] = {
    {"create", FSNP_OP_FLOW_CREATE, 2},
    {"get", FSNP_OP_FLOW_GET, 1},
    {"claim", FSNP_OP_FLOW_CLAIM_DUE, 2},
    {"complete", FSNP_OP_FLOW_COMPLETE, 3},
    {"fail", FSNP_OP_FLOW_FAIL, 3},
    {"retry", FSNP_OP_FLOW_RETRY, 3},
    {"transition", FSNP_OP_FLOW_TRANSITION, 4},
    {"cancel", FSNP_OP_FLOW_CANCEL, 2},
    {"extend", FSNP_OP_FLOW_EXTEND_LEASE, 3},
    {"history", FSNP_OP_FLOW_HISTORY, 1},
};

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (s[0] == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "lodectl: '%s' is not a non-negative integer\n",
		        s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_fence(const char *s, struct flow_args *a)
{
	return parse_int(s, &a->fencing_token);
}

/* The positional arguments of `sub` into a. */
static int parse_pos(const struct sub *sub, char **pos, struct flow_args *a)
{
	switch (sub->opcode) {
	case FSNP_OP_FLOW_CREATE:
		a->id = pos[0];
		a->type = pos[1];
		return 0;
	case FSNP_OP_FLOW_CLAIM_DUE:
		a->type = pos[0];
		a->worker = pos[1];
		return 0;
	case FSNP_OP_FLOW_GET:
	case FSNP_OP_FLOW_HISTORY:
		a->id = pos[0];
		return 0;
	case FSNP_OP_FLOW_TRANSITION:
		a->id = pos[0];
		a->from_state = pos[1];
		a->to_state = pos[2];
		return parse_fence(pos[3], a);
	case FSNP_OP_FLOW_CANCEL:
		a->id = pos[0];
		return parse_fence(pos[1], a);
	default: /* complete, fail, retry, extend */
		a->id = pos[0];
		a->lease_token = pos[1];
		return parse_fence(pos[2], a);
	}
}

/* One option at argv[*i] (its value after it). */
static int parse_opt(int argc, char **argv, int *i, struct flow_args *a)
{
	const char *o = argv[*i];
	const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	static const struct {
		const char *name;
		size_t off;
	} ints[] = {
	    {"--run-at", offsetof(struct flow_args, run_at_ms)},
	    {"--priority", offsetof(struct flow_args, priority)},
	    {"--lease-ms", offsetof(struct flow_args, lease_ms)},
	    {"--limit", offsetof(struct flow_args, limit)},
	    {"--block-ms", offsetof(struct flow_args, block_ms)},
	    {"--count", offsetof(struct flow_args, count)},
	    {"--now", offsetof(struct flow_args, now_ms)},
	};

	if (strcmp(o, "--idempotent") == 0) {
		a->idempotent = true;
		return 0;
	}
	if (strcmp(o, "--rev") == 0) {
		a->rev = true;
		return 0;
	}
	if (strcmp(o, "--payload") == 0 && a->type == NULL) {
		a->payload = true; /* get: with payload */
		return 0;
	}
	if (v == NULL) {
		fprintf(stderr, "lodectl: option '%s' needs a value\n", o);
		return -1;
	}
	(*i)++;
	for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
		if (strcmp(o, ints[k].name) == 0) {
			return parse_int(v,
			                 (int64_t *)((char *)a + ints[k].off));
		}
	}
	if (strcmp(o, "--pk") == 0) {
		a->partition_key = v;
	} else if (strcmp(o, "--state") == 0) {
		a->state = v;
	} else if (strcmp(o, "--lease-token") == 0) {
		a->lease_token = v;
	} else if (strcmp(o, "--payload") == 0 || strcmp(o, "--result") == 0 ||
	           strcmp(o, "--error") == 0 || strcmp(o, "--reason") == 0) {
		a->data = v;
		a->data_len = strlen(v);
	} else {
		fprintf(stderr, "lodectl: unknown flow option '%s'\n", o);
		return -1;
	}
	return 0;
}

static void print_bytes(const char *name, struct fsnp_bytes b)
{
	if (b.len > 0) {
		printf("%-18s %.*s\n", name, (int)b.len, (const char *)b.ptr);
	}
}

static void print_record(const struct lodectl_global *g,
                         const struct flow_record *r)
{
	print_bytes("id:", r->id);
	print_bytes("type:", r->type);
	print_bytes("state:", r->state);
	print_bytes("run_state:", r->run_state);
	print_bytes("partition_key:", r->partition_key);
	printf("%-18s %" PRId64 "\n", "version:", r->version);
	printf("%-18s %" PRId64 "\n", "attempts:", r->attempts);
	printf("%-18s %" PRId64 "\n", "fencing_token:", r->fencing_token);
	print_bytes("lease_owner:", r->lease_owner);
	print_bytes("lease_token:", r->lease_token);
	if (r->has_lease_deadline_ms && r->lease_deadline_ms > 0) {
		printf("%-18s %" PRId64 "\n",
		       "lease_deadline_ms:", r->lease_deadline_ms);
	}
	if (r->has_next_run_at_ms) {
		printf("%-18s %" PRId64 "\n",
		       "next_run_at_ms:", r->next_run_at_ms);
	}
	if (r->has_payload) {
		printf("%-18s ", "payload:");
		lodectl_print_value(g, stdout, &r->payload);
	}
}

/* Prints a successful reply of `opcode`; returns the exit status. */
static int print_ok(const struct lodectl_global *g, uint16_t opcode,
                    const struct fsnp_val *v)
{
	struct flow_record recs[64];
	struct flow_event e;
	size_t n = 0;

	if (g->json || flow_client_is_ok(v)) {
		lodectl_print_value(g, stdout, v);
		return LODECTL_EXIT_OK;
	}
	switch (opcode) {
	case FSNP_OP_FLOW_GET:
	case FSNP_OP_FLOW_EXTEND_LEASE:
		if (flow_client_parse_record(v, &recs[0]) ==
		    FLOW_CLIENT_ENOTFOUND) {
			printf("(not found)\n");
			return LODECTL_EXIT_REFUSED;
		}
		if (flow_client_parse_record(v, &recs[0]) != 0) {
			break;
		}
		print_record(g, &recs[0]);
		return LODECTL_EXIT_OK;
	case FSNP_OP_FLOW_CLAIM_DUE:
		if (flow_client_parse_claims(v, recs, 64, &n) != 0) {
			break;
		}
		if (n == 0) {
			printf("(nothing due)\n");
		}
		for (size_t i = 0; i < n; i++) {
			if (i > 0) {
				printf("\n");
			}
			print_record(g, &recs[i]);
		}
		return LODECTL_EXIT_OK;
	case FSNP_OP_FLOW_HISTORY:
		if (flow_client_parse_event(v, 0, &e, &n) ==
		    FLOW_CLIENT_EPROTO) {
			break;
		}
		for (size_t i = 0; i < n; i++) {
			if (flow_client_parse_event(v, i, &e, NULL) != 0) {
				return LODECTL_EXIT_REFUSED;
			}
			printf("%-20.*s %-15.*s state=%.*s version=%" PRId64
			       " fencing=%" PRId64 " attempts=%" PRId64 "\n",
			       (int)e.event_id.len,
			       (const char *)e.event_id.ptr, (int)e.event.len,
			       (const char *)e.event.ptr, (int)e.state.len,
			       (const char *)e.state.ptr, e.version,
			       e.fencing_token, e.attempts);
		}
		return LODECTL_EXIT_OK;
	default:
		break;
	}
	lodectl_print_value(g, stdout, v);
	return LODECTL_EXIT_OK;
}

int lodectl_flow_main(const struct lodectl_global *g, int argc, char **argv)
{
	const struct sub *sub = NULL;
	struct flow_args a;
	struct fsnp_sync *s;
	struct fsnp_val v;
	struct wbuf out;
	uint16_t status = 0;
	int rv, i;

	if (argc < 2 || strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		flow_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	if (strcmp(argv[1], "schedule") == 0) {
		return lodectl_flow_schedule_main(g, argc - 1, argv + 1);
	}
	if (strcmp(argv[1], "governance") == 0) {
		return lodectl_flow_governance_main(g, argc - 1, argv + 1);
	}
	if (strcmp(argv[1], "query") == 0) {
		return lodectl_flow_query_main(g, argc - 1, argv + 1);
	}
	for (size_t k = 0; k < sizeof subs / sizeof subs[0]; k++) {
		if (strcmp(argv[1], subs[k].name) == 0) {
			sub = &subs[k];
		}
	}
	if (sub == NULL) {
		fprintf(stderr, "lodectl: unknown flow command '%s'\n",
		        argv[1]);
		flow_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	flow_args_init(&a);
	a.payload = sub->opcode == FSNP_OP_FLOW_CLAIM_DUE;
	if (argc < 2 + sub->npos || parse_pos(sub, argv + 2, &a) != 0) {
		flow_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	for (i = 2 + sub->npos; i < argc; i++) {
		if (parse_opt(argc, argv, &i, &a) != 0) {
			return LODECTL_EXIT_USAGE;
		}
	}
	if (lodectl_fsnp_connect(g, &s) != 0) {
		return LODECTL_EXIT_UNREACHABLE;
	}
	wbuf_init(&out);
	rv = flow_client_sync(s, sub->opcode, &a, &status, &out);
	if (rv < 0) {
		fprintf(stderr, "lodectl: missing arguments for flow %s\n",
		        sub->name);
		rv = LODECTL_EXIT_USAGE;
	} else if (rv != 0) {
		fprintf(stderr, "lodectl: %s\n", fsnp_client_strerror(rv));
		rv = rv == FSNP_CLIENT_ELOST || rv == FSNP_CLIENT_ETIMEDOUT
		         ? LODECTL_EXIT_UNREACHABLE
		         : LODECTL_EXIT_REFUSED;
	} else if (status != FSNP_STATUS_OK) {
		rv = lodectl_print_reply(g, status, &out);
	} else if (flow_client_decode(out.data, out.len, &v) != 0) {
		fprintf(stderr, "lodectl: malformed reply\n");
		rv = LODECTL_EXIT_REFUSED;
	} else {
		rv = print_ok(g, sub->opcode, &v);
	}
	wbuf_free(&out);
	fsnp_sync_close(s);
	return rv;
}
