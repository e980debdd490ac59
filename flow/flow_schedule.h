/* FerricFlow schedules (docs/flow.md "Schedules", docs/storage.md
 * "Flow schedules"): definitions that create target flows at their due
 * times, kept as replicated records in the group their id routes to as a
 * flow id (the auto partition `__flow_auto__:<crc32(id) % 256>`).
 *
 * Schedules are a second store extension beside flow.c's (ops
 * FLOW_SCHED_OP_APPLY and FLOW_SCHED_OP_READ) with their own envelope:
 *
 *     u8  STORE_CMD_VERSION
 *     u8  FLOW_SCHED_OP_APPLY | FLOW_SCHED_OP_READ
 *     u8  FLOW_SCHED_CMD_VERSION
 *     u16 kind: an FSNP schedule opcode, or FLOW_SCHED_KIND_*
 *     u64 client clock skew allowed, ms
 *     u32 body length + body (an FSNP typed value)
 *
 * Apply never plans: whatever depends on the tz database or on another
 * group (a cron schedule's next occurrence, a planning error, whether the
 * previous target is still active) is computed by the proposer
 * (flow_sched_plan) and carried in the command; apply compares times,
 * checks that the schedule is still at the version the plan was made
 * against, and records the outcome. A plan made against a stale version
 * changes nothing, so a fire is idempotent on (schedule, due time) and two
 * schedulers (or one across a leader change) can neither double nor skip
 * an occurrence.
 *
 * A fire writes, in the same apply, an outbox entry (schedule, due time)
 * holding the target's FLOW.CREATE body with its deterministic id
 * `<id_prefix>:<due_at_ms>:<fire_count>`. The proposer then creates the
 * target (an idempotent create, in whatever group it routes to) and
 * removes the entry (FLOW_SCHED_KIND_OUTBOX_DONE); a leader that finds
 * entries left over by a predecessor creates them again, which the
 * idempotent create makes harmless. */
#ifndef LS_FLOW_FLOW_SCHEDULE_H
#define LS_FLOW_FLOW_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/flow_body.h"
#include "wire/buf.h"
#include "wire/fsnp_value.h"

struct store;

#define FLOW_SCHED_OP_APPLY 0xB0
#define FLOW_SCHED_OP_READ 0xB1
#define FLOW_SCHED_CMD_VERSION 1

/* Internal kinds (never FSNP opcodes). */
#define FLOW_SCHED_KIND_SCAN 0x02F0        /* read: due schedules, outbox */
#define FLOW_SCHED_KIND_RECORD 0x02F1      /* apply: planned outcomes */
#define FLOW_SCHED_KIND_OUTBOX_DONE 0x02F2 /* apply: created targets */

#define FLOW_SCHED_FLOW_PREFIX "__ferricstore_schedule__:"
#define FLOW_SCHED_ID_MAX 4096
#define FLOW_SCHED_DEF_MAX (32 * 1024)
#define FLOW_SCHED_INLINE_MAX (8 * 1024)
#define FLOW_SCHED_RETRY_DEFAULT_MS 1000
#define FLOW_SCHED_RETRY_CAP_MS 30000
#define FLOW_SCHED_FIRE_DUE_MAX 1000
#define FLOW_SCHED_LIST_DEFAULT 100
#define FLOW_SCHED_LIST_MAX 1000

/* Whether `opcode` is one of the 8 FLOW.SCHEDULE.* opcodes. */
bool flow_sched_opcode(uint16_t opcode);
/* Whether a kind is served by store_read. */
bool flow_sched_kind_is_read(uint16_t kind);

/* The proposer's half of CREATE, GET, DELETE, LIST, PAUSE and RESUME:
 * validates `body` (the FSNP request body) and makes the store command
 * (*out malloc'd). CREATE of a cron schedule plans its first run here, at
 * `now_ms` (the body's now_ms when given) with the zone files of `tzdir`
 * (NULL: the system's). FIRE and FIRE_DUE take several steps and are not
 * commands (node/flow_sched.h runs them). 0, or -1 with `err`. */
