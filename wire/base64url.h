/* base64url without padding (RFC 4648 §5, as JWS compact serialization
 * uses it). Decoding is strict: only the url-safe alphabet, no padding, no
 * whitespace, a length that is not 1 mod 4, and unused trailing bits zero,
 * so every byte string has exactly one accepted encoding. */
#ifndef WIRE_BASE64URL_H
#define WIRE_BASE64URL_H

#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

/* Encoded length of n bytes (no padding). */
size_t base64url_encoded_len(size_t n);
/* Largest decoded length of len encoded characters. */
size_t base64url_decoded_max(size_t len);
/* Appends the encoding of p[0..n) to out. 0, or -1 when out of memory. */
int base64url_encode(struct wbuf *out, const uint8_t *p, size_t n);
/* Decodes s[0..len) into out, which must have room for
 * base64url_decoded_max(len) bytes; *outlen receives the decoded length.
 * 0, or -1 when s is not canonical unpadded base64url. */
int base64url_decode(const char *s, size_t len, uint8_t *out, size_t *outlen);

#endif /* WIRE_BASE64URL_H */
