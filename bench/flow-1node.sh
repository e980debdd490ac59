#!/bin/bash
# flow-1node.sh [ARGS...]: lodebench flow (create -> claim -> complete
# cycles) against a fresh 1-node lodestone, one row per argument string
# (default: 50 connections, 20000 flows), with the server's CPU.
. "$(dirname "$0")/common.sh"
node1_start 18595
for args in "${@:-"-c 50 -n 20000"}"; do
	echo "== $args"
	# shellcheck disable=SC2086
	"$BIN/lodebench" flow --fsnp 127.0.0.1:18595 --server-pid $NODE_PID \
		$args 2>&1 | tail -4
done
node1_stop 18595
