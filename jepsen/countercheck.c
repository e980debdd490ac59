/* Counter checker; see countercheck.h. */
#include "jepsen/countercheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "jepsen/workload.h"

#define CHECKER "counter"

/* One invocation or completion of one of a key's ops. */
struct point {
	uint32_t pos;   /* event index */
	uint32_t local; /* index in the key's op list */
	uint8_t start;  /* invocation (1) or completion (0) */
};

struct ctx {
	struct jepsen_anomalies *out;
	char *err;
	size_t errlen;
};

static int cmp_point(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int add_to(int64_t *sum, int64_t d)
{
	return __builtin_add_overflow(*sum, d, sum) ? -1 : 0;
}

static int check_key(const struct jepsen_history *h, uint32_t key,
                     const uint32_t *ops, size_t n, void *arg)
{
	struct ctx *c = arg;
	const char *k = jepsen_history_str(h, key);
	struct point *pts = malloc((2 * n + 1) * sizeof *pts);
	/* Per op: its value; for reads, the acknowledged sums when it
	 * began. */
	int64_t *val = malloc((n + 1) * sizeof *val);
	int64_t *began_pos = malloc((n + 1) * sizeof *began_pos);
	int64_t *began_neg = malloc((n + 1) * sizeof *began_neg);
	size_t np = 0, nv, reads = 0, adds = 0;
	int rc = 0;
	if (pts == NULL || val == NULL || began_pos == NULL ||
	    began_neg == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		const uint32_t *v = jepsen_history_op_values(h, op, &nv);
		if (op->type == JEPSEN_FAIL ||
		    (op->f == JEPSEN_F_READ && op->type != JEPSEN_OK)) {
			continue; /* never happened, or told nothing */
		}
		if (nv != 1 || jepsen_workload_int(h, v[0], &val[i]) != 0) {
			rc = jepsen_workload_bad_op(
			    h, op, CHECKER,
			    op->f == JEPSEN_F_ADD
			        ? "add takes one integer delta"
			        : "a read returns one integer",
			    c->err, c->errlen);
			goto out;
		}
		pts[np++] = (struct point){op->invoke, (uint32_t)i, 1};
		if (op->type == JEPSEN_OK) {
			pts[np++] =
			    (struct point){op->complete, (uint32_t)i, 0};
		}
		reads += op->f == JEPSEN_F_READ;
		adds += op->f == JEPSEN_F_ADD;
	}
	qsort(pts, np, sizeof *pts, cmp_point);
	/* Sums of deltas, split by sign: acknowledged ones (done) and ones
	 * that had begun and did not fail (maybe). */
	int64_t done_pos = 0, done_neg = 0, maybe_pos = 0, maybe_neg = 0;
	for (size_t i = 0; i < np && rc == 0; i++) {
		const struct point *p = &pts[i];
		const struct jepsen_op *op = &h->ops[ops[p->local]];
		int64_t x = val[p->local];
		if (op->f == JEPSEN_F_ADD) {
			int64_t *sum = p->start
			                   ? (x >= 0 ? &maybe_pos : &maybe_neg)
			                   : (x >= 0 ? &done_pos : &done_neg);
			if (add_to(sum, x) != 0) {
				rc = jepsen_workload_bad_op(
				    h, op, CHECKER, "the sums overflow 64 bits",
				    c->err, c->errlen);
			}
			continue;
		}
		if (p->start) {
			began_pos[p->local] = done_pos;
			began_neg[p->local] = done_neg;
			continue;
		}
		int64_t lo, hi;
		if (__builtin_add_overflow(began_pos[p->local], maybe_neg,
		                           &lo) ||
		    __builtin_add_overflow(maybe_pos, began_neg[p->local],
		                           &hi)) {
			rc = jepsen_workload_bad_op(h, op, CHECKER,
			                            "the sums overflow 64 bits",
			                            c->err, c->errlen);
			break;
		}
		if (x < lo || x > hi) {
			rc = jepsen_anomalies_add(
			    c->out, "out-of-bounds",
			    jepsen_history_complete_line(h, op),
			    "counter %s: the read returned %" PRId64
			    ", but while it ran the counter could only hold "
			    "%" PRId64 "..%" PRId64
			    " (adds acknowledged before it began: %" PRId64
			    " up, %" PRId64 " down; adds begun before it "
			    "ended: %" PRId64 " up, %" PRId64 " down)",
			    k, x, lo, hi, began_pos[p->local],
			    began_neg[p->local], maybe_pos, maybe_neg);
		}
	}
	if (rc == 0 && reads == 0 && adds > 0) {
		rc = jepsen_anomalies_add(
		    c->out, "unread", 0,
		    "counter %s: %zu adds but no read completed, so nothing "
		    "could be checked",
		    k, adds);
	}
out:
	free(pts);
	free(val);
	free(began_pos);
	free(began_neg);
	return rc;
}

int jepsen_countercheck_run(const struct jepsen_history *h,
                            struct jepsen_anomalies *out, char *err,
                            size_t errlen)
{
	struct ctx c = {.out = out, .err = err, .errlen = errlen};
	int rc = jepsen_workload_check_fs(
	    h, (1u << JEPSEN_F_ADD) | (1u << JEPSEN_F_READ), CHECKER, err,
	    errlen);
	if (rc != 0) {
		return rc;
	}
	return jepsen_workload_for_each_key(h, check_key, &c);
}
