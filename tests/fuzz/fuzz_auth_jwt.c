/* Fuzz the Felix token parser (node/auth/jwt.c): any input is refused with
 * a code and a message, or parses into bounded claims whose permissions
 * and claim checks run, and signature verification with a fixed key runs
 * on it. An input starting with 'J' is "HEADER\nCLAIMS\nSIGNATURE" in
 * the clear, encoded here into a token, so that the fuzzer reaches the
 * JSON and the claims without having to find base64url first; any other
 * input is a token as it arrives on the wire. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/auth/jwt.h"
#include "wire/base64url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok) {
		abort();
	}
}

/* RFC 8037's example Ed25519 public key. */
static const uint8_t rfc8037_x[32] = {
    0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe,
    0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6,
    0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a};

/* "HEADER\nCLAIMS\nSIGNATURE" -> a token in w. */
static void encode_parts(const uint8_t *p, size_t n, struct wbuf *w)
{
	for (int part = 0; part < 3; part++) {
		const uint8_t *nl = part < 2 ? memchr(p, '\n', n) : NULL;
		size_t len = nl != NULL ? (size_t)(nl - p) : n;
		base64url_encode(w, p, len);
		if (part < 2) {
			wbuf_append(w, ".", 1);
		}
		p += len;
		n -= len;
		if (nl != NULL) {
			p++;
			n--;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jwt j;
	struct wbuf w;
	char err[512];
	err[0] = '\0';
	wbuf_init(&w);
	if (size > 0 && data[0] == 'J') {
		encode_parts(data + 1, size - 1, &w);
		check(!w.oom);
		data = w.data != NULL ? w.data : (const uint8_t *)"";
		size = w.len;
	}
	int rc = jwt_parse((const char *)data, size, &j, err, sizeof err);
	if (rc != 0) {
		check(rc == JWT_EFORMAT || rc == JWT_EALG || rc == JWT_ECLAIM ||
		      rc == JWT_ESIZE);
		check(strlen(err) > 0);
		jwt_free(&j);
		wbuf_free(&w);
		return 0;
	}
	check(size <= JWT_TOKEN_MAX);
	check(j.signed_len < size);
	check(memcmp(j.signed_part, data, j.signed_len) == 0);
	check(strlen(j.kid) > 0 && strlen(j.kid) <= JWT_STR_MAX);
	check(strlen(j.tid) > 0 && strlen(j.tid) <= JWT_STR_MAX);
	check(j.n_aud >= 1 && j.n_aud <= JWT_AUD_MAX);
	check(j.perms.n <= AUTH_PERMS_MAX);
	(void)auth_perms_allow(&j.perms, AUTH_STREAM_PUBLISH, "ns", "s");
	(void)auth_perms_allow(&j.perms, AUTH_NS_MANAGE, "ns", NULL);
	(void)auth_perms_allow_any(&j.perms, AUTH_CACHE_READ);
	struct jwt_expect e = {"felix-auth", "felix-broker", "t1", 1700000000,
	                       60};
	(void)jwt_check_claims(&j, &e, err, sizeof err);
	EVP_PKEY *k =
	    EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, rfc8037_x, 32);
	check(k != NULL);
	(void)jwt_verify_signature(&j, k, err, sizeof err);
	EVP_PKEY_free(k);
	jwt_free(&j);
	wbuf_free(&w);
	return 0;
}
