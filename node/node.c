/* The daemon's lifecycle; see node.h. */
#include "node/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/devcert.h"

static int on_healthz(void *data, const struct admin_request *req,
                      struct admin_reply *reply)
{
	struct node *n = data;
	char body[256];
	(void)req;
	snprintf(body, sizeof body,
	         "{\"status\":\"%s\",\"node_id\":%" PRIu64
	         ",\"cluster_id\":\"%s\",\"version\":\"%s\"}",
	         n->stopping ? "draining" : "ok", n->cfg.node_id,
	         n->cfg.cluster_id, PACKAGE_VERSION);
	return admin_reply_json(reply, n->stopping ? 503 : 200, body);
}

/* GET /v1/cluster: this node, its peers and every Raft group it hosts. */
static int on_cluster(void *data, const struct admin_request *req,
                      struct admin_reply *reply)
{
	struct node *n = data;
	char *groups = NULL;
	size_t glen = 0;
	(void)req;
	if (n->shards == NULL ||
	    shards_status_json(n->shards, &groups, &glen) != 0) {
		return admin_reply_json(
		    reply, 503, "{\"error\":\"raft groups not running\"}");
	}
	/* groups is {"groups":[...],"raft_io":{...}}: splice our fields in
	 * front of it. */
	size_t cap = glen + 4096;
	char *body = malloc(cap);
	if (body == NULL) {
		free(groups);
		return -1;
	}
	int len = snprintf(body, cap,
	                   "{\"node_id\":%" PRIu64 ",\"cluster_id\":\"%s\","
	                   "\"peers\":[],%s",
	                   n->cfg.node_id, n->cfg.cluster_id, groups + 1);
	free(groups);
	reply->status = 200;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = (size_t)len;
	return 0;
}

static int on_metrics(void *data, const struct admin_request *req,
                      struct admin_reply *reply)
{
	struct node *n = data;
	(void)req;
	metric_set(n->m_uptime,
	           (int64_t)(uv_now(&n->loop) - n->started_ms) / 1000);
	if (metrics_render(&n->metrics, &reply->body, &reply->body_len) != 0) {
		return -1;
	}
	reply->status = 200;
	reply->content_type = "text/plain; version=0.0.4";
	return 0;
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct node *n = s->data;
	if (n->stopping) {
		log_warn(&n->log, "node", "second signal %d: exiting now",
		         signum);
		_exit(1);
	}
	log_info(&n->log, "node", "signal %d: draining", signum);
	node_stop(n);
}

static int prepare_tls(struct node *n, char *err, size_t errlen)
{
	const struct node_config *c = &n->cfg;
	if (c->tls_cert[0] != '\0') {
		snprintf(n->cert_path, sizeof n->cert_path, "%s", c->tls_cert);
		snprintf(n->key_path, sizeof n->key_path, "%s", c->tls_key);
		if (access(n->cert_path, R_OK) != 0 ||
		    access(n->key_path, R_OK) != 0) {
			snprintf(err, errlen,
			         "cannot read tls-cert '%s' or tls-key '%s'",
			         n->cert_path, n->key_path);
			return -1;
		}
		return 0;
	}
	if (!c->dev) {
		n->cert_path[0] = n->key_path[0] = '\0';
		return 0;
	}
	char tlsdir[1100];
	snprintf(tlsdir, sizeof tlsdir, "%s/tls", c->data_dir);
	if (datadir_mkdirs(tlsdir) != 0) {
		snprintf(err, errlen, "cannot create '%s'", tlsdir);
		return -1;
	}
	snprintf(n->cert_path, sizeof n->cert_path, "%s/dev-cert.pem", tlsdir);
	snprintf(n->key_path, sizeof n->key_path, "%s/dev-key.pem", tlsdir);
	return devcert_ensure(n->cert_path, n->key_path, err, errlen);
}

