/* The auth room's public face: token verification and permissions, shared
 * by the protocol listeners (Felix today).
 *
 * Keys: a directory holding one JWKS document per tenant,
 * `DIR/<tenant>.json` (jwks.h), loaded whole by auth_keydir_load (again
 * on SIGHUP by its owner, who swaps sets only when the new one loads).
 * Tenant ids are 1 to 255 bytes of `[A-Za-z0-9._-]` and neither `.` nor
 * `..`, so a tenant named on the wire selects a loaded set and never
 * becomes a path.
 *
 * auth_jwt_verify is the whole check of one presented token (jwt.h):
 * bounded parse, EdDSA only, the tenant's key by `kid`, the signature,
 * then issuer, audience, `tid` = the tenant, `exp`/`nbf`/`iat` with the
 * allowed skew; on success the token's permissions (perm.h). Messages
 * are for the client: they name the reason, never the token. */
#ifndef LS_NODE_AUTH_AUTH_H
#define LS_NODE_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/auth/jwks.h"
#include "node/auth/jwt.h"
#include "node/auth/acl.h"
#include "node/auth/perm.h"

#define AUTH_DEFAULT_ISSUER "felix-auth"
#define AUTH_DEFAULT_AUDIENCE "felix-broker"
#define AUTH_DEFAULT_SKEW_S 60

struct auth_tenant_keys {
	char *tenant; /* owned */
	struct jwks keys;
};

struct auth_keydir {
	struct auth_tenant_keys *t; /* owned */
	size_t n;
};

struct auth_jwt_config {
	const char *issuer;   /* NULL: AUTH_DEFAULT_ISSUER */
	const char *audience; /* NULL: AUTH_DEFAULT_AUDIENCE */
	int64_t skew_s;
};

bool auth_tenant_id_ok(const char *tenant);

/* Loads every `DIR/<tenant>.json` (other files are ignored). 0, or -1 with a
 * message naming the file: a bad document or file name refuses the whole
 * directory. `kd` is empty on error. */
int auth_keydir_load(struct auth_keydir *kd, const char *dir, char *err,
                     size_t errlen);
void auth_keydir_free(struct auth_keydir *kd);
/* The tenant's keys, or NULL. */
const struct jwks *auth_keydir_find(const struct auth_keydir *kd,
                                    const char *tenant);
/* Keys across every tenant, for the log. */
size_t auth_keydir_keys(const struct auth_keydir *kd);

/* 0 with the token's permissions in `perms` (initialized here; the
 * caller frees them) and its expiry in `*exp`; -1 with a message. */
int auth_jwt_verify(const struct auth_keydir *kd,
                    const struct auth_jwt_config *cfg, const char *tenant,
                    const char *token, int64_t now, struct auth_perms *perms,
                    int64_t *exp, char *err, size_t errlen);

#endif
