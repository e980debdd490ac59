/* FerricFlow checker; see flowcheck.h. */
#include "jepsen/flowcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "jepsen/workload.h"

#define CHECKER "flow"

struct ctx {
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

static bool is_mutation(uint8_t f)
{
	return f == JEPSEN_F_COMPLETE || f == JEPSEN_F_RETRY ||
	       f == JEPSEN_F_EXTEND;
}

/* The fencing token of a claim or mutation. */
static int op_fence(const struct jepsen_history *h, const struct jepsen_op *op,
                    struct ctx *c, int64_t *fence)
{
	size_t nv;
	const uint32_t *v = jepsen_history_op_values(h, op, &nv);
	if (nv != 1 || jepsen_workload_int(h, v[0], fence) != 0 || *fence < 0) {
		return jepsen_workload_bad_op(h, op, CHECKER,
		                              "takes one fencing token", c->err,
		                              c->errlen);
	}
	return 0;
}

/* A nil or integer value of a final read. */
static int opt_int(const struct jepsen_history *h, uint32_t id, bool *set,
                   int64_t *out)
{
	*set = false;
	*out = 0;
	if (id == JEPSEN_NIL) {
		return 0;
	}
	if (jepsen_workload_int(h, id, out) != 0) {
		return -EINVAL;
	}
	*set = *out != 0;
	return 0;
}

static bool terminal(const char *s)
{
	return strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 ||
	       strcmp(s, "cancelled") == 0;
}

/* The final read: found (else the flow is missing), its state, and
 * whether it is stuck (with why). */
struct final {
	bool have;
	bool found;
	const char *state;
	uint32_t line;
	const char *stuck; /* NULL: terminal or claimable */
};

static int parse_final(const struct jepsen_history *h,
                       const struct jepsen_op *op, struct ctx *c,
                       struct final *fr)
{
	size_t nv;
	const uint32_t *v = jepsen_history_op_values(h, op, &nv);
	bool next_set, dl_set, now_set;
	int64_t fence, next, dl, now;

	fr->have = true;
	fr->line = jepsen_history_complete_line(h, op);
	fr->stuck = NULL;
	if (nv == 1 && v[0] == JEPSEN_NIL) {
		fr->found = false;
		fr->state = "nil";
		return 0;
	}
	if (nv != 5 || v[0] == JEPSEN_NIL ||
	    jepsen_workload_int(h, v[1], &fence) != 0 ||
	    opt_int(h, v[2], &next_set, &next) != 0 ||
	    opt_int(h, v[3], &dl_set, &dl) != 0 ||
	    opt_int(h, v[4], &now_set, &now) != 0 || !now_set) {
		return jepsen_workload_bad_op(
		    h, op, CHECKER,
		    "a final read takes nil, or STATE FENCE NEXT_RUN "
		    "LEASE_DEADLINE NOW",
		    c->err, c->errlen);
	}
	fr->found = true;
	fr->state = jepsen_history_str(h, v[0]);
	if (terminal(fr->state)) {
		return 0;
	}
	if (strcmp(fr->state, "running") == 0) {
		if (!dl_set) {
			fr->stuck = "running without a lease deadline";
		} else if (dl > now + FLOWCHECK_HORIZON_MS) {
			fr->stuck = "running with a lease deadline beyond the "
			            "horizon";
		}
	} else if (!next_set) {
		fr->stuck = "waiting without a next run";
	} else if (next > now + FLOWCHECK_HORIZON_MS) {
		fr->stuck = "next run beyond the horizon";
	}
	return 0;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const char *id = jepsen_history_str(h, key);
	struct final fr = {0};
	int64_t fence, other;
	uint32_t create_line = 0, complete_line = 0, first_complete = 0;
	int64_t completed = -1;
	bool double_done = false;
	int rc = 0;

