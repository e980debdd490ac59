/* FSNP error messages; see fsnp_error.h. Texts that the reference server
 * sends are kept word for word: clients match on them. */
#include "wire/fsnp_error.h"

#include <stddef.h>

static const char *const messages[FSNP_ERR_COUNT_] = {
    [FSNP_OK] = "OK",
    [FSNP_ERR_NOMEM] = "ERR native out of memory",
    [FSNP_ERR_BAD_MAGIC] = "ERR native invalid frame magic",
    [FSNP_ERR_BAD_VERSION] = "ERR native unsupported protocol version",
    [FSNP_ERR_REQUEST_DIRECTION] =
        "ERR native client frame cannot use response direction",
    [FSNP_ERR_RESPONSE_DIRECTION] =
        "ERR native server frame must use response direction",
    [FSNP_ERR_FRAME_TOO_LARGE] = "ERR native frame exceeds max_frame_bytes",
    [FSNP_ERR_REQUEST_ID_ZERO] =
        "ERR native request_id 0 is reserved for server events",
    [FSNP_ERR_UNKNOWN_FLAGS] = "ERR native request uses unsupported flags",
    [FSNP_ERR_TRACE_DISABLED] = "ERR native trace flag is disabled",
    [FSNP_ERR_COMPRESSION_OFF] = "ERR native compressed frames are not "
                                 "supported before compression negotiation",
    [FSNP_ERR_UNKNOWN_OPCODE] = "ERR native unsupported opcode",
    [FSNP_ERR_CONTROL_LANE] =
        "ERR native data commands cannot use control lane 0",
    [FSNP_ERR_STATUS] = "ERR native response status is missing or unknown",
    [FSNP_ERR_VALUE_EMPTY] = "ERR native value is empty",
    [FSNP_ERR_VALUE_TAG] = "ERR native value has unknown or truncated tag",
    [FSNP_ERR_VALUE_BIN_TRUNCATED] = "ERR native binary value is truncated",
    [FSNP_ERR_VALUE_MAP_TRUNCATED] = "ERR native map value is truncated",
    [FSNP_ERR_VALUE_DEPTH] = "ERR native value nesting exceeds max depth",
    [FSNP_ERR_VALUE_CONTAINER_ITEMS] =
        "ERR native value container exceeds max items",
    [FSNP_ERR_VALUE_TOTAL_ITEMS] = "ERR native value exceeds max total items",
    [FSNP_ERR_TRAILING_BYTES] = "ERR native frame body has trailing bytes",
    [FSNP_ERR_NOT_FOUND] = "ERR native field is missing",
    [FSNP_ERR_TYPE] = "ERR native field has the wrong type",
    [FSNP_ERR_WRITER] = "ERR native value builder misuse",
    [FSNP_ERR_TOO_LONG] = "ERR native value does not fit a u32 length",
    [FSNP_ERR_CHUNK_TOO_LARGE] =
        "ERR native chunked request exceeds max_frame_bytes",
    [FSNP_ERR_CHUNK_STREAMS] = "ERR native pending chunk stream limit exceeded",
    [FSNP_ERR_CHUNK_BYTES] = "ERR native pending chunk bytes limit exceeded",
    [FSNP_ERR_INFLATE_TOO_LARGE] =
        "ERR native decompressed frame exceeds max_frame_bytes",
    [FSNP_ERR_INFLATE_INVALID] = "ERR native compressed frame body is invalid",
    [FSNP_ERR_DEFLATE] = "ERR native compression failed",
    [FSNP_ERR_COMPACT_UNSUPPORTED] =
        "ERR native custom request payload is unsupported",
    [FSNP_ERR_COMPACT_ITEMS] =
        "ERR native compact collection exceeds max items",
    [FSNP_ERR_COMPACT_MSET] = "ERR native compact MSET payload is invalid",
    [FSNP_ERR_COMPACT_MGET] = "ERR native compact MGET payload is invalid",
    [FSNP_ERR_COMPACT_PIPELINE] =
        "ERR native compact PIPELINE payload is invalid",
    [FSNP_ERR_COMPACT_VALUE_MGET] =
        "ERR native compact FLOW.VALUE.MGET payload is invalid",
    [FSNP_ERR_COMPACT_FLOW] = "ERR native compact Flow payload is invalid",
    [FSNP_ERR_COMPACT_RESPONSE] =
        "ERR native compact response payload is malformed",
    [FSNP_ERR_FQR_TRUNCATED] = "ERR native compact flow query result is "
                               "truncated",
    [FSNP_ERR_FQR_KIND] = "ERR native compact flow query result has an "
                          "unknown kind",
    [FSNP_ERR_FQR_CODE] = "ERR native compact flow query result has an "
                          "unknown quality code",
    [FSNP_ERR_FQR_PAGE] = "ERR native compact flow query result has "
                          "inconsistent page metadata",
    [FSNP_ERR_FQR_BITMAP] = "ERR native compact flow query result record "
                            "uses an unknown field bit",
    [FSNP_ERR_FQR_COUNT] = "ERR native compact flow query result has too "
                           "many records",
    [FSNP_ERR_FQR_USAGE] = "ERR native compact flow query result has "
                           "inconsistent usage",
};

const char *fsnp_strerror(int err)
{
	if (err < 0 || err >= FSNP_ERR_COUNT_ || messages[err] == NULL) {
		return "ERR native unknown error";
	}
	return messages[err];
}

bool fsnp_err_is_fatal(int err)
{
	switch (err) {
	case FSNP_ERR_BAD_MAGIC:
	case FSNP_ERR_BAD_VERSION:
	case FSNP_ERR_REQUEST_DIRECTION:
	case FSNP_ERR_RESPONSE_DIRECTION:
	case FSNP_ERR_FRAME_TOO_LARGE:
		return true;
	default:
		return false;
	}
}
