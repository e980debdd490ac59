/* Configuration from flags, environment and file; see config.h. */
#include "node/config.h"
#include "store/store.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_kind {
	OPT_STRING,
	OPT_ADDR,
	OPT_UINT,
	OPT_BOOL,
	OPT_LOG_LEVEL,
	OPT_LOG_FORMAT,
	OPT_PEERS,
};

struct opt {
	const char *name; /* flag and file key; env is LODESTONE_ + upper */
	enum opt_kind kind;
	size_t offset;
	size_t size; /* string buffer size */
	uint64_t min, max;
	const char *arg;
	const char *help;
};

#define OFF(f) offsetof(struct node_config, f)
#define SZ(f) sizeof(((struct node_config *)0)->f)

static const struct opt opts[] = {
    {"config", OPT_STRING, OFF(config_file), SZ(config_file), 0, 0, "FILE",
     "read options from FILE (key = value lines)"},
    {"data", OPT_STRING, OFF(data_dir), SZ(data_dir), 0, 0, "DIR",
     "data directory (default /var/lib/lodestone; dev: ./var/dev)"},
    {"node-id", OPT_UINT, OFF(node_id), 8, 1, UINT32_MAX, "N",
     "this node's id, unique in the cluster (default 1)"},
    {"cluster-id", OPT_STRING, OFF(cluster_id), SZ(cluster_id), 0, 0, "ID",
     "cluster name; must match across peers (default lodestone)"},
    {"internal", OPT_ADDR, OFF(internal), 0, 0, 0, "HOST:PORT",
     "node-to-node listener (default :7000)"},
    {"felix", OPT_ADDR, OFF(felix), 0, 0, 0, "HOST:PORT",
     "Felix QUIC listener, UDP (default :5000)"},
    {"fsnp", OPT_ADDR, OFF(fsnp), 0, 0, 0, "HOST:PORT",
     "FSNP TCP listener (default :6388)"},
    {"fsnp-tls", OPT_ADDR, OFF(fsnp_tls), 0, 0, 0, "HOST:PORT",
     "FSNP TLS listener, served when given (e.g. :6389)"},
    {"resp", OPT_ADDR, OFF(resp), 0, 0, 0, "HOST:PORT",
     "RESP (Redis protocol) listener, served when given (e.g. "
     "127.0.0.1:6379)"},
    {"resp-tls", OPT_ADDR, OFF(resp_tls), 0, 0, 0, "HOST:PORT",
     "RESP TLS listener, served when given"},
    {"resp-max-query-bytes", OPT_UINT, OFF(resp_max_query_bytes), 8, 65536,
     4294967296ull, "BYTES",
     "close a RESP client whose unparsed input passes this (default 64 "
     "MiB)"},
    {"resp-max-output-bytes", OPT_UINT, OFF(resp_max_output_bytes), 8, 65536,
     4294967296ull, "BYTES",
     "close a RESP client whose unsent replies pass this (default 64 MiB)"},
    {"resp-scan-cursors", OPT_UINT, OFF(resp_scan_cursors), 4, 0, 16384, "N",
     "SCAN resume keys this node keeps, so that pages hold about COUNT keys "
     "(RESP and FSNP; 0: none; default 4096)"},
    {"admin", OPT_ADDR, OFF(admin), 0, 0, 0, "HOST:PORT",
     "admin HTTP listener (default :8080)"},
    {"advertise-host", OPT_STRING, OFF(advertise_host), SZ(advertise_host), 0,
     0, "HOST", "host clients are told to reach this node at"},
    {"peers", OPT_PEERS, OFF(peers), 0, 0, 0, "ID=HOST:PORT,...",
     "internal addresses of the cluster's nodes"},
    {"shards", OPT_UINT, OFF(shards), 4, 1, 16384, "S",
     "data shards (Raft groups) in the cluster, at most 16384: each owns "
     "at least one FSNP hash slot (default 8)"},
    {"join", OPT_ADDR, OFF(join), 0, 0, 0, "HOST:PORT",
     "join the cluster of the member at this internal address (needs "
     "--node-id and an empty data directory)"},
    {"replicas", OPT_UINT, OFF(replicas), 4, 1, 7, "R",
     "replicas per shard, recorded when the cluster is bootstrapped and "
     "reached as nodes join (default 3)"},
    {"rebalance-concurrency", OPT_UINT, OFF(rebalance_concurrency), 4, 1, 64,
     "N", "replica moves a node leads at once (default 2)"},
    {"election-timeout-ms", OPT_UINT, OFF(election_timeout_ms), 4, 50, 600000,
     "MS", "Raft election timeout, randomized up to 2x (default 1000)"},
    {"heartbeat-ms", OPT_UINT, OFF(heartbeat_ms), 4, 10, 60000, "MS",
     "Raft heartbeat period (default 100)"},
    {"snapshot-threshold", OPT_UINT, OFF(snapshot_threshold), 4, 1, 100000000,
     "N", "log entries between Raft snapshots (default 8192)"},
    {"snapshot-trailing", OPT_UINT, OFF(snapshot_trailing), 4, 1, 100000000,
     "N", "log entries kept after a snapshot (default 128)"},
    {"forward-timeout-ms", OPT_UINT, OFF(forward_timeout_ms), 4, 100, 600000,
     "MS", "how long a request waits for its shard's leader (default 5000)"},
    {"no-quiesce", OPT_BOOL, OFF(no_quiesce), 0, 0, 0, NULL,
     "idle Raft groups keep ticking and sending heartbeats (default: "
     "they quiesce)"},
    {"read-barriers", OPT_BOOL, OFF(read_barriers), 0, 0, 0, NULL,
     "linearizable reads append a barrier entry instead of confirming "
     "leadership with the voters (slower; default off)"},
    {"row-cache-bytes", OPT_UINT, OFF(row_cache_bytes), 8, 0, UINT64_MAX,
     "BYTES",
     "memory for rows read by key (KV keys, counters, shard metadata) kept "
     "in front of RocksDB (default 256 MiB; 0 off)"},
    {"auto-create-shards", OPT_UINT, OFF(auto_create_shards), 4, 1, 1024, "K",
     "shards of streams and caches auto-created in dev mode (default 4)"},
    {"dev", OPT_BOOL, OFF(dev), 0, 0, 0, NULL,
     "dev defaults: ./var/dev, loopback, generated certificate, no auth"},
    {"tls-cert", OPT_STRING, OFF(tls_cert), SZ(tls_cert), 0, 0, "FILE",
     "TLS certificate chain (PEM) for Felix and FSNP TLS"},
    {"tls-key", OPT_STRING, OFF(tls_key), SZ(tls_key), 0, 0, "FILE",
     "TLS private key (PEM)"},
    {"internal-tls-cert", OPT_STRING, OFF(internal_tls_cert),
     SZ(internal_tls_cert), 0, 0, "FILE",
     "this node's certificate (PEM, CN=node-<id>): mutual TLS between "
     "nodes; the three files are read again on SIGHUP"},
    {"internal-tls-key", OPT_STRING, OFF(internal_tls_key),
     SZ(internal_tls_key), 0, 0, "FILE", "the key of internal-tls-cert (PEM)"},
    {"internal-tls-ca", OPT_STRING, OFF(internal_tls_ca), SZ(internal_tls_ca),
     0, 0, "FILE",
     "the cluster CA (PEM) every node's certificate must chain to"},
    {"felix-tokens", OPT_STRING, OFF(felix_tokens), SZ(felix_tokens), 0, 0,
     "FILE",
     "Felix auth tokens: 'TENANT TOKEN' lines (default: dev accepts "
     "any token, otherwise none)"},
    {"felix-jwks-dir", OPT_STRING, OFF(felix_jwks_dir), SZ(felix_jwks_dir), 0,
     0, "DIR",
     "Felix JWT auth: DIR/<tenant>.json holds each tenant's Ed25519 keys "
     "(JWKS), reloaded on SIGHUP; enforced with or without --dev"},
    {"felix-jwt-skew-s", OPT_UINT, OFF(felix_jwt_skew_s), 4, 0, 3600, "S",
     "clock skew allowed on a token's exp, nbf and iat (default 60)"},
    {"felix-jwt-issuer", OPT_STRING, OFF(felix_jwt_issuer),
     SZ(felix_jwt_issuer), 0, 0, "ISS",
     "the iss Felix tokens must carry (default felix-auth)"},
    {"felix-jwt-audience", OPT_STRING, OFF(felix_jwt_audience),
     SZ(felix_jwt_audience), 0, 0, "AUD",
     "the aud Felix tokens must carry (default felix-broker)"},
    {"scopes-file", OPT_STRING, OFF(scopes_file), SZ(scopes_file), 0, 0, "FILE",
     "streams and caches to register at start (see docs/felix.md)"},
    {"felix-sub-queue-bytes", OPT_UINT, OFF(felix_sub_queue_bytes), 8, 4096,
     1ull << 32, "BYTES",
     "queue per Felix subscriber before events are dropped (default 1 MiB)"},
    {"felix-group-max-wait-ms", OPT_UINT, OFF(felix_group_max_wait_ms), 8, 1,
     3600000, "MS", "cap on a consumer group long poll (default 30000)"},
    {"felix-group-visibility-ms", OPT_UINT, OFF(felix_group_visibility_ms), 8,
     1, 86400000, "MS",
     "how long a polled record stays claimed (default 30000)"},
    {"felix-group-max-attempts", OPT_UINT, OFF(felix_group_max_attempts), 4, 1,
     1000, "N", "deliveries before a record is dead-lettered (default 5)"},
    {"felix-cache-history", OPT_UINT, OFF(felix_cache_history), 8, 0,
     UINT64_MAX, "N",
     "cache changes kept replayable per shard for watches; older ones are "
     "compacted (default 100000; 0 keeps all)"},
    {"retention-interval-ms", OPT_UINT, OFF(retention_interval_ms), 4, 10,
     3600000, "MS", "how often stream retention is enforced (default 1000)"},
    {"log-level", OPT_LOG_LEVEL, OFF(log_level), 0, 0, 0, "LEVEL",
     "debug, info, warn or error (default info)"},
    {"log-format", OPT_LOG_FORMAT, OFF(log_format), 0, 0, 0, "text|json",
     "log line format (default text)"},
    /* FSNP server (node/fsnp/fsnp_server.c). Options named fsnp-X are also read
     * from FERRICSTORE_NATIVE_X (see env_aliases). */
    {"fsnp-enabled", OPT_BOOL, OFF(native.enabled), 0, 0, 0, NULL,
     "serve FSNP on the fsnp listener (default; =false turns it off)"},
    {"fsnp-compression", OPT_BOOL, OFF(native.compression), 0, 0, 0, NULL,
     "let FSNP clients negotiate zlib bodies (default off)"},
    {"requirepass", OPT_STRING, OFF(native.requirepass), SZ(native.requirepass),
     0, 0, "PASSWORD",
     "password of the FSNP default user (default: none, no AUTH)"},
    {"maxclients", OPT_UINT, OFF(native.maxclients), 4, 1, 1000000, "N",
     "most FSNP connections at once (default 10000)"},
    {"fsnp-max-frame-bytes", OPT_UINT, OFF(native.max_frame_bytes), 8, 1024,
     134217704, "BYTES", "largest FSNP frame body (default 16 MiB)"},
    {"fsnp-unauthenticated-max-frame-bytes", OPT_UINT,
     OFF(native.unauth_max_frame_bytes), 8, 1024, 134217704, "BYTES",
     "largest frame before AUTH when a password is set (default 64 KiB)"},
    {"fsnp-frame-assembly-timeout-ms", OPT_UINT,
     OFF(native.frame_assembly_timeout_ms), 8, 0, 86400000, "MS",
     "close a connection whose chunked request is not complete in time "
     "(default 15000; 0 none)"},
    {"fsnp-send-timeout-ms", OPT_UINT, OFF(native.send_timeout_ms), 8, 1,
     86400000, "MS",
     "close a connection that takes no bytes for this long (default "
     "15000)"},
    {"fsnp-idle-timeout-ms", OPT_UINT, OFF(native.idle_timeout_ms), 8, 0,
     86400000, "MS",
     "close a connection with no inbound frame for this long (default "
     "90000; 0 never)"},
    {"fsnp-max-value-items", OPT_UINT, OFF(native.max_value_items), 8, 1,
     100000000, "N", "items in one typed request value (default 100000)"},
    {"fsnp-max-value-depth", OPT_UINT, OFF(native.max_value_depth), 8, 1, 512,
     "N", "nesting of one typed request value (default 64)"},
    {"flow-client-clock-skew-ms", OPT_UINT, OFF(native.flow_clock_skew_ms), 8,
     0, 86400000, "MS",
     "how far a FerricFlow request's now_ms may be from the leader's clock "
     "(default 60000)"},
    {"flow-cursor-ttl-ms", OPT_UINT, OFF(native.flow_cursor_ttl_ms), 8, 1000,
     86400000, "MS",
     "how long a FLOW.QUERY cursor stays valid after it is issued (default "
     "300000)"},
    {"flow-scheduler", OPT_BOOL, OFF(flow_scheduler), 0, 0, 0, "on|off",
     "fire due FerricFlow schedules on the shards this node leads "
     "(default on)"},
    {"fsnp-max-lanes-per-connection", OPT_UINT,
     OFF(native.max_lanes_per_connection), 8, 1, 1000000, "N",
     "lanes one connection may use (default 1024)"},
    {"fsnp-lane-max-queue", OPT_UINT, OFF(native.lane_max_queue), 8, 1, 1000000,
     "N",
     "requests queued on one lane before the server stops reading "
     "(default 1024)"},
    {"fsnp-max-pipeline-commands", OPT_UINT, OFF(native.max_pipeline_commands),
     8, 0, 1000000, "N", "commands in one PIPELINE (default 1024)"},
    {"fsnp-max-inflight-per-connection", OPT_UINT,
     OFF(native.max_inflight_per_connection), 8, 1, 10000000, "N",
     "unanswered requests per connection before busy (default 4096)"},
    {"fsnp-max-inflight-per-lane", OPT_UINT, OFF(native.max_inflight_per_lane),
     8, 1, 10000000, "N",
     "unanswered requests per lane before busy (default 1024)"},
    {"fsnp-max-response-bytes", OPT_UINT, OFF(native.max_response_bytes), 8,
     1024, 1ull << 40, "BYTES", "largest FSNP response (default 64 MiB)"},
    {"fsnp-response-chunk-bytes", OPT_UINT, OFF(native.response_chunk_bytes), 8,
     0, 134217704, "BYTES", "response chunk size (default 0: the frame limit)"},
    {"fsnp-max-outbound-bytes-per-connection", OPT_UINT,
     OFF(native.max_outbound_bytes_per_connection), 8, 65536, 1ull << 40,
     "BYTES",
     "unsent bytes per connection before reading pauses (default 128 "
     "MiB)"},
    {"fsnp-max-pending-chunks", OPT_UINT, OFF(native.max_pending_chunks), 8, 1,
     1000000, "N", "incomplete chunked requests per connection (default 1024)"},
    {"fsnp-max-pending-chunk-bytes", OPT_UINT,
     OFF(native.max_pending_chunk_bytes), 8, 1024, 1ull << 40, "BYTES",
     "bytes of incomplete chunked requests per connection (default 64 "
     "MiB)"},
    {"fsnp-max-global-executions", OPT_UINT, OFF(native.max_global_executions),
     8, 1, 100000000, "N",
     "requests executing on the node at once before busy (default "
     "65536)"},
    {"fsnp-max-global-lanes", OPT_UINT, OFF(native.max_global_lanes), 8, 1,
     100000000, "N", "lanes open on the node (default 65536)"},
    {"fsnp-max-global-blocking-requests", OPT_UINT,
     OFF(native.max_global_blocking_requests), 8, 0, 100000000, "N",
     "requests waiting on a fetch-or-compute (default 4096)"},
    {"fsnp-max-global-inbound-buffer-bytes", OPT_UINT,
     OFF(native.max_global_inbound_buffer_bytes), 8, 65536, 1ull << 40, "BYTES",
     "receive buffers of all connections before reading pauses (default "
     "256 MiB)"},
    {"fsnp-max-global-session-bytes", OPT_UINT,
     OFF(native.max_global_session_bytes), 8, 65536, 1ull << 40, "BYTES",
     "request state of all connections before busy (default 256 MiB)"},
    {"fsnp-max-global-outbound-bytes", OPT_UINT,
     OFF(native.max_global_outbound_bytes), 8, 65536, 1ull << 40, "BYTES",
     "unsent bytes of all connections before reading pauses (default "
     "512 MiB)"},
    {"fsnp-advertise-tls-port", OPT_UINT, OFF(native.advertise_tls_port), 4, 1,
     65535, "PORT",
     "FSNP TLS port told to clients (default: the fsnp-tls port)"},
    {"tls-ca", OPT_STRING, OFF(native.tls_ca), SZ(native.tls_ca), 0, 0, "FILE",
     "CA certificates (PEM) that FSNP TLS clients must present"},
    {"fsnp-require-tls", OPT_BOOL, OFF(native.require_tls), 0, 0, 0, NULL,
     "refuse FSNP on the plaintext listener (clients must use fsnp-tls)"},
    {"fsnp-trace", OPT_BOOL, OFF(native.trace), 0, 0, 0, NULL,
     "accept the FSNP trace flag 0x01: traced requests are logged and "
     "their replies flagged"},
    {"protected-mode", OPT_BOOL, OFF(native.protected_mode), 0, 0, 0, NULL,
     "refuse FSNP clients from non-loopback addresses while no user has a "
     "password (default yes; --dev: no)"},
    {"fsnp-auth-timeout-ms", OPT_UINT, OFF(native.auth_timeout_ms), 8, 0,
     3600000, "MS",
     "close an FSNP connection not authenticated after this long, when "
     "AUTH is required (default 10000; 0 never)"},
    {"auth-max-failures", OPT_UINT, OFF(native.auth_max_failures), 4, 0,
     1000000, "N",
     "close an FSNP or Felix connection after N failed authentications "
     "(default 10; 0 no limit)"},
    {"admin-token-file", OPT_STRING, OFF(admin_token_file),
     SZ(admin_token_file), 0, 0, "FILE",
     "file holding the bearer token every /v1/* admin request needs "
     "(default: none)"},
    {"metrics-max-groups", OPT_UINT, OFF(metrics_max_groups), 8, 0, 1u << 20,
     "N",
     "/metrics lists per-group Raft series while the node replicates at "
     "most N groups; above, aggregates only (default 256)"},
    {"fsnp-trusted-request-context-users", OPT_STRING,
     OFF(native.trusted_request_context_users),
     SZ(native.trusted_request_context_users), 0, 0, "USER,...",
     "users whose FSNP request_context is trusted (Flow queries)"},
};

