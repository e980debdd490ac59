// Interop: the official Felix client (npm felix-client-linux-x64-gnu@0.5.0)
// against a real `lodestone --dev`, for the durable features: consumer
// groups (groupPoll with long polls, groupAck/Nack, visibility lapses,
// groupDeadLetters/Redrive/Discard), counters, and cache watches (replay
// from an offset, retained delivery, resnapshot after compaction, cursor
// errors). The node runs with a 1 s visibility timeout and 10 cache changes
// kept per shard, and is killed at the end whatever happens.
import { assert, connectReady, run, sleep, withTimeout } from "./lib/felix.mjs";
import { startNode } from "./lib/node.mjs";
import { freePort } from "./lib/ports.mjs";

// The Felix routing hash: FNV-1a 64 then the splitmix64 finalizer.
function felixShard(key, shards) {
  const M = (1n << 64n) - 1n;
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(key)) { h ^= BigInt(b); h = (h * 0x100000001b3n) & M; }
  h ^= h >> 30n; h = (h * 0xbf58476d1ce4e5b9n) & M;
  h ^= h >> 27n; h = (h * 0x94d049bb133111ebn) & M;
  h ^= h >> 31n;
  return Number(h % BigInt(shards));
}

const node = await startNode("node", [
  "--fsnp-tls", `127.0.0.1:${await freePort()}`, "--shards", "4", "--log-level", "warn",
  "--felix-group-visibility-ms", "1000", "--felix-cache-history", "10",
  "--retention-interval-ms", "100",
], { stderr: "inherit" });

