# tests/: cmocka unit tests, integration tests on real processes, the fuzz
# corpus driver and the interop runner.
noinst_LIBRARIES += tests/fuzz/libfuzzdriver.a tests/integration/libharness.a
tests_fuzz_libfuzzdriver_a_SOURCES = tests/fuzz/driver.c
tests_integration_libharness_a_SOURCES = \
	tests/integration/harness.c tests/integration/harness.h

UNIT_TESTS += tests/unit/test_config
tests_unit_test_config_SOURCES = tests/unit/test_config.c
tests_unit_test_config_LDADD = node/libnode.a $(DEP_LIBS) $(CMOCKA_LIBS)

INTEGRATION_TESTS += tests/integration/test_daemon
tests_integration_test_daemon_SOURCES = tests/integration/test_daemon.c
tests_integration_test_daemon_LDADD = tests/integration/libharness.a \
	$(CMOCKA_LIBS) $(DEP_LIBS)

EXTRA_DIST += tests/interop/run.sh tests/interop/lib/node.mjs tests/interop/lib/checks.mjs \
	tests/interop/lib/felix.mjs tests/interop/lib/values.mjs
