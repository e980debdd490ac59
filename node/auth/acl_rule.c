/* ACL rules: parsing one token into a change of a user, and a user's
 * description; see acl.h. */
#include "node/auth/acl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

static const struct {
	const char *name;
	uint32_t cat;
} cats[] = {
    {"read", ACL_CAT_READ},
    {"write", ACL_CAT_WRITE},
    {"keyspace", ACL_CAT_KEYSPACE},
    {"string", ACL_CAT_STRING},
    {"hash", ACL_CAT_HASH},
    {"list", ACL_CAT_LIST},
    {"set", ACL_CAT_SET},
    {"sortedset", ACL_CAT_SORTEDSET},
    {"flow", ACL_CAT_FLOW},
    {"admin", ACL_CAT_ADMIN},
    {"connection", ACL_CAT_CONNECTION},
    {"fast", ACL_CAT_FAST},
    {"slow", ACL_CAT_SLOW},
    {"dangerous", ACL_CAT_DANGEROUS},
    {"all", ACL_CAT_ALL},
};

#define N_CATS (sizeof cats / sizeof cats[0])

uint32_t acl_cat_by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < N_CATS; i++) {
		if (strlen(cats[i].name) == len &&
		    strncasecmp(cats[i].name, name, len) == 0) {
			return cats[i].cat;
		}
	}
	return 0;
}

void acl_cat_names(uint32_t c, char *buf, size_t cap)
{
	size_t n = 0;
	if (cap == 0) {
		return;
	}
	buf[0] = '\0';
	for (size_t i = 0; i + 1 < N_CATS; i++) {
		if ((c & cats[i].cat) != 0) {
			int w = snprintf(buf + n, cap - n, "%s%s",
			                 n > 0 ? " " : "", cats[i].name);
			if (w < 0 || (size_t)w >= cap - n) {
				return;
			}
			n += (size_t)w;
		}
	}
}

static bool printable(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f) {
			return false;
		}
	}
	return true;
}

int acl_user_init(struct acl_user *u, const char *name, size_t len, char *err,
                  size_t errlen)
{
	memset(u, 0, sizeof *u);
	if (len == 0 || len > ACL_NAME_MAX || !printable(name, len)) {
		snprintf(err, errlen,
		         "ERR ACL user names are 1 to %d printable characters "
		         "without spaces",
		         ACL_NAME_MAX);
		return -1;
	}
	memcpy(u->name, name, len);
	u->name[len] = '\0';
	return 0;
}

static void free_pats(struct acl_user *u)
{
	for (size_t i = 0; i < u->n_pat; i++) {
		free(u->pat[i].glob);
	}
	free(u->pat);
	u->pat = NULL;
	u->n_pat = 0;
}

static void free_cmds(struct acl_user *u)
{
	for (size_t i = 0; i < u->n_cmd; i++) {
		free(u->cmd[i].cmd);
	}
	free(u->cmd);
	u->cmd = NULL;
	u->n_cmd = 0;
}

void acl_user_free(struct acl_user *u)
{
	free_pats(u);
	free_cmds(u);
	memset(u->pass, 0, sizeof u->pass);
	u->n_pass = 0;
}

