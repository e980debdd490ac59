// Interop: the official Felix client (npm felix-client-linux-x64-gnu) with
// JWT auth. A key pair from `lodectl felix keygen`, a node started with
// --felix-jwks-dir, tokens from `lodectl felix token`: the client
// connects with its token, works inside its permissions and is refused
// (FELIX_AUTH, "unauthorized") outside them; forged and other-tenant tokens
// are refused at connect. The node is killed at the end whatever happens.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./lib/ports.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "package.json"));
const { Client } = require("felix-client-linux-x64-gnu");

const bin = process.env.LS_LODESTONE;
if (!bin || !existsSync(bin)) {
  console.error("felix_jwt.mjs: set LS_LODESTONE to the lodestone binary");
  process.exit(1);
}
const lodectl = process.env.LS_LODECTL || join(dirname(bin), "lodectl");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assert(cond, msg) {
  if (!cond) throw new Error("assertion failed: " + msg);
}

async function withTimeout(p, ms, what) {
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

async function refused(p, what) {
  let err = null;
  try {
    await withTimeout(p, 10000, what);
  } catch (e) { err = e; }
  assert(err && /unauthorized/.test(err.message), `${what}: ${err ? err.message : "accepted"}`);
}

const dir = mkdtempSync(join(tmpdir(), "ls-felix-jwt-"));
const keys = join(dir, "keys"), jwks = join(dir, "jwks");
mkdirSync(keys);
mkdirSync(jwks);
const ctl = (...args) => execFileSync(lodectl, ["felix", ...args], { encoding: "utf8" }).trim();
ctl("keygen", "--kid", "k1", "--out-dir", keys, "--jwks", join(jwks, "t1.json"));
ctl("keygen", "--kid", "k2", "--out-dir", keys, "--jwks", join(jwks, "t2.json"));
const signing = join(keys, "k1.pem");

const [felix, admin, internal, fsnp, fsnpTls] = [
  await freePort(), await freePort(), await freePort(), await freePort(), await freePort(),
];
const node = spawn(bin, [
  "--dev", "--data", join(dir, "data"), "--felix-jwks-dir", jwks,
  "--felix", `127.0.0.1:${felix}`, "--admin", `127.0.0.1:${admin}`,
  "--internal", `127.0.0.1:${internal}`, "--fsnp", `127.0.0.1:${fsnp}`,
  "--fsnp-tls", `127.0.0.1:${fsnpTls}`, "--shards", "4", "--log-level", "warn",
], { stdio: ["ignore", "ignore", "inherit"] });
const cleanup = () => {
  try { node.kill("SIGKILL"); } catch {}
  try { rmSync(dir, { recursive: true, force: true }); } catch {}
};
process.on("exit", cleanup);

async function main() {
  const ca = join(dir, "data", "tls", "dev-cert.pem");
  for (let i = 0; i < 100 && !existsSync(ca); i++) await sleep(100);
  const token = ctl("token", "--signing-key", signing, "--tenant", "t1",
    "--perm", "stream.publish:stream:default/orders-*",
    "--perm", "stream.subscribe:stream:default/orders-*",
    "--perm", "cache.write:cache:default/*",
    "--perm", "cache.read:cache:default/*");
  assert(token.split(".").length === 3, "a compact JWT");

  let client;
  for (let i = 0; ; i++) {
    try {
      client = await withTimeout(
        Client.connect(`127.0.0.1:${felix}`, "t1", token, "localhost", ca), 20000, "connect");
      await withTimeout(client.cachePut("t1", "default", "warm", "k", Buffer.from("v")), 5000, "warm");
      break;
    } catch (e) {
      if (i >= 30) throw e;
      await sleep(300);
    }
  }

  // Inside the token's permissions.
  for (let i = 0; i < 5; i++) {
    await withTimeout(client.publish("t1", "default", "orders-eu", Buffer.from(`m${i}`)), 10000, "publish");
  }
  const sub = await withTimeout(client.subscribe("t1", "default", "orders-eu", 0n), 10000, "subscribe");
  for (let i = 0; i < 5; i++) {
    const e = await withTimeout(sub.nextEvent(), 10000, "nextEvent");
    assert(e.payload.toString() === `m${i}`, `payload ${e.payload}`);
  }
  await sub.close();
  await client.cachePut("t1", "default", "c1", "k", Buffer.from("v1"));
  const got = await client.cacheGet("t1", "default", "c1", "k");
  assert(got && got.toString() === "v1", "cacheGet");

  // Outside them: refused, and the connection keeps working.
  await refused(client.publish("t1", "default", "payments", Buffer.from("x")), "publish payments");
  await refused(client.subscribe("t1", "default", "payments", 0n), "subscribe payments");
  await refused(client.cachePut("t1", "other", "c1", "k", Buffer.from("x")), "cachePut other/c1");
  await withTimeout(client.publish("t1", "default", "orders-eu", Buffer.from("after")), 10000, "publish after");
  await client.close();

  // At connect: a forged token, a t1 token presented as t2, a t2 token
  // signed with t1's key.
  const parts = token.split(".");
  const forged = [parts[0], parts[1], parts[2].slice(0, -4) + "AAAA"].join(".");
  await refused(Client.connect(`127.0.0.1:${felix}`, "t1", forged, "localhost", ca), "forged");
  await refused(Client.connect(`127.0.0.1:${felix}`, "t2", token, "localhost", ca), "t1 token as t2");
  const wrongKey = ctl("token", "--signing-key", signing, "--kid", "k2", "--tenant", "t2",
    "--perm", "tenant.admin:tenant:*");
  await refused(Client.connect(`127.0.0.1:${felix}`, "t2", wrongKey, "localhost", ca), "t2 token by t1's key");
  const t2 = ctl("token", "--signing-key", join(keys, "k2.pem"), "--tenant", "t2",
    "--perm", "tenant.admin:tenant:*");
  const c2 = await withTimeout(Client.connect(`127.0.0.1:${felix}`, "t2", t2, "localhost", ca), 20000, "connect t2");
  await c2.close();
}

main().then(() => {
  console.log("felix_jwt.mjs: ok");
  cleanup();
  process.exit(0);
}, (e) => {
  console.error("felix_jwt.mjs: FAIL:", e);
  cleanup();
  process.exit(1);
});
