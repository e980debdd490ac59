/* lodectl flow governance: FerricFlow governance over FSNP (docs/flow.md
 * "Governance"). Each subcommand is one governance opcode with the typed
 * body reference/flow.md 6.4 lists, routed as the server routes it
 * (budgets, limits and circuits by scope; approvals by approval id;
 * effects and ledgers by flow id and partition key; listings and the
 * overview go to any node, which asks every shard). Replies print as
 * values (--json: as JSON); a denial prints its code, message and map
 * on stderr and exits as a refusal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/flow_client.h"
#include "client/lodectl.h"
#include "wire/fsnp_opcode.h"

void lodectl_flow_governance_usage(FILE *f)
{
	fprintf(
	    f, "usage: lodectl [--fsnp HOST:PORT] flow governance OBJECT VERB "
	       "ARGS... [OPTIONS]\n\n"
	       "  budget get SCOPE | list | reserve SCOPE AMOUNT "
	       "[--limit N --window-ms MS]\n"
	       "         [--reservation-id ID] | commit SCOPE RESERVATION_ID "
	       "ACTUAL | release SCOPE RESERVATION_ID\n"
	       "  limit get SCOPE | list | lease SCOPE SHARD_ID AMOUNT TTL_MS "
	       "[--limit N]\n"
	       "        | spend SCOPE SHARD_ID AMOUNT | release SCOPE SHARD_ID "
	       "RESERVATION_ID...\n"
	       "  approval get ID | list [--status S] [--flow-id F] | request "
	       "ID FLOW_ID SCOPE\n"
	       "           [--timeout-ms MS] [--requested-by W] [--wait-state "
	       "S --transition-to S\n"
	       "           [--exhaust-to S] [--pk FLOW_PK]] | approve ID "
	       "APPROVER | reject ID APPROVER\n"
	       "  circuit get SCOPE | open SCOPE [--open-ms MS] "
	       "[--failure-threshold N] | close SCOPE\n"
	       "  effect get FLOW_ID EFFECT_KEY\n"
	       "  ledger FLOW_ID [--limit N] [--from-ms MS] [--to-ms MS] "
	       "[--rev]\n"
	       "  overview\n\n"
	       "Options: --pk PARTITION_KEY (effects and ledgers of a flow "
	       "created with one;\nlistings: a partition filter), --scope S "
	       "(listings), --limit N, --reason TEXT,\n--now MS. The ledger "
	       "of a budget, limit or circuit is `ledger SCOPE --pk "
	       "SCOPE`.\n");
}

enum route {
	R_NONE,  /* any node; listings ask every shard */
	R_SCOPE, /* the first argument is a scope */
	R_ID,    /* the first argument is an id (auto partition) */
	R_FLOW,  /* the first argument is a flow id, with --pk */
};

/* Positional argument kinds: 's' text, 'i' integer, 'L' the rest as a
 * list of text. */
