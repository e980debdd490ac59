/* The meta group's records: registered scopes (streams and caches) by
 * tenant / namespace / name with shard count, retention and durability,
 * one record per cluster node (its membership state and its addresses,
 * opaque here), the cluster's settings (the replication factor) and the
 * FSNP ACL users (their rules as text, changed by ACL_APPLY through the
 * node's rules function). */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

#define LIST_DEFAULT 1000
#define SHARDS_MAX 65536

struct scope_rec {
	uint32_t shards;
	uint64_t retention_bytes;
	uint64_t retention_ms;
	uint8_t durability;
	uint64_t created_ms;
};

static void name_part(struct sbuf *k, struct store_slice s)
{
	sbuf_u16(k, (uint16_t)s.len);
	sbuf_add(k, s.p, s.len);
}

static void scope_key(struct sbuf *k, const struct store_cmd *c)
{
	key_start(k, 0, K_SCOPE);
	sbuf_u8(k, c->kind);
	name_part(k, c->tenant);
	name_part(k, c->ns);
	name_part(k, c->name);
}

static bool check_names(const struct store_cmd *c, struct sbuf *res,
                        bool need_name)
{
	if (c->kind != STORE_SCOPE_STREAM && c->kind != STORE_SCOPE_CACHE) {
		res_error(res, STORE_BAD_COMMAND, "ERR unknown scope kind");
		return false;
	}
	if (c->tenant.len > STORE_NAME_MAX || c->ns.len > STORE_NAME_MAX ||
	    c->name.len > STORE_NAME_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR scope names are at most 4096 bytes");
		return false;
	}
	if (need_name &&
	    (c->tenant.len == 0 || c->ns.len == 0 || c->name.len == 0)) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR tenant, namespace and name must not be empty");
		return false;
	}
	return true;
}

static int decode_rec(struct tx *tx, const void *p, size_t len,
                      struct scope_rec *r)
{
	struct rd d;

	rd_init(&d, p, len);
	r->shards = rd_u32(&d);
	r->retention_bytes = rd_u64(&d);
	r->retention_ms = rd_u64(&d);
	r->durability = rd_u8(&d);
	r->created_ms = rd_u64(&d);
	if (!rd_done(&d)) {
		return tx_fail(tx, "corrupt scope record", NULL);
	}
	return 0;
}

static void encode_rec(struct sbuf *b, const struct scope_rec *r)
{
	sbuf_u32(b, r->shards);
	sbuf_u64(b, r->retention_bytes);
	sbuf_u64(b, r->retention_ms);
	sbuf_u8(b, r->durability);
	sbuf_u64(b, r->created_ms);
}

static int scope_register(struct tx *tx, const struct store_cmd *c,
                          struct sbuf *res)
{
	struct sbuf k, v;
	struct val old;
	struct scope_rec r;
	int found, rv = 0;

	if (!check_names(c, res, true)) {
		return 0;
	}
	if (c->shards == 0 || c->shards > SHARDS_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR shard count must be 1 to 65536");
		return 0;
	}
	sbuf_init(&k);
	sbuf_init(&v);
	scope_key(&k, c);
	found = tx_get(tx, &k, &old);
	if (found < 0) {
		rv = -1;
		goto out;
	}
	if (found) {
		if (decode_rec(tx, old.p, old.len, &r) != 0) {
			rv = -1;
			goto out;
		}
		if (r.shards != c->shards) {
			res_error(res, STORE_EXISTS,
			          "ERR scope exists with another shard count");
			goto out;
		}
	} else {
		r.shards = c->shards;
		r.created_ms = tx->now_ms;
	}
	r.retention_bytes = c->retention_bytes;
	r.retention_ms = c->retention_ms;
	r.durability = c->durability;
	encode_rec(&v, &r);
	tx_put(tx, &k, v.p, v.len);
	res_begin(res, STORE_OK);
	res_i64(res, found ? 0 : 1);
out:
	val_free(&old);
	sbuf_free(&k);
	sbuf_free(&v);
	return rv;
}

static int scope_delete(struct tx *tx, const struct store_cmd *c,
                        struct sbuf *res)
{
	struct sbuf k;
	struct val old;
	int found;

