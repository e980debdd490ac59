/* FSNP compact bodies (flag 0x02, custom payload): the compact request
 * bodies the official SDK sends without negotiation, and the compact KV
 * response codecs.
 *
 * Requests (the whole body; all integers big-endian):
 *   MSET  0x0105   94 01 u32:n (u32 klen, key, u32 vlen, value)*n
 *   MGET  0x0104   94 02 u32:n (u32 klen, key)*n
 *   PIPELINE 0x000E   94 (01|02 | 0x80 "values only") ... as above
 *   FLOW.VALUE.MGET 0x020C   9D i64:max_bytes (INT64_MIN: none) u32:n
 *                            (u32 len, ref)*n
 *
 *   Flow batches and claims (reference/flow.md section 7), turned into
 *   the opcode's typed body by fsnp_compact_flow_body:
 *     CREATE_MANY 0x020F      90 (auto) / 96 (one partition) / 9E (mixed)
 *     CLAIM_DUE 0x0203        91
 *     COMPLETE_MANY 0x0210,
 *     FAIL_MANY 0x0213        92 / 93 (ok_on_success)
 *     RETRY_MANY 0x0212       97 / 98
 *     CANCEL_MANY 0x0214      99 / 9A
 *     TRANSITION_MANY 0x0211  9B / 9C
 *     FLOW.VALUE.MGET 0x020C  9D
 *
 * Responses (the payload after the u16 status; the frame has flag 0x02):
 *   ok_list_v1  81 u32:count
 *   kv_get_v1   82 (00 | 01 u32:len bytes)
 *   kv_mget_v1  83 u32:n (00 | 01 u32:len bytes)*n
 *   flow_claim_jobs_v1  80 u32:n (u32 len id, u32 len partition
 *               (0xFFFFFFFF: nil), u32 len lease_token, i64 fencing_token
 *               [, u32 len run_state (0xFFFFFFFF: nil)])*n
 *   flow_record_v1      84 u32:entries (u8 field id, [u32 len key when
 *               the id is 0], typed value)*entries: a Flow record, the
 *               ids 1..41 naming the record's well-known keys
 *               (fsnp_compact_flow_field_name), 0 any other key
 *   flow_record_list_v1 85 u32:n (flow_record_v1, tag included)*n
 *
 * Decoders validate everything first and then hand out views into the
 * body, which must outlive them. Encoders append to a caller-owned wbuf. */
#ifndef WIRE_FSNP_COMPACT_H
#define WIRE_FSNP_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_value.h"

#define FSNP_COMPACT_FLOW_CLAIM_JOBS 0x80u
#define FSNP_COMPACT_OK_LIST 0x81u
#define FSNP_COMPACT_KV_GET 0x82u
#define FSNP_COMPACT_KV_MGET 0x83u
#define FSNP_COMPACT_FLOW_RECORD 0x84u
#define FSNP_COMPACT_FLOW_RECORD_LIST 0x85u
#define FSNP_COMPACT_FLOW_FIELDS 41u
#define FSNP_COMPACT_PIPELINE_REQ 0x94u
#define FSNP_COMPACT_VALUE_MGET_REQ 0x9Du

#define FSNP_COMPACT_MODE_SET 1u
#define FSNP_COMPACT_MODE_GET 2u
#define FSNP_COMPACT_MODE_VALUES_ONLY 0x80u

enum fsnp_compact_kind {
	FSNP_COMPACT_MSET,
	FSNP_COMPACT_MGET,
	FSNP_COMPACT_PIPELINE_SET,
	FSNP_COMPACT_PIPELINE_GET,
	FSNP_COMPACT_VALUE_MGET,
};

/* A validated compact request body. */
struct fsnp_compact_req {
	enum fsnp_compact_kind kind;
	bool pairs;           /* items are (key, value) pairs, else keys/refs */
	bool values_only;     /* PIPELINE: mode bit 0x80 */
	bool has_max_bytes;   /* FLOW.VALUE.MGET */
	int64_t max_bytes;    /* when has_max_bytes */
	uint32_t count;       /* items (pairs count as one) */
	const uint8_t *items; /* the item stream, inside the body */
	const uint8_t *end;
};

/* Decode the compact body of a request with opcode `opcode` and flag 0x02.
 * Counts above max_items give FSNP_ERR_COMPACT_ITEMS; a malformed body the
 * command's error (FSNP_ERR_COMPACT_MSET, _MGET, _PIPELINE, _VALUE_MGET);
 * any other opcode, tag or mode FSNP_ERR_COMPACT_UNSUPPORTED. */
int fsnp_compact_req_decode(uint16_t opcode, const uint8_t *body, size_t len,
                            uint32_t max_items, struct fsnp_compact_req *out);

/* Whether `opcode` with compact tag `tag` is a Flow compact request. */
bool fsnp_compact_is_flow(uint16_t opcode, uint8_t tag);

/* Rewrites the compact Flow request `body` of `opcode` as the typed body
 * (a map) the same request has without flag 0x02, appended to `out`.
 * 0, FSNP_ERR_COMPACT_UNSUPPORTED (another opcode or tag),
 * FSNP_ERR_COMPACT_ITEMS (more than max_items items),
 * FSNP_ERR_COMPACT_FLOW (malformed) or FSNP_ERR_NOMEM. */
