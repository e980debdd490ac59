/* Felix connections, tickets and outcomes of the workloads; see
 * workload_felix.h. */
#include "jepsen/workload_felix.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/felix_hash.h"

#define CONNECT_TIMEOUT_MS 3000

const char *const wl_fx_args[] = {"--felix-group-visibility-ms", "3000",
                                  "--felix-group-max-attempts", "1000", NULL};
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 1600

static void on_fx_timer(uv_timer_t *t);

void wl_fx_init(struct wl_fx *fx, struct wl_ctx *x, unsigned node, wl_fx_cb cb,
                void *data)
{
	memset(fx, 0, sizeof *fx);
	fx->x = x;
	fx->node = node;
	fx->cb = cb;
	fx->data = data;
	uv_timer_init(x->loop, &fx->timer);
	uv_timer_init(x->loop, &fx->reaper);
	fx->timer.data = fx;
	fx->reaper.data = fx;
	fx->timer_init = true;
}

void wl_fx_init_home(struct wl_fx *fx, struct wl_ctx *x, unsigned i,
                     wl_fx_cb cb, void *data)
{
	wl_fx_init(fx, x, wl_ctx_home(x, i), cb, data);
	fx->homed = true;
	fx->home_idx = i;
}

static void reap(struct wl_fx *fx)
{
	for (unsigned i = 0; i < fx->n_dying; i++) {
		felix_client_close(fx->dying[i]);
	}
	fx->n_dying = 0;
}

static void on_reaper(uv_timer_t *t)
{
	reap(t->data);
}

/* Forgets the connection and closes it from the loop, not here: drop may
 * run inside one of the client's callbacks, and the client library
 * does not survive being closed from there (net/quic.c walks its
 * streams while it calls them). */
static void drop(struct wl_fx *fx)
{
	struct felix_client *c = fx->c;
	fx->c = NULL;
	fx->up = false;
	fx->connecting = false;
	if (c == NULL) {
		return;
	}
	if (fx->n_dying == WL_FX_MAX_DYING) {
		/* Never more than a few resets per loop turn; keep the
		 * oldest waiting rather than close it here. */
		fx->n_dying--;
		felix_client_close(fx->dying[fx->n_dying]);
	}
	fx->dying[fx->n_dying++] = c;
	uv_timer_start(&fx->reaper, on_reaper, 0, 0);
}

static void backoff(struct wl_fx *fx)
{
	unsigned ms = BACKOFF_MIN_MS << (fx->fails < 4 ? fx->fails : 4);
	if (ms > BACKOFF_MAX_MS) {
		ms = BACKOFF_MAX_MS;
	}
	fx->fails++;
	fx->retry_at_ms = wl_ctx_ms(fx->x) + ms;
}

static void on_lost(void *data, struct felix_client *c, const char *message)
{
	struct wl_fx *fx = data;
	(void)message;
	if (c != fx->c) {
		return;
	}
	drop(fx);
	backoff(fx);
}

static void on_ready(void *data, struct felix_client *c, int status,
                     const char *message)
{
	struct wl_fx *fx = data;
	(void)message;
	if (c != fx->c || fx->closed) {
		return;
	}
	uv_timer_stop(&fx->timer);
	fx->connecting = false;
	if (status != 0) {
		drop(fx);
		backoff(fx);
		fx->cb(fx->data, fx, false);
		return;
	}
	fx->up = true;
	fx->fails = 0;
	fx->cb(fx->data, fx, true);
}

static void open_now(struct wl_fx *fx)
{
	if (fx->homed) {
		fx->node = wl_ctx_home(fx->x, fx->home_idx);
	}
	const struct wl_node_info *nd = wl_ctx_node(fx->x, fx->node);
	struct felix_client_config cfg;
	char err[256];

	felix_client_config_init(&cfg);
	cfg.host = nd->addr;
	cfg.port = HOSTS_PORT_FELIX;
	cfg.ca_file = nd->felix_ca;
	cfg.server_name = "localhost";
	cfg.tenant = WL_FX_TENANT;
	cfg.token = "dev";
	fx->connecting = true;
	if (felix_client_open(&fx->c, fx->x->loop, &cfg, on_ready, fx, err,
	                      sizeof err) != 0) {
		fx->c = NULL;
		fx->connecting = false;
		backoff(fx);
		fx->cb(fx->data, fx, false);
		return;
	}
	felix_client_on_lost(fx->c, on_lost);
	uv_timer_start(&fx->timer, on_fx_timer, CONNECT_TIMEOUT_MS, 0);
}

static void on_fx_timer(uv_timer_t *t)
{
	struct wl_fx *fx = t->data;
	if (fx->closed) {
		return;
	}
	if (fx->connecting) {
		/* The handshake did not finish in time. */
		drop(fx);
		backoff(fx);
		fx->cb(fx->data, fx, false);
		return;
	}
	if (fx->c == NULL) {
		open_now(fx);
	}
}

bool wl_fx_connect(struct wl_fx *fx)
{
	if (fx->closed) {
		return false;
	}
	if (fx->up) {
		return true;
	}
	if (fx->connecting || uv_is_active((uv_handle_t *)&fx->timer)) {
		return false;
	}
	int64_t now = wl_ctx_ms(fx->x);
	if (now < fx->retry_at_ms) {
		uv_timer_start(&fx->timer, on_fx_timer,
		               (uint64_t)(fx->retry_at_ms - now), 0);
		return false;
	}
	open_now(fx);
	return fx->up;
}

