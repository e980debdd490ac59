/* Synchronous Felix client helpers for tests; see felix_util.h. */
#include "tests/integration/felix_util.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

static void on_ready(void *data, struct felix_client *c, int status,
                     const char *message)
{
	struct fx *f = data;
	(void)c;
	f->status = status;
	snprintf(f->message, sizeof f->message, "%s", message);
	f->ready = true;
}

static int connect_cfg(struct fx *f, uv_loop_t *loop,
                       struct harness_cluster *cl, unsigned i,
                       const char *tenant, const char *token,
                       unsigned request_streams,
                       const struct felix_client_config *base);

int fx_connect(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
               unsigned i, const char *tenant, const char *token,
               unsigned request_streams)
{
	return connect_cfg(f, loop, cl, i, tenant, token, request_streams,
	                   NULL);
}

int fx_connect_with(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
                    unsigned i, uint16_t client_flags, uint32_t client_features)
{
	struct felix_client_config cfg;
	felix_client_config_init(&cfg);
	cfg.client_flags = client_flags;
	cfg.client_features = client_features;
	return connect_cfg(f, loop, cl, i, "t1", "any", 1, &cfg);
}

static int connect_cfg(struct fx *f, uv_loop_t *loop,
                       struct harness_cluster *cl, unsigned i,
                       const char *tenant, const char *token,
                       unsigned request_streams,
                       const struct felix_client_config *base)
{
	struct felix_client_config cfg;
	char err[256];
	memset(f, 0, sizeof *f);
	f->loop = loop;
	snprintf(f->ca, sizeof f->ca, "%s/tls/dev-cert.pem",
	         cl->nodes[i].data_dir);
	felix_client_config_init(&cfg);
	if (base != NULL) {
		cfg = *base;
	}
	cfg.host = "127.0.0.1";
	cfg.port = cl->nodes[i].felix;
	cfg.ca_file = f->ca;
	cfg.server_name = "localhost";
	cfg.tenant = tenant;
	cfg.token = token;
	cfg.request_streams = request_streams ? request_streams : 1;
	if (felix_client_open(&f->c, loop, &cfg, on_ready, f, err,
	                      sizeof err) != 0) {
		snprintf(f->message, sizeof f->message, "%s", err);
		f->c = NULL;
		return -100;
	}
	if (felix_client_run(loop, &f->ready, FX_WAIT_MS) != 0) {
		snprintf(f->message, sizeof f->message, "connect timed out");
		return -101;
	}
	return f->status;
}

void fx_close(struct fx *f)
{
	if (f->c != NULL) {
		felix_client_close(f->c);
		f->c = NULL;
		fx_spin(f, 50);
	}
}

struct op {
	struct fx *f;
	bool done;
	int status;
	struct felix_msg reply;
};

static void on_ack(void *data, int status, const char *message)
{
	struct op *op = data;
	op->status = status;
	snprintf(op->f->message, sizeof op->f->message, "%s",
	         message ? message : "");
	op->done = true;
}

static void on_reply(void *data, int status, const struct felix_msg *reply,
                     const char *message)
{
	struct op *op = data;
	op->status = status;
	snprintf(op->f->message, sizeof op->f->message, "%s",
	         message ? message : "");
	if (reply != NULL) {
		/* Keep the fields tests read (no owned pointers). */
		op->reply = *reply;
		if (reply->type == FELIX_MSG_CACHE_VALUE) {
			op->reply.u.cache_value.tenant_id = NULL;
			op->reply.u.cache_value.namespace = NULL;
			op->reply.u.cache_value.cache = NULL;
			op->reply.u.cache_value.key = NULL;
			size_t n = reply->u.cache_value.value.len;
			uint8_t *v = malloc(n + 1);
			if (v != NULL) {
				if (n > 0) {
					memcpy(v,
					       reply->u.cache_value.value.data,
					       n);
				}
				v[n] = 0;
			}
			op->reply.u.cache_value.value.data = v;
		}
	}
	op->done = true;
}

static int wait_op(struct op *op)
{
	if (felix_client_run(op->f->loop, &op->done, FX_WAIT_MS) != 0) {
		snprintf(op->f->message, sizeof op->f->message, "timed out");
		return -102;
	}
	return op->status;
}

