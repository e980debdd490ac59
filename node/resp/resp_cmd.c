/* RESP commands (docs/resp.md): the table of what is served, the
 * connection commands (PING, ECHO, HELLO, AUTH, CLIENT, SELECT, QUIT),
 * INFO, COMMAND, CLUSTER, and the KV commands: planned by the FSNP command
 * layer (one store command per group, the same state machine FSNP
 * drives), checked against the ACL users, proposed or read on the groups'
 * leaders wherever they are, and their results written as RESP2 or RESP3
 * the way Redis writes them. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/resp/resp_internal.h"
#include "node/scan_cursors.h"
#include "store/command.h"
#include "store/result.h"
#include "wire/fsnp_slot.h"
#include "wire/fsnp_value.h"
#include "wire/resp_reply.h"

#define RESP_VERSION "7.2.0"
#define CLUSTER_SLOTS 16384u

enum kind {
	K_KV, /* planned by fsnp_cmd (store command) */
	K_PING,
	K_ECHO,
	K_QUIT,
	K_SELECT,
	K_HELLO,
	K_AUTH,
	K_CLIENT,
	K_COMMAND,
	K_INFO,
	K_CLUSTER,
	K_OK,     /* READONLY, READWRITE: nothing to do */
	K_REFUSE, /* known, not served: a clear error */
	K_SETX,   /* SETNX, SETEX, PSETEX: SET with options */
	K_MULTI,  /* transactions (resp_multi.c) */
	K_EXEC,
	K_DISCARD,
	K_WATCH,
	K_UNWATCH,
};

struct rcmd {
	const char *name; /* lower case, as COMMAND lists it */
	int arity;        /* Redis's: > 0 exact, < 0 at least -arity */
	const char *flags;
	int first, last, step;
	const char *group;
	const char *summary;
	const char *args; /* "name:type" words; '?' optional, '*' repeats */
	enum kind kind;
	uint32_t cats; /* ACL categories of non-KV commands */
};

#define CONN (ACL_CAT_CONNECTION | ACL_CAT_FAST)
#define KVC(n, a, f, k1, k2, ks, g, s, args)                                   \
	{                                                                      \
		n, a, f, k1, k2, ks, g, s, args, K_KV, 0                       \
	}

static const struct rcmd cmds[] = {
    KVC("get", 2, "readonly fast", 1, 1, 1, "string",
        "Returns the string value of a key.", "key:key"),
    KVC("set", -3, "write denyoom", 1, 1, 1, "string",
        "Sets the string value of a key, ignoring its type.",
        "key:key value:string ?condition:oneof(NX|XX) ?get:pure-token "
        "?expiration:oneof(EX|PX|EXAT|PXAT|KEEPTTL)"),
    KVC("del", -2, "write", 1, -1, 1, "keyspace", "Deletes one or more keys.",
        "key:key*"),
    KVC("unlink", -2, "write fast", 1, -1, 1, "keyspace",
        "Deletes one or more keys (as DEL: a key's rows are removed in its "
        "entry's apply).",
        "key:key*"),
    KVC("mget", -2, "readonly fast", 1, -1, 1, "string",
        "Atomically returns the string values of one or more keys.",
        "key:key*"),
    KVC("mset", -3, "write denyoom", 1, -1, 2, "string",
        "Atomically creates or modifies the string values of one or more "
        "keys.",
        "data:block*"),
    KVC("msetnx", -3, "write denyoom", 1, -1, 2, "string",
        "Atomically modifies the string values of one or more keys only "
        "when all keys don't exist.",
        "data:block*"),
    KVC("hset", -4, "write denyoom fast", 1, 1, 1, "hash",
        "Creates or modifies the value of a field in a hash.",
        "key:key data:block*"),
    KVC("hget", 3, "readonly fast", 1, 1, 1, "hash",
        "Returns the value of a field in a hash.", "key:key field:string"),
    KVC("hmget", -3, "readonly fast", 1, 1, 1, "hash",
        "Returns the values of all fields in a hash.", "key:key field:string*"),
    KVC("hgetall", 2, "readonly", 1, 1, 1, "hash",
        "Returns all fields and values in a hash.", "key:key"),
    KVC("hdel", -3, "write fast", 1, 1, 1, "hash",
        "Deletes one or more fields and their values from a hash.",
        "key:key field:string*"),
    KVC("lpush", -3, "write denyoom fast", 1, 1, 1, "list",
        "Prepends one or more elements to a list.", "key:key element:string*"),
    KVC("rpush", -3, "write denyoom fast", 1, 1, 1, "list",
        "Appends one or more elements to a list.", "key:key element:string*"),
    KVC("lpop", -2, "write fast", 1, 1, 1, "list",
        "Returns the first elements in a list after removing it.",
        "key:key ?count:integer"),
    KVC("rpop", -2, "write fast", 1, 1, 1, "list",
        "Returns and removes the last elements of a list.",
        "key:key ?count:integer"),
    KVC("lrange", 4, "readonly", 1, 1, 1, "list",
        "Returns a range of elements from a list.",
        "key:key start:integer stop:integer"),
    KVC("sadd", -3, "write denyoom fast", 1, 1, 1, "set",
        "Adds one or more members to a set.", "key:key member:string*"),
    KVC("srem", -3, "write fast", 1, 1, 1, "set",
        "Removes one or more members from a set.", "key:key member:string*"),
    KVC("smembers", 2, "readonly", 1, 1, 1, "set",
        "Returns all members of a set.", "key:key"),
    KVC("sismember", 3, "readonly fast", 1, 1, 1, "set",
        "Determines whether a member belongs to a set.",
        "key:key member:string"),
    KVC("zadd", -4, "write denyoom fast", 1, 1, 1, "sorted-set",
        "Adds one or more members to a sorted set, or updates their scores.",
        "key:key ?condition:oneof(NX|XX) ?comparison:oneof(GT|LT) "
        "?change:pure-token ?increment:pure-token data:block*"),
    KVC("zrem", -3, "write fast", 1, 1, 1, "sorted-set",
        "Removes one or more members from a sorted set.",
        "key:key member:string*"),
    KVC("zrange", -4, "readonly", 1, 1, 1, "sorted-set",
        "Returns members in a sorted set within a range of indexes.",
        "key:key start:string stop:string ?byscore:pure-token "
        "?rev:pure-token ?limit:block ?withscores:pure-token"),
    KVC("zscore", 3, "readonly fast", 1, 1, 1, "sorted-set",
        "Returns the score of a member in a sorted set.",
        "key:key member:string"),
    KVC("incr", 2, "write denyoom fast", 1, 1, 1, "string",
        "Increments the integer value of a key by one.", "key:key"),
    KVC("decr", 2, "write denyoom fast", 1, 1, 1, "string",
        "Decrements the integer value of a key by one.", "key:key"),
    KVC("incrby", 3, "write denyoom fast", 1, 1, 1, "string",
        "Increments the integer value of a key by a number.",
        "key:key increment:integer"),
    KVC("decrby", 3, "write denyoom fast", 1, 1, 1, "string",
        "Decrements a number from the integer value of a key.",
        "key:key decrement:integer"),
    KVC("exists", -2, "readonly fast", 1, -1, 1, "keyspace",
        "Determines whether one or more keys exist.", "key:key*"),
    KVC("type", 2, "readonly fast", 1, 1, 1, "keyspace",
        "Determines the type of value stored at a key.", "key:key"),
    KVC("ttl", 2, "readonly fast", 1, 1, 1, "keyspace",
        "Returns the expiration time in seconds of a key.", "key:key"),
    KVC("pttl", 2, "readonly fast", 1, 1, 1, "keyspace",
        "Returns the expiration time in milliseconds of a key.", "key:key"),
    KVC("expire", -3, "write fast", 1, 1, 1, "keyspace",
        "Sets the expiration time of a key in seconds.",
        "key:key seconds:integer ?condition:oneof(NX|XX|GT|LT)"),
    KVC("pexpire", -3, "write fast", 1, 1, 1, "keyspace",
        "Sets the expiration time of a key in milliseconds.",
        "key:key milliseconds:integer ?condition:oneof(NX|XX|GT|LT)"),
    KVC("expireat", -3, "write fast", 1, 1, 1, "keyspace",
        "Sets the expiration time of a key to a Unix timestamp.",
        "key:key unix-time-seconds:unix-time "
        "?condition:oneof(NX|XX|GT|LT)"),
    KVC("pexpireat", -3, "write fast", 1, 1, 1, "keyspace",
        "Sets the expiration time of a key to a Unix milliseconds "
        "timestamp.",
        "key:key unix-time-milliseconds:unix-time "
        "?condition:oneof(NX|XX|GT|LT)"),
    KVC("rename", 3, "write", 1, 2, 1, "keyspace",
        "Renames a key and overwrites the destination.", "key:key newkey:key"),
    KVC("renamenx", 3, "write fast", 1, 2, 1, "keyspace",
        "Renames a key only when the target key name doesn't exist.",
        "key:key newkey:key"),
    KVC("dbsize", 1, "readonly fast", 0, 0, 0, "server",
        "Returns the number of keys in the database.", ""),
    KVC("keys", 2, "readonly", 0, 0, 0, "keyspace",
        "Returns all key names that match a pattern.", "pattern:pattern"),
    KVC("scan", -2, "readonly", 0, 0, 0, "keyspace",
        "Iterates over the key names in the database.",
        "cursor:integer ?pattern:pattern ?count:integer ?type:string"),
    KVC("zincrby", 4, "write denyoom fast", 1, 1, 1, "sorted-set",
        "Increments the score of a member in a sorted set.",
        "key:key increment:integer member:string"),
    KVC("zcount", 4, "readonly fast", 1, 1, 1, "sorted-set",
        "Returns the count of members in a sorted set that have scores "
        "within a range.",
        "key:key min:double max:double"),
    KVC("zrevrangebyscore", -4, "readonly", 1, 1, 1, "sorted-set",
        "Returns members in a sorted set within a range of scores in "
        "reverse order.",
        "key:key max:double min:double ?withscores:pure-token "
        "?limit:block"),
    KVC("hincrby", 4, "write denyoom fast", 1, 1, 1, "hash",
        "Increments the integer value of a field in a hash by a number.",
        "key:key field:string increment:integer"),
    KVC("hincrbyfloat", 4, "write denyoom fast", 1, 1, 1, "hash",
        "Increments the floating point value of a field by a number.",
        "key:key field:string increment:double"),
    KVC("hexists", 3, "readonly fast", 1, 1, 1, "hash",
        "Determines whether a field exists in a hash.", "key:key field:string"),
    KVC("hkeys", 2, "readonly", 1, 1, 1, "hash",
        "Returns all fields in a hash.", "key:key"),
    KVC("hvals", 2, "readonly", 1, 1, 1, "hash",
        "Returns all values in a hash.", "key:key"),
    KVC("persist", 2, "write fast", 1, 1, 1, "keyspace",
        "Removes the expiration time of a key.", "key:key"),
    KVC("append", 3, "write denyoom fast", 1, 1, 1, "string",
        "Appends a string to the value of a key.", "key:key value:string"),
    KVC("strlen", 2, "readonly fast", 1, 1, 1, "string",
        "Returns the length of a string value.", "key:key"),
    KVC("getdel", 2, "write fast", 1, 1, 1, "string",
        "Returns the string value of a key after deleting the key.", "key:key"),
    KVC("getrange", 4, "readonly", 1, 1, 1, "string",
        "Returns a substring of the string stored at a key.",
        "key:key start:integer end:integer"),
    KVC("lindex", 3, "readonly", 1, 1, 1, "list",
        "Returns an element from a list by its index.",
        "key:key index:integer"),
    KVC("incrbyfloat", 3, "write denyoom fast", 1, 1, 1, "string",
        "Increment the floating point value of a key by a number. Uses 0 "
        "as initial value if the key doesn't exist.",
        "key:key increment:double"),
    KVC("setrange", 4, "write denyoom", 1, 1, 1, "string",
        "Overwrites a part of a string value with another by an offset. "
        "Creates the key if it doesn't exist.",
        "key:key offset:integer value:string"),
    KVC("getex", -2, "write fast", 1, 1, 1, "string",
        "Returns the string value of a key after setting its expiration "
        "time.",
        "key:key ?expiration:oneof(EX|PX|EXAT|PXAT|PERSIST)"),
    KVC("zrangebyscore", -4, "readonly", 1, 1, 1, "sorted-set",
        "Returns members in a sorted set within a range of scores.",
        "key:key min:double max:double ?withscores:pure-token "
        "?limit:block"),
    KVC("ltrim", 4, "write", 1, 1, 1, "list",
        "Removes elements from both ends a list. Deletes the list if all "
        "elements were trimmed.",
        "key:key start:integer stop:integer"),
    KVC("zrank", 3, "readonly fast", 1, 1, 1, "sorted-set",
        "Returns the index of a member in a sorted set ordered by "
        "ascending scores.",
        "key:key member:string"),
    KVC("zrevrank", 3, "readonly fast", 1, 1, 1, "sorted-set",
        "Returns the index of a member in a sorted set ordered by "
        "descending scores.",
        "key:key member:string"),
    KVC("hlen", 2, "readonly fast", 1, 1, 1, "hash",
        "Returns the number of fields in a hash.", "key:key"),
    KVC("llen", 2, "readonly fast", 1, 1, 1, "list",
        "Returns the length of a list.", "key:key"),
    KVC("scard", 2, "readonly fast", 1, 1, 1, "set",
        "Returns the number of members in a set.", "key:key"),
    KVC("zcard", 2, "readonly fast", 1, 1, 1, "sorted-set",
        "Returns the number of members in a sorted set.", "key:key"),
    {"setnx", 3, "write denyoom fast", 1, 1, 1, "string",
     "Set the string value of a key only when the key doesn't exist.",
     "key:key value:string", K_SETX, 0},
    {"setex", 4, "write denyoom", 1, 1, 1, "string",
     "Sets the string value and expiration time of a key.",
     "key:key seconds:integer value:string", K_SETX, 0},
    {"psetex", 4, "write denyoom", 1, 1, 1, "string",
     "Sets both string value and expiration time in milliseconds of a "
     "key.",
     "key:key milliseconds:integer value:string", K_SETX, 0},
    {"ping", -1, "fast", 0, 0, 0, "connection",
     "Returns the server's liveliness response.", "?message:string", K_PING,
     CONN},
    {"echo", 2, "fast", 0, 0, 0, "connection", "Returns the given string.",
     "message:string", K_ECHO, CONN},
    {"quit", -1, "fast noscript", 0, 0, 0, "connection",
     "Closes the connection.", "", K_QUIT, CONN},
    {"select", 2, "loading stale fast", 0, 0, 0, "connection",
     "Changes the selected database (only 0).", "index:integer", K_SELECT,
     CONN},
    {"hello", -1, "noauth fast", 0, 0, 0, "connection",
     "Handshakes with the server.",
     "?protover:integer ?auth:block ?clientname:string", K_HELLO, CONN},
    {"auth", -2, "noauth fast", 0, 0, 0, "connection",
     "Authenticates the connection.", "?username:string password:string",
     K_AUTH, CONN},
    {"client", -2, "slow", 0, 0, 0, "connection",
     "A container for client connection commands.", "subcommand:string",
     K_CLIENT, ACL_CAT_CONNECTION | ACL_CAT_SLOW},
    {"command", -1, "loading stale", 0, 0, 0, "server",
     "Returns detailed information about all commands.", "?subcommand:string",
     K_COMMAND, ACL_CAT_CONNECTION | ACL_CAT_SLOW},
    {"info", -1, "loading stale", 0, 0, 0, "server",
     "Returns information and statistics about the server.", "?section:string*",
     K_INFO, ACL_CAT_SLOW | ACL_CAT_DANGEROUS},
    {"cluster", -2, "slow", 0, 0, 0, "cluster",
     "A container for Redis Cluster commands.", "subcommand:string", K_CLUSTER,
     ACL_CAT_SLOW},
    {"readonly", 1, "loading stale fast", 0, 0, 0, "cluster",
     "Enables read-only queries for a connection (every node answers "
     "every key already).",
     "", K_OK, CONN},
    {"readwrite", 1, "loading stale fast", 0, 0, 0, "cluster",
     "Enables read-write queries for a connection.", "", K_OK, CONN},
    {"multi", 1, "noscript loading stale fast allow_busy", 0, 0, 0,
     "transactions", "Starts a transaction.", "", K_MULTI, ACL_CAT_FAST},
    {"exec", 1, "noscript loading stale skip_slowlog", 0, 0, 0, "transactions",
     "Executes all commands in a transaction.", "", K_EXEC, ACL_CAT_SLOW},
    {"discard", 1, "noscript loading stale fast allow_busy", 0, 0, 0,
     "transactions", "Discards a transaction.", "", K_DISCARD, ACL_CAT_FAST},
    {"watch", -2, "noscript loading stale fast allow_busy", 1, -1, 1,
     "transactions",
     "Monitors changes to keys to determine the execution of a "
     "transaction.",
     "key:key*", K_WATCH, ACL_CAT_FAST},
    {"unwatch", 1, "noscript loading stale fast allow_busy", 0, 0, 0,
     "transactions", "Forgets about watched keys of a transaction.", "",
     K_UNWATCH, ACL_CAT_FAST},
};

