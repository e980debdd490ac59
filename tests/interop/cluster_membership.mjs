// Interop: live membership changes under load, with the official clients.
// Three nodes bootstrap ($LS_LODESTONE, free loopback ports, one temporary
// directory); while three official FerricStore SDK clients in topology
// mode write keys (SET) and the official Felix client publishes to a
// stream, the cluster:
//   1. grows to 4 then 5 nodes (--join),
//   2. drains and removes node 1 (DELETE /v1/cluster/nodes/1; it exits 0),
//   3. loses node 3 to SIGKILL and replaces it with a new node 6
//      (POST /v1/cluster/nodes/3/replace {"with": 6}),
//   4. demotes node 6 (it keeps standby replicas only) and promotes it
//      back (POST /v1/cluster/nodes/6/demote, /promote).
// Both clients must make progress in every phase (errors are counted and
// retried: an error is an unknown outcome, never an acknowledgement).
// Afterwards every group has R voters, all on active nodes, and a leader
// whose configuration is exactly that; every replica of a group hashes the
// same; every acknowledged SET reads back through a new SDK client, and
// every acknowledged publish is in the stream. Exit status 0 means every
// check passed.
import fs from "node:fs";
import path from "node:path";

import { Client, assert, run, sleep, withTimeout } from "./lib/felix.mjs";
import { dir, logTail, nodePorts, nodes, startNode } from "./lib/node.mjs";
import { text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const SHARDS = 4;
const REPLICAS = 3;
const common = ["--advertise-host", "127.0.0.1", "--shards", String(SHARDS),
  "--election-timeout-ms", "500", "--log-level", "info"];

// Nodes by id: {id, node (lib/node.mjs), gone (removed or killed)}.
const byId = new Map();
async function start(id, extra, ports) {
  const node = await startNode(`node${id}`, ["--node-id", String(id), ...common, ...extra], { ports });
  const n = { id, node, gone: false };
  byId.set(id, n);
  return n;
}
const live = () => [...byId.values()].filter((n) => !n.gone && !n.node.exited);

async function admin(n, method, p, body) {
  const res = await fetch(`http://127.0.0.1:${n.node.ports.admin}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  return { status: res.status, body: await res.text() };
}

async function view(n, p = "/v1/cluster") {
  const r = await admin(n, "GET", p);
  if (r.status !== 200) throw new Error(`${p} on node ${n.id}: ${r.status} ${r.body}`);
  return JSON.parse(r.body);
}

// Polls fn until it returns a truthy value (an error it throws is retried,
// unless marked fatal); `why` (set by fn) says what is missing when the
// time runs out.
let why = "";
async function until(what, fn, ms = 45000) {
  const deadline = Date.now() + ms;
  for (;;) {
    for (const n of byId.values()) {
      if (!n.gone && n.node.exited) throw new Error(`${what}: node ${n.id} exited`);
    }
    why = "";
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e && e.fatal) throw e;
      why = String(e && e.message ? e.message : e);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (${why})`);
    await sleep(250);
  }
}

// Every group: a leader, R voters (the meta group 3 or 5) all on the
// active nodes `active` that are not `demoted`, the demoted ones only as
// standbys, and the leader's configuration exactly that.
async function converged(active, demoted = []) {
  const via = live()[0];
  const v = await view(via);
  const states = new Map(v.nodes.map((x) => [x.id, x]));
  for (const id of active) {
    if (states.get(id)?.state !== "active") return (why = `node ${id} is ${states.get(id)?.state}`, false);
    if (states.get(id)?.voter !== !demoted.includes(id)) return (why = `node ${id} voter ${states.get(id)?.voter}`, false);
  }
  const voting = active.filter((id) => !demoted.includes(id));
  for (const g of v.groups) {
    const want = Math.min(g.id === 0 ? (voting.length >= 5 ? 5 : 3) : REPLICAS, voting.length);
    if (g.leader === null) return (why = `group ${g.id}: no leader`, false);
    if (g.voters.length !== want) return (why = `group ${g.id}: ${g.voters.length} targets`, false);
    if (!g.voters.every((id) => voting.includes(id))) return (why = `group ${g.id}: target ${g.voters}`, false);
    if (!g.standbys.every((id) => demoted.includes(id))) return (why = `group ${g.id}: standbys ${g.standbys}`, false);
    const leader = byId.get(g.leader);
    if (!leader || leader.gone) return (why = `group ${g.id}: leader ${g.leader} gone`, false);
    const lg = (await view(leader)).groups[g.id];
    const conf = lg.config ?? [];
    const fits = (c) => (c.role === "voter" && g.voters.includes(c.id)) || (c.role === "standby" && g.standbys.includes(c.id));
    if (conf.length !== want + g.standbys.length || !conf.every(fits)) {
      return (why = `group ${g.id}: configuration ${JSON.stringify(conf)}, target ${g.voters} standby ${g.standbys}`, false);
    }
  }
  return true;
}