	if (!check_names(c, res, true)) {
		return 0;
	}
	sbuf_init(&k);
	scope_key(&k, c);
	found = tx_get(tx, &k, &old);
	val_free(&old);
	if (found > 0) {
		tx_del(tx, &k);
	}
	sbuf_free(&k);
	if (found < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, found);
	return 0;
}

static int scope_describe(struct tx *tx, const struct store_cmd *c,
                          struct sbuf *res)
{
	struct sbuf k;
	struct val v;
	struct scope_rec r;
	int found, rv = 0;

	if (!check_names(c, res, true)) {
		return 0;
	}
	sbuf_init(&k);
	scope_key(&k, c);
	found = tx_get(tx, &k, &v);
	if (found < 0) {
		rv = -1;
	} else if (found == 0) {
		res_error(res, STORE_NOT_FOUND, "ERR unknown scope");
	} else if (decode_rec(tx, v.p, v.len, &r) != 0) {
		rv = -1;
	} else {
		res_begin(res, STORE_OK);
		res_array(res, 5);
		res_u64(res, r.shards);
		res_u64(res, r.retention_bytes);
		res_u64(res, r.retention_ms);
		res_u64(res, r.durability);
		res_u64(res, r.created_ms);
	}
	val_free(&v);
	sbuf_free(&k);
	return rv;
}

static int scope_list(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	struct sbuf prefix, seek;
	struct titer it;
	uint64_t max = c->max ? c->max : LIST_DEFAULT;
	uint32_t n = 0;
	size_t mark, base;
	bool more = false;
	const uint8_t *last = NULL;
	size_t last_len = 0;
	struct sbuf lastbuf;

	if (!check_names(c, res, false)) {
		return 0;
	}
	sbuf_init(&prefix);
	sbuf_init(&seek);
	sbuf_init(&lastbuf);
	key_start(&prefix, 0, K_SCOPE);
	sbuf_u8(&prefix, c->kind);
	base = prefix.len;
	if (c->tenant.len > 0) {
		name_part(&prefix, c->tenant);
		if (c->ns.len > 0) {
			name_part(&prefix, c->ns);
		}
	}
	sbuf_add(&seek, prefix.p, base);
	sbuf_add(&seek, c->arg.p, c->arg.len);
	if (c->arg.len > 0) {
		/* Just past the cursor. */
		sbuf_u8(&seek, 0);
	}
	if (key_cmp(&seek, &prefix) < 0) {
		sbuf_reset(&seek);
		sbuf_add(&seek, prefix.p, prefix.len);
	}
	res_begin(res, STORE_OK);
	res_array(res, 2);
	mark = res_array_open(res);
	titer_open(&it, tx, &prefix);
	for (titer_seek(&it, &seek); titer_valid(&it); titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		struct rd d;
		struct store_slice t, ns, name;
		struct scope_rec r;

		if (n == max) {
			more = true;
			break;
		}
		rd_init(&d, kp + base, kl - base);
		t.len = rd_u16(&d);
		t.p = rd_take(&d, t.len);
		ns.len = rd_u16(&d);
		ns.p = rd_take(&d, ns.len);
		name.len = rd_u16(&d);
		name.p = rd_take(&d, name.len);
		if (!rd_done(&d) || decode_rec(tx, vp, vl, &r) != 0) {
			titer_close(&it);
			goto fail;
		}
		res_array(res, 7);
		res_bytes(res, t.p, t.len);
		res_bytes(res, ns.p, ns.len);
		res_bytes(res, name.p, name.len);
		res_u64(res, r.shards);
		res_u64(res, r.retention_bytes);
		res_u64(res, r.retention_ms);
		res_u64(res, r.durability);
		sbuf_reset(&lastbuf);
		sbuf_add(&lastbuf, kp + base, kl - base);
		n++;
	}
	if (titer_close(&it) != 0) {
		goto fail;
	}
	res_array_close(res, mark, n);
	last = lastbuf.p;
	last_len = lastbuf.len;
	if (more) {
		res_bytes(res, last, last_len);
	} else {
		res_nil(res);
	}
	sbuf_free(&prefix);
	sbuf_free(&seek);
	sbuf_free(&lastbuf);
	return 0;
fail:
	tx_fail(tx, "corrupt scope key", NULL);
	sbuf_free(&prefix);
	sbuf_free(&seek);
	sbuf_free(&lastbuf);
	return -1;
}

