/* lodectl felix: publish, subscribe, caches, counters, consumer groups,
 * idempotent producers and cache watches over Felix QUIC with
 * client/felix_client.h, one call per command on a fresh connection. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/felix_client.h"
#include "client/lodectl.h"

#define WAIT_MS 30000

struct ctx {
	uv_loop_t loop;
	struct felix_client *c;
	bool done;
	int status;
	char message[1024];
	struct felix_msg reply;
	bool has_reply;
	/* subscribe, watch */
	uint64_t want, got;
	bool ended;
	uint64_t producer_id; /* producer_init's answer */
};

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: lodectl felix [--felix HOST:PORT] [--tenant T] "
	        "[--token TOKEN] [--ca FILE] [--server-name NAME] COMMAND\n"
	        "  publish NS/STREAM [--key K] [--ack none|per_message|"
	        "per_batch] MESSAGE...\n"
	        "  subscribe NS/STREAM [--shard N] [--from earliest|latest|"
	        "OFFSET] [--count N]\n"
	        "  cache-put NS/CACHE KEY VALUE [--ttl-ms T]\n"
	        "  cache-get NS/CACHE KEY\n"
	        "  cache-delete NS/CACHE KEY\n"
	        "  counter-add NS/CACHE KEY DELTA\n"
	        "  counter-get NS/CACHE KEY\n"
	        "  group-poll NS/STREAM GROUP [--shard N] [--max N] "
	        "[--wait-ms MS]\n"
	        "  group-ack|group-nack|group-discard|group-redrive NS/STREAM "
	        "GROUP OFFSET [--shard N]\n"
	        "  group-dead-letters NS/STREAM GROUP [--shard N]\n"
	        "  produce-idempotent NS/STREAM [--key K] [--producer ID "
	        "--sequence N] MESSAGE...\n"
	        "  watch NS/CACHE (--key K | --prefix P) [--shard N] "
	        "[--from OFFSET] [--retained] [--count N]\n"
	        "  keygen, token: signing keys and JWTs (lodectl felix token "
	        "--help)\n"
	        "Defaults: --felix 127.0.0.1:5000, --tenant t1, --token "
	        "$LODESTONE_FELIX_TOKEN or 'dev', --server-name localhost.\n");
}

static void on_ready(void *data, struct felix_client *c, int status,
                     const char *message)
{
	struct ctx *x = data;
	(void)c;
	x->status = status;
	snprintf(x->message, sizeof x->message, "%s", message);
	x->done = true;
}

static void on_ack(void *data, int status, const char *message)
{
	struct ctx *x = data;
	x->status = status;
	snprintf(x->message, sizeof x->message, "%s", message ? message : "");
	x->done = true;
}

static void on_reply(void *data, int status, const struct felix_msg *reply,
                     const char *message)
{
	struct ctx *x = data;
	x->status = status;
	snprintf(x->message, sizeof x->message, "%s", message ? message : "");
	if (reply != NULL) {
		/* Print here: the message is valid during the call only. */
		switch (reply->type) {
		case FELIX_MSG_CACHE_VALUE:
			if (reply->u.cache_value.has_value) {
				fwrite(reply->u.cache_value.value.data, 1,
				       reply->u.cache_value.value.len, stdout);
				printf("\n");
			} else {
				printf("(nil)\n");
			}
			break;
		case FELIX_MSG_COUNTER_VALUE:
			if (reply->u.counter_value.has_value) {
				printf("%" PRId64 "\n",
				       reply->u.counter_value.value);
			} else {
				printf("(nil)\n");
			}
			break;
		case FELIX_MSG_CACHE_OK:
			printf("OK\n");
			break;
		case FELIX_MSG_GROUP_RECORDS:
			/* offset, attempts, payload: one record a line */
			for (size_t i = 0;
			     i < reply->u.group_records.records.count; i++) {
				const struct felix_group_record *g =
				    &reply->u.group_records.records.items[i];
				printf("%" PRIu64 "\t%u\t", g->offset,
				       (unsigned)g->attempts);
				fwrite(g->payload.data, 1, g->payload.len,
				       stdout);
				printf("\n");
			}
			if (reply->u.group_records.records.count == 0) {
				printf("(no records)\n");
			}
			break;
		case FELIX_MSG_GROUP_DEAD_LETTER_LIST:
			for (size_t i = 0;
			     i < reply->u.group_dead_letter_list.offsets.count;
			     i++) {
				printf("%" PRIu64 "\n",
				       reply->u.group_dead_letter_list.offsets
				           .items[i]);
			}
			break;
		case FELIX_MSG_PRODUCER_INIT_OK:
			x->producer_id = reply->u.producer_init_ok.producer_id;
			break;
		case FELIX_MSG_PUBLISH_REFUSED: {
			const struct felix_refusal *r =
			    &reply->u.publish_refused.reason;
			static const char *const names[] = {
			    "sequence_gap", "unknown_producer",
			    "sequence_expired", "not_leader"};
			snprintf(
			    x->message, sizeof x->message,
			    "publish_refused %s%s%s: %s", names[r->kind],
			    r->kind == FELIX_REFUSAL_NOT_LEADER ? " node " : "",
			    r->kind == FELIX_REFUSAL_NOT_LEADER ? r->node_id
			                                        : "",
			    reply->u.publish_refused.message);
			break;
		}
		default:
			break;
		}
	}
	x->done = true;
}

