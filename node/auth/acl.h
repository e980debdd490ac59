/* ACL users in the Redis style, for the FSNP listener: a user's rules, the
 * table of users and the check every command passes before dispatch.
 *
 * Rules (acl_rule.c), each one token, applied in order:
 *   on / off              the user may / may not authenticate
 *   >password <password   add / remove a password (stored as SHA-256)
 *   #<64 hex> !<64 hex>   add / remove a password by its SHA-256
 *   nopass / resetpass    any password works / no password works
 *   +@cat -@cat           allow / deny a category's commands
 *   +cmd -cmd             allow / deny one command (case-insensitive)
 *   allcommands nocommands  the same as +@all / -@all
 *   ~glob %R~glob %W~glob %RW~glob  key patterns (read and write, read,
 *                         write); allkeys = ~*, resetkeys drops them all
 *   reset                 off, resetpass, resetkeys, nocommands
 * Categories: read write keyspace string hash list set sortedset flow
 * admin connection fast slow dangerous, and all.
 *
 * Command rules are kept in order and the last one that matches a command
 * decides (what Redis's bitmap gives); +@all / -@all / allcommands /
 * nocommands replace the list. Globs are Redis's: `*`, `?`, `[...]`
 * (ranges, `^` negation) and `\` escapes.
 *
 * A user's description (acl_user_describe) is its rules again, passwords
 * as `#hash`: what the meta group stores and what ACL LIST shows. */
#ifndef LS_NODE_AUTH_ACL_H
#define LS_NODE_AUTH_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACL_NAME_MAX 64             /* bytes of a user name */
#define ACL_PASSWORDS_MAX 16        /* passwords of one user */
#define ACL_PATTERNS_MAX 64         /* key patterns of one user */
#define ACL_CMD_RULES_MAX 128       /* command rules of one user */
#define ACL_TOKEN_MAX 512           /* bytes of one rule token */
#define ACL_USERS_MAX 1024          /* users in one table */
#define ACL_DESCRIBE_MAX 65536      /* bytes of one user's description */
#define ACL_SETUSER_TOKENS_MAX 1024 /* rule tokens of one ACL SETUSER */

enum acl_cat {
	ACL_CAT_READ = 1u << 0,
	ACL_CAT_WRITE = 1u << 1,
	ACL_CAT_KEYSPACE = 1u << 2,
	ACL_CAT_STRING = 1u << 3,
	ACL_CAT_HASH = 1u << 4,
	ACL_CAT_LIST = 1u << 5,
	ACL_CAT_SET = 1u << 6,
	ACL_CAT_SORTEDSET = 1u << 7,
	ACL_CAT_FLOW = 1u << 8,
	ACL_CAT_ADMIN = 1u << 9,
	ACL_CAT_CONNECTION = 1u << 10,
	ACL_CAT_FAST = 1u << 11,
	ACL_CAT_SLOW = 1u << 12,
	ACL_CAT_DANGEROUS = 1u << 13,
};

#define ACL_CAT_ALL 0xFFFFFFFFu

/* Key access a command needs, and a pattern grants. */
#define ACL_KEY_READ 0x01
#define ACL_KEY_WRITE 0x02

struct acl_pattern {
	char *glob; /* owned, NUL-ended */
	uint8_t flags;
};

struct acl_cmd_rule {
	bool allow;
	uint32_t cats; /* non-zero: a category rule */
	char *cmd;     /* owned, lower case: a command rule */
};

struct acl_user {
	char name[ACL_NAME_MAX + 1];
	bool on;
	bool nopass;
	uint8_t pass[ACL_PASSWORDS_MAX][32];
	size_t n_pass;
	struct acl_pattern *pat; /* owned */
	size_t n_pat;
	struct acl_cmd_rule *cmd; /* owned */
	size_t n_cmd;
};

struct acl_table {
	struct acl_user **u; /* owned, sorted by name */
	size_t n;
};

/* --- Users and rules (acl_rule.c) --------------------------------------- */

/* A new user: off, no passwords, no keys, no commands (Redis's default for
 * a new user). Names are 1..ACL_NAME_MAX bytes of printable ASCII without
 * spaces. 0, or -1 with a message. */
int acl_user_init(struct acl_user *u, const char *name, size_t len, char *err,
                  size_t errlen);
void acl_user_free(struct acl_user *u);
/* A deep copy. 0 or -1 (out of memory). */
int acl_user_copy(struct acl_user *dst, const struct acl_user *src);

/* Applies one rule token. 0, or -1 with a message naming the token's kind
 * (never a password); `u` is unchanged on error. */
int acl_rule_apply(struct acl_user *u, const char *tok, size_t len, char *err,
                   size_t errlen);

/* Applies space-separated tokens (a description). 0 or -1. */
int acl_rules_apply_text(struct acl_user *u, const char *text, size_t len,
                         char *err, size_t errlen);