	/* Shapes first, and the final read (the last ok one). */
	for (size_t i = 0; i < n; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (op->f == JEPSEN_F_CLAIM || is_mutation(op->f)) {
			if ((rc = op_fence(h, op, c, &fence)) != 0) {
				return rc;
			}
		} else if (op->f == JEPSEN_F_READ && op->type == JEPSEN_OK) {
			if ((rc = parse_final(h, op, c, &fr)) != 0) {
				return rc;
			}
		} else if (op->f == JEPSEN_F_CREATE && op->type == JEPSEN_OK &&
		           create_line == 0) {
			create_line = jepsen_history_complete_line(h, op);
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *m = &h->ops[ops[i]];
		if (!is_mutation(m->f) || m->type != JEPSEN_OK) {
			continue;
		}
		(void)op_fence(h, m, c, &fence);
		uint32_t line = jepsen_history_complete_line(h, m);
		if (m->f == JEPSEN_F_COMPLETE) {
			if (completed < 0) {
				completed = fence;
				first_complete = line;
			} else if (completed != fence && !double_done) {
				double_done = true;
				rc = jepsen_anomalies_add(
				    c->out, "double-complete", line,
				    "flow %s: completed with fencing token "
				    "%" PRId64 ", and again with %" PRId64
				    " (line %u)",
				    id, fence, completed, first_complete);
			}
			complete_line = line;
		}
		for (size_t j = 0; j < n && rc == 0; j++) {
			const struct jepsen_op *e = &h->ops[ops[j]];
			if (j == i || e->type != JEPSEN_OK ||
			    e->complete == JEPSEN_NONE ||
			    e->complete >= m->invoke) {
				continue;
			}
			if (e->f == JEPSEN_F_CLAIM) {
				(void)op_fence(h, e, c, &other);
				if (other > fence) {
					rc = jepsen_anomalies_add(
					    c->out, "stale-fence", line,
					    "flow %s: %s with fencing token "
					    "%" PRId64 " accepted after a "
					    "claim with token %" PRId64
					    " answered (line %u)",
					    id, jepsen_history_f_name(m->f),
					    fence, other,
					    jepsen_history_complete_line(h, e));
					break;
				}
			} else if ((e->f == JEPSEN_F_COMPLETE ||
			            e->f == JEPSEN_F_RETRY) &&
			           e->f != m->f) {
				(void)op_fence(h, e, c, &other);
				if (other == fence) {
					rc = jepsen_anomalies_add(
					    c->out, "stale-fence", line,
					    "flow %s: %s with fencing token "
					    "%" PRId64 " accepted after a %s "
					    "ended that lease (line %u)",
					    id, jepsen_history_f_name(m->f),
					    fence, jepsen_history_f_name(e->f),
					    jepsen_history_complete_line(h, e));
					break;
				}
			}
		}
	}
	if (rc != 0 || !fr.have) {
		return rc;
	}
	if (!fr.found && create_line != 0) {
		return jepsen_anomalies_add(c->out, "lost", fr.line,
		                            "flow %s: created (line %u, "
		                            "acknowledged) but the final read "
		                            "did not find it",
		                            id, create_line);
	}
	if (fr.found && completed >= 0 && strcmp(fr.state, "completed") != 0) {
		rc = jepsen_anomalies_add(c->out, "lost-complete", fr.line,
		                          "flow %s: completed (line %u, "
		                          "acknowledged) but the final read "
		                          "found it %s",
		                          id, complete_line, fr.state);
	}
	if (rc == 0 && fr.stuck != NULL) {
		rc =
		    jepsen_anomalies_add(c->out, "stuck", fr.line,
		                         "flow %s: %s at the final read (state "
		                         "%s): neither terminal nor claimable",
		                         id, fr.stuck, fr.state);
	}
	return rc;
}

int jepsen_flowcheck_run(const struct jepsen_history *h,
                         struct jepsen_anomalies *out, char *err, size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h,
	    (1u << JEPSEN_F_CREATE) | (1u << JEPSEN_F_CLAIM) |
	        (1u << JEPSEN_F_COMPLETE) | (1u << JEPSEN_F_RETRY) |
	        (1u << JEPSEN_F_EXTEND) | (1u << JEPSEN_F_READ),
	    CHECKER, err, errlen);
	if (rc != 0) {
		return rc;
	}
	return jepsen_workload_for_each_key(h, check_key, &c);
}
