/* What the unit tests of the jepsen workload checkers share: running a
 * checker over a history written in the line format. */
#ifndef LS_TESTS_JEPSEN_TEST_UTIL_H
#define LS_TESTS_JEPSEN_TEST_UTIL_H

#include <stddef.h>

#include "jepsen/anomaly.h"
#include "jepsen/history.h"

typedef int (*jepsen_test_check_fn)(const struct jepsen_history *h,
                                    struct jepsen_anomalies *out, char *err,
                                    size_t errlen);

/* Runs `fn` over `text` (line format; a parse error fails the test).
 * Returns the number of anomalies, or -1 if the checker rejected the
 * input. With `kind`, also requires an anomaly of that kind whose message
 * contains `what`. */
int jepsen_test_check(jepsen_test_check_fn fn, const char *text,
                      const char *kind, const char *what);

#endif
