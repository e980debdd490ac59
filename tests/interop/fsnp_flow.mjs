// Interop: FerricFlow through the official FerricStore TypeScript SDK
// (npm @ferricstore/ferricstore, pinned in package.json) against a real
// lodestone over FSNP. It starts its own node ($LS_LODESTONE, four shards) and
// drives the SDK's Flow calls: the lifecycle create -> claim -> complete,
// stale fencing refused, retry with a backoff, transition, cancel, history
// order, signal, values, claim jobs, the *_MANY batches, complete-and-claim
// in one pipeline; it then checks on the node's /metrics that the compact
// request forms were served, claimJobs was answered in the compact
// flow_claim_jobs_v1 codec, and get and claimDue records in
// flow_record_v1 and flow_record_list_v1. Exit status 0 means every check
// passed.
import assert from "node:assert/strict";

import { startNode } from "./lib/node.mjs";
import { check, runChecks } from "./lib/checks.mjs";
import { norm, text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const main = await startNode("node", ["--advertise-host", "127.0.0.1", "--shards", "4"]);
const ports = main.ports;
const run = `i${process.pid}`;

async function connect() {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const c = await FerricStoreClient.fromUrl(`ferric://127.0.0.1:${ports.fsnp}`);
      // Every shard answers (leaders elected) before the checks start.
      for (let i = 0; i < 16; i++) await c.kv.set(`ready:${i}`, "1");
      return c;
    } catch (error) {
      if (Date.now() > deadline || main.exited) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function metric(name) {
  const res = await fetch(`http://127.0.0.1:${ports.admin}/metrics`);
  const body = await res.text();
  const line = body.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(/\s+/).pop()) : NaN;
}


// Every per-item result of a *_MANY reply (or the whole "OK") is OK.
function allOk(res, what) {
  const list = Array.isArray(res) ? res : [res];
  const shown = list.map((x) => (Array.isArray(x) ? x.map(text).join(" ") : text(x)));
  for (const r of shown) assert.equal(r, "OK", `${what}: ${JSON.stringify(shown)}`);
}

async function claimOne(c, type, extra = {}) {
  const got = await c.claimDue(type, { worker: "w1", leaseMs: 30000, limit: 1, ...extra });
  assert.equal(got.length, 1, `one ${type} flow claimed`);
  return got[0];
}

check("lifecycle: create, get, claimDue, complete, history order", async (c) => {
  const id = `${run}-life`, type = `${run}-life-t`;
  assert.equal(text(await c.create(id, { type, payload: "job-1" })), "OK");
  const rec = await c.get(id);
  assert.equal(rec.id, id);
  assert.equal(rec.state, "queued");
  const job = await claimOne(c, type, { state: "queued" });
  assert.equal(job.id, id);
  assert.equal((await c.get(id)).state, "running");
  assert.equal(text(await c.complete(id, { leaseToken: job.leaseToken, fencingToken: job.fencingToken, result: "r" })), "OK");
  assert.equal((await c.get(id)).state, "completed");
  const events = (await c.history(id)).map((e) => {
    const fields = e[1];
    return text(fields[1]);
  });
  assert.deepEqual(events.slice(0, 3), ["created", "claimed", "completed"]);
});

check("stale fencing refused", async (c) => {
  const id = `${run}-stale`, type = `${run}-stale-t`;
  await c.create(id, { type });
  const job = await claimOne(c, type);
  await assert.rejects(
    c.complete(id, { leaseToken: job.leaseToken, fencingToken: Number(job.fencingToken) + 1 }),
    /stale/i,
  );
  await assert.rejects(
    c.complete(id, { leaseToken: Buffer.from("someone-else:1:1"), fencingToken: job.fencingToken }),
    /stale/i,
  );
  assert.equal(text(await c.complete(id, { leaseToken: job.leaseToken, fencingToken: job.fencingToken })), "OK");
});

check("retry with a backoff", async (c) => {
  const id = `${run}-retry`, type = `${run}-retry-t`;
  await c.create(id, { type });
  const job = await claimOne(c, type);
  assert.equal(
    text(await c.retry(id, { leaseToken: job.leaseToken, fencingToken: job.fencingToken, error: "e", runAtMs: Date.now() + 500 })),
    "OK",
  );
  assert.equal((await c.claimDue(type, { worker: "w1", limit: 1 })).length, 0, "not due before run_at");
  await new Promise((r) => setTimeout(r, 700));
  const again = await claimOne(c, type);
  assert.equal(again.id, id);
  assert.ok(Number(again.fencingToken) > Number(job.fencingToken));
});

check("transition", async (c) => {
  const id = `${run}-tr`, type = `${run}-tr-t`;
  await c.create(id, { type, state: "s1" });
  const job = await claimOne(c, type, { state: "s1" });
  assert.equal(
    text(await c.transition(id, { fromState: "running", toState: "s2", leaseToken: job.leaseToken, fencingToken: job.fencingToken })),
    "OK",
  );
  assert.equal((await c.get(id)).state, "s2");
  await assert.rejects(
    c.transition(id, { fromState: "s1", toState: "s3", leaseToken: job.leaseToken, fencingToken: job.fencingToken }),
  );
});

check("cancel", async (c) => {
  const id = `${run}-cancel`, type = `${run}-cancel-t`;
  await c.create(id, { type });
  const job = await claimOne(c, type);
  assert.equal(text(await c.cancel(id, { fencingToken: job.fencingToken, leaseToken: job.leaseToken, reason: "stop" })), "OK");
  assert.equal((await c.get(id)).state, "cancelled");
});

check("signal", async (c) => {
  const id = `${run}-sig`, type = `${run}-sig-t`;
  await c.create(id, { type, state: "waiting" });
  await c.signal(id, { signal: "go", ifState: "waiting", transitionTo: "ready" });
  assert.equal((await c.get(id)).state, "ready");
  await assert.rejects(c.signal(id, { signal: "go", ifState: "waiting", transitionTo: "x" }), /state mismatch/);
});

check("values: valuePut, valueMGet (compact)", async (c) => {
  const put = norm(await c.valuePut("hello value"));
  const ref = text(put.ref ?? put.get?.("ref"));
  assert.ok(ref, "a ref");
  const got = await c.valueMGet([ref, `${ref}x`]);
  assert.equal(got.length, 2);
  assert.equal(text(got[0]), "hello value");
  assert.equal(norm(got[1]), null);
});

check("claimJobs (compact) and completeMany across shards", async (c) => {
  const type = `${run}-jobs-t`;
  const items = Array.from({ length: 10 }, (_, i) => ({ id: `${run}-job-${i}`, payload: `p${i}` }));
  const created = await c.createMany(undefined, items, { type, independent: true });
  assert.ok(created === "OK" || text(created) === "OK" || (Array.isArray(created) && created.length === 10), `createMany: ${created}`);
  const jobs = await c.claimJobs(type, { worker: "wj", leaseMs: 30000, limit: 100 });
  assert.equal(jobs.length, 10, "claims without a partition reach every shard");
  const done = await c.completeMany(undefined, jobs, { independent: true });
  allOk(done, "completeMany");
  for (const it of items) assert.equal((await c.get(it.id)).state, "completed");
});

check("*_MANY: enqueueMany, retryMany, failMany, transitionMany, cancelMany", async (c) => {
  const type = `${run}-many-t`;
  const items = Array.from({ length: 8 }, (_, i) => ({ id: `${run}-many-${i}` }));
  const res = await c.enqueueMany(items, { type });
  assert.equal(res.length, 8);
  let jobs = await c.claimJobs(type, { worker: "wm", leaseMs: 30000, limit: 100 });
  assert.equal(jobs.length, 8);
  const [a, b] = [jobs.slice(0, 4), jobs.slice(4)];
  const r1 = await c.retryMany(undefined, a, { independent: true, runAtMs: Date.now() });
  allOk(r1, "retryMany");
  const r2 = await c.failMany(undefined, b, { independent: true, error: "bad" });
  allOk(r2, "failMany");
  for (const j of b) assert.equal((await c.get(j.id)).state, "failed");
  jobs = await c.claimJobs(type, { worker: "wm", leaseMs: 30000, limit: 100 });
  assert.equal(jobs.length, 4, "retried flows are due again");
  const r3 = await c.transitionMany(undefined, { fromState: "running", toState: "parked", items: jobs, independent: true });
  allOk(r3, "transitionMany");
  const fenced = [];
  for (const j of jobs) {
    const rec = await c.get(j.id);
    assert.equal(rec.state, "parked");
    fenced.push({ id: j.id, fencingToken: rec.fencing_token ?? rec.fencingToken });
  }
  const r4 = await c.cancelMany(undefined, fenced, { independent: true });
  allOk(r4, "cancelMany");
  for (const j of jobs) assert.equal((await c.get(j.id)).state, "cancelled");
});

check("completeJobsAndClaimJobs (a pipeline of Flow commands)", async (c) => {
  const type = `${run}-cjc-t`, pk = `${run}-tenant`;
  for (let i = 0; i < 4; i++) await c.create(`${run}-cjc-${i}`, { type, partitionKey: pk });
  const first = await c.claimJobs(type, { worker: "wc", leaseMs: 30000, limit: 2, partitionKey: pk });
  assert.equal(first.length, 2);
  const res = await c.completeJobsAndClaimJobs(first, type, { worker: "wc", leaseMs: 30000, limit: 2, partitionKey: pk });
  assert.equal(res.completionError, undefined, String(res.completionError));
  assert.equal(res.claimError, undefined, String(res.claimError));
  assert.equal(res.claimed.length, 2);
  for (const j of first) assert.equal((await c.get(j.id, { partitionKey: pk })).state, "completed");
  for (const j of res.claimed) assert.equal((await c.get(j.id, { partitionKey: pk })).state, "running");
});

check("get and claimDue records answered flow_record_v1 / flow_record_list_v1", async (c) => {
  const id = `${run}-rec`, type = `${run}-rec-t`;
  await c.create(id, { type, payload: "p-rec" });
  // A GET the SDK sends as FLOW.GET: one compact record reply.
  let before = await metric("lodestone_fsnp_flow_compact_replies_total");
  const rec = await c.get(id);
  let after = await metric("lodestone_fsnp_flow_compact_replies_total");
  assert.equal(after - before, 1, "FLOW.GET answered in flow_record_v1");
  assert.equal(rec.id, id);
  assert.equal(rec.state, "queued");
  assert.equal(rec.type, type);
  // claimDue (RETURN RECORDS): one compact record list reply.
  before = after;
  const got = await c.claimDue(type, { worker: "wr", leaseMs: 30000, limit: 5 });
  after = await metric("lodestone_fsnp_flow_compact_replies_total");
  assert.equal(after - before, 1, "claimDue records answered in flow_record_list_v1");
  assert.equal(got.length, 1);
  assert.equal(got[0].id, id);
  assert.equal(got[0].state, "running");
  assert.ok(got[0].leaseToken, "claimed record carries its lease token");
  assert.equal(text(await c.complete(id, { leaseToken: got[0].leaseToken, fencingToken: got[0].fencingToken, result: "r" })), "OK");
  assert.equal((await c.get(id)).state, "completed");
});

check("the compact Flow requests were served", async () => {
  const n = await metric("lodestone_fsnp_flow_compact_requests_total");
  assert.ok(n >= 8, `compact Flow requests counted: ${n}`);
  // claimJobs was answered flow_claim_jobs_v1 (the SDK asks for compact
  // Flow replies and accepts the codec the server advertises).
  const replies = await metric("lodestone_fsnp_flow_compact_replies_total");
  assert.ok(replies >= 2, `compact Flow replies counted: ${replies}`);
});

await runChecks(connect);
