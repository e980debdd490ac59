/* FerricFlow checker; see flowcheck.h. */
#include "jepsen/flowcheck.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
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

/* --- Schedules ----------------------------------------------------------- */

/* One target found by the final drain: its fire count and due time, parsed
 * from its id <schedule id>:<due_at_ms>:<fire_count>. */
struct tgt {
	int64_t n, due;
	uint32_t line;
};

static int tgt_cmp(const void *a, const void *b)
{
	const struct tgt *x = a, *y = b;
	if (x->n != y->n) {
		return x->n < y->n ? -1 : 1;
	}
	return x->due < y->due ? -1 : x->due > y->due;
}

/* Parses "<sid>:<due>:<n>" into t; false when it is not one of sid's. */
static bool parse_tid(const char *sid, const char *tid, struct tgt *t)
{
	size_t sl = strlen(sid);
	char *end;
	if (strncmp(tid, sid, sl) != 0 || tid[sl] != ':') {
		return false;
	}
	tid += sl + 1;
	t->due = strtoll(tid, &end, 10);
	if (end == tid || *end != ':' || t->due < 0) {
		return false;
	}
	tid = end + 1;
	t->n = strtoll(tid, &end, 10);
	return end != tid && *end == '\0' && t->n >= 1;
}

/* The final read of a schedule. */
struct sread {
	bool have, found;
	uint32_t line;
	const char *kind, *state, *end_reason;
	int64_t every, start, fires, coalesced, next; /* -1: nil */
};

static int sread_int(const struct jepsen_history *h, uint32_t id, int64_t *out)
{
	if (id == JEPSEN_NIL) {
		*out = -1;
		return 0;
	}
	return jepsen_workload_int(h, id, out) != 0 || *out < 0 ? -EINVAL : 0;
}

static int parse_sread(const struct jepsen_history *h,
                       const struct jepsen_op *op, struct ctx *c,
                       struct sread *sr)
{
	size_t nv;
	const uint32_t *v = jepsen_history_op_values(h, op, &nv);

	sr->have = true;
	sr->line = jepsen_history_complete_line(h, op);
	if (nv == 1 && v[0] == JEPSEN_NIL) {
		sr->found = false;
		return 0;
	}
	if (nv != 8 || v[0] == JEPSEN_NIL || v[1] == JEPSEN_NIL ||
	    sread_int(h, v[2], &sr->every) != 0 ||
	    sread_int(h, v[3], &sr->start) != 0 || sr->start < 0 ||
	    sread_int(h, v[4], &sr->fires) != 0 || sr->fires < 0 ||
	    sread_int(h, v[5], &sr->coalesced) != 0 || sr->coalesced < 0 ||
	    sread_int(h, v[6], &sr->next) != 0) {
		return jepsen_workload_bad_op(
		    h, op, CHECKER,
		    "a schedule read takes nil, or KIND STATE EVERY START "
		    "FIRES COALESCED NEXT END_REASON",
		    c->err, c->errlen);
	}
	sr->found = true;
	sr->kind = jepsen_history_str(h, v[0]);
	sr->state = jepsen_history_str(h, v[1]);
	sr->end_reason =
	    v[7] == JEPSEN_NIL ? "nil" : jepsen_history_str(h, v[7]);
	return 0;
}

/* The interval's cadence: every target due one period after the one
 * before, or later by whole periods the schedule reported as coalesced
 * (a fire k >= 1 periods late coalesces k and runs next one period after
 * its own time, so the gap to the next due time spans k + 1 periods). */
