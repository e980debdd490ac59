/* base64url without padding; see base64url.h. */
#include "wire/base64url.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t base64url_encoded_len(size_t n)
{
	return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

size_t base64url_decoded_max(size_t len)
{
	return len / 4 * 3 + (len % 4 == 0 ? 0 : len % 4 - 1);
}

int base64url_encode(struct wbuf *out, const uint8_t *p, size_t n)
{
	char q[4];
	size_t i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		q[0] = alphabet[v >> 18 & 63];
		q[1] = alphabet[v >> 12 & 63];
		q[2] = alphabet[v >> 6 & 63];
		q[3] = alphabet[v & 63];
		if (wbuf_append(out, q, 4) != 0) {
			return -1;
		}
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		q[0] = alphabet[v >> 18 & 63];
		q[1] = alphabet[v >> 12 & 63];
		return wbuf_append(out, q, 2);
	}
	if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		q[0] = alphabet[v >> 18 & 63];
		q[1] = alphabet[v >> 12 & 63];
		q[2] = alphabet[v >> 6 & 63];
		return wbuf_append(out, q, 3);
	}
	return 0;
}

static int value_of(char c)
{
	if (c >= 'A' && c <= 'Z') {
		return c - 'A';
	}
	if (c >= 'a' && c <= 'z') {
		return c - 'a' + 26;
	}
	if (c >= '0' && c <= '9') {
		return c - '0' + 52;
	}
	if (c == '-') {
		return 62;
	}
	if (c == '_') {
		return 63;
	}
	return -1;
}

int base64url_decode(const char *s, size_t len, uint8_t *out, size_t *outlen)
{
	size_t o = 0;
	uint32_t acc = 0;
	unsigned bits = 0;
	if (len % 4 == 1) {
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		int v = value_of(s[i]);
		if (v < 0) {
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc != 0) {
		return -1; /* unused trailing bits must be zero */
	}
	*outlen = o;
	return 0;
}
