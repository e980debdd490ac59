/* The daemon's lifecycle; see node.h. */
#include "node/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "node/cluster_api.h"
#include "node/flow_admin.h"
#include "node/devcert.h"
#include "node/flow_sched.h"
#include "node/felix/felix.h"
#include "node/fsnp/fsnp.h"
#include "node/resp/resp.h"
#include "node/scan_cursors.h"
#include "raft/group.h"

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

/* GET /readyz: 200 once this node's listeners are up and every group it
 * replicates has a known leader; 503 naming what is missing otherwise. */
static int on_readyz(void *data, const struct admin_request *req,
                     struct admin_reply *reply)
{
	struct node *n = data;
	(void)req;
	if (n->stopping) {
		return admin_reply_json(reply, 503,
		                        "{\"status\":\"not ready\","
		                        "\"reason\":\"draining\"}");
	}
	if (n->shards == NULL) {
		return admin_reply_json(reply, 503,
		                        "{\"status\":\"not ready\","
		                        "\"reason\":\"raft groups not "
		                        "running\"}");
	}
	/* This route exists once every listener has started; one that has
	 * closed since is not ready either. */
	if (n->cfg.native.enabled && n->fsnp == NULL) {
		return admin_reply_json(reply, 503,
		                        "{\"status\":\"not ready\","
		                        "\"reason\":\"FSNP listener not "
		                        "running\"}");
	}
	unsigned groups = shards_data_groups(n->shards) + 1;
	size_t cap = 256 + (size_t)groups * 12;
	char *body = malloc(cap);
	if (body == NULL) {
		return -1;
	}
	size_t len = 0;
	unsigned local = 0, missing = 0;
	for (uint32_t g = 0; g < groups; g++) {
		struct shards_route r;
		struct group_status st;
		if (shards_route(n->shards, g, &r) != SHARDS_OK ||
		    !r.replicated) {
			continue;
		}
		local++;
		if (shards_status(n->shards, g, &st) == SHARDS_OK &&
		    !st.failed && st.leader_id != 0) {
			continue;
		}
		len += (size_t)snprintf(body + len, cap - len, "%s%" PRIu32,
		                        missing == 0 ? "" : ",", g);
		missing++;
	}
	if (missing == 0) {
		snprintf(body, cap,
		         "{\"status\":\"ready\",\"node_id\":%" PRIu64
		         ",\"groups\":%u}",
		         n->cfg.node_id, local);
		reply->status = 200;
	} else {
		char *list = strdup(body);
		if (list == NULL) {
			free(body);
			return -1;
		}
		snprintf(body, cap,
		         "{\"status\":\"not ready\",\"node_id\":%" PRIu64
		         ",\"reason\":\"%u of %u groups without a known "
		         "leader\",\"groups_without_leader\":[%s]}",
		         n->cfg.node_id, missing, local, list);
		free(list);
		reply->status = 503;
	}
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = strlen(body);
	return 0;
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
	/* groups is {"peers":[...],"groups":[...],...}: splice our fields
	 * in front of it. */
	size_t cap = glen + 4096;
	char *body = malloc(cap);
	if (body == NULL) {
		free(groups);
		return -1;
	}
	int len = snprintf(body, cap,
	                   "{\"node_id\":%" PRIu64 ",\"cluster_id\":\"%s\",%s",
	                   n->cfg.node_id, n->cfg.cluster_id, groups + 1);
	free(groups);
	reply->status = 200;
	reply->content_type = "application/json";
	reply->body = body;
	reply->body_len = (size_t)len;
	return 0;
}

/* GET /v1/debug/group/G/hash: a hash of this node's replica of group G
 * (its data range in key order), to compare replicas. */