static int check_cadence(const char *sid, const struct sread *sr,
                         const struct tgt *t, size_t n, struct ctx *c)
{
	int64_t skipped = 0;
	if (sr->every <= 0 || n == 0) {
		return 0;
	}
	if (t[0].due != sr->start) {
		return jepsen_anomalies_add(
		    c->out, "bad-due", t[0].line,
		    "schedule %s: first target due at %" PRId64
		    ", not at the start %" PRId64,
		    sid, t[0].due, sr->start);
	}
	for (size_t i = 0; i < n; i++) {
		bool last = i + 1 == n;
		int64_t next = last ? sr->next : t[i + 1].due;
		if (next < 0) {
			break;
		}
		if (next - t[i].due < sr->every) {
			return jepsen_anomalies_add(
			    c->out, "early-fire",
			    last ? sr->line : t[i + 1].line,
			    "schedule %s: %s %" PRId64 " only %" PRId64
			    " ms after target %" PRId64 " (due %" PRId64
			    "), less than its period %" PRId64,
			    sid, last ? "next run" : "target due at", next,
			    next - t[i].due, t[i].n, t[i].due, sr->every);
		}
		skipped += (next - t[i].due) / sr->every - 1;
	}
	if (skipped != sr->coalesced &&
	    (sr->next >= 0 || skipped > sr->coalesced)) {
		return jepsen_anomalies_add(
		    c->out, "coalesce-mismatch", sr->line,
		    "schedule %s: the gaps between its %zu targets skip "
		    "%" PRId64 " periods of %" PRId64
		    " ms, but it reports %" PRId64 " coalesced",
		    sid, n, skipped, sr->every, sr->coalesced);
	}
	return 0;
}

