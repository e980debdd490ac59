/* Schedule passes and the built-in scheduler (flow_sched.h). */
#include "node/flow_sched.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_schedule.h"
#include "node/log.h"
#include "node/shards.h"
#include "store/result.h"
#include "store/store.h"
#include "wire/flow_route.h"
#include "wire/fsnp_opcode.h"

struct outbox_ent {
	const uint8_t *key; /* views into the pass's held results */
	size_t klen;
	const uint8_t *body;
	size_t blen;
	struct fsnp_bytes part;
	struct fsnp_bytes target_id;
	bool done;
};

struct held {
	uint8_t *p;
	size_t len;
};

struct pass {
	struct shards *s;
	const struct log *log;
	struct flow_sched_args a;
	uint8_t *id; /* FIRE's schedule id (owned) */
	int64_t now;
	uint32_t group, visited;
	unsigned waves; /* scans of this group so far */
	bool full_wave; /* the last scan returned a whole wave */
	int64_t remaining;
	uint32_t pending;

	/* this group's step */
	struct held *held; /* result bytes the views below point into */
	size_t n_held;
	struct flow_sched_rec *recs;
	bool *active;  /* previous target still active, per record */
	bool *foreign; /* the planned target id held by another flow */
	size_t n_recs;
	struct outbox_ent *ob;
	size_t n_ob, cap_ob;

	/* totals */
	int64_t claimed, fired, skipped, coalesced;
	struct wbuf errors; /* [id, msg] pairs, encoded one after another */
	uint32_t n_errors;
	char *last_target_id;
	char *last_skip_reason;
	char claim_error[256];
	bool failed;
	int fail_status;
	char fail_msg[512];
	/* FIRE: the item's result value */
	struct held manual;
	unsigned manual_tries; /* plans lost to a concurrent change */

	flow_sched_done_cb cb;
	void *data;
};

static void group_start(struct pass *p);
static void outbox_run(struct pass *p);

static const uint8_t *hold(struct pass *p, const uint8_t *b, size_t len)
{
	struct held *n = realloc(p->held, (p->n_held + 1) * sizeof *n);
	uint8_t *c = malloc(len ? len : 1);
	if (n == NULL || c == NULL) {
		free(c);
		if (n != NULL) {
			p->held = n;
		}
		return NULL;
	}
	p->held = n;
	memcpy(c, b, len);
	p->held[p->n_held].p = c;
	p->held[p->n_held].len = len;
	p->n_held++;
	return c;
}

static void step_reset(struct pass *p)
{
	for (size_t i = 0; i < p->n_held; i++) {
		free(p->held[i].p);
	}
	free(p->held);
	p->held = NULL;
	p->n_held = 0;
	free(p->recs);
	free(p->active);
	free(p->foreign);
	free(p->ob);
	p->recs = NULL;
	p->active = NULL;
	p->foreign = NULL;
	p->ob = NULL;
	p->n_recs = p->n_ob = p->cap_ob = 0;
}

static void pass_free(struct pass *p)
{
	step_reset(p);
	wbuf_free(&p->errors);
	free(p->last_target_id);
	free(p->last_skip_reason);
	free(p->manual.p);
	free(p->id);
	free(p);
}