static int split(const char *arg, char *ns, char *name)
{
	const char *slash = strchr(arg, '/');
	if (slash == NULL || slash == arg || slash[1] == '\0' ||
	    (size_t)(slash - arg) >= 256 || strlen(slash + 1) >= 1024) {
		fprintf(stderr, "lodectl: expected NAMESPACE/NAME, got '%s'\n",
		        arg);
		return -1;
	}
	memcpy(ns, arg, (size_t)(slash - arg));
	ns[slash - arg] = '\0';
	strcpy(name, slash + 1);
	return 0;
}

static int wait_done(struct ctx *x)
{
	if (felix_client_run(&x->loop, &x->done, WAIT_MS) != 0) {
		fprintf(stderr, "lodectl: no answer within %d ms\n", WAIT_MS);
		return 1;
	}
	if (x->status != 0) {
		fprintf(stderr, "lodectl: %s\n", x->message);
		return 1;
	}
	return 0;
}

static void on_started(void *data, struct felix_sub *sub, int status,
                       const struct felix_msg *answer, const char *message)
{
	struct ctx *x = data;
	(void)sub;
	if (status != 0) {
		if (answer != NULL &&
		    answer->type == FELIX_MSG_SUBSCRIBE_CURSOR_ERROR) {
			snprintf(x->message, sizeof x->message,
			         "cursor error: %s (requested %" PRIu64
			         ", available %" PRIu64 ")",
			         answer->u.cursor_error.reason ==
			                 FELIX_CURSOR_TOO_OLD
			             ? "too_old"
			             : "in_future",
			         answer->u.cursor_error.requested,
			         answer->u.cursor_error.available);
		} else if (answer != NULL && answer->type == FELIX_MSG_ERROR) {
			snprintf(x->message, sizeof x->message, "%s",
			         answer->u.error.message);
		} else {
			snprintf(x->message, sizeof x->message, "%s", message);
		}
		x->status = status;
		x->ended = true;
	}
}

static void on_events(void *data, struct felix_sub *sub, bool has_offset,
                      uint64_t base, const struct felix_view *p, uint32_t n)
{
	struct ctx *x = data;
	(void)sub;
	for (uint32_t i = 0; i < n && (x->want == 0 || x->got < x->want); i++) {
		if (has_offset) {
			printf("%" PRIu64 "\t", base + i);
		}
		fwrite(p[i].data, 1, p[i].len, stdout);
		printf("\n");
		x->got++;
	}
	fflush(stdout);
	if (x->want != 0 && x->got >= x->want) {
		x->ended = true;
	}
}

static void on_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct ctx *x = data;
	(void)sub;
	snprintf(x->message, sizeof x->message, "%s", why);
	x->ended = true;
}

