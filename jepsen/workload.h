/* Helpers shared by the workload checkers (set, stream, counter, queue,
 * exactly-once): per-key iteration over a history's operations, per-value
 * records of one key's check, integer values, and the op-vocabulary check
 * each checker applies. */
#ifndef JEPSEN_WORKLOAD_H
#define JEPSEN_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jepsen/history.h"

/* Called once per key with that key's op indices in invocation order.
 * Returns 0 to go on, or an error code that stops the iteration. */
typedef int (*jepsen_workload_key_cb)(const struct jepsen_history *h,
                                      uint32_t key, const uint32_t *ops,
                                      size_t n, void *arg);

int jepsen_workload_for_each_key(const struct jepsen_history *h,
                                 jepsen_workload_key_cb cb, void *arg);

/* Parses value `id` as a decimal int64. Returns 0 or -EINVAL. */
int jepsen_workload_int(const struct jepsen_history *h, uint32_t id,
                        int64_t *out);

/* Returns 0 if every op's f is in `allowed` (a bit mask of 1 << f), else
 * -EINVAL with a message naming the first op that is not. */
int jepsen_workload_check_fs(const struct jepsen_history *h, uint32_t allowed,
                             const char *checker, char *err, size_t errlen);

/* -EINVAL with "<checker>: <what>: <op description>" in err. */
int jepsen_workload_bad_op(const struct jepsen_history *h,
                           const struct jepsen_op *op, const char *checker,
                           const char *what, char *err, size_t errlen);

/* Per-value state of one key's check: an element of `size` bytes for every
 * value id of the history, a copy of `blank` when a key first touches it,
 * and a list of the ids the key touched, so that moving on to the next key
 * costs what the last one touched. */
struct jepsen_workload_recs {
	unsigned char *elems; /* by value id */
	const void *blank;
	size_t size;
	bool *touched; /* by value id */
	uint32_t *ids; /* touched by the current key, in order */
	size_t n;
};

/* The element of value `id`. */
void *jepsen_workload_recs_at(const struct jepsen_workload_recs *t,
                              uint32_t id);

/* The element of value `id`, set to `blank` and listed when the current
 * key had not touched it yet. */
void *jepsen_workload_recs_touch(struct jepsen_workload_recs *t, uint32_t id);

/* Forgets what the current key touched. */
void jepsen_workload_recs_clear(struct jepsen_workload_recs *t);

/* Runs cb over every key (jepsen_workload_for_each_key) with `t` holding
 * an element like `blank` (`size` bytes) for each of h's values; frees
 * them after. -ENOMEM when they cannot be had. */
int jepsen_workload_recs_run(const struct jepsen_history *h,
                             struct jepsen_workload_recs *t, const void *blank,
                             size_t size, jepsen_workload_key_cb cb, void *arg);

#endif
