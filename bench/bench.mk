# The benchmark scripts behind docs/benchmarks.md (run by hand, not by make).
EXTRA_DIST += bench/common.sh bench/all.sh bench/kv-table.sh \
	bench/redis-table.sh bench/resp-vs-redis.sh \
	bench/kv-set-vs-redis.sh bench/kv-set-ab.sh bench/kv-get-vs-redis.sh \
	bench/felix-1node.sh bench/flow-1node.sh bench/flow-3node.sh \
	bench/flow-query-1node.sh bench/kv-mtls.sh bench/cluster-quota.sh \
	bench/cluster_quota_report.py bench/latency-under-load.sh bench/groups-scale.sh \
	bench/groups-throughput.sh bench/felix-vs-nats.sh bench/nats_bench.c bench/bench.mk

# The benchmark programs, each beside the library it measures (not run by
# make check; docs/benchmarks.md has their commands).
BENCH_FSM = bench/bench_fsm.c bench/bench_fsm.h
# One node's raft groups: throughput, commit latency, fsyncs per second.
noinst_PROGRAMS += bench/bench_raft
bench_bench_raft_SOURCES = bench/bench_raft.c $(BENCH_FSM)
bench_bench_raft_LDADD = raft/liblsraft.a store/libstore.a net/libnet.la $(DEP_LIBS)
# Three raft stores over loopback TCP (docs/cluster.md).
noinst_PROGRAMS += bench/bench_cluster
bench_bench_cluster_SOURCES = bench/bench_cluster.c $(BENCH_FSM)
bench_bench_cluster_LDADD = raft/liblsraft.a store/libstore.a net/libnet.la $(DEP_LIBS)
# Apply throughput (stream appends, cache puts, KV sets).
noinst_PROGRAMS += bench/bench_store
bench_bench_store_SOURCES = bench/bench_store.c
bench_bench_store_LDADD = store/libstore.a $(DEP_LIBS)
# Loopback throughput of the QUIC transport.
noinst_PROGRAMS += bench/bench_quic
bench_bench_quic_SOURCES = bench/bench_quic.c
bench_bench_quic_LDADD = node/libnode.a $(CLIENT_LIBS) $(DEP_LIBS)