static void pass_fail(struct pass *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pass_fail(struct pass *p, int status, const char *fmt, ...)
{
	va_list ap;
	if (p->failed) {
		return;
	}
	p->failed = true;
	p->fail_status = status;
	va_start(ap, fmt);
	vsnprintf(p->fail_msg, sizeof p->fail_msg, fmt, ap);
	va_end(ap);
}

/* The reply, then the callback. */
static void pass_finish(struct pass *p)
{
	struct wbuf b;
	struct fsnp_writer w;

	step_reset(p);
	if (p->failed) {
		p->cb(p->data, p->fail_status, NULL, 0, p->fail_msg);
		pass_free(p);
		return;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	if (p->id != NULL) {
		struct fsnp_val v;
		struct fsnp_bytes res = {NULL, 0}, t;
		if (p->manual.p == NULL ||
		    fsnp_value_decode(p->manual.p, p->manual.len, NULL, &v,
		                      NULL) != 0 ||
		    fsnp_map_bin(&v, "result", &res) != 0) {
			p->cb(p->data, 1, NULL, 0,
			      "ERR flow schedule is currently leased");
			wbuf_free(&b);
			pass_free(p);
			return;
		}
		if (fsnp_bytes_eq(res, "stale") &&
		    p->manual_tries < FLOW_SCHED_FIRE_TRIES) {
			/* Planned against a version another fire (the
			 * scheduler's) replaced meanwhile: plan again from
			 * what is there now. */
			p->manual_tries++;
			free(p->manual.p);
			p->manual.p = NULL;
			p->manual.len = 0;
			wbuf_free(&b);
			group_start(p);
			return;
		}
		if (fsnp_bytes_eq(res, "error") ||
		    fsnp_bytes_eq(res, "failed") ||
		    fsnp_bytes_eq(res, "stale")) {
			char msg[512] = "ERR flow schedule is currently leased";
			if (fsnp_map_bin(&v, "error", &t) == 0) {
				snprintf(msg, sizeof msg, "%.*s", (int)t.len,
				         (const char *)t.ptr);
			}
			p->cb(p->data, 1, NULL, 0, msg);
			wbuf_free(&b);
			pass_free(p);
			return;
		}
		struct fsnp_val sched, x;
		fsnp_map_get(&v, "schedule", &sched);
		fsnp_w_map_begin(&w);
		if (fsnp_bytes_eq(res, "fired")) {
			fsnp_w_key(&w, "fired");
			fsnp_w_i64(&w, 1);
			fsnp_w_key(&w, "target_id");
			fsnp_map_get(&v, "target_id", &x);
			fsnp_w_val(&w, &x);
		} else {
			fsnp_w_key(&w, "fired");
			fsnp_w_i64(&w, 0);
			fsnp_w_key(&w, "skipped");
			fsnp_w_i64(&w, 1);
			fsnp_w_key(&w, "reason");
			fsnp_map_get(&v, "reason", &x);
			fsnp_w_val(&w, &x);
		}
		fsnp_w_key(&w, "schedule");
		fsnp_w_val(&w, &sched);
		fsnp_w_map_end(&w);
	} else {
		fsnp_w_map_begin(&w);
		fsnp_w_key(&w, "claimed");
		fsnp_w_i64(&w, p->claimed);
		fsnp_w_key(&w, "fired");
		fsnp_w_i64(&w, p->fired);
		fsnp_w_key(&w, "skipped");
		fsnp_w_i64(&w, p->skipped);
		fsnp_w_key(&w, "coalesced");
		fsnp_w_i64(&w, p->coalesced);
		fsnp_w_key(&w, "errors");
		fsnp_w_array_begin(&w);
		if (p->errors.len > 0) {
			size_t off = 0;
			for (uint32_t i = 0; i < p->n_errors; i++) {
				struct fsnp_val e;
				size_t used;
				if (fsnp_value_decode(p->errors.data + off,
				                      p->errors.len - off, NULL,
				                      &e, &used) != 0) {
					break;
				}
				fsnp_w_val(&w, &e);
				off += used;
			}
		}
		fsnp_w_array_end(&w);
		if (p->last_target_id != NULL) {
			fsnp_w_key(&w, "last_target_id");
			fsnp_w_str(&w, p->last_target_id);
		}
		if (p->last_skip_reason != NULL) {
			fsnp_w_key(&w, "last_skip_reason");
			fsnp_w_str(&w, p->last_skip_reason);
		}
		if (p->claim_error[0] != '\0') {
			fsnp_w_key(&w, "claim_error");
			fsnp_w_str(&w, p->claim_error);
		}
		fsnp_w_map_end(&w);
	}
	if (fsnp_w_finish(&w) != 0 || b.oom) {
		p->cb(p->data, 4, NULL, 0, "BUSY out of memory");
	} else {
		p->cb(p->data, 0, b.data, b.len, NULL);
	}
	wbuf_free(&b);
	pass_free(p);
}

/* A store result's value (0) or its error text into msg (-1). */
static int result_value(int status, const uint8_t *res, size_t len,
                        struct fsnp_val *v, char *msg, size_t cap)
{
	if (status != SHARDS_OK) {
		snprintf(msg, cap, "ERR flow schedule group unavailable: %s",
		         shards_strerror(status));
		return -1;
	}
	if (len < 3 || res[0] != STORE_RESULT_VERSION ||
	    fsnp_value_decode(res + 2, len - 2, NULL, v, NULL) != 0) {
		snprintf(msg, cap, "ERR malformed result from the store");
		return -1;
	}
	if (res[1] != STORE_OK) {
		if (v->tag == FSNP_BIN) {
			snprintf(msg, cap, "%.*s", (int)v->as.bin.len,
			         (const char *)v->as.bin.ptr);
		} else {
			snprintf(msg, cap, "ERR flow schedule command failed");
		}
		return -1;
	}
	return 0;
}

static void next_group(struct pass *p)
{
	step_reset(p);
	if (!p->failed && p->id == NULL && p->remaining > 0 && p->full_wave &&
	    p->waves < FLOW_SCHED_WAVES_MAX) {
		/* The group may have more due: its next wave. */
		group_start(p);
		return;
	}
	p->waves = 0;
	p->visited++;
	if (p->failed || p->id != NULL || p->visited >= p->a.n_groups ||
	    p->remaining <= 0) {
		pass_finish(p);
		return;
	}
	p->group = p->a.first_group + p->visited;
	unsigned ng = shards_data_groups(p->s);
	if (p->group > ng) {
		p->group = 1 + (p->group - 1) % ng;
	}
	group_start(p);
}

/* --- OUTBOX_DONE ------------------------------------------------------------
 */

static void on_outbox_done(void *data, int status, const uint8_t *res,
                           size_t len)
{
	struct pass *p = data;
	struct fsnp_val v;
	char msg[256];
	if (result_value(status, res, len, &v, msg, sizeof msg) != 0) {
		log_warn(p->log, "flow-sched",
		         "group %" PRIu32 ": outbox cleanup: %s", p->group,
		         msg);
	}
	next_group(p);
}

static void outbox_finish(struct pass *p)
{
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t *cmd = NULL;
	size_t n = 0, done = 0;

	for (size_t i = 0; i < p->n_ob; i++) {
		done += p->ob[i].done;
	}
	if (done == 0) {
		next_group(p);
		return;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "keys");
	fsnp_w_array_begin(&w);
	for (size_t i = 0; i < p->n_ob; i++) {
		if (p->ob[i].done) {
			fsnp_w_bin(&w, p->ob[i].key, p->ob[i].klen);
		}
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_sched_cmd_wrap(FLOW_SCHED_KIND_OUTBOX_DONE, p->a.skew, b.data,
	                        b.len, &cmd, &n) != 0 ||
	    shards_propose_owned(p->s, p->group, cmd, n, on_outbox_done, p) !=
	        0) {
		wbuf_free(&b);
		next_group(p);
		return;
	}
	wbuf_free(&b);
}

struct create_op {
	struct pass *p;
	size_t i;
};

static void on_create(void *data, int status, const uint8_t *res, size_t len)
{
	struct create_op *op = data;
	struct pass *p = op->p;
	struct outbox_ent *e = &p->ob[op->i];
	struct fsnp_val v;
	char msg[512];

	free(op);
	if (result_value(status, res, len, &v, msg, sizeof msg) == 0) {
		e->done = true;
	} else if (status == SHARDS_OK) {
		/* Refused for good (an id taken by another flow since the
		 * pass checked it, an invalid target): retrying cannot
		 * help. */
		bool taken =
		    strncmp(msg, "ERR flow idempotency conflict", 29) == 0;
		log_warn(p->log, "flow-sched",
		         "target %.*s of a schedule in group %" PRIu32
		         " not created: %s",
		         (int)e->target_id.len, (const char *)e->target_id.ptr,
		         p->group, taken ? FLOW_SCHED_OWNER_CONFLICT : msg);
		e->done = true;
	}
	if (--p->pending == 0) {
		outbox_finish(p);
	}
}

static void outbox_run(struct pass *p)
{
	p->pending = 1;
	for (size_t i = 0; i < p->n_ob; i++) {
		struct outbox_ent *e = &p->ob[i];
		struct flow_cmd_meta meta = {p->a.skew, 0};
		struct flow_err err;
		struct create_op *op;
		uint8_t *cmd = NULL;
		size_t n = 0;
		uint32_t g;
		if (flow_cmd_encode(FSNP_OP_FLOW_CREATE, e->body, e->blen,
		                    &meta, &cmd, &n, &err) != 0) {
			log_warn(p->log, "flow-sched",
			         "target %.*s of a schedule in group %" PRIu32
			         " is invalid: %s",
			         (int)e->target_id.len,
			         (const char *)e->target_id.ptr, p->group,
			         err.msg);
			e->done = true;
			continue;
		}
		g = shards_group_of_slot(
		    p->s, flow_route_slot(e->part.ptr, e->part.len));
		op = malloc(sizeof *op);
		if (op == NULL) {
			free(cmd);
			continue;
		}
		op->p = p;
		op->i = i;
		p->pending++;
		if (shards_propose_owned(p->s, g, cmd, n, on_create, op) != 0) {
			free(op);
			p->pending--;
		}
	}
	if (--p->pending == 0) {
		outbox_finish(p);
	}
}

static int outbox_add(struct pass *p, const struct fsnp_val *ent)
{
	struct fsnp_bytes key, body;
	struct fsnp_val e;
	struct outbox_ent *o;
	if (fsnp_map_bin(ent, "key", &key) != 0 ||
	    fsnp_map_get(ent, "entry", &e) != 0 || e.tag != FSNP_MAP ||
	    fsnp_map_bin(&e, "body", &body) != 0) {
		return -1;
	}
	for (size_t i = 0; i < p->n_ob; i++) {
		if (p->ob[i].klen == key.len &&
		    memcmp(p->ob[i].key, key.ptr, key.len) == 0) {
			return 0;
		}
	}
	if (p->n_ob == p->cap_ob) {
		size_t cap = p->cap_ob ? p->cap_ob * 2 : 8;
		o = realloc(p->ob, cap * sizeof *o);
		if (o == NULL) {
			return -1;
		}
		p->ob = o;
		p->cap_ob = cap;
	}
	o = &p->ob[p->n_ob];
	memset(o, 0, sizeof *o);
	o->key = key.ptr;
	o->klen = key.len;
	o->body = body.ptr;
	o->blen = body.len;
	if (fsnp_map_bin(&e, "target_part", &o->part) != 0 ||
	    fsnp_map_bin(&e, "target_id", &o->target_id) != 0) {
		return -1;
	}
	p->n_ob++;
	return 0;
}

/* --- RECORD -----------------------------------------------------------------
 */

static void add_error(struct pass *p, struct fsnp_bytes id, const char *msg)
{
	struct fsnp_writer w;
	fsnp_w_init(&w, &p->errors);
	fsnp_w_array_begin(&w);
	fsnp_w_bin(&w, id.ptr, id.len);
	fsnp_w_str(&w, msg);
	fsnp_w_array_end(&w);
	if (fsnp_w_finish(&w) == 0) {
		p->n_errors++;
	}
}

static void set_text(char **dst, struct fsnp_bytes b)
{
	char *n = malloc(b.len + 1);
	if (n == NULL) {
		return;
	}
	memcpy(n, b.ptr, b.len);
	n[b.len] = '\0';
	free(*dst);
	*dst = n;
}

static void on_record(void *data, int status, const uint8_t *res, size_t len)
{
	struct pass *p = data;
	struct fsnp_val v, it, ob;
	struct fsnp_iter i;
	const uint8_t *copy;
	char msg[512];

	if (len > 0 && (copy = hold(p, res, len)) != NULL) {
		res = copy;
	}
	if (result_value(status, res, len, &v, msg, sizeof msg) != 0) {
		if (p->id != NULL || (p->claimed == 0 && p->visited == 0)) {
			pass_fail(p, 1, "%s", msg);
		} else {
			snprintf(p->claim_error, sizeof p->claim_error, "%s",
			         msg);
		}
		outbox_run(p); /* what an earlier pass left */
		return;
	}
	fsnp_iter_init(&i, &v);
	while (fsnp_iter_next(&i, NULL, &it)) {
		struct fsnp_bytes id = {NULL, 0}, r = {NULL, 0}, t;
		int64_t c = 0;
		fsnp_map_bin(&it, "id", &id);
		fsnp_map_bin(&it, "result", &r);
		fsnp_map_i64(&it, "coalesced", &c);
		if (p->id != NULL) {
			free(p->manual.p);
			p->manual.p = malloc(it.enc_len);
			if (p->manual.p != NULL) {
				memcpy(p->manual.p, it.enc, it.enc_len);
				p->manual.len = it.enc_len;
			}
		}
		if (fsnp_bytes_eq(r, "stale")) {
			continue;
		}
		p->claimed++;
		p->remaining--;
		if (c > 0) {
			p->coalesced += c;
		}
		if (fsnp_bytes_eq(r, "fired")) {
			p->fired++;
			if (fsnp_map_bin(&it, "target_id", &t) == 0) {
				set_text(&p->last_target_id, t);
			}
			if (fsnp_map_get(&it, "outbox", &ob) == 0) {
				outbox_add(p, &ob);
			}
		} else if (fsnp_bytes_eq(r, "skipped") ||
		           fsnp_bytes_eq(r, "queued")) {
			p->skipped++;
			if (fsnp_map_bin(&it, "reason", &t) == 0) {
				set_text(&p->last_skip_reason, t);
			}
		} else {
			char e[512] = "ERR flow schedule fire failed";
			if (fsnp_map_bin(&it, "error", &t) == 0) {
				snprintf(e, sizeof e, "%.*s", (int)t.len,
				         (const char *)t.ptr);
			}
			add_error(p, id, e);
		}
	}
	outbox_run(p);
}

static void record_propose(struct pass *p)
{
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t *cmd = NULL;
	size_t n = 0;
	struct flow_sched_plan *plan;

	if (p->n_recs == 0) {
		outbox_run(p);
		return;
	}
	plan = malloc(sizeof *plan);
	if (plan == NULL) {
		pass_fail(p, 4, "BUSY out of memory");
		outbox_run(p);
		return;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, p->now);
	fsnp_w_key(&w, "items");
	fsnp_w_array_begin(&w);
	size_t planned = 0;
	for (size_t i = 0; i < p->n_recs; i++) {
		int64_t fire_at =
		    p->a.fire_at_ms >= 0 ? p->a.fire_at_ms : p->now;
		flow_sched_plan(&p->recs[i], p->now, p->id != NULL, fire_at,
		                p->active[i], NULL, plan);
		if (p->foreign[i] && plan->outcome == FSO_FIRE) {
			plan->outcome = FSO_OWNER_CONFLICT;
		}
		if (p->a.wake && plan->outcome != FSO_FIRE) {
			/* Still behind its target: left to its retry. */
			continue;
		}
		flow_sched_plan_write(&w, &p->recs[i], plan);
		planned++;
	}
	fsnp_w_array_end(&w);
	fsnp_w_map_end(&w);
	free(plan);
	if (planned == 0) {
		wbuf_free(&b);
		outbox_run(p);
		return;
	}
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_sched_cmd_wrap(FLOW_SCHED_KIND_RECORD, p->a.skew, b.data,
	                        b.len, &cmd, &n) != 0) {
		wbuf_free(&b);
		pass_fail(p, 4, "BUSY out of memory");
		outbox_run(p);
		return;
	}
	wbuf_free(&b);
	if (shards_propose_owned(p->s, p->group, cmd, n, on_record, p) != 0) {
		pass_fail(p, 4, "BUSY flow schedule group busy");
		outbox_run(p);
	}
}

/* --- the previous targets ----------------------------------------------------
 */

struct target_op {
	struct pass *p;
	size_t i;
};

static void on_target(void *data, int status, const uint8_t *res, size_t len)
{
	struct target_op *op = data;
	struct pass *p = op->p;
	struct fsnp_val v;
	struct fsnp_bytes st;
	char msg[256];

	if (result_value(status, res, len, &v, msg, sizeof msg) != 0) {
		/* Unknown: assume it still runs, so that an overlap policy
		 * errs on the side of not doubling work. */
		p->active[op->i] = true;
	} else if (v.tag == FSNP_MAP && fsnp_map_bin(&v, "state", &st) == 0) {
		p->active[op->i] = !(fsnp_bytes_eq(st, "completed") ||
		                     fsnp_bytes_eq(st, "failed") ||
		                     fsnp_bytes_eq(st, "cancelled"));
	} else {
		p->active[op->i] = false;
	}
	free(op);
	if (--p->pending == 0) {
		record_propose(p);
	}
}

static bool needs_target(const struct flow_sched_rec *r)
{
	return (flow_sched_is(r, SS_KIND, "interval") ||
	        flow_sched_is(r, SS_KIND, "cron")) &&
	       r->s[SS_OVERLAP_POLICY].ptr != NULL &&
	       !flow_sched_is(r, SS_OVERLAP_POLICY, "allow") &&
	       r->s[SS_LAST_TARGET_ID].ptr != NULL;
}

static void target_check(struct pass *p, size_t i)
{
	const struct flow_sched_rec *r = &p->recs[i];
	struct fsnp_bytes tid = r->s[SS_LAST_TARGET_ID];
	struct fsnp_bytes part = r->s[SS_LAST_TARGET_PART];
	struct flow_cmd_meta meta = {p->a.skew, 0};
	struct flow_err err;
	struct target_op *op;
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t *cmd = NULL;
	size_t n = 0;
	unsigned bucket;

	for (size_t k = 0; k < p->n_ob; k++) {
		if (p->ob[k].target_id.len == tid.len &&
		    memcmp(p->ob[k].target_id.ptr, tid.ptr, tid.len) == 0) {
			p->active[i] = true; /* not even created yet */
			return;
		}
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "id");
	fsnp_w_bin(&w, tid.ptr, tid.len);
	if (part.ptr != NULL &&
	    !flow_route_is_auto(part.ptr, part.len, &bucket)) {
		fsnp_w_key(&w, "partition_key");
		fsnp_w_bin(&w, part.ptr, part.len);
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_cmd_encode(FSNP_OP_FLOW_GET, b.data, b.len, &meta, &cmd, &n,
	                    &err) != 0 ||
	    (op = malloc(sizeof *op)) == NULL) {
		free(cmd);
		wbuf_free(&b);
		p->active[i] = true;
		return;
	}
	wbuf_free(&b);
	op->p = p;
	op->i = i;
	p->pending++;
	uint32_t g = part.ptr != NULL
	                 ? shards_group_of_slot(
	                       p->s, flow_route_slot(part.ptr, part.len))
	                 : 1;
	if (shards_read_cmd(p->s, g, cmd, n, on_target, op) != 0) {
		free(op);
		p->pending--;
		p->active[i] = true;
	}
	free(cmd);
}

/* --- the planned targets' owners ---------------------------------------------
 */

struct owner_op {
	struct pass *p;
	size_t i;
	char proof[FLOW_SCHED_PROOF_MAX];
};

static void on_owner(void *data, int status, const uint8_t *res, size_t len)
{
	struct owner_op *op = data;
	struct pass *p = op->p;
	struct fsnp_val v, attrs;
	struct fsnp_bytes got;
	char msg[256];

	/* Only a flow that certainly exists without this schedule's proof
	 * holds the occurrence back; an unanswered read leaves it to the
	 * idempotent create. */
	if (result_value(status, res, len, &v, msg, sizeof msg) == 0 &&
	    v.tag == FSNP_MAP) {
		p->foreign[op->i] =
		    fsnp_map_get(&v, "attributes", &attrs) != 0 ||
		    attrs.tag != FSNP_MAP ||
		    fsnp_map_bin(&attrs, FLOW_SCHED_OWNER_ATTR, &got) != 0 ||
		    !fsnp_bytes_eq(got, op->proof);
	}
	free(op);
	if (--p->pending == 0) {
		record_propose(p);
	}
}

/* Reads the target id the schedule's occurrence would create: a flow
 * there without the schedule's owner proof belongs to someone else. */
static void owner_check(struct pass *p, size_t i)
{
	const struct flow_sched_rec *r = &p->recs[i];
	struct flow_sched_plan *plan = malloc(sizeof *plan);
	struct flow_cmd_meta meta = {p->a.skew, 0};
	struct flow_err err;
	struct owner_op *op = NULL;
	char pbuf[FLOW_AUTO_PARTITION_MAX];
	struct fsnp_bytes part;
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t *cmd = NULL;
	size_t n = 0, tl;

	wbuf_init(&b);
	if (plan == NULL || (op = malloc(sizeof *op)) == NULL) {
		goto out;
	}
	flow_sched_plan(r, p->now, p->id != NULL,
	                p->a.fire_at_ms >= 0 ? p->a.fire_at_ms : p->now, false,
	                NULL, plan);
	if (plan->outcome != FSO_FIRE ||
	    flow_sched_owner_proof(r, plan->target_id, op->proof) != 0) {
		goto out;
	}
	tl = strlen(plan->target_id);
	for (size_t k = 0; k < p->n_ob; k++) {
		if (p->ob[k].target_id.len == tl &&
		    memcmp(p->ob[k].target_id.ptr, plan->target_id, tl) == 0) {
			goto out; /* this schedule's, not created yet */
		}
	}
	fsnp_w_init(&w, &b);
	flow_sched_target_get_body(&w, r, plan, pbuf, &part);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_cmd_encode(FSNP_OP_FLOW_GET, b.data, b.len, &meta, &cmd, &n,
	                    &err) != 0) {
		goto out;
	}
	op->p = p;
	op->i = i;
	p->pending++;
	if (shards_read_cmd(
	        p->s,
	        shards_group_of_slot(p->s, flow_route_slot(part.ptr, part.len)),
	        cmd, n, on_owner, op) != 0) {
		p->pending--;
		goto out;
	}
	op = NULL;
out:
	free(op);
	free(cmd);
	free(plan);
	wbuf_free(&b);
}

