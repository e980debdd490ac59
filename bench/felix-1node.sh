#!/bin/bash
# felix-1node.sh [ARGS...]: lodebench felix throughput rows against a
# fresh 1-node lodestone, one row per argument string (default: batch 64
# x 1 KiB, fanout 1), SECS seconds each (default 6).
. "$(dirname "$0")/common.sh"
node1_start 18585
for args in "${@:-"--batch 64 --size 1024 --fanout 1"}"; do
	echo "== $args"
	# shellcheck disable=SC2086
	"$BIN/lodebench" felix --felix 127.0.0.1:18586 \
		--ca "$BENCH_DIR/n1-18585/tls/dev-cert.pem" --server-pid $NODE_PID \
		--seconds "${SECS:-6}" $args 2>&1 | tail -4
done
node1_stop 18585
