/* node/felix/felix_auth.c: the permission each Felix request needs, the
 * shape of a refusal, the token's expiry on every request, and the
 * admin API's scope changes under JWT auth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/felix_token.h"

#include "node/felix/felix_auth.h"
#include "wire/felix_frame.h"

static char tenant[] = "t1", ns[] = "orders", other[] = "billing",
            name[] = "eu", key[] = "k";

static void grants_of(struct felix_grants *g, const char *const *perms,
                      size_t n)
{
	char err[256];
	auth_perms_init(&g->perms);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(
		    auth_perms_add(&g->perms, perms[i], err, sizeof err), 0);
	}
	g->exp = (int64_t)time(NULL) + 600;
	g->skew_s = 60;
}

/* A message of `type` on namespace `n`, stream or cache `name`. */
static void msg_of(struct felix_msg *m, enum felix_msg_type type, char *n)
{
	felix_msg_init(m, type);
	switch (type) {
	case FELIX_MSG_PUBLISH:
		m->u.publish.tenant_id = tenant;
		m->u.publish.namespace = n;
		m->u.publish.stream = name;
		break;
	case FELIX_MSG_PUBLISH_BATCH:
		m->u.publish_batch.tenant_id = tenant;
		m->u.publish_batch.namespace = n;
		m->u.publish_batch.stream = name;
		break;
	case FELIX_MSG_PUBLISH_IDEMPOTENT:
		m->u.publish_idempotent.tenant_id = tenant;
		m->u.publish_idempotent.namespace = n;
		m->u.publish_idempotent.stream = name;
		break;
	case FELIX_MSG_SUBSCRIBE:
		m->u.subscribe.tenant_id = tenant;
		m->u.subscribe.namespace = n;
		m->u.subscribe.stream = name;
		break;
	case FELIX_MSG_STREAM_SHARDS:
		m->u.stream_shards.tenant_id = tenant;
		m->u.stream_shards.namespace = n;
		m->u.stream_shards.stream = name;
		break;
	case FELIX_MSG_CACHE_PUT:
		m->u.cache_put.tenant_id = tenant;
		m->u.cache_put.namespace = n;
		m->u.cache_put.cache = name;
		m->u.cache_put.key = key;
		break;
	case FELIX_MSG_CACHE_GET:
		m->u.cache_get.tenant_id = tenant;
		m->u.cache_get.namespace = n;
		m->u.cache_get.cache = name;
		m->u.cache_get.key = key;
		break;
	case FELIX_MSG_CACHE_DELETE:
		m->u.cache_delete.tenant_id = tenant;
		m->u.cache_delete.namespace = n;
		m->u.cache_delete.cache = name;
		m->u.cache_delete.key = key;
		break;
	case FELIX_MSG_COUNTER_ADD:
		m->u.counter_add.tenant_id = tenant;
		m->u.counter_add.namespace = n;
		m->u.counter_add.cache = name;
		m->u.counter_add.key = key;
		break;
	case FELIX_MSG_COUNTER_GET:
		m->u.counter_get.tenant_id = tenant;
		m->u.counter_get.namespace = n;
		m->u.counter_get.cache = name;
		m->u.counter_get.key = key;
		break;
	case FELIX_MSG_CACHE_WATCH:
		m->u.cache_watch.tenant_id = tenant;
		m->u.cache_watch.namespace = n;
		m->u.cache_watch.cache = name;
		m->u.cache_watch.key = key;
		break;
	case FELIX_MSG_GROUP_POLL:
		m->u.group_poll.tenant_id = tenant;
		m->u.group_poll.namespace = n;
		m->u.group_poll.stream = name;
		break;
	case FELIX_MSG_GROUP_DEAD_LETTERS:
		m->u.group_dead_letters.tenant_id = tenant;
		m->u.group_dead_letters.namespace = n;
		m->u.group_dead_letters.stream = name;
		break;
	default: /* group settles */
		m->u.group_settle.tenant_id = tenant;
		m->u.group_settle.namespace = n;
		m->u.group_settle.stream = name;
		break;
	}
}

