/* node/auth: token verification end to end (jwt.c, jwks.c, auth.c) with
 * tokens minted by client/felix_token.c: good tokens, every refusal
 * (expired, not yet valid, wrong key, wrong kid, alg none, HS256 keyed
 * with the public key, truncated, bad base64url, oversize, tid mismatch,
 * issuer, audience), and the key directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/felix_token.h"
#include "node/auth/auth.h"
#include "wire/base64url.h"

static EVP_PKEY *key1, *key2; /* k1 is tenant t1's key, k2 nobody's */
static struct auth_keydir kd;
static char dir[64];
static int64_t now;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	char path[128], err[512], doc[512];
	(void)state;
	now = (int64_t)time(NULL);
	assert_int_equal(felix_token_keygen(&key1), 0);
	assert_int_equal(felix_token_keygen(&key2), 0);
	snprintf(dir, sizeof dir, "/tmp/test_auth_jwt.XXXXXX");
	assert_non_null(mkdtemp(dir));
	char *jwk = felix_token_jwk(key1, "k1");
	assert_non_null(jwk);
	snprintf(doc, sizeof doc, "{\"keys\":[%s]}", jwk);
	free(jwk);
	snprintf(path, sizeof path, "%s/t1.json", dir);
	write_file(path, doc);
	snprintf(path, sizeof path, "%s/README", dir); /* not a key set */
	write_file(path, "ignored");
	if (auth_keydir_load(&kd, dir, err, sizeof err) != 0) {
		fail_msg("%s", err);
	}
	assert_int_equal(kd.n, 1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	auth_keydir_free(&kd);
	EVP_PKEY_free(key1);
	EVP_PKEY_free(key2);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static const char *const perms1[] = {"stream.publish:stream:orders/*"};

static struct felix_token_claims claims(void)
{
	struct felix_token_claims c = {
	    .tid = "t1",
	    .iat = now,
	    .exp = now + 600,
	    .perms = perms1,
	    .n_perms = 1,
	};
	return c;
}

/* Verifies `token` for tenant t1; 0 or -1, the message in err. */
static int verify(const char *token, const char *tenant, char *err,
                  size_t errlen)
{
	struct auth_jwt_config cfg = {NULL, NULL, 60};
	struct auth_perms p;
	int64_t exp = 0;
	err[0] = '\0';
	int rc = auth_jwt_verify(&kd, &cfg, tenant, token, now, &p, &exp, err,
	                         errlen);
	if (rc == 0) {
		assert_int_equal(p.n, 1);
		assert_true(
		    auth_perms_allow(&p, AUTH_STREAM_PUBLISH, "orders", "x"));
		assert_true(exp > 0);
	} else {
		assert_int_equal(p.n, 0);
		assert_true(strlen(err) > 0);
		/* Messages never carry the token. */
		assert_true(strlen(token) < 16 || strstr(err, token) == NULL);
	}
	auth_perms_free(&p);
	return rc;
}

static void expect_refused(const char *token, const char *tenant,
                           const char *why)
{
	char err[512];
	assert_int_not_equal(verify(token, tenant, err, sizeof err), 0);
	if (strstr(err, why) == NULL) {
		fail_msg("refused for '%s', expected '%s'", err, why);
	}
}

static char *mint(EVP_PKEY *k, const char *kid,
                  const struct felix_token_claims *c)
{
	char err[256];
	char *t = felix_token_mint(k, kid, c, err, sizeof err);
	assert_non_null(t);
	return t;
}

static void test_good(void **state)
{
	char err[512];
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key1, "k1", &c);
	assert_int_equal(verify(t, "t1", err, sizeof err), 0);
	free(t);
	/* Within the skew on either side. */
	c.exp = now - 30;
	c.nbf = now + 30;
	t = mint(key1, "k1", &c);
	assert_int_equal(verify(t, "t1", err, sizeof err), 0);
	free(t);
}

static void test_expired(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	c.iat = now - 7200;
	c.exp = now - 61;
	char *t = mint(key1, "k1", &c);
	expect_refused(t, "t1", "expired");
	free(t);
}

static void test_not_yet_valid(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	c.nbf = now + 300;
	char *t = mint(key1, "k1", &c);
	expect_refused(t, "t1", "not yet valid");
	free(t);
	c = claims();
	c.iat = now + 300;
	t = mint(key1, "k1", &c);
	expect_refused(t, "t1", "future");
	free(t);
}

static void test_wrong_key(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key2, "k1", &c); /* k1's name, another key */
	expect_refused(t, "t1", "signature");
	free(t);
}

