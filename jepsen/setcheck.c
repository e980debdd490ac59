/* Set checker; see setcheck.h. */
#include "jepsen/setcheck.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	uint8_t touched;
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
	struct rec *recs; /* by value id */
	uint32_t *touched;
	size_t n_touched;
	uint32_t stamp;
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

static struct rec *touch(struct ctx *c, uint32_t id)
{
	struct rec *r = &c->recs[id];
	if (!r->touched) {
		memset(r, 0, sizeof *r);
		r->touched = 1;
		r->first_invoke = JEPSEN_NONE;
		r->ok_end = JEPSEN_NONE;
		r->seen_end = JEPSEN_NONE;
		c->touched[c->n_touched++] = id;
	}
	return r;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const struct jepsen_op *final = NULL;
	const char *k = jepsen_history_str(h, key);
	size_t nv;
	int rc = 0;
	c->n_touched = 0;
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
		struct rec *r = touch(c, v[0]);
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
		if (c->n_touched > 0) {
			rc = jepsen_anomalies_add(
			    c->out, "unread", 0,
			    "set %s: %zu records were added but no read "
			    "completed, so none could be checked",
			    k, c->n_touched);
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
			struct rec *r = touch(c, v[j]);
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
	for (size_t i = 0; i < c->n_touched && rc == 0; i++) {
		uint32_t id = c->touched[i];
		struct rec *r = &c->recs[id];
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
	for (size_t i = 0; i < c->n_touched; i++) {
		c->recs[c->touched[i]].touched = 0;
	}
	return rc;
}

int jepsen_setcheck_run(const struct jepsen_history *h,
                        struct jepsen_anomalies *out, char *err, size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	size_t ids = h->strings.count + 1;
	int rc = jepsen_workload_check_fs(
	    h, (1u << JEPSEN_F_ADD) | (1u << JEPSEN_F_READ), CHECKER, err,
	    errlen);
	if (rc != 0) {
		return rc;
	}
	c.recs = calloc(ids, sizeof *c.recs);
	c.touched = calloc(ids, sizeof *c.touched);
	if (c.recs == NULL || c.touched == NULL) {
		rc = -ENOMEM;
	} else {
		rc = jepsen_workload_for_each_key(h, check_key, &c);
	}
	free(c.recs);
	free(c.touched);
	return rc;
}
