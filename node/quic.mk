# node/quic: the Felix QUIC listener on the QUIC engine of net/.
node_libnode_a_SOURCES += node/quic_server.c node/quic_server.h

UNIT_TESTS += tests/unit/test_quic
tests_unit_test_quic_SOURCES = tests/unit/test_quic.c
tests_unit_test_quic_LDADD = node/libnode.a $(CLIENT_LIBS) \
	$(DEP_LIBS) $(CMOCKA_LIBS)
# The test makes the socket refuse sends (EAGAIN) through these wrappers.
tests_unit_test_quic_LDFLAGS = $(AM_LDFLAGS) \
	-Wl,--wrap=sendmsg -Wl,--wrap=sendmmsg

# Loopback throughput of the QUIC transport (not run by make check).
noinst_PROGRAMS += tests/bench_quic
tests_bench_quic_SOURCES = tests/bench_quic.c
tests_bench_quic_LDADD = node/libnode.a $(CLIENT_LIBS) $(DEP_LIBS)