static int on_group_hash(void *data, const struct admin_request *req,
                         struct admin_reply *reply)
{
	struct node *n = data;
	struct shards_group_hash h;
	const char *p = req->path + strlen("/v1/debug/group/");
	char *end = NULL;
	char body[256];
	unsigned long g = strtoul(p, &end, 10);
	if (end == p || strcmp(end, "/hash") != 0 || n->shards == NULL) {
		return admin_reply_json(reply, 404,
		                        "{\"error\":\"use "
		                        "/v1/debug/group/G/hash\"}");
	}
	if (g > UINT32_MAX ||
	    shards_group_hash(n->shards, (uint32_t)g, &h) != SHARDS_OK) {
		return admin_reply_json(reply, 404,
		                        "{\"error\":\"no such group\"}");
	}
	snprintf(body, sizeof body,
	         "{\"group\":%lu,\"hash\":\"%016" PRIx64 "\",\"keys\":%" PRIu64
	         ",\"applied_index\":%" PRIu64 "}",
	         g, h.hash, h.keys, h.applied_index);
	return admin_reply_json(reply, 200, body);
}

/* The core's families at each scrape (the rooms register their own). */
/* The SCAN resume-key table's use (docs/operations.md "Metrics"). */
static void collect_scan_cursors(const struct scan_cursors *t,
                                 struct metrics_out *o)
{
	static const struct {
		const char *name;
		enum metric_type type;
		const char *help;
	} f[] = {
	    {"lodestone_scan_cursor_hits_total", METRIC_COUNTER,
	     "SCAN pages resumed at the key their cursor names"},
	    {"lodestone_scan_cursor_misses_total", METRIC_COUNTER,
	     "SCAN cursors whose kept key was gone: resumed at their seek "
	     "point"},
	    {"lodestone_scan_cursor_evictions_total", METRIC_COUNTER,
	     "kept SCAN keys replaced before a page resumed from them"},
	    {"lodestone_scan_cursor_entries", METRIC_GAUGE,
	     "SCAN resume keys kept"},
	    {"lodestone_scan_cursor_key_bytes", METRIC_GAUGE,
	     "bytes of the SCAN resume keys kept"},
	};
	struct scan_cursors_stats st;
	scan_cursors_get_stats(t, &st);
	const uint64_t v[] = {st.hits, st.misses, st.evictions, st.used,
	                      st.key_bytes};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		metrics_out_family(o, f[i].name, f[i].type, f[i].help);
		metrics_out_uint(o, f[i].name, NULL, v[i]);
	}
}

static void collect_core(void *data, struct metrics_out *o)
{
	struct node *n = data;
	if (n->shards != NULL) {
		shards_metrics(n->shards, o,
		               (unsigned)n->cfg.metrics_max_groups);
	}
	if (n->scan_cursors != NULL) {
		collect_scan_cursors(n->scan_cursors, o);
	}
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

/* The service manager's readiness protocol (sd_notify(3)): one datagram
 * to the AF_UNIX socket named by $NOTIFY_SOCKET, a path or, with a leading
 * '@', an abstract name. Without the variable there is nobody to tell. */
static int notify_service_manager(const struct log *log, const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	size_t plen;
	int fd;

	if (path == NULL || path[0] == '\0') {
		return 0;
	}
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof sa.sun_path) {
		log_warn(log, "node", "NOTIFY_SOCKET '%s' is not a socket path",
		         path);
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@') {
		sa.sun_path[0] = '\0';
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		goto err_socket;
	}
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	                              plen + (path[0] == '@' ? 0 : 1));
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
	           salen) < 0) {
		goto err_send;
	}
	close(fd);
	return 0;

err_send:
	close(fd);
err_socket:
	log_warn(log, "node", "cannot notify the service manager at '%s': %s",
	         path, strerror(errno));
	return -1;
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

