/* Standard base64 with padding; see felix_base64.h. */
#include "wire/felix_base64.h"

static const char alphabet[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t felix_base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

int felix_base64_encode(struct wbuf *out, const uint8_t *p, size_t n)
{
	size_t i;
	uint8_t *o = wbuf_extend(out, felix_base64_encoded_len(n));
	if (o == NULL) {
		return -1;
	}
	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = (uint8_t)alphabet[v >> 18];
		*o++ = (uint8_t)alphabet[(v >> 12) & 63];
		*o++ = (uint8_t)alphabet[(v >> 6) & 63];
		*o++ = (uint8_t)alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		*o++ = (uint8_t)alphabet[v >> 18];
		*o++ = (uint8_t)alphabet[(v >> 12) & 63];
		*o++ = '=';
		*o++ = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		*o++ = (uint8_t)alphabet[v >> 18];
		*o++ = (uint8_t)alphabet[(v >> 12) & 63];
		*o++ = (uint8_t)alphabet[(v >> 6) & 63];
		*o++ = '=';
	}
	return 0;
}

static int sextet(char c)
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
	if (c == '+') {
		return 62;
	}
	if (c == '/') {
		return 63;
	}
	return -1;
}

int felix_base64_decode(const char *s, size_t len, uint8_t *out, size_t *outlen)
{
	size_t i, o = 0;
	if (len % 4 != 0) {
		return -1;
	}
	for (i = 0; i < len; i += 4) {
		int a = sextet(s[i]), b = sextet(s[i + 1]);
		int c, d;
		bool last = i + 4 == len;
		if (a < 0 || b < 0) {
			return -1;
		}
		if (last && s[i + 2] == '=' && s[i + 3] == '=') {
			if (b & 15) {
				return -1; /* non-zero unused bits */
			}
			out[o++] = (uint8_t)(a << 2 | b >> 4);
			break;
		}
		c = sextet(s[i + 2]);
		if (c < 0) {
			return -1;
		}
		if (last && s[i + 3] == '=') {
			if (c & 3) {
				return -1;
			}
			out[o++] = (uint8_t)(a << 2 | b >> 4);
			out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
			break;
		}
		d = sextet(s[i + 3]);
		if (d < 0) {
			return -1;
		}
		out[o++] = (uint8_t)(a << 2 | b >> 4);
		out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
		out[o++] = (uint8_t)((c & 3) << 6 | d);
	}
	*outlen = o;
	return 0;
}
