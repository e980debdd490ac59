/* FSNP ACL users: the node's copy of the meta group's users, AUTH, the
 * check every planned command passes before it runs, the ACL command and
 * the invalidation of sessions whose user changed (docs/security.md).
 *
 * Users live in the meta group (STORE_OP_ACL_*), as their rules' text
 * (node/auth/acl.h). Each node reads them on its sweep timer and right
 * after an ACL command of its own commits; a user whose rules changed or
 * who was deleted has every session closed on every node, after the
 * AUTH_INVALIDATED event to the sessions that subscribed to it.
 *
 * The `default` user: while the table holds no user of that name it is
 * the requirepass-compatible one (every command, every key; the password
 * is requirepass, or none without it). Without any ACL user the check is
 * a no-op. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "wire/flow_route.h"
#include "node/auth/auth.h"
#include "node/fsnp/fsnp_cmd.h"
#include "node/fsnp/fsnp_internal.h"
#include "node/log.h"
#include "node/shards.h"
#include "store/command.h"
#include "store/result.h"
#include "store/store.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_value.h"

/* How often each node reads the users again. */
#define ACL_REFRESH_MS 250

/* ACL subcommands, in plan.acl_sub. */
enum {
	SUB_NONE = 0,
	SUB_SETUSER,
	SUB_DELUSER,
	SUB_LIST,
	SUB_USERS,
	SUB_GETUSER,
};

static struct fsnp_conn *req_conn(const struct fsnp_req *r)
{
	while (r->parent != NULL) {
		r = r->parent;
	}
	return r->conn;
}

static bool is_default(const char *name)
{
	return strcmp(name, "default") == 0;
}

/* --- The node's copy ----------------------------------------------------- */

void fsnp_acl_init(struct fsnp_server *s)
{
	acl_table_init(&s->acl);
}

void fsnp_acl_free(struct fsnp_server *s)
{
	acl_table_free(&s->acl);
	free(s->acl_last);
	s->acl_last = NULL;
}

/* Closes the sessions of user `name`, with the event to those that asked
 * for it. */
static void close_sessions(struct fsnp_server *s, const char *name,
                           bool deleted)
{
	for (struct fsnp_conn *c = s->conns; c != NULL; c = c->next) {
		if (c->closing || !c->authenticated ||
		    strcmp(c->user, name) != 0) {
			continue;
		}
		log_info(s->log, "fsnp",
		         "closing session %" PRIu64 " of %s: user %s", c->id,
		         c->peer, deleted ? "deleted" : "changed");
		if (c->events & FSNP_EV_AUTH_INVALIDATED) {
			struct wbuf p;
			struct fsnp_writer w;
			wbuf_init(&p);
			fsnp_w_init(&w, &p);
			fsnp_w_map_begin(&w);
			fsnp_w_key(&w, "username");
			fsnp_w_str(&w, name);
			fsnp_w_key(&w, "reason");
			fsnp_w_str(&w,
			           deleted ? "user_deleted" : "user_changed");
			fsnp_w_map_end(&w);
			if (fsnp_w_finish(&w) == 0) {
				fsnp_conn_event(c, "AUTH_INVALIDATED", &p);
			}
			wbuf_free(&p);
		}
		/* Fail closed: nothing more runs as this user. */
		c->authenticated = false;
		c->user[0] = '\0';
		fsnp_conn_quit(c);
	}
}

/* Closes the sessions of users that are gone or whose rules changed,
 * `default` included when its first ACL user replaces the implicit one
 * (or goes back to it). */
static void invalidate(struct fsnp_server *s, const struct acl_table *old)
{
	static char a[ACL_DESCRIBE_MAX], b[ACL_DESCRIBE_MAX];
	for (size_t i = 0; i < old->n; i++) {
		const struct acl_user *o = old->u[i];
		const struct acl_user *n =
		    acl_table_find(&s->acl, o->name, strlen(o->name));
		if (n != NULL && acl_user_describe(o, a, sizeof a) >= 0 &&
		    acl_user_describe(n, b, sizeof b) >= 0 &&
		    strcmp(a, b) == 0) {
			continue;
		}
		close_sessions(s, o->name, n == NULL);
	}
	for (size_t i = 0; i < s->acl.n; i++) {
		const char *name = s->acl.u[i]->name;
		if (acl_table_find(old, name, strlen(name)) == NULL) {
			close_sessions(s, name, false);
		}
	}
}

/* Replaces the table with an ACL_LIST result ([[name, rules]...]). */
static int load(struct fsnp_server *s, const uint8_t *res, size_t len)
{
	struct fsnp_val list, pair, name, rules;
	struct fsnp_iter it, pi;
	struct acl_table t, old;
	char err[256];

	if (len < 3 || res[0] != STORE_RESULT_VERSION || res[1] != STORE_OK ||
	    fsnp_value_decode(res + 2, len - 2, NULL, &list, NULL) != 0 ||
	    list.tag != FSNP_ARRAY) {
		return -1;
	}
	acl_table_init(&t);
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &pair)) {
		struct acl_user *u;
		if (pair.tag != FSNP_ARRAY) {
			continue;
		}
		fsnp_iter_init(&pi, &pair);
		if (!fsnp_iter_next(&pi, NULL, &name) ||
		    !fsnp_iter_next(&pi, NULL, &rules) ||
		    name.tag != FSNP_BIN || rules.tag != FSNP_BIN) {
			continue;
		}
		u = malloc(sizeof *u);
		if (u == NULL) {
			goto err_oom;
		}
		if (acl_user_init(u, (const char *)name.as.bin.ptr,
		                  name.as.bin.len, err, sizeof err) != 0 ||
		    acl_rules_apply_text(u, (const char *)rules.as.bin.ptr,
		                         rules.as.bin.len, err,
		                         sizeof err) != 0) {
			/* Written by a newer node, perhaps: refuse the user
			 * rather than half-understand it. */
			log_warn(s->log, "fsnp",
			         "ACL user in the meta group ignored: %s", err);
			acl_user_free(u);
			free(u);
			continue;
		}
		if (acl_table_put(&t, u) != 0) {
			goto err_oom;
		}
	}
	old = s->acl;
	s->acl = t;
	s->acl_loaded = true;
	invalidate(s, &old);
	acl_table_free(&old);
	return 0;