int node_start(struct node *n, const struct node_config *cfg, char *err,
               size_t errlen)
{
	memset(n, 0, sizeof *n);
	n->cfg = *cfg;
	n->dir.lock_fd = -1;
	log_init(&n->log, cfg->log_level, cfg->log_format);
	if (uv_loop_init(&n->loop) != 0) {
		snprintf(err, errlen, "cannot create event loop");
		return -1;
	}
	n->started_ms = uv_now(&n->loop);
	metrics_init(&n->metrics);
	n->m_uptime = metrics_gauge(&n->metrics, "lodestone_uptime_seconds",
	                            "Seconds since the node started", NULL);
	if (datadir_open(&n->dir, cfg->data_dir, err, errlen) != 0) {
		goto err_loop;
	}
	char dbdir[1100];
	snprintf(dbdir, sizeof dbdir, "%s/db", cfg->data_dir);
	if (db_open(&n->db, dbdir, err, errlen) != 0) {
		goto err_dir;
	}
	if (prepare_tls(n, err, errlen) != 0) {
		goto err_db;
	}
	char internal[300];
	snprintf(internal, sizeof internal, "%s:%u", cfg->advertise_host,
	         cfg->internal.port);
	struct shards_config sc = {
	    .node_id = cfg->node_id,
	    .internal_addr = internal,
	    .data_groups = cfg->shards,
	};
	if (shards_open(&n->shards, &n->loop, &n->db, &sc, &n->log, err,
	                errlen) != 0) {
		goto err_db;
	}
	if (admin_http_start(&n->admin, &n->loop, &n->log, cfg->admin.host,
	                     cfg->admin.port, err, errlen) != 0) {
		goto err_shards;
	}
	admin_http_route(&n->admin, "GET", "/healthz", false, on_healthz, n);
	admin_http_route(&n->admin, "GET", "/metrics", false, on_metrics, n);
	admin_http_route(&n->admin, "GET", "/v1/cluster", false, on_cluster, n);

	uv_signal_init(&n->loop, &n->sigint);
	uv_signal_init(&n->loop, &n->sigterm);
	n->sigint.data = n;
	n->sigterm.data = n;
	uv_signal_start(&n->sigint, on_signal, SIGINT);
	uv_signal_start(&n->sigterm, on_signal, SIGTERM);
	log_info(&n->log, "node",
	         "node %" PRIu64 " of cluster '%s' started (data %s, %u "
	         "shards, %u replicas)",
	         cfg->node_id, cfg->cluster_id, cfg->data_dir, cfg->shards,
	         cfg->replicas);
	return 0;

err_shards:
	shards_close(n->shards, NULL, NULL);
	uv_run(&n->loop, UV_RUN_DEFAULT); /* let the groups close */
	n->shards = NULL;
err_db:
	db_close(&n->db);
err_dir:
	datadir_close(&n->dir);
err_loop:
	metrics_free(&n->metrics);
	uv_loop_close(&n->loop);
	return -1;
}

void node_print_endpoints(const struct node *n, int fd)
{
	const struct node_config *c = &n->cfg;
	char buf[4096];
	int len = snprintf(
	    buf, sizeof buf,
	    "lodestone %s: node %" PRIu64 " of cluster '%s'%s\n"
	    "  admin HTTP   http://%s:%u  (GET /healthz)\n"
	    "  Felix QUIC   %s:%u/udp  (ALPN felix/1; not served by this "
	    "build yet)\n"
	    "  FSNP         %s:%u/tcp  (not served by this build yet)\n"
	    "  FSNP TLS     %s:%u/tcp  (not served by this build yet)\n"
	    "  internal     %s:%u/tcp  (not served by this build yet)\n"
	    "  data         %s\n",
	    PACKAGE_VERSION, c->node_id, c->cluster_id,
	    c->dev ? " (dev mode)" : "", c->admin.host, c->admin.port,
	    c->felix.host, c->felix.port, c->fsnp.host, c->fsnp.port,
	    c->fsnp_tls.host, c->fsnp_tls.port, c->internal.host,
	    c->internal.port, c->data_dir);
	if (n->cert_path[0] != '\0' && len > 0 && (size_t)len < sizeof buf) {
		len += snprintf(buf + len, sizeof buf - (size_t)len,
		                "  certificate  %s\n  key          %s\n",
		                n->cert_path, n->key_path);
	}
	if (len > 0) {
		ssize_t rc = write(fd, buf,
		                   (size_t)len < sizeof buf ? (size_t)len
		                                            : sizeof buf - 1);
		(void)rc;
	}
}

static void on_closed(uv_handle_t *h)
{
	(void)h;
}

static void on_shards_closed(void *data)
{
	struct node *n = data;
	n->shards = NULL;
	log_info(&n->log, "node", "raft groups stopped");
}

static void on_admin_closed(void *data)
{
	struct node *n = data;
	log_info(&n->log, "node", "admin HTTP closed");
	/* Protocol listeners are closed by now: stop the groups last so
	 * in-flight requests get their answers. */
	if (n->shards != NULL) {
		shards_close(n->shards, on_shards_closed, n);
	}
}

void node_stop(struct node *n)
{
	if (n->stopping) {
		return;
	}
	n->stopping = true;
	admin_http_close(&n->admin, on_admin_closed, n);
	uv_close((uv_handle_t *)&n->sigint, on_closed);
	uv_close((uv_handle_t *)&n->sigterm, on_closed);
}

int node_run(struct node *n)
{
	uv_run(&n->loop, UV_RUN_DEFAULT);
	/* Everything is closed once the loop has no handles left. */
	int rc = uv_loop_close(&n->loop);
	if (rc != 0) {
		log_warn(&n->log, "node", "loop closed with handles open: %s",
		         uv_strerror(rc));
	}
	db_close(&n->db);
	datadir_close(&n->dir);
	metrics_free(&n->metrics);
	log_info(&n->log, "node", "stopped");
	return n->exit_code;
}
