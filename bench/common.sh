# Shared by the bench/ scripts (sourced, not run): where the binaries are,
# starting and stopping loopback nodes, and CPU accounting.
#
# BIN: the build directory holding lodestone and lodebench (default: the
# tree's build/main, as ./dev builds it). Data goes under $BENCH_DIR
# (default /tmp/lodestone-bench). Every server listens on 127.0.0.1 only.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$BENCH_ROOT/build/main}
BENCH_DIR=${BENCH_DIR:-/tmp/lodestone-bench}
mkdir -p "$BENCH_DIR"

if [ ! -x "$BIN/lodestone" ] || [ ! -x "$BIN/lodebench" ]; then
	echo "bench: no lodestone/lodebench in $BIN (build first, or set BIN)" >&2
	exit 1
fi

# CPU ticks (user + system, 1/100 s) of the processes given.
cpu_ticks() {
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo $t
}

now() { date +%s.%N; }

# share ticks0 ticks1 secs0 secs1: CPU as a share of one vCPU.
cpu_share() { echo "scale=2; ($2 - $1) / 100 / ($4 - $3)" | bc; }

# Waits (up to 60 s) until every group of the node whose admin HTTP is on
# 127.0.0.1:$1 has a leader.
all_leaders() {
	local i n
	for i in $(seq 1 120); do
		n=$(curl -s 127.0.0.1:"$1"/v1/cluster | python3 -c \
			'import json,sys; d=json.load(sys.stdin); print(len(d["groups"]) > 0 and all(g.get("leader") for g in d["groups"]))' 2>/dev/null)
		[ "$n" = "True" ] && return 0
		sleep 0.5
	done
	return 1
}

# A fresh 1-node lodestone (dev mode) with FSNP on 127.0.0.1:$1, Felix on
# $1+1 (UDP), admin HTTP on $1+2. Sets NODE_PID.
node1_start() {
	local port=$1 dir=$BENCH_DIR/n1-$1
	node1_stop "$port"
	rm -rf "$dir" && mkdir -p "$dir"
	"$BIN/lodestone" --dev --data "$dir" --fsnp 127.0.0.1:"$port" \
		--felix 127.0.0.1:$((port + 1)) --admin 127.0.0.1:$((port + 2)) \
		--log-level warn >"$dir.log" 2>&1 &
	NODE_PID=$!
	if ! all_leaders $((port + 2)); then
		echo "bench: the node on $port did not come up (see $dir.log)" >&2
		exit 1
	fi
}

node1_stop() { pkill -f "data $BENCH_DIR/n1-$1( |$)" 2>/dev/null; sleep 0.3; }

# A fresh 3-node cluster: node i has internal 127.0.0.1:1910i, FSNP 1920i,
# Felix 1930i, admin 1940i. Waits until every group has a leader. Sets
# CLUSTER_PIDS.
cluster3_start() {
	local i
	cluster3_stop
	for i in 1 2 3; do
		rm -rf "$BENCH_DIR/c3-$i" && mkdir -p "$BENCH_DIR/c3-$i"
		"$BIN/lodestone" --dev --data "$BENCH_DIR/c3-$i" --node-id $i \
			--peers 1=127.0.0.1:19101,2=127.0.0.1:19102,3=127.0.0.1:19103 \
			--internal 127.0.0.1:1910$i --fsnp 127.0.0.1:1920$i \
			--felix 127.0.0.1:1930$i --admin 127.0.0.1:1940$i \
			--log-level warn >"$BENCH_DIR/c3-$i.log" 2>&1 &
	done
	CLUSTER_PIDS=""
	for i in 1 2 3; do
		sleep 0.2
		CLUSTER_PIDS="$CLUSTER_PIDS $(pgrep -f "data $BENCH_DIR/c3-$i( |$)")"
	done
	if ! all_leaders 19401; then
		echo "bench: the 3-node cluster did not elect every leader" >&2
		exit 1
	fi
}