/* --- SCAN --------------------------------------------------------------------
 */

static void on_scan(void *data, int status, const uint8_t *res, size_t len)
{
	struct pass *p = data;
	struct fsnp_val v, list, e;
	struct fsnp_iter it;
	const uint8_t *copy = NULL;
	char msg[512];
	size_t n;

	if (len > 0) {
		copy = hold(p, res, len);
	}
	if (copy == NULL ||
	    result_value(status, copy, len, &v, msg, sizeof msg) != 0) {
		if (copy == NULL) {
			snprintf(msg, sizeof msg, "BUSY out of memory");
		}
		if (p->id != NULL || (p->claimed == 0 && p->visited == 0)) {
			pass_fail(p, 1, "%s", msg);
		} else {
			snprintf(p->claim_error, sizeof p->claim_error, "%s",
			         msg);
		}
		pass_finish(p);
		return;
	}
	if (fsnp_map_get(&v, "outbox", &list) == 0) {
		fsnp_iter_init(&it, &list);
		while (fsnp_iter_next(&it, NULL, &e)) {
			outbox_add(p, &e);
		}
	}
	if (fsnp_map_get(&v, "schedules", &list) != 0 ||
	    list.tag != FSNP_ARRAY) {
		list.tag = FSNP_NIL;
		list.as.count = 0;
	}
	n = list.tag == FSNP_ARRAY ? list.as.count : 0;
	if (p->id != NULL && n == 0) {
		pass_fail(p, 1, "ERR flow schedule not found");
		outbox_run(p);
		return;
	}
	p->recs = calloc(n ? n : 1, sizeof *p->recs);
	p->active = calloc(n ? n : 1, sizeof *p->active);
	p->foreign = calloc(n ? n : 1, sizeof *p->foreign);
	if (p->recs == NULL || p->active == NULL || p->foreign == NULL) {
		pass_fail(p, 4, "BUSY out of memory");
		outbox_run(p);
		return;
	}
	fsnp_iter_init(&it, &list);
	while (fsnp_iter_next(&it, NULL, &e)) {
		if (flow_sched_rec_decode(&e, &p->recs[p->n_recs]) == 0) {
			p->n_recs++;
		}
	}
	p->full_wave = n >= FLOW_SCHED_WAVE;
	if (p->id != NULL && p->n_recs == 1 &&
	    !flow_sched_is(&p->recs[0], SS_STATE, "active")) {
		pass_fail(p, 1, "ERR flow schedule is not active");
		outbox_run(p);
		return;
	}
	p->pending = 1;
	for (size_t i = 0; i < p->n_recs; i++) {
		if (needs_target(&p->recs[i])) {
			target_check(p, i);
		}
		owner_check(p, i);
	}
	if (--p->pending == 0) {
		record_propose(p);
	}
}

