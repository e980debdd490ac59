/* Felix permissions: parsing and matching; see perm.h. */
#include "node/auth/perm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	enum auth_action action;
	const char *object; /* the object kind it takes */
} actions[] = {
    {"stream.publish", AUTH_STREAM_PUBLISH, "stream"},
    {"stream.subscribe", AUTH_STREAM_SUBSCRIBE, "stream"},
    {"cache.read", AUTH_CACHE_READ, "cache"},
    {"cache.write", AUTH_CACHE_WRITE, "cache"},
    {"ns.manage", AUTH_NS_MANAGE, "ns"},
    {"tenant.admin", AUTH_TENANT_ADMIN, "tenant"},
    {"tenant.observe", AUTH_TENANT_OBSERVE, "tenant"},
};

#define N_ACTIONS (sizeof actions / sizeof actions[0])

const char *auth_action_name(enum auth_action action)
{
	for (size_t i = 0; i < N_ACTIONS; i++) {
		if (actions[i].action == action) {
			return actions[i].name;
		}
	}
	return "?";
}

void auth_perms_init(struct auth_perms *p)
{
	p->g = NULL;
	p->n = 0;
}

void auth_perms_free(struct auth_perms *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->g[i].ns);
		free(p->g[i].name);
	}
	free(p->g);
	auth_perms_init(p);
}

/* A pattern is non-empty printable ASCII without '/'. */
static bool pattern_ok(const char *s, size_t len)
{
	if (len == 0) {
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '/') {
			return false;
		}
	}
	return true;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

int auth_perms_add(struct auth_perms *p, const char *perm, char *err,
                   size_t errlen)
{
	size_t len = strlen(perm);
	struct auth_grant g;
	memset(&g, 0, sizeof g);
	if (p->n >= AUTH_PERMS_MAX) {
		snprintf(err, errlen, "more than %d permissions",
		         AUTH_PERMS_MAX);
		return -1;
	}
	if (len > AUTH_PERM_LEN_MAX) {
		snprintf(err, errlen, "a permission is longer than %d bytes",
		         AUTH_PERM_LEN_MAX);
		return -1;
	}
	const char *colon = strchr(perm, ':');
	if (colon == NULL) {
		snprintf(err, errlen,
		         "permission '%.100s' is not ACTION:OBJECT", perm);
		return -1;
	}
	size_t alen = (size_t)(colon - perm);
	const char *kind = NULL;
	for (size_t i = 0; i < N_ACTIONS; i++) {
		if (strlen(actions[i].name) == alen &&
		    memcmp(actions[i].name, perm, alen) == 0) {
			g.action = actions[i].action;
			kind = actions[i].object;
			break;
		}
	}
	if (kind == NULL) {
		snprintf(err, errlen, "permission '%.100s': unknown action",
		         perm);
		return -1;
	}
	const char *obj = colon + 1;
	size_t klen = strlen(kind);
	if (strncmp(obj, kind, klen) != 0 || obj[klen] != ':') {
		snprintf(err, errlen,
		         "permission '%.100s': %s takes a %s: object", perm,
		         auth_action_name(g.action), kind);
		return -1;
	}
	const char *rest = obj + klen + 1;
	if (strcmp(kind, "tenant") == 0) {
		if (strcmp(rest, "*") != 0) {
			snprintf(err, errlen,
			         "permission '%.100s': the tenant object is "
			         "tenant:*",
			         perm);
			return -1;
		}
	} else if (strcmp(kind, "ns") == 0) {
		if (!pattern_ok(rest, strlen(rest))) {
			goto err_object;
		}
		g.ns = dup_n(rest, strlen(rest));
		if (g.ns == NULL) {
			goto err_oom;
		}
	} else {
		const char *slash = strchr(rest, '/');
		if (slash == NULL ||
		    !pattern_ok(rest, (size_t)(slash - rest)) ||
		    !pattern_ok(slash + 1, strlen(slash + 1))) {
			goto err_object;
		}
		g.ns = dup_n(rest, (size_t)(slash - rest));
		g.name = dup_n(slash + 1, strlen(slash + 1));
		if (g.ns == NULL || g.name == NULL) {
			goto err_oom;
		}
	}
	struct auth_grant *ng = realloc(p->g, (p->n + 1) * sizeof *ng);
	if (ng == NULL) {
		goto err_oom;
	}
	p->g = ng;
	p->g[p->n++] = g;
	return 0;
err_object:
	snprintf(err, errlen,
	         "permission '%.100s': the object must be %s:%s with "
	         "non-empty patterns",
	         perm, kind, strcmp(kind, "ns") == 0 ? "NS" : "NS/NAME");
	return -1;
err_oom:
	free(g.ns);
	free(g.name);
	snprintf(err, errlen, "out of memory");
	return -1;
}

bool auth_pattern_match(const char *pat, const char *s)
{
	if (pat[0] == ':') {
		/* One named segment: any non-empty value without '/'. */
		return s[0] != '\0' && strchr(s, '/') == NULL;
	}
	/* Glob with '*' only, iterative with one backtrack point. */
	const char *star = NULL, *mark = NULL;
	while (*s != '\0') {
		if (*pat == '*') {
			star = pat++;
			mark = s;
		} else if (*pat == *s) {
			pat++;
			s++;
		} else if (star != NULL) {
			pat = star + 1;
			s = ++mark;
		} else {
			return false;
		}
	}
	while (*pat == '*') {
		pat++;
	}
	return *pat == '\0';
}

static bool is_data(enum auth_action a)
{
	return a == AUTH_STREAM_PUBLISH || a == AUTH_STREAM_SUBSCRIBE ||
	       a == AUTH_CACHE_READ || a == AUTH_CACHE_WRITE;
}

static bool grant_allows(const struct auth_grant *g, enum auth_action a,
                         const char *ns, const char *name)
{
	if (g->action == AUTH_TENANT_ADMIN) {
		return true;
	}
	if (g->action == AUTH_NS_MANAGE) {
		return (a == AUTH_NS_MANAGE || is_data(a)) && ns != NULL &&
		       auth_pattern_match(g->ns, ns);
	}
	if (g->action != a) {
		return false;
	}
	if (a == AUTH_TENANT_OBSERVE) {
		return true;
	}
	return ns != NULL && name != NULL && auth_pattern_match(g->ns, ns) &&
	       auth_pattern_match(g->name, name);
}

bool auth_perms_allow(const struct auth_perms *p, enum auth_action action,
                      const char *ns, const char *name)
{
	for (size_t i = 0; i < p->n; i++) {
		if (grant_allows(&p->g[i], action, ns, name)) {
			return true;
		}
	}
	return false;
}

bool auth_perms_allow_any(const struct auth_perms *p, enum auth_action action)
{
	for (size_t i = 0; i < p->n; i++) {
		enum auth_action g = p->g[i].action;
		if (g == action || g == AUTH_TENANT_ADMIN ||
		    (g == AUTH_NS_MANAGE && is_data(action))) {
			return true;
		}
	}
	return false;
}