err_oom:
	acl_table_free(&t);
	return -1;
}

/* A deep copy of `src` into `t`. 0 or -1 (nothing to free). */
static int copy_table(struct acl_table *t, const struct acl_table *src)
{
	acl_table_init(t);
	for (size_t i = 0; i < src->n; i++) {
		struct acl_user *c = malloc(sizeof *c);
		if (c == NULL || acl_user_copy(c, src->u[i]) != 0) {
			free(c);
			acl_table_free(t);
			return -1;
		}
		if (acl_table_put(t, c) != 0) {
			acl_table_free(t);
			return -1;
		}
	}
	return 0;
}

/* One user's change (`rules` NULL: deleted) into the copy at once. */
static void apply_change(struct fsnp_server *s, struct store_slice name,
                         const struct store_slice *rules)
{
	struct acl_table t, old;
	struct acl_user *u;
	char err[256];

	if (s->closed || copy_table(&t, &s->acl) != 0) {
		return;
	}
	if (rules == NULL) {
		acl_table_del(&t, (const char *)name.p, name.len);
	} else {
		u = malloc(sizeof *u);
		if (u == NULL) {
			goto err_free;
		}
		if (acl_user_init(u, (const char *)name.p, name.len, err,
		                  sizeof err) != 0 ||
		    acl_rules_apply_text(u, (const char *)rules->p, rules->len,
		                         err, sizeof err) != 0) {
			acl_user_free(u);
			free(u);
			goto err_free;
		}
		if (acl_table_put(&t, u) != 0) {
			goto err_free;
		}
	}
	old = s->acl;
	s->acl = t;
	/* The copy moved past the last list read: take the next one
	 * whatever it holds. */
	free(s->acl_last);
	s->acl_last = NULL;
	s->acl_last_len = 0;
	invalidate(s, &old);
	acl_table_free(&old);
	return;
err_free:
	acl_table_free(&t);
}

/* The store's ACL observer: a user change this node's replica of the
 * meta group applied. */
static void on_applied(void *data, struct store_slice name,
                       const struct store_slice *rules)
{
	apply_change(data, name, rules);
}

/* This node's own ACL command committed (it may not replicate the meta
 * group, so may see no apply): the same change at once, ahead of the
 * next read. */
static void apply_local(struct fsnp_server *s, const struct fsnp_req *r)
{
	struct store_cmd sc;
	const char *msg;

	if (r->plan.n_parts != 1 ||
	    store_cmd_decode(r->plan.parts[0].cmd, r->plan.parts[0].len, &sc,
	                     &msg) != 0) {
		return;
	}
	if (sc.op == STORE_OP_ACL_APPLY) {
		/* The user as the apply left it: [created, rules]. */
		struct fsnp_val res, created, rules;
		struct fsnp_iter it;
		struct store_slice text;
		if (r->reply.len < 3 ||
		    fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL,
		                      &res, NULL) != 0 ||
		    res.tag != FSNP_ARRAY) {
			return;
		}
		fsnp_iter_init(&it, &res);
		if (!fsnp_iter_next(&it, NULL, &created) ||
		    !fsnp_iter_next(&it, NULL, &rules) ||
		    rules.tag != FSNP_BIN) {
			return;
		}
		text.p = rules.as.bin.ptr;
		text.len = rules.as.bin.len;
		apply_change(s, sc.key, &text);
	} else if (sc.op == STORE_OP_ACL_SETUSER) {
		apply_change(s, sc.key, &sc.value);
	} else if (sc.op == STORE_OP_ACL_DELUSER) {
		apply_change(s, sc.key, NULL);
	}
}

void fsnp_acl_observe(struct fsnp_server *s, bool on)
{
	store_set_acl_observer(shards_store(s->shards), on ? on_applied : NULL,
	                       on ? s : NULL);
}

static void on_list(void *data, int status, const uint8_t *res, size_t len)
{
	struct fsnp_server *s = data;
	s->ops_outstanding--;
	s->acl_reading = false;
	if (status == SHARDS_OK && !s->closed &&
	    (len != s->acl_last_len || s->acl_last == NULL ||
	     memcmp(res, s->acl_last, len) != 0)) {
		/* Only when it changed: the same list every 250 ms costs a
		 * compare. */
		uint8_t *copy = malloc(len);
		if (copy != NULL) {
			memcpy(copy, res, len);
			free(s->acl_last);
			s->acl_last = copy;
			s->acl_last_len = len;
		}
		if (load(s, res, len) != 0) {
			log_warn(s->log, "fsnp",
			         "ACL users: unreadable list from the meta "
			         "group");
		}
	}
	if (s->acl_again && !s->closed) {
		s->acl_again = false;
		fsnp_acl_refresh(s);
	}
	fsnp_server_release(s);
}

