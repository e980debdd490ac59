/* Fuzz target for jepsen/history: every input goes through all three
 * parsers (etcd-log, kv-edn, lines); whatever parses is then run through
 * every checker, the linearizability search with small limits. Parsers
 * must reject bad input with an error, never crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "jepsen/anomaly.h"
#include "jepsen/countercheck.h"
#include "jepsen/flowcheck.h"
#include "jepsen/history.h"
#include "jepsen/lincheck.h"
#include "jepsen/oncecheck.h"
#include "jepsen/queuecheck.h"
#include "jepsen/setcheck.h"
#include "jepsen/streamcheck.h"
#include "jepsen/watchcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*check_fn)(const struct jepsen_history *h,
                        struct jepsen_anomalies *out, char *err, size_t errlen);

static void check_all(const struct jepsen_history *h)
{
	static const check_fn fns[] = {
	    jepsen_setcheck_run,     jepsen_streamcheck_run,
	    jepsen_countercheck_run, jepsen_queuecheck_run,
	    jepsen_oncecheck_run,    jepsen_watchcheck_run,
	    jepsen_flowcheck_run,
	};
	struct jepsen_lin_limits lim = {.max_memory = 8u << 20,
	                                .max_steps = 20000};
	struct jepsen_lin_result res;
	char err[256];
	jepsen_lincheck_run(h, &lim, &res, err, sizeof err);
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
		struct jepsen_anomalies a;
		jepsen_anomalies_init(&a);
		fns[i](h, &a, err, sizeof err);
		jepsen_anomalies_free(&a);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum jepsen_format fmts[] = {
	    JEPSEN_FORMAT_ETCD_LOG,
	    JEPSEN_FORMAT_KV_EDN,
	    JEPSEN_FORMAT_LINES,
	};
	char err[256];
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
		struct jepsen_history h;
		jepsen_history_init(&h);
		if (jepsen_history_parse(&h, fmts[i], (const char *)data, size,
		                         err, sizeof err) == 0) {
			check_all(&h);
		} else if (err[0] == '\0') {
			__builtin_trap(); /* every error carries a message */
		}
		jepsen_history_free(&h);
	}
	return 0;
}
