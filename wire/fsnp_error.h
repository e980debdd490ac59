/* FSNP error codes shared by every wire/fsnp_* module.
 *
 * Each code has the message the reference server sends for it (so a server
 * can answer with it verbatim) and a class: a fatal error means the byte
 * stream can no longer be trusted and the connection must close; any other
 * error concerns one request only, which is answered with status 6
 * (bad_request) while the connection stays open. */
#ifndef WIRE_FSNP_ERROR_H
#define WIRE_FSNP_ERROR_H

#include <stdbool.h>

enum fsnp_err {
	FSNP_OK = 0,
	FSNP_ERR_NOMEM,

	/* Frame stream (fatal). */
	FSNP_ERR_BAD_MAGIC,
	FSNP_ERR_BAD_VERSION,
	FSNP_ERR_REQUEST_DIRECTION,  /* a request frame has the response bit */
	FSNP_ERR_RESPONSE_DIRECTION, /* a response frame lacks it */
	FSNP_ERR_FRAME_TOO_LARGE,

	/* One request (status 6). */
	FSNP_ERR_REQUEST_ID_ZERO,
	FSNP_ERR_UNKNOWN_FLAGS,
	FSNP_ERR_TRACE_DISABLED,
	FSNP_ERR_COMPRESSION_OFF,
	FSNP_ERR_UNKNOWN_OPCODE,
	FSNP_ERR_CONTROL_LANE,
	FSNP_ERR_STATUS, /* a response status outside 0..6 */

	/* Typed values. */
	FSNP_ERR_VALUE_EMPTY,
	FSNP_ERR_VALUE_TAG,
	FSNP_ERR_VALUE_BIN_TRUNCATED,
	FSNP_ERR_VALUE_MAP_TRUNCATED,
	FSNP_ERR_VALUE_DEPTH,
	FSNP_ERR_VALUE_CONTAINER_ITEMS,
	FSNP_ERR_VALUE_TOTAL_ITEMS,
	FSNP_ERR_TRAILING_BYTES,
	FSNP_ERR_NOT_FOUND, /* a map has no such key */
	FSNP_ERR_TYPE,      /* a value has another type than asked for */
	FSNP_ERR_WRITER,    /* builder misuse: unbalanced container, no key */
	FSNP_ERR_TOO_LONG,  /* a length or count does not fit in a u32 */

	/* Chunk reassembly. */
	FSNP_ERR_CHUNK_TOO_LARGE,
	FSNP_ERR_CHUNK_STREAMS,
	FSNP_ERR_CHUNK_BYTES,

	/* Compression. */
	FSNP_ERR_INFLATE_TOO_LARGE,
	FSNP_ERR_INFLATE_INVALID,
	FSNP_ERR_DEFLATE,

	/* Compact (custom payload) bodies. */
	FSNP_ERR_COMPACT_UNSUPPORTED,
	FSNP_ERR_COMPACT_ITEMS,
	FSNP_ERR_COMPACT_MSET,
	FSNP_ERR_COMPACT_MGET,
	FSNP_ERR_COMPACT_PIPELINE,
	FSNP_ERR_COMPACT_VALUE_MGET,
	FSNP_ERR_COMPACT_FLOW,
	FSNP_ERR_COMPACT_RESPONSE,

	/* Compact flow query result (tag 0xA0). */
	FSNP_ERR_FQR_TRUNCATED,
	FSNP_ERR_FQR_KIND,
	FSNP_ERR_FQR_CODE,
	FSNP_ERR_FQR_PAGE,
	FSNP_ERR_FQR_BITMAP,
	FSNP_ERR_FQR_COUNT,
	FSNP_ERR_FQR_USAGE,

	FSNP_ERR_COUNT_ /* number of codes, not an error */
};

/* The message for `err` ("ERR native ..."); never NULL. */
const char *fsnp_strerror(int err);

/* True when the connection must close after `err`. */
bool fsnp_err_is_fatal(int err);

#endif /* WIRE_FSNP_ERROR_H */