cluster3_stop() {
	local i
	for i in 1 2 3; do
		pkill -f "data $BENCH_DIR/c3-$i( |$)" 2>/dev/null
	done
	sleep 0.5
}

# A fresh redis-server on 127.0.0.1:$1; $2 = always (AOF, fsync per
# write) or no (no persistence). Sets REDIS_PID.
redis_start() {
	local port=$1 mode=$2 dir=$BENCH_DIR/redis-$1
	redis_stop "$port"
	rm -rf "$dir" && mkdir -p "$dir"
	if [ "$mode" = always ]; then
		set -- --appendonly yes --appendfsync always
	else
		set -- --appendonly no
	fi
	(cd "$dir" && exec redis-server --bind 127.0.0.1 --port "$port" --save "" "$@" \
		--daemonize no >/dev/null 2>&1) &
	REDIS_PID=$!
	sleep 0.5
}

redis_stop() { pkill -f "redis-server 127.0.0.1:$1" 2>/dev/null; sleep 0.3; }

# nodes_start N DATA [CGROUP]: N fresh nodes (1, or 3 bootstrapping a
# cluster) with data under DATA/nI, on 127.0.0.1 ports 6110I (internal),
# 6120I (FSNP), 6130I (Felix UDP), 6140I (admin) (above the kernel's
# ephemeral range and the integration tests' 20000-32000), plus the lodestone
# arguments in the array NODE_ARGS. With CGROUP, node I runs in the cgroup
# v1 directory CGROUP/nI (it joins before exec, so every thread is in it).
# Waits until every group has a leader; sets NODE_PIDS (array).
nodes_start() {
	local n=$1 data=$2 cg=$3 i args peers=()
	NODE_PIDS=()
	rm -rf "$data" && mkdir -p "$data"
	if [ "$n" = 3 ]; then
		peers=(--node-id 0 --peers 1=127.0.0.1:61101,2=127.0.0.1:61102,3=127.0.0.1:61103)
	fi
	for i in $(seq 1 "$n"); do
		mkdir -p "$data/n$i"
		args=(--dev --data "$data/n$i" --fsnp 127.0.0.1:6120$i
			--felix 127.0.0.1:6130$i --admin 127.0.0.1:6140$i
			--log-level warn "${NODE_ARGS[@]}")
		if [ "$n" = 3 ]; then
			peers[1]=$i
			args+=(--internal 127.0.0.1:6110$i "${peers[@]}")
		fi
		if [ -n "$cg" ]; then
			(echo "$BASHPID" >"$cg/n$i/cgroup.procs" &&
				exec "$BIN/lodestone" "${args[@]}") >"$data/n$i.log" 2>&1 &
		else
			"$BIN/lodestone" "${args[@]}" >"$data/n$i.log" 2>&1 &
		fi
		NODE_PIDS+=($!)
	done
	if ! all_leaders 61401; then
		echo "bench: the $n-node cluster did not elect every leader (logs: $data/n*.log)" >&2
		nodes_stop
		exit 1
	fi
	# A quorum elects leaders without the third node: check each is up.
	for i in $(seq 1 "$n"); do
		if ! kill -0 "${NODE_PIDS[$((i - 1))]}" 2>/dev/null ||
			! curl -s -o /dev/null 127.0.0.1:6140"$i"/healthz; then
			echo "bench: node $i did not start: $(tail -1 "$data/n$i.log")" >&2
			nodes_stop
			exit 1
		fi
	done
}

# Stops the nodes of nodes_start by pid (SIGTERM, then SIGKILL after 10 s).
nodes_stop() {
	local p
	for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${NODE_PIDS[@]}"; do
		for _ in $(seq 1 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null
	done
	NODE_PIDS=()
}

# The node leading data group 1 (group 0 is the meta group), from the
# admin API of the nodes_start cluster.
nodes_data_leader() {
	curl -s 127.0.0.1:61401/v1/cluster | python3 -c \
		'import json,sys; d=json.load(sys.stdin); print([g["leader"] for g in d["groups"] if g["id"] == 1][0])'
}
