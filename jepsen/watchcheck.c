/* Cache-watch checker; see watchcheck.h. */
#include "jepsen/watchcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/workload.h"

#define CHECKER "watch"
#define NO_OFFSET INT64_MIN
#define RESNAP "resnapshot:"

enum {
	PUT_OK = 1,
	PUT_INFO = 2, /* indeterminate: may have happened */
	PUT_FAIL = 4,
};

/* What is known of one value (by interned id). */
struct val {
	uint32_t op; /* its first put, or JEPSEN_NONE */
	uint32_t key;
	uint32_t shard;
	uint8_t flags;
	uint8_t reported_dup;
	uint32_t invoke_pos; /* event index of its earliest put invocation */
	uint32_t ok_pos;     /* event index of its earliest ok, or NONE */
	uint32_t ok_line;
	int64_t off; /* first offset it was delivered at */
	uint32_t seen_line;
};

/* One delivered change, by (shard, offset). */
struct slot {
	uint32_t shard; /* JEPSEN_NONE: empty */
	uint32_t key;
	uint32_t val; /* JEPSEN_NIL: a deletion */
	uint32_t line;
	int64_t off;
	uint8_t reported;
};

/* One entry of a watcher's chain: an offset delivered, or the start of a
 * segment (the offset it is complete from). */
struct centry {
	int64_t off;
	uint8_t start;
};

struct chain {
	int64_t process;
	uint32_t shard;
	struct centry *e;
	size_t n;
	size_t cap;
	int64_t last; /* NO_OFFSET until an event */
	int64_t first_from;
	uint32_t line; /* of its first op */
};

struct ctx {
	const struct jepsen_history *h;
	struct jepsen_anomalies *out;
	struct val *vals;
	size_t n_vals;
	struct slot *slots;
	size_t slots_cap;
	size_t slots_used;
	struct chain *chains;
	size_t n_chains;
	size_t chains_cap;
	char *err;
	size_t errlen;
};

static const char *str(const struct ctx *c, uint32_t id)
{
	return jepsen_history_str(c->h, id);
}

static size_t slot_of(const struct slot *t, size_t cap, uint32_t shard,
                      int64_t off)
{
	uint64_t x =
	    ((uint64_t)off ^ ((uint64_t)shard << 40)) * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(x ^ (x >> 31)) & (cap - 1);
	while (t[i].shard != JEPSEN_NONE &&
	       (t[i].shard != shard || t[i].off != off)) {
		i = (i + 1) & (cap - 1);
	}
	return i;
}

static int slots_grow(struct ctx *c)
{
	size_t cap = c->slots_cap ? c->slots_cap * 2 : 1024;
	struct slot *ns = malloc(cap * sizeof *ns);
	if (ns == NULL) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < cap; i++) {
		ns[i].shard = JEPSEN_NONE;
	}
	for (size_t i = 0; i < c->slots_cap; i++) {
		const struct slot *s = &c->slots[i];
		if (s->shard != JEPSEN_NONE) {
			ns[slot_of(ns, cap, s->shard, s->off)] = *s;
		}
	}
	free(c->slots);
	c->slots = ns;
	c->slots_cap = cap;
	return 0;
}

static struct chain *chain_of(struct ctx *c, int64_t process, uint32_t shard,
                              bool *fresh)
{
	*fresh = false;
	for (size_t i = c->n_chains; i > 0; i--) {
		struct chain *ch = &c->chains[i - 1];
		if (ch->process == process && ch->shard == shard) {
			return ch;
		}
	}
	if (c->n_chains == c->chains_cap) {
		size_t cap = c->chains_cap ? c->chains_cap * 2 : 16;
		struct chain *nc = realloc(c->chains, cap * sizeof *nc);
		if (nc == NULL) {
			return NULL;
		}
		c->chains = nc;
		c->chains_cap = cap;
	}
	struct chain *ch = &c->chains[c->n_chains++];
	memset(ch, 0, sizeof *ch);
	ch->process = process;
	ch->shard = shard;
	ch->last = NO_OFFSET;
	*fresh = true;
	return ch;
}