/* Variables of the FSNP seed that name options without the fsnp- prefix
 * rule (FERRICSTORE_NATIVE_X reads fsnp-x); a LODESTONE_ variable of the
 * same option wins. A bare port given for an address keeps the host. */
static const struct {
	const char *env;
	const char *opt;
} env_aliases[] = {
    {"FERRICSTORE_NATIVE_PORT", "fsnp"},
    {"FERRICSTORE_NATIVE_TLS_PORT", "fsnp-tls"},
    {"FERRICSTORE_NATIVE_TLS_CERT_FILE", "tls-cert"},
    {"FERRICSTORE_NATIVE_TLS_KEY_FILE", "tls-key"},
    {"FERRICSTORE_NATIVE_TLS_CA_CERT_FILE", "tls-ca"},
    {"FERRICSTORE_NATIVE_ADVERTISE_HOST", "advertise-host"},
    {"FERRICSTORE_NATIVE_REQUEST_COMPRESSION_ENABLED", "fsnp-compression"},
    {"FERRICSTORE_REQUIRE_TLS", "fsnp-require-tls"},
};

#define N_OPTS (sizeof opts / sizeof opts[0])
_Static_assert(N_OPTS <= 64 * sizeof(((struct node_config *)0)->set_mask) /
                             sizeof(uint64_t),
               "set_mask has a bit per option");