/* Redis commands that are not served yet: each needs a replicated store
 * command or a model Lodestone does not have. */
static const char *const refused[] = {
    "lset",      "linsert", "spop",       "srandmember", "flushdb", "flushall",
    "subscribe", "publish", "psubscribe", "eval",        "evalsha", "script",
    "function",  "blpop",   "brpop",      "object",      "dump",    "restore",
    "move",      "copy",    "touch",      "randomkey",   "wait",    "save",
    "bgsave",    "config",  "debug",      "monitor",     "sync",    "psync",
    "replicaof", "slaveof", "shutdown",   "swapdb",      "xadd",    "xread",
    "xrange",    "xlen",
};

static const struct rcmd *cmd_find(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		size_t k = strlen(cmds[i].name);
		if (k != n) {
			continue;
		}
		size_t j = 0;
		while (j < n && tolower(p[j]) == cmds[i].name[j]) {
			j++;
		}
		if (j == n) {
			return &cmds[i];
		}
	}
	return NULL;
}

static bool is_refused(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		size_t k = strlen(refused[i]), j = 0;
		if (k != n) {
			continue;
		}
		while (j < n && tolower(p[j]) == refused[i][j]) {
			j++;
		}
		if (j == n) {
			return true;
		}
	}
	return false;
}

static bool arg_eq(const struct resp_arg *a, const char *word)
{
	size_t n = strlen(word);
	if (a->len != n) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (toupper(a->p[i]) != toupper((unsigned char)word[i])) {
			return false;
		}
	}
	return true;
}

static int arg_ll(const struct resp_arg *a, long long *out)
{
	char buf[32];
	char *end;
	if (a->len == 0 || a->len >= sizeof buf) {
		return -1;
	}
	memcpy(buf, a->p, a->len);
	buf[a->len] = '\0';
	if (isspace((unsigned char)buf[0])) {
		return -1;
	}
	*out = strtoll(buf, &end, 10);
	return *end == '\0' ? 0 : -1;
}

static void lower_name(const struct resp_arg *a, char *out, size_t cap)
{
	size_t n = a->len < cap - 1 ? a->len : cap - 1;
	for (size_t i = 0; i < n; i++) {
		out[i] = (char)tolower(a->p[i]);
	}
	out[n] = '\0';
}

