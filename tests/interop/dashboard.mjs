// Interop: the admin dashboard (GET /) in a real headless Chromium, driven
// through chromedriver's WebDriver HTTP API. It starts a 3-node cluster
// ($LS_LODESTONE, free loopback ports), registers a stream whose name is
// markup, loads node 1's dashboard and checks that the nodes, the groups
// and the charts are rendered from live values (data attributes), that the
// stream's name is shown as text; creates flows through the official SDK
// (a failed one, one whose lease runs out), opens a circuit, requests an
// approval, fills a budget to 90% and moves a group's leadership, and
// checks the Membership operations, Flow and Governance panels; then kills
// node 3 and waits for the page to mark it down and for the Flow panel to
// answer for every group again. Screenshots go to
// $LS_BUILDDIR (or the directory make runs in): dashboard.png,
// dashboard-flow.png and dashboard-node-down.png.
//
// Without chromium and chromedriver the test is skipped (exit 77), unless
// CI=true, where that is a failure. Every wait is bounded; chromedriver and
// the browser it started are killed when the test exits.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

import { dir, nodePorts, nodes, startNode } from "./lib/node.mjs";
import { freeTcpPort } from "./lib/ports.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const SHARDS = 4;
const outDir = process.env.LS_BUILDDIR || process.cwd();

function which(names) {
  for (const n of names) {
    if (!n) continue;
    if (n.includes("/")) {
      if (fs.existsSync(n)) return n;
      continue;
    }
    const r = spawnSync("sh", ["-c", `command -v ${n}`], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}

const browser = which([process.env.CHROMIUM, "chromium", "chromium-browser", "google-chrome"]);
const driver = which([process.env.CHROMEDRIVER, "chromedriver"]);
if (!browser || !driver) {
  const what = !browser ? "chromium" : "chromedriver";
  const msg = `dashboard.mjs: ${what} not found (install the Debian packages chromium and chromium-driver, or ./dev deps)`;
  if (process.env.CI === "true") {
    console.error(`${msg}; CI=true: failing`);
    process.exit(1);
  }
  console.error(`${msg}: skipped`);
  process.exit(77);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, ms, fn) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    if (nodes.some((n, i) => n.exited && !n.killed)) throw new Error(`a node exited while waiting for ${what}`);
    await sleep(200);
  }
}
async function http(port, method, p, body) {
  const ctl = AbortSignal.timeout(5000);
  const r = await fetch(`http://127.0.0.1:${port}${p}`, {
    method,
    signal: ctl,
    headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, type: r.headers.get("content-type"), text: await r.text() };
}

// The cluster.
const ports = [];
for (let i = 0; i < 3; i++) ports.push(await nodePorts());
const peers = ports.map((p, i) => `${i + 1}=127.0.0.1:${p.internal}`).join(",");
for (let i = 0; i < 3; i++) {
  await startNode(`node${i + 1}`, ["--node-id", String(i + 1), "--advertise-host", "127.0.0.1", "--peers", peers, "--shards", String(SHARDS), "--log-level", "warn"], { ports: ports[i] });
}
const admin = nodes[0].ports.admin;
await waitFor("every group led and every node connected on node 1", 60000, async () => {
  const r = await http(admin, "GET", "/v1/dashboard");
  if (r.status !== 200) return false;
  const d = JSON.parse(r.text);
  return d.groups.length === SHARDS + 1 && d.groups.every((g) => g.leader !== null) && d.nodes.length === 3 && d.nodes.every((n) => n.status === "up");
});
// A stream whose name is markup: the page must show it as text.
const evil = `<img src=x onerror="window.__injected=1">`;
await waitFor("the stream registered", 20000, async () => {
  const r = await http(admin, "POST", "/v1/streams", { tenant: "acme", namespace: "orders", name: evil, shards: 2 });
  return r.status === 200 || r.status === 201 || r.status === 409;
});

// FSNP traffic on node 1 while the page loads, for its FSNP chart.
const kv = await waitFor("an FSNP client on node 1", 20000, () => FerricStoreClient.fromUrl(`ferric://127.0.0.1:${nodes[0].ports.fsnp}`));
let traffic = true;
const writes = (async () => {
  const until = Date.now() + 60000;
  for (let i = 0; traffic && Date.now() < until; i++) {
    await kv.kv.set(`dash:${i % 64}`, String(i));
    if (i % 20 === 0) await sleep(50);
  }
})();

// The browser.
const driverPort = await freeTcpPort();
const driverLog = fs.openSync(path.join(dir, "chromedriver.log"), "w");
const drv = spawn(driver, [`--port=${driverPort}`, "--allowed-ips=127.0.0.1"], {
  stdio: ["ignore", driverLog, driverLog],
  detached: true, // its own process group: the browser dies with it
});
let driverExited = false;
drv.on("exit", () => { driverExited = true; });
function killBrowser() {
  if (!driverExited) {
    try { process.kill(-drv.pid, "SIGKILL"); } catch { /* gone */ }
  }
}
process.on("exit", killBrowser);
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(130));

