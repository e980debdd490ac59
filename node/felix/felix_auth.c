/* Felix token checks; see felix_auth.h. */
#include "node/felix/felix_auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 4096

void felix_auth_free(struct felix_auth *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->pairs[i].tenant);
		/* Do not leave tokens behind in freed memory. */
		if (a->pairs[i].token != NULL) {
			memset(a->pairs[i].token, 0, strlen(a->pairs[i].token));
		}
		free(a->pairs[i].token);
	}
	free(a->pairs);
	a->pairs = NULL;
	a->n = 0;
	a->mode = FELIX_AUTH_REFUSE;
}

int felix_auth_load(struct felix_auth *a, const char *path, bool dev, char *err,
                    size_t errlen)
{
	memset(a, 0, sizeof *a);
	if (path == NULL) {
		a->mode = dev ? FELIX_AUTH_NONE : FELIX_AUTH_REFUSE;
		return 0;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read felix-tokens '%s': %s", path,
		         strerror(errno));
		return -1;
	}
	char line[TOKEN_MAX + 512];
	unsigned lineno = 0;
	a->mode = FELIX_AUTH_TOKENS;
	while (fgets(line, sizeof line, f) != NULL) {
		char *save = NULL;
		lineno++;
		char *hash = strchr(line, '#');
		if (hash != NULL) {
			*hash = '\0';
		}
		char *tenant = strtok_r(line, " \t\r\n", &save);
		if (tenant == NULL) {
			continue;
		}
		char *token = strtok_r(NULL, " \t\r\n", &save);
		char *extra = strtok_r(NULL, " \t\r\n", &save);
		if (token == NULL || extra != NULL) {
			snprintf(err, errlen,
			         "felix-tokens %s:%u: expected 'TENANT TOKEN'",
			         path, lineno);
			goto err;
		}
		struct felix_auth_pair *np =
		    realloc(a->pairs, (a->n + 1) * sizeof *np);
		if (np == NULL) {
			snprintf(err, errlen, "out of memory");
			goto err;
		}
		a->pairs = np;
		a->pairs[a->n].tenant = strdup(tenant);
		a->pairs[a->n].token = strdup(token);
		a->n++;
		if (a->pairs[a->n - 1].tenant == NULL ||
		    a->pairs[a->n - 1].token == NULL) {
			snprintf(err, errlen, "out of memory");
			goto err;
		}
	}
	memset(line, 0, sizeof line);
	fclose(f);
	return 0;
err:
	memset(line, 0, sizeof line);
	fclose(f);
	felix_auth_free(a);
	return -1;
}

/* Compares in time independent of where the strings differ. */
static bool same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = (unsigned char)(la != lb);
	for (size_t i = 0; i < la; i++) {
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	}
	return d == 0;
}

int felix_auth_check(const struct felix_auth *a, const char *tenant,
                     const char *token, char *msg, size_t msglen)
{
	switch (a->mode) {
	case FELIX_AUTH_NONE:
		return 0;
	case FELIX_AUTH_REFUSE:
		snprintf(msg, msglen,
		         "unauthorized: this node accepts no tokens (configure "
		         "felix-tokens, or run with --dev)");
		return -1;
	case FELIX_AUTH_TOKENS:
		break;
	}
	bool ok = false;
	for (size_t i = 0; i < a->n; i++) {
		if (strcmp(a->pairs[i].tenant, tenant) == 0 &&
		    same(a->pairs[i].token, token)) {
			ok = true;
		}
	}
	if (!ok) {
		snprintf(msg, msglen,
		         "unauthorized: invalid token for tenant '%.200s'",
		         tenant);
		return -1;
	}
	return 0;
}

const char *felix_auth_mode_name(enum felix_auth_mode mode)
{
	switch (mode) {
	case FELIX_AUTH_NONE:
		return "none (dev)";
	case FELIX_AUTH_TOKENS:
		return "token file";
	default:
		return "refuse (no felix-tokens)";
	}
}
