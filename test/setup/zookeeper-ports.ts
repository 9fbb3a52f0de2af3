/**
 * Free loopback ports for test servers. Found by binding and closing, so another process can
 * take one before the server binds it: a server that then fails with a BindException is started
 * again on other ports (see zookeeper-ensemble.ts).
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';

/** Ports are picked below the kernel's ephemeral range, but not lower than this. */
const LOWEST_PORT = 10_000;

/** A port that was free on 127.0.0.1 a moment ago. */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error(`unexpected listen address: ${String(address)}`));
      });
    });
  });
}

/**
 * `count` distinct ports that were free on 127.0.0.1 a moment ago, picked below the kernel's
 * ephemeral port range when there is room. Why not port 0 as for the standalone server: a
 * member binds some of its ports late (the quorum port only when it becomes leader) or again
 * (after restart()), and meanwhile any outgoing connection on the machine (test clients, the
 * members' own connections to each other) may be given a port from the ephemeral range as its
 * local port, which then makes the member's bind fail.
 */
export async function findFreePorts(count: number): Promise<number[]> {
  const range = ephemeralPortRange();
  const highest = range === null ? 0 : range.low - 1;
  // Holding every probe socket open until all are found keeps the ports distinct.
  const held: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let attempt = 0; ports.length < count && highest - LOWEST_PORT >= 1_000; attempt++) {
      if (attempt >= 50 * count) break;
      const port = LOWEST_PORT + Math.floor(Math.random() * (highest - LOWEST_PORT + 1));
      if (ports.includes(port)) continue;
      const server = await listenOn(port);
      if (server === null) continue;
      held.push(server);
      ports.push(port);
    }
    // No room below the ephemeral range (or too crowded): fall back to what the kernel gives.
    while (ports.length < count) {
      const port = await findFreePort();
      if (!ports.includes(port)) ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

function ephemeralPortRange(): { low: number; high: number } | null {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low === undefined || high === undefined || !Number.isInteger(low) || !Number.isInteger(high)) {
      return null;
    }
    return { low, high };
  } catch {
    return null; // not Linux
  }
}

/** A server listening on 127.0.0.1:`port`, or null if the port is taken. */
function listenOn(port: number): Promise<net.Server | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server));
  });
}
