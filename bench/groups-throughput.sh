#!/usr/bin/env bash
# Throughput with many data groups (docs/benchmarks.md "Many groups, under
# load"): FSNP SET with Zipf-skewed keys and Felix acked publishes spread
# over a stream with one shard per group, on a fresh cluster with --shards
# 64 and then --shards 10000 (or the COUNTS given), alternating the two in
# each of ROUNDS rounds so both see the same machine; a fresh cluster and
# data directories for every run. Per run:
#   SET     lodebench kv --topology -c 50 -P 16 -d 3 -r KEYSPACE
#           --zipf ZIPF -t set, SECS seconds
#   Felix   a stream t1/default/gt with as many shards as groups (admin
#           POST /v1/streams), then lodebench felix --keys 1000000
#           --batch 64 --size 1024 --fanout 0 --conns 4 --window 16,
#           SECS seconds: every batch carries a random key, so publishes
#           reach every shard and so every group
# and the servers' CPU per operation (utime + stime of every lodestone
# process over the run, /proc/PID/stat, through lodebench --server-pid).
# Refused requests (BUSY under overload) are counted in the row, not fatal.
# Prints one row per run, then per configuration the mean and the ratio
# of the last count to the first.
# Usage: bench/groups-throughput.sh [COUNTS...]   (default 64 10000)
# Env: NODES ("1 3"), ROUNDS (2), SECS (8), SETTLE (3), KEYSPACE (1000000),
# ZIPF (0.99; 0 for uniform keys), PORT (17600: uses PORT..PORT+23; below the 20000-32000 the
# integration tests draw ports from), BIN, BENCH_DIR.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$top/build/main}
BENCH_DIR=${BENCH_DIR:-/tmp/lodestone-bench}/groups-tput-$$
read -r -a NODES <<<"${NODES:-1 3}"
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-8}
SETTLE=${SETTLE:-3}
KEYSPACE=${KEYSPACE:-1000000}
ZIPF=${ZIPF:-0.99}
PORT=${PORT:-17600}
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(64 10000)
for b in lodestone lodebench; do
	[ -x "$BIN/$b" ] || { echo "groups-throughput: no $BIN/$b (build first)" >&2; exit 1; }
done
mkdir -p "$BENCH_DIR"

status() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "127.0.0.1:$1$2"; }
admin() { echo $((PORT + 10 * ($1 - 1) + 2)); }

declare -a PIDS
# Node i of a cluster of n (1 or 3) with g groups; sets PIDS[i].
spawn() {
	local i=$1 g=$2 n=$3 dir=$BENCH_DIR/n$3-$1
	local p=$((PORT + 10 * (i - 1)))
	local args=(--dev --data "$dir" --shards "$g" --fsnp "127.0.0.1:$p"
		--felix 127.0.0.1:$((p + 1)) --admin 127.0.0.1:$((p + 2))
		--log-level warn)
	if [ "$n" = 3 ]; then
		args+=(--node-id "$i" --internal 127.0.0.1:$((p + 3))
			--peers "1=127.0.0.1:$((PORT + 3)),2=127.0.0.1:$((PORT + 13)),3=127.0.0.1:$((PORT + 23))")
	fi
	mkdir -p "$dir"
	"$BIN/lodestone" "${args[@]}" >>"$dir.log" 2>&1 &
	PIDS[i]=$!
}
# Up to 600 s for node i's /readyz 200 (every local group has a leader).
wait_ready() {
	local k
	for k in $(seq 1 3000); do
		kill -0 "${PIDS[$1]}" 2>/dev/null || return 1
		[ "$(status "$(admin "$1")" /readyz)" = 200 ] && return 0
		sleep 0.2
	done
	return 1
}
stop() { # i [signal]
	local pid=${PIDS[$1]:-}
	[ -n "$pid" ] || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	PIDS[$1]=""
}
cleanup() {
	local i
	for i in 1 2 3; do stop "$i" KILL; done
	rm -rf "$BENCH_DIR"
}
trap cleanup EXIT