#define NODE_ID_LEN 8
#define NODE_RECORD_MAX 4096
#define NODES_MAX 1024

/* A record: u8 version | u8 state | u64 placement slot | addresses. */
#define NODE_HEADER 10

struct node_rec {
	uint8_t state;
	uint64_t slot;
	const char *addr; /* borrowed from the value read */
	size_t addr_len;
};

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

/* The record of node `key` into `r` (its addresses borrowed from `v`):
 * 1 found, 0 absent, -1 failure. */
static int node_get(struct tx *tx, const struct store_slice *key,
                    struct sbuf *k, struct val *v, struct node_rec *r)
{
	int found;

	sbuf_init(k);
	key_start(k, 0, K_NODE);
	sbuf_add(k, key->p, key->len);
	found = tx_get(tx, k, v);
	if (found <= 0) {
		return found;
	}
	if (v->len >= NODE_HEADER &&
	    (uint8_t)v->p[0] == STORE_NODE_RECORD_VERSION) {
		r->state = (uint8_t)v->p[1];
		r->slot = be64((const uint8_t *)v->p + 2);
		r->addr = v->p + NODE_HEADER;
		r->addr_len = v->len - NODE_HEADER;
	} else {
		/* Format 1: the addresses alone, an active node. */
		r->state = STORE_NODE_ACTIVE;
		r->slot = be64(key->p);
		r->addr = v->p;
		r->addr_len = v->len;
	}
	return 1;
}

static void node_put(struct tx *tx, struct sbuf *k, const struct node_rec *r)
{
	struct sbuf b;
	sbuf_init(&b);
	sbuf_u8(&b, STORE_NODE_RECORD_VERSION);
	sbuf_u8(&b, r->state);
	sbuf_u64(&b, r->slot);
	sbuf_add(&b, r->addr, r->addr_len);
	tx_put(tx, k, b.p, b.len);
	sbuf_free(&b);
}

static bool node_args(const struct store_cmd *c, struct sbuf *res)
{
	if (c->key.len != NODE_ID_LEN || c->value.len > NODE_RECORD_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR a node record needs an 8-byte id and at most "
		          "4096 bytes");
		return false;
	}
	return true;
}

/* NODE_SET (a node publishing its addresses) and NODE_JOIN (a member
 * admitting a node): the addresses change, the state stays. */
static int node_set(struct tx *tx, const struct store_cmd *c, struct sbuf *res,
                    bool join)
{
	struct sbuf k;
	struct val old = {0};
	struct node_rec r = {0};
	int found;

	if (!node_args(c, res)) {
		return 0;
	}
	if (join && c->kind > STORE_NODE_REMOVED) {
		res_error(res, STORE_BAD_COMMAND, "ERR unknown node state");
		return 0;
	}
	found = node_get(tx, &c->key, &k, &old, &r);
	if (found < 0) {
		sbuf_free(&k);
		return -1;
	}
	if (join && found && r.state == STORE_NODE_REMOVED) {
		res_error(res, STORE_EXISTS,
		          "ERR this node id was removed from the cluster; join "
		          "with a new id");
	} else if (join && found) {
		res_begin(res, STORE_OK);
		res_i64(res, 0);
	} else {
		if (!found) {
			r.state = join ? c->kind : STORE_NODE_ACTIVE;
			r.slot = be64(c->key.p);
		}
		r.addr = (const char *)c->value.p;
		r.addr_len = c->value.len;
		node_put(tx, &k, &r);
		res_begin(res, STORE_OK);
		res_i64(res, found ? 0 : 1);
	}
	val_free(&old);
	sbuf_free(&k);
	return 0;
}

static int node_state(struct tx *tx, const struct store_cmd *c,
                      struct sbuf *res)
{
	struct sbuf k;
	struct val old = {0};
	struct node_rec r = {0};
	int found;