/* The meta group says this node was removed: stop, and exit 0. */
static void on_removed(void *data)
{
	struct node *n = data;
	log_info(&n->log, "node",
	         "node %" PRIu64 " was removed from the cluster: stopping",
	         n->cfg.node_id);
	n->exit_code = 0;
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
	metrics_add_collector(&n->metrics, collect_core, n);
	if (datadir_open(&n->dir, cfg->data_dir, err, errlen) != 0) {
		goto err_loop;
	}
	/* RocksDB's perf counters are per thread and on (counting) by
	 * default; nothing reads them. Our writer threads turn them off too. */
	rocksdb_set_perf_level(rocksdb_disable);
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
	/* cluster: the static members and the Raft/forwarding tuning */
	struct shards_peer peers[CONFIG_PEERS_MAX];
	char join_addr[300] = "";
	if (cfg->join.port != 0) {
		snprintf(join_addr, sizeof join_addr,
		         strchr(cfg->join.host, ':') != NULL ? "[%s]:%u"
		                                             : "%s:%u",
		         cfg->join.host, (unsigned)cfg->join.port);
	}
	for (unsigned i = 0; i < cfg->n_peers; i++) {
		peers[i].id = cfg->peers[i].id;
		peers[i].host = cfg->peers[i].addr.host;
		peers[i].port = cfg->peers[i].addr.port;
	}
	struct shards_config sc = {
	    .node_id = cfg->node_id,
	    .internal_addr = internal,
	    .data_groups = cfg->shards,
	    /* One request becomes one command: an entry must hold the largest
	     * frame either protocol accepts (FSNP's limit, Felix's 4 MiB),
	     * plus room for the command's own fields. */
	    .max_entry_bytes = (size_t)(cfg->native.max_frame_bytes > (4u << 20)
	                                    ? cfg->native.max_frame_bytes
	                                    : (4u << 20)) +
	                       (64u << 10),
	    .election_timeout_ms = cfg->election_timeout_ms,
	    .heartbeat_ms = cfg->heartbeat_ms,
	    .snapshot_threshold = cfg->snapshot_threshold,
	    .snapshot_trailing = cfg->snapshot_trailing,
	    .peers = peers,
	    .n_peers = cfg->n_peers,
	    .join = join_addr[0] != '\0' ? join_addr : NULL,
	    .replicas = cfg->replicas,
	    .rebalance_concurrency = cfg->rebalance_concurrency,
	    .cluster_id = cfg->cluster_id,
	    .listen_host = cfg->internal.host,
	    .listen_port = cfg->internal.port,
	    .data_dir = cfg->data_dir,
	    .forward_timeout_ms = cfg->forward_timeout_ms,
	    .read_barriers = cfg->read_barriers,
	    .no_quiesce = cfg->no_quiesce,
	    .row_cache_bytes = (size_t)cfg->row_cache_bytes,
	    .internal_tls_cert = cfg->internal_tls_cert,
	    .internal_tls_key = cfg->internal_tls_key,
	    .internal_tls_ca = cfg->internal_tls_ca,
	    .advertise_host = cfg->advertise_host,
	    .felix_port = cfg->felix.port,
	    .fsnp_port = cfg->fsnp.port,
	    .fsnp_tls_port = cfg->native.tls_enabled ? cfg->fsnp_tls.port : 0,
	    .admin_port = cfg->admin.port,
	    .resp_port = cfg->resp_enabled ? cfg->resp.port : 0,
	    .on_removed = on_removed,
	    .on_removed_data = n,
	};
	/* cluster: end */
	if (shards_open(&n->shards, &n->loop, &n->db, &sc, &n->log, err,
	                errlen) != 0) {
		goto err_db;
	}
	if (cfg->resp_scan_cursors > 0 &&
	    scan_cursors_new(&n->scan_cursors, cfg->resp_scan_cursors,
	                     shards_data_groups(n->shards), err, errlen) != 0) {
		goto err_shards;
	}
	/* felix: the scope registry and the Felix broker */
	struct scopes_config scfg = {
	    .auto_create = cfg->dev,
	    .auto_create_shards = cfg->auto_create_shards,
	    .scopes_file = cfg->scopes_file[0] ? cfg->scopes_file : NULL,
	    .retention_ms = cfg->retention_interval_ms,
	    .cache_history = cfg->felix_cache_history,
	};
	if (scopes_open(&n->scopes, &n->loop, n->shards, &n->log, &scfg, err,
	                errlen) != 0) {
		goto err_shards;
	}
	if (n->cert_path[0] == '\0') {
		log_warn(&n->log, "felix",
		         "Felix QUIC not started: no tls-cert/tls-key "
		         "(give them, or run with --dev)");
	} else {
		struct felix_server_config fcfg = {
		    .host = cfg->felix.host,
		    .port = cfg->felix.port,
		    .cert_file = n->cert_path,
		    .key_file = n->key_path,
		    .dev = cfg->dev,
		    .tokens_file =
		        cfg->felix_tokens[0] ? cfg->felix_tokens : NULL,
		    .jwks_dir =
		        cfg->felix_jwks_dir[0] ? cfg->felix_jwks_dir : NULL,
		    .jwt_issuer =
		        cfg->felix_jwt_issuer[0] ? cfg->felix_jwt_issuer : NULL,
		    .jwt_audience = cfg->felix_jwt_audience[0]
		                        ? cfg->felix_jwt_audience
		                        : NULL,
		    .jwt_skew_s = cfg->felix_jwt_skew_s,
		    .auth_max_failures = cfg->native.auth_max_failures,
		    .sub_queue_bytes = (size_t)cfg->felix_sub_queue_bytes,
		    .group_max_wait_ms = cfg->felix_group_max_wait_ms,
		    .group_visibility_ms = cfg->felix_group_visibility_ms,
		    .group_max_attempts = cfg->felix_group_max_attempts,
		};
		if (felix_server_start(&n->felix, &n->loop, n->shards,
		                       n->scopes, &n->metrics, &n->log, &fcfg,
		                       err, errlen) != 0) {
			goto err_felix;
		}
	}
	/* felix: end */
	/* fsnp: the FSNP listener */
	if (cfg->native.enabled) {
		struct fsnp_server_config ncfg = {
		    .host = cfg->fsnp.host,
		    .port = cfg->fsnp.port,
		    .advertise_host = cfg->advertise_host,
		    .advertise_tls_port = 0,
		    .tls_cert_file = n->cert_path,
		    .tls_key_file = n->key_path,
		    .node_id = cfg->node_id,
		    .limits = cfg->native,
		    .scan_cursors = n->scan_cursors,
		};
		if (fsnp_server_start(&n->fsnp, &n->loop, n->shards, &ncfg,
		                      &n->log, &n->metrics, err, errlen) != 0) {
			n->fsnp = NULL;
			goto err_felix;
		}
	}
	/* fsnp: end */
	/* resp: the RESP listener, with the FSNP listener's ACL users */
	if (cfg->resp_enabled || cfg->resp_tls_enabled) {
		struct resp_server_config rcfg = {
		    .tcp = cfg->resp_enabled,
		    .host = cfg->resp.host,
		    .port = cfg->resp.port,
		    .tls = cfg->resp_tls_enabled,
		    .tls_host = cfg->resp_tls.host,
		    .tls_port = cfg->resp_tls.port,
		    .tls_cert_file = n->cert_path,
		    .tls_key_file = n->key_path,
		    .tls_ca_file = cfg->native.tls_ca,
		    .node_id = cfg->node_id,
		    .maxclients = cfg->native.maxclients,
		    .protected_mode = cfg->native.protected_mode,
		    .max_query_bytes = cfg->resp_max_query_bytes,
		    .max_output_bytes = cfg->resp_max_output_bytes,
		    .max_items = cfg->native.max_value_items,
		    .users = n->fsnp,
		    .scan_cursors = n->scan_cursors,
		};
		if (resp_server_start(&n->resp, &n->loop, n->shards, &rcfg,
		                      &n->log, err, errlen) != 0) {
			n->resp = NULL;
			goto err_fsnp;
		}
	}
	/* resp: end */
	if (cfg->flow_scheduler &&
	    flow_scheduler_start(&n->flow_sched, &n->loop, n->shards, &n->log,
	                         cfg->native.flow_clock_skew_ms) != 0) {
		snprintf(err, errlen, "cannot start the FerricFlow scheduler");
		n->flow_sched = NULL;
		goto err_fsnp;
	}
	if (n->flow_sched != NULL && n->fsnp != NULL) {
		fsnp_server_on_flow_write(n->fsnp, flow_scheduler_wake,
		                          n->flow_sched);
	}
	char token[ADMIN_TOKEN_MAX + 3] = "";
	if (cfg->admin_token_file[0] != '\0' &&
	    admin_token_file_read(cfg->admin_token_file, token, sizeof token,
	                          err, errlen) != 0) {
		goto err_fsnp;
	}
	if (admin_http_start(&n->admin, &n->loop, &n->log, cfg->admin.host,
	                     cfg->admin.port, err, errlen) != 0) {
		explicit_bzero(token, sizeof token);
		goto err_fsnp;
	}
	if (token[0] != '\0') {
		admin_http_set_token(&n->admin, token, strlen(token));
		explicit_bzero(token, sizeof token);
		log_info(&n->log, "node",
		         "admin API: /v1/... needs the bearer token of %s",
		         cfg->admin_token_file);
	}
	scopes_register_admin(n->scopes, &n->admin); /* felix */
	admin_http_route(&n->admin, "GET", "/healthz", false, on_healthz, n);
	admin_http_route(&n->admin, "GET", "/readyz", false, on_readyz, n);
	admin_http_route(&n->admin, "GET", "/metrics", false, on_metrics, n);
	admin_http_route(&n->admin, "GET", "/v1/cluster", false, on_cluster, n);
	admin_http_route(&n->admin, "GET", "/v1/debug/group/", true,
	                 on_group_hash, n); /* cluster */
	cluster_api_register(&n->admin, n->shards);
	if (flow_admin_register(&n->admin, n->shards) != 0) {
		log_warn(
		    &n->log, "admin",
		    "Flow views not served: the admin route table is full");
	}
	/* admin: the dashboard (GET /, /v1/dashboard) and its history */
	if (history_start(&n->history, &n->loop, n->shards, &n->metrics,
	                  &n->admin) == 0) {
		dashboard_register(&n->dash, &n->admin, n->history,
		                   cfg->node_id, cfg->cluster_id);
	} else {
		log_warn(&n->log, "admin",
		         "dashboard not served: out of memory for its history");
	}

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
	/* Every listener is bound: tell systemd (Type=notify) we are up. */
	notify_service_manager(&n->log, "READY=1\nSTATUS=listening");
	return 0;

err_fsnp:
	if (n->fsnp != NULL) {
		fsnp_server_on_flow_write(n->fsnp, NULL, NULL);
	}
	flow_scheduler_stop(n->flow_sched);
	n->flow_sched = NULL;
	/* resp: frees itself once closed */
	if (n->resp != NULL) {
		resp_server_close(n->resp, NULL, NULL);
		n->resp = NULL;
	}
	/* resp: end */
	/* fsnp: frees itself once closed */
	if (n->fsnp != NULL) {
		fsnp_server_close(n->fsnp, 0, NULL, NULL);
		n->fsnp = NULL;
	}
	/* fsnp: end */
err_felix:
	/* felix: listeners first, freed once the groups are closed */
	if (n->felix != NULL) {
		felix_server_close(n->felix, NULL, NULL);
	}
	scopes_close(n->scopes, NULL, NULL);
	/* felix: end */
err_shards:
	shards_close(n->shards, NULL, NULL);
	uv_run(&n->loop, UV_RUN_DEFAULT); /* let the groups close */
	n->shards = NULL;
	scan_cursors_free(n->scan_cursors);
	n->scan_cursors = NULL;
	/* felix */
	felix_server_free(n->felix);
	n->felix = NULL;
	scopes_free(n->scopes);
	n->scopes = NULL;
	/* felix: end */
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
	    "  admin HTTP   http://%s:%u  (dashboard at /; GET /healthz, "
	    "/readyz)\n"
	    "  Felix QUIC   %s:%u/udp  (ALPN felix/1 or none; %s)\n"
	    "  FSNP         %s:%u/tcp  (%s)\n"
	    "  FSNP TLS     %s:%u/tcp  (%s)\n"
	    "  RESP         %s:%u/tcp  (%s)\n"
	    "  internal     %s:%u/tcp  (%s)\n"
	    "  data         %s\n",
	    PACKAGE_VERSION, c->node_id, c->cluster_id,
	    c->dev ? " (dev mode)" : "", c->admin.host, c->admin.port,
	    c->felix.host,
	    n->felix != NULL ? felix_server_port(n->felix) : c->felix.port,
	    n->felix != NULL ? felix_server_auth_mode(n->felix)
	                     : "not started: no certificate",
	    c->fsnp.host,
	    n->fsnp != NULL ? fsnp_server_port(n->fsnp) : c->fsnp.port,
	    n->fsnp == NULL            ? "disabled: fsnp-enabled is false"
	    : c->native.requirepass[0] ? "KV and Flow, AUTH required"
	                               : "KV and Flow, no AUTH",
	    c->fsnp_tls.host,
	    n->fsnp != NULL && fsnp_server_tls_port(n->fsnp) != 0
	        ? fsnp_server_tls_port(n->fsnp)
	        : c->fsnp_tls.port,
	    n->fsnp != NULL && fsnp_server_tls_port(n->fsnp) != 0
	        ? (c->native.require_tls ? "KV over TLS; plaintext FSNP refused"
	                                 : "KV over TLS")
	        : "not served: give --fsnp-tls and a certificate",
	    c->resp.host,
	    n->resp != NULL && resp_server_port(n->resp) != 0
	        ? resp_server_port(n->resp)
	        : c->resp.port,
	    n->resp != NULL && resp_server_port(n->resp) != 0
	        ? "Redis protocol, KV"
	        : "not served: give --resp",
	    c->internal.host, c->internal.port,
	    c->n_peers > 0 || c->join.port != 0
	        ? "node transport: Raft, forwarding"
	        : "not used: a single node",
	    c->data_dir);
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
	/* felix: nothing waits on the groups any more */
	felix_server_free(n->felix);
	n->felix = NULL;
	scopes_free(n->scopes);
	n->scopes = NULL;
	/* felix: end */
	log_info(&n->log, "node", "raft groups stopped");
}

