#!/bin/bash
# all.sh: the KV and Felix tables of docs/benchmarks.md in one go: the
# lodestone KV rows on 1 and 3 nodes, the Redis rows, the interleaved GET
# rounds, the 1-node Felix rows, Felix beside NATS JetStream (when
# nats-server and libnats-dev are installed). Run on an otherwise idle
# machine.
D=$(dirname "$0")
echo "== start $(date) load $(cut -d' ' -f1-3 /proc/loadavg)"
"$D/kv-table.sh" 1
"$D/kv-table.sh" 3
"$D/redis-table.sh" always
"$D/redis-table.sh" no
"$D/kv-get-vs-redis.sh" 3
SECS=6 "$D/felix-1node.sh" "--batch 64 --size 1024 --fanout 1" \
	"--batch 64 --size 1024 --fanout 10" "--batch 64 --size 256 --fanout 1" \
	"--batch 64 --size 256 --fanout 10" "--batch 64 --size 1024 --fanout 0" \
	"--batch 64 --size 256 --fanout 0" \
	"--mode latency --batch 1 --size 1024 --fanout 1"
if command -v nats-server >/dev/null && pkg-config --exists libnats; then
	SECS=15 "$D/felix-vs-nats.sh"
else
	echo "== felix-vs-nats skipped: apt-get install nats-server libnats-dev"
fi
echo "== end $(date) load $(cut -d' ' -f1-3 /proc/loadavg)"
