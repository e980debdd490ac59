#!/usr/bin/env python3
"""cluster_quota_report.py FILE: the Markdown tables of bench/cluster-quota.sh
from its raw results (one JSON object per run): throughput of 3 nodes
against 1 node at the same CPU quota per node, and per node the CPU per
committed operation, its role, the share of its quota used, the CFS periods
throttled, and the bytes it sent to the other nodes per operation."""
import json
import sys

UNITS = {"set": "SETs", "publish": "batches of 64 x 1 KiB", "flow": "flows"}


def main(path):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    by = {(r["storage"], r["nodes"], r["workload"]): r for r in runs}
    quota = runs[0]["quota"] if runs else 0
    print("\n### Throughput at %s CPU per node\n" % quota)
    print("| workload | data | 1 node ops/s | 3 nodes ops/s | 3 nodes / 1 node |")
    print("|---|---|---:|---:|---:|")
    for (storage, n, w), r in sorted(by.items()):
        if n != 1:
            continue
        one = r["bench"]["ops_per_s"]
        r3 = by.get((storage, 3, w))
        three = r3["bench"]["ops_per_s"] if r3 else None
        print("| %s (%s) | %s | %.0f | %s | %s |" % (
            w, UNITS.get(w, "ops"), storage, one,
            "%.0f" % three if three is not None else "-",
            "**%.2f**" % (three / one) if three and one else "-"))
    print("\n### Per node\n")
    print("| workload | data | nodes | node | role | CPU (share of 1 CPU) | "
          "CPU us per op | / leader's | throttled periods | "
          "bytes sent to peers per op |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for (storage, n, w), r in sorted(by.items()):
        b = r["bench"]
        secs = b["secs"]
        ops = b["ops"] or 1
        leader = r["leader"]
        servers = b["servers"]
        lead_us = None
        for i, s in enumerate(servers):
            if i + 1 == leader:
                lead_us = s["cpu_us_per_op"]
        for i, s in enumerate(servers):
            node = i + 1
            pid = str(s["pid"])
            sent = r["bytes1"].get(pid, 0) - r["bytes0"].get(pid, 0)
            thr = r["throttled1"][i] - r["throttled0"][i]
            periods = secs * 10  # 100 ms CFS periods
            role = "leader" if node == leader else "follower"
            if n == 1:
                role = "single"
            ratio = "-"
            if n == 3 and lead_us:
                ratio = "%.2f" % (s["cpu_us_per_op"] / lead_us)
            print("| %s | %s | %d | %d | %s | %.2f | %.1f | %s | %.0f%% | %.0f |" % (
                w, storage, n, node, role, s["cpu_share"], s["cpu_us_per_op"],
                ratio, 100.0 * thr / periods if periods else 0,
                sent / ops))


if __name__ == "__main__":
    main(sys.argv[1])