static void on_admin_closed(void *data)
{
	struct node *n = data;
	log_info(&n->log, "node", "admin HTTP closed");
	history_close(n->history, NULL, NULL); /* admin: no route uses it now */
	n->history = NULL;
	/* fsnp: FSNP clients still draining keep the groups open */
	if (n->fsnp != NULL) {
		n->fsnp_holds_groups = true;
		return;
	}
	/* fsnp: end */
	/* Protocol listeners are closed by now: stop the groups last so
	 * in-flight requests get their answers. */
	if (n->shards != NULL) {
		shards_close(n->shards, on_shards_closed, n);
	}
}

/* fsnp: every FSNP connection has drained (GOAWAY, answers out) */
static void on_fsnp_closed(void *data)
{
	struct node *n = data;
	n->fsnp = NULL; /* frees itself once its last operation returns */
	log_info(&n->log, "node", "FSNP listener closed");
	if (n->fsnp_holds_groups && n->shards != NULL) {
		shards_close(n->shards, on_shards_closed, n);
	}
}
/* fsnp: end */

void node_stop(struct node *n)
{
	if (n->stopping) {
		return;
	}
	n->stopping = true;
	notify_service_manager(&n->log, "STOPPING=1\nSTATUS=draining");
	if (n->fsnp != NULL) {
		fsnp_server_on_flow_write(n->fsnp, NULL, NULL);
	}
	flow_scheduler_stop(n->flow_sched);
	n->flow_sched = NULL;
	/* felix: the Felix listener and scope timers close first */
	if (n->felix != NULL) {
		felix_server_close(n->felix, NULL, NULL);
	}
	if (n->scopes != NULL) {
		scopes_close(n->scopes, NULL, NULL);
	}
	/* felix: end */
	/* resp: clients closed before the FSNP users they check go */
	if (n->resp != NULL) {
		resp_server_close(n->resp, NULL, NULL);
		n->resp = NULL;
	}
	/* resp: end */
	/* fsnp: GOAWAY to FSNP clients; the groups wait for their answers */
	if (n->fsnp != NULL) {
		fsnp_server_close(n->fsnp, 5000, on_fsnp_closed, n);
	}
	/* fsnp: end */
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
	/* no SCAN is in flight any more */
	scan_cursors_free(n->scan_cursors);
	n->scan_cursors = NULL;
	db_close(&n->db);
	datadir_close(&n->dir);
	metrics_free(&n->metrics);
	log_info(&n->log, "node", "stopped");
	return n->exit_code;
}