static int publish(struct fx *f, bool json, const char *ns, const char *stream,
                   const char *key, const char *const *payloads, uint32_t n)
{
	struct op op = {.f = f};
	struct felix_view v[256];
	if (n > 256) {
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		v[i].data = (const uint8_t *)payloads[i];
		v[i].len = strlen(payloads[i]);
	}
	int rv = (json ? felix_client_publish_json : felix_client_publish)(
	    f->c, ns, stream, key != NULL, (const uint8_t *)key,
	    key ? strlen(key) : 0, v, n, FELIX_ACK_PER_BATCH, on_ack, &op);
	if (rv != 0) {
		return rv;
	}
	return wait_op(&op);
}

int fx_publish(struct fx *f, const char *ns, const char *stream,
               const char *key, const char *const *payloads, uint32_t n)
{
	return publish(f, false, ns, stream, key, payloads, n);
}

int fx_publish_json(struct fx *f, const char *ns, const char *stream,
                    const char *key, const char *const *payloads, uint32_t n)
{
	return publish(f, true, ns, stream, key, payloads, n);
}

int fx_publish_ready(struct fx *f, const char *ns, const char *stream)
{
	/* Empty batches append nothing but exercise the scope lookup; a
	 * cache put checks a leader. */
	for (int i = 0; i < 100; i++) {
		int rv = fx_cache_put(f, "ready", "k", "v", false, 0);
		if (rv == 0) {
			return publish(f, false, ns, stream, NULL, NULL, 0);
		}
		fx_spin(f, 100);
	}
	return -1;
}

int fx_cache_put(struct fx *f, const char *cache, const char *key,
                 const char *value, bool has_ttl, uint64_t ttl_ms)
{
	struct op op = {.f = f};
	int rv = felix_client_cache_put(f->c, "default", cache, key,
	                                (const uint8_t *)value, strlen(value),
	                                has_ttl, ttl_ms, on_reply, &op);
	if (rv != 0) {
		return rv;
	}
	rv = wait_op(&op);
	if (rv == 0 && op.reply.type != FELIX_MSG_CACHE_OK) {
		return -103;
	}
	return rv;
}

static int value_answer(struct op *op, int rv, char *buf, size_t cap,
                        bool *found)
{
	if (rv != 0) {
		return rv;
	}
	if (op->reply.type != FELIX_MSG_CACHE_VALUE) {
		return -103;
	}
	*found = op->reply.u.cache_value.has_value;
	snprintf(buf, cap, "%s",
	         *found && op->reply.u.cache_value.value.data
	             ? (const char *)op->reply.u.cache_value.value.data
	             : "");
	free(op->reply.u.cache_value.value.data);
	return 0;
}

int fx_cache_get(struct fx *f, const char *cache, const char *key, char *buf,
                 size_t cap, bool *found)
{
	struct op op = {.f = f};
	int rv =
	    felix_client_cache_get(f->c, "default", cache, key, on_reply, &op);
	if (rv != 0) {
		return rv;
	}
	return value_answer(&op, wait_op(&op), buf, cap, found);
}

int fx_cache_delete(struct fx *f, const char *cache, const char *key, char *buf,
                    size_t cap, bool *found)
{
	struct op op = {.f = f};
	int rv = felix_client_cache_delete(f->c, "default", cache, key,
	                                   on_reply, &op);
	if (rv != 0) {
		return rv;
	}
	return value_answer(&op, wait_op(&op), buf, cap, found);
}

int fx_counter_add(struct fx *f, const char *cache, const char *key,
                   int64_t delta, int64_t *sum)
{
	struct op op = {.f = f};
	int rv = felix_client_counter_add(f->c, "default", cache, key, delta,
	                                  on_reply, &op);
	if (rv != 0) {
		return rv;
	}
	rv = wait_op(&op);
	if (rv == 0) {
		if (op.reply.type != FELIX_MSG_COUNTER_VALUE ||
		    !op.reply.u.counter_value.has_value) {
			return -103;
		}
		*sum = op.reply.u.counter_value.value;
	}
	return rv;
}

int fx_counter_get(struct fx *f, const char *cache, const char *key,
                   int64_t *value, bool *found)
{
	struct op op = {.f = f};
	int rv = felix_client_counter_get(f->c, "default", cache, key, on_reply,
	                                  &op);
	if (rv != 0) {
		return rv;
	}
	rv = wait_op(&op);
	if (rv == 0) {
		if (op.reply.type != FELIX_MSG_COUNTER_VALUE) {
			return -103;
		}
		*found = op.reply.u.counter_value.has_value;
		*value = op.reply.u.counter_value.value;
	}
	return rv;
}

