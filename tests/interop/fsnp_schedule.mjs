// Interop: FerricFlow schedules through the official FerricStore TypeScript
// SDK (npm @ferricstore/ferricstore, pinned in package.json) against a real
// lodestone with its built-in scheduler. The SDK checks every schedule
// record, fire and fire-due reply strictly (its schedule-response checks);
// this drives create (interval, cron in a zone, one-shot), get, list,
// pause, resume, fire, fireDue and delete, and waits for the scheduler to
// create an interval's targets. Exit status 0 means every check passed.
import assert from "node:assert/strict";

import { startNode } from "./lib/node.mjs";
import { check, runChecks } from "./lib/checks.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const main = await startNode("node", ["--advertise-host", "127.0.0.1", "--shards", "4"]);
const ports = main.ports;
const run = `s${process.pid}`;

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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

check("interval: create, the scheduler fires, pause, resume, delete", async (c) => {
  const id = `${run}-tick`;
  const rec = await c.scheduleCreate(id, {
    kind: "interval",
    everyMs: 400,
    catchupPolicy: "fire_once",
    target: { id_prefix: id, type: `${run}-tick-t` },
  });
  assert.equal(rec.kind, "interval");
  assert.equal(rec.state, "active");
  assert.equal(rec.catchup_policy, "fire_once");
  assert.equal(rec.every_ms, 400);
  const deadline = Date.now() + 10000;
  let got = rec;
  while (got.fire_count < 2 && Date.now() < deadline) {
    await sleep(100);
    got = await c.scheduleGet(id);
  }
  assert.ok(got.fire_count >= 2, `fired ${got.fire_count} times`);
  const paused = await c.schedulePause(id);
  assert.equal(paused.state, "paused");
  const resumed = await c.scheduleResume(id);
  assert.equal(resumed.state, "active");
  await c.scheduleDelete(id);
  assert.equal((await c.scheduleGet(id)).state, "cancelled");
  const claimed = await c.claimDue(`${run}-tick-t`, { worker: "w", leaseMs: 30000, limit: 100 });
  assert.ok(claimed.length >= 2, `targets created: ${claimed.length}`);
  for (const t of claimed) assert.ok(t.id.startsWith(`${id}:`), t.id);
});

check("cron in a zone, list, manual fire", async (c) => {
  const id = `${run}-cron`;
  const rec = await c.scheduleCreate(id, {
    kind: "cron",
    cron: "0 9 * * MON-FRI",
    timezone: "Europe/Berlin",
    target: { type: `${run}-cron-t` },
  });
  assert.equal(rec.cron, "0 9 * * MON-FRI");
  assert.equal(rec.timezone, "Europe/Berlin");
  assert.equal(rec.catchup_policy, null);
  const list = await c.scheduleList({ state: "all" });
  assert.ok(list.some((r) => r.id === id), "listed");
  const fired = await c.scheduleFire(id);
  assert.equal(fired.fired, 1);
  assert.ok(String(fired.target_id).startsWith(`${id}:`));
  assert.equal(fired.schedule.fire_count, 1);
  assert.equal(fired.schedule.next_run_at_ms, rec.next_run_at_ms);
  await assert.rejects(() => c.scheduleCreate(`${run}-bad`, {
    kind: "cron", cron: "0 9 * * *", timezone: "Mars/Olympus", target: { type: "x" },
  }), /timezone is invalid or unavailable/);
});

check("one-shot fires once; fireDue answers the aggregate", async (c) => {
  const id = `${run}-once`;
  await c.scheduleCreate(id, { kind: "one_shot", atMs: Date.now() + 200, target: { type: `${run}-once-t`, id: `${run}-the-one` } });
  const deadline = Date.now() + 10000;
  let got;
  do {
    await sleep(100);
    got = await c.scheduleGet(id);
  } while (got.state !== "completed" && Date.now() < deadline);
  assert.equal(got.state, "completed");
  assert.equal(got.fire_count, 1);
  assert.equal(got.next_run_at_ms, null);
  const due = await c.scheduleFireDue({ limit: 10 });
  assert.equal(due.fired + due.skipped + due.errors.length, due.claimed);
  assert.equal((await c.get(`${run}-the-one`)).type, `${run}-once-t`);
});

await runChecks(connect);
