/* JWKS documents of Ed25519 public keys; see jwks.h. */
#include "node/auth/jwks.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/base64url.h"

void jwks_free(struct jwks *k)
{
	for (size_t i = 0; i < k->n; i++) {
		free(k->keys[i].kid);
		EVP_PKEY_free(k->keys[i].pkey);
	}
	free(k->keys);
	k->keys = NULL;
	k->n = 0;
}

EVP_PKEY *jwks_find(const struct jwks *k, const char *kid)
{
	for (size_t i = 0; i < k->n; i++) {
		if (strcmp(k->keys[i].kid, kid) == 0) {
			return k->keys[i].pkey;
		}
	}
	return NULL;
}

static const char *str_member(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int add_key(struct jwks *out, json_t *jk, size_t i, char *err,
                   size_t errlen)
{
	const char *kty = str_member(jk, "kty"), *crv = str_member(jk, "crv");
	const char *kid = str_member(jk, "kid"), *x = str_member(jk, "x");
	const char *alg = str_member(jk, "alg"), *use = str_member(jk, "use");
	uint8_t raw[33];
	size_t n;
	if (!json_is_object(jk) || kty == NULL || strcmp(kty, "OKP") != 0 ||
	    crv == NULL || strcmp(crv, "Ed25519") != 0) {
		snprintf(err, errlen, "key %zu is not an Ed25519 (OKP) key", i);
		return -1;
	}
	if (json_object_get(jk, "d") != NULL) {
		snprintf(err, errlen,
		         "key %zu holds a private key ('d'): give public keys "
		         "only",
		         i);
		return -1;
	}
	if (kid == NULL || kid[0] == '\0' || strlen(kid) > 255) {
		snprintf(err, errlen, "key %zu has no kid", i);
		return -1;
	}
	if ((alg != NULL && strcmp(alg, "EdDSA") != 0) ||
	    (use != NULL && strcmp(use, "sig") != 0)) {
		snprintf(err, errlen,
		         "key '%.100s' is not an EdDSA signing key", kid);
		return -1;
	}
	if (jwks_find(out, kid) != NULL) {
		snprintf(err, errlen, "kid '%.100s' appears twice", kid);
		return -1;
	}
	if (x == NULL || strlen(x) != 43 ||
	    base64url_decode(x, strlen(x), raw, &n) != 0 || n != 32) {
		snprintf(err, errlen,
		         "key '%.100s': x is not 32 bytes of base64url", kid);
		return -1;
	}
	EVP_PKEY *pk =
	    EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
	if (pk == NULL) {
		snprintf(err, errlen, "key '%.100s': not a valid Ed25519 key",
		         kid);
		return -1;
	}
	struct jwks_key *nk = realloc(out->keys, (out->n + 1) * sizeof *nk);
	char *kd = strdup(kid);
	if (nk == NULL || kd == NULL) {
		if (nk != NULL) {
			out->keys = nk;
		}
		free(kd);
		EVP_PKEY_free(pk);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	out->keys = nk;
	out->keys[out->n].kid = kd;
	out->keys[out->n].pkey = pk;
	out->n++;
	return 0;
}

int jwks_parse(const char *doc, size_t len, struct jwks *out, char *err,
               size_t errlen)
{
	json_error_t je;
	memset(out, 0, sizeof *out);
	if (len > JWKS_DOC_MAX) {
		snprintf(err, errlen, "key set larger than %d bytes",
		         JWKS_DOC_MAX);
		return -1;
	}
	json_t *root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		snprintf(err, errlen, "not JSON: %s (line %d)", je.text,
		         je.line);
		return -1;
	}
	json_t *keys = json_object_get(root, "keys");
	if (!json_is_object(root) || !json_is_array(keys)) {
		snprintf(err, errlen,
		         "not a JWKS document (no \"keys\" array)");
		goto err_root;
	}
	if (json_array_size(keys) > JWKS_KEYS_MAX) {
		snprintf(err, errlen, "more than %d keys", JWKS_KEYS_MAX);
		goto err_root;
	}
	for (size_t i = 0; i < json_array_size(keys); i++) {
		if (add_key(out, json_array_get(keys, i), i, err, errlen) !=
		    0) {
			goto err_root;
		}
	}
	json_decref(root);
	return 0;
err_root:
	json_decref(root);
	jwks_free(out);
	return -1;
}
