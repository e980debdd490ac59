# jepsen/: fault-testing checkers (see jepsen/README.md). Not part of the
# node: libjepsen.a is linked only into jepsen/check and its tests.
noinst_LIBRARIES += jepsen/libjepsen.a
jepsen_libjepsen_a_SOURCES = \
	jepsen/anomaly.c jepsen/anomaly.h \
	jepsen/countercheck.c jepsen/countercheck.h \
	jepsen/flowcheck.c jepsen/flowcheck.h \
	jepsen/history.c jepsen/history.h \
	jepsen/intern.c jepsen/intern.h \
	jepsen/lincheck.c jepsen/lincheck.h \
	jepsen/oncecheck.c jepsen/oncecheck.h \
	jepsen/queuecheck.c jepsen/queuecheck.h \
	jepsen/setcheck.c jepsen/setcheck.h \
	jepsen/streamcheck.c jepsen/streamcheck.h \
	jepsen/watchcheck.c jepsen/watchcheck.h \
	jepsen/workload.c jepsen/workload.h

noinst_PROGRAMS += jepsen/check
jepsen_check_SOURCES = jepsen/check.c
jepsen_check_LDADD = jepsen/libjepsen.a

EXTRA_DIST += jepsen/README.md

UNIT_TESTS += tests/unit/test_jepsen_lincheck tests/unit/test_jepsen_history \
	tests/unit/test_jepsen_checkers tests/unit/test_jepsen_cli
tests_unit_test_jepsen_lincheck_SOURCES = tests/unit/test_jepsen_lincheck.c
tests_unit_test_jepsen_lincheck_LDADD = jepsen/libjepsen.a $(CMOCKA_LIBS)
tests_unit_test_jepsen_history_SOURCES = tests/unit/test_jepsen_history.c
tests_unit_test_jepsen_history_LDADD = jepsen/libjepsen.a $(CMOCKA_LIBS)
JEPSEN_TEST_HELPERS = tests/unit/jepsen_test_util.c \
	tests/unit/jepsen_test_util.h
tests_unit_test_jepsen_checkers_SOURCES = tests/unit/test_jepsen_checkers.c \
	$(JEPSEN_TEST_HELPERS)
tests_unit_test_jepsen_checkers_LDADD = jepsen/libjepsen.a $(CMOCKA_LIBS)
UNIT_TESTS += tests/unit/test_jepsen_watchcheck
tests_unit_test_jepsen_watchcheck_SOURCES = \
	tests/unit/test_jepsen_watchcheck.c $(JEPSEN_TEST_HELPERS)
tests_unit_test_jepsen_watchcheck_LDADD = jepsen/libjepsen.a $(CMOCKA_LIBS)
# Runs the jepsen/check program, so it must be built first.
tests_unit_test_jepsen_cli_SOURCES = tests/unit/test_jepsen_cli.c
tests_unit_test_jepsen_cli_LDADD = $(CMOCKA_LIBS)
tests_unit_test_jepsen_cli_DEPENDENCIES = jepsen/check

FUZZ_TARGETS += tests/fuzz/fuzz_jepsen_history
tests_fuzz_fuzz_jepsen_history_SOURCES = tests/fuzz/fuzz_jepsen_history.c
tests_fuzz_fuzz_jepsen_history_LDADD = jepsen/libjepsen.a $(FUZZ_DRIVER)
tests_fuzz_fuzz_jepsen_history_LDFLAGS = $(FUZZER_LINKFLAGS)
EXTRA_DIST += tests/fuzz/corpus/fuzz_jepsen_history

# Fault-injection hosts and nemeses (jepsen/hosts.h, jepsen/nemesis.h) and
# the jepsen/run entry point; see docs/fault-testing.md.
noinst_LIBRARIES += jepsen/libjhosts.a
jepsen_libjhosts_a_SOURCES = \
	jepsen/crashlog.c jepsen/crashlog.h \
	jepsen/hosts.c jepsen/hosts.h \
	jepsen/nemesis.c jepsen/nemesis.h \
	jepsen/selftest.c jepsen/selftest.h

noinst_PROGRAMS += jepsen/run
jepsen_run_SOURCES = jepsen/run.c
jepsen_run_LDADD = jepsen/libjhosts.a

EXTRA_DIST += docs/fault-testing.md jepsen/schedules/kill2-pause1.sched \
	jepsen/schedules/membership-quick.sched \
	jepsen/schedules/membership-stress.sched

UNIT_TESTS += tests/unit/test_jepsen_nemesis
tests_unit_test_jepsen_nemesis_SOURCES = tests/unit/test_jepsen_nemesis.c
tests_unit_test_jepsen_nemesis_LDADD = jepsen/libjhosts.a $(CMOCKA_LIBS)

