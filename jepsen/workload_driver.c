/* The workload thread, its loop and phases, and the checking of the
 * histories; see workload_driver.h and workload_impl.h. */
#include "jepsen/workload_driver.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jepsen/hosts.h"
#include "jepsen/lincheck.h"
#include "jepsen/workload_impl.h"

#define DEFAULT_TIMEOUT_MS 2000

static const struct wl_workload *const table[] = {
    &wl_register,   &wl_stream, &wl_counter, &wl_queue,
    &wl_idempotent, &wl_watch,  &wl_flow,
};

const char *const wl_names[] = {"register",   "stream", "counter", "queue",
                                "idempotent", "watch",  "flow",    NULL};

const struct wl_workload *wl_find(const char *name)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i]->name, name) == 0) {
			return table[i];
		}
	}
	return NULL;
}

const char *wl_name(const struct wl_workload *w)
{
	return w->name;
}

const char *wl_missing(const struct wl_workload *w)
{
	return w->missing;
}

const char *wl_checker(const struct wl_workload *w)
{
	return w->checker;
}

const char *wl_scopes(const struct wl_workload *w)
{
	return w->scopes;
}

const char *const *wl_args(const struct wl_workload *w)
{
	return w->args;
}

/* --- The run ------------------------------------------------------------- */

struct wl_run {
	struct wl_config cfg; /* client_ns and dir point into the bufs */
	char client_ns[HOSTS_NAME_LEN];
	char dir[HOSTS_PATH_LEN];
	const struct wl_workload *w;
	uv_loop_t loop;
	uv_async_t stop_async;
	uv_timer_t ops_timer;
	uv_timer_t end_timer;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock; /* guards async_open */
	bool async_open;
	atomic_bool finished; /* the thread returned */
	atomic_bool written;  /* the history files are written */
	int write_rc;
	uint64_t counts[WL_N_TYPES];
	char note[256];
	char err[256];
	struct wl_ctx x;
};

int64_t wl_ctx_ms(struct wl_ctx *x)
{
	return wl_hist_now(&x->hist) / 1000000;
}

uint64_t wl_rand(struct wl_ctx *x, uint64_t lo, uint64_t hi)
{
	if (hi <= lo) {
		return lo;
	}
	return lo + nemesis_rng_below(&x->rng, hi - lo + 1);
}

void wl_ctx_path(const struct wl_ctx *x, const char *name, char *buf,
                 size_t cap)
{
	snprintf(buf, cap, "%s/%s", x->cfg->dir, name);
}

int wl_ctx_write(const struct wl_ctx *x, const struct wl_hist *h,
                 const char *name)
{
	char path[HOSTS_PATH_LEN + 32];
	wl_ctx_path(x, name, path, sizeof path);
	return wl_hist_write(h, path);
}

unsigned wl_ctx_slots(const struct wl_ctx *x)
{
	return x->cfg->n_slots > x->cfg->n_nodes ? x->cfg->n_slots
	                                         : x->cfg->n_nodes;
}

const struct wl_node_info *wl_ctx_node(const struct wl_ctx *x, unsigned id)
{
	if (id < 1 || id > wl_ctx_slots(x)) {
		return NULL;
	}
	return &x->cfg->nodes[id - 1];
}

/* The endpoints now; never empty (the bootstrap nodes when the harness
 * names none, e.g. while every node is being replaced). */
static unsigned endpoint_mask(const struct wl_ctx *x)
{
	unsigned all = ((1u << x->cfg->n_nodes) - 1) << 1;
	unsigned m =
	    x->cfg->endpoints != NULL ? atomic_load(x->cfg->endpoints) : all;
	return m != 0 ? m : all;
}

bool wl_ctx_is_endpoint(const struct wl_ctx *x, unsigned id)
{
	return id < 32 && (endpoint_mask(x) & (1u << id)) != 0;
}

unsigned wl_ctx_n_endpoints(const struct wl_ctx *x)
{
	return (unsigned)__builtin_popcount(endpoint_mask(x));
}

