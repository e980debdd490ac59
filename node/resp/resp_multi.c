/* RESP transactions (docs/resp.md "Transactions"): MULTI, EXEC, DISCARD,
 * WATCH, UNWATCH.
 *
 * After MULTI each command is planned when it arrives (resp_cmd.c's
 * queue_cmd) and kept; EXEC sends every queued KV command, with the
 * stamps of the watched keys, as one store command (STORE_OP_KV_MULTI,
 * store/kvmulti.c) to the group of their one slot: one Raft entry,
 * applied in one store transaction. WATCH reads each key's stamp on the
 * group's leader (STORE_OP_KV_WATCH, a linearizable read); apply
 * compares them and answers nil, which EXEC answers as a null array,
 * when any changed. A WATCH holds the connection's later commands until
 * its stamps are read, so they run after it, as in Redis.
 *
 * Ownership: the connection owns the queue until EXEC or DISCARD takes
 * it; the watch set is counted (the connection, each WATCH in flight and
 * the EXEC that took it hold it), so a read answering after UNWATCH
 * writes into a set nobody uses any more. */
#include <stdlib.h>
#include <string.h>

#include "node/resp/resp_internal.h"
#include "store/command.h"
#include "store/result.h"
#include "wire/fsnp_slot.h"
#include "wire/resp_reply.h"

#define CROSSSLOT "CROSSSLOT Keys in request don't hash to the same slot"

/* Where a transaction's keys are: none yet, one slot, or more. */
struct tx_slot {
	bool keyed;
	bool cross;
	unsigned slot;
};

struct resp_multi {
	struct resp_req **q; /* queued requests, in order (owned) */
	uint32_t n, cap;
	bool dirty; /* a command was refused when queued: EXECABORT */
	struct tx_slot at;
};

struct watched {
	uint8_t *key; /* owned */
	size_t len;
	uint8_t stamp[STORE_WATCH_STAMP_LEN];
};

struct resp_watch {
	unsigned refs;
	bool failed; /* a read failed: EXEC cannot know, and aborts */
	struct tx_slot at;
	struct watched *keys;
	uint32_t n, cap;
};

static void finish(struct resp_req *r)
{
	if (!r->queued) {
		resp_req_done(r);
	}
}

static void slot_add(struct tx_slot *t, unsigned slot)
{
	if (!t->keyed) {
		t->keyed = true;
		t->slot = slot;
	} else if (slot != t->slot) {
		t->cross = true;
	}
}

static void multi_free(struct resp_multi *m)
{
	if (m == NULL) {
		return;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		resp_req_release(m->q[i]);
	}
	free(m->q);
	free(m);
}

static void watch_unref(struct resp_watch *w)
{
	if (w == NULL || --w->refs > 0) {
		return;
	}
	for (uint32_t i = 0; i < w->n; i++) {
		free(w->keys[i].key);
	}
	free(w->keys);
	free(w);
}

void resp_multi_req_release(struct resp_req *r)
{
	multi_free(r->multi);
	r->multi = NULL;
	watch_unref(r->watch);
	r->watch = NULL;
}

void resp_multi_conn_free(struct resp_conn *c)
{
	multi_free(c->multi);
	c->multi = NULL;
	watch_unref(c->watch);
	c->watch = NULL;
}

long resp_multi_queued(const struct resp_conn *c)
{
	return c->multi != NULL ? (long)c->multi->n : -1;
}

void resp_multi_begin(struct resp_req *r)
{
	struct resp_conn *c = r->c;

	if (c->multi != NULL) {
		resp_w_error(&r->out, "ERR MULTI calls can not be nested");
	} else if ((c->multi = calloc(1, sizeof *c->multi)) == NULL) {
		resp_w_error(&r->out, "ERR out of memory");
	} else {
		resp_w_simple(&r->out, "OK");
	}
	finish(r);
}

void resp_multi_abort(struct resp_req *r)
{
	if (r->c->multi != NULL) {
		r->c->multi->dirty = true;
	}
	finish(r);
}

/* A queued request whose reply is already written: PING, ECHO, an
 * error found when planning (EXEC's array carries it, as Redis answers
 * a runtime error), and not a store command to run. */
static bool answered(const struct resp_req *q)
{
	return !q->planned || q->out.len > 0;
}

