/* Fuzz the ACL rule parser and glob matcher (node/auth/acl_rule.c,
 * acl.c). An input starting with 'G' is "PATTERN\nVALUE" for the glob
 * matcher; any other input is rule tokens separated by spaces, applied to
 * a new user whose description must parse again into the same
 * description, and whose checks run on a few commands and keys (the Flow
 * query check among them). The same tokens then go through what ACL
 * SETUSER replicates: hashed (acl_token_hashed) and merged on top of the
 * description (acl_rules_merge), they must give what the tokens as typed
 * give. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/auth/acl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok) {
		abort();
	}
}

static char desc1[ACL_DESCRIBE_MAX], desc2[ACL_DESCRIBE_MAX];
static char merged1[ACL_DESCRIBE_MAX], merged2[ACL_DESCRIBE_MAX];

#define MAX_TOKENS 64
static char hashed[MAX_TOKENS][ACL_TOKEN_MAX + 1];

/* The input's tokens as typed and hashed: merged on top of `base`, both
 * fail or both give the same rules. */
static void merge(const uint8_t *data, size_t size, const char *base)
{
	struct acl_token raw[MAX_TOKENS], hs[MAX_TOKENS];
	char err[256];
	size_t n = 0, i = 0;
	while (i < size && n < MAX_TOKENS) {
		size_t j = i;
		while (j < size && data[j] != ' ') {
			j++;
		}
		if (j > i && j - i <= ACL_TOKEN_MAX) {
			int hl = acl_token_hashed((const char *)data + i, j - i,
			                          hashed[n], sizeof hashed[n]);
			check(hl >= 0);
			raw[n].p = (const char *)data + i;
			raw[n].len = j - i;
			hs[n].p = hashed[n];
			hs[n].len = (size_t)hl;
			n++;
		}
		i = j + 1;
	}
	int a = acl_rules_merge("fuzz", 4, base, strlen(base), raw, n, merged1,
	                        sizeof merged1, err, sizeof err);
	int b = acl_rules_merge("fuzz", 4, base, strlen(base), hs, n, merged2,
	                        sizeof merged2, err, sizeof err);
	check((a < 0) == (b < 0));
	check(a < 0 || strcmp(merged1, merged2) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acl_user u, v;
	char err[256];
	if (size > 0 && data[0] == 'G') {
		const uint8_t *nl = memchr(data, '\n', size);
		size_t plen = nl != NULL ? (size_t)(nl - data) - 1 : size - 1;
		const char *val = nl != NULL ? (const char *)nl + 1 : "";
		size_t vlen = nl != NULL ? size - (size_t)(nl - data) - 1 : 0;
		(void)acl_glob_match((const char *)data + 1, plen, val, vlen);
		return 0;
	}
	check(acl_user_init(&u, "fuzz", 4, err, sizeof err) == 0);
	(void)acl_rules_apply_text(&u, (const char *)data, size, err,
	                           sizeof err);
	(void)acl_user_allows_cmd(&u, "get", 3, ACL_CAT_READ | ACL_CAT_STRING);
	(void)acl_user_allows_cmd(&u, "SET", 3, ACL_CAT_WRITE);
	(void)acl_user_allows_key(&u, (const uint8_t *)"app:1", 5,
	                          ACL_KEY_READ);
	(void)acl_user_allows_key(&u, data, size, ACL_KEY_WRITE);
	(void)acl_user_password_ok(&u, data, size);
	for (int k = 0; k < 4; k++) {
		char msg[512];
		(void)acl_check_flow_query(&u, "fuzz", k & 1 ? data : NULL,
		                           size, k & 2, k & 1, msg, sizeof msg);
	}
	if (acl_user_describe(&u, desc1, sizeof desc1) >= 0) {
		check(acl_user_init(&v, "fuzz", 4, err, sizeof err) == 0);
		check(acl_rules_apply_text(&v, desc1, strlen(desc1), err,
		                           sizeof err) == 0);
		check(acl_user_describe(&v, desc2, sizeof desc2) >= 0);
		check(strcmp(desc1, desc2) == 0);
		acl_user_free(&v);
		merge(data, size, desc1);
	}
	acl_user_free(&u);
	return 0;
}