static void wrong_args(struct resp_req *r, const struct resp_arg *name)
{
	char lower[64];
	lower_name(name, lower, sizeof lower);
	resp_w_errorf(&r->out, "ERR wrong number of arguments for '%s' command",
	              lower);
}

static void finish(struct resp_req *r)
{
	if (!r->queued) { /* a queued command's reply waits for EXEC */
		resp_req_done(r);
	}
}

/* --- Connection commands -------------------------------------------------- */

static void do_auth(struct resp_req *r, const struct resp_arg *user,
                    const struct resp_arg *pass)
{
	struct resp_conn *c = r->c;
	const struct fsnp_server *u = c->srv->cfg.users;
	const uint8_t *un = user ? user->p : (const uint8_t *)"default";
	size_t ul = user ? user->len : 7;

	if (user == NULL && (u == NULL || !fsnp_server_acl_has_password(u))) {
		resp_w_error(&r->out,
		             "ERR AUTH <password> called without any password "
		             "configured for the default user. Are you sure "
		             "your configuration is correct?");
		return;
	}
	if (u == NULL || !fsnp_server_acl_auth(u, un, ul, pass->p, pass->len)) {
		resp_w_error(&r->out,
		             "WRONGPASS invalid username-password pair "
		             "or user is disabled.");
		return;
	}
	memcpy(c->user, un, ul);
	c->user[ul] = '\0';
	c->authed = true;
	resp_w_simple(&r->out, "OK");
}

static void do_hello(struct resp_req *r, const struct resp_arg *argv,
                     uint32_t argc)
{
	struct resp_conn *c = r->c;
	long long ver = c->proto;
	uint32_t i = 1;
	const struct resp_arg *user = NULL, *pass = NULL, *name = NULL;

	if (argc >= 2) {
		if (arg_ll(&argv[1], &ver) != 0) {
			resp_w_error(&r->out, "ERR Protocol version is not an "
			                      "integer or out of range");
			return;
		}
		if (ver < 2 || ver > 3) {
			resp_w_error(&r->out,
			             "NOPROTO unsupported protocol version");
			return;
		}
		i = 2;
	}
	for (; i < argc; i++) {
		bool more = i + 1 < argc;
		if (arg_eq(&argv[i], "AUTH") && i + 2 < argc) {
			user = &argv[i + 1];
			pass = &argv[i + 2];
			i += 2;
		} else if (arg_eq(&argv[i], "SETNAME") && more) {
			name = &argv[i + 1];
			i++;
		} else {
			char lower[64];
			lower_name(&argv[i], lower, sizeof lower);
			resp_w_errorf(&r->out,
			              "ERR Syntax error in HELLO option '%s'",
			              lower);
			return;
		}
	}
	if (user != NULL) {
		size_t mark = r->out.len;
		do_auth(r, user, pass);
		if (r->out.len > mark && r->out.data[mark] == '-') {
			return;
		}
		r->out.len = mark;
	}
	if (!c->authed) {
		resp_w_error(&r->out, "NOAUTH HELLO must be called with the "
		                      "client already authenticated, otherwise "
		                      "the HELLO <proto> AUTH <user> <pass> "
		                      "option can be used to authenticate the "
		                      "client and select the RESP protocol "
		                      "version at the same time");
		return;
	}
	if (name != NULL) {
		size_t n =
		    name->len < RESP_NAME_MAX ? name->len : RESP_NAME_MAX;
		memcpy(c->name, name->p, n);
		c->name[n] = '\0';
	}
	c->proto = (int)ver;
	r->proto = c->proto;
	resp_w_map(&r->out, 7, r->proto);
	resp_w_bulk_str(&r->out, "server");
	resp_w_bulk_str(&r->out, "redis");
	resp_w_bulk_str(&r->out, "version");
	resp_w_bulk_str(&r->out, RESP_VERSION);
	resp_w_bulk_str(&r->out, "proto");
	resp_w_int(&r->out, r->proto);
	resp_w_bulk_str(&r->out, "id");
	resp_w_int(&r->out, (int64_t)c->id);
	resp_w_bulk_str(&r->out, "mode");
	resp_w_bulk_str(&r->out, "cluster");
	resp_w_bulk_str(&r->out, "role");
	resp_w_bulk_str(&r->out, "master");
	resp_w_bulk_str(&r->out, "modules");
	resp_w_array(&r->out, 0);
}

static bool valid_name(const struct resp_arg *a)
{
	for (size_t i = 0; i < a->len; i++) {
		if (a->p[i] < '!' || a->p[i] > '~') {
			return false;
		}
	}
	return true;
}

static void do_client(struct resp_req *r, const struct resp_arg *argv,
                      uint32_t argc)
{
	struct resp_conn *c = r->c;
	struct resp_server *s = c->srv;
	const struct resp_arg *sub = &argv[1];

	if (arg_eq(sub, "ID") && argc == 2) {
		resp_w_int(&r->out, (int64_t)c->id);
	} else if (arg_eq(sub, "GETNAME") && argc == 2) {
		if (c->name[0] == '\0') {
			resp_w_null(&r->out, r->proto);
		} else {
			resp_w_bulk_str(&r->out, c->name);
		}
	} else if (arg_eq(sub, "SETNAME") && argc == 3) {
		if (!valid_name(&argv[2])) {
			resp_w_error(&r->out, "ERR Client names cannot contain "
			                      "spaces, newlines or special "
			                      "characters.");
			return;
		}
		size_t n =
		    argv[2].len < RESP_NAME_MAX ? argv[2].len : RESP_NAME_MAX;
		memcpy(c->name, argv[2].p, n);
		c->name[n] = '\0';
		resp_w_simple(&r->out, "OK");
	} else if (arg_eq(sub, "SETINFO") && argc == 4) {
		resp_w_simple(&r->out, "OK");
	} else if ((arg_eq(sub, "LIST") && argc == 2) ||
	           (arg_eq(sub, "INFO") && argc == 2)) {
		struct wbuf txt;
		wbuf_init(&txt);
		if (arg_eq(sub, "INFO")) {
			resp_conn_describe(c, &txt);
		} else {
			for (struct resp_conn *o = s->conns; o != NULL;
			     o = o->next) {
				if (!o->closed) {
					resp_conn_describe(o, &txt);
				}
			}
		}
		resp_w_verbatim(&r->out, (const char *)txt.data, txt.len,
		                r->proto);
		wbuf_free(&txt);
	} else if (arg_eq(sub, "KILL") && argc >= 3) {
		/* CLIENT KILL addr | KILL ID id | KILL ADDR addr */
		long long id = -1;
		const struct resp_arg *addr = NULL;
		bool old = argc == 3;
		if (old) {
			addr = &argv[2];
		} else if (argc == 4 && arg_eq(&argv[2], "ID")) {
			if (arg_ll(&argv[3], &id) != 0) {
				resp_w_error(&r->out, "ERR client-id should be "
				                      "greater than 0");
				return;
			}
		} else if (argc == 4 && arg_eq(&argv[2], "ADDR")) {
			addr = &argv[3];
		} else {
			resp_w_error(&r->out, "ERR syntax error");
			return;
		}
		long long killed = 0;
		for (struct resp_conn *o = s->conns; o != NULL; o = o->next) {
			bool match =
			    addr != NULL
			        ? strlen(o->peer) == addr->len &&
			              memcmp(o->peer, addr->p, addr->len) == 0
			        : (long long)o->id == id;
			if (match && !o->closed) {
				killed++;
				if (o == c) {
					/* As Redis: the reply first. */
					c->quit = true;
				} else {
					resp_conn_kill(o, "CLIENT KILL");
				}
			}
		}
		if (old) {
			if (killed == 0) {
				resp_w_error(&r->out, "ERR No such client");
			} else {
				resp_w_simple(&r->out, "OK");
			}
		} else {
			resp_w_int(&r->out, killed);
		}
	} else {
		char lower[64];
		lower_name(sub, lower, sizeof lower);
		resp_w_errorf(&r->out,
		              "ERR unknown subcommand or wrong number of "
		              "arguments for '%s'. Try CLIENT HELP.",
		              lower);
	}
}

/* --- COMMAND -------------------------------------------------------------- */

static void write_words(struct resp_req *r, const char *words, bool status)
{
	size_t n = 0;
	const char *p = words;
	while (*p != '\0') {
		while (*p == ' ') {
			p++;
		}
		if (*p == '\0') {
			break;
		}
		n++;
		while (*p != '\0' && *p != ' ') {
			p++;
		}
	}
	resp_w_set(&r->out, n, r->proto);
	p = words;
	while (*p != '\0') {
		char w[64];
		size_t k = 0;
		while (*p == ' ') {
			p++;
		}
		while (*p != '\0' && *p != ' ' && k + 1 < sizeof w) {
			w[k++] = *p++;
		}
		w[k] = '\0';
		if (k == 0) {
			break;
		}
		if (status) {
			resp_w_simple(&r->out, w);
		} else {
			resp_w_bulk_str(&r->out, w);
		}
	}
}

static void command_entry(struct resp_req *r, const struct rcmd *d)
{
	char cats[128];
	resp_w_array(&r->out, 10);
	resp_w_bulk_str(&r->out, d->name);
	resp_w_int(&r->out, d->arity);
	write_words(r, d->flags, true);
	resp_w_int(&r->out, d->first);
	resp_w_int(&r->out, d->last);
	resp_w_int(&r->out, d->step);
	snprintf(cats, sizeof cats, "@%s @%s", d->group,
	         strstr(d->flags, "readonly") ? "read" : "write");
	if (d->kind != K_KV) {
		snprintf(cats, sizeof cats, "@%s", d->group);
	}
	write_words(r, cats, true);
	resp_w_set(&r->out, 0, r->proto);
	resp_w_set(&r->out, 0, r->proto);
	resp_w_set(&r->out, 0, r->proto);
}

/* The arguments of COMMAND DOCS: "name:type" words, '?' optional, '*'
 * multiple. */
