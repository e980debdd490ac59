// Interop: the official Felix client (npm felix-client-linux-x64-gnu) with
// JWT auth. A key pair from `lodectl felix keygen`, a node started with
// --felix-jwks-dir, tokens from `lodectl felix token`: the client
// connects with its token, works inside its permissions and is refused
// (FELIX_AUTH, "unauthorized") outside them; forged and other-tenant tokens
// are refused at connect. The node is killed at the end whatever happens.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";

import { Client, assert, run, sleep, withTimeout } from "./lib/felix.mjs";
import { dir, startNode } from "./lib/node.mjs";

const lodectl = process.env.LS_LODECTL || join(dirname(process.env.LS_LODESTONE), "lodectl");

async function refused(p, what) {
  let err = null;
  try {
    await withTimeout(p, 10000, what);
  } catch (e) { err = e; }
  assert(err && /unauthorized/.test(err.message), `${what}: ${err ? err.message : "accepted"}`);
}

const keys = join(dir, "keys"), jwks = join(dir, "jwks");
mkdirSync(keys);
mkdirSync(jwks);
const ctl = (...args) => execFileSync(lodectl, ["felix", ...args], { encoding: "utf8" }).trim();
ctl("keygen", "--kid", "k1", "--out-dir", keys, "--jwks", join(jwks, "t1.json"));
ctl("keygen", "--kid", "k2", "--out-dir", keys, "--jwks", join(jwks, "t2.json"));
const signing = join(keys, "k1.pem");

const node = await startNode("n1", ["--felix-jwks-dir", jwks, "--shards", "4", "--log-level", "warn"],
  { stderr: "inherit" });
const felix = node.ports.felix;

async function main() {
  const ca = join(node.data, "tls", "dev-cert.pem");
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

run(main);
