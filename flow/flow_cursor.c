/* FLOW.QUERY cursor codec (flow_cursor.h). */
#include "flow/flow_cursor.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>

#include "wire/base64url.h"

#define PREFIX "fqc1_"
#define PREFIX_LEN 5
#define TAG_BYTES 16
#define HEAD_BYTES (1 + FLOW_CURSOR_NONCE_BYTES)
#define PLAIN_FIXED (FLOW_CURSOR_FP_BYTES + 8 + 8 + 4)

static const uint8_t aad[5] = {'f', 'q', 'c', '1', FLOW_CURSOR_VERSION};

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

void flow_cursor_fingerprint(const void *canonical, size_t len,
                             uint8_t out[FLOW_CURSOR_FP_BYTES])
{
	SHA256(canonical, len, out);
}

/* AES-256-GCM one shot. enc: ct/tag out; dec: returns -1 when the tag
 * does not authenticate. */
static int gcm(int enc, const uint8_t *key, const uint8_t *nonce,
               const uint8_t *in, size_t n, uint8_t *out, uint8_t *tag)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int l = 0, rv = -1;

	if (x == NULL || n > INT32_MAX) {
		goto err_ctx;
	}
	if (EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) !=
	        1 ||
	    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN,
	                        FLOW_CURSOR_NONCE_BYTES, NULL) != 1 ||
	    EVP_CipherInit_ex(x, NULL, NULL, key, nonce, enc) != 1 ||
	    EVP_CipherUpdate(x, NULL, &l, aad, sizeof aad) != 1 ||
	    EVP_CipherUpdate(x, out, &l, in, (int)n) != 1) {
		goto err_ctx;
	}
	if (!enc &&
	    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, tag) != 1) {
		goto err_ctx;
	}
	if (EVP_CipherFinal_ex(x, out + l, &l) != 1) {
		goto err_ctx; /* decrypting: the tag did not match */
	}
	if (enc &&
	    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, tag) != 1) {
		goto err_ctx;
	}
	rv = 0;
err_ctx:
	EVP_CIPHER_CTX_free(x);
	return rv;
}

int flow_cursor_encode(const uint8_t key[FLOW_CURSOR_KEY_BYTES],
                       const uint8_t nonce[FLOW_CURSOR_NONCE_BYTES],
                       const uint8_t fp[FLOW_CURSOR_FP_BYTES], uint64_t now_ms,
                       uint64_t ttl_ms, const uint8_t *resume,
                       size_t resume_len, struct wbuf *out)
{
	uint8_t
	    raw[HEAD_BYTES + PLAIN_FIXED + FLOW_CURSOR_RESUME_MAX + TAG_BYTES];
	uint8_t plain[PLAIN_FIXED + FLOW_CURSOR_RESUME_MAX];
	size_t n = PLAIN_FIXED + resume_len;
	uint64_t exp = now_ms + ttl_ms < now_ms ? UINT64_MAX : now_ms + ttl_ms;

	if (resume_len > FLOW_CURSOR_RESUME_MAX) {
		return -1;
	}
	memcpy(plain, fp, FLOW_CURSOR_FP_BYTES);
	put64(plain + FLOW_CURSOR_FP_BYTES, now_ms);
	put64(plain + FLOW_CURSOR_FP_BYTES + 8, exp);
	plain[FLOW_CURSOR_FP_BYTES + 16] = (uint8_t)(resume_len >> 24);
	plain[FLOW_CURSOR_FP_BYTES + 17] = (uint8_t)(resume_len >> 16);
	plain[FLOW_CURSOR_FP_BYTES + 18] = (uint8_t)(resume_len >> 8);
	plain[FLOW_CURSOR_FP_BYTES + 19] = (uint8_t)resume_len;
	if (resume_len > 0) {
		memcpy(plain + PLAIN_FIXED, resume, resume_len);
	}
	raw[0] = FLOW_CURSOR_VERSION;
	memcpy(raw + 1, nonce, FLOW_CURSOR_NONCE_BYTES);
	if (gcm(1, key, nonce, plain, n, raw + HEAD_BYTES,
	        raw + HEAD_BYTES + n) != 0) {
		return -1;
	}
	if (wbuf_append(out, PREFIX, PREFIX_LEN) != 0 ||
	    base64url_encode(out, raw, HEAD_BYTES + n + TAG_BYTES) != 0) {
		return -1;
	}
	return 0;
}

