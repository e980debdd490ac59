#!/bin/bash
# cluster-quota.sh: one machine per node, emulated. Each lodestone node runs
# in a CPU cgroup of its own (cgroup v1 `cpu` controller, CFS quota) with the
# same quota; the benchmark client runs outside them. A 1-node cluster and a
# 3-node cluster at that quota per node run the same closed-loop workloads,
# with the data directories on disk and then on tmpfs (/dev/shm), to
# separate the shared disk's part. Per node it reports the CPU per committed
# operation (the leader of the data group, each follower), the CPU share
# used, the CFS periods in which the quota throttled it, and the TCP bytes
# it sent to the other nodes (tcp_info of its node-to-node connections,
# from ss, around each run).
#
#   bench/cluster-quota.sh            (as root; writes a Markdown summary)
#
# Environment: QUOTA (CPUs per node, default 0.5), SECS (seconds per run,
# default 5), SHARDS (data shards, default 1: one node leads every data
# group, so leader and follower costs are apart), WORKLOADS (default "set
# publish flow"), STORAGE (default "disk tmpfs"), NODES (default "1 3"),
# FLOWS (Flow cycles per run, default 3000), FLOW_CONNS (Flow client
# connections, default 50: each runs one cycle of three commits at a time,
# so a 3-node cluster, whose commits take a replication round longer,
# needs more of them than one node to reach its CPU quota), SETTLE (seconds between the
# leaders' election and the first run, default 6: leadership balancing
# moves leaders in the first seconds). Workloads:
#   set      lodebench kv -c 50 -P 16 -d 3 -r 100000 -t set --topology
#   publish  lodebench felix --batch 64 --size 1024 --fanout 0 (at the
#            stream's leader; 4 connections x window 16)
#   flow     lodebench flow -c FLOW_CONNS -n FLOWS --topology (create, claim,
#            complete)
# Nodes listen on 127.0.0.1 ports 6110I (internal), 6120I (FSNP), 6130I
# (Felix), 6140I (admin). The cgroups (/sys/fs/cgroup/cpu/lodestone-bench-PID/
# nI), the nodes and the tmpfs data are removed on exit. Raw results (one
# JSON object per run) go to $BENCH_DIR/cluster-quota.jsonl.
. "$(dirname "$0")/common.sh"

QUOTA=${QUOTA:-0.5}
SECS=${SECS:-5}
SHARDS=${SHARDS:-1}
WORKLOADS=${WORKLOADS:-"set publish flow"}
STORAGE=${STORAGE:-"disk tmpfs"}
NODES=${NODES:-"1 3"}
FLOWS=${FLOWS:-3000}
FLOW_CONNS=${FLOW_CONNS:-50}
SETTLE=${SETTLE:-6}
CPU_ROOT=/sys/fs/cgroup/cpu
CG=$CPU_ROOT/lodestone-bench-$$
SHM=/dev/shm/lodestone-bench-$$
OUT=$BENCH_DIR/cluster-quota.jsonl

if [ "$(id -u)" -ne 0 ] || [ ! -w "$CPU_ROOT/cgroup.procs" ]; then
	echo "cluster-quota: needs root and the cgroup v1 cpu controller at $CPU_ROOT" >&2
	exit 1
fi
PERIOD=100000
QUOTA_US=$(python3 -c "print(int(float('$QUOTA') * $PERIOD))")

