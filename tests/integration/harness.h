/* Integration-test harness: starts real `lodestone` processes on free
 * loopback ports with temporary data directories, and always reaps them
 * (children die with the test via PR_SET_PDEATHSIG, and an atexit hook
 * kills any still running). */
#ifndef LS_TESTS_HARNESS_H
#define LS_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HARNESS_MAX_NODES 7
#define HARNESS_MAX_ARGS 32

struct harness_node {
	unsigned id; /* node id, 1-based */
	pid_t pid;   /* 0 when not running */
	char data_dir[512];
	char log_path[512];
	uint16_t felix, fsnp, fsnp_tls, internal, admin;
	uint16_t resp; /* RESP port, served with harness_cluster.resp */
	uint16_t join; /* internal port of the member it joins through
	                  (0: bootstrapped with --peers) */
};

#define HARNESS_MAX_SECRETS 16

struct harness_cluster {
	unsigned n;
	char root[256]; /* temp dir holding every node's data and log */
	struct harness_node nodes[HARNESS_MAX_NODES];
	/* Extra flags for every node; "{id}" in one stands for the node's
	 * id (the first occurrence). */
	const char *extra[HARNESS_MAX_ARGS];
	unsigned n_extra;
	/* Serve RESP on every node (--resp on a free port): started by
	 * harness_cluster_start_resp. */
	bool resp;
	/* Secrets the test gave the nodes (harness_secret), searched for in
	 * every node's log at harness_cluster_stop. */
	char secrets[HARNESS_MAX_SECRETS][1024]; /* a JWT fits */
	unsigned n_secrets;
};

/* Path of the lodestone binary under test ($LS_LODESTONE). */
const char *harness_binary(void);

/* Registers a secret (a password, a token) that no node may log: at
 * harness_cluster_stop, a log holding it fails the test program (exit 1,
 * naming the log, not the secret). Call after harness_cluster_start. */
void harness_secret(struct harness_cluster *c, const char *secret);

/* Picks a port free for both TCP and UDP on 127.0.0.1. */
uint16_t harness_free_port(void);

/* Prepares `n` nodes (ports, dirs) and starts them; with `wait` it waits
 * until each answers /healthz. `extra` is NULL-terminated or NULL. */
int harness_cluster_start(struct harness_cluster *c, unsigned n,
                          const char *const extra[], bool wait);

/* As harness_cluster_start, every node also serving RESP (--resp). */
int harness_cluster_start_resp(struct harness_cluster *c, unsigned n,
                               const char *const extra[], bool wait);

/* Starts (or restarts) node i (0-based) with its usual flags. */
int harness_node_start(struct harness_cluster *c, unsigned i);

/* Adds node c->n (id c->n + 1) with an empty data directory, started with
 * --join through node `via`'s internal port instead of --peers; returns its
 * index or -1. */
int harness_node_join(struct harness_cluster *c, unsigned via);

/* Sends `sig` to node i; for SIGKILL/SIGTERM also waits for it to exit and
 * returns its wait status in *status (may be NULL). */
int harness_node_signal(struct harness_cluster *c, unsigned i, int sig,
                        int *status);

/* Polls GET /healthz on node i until 200 or timeout. */
int harness_node_wait_healthy(struct harness_cluster *c, unsigned i,
                              unsigned timeout_ms);

/* Stops every node (SIGTERM, then SIGKILL after 10 s) and removes the temp
 * dir unless $LS_KEEP_TMP is set. */
void harness_cluster_stop(struct harness_cluster *c);

/* Plain HTTP/1.0 request to 127.0.0.1:port. `body_out` receives the
 * response body (NUL-terminated, truncated to cap). */
int harness_http(uint16_t port, const char *method, const char *path,
                 const char *body, int *status, char *body_out, size_t cap);

/* Runs argv synchronously with stdout+stderr captured into `out`; returns
 * the exit status (or -1). */
int harness_run(const char *const argv[], char *out, size_t cap);

/* Monotonic milliseconds, and a sleep of `ms`. */
uint64_t harness_mono_ms(void);
void harness_nap(unsigned ms);

/* Prints the last lines of node i's log to stderr (for failures). */
void harness_node_dump_log(struct harness_cluster *c, unsigned i);

#endif
