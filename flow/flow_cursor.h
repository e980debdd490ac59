/* FLOW.QUERY cursors: opaque, tamper-proof resume tokens (pure: no clock,
 * no randomness; the caller passes the time, the nonce and the key).
 *
 * A cursor is "fqc1_" followed by the unpadded base64url of
 *
 *     u8  FLOW_CURSOR_VERSION
 *     12  nonce (random per cursor, chosen by the caller)
 *     ... AES-256-GCM ciphertext of the plaintext below
 *     16  GCM tag
 *
 * with associated data "fqc1" + the version byte, and the plaintext
 *
 *     32  query fingerprint (flow_cursor_fingerprint of the query's
 *         canonical shape and bound values: its cursor parameter left out)
 *     u64 issued at (ms)      u64 expires at (ms)
 *     u32 resume key length + the resume key (the last index key a page
 *         returned; flow_index.h)
 *
 * The 32-byte key lives in the meta group (the "flow_cursor_key" setting,
 * created once at bootstrap by a replicated set-if-absent), so a cursor
 * issued by one node resumes on any other.
 *
 * Decoding tells apart (each a distinct fixed code and detail, no value
 * ever echoed): not a cursor at all (malformed), over the size limit,
 * failed authentication (forged or altered), a genuine cursor of another
 * query (mismatch), and one past its expiry. */
#ifndef LS_FLOW_FLOW_CURSOR_H
#define LS_FLOW_FLOW_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

#define FLOW_CURSOR_VERSION 1
#define FLOW_CURSOR_KEY_BYTES 32
#define FLOW_CURSOR_NONCE_BYTES 12
#define FLOW_CURSOR_FP_BYTES 32
/* The token's length bounds (the SDK accepts 16..4096 bytes). */
#define FLOW_CURSOR_MIN_BYTES 16
#define FLOW_CURSOR_MAX_BYTES 4096
/* The longest resume key a cursor carries (keeps a token under the max). */
#define FLOW_CURSOR_RESUME_MAX 2048
#define FLOW_CURSOR_TTL_DEFAULT_MS 300000

enum flow_cursor_status {
	FLOW_CURSOR_OK = 0,
	FLOW_CURSOR_MALFORMED, /* not an fqc1 token */
	FLOW_CURSOR_TOO_LARGE, /* over FLOW_CURSOR_MAX_BYTES */
	FLOW_CURSOR_FORGED,    /* authentication failed */
	FLOW_CURSOR_MISMATCH,  /* issued for another query */
	FLOW_CURSOR_EXPIRED,
};

/* SHA-256 of the query's canonical bytes. */
void flow_cursor_fingerprint(const void *canonical, size_t len,
                             uint8_t out[FLOW_CURSOR_FP_BYTES]);

/* Appends a cursor to `out`. 0, or -1 when the resume key is longer than
 * FLOW_CURSOR_RESUME_MAX or encryption failed. */
int flow_cursor_encode(const uint8_t key[FLOW_CURSOR_KEY_BYTES],
                       const uint8_t nonce[FLOW_CURSOR_NONCE_BYTES],
                       const uint8_t fp[FLOW_CURSOR_FP_BYTES], uint64_t now_ms,
                       uint64_t ttl_ms, const uint8_t *resume,
                       size_t resume_len, struct wbuf *out);

/* Checks `tok` for the query `fp` at `now_ms`; on FLOW_CURSOR_OK the
 * resume key is copied to `resume` (room for FLOW_CURSOR_RESUME_MAX
 * bytes). */
enum flow_cursor_status
flow_cursor_decode(const uint8_t key[FLOW_CURSOR_KEY_BYTES], const char *tok,
                   size_t len, const uint8_t fp[FLOW_CURSOR_FP_BYTES],
                   uint64_t now_ms, uint8_t *resume, size_t *resume_len);

/* A public identifier of a key (16 hex characters of a domain-separated
 * SHA-256 of it, NUL-terminated): lets operators and tests see that nodes
 * share one key without showing it. */
void flow_cursor_key_id(const uint8_t key[FLOW_CURSOR_KEY_BYTES], char out[17]);

/* The FLOW.QUERY error code of a status ("query_cursor_invalid",
 * "query_cursor_too_large", "query_cursor_expired") and a fixed detail
 * naming the reason (distinct per status). */
const char *flow_cursor_code(enum flow_cursor_status st);
const char *flow_cursor_detail(enum flow_cursor_status st);

#endif