static int chain_push(struct chain *ch, int64_t off, bool start)
{
	if (ch->n == ch->cap) {
		size_t cap = ch->cap ? ch->cap * 2 : 64;
		struct centry *ne = realloc(ch->e, cap * sizeof *ne);
		if (ne == NULL) {
			return -ENOMEM;
		}
		ch->e = ne;
		ch->cap = cap;
	}
	ch->e[ch->n].off = off;
	ch->e[ch->n].start = start;
	ch->n++;
	return 0;
}

/* A non-negative decimal of `len` bytes. */
static int parse_off(const char *s, size_t len, int64_t *out)
{
	int64_t v = 0;
	if (len == 0 || len > 18) {
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			return -1;
		}
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* --- Puts ----------------------------------------------------------------- */

static int scan_puts(struct ctx *c)
{
	const struct jepsen_history *h = c->h;
	for (size_t i = 0; i < h->n_ops; i++) {
		const struct jepsen_op *op = &h->ops[i];
		if (op->f != JEPSEN_F_WRITE) {
			continue;
		}
		const struct jepsen_event *inv = &h->events[op->invoke];
		if (inv->nvalues != 2 || h->values[inv->values] == JEPSEN_NIL ||
		    h->values[inv->values + 1] == JEPSEN_NIL) {
			return jepsen_workload_bad_op(
			    h, op, CHECKER, "a put needs a key and a value",
			    c->err, c->errlen);
		}
		uint32_t key = h->values[inv->values];
		uint32_t v = h->values[inv->values + 1];
		struct val *x = &c->vals[v];
		if (x->op == JEPSEN_NONE) {
			x->op = (uint32_t)i;
			x->key = key;
			x->shard = op->key;
			x->invoke_pos = op->invoke;
		} else if (x->key != key || x->shard != op->key) {
			return jepsen_workload_bad_op(
			    h, op, CHECKER,
			    "a value is put to two keys (values must be "
			    "unique)",
			    c->err, c->errlen);
		}
		switch (op->type) {
		case JEPSEN_OK:
			x->flags |= PUT_OK;
			if (x->ok_pos == JEPSEN_NONE ||
			    op->complete < x->ok_pos) {
				x->ok_pos = op->complete;
				x->ok_line = h->events[op->complete].line;
			}
			break;
		case JEPSEN_FAIL:
			x->flags |= PUT_FAIL;
			break;
		default:
			x->flags |= PUT_INFO;
			break;
		}
	}
	return 0;
}

/* --- Deliveries ----------------------------------------------------------- */

/* Records change (key, v) at (shard, off), delivered by the completion at
 * event `pos`. */
static int deliver(struct ctx *c, struct chain *ch, int64_t off, uint32_t key,
                   const char *ktext, uint32_t v, const char *vtext,
                   uint32_t pos)
{
	const struct jepsen_history *h = c->h;
	uint32_t line = h->events[pos].line;
	const char *sh = str(c, ch->shard);
	int rc;

	if (ch->last != NO_OFFSET && off <= ch->last) {
		rc = jepsen_anomalies_add(
		    c->out, "duplicate", line,
		    "watcher %" PRId64 " of %s: offset %" PRId64
		    " (%s=%s) delivered after offset %" PRId64
		    " (offsets must strictly increase)",
		    ch->process, sh, off, ktext, vtext, ch->last);
		if (rc != 0) {
			return rc;
		}
	} else {
		if ((rc = chain_push(ch, off, false)) != 0) {
			return rc;
		}
		ch->last = off;
	}

	if ((c->slots_used + 1) * 2 > c->slots_cap &&
	    (rc = slots_grow(c)) != 0) {
		return rc;
	}
	struct slot *s =
	    &c->slots[slot_of(c->slots, c->slots_cap, ch->shard, off)];
	if (s->shard == JEPSEN_NONE) {
		s->shard = ch->shard;
		s->off = off;
		s->key = key;
		s->val = v;
		s->line = line;
		s->reported = 0;
		c->slots_used++;
	} else if ((s->key != key || s->val != v) && !s->reported) {
		s->reported = 1;
		rc = jepsen_anomalies_add(
		    c->out, "divergent", line,
		    "%s offset %" PRId64 " delivered as %s=%s here and as "
		    "%s=%s at line %u",
		    sh, off, ktext, vtext, str(c, s->key),
		    s->val == JEPSEN_NIL ? "(deleted)" : str(c, s->val),
		    s->line);
		if (rc != 0) {
			return rc;
		}
	}

	if (v == JEPSEN_NIL) {
		return jepsen_anomalies_add(c->out, "phantom", line,
		                            "%s offset %" PRId64
		                            ": a deletion of %s, which no "
		                            "client asked for",
		                            sh, off, ktext);
	}
	struct val *x = &c->vals[v];
	if (x->op == JEPSEN_NONE) {
		return jepsen_anomalies_add(c->out, "phantom", line,
		                            "%s offset %" PRId64
		                            ": %s=%s was never put",
		                            sh, off, ktext, vtext);
	}
	if (x->key != key) {
		return jepsen_anomalies_add(
		    c->out, "phantom", line,
		    "%s offset %" PRId64 ": %s delivered for key %s but put "
		    "to %s (line %u)",
		    sh, off, vtext, ktext, str(c, x->key),
		    jepsen_history_invoke_line(h, &h->ops[x->op]));
	}
	if (!(x->flags & (PUT_OK | PUT_INFO))) {
		return jepsen_anomalies_add(
		    c->out, "phantom", line,
		    "%s offset %" PRId64 ": %s=%s delivered, but its put "
		    "failed (line %u)",
		    sh, off, ktext, vtext,
		    jepsen_history_complete_line(h, &h->ops[x->op]));
	}
	if (pos < x->invoke_pos) {
		return jepsen_anomalies_add(
		    c->out, "phantom", line,
		    "%s offset %" PRId64 ": %s=%s delivered before its put "
		    "began (line %u)",
		    sh, off, ktext, vtext, h->events[x->invoke_pos].line);
	}
	if (x->shard != ch->shard) {
		return jepsen_anomalies_add(
		    c->out, "divergent", line,
		    "%s=%s delivered on %s but put to %s", ktext, vtext, sh,
		    str(c, x->shard));
	}
	if (x->off == NO_OFFSET) {
		x->off = off;
		x->seen_line = line;
	} else if (x->off != off && !x->reported_dup) {
		x->reported_dup = 1;
		return jepsen_anomalies_add(
		    c->out, "duplicate", line,
		    "%s=%s delivered at offsets %" PRId64 " (line %u) and "
		    "%" PRId64 ": the put was applied twice",
		    ktext, vtext, x->off, x->seen_line, off);
	}
	return 0;
}

/* One token of an ok recv: "OFF:K:V", "OFF:K" or "resnapshot:T". */
static int recv_token(struct ctx *c, const struct jepsen_op *op,
                      struct chain *ch, uint32_t id)
{
	size_t len;
	const char *t = jepsen_intern_str(&c->h->strings, id, &len);
	const char *colon = memchr(t, ':', len);
	int64_t off;
	if (colon == NULL) {
		goto bad;
	}
	if ((size_t)(colon - t) == strlen(RESNAP) - 1 &&
	    memcmp(t, RESNAP, strlen(RESNAP)) == 0) {
		if (parse_off(colon + 1, len - strlen(RESNAP), &off) != 0) {
			goto bad;
		}
		return chain_push(ch, off, true);
	}
	if (parse_off(t, (size_t)(colon - t), &off) != 0) {
		goto bad;
	}
	const char *k = colon + 1;
	const char *end = t + len;
	const char *colon2 = memchr(k, ':', (size_t)(end - k));
	size_t klen = colon2 != NULL ? (size_t)(colon2 - k) : (size_t)(end - k);
	if (klen == 0 || klen > 256) {
		goto bad;
	}
	char ktext[257];
	memcpy(ktext, k, klen);
	ktext[klen] = '\0';
	uint32_t key = JEPSEN_NONE, v = JEPSEN_NIL;
	if (!jepsen_intern_find(&c->h->strings, k, klen, &key)) {
		key = JEPSEN_NONE; /* no put names it */
	}
	const char *vtext = "(deleted)";
	if (colon2 != NULL) {
		const char *vs = colon2 + 1;
		size_t vlen = (size_t)(end - vs);
		if (vlen == 0) {
			goto bad;
		}
		vtext = vs;
		if (!jepsen_intern_find(&c->h->strings, vs, vlen, &v)) {
			/* Never put: interned nowhere but in this token;
			 * reported as a phantom by its text. */
			return jepsen_anomalies_add(
			    c->out, "phantom", c->h->events[op->complete].line,
			    "%s offset %" PRId64 ": %s=%s was never put",
			    str(c, ch->shard), off, ktext, vtext);
		}
	}
	return deliver(c, ch, off, key, ktext, v, vtext, op->complete);
bad:
	return jepsen_workload_bad_op(c->h, op, CHECKER,
	                              "a delivery must be OFFSET:KEY:VALUE, "
	                              "OFFSET:KEY or resnapshot:OFFSET",
	                              c->err, c->errlen);
}

static int scan_recvs(struct ctx *c)
{
	const struct jepsen_history *h = c->h;
	int rc;
	for (size_t i = 0; i < h->n_ops; i++) {
		const struct jepsen_op *op = &h->ops[i];
		if (op->f != JEPSEN_F_RECV) {
			continue;
		}
		bool fresh;
		struct chain *ch = chain_of(c, op->process, op->key, &fresh);
		if (ch == NULL) {
			return -ENOMEM;
		}
		if (fresh) {
			const struct jepsen_event *inv = &h->events[op->invoke];
			int64_t from = 0;
			if (inv->nvalues > 0 &&
			    jepsen_workload_int(h, h->values[inv->values],
			                        &from) != 0) {
				return jepsen_workload_bad_op(
				    h, op, CHECKER,
				    "a recv's FROM must be an offset", c->err,
				    c->errlen);
			}
			if (from < 0) {
				from = 0;
			}
			ch->first_from = from;
			ch->line = inv->line;
			if ((rc = chain_push(ch, from, true)) != 0) {
				return rc;
			}
		}
		if (op->type != JEPSEN_OK) {
			continue;
		}
		const struct jepsen_event *ev = &h->events[op->complete];
		for (uint32_t j = 0; j < ev->nvalues; j++) {
			uint32_t id = h->values[ev->values + j];
			if (id == JEPSEN_NIL) {
				return jepsen_workload_bad_op(
				    h, op, CHECKER, "nil is not a delivery",
				    c->err, c->errlen);
			}
			if ((rc = recv_token(c, op, ch, id)) != 0) {
				return rc;
			}
		}
	}
	return 0;
}

/* --- Completeness --------------------------------------------------------- */

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	if (x->shard != y->shard) {
		return x->shard < y->shard ? -1 : 1;
	}
	return x->off < y->off ? -1 : x->off > y->off;
}

