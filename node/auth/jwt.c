/* Felix tokens: parsing, claim checks and Ed25519 verification; see
 * jwt.h. */
#include "node/auth/jwt.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/base64url.h"

/* Largest NumericDate accepted: year 9999. */
#define JWT_TIME_MAX 253402300799LL

void jwt_free(struct jwt *j)
{
	for (size_t i = 0; i < j->n_aud; i++) {
		free(j->aud[i]);
	}
	j->n_aud = 0;
	auth_perms_free(&j->perms);
	if (j->signed_part != NULL) {
		memset(j->signed_part, 0, j->signed_len);
		free(j->signed_part);
		j->signed_part = NULL;
	}
}

/* Decodes one base64url part into a JSON object (duplicates refused). */
static json_t *decode_part(const char *s, size_t len, const char *what,
                           char *err, size_t errlen)
{
	uint8_t buf[JWT_TOKEN_MAX];
	size_t n;
	if (len == 0 || base64url_decoded_max(len) > sizeof buf ||
	    base64url_decode(s, len, buf, &n) != 0) {
		snprintf(err, errlen,
		         "malformed token: the %s is not base64url", what);
		return NULL;
	}
	json_error_t je;
	json_t *o =
	    json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES, &je);
	memset(buf, 0, n);
	if (o == NULL || !json_is_object(o)) {
		json_decref(o);
		snprintf(err, errlen,
		         "malformed token: the %s is not a JSON "
		         "object",
		         what);
		return NULL;
	}
	if (json_object_size(o) > JWT_MEMBERS_MAX) {
		json_decref(o);
		snprintf(err, errlen, "token %s has more than %d members", what,
		         JWT_MEMBERS_MAX);
		return NULL;
	}
	return o;
}

/* Copies string member `name` into out; -1 when absent (and required),
 * mistyped or too long. */
static int get_str(json_t *o, const char *name, bool required, char *out,
                   char *err, size_t errlen)
{
	json_t *v = json_object_get(o, name);
	out[0] = '\0';
	if (v == NULL) {
		if (required) {
			snprintf(err, errlen, "token has no '%s' claim", name);
			return -1;
		}
		return 0;
	}
	if (!json_is_string(v) || json_string_length(v) > JWT_STR_MAX ||
	    json_string_length(v) == 0 ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		snprintf(err, errlen,
		         "token '%s' must be a string of 1 to %d bytes", name,
		         JWT_STR_MAX);
		return -1;
	}
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* A NumericDate: an integer or a finite number, in [0, JWT_TIME_MAX]. */
static int get_time(json_t *o, const char *name, bool required, bool *has,
                    int64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, name);
	*has = false;
	if (v == NULL) {
		if (required) {
			snprintf(err, errlen, "token has no '%s' claim", name);
			return -1;
		}
		return 0;
	}
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0 || i > JWT_TIME_MAX) {
			goto err_time;
		}
		*out = (int64_t)i;
	} else if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!isfinite(d) || d < 0 || d > (double)JWT_TIME_MAX) {
			goto err_time;
		}
		*out = (int64_t)d;
	} else {
		goto err_time;
	}
	*has = true;
	return 0;
err_time:
	snprintf(err, errlen, "token '%s' must be a time in seconds", name);
	return -1;
}

static int parse_header(json_t *h, struct jwt *out, char *err, size_t errlen)
{
	json_t *alg = json_object_get(h, "alg");
	if (alg == NULL || !json_is_string(alg)) {
		snprintf(err, errlen, "token header has no 'alg'");
		return JWT_EALG;
	}
	if (strcmp(json_string_value(alg), "EdDSA") != 0 ||
	    json_string_length(alg) != 5) {
		snprintf(
		    err, errlen,
		    "token algorithm '%.20s' refused: only EdDSA (Ed25519) "
		    "is accepted",
		    json_string_value(alg));
		return JWT_EALG;
	}
	if (json_object_get(h, "crit") != NULL) {
		snprintf(err, errlen,
		         "token header has 'crit' extensions this "
		         "broker does not understand");
		return JWT_EFORMAT;
	}
	json_t *typ = json_object_get(h, "typ");
	if (typ != NULL && !json_is_string(typ)) {
		snprintf(err, errlen, "token header 'typ' must be a string");
		return JWT_EFORMAT;
	}
	if (get_str(h, "kid", true, out->kid, err, errlen) != 0) {
		return JWT_ECLAIM;
	}
	return 0;
}

