/* Exactly-once checker; see oncecheck.h. */
#include "jepsen/oncecheck.h"

#include "jepsen/workload.h"

#define CHECKER "exactly-once"

enum {
	SEND_TRIED = 1, /* ok or info */
	SEND_OK = 2,
	SEND_FAILED = 4,
};

struct rec {
	uint8_t flags;
	uint8_t reported;
	uint32_t received;
	uint32_t first_line; /* first receipt */
	uint32_t send_line;  /* an ok send, or a failed one */
};

struct ctx {
	struct jepsen_workload_recs recs; /* of struct rec */
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

/* A record as a key first touches it. */
static const struct rec blank;

static int is_send(uint8_t f)
{
	return f == JEPSEN_F_SEND || f == JEPSEN_F_PUBLISH;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const char *k = jepsen_history_str(h, key);
	size_t nv;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		if (!is_send(op->f)) {
			continue;
		}
		if (nv != 1 || v[0] == JEPSEN_NIL) {
			return jepsen_workload_bad_op(h, op, CHECKER,
			                              "send takes one record",
			                              c->err, c->errlen);
		}
		struct rec *r = jepsen_workload_recs_touch(&c->recs, v[0]);
		if (op->type == JEPSEN_FAIL) {
			r->flags |= SEND_FAILED;
			if (!(r->flags & SEND_OK)) {
				r->send_line =
				    jepsen_history_complete_line(h, op);
			}
		} else {
			r->flags |= SEND_TRIED;
			if (op->type == JEPSEN_OK) {
				r->flags |= SEND_OK;
				r->send_line =
				    jepsen_history_complete_line(h, op);
			}
		}
	}
	/* Receipts in invocation order of the receiving ops. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (is_send(op->f) || op->type != JEPSEN_OK) {
			continue;
		}
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		uint32_t line = jepsen_history_complete_line(h, op);
		for (size_t j = 0; j < nv && rc == 0; j++) {
			if (v[j] == JEPSEN_NIL) {
				continue;
			}
			struct rec *r =
			    jepsen_workload_recs_touch(&c->recs, v[j]);
			const char *rs = jepsen_history_str(h, v[j]);
			if (++r->received == 1) {
				r->first_line = line;
			}
			if (r->reported) {
				continue;
			}
			if (!(r->flags & SEND_TRIED)) {
				r->reported = 1;
				if (r->flags & SEND_FAILED) {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "topic %s: record %s was received, "
					    "but its send failed (line %u)",
					    k, rs, r->send_line);
				} else {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "topic %s: record %s was received "
					    "but never sent",
					    k, rs);
				}
			} else if (r->received == 2) {
				r->reported = 1;
				rc = jepsen_anomalies_add(
				    c->out, "duplicate", line,
				    "topic %s: record %s was received again "
				    "(first at line %u)",
				    k, rs, r->first_line);
			}
		}
	}
	for (size_t i = 0; i < c->recs.n && rc == 0; i++) {
		struct rec *r =
		    jepsen_workload_recs_at(&c->recs, c->recs.ids[i]);
		if ((r->flags & SEND_OK) && r->received == 0) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", r->send_line,
			    "topic %s: record %s was sent (acknowledged) but "
			    "never received",
			    k, jepsen_history_str(h, c->recs.ids[i]));
		}
	}
	jepsen_workload_recs_clear(&c->recs);
	return rc;
}

int jepsen_oncecheck_run(const struct jepsen_history *h,
                         struct jepsen_anomalies *out, char *err, size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h,
	    (1u << JEPSEN_F_SEND) | (1u << JEPSEN_F_RECV) |
	        (1u << JEPSEN_F_PUBLISH) | (1u << JEPSEN_F_CONSUME),
	    CHECKER, err, errlen);
	if (rc != 0) {
		return rc;
	}
	return jepsen_workload_recs_run(h, &c.recs, &blank, sizeof blank,
	                                check_key, &c);
}
