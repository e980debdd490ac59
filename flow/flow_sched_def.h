/* Schedule request bodies and definitions: the FSNP body of a
 * FLOW.SCHEDULE.* opcode decoded against the options that opcode takes
 * (`ERR unsupported flow schedule option <k>`, `ERR duplicate flow
 * schedule option <k>`), and a CREATE body checked into a definition
 * (kind inferred when absent, timing, overlap and catch-up policies,
 * bounds, the target). Pure functions: no I/O but reading a zone file
 * for a cron schedule's first run. Views point into the body. */
#ifndef LS_FLOW_FLOW_SCHED_DEF_H
#define LS_FLOW_FLOW_SCHED_DEF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/cron.h"
#include "flow/flow_body.h"
#include "flow/flow_schedule.h"
#include "wire/fsnp_value.h"

enum sched_field {
	SF_ID,
	SF_KIND,
	SF_AT_MS,
	SF_START_AT_MS,
	SF_DELAY_MS,
	SF_EVERY_MS,
	SF_CRON,
	SF_TIMEZONE,
	SF_CATCHUP_POLICY,
	SF_OVERLAP_POLICY,
	SF_OVERLAP_RETRY_MS,
	SF_MAX_FIRES,
	SF_END_AT_MS,
	SF_TARGET,
	SF_OVERWRITE,
	SF_NOW_MS,
	SF_FIRE_AT_MS,
	SF_WORKER,
	SF_LIMIT,
	SF_LEASE_MS,
	SF_BLOCK_MS,
	SF_STATE,
	SF_TARGET_TYPE,
	SF_FROM_MS,
	SF_TO_MS,
	SF_COUNT,
	SF_REV,
	SF_N
};

struct sched_req {
	uint16_t opcode;
	struct {
		bool set;
		struct fsnp_val v;
	} f[SF_N];
	int64_t i[SF_N];           /* integer options */
	bool b[SF_N];              /* boolean options */
	struct fsnp_bytes t[SF_N]; /* text options */
	struct fsnp_bytes id;
};

enum sched_kind { SK_ONE_SHOT, SK_DELAY, SK_INTERVAL, SK_CRON };

struct sched_def {
	struct fsnp_bytes id;
	enum sched_kind kind;
	int64_t start; /* at_ms / start_at_ms, -1 none */
	int64_t delay;
	int64_t every;
	struct fsnp_bytes cron;
	struct cron cr;
	struct fsnp_bytes tz;
	const char *overlap;
	int64_t overlap_retry; /* -1 none */
	int64_t max_fires;     /* -1 none */
	int64_t end_at;        /* -1 none */
	bool overwrite;
	struct fsnp_val target;
	struct fsnp_bytes target_type, target_id, target_prefix;
};

/* Decodes a schedule opcode's body. 0, or -1 with err. */
int sched_req_decode(uint16_t opcode, const uint8_t *body, size_t len,
                     struct sched_req *q, struct flow_err *err);
/* Checks a CREATE request into a definition. 0, or -1 with err. */
int sched_def_check(const struct sched_req *q, size_t body_len,
                    struct sched_def *d, struct flow_err *err);
/* The first run at `now` (cron: the first match at or after the start,
 * in the zone loaded from `tzdir`). 0, or -1 with err. */
int sched_def_first_run(const struct sched_def *d, int64_t now,
                        const char *tzdir, int64_t *out, struct flow_err *err);
const char *sched_kind_name(enum sched_kind k);
const char *sched_field_name(enum sched_field f);

#endif
