# raft/: libraft groups on our RocksDB raft_io (io.c), the per-group glue to
# the state machine (replica.c, entry.c), the multi-group manager
# (group.c), and the cluster layer: node transport (transport.c,
# msg_codec.c), placement, forwarding RPC and snapshot state transfer
# (forward.c, xfer.c); the transport's TLS comes from net/. See docs/architecture.md and docs/cluster.md.
noinst_LIBRARIES += raft/liblsraft.a
NODE_LIBS += raft/liblsraft.a
raft_liblsraft_a_SOURCES = \
	raft/bytes.h raft/crc32c.c raft/crc32c.h \
	raft/entry.c raft/entry.h \
	raft/fsm.h \
	raft/forward.c raft/forward.h \
	raft/group.c raft/group.h \
	raft/io.c raft/io.h \
	raft/join.c raft/join.h \
	raft/msg_codec.c raft/msg_codec.h \
	raft/placement.c raft/placement.h \
	raft/quiesce.c raft/quiesce.h \
	raft/rebalance.c raft/rebalance.h \
	raft/replica.c raft/replica.h \
	raft/transport.c raft/transport.h \
	raft/wal.c raft/wal.h \
	raft/xfer.c raft/xfer.h


# Tests: a temporary RocksDB (testdb) and a small state machine on it
# (testfsm).
RAFT_TEST_LIBS = raft/liblsraft.a net/libnet.la $(DEP_LIBS) $(CMOCKA_LIBS)
RAFT_TEST_DB = tests/unit/testdb.c tests/unit/testdb.h
RAFT_TEST_FSM = tests/unit/testfsm.c tests/unit/testfsm.h $(RAFT_TEST_DB)

UNIT_TESTS += tests/unit/test_raft_entry
tests_unit_test_raft_entry_SOURCES = tests/unit/test_raft_entry.c
tests_unit_test_raft_entry_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_io
tests_unit_test_raft_io_SOURCES = tests/unit/test_raft_io.c $(RAFT_TEST_DB)
tests_unit_test_raft_io_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_fixture
tests_unit_test_raft_fixture_SOURCES = tests/unit/test_raft_fixture.c \
	$(RAFT_TEST_FSM)
tests_unit_test_raft_fixture_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_group
tests_unit_test_raft_group_SOURCES = tests/unit/test_raft_group.c \
	$(RAFT_TEST_FSM)
tests_unit_test_raft_group_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_cluster
tests_unit_test_raft_cluster_SOURCES = tests/unit/test_raft_cluster.c \
	$(RAFT_TEST_FSM)
tests_unit_test_raft_cluster_LDADD = $(RAFT_TEST_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_raft_entry
tests_fuzz_fuzz_raft_entry_SOURCES = tests/fuzz/fuzz_raft_entry.c
tests_fuzz_fuzz_raft_entry_LDADD = raft/liblsraft.a $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_raft_entry_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_raft_entry

# The cluster layer (docs/cluster.md).
UNIT_TESTS += tests/unit/test_raft_msg
tests_unit_test_raft_msg_SOURCES = tests/unit/test_raft_msg.c
tests_unit_test_raft_msg_LDADD = $(RAFT_TEST_LIBS)

# Quiescence decisions (pure).
UNIT_TESTS += tests/unit/test_raft_quiesce
tests_unit_test_raft_quiesce_SOURCES = tests/unit/test_raft_quiesce.c
tests_unit_test_raft_quiesce_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_rebalance
tests_unit_test_raft_rebalance_SOURCES = tests/unit/test_raft_rebalance.c
tests_unit_test_raft_rebalance_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_raft_transport
tests_unit_test_raft_transport_SOURCES = tests/unit/test_raft_transport.c \
	client/lodectl_cert.c $(RAFT_TEST_FSM)
tests_unit_test_raft_transport_LDADD = $(RAFT_TEST_LIBS)

UNIT_TESTS += tests/unit/test_store_node
tests_unit_test_store_node_SOURCES = tests/unit/test_store_node.c \
	tests/unit/store_test_util.c tests/unit/store_test_util.h
tests_unit_test_store_node_LDADD = store/libstore.a $(DEP_LIBS) \
	$(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_raft_msg
tests_fuzz_fuzz_raft_msg_SOURCES = tests/fuzz/fuzz_raft_msg.c
tests_fuzz_fuzz_raft_msg_LDADD = raft/liblsraft.a net/libnet.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_raft_msg_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_raft_msg

# Three nodes (real processes) on loopback: placement, leaders, forwarding,
# kills and restarts, snapshots to followers, refusals.
INTEGRATION_TESTS += tests/integration/test_cluster
tests_integration_test_cluster_SOURCES = tests/integration/test_cluster.c
tests_integration_test_cluster_LDADD = tests/integration/libharness.a \
	wire/libwire.la $(CMOCKA_LIBS) $(DEP_LIBS)

EXTRA_DIST += docs/cluster.md

UNIT_TESTS += tests/unit/test_raft_wal
tests_unit_test_raft_wal_SOURCES = tests/unit/test_raft_wal.c
tests_unit_test_raft_wal_LDADD = $(RAFT_TEST_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_raft_wal
tests_fuzz_fuzz_raft_wal_SOURCES = tests/fuzz/fuzz_raft_wal.c
tests_fuzz_fuzz_raft_wal_LDADD = raft/liblsraft.a $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_raft_wal_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_raft_wal
