/*
 * `lockstream run` and `lockstream elect` (alias `leader`): hold a lock, or lead an election,
 * while a command runs, stop the command if the lock or the leadership is lost or revoked, and
 * exit with the command's code.
 */
import { spawn } from 'node:child_process';
import { hostname, userInfo } from 'node:os';
import { constants } from 'node:os';
import { Option, type Command } from 'commander';
import {
  LockClientError,
  LockTimeoutError,
  type Leadership,
  type Lock,
  type LockMode,
} from '../client/index.js';
import { durationArgument, EXIT } from './client-basics.js';
import {
  addConnectionOptions,
  connect,
  ConnectionOptionsError,
  type ConnectionOptions,
} from './connection.js';

interface RunOptions extends ConnectionOptions {
  readonly mode?: string;
  /** A semaphore's capacity (the mode is then semaphore) and this run's share of it. */
  readonly limit?: number;
  readonly weight?: number;
  /** More locks taken with NAME as one multi-lock. */
  readonly and?: string[];
  readonly wait?: number;
  readonly owner: string;
  readonly value?: string;
  readonly killAfter: number;
  readonly resumeGrace: number;
  /** Campaign in the election NAME instead of taking a lock (`elect`). */
  readonly elect?: boolean;
}

/** What the command runs under: a lock, or an election's leadership seen as one. */
type Held = Pick<
  Lock,
  'token' | 'tokens' | 'lost' | 'revokeRequested' | 'downgrade' | typeof Symbol.asyncDispose
>;

const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;

/**
 * `lockstream run NAME -- command args...`: acquire, run the command while holding the lock,
 * release when it exits, exit with its code (as flock(1), `etcdctl lock`, `consul lock`).
 * Unlike `etcdctl lock`, a lost or revoked lock stops the command: its whole process group
 * (grandchildren behind `sh -c` included) gets SIGTERM, then SIGKILL after `--kill-after`.
 */
export function addRunCommand(program: Command, env: Readonly<Record<string, string | undefined>>): void {
  holdOptions(
    addConnectionOptions(program.command('run'), env)
      .description(
        'hold a lock while a command runs: acquire, run it, release when it exits, exit with its code',
      )
      .argument('<name>', 'the lock')
      .argument('<command...>', 'the command and its arguments (after --)')
      .option('--mode <mode>', 'mutex, read, write or semaphore (with --limit)')
      .option(
        '--limit <n>',
        'a semaphore: at most N units of NAME are held at once (every run on NAME names the same N)',
        countArgument('--limit'),
      )
      .option('--weight <n>', "with --limit: this run's share of it (default 1)", countArgument('--weight'))
      .option(
        '--and <name>',
        'one more lock, taken together with NAME and the others, all or none (repeat it); a multi-lock never deadlocks with another',
        (value: string, previous: string[] = []) => [...previous, value],
      )
      .option('--value <text>', 'published with the lock while the command runs (see `lockstream watch`)'),
  ).action(async (name: string, command: string[], options: RunOptions) => {
    const problem = runOptionsProblem(options);
    if (problem !== undefined) program.error(`run: ${problem}`);
    process.exitCode = await runLocked('run', name, command, options, env);
  });

  // Leader election: the most common use of a lock, as an election (ElectionService.Campaign).
  holdOptions(
    addConnectionOptions(program.command('elect'), env)
      .alias('leader')
      .description(
        'run a command as the leader of election NAME: campaign, wait to be elected, run the command ' +
          'while leading (LOCKSTREAM_TERM is the term, its fencing token), resign when it exits; the ' +
          "command is stopped if the leadership is lost. `lockstream observe` shows each term and --value. Exits with the command's code",
      )
      .argument('<name>', 'the election')
      .argument('<command...>', 'the command and its arguments (after --)')
      .requiredOption('--value <text>', 'where to reach this leader, e.g. host:port'),
  ).action(async (name: string, command: string[], options: Omit<RunOptions, 'mode'>, self: Command) => {
    const label = self.parent?.args[0] === 'leader' ? 'leader' : 'elect';
    process.exitCode = await runLocked(label, name, command, { ...options, elect: true }, env);
  });
}

/** A leadership as the command's hold: its term is its token; it cannot be downgraded. */
function asHeld(name: string, leadership: Leadership): Held {
  return {
    token: leadership.term,
    tokens: [{ name, token: leadership.term }],
    lost: leadership.lost,
    revokeRequested: leadership.resignRequested,
    downgrade: () => Promise.reject(new Error('a leadership cannot be downgraded')),
    [Symbol.asyncDispose]: () => leadership[Symbol.asyncDispose](),
  };
}