/* The "arguments" of a oneof: its '|'-separated alternatives, each a
 * pure token. */
static void docs_alternatives(struct resp_req *r, const char *alts)
{
	size_t n = 1;
	for (const char *q = alts; *q != '\0'; q++) {
		n += *q == '|';
	}
	resp_w_bulk_str(&r->out, "arguments");
	resp_w_array(&r->out, n);
	for (const char *q = alts; n > 0; n--) {
		char tok[32], lower[32];
		size_t k = strcspn(q, "|");
		snprintf(tok, sizeof tok, "%.*s", (int)k, q);
		for (size_t i = 0; i <= strlen(tok); i++) {
			lower[i] = (char)tolower((unsigned char)tok[i]);
		}
		resp_w_map(&r->out, 4, r->proto);
		resp_w_bulk_str(&r->out, "name");
		resp_w_bulk_str(&r->out, lower);
		resp_w_bulk_str(&r->out, "type");
		resp_w_bulk_str(&r->out, "pure-token");
		resp_w_bulk_str(&r->out, "display_text");
		resp_w_bulk_str(&r->out, lower);
		resp_w_bulk_str(&r->out, "token");
		resp_w_bulk_str(&r->out, tok);
		q += k + (q[k] == '|');
	}
}

static void docs_args(struct resp_req *r, const char *spec)
{
	const char *p = spec;
	size_t n = 0;
	for (const char *q = spec; *q != '\0';) {
		while (*q == ' ') {
			q++;
		}
		if (*q == '\0') {
			break;
		}
		n++;
		while (*q != '\0' && *q != ' ') {
			q++;
		}
	}
	resp_w_array(&r->out, n);
	while (*p != '\0') {
		char w[96], name[64], type[64], alts[64];
		size_t k = 0;
		bool opt = false, multi = false;
		while (*p == ' ') {
			p++;
		}
		while (*p != '\0' && *p != ' ' && k + 1 < sizeof w) {
			w[k++] = *p++;
		}
		w[k] = '\0';
		if (k == 0) {
			break;
		}
		char *s = w;
		if (*s == '?') {
			opt = true;
			s++;
		}
		if (k > 0 && w[k - 1] == '*') {
			multi = true;
			w[k - 1] = '\0';
		}
		char *colon = strchr(s, ':');
		snprintf(name, sizeof name, "%.*s",
		         colon ? (int)(colon - s) : (int)strlen(s), s);
		snprintf(type, sizeof type, "%s", colon ? colon + 1 : "string");
		alts[0] = '\0';
		if (strncmp(type, "oneof(", 6) == 0) {
			snprintf(alts, sizeof alts, "%s", type + 6);
			alts[strcspn(alts, ")")] = '\0';
			snprintf(type, sizeof type, "oneof");
		} else if (strcmp(type, "block") == 0 ||
		           strcmp(type, "oneof") == 0) {
			/* Sub-arguments not listed: redis-cli reads those of a
			 * block or a oneof (and crashes without them). */
			snprintf(type, sizeof type, "string");
		}
		resp_w_map(&r->out, (opt || multi ? 4 : 3) + (alts[0] ? 1 : 0),
		           r->proto);
		resp_w_bulk_str(&r->out, "name");
		resp_w_bulk_str(&r->out, name);
		resp_w_bulk_str(&r->out, "type");
		resp_w_bulk_str(&r->out, type);
		resp_w_bulk_str(&r->out, "display_text");
		resp_w_bulk_str(&r->out, name);
		if (opt || multi) {
			resp_w_bulk_str(&r->out, "flags");
			resp_w_array(&r->out, (opt ? 1 : 0) + (multi ? 1 : 0));
			if (opt) {
				resp_w_simple(&r->out, "optional");
			}
			if (multi) {
				resp_w_simple(&r->out, "multiple");
			}
		}
		if (alts[0] != '\0') {
			docs_alternatives(r, alts);
		}
	}
}

static void doc_entry(struct resp_req *r, const struct rcmd *d)
{
	resp_w_bulk_str(&r->out, d->name);
	resp_w_map(&r->out, 5, r->proto);
	resp_w_bulk_str(&r->out, "summary");
	resp_w_bulk_str(&r->out, d->summary);
	resp_w_bulk_str(&r->out, "since");
	resp_w_bulk_str(&r->out, "1.0.0");
	resp_w_bulk_str(&r->out, "group");
	resp_w_bulk_str(&r->out, d->group);
	resp_w_bulk_str(&r->out, "complexity");
	resp_w_bulk_str(&r->out, "O(1) per key or element");
	resp_w_bulk_str(&r->out, "arguments");
	docs_args(r, d->args);
}

static void do_command(struct resp_req *r, const struct resp_arg *argv,
                       uint32_t argc)
{
	size_t n = sizeof cmds / sizeof cmds[0];
	if (argc == 1) {
		resp_w_array(&r->out, n);
		for (size_t i = 0; i < n; i++) {
			command_entry(r, &cmds[i]);
		}
	} else if (arg_eq(&argv[1], "COUNT") && argc == 2) {
		resp_w_int(&r->out, (int64_t)n);
	} else if (arg_eq(&argv[1], "INFO")) {
		resp_w_array(&r->out, argc == 2 ? n : argc - 2);
		for (uint32_t i = 2; i < argc || (argc == 2 && i - 2 < n);
		     i++) {
			const struct rcmd *d =
			    argc == 2 ? &cmds[i - 2]
			              : cmd_find(argv[i].p, argv[i].len);
			if (d == NULL) {
				resp_w_null_array(&r->out, r->proto);
			} else {
				command_entry(r, d);
			}
		}
	} else if (arg_eq(&argv[1], "DOCS")) {
		size_t found = 0;
		for (uint32_t i = 2; i < argc; i++) {
			found += cmd_find(argv[i].p, argv[i].len) != NULL;
		}
		resp_w_map(&r->out, argc == 2 ? n : found, r->proto);
		for (size_t i = 0; argc == 2 && i < n; i++) {
			doc_entry(r, &cmds[i]);
		}
		for (uint32_t i = 2; i < argc; i++) {
			const struct rcmd *d = cmd_find(argv[i].p, argv[i].len);
			if (d != NULL) {
				doc_entry(r, d);
			}
		}
	} else {
		char lower[64];
		lower_name(&argv[1], lower, sizeof lower);
		resp_w_errorf(&r->out,
		              "ERR unknown subcommand or wrong number of "
		              "arguments for '%s'. Try COMMAND HELP.",
		              lower);
	}
}

/* --- INFO and CLUSTER ----------------------------------------------------- */

static bool want(const struct resp_arg *argv, uint32_t argc, const char *sec)
{
	if (argc == 1) {
		return true;
	}
	for (uint32_t i = 1; i < argc; i++) {
		if (arg_eq(&argv[i], sec) || arg_eq(&argv[i], "all") ||
		    arg_eq(&argv[i], "everything") ||
		    arg_eq(&argv[i], "default")) {
			return true;
		}
	}
	return false;
}

#define MAX_NODES 256

/* INFO's sections, as a mask (r->flags while the key counts are read). */
enum {
	INFO_SERVER = 0x01,
	INFO_CLIENTS = 0x02,
	INFO_STATS = 0x04,
	INFO_REPLICATION = 0x08,
	INFO_CLUSTER = 0x10,
	INFO_KEYSPACE_SEC = 0x20,
};
/* r->kind of INFO's key count read (KV_KEYCOUNT). */
#define INFO_KEYSPACE 0xFF

static unsigned info_sections(const struct resp_arg *argv, uint32_t argc)
{
	static const char *const names[] = {
	    "server", "clients", "stats", "replication", "cluster", "keyspace"};
	unsigned m = 0;
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (want(argv, argc, names[i])) {
			m |= 1u << i;
		}
	}
	return m;
}

/* The INFO answer of the sections in `mask`; the keyspace line from the
 * cluster's key counts (none when it has no key, as Redis). */
static void info_write(struct resp_req *r, unsigned mask, uint64_t keys,
                       uint64_t expires)
{
	struct resp_server *s = r->c->srv;
	struct shards_node nodes[MAX_NODES];
	size_t nn = shards_nodes(s->shards, nodes, MAX_NODES);
	unsigned groups = shards_data_groups(s->shards), led = 0, known = 0;
	struct wbuf t;
	char line[512];

	for (uint32_t g = 1; g <= groups; g++) {
		bool self = false;
		if (shards_leader(s->shards, g, &self) != 0) {
			known++;
		}
		led += self;
	}
	wbuf_init(&t);
#define L(...)                                                                 \
	wbuf_append(&t, line, (size_t)snprintf(line, sizeof line, __VA_ARGS__))
	if (mask & INFO_SERVER) {
		L("# Server\r\nredis_version:%s\r\nlodestone_node_id:%" PRIu64
		  "\r\nredis_mode:cluster\r\nprocess_id:%d\r\ntcp_port:%u\r\n"
		  "uptime_in_seconds:%" PRIu64 "\r\n\r\n",
		  RESP_VERSION, s->cfg.node_id, (int)uv_os_getpid(), s->port,
		  (resp_now_ms(s) - s->started_ms) / 1000);
	}
	if (mask & INFO_CLIENTS) {
		L("# Clients\r\nconnected_clients:%zu\r\nmaxclients:%u\r\n"
		  "total_connections_received:%" PRIu64
		  "\r\nrejected_connections:%" PRIu64 "\r\n\r\n",
		  s->n_conns, s->cfg.maxclients, s->conns_total,
		  s->conns_rejected);
	}
	if (mask & INFO_STATS) {
		L("# Stats\r\ntotal_commands_processed:%" PRIu64
		  "\r\nclient_query_buffer_limit_disconnections:%" PRIu64
		  "\r\nclient_output_buffer_limit_disconnections:%" PRIu64
		  "\r\n\r\n",
		  s->commands, s->query_kills, s->output_kills);
	}
	if (mask & INFO_REPLICATION) {
		/* Each shard is a Raft group: this node leads some, follows
		 * the others. */
		L("# Replication\r\nrole:master\r\nconnected_slaves:%zu\r\n"
		  "lodestone_shards:%u\r\nlodestone_shards_led:%u\r\n"
		  "lodestone_shards_with_leader:%u\r\n",
		  nn > 0 ? nn - 1 : 0, groups, led, known);
		for (size_t i = 0; i < nn; i++) {
			L("lodestone_node%zu:id=%" PRIu64
			  ",self=%d,connected=%d,"
			  "resp=%s\r\n",
			  i, nodes[i].id, nodes[i].self, nodes[i].connected,
			  nodes[i].resp);
		}
		L("\r\n");
	}
	if (mask & INFO_CLUSTER) {
		L("# Cluster\r\ncluster_enabled:1\r\n\r\n");
	}
	if (mask & INFO_KEYSPACE_SEC) {
		L("# Keyspace\r\n");
		if (keys > 0) {
			L("db0:keys=%" PRIu64 ",expires=%" PRIu64
			  ",avg_ttl=0\r\n",
			  keys, expires);
		}
	}
#undef L
	resp_w_verbatim(&r->out, (const char *)t.data, t.len, r->proto);
	wbuf_free(&t);
}