void resp_multi_queue(struct resp_req *r, struct resp_req *q, bool keyed,
                      unsigned slot, bool cross)
{
	struct resp_multi *m = r->c->multi;
	const struct resp_server *s = r->c->srv;

	/* Refused by the ACL (or out of memory while planning): Redis
	 * answers it now and aborts the transaction. */
	if ((q->planned && q->out.len > 0) ||
	    (q->out.len >= 7 && memcmp(q->out.data, "-NOPERM", 7) == 0)) {
		wbuf_append(&r->out, q->out.data, q->out.len);
		resp_req_release(q);
		resp_multi_abort(r);
		return;
	}
	if (m->n >= s->cfg.max_items) {
		resp_req_release(q);
		resp_w_errorf(&r->out,
		              "ERR a transaction holds at most %llu commands "
		              "(--fsnp-max-value-items)",
		              (unsigned long long)s->cfg.max_items);
		resp_multi_abort(r);
		return;
	}
	if (m->n == m->cap) {
		uint32_t cap = m->cap ? 2 * m->cap : 8;
		struct resp_req **a = realloc(m->q, cap * sizeof *a);
		if (a == NULL) {
			resp_req_release(q);
			resp_w_error(&r->out, "ERR out of memory");
			resp_multi_abort(r);
			return;
		}
		m->q = a;
		m->cap = cap;
	}
	m->q[m->n++] = q;
	if (keyed) {
		/* Even a command that failed planning: a transaction over
		 * two slots applies nothing. */
		slot_add(&m->at, slot);
		m->at.cross |= cross;
	}
	resp_w_simple(&r->out, "QUEUED");
	finish(r);
}

void resp_multi_discard(struct resp_req *r)
{
	struct resp_conn *c = r->c;

	if (c->multi == NULL) {
		resp_w_error(&r->out, "ERR DISCARD without MULTI");
	} else {
		resp_multi_conn_free(c);
		resp_w_simple(&r->out, "OK");
	}
	finish(r);
}

void resp_multi_unwatch(struct resp_req *r)
{
	/* Queued, UNWATCH runs after EXEC's check: nothing to undo then. */
	if (!r->queued) {
		watch_unref(r->c->watch);
		r->c->watch = NULL;
	}
	resp_w_simple(&r->out, "OK");
	finish(r);
}

/* --- WATCH ---------------------------------------------------------------- */

static void watch_done(void *data, int status, const uint8_t *result,
                       size_t len)
{
	struct resp_req *r = data;
	struct resp_conn *c = r->c;
	struct resp_watch *w = r->watch;
	struct store_result res;
	struct store_value v;
	bool ok = false;

	c->srv->ops--;
	if (status != SHARDS_OK) {
		resp_cmd_shards_error(r, status);
	} else if (store_result_open(result, len, &res) != 0 ||
	           res.status != STORE_OK || !store_result_next(&res, &v) ||
	           v.tag != STORE_T_ARRAY || v.n != r->watch_n) {
		resp_w_error(&r->out, "ERR WATCH could not read the keys' "
		                      "stamps from the store");
	} else {
		/* Its keys are the set's from watch_first on (keys of later
		 * WATCHes follow them). */
		uint32_t n = v.n;
		ok = true;
		for (uint32_t i = 0; i < n; i++) {
			struct watched *k = &w->keys[r->watch_first + i];
			if (!store_result_next(&res, &v) ||
			    v.tag != STORE_T_BYTES ||
			    v.len != STORE_WATCH_STAMP_LEN) {
				ok = false;
				break;
			}
			memcpy(k->stamp, v.p, v.len);
		}
		if (ok) {
			resp_w_simple(&r->out, "OK");
		} else {
			resp_w_error(&r->out, "ERR WATCH got malformed stamps "
			                      "from the store");
		}
	}
	if (!ok) {
		w->failed = true;
	}
	finish(r);
	resp_conn_unhold(c);
}

static int watch_add(struct resp_watch *w, const struct resp_arg *a)
{
	struct watched *k;

	if (w->n == w->cap) {
		uint32_t cap = w->cap ? 2 * w->cap : 8;
		struct watched *keys = realloc(w->keys, cap * sizeof *keys);
		if (keys == NULL) {
			return -1;
		}
		w->keys = keys;
		w->cap = cap;
	}
	k = &w->keys[w->n];
	memset(k, 0, sizeof *k);
	k->key = malloc(a->len ? a->len : 1);
	if (k->key == NULL) {
		return -1;
	}
	memcpy(k->key, a->p, a->len);
	k->len = a->len;
	w->n++;
	return 0;
}

