/* Felix token issuing; see felix_token.h. */
#include "client/felix_token.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/base64url.h"
#include "wire/buf.h"

int felix_token_keygen(EVP_PKEY **out)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
	*out = NULL;
	int ok = ctx != NULL && EVP_PKEY_keygen_init(ctx) == 1 &&
	         EVP_PKEY_keygen(ctx, out) == 1;
	EVP_PKEY_CTX_free(ctx);
	return ok ? 0 : -1;
}

EVP_PKEY *felix_token_load_key(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read %s: %s", path,
		         strerror(errno));
		return NULL;
	}
	EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (k == NULL || EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(k);
		snprintf(err, errlen, "%s is not an Ed25519 private key (PEM)",
		         path);
		return NULL;
	}
	return k;
}

int felix_token_save_key(EVP_PKEY *key, const char *path, char *err,
                         size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", path,
		         strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "w");
	if (f == NULL) {
		close(fd);
		snprintf(err, errlen, "cannot write %s", path);
		return -1;
	}
	int ok = PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1;
	ok = fclose(f) == 0 && ok;
	if (!ok) {
		snprintf(err, errlen, "cannot write %s", path);
		return -1;
	}
	return 0;
}

/* base64url of n bytes as a NUL-terminated string into w. */
static int b64(struct wbuf *w, const void *p, size_t n)
{
	return base64url_encode(w, p, n);
}

char *felix_token_jwk(EVP_PKEY *key, const char *kid)
{
	uint8_t raw[32];
	size_t n = sizeof raw;
	struct wbuf x;
	char *out = NULL;
	if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1 || n != 32) {
		return NULL;
	}
	wbuf_init(&x);
	if (b64(&x, raw, n) != 0 || wbuf_append(&x, "", 1) != 0) {
		wbuf_free(&x);
		return NULL;
	}
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "kty", "OKP", "crv",
	                      "Ed25519", "kid", kid, "alg", "EdDSA", "use",
	                      "sig", "x", (const char *)x.data);
	if (o != NULL) {
		out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	}
	json_decref(o);
	wbuf_free(&x);
	return out;
}

char *felix_token_sign_raw(EVP_PKEY *key, const char *header_json,
                           const char *claims_json)
{
	struct wbuf w;
	uint8_t sig[64];
	size_t siglen = sizeof sig;
	char *out = NULL;
	wbuf_init(&w);
	b64(&w, header_json, strlen(header_json));
	wbuf_append(&w, ".", 1);
	b64(&w, claims_json, strlen(claims_json));
	if (w.oom) {
		goto done;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx != NULL &&
	         EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) == 1 &&
	         EVP_DigestSign(ctx, sig, &siglen, w.data, w.len) == 1;
	EVP_MD_CTX_free(ctx);
	if (!ok) {
		goto done;
	}
	wbuf_append(&w, ".", 1);
	b64(&w, sig, siglen);
	wbuf_append(&w, "", 1);
	if (!w.oom) {
		out = (char *)w.data;
		wbuf_init(&w);
	}
done:
	wbuf_free(&w);
	return out;
}

char *felix_token_mint(EVP_PKEY *key, const char *kid,
                       const struct felix_token_claims *c, char *err,
                       size_t errlen)
{
	json_t *h = json_pack("{s:s,s:s,s:s}", "alg", "EdDSA", "typ", "JWT",
	                      "kid", kid);
	json_t *cl =
	    json_pack("{s:s,s:s,s:s,s:s,s:I,s:I}", "iss",
	              c->iss != NULL ? c->iss : "felix-auth", "aud",
	              c->aud != NULL ? c->aud : "felix-broker", "sub",
	              c->sub != NULL ? c->sub : c->tid, "tid", c->tid, "iat",
	              (json_int_t)c->iat, "exp", (json_int_t)c->exp);
	json_t *perms = json_array();
	char *hs = NULL, *cs = NULL, *out = NULL;
	if (h == NULL || cl == NULL || perms == NULL) {
		goto err_oom;
	}
	for (size_t i = 0; i < c->n_perms; i++) {
		if (json_array_append_new(perms, json_string(c->perms[i])) !=
		    0) {
			goto err_oom;
		}
	}
	if (c->nbf != 0 &&
	    json_object_set_new(cl, "nbf", json_integer(c->nbf)) != 0) {
		goto err_oom;
	}
	if (json_object_set(cl, "perms", perms) != 0) {
		goto err_oom;
	}
	hs = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	cs = json_dumps(cl, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (hs == NULL || cs == NULL) {
		goto err_oom;
	}
	out = felix_token_sign_raw(key, hs, cs);
	if (out == NULL) {
		snprintf(err, errlen, "signing failed");
	}
	goto done;
err_oom:
	snprintf(err, errlen,
	         "cannot build the token (bad argument or out "
	         "of memory)");
done:
	free(hs);
	free(cs);
	json_decref(h);
	json_decref(cl);
	json_decref(perms);
	return out;
}