int fx_stream_shards(struct fx *f, const char *ns, const char *stream,
                     uint32_t *shards)
{
	struct op op = {.f = f};
	int rv = felix_client_stream_shards(f->c, ns, stream, on_reply, &op);
	if (rv != 0) {
		return rv;
	}
	rv = wait_op(&op);
	if (rv == 0) {
		if (op.reply.type != FELIX_MSG_STREAM_SHARDS_VIEW) {
			return -103;
		}
		*shards = op.reply.u.stream_shards_view.shards;
	}
	return rv;
}

/* Whether FX_WAIT_MS passed since t0. */
static bool waited_out(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 > FX_WAIT_MS;
}

/* Runs the loop until a subscription or watch started, was refused or
 * ended (or the loop has nothing left to run): 0, or -102 past
 * FX_WAIT_MS. */
static int wait_answered(uv_loop_t *loop, const bool *started,
                         const bool *refused, const bool *ended)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!*started && !*refused && !*ended) {
		bool done = false;
		if (felix_client_run(loop, &done, 20) == 0) {
			break;
		}
		if (waited_out(&t0)) {
			return -102;
		}
	}
	return 0;
}

/* Runs the loop until *have reaches n or *ended: 0, or -102 past
 * FX_WAIT_MS. */
static int wait_count(uv_loop_t *loop, const uint64_t *have, uint64_t n,
                      const bool *ended)
{
	struct timespec t0;
	bool done = false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (*have < n && !*ended) {
		felix_client_run(loop, &done, 20);
		if (waited_out(&t0)) {
			return -102;
		}
	}
	return 0;
}

static void on_started(void *data, struct felix_sub *sub, int status,
                       const struct felix_msg *answer, const char *message)
{
	struct fx_sub *s = data;
	(void)sub;
	s->status = status;
	snprintf(s->message, sizeof s->message, "%s", message ? message : "");
	s->answer = answer ? answer->type : FELIX_MSG_NONE;
	if (answer != NULL &&
	    answer->type == FELIX_MSG_SUBSCRIBE_CURSOR_ERROR) {
		s->cursor = answer->u.cursor_error;
	}
	if (answer != NULL && answer->type == FELIX_MSG_ERROR) {
		snprintf(s->message, sizeof s->message, "%s",
		         answer->u.error.message);
	}
	if (status == 0) {
		s->started = true;
	} else {
		s->refused = true;
		s->h = NULL;
	}
}

static void on_events(void *data, struct felix_sub *sub, bool has_offset,
                      uint64_t base, const struct felix_view *p, uint32_t n)
{
	struct fx_sub *s = data;
	(void)sub;
	s->batches++;
	s->has_offsets = has_offset;
	for (uint32_t i = 0; i < n && s->n < FX_MAX_EVENTS; i++) {
		char *c = malloc(p[i].len + 1);
		if (c != NULL) {
			memcpy(c, p[i].data, p[i].len);
			c[p[i].len] = '\0';
		}
		s->offsets[s->n] = has_offset ? base + i : UINT64_MAX;
		s->payloads[s->n] = c;
		s->n++;
	}
}

static void on_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct fx_sub *s = data;
	(void)sub;
	snprintf(s->message, sizeof s->message, "%s", why ? why : "");
	s->ended = true;
	s->h = NULL;
}

int fx_subscribe(struct fx *f, struct fx_sub *s, const char *ns,
                 const char *stream, uint32_t shard,
                 const struct felix_start *start)
{
	static const struct felix_sub_handlers h = {on_started, on_events,
	                                            on_ended};
	memset(s, 0, sizeof *s);
	s->f = f;
	int rv = felix_client_subscribe(f->c, ns, stream, shard, start, &h, s,
	                                &s->h);
	if (rv != 0) {
		return rv;
	}
	rv = wait_answered(f->loop, &s->started, &s->refused, &s->ended);
	if (rv != 0) {
		return rv;
	}
	return s->started ? 0 : (s->status ? s->status : -1);
}

int fx_sub_wait(struct fx_sub *s, uint64_t n)
{
	int rv = wait_count(s->f->loop, &s->n, n, &s->ended);
	if (rv != 0) {
		return rv;
	}
	return s->n >= n ? 0 : -1;
}

