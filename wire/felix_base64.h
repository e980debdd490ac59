/* Standard base64 (RFC 4648 §4, with padding), as the Felix JSON messages
 * carry byte fields. Decoding is strict: the length must be a multiple of 4,
 * padding only at the end, no whitespace, and unused trailing bits zero, so
 * every byte string has exactly one accepted encoding. */
#ifndef WIRE_FELIX_BASE64_H
#define WIRE_FELIX_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "wire/buf.h"

/* Encoded length of n bytes. */
size_t felix_base64_encoded_len(size_t n);
/* Append the encoding of p[0..n) to out. 0, or -1 when out of memory. */
int felix_base64_encode(struct wbuf *out, const uint8_t *p, size_t n);
/* Decode s[0..len) into out, which must have room for len / 4 * 3 bytes;
 * *outlen receives the decoded length. 0, or -1 when s is not canonical
 * base64. */
int felix_base64_decode(const char *s, size_t len, uint8_t *out,
                        size_t *outlen);

#endif /* WIRE_FELIX_BASE64_H */
