/* The daemon: owns the reactor loop and every component of one node (data
 * directory lock, RocksDB, the shards and their raft groups, the Felix and
 * FSNP servers, admin HTTP). Everything runs on `loop`; node_stop() drains
 * gracefully. */
#ifndef LS_NODE_NODE_H
#define LS_NODE_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "node/admin/admin.h"
#include "node/config.h"
#include "node/datadir.h"
#include "store/db.h"
#include "node/log.h"
#include "node/shards.h"

struct scopes;
struct felix_server;
struct fsnp_server;

struct node {
	uv_loop_t loop;
	struct node_config cfg;
	struct log log;
	struct datadir dir;
	struct db db;
	struct shards *shards; /* the replicated core; owned */
	/* felix: the Felix broker and the scope registry (owned) */
	struct scopes *scopes;
	struct felix_server *felix;
	/* felix: end */
	/* fsnp: the FSNP listener (owned; frees itself after its close) */
	struct fsnp_server *fsnp;
	bool fsnp_holds_groups; /* raft groups close once FSNP drained */
	/* fsnp: end */
	/* resp: the RESP listener (owned; frees itself after its close) */
	struct resp_server *resp;
	/* resp: end */
	/* SCAN resume keys the FSNP and RESP listeners share (owned; freed
	 * once the loop has stopped), or NULL (--resp-scan-cursors 0). */
	struct scan_cursors *scan_cursors;
	/* The built-in FerricFlow scheduler (owned; frees itself once
	 * stopped and its passes ended), or NULL. */
	struct flow_scheduler *flow_sched;
	struct admin_http admin;
	struct history *history; /* the dashboard's samples (owned) */
	struct dashboard dash;
	struct metrics metrics;
	struct metric *m_uptime;
	uv_signal_t sigint;  /* sigint.data = this */
	uv_signal_t sigterm; /* sigterm.data = this */
	char cert_path[1100];
	char key_path[1100];
	uint64_t started_ms;
	bool stopping;
	int exit_code;
};

/* Opens the data dir, prepares TLS material and starts every listener.
 * On failure returns -1 with the reason in `err`; the node is left closed. */
int node_start(struct node *n, const struct node_config *cfg, char *err,
               size_t errlen);

/* Prints the endpoints banner to `fd`. */
void node_print_endpoints(const struct node *n, int fd);

/* Runs the loop until the node has stopped; returns the exit code. */
int node_run(struct node *n);

/* Begins a graceful drain: listeners close, in-flight work finishes, then
 * node_run() returns. Safe to call more than once. */
void node_stop(struct node *n);

#endif
