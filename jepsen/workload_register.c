/* The register workload: FSNP GET / SET / CAS on a handful of keys per
 * shard, checked linearizable.
 *
 * Processes (2 per node by default) each hold one FSNP connection to
 * their node, without topology (the node forwards to the shard's leader),
 * and run one operation at a time; between operations a process whose
 * node is no longer the one membership gives it (wl_ctx_home: a node
 * left, or one joined) moves its connection there, with a short random pause
 * between operations. Each shard has KEYS_PER_SHARD key slots; a slot moves to
 * a fresh key after OPS_PER_KEY invocations, which keeps every key's history
 * small enough for the linearizability search even when indeterminate
 * operations pile up under faults. Written values are unique (a counter), so a
 * read names the write it saw. A CAS expects the value last seen on its key.
 * After the operations, every key ever used is read once more on the healed
 * cluster.
 *
 * Outcomes: an answer is `ok` (a CAS that did not swap is `fail`); an
 * error the server gives before executing (busy, a reroute it marks safe
 * to retry, a refused argument) is `fail`; a timeout, a lost connection or
 * any other error after a write was sent is `info`. A read that does not
 * complete is `fail` (it changed nothing). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/fsnp_client.h"
#include "jepsen/workload_impl.h"
#include "wire/fsnp_opcode.h"
#include "wire/fsnp_slot.h"
#include "wire/fsnp_value.h"

#define KEYS_PER_SHARD 3
#define OPS_PER_KEY 100
#define THINK_MAX_MS 20
#define VAL_LEN 24
#define KEY_LEN 32

enum reg_f { F_READ, F_WRITE, F_CAS };
static const char *const f_names[] = {"read", "write", "cas"};

struct reg_slot {
	unsigned shard;
	char key[KEY_LEN];
	unsigned ops;       /* invocations on key */
	char last[VAL_LEN]; /* value last seen on key ("" = nil) */
};

struct reg;

struct reg_proc {
	struct reg *g;
	unsigned idx;
	unsigned pid; /* logical process; +nprocs after an info */
	unsigned node;
	struct fsnp_client *c;
	uv_timer_t think;
	bool busy;
	bool final; /* the op in flight is a final read */
	enum reg_f f;
	struct reg_slot *slot; /* NULL for final reads */
	char key[KEY_LEN];
	char val[VAL_LEN];
	char old[VAL_LEN];
};

struct reg {
	struct wl_ctx *x;
	unsigned nprocs;
	struct reg_proc *procs;
	unsigned nslots;
	struct reg_slot *slots;
	unsigned *search;      /* per shard: next candidate name */
	char (*used)[KEY_LEN]; /* every key ever used, for final reads */
	size_t n_used, cap_used;
	size_t next_final;
	uint64_t next_value;
	unsigned busy;
	bool finals;
	uint64_t keys_used;
};

/* The next key name owned by `shard`. */
static void next_key(struct reg *g, unsigned shard, char *out)
{
	unsigned shards = g->x->cfg->shards ? g->x->cfg->shards : 8;
	for (;;) {
		unsigned i = g->search[shard]++;
		snprintf(out, KEY_LEN, "s%uk%u", shard, i);
		if (fsnp_slot_shard(
		        fsnp_slot_of((const uint8_t *)out, strlen(out)),
		        shards) == shard) {
			return;
		}
	}
}

static int remember(struct reg *g, const char *key)
{
	if (g->n_used == g->cap_used) {
		size_t cap = g->cap_used ? g->cap_used * 2 : 256;
		void *p = realloc(g->used, cap * sizeof *g->used);
		if (p == NULL) {
			return -ENOMEM;
		}
		g->used = p;
		g->cap_used = cap;
	}
	snprintf(g->used[g->n_used++], KEY_LEN, "%s", key);
	g->keys_used++;
	return 0;
}

static void schedule(struct reg_proc *p, uint64_t ms);
static void maybe_finish(struct reg *g);

static void record(struct reg_proc *p, enum wl_type t, const char *extra)
{
	struct wl_hist *hi = &p->g->x->hist;
	const char *f = f_names[p->f];
	switch (p->f) {
	case F_READ:
		wl_hist_event(hi, p->pid, t, f, p->key, extra);
		break;
	case F_WRITE:
		wl_hist_event(hi, p->pid, t, f, p->key, p->val);
		break;
	case F_CAS:
		wl_hist_eventf(hi, p->pid, t, f, p->key, "%s %s", p->old,
		               p->val);
		break;
	}
}