int fsnp_compact_flow_body(uint16_t opcode, const uint8_t *body, size_t len,
                           uint32_t max_items, struct wbuf *out);

struct fsnp_compact_iter {
	const uint8_t *p;
	const uint8_t *end;
	uint32_t left;
	bool pairs;
};

void fsnp_compact_iter_init(struct fsnp_compact_iter *it,
                            const struct fsnp_compact_req *req);
/* The next key (or ref) and, for pairs, its value (`value` may be NULL).
 * False at the end. */
bool fsnp_compact_iter_next(struct fsnp_compact_iter *it,
                            struct fsnp_bytes *key, struct fsnp_bytes *value);

/* Request encoders (client side). mode is FSNP_COMPACT_MODE_SET (values
 * required) or _GET (values NULL), optionally with _VALUES_ONLY for
 * PIPELINE. 0, FSNP_ERR_TOO_LONG or FSNP_ERR_NOMEM. */
int fsnp_compact_req_encode_kv(struct wbuf *out, uint8_t mode,
                               const struct fsnp_bytes *keys,
                               const struct fsnp_bytes *values, uint32_t n);
int fsnp_compact_req_encode_value_mget(struct wbuf *out, bool has_max_bytes,
                                       int64_t max_bytes,
                                       const struct fsnp_bytes *refs,
                                       uint32_t n);

/* Response codecs. Decoders take the payload after the status and return
 * 0, FSNP_ERR_COMPACT_RESPONSE (wrong tag, truncated, bad presence byte),
 * FSNP_ERR_COMPACT_ITEMS or FSNP_ERR_TRAILING_BYTES. */
int fsnp_compact_ok_list_encode(struct wbuf *out, uint32_t count);
int fsnp_compact_ok_list_decode(const uint8_t *p, size_t len, uint32_t *count);

/* value NULL encodes nil. */
int fsnp_compact_kv_get_encode(struct wbuf *out,
                               const struct fsnp_bytes *value);
int fsnp_compact_kv_get_decode(const uint8_t *p, size_t len, bool *present,
                               struct fsnp_bytes *value);

/* kv_mget_v1: begin with the count, then exactly that many items. */
int fsnp_compact_kv_mget_begin(struct wbuf *out, uint32_t count);
int fsnp_compact_kv_mget_item(struct wbuf *out, const struct fsnp_bytes *value);

struct fsnp_compact_list {
	uint32_t count;
	const uint8_t *p; /* next item */
	const uint8_t *end;
	uint32_t left;
};

int fsnp_compact_kv_mget_decode(const uint8_t *p, size_t len,
                                uint32_t max_items,
                                struct fsnp_compact_list *out);
/* The next item: *present false for nil. False at the end. */
bool fsnp_compact_list_next(struct fsnp_compact_list *l, bool *present,
                            struct fsnp_bytes *value);

/* flow_record_v1 field ids: the key of id 1..FSNP_COMPACT_FLOW_FIELDS
 * (NULL otherwise), and the id of a key (0: none). */
const char *fsnp_compact_flow_field_name(uint8_t id);
uint8_t fsnp_compact_flow_field_id(const uint8_t *key, size_t len);

/* flow_record_v1 of `record` (a typed map; FSNP_ERR_TYPE otherwise) and
 * flow_record_list_v1 of `list` (an array of maps). 0, FSNP_ERR_TYPE,
 * FSNP_ERR_TOO_LONG or FSNP_ERR_NOMEM. */
int fsnp_compact_flow_record_encode(struct wbuf *out,
                                    const struct fsnp_val *record);
int fsnp_compact_flow_record_list_encode(struct wbuf *out,
                                         const struct fsnp_val *list);

/* A validated flow_record_v1: its entries, in order. */
struct fsnp_compact_record {
	uint32_t count;
	const uint8_t *p; /* next entry */
	const uint8_t *end;
	uint32_t left;
};

/* Decodes one flow_record_v1 at the start of p[0..len); *used gets its
 * size (NULL: it must fill p[0..len) exactly, else
 * FSNP_ERR_TRAILING_BYTES). Entries above max_items, or values past
 * the default typed-value limits, give FSNP_ERR_COMPACT_ITEMS; a field
 * id above FSNP_COMPACT_FLOW_FIELDS or a malformed entry
 * FSNP_ERR_COMPACT_RESPONSE. */
int fsnp_compact_flow_record_decode(const uint8_t *p, size_t len,
                                    uint32_t max_items,
                                    struct fsnp_compact_record *out,
                                    size_t *used);
/* The next entry: its key (the field's name for an id) and typed value.
 * False at the end. */
bool fsnp_compact_record_next(struct fsnp_compact_record *r,
                              struct fsnp_bytes *key, struct fsnp_val *value);

/* Decodes a flow_record_list_v1 (every record validated); records are
 * then taken with fsnp_compact_record_list_next. */
int fsnp_compact_flow_record_list_decode(const uint8_t *p, size_t len,
                                         uint32_t max_items,
                                         struct fsnp_compact_list *out);
bool fsnp_compact_record_list_next(struct fsnp_compact_list *l,
                                   struct fsnp_compact_record *rec);

#endif /* WIRE_FSNP_COMPACT_H */
