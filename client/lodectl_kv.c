/* lodectl kv and lodectl ping: FSNP KV commands. get/set/del/mget/mset/cas
 * use their typed opcodes; every other KV command (hset, lpush, zadd, lock,
 * ratelimit, ...) goes through COMMAND_EXEC with its arguments as given;
 * options/shards/route/info/backpressure use the control opcodes.
 * lodectl acl: COMMAND_EXEC ACL ..., each rule its own argument. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/lodectl.h"
#include "wire/fsnp_opcode.h"

static void kv_usage(FILE *f)
{
	fprintf(f,
	        "usage: lodectl [--fsnp HOST:PORT] kv SUBCOMMAND ARGS...\n\n"
	        "  get KEY\n"
	        "  set KEY VALUE [--px MS] [--ex S] [--nx] [--xx] [--get] "
	        "[--keepttl]\n"
	        "  del KEY...            mget KEY...\n"
	        "  mset KEY VALUE [KEY VALUE...]   (keys in one slot)\n"
	        "  cas KEY EXPECTED VALUE [--px MS]\n"
	        "  hset KEY FIELD VALUE...  hget KEY FIELD  hmget KEY "
	        "FIELD...\n"
	        "  hgetall KEY  hdel KEY FIELD...\n"
	        "  lpush|rpush KEY VALUE...  lpop|rpop KEY [COUNT]  lrange "
	        "KEY START STOP\n"
	        "  sadd|srem KEY MEMBER...  smembers KEY  sismember KEY "
	        "MEMBER\n"
	        "  zadd KEY SCORE MEMBER...  zrem KEY MEMBER...  zscore KEY "
	        "MEMBER\n"
	        "  zrange KEY START STOP [WITHSCORES]\n"
	        "  lock|extend KEY OWNER TTL_MS  unlock KEY OWNER\n"
	        "  ratelimit KEY WINDOW_MS MAX [COUNT]\n"
	        "  exec COMMAND ARGS...  (COMMAND_EXEC, any command by name)\n"
	        "  options  shards  route KEY  info  backpressure\n");
}

/* Sends and prints; returns the exit status. */
static int call(const struct lodectl_global *g, uint16_t opcode,
                const char *key, const struct wbuf *body)
{
	struct fsnp_sync *s;
	struct wbuf out;
	uint16_t status = 0;
	int rv;
	if (lodectl_fsnp_connect(g, &s) != 0) {
		return LODECTL_EXIT_UNREACHABLE;
	}
	wbuf_init(&out);
	rv = fsnp_sync_call(s, opcode, key, key ? strlen(key) : 0, body->data,
	                    body->len, 0, &status, &out);
	if (rv != 0) {
		fprintf(stderr, "lodectl: %s\n", fsnp_client_strerror(rv));
		rv = rv == FSNP_CLIENT_ELOST || rv == FSNP_CLIENT_ETIMEDOUT
		         ? LODECTL_EXIT_UNREACHABLE
		         : LODECTL_EXIT_REFUSED;
	} else {
		rv = lodectl_print_reply(g, status, &out);
	}
	wbuf_free(&out);
	fsnp_sync_close(s);
	return rv;
}

static int finish_call(const struct lodectl_global *g, uint16_t opcode,
                       const char *key, struct fsnp_writer *w, struct wbuf *b)
{
	int rv;
	if (fsnp_w_finish(w) != 0) {
		fprintf(stderr, "lodectl: cannot encode the request\n");
		wbuf_free(b);
		return LODECTL_EXIT_USAGE;
	}
	rv = call(g, opcode, key, b);
	wbuf_free(b);
	return rv;
}

static int parse_ms(const char *s, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (*end != '\0' || v <= 0) {
		fprintf(stderr, "lodectl: '%s' is not a positive integer\n", s);
		return -1;
	}
	*out = v;
	return 0;
}

