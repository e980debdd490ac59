#!/bin/bash
# felix-vs-nats.sh [1|3 ...]: Felix on lodestone beside NATS JetStream
# (Debian's nats-server), acked publishing, in one run, cells alternated:
# 1 KiB and 256 B messages, "batch" and "one" (one at a time) publishing,
# on 1 node and on 3 nodes (R=3) by default. SECS seconds per cell
# (default 15). Prints one table: MB/s acked, server CPU (every server
# process, from /proc/PID/stat), MB per server CPU-second, and p50 / p99 /
# p999 of the acked publish where the client times each ack.
#
# Durability as run: lodestone acknowledges a publish after its Raft entry
# is fsynced (on a quorum for 3 nodes) and applied. nats-server 2.9 has no
# `sync_interval: always`: JetStream file storage acknowledges once the
# message is written to its block file (on the stream's quorum for R=3) and
# fsyncs on its default interval (2 min), so its acks are not on disk.
#
# Client concurrency is the same on both sides: batch = 4 connections with
# 1024 messages in flight each (Felix: window 16 x 64-record batches, one
# ack per batch; NATS: js_PublishMsgAsync, PublishAsync.MaxPending 1024
# (NATS_WINDOW), one ack per message); one = 1 connection, one
# message, wait for its ack, next (lodebench --mode latency --batch 1
# --fanout 1; NATS js_Publish). No subscribers on the NATS side nor in
# Felix's batch cells; Felix's one-at-a-time cells carry one live
# subscriber, whose delivery the Felix server CPU includes.
#
# Needs nats-server and libnats-dev (Debian packages). The NATS client is
# bench/nats_bench.c, built here when missing or older than its source:
#   cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -o $BENCH_DIR/nats_bench \
#      bench/nats_bench.c $(pkg-config --cflags --libs libnats) -lpthread
. "$(dirname "$0")/common.sh"
SECS=${SECS:-15}
NATS_WINDOW=${NATS_WINDOW:-1024}
command -v nats-server >/dev/null || {
	echo "bench: no nats-server (apt-get install nats-server)" >&2
	exit 1
}
NB=$BENCH_DIR/nats_bench
if [ ! -x "$NB" ] || [ "$BENCH_ROOT/bench/nats_bench.c" -nt "$NB" ]; then
	pkg-config --exists libnats || {
		echo "bench: no libnats (apt-get install libnats-dev)" >&2
		exit 1
	}
	# shellcheck disable=SC2046
	cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -o "$NB" \
		"$BENCH_ROOT/bench/nats_bench.c" \
		$(pkg-config --cflags --libs libnats) -lpthread || exit 1
fi

NATS_PIDS=""
nats_stop() {
	local p
	for p in $NATS_PIDS; do kill "$p" 2>/dev/null; done
	for p in $NATS_PIDS; do
		timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null
	done
	NATS_PIDS=""
	rm -rf "$BENCH_DIR"/nats-*
}

# nats_start N: N JetStream servers n1..nN, client port 1422I, monitor
# 1423I, cluster routes 1424I (N > 1); waits for a meta leader.
nats_start() {
	local n=$1 i dir routes="" u
	nats_stop
	for i in $(seq 1 "$n"); do routes="$routes${routes:+,}nats-route://127.0.0.1:1424$i"; done
	for i in $(seq 1 "$n"); do
		dir=$BENCH_DIR/nats-$i
		mkdir -p "$dir"
		{
			echo "server_name: n$i"
			echo "listen: 127.0.0.1:1422$i"
			echo "http: 127.0.0.1:1423$i"
			echo "jetstream { store_dir: \"$dir/js\" }"
			if [ "$n" -gt 1 ]; then
				echo "cluster { name: bench, listen: 127.0.0.1:1424$i,"
				echo "  routes: [$routes] }"
			fi
		} >"$dir/nats.conf"
		nats-server -c "$dir/nats.conf" >"$dir.log" 2>&1 &
		NATS_PIDS="$NATS_PIDS $!"
	done
	for i in $(seq 1 120); do
		u=$(curl -s 127.0.0.1:14231/jsz)
		if [ "$n" -eq 1 ]; then
			echo "$u" | grep -q '"config"' && return 0
		else
			echo "$u" | grep -q '"leader"' && return 0
		fi
		sleep 0.5
	done
	echo "bench: nats-server did not come up (see $BENCH_DIR/nats-1.log)" >&2
	exit 1
}

cleanup() {
	nats_stop
	node1_stop 18585
	cluster3_stop
	rm -rf "$BENCH_DIR/n1-18585" "$BENCH_DIR"/c3-[123]
}
trap cleanup EXIT

