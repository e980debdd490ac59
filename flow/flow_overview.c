/* The operations overview read of a data group (flow_overview.h). */
#include "flow/flow_overview.h"

#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/flow_index.h"
#include "flow/flow_record.h"
#include "store/command.h"
#include "store/ext.h"
#include "store/keys.h"
#include "store/result.h"

#define CMD_LEN (1 + 1 + 1 + 4)
/* An error longer than this is cut (the record keeps it whole). */
#define ERROR_MAX 300

void flow_overview_encode(uint32_t max, struct sbuf *out)
{
	sbuf_u8(out, STORE_CMD_VERSION);
	sbuf_u8(out, FLOW_STORE_OP_OVERVIEW);
	sbuf_u8(out, FLOW_CMD_VERSION);
	sbuf_u32(out, max);
}

/* A (type, state) total, or a (type, part) with flows in a state. */
struct pair {
	struct sbuf a, b;
	uint64_t n;
};

struct pairs {
	struct pair *v;
	size_t n, cap;
};

static bool same(const struct sbuf *s, struct fsnp_bytes b)
{
	return s->len == b.len &&
	       (b.len == 0 || memcmp(s->p, b.ptr, b.len) == 0);
}

/* Adds n to the entry (a, b) among entries [from, end), creating it. -1
 * out of memory. */
static int pairs_add(struct pairs *p, size_t from, struct fsnp_bytes a,
                     struct fsnp_bytes b, uint64_t n)
{
	for (size_t i = from; i < p->n; i++) {
		if (same(&p->v[i].a, a) && same(&p->v[i].b, b)) {
			p->v[i].n += n;
			return 0;
		}
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct pair *nv = realloc(p->v, cap * sizeof *nv);
		if (nv == NULL) {
			return -1;
		}
		p->v = nv;
		p->cap = cap;
	}
	sbuf_init(&p->v[p->n].a);
	sbuf_init(&p->v[p->n].b);
	sbuf_add(&p->v[p->n].a, a.ptr, a.len);
	sbuf_add(&p->v[p->n].b, b.ptr, b.len);
	p->v[p->n].n = n;
	p->n++;
	return 0;
}

static void pairs_free(struct pairs *p)
{
	for (size_t i = 0; i < p->n; i++) {
		sbuf_free(&p->v[i].a);
		sbuf_free(&p->v[i].b);
	}
	free(p->v);
}

static struct fsnp_bytes view(const struct sbuf *s)
{
	return (struct fsnp_bytes){s->p, s->len};
}

/* A flow found for a list: where it is and its sort key. */
struct cand {
	struct sbuf part, id;
	uint64_t order;
	const char *reason; /* stuck only */
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static int cands_add(struct cands *c, struct fsnp_bytes part,
                     struct fsnp_bytes id, uint64_t order, const char *reason)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct cand *nv = realloc(c->v, cap * sizeof *nv);
		if (nv == NULL) {
			return -1;
		}
		c->v = nv;
		c->cap = cap;
	}
	sbuf_init(&c->v[c->n].part);
	sbuf_init(&c->v[c->n].id);
	sbuf_add(&c->v[c->n].part, part.ptr, part.len);
	sbuf_add(&c->v[c->n].id, id.ptr, id.len);
	c->v[c->n].order = order;
	c->v[c->n].reason = reason;
	c->n++;
	return 0;
}

static void cands_free(struct cands *c)
{
	for (size_t i = 0; i < c->n; i++) {
		sbuf_free(&c->v[i].part);
		sbuf_free(&c->v[i].id);
	}
	free(c->v);
}

static int cmp_desc(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;
	return a->order < b->order ? 1 : a->order > b->order ? -1 : 0;
}

static int cmp_asc(const void *x, const void *y)
{
	return -cmp_desc(x, y);
}

/* Sums the counters of the group: per (type, state), and the (type, part)
 * pairs holding failed or running flows. 1 when the bound was hit. */
