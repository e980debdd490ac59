// Free loopback ports for the lodestone processes the interop tests start.
//
// Ports are drawn below the kernel's ephemeral range (32768-60999 by
// default): a port that bind(0) handed out and the test released can be
// taken by another process's outgoing connection before lodestone binds it.
import dgram from "node:dgram";
import net from "node:net";

// Ports already handed out by this process: never hand one out twice (a
// node given the same port for two listeners fails to start).
const given = new Set();

function randomPort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (!given.has(port)) return port;
  }
}

function give(port) {
  given.add(port);
  return port;
}

function tcpFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

function udpFree(port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket("udp4");
    s.once("error", () => resolve(false));
    s.bind(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

export async function freeTcpPort() {
  for (;;) {
    const port = randomPort();
    if (await tcpFree(port)) return give(port);
  }
}

export async function freeUdpPort() {
  for (;;) {
    const port = randomPort();
    if (await udpFree(port)) return give(port);
  }
}

// Free for both TCP and UDP.
export async function freePort() {
  for (;;) {
    const port = randomPort();
    if ((await tcpFree(port)) && (await udpFree(port))) return give(port);
  }
}
