// Interop: the official Felix client (npm felix-client-linux-x64-gnu@0.5.0)
// against a 3-node lodestone cluster, connected to a node that does not
// lead the shard it reads. It starts three nodes ($LS_LODESTONE, free
// loopback ports, one temporary directory) and checks that:
//  - the client learns the three brokers from topology (endpoints());
//  - publishes through the non-leader succeed (forwarded; their acks name
//    the owner, which this client asked for with client_flags 0x00FF);
//  - subscribe follows the broker's not_leader to the shard's leader and
//    reads history and live records there;
//  - watchCache follows it the same way for a cache shard led elsewhere.
// Every node is killed at the end whatever happens.
import fs from "node:fs";
import path from "node:path";

import { Client, assert, run, sleep, withTimeout } from "./lib/felix.mjs";
import { logTail, nodePorts, startNode } from "./lib/node.mjs";
import { freeTcpPort } from "./lib/ports.mjs";

// Three nodes; n.id, n.felix and n.admin name each one's id and ports.
const nodes = [];
for (let i = 0; i < 3; i++) {
  const ports = await nodePorts();
  nodes.push({ id: i + 1, ports, felix: ports.felix, admin: ports.admin });
}
const peers = nodes.map((n) => `${n.id}=127.0.0.1:${n.ports.internal}`).join(",");
for (const n of nodes) {
  n.node = await startNode(`node${n.id}`, [
    "--node-id", String(n.id), "--fsnp-tls", `127.0.0.1:${await freeTcpPort()}`,
    "--advertise-host", "127.0.0.1", "--peers", peers, "--shards", "4", "--log-level", "warn",
  ], { ports: n.ports });
}

async function admin(n, method, p, body) {
  const res = await fetch(`http://127.0.0.1:${n.admin}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

async function until(what, fn, ms = 40000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (nodes.some((n) => n.node.exited)) throw new Error(`${what}: a node exited`);
    try {
      const v = await fn();
      if (v) return v;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(200);
  }
}

// The leader of shard 0 of a scope as node n sees it (0 = none).
async function leaderOf(n, kind, name) {
  const r = await admin(n, "GET", `/v1/${kind}/t1/default/${name}`);
  if (r.status !== 200) return 0;
  return JSON.parse(r.body).shard_state[0].leader ?? 0;
}

async function metric(n, series) {
  const r = await admin(n, "GET", "/metrics");
  const line = r.body.split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.split(" ")[1]) : -1;
}

async function main() {
  // One CA file trusting every node's dev certificate: a redirect takes
  // the client to another node, and it has one trust store.
  const certs = nodes.map((n) => path.join(n.node.data, "tls", "dev-cert.pem"));
  await until("dev certificates", () => certs.every((c) => fs.existsSync(c)));
  const ca = path.join(path.dirname(nodes[0].node.data), "ca-all.pem");
  fs.writeFileSync(ca, certs.map((c) => fs.readFileSync(c, "utf8")).join(""));

  // Every group led by its preferred replica: leaderships move there
  // after a start, and the test must not see one move under it.
  await until("settled leaders", async () => {
    const r = await admin(nodes[0], "GET", "/v1/cluster");
    const groups = JSON.parse(r.body).groups;
    return groups.every((g) => g.leader !== null && g.leader === g.voters[0]);
  });
  for (const name of ["rs", "rc0", "rc1", "rc2", "rc3"]) {
    const kind = name === "rs" ? "streams" : "caches";
    await until(`create ${name}`, async () =>
      (await admin(nodes[0], "POST", `/v1/${kind}/t1/default/${name}`, { shards: 1 })).status === 201);
  }
  const L = await until("leader of rs", () => leaderOf(nodes[0], "streams", "rs"));
  const other = nodes.find((n) => n.id !== L);
  const leader = nodes[L - 1];
  // A cache shard the connected node does not lead either (placement and
  // settled leaderships are deterministic: one of these always is).
  let cache = null;
  let Lc = 0;
  for (const name of ["rc0", "rc1", "rc2", "rc3"]) {
    const l = await until(`leader of ${name}`, () => leaderOf(nodes[0], "caches", name));
    if (l !== other.id) { cache = name; Lc = l; break; }
  }
  assert(cache !== null, "every cache shard is led by the connected node");

  const client = await until("connect", () => withTimeout(
    // 0.5.0: connect(addr, tenant, token, serverName, caFile)
    Client.connect(`127.0.0.1:${other.felix}`, "t1", "tok", "localhost", ca), 20000, "connect"));

  // Topology at connect: every broker's client address.
  const eps = await client.endpoints();
  for (const n of nodes) {
    assert(eps.includes(`127.0.0.1:${n.felix}`), `endpoints ${JSON.stringify(eps)} lack node ${n.id}`);
  }

  // Publishes through the non-leader: forwarded, acked with the owner.
  const owners0 = await metric(other, "lodestone_felix_owner_acks_total");
  for (let i = 0; i < 3; i++) {
    await withTimeout(client.publish("t1", "default", "rs", Buffer.from(`r${i}`)), 10000, "publish");
  }
  assert(await metric(other, "lodestone_felix_owner_acks_total") >= owners0 + 3, "owner acks");

  // Subscribe: not_leader from the node in hand, followed to the leader.
  const redirects0 = await metric(other, "lodestone_felix_redirects_total");
  const sub = await withTimeout(client.subscribe("t1", "default", "rs", "earliest"), 20000, "subscribe");
  assert(await metric(other, "lodestone_felix_redirects_total") > redirects0, "no redirect was answered");
  assert(await metric(leader, "lodestone_felix_subscriptions") >= 1, "the leader serves no subscription");
  for (let i = 0; i < 3; i++) {
    const e = await withTimeout(sub.nextEvent(), 10000, "nextEvent");
    assert(e !== null && e.offset === BigInt(i), `offset ${e && e.offset}`);
    assert(e.payload.toString() === `r${i}`, `payload ${e.payload}`);
  }
  await client.publish("t1", "default", "rs", Buffer.from("live"));
  const live = await withTimeout(sub.nextEvent(), 10000, "live event");
  assert(live.offset === 3n && live.payload.toString() === "live", "live event");
  await sub.close();

  // watchCache follows a redirect the same way.
  {
    const before = await metric(other, "lodestone_felix_redirects_total");
    const w = await withTimeout(client.watchCache("t1", "default", cache, "k"), 20000, "watchCache");
    assert(await metric(other, "lodestone_felix_redirects_total") > before, "watch: no redirect");
    assert(await metric(nodes[Lc - 1], "lodestone_felix_cache_watches") >= 1, "the cache leader serves no watch");
    await client.cachePut("t1", "default", cache, "k", Buffer.from("v"));
    const ch = await withTimeout(w.recv(), 10000, "cache change");
    assert(ch && ch.change && ch.change.key === "k" && ch.change.value.toString() === "v",
    `change ${ch && ch.change && ch.change.key}`);
    await w.close();
  }
  await client.close();
}

run(async () => {
  try {
    await main();
  } catch (e) {
    for (const n of nodes) process.stderr.write(`--- node${n.id}.log\n${logTail(n.node, 60)}\n`);
    throw e;
  }
});
