/* The dashboard's recent history; see history.h. */
#include "node/admin/history.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "node/admin/admin_http.h"
#include "node/admin/metrics.h"
#include "node/shards.h"

int history_ring_init(struct history_ring *r, size_t cap)
{
	memset(r, 0, sizeof *r);
	if (cap == 0) {
		return -1;
	}
	r->s = calloc(cap, sizeof *r->s);
	if (r->s == NULL) {
		return -1;
	}
	r->cap = cap;
	return 0;
}

void history_ring_free(struct history_ring *r)
{
	free(r->s);
	memset(r, 0, sizeof *r);
}

void history_ring_push(struct history_ring *r, const struct history_sample *s)
{
	r->s[r->head] = *s;
	r->head = (r->head + 1) % r->cap;
	if (r->n < r->cap) {
		r->n++;
	}
}

const struct history_sample *history_ring_at(const struct history_ring *r,
                                             size_t i)
{
	if (i >= r->n) {
		return NULL;
	}
	size_t oldest = (r->head + r->cap - r->n) % r->cap;
	return &r->s[(oldest + i) % r->cap];
}

double history_rate(uint64_t prev, uint64_t cur, uint64_t dt_ms)
{
	if (dt_ms == 0 || cur < prev) {
		return NAN;
	}
	return (double)(cur - prev) * 1000.0 / (double)dt_ms;
}

double history_mean(uint64_t sum0, uint64_t sum1, uint64_t n0, uint64_t n1,
                    double scale)
{
	if (n1 <= n0 || sum1 < sum0) {
		return NAN;
	}
	return (double)(sum1 - sum0) / (double)(n1 - n0) * scale;
}

const char *history_series_name(enum history_series s)
{
	static const char *names[HISTORY_N_SERIES] = {
	    [HISTORY_FSNP_RPS] = "fsnp.requests_per_s",
	    [HISTORY_FSNP_ERRS] = "fsnp.errors_per_s",
	    [HISTORY_FELIX_RPS] = "felix.requests_per_s",
	    [HISTORY_FELIX_ERRS] = "felix.errors_per_s",
	    [HISTORY_ADMIN_RPS] = "admin.requests_per_s",
	    [HISTORY_ADMIN_LAT_MS] = "admin.latency_ms",
	    [HISTORY_RAFT_COMMITS] = "raft.commits_per_s",
	    [HISTORY_RAFT_SYNC_MS] = "raft.sync_ms",
	    [HISTORY_NODES_UP] = "nodes.up",
	};
	return (unsigned)s < HISTORY_N_SERIES ? names[s] : "";
}

/* The sum of every series of counter `name`, whatever its labels. */
static uint64_t metric_sum(const struct metrics *m, const char *name)
{
	int64_t v = 0;
	for (size_t i = 0; m != NULL && i < m->n; i++) {
		if (strcmp(m->series[i]->name, name) == 0) {
			v += m->series[i]->value;
		}
	}
	return v > 0 ? (uint64_t)v : 0;
}

static uint64_t jint(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));
	return v > 0 ? (uint64_t)v : 0;
}

/* The Raft counters and the members' state from the cluster view. */
static void read_cluster(struct history *h, struct history_counters *c,
                         struct history_sample *s, double *up)
{
	char *text = NULL;
	size_t len = 0;
	json_t *root, *v;
	size_t i;

	*up = NAN;
	if (h->shards == NULL ||
	    shards_summary_json(h->shards, &text, &len) != 0) {
		return;
	}
	root = json_loadb(text, len, 0, NULL);
	free(text);
	if (root == NULL) {
		return;
	}
	c->raft_commit = jint(root, "commit_total");
	json_t *io = json_object_get(root, "raft_io");
	c->raft_syncs = jint(io, "syncs");
	c->raft_sync_us = jint(io, "sync_us");
	unsigned n_up = 0;
	json_array_foreach(json_object_get(root, "peers"), i, v)
	{
		uint64_t id = jint(v, "id");
		bool on = json_is_true(json_object_get(v, "connected"));
		n_up += on;
		if (id >= 1 && id <= 64) {
			s->known_mask |= 1ull << (id - 1);
			if (on) {
				s->up_mask |= 1ull << (id - 1);
			}
		}
	}
	*up = n_up;
	json_decref(root);
}