enum { OPT_IDX_CONFIG = 0 };

static int opt_index(const char *name, size_t len)
{
	for (size_t i = 0; i < N_OPTS; i++) {
		const char *o = opts[i].name;
		if (strlen(o) != len) {
			continue;
		}
		size_t j;
		/* File keys may use '_' where flags use '-'. */
		for (j = 0; j < len; j++) {
			char a = name[j] == '_' ? '-' : name[j];
			if (a != o[j]) {
				break;
			}
		}
		if (j == len) {
			return (int)i;
		}
	}
	return -1;
}

static void env_name(const struct opt *o, char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "LODESTONE_");
	for (const char *p = o->name; *p && n + 1 < cap; p++) {
		buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	}
	buf[n] = '\0';
}

int config_parse_addr(const char *s, struct config_addr *out)
{
	const char *colon;
	const char *host = s;
	size_t hlen;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (end == NULL || end[1] != ':') {
			return -1;
		}
		host = s + 1;
		hlen = (size_t)(end - host);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL) {
			return -1;
		}
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen) != NULL) {
			return -1; /* bare IPv6 needs brackets */
		}
	}
	if (hlen >= sizeof out->host) {
		return -1;
	}
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || port == 0 ||
	    port > 65535) {
		return -1;
	}
	if (hlen == 0) {
		/* ":PORT" keeps the current host (the default listen host). */
		if (out->host[0] == '\0') {
			strcpy(out->host, "0.0.0.0");
		}
	} else {
		memcpy(out->host, host, hlen);
		out->host[hlen] = '\0';
	}
	out->port = (uint16_t)port;
	return 0;
}

