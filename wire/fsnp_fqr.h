/* FSNP compact flow query result, codec "flow_query_result_v1" (tag 0xA0):
 * the custom-payload form of a successful ferric.flow.query.result/v1 for
 * FLOW.QUERY and COMMAND_EXEC, sent only to connections that negotiated
 * the codec. It follows the u16 status; integers are big-endian.
 *
 *   u8 A0 | u8 kind (0 records, 1 count) | u8 exactness | u8 freshness |
 *   u8 coverage | u8 pagination | 11 x u64 usage
 *   kind 0: u8 has_more | u32 cursor length (FFFFFFFF: nil) | cursor |
 *           u32 records | per record: u32 presence bitmap, then a typed
 *           value for every set bit in ascending bit order
 *   kind 1: u64 count
 *
 * usage.response_bytes is the payload size from the tag to the last byte.
 * The decoder checks everything the contract fixes (codes, bitmap bits
 * 0..19, cursor present exactly when has_more, cursor shape, record count
 * limit, usage consistency, response_bytes, no trailing bytes) and hands
 * out views into the payload, which must outlive them. */
#ifndef WIRE_FSNP_FQR_H
#define WIRE_FSNP_FQR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_value.h"

#define FSNP_FQR_TAG 0xA0u
#define FSNP_FQR_CODEC "flow_query_result_v1"
#define FSNP_FQR_CONTRACT "ferric.flow.query.result/v1"
#define FSNP_FQR_MAX_RECORDS_DEFAULT 100u
#define FSNP_FQR_CURSOR_MIN 16u
#define FSNP_FQR_CURSOR_MAX 4096u
#define FSNP_FQR_CURSOR_PREFIX "fqc1_"
/* residual_checks may be at most this many per scanned entry. */
#define FSNP_FQR_MAX_PREDICATES 12u

enum fsnp_fqr_kind {
	FSNP_FQR_RECORDS = 0,
	FSNP_FQR_COUNT = 1,
};

/* Record fields by presence-bitmap bit. Run rows use bits 0-17, history
 * rows event_id and fields. */
enum fsnp_fqr_field {
	FSNP_FQR_F_ID,
	FSNP_FQR_F_TYPE,
	FSNP_FQR_F_STATE,
	FSNP_FQR_F_VERSION,
	FSNP_FQR_F_PRIORITY,
	FSNP_FQR_F_PARTITION_KEY,
	FSNP_FQR_F_CREATED_AT_MS,
	FSNP_FQR_F_UPDATED_AT_MS,
	FSNP_FQR_F_NEXT_RUN_AT_MS,
	FSNP_FQR_F_LEASE_DEADLINE_MS,
	FSNP_FQR_F_ATTEMPTS,
	FSNP_FQR_F_RUN_STATE,
	FSNP_FQR_F_MAX_ACTIVE_MS,
	FSNP_FQR_F_PARENT_FLOW_ID,
	FSNP_FQR_F_ROOT_FLOW_ID,
	FSNP_FQR_F_CORRELATION_ID,
	FSNP_FQR_F_ATTRIBUTES,
	FSNP_FQR_F_STATE_META,
	FSNP_FQR_F_EVENT_ID,
	FSNP_FQR_F_FIELDS,
	FSNP_FQR_FIELDS /* number of fields */
};

/* The four quality dimensions, in wire order, and their code counts:
 * exactness authoritative|projected_exact|exact|not_applicable; freshness
 * current|projection_watermark|not_applicable; coverage
 * complete|unavailable; pagination none|complete|authenticated_seek|
 * live_seek. */
enum fsnp_fqr_quality {
	FSNP_FQR_EXACTNESS,
	FSNP_FQR_FRESHNESS,
	FSNP_FQR_COVERAGE,
	FSNP_FQR_PAGINATION,
	FSNP_FQR_QUALITIES
};

enum fsnp_fqr_usage {
	FSNP_FQR_RANGE_SEEKS,
	FSNP_FQR_RANGE_PAGES,
	FSNP_FQR_SCANNED_ENTRIES,
	FSNP_FQR_SCANNED_BYTES,
	FSNP_FQR_HYDRATED_RECORDS,
	FSNP_FQR_RESIDUAL_CHECKS,
	FSNP_FQR_DUPLICATE_ENTRIES,
	FSNP_FQR_RESULT_RECORDS,
	FSNP_FQR_RESPONSE_BYTES,
	FSNP_FQR_MEMORY_HIGH_WATER_BYTES,
	FSNP_FQR_WALL_TIME_US,
	FSNP_FQR_USAGES
};

