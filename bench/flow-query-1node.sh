#!/bin/bash
# flow-query-1node.sh [FLOWS...]: lodebench flow-query (point reads and
# LIMIT 50 pages over one partition) against a fresh 1-node lodestone, one
# row pair per partition size (default: 10000 and 100000 flows), with the
# server's CPU.
. "$(dirname "$0")/common.sh"
node1_start 18720
for n in "${@:-10000 100000}"; do
	echo "== $n flows"
	"$BIN/lodebench" flow-query --fsnp 127.0.0.1:18720 --server-pid \
		$NODE_PID -n "$n" -q 2000 2>&1 | tail -4
done
node1_stop 18720