static int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	if (*s == '\0' || *s == '-' || isspace((unsigned char)*s)) {
		return -1;
	}
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max) {
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *yes[] = {"1", "true", "yes", "on"};
	static const char *no[] = {"0", "false", "no", "off"};
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static int parse_peers(const char *s, struct node_config *c, char *why,
                       size_t whylen)
{
	char buf[4096];
	unsigned n = 0;
	if (strlen(s) >= sizeof buf) {
		snprintf(why, whylen, "list too long");
		return -1;
	}
	strcpy(buf, s);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*tok)) {
			tok++;
		}
		char *eq = strchr(tok, '=');
		uint64_t id;
		if (eq == NULL) {
			snprintf(why, whylen, "'%s' is not ID=HOST:PORT", tok);
			return -1;
		}
		*eq = '\0';
		if (parse_uint(tok, 1, UINT32_MAX, &id) != 0) {
			snprintf(why, whylen, "'%s' is not a node id (1..%u)",
			         tok, UINT32_MAX);
			return -1;
		}
		if (n == CONFIG_PEERS_MAX) {
			snprintf(why, whylen, "more than %d peers",
			         CONFIG_PEERS_MAX);
			return -1;
		}
		for (unsigned i = 0; i < n; i++) {
			if (c->peers[i].id == id) {
				snprintf(why, whylen,
				         "node id %" PRIu64 " listed twice",
				         id);
				return -1;
			}
		}
		struct config_addr a;
		memset(&a, 0, sizeof a);
		if (config_parse_addr(eq + 1, &a) != 0 || a.host[0] == '\0' ||
		    strcmp(a.host, "0.0.0.0") == 0) {
			snprintf(why, whylen,
			         "'%s' is not a reachable HOST:PORT for node "
			         "%" PRIu64,
			         eq + 1, id);
			return -1;
		}
		c->peers[n].id = id;
		c->peers[n].addr = a;
		n++;
	}
	if (n == 0) {
		snprintf(why, whylen, "empty list");
		return -1;
	}
	c->n_peers = n;
	return 0;
}