# run N G ROUND: one fresh cluster, both workloads; prints a row and
# appends "N G ROUND set_ops set_us felix_batches felix_us" to $RES.
run() {
	local n=$1 g=$2 r=$3 i pids out_kv out_fx code
	rm -rf "$BENCH_DIR"/n"$n"-*
	for i in $(seq 1 "$n"); do spawn "$i" "$g" "$n"; done
	for i in $(seq 1 "$n"); do
		wait_ready "$i" || { echo "groups-throughput: $n nodes, $g groups: node $i not ready (logs in $BENCH_DIR)" >&2; exit 1; }
	done
	pids=$(for i in $(seq 1 "$n"); do printf '%s,' "${PIDS[$i]}"; done)
	pids=${pids%,}
	code=000
	for i in $(seq 1 50); do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 \
			-X POST -d "{\"shards\":$g}" "127.0.0.1:$(admin 1)/v1/streams/t1/default/gt")
		[ "$code" = 201 ] && break
		sleep 0.5
	done
	[ "$code" = 201 ] || { echo "groups-throughput: creating the stream with $g shards: HTTP $code" >&2; exit 1; }
	sleep "$SETTLE"
	# lodebench exits 1 when some requests were refused (e.g. BUSY under
	# overload); the run still counts, with its errors in the row.
	local skew=(--zipf "$ZIPF")
	[ "$ZIPF" != 0 ] || skew=()
	out_kv=$(timeout $((SECS + 60)) "$BIN/lodebench" kv --fsnp 127.0.0.1:"$PORT" --topology \
		-c 50 -P 16 -d 3 -r "$KEYSPACE" "${skew[@]}" -t set \
		--seconds "$SECS" --server-pid "$pids" --json 2>>"$BENCH_DIR/lodebench.err" | tail -1)
	out_fx=$(timeout $((SECS + 60)) "$BIN/lodebench" felix --felix 127.0.0.1:$((PORT + 1)) \
		--ca "$BENCH_DIR/n$n-1/tls/dev-cert.pem" --stream gt --keys 1000000 \
		--batch 64 --size 1024 --fanout 0 --conns 4 --window 16 \
		--seconds "$SECS" --server-pid "$pids" --json 2>>"$BENCH_DIR/lodebench.err" | tail -1)
	for i in $(seq 1 "$n"); do stop "$i"; done
	python3 - "$n" "$g" "$r" "$out_kv" "$out_fx" >>"$RES" <<-'EOF' ||
		import json, sys
		n, g, r, kv, fx = sys.argv[1:]
		kv, fx = json.loads(kv), json.loads(fx)
		print(n, g, r, kv["ops_per_s"], kv["servers_cpu_us_per_op"],
		      fx["ops_per_s"], fx["servers_cpu_us_per_op"],
		      kv["errors"], fx["errors"])
	EOF
		{ echo "groups-throughput: no lodebench result ($n nodes, $g groups): $(tail -3 "$BENCH_DIR/lodebench.err")" >&2; exit 1; }
	tail -1 "$RES" | awk '{printf "| %s | %s | %s | %.0f | %.1f | %s | %.0f (%.0f msgs/s) | %.0f | %s |\n", $1, $2, $3, $4, $5, $8, $6, $6 * 64, $7, $9}'
}

RES=$BENCH_DIR/results
: >"$RES"
echo "# $(date -u +%FT%TZ) commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| nodes | groups | round | SET ops/s | SET server CPU µs/op | SET errors | Felix batches/s (64 × 1 KiB) | Felix server CPU µs/batch | Felix errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in "${NODES[@]}"; do
	for r in $(seq 1 "$ROUNDS"); do
		# Alternate which count runs first, so neither always follows
		# the other.
		if [ $((r % 2)) = 1 ]; then order=("${COUNTS[@]}"); else
			order=(); for ((k = ${#COUNTS[@]} - 1; k >= 0; k--)); do order+=("${COUNTS[$k]}"); done
		fi
		for g in "${order[@]}"; do run "$n" "$g" "$r"; done
	done
done
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RES" "${COUNTS[0]}" "${COUNTS[${#COUNTS[@]} - 1]}" <<'EOF'
import sys, collections
rows = [l.split() for l in open(sys.argv[1])]
lo, hi = sys.argv[2], sys.argv[3]
by = collections.defaultdict(list)
for n, g, r, *v in rows:
    by[(n, g)].append([float(x) for x in v[:4]])
print()
print("| nodes | groups | runs | SET ops/s | SET µs/op | Felix batches/s | Felix µs/batch |")
print("|---|---|---|---|---|---|---|")
for (n, g), vs in sorted(by.items(), key=lambda kv: (int(kv[0][0]), int(kv[0][1]))):
    m = [sum(c) / len(c) for c in zip(*vs)]
    print(f"| {n} | {g} | {len(vs)} | {m[0]:.0f} | {m[1]:.1f} | {m[2]:.0f} | {m[3]:.0f} |")
print()
print(f"Ratio {hi}/{lo} per round (throughput; CPU per op), then of the means:")
for n in sorted({k[0] for k in by}, key=int):
    a, b = by.get((n, lo), []), by.get((n, hi), [])
    for i, (x, y) in enumerate(zip(a, b), 1):
        print(f"  {n} node(s) round {i}: SET {y[0] / x[0]:.2f} ({y[1] / x[1]:.2f}), "
              f"Felix {y[2] / x[2]:.2f} ({y[3] / x[3]:.2f})")
    if a and b:
        ma = [sum(c) / len(c) for c in zip(*a)]
        mb = [sum(c) / len(c) for c in zip(*b)]
        print(f"  {n} node(s) means: SET {mb[0] / ma[0]:.2f} ({mb[1] / ma[1]:.2f}), "
              f"Felix {mb[2] / ma[2]:.2f} ({mb[3] / ma[3]:.2f})")
EOF