// ---- the load ----

const stats = {
  sdk: { acked: 0, errors: 0, lastAck: 0, maxGapMs: 0, sample: new Map() },
  felix: { acked: 0, errors: 0, lastAck: 0, maxGapMs: 0, sample: new Map(), reconnects: 0 },
};
const ackedKeys = [];
const ackedPayloads = [];
let stopping = false;

// Closes a client whatever close() returns or throws.
const quietClose = (c) => Promise.resolve().then(() => c.close()).catch(() => {});

function noteAck(s) {
  const now = Date.now();
  if (s.lastAck !== 0) s.maxGapMs = Math.max(s.maxGapMs, now - s.lastAck);
  s.lastAck = now;
  s.acked++;
}

let phase = "3 nodes";
function noteError(s, e) {
  s.errors++;
  const m = `${phase}: ${String(e && e.message ? e.message : e).slice(0, 100)}`;
  s.sample.set(m, (s.sample.get(m) ?? 0) + 1);
}

async function sdkWorker(sdk, w) {
  for (let i = 0; !stopping; i++) {
    const key = `w${w}:${i}`;
    try {
      const r = await withTimeout(sdk.kv.set(key, `v${w}.${i}`), 10000, "SET");
      if (text(r) !== "OK") throw new Error(`SET answered ${JSON.stringify(text(r))}`);
      ackedKeys.push(key);
      noteAck(stats.sdk);
    } catch (e) {
      noteError(stats.sdk, e);
      await sleep(100);
    }
  }
}

// One CA file trusting every node's dev certificate.
function caFile() {
  const certs = [...byId.values()].map((n) => path.join(n.node.data, "tls", "dev-cert.pem"))
    .filter((c) => fs.existsSync(c));
  const f = path.join(dir, "ca-all.pem");
  fs.writeFileSync(f, certs.map((c) => fs.readFileSync(c, "utf8")).join(""));
  return f;
}

async function felixConnect(n) {
  // 0.5.0: connect(addr, tenant, token, serverName, caFile)
  return withTimeout(Client.connect(`127.0.0.1:${n.node.ports.felix}`, "t1", "tok", "localhost", caFile()),
    10000, "connect");
}

// Publishes through node 3 (killed later) until it fails, then through
// another live node.
async function felixWorker(first) {
  let client = null;
  let on = first;
  let failures = 0;
  for (let i = 0; !stopping; i++) {
    if (client === null) {
      try {
        if (on.gone || on.node.exited) on = live()[0];
        client = await felixConnect(on);
        stats.felix.reconnects++;
      } catch (e) {
        noteError(stats.felix, e);
        on = live()[i % live().length];
        await sleep(200);
        continue;
      }
    }
    const payload = `p${i}`;
    try {
      await withTimeout(client.publish("t1", "default", "ms", Buffer.from(payload)), 5000, "publish");
      ackedPayloads.push(payload);
      noteAck(stats.felix);
      failures = 0;
      await sleep(5);
    } catch (e) {
      noteError(stats.felix, e);
      if (++failures >= 3 || on.gone || on.node.exited) {
        quietClose(client);
        client = null;
        failures = 0;
      }
      await sleep(100);
    }
  }
  if (client) await quietClose(client);
}

// Both clients acknowledged more since `before` (a phase made progress).
async function progressed(phase, before) {
  await until(`${phase}: client progress`, () => {
    why = `sdk ${stats.sdk.acked - before.sdk}, felix ${stats.felix.acked - before.felix} new acks`;
    return stats.sdk.acked >= before.sdk + 20 && stats.felix.acked >= before.felix + 20;
  }, 20000);
  console.log(`ok   ${phase}: sdk ${stats.sdk.acked - before.sdk} acks (${stats.sdk.errors} errors so far), ` +
    `felix ${stats.felix.acked - before.felix} acks (${stats.felix.errors} errors so far)`);
}

const mark = (next) => {
  if (next) phase = next;
  return { sdk: stats.sdk.acked, felix: stats.felix.acked };
};

