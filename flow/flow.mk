# flow/: FerricFlow, a state machine over store/'s transaction (flow/flow.h,
# docs/storage.md "FerricFlow"). See docs/architecture.md and Makefile.am for
# the variables fragments append to.
noinst_LIBRARIES += flow/libflow.a
NODE_LIBS += flow/libflow.a
flow_libflow_a_SOURCES = \
	flow/flow.c flow/flow.h \
	flow/flow_body.c flow/flow_body.h \
	flow/flow_record.c flow/flow_record.h \
	flow/flow_children.c flow/flow_children.h \
	flow/flow_ops.c flow/flow_ops.h \
	flow/flow_sweep.c flow/flow_sweep.h \
	flow/flow_wait.c flow/flow_wait.h

FLOW_TEST_LDADD = flow/libflow.a store/libstore.a wire/libwire.la \
	$(DEP_LIBS) $(CMOCKA_LIBS)
FLOW_TEST_UTIL = tests/unit/flow_test_util.c tests/unit/flow_test_util.h \
	tests/unit/store_test_util.c tests/unit/store_test_util.h

UNIT_TESTS += tests/unit/test_flow_ops
tests_unit_test_flow_ops_SOURCES = tests/unit/test_flow_ops.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_ops_LDADD = $(FLOW_TEST_LDADD)

UNIT_TESTS += tests/unit/test_flow_model
tests_unit_test_flow_model_SOURCES = tests/unit/test_flow_model.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_model_LDADD = $(FLOW_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_flow_body
tests_fuzz_fuzz_flow_body_SOURCES = tests/fuzz/fuzz_flow_body.c
tests_fuzz_fuzz_flow_body_LDADD = flow/libflow.a store/libstore.a \
	wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_flow_body_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_flow_body

UNIT_TESTS += tests/unit/test_flow_body
tests_unit_test_flow_body_SOURCES = tests/unit/test_flow_body.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_body_LDADD = $(FLOW_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_flow_apply
tests_fuzz_fuzz_flow_apply_SOURCES = tests/fuzz/fuzz_flow_apply.c \
	tests/fuzz/fuzz_store_db.c tests/fuzz/fuzz_store_db.h
tests_fuzz_fuzz_flow_apply_LDADD = flow/libflow.a store/libstore.a \
	wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_flow_apply_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_flow_apply