const wd = `http://127.0.0.1:${driverPort}`;
async function cmd(method, p, body) {
  const r = await fetch(`${wd}${p}`, {
    method,
    signal: AbortSignal.timeout(30000),
    headers: { "content-type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  const j = await r.json();
  if (!r.ok) throw new Error(`WebDriver ${method} ${p}: ${r.status} ${JSON.stringify(j.value).slice(0, 400)}`);
  return j.value;
}
await waitFor("chromedriver ready", 15000, async () => {
  if (driverExited) throw new Error("chromedriver exited");
  return (await cmd("GET", "/status")).ready;
});
const profile = path.join(dir, "chromium-profile");
const session = await cmd("POST", "/session", {
  capabilities: {
    alwaysMatch: {
      browserName: "chrome",
      "goog:chromeOptions": {
        binary: browser,
        args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1700", `--user-data-dir=${profile}`, "--no-first-run"],
      },
    },
  },
});
const sid = session.sessionId;
const S = `/session/${sid}`;
const js = (script, ...args) => cmd("POST", `${S}/execute/sync`, { script, args });
async function screenshot(name) {
  const png = Buffer.from(await cmd("GET", `${S}/screenshot`), "base64");
  const file = path.join(outDir, name);
  fs.writeFileSync(file, png);
  console.log(`dashboard.mjs: screenshot ${file}`);
}

try {
  await cmd("POST", `${S}/url`, { url: `http://127.0.0.1:${admin}/` });
  const title = await cmd("GET", `${S}/title`);
  assert.equal(title, "Lodestone dashboard");

  // Nodes, groups and charts from live values.
  const view = () => js(`
    const q = (s) => [...document.querySelectorAll(s)];
    return {
      updates: Number(document.body.getAttribute("data-updates") || 0),
      served: document.body.getAttribute("data-node-id"),
      nodes: q("[data-node-id]").filter((e) => e.tagName === "TR").map((e) => ({ id: e.getAttribute("data-node-id"), state: e.getAttribute("data-node-state") })),
      groups: q("tr[data-group-id]").map((e) => ({ id: e.getAttribute("data-group-id"), leader: e.getAttribute("data-leader") })),
      charts: q("svg[data-chart]").map((s) => ({ name: s.getAttribute("data-chart"), points: Number(s.getAttribute("data-points")),
        series: [...s.querySelectorAll("polyline")].map((p) => ({ key: p.getAttribute("data-series"), count: Number(p.getAttribute("data-count")), last: p.getAttribute("data-last"), max: Number(p.getAttribute("data-max")) })) })),
      problems: q("tr[data-problem]").map((e) => ({ kind: e.getAttribute("data-problem"), subject: e.getAttribute("data-subject") })),
      scopes: q("tr[data-scope]").map((e) => ({ scope: e.getAttribute("data-scope"), text: e.cells[0].textContent })),
      images: q("main img").length,
      injected: window.__injected === 1,
    };`);
  const live = await waitFor("the dashboard rendering 3 nodes up, 5 led groups and charts", 20000, async () => {
    const v = await view();
    const ok = v.updates >= 2 && v.nodes.length === 3 && v.nodes.every((n) => n.state === "up") &&
      v.groups.length === SHARDS + 1 && v.groups.every((g) => g.leader !== "none") &&
      v.charts.some((c) => c.name === "nodes-up" && c.series[0].count >= 2 && c.series[0].last === "3") &&
      v.charts.some((c) => c.name === "raft" && c.series[0].count >= 2 && c.series[0].max > 0) &&
      v.charts.some((c) => c.name === "fsnp" && c.series[0].key === "fsnp.requests_per_s" && c.series[0].max > 0) &&
      v.scopes.length === 1;
    return ok ? v : false;
  });
  assert.equal(live.served, "1");
  assert.deepEqual(live.nodes.map((n) => n.id).sort(), ["1", "2", "3"]);
  assert.deepEqual(live.groups.map((g) => g.id).sort(), ["0", "1", "2", "3", "4"]);
  for (const g of live.groups) assert.ok(["1", "2", "3"].includes(g.leader), JSON.stringify(g));
  assert.equal(live.scopes[0].text, `acme/orders/${evil}`);
  assert.equal(live.images, 0, "a server string was parsed as markup");
  assert.equal(live.injected, false);
  // The charted values are the ones /v1/dashboard serves.
  const d = JSON.parse((await http(admin, "GET", "/v1/dashboard")).text);
  assert.equal(d.series["nodes.up"].at(-1), 3);
  assert.equal(live.problems.length, 0, JSON.stringify(live.problems));
  await screenshot("dashboard.png");
  traffic = false;
  await writes;

  // Flow, governance and a membership operation through the official
  // SDK and the admin API; the new panels must show them from live values.
  await kv.create("ok-1", { type: "dash-ok" });
  await kv.create("ok-2", { type: "dash-ok" });
  await kv.create("bad-1", { type: "dash-bad" });
  const [failing] = await kv.claimDue("dash-bad", { worker: "dash-worker", leaseMs: 30000, limit: 1 });
  await kv.fail("bad-1", { leaseToken: failing.leaseToken, fencingToken: failing.fencingToken, error: "card declined" });
  await kv.create("bad-2", { type: "dash-bad" });
  const [stuck] = await kv.claimDue("dash-bad", { worker: "dash-worker", leaseMs: 300, limit: 1 });
  assert.equal(String(stuck.id), "bad-2");
  await kv.create("bad-3", { type: "dash-bad" });
  await kv.circuitOpen("dash-payments", { openMs: 600000 });
  await kv.approvalRequest("dash-refund-1", { flowId: "bad-3", scope: "refunds", requestedBy: "bot", timeoutMs: 600000 });
  await kv.budgetReserve("dash-llm", 90, { limit: 100, windowMs: 3600000, reservationId: "r1" });
  await kv.budgetReserve("dash-cheap", 10, { limit: 100, windowMs: 3600000, reservationId: "r2" });
  await kv.close();
  const led = JSON.parse((await http(admin, "GET", "/v1/dashboard")).text).groups.find((g) => g.id > 0 && g.leader === 1);
  assert.ok(led, "node 1 leads a data group");
  const moved = await http(admin, "POST", `/v1/cluster/groups/${led.id}/transfer`, {});
  assert.equal(moved.status, 202, moved.text);
  const opId = String(JSON.parse(moved.text).op);

  const panelsView = () => js(`
    const q = (s) => [...document.querySelectorAll(s)];
    const a = (e, ...names) => Object.fromEntries(names.map((n) => [n, e.getAttribute("data-" + n)]));
    return {
      members: q("tr[data-member-id]").map((e) => a(e, "member-id", "member-state", "voter")),
      ops: q("tr[data-op-id]").map((e) => a(e, "op-id", "op-kind", "op-state", "done", "total")),
      types: q("tr[data-flow-type]").map((e) => a(e, "flow-type", "total", "failed", "stuck", "queued", "running")),
      flows: q("#panel-flow tr[data-flow-id]").map((e) => ({ ...a(e, "flow-id", "reason"), text: e.textContent })),
      circuits: q("tr[data-circuit-scope]").map((e) => a(e, "circuit-scope", "status")),
      approvals: q("tr[data-approval-id]").map((e) => a(e, "approval-id")),
      budgets: q("tr[data-budget-scope]").map((e) => a(e, "budget-scope", "ratio")),
      states: Object.fromEntries(q("section[data-panel]").map((e) => [e.getAttribute("data-panel"), e.getAttribute("data-state")])),
      order: q("section[data-panel]").map((e) => e.getAttribute("data-panel")),
    };`);
  const pv = await waitFor("the membership, Flow and governance panels", 30000, async () => {
    const v = await panelsView();
    const bad = v.types.find((t) => t["flow-type"] === "dash-bad");
    const ok = v.members.length === 3 && v.ops.some((o) => o["op-id"] === opId) &&
      bad && bad.stuck === "1" && bad.failed === "1" &&
      v.flows.some((f) => f["flow-id"] === "bad-2" && f.reason === "lease_expired") &&
      v.circuits.length > 0 && v.approvals.length > 0 && v.budgets.length > 0;
    return ok ? v : false;
  });
  assert.deepEqual(pv.members.map((m) => m["member-id"]).sort(), ["1", "2", "3"]);
  for (const m of pv.members) assert.deepEqual([m["member-state"], m.voter], ["active", "true"], JSON.stringify(m));
  const op = pv.ops.find((o) => o["op-id"] === opId);
  assert.equal(op["op-kind"], "transfer-leader");
  assert.ok(["running", "done"].includes(op["op-state"]), JSON.stringify(op));
  // The failing type first, with its counts by state; then the healthy one.
  assert.deepEqual(pv.types.map((t) => t["flow-type"]), ["dash-bad", "dash-ok"]);
  assert.deepEqual(pv.types[0], { "flow-type": "dash-bad", total: "3", failed: "1", stuck: "1", queued: "1", running: "1" });
  assert.equal(pv.types[1].queued, "2");
  const failedRow = pv.flows.find((f) => f["flow-id"] === "bad-1");
  assert.ok(failedRow && failedRow.text.includes("card declined"), JSON.stringify(pv.flows));
  assert.deepEqual(pv.circuits, [{ "circuit-scope": "dash-payments", status: "open" }]);
  assert.deepEqual(pv.approvals, [{ "approval-id": "dash-refund-1" }]);
  assert.deepEqual(pv.budgets, [{ "budget-scope": "dash-llm", ratio: "0.900" }]);
  for (const id of ["membership", "flow", "governance"]) assert.equal(pv.states[id], "live", JSON.stringify(pv.states));
  assert.equal(pv.order[0], "problems");
  // What the Flow panel shows is what the node's JSON says.
  const fs_ = JSON.parse((await http(admin, "GET", "/v1/flow/stats")).text);
  assert.equal(fs_.failed_total, 1);
  assert.equal(fs_.groups_answered, SHARDS);
  await js(`document.getElementById("panel-membership").scrollIntoView();`);
  await screenshot("dashboard-flow.png");
  await js(`window.scrollTo(0, 0);`);

  // Node 3 dies: the page marks it down within a bounded time.
  nodes[2].killed = true;
  nodes[2].child.kill("SIGKILL");
  const t0 = Date.now();
  const down = await waitFor("node 3 marked down", 20000, async () => {
    const v = await view();
    const n3 = v.nodes.find((n) => n.id === "3");
    return n3 && n3.state === "down" ? v : false;
  });
  console.log(`dashboard.mjs: node 3 shown down ${Date.now() - t0} ms after SIGKILL`);
  assert.ok(down.problems.some((p) => p.kind === "node_down" && p.subject === "node 3"), JSON.stringify(down.problems));
  assert.ok(down.nodes.filter((n) => n.state === "up").length === 2);
  // The problems come first on the page.
  const first = await js(`return document.querySelector("main section").getAttribute("data-panel");`);
  assert.equal(first, "problems");
  await waitFor("the nodes-up chart at 2", 10000, async () => {
    const v = await view();
    return v.charts.some((c) => c.name === "nodes-up" && c.series[0].last === "2");
  });
  // The Flow views go on without node 3: the groups it led elect new
  // leaders and every group answers again.
  await waitFor("the Flow panel live with every group after node 3 died", 30000, async () => {
    const v = await panelsView();
    const f = JSON.parse((await http(admin, "GET", "/v1/flow/stats")).text);
    return v.states.flow === "live" && f.groups_answered === SHARDS && f.failed_total === 1 &&
      v.types.some((t) => t["flow-type"] === "dash-bad" && t.failed === "1") ? v : false;
  });
  await screenshot("dashboard-node-down.png");

  // A node whose admin API needs a token: the page asks for it once (a
  // prompt), keeps it in the tab's sessionStorage and renders.
  const token = "dash-t0ken-4f1c";
  const tokenFile = path.join(dir, "admin.token");
  fs.writeFileSync(tokenFile, `${token}\n`);
  const guarded = await startNode("guarded", ["--admin-token-file", tokenFile, "--log-level", "warn"]);
  await waitFor("the guarded node's /healthz", 20000, async () => (await http(guarded.ports.admin, "GET", "/healthz")).status === 200);
  assert.equal((await http(guarded.ports.admin, "GET", "/v1/dashboard")).status, 401);
  await cmd("POST", `${S}/url`, { url: `http://127.0.0.1:${guarded.ports.admin}/` });
  const ask = await waitFor("the page asking for the admin token", 20000, async () => {
    try { return await cmd("GET", `${S}/alert/text`); } catch { return false; }
  });
  assert.match(ask, /admin token/);
  await cmd("POST", `${S}/alert/text`, { text: token });
  await cmd("POST", `${S}/alert/accept`, {});
  await waitFor("the guarded node's dashboard rendering", 20000, async () => {
    const v = await view();
    return v.updates >= 2 && v.nodes.length === 1 && v.nodes[0].state === "up";
  });
  assert.equal(await js(`return sessionStorage.getItem("lodestone-admin-token");`), token);
  console.log("dashboard.mjs: ok");
} finally {
  try { await cmd("DELETE", S); } catch { /* the kill below ends it */ }
  killBrowser();
}
for (const n of nodes) if (!n.exited) n.child.kill("SIGTERM");
process.exit(0);