void fsnp_acl_refresh(struct fsnp_server *s)
{
	struct store_cmd c;
	uint8_t buf[64];
	size_t n;
	const char *msg;

	if (s->closed || s->draining) {
		return;
	}
	if (s->acl_reading) {
		s->acl_again = true;
		return;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_ACL_LIST;
	if (store_cmd_size(&c, &n, &msg) != 0 || n > sizeof buf) {
		return;
	}
	store_cmd_encode_to(&c, buf, n);
	s->acl_reading = true;
	s->ops_outstanding++;
	if (shards_read_cmd(s->shards, 0, buf, n, on_list, s) != SHARDS_OK) {
		s->acl_reading = false;
		s->ops_outstanding--;
	}
}

void fsnp_acl_load_local(struct fsnp_server *s)
{
	struct store_cmd c;
	struct fsm_result res = {NULL, 0};
	uint8_t buf[64];
	size_t n;
	const char *msg;

	memset(&c, 0, sizeof c);
	c.op = STORE_OP_ACL_LIST;
	if (store_cmd_size(&c, &n, &msg) != 0 || n > sizeof buf) {
		return;
	}
	store_cmd_encode_to(&c, buf, n);
	if (store_read(shards_store(s->shards), 0, fsnp_now_ms(s), buf, n,
	               &res) == 0 &&
	    load(s, res.data, res.len) != 0) {
		log_warn(s->log, "fsnp",
		         "ACL users: unreadable list in the local meta group");
	}
	free(res.data);
}

void fsnp_acl_sweep(struct fsnp_server *s, uint64_t now)
{
	if (now >= s->acl_next_ms) {
		s->acl_next_ms = now + ACL_REFRESH_MS;
		fsnp_acl_refresh(s);
	}
}

/* --- AUTH ----------------------------------------------------------------- */

bool fsnp_acl_default_open(const struct fsnp_server *s)
{
	const struct acl_user *d = acl_table_find(&s->acl, "default", 7);
	if (d != NULL) {
		return d->on && d->nopass;
	}
	return s->lim.requirepass[0] == '\0';
}

bool fsnp_acl_has_password(const struct fsnp_server *s)
{
	return s->lim.requirepass[0] != '\0' || acl_table_has_password(&s->acl);
}

/* Constant-time comparison: the password's length may leak, its bytes
 * not. */
static bool secret_eq(struct fsnp_bytes a, const char *b)
{
	size_t n = strlen(b);
	unsigned char d = a.len != n;
	for (size_t i = 0; i < a.len; i++) {
		d |= (unsigned char)(a.ptr[i] ^
		                     (unsigned char)b[i % (n ? n : 1)]);
	}
	return d == 0 && n > 0;
}

bool fsnp_acl_auth(struct fsnp_conn *c, struct fsnp_bytes user,
                   struct fsnp_bytes pass)
{
	struct fsnp_server *s = c->srv;
	const struct acl_user *u;
	bool ok;

	if (user.len == 0 || user.len > ACL_NAME_MAX) {
		return false;
	}
	u = acl_table_find(&s->acl, (const char *)user.ptr, user.len);
	if (u != NULL) {
		ok = acl_user_password_ok(u, pass.ptr, pass.len);
	} else if (fsnp_bytes_eq(user, "default")) {
		/* Without requirepass every client is the default user
		 * already; the official SDK sends AUTH whenever it has a
		 * password, so accept. */
		ok = s->lim.requirepass[0] == '\0' ||
		     secret_eq(pass, s->lim.requirepass);
	} else {
		ok = false;
	}
	if (ok) {
		memcpy(c->user, user.ptr, user.len);
		c->user[user.len] = '\0';
	}
	return ok;
}

/* --- The check ------------------------------------------------------------ */

/* The command a KV store op is, and its categories. */
static const char *op_name(uint8_t op)
{
	if (op == STORE_OP_ACL_SETUSER || op == STORE_OP_ACL_APPLY ||
	    op == STORE_OP_ACL_DELUSER || op == STORE_OP_ACL_LIST) {
		return "ACL";
	}
	for (size_t i = 0; i < fsnp_cmd_count(); i++) {
		const struct fsnp_cmd_info *ci = fsnp_cmd_at(i);
		if (ci->kind == FSNP_CMD_KV && ci->store_op == op) {
			return ci->name;
		}
	}
	return store_op_name(op) != NULL ? store_op_name(op) : "?";
}

static uint32_t op_cats(uint8_t op, bool read)
{
	uint32_t c = read ? ACL_CAT_READ : ACL_CAT_WRITE;
	switch (op) {
	case STORE_OP_ACL_SETUSER:
	case STORE_OP_ACL_APPLY:
	case STORE_OP_ACL_DELUSER:
	case STORE_OP_ACL_LIST:
		return ACL_CAT_ADMIN | ACL_CAT_DANGEROUS | ACL_CAT_SLOW;
	case STORE_OP_KV_DEL:
	case STORE_OP_KV_EXISTS:
	case STORE_OP_KV_KEYINFO:
	case STORE_OP_KV_EXPIRE_SET:
	case STORE_OP_KV_EXPIRE_OPT:
	case STORE_OP_KV_RENAME:
	case STORE_OP_KV_KEYCOUNT:
	case STORE_OP_KV_SCAN:
		return c | ACL_CAT_KEYSPACE;
	case STORE_OP_KV_LEN:
		return c;
	case STORE_OP_KV_HSET:
	case STORE_OP_KV_HGET:
	case STORE_OP_KV_HMGET:
	case STORE_OP_KV_HGETALL:
	case STORE_OP_KV_HDEL:
	case STORE_OP_KV_HINCRBY:
	case STORE_OP_KV_HINCRBYFLOAT:
	case STORE_OP_KV_HEXISTS:
	case STORE_OP_KV_HKEYS:
		return c | ACL_CAT_HASH;
	case STORE_OP_KV_LPUSH:
	case STORE_OP_KV_RPUSH:
	case STORE_OP_KV_LPOP:
	case STORE_OP_KV_RPOP:
	case STORE_OP_KV_POP:
	case STORE_OP_KV_LRANGE:
	case STORE_OP_KV_LINDEX:
	case STORE_OP_KV_LTRIM:
		return c | ACL_CAT_LIST;
	case STORE_OP_KV_SADD:
	case STORE_OP_KV_SREM:
	case STORE_OP_KV_SMEMBERS:
	case STORE_OP_KV_SISMEMBER:
		return c | ACL_CAT_SET;
	case STORE_OP_KV_ZADD:
	case STORE_OP_KV_ZADD_OPT:
	case STORE_OP_KV_ZREM:
	case STORE_OP_KV_ZRANGE:
	case STORE_OP_KV_ZSCORE:
	case STORE_OP_KV_ZRANK:
	case STORE_OP_KV_ZINCRBY:
	case STORE_OP_KV_ZRANGE_EX:
		return c | ACL_CAT_SORTEDSET;
	default:
		return c | ACL_CAT_STRING;
	}
}

/* A plan's categories: its op's, and for KEYS (a whole-keyspace walk)
 * Redis's @slow @dangerous too. */
static uint32_t plan_cats(const struct fsnp_plan *pl, bool read)
{
	uint32_t c = op_cats(pl->op, read);
	if (pl->op == STORE_OP_KV_SCAN && pl->name != NULL &&
	    strcmp(pl->name, "KEYS") == 0) {
		c |= ACL_CAT_SLOW | ACL_CAT_DANGEROUS;
	}
	return c;
}

/* The session's user: NULL with *all when it is the implicit default
 * (every command, every key); NULL without it when it has none. */
static const struct acl_user *session_user(const struct fsnp_server *s,
                                           const struct fsnp_conn *c, bool *all)
{
	const struct acl_user *u;
	*all = false;
	if (c == NULL || !c->authenticated) {
		return NULL;
	}
	u = acl_table_find(&s->acl, c->user, strlen(c->user));
	if (u == NULL && is_default(c->user)) {
		*all = true;
	}
	return u;
}

static void deny(struct fsnp_req *r, const char *msg)
{
	struct fsnp_server *s = r->srv;
	uint64_t now = fsnp_now_ms(s);
	fsnp_reply_error(r, FSNP_STATUS_NOPERM, "noperm", msg, false, 0);
	/* At most one line a second: a denied client may retry hard. */
	if (now >= s->acl_denied_logged_ms + 1000) {
		s->acl_denied_logged_ms = now;
		log_info(s->log, "fsnp", "%s", msg);
	}
}

bool fsnp_acl_check_cmd(struct fsnp_req *r, const char *name, size_t len,
                        uint32_t cats)
{
	const struct fsnp_conn *c = req_conn(r);
	const struct acl_user *u;
	bool all;
	char msg[256];

	if (r->srv->acl.n == 0) {
		return true;
	}
	u = session_user(r->srv, c, &all);
	if (all || (u != NULL && acl_user_allows_cmd(u, name, len, cats))) {
		return true;
	}
	acl_noperm_cmd(msg, sizeof msg,
	               c != NULL && c->user[0] ? c->user : "default", name,
	               len);
	deny(r, msg);
	return false;
}

bool fsnp_acl_check_key(struct fsnp_req *r, const uint8_t *key, size_t len,
                        uint8_t need)
{
	const struct fsnp_conn *c = req_conn(r);
	const struct acl_user *u;
	bool all;
	char msg[512];

	if (r->srv->acl.n == 0) {
		return true;
	}
	u = session_user(r->srv, c, &all);
	if (all || (u != NULL && acl_user_allows_key(u, key, len, need))) {
		return true;
	}
	acl_noperm_key(msg, sizeof msg,
	               c != NULL && c->user[0] ? c->user : "default", key, len);
	deny(r, msg);
	return false;
}

bool fsnp_acl_check_flow(struct fsnp_req *r, const char *name, size_t len,
                         bool read, const uint8_t *id, size_t idlen,
                         const uint8_t *pk, size_t pklen)
{
	char key[16];
	uint32_t cats = ACL_CAT_FLOW | (read ? ACL_CAT_READ : ACL_CAT_WRITE);
	if (!fsnp_acl_check_cmd(r, name, len, cats)) {
		return false;
	}
	if (pk == NULL) {
		/* The auto partition the flow routes by. */
		int n = snprintf(key, sizeof key, "fa:%u",
		                 flow_route_bucket(id, idlen));
		pk = (const uint8_t *)key;
		pklen = (size_t)n;
	}
	return fsnp_acl_check_key(r, pk, pklen,
	                          read ? ACL_KEY_READ : ACL_KEY_WRITE);
}

bool fsnp_acl_check_flow_query(struct fsnp_req *r, const uint8_t *pk,
                               size_t pklen, bool explain, bool analyze)
{
	const struct fsnp_conn *c = req_conn(r);
	const struct acl_user *u;
	const char *name = c != NULL && c->user[0] ? c->user : "default";
	bool all;
	char msg[512];

	if (r->srv->acl.n == 0) {
		return true;
	}
	u = session_user(r->srv, c, &all);
	if (all) {
		return true;
	}
	if (u == NULL) {
		acl_noperm_cmd(msg, sizeof msg, name,
		               explain ? ACL_CMD_FLOW_QUERY_EXPLAIN
		                       : ACL_CMD_FLOW_QUERY,
		               strlen(explain ? ACL_CMD_FLOW_QUERY_EXPLAIN
		                              : ACL_CMD_FLOW_QUERY));
		deny(r, msg);
		return false;
	}
	if (acl_check_flow_query(u, name, pk, pklen, explain, analyze, msg,
	                         sizeof msg) != 0) {
		deny(r, msg);
		return false;
	}
	return true;
}

/* Calls `fn` for every key of one planned store command with the access
 * it needs; false when `fn` refuses one. *decoded is false when the part
 * cannot be decoded (nothing the planner builds). */
typedef bool (*part_key_fn)(void *ctx, const uint8_t *key, size_t len,
                            uint8_t need);

static bool walk_part_keys(const struct fsnp_part *p, part_key_fn fn, void *ctx,
                           bool *decoded)
{
	struct store_cmd sc;
	struct store_list_iter it;
	struct store_slice k, v;
	const char *msg;
	uint8_t need = p->read ? ACL_KEY_READ : ACL_KEY_WRITE;

	*decoded = store_cmd_decode(p->cmd, p->len, &sc, &msg) == 0;
	if (!*decoded) {
		return false;
	}
	switch (sc.op) {
	case STORE_OP_ACL_SETUSER:
	case STORE_OP_ACL_APPLY:
	case STORE_OP_ACL_DELUSER:
	case STORE_OP_ACL_LIST:
		return true;
	case STORE_OP_KV_DEL:
	case STORE_OP_KV_MGET:
	case STORE_OP_KV_EXISTS:
		store_list_iter_init(&it, &sc.items);
		while (store_list_next(&it, &k)) {
			if (!fn(ctx, k.p, k.len, need)) {
				return false;
			}
		}
		return true;
	case STORE_OP_KV_MSET:
	case STORE_OP_KV_MSETNX:
		store_list_iter_init(&it, &sc.items);
		while (store_list_next(&it, &k)) {
			if (!fn(ctx, k.p, k.len, need)) {
				return false;
			}
			store_list_next(&it, &v);
		}
		return true;
	case STORE_OP_KV_SET:
		if (sc.flags & STORE_SET_GET) {
			need |= ACL_KEY_READ;
		}
		break;
	case STORE_OP_KV_CAS:
		need |= ACL_KEY_READ;
		break;
	case STORE_OP_KV_KEYCOUNT:
	case STORE_OP_KV_SCAN:
		return true; /* no key: the command's own check decides */
	case STORE_OP_KV_RENAME:
		/* Redis: the source is read and deleted, the destination
		 * written */
		return fn(ctx, sc.key.p, sc.key.len,
		          ACL_KEY_READ | ACL_KEY_WRITE) &&
		       fn(ctx, sc.arg.p, sc.arg.len, ACL_KEY_WRITE);
	default:
		break;
	}
	return fn(ctx, sc.key.p, sc.key.len, need);
}

static bool req_key_ok(void *ctx, const uint8_t *key, size_t len, uint8_t need)
{
	return fsnp_acl_check_key(ctx, key, len, need);
}

/* The keys of one planned store command, and the access each needs. */
static bool check_part_keys(struct fsnp_req *r, const struct fsnp_part *p)
{
	bool decoded;
	if (walk_part_keys(p, req_key_ok, r, &decoded)) {
		return true;
	}
	if (!decoded) {
		/* Nothing the planner built fails to decode; refuse what
		 * cannot be checked. */
		deny(r, "NOPERM the command's keys cannot be checked");
	}
	return false;
}

bool fsnp_acl_check_plan(struct fsnp_req *r)
{
	const struct fsnp_plan *pl = &r->plan;
	const char *name;
	bool read = true;

	bool all;

	if (r->srv->acl.n == 0) {
		return true;
	}
	/* The requirepass-compatible default: nothing to decode. */
	(void)session_user(r->srv, req_conn(r), &all);
	if (all) {
		return true;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		read &= pl->parts[i].read;
	}
	name = pl->name != NULL && pl->op != STORE_OP_ACL_LIST
	           ? pl->name
	           : op_name(pl->op);
	if (!fsnp_acl_check_cmd(r, name, strlen(name), plan_cats(pl, read))) {
		return false;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		if (!check_part_keys(r, &pl->parts[i])) {
			return false;
		}
	}
	return true;
}

/* --- The ACL command ------------------------------------------------------ */

static int acl_err(struct fsnp_cmd_err *err, uint16_t status, const char *msg)
{
	err->status = status;
	err->code = status == FSNP_STATUS_BAD_REQUEST ? "bad_request" : "error";
	snprintf(err->message, sizeof err->message, "%s", msg);
	return -1;
}

/* A one-part plan of a meta group command. */
static int plan_meta(struct fsnp_req *r, const struct store_cmd *c,
                     struct fsnp_cmd_err *err)
{
	struct fsnp_plan *pl = &r->plan;
	const char *msg = NULL;
	size_t n;
	uint8_t *buf;

	if (store_cmd_size(c, &n, &msg) != 0 || (buf = malloc(n)) == NULL) {
		return acl_err(err, FSNP_STATUS_ERROR,
		               "ERR cannot encode the ACL command");
	}
	store_cmd_encode_to(c, buf, n);
	pl->opcode = FSNP_OP_COMMAND_EXEC;
	pl->op = c->op;
	pl->merge = FSNP_MERGE_ONE;
	pl->parts = &pl->one;
	pl->n_parts = 1;
	pl->one.group = 0;
	pl->one.read = store_op_is_read(c->op);
	pl->one.cmd = buf;
	pl->one.len = n;
	return 0;
}

static bool arg_bin(const struct fsnp_val *v, struct fsnp_bytes *out)
{
	if (v->tag != FSNP_BIN) {
		return false;
	}
	*out = v->as.bin;
	return true;
}

static void reply_whoami(struct fsnp_req *r)
{
	const struct fsnp_conn *c = req_conn(r);
	struct fsnp_writer w;
	wbuf_reset(&r->reply);
	fsnp_w_init(&w, &r->reply);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	fsnp_w_str(&w, c != NULL && c->user[0] ? c->user : "default");
	fsnp_w_finish(&w);
	r->status = FSNP_STATUS_OK;
}

/* ACL SETUSER: the tokens are checked here against the node's copy (a
 * bad one is refused before anything is proposed), then proposed as they
 * are (passwords as their hashes) in one ACL_APPLY, which applies them to
 * the stored user inside the replicated apply: two SETUSERs of one user,
 * from any connections or nodes, compose in log order and never one on
 * top of a stale copy. */
static int setuser(struct fsnp_req *r, struct fsnp_iter *it,
                   struct fsnp_bytes name, struct fsnp_cmd_err *err)
{
	static char desc[ACL_DESCRIBE_MAX];
	const struct acl_user *cur;
	struct acl_user u;
	struct store_cmd c;
	struct fsnp_val v;
	struct fsnp_bytes tok;
	struct fsnp_iter first = *it;
	struct store_slice *sl = NULL;
	char *text = NULL;
	char msg[FSNP_CMD_MSG_MAX];
	size_t n = 0, i = 0;
	int rv;

	cur = acl_table_find(&r->srv->acl, (const char *)name.ptr, name.len);
	if (cur != NULL) {
		if (acl_user_copy(&u, cur) != 0) {
			return acl_err(err, FSNP_STATUS_ERROR,
			               "ERR out of memory");
		}
	} else if (acl_user_init(&u, (const char *)name.ptr, name.len, msg,
	                         sizeof msg) != 0) {
		return acl_err(err, FSNP_STATUS_ERROR, msg);
	}
	while (fsnp_iter_next(it, NULL, &v)) {
		if (!arg_bin(&v, &tok) ||
		    acl_rule_apply(&u, (const char *)tok.ptr, tok.len, msg,
		                   sizeof msg) != 0) {
			acl_user_free(&u);
			return acl_err(err, FSNP_STATUS_ERROR,
			               v.tag == FSNP_BIN
			                   ? msg
			                   : "ERR ACL rules must be binaries");
		}
		if (++n > ACL_SETUSER_TOKENS_MAX) {
			acl_user_free(&u);
			snprintf(msg, sizeof msg,
			         "ERR at most %d ACL rules in one ACL SETUSER",
			         ACL_SETUSER_TOKENS_MAX);
			return acl_err(err, FSNP_STATUS_ERROR, msg);
		}
	}
	rv = acl_user_describe(&u, desc, sizeof desc);
	acl_user_free(&u);
	if (rv < 0) {
		return acl_err(err, FSNP_STATUS_ERROR,
		               "ERR the ACL user's rules are too long");
	}
	if (n > 0) {
		sl = calloc(n, sizeof *sl);
		text = malloc(n * (ACL_TOKEN_MAX + 1));
		if (sl == NULL || text == NULL) {
			free(sl);
			free(text);
			return acl_err(err, FSNP_STATUS_ERROR,
			               "ERR out of memory");
		}
	}
	*it = first;
	while (i < n && fsnp_iter_next(it, NULL, &v) && arg_bin(&v, &tok)) {
		char *t = text + i * (ACL_TOKEN_MAX + 1);
		int tl = acl_token_hashed((const char *)tok.ptr, tok.len, t,
		                          ACL_TOKEN_MAX + 1);
		if (tl < 0) {
			free(sl);
			free(text);
			return acl_err(err, FSNP_STATUS_ERROR,
			               "ERR an ACL rule is too long");
		}
		sl[i].p = (const uint8_t *)t;
		sl[i].len = (size_t)tl;
		i++;
	}
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_ACL_APPLY;
	c.key.p = name.ptr;
	c.key.len = name.len;
	c.items.n = (uint32_t)i;
	c.items.v = sl;
	rv = plan_meta(r, &c, err);
	free(sl);
	free(text);
	return rv;
}

int fsnp_acl_exec(struct fsnp_req *r, const struct fsnp_val *args,
                  struct fsnp_cmd_err *err)
{
	struct fsnp_iter it;
	struct fsnp_val v;
	struct fsnp_bytes sub, name = {NULL, 0};
	struct store_cmd c;
	uint8_t kind = SUB_NONE;
	char full[80];

	fsnp_iter_init(&it, args);
	if (!fsnp_iter_next(&it, NULL, &v) || !arg_bin(&v, &sub)) {
		return acl_err(err, FSNP_STATUS_ERROR,
		               "ERR wrong number of arguments for 'acl' "
		               "command");
	}
	if (sub.len == 6 &&
	    strncasecmp((const char *)sub.ptr, "WHOAMI", 6) == 0) {
		/* Open to every user, as AUTH is. */
		reply_whoami(r);
		return 1;
	}
	if (sub.len == 7 &&
	    strncasecmp((const char *)sub.ptr, "SETUSER", 7) == 0) {
		kind = SUB_SETUSER;
	} else if (sub.len == 7 &&
	           strncasecmp((const char *)sub.ptr, "DELUSER", 7) == 0) {
		kind = SUB_DELUSER;
	} else if (sub.len == 4 &&
	           strncasecmp((const char *)sub.ptr, "LIST", 4) == 0) {
		kind = SUB_LIST;
	} else if (sub.len == 5 &&
	           strncasecmp((const char *)sub.ptr, "USERS", 5) == 0) {
		kind = SUB_USERS;
	} else if (sub.len == 7 &&
	           strncasecmp((const char *)sub.ptr, "GETUSER", 7) == 0) {
		kind = SUB_GETUSER;
	} else {
		return acl_err(err, FSNP_STATUS_ERROR,
		               "ERR unknown ACL subcommand; try SETUSER, "
		               "DELUSER, GETUSER, LIST, USERS or WHOAMI");
	}
	snprintf(full, sizeof full, "acl|%.*s", (int)sub.len,
	         (const char *)sub.ptr);
	/* Administrators only, before anything is parsed: "acl" or the
	 * subcommand, by name or @admin. */
	if (!fsnp_acl_check_cmd(r, "acl", 3,
	                        ACL_CAT_ADMIN | ACL_CAT_DANGEROUS |
	                            ACL_CAT_SLOW)) {
		return 1;
	}
	if (kind == SUB_SETUSER || kind == SUB_DELUSER || kind == SUB_GETUSER) {
		if (!fsnp_iter_next(&it, NULL, &v) || !arg_bin(&v, &name) ||
		    name.len == 0 || name.len > ACL_NAME_MAX) {
			snprintf(err->message, sizeof err->message,
			         "ERR wrong number of arguments for '%s' "
			         "command",
			         full);
			err->status = FSNP_STATUS_ERROR;
			err->code = "error";
			return -1;
		}
		memcpy(r->plan.acl_name, name.ptr, name.len);
		r->plan.acl_name[name.len] = '\0';
	}
	if (kind == SUB_SETUSER) {
		if (setuser(r, &it, name, err) != 0) {
			return -1;
		}
		r->plan.acl_sub = kind;
		return 0;
	}
	if (kind == SUB_DELUSER) {
		if (fsnp_iter_next(&it, NULL, &v)) {
			return acl_err(err, FSNP_STATUS_ERROR,
			               "ERR ACL DELUSER takes one user name");
		}
		if (name.len == 7 && memcmp(name.ptr, "default", 7) == 0) {
			return acl_err(err, FSNP_STATUS_ERROR,
			               "ERR The 'default' user cannot be "
			               "removed");
		}
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_ACL_DELUSER;
		c.key.p = name.ptr;
		c.key.len = name.len;
	} else {
		if (fsnp_iter_next(&it, NULL, &v)) {
			snprintf(err->message, sizeof err->message,
			         "ERR wrong number of arguments for '%s' "
			         "command",
			         full);
			err->status = FSNP_STATUS_ERROR;
			err->code = "error";
			return -1;
		}
		memset(&c, 0, sizeof c);
		c.op = STORE_OP_ACL_LIST;
	}
	if (plan_meta(r, &c, err) != 0) {
		return -1;
	}
	r->plan.acl_sub = kind;
	return 0;
}

/* --- Replies -------------------------------------------------------------- */

/* The implicit default user's rules. */
static void default_desc(const struct fsnp_server *s, char *buf, size_t cap)
{
	struct acl_user u;
	char err[64], tok[300];
	if (acl_user_init(&u, "default", 7, err, sizeof err) != 0) {
		buf[0] = '\0';
		return;
	}
	acl_rules_apply_text(&u, "on allkeys allcommands", 22, err, sizeof err);
	if (s->lim.requirepass[0] != '\0') {
		snprintf(tok, sizeof tok, ">%s", s->lim.requirepass);
		acl_rule_apply(&u, tok, strlen(tok), err, sizeof err);
		memset(tok, 0, sizeof tok);
	} else {
		acl_rule_apply(&u, "nopass", 6, err, sizeof err);
	}
	if (acl_user_describe(&u, buf, cap) < 0) {
		buf[0] = '\0';
	}
	acl_user_free(&u);
}

static void w_getuser(struct fsnp_writer *w, const char *rules, size_t len)
{
	struct acl_user u;
	char err[256], tmp[ACL_TOKEN_MAX + 8], buf[4096];
	size_t n = 0;
	if (acl_user_init(&u, "x", 1, err, sizeof err) != 0 ||
	    acl_rules_apply_text(&u, rules, len, err, sizeof err) != 0) {
		acl_user_free(&u);
		fsnp_w_nil(w);
		return;
	}
	fsnp_w_map_begin(w);
	fsnp_w_key(w, "flags");
	fsnp_w_array_begin(w);
	fsnp_w_str(w, u.on ? "on" : "off");
	if (u.nopass) {
		fsnp_w_str(w, "nopass");
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "passwords");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < u.n_pass; i++) {
		for (size_t k = 0; k < 32; k++) {
			snprintf(tmp + 2 * k, 3, "%02x", u.pass[i][k]);
		}
		fsnp_w_str(w, tmp);
	}
	fsnp_w_array_end(w);
	buf[0] = '\0';
	for (size_t i = 0; i < u.n_cmd; i++) {
		const struct acl_cmd_rule *cr = &u.cmd[i];
		char cat[32] = "all";
		if (cr->cmd == NULL && cr->cats != ACL_CAT_ALL) {
			acl_cat_names(cr->cats, cat, sizeof cat);
		}
		int wr =
		    snprintf(buf + n, sizeof buf - n, "%s%c%s%s", n ? " " : "",
		             cr->allow ? '+' : '-', cr->cmd != NULL ? "" : "@",
		             cr->cmd != NULL ? cr->cmd : cat);
		if (wr < 0 || (size_t)wr >= sizeof buf - n) {
			break;
		}
		n += (size_t)wr;
	}
	fsnp_w_key(w, "commands");
	fsnp_w_str(w, n ? buf : "-@all");
	n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < u.n_pat; i++) {
		uint8_t f = u.pat[i].flags;
		int wr =
		    snprintf(buf + n, sizeof buf - n, "%s%s~%s", n ? " " : "",
		             f == (ACL_KEY_READ | ACL_KEY_WRITE) ? ""
		             : f == ACL_KEY_READ                 ? "%R"
		                                                 : "%W",
		             u.pat[i].glob);
		if (wr < 0 || (size_t)wr >= sizeof buf - n) {
			break;
		}
		n += (size_t)wr;
	}
	fsnp_w_key(w, "keys");
	fsnp_w_str(w, buf);
	fsnp_w_map_end(w);
	acl_user_free(&u);
}

