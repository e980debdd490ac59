/* Fault-testing hosts: N network namespaces ("hosts"), each running one
 * lodestone with its own address, joined by veth pairs to a bridge that lives
 * in a namespace of its own, plus a client namespace on the same bridge.
 * Nothing is created in the root namespace.
 *
 * Every name a run creates starts with its tag `lsj<run>-` (run id 1..254):
 * namespaces lsj<run>-br (bridge), lsj<run>-n<i> (node i), lsj<run>-c
 * (client); the subnet is <prefix>.<run>.0/24, node i at .i, the client at
 * .100. While a run lives it holds an flock on HOSTS_LOCK_DIR/lsj<run>.lock,
 * so the leftovers of a crashed run (lock free) are told apart from a live
 * parallel run (lock held) and removed by the next run or `jepsen/run
 * cleanup`. Node processes die with the harness (PR_SET_PDEATHSIG).
 *
 * A run may have spare hosts beyond its nodes (namespace, address and
 * directory made, nothing started): a membership nemesis starts them with
 * --join, and marks the members it removes or replaces as gone.
 *
 * A struct hosts owns its namespaces, its node processes (children of the
 * calling process) and the lock; hosts_destroy() releases all of them.
 * Use it from one thread, the one that lives as long as the run: the
 * namespace switches are per thread, and PR_SET_PDEATHSIG fires when the
 * thread that started a node exits. */
#ifndef LS_JEPSEN_HOSTS_H
#define LS_JEPSEN_HOSTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define HOSTS_MIN_NODES 3
#define HOSTS_MAX_NODES 9
#define HOSTS_DEFAULT_NODES 5
#define HOSTS_MAX_RUN_ID 254
#define HOSTS_MAX_EXTRA 16
#define HOSTS_NAME_LEN 16 /* an interface name fits (IFNAMSIZ) */
#define HOSTS_ADDR_LEN 16
#define HOSTS_PATH_LEN 512
#define HOSTS_ERR_LEN 512

#define HOSTS_LOCK_DIR "/run/lodestone-jepsen"
#define HOSTS_DEFAULT_PREFIX "10.77"
#define HOSTS_CLIENT_HOST 100 /* last octet of the client's address */

/* Every node listens on the same ports of its own address. */
#define HOSTS_PORT_FELIX 5000
#define HOSTS_PORT_FSNP 6388
#define HOSTS_PORT_FSNP_TLS 6389
#define HOSTS_PORT_INTERNAL 7000
#define HOSTS_PORT_ADMIN 8080

struct hosts_config {
	unsigned nodes;         /* HOSTS_MIN_NODES..HOSTS_MAX_NODES */
	unsigned run_id;        /* 1..254, or 0: the first free one */
	const char *net_prefix; /* first two octets; NULL: "10.77" */
	const char *binary;     /* the lodestone binary */
	const char *dir;        /* run directory, created if missing */
	/* Start the nodes under libfaketime so their clocks can be skewed;
	 * refused for an AddressSanitizer binary. */
	bool faketime;
	const char *faketime_lib; /* NULL: hosts_faketime_lib() */
	const char *iptables;     /* NULL: "iptables", else "iptables-legacy" */
	const char *lock_dir;     /* NULL: HOSTS_LOCK_DIR */
	/* Extra flags for every node, NULL-terminated, may be NULL; the
	 * strings are borrowed and must outlive the hosts. */
	const char *const *extra_args;
	/* Pin every node to CPU `cpu` (sched_setaffinity). */
	bool pin_cpu;
	unsigned cpu;
	/* Spare hosts for membership changes: namespaces, addresses and
	 * directories of nodes nodes+1 .. nodes+spares, made now and started
	 * later with --join (hosts_node_join). nodes + spares <=
	 * HOSTS_MAX_NODES. */
	unsigned spares;
};

/* Where a host stands in the cluster's membership. */
enum hosts_member {
	HOSTS_MEMBER, /* a bootstrap node, or a spare that joined */
	HOSTS_SPARE,  /* prepared, never started */
	HOSTS_GONE,   /* removed or replaced: never started again */
};

