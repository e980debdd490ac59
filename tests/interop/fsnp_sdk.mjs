// Interop: the official FerricStore TypeScript SDK (npm @ferricstore/ferricstore,
// pinned in package.json) against a real lodestone over FSNP. It starts its own
// node ($LS_LODESTONE) on free loopback ports with a temporary data directory,
// drives strings and every KV call the SDK has that the store implements, and
// asserts the answers. Exit status 0 means every check passed.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { startNode } from "./lib/node.mjs";
import { check, runChecks } from "./lib/checks.mjs";
import { freeTcpPort } from "./lib/ports.mjs";
import { norm, text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const main = await startNode("node", ["--advertise-host", "127.0.0.1"]);
const ports = main.ports;

async function connect(url = `ferric://127.0.0.1:${ports.fsnp}`, node = main) {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      return await FerricStoreClient.fromUrl(url);
    } catch (error) {
      if (Date.now() > deadline || node.exited || /authentication|WRONGPASS/.test(String(error))) {
        throw error;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}


check("ping", async (c) => {
  assert.equal(text(await c.ping()), "PONG");
});

check("strings: set/get, ttl, nx/xx, get, del", async (c) => {
  assert.equal(text(await c.kv.set("s:1", "one")), "OK");
  assert.equal(norm(await c.kv.get("s:1")), "one");
  assert.equal(norm(await c.kv.get("s:missing")), null);
  assert.equal(text(await c.kv.set("s:ttl", "x", { px: 150 })), "OK");
  assert.equal(norm(await c.kv.get("s:ttl")), "x");
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(norm(await c.kv.get("s:ttl")), null, "px TTL expires");
  assert.equal(text(await c.kv.set("s:ex", "y", { ex: 100 })), "OK");
  assert.equal(norm(await c.kv.set("s:1", "two", { nx: true })), null, "NX on an existing key");
  assert.equal(text(await c.kv.set("s:new", "n", { nx: true })), "OK");
  assert.equal(norm(await c.kv.set("s:absent", "v", { xx: true })), null, "XX on a missing key");
  assert.equal(text(await c.kv.set("s:1", "three", { xx: true })), "OK");
  assert.equal(norm(await c.kv.set("s:1", "four", { get: true })), "three");
  assert.equal(norm(await c.kv.get("s:1")), "four");
  assert.equal(text(await c.kv.set("s:1", "five", { keepTtl: true })), "OK");
  assert.equal(norm(await c.kv.del("s:1", "s:new", "s:nothing")), 2);
  assert.equal(norm(await c.kv.get("s:1")), null);
});

check("mget / mset (compact requests)", async (c) => {
  assert.equal(norm(await c.kv.mset({ "{t}:a": "1", "{t}:b": "2" })), true);
  assert.deepEqual(norm(await c.kv.mget(["{t}:a", "{t}:b", "{t}:x"])), ["1", "2", null]);
  // MGET across slots fans out per shard and keeps the order.
  await c.kv.set("m:x", "X");
  await c.kv.set("m:y", "Y");
  assert.deepEqual(norm(await c.kv.mget(["m:y", "{t}:a", "m:nope", "m:x"])), ["Y", "1", null, "X"]);
});

check("cas", async (c) => {
  await c.kv.set("cas:1", "a");
  assert.equal(norm(await c.cas("cas:1", "a", "b")), true);
  assert.equal(norm(await c.cas("cas:1", "a", "c")), false);
  assert.equal(norm(await c.kv.get("cas:1")), "b");
  assert.equal(norm(await c.cas("cas:none", "a", "b")), false, "cas() maps nil to false");
});

check("hashes", async (c) => {
  assert.equal(norm(await c.hash.hset("h:1", { f1: "v1", f2: "v2" })), 2);
  assert.equal(norm(await c.hash.hset("h:1", { f2: "v2b", f3: "v3" })), 1);
  assert.equal(norm(await c.hash.hget("h:1", "f2")), "v2b");
  assert.equal(norm(await c.hash.hget("h:1", "nope")), null);
  assert.deepEqual(norm(await c.hash.hmget("h:1", ["f1", "nope", "f3"])), ["v1", null, "v3"]);
  assert.deepEqual(norm(await c.hash.hgetall("h:1")), { f1: "v1", f2: "v2b", f3: "v3" });
  assert.equal(norm(await c.hash.hdel("h:1", "f1", "nope")), 1);
  assert.deepEqual(norm(await c.hash.hgetall("h:1")), { f2: "v2b", f3: "v3" });
  // A field name that is not UTF-8: answered as [field, value] pairs, which
  // hgetall decodes (a map key would have to be UTF-8).
  await c.command("HSET", "h:bin", Buffer.from([0xc3, 0x28]), "raw", "ok", "text");
  const all = norm(await c.hash.hgetall("h:bin"));
  assert.equal(all.ok, "text");
  assert.equal(Object.keys(all).length, 2);
  assert.equal(Object.values(all).includes("raw"), true);
});

check("lists", async (c) => {
  assert.equal(norm(await c.lists.rpush("l:1", "a", "b", "c")), 3);
  assert.equal(norm(await c.lists.lpush("l:1", "z")), 4);
  assert.deepEqual(norm(await c.lists.lrange("l:1", 0, -1)), ["z", "a", "b", "c"]);
  assert.equal(norm(await c.lists.lpop("l:1")), "z");
  assert.equal(norm(await c.lists.rpop("l:1")), "c");
  assert.deepEqual(norm(await c.lists.lpop("l:1", 5)), ["a", "b"]);
  assert.equal(norm(await c.lists.lpop("l:1")), null);
});

check("sets", async (c) => {
  assert.equal(norm(await c.sets.sadd("st:1", "a", "b", "c")), 3);
  assert.equal(norm(await c.sets.sadd("st:1", "a")), 0);
  assert.equal(norm(await c.sets.srem("st:1", "b", "zz")), 1);
  assert.deepEqual(norm(await c.sets.smembers("st:1")).sort(), ["a", "c"]);
  assert.equal(norm(await c.sets.sismember("st:1", "a")), true);
  assert.equal(norm(await c.sets.sismember("st:1", "b")), false);
});

check("sorted sets (integer and float scores)", async (c) => {
  assert.equal(norm(await c.zset.zadd("z:1", [{ member: "a", score: 1 }, { member: "b", score: 2.5 }])), 2);
  assert.equal(norm(await c.zset.zscore("z:1", "b")), "2.5");
  assert.equal(norm(await c.zset.zscore("z:1", "a")), "1");
  assert.equal(norm(await c.zset.zscore("z:1", "nope")), null);
  const withScores = await c.zset.zrange("z:1", 0, -1, { withScores: true });
  assert.equal(JSON.stringify(withScores).includes("2.5"), true, JSON.stringify(withScores));
  assert.deepEqual(norm(await c.zset.zrange("z:1", 0, -1)), ["a", "b"]);
  assert.equal(norm(await c.zset.zrem("z:1", "a")), 1);
  assert.deepEqual(norm(await c.zset.zrange("z:1", 0, -1)), ["b"]);
});

check("WRONGTYPE", async (c) => {
  await c.lists.rpush("wt:1", "x");
  await assert.rejects(c.kv.get("wt:1"), /WRONGTYPE/);
});

check("locks", async (c) => {
  assert.equal(norm(await c.lock("lk:1", "o1", 5000)), true);
  assert.equal(norm(await c.lock("lk:1", "o1", 5000)), true, "same owner is idempotent");
  await assert.rejects(c.lock("lk:1", "o2", 5000), /held by another owner/);
  assert.equal(norm(await c.extendLock("lk:1", "o1", 9000)), 1);
  await assert.rejects(c.extendLock("lk:1", "o2", 9000), /not the lock owner/);
  await assert.rejects(c.unlock("lk:1", "o2"), /not the lock owner/);
  assert.equal(norm(await c.unlock("lk:1", "o1")), 1);
  assert.equal(norm(await c.unlock("lk:1", "o1")), 1, "unlock of a missing lock");
  await assert.rejects(c.extendLock("lk:1", "o1", 1000), /does not exist or has expired/);
});

check("rate limits", async (c) => {
  const a = await c.rateLimitAdd("rl:1", { windowMs: 60000, max: 2 });
  assert.equal(a.status, "allowed");
  assert.equal(a.count, 1);
  assert.equal(a.remaining, 1);
  const b = await c.rateLimitAdd("rl:1", { windowMs: 60000, max: 2 });
  assert.equal(b.allowed, true);
  const d = await c.rateLimitAdd("rl:1", { windowMs: 60000, max: 2 });
  assert.equal(d.status, "denied");
  assert.equal(d.remaining, 0);
  assert.ok(d.resetMs > 0 && d.resetMs <= 60000);
});

check("fetch-or-compute: compute, waiter, result", async (c) => {
  const first = await c.fetchOrCompute("foc:1", { ttlMs: 10000, hint: "h1" });
  assert.equal(first.status, "compute");
  assert.equal(first.shouldCompute, true);
  // A second caller waits on the server until the owner finishes.
  const waiting = c.fetchOrCompute("foc:1", { ttlMs: 10000 });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(norm(await c.fetchOrComputeResult("foc:1", "computed", {
    ttlMs: 10000, computeToken: first.computeToken,
  })), true);
  const second = await waiting;
  assert.equal(second.status, "hit");
  assert.equal(norm(second.value), "computed");
  const third = await c.fetchOrCompute("foc:1", { ttlMs: 10000 });
  assert.equal(third.hit, true);
  assert.equal(norm(third.value), "computed");
});

check("fetch-or-compute: error reaches waiters", async (c) => {
  const first = await c.fetchOrCompute("foc:2", { ttlMs: 10000 });
  assert.equal(first.status, "compute");
  const waiting = c.fetchOrCompute("foc:2", { ttlMs: 10000 });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(norm(await c.fetchOrComputeError("foc:2", "upstream failed", {
    computeToken: first.computeToken,
  })), true);
  await assert.rejects(waiting, /upstream failed/);
  await assert.rejects(
    c.fetchOrComputeResult("foc:2", "late", { ttlMs: 1000, computeToken: first.computeToken }),
    /not held by this token/,
  );
});

check("pipelines: all-SET, all-GET (compact) and mixed (typed)", async (c) => {
  const sets = await c.pipeline([["SET", "p:1", "a"], ["SET", "p:2", "b"]]);
  assert.equal(sets.length, 2);
  const gets = await c.pipeline([["GET", "p:1"], ["GET", "p:2"], ["GET", "p:3"]]);
  assert.deepEqual(gets.map(text), ["a", "b", null]);
  const mixed = await c.pipeline([["SET", "p:4", "d"], ["GET", "p:4"], ["RPUSH", "p:l", "x"]]);
  assert.equal(mixed.length, 3);
  assert.equal(text(mixed[1]), "d");
  assert.equal(Number(mixed[2]), 1);
});

check("raw commands: OPTIONS and unknown", async (c) => {
  const opts = await c.command("OPTIONS");
  assert.ok(opts.schemas["FLOW.QUERY"]);
  assert.ok(opts.settings.FERRICSTORE_NATIVE_MAX_FRAME_BYTES > 0);
  await assert.rejects(c.command("FSNP_NO_SUCH_COMMAND", "x"), /unknown command/);
});

check("10 000 concurrent SETs then GETs over one connection", async (c) => {
  const n = 10000;
  const sets = [];
  for (let i = 0; i < n; i++) sets.push(c.kv.set(`bulk:${i}`, `v${i}`));
  const okCount = (await Promise.all(sets)).filter((r) => text(r) === "OK").length;
  assert.equal(okCount, n);
  const gets = [];
  for (let i = 0; i < n; i += 97) {
    gets.push(c.kv.get(`bulk:${i}`).then((v) => assert.equal(text(v), `v${i}`)));
  }
  await Promise.all(gets);
});

check("a large value (512 KiB, chunked replies)", async (c) => {
  const big = "x".repeat(512 << 10);
  assert.equal(text(await c.kv.set("big:1", big)), "OK");
  assert.equal(text(await c.kv.get("big:1")).length, big.length);
});

check("topology mode: SHARDS routing by slot", async () => {
  const t = await FerricStoreClient.fromUrls([`ferric://127.0.0.1:${ports.fsnp}`]);
  try {
    for (let i = 0; i < 50; i++) {
      assert.equal(norm(await t.kv.set(`topo:${i}`, `t${i}`)), "OK");
    }
    for (let i = 0; i < 50; i++) {
      assert.equal(norm(await t.kv.get(`topo:${i}`)), `t${i}`);
    }
    assert.deepEqual(norm(await t.kv.mget(["topo:1", "topo:2", "topo:x"])), ["t1", "t2", null]);
  } finally {
    await t.close();
  }
});

check("requirepass: AUTH from the URL, refused without it", async () => {
  const secured = await startNode("secured", ["--advertise-host", "127.0.0.1", "--requirepass", "pa55"]);
  const url = `ferric://127.0.0.1:${secured.ports.fsnp}`;
  // Wait until it listens (a refused AUTH also proves it is up).
  await assert.rejects(connect(url, secured), /requires authentication/);
  await assert.rejects(
    FerricStoreClient.fromUrl(`ferric://default:wrong@127.0.0.1:${secured.ports.fsnp}`),
    /WRONGPASS/,
  );
  const c = await connect(`ferric://default:pa55@127.0.0.1:${secured.ports.fsnp}`, secured);
  try {
    assert.equal(norm(await c.kv.set("auth:k", "v")), "OK");
    assert.equal(norm(await c.kv.get("auth:k")), "v");
  } finally {
    await c.close();
    secured.child.kill("SIGTERM");
  }
});

check("TLS (ferrics://, dev certificate); require_tls refuses plaintext", async () => {
  const tlsPort = await freeTcpPort();
  const secure = await startNode("secure", [
    "--advertise-host", "127.0.0.1", "--fsnp-tls", `127.0.0.1:${tlsPort}`, "--fsnp-require-tls",
  ]);
  const ca = path.join(secure.data, "tls", "dev-cert.pem");
  const deadline = Date.now() + 20000;
  let c;
  for (;;) {
    try {
      c = await FerricStoreClient.fromUrl(`ferrics://localhost:${tlsPort}`, {
        nativeOptions: { tlsOptions: { ca: fs.readFileSync(ca) } },
      });
      break;
    } catch (error) {
      if (Date.now() > deadline || secure.exited) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    assert.equal(text(await c.kv.set("tls:1", "secret")), "OK");
    assert.equal(norm(await c.kv.get("tls:1")), "secret");
    assert.equal(norm(await c.hash.hset("tls:h", { a: "1" })), 1);
    const big = "y".repeat(300 << 10);
    await c.kv.set("tls:big", big);
    assert.equal(norm(await c.kv.get("tls:big")), big);
    const gets = [];
    for (let i = 0; i < 2000; i++) gets.push(c.kv.set(`tls:p${i}`, `v${i}`));
    assert.equal((await Promise.all(gets)).length, 2000);
  } finally {
    await c.close();
  }
  await assert.rejects(
    FerricStoreClient.fromUrl(`ferric://127.0.0.1:${secure.ports.fsnp}`),
    /require_tls|TLS/,
  );
  secure.child.kill("SIGTERM");
});

await runChecks(connect);
