/* FSNP typed values: the nine-tag binary encoding of request and response
 * bodies, a decoder that validates and then hands out views, and a builder.
 *
 * Encoding (all integers big-endian): a tag byte, then
 *   0 nil, 1 true, 2 false              nothing
 *   3 i64, 7 f64 (IEEE), 8 u64          8 bytes
 *   4 binary                            u32 length + bytes
 *   5 array                             u32 count + values
 *   6 map                               u32 count + (u32 key length + key
 *                                       bytes + value) per entry
 * Map keys are raw bytes without a tag. u64 is used only above INT64_MAX.
 *
 * Ownership: a decoded `struct fsnp_val` is a view. Every pointer in it, and
 * in what iterators and lookups derive from it, points into the decoded
 * input, which must stay alive and unchanged while the views are used.
 * Nothing here allocates except the builder's `struct wbuf`, which belongs
 * to the caller. */
#ifndef WIRE_FSNP_VALUE_H
#define WIRE_FSNP_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"
#include "wire/fsnp_error.h"

/* Response status codes (the u16 that starts a response body). */
enum fsnp_status {
	FSNP_STATUS_OK = 0,
	FSNP_STATUS_ERROR = 1,
	FSNP_STATUS_AUTH = 2,
	FSNP_STATUS_NOPERM = 3,
	FSNP_STATUS_BUSY = 4,
	FSNP_STATUS_REROUTE = 5,
	FSNP_STATUS_BAD_REQUEST = 6,
};

/* "ok", "error", "auth", "noperm", "busy", "reroute", "bad_request"; NULL
 * for anything else. */
const char *fsnp_status_name(unsigned status);

enum fsnp_tag {
	FSNP_NIL = 0,
	FSNP_TRUE = 1,
	FSNP_FALSE = 2,
	FSNP_I64 = 3,
	FSNP_BIN = 4,
	FSNP_ARRAY = 5,
	FSNP_MAP = 6,
	FSNP_F64 = 7,
	FSNP_U64 = 8,
};

/* A byte range inside someone else's memory. */
struct fsnp_bytes {
	const uint8_t *ptr;
	size_t len;
};

/* Decode limits. max_items bounds every container's count and the sum of
 * all container counts in one value; max_depth bounds nesting (a container
 * at depth max_depth is refused, the outermost one being at depth 0). */
struct fsnp_limits {
	uint32_t max_items;
	uint32_t max_depth;
};

#define FSNP_MAX_ITEMS_DEFAULT 100000u
#define FSNP_MAX_DEPTH_DEFAULT 64u
/* Deeper limits are clamped to this to bound the decoder's recursion. */
#define FSNP_MAX_DEPTH_HARD 512u

/* A decoded value: a view into the input (see the header comment). */
struct fsnp_val {
	enum fsnp_tag tag;
	const uint8_t *enc; /* the whole encoding, tag byte first */
	size_t enc_len;
	union {
		int64_t i;             /* FSNP_I64 */
		uint64_t u;            /* FSNP_U64 */
		double f;              /* FSNP_F64 */
		struct fsnp_bytes bin; /* FSNP_BIN */
		uint32_t count; /* FSNP_ARRAY elements, FSNP_MAP entries */
	} as;
};

/* Validate the single value at the start of p[0..len) against `lim` (NULL:
 * the defaults) and describe it in `out`. *used (may be NULL) gets its
 * encoded size; bytes after it are not looked at. */
int fsnp_value_decode(const uint8_t *p, size_t len,
                      const struct fsnp_limits *lim, struct fsnp_val *out,
                      size_t *used);

/* Decode a request body: exactly one value, nothing after it. An empty body
 * is an empty map (whose `enc` then points to static storage). */
int fsnp_value_decode_body(const uint8_t *p, size_t len,
                           const struct fsnp_limits *lim, struct fsnp_val *out);

/* Decode an ordinary (not custom-payload) response body: u16 status 0..6,
 * then exactly one value. */
int fsnp_value_decode_response(const uint8_t *p, size_t len,
                               const struct fsnp_limits *lim, uint16_t *status,
                               struct fsnp_val *out);

/* Iteration over an array's elements or a map's entries, in wire order. */
struct fsnp_iter {
	const uint8_t *p;
	const uint8_t *end;
	uint32_t left;
	bool map;
};

/* Start iterating `v`; anything but an array or map yields nothing. */
void fsnp_iter_init(struct fsnp_iter *it, const struct fsnp_val *v);
/* The next element (arrays: `key` gets {NULL, 0}) or entry. `key` may be
 * NULL. False at the end. */
bool fsnp_iter_next(struct fsnp_iter *it, struct fsnp_bytes *key,
                    struct fsnp_val *val);

/* Typed views. Each returns 0, or FSNP_ERR_TYPE when the value has another
 * type (integers are accepted from either integer tag when they fit). */