/* Applies one option value; `src` names where it came from for errors. */
static int set_opt(struct node_config *c, int idx, const char *value,
                   const char *src, char *err, size_t errlen)
{
	const struct opt *o = &opts[idx];
	char *field = (char *)c + o->offset;
	char why[256] = "";
	int rc = 0;

	switch (o->kind) {
	case OPT_STRING:
		if (value[0] == '\0') {
			snprintf(why, sizeof why, "must not be empty");
			rc = -1;
		} else if (strlen(value) >= o->size) {
			snprintf(why, sizeof why, "longer than %zu bytes",
			         o->size - 1);
			rc = -1;
		} else {
			strcpy(field, value);
		}
		break;
	case OPT_ADDR:
		if (config_parse_addr(value, (struct config_addr *)field) !=
		    0) {
			snprintf(why, sizeof why,
			         "'%s' is not HOST:PORT with a port in "
			         "1..65535",
			         value);
			rc = -1;
		}
		break;
	case OPT_UINT: {
		uint64_t v;
		if (parse_uint(value, o->min, o->max, &v) != 0) {
			snprintf(why, sizeof why,
			         "'%s' is not an integer in %" PRIu64
			         "..%" PRIu64,
			         value, o->min, o->max);
			rc = -1;
		} else if (o->size == 8) {
			*(uint64_t *)field = v;
		} else {
			*(unsigned *)field = (unsigned)v;
		}
		break;
	}
	case OPT_BOOL:
		if (parse_bool(value, (bool *)field) != 0) {
			snprintf(why, sizeof why,
			         "'%s' is not a boolean (true/false)", value);
			rc = -1;
		}
		break;
	case OPT_LOG_LEVEL:
		if (log_level_parse(value, (enum log_level *)field) != 0) {
			snprintf(why, sizeof why,
			         "'%s' is not one of debug, info, warn, error",
			         value);
			rc = -1;
		}
		break;
	case OPT_LOG_FORMAT:
		if (log_format_parse(value, (enum log_format *)field) != 0) {
			snprintf(why, sizeof why,
			         "'%s' is not one of text, json", value);
			rc = -1;
		}
		break;
	case OPT_PEERS:
		rc = parse_peers(value, c, why, sizeof why);
		break;
	}
	if (rc != 0) {
		snprintf(err, errlen, "invalid value for '%s' (from %s): %s",
		         o->name, src, why);
		return -1;
	}
	c->set_mask[idx / 64] |= 1ull << (idx % 64);
	return 0;
}