static void group_start(struct pass *p)
{
	struct wbuf b;
	struct fsnp_writer w;
	uint8_t *cmd = NULL;
	size_t n = 0;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w,
	           p->a.wake ? p->now + FLOW_SCHED_WAKE_HORIZON_MS : p->now);
	if (p->a.wake) {
		fsnp_w_key(&w, "held_only");
		fsnp_w_bool(&w, true);
	}
	/* One wave: at most FLOW_SCHED_WAVE schedules read and fired
	 * before the next is read. */
	fsnp_w_key(&w, "limit");
	fsnp_w_i64(&w, p->remaining <= 0                ? 1
	               : p->remaining > FLOW_SCHED_WAVE ? FLOW_SCHED_WAVE
	                                                : p->remaining);
	p->waves++;
	p->full_wave = false;
	if (p->id != NULL) {
		fsnp_w_key(&w, "id");
		fsnp_w_bin(&w, p->id, p->a.id_len);
	}
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_sched_cmd_wrap(FLOW_SCHED_KIND_SCAN, p->a.skew, b.data, b.len,
	                        &cmd, &n) != 0) {
		wbuf_free(&b);
		pass_fail(p, 4, "BUSY out of memory");
		pass_finish(p);
		return;
	}
	wbuf_free(&b);
	if (shards_read_cmd(p->s, p->group, cmd, n, on_scan, p) != 0) {
		free(cmd);
		pass_fail(p, 4, "BUSY flow schedule group busy");
		pass_finish(p);
		return;
	}
	free(cmd);
}