static int cmd_set(const struct lodectl_global *g, int argc, char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	int64_t ms;
	if (argc < 3) {
		kv_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, argv[1]);
	fsnp_w_key(&w, "value");
	fsnp_w_str(&w, argv[2]);
	for (int i = 3; i < argc; i++) {
		const char *o = argv[i];
		if ((strcmp(o, "--px") == 0 || strcmp(o, "--ex") == 0 ||
		     strcmp(o, "--ttl") == 0) &&
		    i + 1 < argc) {
			if (parse_ms(argv[++i], &ms) != 0) {
				wbuf_free(&b);
				return LODECTL_EXIT_USAGE;
			}
			fsnp_w_key(&w, "ttl");
			fsnp_w_i64(&w, strcmp(o, "--ex") == 0 ? ms * 1000 : ms);
		} else if (strcmp(o, "--nx") == 0 || strcmp(o, "--xx") == 0 ||
		           strcmp(o, "--get") == 0 ||
		           strcmp(o, "--keepttl") == 0) {
			fsnp_w_key(&w, o + 2);
			fsnp_w_bool(&w, true);
		} else {
			fprintf(stderr, "lodectl: unknown set option '%s'\n",
			        o);
			wbuf_free(&b);
			return LODECTL_EXIT_USAGE;
		}
	}
	fsnp_w_map_end(&w);
	return finish_call(g, FSNP_OP_SET, argv[1], &w, &b);
}

static int cmd_keys(const struct lodectl_global *g, uint16_t opcode, int argc,
                    char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	if (argc < 2) {
		kv_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "keys");
	fsnp_w_array_begin(&w);
	for (int i = 1; i < argc; i++) {
		fsnp_w_str(&w, argv[i]);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	return finish_call(g, opcode, NULL, &w, &b);
}

static int cmd_mset(const struct lodectl_global *g, int argc, char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	if (argc < 3 || argc % 2 != 1) {
		kv_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "pairs");
	fsnp_w_array_begin(&w);
	for (int i = 1; i + 1 < argc; i += 2) {
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "key");
		fsnp_w_str(&w, argv[i]);
		fsnp_w_key(&w, "value");
		fsnp_w_str(&w, argv[i + 1]);
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	return finish_call(g, FSNP_OP_MSET, argv[1], &w, &b);
}

static int cmd_cas(const struct lodectl_global *g, int argc, char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	int64_t ms;
	if (argc != 4 && !(argc == 6 && strcmp(argv[4], "--px") == 0)) {
		kv_usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, argv[1]);
	fsnp_w_key(&w, "expected");
	fsnp_w_str(&w, argv[2]);
	fsnp_w_key(&w, "value");
	fsnp_w_str(&w, argv[3]);
	if (argc == 6) {
		if (parse_ms(argv[5], &ms) != 0) {
			wbuf_free(&b);
			return LODECTL_EXIT_USAGE;
		}
		fsnp_w_key(&w, "ttl");
		fsnp_w_i64(&w, ms);
	}
	fsnp_w_map_end(&w);
	return finish_call(g, FSNP_OP_CAS, argv[1], &w, &b);
}

/* COMMAND_EXEC {command, args}; `route` (may be NULL) routes it. */
static int exec_routed(const struct lodectl_global *g, const char *name,
                       const char *route, int argc, char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "command");
	fsnp_w_str(&w, name);
	fsnp_w_key(&w, "args");
	fsnp_w_array_begin(&w);
	for (int i = 0; i < argc; i++) {
		fsnp_w_str(&w, argv[i]);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	return finish_call(g, FSNP_OP_COMMAND_EXEC, route, &w, &b);
}

/* COMMAND_EXEC routed by its first argument (a key). */
static int cmd_exec(const struct lodectl_global *g, const char *name, int argc,
                    char **argv)
{
	return exec_routed(g, name, argc > 0 ? argv[0] : NULL, argc, argv);
}

/* COMMAND_EXEC of a command without a key. */
static int cmd_exec_args(const struct lodectl_global *g, const char *name,
                         int argc, char **argv)
{
	return exec_routed(g, name, NULL, argc, argv);
}

static int cmd_control(const struct lodectl_global *g, uint16_t opcode,
                       const char *key)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	if (key != NULL) {
		fsnp_w_key(&w, "key");
		fsnp_w_str(&w, key);
	}
	fsnp_w_map_end(&w);
	return finish_call(g, opcode, NULL, &w, &b);
}

/* Subcommands sent as COMMAND_EXEC under their upper-case name. */
static const char *const exec_cmds[] = {
    "hset", "hget", "hmget",  "hgetall", "hdel", "lpush",    "rpush",
    "lpop", "rpop", "lrange", "sadd",    "srem", "smembers", "sismember",
    "zadd", "zrem", "zrange", "zscore",  "lock", "unlock",   "extend"};