static int read_counters(struct tx *tx, uint32_t group, struct pairs *queues,
                         struct pairs *failed, struct pairs *running,
                         bool *truncated)
{
	struct store_tx_iter *it;
	struct sbuf p;
	size_t seen = 0, type_from = queues->n;
	bool valid;
	int rv = 0;

	sbuf_init(&p);
	sbuf_u32(&p, group);
	sbuf_u8(&p, K_FLOW_COUNT);
	it = store_tx_iter_open(tx, p.p, p.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid && rv == 0 && !*truncated;
	     store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, vl, off = 5, voff = 0;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		const uint8_t *v = store_tx_iter_value(it, &vl);
		struct fsnp_bytes t, pt, st;
		uint64_t n;
		if (!fkey_part(k, kl, &off, &t) ||
		    !fkey_part(k, kl, &off, &pt) || off != kl) {
			continue;
		}
		/* Counters come in (type, part) rows, each with its states:
		 * a type's totals are the entries added since its first
		 * counter, and each (type, part) comes once per state. */
		while (rv == 0 && flow_count_row_next(v, vl, &voff, &st, &n)) {
			if (++seen > FLOW_OVERVIEW_MAX_COUNTERS) {
				*truncated = true;
				break;
			}
			if (n == 0) {
				continue;
			}
			if (type_from == queues->n ||
			    !same(&queues->v[type_from].a, t)) {
				type_from = queues->n;
			}
			rv = pairs_add(queues, type_from, t, st, n);
			if (rv == 0 && fsnp_bytes_eq(st, "failed")) {
				rv = pairs_add(failed, failed->n, t, pt, n);
			} else if (rv == 0 && fsnp_bytes_eq(st, "running")) {
				rv = pairs_add(running, running->n, t, pt, n);
			}
		}
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -1;
	}
	sbuf_free(&p);
	return rv;
}

/* The newest `max` entries of the updated-at index of (type, state) in
 * each pair's partition, or (oldest first, `asc`) all of them; either way
 * at most `budget` entries in all. */
static int read_updated(struct tx *tx, uint32_t group, const struct pairs *ps,
                        const char *state, bool asc, uint32_t max,
                        size_t *budget, struct cands *out, bool *truncated)
{
	struct flow_ix_page pg;
	struct sbuf pfx;
	int rv = 0;

	flow_ix_page_init(&pg);
	sbuf_init(&pfx);
	for (size_t i = 0; i < ps->n && rv == 0; i++) {
		struct fsnp_bytes eq[2] = {view(&ps->v[i].a), fb(state)};
		struct flow_ix_usage u = {0};
		struct flow_ix_range r = {0};
		const char *msg;
		size_t want = asc || *budget < max ? *budget : max;
		if (want == 0) {
			*truncated = true;
			break;
		}
		flow_ix_prefix(&pfx, group, view(&ps->v[i].b), FLOW_IX_UPDATED,
		               eq, 2);
		r.prefix = pfx.p;
		r.prefix_len = pfx.len;
		r.hi = UINT64_MAX;
		r.desc = !asc;
		r.page = want < FLOW_IX_PAGE_MAX ? want : FLOW_IX_PAGE_MAX;
		if (flow_ix_scan(tx, &r, &pg, &u, &msg) != 0) {
			rv = -1;
			break;
		}
		*budget -= pg.n;
		*truncated = *truncated || (asc && pg.more);
		for (size_t h = 0; h < pg.n && rv == 0; h++) {
			rv = cands_add(out, view(&ps->v[i].b), pg.hits[h].id,
			               pg.hits[h].order, NULL);
		}
	}
	flow_ix_page_free(&pg);
	sbuf_free(&pfx);
	return rv;
}

/* Non-terminal flows past created_at_ms + max_active_ms at `now`. */
static int read_active(struct tx *tx, uint32_t group, uint64_t now,
                       size_t *budget, struct cands *out, bool *truncated)
{
	struct store_tx_iter *it;
	struct sbuf p;
	bool valid;
	int rv = 0;

	sbuf_init(&p);
	fkey_active_prefix(&p, group);
	it = store_tx_iter_open(tx, p.p, p.len);
	valid = store_tx_iter_seek(it, NULL, 0);
	for (; valid && rv == 0;
	     store_tx_iter_next(it), valid = store_tx_iter_valid(it)) {
		size_t kl, off = 5 + 8;
		const uint8_t *k = store_tx_iter_key(it, &kl);
		struct fsnp_bytes pt, id;
		uint64_t deadline;
		if (kl < off || !fkey_part(k, kl, &off, &pt) ||
		    !fkey_part(k, kl, &off, &id)) {
			continue;
		}
		deadline = be_get64(k + 5);
		if (deadline >= now) {
			break; /* in deadline order: the rest are not due */
		}
		if (*budget == 0) {
			*truncated = true;
			break;
		}
		(*budget)--;
		rv = cands_add(out, pt, id, deadline, "max_active_ms");
	}
	if (store_tx_iter_close(it) != 0) {
		rv = -1;
	}
	sbuf_free(&p);
	return rv;
}