static void run_parts(struct resp_req *r);

/* INFO: with the keyspace section, the key counts of every group first
 * (a KV_KEYCOUNT read on each; info_keyspace_done answers), else at
 * once. Returns whether the answer is pending. */
static bool do_info(struct resp_req *r, const struct resp_arg *argv,
                    uint32_t argc)
{
	struct resp_server *s = r->c->srv;
	struct fsnp_cmd_ctx ctx = {shards_data_groups(s->shards),
	                           (uint32_t)s->cfg.max_items, "", NULL};
	struct fsnp_cmd_err err = {0};
	unsigned mask = info_sections(argv, argc);
	struct store_cmd c;

	if (r->queued) {
		/* Inside MULTI the keyspace section would read every group,
		 * and a transaction runs in one: INFO answers without it. */
		mask &= ~(unsigned)INFO_KEYSPACE_SEC;
	}
	if (!(mask & INFO_KEYSPACE_SEC)) {
		info_write(r, mask, 0, 0);
		return false;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_KV_KEYCOUNT;
	c.kind = 1;
	if (fsnp_cmd_plan_store(0, &c, &ctx, &r->plan, &err) != 0) {
		resp_w_error(&r->out, err.message[0] ? err.message
		                                     : "ERR out of memory");
		return false;
	}
	r->planned = true;
	r->op = STORE_OP_KV_KEYCOUNT;
	r->kind = INFO_KEYSPACE;
	r->flags = (uint8_t)mask;
	run_parts(r);
	return true;
}

/* Nodes whose RESP address is known and that are active: the slots are
 * split evenly over them (a hint; every node answers every key). */
static size_t resp_nodes(struct resp_server *s, struct shards_node *out,
                         size_t max)
{
	struct shards_node all[MAX_NODES];
	size_t n = shards_nodes(s->shards, all, MAX_NODES), k = 0;
	for (size_t i = 0; i < n && k < max; i++) {
		if (all[i].resp[0] == '\0' ||
		    all[i].state != STORE_NODE_ACTIVE) {
			continue;
		}
		out[k++] = all[i];
	}
	return k;
}

static void split_addr(const char *a, char *host, size_t cap, long long *port)
{
	const char *colon = strrchr(a, ':');
	size_t hl = colon ? (size_t)(colon - a) : strlen(a);
	if (hl > 1 && a[0] == '[' && a[hl - 1] == ']') {
		a++;
		hl -= 2;
	}
	snprintf(host, cap, "%.*s", (int)hl, a);
	*port = colon ? atoll(colon + 1) : 0;
}

/* Redis Cluster's slot of a key: CRC16 (XMODEM) of its hash tag or of
 * the whole key, mod 16384 (a hint: every node answers every key). */
static unsigned redis_slot(const uint8_t *k, size_t n)
{
	size_t s = 0, e = n;
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		if (k[i] == '{') {
			for (size_t j = i + 1; j < n; j++) {
				if (k[j] == '}') {
					if (j > i + 1) {
						s = i + 1;
						e = j;
					}
					break;
				}
			}
			break;
		}
	}
	for (size_t i = s; i < e; i++) {
		crc ^= (uint16_t)(k[i] << 8);
		for (int b = 0; b < 8; b++) {
			crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021)
			                   : (uint16_t)(crc << 1);
		}
	}
	return crc % CLUSTER_SLOTS;
}

static void node_name(const struct shards_node *n, char *out, size_t cap)
{
	/* 40 hex characters, as Redis node ids. */
	snprintf(out, cap, "%040" PRIx64, n->id);
}

static void do_cluster(struct resp_req *r, const struct resp_arg *argv,
                       uint32_t argc)
{
	struct resp_server *s = r->c->srv;
	struct shards_node nodes[MAX_NODES];
	size_t n = resp_nodes(s, nodes, MAX_NODES);
	const struct resp_arg *sub = &argv[1];
	char host[SHARDS_ADDR_MAX], id[48];
	long long port;

	if (arg_eq(sub, "SLOTS") && argc == 2) {
		resp_w_array(&r->out, n);
		for (size_t i = 0; i < n; i++) {
			split_addr(nodes[i].resp, host, sizeof host, &port);
			node_name(&nodes[i], id, sizeof id);
			resp_w_array(&r->out, 3);
			resp_w_int(&r->out, (int64_t)(CLUSTER_SLOTS * i / n));
			resp_w_int(&r->out,
			           (int64_t)(CLUSTER_SLOTS * (i + 1) / n) - 1);
			resp_w_array(&r->out, 4);
			resp_w_bulk_str(&r->out, host);
			resp_w_int(&r->out, port);
			resp_w_bulk_str(&r->out, id);
			resp_w_map(&r->out, 0, r->proto);
		}
	} else if (arg_eq(sub, "SHARDS") && argc == 2) {
		resp_w_array(&r->out, n);
		for (size_t i = 0; i < n; i++) {
			split_addr(nodes[i].resp, host, sizeof host, &port);
			node_name(&nodes[i], id, sizeof id);
			resp_w_map(&r->out, 2, r->proto);
			resp_w_bulk_str(&r->out, "slots");
			resp_w_array(&r->out, 2);
			resp_w_int(&r->out, (int64_t)(CLUSTER_SLOTS * i / n));
			resp_w_int(&r->out,
			           (int64_t)(CLUSTER_SLOTS * (i + 1) / n) - 1);
			resp_w_bulk_str(&r->out, "nodes");
			resp_w_array(&r->out, 1);
			resp_w_map(&r->out, 7, r->proto);
			resp_w_bulk_str(&r->out, "id");
			resp_w_bulk_str(&r->out, id);
			resp_w_bulk_str(&r->out, "port");
			resp_w_int(&r->out, port);
			resp_w_bulk_str(&r->out, "ip");
			resp_w_bulk_str(&r->out, host);
			resp_w_bulk_str(&r->out, "endpoint");
			resp_w_bulk_str(&r->out, host);
			resp_w_bulk_str(&r->out, "role");
			resp_w_bulk_str(&r->out, "master");
			resp_w_bulk_str(&r->out, "replication-offset");
			resp_w_int(&r->out, 0);
			resp_w_bulk_str(&r->out, "health");
			resp_w_bulk_str(&r->out, nodes[i].connected ? "online"
			                                            : "failed");
		}
	} else if (arg_eq(sub, "NODES") && argc == 2) {
		struct wbuf t;
		char line[512];
		wbuf_init(&t);
		for (size_t i = 0; i < n; i++) {
			split_addr(nodes[i].resp, host, sizeof host, &port);
			node_name(&nodes[i], id, sizeof id);
			int k = snprintf(
			    line, sizeof line,
			    "%s %s:%lld@0 %smaster - 0 0 %zu %s %u-%u\n", id,
			    host, port, nodes[i].self ? "myself," : "", i + 1,
			    nodes[i].connected ? "connected" : "disconnected",
			    (unsigned)(CLUSTER_SLOTS * i / n),
			    (unsigned)(CLUSTER_SLOTS * (i + 1) / n) - 1);
			wbuf_append(&t, line, (size_t)k);
		}
		resp_w_verbatim(&r->out, (const char *)t.data, t.len, r->proto);
		wbuf_free(&t);
	} else if (arg_eq(sub, "INFO") && argc == 2) {
		char txt[256];
		int k = snprintf(txt, sizeof txt,
		                 "cluster_enabled:1\r\ncluster_state:ok\r\n"
		                 "cluster_slots_assigned:%u\r\n"
		                 "cluster_known_nodes:%zu\r\n"
		                 "cluster_size:%zu\r\n",
		                 n > 0 ? CLUSTER_SLOTS : 0, n, n);
		resp_w_verbatim(&r->out, txt, (size_t)k, r->proto);
	} else if (arg_eq(sub, "MYID") && argc == 2) {
		struct shards_node self = {.id = s->cfg.node_id};
		node_name(&self, id, sizeof id);
		resp_w_bulk_str(&r->out, id);
	} else if (arg_eq(sub, "KEYSLOT") && argc == 3) {
		resp_w_int(&r->out, redis_slot(argv[2].p, argv[2].len));
	} else {
		char lower[64];
		lower_name(sub, lower, sizeof lower);
		resp_w_errorf(&r->out,
		              "ERR unknown subcommand or wrong number of "
		              "arguments for '%s'. Try CLUSTER HELP.",
		              lower);
	}
}

/* --- KV commands ---------------------------------------------------------- */