int flow_sched_pass(struct shards *s, const struct log *log,
                    const struct flow_sched_args *a, flow_sched_done_cb cb,
                    void *data)
{
	struct pass *p = calloc(1, sizeof *p);
	int64_t clock;
	if (p == NULL) {
		return -1;
	}
	p->s = s;
	p->log = log;
	p->a = *a;
	p->cb = cb;
	p->data = data;
	wbuf_init(&p->errors);
	if (a->id != NULL) {
		p->id = malloc(a->id_len ? a->id_len : 1);
		if (p->id == NULL) {
			free(p);
			return -1;
		}
		memcpy(p->id, a->id, a->id_len);
		p->a.id = p->id;
	}
	/* The pass's time: the leader's clock, or the caller's within the
	 * allowed skew of it. Read afresh: the loop's cached reading can be
	 * a millisecond behind a schedule created just before, which would
	 * then not be due to a FIRE_DUE sent right after its reply. */
	clock = (int64_t)shards_now_fresh_ms(s);
	p->now = clock;
	if (a->now_ms >= 0) {
		int64_t lo = clock - (int64_t)a->skew,
		        hi = clock + (int64_t)a->skew;
		p->now = a->now_ms < lo ? lo : a->now_ms > hi ? hi : a->now_ms;
	}
	p->remaining = a->id != NULL ? 1 : a->limit > 0 ? a->limit : 1;
	p->group = a->first_group;
	if (p->a.n_groups == 0) {
		p->a.n_groups = 1;
	}
	if (a->id != NULL) {
		char buf[FLOW_AUTO_PARTITION_MAX];
		size_t n = flow_sched_partition(a->id, a->id_len, buf);
		p->group = shards_group_of_slot(
		    s, flow_route_slot((const uint8_t *)buf, n));
		p->a.n_groups = 1;
	}
	group_start(p);
	return 0;
}

