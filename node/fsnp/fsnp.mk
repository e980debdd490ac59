# node/fsnp: the FSNP server (docs/fsnp.md): listener, connections and
# lanes, request execution on the Raft groups, control opcodes, and the
# pure command layer (table, argument parsing, store plans).
node_libnode_a_SOURCES += node/fsnp/fsnp.h \
	node/fsnp/fsnp_server.c node/fsnp/fsnp_server.h node/fsnp/fsnp_internal.h \
	node/fsnp/fsnp_conn.c node/fsnp/fsnp_exec.c node/fsnp/fsnp_control.c \
	node/fsnp/fsnp_flow.c node/fsnp/fsnp_flow_query.c \
	node/fsnp/fsnp_flow_sched.c \
	node/fsnp/fsnp_cmd.c node/fsnp/fsnp_cmd.h node/fsnp/fsnp_acl.c \
	node/fsnp/fsnp_admin.c node/fsnp/fsnp_admin_args.c node/fsnp/fsnp_admin.h

EXTRA_DIST += docs/fsnp.md

# Unit: the command table, argument parsing and store plans.
UNIT_TESTS += tests/unit/test_fsnp_cmd
tests_unit_test_fsnp_cmd_SOURCES = tests/unit/test_fsnp_cmd.c \
	node/fsnp/fsnp_cmd.c node/fsnp/fsnp_cmd.h node/scan_cursors.c
tests_unit_test_fsnp_cmd_LDADD = store/libstore.a wire/libwire.la \
	$(DEP_LIBS) $(CMOCKA_LIBS)

# Unit: admin arguments (args lists, ID@HOST:PORT).
UNIT_TESTS += tests/unit/test_fsnp_admin
tests_unit_test_fsnp_admin_SOURCES = tests/unit/test_fsnp_admin.c \
	node/fsnp/fsnp_admin_args.c node/fsnp/fsnp_admin.h
tests_unit_test_fsnp_admin_LDADD = wire/libwire.la $(DEP_LIBS) $(CMOCKA_LIBS)

# Integration: real lodestone processes driven over FSNP.
FSNP_ITEST_SOURCES = tests/integration/fsnp_test_client.c \
	tests/integration/fsnp_test_client.h
FSNP_ITEST_LDADD = tests/integration/libharness.a wire/libwire.la \
	$(CMOCKA_LIBS) $(DEP_LIBS)

INTEGRATION_TESTS += tests/integration/test_fsnp_basic
tests_integration_test_fsnp_basic_SOURCES = \
	tests/integration/test_fsnp_basic.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_basic_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_fsnp_pipeline
tests_integration_test_fsnp_pipeline_SOURCES = \
	tests/integration/test_fsnp_pipeline.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_pipeline_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_fsnp_limits
tests_integration_test_fsnp_limits_SOURCES = \
	tests/integration/test_fsnp_limits.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_limits_LDADD = $(FSNP_ITEST_LDADD)

# ACL users: commands and key patterns on every path, invalidation.
INTEGRATION_TESTS += tests/integration/test_fsnp_acl
tests_integration_test_fsnp_acl_SOURCES = \
	tests/integration/test_fsnp_acl.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_acl_LDADD = $(FSNP_ITEST_LDADD)

# Protected mode from a non-loopback client (a namespace of its own; root).
INTEGRATION_TESTS += tests/integration/test_fsnp_protected
tests_integration_test_fsnp_protected_SOURCES = \
	tests/integration/test_fsnp_protected.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_protected_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_fsnp_drain
tests_integration_test_fsnp_drain_SOURCES = \
	tests/integration/test_fsnp_drain.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_drain_LDADD = $(FSNP_ITEST_LDADD)

# The raft core's durability check, over real store commands.
INTEGRATION_TESTS += tests/integration/test_fsnp_durability
tests_integration_test_fsnp_durability_SOURCES = \
	tests/integration/test_fsnp_durability.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_durability_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_fsnp_client
tests_integration_test_fsnp_client_SOURCES = \
	tests/integration/test_fsnp_client.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_client_LDADD = $(CLIENT_LIBS) \
	$(FSNP_ITEST_LDADD)

# Fuzz: the command layer on arbitrary bodies and arguments.
FUZZ_TARGETS += tests/fuzz/fuzz_fsnp_cmd
tests_fuzz_fuzz_fsnp_cmd_SOURCES = tests/fuzz/fuzz_fsnp_cmd.c \
	node/fsnp/fsnp_cmd.c node/fsnp/fsnp_cmd.h node/scan_cursors.c
