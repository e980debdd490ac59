#!/bin/bash
# redis-table.sh always|no: the redis-benchmark rows beside kv-table.sh's
# (same connections, pipelines, value size and keyspace) against a fresh
# redis-server with `appendfsync always` or without persistence.
. "$(dirname "$0")/common.sh"
MODE=${1:-always}
redis_start 16380 "$MODE"
for row in "1 1 20000" "1 16 100000" "50 1 100000" "50 16 400000"; do
	set -- $row
	for t in set get; do
		t0=$(cpu_ticks $REDIS_PID) s0=$(now)
		out=$(redis-benchmark -p 16380 -t $t -n $3 -c $1 -P $2 -d 3 \
			-r 100000 --csv -q | tail -1)
		t1=$(cpu_ticks $REDIS_PID) s1=$(now)
		echo "redis-$MODE c=$1 P=$2 $out cpu=$(cpu_share $t0 $t1 $s0 $s1)"
	done
done
redis_stop 16380