static uint64_t wall_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

void history_sample_now(struct history *h)
{
	struct history_counters c = {.valid = true};
	struct history_sample s = {.t_ms = wall_ms()};
	const struct history_counters *p = &h->last;
	double up;

	c.mono_ms = uv_now(h->loop);
	c.fsnp_req = metric_sum(h->metrics, "lodestone_fsnp_requests_total");
	/* Every error status, busy included. */
	c.fsnp_err = metric_sum(h->metrics, "lodestone_fsnp_errors_total");
	c.felix_req =
	    metric_sum(h->metrics, "lodestone_felix_publish_frames_total") +
	    metric_sum(h->metrics, "lodestone_felix_requests_total");
	/* Every kind: protocol, auth, publish, publish_refused. */
	c.felix_err = metric_sum(h->metrics, "lodestone_felix_errors_total");
	if (h->admin != NULL) {
		c.admin_req = h->admin->n_requests;
		c.admin_us = h->admin->busy_us;
	}
	read_cluster(h, &c, &s, &up);
	for (int i = 0; i < HISTORY_N_SERIES; i++) {
		s.v[i] = NAN;
	}
	s.v[HISTORY_NODES_UP] = up;
	if (p->valid) {
		uint64_t dt = c.mono_ms - p->mono_ms;
		s.v[HISTORY_FSNP_RPS] =
		    history_rate(p->fsnp_req, c.fsnp_req, dt);
		s.v[HISTORY_FSNP_ERRS] =
		    history_rate(p->fsnp_err, c.fsnp_err, dt);
		s.v[HISTORY_FELIX_RPS] =
		    history_rate(p->felix_req, c.felix_req, dt);
		s.v[HISTORY_FELIX_ERRS] =
		    history_rate(p->felix_err, c.felix_err, dt);
		s.v[HISTORY_ADMIN_RPS] =
		    history_rate(p->admin_req, c.admin_req, dt);
		s.v[HISTORY_ADMIN_LAT_MS] = history_mean(
		    p->admin_us, c.admin_us, p->admin_req, c.admin_req, 0.001);
		s.v[HISTORY_RAFT_COMMITS] =
		    history_rate(p->raft_commit, c.raft_commit, dt);
		s.v[HISTORY_RAFT_SYNC_MS] =
		    history_mean(p->raft_sync_us, c.raft_sync_us, p->raft_syncs,
		                 c.raft_syncs, 0.001);
		history_ring_push(&h->ring, &s);
	}
	h->last = c;
}

static void on_timer(uv_timer_t *t)
{
	history_sample_now(t->data);
}

int history_start(struct history **out, uv_loop_t *loop, struct shards *shards,
                  const struct metrics *metrics, const struct admin_http *admin)
{
	struct history *h = calloc(1, sizeof *h);
	*out = NULL;
	if (h == NULL) {
		goto err_alloc;
	}
	if (history_ring_init(&h->ring, HISTORY_SAMPLES) != 0) {
		goto err_ring;
	}
	h->loop = loop;
	h->shards = shards;
	h->metrics = metrics;
	h->admin = admin;
	uv_timer_init(loop, &h->timer);
	h->timer.data = h;
	uv_timer_start(&h->timer, on_timer, HISTORY_INTERVAL_MS,
	               HISTORY_INTERVAL_MS);
	history_sample_now(h); /* the baseline of the first rates */
	*out = h;
	return 0;

err_ring:
	free(h);
err_alloc:
	return -1;
}

static void on_closed(uv_handle_t *handle)
{
	struct history *h = handle->data;
	void (*cb)(void *) = h->close_cb;
	void *data = h->close_data;
	history_ring_free(&h->ring);
	free(h);
	if (cb != NULL) {
		cb(data);
	}
}

void history_close(struct history *h, void (*cb)(void *data), void *data)
{
	if (h == NULL) {
		if (cb != NULL) {
			cb(data);
		}
		return;
	}
	h->close_cb = cb;
	h->close_data = data;
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, on_closed);
}