/* Ends the op in flight with outcome t (for a read `val` is its value). */
static void complete(struct reg_proc *p, enum wl_type t, const char *val)
{
	struct reg *g = p->g;
	if (t == WL_OK) {
		record(p, t, val);
		if (p->slot != NULL && strcmp(p->slot->key, p->key) == 0) {
			const char *seen = p->f == F_READ ? val : p->val;
			snprintf(p->slot->last, VAL_LEN, "%s",
			         strcmp(seen, "nil") == 0 ? "" : seen);
		}
	} else {
		record(p, t, NULL);
	}
	if (t == WL_INFO) {
		p->pid += g->nprocs;
	}
	p->busy = false;
	g->busy--;
	if (p->final && t != WL_OK && !g->x->deadline) {
		/* A final read must succeed: try the key again. */
		g->next_final--;
		snprintf(g->used[g->next_final], KEY_LEN, "%s", p->key);
	}
	schedule(p, g->x->ops_over ? 0 : wl_rand(g->x, 0, THINK_MAX_MS));
}

static bool definite_error(const char *msg)
{
	return strncmp(msg, "WRONGTYPE", 9) == 0 ||
	       strncmp(msg, "ERR syntax", 10) == 0 ||
	       strncmp(msg, "ERR wrong number", 16) == 0;
}

/* A GET's value as a history token: "nil", the value when it is a plain
 * token, else x<hex> (never a value we wrote, so the checker flags it). */
static void value_token(const uint8_t *p, size_t len, bool nil, char *out,
                        size_t cap)
{
	if (nil) {
		snprintf(out, cap, "nil");
		return;
	}
	wl_token_of(p, len, out, cap);
}

static void on_reply(void *data, const struct fsnp_reply *rep)
{
	struct reg_proc *p = data;
	bool read = p->f == F_READ;
	char v[128];

	if (!p->busy) {
		return;
	}
	if (rep->error != FSNP_CLIENT_OK) {
		bool unsent = rep->error == FSNP_CLIENT_ENOMEM ||
		              rep->error == FSNP_CLIENT_EINVAL;
		complete(p, read || unsent ? WL_FAIL : WL_INFO, NULL);
		return;
	}
	switch (rep->status) {
	case FSNP_STATUS_OK:
		break;
	case FSNP_STATUS_BUSY:
	case FSNP_STATUS_AUTH:
	case FSNP_STATUS_NOPERM:
	case FSNP_STATUS_BAD_REQUEST:
		complete(p, WL_FAIL, NULL);
		return;
	case FSNP_STATUS_REROUTE: {
		bool safe = false;
		if (rep->value.tag == FSNP_MAP) {
			fsnp_map_bool(&rep->value, "safe_to_retry", &safe);
		}
		complete(p, read || safe ? WL_FAIL : WL_INFO, NULL);
		return;
	}
	default:
		complete(
		    p,
		    read || definite_error(rep->message ? rep->message : "")
		        ? WL_FAIL
		        : WL_INFO,
		    NULL);
		return;
	}
	switch (p->f) {
	case F_READ:
		if (rep->custom) {
			/* Compact GET (0x82): 0 = nil, 1 + u32 len + bytes. */
			const uint8_t *b = rep->payload;
			size_t n = rep->payload_len;
			if (n >= 2 && b[0] == 0x82 && b[1] == 0) {
				value_token(NULL, 0, true, v, sizeof v);
			} else if (n >= 6 && b[0] == 0x82 && b[1] == 1) {
				uint32_t l = (uint32_t)b[2] << 24 |
				             (uint32_t)b[3] << 16 |
				             (uint32_t)b[4] << 8 | b[5];
				if (l > n - 6) {
					complete(p, WL_FAIL, NULL);
					return;
				}
				value_token(b + 6, l, false, v, sizeof v);
			} else {
				complete(p, WL_FAIL, NULL);
				return;
			}
		} else if (rep->value.tag == FSNP_NIL) {
			value_token(NULL, 0, true, v, sizeof v);
		} else if (rep->value.tag == FSNP_BIN) {
			value_token(rep->value.as.bin.ptr,
			            rep->value.as.bin.len, false, v, sizeof v);
		} else {
			complete(p, WL_FAIL, NULL);
			return;
		}
		complete(p, WL_OK, v);
		return;
	case F_WRITE:
		complete(p, WL_OK, NULL);
		return;
	case F_CAS:
		if (!rep->custom && rep->value.tag == FSNP_TRUE) {
			complete(p, WL_OK, NULL);
		} else if (!rep->custom && (rep->value.tag == FSNP_FALSE ||
		                            rep->value.tag == FSNP_NIL)) {
			/* Mismatch or no key: nothing was written. */
			complete(p, WL_FAIL, NULL);
		} else {
			complete(p, WL_INFO, NULL);
		}
		return;
	}
}

