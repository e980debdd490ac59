# node/auth: the auth room: token verification (jwt: bounded JWT parse,
# EdDSA only; jwks: a tenant's Ed25519 keys), permissions (perm) and the
# per-tenant key directory (auth). Its public header is node/auth/auth.h;
# the Felix listener uses it today. See docs/security.md.
node_libnode_a_SOURCES += node/auth/auth.h node/auth/auth.c \
	node/auth/jwt.c node/auth/jwt.h node/auth/jwks.c node/auth/jwks.h \
	node/auth/perm.c node/auth/perm.h
EXTRA_DIST += docs/security.md