void resp_multi_watch(struct resp_req *r, const struct resp_arg *argv,
                      uint32_t argc)
{
	struct resp_conn *c = r->c;
	struct resp_server *s = c->srv;
	struct resp_watch *w = c->watch;
	struct store_slice *keys = NULL;
	struct store_cmd sc = {.op = STORE_OP_KV_WATCH};
	struct tx_slot at;
	uint8_t *enc = NULL;
	size_t len;
	const char *emsg;
	uint32_t first;
	int st;

	if (c->multi != NULL) {
		resp_w_error(&r->out, "ERR WATCH inside MULTI is not allowed");
		finish(r);
		return;
	}
	if (w == NULL) {
		if ((w = calloc(1, sizeof *w)) == NULL) {
			goto err_oom;
		}
		w->refs = 1;
		c->watch = w;
	}
	if ((uint64_t)w->n + argc - 1 > s->cfg.max_items) {
		resp_w_errorf(&r->out,
		              "ERR a connection watches at most %llu keys "
		              "(--fsnp-max-value-items)",
		              (unsigned long long)s->cfg.max_items);
		w->failed = true; /* these keys are not watched: EXEC aborts */
		finish(r);
		return;
	}
	at = w->at;
	for (uint32_t i = 1; i < argc; i++) {
		slot_add(&at, fsnp_slot_of(argv[i].p, argv[i].len));
	}
	w->at = at;
	if (at.cross) {
		/* EXEC answers CROSSSLOT whatever the stamps say: no read. */
		resp_w_simple(&r->out, "OK");
		finish(r);
		return;
	}
	first = w->n;
	keys = calloc(argc - 1, sizeof *keys);
	if (keys == NULL) {
		goto err_oom;
	}
	for (uint32_t i = 1; i < argc; i++) {
		if (watch_add(w, &argv[i]) != 0) {
			goto err_oom;
		}
		keys[i - 1].p = w->keys[w->n - 1].key;
		keys[i - 1].len = w->keys[w->n - 1].len;
	}
	sc.items.n = argc - 1;
	sc.items.v = keys;
	if (store_cmd_encode(&sc, &enc, &len, &emsg) != 0) {
		free(keys);
		resp_w_errorf(&r->out, "ERR WATCH: %s", emsg);
		w->failed = true;
		finish(r);
		return;
	}
	free(keys);
	r->watch = w;
	r->watch_first = first;
	r->watch_n = argc - 1;
	w->refs++;
	s->ops++;
	/* The commands after WATCH wait for its stamps (watch_done): a
	 * write of this connection after it then changes them, as in
	 * Redis, and EXEC always finds them read. */
	c->held = true;
	st =
	    shards_read_cmd(s->shards, shards_group_of_slot(s->shards, at.slot),
	                    enc, len, watch_done, r);
	free(enc);
	if (st != 0) {
		watch_done(r, st, NULL, 0);
	}
	return;

err_oom:
	free(keys);
	if (w != NULL) {
		w->failed = true;
	}
	resp_w_error(&r->out, "ERR out of memory");
	finish(r);
}

/* --- EXEC ----------------------------------------------------------------- */

static void exec_done(void *data, int status, const uint8_t *result, size_t len)
{
	struct resp_req *r = data;
	struct resp_multi *m = r->multi;
	struct store_result res;
	struct store_value v, e;
	uint32_t ran = 0;

	r->c->srv->ops--;
	if (status != SHARDS_OK) {
		resp_cmd_shards_error(r, status);
		goto out;
	}
	if (store_result_open(result, len, &res) != 0 ||
	    !store_result_next(&res, &v)) {
		resp_w_error(&r->out, "ERR malformed result from the store");
		goto out;
	}
	if (res.status != STORE_OK) {
		/* The transaction itself was refused (a command that does
		 * not decode): nothing applied. */
		resp_w_errorf(&r->out,
		              "ERR the store refused the transaction: %.*s",
		              v.tag == STORE_T_BYTES ? (int)v.len : 0,
		              v.tag == STORE_T_BYTES ? (const char *)v.p : "");
		goto out;
	}
	if (v.tag == STORE_T_NIL) {
		/* A watched key changed: nothing applied. */
		resp_w_null_array(&r->out, r->proto);
		goto out;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		ran += !answered(m->q[i]);
	}
	if (v.tag != STORE_T_ARRAY || v.n != ran) {
		resp_w_error(&r->out, "ERR malformed result from the store");
		goto out;
	}
	resp_w_array(&r->out, m->n);
	for (uint32_t i = 0; i < m->n; i++) {
		struct resp_req *q = m->q[i];
		if (!answered(q)) {
			if (!store_result_next(&res, &e) ||
			    e.tag != STORE_T_BYTES) {
				resp_w_error(&q->out, "ERR malformed result "
				                      "from the store");
			} else {
				q->proto = r->proto;
				resp_cmd_reply_result(q, e.p, e.len);
			}
		}
		wbuf_append(&r->out, q->out.data, q->out.len);
	}
out:
	finish(r);
}

