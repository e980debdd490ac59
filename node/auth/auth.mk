# node/auth: the auth room: token verification (jwt: bounded JWT parse,
# EdDSA only; jwks: a tenant's Ed25519 keys), permissions (perm) and the
# per-tenant key directory (auth). Its public header is node/auth/auth.h;
# the Felix listener uses it today. See docs/security.md.
node_libnode_a_SOURCES += node/auth/auth.h node/auth/auth.c \
	node/auth/jwt.c node/auth/jwt.h node/auth/jwks.c node/auth/jwks.h \
	node/auth/perm.c node/auth/perm.h node/auth/acl.c node/auth/acl.h \
	node/auth/acl_rule.c
EXTRA_DIST += docs/security.md tests/interop/felix_jwt.mjs

# ACL users for FSNP: rules, globs, checks, the user table.
UNIT_TESTS += tests/unit/test_auth_acl
tests_unit_test_auth_acl_SOURCES = tests/unit/test_auth_acl.c
tests_unit_test_auth_acl_LDADD = node/libnode.a $(DEP_LIBS) $(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_auth_acl
tests_fuzz_fuzz_auth_acl_SOURCES = tests/fuzz/fuzz_auth_acl.c
tests_fuzz_fuzz_auth_acl_LDADD = node/libnode.a $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_auth_acl_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_auth_acl

# Unit tests: permissions; tokens end to end (minted with the client's
# issuing side, client/felix_token.c).
UNIT_TESTS += tests/unit/test_auth_perm
tests_unit_test_auth_perm_SOURCES = tests/unit/test_auth_perm.c
tests_unit_test_auth_perm_LDADD = node/libnode.a $(DEP_LIBS) $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_auth_jwt
tests_unit_test_auth_jwt_SOURCES = tests/unit/test_auth_jwt.c
tests_unit_test_auth_jwt_LDADD = node/libnode.a $(CLIENT_LIBS) $(DEP_LIBS) \
	$(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_auth_jwt
tests_fuzz_fuzz_auth_jwt_SOURCES = tests/fuzz/fuzz_auth_jwt.c
tests_fuzz_fuzz_auth_jwt_LDADD = node/libnode.a wire/libwire.la \
	$(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_auth_jwt_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_auth_jwt

# Integration: JWT auth and permissions on a real node (Felix).
INTEGRATION_TESTS += tests/integration/test_felix_jwt
tests_integration_test_felix_jwt_SOURCES = tests/integration/test_felix_jwt.c
tests_integration_test_felix_jwt_LDADD = $(FELIX_IT_LDADD)

# The permission each Felix request needs (node/felix/felix_auth.c).
UNIT_TESTS += tests/unit/test_felix_auth
tests_unit_test_felix_auth_SOURCES = tests/unit/test_felix_auth.c
tests_unit_test_felix_auth_LDADD = node/libnode.a $(CLIENT_LIBS) $(DEP_LIBS) \
	$(CMOCKA_LIBS)