static int check_lost(struct ctx *c)
{
	const struct jepsen_history *h = c->h;
	for (size_t v = 1; v < c->n_vals; v++) {
		const struct val *x = &c->vals[v];
		if (x->op == JEPSEN_NONE || !(x->flags & PUT_OK) ||
		    x->off != NO_OFFSET) {
			continue;
		}
		int rc = jepsen_anomalies_add(
		    c->out, "lost", x->ok_line,
		    "%s=%s acknowledged (put at line %u) but no watcher of %s "
		    "delivered it",
		    str(c, x->key), str(c, (uint32_t)v),
		    jepsen_history_invoke_line(h, &h->ops[x->op]),
		    str(c, x->shard));
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

/* Every delivered offset of `ch`'s shard inside one of its segments must
 * be in the chain; its end must reach the acknowledged puts. */
static int check_chain(struct ctx *c, const struct chain *ch,
                       const struct slot *u, size_t nu)
{
	const char *sh = str(c, ch->shard);
	int rc;
	/* u: the shard's deliveries by offset. */
	for (size_t i = 0; i < ch->n;) {
		int64_t start = ch->e[i].off;
		size_t j = i + 1;
		while (j < ch->n && !ch->e[j].start) {
			j++;
		}
		/* Segment: start, then events e[i+1..j). */
		if (j > i + 1) {
			int64_t end = ch->e[j - 1].off;
			size_t lo = 0, hi = nu;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (u[mid].off < start) {
					lo = mid + 1;
				} else {
					hi = mid;
				}
			}
			size_t k = i + 1;
			int64_t prev = start - 1;
			for (size_t p = lo; p < nu && u[p].off <= end; p++) {
				while (k < j && ch->e[k].off < u[p].off) {
					prev = ch->e[k].off;
					k++;
				}
				if (k < j && ch->e[k].off == u[p].off) {
					continue;
				}
				rc = jepsen_anomalies_add(
				    c->out, "skipped", u[p].line,
				    "watcher %" PRId64 " of %s passed over "
				    "offset %" PRId64 " (%s=%s, delivered at "
				    "line %u): it went from %" PRId64
				    " to %" PRId64,
				    ch->process, sh, u[p].off, str(c, u[p].key),
				    u[p].val == JEPSEN_NIL ? "(deleted)"
				                           : str(c, u[p].val),
				    u[p].line, prev, ch->e[k].off);
				if (rc != 0) {
					return rc;
				}
			}
		}
		i = j;
	}
	int64_t last = ch->last != NO_OFFSET ? ch->last : ch->first_from - 1;
	size_t behind = 0;
	const struct slot *first = NULL;
	for (size_t p = 0; p < nu; p++) {
		if (u[p].off > last && u[p].val != JEPSEN_NIL &&
		    (c->vals[u[p].val].flags & PUT_OK)) {
			if (first == NULL) {
				first = &u[p];
			}
			behind++;
		}
	}
	if (behind > 0) {
		return jepsen_anomalies_add(
		    c->out, "incomplete", ch->line,
		    "watcher %" PRId64 " of %s ended at offset %" PRId64
		    " without %zu acknowledged puts other watchers delivered "
		    "(the first %s=%s at offset %" PRId64 ", line %u)",
		    ch->process, sh, last, behind, str(c, first->key),
		    str(c, first->val), first->off, first->line);
	}
	return 0;
}

static int check_chains(struct ctx *c)
{
	struct slot *all = malloc((c->slots_used + 1) * sizeof *all);
	size_t n = 0;
	int rc = 0;
	if (all == NULL) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->slots_cap; i++) {
		if (c->slots[i].shard != JEPSEN_NONE) {
			all[n++] = c->slots[i];
		}
	}
	qsort(all, n, sizeof *all, cmp_slot);
	for (size_t i = 0; i < c->n_chains && rc == 0; i++) {
		const struct chain *ch = &c->chains[i];
		size_t lo = 0;
		while (lo < n && all[lo].shard != ch->shard) {
			lo++;
		}
		size_t hi = lo;
		while (hi < n && all[hi].shard == ch->shard) {
			hi++;
		}
		rc = check_chain(c, ch, all + lo, hi - lo);
	}
	free(all);
	return rc;
}