# node/crash.c's handler in a faulting child, and the harness's reading of
# its reports (jepsen/crashlog.c).
UNIT_TESTS += tests/unit/test_jepsen_crashlog
tests_unit_test_jepsen_crashlog_SOURCES = tests/unit/test_jepsen_crashlog.c \
	node/crash.c node/crash.h
tests_unit_test_jepsen_crashlog_LDADD = jepsen/libjhosts.a $(CMOCKA_LIBS)

# Root only: real namespaces, iptables and lodestone processes ($LS_LODESTONE).
INTEGRATION_TESTS += tests/integration/test_jepsen_hosts
tests_integration_test_jepsen_hosts_SOURCES = \
	tests/integration/test_jepsen_hosts.c
tests_integration_test_jepsen_hosts_LDADD = jepsen/libjhosts.a $(CMOCKA_LIBS)

# Workloads (jepsen/workload_driver.h): clients that record histories
# while the nemesis runs, and the checks of those histories; linked into
# jepsen/run with the client library.
noinst_LIBRARIES += jepsen/libjwork.a
jepsen_libjwork_a_SOURCES = \
	jepsen/workload_cluster.c jepsen/workload_cluster.h \
	jepsen/workload_counter.c \
	jepsen/workload_driver.c jepsen/workload_driver.h \
	jepsen/workload_felix.c jepsen/workload_felix.h \
	jepsen/workload_flow.c \
	jepsen/workload_hist.c jepsen/workload_hist.h \
	jepsen/workload_idem.c \
	jepsen/workload_impl.h \
	jepsen/workload_member.c jepsen/workload_member.h \
	jepsen/workload_queue.c \
	jepsen/workload_register.c \
	jepsen/workload_stream.c \
	jepsen/workload_watch.c
jepsen_run_LDADD += jepsen/libjwork.a jepsen/libjepsen.a jepsen/libjhosts.a \
	$(CLIENT_LIBS) $(DEP_LIBS)

# lodestone-faulty: the daemon with the fault hooks of raft/replica.c,
# flow/flow_ops.c and flow/flow_schedule.c (LS_FAULT_HOOKS; switched on at
# run time by LODESTONE_FAULT=ack-before-commit, read-no-barrier,
# flow-no-fencing or flow-sched-refire)
# for proving that the checkers catch broken guarantees. The raft and flow
# sources are compiled again with the define; their objects come before
# the libraries, so the normal liblsraft.a and libflow.a contribute
# nothing. Built by `make` with --enable-fault-hooks, and on
# demand (`make lodestone-faulty`, `make jepsen-quick`) otherwise; the
# normal build is untouched.
if FAULT_HOOKS
noinst_PROGRAMS += lodestone-faulty
else
EXTRA_PROGRAMS += lodestone-faulty
endif
lodestone_faulty_SOURCES = node/main.c $(raft_liblsraft_a_SOURCES) \
	$(flow_libflow_a_SOURCES)
lodestone_faulty_CPPFLAGS = $(AM_CPPFLAGS) -DLS_FAULT_HOOKS
lodestone_faulty_LDADD = node/libnode.a $(NODE_LIBS) $(DEP_LIBS)
CLEANFILES += lodestone-faulty

# The quick fault suite (root): every available workload under the mixed
# nemesis on 3 nodes (about 60 s each), and the fault-hook proofs (runs
# of lodestone-faulty that must be caught). Run directories go to
# jepsen-runs/quick/ (node data removed). See docs/fault-testing.md.
EXTRA_PROGRAMS += tests/integration/test_jepsen_quick
tests_integration_test_jepsen_quick_SOURCES = \
	tests/integration/test_jepsen_quick.c
tests_integration_test_jepsen_quick_LDADD = $(CMOCKA_LIBS)
CLEANFILES += tests/integration/test_jepsen_quick

# The sanitizer build's lodestone for the register-asan case: by default
# the one ./dev asan builds beside this build directory (build/asan); the
# case is skipped when it does not exist.
JEPSEN_ASAN_LODESTONE ?= $(abs_top_builddir)/../asan/lodestone

.PHONY: jepsen-quick
jepsen-quick: lodestone lodestone-faulty jepsen/run jepsen/check \
		tests/integration/test_jepsen_quick
	LS_JEPSEN_RUN='$(abs_top_builddir)/jepsen/run' \
	LS_LODESTONE='$(abs_top_builddir)/lodestone' \
	LS_LODESTONE_FAULTY='$(abs_top_builddir)/lodestone-faulty' \
	LS_LODESTONE_ASAN='$(JEPSEN_ASAN_LODESTONE)' \
	LS_JEPSEN_QUICK_DIR='$(abs_top_builddir)/jepsen-runs/quick' \
	LS_JEPSEN_SCHEDULES='$(abs_top_srcdir)/jepsen/schedules' \
	  ./tests/integration/test_jepsen_quick
