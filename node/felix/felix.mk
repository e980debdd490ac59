# node/felix: the Felix room: the v1 broker over QUIC (felix_server,
# felix_pubsub, felix_group, felix_produce, felix_auth), its QUIC listener on
# net/'s engine (quic_server), the scope registry (scopes) and a small hash
# map (hmap). Its public header is node/felix/felix.h; the room's own
# declarations are in felix_internal.h. See docs/felix.md.
node_libnode_a_SOURCES += node/felix/felix.h \
	node/felix/quic_server.c node/felix/quic_server.h \
	node/felix/felix_server.c node/felix/felix_server.h node/felix/felix_internal.h \
	node/felix/felix_pubsub.c node/felix/felix_group.c node/felix/felix_produce.c \
	node/felix/felix_auth.c node/felix/felix_auth.h \
	node/felix/scopes.c node/felix/scopes.h node/felix/hmap.c node/felix/hmap.h
EXTRA_DIST += docs/felix.md

# The QUIC engine under the Felix listener and the client (net/quic.c).
UNIT_TESTS += tests/unit/test_quic
tests_unit_test_quic_SOURCES = tests/unit/test_quic.c
tests_unit_test_quic_LDADD = node/libnode.a $(CLIENT_LIBS) \
	$(DEP_LIBS) $(CMOCKA_LIBS)
# The test makes the socket refuse sends (EAGAIN) through these wrappers.
tests_unit_test_quic_LDFLAGS = $(AM_LDFLAGS) \
	-Wl,--wrap=sendmsg -Wl,--wrap=sendmmsg

# Integration tests against real lodestone --dev processes over QUIC.
FELIX_IT_LDADD = tests/integration/libfelixutil.a \
	tests/integration/libharness.a $(CLIENT_LIBS) \
	$(CMOCKA_LIBS) $(DEP_LIBS)
noinst_LIBRARIES += tests/integration/libfelixutil.a
tests_integration_libfelixutil_a_SOURCES = \
	tests/integration/felix_util.c tests/integration/felix_util.h

INTEGRATION_TESTS += tests/integration/test_felix
tests_integration_test_felix_SOURCES = tests/integration/test_felix.c
tests_integration_test_felix_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_bad
tests_integration_test_felix_bad_SOURCES = tests/integration/test_felix_bad.c
tests_integration_test_felix_bad_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_durable
tests_integration_test_felix_durable_SOURCES = \
	tests/integration/test_felix_durable.c
tests_integration_test_felix_durable_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_watch
tests_integration_test_felix_watch_SOURCES = \
	tests/integration/test_felix_watch.c
tests_integration_test_felix_watch_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_cluster
tests_integration_test_felix_cluster_SOURCES = \
	tests/integration/test_felix_cluster.c
tests_integration_test_felix_cluster_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_cluster_durable
tests_integration_test_felix_cluster_durable_SOURCES = \
	tests/integration/test_felix_cluster_durable.c
tests_integration_test_felix_cluster_durable_LDADD = $(FELIX_IT_LDADD)

INTEGRATION_TESTS += tests/integration/test_felix_redirect
tests_integration_test_felix_redirect_SOURCES = \
	tests/integration/test_felix_redirect.c
tests_integration_test_felix_redirect_LDADD = $(FELIX_IT_LDADD)
EXTRA_DIST += tests/interop/felix_client.mjs tests/interop/felix_durable.mjs \
	tests/interop/felix_redirect.mjs \
	tests/interop/lib/ports.mjs \
	tests/interop/package.json tests/interop/package-lock.json
