/* What the RESP room's modules share:
 *   resp_server.c  listeners, connections, reading, ordered replies,
 *                  buffer limits, TLS
 *   resp_cmd.c     the commands: connection commands, INFO, COMMAND,
 *                  CLUSTER, and KV commands planned by the FSNP command
 *                  layer, run on the groups and answered in RESP2/RESP3
 *   resp_multi.c   transactions: MULTI's queue, WATCH's stamps, EXEC as
 *                  one replicated store command, DISCARD, UNWATCH */
#ifndef LS_NODE_RESP_INTERNAL_H
#define LS_NODE_RESP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/tls.h"
#include "node/auth/auth.h"
#include "node/fsnp/fsnp_cmd.h"
#include "node/resp/resp.h"
#include "wire/buf.h"
#include "wire/resp_parse.h"

/* Commands of one connection executing at once (pipelining); reading
 * pauses above it. */
#define RESP_MAX_INFLIGHT 1024
/* Inline commands and count/length lines, as Redis's 64 KiB. */
#define RESP_MAX_INLINE 65536
#define RESP_NAME_MAX 128
/* Requests kept for reuse (per server), and the largest reply buffer
 * kept with one. */
#define RESP_MAX_POOL 4096
#define RESP_KEEP_BYTES 65536

struct resp_server {
	uv_loop_t *loop;
	struct shards *shards;
	const struct log *log;
	struct resp_server_config cfg; /* strings copied below */
	char host[64], tls_host[64];
	uv_tcp_t listener, tls_listener;
	bool listening, tls_listening;
	struct tls_ctx *tls_ctx;
	uint16_t port, tls_port;
	struct resp_conn *conns;
	size_t n_conns;
	/* Connections with replies ready, sent together once per loop turn
	 * (uv_check): one write for every reply a turn finished. */
	uv_check_t flush;
	/* Active while connections are dirty: a reply finished before the
	 * loop polls (a commit delivered from a prepare handle) must not
	 * wait for the poll's timeout to go out. */
	uv_idle_t wake;
	struct resp_conn *dirty;
	uint64_t next_id;
	/* Finished requests kept for reuse, each with its reply buffer's
	 * storage: no allocation per pipelined command. */
	struct resp_req *req_pool;
	unsigned n_req_pool;
	/* The replies one connection's flush sends, reused. */
	struct wbuf out;
	unsigned handles; /* open listener handles */
	unsigned ops;     /* store operations in flight */
	bool closing;
	resp_server_close_cb close_cb;
	void *close_data;
	uint64_t started_ms;
	/* INFO stats */
	uint64_t conns_total, conns_rejected, commands, output_kills,
	    query_kills;
};

struct resp_req;
struct resp_multi;
struct resp_watch;

struct resp_conn {
	struct resp_server *srv;
	uv_tcp_t tcp; /* tcp.data = this */
	struct resp_conn *prev, *next;
	struct tls_session *tls; /* NULL on the plaintext listener */
	uint64_t id;
	char peer[64];
	char laddr[64];
	bool remote;
	char name[RESP_NAME_MAX + 1];
	char user[ACL_NAME_MAX + 1]; /* "" before AUTH */
	bool authed;
	int proto; /* 2 or 3 */
	/* query buffer */
	uint8_t *q;
	size_t qlen, qcap;
	struct resp_arg *argv;
	uint32_t argv_cap;
	uint8_t *scratch;
	/* commands in order; the head answers first */
	struct resp_req *head, *tail;
	unsigned inflight;
	size_t out_bytes; /* written to libuv, not yet sent */
	bool denied;      /* protected mode: refuse the first command */
	bool processing;  /* conn_process on the stack */
	bool dirty;       /* on the server's dirty list */
	struct resp_conn *dnext;
	bool reading;
	bool quit; /* close once the replies are out */
	/* A WATCH waits for its stamps: the commands after it start once
	 * it has them (resp_conn_unhold), so they run after it. */
	bool held;
	bool closed; /* uv_close called */
	bool handle_gone;
	uint64_t created_ms, last_ms;
	char last_cmd[32];
	/* Transactions (resp_multi.c): the queue since MULTI (NULL outside
	 * one) and the keys watched since the last EXEC, DISCARD or UNWATCH
	 * (NULL when none). */
	struct resp_multi *multi;
	struct resp_watch *watch;
};