static void invoke(struct reg_proc *p)
{
	struct reg *g = p->g;
	struct wbuf b;
	struct fsnp_writer w;
	uint16_t op;
	unsigned flags = 0;

	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	fsnp_w_map_begin(&w);
	fsnp_w_key(&w, "key");
	fsnp_w_str(&w, p->key);
	switch (p->f) {
	case F_READ:
		op = FSNP_OP_GET;
		flags = FSNP_REQ_IDEMPOTENT;
		break;
	case F_WRITE:
		op = FSNP_OP_SET;
		fsnp_w_key(&w, "value");
		fsnp_w_str(&w, p->val);
		break;
	default:
		op = FSNP_OP_CAS;
		fsnp_w_key(&w, "expected");
		fsnp_w_str(&w, p->old);
		fsnp_w_key(&w, "value");
		fsnp_w_str(&w, p->val);
		break;
	}
	fsnp_w_map_end(&w);
	p->busy = true;
	g->busy++;
	record(p, WL_INVOKE, NULL);
	if (fsnp_w_finish(&w) != 0 || p->c == NULL ||
	    fsnp_client_send(p->c, op, p->key, strlen(p->key), b.data, b.len,
	                     flags, on_reply, p) != 0) {
		/* Never sent. */
		complete(p, WL_FAIL, NULL);
	}
	wbuf_free(&b);
}

static void next_op(struct reg_proc *p)
{
	struct reg *g = p->g;
	struct reg_slot *s = &g->slots[wl_rand(g->x, 0, g->nslots - 1)];
	if (s->ops >= OPS_PER_KEY) {
		next_key(g, s->shard, s->key);
		s->ops = 0;
		s->last[0] = '\0';
		if (remember(g, s->key) != 0) {
			return;
		}
	}
	s->ops++;
	p->slot = s;
	p->final = false;
	snprintf(p->key, KEY_LEN, "%s", s->key);
	uint64_t r = wl_rand(g->x, 0, 99);
	if (r < 50) {
		p->f = F_READ;
	} else if (r < 80 || s->last[0] == '\0') {
		p->f = F_WRITE;
	} else {
		p->f = F_CAS;
		snprintf(p->old, VAL_LEN, "%s", s->last);
	}
	if (p->f != F_READ) {
		snprintf(p->val, VAL_LEN, "%" PRIu64, ++g->next_value);
	}
	invoke(p);
}

static void final_op(struct reg_proc *p)
{
	struct reg *g = p->g;
	if (g->next_final >= g->n_used) {
		maybe_finish(g);
		return;
	}
	p->slot = NULL;
	p->final = true;
	p->f = F_READ;
	snprintf(p->key, KEY_LEN, "%s", g->used[g->next_final++]);
	invoke(p);
}

static void maybe_finish(struct reg *g)
{
	if (g->busy == 0 && g->finals && g->next_final >= g->n_used) {
		wl_ctx_done(g->x);
	}
}

static void start_finals(struct reg *g)
{
	if (g->finals || g->busy > 0 || g->x->done) {
		return;
	}
	g->finals = true;
	wl_hist_comment(&g->x->hist, "final reads of the %zu keys used",
	                g->n_used);
	for (unsigned i = 0; i < g->nprocs; i++) {
		if (!g->procs[i].busy) {
			final_op(&g->procs[i]);
		}
	}
	maybe_finish(g);
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err);
static void on_client_closed(void *data);

/* Opens p's connection to node id. */
static int connect_to(struct reg_proc *p, unsigned id)
{
	p->node = id;
	return wl_ctx_fsnp_open(p->g->x, id, "jepsen-register", on_ready, p,
	                        &p->c);
}

/* Between operations: follows membership to the node p should use now. */
static void rehome(struct reg_proc *p)
{
	unsigned want = wl_ctx_home(p->g->x, p->idx);
	if (want == p->node && p->c != NULL) {
		return;
	}
	if (p->c != NULL) {
		fsnp_client_close(p->c, on_client_closed, NULL);
		p->c = NULL;
	}
	connect_to(p, want);
}

