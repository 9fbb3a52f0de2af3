// Campaigns in a lockstream election, leads for a while, then resigns. The same command line as
// `examples/go --election` and examples/python/election.py:
//
//   npx tsx examples/typescript/election.ts --name examples/scheduler --value 10.0.0.7:8080 --lead-ms 2000
//
// Prints `queued ahead=N` while other candidates are ahead, `elected term=T` once it leads,
// `proclaimed` after replacing its value with --proclaim, `leader term=T value=V` (the leader as
// anyone asking sees it), then `resigned`. If the leadership is lost meanwhile it prints `lost`.
// On failure: `error: <STATUS>: <details>` on stderr and exit code 1.
//
// Credentials, as in acquire.ts: `--ca ca.crt` for TLS (with `--cert` and `--key` for a server
// that wants a client certificate), and a bearer token in LOCKSTREAM_TOKEN.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { credentials } from '@grpc/grpc-js';
import { LockClient, LockClientError, Status } from '@lockstream/client';

const { values: flags } = parseArgs({
  options: {
    address: { type: 'string', default: '127.0.0.1:50051' },
    name: { type: 'string', default: 'examples/scheduler' },
    owner: { type: 'string', default: 'example-typescript' },
    value: { type: 'string', default: '10.0.0.7:8080' },
    proclaim: { type: 'string', default: '10.0.0.7:9443' },
    'lead-ms': { type: 'string', default: '1000' },
    'lead-until-eof': { type: 'boolean', default: false },
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
  // [docs:elections]
  // Waits until elected: candidates are elected one at a time, in the order they joined.
  const leadership = await locks.campaign(flags.name, flags.value, {
    owner: flags.owner,
    onQueued: (ahead) => console.log(`queued ahead=${ahead}`),
  });
  // The term is the leader's fencing token: larger for every later leader.
  console.log(`elected term=${leadership.term}`);
  leadership.lost.addEventListener('abort', () => console.log('lost'));

  await leadership.proclaim(flags.proclaim); // a new value: observers are told
  console.log('proclaimed');
  const leader = await locks.leader(flags.name); // anyone can ask: { term, value, owner } or undefined
  console.log(`leader term=${leader?.term} value=${leader?.value.toString()}`);

  // Lead (pass leadership.term to what the leader writes to) until done, or until lost.
  await (
    flags['lead-until-eof']
      ? once(process.stdin.resume(), 'end', { signal: leadership.lost })
      : sleep(Number(flags['lead-ms']), undefined, { signal: leadership.lost })
  ).catch(() => process.stdin.pause()); // lost: stop leading at once
  await leadership.resign(); // the next candidate is elected; LockLostError if it was lost
  console.log('resigned');
  // [/docs:elections]
} catch (error) {
  if (!(error instanceof LockClientError)) throw error;
  console.error(`error: ${Status[error.code]}: ${error.details}`);
  process.exitCode = 1;
} finally {
  locks.close();
}