void fx_sub_close(struct fx_sub *s)
{
	if (s->h != NULL) {
		felix_sub_close(s->h);
		s->h = NULL;
	}
}

void fx_sub_free(struct fx_sub *s)
{
	fx_sub_close(s);
	for (uint64_t i = 0; i < s->n; i++) {
		free(s->payloads[i]);
	}
	s->n = 0;
}

/* ---- consumer groups ---- */

struct gop {
	struct fx *f;
	bool done;
	int status;
	struct fx_rec *recs;
	uint64_t *offs;
	size_t cap, n;
	enum felix_msg_type type;
};

static void on_group(void *data, int status, const struct felix_msg *reply,
                     const char *message)
{
	struct gop *op = data;
	op->status = status;
	snprintf(op->f->message, sizeof op->f->message, "%s",
	         message ? message : "");
	op->type = reply ? reply->type : FELIX_MSG_NONE;
	if (reply != NULL && reply->type == FELIX_MSG_GROUP_RECORDS) {
		const struct felix_group_record_list *l =
		    &reply->u.group_records.records;
		for (size_t i = 0; i < l->count && op->n < op->cap; i++) {
			struct fx_rec *r = &op->recs[op->n++];
			size_t len = l->items[i].payload.len;
			r->offset = l->items[i].offset;
			r->attempts =
			    l->items[i].has_attempts ? l->items[i].attempts : 0;
			if (len >= sizeof r->payload) {
				len = sizeof r->payload - 1;
			}
			if (len > 0) {
				memcpy(r->payload, l->items[i].payload.data,
				       len);
			}
			r->payload[len] = '\0';
		}
	} else if (reply != NULL &&
	           reply->type == FELIX_MSG_GROUP_DEAD_LETTER_LIST) {
		const struct felix_u64_list *l =
		    &reply->u.group_dead_letter_list.offsets;
		for (size_t i = 0; i < l->count && op->n < op->cap; i++) {
			op->offs[op->n++] = l->items[i];
		}
	}
	op->done = true;
}

static int wait_gop(struct gop *op)
{
	if (felix_client_run(op->f->loop, &op->done, FX_WAIT_MS * 2) != 0) {
		snprintf(op->f->message, sizeof op->f->message, "timed out");
		return -102;
	}
	return op->status;
}

int fx_group_poll(struct fx *f, const char *ns, const char *stream,
                  uint32_t shard, const char *group, uint32_t max,
                  uint64_t wait_ms, struct fx_rec *out, size_t cap, size_t *n)
{
	struct gop op = {.f = f, .recs = out, .cap = cap};
	int rv = felix_client_group_poll(f->c, ns, stream, shard, group, max,
	                                 wait_ms, on_group, &op);
	*n = 0;
	if (rv != 0) {
		return rv;
	}
	rv = wait_gop(&op);
	if (rv == 0 && op.type != FELIX_MSG_GROUP_RECORDS) {
		return -103;
	}
	*n = op.n;
	return rv;
}

int fx_group_settle(struct fx *f, enum felix_msg_type type, const char *ns,
                    const char *stream, uint32_t shard, const char *group,
                    uint64_t offset)
{
	struct gop op = {.f = f};
	int rv = felix_client_group_settle(f->c, type, ns, stream, shard, group,
	                                   offset, on_group, &op);
	if (rv != 0) {
		return rv;
	}
	rv = wait_gop(&op);
	if (rv == 0 && op.type != FELIX_MSG_CACHE_OK) {
		return -103;
	}
	return rv;
}

int fx_group_dead(struct fx *f, const char *ns, const char *stream,
                  uint32_t shard, const char *group, uint64_t *out, size_t cap,
                  size_t *n)
{
	struct gop op = {.f = f, .offs = out, .cap = cap};
	int rv = felix_client_group_dead_letters(f->c, ns, stream, shard, group,
	                                         on_group, &op);
	*n = 0;
	if (rv != 0) {
		return rv;
	}
	rv = wait_gop(&op);
	if (rv == 0 && op.type != FELIX_MSG_GROUP_DEAD_LETTER_LIST) {
		return -103;
	}
	*n = op.n;
	return rv;
}

/* ---- idempotent producers ---- */

struct pop {
	struct fx *f;
	bool done;
	int status;
	uint64_t id;
	struct fx_refusal *why;
	enum felix_msg_type type;
};