enum flow_cursor_status
flow_cursor_decode(const uint8_t key[FLOW_CURSOR_KEY_BYTES], const char *tok,
                   size_t len, const uint8_t fp[FLOW_CURSOR_FP_BYTES],
                   uint64_t now_ms, uint8_t *resume, size_t *resume_len)
{
	uint8_t raw[FLOW_CURSOR_MAX_BYTES];
	uint8_t plain[FLOW_CURSOR_MAX_BYTES];
	size_t rl, n;
	uint32_t klen;

	*resume_len = 0;
	if (len > FLOW_CURSOR_MAX_BYTES) {
		return FLOW_CURSOR_TOO_LARGE;
	}
	if (len < FLOW_CURSOR_MIN_BYTES ||
	    memcmp(tok, PREFIX, PREFIX_LEN) != 0 ||
	    base64url_decoded_max(len - PREFIX_LEN) > sizeof raw ||
	    base64url_decode(tok + PREFIX_LEN, len - PREFIX_LEN, raw, &rl) !=
	        0 ||
	    rl < HEAD_BYTES + PLAIN_FIXED + TAG_BYTES ||
	    raw[0] != FLOW_CURSOR_VERSION) {
		return FLOW_CURSOR_MALFORMED;
	}
	n = rl - HEAD_BYTES - TAG_BYTES;
	if (gcm(0, key, raw + 1, raw + HEAD_BYTES, n, plain,
	        raw + HEAD_BYTES + n) != 0) {
		return FLOW_CURSOR_FORGED;
	}
	/* Authenticated: what follows was written by flow_cursor_encode
	 * with this key, so a bad length is a codec defect, not input. */
	klen = (uint32_t)plain[FLOW_CURSOR_FP_BYTES + 16] << 24 |
	       (uint32_t)plain[FLOW_CURSOR_FP_BYTES + 17] << 16 |
	       (uint32_t)plain[FLOW_CURSOR_FP_BYTES + 18] << 8 |
	       plain[FLOW_CURSOR_FP_BYTES + 19];
	if (klen != n - PLAIN_FIXED || klen > FLOW_CURSOR_RESUME_MAX) {
		return FLOW_CURSOR_MALFORMED;
	}
	if (memcmp(plain, fp, FLOW_CURSOR_FP_BYTES) != 0) {
		return FLOW_CURSOR_MISMATCH;
	}
	if (now_ms >= get64(plain + FLOW_CURSOR_FP_BYTES + 8)) {
		return FLOW_CURSOR_EXPIRED;
	}
	memcpy(resume, plain + PLAIN_FIXED, klen);
	*resume_len = klen;
	return FLOW_CURSOR_OK;
}

void flow_cursor_key_id(const uint8_t key[FLOW_CURSOR_KEY_BYTES], char out[17])
{
	static const char hex[] = "0123456789abcdef";
	static const char domain[] = "lodestone flow cursor key id";
	uint8_t buf[sizeof domain - 1 + FLOW_CURSOR_KEY_BYTES], d[32];

	memcpy(buf, domain, sizeof domain - 1);
	memcpy(buf + sizeof domain - 1, key, FLOW_CURSOR_KEY_BYTES);
	SHA256(buf, sizeof buf, d);
	for (int i = 0; i < 8; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[16] = '\0';
}

const char *flow_cursor_code(enum flow_cursor_status st)
{
	switch (st) {
	case FLOW_CURSOR_OK:
		return "ok";
	case FLOW_CURSOR_TOO_LARGE:
		return "query_cursor_too_large";
	case FLOW_CURSOR_EXPIRED:
		return "query_cursor_expired";
	default:
		return "query_cursor_invalid";
	}
}

const char *flow_cursor_detail(enum flow_cursor_status st)
{
	switch (st) {
	case FLOW_CURSOR_OK:
		return "cursor accepted";
	case FLOW_CURSOR_MALFORMED:
		return "the cursor is not a Flow query cursor";
	case FLOW_CURSOR_TOO_LARGE:
		return "the cursor exceeds 4096 bytes";
	case FLOW_CURSOR_FORGED:
		return "the cursor failed authentication";
	case FLOW_CURSOR_MISMATCH:
		return "the cursor was issued for a different query";
	case FLOW_CURSOR_EXPIRED:
		return "the cursor has expired; run the query again";
	}
	return "the cursor is invalid";
}