# cell SIDE NODES SIZE MODE CMD...: runs CMD (bounded), measures the server
# CPU of $PIDS (the side's server pids, set by the caller) around it and
# prints one table row.
# shellcheck disable=SC2086,SC2153
cell() {
	local side=$1 nodes=$2 size=$3 mode=$4 out t0 t1 c0 c1 cpu mbs lat n secs
	shift 4
	c0=$(cpu_ticks $PIDS)
	t0=$(now)
	out=$(timeout $((SECS + 60)) "$@" 2>&1)
	t1=$(now)
	c1=$(cpu_ticks $PIDS)
	cpu=$(echo "scale=2; ($c1 - $c0) / 100" | bc)
	case $side in
	felix)
		if [ "$mode" = batch ]; then
			mbs=$(echo "$out" | sed -n 's/.*acked (\([0-9.]*\) MB\/s).*/\1/p')
			lat="- | - | -"
		else
			n=$(echo "$out" | sed -n 's/.*: \([0-9]*\) acks in \([0-9.]*\) s.*/\1/p')
			secs=$(echo "$out" | sed -n 's/.*: \([0-9]*\) acks in \([0-9.]*\) s.*/\2/p')
			[ -n "$n" ] && mbs=$(echo "scale=2; $n * $size / 1000000 / $secs" | bc)
			lat=$(echo "$out" | sed -n 's/.*p50 \([0-9]*\) us, p99 \([0-9]*\) us, p999 \([0-9]*\) us.*/\1 | \2 | \3/p')
		fi
		;;
	nats)
		mbs=$(echo "$out" | sed -n 's/.*acked (\([0-9.]*\) MB\/s).*/\1/p')
		lat=$(echo "$out" | sed -n 's/.*p50 \([0-9]*\) us, p99 \([0-9]*\) us, p999 \([0-9]*\) us.*/\1 | \2 | \3/p')
		;;
	esac
	if [ -z "$mbs" ] || [ -z "$lat" ]; then
		echo "bench: $side $nodes-node $size B $mode failed: $out" >&2
		echo "| $nodes | $side | $size B | $mode | failed | | | | | |"
		return
	fi
	# MB acked over the client's run / server CPU seconds over it.
	local wall
	wall=$(echo "$t1 - $t0" | bc)
	echo "| $nodes | $side | $size B | $mode | $mbs | $cpu s / $(printf %.1f "$wall") s | $(echo "scale=1; $mbs * $SECS / $cpu" | bc) | $lat |"
	echo "   $out" >&2
}

felix_args() { # size mode
	if [ "$2" = batch ]; then
		echo "--batch 64 --size $1 --fanout 0 --conns 4 --window 16"
	else
		# One subscriber: lodebench's latency mode with fanout 0
		# waits tens of ms per ack (see docs/benchmarks.md).
		echo "--mode latency --batch 1 --size $1 --fanout 1"
	fi
}

nats_args() { # size mode
	if [ "$2" = batch ]; then
		echo "--mode batch --size $1 --conns 4 --window $NATS_WINDOW"
	else
		echo "--mode sync --size $1 --conns 1"
	fi
}

echo "== felix-vs-nats $(date -u '+%F %T') UTC, commit $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null), $SECS s per cell, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| nodes | side | size | publish | MB/s acked | server CPU / wall | MB per server CPU-s | p50 us | p99 us | p999 us |"
echo "|---|---|---|---|---|---|---|---|---|---|"
[ $# -gt 0 ] || set -- 1 3
for nodes in "$@"; do
	if [ "$nodes" = 1 ]; then
		node1_start 18585
		FPIDS=$NODE_PID
		FELIX=(--felix 127.0.0.1:18586 --ca "$BENCH_DIR/n1-18585/tls/dev-cert.pem")
		nats_start 1
		NURL=nats://127.0.0.1:14221
	else
		cluster3_start
		FPIDS=$CLUSTER_PIDS
		sleep 8 # leaderships settle, as in the 3-node Felix rows
		curl -s -X POST -d '{"shards":4}' 127.0.0.1:19401/v1/streams/t1/default/bench3 >/dev/null
		L=""
		for i in $(seq 1 40); do
			L=$(curl -s 127.0.0.1:19401/v1/streams/t1/default/bench3 | python3 -c \
				'import json,sys; d=json.load(sys.stdin); print([s for s in d["shard_state"] if s["shard"]==0][0].get("leader",""))' 2>/dev/null)
			[ -n "$L" ] && break
			sleep 0.5
		done
		[ -n "$L" ] || { echo "bench: no leader for bench3 shard 0" >&2; exit 1; }
		FELIX=(--felix 127.0.0.1:1930"$L" --ca "$BENCH_DIR/c3-$L/tls/dev-cert.pem"
			--sub-felix 127.0.0.1:1930"$L" --sub-ca "$BENCH_DIR/c3-$L/tls/dev-cert.pem"
			--stream bench3)
		nats_start 3
		NURL=nats://127.0.0.1:14221,nats://127.0.0.1:14222,nats://127.0.0.1:14223
	fi
	for size in 1024 256; do
		for mode in batch one; do
			# shellcheck disable=SC2046
			PIDS=$FPIDS cell felix "$nodes" $size $mode "$BIN/lodebench" felix \
				"${FELIX[@]}" --seconds "$SECS" $(felix_args $size $mode)
			# shellcheck disable=SC2046
			PIDS=$NATS_PIDS cell nats "$nodes" $size $mode "$NB" --url "$NURL" \
				--stream "s${nodes}_${size}_$mode" --replicas "$nodes" \
				--seconds "$SECS" $(nats_args $size $mode)
		done
	done
	if [ "$nodes" = 1 ]; then node1_stop 18585; else cluster3_stop; fi
	nats_stop
done
echo "== end $(date -u '+%T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
