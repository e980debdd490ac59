/* The cluster dashboard's page and JSON document; see dashboard.h. */
#include "node/admin/dashboard.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/shards.h"

static json_int_t jint(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static json_t *num(double v)
{
	return isfinite(v) ? json_real(round(v * 1000.0) / 1000.0)
	                   : json_null();
}

/* Adds a problem: severity 2 critical, 1 warning. */
static void problem(json_t *arr, int severity, const char *kind,
                    const char *subject, const char *detail)
{
	json_array_append_new(arr,
	                      json_pack("{s:s, s:i, s:s, s:s, s:s}", "severity",
	                                severity == 2 ? "critical" : "warning",
	                                "level", severity, "kind", kind,
	                                "subject", subject, "detail", detail));
}

static int cmp_problem(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t lx = jint(x, "level"), ly = jint(y, "level");
	if (lx != ly) {
		return lx > ly ? -1 : 1;
	}
	return strcmp(json_string_value(json_object_get(x, "subject")),
	              json_string_value(json_object_get(y, "subject")));
}

static json_t *sorted(json_t *arr)
{
	size_t n = json_array_size(arr);
	json_t **v = malloc((n + 1) * sizeof *v);
	json_t *out = json_array();
	if (v == NULL) {
		json_decref(out);
		return arr;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = json_array_get(arr, i);
	}
	qsort(v, n, sizeof *v, cmp_problem);
	for (size_t i = 0; i < n; i++) {
		json_array_append(out, v[i]);
	}
	free(v);
	json_decref(arr);
	return out;
}

/* Whether member `id` is reachable, from the nodes built so far. */
static bool node_up(json_t *nodes, json_int_t id)
{
	size_t i;
	json_t *v;
	json_array_foreach(nodes, i, v)
	{
		if (jint(v, "id") == id) {
			return json_is_true(json_object_get(v, "connected"));
		}
	}
	return false;
}

/* nodes: the membership records, their reachability from the peers. */
static json_t *build_nodes(json_t *root, json_t *problems)
{
	json_t *out = json_array(), *members = json_object_get(root, "nodes");
	json_t *peers = json_object_get(root, "peers"), *v, *p;
	size_t i, k;
	if (json_array_size(members) == 0) {
		members = peers;
	}
	json_array_foreach(members, i, v)
	{
		json_int_t id = jint(v, "id");
		bool self = json_is_true(json_object_get(v, "self"));
		bool up = json_is_true(json_object_get(v, "connected"));
		const char *state =
		    json_string_value(json_object_get(v, "state"));
		const char *internal =
		    json_string_value(json_object_get(v, "internal"));
		json_t *admin = json_object_get(v, "admin");
		json_array_foreach(peers, k, p)
		{
			if (jint(p, "id") == id) {
				up = up || json_is_true(
				               json_object_get(p, "connected"));
				if (internal == NULL) {
					internal = json_string_value(
					    json_object_get(p, "address"));
				}
				if (admin == NULL) {
					admin = json_object_get(p, "admin");
				}
			}
		}
		state = state != NULL ? state : "active";
		bool removed = strcmp(state, "removed") == 0;
		const char *health = removed ? "ok" : up ? "ok" : "critical";
		json_t *o = json_pack(
		    "{s:I, s:b, s:b, s:s, s:s, s:s, s:s, s:I}", "id", id,
		    "self", self, "connected", up, "state", state, "status",
		    removed ? "removed"
		    : up    ? "up"
		            : "down",
		    "health", health, "internal",
		    internal != NULL ? internal : "", "groups",
		    jint(v, "groups"));
		if (o == NULL) {
			continue;
		}
		if (json_is_string(admin)) {
			json_object_set(o, "admin", admin);
		}
		/* A demoted member says voter: false; absent means it votes. */
		json_object_set_new(
		    o, "voter",
		    json_boolean(!json_is_false(json_object_get(v, "voter"))));
		json_array_append_new(out, o);
		if (!up && !removed) {
			char subject[64], detail[160];
			snprintf(subject, sizeof subject,
			         "node %" JSON_INTEGER_FORMAT, id);
			snprintf(detail, sizeof detail,
			         "node %" JSON_INTEGER_FORMAT
			         " (%s) is not reachable from this node",
			         id, state);
			problem(problems, 2, "node_down", subject, detail);
		}
	}
	return out;
}

/* groups: leader, voters, this node's replica and its lag. */
static json_t *build_groups(json_t *root, json_t *nodes, json_t *problems)
{
	json_t *out = json_array(), *v, *w;
	size_t i, k;
	json_array_foreach(json_object_get(root, "groups"), i, v)
	{
		json_int_t g = jint(v, "id");
		json_t *leader = json_object_get(v, "leader");
		json_t *voters = json_object_get(v, "voters");
		bool local = json_is_true(json_object_get(v, "replica"));
		const char *role =
		    json_string_value(json_object_get(v, "role"));
		const char *failed =
		    json_string_value(json_object_get(v, "failed"));
		int level = 0;
		char subject[64], detail[256];
		json_t *down = json_array();
		json_t *o =
		    json_pack("{s:I, s:O, s:O, s:b, s:s}", "id", g, "leader",
		              leader != NULL ? leader : json_null(), "voters",
		              voters != NULL ? voters : json_null(), "replica",
		              local, "role", role != NULL ? role : "none");
		if (o == NULL) {
			json_decref(down);
			continue;
		}
		snprintf(subject, sizeof subject, "group %" JSON_INTEGER_FORMAT,
		         g);
		if (local) {
			json_int_t commit = jint(v, "commit_index");
			json_int_t applied = jint(v, "applied_index");
			json_int_t lag =
			    commit > applied ? commit - applied : 0;
			json_object_set_new(o, "term",
			                    json_integer(jint(v, "term")));
			json_object_set_new(o, "commit_index",
			                    json_integer(commit));
			json_object_set_new(o, "applied_index",
			                    json_integer(applied));
			json_object_set_new(o, "lag", json_integer(lag));
			json_object_set_new(
			    o, "last_contact_ms",
			    json_integer(jint(v, "last_contact_ms")));
			if (json_object_get(v, "config") != NULL) {
				json_object_set(o, "config",
				                json_object_get(v, "config"));
			}
			if (lag > DASHBOARD_LAG_ENTRIES) {
				snprintf(detail, sizeof detail,
				         "this node's replica applied "
				         "%" JSON_INTEGER_FORMAT
				         " entries behind "
				         "its commit index",
				         lag);
				problem(problems, 1, "lagging", subject,
				        detail);
				level = 1;
			}
		}
		json_array_foreach(voters, k, w)
		{
			if (!node_up(nodes, json_integer_value(w))) {
				json_array_append(down, w);
			}
		}
		json_object_set_new(o, "voters_down", json_incref(down));
		if (json_array_size(down) > 0) {
			snprintf(detail, sizeof detail,
			         "%zu of %zu voters unreachable",
			         json_array_size(down),
			         json_array_size(voters));
			problem(problems, 1, "voter_down", subject, detail);
			level = 1;
		}
		json_decref(down);
		if (failed != NULL) {
			snprintf(detail, sizeof detail,
			         "this node's replica failed: %s", failed);
			problem(problems, 2, "failed", subject, detail);
			level = 2;
		}
		if (!json_is_integer(leader)) {
			problem(problems, 2, "no_leader", subject,
			        "no leader known to this node");
			level = 2;
		}
		json_object_set_new(o, "health",
		                    json_string(level == 2   ? "critical"
		                                : level == 1 ? "warning"
		                                             : "ok"));
		json_array_append_new(out, o);
	}
	return out;
}

static json_t *build_series(struct history *h)
{
	const struct history_ring *r = &h->ring;
	size_t n = history_ring_len(r);
	json_t *o = json_object(), *t = json_array(), *up = json_object();
	json_t *arr[HISTORY_N_SERIES];
	uint64_t known = 0;

	for (int s = 0; s < HISTORY_N_SERIES; s++) {
		arr[s] = json_array();
	}
	for (size_t i = 0; i < n; i++) {
		const struct history_sample *x = history_ring_at(r, i);
		json_array_append_new(t, json_integer((json_int_t)x->t_ms));
		for (int s = 0; s < HISTORY_N_SERIES; s++) {
			json_array_append_new(arr[s], num(x->v[s]));
		}
		known |= x->known_mask;
	}
	for (unsigned id = 1; id <= 64; id++) {
		char key[8];
		json_t *a;
		if (!(known & (1ull << (id - 1)))) {
			continue;
		}
		a = json_array();
		for (size_t i = 0; i < n; i++) {
			const struct history_sample *x = history_ring_at(r, i);
			uint64_t bit = 1ull << (id - 1);
			json_array_append_new(
			    a, !(x->known_mask & bit)
			           ? json_null()
			           : json_integer((x->up_mask & bit) != 0));
		}
		snprintf(key, sizeof key, "%u", id);
		json_object_set_new(up, key, a);
	}
	json_object_set_new(o, "interval_ms",
	                    json_integer(HISTORY_INTERVAL_MS));
	json_object_set_new(o, "t", t);
	for (int s = 0; s < HISTORY_N_SERIES; s++) {
		json_object_set_new(o, history_series_name(s), arr[s]);
	}
	json_object_set_new(o, "node_up", up);
	return o;
}

/* The JSON a scope route answers, or NULL. */
static json_t *call_json(struct admin_http *a, const char *path)
{
	struct admin_reply reply;
	json_t *o = NULL;
	if (admin_http_call(a, path, &reply) != 0) {
		return NULL;
	}
	if (reply.status == 200) {
		o = json_loadb(reply.body, reply.body_len, 0, NULL);
	}
	free(reply.body);
	return o;
}

/* Streams or caches with their retained records (tail - head) summed over
 * the shards whose state this node knows (those it leads). */
static json_t *build_scopes(struct dashboard *d, const char *kind)
{
	char path[1700];
	json_t *out = json_array(), *v;
	size_t i;
	snprintf(path, sizeof path, "/v1/%s", kind);
	json_t *list = call_json(d->admin, path);
	json_array_foreach(json_object_get(list, kind), i, v)
	{
		const char *t = json_string_value(json_object_get(v, "tenant"));
		const char *ns =
		    json_string_value(json_object_get(v, "namespace"));
		const char *name =
		    json_string_value(json_object_get(v, "name"));
		json_int_t shards = jint(v, "shards");
		json_t *o, *detail = NULL, *sh;
		size_t k;
		json_int_t retained = 0, live = 0, bytes = 0, known = 0;
		if (t == NULL || ns == NULL || name == NULL) {
			continue;
		}
		o = json_pack("{s:s, s:s, s:s, s:I}", "tenant", t, "namespace",
		              ns, "name", name, "shards", shards);
		if (o == NULL) {
			continue;
		}
		if (i < DASHBOARD_MAX_SCOPES &&
		    (size_t)snprintf(path, sizeof path, "/v1/%s/%s/%s/%s", kind,
		                     t, ns, name) < sizeof path) {
			detail = call_json(d->admin, path);
		}
		json_array_foreach(json_object_get(detail, "shard_state"), k,
		                   sh)
		{
			if (json_object_get(sh, "tail") == NULL) {
				continue;
			}
			known++;
			retained += jint(sh, "tail") - jint(sh, "head");
			live += jint(sh, "live_keys");
			bytes += jint(sh, "bytes");
		}
		json_decref(detail);
		json_object_set_new(o, "shards_known", json_integer(known));
		if (known > 0) {
			json_object_set_new(o, "retained",
			                    json_integer(retained));
			if (strcmp(kind, "caches") == 0) {
				json_object_set_new(o, "live_keys",
				                    json_integer(live));
			} else {
				json_object_set_new(o, "bytes",
				                    json_integer(bytes));
			}
		}
		json_array_append_new(out, o);
	}
	json_decref(list);
	return out;
}

int dashboard_json(struct dashboard *d, char **out, size_t *len)
{
	struct history *h = d->history;
	char *text = NULL;
	size_t tlen = 0;
	json_t *root, *doc, *problems, *nodes;

	if (h == NULL || h->shards == NULL ||
	    shards_status_json(h->shards, &text, &tlen) != 0) {
		return -1;
	}
	root = json_loadb(text, tlen, 0, NULL);
	free(text);
	if (root == NULL) {
		return -1;
	}
	problems = json_array();
	nodes = build_nodes(root, problems);
	doc = json_pack(
	    "{s:I, s:s, s:I, s:o}", "node_id", (json_int_t)d->node_id,
	    "cluster_id", d->cluster_id, "now_ms",
	    (json_int_t)(history_ring_len(&h->ring) > 0
	                     ? history_ring_at(&h->ring,
	                                       history_ring_len(&h->ring) - 1)
	                           ->t_ms
	                     : 0),
	    "nodes", nodes);
	if (doc == NULL) {
		json_decref(problems);
		json_decref(root);
		return -1;
	}
	json_object_set_new(doc, "groups", build_groups(root, nodes, problems));
	json_object_set_new(doc, "series", build_series(h));
	json_object_set_new(doc, "streams", build_scopes(d, "streams"));
	json_object_set_new(doc, "caches", build_scopes(d, "caches"));
	if (json_is_array(json_object_get(root, "ops"))) {
		json_object_set(doc, "ops", json_object_get(root, "ops"));
	}
	json_object_set_new(doc, "problems", sorted(problems));
	json_decref(root);
	*out = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(7));
	json_decref(doc);
	if (*out == NULL) {
		return -1;
	}
	*len = strlen(*out);
	return 0;
}

