/* Felix consumer groups: group_poll (with long polls), group_ack,
 * group_nack, group_discard, group_redrive and group_dead_letters, on the
 * store's replicated claims (STORE_OP_CG_*), served by the leader of the
 * stream shard only: any other node refuses with an error naming the
 * leader, never with an empty batch.
 *
 * A poll is a proposed command, so every claim is decided in apply with
 * the entry's time. A poll with wait_ms > 0 that finds nothing is parked
 * (struct gwait) until the shard's stream grows (the store observer), a
 * nack or redrive of the same group is applied through this node, the
 * group's earliest claim deadline passes (the store answers every poll
 * with it, so a lapsed claim is redelivered to a waiting poll at once), or
 * its wait ends (capped by felix-group-max-wait-ms); then it polls again,
 * and the poll at the end of the wait answers whatever it finds. The waiter is
 * registered before its first poll is proposed and every append meanwhile
 * marks it dirty, so an append applied between the poll's entry and its
 * answer is not missed (register before read). Observer callbacks run
 * inside apply, where nothing may be proposed: they only mark waiters and
 * arm a zero timer (gwake) that proposes the polls. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/felix/felix_internal.h"
#include "node/felix/scopes.h"
#include "node/shards.h"
#include "store/store.h"

/* Dead letters listed per group_dead_letters. */
#define DEAD_LIST_MAX 100000
/* Bytes a group_records answer is kept to (a frame may hold 4 MiB). */
#define ANSWER_BUDGET (3u << 20)

/* A long poll: registered from its first proposal until it is answered. */
struct gwait {
	struct gwait *prev, *next;
	struct freq *r;
	uint64_t deadline; /* loop ms */
	uint64_t lapse;    /* loop ms when a claim of the group lapses, or 0 */
	bool dirty;        /* a change since the last poll was proposed */
	bool parked;       /* waiting (no poll in flight) */
};

/* The fields every group request carries. */
struct gfields {
	const char *t, *ns, *stream, *group;
	uint32_t shard;
	uint64_t request_id;
};

static void fields_of(const struct felix_msg *m, struct gfields *f)
{
	switch (m->type) {
	case FELIX_MSG_GROUP_POLL:
		f->t = m->u.group_poll.tenant_id;
		f->ns = m->u.group_poll.namespace;
		f->stream = m->u.group_poll.stream;
		f->group = m->u.group_poll.group;
		f->shard = m->u.group_poll.shard;
		f->request_id = m->u.group_poll.request_id;
		break;
	case FELIX_MSG_GROUP_DEAD_LETTERS:
		f->t = m->u.group_dead_letters.tenant_id;
		f->ns = m->u.group_dead_letters.namespace;
		f->stream = m->u.group_dead_letters.stream;
		f->group = m->u.group_dead_letters.group;
		f->shard = m->u.group_dead_letters.shard;
		f->request_id = m->u.group_dead_letters.request_id;
		break;
	default: /* ack, nack, discard, redrive */
		f->t = m->u.group_settle.tenant_id;
		f->ns = m->u.group_settle.namespace;
		f->stream = m->u.group_settle.stream;
		f->group = m->u.group_settle.group;
		f->shard = m->u.group_settle.shard;
		f->request_id = m->u.group_settle.request_id;
		break;
	}
}

/* ---- waiters --------------------------------------------------------------
 */

static void wait_unlink(struct felix_server *s, struct gwait *w)
{
	if (w->prev != NULL) {
		w->prev->next = w->next;
	} else {
		s->waits = w->next;
	}
	if (w->next != NULL) {
		w->next->prev = w->prev;
	}
	if (w->parked) {
		s->n_parked--;
		metric_set(s->m.group_parked, (int64_t)s->n_parked);
	}
	w->r->ext = NULL;
	w->r->abandon = NULL;
	free(w);
}

static void on_gwake(uv_timer_t *t);

/* When a parked waiter must poll again: at once when dirty, else at the
 * earlier of its deadline and its group's next claim lapse. */
static uint64_t wait_due(const struct gwait *w, uint64_t now)
{
	if (w->dirty) {
		return now;
	}
	return w->lapse != 0 && w->lapse < w->deadline ? w->lapse : w->deadline;
}