async function opDone(n, r) {
  assert(r.status === 202, `operation refused: ${r.status} ${r.body}`);
  const op = JSON.parse(r.body).op;
  return until(`operation ${op}`, async () => {
    const o = JSON.parse((await admin(n, "GET", `/v1/cluster/ops/${op}`)).body);
    if (o.state === "failed") throw Object.assign(new Error(`operation ${op} failed: ${o.error}`), { fatal: true });
    why = `operation ${op}: ${o.done}/${o.total}`;
    return o.state === "done";
  }, 60000);
}

async function main() {
  const t0 = Date.now();
  const ports = [];
  for (let i = 0; i < 3; i++) ports.push(await nodePorts());
  const peers = ports.map((p, i) => `${i + 1}=127.0.0.1:${p.internal}`).join(",");
  for (let i = 0; i < 3; i++) await start(i + 1, ["--peers", peers], ports[i]);
  const [n1, n2, n3] = [byId.get(1), byId.get(2), byId.get(3)];
  await until("3 nodes converged", () => converged([1, 2, 3]));
  await until("stream ms", async () =>
    [201, 409].includes((await admin(n2, "POST", "/v1/streams/t1/default/ms", { shards: 1 })).status));

  const seeds = [n1, n2, n3].map((n) => `ferric://127.0.0.1:${n.node.ports.fsnp}`);
  // The SDK trusts only its seeds' endpoints unless told which hosts the
  // nodes it learns from SHARDS may be on: nodes 4 to 6 join later.
  const sdkOptions = { nativeOptions: { trustedHosts: ["127.0.0.1"] } };
  const sdk = await until("SDK", () => FerricStoreClient.fromUrls(seeds, sdkOptions));
  const load = [0, 1, 2].map((w) => sdkWorker(sdk, w));
  load.push(felixWorker(n3));
  let before = mark();
  await sleep(1500);
  await progressed("3 nodes", before);

  // Grow: node 4 joins through node 1, node 5 through node 2.
  for (const [id, via, active] of [[4, n1, [1, 2, 3, 4]], [5, n2, [1, 2, 3, 4, 5]]]) {
    before = mark(`node ${id} joins`);
    await start(id, ["--join", `127.0.0.1:${via.node.ports.internal}`]);
    await until(`node ${id} joined`, () => converged(active), 60000);
    await progressed(`node ${id} joined`, before);
  }

  // Shrink: node 1 drained and removed through node 2; it exits 0.
  before = mark("node 1 removed");
  n1.gone = true; // it exits 0 once removed, maybe before the op is seen done
  await opDone(n2, await admin(n2, "DELETE", "/v1/cluster/nodes/1"));
  await until("node 1 exits", () => n1.node.exited, 20000);
  assert(n1.node.child.exitCode === 0, `node 1 exited with ${n1.node.child.exitCode}`);
  await until("node 1 removed", () => converged([2, 3, 4, 5]), 60000);
  await progressed("node 1 removed", before);

  // Replace: node 3 is killed; node 6 joins and takes its replicas.
  before = mark("node 3 replaced");
  n3.gone = true;
  n3.node.child.kill("SIGKILL");
  await until("node 3 dead", () => n3.node.exited, 10000);
  const n6 = await start(6, ["--join", `127.0.0.1:${n2.node.ports.internal}`]);
  await until("node 6 admitted", async () =>
    (await view(n2)).nodes.some((x) => x.id === 6 && x.admin !== ""));
  await opDone(n2, await admin(n2, "POST", "/v1/cluster/nodes/3/replace", { with: 6 }));
  await until("node 3 replaced by node 6", () => converged([2, 4, 5, 6]), 60000);
  await progressed("node 3 replaced", before);

  // Demote node 6 (a voter of some groups, leading some): its groups get
  // voters elsewhere and keep it as a standby; then promote it back.
  before = mark("node 6 demoted");
  await opDone(n2, await admin(n2, "POST", "/v1/cluster/nodes/6/demote"));
  await until("node 6 demoted", () => converged([2, 4, 5, 6], [6]), 60000);
  await progressed("node 6 demoted", before);
  before = mark("node 6 promoted");
  await opDone(n2, await admin(n2, "POST", "/v1/cluster/nodes/6/promote"));
  await until("node 6 promoted", () => converged([2, 4, 5, 6]), 60000);
  await progressed("node 6 promoted", before);

  stopping = true;
  await Promise.all(load);
  await quietClose(sdk);
  const loadS = (Date.now() - t0) / 1000;

  // Membership: 1 and 3 removed, the others active.
  {
    const v = await view(n2); // node 6 never knew node 1
    const st = Object.fromEntries(v.nodes.map((x) => [x.id, x.state]));
    for (const id of [1, 3]) assert(st[id] === "removed", `node ${id} is ${st[id]}`);
    for (const id of [2, 4, 5, 6]) assert(st[id] === "active", `node ${id} is ${st[id]}`);
  }
  await until("final configuration", () => converged([2, 4, 5, 6]));
  console.log("ok   every group has its R voters on active nodes");

  // Every replica of a group hashes the same (once applied alike).
  for (const g of (await view(n2)).groups) {
    await until(`group ${g.id} replicas agree`, async () => {
      const hs = [];
      for (const id of g.voters) {
        const h = await view(byId.get(id), `/v1/debug/group/${g.id}/hash`);
        hs.push(`${h.hash}/${h.keys}`);
      }
      why = `group ${g.id}: ${hs.join(" ")}`;
      return hs.every((h) => h === hs[0]);
    }, 20000);
  }
  console.log("ok   every replica of every group hashes the same");

  // Every acknowledged SET reads back through a new topology client.
  {
    const c = await FerricStoreClient.fromUrls(live().map((n) => `ferric://127.0.0.1:${n.node.ports.fsnp}`),
      { nativeOptions: { trustedHosts: ["127.0.0.1"] } });
    try {
      for (let i = 0; i < ackedKeys.length; i += 200) {
        const keys = ackedKeys.slice(i, i + 200);
        const got = await c.kv.mget(keys);
        keys.forEach((k, j) => {
          const [w, n] = k.slice(1).split(":");
          assert(text(got[j]) === `v${w}.${n}`, `acknowledged ${k} reads ${JSON.stringify(text(got[j]))}`);
        });
      }
    } finally {
      await quietClose(c);
    }
    console.log(`ok   ${ackedKeys.length} acknowledged SETs read back`);
  }

  // Every acknowledged publish is in the stream. The client buffers at
  // most 256 unread events per subscription (dropping newer ones), so the
  // stream is read in pages of 200, each a subscription from the offset
  // the previous one reached, until one reaches the tail.
  {
    // Read on the stream's leader (a subscription elsewhere is redirected).
    const sv = JSON.parse((await admin(n2, "GET", "/v1/streams/t1/default/ms")).body);
    const client = await felixConnect(byId.get(sv.shard_state[0].leader) ?? n2);
    const want = new Set(ackedPayloads);
    let next = 0n;
    for (let page = 0; page < 200; page++) {
      const sub = await withTimeout(client.subscribe("t1", "default", "ms", next), 20000, "subscribe");
      let got = 0;
      for (; got < 200; got++) {
        let e;
        try {
          // Nothing is published any more: silence is the tail.
          e = await withTimeout(sub.nextEvent(), 3000, "nextEvent");
        } catch {
          break;
        }
        assert(e !== null && e.offset === next, `offset ${e && e.offset}, expected ${next}`);
        want.delete(e.payload.toString());
        next++;
      }
      await quietClose(sub);
      if (got < 200) break;
    }
    await quietClose(client);
    assert(want.size === 0, `${want.size} acknowledged publishes missing (e.g. ${[...want].slice(0, 5)}) of ${next} records`);
    console.log(`ok   ${ackedPayloads.length} acknowledged publishes in the stream (${next} records, no gap)`);
  }

  for (const [name, s] of Object.entries(stats)) {
    console.log(`${name}: ${s.acked} acknowledged, ${s.errors} errors, longest gap between acks ${s.maxGapMs} ms` +
      (s.reconnects !== undefined ? `, ${s.reconnects} connections` : "") +
      (s.sample.size ? `; errors: ${JSON.stringify(Object.fromEntries(s.sample))}` : ""));
  }
  console.log(`membership changes under load took ${loadS.toFixed(1)} s`);
  // Every node left stops cleanly (SIGTERM: exit 0, within 10 s).
  for (const n of live()) {
    n.gone = true;
    n.node.child.kill("SIGTERM");
    await until(`node ${n.id} stops`, () => n.node.exited, 10000);
    assert(n.node.child.exitCode === 0, `node ${n.id} exited with ${n.node.child.exitCode}`);
  }
}

run(async () => {
  try {
    await main();
  } catch (e) {
    stopping = true;
    for (const n of nodes) process.stderr.write(`--- ${n.name}.log\n${logTail(n, 40)}\n`);
    for (const [name, s] of Object.entries(stats)) {
      process.stderr.write(`${name}: ${s.acked} acked, ${s.errors} errors ${JSON.stringify(Object.fromEntries(s.sample))}\n`);
    }
    throw e;
  }
});