void resp_req_release(struct resp_req *r)
{
	resp_multi_req_release(r);
	/* The results first: freeing the plan forgets its part count. */
	if (r->res != NULL) {
		for (uint32_t i = 0; i < r->plan.n_parts; i++) {
			free(r->res[i]);
		}
	}
	if (r->planned) {
		fsnp_plan_free(&r->plan);
	}
	free(r->res);
	free(r->res_len);
	free(r->status);
	if (r->ops != &r->one) {
		free(r->ops);
	}
	resp_req_recycle(r);
}

static void shards_error(struct resp_req *r, int status)
{
	switch (status) {
	case SHARDS_ENOTLEADER:
	case SHARDS_EUNAVAILABLE:
	case SHARDS_EBUSY:
		resp_w_errorf(&r->out, "TRYAGAIN %s", shards_strerror(status));
		break;
	default:
		resp_w_errorf(&r->out, "ERR %s", shards_strerror(status));
		break;
	}
}

/* A store error result: its message, with Redis's "ERR " when it has no
 * code of its own. */
static void store_error(struct resp_req *r, const struct store_result *res)
{
	struct store_result x = *res;
	struct store_value v;
	char msg[512];
	size_t n = 0;
	if (store_result_next(&x, &v) && v.tag == STORE_T_BYTES) {
		n = v.len < sizeof msg - 1 ? v.len : sizeof msg - 1;
		memcpy(msg, v.p, n);
	}
	msg[n] = '\0';
	size_t k = 0;
	while (k < n && isupper((unsigned char)msg[k])) {
		k++;
	}
	if (n == 0) {
		resp_w_error(&r->out, "ERR the store refused the command");
	} else if (k > 0 && (k == n || msg[k] == ' ')) {
		resp_w_error(&r->out, msg);
	} else {
		resp_w_errorf(&r->out, "ERR %s", msg);
	}
}

static bool is_status_ok(const struct resp_req *r)
{
	if (r->op == STORE_OP_KV_KEYINFO && r->kind == STORE_KEYINFO_TYPE) {
		return true; /* TYPE answers a status */
	}
	return (r->op == STORE_OP_KV_SET && !(r->flags & STORE_SET_GET)) ||
	       r->op == STORE_OP_KV_MSET || r->op == STORE_OP_KV_LOCK ||
	       r->op == STORE_OP_KV_LTRIM || r->op == STORE_OP_KV_RENAME;
}

/* One result value (and what nests in it) as RESP. */
static void emit(struct resp_req *r, struct store_result *res,
                 const struct store_value *v, int depth)
{
	struct store_value e, k;
	switch (v->tag) {
	case STORE_T_NIL:
		if (r->setnx && depth == 0) {
			resp_w_int(&r->out, 0);
		} else if (r->counted && depth == 0) {
			resp_w_null_array(&r->out, r->proto);
		} else {
			resp_w_null(&r->out, r->proto);
		}
		break;
	case STORE_T_TRUE:
	case STORE_T_FALSE:
		if (r->proto >= 3) {
			wbuf_append(
			    &r->out,
			    v->tag == STORE_T_TRUE ? "#t\r\n" : "#f\r\n", 4);
		} else {
			resp_w_int(&r->out, v->tag == STORE_T_TRUE);
		}
		break;
	case STORE_T_I64:
		resp_w_int(&r->out, v->i);
		break;
	case STORE_T_U64:
		resp_w_int(&r->out,
		           v->u > INT64_MAX ? INT64_MAX : (int64_t)v->u);
		break;
	case STORE_T_F64:
		resp_w_double(&r->out, v->f, r->proto);
		break;
	case STORE_T_BYTES:
		if (depth == 0 && r->setnx) {
			resp_w_int(&r->out, 1);
		} else if (depth == 0 && is_status_ok(r) &&
		           (r->op == STORE_OP_KV_KEYINFO ||
		            (v->len == 2 && memcmp(v->p, "OK", 2) == 0))) {
			char st[32];
			size_t n =
			    v->len < sizeof st - 1 ? v->len : sizeof st - 1;
			memcpy(st, v->p, n);
			st[n] = '\0';
			resp_w_simple(&r->out, st);
		} else if (r->proto >= 3 && (r->op == STORE_OP_KV_ZSCORE ||
		                             r->op == STORE_OP_KV_ZINCRBY ||
		                             r->op == STORE_OP_KV_ZADD_OPT)) {
			char tmp[64];
			size_t n = v->len < 63 ? v->len : 63;
			memcpy(tmp, v->p, n);
			tmp[n] = '\0';
			resp_w_double(&r->out, strtod(tmp, NULL), r->proto);
		} else {
			resp_w_bulk(&r->out, v->p, v->len);
		}
		break;
	case STORE_T_ARRAY:
		if (r->proto >= 3 &&
		    (r->op == STORE_OP_KV_ZRANGE ||
		     r->op == STORE_OP_KV_ZRANGE_EX) &&
		    (r->flags & STORE_ZRANGE_WITHSCORES) && depth == 0) {
			/* RESP3: [member, score] pairs with double scores. */
			resp_w_array(&r->out, v->n / 2);
			for (uint32_t i = 0; i + 1 < v->n; i += 2) {
				char tmp[64];
				size_t n;
				store_result_next(res, &e);
				resp_w_array(&r->out, 2);
				emit(r, res, &e, depth + 1);
				store_result_next(res, &e);
				n = e.len < 63 ? e.len : 63;
				memcpy(tmp, e.p, n);
				tmp[n] = '\0';
				resp_w_double(&r->out, strtod(tmp, NULL),
				              r->proto);
			}
			break;
		}
		if (r->op == STORE_OP_KV_SMEMBERS && depth == 0) {
			resp_w_set(&r->out, v->n, r->proto);
		} else {
			resp_w_array(&r->out, v->n);
		}
		for (uint32_t i = 0; i < v->n; i++) {
			if (!store_result_next(res, &e)) {
				break;
			}
			emit(r, res, &e, depth + 1);
		}
		break;
	case STORE_T_MAP:
		resp_w_map(&r->out, v->n, r->proto);
		for (uint32_t i = 0; i < v->n; i++) {
			if (!store_result_next_key(res, &k) ||
			    !store_result_next(res, &e)) {
				break;
			}
			resp_w_bulk(&r->out, k.p, k.len);
			emit(r, res, &e, depth + 1);
		}
		break;
	default:
		resp_w_error(&r->out, "ERR malformed result from the store");
		break;
	}
}

static void reply_one(struct resp_req *r, const uint8_t *p, size_t len)
{
	struct store_result res;
	struct store_value v;
	if (store_result_open(p, len, &res) != 0) {
		resp_w_error(&r->out, "ERR malformed result from the store");
		return;
	}
	if (res.status != STORE_OK) {
		store_error(r, &res);
		return;
	}
	if (!store_result_next(&res, &v)) {
		resp_w_error(&r->out, "ERR malformed result from the store");
		return;
	}
	emit(r, &res, &v, 0);
}

/* KEYS: the parts' keys one after another. */
static void reply_concat(struct resp_req *r)
{
	struct fsnp_plan *pl = &r->plan;
	uint32_t total = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			resp_w_array(&r->out, total);
		}
		for (uint32_t i = 0; i < pl->n_parts; i++) {
			struct store_result res;
			struct store_value v, e;
			store_result_open(r->res[i], r->res_len[i], &res);
			if (!store_result_next(&res, &v) ||
			    v.tag != STORE_T_ARRAY) {
				if (pass == 0) {
					resp_w_error(
					    &r->out,
					    "ERR malformed result from "
					    "the store");
					return;
				}
				continue;
			}
			if (pass == 0) {
				total += v.n;
				continue;
			}
			for (uint32_t k = 0;
			     k < v.n && store_result_next(&res, &e); k++) {
				resp_w_bulk(&r->out, e.p, e.len);
			}
		}
	}
}

/* INFO keyspace: the groups' [keys, keys with an expiry] summed, then the
 * whole INFO answer (the sections asked for are in r->flags). A group
 * that did not answer (no leader yet) leaves the count unknown: the
 * section is then empty rather than wrong, and INFO still answers. */
static void info_keyspace_done(struct resp_req *r)
{
	struct fsnp_plan *pl = &r->plan;
	uint64_t keys = 0, exp = 0;
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		struct store_result res;
		struct store_value v, e;
		if (r->status[i] != SHARDS_OK ||
		    store_result_open(r->res[i], r->res_len[i], &res) != 0 ||
		    res.status != STORE_OK || !store_result_next(&res, &v) ||
		    v.tag != STORE_T_ARRAY || v.n != 2) {
			keys = 0;
			break;
		}
		if (store_result_next(&res, &e) && e.tag == STORE_T_U64) {
			keys += e.u;
		}
		if (store_result_next(&res, &e) && e.tag == STORE_T_U64) {
			exp += e.u;
		}
	}
	info_write(r, r->flags, keys, exp);
}

void resp_cmd_reply_result(struct resp_req *q, const uint8_t *p, size_t len)
{
	reply_one(q, p, len);
}

void resp_cmd_shards_error(struct resp_req *r, int status)
{
	shards_error(r, status);
}

/* DEL: the parts' counts summed. MGET: the parts' values in request
 * order. */