static void write_error(struct fsnp_writer *w, const struct frec *r)
{
	const struct fsnp_val *e = &r->v[RV_ERROR];
	if (!r->v_set[RV_ERROR] || e->tag == FSNP_NIL) {
		fsnp_w_nil(w);
	} else if (e->tag == FSNP_BIN) {
		fsnp_w_bin(w, e->as.bin.ptr,
		           e->as.bin.len < ERROR_MAX ? e->as.bin.len
		                                     : ERROR_MAX);
	} else if (e->enc_len <= ERROR_MAX) {
		fsnp_w_val(w, e);
	} else {
		fsnp_w_str(w, "(error too large to show; FLOW.GET has it)");
	}
}

static void write_str(struct fsnp_writer *w, const struct frec *r,
                      enum rec_str f)
{
	if (r->s_set[f]) {
		fsnp_w_bin(w, r->s[f].ptr, r->s[f].len);
	} else {
		fsnp_w_nil(w);
	}
}

static int64_t rec_int(const struct frec *r, enum rec_int f)
{
	return r->i_set[f] ? r->i[f] : 0;
}

/* Loads a candidate's record into `buf`/`r`: 1 found, 0 gone, -1 error. */
static int load(struct tx *tx, uint32_t group, const struct cand *c,
                struct sbuf *key, struct sbuf *buf, struct frec *r)
{
	int lr;
	fkey_rec(key, group, view(&c->part), view(&c->id));
	lr = store_tx_get(tx, key->p, key->len, buf);
	if (lr != 1) {
		return lr;
	}
	return frec_decode(buf->p, buf->len, r) == 0 ? 1 : 0;
}