/* Every queued reply as it is: a transaction with nothing to run. */
static void exec_local(struct resp_req *r)
{
	struct resp_multi *m = r->multi;

	resp_w_array(&r->out, m->n);
	for (uint32_t i = 0; i < m->n; i++) {
		wbuf_append(&r->out, m->q[i]->out.data, m->q[i]->out.len);
	}
	finish(r);
}

/* Runs a transaction. Its watches' stamps are read: each WATCH held
 * the connection until they were. */
static void exec_go(struct resp_req *r)
{
	struct resp_server *s = r->c->srv;
	struct resp_multi *m = r->multi;
	struct resp_watch *w = r->watch;
	struct tx_slot at = m->at;
	struct store_cmd sc = {.op = STORE_OP_KV_MULTI};
	struct store_slice *items = NULL;
	uint32_t n = 0, group;
	uint8_t *enc = NULL;
	size_t len;
	const char *emsg;
	int st;

	if (w != NULL && w->failed) {
		/* A stamp could not be read: whether the key changed is not
		 * known, so nothing applies (the client retries). */
		resp_w_null_array(&r->out, r->proto);
		finish(r);
		return;
	}
	if (w != NULL && w->at.keyed) {
		slot_add(&at, w->at.slot);
		at.cross |= w->at.cross;
	}
	if (at.cross) {
		resp_w_error(&r->out, CROSSSLOT);
		finish(r);
		return;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		n += !answered(m->q[i]);
	}
	if (!at.keyed || (n == 0 && (w == NULL || w->n == 0))) {
		exec_local(r); /* nothing for the store to run or compare */
		return;
	}
	n = 0;
	group = shards_group_of_slot(s->shards, at.slot);
	items = calloc(2 * (size_t)(w != NULL ? w->n : 0) + m->n + 1,
	               sizeof *items);
	if (items == NULL) {
		resp_w_error(&r->out, "ERR out of memory");
		finish(r);
		return;
	}
	for (uint32_t i = 0; w != NULL && i < w->n; i++) {
		items[n].p = w->keys[i].key;
		items[n++].len = w->keys[i].len;
		items[n].p = w->keys[i].stamp;
		items[n++].len = STORE_WATCH_STAMP_LEN;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		const struct fsnp_plan *pl = &m->q[i]->plan;
		if (answered(m->q[i])) {
			continue;
		}
		/* Keys of one slot are one group's: one part. */
		if (pl->n_parts != 1 || pl->parts[0].group != group) {
			free(items);
			resp_w_error(&r->out, CROSSSLOT);
			finish(r);
			return;
		}
		items[n].p = pl->parts[0].cmd;
		items[n++].len = pl->parts[0].len;
	}
	sc.count = w != NULL ? w->n : 0;
	sc.items.n = n;
	sc.items.v = items;
	st = store_cmd_encode(&sc, &enc, &len, &emsg);
	free(items);
	if (st != 0) {
		resp_w_errorf(&r->out, "ERR EXEC: %s", emsg);
		finish(r);
		return;
	}
	s->ops++;
	st = shards_propose_owned(s->shards, group, enc, len, exec_done, r);
	if (st != 0) {
		exec_done(r, st, NULL, 0);
	}
}

void resp_multi_exec(struct resp_req *r)
{
	struct resp_conn *c = r->c;

	if (c->multi == NULL) {
		resp_w_error(&r->out, "ERR EXEC without MULTI");
		finish(r);
		return;
	}
	/* The queue and the watches are this EXEC's now: the connection
	 * starts afresh (pipelined commands after it see no MULTI). */
	r->multi = c->multi;
	r->watch = c->watch;
	c->multi = NULL;
	c->watch = NULL;
	if (r->multi->dirty) {
		resp_w_error(&r->out, "EXECABORT Transaction discarded because "
		                      "of previous errors.");
		finish(r);
		return;
	}
	exec_go(r);
}
