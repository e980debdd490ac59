/* FSNP cluster administration (docs/fsnp.md "Cluster administration"):
 * CLUSTER.HEALTH, STATS, KEYSLOT, SLOTS, STATUS, JOIN, LEAVE, FAILOVER,
 * PROMOTE, DEMOTE, ROLE and FERRICSTORE.KEY_INFO, CONFIG, HOTNESS,
 * METRICS, BLOBGC, by opcode or by COMMAND_EXEC name. Answers come from
 * the membership and the routing snapshot (node/shards.h, the /v1/cluster
 * view), this replica's store, the node's metrics; JOIN (REPLACE), LEAVE,
 * FAILOVER, PROMOTE and DEMOTE start the membership's operations
 * (node/membership.h), the same ones as the admin HTTP API. Every handler runs
 * synchronously and fills r->reply. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/fsnp/fsnp_admin.h"
#include "node/fsnp/fsnp_internal.h"
#include "node/membership.h"
#include "store/store.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"

/* --- Replies ------------------------------------------------------------ */

static void reply_begin(struct fsnp_req *r, struct fsnp_writer *w)
{
	wbuf_reset(&r->reply);
	r->custom = false;
	fsnp_w_init(w, &r->reply);
	fsnp_w_status(w, FSNP_STATUS_OK);
}

static void reply_end(struct fsnp_req *r, struct fsnp_writer *w)
{
	if (fsnp_w_finish(w) != 0) {
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY out of memory", true,
		                 FSNP_RETRY_AFTER_MS);
	}
}

static void bad(struct fsnp_req *r, const char *msg)
{
	fsnp_reply_error(r, FSNP_STATUS_BAD_REQUEST, "bad_request", msg, false,
	                 0);
}

static void fail(struct fsnp_req *r, const char *code, const char *msg)
{
	fsnp_reply_error(r, FSNP_STATUS_ERROR, code, msg, false, 0);
}

static void w_kv_u64(struct fsnp_writer *w, const char *k, uint64_t v)
{
	fsnp_w_key(w, k);
	fsnp_w_u64(w, v);
}

static void w_kv_str(struct fsnp_writer *w, const char *k, const char *v)
{
	fsnp_w_key(w, k);
	fsnp_w_str(w, v);
}

static void w_kv_id(struct fsnp_writer *w, const char *k, uint64_t id)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRIu64, id);
	w_kv_str(w, k, b);
}

/* A JSON value as an FSNP value (integers as i64, reals as f64). */
static void w_json(struct fsnp_writer *w, const json_t *j)
{
	const char *k;
	json_t *v;
	size_t i;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		fsnp_w_map_begin(w);
		json_object_foreach((json_t *)j, k, v)
		{
			fsnp_w_key(w, k);
			w_json(w, v);
		}
		fsnp_w_map_end(w);
		break;
	case JSON_ARRAY:
		fsnp_w_array_begin(w);
		json_array_foreach(j, i, v)
		{
			w_json(w, v);
		}
		fsnp_w_array_end(w);
		break;
	case JSON_STRING:
		fsnp_w_bin(w, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		fsnp_w_i64(w, (int64_t)json_integer_value(j));
		break;
	case JSON_REAL:
		fsnp_w_f64(w, json_real_value(j));
		break;
	case JSON_TRUE:
		fsnp_w_bool(w, true);
		break;
	case JSON_FALSE:
		fsnp_w_bool(w, false);
		break;
	default:
		fsnp_w_nil(w);
		break;
	}
}

/* The /v1/cluster view (shards_status_json) parsed; NULL after replying
 * the error. */
static json_t *cluster_view(struct fsnp_req *r)
{
	char *text = NULL;
	size_t len = 0;
	json_t *j = NULL;
	if (shards_status_json(r->srv->shards, &text, &len) == 0) {
		j = json_loadb(text, len, 0, NULL);
	}
	free(text);
	if (j == NULL) {
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY cluster status unavailable", true,
		                 FSNP_RETRY_AFTER_MS);
	}
	return j;
}

static uint64_t json_u64(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) > 0
	           ? (uint64_t)json_integer_value(v)
	           : 0;
}

static const char *json_str(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v != NULL ? v : "";
}

