#!/bin/bash
# kv-mtls.sh [ROUNDS]: 3-node lodebench kv SET with and without internal
# mutual TLS (docs/benchmarks.md "Internal mTLS"), rounds interleaved, each
# on a fresh cluster (certificates from lodectl cert); server CPU is the sum
# over the nodes, as a share of one vCPU. The nodes are stopped by pid.
. "$(dirname "$0")/common.sh"
ROUNDS=${1:-2}
CERTS=$BENCH_DIR/mtls-certs
rm -rf "$CERTS" && mkdir -p "$CERTS/ca" "$CERTS/nodes"
"$BIN/lodectl" cert ca --out-dir "$CERTS/ca" >/dev/null || exit 1
for i in 1 2 3; do
	"$BIN/lodectl" cert node $i --ca-dir "$CERTS/ca" \
		--out-dir "$CERTS/nodes" --host 127.0.0.1 >/dev/null || exit 1
done

# start MODE (plain|mtls): a fresh 3-node cluster; sets PIDS.
start() {
	local i tls
	PIDS=""
	for i in 1 2 3; do
		tls=()
		if [ "$1" = mtls ]; then
			tls=(--internal-tls-cert "$CERTS/nodes/node-$i.crt"
				--internal-tls-key "$CERTS/nodes/node-$i.key"
				--internal-tls-ca "$CERTS/ca/ca.crt")
		fi
		rm -rf "$BENCH_DIR/m3-$i" && mkdir -p "$BENCH_DIR/m3-$i"
		"$BIN/lodestone" --dev --data "$BENCH_DIR/m3-$i" --node-id $i \
			--peers 1=127.0.0.1:19501,2=127.0.0.1:19502,3=127.0.0.1:19503 \
			--internal 127.0.0.1:1950$i --fsnp 127.0.0.1:1960$i \
			--felix 127.0.0.1:1970$i --admin 127.0.0.1:1980$i \
			"${tls[@]}" --log-level warn >"$BENCH_DIR/m3-$i.log" 2>&1 &
		PIDS="$PIDS $!"
	done
	if ! all_leaders 19801; then
		echo "bench: the 3-node cluster did not elect every leader" >&2
		stop
		exit 1
	fi
}

stop() {
	local p
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do
		for _ in $(seq 1 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
	done
}

for r in $(seq 1 "$ROUNDS"); do
	for mode in plain mtls; do
		start $mode
		for row in "1 1 20000" "50 16 400000"; do
			set -- $row
			t0=$(cpu_ticks $PIDS) s0=$(now)
			out=$("$BIN/lodebench" kv --fsnp 127.0.0.1:19601 --topology \
				-c $1 -P $2 -n $3 -d 3 -r 100000 -t set)
			t1=$(cpu_ticks $PIDS) s1=$(now)
			echo "round=$r mode=$mode $out cpu=$(cpu_share $t0 $t1 $s0 $s1)"
		done
		stop
	done
done