unsigned wl_ctx_home(const struct wl_ctx *x, unsigned i)
{
	unsigned m = endpoint_mask(x);
	unsigned k = i % (unsigned)__builtin_popcount(m);
	for (unsigned id = 1; id <= wl_ctx_slots(x); id++) {
		if ((m & (1u << id)) && k-- == 0) {
			return id;
		}
	}
	return 1 + i % x->cfg->n_nodes;
}

unsigned wl_ctx_next_endpoint(const struct wl_ctx *x, unsigned id)
{
	unsigned m = endpoint_mask(x), n = wl_ctx_slots(x);
	for (unsigned k = 1; k <= n; k++) {
		unsigned c = (id - 1 + k) % n + 1;
		if (m & (1u << c)) {
			return c;
		}
	}
	return id;
}

unsigned wl_ctx_timeout(const struct wl_ctx *x)
{
	return x->cfg->op_timeout_ms ? x->cfg->op_timeout_ms
	                             : DEFAULT_TIMEOUT_MS;
}

int wl_ctx_fsnp_open(struct wl_ctx *x, unsigned id, const char *name,
                     fsnp_client_ready_cb cb, void *data,
                     struct fsnp_client **out)
{
	const struct wl_node_info *nd = wl_ctx_node(x, id);
	struct fsnp_client_options o;
	memset(&o, 0, sizeof o);
	o.host = nd->addr;
	o.port = HOSTS_PORT_FSNP;
	o.client_name = name;
	o.timeout_ms = wl_ctx_timeout(x);
	o.max_attempts = 3;
	if (fsnp_client_open(x->loop, &o, cb, data, out) != 0) {
		*out = NULL;
		snprintf(x->note, sizeof x->note,
		         "cannot open an FSNP client to %s", nd->addr);
		return -EIO;
	}
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	(void)h;
}

void wl_close_handle(uv_handle_t *h)
{
	if (h->loop != NULL && !uv_is_closing(h)) {
		uv_close(h, on_handle_closed);
	}
}

void wl_close_timer(uv_timer_t *t)
{
	uv_timer_stop(t);
	wl_close_handle((uv_handle_t *)t);
}

/* Closes everything, from the loop rather than from wherever
 * wl_ctx_done was called (often a client's callback, which the client
 * libraries do not let close their client). */
static void on_finish(uv_timer_t *t)
{
	struct wl_run *r = t->data;
	wl_close_handle((uv_handle_t *)&r->ops_timer);
	wl_close_handle((uv_handle_t *)&r->end_timer);
	pthread_mutex_lock(&r->lock);
	r->async_open = false;
	wl_close_handle((uv_handle_t *)&r->stop_async);
	pthread_mutex_unlock(&r->lock);
	r->w->close(&r->x);
}

void wl_ctx_done(struct wl_ctx *x)
{
	struct wl_run *r = x->run;
	if (x->done) {
		return;
	}
	x->done = true;
	x->write_rc = x->w->write(x);
	x->hist.frozen = true;
	memcpy(r->counts, x->hist.counts, sizeof r->counts);
	snprintf(r->note, sizeof r->note, "%s", x->note);
	r->write_rc = x->write_rc;
	atomic_store(&r->written, x->write_rc == 0);
	uv_timer_stop(&r->end_timer);
	uv_timer_start(&r->ops_timer, on_finish, 0, 0);
}

static void on_ops_over(uv_timer_t *t)
{
	struct wl_run *r = t->data;
	if (!r->x.ops_over && !r->x.done) {
		r->x.ops_over = true;
		r->w->phase(&r->x, WL_PHASE_OPS_OVER);
	}
}

static void on_deadline(uv_timer_t *t)
{
	struct wl_run *r = t->data;
	if (!r->x.done) {
		r->x.ops_over = true;
		r->x.deadline = true;
		r->w->phase(&r->x, WL_PHASE_DEADLINE);
	}
}