static void on_watch_change(void *data, struct felix_sub *sub, const char *key,
                            const uint8_t *value, size_t len, uint64_t offset,
                            uint64_t expires)
{
	struct ctx *x = data;
	(void)sub;
	if (x->want != 0 && x->got >= x->want) {
		return;
	}
	printf("%" PRIu64 "\t%s\t", offset, key);
	if (value != NULL) {
		fwrite(value, 1, len, stdout);
	} else {
		printf("(deleted)");
	}
	if (expires != 0) {
		printf("\texpires_at=%" PRIu64, expires);
	}
	printf("\n");
	fflush(stdout);
	x->got++;
	if (x->want != 0 && x->got >= x->want) {
		x->ended = true;
	}
}

static void on_watch_lagged(void *data, struct felix_sub *sub,
                            uint64_t resume_from)
{
	struct ctx *x = data;
	(void)sub;
	printf("lagged: resume from %" PRIu64 "\n", resume_from);
	fflush(stdout);
	x->ended = true;
}

static void on_watch_started(void *data, struct felix_sub *sub, int status,
                             const struct felix_msg *answer,
                             const char *message)
{
	if (status == 0 && answer != NULL &&
	    answer->type == FELIX_MSG_CACHE_WATCH_STARTED) {
		const struct felix_msg_cache_watch_started *w =
		    &answer->u.cache_watch_started;
		fprintf(stderr, "watching: resume_offset %" PRIu64,
		        w->resume_offset);
		if (w->has_resnapshot && w->resnapshot) {
			fprintf(stderr, ", resnapshot");
		}
		if (w->has_retained_count) {
			fprintf(stderr, ", retained_count %" PRIu64,
			        w->retained_count);
		}
		fprintf(stderr, "\n");
		return;
	}
	on_started(data, sub, status, answer, message);
}

static const char *opt_value(int argc, char **argv, const char *name)
{
	for (int i = 1; i + 1 < argc; i++) {
		if (strcmp(argv[i], name) == 0) {
			return argv[i + 1];
		}
	}
	return NULL;
}

/* Positional arguments after NS/NAME, skipping "--opt value" pairs and
 * the flags in `flags` (NULL-terminated). */
static int positional(int argc, char **argv, const char *const *flags,
                      char **out, int cap)
{
	int n = 0;
	for (int i = 1; i < argc; i++) {
		bool flag = false;
		for (const char *const *f = flags; *f != NULL; f++) {
			flag = flag || strcmp(argv[i], *f) == 0;
		}
		if (flag) {
			continue;
		}
		if (strncmp(argv[i], "--", 2) == 0) {
			i++;
			continue;
		}
		if (n < cap) {
			out[n++] = argv[i];
		}
	}
	return n;
}

static int report(struct ctx *x, const char *cmd, int rv)
{
	if (rv == FELIX_CLIENT_EUNSUPPORTED) {
		fprintf(stderr, "lodectl: the broker does not serve %s\n", cmd);
		return 1;
	}
	if (rv != 0) {
		fprintf(stderr, "lodectl: request failed (%d)\n", rv);
		return 1;
	}
	return wait_done(x);
}