/* --- Arguments ---------------------------------------------------------- */

/* The key of a key-addressed command: args[0], else the body's "key". */
static bool key_arg(struct fsnp_req *r, const struct fsnp_admin_args *a,
                    const struct fsnp_val *body, struct fsnp_bytes *key,
                    const char *name)
{
	char msg[FSNP_ADMIN_ERR_MAX];
	if (a->n > 1) {
		snprintf(msg, sizeof msg,
		         "ERR native field args: %s takes one key", name);
		bad(r, msg);
		return false;
	}
	if (a->n == 1) {
		*key = a->v[0];
		return true;
	}
	if (body != NULL && fsnp_map_bin(body, "key", key) == 0) {
		return true;
	}
	snprintf(msg, sizeof msg,
	         "ERR native field key (or args[0]) is required for %s", name);
	bad(r, msg);
	return false;
}

/* args[i] as ID@HOST:PORT (or a bare ID when `bare` is allowed). */
static bool node_arg(struct fsnp_req *r, const struct fsnp_admin_args *a,
                     uint32_t i, bool bare, struct fsnp_admin_node *out)
{
	char err[FSNP_ADMIN_ERR_MAX], msg[FSNP_ADMIN_ERR_MAX + 40];
	if (i >= a->n) {
		snprintf(msg, sizeof msg,
		         "ERR native field args[%" PRIu32
		         "] (node as ID@HOST:PORT) is required",
		         i);
		bad(r, msg);
		return false;
	}
	if (bare && memchr(a->v[i].ptr, '@', a->v[i].len) == NULL &&
	    fsnp_admin_parse_u64(a->v[i].ptr, a->v[i].len, &out->id) == 0 &&
	    out->id != 0) {
		out->host[0] = '\0';
		out->port = 0;
		return true;
	}
	if (fsnp_admin_parse_node(a->v[i].ptr, a->v[i].len, out, err,
	                          sizeof err) != 0) {
		snprintf(msg, sizeof msg,
		         "ERR native field args[%" PRIu32 "]: %s", i, err + 4);
		bad(r, msg);
		return false;
	}
	return true;
}

static bool no_args(struct fsnp_req *r, const struct fsnp_admin_args *a,
                    const char *name)
{
	char msg[FSNP_ADMIN_ERR_MAX];
	if (a->n == 0) {
		return true;
	}
	snprintf(msg, sizeof msg, "ERR native field args: %s takes none", name);
	bad(r, msg);
	return false;
}

/* A membership operation's refusal as an FSNP error. */
static void op_refused(struct fsnp_req *r, int st, const char *err)
{
	char msg[600];
	snprintf(msg, sizeof msg, "ERR %s", err);
	if (st == 421) {
		fail(r, "not_leader", msg);
	} else if (st == 404) {
		fail(r, "not_found", msg);
	} else {
		fail(r, "refused", msg);
	}
}