struct hosts_node {
	unsigned id; /* 1-based */
	char ns[HOSTS_NAME_LEN];
	char addr[HOSTS_ADDR_LEN];
	char dir[HOSTS_PATH_LEN]; /* n<i>/: its working directory (cores) */
	char data_dir[HOSTS_PATH_LEN];
	char log_path[HOSTS_PATH_LEN];
	char faketime_path[HOSTS_PATH_LEN]; /* its FAKETIME_TIMESTAMP_FILE */
	pid_t pid;                          /* 0: not running */
	bool paused;                        /* SIGSTOPped */
	int64_t skew_ms;                    /* offset in its timestamp file */
	int last_status;                    /* wait status of its last exit */
	unsigned starts;
	unsigned unexpected_exits;      /* exits the harness did not cause */
	char core_path[HOSTS_PATH_LEN]; /* core of its last death, or "" */
	enum hosts_member member;
	/* The member's internal address it joined through ("" for a
	 * bootstrap node, started with --peers). */
	char join[HOSTS_ADDR_LEN + 8];
	/* Being removed from the cluster: an exit with status 0 whose log
	 * says so (crashlog_removed_exit) is its own, not a crash; it then
	 * becomes HOSTS_GONE. */
	bool leaving;
	bool removed_exit; /* it exited so */
};

struct hosts {
	unsigned n;         /* hosts (nodes and spares), ids 1..n */
	unsigned bootstrap; /* nodes 1..bootstrap start with --peers */
	unsigned run_id;
	char tag[HOSTS_NAME_LEN]; /* "lsj<run>" */
	char bridge_ns[HOSTS_NAME_LEN];
	char client_ns[HOSTS_NAME_LEN];
	char client_addr[HOSTS_ADDR_LEN];
	char subnet[HOSTS_ADDR_LEN + 4]; /* "10.77.<run>.0/24" */
	char dir[HOSTS_PATH_LEN];
	char binary[HOSTS_PATH_LEN];
	char faketime_lib[HOSTS_PATH_LEN];
	char lock_path[HOSTS_PATH_LEN];
	char iptables[32];         /* iptables command that works here */
	char iptables_restore[48]; /* its -restore companion */
	bool faketime;
	const char *extra_args[HOSTS_MAX_EXTRA + 1];
	bool pin_cpu; /* nodes run on CPU `cpu` only */
	unsigned cpu;
	int lock_fd; /* valid while locked */
	bool locked;
	bool created[HOSTS_MAX_NODES + 2]; /* namespaces made: br, nodes, c */
	int64_t t0_ns;                     /* CLOCK_MONOTONIC origin */
	struct hosts_node nodes[HOSTS_MAX_NODES]; /* nodes[i] is id i + 1 */
	/* Bit (1u << id) per node the clients may use: running members
	 * that are not leaving. Written by the harness's thread, read by
	 * the workload's (jepsen/workload_driver.h). */
	atomic_uint endpoints;
	char err[HOSTS_ERR_LEN];
};

/* Removes the stale leftovers of earlier runs, takes a run id, creates the
 * namespaces, bridge, links and addresses, the run directory and its
 * hosts.txt. Starts no node. On error h->err says why and nothing is left. */
int hosts_create(struct hosts *h, const struct hosts_config *cfg);

/* Kills every node, deletes every namespace of the run, releases the run
 * id. Safe on a zeroed, failed or destroyed struct. */
void hosts_destroy(struct hosts *h);

/* The last error message. */
const char *hosts_error(const struct hosts *h);

/* Node `id` (1-based), or NULL. */
struct hosts_node *hosts_node(struct hosts *h, unsigned id);

/* Starts (or restarts) node id in its namespace, appending to its log. */
int hosts_node_start(struct hosts *h, unsigned id);

/* Starts spare node id for the first time, with --join through member
 * `via`'s internal address, and makes it a member. */
int hosts_node_join(struct hosts *h, unsigned id, unsigned via);

/* Whether node id is a member that runs now. */
bool hosts_node_live(const struct hosts *h, unsigned id);

/* Starts every bootstrap node, then waits until each answers /healthz. */
int hosts_start_all(struct hosts *h, unsigned timeout_ms);

/* Polls node id's GET /healthz from inside its own namespace (so
 * partitions do not matter) until it answers 200, or times out. */
int hosts_node_wait_healthy(struct hosts *h, unsigned id, unsigned timeout_ms);

/* SIGKILL (reaped: the node is down when this returns), SIGSTOP, SIGCONT
 * or any other signal to node id. */
int hosts_node_signal(struct hosts *h, unsigned id, int sig);

/* Sets node id's clock offset (its timestamp file; read on every time call
 * of a process under libfaketime, so it takes effect at once). */
int hosts_node_set_skew(struct hosts *h, unsigned id, int64_t skew_ms);

/* Runs argv in node id's namespace with its faketime environment (used to
 * check what a process there sees as the time). */
