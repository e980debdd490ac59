// Interop: the official FerricStore TypeScript SDK authenticates as an ACL
// user (username and password in its URL) against a real lodestone, and the
// user's rules hold: allowed commands and keys answer, others are refused
// with NOPERM, a wrong password is refused at connect. The administrator is
// the requirepass-compatible default user.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { dir, logTail, nodes, startNode } from "./lib/node.mjs";
import { norm, text } from "./lib/values.mjs";
import { FerricStoreClient } from "@ferricstore/ferricstore";

const ADMIN_PW = "interop-Adm1n-pw";
const APP_PW = "interop-App-pw-7";
const main = await startNode("node", ["--advertise-host", "127.0.0.1", "--requirepass", ADMIN_PW]);
const port = main.ports.fsnp;

async function connect(url) {
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      return await FerricStoreClient.fromUrl(url);
    } catch (error) {
      if (Date.now() > deadline || main.exited || /authentication|WRONGPASS/.test(String(error))) {
        throw error;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

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

try {
  const admin = await connect(`ferric://default:${ADMIN_PW}@127.0.0.1:${port}`);
  clients.push(admin);
  await step("ACL SETUSER through the SDK's command()", async () => {
    assert.equal(text(await admin.command("ACL", "SETUSER", "sdk", "on", `>${APP_PW}`, "~sdk:*", "+@read", "+set")), "OK");
    assert.equal(text(await admin.kv.set("other:1", "x")), "OK");
  });
  await step("the SDK authenticates as the ACL user", async () => {
    const app = await connect(`ferric://sdk:${APP_PW}@127.0.0.1:${port}`);
    clients.push(app);
    assert.equal(text(await app.kv.set("sdk:1", "v")), "OK");
    assert.equal(norm(await app.kv.get("sdk:1")), "v");
    assert.equal(text(await app.command("ACL", "WHOAMI")), "sdk");
    await assert.rejects(app.kv.get("other:1"), /NOPERM.*'other:1' key/);
    await assert.rejects(app.kv.del("sdk:1"), /NOPERM.*'del' command/);
    await assert.rejects(app.command("ACL", "LIST"), /NOPERM.*'acl' command/);
  });
  await step("a wrong password is refused at connect", async () => {
    await assert.rejects(FerricStoreClient.fromUrl(`ferric://sdk:wrong@127.0.0.1:${port}`), /WRONGPASS|authentication/);
  });
  await step("passwords are neither listed nor logged", async () => {
    const list = JSON.stringify(norm(await admin.command("ACL", "LIST")));
    assert.match(list, /user sdk on #/);
    assert.ok(!list.includes(APP_PW));
    const log = fs.readFileSync(path.join(dir, "node.log"), "utf8");
    assert.ok(!log.includes(APP_PW) && !log.includes(ADMIN_PW), "a password in the node's log");
  });
} catch (error) {
  failed++;
  console.log(`FAIL connect: ${error && error.stack ? error.stack : error}`);
} finally {
  for (const c of clients) await c.close().catch(() => {});
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