static void reply_merged(struct resp_req *r)
{
	struct fsnp_plan *pl = &r->plan;
	int64_t sum = 0;
	struct {
		const uint8_t *p;
		size_t len;
		bool nil;
	} *items = NULL;

	if (r->op == STORE_OP_KV_KEYCOUNT && r->kind == INFO_KEYSPACE) {
		info_keyspace_done(r);
		return;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		struct store_result res;
		if (r->status[i] != SHARDS_OK) {
			shards_error(r, r->status[i]);
			return;
		}
		if (store_result_open(r->res[i], r->res_len[i], &res) != 0) {
			resp_w_error(&r->out,
			             "ERR malformed result from the store");
			return;
		}
		if (res.status != STORE_OK) {
			store_error(r, &res);
			return;
		}
	}
	if (pl->merge == FSNP_MERGE_CONCAT) {
		reply_concat(r);
		return;
	}
	if (pl->merge == FSNP_MERGE_SUM) {
		for (uint32_t i = 0; i < pl->n_parts; i++) {
			struct store_result res;
			struct store_value v;
			store_result_open(r->res[i], r->res_len[i], &res);
			if (store_result_next(&res, &v) &&
			    v.tag == STORE_T_I64) {
				sum += v.i;
			}
		}
		resp_w_int(&r->out, sum);
		return;
	}
	items = calloc(pl->n_items ? pl->n_items : 1, sizeof *items);
	if (items == NULL) {
		resp_w_error(&r->out, "ERR out of memory");
		return;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		struct store_result res;
		struct store_value v, e;
		store_result_open(r->res[i], r->res_len[i], &res);
		if (!store_result_next(&res, &v) || v.tag != STORE_T_ARRAY ||
		    v.n != pl->parts[i].n) {
			resp_w_error(&r->out,
			             "ERR malformed result from the store");
			free(items);
			return;
		}
		for (uint32_t k = 0; k < v.n && store_result_next(&res, &e);
		     k++) {
			uint32_t at = pl->parts[i].pos[k];
			if (at < pl->n_items) {
				items[at].nil = e.tag != STORE_T_BYTES;
				items[at].p = e.p;
				items[at].len = e.len;
			}
		}
	}
	resp_w_array(&r->out, pl->n_items);
	for (uint32_t i = 0; i < pl->n_items; i++) {
		if (items[i].nil || items[i].p == NULL) {
			resp_w_null(&r->out, r->proto);
		} else {
			resp_w_bulk(&r->out, items[i].p, items[i].len);
		}
	}
	free(items);
}

static void op_done(void *data, int status, const uint8_t *result, size_t len)
{
	struct resp_op *op = data;
	struct resp_req *r = op->req;
	r->c->srv->ops--;
	if (r->plan.merge == FSNP_MERGE_ONE) {
		uint8_t *page = NULL;
		size_t plen = 0;
		/* SCAN: the next page's key kept (node/scan_cursors.h) */
		if (status == SHARDS_OK && r->op == STORE_OP_KV_SCAN &&
		    r->c->srv->cfg.scan_cursors != NULL &&
		    scan_cursors_result(r->c->srv->cfg.scan_cursors,
		                        r->plan.parts[0].group, result, len,
		                        &page, &plen) != 0) {
			resp_w_error(&r->out, "ERR out of memory");
		} else if (status != SHARDS_OK) {
			shards_error(r, status);
		} else if (page != NULL) {
			reply_one(r, page, plen);
		} else {
			reply_one(r, result, len);
		}
		free(page);
	} else {
		r->status[op->part] = status;
		if (status == SHARDS_OK && len > 0) {
			r->res[op->part] = malloc(len);
			if (r->res[op->part] == NULL) {
				r->status[op->part] = SHARDS_EBUSY;
			} else {
				memcpy(r->res[op->part], result, len);
				r->res_len[op->part] = len;
			}
		}
	}
	if (--r->pending == 0) {
		if (r->plan.merge != FSNP_MERGE_ONE) {
			reply_merged(r);
		}
		finish(r);
	}
}

/* The arguments after the name as an FSNP array of binaries, the input
 * fsnp_cmd_parse_args takes. */
static int args_value(const struct resp_arg *argv, uint32_t argc,
                      struct wbuf *buf, struct fsnp_val *out)
{
	struct fsnp_writer w;
	struct fsnp_limits lim = {UINT32_MAX, 4};
	fsnp_w_init(&w, buf);
	fsnp_w_array_begin(&w);
	for (uint32_t i = 1; i < argc; i++) {
		fsnp_w_bin(&w, argv[i].p, argv[i].len);
	}
	fsnp_w_array_end(&w);
	if (fsnp_w_finish(&w) != 0) {
		return -1;
	}
	return fsnp_value_decode(buf->data, buf->len, &lim, out, NULL);
}

static void run_kv(struct resp_req *r, const struct resp_arg *argv,
                   uint32_t argc)
{
	struct resp_conn *c = r->c;
	struct resp_server *s = c->srv;
	const struct fsnp_cmd_info *info =
	    fsnp_cmd_by_name(argv[0].p, argv[0].len);
	struct fsnp_cmd_ctx ctx = {shards_data_groups(s->shards),
	                           (uint32_t)s->cfg.max_items, "",
	                           s->cfg.scan_cursors};
	struct fsnp_cmd_err err = {0};
	struct wbuf buf;
	struct fsnp_val args;
	struct store_cmd sc;
	const char *emsg;
	char msg[512];

	/* Redis tells a non-integer expiry from a bad one (the FSNP layer
	 * calls both invalid). */
	if (info != NULL && info->store_op == STORE_OP_KV_SET) {
		for (uint32_t i = 3; i + 1 < argc; i++) {
			long long x;
			if ((arg_eq(&argv[i], "EX") || arg_eq(&argv[i], "PX") ||
			     arg_eq(&argv[i], "EXAT") ||
			     arg_eq(&argv[i], "PXAT")) &&
			    arg_ll(&argv[i + 1], &x) != 0) {
				resp_w_error(&r->out,
				             "ERR value is not an "
				             "integer or out of range");
				finish(r);
				return;
			}
		}
	}
	/* SET key value and GET key skip the argument array (their flags,
	 * kind and count stay 0). */
	int rc = 1;
	if (argc == 2 || argc == 3) {
		struct fsnp_bytes fa[2];
		for (uint32_t i = 1; i < argc; i++) {
			fa[i - 1].ptr = argv[i].p;
			fa[i - 1].len = argv[i].len;
		}
		rc = fsnp_cmd_parse_args_fast(info, fa, argc - 1, &ctx,
		                              &r->plan, &err);
	}
	bool fast = rc == 0;
	if (rc > 0) {
		wbuf_init(&buf);
		if (info == NULL || info->kind != FSNP_CMD_KV ||
		    args_value(argv, argc, &buf, &args) != 0) {
			wbuf_free(&buf);
			resp_w_error(&r->out, "ERR out of memory");
			finish(r);
			return;
		}
		rc = fsnp_cmd_parse_args(info, &args, &ctx, &r->plan, &err);
		wbuf_free(&buf);
	}
	if (rc != 0) {
		resp_w_error(&r->out,
		             err.message[0] ? err.message : "ERR syntax error");
		finish(r);
		return;
	}
	r->planned = true;
	r->op = r->plan.op;
	if (!fast && r->plan.n_parts == 1 &&
	    store_cmd_decode(r->plan.parts[0].cmd, r->plan.parts[0].len, &sc,
	                     &emsg) == 0) {
		r->flags = sc.flags;
		r->kind = sc.kind;
		r->counted =
		    ((sc.op == STORE_OP_KV_LPOP || sc.op == STORE_OP_KV_RPOP) &&
		     sc.count > 0) ||
		    sc.op == STORE_OP_KV_POP;
	}
	if (s->cfg.users != NULL &&
	    fsnp_server_acl_check_plan(s->cfg.users, c->user, &r->plan, msg,
	                               sizeof msg) != 0) {
		resp_w_error(&r->out, msg);
		finish(r);
		return;
	}
	if (r->queued) {
		return; /* planned for EXEC (resp_multi.c), not run now */
	}
	run_parts(r);
}

/* Runs a planned request's parts on their groups; the reply comes through
 * op_done. */
static void run_parts(struct resp_req *r)
{
	struct resp_server *s = r->c->srv;
	uint32_t n = r->plan.n_parts;

	if (n == 0) {
		if (r->plan.merge == FSNP_MERGE_SUM) {
			resp_w_int(&r->out, 0);
		} else {
			resp_w_array(&r->out, 0);
		}
		finish(r);
		return;
	}
	r->ops = n == 1 ? &r->one : calloc(n, sizeof *r->ops);
	if (r->plan.merge != FSNP_MERGE_ONE) {
		r->status = calloc(n, sizeof *r->status);
		r->res = calloc(n, sizeof *r->res);
		r->res_len = calloc(n, sizeof *r->res_len);
	}
	if (r->ops == NULL ||
	    (r->plan.merge != FSNP_MERGE_ONE &&
	     (r->status == NULL || r->res == NULL || r->res_len == NULL))) {
		resp_w_error(&r->out, "ERR out of memory");
		finish(r);
		return;
	}
	/* One extra count: parts answering inside the calls below must not
	 * finish the request before every part is submitted. */
	r->pending = n + 1;
	for (uint32_t i = 0; i < n; i++) {
		struct fsnp_part *p = &r->plan.parts[i];
		int st;
		r->ops[i].req = r;
		r->ops[i].part = i;
		s->ops++;
		st = p->read ? shards_read_cmd(s->shards, p->group, p->cmd,
		                               p->len, op_done, &r->ops[i])
		             : shards_propose(s->shards, p->group, p->cmd,
		                              p->len, op_done, &r->ops[i]);
		if (st != 0) {
			op_done(&r->ops[i], st, NULL, 0);
		}
	}
	if (--r->pending == 0) {
		if (r->plan.merge != FSNP_MERGE_ONE) {
			reply_merged(r);
		}
		finish(r);
	}
}

/* SETNX k v, SETEX k s v, PSETEX k ms v: SET with NX, EX or PX. */
static void run_setx(struct resp_req *r, const struct rcmd *d,
                     const struct resp_arg *argv)
{
	static const struct resp_arg set = {(const uint8_t *)"SET", 3};
	static const struct resp_arg nx = {(const uint8_t *)"NX", 2};
	static const struct resp_arg ex = {(const uint8_t *)"EX", 2};
	static const struct resp_arg px = {(const uint8_t *)"PX", 2};
	struct resp_arg a[5] = {set, argv[1]};
	long long t;

	if (strcmp(d->name, "setnx") == 0) {
		a[2] = argv[2];
		a[3] = nx;
		r->setnx = true;
		run_kv(r, a, 4);
		return;
	}
	if (arg_ll(&argv[2], &t) != 0) {
		resp_w_error(&r->out,
		             "ERR value is not an integer or out of range");
		finish(r);
		return;
	}
	if (t <= 0) {
		resp_w_errorf(&r->out,
		              "ERR invalid expire time in '%s' command",
		              d->name);
		finish(r);
		return;
	}
	a[2] = argv[3];
	a[3] = d->name[0] == 's' ? ex : px;
	a[4] = argv[2];
	run_kv(r, a, 5);
}

