#!/bin/bash
# resp-vs-redis.sh: redis-benchmark -t set,get,incr,lpush,hset -c 50 -P 16
# against a fresh 1-node lodestone's RESP listener (Raft, every write
# fsynced by the log writer) and against redis-server without persistence
# and with `appendfsync always`, in one run. Prints, per server and test,
# ops/s and ops per server CPU-second (user + system from /proc/PID/stat).
# N (default 200000) requests per test.
. "$(dirname "$0")/common.sh"
N=${N:-200000}
PORT=${PORT:-16500}
TESTS="set get incr lpush hset"

run_tests() { # name port pid
	local t t0 t1 s0 s1 out rps cpu
	for t in $TESTS; do
		t0=$(cpu_ticks "$3") s0=$(now)
		out=$(redis-benchmark -p "$2" -t "$t" -n "$N" -c 50 -P 16 \
			-r 100000 --csv -q | tail -1)
		t1=$(cpu_ticks "$3") s1=$(now)
		rps=$(echo "$out" | cut -d, -f2 | tr -d '"')
		cpu=$(echo "scale=2; ($t1 - $t0) / 100" | bc)
		printf '%-16s %-6s %10s ops/s  cpu %6ss  %10s ops/cpu-s\n' \
			"$1" "$t" "$rps" "$cpu" \
			"$(echo "scale=0; $N / ($cpu + 0.001)" | bc)"
	done
}

dir=$BENCH_DIR/resp-$PORT
rm -rf "$dir" && mkdir -p "$dir"
"$BIN/lodestone" --dev --data "$dir" --resp 127.0.0.1:$PORT \
	--fsnp 127.0.0.1:$((PORT + 1)) --felix 127.0.0.1:$((PORT + 2)) \
	--admin 127.0.0.1:$((PORT + 3)) --log-level warn >"$dir.log" 2>&1 &
pid=$!
if ! all_leaders $((PORT + 3)); then
	echo "bench: the node did not come up (see $dir.log)" >&2
	kill "$pid"
	exit 1
fi
run_tests lodestone-resp $PORT $pid
kill "$pid"
wait "$pid" 2>/dev/null

for mode in no always; do
	rdir=$BENCH_DIR/redis-resp-$mode
	rm -rf "$rdir" && mkdir -p "$rdir"
	if [ "$mode" = always ]; then
		set -- --appendonly yes --appendfsync always
	else
		set -- --appendonly no
	fi
	(cd "$rdir" && exec redis-server --bind 127.0.0.1 \
		--port $((PORT + 10)) --save "" "$@" >/dev/null 2>&1) &
	rpid=$!
	sleep 0.5
	run_tests "redis-$mode" $((PORT + 10)) $rpid
	kill "$rpid"
	wait "$rpid" 2>/dev/null
done
