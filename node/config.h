/* The daemon's configuration: every option is a command-line flag
 * (`--node-id 3`), a config-file key (`node-id = 3`, `#` comments) and an
 * environment variable (`LODESTONE_NODE_ID=3`); precedence is
 * flag > environment > file > default.
 *
 * config_load() owns nothing outside the struct: all strings are copied into
 * fixed buffers, so a `struct node_config` can be copied and freed freely. */
#ifndef LS_NODE_CONFIG_H
#define LS_NODE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/log.h"

#define CONFIG_HOST_MAX 256
#define CONFIG_PATH_MAX 1024
#define CONFIG_PEERS_MAX 64

struct config_addr {
	char host[CONFIG_HOST_MAX];
	uint16_t port;
};

struct config_peer {
	uint64_t id;
	struct config_addr addr;
};

/* FSNP server switches and limits (node/fsnp/fsnp_server.c). Every one is also
 * read from the FERRICSTORE_NATIVE_* variable the FSNP seed names; the
 * LODESTONE_* variable of the same option wins over it. */
struct config_native {
	bool enabled;     /* serve FSNP at all */
	bool compression; /* zlib may be negotiated */
	char requirepass[256];
	/* Refuse clients from non-loopback addresses while no user has a
	 * password (docs/security.md). */
	bool protected_mode;
	/* Close a connection still unauthenticated after this long, when
	 * AUTH is required; 0 never. */
	uint64_t auth_timeout_ms;
	/* Failed authentications one connection may make before it is
	 * closed (FSNP AUTH, Felix auth streams); 0 no limit. */
	unsigned auth_max_failures;
	unsigned maxclients;
	uint64_t max_frame_bytes;
	uint64_t unauth_max_frame_bytes;
	uint64_t frame_assembly_timeout_ms;
	uint64_t send_timeout_ms;
	uint64_t idle_timeout_ms; /* 0: never close idle connections */
	uint64_t max_value_items;
	uint64_t max_value_depth;
	uint64_t flow_clock_skew_ms; /* FerricFlow now_ms clamp */
	uint64_t flow_cursor_ttl_ms; /* FLOW.QUERY cursor lifetime */
	uint64_t max_lanes_per_connection;
	uint64_t lane_max_queue;
	uint64_t max_pipeline_commands;
	uint64_t max_inflight_per_connection;
	uint64_t max_inflight_per_lane;
	uint64_t max_response_bytes;
	uint64_t response_chunk_bytes; /* 0: the frame limit */
	uint64_t max_outbound_bytes_per_connection;
	uint64_t max_pending_chunks;
	uint64_t max_pending_chunk_bytes;
	uint64_t max_global_executions;
	uint64_t max_global_lanes;
	uint64_t max_global_blocking_requests;
	uint64_t max_global_inbound_buffer_bytes;
	uint64_t max_global_session_bytes;
	uint64_t max_global_outbound_bytes;
	unsigned advertise_tls_port;  /* 0: the fsnp-tls port */
	char tls_ca[CONFIG_PATH_MAX]; /* "": no client certificates */
	/* The TLS listener (derived by config_load from fsnp-tls): served
	 * only when fsnp-tls was given by any source. */
	bool tls_enabled;
	char tls_host[CONFIG_HOST_MAX];
	uint16_t tls_port;
	bool require_tls; /* refuse FSNP on the plaintext listener */
	bool trace;       /* accept the trace request flag (0x01) */
	char trusted_request_context_users[1024];
};

