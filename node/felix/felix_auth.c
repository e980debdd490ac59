/* Felix token checks and request permissions; see felix_auth.h. */
#include "node/felix/felix_auth.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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
	auth_keydir_free(&a->keys);
	free(a->jwks_dir);
	a->jwks_dir = NULL;
	a->mode = FELIX_AUTH_REFUSE;
}

static int load_jwt(struct felix_auth *a, const struct felix_auth_config *cfg,
                    char *err, size_t errlen)
{
	char e[512];
	if (cfg->tokens_file != NULL) {
		snprintf(err, errlen,
		         "give felix-tokens or felix-jwks-dir, not both");
		return -1;
	}
	a->mode = FELIX_AUTH_JWT;
	a->jwks_dir = strdup(cfg->jwks_dir);
	if (a->jwks_dir == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(a->issuer, sizeof a->issuer, "%s",
	         cfg->issuer != NULL ? cfg->issuer : AUTH_DEFAULT_ISSUER);
	snprintf(a->audience, sizeof a->audience, "%s",
	         cfg->audience != NULL ? cfg->audience : AUTH_DEFAULT_AUDIENCE);
	a->jwt.issuer = a->issuer;
	a->jwt.audience = a->audience;
	a->jwt.skew_s = cfg->skew_s;
	if (auth_keydir_load(&a->keys, a->jwks_dir, e, sizeof e) != 0) {
		snprintf(err, errlen, "felix-jwks-dir: %s", e);
		felix_auth_free(a);
		return -1;
	}
	return 0;
}

int felix_auth_load(struct felix_auth *a, const struct felix_auth_config *cfg,
                    char *err, size_t errlen)
{
	const char *path = cfg->tokens_file;
	memset(a, 0, sizeof *a);
	if (cfg->jwks_dir != NULL) {
		return load_jwt(a, cfg, err, errlen);
	}
	if (path == NULL) {
		a->mode = cfg->dev ? FELIX_AUTH_NONE : FELIX_AUTH_REFUSE;
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

static int check_jwt(const struct felix_auth *a, const char *tenant,
                     const char *token, struct felix_grants **grants, char *msg,
                     size_t msglen)
{
	char e[300];
	struct felix_grants *g = calloc(1, sizeof *g);
	if (g == NULL) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	if (auth_jwt_verify(&a->keys, &a->jwt, tenant, token,
	                    (int64_t)time(NULL), &g->perms, &g->exp, e,
	                    sizeof e) != 0) {
		free(g);
		snprintf(msg, msglen, "unauthorized: %s", e);
		return -1;
	}
	g->skew_s = a->jwt.skew_s;
	*grants = g;
	return 0;
}

void felix_grants_free(struct felix_grants *g)
{
	if (g != NULL) {
		auth_perms_free(&g->perms);
		free(g);
	}
}

int felix_auth_check(const struct felix_auth *a, const char *tenant,
                     const char *token, struct felix_grants **grants, char *msg,
                     size_t msglen)
{
	*grants = NULL;
	switch (a->mode) {
	case FELIX_AUTH_JWT:
		return check_jwt(a, tenant, token, grants, msg, msglen);
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
	case FELIX_AUTH_JWT:
		return "JWT (EdDSA)";
	default:
		return "refuse (no felix-tokens)";
	}
}

/* ---- key reload ---------------------------------------------------------- */

static void on_sighup(uv_signal_t *h, int signum)
{
	struct felix_auth *a =
	    (struct felix_auth *)((char *)h -
	                          offsetof(struct felix_auth, sighup));
	struct auth_keydir fresh;
	char e[512];
	(void)signum;
	if (auth_keydir_load(&fresh, a->jwks_dir, e, sizeof e) != 0) {
		log_warn(
		    a->log, "felix",
		    "SIGHUP: keys not reloaded, the previous ones stay: %s", e);
		return;
	}
	auth_keydir_free(&a->keys);
	a->keys = fresh;
	log_info(a->log, "felix",
	         "SIGHUP: reloaded %zu keys of %zu tenants from %s",
	         auth_keydir_keys(&a->keys), a->keys.n, a->jwks_dir);
}

bool felix_auth_watch(struct felix_auth *a, uv_loop_t *loop,
                      const struct log *log)
{
	a->log = log;
	if (a->mode != FELIX_AUTH_JWT) {
		return false;
	}
	uv_signal_init(loop, &a->sighup);
	uv_signal_start(&a->sighup, on_sighup, SIGHUP);
	uv_unref((uv_handle_t *)&a->sighup);
	a->watching = true;
	log_info(log, "felix", "JWT auth: %zu keys of %zu tenants from %s",
	         auth_keydir_keys(&a->keys), a->keys.n, a->jwks_dir);
	return true;
}

/* ---- requests ------------------------------------------------------------ */

static int refuse(enum auth_action action, const char *ns, const char *name,
                  char *msg, size_t msglen)
{
	if (name != NULL) {
		snprintf(msg, msglen,
		         "unauthorized: the token does not grant %s on "
		         "%.100s/%.100s",
		         auth_action_name(action), ns, name);
	} else {
		snprintf(msg, msglen,
		         "unauthorized: the token does not grant %s",
		         auth_action_name(action));
	}
	return -1;
}

static bool expired(const struct felix_grants *g, char *msg, size_t msglen)
{
	if (g->exp + g->skew_s <= (int64_t)time(NULL)) {
		snprintf(msg, msglen, "unauthorized: token expired");
		return true;
	}
	return false;
}

static int check(const struct felix_grants *g, enum auth_action action,
                 const char *ns, const char *name, char *msg, size_t msglen)
{
	ns = ns != NULL ? ns : "";
	name = name != NULL ? name : "";
	if (!auth_perms_allow(&g->perms, action, ns, name)) {
		return refuse(action, ns, name, msg, msglen);
	}
	return 0;
}

int felix_auth_publish(const struct felix_grants *g, const char *ns,
                       const char *stream, char *msg, size_t msglen)
{
	if (g == NULL) {
		return 0;
	}
	if (expired(g, msg, msglen)) {
		return -1;
	}
	return check(g, AUTH_STREAM_PUBLISH, ns, stream, msg, msglen);
}

/* A cache request's scope: the seed's short forms name the tenant's
 * default cache. */
static int check_cache(const struct felix_grants *g, enum auth_action action,
                       const char *ns, const char *cache, char *msg,
                       size_t msglen)
{
	return check(g, action, ns != NULL ? ns : "default",
	             cache != NULL ? cache : "default", msg, msglen);
}

int felix_auth_request(const struct felix_grants *g, const struct felix_msg *m,
                       char *msg, size_t msglen)
{
	if (g == NULL) {
		return 0;
	}
	if (expired(g, msg, msglen)) {
		return -1;
	}
	switch (m->type) {
	case FELIX_MSG_PUBLISH:
		return check(g, AUTH_STREAM_PUBLISH, m->u.publish.namespace,
		             m->u.publish.stream, msg, msglen);
	case FELIX_MSG_PUBLISH_BATCH:
		return check(g, AUTH_STREAM_PUBLISH,
		             m->u.publish_batch.namespace,
		             m->u.publish_batch.stream, msg, msglen);
	case FELIX_MSG_PUBLISH_IDEMPOTENT:
		return check(g, AUTH_STREAM_PUBLISH,
		             m->u.publish_idempotent.namespace,
		             m->u.publish_idempotent.stream, msg, msglen);
	case FELIX_MSG_PRODUCER_INIT:
		if (!auth_perms_allow_any(&g->perms, AUTH_STREAM_PUBLISH)) {
			return refuse(AUTH_STREAM_PUBLISH, NULL, NULL, msg,
			              msglen);
		}
		return 0;
	case FELIX_MSG_SUBSCRIBE:
		return check(g, AUTH_STREAM_SUBSCRIBE, m->u.subscribe.namespace,
		             m->u.subscribe.stream, msg, msglen);
	case FELIX_MSG_STREAM_SHARDS: {
		/* Metadata about a stream: for whoever may use it. */
		const struct felix_msg_stream_shards *q = &m->u.stream_shards;
		if (check(g, AUTH_STREAM_PUBLISH, q->namespace, q->stream, msg,
		          msglen) == 0 ||
		    auth_perms_allow(&g->perms, AUTH_TENANT_OBSERVE, NULL,
		                     NULL)) {
			return 0;
		}
		return check(g, AUTH_STREAM_SUBSCRIBE, q->namespace, q->stream,
		             msg, msglen);
	}
	case FELIX_MSG_CACHE_PUT:
		return check_cache(g, AUTH_CACHE_WRITE,
		                   m->u.cache_put.namespace,
		                   m->u.cache_put.cache, msg, msglen);
	case FELIX_MSG_CACHE_DELETE:
		return check_cache(g, AUTH_CACHE_WRITE,
		                   m->u.cache_delete.namespace,
		                   m->u.cache_delete.cache, msg, msglen);
	case FELIX_MSG_COUNTER_ADD:
		return check_cache(g, AUTH_CACHE_WRITE,
		                   m->u.counter_add.namespace,
		                   m->u.counter_add.cache, msg, msglen);
	case FELIX_MSG_CACHE_GET:
		return check_cache(g, AUTH_CACHE_READ, m->u.cache_get.namespace,
		                   m->u.cache_get.cache, msg, msglen);
	case FELIX_MSG_COUNTER_GET:
		return check_cache(g, AUTH_CACHE_READ,
		                   m->u.counter_get.namespace,
		                   m->u.counter_get.cache, msg, msglen);
	case FELIX_MSG_CACHE_WATCH:
		return check_cache(g, AUTH_CACHE_READ,
		                   m->u.cache_watch.namespace,
		                   m->u.cache_watch.cache, msg, msglen);
	case FELIX_MSG_GROUP_POLL:
		return check(g, AUTH_STREAM_SUBSCRIBE,
		             m->u.group_poll.namespace, m->u.group_poll.stream,
		             msg, msglen);
	case FELIX_MSG_GROUP_DEAD_LETTERS:
		return check(g, AUTH_STREAM_SUBSCRIBE,
		             m->u.group_dead_letters.namespace,
		             m->u.group_dead_letters.stream, msg, msglen);
	case FELIX_MSG_GROUP_ACK:
	case FELIX_MSG_GROUP_NACK:
	case FELIX_MSG_GROUP_DISCARD:
	case FELIX_MSG_GROUP_REDRIVE:
		return check(g, AUTH_STREAM_SUBSCRIBE,
		             m->u.group_settle.namespace,
		             m->u.group_settle.stream, msg, msglen);
	default:
		/* Requests that name no tenant data (auth, topology) and
		 * messages a client must not send are answered by the
		 * dispatcher. */
		return 0;
	}
}

void felix_auth_refusal(const struct felix_msg *m, const char *msg,
                        struct wbuf *w)
{
	struct felix_msg r;
	bool has_rid = false, has_ack = false;
	uint64_t rid = 0;
	enum felix_ack_mode ack = FELIX_ACK_NONE;
	if (m->type == FELIX_MSG_PUBLISH) {
		has_rid = m->u.publish.has_request_id;
		rid = m->u.publish.request_id;
		has_ack = m->u.publish.has_ack;
		ack = m->u.publish.ack;
	} else if (m->type == FELIX_MSG_PUBLISH_BATCH) {
		has_rid = m->u.publish_batch.has_request_id;
		rid = m->u.publish_batch.request_id;
		has_ack = m->u.publish_batch.has_ack;
		ack = m->u.publish_batch.ack;
	} else if (m->type == FELIX_MSG_PUBLISH_IDEMPOTENT) {
		has_rid = has_ack = true;
		rid = m->u.publish_idempotent.request_id;
		ack = FELIX_ACK_PER_MESSAGE;
	}
	if (m->type == FELIX_MSG_PUBLISH ||
	    m->type == FELIX_MSG_PUBLISH_BATCH ||
	    m->type == FELIX_MSG_PUBLISH_IDEMPOTENT) {
		if (!has_ack) {
			ack = has_rid ? FELIX_ACK_PER_MESSAGE : FELIX_ACK_NONE;
		}
		if (ack == FELIX_ACK_NONE) {
			return; /* nobody waits for an answer */
		}
		if (has_rid) {
			felix_msg_init(&r, FELIX_MSG_PUBLISH_ERROR);
			r.u.publish_error.request_id = rid;
			r.u.publish_error.message = (char *)msg;
			felix_msg_encode_frame(&r, w);
			return;
		}
	}
	felix_msg_init(&r, FELIX_MSG_ERROR);
	r.u.error.message = (char *)msg;
	felix_msg_encode_frame(&r, w);
}

/* ---- the admin API ------------------------------------------------------- */

unsigned felix_auth_admin(const struct felix_auth *a, const char *authorization,
                          const char *tenant, const char *ns, char *msg,
                          size_t msglen)
{
	struct auth_perms perms;
	int64_t exp;
	char e[300];
	if (a == NULL || a->mode != FELIX_AUTH_JWT) {
		return 0;
	}
	if (authorization == NULL ||
	    strncasecmp(authorization, "Bearer ", 7) != 0) {
		snprintf(msg, msglen,
		         "unauthorized: scope changes need 'Authorization: "
		         "Bearer TOKEN' (ns.manage on the namespace)");
		return 401;
	}
	const char *token = authorization + 7;
	while (*token == ' ') {
		token++;
	}
	if (auth_jwt_verify(&a->keys, &a->jwt, tenant, token,
	                    (int64_t)time(NULL), &perms, &exp, e,
	                    sizeof e) != 0) {
		snprintf(msg, msglen, "unauthorized: %s", e);
		return 401;
	}
	bool ok = auth_perms_allow(&perms, AUTH_NS_MANAGE, ns, NULL);
	auth_perms_free(&perms);
	if (!ok) {
		snprintf(msg, msglen,
		         "unauthorized: the token does not grant ns.manage on "
		         "%.100s",
		         ns);
		return 403;
	}
	return 0;
}