/* --- the built-in scheduler ------------------------------------------------
 */

/* How far ahead an idle group is probed (see group_rests). */
#define SCHED_LOOKAHEAD_MS 60000

/* Nothing of a group was due before `until` at applied index `applied`. */
struct sched_rest {
	uint64_t applied;
	uint64_t until;
};

struct flow_scheduler {
	uv_timer_t timer;
	struct shards *s;
	const struct log *log;
	uint64_t skew;
	bool *inflight;          /* by group */
	struct sched_rest *rest; /* by group (see group_rests) */
	unsigned groups;
	unsigned passes;
	bool stopping, closed;
	bool wake; /* a Flow write since the last wake passes */
};

struct tick_pass {
	struct flow_scheduler *fs;
	uint32_t group;
};

static void sched_maybe_free(struct flow_scheduler *fs)
{
	if (fs->closed && fs->passes == 0) {
		free(fs->inflight);
		free(fs->rest);
		free(fs);
	}
}

static void on_tick_done(void *data, int status, const uint8_t *value,
                         size_t len, const char *msg)
{
	struct tick_pass *t = data;
	struct flow_scheduler *fs = t->fs;
	(void)value;
	(void)len;
	if (status != 0 && !fs->stopping) {
		log_debug(fs->log, "flow-sched", "group %" PRIu32 ": %s",
		          t->group, msg != NULL ? msg : "failed");
	}
	fs->inflight[t->group] = false;
	fs->passes--;
	free(t);
	sched_maybe_free(fs);
}

