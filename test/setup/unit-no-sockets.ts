/**
 * Vitest setup file: a test in test/unit opens no socket. Connecting or listening there throws
 * (net.Socket#connect and net.Server#listen are under every TCP, HTTP/2, gRPC and ZooKeeper
 * connection and server), so a test that needs one goes to test/integration. Runs before every
 * test file and changes nothing for a file outside test/unit.
 */
import net from 'node:net';
import path from 'node:path';
import { expect } from 'vitest';

const ORIGINALS = Symbol.for('lockstream.test.netOriginals');

interface NetOriginals {
  readonly connect: typeof net.Socket.prototype.connect;
  readonly listen: typeof net.Server.prototype.listen;
}

const holder = globalThis as { [ORIGINALS]?: NetOriginals };
// Kept to be put back as they were (never called from here, so `this` stays the caller's).
const originals = (holder[ORIGINALS] ??= {
  // eslint-disable-next-line @typescript-eslint/unbound-method
  connect: net.Socket.prototype.connect,
  // eslint-disable-next-line @typescript-eslint/unbound-method
  listen: net.Server.prototype.listen,
});

const testPath = expect.getState().testPath ?? '';
const unitDir = `${path.sep}test${path.sep}unit${path.sep}`;

if (path.resolve(testPath).includes(unitDir)) {
  const refuse = (what: string): never => {
    throw new Error(
      `${path.basename(testPath)}: a test in test/unit ${what}; a test that needs a socket belongs in test/integration`,
    );
  };
  net.Socket.prototype.connect = function connect(): never {
    return refuse('opened a connection');
  };
  net.Server.prototype.listen = function listen(): never {
    return refuse('listened on a socket');
  };
} else {
  net.Socket.prototype.connect = originals.connect;
  net.Server.prototype.listen = originals.listen;
}