static const struct {
	enum felix_msg_type type;
	const char *perm; /* exactly what it needs on orders/eu */
} needs[] = {
    {FELIX_MSG_PUBLISH, "stream.publish:stream:orders/eu"},
    {FELIX_MSG_PUBLISH_BATCH, "stream.publish:stream:orders/eu"},
    {FELIX_MSG_PUBLISH_IDEMPOTENT, "stream.publish:stream:orders/eu"},
    {FELIX_MSG_SUBSCRIBE, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_POLL, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_ACK, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_NACK, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_DEAD_LETTERS, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_DISCARD, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_GROUP_REDRIVE, "stream.subscribe:stream:orders/eu"},
    {FELIX_MSG_CACHE_PUT, "cache.write:cache:orders/eu"},
    {FELIX_MSG_CACHE_DELETE, "cache.write:cache:orders/eu"},
    {FELIX_MSG_COUNTER_ADD, "cache.write:cache:orders/eu"},
    {FELIX_MSG_CACHE_GET, "cache.read:cache:orders/eu"},
    {FELIX_MSG_COUNTER_GET, "cache.read:cache:orders/eu"},
    {FELIX_MSG_CACHE_WATCH, "cache.read:cache:orders/eu"},
};

#define N_NEEDS (sizeof needs / sizeof needs[0])

static void test_each_request_needs_its_action(void **state)
{
	char msg[256];
	(void)state;
	for (size_t i = 0; i < N_NEEDS; i++) {
		struct felix_msg m;
		for (size_t j = 0; j < N_NEEDS; j++) {
			struct felix_grants g;
			grants_of(&g, &needs[j].perm, 1);
			msg_of(&m, needs[i].type, ns);
			bool same = strcmp(needs[i].perm, needs[j].perm) == 0;
			int rc = felix_auth_request(&g, &m, msg, sizeof msg);
			if (same != (rc == 0)) {
				fail_msg("%s with '%s': %d",
				         felix_msg_type_name(needs[i].type),
				         needs[j].perm, rc);
			}
			if (rc != 0) {
				assert_int_equal(
				    strncmp(msg, "unauthorized:", 13), 0);
			}
			/* Another namespace: never. */
			msg_of(&m, needs[i].type, other);
			assert_int_not_equal(
			    felix_auth_request(&g, &m, msg, sizeof msg), 0);
			auth_perms_free(&g.perms);
		}
		/* No grants (dev, token file): everything runs. */
		msg_of(&m, needs[i].type, ns);
		assert_int_equal(felix_auth_request(NULL, &m, msg, sizeof msg),
		                 0);
	}
}

static void test_inherited_and_metadata(void **state)
{
	struct felix_grants g;
	struct felix_msg m;
	char msg[256];
	(void)state;
	const char *const nsm[] = {"ns.manage:ns:orders"};
	grants_of(&g, nsm, 1);
	for (size_t i = 0; i < N_NEEDS; i++) {
		msg_of(&m, needs[i].type, ns);
		assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg),
		                 0);
		msg_of(&m, needs[i].type, other);
		assert_int_not_equal(
		    felix_auth_request(&g, &m, msg, sizeof msg), 0);
	}
	auth_perms_free(&g.perms);
	/* stream_shards: publish, subscribe or tenant.observe. */
	const char *const sub[] = {"stream.subscribe:stream:orders/*"};
	const char *const obs[] = {"tenant.observe:tenant:*"};
	const char *const cache[] = {"cache.read:cache:orders/*"};
	msg_of(&m, FELIX_MSG_STREAM_SHARDS, ns);
	grants_of(&g, sub, 1);
	assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	auth_perms_free(&g.perms);
	grants_of(&g, obs, 1);
	assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	auth_perms_free(&g.perms);
	grants_of(&g, cache, 1);
	assert_int_not_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	/* producer_init: any publish grant. */
	felix_msg_init(&m, FELIX_MSG_PRODUCER_INIT);
	assert_int_not_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	auth_perms_free(&g.perms);
	const char *const pub[] = {"stream.publish:stream:x/y"};
	grants_of(&g, pub, 1);
	assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	/* Binary publishes. */
	assert_int_equal(felix_auth_publish(&g, "x", "y", msg, sizeof msg), 0);
	assert_int_not_equal(felix_auth_publish(&g, "x", "z", msg, sizeof msg),
	                     0);
	assert_int_equal(felix_auth_publish(NULL, "x", "z", msg, sizeof msg),
	                 0);
	auth_perms_free(&g.perms);
}

