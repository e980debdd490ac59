# node/felix: the Felix v1 broker over QUIC (felix_server, felix_pubsub,
# felix_group, felix_produce, felix_auth), the scope registry (scopes) and a
# small hash map (hmap).
# See docs/felix.md.
node_libnode_a_SOURCES += \
	node/felix_server.c node/felix_server.h node/felix_internal.h \
	node/felix_pubsub.c node/felix_group.c node/felix_produce.c \
	node/felix_auth.c node/felix_auth.h \
	node/scopes.c node/scopes.h node/hmap.c node/hmap.h \
	client/felix_features.h
EXTRA_DIST += docs/felix.md

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
EXTRA_DIST += tests/interop/felix_client.mjs tests/interop/felix_durable.mjs \
	tests/interop/lib/ports.mjs \
	tests/interop/package.json tests/interop/package-lock.json
