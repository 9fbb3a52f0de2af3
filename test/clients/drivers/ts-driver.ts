// The TypeScript SDK's conformance driver (test/clients/README.md): reads commands on stdin,
// performs them with the SDK in src/client, and writes what the SDK reports on stdout.
import { createInterface } from 'node:readline';
import {
  LockClient,
  LockClientClosedError,
  LockClientError,
  LockLostError,
  LockTimeoutError,
  NotLeaderError,
  RevisionConflictError,
  TokenNotHeldError,
  type ElectionEvent,
  type Leadership,
  type Lock,
} from '../../../src/client/index.js';
import {
  kindOfStatus,
  STATUS_NAMES,
  type Command,
  type Failure,
  type Observation,
  type ObservedKind,
} from '../protocol.js';

/** A lone surrogate: a JavaScript string that is no Unicode text, so has no UTF-8 encoding. */
const ILL_FORMED = '\udcff';

function say(observation: Observation): void {
  process.stdout.write(`${JSON.stringify({ ...observation, at: Date.now() })}\n`);
}

/** The SDK's errors in the common vocabulary, by class first, then by gRPC status. */
function failure(error: unknown): Failure {
  if (error instanceof LockClientError) {
    const code = STATUS_NAMES[error.code] ?? String(error.code);
    const kind =
      error instanceof LockLostError
        ? 'lost'
        : error instanceof LockTimeoutError
          ? 'timeout'
          : error instanceof LockClientClosedError
            ? 'closed'
            : error instanceof NotLeaderError || error instanceof TokenNotHeldError
              ? 'not-held'
              : error instanceof RevisionConflictError
                ? 'conflict'
                : kindOfStatus(code);
    return { kind, code, class: error.name, message: error.message };
  }
  if (error instanceof Error && error.name === 'AbortError') {
    return { kind: 'cancelled', class: error.name, message: error.message };
  }
  // The SDK's own checks before sending throw TypeError or RangeError, JavaScript's errors for a
  // bad argument.
  if (error instanceof TypeError || error instanceof RangeError) {
    return { kind: 'invalid-argument', class: error.name, message: error.message };
  }
  const name = error instanceof Error ? error.name : typeof error;
  return { kind: 'foreign', class: name, message: String(error) };
}

let client: LockClient | undefined;
const locks = new Map<string, Lock>();
const waits = new Map<string, AbortController>();
const leaderships = new Map<string, Leadership>();
const observers = new Map<string, AbortController>();

function connected(): LockClient {
  if (!client) throw new Error('INVARIANT: a command before connect');
  return client;
}

/** Reports what happens to a held lock: doubt, confirmation, revocation and loss. */
function follow(id: string, lock: Lock): void {
  locks.set(id, lock);
  lock.lost.addEventListener('abort', () => say({ event: 'lost', id, ...failure(lock.lost.reason) }), {
    once: true,
  });
}

function holderCallbacks(id: string): {
  onInDoubt: () => void;
  onConfirmed: () => void;
  onRevokeRequested: (request: { reason: string; forceAt: Date | undefined }) => void;
} {
  return {
    onInDoubt: () => say({ event: 'in-doubt', id }),
    onConfirmed: () => say({ event: 'confirmed', id }),
    onRevokeRequested: ({ reason, forceAt }) =>
      say({ event: 'revoke-requested', id, reason, forceAt: forceAt?.getTime() ?? null }),
  };
}

/** An election event as the protocol's `observed` says it. */
function observed(event: ElectionEvent): { what: ObservedKind; term: string; value?: string } {
  switch (event.kind) {
    case 'term':
    case 'proclaimed':
      return { what: event.kind, term: event.term.toString(), value: event.value.toString() };
    case 'vacant':
      return { what: event.kind, term: event.afterTerm.toString() };
    case 'history-gone':
    case 'skipped':
      return { what: event.kind, term: event.firstTerm.toString() };
  }
}

