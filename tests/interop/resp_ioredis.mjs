// Interop: the ioredis client (npm, pinned in package.json) against
// lodestone's RESP listener. One node: strings, hashes, lists, sets, sorted
// sets, a pipeline, MULTI/EXEC (an element's own error, EXECABORT), a WATCH
// conflict made by a second connection, AUTH as an ACL user. Three nodes:
// ioredis's Cluster client learns the nodes from CLUSTER SLOTS and spreads
// the keys over all three (each node's total_commands_processed grows), runs
// a transaction, and every acknowledged write is read back through the
// other nodes' plain connections. ioredis speaks RESP2 only: RESP3 is
// covered by tests/integration/test_resp. Exit status 0 means every check
// passed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";

import Redis, { Cluster } from "ioredis";

import { logTail, nodePorts, nodes, startNode } from "./lib/node.mjs";
import { freeTcpPort } from "./lib/ports.mjs";

const lodectl = path.join(path.dirname(process.env.LS_LODESTONE), "lodectl");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let failed = 0;
const clients = [];
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (error) {
    failed++;
    console.log(`FAIL ${name}: ${error && error.stack ? error.stack : error}`);
  }
}

// A plain client; commands wait (bounded) while it connects.
function client(port, opts = {}) {
  const r = new Redis({
    host: "127.0.0.1",
    port,
    maxRetriesPerRequest: 20,
    retryStrategy: (times) => (times > 100 ? null : 100),
    ...opts,
  });
  r.on("error", () => {}); // connection retries are expected while nodes start
  clients.push(r);
  return r;
}

// Waits until a write through `r` goes through (every group elected).
async function ready(r, what) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      if ((await r.set(`ready:${what}`, "1")) === "OK") return;
    } catch { /* not yet */ }
    assert.ok(Date.now() < deadline, `${what} answers SET`);
    assert.ok(!nodes.some((n) => n.exited), "no node exited");
    await sleep(200);
  }
}

async function commandsProcessed(r) {
  const info = await r.info("stats");
  return Number(/total_commands_processed:(\d+)/.exec(info)[1]);
}

// --- One node -----------------------------------------------------------------

const one = { ...(await nodePorts()), resp: await freeTcpPort() };
const single = await startNode("single", [
  "--advertise-host", "127.0.0.1",
  "--log-level", "warn",
  "--resp", `127.0.0.1:${one.resp}`,
], { ports: one });

