#!/bin/bash
# kv-set-ab.sh BEFORE AFTER [ROUNDS] [N]: SET per server CPU-second of two
# builds (directories holding lodestone and lodebench) beside Redis, in one
# run. Each round, for BEFORE then AFTER: a fresh 1-node lodestone (--dev,
# RESP on), `redis-benchmark -t set -n N -c 50 -P 16 -r 100000` against its
# RESP listener; a fresh one again, `lodebench kv -c 50 -P 16 -n N -d 3 -r
# 100000 -t set` over FSNP; then a fresh `redis-server --appendfsync always`
# with the same redis-benchmark. Prints ops/s, the server's CPU (a share of
# one vCPU, /proc/PID/stat) and ops per server CPU-second per run. Servers
# are started and stopped by their pids. ROUNDS 3, N 1000000.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [ROUNDS] [N]" >&2; exit 2; }
A=$1 B=$2 ROUNDS=${3:-3} N=${4:-1000000}
P=${PORT:-18700}
DIR=${BENCH_DIR:-/tmp/lodestone-bench}/set-ab-$$
for d in "$A" "$B"; do
	[ -x "$d/lodestone" ] && [ -x "$d/lodebench" ] || { echo "kv-set-ab: no lodestone/lodebench in $d" >&2; exit 1; }
done
mkdir -p "$DIR"
SPID=
cleanup() { [ -z "$SPID" ] || kill "$SPID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now() { date +%s.%N; }
start_ls() { # BIN
	rm -rf "$DIR/ls" && mkdir -p "$DIR/ls"
	"$1/lodestone" --dev --data "$DIR/ls" --resp 127.0.0.1:$P \
		--fsnp 127.0.0.1:$((P + 1)) --felix 127.0.0.1:$((P + 2)) \
		--admin 127.0.0.1:$((P + 3)) --log-level warn >"$DIR/ls.log" 2>&1 &
	SPID=$!
	for _ in $(seq 300); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 127.0.0.1:$((P + 3))/readyz)" = 200 ] && return 0
		sleep 0.2
	done
	echo "kv-set-ab: the node did not come up (see $DIR/ls.log)" >&2
	exit 1
}
stop() { kill "$SPID"; wait "$SPID" 2>/dev/null; SPID=; }
# name ops t0 t1 s0 s1
row() {
	echo "$1 ops/s=$2 cpu=$(echo "scale=2; ($4 - $3) / 100 / ($6 - $5)" | bc)" \
		"per_cpu_s=$(echo "$2 * ($6 - $5) * 100 / ($4 - $3)" | bc)" \
		"load=$(cut -d' ' -f1 /proc/loadavg)"
}
rb() { # port: redis-benchmark SET, prints ops/s
	redis-benchmark -p "$1" -t set -n "$N" -c 50 -P 16 -r 100000 --csv -q 2>/dev/null |
		tail -1 | cut -d, -f2 | tr -d '"' | cut -d. -f1
}
for r in $(seq "$ROUNDS"); do
	for side in before after; do
		bin=$A
		[ $side = after ] && bin=$B
		start_ls "$bin"
		sleep 1
		t0=$(ticks "$SPID") s0=$(now)
		ops=$(rb $P)
		t1=$(ticks "$SPID") s1=$(now)
		stop
		row "round $r $side resp" "$ops" "$t0" "$t1" "$s0" "$s1"
		start_ls "$bin"
		sleep 1
		t0=$(ticks "$SPID") s0=$(now)
		ops=$("$bin/lodebench" kv --fsnp 127.0.0.1:$((P + 1)) -c 50 -P 16 -n "$N" -d 3 \
			-r 100000 -t set 2>&1 | grep -o 'ops/s=[0-9]*' | cut -d= -f2)
		t1=$(ticks "$SPID") s1=$(now)
		stop
		row "round $r $side fsnp" "$ops" "$t0" "$t1" "$s0" "$s1"
	done
	rm -rf "$DIR/redis" && mkdir -p "$DIR/redis"
	(cd "$DIR/redis" && exec redis-server --bind 127.0.0.1 --port $((P + 10)) --save "" \
		--appendonly yes --appendfsync always >/dev/null 2>&1) &
	SPID=$!
	sleep 0.5
	t0=$(ticks "$SPID") s0=$(now)
	ops=$(rb $((P + 10)))
	t1=$(ticks "$SPID") s1=$(now)
	stop
	row "round $r redis-always" "$ops" "$t0" "$t1" "$s0" "$s1"
done
