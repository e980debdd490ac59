// Named checks of an interop test, run one after the other against one
// client: each prints `ok NAME` or `FAIL NAME: stack`. runChecks() then
// shows the nodes' logs when something failed, stops the nodes (SIGTERM,
// at most 10 s each) and exits 0 when every check passed, 1 otherwise.
import { logTail, nodes } from "./node.mjs";

const checks = [];

export function check(name, fn) {
  checks.push([name, fn]);
}

export async function runChecks(connect) {
  let failed = 0;
  let client;
  try {
    client = await connect();
    for (const [name, fn] of checks) {
      try {
        await fn(client);
        console.log(`ok   ${name}`);
      } catch (error) {
        failed++;
        console.log(`FAIL ${name}: ${error && error.stack ? error.stack : error}`);
      }
    }
  } catch (error) {
    failed++;
    console.log(`FAIL connect: ${error && error.stack ? error.stack : error}`);
  } finally {
    if (client) await client.close().catch(() => {});
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
}