struct node_config {
	char config_file[CONFIG_PATH_MAX];
	char data_dir[CONFIG_PATH_MAX];
	uint64_t node_id;
	char cluster_id[128];
	struct config_addr internal;
	struct config_addr felix;
	struct config_addr fsnp;
	struct config_addr fsnp_tls;
	struct config_addr admin;
	/* RESP listeners (node/resp/): served only when given. */
	struct config_addr resp;
	struct config_addr resp_tls;
	bool resp_enabled;     /* derived: resp was given */
	bool resp_tls_enabled; /* derived: resp-tls was given */
	uint64_t resp_max_query_bytes;
	uint64_t resp_max_output_bytes;
	/* SCAN resume keys kept (node/scan_cursors.h); 0: none */
	unsigned resp_scan_cursors;
	char advertise_host[CONFIG_HOST_MAX];
	struct config_peer peers[CONFIG_PEERS_MAX];
	unsigned n_peers;
	struct config_addr join; /* a member's internal address (port 0:
	                            not joining) */
	unsigned shards;
	unsigned replicas;              /* R stored at bootstrap */
	unsigned rebalance_concurrency; /* replica moves at once per node */
	/* Raft and forwarding (0 = the built-in default); docs/cluster.md */
	unsigned election_timeout_ms;
	unsigned heartbeat_ms;
	unsigned snapshot_threshold;
	unsigned snapshot_trailing;
	unsigned forward_timeout_ms;
	bool no_quiesce;     /* idle groups keep ticking (docs/cluster.md) */
	bool read_barriers;  /* reads take a barrier entry (docs/cluster.md) */
	bool flow_scheduler; /* fire FerricFlow schedules (node/flow_sched.h) */
	uint64_t row_cache_bytes; /* store/rowcache.h bound; 0 = off */
	unsigned auto_create_shards;
	bool dev;
	/* The bearer token every /v1/... admin request needs: the file's first
	 * line; "" = none (docs/security.md). */
	char admin_token_file[CONFIG_PATH_MAX];
	/* GET /metrics lists lodestone_raft_group_* series per group up to
	 * this many local groups; above it only aggregates. */
	uint64_t metrics_max_groups;
	char tls_cert[CONFIG_PATH_MAX];
	char tls_key[CONFIG_PATH_MAX];
	/* Mutual TLS on the internal listener (all three or none; --dev
	 * does not turn it on). */
	char internal_tls_cert[CONFIG_PATH_MAX];
	char internal_tls_key[CONFIG_PATH_MAX];
	char internal_tls_ca[CONFIG_PATH_MAX];
	/* Felix broker (node/felix/felix_server.c) and scopes
	 * (node/felix/scopes.c). */
	char felix_tokens[CONFIG_PATH_MAX]; /* "" = none */
	char scopes_file[CONFIG_PATH_MAX];  /* "" = none */
	/* JWT auth (docs/security.md): one JWKS per tenant in the
	 * directory; "" = off. */
	char felix_jwks_dir[CONFIG_PATH_MAX];
	unsigned felix_jwt_skew_s;
	char felix_jwt_issuer[256];
	char felix_jwt_audience[256];
	uint64_t felix_sub_queue_bytes;
	uint64_t felix_group_max_wait_ms;
	uint64_t felix_group_visibility_ms;
	unsigned felix_group_max_attempts;
	uint64_t felix_cache_history; /* 0 = never compact */
	unsigned retention_interval_ms;
	enum log_level log_level;
	enum log_format log_format;
	struct config_native native;
	/* Which options were given explicitly (by any source), by table index.
	 */
	uint64_t set_mask[2];
};

enum config_action {
	CONFIG_RUN = 0,
	CONFIG_HELP,
	CONFIG_VERSION,
};

/* Fills `c` from defaults, the config file (from --config or
 * LODESTONE_CONFIG), `envp` (NULL-terminated "K=V" strings) and argv, then
 * derives what depends on others (data dir, replicas, advertise host) and
 * validates. On error returns -1 with a message naming the option, where it
 * came from and why in `err`. */
int config_load(struct node_config *c, int argc, char *const argv[],
                char *const envp[], enum config_action *action, char *err,
                size_t errlen);

/* Parses "HOST:PORT" or "[V6]:PORT". */
int config_parse_addr(const char *s, struct config_addr *out);

/* Number of distinct nodes in the cluster: this node plus its peers. */
unsigned config_node_count(const struct node_config *c);

/* Writes the --help text. */
void config_usage(int fd);

#endif
