/* Cluster views from GET /v1/cluster; see workload_cluster.h. */
#include "jepsen/workload_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define BODY_CAP (256 * 1024)
#define FETCH_TIMEOUT_MS 1000

int wl_cluster_fetch(struct hosts *h, const char *ns, unsigned id,
                     unsigned timeout_ms, struct wl_cluster_view *v, char *err,
                     size_t cap)
{
	struct hosts_node *nd = hosts_node(h, id);
	int status = 0, rc;
	char *body;
	json_error_t je;
	json_t *root = NULL, *groups;

	memset(v, 0, sizeof *v);
	if (nd == NULL) {
		snprintf(err, cap, "no node %u", id);
		return -EINVAL;
	}
	body = malloc(BODY_CAP);
	if (body == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	rc = hosts_http_request(ns, nd->addr, HOSTS_PORT_ADMIN, "GET",
	                        "/v1/cluster", NULL, timeout_ms, &status, body,
	                        BODY_CAP);
	if (rc != 0) {
		snprintf(err, cap, "n%u: GET /v1/cluster: %s", id,
		         strerror(-rc));
		goto out;
	}
	if (status != 200) {
		snprintf(err, cap, "n%u: GET /v1/cluster answered %d", id,
		         status);
		rc = -EPROTO;
		goto out;
	}
	root = json_loads(body, 0, &je);
	groups = root != NULL ? json_object_get(root, "groups") : NULL;
	if (!json_is_array(groups)) {
		snprintf(err, cap, "n%u: /v1/cluster is not a cluster view",
		         id);
		rc = -EPROTO;
		goto out;
	}
	v->node_id =
	    (uint64_t)json_integer_value(json_object_get(root, "node_id"));
	for (size_t i = 0; i < json_array_size(groups); i++) {
		json_t *g = json_array_get(groups, i);
		json_int_t gid = json_integer_value(json_object_get(g, "id"));
		const char *role =
		    json_string_value(json_object_get(g, "role"));
		if (gid < 0 || gid >= WL_MAX_GROUPS) {
			continue;
		}
		struct wl_group_view *gv = &v->groups[gid];
		gv->leader =
		    (uint64_t)json_integer_value(json_object_get(g, "leader"));
		gv->term =
		    (uint64_t)json_integer_value(json_object_get(g, "term"));
		gv->here_leader = role != NULL && strcmp(role, "leader") == 0 &&
		                  json_is_true(json_object_get(g, "ready"));
		if ((unsigned)gid + 1 > v->n_groups) {
			v->n_groups = (unsigned)gid + 1;
		}
	}
	json_t *nodes = json_object_get(root, "nodes");
	for (size_t i = 0;
	     i < json_array_size(nodes) && v->n_members < WL_MAX_MEMBERS; i++) {
		json_t *m = json_array_get(nodes, i);
		const char *st = json_string_value(json_object_get(m, "state"));
		struct wl_member_view *mv = &v->members[v->n_members++];
		mv->id = (uint64_t)json_integer_value(json_object_get(m, "id"));
		snprintf(mv->state, sizeof mv->state, "%s",
		         st != NULL ? st : "");
		mv->connected = json_is_true(json_object_get(m, "connected"));
	}
out:
	json_decref(root);
	free(body);
	return rc;
}

const struct wl_member_view *wl_cluster_member(const struct wl_cluster_view *v,
                                               uint64_t id)
{
	for (unsigned i = 0; i < v->n_members; i++) {
		if (v->members[i].id == id) {
			return &v->members[i];
		}
	}
	return NULL;
}

int wl_cluster_leader(struct hosts *h, uint32_t group, unsigned *node)
{
	struct wl_cluster_view *v = malloc(sizeof *v);
	char err[256];
	uint64_t best_term = 0;
	unsigned best = 0;

	if (v == NULL) {
		return -ENOMEM;
	}
	for (unsigned id = 1; id <= h->n; id++) {
		if (!hosts_node_live(h, id) ||
		    wl_cluster_fetch(h, h->client_ns, id, FETCH_TIMEOUT_MS, v,
		                     err, sizeof err) != 0 ||
		    group >= v->n_groups) {
			continue;
		}
		const struct wl_group_view *g = &v->groups[group];
		if (g->here_leader && (best == 0 || g->term > best_term)) {
			best = id;
			best_term = g->term;
		}
	}
	free(v);
	if (best == 0) {
		return -ENOENT;
	}
	*node = best;
	return 0;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether every group has a leader that claims it and that every node
 * names; why not in err. */
static bool all_led(struct hosts *h, struct wl_cluster_view *v, unsigned groups,
                    char *err, size_t cap)
{
	uint64_t claimed[WL_MAX_GROUPS];
	uint64_t named[WL_MAX_GROUPS];
	bool agree[WL_MAX_GROUPS];

	if (groups > WL_MAX_GROUPS) {
		groups = WL_MAX_GROUPS;
	}
	memset(claimed, 0, groups * sizeof claimed[0]);
	memset(named, 0, groups * sizeof named[0]);
	for (unsigned g = 0; g < groups; g++) {
		agree[g] = true;
	}
	bool first = true;
	for (unsigned id = 1; id <= h->n; id++) {
		if (!hosts_node_live(h, id)) {
			continue;
		}
		if (wl_cluster_fetch(h, h->client_ns, id, FETCH_TIMEOUT_MS, v,
		                     err, cap) != 0) {
			return false;
		}
		for (unsigned g = 0; g < groups; g++) {
			uint64_t l = g < v->n_groups ? v->groups[g].leader : 0;
			if (g < v->n_groups && v->groups[g].here_leader) {
				claimed[g] = id;
			}
			if (first) {
				named[g] = l;
			} else if (named[g] != l) {
				agree[g] = false;
			}
		}
		first = false;
	}
	for (unsigned g = 0; g < groups; g++) {
		if (claimed[g] == 0 || !agree[g] || named[g] != claimed[g]) {
			snprintf(
			    err, cap,
			    "group %u: no ready leader every node knows "
			    "(claimed by n%llu, the first node names n%llu)",
			    g, (unsigned long long)claimed[g],
			    (unsigned long long)named[g]);
			return false;
		}
	}
	return true;
}

int wl_cluster_wait_ready(struct hosts *h, unsigned groups, unsigned timeout_ms,
                          char *err, size_t cap)
{
	struct wl_cluster_view *v = malloc(sizeof *v);
	int64_t end = mono_ms() + timeout_ms;
	int rc = -ETIMEDOUT;

	if (v == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		if (all_led(h, v, groups, err, cap)) {
			rc = 0;
			break;
		}
		if (mono_ms() >= end) {
			break;
		}
		usleep(200 * 1000);
	}
	free(v);
	return rc;
}
