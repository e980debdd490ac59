// Interop: FLOW.STATS, FLOW.ATTRIBUTES and FLOW.ATTRIBUTE_VALUES through
// the official FerricStore TypeScript SDK (npm @ferricstore/ferricstore,
// pinned in package.json; its stats/attributes/attributeValues calls send
// COMMAND_EXEC with STATE, PARTITION, COUNT, ATTRIBUTE name value and
// CONSISTENT_PROJECTION arguments) against a real lodestone over FSNP with
// four shards: the policy's indexed attributes installed with the SDK,
// counts by state, partition and attributes, names and values ordered by
// count; and FLOW.QUERY.INDEXES through the SDK's queryIndexes, which
// validates the ferric.flow.query.indexes/v1 contract strictly. Exit
// status 0 means every check passed.
import assert from "node:assert/strict";

import { startNode } from "./lib/node.mjs";
import { check, runChecks } from "./lib/checks.mjs";
import { norm } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const main = await startNode("node", ["--advertise-host", "127.0.0.1", "--shards", "4"]);
const ports = main.ports;
const type = `st${process.pid}`;

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

// id, partition (null: auto), region, tier (null: none)
const flows = [
  ["a1", "tenant-a", "eu", 1],
  ["a2", "tenant-a", "eu", 2],
  ["a3", "tenant-a", "us", 2],
  ["b1", "tenant-b", "eu", null],
  ["x1", null, "us", 1],
  ["x2", null, "ap", null],
  ["x3", null, "eu", 3],
];

check("setup: indexed attributes and flows", async (c) => {
  await c.installPolicy(type, { indexedAttributes: ["region", "tier"] });
  for (const [id, pk, region, tier] of flows) {
    const attributes = tier == null ? { region } : { region, tier };
    const opts = { type, attributes };
    if (pk != null) opts.partitionKey = pk;
    await c.create(`${type}-${id}`, opts);
  }
});

check("stats: by state, partition and attributes", async (c) => {
  let s = norm(await c.stats(type));
  assert.equal(s.state, "queued");
  assert.equal(Number(s.count), flows.length);
  assert.equal(await c.countByState(type, "queued"), flows.length);
  assert.equal(await c.countByState(type, "running"), 0);
  assert.equal(await c.countByState(type, "queued", { partitionKey: "tenant-a" }), 3);
  s = norm(await c.stats(type, { state: "any", attributes: { region: "eu" } }));
  assert.equal(Number(s.count), 4);
  s = norm(await c.stats(type, { attributes: { region: "eu", tier: 2 }, consistentProjection: true }));
  assert.equal(Number(s.count), 1);
  await assert.rejects(c.stats(type, { state: "any" }), /state any requires attributes/);
});

check("attributes and attribute values, ordered by count", async (c) => {
  const names = norm(await c.attributes(type)).map((e) => [e.name, Number(e.count)]);
  assert.deepEqual(names, [["region", 7], ["tier", 5]]);
  const values = norm(await c.attributeValues(type, "region")).map((e) => [e.value, Number(e.count)]);
  assert.deepEqual(values, [["eu", 4], ["us", 2], ["ap", 1]]);
  const top = norm(await c.attributeValues(type, "region", { count: 1 }));
  assert.equal(top.length, 1);
  const a = norm(await c.attributeValues(type, "region", { partitionKey: "tenant-a", state: "queued" }));
  assert.deepEqual(a.map((e) => [e.value, Number(e.count)]), [["eu", 2], ["us", 1]]);
  assert.deepEqual(norm(await c.attributeValues(type, "colour")), []);
});

check("FLOW.QUERY.INDEXES: the SDK's strict ferric.flow.query.indexes/v1 decoder", async (c) => {
  const all = await c.queryIndexes();
  assert.equal(all.contractVersion, "ferric.flow.query.indexes/v1");
  assert.ok(all.indexes.length >= 8);
  for (const ix of all.indexes) {
    assert.equal(ix.state, "active");
    assert.equal(ix.queryable, true);
    assert.equal(Number(ix.coverage.totalShards), 4);
  }
  const counted = all.indexes.find((ix) => ix.id === "flow_runs_partition_type_state_updated");
  assert.deepEqual([...counted.countPrefixes], [3]);
  const one = await c.queryIndexes("flow_runs_primary");
  assert.deepEqual(one.indexes.map((ix) => ix.id), ["flow_runs_primary"]);
  await assert.rejects(c.queryIndexes("no_such_index"), /not found/);
});

await runChecks(connect);