static bool is_set(const struct node_config *c, const char *name)
{
	int i = opt_index(name, strlen(name));
	return i >= 0 && (c->set_mask[i / 64] & (1ull << (i % 64))) != 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s)) {
		s++;
	}
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1])) {
		*--e = '\0';
	}
	return s;
}

static int load_file(struct node_config *c, const char *path, char *err,
                     size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	unsigned lineno = 0;
	if (f == NULL) {
		snprintf(err, errlen, "cannot read config file '%s': %s", path,
		         strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f) != NULL) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash != NULL) {
			*hash = '\0';
		}
		char *s = trim(line);
		if (*s == '\0') {
			continue;
		}
		char *eq = strchr(s, '=');
		char src[CONFIG_PATH_MAX + 32];
		snprintf(src, sizeof src, "%s:%u", path, lineno);
		if (eq == NULL) {
			snprintf(err, errlen,
			         "%s: expected 'key = value', got '%s'", src,
			         s);
			goto err_close;
		}
		*eq = '\0';
		char *key = trim(s);
		char *value = trim(eq + 1);
		int idx = opt_index(key, strlen(key));
		if (idx < 0 || idx == OPT_IDX_CONFIG) {
			snprintf(err, errlen, "%s: unknown option '%s'", src,
			         key);
			goto err_close;
		}
		/* A value may be quoted to keep spaces or '#'. */
		size_t vl = strlen(value);
		if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
			value[vl - 1] = '\0';
			value++;
		}
		if (set_opt(c, idx, value, src, err, errlen) != 0) {
			goto err_close;
		}
	}
	fclose(f);
	return 0;
err_close:
	fclose(f);
	return -1;
}

static const char *env_get(char *const envp[], const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') {
			return envp[i] + n + 1;
		}
	}
	return NULL;
}

static void set_defaults(struct node_config *c)
{
	memset(c, 0, sizeof *c);
	c->node_id = 1;
	strcpy(c->cluster_id, "lodestone");
	strcpy(c->internal.host, "0.0.0.0");
	c->internal.port = 7000;
	strcpy(c->felix.host, "0.0.0.0");
	c->felix.port = 5000;
	strcpy(c->fsnp.host, "0.0.0.0");
	c->fsnp.port = 6388;
	strcpy(c->fsnp_tls.host, "0.0.0.0");
	c->fsnp_tls.port = 6389;
	strcpy(c->admin.host, "0.0.0.0");
	c->admin.port = 8080;
	strcpy(c->resp.host, "127.0.0.1");
	c->resp.port = 6379;
	strcpy(c->resp_tls.host, "127.0.0.1");
	c->resp_tls.port = 6380;
	c->resp_max_query_bytes = 64ull << 20;
	c->resp_max_output_bytes = 64ull << 20;
	c->resp_scan_cursors = 4096;
	c->shards = 8;
	c->auto_create_shards = 4;
	c->row_cache_bytes = STORE_ROW_CACHE_DEFAULT;
	c->metrics_max_groups = 256;
	c->felix_group_max_wait_ms = 30000;
	c->felix_group_visibility_ms = 30000;
	c->felix_group_max_attempts = 5;
	c->felix_jwt_skew_s = 60;
	c->felix_cache_history = 100000;
	c->log_level = LOG_INFO;
	c->log_format = LOG_FORMAT_TEXT;
	/* FSNP: the reference server's defaults, except the global
	 * execution and lane caps (see docs/fsnp.md). */
	c->native.enabled = true;
	c->native.maxclients = 10000;
	c->native.protected_mode = true;
	c->native.auth_timeout_ms = 10000;
	c->native.auth_max_failures = 10;
	c->native.max_frame_bytes = 16u << 20;
	c->native.unauth_max_frame_bytes = 64u << 10;
	c->native.frame_assembly_timeout_ms = 15000;
	c->native.send_timeout_ms = 15000;
	c->native.idle_timeout_ms = 90000;
	c->native.max_value_items = 100000;
	c->native.max_value_depth = 64;
	c->native.flow_clock_skew_ms = 60000;
	c->native.flow_cursor_ttl_ms = 300000;
	c->flow_scheduler = true;
	c->native.max_lanes_per_connection = 1024;
	c->native.lane_max_queue = 1024;
	c->native.max_pipeline_commands = 1024;
	c->native.max_inflight_per_connection = 4096;
	c->native.max_inflight_per_lane = 1024;
	c->native.max_response_bytes = 64u << 20;
	c->native.max_outbound_bytes_per_connection = 128u << 20;
	c->native.max_pending_chunks = 1024;
	c->native.max_pending_chunk_bytes = 64u << 20;
	c->native.max_global_executions = 65536;
	c->native.max_global_lanes = 65536;
	c->native.max_global_blocking_requests = 4096;
	c->native.max_global_inbound_buffer_bytes = 256u << 20;
	c->native.max_global_session_bytes = 256u << 20;
	c->native.max_global_outbound_bytes = 512u << 20;
}

/* FERRICSTORE_NATIVE_X for option fsnp-x (NULL-free: "" when the option
 * has no such alias). */
