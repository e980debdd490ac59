/* Helpers for the workload checkers; see workload.h. */
#include "jepsen/workload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int jepsen_workload_for_each_key(const struct jepsen_history *h,
                                 jepsen_workload_key_cb cb, void *arg)
{
	uint32_t *order;
	int rc = jepsen_history_ops_by_key(h, &order);
	if (rc != 0) {
		return rc;
	}
	for (size_t start = 0; start < h->n_ops && rc == 0;) {
		uint32_t key = h->ops[order[start]].key;
		size_t end = start;
		while (end < h->n_ops && h->ops[order[end]].key == key) {
			end++;
		}
		rc = cb(h, key, order + start, end - start, arg);
		start = end;
	}
	free(order);
	return rc;
}

int jepsen_workload_int(const struct jepsen_history *h, uint32_t id,
                        int64_t *out)
{
	size_t len;
	const char *s;
	char *end;
	if (id == JEPSEN_NIL) {
		return -EINVAL;
	}
	s = jepsen_intern_str(&h->strings, id, &len);
	if (len == 0 || len > 20 || s[0] == ' ' || s[0] == '+' ||
	    (s[0] != '-' && (s[0] < '0' || s[0] > '9'))) {
		return -EINVAL;
	}
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || end != s + len) {
		return -EINVAL;
	}
	*out = (int64_t)v;
	return 0;
}

int jepsen_workload_bad_op(const struct jepsen_history *h,
                           const struct jepsen_op *op, const char *checker,
                           const char *what, char *err, size_t errlen)
{
	char desc[256];
	jepsen_history_describe(h, op, desc, sizeof desc);
	if (err != NULL && errlen > 0) {
		snprintf(err, errlen, "%s: %s: %s", checker, what, desc);
	}
	return -EINVAL;
}

int jepsen_workload_check_fs(const struct jepsen_history *h, uint32_t allowed,
                             const char *checker, char *err, size_t errlen)
{
	for (size_t i = 0; i < h->n_ops; i++) {
		if (!(allowed & (1u << h->ops[i].f))) {
			return jepsen_workload_bad_op(
			    h, &h->ops[i], checker,
			    "operation not part of this workload", err, errlen);
		}
	}
	return 0;
}

void *jepsen_workload_recs_at(const struct jepsen_workload_recs *t, uint32_t id)
{
	return t->elems + (size_t)id * t->size;
}

void *jepsen_workload_recs_touch(struct jepsen_workload_recs *t, uint32_t id)
{
	void *e = jepsen_workload_recs_at(t, id);
	if (!t->touched[id]) {
		memcpy(e, t->blank, t->size);
		t->touched[id] = true;
		t->ids[t->n++] = id;
	}
	return e;
}

void jepsen_workload_recs_clear(struct jepsen_workload_recs *t)
{
	for (size_t i = 0; i < t->n; i++) {
		t->touched[t->ids[i]] = false;
	}
	t->n = 0;
}

int jepsen_workload_recs_run(const struct jepsen_history *h,
                             struct jepsen_workload_recs *t, const void *blank,
                             size_t size, jepsen_workload_key_cb cb, void *arg)
{
	size_t ids = h->strings.count + 1;
	int rc;
	memset(t, 0, sizeof *t);
	t->blank = blank;
	t->size = size;
	t->elems = calloc(ids, size);
	t->touched = calloc(ids, sizeof *t->touched);
	t->ids = calloc(ids, sizeof *t->ids);
	if (t->elems == NULL || t->touched == NULL || t->ids == NULL) {
		rc = -ENOMEM;
	} else {
		rc = jepsen_workload_for_each_key(h, cb, arg);
	}
	free(t->elems);
	free(t->touched);
	free(t->ids);
	memset(t, 0, sizeof *t);
	return rc;
}
