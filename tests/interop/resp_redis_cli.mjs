// Interop: Debian's redis-cli (redis-tools) against lodestone's RESP
// listener on a 3-node cluster: pipe mode (--pipe, a few thousand SETs,
// redis-cli's own ECHO check at the end) into node 1, the values read back
// through node 3, cluster mode (-c) through node 2 (every node answers
// every key, no MOVED), CLUSTER SLOTS naming the three RESP listeners,
// RESP over TLS (--tls) on node 1, and commands on stdin (the interactive
// loop, which reads COMMAND DOCS first). Skipped (77) without redis-cli, unless
// CI=true. Exit status 0 means every check passed.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";

import { nodePorts, nodes, startNode } from "./lib/node.mjs";
import { freeTcpPort } from "./lib/ports.mjs";

const cli = spawnSync("redis-cli", ["--version"]);
if (cli.error) {
  if (process.env.CI === "true") {
    console.error("resp_redis_cli.mjs: redis-cli is missing (CI=true)");
    process.exit(1);
  }
  console.error("resp_redis_cli.mjs: redis-cli not installed (Debian package redis-tools): skipped");
  process.exit(77);
}

const ports = [];
for (let i = 0; i < 3; i++) ports.push({ ...(await nodePorts()), resp: await freeTcpPort() });
const tlsPort = await freeTcpPort();
const peers = ports.map((p, i) => `${i + 1}=127.0.0.1:${p.internal}`).join(",");
for (let i = 0; i < 3; i++) {
  await startNode(`node${i + 1}`, [
    "--node-id", String(i + 1),
    "--advertise-host", "127.0.0.1",
    "--peers", peers,
    "--shards", "4",
    "--log-level", "warn",
    "--resp", `127.0.0.1:${ports[i].resp}`,
    ...(i === 0 ? ["--resp-tls", `127.0.0.1:${tlsPort}`] : []),
  ], { ports: ports[i] });
}

function rcli(port, args, input, quiet = false) {
  return execFileSync("redis-cli", ["-p", String(port), ...args], {
    input, encoding: "utf8", timeout: 30000,
    stdio: ["pipe", "pipe", quiet ? "ignore" : "inherit"],
  });
}

// Every node answers once each shard has a leader: wait for writes.
const deadline = Date.now() + 60000;
for (let i = 0; i < 3; i++) {
  for (;;) {
    let out = "";
    try { out = rcli(ports[i].resp, ["SET", `ready${i}`, "1"], undefined, true).trim(); } catch { /* not yet */ }
    if (out === "OK") break;
    assert.ok(Date.now() < deadline, `node ${i + 1} answers SET`);
    assert.ok(!nodes.some((n) => n.exited), "no node exited");
    await new Promise((r) => setTimeout(r, 200));
  }
}

// Pipe mode: raw RESP in, redis-cli counts the replies.
const N = 2000;
let proto = "";
for (let i = 0; i < N; i++) {
  const k = `pipe:${i}`, v = `v${i}`;
  proto += `*3\r\n$3\r\nSET\r\n$${k.length}\r\n${k}\r\n$${v.length}\r\n${v}\r\n`;
}
const piped = rcli(ports[0].resp, ["--pipe"], proto);
assert.match(piped, new RegExp(`errors: 0, replies: ${N}`), piped);
for (const i of [0, 777, N - 1]) {
  assert.equal(rcli(ports[2].resp, ["GET", `pipe:${i}`]).trim(), `v${i}`);
}

// Cluster mode through node 2: keys of every shard, no redirect needed.
for (let i = 0; i < 20; i++) {
  assert.equal(rcli(ports[1].resp, ["-c", "SET", `c:${i}`, `x${i}`]).trim(), "OK");
  assert.equal(rcli(ports[1].resp, ["-c", "GET", `c:${i}`]).trim(), `x${i}`);
}
assert.equal(rcli(ports[1].resp, ["-c", "DEL", "c:1", "c:2", "c:3"]).trim(), "3");
assert.equal(rcli(ports[1].resp, ["-c", "INCRBY", "c:n", "5"]).trim(), "5");

// CLUSTER SLOTS: the 16384 slots over the three RESP listeners, once
// every node's record (with its RESP address) has reached node 3.
let slots = "";
for (const until = Date.now() + 30000; ;) {
  slots = rcli(ports[2].resp, ["CLUSTER", "SLOTS"]);
  if (ports.every((p) => new RegExp(`\\b${p.resp}\\b`).test(slots))) break;
  assert.ok(Date.now() < until, `CLUSTER SLOTS names every node: ${slots}`);
  await new Promise((r) => setTimeout(r, 200));
}
for (const p of ports) assert.match(slots, new RegExp(`\\b${p.resp}\\b`), slots);
assert.match(slots, /16383/);

// TLS (the dev certificate).
assert.equal(execFileSync("redis-cli", ["--tls", "--insecure", "-p", String(tlsPort), "PING"],
  { encoding: "utf8", timeout: 30000 }).trim(), "PONG");
assert.equal(execFileSync("redis-cli", ["--tls", "--insecure", "-p", String(tlsPort), "GET", "pipe:5"],
  { encoding: "utf8", timeout: 30000 }).trim(), "v5");

// Commands on stdin (redis-cli's interactive loop, which first reads
// COMMAND DOCS for its hints), a transaction among them.
assert.equal(rcli(ports[0].resp, [], "PING\nGET pipe:7\nMULTI\nINCR i:1\nEXEC\n").trim(),
  "PONG\nv7\nOK\nQUEUED\n1");

console.log("resp_redis_cli.mjs: pipe, cluster mode, CLUSTER SLOTS, TLS and stdin passed");
for (const n of nodes) n.child.kill("SIGTERM");
process.exit(0);
