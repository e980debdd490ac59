/* Consumer groups on a stream shard: claims with a visibility deadline and
 * an attempt count, ack / nack, a delivery cursor, dead letters after the
 * maximum attempts, discard and redrive.
 *
 * Per (stream shard, group), docs/storage.md:
 *   - the group record: the delivery cursor (the next offset never handed
 *     out), the deadline floor (no in-flight claim is due before it) and
 *     the ready sequence window [ready_lo, ready_next);
 *   - one claim per live (in flight or ready) offset, found by offset;
 *   - one deadline entry per in-flight claim, ordered by (deadline,
 *     offset);
 *   - one ready entry per nacked or redriven claim, ordered by the
 *     sequence number it got when it became ready;
 *   - one dead letter per dead-lettered offset.
 * Acknowledging a record deletes its claim and index entry, so a poll
 * never walks acknowledged history: it reads the ready entries from
 * ready_lo, the deadline entries from the floor up to the entry's time
 * (plus the first later one, which becomes the new floor), and then
 * advances the cursor over the stream. Each deleted index entry is passed
 * over at most once, because ready_lo and the floor only move past it.
 * Polls are proposed: every claim is decided with the entry's time. */
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
#include "store/stream.h"

#define POLL_DEFAULT 100
#define DEAD_LIST_DEFAULT 1000

/* Claim states. */
enum {
	CL_INFLIGHT = 1, /* handed out; `due` is its visibility deadline */
	CL_READY = 2,    /* nacked or redriven; `due` is its ready sequence */
};

/* Parts of a group's claim keys (after the group prefix). */
enum {
	SUB_CLAIM = 0x00, /* u64 offset: claim */
	SUB_DUE = 0x01,   /* u64 deadline, u64 offset: empty */
	SUB_READY = 0x02, /* u64 sequence, u64 offset: empty */
};

struct claim {
	uint64_t offset;
	uint8_t status;
	uint32_t attempts;
	uint64_t due;
};

/* The group record. */
struct cgrec {
	uint64_t cursor;     /* next offset never handed out */
	uint64_t floor;      /* no in-flight claim is due before this */
	uint64_t ready_lo;   /* no ready entry below this sequence */
	uint64_t ready_next; /* the next ready sequence */
};

static void group_prefix(struct sbuf *k, uint32_t group, uint8_t type,
                         const struct store_cmd *c)
{
	key_start(k, group, type);
	key_shard(k, c->scope, c->shard);
	sbuf_u16(k, (uint16_t)c->group.len);
	sbuf_add(k, c->group.p, c->group.len);
}

static void sub_prefix(struct sbuf *k, uint32_t group, uint8_t sub,
                       const struct store_cmd *c)
{
	group_prefix(k, group, K_CLAIM, c);
	sbuf_u8(k, sub);
}

static void claim_key(struct sbuf *k, uint32_t group, const struct store_cmd *c,
                      uint64_t offset)
{
	sub_prefix(k, group, SUB_CLAIM, c);
	sbuf_u64(k, offset);
}

/* A deadline (SUB_DUE) or ready (SUB_READY) index entry. */
static void index_key(struct sbuf *k, uint32_t group, uint8_t sub,
                      const struct store_cmd *c, uint64_t order,
                      uint64_t offset)
{
	sub_prefix(k, group, sub, c);
	sbuf_u64(k, order);
	sbuf_u64(k, offset);
}

static void dead_key(struct sbuf *k, uint32_t group, const struct store_cmd *c,
                     uint64_t offset)
{
	group_prefix(k, group, K_DEAD, c);
	sbuf_u64(k, offset);
}

static int cgrec_load(struct tx *tx, const struct store_cmd *c, struct cgrec *g)
{
	struct sbuf k;
	struct val v;
	int found;

	sbuf_init(&k);
	group_prefix(&k, tx->group, K_CG, c);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	memset(g, 0, sizeof *g);
	g->floor = UINT64_MAX;
	if (found > 0) {
		struct rd r;
		rd_init(&r, v.p, v.len);
		g->cursor = rd_u64(&r);
		g->floor = rd_u64(&r);
		g->ready_lo = rd_u64(&r);
		g->ready_next = rd_u64(&r);
		if (!rd_done(&r) || g->ready_lo > g->ready_next) {
			found = tx_fail(tx, "corrupt consumer group", NULL);
		}
	}
	val_free(&v);
	return found < 0 ? -1 : 0;
}