/* --- Real-time order per key ---------------------------------------------- */

struct ord {
	uint32_t key;
	uint32_t pos; /* ok completion (A) or invocation (B) */
	uint32_t val;
	int64_t off;
};

static int cmp_ord(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;
	if (x->key != y->key) {
		return x->key < y->key ? -1 : 1;
	}
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int check_order(struct ctx *c)
{
	struct ord *a = malloc(c->n_vals * sizeof *a);
	struct ord *b = malloc(c->n_vals * sizeof *b);
	size_t na = 0, nb = 0;
	int rc = 0;
	if (a == NULL || b == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t v = 1; v < c->n_vals; v++) {
		const struct val *x = &c->vals[v];
		if (x->op == JEPSEN_NONE || x->off == NO_OFFSET) {
			continue;
		}
		b[nb++] =
		    (struct ord){x->key, x->invoke_pos, (uint32_t)v, x->off};
		if (x->flags & PUT_OK) {
			a[na++] = (struct ord){x->key, x->ok_pos, (uint32_t)v,
			                       x->off};
		}
	}
	qsort(a, na, sizeof *a, cmp_ord);
	qsort(b, nb, sizeof *b, cmp_ord);
	/* For each put (b), the puts of its key acknowledged before it began
	 * (a prefix of a) must all sit at lower offsets. */
	size_t ia = 0;
	int64_t best = NO_OFFSET;
	uint32_t best_val = JEPSEN_NIL;
	uint32_t cur_key = JEPSEN_NONE;
	for (size_t ib = 0; ib < nb && rc == 0; ib++) {
		if (b[ib].key != cur_key) {
			cur_key = b[ib].key;
			best = NO_OFFSET;
			while (ia < na && a[ia].key < cur_key) {
				ia++;
			}
		}
		while (ia < na && a[ia].key == cur_key &&
		       a[ia].pos < b[ib].pos) {
			if (a[ia].off > best) {
				best = a[ia].off;
				best_val = a[ia].val;
			}
			ia++;
		}
		if (best != NO_OFFSET && best > b[ib].off) {
			const struct val *x = &c->vals[b[ib].val];
			const struct val *y = &c->vals[best_val];
			rc = jepsen_anomalies_add(
			    c->out, "reorder", c->h->events[b[ib].pos].line,
			    "%s: %s (put began at line %u) is at offset "
			    "%" PRId64 ", below %s at offset %" PRId64
			    ", acknowledged before it began (line %u)",
			    str(c, cur_key), str(c, b[ib].val),
			    c->h->events[x->invoke_pos].line, b[ib].off,
			    str(c, best_val), best, y->ok_line);
		}
	}
out:
	free(a);
	free(b);
	return rc;
}

int jepsen_watchcheck_run(const struct jepsen_history *h,
                          struct jepsen_anomalies *out, char *err,
                          size_t errlen)
{
	struct ctx c;
	int rc;
	memset(&c, 0, sizeof c);
	c.h = h;
	c.out = out;
	c.err = err;
	c.errlen = errlen;
	rc = jepsen_workload_check_fs(
	    h, (1u << JEPSEN_F_WRITE) | (1u << JEPSEN_F_RECV), CHECKER, err,
	    errlen);
	if (rc != 0) {
		return rc;
	}
	c.n_vals = h->strings.count > 0 ? h->strings.count : 1;
	c.vals = malloc(c.n_vals * sizeof *c.vals);
	if (c.vals == NULL) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < c.n_vals; i++) {
		memset(&c.vals[i], 0, sizeof c.vals[i]);
		c.vals[i].op = JEPSEN_NONE;
		c.vals[i].ok_pos = JEPSEN_NONE;
		c.vals[i].off = NO_OFFSET;
	}
	if ((rc = scan_puts(&c)) != 0 || (rc = scan_recvs(&c)) != 0 ||
	    (rc = check_lost(&c)) != 0 || (rc = check_chains(&c)) != 0 ||
	    (rc = check_order(&c)) != 0) {
		goto out;
	}
out:
	for (size_t i = 0; i < c.n_chains; i++) {
		free(c.chains[i].e);
	}
	free(c.chains);
	free(c.slots);
	free(c.vals);
	return rc;
}
