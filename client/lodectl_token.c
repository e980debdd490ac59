/* lodectl felix keygen / token: Ed25519 signing keys for Felix JWTs and
 * tokens minted with them (client/felix_token.h, docs/security.md). Both
 * run offline: no broker is contacted. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/felix_token.h"
#include "client/lodectl.h"

#define PERMS_MAX 256

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: lodectl felix keygen --kid K --out-dir D [--jwks FILE]\n"
	    "  writes D/K.pem (the private key, mode 0600) and "
	    "D/K.jwks.json (its public key as a JWKS document);\n"
	    "  --jwks adds the public key to FILE as well (created when "
	    "absent), e.g. JWKS_DIR/TENANT.json while rotating keys\n"
	    "usage: lodectl felix token --signing-key FILE --tenant T "
	    "--perm P [--perm P ...] [--ttl-s S] [--kid K]\n"
	    "       [--sub S] [--iss I] [--aud A]\n"
	    "  prints an EdDSA JWT for tenant T with permissions P "
	    "(ACTION:OBJECT, e.g. stream.publish:stream:orders/*);\n"
	    "  --ttl-s defaults to 3600, --kid to FILE's name without "
	    ".pem\n");
}

/* Adds `jwk` (JSON text) to the JWKS document at `path`. */
static int jwks_add(const char *path, const char *jwk, const char *kid)
{
	json_error_t je;
	json_t *doc = NULL;
	FILE *f = fopen(path, "r");
	if (f != NULL) {
		doc = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
		fclose(f);
		if (doc == NULL ||
		    !json_is_array(json_object_get(doc, "keys"))) {
			fprintf(stderr, "lodectl: %s is not a JWKS document\n",
			        path);
			json_decref(doc);
			return -1;
		}
	} else if (errno == ENOENT) {
		doc = json_pack("{s:[]}", "keys");
	} else {
		fprintf(stderr, "lodectl: cannot read %s: %s\n", path,
		        strerror(errno));
		return -1;
	}
	json_t *keys = json_object_get(doc, "keys");
	for (size_t i = 0; i < json_array_size(keys); i++) {
		json_t *k = json_object_get(json_array_get(keys, i), "kid");
		if (json_is_string(k) &&
		    strcmp(json_string_value(k), kid) == 0) {
			fprintf(stderr, "lodectl: %s already has kid '%s'\n",
			        path, kid);
			json_decref(doc);
			return -1;
		}
	}
	json_array_append_new(keys, json_loads(jwk, 0, &je));
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int rc = json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (rc != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "lodectl: cannot write %s\n", path);
		remove(tmp);
		return -1;
	}
	return 0;
}

static int keygen(int argc, char **argv)
{
	const char *kid = NULL, *dir = NULL, *jwks = NULL;
	char err[512], path[4096];
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--kid") == 0) {
			kid = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--out-dir") == 0) {
			dir = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--jwks") == 0) {
			jwks = argv[++i];
		} else {
			usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (kid == NULL || dir == NULL || kid[0] == '\0' ||
	    strchr(kid, '/') != NULL) {
		usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	EVP_PKEY *key;
	if (felix_token_keygen(&key) != 0) {
		fprintf(stderr, "lodectl: key generation failed\n");
		return LODECTL_EXIT_REFUSED;
	}
	char *jwk = felix_token_jwk(key, kid);
	int rc = LODECTL_EXIT_REFUSED;
	snprintf(path, sizeof path, "%s/%s.pem", dir, kid);
	if (jwk == NULL ||
	    felix_token_save_key(key, path, err, sizeof err) != 0) {
		fprintf(stderr, "lodectl: %s\n", jwk == NULL ? "no JWK" : err);
		goto done;
	}
	printf("private key: %s\n", path);
	snprintf(path, sizeof path, "%s/%s.jwks.json", dir, kid);
	FILE *f = fopen(path, "wx");
	if (f == NULL || fprintf(f, "{\"keys\":[%s]}\n", jwk) < 0 ||
	    fclose(f) != 0) {
		fprintf(stderr, "lodectl: cannot create %s\n", path);
		goto done;
	}
	printf("public key (JWKS): %s\n", path);
	if (jwks != NULL) {
		if (jwks_add(jwks, jwk, kid) != 0) {
			goto done;
		}
		printf("added to: %s\n", jwks);
	}
	rc = LODECTL_EXIT_OK;
done:
	free(jwk);
	EVP_PKEY_free(key);
	return rc;
}

static int token(int argc, char **argv, const char *tenant)
{
	const char *keyfile = NULL, *kid = NULL, *sub = NULL, *iss = NULL,
	           *aud = NULL;
	const char *perms[PERMS_MAX];
	size_t n = 0;
	long long ttl = 3600;
	char err[512], kidbuf[256];
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL) {
			usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
		i++;
		if (strcmp(o, "--signing-key") == 0) {
			keyfile = v;
		} else if (strcmp(o, "--tenant") == 0) {
			tenant = v;
		} else if (strcmp(o, "--perm") == 0 && n < PERMS_MAX) {
			perms[n++] = v;
		} else if (strcmp(o, "--ttl-s") == 0) {
			char *end;
			ttl = strtoll(v, &end, 10);
			if (*end != '\0' || ttl <= 0 || ttl > 31536000) {
				fprintf(stderr, "lodectl: bad --ttl-s '%s'\n",
				        v);
				return LODECTL_EXIT_USAGE;
			}
		} else if (strcmp(o, "--kid") == 0) {
			kid = v;
		} else if (strcmp(o, "--sub") == 0) {
			sub = v;
		} else if (strcmp(o, "--iss") == 0) {
			iss = v;
		} else if (strcmp(o, "--aud") == 0) {
			aud = v;
		} else {
			usage(stderr);
			return LODECTL_EXIT_USAGE;
		}
	}
	if (keyfile == NULL || tenant == NULL || n == 0) {
		usage(stderr);
		return LODECTL_EXIT_USAGE;
	}
	if (kid == NULL) {
		const char *base = strrchr(keyfile, '/');
		base = base != NULL ? base + 1 : keyfile;
		snprintf(kidbuf, sizeof kidbuf, "%s", base);
		size_t bl = strlen(kidbuf);
		if (bl > 4 && strcmp(kidbuf + bl - 4, ".pem") == 0) {
			kidbuf[bl - 4] = '\0';
		}
		kid = kidbuf;
	}
	EVP_PKEY *key = felix_token_load_key(keyfile, err, sizeof err);
	if (key == NULL) {
		fprintf(stderr, "lodectl: %s\n", err);
		return LODECTL_EXIT_USAGE;
	}
	int64_t now = (int64_t)time(NULL);
	struct felix_token_claims c = {
	    .iss = iss,
	    .aud = aud,
	    .sub = sub,
	    .tid = tenant,
	    .iat = now,
	    .exp = now + ttl,
	    .perms = perms,
	    .n_perms = n,
	};
	char *t = felix_token_mint(key, kid, &c, err, sizeof err);
	EVP_PKEY_free(key);
	if (t == NULL) {
		fprintf(stderr, "lodectl: %s\n", err);
		return LODECTL_EXIT_REFUSED;
	}
	printf("%s\n", t);
	free(t);
	return LODECTL_EXIT_OK;
}

int lodectl_felix_token_main(int argc, char **argv, const char *tenant)
{
	if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return LODECTL_EXIT_OK;
	}
	if (strcmp(argv[0], "keygen") == 0) {
		return keygen(argc, argv);
	}
	return token(argc, argv, tenant);
}
