/* Admin HTTP server on libmicrohttpd, driven by libuv; see admin_http.h. */
#include "node/admin/admin_http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Per-connection upload state (MHD's con_cls). */
struct upload {
	char *buf;
	size_t len;
	bool too_big;
	bool suspended;
	struct admin_deferred *d; /* when the answer is deferred */
	struct admin_reply ready; /* deferred answer, sent on resumption */
	bool has_ready;
	uint64_t start_ns; /* arrival, for the request time */
};

struct admin_deferred {
	struct admin_http *a; /* NULL once detached (client or server gone) */
	struct MHD_Connection *conn;
	struct upload *up;
	struct admin_deferred *prev, *next; /* in a->deferred */
};

static void schedule(struct admin_http *a);

static void on_timer(uv_timer_t *t)
{
	struct admin_http *a = t->data;
	MHD_run(a->mhd);
	schedule(a);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct admin_http *a = p->data;
	(void)status;
	(void)events;
	MHD_run(a->mhd);
	schedule(a);
}

/* Re-arms the timer from MHD's next timeout. */
static void schedule(struct admin_http *a)
{
	MHD_UNSIGNED_LONG_LONG ms = 0;
	if (MHD_get_timeout(a->mhd, &ms) == MHD_YES) {
		uv_timer_start(&a->timer, on_timer, ms, 0);
	} else {
		uv_timer_stop(&a->timer);
	}
}

int admin_reply_json(struct admin_reply *reply, unsigned status,
                     const char *json)
{
	size_t n = strlen(json);
	reply->status = status;
	reply->content_type = "application/json";
	reply->body = malloc(n + 1);
	if (reply->body == NULL) {
		return -1;
	}
	memcpy(reply->body, json, n + 1);
	reply->body_len = n;
	return 0;
}

const char *admin_request_arg(const struct admin_request *req, const char *key)
{
	if (req->conn == NULL) {
		return NULL;
	}
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND,
	                                   key);
}