int lodectl_kv_main(const struct lodectl_global *g, int argc, char **argv)
{
	const char *sub;
	if (argc < 2 || strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		kv_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	sub = argv[1];
	argc--;
	argv++;
	if (strcmp(sub, "get") == 0) {
		struct wbuf b;
		struct fsnp_writer w;
		if (argc != 2) {
			kv_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		wbuf_init(&b);
		fsnp_w_init(&w, &b);
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "key");
		fsnp_w_str(&w, argv[1]);
		fsnp_w_map_end(&w);
		return finish_call(g, FSNP_OP_GET, argv[1], &w, &b);
	}
	if (strcmp(sub, "set") == 0) {
		return cmd_set(g, argc, argv);
	}
	if (strcmp(sub, "del") == 0) {
		return cmd_keys(g, FSNP_OP_DEL, argc, argv);
	}
	if (strcmp(sub, "mget") == 0) {
		return cmd_keys(g, FSNP_OP_MGET, argc, argv);
	}
	if (strcmp(sub, "mset") == 0) {
		return cmd_mset(g, argc, argv);
	}
	if (strcmp(sub, "cas") == 0) {
		return cmd_cas(g, argc, argv);
	}
	if (strcmp(sub, "ratelimit") == 0) {
		return cmd_exec(g, "RATELIMIT.ADD", argc - 1, argv + 1);
	}
	if (strcmp(sub, "exec") == 0) {
		if (argc < 2) {
			kv_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		return cmd_exec(g, argv[1], argc - 2, argv + 2);
	}
	if (strcmp(sub, "options") == 0) {
		return cmd_control(g, FSNP_OP_OPTIONS, NULL);
	}
	if (strcmp(sub, "shards") == 0) {
		return cmd_control(g, FSNP_OP_SHARDS, NULL);
	}
	if (strcmp(sub, "info") == 0) {
		return cmd_control(g, FSNP_OP_CLIENT_INFO, NULL);
	}
	if (strcmp(sub, "backpressure") == 0) {
		return cmd_control(g, FSNP_OP_BACKPRESSURE, NULL);
	}
	if (strcmp(sub, "route") == 0) {
		if (argc != 2) {
			kv_usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		return cmd_control(g, FSNP_OP_ROUTE, argv[1]);
	}
	for (size_t i = 0; i < sizeof exec_cmds / sizeof exec_cmds[0]; i++) {
		if (strcasecmp(sub, exec_cmds[i]) == 0) {
			char name[32];
			size_t k;
			for (k = 0; sub[k] != '\0' && k + 1 < sizeof name;
			     k++) {
				name[k] = (char)(sub[k] >= 'a' && sub[k] <= 'z'
				                     ? sub[k] - 32
				                     : sub[k]);
			}
			name[k] = '\0';
			return cmd_exec(g, name, argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "lodectl: unknown kv command '%s'\n", sub);
	kv_usage(stderr);
	return LODECTL_EXIT_USAGE;
}

int lodectl_ping_main(const struct lodectl_global *g, int argc, char **argv)
{
	struct wbuf b;
	struct fsnp_writer w;
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	if (argc > 1) {
		fsnp_w_key(&w, "message");
		fsnp_w_str(&w, argv[1]);
	}
	fsnp_w_map_end(&w);
	return finish_call(g, FSNP_OP_PING, NULL, &w, &b);
}

static void acl_usage(FILE *f)
{
	fprintf(f, "usage: lodectl [--fsnp HOST:PORT] [--user NAME --password "
	           "PASSWORD] acl SUBCOMMAND ARGS...\n\n"
	           "  setuser NAME [RULE...]   e.g. on '>secret' '~app:*' "
	           "+@read\n"
	           "  deluser NAME\n"
	           "  getuser NAME\n"
	           "  list  users  whoami\n");
}

int lodectl_acl_main(const struct lodectl_global *g, int argc, char **argv)
{
	static const struct {
		const char *name;
		int min, max; /* arguments after the subcommand */
	} subs[] = {
	    {"setuser", 1, 1000}, {"deluser", 1, 1}, {"getuser", 1, 1},
	    {"list", 0, 0},       {"users", 0, 0},   {"whoami", 0, 0},
	};
	if (argc < 2 || strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		acl_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LODECTL_EXIT_USAGE : LODECTL_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		if (strcasecmp(argv[1], subs[i].name) == 0) {
			int n = argc - 2;
			if (n < subs[i].min || n > subs[i].max) {
				acl_usage(stderr);
				return LODECTL_EXIT_USAGE;
			}
			/* ACL's arguments: the subcommand first. */
			return cmd_exec_args(g, "ACL", argc - 1, argv + 1);
		}
	}
	acl_usage(stderr);
	return LODECTL_EXIT_USAGE;
}