struct resp_op {
	struct resp_req *req;
	uint32_t part;
};

struct resp_req {
	struct resp_conn *c;
	struct resp_req *next;
	bool done;
	struct wbuf out;
	struct fsnp_plan plan;
	bool planned;
	int proto;
	uint8_t op;    /* store op */
	uint8_t flags; /* the command's SET / ZRANGE flags */
	uint8_t kind;  /* the command's kind (KEYINFO: TYPE, TTL, PTTL) */
	bool counted;  /* LPOP/RPOP with a count */
	bool setnx;    /* SETNX: OK / nil answer 1 / 0 */
	unsigned pending;
	struct resp_op one;
	struct resp_op *ops;
	int *status;   /* per part */
	uint8_t **res; /* per part (owned) */
	size_t *res_len;
	/* Transactions (resp_multi.c). `queued`: a command after MULTI,
	 * planned (or answered) into `out` but never run or sent itself.
	 * EXEC owns the queue it runs; EXEC and WATCH hold a reference to
	 * the watch set, WATCH its `watch_n` keys from `watch_first` on. */
	bool queued;
	struct resp_multi *multi;
	struct resp_watch *watch;
	uint32_t watch_first, watch_n;
};

/* resp_server.c */
uint64_t resp_now_ms(const struct resp_server *s);
/* A finished command: its reply may go out (in order). */
void resp_req_done(struct resp_req *r);
/* Starts the commands that waited behind a WATCH. */
void resp_conn_unhold(struct resp_conn *c);

/* Frees a request whose command is done with it (its plan and results
 * already freed), or keeps it for the next one. */
void resp_req_recycle(struct resp_req *r);
/* Closes a connection now, logging why. */
void resp_conn_kill(struct resp_conn *c, const char *why);
/* CLIENT LIST's line of one connection. */
void resp_conn_describe(const struct resp_conn *c, struct wbuf *out);

/* resp_cmd.c */
void resp_cmd_run(struct resp_req *r, const struct resp_arg *argv,
                  uint32_t argc);
void resp_req_release(struct resp_req *r);
/* A queued command's result from the store (a whole store result),
 * written to its `out` as its own reply would have been. */
void resp_cmd_reply_result(struct resp_req *q, const uint8_t *p, size_t len);
/* The error a failed store operation answers (TRYAGAIN when a retry may
 * succeed). */
void resp_cmd_shards_error(struct resp_req *r, int status);

/* resp_multi.c */
void resp_multi_begin(struct resp_req *r);
/* A command after MULTI (`q`, a queued request of its own, already run
 * through resp_cmd_run): queues it and answers r with +QUEUED, or with
 * the error that aborts the transaction. `keyed`: it names keys, all in
 * `slot` unless `cross`. */
void resp_multi_queue(struct resp_req *r, struct resp_req *q, bool keyed,
                      unsigned slot, bool cross);
/* Marks the transaction aborted (EXEC answers EXECABORT); r has its
 * error already. */
void resp_multi_abort(struct resp_req *r);
void resp_multi_exec(struct resp_req *r);
void resp_multi_discard(struct resp_req *r);
void resp_multi_watch(struct resp_req *r, const struct resp_arg *argv,
                      uint32_t argc);
void resp_multi_unwatch(struct resp_req *r);
/* CLIENT LIST's multi=: the commands queued since MULTI, -1 outside. */
long resp_multi_queued(const struct resp_conn *c);
/* Frees what a request or a connection holds of transactions. */
void resp_multi_req_release(struct resp_req *r);
void resp_multi_conn_free(struct resp_conn *c);

#endif
