#!/bin/bash
# kv-get-vs-redis.sh [ROUNDS]: FSNP GET at 50 connections x pipeline 16
# per server CPU-second, a 1-node lodestone against redis-server with
# `appendfsync always` and without persistence, each loaded with the same
# 100 000 keys first; the three take turns in every round.
. "$(dirname "$0")/common.sh"
ROUNDS=${1:-3}
node1_start 28388
"$BIN/lodebench" kv --fsnp 127.0.0.1:28388 -c 50 -P 16 -n 400000 -d 3 \
	-r 100000 -t set >/dev/null
redis_start 16381 always
RA=$REDIS_PID
redis_start 16382 no
RN=$REDIS_PID
for p in 16381 16382; do
	redis-benchmark -p $p -t set -n 400000 -c 50 -P 16 -d 3 -r 100000 -q >/dev/null
done
per_cpu() { echo "$1 / $2" | bc; }
for r in $(seq "$ROUNDS"); do
	t0=$(cpu_ticks $NODE_PID) s0=$(now)
	ops=$("$BIN/lodebench" kv --fsnp 127.0.0.1:28388 -c 50 -P 16 -n 800000 \
		-d 3 -r 100000 -t get | grep -o 'ops/s=[0-9]*' | cut -d= -f2)
	t1=$(cpu_ticks $NODE_PID) s1=$(now)
	c=$(echo "scale=3; ($t1 - $t0) / 100 / ($s1 - $s0)" | bc)
	echo "round $r lodestone GET ops=$ops cpu=$c per_cpu_s=$(per_cpu $ops $c)"
	for m in always no; do
		if [ $m = always ]; then p=16381 pid=$RA; else p=16382 pid=$RN; fi
		t0=$(cpu_ticks $pid) s0=$(now)
		ops=$(redis-benchmark -p $p -t get -n 800000 -c 50 -P 16 -d 3 \
			-r 100000 --csv -q | grep '"GET"' | cut -d'"' -f4 | cut -d. -f1)
		t1=$(cpu_ticks $pid) s1=$(now)
		c=$(echo "scale=3; ($t1 - $t0) / 100 / ($s1 - $s0)" | bc)
		echo "round $r redis-$m GET ops=$ops cpu=$c per_cpu_s=$(per_cpu $ops $c)"
	done
done
node1_stop 28388
redis_stop 16381
redis_stop 16382
