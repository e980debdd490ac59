// Interop: the official FerricStore TypeScript SDK in topology mode against a
// 3-node lodestone cluster. It starts three nodes ($LS_LODESTONE, free
// loopback ports, one temporary directory), waits until every node's SHARDS
// names a leader for every shard, then creates the SDK from the three seeds:
// the SDK reads SHARDS, routes each key by slot to its shard leader's
// advertised endpoint (checked against SHARDS), and every KV call it makes
// must succeed. Exit status 0 means every check passed.
import assert from "node:assert/strict";

import { nodePorts, nodes, startNode } from "./lib/node.mjs";
import { norm, text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const SHARDS = 4;
const ports = [];
for (let i = 0; i < 3; i++) ports.push(await nodePorts());
const peers = ports.map((p, i) => `${i + 1}=127.0.0.1:${p.internal}`).join(",");
for (let i = 0; i < 3; i++) {
  await startNode(`node${i + 1}`, [
    "--node-id", String(i + 1),
    "--advertise-host", "127.0.0.1",
    "--peers", peers,
    "--shards", String(SHARDS),
    "--log-level", "warn",
  ], { ports: ports[i] });
}
const seeds = nodes.map((n) => `ferric://127.0.0.1:${n.ports.fsnp}`);
const field = (m, k) => (m instanceof Map ? m.get(k) : m?.[k]);

async function single(url, deadlineMs = 30000) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      return await FerricStoreClient.fromUrl(url);
    } catch (error) {
      if (Date.now() > deadline || nodes.some((n) => n.exited)) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// SHARDS of one node as [{first, last, shard, port, hint}].
async function shardsOf(c) {
  const raw = await c.command("SHARDS");
  return field(raw, "ranges").map((r) => ({
    first: Number(field(r, "first_slot")),
    last: Number(field(r, "last_slot")),
    shard: Number(field(r, "shard")),
    port: Number(field(r, "native_port")),
    hint: text(field(r, "hint")),
  }));
}

// Every node names a leader for every shard, and they agree.
const direct = [];
for (const s of seeds) direct.push(await single(s));
let ranges;
{
  const deadline = Date.now() + 30000;
  for (;;) {
    const all = [];
    for (const c of direct) all.push(await shardsOf(c));
    const settled = all.every((rs) => rs.every((r) => r.hint !== "local_fallback" && r.hint !== "leader_unknown"));
    const same = all.every((rs) => JSON.stringify(rs.map((r) => r.port)) === JSON.stringify(all[0].map((r) => r.port)));
    if (settled && same) {
      ranges = all[0];
      break;
    }
    if (Date.now() > deadline) throw new Error(`no stable leaders: ${JSON.stringify(all)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
const slotPort = (slot) => ranges.find((r) => r.first <= slot && slot <= r.last).port;
const leaderPorts = new Set(ranges.map((r) => r.port));

const checks = [];
function check(name, fn) {
  checks.push([name, fn]);
}

check("the SDK routes each key to its shard leader's endpoint", async (t) => {
  const seen = new Set();
  for (let i = 0; i < 64; i++) {
    const key = `route:${i}`;
    const r = await t.route(key);
    const slot = Number(field(r, "slot"));
    assert.ok(slot >= 0 && slot < 1024, JSON.stringify(r));
    const port = Number(field(field(r, "endpoint"), "nativePort"));
    assert.equal(port, slotPort(slot), `route of ${key}: ${JSON.stringify(r, (_, v) => (typeof v === "bigint" ? String(v) : v))}`);
    seen.add(port);
  }
  // Keys spread over the shards reach more than one leader when there is one.
  assert.equal(seen.size, leaderPorts.size);
});

check("strings, MGET/MSET and DEL across shards", async (t) => {
  for (let i = 0; i < 40; i++) assert.equal(text(await t.kv.set(`s:${i}`, `v${i}`)), "OK");
  for (let i = 0; i < 40; i++) assert.equal(norm(await t.kv.get(`s:${i}`)), `v${i}`);
  const keys = Array.from({ length: 40 }, (_, i) => `s:${i}`);
  assert.deepEqual(norm(await t.kv.mget(keys)), keys.map((_, i) => `v${i}`));
  assert.equal(norm(await t.kv.mset({ "{m}:a": "1", "{m}:b": "2" })), true);
  assert.deepEqual(norm(await t.kv.mget(["{m}:a", "{m}:b", "{m}:c"])), ["1", "2", null]);
  assert.equal(norm(await t.kv.del(...keys.slice(0, 10))), 10);
  assert.equal(norm(await t.kv.get("s:3")), null);
  assert.equal(text(await t.kv.set("s:ttl", "x", { px: 60000 })), "OK");
  assert.equal(await t.cas("s:20", "v20", "w20"), true);
  assert.equal(norm(await t.kv.get("s:20")), "w20");
});

check("hashes (also a field name that is not UTF-8)", async (t) => {
  assert.equal(norm(await t.hash.hset("h:1", { f1: "a", f2: "b" })), 2);
  assert.equal(norm(await t.hash.hget("h:1", "f1")), "a");
  assert.deepEqual(norm(await t.hash.hmget("h:1", ["f2", "zz"])), ["b", null]);
  assert.deepEqual(norm(await t.hash.hgetall("h:1")), { f1: "a", f2: "b" });
  await t.command("HSET", "h:bin", Buffer.from([0xff, 0xfe]), "raw", "ok", "text");
  const all = norm(await t.hash.hgetall("h:bin"));
  assert.equal(all.ok, "text");
  assert.equal(Object.keys(all).length, 2);
});

check("lists, sets, sorted sets", async (t) => {
  assert.equal(norm(await t.lists.rpush("l:1", "a", "b", "c")), 3);
  assert.deepEqual(norm(await t.lists.lrange("l:1", 0, -1)), ["a", "b", "c"]);
  assert.equal(norm(await t.lists.lpop("l:1")), "a");
  assert.equal(norm(await t.sets.sadd("st:1", "a", "b")), 2);
  assert.equal(norm(await t.sets.sismember("st:1", "a")), true);
  assert.deepEqual(norm(await t.sets.smembers("st:1")).sort(), ["a", "b"]);
  assert.equal(norm(await t.zset.zadd("z:1", [{ member: "a", score: 1 }, { member: "b", score: 2.5 }])), 2);
  assert.equal(norm(await t.zset.zscore("z:1", "b")), "2.5");
  assert.deepEqual(norm(await t.zset.zrange("z:1", 0, -1)), ["a", "b"]);
});

check("locks and rate limits", async (t) => {
  assert.equal(norm(await t.lock("lk:1", "o1", 5000)), true);
  await assert.rejects(t.lock("lk:1", "o2", 5000), /held by another owner/);
  assert.equal(norm(await t.extendLock("lk:1", "o1", 9000)), 1);
  assert.equal(norm(await t.unlock("lk:1", "o1")), 1);
  const a = await t.rateLimitAdd("rl:1", { windowMs: 60000, max: 1 });
  assert.equal(a.status, "allowed");
  const b = await t.rateLimitAdd("rl:1", { windowMs: 60000, max: 1 });
  assert.equal(b.status, "denied");
});

check("pipelines split per leader and merged in order", async (t) => {
  const cmds = [];
  for (let i = 0; i < 30; i++) cmds.push(["SET", `p:${i}`, `x${i}`]);
  const sets = await t.pipeline(cmds);
  assert.equal(sets.length, 30);
  const gets = await t.pipeline(cmds.map(([, k]) => ["GET", k]));
  assert.deepEqual(norm(gets), cmds.map(([, , v]) => v));
});

check("writes through the SDK are read back through every node", async (t) => {
  assert.equal(text(await t.kv.set("x:check", "agreed")), "OK");
  for (const c of direct) assert.equal(norm(await c.kv.get("x:check")), "agreed");
});

let failed = 0;
const topo = await FerricStoreClient.fromUrls(seeds);
try {
  await topo.refreshTopology();
  for (const [name, fn] of checks) {
    try {
      await fn(topo);
      console.log(`ok - ${name}`);
    } catch (error) {
      failed++;
      console.log(`not ok - ${name}\n  ${String(error?.stack ?? error).split("\n").join("\n  ")}`);
    }
  }
} finally {
  await topo.close();
  for (const c of direct) await c.close();
}
for (const n of nodes) n.child.kill("SIGTERM");
process.exit(failed === 0 ? 0 : 1);