/* Whether group g (led here) may have work: a local read of its due
 * schedules and outbox, without a leadership round. A stale answer is
 * harmless: the pass itself reads linearizably and records only at the
 * versions it read. */
static bool group_has_work(struct flow_scheduler *fs, uint32_t g, uint64_t now,
                           bool held)
{
	struct wbuf b;
	struct fsnp_writer w;
	struct fsm_result out = {NULL, 0};
	struct fsnp_val v, list;
	uint8_t *cmd = NULL;
	size_t n = 0;
	bool work = true;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "now_ms");
	fsnp_w_i64(&w, (int64_t)now + (held ? FLOW_SCHED_WAKE_HORIZON_MS : 0));
	if (held) {
		fsnp_w_key(&w, "held_only");
		fsnp_w_bool(&w, true);
	}
	fsnp_w_key(&w, "limit");
	fsnp_w_i64(&w, 1);
	fsnp_w_map_end(&w);
	if (fsnp_w_finish(&w) != 0 || b.oom ||
	    flow_sched_cmd_wrap(FLOW_SCHED_KIND_SCAN, fs->skew, b.data, b.len,
	                        &cmd, &n) != 0) {
		wbuf_free(&b);
		return true;
	}
	wbuf_free(&b);
	if (store_read(shards_store(fs->s), g, now, cmd, n, &out) == 0 &&
	    out.len >= 3 && out.data[1] == STORE_OK &&
	    fsnp_value_decode(out.data + 2, out.len - 2, NULL, &v, NULL) == 0) {
		work = false;
		if (fsnp_map_get(&v, "schedules", &list) == 0 &&
		    list.tag == FSNP_ARRAY && list.as.count > 0) {
			work = true;
		}
		if (!held && fsnp_map_get(&v, "outbox", &list) == 0 &&
		    list.tag == FSNP_ARRAY && list.as.count > 0) {
			work = true;
		}
	}
	free(out.data);
	free(cmd);
	return work;
}