static int parse_aud(json_t *c, struct jwt *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(c, "aud");
	if (v == NULL) {
		snprintf(err, errlen, "token has no 'aud' claim");
		return -1;
	}
	json_t *one[1] = {v};
	json_t **items = one;
	size_t n = 1;
	if (json_is_array(v)) {
		n = json_array_size(v);
		if (n == 0 || n > JWT_AUD_MAX) {
			snprintf(err, errlen,
			         "token 'aud' must list 1 to %d audiences",
			         JWT_AUD_MAX);
			return -1;
		}
		items = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *a = items != NULL ? items[i] : json_array_get(v, i);
		if (!json_is_string(a) || json_string_length(a) == 0 ||
		    json_string_length(a) > JWT_STR_MAX ||
		    strlen(json_string_value(a)) != json_string_length(a)) {
			snprintf(err, errlen,
			         "token 'aud' must be strings of 1 to %d bytes",
			         JWT_STR_MAX);
			return -1;
		}
		out->aud[out->n_aud] = strdup(json_string_value(a));
		if (out->aud[out->n_aud] == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		out->n_aud++;
	}
	return 0;
}

static int parse_perms(json_t *c, struct jwt *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(c, "perms");
	char e[256];
	if (v == NULL) {
		return 0;
	}
	if (!json_is_array(v)) {
		snprintf(err, errlen,
		         "token 'perms' must be an array of "
		         "strings");
		return JWT_ECLAIM;
	}
	if (json_array_size(v) > AUTH_PERMS_MAX) {
		snprintf(err, errlen, "token has more than %d permissions",
		         AUTH_PERMS_MAX);
		return JWT_ESIZE;
	}
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *p = json_array_get(v, i);
		if (!json_is_string(p) ||
		    strlen(json_string_value(p)) != json_string_length(p)) {
			snprintf(err, errlen,
			         "token 'perms' must be an array of strings");
			return JWT_ECLAIM;
		}
		if (auth_perms_add(&out->perms, json_string_value(p), e,
		                   sizeof e) != 0) {
			snprintf(err, errlen, "token %s", e);
			return JWT_ECLAIM;
		}
	}
	return 0;
}

static int parse_claims(json_t *c, struct jwt *out, char *err, size_t errlen)
{
	bool has;
	if (get_str(c, "iss", true, out->iss, err, errlen) != 0 ||
	    get_str(c, "sub", true, out->sub, err, errlen) != 0 ||
	    get_str(c, "tid", true, out->tid, err, errlen) != 0 ||
	    parse_aud(c, out, err, errlen) != 0 ||
	    get_time(c, "exp", true, &has, &out->exp, err, errlen) != 0 ||
	    get_time(c, "iat", false, &out->has_iat, &out->iat, err, errlen) !=
	        0 ||
	    get_time(c, "nbf", false, &out->has_nbf, &out->nbf, err, errlen) !=
	        0) {
		return JWT_ECLAIM;
	}
	return parse_perms(c, out, err, errlen);
}

