/* Linearizability checker for register / key-value histories.
 *
 * The search is Wing & Gong's with Lowe's improvements, as Porcupine does
 * it: operations are entries in a list of calls and returns ordered by real
 * time; the search linearizes a pending call whenever the model allows it,
 * backtracks at a return whose call is not yet linearized, and caches every
 * (set of linearized operations, model state) it has visited so no
 * configuration is explored twice. The history is split per key first
 * (linearizability is local), and each key is searched on its own.
 *
 * Model, per key (initial value nil):
 *   read v      ok iff the register holds v (nil = absent)
 *   get v       like read, but "" and nil are the same (kv stores that
 *               report an absent key as the empty string)
 *   write v     sets v                 (kv "put")
 *   cas [a b]   ok iff it holds a; sets b
 *   append s    sets the value to value ++ s (nil counts as "")
 * A failed operation never happened and is ignored. An indeterminate one
 * (info, or never completed) may take effect at any time after its
 * invocation, or never: its return is at +infinity and the search may
 * leave it out. A read whose outcome is unknown constrains nothing and is
 * dropped.
 *
 * The search is bounded in memory, steps and time; when a bound is hit
 * the verdict is "unknown", never a guess. */
#ifndef JEPSEN_LINCHECK_H
#define JEPSEN_LINCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "jepsen/history.h"

enum jepsen_lin_verdict {
	JEPSEN_LIN_LINEARIZABLE = 0,
	JEPSEN_LIN_NOT_LINEARIZABLE = 1,
	JEPSEN_LIN_UNKNOWN = 2, /* a limit was reached first */
};

#define JEPSEN_LIN_DEFAULT_MAX_MEMORY ((size_t)1 << 30)

struct jepsen_lin_limits {
	size_t max_memory;  /* bytes of search state for one key; 0: 1 GiB */
	uint64_t max_steps; /* search steps over all keys; 0: no limit */
	uint64_t max_ms;    /* monotonic wall-clock budget; 0: no limit */
};

struct jepsen_lin_result {
	enum jepsen_lin_verdict verdict;
	size_t partitions;  /* keys searched */
	size_t ops;         /* operations that entered the search */
	uint64_t steps;     /* calls tried plus backtracks */
	size_t peak_memory; /* largest search state of one key, bytes */
	uint32_t bad_key;   /* first key found not linearizable */
	/* Why the verdict is not "linearizable": the key, the longest
	 * linearizable prefix and the operation that cannot follow it, or
	 * the limit that was reached. */
	char explanation[1024];
};

/* Checks `h`. Returns 0 with the verdict in *out; -EINVAL (message in
 * err) if an operation is not a register operation or has the wrong number
 * of values; -ENOMEM if even the fixed per-key structures do not fit.
 * `limits` may be NULL for the defaults. */
int jepsen_lincheck_run(const struct jepsen_history *h,
                        const struct jepsen_lin_limits *limits,
                        struct jepsen_lin_result *out, char *err,
                        size_t errlen);

const char *jepsen_lincheck_verdict_name(enum jepsen_lin_verdict v);

#endif