static const struct gsub {
	const char *object, *verb;
	uint16_t opcode;
	enum route route;
	const char *kinds;
	const char *keys[4];
} gsubs[] = {
    {"budget", "get", FSNP_OP_FLOW_BUDGET_GET, R_SCOPE, "s", {"scope"}},
    {"budget", "list", FSNP_OP_FLOW_BUDGET_LIST, R_NONE, "", {NULL}},
    {"budget",
     "reserve",
     FSNP_OP_FLOW_BUDGET_RESERVE,
     R_SCOPE,
     "si",
     {"scope", "amount"}},
    {"budget",
     "commit",
     FSNP_OP_FLOW_BUDGET_COMMIT,
     R_SCOPE,
     "ssi",
     {"scope", "reservation_id", "actual_amount"}},
    {"budget",
     "release",
     FSNP_OP_FLOW_BUDGET_RELEASE,
     R_SCOPE,
     "ss",
     {"scope", "reservation_id"}},
    {"limit", "get", FSNP_OP_FLOW_LIMIT_GET, R_SCOPE, "s", {"scope"}},
    {"limit", "list", FSNP_OP_FLOW_LIMIT_LIST, R_NONE, "", {NULL}},
    {"limit",
     "lease",
     FSNP_OP_FLOW_LIMIT_LEASE,
     R_SCOPE,
     "siii",
     {"scope", "shard_id", "amount", "ttl_ms"}},
    {"limit",
     "spend",
     FSNP_OP_FLOW_LIMIT_SPEND,
     R_SCOPE,
     "sii",
     {"scope", "shard_id", "amount"}},
    {"limit",
     "release",
     FSNP_OP_FLOW_LIMIT_RELEASE,
     R_SCOPE,
     "siL",
     {"scope", "shard_id", "reservation_ids"}},
    {"approval", "get", FSNP_OP_FLOW_APPROVAL_GET, R_ID, "s", {"id"}},
    {"approval", "list", FSNP_OP_FLOW_APPROVAL_LIST, R_NONE, "", {NULL}},
    {"approval",
     "request",
     FSNP_OP_FLOW_APPROVAL_REQUEST,
     R_ID,
     "sss",
     {"id", "flow_id", "scope"}},
    {"approval",
     "approve",
     FSNP_OP_FLOW_APPROVAL_APPROVE,
     R_ID,
     "ss",
     {"id", "approver"}},
    {"approval",
     "reject",
     FSNP_OP_FLOW_APPROVAL_REJECT,
     R_ID,
     "ss",
     {"id", "approver"}},
    {"circuit", "get", FSNP_OP_FLOW_CIRCUIT_GET, R_SCOPE, "s", {"scope"}},
    {"circuit", "open", FSNP_OP_FLOW_CIRCUIT_OPEN, R_SCOPE, "s", {"scope"}},
    {"circuit", "close", FSNP_OP_FLOW_CIRCUIT_CLOSE, R_SCOPE, "s", {"scope"}},
    {"effect",
     "get",
     FSNP_OP_FLOW_EFFECT_GET,
     R_FLOW,
     "ss",
     {"id", "effect_key"}},
};

/* Options: flag, body key, integer. */
static const struct {
	const char *opt, *key;
	bool integer;
} gopts[] = {
    {"--pk", "partition_key", false},
    {"--scope", "scope", false},
    {"--status", "status", false},
    {"--flow-id", "flow_id", false},
    {"--reason", "reason", false},
    {"--requested-by", "requested_by", false},
    {"--reservation-id", "reservation_id", false},
    {"--limit", "limit", true},
    {"--window-ms", "window_ms", true},
    {"--timeout-ms", "timeout_ms", true},
    {"--expires-at", "expires_at_ms", true},
    {"--open-ms", "open_ms", true},
    {"--failure-threshold", "failure_threshold", true},
    {"--from-ms", "from_ms", true},
    {"--to-ms", "to_ms", true},
    {"--ttl-ms", "ttl_ms", true},
    {"--now", "now_ms", true},
    {"--wait-state", "wait_state", false},
    {"--transition-to", "transition_to", false},
    {"--exhaust-to", "exhaust_to", false},
};