/* group-*, produce-idempotent and watch. -1 when `cmd` is none of them. */
static int run_durable(struct ctx *x, const char *cmd, const char *ns,
                       const char *name, int argc, char **argv)
{
	static const char *const no_flags[] = {NULL};
	char *pos[1024];
	const char *v;
	uint32_t shard = (v = opt_value(argc, argv, "--shard")) != NULL
	                     ? (uint32_t)strtoul(v, NULL, 10)
	                     : 0;
	int np = positional(argc, argv, no_flags, pos, 1024);
	int rv;
	if (strcmp(cmd, "group-poll") == 0) {
		if (np < 1) {
			usage(stderr);
			return 2;
		}
		uint32_t max = (v = opt_value(argc, argv, "--max")) != NULL
		                   ? (uint32_t)strtoul(v, NULL, 10)
		                   : 32;
		uint64_t wait = (v = opt_value(argc, argv, "--wait-ms")) != NULL
		                    ? strtoull(v, NULL, 10)
		                    : 0;
		rv = felix_client_group_poll(x->c, ns, name, shard, pos[0], max,
		                             wait, on_reply, x);
		return report(x, cmd, rv);
	}
	static const struct {
		const char *name;
		enum felix_msg_type type;
	} settles[] = {
	    {"group-ack", FELIX_MSG_GROUP_ACK},
	    {"group-nack", FELIX_MSG_GROUP_NACK},
	    {"group-discard", FELIX_MSG_GROUP_DISCARD},
	    {"group-redrive", FELIX_MSG_GROUP_REDRIVE},
	};
	for (size_t i = 0; i < sizeof settles / sizeof settles[0]; i++) {
		if (strcmp(cmd, settles[i].name) != 0) {
			continue;
		}
		if (np < 2) {
			usage(stderr);
			return 2;
		}
		rv = felix_client_group_settle(
		    x->c, settles[i].type, ns, name, shard, pos[0],
		    strtoull(pos[1], NULL, 10), on_reply, x);
		return report(x, cmd, rv);
	}
	if (strcmp(cmd, "group-dead-letters") == 0) {
		if (np < 1) {
			usage(stderr);
			return 2;
		}
		rv = felix_client_group_dead_letters(x->c, ns, name, shard,
		                                     pos[0], on_reply, x);
		return report(x, cmd, rv);
	}
	if (strcmp(cmd, "produce-idempotent") == 0) {
		const char *key = opt_value(argc, argv, "--key");
		const char *prod = opt_value(argc, argv, "--producer");
		const char *seq = opt_value(argc, argv, "--sequence");
		struct felix_view pv[1024];
		if (np < 1) {
			usage(stderr);
			return 2;
		}
		for (int i = 0; i < np; i++) {
			pv[i].data = (const uint8_t *)pos[i];
			pv[i].len = strlen(pos[i]);
		}
		uint64_t producer = prod ? strtoull(prod, NULL, 10) : 0;
		uint64_t sequence = seq ? strtoull(seq, NULL, 10) : 0;
		if (producer == 0) {
			/* A new producer: its first batch is sequence 0. */
			rv = felix_client_producer_init(x->c, on_reply, x);
			if (report(x, cmd, rv) != 0) {
				return 1;
			}
			x->done = false;
			producer = x->producer_id;
		}
		rv = felix_client_publish_idempotent(
		    x->c, ns, name, key != NULL, (const uint8_t *)key,
		    key ? strlen(key) : 0, pv, (uint32_t)np, producer, sequence,
		    on_reply, x);
		if (report(x, cmd, rv) != 0) {
			return 1;
		}
		printf("published %d as producer %" PRIu64 " sequence %" PRIu64
		       "\n",
		       np, producer, sequence);
		return 0;
	}
	if (strcmp(cmd, "watch") == 0) {
		static const char *const flags[] = {"--retained", NULL};
		struct felix_watch_request w;
		memset(&w, 0, sizeof w);
		w.key = opt_value(argc, argv, "--key");
		w.prefix = opt_value(argc, argv, "--prefix");
		w.has_shard = opt_value(argc, argv, "--shard") != NULL;
		w.shard = shard;
		if ((v = opt_value(argc, argv, "--from")) != NULL) {
			w.has_from_offset = true;
			w.from_offset = strtoull(v, NULL, 10);
		}
		for (int i = 1; i < argc; i++) {
			w.retained =
			    w.retained || strcmp(argv[i], flags[0]) == 0;
		}
		if ((v = opt_value(argc, argv, "--count")) != NULL) {
			x->want = strtoull(v, NULL, 10);
		}
		static const struct felix_watch_handlers h = {
		    on_watch_started, on_watch_change, on_watch_lagged,
		    on_ended};
		struct felix_sub *sub;
		rv = felix_client_watch(x->c, ns, name, &w, &h, x, &sub);
		if (rv == FELIX_CLIENT_EUNSUPPORTED) {
			fprintf(stderr, "lodectl: the broker does not serve "
			                "this cache watch\n");
			return 1;
		}
		if (rv != 0) {
			fprintf(stderr, "lodectl: watch failed (%d)\n", rv);
			return 1;
		}
		felix_client_run(&x->loop, &x->ended, 0);
		if (x->status != 0) {
			fprintf(stderr, "lodectl: %s\n", x->message);
			return 1;
		}
		return 0;
	}
	return -1;
}

