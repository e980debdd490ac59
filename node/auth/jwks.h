/* One tenant's token verification keys: a standard JWKS document,
 * `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"..."}]}`.
 *
 * Only Ed25519 public keys are taken (`kty` OKP, `crv` Ed25519, a 32-byte
 * `x`, a `kid`; `alg`, when present, EdDSA; `use`, when present, sig). A
 * key that carries private material (`d`) or any other kind of key makes
 * the whole document an error, as do duplicate kids: a key set is
 * either understood entirely or refused. At most JWKS_KEYS_MAX keys
 * (several per tenant while keys are rotated). */
#ifndef LS_NODE_AUTH_JWKS_H
#define LS_NODE_AUTH_JWKS_H

#include <stddef.h>

#include <openssl/evp.h>

#define JWKS_KEYS_MAX 32
#define JWKS_DOC_MAX (256 * 1024)

struct jwks_key {
	char *kid;      /* owned */
	EVP_PKEY *pkey; /* owned */
};

struct jwks {
	struct jwks_key *keys; /* owned */
	size_t n;
};

/* 0, or -1 with a message. */
int jwks_parse(const char *doc, size_t len, struct jwks *out, char *err,
               size_t errlen);
void jwks_free(struct jwks *k);

/* The key named `kid`, or NULL. */
EVP_PKEY *jwks_find(const struct jwks *k, const char *kid);

#endif