static void on_think(uv_timer_t *t)
{
	struct reg_proc *p = t->data;
	struct reg *g = p->g;
	if (g->x->done || p->busy) {
		return;
	}
	if (g->x->deadline) {
		return;
	}
	rehome(p);
	if (p->c == NULL) {
		/* No client could be opened: try again shortly. */
		schedule(p, THINK_MAX_MS);
		return;
	}
	if (g->x->ops_over) {
		if (g->finals) {
			final_op(p);
		} else {
			start_finals(g);
		}
		return;
	}
	next_op(p);
}

static void schedule(struct reg_proc *p, uint64_t ms)
{
	if (!p->g->x->done) {
		uv_timer_start(&p->think, on_think, ms, 0);
	}
}

static void on_ready(void *data, struct fsnp_client *c, int status,
                     const char *err)
{
	(void)data;
	(void)c;
	(void)status;
	(void)err;
	/* Requests queue before the handshake and the client reconnects by
	 * itself: the outcomes of the operations tell the rest. */
}

static int reg_start(struct wl_ctx *x)
{
	const struct wl_config *cfg = x->cfg;
	struct reg *g = calloc(1, sizeof *g);
	unsigned shards = cfg->shards ? cfg->shards : 8;
	if (g == NULL) {
		return -ENOMEM;
	}
	x->impl = g;
	g->x = x;
	g->nprocs = cfg->procs ? cfg->procs : 2 * cfg->n_nodes;
	g->nslots = shards * KEYS_PER_SHARD;
	g->procs = calloc(g->nprocs, sizeof *g->procs);
	g->slots = calloc(g->nslots, sizeof *g->slots);
	g->search = calloc(shards, sizeof *g->search);
	if (g->procs == NULL || g->slots == NULL || g->search == NULL) {
		return -ENOMEM;
	}
	for (unsigned i = 0; i < g->nslots; i++) {
		struct reg_slot *s = &g->slots[i];
		s->shard = i / KEYS_PER_SHARD;
		next_key(g, s->shard, s->key);
		if (remember(g, s->key) != 0) {
			return -ENOMEM;
		}
	}
	wl_hist_comment(&x->hist,
	                "lodestone register workload: %u processes on %u "
	                "nodes, %u keys at a time (%u per shard), FSNP "
	                "GET/SET/CAS",
	                g->nprocs, cfg->n_nodes, g->nslots, KEYS_PER_SHARD);
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct reg_proc *p = &g->procs[i];
		p->g = g;
		p->idx = i;
		p->pid = i;
		uv_timer_init(x->loop, &p->think);
		p->think.data = p;
		if (connect_to(p, wl_ctx_home(x, i)) != 0) {
			return -EIO;
		}
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		schedule(&g->procs[i], wl_rand(x, 0, THINK_MAX_MS));
	}
	return 0;
}

static void reg_phase(struct wl_ctx *x, enum wl_phase ph)
{
	struct reg *g = x->impl;
	if (ph == WL_PHASE_DEADLINE) {
		wl_ctx_done(x);
		return;
	}
	start_finals(g);
}

static int reg_write(struct wl_ctx *x)
{
	struct reg *g = x->impl;
	if (g != NULL) {
		snprintf(x->note, sizeof x->note,
		         "%u processes on %u nodes, %" PRIu64 " keys, "
		         "%" PRIu64 " values written%s",
		         g->nprocs, x->cfg->n_nodes, g->keys_used,
		         g->next_value,
		         x->deadline && !x->stopped
		             ? "; final reads cut short by the deadline"
		             : "");
	}
	return wl_ctx_write(x, &x->hist, "history.txt");
}

static void on_client_closed(void *data)
{
	(void)data;
}

static void reg_close(struct wl_ctx *x)
{
	struct reg *g = x->impl;
	if (g == NULL || g->procs == NULL) {
		return;
	}
	for (unsigned i = 0; i < g->nprocs; i++) {
		struct reg_proc *p = &g->procs[i];
		if (p->g == NULL) {
			continue;
		}
		wl_close_timer(&p->think);
		if (p->c != NULL) {
			fsnp_client_close(p->c, on_client_closed, NULL);
			p->c = NULL;
		}
	}
}

static void reg_destroy(struct wl_ctx *x)
{
	struct reg *g = x->impl;
	if (g == NULL) {
		return;
	}
	free(g->procs);
	free(g->slots);
	free(g->search);
	free(g->used);
	free(g);
	x->impl = NULL;
}

const struct wl_workload wl_register = {
    .name = "register",
    .checker = "linearizable",
    .checks = {{"history.txt", "linearizable", NULL}},
    .start = reg_start,
    .phase = reg_phase,
    .write = reg_write,
    .close = reg_close,
    .destroy = reg_destroy,
};