static int run(struct ctx *x, const char *cmd, int argc, char **argv)
{
	char ns[256], name[1024];
	if (argc < 1 || split(argv[0], ns, name) != 0) {
		usage(stderr);
		return 2;
	}
	int rv = run_durable(x, cmd, ns, name, argc, argv);
	if (rv >= 0) {
		return rv;
	}
	if (strcmp(cmd, "publish") == 0) {
		const char *key = NULL;
		enum felix_ack_mode ack = FELIX_ACK_PER_MESSAGE;
		struct felix_view v[1024];
		uint32_t n = 0;
		for (int i = 1; i < argc; i++) {
			if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
				key = argv[++i];
			} else if (strcmp(argv[i], "--ack") == 0 &&
			           i + 1 < argc) {
				const char *a = argv[++i];
				ack = strcmp(a, "none") == 0 ? FELIX_ACK_NONE
				      : strcmp(a, "per_batch") == 0
				          ? FELIX_ACK_PER_BATCH
				          : FELIX_ACK_PER_MESSAGE;
			} else if (n < 1024) {
				v[n].data = (const uint8_t *)argv[i];
				v[n].len = strlen(argv[i]);
				n++;
			}
		}
		if (n == 0) {
			usage(stderr);
			return 2;
		}
		rv = felix_client_publish(
		    x->c, ns, name, key != NULL, (const uint8_t *)key,
		    key ? strlen(key) : 0, v, n, ack, on_ack, x);
		if (rv == 0 && ack == FELIX_ACK_NONE) {
			/* Nothing comes back: let the frame leave. */
			bool never = false;
			felix_client_run(&x->loop, &never, 200);
			printf("sent %u\n", n);
			return 0;
		}
		if (rv == 0 && wait_done(x) == 0) {
			printf("published %u\n", n);
			return 0;
		}
		return 1;
	}
	if (strcmp(cmd, "subscribe") == 0) {
		struct felix_start start = {FELIX_START_LATEST, 0};
		uint32_t shard = 0;
		for (int i = 1; i + 1 < argc; i += 2) {
			if (strcmp(argv[i], "--shard") == 0) {
				shard =
				    (uint32_t)strtoul(argv[i + 1], NULL, 10);
			} else if (strcmp(argv[i], "--count") == 0) {
				x->want = strtoull(argv[i + 1], NULL, 10);
			} else if (strcmp(argv[i], "--from") == 0) {
				const char *f = argv[i + 1];
				if (strcmp(f, "earliest") == 0) {
					start.kind = FELIX_START_EARLIEST;
				} else if (strcmp(f, "latest") != 0) {
					start.kind = FELIX_START_OFFSET;
					start.offset = strtoull(f, NULL, 10);
				}
			}
		}
		static const struct felix_sub_handlers h = {
		    on_started, on_events, on_ended};
		struct felix_sub *sub;
		rv = felix_client_subscribe(x->c, ns, name, shard, &start, &h,
		                            x, &sub);
		if (rv != 0) {
			fprintf(stderr, "lodectl: subscribe failed\n");
			return 1;
		}
		felix_client_run(&x->loop, &x->ended, 0);
		if (x->status != 0) {
			fprintf(stderr, "lodectl: %s\n", x->message);
			return 1;
		}
		return 0;
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *key = argv[1];
	if (strcmp(cmd, "cache-put") == 0 && argc >= 3) {
		uint64_t ttl = 0;
		bool has_ttl = false;
		if (argc >= 5 && strcmp(argv[3], "--ttl-ms") == 0) {
			ttl = strtoull(argv[4], NULL, 10);
			has_ttl = true;
		}
		rv = felix_client_cache_put(
		    x->c, ns, name, key, (const uint8_t *)argv[2],
		    strlen(argv[2]), has_ttl, ttl, on_reply, x);
	} else if (strcmp(cmd, "cache-get") == 0) {
		rv = felix_client_cache_get(x->c, ns, name, key, on_reply, x);
	} else if (strcmp(cmd, "cache-delete") == 0) {
		rv =
		    felix_client_cache_delete(x->c, ns, name, key, on_reply, x);
	} else if (strcmp(cmd, "counter-add") == 0 && argc >= 3) {
		rv = felix_client_counter_add(x->c, ns, name, key,
		                              strtoll(argv[2], NULL, 10),
		                              on_reply, x);
	} else if (strcmp(cmd, "counter-get") == 0) {
		rv = felix_client_counter_get(x->c, ns, name, key, on_reply, x);
	} else {
		usage(stderr);
		return 2;
	}
	if (rv == FELIX_CLIENT_EUNSUPPORTED) {
		fprintf(stderr, "lodectl: the broker does not serve %s\n", cmd);
		return 1;
	}
	if (rv != 0) {
		fprintf(stderr, "lodectl: request failed (%d)\n", rv);
		return 1;
	}
	return wait_done(x);
}