/* (Re)arms the wake timer for the earliest parked waiter. */
static void gwake_arm(struct felix_server *s)
{
	uint64_t now = uv_now(s->loop), at = UINT64_MAX;
	if (s->closing) {
		return;
	}
	for (struct gwait *w = s->waits; w != NULL; w = w->next) {
		if (!w->parked) {
			continue;
		}
		uint64_t due = wait_due(w, now);
		if (due < at) {
			at = due;
		}
	}
	if (at == UINT64_MAX) {
		uv_timer_stop(&s->gwake);
		return;
	}
	uv_timer_start(&s->gwake, on_gwake, at > now ? at - now : 0, 0);
}

static bool same_topic(const struct freq *r, struct store_slice scope,
                       uint32_t shard)
{
	return r->shard == shard && r->scope_len == scope.len &&
	       memcmp(r->scope, scope.p, scope.len) == 0;
}

/* Marks the waiters of (scope, shard) and, with `group`, of that group
 * only; wakes the parked ones. */
static void wake_topic(struct felix_server *s, struct store_slice scope,
                       uint32_t shard, const char *group)
{
	bool any = false;
	for (struct gwait *w = s->waits; w != NULL; w = w->next) {
		if (!same_topic(w->r, scope, shard) ||
		    (group != NULL &&
		     strcmp(w->r->msg.u.group_poll.group, group) != 0)) {
			continue;
		}
		w->dirty = true;
		any = any || w->parked;
	}
	if (any) {
		gwake_arm(s);
	}
}

void group_on_append(struct felix_server *s, struct store_slice scope,
                     uint32_t shard)
{
	if (s->waits != NULL) {
		wake_topic(s, scope, shard, NULL);
	}
}

void group_free(struct felix_server *s)
{
	while (s->waits != NULL) {
		struct freq *r = s->waits->r;
		bool parked = s->waits->parked;
		wait_unlink(s, s->waits);
		if (parked && r->st == NULL) {
			freq_free(r);
		}
	}
}

/* ---- poll -----------------------------------------------------------------
 */

static int propose_poll(struct freq *r);