static void test_wrong_kid(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key1, "k9", &c);
	expect_refused(t, "t1", "kid");
	free(t);
}

static void test_tampered(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key1, "k1", &c);
	/* Claims of another token with t's signature. */
	const char *const admin[] = {"tenant.admin:tenant:*"};
	c.perms = admin;
	char *u = mint(key1, "k1", &c);
	char *sig_t = strrchr(t, '.'), *sig_u = strrchr(u, '.');
	memcpy(sig_u, sig_t, strlen(sig_t));
	expect_refused(u, "t1", "signature");
	free(t);
	free(u);
}

/* A token with the given header and claims JSON, signed with HMAC-SHA256
 * keyed by `hkey`, or with no signature when hkey is NULL. */
static char *hmac_token(const char *header, const char *claims_json,
                        const uint8_t *hkey, size_t hlen)
{
	struct wbuf w;
	uint8_t mac[32];
	unsigned mlen = 0;
	wbuf_init(&w);
	base64url_encode(&w, (const uint8_t *)header, strlen(header));
	wbuf_append(&w, ".", 1);
	base64url_encode(&w, (const uint8_t *)claims_json, strlen(claims_json));
	if (hkey != NULL) {
		HMAC(EVP_sha256(), hkey, (int)hlen, w.data, w.len, mac, &mlen);
	}
	wbuf_append(&w, ".", 1);
	base64url_encode(&w, mac, mlen);
	wbuf_append(&w, "", 1);
	return (char *)w.data;
}

static char *claims_json(void)
{
	static char buf[512];
	snprintf(buf, sizeof buf,
	         "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\","
	         "\"sub\":\"s\",\"tid\":\"t1\",\"exp\":%lld,\"perms\":["
	         "\"tenant.admin:tenant:*\"]}",
	         (long long)now + 600);
	return buf;
}

static void test_alg_none(void **state)
{
	(void)state;
	char *t = hmac_token("{\"alg\":\"none\",\"kid\":\"k1\"}", claims_json(),
	                     NULL, 0);
	expect_refused(t, "t1", "only EdDSA");
	free(t);
	t = hmac_token("{\"alg\":\"None\",\"kid\":\"k1\"}", claims_json(), NULL,
	               0);
	expect_refused(t, "t1", "only EdDSA");
	free(t);
	t = hmac_token("{\"kid\":\"k1\"}", claims_json(), NULL, 0);
	expect_refused(t, "t1", "alg");
	free(t);
}

static void test_hs256_confusion(void **state)
{
	(void)state;
	/* The classic confusion: HMAC keyed with the public key's bytes,
	 * raw and as the JWK's x text. */
	uint8_t raw[32];
	size_t n = sizeof raw;
	assert_int_equal(EVP_PKEY_get_raw_public_key(key1, raw, &n), 1);
	char *t = hmac_token("{\"alg\":\"HS256\",\"kid\":\"k1\"}",
	                     claims_json(), raw, n);
	expect_refused(t, "t1", "only EdDSA");
	free(t);
	char *jwk = felix_token_jwk(key1, "k1");
	t = hmac_token("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}",
	               claims_json(), (const uint8_t *)jwk, strlen(jwk));
	expect_refused(t, "t1", "only EdDSA");
	free(t);
	free(jwk);
	t = hmac_token("{\"alg\":\"ES256\",\"kid\":\"k1\"}", claims_json(), raw,
	               n);
	expect_refused(t, "t1", "only EdDSA");
	free(t);
}

static void test_truncated(void **state)
{
	char err[512];
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key1, "k1", &c);
	size_t len = strlen(t);
	for (size_t cut = 0; cut < len; cut++) {
		char *u = strndup(t, cut);
		assert_int_not_equal(verify(u, "t1", err, sizeof err), 0);
		free(u);
	}
	free(t);
}

static void test_bad_base64(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	char *t = mint(key1, "k1", &c);
	char *u = strdup(t);
	u[3] = '+'; /* standard base64, not url-safe */
	expect_refused(u, "t1", "base64url");
	strcpy(u, t);
	u[strchr(u, '.') - u - 1] = '*';
	expect_refused(u, "t1", "base64url");
	free(u);
	/* Padding is refused. */
	size_t len = strlen(t);
	u = malloc(len + 3);
	snprintf(u, len + 3, "%s==", t);
	expect_refused(u, "t1", "signature");
	free(u);
	/* Four parts. */
	u = malloc(len + 3);
	snprintf(u, len + 3, "%s.x", t);
	expect_refused(u, "t1", "three");
	free(u);
	free(t);
}