void fsnp_acl_shape(struct fsnp_req *r)
{
	static char line[ACL_DESCRIBE_MAX + 80];
	struct fsnp_val list, pair, name, rules;
	struct fsnp_iter it, pi;
	struct fsnp_writer w;
	struct wbuf out;
	bool has_default = false, found = false;
	uint8_t sub = r->plan.acl_sub;

	if (sub == SUB_NONE || r->reply.len < 3 ||
	    wire_load_u16(r->reply.data) != FSNP_STATUS_OK) {
		return;
	}
	if (sub == SUB_SETUSER || sub == SUB_DELUSER) {
		/* This node sees its own change at once; the others on
		 * their next read. */
		apply_local(r->srv, r);
		fsnp_acl_refresh(r->srv);
		if (sub == SUB_DELUSER) {
			return; /* the count, as Redis */
		}
		wbuf_reset(&r->reply);
		fsnp_w_init(&w, &r->reply);
		fsnp_w_status(&w, FSNP_STATUS_OK);
		fsnp_w_str(&w, "OK");
		fsnp_w_finish(&w);
		return;
	}
	if (fsnp_value_decode(r->reply.data + 2, r->reply.len - 2, NULL, &list,
	                      NULL) != 0 ||
	    list.tag != FSNP_ARRAY) {
		return;
	}
	wbuf_init(&out);
	fsnp_w_init(&w, &out);
	fsnp_w_status(&w, FSNP_STATUS_OK);
	if (sub != SUB_GETUSER) {
		fsnp_w_array_begin(&w);
	}
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &pair)) {
		if (pair.tag != FSNP_ARRAY) {
			continue;
		}
		fsnp_iter_init(&pi, &pair);
		if (!fsnp_iter_next(&pi, NULL, &name) ||
		    !fsnp_iter_next(&pi, NULL, &rules) ||
		    name.tag != FSNP_BIN || rules.tag != FSNP_BIN) {
			continue;
		}
		has_default |= fsnp_bytes_eq(name.as.bin, "default");
		if (sub == SUB_USERS) {
			fsnp_w_bin(&w, name.as.bin.ptr, name.as.bin.len);
		} else if (sub == SUB_LIST) {
			snprintf(line, sizeof line, "user %.*s %.*s",
			         (int)name.as.bin.len,
			         (const char *)name.as.bin.ptr,
			         (int)rules.as.bin.len,
			         (const char *)rules.as.bin.ptr);
			fsnp_w_str(&w, line);
		} else if (!found &&
		           fsnp_bytes_eq(name.as.bin, r->plan.acl_name)) {
			found = true;
			w_getuser(&w, (const char *)rules.as.bin.ptr,
			          rules.as.bin.len);
		}
	}
	if (!has_default) {
		char d[400];
		default_desc(r->srv, d, sizeof d);
		if (sub == SUB_USERS) {
			fsnp_w_str(&w, "default");
		} else if (sub == SUB_LIST) {
			snprintf(line, sizeof line, "user default %s", d);
			fsnp_w_str(&w, line);
		} else if (!found && is_default(r->plan.acl_name)) {
			found = true;
			w_getuser(&w, d, strlen(d));
		}
	}
	if (sub == SUB_GETUSER && !found) {
		fsnp_w_nil(&w);
	}
	if (sub != SUB_GETUSER) {
		fsnp_w_array_end(&w);
	}
	if (fsnp_w_finish(&w) != 0) {
		wbuf_free(&out);
		return;
	}
	wbuf_free(&r->reply);
	r->reply = out;
}