static void native_env_name(const struct opt *o, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (strncmp(o->name, "fsnp-", 5) != 0 || o->kind == OPT_ADDR) {
		return;
	}
	size_t n = (size_t)snprintf(buf, cap, "FERRICSTORE_NATIVE_");
	for (const char *p = o->name + 5; *p && n + 1 < cap; p++) {
		buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	}
	buf[n] = '\0';
}

static int set_alias(struct node_config *c, int idx, const char *value,
                     const char *src, char *err, size_t errlen)
{
	char port[16];
	size_t i;
	if (opts[idx].kind == OPT_ADDR) {
		for (i = 0; value[i] >= '0' && value[i] <= '9'; i++) {
		}
		if (i > 0 && value[i] == '\0' && i < sizeof port - 1) {
			snprintf(port, sizeof port, ":%s", value);
			value = port;
		}
	}
	return set_opt(c, idx, value, src, err, errlen);
}

/* The FSNP seed's variables, read before the LODESTONE_ ones so that
 * those win. */
static int load_native_env(struct node_config *c, char *const envp[], char *err,
                           size_t errlen)
{
	char name[96];
	for (size_t i = 1; i < N_OPTS; i++) {
		native_env_name(&opts[i], name, sizeof name);
		const char *v = name[0] ? env_get(envp, name) : NULL;
		if (v != NULL &&
		    set_alias(c, (int)i, v, name, err, errlen) != 0) {
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof env_aliases / sizeof env_aliases[0];
	     i++) {
		const char *v = env_get(envp, env_aliases[i].env);
		int idx =
		    opt_index(env_aliases[i].opt, strlen(env_aliases[i].opt));
		if (v != NULL && idx > 0 &&
		    set_alias(c, idx, v, env_aliases[i].env, err, errlen) !=
		        0) {
			return -1;
		}
	}
	return 0;
}

unsigned config_node_count(const struct node_config *c)
{
	unsigned n = 1;
	for (unsigned i = 0; i < c->n_peers; i++) {
		if (c->peers[i].id != c->node_id) {
			n++;
		}
	}
	return n;
}

/* Dev mode listens on loopback unless a host was given explicitly. */
static void dev_loopback(struct config_addr *a, bool explicit)
{
	if (!explicit) {
		strcpy(a->host, "127.0.0.1");
	}
}

static int finish(struct node_config *c, char *err, size_t errlen)
{
	if (c->dev) {
		dev_loopback(&c->internal, is_set(c, "internal"));
		dev_loopback(&c->felix, is_set(c, "felix"));
		dev_loopback(&c->fsnp, is_set(c, "fsnp"));
		dev_loopback(&c->fsnp_tls, is_set(c, "fsnp-tls"));
		dev_loopback(&c->admin, is_set(c, "admin"));
		if (!is_set(c, "protected-mode")) {
			c->native.protected_mode = false;
		}
	}
	if (!is_set(c, "data")) {
		strcpy(c->data_dir,
		       c->dev ? "./var/dev" : "/var/lib/lodestone");
	}
	if (!is_set(c, "advertise-host")) {
		const char *h = c->felix.host;
		if (strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0) {
			if (gethostname(c->advertise_host,
			                sizeof c->advertise_host - 1) != 0) {
				strcpy(c->advertise_host, "localhost");
			}
		} else {
			strcpy(c->advertise_host, h);
		}
	}
	for (unsigned i = 0; i < c->n_peers; i++) {
		if (c->peers[i].id == c->node_id &&
		    c->peers[i].addr.port != c->internal.port) {
			snprintf(err, errlen,
			         "invalid value for 'peers': the entry for "
			         "this node (%" PRIu64
			         ") has port %u but 'internal' listens on %u",
			         c->node_id, c->peers[i].addr.port,
			         c->internal.port);
			return -1;
		}
	}
	if (!is_set(c, "replicas")) {
		c->replicas = 3;
	}
	if (!is_set(c, "rebalance-concurrency")) {
		c->rebalance_concurrency = 2;
	}
	if (is_set(c, "join") && !is_set(c, "node-id")) {
		snprintf(err, errlen,
		         "invalid value for 'join': a joining node needs its "
		         "own --node-id");
		return -1;
	}
	if (is_set(c, "join") && c->n_peers > 0) {
		snprintf(err, errlen,
		         "invalid value for 'join': --peers bootstraps a new "
		         "cluster, --join enters an existing one; give one");
		return -1;
	}
	if (!is_set(c, "join")) {
		c->join.port = 0;
	}
	if ((c->tls_cert[0] == '\0') != (c->tls_key[0] == '\0')) {
		snprintf(err, errlen,
		         "invalid value for '%s': 'tls-cert' and 'tls-key' "
		         "must be given together",
		         c->tls_cert[0] ? "tls-key" : "tls-cert");
		return -1;
	}
	{
		int given = (c->internal_tls_cert[0] != '\0') +
		            (c->internal_tls_key[0] != '\0') +
		            (c->internal_tls_ca[0] != '\0');
		if (given != 0 && given != 3) {
			snprintf(
			    err, errlen,
			    "invalid value for '%s': 'internal-tls-cert', "
			    "'internal-tls-key' and 'internal-tls-ca' must "
			    "be given together",
			    c->internal_tls_cert[0] == '\0'
			        ? "internal-tls-cert"
			    : c->internal_tls_key[0] == '\0'
			        ? "internal-tls-key"
			        : "internal-tls-ca");
			return -1;
		}
	}
	/* RESP is served only when asked for (--dev does not turn it on). */
	c->resp_enabled = is_set(c, "resp");
	c->resp_tls_enabled = is_set(c, "resp-tls");
	/* The FSNP TLS listener is served only when asked for: a default
	 * port would collide between nodes sharing a host. */
	c->native.tls_enabled = is_set(c, "fsnp-tls");
	snprintf(c->native.tls_host, sizeof c->native.tls_host, "%s",
	         c->fsnp_tls.host);
	c->native.tls_port = c->fsnp_tls.port;
	if (c->native.require_tls && !c->native.tls_enabled) {
		snprintf(err, errlen,
		         "invalid value for 'fsnp-require-tls': it refuses "
		         "plaintext FSNP, so 'fsnp-tls' must be given too");
		return -1;
	}
	if (c->native.require_tls && !c->dev && c->tls_cert[0] == '\0') {
		snprintf(err, errlen,
		         "invalid value for 'fsnp-require-tls': the TLS "
		         "listener needs 'tls-cert' and 'tls-key' (or --dev "
		         "for a generated certificate)");
		return -1;
	}
	return 0;
}

int config_load(struct node_config *c, int argc, char *const argv[],
                char *const envp[], enum config_action *action, char *err,
                size_t errlen)
{
	const char *file = NULL;
	char src[64];
	*action = CONFIG_RUN;
	set_defaults(c);

	/* Find --config, --help and --version first: they decide what else
	 * is read. */
	file = env_get(envp, "LODESTONE_CONFIG");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*action = CONFIG_HELP;
			return 0;
		}
		if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
			*action = CONFIG_VERSION;
			return 0;
		}
		if (strcmp(a, "--config") == 0 && i + 1 < argc) {
			file = argv[i + 1];
		} else if (strncmp(a, "--config=", 9) == 0) {
			file = a + 9;
		}
	}
	if (file != NULL) {
		if (set_opt(c, OPT_IDX_CONFIG, file, "--config", err, errlen) !=
		    0) {
			return -1;
		}
		if (load_file(c, file, err, errlen) != 0) {
			return -1;
		}
	}
	if (load_native_env(c, envp, err, errlen) != 0) {
		return -1;
	}
	for (size_t i = 1; i < N_OPTS; i++) {
		char name[96];
		env_name(&opts[i], name, sizeof name);
		const char *v = env_get(envp, name);
		if (v != NULL &&
		    set_opt(c, (int)i, v, name, err, errlen) != 0) {
			return -1;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *value = NULL;
		if (strncmp(a, "--", 2) != 0) {
			snprintf(err, errlen,
			         "unexpected argument '%s' (options start "
			         "with --; see --help)",
			         a);
			return -1;
		}
		const char *name = a + 2;
		const char *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		int idx = opt_index(name, nlen);
		if (idx < 0) {
			snprintf(err, errlen,
			         "unknown option '%.*s' (see --help)",
			         (int)(nlen + 2), a);
			return -1;
		}
		if (eq != NULL) {
			value = eq + 1;
		} else if (opts[idx].kind == OPT_BOOL) {
			/* `--flag`, or `--flag yes|no` (Redis style). */
			bool b;
			value = "true";
			if (i + 1 < argc && parse_bool(argv[i + 1], &b) == 0) {
				value = argv[++i];
			}
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, errlen,
			         "option '--%s' needs a value (%s)",
			         opts[idx].name, opts[idx].arg);
			return -1;
		}
		if (idx == OPT_IDX_CONFIG) {
			continue; /* already read */
		}
		snprintf(src, sizeof src, "--%s", opts[idx].name);
		if (set_opt(c, idx, value, src, err, errlen) != 0) {
			return -1;
		}
	}
	return finish(c, err, errlen);
}