static void test_short_cache_forms(void **state)
{
	struct felix_grants g;
	struct felix_msg m;
	char msg[256];
	(void)state;
	const char *const def[] = {"cache.write:cache:default/default"};
	grants_of(&g, def, 1);
	felix_msg_init(&m, FELIX_MSG_CACHE_PUT);
	m.u.cache_put.key = key; /* no tenant, namespace or cache */
	assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	felix_msg_init(&m, FELIX_MSG_CACHE_GET);
	m.u.cache_get.key = key;
	assert_int_not_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	auth_perms_free(&g.perms);
}

static void test_expiry_on_every_request(void **state)
{
	struct felix_grants g;
	struct felix_msg m;
	char msg[256];
	(void)state;
	const char *const adm[] = {"tenant.admin:tenant:*"};
	grants_of(&g, adm, 1);
	msg_of(&m, FELIX_MSG_SUBSCRIBE, ns);
	assert_int_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	g.exp = (int64_t)time(NULL) - 61;
	assert_int_not_equal(felix_auth_request(&g, &m, msg, sizeof msg), 0);
	assert_string_equal(msg, "unauthorized: token expired");
	assert_int_not_equal(felix_auth_publish(&g, "a", "b", msg, sizeof msg),
	                     0);
	auth_perms_free(&g.perms);
}

static enum felix_msg_type refusal_type(const struct felix_msg *m)
{
	struct wbuf w;
	struct felix_msg r;
	char err[128];
	wbuf_init(&w);
	felix_auth_refusal(m, "unauthorized: no", &w);
	if (w.len == 0) {
		wbuf_free(&w);
		return FELIX_MSG_NONE;
	}
	assert_true(w.len > FELIX_FRAME_HEADER_LEN);
	assert_int_equal(felix_msg_decode(w.data + FELIX_FRAME_HEADER_LEN,
	                                  w.len - FELIX_FRAME_HEADER_LEN, &r,
	                                  err, sizeof err),
	                 0);
	enum felix_msg_type t = r.type;
	if (t == FELIX_MSG_PUBLISH_ERROR) {
		assert_string_equal(r.u.publish_error.message,
		                    "unauthorized: no");
		assert_int_equal(r.u.publish_error.request_id, 42);
	} else {
		assert_string_equal(r.u.error.message, "unauthorized: no");
	}
	felix_msg_free(&r);
	wbuf_free(&w);
	return t;
}

static void test_refusal_shapes(void **state)
{
	struct felix_msg m;
	(void)state;
	msg_of(&m, FELIX_MSG_PUBLISH, ns);
	assert_int_equal(refusal_type(&m), FELIX_MSG_NONE); /* ack none */
	m.u.publish.has_request_id = true;
	m.u.publish.request_id = 42;
	assert_int_equal(refusal_type(&m), FELIX_MSG_PUBLISH_ERROR);
	msg_of(&m, FELIX_MSG_PUBLISH_BATCH, ns);
	m.u.publish_batch.has_ack = true;
	m.u.publish_batch.ack = FELIX_ACK_PER_BATCH;
	assert_int_equal(refusal_type(&m), FELIX_MSG_ERROR);
	msg_of(&m, FELIX_MSG_PUBLISH_IDEMPOTENT, ns);
	m.u.publish_idempotent.request_id = 42;
	assert_int_equal(refusal_type(&m), FELIX_MSG_PUBLISH_ERROR);
	msg_of(&m, FELIX_MSG_SUBSCRIBE, ns);
	assert_int_equal(refusal_type(&m), FELIX_MSG_ERROR);
	msg_of(&m, FELIX_MSG_CACHE_GET, ns);
	assert_int_equal(refusal_type(&m), FELIX_MSG_ERROR);
}