static int check_schedule(const struct jepsen_history *h, const char *sid,
                          const uint32_t *ops, size_t n, struct ctx *c)
{
	struct sread sr = {0};
	struct tgt *t = NULL;
	size_t nt = 0, nv;
	uint32_t create_line = 0;
	int rc = 0;
	bool bad = false;

	t = calloc(n ? n : 1, sizeof *t);
	if (t == NULL) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct jepsen_op *op = &h->ops[ops[i]];
		if (op->type != JEPSEN_OK) {
			continue;
		}
		if (op->f == JEPSEN_F_CREATE) {
			if (create_line == 0) {
				create_line =
				    jepsen_history_complete_line(h, op);
			}
		} else if (op->f == JEPSEN_F_SCHEDULE) {
			rc = parse_sread(h, op, c, &sr);
		} else if (op->f == JEPSEN_F_TARGET) {
			const uint32_t *v =
			    jepsen_history_op_values(h, op, &nv);
			struct tgt x;
			if (nv != 1 || v[0] == JEPSEN_NIL) {
				rc = jepsen_workload_bad_op(
				    h, op, CHECKER, "a target takes its id",
				    c->err, c->errlen);
				break;
			}
			x.line = jepsen_history_complete_line(h, op);
			if (!parse_tid(sid, jepsen_history_str(h, v[0]), &x)) {
				rc = jepsen_anomalies_add(
				    c->out, "bad-target", x.line,
				    "schedule %s: target id %s is not "
				    "%s:<due_at_ms>:<fire_count>",
				    sid, jepsen_history_str(h, v[0]), sid);
				bad = true;
				continue;
			}
			t[nt++] = x;
		} else {
			rc = jepsen_workload_bad_op(
			    h, op, CHECKER,
			    "a schedule key takes create, schedule and target",
			    c->err, c->errlen);
		}
	}
	if (rc != 0 || !sr.have) {
		goto out;
	}
	if (!sr.found) {
		if (create_line != 0) {
			rc = jepsen_anomalies_add(
			    c->out, "lost", sr.line,
			    "schedule %s: created (line %u, acknowledged) but "
			    "the final read did not find it",
			    sid, create_line);
		}
		goto out;
	}
	qsort(t, nt, sizeof *t, tgt_cmp);
	/* The same target id found twice is one target. */
	size_t m = 0;
	for (size_t i = 0; i < nt; i++) {
		if (m > 0 && t[m - 1].n == t[i].n && t[m - 1].due == t[i].due) {
			continue;
		}
		t[m++] = t[i];
	}
	nt = m;
	for (size_t i = 0; i < nt && rc == 0; i++) {
		if (i > 0 && t[i - 1].n == t[i].n) {
			bad = true;
			rc = jepsen_anomalies_add(
			    c->out, "double-fire", t[i].line,
			    "schedule %s: fire %" PRId64
			    " created two targets, "
			    "due at %" PRId64 " and at %" PRId64 " (line %u)",
			    sid, t[i].n, t[i - 1].due, t[i].due, t[i - 1].line);
			continue;
		}
		for (size_t j = 0; j < i && rc == 0; j++) {
			if (t[j].due == t[i].due) {
				bad = true;
				rc = jepsen_anomalies_add(
				    c->out, "double-fire", t[i].line,
				    "schedule %s: the occurrence due at "
				    "%" PRId64 " fired twice, as fire %" PRId64
				    " and as fire %" PRId64 " (line %u)",
				    sid, t[i].due, t[j].n, t[i].n, t[j].line);
			}
		}
		if (rc == 0 && i > 0 && t[i - 1].n != t[i].n &&
		    t[i - 1].due > t[i].due) {
			bad = true;
			rc = jepsen_anomalies_add(
			    c->out, "out-of-order", t[i].line,
			    "schedule %s: fire %" PRId64 " due at %" PRId64
			    ", before fire %" PRId64 " due at %" PRId64,
			    sid, t[i].n, t[i].due, t[i - 1].n, t[i - 1].due);
		}
	}
	/* Fire counts 1..FIRES, each found once. */
	for (size_t i = 0, want = 1; i < nt && rc == 0; i++) {
		if (t[i].n > sr.fires) {
			bad = true;
			rc = jepsen_anomalies_add(
			    c->out, "extra-fire", t[i].line,
			    "schedule %s: target fire %" PRId64 " (due %" PRId64
			    ") beyond its fire_count %" PRId64,
			    sid, t[i].n, t[i].due, sr.fires);
			break;
		}
		if ((int64_t)want < t[i].n) {
			bad = true;
			rc = jepsen_anomalies_add(
			    c->out, "lost-fire", sr.line,
			    "schedule %s: fire_count %" PRId64
			    " but no target of fire %zu was found",
			    sid, sr.fires, want);
			break;
		}
		want = (size_t)t[i].n + 1;
	}
	if (rc == 0 && !bad && (int64_t)nt < sr.fires) {
		bad = true;
		rc = jepsen_anomalies_add(c->out, "lost-fire", sr.line,
		                          "schedule %s: fire_count %" PRId64
		                          " but only %zu targets "
		                          "found",
		                          sid, sr.fires, nt);
	}
	if (rc != 0 || bad) {
		goto out;
	}
	if (strcmp(sr.kind, "one_shot") == 0 || strcmp(sr.kind, "delay") == 0) {
		if (strcmp(sr.state, "completed") != 0 || sr.fires != 1 ||
		    strcmp(sr.end_reason, "one_shot_fired") != 0) {
			rc = jepsen_anomalies_add(
			    c->out, "one-shot", sr.line,
			    "schedule %s: a %s schedule read %s (end_reason "
			    "%s) "
			    "with %" PRId64
			    " fires; it should have fired exactly once",
			    sid, sr.kind, sr.state, sr.end_reason, sr.fires);
		} else if (t[0].due != sr.start) {
			rc = jepsen_anomalies_add(
			    c->out, "bad-due", t[0].line,
			    "schedule %s: its target is due at %" PRId64
			    ", not at %" PRId64,
			    sid, t[0].due, sr.start);
		}
	} else if (strcmp(sr.kind, "interval") == 0) {
		rc = check_cadence(sid, &sr, t, nt, c);
	}
out:
	free(t);
	return rc;
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

	for (size_t i = 0; i < n; i++) {
		uint8_t f = h->ops[ops[i]].f;
		if (f == JEPSEN_F_SCHEDULE || f == JEPSEN_F_TARGET) {
			return check_schedule(h, id, ops, n, c);
		}
	}
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
	        (1u << JEPSEN_F_EXTEND) | (1u << JEPSEN_F_READ) |
	        (1u << JEPSEN_F_SCHEDULE) | (1u << JEPSEN_F_TARGET),
	    CHECKER, err, errlen);
	if (rc != 0) {
		return rc;
	}
	return jepsen_workload_for_each_key(h, check_key, &c);
}