static void reply_records(struct freq *r, struct store_result *sr, uint32_t n)
{
	struct felix_server *s = r->srv;
	struct felix_msg m;
	struct felix_group_record *recs = calloc(n ? n : 1, sizeof *recs);
	struct store_value v;
	if (recs == NULL) {
		freq_error(r, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct store_value off, att, pay;
		if (!store_result_next(sr, &v) || v.tag != STORE_T_ARRAY ||
		    v.n != 3 || !store_result_next(sr, &off) ||
		    off.tag != STORE_T_U64 || !store_result_next(sr, &att) ||
		    att.tag != STORE_T_U64 || !store_result_next(sr, &pay) ||
		    pay.tag != STORE_T_BYTES) {
			free(recs);
			freq_error(r, "malformed store answer");
			return;
		}
		recs[i].offset = off.u;
		recs[i].has_attempts = true;
		recs[i].attempts = (uint32_t)att.u;
		recs[i].payload.data = (uint8_t *)pay.p;
		recs[i].payload.len = pay.len;
	}
	felix_msg_init(&m, FELIX_MSG_GROUP_RECORDS);
	m.u.group_records.records.items = recs;
	m.u.group_records.records.count = n;
	m.u.group_records.request_id = r->msg.u.group_poll.request_id;
	metric_add(s->m.group_records, n);
	freq_reply_msg(r, &m);
	free(recs);
}

static void on_polled(void *data, int status, const uint8_t *res, size_t len)
{
	struct freq *r = data;
	struct felix_server *s = r->srv;
	struct gwait *w = r->ext;
	struct store_result sr;
	struct store_value v, next;
	char msg[256];
	if (r->st == NULL) {
		/* Nobody waits any more; what this poll claimed is handed
		 * out again once its visibility timeout lapses. */
		if (w != NULL) {
			wait_unlink(s, w);
		}
		freq_free(r);
		return;
	}
	if (status != SHARDS_OK || store_result_open(res, len, &sr) != 0 ||
	    sr.status != STORE_OK || !store_result_next(&sr, &v) ||
	    v.tag != STORE_T_ARRAY || v.n != 2 ||
	    !store_result_next(&sr, &next) || next.tag != STORE_T_U64 ||
	    !store_result_next(&sr, &v) || v.tag != STORE_T_ARRAY) {
		if (status != SHARDS_OK) {
			snprintf(msg, sizeof msg, "%s",
			         felix_shards_message(status));
		} else if (store_result_open(res, len, &sr) == 0 &&
		           sr.status != STORE_OK) {
			felix_result_message(&sr, msg, sizeof msg,
			                     "poll refused");
		} else {
			snprintf(msg, sizeof msg, "malformed store answer");
		}
		if (w != NULL) {
			wait_unlink(s, w);
		}
		freq_error(r, msg);
		return;
	}
	if (v.n == 0 && w != NULL && uv_now(s->loop) < w->deadline &&
	    !s->closing) {
		if (w->dirty) {
			w->dirty = false;
			propose_poll(r); /* answers r itself if it fails */
			return;
		} else {
			/* The next deadline is in entry time (this leader's
			 * wall clock, never behind it): poll again once the
			 * wall clock passes it. */
			uint64_t wall = shards_now_ms(s->shards);
			w->lapse = 0;
			if (next.u != 0) {
				w->lapse = uv_now(s->loop) + 1 +
				           (next.u > wall ? next.u - wall : 0);
			}
			w->parked = true;
			s->n_parked++;
			metric_set(s->m.group_parked, (int64_t)s->n_parked);
			gwake_arm(s);
			return;
		}
	}
	if (w != NULL) {
		wait_unlink(s, w);
	}
	reply_records(r, &sr, v.n);
}

static int propose_poll(struct freq *r)
{
	struct felix_server *s = r->srv;
	const struct felix_msg_group_poll *q = &r->msg.u.group_poll;
	struct store_cmd c;
	uint8_t *cmd = NULL;
	size_t clen;
	const char *e;
	memset(&c, 0, sizeof c);
	c.op = STORE_OP_CG_POLL;
	c.scope.p = (const uint8_t *)r->scope;
	c.scope.len = r->scope_len;
	c.shard = r->shard;
	c.group.p = (const uint8_t *)q->group;
	c.group.len = strlen(q->group);
	c.max = q->max_records == 0 ? 32
	        : q->max_records > FELIX_GROUP_MAX_RECORDS
	            ? FELIX_GROUP_MAX_RECORDS
	            : q->max_records;
	/* The answer is one JSON frame: keep it (base64 payloads) within
	 * ANSWER_BUDGET at the shard's average record size. */
	struct store_stream_info info;
	struct store_slice scope = {(const uint8_t *)r->scope, r->scope_len};
	if (store_stream_info(shards_store(s->shards), r->group, scope,
	                      r->shard, &info) == 0 &&
	    info.tail > info.head) {
		uint64_t avg = info.bytes / (info.tail - info.head);
		uint64_t fit = ANSWER_BUDGET / (avg / 3 * 4 + 64);
		if (c.max > fit) {
			c.max = fit > 0 ? fit : 1;
		}
	}
	c.visibility_ms = s->cfg.group_visibility_ms;
	c.attempts = s->cfg.group_max_attempts;
	if (store_cmd_encode(&c, &cmd, &clen, &e) != 0) {
		if (r->ext != NULL) {
			wait_unlink(s, r->ext);
		}
		freq_error(r, e);
		return -1;
	}
	metric_add(s->m.group_polls, 1);
	int rv = shards_propose(s->shards, r->group, cmd, clen, on_polled, r);
	free(cmd);
	if (rv != SHARDS_OK) {
		if (r->ext != NULL) {
			wait_unlink(s, r->ext);
		}
		freq_error(r, felix_shards_message(rv));
		return -1;
	}
	return 0;
}

static void on_gwake(uv_timer_t *t)
{
	struct felix_server *s = t->data;
	uint64_t now = uv_now(s->loop);
	struct gwait *w = s->waits;
	while (w != NULL) {
		struct gwait *next = w->next;
		if (w->parked && now >= wait_due(w, now)) {
			w->parked = false;
			w->dirty = false;
			s->n_parked--;
			metric_set(s->m.group_parked, (int64_t)s->n_parked);
			/* At the deadline this poll answers whatever it
			 * finds (on_polled sees the wait is over). */
			propose_poll(w->r);
		}
		w = next;
	}
	gwake_arm(s);
}

/* The stream went away while the poll was parked (no callback pending). */
static void poll_abandon(struct freq *r)
{
	struct gwait *w = r->ext;
	if (w != NULL && w->parked) {
		wait_unlink(r->srv, w);
		freq_free(r);
	}
	/* Otherwise a poll is in flight and on_polled frees it. */
}

/* ---- settles and dead letters ------------------------------------------- */

static void on_settled(void *data, int status, const uint8_t *res, size_t len)
{
	struct freq *r = data;
	struct store_result sr;
	char msg[256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0) {
		freq_error(r, "malformed store answer");
		return;
	}
	if (sr.status != STORE_OK) {
		felix_result_message(&sr, msg, sizeof msg, "refused");
		freq_error(r, msg);
		return;
	}
	/* A nack or redrive makes a record deliverable now. */
	if (r->msg.type == FELIX_MSG_GROUP_NACK ||
	    r->msg.type == FELIX_MSG_GROUP_REDRIVE) {
		struct store_slice scope = {(const uint8_t *)r->scope,
		                            r->scope_len};
		wake_topic(r->srv, scope, r->shard,
		           r->msg.u.group_settle.group);
	}
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_CACHE_OK);
	m.u.cache_ok.request_id = r->msg.u.group_settle.request_id;
	freq_reply_msg(r, &m);
}

