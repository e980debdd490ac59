# store/: the replicated shard state machine on RocksDB (docs/storage.md).
noinst_LIBRARIES += store/libstore.a
NODE_LIBS += store/libstore.a
store_libstore_a_SOURCES = store/db.c store/db.h \
	store/store.h store/internal.h store/buf.c store/buf.h \
	store/command.c store/command.h store/result.c store/result.h \
	store/keys.c store/keys.h store/rowcache.c store/rowcache.h \
	store/tx.c store/shard.c store/dwrite.c store/dwrite.h store/kvdirty.c \
	store/kvdirty.h store/ordrows.c store/ordrows.h store/meta.c \
	store/stream.c store/stream.h store/producer.c store/cgroup.c \
	store/cache.c \
	store/counter.c store/expire.c store/kv.c store/kv.h store/kvcoll.c \
	store/kvkey.c store/kvspace.c store/kvscan.c store/kvscan.h store/kvmulti.c \
	store/ext.c store/ext.h store/cfstats.c store/cfstats.h
EXTRA_DIST += docs/storage.md

# store/cfstats.c alone: RocksDB's statistics text.
UNIT_TESTS += tests/unit/test_store_cfstats
tests_unit_test_store_cfstats_SOURCES = tests/unit/test_store_cfstats.c \
	store/cfstats.c store/cfstats.h
tests_unit_test_store_cfstats_LDADD = $(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_store_cfstats
tests_fuzz_fuzz_store_cfstats_SOURCES = tests/fuzz/fuzz_store_cfstats.c \
	store/cfstats.c store/cfstats.h
tests_fuzz_fuzz_store_cfstats_LDADD = $(FUZZ_DRIVER)
tests_fuzz_fuzz_store_cfstats_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_store_cfstats

# store/db.c alone: the node's RocksDB options and column families.
UNIT_TESTS += tests/unit/test_db
tests_unit_test_db_SOURCES = tests/unit/test_db.c store/db.c store/db.h
tests_unit_test_db_LDADD = $(DEP_LIBS) $(CMOCKA_LIBS)


# store/ordrows.c alone: the ordered write-back rows against a model.
UNIT_TESTS += tests/unit/test_store_ordrows
tests_unit_test_store_ordrows_SOURCES = tests/unit/test_store_ordrows.c \
	store/ordrows.c store/ordrows.h
tests_unit_test_store_ordrows_LDADD = $(CMOCKA_LIBS)

STORE_TEST_LDADD = store/libstore.a $(DEP_LIBS) $(CMOCKA_LIBS)
STORE_TEST_UTIL = tests/unit/store_test_util.c tests/unit/store_test_util.h

UNIT_TESTS += tests/unit/test_store_command
tests_unit_test_store_command_SOURCES = tests/unit/test_store_command.c
tests_unit_test_store_command_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_acl
tests_unit_test_store_acl_SOURCES = tests/unit/test_store_acl.c \
	tests/unit/store_test_util.c tests/unit/store_test_util.h
tests_unit_test_store_acl_LDADD = store/libstore.a $(DEP_LIBS) \
	$(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_store_dwrite
tests_unit_test_store_dwrite_SOURCES = tests/unit/test_store_dwrite.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_dwrite_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_shard
tests_unit_test_store_shard_SOURCES = tests/unit/test_store_shard.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_shard_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_stream
tests_unit_test_store_stream_SOURCES = tests/unit/test_store_stream.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_stream_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_cache
tests_unit_test_store_cache_SOURCES = tests/unit/test_store_cache.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_cache_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_kv
tests_unit_test_store_kv_SOURCES = tests/unit/test_store_kv.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_kv_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_kvmulti
tests_unit_test_store_kvmulti_SOURCES = tests/unit/test_store_kvmulti.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_kvmulti_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_model
tests_unit_test_store_model_SOURCES = tests/unit/test_store_model.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_model_LDADD = $(STORE_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_store_command
tests_fuzz_fuzz_store_command_SOURCES = tests/fuzz/fuzz_store_command.c
tests_fuzz_fuzz_store_command_LDADD = store/libstore.a $(FUZZ_DRIVER) \
	$(DEP_LIBS)
tests_fuzz_fuzz_store_command_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_store_command

FUZZ_TARGETS += tests/fuzz/fuzz_store_apply
tests_fuzz_fuzz_store_apply_SOURCES = tests/fuzz/fuzz_store_apply.c \
	tests/fuzz/fuzz_store_db.c tests/fuzz/fuzz_store_db.h
tests_fuzz_fuzz_store_apply_LDADD = store/libstore.a $(FUZZ_DRIVER) \
	$(DEP_LIBS)
tests_fuzz_fuzz_store_apply_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_store_apply

UNIT_TESTS += tests/unit/test_store_observer
tests_unit_test_store_observer_SOURCES = tests/unit/test_store_observer.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_observer_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_kvdirty
tests_unit_test_store_kvdirty_SOURCES = tests/unit/test_store_kvdirty.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_kvdirty_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_rowcache
tests_unit_test_store_rowcache_SOURCES = tests/unit/test_store_rowcache.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_rowcache_LDADD = $(STORE_TEST_LDADD)

UNIT_TESTS += tests/unit/test_store_ordered
tests_unit_test_store_ordered_SOURCES = tests/unit/test_store_ordered.c \
	$(STORE_TEST_UTIL)
tests_unit_test_store_ordered_LDADD = $(STORE_TEST_LDADD)
