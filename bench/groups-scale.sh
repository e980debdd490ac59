#!/usr/bin/env bash
# Idle cost and start-up of a node with many data groups (docs/benchmarks.md
# "Many groups"): for each group count, one node and then a 3-node cluster
# on loopback, fresh data directories:
#   start     spawn to /readyz 200 (every local group has a known leader);
#             3 nodes: until all three answer 200
#   idle CPU  the lodestone process's utime + stime (/proc/PID/stat) over
#             WINDOW seconds once the groups settled, as % of one core;
#             per process, so other work on the machine does not count
#   RSS       VmRSS at the end of the window
#   restart   SIGTERM, then spawn to /readyz 200 (3 nodes: node 3)
#   re-led    3 nodes: kill -9 of node 1, until nodes 2 and 3 lead every
#             group between them (lodestone_raft_groups{role="leader"})
# Usage: bench/groups-scale.sh [COUNTS...]   (default 64 1000 4096 10000)
# Env: WINDOW (60), SETTLE (10), EXTRA (more lodestone flags, e.g.
# --no-quiesce), PORT (17400: uses PORT..PORT+30; below the 20000-32000
# the integration tests draw ports from), BIN, BENCH_DIR.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$top/build/main}
BENCH_DIR=${BENCH_DIR:-/tmp/lodestone-bench}/groups
WINDOW=${WINDOW:-60}
SETTLE=${SETTLE:-10}
PORT=${PORT:-17400}
read -r -a EXTRA <<<"${EXTRA:-}"
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(64 1000 4096 10000)
[ -x "$BIN/lodestone" ] || { echo "groups-scale: no $BIN/lodestone (build first)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"

now() { date +%s.%N; }
since() { echo "scale=1; ($(now) - $1) / 1" | bc; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_mib() { awk '/VmRSS/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
status() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "127.0.0.1:$1$2"; }

# wait_ready I: up to 600 s for node I's /readyz 200, while it runs.
wait_ready() {
	local i
	for i in $(seq 1 3000); do
		kill -0 "${PIDS[$1]}" 2>/dev/null || return 1
		[ "$(status "$(admin "$1")" /readyz)" = 200 ] && return 0
		sleep 0.2
	done
	return 1
}

# Node i of a cluster of $2 (1 or 3) with $1 groups; sets PIDS[i].
declare -a PIDS
spawn() {
	local i=$1 groups=$2 n=$3 dir=$BENCH_DIR/n$3-$1
	local p=$((PORT + 10 * (i - 1)))
	local args=(--dev --data "$dir" --shards "$groups" --fsnp 127.0.0.1:$p
		--felix 127.0.0.1:$((p + 1)) --admin 127.0.0.1:$((p + 2))
		--log-level warn)
	if [ "$n" = 3 ]; then
		args+=(--node-id "$i" --internal 127.0.0.1:$((p + 3))
			--peers "1=127.0.0.1:$((PORT + 3)),2=127.0.0.1:$((PORT + 13)),3=127.0.0.1:$((PORT + 23))")
	fi
	"$BIN/lodestone" "${args[@]}" "${EXTRA[@]}" >>"$dir.log" 2>&1 &
	PIDS[$i]=$!
}
admin() { echo $((PORT + 10 * ($1 - 1) + 2)); }
stop() { # i [signal]
	local pid=${PIDS[$1]:-}
	[ -n "$pid" ] || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	PIDS[$1]=""
}
cleanup() { local i; for i in 1 2 3; do stop "$i" KILL; done; }
trap cleanup EXIT

# idle_cpu I...: % of one core of each node over WINDOW, then RSS (MiB).
idle() {
	local i t0 s0 out=""
	declare -A c0
	for i in "$@"; do c0[$i]=$(ticks "${PIDS[$i]}"); done
	s0=$(now)
	sleep "$WINDOW"
	local dt
	dt=$(echo "$(now) - $s0" | bc)
	for i in "$@"; do
		kill -0 "${PIDS[$i]}" 2>/dev/null || { echo "groups-scale: node $i exited (see its log in $BENCH_DIR)" >&2; exit 1; }
		out+="$(echo "scale=2; ($(ticks "${PIDS[$i]}") - ${c0[$i]}) / $dt" | bc)% / $(rss_mib "${PIDS[$i]}") MiB; "
	done
	echo "${out%; }"
}

leaders() { # admin port: groups this node leads
	curl -s --max-time 5 "127.0.0.1:$1/metrics" |
		awk '/^lodestone_raft_groups\{role="leader"\}/ {print $2}'
}
quiet() {
	curl -s --max-time 5 "127.0.0.1:$1/metrics" |
		awk '/^lodestone_raft_groups_quiescent / {print $2}'
}

echo "| nodes | groups | start s | idle CPU % of a core / RSS (each node) | quiescent | restart s | re-led s after kill -9 |"
echo "|---|---|---|---|---|---|---|"
for g in "${COUNTS[@]}"; do
	# One node.
	rm -rf "$BENCH_DIR"/n1-* && mkdir -p "$BENCH_DIR/n1-1"
	t=$(now); spawn 1 "$g" 1
	wait_ready 1 || { echo "groups-scale: 1 node, $g groups: not ready" >&2; exit 1; }
	start=$(since "$t")
	sleep "$SETTLE"
	cpu=$(idle 1)
	q=$(quiet "$(admin 1)")
	stop 1
	t=$(now); spawn 1 "$g" 1
	wait_ready 1 || { echo "groups-scale: 1 node, $g groups: restart not ready" >&2; exit 1; }
	restart=$(since "$t")
	stop 1
	echo "| 1 | $g | $start | $cpu | $q | $restart | - |"

	# Three nodes.
	rm -rf "$BENCH_DIR"/n3-* && mkdir -p "$BENCH_DIR"/n3-{1,2,3}
	t=$(now)
	for i in 1 2 3; do spawn "$i" "$g" 3; done
	for i in 1 2 3; do
		wait_ready "$i" || { echo "groups-scale: 3 nodes, $g groups: node $i not ready" >&2; exit 1; }
	done
	start=$(since "$t")
	sleep "$SETTLE"
	cpu=$(idle 1 2 3)
	q="$(quiet "$(admin 1)")/$(quiet "$(admin 2)")/$(quiet "$(admin 3)")"
	stop 3
	t=$(now); spawn 3 "$g" 3
	wait_ready 3 || { echo "groups-scale: 3 nodes, $g groups: node 3 restart not ready" >&2; exit 1; }
	restart=$(since "$t")
	sleep "$SETTLE"
	t=$(now); stop 1 KILL
	releds="> 120"
	for k in $(seq 1 600); do
		a=$(leaders "$(admin 2)"); b=$(leaders "$(admin 3)")
		if [ -n "$a" ] && [ -n "$b" ] && [ $((a + b)) -eq $((g + 1)) ]; then
			releds=$(since "$t")
			break
		fi
		sleep 0.2
	done
	for i in 2 3; do stop "$i"; done
	echo "| 3 | $g | $start | $cpu | $q | $restart | $releds |"
done