static void test_admin_scope_changes(void **state)
{
	char dir[64], path[128], err[512], msg[512], hdr[4200];
	struct felix_auth a;
	EVP_PKEY *k;
	(void)state;
	/* Outside JWT mode the admin API stays as it was. */
	struct felix_auth_config dev = {.dev = true};
	assert_int_equal(felix_auth_load(&a, &dev, err, sizeof err), 0);
	assert_int_equal(
	    felix_auth_admin(&a, NULL, "t1", "prod", msg, sizeof msg), 0);
	felix_auth_free(&a);
	assert_int_equal(
	    felix_auth_admin(NULL, NULL, "t1", "prod", msg, sizeof msg), 0);

	snprintf(dir, sizeof dir, "/tmp/test_felix_auth.XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(felix_token_keygen(&k), 0);
	char *jwk = felix_token_jwk(k, "k1");
	snprintf(path, sizeof path, "%s/t1.json", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"keys\":[%s]}", jwk);
	fclose(f);
	free(jwk);
	struct felix_auth_config jc = {.jwks_dir = dir, .skew_s = 60};
	if (felix_auth_load(&a, &jc, err, sizeof err) != 0) {
		fail_msg("%s", err);
	}
	/* Both a token file and keys: refused. */
	struct felix_auth b;
	struct felix_auth_config both = {.jwks_dir = dir, .tokens_file = path};
	assert_int_not_equal(felix_auth_load(&b, &both, err, sizeof err), 0);

	const char *const nsm[] = {"ns.manage:ns:prod"};
	const char *const pub[] = {"stream.publish:stream:prod/*"};
	int64_t now = (int64_t)time(NULL);
	struct felix_token_claims c = {.tid = "t1",
	                               .iat = now,
	                               .exp = now + 60,
	                               .perms = nsm,
	                               .n_perms = 1};
	char *manage = felix_token_mint(k, "k1", &c, err, sizeof err);
	c.perms = pub;
	char *publish = felix_token_mint(k, "k1", &c, err, sizeof err);
	assert_non_null(manage);
	assert_non_null(publish);

	assert_int_equal(
	    felix_auth_admin(&a, NULL, "t1", "prod", msg, sizeof msg), 401);
	assert_int_equal(
	    felix_auth_admin(&a, "Basic dTpw", "t1", "prod", msg, sizeof msg),
	    401);
	assert_int_equal(
	    felix_auth_admin(&a, "Bearer nope", "t1", "prod", msg, sizeof msg),
	    401);
	snprintf(hdr, sizeof hdr, "Bearer %s", publish);
	assert_int_equal(
	    felix_auth_admin(&a, hdr, "t1", "prod", msg, sizeof msg), 403);
	assert_non_null(strstr(msg, "ns.manage"));
	snprintf(hdr, sizeof hdr, "bearer %s", manage);
	assert_int_equal(
	    felix_auth_admin(&a, hdr, "t1", "prod", msg, sizeof msg), 0);
	assert_int_equal(
	    felix_auth_admin(&a, hdr, "t1", "staging", msg, sizeof msg), 403);
	/* The tenant comes from the path: t1's token is not t2's. */
	assert_int_equal(
	    felix_auth_admin(&a, hdr, "t2", "prod", msg, sizeof msg), 401);
	free(manage);
	free(publish);
	felix_auth_free(&a);
	EVP_PKEY_free(k);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_request_needs_its_action),
	    cmocka_unit_test(test_inherited_and_metadata),
	    cmocka_unit_test(test_short_cache_forms),
	    cmocka_unit_test(test_expiry_on_every_request),
	    cmocka_unit_test(test_refusal_shapes),
	    cmocka_unit_test(test_admin_scope_changes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