/* Whether led group g can be left alone this tick. Due schedules and the
 * outbox are sorted rows that only applied entries change, so a probe
 * finding nothing due up to now + SCHED_LOOKAHEAD_MS holds until then or
 * until the group applies an entry: an idle group then costs a read a
 * minute instead of ten a second. */
static bool group_rests(struct flow_scheduler *fs, uint32_t g, uint64_t now)
{
	uint64_t applied = shards_group_applied(fs->s, g);
	if (applied == fs->rest[g].applied && now < fs->rest[g].until &&
	    fs->rest[g].until - now <= SCHED_LOOKAHEAD_MS) {
		return true;
	}
	if (group_has_work(fs, g, now + SCHED_LOOKAHEAD_MS, false)) {
		fs->rest[g].until = 0;
		return false;
	}
	fs->rest[g].applied = applied;
	fs->rest[g].until = now + SCHED_LOOKAHEAD_MS;
	return true;
}

static void on_tick(uv_timer_t *timer)
{
	struct flow_scheduler *fs = timer->data;
	bool wake = fs->wake;
	fs->wake = false;
	for (uint32_t g = 1; g <= fs->groups; g++) {
		struct flow_sched_args a = {
		    .skew = fs->skew,
		    .now_ms = -1,
		    .limit = FLOW_SCHED_PASS_LIMIT,
		    .first_group = g,
		    .n_groups = 1,
		    .id = NULL,
		    .fire_at_ms = -1,
		};
		struct tick_pass *t;
		bool self = false;
		uint64_t now = shards_now_ms(fs->s);
		if (fs->inflight[g]) {
			fs->wake |=
			    wake; /* this group's wake at a later tick */
			continue;
		}
		shards_leader(fs->s, g, &self);
		if (!self) {
			continue;
		}
		/* An idle group is probed once a minute; a wake (a flow
		 * ended somewhere) may release held occurrences anyway. */
		if (!wake && group_rests(fs, g, now)) {
			continue;
		}
		if (group_has_work(fs, g, now, false)) {
			fs->wake |= wake;
		} else if (wake && group_has_work(fs, g, now, true)) {
			a.wake = true;
		} else {
			continue;
		}
		if ((t = malloc(sizeof *t)) == NULL) {
			continue;
		}
		t->fs = fs;
		t->group = g;
		fs->inflight[g] = true;
		fs->passes++;
		if (flow_sched_pass(fs->s, fs->log, &a, on_tick_done, t) != 0) {
			fs->inflight[g] = false;
			fs->passes--;
			free(t);
		}
	}
}

void flow_scheduler_wake(void *data)
{
	struct flow_scheduler *fs = data;
	if (fs != NULL && !fs->stopping) {
		fs->wake = true;
	}
}

int flow_scheduler_start(struct flow_scheduler **out, uv_loop_t *loop,
                         struct shards *s, const struct log *log, uint64_t skew)
{
	struct flow_scheduler *fs = calloc(1, sizeof *fs);
	if (fs == NULL) {
		return -1;
	}
	fs->s = s;
	fs->log = log;
	fs->skew = skew;
	fs->groups = shards_data_groups(s);
	fs->inflight = calloc(fs->groups + 1, sizeof *fs->inflight);
	fs->rest = calloc(fs->groups + 1, sizeof *fs->rest);
	if (fs->inflight == NULL || fs->rest == NULL ||
	    uv_timer_init(loop, &fs->timer) != 0) {
		free(fs->inflight);
		free(fs->rest);
		free(fs);
		return -1;
	}
	fs->timer.data = fs;
	uv_timer_start(&fs->timer, on_tick, FLOW_SCHED_TICK_MS,
	               FLOW_SCHED_TICK_MS);
	*out = fs;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct flow_scheduler *fs = h->data;
	fs->closed = true;
	sched_maybe_free(fs);
}

void flow_scheduler_stop(struct flow_scheduler *fs)
{
	if (fs == NULL || fs->stopping) {
		return;
	}
	fs->stopping = true;
	uv_timer_stop(&fs->timer);
	uv_close((uv_handle_t *)&fs->timer, on_timer_closed);
}