static void reply_op(struct fsnp_req *r, uint64_t op, const char *kind,
                     const char *field, uint64_t id)
{
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_u64(&w, "op", op);
	w_kv_str(&w, "kind", kind);
	w_kv_id(&w, field, id);
	w_kv_str(&w, "state", "running");
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

/* --- CLUSTER.* ---------------------------------------------------------- */

static void cluster_health(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	struct shards_node nodes[64];
	size_t n = shards_nodes(s->shards, nodes, 64), connected = 0;
	unsigned groups = shards_data_groups(s->shards) + 1, led = 0;
	struct fsnp_writer w;
	for (size_t i = 0; i < n; i++) {
		connected += nodes[i].connected;
	}
	for (uint32_t g = 0; g < groups; g++) {
		bool self;
		led += shards_leader(s->shards, g, &self) != 0;
	}
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_str(&w, "status",
	         led == groups ? "ok"
	         : led > 0     ? "degraded"
	                       : "unavailable");
	w_kv_id(&w, "node", s->node_id);
	w_kv_u64(&w, "groups", groups);
	w_kv_u64(&w, "groups_with_leader", led);
	w_kv_u64(&w, "nodes", n);
	w_kv_u64(&w, "nodes_connected", connected);
	w_kv_u64(&w, "route_epoch", fsnp_server_route_epoch(s));
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static void cluster_stats(struct fsnp_req *r)
{
	static const char *const parts[] = {"raft_io", "forward", "transfer",
	                                    "row_cache", "data_writer"};
	struct fsnp_server *s = r->srv;
	struct fsnp_writer w;
	json_t *j = cluster_view(r);
	if (j == NULL) {
		return;
	}
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_id(&w, "node", s->node_id);
	w_kv_u64(&w, "generation", json_u64(j, "generation"));
	w_kv_u64(&w, "groups", json_array_size(json_object_get(j, "groups")));
	w_kv_u64(&w, "nodes", json_array_size(json_object_get(j, "nodes")));
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		json_t *v = json_object_get(j, parts[i]);
		if (v != NULL) {
			fsnp_w_key(&w, parts[i]);
			w_json(&w, v);
		}
	}
	fsnp_w_key(&w, "fsnp");
	fsnp_w_map_begin(&w);
	w_kv_u64(&w, "connections", s->n_conns);
	w_kv_u64(&w, "connections_accepted", s->stats.conns_accepted);
	w_kv_u64(&w, "requests", s->stats.requests);
	w_kv_u64(&w, "busy", s->stats.busy);
	w_kv_u64(&w, "bad_requests", s->stats.bad_requests);
	w_kv_u64(&w, "bytes_in", s->stats.bytes_in);
	w_kv_u64(&w, "bytes_out", s->stats.bytes_out);
	fsnp_w_map_end(&w);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
	json_decref(j);
}

static void cluster_status(struct fsnp_req *r)
{
	struct fsnp_writer w;
	json_t *j = cluster_view(r);
	if (j == NULL) {
		return;
	}
	json_object_set_new(j, "node",
	                    json_integer((json_int_t)r->srv->node_id));
	reply_begin(r, &w);
	w_json(&w, j);
	reply_end(r, &w);
	json_decref(j);
}

static void cluster_keyslot(struct fsnp_req *r, struct fsnp_bytes key)
{
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_u64(&w, fsnp_slot_of(key.ptr, key.len));
	reply_end(r, &w);
}

static json_t *group_of(json_t *view, uint32_t g)
{
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(view, "groups"), i, v)
	{
		if (json_u64(v, "id") == g) {
			return v;
		}
	}
	return NULL;
}

static void w_leader(struct fsnp_server *s, uint32_t g, struct fsnp_writer *w)
{
	struct shards_route rt;
	if (shards_route(s->shards, g, &rt) != SHARDS_OK) {
		memset(&rt, 0, sizeof rt);
	}
	if (rt.leader_id != 0) {
		w_kv_id(w, "leader", rt.leader_id);
	} else {
		fsnp_w_key(w, "leader");
		fsnp_w_nil(w);
	}
	w_kv_str(w, "leader_endpoint", rt.fsnp);
}

static void w_voters(json_t *grp, struct fsnp_writer *w)
{
	json_t *v;
	size_t i;
	fsnp_w_key(w, "voters");
	fsnp_w_array_begin(w);
	json_array_foreach(json_object_get(grp, "voters"), i, v)
	{
		char b[24];
		snprintf(b, sizeof b, "%" PRIu64,
		         json_is_integer(v) ? (uint64_t)json_integer_value(v)
		                            : json_u64(v, "id"));
		fsnp_w_str(w, b);
	}
	fsnp_w_array_end(w);
}