cleanup() {
	local d
	nodes_stop
	for d in "$CG"/n*; do [ -d "$d" ] && rmdir "$d"; done
	[ -d "$CG" ] && rmdir "$CG"
	rm -rf "$SHM"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$CG"
for i in 1 2 3; do
	mkdir -p "$CG/n$i"
	echo $PERIOD >"$CG/n$i/cpu.cfs_period_us"
	echo "$QUOTA_US" >"$CG/n$i/cpu.cfs_quota_us"
done

# start_nodes N STORAGE: N fresh nodes, each in its cgroup; sets DATA.
start_nodes() {
	if [ "$2" = tmpfs ]; then DATA=$SHM; else DATA=$BENCH_DIR/cq; fi
	# shellcheck disable=SC2034 # read by nodes_start
	NODE_ARGS=(--shards "$SHARDS")
	nodes_start "$1" "$DATA" "$CG"
	sleep "$SETTLE"
}

# One JSON object: node id -> leaderships of data groups.
leaderships() {
	curl -s 127.0.0.1:61401/v1/cluster | python3 -c \
		'import json,sys,collections; d=json.load(sys.stdin); c=collections.Counter(str(g["leader"]) for g in d["groups"] if g["id"] != 0); print(json.dumps(c))'
}

# TCP bytes acked per node pid on node-to-node connections (ports 6110x),
# as one JSON object pid -> bytes.
peer_bytes() {
	ss -tinpH | python3 -c '
import json, re, sys
pids = set(sys.argv[1].split(","))
ports = {"61101", "61102", "61103"}
out = {p: 0 for p in pids}
cur = None
for line in sys.stdin:
    if not line.startswith(("\t", " ")):
        f = line.split()
        m = re.search(r"pid=(\d+)", line)
        cur = None
        if m and m.group(1) in pids and len(f) >= 5:
            lp = f[3].rsplit(":", 1)[1]
            rp = f[4].rsplit(":", 1)[1]
            if lp in ports or rp in ports:
                cur = m.group(1)
    elif cur is not None:
        m = re.search(r"bytes_acked:(\d+)", line)
        if m:
            out[cur] += int(m.group(1))
        cur = None
print(json.dumps(out))' "$(
		IFS=,
		echo "${NODE_PIDS[*]}"
	)"
}

# CFS periods throttled so far, per node: one JSON list.
throttled() {
	local i s=""
	for i in $(seq 1 ${#NODE_PIDS[@]}); do
		s="$s${s:+,}$(awk '$1 == "nr_throttled" {print $2}' "$CG/n$i/cpu.stat")"
	done
	echo "[$s]"
}

run_workload() {
	local w=$1 l=$2 pidlist
	pidlist=$(
		IFS=,
		echo "${NODE_PIDS[*]}"
	)
	case $w in
	set)
		timeout $((SECS + 60)) "$BIN/lodebench" kv --fsnp 127.0.0.1:6120"$l" \
			--topology -c 50 -P 16 -d 3 -r 100000 -t set --seconds "$SECS" \
			--server-pid "$pidlist" --json
		;;
	publish)
		curl -s -X POST 127.0.0.1:6140"$l"/v1/streams/t1/default/cq \
			-d '{"shards":1}' >/dev/null
		timeout $((SECS + 60)) "$BIN/lodebench" felix --felix 127.0.0.1:6130"$l" \
			--ca "$DATA/n$l/tls/dev-cert.pem" --stream cq --fanout 0 \
			--batch 64 --size 1024 --seconds "$SECS" --server-pid "$pidlist" \
			--json
		;;
	flow)
		timeout $((SECS + 120)) "$BIN/lodebench" flow --fsnp 127.0.0.1:6120"$l" \
			--topology -c "$FLOW_CONNS" -n "$FLOWS" --server-pid "$pidlist" --json
		;;
	esac
}

echo "== cluster-quota start $(date -u) commit $(git -C "$BENCH_ROOT" rev-parse --short HEAD 2>/dev/null) load $(cut -d' ' -f1-3 /proc/loadavg) quota $QUOTA CPU per node, $SHARDS data shard(s)"
: >"$OUT"
for storage in $STORAGE; do
	for n in $NODES; do
		start_nodes "$n" "$storage"
		for w in $WORKLOADS; do
			l=1
			[ "$n" = 3 ] && l=$(nodes_data_leader)
			b0=$(peer_bytes) t0=$(throttled)
			res=$(run_workload "$w" "$l" | tail -1)
			b1=$(peer_bytes) t1=$(throttled)
			if [ -z "$res" ]; then
				echo "cluster-quota: $w on $n node(s), $storage: no result" >&2
				continue
			fi
			line="{\"storage\":\"$storage\",\"nodes\":$n,\"workload\":\"$w\",\"quota\":$QUOTA,\"leader\":$l,\"leaderships\":$(leaderships),\"bytes0\":$b0,\"bytes1\":$b1,\"throttled0\":$t0,\"throttled1\":$t1,\"bench\":$res}"
			echo "$line" >>"$OUT"
			echo "$storage nodes=$n $w: $(echo "$res" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.0f ops/s, servers %.1f us/op" % (r["ops_per_s"], r["servers_cpu_us_per_op"]))')"
		done
		nodes_stop
	done
done
echo "== cluster-quota end $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$(dirname "$0")/cluster_quota_report.py" "$OUT"