/** What is wrong with `run`'s mode options together, or undefined. */
function runOptionsProblem({ mode, limit, weight }: RunOptions): string | undefined {
  if (mode !== undefined && !['mutex', 'read', 'write', 'semaphore'].includes(mode)) {
    return `--mode ${JSON.stringify(mode)}: expected mutex, read, write or semaphore`;
  }
  if (limit === undefined) {
    if (mode === 'semaphore') return "--mode semaphore needs --limit N (the semaphore's capacity)";
    if (weight !== undefined) return '--weight needs --limit (a weight is a share of a semaphore)';
  } else if (mode !== undefined && mode !== 'semaphore') {
    return `--limit makes a semaphore: it cannot be taken in ${mode} mode`;
  }
  return undefined;
}

/** A whole number of 1 or more (the server checks it against the other requests). */
function countArgument(flag: string): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < 1) {
      throw new Error(`${flag} ${JSON.stringify(value)}: expected a whole number of 1 or more`);
    }
    return Number(value);
  };
}

/** What `run` and `leader` share: how long to wait, who asks, and how the command is stopped. */
function holdOptions(command: Command): Command {
  return command
    .option(
      '--wait <duration>',
      `give up after this long in the queue (exit ${EXIT.timedOut})`,
      durationArgument('--wait'),
    )
    .option('--owner <text>', 'who is asking, shown to operators', defaultOwner())
    .addOption(
      new Option(
        '--kill-after <duration>',
        'when the lock is lost or revoked: SIGTERM the command, then SIGKILL it after this long',
      )
        .argParser(durationArgument('--kill-after'))
        // Shown as a duration in --help, as it is written.
        .default(10_000, '10s'),
    )
    .addOption(
      new Option(
        '--resume-grace <duration>',
        'how long the server keeps the lock for this process after the connection breaks (the ' +
          'command keeps running meanwhile); 0: the lock, and the command, end at once',
      )
        .argParser(durationArgument('--resume-grace'))
        .default(5_000, '5s'),
    );
}

