#!/bin/bash
# kv-table.sh 1|3: the lodebench kv rows of docs/benchmarks.md (1 and 50
# connections, pipeline 1 and 16, SET then GET) on a fresh 1-node
# lodestone or 3-node cluster (clients routed to each shard's leader);
# server CPU is the sum over the nodes, as a share of one vCPU.
. "$(dirname "$0")/common.sh"
NODES=${1:-1}
if [ "$NODES" = 1 ]; then
	node1_start 18388
	PIDS=$NODE_PID ADDR=127.0.0.1:18388 TOPO=
else
	cluster3_start
	PIDS=$CLUSTER_PIDS ADDR=127.0.0.1:19201 TOPO=--topology
fi
for row in "1 1 20000" "1 16 100000" "50 1 100000" "50 16 400000"; do
	set -- $row
	for t in set get; do
		t0=$(cpu_ticks $PIDS) s0=$(now)
		out=$("$BIN/lodebench" kv --fsnp $ADDR $TOPO -c $1 -P $2 -n $3 \
			-d 3 -r 100000 -t $t)
		t1=$(cpu_ticks $PIDS) s1=$(now)
		echo "nodes=$NODES $out cpu=$(cpu_share $t0 $t1 $s0 $s1)"
	done
done
if [ "$NODES" = 1 ]; then node1_stop 18388; else cluster3_stop; fi