static void on_produce(void *data, int status, const struct felix_msg *reply,
                       const char *message)
{
	struct pop *op = data;
	op->status = status;
	op->type = reply ? reply->type : FELIX_MSG_NONE;
	snprintf(op->f->message, sizeof op->f->message, "%s",
	         message ? message : "");
	if (reply != NULL && reply->type == FELIX_MSG_PRODUCER_INIT_OK) {
		op->id = reply->u.producer_init_ok.producer_id;
	}
	if (reply != NULL && reply->type == FELIX_MSG_PUBLISH_REFUSED &&
	    op->why != NULL) {
		const struct felix_refusal *r =
		    &reply->u.publish_refused.reason;
		op->why->refused = true;
		op->why->kind = r->kind;
		op->why->expected = r->expected;
		snprintf(op->why->node_id, sizeof op->why->node_id, "%s",
		         r->node_id ? r->node_id : "");
		snprintf(op->why->addr, sizeof op->why->addr, "%s",
		         r->addr ? r->addr : "");
	}
	op->done = true;
}

void fx_apoll_cb(void *data, int status, const struct felix_msg *reply,
                 const char *message)
{
	struct fx_apoll *a = data;
	(void)message;
	a->status = status;
	if (reply != NULL && reply->type == FELIX_MSG_GROUP_RECORDS) {
		const struct felix_group_record_list *l =
		    &reply->u.group_records.records;
		for (size_t i = 0; i < l->count && a->n < FX_APOLL_MAX; i++) {
			a->rec[a->n].offset = l->items[i].offset;
			a->rec[a->n].attempts = l->items[i].attempts;
			a->n++;
		}
	}
	a->done = true;
}

int fx_producer_init(struct fx *f, uint64_t *id)
{
	struct pop op = {.f = f};
	int rv = felix_client_producer_init(f->c, on_produce, &op);
	if (rv != 0) {
		return rv;
	}
	if (felix_client_run(f->loop, &op.done, FX_WAIT_MS) != 0) {
		return -102;
	}
	if (op.status == 0 && op.type != FELIX_MSG_PRODUCER_INIT_OK) {
		return -103;
	}
	*id = op.id;
	return op.status;
}

int fx_publish_idem(struct fx *f, const char *ns, const char *stream,
                    const char *key, const char *const *payloads, uint32_t n,
                    uint64_t producer, uint64_t sequence,
                    struct fx_refusal *why)
{
	struct pop op = {.f = f, .why = why};
	struct felix_view v[256];
	if (n > 256) {
		return -1;
	}
	if (why != NULL) {
		memset(why, 0, sizeof *why);
	}
	for (uint32_t i = 0; i < n; i++) {
		v[i].data = (const uint8_t *)payloads[i];
		v[i].len = strlen(payloads[i]);
	}
	int rv = felix_client_publish_idempotent(
	    f->c, ns, stream, key != NULL, (const uint8_t *)key,
	    key ? strlen(key) : 0, v, n, producer, sequence, on_produce, &op);
	if (rv != 0) {
		return rv;
	}
	if (felix_client_run(f->loop, &op.done, FX_WAIT_MS) != 0) {
		return -102;
	}
	if (op.status == 0 && op.type != FELIX_MSG_PUBLISH_OK) {
		return -103;
	}
	return op.status;
}

/* ---- cache watches ---- */

static void on_watch_started(void *data, struct felix_sub *sub, int status,
                             const struct felix_msg *answer,
                             const char *message)
{
	struct fx_watch *w = data;
	(void)sub;
	w->status = status;
	snprintf(w->message, sizeof w->message, "%s", message ? message : "");
	w->answer = answer ? answer->type : FELIX_MSG_NONE;
	if (answer != NULL &&
	    answer->type == FELIX_MSG_SUBSCRIBE_CURSOR_ERROR) {
		w->cursor = answer->u.cursor_error;
	}
	if (answer != NULL && answer->type == FELIX_MSG_ERROR) {
		snprintf(w->message, sizeof w->message, "%s",
		         answer->u.error.message);
	}
	if (answer != NULL && answer->type == FELIX_MSG_CACHE_WATCH_STARTED) {
		w->info = answer->u.cache_watch_started;
	}
	if (status == 0) {
		w->started = true;
	} else {
		w->refused = true;
		w->h = NULL;
	}
}