int flow_sched_cmd_encode(uint16_t opcode, const uint8_t *body, size_t len,
                          uint64_t skew, int64_t now_ms, const char *tzdir,
                          uint8_t **out, size_t *out_len, struct flow_err *err);
/* Wraps an internal command's body (a typed value). 0, or -1 on OOM. */
int flow_sched_cmd_wrap(uint16_t kind, uint64_t skew, const uint8_t *body,
                        size_t len, uint8_t **out, size_t *out_len);

/* Validates a request body of a schedule opcode the way the command
 * encoder does, without making a command (FIRE and FIRE_DUE included):
 * 0, or -1 with `err`. */
int flow_sched_body_check(uint16_t opcode, const uint8_t *body, size_t len,
                          struct flow_err *err);

/* The schedule's partition (its auto partition) into buf
 * (FLOW_AUTO_PARTITION_MAX bytes); returns its length. */
size_t flow_sched_partition(const uint8_t *id, size_t len, char *buf);

/* --- records ------------------------------------------------------------ */

enum sched_str {
	SS_ID,
	SS_FLOW_ID,
	SS_STATE,
	SS_KIND,
	SS_CRON,
	SS_TIMEZONE,
	SS_CATCHUP_POLICY,
	SS_OVERLAP_POLICY,
	SS_END_REASON,
	SS_LAST_TARGET_ID,
	SS_LAST_OVERLAP_TARGET_ID,
	SS_LAST_OVERLAP_REASON,
	SS_LAST_PLANNING_ERROR,
	SS_PART,             /* internal: the schedule's partition */
	SS_LAST_TARGET_PART, /* internal: the last target's partition */
	SS_OWNER_SECRET,     /* internal: the key of its targets' owner proof */
	SS_N
};

enum sched_int {
	SI_CREATED_AT_MS,
	SI_UPDATED_AT_MS,
	SI_EVERY_MS,
	SI_NEXT_RUN_AT_MS,
	SI_FIRE_COUNT,
	SI_ATTEMPTS,
	SI_LAST_FIRE_AT_MS,
	SI_LAST_OVERLAP_AT_MS,
	SI_LAST_SKIPPED_AT_MS,
	SI_SKIPPED_COUNT,
	SI_COALESCED_COUNT,
	SI_LAST_CATCHUP_AT_MS,
	SI_LAST_COALESCED_COUNT,
	SI_OVERLAP_RETRY_MS,
	SI_OVERLAP_QUEUED_DUE_AT_MS,
	SI_MAX_FIRES,
	SI_END_AT_MS,
	SI_VERSION,        /* internal: bumped by every change */
	SI_OVERLAP_STREAK, /* internal: queue checks of one active target */
	SI_HIST_LO,        /* internal: the oldest history event's version */
	SI_HIST_MS,        /* internal: the latest history event's time */
	SI_N
};

/* A schedule record: views into its encoding. Absent strings have a NULL
 * ptr; absent integers are -1 (every stored integer is >= 0). */
struct flow_sched_rec {
	struct fsnp_bytes s[SS_N];
	int64_t i[SI_N];
	struct fsnp_val target; /* tag FSNP_NIL when absent */
};

/* Decodes a stored (or scanned) record map. 0, or -1. */
int flow_sched_rec_decode(const struct fsnp_val *map, struct flow_sched_rec *r);
/* Writes the record: every public field (absent ones nil), and the
 * internal ones ("_..." keys) when `internal`. */
void flow_sched_rec_write(struct fsnp_writer *w, const struct flow_sched_rec *r,
                          bool internal);
bool flow_sched_is(const struct flow_sched_rec *r, enum sched_str f,
                   const char *s);

/* --- planning (the proposer) --------------------------------------------- */

