/* Secondary indexes and exact counters of Flow records (docs/storage.md
 * "Flow query indexes"), and the bounded read API the query layer calls.
 *
 * Every record save (frec_save) and record deletion (retention cleanup)
 * calls flow_index_update in the same apply batch as the record, so an
 * index entry never exists without its record and the counters are exact
 * at every applied index. They live in the group's key range (K_FLOW_IX,
 * K_FLOW_COUNT, K_FLOW_ACOUNT), so snapshots and state transfer carry them.
 *
 * Index entries (K_FLOW_IX): `part, u8 kind`, the kind's equality
 * components (each u32 len + bytes), then `u64 order` and `id`; the value
 * is the record's u64 version (a covering check that the entry matches the
 * record it names); a flow that is its own root has no root entry
 * (flow_ix_self_root). The due index (K_FLOW_DUE, flow_record.c) is reused
 * for next_run_at / lease deadline order: its prefix `part, type, state, u8
 * 255 - priority` is followed by the same `u64, id` tail (value empty).
 * Counters (K_FLOW_COUNT): one row per (type, part) with its states'
 * counts (flow_count_row_next). */
#ifndef LS_FLOW_FLOW_INDEX_H
#define LS_FLOW_FLOW_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flow/flow_body.h"
#include "flow/flow_record.h"
#include "store/buf.h"
#include "wire/fsnp_value.h"

struct tx;

enum flow_ix_kind {
	FLOW_IX_UPDATED = 1,      /* type, state; updated_at_ms */
	FLOW_IX_CREATED = 2,      /* type, state; created_at_ms */
	FLOW_IX_ATTR = 3,         /* name, value; updated_at_ms */
	FLOW_IX_META = 4,         /* state, key, value; updated_at_ms */
	FLOW_IX_PARENT = 5,       /* parent_flow_id; updated_at_ms */
	FLOW_IX_ROOT = 6,         /* root_flow_id; updated_at_ms */
	FLOW_IX_CORRELATION = 7,  /* correlation_id; updated_at_ms */
	FLOW_IX_PART_UPDATED = 8, /* (none); updated_at_ms */
};

/* Keeps indexes and counters of one record in step: `old` is the stored
 * record (NULL for a new one), `r` the new one (NULL when it is deleted).
 * Writes into the command's transaction. */
void flow_index_update(struct fctx *c, const struct frec *old,
                       const struct frec *r);

/* Every index and counter key of a record, each appended to `ix` or `cnt`
 * as u32 len + key (the brute-force recomputation of tests and the
 * maintenance above use the same rule). */
void flow_index_keys(uint32_t group, const struct frec *r, struct sbuf *ix,
                     struct sbuf *cnt);

/* Whether `r` is its own root (root_flow_id = id). Such a flow has no
 * FLOW_IX_ROOT entry: a scan of root X's range adds X's record itself
 * (fql_exec.c), in the entry's key form. */
bool flow_ix_self_root(const struct frec *r);

/* The key form of a scalar attribute or state_meta value: a tag byte (the
 * FSNP tag) and an order-preserving body. -1 when the value is not a
 * scalar that can be indexed (maps, nested lists). */
int flow_ix_value_key(const struct fsnp_val *v, struct sbuf *out);

/* An index prefix: `group, K_FLOW_IX, part, kind`, then each of `eq`
 * (u32 len + bytes). For FLOW_IX_ATTR and FLOW_IX_META the value is given
 * in its flow_ix_value_key form. */
void flow_ix_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                    enum flow_ix_kind kind, const struct fsnp_bytes *eq,
                    size_t neq);
/* The due index prefix of (part, type, state, priority). */
void flow_ix_due_prefix(struct sbuf *k, uint32_t group, struct fsnp_bytes part,
                        struct fsnp_bytes type, struct fsnp_bytes state,
                        int priority);

/* The largest page a scan returns (a larger request is clamped). */
#define FLOW_IX_PAGE_MAX 4096

/* Resource usage of scans, counted as they happen. */
struct flow_ix_usage {
	uint64_t seeks;   /* iterator positionings */
	uint64_t pages;   /* scan calls that read at least one entry */
	uint64_t entries; /* index entries read (returned or not) */
	uint64_t bytes;   /* key + value bytes of those entries */
};

/* One range: the entries under `prefix` whose u64 order lies in
 * [lo, hi], ascending or descending (ties by id, in the same direction).
 * `resume` (len 0: none) is the last key a previous page returned; the
 * scan continues strictly after it. */