static void on_watch_change(void *data, struct felix_sub *sub, const char *key,
                            const uint8_t *value, size_t len, uint64_t offset,
                            uint64_t expires)
{
	struct fx_watch *w = data;
	(void)sub;
	(void)expires;
	if (w->n >= FX_MAX_EVENTS) {
		return;
	}
	w->offsets[w->n] = offset;
	w->keys[w->n] = strdup(key);
	w->value_len[w->n] = len;
	if (value != NULL) {
		size_t keep = len < 63 ? len : 63;
		char *c = malloc(keep + 1);
		if (c != NULL) {
			memcpy(c, value, keep);
			c[keep] = '\0';
		}
		w->values[w->n] = c;
	} else {
		w->values[w->n] = NULL;
	}
	w->n++;
}

static void on_watch_lagged(void *data, struct felix_sub *sub,
                            uint64_t resume_from)
{
	struct fx_watch *w = data;
	(void)sub;
	w->lagged = true;
	w->resume_from = resume_from;
}

static void on_watch_ended(void *data, struct felix_sub *sub, const char *why)
{
	struct fx_watch *w = data;
	(void)sub;
	snprintf(w->message, sizeof w->message, "%s", why ? why : "");
	w->ended = true;
	w->h = NULL;
}

int fx_watch(struct fx *f, struct fx_watch *w, const char *cache,
             const struct felix_watch_request *req)
{
	static const struct felix_watch_handlers h = {
	    on_watch_started, on_watch_change, on_watch_lagged, on_watch_ended};
	memset(w, 0, offsetof(struct fx_watch, offsets));
	w->n = 0;
	w->f = f;
	int rv = felix_client_watch(f->c, "default", cache, req, &h, w, &w->h);
	if (rv != 0) {
		return rv;
	}
	rv = wait_answered(f->loop, &w->started, &w->refused, &w->ended);
	if (rv != 0) {
		return rv;
	}
	return w->started ? 0 : (w->status ? w->status : -1);
}

int fx_watch_wait(struct fx_watch *w, uint64_t n)
{
	int rv = wait_count(w->f->loop, &w->n, n, &w->ended);
	if (rv != 0) {
		return rv;
	}
	return w->n >= n ? 0 : -1;
}

void fx_watch_free(struct fx_watch *w)
{
	if (w->h != NULL) {
		felix_sub_close(w->h);
		w->h = NULL;
	}
	for (uint64_t i = 0; i < w->n; i++) {
		free(w->keys[i]);
		free(w->values[i]);
	}
	w->n = 0;
}

void fx_spin(struct fx *f, unsigned ms)
{
	bool never = false;
	felix_client_run(f->loop, &never, ms);
}

int64_t fx_metric(struct harness_cluster *cl, unsigned i, const char *series)
{
	static char body[1 << 18];
	int st;
	if (harness_http(cl->nodes[i].admin, "GET", "/metrics", NULL, &st, body,
	                 sizeof body) != 0 ||
	    st != 200) {
		return -1;
	}
	size_t sl = strlen(series);
	for (char *p = body; p != NULL && *p; p = strchr(p, '\n')) {
		if (*p == '\n') {
			p++;
		}
		if (strncmp(p, series, sl) == 0 && p[sl] == ' ') {
			return strtoll(p + sl + 1, NULL, 10);
		}
	}
	return -1;
}

uint64_t fx_rss_kib(int pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *fp = fopen(path, "r");
	uint64_t kib = 0;
	if (fp == NULL) {
		return 0;
	}
	while (fgets(line, sizeof line, fp) != NULL) {
		if (strncmp(line, "VmRSS:", 6) == 0) {
			kib = strtoull(line + 6, NULL, 10);
			break;
		}
	}
	fclose(fp);
	return kib;
}

int fx_create_scope(struct harness_cluster *cl, unsigned i, const char *kind,
                    const char *name, const char *body)
{
	char path[256], out[8192] = "";
	int st = 0, k;

	snprintf(path, sizeof path, "/v1/%s/t1/default/%s", kind, name);
	/* A node still electing its meta leader answers 503 for a while. */
	for (k = 0; k < 200; k++) {
		if (harness_http(cl->nodes[i].admin, "POST", path, body, &st,
		                 out, sizeof out) == 0 &&
		    st == 201) {
			break;
		}
		harness_nap(100);
	}
	if (st != 201) {
		fprintf(stderr, "create %s %s: %d %s\n", kind, name, st, out);
		return -1;
	}
	for (k = 0; k < 200; k++) {
		if (harness_http(cl->nodes[i].admin, "GET", path, NULL, &st,
		                 out, sizeof out) == 0 &&
		    st == 200) {
			return 0;
		}
		harness_nap(50);
	}
	fprintf(stderr, "%s %s not visible: %d %s\n", kind, name, st, out);
	return -1;
}

