# node/: the daemon. libnode.a holds everything but main() so tests link it.
noinst_LIBRARIES += node/libnode.a
node_libnode_a_SOURCES = \
	node/admin_http.c node/admin_http.h \
	node/config.c node/config.h \
	node/crash.c node/crash.h \
	node/datadir.c node/datadir.h \
	node/db.c node/db.h \
	node/devcert.c node/devcert.h \
	node/log.c node/log.h \
	node/metrics.c node/metrics.h \
	node/node.c node/node.h \
	node/shards.c node/shards.h

bin_PROGRAMS += lodestone
lodestone_SOURCES = node/main.c
# Libraries of later layers are appended by their fragments via NODE_LIBS.
lodestone_LDADD = node/libnode.a $(NODE_LIBS) $(DEP_LIBS)

# node/db.c alone (its own sources: libnode.a carries the whole daemon).
UNIT_TESTS += tests/unit/test_db
tests_unit_test_db_SOURCES = tests/unit/test_db.c node/db.c node/db.h
tests_unit_test_db_LDADD = $(DEP_LIBS) $(CMOCKA_LIBS)