static void test_oversize(void **state)
{
	(void)state;
	static char big[AUTH_PERMS_MAX + 1][64];
	const char *p[AUTH_PERMS_MAX + 1];
	struct felix_token_claims c = claims();
	for (int i = 0; i <= AUTH_PERMS_MAX; i++) {
		snprintf(big[i], sizeof big[i],
		         "stream.publish:stream:ns%d/stream%d", i, i);
		p[i] = big[i];
	}
	/* 257 short permissions: over the permission bound. */
	c.perms = p;
	c.n_perms = AUTH_PERMS_MAX + 1;
	char *t = mint(key1, "k1", &c);
	assert_true(strlen(t) > JWT_TOKEN_MAX);
	expect_refused(t, "t1", "longer than");
	free(t);
	/* Under the size bound but over the count bound. */
	for (int i = 0; i <= AUTH_PERMS_MAX; i++) {
		snprintf(big[i], sizeof big[i], "ns.manage:ns:%x", i);
	}
	t = mint(key1, "k1", &c);
	assert_true(strlen(t) <= JWT_TOKEN_MAX);
	expect_refused(t, "t1", "more than 256 permissions");
	free(t);
}

static void test_tid_mismatch(void **state)
{
	char path[128], err[512], doc[512];
	struct auth_keydir two;
	(void)state;
	struct felix_token_claims c = claims();
	c.tid = "t2";
	char *t = mint(key1, "k1", &c);
	/* t1's key signed it, but it names t2: refused for t1... */
	expect_refused(t, "t1", "tid");
	/* ...and for t2, whose keys do not include k1. */
	expect_refused(t, "t2", "no keys");
	/* With the same key listed for t2 as well, it is good for t2 only. */
	char *jwk = felix_token_jwk(key1, "k1");
	snprintf(doc, sizeof doc, "{\"keys\":[%s]}", jwk);
	free(jwk);
	snprintf(path, sizeof path, "%s/t2.json", dir);
	write_file(path, doc);
	assert_int_equal(auth_keydir_load(&two, dir, err, sizeof err), 0);
	struct auth_jwt_config cfg = {NULL, NULL, 60};
	struct auth_perms p;
	int64_t exp;
	assert_int_equal(auth_jwt_verify(&two, &cfg, "t2", t, now, &p, &exp,
	                                 err, sizeof err),
	                 0);
	auth_perms_free(&p);
	assert_int_not_equal(auth_jwt_verify(&two, &cfg, "t1", t, now, &p, &exp,
	                                     err, sizeof err),
	                     0);
	auth_keydir_free(&two);
	unlink(path);
	free(t);
}

static void test_issuer_audience(void **state)
{
	(void)state;
	struct felix_token_claims c = claims();
	c.iss = "someone-else";
	char *t = mint(key1, "k1", &c);
	expect_refused(t, "t1", "issuer");
	free(t);
	c = claims();
	c.aud = "felix-controlplane";
	t = mint(key1, "k1", &c);
	expect_refused(t, "t1", "audience");
	free(t);
}

static void test_claim_shapes(void **state)
{
	char cj[512];
	(void)state;
	static const char *bad[] = {
	    /* exp missing, mistyped, negative */
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\"}",
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\",\"exp\":\"soon\"}",
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\",\"exp\":-1}",
	    /* duplicate claim */
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\",\"tid\":\"t2\",\"exp\":%lld}",
	    /* perms not strings, unknown action */
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\",\"exp\":%lld,\"perms\":[1]}",
	    "{\"iss\":\"felix-auth\",\"aud\":\"felix-broker\",\"sub\":\"s\","
	    "\"tid\":\"t1\",\"exp\":%lld,\"perms\":[\"x.y:tenant:*\"]}",
	    /* not an object */
	    "[1,2]",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(cj, sizeof cj, bad[i], (long long)now + 600);
		char *t = felix_token_sign_raw(
		    key1, "{\"alg\":\"EdDSA\",\"kid\":\"k1\"}", cj);
		assert_non_null(t);
		char err[512];
		assert_int_not_equal(verify(t, "t1", err, sizeof err), 0);
		free(t);
	}
	/* aud as an array naming us, and a crit header. */
	snprintf(cj, sizeof cj,
	         "{\"iss\":\"felix-auth\",\"aud\":[\"x\",\"felix-broker\"],"
	         "\"sub\":\"s\",\"tid\":\"t1\",\"exp\":%lld,\"perms\":["
	         "\"stream.publish:stream:orders/*\"]}",
	         (long long)now + 600);
	char *t = felix_token_sign_raw(
	    key1, "{\"alg\":\"EdDSA\",\"kid\":\"k1\"}", cj);
	char err[512];
	assert_int_equal(verify(t, "t1", err, sizeof err), 0);
	free(t);
	t = felix_token_sign_raw(
	    key1, "{\"alg\":\"EdDSA\",\"kid\":\"k1\",\"crit\":[\"b64\"]}", cj);
	expect_refused(t, "t1", "crit");
	free(t);
}