static void cgrec_store(struct tx *tx, const struct store_cmd *c,
                        const struct cgrec *g)
{
	struct sbuf k, v;

	sbuf_init(&k);
	sbuf_init(&v);
	group_prefix(&k, tx->group, K_CG, c);
	sbuf_u64(&v, g->cursor);
	sbuf_u64(&v, g->floor);
	sbuf_u64(&v, g->ready_lo);
	sbuf_u64(&v, g->ready_next);
	tx_put(tx, &k, v.p, v.len);
	sbuf_free(&k);
	sbuf_free(&v);
}

static int decode_claim(struct tx *tx, const void *p, size_t len,
                        struct claim *cl)
{
	struct rd r;

	rd_init(&r, p, len);
	cl->status = rd_u8(&r);
	cl->attempts = rd_u32(&r);
	cl->due = rd_u64(&r);
	if (!rd_done(&r) || cl->status < CL_INFLIGHT || cl->status > CL_READY) {
		return tx_fail(tx, "corrupt claim", NULL);
	}
	return 0;
}

/* 1 found, 0 absent, -1 failure. */
static int claim_load(struct tx *tx, const struct store_cmd *c, uint64_t offset,
                      struct claim *cl)
{
	struct sbuf k;
	struct val v;
	int found;

	memset(cl, 0, sizeof *cl);
	cl->offset = offset;
	sbuf_init(&k);
	claim_key(&k, tx->group, c, offset);
	found = tx_get(tx, &k, &v);
	sbuf_free(&k);
	if (found > 0 && decode_claim(tx, v.p, v.len, cl) != 0) {
		found = -1;
	}
	val_free(&v);
	return found;
}

static void index_put(struct tx *tx, const struct store_cmd *c,
                      const struct claim *cl)
{
	struct sbuf k;

	sbuf_init(&k);
	index_key(&k, tx->group,
	          cl->status == CL_INFLIGHT ? SUB_DUE : SUB_READY, c, cl->due,
	          cl->offset);
	tx_put(tx, &k, NULL, 0);
	sbuf_free(&k);
}

static void index_del(struct tx *tx, const struct store_cmd *c,
                      const struct claim *cl)
{
	struct sbuf k;

	sbuf_init(&k);
	index_key(&k, tx->group,
	          cl->status == CL_INFLIGHT ? SUB_DUE : SUB_READY, c, cl->due,
	          cl->offset);
	tx_del(tx, &k);
	sbuf_free(&k);
}

/* Writes the claim and its index entry (the old entry is the caller's). */
static void claim_store(struct tx *tx, const struct store_cmd *c,
                        struct cgrec *g, const struct claim *cl)
{
	struct sbuf k;
	uint8_t v[13];

	sbuf_init(&k);
	claim_key(&k, tx->group, c, cl->offset);
	v[0] = cl->status;
	be_put32(v + 1, cl->attempts);
	be_put64(v + 5, cl->due);
	tx_put(tx, &k, v, sizeof v);
	sbuf_free(&k);
	index_put(tx, c, cl);
	if (cl->status == CL_INFLIGHT && cl->due < g->floor) {
		g->floor = cl->due;
	}
}

/* Removes the claim and its index entry. */
static void claim_drop(struct tx *tx, const struct store_cmd *c,
                       const struct claim *cl)
{
	struct sbuf k;

	sbuf_init(&k);
	claim_key(&k, tx->group, c, cl->offset);
	tx_del(tx, &k);
	sbuf_free(&k);
	index_del(tx, c, cl);
}

/* Makes a claim ready for redelivery at the end of the ready queue. */
static void claim_ready(struct tx *tx, const struct store_cmd *c,
                        struct cgrec *g, struct claim *cl, uint32_t attempts)
{
	index_del(tx, c, cl);
	cl->status = CL_READY;
	cl->attempts = attempts;
	cl->due = g->ready_next++;
	claim_store(tx, c, g, cl);
}

static void dead_put(struct tx *tx, const struct store_cmd *c,
                     const struct claim *cl)
{
	struct sbuf k;
	uint8_t v[4];

	sbuf_init(&k);
	dead_key(&k, tx->group, c, cl->offset);
	be_put32(v, cl->attempts);
	tx_put(tx, &k, v, sizeof v);
	sbuf_free(&k);
}

