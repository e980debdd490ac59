# client/flow: the FerricFlow calls of liblodestone (client/flow_client.c),
# `lodectl flow` (client/lodectl_flow.c, lodectl_flow_sched.c,
# lodectl_flow_gov.c, lodectl_flow_query.c) and `lodebench flow`
# (client/lodebench_flow.c), `lodebench flow-query`
# (client/lodebench_flow_query.c).
client_liblodestone_la_SOURCES += client/flow_client.c client/flow_client.h

lodectl_SOURCES += client/lodectl_flow.c client/lodectl_flow_sched.c \
	client/lodectl_flow_gov.c client/lodectl_flow_query.c
lodebench_SOURCES += client/lodebench_flow.c client/lodebench_flow_query.c

UNIT_TESTS += tests/unit/test_flow_client
tests_unit_test_flow_client_SOURCES = tests/unit/test_flow_client.c
tests_unit_test_flow_client_LDADD = $(CLIENT_LIBS) $(DEP_LIBS) $(CMOCKA_LIBS)

INTEGRATION_TESTS += tests/integration/test_flow_client
tests_integration_test_flow_client_SOURCES = \
	tests/integration/test_flow_client.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_client_LDADD = $(CLIENT_LIBS) $(FSNP_ITEST_LDADD)
