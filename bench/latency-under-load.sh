#!/bin/bash
# latency-under-load.sh: latency at a fixed offered load. For FSNP SET, FSNP
# GET and Felix publish (64 x 1 KiB), on a fresh 1-node and a fresh 3-node
# cluster: first the saturation throughput (closed loop: lodebench kv -c 50
# -P 16, lodebench felix 4 connections x window 16), then open-loop runs at
# a fixed rate of 25 %, 50 % and 90 % of it (lodebench --rate: requests
# leave on schedule whatever the replies do, latency from the scheduled
# time), each reporting p50/p90/p99/p999/max. Prints a Markdown table.
#
#   bench/latency-under-load.sh
#
# Environment: SECS (seconds per run, default 5), SAT_SECS (seconds of the
# saturation run, default 5), NODES (default "1 3"), WORKLOADS (default
# "set get publish"; get runs after set, which fills the keyspace), LOADS
# (percentages, default "25 50 90"), SETTLE (seconds after the election,
# default 6). The nodes use ports 6110I-6140I on 127.0.0.1 (common.sh
# nodes_start) and are stopped on exit. Raw results (one JSON object per
# run) go to $BENCH_DIR/latency-under-load.jsonl.
. "$(dirname "$0")/common.sh"

SECS=${SECS:-5}
SAT_SECS=${SAT_SECS:-5}
NODES=${NODES:-"1 3"}
WORKLOADS=${WORKLOADS:-"set get publish"}
LOADS=${LOADS:-"25 50 90"}
SETTLE=${SETTLE:-6}
OUT=$BENCH_DIR/latency-under-load.jsonl
DATA=$BENCH_DIR/lul

# shellcheck disable=SC2034 # read by nodes_start
NODE_ARGS=()
trap nodes_stop EXIT
trap 'exit 1' INT TERM

# run WORKLOAD LEADER [RATE]: one lodebench run, its JSON result.
run() {
	local w=$1 l=$2 rate=() pids
	[ -n "$3" ] && rate=(--rate "$3")
	pids=$(
		IFS=,
		echo "${NODE_PIDS[*]}"
	)
	case $w in
	set | get)
		timeout $((SECS + SAT_SECS + 60)) "$BIN/lodebench" kv \
			--fsnp 127.0.0.1:6120"$l" --topology -c 50 -P 16 -d 3 -r 100000 \
			-t "$w" --seconds "${4:-$SECS}" --server-pid "$pids" "${rate[@]}" --json
		;;
	publish)
		timeout $((SECS + SAT_SECS + 60)) "$BIN/lodebench" felix \
			--felix 127.0.0.1:6130"$l" --ca "$DATA/n$l/tls/dev-cert.pem" \
			--stream lul --fanout 0 --batch 64 --size 1024 --conns 4 --window 16 \
			--seconds "${4:-$SECS}" --server-pid "$pids" "${rate[@]}" --json
		;;
	esac | tail -1
}

echo "== latency-under-load start $(date -u) commit $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$OUT"
for n in $NODES; do
	nodes_start "$n" "$DATA"
	sleep "$SETTLE"
	l=1
	[ "$n" = 3 ] && l=$(nodes_data_leader)
	curl -s -X POST 127.0.0.1:6140"$l"/v1/streams/t1/default/lul \
		-d '{"shards":4}' >/dev/null
	for w in $WORKLOADS; do
		sat=$(run "$w" "$l" "" "$SAT_SECS")
		if [ -z "$sat" ]; then
			echo "latency-under-load: $w on $n node(s): no saturation result" >&2
			continue
		fi
		echo "{\"nodes\":$n,\"workload\":\"$w\",\"load\":100,\"bench\":$sat}" >>"$OUT"
		ops=$(echo "$sat" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["ops_per_s"]))')
		echo "nodes=$n $w saturation $ops ops/s"
		for pct in $LOADS; do
			offered=$((ops * pct / 100))
			[ "$offered" -lt 1 ] && offered=1
			res=$(run "$w" "$l" "$offered")
			[ -z "$res" ] && continue
			echo "{\"nodes\":$n,\"workload\":\"$w\",\"load\":$pct,\"bench\":$res}" >>"$OUT"
			echo "nodes=$n $w $pct% ($offered/s): $(echo "$res" | python3 -c 'import json,sys; r=json.load(sys.stdin); l=r["latency_us"]; print("p50 %d p99 %d p999 %d us, late %d" % (l["p50"], l["p99"], l["p999"], r["late"]))')"
		done
	done
	nodes_stop
done
echo "== latency-under-load end $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("\n| workload | nodes | load | offered ops/s | achieved ops/s | p50 ms | p90 ms | p99 ms | p999 ms | max ms | late | servers CPU us/op |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in runs:
    b = r["bench"]
    l = b["latency_us"]
    load = "saturation (closed loop)" if r["load"] == 100 else "%d %%" % r["load"]
    print("| %s | %d | %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.1f |" % (
        {"set": "FSNP SET", "get": "FSNP GET", "publish": "Felix publish 64 x 1 KiB"}[r["workload"]],
        r["nodes"], load, b["rate"] or "-", b["ops_per_s"],
        l["p50"] / 1000, l["p90"] / 1000, l["p99"] / 1000, l["p999"] / 1000,
        l["max"] / 1000, b["late"] if b["rate"] else "-",
        b["servers_cpu_us_per_op"]))
EOF