struct flow_ix_range {
	const uint8_t *prefix;
	size_t prefix_len;
	uint64_t lo, hi;
	bool desc;
	const uint8_t *resume;
	size_t resume_len;
	size_t page;      /* at most this many hits (1..FLOW_IX_PAGE_MAX) */
	size_t max_bytes; /* stop after this many key+value bytes (0: none) */
};

struct flow_ix_hit {
	struct fsnp_bytes id; /* view into the page's storage */
	uint64_t order;
	uint64_t version;      /* covering field; UINT64_MAX when not carried */
	struct fsnp_bytes key; /* the whole index key (a resume key) */
};

struct flow_ix_page {
	struct flow_ix_hit *hits;
	size_t n;
	bool more;         /* entries remain in the range after the last hit */
	struct sbuf store; /* what hits point into */
};

void flow_ix_page_init(struct flow_ix_page *p);
void flow_ix_page_free(struct flow_ix_page *p);

/* Reads one page of a range into `out` (reset first). 0, or -1 when the
 * store failed or an entry under the prefix is malformed (inconsistent
 * storage: the message in *msg). */
int flow_ix_scan(struct tx *tx, const struct flow_ix_range *r,
                 struct flow_ix_page *out, struct flow_ix_usage *u,
                 const char **msg);

/* The state counts of a K_FLOW_COUNT row, one (type, part) (value:
 * n x (u32 len + state, u64 flows), states in key order, none at 0):
 * the next at *off, false at the end or on a malformed value. */
bool flow_count_row_next(const uint8_t *p, size_t len, size_t *off,
                         struct fsnp_bytes *state, uint64_t *n);

/* Exact counters. Flows of (type, part, state): */
int flow_count_get(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                   struct fsnp_bytes part, struct fsnp_bytes state,
                   uint64_t *n);
/* Flows of (type, part, state) with attribute `name` (value NULL), or
 * with `name` equal to / containing the value (flow_ix_value_key form). */
int flow_acount_get(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                    struct fsnp_bytes part, struct fsnp_bytes state,
                    struct fsnp_bytes name, const struct fsnp_bytes *value,
                    uint64_t *n);

/* Visits counters under a prefix of (type[, part]): each (part, state)
 * with flows and its count. Returns 1 from the callback to stop. */
typedef int (*flow_count_fn)(void *arg, struct fsnp_bytes part,
                             struct fsnp_bytes state, uint64_t n);
int flow_count_each(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                    const struct fsnp_bytes *part, flow_count_fn fn, void *arg,
                    struct flow_ix_usage *u);

/* Visits the value counters of attribute `name` in (type, part, state):
 * each value key and its count. */
typedef int (*flow_value_fn)(void *arg, struct fsnp_bytes value, uint64_t n);
int flow_acount_values(struct tx *tx, uint32_t group, struct fsnp_bytes type,
                       struct fsnp_bytes part, struct fsnp_bytes state,
                       struct fsnp_bytes name, flow_value_fn fn, void *arg,
                       struct flow_ix_usage *u);

/* Checks a policy's indexed_attributes list: at most 3 names, each a
 * non-empty text. 0, or -1 with `err`. Every attribute is indexed
 * physically; the list selects what FLOW.ATTRIBUTES and
 * FLOW.ATTRIBUTE_VALUES report and what the query layer may plan on, so
 * changing it needs no backfill. */
int flow_index_check_names(const struct fsnp_val *list, struct flow_err *err);

/* The query shapes (reference names) the indexes serve, each through at
 * least one catalog entry below: what the capability manifest lists. */
const char *const *flow_index_shapes(size_t *n);

/* The index catalog for the capability manifest: {catalog_version,
 * indexes: [{id, kind, fields, order, source, phase, queryable, shapes}]}.
 * Every index is maintained in the apply batch of its record, so each is
 * active and queryable from the first entry of a group (the format version
 * covers older data). */
void flow_index_catalog_write(struct fsnp_writer *w);

/* FLOW.QUERY.INDEXES [id]: the `ferric.flow.query.indexes/v1` status map
 * (contract_version, observed_at_ms, statistics_max_age_ms, registry,
 * services, indexes sorted by id) of the indexes whose fields the contract
 * can name (the attribute and state_meta indexes, keyed by any name, are
 * in the catalog only), on `shards` data groups at `now_ms`. With `id`
 * (len > 0) only that index; -1 and nothing written when there is none. */
int flow_index_status_v1(struct fsnp_writer *w, uint64_t now_ms,
                         uint32_t shards, const uint8_t *id, size_t id_len);

/* The typed value of a flow_ix_value_key encoding, written to `w`.
 * -1 when malformed. */
int flow_ix_value_write(struct fsnp_writer *w, struct fsnp_bytes key);

#endif
