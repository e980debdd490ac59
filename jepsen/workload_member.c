/* Membership operations through the admin API; see workload_member.h. */
#include "jepsen/workload_member.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "jepsen/workload_cluster.h"

#define POLL_MS 250
#define HTTP_MS 2000
#define BODY_CAP 4096

__attribute__((format(printf, 3, 4))) static void
set_res(struct nemesis_member_result *res, enum nemesis_member_outcome o,
        const char *fmt, ...)
{
	va_list ap;
	res->outcome = o;
	va_start(ap, fmt);
	vsnprintf(res->detail, sizeof res->detail, fmt, ap);
	va_end(ap);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static bool past(const struct hosts *h, int64_t deadline_ns)
{
	return hosts_now_ns(h) >= deadline_ns;
}

static double secs(const struct hosts *h, int64_t since_ns)
{
	return (double)(hosts_now_ns(h) - since_ns) / 1e9;
}

static void endpoint(struct hosts *h, unsigned id, bool on)
{
	if (on) {
		atomic_fetch_or(&h->endpoints, 1u << id);
	} else {
		atomic_fetch_and(&h->endpoints, ~(1u << id));
	}
}

/* A running member, not leaving, other than a and b: the lowest id. */
static unsigned pick_via(struct hosts *h, unsigned a, unsigned b)
{
	for (unsigned id = 1; id <= h->n; id++) {
		if (id != a && id != b && hosts_node_live(h, id) &&
		    !hosts_node(h, id)->leaving) {
			return id;
		}
	}
	return 0;
}

/* The first spare host, or 0. */
static unsigned pick_spare(struct hosts *h)
{
	for (unsigned id = 1; id <= h->n; id++) {
		if (hosts_node(h, id)->member == HOSTS_SPARE) {
			return id;
		}
	}
	return 0;
}

/* The running members `via` sees active, other than itself: the pick-th
 * of them (mod their number), or 0. */
static unsigned pick_active(struct hosts *h, unsigned via, unsigned pick)
{
	struct wl_cluster_view *v = malloc(sizeof *v);
	unsigned cand[HOSTS_MAX_NODES], c = 0;
	char err[256];
	if (v == NULL || wl_cluster_fetch(h, h->client_ns, via, HTTP_MS, v, err,
	                                  sizeof err) != 0) {
		free(v);
		return 0;
	}
	for (unsigned id = 1; id <= h->n; id++) {
		const struct wl_member_view *m = wl_cluster_member(v, id);
		if (id != via && hosts_node_live(h, id) &&
		    !hosts_node(h, id)->leaving && m != NULL &&
		    strcmp(m->state, "active") == 0) {
			cand[c++] = id;
		}
	}
	free(v);
	return c > 0 ? cand[pick % c] : 0;
}

/* Node id's state as `via` sees it, into state ("" when unknown). */
static int member_state(struct hosts *h, unsigned via, unsigned id, char *state,
                        size_t cap)
{
	struct wl_cluster_view *v = malloc(sizeof *v);
	char err[256];
	int rc;
	state[0] = '\0';
	if (v == NULL) {
		return -ENOMEM;
	}
	rc =
	    wl_cluster_fetch(h, h->client_ns, via, HTTP_MS, v, err, sizeof err);
	if (rc == 0) {
		const struct wl_member_view *m = wl_cluster_member(v, id);
		if (m != NULL) {
			snprintf(state, cap, "%s", m->state);
		}
	}
	free(v);
	return rc;
}

/* Whether state is one of the '|'-separated states of want. */
static bool state_in(const char *state, const char *want)
{
	size_t l = strlen(state);
	for (const char *p = want; *p != '\0';) {
		size_t wl = strcspn(p, "|");
		if (wl == l && strncmp(p, state, l) == 0) {
			return true;
		}
		p += wl + (p[wl] == '|');
	}
	return false;
}

/* Polls until `via` sees node id in one of the states of `want`
 * ("joining|active"). 0, -ESRCH when id stopped running, -ETIMEDOUT at
 * the deadline (the last state seen in last). */
static int wait_state(struct hosts *h, unsigned via, unsigned id,
                      const char *want, int64_t deadline_ns, char *last,
                      size_t cap)
{
	snprintf(last, cap, "unknown");
	for (;;) {
		char st[16];
		hosts_reap(h);
		if (hosts_node(h, id)->pid == 0) {
			return -ESRCH;
		}
		if (member_state(h, via, id, st, sizeof st) == 0 &&
		    st[0] != '\0') {
			snprintf(last, cap, "%s", st);
			if (state_in(st, want)) {
				return 0;
			}
		}
		if (past(h, deadline_ns)) {
			return -ETIMEDOUT;
		}
		sleep_ms(POLL_MS);
	}
}

/* Starts an admin operation on via: 0 and *op; 1 when the cluster
 * refused it (why says so); -errno when the request did not get an
 * answer. */
static int op_start(struct hosts *h, unsigned via, const char *method,
                    const char *path, const char *body, uint64_t *op, char *why,
                    size_t cap)
{
	char out[BODY_CAP];
	int status = 0;
	json_t *j;
	int rc = hosts_http_request(h->client_ns, hosts_node(h, via)->addr,
	                            HOSTS_PORT_ADMIN, method, path, body,
	                            HTTP_MS, &status, out, sizeof out);
	if (rc != 0) {
		snprintf(why, cap, "%s %s on n%u: %s", method, path, via,
		         strerror(-rc));
		return rc;
	}
	j = json_loads(out, 0, NULL);
	if (status == 202) {
		json_t *o = json_object_get(j, "op");
		if (!json_is_integer(o)) {
			snprintf(why, cap, "%s %s on n%u: 202 without an op",
			         method, path, via);
			json_decref(j);
			return -EPROTO;
		}
		*op = (uint64_t)json_integer_value(o);
		json_decref(j);
		return 0;
	}
	const char *e = json_string_value(json_object_get(j, "error"));
	snprintf(why, cap, "%s %s on n%u: %d %s", method, path, via, status,
	         e != NULL ? e : out);
	json_decref(j);
	return status >= 400 && status < 500 ? 1 : -EPROTO;
}

/* Follows operation op on via until it ends or the deadline. */
static enum nemesis_member_outcome op_follow(struct hosts *h, unsigned via,
                                             uint64_t op, int64_t deadline_ns,
                                             char *why, size_t cap)
{
	char path[64], out[BODY_CAP];
	snprintf(path, sizeof path, "/v1/cluster/ops/%" PRIu64, op);
	snprintf(why, cap, "op %" PRIu64 " on n%u not followed", op, via);
	for (;;) {
		int status = 0;
		int rc = hosts_http_request(
		    h->client_ns, hosts_node(h, via)->addr, HOSTS_PORT_ADMIN,
		    "GET", path, NULL, HTTP_MS, &status, out, sizeof out);
		if (rc == 0 && status == 200) {
			json_t *j = json_loads(out, 0, NULL);
			const char *st =
			    json_string_value(json_object_get(j, "state"));
			const char *e =
			    json_string_value(json_object_get(j, "error"));
			json_int_t done =
			    json_integer_value(json_object_get(j, "done"));
			json_int_t total =
			    json_integer_value(json_object_get(j, "total"));
			snprintf(why, cap,
			         "op %" PRIu64 " %s (%lld/%lld groups)%s%s", op,
			         st != NULL ? st : "?", (long long)done,
			         (long long)total, e != NULL ? ": " : "",
			         e != NULL ? e : "");
			bool over = st != NULL && (strcmp(st, "done") == 0 ||
			                           strcmp(st, "failed") == 0);
			bool ok = st != NULL && strcmp(st, "done") == 0;
			json_decref(j);
			if (over) {
				return ok ? NEMESIS_MEMBER_DONE
				          : NEMESIS_MEMBER_FAILED;
			}
		}
		if (past(h, deadline_ns)) {
			return NEMESIS_MEMBER_TIMEOUT;
		}
		sleep_ms(POLL_MS);
	}
}

static void do_add(struct hosts *h, int64_t deadline_ns,
                   struct nemesis_member_result *res)
{
	int64_t t0 = hosts_now_ns(h);
	unsigned spare = pick_spare(h), via = pick_via(h, 0, 0);
	char last[16];
	if (spare == 0 || via == 0) {
		set_res(res, NEMESIS_MEMBER_SKIPPED, "%s",
		        spare == 0 ? "no spare node left"
		                   : "no running member to join through");
		return;
	}
	res->node = spare;
	if (hosts_node_join(h, spare, via) != 0) {
		set_res(res, NEMESIS_MEMBER_ERROR, "%s", hosts_error(h));
		return;
	}
	/* Admitted, it is a member the clients may use (it forwards what
	 * it does not hold), even if it never turns active in time. */
	int rc = wait_state(h, via, spare, "joining|active", deadline_ns, last,
	                    sizeof last);
	if (rc == 0) {
		endpoint(h, spare, true);
		rc = wait_state(h, via, spare, "active", deadline_ns, last,
		                sizeof last);
	}
	if (rc == 0) {
		set_res(res, NEMESIS_MEMBER_DONE,
		        "joined through n%u, active after %.1f s", via,
		        secs(h, t0));
	} else if (rc == -ESRCH) {
		set_res(res, NEMESIS_MEMBER_FAILED,
		        "n%u stopped running while joining (see its log)",
		        spare);
	} else {
		set_res(res, NEMESIS_MEMBER_TIMEOUT,
		        "joined through n%u, still %s after %.1f s", via, last,
		        secs(h, t0));
	}
}

static void do_remove(struct hosts *h, unsigned pick, int64_t deadline_ns,
                      struct nemesis_member_result *res)
{
	int64_t t0 = hosts_now_ns(h);
	unsigned via = pick_via(h, 0, 0), target;
	char path[64], why[200];
	uint64_t op = 0;
	target = via != 0 ? pick_active(h, via, pick) : 0;
	if (target == 0) {
		set_res(res, NEMESIS_MEMBER_SKIPPED,
		        "no active member to remove besides n%u", via);
		return;
	}
	res->node = target;
	struct hosts_node *nd = hosts_node(h, target);
	/* The clients leave it first: a drained node only forwards. */
	endpoint(h, target, false);
	snprintf(path, sizeof path, "/v1/cluster/nodes/%u/drain", target);
	int rc = op_start(h, via, "POST", path, "{}", &op, why, sizeof why);
	if (rc != 0) {
		endpoint(h, target, true);
		set_res(res,
		        rc == 1 ? NEMESIS_MEMBER_REFUSED
		                : NEMESIS_MEMBER_TIMEOUT,
		        "drain: %s", why);
		return;
	}
	enum nemesis_member_outcome o =
	    op_follow(h, via, op, deadline_ns, why, sizeof why);
	if (o != NEMESIS_MEMBER_DONE) {
		endpoint(h, target, true);
		set_res(res, o, "drain: %s", why);
		return;
	}
	char drained[200];
	snprintf(drained, sizeof drained, "%s", why);
	snprintf(path, sizeof path, "/v1/cluster/nodes/%u", target);
	nd->leaving = true;
	rc = op_start(h, via, "DELETE", path, NULL, &op, why, sizeof why);
	if (rc != 0) {
		/* Unanswered, the removal may still happen: the node stays
		 * leaving, so that its clean exit is not taken for a crash. */
		nd->leaving = rc != 1;
		endpoint(h, target, true);
		set_res(res,
		        rc == 1 ? NEMESIS_MEMBER_REFUSED
		                : NEMESIS_MEMBER_TIMEOUT,
		        "drained (%s), then remove: %s", drained, why);
		return;
	}
	o = op_follow(h, via, op, deadline_ns, why, sizeof why);
	if (o != NEMESIS_MEMBER_DONE) {
		set_res(res, o, "drained (%s), then remove: %s", drained, why);
		return;
	}
	/* A removed node stops by itself once it reads its record. */
	for (;;) {
		hosts_reap(h);
		if (nd->pid == 0 || past(h, deadline_ns)) {
			break;
		}
		sleep_ms(100);
	}
	if (nd->pid != 0) {
		set_res(res, NEMESIS_MEMBER_TIMEOUT,
		        "removed through n%u, still running after %.1f s", via,
		        secs(h, t0));
	} else if (nd->removed_exit) {
		set_res(res, NEMESIS_MEMBER_DONE,
		        "drained and removed through n%u, exited 0 after %.1f "
		        "s",
		        via, secs(h, t0));
	} else {
		set_res(res, NEMESIS_MEMBER_FAILED,
		        "removed through n%u, but its exit was not a clean "
		        "leave (see its log)",
		        via);
	}
}

/* A replace that could not happen: the killed node comes back. */
static void revive(struct hosts *h, unsigned dead)
{
	struct hosts_node *nd = hosts_node(h, dead);
	nd->member = HOSTS_MEMBER;
	if (hosts_node_start(h, dead) == 0) {
		endpoint(h, dead, true);
	}
}

static void do_replace(struct hosts *h, unsigned pick, int64_t deadline_ns,
                       struct nemesis_member_result *res)
{
	int64_t t0 = hosts_now_ns(h);
	unsigned spare = pick_spare(h), via = pick_via(h, 0, 0), dead;
	char path[64], body[64], why[200], last[16];
	uint64_t op = 0;
	dead = via != 0 && spare != 0 ? pick_active(h, via, pick) : 0;
	if (dead == 0) {
		set_res(res, NEMESIS_MEMBER_SKIPPED, "%s",
		        spare == 0 ? "no spare node left"
		                   : "no active member to replace");
		return;
	}
	res->node = dead;
	res->with = spare;
	endpoint(h, dead, false);
	if (hosts_node_signal(h, dead, SIGKILL) != 0) {
		set_res(res, NEMESIS_MEMBER_ERROR, "kill: %s", hosts_error(h));
		return;
	}
	/* Lost for good (its data stays, unused). */
	hosts_node(h, dead)->member = HOSTS_GONE;
	if (hosts_node_join(h, spare, via) != 0) {
		set_res(res, NEMESIS_MEMBER_ERROR, "%s", hosts_error(h));
		revive(h, dead);
		return;
	}
	int rc = wait_state(h, via, spare, "joining|active", deadline_ns, last,
	                    sizeof last);
	if (rc != 0) {
		revive(h, dead);
		set_res(res,
		        rc == -ESRCH ? NEMESIS_MEMBER_FAILED
		                     : NEMESIS_MEMBER_TIMEOUT,
		        "n%u %s; n%u started again", spare,
		        rc == -ESRCH ? "stopped running while joining"
		                     : "not admitted in time",
		        dead);
		return;
	}
	snprintf(path, sizeof path, "/v1/cluster/nodes/%u/replace", dead);
	snprintf(body, sizeof body, "{\"with\": %u}", spare);
	for (;;) {
		rc = op_start(h, via, "POST", path, body, &op, why, sizeof why);
		/* Refused while the member still counts the dead node alive
		 * or has not read the new one's record: both pass within
		 * moments. */
		if (rc != 1 ||
		    (strstr(why, "is alive") == NULL &&
		     strstr(why, "not a joining or active") == NULL) ||
		    past(h, deadline_ns)) {
			break;
		}
		sleep_ms(POLL_MS);
	}
	/* Admitted: a member the clients may use, replace or not. */
	endpoint(h, spare, true);
	if (rc != 0) {
		revive(h, dead);
		set_res(res,
		        rc == 1 ? NEMESIS_MEMBER_REFUSED
		                : NEMESIS_MEMBER_TIMEOUT,
		        "%s; n%u started again", why, dead);
		return;
	}
	enum nemesis_member_outcome o =
	    op_follow(h, via, op, deadline_ns, why, sizeof why);
	if (o != NEMESIS_MEMBER_DONE) {
		set_res(res, o, "replace through n%u: %s", via, why);
		return;
	}
	rc =
	    wait_state(h, via, spare, "active", deadline_ns, last, sizeof last);
	if (rc == 0) {
		set_res(res, NEMESIS_MEMBER_DONE,
		        "n%u killed, n%u took its place through n%u, active "
		        "after %.1f s",
		        dead, spare, via, secs(h, t0));
	} else {
		set_res(res,
		        rc == -ESRCH ? NEMESIS_MEMBER_FAILED
		                     : NEMESIS_MEMBER_TIMEOUT,
		        "replaced (%s), n%u %s after %.1f s", why, spare,
		        rc == -ESRCH ? "stopped running" : last, secs(h, t0));
	}
}

void wl_member_run(void *arg, enum nemesis_member_op op, unsigned pick,
                   int64_t deadline_ns, struct nemesis_member_result *res)
{
	struct hosts *h = arg;
	memset(res, 0, sizeof *res);
	switch (op) {
	case NEMESIS_MEMBER_ADD:
		do_add(h, deadline_ns, res);
		break;
	case NEMESIS_MEMBER_REMOVE:
		do_remove(h, pick, deadline_ns, res);
		break;
	case NEMESIS_MEMBER_REPLACE:
		do_replace(h, pick, deadline_ns, res);
		break;
	default:
		set_res(res, NEMESIS_MEMBER_SKIPPED, "unknown operation %d",
		        (int)op);
		break;
	}
}