int acl_user_copy(struct acl_user *dst, const struct acl_user *src)
{
	*dst = *src;
	dst->pat = NULL;
	dst->n_pat = 0;
	dst->cmd = NULL;
	dst->n_cmd = 0;
	if (src->n_pat > 0) {
		dst->pat = calloc(src->n_pat, sizeof *dst->pat);
		if (dst->pat == NULL) {
			goto err_oom;
		}
		for (size_t i = 0; i < src->n_pat; i++) {
			dst->pat[i].flags = src->pat[i].flags;
			dst->pat[i].glob = strdup(src->pat[i].glob);
			dst->n_pat++;
			if (dst->pat[i].glob == NULL) {
				goto err_oom;
			}
		}
	}
	if (src->n_cmd > 0) {
		dst->cmd = calloc(src->n_cmd, sizeof *dst->cmd);
		if (dst->cmd == NULL) {
			goto err_oom;
		}
		for (size_t i = 0; i < src->n_cmd; i++) {
			dst->cmd[i] = src->cmd[i];
			dst->cmd[i].cmd = NULL;
			dst->n_cmd++;
			if (src->cmd[i].cmd != NULL) {
				dst->cmd[i].cmd = strdup(src->cmd[i].cmd);
				if (dst->cmd[i].cmd == NULL) {
					goto err_oom;
				}
			}
		}
	}
	return 0;
err_oom:
	acl_user_free(dst);
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

static int parse_hash(const char *s, size_t len, uint8_t out[32])
{
	if (len != 64) {
		return -1;
	}
	for (size_t i = 0; i < 32; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			return -1;
		}
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int add_hash(struct acl_user *u, const uint8_t h[32], char *err,
                    size_t errlen)
{
	for (size_t i = 0; i < u->n_pass; i++) {
		if (memcmp(u->pass[i], h, 32) == 0) {
			u->nopass = false;
			return 0;
		}
	}
	if (u->n_pass >= ACL_PASSWORDS_MAX) {
		snprintf(err, errlen, "ERR ACL user has too many passwords");
		return -1;
	}
	memcpy(u->pass[u->n_pass++], h, 32);
	u->nopass = false;
	return 0;
}

static int del_hash(struct acl_user *u, const uint8_t h[32], char *err,
                    size_t errlen)
{
	for (size_t i = 0; i < u->n_pass; i++) {
		if (memcmp(u->pass[i], h, 32) == 0) {
			memmove(u->pass[i], u->pass[i + 1],
			        (u->n_pass - i - 1) * 32);
			u->n_pass--;
			return 0;
		}
	}
	snprintf(err, errlen,
	         "ERR The password you are trying to remove from the user "
	         "does not exist");
	return -1;
}

static int add_pattern(struct acl_user *u, const char *g, size_t len,
                       uint8_t flags, char *err, size_t errlen)
{
	if (len == 0 || !printable(g, len)) {
		snprintf(err, errlen,
		         "ERR ACL key patterns are printable characters "
		         "without spaces");
		return -1;
	}
	for (size_t i = 0; i < u->n_pat; i++) {
		if (strlen(u->pat[i].glob) == len &&
		    memcmp(u->pat[i].glob, g, len) == 0) {
			u->pat[i].flags |= flags;
			return 0;
		}
	}
	if (u->n_pat >= ACL_PATTERNS_MAX) {
		snprintf(err, errlen, "ERR ACL user has too many key patterns");
		return -1;
	}
	struct acl_pattern *p = realloc(u->pat, (u->n_pat + 1) * sizeof *p);
	if (p == NULL) {
		goto err_oom;
	}
	u->pat = p;
	p[u->n_pat].glob = strndup(g, len);
	if (p[u->n_pat].glob == NULL) {
		goto err_oom;
	}
	p[u->n_pat].flags = flags;
	u->n_pat++;
	return 0;
err_oom:
	snprintf(err, errlen, "ERR out of memory");
	return -1;
}

static int add_cmd_rule(struct acl_user *u, bool allow, uint32_t c,
                        const char *cmd, size_t len, char *err, size_t errlen)
{
	if (c == ACL_CAT_ALL) {
		/* Supersedes every earlier rule. */
		free_cmds(u);
	} else if (u->n_cmd >= ACL_CMD_RULES_MAX) {
		snprintf(err, errlen,
		         "ERR ACL user has too many command rules");
		return -1;
	}
	struct acl_cmd_rule *r = realloc(u->cmd, (u->n_cmd + 1) * sizeof *r);
	if (r == NULL) {
		goto err_oom;
	}
	u->cmd = r;
	r[u->n_cmd].allow = allow;
	r[u->n_cmd].cats = c;
	r[u->n_cmd].cmd = NULL;
	if (cmd != NULL) {
		char *s = strndup(cmd, len);
		if (s == NULL) {
			goto err_oom;
		}
		for (size_t i = 0; i < len; i++) {
			s[i] = (char)tolower((unsigned char)s[i]);
		}
		r[u->n_cmd].cmd = s;
	}
	u->n_cmd++;
	return 0;
err_oom:
	snprintf(err, errlen, "ERR out of memory");
	return -1;
}

static bool word(const char *tok, size_t len, const char *w)
{
	return strlen(w) == len && strncasecmp(tok, w, len) == 0;
}

/* Applies the token to `u`, which the caller throws away on error. */
static int apply(struct acl_user *u, const char *tok, size_t len, char *err,
                 size_t errlen)
{
	uint8_t h[32];
	if (word(tok, len, "on")) {
		u->on = true;
	} else if (word(tok, len, "off")) {
		u->on = false;
	} else if (word(tok, len, "nopass")) {
		u->nopass = true;
		memset(u->pass, 0, sizeof u->pass);
		u->n_pass = 0;
	} else if (word(tok, len, "resetpass")) {
		u->nopass = false;
		memset(u->pass, 0, sizeof u->pass);
		u->n_pass = 0;
	} else if (word(tok, len, "allkeys")) {
		return add_pattern(u, "*", 1, ACL_KEY_READ | ACL_KEY_WRITE, err,
		                   errlen);
	} else if (word(tok, len, "resetkeys")) {
		free_pats(u);
	} else if (word(tok, len, "allcommands")) {
		return add_cmd_rule(u, true, ACL_CAT_ALL, NULL, 0, err, errlen);
	} else if (word(tok, len, "nocommands")) {
		return add_cmd_rule(u, false, ACL_CAT_ALL, NULL, 0, err,
		                    errlen);
	} else if (word(tok, len, "reset")) {
		u->on = false;
		u->nopass = false;
		memset(u->pass, 0, sizeof u->pass);
		u->n_pass = 0;
		free_pats(u);
		free_cmds(u);
	} else if (len >= 1 && tok[0] == '>') {
		SHA256((const unsigned char *)tok + 1, len - 1, h);
		return add_hash(u, h, err, errlen);
	} else if (len >= 1 && tok[0] == '<') {
		SHA256((const unsigned char *)tok + 1, len - 1, h);
		return del_hash(u, h, err, errlen);
	} else if (len >= 1 && (tok[0] == '#' || tok[0] == '!')) {
		if (parse_hash(tok + 1, len - 1, h) != 0) {
			snprintf(err, errlen,
			         "ERR The password hash must be exactly 64 "
			         "hexadecimal characters");
			return -1;
		}
		return tok[0] == '#' ? add_hash(u, h, err, errlen)
		                     : del_hash(u, h, err, errlen);
	} else if (len >= 1 && tok[0] == '~') {
		return add_pattern(u, tok + 1, len - 1,
		                   ACL_KEY_READ | ACL_KEY_WRITE, err, errlen);
	} else if (len >= 1 && tok[0] == '%') {
		uint8_t flags = 0;
		size_t i = 1;
		for (; i < len && tok[i] != '~'; i++) {
			char c = (char)toupper((unsigned char)tok[i]);
			if (c == 'R') {
				flags |= ACL_KEY_READ;
			} else if (c == 'W') {
				flags |= ACL_KEY_WRITE;
			} else {
				flags = 0;
				break;
			}
		}
		if (flags == 0 || i >= len || tok[i] != '~') {
			snprintf(err, errlen,
			         "ERR Syntax error in ACL key permission: "
			         "expected %%R~, %%W~ or %%RW~");
			return -1;
		}
		return add_pattern(u, tok + i + 1, len - i - 1, flags, err,
		                   errlen);
	} else if (len >= 2 && (tok[0] == '+' || tok[0] == '-') &&
	           tok[1] == '@') {
		uint32_t c = acl_cat_by_name(tok + 2, len - 2);
		if (c == 0) {
			snprintf(err, errlen,
			         "ERR Error in ACL SETUSER modifier '%.*s': "
			         "Unknown command category",
			         (int)(len < 64 ? len : 64), tok);
			return -1;
		}
		return add_cmd_rule(u, tok[0] == '+', c, NULL, 0, err, errlen);
	} else if (len >= 2 && (tok[0] == '+' || tok[0] == '-')) {
		if (len - 1 > 64 || !printable(tok + 1, len - 1) ||
		    memchr(tok + 1, '|', len - 1) != NULL) {
			snprintf(
			    err, errlen,
			    "ERR Error in ACL SETUSER modifier: bad command "
			    "name");
			return -1;
		}
		return add_cmd_rule(u, tok[0] == '+', 0, tok + 1, len - 1, err,
		                    errlen);
	} else {
		/* Never echo the token: it may be a password missing its
		 * '>'. */
		snprintf(err, errlen,
		         "ERR Error in ACL SETUSER modifier: "
		         "Syntax error");
		return -1;
	}
	return 0;
}

int acl_rule_apply(struct acl_user *u, const char *tok, size_t len, char *err,
                   size_t errlen)
{
	struct acl_user tmp;
	if (len > ACL_TOKEN_MAX) {
		snprintf(err, errlen, "ERR ACL rule longer than %d bytes",
		         ACL_TOKEN_MAX);
		return -1;
	}
	if (acl_user_copy(&tmp, u) != 0) {
		snprintf(err, errlen, "ERR out of memory");
		return -1;
	}
	if (apply(&tmp, tok, len, err, errlen) != 0) {
		acl_user_free(&tmp);
		return -1;
	}
	acl_user_free(u);
	*u = tmp;
	return 0;
}

int acl_rules_apply_text(struct acl_user *u, const char *text, size_t len,
                         char *err, size_t errlen)
{
	size_t i = 0;
	while (i < len) {
		size_t j;
		while (i < len && text[i] == ' ') {
			i++;
		}
		for (j = i; j < len && text[j] != ' '; j++) {
		}
		if (j > i &&
		    acl_rule_apply(u, text + i, j - i, err, errlen) != 0) {
			return -1;
		}
		i = j;
	}
	return 0;
}

struct out {
	char *p;
	size_t cap, n;
	bool full;
};

static void put(struct out *o, const char *s)
{
	size_t l = strlen(s);
	size_t sep = o->n > 0 ? 1 : 0;
	if (o->full || o->n + sep + l + 1 > o->cap) {
		o->full = true;
		return;
	}
	if (sep) {
		o->p[o->n++] = ' ';
	}
	memcpy(o->p + o->n, s, l);
	o->n += l;
	o->p[o->n] = '\0';
}

int acl_user_describe(const struct acl_user *u, char *buf, size_t cap)
{
	struct out o = {buf, cap, 0, cap == 0};
	char tmp[ACL_TOKEN_MAX + 8];
	if (cap > 0) {
		buf[0] = '\0';
	}
	put(&o, u->on ? "on" : "off");
	if (u->nopass) {
		put(&o, "nopass");
	}
	for (size_t i = 0; i < u->n_pass; i++) {
		tmp[0] = '#';
		for (size_t k = 0; k < 32; k++) {
			snprintf(tmp + 1 + 2 * k, 3, "%02x", u->pass[i][k]);
		}
		put(&o, tmp);
	}
	for (size_t i = 0; i < u->n_pat; i++) {
		uint8_t f = u->pat[i].flags;
		snprintf(tmp, sizeof tmp, "%s~%s",
		         f == (ACL_KEY_READ | ACL_KEY_WRITE) ? ""
		         : f == ACL_KEY_READ                 ? "%R"
		                                             : "%W",
		         u->pat[i].glob);
		put(&o, tmp);
	}
	if (u->n_cmd == 0) {
		put(&o, "-@all");
	}
	for (size_t i = 0; i < u->n_cmd; i++) {
		const struct acl_cmd_rule *r = &u->cmd[i];
		const char *cat = NULL;
		if (r->cmd != NULL) {
			snprintf(tmp, sizeof tmp, "%c%s", r->allow ? '+' : '-',
			         r->cmd);
			put(&o, tmp);
			continue;
		}
		for (size_t k = 0; k < N_CATS; k++) {
			if (cats[k].cat == r->cats) {
				cat = cats[k].name;
			}
		}
		snprintf(tmp, sizeof tmp, "%c@%s", r->allow ? '+' : '-',
		         cat != NULL ? cat : "?");
		put(&o, tmp);
	}
	return o.full ? -1 : (int)o.n;
}

int acl_rules_merge(const char *name, size_t nlen, const char *rules,
                    size_t rlen, const struct acl_token *tok, size_t n,
                    char *out, size_t cap, char *err, size_t errlen)
{
	struct acl_user u;
	int rv = -1;

	if (n > ACL_SETUSER_TOKENS_MAX) {
		snprintf(err, errlen,
		         "ERR at most %d ACL rules in one ACL SETUSER",
		         ACL_SETUSER_TOKENS_MAX);
		return -1;
	}
	if (acl_user_init(&u, name, nlen, err, errlen) != 0) {
		return -1;
	}
	if (rules != NULL &&
	    acl_rules_apply_text(&u, rules, rlen, err, errlen) != 0) {
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (acl_rule_apply(&u, tok[i].p, tok[i].len, err, errlen) !=
		    0) {
			goto out;
		}
	}
	rv = acl_user_describe(&u, out, cap);
	if (rv < 0) {
		snprintf(err, errlen, "ERR the ACL user's rules are too long");
	}
out:
	acl_user_free(&u);
	return rv;
}

int acl_token_hashed(const char *tok, size_t len, char *out, size_t cap)
{
	uint8_t h[32];
	if (len >= 1 && (tok[0] == '>' || tok[0] == '<')) {
		if (cap < 66) {
			return -1;
		}
		SHA256((const unsigned char *)tok + 1, len - 1, h);
		out[0] = tok[0] == '>' ? '#' : '!';
		for (size_t k = 0; k < 32; k++) {
			snprintf(out + 1 + 2 * k, 3, "%02x", h[k]);
		}
		OPENSSL_cleanse(h, sizeof h);
		return 65;
	}
	if (len + 1 > cap) {
		return -1;
	}
	memcpy(out, tok, len);
	out[len] = '\0';
	return (int)len;
}
