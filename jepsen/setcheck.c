/* Set checker; see setcheck.h. */
#include "jepsen/setcheck.h"

#include "jepsen/workload.h"

#define CHECKER "set"

enum {
	ADD_TRIED = 1, /* ok or info */
	ADD_OK = 2,
	ADD_FAILED = 4,
};

/* What one key's history says about one record. */
struct rec {
	uint8_t flags;
	uint8_t reported; /* an unexpected anomaly was reported */
	uint8_t in_final;
	uint32_t first_invoke; /* earliest invocation of a non-failed add */
	uint32_t ok_end;       /* earliest ok completion of an add */
	uint32_t ok_line;
	uint32_t fail_line;
	uint32_t seen_end; /* earliest completion of a read listing it */
	uint32_t seen_line;
	uint32_t stamp; /* last read that listed it */
};

struct ctx {
	struct jepsen_workload_recs recs; /* of struct rec */
	uint32_t stamp;
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

/* A record as a key first touches it. */
static const struct rec blank = {.first_invoke = JEPSEN_NONE,
                                 .ok_end = JEPSEN_NONE,
                                 .seen_end = JEPSEN_NONE};

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const struct jepsen_op *final = NULL;
	const char *k = jepsen_history_str(h, key);
	size_t nv;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		if (op->f == JEPSEN_F_READ) {
			if (op->type == JEPSEN_OK &&
			    (final == NULL || op->complete > final->complete)) {
				final = op;
			}
			continue;
		}
		if (nv != 1 || v[0] == JEPSEN_NIL) {
			return jepsen_workload_bad_op(h, op, CHECKER,
			                              "add takes one record",
			                              c->err, c->errlen);
		}
		struct rec *r = jepsen_workload_recs_touch(&c->recs, v[0]);
		if (op->type == JEPSEN_FAIL) {
			r->flags |= ADD_FAILED;
			r->fail_line = jepsen_history_complete_line(h, op);
			continue;
		}
		r->flags |= ADD_TRIED;
		if (op->invoke < r->first_invoke) {
			r->first_invoke = op->invoke;
		}
		if (op->type == JEPSEN_OK) {
			r->flags |= ADD_OK;
			if (op->complete < r->ok_end) {
				r->ok_end = op->complete;
				r->ok_line =
				    jepsen_history_complete_line(h, op);
			}
		}
	}
	if (final == NULL) {
		if (c->recs.n > 0) {
			rc = jepsen_anomalies_add(
			    c->out, "unread", 0,
			    "set %s: %zu records were added but no read "
			    "completed, so none could be checked",
			    k, c->recs.n);
		}
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (op->f != JEPSEN_F_READ || op->type != JEPSEN_OK) {
			continue;
		}
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		uint32_t line = jepsen_history_complete_line(h, op);
		c->stamp++;
		for (size_t j = 0; j < nv && rc == 0; j++) {
			if (v[j] == JEPSEN_NIL) {
				continue;
			}
			struct rec *r =
			    jepsen_workload_recs_touch(&c->recs, v[j]);
			const char *rs = jepsen_history_str(h, v[j]);
			if (r->stamp == c->stamp) {
				rc = jepsen_anomalies_add(
				    c->out, "duplicate", line,
				    "set %s: the read lists record %s twice", k,
				    rs);
				continue;
			}
			r->stamp = c->stamp;
			if (op == final) {
				r->in_final = 1;
			}
			if (op->complete < r->seen_end) {
				r->seen_end = op->complete;
				r->seen_line = line;
			}
			if (r->reported) {
				continue;
			}
			if (!(r->flags & ADD_TRIED)) {
				r->reported = 1;
				if (r->flags & ADD_FAILED) {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "set %s: the read lists record %s, "
					    "whose add failed (line %u)",
					    k, rs, r->fail_line);
				} else {
					rc = jepsen_anomalies_add(
					    c->out, "unexpected", line,
					    "set %s: the read lists record %s, "
					    "which was never added",
					    k, rs);
				}
			} else if (op->complete < r->first_invoke) {
				r->reported = 1;
				rc = jepsen_anomalies_add(
				    c->out, "unexpected", line,
				    "set %s: the read lists record %s before "
				    "any add of it began (line %u)",
				    k, rs, h->events[r->first_invoke].line);
			}
		}
	}
	for (size_t i = 0; i < c->recs.n && rc == 0; i++) {
		uint32_t id = c->recs.ids[i];
		struct rec *r = jepsen_workload_recs_at(&c->recs, id);
		if (r->in_final) {
			continue;
		}
		uint32_t fline = jepsen_history_complete_line(h, final);
		if (r->ok_end < final->invoke) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", fline,
			    "set %s: record %s, acknowledged at line %u, is "
			    "missing from the final read",
			    k, jepsen_history_str(h, id), r->ok_line);
		} else if (r->seen_end < final->invoke) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", fline,
			    "set %s: record %s, read at line %u, is missing "
			    "from the final read",
			    k, jepsen_history_str(h, id), r->seen_line);
		}
	}
out:
	jepsen_workload_recs_clear(&c->recs);
	return rc;
}

int jepsen_setcheck_run(const struct jepsen_history *h,
                        struct jepsen_anomalies *out, char *err, size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h, (1u << JEPSEN_F_ADD) | (1u << JEPSEN_F_READ), CHECKER, err,
	    errlen);
	if (rc != 0) {
		return rc;
	}
	return jepsen_workload_recs_run(h, &c.recs, &blank, sizeof blank,
	                                check_key, &c);
}
