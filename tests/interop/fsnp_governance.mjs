// Interop: FerricFlow governance through the official FerricStore
// TypeScript SDK (npm @ferricstore/ferricstore, pinned in package.json)
// against a real lodestone (4 shards). The SDK sends each call as its own
// opcode with a typed body (its FLOW_ADMIN_COMMANDS) and checks the reply
// shapes; this drives effects (reserve, confirm twice, a stale fencing
// token), budgets (reserve until exhausted, commit, release, list), limits
// (lease, spend, release), approvals (request, approve, reject, list),
// circuits, the ledger and the overview, and checks that denials surface
// with the reference's code. Exit status 0 means every check passed.
import assert from "node:assert/strict";

import { startNode } from "./lib/node.mjs";
import { check, runChecks } from "./lib/checks.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const main = await startNode("node", ["--advertise-host", "127.0.0.1", "--shards", "4"]);
const ports = main.ports;
const run = `g${process.pid}`;

async function connect() {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const c = await FerricStoreClient.fromUrl(`ferric://127.0.0.1:${ports.fsnp}`);
      for (let i = 0; i < 16; i++) await c.kv.set(`ready:${i}`, "1");
      return c;
    } catch (error) {
      if (Date.now() > deadline || main.exited) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// The error a denial surfaces as: its text names the GOVERNANCE_ code.
async function denied(fn, code) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  assert.ok(err !== null, `expected ${code}`);
  // The SDK keeps the server's error map as `raw`.
  const raw = err.raw;
  const field = (k) => (raw instanceof Map ? raw.get(k) : raw?.[k]);
  const got = field("code");
  const text = typeof got === "string" ? got : new TextDecoder().decode(got ?? new Uint8Array());
  assert.equal(text, code, `${err.message}`);
  assert.equal(field("retryable"), false);
}

check("effects: reserve, confirm twice, stale fencing", async (c) => {
  const id = `${run}-pay`;
  const type = `${run}-paytype`;
  await c.create(id, { type });
  const [job] = await c.claimDue(type, { worker: "w1", leaseMs: 300, limit: 1 });
  assert.equal(job.id, id);
  const opts = { leaseToken: job.leaseToken, fencingToken: job.fencingToken };
  const r = await c.effectReserve(id, "charge-1", "charge", { ...opts, operationDigest: "sha256:aa", idempotencyKey: "k1" });
  assert.equal(r.status, "reserved");
  assert.equal(r.decision, "reserved");
  const c1 = await c.effectConfirm(id, "charge-1", { ...opts, externalId: "ext-1" });
  assert.equal(c1.decision, "confirmed");
  const c2 = await c.effectConfirm(id, "charge-1", opts);
  assert.equal(c2.decision, "already_applied");
  await c.effectReserve(id, "charge-2", "charge", { ...opts, operationDigest: "sha256:bb" });
  await new Promise((r) => setTimeout(r, 400));
  const [again] = await c.reclaim(type, { worker: "w2", leaseMs: 30000, limit: 1, reclaimExpired: true });
  assert.ok(Number(again.fencingToken) > Number(job.fencingToken));
  await assert.rejects(() => c.effectConfirm(id, "charge-2", opts), /fencing token mismatch/);
  const got = await c.effectGet(id, "charge-1");
  assert.equal(got.status, "confirmed");
  const ledger = await c.governanceLedger(id);
  assert.deepEqual(ledger.map((e) => e.kind), ["effect_reserved", "effect_confirmed", "effect_reserved"]);
});

check("budgets: never over the limit; commit, release, list", async (c) => {
  const scope = `${run}-llm`;
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) => c.budgetReserve(scope, 10, { limit: 100, windowMs: 3600000, reservationId: `r${i}` })));
  const ok = results.filter((r) => r.status === "fulfilled");
  assert.equal(ok.length, 10);
  const b = await c.budgetGet(scope);
  assert.equal(b.used, 100);
  assert.equal(b.remaining, 0);
  await denied(() => c.budgetReserve(scope, 1), "GOVERNANCE_BUDGET_EXHAUSTED");
  const id0 = ok[0].value.reservation_id;
  const id1 = ok[1].value.reservation_id;
  const committed = await c.budgetCommit(scope, id0, 4, { usage: { tokens: 4 } });
  assert.equal(committed.status, "committed");
  assert.equal(committed.used, 94);
  const released = await c.budgetRelease(scope, id1);
  assert.equal(released.status, "released");
  assert.equal(released.used, 84);
  const list = await c.budgetList({ scope });
  assert.equal(list.length, 1);
});

check("limits: lease, spend, release", async (c) => {
  const scope = `${run}-api`;
  const leased = await c.limitLease(scope, { shardId: 0, amount: 3, ttlMs: 60000, limit: 3 });
  assert.equal(leased.lease.available, 3);
  const spent = await c.limitSpend(scope, { shardId: 0, amount: 2 });
  assert.equal(spent.reservation_ids.length, 2);
  await denied(() => c.limitSpend(scope, { shardId: 0, amount: 2 }), "GOVERNANCE_LIMIT_EXCEEDED");
  const owner = await c.limitRelease(scope, { shardId: 0, reservationIds: spent.reservation_ids });
  // the credits go back to the lease, as the reference's CreditLease does
  assert.equal(owner.free, 0);
  assert.equal(owner.leases["0"].available, 3);
  assert.equal(owner.leases["0"].in_use, 0);
  assert.equal((await c.limitGet(scope)).limit, 3);
  assert.ok((await c.limitList({ scope })).length === 1);
});

check("approvals and circuits; overview", async (c) => {
  const scope = `${run}-refunds`;
  const a = await c.approvalRequest(`${run}-a1`, { flowId: "f1", scope, assignees: ["ann", "bob"], timeoutMs: 600000 });
  assert.equal(a.status, "pending");
  await c.approvalRequest(`${run}-a2`, { flowId: "f2", scope });
  const ok = await c.approvalApprove(`${run}-a1`, { approver: "ann", reason: "fine" });
  assert.equal(ok.status, "approved");
  await denied(() => c.approvalReject(`${run}-a1`, { approver: "bob" }), "GOVERNANCE_CONFLICT");
  const pending = await c.approvalList({ scope, status: "pending" });
  assert.deepEqual(pending.map((x) => x.id), [`${run}-a2`]);
  assert.equal((await c.approvalGet(`${run}-a1`)).decided_by, "ann");
  const open = await c.circuitOpen(`${run}-cb`, { openMs: 60000, failureThreshold: 3 });
  assert.equal(open.status, "open");
  assert.equal((await c.circuitGet(`${run}-cb`)).failure_threshold, 3);
  const closed = await c.circuitClose(`${run}-cb`);
  assert.equal(closed.status, "closed");
  const ov = await c.governanceOverview({ scope });
  assert.equal(ov.counts.pending_approvals, 1);
  assert.equal(ov.approvals.length, 2);
});

await runChecks(connect);