int jwt_parse(const char *token, size_t len, struct jwt *out, char *err,
              size_t errlen)
{
	json_t *h = NULL, *c = NULL;
	int rc;
	memset(out, 0, sizeof *out);
	auth_perms_init(&out->perms);
	if (len > JWT_TOKEN_MAX) {
		snprintf(err, errlen, "token longer than %d bytes",
		         JWT_TOKEN_MAX);
		return JWT_ESIZE;
	}
	const char *d1 = memchr(token, '.', len);
	const char *d2 =
	    d1 != NULL ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token))
	               : NULL;
	if (d1 == NULL || d2 == NULL ||
	    memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)) != NULL) {
		snprintf(err, errlen,
		         "malformed token: not three dot-separated parts");
		return JWT_EFORMAT;
	}
	const char *sig = d2 + 1;
	size_t sig_len = len - (size_t)(sig - token);
	h = decode_part(token, (size_t)(d1 - token), "header", err, errlen);
	if (h == NULL) {
		rc = JWT_EFORMAT;
		goto err_out;
	}
	rc = parse_header(h, out, err, errlen);
	if (rc != 0) {
		goto err_out;
	}
	c = decode_part(d1 + 1, (size_t)(d2 - d1 - 1), "claims", err, errlen);
	if (c == NULL) {
		rc = JWT_EFORMAT;
		goto err_out;
	}
	rc = parse_claims(c, out, err, errlen);
	if (rc != 0) {
		goto err_out;
	}
	size_t n;
	uint8_t sbuf[JWT_SIG_LEN + 3];
	if (base64url_decoded_max(sig_len) > sizeof sbuf ||
	    base64url_decode(sig, sig_len, sbuf, &n) != 0 || n != JWT_SIG_LEN) {
		snprintf(err, errlen,
		         "malformed token: the signature is not "
		         "64 bytes of base64url");
		rc = JWT_EFORMAT;
		goto err_out;
	}
	memcpy(out->sig, sbuf, JWT_SIG_LEN);
	out->signed_len = (size_t)(d2 - token);
	out->signed_part = malloc(out->signed_len + 1);
	if (out->signed_part == NULL) {
		snprintf(err, errlen, "out of memory");
		rc = JWT_EFORMAT;
		goto err_out;
	}
	memcpy(out->signed_part, token, out->signed_len);
	out->signed_part[out->signed_len] = '\0';
	json_decref(h);
	json_decref(c);
	return 0;
err_out:
	json_decref(h);
	json_decref(c);
	return rc;
}

int jwt_check_claims(const struct jwt *j, const struct jwt_expect *e, char *err,
                     size_t errlen)
{
	if (strcmp(j->iss, e->iss) != 0) {
		snprintf(err, errlen, "token issuer is not '%.100s'", e->iss);
		return -1;
	}
	bool aud = false;
	for (size_t i = 0; i < j->n_aud; i++) {
		aud = aud || strcmp(j->aud[i], e->aud) == 0;
	}
	if (!aud) {
		snprintf(err, errlen, "token audience is not '%.100s'", e->aud);
		return -1;
	}
	if (e->tid != NULL && strcmp(j->tid, e->tid) != 0) {
		snprintf(err, errlen,
		         "token tenant (tid) is not the tenant_id '%.100s'",
		         e->tid);
		return -1;
	}
	if (j->exp + e->skew_s <= e->now) {
		snprintf(err, errlen, "token expired");
		return -1;
	}
	if (j->has_nbf && j->nbf - e->skew_s > e->now) {
		snprintf(err, errlen, "token not yet valid (nbf)");
		return -1;
	}
	if (j->has_iat && j->iat - e->skew_s > e->now) {
		snprintf(err, errlen, "token issued in the future (iat)");
		return -1;
	}
	return 0;
}

int jwt_verify_signature(const struct jwt *j, EVP_PKEY *key, char *err,
                         size_t errlen)
{
	int ok = 0;
	if (key == NULL || EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
		snprintf(err, errlen, "the key is not an Ed25519 key");
		return -1;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx != NULL &&
	    EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1) {
		ok = EVP_DigestVerify(ctx, j->sig, JWT_SIG_LEN,
		                      (const unsigned char *)j->signed_part,
		                      j->signed_len) == 1;
	}
	EVP_MD_CTX_free(ctx);
	if (!ok) {
		snprintf(err, errlen, "token signature does not verify");
		return -1;
	}
	return 0;
}