bool fsnp_val_is_nil(const struct fsnp_val *v);
int fsnp_val_bool(const struct fsnp_val *v, bool *out);
int fsnp_val_i64(const struct fsnp_val *v, int64_t *out);
int fsnp_val_u64(const struct fsnp_val *v, uint64_t *out);
int fsnp_val_f64(const struct fsnp_val *v, double *out); /* any number */
int fsnp_val_bin(const struct fsnp_val *v, struct fsnp_bytes *out);

/* Map lookup by key (NUL-terminated, or with a length). When a key occurs
 * more than once the last entry wins, as in the reference server. Returns
 * 0, FSNP_ERR_NOT_FOUND, or FSNP_ERR_TYPE when `map` is not a map. */
int fsnp_map_get(const struct fsnp_val *map, const char *key,
                 struct fsnp_val *out);
int fsnp_map_get_n(const struct fsnp_val *map, const void *key, size_t len,
                   struct fsnp_val *out);
/* Lookup and typed view in one step: 0, FSNP_ERR_NOT_FOUND or
 * FSNP_ERR_TYPE. fsnp_map_array / fsnp_map_map check the container type. */
int fsnp_map_bool(const struct fsnp_val *map, const char *key, bool *out);
int fsnp_map_i64(const struct fsnp_val *map, const char *key, int64_t *out);
int fsnp_map_u64(const struct fsnp_val *map, const char *key, uint64_t *out);
int fsnp_map_f64(const struct fsnp_val *map, const char *key, double *out);
int fsnp_map_bin(const struct fsnp_val *map, const char *key,
                 struct fsnp_bytes *out);
int fsnp_map_array(const struct fsnp_val *map, const char *key,
                   struct fsnp_val *out);
int fsnp_map_map(const struct fsnp_val *map, const char *key,
                 struct fsnp_val *out);

/* True when `b` holds exactly the bytes of the C string `s`. */
bool fsnp_bytes_eq(struct fsnp_bytes b, const char *s);

/* Builder. Appends encoded values to a caller-owned wbuf; counts of arrays
 * and maps are filled in by the matching _end call. Inside a map every value
 * must be preceded by fsnp_w_key*. Errors are sticky: after the first one
 * every call is a no-op, and fsnp_w_finish reports it, so a body is written
 * without checking each call:
 *
 *     fsnp_w_init(&w, &buf);
 *     fsnp_w_status(&w, FSNP_STATUS_OK);
 *     fsnp_w_map_begin(&w);
 *     fsnp_w_key(&w, "key"); fsnp_w_str(&w, "k");
 *     fsnp_w_key(&w, "ttl"); fsnp_w_i64(&w, 1000);
 *     fsnp_w_map_end(&w);
 *     rv = fsnp_w_finish(&w);
 */
#define FSNP_WRITER_MAX_DEPTH 64u

struct fsnp_writer {
	struct wbuf *buf; /* not owned */
	int err;          /* first error, sticky */
	unsigned depth;
	struct {
		size_t count_at; /* offset of the u32 count */
		uint32_t count;
		bool map;
		bool keyed; /* a map's key is written, its value is due */
	} open[FSNP_WRITER_MAX_DEPTH];
};

void fsnp_w_init(struct fsnp_writer *w, struct wbuf *buf);
/* A raw u16 status, the start of a response body (outside any container). */
void fsnp_w_status(struct fsnp_writer *w, uint16_t status);
void fsnp_w_nil(struct fsnp_writer *w);
void fsnp_w_bool(struct fsnp_writer *w, bool v);
void fsnp_w_i64(struct fsnp_writer *w, int64_t v);
/* Tag 3 when v fits in an i64, else tag 8. */
void fsnp_w_u64(struct fsnp_writer *w, uint64_t v);
void fsnp_w_f64(struct fsnp_writer *w, double v);
void fsnp_w_bin(struct fsnp_writer *w, const void *p, size_t len);
void fsnp_w_str(struct fsnp_writer *w, const char *s);
void fsnp_w_array_begin(struct fsnp_writer *w);
void fsnp_w_array_end(struct fsnp_writer *w);
void fsnp_w_map_begin(struct fsnp_writer *w);
void fsnp_w_map_end(struct fsnp_writer *w);
void fsnp_w_key(struct fsnp_writer *w, const char *key);
void fsnp_w_key_bin(struct fsnp_writer *w, const void *key, size_t len);
/* Copy a decoded value (its encoding) as one value. */
void fsnp_w_val(struct fsnp_writer *w, const struct fsnp_val *v);
/* 0, or the first error (FSNP_ERR_WRITER when a container is still open or
 * a map key has no value, FSNP_ERR_NOMEM when the buffer could not grow). */
int fsnp_w_finish(struct fsnp_writer *w);

#endif /* WIRE_FSNP_VALUE_H */