/** `run` or `leader` (`label`, for messages): hold `name` while `command` runs. */
async function runLocked(
  label: string,
  name: string,
  command: string[],
  options: RunOptions,
  env: Readonly<Record<string, string | undefined>>,
): Promise<number> {
  let client;
  try {
    client = connect(options, env, { resumeGraceMs: options.resumeGrace });
  } catch (error) {
    if (!(error instanceof ConnectionOptionsError)) throw error;
    process.stderr.write(`lockstream ${label}: ${error.message}\n`);
    return EXIT.usage;
  }
  const interrupted = new AbortController();
  const onWaitSignal = (signal: NodeJS.Signals): void => interrupted.abort(signal);
  for (const signal of FORWARDED_SIGNALS) process.on(signal, onWaitSignal);
  // Removed only once the command's forwarding is in place (or nothing is run): with no listener
  // a signal ends this process the default way, and the command would run on without the lock.
  const stopWaitSignals = (): void => {
    for (const signal of FORWARDED_SIGNALS) process.off(signal, onWaitSignal);
  };
  let stopCommand: (why: string) => void = () => {};
  let lock: Held;
  const mode = (options.mode ?? (options.limit === undefined ? 'mutex' : 'semaphore')) as LockMode;
  const shape = {
    mode,
    ...(options.limit === undefined ? {} : { limit: options.limit }),
    ...(options.weight === undefined ? {} : { weight: options.weight }),
  };
  const more = options.and ?? [];
  try {
    const asked = {
      waitTimeout: options.wait,
      owner: options.owner,
      ...(options.value === undefined ? {} : { value: options.value }),
      signal: interrupted.signal,
      onQueued: (ahead: number) => {
        if (process.stderr.isTTY)
          process.stderr.write(`\rwaiting for lock "${name}": ${ahead} ahead\u001b[K`);
      },
      onRevokeRequested: ({ reason }: { reason: string }) =>
        stopCommand(`lock "${name}" was revoked: ${reason || 'no reason given'}`),
      // A broken connection, or a failover to another --server endpoint: the command runs on
      // unless the grace passes without a resume (then `lost` stops it).
      onInDoubt: () =>
        process.stderr.write(
          `lockstream ${label}: connection to the server broken; lock "${name}" is in doubt while the session is resumed (the command keeps running)\n`,
        ),
      onConfirmed: () =>
        process.stderr.write(`lockstream ${label}: session resumed; lock "${name}" confirmed\n`),
    };
    if (options.elect) {
      const { onRevokeRequested, value: _value, ...campaigning } = asked;
      lock = asHeld(
        name,
        await client.campaign(name, options.value ?? '', {
          ...campaigning,
          onResignRequested: onRevokeRequested,
        }),
      );
    } else {
      lock =
        more.length === 0
          ? await client.acquire(name, { ...shape, ...asked })
          : await client.acquireAll(
              [name, ...more].map((each) => ({ name: each, ...shape })),
              asked,
            );
    }
  } catch (error) {
    stopWaitSignals();
    client.close();
    if (interrupted.signal.aborted) return 128 + signalNumber(interrupted.signal.reason as NodeJS.Signals);
    if (error instanceof LockTimeoutError) {
      process.stderr.write(`lockstream ${label}: ${error.message}\n`);
      return EXIT.timedOut;
    }
    if (error instanceof LockClientError) {
      process.stderr.write(`lockstream ${label}: ${error.message}\n`);
      return EXIT.failed;
    }
    throw error;
  } finally {
    if (process.stderr.isTTY) process.stderr.write('\r\u001b[K');
  }
  // A signal that came as the lock was granted: the command is not started.
  if (interrupted.signal.aborted) {
    stopWaitSignals();
    await lock[Symbol.asyncDispose]();
    client.close();
    return 128 + signalNumber(interrupted.signal.reason as NodeJS.Signals);
  }

  // A command that is done writing keeps reading under the same lock, with no writer let in
  // between: `kill -USR1 $LOCKSTREAM_RUN_PID`.
  const onDowngradeSignal = (): void => {
    lock.downgrade().then(
      () => process.stderr.write(`lockstream ${label}: lock "${name}" downgraded to read\n`),
      (error: unknown) =>
        process.stderr.write(
          `lockstream ${label}: could not downgrade lock "${name}": ${error instanceof Error ? error.message : String(error)}\n`,
        ),
    );
  };
  // Before the command starts: it may signal at once, and a SIGUSR1 with no listener would
  // open Node.js's inspector instead.
  process.on('SIGUSR1', onDowngradeSignal);

  const [file = '', ...args] = command;
  const child = spawn(file, args, {
    stdio: 'inherit',
    // Its own process group, so that stopping it reaches everything it started.
    detached: true,
    env: {
      ...process.env,
      LOCKSTREAM_LOCK_NAME: name,
      LOCKSTREAM_FENCING_TOKEN: lock.token.toString(),
      // The term, for a leader (`elect`): the same number as its fencing token.
      ...(options.elect ? { LOCKSTREAM_ELECTION: name, LOCKSTREAM_TERM: lock.token.toString() } : {}),
      // Every lock's token, for a multi-lock (--and): {"name": "token", …}.
      LOCKSTREAM_FENCING_TOKENS: JSON.stringify(
        Object.fromEntries(lock.tokens.map(({ name: each, token }) => [each, token.toString()])),
      ),
      LOCKSTREAM_SERVER: options.server,
      // The command signals SIGUSR1 here to downgrade a write lock (see below).
      LOCKSTREAM_RUN_PID: String(process.pid),
    },
  });
  const group = (signal: NodeJS.Signals): void => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal);
    } catch {
      // The group is gone already.
    }
  };
  const forward = (signal: NodeJS.Signals): void => group(signal);
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
  // Only now, in the same synchronous stretch as the spawn: the command may have printed and been
  // signalled already (a listener is called later, from the event loop, when `child` is set).
  stopWaitSignals();
  let stoppedBecause: string | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  stopCommand = (why) => {
    if (stoppedBecause !== undefined) return;
    stoppedBecause = why;
    process.stderr.write(`lockstream ${label}: ${why}; stopping the command\n`);
    group('SIGTERM');
    killTimer = setTimeout(() => group('SIGKILL'), options.killAfter);
  };
  if (lock.revokeRequested)
    stopCommand(`lock "${name}" was revoked: ${lock.revokeRequested.reason || 'no reason given'}`);
  const onLost = (): void => stopCommand((lock.lost.reason as Error).message);
  lock.lost.addEventListener('abort', onLost, { once: true });

  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
    (resolve) => {
      child.once('error', (error) => resolve({ code: null, signal: null, error }));
      child.once('exit', (code, signal) => resolve({ code, signal }));
    },
  );
  clearTimeout(killTimer);
  for (const signal of FORWARDED_SIGNALS) process.off(signal, forward);
  process.off('SIGUSR1', onDowngradeSignal);
  lock.lost.removeEventListener('abort', onLost);
  // Whatever the command left running in its group must not outlive the lock.
  if (stoppedBecause !== undefined) group('SIGKILL');
  await lock[Symbol.asyncDispose]();
  client.close();
  if (exit.error) {
    process.stderr.write(
      `lockstream ${label}: could not run ${JSON.stringify(file)}: ${exit.error.message}\n`,
    );
    return 127;
  }
  if (stoppedBecause !== undefined) return EXIT.lockLost;
  return exit.code ?? 128 + signalNumber(exit.signal ?? 'SIGKILL');
}

function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 0;
}

function defaultOwner(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No user name (some containers).
  }
  return `${user}@${hostname()}:${process.pid}`;
}
