/* Key directory and token verification; see auth.h. */
#include "node/auth/auth.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool auth_tenant_id_ok(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > 255 || strcmp(t, ".") == 0 || strcmp(t, "..") == 0) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-')) {
			return false;
		}
	}
	return true;
}

void auth_keydir_free(struct auth_keydir *kd)
{
	for (size_t i = 0; i < kd->n; i++) {
		free(kd->t[i].tenant);
		jwks_free(&kd->t[i].keys);
	}
	free(kd->t);
	kd->t = NULL;
	kd->n = 0;
}

const struct jwks *auth_keydir_find(const struct auth_keydir *kd,
                                    const char *tenant)
{
	for (size_t i = 0; i < kd->n; i++) {
		if (strcmp(kd->t[i].tenant, tenant) == 0) {
			return &kd->t[i].keys;
		}
	}
	return NULL;
}

size_t auth_keydir_keys(const struct auth_keydir *kd)
{
	size_t n = 0;
	for (size_t i = 0; i < kd->n; i++) {
		n += kd->t[i].keys.n;
	}
	return n;
}

/* Reads a whole file of at most `max` bytes. */
static char *read_file(const char *path, size_t max, size_t *len, char *err,
                       size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read %s: %s", path,
		         strerror(errno));
		return NULL;
	}
	char *buf = malloc(max + 1);
	size_t n = buf != NULL ? fread(buf, 1, max + 1, f) : 0;
	bool bad = ferror(f) != 0;
	fclose(f);
	if (buf == NULL || bad || n > max) {
		snprintf(err, errlen, "%s: %s", path,
		         buf == NULL ? "out of memory"
		         : bad       ? "read error"
		                     : "too large");
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int load_one(struct auth_keydir *kd, const char *dir, const char *name,
                    char *err, size_t errlen)
{
	char tenant[256], path[4096], e[256];
	size_t nlen = strlen(name), len;
	if (nlen - 5 >= sizeof tenant) {
		snprintf(err, errlen, "%s/%s: tenant id too long", dir, name);
		return -1;
	}
	memcpy(tenant, name, nlen - 5);
	tenant[nlen - 5] = '\0';
	if (!auth_tenant_id_ok(tenant)) {
		snprintf(err, errlen,
		         "%s/%s: the file name is not a tenant id "
		         "([A-Za-z0-9._-])",
		         dir, name);
		return -1;
	}
	snprintf(path, sizeof path, "%s/%s", dir, name);
	char *doc = read_file(path, JWKS_DOC_MAX, &len, err, errlen);
	if (doc == NULL) {
		return -1;
	}
	struct jwks keys;
	int rc = jwks_parse(doc, len, &keys, e, sizeof e);
	free(doc);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", path, e);
		return -1;
	}
	struct auth_tenant_keys *nt = realloc(kd->t, (kd->n + 1) * sizeof *nt);
	char *t = strdup(tenant);
	if (nt == NULL || t == NULL) {
		if (nt != NULL) {
			kd->t = nt;
		}
		free(t);
		jwks_free(&keys);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	kd->t = nt;
	kd->t[kd->n].tenant = t;
	kd->t[kd->n].keys = keys;
	kd->n++;
	return 0;
}

int auth_keydir_load(struct auth_keydir *kd, const char *dir, char *err,
                     size_t errlen)
{
	memset(kd, 0, sizeof *kd);
	DIR *d = opendir(dir);
	if (d == NULL) {
		snprintf(err, errlen, "cannot open key directory %s: %s", dir,
		         strerror(errno));
		return -1;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		if (n <= 5 || strcmp(de->d_name + n - 5, ".json") != 0) {
			continue;
		}
		if (load_one(kd, dir, de->d_name, err, errlen) != 0) {
			goto err_dir;
		}
	}
	closedir(d);
	return 0;
err_dir:
	closedir(d);
	auth_keydir_free(kd);
	return -1;
}

int auth_jwt_verify(const struct auth_keydir *kd,
                    const struct auth_jwt_config *cfg, const char *tenant,
                    const char *token, int64_t now, struct auth_perms *perms,
                    int64_t *exp, char *err, size_t errlen)
{
	struct jwt j;
	auth_perms_init(perms);
	if (!auth_tenant_id_ok(tenant)) {
		snprintf(err, errlen,
		         "tenant_id must be 1 to 255 of [A-Za-z0-9._-]");
		return -1;
	}
	if (jwt_parse(token, strlen(token), &j, err, errlen) != 0) {
		goto err_jwt;
	}
	const struct jwks *keys = auth_keydir_find(kd, tenant);
	EVP_PKEY *key = keys != NULL ? jwks_find(keys, j.kid) : NULL;
	if (keys == NULL) {
		snprintf(err, errlen, "no keys for tenant '%.100s'", tenant);
		goto err_jwt;
	}
	if (key == NULL) {
		snprintf(err, errlen,
		         "no key of tenant '%.100s' has the "
		         "token's kid",
		         tenant);
		goto err_jwt;
	}
	if (jwt_verify_signature(&j, key, err, errlen) != 0) {
		goto err_jwt;
	}
	struct jwt_expect e = {
	    .iss = cfg->issuer != NULL ? cfg->issuer : AUTH_DEFAULT_ISSUER,
	    .aud =
	        cfg->audience != NULL ? cfg->audience : AUTH_DEFAULT_AUDIENCE,
	    .tid = tenant,
	    .now = now,
	    .skew_s = cfg->skew_s,
	};
	if (jwt_check_claims(&j, &e, err, errlen) != 0) {
		goto err_jwt;
	}
	*perms = j.perms;
	auth_perms_init(&j.perms); /* taken */
	*exp = j.exp;
	jwt_free(&j);
	return 0;
err_jwt:
	jwt_free(&j);
	return -1;
}
