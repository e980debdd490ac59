#!/bin/bash
# flow-3node.sh [ARGS...]: lodebench flow (create -> claim -> complete
# cycles) against a fresh 3-node cluster through node 1's FSNP (requests
# for groups it does not lead are forwarded), one row per argument string
# (default: 50 connections, 20000 flows), with every node's CPU.
. "$(dirname "$0")/common.sh"
cluster3_start
pids=$(echo $CLUSTER_PIDS | tr ' ' ',')
for args in "${@:-"-c 50 -n 20000"}"; do
	echo "== $args"
	# shellcheck disable=SC2086
	"$BIN/lodebench" flow --fsnp 127.0.0.1:19201 --server-pid "$pids" \
		$args 2>&1 | tail -4
done
cluster3_stop
