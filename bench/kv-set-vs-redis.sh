#!/bin/bash
# kv-set-vs-redis.sh [ROUNDS] [REQUESTS]: FSNP SET at 50 connections x
# pipeline 16 against a 1-node lodestone, interleaved round by round with
# redis-benchmark against `redis-server --appendfsync always` (a fresh
# server and data for every run). Prints ops/s, p50, the server's CPU (as
# a share of one vCPU), ops per server CPU-second, and the benchmark
# client's user + system CPU in seconds.
. "$(dirname "$0")/common.sh"
ROUNDS=${1:-5}
N=${2:-1500000}
for r in $(seq "$ROUNDS"); do
	node1_start 28388
	t0=$(cpu_ticks $NODE_PID) s0=$(now)
	out=$({ /usr/bin/time -f "client %U %S" "$BIN/lodebench" kv \
		--fsnp 127.0.0.1:28388 -c 50 -P 16 -n "$N" -d 3 -r 100000 \
		-t set; } 2>&1)
	t1=$(cpu_ticks $NODE_PID) s1=$(now)
	node1_stop 28388
	ops=$(echo "$out" | grep -o 'ops/s=[0-9]*' | cut -d= -f2)
	echo "round $r lodestone ops=$ops $(echo "$out" | grep -o 'p50_ms=[0-9.]*')" \
		"cpu=$(cpu_share $t0 $t1 $s0 $s1)" \
		"per_cpu_s=$(echo "$ops * ($s1 - $s0) * 100 / ($t1 - $t0)" | bc)" \
		"$(echo "$out" | grep '^client')"

	redis_start 16380 always
	t0=$(cpu_ticks $REDIS_PID) s0=$(now)
	out=$({ /usr/bin/time -f "client %U %S" redis-benchmark -p 16380 \
		-t set -n "$N" -c 50 -P 16 -d 3 -r 100000 --csv -q; } 2>&1)
	t1=$(cpu_ticks $REDIS_PID) s1=$(now)
	redis_stop 16380
	ops=$(echo "$out" | grep '"SET"' | cut -d'"' -f4 | cut -d. -f1)
	echo "round $r redis-always ops=$ops p50_ms=$(echo "$out" | grep '"SET"' | cut -d'"' -f6)" \
		"cpu=$(cpu_share $t0 $t1 $s0 $s1)" \
		"per_cpu_s=$(echo "$ops * ($s1 - $s0) * 100 / ($t1 - $t0)" | bc)" \
		"$(echo "$out" | grep '^client')"
done