/* --- Dispatch ------------------------------------------------------------- */

static void unknown(struct resp_req *r, const struct resp_arg *argv,
                    uint32_t argc)
{
	char msg[512];
	size_t n =
	    (size_t)snprintf(msg, sizeof msg,
	                     "ERR unknown command '%.*s', with args "
	                     "beginning with: ",
	                     (int)(argv[0].len < 128 ? argv[0].len : 128),
	                     (const char *)argv[0].p);
	for (uint32_t i = 1; i < argc && n < sizeof msg - 1; i++) {
		n += (size_t)snprintf(
		    msg + n, sizeof msg - n, "'%.*s' ",
		    (int)(argv[i].len < 128 ? argv[i].len : 128),
		    (const char *)argv[i].p);
	}
	resp_w_error(&r->out, msg);
}

static bool arity_ok(const struct rcmd *d, uint32_t argc)
{
	return d->arity > 0 ? argc == (uint32_t)d->arity
	                    : argc >= (uint32_t)-d->arity;
}

/* The Lodestone slot of the keys `d` names in argv (its first, last and
 * step, as COMMAND lists them): false when it names none; `cross` when
 * they are not all in one slot. */
static bool key_slots(const struct rcmd *d, const struct resp_arg *argv,
                      uint32_t argc, unsigned *slot, bool *cross)
{
	int last = d->last < 0 ? (int)argc + d->last : d->last;
	int step = d->step > 0 ? d->step : 1;
	bool keyed = false;

	*cross = false;
	if (d->first <= 0) {
		return false;
	}
	for (int i = d->first; i <= last && i < (int)argc; i += step) {
		unsigned k = fsnp_slot_of(argv[i].p, argv[i].len);
		if (!keyed) {
			*slot = k;
			keyed = true;
		} else if (k != *slot) {
			*cross = true;
		}
	}
	return keyed;
}

/* Commands a transaction runs itself rather than queueing (QUIT too, as
 * Redis): with their arity right. */
static bool tx_control(const struct rcmd *d, uint32_t argc)
{
	return d != NULL && arity_ok(d, argc) &&
	       (d->kind == K_MULTI || d->kind == K_EXEC ||
	        d->kind == K_DISCARD || d->kind == K_WATCH ||
	        d->kind == K_QUIT);
}

/* Kinds that may be queued after MULTI: KV commands (run_kv plans a
 * queued request and stops there) and commands that answer without the
 * store. A kind missing here is refused inside MULTI (HELLO and AUTH
 * change the connection, which a transaction cannot take back). */
static bool queueable(const struct rcmd *d)
{
	switch (d->kind) {
	case K_KV:
		/* A KV command without keys (DBSIZE, SCAN, KEYS) reads every
		 * group; a transaction runs in one. */
		return d->first > 0;
	case K_SETX:
	case K_PING:
	case K_ECHO:
	case K_SELECT:
	case K_CLIENT:
	case K_COMMAND:
	case K_INFO:
	case K_CLUSTER:
	case K_OK:
	case K_UNWATCH:
		return true;
	default:
		return false;
	}
}

/* A command after MULTI. What Redis refuses when queueing (an unknown
 * command, a wrong arity; here also HELLO and AUTH) answers now and
 * aborts the transaction. Anything else runs as a queued request of its
 * own: a KV command is planned and checked against the ACL but not run
 * (resp_multi.c runs it in EXEC); another command answers now, its reply
 * kept for EXEC's array. */
static void queue_cmd(struct resp_req *r, const struct rcmd *d,
                      const struct resp_arg *argv, uint32_t argc)
{
	struct resp_req *q;
	unsigned slot = 0;
	bool cross = false, keyed;

	if (d == NULL) {
		if (is_refused(argv[0].p, argv[0].len)) {
			char lower[64];
			lower_name(&argv[0], lower, sizeof lower);
			resp_w_errorf(
			    &r->out,
			    "ERR '%s' is not supported by Lodestone's "
			    "RESP listener (docs/resp.md)",
			    lower);
		} else {
			unknown(r, argv, argc);
		}
		resp_multi_abort(r);
		return;
	}
	if (!arity_ok(d, argc) && d->kind == K_EXEC) {
		/* As Redis: a refused EXEC ends the transaction at once. */
		resp_w_error(&r->out,
		             "EXECABORT Transaction discarded because "
		             "of: wrong number of arguments for 'exec' "
		             "command");
		resp_multi_conn_free(r->c);
		finish(r);
		return;
	}
	if (!arity_ok(d, argc)) {
		wrong_args(r, &argv[0]);
		resp_multi_abort(r);
		return;
	}
	if (!queueable(d)) {
		resp_w_errorf(&r->out,
		              "ERR '%s' inside MULTI is not supported by "
		              "Lodestone (docs/resp.md)",
		              d->name);
		resp_multi_abort(r);
		return;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		resp_w_error(&r->out, "ERR out of memory");
		resp_multi_abort(r);
		return;
	}
	q->c = r->c;
	q->proto = r->c->proto;
	q->queued = true;
	wbuf_init(&q->out);
	resp_cmd_run(q, argv, argc);
	keyed = key_slots(d, argv, argc, &slot, &cross);
	resp_multi_queue(r, q, keyed, slot, cross);
}

void resp_cmd_run(struct resp_req *r, const struct resp_arg *argv,
                  uint32_t argc)
{
	struct resp_conn *c = r->c;
	const struct rcmd *d = cmd_find(argv[0].p, argv[0].len);
	char msg[512];

	lower_name(&argv[0], c->last_cmd, sizeof c->last_cmd);
	if (c->multi != NULL && !r->queued && !tx_control(d, argc)) {
		queue_cmd(r, d, argv, argc);
		return;
	}
	if (d == NULL) {
		if (!c->authed) {
			resp_w_error(&r->out,
			             "NOAUTH Authentication required.");
		} else if (is_refused(argv[0].p, argv[0].len)) {
			char lower[64];
			lower_name(&argv[0], lower, sizeof lower);
			resp_w_errorf(
			    &r->out,
			    "ERR '%s' is not supported by Lodestone's "
			    "RESP listener (docs/resp.md)",
			    lower);
		} else {
			unknown(r, argv, argc);
		}
		finish(r);
		return;
	}
	if (!c->authed && d->kind != K_AUTH && d->kind != K_HELLO &&
	    d->kind != K_QUIT) {
		resp_w_error(&r->out, "NOAUTH Authentication required.");
		finish(r);
		return;
	}
	if ((d->arity > 0 && argc != (uint32_t)d->arity) ||
	    (d->arity < 0 && argc < (uint32_t)-d->arity)) {
		wrong_args(r, &argv[0]);
		finish(r);
		return;
	}
	if (d->kind == K_KV) {
		run_kv(r, argv, argc);
		return;
	}
	if (d->kind == K_SETX) {
		run_setx(r, d, argv);
		return;
	}
	if (d->kind != K_AUTH && d->kind != K_HELLO && d->kind != K_QUIT &&
	    c->srv->cfg.users != NULL &&
	    fsnp_server_acl_check_cmd(c->srv->cfg.users, c->user, d->name,
	                              strlen(d->name), d->cats, msg,
	                              sizeof msg) != 0) {
		resp_w_error(&r->out, msg);
		finish(r);
		return;
	}
	switch (d->kind) {
	case K_PING:
		if (argc == 1) {
			resp_w_simple(&r->out, "PONG");
		} else if (argc == 2) {
			resp_w_bulk(&r->out, argv[1].p, argv[1].len);
		} else {
			wrong_args(r, &argv[0]);
		}
		break;
	case K_ECHO:
		resp_w_bulk(&r->out, argv[1].p, argv[1].len);
		break;
	case K_QUIT:
		resp_w_simple(&r->out, "OK");
		c->quit = true;
		break;
	case K_SELECT: {
		long long db;
		if (arg_ll(&argv[1], &db) != 0) {
			resp_w_error(
			    &r->out,
			    "ERR value is not an integer or out of range");
		} else if (db != 0) {
			resp_w_error(&r->out, "ERR DB index is out of range");
		} else {
			resp_w_simple(&r->out, "OK");
		}
		break;
	}
	case K_HELLO:
		do_hello(r, argv, argc);
		break;
	case K_AUTH:
		if (argc > 3) {
			resp_w_error(&r->out, "ERR syntax error");
		} else {
			do_auth(r, argc == 3 ? &argv[1] : NULL,
			        &argv[argc - 1]);
		}
		break;
	case K_CLIENT:
		do_client(r, argv, argc);
		break;
	case K_COMMAND:
		do_command(r, argv, argc);
		break;
	case K_INFO:
		if (do_info(r, argv, argc)) {
			return; /* answered when the key counts are in */
		}
		break;
	case K_CLUSTER:
		do_cluster(r, argv, argc);
		break;
	case K_OK:
		resp_w_simple(&r->out, "OK");
		break;
	case K_MULTI:
		resp_multi_begin(r);
		return;
	case K_EXEC:
		resp_multi_exec(r);
		return;
	case K_DISCARD:
		resp_multi_discard(r);
		return;
	case K_WATCH:
		resp_multi_watch(r, argv, argc);
		return;
	case K_UNWATCH:
		resp_multi_unwatch(r);
		return;
	default:
		unknown(r, argv, argc);
		break;
	}
	finish(r);
}
