// What the interop tests of the official Felix client share: the client
// (npm felix-client-linux-x64-gnu, pinned in package.json), waits bounded
// in time, a connection once the node answers, and the test's outcome.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "package.json"));
export const { Client } = require("felix-client-linux-x64-gnu");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function assert(cond, msg) {
  if (!cond) throw new Error("assertion failed: " + msg);
}

export async function withTimeout(p, ms, what) {
  let t;
  const timeout = new Promise((_, rej) => {
    t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(t);
  }
}

// A client of node n (lib/node.mjs) as tenant t1, once the node has its
// dev certificate and answers a cache put (its Raft groups have leaders).
export async function connectReady(n) {
  const ca = join(n.data, "tls", "dev-cert.pem");
  for (let i = 0; i < 100 && !existsSync(ca); i++) await sleep(100);
  for (let i = 0; ; i++) {
    try {
      // 0.5.0: connect(addr, tenant, token, serverName, caFile)
      const client = await withTimeout(
        Client.connect(`127.0.0.1:${n.ports.felix}`, "t1", "tok", "localhost", ca), 20000, "connect");
      await withTimeout(client.cachePut("t1", "default", "warm", "k", Buffer.from("v")), 5000, "warm");
      return client;
    } catch (e) {
      if (i >= 30) throw e;
      await sleep(300);
    }
  }
}

// Runs the test's main and exits: 0 when it resolved, 1 when it threw.
export function run(main) {
  const test = basename(process.argv[1]);
  main().then(() => {
    console.log(`${test}: ok`);
    process.exit(0);
  }, (e) => {
    console.error(`${test}: FAIL:`, e);
    process.exit(1);
  });
}
