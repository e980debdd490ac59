// Starting lodestone processes for the interop tests: `lodestone --dev` on
// free loopback ports ($LS_LODESTONE), each node's data directory and log in
// one temporary directory per test, every node killed (and the directory
// removed, unless $LS_KEEP_TMP is set) when the test's process exits,
// whatever happens.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { freeTcpPort, freeUdpPort } from "./ports.mjs";

const test = path.basename(process.argv[1]);
const binary = process.env.LS_LODESTONE;
if (!binary || !fs.existsSync(binary)) {
  console.error(`${test}: set LS_LODESTONE to the lodestone binary`);
  process.exit(2);
}

// Every node this process started, in order.
export const nodes = [];

// The test's temporary directory (nodes' data and logs, and whatever
// else the test keeps there).
export const dir = fs.mkdtempSync(path.join(os.tmpdir(), `ls-${path.basename(test, ".mjs")}-`));

function cleanup() {
  for (const n of nodes) if (!n.exited) n.child.kill("SIGKILL");
  if (!process.env.LS_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
}
process.on("exit", cleanup);

// Free loopback ports for one node's listeners.
export async function nodePorts() {
  return {
    fsnp: await freeTcpPort(),
    admin: await freeTcpPort(),
    internal: await freeTcpPort(),
    felix: await freeUdpPort(),
  };
}

// Starts node `name` (data in <dir>/<name>, output in <dir>/<name>.log) on
// `ports` (fresh ones when not given) with the flags `args` after its
// listeners'. `stderr: "inherit"` sends the node's stderr to the test's
// instead of the log.
export async function startNode(name, args = [], { ports, stderr } = {}) {
  ports = ports ?? (await nodePorts());
  const data = path.join(dir, name);
  const log = fs.openSync(path.join(dir, `${name}.log`), "w");
  const child = spawn(
    binary,
    [
      "--dev",
      "--data", data,
      "--fsnp", `127.0.0.1:${ports.fsnp}`,
      "--admin", `127.0.0.1:${ports.admin}`,
      "--internal", `127.0.0.1:${ports.internal}`,
      "--felix", `127.0.0.1:${ports.felix}`,
      ...args,
    ],
    { stdio: ["ignore", log, stderr === "inherit" ? "inherit" : log] },
  );
  const n = { name, ports, data, child, exited: false };
  child.on("exit", () => { n.exited = true; });
  nodes.push(n);
  return n;
}

// The last `lines` lines of node n's log.
export function logTail(n, lines = 30) {
  return fs.readFileSync(path.join(dir, `${n.name}.log`), "utf8").split("\n").slice(-lines).join("\n");
}
