/* Flow records and their keys (docs/storage.md "FerricFlow"): a record is
 * a typed-value map (the public fields plus internal ones starting with
 * "_"), kept under K_FLOW; the due index, history, values, policies,
 * signal keys and the retention index are kept beside it. An apply's
 * context (struct fctx) owns what the command's views point into. */
#ifndef LS_FLOW_FLOW_RECORD_H
#define LS_FLOW_FLOW_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/buf.h"
#include "store/ext.h"
#include "wire/buf.h"
#include "wire/fsnp_value.h"
#include "flow/flow.h"

struct fctx {
	struct tx *tx;
	uint32_t group;
	uint64_t entry_now; /* the entry's time */
	uint64_t now;       /* the command's time (a clamped now_ms) */
	uint64_t skew;
	uint64_t seed;
	bool write;
	/* A claim that only says what it would take (FLOW_STORE_OP_PEEK). */
	bool peek;
	/* Buffers the command's views point into, freed at its end. */
	void **keep;
	size_t nkeep;
	size_t capkeep;
	struct sbuf key; /* scratch */
	/* Records written (frec_save), kept when `track` is set, for the
	 * changes hook (flow.h); views into records the context owns. */
	bool track;
	struct flow_change *chg;
	size_t nchg;
	size_t capchg;
};

void fctx_init(struct fctx *c, struct tx *tx, uint64_t skew, uint64_t seed);
void fctx_fini(struct fctx *c);
/* Hands the records the command wrote to the changes hook (flow.h), when
 * one is set; called once the command succeeded. */
void flow_changes_notify(struct fctx *c, uint16_t opcode);
/* Takes the wbuf's storage into the context; returns its data. */
const uint8_t *fctx_keep(struct fctx *c, struct wbuf *b);
/* A copy of p[0..len) owned by the context. */
const uint8_t *fctx_dup(struct fctx *c, const void *p, size_t len);

enum rec_str {
	RS_ID,
	RS_TYPE,
	RS_STATE,
	RS_PARTITION_KEY,
	RS_RUN_STATE,
	RS_LEASE_OWNER,
	RS_LEASE_TOKEN,
	RS_PARENT_FLOW_ID,
	RS_ROOT_FLOW_ID,
	RS_CORRELATION_ID,
	RS_PARENT_PARTITION_KEY,
	RS_CHILD_GROUP, /* internal: the parent's child group */
	RS_N
};

enum rec_int {
	RI_VERSION,
	RI_ATTEMPTS,
	RI_FENCING_TOKEN,
	RI_CREATED_AT_MS,
	RI_UPDATED_AT_MS,
	RI_NEXT_RUN_AT_MS,
	RI_LEASE_DEADLINE_MS,
	RI_PRIORITY,
	RI_TTL_MS,
	RI_RETENTION_TTL_MS,
	RI_MAX_ACTIVE_MS,
	RI_TERMINAL_RETENTION_UNTIL_MS,
	RI_HISTORY_HOT_MAX_EVENTS,
	RI_HISTORY_MAX_EVENTS,
	/* internal */
	RI_HIST_LO,       /* oldest history version kept */
	RI_HIST_MS,       /* last event id's ms */
	RI_RETRY_FENCING, /* fencing token of the last retry (-1 none) */
	RI_CREATE_DIGEST, /* of the create request (idempotent creates) */
	RI_N
};

enum rec_val {
	RV_PAYLOAD,
	RV_RESULT,
	RV_ERROR,
	RV_ATTRIBUTES,
	RV_STATE_META,
	RV_VALUE_REFS,
	RV_CHILD_GROUPS,
	RV_N
};

/* Absent fields are nil. */
struct frec {
	struct fsnp_bytes s[RS_N];
	bool s_set[RS_N];
	int64_t i[RI_N];
	bool i_set[RI_N];
	struct fsnp_val v[RV_N];
	bool v_set[RV_N];
};

bool frec_terminal_state(struct fsnp_bytes state);
bool frec_is_terminal(const struct frec *r);
bool frec_is(const struct frec *r, enum rec_str f, const char *s);
bool frec_eq(const struct frec *r, enum rec_str f, struct fsnp_bytes b);
void frec_set_str(struct frec *r, enum rec_str f, struct fsnp_bytes b);
void frec_set_cstr(struct frec *r, enum rec_str f, const char *s);
void frec_clear_str(struct frec *r, enum rec_str f);
void frec_set_int(struct frec *r, enum rec_int f, int64_t v);
void frec_clear_int(struct frec *r, enum rec_int f);
void frec_set_val(struct frec *r, enum rec_val f, const struct fsnp_val *v);

/* Decodes a stored record (views into p). 0, or -1 when it is not a
 * record. */
int frec_decode(const uint8_t *p, size_t len, struct frec *r);
/* Loads the record of (partition, id): 1 found, 0 absent, -1 failure. */
int frec_load(struct fctx *c, struct fsnp_bytes part, struct fsnp_bytes id,
              struct frec *r);
/* Writes `r`, keeping the due and retention indexes in step with `old`
 * (NULL for a new record). */
void frec_save(struct fctx *c, const struct frec *old, const struct frec *r);

/* Appends history event `event` for r's current version (meta: pairs of
 * field name and typed value encodings, may be empty) and trims to
 * history_max_events. */
struct hmeta {
	const char *name;
	struct fsnp_val v;
};
void frec_history(struct fctx *c, struct frec *r, const char *event,
                  const struct hmeta *meta, size_t nmeta);

/* Writers of the public record. payload: also payload, result and error
 * (each omitted with <kind>_omitted and <kind>_size above max_bytes, 0 =
 * no limit); values (may be NULL): a map written as "values". */
void frec_write_public(struct fsnp_writer *w, const struct frec *r,
                       bool payload, uint64_t max_bytes,
                       const struct fsnp_val *values);

/* Keys. */
void fkey_rec(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
              struct fsnp_bytes id);
void fkey_due_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                     struct fsnp_bytes type);
void fkey_hist_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                      struct fsnp_bytes id);
void fkey_value(struct sbuf *k, uint32_t group, struct fsnp_bytes ref);
void fkey_policy(struct sbuf *k, uint32_t group, struct fsnp_bytes type);
void fkey_signal(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                 struct fsnp_bytes id, struct fsnp_bytes key);

/* The summary floor of (type, state, priority) over the group's auto
 * partitions (K_FLOW_AUTOFLOOR): at or below every due entry of those
 * partitions; state "" (priority 0) is the marker that the type's floors
 * were summed up by a claim (absent: not known yet). */
void fkey_autofloor(struct sbuf *k, uint32_t group, struct fsnp_bytes type,
                    struct fsnp_bytes state, int priority);

/* The active-time index (K_FLOW_ACTIVE): one entry per non-terminal
 * flow with a max_active_ms, keyed by its deadline. */
void fkey_active_prefix(struct sbuf *k, uint32_t group);
/* created_at_ms + max_active_ms of a non-terminal flow that has one, else
 * -1 (also for r == NULL). */
int64_t frec_active_deadline(const struct frec *r);

/* Reads a u32-length-prefixed part of a key at *off; false past the end. */
bool fkey_part(const uint8_t *k, size_t len, size_t *off,
               struct fsnp_bytes *out);

static inline struct fsnp_bytes fb(const char *s)
{
	struct fsnp_bytes b = {(const uint8_t *)s, strlen(s)};
	return b;
}

#endif