	if (c->key.len != NODE_ID_LEN || c->kind > STORE_NODE_REMOVED) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR NODE_STATE needs an 8-byte id and a state");
		return 0;
	}
	found = node_get(tx, &c->key, &k, &old, &r);
	if (found < 0) {
		sbuf_free(&k);
		return -1;
	}
	if (!found) {
		res_error(res, STORE_NOT_FOUND, "ERR no such node");
	} else if (r.state != c->kind && !((c->max >> r.state) & 1)) {
		res_error(
		    res, STORE_ERR,
		    r.state == STORE_NODE_REMOVED ? "ERR the node was removed"
		    : r.state == STORE_NODE_DRAINING
		        ? "ERR the node is draining"
		    : r.state == STORE_NODE_JOINING ? "ERR the node is joining"
		                                    : "ERR the node is active");
	} else if (r.state == c->kind &&
	           (c->offset == 0 || c->offset == r.slot)) {
		res_begin(res, STORE_OK);
		res_i64(res, 0);
	} else {
		r.state = c->kind;
		if (c->offset != 0) {
			r.slot = c->offset;
		}
		node_put(tx, &k, &r);
		res_begin(res, STORE_OK);
		res_i64(res, 1);
	}
	val_free(&old);
	sbuf_free(&k);
	return 0;
}

#define CONF_NAME_MAX 64

static int conf(struct tx *tx, const struct store_cmd *c, struct sbuf *res,
                bool set)
{
	struct sbuf k;
	struct val v = {0};
	int found;

	if (c->key.len == 0 || c->key.len > CONF_NAME_MAX ||
	    c->value.len > NODE_RECORD_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR a setting needs a name of 1 to 64 bytes");
		return 0;
	}
	sbuf_init(&k);
	key_start(&k, 0, K_CONF);
	sbuf_add(&k, c->key.p, c->key.len);
	found = tx_get(tx, &k, &v);
	if (found >= 0) {
		res_begin(res, STORE_OK);
		if (set) {
			if (!found) {
				tx_put(tx, &k, c->value.p, c->value.len);
			}
			res_i64(res, found ? 0 : 1);
		} else if (found) {
			res_bytes(res, v.p, v.len);
		} else {
			res_nil(res);
		}
	}
	val_free(&v);
	sbuf_free(&k);
	return found < 0 ? -1 : 0;
}

static int node_list(struct tx *tx, struct sbuf *res)
{
	struct sbuf prefix;
	struct titer it;
	uint32_t n = 0;
	size_t mark;

	sbuf_init(&prefix);
	key_start(&prefix, 0, K_NODE);
	res_begin(res, STORE_OK);
	mark = res_array_open(res);
	titer_open(&it, tx, &prefix);
	for (titer_seek(&it, NULL); titer_valid(&it) && n < NODES_MAX;
	     titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		res_array(res, 2);
		res_bytes(res, kp + prefix.len, kl - prefix.len);
		res_bytes(res, vp, vl);
		n++;
	}
	sbuf_free(&prefix);
	if (titer_close(&it) != 0) {
		return -1;
	}
	res_array_close(res, mark, n);
	return 0;
}

/* --- ACL users ----------------------------------------------------------- */

#define ACL_NAME_LEN_MAX 64
#define ACL_RULES_MAX 65536
#define ACL_USERS_LIST_MAX 1024

static bool acl_args_ok(const struct store_cmd *c, struct sbuf *res)
{
	if (c->key.len == 0 || c->key.len > ACL_NAME_LEN_MAX ||
	    c->value.len > ACL_RULES_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR an ACL user needs a name of 1 to 64 bytes and "
		          "at most 64 KiB of rules");
		return false;
	}
	return true;
}

/* key = user name, value = its rules (opaque here). */
static int acl_setuser(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct sbuf k;
	struct val old;
	int found;

	if (!acl_args_ok(c, res)) {
		return 0;
	}
	sbuf_init(&k);
	key_start(&k, 0, K_ACL);
	sbuf_add(&k, c->key.p, c->key.len);
	found = tx_get(tx, &k, &old);
	val_free(&old);
	if (found >= 0) {
		tx_put(tx, &k, c->value.p, c->value.len);
	}
	sbuf_free(&k);
	if (found < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, found ? 0 : 1);
	return 0;
}

void store_set_acl_rules(struct store *s, store_acl_rules_fn fn, void *data)
{
	s->acl_rules = fn;
	s->acl_rules_data = data;
}

/* key = user name, items = rule tokens applied on top of its rules by the
 * node's function: the read, the change and the write are one apply. */