/* 1 present (and deleted when `del`), 0 absent, -1 failure. */
static int dead_take(struct tx *tx, const struct store_cmd *c, uint64_t offset,
                     bool del)
{
	struct sbuf k;
	struct val v;
	int found;

	sbuf_init(&k);
	dead_key(&k, tx->group, c, offset);
	found = tx_get(tx, &k, &v);
	val_free(&v);
	if (found > 0 && del) {
		tx_del(tx, &k);
	}
	sbuf_free(&k);
	return found;
}

/* An iterator over `prefix` whose base stops at `upper`: RocksDB then also
 * stops stepping over deleted keys there, which is what keeps a poll from
 * walking history. `upper` must outlive the iterator; the returned read
 * options are destroyed after titer_close(). */
static rocksdb_readoptions_t *bounded_open(struct titer *it, struct tx *tx,
                                           const struct sbuf *prefix,
                                           const struct sbuf *upper)
{
	struct store *s = tx->s;
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_iterator_t *base;

	(void)tx_drain(tx); /* a failure fails tx: bounded_close says so */
	rocksdb_readoptions_set_iterate_upper_bound(ro, (const char *)upper->p,
	                                            upper->len);
	base = rocksdb_create_iterator_cf(s->db, ro, s->cf);
	it->tx = tx;
	it->it = tx->write ? rocksdb_writebatch_wi_create_iterator_with_base_cf(
	                         s->wb, base, s->cf)
	                   : base;
	it->ro = NULL;  /* ours: bounded_close destroys it */
	it->ob = false; /* consumer-group rows are not write-back rows */
	it->on = NULL;
	it->cur = 0;
	it->fwd = true;
	sbuf_init(&it->upper);
	sbuf_init(&it->prefix);
	sbuf_add(&it->prefix, prefix->p, prefix->len);
	return ro;
}

static int bounded_close(struct titer *it, rocksdb_readoptions_t *ro)
{
	int rv = titer_close(it);

	rocksdb_readoptions_destroy(ro);
	return rv;
}

/* One record a poll hands out, and what happens to its claim. */
struct delivery {
	uint64_t offset;
	uint32_t attempts;
};

/* What the index scans decided for one entry (applied after the iterator
 * is closed: writing to the batch invalidates it). */
struct step {
	struct claim cl; /* as stored */
	uint8_t action;
};

enum {
	ST_DELIVER = 1, /* hand out again */
	ST_DEAD,        /* failed at the maximum attempts: dead letter */
	ST_DROP,        /* trimmed away: forget */
	ST_STALE,       /* an index entry without its claim: remove it */
};

struct poll_ctx {
	struct tx *tx;
	const struct store_cmd *c;
	const struct stream_meta *m;
	struct cgrec *g;
	uint32_t max_att;
	uint64_t vis;
	uint64_t max;
	uint64_t budget; /* index entries still to look at */
	struct delivery *out;
	size_t nout;
	struct step *steps;
	size_t nsteps, capsteps;
};

/* Decides one indexed claim (its index entry at `order`). */
static int poll_decide(struct poll_ctx *p, uint8_t sub, uint64_t order,
                       uint64_t offset)
{
	struct step *st;
	int found;

	if (p->nsteps == p->capsteps) {
		p->capsteps = p->capsteps ? p->capsteps * 2 : 64;
		p->steps =
		    store_xrealloc(p->steps, p->capsteps * sizeof *p->steps);
	}
	st = &p->steps[p->nsteps++];
	found = claim_load(p->tx, p->c, offset, &st->cl);
	if (found < 0) {
		return -1;
	}
	if (!found ||
	    st->cl.status != (sub == SUB_DUE ? CL_INFLIGHT : CL_READY) ||
	    st->cl.due != order) {
		/* Left over: remove exactly this index entry. */
		st->cl.offset = offset;
		st->cl.status = sub == SUB_DUE ? CL_INFLIGHT : CL_READY;
		st->cl.due = order;
		st->action = ST_STALE;
	} else if (offset < p->m->head) {
		st->action = ST_DROP;
	} else if (st->cl.attempts >= p->max_att) {
		st->action = ST_DEAD;
	} else {
		st->action = ST_DELIVER;
		p->out[p->nout].offset = offset;
		p->out[p->nout].attempts = st->cl.attempts + 1;
		p->nout++;
	}
	return 0;
}