/* --- Users for other listeners (fsnp_server.h) ---------------------------- */

bool fsnp_server_acl_open(const struct fsnp_server *s)
{
	return fsnp_acl_default_open(s);
}

bool fsnp_server_acl_has_password(const struct fsnp_server *s)
{
	return fsnp_acl_has_password(s);
}

bool fsnp_server_acl_auth(const struct fsnp_server *s, const uint8_t *user,
                          size_t ulen, const uint8_t *pass, size_t plen)
{
	struct fsnp_bytes pw = {pass, plen};
	const struct acl_user *u;

	if (ulen == 0 || ulen > ACL_NAME_MAX) {
		return false;
	}
	u = acl_table_find(&s->acl, (const char *)user, ulen);
	if (u != NULL) {
		return acl_user_password_ok(u, pass, plen);
	}
	if (ulen == 7 && memcmp(user, "default", 7) == 0) {
		return s->lim.requirepass[0] == '\0' ||
		       secret_eq(pw, s->lim.requirepass);
	}
	return false;
}

/* The user a session authenticated as ("" none yet: the default user when
 * it needs no password): NULL with *all for the implicit default. */
static const struct acl_user *named_user(const struct fsnp_server *s,
                                         const char *user, bool *all)
{
	const char *name = user[0] != '\0' ? user : "default";
	const struct acl_user *u = acl_table_find(&s->acl, name, strlen(name));
	*all = u == NULL && is_default(name);
	return u;
}