try {
  const r = client(one.resp);
  const other = client(one.resp);
  await ready(r, "single");

  await step("strings", async () => {
    assert.equal(await r.set("s:a", "1"), "OK");
    assert.equal(await r.get("s:a"), "1");
    assert.equal(await r.incr("s:a"), 2);
    assert.equal(await r.incrby("s:a", 10), 12);
    assert.equal(await r.append("s:a", "x"), 3);
    assert.equal(await r.strlen("s:a"), 3);
    assert.equal(await r.set("s:a", "v", "NX"), null);
    assert.equal(await r.set("s:t", "v", "EX", 100), "OK");
    const ttl = await r.ttl("s:t");
    assert.ok(ttl > 90 && ttl <= 100, `ttl ${ttl}`);
    assert.equal(await r.mset("{s}1", "a", "{s}2", "b"), "OK");
    assert.deepEqual(await r.mget("{s}1", "s:none", "{s}2"), ["a", null, "b"]);
    assert.equal(await r.getdel("{s}1"), "a");
    assert.equal(await r.exists("{s}1", "{s}2"), 1);
    assert.equal(await r.del("s:a", "s:t", "{s}2"), 3);
    await assert.rejects(r.set("s:a", "v", "EX", 0), /invalid expire time/);
  });

  await step("hashes", async () => {
    assert.equal(await r.hset("h:1", { f1: "a", f2: "b" }), 2);
    assert.equal(await r.hget("h:1", "f1"), "a");
    assert.deepEqual(await r.hgetall("h:1"), { f1: "a", f2: "b" });
    assert.deepEqual(await r.hmget("h:1", "f2", "nope"), ["b", null]);
    assert.equal(await r.hlen("h:1"), 2);
    assert.equal(await r.hdel("h:1", "f1"), 1);
    await assert.rejects(r.get("h:1"), /WRONGTYPE/);
  });

  await step("lists", async () => {
    assert.equal(await r.rpush("l:1", "a", "b", "c"), 3);
    assert.equal(await r.lpush("l:1", "z"), 4);
    assert.deepEqual(await r.lrange("l:1", 0, -1), ["z", "a", "b", "c"]);
    assert.equal(await r.lindex("l:1", -1), "c");
    assert.equal(await r.lpop("l:1"), "z");
    assert.deepEqual(await r.rpop("l:1", 2), ["c", "b"]);
    assert.equal(await r.llen("l:1"), 1);
  });

  await step("sets", async () => {
    assert.equal(await r.sadd("set:1", "a", "b", "a"), 2);
    assert.deepEqual((await r.smembers("set:1")).sort(), ["a", "b"]);
    assert.equal(await r.sismember("set:1", "b"), 1);
    assert.equal(await r.srem("set:1", "a"), 1);
    assert.equal(await r.scard("set:1"), 1);
  });

  await step("sorted sets", async () => {
    assert.equal(await r.zadd("z:1", 1, "a", 2.5, "b", 3, "c"), 3);
    assert.deepEqual(await r.zrange("z:1", 0, -1, "WITHSCORES"), ["a", "1", "b", "2.5", "c", "3"]);
    assert.deepEqual(await r.zrangebyscore("z:1", 2, "+inf"), ["b", "c"]);
    assert.equal(await r.zscore("z:1", "b"), "2.5");
    assert.equal(await r.zrank("z:1", "c"), 2);
    assert.equal(await r.zrevrank("z:1", "c"), 0);
    assert.equal(await r.zrem("z:1", "a"), 1);
    assert.equal(await r.zcard("z:1"), 2);
  });

  await step("pipeline", async () => {
    const p = r.pipeline();
    for (let i = 0; i < 500; i++) p.set(`p:${i}`, `v${i}`);
    p.incr("p:n").incr("p:n").get("p:n");
    const out = await p.exec();
    assert.equal(out.length, 503);
    for (const [err] of out) assert.equal(err, null);
    assert.deepEqual(out.slice(-3).map(([, v]) => v), [1, 2, "2"]);
    const keys = Array.from({ length: 500 }, (_, i) => `p:${i}`);
    assert.deepEqual(await other.mget(keys), keys.map((_, i) => `v${i}`));
  });

  await step("MULTI/EXEC", async () => {
    const out = await r.multi()
      .set("{u}a", "1").incr("{u}a").get("{u}a")
      .hset("{u}a", "f", "v") // WRONGTYPE: this element's error only
      .rpush("{u}l", "x", "y").lrange("{u}l", 0, -1)
      .exec();
    assert.equal(out.length, 6);
    assert.deepEqual(out[0], [null, "OK"]);
    assert.deepEqual(out[1], [null, 2]);
    assert.deepEqual(out[2], [null, "2"]);
    assert.match(String(out[3][0]), /WRONGTYPE/);
    assert.deepEqual(out[4], [null, 2]);
    assert.deepEqual(out[5], [null, ["x", "y"]]);
    assert.equal(await other.get("{u}a"), "2");
    // A wrong arity when queued: EXECABORT, nothing applies.
    await assert.rejects(
      r.multi([["set", "{u}b", "1"], ["get"]]).exec(),
      /EXECABORT/,
    );
    assert.equal(await other.exists("{u}b"), 0);
    // Keys of two slots: CROSSSLOT at EXEC, nothing applies.
    await assert.rejects(r.multi().set("x:1", "1").set("x:2", "2").exec(), /CROSSSLOT/);
    assert.equal(await other.exists("x:1", "x:2"), 0);
  });

  await step("WATCH conflict from a second connection", async () => {
    const w = client(one.resp);
    assert.equal(await w.watch("{u}w"), "OK");
    assert.equal(await other.set("{u}w", "theirs"), "OK");
    assert.equal(await w.multi().set("{u}w", "mine").exec(), null);
    assert.equal(await other.get("{u}w"), "theirs");
    // No conflict: applied.
    assert.equal(await w.watch("{u}w"), "OK");
    assert.deepEqual(await w.multi().set("{u}w", "mine").get("{u}w").exec(), [[null, "OK"], [null, "mine"]]);
    // UNWATCH forgets the key.
    assert.equal(await w.watch("{u}w"), "OK");
    assert.equal(await other.set("{u}w", "again"), "OK");
    assert.equal(await w.unwatch(), "OK");
    assert.deepEqual(await w.multi().get("{u}w").exec(), [[null, "again"]]);
  });

  await step("AUTH as an ACL user", async () => {
    execFileSync(lodectl, ["--fsnp", `127.0.0.1:${one.fsnp}`, "acl", "setuser", "app", "on", ">app-pw-1",
      "~app:*", "+@all"], { encoding: "utf8", timeout: 30000 });
    // The listener's copy of the users follows the meta group.
    const deadline = Date.now() + 20000;
    let app;
    for (;;) {
      app = new Redis({ host: "127.0.0.1", port: one.resp, username: "app", password: "app-pw-1",
        lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      app.on("error", () => {});
      try {
        await app.connect();
        break;
      } catch (error) {
        app.disconnect();
        assert.ok(Date.now() < deadline, `AUTH app: ${error}`);
        await sleep(100);
      }
    }
    clients.push(app);
    assert.equal(await app.set("app:1", "v"), "OK");
    assert.equal(await app.get("app:1"), "v");
    await assert.rejects(app.get("other:1"), /NOPERM/);
    assert.deepEqual(await app.multi().incr("app:n").incr("app:n").exec(), [[null, 1], [null, 2]]);
    const bad = new Redis({ host: "127.0.0.1", port: one.resp, username: "app", password: "wrong",
      lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    // ioredis reports the refused AUTH as an error event, then closes.
    let authError = null;
    bad.on("error", (e) => { authError ??= e; });
    await assert.rejects(bad.connect());
    for (let i = 0; i < 50 && authError === null; i++) await sleep(20);
    assert.match(String(authError), /WRONGPASS/);
    bad.disconnect();
  });
} catch (error) {
  failed++;
  console.log(`FAIL single node: ${error && error.stack ? error.stack : error}\n${logTail(single)}`);
}
for (const c of clients.splice(0)) c.disconnect();
single.child.kill("SIGTERM");

// --- Three nodes: Cluster mode --------------------------------------------------

const ports = [];
for (let i = 0; i < 3; i++) ports.push({ ...(await nodePorts()), resp: await freeTcpPort() });
const peers = ports.map((p, i) => `${i + 1}=127.0.0.1:${p.internal}`).join(",");
for (let i = 0; i < 3; i++) {
  await startNode(`node${i + 1}`, [
    "--node-id", String(i + 1),
    "--advertise-host", "127.0.0.1",
    "--peers", peers,
    "--shards", "4",
    "--log-level", "warn",
    "--resp", `127.0.0.1:${ports[i].resp}`,
  ], { ports: ports[i] });
}

try {
  const plain = ports.map((p) => client(p.resp));
  for (let i = 0; i < 3; i++) await ready(plain[i], `node${i + 1}`);
  // CLUSTER SLOTS names a node once its record (with its RESP address)
  // is in the meta group: wait for all three before the client reads it.
  const deadline = Date.now() + 30000;
  for (;;) {
    const slots = await plain[1].call("CLUSTER", "SLOTS");
    const listed = new Set(slots.map((range) => range[2][1]));
    if (listed.size === 3) break;
    assert.ok(Date.now() < deadline, `CLUSTER SLOTS lists ${listed.size} of 3 nodes`);
    await sleep(200);
  }
  const before = await Promise.all(plain.map(commandsProcessed));
  const cluster = new Cluster([{ host: "127.0.0.1", port: ports[1].resp }], {
    scaleReads: "master",
    redisOptions: { maxRetriesPerRequest: 5 },
  });
  cluster.on("error", () => {});
  clients.push(cluster);

  await step("Cluster: writes spread over the nodes of CLUSTER SLOTS", async () => {
    const N = 300;
    const acked = [];
    await Promise.all(Array.from({ length: N }, async (_, i) => {
      if ((await cluster.set(`c:${i}`, `v${i}`)) === "OK") acked.push(i);
    }));
    assert.equal(acked.length, N);
    assert.equal(cluster.nodes("master").length, 3);
    const after = await Promise.all(plain.map(commandsProcessed));
    // Each node got a share of the writes (its own INFO call adds 1).
    console.log(`     commands per node: ${after.map((a, i) => a - before[i]).join(", ")}`);
    for (let i = 0; i < 3; i++) {
      assert.ok(after[i] - before[i] > 20, `node${i + 1} served ${after[i] - before[i]} commands`);
    }
    // Every acknowledged write, read back through every node's plain
    // connection (so through nodes that did not take the write).
    const keys = acked.map((i) => `c:${i}`);
    for (const p of plain) {
      assert.deepEqual(await p.mget(keys), acked.map((i) => `v${i}`));
    }
  });

  await step("Cluster: MULTI/EXEC and WATCH on one slot", async () => {
    const out = await cluster.multi().set("{cm}a", "1").incr("{cm}a").get("{cm}a").exec();
    assert.deepEqual(out, [[null, "OK"], [null, 2], [null, "2"]]);
    for (const p of plain) assert.equal(await p.get("{cm}a"), "2");
    const w = plain[0];
    assert.equal(await w.watch("{cm}a"), "OK");
    assert.equal(await plain[2].incr("{cm}a"), 3);
    assert.equal(await w.multi().incr("{cm}a").exec(), null);
    assert.equal(await plain[1].get("{cm}a"), "3");
  });
} catch (error) {
  failed++;
  console.log(`FAIL cluster: ${error && error.stack ? error.stack : error}`);
}
for (const c of clients) c.disconnect();
for (const n of nodes) if (!n.exited) n.child.kill("SIGTERM");
if (failed > 0) {
  for (const n of nodes) console.log(`--- ${n.name}\n${logTail(n)}`);
  console.log(`resp_ioredis.mjs: ${failed} check(s) failed`);
  process.exit(1);
}
console.log("resp_ioredis.mjs: single node and Cluster mode checks passed");
process.exit(0);