void wl_fx_reset(struct wl_fx *fx)
{
	if (fx->closed) {
		return;
	}
	uv_timer_stop(&fx->timer);
	if (fx->c != NULL) {
		drop(fx);
		backoff(fx);
	}
}

void wl_fx_close(struct wl_fx *fx)
{
	if (!fx->timer_init) {
		return;
	}
	fx->closed = true;
	uv_timer_stop(&fx->timer);
	uv_timer_stop(&fx->reaper);
	wl_close_handle((uv_handle_t *)&fx->timer);
	wl_close_handle((uv_handle_t *)&fx->reaper);
	/* Runs from the loop (the driver defers it), so the clients may be
	 * closed here. */
	if (fx->c != NULL) {
		felix_client_close(fx->c);
		fx->c = NULL;
	}
	reap(fx);
}

void wl_follow_init(struct wl_follow *f, struct wl_ctx *x, unsigned node,
                    wl_fx_cb cb, void *data)
{
	for (unsigned n = 0; n < wl_ctx_slots(x); n++) {
		wl_fx_init(&f->fx[n], x, n + 1, cb, data);
	}
	f->x = x;
	wl_follow_start(f, node);
}

void wl_follow_close(struct wl_follow *f, const struct wl_ctx *x)
{
	for (unsigned n = 0; n < wl_ctx_slots(x); n++) {
		wl_fx_close(&f->fx[n]);
	}
}

struct wl_fx *wl_follow_fx(struct wl_follow *f)
{
	return &f->fx[f->node - 1];
}

bool wl_follow_connect(struct wl_follow *f)
{
	/* A node that left the endpoints (removed, replaced) since it was
	 * chosen: the next one instead, so no request waits on it. */
	if (!wl_ctx_is_endpoint(f->x, f->node)) {
		f->node = wl_ctx_next_endpoint(f->x, f->node);
	}
	return wl_fx_connect(wl_follow_fx(f));
}

void wl_follow_reset(struct wl_follow *f)
{
	wl_fx_reset(wl_follow_fx(f));
}

void wl_follow_start(struct wl_follow *f, unsigned node)
{
	if (!wl_ctx_is_endpoint(f->x, node)) {
		node = wl_ctx_next_endpoint(f->x, node);
	}
	f->node = node;
	f->tried = 0;
}

void wl_follow_next(struct wl_follow *f, const struct wl_ctx *x)
{
	f->node = wl_ctx_next_endpoint(x, f->node);
}

bool wl_follow_retry(struct wl_follow *f, const struct wl_ctx *x)
{
	if (++f->tried >= wl_ctx_n_endpoints(x)) {
		return false;
	}
	wl_follow_next(f, x);
	return true;
}

struct wl_ticket *wl_ticket_new(struct wl_tickets *t, void *owner, uint64_t seq,
                                struct wl_fx *fx)
{
	struct wl_ticket *k = calloc(1, sizeof *k);
	if (k == NULL) {
		return NULL;
	}
	k->owner = owner;
	k->seq = seq;
	k->fx = fx;
	k->next = t->head;
	t->head = k;
	return k;
}

void wl_tickets_free(struct wl_tickets *t)
{
	while (t->head != NULL) {
		struct wl_ticket *k = t->head;
		t->head = k->next;
		free(k);
	}
}

void wl_ticket_drop(struct wl_ticket **k)
{
	if (*k != NULL) {
		(*k)->owner = NULL;
		*k = NULL;
	}
}

int wl_fx_publish_rec(struct wl_fx *fx, const char *stream, const char *key,
                      uint64_t rec, felix_client_ack_cb cb, void *data)
{
	char r[24];
	snprintf(r, sizeof r, "r%" PRIu64, rec);
	struct felix_view v = {(const uint8_t *)r, strlen(r)};
	return felix_client_publish(fx->c, WL_FX_NS, stream, true,
	                            (const uint8_t *)key, strlen(key), &v, 1,
	                            FELIX_ACK_PER_BATCH, cb, data);
}

enum wl_type wl_fx_write_outcome(int status, const char *message)
{
	const char *m = message != NULL ? message : "";
	switch (status) {
	case FELIX_CLIENT_EREFUSED:
		/* The broker's words: refusals before anything was proposed
		 * are definite; "shard unavailable: ... may or may not have
		 * happened" and anything unknown are not. */
		if (strncmp(m, "not leader", 10) == 0 ||
		    strstr(m, "not found") != NULL ||
		    strncmp(m, "unauthorized", 12) == 0 ||
		    strncmp(m, "invalid", 7) == 0 ||
		    strstr(m, "too large") != NULL ||
		    strstr(m, "busy") != NULL) {
			return WL_FAIL;
		}
		return WL_INFO;
	case FELIX_CLIENT_EUNSUPPORTED:
	case FELIX_CLIENT_EINVAL:
	case FELIX_CLIENT_ENOMEM:
		return WL_FAIL;
	default:
		return WL_INFO;
	}
}

void wl_fx_key_for_shard(const char *prefix, unsigned shard, unsigned shards,
                         char *out, size_t cap)
{
	for (unsigned n = 0;; n++) {
		snprintf(out, cap, "%s%u", prefix, n);
		if (felix_hash_shard(shards, true, (const uint8_t *)out,
		                     strlen(out)) == shard) {
			return;
		}
	}
}
