/* Queue checker; see queuecheck.h. */
#include "jepsen/queuecheck.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/workload.h"

#define CHECKER "queue"

enum {
	PUB_TRIED = 1, /* ok or info */
	PUB_OK = 2,
	PUB_FAILED = 4,
};

struct rec {
	uint8_t flags;
	uint32_t first_invoke; /* earliest invocation of a non-failed publish */
	uint32_t pub_line;     /* an ok publish's completion line */
	uint32_t fail_line;
};

/* A delivery or a confirmed ack of one record. */
struct fact {
	uint32_t rec;
	uint32_t pos; /* completion event index */
	uint32_t op;
	uint8_t is_ack;
};

struct ctx {
	struct jepsen_workload_recs recs; /* of struct rec */
	struct fact *facts;
	size_t n_facts;
	size_t facts_cap;
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

/* A record as a key first touches it. */
static const struct rec blank = {.first_invoke = JEPSEN_NONE};

static int push_fact(struct ctx *c, struct fact f)
{
	if (c->n_facts == c->facts_cap) {
		size_t cap = c->facts_cap ? c->facts_cap * 2 : 256;
		struct fact *nf = realloc(c->facts, cap * sizeof *nf);
		if (nf == NULL) {
			return -ENOMEM;
		}
		c->facts = nf;
		c->facts_cap = cap;
	}
	c->facts[c->n_facts++] = f;
	return 0;
}

static int cmp_fact(const void *a, const void *b)
{
	const struct fact *x = a, *y = b;
	if (x->rec != y->rec) {
		return x->rec < y->rec ? -1 : 1;
	}
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Walks one record's deliveries and acks in completion order. */
static int check_record(const struct jepsen_history *h, struct ctx *c,
                        const char *k, const struct fact *f, size_t n)
{
	uint32_t id = f[0].rec;
	const char *rs = jepsen_history_str(h, id);
	struct rec *r = jepsen_workload_recs_touch(&c->recs, id);
	const struct jepsen_op *last_delivery = NULL, *last_ack = NULL;
	int rc = 0, reported = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[f[i].op];
		uint32_t line = jepsen_history_complete_line(h, op);
		if (!f[i].is_ack) {
			if (!reported && !(r->flags & PUB_TRIED)) {
				reported = 1;
				if (r->flags & PUB_FAILED) {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "queue %s: record %s was "
					    "delivered, but its publish failed "
					    "(line %u)",
					    k, rs, r->fail_line);
				} else {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "queue %s: record %s was "
					    "delivered but never published",
					    k, rs);
				}
			} else if (!reported &&
			           op->complete < r->first_invoke) {
				reported = 1;
				rc = jepsen_anomalies_add(
				    c->out, "unexpected", line,
				    "queue %s: record %s was delivered before "
				    "any publish of it began (line %u)",
				    k, rs, h->events[r->first_invoke].line);
			}
			last_delivery = op;
			continue;
		}
		if (last_delivery == NULL) {
			rc = jepsen_anomalies_add(
			    c->out, "unexpected", line,
			    "queue %s: record %s was acknowledged before any "
			    "delivery of it",
			    k, rs);
		} else if (last_ack != NULL &&
		           last_delivery->invoke > last_ack->complete) {
			rc = jepsen_anomalies_add(
			    c->out, "double-ack", line,
			    "queue %s: record %s was acknowledged at line %u, "
			    "yet delivered again by the consume at line %u "
			    "that began after that ack was confirmed, and "
			    "acknowledged again",
			    k, rs, jepsen_history_complete_line(h, last_ack),
			    jepsen_history_complete_line(h, last_delivery));
		}
		last_ack = op;
	}
	if (rc == 0 && (r->flags & PUB_OK)) {
		if (last_delivery == NULL) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", r->pub_line,
			    "queue %s: record %s was published but never "
			    "delivered",
			    k, rs);
		} else if (last_ack == NULL) {
			rc = jepsen_anomalies_add(
			    c->out, "unacked", r->pub_line,
			    "queue %s: record %s was published and "
			    "delivered (line %u), but no ack of it succeeded",
			    k, rs,
			    jepsen_history_complete_line(h, last_delivery));
		}
	}
	r->flags = 0; /* checked: the sweep for lost ones skips it */
	return rc;
}