static void on_stop(uv_async_t *a)
{
	struct wl_run *r = a->data;
	if (!r->x.done) {
		r->x.stopped = true;
		r->x.ops_over = true;
		r->x.deadline = true;
		r->w->phase(&r->x, WL_PHASE_DEADLINE);
	}
}

static uint64_t due_in(struct wl_ctx *x, int64_t at_ms)
{
	int64_t now = wl_ctx_ms(x);
	return at_ms > now ? (uint64_t)(at_ms - now) : 0;
}

static void *thread_main(void *arg)
{
	struct wl_run *r = arg;
	struct wl_ctx *x = &r->x;
	int saved = -1;

	if (hosts_netns_enter(r->client_ns, &saved, r->err, sizeof r->err) !=
	    0) {
		/* Nothing ran: an empty history says so. */
		snprintf(x->note, sizeof x->note, "no client ran: %s", r->err);
		saved = -1;
		wl_ctx_done(x);
		uv_run(&r->loop, UV_RUN_DEFAULT);
		goto out;
	}
	int rc = r->w->start(x);
	if (rc != 0) {
		if (x->note[0] == '\0') {
			snprintf(x->note, sizeof x->note,
			         "the clients could not start (%d)", rc);
		}
		snprintf(r->err, sizeof r->err, "%s", x->note);
		wl_ctx_done(x);
	} else {
		uv_timer_start(&r->ops_timer, on_ops_over,
		               due_in(x, r->cfg.ops_end_ms), 0);
		uv_timer_start(&r->end_timer, on_deadline,
		               due_in(x, r->cfg.end_ms), 0);
	}
	uv_run(&r->loop, UV_RUN_DEFAULT);
out:
	r->w->destroy(x);
	if (uv_loop_close(&r->loop) != 0) {
		/* A handle is still open: keep the loop's memory (the
		 * thread ends; nothing else uses it). */
		snprintf(r->err, sizeof r->err,
		         "the workload loop still had handles at its end");
	}
	wl_hist_free(&x->hist);
	if (saved >= 0) {
		hosts_netns_leave(saved);
	}
	atomic_store(&r->finished, true);
	return NULL;
}