static int put(struct fsnp_writer *w, const char *key, const char *v,
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

/* The subcommand named by argv[1] (and argv[2]); *used gets how many
 * words named it. */
static const struct gsub *find(int argc, char **argv, int *used)
{
	if (argc >= 2 && (strcmp(argv[1], "ledger") == 0 ||
	                  strcmp(argv[1], "overview") == 0)) {
		static const struct gsub ledger = {
		    "ledger", "",  FSNP_OP_FLOW_GOVERNANCE_LEDGER,
		    R_FLOW,   "s", {"id"}};
		static const struct gsub overview = {
		    "overview", "", FSNP_OP_FLOW_GOVERNANCE_OVERVIEW,
		    R_NONE,     "", {NULL}};
		*used = 1;
		return argv[1][0] == 'l' ? &ledger : &overview;
	}
	for (size_t k = 0; argc >= 3 && k < sizeof gsubs / sizeof gsubs[0];
	     k++) {
		if (strcmp(argv[1], gsubs[k].object) == 0 &&
		    strcmp(argv[2], gsubs[k].verb) == 0) {
			*used = 2;
			return &gsubs[k];
		}
	}
	return NULL;
}

int lodectl_flow_governance_main(const struct lodectl_global *g, int argc,
                                 char **argv)
{
	const struct gsub *sub;
	int used = 0, i, rv = LODECTL_EXIT_USAGE;
	size_t npos;
	struct wbuf body, out;
	struct fsnp_writer w;
	const char *first = NULL, *pk = NULL;
	char key[FLOW_CLIENT_KEY_MAX];
	size_t klen = 0;
	struct fsnp_sync *s;
	uint16_t status = 0;
	struct fsnp_val v;

	if (argc < 2 || strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		lodectl_flow_governance_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	sub = find(argc, argv, &used);
	if (sub == NULL) {
		fprintf(stderr, "lodectl: unknown flow governance command\n");
		lodectl_flow_governance_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	i = 1 + used;
	npos = strlen(sub->kinds);
	wbuf_init(&body);
	wbuf_init(&out);
	fsnp_w_init(&w, &body);
	fsnp_w_map_begin(&w);
	for (size_t p = 0; p < npos; p++) {
		if (i >= argc || strncmp(argv[i], "--", 2) == 0) {
			lodectl_flow_governance_usage(stderr);
			goto out;
		}
		if (p == 0) {
			first = argv[i];
		}
		if (sub->kinds[p] == 'L') {
			fsnp_w_key(&w, sub->keys[p]);
			fsnp_w_array_begin(&w);
			while (i < argc && strncmp(argv[i], "--", 2) != 0) {
				fsnp_w_str(&w, argv[i++]);
			}
			fsnp_w_array_end(&w);
			continue;
		}
		if (put(&w, sub->keys[p], argv[i++], sub->kinds[p] == 'i') !=
		    0) {
			goto out;
		}
	}
	for (; i < argc; i++) {
		const char *o = argv[i];
		bool found = false;
		if (strcmp(o, "--rev") == 0) {
			fsnp_w_key(&w, "rev");
			fsnp_w_bool(&w, true);
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "lodectl: option '%s' needs a value\n",
			        o);
			goto out;
		}
		for (size_t m = 0; m < sizeof gopts / sizeof gopts[0]; m++) {
			if (strcmp(o, gopts[m].opt) == 0) {
				found = true;
				if (put(&w, gopts[m].key, argv[i + 1],
				        gopts[m].integer) != 0) {
					goto out;
				}
			}
		}
		if (!found) {
			fprintf(
			    stderr,
			    "lodectl: unknown flow governance option '%s'\n",
			    o);
			goto out;
		}
		if (strcmp(o, "--pk") == 0) {
			pk = argv[i + 1];
		}
		i++;
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || body.oom) {
		fprintf(stderr, "lodectl: out of memory\n");
		rv = LODECTL_EXIT_REFUSED;
		goto out;
	}
	switch (sub->route) {
	case R_SCOPE:
		klen = flow_client_route_key(first, first, key);
		break;
	case R_ID:
		klen = flow_client_route_key(first, NULL, key);
		break;
	case R_FLOW:
		klen = flow_client_route_key(first, pk, key);
		break;
	default:
		break;
	}
	if (lodectl_fsnp_connect(g, &s) != 0) {
		rv = LODECTL_EXIT_UNREACHABLE;
		goto out;
	}
	rv = fsnp_sync_call(s, sub->opcode, klen ? key : NULL, klen, body.data,
	                    body.len, 0, &status, &out);
	if (rv != 0) {
		fprintf(stderr, "lodectl: %s\n", fsnp_client_strerror(rv));
		rv = rv == FSNP_CLIENT_ELOST || rv == FSNP_CLIENT_ETIMEDOUT
		         ? LODECTL_EXIT_UNREACHABLE
		         : LODECTL_EXIT_REFUSED;
	} else if (status != FSNP_STATUS_OK && !g->json &&
	           flow_client_decode(out.data, out.len, &v) == 0 &&
	           v.tag == FSNP_MAP &&
	           fsnp_map_get(&v, "reason", &(struct fsnp_val){0}) == 0) {
		/* A governance denial: its code, message and context. */
		struct fsnp_bytes code = {NULL, 0}, msg = {NULL, 0};
		fsnp_map_bin(&v, "code", &code);
		fsnp_map_bin(&v, "message", &msg);
		fprintf(stderr, "(denied %.*s) %.*s\n", (int)code.len,
		        code.ptr ? (const char *)code.ptr : "", (int)msg.len,
		        msg.ptr ? (const char *)msg.ptr : "");
		lodectl_print_value(g, stderr, &v);
		rv = LODECTL_EXIT_REFUSED;
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
