# The benchmark scripts behind docs/benchmarks.md (run by hand, not by make).
EXTRA_DIST += bench/common.sh bench/all.sh bench/kv-table.sh \
	bench/redis-table.sh bench/kv-set-vs-redis.sh bench/kv-get-vs-redis.sh \
	bench/felix-1node.sh bench/bench.mk