int wl_start(struct wl_run **out, const struct wl_workload *w,
             const struct wl_config *cfg, char *err, size_t cap)
{
	struct wl_run *r;
	int rc;

	*out = NULL;
	if (w->missing != NULL) {
		snprintf(err, cap, "workload not available yet: %s",
		         w->missing);
		return -ENOTSUP;
	}
	r = calloc(1, sizeof *r);
	if (r == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	r->cfg = *cfg;
	snprintf(r->client_ns, sizeof r->client_ns, "%s", cfg->client_ns);
	snprintf(r->dir, sizeof r->dir, "%s", cfg->dir);
	r->cfg.client_ns = r->client_ns;
	r->cfg.dir = r->dir;
	r->w = w;
	pthread_mutex_init(&r->lock, NULL);
	atomic_init(&r->finished, false);
	atomic_init(&r->written, false);
	rc = uv_loop_init(&r->loop);
	if (rc != 0) {
		snprintf(err, cap, "uv_loop_init: %s", uv_strerror(rc));
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -ENOMEM;
	}
	uv_async_init(&r->loop, &r->stop_async, on_stop);
	r->stop_async.data = r;
	r->async_open = true;
	uv_timer_init(&r->loop, &r->ops_timer);
	uv_timer_init(&r->loop, &r->end_timer);
	r->ops_timer.data = r;
	r->end_timer.data = r;

	struct wl_ctx *x = &r->x;
	x->cfg = &r->cfg;
	x->loop = &r->loop;
	x->w = w;
	x->run = r;
	wl_hist_init(&x->hist, cfg->t0_ns);
	nemesis_rng_seed(&x->rng, cfg->seed);

	rc = pthread_create(&r->thread, NULL, thread_main, r);
	if (rc != 0) {
		snprintf(err, cap, "pthread_create: %s", strerror(rc));
		uv_close((uv_handle_t *)&r->stop_async, NULL);
		uv_close((uv_handle_t *)&r->ops_timer, NULL);
		uv_close((uv_handle_t *)&r->end_timer, NULL);
		uv_run(&r->loop, UV_RUN_DEFAULT);
		uv_loop_close(&r->loop);
		wl_hist_free(&x->hist);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -rc;
	}
	r->thread_started = true;
	*out = r;
	return 0;
}

void wl_stop(struct wl_run *r)
{
	pthread_mutex_lock(&r->lock);
	if (r->async_open) {
		uv_async_send(&r->stop_async);
	}
	pthread_mutex_unlock(&r->lock);
}

int wl_join(struct wl_run *r, unsigned grace_ms)
{
	struct timespec now, abs;
	int64_t left_ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = r->cfg.end_ms - ((int64_t)now.tv_sec * 1000000000 +
	                           now.tv_nsec - r->cfg.t0_ns) /
	                              1000000;
	if (left_ms < 0) {
		left_ms = 0;
	}
	left_ms += grace_ms;
	clock_gettime(CLOCK_REALTIME, &abs);
	abs.tv_sec += left_ms / 1000;
	abs.tv_nsec += (left_ms % 1000) * 1000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	if (r->thread_started) {
		int rc = pthread_timedjoin_np(r->thread, NULL, &abs);
		if (rc == ETIMEDOUT) {
			return -ETIMEDOUT;
		}
		r->thread_started = false;
	}
	return atomic_load(&r->written) ? 0 : -EIO;
}

bool wl_history_written(const struct wl_run *r)
{
	return atomic_load(&((struct wl_run *)r)->written);
}

void wl_stats(const struct wl_run *r, uint64_t counts[WL_N_TYPES], char *note,
              size_t cap)
{
	memcpy(counts, r->counts, sizeof r->counts);
	if (r->err[0] != '\0') {
		snprintf(note, cap, "%s%s%s", r->note, r->note[0] ? "; " : "",
		         r->err);
	} else {
		snprintf(note, cap, "%s", r->note);
	}
}

void wl_free(struct wl_run *r)
{
	if (r == NULL || r->thread_started) {
		return;
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* --- Checking ------------------------------------------------------------ */

/* "3 lost, 1 duplicate" from the anomaly kinds. */
static void kinds_summary(const struct jepsen_anomalies *a, char *buf,
                          size_t cap)
{
	const char *seen[32];
	size_t n_seen = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < a->n && n_seen < 32; i++) {
		bool dup = false;
		for (size_t j = 0; j < n_seen; j++) {
			dup = dup || strcmp(seen[j], a->items[i].kind) == 0;
		}
		if (!dup) {
			seen[n_seen++] = a->items[i].kind;
		}
	}
	for (size_t j = 0; j < n_seen; j++) {
		size_t c = jepsen_anomalies_count_kind(a, seen[j]);
		size_t l = strlen(buf);
		snprintf(buf + l, cap - l, "%s%zu %s", l > 0 ? ", " : "", c,
		         seen[j]);
	}
	if (a->dropped > 0) {
		size_t l = strlen(buf);
		snprintf(buf + l, cap - l, ", %zu more", a->dropped);
	}
}

static enum wl_verdict_code check_one(const struct wl_check_file *cf,
                                      const char *dir, uint64_t max_ms,
                                      FILE *out, char *text, size_t cap,
                                      size_t *anomalies)
{
	struct jepsen_history h;
	char path[HOSTS_PATH_LEN + 64];
	char err[512];
	enum wl_verdict_code code;

	snprintf(path, sizeof path, "%s/%s", dir, cf->file);
	jepsen_history_init(&h);
	if (jepsen_history_load(&h, JEPSEN_FORMAT_LINES, path, err,
	                        sizeof err) != 0) {
		snprintf(text, cap, "%s: unreadable history: %s", cf->file,
		         err);
		fprintf(out, "%s %s: unchecked: %s\n", cf->checker, cf->file,
		        err);
		jepsen_history_free(&h);
		return WL_UNCHECKED;
	}
	if (cf->fn == NULL) {
		struct jepsen_lin_limits lim = {0};
		struct jepsen_lin_result res;
		lim.max_ms = max_ms;
		if (jepsen_lincheck_run(&h, &lim, &res, err, sizeof err) != 0) {
			snprintf(text, cap, "%s: not checkable: %s", cf->file,
			         err);
			fprintf(out, "%s %s: unchecked: %s\n", cf->checker,
			        cf->file, err);
			jepsen_history_free(&h);
			return WL_UNCHECKED;
		}
		fprintf(out,
		        "%s %s: %s (%zu keys, %zu ops, %" PRIu64 " steps)\n",
		        cf->checker, cf->file,
		        jepsen_lincheck_verdict_name(res.verdict),
		        res.partitions, res.ops, res.steps);
		if (res.verdict != JEPSEN_LIN_LINEARIZABLE) {
			fprintf(out, "  %s\n", res.explanation);
		}
		switch (res.verdict) {
		case JEPSEN_LIN_LINEARIZABLE:
			snprintf(text, cap, "linearizable (%zu ops, %zu keys)",
			         res.ops, res.partitions);
			code = WL_VALID;
			break;
		case JEPSEN_LIN_NOT_LINEARIZABLE:
			snprintf(text, cap, "NOT linearizable: %s",
			         res.explanation);
			*anomalies += 1;
			code = WL_INVALID;
			break;
		default:
			snprintf(text, cap, "unknown: %s", res.explanation);
			code = WL_UNKNOWN;
			break;
		}
		jepsen_history_free(&h);
		return code;
	}
	struct jepsen_anomalies a;
	jepsen_anomalies_init(&a);
	if (cf->fn(&h, &a, err, sizeof err) != 0) {
		snprintf(text, cap, "%s: not checkable: %s", cf->file, err);
		fprintf(out, "%s %s: unchecked: %s\n", cf->checker, cf->file,
		        err);
		jepsen_anomalies_free(&a);
		jepsen_history_free(&h);
		return WL_UNCHECKED;
	}
	size_t n = jepsen_anomalies_count(&a);
	fprintf(out, "%s %s: %s (%zu ops, %zu anomalies)\n", cf->checker,
	        cf->file, n == 0 ? "valid" : "invalid", h.n_ops, n);
	for (size_t i = 0; i < a.n; i++) {
		fprintf(out, "  %s line %u: %s\n", a.items[i].kind,
		        a.items[i].line, a.items[i].msg);
	}
	if (n == 0) {
		snprintf(text, cap, "%s valid (%zu ops)", cf->checker, h.n_ops);
		code = WL_VALID;
	} else {
		char kinds[512];
		kinds_summary(&a, kinds, sizeof kinds);
		snprintf(text, cap, "%s INVALID: %s", cf->checker, kinds);
		code = WL_INVALID;
	}
	*anomalies += n;
	jepsen_anomalies_free(&a);
	jepsen_history_free(&h);
	return code;
}

void wl_check(const struct wl_workload *w, const char *dir, uint64_t max_ms,
              FILE *out, struct wl_verdict *v)
{
	memset(v, 0, sizeof *v);
	v->code = WL_VALID;
	for (size_t i = 0; i < 2 && w->checks[i].file != NULL; i++) {
		char text[768];
		enum wl_verdict_code c =
		    check_one(&w->checks[i], dir, max_ms, out, text,
		              sizeof text, &v->anomalies);
		/* The worst verdict wins: invalid over unchecked over
		 * unknown over valid. */
		static const int rank[] = {0, 3, 2, 1};
		if (rank[c] > rank[v->code]) {
			v->code = c;
		}
		size_t l = strlen(v->text);
		snprintf(v->text + l, sizeof v->text - l, "%s%s",
		         l > 0 ? "; " : "", text);
	}
	fflush(out);
}