static int record_values(const struct jepsen_history *h, struct ctx *c,
                         uint32_t opi, int is_ack)
{
	const struct jepsen_op *op = &h->ops[opi];
	size_t nv;
	const uint32_t *v = jepsen_history_op_values(h, op, &nv);
	int rc = 0;
	for (size_t j = 0; j < nv && rc == 0; j++) {
		if (v[j] != JEPSEN_NIL) {
			rc = push_fact(c, (struct fact){v[j], op->complete, opi,
			                                (uint8_t)is_ack});
		}
	}
	return rc;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const char *k = jepsen_history_str(h, key);
	size_t nv;
	int rc = 0;
	c->n_facts = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		switch (op->f) {
		case JEPSEN_F_PUBLISH: {
			if (nv != 1 || v[0] == JEPSEN_NIL) {
				rc = jepsen_workload_bad_op(
				    h, op, CHECKER, "publish takes one record",
				    c->err, c->errlen);
				break;
			}
			struct rec *r =
			    jepsen_workload_recs_touch(&c->recs, v[0]);
			if (op->type == JEPSEN_FAIL) {
				r->flags |= PUB_FAILED;
				r->fail_line =
				    jepsen_history_complete_line(h, op);
				break;
			}
			r->flags |= PUB_TRIED;
			if (op->invoke < r->first_invoke) {
				r->first_invoke = op->invoke;
			}
			if (op->type == JEPSEN_OK) {
				r->flags |= PUB_OK;
				r->pub_line =
				    jepsen_history_complete_line(h, op);
			}
			break;
		}
		case JEPSEN_F_CONSUME:
			if (op->type == JEPSEN_OK) {
				rc = record_values(h, c, ops[i], 0);
			}
			break;
		case JEPSEN_F_ACK:
			if (op->type == JEPSEN_OK) {
				rc = record_values(h, c, ops[i], 1);
			}
			break;
		default: /* nack */
			break;
		}
	}
	if (c->n_facts > 1) {
		qsort(c->facts, c->n_facts, sizeof *c->facts, cmp_fact);
	}
	for (size_t i = 0; i < c->n_facts && rc == 0;) {
		size_t j = i;
		while (j < c->n_facts && c->facts[j].rec == c->facts[i].rec) {
			j++;
		}
		rc = check_record(h, c, k, c->facts + i, j - i);
		i = j;
	}
	/* Published records no delivery or ack ever mentioned. */
	for (size_t i = 0; i < c->recs.n && rc == 0; i++) {
		struct rec *r =
		    jepsen_workload_recs_at(&c->recs, c->recs.ids[i]);
		if (r->flags & PUB_OK) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", r->pub_line,
			    "queue %s: record %s was published but never "
			    "delivered",
			    k, jepsen_history_str(h, c->recs.ids[i]));
		}
	}
	jepsen_workload_recs_clear(&c->recs);
	return rc;
}

int jepsen_queuecheck_run(const struct jepsen_history *h,
                          struct jepsen_anomalies *out, char *err,
                          size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h,
	    (1u << JEPSEN_F_PUBLISH) | (1u << JEPSEN_F_CONSUME) |
	        (1u << JEPSEN_F_ACK) | (1u << JEPSEN_F_NACK),
	    CHECKER, err, errlen);
	if (rc != 0) {
		return rc;
	}
	rc = jepsen_workload_recs_run(h, &c.recs, &blank, sizeof blank,
	                              check_key, &c);
	free(c.facts);
	return rc;
}
