/* Felix tokens: JWS compact JWTs signed with Ed25519 (`alg: EdDSA`).
 *
 * jwt_parse is pure and bounded: a token of at most JWT_TOKEN_MAX bytes,
 * three base64url parts, a header and a claims object of at most
 * JWT_MEMBERS_MAX members each (duplicate names refused), string claims
 * of at most JWT_STR_MAX bytes, at most AUTH_PERMS_MAX permissions. The
 * header must say `alg: EdDSA` (every other algorithm, `none` and the HMAC
 * family included, is refused before any key is looked at), carry a `kid`,
 * and have no `crit`. Claims: `iss`, `aud` (a string or an array of
 * strings), `sub`, `tid` and `exp` are required; `iat` and `nbf` are
 * optional; `perms` (an array of strings, perm.h) is optional and absent
 * means none.
 *
 * jwt_check_claims checks issuer, audience, tenant and times against what
 * is expected; jwt_verify_signature checks the signature with an Ed25519
 * public key (OpenSSL EVP_DigestVerify). Error messages never contain the
 * token. */
#ifndef LS_NODE_AUTH_JWT_H
#define LS_NODE_AUTH_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "node/auth/perm.h"

#define JWT_TOKEN_MAX 8192
#define JWT_MEMBERS_MAX 64 /* members of the header or the claims */
#define JWT_STR_MAX 255    /* bytes of kid, iss, sub, tid, one aud */
#define JWT_AUD_MAX 16     /* audiences in an array */
#define JWT_SIG_LEN 64     /* Ed25519 */

/* jwt_parse's error codes (the message says more). */
#define JWT_EFORMAT -1 /* not three base64url parts of JSON objects */
#define JWT_EALG -2    /* not EdDSA */
#define JWT_ECLAIM -3  /* a claim missing, mistyped or too large */
#define JWT_ESIZE -4   /* over a bound */

struct jwt {
	char kid[JWT_STR_MAX + 1];
	char iss[JWT_STR_MAX + 1];
	char sub[JWT_STR_MAX + 1];
	char tid[JWT_STR_MAX + 1];
	char *aud[JWT_AUD_MAX]; /* owned */
	size_t n_aud;
	int64_t exp;
	bool has_iat, has_nbf;
	int64_t iat, nbf;
	struct auth_perms perms;
	char *signed_part; /* owned: "header.claims", what was signed */
	size_t signed_len;
	uint8_t sig[JWT_SIG_LEN];
};

struct jwt_expect {
	const char *iss;
	const char *aud;
	const char *tid;
	int64_t now; /* seconds since the epoch */
	int64_t skew_s;
};

/* 0, or a JWT_E* code with a message. `out` needs jwt_free either way. */
int jwt_parse(const char *token, size_t len, struct jwt *out, char *err,
              size_t errlen);
void jwt_free(struct jwt *j);

/* 0, or -1 with a message: wrong issuer, audience or tenant, expired
 * (exp + skew <= now), not yet valid (nbf - skew > now), issued in the
 * future (iat - skew > now). */
int jwt_check_claims(const struct jwt *j, const struct jwt_expect *e, char *err,
                     size_t errlen);

/* 0 when the signature verifies with `key` (an Ed25519 public key), else
 * -1 with a message. */
int jwt_verify_signature(const struct jwt *j, EVP_PKEY *key, char *err,
                         size_t errlen);

#endif