static void test_tenant_ids(void **state)
{
	(void)state;
	assert_true(auth_tenant_id_ok("t1"));
	assert_true(auth_tenant_id_ok("Acme_corp-1.eu"));
	assert_false(auth_tenant_id_ok(""));
	assert_false(auth_tenant_id_ok("."));
	assert_false(auth_tenant_id_ok(".."));
	assert_false(auth_tenant_id_ok("../etc/passwd"));
	assert_false(auth_tenant_id_ok("a/b"));
	assert_false(auth_tenant_id_ok("a b"));
	struct felix_token_claims c = claims();
	c.tid = "../t1";
	char *t = mint(key1, "k1", &c);
	expect_refused(t, "../t1", "tenant_id");
	free(t);
}

static void test_jwks_documents(void **state)
{
	struct jwks k;
	char err[256];
	(void)state;
	static const char *bad[] = {
	    "",
	    "{}",
	    "{\"keys\":{}}",
	    "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r\",\"n\":\"AQAB\","
	    "\"e\":\"AQAB\"}]}",
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"a\","
	    "\"x\":\"AAAA\"}]}",
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"X25519\",\"kid\":\"a\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}",
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}",
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"a\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\","
	    "\"d\":\"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\"}]}",
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"a\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"},"
	    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"a\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (jwks_parse(bad[i], strlen(bad[i]), &k, err, sizeof err) ==
		    0) {
			fail_msg("accepted %s", bad[i]);
		}
	}
	/* RFC 8037's example key, with rotation: two kids. */
	const char *good =
	    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"a\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"},"
	    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"b\",\"alg\":"
	    "\"EdDSA\",\"use\":\"sig\","
	    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}";
	assert_int_equal(jwks_parse(good, strlen(good), &k, err, sizeof err),
	                 0);
	assert_int_equal(k.n, 2);
	assert_non_null(jwks_find(&k, "b"));
	assert_null(jwks_find(&k, "c"));
	jwks_free(&k);
}

static void test_keydir_errors(void **state)
{
	char d[64], path[128], err[512];
	struct auth_keydir x;
	(void)state;
	assert_int_not_equal(
	    auth_keydir_load(&x, "/nonexistent/keys", err, sizeof err), 0);
	snprintf(d, sizeof d, "/tmp/test_auth_kd.XXXXXX");
	assert_non_null(mkdtemp(d));
	snprintf(path, sizeof path, "%s/bad name.json", d);
	write_file(path, "{\"keys\":[]}");
	assert_int_not_equal(auth_keydir_load(&x, d, err, sizeof err), 0);
	assert_non_null(strstr(err, "tenant id"));
	unlink(path);
	snprintf(path, sizeof path, "%s/t1.json", d);
	write_file(path, "{\"keys\":");
	assert_int_not_equal(auth_keydir_load(&x, d, err, sizeof err), 0);
	assert_non_null(strstr(err, "t1.json"));
	unlink(path);
	assert_int_equal(auth_keydir_load(&x, d, err, sizeof err), 0);
	assert_int_equal(x.n, 0);
	auth_keydir_free(&x);
	rmdir(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_expired),
	    cmocka_unit_test(test_not_yet_valid),
	    cmocka_unit_test(test_wrong_key),
	    cmocka_unit_test(test_wrong_kid),
	    cmocka_unit_test(test_tampered),
	    cmocka_unit_test(test_alg_none),
	    cmocka_unit_test(test_hs256_confusion),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_bad_base64),
	    cmocka_unit_test(test_oversize),
	    cmocka_unit_test(test_tid_mismatch),
	    cmocka_unit_test(test_issuer_audience),
	    cmocka_unit_test(test_claim_shapes),
	    cmocka_unit_test(test_tenant_ids),
	    cmocka_unit_test(test_jwks_documents),
	    cmocka_unit_test(test_keydir_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
