#!/bin/bash
# all.sh: every benchmark script behind docs/benchmarks.md, in order, each
# timed: the lodestone KV rows on 1 and 3 nodes, the Redis rows, the
# interleaved SET and GET rounds against Redis, the RESP listener against
# Redis, the Felix and Flow rows, the FLOW.QUERY rows, 3 nodes with and
# without internal mTLS, the CPU-quota cluster comparison (as root),
# latency under load, idle and loaded costs of many groups and Felix beside
# NATS JetStream (when nats-server and libnats-dev are installed). Run on
# an otherwise idle machine; each step's time is printed
# (docs/benchmarks.md "Reproducing" has what is known of the runtime).
D=$(dirname "$0")
step() {
	local t0=$SECONDS
	echo "== $* ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$@"
	echo "== $1 took $((SECONDS - t0)) s"
}
echo "== start $(date) load $(cut -d' ' -f1-3 /proc/loadavg)"
step "$D/kv-table.sh" 1
step "$D/kv-table.sh" 3
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
	step "$D/redis-table.sh" always
	step "$D/redis-table.sh" no
	step "$D/kv-get-vs-redis.sh" 3
	step "$D/kv-set-vs-redis.sh" 3
	step "$D/resp-vs-redis.sh"
else
	echo "== no redis-server/redis-benchmark: the Redis rows are skipped"
fi
SECS=6 step "$D/felix-1node.sh" "--batch 64 --size 1024 --fanout 1" \
	"--batch 64 --size 1024 --fanout 10" "--batch 64 --size 256 --fanout 1" \
	"--batch 64 --size 256 --fanout 10" "--batch 64 --size 1024 --fanout 0" \
	"--batch 64 --size 256 --fanout 0" \
	"--mode latency --batch 1 --size 1024 --fanout 1"
step "$D/flow-1node.sh" "-c 50 -n 20000" "-c 50 -n 20000 --auto"
step "$D/flow-3node.sh" "-c 50 -n 20000"
step "$D/flow-query-1node.sh"
step "$D/kv-mtls.sh" 2
if [ "$(id -u)" -eq 0 ] && [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
	step "$D/cluster-quota.sh"
else
	echo "== not root or no cgroup v1 cpu controller: cluster-quota.sh skipped"
fi
step "$D/latency-under-load.sh"
step "$D/groups-scale.sh"
step "$D/groups-throughput.sh"
if command -v nats-server >/dev/null && pkg-config --exists libnats; then
	SECS=15 step "$D/felix-vs-nats.sh"
else
	echo "== felix-vs-nats skipped: apt-get install nats-server libnats-dev"
fi
echo "== end $(date) load $(cut -d' ' -f1-3 /proc/loadavg)"