static void poll_apply_steps(struct poll_ctx *p)
{
	for (size_t i = 0; i < p->nsteps; i++) {
		struct step *st = &p->steps[i];
		switch (st->action) {
		case ST_STALE:
			index_del(p->tx, p->c, &st->cl);
			break;
		case ST_DROP:
			claim_drop(p->tx, p->c, &st->cl);
			break;
		case ST_DEAD:
			dead_put(p->tx, p->c, &st->cl);
			claim_drop(p->tx, p->c, &st->cl);
			break;
		default:
			index_del(p->tx, p->c, &st->cl);
			st->cl.status = CL_INFLIGHT;
			st->cl.attempts++;
			st->cl.due = deadline_after(p->tx->now_ms, p->vis);
			claim_store(p->tx, p->c, p->g, &st->cl);
			break;
		}
	}
	p->nsteps = 0;
}

/* Nacked and redriven claims, oldest first. */
static int poll_ready(struct poll_ctx *p)
{
	struct titer it;
	struct sbuf k, upper;
	rocksdb_readoptions_t *ro;
	uint64_t lo = p->g->ready_next;
	int rv = 0;

	if (p->g->ready_lo == p->g->ready_next) {
		return 0;
	}
	sbuf_init(&k);
	sbuf_init(&upper);
	sub_prefix(&k, p->tx->group, SUB_READY, p->c);
	sub_prefix(&upper, p->tx->group, SUB_READY, p->c);
	sbuf_u64(&upper, p->g->ready_next);
	ro = bounded_open(&it, p->tx, &k, &upper);
	sbuf_u64(&k, p->g->ready_lo);
	for (titer_seek(&it, &k); titer_valid(&it); titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		uint64_t seq;

		if (kl != it.prefix.len + 16) {
			rv = tx_fail(p->tx, "corrupt ready entry", NULL);
			break;
		}
		seq = be_get64(kp + kl - 16);
		if (seq >= p->g->ready_next) {
			break;
		}
		if (p->nout == p->max || p->budget == 0) {
			lo = seq;
			break;
		}
		p->budget--;
		if (poll_decide(p, SUB_READY, seq, be_get64(kp + kl - 8)) !=
		    0) {
			rv = -1;
			break;
		}
	}
	if (bounded_close(&it, ro) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	sbuf_free(&upper);
	if (rv == 0) {
		poll_apply_steps(p);
		p->g->ready_lo = lo;
	}
	return rv;
}

/* In-flight claims whose deadline passed, earliest first; leaves the
 * floor at the first deadline not handled (UINT64_MAX: none left). */
static int poll_lapsed(struct poll_ctx *p)
{
	struct titer it;
	struct sbuf k, upper;
	rocksdb_readoptions_t *ro;
	uint64_t floor = UINT64_MAX;
	int rv = 0;

	if (p->g->floor == UINT64_MAX) {
		return 0;
	}
	sbuf_init(&k);
	sbuf_init(&upper);
	sub_prefix(&k, p->tx->group, SUB_DUE, p->c);
	sub_prefix(&upper, p->tx->group, SUB_DUE + 1, p->c);
	ro = bounded_open(&it, p->tx, &k, &upper);
	sbuf_u64(&k, p->g->floor);
	for (titer_seek(&it, &k); titer_valid(&it); titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		uint64_t due;

		if (kl != it.prefix.len + 16) {
			rv = tx_fail(p->tx, "corrupt deadline entry", NULL);
			break;
		}
		due = be_get64(kp + kl - 16);
		if (due > p->tx->now_ms || p->nout == p->max ||
		    p->budget == 0) {
			floor = due;
			break;
		}
		p->budget--;
		if (poll_decide(p, SUB_DUE, due, be_get64(kp + kl - 8)) != 0) {
			rv = -1;
			break;
		}
	}
	if (bounded_close(&it, ro) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	sbuf_free(&upper);
	if (rv == 0) {
		p->g->floor = floor;
		poll_apply_steps(p); /* new deadlines lower the floor */
	}
	return rv;
}

static int cmp_delivery(const void *a, const void *b)
{
	const struct delivery *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cg_poll(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	struct cgrec g, g0;
	struct poll_ctx p;
	struct stream_reader rd;
	int rv = 0;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0 ||
	    cgrec_load(tx, c, &g) != 0) {
		return -1;
	}
	g0 = g;
	memset(&p, 0, sizeof p);
	p.tx = tx;
	p.c = c;
	p.m = &m;
	p.g = &g;
	p.vis = c->visibility_ms ? c->visibility_ms : STORE_CG_VISIBILITY_MS;
	p.max_att = c->attempts ? c->attempts : STORE_CG_MAX_ATTEMPTS;
	p.max = c->max ? c->max : POLL_DEFAULT;
	if (p.max > STORE_CG_SCAN_LIMIT) {
		p.max = STORE_CG_SCAN_LIMIT;
	}
	p.budget = STORE_CG_SCAN_LIMIT;
	p.out = store_xmalloc(p.max * sizeof *p.out);
	/* Redeliveries first (nacked and redriven, then lapsed), then
	 * records never handed out. */
	if (poll_ready(&p) != 0 || poll_lapsed(&p) != 0) {
		free(p.steps);
		free(p.out);
		return -1;
	}
	free(p.steps);
	if (g.cursor < m.head) {
		g.cursor = m.head; /* trimmed before anyone saw them */
	}
	while (p.nout < p.max && g.cursor < m.tail) {
		struct claim fresh = {g.cursor, CL_INFLIGHT, 1,
		                      deadline_after(tx->now_ms, p.vis)};
		claim_store(tx, c, &g, &fresh);
		p.out[p.nout].offset = g.cursor;
		p.out[p.nout].attempts = 1;
		p.nout++;
		g.cursor++;
	}
	if (memcmp(&g, &g0, sizeof g) != 0) {
		cgrec_store(tx, c, &g);
	}
	qsort(p.out, p.nout, sizeof *p.out, cmp_delivery);
	res_begin(res, STORE_OK);
	res_array(res, 2);
	res_u64(res, g.floor == UINT64_MAX ? 0 : g.floor);
	res_array(res, (uint32_t)p.nout);
	stream_reader_init(&rd, tx, c->scope, c->shard);
	for (size_t i = 0; i < p.nout; i++) {
		const uint8_t *pp;
		uint64_t ts;
		size_t len;
		int found;

		found = stream_reader_get(&rd, p.out[i].offset, &ts, &pp, &len);
		if (found <= 0) {
			rv = found < 0
			         ? -1
			         : tx_fail(tx, "stream record missing", NULL);
			break;
		}
		res_array(res, 3);
		res_u64(res, p.out[i].offset);
		res_u64(res, p.out[i].attempts);
		res_bytes(res, pp, len);
	}
	if (stream_reader_close(&rd) != 0) {
		rv = -1;
	}
	free(p.out);
	return rv;
}

/* Ack, nack, discard and redrive of one offset. */
static int cg_settle(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct stream_meta m;
	struct claim cl;
	struct cgrec g, g0;
	uint32_t max_att = c->attempts ? c->attempts : STORE_CG_MAX_ATTEMPTS;
	int found, dead;

	if (stream_meta_load(tx, c->scope, c->shard, &m) != 0 ||
	    cgrec_load(tx, c, &g) != 0) {
		return -1;
	}
	g0 = g;
	if (c->offset >= m.tail) {
		res_error(res, STORE_ERR,
		          "offset is past the end of the stream");
		return 0;
	}
	found = claim_load(tx, c, c->offset, &cl);
	if (found < 0) {
		return -1;
	}
	switch (c->op) {
	case STORE_OP_CG_ACK:
	case STORE_OP_CG_NACK:
		if (!found) {
			/* Not live: dead-lettered, settled (handed out before
			 * or trimmed before anyone saw it), or never handed
			 * out. */
			dead = dead_take(tx, c, c->offset, false);
			if (dead < 0) {
				return -1;
			}
			if (dead) {
				res_error(res, STORE_ERR,
				          "record is dead-lettered");
				return 0;
			}
			if (c->offset >= g.cursor && c->offset >= m.head) {
				res_error(res, STORE_ERR,
				          "record is not in flight");
				return 0;
			}
			if (c->op == STORE_OP_CG_NACK) {
				res_error(res, STORE_ERR,
				          "record is already acknowledged");
				return 0;
			}
			break; /* acking twice is fine */
		}
		if (c->op == STORE_OP_CG_ACK) {
			claim_drop(tx, c, &cl);
		} else if (cl.attempts >= max_att) {
			dead_put(tx, c, &cl);
			claim_drop(tx, c, &cl);
		} else if (cl.status != CL_READY) {
			claim_ready(tx, c, &g, &cl, cl.attempts);
		}
		break;
	case STORE_OP_CG_DISCARD:
	case STORE_OP_CG_REDRIVE:
		dead = dead_take(tx, c, c->offset, false);
		if (dead < 0) {
			return -1;
		}
		if (!dead) {
			res_error(res, STORE_ERR,
			          "offset is not dead-lettered");
			return 0;
		}
		if (c->op == STORE_OP_CG_REDRIVE && c->offset < m.head) {
			res_error(res, STORE_ERR,
			          "record is no longer retained");
			return 0;
		}
		(void)dead_take(tx, c, c->offset, true);
		if (c->op == STORE_OP_CG_REDRIVE) {
			if (found) {
				/* Not expected (a dead letter has no claim);
				 * the fresh count wins. */
				claim_ready(tx, c, &g, &cl, 0);
			} else {
				cl.status = CL_READY;
				cl.attempts = 0;
				cl.due = g.ready_next++;
				claim_store(tx, c, &g, &cl);
			}
		}
		break;
	default:
		break;
	}
	if (memcmp(&g, &g0, sizeof g) != 0) {
		cgrec_store(tx, c, &g);
	}
	res_begin(res, STORE_OK);
	res_bool(res, true);
	return 0;
}

static int cg_dead_letters(struct tx *tx, const struct store_cmd *c,
                           struct sbuf *res)
{
	struct titer it;
	struct sbuf k;
	uint64_t max = c->max ? c->max : DEAD_LIST_DEFAULT;
	uint32_t n = 0;
	size_t mark;
	int rv = 0;

	sbuf_init(&k);
	group_prefix(&k, tx->group, K_DEAD, c);
	titer_open(&it, tx, &k);
	sbuf_u64(&k, c->offset);
	res_begin(res, STORE_OK);
	mark = res_array_open(res);
	for (titer_seek(&it, &k); titer_valid(&it) && n < max;
	     titer_next(&it)) {
		size_t kl;
		const uint8_t *kp = titer_key(&it, &kl);
		res_u64(res, be_get64(kp + kl - 8));
		n++;
	}
	res_array_close(res, mark, n);
	if (titer_close(&it) != 0) {
		rv = -1;
	}
	sbuf_free(&k);
	return rv;
}

static int count_prefix(struct tx *tx, const struct sbuf *prefix, uint64_t *n)
{
	struct titer it;

	*n = 0;
	titer_open(&it, tx, prefix);
	for (titer_seek(&it, NULL); titer_valid(&it); titer_next(&it)) {
		(*n)++;
	}
	return titer_close(&it);
}

/* A diagnostic read (it walks the group's keys). */
static int cg_info(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	struct sbuf k;
	struct cgrec g;
	uint64_t claims, dead;
	int rv;

	if (cgrec_load(tx, c, &g) != 0) {
		return -1;
	}
	sbuf_init(&k);
	sub_prefix(&k, tx->group, SUB_CLAIM, c);
	rv = count_prefix(tx, &k, &claims);
	group_prefix(&k, tx->group, K_DEAD, c);
	if (rv == 0) {
		rv = count_prefix(tx, &k, &dead);
	}
	sbuf_free(&k);
	if (rv != 0) {
		return -1;
	}
	res_begin(res, STORE_OK);
	res_array(res, 3);
	res_u64(res, g.cursor);
	res_u64(res, claims);
	res_u64(res, dead);
	return 0;
}

int cgroup_apply(struct tx *tx, const struct store_cmd *c, struct sbuf *res)
{
	if (!check_scope(c, res)) {
		return 0;
	}
	if (c->group.len == 0 || c->group.len > STORE_NAME_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR consumer group name must be 1 to 4096 bytes");
		return 0;
	}
	switch (c->op) {
	case STORE_OP_CG_POLL:
		return cg_poll(tx, c, res);
	case STORE_OP_CG_DEAD_LETTERS:
		return cg_dead_letters(tx, c, res);
	case STORE_OP_CG_INFO:
		return cg_info(tx, c, res);
	default:
		return cg_settle(tx, c, res);
	}
}