int fsnp_server_acl_check_cmd(const struct fsnp_server *s, const char *user,
                              const char *name, size_t len, uint32_t cats,
                              char *msg, size_t cap)
{
	const struct acl_user *u;
	bool all;
	if (s->acl.n == 0) {
		return 0;
	}
	u = named_user(s, user, &all);
	if (all || (u != NULL && acl_user_allows_cmd(u, name, len, cats))) {
		return 0;
	}
	acl_noperm_cmd(msg, cap, user[0] ? user : "default", name, len);
	return -1;
}

struct user_keys {
	const struct acl_user *u;
	const char *name;
	char *msg;
	size_t cap;
};

static bool user_key_ok(void *ctx, const uint8_t *key, size_t len, uint8_t need)
{
	struct user_keys *k = ctx;
	if (k->u != NULL && acl_user_allows_key(k->u, key, len, need)) {
		return true;
	}
	acl_noperm_key(k->msg, k->cap, k->name, key, len);
	return false;
}

int fsnp_server_acl_check_plan(const struct fsnp_server *s, const char *user,
                               const struct fsnp_plan *pl, char *msg,
                               size_t cap)
{
	struct user_keys k = {NULL, user[0] ? user : "default", msg, cap};
	const char *name;
	bool read = true, all, decoded;

	if (s->acl.n == 0) {
		return 0;
	}
	k.u = named_user(s, user, &all);
	if (all) {
		return 0;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		read &= pl->parts[i].read;
	}
	name = pl->name != NULL && pl->op != STORE_OP_ACL_LIST
	           ? pl->name
	           : op_name(pl->op);
	if (fsnp_server_acl_check_cmd(s, user, name, strlen(name),
	                              plan_cats(pl, read), msg, cap) != 0) {
		return -1;
	}
	for (uint32_t i = 0; i < pl->n_parts; i++) {
		if (!walk_part_keys(&pl->parts[i], user_key_ok, &k, &decoded)) {
			if (!decoded) {
				snprintf(msg, cap,
				         "NOPERM the command's keys "
				         "cannot be checked");
			}
			return -1;
		}
	}
	return 0;
}