enum flow_sched_outcome {
	FSO_FIRE,           /* create a target */
	FSO_SKIP,           /* overlap skip: advance without a target */
	FSO_QUEUE,          /* overlap queue: hold the occurrence, retry */
	FSO_FAIL_OVERLAP,   /* overlap fail_schedule */
	FSO_FAIL_PLANNING,  /* next occurrence cannot be planned */
	FSO_OWNER_CONFLICT, /* another flow holds the target id: hold, retry */
};

struct flow_sched_plan {
	enum flow_sched_outcome outcome;
	bool manual;
	int64_t due;            /* the occurrence's logical due time */
	int64_t next;           /* the next run, -1 none (completes) */
	int64_t coalesced;      /* elapsed occurrences not replayed */
	const char *end_reason; /* when next is -1 */
	char target_id[FLOW_SCHED_ID_MAX + 48];
	char error[320];
};

/* Plans the schedule's current occurrence at `now`: automatic (due =
 * the queued occurrence or next_run_at_ms, interval catch-up) or `manual`
 * (due = fire_at, no catch-up, the next run kept). `prev_active` says
 * whether the previous target exists and is not terminal (the proposer
 * asked its group). Pure but for reading the zone files of `tzdir`. */
void flow_sched_plan(const struct flow_sched_rec *r, int64_t now, bool manual,
                     int64_t fire_at, bool prev_active, const char *tzdir,
                     struct flow_sched_plan *p);
/* Writes the plan as one item of a FLOW_SCHED_KIND_RECORD body. */
void flow_sched_plan_write(struct fsnp_writer *w,
                           const struct flow_sched_rec *r,
                           const struct flow_sched_plan *p);

/* Targets carry attribute FLOW_SCHED_OWNER_ATTR, the schedule's proof of
 * ownership: base64url(HMAC-SHA256(owner secret, id, target id, target
 * definition)). The secret is drawn by the node proposing the create. A
 * target id held by a flow without this schedule's proof is refused with
 * FLOW_SCHED_OWNER_CONFLICT; the occurrence is held and tried again after
 * FLOW_SCHED_OWNER_RETRY_MS. */
/* A schedule's events (FerricStore's signals on the schedule's internal
 * flow: signaled, with `signal` schedule_created, schedule_fired, ...),
 * kept in the flow history of flow_id in the schedule's partition, the
 * newest FLOW_SCHED_HISTORY_MAX. */
#define FLOW_SCHED_HISTORY_MAX 1000
#define FLOW_SCHED_FLOW_TYPE "__ferricstore_schedule"

/* The due index entries a wake scan (held_only) visits at most. */
#define FLOW_SCHED_WAKE_VISIT_MAX 256

#define FLOW_SCHED_OWNER_ATTR "ferricstore.schedule.owner.v1"
#define FLOW_SCHED_OWNER_CONFLICT                                              \
	"ERR scheduled target id already exists with different owner"
#define FLOW_SCHED_OWNER_RETRY_MS 30000
#define FLOW_SCHED_SECRET_LEN 32
#define FLOW_SCHED_PROOF_MAX 44 /* 43 characters and a NUL */

/* The owner proof of target `tid` of r into out. 0, or -1 when r has no
 * secret (created before targets carried proofs). */
int flow_sched_owner_proof(const struct flow_sched_rec *r, const char *tid,
                           char out[FLOW_SCHED_PROOF_MAX]);
/* Writes the FLOW.GET body of plan p's target (its id and partition key)
 * and sets *part to the partition it lives in (pbuf holds an automatic
 * one: FLOW_AUTO_PARTITION_MAX bytes). */
void flow_sched_target_get_body(struct fsnp_writer *w,
                                const struct flow_sched_rec *r,
                                const struct flow_sched_plan *p, char *pbuf,
                                struct fsnp_bytes *part);

/* Merges LIST replies of several groups (each a list of records) into
 * one list ordered by next run (then id; `rev` reversed), at most
 * `count`, into `w`. */
void flow_sched_list_merge(struct fsnp_writer *w, const struct fsnp_val *lists,
                           size_t n, int64_t count, bool rev);

/* Registers the schedule ops with `s`. 0, or -1. */
int flow_sched_register(struct store *s);

#endif