static void on_dead_letters(void *data, int status, const uint8_t *res,
                            size_t len)
{
	struct freq *r = data;
	struct store_result sr;
	struct store_value v;
	char msg[256];
	if (r->st == NULL) {
		freq_free(r);
		return;
	}
	if (status != SHARDS_OK) {
		freq_error(r, felix_shards_message(status));
		return;
	}
	if (store_result_open(res, len, &sr) != 0) {
		freq_error(r, "malformed store answer");
		return;
	}
	if (sr.status != STORE_OK) {
		felix_result_message(&sr, msg, sizeof msg, "refused");
		freq_error(r, msg);
		return;
	}
	if (!store_result_next(&sr, &v) || v.tag != STORE_T_ARRAY) {
		freq_error(r, "malformed store answer");
		return;
	}
	uint64_t *offs = calloc(v.n ? v.n : 1, sizeof *offs);
	if (offs == NULL) {
		freq_error(r, "out of memory");
		return;
	}
	uint32_t n = v.n;
	for (uint32_t i = 0; i < n; i++) {
		if (!store_result_next(&sr, &v) || v.tag != STORE_T_U64) {
			free(offs);
			freq_error(r, "malformed store answer");
			return;
		}
		offs[i] = v.u;
	}
	struct felix_msg m;
	felix_msg_init(&m, FELIX_MSG_GROUP_DEAD_LETTER_LIST);
	m.u.group_dead_letter_list.offsets.items = offs;
	m.u.group_dead_letter_list.offsets.count = n;
	m.u.group_dead_letter_list.request_id =
	    r->msg.u.group_dead_letters.request_id;
	freq_reply_msg(r, &m);
	free(offs);
}

static uint8_t settle_op(enum felix_msg_type t)
{
	switch (t) {
	case FELIX_MSG_GROUP_ACK:
		return STORE_OP_CG_ACK;
	case FELIX_MSG_GROUP_NACK:
		return STORE_OP_CG_NACK;
	case FELIX_MSG_GROUP_DISCARD:
		return STORE_OP_CG_DISCARD;
	default:
		return STORE_OP_CG_REDRIVE;
	}
}

/* ---- requests ------------------------------------------------------------ */