async function perform(command: Command): Promise<void> {
  switch (command.op) {
    case 'connect':
      try {
        client = new LockClient('addresses' in command ? command.addresses : command.address, {
          ...(command.heartbeatIntervalMs === undefined
            ? {}
            : { heartbeatIntervalMs: command.heartbeatIntervalMs }),
          ...(command.resumeGraceMs === undefined ? {} : { resumeGraceMs: command.resumeGraceMs }),
        });
      } catch (error) {
        say({ event: 'error', id: '', ...failure(error) });
        return;
      }
      say({ event: 'connected' });
      return;
    case 'acquire': {
      const { id } = command;
      const wait = new AbortController();
      waits.set(id, wait);
      try {
        const lock = await connected().acquire(command.name + (command.invalidUtf8 ? ILL_FORMED : ''), {
          ...(command.mode === undefined ? {} : { mode: command.mode }),
          ...(command.limit === undefined ? {} : { limit: command.limit }),
          ...(command.owner === undefined ? {} : { owner: command.owner }),
          ...(command.timeoutMs === undefined ? {} : { waitTimeout: command.timeoutMs }),
          ...(command.value === undefined ? {} : { value: command.value }),
          signal: wait.signal,
          onQueued: (ahead) => say({ event: 'queued', id, ahead }),
          ...holderCallbacks(id),
        });
        follow(id, lock);
        say({ event: 'acquired', id, token: lock.token.toString() });
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      } finally {
        waits.delete(id);
      }
      return;
    }
    case 'try-lock': {
      const { id } = command;
      try {
        const lock = await connected().tryAcquire(command.name, holderCallbacks(id));
        if (lock === null) {
          say({ event: 'not-acquired', id });
          return;
        }
        follow(id, lock);
        say({ event: 'acquired', id, token: lock.token.toString() });
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'acquire-all': {
      const { id } = command;
      try {
        const lock = await connected().acquireAll(command.names, holderCallbacks(id));
        follow(id, lock);
        say({
          event: 'acquired',
          id,
          token: lock.token.toString(),
          tokens: lock.tokens.map(({ token }) => token.toString()),
        });
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'cancel':
      // AbortSignal is how a TypeScript caller gives up a wait.
      waits.get(command.id)?.abort();
      return;
    case 'release': {
      const { id } = command;
      const lock = locks.get(id);
      if (!lock) throw new Error(`INVARIANT: release of ${id}, which is not held`);
      try {
        await lock.release();
        say({ event: 'released', id });
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'scope': {
      const { id } = command;
      try {
        // The body waits for the loss it is handed (`signal`), then returns normally.
        await connected().withLock(command.name, holderCallbacks(id), async (signal, lock) => {
          follow(id, lock);
          say({ event: 'acquired', id, token: lock.token.toString() });
          if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve));
        });
        say({ event: 'scope-exited', id, error: null });
      } catch (error) {
        say({ event: 'scope-exited', id, error: failure(error) });
      }
      return;
    }
    case 'campaign': {
      const { id } = command;
      const wait = new AbortController();
      waits.set(id, wait);
      try {
        const leadership = await connected().campaign(command.name, command.value, {
          signal: wait.signal,
          onQueued: (ahead) => say({ event: 'queued', id, ahead }),
          onInDoubt: () => say({ event: 'in-doubt', id }),
          onConfirmed: () => say({ event: 'confirmed', id }),
        });
        leaderships.set(id, leadership);
        say({ event: 'elected', id, term: leadership.term.toString() });
        const { lost } = leadership;
        if (lost.aborted) say({ event: 'lost', id, ...failure(lost.reason) });
        else lost.addEventListener('abort', () => say({ event: 'lost', id, ...failure(lost.reason) }));
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      } finally {
        waits.delete(id);
      }
      return;
    }
    case 'resign':
    case 'proclaim': {
      const { id } = command;
      const leadership = leaderships.get(id);
      if (!leadership) throw new Error(`INVARIANT: ${command.op} of ${id}, which was not elected`);
      try {
        if (command.op === 'resign') {
          await leadership.resign();
          say({ event: 'resigned', id });
        } else {
          await leadership.proclaim(command.value);
          say({ event: 'proclaimed', id });
        }
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'leader': {
      const { id } = command;
      try {
        const leader = await connected().leader(command.name);
        say(
          leader === undefined
            ? { event: 'no-leader', id }
            : { event: 'leader', id, term: leader.term.toString(), value: leader.value.toString() },
        );
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'proclaim-term':
    case 'resign-term': {
      const { id } = command;
      const term = BigInt(command.term);
      try {
        if (command.op === 'proclaim-term') {
          await connected().proclaim(command.name, term, command.value);
          say({ event: 'proclaimed', id });
        } else {
          await connected().resign(command.name, term);
          say({ event: 'resigned', id });
        }
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'observe': {
      const { id } = command;
      // AbortSignal ends an observer cleanly.
      const stop = new AbortController();
      observers.set(id, stop);
      try {
        const events = connected().observe(command.name, {
          signal: stop.signal,
          ...(command.fromTerm === undefined ? {} : { fromTerm: BigInt(command.fromTerm) }),
        });
        for await (const event of events) say({ event: 'observed', id, ...observed(event) });
        say({ event: 'observe-ended', id, error: null });
      } catch (error) {
        say({ event: 'observe-ended', id, error: failure(error) });
      } finally {
        observers.delete(id);
      }
      return;
    }
    case 'stop-observe':
      observers.get(command.id)?.abort();
      return;
    case 'put-record':
    case 'update-record':
    case 'delete-record':
    case 'get-record': {
      const { id } = command;
      try {
        if (command.op === 'get-record') {
          const record = await connected().getRecord(command.name, command.key);
          say({
            event: 'record',
            id,
            found: record !== undefined,
            value: Buffer.from(record?.value ?? []).toString(),
            revision: (record?.revision ?? 0n).toString(),
          });
          return;
        }
        const records = connected().records(command.name, BigInt(command.token));
        const expected =
          'expectedRevision' in command && command.expectedRevision !== undefined
            ? { expectedRevision: BigInt(command.expectedRevision) }
            : {};
        if (command.op === 'delete-record') {
          say({ event: 'record-deleted', id, deleted: await records.delete(command.key, expected) });
        } else if (command.op === 'put-record') {
          const revision = await records.put(command.key, command.value, expected);
          say({ event: 'record-written', id, revision: revision.toString(), value: command.value });
        } else {
          const { add } = command;
          const written = await records.update(command.key, (current) =>
            String(Number(Buffer.from(current?.value ?? '0').toString()) + add),
          );
          say({
            event: 'record-written',
            id,
            revision: written.revision.toString(),
            value: Buffer.from(written.value).toString(),
          });
        }
      } catch (error) {
        say({ event: 'error', id, ...failure(error) });
      }
      return;
    }
    case 'close':
      connected().close();
      say({ event: 'closed' });
      return;
  }
}

say({ event: 'ready', client: 'typescript' });
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue;
  const command = JSON.parse(line) as Command;
  // Commands run side by side: a wait must not hold up the cancel or close that ends it.
  perform(command).catch((error: unknown) => {
    process.stderr.write(`driver failure on ${line}: ${String(error)}\n`);
    process.exit(2);
  });
}
// End of input: the suite is done with this driver.
client?.close();
process.exit(0);
