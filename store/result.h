/* Binary encoding of command results (format version 1).
 *
 *     u8 version (= STORE_RESULT_VERSION)
 *     u8 status  (enum store_status)
 *     one typed value
 *
 * Typed values use the tags of FSNP typed values, so a KV result is the
 * FSNP reply value byte for byte:
 *     0 nil, 1 true, 2 false, 3 i64 (8 bytes BE), 4 bytes (u32 len +
 *     bytes), 5 array (u32 count + values), 6 map (u32 count + count x
 *     (u32 key len + key bytes + value)), 7 f64 (8 bytes BE IEEE),
 *     8 u64 (8 bytes BE).
 *
 * Error results carry a message (bytes) unless said otherwise:
 *   TOO_OLD, IN_FUTURE, RESNAPSHOT: [requested u64, available u64]
 *   SEQ_GAP: u64 expected sequence
 * KV error messages are the FSNP texts ("WRONGTYPE ...", "DISTLOCK ...").
 *
 * An entry applied twice (replay) yields empty results (len 0).
 */
#ifndef LS_STORE_RESULT_H
#define LS_STORE_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"

#define STORE_RESULT_VERSION 1

enum store_status {
	STORE_OK = 0,
	STORE_ERR = 1,              /* generic error, message */
	STORE_WRONGTYPE = 2,        /* KV type mismatch, message */
	STORE_BAD_COMMAND = 3,      /* undecodable or invalid command */
	STORE_NOT_FOUND = 4,        /* unknown scope, message */
	STORE_TOO_OLD = 5,          /* [requested, oldest retained] */
	STORE_IN_FUTURE = 6,        /* [requested, tail] */
	STORE_SEQ_GAP = 7,          /* u64 expected sequence */
	STORE_SEQ_EXPIRED = 8,      /* message */
	STORE_UNKNOWN_PRODUCER = 9, /* message */
	STORE_EXISTS = 10,          /* message */
	STORE_RESNAPSHOT = 11,      /* [requested, compacted_below] */
};

enum store_tag {
	STORE_T_NIL = 0,
	STORE_T_TRUE = 1,
	STORE_T_FALSE = 2,
	STORE_T_I64 = 3,
	STORE_T_BYTES = 4,
	STORE_T_ARRAY = 5,
	STORE_T_MAP = 6,
	STORE_T_F64 = 7,
	STORE_T_U64 = 8,
};

/* Nesting limit of a result value. */
#define STORE_RESULT_MAX_DEPTH 16

/* --- Reading ------------------------------------------------------------ */

struct store_value {
	uint8_t tag;
	int64_t i;        /* I64 */
	uint64_t u;       /* U64 */
	double f;         /* F64 */
	const uint8_t *p; /* BYTES, map key (borrowed) */
	size_t len;
	uint32_t n; /* ARRAY items, MAP entries */
};

struct store_result {
	uint8_t status;
	const uint8_t *p; /* borrowed */
	size_t len;
	size_t off;
};

/* Validates a whole result. Returns 0, or -1 when it is malformed. */
int store_result_open(const uint8_t *buf, size_t len, struct store_result *r);

/* Reads the next value in document order: an ARRAY or MAP header is
 * followed by its items (for a MAP, each entry is a key read with
 * store_result_next_key() and then a value). Returns false at the end. */
bool store_result_next(struct store_result *r, struct store_value *v);
bool store_result_next_key(struct store_result *r, struct store_value *v);

/* Skips the value `v` (just read) and everything nested in it. */
void store_result_skip(struct store_result *r, const struct store_value *v);

/* --- Writing (store/ internal, also used by tests) ----------------------- */

void res_begin(struct sbuf *b, uint8_t status);
void res_nil(struct sbuf *b);
void res_bool(struct sbuf *b, bool v);
void res_i64(struct sbuf *b, int64_t v);
void res_u64(struct sbuf *b, uint64_t v);
void res_f64(struct sbuf *b, double v);
void res_bytes(struct sbuf *b, const void *p, size_t n);
void res_str(struct sbuf *b, const char *s);
void res_array(struct sbuf *b, uint32_t n);
void res_map(struct sbuf *b, uint32_t n);
void res_map_key(struct sbuf *b, const void *p, size_t n);
/* An array whose count is known at the end: res_array_open() returns a
 * mark that res_array_close() patches. */
size_t res_array_open(struct sbuf *b);
void res_array_close(struct sbuf *b, size_t mark, uint32_t n);
size_t res_map_open(struct sbuf *b);
/* An error result with a message. */
void res_error(struct sbuf *b, uint8_t status, const char *msg);
/* An error result [requested, available]. */
void res_error_pair(struct sbuf *b, uint8_t status, uint64_t requested,
                    uint64_t available);

#endif
