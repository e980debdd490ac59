/* Stream checker; see streamcheck.h. */
#include "jepsen/streamcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/workload.h"

#define CHECKER "stream"
#define NO_OFFSET INT64_MIN

enum {
	APPEND_TRIED = 1, /* ok or info */
	APPEND_OK = 2,
	APPEND_FAILED = 4,
};

struct rec {
	uint8_t flags;
	uint8_t reported_unexpected;
	uint8_t reported_duplicate;
	uint8_t in_final;
	uint32_t ok_end; /* earliest ok completion of an append */
	uint32_t ok_line;
	uint32_t fail_line;
	int64_t offset; /* first offset it was seen at (ack or read) */
	uint32_t offset_line;
	uint32_t seen_end; /* earliest completion of a read listing it */
	uint32_t seen_line;
};

/* Offset -> (record, line), open addressing, rebuilt per key. */
struct slot {
	int64_t offset;
	uint32_t rec; /* JEPSEN_NIL: empty */
	uint32_t line;
	uint8_t reported;
};

struct ctx {
	struct jepsen_workload_recs recs; /* of struct rec */
	struct slot *slots;
	size_t slots_cap;
	size_t slots_used;
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

struct ack {
	uint32_t pos; /* completion */
	int64_t offset;
	uint32_t op;
};

/* A record as a key first touches it. */
static const struct rec blank = {
    .ok_end = JEPSEN_NONE, .seen_end = JEPSEN_NONE, .offset = NO_OFFSET};

static size_t slot_of(const struct slot *t, size_t cap, int64_t offset)
{
	uint64_t x = (uint64_t)offset * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(x ^ (x >> 31)) & (cap - 1);
	while (t[i].rec != JEPSEN_NIL && t[i].offset != offset) {
		i = (i + 1) & (cap - 1);
	}
	return i;
}

/* Finds or adds the slot for `offset`. */
static struct slot *offset_slot(struct ctx *c, int64_t offset)
{
	if ((c->slots_used + 1) * 2 > c->slots_cap) {
		size_t cap = c->slots_cap ? c->slots_cap * 2 : 256;
		struct slot *ns = calloc(cap, sizeof *ns);
		if (ns == NULL) {
			return NULL;
		}
		for (size_t i = 0; i < c->slots_cap; i++) {
			if (c->slots[i].rec != JEPSEN_NIL) {
				ns[slot_of(ns, cap, c->slots[i].offset)] =
				    c->slots[i];
			}
		}
		free(c->slots);
		c->slots = ns;
		c->slots_cap = cap;
	}
	struct slot *s = &c->slots[slot_of(c->slots, c->slots_cap, offset)];
	if (s->rec == JEPSEN_NIL) {
		s->offset = offset;
		c->slots_used++;
	}
	return s;
}

/* Records that `id` sits at `offset` (from an ack or a read at `line`),
 * reporting duplicates and divergence. */
static int place(const struct jepsen_history *h, struct ctx *c, const char *k,
                 uint32_t id, int64_t offset, uint32_t line)
{
	struct rec *r = jepsen_workload_recs_touch(&c->recs, id);
	int rc = 0;
	if (r->offset == NO_OFFSET) {
		r->offset = offset;
		r->offset_line = line;
	} else if (r->offset != offset && !r->reported_duplicate) {
		r->reported_duplicate = 1;
		rc = jepsen_anomalies_add(
		    c->out, "duplicate", line,
		    "stream %s: record %s is at offset %" PRId64
		    " here and at offset %" PRId64 " (line %u)",
		    k, jepsen_history_str(h, id), offset, r->offset,
		    r->offset_line);
	}
	struct slot *s = offset_slot(c, offset);
	if (s == NULL) {
		return -ENOMEM;
	}
	if (s->rec == JEPSEN_NIL) {
		s->rec = id;
		s->line = line;
	} else if (s->rec != id && !s->reported && rc == 0) {
		s->reported = 1;
		rc = jepsen_anomalies_add(
		    c->out, "divergent", line,
		    "stream %s: offset %" PRId64
		    " holds record %s here but record %s at line %u",
		    k, offset, jepsen_history_str(h, id),
		    jepsen_history_str(h, s->rec), s->line);
	}
	return rc;
}

/* Splits a read token "O:R" into the offset and R's id (JEPSEN_NIL with
 * *text set when R was never interned, i.e. never appended). */
static int parse_entry(const struct jepsen_history *h, uint32_t tok,
                       int64_t *offset, uint32_t *id, const char **text)
{
	size_t len;
	const char *s = jepsen_intern_str(&h->strings, tok, &len);
	const char *colon = memchr(s, ':', len);
	int64_t v = 0;
	if (colon == NULL || colon == s || colon == s + len - 1 ||
	    colon - s > 18) {
		return -EINVAL;
	}
	for (const char *p = s; p < colon; p++) {
		if (*p < '0' || *p > '9') {
			return -EINVAL;
		}
		v = v * 10 + (*p - '0');
	}
	*offset = v;
	*text = colon + 1;
	if (!jepsen_intern_find(&h->strings, colon + 1,
	                        len - (size_t)(colon + 1 - s), id)) {
		*id = JEPSEN_NIL;
	}
	return 0;
}

static int cmp_ack_pos(const void *a, const void *b)
{
	const struct ack *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Acknowledged appends: one that began after another was acknowledged
 * must have a higher offset. acks[] is in invocation order. */
static int check_order(const struct jepsen_history *h, struct ctx *c,
                       const char *k, struct ack *acks, size_t n)
{
	struct ack *done = malloc((n + 1) * sizeof *done);
	int rc = 0;
	if (done == NULL) {
		return -ENOMEM;
	}
	memcpy(done, acks, n * sizeof *done);
	qsort(done, n, sizeof *done, cmp_ack_pos);
	size_t j = 0;
	const struct ack *max = NULL;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *b = &h->ops[acks[i].op];
		while (j < n && done[j].pos < b->invoke) {
			if (max == NULL || done[j].offset > max->offset) {
				max = &done[j];
			}
			j++;
		}
		if (max != NULL && acks[i].offset <= max->offset) {
			const struct jepsen_op *a = &h->ops[max->op];
			size_t na, nb;
			const uint32_t *va =
			    jepsen_history_op_values(h, a, &na);
			const uint32_t *vb =
			    jepsen_history_op_values(h, b, &nb);
			rc = jepsen_anomalies_add(
			    c->out, "reorder",
			    jepsen_history_complete_line(h, b),
			    "stream %s: record %s got offset %" PRId64
			    " though it was appended after record %s was "
			    "acknowledged at offset %" PRId64 " (line %u)",
			    k, jepsen_history_str(h, vb[0]), acks[i].offset,
			    jepsen_history_str(h, va[0]), max->offset,
			    jepsen_history_complete_line(h, a));
		}
	}
	free(done);
	return rc;
}

static int check_read(const struct jepsen_history *h, struct ctx *c,
                      const char *k, const struct jepsen_op *op, int is_final,
                      int64_t *first)
{
	size_t nv;
	const uint32_t *v = jepsen_history_op_values(h, op, &nv);
	uint32_t line = jepsen_history_complete_line(h, op);
	int64_t prev = NO_OFFSET;
	int rc = 0;
	*first = NO_OFFSET;
	for (size_t j = 0; j < nv && rc == 0; j++) {
		int64_t off;
		uint32_t id;
		const char *text;
		if (v[j] == JEPSEN_NIL) {
			continue;
		}
		if (parse_entry(h, v[j], &off, &id, &text) != 0) {
			return jepsen_workload_bad_op(
			    h, op, CHECKER,
			    "read entries must be OFFSET:RECORD", c->err,
			    c->errlen);
		}
		if (*first == NO_OFFSET) {
			*first = off;
		}
		if (prev != NO_OFFSET && off <= prev) {
			rc = jepsen_anomalies_add(
			    c->out, "reorder", line,
			    "stream %s: the read goes from offset %" PRId64
			    " back to offset %" PRId64,
			    k, prev, off);
		} else if (prev != NO_OFFSET && off == prev + 2) {
			rc = jepsen_anomalies_add(
			    c->out, "gap", line,
			    "stream %s: the read skips offset %" PRId64, k,
			    prev + 1);
		} else if (prev != NO_OFFSET && off > prev + 2) {
			rc = jepsen_anomalies_add(
			    c->out, "gap", line,
			    "stream %s: the read skips offsets %" PRId64
			    "..%" PRId64,
			    k, prev + 1, off - 1);
		}
		prev = off;
		if (rc != 0) {
			break;
		}
		if (id == JEPSEN_NIL) {
			rc = jepsen_anomalies_add(
			    c->out, "unexpected", line,
			    "stream %s: offset %" PRId64
			    " holds record %.80s, which was never appended",
			    k, off, text);
			continue;
		}
		struct rec *r = jepsen_workload_recs_touch(&c->recs, id);
		if (is_final) {
			r->in_final = 1;
		}
		if (op->complete < r->seen_end) {
			r->seen_end = op->complete;
			r->seen_line = line;
		}
		if (!(r->flags & APPEND_TRIED) && !r->reported_unexpected) {
			r->reported_unexpected = 1;
			if (r->flags & APPEND_FAILED) {
				rc = jepsen_anomalies_add(
				    c->out, "unexpected", line,
				    "stream %s: offset %" PRId64
				    " holds record %s, whose append failed "
				    "(line %u)",
				    k, off, jepsen_history_str(h, id),
				    r->fail_line);
			} else {
				rc = jepsen_anomalies_add(
				    c->out, "unexpected", line,
				    "stream %s: offset %" PRId64
				    " holds record %s, which was never "
				    "appended",
				    k, off, jepsen_history_str(h, id));
			}
		}
		if (rc == 0) {
			rc = place(h, c, k, id, off, line);
		}
	}
	return rc;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const struct jepsen_op *final = NULL;
	const char *k = jepsen_history_str(h, key);
	struct ack *acks = malloc((n + 1) * sizeof *acks);
	size_t n_acks = 0, nv;
	int64_t final_first = NO_OFFSET, first;
	int rc = 0;
	if (acks == NULL) {
		return -ENOMEM;
	}
	c->slots_used = 0;
	if (c->slots != NULL) {
		memset(c->slots, 0, c->slots_cap * sizeof *c->slots);
	}
	/* Appends first: what was tried, acknowledged, failed. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (op->f != JEPSEN_F_APPEND) {
			if (op->type == JEPSEN_OK &&
			    (final == NULL || op->complete > final->complete)) {
				final = op;
			}
			continue;
		}
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		if (nv < 1 || v[0] == JEPSEN_NIL ||
		    (op->type == JEPSEN_OK && nv != 2)) {
			rc = jepsen_workload_bad_op(
			    h, op, CHECKER,
			    "append takes a record; its ok completion adds "
			    "the offset",
			    c->err, c->errlen);
			break;
		}
		struct rec *r = jepsen_workload_recs_touch(&c->recs, v[0]);
		if (op->type == JEPSEN_FAIL) {
			r->flags |= APPEND_FAILED;
			r->fail_line = jepsen_history_complete_line(h, op);
			continue;
		}
		r->flags |= APPEND_TRIED;
		if (op->type != JEPSEN_OK) {
			continue;
		}
		int64_t off;
		if (jepsen_workload_int(h, v[1], &off) != 0 || off < 0) {
			rc = jepsen_workload_bad_op(
			    h, op, CHECKER, "offset must be an integer >= 0",
			    c->err, c->errlen);
			break;
		}
		r->flags |= APPEND_OK;
		if (op->complete < r->ok_end) {
			r->ok_end = op->complete;
			r->ok_line = jepsen_history_complete_line(h, op);
		}
		acks[n_acks++] = (struct ack){op->complete, off, ops[i]};
	}
	for (size_t i = 0; i < n_acks && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[acks[i].op];
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		rc = place(h, c, k, v[0], acks[i].offset,
		           jepsen_history_complete_line(h, op));
	}
	if (rc == 0) {
		rc = check_order(h, c, k, acks, n_acks);
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (op->f != JEPSEN_F_READ || op->type != JEPSEN_OK) {
			continue;
		}
		rc = check_read(h, c, k, op, op == final, &first);
		if (op == final) {
			final_first = first;
		}
	}
	if (rc != 0) {
		goto out;
	}
	if (final == NULL) {
		if (n_acks > 0) {
			rc = jepsen_anomalies_add(
			    c->out, "unread", 0,
			    "stream %s: %zu appends were acknowledged but no "
			    "read completed, so none could be checked",
			    k, n_acks);
		}
		goto out;
	}
	uint32_t fline = jepsen_history_complete_line(h, final);
	for (size_t i = 0; i < c->recs.n && rc == 0; i++) {
		uint32_t id = c->recs.ids[i];
		struct rec *r = jepsen_workload_recs_at(&c->recs, id);
		if (r->in_final ||
		    (final_first != NO_OFFSET && r->offset != NO_OFFSET &&
		     r->offset < final_first)) {
			continue; /* present, or trimmed by retention */
		}
		if (r->ok_end < final->invoke) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", fline,
			    "stream %s: record %s, acknowledged at line %u "
			    "(offset %" PRId64 "), is missing from the final "
			    "read",
			    k, jepsen_history_str(h, id), r->ok_line,
			    r->offset);
		} else if (r->seen_end < final->invoke) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", fline,
			    "stream %s: record %s, read at line %u, is missing "
			    "from the final read",
			    k, jepsen_history_str(h, id), r->seen_line);
		}
	}
out:
	jepsen_workload_recs_clear(&c->recs);
	free(acks);
	return rc;
}

int jepsen_streamcheck_run(const struct jepsen_history *h,
                           struct jepsen_anomalies *out, char *err,
                           size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h, (1u << JEPSEN_F_APPEND) | (1u << JEPSEN_F_READ), CHECKER, err,
	    errlen);
	if (rc != 0) {
		return rc;
	}
	rc = jepsen_workload_recs_run(h, &c.recs, &blank, sizeof blank,
	                              check_key, &c);
	free(c.slots);
	return rc;
}
