/* ACL checks and the table of users; see acl.h. */
#include "node/auth/acl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

/* One `[...]` class at pat[*i] (just after '['), against c; *i ends on
 * the closing ']' (or the pattern's end). */
static bool class_match(const char *pat, size_t plen, size_t *i,
                        unsigned char c)
{
	bool neg = false, hit = false;
	size_t k = *i;
	if (k < plen && pat[k] == '^') {
		neg = true;
		k++;
	}
	for (; k < plen && pat[k] != ']'; k++) {
		if (pat[k] == '\\' && k + 1 < plen) {
			k++;
			hit |= (unsigned char)pat[k] == c;
		} else if (k + 2 < plen && pat[k + 1] == '-' &&
		           pat[k + 2] != ']') {
			unsigned char lo = (unsigned char)pat[k];
			unsigned char hi = (unsigned char)pat[k + 2];
			if (lo > hi) {
				unsigned char t = lo;
				lo = hi;
				hi = t;
			}
			hit |= c >= lo && c <= hi;
			k += 2;
		} else {
			hit |= (unsigned char)pat[k] == c;
		}
	}
	*i = k;
	return neg ? !hit : hit;
}

/* Iterative glob with one backtrack point (the last '*'): linear in the
 * pattern for each position of the value, so bounded by plen * slen. */
bool acl_glob_match(const char *pat, size_t plen, const char *s, size_t slen)
{
	size_t p = 0, i = 0, star_p = (size_t)-1, star_i = 0;
	while (i < slen) {
		bool adv = false;
		if (p < plen) {
			char pc = pat[p];
			if (pc == '*') {
				while (p < plen && pat[p] == '*') {
					p++;
				}
				if (p == plen) {
					return true;
				}
				star_p = p;
				star_i = i;
				continue;
			}
			if (pc == '?') {
				adv = true;
				p++;
			} else if (pc == '[') {
				size_t k = p + 1;
				if (class_match(pat, plen, &k,
				                (unsigned char)s[i])) {
					adv = true;
					p = k < plen ? k + 1 : k;
				}
			} else if (pc == '\\' && p + 1 < plen) {
				if (pat[p + 1] == s[i]) {
					adv = true;
					p += 2;
				}
			} else if (pc == s[i]) {
				adv = true;
				p++;
			}
		}
		if (adv) {
			i++;
			continue;
		}
		if (star_p == (size_t)-1) {
			return false;
		}
		p = star_p;
		i = ++star_i;
	}
	while (p < plen && pat[p] == '*') {
		p++;
	}
	return p == plen;
}

bool acl_user_allows_cmd(const struct acl_user *u, const char *cmd, size_t len,
                         uint32_t cats)
{
	bool ok = false;
	for (size_t i = 0; i < u->n_cmd; i++) {
		const struct acl_cmd_rule *r = &u->cmd[i];
		if (r->cmd != NULL) {
			if (strlen(r->cmd) == len &&
			    strncasecmp(r->cmd, cmd, len) == 0) {
				ok = r->allow;
			}
		} else if ((r->cats & cats) != 0 || r->cats == ACL_CAT_ALL) {
			ok = r->allow;
		}
	}
	return ok;
}

bool acl_user_allows_key(const struct acl_user *u, const uint8_t *key,
                         size_t len, uint8_t need)
{
	uint8_t have = 0;
	for (size_t i = 0; i < u->n_pat && (have & need) != need; i++) {
		const struct acl_pattern *p = &u->pat[i];
		if ((p->flags & need) != 0 &&
		    acl_glob_match(p->glob, strlen(p->glob), (const char *)key,
		                   len)) {
			have |= p->flags;
		}
	}
	return (have & need) == need;
}

bool acl_user_password_ok(const struct acl_user *u, const uint8_t *password,
                          size_t len)
{
	uint8_t h[32];
	bool ok = false;
	if (!u->on) {
		return false;
	}
	if (u->nopass) {
		return true;
	}
	SHA256(password, len, h);
	for (size_t i = 0; i < u->n_pass; i++) {
		ok |= CRYPTO_memcmp(h, u->pass[i], 32) == 0;
	}
	OPENSSL_cleanse(h, sizeof h);
	return ok;
}

bool acl_user_has_password(const struct acl_user *u)
{
	return u->on && !u->nopass && u->n_pass > 0;
}

void acl_table_init(struct acl_table *t)
{
	t->u = NULL;
	t->n = 0;
}

void acl_table_free(struct acl_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		acl_user_free(t->u[i]);
		free(t->u[i]);
	}
	free(t->u);
	acl_table_init(t);
}

