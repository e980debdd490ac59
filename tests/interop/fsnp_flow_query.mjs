// Interop: FLOW.QUERY through the official FerricStore TypeScript SDK (npm
// @ferricstore/ferricstore, pinned in package.json) against a real
// lodestone over FSNP with four shards. The SDK's query() sends opcode
// 0x0231 and asks for the compact flow_query_result_v1 codec, so its
// results arrive as 0xA0 payloads (checked on /metrics: the compact query
// reply counter grows); the same query inside the SDK's pipeline() is
// answered in the ordinary typed form and must agree. Covered: a
// type/state collection paged to the end through cursors, a point read,
// an exact count, a covering projection, explain() and explainAnalyze()
// (the SDK's strict ferric.flow.explain/v1 decoder), the fixed error
// codes (no bounded plan, syntax with a position), and the ACL split
// between FLOW.QUERY and FLOW.QUERY.EXPLAIN for ACL users. Exit status 0
// means every check passed.
import assert from "node:assert/strict";

import { logTail, nodes, startNode } from "./lib/node.mjs";
import { norm, text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const ADMIN_PW = "interop-Adm1n-pw";
const main = await startNode("node", [
  "--advertise-host", "127.0.0.1", "--shards", "4", "--requirepass", ADMIN_PW,
]);
const ports = main.ports;
const run = `q${process.pid}`;
const pk = `tq:${run}`;
const type = `${run}-t`;

async function connect(user, pw) {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const c = await FerricStoreClient.fromUrl(`ferric://${user}:${pw}@127.0.0.1:${ports.fsnp}`);
      if (user === "default") {
        for (let i = 0; i < 16; i++) await c.kv.set(`ready:${i}`, "1");
        // Cursors are sealed with the cluster's key (meta group): wait
        // until this node has it.
        for (;;) {
          const res = await fetch(`http://127.0.0.1:${ports.admin}/v1/cluster`);
          if (/"flow_cursor_key":\s*"ready"/.test(await res.text())) break;
          if (Date.now() > deadline) throw new Error("no Flow cursor key");
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      return c;
    } catch (error) {
      if (Date.now() > deadline || main.exited || /WRONGPASS|authentication/.test(String(error))) {
        throw error;
      }
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
const COMPACT = "lodestone_fsnp_flow_query_compact_replies_total";

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

const LIST = "FROM runs WHERE partition_key = @pk AND type = @type AND state = @state " +
  "ORDER BY updated_at_ms ASC LIMIT 3 RETURN RECORDS";

try {
  const c = await connect("default", ADMIN_PW);
  clients.push(c);
  const ids = [];
  await step("setup: flows in one partition, some claimed", async () => {
    for (let i = 0; i < 8; i++) {
      const id = `${run}-${i}`;
      ids.push(id);
      await c.create(id, { type, partitionKey: pk, attributes: { region: i % 2 ? "eu" : "us" } });
    }
    const got = await c.claimDue(type, { worker: "w1", leaseMs: 60000, limit: 2, partitionKey: pk });
    assert.equal(got.length, 2);
  });

  let queued = [];
  await step("query(): a collection paged to the end through cursors (compact 0xA0)", async () => {
    const before = await metric(COMPACT);
    let cursor;
    const seen = [];
    for (let pg = 0; pg < 10; pg++) {
      const q = cursor == null ? LIST : LIST.replace("RETURN", "CURSOR @cursor RETURN");
      const params = { pk, type, state: "queued", ...(cursor == null ? {} : { cursor }) };
      const res = await c.query(q, params);
      assert.equal(res.kind, "records");
      assert.equal(res.version, "ferric.flow.query.result/v1");
      assert.ok(res.records.length <= 3);
      assert.equal(res.usage.resultRecords, res.records.length);
      assert.ok(res.usage.scannedEntries <= 4, `O(LIMIT) scan: ${res.usage.scannedEntries}`);
      for (const r of res.records) {
        seen.push(text(r.id));
        assert.equal(text(r.state), "queued");
        assert.equal(text(r.partition_key), pk);
      }
      if (!res.page.hasMore) {
        assert.equal(res.quality.pagination, "complete");
        break;
      }
      assert.equal(res.quality.pagination, "authenticated_seek");
      assert.match(res.page.cursor, /^fqc1_/);
      cursor = res.page.cursor;
    }
    assert.equal(seen.length, 6);
    assert.equal(new Set(seen).size, 6);
    queued = seen;
    const after = await metric(COMPACT);
    assert.ok(after - before >= 2, `compact replies ${before} -> ${after}`);
  });

  await step("the same query in a pipeline is answered typed and agrees", async () => {
    const before = await metric(COMPACT);
    const q = LIST.replace("LIMIT 3", "LIMIT 10");
    const [typed] = await c.pipeline([["FLOW.QUERY", "FQL1", q, "pk", pk, "type", type, "state", "queued"]]);
    const m = norm(typed instanceof Map ? Object.fromEntries(typed) : typed);
    assert.equal(m.version, "ferric.flow.query.result/v1");
    const got = m.records.map((r) => (r instanceof Map ? r.get("id") : r.id)).map(text);
    assert.deepEqual(got, queued);
    assert.equal(Number(m.usage.response_bytes) > 0, true);
    assert.equal(await metric(COMPACT), before, "typed, not compact");
  });

  await step("point read, count, covering projection", async () => {
    const one = await c.query(
      "FROM runs WHERE run_id = @id AND partition_key = @pk RETURN RECORD (run_id, state, attributes)",
      { id: ids[0], pk });
    assert.equal(one.records.length, 1);
    assert.equal(text(one.records[0].id), ids[0]);
    assert.equal(one.quality.exactness, "authoritative");
    const n = await c.query(
      "FROM runs WHERE partition_key = @pk AND type = @type AND state = 'running' RETURN COUNT",
      { pk, type });
    assert.equal(n.kind, "count");
    assert.equal(Number(n.count), 2);
    const cov = await c.query(
      "FROM runs WHERE partition_key = @pk AND type = @type AND state = 'queued' " +
      "ORDER BY updated_at_ms DESC LIMIT 100 RETURN RECORDS (run_id, version, updated_at_ms)",
      { pk, type });
    assert.equal(cov.records.length, 6);
    assert.equal(cov.usage.hydratedRecords, 0);
    assert.deepEqual(cov.records.map((r) => text(r.id)), [...queued].reverse());
  });

  await step("event history and the due index (lease deadlines)", async () => {
    const h = await c.query(
      "FROM events WHERE run_id = @id AND partition_key = @pk ORDER BY event_id DESC LIMIT 5 RETURN RECORDS",
      { id: ids[0], pk });
    assert.ok(h.records.length >= 1);
    for (const r of h.records) {
      assert.match(text(r.event_id), /^\d+-\d+$/);
      assert.equal(typeof r.fields, "object");
    }
    const leased = await c.query(
      "FROM runs WHERE partition_key = @pk AND type = @type AND state = 'running' " +
      "AND lease_deadline_ms BETWEEN 0 AND 9007199254740991 ORDER BY lease_deadline_ms ASC LIMIT 10 RETURN RECORDS",
      { pk, type });
    assert.equal(leased.records.length, 2);
    assert.ok(Number(leased.records[0].lease_deadline_ms) <= Number(leased.records[1].lease_deadline_ms));
  });

  await step("explain() and explainAnalyze(): ferric.flow.explain/v1", async () => {
    const e = await c.explain(LIST, { pk, type, state: "queued" });
    assert.equal(e.status, "planned");
    assert.match(e.queryFingerprint, /^[0-9a-f]{64}$/);
    assert.equal(text(e.plan.index), "flow_runs_partition_type_state_updated");
    assert.equal(e.plan.requires_hydration, true);
    assert.ok(!JSON.stringify(norm(e.raw)).includes(pk), "values redacted");
    const e2 = await c.explain(LIST, { pk: "other", type: "x", state: "failed" });
    assert.equal(e2.queryFingerprint, e.queryFingerprint);
    const a = await c.explainAnalyze(LIST, { pk, type, state: "queued" });
    assert.equal(a.status, "executed");
    assert.equal(a.actual.resultRecords, 3);
    assert.ok(a.actual.scannedEntries >= 3);
    assert.ok(a.actual.responseBytes > 0);
  });

  await step("fixed error codes", async () => {
    await assert.rejects(
      c.query("FROM runs WHERE partition_key = @pk ORDER BY priority LIMIT 5 RETURN RECORDS", { pk }),
      (e) => e.code === "query_no_bounded_plan" && !String(e.message).includes(pk));
    await assert.rejects(
      c.query("FROM runs WHERE partition_key = = 'x' RETURN COUNT", {}),
      (e) => e.code === "invalid_syntax" && e.position != null && e.position.byte > 0);
    await assert.rejects(
      c.query(LIST.replace("RETURN", "CURSOR @cursor RETURN"),
        { pk, type, state: "queued", cursor: "fqc1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
      (e) => e.code === "query_cursor_invalid");
  });

  await step("ACL: FLOW.QUERY and FLOW.QUERY.EXPLAIN are separate permissions", async () => {
    assert.equal(text(await c.command("ACL", "SETUSER", "qr", "on", ">qr-Passw0rd-1", "~tq:*", "+flow.query")), "OK");
    assert.equal(text(await c.command("ACL", "SETUSER", "qe", "on", ">qe-Passw0rd-1", "~tq:*", "+flow.query.explain")), "OK");
    const qr = await connect("qr", "qr-Passw0rd-1");
    const qe = await connect("qe", "qe-Passw0rd-1");
    clients.push(qr, qe);
    const params = { pk, type, state: "queued" };
    assert.equal((await qr.query(LIST, params)).records.length, 3);
    await assert.rejects(qr.explain(LIST, params), /NOPERM/);
    await assert.rejects(qr.query(LIST, { ...params, pk: "elsewhere" }), /NOPERM/);
    assert.equal((await qe.explain(LIST, params)).status, "planned");
    await assert.rejects(qe.query(LIST, params), /NOPERM/);
    await assert.rejects(qe.explainAnalyze(LIST, params), /NOPERM/);
  });
} catch (error) {
  failed++;
  console.log(`FAIL setup: ${error && error.stack ? error.stack : error}`);
} finally {
  for (const cl of clients) await cl.close().catch(() => {});
}
if (failed > 0) {
  for (const n of nodes) {
    console.log(`--- ${n.name} log ---`);
    console.log(logTail(n));
  }
}
for (const n of nodes) {
  if (n.exited) continue;
  n.child.kill("SIGTERM");
  await new Promise((r) => {
    const t = setTimeout(r, 10000);
    n.child.on("exit", () => { clearTimeout(t); r(); });
    if (n.exited) { clearTimeout(t); r(); }
  });
}
process.exit(failed > 0 ? 1 : 0);
