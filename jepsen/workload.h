/* Helpers shared by the workload checkers (set, stream, counter, queue,
 * exactly-once): per-key iteration over a history's operations, integer
 * values, and the op-vocabulary check each checker applies. */
#ifndef JEPSEN_WORKLOAD_H
#define JEPSEN_WORKLOAD_H

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

#endif
