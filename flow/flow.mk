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
	flow/flow_index.c flow/flow_index.h \
	flow/flow_stats.c flow/flow_stats.h \
	flow/flow_overview.c flow/flow_overview.h \
	flow/flow_cursor.c flow/flow_cursor.h \
	flow/flow_ops.c flow/flow_ops.h \
	flow/flow_sweep.c flow/flow_sweep.h \
	flow/flow_wait.c flow/flow_wait.h \
	flow/flow_gov.c flow/flow_gov.h flow/flow_gov_internal.h \
	flow/flow_gov_body.c flow/flow_gov_body.h \
	flow/flow_gov_budget.c flow/flow_gov_limit.c flow/flow_gov_effect.c \
	flow/flow_gov_approval.c \
	flow/fql_error.c flow/fql_error.h \
	flow/fql_exec.c flow/fql_exec.h \
	flow/fql_lex.c flow/fql_lex.h \
	flow/fql_parse.c flow/fql_parse.h \
	flow/fql_plan.c flow/fql_plan.h \
	flow/fql_print.c flow/fql_print.h \
	flow/fql_shape.c flow/fql_shape.h \
	flow/tz.c flow/tz.h \
	flow/cron.c flow/cron.h \
	flow/flow_sched_def.c flow/flow_sched_def.h \
	flow/flow_schedule.c flow/flow_schedule.h

FLOW_TEST_LDADD = flow/libflow.a store/libstore.a wire/libwire.la \
	$(DEP_LIBS) $(CMOCKA_LIBS)
FLOW_TEST_UTIL = tests/unit/flow_test_util.c tests/unit/flow_test_util.h \
	tests/unit/store_test_util.c tests/unit/store_test_util.h

UNIT_TESTS += tests/unit/test_flow_ops
tests_unit_test_flow_ops_SOURCES = tests/unit/test_flow_ops.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_ops_LDADD = $(FLOW_TEST_LDADD)

UNIT_TESTS += tests/unit/test_flow_index
tests_unit_test_flow_index_SOURCES = tests/unit/test_flow_index.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_index_LDADD = $(FLOW_TEST_LDADD)

UNIT_TESTS += tests/unit/test_flow_overview
tests_unit_test_flow_overview_SOURCES = tests/unit/test_flow_overview.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_overview_LDADD = $(FLOW_TEST_LDADD)

UNIT_TESTS += tests/unit/test_fql_exec
tests_unit_test_fql_exec_SOURCES = tests/unit/test_fql_exec.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_fql_exec_LDADD = $(FLOW_TEST_LDADD)

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

FUZZ_TARGETS += tests/fuzz/fuzz_flow_gov_body
tests_fuzz_fuzz_flow_gov_body_SOURCES = tests/fuzz/fuzz_flow_gov_body.c
tests_fuzz_fuzz_flow_gov_body_LDADD = flow/libflow.a store/libstore.a \
	wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_flow_gov_body_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_flow_gov_body

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

UNIT_TESTS += tests/unit/test_flow_cursor
tests_unit_test_flow_cursor_SOURCES = tests/unit/test_flow_cursor.c
tests_unit_test_flow_cursor_LDADD = $(FLOW_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_flow_cursor
tests_fuzz_fuzz_flow_cursor_SOURCES = tests/fuzz/fuzz_flow_cursor.c
tests_fuzz_fuzz_flow_cursor_LDADD = flow/libflow.a store/libstore.a \
	wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_flow_cursor_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_flow_cursor
# FQL1: the pure query language modules (lexer, parser and binder, printer,
# errors); they use wire/ only.
UNIT_TESTS += tests/unit/test_fql
tests_unit_test_fql_SOURCES = tests/unit/test_fql.c
tests_unit_test_fql_LDADD = flow/libflow.a wire/libwire.la $(DEP_LIBS) \
	$(CMOCKA_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_fql_parse
tests_fuzz_fuzz_fql_parse_SOURCES = tests/fuzz/fuzz_fql_parse.c
tests_fuzz_fuzz_fql_parse_LDADD = flow/libflow.a wire/libwire.la \
	$(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_fql_parse_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_fql_parse

UNIT_TESTS += tests/unit/test_flow_cron
tests_unit_test_flow_cron_SOURCES = tests/unit/test_flow_cron.c \
	tests/unit/flow_cron_table.h
tests_unit_test_flow_cron_LDADD = flow/libflow.a $(CMOCKA_LIBS)

UNIT_TESTS += tests/unit/test_flow_schedule
tests_unit_test_flow_schedule_SOURCES = tests/unit/test_flow_schedule.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_schedule_LDADD = $(FLOW_TEST_LDADD)

FUZZ_TARGETS += tests/fuzz/fuzz_flow_schedule
tests_fuzz_fuzz_flow_schedule_SOURCES = tests/fuzz/fuzz_flow_schedule.c \
	tests/fuzz/fuzz_store_db.c tests/fuzz/fuzz_store_db.h
tests_fuzz_fuzz_flow_schedule_LDADD = flow/libflow.a store/libstore.a \
	wire/libwire.la $(FUZZ_DRIVER) $(DEP_LIBS)
tests_fuzz_fuzz_flow_schedule_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_flow_schedule

UNIT_TESTS += tests/unit/test_flow_gov
tests_unit_test_flow_gov_SOURCES = tests/unit/test_flow_gov.c \
	$(FLOW_TEST_UTIL)
tests_unit_test_flow_gov_LDADD = $(FLOW_TEST_LDADD)
