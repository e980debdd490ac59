/* The admin HTTP listener (health, metrics, cluster view, admin API).
 *
 * libmicrohttpd runs in external-epoll mode: its epoll fd is watched by a
 * uv_poll on the node's loop and its timeouts by a uv_timer, so every handler
 * runs on the reactor thread and may touch node state without locks.
 * Modules register routes; a handler fills a `struct admin_reply` whose body
 * (malloc'd) is owned by the admin server once the handler returns. A
 * handler whose answer needs asynchronous work (a Raft commit) defers the
 * request instead: the connection is suspended until the module finishes
 * it, so the client gets the real outcome rather than "accepted". */
#ifndef LS_NODE_ADMIN_HTTP_H
#define LS_NODE_ADMIN_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/log.h"

#define ADMIN_MAX_ROUTES 64
#define ADMIN_MAX_BODY (1u << 20)

struct admin_request {
	const char *method; /* "GET", "POST", ... */
	const char *path;   /* without the query string */
	const char *body;   /* request body, NUL-terminated; "" when none */
	size_t body_len;
	void *conn;                /* for admin_request_arg() */
	struct admin_http *server; /* for admin_http_defer() */
	void *upload;
	/* The request carried the admin API's bearer token
	 * (admin_http_set_token): an operator, whom the rooms' own checks
	 * (Felix JWT scope changes) let through. */
	bool operator;
};

struct admin_reply {
	unsigned status;
	const char *content_type; /* static string */
	char *body; /* malloc'd; owned by the server after return */
	size_t body_len;
};

/* Handles one request; returns 0 after filling `reply`. */
typedef int (*admin_handler_cb)(void *data, const struct admin_request *req,
                                struct admin_reply *reply);
typedef void (*admin_close_cb)(void *data);

/* A request answered later; owned by the admin server until
 * admin_http_finish() hands it back. */
struct admin_deferred;

struct admin_route {
	const char *method;
	const char *path;
	bool prefix; /* match every path starting with `path` */
	admin_handler_cb cb;
	void *data;
};

#define ADMIN_TOKEN_MAX 4096

struct admin_http {
	uv_loop_t *loop;
	const struct log *log;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;   /* poll.data = this */
	uv_timer_t timer; /* timer.data = this */
	int open_handles;
	struct admin_route routes[ADMIN_MAX_ROUTES];
	unsigned n_routes;
	admin_close_cb close_cb;
	void *close_data;
	struct admin_deferred *deferred; /* suspended requests */
	bool closing;
	/* The bearer token every /v1/... request needs ("" = none). */
	char token[ADMIN_TOKEN_MAX + 1];
	size_t token_len;
	uint64_t n_requests; /* answered, for the dashboard's history */
	uint64_t busy_us;    /* their summed time from arrival to answer */
};

/* Binds host:port and starts serving on `loop`. */
int admin_http_start(struct admin_http *a, uv_loop_t *loop,
                     const struct log *log, const char *host, unsigned port,
                     char *err, size_t errlen);

/* Requires `Authorization: Bearer TOKEN` on every /v1/... request from
 * now on (/healthz, /readyz, /metrics and / stay open); compared in
 * constant time. 0, or -1 when the token is empty or longer than
 * ADMIN_TOKEN_MAX. */
int admin_http_set_token(struct admin_http *a, const char *token, size_t len);

/* Reads a token file's first line (surrounding white space trimmed) into
 * buf. 0, or -1 with a message naming the file, never its contents. */
int admin_token_file_read(const char *path, char *buf, size_t cap, char *err,
                          size_t errlen);

/* Registers a route; later registrations of the same path win. */
int admin_http_route(struct admin_http *a, const char *method, const char *path,
                     bool prefix, admin_handler_cb cb, void *data);

/* Called from a handler: the request will be answered by
 * admin_http_finish() (exactly once, possibly from within the handler);
 * the handler then returns 0 leaving `reply` untouched. NULL when out of
 * memory. */
struct admin_deferred *admin_http_defer(const struct admin_request *req);

/* Answers a deferred request with `reply` (its body is taken over) and
 * frees `d`. Safe after the client went away or the server closed: the
 * answer is then dropped. */
void admin_http_finish(struct admin_deferred *d, struct admin_reply *reply);

/* Value of query argument `key`, or NULL. */
const char *admin_request_arg(const struct admin_request *req, const char *key);
/* Value of request header `name` (case-insensitive), or NULL. */
const char *admin_request_header(const struct admin_request *req,
                                 const char *name);

/* Fills `reply` with a copy of `json` and `status`. */
int admin_reply_json(struct admin_reply *reply, unsigned status,
                     const char *json);

/* Runs the GET route for `path` in-process, as if a client asked with no
 * query string and no headers: for handlers that answer at once (a
 * deferring handler gets NULL from admin_http_defer()). Returns 0 with
 * `reply` filled (its body is the caller's), or -1 when no route
 * matches or the handler failed. */
int admin_http_call(struct admin_http *a, const char *path,
                    struct admin_reply *reply);

/* Stops listening; `cb` runs once every handle is closed. */
void admin_http_close(struct admin_http *a, admin_close_cb cb, void *data);

#endif