/* A token as it may be stored or replicated: `>password` and `<password`
 * become `#<sha256 hex>` and `!<sha256 hex>` (the same rule), any other
 * token is copied. Into out (cap at least ACL_TOKEN_MAX + 1; NUL-ended);
 * the length, or -1 when it does not fit. */
int acl_token_hashed(const char *tok, size_t len, char *out, size_t cap);

/* One rule token, borrowed. */
struct acl_token {
	const char *p;
	size_t len;
};

/* What ACL SETUSER does to the stored user, as the replicated apply runs
 * it: user `name`'s rules (`rules` NULL: a new user) with the `n` tokens
 * applied in order, described into out (NUL-ended). The length, or -1
 * with a message (never a token) when the name is bad, a token does not
 * apply, there are more than ACL_SETUSER_TOKENS_MAX or the result does not
 * fit. Deterministic. */
int acl_rules_merge(const char *name, size_t nlen, const char *rules,
                    size_t rlen, const struct acl_token *tok, size_t n,
                    char *out, size_t cap, char *err, size_t errlen);

/* The user's rules as text into buf (NUL-ended). The length, or -1 when it
 * does not fit. */
int acl_user_describe(const struct acl_user *u, char *buf, size_t cap);

/* A category by name without '@' ("read"), or 0. */
uint32_t acl_cat_by_name(const char *name, size_t len);
/* Space-separated names of the categories in `cats`. */
void acl_cat_names(uint32_t cats, char *buf, size_t cap);

/* --- Checks and the table (acl.c) --------------------------------------- */

/* Redis glob match of a value against a pattern (both with lengths). */
bool acl_glob_match(const char *pat, size_t plen, const char *s, size_t slen);

/* Whether the user may run command `cmd` (any case) of categories
 * `cats`. */
bool acl_user_allows_cmd(const struct acl_user *u, const char *cmd, size_t len,
                         uint32_t cats);
/* Whether some pattern of the user grants `need` (ACL_KEY_*) on the key. */
bool acl_user_allows_key(const struct acl_user *u, const uint8_t *key,
                         size_t len, uint8_t need);
/* Whether `password` authenticates the user (on, and nopass or one of its
 * hashes; compared in constant time). */
bool acl_user_password_ok(const struct acl_user *u, const uint8_t *password,
                          size_t len);
/* Whether the user needs a password that it has (on, not nopass, at
 * least one). */
bool acl_user_has_password(const struct acl_user *u);

void acl_table_init(struct acl_table *t);
void acl_table_free(struct acl_table *t);
/* The user by name, or NULL. */
const struct acl_user *acl_table_find(const struct acl_table *t,
                                      const char *name, size_t len);
/* Takes `u` (a heap user, freed on error too), replacing a user of the
 * same name. 0 or -1. */
int acl_table_put(struct acl_table *t, struct acl_user *u);
/* 1 removed, 0 absent. */
int acl_table_del(struct acl_table *t, const char *name, size_t len);
/* Whether some user (on) has a password. */
bool acl_table_has_password(const struct acl_table *t);

/* --- Flow queries (FSNP FLOW.QUERY) --------------------------------------
 *
 * Two ACL command names: a query is "flow.query" (@flow @read @slow); a
 * plan without running it, EXPLAIN, is "flow.query.explain", in no
 * category but @all, so +@read or +@flow never grants it (a plan shows
 * indexes and partition sizes a reader of rows need not see): it is given
 * by name (+flow.query.explain) or +@all. EXPLAIN ANALYZE runs the query
 * and shows its plan, so it needs both. Each also needs read access to
 * the partition key the query is bound to; a query across partitions (no
 * partition key) is checked against the key `*`, like every Flow request
 * that spans partitions. */
#define ACL_CMD_FLOW_QUERY "flow.query"
#define ACL_CMD_FLOW_QUERY_EXPLAIN "flow.query.explain"
#define ACL_CATS_FLOW_QUERY (ACL_CAT_FLOW | ACL_CAT_READ | ACL_CAT_SLOW)
#define ACL_CATS_FLOW_QUERY_EXPLAIN 0u

/* Whether `u` may run a Flow query bound to `partition` (NULL: across
 * partitions), as a plain query, EXPLAIN (`explain`) or EXPLAIN ANALYZE
 * (`explain` and `analyze`; `analyze` alone is a plain query). 0 allowed,
 * or -1 with the NOPERM message (naming `user`) in msg. */
int acl_check_flow_query(const struct acl_user *u, const char *user,
                         const uint8_t *partition, size_t len, bool explain,
                         bool analyze, char *msg, size_t cap);

/* The NOPERM messages, Redis's shape. */
void acl_noperm_cmd(char *buf, size_t cap, const char *user, const char *cmd,
                    size_t len);
void acl_noperm_key(char *buf, size_t cap, const char *user, const uint8_t *key,
                    size_t len);

#endif