static int cmp_name(const char *a, const char *b, size_t blen)
{
	size_t alen = strlen(a);
	int c = memcmp(a, b, alen < blen ? alen : blen);
	if (c != 0) {
		return c;
	}
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* Index of the first user not below `name`. */
static size_t lower(const struct acl_table *t, const char *name, size_t len)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_name(t->u[mid]->name, name, len) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

const struct acl_user *acl_table_find(const struct acl_table *t,
                                      const char *name, size_t len)
{
	size_t i = lower(t, name, len);
	if (i < t->n && cmp_name(t->u[i]->name, name, len) == 0) {
		return t->u[i];
	}
	return NULL;
}

int acl_table_put(struct acl_table *t, struct acl_user *u)
{
	size_t len = strlen(u->name);
	size_t i = lower(t, u->name, len);
	if (i < t->n && cmp_name(t->u[i]->name, u->name, len) == 0) {
		acl_user_free(t->u[i]);
		free(t->u[i]);
		t->u[i] = u;
		return 0;
	}
	if (t->n >= ACL_USERS_MAX) {
		goto err_free;
	}
	struct acl_user **v = realloc(t->u, (t->n + 1) * sizeof *v);
	if (v == NULL) {
		goto err_free;
	}
	t->u = v;
	memmove(v + i + 1, v + i, (t->n - i) * sizeof *v);
	v[i] = u;
	t->n++;
	return 0;
err_free:
	acl_user_free(u);
	free(u);
	return -1;
}

int acl_table_del(struct acl_table *t, const char *name, size_t len)
{
	size_t i = lower(t, name, len);
	if (i >= t->n || cmp_name(t->u[i]->name, name, len) != 0) {
		return 0;
	}
	acl_user_free(t->u[i]);
	free(t->u[i]);
	memmove(t->u + i, t->u + i + 1, (t->n - i - 1) * sizeof *t->u);
	t->n--;
	return 1;
}

bool acl_table_has_password(const struct acl_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		if (acl_user_has_password(t->u[i])) {
			return true;
		}
	}
	return false;
}

/* Printable bytes as they are, others as \xNN, cut at 128 bytes. */
static void quote(char *out, size_t cap, const uint8_t *s, size_t len)
{
	size_t n = 0;
	if (cap == 0) {
		return;
	}
	for (size_t i = 0; i < len && i < 128 && n + 5 < cap; i++) {
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\'') {
			out[n++] = (char)s[i];
		} else {
			n +=
			    (size_t)snprintf(out + n, cap - n, "\\x%02x", s[i]);
		}
	}
	out[n] = '\0';
}

void acl_noperm_cmd(char *buf, size_t cap, const char *user, const char *cmd,
                    size_t len)
{
	char q[600];
	size_t n;
	quote(q, sizeof q, (const uint8_t *)cmd, len);
	for (n = 0; q[n] != '\0'; n++) {
		q[n] = (char)tolower((unsigned char)q[n]);
	}
	snprintf(buf, cap,
	         "NOPERM User %s has no permissions to run the '%s' command",
	         user, q);
}

void acl_noperm_key(char *buf, size_t cap, const char *user, const uint8_t *key,
                    size_t len)
{
	char q[600];
	quote(q, sizeof q, key, len);
	snprintf(buf, cap,
	         "NOPERM User %s has no permissions to access the '%s' key",
	         user, q);
}

int acl_check_flow_query(const struct acl_user *u, const char *user,
                         const uint8_t *partition, size_t len, bool explain,
                         bool analyze, char *msg, size_t cap)
{
	bool run = !explain || analyze;
	if (explain && !acl_user_allows_cmd(u, ACL_CMD_FLOW_QUERY_EXPLAIN,
	                                    strlen(ACL_CMD_FLOW_QUERY_EXPLAIN),
	                                    ACL_CATS_FLOW_QUERY_EXPLAIN)) {
		acl_noperm_cmd(msg, cap, user, ACL_CMD_FLOW_QUERY_EXPLAIN,
		               strlen(ACL_CMD_FLOW_QUERY_EXPLAIN));
		return -1;
	}
	if (run && !acl_user_allows_cmd(u, ACL_CMD_FLOW_QUERY,
	                                strlen(ACL_CMD_FLOW_QUERY),
	                                ACL_CATS_FLOW_QUERY)) {
		acl_noperm_cmd(msg, cap, user, ACL_CMD_FLOW_QUERY,
		               strlen(ACL_CMD_FLOW_QUERY));
		return -1;
	}
	if (partition == NULL) {
		partition = (const uint8_t *)"*";
		len = 1;
	}
	if (!acl_user_allows_key(u, partition, len, ACL_KEY_READ)) {
		acl_noperm_key(msg, cap, user, partition, len);
		return -1;
	}
	return 0;
}