void config_usage(int fd)
{
	char buf[16384];
	size_t n = 0;
	n += (size_t)snprintf(
	    buf + n, sizeof buf - n,
	    "usage: lodestone [OPTIONS]\n\n"
	    "A node of a Lodestone cluster: Felix v1 over QUIC and FSNP over "
	    "TCP,\nserved from per-shard Raft groups on RocksDB.\n\n"
	    "Every option is also a config-file key (key = value) and an\n"
	    "environment variable LODESTONE_<KEY> (dashes as underscores).\n"
	    "Precedence: flag > environment > file > default.\n"
	    "Options named fsnp-X are also read from FERRICSTORE_NATIVE_X "
	    "(the\nFSNP seed's names); LODESTONE_FSNP_X wins over it.\n\n");
	for (size_t i = 0; i < N_OPTS && n < sizeof buf; i++) {
		char left[64];
		snprintf(left, sizeof left, "--%s%s%s", opts[i].name,
		         opts[i].arg ? " " : "",
		         opts[i].arg ? opts[i].arg : "");
		n += (size_t)snprintf(buf + n, sizeof buf - n, "  %-30s %s\n",
		                      left, opts[i].help);
	}
	if (n < sizeof buf) {
		n += (size_t)snprintf(buf + n, sizeof buf - n,
		                      "  %-30s %s\n  %-30s %s\n", "--version",
		                      "print the version and exit", "--help",
		                      "print this help and exit");
	}
	if (n > sizeof buf) {
		n = sizeof buf;
	}
	ssize_t rc = write(fd, buf, n);
	(void)rc;
}
