/* Felix permissions: `ACTION:OBJECT` strings, parsed once per session, and
 * the matcher every request is checked with.
 *
 * Objects: `tenant:*`, `ns:NS`, `stream:NS/NAME`, `cache:NS/NAME`. The
 * tenant is never part of an object: it is the token's `tid`. NS and NAME
 * are patterns matched like Casbin's keyMatch2: `*` matches any run of
 * characters (empty included) and a whole pattern `:word` matches one
 * non-empty value; every other character matches itself.
 *
 * Actions and the objects they take: `stream.publish`, `stream.subscribe`
 * (stream:), `cache.read`, `cache.write` (cache:), `ns.manage` (ns:),
 * `tenant.admin`, `tenant.observe` (tenant:*). Inheritance: `tenant.admin`
 * implies every other permission on every object; `ns.manage:ns:X`
 * implies the four data permissions on every stream and cache of X. An unknown
 * action, an unknown object or an action on the wrong kind of object is an
 * error (the token carrying it is refused rather than half-understood). */
#ifndef LS_NODE_AUTH_PERM_H
#define LS_NODE_AUTH_PERM_H

#include <stdbool.h>
#include <stddef.h>

#define AUTH_PERMS_MAX 256    /* permissions in one token */
#define AUTH_PERM_LEN_MAX 512 /* bytes of one permission string */

enum auth_action {
	AUTH_STREAM_PUBLISH = 0,
	AUTH_STREAM_SUBSCRIBE,
	AUTH_CACHE_READ,
	AUTH_CACHE_WRITE,
	AUTH_NS_MANAGE,
	AUTH_TENANT_ADMIN,
	AUTH_TENANT_OBSERVE,
};

struct auth_grant {
	enum auth_action action;
	char *ns;   /* owned; NULL for tenant:* */
	char *name; /* owned; NULL for ns: and tenant:* */
};

struct auth_perms {
	struct auth_grant *g; /* owned */
	size_t n;
};

void auth_perms_init(struct auth_perms *p);
void auth_perms_free(struct auth_perms *p);

/* Parses one `ACTION:OBJECT` string and appends it. 0, or -1 with a
 * message (at most AUTH_PERMS_MAX permissions). */
int auth_perms_add(struct auth_perms *p, const char *perm, char *err,
                   size_t errlen);

/* Whether `p` allows `action` on namespace `ns` and stream or cache
 * `name` (`name` is ignored for ns.manage, both for the tenant
 * actions). */
bool auth_perms_allow(const struct auth_perms *p, enum auth_action action,
                      const char *ns, const char *name);

/* Whether `p` allows `action` on at least one object (requests that name
 * no stream, such as producer_init). */
bool auth_perms_allow_any(const struct auth_perms *p, enum auth_action action);

/* keyMatch2-style match of one value against one pattern, as above. */
bool auth_pattern_match(const char *pattern, const char *value);

/* "stream.publish", ... */
const char *auth_action_name(enum auth_action action);

#endif