unsigned fx_scope_leader(struct harness_cluster *cl, unsigned i,
                         const char *kind, const char *name)
{
	return fx_tenant_scope_leader(cl, i, "t1", kind, name);
}

unsigned fx_tenant_scope_leader(struct harness_cluster *cl, unsigned i,
                                const char *tenant, const char *kind,
                                const char *name)
{
	char path[256];
	char *out;
	size_t cap = 1 << 16;
	int st = 0;
	unsigned leader = 0;
	json_t *o, *sh, *l;

	out = malloc(cap);
	if (out == NULL) {
		return 0;
	}
	snprintf(path, sizeof path, "/v1/%s/%s/default/%s", kind, tenant, name);
	if (harness_http(cl->nodes[i].admin, "GET", path, NULL, &st, out,
	                 cap) != 0 ||
	    st != 200) {
		free(out);
		return 0;
	}
	o = json_loads(out, 0, NULL);
	sh = json_array_get(json_object_get(o, "shard_state"), 0);
	l = json_object_get(sh, "leader");
	if (json_is_integer(l)) {
		leader = (unsigned)json_integer_value(l);
	}
	json_decref(o);
	free(out);
	return leader;
}

unsigned fx_wait_scope_leader(struct harness_cluster *cl, unsigned i,
                              const char *kind, const char *name, unsigned not )
{
	uint64_t t0 = harness_mono_ms();

	while (harness_mono_ms() - t0 < 30000) {
		unsigned l = fx_scope_leader(cl, i, kind, name);
		if (l != 0 && l != not ) {
			return l;
		}
		harness_nap(100);
	}
	fprintf(stderr, "no leader for %s %s\n", kind, name);
	return 0;
}

void fx_test_args(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
}

void fx_connect_ok(struct fx *f, uv_loop_t *loop, struct harness_cluster *cl,
                   unsigned i)
{
	int rv = fx_connect(f, loop, cl, i, "t1", "any", 2);
	if (rv != 0) {
		fprintf(stderr, "connect to node %u: %d %s\n", i + 1, rv,
		        f->message);
		harness_node_dump_log(cl, i);
	}
	assert_int_equal(rv, 0);
}

void fx_wait_ready(struct fx *f)
{
	for (int k = 0; k < 300; k++) {
		if (fx_cache_put(f, "ready", "k", "v", false, 0) == 0) {
			return;
		}
		fx_spin(f, 100);
	}
	fail_msg("the cluster never answered: %s", f->message);
}

void fx_start_cluster(struct harness_cluster *cl, unsigned n,
                      const char *const *args, uv_loop_t *loop, struct fx *f)
{
	assert_int_equal(harness_cluster_start(cl, n, args, true), 0);
	uv_loop_init(loop);
	for (unsigned i = 0; i < n; i++) {
		fx_connect_ok(&f[i], loop, cl, i);
	}
	for (unsigned i = 0; i < n; i++) {
		fx_wait_ready(&f[i]);
	}
}

void fx_wait_settled(struct harness_cluster *cl, unsigned i)
{
	static char out[1 << 18];
	uint64_t t0 = harness_mono_ms();
	for (;;) {
		int st = 0;
		bool settled = false;
		if (harness_http(cl->nodes[i].admin, "GET", "/v1/cluster", NULL,
		                 &st, out, sizeof out) == 0 &&
		    st == 200) {
			json_t *o = json_loads(out, 0, NULL), *g;
			size_t k;
			settled = o != NULL;
			json_array_foreach(json_object_get(o, "groups"), k, g)
			{
				json_t *l = json_object_get(g, "leader");
				json_t *v0 = json_array_get(
				    json_object_get(g, "voters"), 0);
				settled = settled && json_is_integer(l) &&
				          json_is_integer(v0) &&
				          json_integer_value(l) ==
				              json_integer_value(v0);
			}
			json_decref(o);
		}
		if (settled) {
			return;
		}
		if (harness_mono_ms() - t0 > 40000) {
			fail_msg("leaderships did not settle: %s", out);
		}
		harness_nap(100);
	}
}
