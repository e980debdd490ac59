# node/: the daemon core (config, reactor, data directory, RocksDB, shards,
# logging). Its rooms (node/admin/, node/felix/, node/fsnp/) add their sources
# to libnode.a from their own fragments. libnode.a holds everything but
# main() so tests link it.
noinst_LIBRARIES += node/libnode.a
node_libnode_a_SOURCES = \
	node/cluster_api.c node/cluster_api.h \
	node/config.c node/config.h \
	node/crash.c node/crash.h \
	node/datadir.c node/datadir.h \
	node/devcert.c node/devcert.h \
	node/flow_admin.c node/flow_admin.h \
	node/flow_sched.c node/flow_sched.h \
	node/log.c node/log.h \
	node/membership.c node/membership.h \
	node/node.c node/node.h \
	node/scan_cursors.c node/scan_cursors.h \
	node/shards.c node/shards.h node/shards_internal.h \
	node/shards_metrics.c

bin_PROGRAMS += lodestone
lodestone_SOURCES = node/main.c
# Libraries of later layers are appended by their fragments via NODE_LIBS.
lodestone_LDADD = node/libnode.a $(NODE_LIBS) $(DEP_LIBS)

# Unit: when a group counts as rebuilt for a remove or replace operation.
UNIT_TESTS += tests/unit/test_membership_progress
tests_unit_test_membership_progress_SOURCES = \
	tests/unit/test_membership_progress.c
tests_unit_test_membership_progress_LDADD = node/libnode.a $(NODE_LIBS) \
	$(DEP_LIBS) $(CMOCKA_LIBS)

# Unit: the SCAN resume-key table (slots, tags, eviction, bounds) and the
# rewrite of a KV_SCAN result into the page clients get.
UNIT_TESTS += tests/unit/test_scan_cursors
tests_unit_test_scan_cursors_SOURCES = tests/unit/test_scan_cursors.c \
	node/scan_cursors.c node/scan_cursors.h
tests_unit_test_scan_cursors_LDADD = store/libstore.a $(DEP_LIBS) \
	$(CMOCKA_LIBS)
