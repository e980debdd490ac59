/* Felix tokens on the issuing side: Ed25519 key pairs, their public JWK,
 * and EdDSA-signed JWTs (compact serialization) with the claims a
 * Lodestone broker checks (node/auth/jwt.h, docs/security.md). Used by
 * `lodectl felix keygen` and `lodectl felix token`, and by tests. The
 * private key never leaves the caller: nothing here logs or prints. */
#ifndef LS_CLIENT_FELIX_TOKEN_H
#define LS_CLIENT_FELIX_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

struct felix_token_claims {
	const char *iss; /* NULL: felix-auth */
	const char *aud; /* NULL: felix-broker */
	const char *sub; /* NULL: the tenant */
	const char *tid;
	int64_t iat;
	int64_t exp;
	int64_t nbf; /* 0: none */
	const char *const *perms;
	size_t n_perms;
};

/* A fresh Ed25519 key pair. 0, or -1. */
int felix_token_keygen(EVP_PKEY **out);
/* The private key of a PEM file (PKCS#8). NULL with a message. */
EVP_PKEY *felix_token_load_key(const char *path, char *err, size_t errlen);
/* Writes the private key as PEM to `path`, mode 0600, refusing to
 * overwrite. 0, or -1 with a message. */
int felix_token_save_key(EVP_PKEY *key, const char *path, char *err,
                         size_t errlen);
/* The public JWK of `key` as compact JSON (malloc'd), or NULL. */
char *felix_token_jwk(EVP_PKEY *key, const char *kid);

/* `base64url(header).base64url(claims).base64url(signature)` for the
 * given JSON texts, signed with `key`: malloc'd, or NULL. */
char *felix_token_sign_raw(EVP_PKEY *key, const char *header_json,
                           const char *claims_json);
/* A token with header {"alg":"EdDSA","typ":"JWT","kid":kid} and the
 * claims `c`: malloc'd, or NULL with a message. */
char *felix_token_mint(EVP_PKEY *key, const char *kid,
                       const struct felix_token_claims *c, char *err,
                       size_t errlen);

#endif
