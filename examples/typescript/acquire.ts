// Acquires a lockstream lock, prints the fencing token, holds the lock while it "works", then
// releases it. The same command line as examples/go and examples/python:
//
//   npx tsx examples/typescript/acquire.ts --name examples/report --mode write --work-ms 2000
//
// Prints `queued ahead=N` while waiting, `acquired token=T`, `in doubt` / `confirmed` if the
// server loses and regains contact with ZooKeeper meanwhile, then `released`; on failure
// `error: <STATUS>: <details>` on stderr and exit code 1.
//
// Credentials, as in the other examples: `--ca ca.crt` for TLS (with `--cert` and `--key` for a
// server that wants a client certificate), and a bearer token in LOCKSTREAM_TOKEN.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { credentials } from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { LockClient, LockClientError, Status, type LockMode } from '@lockstream/client';

const { values: flags } = parseArgs({
  options: {
    address: { type: 'string', default: '127.0.0.1:50051' },
    name: { type: 'string', default: 'examples/report' },
    mode: { type: 'string', default: 'mutex' },
    owner: { type: 'string', default: 'example-typescript' },
    'wait-timeout-ms': { type: 'string' },
    'work-ms': { type: 'string', default: '1000' },
    'hold-until-eof': { type: 'boolean', default: false },
    ca: { type: 'string' },
    cert: { type: 'string' },
    key: { type: 'string' },
  },
});

const pem = (path: string | undefined): Buffer | null => (path === undefined ? null : readFileSync(path));
const token = process.env['LOCKSTREAM_TOKEN'];
const locks = new LockClient(flags.address, {
  ...(flags.ca === undefined
    ? {}
    : { credentials: credentials.createSsl(pem(flags.ca), pem(flags.key), pem(flags.cert)) }),
  ...(token ? { token } : {}),
});
try {
  const waitTimeout = flags['wait-timeout-ms'];
  const lock = await locks.acquire(flags.name, {
    mode: flags.mode as LockMode,
    owner: flags.owner,
    ...(waitTimeout === undefined ? {} : { waitTimeout: Number(waitTimeout) }),
    onQueued: (ahead) => console.log(`queued ahead=${ahead}`),
    // The server lost contact with ZooKeeper: pause writes to what the lock guards.
    onInDoubt: () => console.log('in doubt'),
    onConfirmed: () => console.log('confirmed'),
  });
  console.log(`acquired token=${lock.token}`);

  // The work. Pass lock.token to whatever the lock protects, and stop when lock.lost aborts.
  if (flags['hold-until-eof']) {
    process.stdin.resume();
    await new Promise((resolve) => process.stdin.once('end', resolve));
  } else {
    await sleep(Number(flags['work-ms']), undefined, { signal: lock.lost });
  }

  await lock.release();
  console.log('released');
} catch (error) {
  if (!(error instanceof LockClientError)) throw error;
  console.error(`error: ${Status[error.code]}: ${error.details}`);
  process.exitCode = 1;
} finally {
  locks.close();
}