int hosts_node_run(struct hosts *h, unsigned id, const char *const argv[],
                   char *out, size_t cap, int *exit_status);

/* Reaps nodes that exited without the harness killing them; returns how
 * many did since the last call (each counted in unexpected_exits). A
 * leaving node's exit 0 after its log said it was removed is not counted:
 * it becomes HOSTS_GONE with removed_exit set. */
unsigned hosts_reap(struct hosts *h);

/* Monotonic nanoseconds since the run's origin (hosts_create, or the last
 * hosts_reset_clock): the time base of the nemesis timeline and of the
 * history. */
int64_t hosts_now_ns(const struct hosts *h);
void hosts_reset_clock(struct hosts *h);

/* --- Namespaces (need root) --- */

/* Moves the calling thread into namespace `ns` (a name under /run/netns);
 * *saved receives the old one for hosts_netns_leave. */
int hosts_netns_enter(const char *ns, int *saved, char *err, size_t cap);
int hosts_netns_leave(int saved);

/* Runs fn(arg) with the calling thread in namespace ns and returns its
 * result (or -errno when ns cannot be entered). Sockets fn creates stay in
 * ns after the call. */
typedef int (*hosts_ns_fn)(void *arg);
int hosts_netns_call(const char *ns, hosts_ns_fn fn, void *arg);

/* A TCP socket created in namespace `ns` (NULL: the current one) and
 * connected to addr:port within timeout_ms; returns the fd or -errno
 * (-ETIMEDOUT when nothing answers, as behind a DROP rule). */
int hosts_tcp_connect(const char *ns, const char *addr, uint16_t port,
                      unsigned timeout_ms);

/* GET path over HTTP/1.0 from namespace ns; 0 with *status and the body
 * (NUL-terminated, truncated to cap) and, if date_out is not NULL, the
 * Date header as Unix seconds (0 when absent); -errno on failure. */
int hosts_http_get(const char *ns, const char *addr, uint16_t port,
                   const char *path, unsigned timeout_ms, int *status,
                   char *body, size_t cap, int64_t *date_out);

/* An HTTP/1.0 request from namespace ns: METHOD path with `body` (may be
 * NULL; sent as application/json). 0 with *status and the response body
 * (NUL-terminated, truncated to cap); -errno on failure. */
int hosts_http_request(const char *ns, const char *addr, uint16_t port,
                       const char *method, const char *path, const char *body,
                       unsigned timeout_ms, int *status, char *out, size_t cap);

/* Runs argv (PATH search) in namespace ns (NULL: the current one) with the
 * extra environment entries env (NULL-terminated, may be NULL), feeding it
 * `input` (may be NULL); stdout and stderr go to out (NUL-terminated,
 * truncated). Kills it after timeout_ms. Returns 0 when it ran (its wait
 * status in *exit_status), -errno when it could not. */
int hosts_run(const char *ns, const char *const argv[], const char *const env[],
              const char *input, char *out, size_t cap, unsigned timeout_ms,
              int *exit_status);

/* --- Leftovers --- */

/* Parses a name made by a run ("lsj12-n3", "lsj12"): 0 and *run_id, or
 * -EINVAL for any other name. */
int hosts_parse_tag(const char *name, unsigned *run_id);

/* Removes what runs left behind: for every lsj* namespace, the processes
 * in it, then the namespace; lsj* links of the root namespace. Lock files
 * stay (unlinking a lock file another process may be about to lock would
 * let two runs share an id).
 * With stale_only, runs whose lock is held (alive) are left alone. Prints
 * one line per removed object to `report` (may be NULL). */
int hosts_cleanup(const char *lock_dir, bool stale_only, FILE *report,
                  unsigned *removed, char *err, size_t cap);

/* Lists what of run `run_id` (0: of any run) exists: namespaces,
 * processes in them, and lsj* links of the root namespace; one per line
 * in list (may be NULL). */
int hosts_leftovers(unsigned run_id, char *list, size_t cap, unsigned *count);

/* Whether the ELF file at path is built with AddressSanitizer. */
int hosts_binary_is_asan(const char *path, bool *asan);

/* Debian's libfaketime.so.1 for this machine's architecture (the first
 * that exists of the usual places), or its x86_64 path when none does. */
const char *hosts_faketime_lib(void);

/* Whether `binary` can run under libfaketime `lib` (NULL: the default):
 * 0, or an error with why in err (an ASan binary, no libfaketime). */
int hosts_check_faketime(const char *binary, const char *lib, char *err,
                         size_t cap);

#endif