bool group_handle(struct fstream *st, struct felix_msg *m)
{
	struct felix_server *s = st->conn->srv;
	struct gfields f;
	struct scope_info info;
	char err[512], what[SCOPES_FULL_MAX + 64];
	fields_of(m, &f);
	if (!fstream_tenant_ok(st, f.t, err, sizeof err)) {
		fstream_reply_error(st, err);
		return true;
	}
	int res = fstream_resolve(st, STORE_SCOPE_STREAM, f.t, f.ns, f.stream,
	                          &info, err, sizeof err);
	if (res == RES_BLOCKED) {
		return false;
	}
	if (res != RES_FOUND) {
		fstream_reply_error(st, err);
		return true;
	}
	if (f.shard >= info.shards) {
		snprintf(err, sizeof err,
		         "shard %u out of range: the stream has %u shards",
		         (unsigned)f.shard, (unsigned)info.shards);
		fstream_reply_error(st, err);
		return true;
	}
	if (f.group[0] == '\0' || strlen(f.group) > STORE_NAME_MAX) {
		fstream_reply_error(st, "consumer group name must be 1 to 4096 "
		                        "bytes");
		return true;
	}
	uint32_t group =
	    shards_group_of_scope(s->shards, info.full, info.full_len, f.shard);
	/* Claims and acknowledgements meet in one place: the leader. */
	snprintf(what, sizeof what, "shard %u of stream %s", (unsigned)f.shard,
	         info.full);
	struct wbuf lw;
	wbuf_init(&lw);
	if (felix_leader_answer(st, group, what, &lw) != 0) {
		fstream_reply_frames(st, &lw);
		return true;
	}
	wbuf_free(&lw);
	enum req_kind kind = m->type == FELIX_MSG_GROUP_POLL ? REQ_GROUP_POLL
	                     : m->type == FELIX_MSG_GROUP_DEAD_LETTERS
	                         ? REQ_GROUP_DEAD
	                         : REQ_GROUP_SETTLE;
	struct freq *r = freq_new(st, kind);
	if (r == NULL || freq_set_scope(r, &info) != 0) {
		free(r);
		fstream_reply_error(st, "out of memory");
		return true;
	}
	r->shard = f.shard;
	r->group = group;
	r->msg = *m;
	felix_msg_init(m, FELIX_MSG_NONE); /* taken */
	freq_enqueue(st, r);
	metric_add(s->m.requests, 1);

	if (kind == REQ_GROUP_POLL) {
		const struct felix_msg_group_poll *q = &r->msg.u.group_poll;
		uint64_t wait = q->has_wait_ms ? q->wait_ms : 0;
		if (wait > s->cfg.group_max_wait_ms) {
			wait = s->cfg.group_max_wait_ms;
		}
		if (wait > 0) {
			struct gwait *w = calloc(1, sizeof *w);
			if (w == NULL) {
				freq_error(r, "out of memory");
				return true;
			}
			w->r = r;
			w->deadline = uv_now(s->loop) + wait;
			/* Registered before the poll: appends from now on
			 * mark it. */
			w->next = s->waits;
			if (s->waits != NULL) {
				s->waits->prev = w;
			}
			s->waits = w;
			r->ext = w;
			r->abandon = poll_abandon;
		}
		propose_poll(r);
		return true;
	}

	struct store_cmd c;
	uint8_t *cmd = NULL;
	size_t clen;
	const char *e;
	memset(&c, 0, sizeof c);
	c.scope.p = (const uint8_t *)r->scope;
	c.scope.len = r->scope_len;
	c.shard = r->shard;
	c.group.p = (const uint8_t *)f.group;
	c.group.len = strlen(f.group);
	if (kind == REQ_GROUP_DEAD) {
		c.op = STORE_OP_CG_DEAD_LETTERS;
		c.max = DEAD_LIST_MAX;
	} else {
		c.op = settle_op(r->msg.type);
		c.offset = r->msg.u.group_settle.offset;
		c.attempts = s->cfg.group_max_attempts;
	}
	if (store_cmd_encode(&c, &cmd, &clen, &e) != 0) {
		freq_error(r, e);
		return true;
	}
	int rv =
	    kind == REQ_GROUP_DEAD
	        ? shards_read_cmd(s->shards, group, cmd, clen, on_dead_letters,
	                          r)
	        : shards_propose(s->shards, group, cmd, clen, on_settled, r);
	free(cmd);
	if (rv != SHARDS_OK) {
		freq_error(r, felix_shards_message(rv));
	}
	return true;
}