static int overview(struct tx *tx, uint32_t max, struct fsnp_writer *w)
{
	uint32_t group = store_tx_group(tx);
	uint64_t now = store_tx_now_ms(tx);
	struct pairs queues = {0}, failed = {0}, running = {0};
	struct cands fc = {0}, rc = {0}, stuck = {0};
	struct sbuf key, buf;
	/* One budget for the failed flows' index entries, one for the
	 * running and overdue flows' records. */
	size_t fbudget = FLOW_OVERVIEW_MAX_RECORDS;
	size_t budget = FLOW_OVERVIEW_MAX_RECORDS, nstuck = 0;
	bool truncated = false;
	int rv;

	sbuf_init(&key);
	sbuf_init(&buf);
	rv = read_counters(tx, group, &queues, &failed, &running, &truncated);
	if (rv == 0) {
		rv = read_updated(tx, group, &failed, "failed", false, max,
		                  &fbudget, &fc, &truncated);
	}
	if (rv == 0) {
		rv = read_updated(tx, group, &running, "running", true, max,
		                  &budget, &rc, &truncated);
	}
	/* Running flows whose lease ran out: stuck until reclaimed. */
	for (size_t i = 0; i < rc.n && rv == 0; i++) {
		struct frec r;
		int lr = load(tx, group, &rc.v[i], &key, &buf, &r);
		if (lr < 0) {
			rv = -1;
		} else if (lr == 1 && frec_eq(&r, RS_STATE, fb("running")) &&
		           r.i_set[RI_LEASE_DEADLINE_MS] &&
		           r.i[RI_LEASE_DEADLINE_MS] >= 0 &&
		           (uint64_t)r.i[RI_LEASE_DEADLINE_MS] < now) {
			rv = cands_add(&stuck, view(&rc.v[i].part),
			               view(&rc.v[i].id),
			               (uint64_t)r.i[RI_LEASE_DEADLINE_MS],
			               "lease_expired");
		}
	}
	if (rv == 0) {
		size_t before = stuck.n;
		rv = read_active(tx, group, now, &budget, &stuck, &truncated);
		/* A flow both past its lease and its deadline is listed once,
		 * for its lease. */
		for (size_t i = before; i < stuck.n && rv == 0; i++) {
			for (size_t j = 0; j < before; j++) {
				if (same(&stuck.v[j].id,
				         view(&stuck.v[i].id)) &&
				    same(&stuck.v[j].part,
				         view(&stuck.v[i].part))) {
					stuck.v[i].reason = NULL;
					break;
				}
			}
		}
	}
	if (rv != 0) {
		goto out;
	}
	if (fc.n > 1) {
		qsort(fc.v, fc.n, sizeof *fc.v, cmp_desc);
	}
	if (stuck.n > 1) {
		qsort(stuck.v, stuck.n, sizeof *stuck.v, cmp_asc);
	}

	fsnp_w_map_begin(w);
	fsnp_w_key(w, "now_ms");
	fsnp_w_u64(w, now);
	fsnp_w_key(w, "queues");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < queues.n; i++) {
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "type");
		fsnp_w_bin(w, queues.v[i].a.p, queues.v[i].a.len);
		fsnp_w_key(w, "state");
		fsnp_w_bin(w, queues.v[i].b.p, queues.v[i].b.len);
		fsnp_w_key(w, "count");
		fsnp_w_u64(w, queues.v[i].n);
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);

	fsnp_w_key(w, "failed");
	fsnp_w_array_begin(w);
	for (size_t i = 0, n = 0; i < fc.n && n < max && rv == 0; i++) {
		struct frec r;
		int lr = load(tx, group, &fc.v[i], &key, &buf, &r);
		if (lr < 0) {
			rv = -1;
			break;
		}
		if (lr == 0) {
			continue;
		}
		n++;
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "id");
		write_str(w, &r, RS_ID);
		fsnp_w_key(w, "type");
		write_str(w, &r, RS_TYPE);
		fsnp_w_key(w, "partition_key");
		write_str(w, &r, RS_PARTITION_KEY);
		fsnp_w_key(w, "updated_at_ms");
		fsnp_w_i64(w, rec_int(&r, RI_UPDATED_AT_MS));
		fsnp_w_key(w, "attempts");
		fsnp_w_i64(w, rec_int(&r, RI_ATTEMPTS));
		fsnp_w_key(w, "error");
		write_error(w, &r);
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);

	fsnp_w_key(w, "stuck");
	fsnp_w_array_begin(w);
	for (size_t i = 0; i < stuck.n && rv == 0; i++) {
		struct frec r;
		int lr;
		if (stuck.v[i].reason == NULL) {
			continue;
		}
		nstuck++;
		if (nstuck > max) {
			continue;
		}
		lr = load(tx, group, &stuck.v[i], &key, &buf, &r);
		if (lr < 0) {
			rv = -1;
			break;
		}
		if (lr == 0) {
			nstuck--;
			continue;
		}
		fsnp_w_map_begin(w);
		fsnp_w_key(w, "id");
		write_str(w, &r, RS_ID);
		fsnp_w_key(w, "type");
		write_str(w, &r, RS_TYPE);
		fsnp_w_key(w, "partition_key");
		write_str(w, &r, RS_PARTITION_KEY);
		fsnp_w_key(w, "state");
		write_str(w, &r, RS_STATE);
		fsnp_w_key(w, "reason");
		fsnp_w_str(w, stuck.v[i].reason);
		fsnp_w_key(w, "since_ms");
		fsnp_w_u64(w, stuck.v[i].order);
		fsnp_w_key(w, "lease_owner");
		write_str(w, &r, RS_LEASE_OWNER);
		fsnp_w_key(w, "attempts");
		fsnp_w_i64(w, rec_int(&r, RI_ATTEMPTS));
		fsnp_w_map_end(w);
	}
	fsnp_w_array_end(w);
	fsnp_w_key(w, "stuck_count");
	fsnp_w_u64(w, nstuck);
	fsnp_w_key(w, "truncated");
	fsnp_w_bool(w, truncated);
	fsnp_w_map_end(w);
out:
	pairs_free(&queues);
	pairs_free(&failed);
	pairs_free(&running);
	cands_free(&fc);
	cands_free(&rc);
	cands_free(&stuck);
	sbuf_free(&key);
	sbuf_free(&buf);
	return rv;
}

int flow_overview_apply(struct tx *tx, const uint8_t *cmd, size_t len,
                        struct sbuf *res)
{
	struct wbuf b;
	struct fsnp_writer w;
	uint32_t max;
	int rv;

	if (len != CMD_LEN || cmd[2] != FLOW_CMD_VERSION) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow overview command malformed");
		return 0;
	}
	max = be_get32(cmd + 3);
	if (max < 1 || max > FLOW_OVERVIEW_MAX) {
		res_error(res, STORE_BAD_COMMAND,
		          "ERR flow overview list length must be 1 to 100");
		return 0;
	}
	wbuf_init(&b);
	fsnp_w_init(&w, &b);
	rv = overview(tx, max, &w);
	if (rv == 0 && fsnp_w_finish(&w) == 0) {
		res_begin(res, STORE_OK);
		sbuf_add(res, b.data, b.len);
	} else if (rv == 0) {
		res_error(res, STORE_ERR,
		          "ERR flow overview could not be built");
	}
	wbuf_free(&b);
	return rv < 0 ? -1 : 0;
}