static int on_dashboard(void *data, const struct admin_request *req,
                        struct admin_reply *reply)
{
	struct dashboard *d = data;
	(void)req;
	if (dashboard_json(d, &reply->body, &reply->body_len) != 0) {
		return admin_reply_json(
		    reply, 503, "{\"error\":\"raft groups not running\"}");
	}
	reply->status = 200;
	reply->content_type = "application/json";
	return 0;
}

static int on_page(void *data, const struct admin_request *req,
                   struct admin_reply *reply)
{
	(void)data;
	(void)req;
	reply->body = malloc(dashboard_page_len + 1);
	if (reply->body == NULL) {
		return -1;
	}
	memcpy(reply->body, dashboard_page, dashboard_page_len);
	reply->body[dashboard_page_len] = '\0';
	reply->body_len = dashboard_page_len;
	reply->status = 200;
	reply->content_type = "text/html; charset=utf-8";
	return 0;
}

int dashboard_register(struct dashboard *d, struct admin_http *a,
                       struct history *h, uint64_t node_id,
                       const char *cluster_id)
{
	memset(d, 0, sizeof *d);
	d->admin = a;
	d->history = h;
	d->node_id = node_id;
	snprintf(d->cluster_id, sizeof d->cluster_id, "%s", cluster_id);
	if (admin_http_route(a, "GET", "/", false, on_page, d) != 0 ||
	    admin_http_route(a, "GET", "/v1/dashboard", false, on_dashboard,
	                     d) != 0) {
		return -1;
	}
	return 0;
}