int lodectl_felix_main(const struct lodectl_global *g, int argc, char **argv)
{
	struct felix_client_config cfg;
	static struct ctx x;
	char host[256] = "127.0.0.1";
	int i = 1;
	bool tenant_given = false;
	(void)g;
	felix_client_config_init(&cfg);
	cfg.server_name = "localhost";
	cfg.token = getenv("LODESTONE_FELIX_TOKEN")
	                ? getenv("LODESTONE_FELIX_TOKEN")
	                : "dev";
	while (i < argc && strncmp(argv[i], "--", 2) == 0) {
		const char *o = argv[i];
		if (strcmp(o, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (i + 1 >= argc) {
			usage(stderr);
			return 2;
		}
		const char *v = argv[i + 1];
		if (strcmp(o, "--felix") == 0) {
			const char *colon = strrchr(v, ':');
			if (colon == NULL ||
			    (size_t)(colon - v) >= sizeof host) {
				fprintf(stderr, "lodectl: bad --felix '%s'\n",
				        v);
				return 2;
			}
			memcpy(host, v, (size_t)(colon - v));
			host[colon - v] = '\0';
			cfg.port = (uint16_t)atoi(colon + 1);
		} else if (strcmp(o, "--tenant") == 0) {
			cfg.tenant = v;
			tenant_given = true;
		} else if (strcmp(o, "--token") == 0) {
			cfg.token = v;
		} else if (strcmp(o, "--ca") == 0) {
			cfg.ca_file = v;
		} else if (strcmp(o, "--server-name") == 0) {
			cfg.server_name = v;
		} else {
			fprintf(stderr, "lodectl: unknown option '%s'\n", o);
			usage(stderr);
			return 2;
		}
		i += 2;
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[i], "help") == 0) {
		usage(stdout); /* before connecting: no server needed */
		return 0;
	}
	if (strcmp(argv[i], "keygen") == 0 || strcmp(argv[i], "token") == 0) {
		return lodectl_felix_token_main(
		    argc - i, argv + i, tenant_given ? cfg.tenant : NULL);
	}
	cfg.host = host;
	char err[512];
	uv_loop_init(&x.loop);
	if (felix_client_open(&x.c, &x.loop, &cfg, on_ready, &x, err,
	                      sizeof err) != 0) {
		fprintf(stderr, "lodectl: %s\n", err);
		return 1;
	}
	if (wait_done(&x) != 0) {
		felix_client_close(x.c);
		uv_run(&x.loop, UV_RUN_DEFAULT);
		return 1;
	}
	x.done = false;
	int rc = run(&x, argv[i], argc - i - 1, argv + i + 1);
	felix_client_close(x.c);
	uv_run(&x.loop, UV_RUN_DEFAULT);
	uv_loop_close(&x.loop);
	return rc;
}