async function main() {
  const client = await connectReady(node);
  const T = (p, what) => withTimeout(p, 15000, what);

  // ---- consumer groups (stream "jobs", unkeyed: shard 0) ----
  for (let i = 0; i < 5; i++) {
    await T(client.publish("t1", "default", "jobs", Buffer.from(`job${i}`)), "publish");
  }
  let recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 3, 0), "groupPoll");
  assert(recs.length === 3, `poll 3: ${recs.length}`);
  for (let i = 0; i < 3; i++) {
    assert(recs[i].offset === BigInt(i) && recs[i].attempts === 1, `record ${i}`);
    assert(recs[i].payload.toString() === `job${i}`, "payload");
  }
  await T(client.groupAck("t1", "default", "jobs", 0, "g", 0n), "ack");
  await T(client.groupAck("t1", "default", "jobs", 0, "g", 2n), "ack");
  await T(client.groupNack("t1", "default", "jobs", 0, "g", 1n), "nack");
  // The nack redelivers at once, before the never-delivered 3 and 4.
  recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "groupPoll");
  assert(recs.map((r) => `${r.offset}:${r.attempts}`).join(",") === "1:2,3:1,4:1",
    `after nack: ${recs.map((r) => `${r.offset}:${r.attempts}`)}`);
  for (const r of recs) await T(client.groupAck("t1", "default", "jobs", 0, "g", r.offset), "ack");
  // An empty long poll answers [] after its wait.
  let t0 = Date.now();
  recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 300), "empty long poll");
  assert(recs.length === 0 && Date.now() - t0 >= 200, `empty long poll ${recs.length} ${Date.now() - t0}`);
  // A long poll is woken by a publish.
  t0 = Date.now();
  const parked = client.groupPoll("t1", "default", "jobs", 0, "g", 10, 10000);
  await sleep(200);
  await T(client.publish("t1", "default", "jobs", Buffer.from("late")), "publish");
  recs = await T(parked, "woken long poll");
  assert(recs.length === 1 && recs[0].offset === 5n, "woken poll");
  assert(Date.now() - t0 < 8000, "woken, not timed out");
  // Never acked: the 1 s visibility lapses and it comes back.
  await sleep(1300);
  recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "redelivery");
  assert(recs.length === 1 && recs[0].offset === 5n && recs[0].attempts === 2, "lapsed claim");
  // Three more nacks: the fifth failure dead-letters it.
  await T(client.groupNack("t1", "default", "jobs", 0, "g", 5n), "nack");
  for (let att = 3; att <= 5; att++) {
    recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "poll");
    assert(recs.length === 1 && recs[0].attempts === att, `attempt ${att}`);
    await T(client.groupNack("t1", "default", "jobs", 0, "g", 5n), "nack");
  }
  recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "poll");
  assert(recs.length === 0, "dead-lettered, not delivered");
  let dead = await T(client.groupDeadLetters("t1", "default", "jobs", 0, "g"), "dead letters");
  assert(dead.length === 1 && dead[0] === 5n, `dead letters ${dead}`);
  await T(client.groupRedrive("t1", "default", "jobs", 0, "g", 5n), "redrive");
  recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "poll");
  assert(recs.length === 1 && recs[0].offset === 5n && recs[0].attempts === 1, "redriven");
  await T(client.groupNack("t1", "default", "jobs", 0, "g", 5n), "nack");
  for (let att = 2; att <= 5; att++) {
    recs = await T(client.groupPoll("t1", "default", "jobs", 0, "g", 10, 0), "poll");
    await T(client.groupNack("t1", "default", "jobs", 0, "g", 5n), "nack");
  }
  await T(client.groupDiscard("t1", "default", "jobs", 0, "g", 5n), "discard");
  dead = await T(client.groupDeadLetters("t1", "default", "jobs", 0, "g"), "dead letters");
  assert(dead.length === 0, "discarded");
  let err = null;
  try { await T(client.groupAck("t1", "default", "jobs", 0, "g", 99n), "ack past end"); } catch (e) { err = e; }
  assert(err && /past the end/.test(err.message), `ack past the end: ${err && err.message}`);

  // ---- counters ----
  assert((await T(client.counterGet("t1", "default", "ctr", "a"), "get")) === null, "never written");
  let sum = 0;
  for (let i = 1; i <= 20; i++) {
    sum += i % 3 === 0 ? -i : i;
    assert((await T(client.counterAdd("t1", "default", "ctr", "a", i % 3 === 0 ? -i : i), "add")) === sum, "sum");
  }
  assert((await T(client.counterGet("t1", "default", "ctr", "a"), "get")) === sum, "get sum");

  // ---- cache watches (cache "wc"; each key's own shard) ----
  // A key's history: 5 puts and a delete, replayed from an offset.
  for (let i = 0; i < 5; i++) await T(client.cachePut("t1", "default", "wc", "k", Buffer.from(`v${i}`)), "put");
  await T(client.cacheDelete("t1", "default", "wc", "k"), "delete");
  let w = await T(client.watchCache("t1", "default", "wc", "k", undefined, 0n), "watch from 0");
  assert(w.resnapshot === false && w.retainedCount === null, "replay watch");
  const tail = w.resumeOffset;
  const seen = [];
  for (let i = 0; i < 6; i++) {
    const it = await T(w.recv(), "recv");
    seen.push(it.change.value ? it.change.value.toString() : "-");
  }
  assert(seen.join(",") === "v0,v1,v2,v3,v4,-", `replay ${seen}`);
  await T(client.cachePut("t1", "default", "wc", "k", Buffer.from("live")), "put");
  let it = await T(w.recv(), "live");
  assert(it.change.offset === tail && it.change.value.toString() === "live", "live after replay");
  await w.close();
  // Retained: the current value first, retainedCount says how many.
  w = await T(client.watchCache("t1", "default", "wc", "k", undefined, undefined, true), "retained");
  assert(w.retainedCount === 1n, `retainedCount ${w.retainedCount}`);
  it = await T(w.recv(), "retained value");
  assert(it.change.value.toString() === "live" && it.change.offset === tail, "retained value");
  await w.close();
  w = await T(client.watchCache("t1", "default", "wc", "nothing-here", undefined, undefined, true), "retained none");
  assert(w.retainedCount === 0n, "retained none: 0");
  await w.close();
  // History beyond the 10 kept changes: from 0 now resnapshots.
  for (let i = 0; i < 15; i++) await T(client.cachePut("t1", "default", "wc", "k", Buffer.from(`n${i}`)), "put");
  let resnap = null;
  for (let i = 0; i < 50 && !resnap; i++) {
    w = await T(client.watchCache("t1", "default", "wc", "k", undefined, 0n), "watch from 0");
    if (w.resnapshot) resnap = w; else { await w.close(); await sleep(100); }
  }
  assert(resnap, "resnapshot after compaction");
  it = await T(resnap.recv(), "resnapshot value");
  assert(it.change.value.toString() === "n14", `current value ${it.change.value}`);
  await resnap.close();
  err = null;
  try { await T(client.watchCache("t1", "default", "wc", "k", undefined, 100000n), "future"); } catch (e) { err = e; }
  assert(err && /past the end/.test(err.message), `in_future: ${err && err.message}`);
  // A prefix watch reads shard 0 (0.5.0 sends no shard): a key of the
  // prefix hashing to shard 0 reaches it, one on another shard does not.
  const pw = await T(client.watchCache("t1", "default", "wc", undefined, "p-"), "prefix watch");
  const keys = [];
  for (let i = 0; keys.length < 2; i++) {
    const s = felixShard(`p-${i}`, 4);
    if ((s === 0) === (keys.length === 1)) keys.push(`p-${i}`);
  }
  // keys[0] is on another shard, keys[1] on shard 0.
  await T(client.cachePut("t1", "default", "wc", keys[0], Buffer.from("elsewhere")), "put");
  await T(client.cachePut("t1", "default", "wc", keys[1], Buffer.from("here")), "put");
  it = await T(pw.recv(), "prefix change");
  assert(it.change.key === keys[1] && it.change.value.toString() === "here", `prefix change ${it.change.key}`);
  await pw.close();

  await client.close();
}

run(main);
