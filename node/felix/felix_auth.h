/* Felix authentication and authorization: which (tenant, token) pairs may
 * open a session, and what each request of a session may do.
 *
 * Modes: `none` (dev mode: any token is accepted for the tenant it names),
 * a static token file (config `felix-tokens FILE`, for dev and tests: one
 * `TENANT TOKEN` pair per line, `#` comments, blank lines ignored; a
 * tenant may have several tokens), and JWT (config `felix-jwks-dir DIR`,
 * enforced with or without dev mode): EdDSA tokens verified against the
 * tenant's keys, `DIR/<tenant>.json`, reloaded on SIGHUP, carrying the
 * session's permissions (node/auth/auth.h, docs/security.md). Without any
 * of them, every auth is refused with a message saying how to configure
 * one. Tokens and keys are never logged.
 *
 * In JWT mode every request is checked against the session's grants
 * before it runs (felix_auth_request, felix_auth_publish): its action on
 * the stream or cache it names, and the token's expiry. In the other modes
 * a session has no grants (NULL) and every request of its tenant runs. */
#ifndef LS_NODE_FELIX_AUTH_H
#define LS_NODE_FELIX_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/auth/auth.h"
#include "node/log.h"
#include "wire/buf.h"
#include "wire/felix_msg.h"

enum felix_auth_mode {
	FELIX_AUTH_REFUSE = 0, /* nothing configured */
	FELIX_AUTH_NONE,       /* dev mode */
	FELIX_AUTH_TOKENS,
	FELIX_AUTH_JWT,
};

struct felix_auth_pair {
	char *tenant; /* owned */
	char *token;  /* owned */
};

struct felix_auth_config {
	const char *tokens_file; /* NULL: none */
	bool dev;
	const char *jwks_dir; /* NULL: no JWT */
	const char *issuer;   /* NULL: the default */
	const char *audience; /* NULL: the default */
	unsigned skew_s;
};

struct felix_auth {
	enum felix_auth_mode mode;
	struct felix_auth_pair *pairs; /* owned */
	size_t n;
	/* JWT mode */
	char *jwks_dir; /* owned */
	char issuer[256];
	char audience[256];
	struct auth_jwt_config jwt;
	struct auth_keydir keys;
	uv_signal_t sighup; /* started by felix_auth_watch */
	bool watching;
	const struct log *log;
};

/* One session's permissions (JWT mode). */
struct felix_grants {
	struct auth_perms perms;
	int64_t exp; /* the token's exp */
	int64_t skew_s;
};

/* 0, or -1 with a message naming the file and line. */
int felix_auth_load(struct felix_auth *a, const struct felix_auth_config *cfg,
                    char *err, size_t errlen);
void felix_auth_free(struct felix_auth *a);

/* JWT mode: reload the key directory on SIGHUP. Returns whether a handle
 * was started (the owner closes `a->sighup` then). */
bool felix_auth_watch(struct felix_auth *a, uv_loop_t *loop,
                      const struct log *log);

/* 0 when the pair may connect, with the session's grants in `*grants`
 * (NULL outside JWT mode; freed with felix_grants_free); -1 with the
 * message for the client (it starts with "unauthorized:" and never echoes
 * the token). */
int felix_auth_check(const struct felix_auth *a, const char *tenant,
                     const char *token, struct felix_grants **grants, char *msg,
                     size_t msglen);
void felix_grants_free(struct felix_grants *g);

/* Whether a session with `g` may run request `m` (every JSON request
 * after auth); 0, or -1 with a message starting "unauthorized:". NULL
 * grants allow everything. */
int felix_auth_request(const struct felix_grants *g, const struct felix_msg *m,
                       char *msg, size_t msglen);
/* The same for a binary publish to `ns`/`stream`. */
int felix_auth_publish(const struct felix_grants *g, const char *ns,
                       const char *stream, char *msg, size_t msglen);
/* Encodes the refusal of `m` into `w` in the shape its sender waits for:
 * publish_error for a publish or publish_idempotent with a request id,
 * nothing for a publish nobody waits for (ack none), else error. */
void felix_auth_refusal(const struct felix_msg *m, const char *msg,
                        struct wbuf *w);

/* Whether the admin API may create or delete a scope of `tenant` in
 * namespace `ns` for a request carrying the `Authorization` header
 * `authorization` (may be NULL): 0 outside JWT mode or when a bearer token
 * of the tenant grants ns.manage there; else the HTTP status (401 without
 * a valid token, 403 without the permission) with the message. */
unsigned felix_auth_admin(const struct felix_auth *a, const char *authorization,
                          const char *tenant, const char *ns, char *msg,
                          size_t msglen);

const char *felix_auth_mode_name(enum felix_auth_mode mode);

#endif
