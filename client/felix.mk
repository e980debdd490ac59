# client/felix: the Felix half of liblodestone (felix_client) and the
# `lodectl felix|stream|cache` and `lodebench felix` commands.
client_liblodestone_la_SOURCES += \
	client/felix_client.c client/felix_client.h \
	client/felix_token.c client/felix_token.h

# lodectl: the dispatch table lives in client/lodectl.c (one line per
# family); other families append their files to lodectl_SOURCES.
bin_PROGRAMS += lodectl
lodectl_SOURCES = client/lodectl.c client/lodectl.h \
	client/lodectl_scopes.c client/lodectl_felix.c client/lodectl_token.c \
	client/lodectl_cert.c
lodectl_LDADD = $(CLIENT_LIBS) $(DEP_LIBS)

# lodebench: the dispatch table lives in client/lodebench.c (one line per
# family); other families append their files to lodebench_SOURCES.
bin_PROGRAMS += lodebench
lodebench_SOURCES = client/lodebench.c client/lodebench.h \
	client/lodebench_felix.c client/bench_hist.c client/bench_hist.h \
	client/bench_sched.c client/bench_sched.h client/bench_report.c \
	client/bench_report.h client/bench_pacer.c client/bench_pacer.h \
	client/bench_zipf.c client/bench_zipf.h
lodebench_LDADD = $(CLIENT_LIBS) $(DEP_LIBS)

# lodebench's latency histogram, open-loop schedule and Zipf keys (pure).
UNIT_TESTS += tests/unit/test_bench_stats
tests_unit_test_bench_stats_SOURCES = tests/unit/test_bench_stats.c \
	client/bench_hist.c client/bench_sched.c client/bench_zipf.c
tests_unit_test_bench_stats_LDADD = $(CMOCKA_LIBS) -lm

# lodectl cert's subjectAltName builder.
UNIT_TESTS += tests/unit/test_lodectl_cert
tests_unit_test_lodectl_cert_SOURCES = tests/unit/test_lodectl_cert.c \
	client/lodectl_cert.c
tests_unit_test_lodectl_cert_LDADD = $(DEP_LIBS) $(CMOCKA_LIBS)
