/* The admin API of the cluster control plane; see cluster_api.h. */
#include "node/cluster_api.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reply_error(struct admin_reply *reply, unsigned status,
                       const char *msg)
{
	json_t *j = json_pack("{s:s}", "error", msg);
	char *body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	int rv;
	json_decref(j);
	if (body == NULL) {
		return -1;
	}
	rv = admin_reply_json(reply, status, body);
	free(body);
	return rv;
}

/* "{id}" then `rest` after `prefix` in the path: the id, 0 when the path
 * does not match. */
static uint64_t path_id(const char *path, const char *prefix, const char *rest)
{
	const char *p = path + strlen(prefix);
	char *end = NULL;
	unsigned long long id;

	if (strncmp(path, prefix, strlen(prefix)) != 0 || *p < '0' ||
	    *p > '9') {
		return UINT64_MAX;
	}
	id = strtoull(p, &end, 10);
	if (strcmp(end, rest) != 0) {
		return UINT64_MAX;
	}
	return id;
}

/* The id of `key` in the JSON body (0 when absent or null); -1 when the
 * body is not a JSON object or the value is not an id. */
static int body_id(const struct admin_request *req, const char *key,
                   uint64_t *out)
{
	json_t *j, *v;
	*out = 0;
	if (req->body_len == 0) {
		return 0;
	}
	j = json_loadb(req->body, req->body_len, 0, NULL);
	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		return -1;
	}
	v = json_object_get(j, key);
	if (v != NULL && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) <= 0) {
			json_decref(j);
			return -1;
		}
		*out = (uint64_t)json_integer_value(v);
	}
	json_decref(j);
	return 0;
}

static int start(struct shards *s, struct admin_reply *reply, int kind,
                 uint64_t id, uint64_t with)
{
	char err[512], body[64];
	uint64_t op = 0;
	int st = membership_op_start(s, kind, id, with, &op, err, sizeof err);

	if (st != 0) {
		if (st == 421) {
			/* Leadership is changed on the leader: say where. */
			char admin[300];
			uint64_t l = shards_leader_admin(s, (uint32_t)id, admin,
			                                 sizeof admin);
			json_t *j = json_pack(
			    "{s:s, s:o, s:s}", "error", err, "leader",
			    l != 0 ? json_integer((json_int_t)l) : json_null(),
			    "leader_admin", admin);
			char *b =
			    j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
			int rv;
			json_decref(j);
			if (b == NULL) {
				return -1;
			}
			rv = admin_reply_json(reply, 409, b);
			free(b);
			return rv;
		}
		return reply_error(reply, (unsigned)st, err);
	}
	snprintf(body, sizeof body, "{\"op\":%" PRIu64 "}", op);
	return admin_reply_json(reply, 202, body);
}

/* POST /v1/cluster/nodes/{id}/drain | /replace | /promote | /demote */
static int on_node_post(void *data, const struct admin_request *req,
                        struct admin_reply *reply)
{
	struct shards *s = data;
	uint64_t id, with = 0;

	id = path_id(req->path, "/v1/cluster/nodes/", "/drain");
	if (id != UINT64_MAX) {
		return start(s, reply, MEMBERSHIP_OP_DRAIN, id, 0);
	}
	id = path_id(req->path, "/v1/cluster/nodes/", "/replace");
	if (id != UINT64_MAX) {
		if (body_id(req, "with", &with) != 0) {
			return reply_error(
			    reply, 400,
			    "the body must be {\"with\": NODE_ID} "
			    "or {}");
		}
		return start(s, reply, MEMBERSHIP_OP_REPLACE, id, with);
	}
	id = path_id(req->path, "/v1/cluster/nodes/", "/promote");
	if (id != UINT64_MAX) {
		return start(s, reply, MEMBERSHIP_OP_PROMOTE, id, 0);
	}
	id = path_id(req->path, "/v1/cluster/nodes/", "/demote");
	if (id != UINT64_MAX) {
		return start(s, reply, MEMBERSHIP_OP_DEMOTE, id, 0);
	}
	return reply_error(reply, 404,
	                   "use /v1/cluster/nodes/ID/drain, /replace, "
	                   "/promote or /demote");
}

/* DELETE /v1/cluster/nodes/{id} */
static int on_node_delete(void *data, const struct admin_request *req,
                          struct admin_reply *reply)
{
	uint64_t id = path_id(req->path, "/v1/cluster/nodes/", "");
	if (id == UINT64_MAX) {
		return reply_error(reply, 404, "use /v1/cluster/nodes/ID");
	}
	return start(data, reply, MEMBERSHIP_OP_REMOVE, id, 0);
}

/* POST /v1/cluster/groups/{id}/transfer */
static int on_group_post(void *data, const struct admin_request *req,
                         struct admin_reply *reply)
{
	uint64_t id = path_id(req->path, "/v1/cluster/groups/", "/transfer");
	uint64_t to = 0;
	if (id == UINT64_MAX) {
		return reply_error(reply, 404,
		                   "use /v1/cluster/groups/ID/transfer");
	}
	if (body_id(req, "to", &to) != 0) {
		return reply_error(reply, 400,
		                   "the body must be {\"to\": NODE_ID} or {}");
	}
	return start(data, reply, MEMBERSHIP_OP_TRANSFER, id, to);
}

/* GET /v1/cluster/ops/{id} */
static int on_op(void *data, const struct admin_request *req,
                 struct admin_reply *reply)
{
	uint64_t id = path_id(req->path, "/v1/cluster/ops/", "");
	char *body = NULL;
	size_t len = 0;

	if (id == UINT64_MAX ||
	    membership_op_json(data, id, &body, &len) != 0) {
		return reply_error(reply, 404,
		                   "no such operation on this node");
	}
	reply->status = 200;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = len;
	return 0;
}

void cluster_api_register(struct admin_http *a, struct shards *s)
{
	admin_http_route(a, "POST", "/v1/cluster/nodes/", true, on_node_post,
	                 s);
	admin_http_route(a, "DELETE", "/v1/cluster/nodes/", true,
	                 on_node_delete, s);
	admin_http_route(a, "POST", "/v1/cluster/groups/", true, on_group_post,
	                 s);
	admin_http_route(a, "GET", "/v1/cluster/ops/", true, on_op, s);
}
