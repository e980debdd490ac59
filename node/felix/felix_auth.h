/* Felix authentication: which (tenant, token) pairs may open a session.
 *
 * Modes: `none` (dev mode: any token is accepted for the tenant it names)
 * and a static token file (config `felix-tokens FILE`): one `TENANT TOKEN`
 * pair per line, `#` comments, blank lines ignored; a tenant may have
 * several tokens. Without either, every auth is refused with a message
 * saying how to configure one. Tokens are never logged.
 *
 * The table is loaded once at start and owned by `struct felix_auth`. */
#ifndef LS_NODE_FELIX_AUTH_H
#define LS_NODE_FELIX_AUTH_H

#include <stdbool.h>
#include <stddef.h>

enum felix_auth_mode {
	FELIX_AUTH_REFUSE = 0, /* nothing configured */
	FELIX_AUTH_NONE,       /* dev mode */
	FELIX_AUTH_TOKENS,
};

struct felix_auth_pair {
	char *tenant; /* owned */
	char *token;  /* owned */
};

struct felix_auth {
	enum felix_auth_mode mode;
	struct felix_auth_pair *pairs; /* owned */
	size_t n;
};

/* Tokens file if `path` is not NULL, else `none` when `dev`, else refuse.
 * 0, or -1 with a message naming the file and line. */
int felix_auth_load(struct felix_auth *a, const char *path, bool dev, char *err,
                    size_t errlen);
void felix_auth_free(struct felix_auth *a);

/* 0 when the pair may connect; -1 with the message for the client (it
 * starts with "unauthorized:" and never echoes the token). */
int felix_auth_check(const struct felix_auth *a, const char *tenant,
                     const char *token, char *msg, size_t msglen);

const char *felix_auth_mode_name(enum felix_auth_mode mode);

#endif