static int acl_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct sbuf k;
	struct val old;
	struct store_slice cur;
	char err[256];
	char *out;
	int found, n;

	if (!acl_args_ok(c, res)) {
		return 0;
	}
	if (tx->s->acl_rules == NULL) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR ACL rules cannot be applied: no rules function");
		return 0;
	}
	out = malloc(ACL_RULES_MAX);
	if (out == NULL) {
		return -1;
	}
	sbuf_init(&k);
	key_start(&k, 0, K_ACL);
	sbuf_add(&k, c->key.p, c->key.len);
	found = tx_get(tx, &k, &old);
	if (found < 0) {
		n = -1;
		goto out;
	}
	cur.p = (const uint8_t *)old.p;
	cur.len = old.len;
	err[0] = '\0';
	n = tx->s->acl_rules(tx->s->acl_rules_data, c->key, found ? &cur : NULL,
	                     &c->items, out, ACL_RULES_MAX, err, sizeof err);
	if (n < 0) {
		res_error(res, STORE_BAD_COMMAND,
		          err[0] ? err : "ERR the ACL rules do not apply");
		n = 0;
		goto out;
	}
	tx_put(tx, &k, out, (size_t)n);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_i64(res, found ? 0 : 1);
	res_bytes(res, out, (size_t)n);
	n = 0;
out:
	val_free(&old);
	sbuf_free(&k);
	free(out);
	return n < 0 ? -1 : 0;
}

static int acl_deluser(struct tx *tx, const struct store_cmd *c,
                       struct sbuf *res)
{
	struct sbuf k;
	struct val old;
	int found;

	if (!acl_args_ok(c, res)) {
		return 0;
	}
	sbuf_init(&k);
	key_start(&k, 0, K_ACL);
	sbuf_add(&k, c->key.p, c->key.len);
	found = tx_get(tx, &k, &old);
	val_free(&old);
	if (found > 0) {
		tx_del(tx, &k);
	}
	sbuf_free(&k);
	if (found < 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_i64(res, found ? 1 : 0);
	return 0;
}

static int acl_list(struct tx *tx, struct sbuf *res)
{
	struct sbuf prefix;
	struct titer it;
	uint32_t n = 0;
	size_t mark;

	sbuf_init(&prefix);
	key_start(&prefix, 0, K_ACL);
	res_begin(res, STORE_OK);
	mark = res_array_open(res);
	titer_open(&it, tx, &prefix);
	for (titer_seek(&it, NULL); titer_valid(&it) && n < ACL_USERS_LIST_MAX;
	     titer_next(&it)) {
		size_t kl, vl;
		const uint8_t *kp = titer_key(&it, &kl);
		const uint8_t *vp = titer_value(&it, &vl);
		res_array(res, 2);
		res_bytes(res, kp + prefix.len, kl - prefix.len);
		res_bytes(res, vp, vl);
		n++;
	}
	sbuf_free(&prefix);
	if (titer_close(&it) != 0) {
		return -1;
	}
	res_array_close(res, mark, n);
	return 0;
}

int meta_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	switch (c->op) {
	case STORE_OP_ACL_SETUSER:
		return acl_setuser(tx, c, res);
	case STORE_OP_ACL_DELUSER:
		return acl_deluser(tx, c, res);
	case STORE_OP_ACL_LIST:
		return acl_list(tx, res);
	case STORE_OP_ACL_APPLY:
		return acl_apply(tx, c, res);
	case STORE_OP_NODE_SET:
		return node_set(tx, c, res, false);
	case STORE_OP_NODE_JOIN:
		return node_set(tx, c, res, true);
	case STORE_OP_NODE_STATE:
		return node_state(tx, c, res);
	case STORE_OP_CONF_INIT:
		return conf(tx, c, res, true);
	case STORE_OP_CONF_GET:
		return conf(tx, c, res, false);
	case STORE_OP_NODE_LIST:
		return node_list(tx, res);
	case STORE_OP_SCOPE_REGISTER:
		return scope_register(tx, c, res);
	case STORE_OP_SCOPE_DELETE:
		return scope_delete(tx, c, res);
	case STORE_OP_SCOPE_DESCRIBE:
		return scope_describe(tx, c, res);
	default:
		return scope_list(tx, c, res);
	}
}
