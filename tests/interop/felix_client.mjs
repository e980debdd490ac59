// Interop: the official Felix client (npm felix-client-linux-x64-gnu@0.5.0,
// the Rust client as a Node addon) against a real `lodestone --dev`.
// Starts the node (LS_LODESTONE) on free ports in a temp dir, runs publish,
// subscribe (history paged <= 256 per subscription: the client drops what
// lies beyond 256 unread events), streamShards, cachePut/Get/Delete and
// counters, and kills the node at the end whatever happens.
import { assert, connectReady, run, sleep, withTimeout } from "./lib/felix.mjs";
import { startNode } from "./lib/node.mjs";
import { freePort } from "./lib/ports.mjs";

const node = await startNode("node", [
  "--fsnp-tls", `127.0.0.1:${await freePort()}`, "--shards", "4", "--log-level", "warn",
], { stderr: "inherit" });

async function main() {
  // Waits for the Raft groups: a cache put answers once leaders exist.
  const client = await connectReady(node);

  // streamShards: dev mode creates the stream with --auto-create-shards (4).
  const shards = await withTimeout(client.streamShards("t1", "default", "orders"), 10000, "streamShards");
  assert(shards === 4, `streamShards = ${shards}`);

  // Publish 300 records, awaited one by one (ordered), then page the
  // history: three subscriptions of <= 100 each, resuming by offset.
  const N = 300;
  for (let i = 0; i < N; i++) {
    await withTimeout(client.publish("t1", "default", "orders", Buffer.from(`m${i}`)), 10000, "publish");
  }
  let next = 0n;
  for (let page = 0; page < 3; page++) {
    const sub = await withTimeout(client.subscribe("t1", "default", "orders", next), 10000, "subscribe");
    for (let i = 0; i < 100; i++) {
      const e = await withTimeout(sub.nextEvent(), 10000, "nextEvent");
      assert(e !== null, "event");
      assert(e.offset === next, `offset ${e.offset} != ${next}`);
      assert(e.payload.toString() === `m${Number(next)}`, `payload ${e.payload}`);
      next++;
    }
    await sub.close();
  }

  // Live delivery joins history without a gap: subscribe at the tail,
  // publish, receive.
  const live = await withTimeout(client.subscribe("t1", "default", "orders", BigInt(N)), 10000, "subscribe");
  for (let i = 0; i < 10; i++) {
    await client.publish("t1", "default", "orders", Buffer.from(`live${i}`));
    const e = await withTimeout(live.nextEvent(), 10000, "live event");
    assert(e.offset === BigInt(N + i), `live offset ${e.offset}`);
    assert(e.payload.toString() === `live${i}`, "live payload");
  }
  await live.close();

  // Keyed publishes land on the shard streamShards' count implies.
  await client.publish("t1", "default", "orders", Buffer.from("keyed"), Buffer.from("customer-4"));
  const sharded = await withTimeout(
    client.subscribeSharded("t1", "default", "orders", "earliest"), 10000, "subscribeSharded");
  let seenKeyed = null;
  for (let i = 0; i < N + 11 && seenKeyed === null; i++) {
    const it = await withTimeout(sharded.nextEvent(), 10000, "sharded event");
    if (it.event && it.event.payload.toString() === "keyed") seenKeyed = it.shard;
  }
  // FNV-1a + splitmix64 of "customer-4" mod 4 (8 shards -> 2, so mod 4 = 2).
  assert(seenKeyed === 2, `keyed record on shard ${seenKeyed}`);
  await sharded.close();

  // Cursor errors.
  let err = null;
  try {
    await withTimeout(client.subscribe("t1", "default", "orders", 100000n), 10000, "subscribe future");
  } catch (e) { err = e; }
  assert(err && /past the end/.test(err.message), `in_future: ${err && err.message}`);

  // Caches and counters.
  await client.cachePut("t1", "default", "c1", "k", Buffer.from("v1"));
  const got = await client.cacheGet("t1", "default", "c1", "k");
  assert(got && got.toString() === "v1", "cacheGet");
  assert((await client.cacheGet("t1", "default", "c1", "missing")) === null, "miss");
  const removed = await client.cacheDelete("t1", "default", "c1", "k");
  assert(removed && removed.toString() === "v1", "cacheDelete returns the value");
  assert((await client.cacheDelete("t1", "default", "c1", "k")) === null, "delete of nothing");
  await client.cachePut("t1", "default", "c1", "ttl", Buffer.from("x"), 1);
  for (let i = 0; ; i++) {
    const v = await client.cacheGet("t1", "default", "c1", "ttl");
    if (v === null) break;
    assert(i < 100, "TTL never lapsed");
    await sleep(100);
  }
  assert((await client.counterGet("t1", "default", "c1", "n")) === null, "never written");
  assert((await client.counterAdd("t1", "default", "c1", "n", 5)) === 5, "add 5");
  assert((await client.counterAdd("t1", "default", "c1", "n", -2)) === 3, "add -2");
  assert((await client.counterGet("t1", "default", "c1", "n")) === 3, "get 3");

  await client.close();
}

run(main);