tests_fuzz_fuzz_fsnp_cmd_LDADD = store/libstore.a wire/libwire.la \
	$(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_fsnp_cmd_LDFLAGS = $(FUZZER_LINKFLAGS)

EXTRA_DIST += tests/fuzz/corpus/fuzz_fsnp_cmd tests/interop/fsnp_sdk.mjs \
	tests/interop/fsnp_acl.mjs \
	tests/interop/fsnp_topology.mjs tests/interop/fsnp_flow.mjs \
	tests/interop/fsnp_flow_stats.mjs \
	tests/interop/package.json

INTEGRATION_TESTS += tests/integration/test_fsnp_tls
tests_integration_test_fsnp_tls_SOURCES = \
	tests/integration/test_fsnp_tls.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_tls_LDADD = $(FSNP_ITEST_LDADD)

# The KV surface on 3 nodes, through a follower and through the leader.
INTEGRATION_TESTS += tests/integration/test_membership
tests_integration_test_membership_SOURCES = \
	tests/integration/test_membership.c $(FSNP_ITEST_SOURCES)
tests_integration_test_membership_LDADD = $(FSNP_ITEST_LDADD) -lpthread

INTEGRATION_TESTS += tests/integration/test_flow
tests_integration_test_flow_SOURCES = \
	tests/integration/test_flow.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_LDADD = $(FSNP_ITEST_LDADD)

# FLOW.QUERY on 3 nodes: a cursor resumes on another node after the
# partition's leader is killed.
INTEGRATION_TESTS += tests/integration/test_flow_query
tests_integration_test_flow_query_SOURCES = \
	tests/integration/test_flow_query.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_query_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_flow_stats
tests_integration_test_flow_stats_SOURCES = \
	tests/integration/test_flow_stats.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_stats_LDADD = $(FSNP_ITEST_LDADD)

# FerricFlow schedules and the built-in scheduler on 3 nodes (a leader
# killed under an interval schedule).
INTEGRATION_TESTS += tests/integration/test_flow_schedule
tests_integration_test_flow_schedule_SOURCES = \
	tests/integration/test_flow_schedule.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_schedule_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_flow_gov
tests_integration_test_flow_gov_SOURCES = \
	tests/integration/test_flow_gov.c $(FSNP_ITEST_SOURCES)
tests_integration_test_flow_gov_LDADD = $(FSNP_ITEST_LDADD)

INTEGRATION_TESTS += tests/integration/test_fsnp_cluster
tests_integration_test_fsnp_cluster_SOURCES = \
	tests/integration/test_fsnp_cluster.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_cluster_LDADD = $(FSNP_ITEST_LDADD)

# Cluster administration over FSNP on real processes: 3 nodes, a 4th
# joining and leaving.
INTEGRATION_TESTS += tests/integration/test_fsnp_admin
tests_integration_test_fsnp_admin_SOURCES = \
	tests/integration/test_fsnp_admin.c $(FSNP_ITEST_SOURCES)
tests_integration_test_fsnp_admin_LDADD = $(FSNP_ITEST_LDADD) -lpthread

# Quiescent groups on 3 nodes with 512 groups: idle groups quiesce,
# writes wake them, a killed leader node's groups are led again.
INTEGRATION_TESTS += tests/integration/test_quiesce
tests_integration_test_quiesce_SOURCES = \
	tests/integration/test_quiesce.c $(FSNP_ITEST_SOURCES)
tests_integration_test_quiesce_LDADD = $(FSNP_ITEST_LDADD)

# Demoting and promoting nodes (CLUSTER.DEMOTE / PROMOTE, lodectl, the
# admin API) on 4 nodes.
INTEGRATION_TESTS += tests/integration/test_voting
tests_integration_test_voting_SOURCES = \
	tests/integration/test_voting.c $(FSNP_ITEST_SOURCES)
tests_integration_test_voting_LDADD = $(FSNP_ITEST_LDADD)

# Internal mTLS certificates and CA rotated on SIGHUP on 3 nodes.
INTEGRATION_TESTS += tests/integration/test_tls_reload
tests_integration_test_tls_reload_SOURCES = \
	tests/integration/test_tls_reload.c $(FSNP_ITEST_SOURCES)
tests_integration_test_tls_reload_LDADD = $(FSNP_ITEST_LDADD)