/* Names as in the JSON contract; NULL when out of range. */
const char *fsnp_fqr_field_name(unsigned bit);
const char *fsnp_fqr_quality_field(unsigned quality);
const char *fsnp_fqr_quality_name(unsigned quality, unsigned code);
const char *fsnp_fqr_usage_name(unsigned usage);
/* Reverse lookups: the bit / code, or -1. */
int fsnp_fqr_field_bit(const char *name, size_t len);
int fsnp_fqr_quality_code(unsigned quality, const char *name, size_t len);

/* A result's fixed part; for a decoded one, cursor and records are views. */
struct fsnp_fqr {
	uint8_t kind;
	uint8_t quality[FSNP_FQR_QUALITIES];
	uint64_t usage[FSNP_FQR_USAGES];
	/* FSNP_FQR_RECORDS */
	bool has_more;
	struct fsnp_bytes cursor; /* ptr NULL: nil; present iff has_more */
	uint32_t record_count;
	const uint8_t *records; /* decoded: the validated row stream */
	size_t records_len;
	/* FSNP_FQR_COUNT */
	uint64_t count;
};

struct fsnp_fqr_limits {
	uint32_t max_records;      /* the negotiated collection limit */
	struct fsnp_limits values; /* for the typed values in records */
};

/* Decode payload p[0..len) (tag first). lim NULL: 100 records and the
 * default value limits. Errors: FSNP_ERR_FQR_*, the typed value errors,
 * FSNP_ERR_TRAILING_BYTES. */
int fsnp_fqr_decode(const uint8_t *p, size_t len,
                    const struct fsnp_fqr_limits *lim, struct fsnp_fqr *out);

/* The usage contract: every value at most INT64_MAX; hydrated, duplicate
 * and result records (kind 0) at most scanned_entries; range_pages at most
 * scanned_entries + range_seeks; residual_checks at most 12 per scanned
 * entry; result_records equal to the record count (kind 0) or 1 (kind 1).
 * 0 or FSNP_ERR_FQR_USAGE. response_bytes is not checked here. */
int fsnp_fqr_check_usage(const struct fsnp_fqr *r);

struct fsnp_fqr_record {
	uint32_t bitmap;
	struct fsnp_val field[FSNP_FQR_FIELDS]; /* valid where the bit is set */
};

struct fsnp_fqr_iter {
	const uint8_t *p;
	const uint8_t *end;
	uint32_t left;
};

void fsnp_fqr_iter_init(struct fsnp_fqr_iter *it, const struct fsnp_fqr *r);
bool fsnp_fqr_iter_next(struct fsnp_fqr_iter *it, struct fsnp_fqr_record *rec);

/* Encoder, writing through a typed-value writer so record values use the
 * ordinary builder calls:
 *
 *     fsnp_fqr_w_begin(&fw, &w, &meta);      // fixed part from meta
 *     fsnp_fqr_w_record_begin(&fw);
 *     fsnp_fqr_w_field(&fw, FSNP_FQR_F_ID);  fsnp_w_str(&w, "run-1");
 *     fsnp_fqr_w_record_end(&fw);
 *     rv = fsnp_fqr_w_end(&fw);
 *
 * Fields go in ascending bit order, each followed by exactly one value.
 * meta.usage[FSNP_FQR_RESPONSE_BYTES] is computed; meta.record_count is
 * ignored (records are counted). fsnp_fqr_w_end checks the whole payload
 * as the decoder would (with max_records) and fails rather than emit what
 * a client must reject. */
struct fsnp_fqr_writer {
	struct fsnp_writer *w; /* not owned */
	struct fsnp_fqr meta;
	uint32_t max_records;
	size_t start;    /* offset of the tag */
	size_t count_at; /* offset of the record count */
	size_t bitmap_at;
	uint32_t bitmap;
	uint32_t records;
	int last_bit;
	bool in_record;
	int err;
};

int fsnp_fqr_w_begin(struct fsnp_fqr_writer *fw, struct fsnp_writer *w,
                     const struct fsnp_fqr *meta, uint32_t max_records);
int fsnp_fqr_w_record_begin(struct fsnp_fqr_writer *fw);
int fsnp_fqr_w_field(struct fsnp_fqr_writer *fw, unsigned bit);
int fsnp_fqr_w_record_end(struct fsnp_fqr_writer *fw);
int fsnp_fqr_w_end(struct fsnp_fqr_writer *fw);

#endif /* WIRE_FSNP_FQR_H */