const char *admin_request_header(const struct admin_request *req,
                                 const char *name)
{
	if (req->conn == NULL) {
		return NULL;
	}
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

static const struct admin_route *find_route(struct admin_http *a,
                                            const char *method,
                                            const char *path, bool *path_known)
{
	*path_known = false;
	for (unsigned i = a->n_routes; i-- > 0;) {
		const struct admin_route *r = &a->routes[i];
		bool match = r->prefix
		                 ? strncmp(path, r->path, strlen(r->path)) == 0
		                 : strcmp(path, r->path) == 0;
		if (!match) {
			continue;
		}
		*path_known = true;
		if (strcmp(r->method, method) == 0) {
			return r;
		}
	}
	return NULL;
}

static enum MHD_Result send_reply(struct admin_http *a,
                                  struct MHD_Connection *conn,
                                  struct upload *up, struct admin_reply *reply)
{
	a->n_requests++;
	a->busy_us += (uv_hrtime() - up->start_ns) / 1000;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	    reply->body_len, reply->body, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(reply->body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type",
	                        reply->content_type ? reply->content_type
	                                            : "application/json");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, reply->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void deferred_unlink(struct admin_deferred *d)
{
	struct admin_http *a = d->a;
	if (d->prev != NULL) {
		d->prev->next = d->next;
	} else {
		a->deferred = d->next;
	}
	if (d->next != NULL) {
		d->next->prev = d->prev;
	}
	d->prev = d->next = NULL;
	d->a = NULL;
	d->up->d = NULL;
	d->up = NULL;
}

struct admin_deferred *admin_http_defer(const struct admin_request *req)
{
	struct admin_http *a = req->server;
	struct upload *up = req->upload;
	struct admin_deferred *d;
	if (a == NULL || up == NULL || a->closing) {
		return NULL;
	}
	d = calloc(1, sizeof *d);
	if (d == NULL) {
		return NULL;
	}
	d->a = a;
	d->conn = req->conn;
	d->up = up;
	d->next = a->deferred;
	if (a->deferred != NULL) {
		a->deferred->prev = d;
	}
	a->deferred = d;
	up->d = d;
	return d;
}

/* Hands `reply` to the suspended connection and wakes it. */
static void deliver(struct admin_deferred *d, struct admin_reply *reply)
{
	struct admin_http *a = d->a;
	struct upload *up = d->up;
	struct MHD_Connection *conn = d->conn;
	bool suspended = up->suspended;

	up->ready = *reply;
	up->has_ready = true;
	up->suspended = false;
	deferred_unlink(d);
	if (suspended) {
		MHD_resume_connection(conn);
		uv_timer_start(&a->timer, on_timer, 0, 0);
	}
}

void admin_http_finish(struct admin_deferred *d, struct admin_reply *reply)
{
	if (d->a == NULL) {
		free(reply->body);
	} else {
		deliver(d, reply);
	}
	free(d);
}

/* Everything under /v1 needs the token; /healthz, /readyz, /metrics and /
 * do not. */
static bool needs_token(const char *url)
{
	return strncmp(url, "/v1/", 4) == 0 || strcmp(url, "/v1") == 0;
}

/* Constant time in the presented value's bytes; its length may leak. */
static bool token_ok(const struct admin_http *a, const char *hdr)
{
	static const char bearer[] = "Bearer ";
	size_t n;
	unsigned char d;
	if (hdr == NULL || strncasecmp(hdr, bearer, sizeof bearer - 1) != 0) {
		return false;
	}
	hdr += sizeof bearer - 1;
	n = strlen(hdr);
	d = n != a->token_len;
	for (size_t i = 0; i < n; i++) {
		d |= (unsigned char)(hdr[i] ^ a->token[i % a->token_len]);
	}
	return d == 0;
}

int admin_http_set_token(struct admin_http *a, const char *token, size_t len)
{
	if (len == 0 || len > ADMIN_TOKEN_MAX) {
		return -1;
	}
	memcpy(a->token, token, len);
	a->token[len] = '\0';
	a->token_len = len;
	return 0;
}

int admin_token_file_read(const char *path, char *buf, size_t cap, char *err,
                          size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t n, s = 0;
	if (f == NULL) {
		snprintf(err, errlen, "admin-token-file %s: %s", path,
		         strerror(errno));
		return -1;
	}
	if (fgets(buf, (int)cap, f) == NULL) {
		buf[0] = '\0';
	}
	fclose(f);
	n = strlen(buf);
	while (n > 0 && isspace((unsigned char)buf[n - 1])) {
		buf[--n] = '\0';
	}
	while (s < n && isspace((unsigned char)buf[s])) {
		s++;
	}
	memmove(buf, buf + s, n - s + 1);
	n -= s;
	if (n == 0 || n > ADMIN_TOKEN_MAX || n + 1 >= cap) {
		snprintf(err, errlen,
		         "admin-token-file %s: the first line must hold a "
		         "token of 1 to %d bytes",
		         path, ADMIN_TOKEN_MAX);
		return -1;
	}
	return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
	struct admin_http *a = cls;
	struct upload *up = *con_cls;
	struct admin_reply reply = {0};
	(void)version;

	if (up == NULL) {
		up = calloc(1, sizeof *up);
		if (up == NULL) {
			return MHD_NO;
		}
		up->start_ns = uv_hrtime();
		*con_cls = up;
		return MHD_YES;
	}
	if (up->has_ready) {
		/* Resumed after a deferred answer. */
		up->has_ready = false;
		return send_reply(a, conn, up, &up->ready);
	}
	if (*upload_size != 0) {
		if (!up->too_big && up->len + *upload_size <= ADMIN_MAX_BODY) {
			char *nb = realloc(up->buf, up->len + *upload_size + 1);
			if (nb == NULL) {
				return MHD_NO;
			}
			up->buf = nb;
			memcpy(up->buf + up->len, upload_data, *upload_size);
			up->len += *upload_size;
			up->buf[up->len] = '\0';
		} else {
			up->too_big = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}

	if (up->too_big) {
		admin_reply_json(
		    &reply, 413,
		    "{\"error\":\"request body larger than 1 MiB\"}");
		return send_reply(a, conn, up, &reply);
	}
	if (a->token_len > 0 && needs_token(url) &&
	    !token_ok(a, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                             "Authorization"))) {
		admin_reply_json(&reply, 401,
		                 "{\"error\":\"this admin API needs a bearer "
		                 "token (Authorization: Bearer ...; lodectl: "
		                 "--admin-token-file or "
		                 "LODESTONE_ADMIN_TOKEN)\"}");
		return send_reply(a, conn, up, &reply);
	}
	bool known;
	const struct admin_route *r = find_route(a, method, url, &known);
	if (r == NULL) {
		char msg[256];
		snprintf(msg, sizeof msg, "{\"error\":\"%s\"}",
		         known ? "method not allowed" : "not found");
		admin_reply_json(&reply, known ? 405 : 404, msg);
		return send_reply(a, conn, up, &reply);
	}
	struct admin_request req = {
	    .method = method,
	    .path = url,
	    .body = up->buf ? up->buf : "",
	    .body_len = up->len,
	    .conn = conn,
	    .server = a,
	    .upload = up,
	    .operator= a->token_len> 0 && needs_token(url),
	};
	int rv = r->cb(r->data, &req, &reply);
	if (rv == 0 && up->d != NULL && reply.status == 0) {
		/* Deferred and not yet answered. */
		up->suspended = true;
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	if (up->has_ready) {
		/* Deferred and answered within the handler. */
		up->has_ready = false;
		free(reply.body);
		return send_reply(a, conn, up, &up->ready);
	}
	if (rv != 0 || reply.status == 0) {
		free(reply.body);
		reply = (struct admin_reply){0};
		admin_reply_json(&reply, 500,
		                 "{\"error\":\"internal error in handler\"}");
	}
	return send_reply(a, conn, up, &reply);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct upload *up = *con_cls;
	(void)cls;
	(void)conn;
	(void)toe;
	if (up != NULL) {
		if (up->d != NULL) {
			deferred_unlink(
			    up->d); /* its finish drops the answer */
		}
		if (up->has_ready) {
			free(up->ready.body);
		}
		free(up->buf);
		free(up);
		*con_cls = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct admin_http *a = cls;
	log_vemit(a->log, LOG_WARN, "admin", fmt, ap);
}

int admin_http_start(struct admin_http *a, uv_loop_t *loop,
                     const struct log *log, const char *host, unsigned port,
                     char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL;
	char portstr[16];
	memset(a, 0, sizeof *a);
	a->loop = loop;
	a->log = log;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(portstr, sizeof portstr, "%u", port);
	int gai = getaddrinfo(host, portstr, &hints, &res);
	if (gai != 0) {
		snprintf(err, errlen, "admin HTTP: cannot resolve '%s': %s",
		         host, gai_strerror(gai));
		return -1;
	}
	unsigned flags =
	    MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
	if (res->ai_family == AF_INET6) {
		flags |= MHD_USE_IPv6;
	}
	a->mhd = MHD_start_daemon(
	    flags, (uint16_t)port, NULL, NULL, on_request, a,
	    /* The logger first, or MHD logs the options before it itself. */
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, a, MHD_OPTION_SOCK_ADDR,
	    res->ai_addr, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
	    MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_CONNECTION_TIMEOUT,
	    30u, MHD_OPTION_END);
	freeaddrinfo(res);
	if (a->mhd == NULL) {
		snprintf(err, errlen,
		         "admin HTTP: cannot listen on %s:%u (address in use "
		         "or not local?)",
		         host, port);
		return -1;
	}
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL || uv_poll_init(loop, &a->poll, info->epoll_fd) != 0) {
		MHD_stop_daemon(a->mhd);
		snprintf(err, errlen, "admin HTTP: cannot watch epoll fd");
		return -1;
	}
	uv_timer_init(loop, &a->timer);
	a->poll.data = a;
	a->timer.data = a;
	a->open_handles = 2;
	uv_poll_start(&a->poll, UV_READABLE, on_poll);
	schedule(a);
	return 0;
}

int admin_http_call(struct admin_http *a, const char *path,
                    struct admin_reply *reply)
{
	bool known;
	const struct admin_route *r = find_route(a, "GET", path, &known);
	struct admin_request req = {
	    .method = "GET",
	    .path = path,
	    .body = "",
	};
	memset(reply, 0, sizeof *reply);
	if (r == NULL) {
		return -1;
	}
	if (r->cb(r->data, &req, reply) != 0 || reply->status == 0) {
		free(reply->body);
		memset(reply, 0, sizeof *reply);
		return -1;
	}
	return 0;
}

int admin_http_route(struct admin_http *a, const char *method, const char *path,
                     bool prefix, admin_handler_cb cb, void *data)
{
	if (a->n_routes == ADMIN_MAX_ROUTES) {
		return -1;
	}
	a->routes[a->n_routes++] = (struct admin_route){.method = method,
	                                                .path = path,
	                                                .prefix = prefix,
	                                                .cb = cb,
	                                                .data = data};
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct admin_http *a = h->data;
	if (--a->open_handles == 0) {
		/* The poll handle no longer watches the epoll fd: safe to let
		 * MHD close it. */
		MHD_stop_daemon(a->mhd);
		a->mhd = NULL;
		if (a->close_cb != NULL) {
			a->close_cb(a->close_data);
		}
	}
}

void admin_http_close(struct admin_http *a, admin_close_cb cb, void *data)
{
	a->close_cb = cb;
	a->close_data = data;
	a->closing = true;
	/* MHD cannot stop with suspended connections: answer them now. */
	while (a->deferred != NULL) {
		struct admin_reply r = {0};
		admin_reply_json(&r, 503,
		                 "{\"error\":\"the node is shutting down; the "
		                 "operation may still complete\"}");
		deliver(a->deferred, &r);
	}
	if (a->mhd != NULL) {
		MHD_run(a->mhd);
	}
	if (a->open_handles == 0) {
		if (cb != NULL) {
			cb(data);
		}
		return;
	}
	uv_close((uv_handle_t *)&a->poll, on_handle_closed);
	uv_close((uv_handle_t *)&a->timer, on_handle_closed);
}