static void cluster_slots(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	unsigned n = s->data_groups;
	struct fsnp_writer w;
	json_t *j = cluster_view(r);
	if (j == NULL) {
		return;
	}
	reply_begin(r, &w);
	fsnp_w_array_begin(&w);
	for (unsigned i = 0; i < n && i < FSNP_SLOTS; i++) {
		unsigned first, last;
		if (fsnp_slot_range(i, n, &first, &last) != 0) {
			continue;
		}
		fsnp_w_map_begin(&w);
		w_kv_u64(&w, "first_slot", first);
		w_kv_u64(&w, "last_slot", last);
		w_kv_u64(&w, "shard", i);
		w_kv_u64(&w, "group", i + 1);
		w_leader(s, i + 1, &w);
		w_voters(group_of(j, i + 1), &w);
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	reply_end(r, &w);
	json_decref(j);
}

static json_t *member_of(json_t *view, uint64_t id)
{
	json_t *v;
	size_t i;
	json_array_foreach(json_object_get(view, "nodes"), i, v)
	{
		if (json_u64(v, "id") == id) {
			return v;
		}
	}
	return NULL;
}

static void cluster_join(struct fsnp_req *r, const struct fsnp_admin_args *a)
{
	struct fsnp_admin_node nd;
	struct fsnp_writer w;
	char err[512], addr[FSNP_ADMIN_HOST_MAX + 16], msg[700];
	uint64_t op;
	json_t *j, *m;
	if (!node_arg(r, a, 0, false, &nd)) {
		return;
	}
	if (a->n > 2 ||
	    (a->n == 2 && !fsnp_admin_word_eq(a->v[1], "REPLACE"))) {
		bad(r, "ERR native field args[1] must be REPLACE (or absent)");
		return;
	}
	if (a->n == 2) {
		int st =
		    membership_op_start(r->srv->shards, MEMBERSHIP_OP_REPLACE,
		                        nd.id, 0, &op, err, sizeof err);
		if (st != 0) {
			op_refused(r, st, err);
		} else {
			reply_op(r, op, "replace", "node", nd.id);
		}
		return;
	}
	if ((j = cluster_view(r)) == NULL) {
		return;
	}
	snprintf(addr, sizeof addr, strchr(nd.host, ':') ? "[%s]:%u" : "%s:%u",
	         nd.host, (unsigned)nd.port);
	m = member_of(j, nd.id);
	if (m == NULL || strcmp(json_str(m, "state"), "removed") == 0) {
		snprintf(
		    msg, sizeof msg,
		    "ERR node %" PRIu64
		    " has not asked to join: start it with --join set to a "
		    "member's internal address; it is admitted when it "
		    "reaches that member",
		    nd.id);
		fail(r, "not_found", msg);
	} else if (strcmp(json_str(m, "internal"), addr) != 0) {
		snprintf(msg, sizeof msg,
		         "ERR node %" PRIu64 " is a member at %s, not %s",
		         nd.id, json_str(m, "internal"), addr);
		fail(r, "conflict", msg);
	} else {
		reply_begin(r, &w);
		fsnp_w_map_begin(&w);
		w_kv_id(&w, "node", nd.id);
		w_kv_str(&w, "internal", json_str(m, "internal"));
		w_kv_str(&w, "state", json_str(m, "state"));
		fsnp_w_map_end(&w);
		reply_end(r, &w);
	}
	json_decref(j);
}

static void cluster_leave(struct fsnp_req *r, const struct fsnp_admin_args *a)
{
	struct fsnp_admin_node nd;
	char err[512];
	uint64_t op;
	int st;
	if (!node_arg(r, a, 0, true, &nd)) {
		return;
	}
	if (a->n > 1) {
		bad(r, "ERR native field args: CLUSTER.LEAVE takes one node");
		return;
	}
	st = membership_op_start(r->srv->shards, MEMBERSHIP_OP_REMOVE, nd.id, 0,
	                         &op, err, sizeof err);
	if (st != 0) {
		op_refused(r, st, err);
	} else {
		reply_op(r, op, "remove", "node", nd.id);
	}
}

static void cluster_failover(struct fsnp_req *r,
                             const struct fsnp_admin_args *a)
{
	struct fsnp_admin_node nd = {0};
	char err[512];
	uint64_t group, op;
	int st;
	if (a->n < 1 || a->n > 2 ||
	    fsnp_admin_parse_u64(a->v[0].ptr, a->v[0].len, &group) != 0 ||
	    group > shards_data_groups(r->srv->shards)) {
		bad(r, "ERR native field args[0] must be a group id "
		       "(0..data groups)");
		return;
	}
	if (a->n == 2 && !node_arg(r, a, 1, true, &nd)) {
		return;
	}
	st = membership_op_start(r->srv->shards, MEMBERSHIP_OP_TRANSFER, group,
	                         nd.id, &op, err, sizeof err);
	if (st != 0) {
		op_refused(r, st, err);
	} else {
		reply_op(r, op, "transfer-leader", "group", group);
	}
}

static void cluster_voting(struct fsnp_req *r, const struct fsnp_admin_args *a,
                           const char *name, int kind)
{
	struct fsnp_admin_node nd;
	char err[512], msg[600];
	uint64_t op;
	int st;
	if (!node_arg(r, a, 0, true, &nd)) {
		return;
	}
	if (a->n > 1) {
		snprintf(msg, sizeof msg,
		         "ERR native field args: %s takes one node", name);
		bad(r, msg);
		return;
	}
	st = membership_op_start(r->srv->shards, kind, nd.id, 0, &op, err,
	                         sizeof err);
	if (st != 0) {
		op_refused(r, st, err);
	} else {
		reply_op(r, op,
		         kind == MEMBERSHIP_OP_PROMOTE ? "promote" : "demote",
		         "node", nd.id);
	}
}

static void cluster_role(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	struct fsnp_writer w;
	json_t *j = cluster_view(r), *g, *m;
	size_t i;
	if (j == NULL) {
		return;
	}
	m = member_of(j, s->node_id);
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_id(&w, "node", s->node_id);
	w_kv_str(&w, "state", m != NULL ? json_str(m, "state") : "active");
	fsnp_w_key(&w, "voter");
	fsnp_w_bool(&w,
	            m == NULL || !json_is_false(json_object_get(m, "voter")));
	fsnp_w_key(&w, "leader_of");
	fsnp_w_array_begin(&w);
	json_array_foreach(json_object_get(j, "groups"), i, g)
	{
		if (strcmp(json_str(g, "role"), "leader") == 0) {
			fsnp_w_u64(&w, json_u64(g, "id"));
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_key(&w, "groups");
	fsnp_w_array_begin(&w);
	json_array_foreach(json_object_get(j, "groups"), i, g)
	{
		if (!json_is_true(json_object_get(g, "replica"))) {
			continue;
		}
		fsnp_w_map_begin(&w);
		w_kv_u64(&w, "group", json_u64(g, "id"));
		w_kv_str(&w, "role", json_str(g, "role"));
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
	json_decref(j);
}

/* --- FERRICSTORE.* ------------------------------------------------------ */

static void key_info(struct fsnp_req *r, struct fsnp_bytes key)
{
	struct fsnp_server *s = r->srv;
	unsigned slot = fsnp_slot_of(key.ptr, key.len);
	uint32_t group = shards_group_of_slot(s->shards, slot);
	struct shards_route rt;
	struct fsnp_writer w;
	const char *type = "none", *from = "none";
	int64_t ttl = -2;
	bool found = false;
	if (shards_route(s->shards, group, &rt) != SHARDS_OK) {
		memset(&rt, 0, sizeof rt);
	}
	if (rt.replicated) {
		struct store_slice k = {key.ptr, key.len};
		if (store_kv_info(shards_store(s->shards), group, k,
		                  shards_now_ms(s->shards), &type, &ttl,
		                  &found) != 0) {
			fail(r, "error", "ERR reading the key failed");
			return;
		}
		from = rt.is_self ? "leader" : "replica";
	}
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_bin(&w, key.ptr, key.len);
	w_kv_u64(&w, "slot", slot);
	w_kv_u64(&w, "shard", group - 1);
	w_kv_u64(&w, "group", group);
	w_leader(s, group, &w);
	if (rt.replicated) {
		w_kv_str(&w, "type", type);
		fsnp_w_key(&w, "ttl_ms");
		fsnp_w_i64(&w, ttl);
		fsnp_w_key(&w, "exists");
		fsnp_w_bool(&w, found);
	} else {
		fsnp_w_key(&w, "type");
		fsnp_w_nil(&w);
		fsnp_w_key(&w, "ttl_ms");
		fsnp_w_nil(&w);
		fsnp_w_key(&w, "exists");
		fsnp_w_nil(&w);
	}
	w_kv_str(&w, "read_from", from);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

/* Glob with '*' and '?', ASCII case-insensitive; a pattern without them
 * is a prefix. */
static bool glob_match(const char *p, size_t pn, const uint8_t *s, size_t sn)
{
	size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
	bool wild = memchr(p, '*', pn) != NULL || memchr(p, '?', pn) != NULL;
	if (!wild) {
		return pn <= sn && strncasecmp(p, (const char *)s, pn) == 0;
	}
	while (si < sn) {
		if (pi < pn &&
		    (p[pi] == '?' || (p[pi] | 0x20) == (s[si] | 0x20))) {
			pi++;
			si++;
		} else if (pi < pn && p[pi] == '*') {
			star = pi++;
			mark = si;
		} else if (star != (size_t)-1) {
			pi = star + 1;
			si = ++mark;
		} else {
			return false;
		}
	}
	while (pi < pn && p[pi] == '*') {
		pi++;
	}
	return pi == pn;
}

static void config(struct fsnp_req *r, const struct fsnp_admin_args *a)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsnp_val all, v;
	struct fsnp_iter it;
	struct fsnp_bytes k;
	const char *pat = "*";
	size_t pn = 1;
	if (a->n < 1) {
		bad(r, "ERR native field args[0] (GET) is required");
		return;
	}
	if (fsnp_admin_word_eq(a->v[0], "SET")) {
		fail(
		    r, "not_supported",
		    "ERR FERRICSTORE.CONFIG SET is not supported: settings are "
		    "fixed at start (command line, environment, config "
		    "file); only GET is served");
		return;
	}
	if (!fsnp_admin_word_eq(a->v[0], "GET")) {
		bad(r, "ERR native field args[0] must be GET (SET is not "
		       "supported)");
		return;
	}
	if (a->n > 2) {
		bad(r, "ERR native field args: CONFIG GET takes one pattern");
		return;
	}
	if (a->n == 2) {
		pat = (const char *)a->v[1].ptr;
		pn = a->v[1].len;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_control_settings(r->srv, &w);
	if (fsnp_w_finish(&w) != 0 ||
	    fsnp_value_decode(b.data, b.len, NULL, &all, NULL) != 0) {
		wbuf_free(&b);
		fsnp_reply_error(r, FSNP_STATUS_BUSY, "busy",
		                 "BUSY out of memory", true,
		                 FSNP_RETRY_AFTER_MS);
		return;
	}
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	fsnp_iter_init(&it, &all);
	while (fsnp_iter_next(&it, &k, &v)) {
		if (glob_match(pat, pn, k.ptr, k.len)) {
			fsnp_w_key_bin(&w, k.ptr, k.len);
			fsnp_w_val(&w, &v);
		}
	}
	fsnp_w_map_end(&w);
	reply_end(r, &w);
	wbuf_free(&b);
}

static void hotness(struct fsnp_req *r)
{
	struct fsnp_server *s = r->srv;
	unsigned n = shards_data_groups(s->shards);
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_str(&w, "measure", "store_bytes");
	fsnp_w_key(&w, "groups");
	fsnp_w_array_begin(&w);
	for (uint32_t g = 1; g <= n; g++) {
		struct shards_route rt;
		uint64_t bytes = 0;
		if (shards_route(s->shards, g, &rt) != SHARDS_OK) {
			memset(&rt, 0, sizeof rt);
		}
		fsnp_w_map_begin(&w);
		w_kv_u64(&w, "group", g);
		w_kv_u64(&w, "shard", g - 1);
		fsnp_w_key(&w, "replicated");
		fsnp_w_bool(&w, rt.replicated);
		fsnp_w_key(&w, "bytes");
		if (rt.replicated &&
		    store_group_size(shards_store(s->shards), g, &bytes) == 0) {
			fsnp_w_u64(&w, bytes);
		} else {
			fsnp_w_nil(&w);
		}
		w_leader(s, g, &w);
		fsnp_w_map_end(&w);
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static void metrics(struct fsnp_req *r)
{
	const struct metrics *m = r->srv->metrics;
	struct fsnp_writer w;
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	for (size_t i = 0; m != NULL && i < m->n; i++) {
		const struct metric *x = m->series[i];
		char name[sizeof x->name + sizeof x->labels + 2];
		if (x->labels[0] != '\0') {
			snprintf(name, sizeof name, "%s{%s}", x->name,
			         x->labels);
		} else {
			snprintf(name, sizeof name, "%s", x->name);
		}
		fsnp_w_key(&w, name);
		fsnp_w_i64(&w, x->value);
	}
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

static void blobgc(struct fsnp_req *r)
{
	struct fsnp_writer w;
	struct store *st = shards_store(r->srv->shards);
	char msg[300];
	if (store_request_compaction(st) != 0) {
		snprintf(msg, sizeof msg, "ERR %s", store_last_error(st));
		fail(r, "error", msg);
		return;
	}
	reply_begin(r, &w);
	fsnp_w_map_begin(&w);
	w_kv_str(&w, "status", "scheduled");
	w_kv_str(&w, "column_family", "data");
	fsnp_w_map_end(&w);
	reply_end(r, &w);
}

/* --- Dispatch ----------------------------------------------------------- */

static void run(struct fsnp_req *r, uint16_t op,
                const struct fsnp_admin_args *a, const struct fsnp_val *body)
{
	const char *name = fsnp_opcode_name(op);
	struct fsnp_bytes key;
	if (name == NULL) {
		name = "?";
	}
	/* Cluster administration is @admin and names no key. */
	if (!fsnp_acl_check_cmd(r, name, strlen(name), ACL_CAT_ADMIN)) {
		return;
	}
	switch (op) {
	case FSNP_OP_CLUSTER_HEALTH:
		if (no_args(r, a, name)) {
			cluster_health(r);
		}
		return;
	case FSNP_OP_CLUSTER_STATS:
		if (no_args(r, a, name)) {
			cluster_stats(r);
		}
		return;
	case FSNP_OP_CLUSTER_KEYSLOT:
		if (key_arg(r, a, body, &key, name)) {
			cluster_keyslot(r, key);
		}
		return;
	case FSNP_OP_CLUSTER_SLOTS:
		if (no_args(r, a, name)) {
			cluster_slots(r);
		}
		return;
	case FSNP_OP_CLUSTER_STATUS:
		if (no_args(r, a, name)) {
			cluster_status(r);
		}
		return;
	case FSNP_OP_CLUSTER_JOIN:
		cluster_join(r, a);
		return;
	case FSNP_OP_CLUSTER_LEAVE:
		cluster_leave(r, a);
		return;
	case FSNP_OP_CLUSTER_FAILOVER:
		cluster_failover(r, a);
		return;
	case FSNP_OP_CLUSTER_PROMOTE:
		cluster_voting(r, a, name, MEMBERSHIP_OP_PROMOTE);
		return;
	case FSNP_OP_CLUSTER_DEMOTE:
		cluster_voting(r, a, name, MEMBERSHIP_OP_DEMOTE);
		return;
	case FSNP_OP_CLUSTER_ROLE:
		if (no_args(r, a, name)) {
			cluster_role(r);
		}
		return;
	case FSNP_OP_FERRICSTORE_KEY_INFO:
		if (key_arg(r, a, body, &key, name)) {
			key_info(r, key);
		}
		return;
	case FSNP_OP_FERRICSTORE_CONFIG:
		config(r, a);
		return;
	case FSNP_OP_FERRICSTORE_HOTNESS:
		if (no_args(r, a, name)) {
			hotness(r);
		}
		return;
	case FSNP_OP_FERRICSTORE_METRICS:
		if (no_args(r, a, name)) {
			metrics(r);
		}
		return;
	case FSNP_OP_FERRICSTORE_BLOBGC:
		if (no_args(r, a, name)) {
			blobgc(r);
		}
		return;
	default:
		bad(r, "ERR native unknown opcode");
		return;
	}
}

void fsnp_admin(struct fsnp_req *r, uint16_t opcode,
                const struct fsnp_val *body)
{
	struct fsnp_admin_args a;
	char err[FSNP_ADMIN_ERR_MAX];
	if (fsnp_admin_args_from_body(body, &a, err, sizeof err) != 0) {
		bad(r, err);
		return;
	}
	run(r, opcode, &a, body);
}

void fsnp_admin_exec(struct fsnp_req *r, const void *name, size_t len,
                     const struct fsnp_val *args)
{
	struct fsnp_admin_args a;
	char err[FSNP_ADMIN_ERR_MAX];
	uint16_t op;
	if (fsnp_opcode_by_name(name, len, &op) != 0) {
		bad(r, "ERR native unknown command");
		return;
	}
	if (fsnp_admin_args_from_list(args, &a, err, sizeof err) != 0) {
		bad(r, err);
		return;
	}
	run(r, op, &a, NULL);
}
